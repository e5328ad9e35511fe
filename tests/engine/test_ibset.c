/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Unit tests of big integer sets (ibset.c: sorted int64 members in blocks
 * of fixed-width offsets or bitmaps, behind a two-level index that counts
 * members): the edges of the range, duplicates, each kind of block (runs
 * of consecutive integers make bitmaps, sparse values arrays of 1, 2, 4
 * and 8-byte offsets), a new minimum, bulk appends, ranks, cursors and
 * seeks, emptying and growing again, the bytes a set holds and gives back,
 * defrag and dismiss, the tag that tells an ibset from an hpset, the
 * memory targets, and a differential run of a million operations against
 * a sorted array (ibs_diff.h).
 *
 * Built like test_zbtree.c: with the server's allocator, and under the
 * sanitizers (where IBS_DIFF_OPS makes the differential run shorter).
 * IBS_TEST=<pattern> runs the tests whose names match it alone.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "ibs_diff.h"
#include "hpset.h"

/* --- Helpers --- */

static void check(const ibset *s) {
    const char *err = ibsCheck(s);
    if (err) fail_msg("consistency check: %s", err);
}

static uint64_t rng(uint64_t *x) {
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

static void shuffle(int64_t *v, size_t n, uint64_t seed) {
    uint64_t x = seed;
    for (size_t i = n; i > 1; i--) {
        size_t j = rng(&x) % i;
        int64_t t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

/* The set holds exactly the model's values: its invariants, the walk from
 * the first, every rank, each member found. */
static void expectEqual(const ibset *s, const ibdModel *md) {
    check(s);
    assert_int_equal(ibsLength(s), md->n);
    ibsCursor c;
    size_t i = 0;
    for (int ok = ibsFirst(s, &c); ok; ok = ibsNext(&c), i++) {
        assert_true(i < md->n);
        if (c.value != md->v[i]) fail_msg("walk: member %zu is %lld, not %lld", i, (long long)c.value, (long long)md->v[i]);
    }
    assert_int_equal(i, md->n);
    for (i = 0; i < md->n; i++) {
        int64_t v = ibsAtRank(s, i);
        if (v != md->v[i]) fail_msg("at rank %zu: %lld, not %lld", i, (long long)v, (long long)md->v[i]);
        assert_true(ibsContains(s, md->v[i]));
    }
}

/* Values absent from the model are absent from the set: neighbours of
 * members, and random ones. */
static void expectAbsent(const ibset *s, const ibdModel *md, uint64_t seed, int random) {
    for (size_t i = 0; i < md->n; i += 7) {
        int64_t v = md->v[i];
        if (v > INT64_MIN && ibdFind(md, v - 1) < 0) assert_false(ibsContains(s, v - 1));
        if (v < INT64_MAX && ibdFind(md, v + 1) < 0) assert_false(ibsContains(s, v + 1));
    }
    uint64_t x = seed;
    for (int i = 0; i < random; i++) {
        int64_t v = (int64_t)rng(&x);
        assert_int_equal(ibsContains(s, v), ibdFind(md, v) >= 0);
    }
}

static void *moveAlloc(void *p) {
    size_t size = zmalloc_size(p);
    void *q = zmalloc(size);
    memcpy(q, p, size);
    zfree(p);
    return q;
}

static size_t movedCalls;

static void *countingMove(void *p) {
    movedCalls++;
    return moveAlloc(p);
}

static void *noMove(void *p) {
    (void)p;
    movedCalls++;
    return NULL;
}

static const int64_t edges[] = {INT64_MIN, INT64_MIN + 1, -4294967296, -1, 0, 1, 4294967295, INT64_MAX - 1, INT64_MAX};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* --- Edges --- */

static void test_ibset_empty(void **state) {
    (void)state;
    ibset *s = ibsCreate();
    ibsCursor c;
    assert_true(ibsIsSet(s));
    assert_int_equal(ibsLength(s), 0);
    assert_true(ibsAllocSize(s) > 0);
    for (size_t i = 0; i < COUNT(edges); i++) {
        assert_false(ibsContains(s, edges[i]));
        assert_false(ibsDelete(s, edges[i]));
        assert_false(ibsSeek(s, edges[i], &c));
    }
    assert_false(ibsFirst(s, &c));
    ibsStats st;
    ibsGetStats(s, &st);
    assert_int_equal(st.blocks, 0);
    assert_int_equal(st.dataBytes, 0);
    assert_int_equal(st.blockBytes + st.indexBytes, ibsAllocSize(s));
    check(s);
    /* Nothing to defrag but the struct. */
    movedCalls = 0;
    ibset *moved = ibsDefragShell(s, countingMove);
    if (moved) s = moved;
    assert_int_equal(ibsDefragBlocks(s, 0, 10, countingMove), 0);
    assert_true(movedCalls >= 1);
    check(s);
    assert_int_equal(ibsLength(s), 0);
    ibsFree(s);
}

/* Each edge value alone in a set, then all of them together (in one block
 * whose offsets span the whole range). */
static void test_ibset_single_values(void **state) {
    (void)state;
    ibsCursor c;
    for (size_t i = 0; i < COUNT(edges); i++) {
        int64_t v = edges[i];
        ibset *s = ibsCreate();
        size_t empty = ibsAllocSize(s);
        assert_int_equal(ibsInsert(s, v), 1);
        assert_int_equal(ibsInsert(s, v), 0);
        assert_int_equal(ibsLength(s), 1);
        assert_true(ibsContains(s, v));
        for (size_t j = 0; j < COUNT(edges); j++)
            if (j != i) assert_false(ibsContains(s, edges[j]));
        if (v > INT64_MIN) assert_false(ibsContains(s, v - 1));
        if (v < INT64_MAX) assert_false(ibsContains(s, v + 1));
        assert_true(ibsAtRank(s, 0) == v);
        assert_true(ibsFirst(s, &c) && c.value == v);
        assert_false(ibsNext(&c));
        assert_true(ibsSeek(s, v, &c) && c.value == v);
        assert_true(ibsSeek(s, INT64_MIN, &c) && c.value == v);
        if (v < INT64_MAX) assert_false(ibsSeek(s, v + 1, &c));
        if (v > INT64_MIN) assert_true(ibsSeek(s, v - 1, &c) && c.value == v);
        assert_true(ibsAllocSize(s) > empty);
        check(s);
        /* Not the member: nothing happens. */
        if (v > INT64_MIN) assert_false(ibsDelete(s, v - 1));
        if (v < INT64_MAX) assert_false(ibsDelete(s, v + 1));
        assert_int_equal(ibsLength(s), 1);
        assert_int_equal(ibsDelete(s, v), 1);
        assert_int_equal(ibsDelete(s, v), 0);
        assert_int_equal(ibsLength(s), 0);
        assert_false(ibsContains(s, v));
        assert_false(ibsFirst(s, &c));
        assert_int_equal(ibsAllocSize(s), empty);
        check(s);
        ibsFree(s);
    }

    /* All together, inserted from the middle out. */
    ibset *s = ibsCreate();
    const size_t order[] = {4, 3, 5, 2, 6, 1, 7, 0, 8};
    for (size_t i = 0; i < COUNT(order); i++) {
        assert_int_equal(ibsInsert(s, edges[order[i]]), 1);
        check(s);
    }
    for (size_t i = 0; i < COUNT(edges); i++) assert_int_equal(ibsInsert(s, edges[i]), 0);
    ibdModel md = {0};
    for (size_t i = 0; i < COUNT(edges); i++) ibdPush(&md, edges[i]);
    expectEqual(s, &md);
    ibsStats st;
    ibsGetStats(s, &st);
    assert_true(st.arrayBlocks[3] > 0); /* offsets of 8 bytes */
    /* Seeks between the edges. */
    assert_true(ibsSeek(s, INT64_MIN + 2, &c) && c.value == -4294967296);
    assert_true(ibsSeek(s, -2, &c) && c.value == -1);
    assert_true(ibsSeek(s, 2, &c) && c.value == 4294967295);
    assert_true(ibsSeek(s, 4294967296, &c) && c.value == INT64_MAX - 1);
    assert_true(ibsNext(&c) && c.value == INT64_MAX);
    assert_false(ibsNext(&c));
    /* Out from the ends in. */
    for (size_t i = 0; i < COUNT(edges); i++) {
        int64_t v = i % 2 ? edges[i / 2] : edges[COUNT(edges) - 1 - i / 2];
        assert_int_equal(ibsDelete(s, v), 1);
        assert_false(ibsContains(s, v));
        check(s);
    }
    assert_int_equal(ibsLength(s), 0);
    ibdModelFree(&md);
    ibsFree(s);
}

/* Duplicates return 0 and change nothing: in bitmaps, in arrays of each
 * width, at the ends. */
static void test_ibset_duplicates(void **state) {
    (void)state;
    ibset *s = ibsCreate();
    ibdModel md = {0};
    uint64_t x = 5;
    for (int64_t i = 0; i < 20000; i++) ibdPush(&md, i);                                          /* bitmaps */
    for (int i = 0; i < 20000; i++) ibdPush(&md, (int64_t)(rng(&x) % 10000000) + 1000000);        /* 2 bytes */
    for (int i = 0; i < 5000; i++) ibdPush(&md, (int64_t)(rng(&x) % 4000000000ULL) + 5000000000); /* 4 bytes */
    for (int i = 0; i < 20000; i++) ibdPush(&md, (int64_t)rng(&x));                               /* 8 bytes */
    for (size_t i = 0; i < COUNT(edges); i++) ibdPush(&md, edges[i]);
    size_t pushed = md.n;
    int64_t *order = malloc(pushed * sizeof(int64_t));
    memcpy(order, md.v, pushed * sizeof(int64_t));
    shuffle(order, pushed, 11);
    ibdSortUnique(&md);
    size_t added = 0;
    for (size_t i = 0; i < pushed; i++) added += (size_t)ibsInsert(s, order[i]);
    assert_int_equal(added, md.n);
    check(s);
    size_t bytes = ibsAllocSize(s);
    for (size_t i = 0; i < pushed; i++) assert_int_equal(ibsInsert(s, order[i]), 0);
    for (size_t i = 0; i < md.n; i++) assert_int_equal(ibsAppend(s, md.v[i]), 0);
    assert_int_equal(ibsLength(s), md.n);
    assert_int_equal(ibsAllocSize(s), bytes);
    ibsStats st;
    ibsGetStats(s, &st);
    assert_true(st.bitmapBlocks > 0);
    for (int w = 1; w < 4; w++)
        if (st.arrayBlocks[w] == 0) fail_msg("no array block of %d-byte offsets", 1 << w);
    expectEqual(s, &md);
    expectAbsent(s, &md, 12, 100000);
    free(order);
    ibdModelFree(&md);
    ibsFree(s);

    /* A few members 10 apart: one block of 1-byte offsets (the bitmap
     * would take more), duplicates among them. */
    s = ibsCreate();
    for (int64_t i = 0; i < 21; i++) ibdPush(&md, -100 + i * 10);
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < md.n; i++) assert_int_equal(ibsInsert(s, md.v[(i * 8) % md.n]), !pass);
    ibsGetStats(s, &st);
    assert_true(st.blocks == 1 && st.arrayBlocks[0] == 1);
    expectEqual(s, &md);
    expectAbsent(s, &md, 13, 1000);
    ibdModelFree(&md);
    ibsFree(s);
}

/* Runs of consecutive integers, inserted ascending, descending and in
 * random order, at both ends of the range and across zero: bitmap blocks.
 * (Descending runs are shorter: each insert below the set's minimum
 * re-encodes the first block, some 5 us a member.) */
static void test_ibset_consecutive_bitmaps(void **state) {
    (void)state;
    const int64_t starts[] = {0, -100000, INT64_MIN, INT64_MAX - 99999};
    for (size_t k = 0; k < COUNT(starts); k++) {
        for (int how = 0; how < 3; how++) {
            const int64_t n = how == 1 ? 20000 : 100000;
            ibset *s = ibsCreate();
            ibdModel md = {0};
            for (int64_t i = 0; i < n; i++) ibdPush(&md, starts[k] + i);
            int64_t *order = malloc(n * sizeof(int64_t));
            for (int64_t i = 0; i < n; i++) order[i] = how == 1 ? md.v[n - 1 - i] : md.v[i];
            if (how == 2) shuffle(order, (size_t)n, 7 + k);
            for (int64_t i = 0; i < n; i++) {
                assert_int_equal(ibsInsert(s, order[i]), 1);
                if (i % 25000 == 0) check(s);
            }
            free(order);
            ibsStats st;
            ibsGetStats(s, &st);
            if (st.bitmapBlocks * 2 < st.blocks)
                fail_msg("start %lld, order %d: %zu bitmaps among %zu blocks", (long long)starts[k], how, st.bitmapBlocks,
                         st.blocks);
            /* A bit a member and the headers: well under a byte. */
            assert_true(ibsAllocSize(s) < (size_t)n / 2);
            expectEqual(s, &md);
            expectAbsent(s, &md, 3, 10000);
            if (starts[k] > INT64_MIN) assert_false(ibsContains(s, starts[k] - 1));
            if (starts[k] <= INT64_MAX - n) assert_false(ibsContains(s, starts[k] + n));
            ibdModelFree(&md);
            ibsFree(s);
        }
    }
}

/* Sparse random values: below 10^7 (offsets of 2 bytes) and over the whole
 * range (8 bytes), inserted in random order. */
static void test_ibset_random_sparse(void **state) {
    (void)state;
    for (int full = 0; full < 2; full++) {
        ibset *s = ibsCreate();
        ibdModel md = {0};
        uint64_t x = 77 + (uint64_t)full;
        /* Values drawn until 150,000 are new, each added once. */
        while (ibsLength(s) < 150000) {
            int64_t v = full ? (int64_t)rng(&x) : (int64_t)(rng(&x) % 10000000);
            if (ibsInsert(s, v)) {
                ibdPush(&md, v);
                assert_int_equal(ibsInsert(s, v), 0);
            }
            if (md.n % 50000 == 0) check(s);
        }
        ibdSortUnique(&md);
        assert_int_equal(md.n, 150000);
        ibsStats st;
        ibsGetStats(s, &st);
        if (full)
            assert_true(st.arrayBlocks[3] * 2 > st.blocks);
        else
            assert_true(st.arrayBlocks[1] * 2 > st.blocks);
        assert_true(st.pages > 1);
        expectEqual(s, &md);
        expectAbsent(s, &md, 9, 100000);
        ibdModelFree(&md);
        ibsFree(s);
    }
}

/* Values across the whole range: evenly spread with jitter, clusters at
 * spans of each offset width, the edges; a few pages of each. */
static void test_ibset_whole_range(void **state) {
    (void)state;
    ibset *s = ibsCreate();
    ibdModel md = {0};
    uint64_t x = 1234;
    const uint64_t n = 40000, step = UINT64_MAX / n;
    for (uint64_t i = 0; i < n; i++) ibdPush(&md, (int64_t)((uint64_t)INT64_MIN + i * step + rng(&x) % step));
    static const int shifts[] = {57, 49, 33, 14};
    for (int c = 0; c < 64; c++) {
        int64_t centre = (int64_t)rng(&x);
        for (int i = 0; i < 500; i++) {
            int64_t off = (int64_t)(rng(&x) >> shifts[c % 4]);
            ibdPush(&md, ibdAdd(centre, i % 2 ? -off : off));
        }
    }
    for (size_t i = 0; i < COUNT(edges); i++) ibdPush(&md, edges[i]);
    size_t pushed = md.n;
    int64_t *order = malloc(pushed * sizeof(int64_t));
    memcpy(order, md.v, pushed * sizeof(int64_t));
    shuffle(order, pushed, 99);
    ibdSortUnique(&md);
    size_t added = 0;
    for (size_t i = 0; i < pushed; i++) added += (size_t)ibsInsert(s, order[i]);
    assert_int_equal(added, md.n);
    ibsStats st;
    ibsGetStats(s, &st);
    assert_true(st.pages > 2);
    expectEqual(s, &md);
    expectAbsent(s, &md, 31, 100000);
    /* Every other one out, then in again. */
    for (size_t i = 0; i < pushed; i += 2) ibsDelete(s, order[i]);
    check(s);
    for (size_t i = 0; i < pushed; i += 2) ibsInsert(s, order[i]);
    expectEqual(s, &md);
    free(order);
    ibdModelFree(&md);
    ibsFree(s);
}

/* Each insert below the current minimum: the first block's base moves
 * down, or a block of its own starts; dense, sparse and wide. */
static void test_ibset_insert_below_min(void **state) {
    (void)state;
    const struct {
        int64_t top, step;
        long n;
    } runs[] = {
        {1000000, 1, 50000},                   /* bitmaps, from their top */
        {1000000, 97, 50000},                  /* 1- and 2-byte offsets */
        {INT64_MAX, 3000000001LL, 50000},      /* 4 and 8 bytes, from the very top */
        {INT64_MAX, INT64_MAX / 20000, 40000}, /* down past zero to near INT64_MIN */
    };
    ibsCursor c;
    for (size_t k = 0; k < COUNT(runs); k++) {
        ibset *s = ibsCreate();
        ibdModel md = {0};
        int64_t v = runs[k].top;
        for (long i = 0; i < runs[k].n; i++) {
            assert_int_equal(ibsInsert(s, v), 1);
            assert_true(ibsFirst(s, &c) && c.value == v);
            assert_true(ibsAtRank(s, 0) == v);
            ibdPush(&md, v);
            if (i % 10000 == 0) check(s);
            if (v < INT64_MIN + runs[k].step) break;
            v -= runs[k].step;
        }
        /* And the very bottom. */
        if (ibsInsert(s, INT64_MIN)) ibdPush(&md, INT64_MIN);
        assert_true(ibsFirst(s, &c) && c.value == INT64_MIN);
        ibdSortUnique(&md);
        expectEqual(s, &md);
        expectAbsent(s, &md, 5, 10000);
        ibdModelFree(&md);
        ibsFree(s);
    }
}

/* Bulk appends: ascending only; a value not above the max returns 0 and
 * changes nothing; blocks come out whole (no more bytes than inserts). */
static void test_ibset_append(void **state) {
    (void)state;
    ibset *s = ibsCreate();
    ibdModel md = {0};
    /* An empty set takes anything first. */
    assert_int_equal(ibsAppend(s, 42), 1);
    ibdPush(&md, 42);
    assert_int_equal(ibsAppend(s, 42), 0);
    assert_int_equal(ibsAppend(s, 41), 0);
    assert_int_equal(ibsAppend(s, INT64_MIN), 0);
    assert_int_equal(ibsLength(s), 1);
    check(s);
    /* Gaps of every width, runs of consecutive values between them. */
    uint64_t x = 8;
    int64_t v = 42;
    static const int64_t gaps[] = {1, 2, 100, 255, 256, 65535, 65536, 1LL << 31, 1LL << 32, 1LL << 40};
    while (md.n < 300000) {
        int64_t gap = gaps[rng(&x) % COUNT(gaps)];
        long run = rng(&x) % 4 == 0 ? (long)(rng(&x) % 5000) : 1;
        for (long j = 0; j < run && md.n < 300000; j++) {
            if (v > INT64_MAX - gap) break;
            v += j ? 1 : gap;
            assert_int_equal(ibsAppend(s, v), 1);
            ibdPush(&md, v);
            if (md.n % 1000 == 0) {
                /* Not above the max: the max, a member, below the min, a
                 * gap inside. None of them changes anything. */
                size_t bytes = ibsAllocSize(s);
                assert_int_equal(ibsAppend(s, v), 0);
                assert_int_equal(ibsAppend(s, md.v[rng(&x) % md.n]), 0);
                assert_int_equal(ibsAppend(s, 0), 0);
                assert_int_equal(ibsAppend(s, v - 1 == md.v[md.n - 2] ? md.v[md.n - 2] : v - 1), 0);
                assert_int_equal(ibsLength(s), md.n);
                assert_int_equal(ibsAllocSize(s), bytes);
                if (v - 1 != md.v[md.n - 2]) assert_false(ibsContains(s, v - 1));
            }
        }
        if (v > INT64_MAX - (1LL << 41)) break;
    }
    check(s);
    expectEqual(s, &md);
    /* Up to INT64_MAX, past which nothing goes. */
    assert_int_equal(ibsAppend(s, INT64_MAX - 1), 1);
    assert_int_equal(ibsAppend(s, INT64_MAX), 1);
    ibdPush(&md, INT64_MAX - 1);
    ibdPush(&md, INT64_MAX);
    assert_int_equal(ibsAppend(s, INT64_MAX), 0);
    expectEqual(s, &md);
    /* Inserts and deletes go on as usual after appends. */
    assert_int_equal(ibsInsert(s, 43), 1);
    assert_int_equal(ibsInsert(s, INT64_MIN), 1);
    assert_int_equal(ibsDelete(s, 42), 1);
    assert_int_equal(ibsDelete(s, INT64_MAX), 1);
    check(s);

    /* The same members, inserted in random order: appends hold them in no
     * more bytes. */
    ibset *appended = ibsCreate(), *inserted = ibsCreate();
    for (size_t i = 0; i < md.n; i++) assert_int_equal(ibsAppend(appended, md.v[i]), 1);
    int64_t *order = malloc(md.n * sizeof(int64_t));
    memcpy(order, md.v, md.n * sizeof(int64_t));
    shuffle(order, md.n, 4);
    for (size_t i = 0; i < md.n; i++) assert_int_equal(ibsInsert(inserted, order[i]), 1);
    expectEqual(appended, &md);
    expectEqual(inserted, &md);
    print_message("appends: %zu members in %zu bytes appended, %zu inserted in random order\n", md.n,
                  ibsAllocSize(appended), ibsAllocSize(inserted));
    assert_true(ibsAllocSize(appended) <= ibsAllocSize(inserted));
    free(order);
    ibsFree(appended);
    ibsFree(inserted);
    ibdModelFree(&md);
    ibsFree(s);
}

/* A mixed set (bitmaps, arrays of each width, several pages): every rank,
 * the walk, seeks at members, between them and past both ends. */
static void test_ibset_rank_walk_seek(void **state) {
    (void)state;
    ibset *s = ibsCreate();
    ibdModel md = {0};
    uint64_t x = 2024;
    for (int64_t i = 0; i < 30000; i++) ibdPush(&md, -15000 + i);
    for (int64_t i = 0; i < 20000; i++) ibdPush(&md, 1000000 + i * 3);
    for (int i = 0; i < 60000; i++) ibdPush(&md, (int64_t)(rng(&x) % 100000000) + 10000000);
    for (int i = 0; i < 30000; i++) ibdPush(&md, (int64_t)rng(&x));
    for (int i = 0; i < 5000; i++) ibdPush(&md, (int64_t)(rng(&x) % 250) + 500000000000LL);
    ibdPush(&md, INT64_MAX - 5);
    ibdPush(&md, INT64_MIN + 5);
    size_t pushed = md.n;
    int64_t *order = malloc(pushed * sizeof(int64_t));
    memcpy(order, md.v, pushed * sizeof(int64_t));
    shuffle(order, pushed, 21);
    for (size_t i = 0; i < pushed; i++) ibsInsert(s, order[i]);
    free(order);
    ibdSortUnique(&md);
    ibsStats st;
    ibsGetStats(s, &st);
    assert_true(st.pages > 2 && st.bitmapBlocks > 0);
    expectEqual(s, &md);

    ibsCursor c;
    /* At each member, just after it (the next member), walking on. */
    for (size_t i = 0; i < md.n; i++) {
        assert_true(ibsSeek(s, md.v[i], &c));
        assert_true(c.value == md.v[i]);
        if (i % 5 == 0) {
            int more = ibsSeek(s, md.v[i] + 1, &c);
            assert_int_equal(more, i + 1 < md.n);
            if (more) assert_true(c.value == md.v[i + 1]);
            for (size_t j = i + 1; j < i + 4 && j < md.n && more; j++) {
                assert_true(c.value == md.v[j]);
                more = ibsNext(&c);
                assert_int_equal(more, j + 1 < md.n);
            }
        }
    }
    /* Random values, absent mostly. */
    for (int i = 0; i < 200000; i++) {
        int64_t v = i % 2 ? (int64_t)rng(&x) : (int64_t)(rng(&x) % 200000000) - 50000000;
        size_t at = ibdLowerBound(&md, v);
        int more = ibsSeek(s, v, &c);
        assert_int_equal(more, at < md.n);
        if (more) assert_true(c.value == md.v[at]);
    }
    /* Below the min, above the max. */
    assert_true(ibsSeek(s, INT64_MIN, &c) && c.value == INT64_MIN + 5);
    assert_true(ibsSeek(s, INT64_MIN + 5, &c) && c.value == INT64_MIN + 5);
    assert_true(ibsSeek(s, INT64_MAX - 5, &c) && c.value == INT64_MAX - 5);
    assert_false(ibsNext(&c));
    assert_false(ibsSeek(s, INT64_MAX - 4, &c));
    assert_false(ibsSeek(s, INT64_MAX, &c));
    ibdModelFree(&md);
    ibsFree(s);
}

/* Emptied in random order, the bytes going down as it goes and all back
 * at the end; then it grows again with other values. */
static void test_ibset_delete_to_empty_and_regrow(void **state) {
    (void)state;
    ibset *s = ibsCreate();
    const size_t empty = ibsAllocSize(s);
    uint64_t x = 3;
    for (int round = 0; round < 3; round++) {
        ibdModel md = {0};
        for (int64_t i = 0; i < 40000; i++) ibdPush(&md, round * 1000000 + i);
        for (int i = 0; i < 40000; i++) ibdPush(&md, (int64_t)(rng(&x) % 100000000));
        for (int i = 0; i < 20000; i++) ibdPush(&md, (int64_t)rng(&x));
        ibdSortUnique(&md);
        int64_t *order = malloc(md.n * sizeof(int64_t));
        memcpy(order, md.v, md.n * sizeof(int64_t));
        shuffle(order, md.n, 50 + (uint64_t)round);
        for (size_t i = 0; i < md.n; i++) assert_int_equal(ibsInsert(s, order[i]), 1);
        expectEqual(s, &md);
        /* Blocks give bytes back once they have lost half their members
         * (or all): never more bytes, fewer from half way on. */
        size_t full = ibsAllocSize(s), mark = full, quarter = md.n / 4;
        shuffle(order, md.n, 60 + (uint64_t)round);
        for (size_t i = 0; i < md.n; i++) {
            assert_int_equal(ibsDelete(s, order[i]), 1);
            if (i % quarter == quarter - 1) {
                size_t now = ibsAllocSize(s);
                if (now > mark || (i >= md.n / 2 && now >= mark))
                    fail_msg("round %d: %zu bytes after %zu deletes, %zu before", round, now, i + 1, mark);
                mark = now;
                check(s);
            }
        }
        assert_int_equal(ibsLength(s), 0);
        ibsCursor c;
        assert_false(ibsFirst(s, &c));
        assert_false(ibsSeek(s, INT64_MIN, &c));
        check(s);
        ibsStats st;
        ibsGetStats(s, &st);
        assert_int_equal(st.blocks, 0);
        assert_int_equal(st.pages, 0);
        assert_int_equal(ibsAllocSize(s), empty);
        free(order);
        ibdModelFree(&md);
    }
    ibsFree(s);
}

/* ibsAllocSize: over 0, the stats' bytes, up with inserts, down with
 * deletes (a run out of the middle), ordered by density. */
static void test_ibset_alloc_size(void **state) {
    (void)state;
    ibset *s = ibsCreate();
    assert_true(ibsAllocSize(s) > 0);
    size_t last = ibsAllocSize(s);
    for (int64_t i = 0; i < 500000; i++) {
        ibsInsert(s, i * 5);
        if (i % 50000 == 49999) {
            assert_true(ibsAllocSize(s) > last);
            last = ibsAllocSize(s);
            ibsStats st;
            ibsGetStats(s, &st);
            assert_int_equal(st.blockBytes + st.indexBytes, ibsAllocSize(s));
            assert_true(st.dataBytes <= st.blockBytes);
        }
    }
    check(s);
    /* A run out of the middle, then nine in ten of the rest: bitmaps 50
     * bits a member become arrays of 2 bytes, their allocations shrinking
     * as they go to at most twice what they hold (and the header). */
    for (int64_t i = 100000; i < 400000; i++) assert_true(ibsDelete(s, i * 5));
    check(s);
    assert_true(ibsAllocSize(s) < last * 2 / 5 + 4096);
    last = ibsAllocSize(s);
    for (int64_t i = 0; i < 500000; i++)
        if (i % 10) ibsDelete(s, i * 5);
    check(s);
    assert_int_equal(ibsLength(s), 20000);
    ibsStats st;
    ibsGetStats(s, &st);
    assert_int_equal(st.bitmapBlocks, 0);
    if (ibsAllocSize(s) >= last || st.blockBytes > 2 * (st.dataBytes + 8 * st.blocks))
        fail_msg("%zu bytes (%zu before): %zu blocks of %zu data bytes in %zu", ibsAllocSize(s), last, st.blocks,
                 st.dataBytes, st.blockBytes);
    ibsFree(s);
}

/* Defrag moving every allocation: the shell and the blocks at once, then
 * in steps with the set changing between them; contents and bytes kept. */
static void test_ibset_defrag(void **state) {
    (void)state;
    ibset *s = ibsCreate();
    ibdModel md = {0};
    uint64_t x = 6;
    for (int64_t i = 0; i < 50000; i++) ibdPush(&md, i);
    for (int i = 0; i < 50000; i++) ibdPush(&md, (int64_t)(rng(&x) % 100000000) + 100000);
    for (int i = 0; i < 30000; i++) ibdPush(&md, (int64_t)rng(&x));
    ibdSortUnique(&md);
    for (size_t i = 0; i < md.n; i++) ibsInsert(s, md.v[i]);
    check(s);
    ibsStats st;
    ibsGetStats(s, &st);
    assert_true(st.pages > 2);
    size_t bytes = ibsAllocSize(s);

    movedCalls = 0;
    ibset *moved = ibsDefragShell(s, countingMove);
    assert_non_null(moved);
    s = moved;
    check(s);
    uint32_t at = 0;
    long steps = 0;
    do {
        at = ibsDefragBlocks(s, at, 1, countingMove);
        steps++;
        assert_true(steps <= (long)st.pages);
    } while (at);
    assert_int_equal(steps, st.pages);
    /* Each block, each page, the struct and the three arrays of the top. */
    assert_true(movedCalls >= st.blocks + st.pages + 1);
    assert_int_equal(ibsAllocSize(s), bytes);
    expectEqual(s, &md);

    /* Nothing moves: nothing changes. */
    movedCalls = 0;
    assert_null(ibsDefragShell(s, noMove));
    assert_int_equal(ibsDefragBlocks(s, 0, UINT32_MAX, noMove), 0);
    assert_true(movedCalls >= st.blocks);
    expectEqual(s, &md);

    /* In steps, inserts and deletes between them: pages split and merge
     * under the walk by page. */
    moved = ibsDefragShell(s, moveAlloc);
    if (moved) s = moved;
    at = 0;
    steps = 0;
    do {
        at = ibsDefragBlocks(s, at, 1, moveAlloc);
        for (int k = 0; k < 40; k++) {
            int64_t v = k % 2 ? (int64_t)rng(&x) : (int64_t)(rng(&x) % 2000000);
            size_t i = ibdLowerBound(&md, v);
            int had = i < md.n && md.v[i] == v;
            assert_int_equal(ibsInsert(s, v), !had);
            if (!had) ibdInsertAt(&md, i, v);
        }
        for (int k = 0; k < 80 && md.n; k++) {
            size_t i = rng(&x) % md.n;
            assert_int_equal(ibsDelete(s, md.v[i]), 1);
            ibdRemoveRange(&md, i, 1);
        }
        check(s);
        steps++;
        assert_true(steps < 100000);
    } while (at);
    expectEqual(s, &md);

    /* Down to three members (the first, one in the middle, the last),
     * then defragged again. */
    int64_t keep[3] = {md.v[0], md.v[md.n / 2], md.v[md.n - 1]};
    for (size_t i = 0; i < md.n; i++)
        if (md.v[i] != keep[0] && md.v[i] != keep[1] && md.v[i] != keep[2]) assert_int_equal(ibsDelete(s, md.v[i]), 1);
    memcpy(md.v, keep, sizeof(keep));
    md.n = 3;
    moved = ibsDefragShell(s, moveAlloc);
    if (moved) s = moved;
    assert_int_equal(ibsDefragBlocks(s, 0, 100, moveAlloc), 0);
    /* From a page past the end (the set shrank under a defrag in steps). */
    assert_int_equal(ibsDefragBlocks(s, 1000, 1, moveAlloc), 0);
    expectEqual(s, &md);
    ibdModelFree(&md);
    ibsFree(s);
}

/* Dismiss hands over allocations of the size asked for or more, each once,
 * each an allocation of the set. */
static size_t dismissMin, dismissCalls, dismissBytes;
static void *dismissSeen[65536];

static void logDismiss(void *ptr, size_t size) {
    assert_non_null(ptr);
    if (size < dismissMin) fail_msg("dismissed %zu bytes, asked for %zu or more", size, dismissMin);
    assert_true(size <= zmalloc_size(ptr));
    for (size_t i = 0; i < dismissCalls && i < COUNT(dismissSeen); i++) assert_ptr_not_equal(dismissSeen[i], ptr);
    if (dismissCalls < COUNT(dismissSeen)) dismissSeen[dismissCalls] = ptr;
    dismissBytes += size;
    dismissCalls++;
}

static void test_ibset_dismiss(void **state) {
    (void)state;
    ibset *s = ibsCreate();
    uint64_t x = 10;
    for (int64_t i = 0; i < 100000; i++) ibsInsert(s, i);
    for (int i = 0; i < 100000; i++) ibsInsert(s, (int64_t)rng(&x));
    ibsStats st;
    ibsGetStats(s, &st);
    assert_true(st.blocks + st.pages + 4 < COUNT(dismissSeen));
    const size_t mins[] = {0, 1, 64, 512, 1024, 4096, 1 << 20};
    for (size_t k = 0; k < COUNT(mins); k++) {
        dismissMin = mins[k];
        dismissCalls = dismissBytes = 0;
        ibsDismiss(s, dismissMin, logDismiss);
        assert_true(dismissBytes <= ibsAllocSize(s));
        /* Each block and page counts when min is at most a block's size. */
        if (dismissMin <= 1) assert_true(dismissCalls >= st.blocks + st.pages);
        if (dismissMin >= (1 << 20)) assert_int_equal(dismissCalls, 0);
    }
    check(s);
    assert_int_equal(ibsLength(s), 200000);
    ibsFree(s);

    s = ibsCreate();
    dismissMin = 1;
    dismissCalls = dismissBytes = 0;
    ibsDismiss(s, 1, logDismiss);
    assert_true(dismissBytes <= ibsAllocSize(s));
    ibsFree(s);
}

/* The first word tells an ibset from a big set of strings (hpset.c)
 * behind the same object encoding. */
static void test_ibset_is_set(void **state) {
    (void)state;
    ibset *s = ibsCreate();
    hpset *t = hpsCreate(0);
    assert_true(ibsIsSet(s));
    assert_false(ibsIsSet(t));
    assert_false(hpsIsSet(s));
    ibsInsert(s, 1);
    hpsInsert(t, (const unsigned char *)"1", 1);
    assert_true(ibsIsSet(s));
    assert_false(ibsIsSet(t));
    assert_false(hpsIsSet(s));
    ibset *moved = ibsDefragShell(s, moveAlloc);
    if (moved) s = moved;
    assert_true(ibsIsSet(s));
    hpsFree(t);
    ibsFree(s);
}

/* The read-ahead reads and changes nothing, on an empty set, past either
 * end and for every edge value, in sets of one block and of many pages. */
static void test_ibset_prefetch(void **state) {
    (void)state;
    ibset *s = ibsCreate();
    for (size_t i = 0; i < COUNT(edges); i++) ibsPrefetch(s, edges[i]);
    assert_int_equal(ibsLength(s), 0);
    for (int64_t v = 0; v < 200000; v++) {
        ibsInsert(s, v * 1009 - 5000000);
        if (v % 997 == 0)
            for (size_t i = 0; i < COUNT(edges); i++) ibsPrefetch(s, edges[i]);
    }
    size_t bytes = ibsAllocSize(s);
    for (int64_t v = -6000000; v < 300000000; v += 4099) ibsPrefetch(s, v);
    for (size_t i = 0; i < COUNT(edges); i++) ibsPrefetch(s, edges[i]);
    assert_int_equal(ibsLength(s), 200000);
    assert_int_equal(ibsAllocSize(s), bytes);
    check(s);
    ibsFree(s);
}

/* A block made small by deletes next to a full bitmap block: merging the
 * two must not decode more members than a block holds (the scratch of
 * the merge) when they do not fit together. */
static void test_ibset_small_block_next_to_full_bitmap(void **state) {
    (void)state;
    for (int smallFirst = 0; smallFirst < 2; smallFirst++) {
        ibset *s = ibsCreate();
        ibdModel md = {0};
        /* Two (or more) full bitmaps of consecutive values. */
        for (int64_t i = 0; i < 3 * 4032; i++) {
            assert_int_equal(ibsAppend(s, i), 1);
            ibdPush(&md, i);
        }
        ibsStats st;
        ibsGetStats(s, &st);
        assert_true(st.bitmapBlocks >= 3);
        check(s);
        /* The first block (or the second) down to a few hundred members,
         * from its top: its bitmap shrinks word by word. */
        int64_t lo = smallFirst ? 0 : 4032;
        for (int64_t v = lo + 4031; v >= lo + 700; v--) {
            assert_int_equal(ibsDelete(s, v), 1);
            ibdRemoveRange(&md, ibdLowerBound(&md, v), 1);
            if (v % 256 == 0) check(s);
        }
        expectEqual(s, &md);
        ibdModelFree(&md);
        ibsFree(s);
    }
}

/* --- Memory --- */

static void test_ibset_memory_consecutive(void **state) {
    (void)state;
    const int64_t n = 1000000;
    const int64_t start = 7000000000LL;
    ibset *ins = ibsCreate(), *app = ibsCreate(), *rnd = ibsCreate();
    int64_t *order = malloc(n * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++) {
        assert_int_equal(ibsInsert(ins, start + i), 1);
        assert_int_equal(ibsAppend(app, start + i), 1);
        order[i] = start + i;
    }
    shuffle(order, (size_t)n, 1);
    for (int64_t i = 0; i < n; i++) assert_int_equal(ibsInsert(rnd, order[i]), 1);
    free(order);
    check(ins);
    check(app);
    check(rnd);
    double bi = (double)ibsAllocSize(ins) / n, ba = (double)ibsAllocSize(app) / n, br = (double)ibsAllocSize(rnd) / n;
    print_message("1M consecutive integers: %.3f bytes/member inserted ascending (%zu bytes), %.3f appended, "
                  "%.3f inserted in random order\n",
                  bi, ibsAllocSize(ins), ba, br);
    ibsFree(ins);
    ibsFree(app);
    ibsFree(rnd);
    if (bi > 1.0 || ba > 1.0 || br > 1.0) fail_msg("over 1 byte a member: %.3f, %.3f, %.3f", bi, ba, br);
}

/* Consecutive integers inserted descending into the gap above a full
 * block (a range filled from its top down, above members loaded before):
 * as dense as ascending ones, a bit a member and the headers. */
static void test_ibset_memory_descending_into_gap(void **state) {
    (void)state;
    const int64_t n = 100000;
    ibset *desc = ibsCreate(), *asc = ibsCreate();
    for (int64_t i = 0; i < 4032; i++) {
        assert_int_equal(ibsAppend(desc, i), 1);
        assert_int_equal(ibsAppend(asc, i), 1);
    }
    assert_int_equal(ibsAppend(desc, 10 * n), 1);
    assert_int_equal(ibsAppend(asc, 10 * n), 1);
    for (int64_t i = 1; i <= n; i++) {
        assert_int_equal(ibsInsert(desc, 10 * n - i), 1);
        assert_int_equal(ibsInsert(asc, 9 * n + i - 1), 1);
    }
    check(desc);
    check(asc);
    ibdModel md = {0};
    for (int64_t i = 0; i < 4032; i++) ibdPush(&md, i);
    for (int64_t i = 9 * n; i <= 10 * n; i++) ibdPush(&md, i);
    expectEqual(desc, &md);
    expectEqual(asc, &md);
    ibsStats sd, sa;
    ibsGetStats(desc, &sd);
    ibsGetStats(asc, &sa);
    double bd = (double)ibsAllocSize(desc) / md.n, ba = (double)ibsAllocSize(asc) / md.n;
    print_message("%zu integers, %lld of them consecutive: %.3f bytes/member inserted descending into the gap (%zu blocks, "
                  "%zu pages), %.3f ascending (%zu blocks, %zu pages)\n",
                  md.n, (long long)n, bd, sd.blocks, sd.pages, ba, sa.blocks, sa.pages);
    ibdModelFree(&md);
    ibsFree(desc);
    ibsFree(asc);
    if (bd > 1.0 || ba > 1.0) fail_msg("over 1 byte a member: %.3f descending, %.3f ascending", bd, ba);
}

static void test_ibset_memory_random_below_1e8(void **state) {
    (void)state;
    const size_t n = 1000000;
    ibset *s = ibsCreate(), *app = ibsCreate();
    ibdModel md = {0};
    uint64_t x = 0xC0FFEE;
    while (ibsLength(s) < n) {
        int64_t v = (int64_t)(rng(&x) % 100000000);
        if (ibsInsert(s, v)) ibdPush(&md, v);
    }
    ibdSortUnique(&md);
    assert_int_equal(md.n, n);
    for (size_t i = 0; i < n; i++) assert_int_equal(ibsAppend(app, md.v[i]), 1);
    check(s);
    check(app);
    ibsStats st;
    ibsGetStats(s, &st);
    double b = (double)ibsAllocSize(s) / n, ba = (double)ibsAllocSize(app) / n;
    print_message("1M random integers below 10^8: %.3f bytes/member inserted in random order (%zu bytes: %zu blocks "
                  "of %zu data bytes in %zu, %zu pages), %.3f appended in order\n",
                  b, ibsAllocSize(s), st.blocks, st.dataBytes, st.blockBytes, st.pages, ba);
    ibdModelFree(&md);
    ibsFree(s);
    ibsFree(app);
    if (b > 4.0 || ba > 4.0) fail_msg("over 4 bytes a member: %.3f inserted, %.3f appended", b, ba);
}

/* --- The differential run --- */

/* IBS_DIFF_OPS scales the runs (the sanitizer build runs a fifth). */
static long diffOps(long ops) {
    const char *env = getenv("IBS_DIFF_OPS");
    return env ? atol(env) * ops / 1000000 : ops;
}

/* Ops steered by phase: sizes sweep up to `peak` members and back down
 * (to empty every third time), each phase with its kind of values, so
 * that bitmaps form and dissolve and pages split and merge. */
static void runDiff(uint64_t seed, long ops, long peak, int checkEvery, int fullEvery) {
    static const int dists[] = {IBD_MIXED, IBD_DENSE, IBD_BELOW_E8, IBD_FULL, IBD_CLUSTER, IBD_MIXED, IBD_DENSE};
    ibdState *st = malloc(sizeof(*st));
    ibdInit(st);
    uint8_t bytes[128];
    uint64_t x = seed;
    int grow = 1, phase = 0;
    unsigned long phases = 0;
    long floor = 0;
    clock_t start = clock();
    st->dist = dists[0];
    for (long i = 0; i < ops; i++) {
        for (size_t j = 0; j < sizeof(bytes); j += 8) {
            uint64_t v = rng(&x);
            memcpy(bytes + j, &v, 8);
        }
        if (grow && st->md.n >= (size_t)peak) {
            grow = 0;
            floor = phase % 3 == 2 ? 0 : peak / 50;
        } else if (!grow && st->md.n <= (size_t)floor) {
            grow = 1;
            phase++;
            phases++;
            st->dist = dists[phase % COUNT(dists)];
        }
        /* Steered by a word of its own, so that the bytes the step reads
         * stay independent of the choice. */
        uint64_t steer = rng(&x);
        uint8_t op = bytes[0] % 16;
        if (steer % 256 < 112) { /* inserts and fills while growing; deletes, runs out and pops while shrinking */
            static const uint8_t up[] = {0, 1, 12, 7}, down[] = {4, 5, 15, 15, 11, 13};
            bytes[0] = grow ? up[(steer >> 8) % COUNT(up)] : down[(steer >> 8) % COUNT(down)];
        } else if (grow && (op == 4 || op == 5 || op == 11 || op == 13 || op == 15)) {
            bytes[0] = 0;
        } else if (!grow && (op == 7 || op == 12)) { /* no runs in while shrinking: single inserts only */
            bytes[0] = 15;
        }
        ibdReader r = {bytes, bytes + sizeof(bytes)};
        const char *err = ibdStep(st, &r);
        if (!err && i % checkEvery == checkEvery - 1) err = ibsCheck(st->s);
        if (!err && i % fullEvery == fullEvery - 1) err = ibdFull(st);
        if (err) fail_msg("op %ld (seed %llu): %s", i, (unsigned long long)seed, err);
    }
    const char *err = ibdFull(st);
    if (err) fail_msg("at the end: %s", err);
    print_message("differential: %ld ops in %.1f s, checked every %d: %lu phases, up to %lu members, %zu pages, "
                  "%zu bitmaps, array blocks by width %zu/%zu/%zu/%zu; %lu appended, %lu refused, %lu deleted in "
                  "runs; %lu defrags, %lu dismisses\n",
                  ops, (double)(clock() - start) / CLOCKS_PER_SEC, checkEvery, phases, st->most, st->mostPages,
                  st->mostBitmaps, st->mostWidth[0], st->mostWidth[1], st->mostWidth[2], st->mostWidth[3],
                  st->appended, st->refused, st->bulkDeleted, st->defrags, st->dismissed);
    ibdFree(st);
    free(st);
}

/* A million operations, ibsCheck and the length after each, everything
 * every 2,000: sets of up to 12,000 members, a few pages of wide offsets. */
static void test_ibset_differential_million_ops(void **state) {
    (void)state;
    runDiff(0x9E3779B97F4A7C15ULL, diffOps(1000000), 12000, 1, 2000);
}

/* Bigger sets, checked less often: many pages, pages merging as they empty. */
static void test_ibset_differential_big_sets(void **state) {
    (void)state;
    runDiff(4242, diffOps(150000), 150000, 500, 20000);
}

int main(void) {
    /* IBS_TEST=<pattern> runs the tests whose names match it alone. */
    if (getenv("IBS_TEST")) cmocka_set_test_filter(getenv("IBS_TEST"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ibset_empty),
        cmocka_unit_test(test_ibset_single_values),
        cmocka_unit_test(test_ibset_duplicates),
        cmocka_unit_test(test_ibset_consecutive_bitmaps),
        cmocka_unit_test(test_ibset_random_sparse),
        cmocka_unit_test(test_ibset_whole_range),
        cmocka_unit_test(test_ibset_insert_below_min),
        cmocka_unit_test(test_ibset_append),
        cmocka_unit_test(test_ibset_rank_walk_seek),
        cmocka_unit_test(test_ibset_delete_to_empty_and_regrow),
        cmocka_unit_test(test_ibset_alloc_size),
        cmocka_unit_test(test_ibset_defrag),
        cmocka_unit_test(test_ibset_dismiss),
        cmocka_unit_test(test_ibset_is_set),
        cmocka_unit_test(test_ibset_prefetch),
        cmocka_unit_test(test_ibset_small_block_next_to_full_bitmap),
        cmocka_unit_test(test_ibset_memory_consecutive),
        cmocka_unit_test(test_ibset_memory_descending_into_gap),
        cmocka_unit_test(test_ibset_memory_random_below_1e8),
        cmocka_unit_test(test_ibset_differential_million_ops),
        cmocka_unit_test(test_ibset_differential_big_sets),
    };
    return cmocka_run_group_tests_name("ibset", tests, NULL, NULL);
}
