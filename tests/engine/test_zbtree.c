/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Unit tests of the sorted-set engine (src/zbtree.c, src/zmindex.c): every
 * operation at its edges, the bugs comparable B+ trees shipped with, and a
 * differential run of a million operations against a sorted array.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "zbt_diff.h"
#include "zmindex.h"

/* --- Helpers --- */

static void check(zbt *t) {
    const char *err = zbtCheck(t);
    if (err) fail_msg("consistency check: %s", err);
}

static size_t name(unsigned char *buf, const char *prefix, long i) {
    return (size_t)snprintf((char *)buf, 64, "%s%ld", prefix, i);
}

static void insertOk(zbt *t, double score, const char *m) {
    assert_int_equal(zbtInsert(t, score, (const unsigned char *)m, strlen(m)), ZBT_OK);
}

/* The members of t in order, joined by spaces. */
static char *members(zbt *t, char *buf, size_t size) {
    zbtCursor *c = malloc(sizeof(*c));
    buf[0] = '\0';
    size_t off = 0;
    for (int ok = zbtFirst(t, c); ok; ok = zbtNext(c))
        off += (size_t)snprintf(buf + off, size - off, "%s%.*s", off ? " " : "", (int)c->len, c->member);
    free(c);
    return buf;
}

static zbtScoreRange srange(double min, double max, int minex, int maxex) {
    zbtScoreRange r = {min, max, minex, maxex};
    return r;
}

static zbtLexRange lrange(const char *min, const char *max) {
    /* "-" and "+" are the infinities, "(x" exclusive, "[x" inclusive. */
    zbtLexRange r;
    memset(&r, 0, sizeof(r));
    zbtLexBound *b[2] = {&r.min, &r.max};
    const char *s[2] = {min, max};
    for (int i = 0; i < 2; i++) {
        if (!strcmp(s[i], "-")) b[i]->inf = -1;
        else if (!strcmp(s[i], "+")) b[i]->inf = 1;
        else {
            b[i]->ex = s[i][0] == '(';
            b[i]->s = (const unsigned char *)s[i] + 1;
            b[i]->len = strlen(s[i]) - 1;
        }
    }
    return r;
}

/* --- Edges --- */

static void test_empty(void **state) {
    (void)state;
    zbt *t = zbtCreate(0);
    zbtCursor *c = malloc(sizeof(*c));
    double s;
    unsigned long rank;
    zbtScoreRange sr = srange(-INFINITY, INFINITY, 0, 0);
    zbtLexRange lr = lrange("-", "+");
    assert_int_equal(zbtLength(t), 0);
    assert_false(zbtScore(t, (const unsigned char *)"a", 1, &s));
    assert_false(zbtRank(t, (const unsigned char *)"a", 1, 0, &rank));
    assert_false(zbtDelete(t, (const unsigned char *)"a", 1, NULL));
    assert_false(zbtUpdateScore(t, (const unsigned char *)"a", 1, 1.0));
    assert_false(zbtAtRank(t, 0, c));
    assert_false(zbtFirst(t, c));
    assert_false(zbtLast(t, c));
    assert_false(zbtFirstInScoreRange(t, &sr, c));
    assert_false(zbtLastInScoreRange(t, &sr, c));
    assert_false(zbtFirstInLexRange(t, &lr, c));
    assert_int_equal(zbtCountScoreRange(t, &sr), 0);
    assert_int_equal(zbtDeleteRankRange(t, 0, 10), 0);
    assert_int_equal(zbtDeleteScoreRange(t, &sr), 0);
    check(t);
    free(c);
    zbtFree(t);
}

static void test_one_entry(void **state) {
    (void)state;
    zbt *t = zbtCreate(0);
    zbtCursor *c = malloc(sizeof(*c));
    insertOk(t, 1.5, "x");
    assert_int_equal(zbtInsert(t, 2.0, (const unsigned char *)"x", 1), ZBT_ERR_DUP);
    double s = 0;
    assert_true(zbtScore(t, (const unsigned char *)"x", 1, &s));
    assert_true(s == 1.5);
    unsigned long rank = 9;
    assert_true(zbtRank(t, (const unsigned char *)"x", 1, 1, &rank));
    assert_int_equal(rank, 0);
    assert_true(zbtAtRank(t, 0, c));
    assert_false(zbtNext(c));
    assert_true(zbtAtRank(t, 0, c));
    assert_false(zbtPrev(c));
    assert_true(zbtUpdateScore(t, (const unsigned char *)"x", 1, -7.0));
    assert_true(zbtScore(t, (const unsigned char *)"x", 1, &s) && s == -7.0);
    check(t);
    assert_true(zbtDelete(t, (const unsigned char *)"x", 1, &s));
    assert_true(s == -7.0);
    assert_int_equal(zbtLength(t), 0);
    check(t);
    insertOk(t, 3.0, "y");
    check(t);
    free(c);
    zbtFree(t);
}

/* Ties order by member bytes (memcmp, then length), as upstream does. */
static void test_equal_scores_order_by_member(void **state) {
    (void)state;
    zbt *t = zbtCreate(0);
    char buf[256];
    const char *in[] = {"b", "a", "ab", "", "B", "aa", "\xff", "a\x01"};
    for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++)
        assert_int_equal(zbtInsert(t, 1.0, (const unsigned char *)in[i], strlen(in[i])), ZBT_OK);
    insertOk(t, 0.5, "z");
    insertOk(t, 2.0, "0");
    assert_string_equal(members(t, buf, sizeof(buf)), "z  B a a\x01 aa ab b \xff 0");
    check(t);
    zbtFree(t);
}

/* A run of one score over many leaves: counts, firsts/lasts and deletes by
 * score and by lex inside the run and across its edges. A B+ tree that
 * located such runs by score alone miscounted them and deleted too much. */
