# Compatibility of the fork with unpatched Valkey, on big sets (issue #19).
#
# A set past set-max-intset-entries / set-max-listpack-entries lives in the
# fork's own packed encoding (OBJECT ENCODING "btree") where upstream keeps
# a hashtable, and the fork promises that RDB files, DUMP payloads and the
# replication stream still mean the same to both servers. This file runs our
# server next to the reference build of the same upstream (`make upstream`,
# build/upstream, started through fork_server of
# tests/helpers/fork-reference.tcl) and moves sets between the two, both
# ways:
#   - RDB: one server SAVEs, a fresh server of the other kind starts on that
#     file (no DEBUG RELOAD anywhere), and what that one saves starts a
#     fresh server of the first kind again;
#   - DUMP on one, RESTORE on the other;
#   - replication, ours the replica of the reference and the reference the
#     replica of ours, with SADD/SREM/SPOP/SMOVE on the primary while the
#     initial sync runs (one SADD gives a big integer set a string).
# After every move each key's DEBUG DIGEST-VALUE, its SCARD and its sorted
# members are compared between the servers, and DEBUG DIGEST of the whole
# dataset. Encodings and memory figures are not compared: they are ours.
#
# The big sets come in three shapes, as issue #19 measures them: distinct
# random integers below 10^8, consecutive integers (here across zero), and
# random 24-character strings; beside them a set that is filled with
# integers and then gets string members (among them integers in spellings
# an intset refuses: 007, -0, +1, ...). Smaller sets cover the thresholds
# (512 integers, 128 strings, one past each), the whole signed 64-bit range,
# dense runs with holes, members from empty to 20 KB, and binary members.
#
# Size: the four big sets hold FORK_SETCOMPAT_BIG members each; 100,000 by
# default, 1,000,000 with --accurate or FORK_SETCOMPAT_BIG=1000000 (the
# replication of issue #19's 1M-member sets under writes).

source tests/helpers/fork-reference.tcl
if {![fork_reference_present {"fork" "compat" "setcompat"}]} return

# Big sets are filled on the server: ::fork_sfill_lua.
source tests/helpers/fork-sfill.tcl

set ::sc_big [expr {[info exists ::env(FORK_SETCOMPAT_BIG)] ? $::env(FORK_SETCOMPAT_BIG) :
                    ($::accurate ? 1000000 : 100000)}]
set ::sc_ref_check_rdb [file normalize ../../build/upstream/src/valkey-check-rdb]

# A random integer over the whole signed 64-bit range.
proc sc_int64 {} {
    expr {((int(rand() * 4294967296) << 32) | int(rand() * 4294967296)) - 9223372036854775808}
}

