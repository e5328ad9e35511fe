# Reply-level differential test: our server against the reference build.
#
# The same pseudo-random command streams go to our server and to the
# unpatched reference (`make upstream`, build/upstream), both started here,
# and every reply of ours is compared with the reference's, over raw
# connections that keep the RESP type of each reply (a nil is not an empty
# string, an integer is not a bulk string, RESP3 doubles are doubles).
# DEBUG DIGEST is compared at checkpoints and after each stream every key
# is compared whole.
#
# The streams (::rd_streams): `mixed` (RESP2) and `resp3` (RESP3) with the
# default limits; `small` with listpack limits of 6 entries and 12 bytes;
# `churn`, where CONFIG SET of the listpack limits, DEBUG RELOAD, DUMP/
# RESTORE and AOF rewrites reloaded by DEBUG LOADAOF come often; `big`,
# over sorted sets of 1,500 to 20,000 members (and an 8,000-member lex set,
# a 3,000-member set, a 600-point geo set) with bounded replies. Members
# run from empty to 5 KB, binary, integer- and float-like, around the
# 64-byte limit; scores have ties, +-inf, -0, extremes and odd spellings;
# keys are emptied (by every command that can) and made again, and every
# command is also sent with wrong types and bad arguments.
#
# How replies are compared:
#   exactly         every reply not listed below: every sorted-set command
#                   (ZADD in all its flag combinations, ZINCRBY, ZREM, the
#                   ZRANGE family in all forms, ZRANGESTORE, ZREMRANGEBY*,
#                   pops, ZMPOP, BZ* pops, ZUNION/ZINTER/ZDIFF and STORE
#                   forms, ZINTERCARD, ZRANK/ZREVRANK, ZSCORE, ZMSCORE, ...),
#                   GEO commands, SORT where its order is total, SADD, SREM,
#                   SISMEMBER, SMISMEMBER, SCARD, SINTERCARD, SMOVE, the
#                   set STORE forms, DEL/COPY/EXISTS/TYPE, CONFIG SET,
#                   DEBUG RELOAD, DEBUG DIGEST, RESTORE, and DUMP payloads of
#                   sorted sets, lists and strings; error replies always.
#   as a multiset   SMEMBERS, SINTER, SUNION, SDIFF, and SORT when its
#                   order is not total (ALPHA, ALPHA BY, a set's BY nosort):
#                   SORT reads sets and big sorted sets in hash order, which
#                   follows upstream's hashtable seed (see rd_g_sort).
#   by length       the same SORTs with LIMIT.
#   as a set        ZSCAN and SSCAN: each server is scanned to the end on its
#                   own cursors, the union of what each returned (members
#                   and scores) must be equal (docs/compatibility.md: ZSCAN).
#   by invariant    ZRANDMEMBER with a count (with and without WITHSCORES),
#                   SRANDMEMBER, SPOP (on a COPY of the set, so that both
#                   servers keep the same data): the reply's type and length,
#                   distinct members for a positive count, every member in
#                   the set (ZMSCORE / SMISMEMBER, themselves compared
#                   exactly), WITHSCORES scores equal to ZMSCORE's, the
#                   popped members gone from the copy and its SCARD.
#   not sent        OBJECT ENCODING, MEMORY USAGE, DEBUG OBJECT and other
#                   DEBUG internals, INFO: docs/compatibility.md lets them
#                   differ. Encodings are driven instead: sets grow past and
#                   shrink below zset-max-listpack-entries / -value (which
#                   the streams change, with the set-* limits), DEBUG RELOAD
#                   converts on load, DUMP/RESTORE moves each server's
#                   payload into the other.
#   lex ranges      (ZRANGEBYLEX, ZLEXCOUNT, ZRANGE BYLEX, ...) only on keys
#                   whose members all have score 0 (x:*): with mixed scores
#                   their result is unspecified (and differs between two
#                   upstream runs, as the skiplist's levels are random).
#   geo lookups of a member (GEOPOS, GEODIST, FROMMEMBER, ...) only on keys
#                   whose scores are all valid geohashes (g:*); searches
#                   by coordinates also run on the other sorted sets.
#
# Each stream has a fixed seed (its own PRNG: the commands do not depend on
# replies or on the suite's seed). FLUSHALL and the default limits start
# each stream. On a difference the test fails naming the stream, the seed,
# the op number, the command and both replies, and writes every command
# sent in the stream up to it to tests/tmp/replydiff-<stream>-<seed>.log,
# one a line in valkey-cli's quoting; lines starting with # went to one
# server only (scan cursors, SPOP checks, INFO polls; each server RESTOREs
# the other's DUMP, logged as the reference's payload to both). `grep -v '^#' <log> | valkey-cli -p <port>` on a fresh
# reference and a fresh fork gives the same data and the differing last
# reply (in the churn stream, wait for each BGREWRITEAOF to end before
# DEBUG LOADAOF).
#
# The `ttl` stream adds every expire command to the default mix (issue
# #45: a key's expire field of 4 bytes, no expires table): EXPIREAT,
# PEXPIREAT with NX/XX/GT/LT, SET and GETEX with EXAT/PXAT/KEEPTTL/PERSIST,
# PERSIST, EXPIRETIME and PEXPIRETIME compared exactly, TTL and PTTL within
# two seconds (the servers read their clocks apart), EXPIRE and PEXPIRE with
# times in the past. Every time set is absolute (days to weeks ahead, from a
# base fixed per stream), so DEBUG DIGEST, which mixes the times in, is
# compared exactly too; the final check compares each key's PEXPIRETIME.
#
# The `strings` stream (issue #46) runs every string command and option
# (SET with absolute expiries, NX/XX, GET and IFEQ; GET, MGET, GETRANGE,
# SUBSTR, STRLEN, APPEND, SETRANGE, GETDEL, GETEX, GETSET, SETNX, MSET,
# MSETNX, MSETEX, DELIFEQ, the INCR family, LCS, the bit commands, SORT's
# GET pattern, a script, COPY) on texts, numbers, binary and long values,
# with our server holding values compressed (string-compression yes):
# DEBUG STRCOMP TRAIN and SWEEP, sent to ours alone, train new tables and
# recode values under the stream, and DUMP/RESTORE, DEBUG RELOAD and AOF
# rewrites come as in the others. It fails if no value was coded.
#
# A fixed case asserts upstream's answer to a negative LIMIT offset on a
# sorted set past its listpack, which the streams found the fork answering
# differently (rd_negative_offset_case).
#
# Environment: REPLYDIFF_SCALE=n multiplies every stream's length (default
# 1, under a minute on two cores; 5 with --accurate; 10 for a long run);
# REPLYDIFF_SEED=s replaces the base seed (the i-th stream of ::rd_streams,
# from 0, runs with s + i); REPLYDIFF_STREAMS=churn,big runs only those.

source tests/helpers/fork-reference.tcl
if {![fork_reference_present {"fork" "replydiff"}]} return

source tests/helpers/fork-zfill.tcl

# ---------------------------------------------------------------------------
# The streams' own PRNG (Park-Miller), so that a seed names one stream.

proc rd_seed {s} { set ::rd_s [expr {(abs($s) % 2147483646) + 1}] }
proc rd_rnd {n} {
    set ::rd_s [expr {($::rd_s * 48271) % 2147483647}]
    expr {$::rd_s % $n}
}
proc rd_chance {pct} { expr {[rd_rnd 100] < $pct} }
proc rd_pick {l} { lindex $l [rd_rnd [llength $l]] }
# A pick from a flat list of name weight ...
proc rd_wpick {spec} {
    set total 0
    foreach {name w} $spec { incr total $w }
    set x [rd_rnd $total]
    foreach {name w} $spec {
        if {$x < $w} { return $name }
        incr x -$w
    }
}
proc rd_shuffle {l} {
    for {set i [expr {[llength $l] - 1}]} {$i > 0} {incr i -1} {
        set j [rd_rnd [expr {$i + 1}]]
        set t [lindex $l $i]
        lset l $i [lindex $l $j]
        lset l $j $t
    }
    return $l
}
# Options given as a list of groups, in random order, flattened.
proc rd_opts {groups} { concat {*}[rd_shuffle $groups] }
# Random letter case for an option keyword, now and then.
proc rd_kw {w} { if {[rd_chance 15]} { string tolower $w } else { return $w } }
# (Values are chosen with `if`, not expr's ?:, which would turn members and
# scores such as 007, 1e5 or -0 into numbers: 7, 100000.0, 0.)

# ---------------------------------------------------------------------------
# RESP over raw sockets. A reply is a list {type payload}: + - : , ( # and
# $ = (bulk and verbatim) carry a string, * ~ > % a list of replies; `nil`
# is RESP2's $-1, `nilarray` its *-1, `_` RESP3's null.

proc rd_open {host port proto} {
    if {$::tls} {
        package require tls
        ::tls::init -cafile "$::tlsdir/ca.crt" -certfile "$::tlsdir/client.crt" \
            -keyfile "$::tlsdir/client.key"
        set fd [::tls::socket $host $port]
    } else {
        set fd [socket $host $port]
    }
    fconfigure $fd -translation binary -buffering full -blocking 1
    if {$proto == 3} {
        puts -nonewline $fd [rd_encode {HELLO 3}]
        flush $fd
        set rep [rd_read $fd]
        if {[lindex $rep 0] ne "%"} { error "HELLO 3 failed: $rep" }
    }
    return $fd
}

proc rd_encode {cmd} {
    set s "*[llength $cmd]\r\n"
    foreach a $cmd { append s "\$[string length $a]\r\n$a\r\n" }
    return $s
}

