# Big sets in the fork's own encoding (issue #19), on our server alone.
#
# A set past set-max-intset-entries (integers) or set-max-listpack-entries /
# set-max-listpack-value (anything else) lives in the fork's packed
# structure instead of upstream's hashtable, and OBJECT ENCODING says
# "btree", as it does for a big sorted set. Everything else a client sees
# is upstream's. This file checks:
#   - the conversions at the thresholds, default and configured, and a set
#     of integers that gets a string member;
#   - the integer form of a big set (src/ibset.c, DEBUG BTREE's
#     form:integers): kept through COPY, DEBUG RELOAD and DUMP/RESTORE,
#     left for the string form by every spelling that is no integer, its
#     invariants (DEBUG BTREE CHECK) through random adds and removes, and its
#     SSCAN cursors;
#   - every set command on big sets against a Tcl model, after random
#     operations, with default and with tiny thresholds;
#   - SSCAN's guarantee while the set grows, shrinks and changes form;
#   - SPOP and SRANDMEMBER uniformity (chi-square, as upstream's
#     unit/type/set.tcl), also on a set with unevenly thinned regions;
#   - MEMORY USAGE, DEBUG DIGEST-VALUE through DEBUG RELOAD and DUMP/RESTORE,
#     keyspace notifications, lazy free;
#   - corrupt RESTORE payloads of a big set (duplicates, bad lengths,
#     truncation), rejected without a crash.
# Tests that name the encoding assert "btree"; the others only assert that
# a set is past its intset/listpack (fs_assert_big), whatever the name.
# Comparisons with the reference build are in integration/fork-setcompat.

set ::fs_big_encoding btree

# Big sets filled on the server: ::fork_sfill_lua.
source tests/helpers/fork-sfill.tcl
source tests/helpers/fork-payload.tcl

# The set at `key` is past its intset/listpack.
proc fs_assert_big {key} {
    set enc [r object encoding $key]
    if {$enc in {intset listpack}} { fail "$key is $enc, not a big set" }
}

proc fs_int64 {} {
    expr {((int(rand() * 4294967296) << 32) | int(rand() * 4294967296)) - 9223372036854775808}
}

set ::fs_int_edges {-9223372036854775808 9223372036854775807 -9223372036854775807 9223372036854775806
                    0 -1 1 127 128 -128 -129 255 256 32767 32768 -32768 -32769 65535 65536
                    2147483647 2147483648 -2147483648 -2147483649 4294967295 4294967296
                    9007199254740992 9007199254740993 -9007199254740993}
# Spellings of integers that are not an integer's canonical form, and
# numbers that are not 64-bit integers: strings to a set.
set ::fs_not_ints {007 -0 +1 " 1" "1 " 1.0 0x10 1e3 00 - + 9223372036854775808 -9223372036854775809
                   18446744073709551616 1.5 -.5 inf nan}

# SADD of `members` to `key`, 1,000 at a time.
proc fs_sadd {key members} {
    for {set i 0} {$i < [llength $members]} {incr i 1000} {
        r sadd $key {*}[lrange $members $i [expr {$i + 999}]]
    }
}

proc fs_srem {key members} {
    for {set i 0} {$i < [llength $members]} {incr i 1000} {
        r srem $key {*}[lrange $members $i [expr {$i + 999}]]
    }
}

# Members of a shape: random integers below 10^8 (distinct), consecutive
# integers from `from`, random 24-character strings.
proc fs_shape {shape n {from 0}} {
    set ms {}
    switch $shape {
        rand {
            set seen [dict create]
            while {[dict size $seen] < $n} { dict set seen [randomInt 100000000] 1 }
            set ms [dict keys $seen]
        }
        seq { for {set i 0} {$i < $n} {incr i} { lappend ms [expr {$from + $i}] } }
        str {
            for {set i 0} {$i < $n} {incr i} {
                lappend ms [format %08x%08x%08x [randomInt 4294967296] [randomInt 4294967296] [randomInt 4294967296]]
            }
        }
    }
    return $ms
}

# The test client writes a command in chunks of its channel's buffer
# (4 KB): a SADD of 1,000 members then waits on TCP's delayed ACK (about
# 40 ms a command). One buffer holds a whole command.
proc fs_fast_client {} {
    fconfigure [r channel] -buffersize 1048576
}

# Asserts that `key` holds exactly the members of the list `members`.
proc fs_assert_members {key members} {
    set want [lsort -unique $members]
    set got [lsort [r smembers $key]]
    assert_equal [llength $want] [r scard $key] "SCARD of $key"
    if {$got ne $want} {
        set i 0
        while {[lindex $got $i] eq [lindex $want $i]} { incr i }
        fail "SMEMBERS of $key differs from the model at $i of [llength $got]/[llength $want]:\
              '[lindex $got $i]' / '[lindex $want $i]'"
    }
}

# Upper limit of a chi-square statistic with `df` degrees of freedom at
# probability 1e-5 (Wilson-Hilferty; 40 for df = 9, upstream's limit).
proc fs_chi2_limit {df} {
    set z 4.2649
    set a [expr {2.0 / (9.0 * $df)}]
    expr {$df * pow(1 - $a + $z * sqrt($a), 3)}
}

# Chi-square of `draws` against the uniform distribution over `members`
# (every member counted, also those never drawn).
proc fs_chi2_uniform {draws members} {
    set counts [dict create]
    foreach m $members { dict set counts $m 0 }
    foreach d $draws {
        if {![dict exists $counts $d]} { fail "drew '$d', not a member" }
        dict incr counts $d
    }
    set e [expr {double([llength $draws]) / [llength $members]}]
    set x2 0.0
    dict for {m c} $counts { set x2 [expr {$x2 + ($c - $e) * ($c - $e) / $e}] }
    return $x2
}

# The z-score of how many of `draws` fall in the subset `part` (a dict) of
# `n` members, against a uniform draw.
proc fs_part_z {draws part n} {
    set hit 0
    foreach d $draws { if {[dict exists $part $d]} { incr hit } }
    set p [expr {double([dict size $part]) / $n}]
    set d [llength $draws]
    expr {($hit - $d * $p) / sqrt($d * $p * (1 - $p))}
}

# Asserts that `draws` look uniform over `members` (a list in the set's
# order): chi-square over 100 runs of consecutive members, the share of the
# subset `part`, and, when each member is expected at least 5 times,
# chi-square over the members themselves. Draws made without repetition
# within a call spread more evenly than independent ones, which only makes
# the limits looser for them.
proc fs_assert_uniform {draws members part what} {
    set n [llength $members]
    set nb 100
    set bucket [dict create]
    set sizes [lrepeat $nb 0]
    for {set i 0} {$i < $n} {incr i} {
        set b [expr {$i * $nb / $n}]
        dict set bucket [lindex $members $i] $b
        lset sizes $b [expr {[lindex $sizes $b] + 1}]
    }
    set counts [lrepeat $nb 0]
    foreach d $draws {
        if {![dict exists $bucket $d]} { fail "$what: drew '$d', not a member" }
        set b [dict get $bucket $d]
        lset counts $b [expr {[lindex $counts $b] + 1}]
    }
    set x2 0.0
    set total [llength $draws]
    for {set b 0} {$b < $nb} {incr b} {
        set e [expr {double($total) * [lindex $sizes $b] / $n}]
        set o [lindex $counts $b]
        set x2 [expr {$x2 + ($o - $e) * ($o - $e) / $e}]
    }
    assert_lessthan $x2 [fs_chi2_limit [expr {$nb - 1}]] "$what: chi-square over runs of members"
    assert_lessthan [expr {abs([fs_part_z $draws $part $n])}] 5 "$what: z-score of the thinned half"
    if {$total >= 5 * $n} {
        assert_lessthan [fs_chi2_uniform $draws $members] [fs_chi2_limit [expr {$n - 1}]] \
            "$what: chi-square over members"
    }
}

