# Compatibility of the fork with unpatched Valkey, on sorted sets.
#
# The fork promises that users can move to it and back: an RDB file, a
# DUMP payload and the replication stream mean the same to both servers.
# This file runs our server next to the reference build of the same
# upstream (`make upstream`, build/upstream) and moves sorted sets of many
# shapes between the two, both ways: through RDB files, through
# DUMP/RESTORE, and through replication with writes running during the
# initial sync. After every move each key's DEBUG DIGEST-VALUE, its ZCARD
# and a few ZRANGE ... WITHSCORES are compared between the servers; the
# encodings and memory figures are not, as those are ours to change.
#
# The reference server is started by the framework's own start_server,
# through its `start-other-server` option, which runs $::other_server_path
# instead of src/valkey-server (fork_server, tests/helpers/fork-reference.tcl).

source tests/helpers/fork-reference.tcl
if {![fork_reference_present {"fork" "compat"}]} return

# Big sets are filled on the server: ::fork_zfill_lua.
source tests/helpers/fork-zfill.tcl

# A ZADD of `n` members named <prefix><i>, the score of each from
# `scoreexpr` (an expression of $i).
proc compat_zadd {key n prefix scoreexpr} {
    set cmd [list zadd $key]
    for {set i 0} {$i < $n} {incr i} {
        lappend cmd [expr $scoreexpr] $prefix$i
    }
    return $cmd
}

# The dataset, as a list of commands, made once so that both servers get
# the very same data. Sizes around the listpack limits (128 entries, 64
# bytes per member) come in both encodings. The 100,000 and 1,000,000
# member sets are built by ::fork_zfill_lua, in chunks.
proc compat_dataset {} {
    set specials {-0.0 0 +inf -inf 1e308 -1.7976931348623157e308 4.9e-324
                  0.1 3.141592653589793 -2.5e-10 9007199254740993 -7}
    set cmds {}

    lappend cmds [compat_zadd zs:lp:10 10 a {$i * 3 - 10}]
    lappend cmds [compat_zadd zs:lp:128 128 member: {$i * 0.37 - 20}]
    lappend cmds [compat_zadd zs:sl:129 129 member: {$i * 1000003 % 1009}]
    lappend cmds [compat_zadd zs:sl:1000 1000 m {
        ($i % 3 == 0) ? ($i * 1.5e296) : (($i % 3 == 1) ? (-$i * 1.25e-300) : ($i / 7.0))}]

    # Special scores, in a listpack and (with fillers) in a skiplist.
    foreach {key fill} {zs:lp:special 0 zs:sl:special 200} {
        set cmd [list zadd $key]
        set j 0
        foreach s $specials { lappend cmd $s special:[incr j] }
        for {set i 0} {$i < $fill} {incr i} { lappend cmd [expr {$i - 100}] filler:$i }
        lappend cmds $cmd
    }

    # Equal scores: one score for all, and five scores for 500 members,
    # inserted in an order unrelated to the members' order.
    set cmd [list zadd zs:lp:ties]
    for {set i 0} {$i < 60} {incr i} { lappend cmd 1 [format t%03d [expr {$i * 37 % 60}]] }
    lappend cmds $cmd
    set cmd [list zadd zs:sl:ties]
    for {set i 0} {$i < 500} {incr i} { lappend cmd [expr {$i % 5 - 2}] [format t%03d [expr {$i * 7 % 500}]] }
    lappend cmds $cmd

    # Member sizes: 0 and 64 bytes keep a listpack, 65 and 10,000 do not.
    lappend cmds [list zadd zs:lp:len 1 {} 2 [string repeat a 64] 3 b 3 c]
    lappend cmds [list zadd zs:sl:len65 1 {} 2 [string repeat b 65] 3 b]
    lappend cmds [list zadd zs:sl:len10k 1 {} 2 [string repeat c 10000] 2 [string repeat d 9999] 0 x]

    # Binary members, every byte value included.
    set cmd [list zadd zs:lp:binary 0 "\x00" 1 "\xff" 2 "a\x00b" 3 "\r\n" 4 "\x80\x7f"]
    for {set i 0} {$i < 20} {incr i} { lappend cmd [expr {$i % 4}] [randstring 0 40 binary] }
    lappend cmds $cmd
    set cmd [list zadd zs:sl:binary]
    for {set i 0} {$i < 256} {incr i} { lappend cmd [expr {$i % 16}] [format %c $i][randstring 0 60 binary] }
    lappend cmds $cmd

    # Geo sets (sorted sets underneath): a listpack and a skiplist.
    lappend cmds [list geoadd geo:small 13.361389 38.115556 Palermo 15.087269 37.502669 Catania \
                      -122.4194 37.7749 SanFrancisco 139.6917 35.6895 Tokyo 0 0 Null]
    set cmd [list geoadd geo:big]
    for {set i 0} {$i < 500} {incr i} {
        lappend cmd [expr {fmod($i * 7.123, 358) - 179}] [expr {fmod($i * 0.331, 168) - 84}] place:$i
    }
    lappend cmds $cmd

    # The big ones.
    lappend cmds [list eval $::fork_zfill_lua 1 zs:big:100k 1 100000 spread 0]
    for {set first 1} {$first <= 1000000} {incr first 250000} {
        lappend cmds [list eval $::fork_zfill_lua 1 zs:big:1m $first [expr {$first + 249999}] ties 0]
    }
    return $cmds
}

