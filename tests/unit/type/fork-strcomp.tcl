# String values held compressed with a symbol table the server trains from
# its own values (src/strcomp.c, issue #46): no command can tell.
#
# - The cron trains a table once enough values are there, in steps, and
#   its background pass codes them, and again those written meanwhile once
#   they have gone untouched for 5 s.
# - DEBUG STRCOMP TRAIN trains a table now and DEBUG STRCOMP SWEEP runs the
#   background pass to its end; OBJECT ENCODING then says "compressed" and
#   MEMORY USAGE is smaller than the plain value's.
# - Every string command answers as upstream's on compressed values, and a
#   change replaces the value with a plain one: GET, MGET, GETRANGE,
#   STRLEN, APPEND, SETRANGE, GETDEL, GETEX, GETSET, SET GET, SET IFEQ, NX
#   and XX, DELIFEQ, LCS, the bit commands, SORT's GET patterns, scripts,
#   INCR's error.
# - RENAME, MOVE and COPY keep the value compressed and its TTL; EXPIRE's
#   GT, TTL and PERSIST see the key's time.
# - A random differential run against a model, with the pass, DEBUG
#   RELOAD, DUMP/RESTORE and an AOF rewrite in the stream.
# - A second table takes over; the pass recodes the first one's values and
#   the first table is freed. A candidate table (DEBUG STRCOMP TRY, as the
#   cron trains one) takes over only when it codes clearly smaller: not on
#   the same data, yes on records of another kind written over it.
#   Turned off, nothing new is compressed and
#   what is compressed still reads. A pass over values that do not code
#   smaller makes the next one wait for twice the writes.
# - A primary and its replica each code their values; writes to coded
#   values replicate, and both have the same digest.
# - Values of string-compression-zstd-min-size bytes or more are zstd frames
#   coded with their generation's dictionary; every command reads them, and
#   a new generation's dictionary takes over and the old one is freed.
# - With the reference build: an RDB of compressed values loads there with
#   the same digest (files hold plain values).

source tests/helpers/fork-reference.tcl

# Short English texts, varied by a number: they compress.
set ::sc_words {
    "The quick brown fox jumps over the lazy dog while the cat watches"
    "A journey of a thousand miles begins with a single step forward"
    "All that glitters is not gold and not all those who wander are lost"
    "There is no place like home and there is no time like the present"
    "The only thing we have to fear is fear itself said the president"
    "In the middle of every difficulty lies an opportunity for the brave"
    "The best way out is always through the door that you came in by"
    "What we think we become and what we feel we attract to ourselves"
}

proc sc_text {i} {
    set w [lindex $::sc_words [expr {$i % [llength $::sc_words]}]]
    return "$w, number $i of the series."
}

# Fills keys k:0 .. k:n-1 with texts and returns them as a dict.
proc sc_fill {n} {
    set model {}
    for {set i 0} {$i < $n} {incr i} {
        r set k:$i [sc_text $i]
        dict set model k:$i [sc_text $i]
    }
    return $model
}

proc sc_info {field} {
    getInfoProperty [r info memory] string_compression_$field
}

proc sc_check_model {model} {
    dict for {k v} $model {
        assert_equal $v [r get $k]
    }
}

start_server {tags {"fork" "string"} overrides {string-compression yes string-compression-train-values 200}} {
    test {The cron trains a table in steps and its pass codes every value} {
        set model [sc_fill 600]
        wait_for_condition 100 100 {
            [sc_info current_table] >= 0 && [sc_info values] >= 590
        } else {
            fail "no table, or values left plain: [sc_info current_table] [sc_info values]"
        }
        assert_equal compressed [r object encoding k:42]
        sc_check_model $model
        # Writes since the pass started start another, which leaves the
        # values it finds written lately plain and codes them once they have
        # gone untouched for 5 s, writes or not.
        for {set i 0} {$i < 1100} {incr i} { r set n:$i [sc_text $i] }
        set written [clock milliseconds]
        wait_for_condition 100 100 {
            [sc_info passes] >= 2
        } else {
            fail "no second pass"
        }
        if {[clock milliseconds] - $written < 3000} {
            assert_equal embstr [r object encoding n:1099]
        }
        wait_for_condition 150 100 {
            [r object encoding n:1099] eq "compressed"
        } else {
            fail "a later pass did not code the new values"
        }
        assert_morethan_equal [expr {[clock milliseconds] - $written}] 4000
        assert_equal [sc_text 1099] [r get n:1099]
    }
}