# The dataset, as a list of commands, made once so that both servers get
# the very same sets.
proc sc_dataset {n} {
    set cmds {}
    # The big ones, in the three shapes of issue #19, and the mixed one.
    lappend cmds [list eval $::fork_sfill_lua 1 set:int:rand rand 1 $n]
    lappend cmds [list eval $::fork_sfill_lua 1 set:int:seq seq [expr {-($n / 2)}] $n]
    lappend cmds [list eval $::fork_sfill_lua 1 set:str:rand str 3 $n]
    lappend cmds [list eval $::fork_sfill_lua 1 set:mixed rand 4 $n]
    lappend cmds [list sadd set:mixed 7 x 007 -0 +1 1.5 " 1" 0x10 1e3 {} \
                      9223372036854775807 9223372036854775808 -9223372036854775808 -9223372036854775809]

    # The thresholds (512 integers for an intset, 128 members for a
    # listpack): at each, and one past.
    foreach {key n kind} {set:int:512 512 int set:int:513 513 int set:str:128 128 str set:str:129 129 str} {
        set cmd [list sadd $key]
        for {set i 0} {$i < $n} {incr i} {
            lappend cmd [expr {$kind eq "int" ? $i * 7919 - 100000 : "s:$i"}]
        }
        lappend cmds $cmd
    }
    # An intset past the listpack's size that gets one string.
    set cmd [list sadd set:int:then:str]
    for {set i 0} {$i < 300} {incr i} { lappend cmd [expr {$i * 3}] }
    lappend cmds $cmd [list sadd set:int:then:str string]

    # The whole signed 64-bit range, and its edges.
    set cmd [list sadd set:int:wide -9223372036854775808 9223372036854775807 -9223372036854775807 \
                 0 -1 1 127 128 -128 -129 32767 32768 -32769 2147483647 2147483648 -2147483648 \
                 -2147483649 4294967295 4294967296 9007199254740993 -9007199254740993]
    for {set i 0} {$i < 3000} {incr i} { lappend cmd [sc_int64] }
    lappend cmds $cmd

    # Dense runs with holes: 1..20000 without multiples of 7, and a run far off.
    set cmd [list sadd set:int:dense]
    for {set i 1} {$i <= 20000} {incr i} { if {$i % 7} { lappend cmd $i } }
    for {set i 0} {$i < 100} {incr i} { lappend cmd [expr {1000000000000 + $i}] }
    lappend cmds $cmd

    # Strings of 0 to 100 characters.
    set cmd [list sadd set:str:varied {} a]
    for {set i 0} {$i < 5000} {incr i} { lappend cmd [randstring 0 100 alpha] }
    lappend cmds $cmd

    # Members past set-max-listpack-value (64 bytes): compressible and not
    # (the RDB compresses long strings with LZF), and one of 20 KB.
    set cmd [list sadd set:long short]
    for {set i 0} {$i < 20} {incr i} {
        lappend cmd [string repeat [format %c [expr {97 + $i}]] [expr {65 + $i * 10}]]
        lappend cmd [randstring 65 300 alpha]
    }
    lappend cmd [randstring 20000 20000 alpha]
    lappend cmds $cmd

    # Binary members: every byte value alone, then random ones.
    set cmd [list sadd set:bin]
    for {set i 0} {$i < 256} {incr i} { lappend cmd [format %c $i] }
    for {set i 0} {$i < 300} {incr i} { lappend cmd [randstring 1 40 binary] }
    lappend cmds $cmd
    return $cmds
}

# The test client writes a command in chunks of its channel's buffer (4 KB):
# a big SADD or RESTORE then waits on TCP's delayed ACK. One buffer holds
# a whole command.
proc sc_fast_client {level} {
    fconfigure [r $level channel] -buffersize 1048576
}

# Waits for the server at `level` to finish loading (1M-member sets take a
# while on two shared cores).
proc sc_wait_loaded {level} {
    wait_for_condition 600 100 {
        [catch {r $level ping}] == 0 && [s $level loading] == 0
    } else {
        fail "The server did not finish loading in 60 s"
    }
}

# Asserts that key `ka` at level `a` and key `kb` at level `b` hold the
# same set (or are both gone): TYPE, DEBUG DIGEST-VALUE, SCARD and the
# sorted members.
proc sc_assert_same_key {a ka b kb} {
    set type [r $a type $ka]
    assert_equal $type [r $b type $kb] "TYPE of $ka / $kb"
    # Writes may have emptied a small set, on both sides.
    if {$type eq "none"} return
    assert_equal set $type
    assert_equal [r $a debug digest-value $ka] [r $b debug digest-value $kb] "DIGEST-VALUE of $ka / $kb"
    set card [r $a scard $ka]
    assert_equal $card [r $b scard $kb] "SCARD of $ka / $kb"
    if {$card > 20000} {
        assert_equal [r $a eval $::fork_sorted_members_lua 1 $ka] [r $b eval $::fork_sorted_members_lua 1 $kb] \
            "sorted SMEMBERS of $ka / $kb"
        return
    }
    set ma [lsort [r $a smembers $ka]]
    set mb [lsort [r $b smembers $kb]]
    if {$ma ne $mb} {
        set i 0
        while {[lindex $ma $i] eq [lindex $mb $i]} { incr i }
        fail "sorted SMEMBERS of $ka / $kb differ at $i of [llength $ma] / [llength $mb]:\
              '[lindex $ma $i]' / '[lindex $mb $i]'"
    }
}

proc sc_assert_same {a b keys} {
    foreach k $keys { sc_assert_same_key $a $k $b $k }
    assert_equal [r $a debug digest] [r $b debug digest] "DEBUG DIGEST"
}