# DEBUG DIGEST-VALUE does not see the order of a sorted set (it adds up
# its members' digests), so this script hashes what ZRANGE 0 -1 WITHSCORES
# returns, in order, read in chunks: members, order and scores as a client
# sees them.
set ::compat_order_script {
    local key, step, h, i = KEYS[1], 10000, '', 0
    while true do
        local chunk = redis.call('zrange', key, i, i + step - 1, 'withscores')
        if #chunk == 0 then return h end
        h = redis.sha1hex(h .. table.concat(chunk, '\n'))
        i = i + step
    end
}

proc compat_order_digest {level key} {
    r $level eval $::compat_order_script 1 $key
}

# Asserts that the servers at levels `a` and `b` hold the same `keys`: same
# digests, cardinality, and some ranges with their scores.
proc compat_assert_same {a b keys} {
    foreach k $keys {
        assert_equal [r $a debug digest-value $k] [r $b debug digest-value $k] "DIGEST-VALUE of $k"
        assert_equal [compat_order_digest $a $k] [compat_order_digest $b $k] "order of $k"
        set card [r $a zcard $k]
        assert_equal $card [r $b zcard $k] "ZCARD of $k"
        set mid [expr {$card / 2}]
        foreach range [list {0 9} {-10 -1} [list $mid [expr {$mid + 9}]]] {
            assert_equal [r $a zrange $k {*}$range withscores] [r $b zrange $k {*}$range withscores] \
                "ZRANGE $k $range"
        }
        assert_equal [r $a zrange $k +inf -inf byscore rev limit 0 5 withscores] \
                     [r $b zrange $k +inf -inf byscore rev limit 0 5 withscores] "ZRANGE $k BYSCORE REV"
    }
}

# Replaces the dump.rdb of the server at level `to` with the one the server
# at level `from` saves.
proc compat_copy_rdb {from to} {
    set src [file join [lindex [r $from config get dir] 1] [lindex [r $from config get dbfilename] 1]]
    set dst [file join [lindex [r $to config get dir] 1] [lindex [r $to config get dbfilename] 1]]
    file copy -force $src $dst.incoming
    file rename -force $dst.incoming $dst
}

# A write on the primary at `level`: ZADD, ZINCRBY, ZREM or ZREMRANGEBYRANK
# on one of `keys`, with members old and new. Replies are not checked: an
# increment may make a NaN, which both servers refuse alike.
proc compat_random_write {level keys} {
    set k [lindex $keys [randomInt [llength $keys]]]
    set member [lindex {m: member: t w: special:} [randomInt 5]][randomInt 1000]
    if {[randomInt 50] == 0} { set member [string repeat $member 10] }
    set score [lindex [list [randomSignedInt 1000] [expr {rand() * 1e6 - 5e5}] -0.0 +inf -inf] [randomInt 5]]
    switch [randomInt 5] {
        0 { catch {r $level zadd $k $score $member} }
        1 { catch {r $level zadd $k [randomSignedInt 100] w:[randomInt 100000] $score $member} }
        2 { catch {r $level zincrby $k [expr {rand() * 10 - 5}] $member} }
        3 { catch {r $level zrem $k $member m:[randomInt 1000000]} }
        4 {
            set start [randomSignedInt 200]
            catch {r $level zremrangebyrank $k $start [expr {$start + [randomInt 3]}]}
        }
    }
}

set ::compat_cmds [compat_dataset]
set ::compat_keys [fork_cmd_keys $::compat_cmds]