static void test_equal_score_run_across_leaves(void **state) {
    (void)state;
    zbt *t = zbtCreate(0);
    unsigned char m[64];
    for (long i = 0; i < 100; i++) assert_int_equal(zbtInsert(t, 1.0, m, name(m, "lo", i)), ZBT_OK);
    for (long i = 0; i < 3000; i++) assert_int_equal(zbtInsert(t, 5.0, m, name(m, "run:", 10000 + i)), ZBT_OK);
    for (long i = 0; i < 100; i++) assert_int_equal(zbtInsert(t, 9.0, m, name(m, "hi", i)), ZBT_OK);
    check(t);
    zbtScoreRange run = srange(5.0, 5.0, 0, 0), ex = srange(5.0, 9.0, 1, 0), to5 = srange(1.0, 5.0, 1, 0);
    assert_int_equal(zbtCountScoreRange(t, &run), 3000);
    assert_int_equal(zbtCountScoreRange(t, &ex), 100);
    assert_int_equal(zbtCountScoreRange(t, &to5), 3000);
    zbtCursor *c = malloc(sizeof(*c));
    assert_true(zbtFirstInScoreRange(t, &run, c));
    assert_int_equal(zbtCursorRank(c), 100);
    assert_memory_equal(c->member, "run:10000", 9);
    assert_true(zbtLastInScoreRange(t, &run, c));
    assert_int_equal(zbtCursorRank(c), 3099);
    assert_memory_equal(c->member, "run:12999", 9);
    assert_true(zbtNthInScoreRange(t, &run, 2500, 0, c));
    assert_memory_equal(c->member, "run:12500", 9);
    assert_true(zbtNthInScoreRange(t, &run, 2500, 1, c));
    assert_memory_equal(c->member, "run:10499", 9);
    assert_false(zbtNthInScoreRange(t, &run, 3000, 0, c));

    /* Lex ranges inside the run (lex order holds within one score). */
    zbtLexRange mid = lrange("[run:11000", "(run:12000");
    assert_int_equal(zbtCountLexRange(t, &mid), 1000);
    assert_int_equal(zbtDeleteLexRange(t, &mid), 1000);
    check(t);
    assert_int_equal(zbtCountScoreRange(t, &run), 2000);

    /* A score range inside, then across the run's edges. */
    zbtScoreRange all5 = srange(4.0, 6.0, 0, 0);
    assert_int_equal(zbtCountScoreRange(t, &all5), 2000);
    assert_int_equal(zbtDeleteRankRange(t, 150, 1149), 1000);
    check(t);
    assert_int_equal(zbtCountScoreRange(t, &all5), 1000);
    zbtScoreRange edge = srange(1.0, 5.0, 0, 0);
    assert_int_equal(zbtDeleteScoreRange(t, &edge), 1100);
    check(t);
    assert_int_equal(zbtLength(t), 100);
    assert_true(zbtFirst(t, c));
    assert_memory_equal(c->member, "hi0", 3);
    free(c);
    zbtFree(t);
}

static void test_signed_zeros(void **state) {
    (void)state;
    zbt *t = zbtCreate(0);
    insertOk(t, -0.0, "b");
    insertOk(t, 0.0, "a");
    insertOk(t, 0.0, "c");
    double s;
    assert_true(zbtScore(t, (const unsigned char *)"b", 1, &s));
    assert_true(s == 0.0 && signbit(s));
    assert_true(zbtScore(t, (const unsigned char *)"a", 1, &s));
    assert_true(s == 0.0 && !signbit(s));
    char buf[64];
    assert_string_equal(members(t, buf, sizeof(buf)), "a b c"); /* -0.0 == 0.0: by member */
    zbtScoreRange r = srange(-0.0, 0.0, 0, 0);
    assert_int_equal(zbtCountScoreRange(t, &r), 3);
    assert_true(zbtUpdateScore(t, (const unsigned char *)"a", 1, -0.0));
    assert_true(zbtScore(t, (const unsigned char *)"a", 1, &s) && signbit(s));
    check(t);
    zbtFree(t);
}

static void test_infinities_and_odd_doubles(void **state) {
    (void)state;
    zbt *t = zbtCreate(0);
    const double v[] = {INFINITY, -INFINITY, 4.9406564584124654e-324, -4.9406564584124654e-324, 1e308, -1e308,
                        9007199254740993.0, 4294967295.0, 4294967296.0, 0.1, 1.0 / 3.0};
    unsigned char m[64];
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) assert_int_equal(zbtInsert(t, v[i], m, name(m, "v", (long)i)), ZBT_OK);
    check(t);
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        double s;
        assert_true(zbtScore(t, m, name(m, "v", (long)i), &s));
        assert_memory_equal(&s, &v[i], sizeof(double)); /* bit for bit */
    }
    zbtCursor *c = malloc(sizeof(*c));
    assert_true(zbtFirst(t, c));
    assert_true(c->score == -INFINITY);
    assert_true(zbtLast(t, c));
    assert_true(c->score == INFINITY);
    zbtScoreRange all = srange(-INFINITY, INFINITY, 0, 0), open = srange(-INFINITY, INFINITY, 1, 1);
    assert_int_equal(zbtCountScoreRange(t, &all), 11);
    assert_int_equal(zbtCountScoreRange(t, &open), 9);
    free(c);
    zbtFree(t);
}

static void test_nan_refused(void **state) {
    (void)state;
    zbt *t = zbtCreate(0);
    insertOk(t, 1.0, "a");
    assert_int_equal(zbtInsert(t, NAN, (const unsigned char *)"b", 1), ZBT_ERR_NAN);
    assert_int_equal(zbtUpdateScore(t, (const unsigned char *)"a", 1, NAN), ZBT_ERR_NAN);
    assert_int_equal(zbtAppend(t, NAN, (const unsigned char *)"c", 1), ZBT_ERR_NAN);
    /* NaN range bounds select nothing, and delete nothing. */
    zbtScoreRange r1 = srange(NAN, 10.0, 0, 0), r2 = srange(0.0, NAN, 0, 0);
    zbtCursor *c = malloc(sizeof(*c));
    assert_true(zbtScoreRangeEmpty(&r1) && zbtScoreRangeEmpty(&r2));
    assert_false(zbtFirstInScoreRange(t, &r1, c));
    assert_false(zbtLastInScoreRange(t, &r2, c));
    assert_int_equal(zbtCountScoreRange(t, &r1), 0);
    assert_int_equal(zbtDeleteScoreRange(t, &r2), 0);
    assert_int_equal(zbtLength(t), 1);
    check(t);
    free(c);
    zbtFree(t);
}

/* A negative LIMIT offset is outside every range: nothing, not the start. */
static void test_negative_offsets(void **state) {
    (void)state;
    zbt *t = zbtCreate(0);
    unsigned char m[64];
    for (long i = 0; i < 500; i++) zbtInsert(t, (double)i, m, name(m, "n", i));
    zbtScoreRange r = srange(10, 20, 0, 0);
    zbtLexRange lr = lrange("-", "+");
    zbtCursor *c = malloc(sizeof(*c));
    /* A negative offset counts from the other end of the range, as
     * upstream 9.1's skiplist takes LIMIT's offset. */
    assert_true(zbtNthInScoreRange(t, &r, -1, 0, c) && c->score == 20.0);
    assert_true(zbtNthInScoreRange(t, &r, -3, 0, c) && c->score == 18.0);
    assert_true(zbtNthInScoreRange(t, &r, -1, 1, c) && c->score == 10.0);
    assert_true(zbtNthInScoreRange(t, &r, -2, 1, c) && c->score == 11.0);
    assert_true(zbtNthInScoreRange(t, &r, -11, 0, c) && c->score == 10.0);
    assert_false(zbtNthInScoreRange(t, &r, -12, 0, c));
    assert_false(zbtNthInScoreRange(t, &r, -12, 1, c));
    assert_false(zbtNthInScoreRange(t, &r, LONG_MIN, 0, c));
    assert_false(zbtNthInScoreRange(t, &r, LONG_MIN, 1, c));
    assert_false(zbtNthInScoreRange(t, &r, 11, 0, c));
    assert_true(zbtNthInLexRange(t, &lr, -5, 0, c) && zbtCursorRank(c) == 495);
    assert_true(zbtNthInScoreRange(t, &r, 10, 0, c));
    assert_true(c->score == 20.0);
    assert_true(zbtNthInScoreRange(t, &r, 0, 1, c));
    assert_true(c->score == 20.0);
    free(c);
    zbtFree(t);
}