proc rd_read {fd} {
    if {[gets $fd line] < 0} {
        set who [expr {$fd eq $::rd_fdo ? {our server} : {the reference}}]
        set ::rd_batch {}
        fail "fork-replydiff: $who closed the connection (crashed?) in stream $::rd_stream,\
              seed $::rd_seedval, near op #$::rd_opno; commands sent: [rd_write_log]"
    }
    set t [string index $line 0]
    set v [string range $line 1 end-1]
    switch -- $t {
        + - - - : - , - ( - # { return [list $t $v] }
        $ - = {
            if {$v < 0} { return nil }
            set d [read $fd [expr {$v + 2}]]
            return [list $t [string range $d 0 end-2]]
        }
        * - ~ - > - % {
            if {$v < 0} { return nilarray }
            if {$t eq "%"} { set v [expr {$v * 2}] }
            set l {}
            for {set i 0} {$i < $v} {incr i} { lappend l [rd_read $fd] }
            return [list $t $l]
        }
        _ { return _ }
        | {
            for {set i 0} {$i < 2 * $v} {incr i} { rd_read $fd }
            return [rd_read $fd]
        }
        default { error "protocol error: [rd_esc $line]" }
    }
}

# A reply as plain Tcl values: nulls are {}, aggregates lists.
proc rd_plain {r} {
    switch -- [lindex $r 0] {
        * - ~ - > - % {
            set out {}
            foreach e [lindex $r 1] { lappend out [rd_plain $e] }
            return $out
        }
        nil - nilarray - _ { return {} }
        default { return [lindex $r 1] }
    }
}
# An array's elements, nested arrays (RESP3's member-score pairs) flattened.
proc rd_flat {r} {
    set out {}
    foreach e [lindex $r 1] {
        if {[lindex $e 0] in {* ~}} {
            foreach x [lindex $e 1] { lappend out [rd_plain $x] }
        } else {
            lappend out [rd_plain $e]
        }
    }
    return $out
}
proc rd_iserr {r} { expr {[lindex $r 0] eq "-"} }
proc rd_isagg {r} { expr {[lindex $r 0] in {* ~}} }

# Printable forms, quoted as valkey-cli reads them.
set ::rd_escmap [list "\\" "\\\\" "\"" "\\\""]
for {set i 0} {$i < 256} {incr i} {
    if {$i < 32 || $i > 126} { lappend ::rd_escmap [format %c $i] [format {\x%02x} $i] }
}
proc rd_esc {s} { return "\"[string map $::rd_escmap $s]\"" }
proc rd_show_cmd {cmd} {
    set out {}
    foreach a $cmd {
        if {[string length $a] > 300} {
            lappend out "[rd_esc [string range $a 0 299]]...([string length $a] bytes)"
        } else {
            lappend out [rd_esc $a]
        }
    }
    set s [join $out " "]
    if {[string length $s] > 3000} { set s "[string range $s 0 2999] ... ([llength $cmd] arguments)" }
    return $s
}
proc rd_show {r} {
    set s [rd_show_1 $r]
    if {[string length $s] > 3000} { set s "[string range $s 0 2999] ..." }
    return $s
}
proc rd_show_1 {r} {
    switch -- [lindex $r 0] {
        * - ~ - > - % {
            set parts {}
            foreach e [lindex $r 1] { lappend parts [rd_show_1 $e] }
            return "[lindex $r 0]\[[join $parts {, }]\]"
        }
        $ - = { return [rd_esc [lindex $r 1]] }
        nil - nilarray - _ { return "([lindex $r 0])" }
        default { return "([lindex $r 0])[lindex $r 1]" }
    }
}

# ---------------------------------------------------------------------------
# Sending, logging, comparing.

proc rd_log {who cmd} { lappend ::rd_log [list $who $cmd] }

# A command to both servers, synchronously: returns {reference ours}.
proc rd_both {cmd} {
    set enc [rd_encode $cmd]
    rd_log both $cmd
    puts -nonewline $::rd_fdr $enc
    flush $::rd_fdr
    puts -nonewline $::rd_fdo $enc
    flush $::rd_fdo
    list [rd_read $::rd_fdr] [rd_read $::rd_fdo]
}
proc rd_both_exact {cmd} {
    lassign [rd_both $cmd] rr ro
    if {$rr ne $ro} { rd_fail "replies differ" $cmd $rr $ro }
    return $rr
}
# To one server (`ref` or `ours`), logged as sent to that one unless `log`
# is 0.
proc rd_one {side cmd {log 1}} {
    set fd [expr {$side eq "ref" ? $::rd_fdr : $::rd_fdo}]
    if {$log} { rd_log $side $cmd }
    puts -nonewline $fd [rd_encode $cmd]
    flush $fd
    rd_read $fd
}

# Ops: {x cmd} exact, {s cmd} as multisets, {l cmd} by length, and
# {p proc args...} a check of its own. Plain commands are pipelined.
proc rd_exec {op} {
    incr ::rd_opno
    set kind [lindex $op 0]
    if {$kind eq "p"} {
        rd_flush
        incr ::rd_stats([lindex $op 1])
        set ::rd_curop [lrange $op 1 end]
        {*}[lrange $op 1 end]
        return
    }
    rd_log both [lindex $op 1]
    lappend ::rd_batch [list $kind [lindex $op 1] $::rd_opno [expr {[llength $::rd_log] - 1}]]
    if {[llength $::rd_batch] >= 50} { rd_flush }
}

proc rd_flush {} {
    if {![llength $::rd_batch]} return
    set enc {}
    foreach op $::rd_batch { append enc [rd_encode [lindex $op 1]] }
    puts -nonewline $::rd_fdr $enc
    flush $::rd_fdr
    puts -nonewline $::rd_fdo $enc
    flush $::rd_fdo
    set batch $::rd_batch
    set ::rd_batch {}
    foreach op $batch {
        lassign $op kind cmd opno logidx
        set rr [rd_read $::rd_fdr]
        set ro [rd_read $::rd_fdo]
        incr ::rd_stats($kind)
        if {[lindex $rr 0] eq "-"} { incr ::rd_stats(err) }
        if {$rr eq $ro} continue
        set ok 0
        if {[rd_isagg $rr] && [lindex $rr 0] eq [lindex $ro 0]} {
            if {$kind eq "s"} {
                set ok [expr {[lsort [lindex $rr 1]] eq [lsort [lindex $ro 1]]}]
            } elseif {$kind eq "l"} {
                set ok [expr {[llength [lindex $rr 1]] == [llength [lindex $ro 1]]}]
            }
        }
        if {!$ok} {
            set ::rd_opno $opno
            set ::rd_curop {}
            set ::rd_log [lrange $::rd_log 0 $logidx]
            set how [dict get {x "replies differ" s "replies differ as multisets" l "reply lengths differ"} $kind]
            rd_fail $how $cmd $rr $ro
        }
    }
}

proc rd_write_log {} {
    set path [file normalize tests/tmp/replydiff-$::rd_stream-$::rd_seedval.log]
    set f [open $path w]
    fconfigure $f -translation binary
    puts $f "# fork-replydiff stream $::rd_stream, seed $::rd_seedval, RESP$::rd_proto: the commands sent, in order"
    foreach e $::rd_log {
        lassign $e who cmd
        set line [join [lmap a $cmd {rd_esc $a}] " "]
        if {$who ne "both"} { set line "# [expr {$who eq {ref} ? {reference only} : {ours only}}]: $line" }
        puts $f $line
    }
    close $f
    return $path
}

proc rd_fail {what cmd rr ro {extra {}}} {
    set path [rd_write_log]
    set last {}
    foreach e [lrange $::rd_log end-7 end-1] { append last "      [rd_show_cmd [lindex $e 1]]\n" }
    set msg "fork-replydiff: $what\n"
    append msg "  stream $::rd_stream, seed $::rd_seedval, RESP$::rd_proto, op #$::rd_opno"
    if {[info exists ::rd_curop] && $::rd_curop ne {}} { append msg " (check [lindex $::rd_curop 0])" }
    append msg "\n  command:   [rd_show_cmd $cmd]\n"
    append msg "  reference: [rd_show $rr]\n"
    append msg "  ours:      [rd_show $ro]\n"
    if {$extra ne {}} { append msg "  $extra\n" }
    append msg "  the commands before it:\n$last"
    append msg "  all commands of the stream up to it: $path"
    fail $msg
}

# ---------------------------------------------------------------------------
# Data: keys, members, scores.
#
# z:* sorted sets with any scores; x:* sorted sets whose scores are all 0
# (lex ranges); g:* geo sets (valid geohash scores only); s:* sets; d:*
# destinations of STORE forms, COPY and RESTORE (any type); c:str a string;
# n:none never exists.

set ::rd_keys {
    z {z:0 z:1 z:2 z:3 z:4 z:5}
    x {x:0 x:1 x:2}
    g {g:0 g:1 g:2}
    s {s:0 s:1 s:2 s:3 s:4}
    d {d:0 d:1 d:2 d:3}
    c {c:str}
    n {n:none}
}
set ::rd_bigkeys {z:0 z:1 z:2 x:0}

proc rd_key {fam} { rd_pick [dict get $::rd_keys $fam] }
proc rd_fkey {spec} { rd_key [rd_wpick $spec] }
proc rd_zkey {} { rd_fkey {z 70 x 5 g 5 d 12 s 3 c 2 n 3} }
proc rd_lexkey {} { rd_fkey {x 90 s 3 c 2 n 5} }
proc rd_skey {} { rd_fkey {s 80 d 10 z 5 c 2 n 3} }
proc rd_fam {k} { string index $k 0 }
# A key for a sorted-set write: n:none stays missing, and a write that would
# create a sorted set under a set's name goes to the string instead.
proc rd_wkey {k} {
    switch [rd_fam $k] {
        n { return d:[rd_rnd 4] }
        s { return c:str }
        default { return $k }
    }
}

# Members: short names, integer-like and float-like ones (a listpack keeps
# those as integers), around 64 bytes, 100-300 bytes, binary, the empty one.
proc rd_make_pool {n} {
    set pool {}
    for {set i 0} {$i < $n} {incr i} {
        switch [expr {$i % 16}] {
            0 - 1 - 2 - 3 - 4 { lappend pool m:$i }
            5 { lappend pool $i }
            6 { lappend pool -$i }
            7 { lappend pool [expr {$i / 4.0}] }
            8 { lappend pool [string repeat L [expr {54 + $i % 12}]]:$i }
            9 { lappend pool long:$i:[string repeat x [expr {100 + $i % 200}]] }
            10 { lappend pool "\x00$i" }
            11 { lappend pool "b\xff\xfe$i\x00" }
            12 { lappend pool "\r\n$i" }
            13 { lappend pool [format %c [expr {$i % 256}]] }
            14 { lappend pool a$i }
            15 { lappend pool [expr {$i * 1000003}] }
        }
    }
    lappend pool [string repeat y 64] [string repeat y 65] [string repeat "\xff" 70] \
        [string repeat z 5000] [string repeat "\x00\x01" 600]:end
    # The short ones first (rd_mem), the odd ones among them.
    set short [list {} 9223372036854775807 -9223372036854775808 18446744073709551616 007 1e5 " 1"]
    set long {}
    foreach m $pool {
        if {[string length $m] <= 40} { lappend short $m } else { lappend long $m }
    }
    concat $short $long
}
proc rd_member {} { rd_pick $::rd_pool }
# A member for key `k`: z:0, z:1, x:1, x:2, g:*, s:2 draw from 150 short
# members (at most 40 bytes) so that they cross 128 members both ways and
# keep their listpack until then; the others from the whole pool.
set ::rd_shortkeys {z:0 z:1 x:1 x:2 g:0 g:1 g:2 s:2}
proc rd_mem {k} {
    if {!$::rd_big && $k in $::rd_shortkeys} { return [lindex $::rd_pool [rd_rnd 150]] }
    rd_pick $::rd_pool
}
proc rd_members {k n} {
    set l {}
    for {set i 0} {$i < $n} {incr i} { lappend l [rd_mem $k] }
    return $l
}
# Set members: s:0 and s:1 mostly integers (intsets), the others mixed.
proc rd_smember {k} {
    if {$k in {s:0 s:1} ? [rd_chance 90] : [rd_chance 30]} {
        if {[rd_chance 90]} { return [expr {[rd_rnd 601] - 300}] }
        return [rd_pick {9223372036854775807 -9223372036854775808 4294967296 -4294967297 65536 100000000000}]
    }
    return [rd_mem $k]
}

proc rd_score {} {
    if {$::rd_big && [rd_chance 60]} {
        set v [expr {[rd_rnd 125000] - 60000}]
        if {[rd_chance 30]} { append v [rd_pick {.125 .25 .5 .875}] }
        return $v
    }
    set r [rd_rnd 100]
    if {$r < 35} { return [expr {[rd_rnd 7] - 3}] }
    if {$r < 55} { return [expr {[rd_rnd 2001] - 1000}] }
    if {$r < 70} {
        return [rd_pick {0.5 -0.5 1.5 0.1 0.2 0.30000000000000004 3.141592653589793 -2.5e-10 1e-300
                         1e300 -1e300 2.5e15 9007199254740993 1.7976931348623157e308 4.9e-324 -0 0.0 -0.0}]
    }
    if {$r < 78} { return [rd_pick {inf -inf +inf -inf +inf inf Infinity -INF}] }
    if {$r < 99} { return [format %.3f [expr {([rd_rnd 2000001] - 1000000) / 1000.0}]] }
    return [rd_pick {nan NaN abc {} " 1" "1 " 1e400 0x10 5.0 1e3 +5 --1}]
}
# A score right for a key's family: 0 on x:*, a valid geohash on g:*.
proc rd_zscore_for {k} {
    switch [rd_fam $k] {
        x { if {[rd_chance 95]} { return 0 } else { return [rd_pick {-0 0.0 +0}] } }
        g { return [expr {[rd_rnd 2147483647] * 1000 + [rd_rnd 1000]}] }
        default { return [rd_score] }
    }
}
proc rd_incr_for {k} {
    switch [rd_fam $k] {
        x { return 0 }
        g { return [rd_rnd 1000] }
        default { return [rd_score] }
    }
}

# One end of a score range: {sortkey text}.
proc rd_bound {} {
    if {[rd_chance 2]} { return [list 0 [rd_pick {abc ( ((1 nan {} [1}]] }
    if {[rd_chance 10]} {
        return [rd_pick {{-1e308 -inf} {1e308 +inf} {1e308 inf} {-1e308 (-inf} {1e308 (+inf}}]
    }
    set v [rd_score]
    if {![string is double -strict $v] || [string match -nocase *inf* $v] || [string match -nocase *nan* $v]} {
        set v [expr {[rd_rnd 11] - 5}]
    }
    if {[rd_chance 25]} { set v ($v }
    list [expr {double([string trimleft $v (])}] $v
}
# A score range {min max}, min <= max four times in five.
proc rd_srange {} {
    if {$::rd_big && [rd_chance 80]} {
        set a [expr {[rd_rnd 125000] - 60000}]
        set b [expr {$a + [rd_rnd 300]}]
        if {[rd_chance 25]} { set a "($a" }
        return [list $a $b]
    }
    set a [rd_bound]
    set b [rd_bound]
    if {[rd_chance 80] == ([lindex $a 0] > [lindex $b 0])} { lassign [list $b $a] a b }
    list [lindex $a 1] [lindex $b 1]
}
proc rd_lexbound {k} {
    set r [rd_rnd 100]
    if {$r < 12} { return [rd_pick {- +}] }
    if {$r < 14} { return [rd_pick {abc {} m * [ (}] }
    return "[rd_pick {[ (}][rd_mem $k]"
}
proc rd_lrange {k} {
    set a [rd_lexbound $k]
    set b [rd_lexbound $k]
    if {[rd_chance 80]} {
        if {$a eq "+" || $b eq "-" || ($a ni {- +} && $b ni {- +} && [string compare [string range $a 1 end] [string range $b 1 end]] > 0)} {
            lassign [list $b $a] a b
        }
    }
    list $a $b
}
proc rd_rank {} {
    set r [rd_rnd 100]
    if {$r < 40} { return [expr {[rd_rnd 11] - 5}] }
    if {$r < 70} { return [expr {[rd_rnd 61] - 30}] }
    if {$r < 85} { return [expr {[rd_rnd 601] - 300}] }
    if {$r < 93} { return [rd_pick {0 -1}] }
    if {$r < 98} { return [rd_pick {9223372036854775807 -9223372036854775808 1000000 -1000000}] }
    return [rd_pick {1.5 x {} 9223372036854775808}]
}
proc rd_rankpair {} {
    if {$::rd_big && [rd_chance 85]} {
        set a [expr {[rd_rnd 44000] - 22000}]
        set b [expr {$a + [rd_rnd 60]}]
        if {$a < 0 && $b >= 0} { set b -1 }
        return [list $a $b]
    }
    list [rd_rank] [rd_rank]
}
proc rd_limit {} {
    set off [rd_wpick {0 50 1 10 3 10 17 10 100 5 -1 3 x 1}]
    set cnt [rd_wpick {-1 15 0 5 1 15 2 10 5 15 10 15 50 10 -5 3 y 1}]
    if {$::rd_big && ($cnt < 0 || $cnt > 100)} { set cnt 20 }
    list LIMIT $off $cnt
}
proc rd_count {} { rd_wpick {1 20 2 15 3 10 10 10 200 5 0 5 -1 3 x 1} }

# ---------------------------------------------------------------------------
# Generators: each returns a list of ops.

proc rd_g_zadd {} {
    set k [rd_wkey [rd_zkey]]
    set flags [rd_wpick {
        {} 30 NX 8 XX 8 GT 8 LT 8 CH 8 {NX CH} 5 {XX CH} 5 {GT CH} 5 {LT CH} 5 {XX GT} 4 {XX LT} 4
        {XX GT CH} 3 {XX LT CH} 3 INCR 8 {NX INCR} 4 {XX INCR} 4 {GT INCR} 4 {LT INCR} 4 {CH INCR} 3
        {XX LT INCR} 2 {NX XX} 1 {GT LT} 1 {NX GT} 1 {NX LT} 1 {NX XX INCR} 1
    }]
    set cmd [list ZADD $k {*}[lmap f [rd_shuffle $flags] {rd_kw $f}]]
    if {"INCR" in $flags} {
        set n [expr {[rd_chance 5] ? 2 : 1}]
        for {set i 0} {$i < $n} {incr i} { lappend cmd [rd_incr_for $k] [rd_mem $k] }
    } else {
        set n [rd_wpick {1 50 2 15 3 10 4 10 8 10 20 5}]
        for {set i 0} {$i < $n} {incr i} { lappend cmd [rd_zscore_for $k] [rd_mem $k] }
    }
    if {[rd_chance 1]} { set cmd [lrange $cmd 0 end-1] }
    list [list x $cmd]
}

# A ZADD of 100-400 members: past the listpack at once, into a new key (the
# sorted pass that builds a tree) or an existing one.
proc rd_g_zaddbulk {} {
    set k [rd_fkey {z 60 d 20 x 15 g 5}]
    set ops {}
    if {[rd_chance 50] && !($::rd_big && $k in $::rd_bigkeys)} { lappend ops [list x [list DEL $k]] }
    set flags [rd_wpick {{} 40 NX 10 CH 10 {GT CH} 5 LT 5 XX 5 {NX CH} 5}]
    set cmd [list ZADD $k {*}$flags]
    set n [expr {100 + [rd_rnd 301]}]
    set fresh [rd_chance 50]
    set tag [rd_rnd 1000000]
    for {set i 0} {$i < $n} {incr i} {
        if {$fresh} {
            set m u:$tag:$i
            if {[rd_chance 3]} { append m [string repeat Q 70] }
        } else {
            set m [rd_mem $k]
        }
        lappend cmd [rd_zscore_for $k] $m
    }
    lappend ops [list x $cmd]
    return $ops
}

proc rd_g_zincrby {} {
    set k [rd_wkey [rd_zkey]]
    list [list x [list ZINCRBY $k [rd_incr_for $k] [rd_mem $k]]]
}
proc rd_g_zrem {} {
    set k [rd_zkey]
    list [list x [list ZREM $k {*}[rd_members $k [rd_wpick {1 50 2 20 4 20 10 10}]]]]
}
proc rd_g_zread {} {
    set k [rd_zkey]
    switch [rd_rnd 9] {
        0 { set cmd [list ZCARD $k] }
        1 - 2 { set cmd [list ZCOUNT $k {*}[rd_srange]] }
        3 {
            set lk [rd_lexkey]
            set cmd [list ZLEXCOUNT $lk {*}[rd_lrange $lk]]
        }
        4 - 5 { set cmd [list ZSCORE $k [rd_mem $k]] }
        6 { set cmd [list ZMSCORE $k {*}[rd_members $k [rd_wpick {0 1 1 20 3 20 8 10}]]] }
        7 - 8 {
            set cmd [list [rd_pick {ZRANK ZREVRANK}] $k [rd_mem $k]]
            if {[rd_chance 50]} { lappend cmd [rd_wpick {WITHSCORE 30 withscore 5 WITHSCORES 1}] }
        }
    }
    list [list x $cmd]
}

# ZRANGE in all its forms, and the older range commands.
proc rd_g_zrange {} {
    set k [rd_zkey]
    set lk [rd_lexkey]
    set ws [expr {[rd_chance 50] ? {WITHSCORES} : {}}]
    switch [rd_rnd 12] {
        0 - 1 - 2 {
            set groups {}
            if {[rd_chance 30]} { lappend groups REV }
            if {$ws ne {}} { lappend groups $ws }
            if {[rd_chance 3]} { lappend groups [rd_limit] }
            set cmd [list ZRANGE $k {*}[rd_rankpair] {*}[rd_opts $groups]]
        }
        3 { set cmd [list ZREVRANGE $k {*}[rd_rankpair] {*}$ws] }
        4 - 5 - 6 {
            set rev [rd_chance 35]
            lassign [rd_srange] min max
            set groups [list [rd_kw BYSCORE]]
            if {$rev} { lappend groups REV; lassign [list $max $min] min max }
            if {$ws ne {}} { lappend groups $ws }
            if {$::rd_big || [rd_chance 40]} { lappend groups [rd_limit] }
            set cmd [list ZRANGE $k $min $max {*}[rd_opts $groups]]
        }
        7 - 8 {
            set rev [rd_chance 35]
            lassign [rd_lrange $lk] min max
            set groups [list BYLEX]
            if {$rev} { lappend groups REV; lassign [list $max $min] min max }
            if {[rd_chance 3]} { lappend groups WITHSCORES }
            if {[rd_chance 3]} { lappend groups BYSCORE }
            if {$::rd_big || [rd_chance 40]} { lappend groups [rd_limit] }
            set cmd [list ZRANGE $lk $min $max {*}[rd_opts $groups]]
        }
        9 - 10 {
            set c [rd_pick {ZRANGEBYSCORE ZREVRANGEBYSCORE}]
            lassign [rd_srange] min max
            if {$c eq "ZREVRANGEBYSCORE"} { lassign [list $max $min] min max }
            set groups {}
            if {$ws ne {}} { lappend groups $ws }
            if {$::rd_big || [rd_chance 40]} { lappend groups [rd_limit] }
            set cmd [list $c $k $min $max {*}[rd_opts $groups]]
        }
        11 {
            set c [rd_pick {ZRANGEBYLEX ZREVRANGEBYLEX}]
            lassign [rd_lrange $lk] min max
            if {$c eq "ZREVRANGEBYLEX"} { lassign [list $max $min] min max }
            set cmd [list $c $lk $min $max]
            if {$::rd_big || [rd_chance 40]} { lappend cmd {*}[rd_limit] }
        }
    }
    list [list x $cmd]
}

proc rd_g_zrangestore {} {
    set src [rd_zkey]
    switch [rd_fam $src] {
        x { set dst [rd_fkey {x 40 d 60}] }
        g { set dst [rd_fkey {g 40 d 60}] }
        default { set dst [rd_fkey {d 70 z 30}] }
    }
    if {$::rd_big && $dst in $::rd_bigkeys} { set dst d:0 }
    set groups {}
    switch [expr {[rd_fam $src] eq "x" ? [rd_rnd 3] : [rd_rnd 2]}] {
        0 {
            set range [rd_rankpair]
            if {[rd_chance 3]} { lappend groups [rd_limit] }
        }
        1 {
            set range [rd_srange]
            lappend groups BYSCORE
            if {[rd_chance 40]} { lappend groups [rd_limit] }
        }
        2 {
            set range [rd_lrange $src]
            lappend groups BYLEX
            if {[rd_chance 40]} { lappend groups [rd_limit] }
        }
    }
    if {[rd_chance 30]} {
        lappend groups REV
        set range [lreverse $range]
    }
    if {[rd_chance 2]} { lappend groups WITHSCORES }
    list [list x [list ZRANGESTORE $dst $src {*}$range {*}[rd_opts $groups]]]
}

proc rd_g_zremrange {} {
    switch [rd_rnd 5] {
        0 - 1 {
            set k [rd_zkey]
            set range [expr {[rd_chance 5] ? {0 -1} : [rd_rankpair]}]
            if {$::rd_big && $k in $::rd_bigkeys} {
                if {$range eq {0 -1}} { set range {0 3} }
                # Now and then a window over many leaves.
                if {[rd_chance 10]} {
                    set a [expr {[rd_rnd 30000] - 15000}]
                    set range [list $a [expr {$a < 0 ? min(-1, $a + [rd_rnd 1000]) : $a + [rd_rnd 1000]}]]
                }
            }
            set cmd [list ZREMRANGEBYRANK $k {*}$range]
        }
        2 - 3 {
            set k [rd_zkey]
            set range [rd_srange]
            if {$::rd_big && $k in $::rd_bigkeys} {
                set a [expr {[rd_rnd 125000] - 60000}]
                set range [list $a [expr {$a + [rd_rnd 100]}]]
            }
            set cmd [list ZREMRANGEBYSCORE $k {*}$range]
        }
        4 {
            set k [rd_lexkey]
            set range [rd_lrange $k]
            if {$::rd_big && $k in $::rd_bigkeys} { set range [list \[[rd_mem $k] \[[rd_mem $k]] }
            set cmd [list ZREMRANGEBYLEX $k {*}$range]
        }
    }
    list [list x $cmd]
}

proc rd_g_zpop {} {
    set cmd [list [rd_pick {ZPOPMIN ZPOPMAX}] [rd_zkey]]
    if {[rd_chance 60]} { lappend cmd [rd_count] }
    list [list x $cmd]
}
proc rd_zkeys {n} {
    set l {}
    for {set i 0} {$i < $n} {incr i} { lappend l [rd_zkey] }
    return $l
}
proc rd_g_zmpop {} {
    set n [expr {1 + [rd_rnd 3]}]
    set keys [rd_zkeys $n]
    set numkeys [expr {[rd_chance 3] ? [rd_pick [list 0 -1 [expr {$n + 1}]]] : $n}]
    set cmd [list ZMPOP $numkeys {*}$keys [rd_wpick {MIN 45 MAX 45 min 5 BAD 1}]]
    if {[rd_chance 60]} { lappend cmd COUNT [rd_count] }
    list [list x $cmd]
}
# Blocking pops, with a timeout short enough not to slow the stream.
proc rd_g_bzpop {} {
    if {[rd_chance 60]} {
        set cmd [list [rd_pick {BZPOPMIN BZPOPMAX}] {*}[rd_zkeys [expr {1 + [rd_rnd 2]}]] 0.01]
    } else {
        set n [expr {1 + [rd_rnd 2]}]
        set cmd [list BZMPOP 0.01 $n {*}[rd_zkeys $n] [rd_pick {MIN MAX}]]
        if {[rd_chance 50]} { lappend cmd COUNT [rd_pick {1 2 5 100}] }
    }
    list [list x $cmd]
}

proc rd_weight {} { rd_wpick {1 30 2 15 -1 10 0 10 0.5 10 3 5 inf 3 -inf 3 1e300 2 nan 1 x 1} }

proc rd_g_zsetop {} {
    set op [rd_pick {ZUNION ZINTER ZDIFF ZUNIONSTORE ZINTERSTORE ZDIFFSTORE}]
    set n [expr {1 + [rd_rnd 4]}]
    set keys {}
    for {set i 0} {$i < $n} {incr i} { lappend keys [rd_fkey {z 55 d 12 g 8 s 12 x 5 n 6 c 2}] }
    if {$::rd_big && ![string match *STORE $op]} {
        foreach k $keys { if {$k in $::rd_bigkeys} { append op STORE; break } }
    }
    set numkeys [expr {[rd_chance 3] ? [rd_pick [list 0 -1 [expr {$n + 1}]]] : $n}]
    set store [string match *STORE $op]
    set cmd [list $op]
    if {$store} { lappend cmd [rd_fkey {d 75 z 25}] }
    if {$store && $::rd_big && [lindex $cmd 1] in $::rd_bigkeys} { lset cmd 1 d:1 }
    lappend cmd $numkeys {*}$keys
    set groups {}
    set diff [string match ZDIFF* $op]
    if {$diff ? [rd_chance 3] : [rd_chance 40]} {
        set w [list WEIGHTS]
        set nw [expr {[rd_chance 3] ? $n + 1 : $n}]
        for {set i 0} {$i < $nw} {incr i} { lappend w [rd_weight] }
        lappend groups $w
    }
    if {$diff ? [rd_chance 3] : [rd_chance 40]} {
        lappend groups [list AGGREGATE [rd_wpick {SUM 30 MIN 30 MAX 30 min 5 AVG 1}]]
    }
    if {$store ? [rd_chance 2] : [rd_chance 50]} { lappend groups WITHSCORES }
    list [list x [concat $cmd [rd_opts $groups]]]
}

proc rd_g_zintercard {} {
    set n [expr {1 + [rd_rnd 3]}]
    set keys {}
    for {set i 0} {$i < $n} {incr i} { lappend keys [rd_fkey {z 60 d 10 g 5 s 15 n 8 c 2}] }
    set numkeys [expr {[rd_chance 3] ? [rd_pick [list 0 -1 [expr {$n + 1}]]] : $n}]
    set cmd [list ZINTERCARD $numkeys {*}$keys]
    if {[rd_chance 50]} { lappend cmd LIMIT [rd_wpick {0 20 1 20 3 20 100 10 -1 2}] }
    list [list x $cmd]
}

proc rd_g_zscan {} {
    set k [rd_fkey {z 70 x 10 g 8 d 7 s 2 c 1 n 2}]
    if {[rd_chance 4]} {
        return [list [list x [list ZSCAN $k [rd_pick {abc -1 18446744073709551616}]]]]
    }
    set opts {}
    if {[rd_chance 40]} { lappend opts [list MATCH [rd_pick {* m:* *1* L* long:* *\xff* u:* p:* \x00*}]] }
    if {$::rd_big} {
        lappend opts [list COUNT [rd_pick {100 500 1000}]]
    } elseif {[rd_chance 60]} {
        lappend opts [list COUNT [rd_pick {1 3 10 100 1000}]]
    }
    if {[rd_chance 30]} { lappend opts NOSCORES }
    list [list p rd_check_scan ZSCAN $k [rd_opts $opts]]
}
proc rd_g_zrandmember {} {
    set k [rd_fkey {z 75 x 5 g 5 d 8 s 3 c 1 n 3}]
    set count [rd_wpick {1 10 2 8 3 8 5 8 10 8 -1 8 -3 8 -10 8 0 4 100 6 -100 4 64 4 128 4 200 4 300 3 -500 2
                         9223372036854775807 1 -9223372036854775807 1 -9223372036854775808 1 x 1}]
    # A huge negative count is refused only WITHSCORES; without, it would
    # ask for that many members.
    set ws [expr {$count == -9223372036854775807 || [rd_chance 50]}]
    list [list p rd_check_zrandmember $k $count $ws]
}

# GEO.
set ::rd_geo_centers {{13.361389 38.115556} {-122.4194 37.7749} {0 0} {179.9 0.5} {-179.9 -0.5}
                      {139.6917 35.6895} {10 84.5} {-70 -84.5}}
proc rd_lonlat {{valid 0}} {
    if {!$valid && [rd_chance 2]} { return [rd_pick {{180.5 0} {0 85.1} {-181 10} {0 -86} {x 1}}] }
    lassign [rd_pick $::rd_geo_centers] lon lat
    set spread [rd_pick {0.01 0.5 3}]
    set lon [expr {$lon + ([rd_rnd 2001] - 1000) / 1000.0 * $spread}]
    set lat [expr {$lat + ([rd_rnd 2001] - 1000) / 1000.0 * $spread}]
    set lon [expr {min(180.0, max(-180.0, $lon))}]
    set lat [expr {min(85.05112878, max(-85.05112878, $lat))}]
    list [format %.6f $lon] [format %.6f $lat]
}
proc rd_gmember {} { if {[rd_chance 80]} { return p:[rd_rnd 150] } else { return [rd_mem g:0] } }
proc rd_gkey {} { rd_fkey {g 90 s 3 c 2 n 5} }
proc rd_radius {} { list [rd_pick {0 0.5 1 5 10 50 100 200 500 1000 3000 7000}] [rd_pick {m km km km mi ft}] }
proc rd_geo_opts {store} {
    set groups {}
    if {!$store} {
        foreach o {WITHCOORD WITHDIST WITHHASH} { if {[rd_chance 30]} { lappend groups $o } }
    } elseif {[rd_chance 2]} {
        lappend groups WITHDIST
    }
    if {[rd_chance 60]} { lappend groups [rd_pick {ASC DESC}] }
    if {[rd_chance 40]} {
        set c [list COUNT [rd_wpick {1 20 3 20 10 20 0 2 -1 1}]]
        if {[rd_chance 30]} { lappend c ANY }
        lappend groups $c
    } elseif {[rd_chance 1]} {
        lappend groups ANY
    }
    return $groups
}

proc rd_g_geoadd {} {
    set k [rd_fkey {g 88 d 5 c 3 n 4}]
    if {$k eq "n:none"} { set k g:0 }
    set groups {}
    set cmd [list GEOADD $k {*}[rd_wpick {{} 50 NX 10 XX 10 CH 10 {NX CH} 8 {XX CH} 8 {NX XX} 1}]]
    set n [expr {[rd_chance 3] ? 100 + [rd_rnd 100] : 1 + [rd_rnd 5]}]
    for {set i 0} {$i < $n} {incr i} { lappend cmd {*}[rd_lonlat] [rd_gmember] }
    list [list x $cmd]
}
proc rd_g_georead {} {
    set k [rd_gkey]
    switch [rd_rnd 3] {
        0 {
            set cmd [list GEOPOS $k]
            for {set i [rd_rnd 4]} {$i >= 0} {incr i -1} { lappend cmd [rd_gmember] }
        }
        1 {
            set cmd [list GEODIST $k [rd_gmember] [rd_gmember]]
            if {[rd_chance 60]} { lappend cmd [rd_pick {m km ft mi KM furlong}] }
        }
        2 {
            set cmd [list GEOHASH $k]
            for {set i [rd_rnd 4]} {$i >= 0} {incr i -1} { lappend cmd [rd_gmember] }
        }
    }
    list [list x $cmd]
}
proc rd_g_geosearch {} {
    set store [rd_chance 30]
    set k [rd_fkey {g 80 z 6 d 6 s 3 n 5}]
    set member_ok [expr {[rd_fam $k] in {g s n}}]
    set groups {}
    if {$member_ok && [rd_chance 40]} {
        lappend groups [list FROMMEMBER [rd_gmember]]
    } else {
        lappend groups [list FROMLONLAT {*}[rd_lonlat]]
    }
    if {[rd_chance 50]} {
        lappend groups [list BYRADIUS {*}[rd_radius]]
    } else {
        lassign [rd_radius] w unit
        lappend groups [list BYBOX $w [lindex [rd_radius] 0] $unit]
    }
    if {[rd_chance 2]} { set groups [lrange $groups 0 0] }
    if {[rd_chance 1]} { lappend groups [list FROMLONLAT 0 0] }
    lappend groups {*}[rd_geo_opts $store]
    if {$store} {
        set dist [rd_chance 30]
        if {$dist} { lappend groups STOREDIST }
        set dst [expr {$dist ? [rd_key d] : [rd_fkey {g 40 d 60}]}]
        set cmd [list GEOSEARCHSTORE $dst $k {*}[rd_opts $groups]]
    } else {
        set cmd [list GEOSEARCH $k {*}[rd_opts $groups]]
    }
    list [list x $cmd]
}
proc rd_g_georadius {} {
    set bymember [rd_chance 50]
    set ro [rd_chance 30]
    set k [expr {$bymember ? [rd_gkey] : [rd_fkey {g 80 z 8 d 7 n 5}]}]
    set cmd [list [expr {$bymember ? "GEORADIUSBYMEMBER" : "GEORADIUS"}][expr {$ro ? "_RO" : ""}] $k]
    if {$bymember} { lappend cmd [rd_gmember] } else { lappend cmd {*}[rd_lonlat] }
    lappend cmd {*}[rd_radius]
    set store [expr {[rd_chance 25] && (!$ro || [rd_chance 10])}]
    set groups [rd_geo_opts $store]
    if {$store} {
        if {[rd_chance 30]} {
            lappend groups [list STOREDIST [rd_key d]]
        } else {
            lappend groups [list STORE [rd_fkey {g 40 d 60}]]
        }
    }
    list [list x [concat $cmd [rd_opts $groups]]]
}

# SORT (and SORT_RO) over sorted sets and sets. SORT reads a set, and a
# sorted set past its listpack (upstream: its hashtable), in hash order
# before sorting, so where the order is not total (ALPHA BY: equal or
# missing weights; ALPHA: strcoll ties members equal up to a NUL byte; a
# set's BY nosort) two upstream servers differ too: those replies are
# compared as multisets, or by length with LIMIT, and ALPHA BY with STORE
# is not sent. BY nosort on a sorted set (its order) and numeric sorts
# (ties broken by member) are compared exactly.
proc rd_g_sort {} {
    set k [rd_fkey {z 35 g 10 x 10 s 40 c 2 n 3}]
    set ro [rd_chance 20]
    set by [rd_wpick {{} 25 nosort 25 nokey 5 w_* 25 h_*->f 15 nokey_* 5}]
    set alpha [rd_chance 40]
    set groups {}
    if {$by ne {}} { lappend groups [list BY $by] }
    if {$alpha} { lappend groups [rd_kw ALPHA] }
    set limit [expr {$::rd_big || [rd_chance 40]}]
    if {$limit} {
        set off [rd_wpick {0 40 1 20 5 20 100 10 1000 5 -1 3}]
        if {$::rd_big && [rd_chance 50]} { set off [rd_rnd 21000] }
        lappend groups [list LIMIT $off [rd_wpick {1 20 3 20 10 30 -1 5 0 5}]]
    }
    if {[rd_chance 30]} {
        set g {}
        for {set i [rd_rnd 3]} {$i >= 0} {incr i -1} { lappend g GET [rd_pick {# w_* h_*->f nokey_*}] }
        lappend groups $g
    }
    if {[rd_chance 50]} { lappend groups [rd_pick {ASC DESC}] }
    set store [expr {[rd_chance 25] && (!$ro || [rd_chance 10])}]
    set isset [expr {[rd_fam $k] eq "s"}]
    set dontsort [expr {$by in {nosort nokey}}]
    if {$dontsort} {
        # A sorted set's own order; a set's (forced ALPHA with STORE).
        set total [expr {!$isset || $store}]
    } elseif {$alpha && $by ne {}} {
        set total 0
        set store 0
    } elseif {$alpha} {
        # strcoll: members equal up to a NUL byte tie, unless STORE.
        set total $store
    } else {
        set total 1
    }
    if {$store} { lappend groups [list STORE [rd_key d]] }
    set mode [expr {$total ? "x" : ($limit ? "l" : "s")}]
    list [list $mode [concat [list [expr {$ro ? "SORT_RO" : "SORT"}] $k] [rd_opts $groups]]]
}

# Sets.
proc rd_g_sadd {} {
    set k [rd_fkey {s 90 d 5 c 5}]
    set cmd [list SADD $k]
    for {set i [rd_wpick {0 50 1 20 3 20 8 10}]} {$i >= 0} {incr i -1} { lappend cmd [rd_smember $k] }
    list [list x $cmd]
}
proc rd_g_saddbulk {} {
    set k [rd_key s]
    set ops {}
    if {[rd_chance 40]} { lappend ops [list x [list DEL $k]] }
    set cmd [list SADD $k]
    for {set i [expr {100 + [rd_rnd 500]}]} {$i >= 0} {incr i -1} { lappend cmd [rd_smember $k] }
    lappend ops [list x $cmd]
    return $ops
}
proc rd_g_srem {} {
    set k [rd_skey]
    set cmd [list SREM $k]
    for {set i [rd_wpick {0 50 1 20 5 20 30 10}]} {$i >= 0} {incr i -1} { lappend cmd [rd_smember $k] }
    list [list x $cmd]
}
proc rd_g_sread {} {
    set k [rd_skey]
    switch [rd_rnd 5] {
        0 - 1 { return [list [list x [list SISMEMBER $k [rd_smember $k]]]] }
        2 {
            set cmd [list SMISMEMBER $k]
            for {set i [rd_rnd 5]} {$i >= 0} {incr i -1} { lappend cmd [rd_smember $k] }
            return [list [list x $cmd]]
        }
        3 { return [list [list x [list SCARD $k]]] }
        4 { return [list [list s [list SMEMBERS $k]]] }
    }
}
proc rd_skeys {n} {
    set l {}
    for {set i 0} {$i < $n} {incr i} { lappend l [rd_fkey {s 75 d 8 n 10 z 5 c 2}] }
    return $l
}
proc rd_g_ssetop {} {
    set op [rd_pick {SINTER SUNION SDIFF SINTERSTORE SUNIONSTORE SDIFFSTORE}]
    set keys [rd_skeys [expr {1 + [rd_rnd 4]}]]
    if {[string match *STORE $op]} {
        return [list [list x [list $op [rd_fkey {d 60 s 40}] {*}$keys]]]
    }
    list [list s [list $op {*}$keys]]
}
proc rd_g_sintercard {} {
    set n [expr {1 + [rd_rnd 3]}]
    set numkeys [expr {[rd_chance 3] ? [rd_pick [list 0 -1 [expr {$n + 1}]]] : $n}]
    set cmd [list SINTERCARD $numkeys {*}[rd_skeys $n]]
    if {[rd_chance 50]} { lappend cmd LIMIT [rd_wpick {0 20 1 20 3 20 100 10 -1 2}] }
    list [list x $cmd]
}
proc rd_g_smove {} {
    set src [rd_fkey {s 85 d 5 z 3 n 5 c 2}]
    set dst [rd_fkey {s 85 d 10 c 5}]
    list [list x [list SMOVE $src $dst [rd_smember $src]]]
}
proc rd_g_spop {} {
    set k [rd_skey]
    list [list p rd_check_spop $k [expr {[rd_chance 30] ? {} : [rd_pick {0 1 2 3 10 100 1000 -1}]}]]
}
proc rd_g_srandmember {} {
    set k [rd_skey]
    list [list p rd_check_srandmember $k [expr {[rd_chance 20] ? {} : [rd_pick {0 1 2 3 10 100 1000 -1 -3 -10 -1000}]}]]
}
proc rd_g_sscan {} {
    set k [rd_skey]
    set opts {}
    if {[rd_chance 30]} { lappend opts [list MATCH [rd_pick {* *1* m:* -* 1*}]] }
    if {[rd_chance 60]} { lappend opts [list COUNT [rd_pick {1 5 20 1000}]] }
    list [list p rd_check_scan SSCAN $k [rd_opts $opts]]
}

# Keys: deletions that empty keys, COPY, EXISTS, TYPE.
proc rd_anykey {} { rd_fkey {z 30 x 5 g 8 s 25 d 20 c 2 n 10} }
proc rd_g_keys {} {
    switch [rd_rnd 6] {
        0 { set cmd [list EXISTS [rd_anykey] [rd_anykey] [rd_anykey]] }
        1 { set cmd [list TYPE [rd_anykey]] }
        2 - 3 {
            set k [expr {[rd_chance 60] ? [rd_key d] : [rd_anykey]}]
            if {($::rd_big && $k in $::rd_bigkeys) || $k eq "c:str"} { set k d:2 }
            set cmd [list [rd_pick {DEL UNLINK}] $k]
        }
        4 - 5 {
            set cmd [list COPY [rd_anykey] [rd_key d]]
            if {[rd_chance 60]} { lappend cmd REPLACE }
        }
    }
    list [list x $cmd]
}

# Expire commands (the `ttl` stream). Times are absolute and days ahead of
# the stream's base, or in the past; none falls due while the stream runs.
proc rd_when {} { expr {$::rd_t0 + (1 + [rd_rnd 40]) * 86400000 + [rd_rnd 86400000]} }
proc rd_ttl_cond {} { if {[rd_chance 40]} { list [rd_kw [rd_pick {NX XX GT LT}]] } }
proc rd_g_expire {} {
    set k [rd_anykey]
    switch [rd_rnd 12] {
        0 - 1 - 2 { set cmd [concat [list PEXPIREAT $k [rd_when]] [rd_ttl_cond]] }
        3 { set cmd [concat [list EXPIREAT $k [expr {[rd_when] / 1000}]] [rd_ttl_cond]] }
        4 { set cmd [list PERSIST $k] }
        5 { set cmd [list [rd_pick {EXPIRETIME PEXPIRETIME}] $k] }
        6 - 7 {
            set opts [rd_pick [list [list PXAT [rd_when]] [list EXAT [expr {[rd_when] / 1000}]] KEEPTTL {}]]
            if {[rd_chance 20]} { lappend opts [rd_pick {NX XX GET}] }
            set cmd [concat [list SET [rd_key d] v:[rd_rnd 1000]] $opts]
        }
        8 {
            set opts [rd_pick [list [list PXAT [rd_when]] [list EXAT [expr {[rd_when] / 1000}]] PERSIST {}]]
            set cmd [concat [list GETEX [rd_fkey {d 80 c 10 z 10}]] $opts]
        }
        9 { return [list [list p rd_check_ttl [list [rd_pick {TTL PTTL}] $k]]] }
        10 - 11 {
            if {($::rd_big && $k in $::rd_bigkeys) || $k eq "c:str"} { set k d:1 }
            set cmd [rd_pick [list [list EXPIRE $k [expr {-[rd_rnd 100]}]] [list PEXPIRE $k 0] \
                [list PEXPIREAT $k [rd_rnd 100000]] [list SET $k v PX 1 XX] [list EXPIREAT $k 1]]]
            if {[lindex $cmd 0] eq "SET"} { return [list [list p rd_check_past $cmd $k]] }
        }
    }
    list [list x $cmd]
}

# TTL / PTTL: -2 and -1 exactly, a time left within two seconds.
proc rd_check_ttl {cmd} {
    rd_flush
    lassign [rd_both $cmd] rr ro
    set a [rd_plain $rr]
    set b [rd_plain $ro]
    set slack [expr {[lindex $cmd 0] eq "PTTL" ? 2000 : 2}]
    if {[rd_iserr $rr] || [rd_iserr $ro] || $a < 0 || $b < 0 ? $rr ne $ro : abs($a - $b) > $slack} {
        rd_fail "TTLs differ" $cmd $rr $ro
    }
    incr ::rd_stats(rd_check_ttl)
}

# SET ... PX 1 XX: the key is due a millisecond later on both servers;
# compared once it is gone from both (lazily, on the EXISTS).
proc rd_check_past {cmd k} {
    rd_flush
    rd_both_exact $cmd
    after 3
    rd_both_exact [list EXISTS $k]
    incr ::rd_stats(rd_check_past)
}

# Emptying a key by the commands that can: the key is gone afterwards.
proc rd_g_empty {} {
    set k [rd_fkey {z 50 x 15 g 10 s 25}]
    if {$::rd_big && $k in $::rd_bigkeys} { set k z:4 }
    switch [rd_fam $k]:[rd_rnd 4] {
        s:0 - s:1 { return [list [list s [list SPOP $k 100000]] [list x [list EXISTS $k]]] }
        s:2 - s:3 { set cmd [list SINTERSTORE $k n:none] }
        default {
            set cmd [rd_pick [list [list ZREMRANGEBYRANK $k 0 -1] [list ZREMRANGEBYSCORE $k -inf +inf] \
                [list ZPOPMIN $k 100000] [list ZMPOP 1 $k MAX COUNT 100000] [list ZRANGESTORE $k n:none 0 -1] \
                [list ZINTERSTORE $k 2 $k n:none]]]
        }
    }
    list [list x $cmd] [list x [list EXISTS $k]]
}

proc rd_g_dump {} {
    set k [rd_anykey]
    set dst [expr {[rd_chance 70] ? $k : [rd_key d]}]
    if {$dst eq "n:none"} { set dst d:3 }
    list [list p rd_check_dump $k $dst [rd_wpick {replace 85 busy 8 corrupt 7}]]
}
proc rd_g_reload {} { list [list p rd_check_reload] }
proc rd_g_aof {} { list [list p rd_check_aof [rd_pick {yes no}]] }
proc rd_g_config {} {
    set p [rd_pick {zset-max-listpack-entries zset-max-listpack-entries zset-max-listpack-value
                    zset-max-listpack-value set-max-intset-entries set-max-listpack-entries set-max-listpack-value}]
    set v [rd_pick [dict get {
        zset-max-listpack-entries {0 1 2 4 16 64 128 128 128 256}
        zset-max-listpack-value {0 1 8 32 64 64 64 128}
        set-max-intset-entries {1 4 64 512 512}
        set-max-listpack-entries {1 4 16 128 128}
        set-max-listpack-value {1 8 64 64}
    } $p]]
    list [list x [list CONFIG SET $p $v]]
}

set ::rd_table {
    zadd 120 zaddbulk 8 zincrby 35 zrem 45 zread 110 zrange 120 zrangestore 30 zremrange 30
    zpop 30 bzpop 2 zmpop 15 zsetop 50 zintercard 15 zscan 8 zrandmember 12
    geoadd 30 georead 25 geosearch 30 georadius 20 sort 35
    sadd 50 saddbulk 4 srem 25 sread 40 ssetop 35 sintercard 10 smove 15 spop 8 srandmember 10 sscan 6
    keys 25 empty 4 dump 6 reload 1 aof 0 config 3
}

# ---------------------------------------------------------------------------
# String commands (the `strings` stream, issue #46): ours holds values
# compressed (string-compression yes, tables trained from 200 values), and
# DEBUG STRCOMP TRAIN and SWEEP, sent to ours alone, change its tables and
# recode its values under the stream. Keys t:0 .. t:11 hold short English
# texts (which code smaller), short, numeric, binary and long values, and
# values past string-compression-max-size; 120 keys of long values beside
# them give a generation enough long samples for its zstd dictionary, so
# that long values are zstd frames. Every time set is absolute, as in the
# ttl stream.

set ::rd_phrases {
    "The quick brown fox jumps over the lazy dog while the cat watches"
    "A journey of a thousand miles begins with a single step forward"
    "All that glitters is not gold and not all those who wander are lost"
    "There is no place like home and there is no time like the present"
    "In the middle of every difficulty lies an opportunity for the brave"
    "What we think we become and what we feel we attract to ourselves"
}
proc rd_tkey {} { rd_pick {t:0 t:1 t:2 t:3 t:4 t:5 t:6 t:7 t:8 t:9 t:10 t:11} }
proc rd_text {} {
    set t "[rd_pick $::rd_phrases], number [rd_rnd 5000]"
    if {[rd_chance 30]} { append t ". [rd_pick $::rd_phrases]." }
    return $t
}
# A value for key `k`: only t:10 and t:11 get values past 4 KB, so that LCS
# (t:0 .. t:9) stays small.
proc rd_sval {{k t:0}} {
    set huge [expr {$k in {t:10 t:11} ? 4 : 0}]
    switch [rd_wpick [list text 60 short 8 num 8 bin 6 long 8 huge $huge empty 2 float 3 eq 3]] {
        text { rd_text }
        short { return v:[rd_rnd 100] }
        num { expr {[rd_rnd 2001] - 1000} }
        float { return [rd_rnd 100].[rd_rnd 100] }
        bin { return "\x00\xff[rd_text]\r\n\x01[rd_rnd 99]" }
        long { rd_long }
        huge { return [string repeat "[rd_text] " [expr {70 + [rd_rnd 10]}]] }
        empty { return {} }
        eq { return [rd_pick $::rd_phrases] }
    }
}
# 8 to 27 texts: 300 bytes to 2 KB, which ours codes as zstd frames.
proc rd_long {} {
    set t {}
    for {set i [expr {8 + [rd_rnd 20]}]} {$i > 0} {incr i -1} { append t [rd_text] " " }
    return $t
}
proc rd_sexpiry {} {
    rd_wpick [list {} 60 [list PXAT [rd_when]] 12 [list EXAT [expr {[rd_when] / 1000}]] 8 KEEPTTL 10 \
        [list PXAT [rd_rnd 100000]] 2]
}
proc rd_range {} { list [rd_wpick {0 30 5 15 -10 15 -1 10 100 5 -1000 5}] [rd_wpick {-1 30 10 20 40 20 -5 10 0 5 10000 5}] }

proc rd_g_swrite {} {
    set k [rd_tkey]
    switch [rd_rnd 22] {
        0 - 1 - 2 - 3 - 4 {
            set opts [rd_sexpiry]
            if {[rd_chance 20]} { lappend opts [rd_pick {NX XX}] }
            if {[rd_chance 15]} { lappend opts GET }
            if {[rd_chance 8] && "NX" ni $opts} { lappend opts IFEQ [rd_pick [list [rd_pick $::rd_phrases] [rd_text] x]] }
            set cmd [concat [list SET $k [rd_sval $k]] $opts]
        }
        5 { set cmd [list APPEND $k [rd_pick [list "!" [rd_text] "\x00\xff" {}]]] }
        6 { set cmd [list SETRANGE $k [rd_wpick {0 30 3 20 20 20 70 10 300 5}] [rd_pick [list X "\x00" [rd_text] {}]]] }
        7 { set cmd [list GETDEL $k] }
        8 {
            set opts [rd_pick [list [list PXAT [rd_when]] [list EXAT [expr {[rd_when] / 1000}]] PERSIST {}]]
            set cmd [concat [list GETEX $k] $opts]
        }
        9 { set cmd [list GETSET $k [rd_sval $k]] }
        10 { set cmd [list SETNX $k [rd_sval $k]] }
        11 { set cmd [list MSET $k [rd_sval] [rd_tkey] [rd_sval] [rd_tkey] [rd_sval]] }
        12 { set cmd [list MSETNX $k [rd_sval] [rd_tkey] [rd_sval]] }
        13 {
            set cmd [list MSETEX 2 $k [rd_sval] [rd_tkey] [rd_sval]]
            if {[rd_chance 30]} { lappend cmd [rd_pick {NX XX}] }
            lappend cmd {*}[rd_pick [list [list PXAT [rd_when]] [list EXAT [expr {[rd_when] / 1000}]] KEEPTTL {}]]
        }
        14 { set cmd [list DELIFEQ $k [rd_pick [list [rd_pick $::rd_phrases] [rd_text] x]]] }
        15 {
            set cmd [rd_pick [list [list INCR $k] [list DECR $k] [list INCRBY $k [expr {[rd_rnd 200] - 100}]] \
                [list DECRBY $k [rd_rnd 50]] [list INCRBYFLOAT $k [rd_rnd 10].5]]]
        }
        16 - 17 { set cmd [list SETBIT $k [rd_wpick {0 20 7 20 100 20 900 10 4000 5}] [rd_rnd 2]] }
        18 {
            set cmd [list BITFIELD $k SET u8 [rd_wpick {0 30 8 30 #3 20 200 5}] [rd_rnd 256] \
                INCRBY i5 [rd_rnd 40] [expr {[rd_rnd 20] - 10}] GET u4 [rd_rnd 60]]
        }
        19 { set cmd [list BITOP [rd_pick {AND OR XOR NOT}] [rd_key d] $k] ; if {[lindex $cmd 1] ne "NOT"} { lappend cmd [rd_tkey] } }
        20 { set cmd [list SET $k [rd_text]] }
        21 { set cmd [list COPY $k [rd_pick {t:0 t:1 d:0 d:1}] REPLACE] }
    }
    list [list x $cmd]
}

proc rd_g_sread {} {
    set k [rd_tkey]
    switch [rd_rnd 16] {
        0 - 1 - 2 { set cmd [list GET $k] }
        3 - 4 { set cmd [list MGET $k [rd_tkey] [rd_tkey] n:none [rd_fkey {t 0 z 1 d 1}]] }
        5 - 6 { set cmd [concat [list GETRANGE $k] [rd_range]] }
        7 { set cmd [concat [list SUBSTR $k] [rd_range]] }
        8 { set cmd [list STRLEN $k] }
        9 {
            set cmd [list LCS t:[rd_rnd 10] t:[rd_rnd 10]]
            lappend cmd {*}[rd_wpick {{} 30 LEN 30 IDX 20 {IDX MINMATCHLEN 4} 10 {IDX WITHMATCHLEN} 10}]
        }
        10 { set cmd [list GETBIT $k [rd_wpick {0 30 7 20 100 20 900 10}]] }
        11 { set cmd [concat [list BITCOUNT $k] [rd_pick [list {} [rd_range] [concat [rd_range] BIT] [concat [rd_range] BYTE]]]] }
        12 { set cmd [concat [list BITPOS $k [rd_rnd 2]] [rd_pick [list {} [lindex [rd_range] 0] [concat [rd_range] BIT]]]] }
        13 { set cmd [list BITFIELD_RO $k GET u8 [rd_rnd 80] GET i16 [rd_rnd 200]] }
        14 { set cmd [list SORT l:t BY nosort GET # GET t:*] }
        15 { set cmd [list EVAL {return {redis.call('get', KEYS[1]), redis.call('strlen', KEYS[1])}} 1 $k] }
    }
    list [list x $cmd]
}

# DEBUG STRCOMP TRAIN (a new table) or SWEEP (the pass to its end), to ours.
proc rd_g_strcomp {} { list [list p rd_strcomp [rd_wpick {SWEEP 70 TRAIN 30}]] }
proc rd_strcomp {what} { rd_one ours [list DEBUG STRCOMP $what] }
proc rd_g_sdump {} {
    set k [rd_tkey]
    list [list p rd_check_dump $k [expr {[rd_chance 70] ? $k : [rd_key d]}] [rd_wpick {replace 85 busy 8 corrupt 7}]]
}
set ::rd_strings_table {
    swrite 150 sread 150 strcomp 12 sdump 10 reload 2 aof 1 keys 10
}

# ---------------------------------------------------------------------------
# Checks that are not a plain reply comparison.

# ZSCAN / SSCAN to the end on each server, compared as sets.
proc rd_check_scan {type key opts} {
    set noscores [expr {$type eq "SSCAN" || "NOSCORES" in $opts}]
    foreach side {ref ours} {
        set cursor 0
        set acc [dict create]
        set calls 0
        set res($side) {}
        while 1 {
            set cmd [list $type $key $cursor {*}$opts]
            set rep [rd_one $side $cmd]
            if {[lindex $rep 0] ne "*"} { set res($side) [list error $rep]; break }
            set p [rd_plain $rep]
            set cursor [lindex $p 0]
            if {$noscores} {
                foreach m [lindex $p 1] { dict set acc $m 1 }
            } else {
                foreach {m s} [lindex $p 1] {
                    if {[dict exists $acc $m] && [dict get $acc $m] ne $s} {
                        rd_fail "$type returned a member twice with different scores" $cmd $rep $rep
                    }
                    dict set acc $m $s
                }
            }
            if {$cursor eq "0"} break
            if {[incr calls] > 1000000} { rd_fail "$type does not end" $cmd $rep $rep }
        }
        if {$res($side) eq {}} { set res($side) [list set [lsort -stride 2 -index 0 [dict get $acc]]] }
    }
    if {$res(ref) ne $res(ours)} {
        set cmd [list $type $key 0 {*}$opts]
        if {[lindex $res(ref) 0] eq "error" || [lindex $res(ours) 0] eq "error"} {
            rd_fail "replies differ" $cmd [lindex $res(ref) 1] [lindex $res(ours) 1]
        }
        set r [lindex $res(ref) 1]
        set o [lindex $res(ours) 1]
        set onlyr [lmap {m s} $r {expr {[dict exists $o $m] && [dict get $o $m] eq $s ? [continue] : "$m=$s"}}]
        set onlyo [lmap {m s} $o {expr {[dict exists $r $m] && [dict get $r $m] eq $s ? [continue] : "$m=$s"}}]
        rd_fail "full $type iterations returned different members" $cmd \
            [list * [lmap x $onlyr {list \$ $x}]] [list * [lmap x $onlyo {list \$ $x}]] \
            "(shown: the members each server returned and the other did not; [expr {[llength $r] / 2}] vs [expr {[llength $o] / 2}] members)"
    }
}

proc rd_scores_equal {a b} {
    if {$a eq $b} { return 1 }
    if {[string is double -strict $a] && [string is double -strict $b]} { return [expr {double($a) == double($b)}] }
    return 0
}

# The members of a random reply: in the set (checked with `mcmd`, ZMSCORE
# or SMISMEMBER, compared exactly), `len` long, distinct if asked, and with
# the set's scores when `ws`.
proc rd_check_members {cmd side rep members scores len distinct mcmd key} {
    set bad {}
    if {[llength $members] != $len} { lappend bad "[llength $members] members, expected $len" }
    if {$distinct && [llength [lsort -unique $members]] != [llength $members]} { lappend bad "members repeat" }
    if {[llength $members]} {
        set got [rd_plain [rd_both_exact [list $mcmd $key {*}$members]]]
        set i -1
        foreach m $members v $got {
            incr i
            if {$mcmd eq "SMISMEMBER"} {
                if {$v ne "1"} { lappend bad "[rd_esc $m] is not in the set" }
            } elseif {$v eq {}} {
                lappend bad "[rd_esc $m] is not in the set"
            } elseif {$scores ne {} && ![rd_scores_equal $v [lindex $scores $i]]} {
                lappend bad "[rd_esc $m] came with score [lindex $scores $i], ZMSCORE says $v"
            }
        }
    }
    if {[llength $bad]} {
        rd_fail "invariant broken on the [expr {$side eq {ref} ? {reference} : {fork}}]: [join [lrange $bad 0 4] {; }]" \
            $cmd [lindex $rep 0] [lindex $rep 1]
    }
}

proc rd_check_zrandmember {key count ws} {
    set cmd [list ZRANDMEMBER $key $count]
    if {$ws} { lappend cmd WITHSCORES }
    lassign [rd_both $cmd] rr ro
    if {$rr eq $ro} { incr ::rd_stats(same); return }
    if {[rd_iserr $rr] || [rd_iserr $ro] || [lindex $rr 0] ne [lindex $ro 0] || ![rd_isagg $rr]} {
        rd_fail "replies differ" $cmd $rr $ro
    }
    # RESP3 WITHSCORES replies are arrays of [member, score] arrays.
    if {$ws && $::rd_proto == 3} {
        foreach rep [list $rr $ro] {
            foreach e [lindex $rep 1] {
                if {[lindex $e 0] ne "*" || [llength [lindex $e 1]] != 2} {
                    rd_fail "ZRANDMEMBER WITHSCORES pair is not a 2-array" $cmd $rr $ro
                }
            }
        }
    }
    set card [rd_plain [rd_both_exact [list ZCARD $key]]]
    set len [expr {$count > 0 ? min($count, $card) : -$count}]
    foreach side {ref ours} rep [list $rr $ro] {
        set items [rd_flat $rep]
        if {$ws} {
            set members [lmap {m s} $items {set m}]
            set scores [lmap {m s} $items {set s}]
        } else {
            set members $items
            set scores {}
        }
        rd_check_members $cmd $side [list $rr $ro] $members $scores $len [expr {$count > 0}] ZMSCORE $key
    }
}

proc rd_check_srandmember {key count} {
    set cmd [list SRANDMEMBER $key {*}$count]
    lassign [rd_both $cmd] rr ro
    if {$rr eq $ro} { incr ::rd_stats(same); return }
    if {[rd_iserr $rr] || [rd_iserr $ro] || [lindex $rr 0] ne [lindex $ro 0]} {
        rd_fail "replies differ" $cmd $rr $ro
    }
    set card [rd_plain [rd_both_exact [list SCARD $key]]]
    foreach side {ref ours} rep [list $rr $ro] {
        if {$count eq {}} {
            set members [list [rd_plain $rep]]
            set len [expr {$card > 0}]
        } else {
            set members [rd_plain $rep]
            set len [expr {$count > 0 ? min($count, $card) : -$count}]
        }
        rd_check_members $cmd $side [list $rr $ro] $members {} $len [expr {$count eq {} || $count > 0}] SMISMEMBER $key
    }
}

# SPOP on a COPY of the set, so that both servers keep the same data.
proc rd_check_spop {key count} {
    set tmp rdiff:popped
    rd_both_exact [list COPY $key $tmp REPLACE]
    set cmd [list SPOP $tmp {*}$count]
    lassign [rd_both $cmd] rr ro
    if {$rr ne $ro} {
        if {[rd_iserr $rr] || [rd_iserr $ro] || [lindex $rr 0] ne [lindex $ro 0]} {
            rd_fail "replies differ" $cmd $rr $ro
        }
        set card [rd_plain [rd_both_exact [list SCARD $key]]]
        foreach side {ref ours} rep [list $rr $ro] {
            if {$count eq {}} { set members [list [rd_plain $rep]] } else { set members [rd_plain $rep] }
            set len [expr {$count eq {} ? ($card > 0) : min($count, $card)}]
            rd_check_members $cmd $side [list $rr $ro] $members {} $len 1 SMISMEMBER $key
            set left [rd_plain [rd_one $side [list SCARD $tmp]]]
            if {$left != $card - $len} {
                rd_fail "SPOP left $left members of $card after popping $len" $cmd $rr $ro
            }
            if {[llength $members]} {
                set still [rd_plain [rd_one $side [list SMISMEMBER $tmp {*}$members]]]
                if {[lsearch $still 1] >= 0} { rd_fail "SPOP left a popped member in the set" $cmd $rr $ro }
            }
        }
    } else {
        incr ::rd_stats(same)
        rd_both_exact [list SCARD $tmp]
    }
    rd_both_exact [list DEL $tmp]
}

# DUMP on both (payloads of sorted sets, lists and strings must be equal:
# a set's hashtable order may differ), then each server RESTOREs the
# other's payload.
proc rd_check_dump {key dst mode} {
    set type [rd_plain [rd_both_exact [list TYPE $key]]]
    set cmd [list DUMP $key]
    lassign [rd_both $cmd] rr ro
    if {$type ne "set" && $rr ne $ro} { rd_fail "DUMP payloads differ" $cmd $rr $ro }
    if {$type eq "none"} return
    set pr [rd_plain $rr]
    set po [rd_plain $ro]
    switch $mode {
        corrupt {
            set bad [string range $pr 0 end-[expr {1 + [rd_rnd 3]}]]
            rd_both_exact [list RESTORE $dst 0 $bad REPLACE]
        }
        busy {
            rd_both_exact [list RESTORE $key 0 $pr]
        }
        replace {
            # Logged as the reference's payload to both: the same data (for
            # a sorted set the same bytes), so that a replay has it.
            rd_log both [list RESTORE $dst 0 $pr REPLACE]
            set rr [rd_one ref [list RESTORE $dst 0 $po REPLACE] 0]
            set ro [rd_one ours [list RESTORE $dst 0 $pr REPLACE] 0]
            if {$rr ne $ro} { rd_fail "replies differ" [list RESTORE $dst 0 <payload> REPLACE] $rr $ro }
        }
    }
}

# AOF on both servers (switching it on rewrites), one more rewrite, then the
# data reloaded from the AOF (DEBUG LOADAOF).
#
# Negative zeros are made positive first: a rewrite without the RDB
# preamble lists a big set's members in upstream's hashtable order, 64 to a
# ZADD, and loading it passes the first ones through a listpack, which
# stores -0 as 0. Which members keep their -0 is random upstream (three
# runs of the reference kept 8, 12 and 8 of 20).
proc rd_check_aof {preamble} {
    foreach k [concat {*}[dict values $::rd_keys]] {
        if {[rd_plain [rd_both_exact [list TYPE $k]]] ne "zset"} continue
        foreach {m sc} [rd_flat [rd_both_exact [list ZRANGEBYSCORE $k 0 0 WITHSCORES]]] {
            if {$sc eq "-0"} {
                rd_both_exact [list ZREM $k $m]
                rd_both_exact [list ZADD $k 0 $m]
            }
        }
    }
    # Without the RDB preamble the rewrite writes sorted sets as commands.
    rd_both_exact [list CONFIG SET aof-use-rdb-preamble $preamble]
    rd_both_exact {CONFIG SET appendonly yes}
    rd_wait_aof
    rd_both_exact {BGREWRITEAOF}
    rd_wait_aof
    rd_both_exact {DEBUG LOADAOF}
    rd_check_digest
}
proc rd_wait_aof {} {
    foreach side {ref ours} {
        for {set tries 0} {1} {incr tries} {
            set info [rd_plain [rd_one $side {INFO persistence}]]
            if {[string match "*aof_rewrite_in_progress:0*" $info] && [string match "*aof_rewrite_scheduled:0*" $info]} break
            if {$tries > 3000} { fail "fork-replydiff: the AOF rewrite on the $side server did not finish" }
            after 10
        }
    }
}

proc rd_check_reload {} {
    rd_both_exact {DEBUG RELOAD}
    rd_check_digest
}

proc rd_check_digest {} {
    rd_flush
    rd_both_exact {DBSIZE}
    lassign [rd_both {DEBUG DIGEST}] rr ro
    if {$rr eq $ro} return
    # Name the keys that differ.
    set keys [lsort [rd_plain [rd_one ref {KEYS *}]]]
    set okeys [lsort [rd_plain [rd_one ours {KEYS *}]]]
    set diff {}
    foreach k [lsort -unique [concat $keys $okeys]] {
        lassign [rd_both [list DEBUG DIGEST-VALUE $k]] a b
        if {$a ne $b} { lappend diff [rd_esc $k] }
    }
    rd_fail "DEBUG DIGEST differs" {DEBUG DIGEST} $rr $ro "keys whose DEBUG DIGEST-VALUE differs: $diff"
}

# Every key compared whole: members in order with scores, set members.
proc rd_check_all {} {
    rd_check_digest
    set keys [lsort [rd_plain [rd_one ref {KEYS *}]]]
    set okeys [lsort [rd_plain [rd_one ours {KEYS *}]]]
    if {$keys ne $okeys} {
        rd_fail "KEYS differ" {KEYS *} [list * [lmap k $keys {list $ $k}]] [list * [lmap k $okeys {list $ $k}]]
    }
    foreach k $keys {
        rd_both_exact [list PEXPIRETIME $k]
        switch [rd_plain [rd_both_exact [list TYPE $k]]] {
            zset {
                rd_both_exact [list ZRANGE $k 0 -1 WITHSCORES]
                rd_both_exact [list ZRANGE $k +inf -inf BYSCORE REV LIMIT 0 50 WITHSCORES]
            }
            set {
                set cmd [list SMEMBERS $k]
                lassign [rd_both $cmd] rr ro
                if {[lsort [lindex $rr 1]] ne [lsort [lindex $ro 1]]} { rd_fail "replies differ as multisets" $cmd $rr $ro }
            }
            list { rd_both_exact [list LRANGE $k 0 -1] }
            string { rd_both_exact [list GET $k] }
        }
    }
}

# ---------------------------------------------------------------------------
# A stream.

# Keys SORT's BY and GET read: w_<member> strings (numbers with ties, a few
# that are not numbers), h_<member> hashes with a field f.
proc rd_setup_sort {} {
    set mset [list MSET]
    set members [concat $::rd_pool [lmap i [lsearch -all [lrepeat 601 x] x] {expr {$i - 300}}]]
    foreach m $members {
        if {[rd_chance 60]} {
            lappend mset w_$m [expr {[rd_chance 2] ? "abc" : [rd_pick [list [rd_rnd 20] [expr {[rd_rnd 2001] - 1000}] [rd_rnd 100].5]]}]
        }
        if {[llength $mset] > 400} { rd_exec [list x $mset]; set mset [list MSET] }
        if {[rd_chance 30]} { rd_exec [list x [list HSET h_$m f [rd_rnd 50] g x]] }
    }
    if {[llength $mset] > 1} { rd_exec [list x $mset] }
}

# Big sets for the `big` profile, built by the same Lua on both servers.
set ::rd_lexfill_lua {
    local key, n, batch = KEYS[1], tonumber(ARGV[1]), {}
    for i = 1, n do
        batch[#batch + 1] = 0
        batch[#batch + 1] = string.format('lex:%06d', i) .. (i % 97 == 0 and string.rep('W', 80) or '')
        if #batch == 2000 then redis.call('zadd', key, unpack(batch)); batch = {} end
    end
    if #batch > 0 then redis.call('zadd', key, unpack(batch)) end
    return redis.call('zcard', key)
}
proc rd_setup_big {} {
    rd_exec [list x [list EVAL $::fork_zfill_lua 1 z:0 1 20000 spread 50]]
    rd_exec [list x [list EVAL $::fork_zfill_lua 1 z:1 1 5000 ties 0]]
    rd_exec [list x [list EVAL $::fork_zfill_lua 1 z:2 1 1500 spread 7]]
    rd_exec [list x [list EVAL $::rd_lexfill_lua 1 x:0 8000]]
    set cmd [list SADD s:2]
    for {set i 0} {$i < 3000} {incr i} { lappend cmd e:$i }
    rd_exec [list x $cmd]
    set cmd [list GEOADD g:0]
    for {set i 0} {$i < 600} {incr i} { lappend cmd {*}[rd_lonlat 1] p:$i }
    rd_exec [list x $cmd]
    set pad :[string repeat L 70]
    for {set i 0} {$i < 500} {incr i} {
        set n [expr {1 + [rd_rnd 21000]}]
        lappend ::rd_pool m:$n m:[expr {$n - $n % 50}]$pad m:[expr {$n - $n % 7}]$pad \
            [format lex:%06d [expr {1 + [rd_rnd 8100]}]] e:[rd_rnd 3100]
    }
}

proc rd_run_stream {name seed proto nops profile} {
    set ::rd_stream $name
    set ::rd_seedval $seed
    set ::rd_proto $proto
    set ::rd_big [expr {$profile eq "big"}]
    set ::rd_log {}
    set ::rd_batch {}
    set ::rd_opno 0
    set ::rd_curop {}
    array unset ::rd_stats
    foreach k {x s l same err} { set ::rd_stats($k) 0 }
    rd_seed $seed
    # The base of the ttl stream's absolute times: this hour, so that both
    # servers get the same arguments.
    set ::rd_t0 [expr {[clock milliseconds] / 3600000 * 3600000}]
    set ::rd_pool [rd_make_pool 400]
    set start [clock milliseconds]
    set ::rd_fdr [rd_open [srv -1 host] [srv -1 port] $proto]
    set ::rd_fdo [rd_open [srv 0 host] [srv 0 port] $proto]
    try {
        rd_exec {x {FLUSHALL}}
        foreach {p v} {zset-max-listpack-entries 128 zset-max-listpack-value 64 set-max-intset-entries 512
                       set-max-listpack-entries 128 set-max-listpack-value 64 appendonly no
                       aof-use-rdb-preamble yes} {
            rd_exec [list x [list CONFIG SET $p $v]]
        }
        set table $::rd_table
        switch $profile {
            small {
                foreach {p v} {zset-max-listpack-entries 6 zset-max-listpack-value 12
                               set-max-intset-entries 10 set-max-listpack-entries 6} {
                    rd_exec [list x [list CONFIG SET $p $v]]
                }
            }
            churn {
                set table [string map {"dump 6" "dump 40" "reload 1" "reload 6" "config 3" "config 25"
                                       "zaddbulk 8" "zaddbulk 20" "saddbulk 4" "saddbulk 10" "aof 0" "aof 2"} $table]
            }
            big {
                rd_setup_big
                set table [string map {"zaddbulk 8" "zaddbulk 3" "reload 1" "reload 2"} $table]
            }
            ttl {
                set table [concat [string map {"dump 6" "dump 15" "reload 1" "reload 3" "aof 0" "aof 1"} $table] \
                    {expire 120}]
            }
            strings {
                set table $::rd_strings_table
                foreach {p v} {string-compression yes string-compression-train-values 200} {
                    rd_one ours [list CONFIG SET $p $v]
                }
                rd_exec [list x [list RPUSH l:t 0 1 2 3 4 5 6 7 8 9 10 11 12]]
                for {set i 0} {$i < 200} {incr i} { rd_exec [list x [list SET t:[expr {$i % 12}]:$i [rd_text]]] }
                # Enough long values for a generation to train a zstd dictionary.
                for {set i 0} {$i < 120} {incr i} { rd_exec [list x [list SET t:[expr {$i % 12}]:long:$i [rd_long]]] }
            }
        }
        rd_exec [list x [list SET c:str hello]]
        rd_setup_sort
        for {set i 0} {$i < $nops} {incr i} {
            foreach op [rd_g_[rd_wpick $table]] { rd_exec $op }
            if {$i % 500 == 499} { rd_exec {p rd_check_digest} }
        }
        rd_flush
        set ::rd_curop {}
        rd_check_all
        if {$profile eq "strings"} {
            # The stream must have read and written coded values.
            set info [rd_plain [rd_one ours {INFO memory}] ]
            if {![regexp {string_compression_values:(\d+)} $info -> coded] || $coded == 0} {
                fail "fork-replydiff: the strings stream left no compressed value on our server"
            }
            if {![regexp {string_compression_dictionaries:(\d+)} $info -> dicts] || $dicts == 0} {
                fail "fork-replydiff: the strings stream's tables had no zstd dictionary"
            }
            rd_one ours {CONFIG SET string-compression no}
        }
    } finally {
        catch {close $::rd_fdr}
        catch {close $::rd_fdo}
    }
    set checks [lmap k [lsort [array names ::rd_stats]] {
        if {$k in {x s l same err}} continue
        expr {$::rd_stats($k) ? "[string map {rd_check_ {}} $k] $::rd_stats($k)" : [continue]}
    }]
    puts [format "    %s (seed %d, RESP%d): %d ops; replies compared exactly %d (%d of them errors), as multisets %d, by length %d; checks: %s; %.1f s" \
        $name $seed $proto $::rd_opno $::rd_stats(x) $::rd_stats(err) $::rd_stats(s) $::rd_stats(l) [join $checks {, }] \
        [expr {([clock milliseconds] - $start) / 1000.0}]]
}

# Fixed commands, for differences the streams found: every reply compared,
# all the differing ones reported together.
proc rd_run_fixed {name setup what cmds} {
    set ::rd_stream $name
    set ::rd_seedval 0
    set ::rd_proto 2
    set ::rd_log {}
    set ::rd_batch {}
    set ::rd_opno 0
    set ::rd_curop {}
    set ::rd_fdr [rd_open [srv -1 host] [srv -1 port] 2]
    set ::rd_fdo [rd_open [srv 0 host] [srv 0 port] 2]
    try {
        rd_both_exact {FLUSHALL}
        foreach cmd $setup { rd_both_exact $cmd }
        set diffs {}
        foreach cmd $cmds {
            lassign [rd_both $cmd] rr ro
            if {$rr ne $ro} {
                append diffs "\n  [rd_show_cmd $cmd]\n    reference: [rd_show $rr]\n    ours:      [rd_show $ro]"
            }
        }
        if {$diffs ne {}} {
            fail "fork-replydiff: replies differ from the reference's, on fresh servers after $what:$diffs"
        }
    } finally {
        catch {close $::rd_fdr}
        catch {close $::rd_fdo}
    }
}

# A negative LIMIT offset. Upstream 9.1.2 counts it back from the end of
# the range on a set past its listpack (zslNthInRange, zslNthInLexRange:
# LIMIT -1 -1 is the range's last member) and answers nothing on a listpack
# (which walks forward until the list ends); these ask the former, and the
# latter for contrast.
proc rd_negative_offset_case {} {
    set big [list ZADD big]
    set lex [list ZADD lex]
    for {set i 1} {$i <= 200} {incr i} {
        lappend big $i m$i
        lappend lex 0 [format m%03d $i]
    }
    rd_run_fixed negative-offset [list $big $lex {ZADD small 1 a 2 b 3 c}] \
        "ZADD big 1 m1 2 m2 ... 200 m200, ZADD lex 0 m001 0 m002 ... 0 m200, ZADD small 1 a 2 b 3 c" {
        {ZRANGEBYSCORE big 10 20 LIMIT -1 -1}
        {ZRANGEBYSCORE big 10 20 LIMIT -3 2 WITHSCORES}
        {ZREVRANGEBYSCORE big 20 10 LIMIT -2 -1}
        {ZRANGE big 10 20 BYSCORE LIMIT -1 5}
        {ZRANGE big 20 10 BYSCORE REV LIMIT -11 -1}
        {ZRANGE big 10 20 BYSCORE LIMIT -12 -1}
        {ZRANGEBYLEX lex [m010 [m020 LIMIT -1 2}
        {ZREVRANGEBYLEX lex [m020 [m010 LIMIT -1 2}
        {ZRANGE lex [m010 [m020 BYLEX LIMIT -2 -1}
        {ZRANGESTORE dst big 10 20 BYSCORE LIMIT -2 -1}
        {ZRANGE dst 0 -1 WITHSCORES}
        {ZRANGEBYSCORE small 1 3 LIMIT -1 -1}
        {ZRANGE small [a [c BYLEX LIMIT -1 -1}
    }
}

# name, RESP version, ops, profile.
set ::rd_streams {
    mixed       2 20000 default
    resp3       3 12000 default
    small       2 15000 small
    churn       2 10000 churn
    big         2 8000  big
    ttl         2 8000  ttl
    strings     2 8000  strings
}
set ::rd_scale [expr {[info exists ::env(REPLYDIFF_SCALE)] ? $::env(REPLYDIFF_SCALE) : ($::accurate ? 5 : 1)}]
set ::rd_baseseed [expr {[info exists ::env(REPLYDIFF_SEED)] ? $::env(REPLYDIFF_SEED) : 91200}]

tags {"fork" "replydiff" "external:skip" "needs:debug"} {

fork_server reference {} {
    fork_server fork {} {
        test {Reply diff: the reference and our server are the ones compared} {
            assert_equal $::fork_ref_server [s -1 executable]
            assert_equal [file normalize src/valkey-server] [s executable]
        }

        test {Reply diff: a negative LIMIT offset on a sorted set past its listpack} {
            rd_negative_offset_case
        }

        set i 0
        foreach {name proto nops profile} $::rd_streams {
            set seed [expr {$::rd_baseseed + $i}]
            incr i
            if {[info exists ::env(REPLYDIFF_STREAMS)] && $name ni [split $::env(REPLYDIFF_STREAMS) ", "]} continue
            set nops [expr {int($nops * $::rd_scale)}]
            test "Reply diff: stream $name (seed $seed, RESP$proto, $nops ops)" {
                rd_run_stream $name $seed $proto $nops $profile
            }
        }
    }
}

}
