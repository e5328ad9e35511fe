/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Unit tests of keyttl.c, a key's expire time in a 4-byte field: the
 * "no expire" word; times in the past, now and the far future; every
 * bound of PEXPIREAT's range (the whole of a long long); the edges of a
 * tag's window; all four tags held, where a time takes the long form,
 * and a tag given up and taken again for another generation while words
 * of the other tags keep their times; a clock that runs for a year under
 * keys set with TTLs of a second to six days (the base moves on about
 * every nine days); and a differential run against a model that keeps
 * each stored time beside its word.
 *
 * Built plain and under the sanitizers. KTTL_TEST=<pattern> runs the tests
 * whose names match it alone.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "keyttl.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* 2026-12-06 00:00:00 UTC, in unix milliseconds. */
#define NOW INT64_C(1796515200000)
#define DAY_MS INT64_C(86400000)
#define WINDOW_MS (INT64_C(1) << KTTL_OFFSET_BITS)

static uint64_t rng(uint64_t *x) {
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

static int setup(void **state) {
    (void)state;
    kttlReset();
    return 0;
}

static unsigned long long allUsers(void) {
    unsigned long long n = 0;
    for (int t = 0; t < KTTL_TAGS; t++) n += kttlTagUsers(t);
    return n;
}

static int tagOf(uint32_t word) {
    return (int)(word >> KTTL_OFFSET_BITS);
}

/* Encodes `when`, which must fit, and checks that it decodes back. */
static uint32_t mustEncode(long long when) {
    uint32_t word = 0;
    assert_true(kttlFits(when));
    assert_true(kttlEncode(when, &word));
    assert_int_not_equal(word, KTTL_NONE_WORD);
    assert_int_equal(kttlDecode(word), when);
    return word;
}

/* --- Tests --- */

static void test_none_word(void **state) {
    (void)state;
    assert_int_equal(kttlDecode(KTTL_NONE_WORD), -1);
    kttlRelease(KTTL_NONE_WORD);
    assert_int_equal(allUsers(), 0);
    for (int t = 0; t < KTTL_TAGS; t++) assert_int_equal(kttlTagGeneration(t), -1);
}

static void test_now_takes_the_generation_before(void **state) {
    (void)state;
    uint32_t word = mustEncode(NOW);
    int t = tagOf(word);
    assert_int_equal(kttlTagGeneration(t), (NOW >> KTTL_GEN_BITS) - 1);
    assert_int_equal(kttlTagUsers(t), 1);
    /* The time lies one to two generations into the window. */
    long long offset = word & KTTL_OFFSET_MASK;
    assert_true(offset >= KTTL_GEN_MS && offset < 2 * KTTL_GEN_MS);
    /* Six days later fit the same tag, and the field is counted once each. */
    uint32_t later = mustEncode(NOW + 6 * DAY_MS);
    assert_int_equal(tagOf(later), t);
    assert_int_equal(kttlTagUsers(t), 2);
    kttlRelease(word);
    kttlRelease(later);
    assert_int_equal(kttlTagUsers(t), 0);
}

/* Every bound of PEXPIREAT's range: a long long, negative times included
 * (they are in the past; a replica or a load can still hold them). */
static void test_bounds(void **state) {
    (void)state;
    const long long longForm[] = {LLONG_MIN, LLONG_MIN + 1, -DAY_MS, -2, -1,
                                  KTTL_TIME_MAX, KTTL_TIME_MAX + 1, LLONG_MAX - 1, LLONG_MAX};
    for (size_t i = 0; i < COUNT(longForm); i++) {
        uint32_t word = 12345;
        assert_false(kttlFits(longForm[i]));
        assert_false(kttlEncode(longForm[i], &word));
        assert_int_equal(word, 12345);
    }
    assert_int_equal(allUsers(), 0);
    /* The epoch, its first millisecond, the last time a short form holds:
     * each takes a tag of its own (they are too far apart to share). */
    const long long shortForm[] = {0, 1, KTTL_TIME_MAX - 1};
    uint32_t words[COUNT(shortForm)];
    for (size_t i = 0; i < COUNT(shortForm); i++) words[i] = mustEncode(shortForm[i]);
    assert_int_equal(tagOf(words[0]), tagOf(words[1]));
    assert_int_equal(kttlTagGeneration(tagOf(words[0])), 0); /* not -1 */
    assert_int_not_equal(tagOf(words[0]), tagOf(words[2]));
    for (size_t i = 0; i < COUNT(shortForm); i++) assert_int_equal(kttlDecode(words[i]), shortForm[i]);
    for (size_t i = 0; i < COUNT(shortForm); i++) kttlRelease(words[i]);
    assert_int_equal(allUsers(), 0);
}

/* A tag's window is [base, base + 2^30 - 1): its last millisecond would
 * be the "no expire" word for tag 3, so no tag uses it. */
static void test_window_edges(void **state) {
    (void)state;
    uint32_t first = mustEncode(NOW);
    int t = tagOf(first);
    long long base = kttlTagGeneration(t) << KTTL_GEN_BITS;
    uint32_t lo = mustEncode(base);
    uint32_t hi = mustEncode(base + KTTL_OFFSET_MAX);
    assert_int_equal(tagOf(lo), t);
    assert_int_equal(tagOf(hi), t);
    assert_int_equal(lo & KTTL_OFFSET_MASK, 0);
    assert_int_equal(hi & KTTL_OFFSET_MASK, KTTL_OFFSET_MAX);
    uint32_t below = mustEncode(base - 1);
    uint32_t above = mustEncode(base + KTTL_OFFSET_MAX + 1);
    assert_int_not_equal(tagOf(below), t);
    assert_int_not_equal(tagOf(above), t);
    assert_int_not_equal(tagOf(below), tagOf(above));
    assert_int_equal(kttlTagUsers(t), 3);
    uint32_t all[] = {first, lo, hi, below, above};
    for (size_t i = 0; i < COUNT(all); i++) kttlRelease(all[i]);
    assert_int_equal(allUsers(), 0);
}

/* Four generations held: a fifth takes the long form. Once one tag's last
 * field goes, the tag is taken for the new generation (its base moves),
 * and the fields of the other tags still read the same times. */
static void test_all_tags_held_then_one_moves(void **state) {
    (void)state;
    long long times[KTTL_TAGS];
    uint32_t words[KTTL_TAGS];
    for (int i = 0; i < KTTL_TAGS; i++) {
        times[i] = NOW + i * 2 * WINDOW_MS;
        words[i] = mustEncode(times[i]);
    }
    long long fifth = NOW + KTTL_TAGS * 2 * WINDOW_MS;
    uint32_t word;
    assert_false(kttlFits(fifth));
    assert_false(kttlEncode(fifth, &word));
    /* A time inside a held window still fits it. */
    uint32_t inside = mustEncode(times[2] + 1000);
    assert_int_equal(tagOf(inside), tagOf(words[2]));
    kttlRelease(inside);

    int freed = tagOf(words[1]);
    long long oldGen = kttlTagGeneration(freed);
    kttlRelease(words[1]);
    word = mustEncode(fifth);
    assert_int_equal(tagOf(word), freed);
    assert_int_not_equal(kttlTagGeneration(freed), oldGen);
    for (int i = 0; i < KTTL_TAGS; i++)
        if (i != 1) assert_int_equal(kttlDecode(words[i]), times[i]);
    kttlRelease(word);
    for (int i = 0; i < KTTL_TAGS; i++)
        if (i != 1) kttlRelease(words[i]);
    assert_int_equal(allUsers(), 0);
}

/* A year of a cache: every ten simulated minutes, keys are set with TTLs from a
 * second to six days and the due ones go. Every time takes a short field,
 * every live field reads its time, and a tag is taken anew about every
 * nine days. */
typedef struct {
    long long when;
    uint32_t word;
} liveKey;

static void test_clock_runs_a_year(void **state) {
    (void)state;
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    size_t cap = 1 << 16, n = 0;
    liveKey *live = malloc(cap * sizeof(*live));
    assert_non_null(live);
    long long takes = 0, lastGen[KTTL_TAGS];
    for (int t = 0; t < KTTL_TAGS; t++) lastGen[t] = kttlTagGeneration(t);
    for (long long now = NOW; now < NOW + 365 * DAY_MS; now += 600000) {
        for (int k = 0; k < 4; k++) {
            long long ttl = 1000 + (long long)(rng(&x) % (uint64_t)(6 * DAY_MS));
            if (n == cap) {
                cap *= 2;
                live = realloc(live, cap * sizeof(*live));
                assert_non_null(live);
            }
            live[n].when = now + ttl;
            live[n].word = mustEncode(now + ttl);
            n++;
        }
        for (size_t i = 0; i < n;) {
            if (live[i].when <= now) {
                assert_int_equal(kttlDecode(live[i].word), live[i].when);
                kttlRelease(live[i].word);
                live[i] = live[--n];
            } else {
                i++;
            }
        }
        for (int t = 0; t < KTTL_TAGS; t++) {
            if (kttlTagGeneration(t) != lastGen[t]) takes++, lastGen[t] = kttlTagGeneration(t);
        }
        if ((now / 600000) % 144 == 0) {
            for (size_t i = 0; i < n; i++) assert_int_equal(kttlDecode(live[i].word), live[i].when);
        }
    }
    assert_int_equal(allUsers(), n);
    /* 365 days at one take every six to nine days: 40 to 70 takes. */
    assert_true(takes >= 365 / 9 && takes <= 365 / 6 + 10);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(kttlDecode(live[i].word), live[i].when);
        kttlRelease(live[i].word);
    }
    assert_int_equal(allUsers(), 0);
    free(live);
}

