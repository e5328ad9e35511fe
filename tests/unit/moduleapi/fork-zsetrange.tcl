# The module API's sorted-set range iterators, on both encodings: every walk
# (by score and by lex, first-to-last with RangeNext and last-to-first with
# RangePrev) must give what ZRANGEBYSCORE / ZRANGEBYLEX and their REV forms
# give, and the iterator must stay on the last entry once the end is reached.
# Upstream's module tests do not walk ranges; the iterators of a big sorted
# set are ours (a cursor into the tree instead of a skiplist node).
set testmodule [file normalize tests/modules/forkzrange.so]

proc fork_score_bound {v ex} {
    if {$ex} { return "($v" }
    return $v
}

start_server {tags {"modules fork"}} {
    r module load $testmodule

    foreach {encoding size} {listpack 100 btree 3000} {
        test "Module range iterators by score match ZRANGEBYSCORE - $encoding" {
            r del z
            set args {}
            for {set i 0} {$i < $size} {incr i} {
                lappend args [expr {int(rand() * $size / 4)}] m[expr {int(rand() * 1000000)}]
            }
            r zadd z {*}$args
            assert_encoding $encoding z
            for {set j 0} {$j < 60} {incr j} {
                set a [expr {int(rand() * $size / 4) - 2}]
                set b [expr {$a + int(rand() * $size / 8)}]
                if {$j % 10 == 0} { set a -inf }
                if {$j % 15 == 0} { set b +inf }
                set minex [expr {int(rand() * 2)}]
                set maxex [expr {int(rand() * 2)}]
                set lo [fork_score_bound $a $minex]
                set hi [fork_score_bound $b $maxex]
                set fwd [r zrangebyscore z $lo $hi withscores]
                set rev [r zrevrangebyscore z $hi $lo withscores]
                set tail [expr {[llength $fwd] ? "stayed" : ""}]
                assert_equal [concat $fwd [list $tail]] [r forkz.score z $a $b $minex $maxex fwd]
                assert_equal [concat $rev [list $tail]] [r forkz.score z $a $b $minex $maxex rev]
            }
        }

        test "Module range iterators by lex match ZRANGEBYLEX - $encoding" {
            r del z
            set args {}
            for {set i 0} {$i < $size} {incr i} {
                lappend args 0 [randstring 1 6 alpha]
            }
            r zadd z {*}$args
            assert_encoding $encoding z
            for {set j 0} {$j < 60} {incr j} {
                set lo "\[[randstring 1 3 alpha]"
                set hi "([randstring 1 3 alpha]"
                if {$j % 10 == 0} { set lo - }
                if {$j % 15 == 0} { set hi + }
                set fwd [r zrangebylex z $lo $hi]
                set rev [r zrevrangebylex z $hi $lo]
                set got_fwd {}
                set got_rev {}
                set res_fwd [r forkz.lex z $lo $hi fwd]
                set res_rev [r forkz.lex z $lo $hi rev]
                foreach {m s} [lrange $res_fwd 0 end-1] { lappend got_fwd $m }
                foreach {m s} [lrange $res_rev 0 end-1] { lappend got_rev $m }
                assert_equal $fwd $got_fwd
                assert_equal $rev $got_rev
                set tail [expr {[llength $fwd] ? "stayed" : ""}]
                assert_equal $tail [lindex $res_fwd end]
                assert_equal $tail [lindex $res_rev end]
            }
        }
    }

    test "Module range iterators on an empty range and a missing key" {
        r del z nokey
        r zadd z 1 a 2 b
        assert_equal {{}} [r forkz.score z 5 6 0 0 fwd]
        assert_error "*no sorted set*" {r forkz.score nokey 0 1 0 0 fwd}
    }

    # The set changes under the iterator (upstream's API does not forbid it):
    # a skiplist's node stays put, so upstream's walk survives; ours finds
    # its place again from the entry it is on.
    foreach by {score lex} {
        foreach dir {fwd rev} {
            test "Module range iterator removes the member it left at each step - $by $dir" {
                r del z
                set args {}
                for {set i 0} {$i < 500} {incr i} {
                    if {$by eq "lex"} { lappend args 0 [format m%04d $i] } else { lappend args $i m$i }
                }
                r zadd z {*}$args
                assert_encoding btree z
                assert_equal 500 [r forkz.walkdel z $by $dir]
                assert_equal 0 [r exists z]

                # The same walk over a listpack.
                r zadd z 1 a 2 b 3 c 4 d
                assert_equal 4 [r forkz.walkdel z $by $dir]
                assert_equal 0 [r exists z]
            }
        }
    }

    test "Module range iterator over a listpack that becomes a tree under it" {
        foreach how {stop close} {
            r del z
            r zadd z 1 a 2 b 3 c
            assert_equal OK [r forkz.grow z 300 $how]
            assert_encoding btree z
            assert_equal 303 [r zcard z]
            assert_equal {1} [r zscore z a]
            assert_equal OK [r debug btree z check]
        }
        r del z
        r zadd z 1 a 2 b 3 c
        set walked [r forkz.grow z 300 walk]
        assert_encoding btree z
        assert_equal [r zrange z 0 -1] $walked
        # A growth that stays in the listpack moves its entries too.
        r del z
        r zadd z 1 a 2 b 3 c
        assert_equal [list a b c grow:0 grow:1] [r forkz.grow z 2 walk]
        assert_encoding listpack z
    }

    test "Module range iterator on a key emptied under it, closed without a stop" {
        r del z
        set args {}
        for {set i 0} {$i < 1000} {incr i} { lappend args $i m$i }
        r zadd z {*}$args
        assert_equal 1000 [r forkz.drain z]
        assert_equal 0 [r exists z]
        # On a listpack, removing the current member moves the next one
        # under the iterator, which then steps past it (upstream does the
        # same): whatever it removed, the set agrees.
        r zadd z 1 a 2 b 3 c 4 d 5 e
        set removed [r forkz.drain z]
        assert_equal [expr {5 - $removed}] [r zcard z]
        assert_equal PONG [r ping]
    }

    test "Unload the module - forkzrange" {
        assert_equal {OK} [r module unload forkzrange]
    }
}