static void test_empty_and_large_members(void **state) {
    (void)state;
    zbt *t = zbtCreate(0);
    size_t sizes[] = {0, 1, 29, 30, 31, 63, 64, 65, 255, 256, 4096, 1 << 20};
    unsigned char *big = malloc(1 << 20);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        memset(big, 'a' + (int)i, sizes[i]);
        assert_int_equal(zbtInsert(t, (double)i, big, sizes[i]), ZBT_OK);
    }
    check(t);
    size_t before = zbtAllocSize(t);
    assert_true(before > (1 << 20) + 4096);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        memset(big, 'a' + (int)i, sizes[i]);
        double s;
        assert_true(zbtScore(t, big, sizes[i], &s));
        assert_true(s == (double)i);
        assert_true(zbtUpdateScore(t, big, sizes[i], 100.0 - (double)i)); /* moves, keeps the member */
    }
    check(t);
    zbtCursor *c = malloc(sizeof(*c));
    assert_true(zbtLast(t, c));
    assert_int_equal(c->len, 0);
    assert_true(zbtFirst(t, c));
    assert_int_equal(c->len, 1 << 20);
    assert_int_equal(zbtDeleteRankRange(t, 0, 100), sizeof(sizes) / sizeof(sizes[0]));
    check(t);
    assert_true(zbtAllocSize(t) < before - (1 << 20));
    free(c);
    free(big);
    zbtFree(t);
}

/* Forwards and backwards over every leaf boundary: each entry once. */
static void test_cursor_crosses_leaves(void **state) {
    (void)state;
    zbt *t = zbtCreate(0);
    unsigned char m[64];
    const long n = 20000;
    for (long i = 0; i < n; i++) zbtInsert(t, (double)(i * 7919 % n), m, name(m, "c", i * 7919 % n));
    check(t);
    zbtCursor *c = malloc(sizeof(*c));
    long i = 0;
    for (int ok = zbtFirst(t, c); ok; ok = zbtNext(c), i++) {
        assert_true(c->score == (double)i);
        assert_int_equal(zbtCursorRank(c), (unsigned long)i);
    }
    assert_int_equal(i, n);
    i = n - 1;
    for (int ok = zbtLast(t, c); ok; ok = zbtPrev(c), i--) assert_true(c->score == (double)i);
    assert_int_equal(i, -1);
    /* Zig-zag at every position. */
    for (long r = 0; r < n; r += 37) {
        assert_true(zbtAtRank(t, (unsigned long)r, c));
        if (zbtNext(c)) {
            assert_true(c->score == (double)(r + 1));
            assert_true(zbtPrev(c));
            assert_true(c->score == (double)r);
        }
        if (zbtPrev(c)) {
            assert_true(c->score == (double)(r - 1));
            assert_true(zbtNext(c));
            assert_true(c->score == (double)r);
        }
    }
    free(c);
    zbtFree(t);
}

/* Grows to four levels and empties again, in random order, checking the
 * invariants (splits, shares and merges at every level) along the way. */
static void test_splits_and_merges_at_every_level(void **state) {
    (void)state;
    zbt *t = zbtCreate(0);
    unsigned char m[80];
    const long n = 300000;
    uint64_t x = 88172645463325252ULL;
    for (long i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t len = name(m, "member-with-a-long-prefix-", (long)(x % 1000000007));
        zbtInsert(t, (double)(x % 1000), m, len);
        if (i % 50000 == 0) check(t);
    }
    check(t);
    unsigned long len = zbtLength(t);
    assert_true(len > n - 100);
    /* Random deletes down to nothing. */
    zbtCursor *c = malloc(sizeof(*c));
    while (zbtLength(t)) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        assert_true(zbtAtRank(t, x % zbtLength(t), c));
        memcpy(m, c->member, c->len);
        assert_true(zbtDelete(t, m, c->len, NULL));
        if (zbtLength(t) % 40000 == 0) check(t);
    }
    check(t);
    free(c);
    zbtFree(t);
}

static void test_delete_everything_by_ranges(void **state) {
    (void)state;
    zbt *t = zbtCreate(0);
    unsigned char m[64];
    for (long i = 0; i < 50000; i++) zbtInsert(t, (double)(i / 10), m, name(m, "d", i));
    check(t);
    assert_int_equal(zbtDeleteRankRange(t, 100, 40099), 40000);
    check(t);
    zbtScoreRange all = srange(-INFINITY, INFINITY, 0, 0);
    assert_int_equal(zbtDeleteScoreRange(t, &all), 10000);
    assert_int_equal(zbtLength(t), 0);
    check(t);
    insertOk(t, 1.0, "again");
    check(t);
    zbtFree(t);
}

/* Sequential inserts fill leaves; random deletes then keep them from going
 * sparse. */
static void test_fill_and_sparse_leaves(void **state) {
    (void)state;
    zbt *t = zbtCreate(0);
    unsigned char m[64];
    const long n = 200000;
    for (long i = 0; i < n; i++) zbtInsert(t, (double)i, m, name(m, "m:", i));
    double full = (double)zbtAllocSize(t) / n;
    for (long i = 0; i < n; i++)
        if (i % 5) zbtDelete(t, m, name(m, "m:", i), NULL);
    check(t);
    double sparse = (double)zbtAllocSize(t) / zbtLength(t);
    /* A fifth left: no leaf below its minimum fill, the index shrank. */
    zbtStats s;
    zbtGetStats(t, &s);
    assert_true(s.payloadUsed * 5 >= s.leaves * (ZBT_LEAF_BYTES - 32) * 2);
    if (ZBT_LEAF_BYTES >= 512) assert_true(sparse < full * 2.5);
    zbtFree(t);
}

/* A queue: the lowest entries popped while 50 producers append after
 * their own last entry (W5's ZPOPMIN + ZADD), and the same from the top
 * with descending producers. The end leaves drain without being merged or
 * evened out; everything else keeps its invariants, and the runs of the
 * producers leave full leaves behind. */
static void test_queue_pops_at_both_ends(void **state) {
    (void)state;
    unsigned char m[64];
    for (int top = 0; top < 2; top++) {
        zbt *t = zbtCreate(0);
        const long n = 20000, streams = 50;
        long next[50];
        for (long i = 0; i < n; i++) {
            name(m, "q", i);
            insertOk(t, (double)(top ? -i : i), (char *)m);
        }
        for (long s = 0; s < streams; s++) next[s] = 0;
        zbtCursor *c = malloc(sizeof(*c));
        for (long op = 0; op < 4 * n; op++) {
            assert_true(top ? zbtLast(t, c) : zbtFirst(t, c));
            unsigned char victim[64];
            size_t vlen = c->len;
            memcpy(victim, c->member, vlen);
            assert_true(zbtDelete(t, victim, vlen, NULL));
            long s = op % streams, k = next[s]++;
            double score = 1e6 * (double)(s + 1) + (double)k;
            size_t len = (size_t)snprintf((char *)m, sizeof(m), "s%ld:%ld", s, k);
            assert_int_equal(zbtInsert(t, top ? -score : score, m, len), ZBT_OK);
            if (op % 1000 == 0) check(t);
        }
        free(c);
        check(t);
        assert_int_equal(zbtLength(t), n);
        zbtStats st;
        zbtGetStats(t, &st);
        /* Every producer goes on at a leaf's end, so the leaves behind
         * them are full (evened out, they were 72-78% full). */
        double fill = (double)st.payloadUsed / (double)(st.leaves * (ZBT_LEAF_BYTES - 35));
        if (fill < 0.9) fail_msg("%s producers left the leaves %.2f full", top ? "descending" : "ascending", fill);
        zbtFree(t);
    }
}

