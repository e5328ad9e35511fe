/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Unit tests of keyed trees (zbtCreateKeyed: the members of a big set, in
 * the order of (key, member), where a member's key is the top ZBT_KEY_BITS
 * of its seeded hash): every operation a set uses at its edges, members
 * that share a key, appends in key order, SSCAN's guarantee through growth
 * and shrinking, memory, defrag and dismiss, deep trees, and a differential
 * run of a million operations against a sorted array (zbtset_diff.h).
 *
 * Built like test_zbtree.c: with the server's node sizes, with small nodes
 * (deep trees from a few hundred members) and under the sanitizers.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "zbtset_diff.h"

/* --- Helpers --- */

static void check(zbt *t) {
    const char *err = zbtCheck(t);
    if (err) fail_msg("consistency check: %s", err);
}

static size_t name(unsigned char *buf, const char *prefix, long i) {
    return (size_t)snprintf((char *)buf, 64, "%s%ld", prefix, i);
}

/* Member i of a set whose members have many lengths, out of line too:
 * "<prefix><i>" padded to one of them. */
static const size_t mixedLens[] = {0, 3, 8, 29, 30, 31, 63, 64, 65, 100, 255};

static size_t mixed(unsigned char *buf, const char *prefix, long i) {
    size_t n = name(buf, prefix, i), len = mixedLens[(size_t)i % (sizeof(mixedLens) / sizeof(mixedLens[0]))];
    for (size_t j = n; j < len; j++) buf[j] = (unsigned char)('a' + (i + (long)j) % 26);
    return len > n ? len : n;
}

