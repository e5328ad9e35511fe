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