/* Score updates that stay between the neighbours and ones that pass them,
 * up and down, for every entry: so for the first and the last entry of
 * every leaf, where the neighbour is in the next or the previous leaf. */
static void test_updates_at_leaf_edges(void **state) {
    (void)state;
    unsigned char m[64];
    const long n = 600;
    const double steps[] = {1, -1, 9, -9, 10, -10, 11, -11, 25, -25};
    for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
        zbt *t = zbtCreate(0);
        for (long i = 0; i < n; i++) zbtInsert(t, 10.0 * (double)i, m, name(m, "u", 1000 + i));
        for (long i = 0; i < n; i++) {
            size_t len = name(m, "u", 1000 + i);
            double before;
            assert_true(zbtScore(t, m, len, &before));
            assert_int_equal(zbtUpdateScore(t, m, len, before + steps[k]), 1);
            double after;
            assert_true(zbtScore(t, m, len, &after));
            assert_true(after == before + steps[k]);
            check(t);
            assert_int_equal(zbtUpdateScore(t, m, len, before), 1);
        }
        check(t);
        for (long i = 0; i < n; i++) {
            unsigned long rank;
            assert_true(zbtRank(t, m, name(m, "u", 1000 + i), 0, &rank));
            assert_int_equal(rank, i);
        }
        zbtFree(t);
    }
}

static void test_bulk_append_both_ways(void **state) {
    (void)state;
    unsigned char m[64];
    for (int dir = 0; dir < 2; dir++) {
        zbt *t = zbtCreate(100000);
        for (long i = 0; i < 100000; i++) {
            long k = dir ? 99999 - i : i;
            assert_int_equal(zbtAppend(t, (double)k, m, name(m, "m:", k)), ZBT_OK);
        }
        assert_int_equal(zbtAppend(t, 5.0, m, name(m, "x", 0)), ZBT_ERR_ORDER);
        assert_int_equal(zbtAppend(t, dir ? -1.0 : 1e9, m, name(m, "m:", 7)), ZBT_ERR_DUP);
        zbtAppendDone(t);
        check(t);
        unsigned long rank;
        assert_true(zbtRank(t, m, name(m, "m:", 777), 0, &rank));
        assert_int_equal(rank, 777);
        zbtFree(t);
    }
}

static void *moveAlloc(void *p) {
    size_t size = zmalloc_size(p);
    void *q = zmalloc(size);
    memcpy(q, p, size);
    zfree(p);
    return q;
}

/* A big tree moves its leaves into the arena and, shrinking, back out;
 * deletes give the arena's bytes back as they go. Every leaf of an arena
 * takes ZBT_LEAF_BYTES, so the stats tell the two apart. */
static int inArena(zbt *t) {
    zbtStats st;
    zbtGetStats(t, &st);
    return st.leafBytes == st.leaves * ZBT_LEAF_BYTES;
}

static void test_arena_in_and_out(void **state) {
    (void)state;
    zbt *t = zbtCreate(0);
    unsigned char m[64];
    uint64_t rng = 7;
    long n = 0;
    zbtStats st;
    do {
        for (int k = 0; k < 500; k++, n++) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            assert_int_equal(zbtInsert(t, (double)(rng >> 40), m, name(m, "arena-", n)), ZBT_OK);
        }
        zbtGetStats(t, &st);
        if (st.leaves < 500) assert_false(inArena(t));
        check(t);
    } while (st.leaves < 1500);
    assert_true(inArena(t));
    size_t peak = zbtAllocSize(t);

    /* Three quarters go, from everywhere: the free ids are compacted. */
    double s;
    for (long i = 0; i < n; i++) {
        if (i % 4 == 0) continue;
        assert_true(zbtDelete(t, m, name(m, "arena-", i), &s));
        if (i % 997 == 0) check(t);
    }
    check(t);
    assert_true(inArena(t));
    assert_true(zbtAllocSize(t) < peak * 3 / 4);

    /* Below the low mark, the leaves get their own allocations again. */
    for (long i = 0; i < n; i += 4) {
        zbtGetStats(t, &st);
        if (st.leaves < 100) break;
        assert_true(zbtDelete(t, m, name(m, "arena-", i), &s));
    }
    check(t);
    assert_false(inArena(t));
    assert_true(zbtDeleteRankRange(t, 0, zbtLength(t)) > 0);
    check(t);
    zbtFree(t);
}

static void test_defrag_moves_everything(void **state) {
    (void)state;
    zbt *t = zbtCreate(0);
    unsigned char m[200];
    for (long i = 0; i < 30000; i++) {
        size_t len = name(m, "defrag-", i);
        if (i % 100 == 0) {
            memset(m + len, 'x', 100);
            len += 100;
        }
        zbtInsert(t, (double)(i % 300), m, len);
    }
    /* Times ride through the moves, and their block moves too; an
     * out-of-line member's pointer comes before its time. */
    assert_true(zbtSetTime(t, m, name(m, "defrag-", 777), 5000, NULL));
    size_t longLen = name(m, "defrag-", 700);
    memset(m + longLen, 'x', 100);
    longLen += 100;
    assert_true(zbtSetTime(t, m, longLen, 6000, NULL));
    size_t bytes = zbtAllocSize(t);
    zbt *moved = zbtDefrag(t, moveAlloc);
    if (moved) t = moved;
    check(t);
    uint64_t when;
    assert_true(zbtTime(t, m, longLen, &when) && when == 6000);
    assert_true(zbtTime(t, m, name(m, "defrag-", 777), &when) && when == 5000);
    assert_int_equal(zbtEarliest(t), 5000);
    assert_int_equal(zbtAllocSize(t), bytes);
    double s;
    assert_true(zbtScore(t, m, name(m, "defrag-", 12345), &s) && s == 45.0);

    /* In steps, with the set changing between them: leaves split, merge
     * and free their ids under the walk by id. */
    moved = zbtDefragShell(t, moveAlloc);
    if (moved) t = moved;
    check(t);
    long steps = 0, added = 30000;
    uint32_t at = 0;
    do {
        at = zbtDefragLeaves(t, at, 7, moveAlloc);
        for (int k = 0; k < 5; k++, added++) zbtInsert(t, (double)(added % 300), m, name(m, "defrag-", added));
        for (int k = 0; k < 5; k++) zbtDelete(t, m, name(m, "defrag-", steps * 5 + k), &s);
        steps++;
        check(t);
    } while (at);
    assert_true(steps > 100);
    assert_true(zbtScore(t, m, name(m, "defrag-", 12345), &s) && s == 45.0);
    zbtFree(t);
}

/* ZSCAN: every member present throughout is visited exactly once, while
 * the set grows, shrinks and its index resizes between calls. */