# Copies the RDB file the server at `level` saves into a new directory, and
# returns the directory.
proc sc_save_to_dir {level} {
    r $level save
    set src [file join [lindex [r $level config get dir] 1] [lindex [r $level config get dbfilename] 1]]
    set dir [tmpdir setcompat-rdb]
    file copy -force $src [file join $dir dump.rdb]
    return $dir
}

# Members new to a set, of its shape: random integers below 10^8, integers
# just past either end of the consecutive run, 24-character strings.
proc sc_new_members {key n} {
    set ms {}
    for {set i 0} {$i < $n} {incr i} {
        switch -glob $key {
            set:int:seq { lappend ms [expr {rand() < 0.5 ? -$::sc_big - [randomInt 1000] : $::sc_big + [randomInt 1000]}] }
            set:int:wide { lappend ms [sc_int64] }
            set:int:* { lappend ms [randomInt 100000000] }
            set:str:rand { lappend ms [randstring 24 24 simplealpha] }
            set:mixed { lappend ms [if {rand() < 0.7} { randomInt 100000000 } else { randstring 1 30 alpha }] }
            default { lappend ms [randstring 1 40 alpha] }
        }
    }
    return $ms
}

# A write on the primary at `level`: SADD of new members, SREM of members
# there (and of some that are not), SPOP with and without a count, SMOVE.
set ::sc_write_keys {set:int:rand set:int:seq set:str:rand set:mixed set:int:513 set:str:129
                     set:int:wide set:str:varied}
proc sc_random_write {level} {
    set k [lindex $::sc_write_keys [randomInt [llength $::sc_write_keys]]]
    switch [randomInt 7] {
        0 - 1 { r $level sadd $k {*}[sc_new_members $k [expr {1 + [randomInt 10]}]] }
        2 {
            set ms [r $level srandmember $k [expr {1 + [randomInt 8]}]]
            r $level srem $k {*}$ms {*}[sc_new_members $k 1]
        }
        3 { r $level spop $k }
        4 { r $level spop $k [expr {1 + [randomInt 40]}] }
        5 {
            set other [lindex $::sc_write_keys [randomInt [llength $::sc_write_keys]]]
            set m [r $level srandmember $k]
            if {$m ne {}} { r $level smove $k $other $m }
        }
        6 { r $level srem $k {*}[sc_new_members $k 3] }
    }
}

set ::sc_cmds [sc_dataset $::sc_big]
set ::sc_keys [fork_cmd_keys $::sc_cmds]
set ::sc_bigkeys {set:int:rand set:int:seq set:str:rand set:mixed}

