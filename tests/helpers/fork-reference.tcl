# Shared by our Tcl tests that run the unpatched reference build (`make
# upstream`) next to ours: integration/fork-compat, fork-replydiff,
# fork-upgrade. The suite runs inside build/valkey, two levels below the
# repository.

set ::fork_ref_server [file normalize ../../build/upstream/src/valkey-server]

# Whether the reference build is there; when it is not, a failing test
# under `tags` says so (the caller then returns).
proc fork_reference_present {tags} {
    if {[file executable $::fork_ref_server]} { return 1 }
    tags $tags {
        test {Reference build is present} {
            fail "No reference server at $::fork_ref_server: run make upstream"
        }
    }
    return 0
}

# Runs start_server with `code` against our build (kind `fork`) or the
# reference (kind `reference`, through the framework's start-other-server
# option, which runs $::other_server_path). The code runs in the caller's
# scope, as it does with start_server.
proc fork_server {kind options code} {
    if {$kind eq "fork"} {
        return [uplevel 1 [list start_server $options $code]]
    }
    set saved $::other_server_path
    set ::other_server_path $::fork_ref_server
    try {
        return [uplevel 1 [list start_server [concat $options {start-other-server 1}] $code]]
    } finally {
        set ::other_server_path $saved
    }
}

# A dataset as a list of commands (`eval` of a fill script or a plain
# command), as fork-compat and fork-setcompat build theirs: the keys it
# writes, in order, and its load into server `level` (as `r` takes it).
proc fork_cmd_keys {cmds} {
    set keys {}
    foreach cmd $cmds {
        set k [expr {[lindex $cmd 0] eq "eval" ? [lindex $cmd 3] : [lindex $cmd 1]}]
        if {$k ni $keys} { lappend keys $k }
    }
    return $keys
}

proc fork_load_cmds {level cmds} {
    foreach cmd $cmds { r $level {*}$cmd }
}