typedef struct visits {
    long *count; /* by member number */
    long n;
} visits;

static void countVisit(void *privdata, const unsigned char *m, size_t len, double score) {
    visits *v = privdata;
    (void)score;
    long k;
    char buf[64];
    memcpy(buf, m, len);
    buf[len] = '\0';
    if (sscanf(buf, "s%ld", &k) == 1 && k >= 0 && k < v->n) v->count[k]++;
}

static void test_scan_visits_each_member_once(void **state) {
    (void)state;
    zbt *t = zbtCreate(0);
    unsigned char m[64];
    const long stable = 20000;
    visits v = {calloc(stable, sizeof(long)), stable};
    for (long i = 0; i < stable; i++) zbtInsert(t, (double)(i % 97), m, name(m, "s", i));
    unsigned long long cursor = 0;
    long round = 0, extra = 0;
    do {
        cursor = zbtScan(t, cursor, 25, countVisit, &v);
        /* Churn between calls: new members, deleted ones, moved ones. */
        for (int k = 0; k < 40; k++) zbtInsert(t, (double)k, m, name(m, "x", extra++));
        if (round % 3 == 0)
            for (int k = 0; k < 30; k++) zbtDelete(t, m, name(m, "x", extra - 1 - k * 2), NULL);
        zbtUpdateScore(t, m, name(m, "s", round * 7 % stable), (double)round);
        round++;
    } while (cursor != 0);
    for (long i = 0; i < stable; i++)
        if (v.count[i] != 1) fail_msg("member s%ld visited %ld times", i, v.count[i]);
    assert_true(round > stable / 25 / 2);
    check(t);
    free(v.count);
    zbtFree(t);
}

/* --- The differential run --- */

static void runDiff(uint64_t seed, long ops, int lexMode, int checkEvery) {
    diffState *st = malloc(sizeof(*st));
    diffInit(st);
    diffLexMode = lexMode;
    uint8_t bytes[256];
    uint64_t x = seed;
    for (long i = 0; i < ops; i++) {
        for (size_t j = 0; j < sizeof(bytes); j += 8) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            memcpy(bytes + j, &x, 8);
        }
        /* Grow for a while, then shrink, so sizes sweep up and down. */
        int shrink = (i / 6000) % 2;
        if (!shrink && bytes[1] < 150) bytes[0] = bytes[0] % 3;               /* inserts */
        else if (!shrink && (bytes[0] % 16 == 11 || bytes[0] % 16 == 12)) bytes[0] = 0;
        else if (shrink && bytes[1] < 100) bytes[0] = (uint8_t)(3 + 8 * (bytes[1] % 2)); /* deletes */
        reader r = {bytes, bytes + sizeof(bytes)};
        const char *err = diffStep(st, &r);
        if (!err && (i % checkEvery == 0)) err = zbtCheck(st->t);
        if (!err && (i % 1000 == 0)) err = diffFull(st);
        if (err) fail_msg("op %ld (seed %llu): %s", i, (unsigned long long)seed, err);
    }
    const char *err = diffFull(st);
    if (err) fail_msg("at the end: %s", err);
    diffLexMode = 0;
    diffFree(st);
    free(st);
}

/* Uniform hashes fill every segment of the member index at the same rate.
 * Its rebuilds must not all come in one burst (the W1 stall at 40M and 48M
 * members): the bytes it allocates grow, interval by interval, close to
 * their mean growth. With one full load for all segments the largest
 * interval's growth was 5x the mean; with the spread it is about 2.2x. */
static void test_index_grows_without_bursts(void **state) {
    (void)state;
    const long n = 2000000, intervals = 64;
    zmi *ix = zmiCreate(0);
    uint64_t x = 7;
    size_t last = 0, atQuarter = 0, most = 0;
    for (long i = 1; i <= n; i++) {
        uint64_t z = (x += 0x9E3779B97F4A7C15ULL); /* splitmix64 */
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        zmiInsert(ix, z ^ (z >> 31), (uint32_t)(i / 40 + 1));
        if (i % (n / intervals)) continue;
        size_t bytes = zmiAllocSize(ix);
        if (i == n / 4) atQuarter = bytes;
        if (i > n / 4 && bytes > last && bytes - last > most) most = bytes - last;
        last = bytes;
    }
    assert_null(zmiCheck(ix));
    double mean = (double)(last - atQuarter) / (intervals * 3 / 4);
    if (most > 3 * mean) fail_msg("an interval grew the index by %.2fx the mean", most / mean);
    zmiFree(ix);
}

/* A module's iterator finds its place again by its entry: zbtSeek gives
 * the first entry at or after a key, and the version says when a cursor
 * went stale. */
static void test_seek_and_version(void **state) {
    (void)state;
    zbt *t = zbtCreate(0);
    zbtCursor *c = malloc(sizeof(*c));
    unsigned char m[64];
    assert_false(zbtSeek(t, 0.0, (const unsigned char *)"a", 1, c));
    for (long i = 0; i < 5000; i++) zbtInsert(t, (double)(i / 2), m, name(m, "k", i));
    /* On an entry; between two (same score, member in between); past the
     * last score of a leaf; past the end. */
    assert_true(zbtSeek(t, 100.0, m, name(m, "k", 200), c));
    assert_memory_equal(c->member, "k200", 4);
    assert_true(zbtSeek(t, 100.0, (const unsigned char *)"k2000", 5, c));
    assert_true(c->len == 4 && !memcmp(c->member, "k201", 4) && c->score == 100.0);
    for (long i = 0; i < 2499; i++) {
        assert_true(zbtSeek(t, (double)i + 0.5, (const unsigned char *)"", 0, c));
        assert_true(c->score == (double)i + 1);
        assert_int_equal(zbtCursorRank(c), (unsigned long)(2 * i + 2));
    }
    assert_false(zbtSeek(t, 2499.5, (const unsigned char *)"", 0, c));
    assert_true(zbtSeek(t, -INFINITY, (const unsigned char *)"", 0, c));
    assert_int_equal(zbtCursorRank(c), 0);

    /* Reads keep the version; every write moves it. */
    uint64_t v = zbtVersion(t);
    double s;
    unsigned long rank;
    assert_true(zbtScore(t, m, name(m, "k", 77), &s));
    assert_true(zbtRank(t, m, name(m, "k", 78), 0, &rank));
    assert_true(zbtAtRank(t, 999, c));
    assert_true(zbtVersion(t) == v);
    zbtInsert(t, 7.0, (const unsigned char *)"new", 3);
    assert_true(zbtVersion(t) != v);
    v = zbtVersion(t);
    zbtDelete(t, (const unsigned char *)"new", 3, &s);
    assert_true(zbtVersion(t) != v);
    v = zbtVersion(t);
    zbtUpdateScore(t, m, name(m, "k", 5), 9999.0);
    assert_true(zbtVersion(t) != v);
    check(t);
    free(c);
    zbtFree(t);
}

/* While a fork child shares the pages, a read writes nothing to the tree's
 * struct (the page that would be copied for every tree read), and deletes
 * give no index memory back. */
