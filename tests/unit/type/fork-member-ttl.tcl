# Members of sets and sorted sets that expire (issue #47;
# src/t_member_ttl.c), on our server alone.
#
# SADDEX, SEXPIRE, SPEXPIRE, SEXPIREAT, SPEXPIREAT, STTL, SPTTL,
# SEXPIRETIME, SPEXPIRETIME and SPERSIST with Redis 8.12's arguments and
# replies, and their sorted-set twins (ZADDEX with ZADD's conditions,
# ZEXPIRE ... ZPERSIST). This file checks, for sets first:
#   - every command's replies and per-member codes, options, errors, a
#     missing key and a key of another type;
#   - that no command sees a due member (lazy removal on lookup), that a set
#     whose members all expire is deleted, and that active expiry removes
#     due members of sets nobody reads;
#   - what is propagated (absolute times, SREM of what a time past or
#     expiry removed) and that a replica follows;
#   - the times through DEBUG RELOAD, DUMP/RESTORE, AOF rewrite, COPY,
#     RENAME, SPOP of most of a set, SMOVE and SADD;
#   - keyspace notifications, INFO's expired_members and
#     keys_with_volatile_items, MEMORY USAGE;
#   - corrupt RESTORE payloads of the fork's RDB type, rejected;
# then for sorted sets the same, with ZADDEX's conditions and CH, and the
# removals of ZREMRANGE*, ZPOP* and ZADD / ZINCRBY of a member with a time.

source tests/helpers/fork-payload.tcl

proc fst_range {from to} {
    set l {}
    for {set i $from} {$i <= $to} {incr i} { lappend l $i }
    return $l
}

proc fst_future_ms {secs} {
    expr {[clock milliseconds] + $secs * 1000}
}