start_server {tags {"fork" "string"} overrides {string-compression yes}} {
    test {Values are compressed once a table is trained, and read back} {
        r flushall
        set model [sc_fill 1500]
        assert_equal 0 [r debug strcomp train]
        assert_morethan [r debug strcomp sweep] 1400
        assert_equal compressed [r object encoding k:5]
        assert_morethan [sc_info values] 1400
        assert_morethan [sc_info raw_bytes] [sc_info bytes]
        assert_equal 1 [sc_info tables]
        sc_check_model $model
        assert_equal [string length [sc_text 7]] [r strlen k:7]
    }

    test {MEMORY USAGE counts the coded bytes} {
        r set plain:1 [sc_text 1]
        r config set string-compression no
        r set plain:2 [sc_text 1]
        r config set string-compression yes
        assert_equal compressed [r object encoding k:1]
        assert_equal embstr [r object encoding plain:2]
        assert_lessthan [r memory usage k:1] [r memory usage plain:2]
    }

    test {Read commands on compressed values} {
        set t [sc_text 11]
        assert_equal [string range $t 2 9] [r getrange k:11 2 9]
        assert_equal [string range $t end-4 end] [r getrange k:11 -5 -1]
        assert_equal {} [r getrange k:11 5 2]
        assert_equal [string length $t] [r strlen k:11]
        assert_equal compressed [r object encoding k:11]
        r rpush sc:notastring x
        assert_equal [list [sc_text 12] [sc_text 13] {} {}] [r mget k:12 k:13 nokey sc:notastring]
        r del sc:notastring
        assert_equal $t [r lcs k:11 k:11]
        assert_equal [sc_text 14] [r eval {return redis.call('get', KEYS[1])} 1 k:14]
        r rpush sc:list 15 16
        assert_equal [list [sc_text 15] [sc_text 16]] [r sort sc:list get k:*]
        assert_error {*not an integer*} {r incr k:17}
        set ones [r bitcount k:18]
        assert_morethan $ones 0
        assert_equal [r getbit k:18 1] [expr {([scan [string index [sc_text 18] 0] %c] >> 6) & 1}]
        assert_equal compressed [r object encoding k:18]
    }

    test {Writes on compressed values replace them with plain ones} {
        assert_equal [expr {[string length [sc_text 20]] + 2}] [r append k:20 "!!"]
        assert_equal "[sc_text 20]!!" [r get k:20]
        r setrange k:21 0 XY
        assert_equal "XY[string range [sc_text 21] 2 end]" [r get k:21]
        assert_equal [sc_text 22] [r getdel k:22]
        assert_equal 0 [r exists k:22]
        assert_equal [sc_text 23] [r getset k:23 new]
        assert_equal new [r get k:23]
        assert_equal [sc_text 24] [r set k:24 new2 get]
        r setbit k:25 0 1
        set want [sc_text 25]
        set first [expr {[scan [string index $want 0] %c] | 0x80}]
        assert_equal "[format %c $first][string range $want 1 end]" [r get k:25]
        r bitfield k:26 set u8 0 65
        assert_equal "A[string range [sc_text 26] 1 end]" [r get k:26]
        assert_equal {} [r set k:27 new3 ifeq "not the value"]
        assert_equal OK [r set k:27 new3 ifeq [sc_text 27]]
        assert_equal new3 [r get k:27]
        assert_equal 0 [r delifeq k:28 "not the value"]
        assert_equal 1 [r delifeq k:28 [sc_text 28]]
        assert_equal OK [r set k:29 new4 xx]
        assert_equal {} [r set k:30 new5 nx]
        assert_equal compressed [r object encoding k:30]
    }

    test {GETEX, EXPIRE, TTL and PERSIST see the key's time} {
        assert_equal [sc_text 30] [r getex k:30 ex 100]
        assert_equal compressed [r object encoding k:30]
        assert_equal 100 [r ttl k:30]
        assert_equal 0 [r expire k:30 50 gt]
        assert_equal 1 [r expire k:30 200 gt]
        assert_equal 200 [r ttl k:30]
        assert_equal 1 [r persist k:30]
        assert_equal -1 [r ttl k:30]
        assert_equal compressed [r object encoding k:30]
    }

    test {RENAME, MOVE and COPY keep the value compressed and its TTL} {
        r expire k:31 1000
        r rename k:31 r:31
        assert_equal compressed [r object encoding r:31]
        assert_range [r ttl r:31] 990 1000
        assert_equal [sc_text 31] [r get r:31]
        r copy r:31 c:31
        assert_equal compressed [r object encoding c:31]
        assert_range [r ttl c:31] 990 1000
        assert_equal [sc_text 31] [r get c:31]
        r move c:31 10
        r select 10
        assert_equal compressed [r object encoding c:31]
        assert_range [r ttl c:31] 990 1000
        assert_equal [sc_text 31] [r get c:31]
        r select 9
    }

    test {DEBUG RELOAD, DUMP/RESTORE and an AOF rewrite keep every value} {
        r flushall
        set model [sc_fill 1500]
        r debug strcomp sweep
        set digest [r debug digest]
        r debug reload
        assert_equal $digest [r debug digest]
        assert_equal compressed [r object encoding k:3]
        set payload [r dump k:3]
        r restore k:3:copy 0 $payload
        assert_equal [sc_text 3] [r get k:3:copy]
        r del k:3:copy
        r config set appendonly yes
        waitForBgrewriteaof r
        r debug loadaof
        assert_equal $digest [r debug digest]
        r config set appendonly no
        sc_check_model $model
    }

    test {Random string commands against a model, with the pass, reloads and rewrites in the stream} {
        r flushall
        set model [sc_fill 300]
        r debug strcomp sweep
        for {set op 0} {$op < 4000} {incr op} {
            set k k:[randomInt 320]
            set i [randomInt 1000]
            switch [randomInt 8] {
                0 {
                    r set $k [sc_text $i]
                    dict set model $k [sc_text $i]
                }
                1 {
                    r append $k "+$i"
                    if {[dict exists $model $k]} {
                        dict append model $k "+$i"
                    } else {
                        dict set model $k "+$i"
                    }
                }
                2 {
                    set got [r getdel $k]
                    if {[dict exists $model $k]} {
                        assert_equal [dict get $model $k] $got
                        dict unset model $k
                    } else {
                        assert_equal {} $got
                    }
                }
                3 {
                    set got [r get $k]
                    if {[dict exists $model $k]} {assert_equal [dict get $model $k] $got}
                }
                4 {
                    if {[dict exists $model $k]} {
                        set v [dict get $model $k]
                        assert_equal [string range $v 3 20] [r getrange $k 3 20]
                        assert_equal [string length $v] [r strlen $k]
                    }
                }
                5 {
                    if {[dict exists $model $k]} {
                        set v [dict get $model $k]
                        r setrange $k 5 "#"
                        if {[string length $v] > 5} {
                            dict set model $k "[string range $v 0 4]#[string range $v 6 end]"
                        } else {
                            dict set model $k "$v[string repeat \x00 [expr {5 - [string length $v]}]]#"
                        }
                    }
                }
                6 {
                    if {$op % 50 == 0} { r debug strcomp sweep }
                }
                7 {
                    switch [randomInt 40] {
                        0 { r debug reload }
                        1 {
                            if {[dict exists $model $k]} {
                                set p [r dump $k]
                                r del $k
                                r restore $k 0 $p
                            }
                        }
                        2 {
                            r config set appendonly yes
                            waitForBgrewriteaof r
                            r debug loadaof
                            r config set appendonly no
                        }
                    }
                }
            }
        }
        r debug strcomp sweep
        sc_check_model $model
        assert_equal [dict size $model] [r dbsize]
    }

    test {A second table takes over and the first is freed} {
        r flushall
        set model [sc_fill 1500]
        r debug strcomp sweep
        set first [sc_info current_table]
        assert_equal 1 [sc_info tables]
        set second [r debug strcomp train]
        assert {$second != $first}
        assert_equal 2 [sc_info tables]
        r debug strcomp sweep
        assert_equal 1 [sc_info tables]
        assert_equal $second [sc_info current_table]
        sc_check_model $model
    }

    test {A candidate table takes over only when it codes the data clearly smaller} {
        r flushall
        set model [sc_fill 1500]
        r debug strcomp sweep
        r config set string-compression-train-values 1000
        set tried [sc_info candidates]
        set adopted [sc_info candidates_adopted]
        # The same data: a candidate seldom does 10% better on the samples
        # it was not trained from (tables trained from 800 samples vary:
        # about one try in 20 wins), so most are dropped.
        for {set i 0} {$i < 4} {incr i} { r debug strcomp try }
        assert_equal [expr {$tried + 4}] [sc_info candidates]
        assert_range [sc_info candidates_adopted] $adopted [expr {$adopted + 2}]
        r debug strcomp sweep
        assert_equal 1 [sc_info tables]
        set first [sc_info current_table]
        set adopted [sc_info candidates_adopted]
        # Records of another kind over every key: a candidate trained on
        # them takes over, and the first table goes once its values are
        # recoded.
        for {set i 0} {$i < 1500} {incr i} {
            set v "{\"OrderRef\":\"ORD/2026/[format %07d $i]\",\"Status\":\"[lindex {PLACED PAID SHIPPED} [expr {$i % 3}]]\",\"Qty\":[expr {$i % 9}]}"
            r set k:$i $v
            dict set model k:$i $v
        }
        r debug strcomp sweep
        set second [r debug strcomp try]
        assert {$second != $first}
        assert_equal [expr {$adopted + 1}] [sc_info candidates_adopted]
        r debug strcomp sweep
        assert_equal 1 [sc_info tables]
        assert_equal compressed [r object encoding k:7]
        sc_check_model $model
        # The texts back, with a table of theirs, for the tests below.
        r config set string-compression-train-values 200
        r flushall
        sc_fill 1500
        r debug strcomp train
        r debug strcomp sweep
    }

    test {Turned off, nothing new is compressed and compressed values still read} {
        r config set string-compression no
        r set fresh:1 [sc_text 1]
        r debug strcomp sweep
        assert_equal embstr [r object encoding fresh:1]
        assert_equal compressed [r object encoding k:1]
        assert_equal [sc_text 1] [r get k:1]
        r config set string-compression yes
    }

    test {A pass that codes next to nothing waits ever longer for the next} {
        r flushall
        set rnd {}
        for {set i 0} {$i < 300} {incr i} {
            set v [randstring 100 100 binary]
            r set rnd:$i $v
            dict set rnd rnd:$i $v
        }
        # (the cron's own pass may have run over them too)
        r debug strcomp sweep
        set wait [sc_info pass_wait]
        assert_morethan_equal $wait 2000
        r debug strcomp sweep
        assert_equal [expr {2 * $wait}] [sc_info pass_wait]
        assert_equal 0 [sc_info values]
        sc_check_model $rnd
        # Values that code again start the wait over.
        set model [sc_fill 300]
        r debug strcomp sweep
        assert_equal 1000 [sc_info pass_wait]
        assert_equal 300 [sc_info values]
        sc_check_model $rnd
        sc_check_model $model
    }

    test {FLUSHALL ASYNC frees every compressed value} {
        r flushall async
        wait_for_condition 50 100 {
            [sc_info values] == 0
        } else {
            fail "compressed values left after FLUSHALL ASYNC"
        }
    }
}