static void test_reads_write_nothing_while_shared(void **state) {
    (void)state;
    zbt *t = zbtCreate(0);
    zbtCursor *c = malloc(sizeof(*c));
    unsigned char m[64];
    for (long i = 0; i < 100000; i++) zbtInsert(t, (double)(i % 977), m, name(m, "s", i));
    size_t structBytes = zmalloc_size(t);
    unsigned char *before = malloc(structBytes);
    zbtSetPagesShared(1);
    memcpy(before, t, structBytes);
    double s;
    unsigned long rank;
    zbtScoreRange sr = srange(10, 20, 0, 1);
    for (long i = 0; i < 1000; i++) {
        assert_true(zbtScore(t, m, name(m, "s", i * 97), &s));
        assert_true(zbtRank(t, m, name(m, "s", i * 89), i & 1, &rank));
        assert_true(zbtAtRank(t, (unsigned long)i * 50, c));
        assert_true(zbtFirstInScoreRange(t, &sr, c) && zbtNext(c));
        assert_true(zbtSeek(t, (double)(i % 977), m, name(m, "s", i), c));
    }
    assert_memory_equal(before, t, structBytes);

    size_t indexBytes = zmiAllocSize(zbtIndex(t));
    for (long i = 0; i < 90000; i++) zbtDelete(t, m, name(m, "s", i), &s);
    assert_true(zmiAllocSize(zbtIndex(t)) >= indexBytes);
    check(t);
    zbtSetPagesShared(0);
    for (long i = 90000; i < 95000; i++) zbtDelete(t, m, name(m, "s", i), &s);
    assert_true(zmiAllocSize(zbtIndex(t)) < indexBytes / 2);
    check(t);
    free(before);
    free(c);
    zbtFree(t);
}

/* zbtPrefetchMany only reads: over trees of every shape (empty, a lone
 * leaf, an arena, one score for all), with members present and missing,
 * more than it takes, it leaves each tree byte for byte as it was and every
 * lookup as it was. */
static void test_prefetch_many_reads_only(void **state) {
    (void)state;
    zbt *trees[4] = {zbtCreate(0), zbtCreate(0), zbtCreate(0), zbtCreate(0)};
    static unsigned char names[40][64];
    const unsigned char *m[40];
    size_t len[40];
    for (long i = 0; i < 10; i++) zbtInsert(trees[1], (double)i, names[0], name(names[0], "s", i));
    for (long i = 0; i < 200000; i++) zbtInsert(trees[2], (double)(i % 977), names[0], name(names[0], "s", i));
    for (long i = 0; i < 50000; i++) zbtInsert(trees[3], 0.0, names[0], name(names[0], "s", i));
    zbt *t[40];
    for (int i = 0; i < 40; i++) {
        t[i] = trees[i % 4];
        len[i] = name(names[i], "s", (long)i * 7919 % 250000); /* some present, some not */
        m[i] = names[i];
    }
    size_t bytes[4];
    unsigned char *before[4];
    for (int k = 0; k < 4; k++) {
        bytes[k] = zmalloc_size(trees[k]);
        before[k] = malloc(bytes[k]);
        memcpy(before[k], trees[k], bytes[k]);
    }
    zbtPrefetchMany(t, m, len, 40);
    zbtPrefetchMany(t, m, len, 1);
    zbtPrefetchMany(t, m, len, 0);
    for (int k = 0; k < 4; k++) {
        assert_memory_equal(before[k], trees[k], bytes[k]);
        check(trees[k]);
        free(before[k]);
    }
    double s;
    for (int i = 0; i < 40; i++) {
        long n = (long)i * 7919 % 250000, have[4] = {0, 10, 200000, 50000};
        assert_int_equal(zbtScore(t[i], m[i], len[i], &s), n < have[i % 4]);
    }
    for (int k = 0; k < 4; k++) zbtFree(trees[k]);
}

/* A fork child that saved a tree hands back its big allocations. */
typedef struct dismissed {
    size_t bytes, calls;
    void *seen[4096];
} dismissed;

static dismissed dismissLog;

static void logDismiss(void *ptr, size_t size) {
    for (size_t i = 0; i < dismissLog.calls && i < 4096; i++) assert_ptr_not_equal(dismissLog.seen[i], ptr);
    if (dismissLog.calls < 4096) dismissLog.seen[dismissLog.calls] = ptr;
    assert_true(size >= 4096 && size == zmalloc_size(ptr));
    dismissLog.bytes += size;
    dismissLog.calls++;
}

static void test_dismiss_gives_big_allocations(void **state) {
    (void)state;
    zbt *t = zbtCreate(0);
    unsigned char m[64];
    for (long i = 0; i < 500000; i++) zbtInsert(t, (double)i, m, name(m, "d", i));
    memset(&dismissLog, 0, sizeof(dismissLog));
    zbtDismiss(t, 4096, logDismiss);
    /* Arena chunks and index segments: nearly all of the tree. */
    if (dismissLog.bytes < zbtAllocSize(t) * 9 / 10)
        fail_msg("dismissed %zu of %zu bytes", dismissLog.bytes, zbtAllocSize(t));

    /* Past 4,096 leaves the leaf table is blocks behind a directory: free
     * ids are listed across blocks, and the arena gives back its top. */
    zbtStats st;
    zbtGetStats(t, &st);
    assert_true(st.leafIds > 2 * 4096);
    check(t);
    double s;
    for (long i = 0; i < 500000; i += 3) zbtDelete(t, m, name(m, "d", i), &s);
    check(t);
    for (long i = 0; i < 500000; i += 3) zbtInsert(t, (double)i + 0.5, m, name(m, "d", i));
    check(t);
    for (long i = 0; i < 499000; i++) zbtDelete(t, m, name(m, "d", i), &s);
    check(t);
    zbtFree(t);

    /* A small tree has nothing that big. */
    t = zbtCreate(0);
    for (long i = 0; i < 300; i++) zbtInsert(t, (double)i, m, name(m, "d", i));
    memset(&dismissLog, 0, sizeof(dismissLog));
    zbtDismiss(t, 4096, logDismiss);
    assert_int_equal(dismissLog.calls, 0);
    zbtFree(t);
}

/* A fork child about to save a tree hands back its index first: the walk
 * the save makes reads none of it. Handed-back pages read as zeros in the
 * child, which the test does to the segments offered. */
static void zeroDismissed(void *ptr, size_t size) {
    logDismiss(ptr, size);
    memset(ptr, 0, size);
}

static void test_dismiss_index_before_save(void **state) {
    (void)state;
    zbt *t = zbtCreate(0);
    unsigned char m[64];
    const long n = 300000;
    for (long i = 0; i < n; i++) zbtInsert(t, (double)((i * 7919) % n), m, name(m, "x", i));
    zbtStats st;
    zbtGetStats(t, &st);
    memset(&dismissLog, 0, sizeof(dismissLog));
    zbtDismissIndex(t, 4096, zeroDismissed);
    if (dismissLog.bytes < st.indexBytes * 9 / 10)
        fail_msg("dismissed %zu of %zu index bytes", dismissLog.bytes, st.indexBytes);

    /* The save's walk: every entry, greatest first. */
    zbtCursor c;
    long seen = 0;
    double prev = INFINITY;
    for (int more = zbtLast(t, &c); more; more = zbtPrev(&c), seen++) {
        assert_true(c.score <= prev);
        prev = c.score;
    }
    assert_int_equal(seen, n);
    assert_int_equal(zbtLength(t), n);
    /* A lookup finds nothing rather than reading garbage. */
    double s;
    assert_int_equal(zbtScore(t, m, name(m, "x", 12345), &s), 0);

    /* dismissObject after the save offers the rest, reading no zeroed
     * segment for its walk. */
    memset(&dismissLog, 0, sizeof(dismissLog));
    zbtDismiss(t, 4096, logDismiss);
    assert_true(dismissLog.calls > 0);
    zbtFree(t);
}

