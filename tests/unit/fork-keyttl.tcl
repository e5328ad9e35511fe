# A key's expire time in a 4-byte field where src/keyttl.c can encode it
# (issue #45): what a user sees stays upstream's, and the field is smaller.
#
# - Memory: W2's 16-byte key with a 16-byte value takes 48 bytes with no
#   TTL and with a TTL of a day (upstream: 56, its 8-byte field crossing a
#   size class); sds5 headers for the key (no header-size byte) and the
#   value leave room for the field. A 20-byte value takes 56 with a time
#   that takes the 8-byte form. A value embeds with a short field where an
#   8-byte one would push it past object.c's 256 bytes.
# - Four tags hold four generations: times in four windows far apart take
#   short fields, a fifth takes the long form, and every PEXPIRETIME is
#   exact. A key whose short field cannot hold its new time moves to a long
#   one; active expiry still finds it (the expires table follows the move).
# - PEXPIREAT's whole range, the past included.
# - DEBUG RELOAD, DUMP/RESTORE ABSTTL and an AOF rewrite keep every time.
# - With the reference build (`make upstream`): an RDB saved by either
#   server, with short and long fields, starts the other with the same
#   times and the same digest.

source tests/helpers/fork-reference.tcl

set ::kt_day 86400000

# The tests flush with FLUSHALL SYNC: a lazy flush frees the last test's
# objects in the background, and until it has, the tags their fields name
# stay taken, which changes the field a new key's time gets (a run beside
# other tests saw a fifth window take a freed tag: 48 bytes, not 56).

# Times of the fields the tests make: within a day of now (short), in four
# windows 20 days apart (each takes its own tag), and a fifth window.
proc kt_window_time {i} {
    expr {[clock milliseconds] + $i * 20 * $::kt_day + 3600000}
}

# Every key's PEXPIRETIME, as a dict.
proc kt_times {{level 0}} {
    set times {}
    foreach k [lsort [r $level keys *]] {
        dict set times $k [r $level pexpiretime $k]
    }
    return $times
}

# A mix of keys: most with a time within days, some with none, some far
# off, a few at each edge of PEXPIREAT's range that a live key can hold.
proc kt_fill {n {level 0}} {
    set now [clock milliseconds]
    for {set i 0} {$i < $n} {incr i} {
        set v [string repeat [format %c [expr {97 + $i % 26}]] [expr {$i % 90}]]
        switch [expr {$i % 7}] {
            0 { r $level set k:$i $v }
            1 { r $level set k:$i $v PXAT [expr {$now + $::kt_day * 400 + $i}] }
            2 { r $level set k:$i $v PXAT [expr {$now + $::kt_day * 60 + $i}] }
            default { r $level set k:$i $v PXAT [expr {$now + 1000000 + $i * 997}] }
        }
    }
    r $level set k:max v
    r $level pexpireat k:max 9223372036854775807
    r $level set k:int 12345 PXAT [expr {$now + $::kt_day}]
    r $level hset k:hash f v
    r $level pexpireat k:hash [expr {$now + 2 * $::kt_day}]
}

# MEMORY USAGE in jemalloc's size classes (the server's allocator). Under
# the sanitizers' allocator (`make test-san`) sizes are exact, not classes,
# and only the times the keys hold are checked.
proc kt_assert_usage {classbytes key} {
    if {[string match {*jemalloc*} [s mem_allocator]]} {
        assert_equal $classbytes [r memory usage $key]
    }
}