static uint64_t rng(uint64_t *x) {
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

static const unsigned char *S(const char *s) {
    return (const unsigned char *)s;
}

/* The entries of t walked from the first, each after the one before in the
 * order of (key, member), each with its member's key, each at its rank;
 * and the same backwards. Returns the count. */
static unsigned long walkInOrder(zbt *t) {
    zbtCursor *c = malloc(sizeof(*c));
    unsigned char *last = NULL;
    size_t lastLen = 0;
    double lastKey = -1;
    unsigned long n = 0;
    for (int ok = zbtFirst(t, c); ok; ok = zbtNext(c), n++) {
        assert_true(c->score == zsKey(c->member, c->len));
        if (n) assert_true(zsCmp(lastKey, last, lastLen, c->score, c->member, c->len) < 0);
        assert_int_equal(zbtCursorRank(c), n);
        last = realloc(last, c->len + 1);
        memcpy(last, c->member, c->len);
        lastLen = c->len;
        lastKey = c->score;
    }
    free(last);
    assert_int_equal(n, zbtLength(t));
    unsigned long back = 0;
    for (int ok = zbtLast(t, c); ok; ok = zbtPrev(c), back++) assert_int_equal(zbtCursorRank(c), n - 1 - back);
    assert_int_equal(back, n);
    free(c);
    return n;
}

static void *moveAlloc(void *p) {
    size_t size = zmalloc_size(p);
    void *q = zmalloc(size);
    memcpy(q, p, size);
    zfree(p);
    return q;
}

/* --- Edges --- */

static void test_keyed_empty(void **state) {
    (void)state;
    zbt *t = zbtCreateKeyed(), *plain = zbtCreate(0);
    assert_true(zbtIsKeyed(t));
    assert_false(zbtIsKeyed(plain));
    assert_null(zbtIndex(t));
    zbtCursor *c = malloc(sizeof(*c));
    double s;
    unsigned long rank;
    zbtMiss miss;
    assert_int_equal(zbtLength(t), 0);
    assert_false(zbtScore(t, S("a"), 1, &s));
    assert_false(zbtScoreOrMiss(t, S("a"), 1, &s, &miss));
    assert_false(zbtFind(t, S("a"), 1, c));
    assert_false(zbtRank(t, S("a"), 1, 0, &rank));
    assert_false(zbtDelete(t, S("a"), 1, NULL));
    assert_false(zbtDelete(t, S(""), 0, NULL));
    assert_false(zbtAtRank(t, 0, c));
    assert_false(zbtFirst(t, c));
    assert_false(zbtLast(t, c));
    assert_false(zbtSeek(t, 0.0, S(""), 0, c));
    assert_false(zbtSeek(t, -INFINITY, S(""), 0, c));
    assert_int_equal(zbtDeleteRankRange(t, 0, 10), 0);
    zsState st; /* for zsBatchAdd, which collects what a scan returns */
    memset(&st, 0, sizeof(st));
    assert_int_equal(zbtScan(t, 0, 10, zsBatchAdd, &st), 0);
    assert_int_equal(st.nbatch, 0);
    assert_true(zbtAllocSize(t) > 0);
    /* A keyed tree has no member index: it is smaller from the start. */
    assert_true(zbtAllocSize(t) < zbtAllocSize(plain));
    check(t);
    free(st.batch);
    free(c);
    zbtFree(plain);
    zbtFree(t);
}

/* The engine sets an entry's score to its member's key, whatever score the
 * caller gives; a member is there once. */
static void test_keyed_one_member_score_is_key(void **state) {
    (void)state;
    zbt *t = zbtCreateKeyed();
    zbtCursor *c = malloc(sizeof(*c));
    double key = zbtMemberKey(S("x"), 1), s = 0;
    assert_true(key == zsKey(S("x"), 1));
    assert_true(key >= 0 && key < (double)(1ULL << ZBT_KEY_BITS) && key == floor(key));
    assert_int_equal(zbtInsert(t, 123.5, S("x"), 1), ZBT_OK);
    assert_int_equal(zbtInsert(t, key, S("x"), 1), ZBT_ERR_DUP);
    assert_int_equal(zbtInsert(t, -INFINITY, S("x"), 1), ZBT_ERR_DUP);
    assert_true(zbtScore(t, S("x"), 1, &s) && s == key);
    unsigned long rank = 9;
    assert_true(zbtRank(t, S("x"), 1, 0, &rank) && rank == 0);
    assert_true(zbtRank(t, S("x"), 1, 1, &rank) && rank == 0);
    assert_true(zbtFind(t, S("x"), 1, c));
    assert_true(c->score == key && c->len == 1 && c->member[0] == 'x');
    assert_false(zbtNext(c));
    assert_true(zbtAtRank(t, 0, c));
    assert_false(zbtPrev(c));
    check(t);
    assert_true(zbtDelete(t, S("x"), 1, &s) && s == key);
    assert_int_equal(zbtLength(t), 0);
    check(t);
    /* Any score, the same key: infinities, -0.0, huge ones. */
    const double args[] = {INFINITY, -INFINITY, -0.0, 1e308, -1e-308, 4294967296.0};
    for (size_t i = 0; i < sizeof(args) / sizeof(args[0]); i++) {
        unsigned char m[64];
        size_t len = name(m, "arg", (long)i);
        assert_int_equal(zbtInsert(t, args[i], m, len), ZBT_OK);
        assert_true(zbtScore(t, m, len, &s) && s == zsKey(m, len));
    }
    check(t);
    free(c);
    zbtFree(t);
}

/* Members of every length, the empty one and out-of-line ones included:
 * found, walked to, deleted, their bytes given back. */
static void test_keyed_member_lengths(void **state) {
    (void)state;
    zbt *t = zbtCreateKeyed();
    zbtCursor *c = malloc(sizeof(*c));
    const size_t sizes[] = {0, 1, 2, 7, 8, 9, 29, 30, 31, 63, 64, 65, 66, 100, 255, 256, 4096, 65536, 1 << 20};
    const size_t n = sizeof(sizes) / sizeof(sizes[0]);
    unsigned char *big = malloc(1 << 20);
    unsigned char m[64];
    for (long i = 0; i < 300; i++) assert_int_equal(zbtInsert(t, 0.0, m, name(m, "pad", i)), ZBT_OK);
    size_t empty = zbtAllocSize(t), last = empty;
    for (size_t i = 0; i < n; i++) {
        memset(big, 'a' + (int)i, sizes[i]);
        assert_int_equal(zbtInsert(t, 0.0, big, sizes[i]), ZBT_OK);
        assert_int_equal(zbtInsert(t, 0.0, big, sizes[i]), ZBT_ERR_DUP);
        if (sizes[i] > ZBT_MAX_INLINE) assert_true(zbtAllocSize(t) >= last + sizes[i]);
        last = zbtAllocSize(t);
        check(t);
    }
    assert_true(zbtAllocSize(t) > empty + (1 << 20) + 65536);
    walkInOrder(t);
    for (size_t i = 0; i < n; i++) {
        memset(big, 'a' + (int)i, sizes[i]);
        double s;
        unsigned long rank;
        double key = zsKey(big, sizes[i]);
        assert_true(zbtScore(t, big, sizes[i], &s) && s == key);
        assert_true(zbtFind(t, big, sizes[i], c));
        assert_true(c->len == sizes[i] && (sizes[i] == 0 || !memcmp(c->member, big, sizes[i])));
        assert_true(zbtRank(t, big, sizes[i], 0, &rank) && rank == zbtCursorRank(c));
        assert_true(zbtSeek(t, key, big, sizes[i], c) && zbtCursorRank(c) == rank);
        assert_true(zbtAtRank(t, rank, c) && c->len == sizes[i] && c->score == key);
        /* One byte shorter is another member, not there. */
        if (sizes[i] > 1) assert_false(zbtScore(t, big, sizes[i] - 1, &s));
    }
    for (size_t i = 0; i < n; i++) {
        memset(big, 'a' + (int)i, sizes[i]);
        double s;
        assert_true(zbtDelete(t, big, sizes[i], &s) && s == zsKey(big, sizes[i]));
        assert_false(zbtDelete(t, big, sizes[i], &s));
        check(t);
    }
    assert_int_equal(zbtLength(t), 300);
    assert_true(zbtAllocSize(t) <= empty + 1024);
    free(big);
    free(c);
    zbtFree(t);
}

/* Random inserts come out in the order of (key, member), walked both ways,
 * at every leaf boundary, each entry at the rank zbtRank gives it. */
static void test_keyed_order_find_rank_at_rank(void **state) {
    (void)state;
    zbt *t = zbtCreateKeyed();
    zbtCursor *c = malloc(sizeof(*c));
    zsModel md = {0};
    unsigned char m[ZS_MEMBER_MAX];
    const long n = 30000;
    for (long i = 0; i < n; i++) {
        size_t len = mixed(m, "o", i * 7919 % n);
        assert_int_equal(zbtInsert(t, (double)i, m, len), ZBT_OK);
        zsPush(&md, m, len);
    }
    zsSort(&md);
    check(t);
    assert_int_equal(walkInOrder(t), n);
    for (size_t i = 0; i < md.n; i++) {
        const zsEntry *e = &md.e[i];
        unsigned long rank, rrank;
        assert_true(zbtRank(t, e->m, e->len, 0, &rank));
        assert_int_equal(rank, i);
        assert_true(zbtRank(t, e->m, e->len, 1, &rrank));
        assert_int_equal(rrank, md.n - 1 - i);
        assert_true(zbtFind(t, e->m, e->len, c));
        assert_int_equal(zbtCursorRank(c), i);
        if (i % 7 == 0) {
            assert_true(zbtAtRank(t, i, c));
            assert_true(c->len == e->len && !memcmp(c->member, e->m, e->len) && c->score == e->key);
            /* Zig-zag across the entry's neighbours. */
            if (zbtNext(c)) {
                assert_int_equal(zbtCursorRank(c), i + 1);
                assert_true(zbtPrev(c) && zbtCursorRank(c) == i && c->len == e->len);
            }
            if (zbtPrev(c)) {
                assert_int_equal(zbtCursorRank(c), i - 1);
                assert_true(zbtNext(c) && zbtCursorRank(c) == i && c->len == e->len);
            }
        }
    }
    assert_false(zbtAtRank(t, (unsigned long)n, c));
    assert_false(zbtAtRank(t, ULONG_MAX, c));
    zsModelFree(&md);
    free(c);
    zbtFree(t);
}

/* Members whose keys collide: in one key, by member bytes; a lookup of
 * each finds it among the others, inside a leaf and across leaves; seeks
 * land on the run's start, inside it and past it. */
static void test_keyed_colliding_keys(void **state) {
    (void)state;
    const zsGroups *g = zsGetGroups();
    assert_true(g->n >= 180);
    unsigned char m[ZS_MEMBER_MAX], first[ZS_MEMBER_MAX];
    /* The table holds for this seed and key function. */
    for (int i = 0; i < g->n; i++) {
        size_t flen = zsGroupMember(i, 0, first);
        for (uint32_t k = 1; k < g->size[i]; k++) {
            size_t len = zsGroupMember(i, k, m);
            if (zbtMemberKey(m, len) != zbtMemberKey(first, flen))
                fail_msg("group %d: keys differ (regenerate the table with zbtset_collide)", i);
            assert_true(len != flen || memcmp(m, first, len));
        }
    }
    zbt *t = zbtCreateKeyed();
    zbtCursor *c = malloc(sizeof(*c));
    zsModel md = {0};
    /* Among other members, and the groups' members inserted out of order. */
    for (long i = 0; i < 3000; i++) {
        size_t len = mixed(m, "other", i);
        assert_int_equal(zbtInsert(t, 0.0, m, len), ZBT_OK);
        zsInsert(&md, m, len, 0);
    }
    for (uint32_t pass = 0; pass < 3; pass++) {
        for (int i = 0; i < g->n; i++)
            for (uint32_t k = pass; k < g->size[i]; k += 3) {
                size_t len = zsGroupMember(i, g->size[i] - 1 - k, m);
                assert_int_equal(zbtInsert(t, 0.0, m, len), ZBT_OK);
                zsInsert(&md, m, len, 0);
            }
        check(t);
    }
    assert_int_equal(zbtLength(t), md.n);
    walkInOrder(t);
    int across = 0; /* Runs over more than one leaf. */
    for (int i = 0; i < g->n; i++) {
        size_t len = zsGroupMember(i, 0, m);
        double key = zsKey(m, len);
        size_t start = zsLowerBound(&md, key, S(""), 0), end = start;
        while (end < md.n && md.e[end].key == key) end++;
        /* The group, and other members whose keys happen to be the same. */
        assert_true(end - start >= g->size[i]);
        /* The run's start, each member in it, between members, past it. */
        assert_true(zbtSeek(t, key, S(""), 0, c));
        assert_int_equal(zbtCursorRank(c), start);
        zbtCursor *lastOfRun = malloc(sizeof(*lastOfRun));
        assert_true(zbtAtRank(t, end - 1, lastOfRun));
        across += lastOfRun->leaf != c->leaf;
        free(lastOfRun);
        for (uint32_t k = 0; k < end - start; k++) {
            const zsEntry *e = &md.e[start + k];
            unsigned long rank;
            assert_true(zbtRank(t, e->m, e->len, 0, &rank) && rank == start + k);
            assert_true(zbtSeek(t, key, e->m, e->len, c) && zbtCursorRank(c) == start + k);
            assert_true(c->len == e->len && !memcmp(c->member, e->m, e->len));
            /* Just past the member: its bytes and a zero byte. */
            memcpy(m, e->m, e->len);
            m[e->len] = 0;
            int more = zbtSeek(t, key, m, e->len + 1, c);
            assert_int_equal(more, start + k + 1 < md.n);
            if (more) assert_int_equal(zbtCursorRank(c), start + k + 1);
        }
        int more = zbtSeek(t, key + 0.5, S(""), 0, c);
        assert_int_equal(more, end < md.n);
        if (more) assert_int_equal(zbtCursorRank(c), end);
        assert_true(zbtSeek(t, key - 0.5, S("\xff\xff"), 2, c) && zbtCursorRank(c) == start);
    }
    /* The largest groups take several leaves each. */
    assert_true(across >= 8);
    /* Out of the middle of each run, then all of it. */
    for (int i = 0; i < g->n; i++) {
        size_t len = zsGroupMember(i, 1, m);
        double s;
        assert_true(zbtDelete(t, m, len, &s) && s == zsKey(m, len));
        assert_false(zbtScore(t, m, len, &s));
        for (uint32_t k = 0; k < g->size[i]; k++) {
            len = zsGroupMember(i, k, m);
            assert_int_equal(zbtScore(t, m, len, &s), k != 1);
        }
    }
    check(t);
    walkInOrder(t);
    for (int i = 0; i < g->n; i++)
        for (uint32_t k = 0; k < g->size[i]; k++) {
            size_t len = zsGroupMember(i, k, m);
            assert_int_equal(zbtDelete(t, m, len, NULL), k != 1);
        }
    check(t);
    assert_int_equal(zbtLength(t), 3000);
    zsModelFree(&md);
    free(c);
    zbtFree(t);
}

/* zbtKeyedContainsMany answers as zbtScore does, for batches of every size
 * (more than one round of its batch), members present and absent, and
 * members whose keys collide in runs over several leaves. */
static void test_keyed_contains_many(void **state) {
    (void)state;
    const zsGroups *g = zsGetGroups();
    zbt *t = zbtCreateKeyed();
    enum { N = 40000, Q = 600 };
    unsigned char(*buf)[ZS_MEMBER_MAX] = malloc((size_t)Q * ZS_MEMBER_MAX);
    const unsigned char **m = malloc(sizeof(*m) * Q);
    size_t *len = malloc(sizeof(*len) * Q);
    int *found = malloc(sizeof(*found) * Q);
    unsigned char one[ZS_MEMBER_MAX];
    for (long i = 0; i < N; i += 1 + (i % 3 == 0)) {
        size_t l = mixed(one, "m", i);
        assert_int_equal(zbtInsert(t, 0.0, one, l), ZBT_OK);
    }
    for (int i = 0; i < g->n; i += 2)
        for (uint32_t k = 0; k < g->size[i]; k += 1 + (k & 1)) {
            size_t l = zsGroupMember(i, k, one);
            assert_int_equal(zbtInsert(t, 0.0, one, l), ZBT_OK);
        }
    check(t);
    uint64_t x = 88172645463325252ULL;
    for (int round = 0; round < 200; round++) {
        size_t n = round < 40 ? (size_t)round : 1 + rng(&x) % Q;
        for (size_t j = 0; j < n; j++) {
            uint64_t r = rng(&x);
            if (r & 1) {
                len[j] = mixed(buf[j], "m", (long)((r >> 1) % (N + 100)));
            } else {
                int i = (int)((r >> 1) % (uint64_t)g->n);
                len[j] = zsGroupMember(i, (uint32_t)((r >> 20) % g->size[i]), buf[j]);
            }
            m[j] = buf[j];
        }
        zbtKeyedContainsMany(t, m, len, n, found);
        for (size_t j = 0; j < n; j++) {
            double score;
            assert_int_equal(found[j], zbtScore(t, m[j], len[j], &score));
        }
    }
    /* A tree that is one leaf. */
    zbt *small = zbtCreateKeyed();
    assert_int_equal(zbtInsert(small, 0.0, S("a"), 1), ZBT_OK);
    m[0] = S("a"), len[0] = 1, m[1] = S("b"), len[1] = 1;
    zbtKeyedContainsMany(small, m, len, 2, found);
    assert_true(found[0] == 1 && found[1] == 0);
    zbtFree(small);
    free(buf);
    free(m);
    free(len);
    free(found);
    zbtFree(t);
}

/* Seeks at and between keys, and past both ends. */
static void test_keyed_seek(void **state) {
    (void)state;
    zbt *t = zbtCreateKeyed();
    zbtCursor *c = malloc(sizeof(*c));
    zsModel md = {0};
    unsigned char m[ZS_MEMBER_MAX];
    for (long i = 0; i < 20000; i++) {
        size_t len = mixed(m, "k", i);
        assert_int_equal(zbtInsert(t, 0.0, m, len), ZBT_OK);
        zsPush(&md, m, len);
    }
    zsSort(&md);
    assert_true(zbtSeek(t, -INFINITY, S(""), 0, c) && zbtCursorRank(c) == 0);
    assert_true(zbtSeek(t, -1.0, S("zzz"), 3, c) && zbtCursorRank(c) == 0);
    assert_true(zbtSeek(t, 0.0, S(""), 0, c) && zbtCursorRank(c) == 0);
    assert_false(zbtSeek(t, (double)(1ULL << ZBT_KEY_BITS), S(""), 0, c));
    assert_false(zbtSeek(t, 4294967296.0, S(""), 0, c));
    assert_false(zbtSeek(t, INFINITY, S(""), 0, c));
    /* The last entry, and just past it. */
    const zsEntry *last = &md.e[md.n - 1];
    assert_true(zbtSeek(t, last->key, last->m, last->len, c) && zbtCursorRank(c) == md.n - 1);
    memcpy(m, last->m, last->len);
    m[last->len] = 0;
    assert_false(zbtSeek(t, last->key, m, last->len + 1, c));
    for (size_t i = 0; i < md.n; i += 3) {
        const zsEntry *e = &md.e[i];
        assert_true(zbtSeek(t, e->key, e->m, e->len, c));
        assert_int_equal(zbtCursorRank(c), i);
        assert_true(c->score == e->key && c->len == e->len);
        /* Half a key before: the first of this key (keys are whole). */
        assert_true(zbtSeek(t, e->key - 0.5, S(""), 0, c));
        assert_int_equal(zbtCursorRank(c), zsLowerBound(&md, e->key, S(""), 0));
        /* Half a key after: the first of the next key. */
        size_t next = zsLowerBound(&md, e->key + 0.5, S(""), 0);
        int more = zbtSeek(t, e->key + 0.5, S(""), 0, c);
        assert_int_equal(more, next < md.n);
        if (more) assert_int_equal(zbtCursorRank(c), next);
    }
    /* Random keys. */
    uint64_t x = 99;
    for (int i = 0; i < 20000; i++) {
        double key = (double)(rng(&x) % ((1ULL << ZBT_KEY_BITS) + 2));
        size_t at = zsLowerBound(&md, key, S(""), 0);
        int more = zbtSeek(t, key, S(""), 0, c);
        assert_int_equal(more, at < md.n);
        if (more) assert_int_equal(zbtCursorRank(c), at);
    }
    zsModelFree(&md);
    free(c);
    zbtFree(t);
}

/* Loading: members sorted by (key, member) append in O(1) each, both
 * ways; one out of place, or already there, is ZBT_ERR_ORDER (its key is
 * its own, so a duplicate is never past the end), and the caller inserts
 * it. The tree equals one built by inserts, in fewer bytes. */
static void test_keyed_append_in_key_order(void **state) {
    (void)state;
    const long n = 60000;
    zsModel md = {0};
    unsigned char m[ZS_MEMBER_MAX];
    for (long i = 0; i < n; i++) {
        size_t len = mixed(m, "ap", i);
        zsPush(&md, m, len);
    }
    const zsGroups *g = zsGetGroups();
    for (int i = 0; i < g->n; i++)
        for (uint32_t k = 0; k < g->size[i]; k++) {
            size_t len = zsGroupMember(i, k, m);
            zsPush(&md, m, len);
        }
    zsSort(&md);
    /* The same members inserted in random order. */
    zbt *byInsert = zbtCreateKeyed();
    size_t *order = malloc(sizeof(size_t) * md.n);
    uint64_t x = 17;
    for (size_t i = 0; i < md.n; i++) order[i] = i;
    for (size_t i = md.n - 1; i > 0; i--) {
        size_t j = rng(&x) % (i + 1), tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
    for (size_t i = 0; i < md.n; i++) {
        const zsEntry *e = &md.e[order[i]];
        assert_int_equal(zbtInsert(byInsert, 0.0, e->m, e->len), ZBT_OK);
    }
    free(order);
    check(byInsert);
    for (int desc = 0; desc < 2; desc++) {
        zbt *t = zbtCreateKeyed();
        for (size_t i = 0; i < md.n; i++) {
            const zsEntry *e = &md.e[desc ? md.n - 1 - i : i];
            assert_int_equal(zbtAppend(t, desc ? -1.0 * (double)i : (double)i, e->m, e->len), ZBT_OK);
            if (i == md.n / 2) {
                /* Mid-load: a member already there, one in the middle,
                 * one at the other end: all out of order, nothing changed. */
                const zsEntry *mid = &md.e[desc ? md.n - 1 - i / 2 : i / 2];
                const zsEntry *other = &md.e[desc ? md.n - 1 : 0];
                assert_int_equal(zbtAppend(t, 0.0, e->m, e->len), ZBT_ERR_ORDER);
                assert_int_equal(zbtAppend(t, 0.0, mid->m, mid->len), ZBT_ERR_ORDER);
                assert_int_equal(zbtAppend(t, 0.0, other->m, other->len), ZBT_ERR_ORDER);
                assert_int_equal(zbtLength(t), i + 1);
                check(t);
            }
        }
        zbtAppendDone(t);
        check(t);
        assert_int_equal(zbtLength(t), md.n);
        assert_int_equal(walkInOrder(t), md.n);
        /* Appends leave full leaves: fewer bytes than inserts. */
        assert_true(zbtAllocSize(t) < zbtAllocSize(byInsert));
        /* Past the end again: a member before the first entry is at the
         * wrong end once appends went up (and after the last one, once
         * they went down); the caller inserts it. */
        size_t len = name(m, "new", 0);
        double key = zsKey(m, len);
        int ret = zbtAppend(t, 0.0, m, len);
        int atEnd = desc ? key < md.e[0].key : key > md.e[md.n - 1].key;
        assert_int_equal(ret, atEnd ? ZBT_OK : ZBT_ERR_ORDER);
        if (ret == ZBT_ERR_ORDER) assert_int_equal(zbtInsert(t, 0.0, m, len), ZBT_OK);
        zbtAppendDone(t);
        check(t);
        size_t at = zsLowerBound(&md, key, m, len);
        for (size_t i = 0; i < md.n; i += 11) {
            unsigned long rank;
            assert_true(zbtRank(t, md.e[i].m, md.e[i].len, 0, &rank));
            assert_int_equal(rank, i + (i >= at));
        }
        zbtFree(t);
    }
    /* An empty tree takes any member first; a load that meets a member out
     * of order goes on by inserts, appends after it are checked again. */
    zbt *t = zbtCreateKeyed();
    assert_int_equal(zbtAppend(t, 0.0, md.e[100].m, md.e[100].len), ZBT_OK);
    assert_int_equal(zbtAppend(t, 0.0, md.e[100].m, md.e[100].len), ZBT_ERR_ORDER);
    assert_int_equal(zbtAppend(t, 0.0, md.e[50].m, md.e[50].len), ZBT_OK); /* before the first: down */
    assert_int_equal(zbtAppend(t, 0.0, md.e[200].m, md.e[200].len), ZBT_ERR_ORDER);
    assert_int_equal(zbtAppend(t, 0.0, md.e[49].m, md.e[49].len), ZBT_OK);
    assert_int_equal(zbtInsert(t, 0.0, md.e[200].m, md.e[200].len), ZBT_OK);
    zbtAppendDone(t);
    check(t);
    assert_int_equal(walkInOrder(t), 4);
    zbtFree(t);
    zbtFree(byInsert);
    zsModelFree(&md);
}

/* SSCAN's guarantee: a member present for the whole scan is returned, once
 * (the cursor is a key, and a batch ends with all the members of its last
 * key), while members come and go between the calls; through growth past
 * 100,000 members, and shrinking back to a few hundred. */
typedef struct visits {
    long *count; /* By stable member number. */
    long n;
    long calls;
    double minKey; /* Smallest key of the current call. */
} visits;

static void countVisit(void *privdata, const unsigned char *m, size_t len, double score) {
    visits *v = privdata;
    char buf[ZS_MEMBER_MAX];
    long k;
    assert_true(score == zsKey(m, len));
    if (score < v->minKey) v->minKey = score;
    if (len >= sizeof(buf)) return;
    memcpy(buf, m, len);
    buf[len] = '\0';
    if (buf[0] == 's' && sscanf(buf + 1, "%ld", &k) == 1 && k >= 0 && k < v->n) v->count[k]++;
}

/* One scan from cursor 0 to its end, calling churn between the calls.
 * Checks that every stable member was returned once. */
static void scanThrough(zbt *t, size_t count, visits *v, void (*churn)(zbt *t, long call, void *ctx), void *ctx) {
    memset(v->count, 0, sizeof(long) * (size_t)v->n);
    unsigned long long cursor = 0;
    v->calls = 0;
    do {
        v->minKey = INFINITY;
        unsigned long long from = cursor;
        cursor = zbtScan(t, cursor, count, countVisit, v);
        assert_true(v->minKey == INFINITY || v->minKey >= (double)from);
        assert_true(cursor == 0 || cursor > from);
        churn(t, v->calls++, ctx);
    } while (cursor != 0);
    for (long k = 0; k < v->n; k++)
        if (v->count[k] != 1) fail_msg("stable member s%ld returned %ld times", k, v->count[k]);
}

typedef struct churnCtx {
    long added, removed; /* Transient members "x<i>": [removed, added) are in. */
    long target;         /* Growth: add until this many; shrink: remove to it. */
    int grow;
    unsigned long most, least;
} churnCtx;

static void churn(zbt *t, long call, void *p) {
    churnCtx *cx = p;
    unsigned char m[ZS_MEMBER_MAX];
    (void)call;
    if (cx->grow) {
        for (int k = 0; k < 300 && zbtLength(t) < (unsigned long)cx->target; k++, cx->added++)
            assert_int_equal(zbtInsert(t, 0.0, m, mixed(m, "x", cx->added)), ZBT_OK);
        /* A few leave again, and a few colliding groups come. */
        for (int k = 0; k < 20 && cx->removed < cx->added; k++, cx->removed++)
            assert_true(zbtDelete(t, m, mixed(m, "x", cx->removed), NULL));
        int g = (int)(call % zsGetGroups()->n);
        for (uint32_t k = 0; k < zsGetGroups()->size[g]; k++) zbtInsert(t, 0.0, m, zsGroupMember(g, k, m));
    } else {
        for (int k = 0; k < 600 && zbtLength(t) > (unsigned long)cx->target && cx->removed < cx->added;
             k++, cx->removed++)
            assert_true(zbtDelete(t, m, mixed(m, "x", cx->removed), NULL));
        for (int k = 0; k < 5; k++, cx->added++)
            assert_int_equal(zbtInsert(t, 0.0, m, mixed(m, "x", cx->added)), ZBT_OK);
    }
    if (zbtLength(t) > cx->most) cx->most = zbtLength(t);
    if (zbtLength(t) < cx->least) cx->least = zbtLength(t);
    if (call % 64 == 0) check(t);
}

static void test_keyed_scan_guarantee(void **state) {
    (void)state;
    zbt *t = zbtCreateKeyed();
    unsigned char m[ZS_MEMBER_MAX];
    const long stable = 3000;
    visits v = {calloc(stable, sizeof(long)), stable, 0, 0};
    for (long i = 0; i < stable; i++) {
        /* Stable members of many lengths: "s<i>" then padding. */
        size_t len = name(m, "s", i), pad = mixedLens[(size_t)i % 11];
        for (size_t j = len; j < pad; j++) m[j] = '_';
        assert_int_equal(zbtInsert(t, 0.0, m, len > pad ? len : pad), ZBT_OK);
    }
    churnCtx cx = {.target = 130000, .grow = 1, .least = ULONG_MAX};
    /* Growth: 300 in, 20 out a call, 50 returned a call: the set passes
     * 100,000 before the scan reaches its end. */
    scanThrough(t, 50, &v, churn, &cx);
    if (cx.most < 100000) fail_msg("the set grew to %lu members only", cx.most);
    check(t);
    /* Shrinking: back to a few hundred during one scan. */
    cx.grow = 0;
    cx.target = 0;
    cx.least = ULONG_MAX;
    scanThrough(t, 40, &v, churn, &cx);
    if (cx.least > stable + 1000) fail_msg("the set shrank to %lu members only", cx.least);
    check(t);
    /* Counts of 1 (a key at a time) and of more than the set holds. */
    cx.grow = 1;
    cx.target = stable + 2000;
    scanThrough(t, 1, &v, churn, &cx);
    memset(v.count, 0, sizeof(long) * stable);
    assert_int_equal(zbtScan(t, 0, zbtLength(t) + 1, countVisit, &v), 0);
    for (long k = 0; k < stable; k++) assert_int_equal(v.count[k], 1);
    /* A cursor past the last key ends the scan at once. */
    memset(v.count, 0, sizeof(long) * stable);
    v.minKey = INFINITY;
    assert_int_equal(zbtScan(t, 1ULL << ZBT_KEY_BITS, 10, countVisit, &v), 0);
    assert_int_equal(zbtScan(t, 1ULL << 32, 10, countVisit, &v), 0);
    assert_int_equal(zbtScan(t, ULLONG_MAX, 10, countVisit, &v), 0);
    assert_true(v.minKey == INFINITY);
    /* From the last key: its members, then done. */
    zbtCursor *c = malloc(sizeof(*c));
    assert_true(zbtLast(t, c));
    unsigned long long lastKey = (unsigned long long)c->score;
    assert_int_equal(zbtScan(t, lastKey, 1, countVisit, &v), 0);
    assert_true(v.minKey == (double)lastKey);
    free(c);
    free(v.count);
    zbtFree(t);
}

/* zbtCheck after each kind of operation, on a tree that grows and shrinks
 * between big and small. */
static void test_keyed_check_after_each_operation(void **state) {
    (void)state;
    zbt *t = zbtCreateKeyed();
    zbtCursor *c = malloc(sizeof(*c));
    unsigned char m[ZS_MEMBER_MAX];
    uint64_t x = 5;
    for (int round = 0; round < 4; round++) {
        long n = round % 2 ? 2000 : 40000;
        for (long i = 0; i < n; i++) zbtInsert(t, 0.0, m, mixed(m, "r", (long)(rng(&x) % 100000)));
        check(t);
        zbtInsert(t, 0.0, m, mixed(m, "r", 1)); /* a duplicate, maybe */
        check(t);
        for (long i = 0; i < n / 2; i++) zbtDelete(t, m, mixed(m, "r", (long)(rng(&x) % 100000)), NULL);
        check(t);
        zbtDelete(t, S("missing"), 7, NULL);
        check(t);
        for (int k = 0; k < 100 && zbtLength(t); k++) { /* pops through the cursor */
            assert_true(zbtAtRank(t, rng(&x) % zbtLength(t), c));
            size_t len = c->len;
            memcpy(m, c->member, len);
            assert_true(zbtDelete(t, m, len, NULL));
        }
        check(t);
        if (zbtLength(t) > 100) assert_int_equal(zbtDeleteRankRange(t, 10, 59), 50);
        check(t);
        /* Appends past the end: the top entries out, then new members
         * whose keys sort past the last entry now, in order. */
        unsigned long len0 = zbtLength(t);
        assert_int_equal(zbtDeleteRankRange(t, len0 - len0 / 20, len0), len0 / 20);
        check(t);
        assert_true(zbtLast(t, c));
        double lastKey = c->score;
        zsModel tail = {0};
        for (long i = 0; i < 4000; i++) {
            size_t len = mixed(m, "tail", round * 4000L + i);
            if (zsKey(m, len) > lastKey) zsPush(&tail, m, len);
        }
        zsSort(&tail);
        assert_true(tail.n > 20);
        for (size_t i = 0; i < tail.n; i++) assert_int_equal(zbtAppend(t, 0.0, tail.e[i].m, tail.e[i].len), ZBT_OK);
        zsModelFree(&tail);
        check(t); /* with the appends' counts not carried up yet */
        zbtAppendDone(t);
        check(t);
        zbt *moved = zbtDefrag(t, moveAlloc);
        if (moved) t = moved;
        check(t);
        walkInOrder(t);
    }
    assert_true(zbtDeleteRankRange(t, 0, ULONG_MAX - 1) > 0);
    assert_int_equal(zbtLength(t), 0);
    check(t);
    assert_int_equal(zbtInsert(t, 0.0, S("again"), 5), ZBT_OK);
    check(t);
    free(c);
    zbtFree(t);
}

/* Bytes follow the members: they grow with inserts and fall back with
 * deletes; a keyed tree costs no index slot per member. */
static void test_keyed_alloc_size(void **state) {
    (void)state;
    zbt *t = zbtCreateKeyed(), *plain = zbtCreate(0);
    unsigned char m[64];
    const long n = 200000;
    size_t empty = zbtAllocSize(t), mark = empty;
    for (long i = 0; i < n; i++) {
        size_t len = name(m, "m:", i);
        assert_int_equal(zbtInsert(t, 0.0, m, len), ZBT_OK);
        /* The same entries with an index: the key as the score. */
        assert_int_equal(zbtInsert(plain, zsKey(m, len), m, len), ZBT_OK);
        if (i % 20000 == 19999) {
            size_t now = zbtAllocSize(t);
            if (now <= mark) fail_msg("%zu bytes after %ld inserts, %zu before", now, i + 1, mark);
            mark = now;
        }
    }
    check(t);
    check(plain);
    size_t full = zbtAllocSize(t);
    /* "m:<i>" is 3 to 8 bytes: with its header and key delta, under 16
     * bytes a member (24 with small nodes, whose headers weigh more); with
     * an index, 8 bytes and more on top. */
    if (full > (size_t)n * (ZBT_LEAF_BYTES >= 512 ? 16 : 24)) fail_msg("%zu bytes for %ld members", full, n);
    /* Less a keyed tree's hints, and its leaves' looser fill in an arena
     * (ZBT_ARENA_SHARE_FILL_PCT): 8.3 bytes a member, 6.4 with small
     * leaves. */
    assert_true(full + (size_t)n * 6 <= zbtAllocSize(plain));
    /* Deletes give bytes back as they go, and all of them at the end. In
     * an arena (200,000 members are past KEYED_ARENA_ON leaves) a leaf's
     * bytes go back when merges have freed enough ids to give the top ones
     * back, so a step of 20,000 deletes may give none, and leaves merge
     * only below 40% full: half the members keep most of the bytes. */
    mark = full;
    for (long i = 0; i < n; i++) {
        assert_true(zbtDelete(t, m, name(m, "m:", i), NULL));
        if (i % 20000 == 19999) {
            size_t now = zbtAllocSize(t);
            if (now > mark) fail_msg("%zu bytes after %ld deletes, %zu before", now, i + 1, mark);
            if (i == n / 2 - 1 && now * 10 > full * 9) fail_msg("%zu bytes at half the members, %zu full", now, full);
            mark = now;
            check(t);
        }
    }
    check(t);
    /* Leaves and inner nodes all gone (the leaf table: see
     * test_keyed_shrunk_set_gives_back_its_leaf_table). */
    zbtStats st;
    zbtGetStats(t, &st);
    assert_int_equal(st.innerBytes, 0);
    assert_true(st.leaves == 1 && st.leafBytes < 128 && st.arenaChunks == 0);
    zbtFree(plain);
    zbtFree(t);
}

/* Lookups read ahead (zbtPrefetchMany, as a pipeline's are) scan the leaf
 * their hint names, which may have split, merged, moved or gone since: a
 * model checks every answer while the set grows past its arena's start,
 * churns, and shrinks out of it again; a read with the pages shared
 * changes no byte the tree counts. */
static void test_keyed_hints_read_ahead(void **state) {
    (void)state;
    enum { N = 400000 };
    zbt *t = zbtCreateKeyed();
    unsigned char *in = calloc(N, 1);
    static unsigned char names[16][64];
    const unsigned char *m[16];
    size_t len[16];
    zbt *trees[16];
    uint64_t rng = 42;
    long have = 0;
    for (int phase = 0; phase < 3; phase++) {
        /* 0: grow to N; 1: churn; 2: shrink to a few hundred. */
        for (long round = 0; round < 40000; round++) {
            for (int i = 0; i < 16; i++) {
                rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
                long k = (long)((rng >> 33) % N);
                len[i] = name(names[i], "h", k);
                m[i] = names[i];
                trees[i] = t;
            }
            zbtPrefetchMany(trees, m, len, 16);
            for (int i = 0; i < 16; i++) {
                long k = atol((const char *)m[i] + 1);
                double score;
                /* 0 looks up, 1 inserts, 2 deletes. */
                int op = (int)(i % 3);
                if (phase == 0) op = 1;
                if (phase == 2) op = i % 4 ? 2 : 0;
                if (op == 0) {
                    assert_int_equal(zbtScore(t, m[i], len[i], &score), in[k]);
                } else if (op == 1) {
                    assert_int_equal(zbtInsert(t, 0.0, m[i], len[i]), in[k] ? ZBT_ERR_DUP : ZBT_OK);
                    have += !in[k];
                    in[k] = 1;
                } else {
                    assert_int_equal(zbtDelete(t, m[i], len[i], NULL), in[k]);
                    have -= in[k];
                    in[k] = 0;
                }
            }
            if (round % 5000 == 0) check(t);
            if (phase == 0 && have >= N / 2) break;
        }
        check(t);
        assert_int_equal(zbtLength(t), (unsigned long)have);
        if (phase == 0) {
            zbtStats st;
            zbtGetStats(t, &st);
            assert_true(st.arenaChunks > 0);
            size_t bytes = zbtAllocSize(t);
            zbtSetPagesShared(1);
            zbtPrefetchMany(trees, m, len, 16);
            for (int i = 0; i < 16; i++) {
                double score;
                assert_int_equal(zbtScore(t, m[i], len[i], &score), in[atol((const char *)m[i] + 1)]);
            }
            zbtSetPagesShared(0);
            assert_int_equal(zbtAllocSize(t), bytes);
        }
    }
    /* Down to a small set: out of the arena, hints gone (check). */
    for (long k = 0; k < N; k++)
        if (in[k] && have > 300) {
            size_t l = name(names[0], "h", k);
            assert_true(zbtDelete(t, names[0], l, NULL));
            in[k] = 0;
            have--;
        }
    check(t);
    zbtStats st;
    zbtGetStats(t, &st);
    assert_int_equal(st.arenaChunks, 0);
    free(in);
    zbtFree(t);
}

static void test_keyed_defrag(void **state) {
    (void)state;
    zbt *t = zbtCreateKeyed();
    unsigned char m[ZS_MEMBER_MAX];
    const long n = 30000;
    for (long i = 0; i < n; i++) assert_int_equal(zbtInsert(t, 0.0, m, mixed(m, "d", i)), ZBT_OK);
    size_t bytes = zbtAllocSize(t);
    zbt *moved = zbtDefrag(t, moveAlloc);
    if (moved) t = moved;
    check(t);
    assert_true(zbtIsKeyed(t));
    assert_int_equal(zbtAllocSize(t), bytes);
    double s;
    for (long i = 0; i < n; i += 97) {
        size_t len = mixed(m, "d", i);
        assert_true(zbtScore(t, m, len, &s) && s == zsKey(m, len));
    }

    /* In steps, the set changing between them: leaves split, merge and
     * free their ids under the walk by id. */
    moved = zbtDefragShell(t, moveAlloc);
    if (moved) t = moved;
    check(t);
    long steps = 0, added = n;
    uint32_t at = 0;
    do {
        at = zbtDefragLeaves(t, at, 7, moveAlloc);
        for (int k = 0; k < 5; k++, added++) assert_int_equal(zbtInsert(t, 0.0, m, mixed(m, "d", added)), ZBT_OK);
        for (int k = 0; k < 5; k++) assert_true(zbtDelete(t, m, mixed(m, "d", steps * 5 + k), &s));
        steps++;
        if (steps % 16 == 0) check(t);
    } while (at);
    check(t);
    assert_true(steps > 100);
    walkInOrder(t);

    /* A small tree, its struct and root leaf alone. */
    zbt *small = zbtCreateKeyed();
    zbtInsert(small, 0.0, S("a"), 1);
    moved = zbtDefrag(small, moveAlloc);
    if (moved) small = moved;
    check(small);
    assert_true(zbtScore(small, S("a"), 1, &s));
    zbtFree(small);
    zbtFree(t);
}

/* A fork child that saved a set hands back its big allocations: each once,
 * each of the size asked for or more. */
static size_t dismissedBytes, dismissedCalls;
static void *dismissedSeen[4096];

static void logDismiss(void *ptr, size_t size) {
    assert_true(size >= 4096 && size == zmalloc_size(ptr));
    for (size_t i = 0; i < dismissedCalls && i < 4096; i++) assert_ptr_not_equal(dismissedSeen[i], ptr);
    if (dismissedCalls < 4096) dismissedSeen[dismissedCalls] = ptr;
    dismissedBytes += size;
    dismissedCalls++;
}

static void test_keyed_dismiss(void **state) {
    (void)state;
    zbt *t = zbtCreateKeyed();
    unsigned char m[64];
    for (long i = 0; i < 500000; i++) zbtInsert(t, 0.0, m, name(m, "d", i));
    /* A big keyed tree's leaves are in an arena of 32 KiB chunks; its leaf
     * table, past 4,096 leaves blocks of ids, and its hints (four ids a
     * leaf, or two since it last doubled) are big too. */
    zbtStats st;
    zbtGetStats(t, &st);
    assert_true(st.leafIds > 4096 && st.arenaChunks > 0);
    dismissedBytes = dismissedCalls = 0;
    zbtDismiss(t, 4096, logDismiss);
    assert_true(dismissedCalls > st.arenaChunks);
    assert_true(dismissedBytes >= st.leafBytes + st.leafIds * (sizeof(void *) + 2 * sizeof(uint32_t)));
    check(t);
    /* Dismissing changes nothing a later read or write sees (here the
     * pages stay: logDismiss only counts them). */
    double s;
    assert_true(zbtScore(t, m, name(m, "d", 4242), &s));
    for (long i = 0; i < 500000; i += 2) assert_true(zbtDelete(t, m, name(m, "d", i), NULL));
    check(t);
    zbtFree(t);

    /* A small tree has nothing that big. */
    t = zbtCreateKeyed();
    for (long i = 0; i < 300; i++) zbtInsert(t, 0.0, m, name(m, "d", i));
    dismissedBytes = dismissedCalls = 0;
    zbtDismiss(t, 4096, logDismiss);
    assert_int_equal(dismissedCalls, 0);
    zbtFree(t);
}

/* Members of a page and more are allocations of their own (out of line):
 * zbtDismiss promises to call fn on each allocation of `min` bytes or
 * more, and upstream's dismissSetObject hands back the members of a set
 * whose members average a page or more. A set of 64 KiB members (blobs,
 * serialized documents) keeps every page of them in a fork child: nothing
 * is dismissed but the tree's own table. */
static void test_keyed_dismiss_big_members(void **state) {
    (void)state;
    zbt *t = zbtCreateKeyed();
    const size_t size = 65536;
    unsigned char *big = malloc(size);
    for (int i = 0; i < 64; i++) {
        memset(big, 'a' + i % 26, size);
        big[0] = (unsigned char)i;
        assert_int_equal(zbtInsert(t, 0.0, big, size), ZBT_OK);
    }
    dismissedBytes = dismissedCalls = 0;
    zbtDismiss(t, 4096, logDismiss);
    size_t bytes = zbtAllocSize(t);
    free(big);
    zbtFree(t);
    if (dismissedBytes < 64 * size)
        fail_msg("dismissed %zu of %zu bytes (64 members of %zu bytes)", dismissedBytes, bytes, size);
}

/* A set that shrinks gives its memory back (upstream's hashtable shrinks
 * with it). A keyed tree's leaves are never in an arena, whose compaction
 * is the only thing that lowers the ids handed out (nids): after growing
 * to 200,000 members and shrinking to 10, the tree keeps a leaf table of
 * ~5,000 ids, all but one free, 8 bytes each (at 2M members, 459 KB for a
 * set of one member). The table's blocks are never freed in either kind
 * of tree; an indexed tree keeps fewer, its arena having compacted ids. */
static void test_keyed_shrunk_set_gives_back_its_leaf_table(void **state) {
    (void)state;
    zbt *t = zbtCreateKeyed();
    unsigned char m[64];
    const long n = 200000;
    for (long i = 0; i < n; i++) zbtInsert(t, 0.0, m, name(m, "m:", i));
    for (long i = 10; i < n; i++) zbtDelete(t, m, name(m, "m:", i), NULL);
    check(t);
    zbtStats st;
    zbtGetStats(t, &st);
    size_t bytes = zbtAllocSize(t);
    zbtFree(t);
    if (bytes > 4096)
        fail_msg("%zu bytes for %ld members: %zu leaf ids, %zu of them free", bytes, 10L, st.leafIds, st.freeIds);
}

/* Deep trees: with small nodes (the small build) six levels and more,
 * else three; built by inserts and appends, emptied in random order,
 * checked along the way. */
static void test_keyed_deep_tree(void **state) {
    (void)state;
    const int height = ZBT_LEAF_BYTES < 512 ? 5 : 3;
    zbt *t = zbtCreateKeyed();
    zbtCursor *c = malloc(sizeof(*c));
    unsigned char m[ZS_MEMBER_MAX];
    uint64_t x = 31337;
    long n = 0;
    while (zbtHeight(t) < height) {
        for (int k = 0; k < 1000; k++, n++) assert_int_equal(zbtInsert(t, 0.0, m, mixed(m, "deep", n)), ZBT_OK);
        if (n % 50000 == 0) check(t);
    }
    check(t);
    walkInOrder(t);
    while (zbtLength(t)) {
        assert_true(zbtAtRank(t, rng(&x) % zbtLength(t), c));
        size_t len = c->len;
        assert_true(len <= sizeof(m));
        memcpy(m, c->member, len);
        assert_true(zbtDelete(t, m, len, NULL));
        if (zbtLength(t) % 20000 == 0) check(t);
    }
    check(t);
    assert_int_equal(zbtHeight(t), 0);

    /* The same height by appends, then emptied by rank ranges. */
    zsModel md = {0};
    for (long i = 0; i < n; i++) zsPush(&md, m, mixed(m, "deep", i));
    zsSort(&md);
    for (size_t i = 0; i < md.n; i++) assert_int_equal(zbtAppend(t, 0.0, md.e[i].m, md.e[i].len), ZBT_OK);
    zbtAppendDone(t);
    check(t);
    assert_true(zbtHeight(t) >= height - 1);
    while (zbtLength(t)) {
        unsigned long start = rng(&x) % zbtLength(t);
        zbtDeleteRankRange(t, start, start + 500);
        if (rng(&x) % 8 == 0) check(t);
    }
    check(t);
    zsModelFree(&md);
    free(c);
    zbtFree(t);
}

/* A delete given the member's bytes where the tree holds them: SPOP passes
 * an out-of-line member straight from the cursor (the engine must not read
 * it after freeing it); inline ones are copied, as the delete moves them. */
static void test_keyed_delete_from_cursor(void **state) {
    (void)state;
    zbt *t = zbtCreateKeyed();
    zbtCursor *c = malloc(sizeof(*c));
    unsigned char m[ZS_MEMBER_MAX];
    for (long i = 0; i < 5000; i++) assert_int_equal(zbtInsert(t, 0.0, m, mixed(m, "p", i)), ZBT_OK);
    uint64_t x = 3;
    while (zbtLength(t)) {
        assert_true(zbtAtRank(t, rng(&x) % zbtLength(t), c));
        const unsigned char *member = c->member;
        if (c->len <= ZBT_MAX_INLINE) {
            memcpy(m, c->member, c->len);
            member = m;
        }
        double s;
        assert_true(zbtDelete(t, member, c->len, &s));
        if (zbtLength(t) % 500 == 0) check(t);
    }
    check(t);
    free(c);
    zbtFree(t);
}

/* While a fork child shares the pages, reads write nothing to a keyed
 * tree's struct either (no index to speak of: the found-entry cache). */
static void test_keyed_reads_write_nothing_while_shared(void **state) {
    (void)state;
    zbt *t = zbtCreateKeyed();
    zbtCursor *c = malloc(sizeof(*c));
    unsigned char m[64];
    for (long i = 0; i < 50000; i++) zbtInsert(t, 0.0, m, name(m, "s", i));
    zbtGetStats(t, &(zbtStats){0}); /* settles */
    size_t structBytes = zmalloc_size(t);
    unsigned char *before = malloc(structBytes);
    zbtSetPagesShared(1);
    memcpy(before, t, structBytes);
    double s;
    unsigned long rank;
    zsState sc;
    memset(&sc, 0, sizeof(sc));
    unsigned long long cursor = 0;
    for (long i = 0; i < 1000; i++) {
        assert_true(zbtScore(t, m, name(m, "s", i * 37), &s));
        assert_true(zbtRank(t, m, name(m, "s", i * 41), i & 1, &rank));
        assert_true(zbtFind(t, m, name(m, "s", i * 43), c));
        assert_true(zbtAtRank(t, (unsigned long)i * 50, c));
        assert_true(zbtSeek(t, c->score, c->member, c->len, c));
        cursor = zbtScan(t, cursor, 20, zsBatchAdd, &sc);
        zsBatchClear(&sc);
    }
    zbtSetPagesShared(0);
    assert_memory_equal(before, t, structBytes);
    free(sc.batch);
    free(before);
    free(c);
    zbtFree(t);
}

/* --- The differential run --- */

/* ZBT_DIFF_OPS scales the runs (the sanitizer build runs a fifth). */
static long diffOps(long ops) {
    const char *env = getenv("ZBT_DIFF_OPS");
    return env ? atol(env) * ops / 1000000 : ops;
}

/* Ops steered by phase: sizes sweep up to `peak` members and back down,
 * so the tree goes into the arena and out, up and down in height. */
static void runKeyedDiff(uint64_t seed, long ops, long peak, int checkEvery, int fullEvery) {
    zsState *st = malloc(sizeof(*st));
    zsInit(st);
    uint8_t bytes[256];
    uint64_t x = seed;
    int grow = 1;
    clock_t start = clock();
    for (long i = 0; i < ops; i++) {
        for (size_t j = 0; j < sizeof(bytes); j += 8) {
            uint64_t v = rng(&x);
            memcpy(bytes + j, &v, 8);
        }
        if (grow && st->md.n >= (size_t)peak) grow = 0;
        if (!grow && st->md.n <= (size_t)peak / 50) grow = 1;
        uint8_t op = bytes[0] % 16;
        if (bytes[1] < 120) /* inserts while growing, deletes and pops while shrinking */
            bytes[0] = grow ? bytes[1] % 3 : (uint8_t)(bytes[1] % 2 ? 3 : 11);
        else if (grow && (op == 3 || op == 4 || op == 11 || op == 12))
            bytes[0] = 0;
        zsReader r = {bytes, bytes + sizeof(bytes)};
        const char *err = zsStep(st, &r);
        if (!err && i % checkEvery == checkEvery - 1) err = zbtCheck(st->t);
        if (!err && i % fullEvery == fullEvery - 1) err = zsFull(st);
        if (err) fail_msg("op %ld (seed %llu): %s", i, (unsigned long long)seed, err);
    }
    const char *err = zsFull(st);
    if (err) fail_msg("at the end: %s", err);
    print_message("keyed differential: %ld ops in %.1f s: up to %lu members, height %d; %lu scans completed; "
                  "%lu appends accepted, %lu refused and inserted\n",
                  ops, (double)(clock() - start) / CLOCKS_PER_SEC, st->most, st->height, st->scans, st->appended,
                  st->refused);
    zsFree(st);
    free(st);
}

/* Sizes swept: with small nodes 20,000 members make six levels; under
 * ASan, where the model's moves take most of the time, 5,000 make five. */
#if defined(__SANITIZE_ADDRESS__)
#define DIFF_PEAK 5000
#else
#define DIFF_PEAK (ZBT_LEAF_BYTES < 512 ? 20000 : 40000)
#endif

static void test_keyed_differential_million_ops(void **state) {
    (void)state;
    runKeyedDiff(0x9E3779B97F4A7C15ULL, diffOps(1000000), DIFF_PEAK, 10000, 10000);
}

/* Small sets, checked after every operation: leaves split and merge at
 * the root, a set empties and fills again. */
static void test_keyed_differential_small_sets(void **state) {
    (void)state;
    runKeyedDiff(4242, diffOps(200000), 300, 1, 100);
}

int main(void) {
    zbtSetHashSeed(zsSeed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keyed_empty),
        cmocka_unit_test(test_keyed_one_member_score_is_key),
        cmocka_unit_test(test_keyed_member_lengths),
        cmocka_unit_test(test_keyed_order_find_rank_at_rank),
        cmocka_unit_test(test_keyed_colliding_keys),
        cmocka_unit_test(test_keyed_contains_many),
        cmocka_unit_test(test_keyed_seek),
        cmocka_unit_test(test_keyed_append_in_key_order),
        cmocka_unit_test(test_keyed_scan_guarantee),
        cmocka_unit_test(test_keyed_check_after_each_operation),
        cmocka_unit_test(test_keyed_alloc_size),
        cmocka_unit_test(test_keyed_defrag),
        cmocka_unit_test(test_keyed_dismiss),
        cmocka_unit_test(test_keyed_hints_read_ahead),
        cmocka_unit_test(test_keyed_dismiss_big_members),
        cmocka_unit_test(test_keyed_shrunk_set_gives_back_its_leaf_table),
        cmocka_unit_test(test_keyed_deep_tree),
        cmocka_unit_test(test_keyed_delete_from_cursor),
        cmocka_unit_test(test_keyed_reads_write_nothing_while_shared),
        cmocka_unit_test(test_keyed_differential_million_ops),
        cmocka_unit_test(test_keyed_differential_small_sets),
    };
    return cmocka_run_group_tests_name("zbtset", tests, NULL, NULL);
}
