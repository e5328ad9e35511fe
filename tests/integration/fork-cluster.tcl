# The fork as a member of a Valkey Cluster holding big sorted sets, and
# mixed with unpatched upstream nodes (issue 6). Users move to the fork by
# adding its nodes to a running cluster and back by removing them, so slots
# must migrate between our nodes and upstream's in both directions, and a
# failover or a crash must not lose a write the cluster acknowledged.
#
# Each scenario starts six nodes (three primaries, a replica each) and makes
# them a cluster with `valkey-cli --cluster create`, as users do. It loads a
# sorted set into every one of the 16384 slots (one in sixteen past the
# 128-member listpack limit, a few with members too long for a listpack, and
# one with $::fc_big members), then, while a writer keeps adding and removing
# members: moves a third of the slots with `valkey-cli --cluster reshard`
# (MIGRATE, pipelined, carries the big set), runs `--cluster rebalance`,
# SIGKILLs a primary, waits for its replica to take over and restarts the old
# primary, which must rejoin as a replica. At the end every key's DEBUG
# DIGEST-VALUE must equal the digest of the same key built on a standalone
# scratch server from the generator plus the writer's record, every member
# the writer touched must hold what its last acknowledged write left, and
# every replica must hold its primary's dataset.
#
# A write counts as acknowledged when the primary replied and WAIT saw it on
# the replica: Valkey Cluster replicates asynchronously, so a write only the
# primary had is lost at its failover in upstream too. A write without that
# acknowledgement (an error, a lost connection, WAIT timing out) may or may
# not be there; the writer then accepts either value.
#
# Sizes are the issue's and fit CI's budget: the biggest set has $::fc_big
# members, 1M (FORK_CLUSTER_BIG changes it); the file takes about three and
# a half minutes alone on two cores, four and a half beside another test.
#
# Run alone: ./runtest --single integration/fork-cluster --tags cluster-faults

set ::fc_big [expr {[info exists ::env(FORK_CLUSTER_BIG)] ? $::env(FORK_CLUSTER_BIG) : 1000000}]
set ::fc_cli src/valkey-cli
set ::fc_reference [file normalize ../../build/upstream/src/valkey-server]

# --- Data: one key per slot, made on the server by Lua ---

# Finds, for every slot, a key name "k:<n>" hashing to it (CRC16 as the
# cluster computes it) and returns the 16384 names, slot order.
set ::fc_names_lua {
    local t = {}
    for i = 0, 255 do
        local c = bit.lshift(i, 8)
        for _ = 1, 8 do
            if bit.band(c, 0x8000) ~= 0 then
                c = bit.band(bit.bxor(bit.lshift(c, 1), 0x1021), 0xffff)
            else
                c = bit.band(bit.lshift(c, 1), 0xffff)
            end
        end
        t[i] = c
    end
    local names, left, n = {}, 16384, 0
    while left > 0 do
        local s = 'k:' .. n
        local c = 0
        for i = 1, #s do
            c = bit.bxor(bit.band(bit.lshift(c, 8), 0xffff), t[bit.bxor(bit.rshift(c, 8), string.byte(s, i))])
        end
        local slot = bit.band(c, 16383) + 1
        if names[slot] == nil then
            names[slot] = s
            left = left - 1
        end
        n = n + 1
    end
    return names
}

