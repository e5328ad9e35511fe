# Atomic slot migration (Valkey 9's CLUSTER MIGRATESLOTS) of a slot holding
# big sorted sets, while writes to them continue. The source node streams
# the slot's keys to the target as AOF rewrite writes them (ZADD commands
# of 64 members, built from our B+ tree by rewriteSortedSetObject), then
# the writes made meanwhile, then pauses its writers and hands the slot
# over. Nothing acknowledged may be lost on the way, and the target must
# end up holding exactly the sets the source held plus those writes.
#
# start_cluster makes two primaries with a replica each. One slot (hash
# tag {mig}) gets, on its owner: a sorted set of $::fm_big members (1M;
# twenty of them longer than 64 bytes), one of 5,000, a listpack one of
# 100, a small one whose members are all longer than 64 bytes, and a GEO
# set of 1,000 places, all filled by Lua on the server. The slot then
# moves to the other primary with CLUSTER MIGRATESLOTS while the test
# keeps writing to the sets one command at a time (ZADD of new and of
# existing members, ZINCRBY, ZREM), following MOVED to the new owner; once
# both ends report the job done it writes a little more on the target.
# The writer keeps a model of every member it touched: each reply must
# agree with it (ZINCRBY's new score, ZADD's and ZREM's counts), and at
# the end every touched member on the target must hold the model's score,
# every set the model's ZCARD, every key the DEBUG DIGEST-VALUE of the
# same data rebuilt on a standalone scratch server (the Lua fill, then the
# model's final values), and the target's replica the target's digests;
# the source and its replica must hold no key of the slot any more. Then
# the slot moves back the same way and all of it is checked again.
#
# A write counts as acknowledged when its reply is not an error. A write
# whose connection broke (not expected here) may or may not have run: the
# member may then hold either value, and the writer only ZADDs it after.
#
# The big set's size is the issue's, 1M (FORK_MIGRATESLOTS_BIG changes
# it); the file takes about 20 seconds alone on two cores (each way the
# migration itself takes one to three seconds), 40 beside other tests.
#
# Run alone: ./runtest --single integration/fork-migrateslots

set ::fm_big [expr {[info exists ::env(FORK_MIGRATESLOTS_BIG)] ? $::env(FORK_MIGRATESLOTS_BIG) : 1000000}]

# --- The data ---

source tests/helpers/fork-zfill.tcl