start_server {tags {"fork" "set"}} {
    test {SEXPIRE family: per-member codes, conditions, a time past} {
        r flushall
        r sadd s a b c d
        assert_equal {1 -2} [r sexpire s 100 members 2 a nosuch]
        assert_equal {0 1} [r sexpire s 200 nx members 2 a b]
        assert_equal {1 0} [r spexpire s 300000 xx members 2 a c]
        assert_equal {1 0} [r sexpire s 400 gt members 2 a c]
        assert_equal {1 1} [r sexpire s 50 lt members 2 a b]
        assert_equal {1} [r sexpire s 60 lt members 1 c]
        set t [fst_future_ms 1000]
        assert_equal {1} [r spexpireat s $t members 1 d]
        assert_equal [list $t] [r spexpiretime s members 1 d]
        assert_equal [list [expr {($t + 999) / 1000}]] [r sexpiretime s members 1 d]
        assert_equal {2 -2} [r sexpireat s 1 members 2 a nosuch]
        assert_equal 0 [r sismember s a]
        assert_equal {2 2 2} [r spexpireat s 1 members 3 b c d]
        assert_equal 0 [r exists s]
    }

    test {SEXPIRE of 0 removes the member; a missing key gives -2s} {
        r flushall
        r sadd s a b
        assert_equal {2} [r sexpire s 0 members 1 a]
        assert_equal {b} [r smembers s]
        assert_equal {-2 -2} [r sexpire nokey 10 members 2 a b]
        assert_equal {-2 -2} [r sttl nokey members 2 a b]
        assert_equal {-2} [r spersist nokey members 1 a]
        assert_equal 0 [r exists nokey]
    }

    test {STTL family and SPERSIST} {
        r flushall
        r sadd s a b c
        r sexpire s 300 members 1 a
        assert_equal {300 -1 -2} [r sttl s members 3 a b x]
        set ms [lindex [r spttl s members 1 a] 0]
        assert_range $ms 290000 300000
        assert_equal {1 -1 -2} [r spersist s members 3 a b x]
        assert_equal {-1} [r sttl s members 1 a]
    }

    test {SADDEX: options, reply, existing members' times} {
        r flushall
        assert_equal 1 [r saddex s ex 100 members 2 a b]
        assert_equal {100 100} [r sttl s members 2 a b]
        # No expire option: the members listed become persistent.
        assert_equal 1 [r saddex s members 1 b]
        assert_equal {100 -1} [r sttl s members 2 a b]
        # KEEPTTL keeps the times there; new members get none.
        assert_equal 1 [r saddex s keepttl members 2 a c]
        assert_equal {100 -1} [r sttl s members 2 a c]
        # MNX / MXX are all-or-nothing.
        assert_equal 0 [r saddex s mnx ex 10 members 2 a x]
        assert_equal 0 [r sismember s x]
        assert_equal 1 [r saddex s mnx px 10000 members 2 x y]
        assert_equal 0 [r saddex s mxx ex 10 members 2 a nosuch]
        assert_equal 1 [r saddex s mxx ex 20 members 2 a b]
        assert_equal {20 20} [r sttl s members 2 a b]
        assert_equal 0 [r saddex nokey mxx ex 10 members 1 a]
        assert_equal 0 [r exists nokey]
        # Keywords in any order, after the members too.
        assert_equal 1 [r saddex s members 1 c mxx exat [expr {[clock seconds] + 30}]]
        assert_range [lindex [r sttl s members 1 c] 0] 29 31
        # A time past removes those there and adds none.
        assert_equal 1 [r saddex s pxat 1 members 2 a newone]
        assert_equal 0 [r sismember s a]
        assert_equal 0 [r sismember s newone]
        assert_equal 1 [r saddex nokey ex 0 members 1 a]
        assert_equal 0 [r exists nokey]
    }

    test {Errors of the member commands} {
        r flushall
        r sadd s a
        r set str v
        assert_error {*WRONGTYPE*} {r sexpire str 10 members 1 a}
        assert_error {*WRONGTYPE*} {r sttl str members 1 a}
        assert_error {*WRONGTYPE*} {r spersist str members 1 a}
        assert_error {*WRONGTYPE*} {r saddex str ex 10 members 1 a}
        assert_error {*Multiple condition flags*} {r sexpire s 10 nx xx members 1 a}
        assert_error {*numMembers*} {r sexpire s 10 members 0 a}
        assert_error {*wrong number of arguments*} {r sexpire s 10 members 3 a b}
        assert_error {*unknown argument*} {r sexpire s 10 members 1 a b}
        assert_error {*MEMBERS keyword specified multiple times*} {r sexpire s 10 members 1 a members 1 b}
        assert_error {*invalid expire time*} {r sexpire s -1 members 1 a}
        assert_error {*invalid expire time*} {r spexpireat s 9223372036854775807 members 1 a}
        assert_error {*not an integer*} {r sexpire s abc members 1 a}
        assert_error {*Mandatory argument MEMBERS*} {r sttl s member 1 a}
        assert_error {*positive integer*} {r sttl s members 0 a}
        assert_error {*must match*} {r sttl s members 2 a}
        assert_error {*must match*} {r spersist s members 1 a b}
        assert_error {*invalid number of members*} {r saddex s members 0 a}
        assert_error {*Only one of MXX or MNX*} {r saddex s mnx mxx members 1 a}
        assert_error {*Only one of EX, PX, EXAT, PXAT or KEEPTTL*} {r saddex s ex 1 keepttl members 1 a}
        assert_error {*missing expire time*} {r saddex s members 1 a ex}
        assert_error {*unknown argument*} {r saddex s fnx members 1 a}
        assert_error {*missing MEMBERS*} {r saddex s mnx ex 10}
        assert_error {*unknown argument*} {r saddex s e members 1 a}
        assert_error {*unknown argument*} {r saddex s exa 10 members 1 a}
        assert_equal {a} [r smembers s]
        # Options in any case.
        assert_equal 1 [r saddex s2 MnX eXaT 4102444800 MeMbErS 1 x]
        assert_equal {1} [r sexpireat s2 4102444801 Gt MEMBERS 1 x]
        assert_equal {4102444801} [r sexpiretime s2 mEmBeRs 1 x]
        assert_equal 1 [r zaddex z2 Nx Ch pX 100000 Members 1 1 x]
        r del s2 z2
    }

    test {No command sees a due member; a set whose members all expire is deleted} {
        r flushall
        r debug set-active-expire 0
        r sadd s a b c 1 2 3
        r spexpire s 100 members 3 a 1 c
        r sadd big {*}[lmap i [fst_range 0 299] {format m$i}]
        r spexpire big 100 members 3 m1 m2 m3
        after 200
        assert_equal 3 [r scard s]
        assert_equal {2 3 b} [lsort [r smembers s]]
        assert_equal {0 1} [r smismember s a b]
        assert_equal 297 [r scard big]
        assert_equal 0 [r sismember big m1]
        assert_equal 0 [llength [lsearch -all -inline [r sinter big big] m1]]
        r saddex gone px 100 members 2 x y
        after 200
        assert_equal 0 [r exists gone]
        assert_equal {} [r smembers gone]
        r debug set-active-expire 1
    } {OK} {needs:debug}

    test {Active expiry removes due members of sets nobody reads} {
        r flushall
        set before [s expired_members]
        r sadd keep k
        r saddex keep px 100 members 3 a b c
        r saddex allgone px 100 members 2 a b
        # Active expiry lets a key's due members gather for 3 s first
        # (RECLAIM_LAG_MS in t_member_ttl.c).
        wait_for_condition 100 100 {
            [s expired_members] == $before + 5
        } else {
            fail "active expiry did not remove the members"
        }
        assert_equal 1 [r dbsize]
        assert_match {*keys=1,*keys_with_volatile_items=0*} [r info keyspace]
        assert_equal {k} [r smembers keep]
    }

    test {What is propagated: absolute times, SREM of what a time past or expiry removed} {
        r flushall
        r debug set-active-expire 0
        set repl [attach_to_replication_stream]
        r sadd s a b c
        r sexpire s 100 members 2 a nosuch
        r sexpire s 10 gt members 1 a
        r sexpireat s 1 members 1 b
        r spersist s members 1 a
        r saddex s2 mnx ex 100 members 1 x
        r saddex s2 keepttl members 1 y
        r saddex s2 members 1 x
        r saddex s2 ex 100 members 1 w
        r saddex s2 pxat 99999999999999 members 1 v
        r spexpire s2 1 members 1 x
        after 20
        r scard s2
        assert_replication_stream $repl {
            {select *}
            {sadd s a b c}
            {spexpireat s * MEMBERS 1 a}
            {srem s b}
            {spersist s members 1 a}
            {saddex s2 PXAT * MEMBERS 1 x}
            {saddex s2 KEEPTTL MEMBERS 1 y}
            {saddex s2 MEMBERS 1 x}
            {saddex s2 PXAT * members 1 w}
            {saddex s2 pxat 99999999999999 members 1 v}
            {spexpireat s2 * MEMBERS 1 x}
            {srem s2 x}
        }
        close_replication_stream $repl
        r debug set-active-expire 1
    } {OK} {needs:debug needs:repl}

    test {Times through DEBUG RELOAD, DUMP/RESTORE, COPY and RENAME} {
        r flushall
        r sadd small a b 1
        r sexpire small 1000 members 2 a 1
        r sadd big {*}[fst_range 0 299] x
        r sexpire big 2000 members 3 5 x 299
        r debug reload
        assert_equal {1000 -1 1000} [r sttl small members 3 a b 1]
        assert_equal {2000 2000 2000 -1} [r sttl big members 4 5 x 299 6]
        set d [r dump big]
        r restore big2 0 $d
        assert_equal {2000 -1} [r sttl big2 members 2 x 6]
        r copy small small2
        r sexpire small 5 members 1 a
        assert_equal {1000} [r sttl small2 members 1 a]
        r rename small2 small3
        assert_equal {1000 1000} [r sttl small3 members 2 a 1]
        assert_match {*keys_with_volatile_items=4*} [r info keyspace]
    } {} {needs:debug}

    test {Times through AOF rewrite and reload} {
        r flushall
        r sadd s a b c {*}[fst_range 0 199]
        r sexpire s 500 members 3 a 7 c
        r spexpire s 900000 members 2 b 8
        # Absolute times, exact: the suite's load may take the rewrite and
        # reload past half a second, which a TTL in seconds would round.
        set before [r spexpiretime s members 6 a b c 7 8 9]
        assert_equal {500 900 500 500 900 -1} [r sttl s members 6 a b c 7 8 9]
        r bgrewriteaof
        waitForBgrewriteaof r
        r debug loadaof
        assert_equal $before [r spexpiretime s members 6 a b c 7 8 9]
        assert_equal -1 [lindex $before 5]
    } {} {needs:debug}

    test {SPOP of most of a set keeps the rest's times; SMOVE and SADD} {
        r flushall
        r sadd s {*}[fst_range 0 199]
        r sexpire s 100 members 200 {*}[fst_range 0 199]
        assert_equal 190 [llength [r spop s 190]]
        foreach m [r smembers s] {
            assert_equal {100} [r sttl s members 1 $m]
        }
        set m [lindex [r smembers s] 0]
        r sadd s $m
        assert_equal {100} [r sttl s members 1 $m]
        r smove s dst $m
        assert_equal {-1} [r sttl dst members 1 $m]
        assert_equal {-2} [r sttl s members 1 $m]
    }

    test {Keyspace notifications} {
        r flushall
        set rd [valkey_deferring_client]
        r config set notify-keyspace-events KEA
        $rd psubscribe __keyevent@*
        $rd read
        r saddex s ex 100 members 2 a b
        r spersist s members 1 a
        r sexpireat s 1 members 1 b
        assert_match {*sadd*} [$rd read]
        assert_match {*sexpire*} [$rd read]
        assert_match {*spersist*} [$rd read]
        assert_match {*srem*} [$rd read]
        r saddex s2 px 50 members 1 x
        $rd read
        $rd read
        after 100
        r exists s2
        assert_match {*sexpired*} [$rd read]
        assert_match {*del*} [$rd read]
        $rd close
        r config set notify-keyspace-events ""
    }

    test {MEMORY USAGE counts the times; DEBUG BTREE shows them} {
        r flushall
        r sadd s {*}[lmap i [fst_range 0 999] {format member:$i}]
        set plain [r memory usage s]
        assert_match {*volatile_members:0*earliest_expire_ms:-1*} [r debug btree s]
        r sexpire s 100 members 1000 {*}[lmap i [fst_range 0 999] {format member:$i}]
        # A set keeps each time in its member's entry (3 bytes from its
        # segment's base), no index.
        set timed [r memory usage s]
        assert_range [expr {$timed - $plain}] 3000 20000
        set info [r debug btree s]
        assert_match {*volatile_members:1000*} $info
        regexp {earliest_expire_ms:(\d+)} $info -> when
        assert_range [expr {$when - [clock milliseconds]}] 90000 100000
        assert_equal OK [r debug btree s check]
        r spersist s members 1000 {*}[lmap i [fst_range 0 999] {format member:$i}]
        assert {[r memory usage s] <= $timed}
        assert_equal OK [r debug btree s check]
        # A sorted set keeps each time in its member's tree entry too: a
        # length byte and 4 bytes of time from the tree's base, and a bound
        # per leaf.
        r zadd z {*}[concat {*}[lmap i [fst_range 0 999] {list $i m$i}]]
        set plain [r memory usage z]
        r zexpire z 100 members 1000 {*}[lmap i [fst_range 0 999] {format m$i}]
        set timed [r memory usage z]
        assert_range [expr {$timed - $plain}] 5000 9000
        set info [r debug btree z]
        assert_match {*volatile_members:1000*} $info
        regexp {earliest_expire_ms:(\d+)} $info -> when
        assert_range [expr {$when - [clock milliseconds]}] 90000 100000
        assert_equal OK [r debug btree z check]
        # A reload builds the tree again in one pass: no leaf split by times
        # given after its load.
        r debug reload
        assert {[r memory usage z] <= $timed}
        assert_match {*volatile_members:1000*} [r debug btree z]
        assert_equal OK [r debug btree z check]
        r zpersist z members 2 m1 m2
        assert_match {*volatile_members:998*} [r debug btree z]
        assert_equal OK [r debug btree z check]
    } {} {needs:debug}

    test {Sorted-set times far from the tree's base read back through reloads} {
        # A tree's first time (30 days on) sets its base 18.6 hours before
        # it: times within 24.8 days after the base take 4 bytes, the
        # others (a day from now, before the base; 60 days on, past its
        # reach) 7. Both kinds, mixed in each leaf, survive a change of
        # form, a reload and a RESTORE.
        r flushall
        r zadd z {*}[concat {*}[lmap i [fst_range 0 299] {list $i m$i}]]
        set now [clock milliseconds]
        set day 86400000
        set want {}
        foreach i [fst_range 0 299] {
            switch [expr {$i % 3}] {
                0 {set at [expr {$now + 30 * $day + $i}]}
                1 {set at [expr {$now + 60 * $day + $i}]}
                2 {set at [expr {$now + $day - $i}]}
            }
            r zpexpireat z $at members 1 m$i
            dict set want m$i $at
        }
        # Long to short, and short to long, in place.
        r zpexpireat z [expr {$now + 31 * $day}] members 1 m1
        dict set want m1 [expr {$now + 31 * $day}]
        r zpexpireat z [expr {$now + 2 * $day}] members 1 m3
        dict set want m3 [expr {$now + 2 * $day}]
        assert_equal OK [r debug btree z check]
        set dump [r dump z]
        r debug reload
        assert_equal OK [r debug btree z check]
        r restore z2 0 $dump
        assert_equal OK [r debug btree z2 check]
        foreach key {z z2} {
            foreach i [fst_range 0 299] {
                assert_equal [dict get $want m$i] [r zpexpiretime $key members 1 m$i]
            }
        }
    } {} {needs:debug}

    test {A sorted set of up to 128 members with times has no member index} {
        # A time moves a small key to its tree; up to 128 members that tree
        # reads its leaves for a lookup, as a listpack is read. ZSCAN gives
        # them all in one call.
        r flushall
        r zaddex z EX 100 MEMBERS 100 {*}[concat {*}[lmap i [fst_range 0 99] {list $i m$i}]]
        assert_match {*index_bytes:0*} [r debug btree z]
        set small [r memory usage z]
        foreach i [fst_range 0 99] {
            assert_equal $i [r zscore z m$i]
            assert_equal $i [r zrank z m$i]
        }
        lassign [r zscan z 0 count 10] cursor items
        assert_equal 0 $cursor
        assert_equal 200 [llength $items]
        assert_equal OK [r debug btree z check]
        # Past 128 the index is built; under 64 it goes again.
        r zadd z {*}[concat {*}[lmap i [fst_range 100 128] {list $i m$i}]]
        assert_no_match {*index_bytes:0*} [r debug btree z]
        assert {[r memory usage z] > $small + 29 * 16 + 500}
        assert_equal OK [r debug btree z check]
        r zrem z {*}[lmap i [fst_range 0 65] {format m$i}]
        assert_equal 63 [r zcard z]
        assert_match {*index_bytes:0*} [r debug btree z]
        assert_equal 100 [r zscore z m100]
        assert_equal OK [r debug btree z check]
    } {} {needs:debug}

    test {Corrupt RESTORE payloads of a set with times are rejected} {
        r flushall
        r sadd s a b c
        r sexpire s 100 members 2 a b
        set d [r dump s]
        assert_equal 200 [scan [string index $d 0] %c]
        binary scan [string range $d end-9 end-8] s version
        set t [binary format w [fst_future_ms 100]]
        set head [binary format c 200][fs_rdb_len 3][fs_raw_string a][fs_raw_string b][fs_raw_string c]
        # The server's own form, built here: accepted.
        r restore ok 0 [fs_close_payload $head[fs_rdb_len 1][fs_raw_string a]$t $version]
        assert_equal {100 -1} [r sttl ok members 2 a b]
        foreach {what tail} [list \
            "no times" [fs_rdb_len 0] \
            "more times than members" [fs_rdb_len 4][fs_raw_string a]$t[fs_raw_string b]$t[fs_raw_string c]$t[fs_raw_string a]$t \
            "a time for no member" [fs_rdb_len 1][fs_raw_string x]$t \
            "a member twice" [fs_rdb_len 2][fs_raw_string a]$t[fs_raw_string a]$t \
            "a negative time" [fs_rdb_len 1][fs_raw_string a][binary format w -5] \
            "a time past 2^53" [fs_rdb_len 1][fs_raw_string a][binary format w [expr {(1 << 53) + 1}]] \
            "cut short" [fs_rdb_len 2][fs_raw_string a]$t \
            "a time cut short" [fs_rdb_len 1][fs_raw_string a][string range $t 0 3]] {
            assert_error {*Bad data format*} {r restore bad 0 [fs_close_payload $head$tail $version]}
        }
        assert_equal 0 [r exists bad]
        assert_equal {100 100 -1} [r sttl s members 3 a b c]
    }
}