/* A member of 4 GiB and more is stored and returned whole (its length once
 * took four bytes). It takes 4 GiB of memory and some seconds, so it runs
 * in the plain build only (ZBT_TEST_HUGE=0 skips it). */
static void test_member_past_4gib(void **state) {
    (void)state;
    const char *env = getenv("ZBT_TEST_HUGE");
    if (env && !strcmp(env, "0")) skip();
    size_t len = ((size_t)1 << 32) + 3;
    /* Untouched pages read as zeros without being allocated: only the tree's
     * copy takes memory. */
    unsigned char *big = calloc(1, len);
    assert_non_null(big);
    big[len - 1] = 'z';
    zbt *t = zbtCreate(0);
    unsigned char m[64];
    for (long i = 0; i < 300; i++) zbtInsert(t, (double)i, m, name(m, "h", i));
    assert_int_equal(zbtInsert(t, 150.5, big, len), ZBT_OK);
    double s;
    /* Each pass over the member takes seconds: a lookup, a walk to it, a
     * delete (no consistency check, which hashes every member again). */
    assert_true(zbtScore(t, big, len, &s) && s == 150.5);
    zbtCursor *c = malloc(sizeof(*c));
    assert_true(zbtAtRank(t, 151, c));
    assert_true(c->len == len && c->member[len - 1] == 'z' && c->member[0] == 0);
    assert_true(zbtDelete(t, big, len, &s) && s == 150.5);
    assert_int_equal(zbtLength(t), 300);
    check(t);
    free(c);
    free(big);
    zbtFree(t);
}

/* Times through splits, shares, merges, score moves, range deletes and
 * the arena, then taken out by zbtDue as a clock moves: each due entry
 * once, nothing before its time, the bounds exact after. */
typedef struct dueSeen {
    uint64_t now;
    long n;
    int bad;
} dueSeen;

static void seeDue(void *ctx, const unsigned char *m, size_t len, double score, uint64_t when) {
    dueSeen *d = ctx;
    (void)m, (void)len, (void)score;
    if (!when || when > d->now) d->bad = 1;
    d->n++;
}

static void test_times_through_moves_and_due(void **state) {
    (void)state;
    zbt *t = zbtCreate(0);
    unsigned char m[64];
    const long n = 6000;
    uint64_t x = 11;
    for (long i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        zbtInsert(t, (double)(x % 1000), m, name(m, "t-", i));
    }
    size_t untimed = zbtAllocSize(t);
    zbtStats before, after;
    zbtGetStats(t, &before);
    assert_int_equal(zbtEarliest(t), 0);
    long timed = 0;
    for (long i = 0; i < n; i += 3, timed++) assert_true(zbtSetTime(t, m, name(m, "t-", i), 1000 + i % 500, NULL));
    check(t);
    zbtGetStats(t, &after);
    /* "t-<i>" is 3 to 6 bytes: the length byte and the short time, 5
     * bytes (and a leaf split by them starts with a whole score). */
    assert_true(after.payloadUsed - before.payloadUsed >= (size_t)timed * 5);
    assert_true(after.payloadUsed - before.payloadUsed <= (size_t)timed * 5 + after.leaves * 8);
    assert_true(zbtAllocSize(t) > untimed);
    assert_int_equal(zbtTimedCount(t), timed);
    assert_int_equal(zbtEarliest(t), 1000);
    /* Moves keep the time; a new score a long way off moves the entry. */
    for (long i = 0; i < n; i += 7) zbtUpdateScore(t, m, name(m, "t-", i), (double)((i * 7919) % 1000) + 0.5);
    check(t);
    uint64_t when;
    assert_true(zbtTime(t, m, name(m, "t-", 21), &when) && when == 1021);
    assert_true(zbtTime(t, m, name(m, "t-", 7), &when) && when == 0);
    /* Dropped times, and a range delete, count out. */
    uint64_t old;
    assert_true(zbtSetTime(t, m, name(m, "t-", 3), 0, &old) && old == 1003);
    timed--;
    zbtScoreRange sr = {100, 199, 0, 0};
    zbtCursor *c = malloc(sizeof(*c));
    for (int more = zbtFirstInScoreRange(t, &sr, c); more && c->score <= 199; more = zbtNext(c)) timed -= c->when != 0;
    zbtDeleteScoreRange(t, &sr);
    check(t);
    assert_int_equal(zbtTimedCount(t), timed);
    /* The clock moves: a bounded take, then all that are due. */
    dueSeen d = {.now = 1100};
    assert_int_equal(zbtDue(t, 1100, 10, seeDue, &d), 10);
    check(t);
    for (uint64_t now = 1100; now < 1500 + 37; now += 37) {
        d.now = now;
        zbtDue(t, now, SIZE_MAX, seeDue, &d);
        check(t);
        assert_false(d.bad);
        assert_true(zbtEarliest(t) == 0 || zbtEarliest(t) > now);
        long left = 0;
        for (int more = zbtFirst(t, c); more; more = zbtNext(c)) {
            assert_true(c->when == 0 || c->when > now);
            left += c->when != 0;
        }
        assert_int_equal(zbtTimedCount(t), left);
        assert_int_equal(d.n + left, timed);
    }
    assert_int_equal(zbtTimedCount(t), 0);
    free(c);
    zbtFree(t);
}

/* A time's two forms: short (4 bytes) from the tree's base, long (7)
 * before it or 2^31 ms or more after it; and the base moved up by zbtDue
 * once the earliest time is days past it, every time read back the same. */
