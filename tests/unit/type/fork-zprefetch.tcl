# Reading ahead for pipelined sorted-set and set commands
# (src/memberprefetch.c), on our server alone.
#
# A client's pipeline is queued before it runs, and the fork looks the
# members of queued ZSCORE, ZADD, ZINCRBY, ZREM, ZRANK, ZREVRANK and ZMSCORE
# commands up in their big sorted sets ahead of time, asks for the buckets
# of SISMEMBER, SADD and SREM in big sets of strings (and keeps their
# members' stored forms and hashes for them), and for the blocks of
# SISMEMBER, SMISMEMBER, SADD and SREM in big sets of integers, and the
# members of SADDEX and ZADDEX in their keys and in the keys' indexes of
# times (t_member_ttl.c). It must change
# nothing a client sees: the same pipelines, run with the read-ahead on
# (prefetch-batch-max-size 16, the default) and off (1; 0 turns it off as
# well, but upstream's key prefetch then declares an array of no elements,
# which UndefinedBehaviorSanitizer reports under make test-san), give the same
# replies and leave the same data, also when the pipeline itself deletes the
# key, changes its type, switches databases, queues a MULTI, or sends
# commands with the wrong arity or unknown options.

start_server {tags {"fork zset"}} {
    # One pipeline: every command written before any reply is read.
    proc fzp_pipeline {cmds} {
        set rd [valkey_deferring_client]
        foreach c $cmds { $rd write [format_command {*}$c] }
        $rd flush
        set replies {}
        foreach c $cmds {
            if {[catch {$rd read} e]} { set e "ERR: $e" }
            lappend replies $e
        }
        $rd close
        return $replies
    }

    # A big sorted set of n members m:0..m:n-1 with random integer scores.
    proc fzp_fill {key n} {
        r del $key
        for {set i 0} {$i < $n} {incr i 500} {
            set args {}
            for {set j $i} {$j < $i + 500 && $j < $n} {incr j} {
                lappend args [expr {int(rand() * 100000)}] m:$j
            }
            r zadd $key {*}$args
        }
    }

    # Random point commands on key, members drawn from 0..n+n/4 (some new).
    proc fzp_random_cmds {key n count} {
        set cmds {}
        for {set i 0} {$i < $count} {incr i} {
            set m m:[expr {int(rand() * ($n + $n / 4))}]
            set s [expr {int(rand() * 100000)}]
            switch [expr {int(rand() * 10)}] {
                0 { lappend cmds [list zscore $key $m] }
                1 { lappend cmds [list zadd $key $s $m] }
                2 { lappend cmds [list zadd $key [lindex {nx xx gt lt} [expr {int(rand() * 4)}]] ch $s $m] }
                3 { lappend cmds [list zadd $key incr $s $m] }
                4 { lappend cmds [list zincrby $key $s $m] }
                5 { lappend cmds [list zrem $key $m m:[expr {int(rand() * $n)}]] }
                6 { lappend cmds [list zrank $key $m withscore] }
                7 { lappend cmds [list zrevrank $key $m] }
                8 { lappend cmds [list zmscore $key $m m:1 m:nope] }
                9 { lappend cmds [list zscore $key $m] }
            }
        }
        return $cmds
    }

    # Runs the same pipelines on fresh copies of the same data (made by the
    # commands in setup), read-ahead on and off, and expects equal replies
    # and equal data.
    proc fzp_compare {setup pipelines} {
        set results {}
        foreach batch {16 1} {
            r config set prefetch-batch-max-size $batch
            r flushall
            r select 9
            foreach c $setup { r {*}$c }
            set replies {}
            foreach cmds $pipelines { lappend replies [fzp_pipeline $cmds] }
            lappend results [list $replies [r debug digest]]
        }
        r config set prefetch-batch-max-size 16
        assert_equal [lindex $results 0] [lindex $results 1]
    }

    r select 9
    set n 5000
    fzp_fill z $n
    assert_encoding btree z
    set ::fzp_payload [r dump z]

    test {Pipelined point commands on a big sorted set: the same with and without read-ahead} {
        set pipelines {}
        for {set p 0} {$p < 40} {incr p} {
            lappend pipelines [fzp_random_cmds z $n [expr {1 + int(rand() * 200)}]]
        }
        fzp_compare [list [list restore z 0 $::fzp_payload]] $pipelines
    }

    test {Read-ahead in a pipeline that deletes, retypes, moves and shrinks its key} {
        set head [fzp_random_cmds z $n 10]
        set tail [fzp_random_cmds z $n 10]
        set pipelines {}
        # Deleted halfway: the commands after it see no key.
        lappend pipelines [concat $head {{del z}} $tail]
        # Another type under the same name.
        lappend pipelines [concat {{set z string}} $head {{del z}}]
        # Back, then moved away by a queued SELECT and MULTI.
        lappend pipelines [concat [list [list restore z 0 $::fzp_payload]] $head \
            {{multi} {zadd z 1 m:new} {zscore z m:new} {exec}} \
            {{select 10} {zscore z m:1} {zadd z 5 m:1} {select 9} {zscore z m:1}} $tail]
        # Shrunk below the listpack threshold, then bigger again.
        lappend pipelines [concat {{zremrangebyrank z 0 -100}} $head {{zunionstore z 1 z}} $tail]
        # Wrong arity, unknown options and non-numeric scores.
        lappend pipelines {{zscore z} {zadd z} {zadd z nx} {zadd z xx gt 1} {zincrby z 1} {zrem z}
                           {zadd z bogus 1 m:1} {zadd z nan m:1} {zadd z 1 m:1 2} {zmscore z} {zscore z m:1}}
        lappend pipelines [concat {{flushall}} $head]
        fzp_compare [list [list restore z 0 $::fzp_payload]] $pipelines
    }

    test {Read-ahead over many keys, big and small, in one pipeline} {
        fzp_fill big 2000
        set setup [list [list restore z 0 $::fzp_payload] [list restore big 0 [r dump big]] \
                       {zadd small 1 m:1 2 m:2} {set str x}]
        set cmds {}
        for {set i 0} {$i < 300} {incr i} {
            set key [lindex {z big small str nokey} [expr {$i % 5}]]
            lappend cmds [list zscore $key m:[expr {$i % 2500}]]
            lappend cmds [list zincrby $key 1 m:[expr {$i % 2500}]]
            lappend cmds [list zrem $key m:[expr {($i * 7) % 2500}]]
        }
        fzp_compare $setup [list $cmds]
    }

    # A big set of n 24-character members, in many segments (hpset.c).
    proc fzp_member {i} { return [format "member-%010d-abcdefg" $i] }
    proc fzp_sfill {key n} {
        r del $key
        for {set i 0} {$i < $n} {incr i 1000} {
            set args {}
            for {set j $i} {$j < $i + 1000 && $j < $n} {incr j} { lappend args [fzp_member $j] }
            r sadd $key {*}$args
        }
    }
    proc fzp_random_set_cmds {key n count} {
        set cmds {}
        for {set i 0} {$i < $count} {incr i} {
            set m [fzp_member [expr {int(rand() * ($n + $n / 4))}]]
            switch [expr {int(rand() * 6)}] {
                0 - 1 { lappend cmds [list sismember $key $m] }
                2 { lappend cmds [list sadd $key $m] }
                3 { lappend cmds [list srem $key $m [fzp_member [expr {int(rand() * $n)}]]] }
                4 { lappend cmds [list smismember $key $m [fzp_member 1] nope] }
                5 { lappend cmds [list sadd $key $m [fzp_member [expr {$n + int(rand() * $n)}]]] }
            }
        }
        return $cmds
    }

    set sn 80000
    fzp_sfill s $sn
    assert_encoding btree s
    set ::fzp_spayload [r dump s]

    test {Pipelined SISMEMBER, SADD and SREM on a big set: the same with and without read-ahead} {
        set pipelines {}
        for {set p 0} {$p < 40} {incr p} {
            lappend pipelines [fzp_random_set_cmds s $sn [expr {1 + int(rand() * 200)}]]
        }
        # Many adds and removes in one pipeline: segments grow, split and
        # merge between the read-ahead and the commands.
        set churn {}
        for {set i 0} {$i < 3000} {incr i} {
            lappend churn [list srem s [fzp_member [expr {$i * 13}]]]
            lappend churn [list sadd s [fzp_member [expr {$sn + $i}]]]
            lappend churn [list sismember s [fzp_member [expr {$i * 13 + 1}]]]
        }
        lappend pipelines $churn
        fzp_compare [list [list restore s 0 $::fzp_spayload]] $pipelines
    }

    # A big set of integers (ibset.c): its commands have the block of each
    # member asked for. Members spread over the 64-bit range, some not
    # integers (the set becomes a set of strings inside the pipeline).
    proc fzp_int {i} { return [expr {$i * 7919 - 300000}] }
    proc fzp_random_int_cmds {key n count} {
        set cmds {}
        for {set i 0} {$i < $count} {incr i} {
            set m [fzp_int [expr {int(rand() * ($n + $n / 4))}]]
            switch [expr {int(rand() * 8)}] {
                0 - 1 { lappend cmds [list sismember $key $m] }
                2 { lappend cmds [list sadd $key $m [fzp_int [expr {$n + int(rand() * $n)}]]] }
                3 { lappend cmds [list srem $key $m [fzp_int [expr {int(rand() * $n)}]]] }
                4 { lappend cmds [list smismember $key $m -9223372036854775808 9223372036854775807 1.5] }
                5 { lappend cmds [list sadd $key -9223372036854775808 9223372036854775807] }
                6 { lappend cmds [list sismember $key 0x10] }
                7 { lappend cmds [list srem $key [fzp_int [expr {int(rand() * $n)}]]] }
            }
        }
        return $cmds
    }

    test {Pipelined SISMEMBER, SMISMEMBER, SADD and SREM on a big set of integers: the same with and without read-ahead} {
        r del i
        for {set i 0} {$i < 60000} {incr i 1000} {
            set args {}
            for {set j $i} {$j < $i + 1000} {incr j} { lappend args [fzp_int $j] }
            r sadd i {*}$args
        }
        assert_encoding btree i
        set payload [r dump i]
        set pipelines {}
        for {set p 0} {$p < 30} {incr p} {
            lappend pipelines [fzp_random_int_cmds i 60000 [expr {1 + int(rand() * 200)}]]
        }
        # Turned into a set of strings halfway through a pipeline.
        lappend pipelines [concat [fzp_random_int_cmds i 60000 50] {{sadd i not-an-integer}} \
            [fzp_random_int_cmds i 60000 50]]
        lappend pipelines [concat [fzp_random_int_cmds i 60000 20] {{del i}} [fzp_random_int_cmds i 60000 20]]
        fzp_compare [list [list restore i 0 $payload]] $pipelines
    }

    test {Set read-ahead in a pipeline that deletes, retypes, moves and shrinks its key} {
        set head [fzp_random_set_cmds s $sn 10]
        set tail [fzp_random_set_cmds s $sn 10]
        set pipelines {}
        lappend pipelines [concat $head {{del s}} $tail]
        lappend pipelines [concat {{set s string}} $head {{del s}}]
        lappend pipelines [concat [list [list restore s 0 $::fzp_spayload]] $head \
            {{multi} {sadd s new} {sismember s new} {exec}} \
            [list {select 10} [list sismember s [fzp_member 1]] {sadd s x} {select 9} [list srem s [fzp_member 1]]] $tail]
        # Replaced by a small set, then by an integer set.
        lappend pipelines [concat [list [list sadd t a [fzp_member 1] [fzp_member 2]] {sinterstore s s t}] $head \
            {{del s} {sadd s 1 2 3}} $tail]
        lappend pipelines {{sismember s} {sadd s} {srem s} {sismember s a b}}
        lappend pipelines [concat {{flushall}} $head]
        fzp_compare [list [list restore s 0 $::fzp_spayload]] $pipelines
    }

    # SADDEX and ZADDEX: members after their MEMBERS n, read ahead in the
    # key and in its index of times, a tree past 128 volatile members. The
    # times are absolute, so that the replies of SPEXPIRETIME and
    # ZPEXPIRETIME, which the pipelines ask, are the same on both runs.
    proc fzp_when {} { return [expr {4102444800000 + int(rand() * 1000000)}] }
    proc fzp_random_ttl_cmds {n count} {
        set cmds {}
        for {set i 0} {$i < $count} {incr i} {
            set j [expr {int(rand() * ($n + $n / 4))}]
            set k [expr {$j + 1}]
            switch [expr {int(rand() * 10)}] {
                0 { lappend cmds [list saddex st PXAT [fzp_when] MEMBERS 2 [fzp_member $j] [fzp_member $k]] }
                1 { lappend cmds [list saddex st [lindex {MNX MXX} [expr {int(rand() * 2)}]] KEEPTTL MEMBERS 1 [fzp_member $j]] }
                2 { lappend cmds [list saddex it PXAT [fzp_when] MEMBERS 1 [fzp_int $j]] }
                3 { lappend cmds [list zaddex zt [lindex {NX XX GT LT CH} [expr {int(rand() * 5)}]] PXAT [fzp_when] MEMBERS 1 $j m:$j] }
                4 { lappend cmds [list zaddex zt MEMBERS 2 $j m:$j $k m:$k] }
                5 { lappend cmds [list spexpiretime st MEMBERS 2 [fzp_member $j] [fzp_member $k]] }
                6 { lappend cmds [list zpexpiretime zt MEMBERS 1 m:$j] }
                7 { lappend cmds [list spexpiretime it MEMBERS 1 [fzp_int $j]] }
                8 { lappend cmds [list srem st [fzp_member $j]] }
                9 { lappend cmds [list zaddex zt PXAT 1 MEMBERS 1 $j m:$j] }
            }
        }
        return $cmds
    }

    test {Pipelined SADDEX and ZADDEX on big keys with big indexes of times: the same with and without read-ahead} {
        set n 3000
        set sargs {}
        set iargs {}
        set zargs {}
        set svol {}
        set ivol {}
        set zvol {}
        for {set i 0} {$i < $n} {incr i} {
            lappend sargs [fzp_member $i]
            lappend iargs [fzp_int $i]
            lappend zargs $i m:$i
            if {$i % 3 == 0} {
                lappend svol [fzp_member $i]
                lappend ivol [fzp_int $i]
                lappend zvol m:$i
            }
        }
        set setup [list [list sadd st {*}$sargs] [list sadd it {*}$iargs] [list zadd zt {*}$zargs] \
            [list spexpireat st 4102444800000 MEMBERS [llength $svol] {*}$svol] \
            [list spexpireat it 4102444800000 MEMBERS [llength $ivol] {*}$ivol] \
            [list zpexpireat zt 4102444800000 MEMBERS [llength $zvol] {*}$zvol]]
        set pipelines {}
        for {set p 0} {$p < 20} {incr p} {
            lappend pipelines [fzp_random_ttl_cmds $n [expr {1 + int(rand() * 200)}]]
        }
        # MEMBERS where an option or a member may stand, wrong counts, and
        # the key deleted or retyped halfway.
        set when [fzp_when]
        lappend pipelines [list {saddex st MEMBERS} {zaddex zt MEMBERS 1} [list saddex st PXAT $when MEMBERS 1 members] \
            [list saddex st MEMBERS 1 x PXAT $when] [list zaddex zt MEMBERS 1 1 MEMBERS] {saddex st MEMBERS 2 a} \
            {spexpiretime st MEMBERS 2 members x}]
        # Every member's time at the end.
        set all [list [list spexpiretime st MEMBERS [expr {$n + $n / 4 + 1}]] [list spexpiretime it MEMBERS [expr {$n + $n / 4 + 1}]] \
                     [list zpexpiretime zt MEMBERS [expr {$n + $n / 4 + 1}]]]
        for {set i 0} {$i <= $n + $n / 4} {incr i} {
            lset all 0 end+1 [fzp_member $i]
            lset all 1 end+1 [fzp_int $i]
            lset all 2 end+1 m:$i
        }
        lappend pipelines [fzp_random_ttl_cmds $n 50] $all
        lappend pipelines [concat [fzp_random_ttl_cmds $n 20] {{del zt} {set st string}} [fzp_random_ttl_cmds $n 20]]
        fzp_compare $setup $pipelines
    }
}