start_server {tags {"fork" "set" "repl"}} {
    start_server {} {
        set primary [srv -1 client]
        set primary_host [srv -1 host]
        set primary_port [srv -1 port]
        set replica [srv 0 client]

        test {A replica follows the primary's times and removals} {
            $replica replicaof $primary_host $primary_port
            wait_for_condition 50 100 {
                [string match {*master_link_status:up*} [$replica info replication]]
            } else {
                fail "replica did not connect"
            }
            $primary sadd s a b c
            $primary saddex s px 300 members 1 a
            $primary sexpire s 1000 members 1 b
            wait_for_ofs_sync $primary $replica
            assert_equal {-1} [$replica sttl s members 1 c]
            assert_equal {1000} [$replica sttl s members 1 b]
            wait_for_condition 50 100 {
                [$replica sismember s a] == 0
            } else {
                fail "the replica kept the expired member"
            }
            assert_equal {b c} [lsort [$replica smembers s]]
        }

        test {A replica's reads do not see due members it still holds} {
            $primary debug set-active-expire 0
            $primary sadd h a b c
            $primary saddex h px 100 members 1 a
            $primary saddex gone px 100 members 2 x y
            wait_for_ofs_sync $primary $replica
            set expired [status $primary expired_members]
            after 200
            # The replica holds them (DBSIZE counts gone), its reads do not
            # see them.
            assert_equal [$primary dbsize] [$replica dbsize]
            assert_equal 0 [$replica exists gone]
            assert_equal {} [$replica smembers gone]
            assert_equal {b c} [lsort [$replica smembers h]]
            assert_equal 2 [$replica scard h]
            assert_equal {0 1} [$replica smismember h a b]
            assert_equal {-2 -1} [$replica sttl h members 2 a b]
            assert_equal $expired [status $primary expired_members]
            # A read on the primary removes them, and the replica follows.
            assert_equal 2 [$primary scard h]
            assert_equal 0 [$primary exists gone]
            wait_for_ofs_sync $primary $replica
            assert_equal [$primary dbsize] [$replica dbsize]
            assert_equal {b c} [lsort [$replica smembers h]]
            $primary debug set-active-expire 1
        } {OK} {needs:debug}
    }
}