# A JSON record of 300 to 900 bytes, varied by a number: values of
# string-compression-zstd-min-size (256) bytes or more are zstd frames.
proc sc_doc {i} {
    set n [llength $::sc_words]
    set about {}
    for {set j 0} {$j < 2 + $i % 7} {incr j} {
        lappend about "\"[lindex $::sc_words [expr {($i + $j * 3) % $n}]]\""
    }
    return "{\"id\":$i,\"user\":\"user-[expr {$i * 7919 % 100003}]\",\"score\":[expr {$i % 97}].5,\"tags\":\[\"t[expr {$i % 13}]\",\"t[expr {$i % 5}]\"\],\"notes\":\[[join $about ,]\]}"
}

start_server {tags {"fork" "string"} overrides {string-compression yes}} {
    test {Long values are coded with a zstd dictionary, short ones with the table} {
        set model {}
        for {set i 0} {$i < 800} {incr i} {
            r set d:$i [sc_doc $i]
            dict set model d:$i [sc_doc $i]
            r set k:$i [sc_text $i]
            dict set model k:$i [sc_text $i]
        }
        r debug strcomp train
        assert_morethan [r debug strcomp sweep] 1500
        assert_equal 1 [sc_info dictionaries]
        assert_equal compressed [r object encoding d:5]
        assert_equal compressed [r object encoding k:5]
        set doc [sc_doc 12]
        assert_morethan [string length $doc] 256
        assert_lessthan [r memory usage d:12] [expr {[string length $doc] / 2}]
        sc_check_model $model
        assert_equal [string length $doc] [r strlen d:12]
        assert_equal [string range $doc 3 40] [r getrange d:12 3 40]
        assert_equal [string range $doc end-9 end] [r getrange d:12 -10 -1]
        assert_equal [list [sc_doc 13] [sc_text 13] [sc_doc 14]] [r mget d:13 k:13 d:14]
        assert_equal [expr {[string length [sc_doc 15]] + 1}] [r append d:15 "!"]
        assert_equal "[sc_doc 15]!" [r get d:15]
        dict set model d:15 "[sc_doc 15]!"
        r setrange d:16 0 "\["
        dict set model d:16 "\[[string range [sc_doc 16] 1 end]"
        assert_equal [dict get $model d:16] [r get d:16]
        assert_equal [sc_doc 17] [r getdel d:17]
        dict unset model d:17
        set digest [r debug digest]
        r debug reload
        assert_equal $digest [r debug digest]
        assert_equal compressed [r object encoding d:20]
        r restore d:20:copy 0 [r dump d:20]
        assert_equal [sc_doc 20] [r get d:20:copy]
        r del d:20:copy
        sc_check_model $model
    }

    test {A new generation brings its own dictionary; the old one is freed with its values} {
        set first [sc_info current_table]
        set second [r debug strcomp train]
        assert {$second != $first}
        assert_equal 2 [sc_info dictionaries]
        r debug strcomp sweep
        assert_equal 1 [sc_info dictionaries]
        assert_equal [sc_doc 30] [r get d:30]
    }

    test {With string-compression-zstd-min-size 0, long values use the table} {
        r config set string-compression-zstd-min-size 0
        r debug strcomp train
        r debug strcomp sweep
        assert_equal 0 [sc_info dictionaries]
        assert_equal compressed [r object encoding d:31]
        assert_equal [sc_doc 31] [r get d:31]
        r config set string-compression-zstd-min-size 256
    }
}

