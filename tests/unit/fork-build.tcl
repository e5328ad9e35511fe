# The fork's own build: the server is assembled from the upstream that
# deps/valkey.pin names. The suite runs inside build/valkey, two levels
# below the repository.
start_server {tags {"fork"}} {
    test {Server reports the upstream version deps/valkey.pin names} {
        set fd [open [file join [pwd] .. .. deps valkey.pin]]
        regexp {VALKEY_VERSION=([0-9.]+)} [read $fd] -> pinned
        close $fd
        assert_equal $pinned [s valkey_version]
        assert_equal valkey [s server_name]
    }
}