start_server {tags {"fork" "zset"}} {
    test {ZEXPIRE family, ZTTL family and ZPERSIST} {
        r flushall
        r zadd z 1 a 2 b 3 c 4 d
        assert_equal {1 -2} [r zexpire z 100 members 2 a nosuch]
        assert_equal {0 1} [r zexpire z 200 nx members 2 a b]
        assert_equal {1 0} [r zpexpire z 300000 xx members 2 a c]
        assert_equal {0 1} [r zexpire z 400 lt members 2 a c]
        assert_equal {300 200 400 -1 -2} [r zttl z members 5 a b c d x]
        assert_range [lindex [r zpttl z members 1 a] 0] 290000 300000
        set t [fst_future_ms 1000]
        assert_equal {1} [r zpexpireat z $t members 1 d]
        assert_equal [list $t] [r zpexpiretime z members 1 d]
        assert_equal [list [expr {($t + 999) / 1000}]] [r zexpiretime z members 1 d]
        assert_equal {1 -1 -2} [r zpersist z members 3 a a x]
        assert_equal {2 -2} [r zexpireat z 1 members 2 b nosuch]
        assert_equal {c d} [r zrange z 1 -1]
        assert_equal {2 2 2} [r zpexpireat z 1 members 3 a c d]
        assert_equal 0 [r exists z]
        assert_equal {-2} [r zttl z members 1 a]
        r set str v
        assert_error {*WRONGTYPE*} {r zexpire str 10 members 1 a}
        assert_error {*WRONGTYPE*} {r zaddex str members 1 1 a}
    }

    test {ZADDEX: ZADD's conditions and CH, with times} {
        r flushall
        assert_equal 2 [r zaddex z ex 100 members 2 1 a 2 b]
        assert_equal {100 100} [r zttl z members 2 a b]
        # No time: the members let through become persistent.
        assert_equal 0 [r zaddex z members 1 5 b]
        assert_equal {5} [r zscore z b]
        assert_equal {100 -1} [r zttl z members 2 a b]
        # KEEPTTL keeps them; new members get none.
        assert_equal 1 [r zaddex z keepttl members 2 7 a 3 c]
        assert_equal {100 -1 7} [concat [r zttl z members 2 a c] [r zscore z a]]
        # Conditions: a member they stop keeps its score and time.
        assert_equal 0 [r zaddex z nx ex 10 members 1 0 a]
        assert_equal {100} [r zttl z members 1 a]
        assert_equal 1 [r zaddex z xx gt ch ex 20 members 3 1 a 9 c 1 nosuch]
        assert_equal {100 20} [r zttl z members 2 a c]
        assert_equal {} [r zscore z nosuch]
        assert_equal 0 [r zaddex nokey xx ex 10 members 1 1 a]
        assert_equal 0 [r exists nokey]
        # A time past removes the members there and adds none.
        assert_equal 0 [r zaddex z pxat 1 members 2 1 a 1 newone]
        assert_equal {} [r zscore z a]
        assert_equal {} [r zscore z newone]
        assert_error {*XX and NX*} {r zaddex z nx xx members 1 1 a}
        assert_error {*GT, LT, and/or NX*} {r zaddex z gt lt members 1 1 a}
        assert_error {*not a valid float*} {r zaddex z members 1 nan a}
        assert_error {*wrong number of arguments*} {r zaddex z members 2 1 a}
        assert_error {*unknown argument*} {r zaddex z members 1 1 a 2}
        assert_error {*Only one of EX*} {r zaddex z ex 1 px 1 members 1 1 a}
    }

    test {No sorted-set command sees a due member} {
        r flushall
        r debug set-active-expire 0
        r zadd z 1 a 2 b 3 c
        r zpexpire z 100 members 1 b
        r zadd big {*}[concat {*}[lmap i [fst_range 0 299] {list $i m$i}]]
        r zpexpire big 100 members 2 m1 m2
        after 200
        assert_equal 2 [r zcard z]
        assert_equal {a c} [r zrange z 0 -1]
        assert_equal {1} [r zrank z c]
        assert_equal 1 [r zcount z 2 3]
        assert_equal {} [r zscore z b]
        assert_equal 298 [r zcard big]
        assert_equal {m0 m3} [r zrange big 0 1]
        r zaddex gone px 100 members 2 1 x 2 y
        after 200
        assert_equal 0 [r exists gone]
        r debug set-active-expire 1
    } {OK} {needs:debug}

    test {Removing a member drops its time: ZREM, ZPOPMIN, ZREMRANGE*; ZADD and ZINCRBY keep it} {
        r flushall
        r zadd z {*}[concat {*}[lmap i [fst_range 0 299] {list $i m$i}]]
        r zexpire z 100 members 8 m0 m1 m5 m10 m150 m200 m250 m299
        r zpopmin z
        r zrem z m1
        r zremrangebyscore z 4 6
        r zremrangebyrank z 140 147
        r zremrangebyrank z -1 -1
        assert_equal {-2 -2 -2 100 -2 100 100 -2} [r zttl z members 8 m0 m1 m5 m10 m150 m200 m250 m299]
        r zadd z 5000 m10
        r zincrby z 1 m200
        assert_equal {100 100} [r zttl z members 2 m10 m200]
        # A member added again after its removal has no time.
        r zadd z 1 m0
        assert_equal {-1} [r zttl z members 1 m0]
        r zadd lex 0 a 0 b 0 c 0 d
        r zexpire lex 100 members 3 a b d
        r zremrangebylex lex {[a} {[b}
        assert_equal {-2 -2 -1 100} [r zttl lex members 4 a b c d]
        r zadd lex 0 a
        assert_equal {-1} [r zttl lex members 1 a]
    }

    test {Active expiry of sorted sets} {
        r flushall
        set before [s expired_members]
        r zadd keep 1 k
        r zaddex keep px 100 members 2 2 a 3 b
        r zaddex allgone px 100 members 1 1 a
        # After RECLAIM_LAG_MS (3 s), as for sets.
        wait_for_condition 100 100 {
            [s expired_members] == $before + 3
        } else {
            fail "active expiry did not remove the members"
        }
        assert_equal 1 [r dbsize]
        assert_equal {k} [r zrange keep 0 -1]
    }

    test {Sorted-set times through DEBUG RELOAD, DUMP/RESTORE, COPY, AOF rewrite} {
        r flushall
        r zadd small 1 a 2 b
        r zexpire small 1000 members 1 a
        r zadd big {*}[concat {*}[lmap i [fst_range 0 299] {list $i m$i}]]
        r zexpire big 2000 members 2 m5 m299
        r debug reload
        assert_equal {1000 -1} [r zttl small members 2 a b]
        assert_equal {2000 2000 -1} [r zttl big members 3 m5 m299 m6]
        set d [r dump big]
        assert_equal 201 [scan [string index $d 0] %c]
        r restore big2 0 $d
        assert_equal {2000 -1} [r zttl big2 members 2 m5 m6]
        assert_equal [r zrange big 0 -1 withscores] [r zrange big2 0 -1 withscores]
        r copy small small2
        r zexpire small 5 members 1 a
        assert_equal {1000} [r zttl small2 members 1 a]
        r bgrewriteaof
        waitForBgrewriteaof r
        r debug loadaof
        assert_equal {5 1000 2000} [concat [r zttl small members 1 a] [r zttl small2 members 1 a] [r zttl big members 1 m5]]
        binary scan [string range $d end-9 end-8] s version
        set t [binary format w [fst_future_ms 100]]
        set body [binary format c 201][fs_rdb_len 1][fs_raw_string a][binary format d 1.5]
        r restore ok 0 [fs_close_payload $body[fs_rdb_len 1][fs_raw_string a]$t $version]
        assert_equal {1.5 100} [concat [r zscore ok a] [r zttl ok members 1 a]]
        assert_error {*Bad data format*} {r restore bad 0 [fs_close_payload $body[fs_rdb_len 1][fs_raw_string x]$t $version]}
        assert_error {*Bad data format*} {r restore bad 0 [fs_close_payload $body[fs_rdb_len 0] $version]}
    } {} {needs:debug}

    test {What sorted-set commands propagate} {
        r flushall
        r debug set-active-expire 0
        set repl [attach_to_replication_stream]
        r zaddex z nx ch ex 100 members 2 1 a 2 b
        r zaddex z gt members 2 0 a 5 b
        r zaddex z3 px 100000 members 1 3 c
        r zexpire z 10 members 1 b
        r zexpireat z 1 members 1 a
        r zpexpire z 1 members 1 b
        after 20
        r zcard z
        assert_replication_stream $repl {
            {select *}
            {zaddex z PXAT * MEMBERS 2 1 a 2 b}
            {zaddex z MEMBERS 1 5 b}
            {zaddex z3 PXAT * members 1 3 c}
            {zpexpireat z * MEMBERS 1 b}
            {zrem z a}
            {zpexpireat z * MEMBERS 1 b}
            {zrem z b}
        }
        close_replication_stream $repl
        r debug set-active-expire 1
    } {OK} {needs:debug needs:repl}
}

start_server {tags {"fork" "zset" "repl"}} {
    start_server {} {
        set primary [srv -1 client]
        set replica [srv 0 client]
        test {A replica hides a sorted set's due members until the primary removes them} {
            $replica replicaof [srv -1 host] [srv -1 port]
            wait_for_condition 50 100 {
                [string match {*master_link_status:up*} [$replica info replication]]
            } else {
                fail "replica did not connect"
            }
            $primary debug set-active-expire 0
            $primary zadd z 1 a 2 b 3 c
            $primary zpexpire z 100 members 1 b
            wait_for_ofs_sync $primary $replica
            after 200
            assert_equal {a c} [$replica zrange z 0 -1]
            assert_equal 2 [$replica zcard z]
            assert_equal [$primary dbsize] [$replica dbsize]
            assert_equal {a c} [$primary zrange z 0 -1]
            wait_for_ofs_sync $primary $replica
            assert_equal {a c} [$replica zrange z 0 -1]
            $primary debug set-active-expire 1
        } {OK} {needs:debug}
    }
}

# Random operations on sets and sorted sets of both forms against a Tcl
# model, in rounds: a member's time is either short (PX 150: due by the
# round's end, 400 ms later) or long (EX 1000), so the model knows which
# members a read must see. Each round's end compares every key's members,
# scores, counts and times with the model, on the primary and on a replica
# that follows it, after active expiry has had its turn at some keys and
# lazy removal at the others.
start_server {tags {"fork" "set" "zset" "repl"}} {
    start_server {} {
        set primary [srv -1 client]
        set replica [srv 0 client]
        $replica replicaof [srv -1 host] [srv -1 port]
        wait_for_condition 50 100 {
            [string match {*master_link_status:up*} [$replica info replication]]
        } else {
            fail "replica did not connect"
        }

        test {Random member times against a model, on a primary and its replica} {
            $primary flushall
            set rounds [expr {$::accurate ? 20 : 6}]
            set ops [expr {$::accurate ? 3000 : 800}]
            # model: key -> dict member -> {score due} (due: 0 none, 1 short, 2 long)
            array set model {}
            set keys {s0 s1 i0 z0 z1}
            foreach k $keys { set model($k) {} }
            for {set round 0} {$round < $rounds} {incr round} {
                for {set i 0} {$i < $ops} {incr i} {
                    set k [lindex $keys [randomInt [llength $keys]]]
                    set zset [string match z* $k]
                    # Members: a few hundred per key, so keys cross into their big form.
                    set m [expr {[string match i* $k] ? [randomInt 400] : "m[randomInt 300]"}]
                    set t [randomInt 3]
                    set opt [lindex {{} {PX 150} {EX 1000}} $t]
                    set d $model($k)
                    # A member with a short time may come due within the
                    # round: no operation touches it until the round's end.
                    if {[dict exists $d $m] && [lindex [dict get $d $m] 1] == 1} continue
                    switch [randomInt 6] {
                        0 - 1 {
                            if {$zset} {
                                set score [randomInt 50]
                                $primary zaddex $k {*}$opt MEMBERS 1 $score $m
                                dict set d $m [list $score $t]
                            } else {
                                $primary saddex $k {*}$opt MEMBERS 1 $m
                                dict set d $m [list 0 $t]
                            }
                        }
                        2 {
                            # Plain adds keep a member's time.
                            if {$zset} {
                                set score [randomInt 50]
                                $primary zadd $k $score $m
                                if {[dict exists $d $m]} {
                                    dict set d $m [list $score [lindex [dict get $d $m] 1]]
                                } else {
                                    dict set d $m [list $score 0]
                                }
                            } else {
                                $primary sadd $k $m
                                if {![dict exists $d $m]} { dict set d $m [list 0 0] }
                            }
                        }
                        3 {
                            $primary [expr {$zset ? "zrem" : "srem"}] $k $m
                            dict unset d $m
                        }
                        4 {
                            if {$t == 0} {
                                set reply [$primary [expr {$zset ? "zpersist" : "spersist"}] $k MEMBERS 1 $m]
                                set want [expr {![dict exists $d $m] ? -2 : ([lindex [dict get $d $m] 1] ? 1 : -1)}]
                                assert_equal $want $reply
                                if {[dict exists $d $m]} { dict set d $m [lreplace [dict get $d $m] 1 1 0] }
                            } else {
                                set ms [expr {$t == 1 ? 150 : 1000000}]
                                set reply [$primary [expr {$zset ? "zpexpire" : "spexpire"}] $k $ms MEMBERS 1 $m]
                                assert_equal [expr {[dict exists $d $m] ? 1 : -2}] $reply
                                if {[dict exists $d $m]} { dict set d $m [lreplace [dict get $d $m] 1 1 $t] }
                            }
                        }
                        5 {
                            set reply [$primary [expr {$zset ? "zttl" : "sttl"}] $k MEMBERS 1 $m]
                            if {![dict exists $d $m]} {
                                assert_equal -2 $reply
                            } else {
                                set due [lindex [dict get $d $m] 1]
                                if {$due == 0} { assert_equal -1 $reply }
                                if {$due == 2} { assert_range $reply 990 1000 }
                                if {$due == 1} { assert_range $reply 0 1 }
                            }
                        }
                    }
                    set model($k) $d
                }
                # Let the short times come; active expiry runs for half the rounds.
                if {$round % 2} { r debug set-active-expire 0 }
                after 400
                foreach k $keys {
                    set d {}
                    dict for {m v} $model($k) {
                        if {[lindex $v 1] != 1} { dict set d $m $v }
                    }
                    set model($k) $d
                }
                foreach srv [list $primary $replica] {
                    if {$srv eq $replica} { wait_for_ofs_sync $primary $replica }
                    foreach k $keys {
                        set d $model($k)
                        if {[string match z* $k]} {
                            set want {}
                            foreach m [lsort [dict keys $d]] { lappend want $m [lindex [dict get $d $m] 0] }
                            set got [lsort -stride 2 -index 0 [$srv zrange $k 0 -1 withscores]]
                            assert_equal $want $got
                            assert_equal [dict size $d] [$srv zcard $k]
                        } else {
                            assert_equal [lsort [dict keys $d]] [lsort [$srv smembers $k]]
                            assert_equal [dict size $d] [$srv scard $k]
                        }
                        set ms [dict keys $d]
                        if {[llength $ms]} {
                            set ttls [$srv [expr {[string match z* $k] ? "zttl" : "sttl"}] $k MEMBERS [llength $ms] {*}$ms]
                            foreach m $ms ttl $ttls {
                                if {[lindex [dict get $d $m] 1] == 0} { assert_equal -1 $ttl } else { assert {$ttl > 900} }
                            }
                        }
                    }
                }
                foreach k $keys {
                    if {[$primary exists $k] && [$primary object encoding $k] eq "btree"} {
                        assert_equal OK [$primary debug btree $k check]
                    }
                }
                $primary debug set-active-expire 1
            }
        } {} {needs:debug}
    }
}
