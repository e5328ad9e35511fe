# Our users' upgrade: data written by the fork's build on the previous
# upstream (Valkey 8.1.1, commit 59ad8c1) loads into this build with the
# same data. tests/assets/fork81/ holds an RDB file and a multi-part AOF
# (a rewritten base in command form plus an incremental part) made by that
# build; make-fixtures.py there says how, and gives the DEBUG DIGEST the
# old server had. Big sorted sets in it are btree-encoded, small ones
# listpack, beside a GEO set and the other types.
#
# After loading, the whole dataset's digest must be the old server's, and
# the same as the reference build's (`make upstream`) when it loads the
# same file; an RDB saved by this build must load into the reference with
# that digest too, so a user who upgrades with us can still leave.

set ::fork81_digest fb0598657e9a45b2aef9f68e9d354cbceb0279ca
set ::fork81_assets [file normalize tests/assets/fork81]
source tests/helpers/fork-reference.tcl

proc fork81_checks {} {
    r select 0
    assert_equal 82 [r dbsize]
    assert_encoding btree big:z0
    assert_encoding btree big:z1
    assert_encoding btree geo:big
    assert_encoding listpack small:z0
    assert_equal 2001 [r zcard big:z0]
    assert_equal 42 [r zscore big:z1 after-rewrite]
    assert_equal {} [r zscore big:z0 top]
    assert_equal bottom [lindex [r zrange big:z0 0 0] 0]
    assert_equal 7 [r zscore small:z0 lp-after]
    assert_equal 2 [llength [r geopos geo:small Palermo Catania]]
    assert_range [r pttl big:exp] 1 99999999999
}

# Starts the reference build on `dir`/`dbfilename` and returns its digest.
proc fork81_reference_digest {dir dbfilename} {
    fork_server reference [list overrides [list dir $dir dbfilename $dbfilename save ""]] {
        set digest [r debug digest]
    }
    return $digest
}

tags {"fork" "compat" "external:skip"} {
    set dir [tmpdir fork81-rdb]
    exec cp -L $::fork81_assets/fork81.rdb $dir/fork81.rdb

    start_server [list overrides [list dir $dir dbfilename fork81.rdb save ""]] {
        test {An RDB written by the fork on 8.1.1 loads with the same data} {
            assert_equal $::fork81_digest [r debug digest]
            fork81_checks
        }

        test {The loaded sets take writes and reload with the same data} {
            r zadd big:z0 3.5 new-member
            r zrem big:z0 new-member
            r debug reload
            assert_equal $::fork81_digest [r debug digest]
        }

        if {[file executable $::fork_ref_server]} {
            test {The reference loads the 8.1.1 fork's RDB with the same digest} {
                assert_equal $::fork81_digest [fork81_reference_digest $dir fork81.rdb]
            }

            test {An RDB this build saves from that data loads into the reference} {
                r config set dbfilename resaved.rdb
                r save
                assert_equal $::fork81_digest [fork81_reference_digest $dir resaved.rdb]
            }
        } else {
            test {Reference build is present} {
                fail "No reference server at $::fork_ref_server: run make upstream"
            }
        }
    }

    set dir [tmpdir fork81-aof]
    exec cp -rL $::fork81_assets/fork81-aof $dir/

    start_server [list overrides [list dir $dir appendonly yes appendfilename fork81.aof \
                                      appenddirname fork81-aof save ""]] {
        test {An AOF written by the fork on 8.1.1 loads with the same data} {
            assert_equal $::fork81_digest [r debug digest]
            fork81_checks
        }

        test {After BGREWRITEAOF of that data it still loads the same} {
            r bgrewriteaof
            waitForBgrewriteaof r
            r debug loadaof
            assert_equal $::fork81_digest [r debug digest]
        }
    }
}