/* Random times near and far, kept or released at random, against a model
 * that keeps each time beside its word: decoding is always exact, the
 * counts match the model's, and a time takes the long form only when no
 * owned window holds it and all four tags are in use. */
#define DIFF_OPS 1000000
#define DIFF_LIVE 4096

static void test_differential(void **state) {
    (void)state;
    uint64_t x = 0x2545f4914f6cdd1dULL;
    liveKey live[DIFF_LIVE];
    size_t n = 0;
    unsigned long long modelUsers[KTTL_TAGS] = {0};
    long long longForms = 0;
    long long now = NOW;
    for (long op = 0; op < DIFF_OPS; op++) {
        uint64_t r = rng(&x);
        if (n > 0 && (r % 3 == 0 || n == DIFF_LIVE)) {
            size_t i = (size_t)(rng(&x) % n);
            assert_int_equal(kttlDecode(live[i].word), live[i].when);
            modelUsers[tagOf(live[i].word)]--;
            kttlRelease(live[i].word);
            live[i] = live[--n];
            continue;
        }
        now += (long long)(rng(&x) % 2000);
        long long when;
        switch ((r >> 8) % 8) {
        case 0: when = now - (long long)(rng(&x) % (uint64_t)(30 * DAY_MS)); break; /* past */
        case 1: when = now + (long long)(rng(&x) % (uint64_t)(400 * DAY_MS)); break; /* far */
        case 2: when = (long long)(rng(&x) >> 1); break;                             /* anything */
        default: when = now + (long long)(rng(&x) % (uint64_t)(2 * DAY_MS)); break;   /* near */
        }
        uint32_t word;
        bool fits = kttlFits(when);
        if (!kttlEncode(when, &word)) {
            assert_false(fits);
            longForms++;
            /* Long form: out of range, or every tag in use. */
            if (when >= 0 && when < KTTL_TIME_MAX) {
                for (int t = 0; t < KTTL_TAGS; t++) assert_true(modelUsers[t] > 0);
            }
            continue;
        }
        assert_true(fits);
        assert_int_equal(kttlDecode(word), when);
        modelUsers[tagOf(word)]++;
        live[n].when = when, live[n].word = word, n++;
        if (op % 4096 == 0) {
            for (size_t i = 0; i < n; i++) assert_int_equal(kttlDecode(live[i].word), live[i].when);
            for (int t = 0; t < KTTL_TAGS; t++) assert_int_equal(kttlTagUsers(t), modelUsers[t]);
        }
    }
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(kttlDecode(live[i].word), live[i].when);
        kttlRelease(live[i].word);
    }
    assert_int_equal(allUsers(), 0);
    assert_true(longForms > 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_none_word, setup),
        cmocka_unit_test_setup(test_now_takes_the_generation_before, setup),
        cmocka_unit_test_setup(test_bounds, setup),
        cmocka_unit_test_setup(test_window_edges, setup),
        cmocka_unit_test_setup(test_all_tags_held_then_one_moves, setup),
        cmocka_unit_test_setup(test_clock_runs_a_year, setup),
        cmocka_unit_test_setup(test_differential, setup),
    };
    const char *only = getenv("KTTL_TEST");
    if (only) cmocka_set_test_filter(only);
    return cmocka_run_group_tests_name("keyttl", tests, NULL, NULL);
}