start_server {
    tags {"fork" "set" "external:skip" "needs:debug"}
    overrides {
        "set-max-intset-entries" 512
        "set-max-listpack-entries" 128
        "set-max-listpack-value" 64
    }
} {
    proc fs_thresholds {intset entries value} {
        r config set set-max-intset-entries $intset
        r config set set-max-listpack-entries $entries
        r config set set-max-listpack-value $value
        return
    }

    fs_fast_client

    # ------------------------------------------------------------------
    # Encodings
    # ------------------------------------------------------------------

    test "A set of integers is btree past set-max-intset-entries" {
        r del s
        for {set i 0} {$i < 512} {incr i} { r sadd s [expr {$i * 3 - 700}] }
        assert_encoding intset s
        r sadd s 100000
        assert_encoding $::fs_big_encoding s
        assert_equal 513 [r scard s]
        # One SADD past the threshold makes a big set at once; at it, an intset.
        set ms {}
        for {set i 0} {$i < 513} {incr i} { lappend ms $i }
        r del a b
        r sadd a {*}[lrange $ms 0 511]
        assert_encoding intset a
        r sadd b {*}$ms
        assert_encoding $::fs_big_encoding b
        fs_assert_members b $ms
    }

    test "A set of strings is btree past set-max-listpack-entries and -value" {
        r del s
        for {set i 0} {$i < 128} {incr i} { r sadd s m:$i }
        assert_encoding listpack s
        r sadd s m:128
        assert_encoding $::fs_big_encoding s
        r del s
        r sadd s a [string repeat x 64]
        assert_encoding listpack s
        r sadd s [string repeat y 65]
        assert_encoding $::fs_big_encoding s
        fs_assert_members s [list a [string repeat x 64] [string repeat y 65]]
        # An integer set gets a member too long for a listpack.
        r del s
        r sadd s 1 2 3
        assert_encoding intset s
        r sadd s [string repeat z 65]
        assert_encoding $::fs_big_encoding s
        fs_assert_members s [list 1 2 3 [string repeat z 65]]
    }

    test "A set of integers gets a string member" {
        # A small intset becomes a listpack, a bigger one (past the
        # listpack's entries) a big set; a big integer set stays big.
        foreach {n enc} [list 100 listpack 200 $::fs_big_encoding 600 $::fs_big_encoding 5000 $::fs_big_encoding] {
            r del s
            set ms [fs_shape rand $n]
            fs_sadd s $ms
            assert_equal 1 [r sadd s hello]
            lappend ms hello
            assert_encoding $enc s
            fs_assert_members s $ms
            assert_equal {1 1 0} [r smismember s hello [lindex $ms 0] nosuch]
        }
        # Integers spelled otherwise are strings, beside the integers.
        r del s
        set ms [fs_shape seq 1000 -500]
        fs_sadd s $ms
        assert_equal [llength $::fs_not_ints] [r sadd s {*}$::fs_not_ints]
        assert_equal 0 [r sadd s 7 -1 0 1 499 -500]
        assert_encoding $::fs_big_encoding s
        fs_assert_members s [concat $ms $::fs_not_ints]
        foreach m $::fs_not_ints { assert_equal 1 [r sismember s $m] "SISMEMBER '$m'" }
        assert_equal 2 [r srem s 007 -0]
        assert_equal 0 [r srem s -0]
        assert_equal {1 1 0 0} [r smismember s 7 0 007 -0]
        # The edges of the 64-bit range are integers; one past them is not.
        r del s
        fs_sadd s [fs_shape seq 600]
        r sadd s {*}$::fs_int_edges
        fs_assert_members s [concat [fs_shape seq 600] $::fs_int_edges]
        assert_equal {1 1 0} [r smismember s -9223372036854775808 9223372036854775807 9223372036854775808]
        r sadd s x
        fs_assert_members s [concat [fs_shape seq 600] $::fs_int_edges x]
    }

    # The form of a big set: "integers" (ibset.c) or "strings" (hpset.c).
    proc fs_form {key} {
        set first [lindex [split [r debug btree $key] "\r\n"] 0]
        expr {$first eq "form:integers" ? "integers" : "strings"}
    }

    test "A big set of integers keeps them in the integer form until a string arrives" {
        r del s
        set ms [concat [fs_shape seq 3000 -1000] [fs_shape rand 2000] $::fs_int_edges]
        fs_sadd s $ms
        assert_equal integers [fs_form s]
        assert_equal OK [r debug btree s check]
        # Ascending, as an intset lists its members.
        set ms [lsort -integer -unique $ms]
        assert_equal $ms [r smembers s]
        assert_equal [llength $ms] [r scard s]
        assert_equal [lsort -integer [r sinter s]] [r sinter s]
        # COPY, DEBUG RELOAD and DUMP/RESTORE keep the form and the members.
        r copy s s2
        assert_equal integers [fs_form s2]
        r debug reload
        assert_equal integers [fs_form s]
        assert_equal OK [r debug btree s check]
        set dump [r dump s]
        r del s3
        r restore s3 0 $dump
        assert_equal integers [fs_form s3]
        assert_equal $ms [r smembers s3]
        # Each spelling that is not an integer's moves a set to the string
        # form, beside its integers.
        foreach m $::fs_not_ints {
            r del t
            fs_sadd t [lrange $ms 0 599]
            assert_equal integers [fs_form t]
            assert_equal 1 [r sadd t $m]
            assert_equal strings [fs_form t]
            assert_equal OK [r debug btree t check]
            fs_assert_members t [concat [lrange $ms 0 599] [list $m]]
        }
        # The string form stays when the string goes.
        assert_equal 1 [r srem t [lindex $::fs_not_ints end]]
        assert_equal strings [fs_form t]
        assert_encoding $::fs_big_encoding t
        # A set created big from strings, and an RDB set whose first
        # members are integers, then a string.
        r del u
        r sadd u {*}[lrange $ms 0 599] hello
        assert_equal strings [fs_form u]
        r debug reload
        assert_equal strings [fs_form u]
        fs_assert_members u [concat [lrange $ms 0 599] hello]
    }

    test "A big set of strings stores members of every kind, packed or not, and gives them back byte for byte" {
        # src/setpack.c: hex, lowercase and base64url members are packed,
        # other members stored as they are; members starting with bytes
        # 0xF8..0xFF escaped. Each kind at lengths around where packing
        # starts to pay and past SPK_MAX_CHARS (128).
        r del p
        set ms {}
        set abcs [list 0123456789abcdef abcdefghijklmnopqrstuvwxyz-_.:@/ \
                      0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_ \
                      "abc DEF!~"]
        foreach abc $abcs {
            foreach len {0 1 2 3 4 5 6 7 8 9 15 16 17 23 24 25 31 32 33 63 64 65 127 128 129 200 300} {
                for {set k 0} {$k < 3} {incr k} {
                    set m ""
                    for {set i 0} {$i < $len} {incr i} {
                        append m [string index $abc [randomInt [string length $abc]]]
                    }
                    lappend ms $m
                }
            }
        }
        # UTF-8 text: stored as it is (its first byte is below 0xF8).
        foreach text [list "caf\u00e9" "\u65e5\u672c\u8a9e" "\u00e9t\u00e9-[string repeat a 30]"] {
            lappend ms [encoding convertto utf-8 $text]
        }
        foreach first {248 249 250 254 255} {
            foreach len {1 2 10 100 200} {
                lappend ms [binary format c $first][string repeat x [expr {$len - 1}]]
            }
        }
        set ms [lsort -unique $ms]
        fs_sadd p $ms
        assert_equal strings [fs_form p]
        assert_equal OK [r debug btree p check]
        fs_assert_members p $ms
        # SISMEMBER and SMISMEMBER (batches of more than 16) of members and
        # of near misses: one byte more, one byte less.
        set probe {}
        foreach m $ms {
            assert_equal 1 [r sismember p $m]
            lappend probe $m "${m}z"
            if {[string length $m] > 1} { lappend probe [string range $m 1 end] }
        }
        set want {}
        foreach m $probe { lappend want [expr {[lsearch -exact $ms $m] >= 0}] }
        assert_equal $want [r smismember p {*}$probe]
        # SSCAN and SRANDMEMBER give members as they were added.
        set seen {}
        set cur 0
        while 1 {
            lassign [r sscan p $cur count 17] cur got
            lappend seen {*}$got
            if {$cur == 0} break
        }
        assert_equal $ms [lsort -unique $seen]
        foreach m [r srandmember p 50] { assert {[lsearch -exact $ms $m] >= 0} }
        # Through DEBUG RELOAD and DUMP/RESTORE, and out again.
        r debug reload
        fs_assert_members p $ms
        r restore p2 0 [r dump p]
        fs_assert_members p2 $ms
        assert_equal [r debug digest-value p] [r debug digest-value p2]
        fs_srem p $ms
        assert_equal 0 [r exists p]
    }

    test "Random SADD and SREM of integers keep the blocks' invariants" {
        r del s
        set model [dict create]
        for {set round 0} {$round < 40} {incr round} {
            # Dense runs (bitmaps), clustered and sparse values (arrays of
            # each width), then deletes that thin and empty blocks.
            set base [expr {[randomInt 5] * 1000000000000 - 2000000000000}]
            set batch {}
            for {set i 0} {$i < 500} {incr i} {
                switch [randomInt 3] {
                    0 { lappend batch [expr {$base + [randomInt 5000]}] }
                    1 { lappend batch [expr {$base + [randomInt 100000000]}] }
                    2 { lappend batch [fs_int64] }
                }
            }
            r sadd s {*}$batch
            foreach m $batch { dict set model $m 1 }
            set gone [lrange [lshuffle [dict keys $model]] 0 [expr {[dict size $model] / 3}]]
            fs_srem s $gone
            foreach m $gone { dict unset model $m }
            if {[dict size $model] > 600} {
                assert_equal integers [fs_form s]
                assert_equal OK [r debug btree s check]
            }
            assert_equal [dict size $model] [r scard s]
        }
        assert_equal [lsort -integer [dict keys $model]] [r smembers s]
    }

    test "SSCAN of a big set of integers: every member once, cursors in 2^62 .. 2^63" {
        r del s
        set ms [lsort -integer -unique [concat [fs_shape seq 2000 -1000] [fs_shape rand 1000] $::fs_int_edges]]
        fs_sadd s $ms
        assert_equal integers [fs_form s]
        foreach count {1 3 10 100} {
            set seen {}
            set cursor 0
            set calls 0
            while 1 {
                lassign [r sscan s $cursor count $count] cursor batch
                lappend seen {*}$batch
                incr calls
                if {$cursor == 0} break
                assert_range $cursor 4611686018427387904 9223372036854775807
                assert_lessthan_equal [llength $batch] [expr {$count + 3}]
            }
            assert_equal [llength $ms] [llength $seen] "COUNT $count: each member once"
            assert_equal $ms [lsort -integer $seen]
        }
        # A cursor of the integer form given to the string form (the set
        # moved mid-scan) starts it again: nothing is missed.
        lassign [r sscan s 0 count 100] cursor batch
        set seen $batch
        r sadd s hello
        assert_equal strings [fs_form s]
        while 1 {
            lassign [r sscan s $cursor count 100] cursor batch
            lappend seen {*}$batch
            if {$cursor == 0} break
        }
        assert_equal [lsort [concat $ms hello]] [lsort -unique $seen]
    }

    test "Conversions at configured thresholds" {
        fs_thresholds 4 6 8
        r del i l
        r sadd i 1 2 3 4
        assert_encoding intset i
        r sadd i 5
        assert_encoding $::fs_big_encoding i
        r sadd l a b c d e f
        assert_encoding listpack l
        r sadd l g
        assert_encoding $::fs_big_encoding l
        r del l
        r sadd l 12345678
        r sadd l abcdefgh
        assert_encoding listpack l
        r sadd l abcdefghi
        assert_encoding $::fs_big_encoding l
        # An intset of 4 with a string: 5 fit a listpack (6), 7 do not.
        r del i
        r sadd i 1 2 3 4
        r sadd i x
        assert_encoding listpack i
        r sadd i y z
        assert_encoding $::fs_big_encoding i
        fs_assert_members i {1 2 3 4 x y z}
        # Thresholds of 0: every set is big from its first member.
        fs_thresholds 0 0 0
        r del a b
        r sadd a 1
        assert_encoding $::fs_big_encoding a
        r sadd b x
        assert_encoding $::fs_big_encoding b
        assert_equal {1} [r smembers a]
        assert_equal 1 [r srem a 1]
        assert_equal 0 [r exists a]
        fs_thresholds 512 128 64
    } {} {needs:config}

    test "A big set that shrinks stays big, and loads by the thresholds" {
        foreach {shape small} {seq intset str listpack} {
            r del s
            set ms [fs_shape $shape 2000]
            fs_sadd s $ms
            fs_srem s [lrange $ms 3 end]
            # As upstream's hashtable: no conversion back while it lives.
            assert_encoding $::fs_big_encoding s
            fs_assert_members s [lrange $ms 0 2]
            # An RDB load makes it by its size.
            r debug reload
            assert_encoding $small s
            fs_assert_members s [lrange $ms 0 2]
        }
    }

    test "OBJECT ENCODING is btree for big sets of every shape and origin" {
        r flushall
        fs_sadd int:rand [fs_shape rand 20000]
        fs_sadd int:seq [fs_shape seq 20000 -10000]
        fs_sadd str:rand [fs_shape str 20000]
        fs_sadd mixed [fs_shape rand 20000]
        r sadd mixed a-string
        fs_sadd wide [lmap i [lrepeat 2000 x] {fs_int64}]
        set keys {int:rand int:seq str:rand mixed wide}
        foreach k $keys { assert_encoding $::fs_big_encoding $k }
        # After an RDB load, a RESTORE, and as results of the STORE forms,
        # SMOVE, SPOP with a count, COPY and SORT ... STORE's source.
        r debug reload
        foreach k $keys {
            assert_encoding $::fs_big_encoding $k
            r restore restored:$k 0 [r dump $k]
            assert_encoding $::fs_big_encoding restored:$k
        }
        r sunionstore u int:seq int:rand
        r sinterstore i int:seq restored:int:seq
        r sdiffstore d str:rand int:seq
        foreach k {u i d} { assert_encoding $::fs_big_encoding $k }
        r copy str:rand c
        assert_encoding $::fs_big_encoding c
        r spop int:rand 100
        assert_encoding $::fs_big_encoding int:rand
        r del small
        r sadd small 1
        foreach m [r srandmember int:seq 600] { r smove int:seq small $m }
        assert_encoding $::fs_big_encoding small
        # A small STORE result is an intset or a listpack, as upstream.
        r sinterstore i2 int:seq small:none
        assert_equal 0 [r exists i2]
        r sadd sm1 1 2 3
        r sinterstore i3 int:seq sm1
        assert_encoding intset i3
    }

    # ------------------------------------------------------------------
    # Every command against a model
    # ------------------------------------------------------------------

    # The model: ::fm(key) is a dict of the members of `key`. fa and fd
    # hold integers only (two big integer sets, for SINTER's merges), fb
    # strings, fc both; fx and fy take the STORE results (often integers
    # that later get strings).
    proc fs_model_reset {keys} {
        array unset ::fm
        foreach k $keys { set ::fm($k) [dict create]; r del $k }
    }

    # A random member for `key`, of the domain the current run gives it.
    proc fs_gen {key} {
        set dom [dict get $::fs_domains $key]
        if {$dom eq "mixed"} { set dom [expr {rand() < 0.5 ? "int" : "str"}] }
        set r [randomInt 100]
        if {$dom eq "int"} {
            if {$r < 88} { return [expr {[randomInt [expr {2 * $::fs_span}]] - $::fs_span}] }
            if {$r < 94} { return [expr {[randomInt 2000000000000] - 1000000000000}] }
            if {$r < 97} { return [fs_int64] }
            return [lindex $::fs_int_edges [randomInt [llength $::fs_int_edges]]]
        }
        if {$r < 88} { return m:[randomInt $::fs_span] }
        if {$r < 92} { return $::fs_long[randomInt 20] }
        # Binary, without NUL (SORT ALPHA's strcoll stops at one).
        if {$r < 94} { return [string map {"\x00" "\x01"} [randstring 0 12 binary]] }
        if {$r < 95} { return {} }
        return [lindex $::fs_not_ints [randomInt [llength $::fs_not_ints]]]
    }

    proc fs_gen_n {key n} {
        set ms {}
        for {set i 0} {$i < $n} {incr i} { lappend ms [fs_gen $key] }
        return $ms
    }

    # `n` random members of the model of `key` (fewer if it has fewer).
    proc fs_model_pick {key n} {
        set all [dict keys $::fm($key)]
        set ms {}
        if {[llength $all] == 0} { return $ms }
        for {set i 0} {$i < $n} {incr i} { lappend ms [lindex $all [randomInt [llength $all]]] }
        return $ms
    }

    proc fs_pick {list} { lindex $list [randomInt [llength $list]] }

    # Whether `m` is an integer to a set (what an intset holds): the
    # canonical spelling of a signed 64-bit integer.
    proc fs_is_int {m} {
        expr {[regexp {^(0|-?[1-9][0-9]{0,18})$} $m] && $m >= -9223372036854775808 && $m <= 9223372036854775807}
    }

    # Set algebra on the model.
    proc fs_model_op {op keys} {
        set res [dict create]
        set first [lindex $keys 0]
        if {$op eq "union"} {
            foreach k $keys { foreach m [dict keys $::fm($k)] { dict set res $m 1 } }
            return $res
        }
        foreach m [dict keys $::fm($first)] {
            set keep 1
            foreach k [lrange $keys 1 end] {
                set in [dict exists $::fm($k) $m]
                if {($op eq "inter" && !$in) || ($op eq "diff" && $in)} { set keep 0; break }
            }
            if {$keep} { dict set res $m 1 }
        }
        return $res
    }

    proc fs_assert_same_members {got want what} {
        set got [lsort $got]
        set want [lsort $want]
        if {$got ne $want} {
            fail "$what: [llength $got] members, the model [llength $want];\
                  first differences: [lrange [fs_list_diff $got $want] 0 5]"
        }
    }

    proc fs_list_diff {a b} {
        set out {}
        foreach m $a { if {[lsearch -exact -sorted $b $m] < 0} { lappend out "+$m" } }
        foreach m $b { if {[lsearch -exact -sorted $a $m] < 0} { lappend out "-$m" } }
        return $out
    }

    # The server's own ALPHA order of the model's members, from a list
    # (so the collation is the server's).
    proc fs_sort_alpha_expected {key args} {
        r del fs:sortlist
        set ms [dict keys $::fm($key)]
        for {set i 0} {$i < [llength $ms]} {incr i 1000} {
            r rpush fs:sortlist {*}[lrange $ms $i [expr {$i + 999}]]
        }
        set res [r sort fs:sortlist alpha {*}$args]
        r del fs:sortlist
        return $res
    }

    proc fs_check_key {key} {
        set want [dict keys $::fm($key)]
        if {[llength $want] == 0} {
            assert_equal 0 [r exists $key] "$key should not exist"
            return
        }
        assert_equal set [r type $key]
        fs_assert_members $key $want
        if {[llength $want] > $::fs_small_max} { fs_assert_big $key }
    }

    # A full SSCAN with random COUNTs, no change during it: every member
    # at least once, nothing else.
    proc fs_check_sscan {key} {
        set seen [dict create]
        set cursor 0
        set calls 0
        while 1 {
            lassign [r sscan $key $cursor count [expr {1 + [randomInt 200]}]] cursor ms
            foreach m $ms {
                if {![dict exists $::fm($key) $m]} { fail "SSCAN $key returned '$m', not a member" }
                dict set seen $m 1
            }
            if {$cursor == 0} break
            if {[incr calls] > 100000} { fail "SSCAN $key does not end" }
        }
        assert_equal [dict size $::fm($key)] [dict size $seen] "members SSCAN $key returned"
    }

    # One random command on the server and on the model, its reply checked.
    proc fs_random_op {} {
        set wkeys {fa fb fc fd fx fy}
        set rkeys {fa fb fc fd fx fy fnone}
        set k [fs_pick $wkeys]
        set n [dict size $::fm($k)]
        set r [randomInt 1000]
        if {$r < 230} {
            set ms [fs_gen_n $k [expr {1 + [randomInt 8]}]]
            set new [dict create]
            foreach m $ms { if {![dict exists $::fm($k) $m]} { dict set new $m 1 } }
            assert_equal [dict size $new] [r sadd $k {*}$ms] "SADD $k"
            foreach m $ms { dict set ::fm($k) $m 1 }
        } elseif {$r < 380} {
            set ms [concat [fs_model_pick $k [randomInt 6]] [fs_gen_n $k [randomInt 3]]]
            if {[llength $ms] == 0} { set ms [fs_gen_n $k 1] }
            set gone [dict create]
            foreach m $ms { if {[dict exists $::fm($k) $m]} { dict set gone $m 1 } }
            assert_equal [dict size $gone] [r srem $k {*}$ms] "SREM $k"
            foreach m $ms { dict unset ::fm($k) $m }
        } elseif {$r < 450} {
            set m [if {rand() < 0.5 && $n} { lindex [fs_model_pick $k 1] 0 } else { fs_gen $k }]
            assert_equal [dict exists $::fm($k) $m] [r sismember $k $m] "SISMEMBER $k '$m'"
        } elseif {$r < 500} {
            set ms [concat [fs_model_pick $k 3] [fs_gen_n $k 3]]
            set want [lmap m $ms {dict exists $::fm($k) $m}]
            assert_equal $want [r smismember $k {*}$ms] "SMISMEMBER $k"
        } elseif {$r < 520} {
            assert_equal $n [r scard $k] "SCARD $k"
        } elseif {$r < 560} {
            set m [r spop $k]
            if {$n == 0} {
                assert_equal {} $m
            } else {
                assert {[dict exists $::fm($k) $m]}
                dict unset ::fm($k) $m
            }
        } elseif {$r < 600} {
            set c [expr {rand() < 0.1 ? $n + [randomInt 3] : [randomInt [expr {$n / 3 + 2}]]}]
            set ms [r spop $k $c]
            assert_equal [expr {min($c, $n)}] [llength $ms] "SPOP $k $c of $n"
            assert_equal [llength $ms] [llength [lsort -unique $ms]] "SPOP $k $c repeats a member"
            foreach m $ms {
                assert {[dict exists $::fm($k) $m]}
                dict unset ::fm($k) $m
            }
        } elseif {$r < 620} {
            set m [r srandmember $k]
            if {$n == 0} { assert_equal {} $m } else { assert {[dict exists $::fm($k) $m]} }
        } elseif {$r < 660} {
            set c [expr {rand() < 0.2 ? $n + [randomInt 5] : [randomInt [expr {$n + 2}]]}]
            if {rand() < 0.4} { set c [expr {-$c}] }
            set ms [r srandmember $k $c]
            if {$c >= 0} {
                assert_equal [expr {min($c, $n)}] [llength $ms] "SRANDMEMBER $k $c of $n"
                assert_equal [llength $ms] [llength [lsort -unique $ms]] "SRANDMEMBER $k $c repeats"
            } else {
                assert_equal [expr {$n ? -$c : 0}] [llength $ms] "SRANDMEMBER $k $c of $n"
            }
            foreach m $ms { assert {[dict exists $::fm($k) $m]} }
        } elseif {$r < 720} {
            set dst [expr {rand() < 0.1 ? $k : [fs_pick $wkeys]}]
            set m [if {rand() < 0.7 && $n} { lindex [fs_model_pick $k 1] 0 } else { fs_gen $k }]
            # The integer sets keep to integers (strings reach the others).
            if {[dict get $::fs_domains $dst] eq "int" && ![fs_is_int $m]} { set dst fc }
            set in [dict exists $::fm($k) $m]
            assert_equal $in [r smove $k $dst $m] "SMOVE $k $dst '$m'"
            if {$in && $dst ne $k} {
                dict unset ::fm($k) $m
                dict set ::fm($dst) $m 1
            }
        } elseif {$r < 840} {
            set op [fs_pick {inter union diff}]
            set keys [list $k]
            for {set i [randomInt 3]} {$i >= 0} {incr i -1} { lappend keys [fs_pick $rkeys] }
            set want [fs_model_op $op $keys]
            if {rand() < 0.5} {
                fs_assert_same_members [r s$op {*}$keys] [dict keys $want] "S[string toupper $op] $keys"
            } else {
                set dst [fs_pick {fx fy fx fy fc}]
                assert_equal [dict size $want] [r s${op}store $dst {*}$keys] "S[string toupper $op]STORE $dst $keys"
                set ::fm($dst) $want
                fs_check_key $dst
            }
        } elseif {$r < 880} {
            set keys [list $k]
            for {set i [randomInt 3]} {$i >= 0} {incr i -1} { lappend keys [fs_pick $rkeys] }
            set card [dict size [fs_model_op inter $keys]]
            set limit [expr {rand() < 0.5 ? 0 : [randomInt [expr {$card + 3}]]}]
            set want [expr {$limit == 0 ? $card : min($card, $limit)}]
            assert_equal $want [r sintercard [llength $keys] {*}$keys limit $limit] "SINTERCARD $keys LIMIT $limit"
        } elseif {$r < 930} {
            fs_random_sort $k
        } elseif {$r < 940} {
            # DUMP and RESTORE in place.
            if {$n} {
                r restore $k 0 [r dump $k] replace
                assert_equal $n [r scard $k]
            }
        } else {
            assert_equal $n [r scard $k] "SCARD $k"
            if {$n} { assert_equal set [r type $k] }
        }
    }

    proc fs_random_sort {k} {
        set n [dict size $::fm($k)]
        set ms [dict keys $::fm($k)]
        switch [randomInt 5] {
            0 {
                set args [fs_pick {{} {desc}}]
                if {rand() < 0.5} { lappend args limit [randomInt [expr {$n + 2}]] [expr {[randomInt 50] - 1}] }
                assert_equal [fs_sort_alpha_expected $k {*}$args] [r sort $k alpha {*}$args] "SORT $k ALPHA $args"
            }
            1 {
                # Numeric: checked on sets of integers (ties of doubles past
                # 2^53 leave the order among them open); refused for sets
                # with an m:<n> member; other spellings are strtod's to judge.
                set numeric 1
                foreach m $ms { if {![regexp {^-?[0-9]+$} $m]} { set numeric 0; break } }
                if {!$numeric} {
                    if {[lsearch -glob $ms m:*] >= 0} { assert_error "*scores can't be converted*" {r sort $k} }
                    return
                }
                set got [r sort $k]
                fs_assert_same_members $got $ms "SORT $k"
                for {set i 1} {$i < [llength $got]} {incr i} {
                    if {double([lindex $got [expr {$i - 1}]]) > double([lindex $got $i])} {
                        fail "SORT $k: [lindex $got [expr {$i - 1}]] before [lindex $got $i]"
                    }
                }
            }
            2 {
                # BY nosort: the set's own order, every member once.
                fs_assert_same_members [r sort $k by nosort] $ms "SORT $k BY nosort"
                set c [randomInt 20]
                set part [r sort $k by nosort limit 0 $c]
                assert_equal [expr {min($c, $n)}] [llength $part]
                foreach m $part { assert {[dict exists $::fm($k) $m]} }
            }
            3 {
                # With a STORE, BY nosort sorts ALPHA (upstream: stable
                # across replication).
                set stored [r sort $k by nosort store fs:sorted]
                assert_equal $n $stored
                if {$n} { assert_equal [fs_sort_alpha_expected $k] [r lrange fs:sorted 0 -1] "SORT $k BY nosort STORE" }
                r del fs:sorted
            }
            4 {
                assert_equal [fs_sort_alpha_expected $k] [r sort_ro $k alpha] "SORT_RO $k ALPHA"
            }
        }
    }

    proc fs_model_run {ops} {
        set keys {fa fb fc fd fx fy}
        for {set i 1} {$i <= $ops} {incr i} {
            fs_random_op
            if {$i % 250 == 0} { foreach k $keys { fs_check_key $k } }
            if {$i % 1000 == 0} {
                set k [fs_pick $keys]
                if {[dict size $::fm($k)]} { fs_check_sscan $k }
            }
            if {$i % 3000 == 0} {
                set digest [r debug digest]
                r debug reload
                assert_equal $digest [r debug digest]
            }
        }
        foreach k $keys { fs_check_key $k }
    }

    test "Every set command on big sets agrees with a model (default thresholds)" {
        r flushall
        set ::fs_span 3000
        set ::fs_long [string repeat L 70]
        set ::fs_small_max 512
        set ::fs_domains {fa int fb str fc mixed fd int fx mixed fy mixed}
        fs_model_reset {fa fb fc fd fx fy fnone}
        # Big from the start: 1,500 members each in fa..fd.
        foreach k {fa fb fc fd} {
            set ms [fs_gen_n $k 1500]
            fs_sadd $k $ms
            foreach m $ms { dict set ::fm($k) $m 1 }
            fs_assert_big $k
        }
        fs_model_run 15000
    }

    test "Every set command agrees with a model (thresholds of 4 entries, 8 bytes)" {
        r flushall
        fs_thresholds 4 4 8
        set ::fs_span 40
        set ::fs_long longmember:
        set ::fs_small_max 4
        set ::fs_domains {fa int fb str fc mixed fd int fx mixed fy mixed}
        fs_model_reset {fa fb fc fd fx fy fnone}
        fs_model_run 15000
        fs_thresholds 512 128 64
    } {} {needs:config}

    test "SINTER, SINTERCARD and SINTERSTORE of big integer sets" {
        r flushall
        # Overlapping runs, random integers, the edges: merges of sorted
        # integer sets must give what probing gives.
        set a [fs_shape seq 30000 -10000]
        set b [lmap x [fs_shape seq 20000] {expr {$x * 3 - 5000}}]
        set c [concat [fs_shape rand 20000] [lrange $a 0 999] $::fs_int_edges]
        fs_sadd a $a
        fs_sadd b $b
        fs_sadd c $c
        r sadd a {*}$::fs_int_edges
        lappend a {*}$::fs_int_edges
        set ab [dict create]
        foreach m $a { dict set ab $m 1 }
        set want {}
        foreach m $b { if {[dict exists $ab $m]} { lappend want $m } }
        fs_assert_same_members [r sinter a b] $want "SINTER a b"
        fs_assert_same_members [r sinter b a] $want "SINTER b a"
        assert_equal [llength $want] [r sintercard 2 a b]
        assert_equal 100 [r sintercard 2 a b limit 100]
        assert_equal [llength $want] [r sinterstore ab a b]
        fs_assert_members ab $want
        set wantc [dict create]
        foreach m $c { if {[dict exists $ab $m]} { dict set wantc $m 1 } }
        fs_assert_same_members [r sinter c a] [dict keys $wantc] "SINTER c a"
        # One side gets a string: the other form, the same answer.
        r sadd b zzz
        fs_assert_same_members [r sinter a b] $want "SINTER a b, b with a string"
        assert_equal [llength $want] [r sintercard 2 b a]
        assert_equal {} [r sinter a b nosuchkey]
        assert_equal 0 [r sintercard 3 a b nosuchkey]
    }

    # ------------------------------------------------------------------
    # SSCAN
    # ------------------------------------------------------------------

    # Scans `key` while it changes: 3,000 stable members are never
    # touched; 3,000 others are there at the start; the first 60 calls add
    # 300 new ones each, the next 60 remove 400 each, then a few change
    # at each call. With `convert`, an integer set gets strings midway.
    # Every stable member must come back at least once, and nothing that
    # was never a member.
    proc fs_scan_under_changes {kind convert match} {
        r del s
        set stable {}
        set volatile {}
        set ever [dict create]
        for {set i 0} {$i < 6000} {incr i} {
            set m [expr {$kind eq "int" ? $i * 7 : "m:[expr {$i * 7}]"}]
            if {$i % 2} { lappend volatile $m } else { lappend stable $m }
            dict set ever $m 1
        }
        fs_sadd s [concat $stable $volatile]
        fs_assert_big s
        set volatile [lshuffle $volatile]
        set next 0
        set seen [dict create]
        set cursor 0
        set calls 0
        set matchargs [expr {$match ? {match *1} : {}}]
        # COUNT 1..30: with 1..60 an integer set's scan (COUNT exact) ended
        # after 123-144 calls, so that the check that it lasted past the
        # shrinking phase (120 calls) failed now and then; now 213-235.
        while 1 {
            lassign [r sscan s $cursor count [expr {1 + [randomInt 30]}] {*}$matchargs] cursor ms
            foreach m $ms {
                if {![dict exists $ever $m]} { fail "SSCAN returned '$m', never a member" }
                if {$match && ![string match *1 $m]} { fail "SSCAN MATCH *1 returned '$m'" }
                dict set seen $m 1
            }
            if {$cursor == 0} break
            incr calls
            if {$calls > 200000} { fail "SSCAN does not end" }
            set add {}
            set rem {}
            if {$calls <= 60} {
                for {set j 0} {$j < 300} {incr j} { lappend add [fs_scan_new $kind [incr next]] }
            } elseif {$calls <= 120} {
                set rem [lrange $volatile 0 399]
                set volatile [lrange $volatile 400 end]
            } else {
                lappend add [fs_scan_new $kind [incr next]]
                set rem [lrange $volatile 0 0]
                set volatile [lrange $volatile 1 end]
            }
            if {$convert && $calls == 30} { lappend add string:a string:b }
            if {[llength $add]} {
                r sadd s {*}$add
                foreach m $add { dict set ever $m 1 }
                set volatile [concat $volatile [lshuffle $add]]
            }
            if {[llength $rem]} { r srem s {*}$rem }
        }
        set missing 0
        foreach m $stable {
            if {$match && ![string match *1 $m]} continue
            if {![dict exists $seen $m]} { incr missing }
        }
        assert_equal 0 $missing "stable members SSCAN missed ($calls calls)"
        return $calls
    }

    proc fs_scan_new {kind i} {
        expr {$kind eq "int" ? 100000 + $i * 7 + 3 : "n:$i"}
    }

    foreach {kind convert match} {int 0 0  str 0 0  int 1 0  int 0 1  str 0 1} {
        set what [expr {$convert ? "integers turning strings" : $kind}]
        if {$match} { append what ", MATCH" }
        test "SSCAN returns every member present throughout, while the set grows and shrinks ($what)" {
            set calls [fs_scan_under_changes $kind $convert $match]
            assert_morethan $calls 120
        }
    }

    test "SSCAN of a big set: COUNT, MATCH, and cursors it never gave" {
        r del s
        set ms [fs_shape seq 10000]
        fs_sadd s $ms
        set cursor 0
        set got {}
        while 1 {
            lassign [r sscan s $cursor match *7 count 1000] cursor part
            lappend got {*}$part
            if {$cursor == 0} break
        }
        fs_assert_same_members [lsort -unique $got] [lsearch -all -inline -glob $ms *7] "SSCAN MATCH *7"
        # Made-up cursors: no crash, only members.
        foreach c [list 1 7 12345 4294967295 4294967296 9223372036854775807 18446744073709551615 [randomInt 1000000000]] {
            lassign [r sscan s $c count 50] next part
            foreach m $part { assert_equal 1 [r sismember s $m] }
        }
        assert_error "*invalid cursor*" {r sscan s -1}
        assert_error "*invalid cursor*" {r sscan s 18446744073709551616}
    }

    # ------------------------------------------------------------------
    # Uniformity
    # ------------------------------------------------------------------

    test "SRANDMEMBER histogram distribution - btree" {
        # As upstream's test, on a set made big by thresholds of 0.
        fs_thresholds 0 0 0
        r del myset
        set contents {ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 1 5 10 50 125 MARY PATRICIA LINDA BARBARA}
        r sadd myset {*}$contents
        assert_encoding $::fs_big_encoding myset
        # df = 9, 40 means 0.00001 probability
        set res [r srandmember myset -1000]
        assert_lessthan [chi_square_value $res] 40
        foreach size {8 2} {
            set allkey {}
            for {set i [expr {1000 / $size}]} {$i > 0} {incr i -1} { lappend allkey {*}[r srandmember myset $size] }
            assert_lessthan [chi_square_value $allkey] 40
        }
        # SPOP, the first member popped from the same set each time.
        set popped {}
        for {set i 0} {$i < 1000} {incr i} {
            r del myset
            r sadd myset {*}$contents
            lappend popped [r spop myset]
        }
        assert_lessthan [chi_square_value $popped] 40
        fs_thresholds 512 128 64
    } {} {needs:config}

    # A big set thinned unevenly: of 10,000 members, nine in ten of the
    # first half are removed (a structure that picks a random block first
    # would favour the members left in the thinned blocks). Returns the
    # members left, in order, and those of the thinned half, as a dict.
    proc fs_uneven_set {key kind} {
        r del $key
        set all {}
        for {set i 0} {$i < 10000} {incr i} {
            lappend all [expr {$kind eq "int" ? $i * 5 : [format s:%05d $i]}]
        }
        fs_sadd $key $all
        set gone {}
        set kept {}
        set thin [dict create]
        foreach m $all {
            set i [expr {$kind eq "int" ? $m / 5 : [scan [string range $m 2 end] %d]}]
            if {$i < 5000 && rand() < 0.9} { lappend gone $m; continue }
            lappend kept $m
            if {$i < 5000} { dict set thin $m 1 }
        }
        fs_srem $key $gone
        assert_equal [llength $kept] [r scard $key]
        return [list $kept $thin]
    }

    foreach kind {int str} {
        test "SRANDMEMBER is uniform over an unevenly thinned big set ($kind)" {
            lassign [fs_uneven_set u $kind] kept thin
            fs_assert_big u
            set n [llength $kept]
            # Negative count: draws with repetition.
            set draws {}
            for {set i 0} {$i < 3} {incr i} { lappend draws {*}[r srandmember u -[expr {$n * 2}]] }
            fs_assert_uniform $draws $kept $thin "SRANDMEMBER -[expr {$n * 2}]"
            # Positive counts: a small one, and one past a third of the set
            # (upstream copies the set then and removes at random).
            foreach {count calls} {100 250 2500 10} {
                set draws {}
                for {set i 0} {$i < $calls} {incr i} {
                    set res [r srandmember u $count]
                    assert_equal $count [llength [lsort -unique $res]]
                    lappend draws {*}$res
                }
                fs_assert_uniform $draws $kept $thin "SRANDMEMBER $count"
            }
        }

        test "SPOP is uniform over an unevenly thinned big set ($kind)" {
            lassign [fs_uneven_set u $kind] kept thin
            set n [llength $kept]
            # Without a count, with a small count, and with one past a
            # fifth of the set (upstream keeps the rest then). After each
            # round the members popped go back, to the places they left:
            # the thinned half stays thin.
            foreach {how count rounds} {single 200 10  count 300 20  count 2000 10} {
                set draws {}
                for {set round 0} {$round < $rounds} {incr round} {
                    if {$how eq "single"} {
                        set res {}
                        for {set i 0} {$i < $count} {incr i} { lappend res [r spop u] }
                    } else {
                        set res [r spop u $count]
                    }
                    assert_equal $count [llength [lsort -unique $res]]
                    assert_equal [expr {$n - $count}] [r scard u]
                    lappend draws {*}$res
                    fs_sadd u $res
                }
                fs_assert_uniform $draws $kept $thin "SPOP ($how, $count a round)"

            }
        }
    }

    # ------------------------------------------------------------------
    # Memory, digests, notifications, lazy free
    # ------------------------------------------------------------------

    # Removing nine members in ten of the random sets takes off at least
    # 40% (upstream's hashtable, which keeps its table, about 50%); a run
    # of consecutive integers thinned at random may be packed less densely
    # than the run was, so only less.
    foreach {shape shrink} {rand 0.6 str 0.6 seq 1.0} {
        test "MEMORY USAGE of a big set grows with its members and shrinks after removals ($shape)" {
            r del s
            set ms [fs_shape $shape 100000 1000000]
            # (Not at every step: a table that doubles or a block that
            # repacks may dip on the way.)
            fs_sadd s [lrange $ms 0 999]
            set at1k [r memory usage s samples 0]
            fs_sadd s [lrange $ms 1000 9999]
            set at10k [r memory usage s samples 0]
            fs_sadd s [lrange $ms 10000 end]
            set at100k [r memory usage s samples 0]
            assert_morethan $at10k $at1k
            assert_morethan $at100k $at10k
            assert_morethan [r memory usage s] 0
            # Remove nine in ten at random, then all but 100.
            set order [lshuffle $ms]
            fs_srem s [lrange $order 0 89999]
            set at10kagain [r memory usage s samples 0]
            # (A run's bitmap keeps its size while a tenth of it is left: it
            # is still the smallest form of those members.)
            assert_lessthan_equal $at10kagain [expr {$at100k * $shrink}]
            fs_srem s [lrange $order 90000 99899]
            assert_equal 100 [r scard s]
            assert_lessthan [r memory usage s samples 0] [expr {$at10kagain / 2}]
            fs_assert_members s [lrange $order 99900 end]
        }
    }

    test "DEBUG DIGEST-VALUE of big sets through DEBUG RELOAD and DUMP/RESTORE" {
        r flushall
        r eval $::fork_sfill_lua 1 int:rand rand 21 100000
        r eval $::fork_sfill_lua 1 int:seq seq -50000 100000
        r eval $::fork_sfill_lua 1 str:rand str 23 100000
        r eval $::fork_sfill_lua 1 mixed rand 24 20000
        r sadd mixed {*}$::fs_not_ints
        fs_sadd wide [concat $::fs_int_edges [lmap i [lrepeat 3000 x] {fs_int64}]]
        set bin {}
        for {set i 0} {$i < 256} {incr i} { lappend bin [format %c $i] }
        for {set i 0} {$i < 500} {incr i} { lappend bin [randstring 0 80 binary] }
        fs_sadd bin $bin
        set keys {int:rand int:seq str:rand mixed wide bin}
        # The members, sorted: hashed on the server, but for the binary set.
        proc fs_members_of {key} {
            if {[string match *bin $key]} { return [lsort [r smembers $key]] }
            list [r scard $key] [r eval $::fork_sorted_members_lua 1 $key]
        }
        foreach k $keys {
            fs_assert_big $k
            set digest($k) [r debug digest-value $k]
            set members($k) [fs_members_of $k]
        }
        set all [r debug digest]
        r debug reload
        assert_equal $all [r debug digest]
        foreach k $keys {
            fs_assert_big $k
            assert_equal $digest($k) [r debug digest-value $k] "DIGEST-VALUE of $k after DEBUG RELOAD"
            assert_equal $members($k) [fs_members_of $k] "members of $k after DEBUG RELOAD"
            set payload [r dump $k]
            # A big set is saved as upstream saves a set: RDB_TYPE_SET.
            assert_equal 2 [scan [string index $payload 0] %c] "RDB type of $k"
            r restore restored:$k 0 $payload
            assert_equal $digest($k) [r debug digest-value restored:$k] "DIGEST-VALUE of $k restored"
            assert_equal $members($k) [fs_members_of restored:$k]
            r restore $k 0 $payload replace
            assert_equal $digest($k) [r debug digest-value $k]
        }
        # The digest is the members' alone: the same members added in
        # another order, or held as an intset, digest alike.
        r del rev
        r eval {for i = 49999, -50000, -1 do redis.call('sadd', KEYS[1], i) end} 1 rev
        assert_equal $digest(int:seq) [r debug digest-value rev]
        fs_thresholds 0 0 0
        r del tiny
        r sadd tiny 1 2 3
        fs_thresholds 512 128 64
        r del small
        r sadd small 3 2 1
        assert_encoding intset small
        assert_equal [r debug digest-value small] [r debug digest-value tiny]
    } {} {needs:config}

    # Reads the events of one command from `rd`, then those of a marker
    # (SADD and DEL of `mark`), so that an event too many shows up where
    # the marker's belong. `events` is a list of {key event}.
    proc fs_expect_events {rd events} {
        r sadd mark x
        r del mark
        foreach e [concat $events {{mark sadd} {mark del}}] {
            lassign $e key event
            set msg [$rd read]
            assert_match "__keyspace@*__:$key" [lindex $msg 2]
            assert_equal $event [lindex $msg 3] "event of [lindex $msg 2], expecting $e"
        }
    }

    test "Keyspace notifications for sadd, srem, spop, smove on a big set" {
        r flushall
        r config set notify-keyspace-events KEA
        fs_sadd big [fs_shape seq 1000]
        set rd [valkey_deferring_client]
        assert_equal {1} [psubscribe $rd {__keyspace@*__:*}]
        r sadd big 5
        fs_expect_events $rd {}
        r sadd big 5000 5001
        fs_expect_events $rd {{big sadd}}
        r sadd big a-string
        fs_expect_events $rd {{big sadd}}
        r srem big nosuch
        fs_expect_events $rd {}
        r srem big 1 2 3
        fs_expect_events $rd {{big srem}}
        r spop big
        fs_expect_events $rd {{big spop}}
        r spop big 10
        fs_expect_events $rd {{big spop}}
        r spop big 0
        fs_expect_events $rd {}
        r smove big dst [r srandmember big]
        fs_expect_events $rd {{big srem} {dst sadd}}
        r smove big dst nosuch
        fs_expect_events $rd {}
        r spop big [r scard big]
        fs_expect_events $rd {{big spop} {big del}}
        fs_sadd big [fs_shape seq 1000]
        fs_expect_events $rd {{big sadd}}
        r srem big {*}[fs_shape seq 1000]
        fs_expect_events $rd {{big srem} {big del}}
        r sadd big {*}[fs_shape seq 1000]
        r sinterstore dst big big
        fs_expect_events $rd {{big sadd} {dst sinterstore}}
        r smove dst big 1
        fs_expect_events $rd {{dst srem}}
        $rd close
        assert_equal 0 [r exists mark]
    } {} {needs:config}

    # 2,000,000 random integers (about 5 MB in the integer form) or 500,000
    # strings: big enough in any packing to be freed in the background, and
    # for a tenth of the set to be more than the memory the test itself
    # moves (scripts, replies).
    foreach {shape seed n} {rand 11 2000000 str 12 500000} {
        test "UNLINK frees a big set in the background ($shape)" {
            r flushall
            r config set lazyfree-lazy-user-del no
            wait_lazyfree_done r
            r config resetstat
            set orig [s used_memory]
            r eval $::fork_sfill_lua 1 big $shape $seed $n
            set peak [s used_memory]
            assert_morethan $peak [expr {$orig + 1000000}]
            assert_equal 1 [r unlink big]
            assert_equal 0 [r exists big]
            wait_for_condition 50 100 {
                [s lazyfree_pending_objects] == 0 && [s lazyfreed_objects] == 1
            } else {
                fail "The big set was not freed in the background"
            }
            wait_for_condition 50 100 {
                [s used_memory] < $orig + ($peak - $orig) / 10
            } else {
                fail "Memory was not reclaimed after UNLINK: [s used_memory], before [set orig], peak $peak"
            }
            # DEL with lazyfree-lazy-user-del, and FLUSHALL ASYNC.
            r config set lazyfree-lazy-user-del yes
            r eval $::fork_sfill_lua 1 big $shape $seed $n
            assert_equal 1 [r del big]
            wait_for_condition 50 100 {
                [s lazyfree_pending_objects] == 0 && [s lazyfreed_objects] == 2
            } else {
                fail "DEL with lazyfree-lazy-user-del did not free the big set in the background"
            }
            r config set lazyfree-lazy-user-del no
            r eval $::fork_sfill_lua 1 big $shape $seed $n
            r eval $::fork_sfill_lua 1 big2 $shape [expr {$seed + 1}] $n
            r flushall async
            wait_for_condition 50 100 {
                [s lazyfree_pending_objects] == 0 && [s used_memory] < $orig + ($peak - $orig) / 10
            } else {
                fail "FLUSHALL ASYNC did not reclaim the big sets"
            }
        } {} {needs:config-resetstat}
    }
}