static void test_time_forms_and_rebase(void **state) {
    (void)state;
    const uint64_t day = 86400000, t0 = UINT64_C(1800000000000); /* a 2027 clock */
    zbt *t = zbtCreate(0);
    zbtCursor *c = malloc(sizeof(*c));
    unsigned char m[64];
    const long n = 3000;
    for (long i = 0; i < n; i++) zbtInsert(t, (double)i, m, name(m, "f-", i));
    zbtStats s0, s1, s2;
    zbtGetStats(t, &s0);
    /* Times over the next 20 days: all short, 1 + 4 bytes an entry. */
    for (long i = 0; i < n; i++) assert_true(zbtSetTime(t, m, name(m, "f-", i), t0 + (uint64_t)i * (20 * day / n), NULL));
    check(t);
    zbtGetStats(t, &s1);
    assert_true(s1.payloadUsed - s0.payloadUsed <= (size_t)n * 5 + s1.leaves * 8);
    /* A tenth 60 days on and a tenth 2 days before the first: long. */
    for (long i = 0; i < n; i += 5) {
        uint64_t w = i % 10 ? t0 + 60 * day + (uint64_t)i : t0 - 2 * day - (uint64_t)i;
        assert_true(zbtSetTime(t, m, name(m, "f-", i), w, NULL));
    }
    check(t);
    zbtGetStats(t, &s2);
    assert_true(s2.payloadUsed - s1.payloadUsed >= (size_t)(n / 5) * 3);
    /* The clock moves a day at a time; entries go when due, the base
     * moves up after them, and every time left reads back as given. */
    dueSeen d = {0};
    for (uint64_t now = t0; now < t0 + 70 * day; now += day) {
        d.now = now;
        zbtDue(t, now, SIZE_MAX, seeDue, &d);
        check(t);
        assert_false(d.bad);
        for (int more = zbtFirst(t, c); more; more = zbtNext(c)) {
            long i = (long)c->score;
            uint64_t w = i % 5 ? t0 + (uint64_t)i * (20 * day / n)
                               : (i % 10 ? t0 + 60 * day + (uint64_t)i : t0 - 2 * day - (uint64_t)i);
            assert_true(c->when == w && w > now);
        }
        /* New times a week ahead of the clock stay short however far the
         * clock has gone from the first base. */
        if (now >= t0 + 30 * day && now < t0 + 31 * day) {
            zbtGetStats(t, &s1);
            long k = 0;
            for (long i = n; i < n + 500; i++, k++) {
                zbtInsert(t, (double)i, m, name(m, "f-", i));
                assert_true(zbtSetTime(t, m, name(m, "f-", i), now + 7 * day + (uint64_t)i, NULL));
            }
            check(t);
            zbtGetStats(t, &s2);
            /* "f-<i>" is 6 bytes: 1 + 1 (score delta) + 6 + 5 a new entry. */
            assert_true(s2.payloadUsed - s1.payloadUsed <= (size_t)k * 13 + s2.leaves * 8);
            for (long i = n; i < n + 500; i++) zbtDelete(t, m, name(m, "f-", i), NULL);
        }
    }
    assert_int_equal(zbtTimedCount(t), 0);
    free(c);
    zbtFree(t);
}

/* A tree of up to 128 entries has no member index: lookups, updates,
 * deletes and ZSCAN (one call) work without it; the index is built past
 * 128 entries and given back under 64; the small tree costs less. */
static void test_small_tree_without_index(void **state) {
    (void)state;
    zbt *t = zbtCreate(0);
    unsigned char m[64];
    zbtStats st;
    for (long i = 0; i < 128; i++) assert_int_equal(zbtInsert(t, (double)(i * 3 % 101), m, name(m, "s", i)), ZBT_OK);
    check(t);
    zbtGetStats(t, &st);
    assert_int_equal(st.indexBytes, 0);
    size_t small = zbtAllocSize(t);
    for (long i = 0; i < 128; i++) {
        double sc;
        assert_true(zbtScore(t, m, name(m, "s", i), &sc));
        assert_true(sc == (double)(i * 3 % 101));
    }
    assert_false(zbtScore(t, (const unsigned char *)"nobody", 6, &(double){0}));
    assert_true(zbtUpdateScore(t, m, name(m, "s", 5), 1000.5));
    assert_true(zbtSetTime(t, m, name(m, "s", 6), 12345, NULL));
    visits v = {calloc(128, sizeof(long)), 128};
    assert_true(zbtScan(t, 0, 10, countVisit, &v) == 0);
    assert_true(zbtScan(t, 12345, 10, countVisit, &v) == 0); /* an index's cursor */
    for (long i = 0; i < 128; i++) assert_int_equal(v.count[i], 2);
    free(v.count);
    check(t);
    /* Past 128: indexed, and a member costs its slot again. */
    assert_int_equal(zbtInsert(t, 7.0, m, name(m, "s", 128)), ZBT_OK);
    check(t);
    zbtGetStats(t, &st);
    assert_true(st.indexBytes > 0);
    assert_true(zbtAllocSize(t) > small + 64 * 8);
    /* Down to 64: still indexed; under it, not. */
    for (long i = 0; i < 65; i++) assert_true(zbtDelete(t, m, name(m, "s", i), NULL));
    check(t);
    zbtGetStats(t, &st);
    assert_true(st.indexBytes > 0 && zbtLength(t) == 64);
    assert_true(zbtDelete(t, m, name(m, "s", 65), NULL));
    check(t);
    zbtGetStats(t, &st);
    assert_int_equal(st.indexBytes, 0);
    for (long i = 66; i <= 128; i++) assert_true(zbtScore(t, m, name(m, "s", i), &(double){0}));
    zbtFree(t);
}

/* ZBT_DIFF_OPS scales the run down (the sanitizer build runs a fifth). */
static long diffOps(long ops) {
    const char *env = getenv("ZBT_DIFF_OPS");
    return env ? atol(env) * ops / 1000000 : ops;
}

static void test_differential_million_ops(void **state) {
    (void)state;
    runDiff(0x9E3779B97F4A7C15ULL, diffOps(1000000), 0, 1);
}

static void test_differential_lex(void **state) {
    (void)state;
    runDiff(12345, diffOps(200000), 1, 1);
}

int main(void) {
    uint8_t seed[16] = "zbtree unit test";
    zbtSetHashSeed(seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_one_entry),
        cmocka_unit_test(test_equal_scores_order_by_member),
        cmocka_unit_test(test_equal_score_run_across_leaves),
        cmocka_unit_test(test_signed_zeros),
        cmocka_unit_test(test_infinities_and_odd_doubles),
        cmocka_unit_test(test_nan_refused),
        cmocka_unit_test(test_negative_offsets),
        cmocka_unit_test(test_empty_and_large_members),
        cmocka_unit_test(test_cursor_crosses_leaves),
        cmocka_unit_test(test_splits_and_merges_at_every_level),
        cmocka_unit_test(test_delete_everything_by_ranges),
        cmocka_unit_test(test_fill_and_sparse_leaves),
        cmocka_unit_test(test_queue_pops_at_both_ends),
        cmocka_unit_test(test_updates_at_leaf_edges),
        cmocka_unit_test(test_bulk_append_both_ways),
        cmocka_unit_test(test_arena_in_and_out),
        cmocka_unit_test(test_defrag_moves_everything),
        cmocka_unit_test(test_scan_visits_each_member_once),
        cmocka_unit_test(test_index_grows_without_bursts),
        cmocka_unit_test(test_seek_and_version),
        cmocka_unit_test(test_reads_write_nothing_while_shared),
        cmocka_unit_test(test_prefetch_many_reads_only),
        cmocka_unit_test(test_dismiss_gives_big_allocations),
        cmocka_unit_test(test_dismiss_index_before_save),
        cmocka_unit_test(test_member_past_4gib),
        cmocka_unit_test(test_times_through_moves_and_due),
        cmocka_unit_test(test_time_forms_and_rebase),
        cmocka_unit_test(test_small_tree_without_index),
        cmocka_unit_test(test_differential_million_ops),
        cmocka_unit_test(test_differential_lex),
    };
    return cmocka_run_group_tests_name("zbtree", tests, NULL, NULL);
}