start_server {tags {"fork" "expire"}} {
    test {A TTL of a day costs W2's key (16 bytes, 16-byte value) nothing (4-byte field)} {
        r flushall sync
        set v [string repeat x 16]
        # 8 bytes of header, key and value with sds5 headers (no header-size
        # byte): 44, and the 4 left in the 48-byte class hold a short field.
        r set key:000012345678 $v
        r set key:000012345679 $v EX 86400
        kt_assert_usage 48 key:000012345678
        kt_assert_usage 48 key:000012345679
        # The allocation's slack became a field: EXPIRE takes it in place.
        r expire key:000012345678 3600
        kt_assert_usage 48 key:000012345678
        assert_range [r ttl key:000012345678] 3590 3600
        r persist key:000012345678
        assert_equal -1 [r ttl key:000012345678]
        assert_equal $v [r get key:000012345679]
        assert_encoding embstr key:000012345679
    }

    test {A value that embeds beside a short field stays embedded with a TTL} {
        r flushall sync
        # 8 + key 1+13+1 + value 3+225+1 = 252 without a field: 260 with an
        # 8-byte one (past object.c's 256: a separate value), 256 with a
        # 4-byte one.
        set v [string repeat t 225]
        r set KEY:123456789 $v EX 86400
        assert_encoding embstr KEY:123456789
        kt_assert_usage 256 KEY:123456789
        assert_equal $v [r get KEY:123456789]
        r pexpireat KEY:123456789 9223372036854775807
        assert_encoding raw KEY:123456789
        assert_equal $v [r get KEY:123456789]
        assert_equal 9223372036854775807 [r pexpiretime KEY:123456789]
    }

    test {Four windows take the four tags, a fifth takes the long form; every time is exact} {
        r flushall sync
        # 8 + key 1+12+1 + value 1+20+1 = 44: 48 with a short field, 56 with a long one.
        set v [string repeat x 20]
        set want {}
        for {set i 0} {$i < 5} {incr i} {
            set t [kt_window_time $i]
            r set KEY:1234567$i $v PXAT $t
            dict set want KEY:1234567$i $t
        }
        for {set i 0} {$i < 4} {incr i} {
            kt_assert_usage 48 KEY:1234567$i
        }
        kt_assert_usage 56 KEY:12345674
        dict for {k t} $want {
            assert_equal $t [r pexpiretime $k]
            assert_equal $v [r get $k]
        }
        # One window's last key goes: its tag is free for the fifth.
        r del KEY:12345672
        r set KEY:12345675 $v PXAT [expr {[dict get $want KEY:12345674] + 1}]
        kt_assert_usage 48 KEY:12345675
        dict unset want KEY:12345672
        dict set want KEY:12345675 [expr {[dict get $want KEY:12345674] + 1}]
        dict for {k t} $want {
            assert_equal $t [r pexpiretime $k]
        }
    }

    test {A short field that cannot hold the new time moves to a long one, and still expires} {
        r flushall sync
        set v [string repeat y 20]
        for {set i 0} {$i < 4} {incr i} {
            r set hold:$i $v PXAT [kt_window_time $i]
        }
        r set KEY:moving $v EX 86400
        kt_assert_usage 48 KEY:moving
        # A fifth window: no tag holds it and none is free.
        set far [kt_window_time 4]
        assert_equal 1 [r pexpireat KEY:moving $far]
        assert_equal $far [r pexpiretime KEY:moving]
        kt_assert_usage 56 KEY:moving
        assert_equal $v [r get KEY:moving]
        assert_equal 5 [r dbsize]
        # Now near: the long field takes it in place, and active expiry
        # reaches the moved object through the expires table.
        r pexpire KEY:moving 50
        wait_for_condition 100 50 {
            [r exists KEY:moving] == 0
        } else {
            fail "the moved key did not expire"
        }
        assert_equal 4 [r dbsize]
        assert_equal 4 [scan [regexp -inline {expires=\d+} [r info keyspace]] expires=%d]
    }

    test {PEXPIREAT's whole range} {
        r flushall sync
        r set k v
        assert_equal 1 [r pexpireat k 9223372036854775807]
        assert_equal 9223372036854775807 [r pexpiretime k]
        assert_equal 1 [r pexpireat k 4611686018427387903]
        assert_equal 4611686018427387903 [r pexpiretime k]
        assert_equal 1 [r pexpireat k 4611686018427387904]
        assert_equal 4611686018427387904 [r pexpiretime k]
        # The past deletes the key, as upstream.
        assert_equal 1 [r pexpireat k 0]
        assert_equal 0 [r exists k]
        r set k v
        assert_equal 1 [r pexpireat k -9223372036854775808]
        assert_equal 0 [r exists k]
        r set k v PXAT 1
        assert_equal 0 [r exists k]
    }

    test {DEBUG RELOAD, DUMP/RESTORE ABSTTL and an AOF rewrite keep every time} {
        r flushall sync
        kt_fill 3000
        set before [kt_times]
        set digest [r debug digest]
        r debug reload
        assert_equal $before [kt_times]
        assert_equal $digest [r debug digest]

        foreach k {k:1 k:2 k:3 k:4 k:max k:int k:hash} {
            set payload [r dump $k]
            set t [r pexpiretime $k]
            r restore $k $t $payload REPLACE ABSTTL
            assert_equal $t [r pexpiretime $k]
        }

        r config set appendonly yes
        waitForBgrewriteaof r
        r bgrewriteaof
        waitForBgrewriteaof r
        r debug loadaof
        assert_equal $before [kt_times]
        assert_equal $digest [r debug digest]
        r config set appendonly no
    } {OK} {needs:debug}
}

# Without upstream's expires table (src/vkeys.c): the volatile keys are
# counted per slot and found through the keyspace, by a mark per bucket.
# `DEBUG VOLATILE-CHECK` checks every count and mark against the keys.

