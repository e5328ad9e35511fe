# The fork's own build: the server is assembled from the upstream that
# deps/valkey.pin names. The suite runs inside build/valkey, two levels
# below the repository.
start_server {tags {"fork"}} {
    test {Server reports the upstream version deps/valkey.pin names} {
        set fd [open [file join [pwd] .. .. deps valkey.pin]]
        set pin [read $fd]
        close $fd
        regexp {VALKEY_VERSION=([0-9.]+)} $pin -> pinned
        regexp {VALKEY_SERIES=([0-9.]+)} $pin -> series
        set version [s valkey_version]
        # When Debian no longer serves the pinned version, the fetch builds
        # the newest release of the same series it serves (deps/README.md).
        if {$version ne $pinned} {
            assert_match "$series.*" $version
            assert {[package vcompare $version $pinned] > 0}
        }
        assert_equal valkey [s server_name]
    }
}

# Our fixes of upstream's advisories (patches/security/) step aside for
# upstream's own fix: in the release named in the patch's header or a later
# one, or in a Debian security patch that names the advisory (deps/README.md).
start_server {tags {"fork"}} {
    test {A security patch of ours steps aside for upstream's own fix} {
        set root [file join [pwd] .. ..]
        set tree [file join $root utils tree.sh]
        set name GHSA-f4q9-j22m-xqq9.diff
        assert_match "*GHSA-f4q9-j22m-xqq9: ours (patches/security/$name)*" [exec $tree security]
        assert_equal "ours (patches/security/$name)" [exec $tree security-carrier $name 9.1.2]
        assert_match "upstream's own fix (upstream 9.1.3;*" [exec $tree security-carrier $name 9.1.3]
        assert_match "upstream's own fix (upstream 9.1.12;*" [exec $tree security-carrier $name 9.1.12]
        set dir [tmpdir fork-security]
        set naming [file join $dir CVE-2026-00001.patch]
        set other [file join $dir CVE-2026-00002.patch]
        set fd [open $naming w]
        puts $fd "Bug: https://github.com/valkey-io/valkey/security/advisories/GHSA-f4q9-j22m-xqq9"
        close $fd
        set fd [open $other w]
        puts $fd "Description: another flaw"
        close $fd
        assert_equal "upstream's own fix (Debian's CVE-2026-00001.patch)" \
            [exec $tree security-carrier $name 9.1.2 $other $naming]
        assert_equal "ours (patches/security/$name)" [exec $tree security-carrier $name 9.1.2 $other]
    }
}