tags {"fork" "compat" "external:skip" "needs:debug"} {

fork_server reference {} {
    fork_server fork {} {
        test {Same commands give the same sorted sets on both servers} {
            assert_equal $::fork_ref_server [s -1 executable]
            assert_equal [file normalize src/valkey-server] [s executable]
            fork_load_cmds -1 $::compat_cmds
            fork_load_cmds 0 $::compat_cmds
            # The shapes are what their names say, on the reference.
            foreach k $::compat_keys {
                set enc [expr {[string match *:lp:* $k] || $k eq "geo:small" ? "listpack" : "skiplist"}]
                assert_equal $enc [r -1 object encoding $k] "encoding of $k"
            }
            assert_equal 1000000 [r zcard zs:big:1m]
            assert_equal 129 [r -1 zcard zs:sl:129]
            compat_assert_same -1 0 $::compat_keys
            assert_equal [r -1 debug digest] [r debug digest]
        }

        # A ZADD that creates a set past the listpack is built in one
        # sorted pass when its members are distinct, and member by member
        # when one repeats: both must answer and end as the reference does,
        # under every flag.
        test {ZADD creating a big set answers as the reference, with and without repeats} {
            foreach flags {{} {ch} {nx} {nx ch} {gt} {gt ch} {lt} {lt ch} {xx}} {
                for {set round 0} {$round < 20} {incr round} {
                    set n [expr {$round % 2 ? 3 + int(rand() * 10) : 129 + int(rand() * 200)}]
                    set repeats [expr {$round % 4 >= 2}]
                    set args {}
                    for {set i 0} {$i < $n} {incr i} {
                        set m [expr {$repeats && rand() < 0.1 ? "m:[expr {int(rand() * 10)}]" : "m:$round:$i"}]
                        if {rand() < 0.05} {append m [string repeat x 70]}
                        lappend args [expr {int(rand() * 20) - 10}] $m
                    }
                    r -1 del newz
                    r del newz
                    assert_equal [r -1 zadd newz {*}$flags {*}$args] [r zadd newz {*}$flags {*}$args] \
                        "ZADD newz $flags of $n members"
                    assert_equal [r -1 zrange newz 0 -1 withscores] [r zrange newz 0 -1 withscores]
                    assert_equal [r -1 debug digest-value newz] [r debug digest-value newz]
                }
            }
            r -1 del newz
            r del newz
        }

        test {RDB files move both ways between the reference and the fork} {
            set digest [r debug digest]
            r -1 save
            r save
            # Each server loads the file the other one wrote.
            set ref_dir [lindex [r -1 config get dir] 1]
            set fork_dir [lindex [r config get dir] 1]
            file copy -force $ref_dir/dump.rdb $fork_dir/from-reference.rdb
            file copy -force $fork_dir/dump.rdb $ref_dir/from-fork.rdb
            file rename -force $fork_dir/from-reference.rdb $fork_dir/dump.rdb
            file rename -force $ref_dir/from-fork.rdb $ref_dir/dump.rdb
            r -1 debug reload nosave
            r debug reload nosave
            assert_equal $digest [r -1 debug digest]
            assert_equal $digest [r debug digest]
            compat_assert_same -1 0 $::compat_keys
            # And once more from files saved by loaded data.
            r save
            compat_copy_rdb 0 -1
            r -1 debug reload nosave
            assert_equal $digest [r -1 debug digest]
            r -1 save
            compat_copy_rdb -1 0
            r debug reload nosave
            assert_equal $digest [r debug digest]
        }

        # DUMP on one side, RESTORE under another name on the other side.
        # Since 9.0 a payload is always sanitized in full (the
        # sanitize-dump-payload option is gone), so one pass per direction.
        set names {-1 reference 0 fork}
        foreach {from to} {-1 0  0 -1} {
            test "DUMP on the [dict get $names $from], RESTORE on the [dict get $names $to]" {
                foreach k $::compat_keys {
                    r $to restore restored:$k 0 [r $from dump $k]
                    assert_equal [r $from debug digest-value $k] [r $to debug digest-value restored:$k] \
                        "DIGEST-VALUE of $k restored"
                    assert_equal [compat_order_digest $from $k] [compat_order_digest $to restored:$k] \
                        "order of $k restored"
                    assert_equal [r $from zrange $k -inf +inf byscore limit 0 20 withscores] \
                        [r $to zrange restored:$k -inf +inf byscore limit 0 20 withscores]
                    assert_equal [r $from zcard $k] [r $to zcard restored:$k]
                    r $to del restored:$k
                }
            }
        }
    }
}

# Replication both ways, the initial sync stretched so that the writes on
# the primary land while it runs. One direction syncs through a file on
# disk, the other diskless, into a replica that loads from the socket.
foreach {primary replica diskless} {reference fork no  fork reference yes} {
    fork_server $primary {} {
        fork_load_cmds 0 $::compat_cmds
        r config set repl-diskless-sync $diskless
        # A delay per key saved: the sync takes about two seconds.
        r config set rdb-key-save-delay 100000

        fork_server $replica {} {
            if {$diskless} { r config set repl-diskless-load swapdb }

            test "Replication from the $primary primary to the $replica replica, writes during the sync" {
                assert_equal [expr {$primary eq "reference" ? $::fork_ref_server : [file normalize src/valkey-server]}] \
                    [s -1 executable]
                r replicaof [srv -1 host] [srv -1 port]
                wait_for_condition 500 20 {
                    [s master_link_status] eq "down" && [s master_sync_in_progress] == 1
                } else {
                    fail "The replica did not start syncing"
                }
                set during 0
                set deadline [expr {[clock seconds] + 60}]
                while {[s master_link_status] ne "up"} {
                    if {[clock seconds] > $deadline} { fail "The initial sync did not finish in 60 s" }
                    for {set i 0} {$i < 20} {incr i} { compat_random_write -1 $::compat_keys }
                    incr during 20
                }
                assert_morethan $during 100
                r -1 config set rdb-key-save-delay 0

                for {set i 0} {$i < 3000} {incr i} { compat_random_write -1 $::compat_keys }
                wait_for_ofs_sync [srv -1 client] [srv 0 client]
                assert_equal [r -1 debug digest] [r debug digest]
                compat_assert_same -1 0 $::compat_keys
                assert_equal [r -1 dbsize] [r dbsize]
            }
        }
    }
}

}