# INFO keyspace's expires= of a db (0 for a db not listed), on the server
# at `level`.
proc kt_info_expires_at {level db} {
    set line [regexp -inline "db$db:keys=\\d+,expires=\\d+" [r $level info keyspace]]
    if {$line eq ""} { return 0 }
    scan [lindex [split [lindex $line 0] ,] 1] expires=%d n
    return $n
}
proc kt_info_expires {db} { kt_info_expires_at 0 $db }

# The volatile keys of the selected db, counted by TTL.
proc kt_count_volatile {} {
    set n 0
    foreach k [r keys *] {
        if {[r pttl $k] >= 0} { incr n }
    }
    return $n
}

start_server {tags {"fork" "expire"}} {
    test {Every path that gives or takes a TTL keeps the counts and marks exact} {
        r flushall sync
        set ops {set setex psetex expire pexpireat persist del unlink rename move copy getex getdel restore hash}
        for {set i 0} {$i < 6000} {incr i} {
            set k k:[randomInt 500]
            set k2 k:[randomInt 500]
            switch [lindex $ops [randomInt [llength $ops]]] {
                set { if {[randomInt 2]} { r set $k v } else { r set $k v KEEPTTL } }
                setex { r setex $k [expr {100 + [randomInt 100000]}] v }
                psetex { r set $k v PX [expr {100000 + [randomInt 100000000]}] }
                expire { r expire $k [expr {100 + [randomInt 1000000]}] }
                pexpireat { r pexpireat $k [expr {[clock milliseconds] + 100000 + [randomInt 5000000000]}] }
                persist { r persist $k }
                del { r del $k }
                unlink { r unlink $k }
                rename { catch {r rename $k $k2} }
                move { r select 10; r del $k; r select 9; r move $k 10 }
                copy { catch {r copy $k $k2 REPLACE} }
                getex { catch {r getex $k PERSIST}; catch {r getex $k EX 1000} }
                getdel { catch {r getdel $k} }
                restore {
                    if {[r exists $k]} {
                        set payload [r dump $k]
                        r restore $k2 [expr {[randomInt 2] ? 0 : 500000}] $payload REPLACE
                    }
                }
                hash { r del $k; r hset $k f v; r expire $k 9999 }
            }
            if {$i % 1000 == 999} {
                assert_equal OK [r debug volatile-check]
                assert_equal [kt_count_volatile] [kt_info_expires 9]
            }
        }
        r select 10
        set in10 [kt_count_volatile]
        r select 9
        assert_equal $in10 [kt_info_expires 10]
        r swapdb 9 10
        assert_equal OK [r debug volatile-check]
        assert_equal $in10 [kt_count_volatile]
        r swapdb 9 10
        r debug reload
        assert_equal OK [r debug volatile-check]
        assert_equal [kt_count_volatile] [kt_info_expires 9]
        r flushall async
        assert_equal OK [r debug volatile-check]
        assert_equal 0 [kt_info_expires 9]
    } {} {needs:debug}

    test {Active expiry finds a few volatile keys among many persistent ones} {
        r flushall sync
        r debug populate 200000 persistent 10
        # Due 3 to 3.5 s from now: none before the count below, even on a
        # loaded machine.
        for {set i 0} {$i < 2000} {incr i} {
            r psetex v:$i [expr {3000 + [randomInt 500]}] x
        }
        assert_equal 2000 [kt_info_expires 9]
        wait_for_condition 150 100 {
            [kt_info_expires 9] == 0
        } else {
            fail "volatile keys were not reclaimed: [kt_info_expires 9] left"
        }
        assert_equal 200000 [r dbsize]
        assert_equal OK [r debug volatile-check]
        # The last volatile key gone, its slot keeps no marks.
        assert_match {*volatile keys: 0, in 0 slots, marks of 0 bytes*} [r debug htstats 9]
    } {} {needs:debug}

    test {Volatile eviction evicts only volatile keys} {
        foreach policy {volatile-lru volatile-lfu volatile-ttl volatile-random} {
            r flushall sync
            r config set maxmemory 0
            r debug populate 20000 persistent 100
            for {set i 0} {$i < 20000} {incr i} {
                r set v:$i [string repeat x 100] EX [expr {1000 + $i}]
            }
            set used [s used_memory]
            r config set maxmemory-policy $policy
            r config set maxmemory [expr {$used - 1000000}]
            r set trigger x
            wait_for_condition 50 100 {
                [s used_memory] <= [expr {$used - 1000000 + 100000}]
            } else {
                fail "$policy did not evict"
            }
            assert_equal 20000 [llength [r keys persistent:*]]
            assert {[llength [r keys v:*]] < 20000}
            if {$policy eq "volatile-ttl"} {
                # The soonest TTLs go first: the early keys are the ones missing.
                assert {[r exists v:0] == 0 || [r exists v:19999] == 1}
            }
            assert_equal OK [r debug volatile-check]
            r config set maxmemory 0
        }
        r config set maxmemory-policy noeviction
    } {OK} {needs:debug}
}