# ----------------------------------------------------------------------
# Corrupt RESTORE payloads of a big set
# ----------------------------------------------------------------------
#
# A DUMP payload is an RDB object (type, then for RDB_TYPE_SET a length and
# that many strings), the RDB version in 2 bytes and a CRC64 of all that in
# 8 (little-endian). The payloads here are taken from the server's DUMP of
# a big set, edited, and closed with a correct version and checksum, so
# that the loader itself must find the damage. Each runs on a server
# started with sanitize-dump-payload yes and one with no: 9.1.2 accepts the
# option in its configuration and ignores it (payloads are always checked
# in full; CONFIG SET does not know it), and so must a big set.

# Reads an RDB length at `off` of `data`: {value next-offset special}.
proc fs_read_len {data off} {
    binary scan $data @${off}cu b
    switch [expr {$b >> 6}] {
        0 { return [list [expr {$b & 0x3f}] [expr {$off + 1}] 0] }
        1 {
            binary scan $data @[expr {$off + 1}]cu b2
            return [list [expr {(($b & 0x3f) << 8) | $b2}] [expr {$off + 2}] 0]
        }
        2 {
            if {$b == 0x80} {
                binary scan $data @[expr {$off + 1}]Iu v
                return [list $v [expr {$off + 5}] 0]
            }
            binary scan $data @[expr {$off + 1}]W v
            return [list $v [expr {$off + 9}] 0]
        }
        3 { return [list [expr {$b & 0x3f}] [expr {$off + 1}] 1] }
    }
}