start_server {tags {"fork" "string" "repl"} overrides {string-compression yes}} {
    start_server {overrides {string-compression yes}} {
        test {A primary and its replica each code their values and agree on every digest} {
            set primary [srv -1 client]
            set replica [srv 0 client]
            $replica replicaof [srv -1 host] [srv -1 port]
            wait_for_sync $replica
            for {set i 0} {$i < 1200} {incr i} { $primary set k:$i [sc_text $i] }
            $primary debug strcomp train
            $primary debug strcomp sweep
            wait_for_ofs_sync $primary $replica
            $replica debug strcomp train
            $replica debug strcomp sweep
            assert_equal compressed [$primary object encoding k:3]
            assert_equal compressed [$replica object encoding k:3]
            $primary append k:3 "+more"
            $primary setrange k:4 0 "##"
            $primary getex k:5 ex 1000
            wait_for_ofs_sync $primary $replica
            assert_equal [$primary debug digest] [$replica debug digest]
            assert_equal "[sc_text 3]+more" [$replica get k:3]
            assert_range [$replica ttl k:5] 990 1000
        }
    }
}

if {[fork_reference_present {"fork" "string" "compat"}]} {
    start_server {tags {"fork" "string" "compat"} overrides {string-compression yes}} {
        test {An RDB of compressed values loads in the reference with the same digest} {
            r flushall
            sc_fill 1500
            r debug strcomp train
            r debug strcomp sweep
            assert_equal compressed [r object encoding k:9]
            set digest [r debug digest]
            r save
            set src [file join [lindex [r config get dir] 1] [lindex [r config get dbfilename] 1]]
            set dir [tmpdir strcomp-rdb]
            file copy -force $src [file join $dir dump.rdb]
            fork_server reference [list overrides [list dir $dir]] {
                assert_equal $digest [r debug digest]
                assert_equal [sc_text 9] [r get k:9]
            }
        }
    }
}
