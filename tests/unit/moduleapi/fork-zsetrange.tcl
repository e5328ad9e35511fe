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

    test "Unload the module - forkzrange" {
        assert_equal {OK} [r module unload forkzrange]
    }
}