# Splits a DUMP payload of an RDB_TYPE_SET into {type version elements},
# each element being its encoded bytes (length prefix included).
proc fs_split_payload {payload} {
    set end [expr {[string length $payload] - 10}]
    binary scan $payload cu type
    binary scan $payload @${end}su version
    lassign [fs_read_len $payload 1] count off
    set elements {}
    for {set i 0} {$i < $count} {incr i} {
        set start $off
        lassign [fs_read_len $payload $off] len off special
        if {!$special} {
            incr off $len
        } else {
            switch $len {
                0 { incr off 1 }
                1 { incr off 2 }
                2 { incr off 4 }
                3 {
                    lassign [fs_read_len $payload $off] clen off
                    lassign [fs_read_len $payload $off] ulen off
                    incr off $clen
                }
                default { error "unknown string encoding $len" }
            }
        }
        lappend elements [string range $payload $start [expr {$off - 1}]]
    }
    if {$off != $end} { error "payload of $count elements ends at $off, its footer at $end" }
    return [list $type $version $elements]
}

# A payload of `type` with `count` (the number of `elements` unless given)
# and the rest of the body `tail`, closed with version and checksum.
proc fs_make_payload {type version elements {count {}} {tail {}}} {
    if {$count eq {}} { set count [llength $elements] }
    set body [binary format c $type][fs_rdb_len $count][join $elements {}]$tail
    fs_close_payload $body $version
}