start_cluster 1 0 {tags {"fork" "expire" "cluster"}} {
    test {Cluster: volatile keys counted per slot, expired and evicted across slots} {
        for {set i 0} {$i < 3000} {incr i} {
            r set p:$i x
            r psetex v:$i [expr {5000 + [randomInt 500]}] x
            r set w:$i x EX 100000
        }
        assert_equal OK [r debug volatile-check]
        assert_equal 6000 [kt_info_expires 0]
        wait_for_condition 200 100 {
            [kt_info_expires 0] == 3000
        } else {
            fail "volatile keys across slots were not reclaimed"
        }
        assert_equal 6000 [r dbsize]
        assert_equal OK [r debug volatile-check]
        set used [s used_memory]
        r config set maxmemory-policy volatile-random
        r config set maxmemory [expr {$used - 100000}]
        r set trigger x
        wait_for_condition 50 100 {
            [kt_info_expires 0] < 3000
        } else {
            fail "volatile-random did not evict in cluster mode"
        }
        assert_equal 3000 [llength [r keys p:*]]
        assert_equal OK [r debug volatile-check]
        r config set maxmemory 0
        r config set maxmemory-policy noeviction
    } {OK} {needs:debug}
}

if {![fork_reference_present {"fork" "expire" "compat"}]} return

# Copies the RDB file the server at `level` saves into a new directory.
proc kt_save_to_dir {level} {
    r $level save
    set src [file join [lindex [r $level config get dir] 1] [lindex [r $level config get dbfilename] 1]]
    set dir [tmpdir keyttl-rdb]
    file copy -force $src [file join $dir dump.rdb]
    return $dir
}

foreach {from to} {fork reference reference fork} {
    fork_server $from {tags {"fork" "expire" "compat"}} {
        test "Volatile keys saved by the $from start the $to with the same times and digest" {
            r flushall sync
            # Four windows held first, so that some fields take the long form.
            for {set i 0} {$i < 4} {incr i} {
                r set hold:$i v PXAT [kt_window_time $i]
            }
            kt_fill 5000
            set times [kt_times]
            set digest [r debug digest]
            set dir [kt_save_to_dir 0]
            fork_server $to [list overrides [list dir $dir]] {
                assert_equal $times [kt_times]
                assert_equal $digest [r debug digest]
            }
        }
    }
}

# Replication both ways with TTL writes during the initial sync (one way
# through a file on disk, the other diskless): the replica holds the same
# times and digest, and, having no expiry of its own, keeps every key the
# primary keeps.
proc kt_random_ttl_write {level} {
    set k k:[randomInt 5000]
    switch [randomInt 4] {
        0 { r $level persist $k }
        1 { r $level pexpireat $k [expr {[clock milliseconds] + $::kt_day * (1 + [randomInt 400])}] }
        default { r $level set $k [randomInt 1000] PXAT [expr {[clock milliseconds] + $::kt_day * (1 + [randomInt 30])}] }
    }
}
foreach {primary replica diskless} {reference fork no  fork reference yes} {
    fork_server $primary {tags {"fork" "expire" "compat" "repl"}} {
        r flushall sync
        for {set i 0} {$i < 4} {incr i} {
            r set hold:$i v PXAT [kt_window_time $i]
        }
        kt_fill 5000
        r config set repl-diskless-sync $diskless
        r config set rdb-key-save-delay 200
        fork_server $replica {} {
            if {$diskless} { r config set repl-diskless-load swapdb }
            test "Replication of volatile keys from the $primary primary to the $replica replica, TTL writes during the sync" {
                r replicaof [srv -1 host] [srv -1 port]
                wait_for_condition 500 20 {
                    [s master_sync_in_progress] == 1 || [s master_link_status] eq "up"
                } else {
                    fail "The replica did not start syncing"
                }
                set during 0
                while {![string match {*slave0:*state=online*} [r -1 info replication]]} {
                    for {set i 0} {$i < 20} {incr i} { kt_random_ttl_write -1 }
                    incr during 20
                    if {$during > 200000} { fail "The initial sync did not finish" }
                }
                r -1 config set rdb-key-save-delay 0
                for {set i 0} {$i < 2000} {incr i} { kt_random_ttl_write -1 }
                wait_for_ofs_sync [srv -1 client] [srv 0 client]
                assert_equal [kt_times -1] [kt_times 0]
                assert_equal [r -1 debug digest] [r debug digest]
                assert_equal [kt_info_expires_at -1 9] [kt_info_expires_at 0 9]
            }
        }
    }
}