# Fills KEYS[1] with ARGV[1] members; ARGV[2] = 1 makes each member longer
# than zset-max-listpack-value.
set ::fc_gen_lua {
    local key, n, pad = KEYS[1], tonumber(ARGV[1]), ''
    if ARGV[2] == '1' then pad = string.rep('p', 80) end
    local batch = {}
    for i = 1, n do
        batch[#batch + 1] = ((i * 7919) % 100003) / 8
        batch[#batch + 1] = 'm' .. i .. pad
        if #batch >= 2000 or i == n then
            redis.call('zadd', key, unpack(batch))
            batch = {}
        end
    end
    return redis.call('zcard', key)
}

# Slots holding the big set and the second-biggest: slot 100 moves with the
# reshard and again with the rebalance, slot 11000 moves with the reshard the
# other way.
set ::fc_big_slots [list 100 [expr {$::fc_big}] 11000 [expr {$::fc_big / 5}]]

# Members and the "long members" flag of the set in a slot.
proc fc_size {slot} {
    if {[dict exists $::fc_big_slots $slot]} { return [list [dict get $::fc_big_slots $slot] 0] }
    if {$slot % 16 == 0} { return {200 0} }
    if {$slot % 97 == 5} { return {20 1} }
    return {6 0}
}

# Loads the generated set of each slot in `slots` through `link` (pipelined).
proc fc_load {link sha slots} {
    set n 0
    foreach slot $slots {
        lassign [fc_size $slot] members long
        $link evalsha $sha 1 [lindex $::fc_names $slot] $members $long
        incr n
    }
    set total 0
    for {set i 0} {$i < $n} {incr i} { incr total [$link read] }
    return $total
}

# --- The cluster's shape ---

# Starts `n` nodes, node `ref` (if >= 0) running the reference build, and
# runs `code` with ::fc_nodes listing their ports in start order.
proc fc_start_nodes {n ref code} {
    set overrides {cluster-enabled yes cluster-node-timeout 5000 appendonly no}
    set code [list fc_with_nodes $code]
    for {set i [expr {$n - 1}]} {$i >= 0} {incr i -1} {
        set opts [list overrides $overrides]
        if {$i == $ref} { lappend opts start-other-server 1 }
        set code [list start_server $opts $code]
    }
    uplevel 1 $code
}

proc fc_with_nodes {code} {
    set ::fc_nodes {}
    set n [llength $::fc_nodes_wanted]
    for {set i 0} {$i < $n} {incr i} {
        lappend ::fc_nodes [srv [expr {$i - $n + 1}] port]
    }
    uplevel 1 $code
}

# A fresh connection to a node (the caller closes it).
proc fc_link {port {defer 0}} { valkey 127.0.0.1 $port $defer 0 }

proc fc_call {port args} {
    set r [fc_link $port]
    catch {$r {*}$args} out opts
    $r close
    return -options $opts $out
}

# Node id, role and primary id of a port, from that node's CLUSTER NODES.
proc fc_myself {port} {
    foreach line [split [fc_call $port cluster nodes] "\n"] {
        set f [split [string trim $line] " "]
        if {[string match *myself* [lindex $f 2]]} {
            set role [expr {[string match *master* [lindex $f 2]] ? "primary" : "replica"}]
            return [list [lindex $f 0] $role [lindex $f 3]]
        }
    }
}

# The ports of the live nodes and, for each slot, the port of its primary.
proc fc_slot_map {} {
    foreach port $::fc_live {
        if {[catch {fc_call $port cluster slots} slots]} continue
        set map [lrepeat 16384 {}]
        foreach range $slots {
            lassign $range from to primary
            set p [lindex $primary 1]
            for {set s $from} {$s <= $to} {incr s} { lset map $s $p }
        }
        return $map
    }
    error "no node answers CLUSTER SLOTS"
}

# Settled: valkey-cli sees every slot covered and the nodes agree, and every
# node has declared the cluster up (it does so a little later than that).
proc fc_check_ok {} {
    catch {exec $::fc_cli --cluster check 127.0.0.1:[lindex $::fc_live 0]} out
    expr {[string match {*All 16384 slots covered*} $out] && ![string match {*ERR*} $out] &&
          ![string match {*WARNING*} $out] && [fc_all_ok $::fc_live]}
}

proc fc_primary_of_slot {slot} { lindex [fc_slot_map] $slot }

# --- The writer ---
#
# Keeps ZADD/ZREM on a fixed list of keys through its own slot map,
# following MOVED and ASK. ::fc_rec($key,$member) lists the values the
# member may hold ("-" for absent): one after an acknowledged write, more
# after an unacknowledged one.

proc fcw_init {keys} {
    array unset ::fc_rec
    set ::fcw_keys $keys
    set ::fcw_map [fc_slot_map]
    set ::fcw_links [dict create]
    array set ::fcw_count {sent 0 acked 0 uncertain 0 refused 0}
    foreach key $keys {
        for {set m 0} {$m < 300} {incr m} { set ::fc_rec($key,w$m) - }
    }
}

proc fcw_conn {port} {
    if {![dict exists $::fcw_links $port]} {
        dict set ::fcw_links $port [fc_link $port]
    }
    dict get $::fcw_links $port
}

proc fcw_drop {port} {
    if {[dict exists $::fcw_links $port]} {
        catch {[dict get $::fcw_links $port] close}
        dict unset ::fcw_links $port
    }
}

proc fcw_close {} {
    foreach port [dict keys $::fcw_links] { fcw_drop $port }
}

proc fcw_op {} {
    set key [lindex $::fcw_keys [randomInt [llength $::fcw_keys]]]
    set member w[randomInt 300]
    if {[randomInt 10] < 7} {
        set value [expr {[randomInt 4000000] / 4.0}]
        set cmd [list zadd $key $value $member]
    } else {
        set value -
        set cmd [list zrem $key $member]
    }
    incr ::fcw_count(sent)
    set slot [::valkey_cluster::hash $key]
    set port [lindex $::fcw_map $slot]
    set asking 0
    for {set try 0} {$try < 10} {incr try} {
        if {[catch {
            set link [fcw_conn $port]
            if {$asking} { $link asking }
            $link {*}$cmd
        } err]} {
            if {[string match {MOVED *} $err]} {
                set port [lindex [split [lindex $err 2] :] 1]
                lset ::fcw_map $slot $port
                set asking 0
                continue
            }
            if {[string match {ASK *} $err]} {
                set port [lindex [split [lindex $err 2] :] 1]
                set asking 1
                continue
            }
            if {[string match {*I/O*} $err] || [string match {*couldn't open*} $err] ||
                [string match {*connection*} $err]} {
                # The command may have run before the connection broke.
                fcw_uncertain $key $member $value
                fcw_drop $port
            } else {
                # An error reply (CLUSTERDOWN, READONLY, ...): nothing ran.
                incr ::fcw_count(refused)
            }
            catch {set ::fcw_map [fc_slot_map]}
            return
        }
        if {[catch {$link wait 1 300} acked] || $acked < 1} {
            fcw_uncertain $key $member $value
            if {![string is integer -strict $acked]} { fcw_drop $port }
        } else {
            set ::fc_rec($key,$member) [list $value]
            incr ::fcw_count(acked)
        }
        return
    }
    fcw_uncertain $key $member $value
}

proc fcw_uncertain {key member value} {
    incr ::fcw_count(uncertain)
    if {[lsearch -exact $::fc_rec($key,$member) $value] < 0} {
        lappend ::fc_rec($key,$member) $value
    }
}

# Writes until `cond` (evaluated in the caller at most every 100 ms) holds;
# fails after `limit` seconds.
proc fcw_until {cond limit what} {
    set start [clock milliseconds]
    set next 0
    while 1 {
        set now [clock milliseconds]
        if {$now >= $next} {
            if {[uplevel 1 [list expr $cond]]} { return [expr {$now - $start}] }
            set next [expr {$now + 100}]
            if {$now - $start > $limit * 1000} { fail "$what: not done after $limit s" }
        }
        fcw_op
    }
}

# A valkey-cli run in the background: the writer keeps going meanwhile.
proc fc_bg {name args} {
    set out [tmpfile fc-$name]
    set cmd [join [lmap a $args {format '%s' $a}] " "]
    exec sh -c "$cmd > $out.log 2>&1; echo \$? > $out.rc" &
    return $out
}

proc fc_bg_done {out} { file exists $out.rc }

proc fc_bg_result {out what} {
    set rc [string trim [exec cat $out.rc]]
    # Without the colours valkey-cli gives its lines.
    regsub -all {\x1b\[[0-9;]*m} [exec cat $out.log] {} log
    if {$rc != 0} { fail "$what exited with $rc:\n[string range $log end-3000 end]" }
    # reshard prints a line per slot, rebalance one per batch of slots;
    # since 9.0 a slot's line follows the previous one's progress marks.
    set n [regexp -all -line {^[#.]*Moving slot [0-9]+ from } $log]
    foreach {_ k} [regexp -all -line -inline {^Moving ([0-9]+) slots from} $log] { incr n $k }
    return $n
}

# --- Checks ---

# Key -> DEBUG DIGEST-VALUE of every key a node holds.
proc fc_digests {port} {
    set r [fc_link $port]
    set keys [$r keys *]
    set out [dict create]
    for {set i 0} {$i < [llength $keys]} {incr i 500} {
        set batch [lrange $keys $i [expr {$i + 499}]]
        foreach k $batch d [$r debug digest-value {*}$batch] { dict set out $k $d }
    }
    $r close
    return $out
}

# The scenario: `ref` is the index of the node that runs the reference
# build, or -1.
proc fc_scenario {label ref} {
    set ::fc_nodes_wanted {0 1 2 3 4 5}
    set scratch [srv 0 client]
    fc_start_nodes 6 $ref {
        set all $::fc_nodes
        set ::fc_live $all

        test "$label: valkey-cli --cluster create, three primaries with a replica each" {
            set addrs [lmap p $all {format 127.0.0.1:%s $p}]
            exec $::fc_cli --cluster create {*}$addrs --cluster-replicas 1 --cluster-yes 2>@1
            wait_for_condition 100 100 {[fc_check_ok]} else { fail "the cluster did not settle" }
            set ::fc_primaries {}
            foreach p $all {
                lassign [fc_myself $p] id role
                dict set ::fc_ids $p $id
                if {$role eq "primary"} { lappend ::fc_primaries $p }
            }
            assert_equal 3 [llength $::fc_primaries]
            if {$ref >= 0} {
                # The reference node owns slots: it gives and takes them.
                assert_equal primary [lindex [fc_myself [lindex $all $ref]] 1]
            }
        }

        test "$label: sorted sets in all 16384 slots, up to $::fc_big members" {
            set start [clock milliseconds]
            set map [fc_slot_map]
            set total 0
            foreach p $::fc_primaries {
                set slots {}
                for {set s 0} {$s < 16384} {incr s} {
                    if {[lindex $map $s] == $p} { lappend slots $s }
                }
                set r [fc_link $p 1]
                $r script load $::fc_gen_lua
                set sha [$r read]
                incr total [fc_load $r $sha $slots]
                $r close
                # Replicas have everything before the writer starts.
                assert {[fc_call $p wait 1 60000] >= 1}
            }
            set ::fc_loaded $total
            puts "    $label: loaded $total members in 16384 sorted sets ([expr {[clock milliseconds] - $start}] ms)"
            set keys 0
            foreach p $::fc_primaries { incr keys [fc_call $p dbsize] }
            assert_equal 16384 $keys
        }

        # The writer's keys: 64 sets of its own spread over the slots, the
        # two big sets and 30 loaded ones.
        set wkeys {}
        for {set s 3} {$s < 16384} {incr s 256} { lappend wkeys "{[lindex $::fc_names $s]}:w" }
        foreach {s _} $::fc_big_slots { lappend wkeys [lindex $::fc_names $s] }
        for {set s 41} {$s < 16384} {incr s 547} { lappend wkeys [lindex $::fc_names $s] }
        fcw_init $wkeys
        set ::fc_moved 0

        test "$label: reshard a third of the slots (pipelined MIGRATE) while writing" {
            set map [fc_slot_map]
            set p0 [lindex $map 0]
            set p1 [lindex $map 5461]
            set p2 [lindex $map 16383]
            set id0 [dict get $::fc_ids $p0]
            set id1 [dict get $::fc_ids $p1]
            set id2 [dict get $::fc_ids $p2]
            set start [clock milliseconds]
            set job [fc_bg reshard1 $::fc_cli --cluster reshard 127.0.0.1:$p0 --cluster-from $id0 \
                --cluster-to $id1 --cluster-slots 2731 --cluster-yes --cluster-pipeline 10]
            fcw_until {[fc_bg_done $job]} 600 "reshard $p0 -> $p1"
            incr ::fc_moved [fc_bg_result $job "reshard $p0 -> $p1"]
            fcw_until {[fc_check_ok]} 60 "cluster check after the first reshard"
            set job [fc_bg reshard2 $::fc_cli --cluster reshard 127.0.0.1:$p0 --cluster-from $id2 \
                --cluster-to $id0 --cluster-slots 2730 --cluster-yes --cluster-pipeline 10]
            fcw_until {[fc_bg_done $job]} 600 "reshard $p2 -> $p0"
            incr ::fc_moved [fc_bg_result $job "reshard $p2 -> $p0"]
            fcw_until {[fc_check_ok]} 60 "cluster check after the second reshard"
            assert_equal 5461 $::fc_moved
            # The big sets moved: one away from the first primary, one to it.
            set map [fc_slot_map]
            assert_equal $p1 [lindex $map 100]
            assert_equal $p0 [lindex $map 11000]
            puts "    $label: reshard moved $::fc_moved slots in [expr {[clock milliseconds] - $start}] ms"
        }

        test "$label: valkey-cli --cluster rebalance while writing" {
            set start [clock milliseconds]
            set job [fc_bg rebalance $::fc_cli --cluster rebalance 127.0.0.1:[lindex $::fc_primaries 0] \
                --cluster-pipeline 10]
            fcw_until {[fc_bg_done $job]} 600 "rebalance"
            set n [fc_bg_result $job "rebalance"]
            assert {$n > 0}
            incr ::fc_moved $n
            fcw_until {[fc_check_ok]} 60 "cluster check after the rebalance"
            set counts {}
            set map [fc_slot_map]
            foreach p $::fc_primaries { dict set counts $p 0 }
            foreach p $map { dict incr counts $p }
            foreach {p c} $counts { assert {$c >= 5300 && $c <= 5600} }
            puts "    $label: rebalance moved $n slots in [expr {[clock milliseconds] - $start}] ms (slots per primary: [dict values $counts])"
        }

        test "$label: SIGKILL a primary; its replica takes over; the old primary rejoins as a replica" {
            # The victim: the reference node if there is one (its replica,
            # ours, takes over and it comes back replicating from ours),
            # else the holder of the big set.
            if {$ref >= 0} {
                set victim [lindex $all $ref]
            } else {
                set victim [fc_primary_of_slot 100]
            }
            set vid [dict get $::fc_ids $victim]
            set heir {}
            foreach p $all {
                lassign [fc_myself $p] id role primary
                if {$primary eq $vid} { set heir $p }
            }
            assert {$heir ne {}}
            set level [expr {[lsearch $all $victim] - 5}]
            set vslot [lsearch [fc_slot_map] $victim]
            assert {$vslot >= 0}
            set pid [srv $level pid]
            set start [clock milliseconds]
            exec kill -9 $pid
            set ::fc_live [lsearch -all -inline -not $all $victim]
            set ::fc_failover [fcw_until {
                ![catch {fc_myself $heir} me] && [lindex $me 1] eq "primary" &&
                [fc_primary_of_slot $vslot] == $heir &&
                [fc_all_ok $::fc_live]
            } 120 "failover of $victim to $heir"]
            puts "    $label: failover of $victim to $heir took $::fc_failover ms (SIGKILL to cluster_state ok)"
            # A few seconds of writes on the new primary before the old one returns.
            fcw_until {[clock milliseconds] - $start > $::fc_failover + 2000} 30 "writes after failover"
            set start [clock milliseconds]
            restart_server $level true false
            # Asked last: until it learns the new configuration it still
            # believes it owns its slots.
            lappend ::fc_live $victim
            set rejoin [fcw_until {
                [lindex [fc_myself $victim] 1] eq "replica" &&
                [lindex [fc_myself $victim] 2] eq [dict get $::fc_ids $heir] &&
                [string match *master_link_status:up* [fc_call $victim info replication]]
            } 120 "$victim rejoining as a replica of $heir"]
            set rejoin [expr {[clock milliseconds] - $start}]
            puts "    $label: $victim rejoined as a replica of $heir and synced in $rejoin ms"
            fcw_until {[fc_check_ok]} 60 "cluster check after the failover"
        }

        test "$label: every acknowledged write is there; every key's digest matches" {
            fcw_close
            array set count [array get ::fcw_count]
            puts "    $label: writer sent $count(sent), acknowledged $count(acked), unacknowledged $count(uncertain), refused $count(refused)"
            set map [fc_slot_map]
            set primaries [lsort -unique $map]
            foreach p $primaries { assert {[fc_call $p wait 1 30000] >= 1} }

            # Each member the writer touched holds a value it may hold.
            set checked 0
            set resolved {}
            foreach key $::fcw_keys {
                set members {}
                for {set m 0} {$m < 300} {incr m} { lappend members w$m }
                set port [lindex $map [::valkey_cluster::hash $key]]
                set scores [fc_call $port zmscore $key {*}$members]
                foreach m $members s $scores {
                    set may $::fc_rec($key,$m)
                    set ok 0
                    foreach v $may {
                        if {($v eq "-" && $s eq "") || ($v ne "-" && $s ne "" && $v == $s)} { set ok 1 }
                    }
                    if {!$ok} { fail "$key $m holds '$s'; the writer allows only $may" }
                    dict set resolved $key $m $s
                    incr checked
                }
            }

            # The expected dataset, built on the scratch server.
            $scratch flushall
            set sha [$scratch script load $::fc_gen_lua]
            set slots {}
            for {set s 0} {$s < 16384} {incr s} { lappend slots $s }
            set r [valkey [srv -6 host] [srv -6 port] 1 0]
            fc_load $r $sha $slots
            $r close
            dict for {key members} $resolved {
                set add {}
                set rem {}
                dict for {m s} $members {
                    if {$s eq ""} { lappend rem $m } else { lappend add $s $m }
                }
                if {[llength $add]} { $scratch zadd $key {*}$add }
                if {[llength $rem]} { $scratch zrem $key {*}$rem }
            }
            set want [fc_digests [srv -6 port]]
            set have [dict create]
            foreach p $primaries { set have [dict merge $have [fc_digests $p]] }
            assert_equal [dict size $want] [dict size $have]
            set members 0
            dict for {k d} $want {
                if {![dict exists $have $k]} { fail "$k is missing from the cluster" }
                if {[dict get $have $k] ne $d} { fail "$k: digest [dict get $have $k], expected $d" }
            }
            foreach k [dict keys $want] { incr members [$scratch zcard $k] }
            # Every replica holds its primary's dataset.
            foreach p $all {
                lassign [fc_myself $p] id role primary
                if {$role ne "replica"} continue
                set pp [lindex [split [lindex [fc_node_addr $p $primary] 0] @] 0]
                assert_equal [fc_call [lindex [split $pp :] 1] debug digest] [fc_call $p debug digest]
            }
            puts "    $label: verified $members members in [dict size $want] keys by digest; $checked writer members one by one; $::fc_moved slots moved; failover $::fc_failover ms"
        }
        fcw_close
    }
}

proc fc_node_addr {port id} {
    foreach line [split [fc_call $port cluster nodes] "\n"] {
        if {[lindex [split $line " "] 0] eq $id} { return [lindex [split $line " "] 1] }
    }
}

proc fc_all_ok {ports} {
    foreach p $ports {
        if {[catch {fc_call $p cluster info} info] || ![string match *cluster_state:ok* $info]} { return 0 }
    }
    return 1
}

set old_singledb $::singledb
set ::singledb 1
set old_other $::other_server_path
start_server {tags {"fork" "cluster-faults"}} {
    # The scratch server (standalone) names the keys.
    set ::fc_names [r eval $::fc_names_lua 0]

    fc_scenario "fork cluster" -1

    test {fork and reference cluster: the reference build is there} {
        if {![file executable $::fc_reference]} { fail "run make upstream" }
    }
    if {[file executable $::fc_reference]} {
        set ::other_server_path $::fc_reference
        fc_scenario "fork and reference cluster" 0
    }
}
set ::other_server_path $old_other
set ::singledb $old_singledb