set ::fs_run_oom_tests [expr {[exec uname -m] in {x86_64 aarch64}}]

foreach sanitize {yes no} {
start_server [list tags {"fork" "set" "dump" "corruption" "external:skip" "needs:debug"} \
                  overrides [list sanitize-dump-payload $sanitize use-exit-on-panic yes crash-memcheck-enabled no]] {
    fs_fast_client
    test "Our CRC64 and payload framing agree with the server's (sanitize-dump-payload $sanitize)" {
        assert_equal 0xe9c6d914c4b8d9ca [format 0x%016llx [fs_crc64 123456789]]
        r del s
        fs_sadd s [fs_shape seq 600]
        set payload [r dump s]
        lassign [fs_split_payload $payload] type version elements
        assert_equal 2 $type
        assert_equal 600 [llength $elements]
        assert_equal $payload [fs_make_payload $type $version $elements]
    }

    # Payloads of three big sets: integers, strings (some long enough
    # that the RDB compresses them), integers then strings.
    r del int str mixed
    fs_sadd int [fs_shape seq 600 -300]
    set strs {}
    for {set i 0} {$i < 300} {incr i} { lappend strs s:$i }
    for {set i 0} {$i < 10} {incr i} { lappend strs [string repeat [format %c [expr {97 + $i}]] 100] }
    fs_sadd str $strs
    fs_sadd mixed [fs_shape seq 600 -300]
    r sadd mixed a b c
    foreach k {int str mixed} {
        set ::fs_valid($k) [r dump $k]
        set ::fs_digest($k) [r debug digest-value $k]
    }

    # Asserts that RESTORE refuses `payload` and that the server carries on.
    proc fs_assert_rejected {what payload {pattern "*Bad data format*"}} {
        r del bad
        set digest [r debug digest]
        catch {r restore bad 0 $payload} err
        assert_match $pattern $err "RESTORE of $what"
        assert_equal 0 [r exists bad] "$what left a key"
        assert_equal PONG [r ping]
        assert_equal $digest [r debug digest] "$what changed the dataset"
    }

    test "Corrupt big set payload: a duplicate member (sanitize-dump-payload $sanitize)" {
        foreach k {int str mixed} {
            lassign [fs_split_payload $::fs_valid($k)] type version els
            set n [llength $els]
            # The untouched elements restore fine.
            r del ok
            r restore ok 0 [fs_make_payload $type $version $els]
            assert_equal $::fs_digest($k) [r debug digest-value ok]
            # A copy of the first, at the end, in the middle, next to it.
            fs_assert_rejected "$k: first member again at the end" \
                [fs_make_payload $type $version [concat $els [lrange $els 0 0]]]
            fs_assert_rejected "$k: a member again in the middle" \
                [fs_make_payload $type $version [linsert $els [expr {$n / 2}] [lindex $els 7]]]
            fs_assert_rejected "$k: a member twice in a row" \
                [fs_make_payload $type $version [linsert $els 1 [lindex $els 0]]]
            fs_assert_rejected "$k: the last member again first" \
                [fs_make_payload $type $version [linsert $els 0 [lindex $els end]]]
        }
        # The same integer, once integer-encoded and once as a raw string.
        lassign [fs_split_payload $::fs_valid(int)] type version els
        r del ok
        r restore ok 0 $::fs_valid(int)
        set m [lindex [r srandmember ok 1] 0]
        fs_assert_rejected "int: $m integer-encoded and raw" \
            [fs_make_payload $type $version [concat $els [list [fs_raw_string $m]]]]
        fs_assert_rejected "int: $m raw, then integer-encoded" \
            [fs_make_payload $type $version [concat [list [fs_raw_string $m]] $els]]
        # Past the switch from integers to strings: an integer again.
        fs_assert_rejected "int: strings, then an integer again" \
            [fs_make_payload $type $version [concat $els [list [fs_raw_string x] [fs_raw_string y] [fs_raw_string $m]]]]
        # A long string, compressed, twice.
        lassign [fs_split_payload $::fs_valid(str)] type version els
        set lzf [lsearch -inline -glob $els "\xc3*"]
        assert {$lzf ne {}}
        fs_assert_rejected "str: a compressed member twice" \
            [fs_make_payload $type $version [concat $els [list $lzf]]]
        fs_assert_rejected "str: a compressed member, then the same raw" \
            [fs_make_payload $type $version [concat $els [list [fs_raw_string [string repeat a 100]]]]]
    }

    test "Corrupt big set payload: bad lengths (sanitize-dump-payload $sanitize)" {
        foreach k {int str mixed} {
            lassign [fs_split_payload $::fs_valid($k)] type version els
            set n [llength $els]
            fs_assert_rejected "$k: a count one past the members" [fs_make_payload $type $version $els [expr {$n + 1}]]
            fs_assert_rejected "$k: a count 1000 past the members" [fs_make_payload $type $version $els [expr {$n + 1000}]]
            # (Not 2^40: upstream sizes its table by the count first, and
            # takes hours to free one that large.)
            fs_assert_rejected "$k: a count of 10,000,000" [fs_make_payload $type $version $els 10000000]
            fs_assert_rejected "$k: a count of 2^62" [fs_make_payload $type $version $els 4611686018427387904]
            fs_assert_rejected "$k: a count of 0" [fs_make_payload $type $version $els 0]
            # A member whose length runs past the end.
            fs_assert_rejected "$k: the last member's length past the end" \
                [fs_make_payload $type $version [concat [lrange $els 0 end-1] [list "\x3fabc"]]]
            # (Upstream tries to allocate it: only where that fails
            # harmlessly, as upstream's corrupt-dump.tcl.)
            if {$::fs_run_oom_tests} {
                fs_assert_rejected "$k: a member of 2^40 bytes" \
                    [fs_make_payload $type $version [concat [lrange $els 0 end-1] [list "[fs_rdb_len 1099511627776]abc"]]]
            }
            fs_assert_rejected "$k: a member with an unknown string encoding" \
                [fs_make_payload $type $version [concat [lrange $els 0 end-1] [list "\xc5"]]]
            # A count below the members: upstream loads that many and
            # ignores the rest; refusing is fine too. Either way, a sane set.
            r del short
            if {![catch {r restore short 0 [fs_make_payload $type $version $els [expr {$n - 10}]]} err]} {
                assert_equal [expr {$n - 10}] [r scard short]
                r del full
                r restore full 0 $::fs_valid($k)
                assert_equal [expr {$n - 10}] [r sintercard 2 short full]
                r sadd short extra
                assert_equal [expr {$n - 9}] [r scard short]
            } else {
                assert_match "*Bad data format*" $err
            }
        }
        # A compressed member whose lengths lie.
        lassign [fs_split_payload $::fs_valid(str)] type version els
        set i [lsearch -glob $els "\xc3*"]
        set lzf [lindex $els $i]
        lassign [fs_read_len $lzf 1] clen off
        lassign [fs_read_len $lzf $off] ulen off2
        set data [string range $lzf $off2 end]
        foreach {what c u} [list "uncompressed length one more" $clen [expr {$ulen + 1}] \
                                "uncompressed length one less" $clen [expr {$ulen - 1}] \
                                "compressed length one less" [expr {$clen - 1}] $ulen] {
            set el "\xc3[fs_rdb_len $c][fs_rdb_len $u][string range $data 0 [expr {$c - 1}]]"
            fs_assert_rejected "str: $what" [fs_make_payload $type $version [lreplace $els $i $i $el]]
        }
    }

    test "Corrupt big set payload: truncated (sanitize-dump-payload $sanitize)" {
        foreach k {int str mixed} {
            set valid $::fs_valid($k)
            lassign [fs_split_payload $valid] type version els
            set body [string range $valid 0 end-10]
            set blen [string length $body]
            # The loader reads on into the 10 bytes of the footer, which
            # could make a member or two: every cut here leaves at least
            # 11 members short, or one member more than 10 bytes short.
            # Cut at: the type alone, inside the count, after the count,
            # inside the first member, after half the members, before the
            # 11th member from the end, 3 bytes into the longest member,
            # and at random before the 11th from the end.
            set last11 [expr {$blen - [string length [join [lrange $els end-10 end] {}]]}]
            set longest 0
            set at [string length [fs_rdb_len [llength $els]]]
            set longat 0
            foreach el $els {
                if {[string length $el] > $longest} { set longest [string length $el]; set longat [expr {1 + $at}] }
                incr at [string length $el]
            }
            set cuts [list 1 2 3 4 [expr {$blen / 2}] $last11]
            if {$longest >= 14} { lappend cuts [expr {$longat + 3}] }
            for {set i 0} {$i < 20} {incr i} { lappend cuts [expr {1 + [randomInt $last11]}] }
            foreach cut $cuts {
                fs_assert_rejected "$k: cut at $cut of $blen" \
                    [fs_close_payload [string range $body 0 [expr {$cut - 1}]] $version]
            }
            # Cut without a new footer: the checksum refuses it.
            fs_assert_rejected "$k: last 20 bytes cut" [string range $valid 0 end-20] \
                "*payload version or checksum are wrong*"
        }
        # Still whole: every valid payload restores to its set.
        foreach k {int str mixed} {
            r del again
            r restore again 0 $::fs_valid($k)
            assert_equal $::fs_digest($k) [r debug digest-value again]
        }
        assert_equal 0 [count_log_message 0 "crashed by signal"]
        assert_equal 0 [count_log_message 0 "ASSERTION FAILED"]
    }
}
}