tags {"fork" "compat" "setcompat" "external:skip" "needs:debug"} {

fork_server reference {} {
    fork_server fork {} {
        test "Same commands give the same sets on both servers ($::sc_big-member sets)" {
            assert_equal $::fork_ref_server [s -1 executable]
            assert_equal [file normalize src/valkey-server] [s executable]
            sc_fast_client -1
            sc_fast_client 0
            fork_load_cmds -1 $::sc_cmds
            fork_load_cmds 0 $::sc_cmds
            foreach k {set:int:rand set:int:seq set:str:rand} {
                assert_equal $::sc_big [r scard $k] "SCARD of $k"
            }
            assert_equal {1 1 1 1 1} [r smismember set:mixed 7 007 -0 {} -9223372036854775809]
            assert_equal [llength $::sc_keys] [r dbsize]
            # The shapes are what their names say, on the reference.
            foreach {k enc} {set:int:512 intset set:int:513 hashtable set:str:128 listpack
                             set:str:129 hashtable set:int:then:str hashtable set:long hashtable} {
                assert_equal $enc [r -1 object encoding $k] "encoding of $k on the reference"
            }
            foreach k $::sc_bigkeys { assert_equal hashtable [r -1 object encoding $k] }
            sc_assert_same -1 0 $::sc_keys
        }

        # Each way: a server SAVEs, a fresh server of the other kind starts
        # on the file (levels: -2 the reference, -1 ours, 0 the new one);
        # the new one SAVEs what it loaded, and a fresh server of the first
        # kind starts on that.
        foreach {from to} {reference fork  fork reference} {
            test "RDB saved by the $from starts a fresh $to, and back" {
                set fromlevel [expr {$from eq "reference" ? -1 : 0}]
                set dir [sc_save_to_dir $fromlevel]
                if {$from eq "fork"} {
                    # The reference's own checker accepts our file.
                    assert_match {*RDB looks OK*} [exec $::sc_ref_check_rdb [file join $dir dump.rdb]]
                }
                fork_server $to [list overrides [list dir $dir]] {
                    sc_fast_client 0
                    sc_wait_loaded 0
                    assert_equal [expr {$to eq "reference" ? $::fork_ref_server : [file normalize src/valkey-server]}] \
                        [s executable]
                    sc_assert_same [expr {$fromlevel - 1}] 0 $::sc_keys
                    set back [sc_save_to_dir 0]
                    fork_server $from [list overrides [list dir $back]] {
                        sc_fast_client 0
                        sc_wait_loaded 0
                        sc_assert_same [expr {$fromlevel - 2}] 0 $::sc_keys
                    }
                }
            }
        }

        # DUMP on one side, RESTORE under another name on the other side.
        # The payload is the one the other server makes of the same set: an
        # RDB set of the same type and length (members in another order).
        set names {-1 reference 0 fork}
        foreach {from to} {-1 0  0 -1} {
            test "DUMP on the [dict get $names $from], RESTORE on the [dict get $names $to]" {
                foreach k $::sc_keys {
                    set payload [r $from dump $k]
                    set theirs [r $to dump $k]
                    assert_equal [string index $theirs 0] [string index $payload 0] "RDB type of $k"
                    assert_equal [string length $theirs] [string length $payload] "DUMP length of $k"
                    r $to restore restored:$k 0 $payload
                    sc_assert_same_key $from $k $to restored:$k
                    # Over the other server's own copy of it, too.
                    r $to restore $k 0 $payload replace
                    sc_assert_same_key $from $k $to $k
                    r $to del restored:$k
                }
                assert_equal [r $from debug digest] [r $to debug digest]
            }
        }
    }
}

# Replication both ways, the initial sync stretched so that the writes on
# the primary land while it runs. One direction syncs through a file on
# disk, the other diskless, into a replica that loads from the socket.
foreach {primary replica diskless} {reference fork no  fork reference yes} {
    fork_server $primary {} {
        sc_fast_client 0
        fork_load_cmds 0 $::sc_cmds
        r config set repl-diskless-sync $diskless
        # A delay per key saved: the sync takes about two seconds more.
        r config set rdb-key-save-delay 150000

        fork_server $replica {} {
            sc_fast_client 0
            if {$diskless} { r config set repl-diskless-load swapdb }

            test "Replication from the $primary primary to the $replica replica, $::sc_big-member sets, writes during the sync" {
                assert_equal [expr {$primary eq "reference" ? $::fork_ref_server : [file normalize src/valkey-server]}] \
                    [s -1 executable]
                r replicaof [srv -1 host] [srv -1 port]
                wait_for_condition 500 20 {
                    [s master_link_status] eq "down" && [s master_sync_in_progress] == 1
                } else {
                    fail "The replica did not start syncing"
                }
                set during 0
                set converted 0
                set deadline [expr {[clock seconds] + 120}]
                # The primary says when the sync is over (a replica loading
                # from a socket answers INFO only now and then).
                while {![string match {*slave0:*state=online*} [r -1 info replication]]} {
                    if {[clock seconds] > $deadline} { fail "The initial sync did not finish in 120 s" }
                    for {set i 0} {$i < 20} {incr i} { sc_random_write -1 }
                    incr during 20
                    # Once, halfway: a big set of integers (one the random
                    # writes leave alone) gets a string.
                    if {!$converted && $during >= 200} {
                        r -1 sadd set:int:dense now-a-string
                        set converted 1
                    }
                }
                assert_morethan $during 200
                r -1 config set rdb-key-save-delay 0
                wait_for_condition 600 100 {
                    [s master_link_status] eq "up"
                } else {
                    fail "The replica's link did not come up"
                }

                for {set i 0} {$i < 2000} {incr i} { sc_random_write -1 }
                wait_for_ofs_sync [srv -1 client] [srv 0 client]
                assert_equal 1 [r sismember set:int:dense now-a-string]
                sc_assert_same -1 0 $::sc_keys
                assert_equal [r -1 dbsize] [r dbsize]
            }
        }
    }
}

}