# GEOADDs places place:<first> .. place:<last> to KEYS[1].
set ::fm_geo_lua {
    local key, first, last = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])
    local batch = {}
    for i = first, last do
        batch[#batch + 1] = (i * 7.3) % 359 - 179.5
        batch[#batch + 1] = (i * 3.1) % 169 - 84.5
        batch[#batch + 1] = 'place:' .. i
        if #batch >= 1500 then
            redis.call('geoadd', key, unpack(batch))
            batch = {}
        end
    end
    if #batch > 0 then redis.call('geoadd', key, unpack(batch)) end
    return redis.call('zcard', key)
}

# The sorted sets the writer writes to: key -> members, scores, every how
# many members one is long (0: none), size of the writer's pool of new
# members, and every how many of those one is long. "{mig}:long" keeps
# only long members whatever the writer removes, so that it is rebuilt as
# a tree on the target too. The GEO set stays as filled.
set ::fm_specs [dict create \
    "{mig}:big"    [list $::fm_big ties [expr {max(1, $::fm_big / 20)}] 2000 5] \
    "{mig}:medium" [list 5000 spread 250 2000 5] \
    "{mig}:lp"     [list 100 spread 0 20 0] \
    "{mig}:long"   [list 20 spread 1 30 1]]
set ::fm_geo "{mig}:geo"
set ::fm_geo_size 1000
set ::fm_keys [concat [dict keys $::fm_specs] [list $::fm_geo]]
# The writer picks a key from this list: four in ten writes go to the big set.
set ::fmw_keys [list "{mig}:big" "{mig}:big" "{mig}:big" "{mig}:big" "{mig}:medium" \
                    "{mig}:medium" "{mig}:medium" "{mig}:lp" "{mig}:lp" "{mig}:long"]
set ::fm_encodings [dict create "{mig}:big" btree "{mig}:medium" btree "{mig}:lp" listpack \
                        "{mig}:long" btree "{mig}:geo" btree]

# Fills every key through `link` (a plain client), big sets in EVALs of
# 50,000 members: one call stays short of what cluster-node-timeout and
# busy-reply would notice.
proc fm_fill {link} {
    dict for {key spec} $::fm_specs {
        lassign $spec n kind long
        for {set first 1} {$first <= $n} {incr first 50000} {
            set last [expr {min($n, $first + 49999)}]
            set card [$link eval $::fork_zfill_lua 1 $key $first $last $kind $long]
        }
        assert_equal $n $card
    }
    assert_equal $::fm_geo_size [$link eval $::fm_geo_lua 1 $::fm_geo 1 $::fm_geo_size]
}

set ::fm_pad ":[string repeat L 70]"

# The name of generated member i of `key`, and its score as filled.
proc fm_gen_member {key i} {
    set long [lindex [dict get $::fm_specs $key] 2]
    if {$long > 0 && $i % $long == 0} { return "m:$i$::fm_pad" }
    return "m:$i"
}

proc fm_gen_score {key i} {
    if {[lindex [dict get $::fm_specs $key] 1] eq "ties"} { return [expr {double($i % 50000)}] }
    return [expr {($i * 7919 % 1000003) / 8.0 - 60000}]
}

# Member j of the writer's pool for `key` (not there before the writer).
proc fm_pool_member {key j} {
    set long [lindex [dict get $::fm_specs $key] 4]
    if {$long > 0 && $j % $long == 0} { return "w:$j$::fm_pad" }
    return "w:$j"
}

# Key -> DEBUG DIGEST-VALUE for every key of the slot, through `link`.
proc fm_digests {link} {
    set out [dict create]
    foreach k $::fm_keys d [$link debug digest-value {*}$::fm_keys] { dict set out $k $d }
    return $out
}

# --- The cluster ---
#
# The scratch server runs in a start_server nested in start_cluster, so R
# and srv would count it among the nodes (and upstream's cluster helpers
# would ask it about the cluster): the nodes are reached through links
# and ports taken before it starts.

proc fm_take_nodes {} {
    set ::fm_links {}
    set ::fm_ports {}
    for {set i 0} {$i < [llength $::servers]} {incr i} {
        lappend ::fm_links [Rn $i]
        lappend ::fm_ports [srv -$i port]
    }
}

proc N {idx args} { [lindex $::fm_links $idx] {*}$args }

# The port of the primary that node `idx` believes owns `slot`.
proc fm_owner_seen_by {idx slot} {
    foreach range [N $idx cluster slots] {
        lassign $range from to primary
        if {$slot >= $from && $slot <= $to} { return [lindex $primary 1] }
    }
    return {}
}

# The index of the replica of primary `idx`.
proc fm_replica_of {idx} {
    set port [lindex $::fm_ports $idx]
    for {set j 0} {$j < [llength $::fm_links]} {incr j} {
        set role [N $j role]
        if {[lindex $role 0] eq "slave" && [lindex $role 2] == $port} { return $j }
    }
    fail "no replica of node $idx"
}

# All nodes see the same slots, and the cluster up.
proc fm_nodes_agree {} {
    set slots [N 0 cluster slots]
    for {set j 0} {$j < [llength $::fm_links]} {incr j} {
        if {[N $j cluster slots] ne $slots} { return 0 }
        if {![string match *cluster_state:ok* [N $j cluster info]]} { return 0 }
    }
    return 1
}

proc fm_wait_agree {} {
    wait_for_condition 600 50 {[fm_nodes_agree]} else {
        fail "the nodes do not agree on the slots: [lmap l $::fm_links {$l cluster slots}]"
    }
}

# The migration log entry named `name` on node `idx`, or {}.
proc fm_job {idx name} {
    foreach m [N $idx cluster getslotmigrations] {
        if {[dict get $m name] eq $name} { return $m }
    }
    return {}
}

proc fm_job_state {idx name} {
    set m [fm_job $idx $name]
    if {$m eq {}} { return {} }
    return [dict get $m state]
}

# --- The writer ---
#
# One command at a time to the node it believes owns the slot, following
# MOVED. ::fm_st($key,$member) lists the values the member may hold ("-"
# for absent): one value when the writer knows it, more after a write
# whose outcome is unknown. ::fm_init($key,$member) is what it held before
# the writer, ::fm_touched($key) lists the members touched.

proc fmw_init {port} {
    array unset ::fm_st
    array unset ::fm_init
    array unset ::fm_touched
    array unset ::fm_acks
    foreach key [dict keys $::fm_specs] { set ::fm_touched($key) {} }
    set ::fmw_port $port
    set ::fmw_links [dict create]
    set ::fmw_phase before
    set ::fm_mismatch {}
    set ::fm_errors {}
    array set ::fmw_count {sent 0 acked 0 uncertain 0 moved 0 retried 0 refused 0 maxlat 0}
}

proc fmw_link {port} {
    if {![dict exists $::fmw_links $port]} {
        dict set ::fmw_links $port [valkey_client_by_addr 127.0.0.1 $port]
    }
    dict get $::fmw_links $port
}

proc fmw_close {} {
    dict for {port link} $::fmw_links { catch {$link close} }
    set ::fmw_links [dict create]
}

# Sends `cmd`; returns {ok reply port}, {uncertain error} or {refused error}.
proc fmw_send {cmd} {
    for {set try 0} {$try < 500} {incr try} {
        set port $::fmw_port
        if {![catch {[fmw_link $port] {*}$cmd} reply]} { return [list ok $reply $port] }
        if {[string match {MOVED *} $reply] || [string match {ASK *} $reply]} {
            # ASK does not come with atomic slot migration; should it come,
            # the command is sent again as a MOVED would have it.
            incr ::fmw_count(moved)
            set ::fmw_port [lindex [split [lindex $reply 2] :] end]
            # The two nodes may disagree for a moment on the owner.
            if {$try > 1} { after 5 }
            continue
        }
        if {[string match {TRYAGAIN*} $reply] || [string match {CLUSTERDOWN*} $reply]} {
            incr ::fmw_count(retried)
            after 5
            continue
        }
        if {[string match {*I/O error*} $reply] || [string match {*connection*} $reply] ||
            [string match {*couldn't open*} $reply] || [string match {*broken pipe*} $reply]} {
            catch {[dict get $::fmw_links $port] close}
            dict unset ::fmw_links $port
            return [list uncertain $reply]
        }
        return [list refused $reply]
    }
    return [list refused "still redirected after 500 tries: $reply"]
}

proc fmw_touch {key member init} {
    if {![info exists ::fm_st($key,$member)]} {
        set ::fm_init($key,$member) $init
        set ::fm_st($key,$member) [list $init]
        lappend ::fm_touched($key) $member
    }
}

proc fmw_op {} {
    set key [lindex $::fmw_keys [randomInt [llength $::fmw_keys]]]
    lassign [dict get $::fm_specs $key] n kind long pool
    # A member: one of the writer's pool (absent at first) or a filled one.
    if {[randomInt 2]} {
        set member [fm_pool_member $key [randomInt $pool]]
        fmw_touch $key $member -
    } else {
        set i [expr {1 + [randomInt $n]}]
        set member [fm_gen_member $key $i]
        fmw_touch $key $member [fm_gen_score $key $i]
    }
    set known [expr {[llength $::fm_st($key,$member)] == 1}]
    set old [lindex $::fm_st($key,$member) 0]
    set r [randomInt 100]
    if {$r < 45 || !$known} {
        set op zadd
        set new [expr {[randomInt 800000] / 8.0 - 50000}]
        set cmd [list zadd $key $new $member]
    } elseif {$r < 80} {
        set op zincrby
        set by [expr {[randomInt 4000] / 4.0 - 500}]
        set new [expr {($old eq "-" ? 0.0 : $old) + $by}]
        set cmd [list zincrby $key $by $member]
    } else {
        set op zrem
        set new -
        set cmd [list zrem $key $member]
    }
    incr ::fmw_count(sent)
    set t0 [clock microseconds]
    lassign [fmw_send $cmd] outcome reply port
    set lat [expr {[clock microseconds] - $t0}]
    if {$lat > $::fmw_count(maxlat)} { set ::fmw_count(maxlat) $lat }
    switch $outcome {
        ok {
            incr ::fmw_count(acked)
            # By the export job's state last seen on the source (sampled
            # every 50 ms) for the source's acknowledgements.
            if {$port == $::fm_from} {
                incr ::fm_acks($::fmw_phase/source)
            } elseif {$port == $::fm_to} {
                incr ::fm_acks([expr {$::fmw_phase eq "after" ? "after" : "during"}]/target)
            } else {
                incr ::fm_acks(other:$port)
            }
            # The reply must agree with what the member held.
            switch $op {
                zadd { set want [expr {$known && $old ne "-" ? 0 : 1}] }
                zrem { set want [expr {$old ne "-" ? 1 : 0}] }
                zincrby { set want $new }
            }
            if {$known && $reply != $want} {
                lappend ::fm_mismatch "$cmd replied $reply on port $port (source $::fm_from) during $::fmw_phase; the member held $old, so $want was due"
                if {$op eq "zincrby"} { set new $reply }
            }
            set ::fm_st($key,$member) [list $new]
        }
        uncertain {
            incr ::fmw_count(uncertain)
            if {[lsearch -exact $::fm_st($key,$member) $new] < 0} { lappend ::fm_st($key,$member) $new }
        }
        refused {
            incr ::fmw_count(refused)
            lappend ::fm_errors "$cmd: $reply"
        }
    }
}

# --- The migration and the checks ---

# Moves the slot from primary `from` to primary `to` with CLUSTER
# MIGRATESLOTS, writing all along; returns a summary.
proc fm_migrate {from to} {
    set slot $::fm_slot
    set ::fm_from [lindex $::fm_ports $from]
    set ::fm_to [lindex $::fm_ports $to]
    array unset ::fm_acks
    set moved $::fmw_count(moved)
    set ::fmw_phase before
    for {set i 0} {$i < 200} {incr i} { fmw_op }
    assert_equal $::fm_from $::fmw_port
    set ::fmw_count(maxlat) 0
    set start [clock milliseconds]
    assert_equal OK [N $from cluster migrateslots slotsrange $slot $slot node [N $to cluster myid]]
    set job {}
    foreach m [N $from cluster getslotmigrations] {
        if {[dict get $m operation] eq "EXPORT" && [dict get $m slot_ranges] eq "$slot-$slot" &&
            [lsearch -exact $::fm_jobs [dict get $m name]] < 0} { set job [dict get $m name] }
    }
    assert {$job ne {}}
    lappend ::fm_jobs $job

    set states {}
    set next 0
    while 1 {
        set now [clock milliseconds]
        if {$now >= $next} {
            set export [fm_job_state $from $job]
            set import [fm_job_state $to $job]
            set ::fmw_phase $export
            if {$export ne [lindex $states end-1]} { lappend states $export [expr {$now - $start}] }
            if {$export in {failed cancelled} || $import in {failed cancelled}} {
                fail "migration $job failed: source [fm_job $from $job]; target [fm_job $to $job]"
            }
            if {$export eq "success" && $import eq "success" &&
                [fm_owner_seen_by $to $slot] == $::fm_to && [fm_owner_seen_by $from $slot] == $::fm_to} break
            if {$now - $start > 300000} {
                fail "migration $job not done after 300 s: source [fm_job $from $job]; target [fm_job $to $job]"
            }
            set next [expr {$now + 50}]
        }
        fmw_op
    }
    set took [expr {[clock milliseconds] - $start}]
    set ::fmw_phase after
    for {set i 0} {$i < 300} {incr i} { fmw_op }
    assert_equal $::fm_to $::fmw_port
    fm_wait_agree

    # Writes the source acknowledged while the job ran, and the target's.
    set during 0
    foreach {k v} [array get ::fm_acks] {
        if {([string match */source $k] && $k ne "before/source") || $k eq "during/target"} { incr during $v }
    }
    assert {$during > 0}
    assert {[info exists ::fm_acks(after/target)]}
    set phases {}
    foreach k [lsort [array names ::fm_acks]] { lappend phases "$k $::fm_acks($k)" }
    return "took $took ms (source states, ms from the start: $states); acknowledged writes by phase and node: [join $phases {, }]; longest write [expr {$::fmw_count(maxlat) / 1000}] ms; MOVED [expr {$::fmw_count(moved) - $moved}]"
}

# Checks that primary `owner` (and its replica) hold the slot's keys as
# the model has them, and that primary `other` (and its replica) hold none.
proc fm_verify {owner other scratch} {
    set slot $::fm_slot
    fmw_close
    if {[llength $::fm_mismatch]} {
        fail "[llength $::fm_mismatch] replies disagreed with the writes acknowledged before them, first: [join [lrange $::fm_mismatch 0 9] "\n"]"
    }
    if {[llength $::fm_errors]} {
        fail "[llength $::fm_errors] writes refused, first: [join [lrange $::fm_errors 0 9] "\n"]"
    }
    set nkeys [llength $::fm_keys]
    set orep [fm_replica_of $owner]
    set xrep [fm_replica_of $other]

    # The old owner and its replica drop the slot's keys.
    foreach idx [list $other $xrep] {
        wait_for_condition 100 100 {
            [N $idx cluster countkeysinslot $slot] == 0 && [N $idx dbsize] == 0
        } else {
            fail "node $idx still holds [N $idx cluster countkeysinslot $slot] keys of slot $slot"
        }
    }
    assert_equal $nkeys [N $owner cluster countkeysinslot $slot]
    assert_equal $nkeys [N $owner dbsize]
    dict for {key enc} $::fm_encodings {
        assert_equal $enc [N $owner object encoding $key]
    }

    # Every member the writer touched holds what it wrote; each set has
    # the number of members that makes.
    set checked 0
    set resolved [dict create]
    foreach key [dict keys $::fm_specs] {
        set card [lindex [dict get $::fm_specs $key] 0]
        set members $::fm_touched($key)
        for {set i 0} {$i < [llength $members]} {incr i 1000} {
            set batch [lrange $members $i [expr {$i + 999}]]
            foreach m $batch s [N $owner zmscore $key {*}$batch] {
                set have [expr {$s eq "" ? "-" : $s}]
                set ok 0
                foreach v $::fm_st($key,$m) {
                    if {$v eq $have || ($v ne "-" && $have ne "-" && $v == $have)} { set ok 1 }
                }
                if {!$ok} {
                    fail "$key $m holds '$have' on node $owner; the acknowledged writes left $::fm_st($key,$m) (before them: $::fm_init($key,$m))"
                }
                set ::fm_st($key,$m) [list $have]
                dict set resolved $key $m $have
                incr card [expr {($have ne "-") - ($::fm_init($key,$m) ne "-")}]
                incr checked
            }
        }
        assert_equal $card [N $owner zcard $key]
    }

    # The same data on the scratch server: the fill, then the touched
    # members' values. Its digests must be the owner's.
    dict for {key members} $resolved {
        set add {}
        set rem {}
        dict for {m s} $members {
            if {$s eq "-"} { lappend rem $m } else { lappend add $s $m }
        }
        for {set i 0} {$i < [llength $add]} {incr i 2000} {
            $scratch zadd $key {*}[lrange $add $i [expr {$i + 1999}]]
        }
        if {[llength $rem]} { $scratch zrem $key {*}$rem }
    }
    set want [fm_digests $scratch]
    set have [fm_digests [lindex $::fm_links $owner]]
    dict for {k d} $want {
        if {[dict get $have $k] ne $d} { fail "$k: digest [dict get $have $k] on node $owner, the scratch rebuild's $d" }
    }
    assert_equal [dict get $::fm_digests_before $::fm_geo] [dict get $have $::fm_geo]

    # The owner's replica holds the same.
    assert {[N $owner wait 1 60000] >= 1}
    wait_for_condition 100 100 {
        [fm_digests [lindex $::fm_links $orep]] eq $have
    } else {
        fail "replica $orep of node $owner: digests [fm_digests [lindex $::fm_links $orep]], its primary's $have"
    }
    assert_equal $nkeys [N $orep cluster countkeysinslot $slot]
    return "checked $checked touched members one by one and $nkeys keys by digest"
}

start_cluster 2 2 {tags {"fork" "cluster" "external:skip" "logreqres:skip"}
                   overrides {cluster-node-timeout 15000 cluster-allow-replica-migration no}} {
    fm_take_nodes
    set ::fm_slot [N 0 cluster keyslot "{mig}"]
    set ::fm_jobs {}
    set src -1
    for {set i 0} {$i < 2} {incr i} {
        if {[fm_owner_seen_by $i $::fm_slot] == [lindex $::fm_ports $i]} { set src $i }
    }
    assert {$src >= 0}
    set dst [expr {1 - $src}]

    # A standalone server: the data rebuilt as it should be.
    start_server {} {
        set scratch [srv 0 client]

        test "fork migrateslots: sorted sets in slot $::fm_slot, the biggest of $::fm_big members" {
            set start [clock milliseconds]
            fm_fill [lindex $::fm_links $src]
            set filled [expr {[clock milliseconds] - $start}]
            dict for {key enc} $::fm_encodings {
                assert_equal $enc [N $src object encoding $key]
            }
            assert {[N $src wait 1 60000] >= 1}
            set ::fm_digests_before [fm_digests [lindex $::fm_links $src]]
            wait_for_condition 100 100 {
                [fm_digests [lindex $::fm_links [fm_replica_of $src]]] eq $::fm_digests_before
            } else {
                fail "the replica of node $src does not hold its primary's data"
            }
            # The fill gives the same data on the scratch server.
            $scratch flushall
            fm_fill $scratch
            assert_equal $::fm_digests_before [fm_digests $scratch]
            puts "    filled the slot in $filled ms"
        }

        fmw_init [lindex $::fm_ports $src]

        test "fork migrateslots: CLUSTER MIGRATESLOTS to the other primary while writing" {
            puts "    node $src -> node $dst: [fm_migrate $src $dst]"
        }

        test "fork migrateslots: nothing lost on the target; digests equal the scratch rebuild's and the replica's" {
            puts "    [fm_verify $dst $src $scratch]"
        }

        test "fork migrateslots: CLUSTER MIGRATESLOTS back while writing" {
            puts "    node $dst -> node $src: [fm_migrate $dst $src]"
        }

        test "fork migrateslots: nothing lost back on the first node; digests equal the scratch rebuild's and the replica's" {
            puts "    [fm_verify $src $dst $scratch]"
            array set count [array get ::fmw_count]
            puts "    writer: sent $count(sent), acknowledged $count(acked), unknown outcome $count(uncertain), refused $count(refused), retried $count(retried)"
        }
        fmw_close
    }
}
