/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * cmocka tests of big sets of strings (hpset.c): members of every length,
 * growth and shrinking with hpsCheck() along the way, uniform random
 * members, SSCAN's guarantee, defrag, dismiss, pages shared with a fork
 * child, memory per member, and a differential run against the model of
 * hps_diff.h (HPS_DIFF_OPS operations, a million by default).
 *
 *   make test-engine
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hps_diff.h"

static uint64_t rng = 0x2545F4914F6CDD1DULL;

static uint64_t next64(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static size_t nameOf(unsigned char *m, uint64_t i, size_t len) {
    static const char al[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    uint64_t x = i * 0x9E3779B97F4A7C15ULL + 1;
    for (size_t k = 0; k < len; k++) {
        x ^= x >> 29;
        x *= 0xBF58476D1CE4E5B9ULL;
        m[k] = (unsigned char)al[(x >> 32) % 62];
    }
    return len;
}

static void checkedAt(const hpset *s, int line) {
    const char *err = hpsCheck(s);
    if (err) fail_msg("hpsCheck (line %d): %s", line, err);
}
#define checked(s) checkedAt(s, __LINE__)

static void test_lengths(void **state) {
    (void)state;
    hpset *s = hpsCreate(0);
    unsigned char m[300];
    for (size_t len = 0; len <= 300; len++) {
        memset(m, 'x', len);
        if (len) m[len - 1] = (unsigned char)len;
        assert_int_equal(hpsInsert(s, m, len), 1);
        assert_int_equal(hpsInsert(s, m, len), 0);
    }
    checked(s);
    assert_int_equal(hpsLength(s), 301);
    for (size_t len = 0; len <= 300; len++) {
        memset(m, 'x', len);
        if (len) m[len - 1] = (unsigned char)len;
        assert_int_equal(hpsContains(s, m, len), 1);
        m[0] ^= 1;
        if (len) assert_int_equal(hpsContains(s, m, len), 0);
    }
    for (size_t len = 0; len <= 300; len += 2) {
        memset(m, 'x', len);
        if (len) m[len - 1] = (unsigned char)len;
        assert_int_equal(hpsDelete(s, m, len), 1);
        assert_int_equal(hpsDelete(s, m, len), 0);
    }
    checked(s);
    assert_int_equal(hpsLength(s), 150);
    hpsFree(s);
}

/* A million members in, checked at each doubling, then all out again: the
 * memory goes back to a few segments. */
static void test_grow_and_shrink(void **state) {
    (void)state;
    hpset *s = hpsCreate(0);
    unsigned char m[24];
    const uint64_t n = 1000000;
    for (uint64_t i = 0; i < n; i++) {
        assert_int_equal(hpsInsert(s, m, nameOf(m, i, 19)), 1);
        if ((i & (i + 1)) == 0 && i > 64) checked(s);
    }
    checked(s);
    hpsStats st;
    hpsGetStats(s, &st);
    double perMember = (double)hpsAllocSize(s) / n;
    printf("      1M members of 19 bytes: %.1f bytes a member, %llu segments, depth %u, %.0f%% buckets overflowed\n",
           perMember, (unsigned long long)st.segments, st.depth, 100.0 * st.overflowed / st.buckets);
#ifndef HPS_SEG_CLASSES /* small segments cost more a member */
    assert_true(perMember < 34.0); /* 21 bytes an entry, at a big set's loads */
#endif
    for (uint64_t i = 0; i < n; i += 3) assert_int_equal(hpsContains(s, m, nameOf(m, i, 19)), 1);
    for (uint64_t i = n; i < n + 1000; i++) assert_int_equal(hpsContains(s, m, nameOf(m, i, 19)), 0);
    for (uint64_t i = 0; i < n; i++) {
        assert_int_equal(hpsDelete(s, m, nameOf(m, i, 19)), 1);
        if (((n - i) & (n - i - 1)) == 0) checked(s);
    }
    checked(s);
    assert_int_equal(hpsLength(s), 0);
    hpsGetStats(s, &st);
    assert_true(st.segments <= 2);
    assert_true(hpsAllocSize(s) < 4096);
    hpsFree(s);
}

/* Times: on members of every length (inline at each size, out of line),
 * at the range's ends; added in place, in a full bucket (the entry moves),
 * changed and dropped; kept through growth and splits of 200,000 timed
 * members; the due ones found at a time and only those. */
typedef struct dueSeen {
    uint64_t n, now, bad;
    unsigned char first[10][24]; /* The first ten, to look for. */
    size_t len[10];
} dueSeen;

static void countDue(void *ctx, const unsigned char *m, size_t len, uint64_t t) {
    dueSeen *d = ctx;
    if (d->n < 10 && len <= 24) {
        memcpy(d->first[d->n], m, len);
        d->len[d->n] = len;
    }
    d->n++;
    if (!t || t > d->now) d->bad++;
}

static void test_times(void **state) {
    (void)state;
    hpset *s = hpsCreate(0);
    unsigned char m[300];
    uint64_t t;
    for (size_t len = 0; len <= 300; len++) {
        memset(m, 'y', len);
        if (len) m[len - 1] = (unsigned char)len;
        assert_int_equal(hpsInsert(s, m, len), 1);
        assert_int_equal(hpsSetTimeHashed(s, hpsHash(m, len), m, len, len % 2 ? HPS_TIME_MAX : len + 1, NULL), 1);
    }
    checked(s);
    assert_int_equal(hpsTimedCount(s), 301);
    assert_int_equal(hpsEarliest(s), 1);
    for (size_t len = 0; len <= 300; len++) {
        memset(m, 'y', len);
        if (len) m[len - 1] = (unsigned char)len;
        assert_int_equal(hpsTimeHashed(s, hpsHash(m, len), m, len, &t), 1);
        assert_int_equal(t, len % 2 ? HPS_TIME_MAX : len + 1);
        if (len % 3 == 0) assert_int_equal(hpsSetTimeHashed(s, hpsHash(m, len), m, len, 0, NULL), 1);
        if (len % 3 == 1) assert_int_equal(hpsSetTimeHashed(s, hpsHash(m, len), m, len, 7, NULL), 1);
    }
    checked(s);
    assert_int_equal(hpsTimedCount(s), 200);
    m[0] = 'z';
    assert_int_equal(hpsTimeHashed(s, hpsHash(m, 5), m, 5, &t), 0);
    assert_int_equal(hpsSetTimeHashed(s, hpsHash(m, 5), m, 5, 9, NULL), 0);
    hpsFree(s);

    /* 200,000 members, a time on every other one, added as the set grows. */
    s = hpsCreate(0);
    const uint64_t n = 200000;
    for (uint64_t i = 0; i < n; i++) {
        size_t len = nameOf(m, i, 19);
        if (i % 2)
            assert_int_equal(hpsInsertTimed(s, m, len, 1000 + i), 1);
        else
            assert_int_equal(hpsInsert(s, m, len), 1);
        if ((i & (i + 1)) == 0 && i > 64) checked(s);
    }
    checked(s);
    assert_int_equal(hpsTimedCount(s), n / 2);
    for (uint64_t i = 0; i < n; i += 7) {
        size_t len = nameOf(m, i, 19);
        assert_int_equal(hpsTimeHashed(s, hpsHash(m, len), m, len, &t), 1);
        assert_int_equal(t, i % 2 ? 1000 + i : 0);
    }
    /* Nothing is due before the first time; at 1000 + n / 2, the first
     * half's odd members are, a few at a time or all. */
    dueSeen d = {0, 1000, 0};
    assert_int_equal(hpsDue(s, 1000, SIZE_MAX, countDue, &d), 0);
    d.now = 1000 + n / 2;
    assert_int_equal(hpsDue(s, d.now, 10, countDue, &d), 10);
    assert_int_equal(hpsLength(s), n - 10);
    for (int k = 0; k < 10; k++) assert_int_equal(hpsContains(s, d.first[k], d.len[k]), 0);
    checked(s);
    d.n = 0;
    assert_int_equal(hpsDue(s, d.now, SIZE_MAX, countDue, &d), n / 4 - 10);
    assert_int_equal(d.bad, 0);
    for (uint64_t i = 1; i < n / 2; i += 2) assert_int_equal(hpsContains(s, m, nameOf(m, i, 19)), 0);
    assert_int_equal(hpsLength(s), n - n / 4);
    checked(s);
    assert_true(hpsEarliest(s) > d.now);
    assert_int_equal(hpsTimedCount(s), n / 4);
    hpsFree(s);

    /* Every member due at once: the walk empties segments, which merge
     * with buddies it has read and with ones it has not, until one is
     * left. */
    s = hpsCreate(0);
    for (uint64_t i = 0; i < n; i++) assert_int_equal(hpsInsertTimed(s, m, nameOf(m, i, 19), 5000 + i % 3), 1);
    dueSeen all = {0, 5002, 0};
    assert_int_equal(hpsDue(s, 5002, SIZE_MAX, countDue, &all), n);
    assert_int_equal(all.bad, 0);
    assert_int_equal(hpsLength(s), 0);
    assert_int_equal(hpsTimedCount(s), 0);
    assert_int_equal(hpsEarliest(s), 0);
    checked(s);
    hpsStats st;
    hpsGetStats(s, &st);
    assert_int_equal(st.segments, 1);
    hpsFree(s);
}

static uint64_t testRandomBits(void) {
    return next64();
}

/* Random members are uniform: 64 members, 640,000 draws, chi-square with
 * 63 degrees of freedom below 110 (p < 0.0002 for a fair draw), across
 * sets of every size class and depth. */
static void test_random_uniform(void **state) {
    (void)state;
    static const uint64_t sizes[] = {64, 1000, 20000};
    for (size_t t = 0; t < sizeof(sizes) / sizeof(sizes[0]); t++) {
        hpset *s = hpsCreate(0);
        unsigned char m[32];
        uint64_t n = sizes[t];
        for (uint64_t i = 0; i < n; i++) hpsInsert(s, m, nameOf(m, i, (i % 5) * 7 + 3));
        /* Count the draws of 64 members spread over the set. */
        unsigned char watched[64][32];
        size_t wlen[64];
        for (int k = 0; k < 64; k++) {
            uint64_t i = k * (n / 64);
            wlen[k] = nameOf(watched[k], i, (i % 5) * 7 + 3);
        }
        uint64_t counts[64] = {0}, draws = 64 * 10000 * (n / 64), seen = 0;
        if (draws > 4000000) draws = 4000000;
        for (uint64_t d = 0; d < draws; d++) {
            const unsigned char *rm;
            size_t rlen;
            assert_int_equal(hpsRandom(s, testRandomBits, &rm, &rlen), 1);
            for (int k = 0; k < 64; k++)
                if (wlen[k] == rlen && memcmp(watched[k], rm, rlen) == 0) {
                    counts[k]++;
                    seen++;
                    break;
                }
        }
        double expect = (double)seen / 64, chi = 0;
        for (int k = 0; k < 64; k++) chi += (counts[k] - expect) * (counts[k] - expect) / expect;
        printf("      random over %llu members: chi-square %.1f (63 degrees of freedom)\n", (unsigned long long)n, chi);
        assert_true(chi < 110);
        hpsFree(s);
    }
}

typedef struct seenSet {
    hpdModel seen;
    size_t visits;
} seenSet;

static void seenVisit(void *ctx, const unsigned char *m, size_t len) {
    seenSet *ss = ctx;
    hpdAdd(&ss->seen, m, len);
    ss->visits++;
}

/* A scan through growth from 1,000 to 100,000 members, and through
 * shrinking back: every member present throughout comes, and a scan of a
 * set left alone returns each member about once. */
static void test_scan_guarantee(void **state) {
    (void)state;
    hpset *s = hpsCreate(0);
    unsigned char m[24];
    for (uint64_t i = 0; i < 1000; i++) hpsInsert(s, m, nameOf(m, i, 20));
    seenSet ss = {0};
    uint64_t cursor = 0, next = 1000;
    do {
        cursor = hpsScan(s, cursor, 10, seenVisit, &ss);
        for (int k = 0; k < 300 && next < 100000; k++, next++) hpsInsert(s, m, nameOf(m, next, 20));
    } while (cursor);
    for (uint64_t i = 0; i < 1000; i++) assert_true(hpdHas(&ss.seen, m, nameOf(m, i, 20)));
    hpdModelFree(&ss.seen);
    ss.visits = 0;
    /* Shrinking: members 0..999 stay, the rest go while the scan runs. */
    uint64_t gone = 1000;
    cursor = 0;
    do {
        cursor = hpsScan(s, cursor, 10, seenVisit, &ss);
        for (int k = 0; k < 500 && gone < next; k++, gone++) hpsDelete(s, m, nameOf(m, gone, 20));
    } while (cursor);
    for (uint64_t i = 0; i < 1000; i++) assert_true(hpdHas(&ss.seen, m, nameOf(m, i, 20)));
    checked(s);
    hpdModelFree(&ss.seen);
    /* Left alone: each member once, give or take those astride a cursor. */
    ss.visits = 0;
    cursor = 0;
    do cursor = hpsScan(s, cursor, 7, seenVisit, &ss);
    while (cursor);
    assert_int_equal(ss.seen.n, hpsLength(s));
    assert_true(ss.visits <= hpsLength(s) + hpsLength(s) / 10);
    hpdModelFree(&ss.seen);
    hpsFree(s);
}

static void test_defrag_and_dismiss(void **state) {
    (void)state;
    hpset *s = hpsCreate(0);
    /* The server's mark (hpsMark) rides through growth, splits and a
     * move of the struct. */
    assert_int_equal(*hpsMark(s), 0);
    *hpsMark(s) = 7;
    unsigned char m[64];
    for (uint64_t i = 0; i < 50000; i++) hpsInsert(s, m, nameOf(m, i, i % 3 ? 19 : 40));
    size_t bytes = hpsAllocSize(s);
    hpset *moved = hpsDefragShell(s, hpdMove);
    if (moved) s = moved;
    assert_int_equal(*hpsMark(s), 7);
    uint64_t at = 0;
    do at = hpsDefragSegments(s, at, 5, hpdMove);
    while (at);
    checked(s);
    assert_int_equal(hpsAllocSize(s), bytes);
    for (uint64_t i = 0; i < 50000; i++) assert_int_equal(hpsContains(s, m, nameOf(m, i, i % 3 ? 19 : 40)), 1);
    hpdDismissMin = 4096;
    hpdDismissBad = hpdDismissBytes = 0;
    hpsDismiss(s, 4096, hpdDismissed);
    assert_int_equal(hpdDismissBad, 0);
#ifndef HPS_SEG_CLASSES /* small segments are below the minimum */
    assert_true(hpdDismissBytes > bytes / 2);
#endif
    hpsFree(s);
}

/* While a fork child shares the pages, deletes rebuild nothing. */
static void test_pages_shared(void **state) {
    (void)state;
    hpset *s = hpsCreate(0);
    unsigned char m[24];
    for (uint64_t i = 0; i < 100000; i++) hpsInsert(s, m, nameOf(m, i, 20));
    size_t bytes = hpsAllocSize(s);
    hpsSetPagesShared(1);
    for (uint64_t i = 0; i < 90000; i++) assert_int_equal(hpsDelete(s, m, nameOf(m, i, 20)), 1);
    assert_int_equal(hpsAllocSize(s), bytes);
    checked(s);
    hpsSetPagesShared(0);
    hpsDelete(s, m, nameOf(m, 95000, 20));
    for (uint64_t i = 90000; i < 100000; i++) hpsDelete(s, m, nameOf(m, i, 20));
    assert_true(hpsAllocSize(s) < bytes / 10);
    checked(s);
    hpsFree(s);
}

/* Random members of a set left sparse (emptied while a fork child kept
 * its segments): sampling gives up and walks to a rank, still uniform. */
static void test_random_sparse(void **state) {
    (void)state;
    hpset *s = hpsCreate(0);
    unsigned char m[24];
    for (uint64_t i = 0; i < 200000; i++) hpsInsert(s, m, nameOf(m, i, 20));
    hpsSetPagesShared(1);
    for (uint64_t i = 64; i < 200000; i++) hpsDelete(s, m, nameOf(m, i, 20));
    hpsSetPagesShared(0);
    uint64_t counts[64] = {0};
    for (int d = 0; d < 64 * 1000; d++) {
        const unsigned char *rm;
        size_t rlen;
        assert_int_equal(hpsRandom(s, testRandomBits, &rm, &rlen), 1);
        int k;
        for (k = 0; k < 64; k++)
            if (rlen == nameOf(m, k, 20) && memcmp(m, rm, rlen) == 0) break;
        assert_true(k < 64);
        counts[k]++;
    }
    double chi = 0;
    for (int k = 0; k < 64; k++) chi += (counts[k] - 1000.0) * (counts[k] - 1000.0) / 1000.0;
    printf("      random over 64 members left in %zu bytes: chi-square %.1f\n", hpsAllocSize(s), chi);
    assert_true(chi < 110);
    checked(s);
    hpsFree(s);
}

/* Sized up front for a load: segments grow in place, and only one whose
 * last buckets fill up before the rest splits early (depth + 1 at most). */
static void test_presized(void **state) {
    (void)state;
    hpset *s = hpsCreate(200000);
    hpsStats before, after;
    hpsGetStats(s, &before);
    unsigned char m[24];
    for (uint64_t i = 0; i < 200000; i++) hpsInsert(s, m, nameOf(m, i, 19));
    hpsGetStats(s, &after);
#ifndef HPS_SEG_CLASSES /* small segments cannot grow in place that far */
    assert_true(after.depth <= before.depth + 1);
    assert_true(after.segments < before.segments + before.segments / 16);
    assert_true((double)hpsAllocSize(s) / 200000 < 36.0); /* a big set's loads, just grown */
#endif
    checked(s);
    hpsFree(s);
}

static void test_differential(void **state) {
    (void)state;
    const char *env = getenv("HPS_DIFF_OPS");
    unsigned long ops = env ? strtoul(env, NULL, 10) : 1000000;
    size_t len = 1 << 20;
    uint8_t *bytes = malloc(len);
    hpdState st;
    hpdInit(&st);
    hpdReader r = {bytes + len, bytes + len};
    const char *err = NULL;
    while (!err && st.ops < ops) {
        if (r.end - r.p < 65536) { /* the next bytes */
            for (size_t i = 0; i < len; i++) bytes[i] = (uint8_t)next64();
            r.p = bytes;
        }
        err = hpdStep(&st, &r);
        /* The whole check after every operation while small, less often
         * once bigger (it hashes every member). */
        if (!err && (st.md.n < 1000 || st.ops % (st.md.n < 10000 ? 64 : 1024) == 0)) err = hpsCheck(st.s);
    }
    if (!err) err = hpdFull(&st);
    printf("      %lu operations; at most %lu members; %lu scans, %lu random members, %lu defrags, %lu dismisses, "
           "%lu times set, %lu members due\n",
           st.ops, st.most, st.scans, st.randoms, st.defrags, st.dismissed, st.timed, st.due);
    if (err) fail_msg("%s", err);
    hpdFree(&st);
    free(bytes);
}

int main(void) {
    uint8_t seed[16] = {7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    hpsSetHashSeed(seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lengths),          cmocka_unit_test(test_grow_and_shrink),
        cmocka_unit_test(test_random_uniform),   cmocka_unit_test(test_scan_guarantee),
        cmocka_unit_test(test_defrag_and_dismiss), cmocka_unit_test(test_pages_shared),
        cmocka_unit_test(test_presized),         cmocka_unit_test(test_random_sparse),
        cmocka_unit_test(test_times),            cmocka_unit_test(test_differential),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
