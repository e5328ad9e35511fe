/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Unit tests of the symbol tables of symtab.c: an untrained table escapes
 * every byte; a table trained on English text holds at most 255 distinct
 * symbols of 1 to 8 bytes, each of which decodes alone to itself, and
 * codes that text in well under its size; codes with no symbol, a
 * trailing escape and every output buffer one byte too small are refused;
 * symbols with zero bytes never match past the end of the input; a
 * trainer run in steps of 1, 7, 48 and 1,000 samples builds the same
 * table as symtabTrain, and one dropped midway frees everything; and a
 * differential run against the identity (every value coded, its size
 * within SYMTAB_ENCODE_BOUND, decoded back, its decoded length predicted)
 * over tables trained on text, on binary data and on mixtures, with
 * values of every kind and length up to 600 bytes.
 *
 * Built with the server's allocator, and under the sanitizers.
 * SYMTAB_DIFF_OPS scales the differential run (default 1,000,000 values).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "symtab.h"
#include "zmalloc.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static uint64_t rng(uint64_t *x) {
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

/* Short English texts, as a cache holds them. */
static const char *const english[] = {
    "The quick brown fox jumps over the lazy dog while the cat watches.",
    "A journey of a thousand miles begins with a single step.",
    "All that glitters is not gold; all that wander are not lost.",
    "There is no place like home, and there is no time like the present.",
    "The only thing we have to fear is fear itself.",
    "In the middle of difficulty lies opportunity.",
    "The best way out is always through the door you came in by.",
    "What we think, we become; what we feel, we attract.",
    "It is not the mountain we conquer but ourselves.",
    "The future belongs to those who believe in the beauty of their dreams.",
    "Do not go where the path may lead, go instead where there is no path.",
    "Whatever you are, be a good one, and the rest will follow in time.",
    "The mind is everything. What you think you become.",
    "Life is what happens when you are busy making other plans.",
    "Everything you can imagine is real, and the rest is in the telling.",
    "The weather today is cloudy with a chance of rain in the evening.",
};

typedef struct {
    const unsigned char **v;
    size_t *len;
    size_t n;
} samples;

static samples englishSamples(int repeat) {
    samples s = {.n = COUNT(english) * repeat};
    s.v = malloc(s.n * sizeof(*s.v));
    s.len = malloc(s.n * sizeof(*s.len));
    for (size_t i = 0; i < s.n; i++) {
        s.v[i] = (const unsigned char *)english[i % COUNT(english)];
        s.len[i] = strlen(english[i % COUNT(english)]);
    }
    return s;
}

static void samplesFree(samples *s) {
    free(s->v);
    free(s->len);
}

static symtab *trainEnglish(void) {
    samples s = englishSamples(4);
    symtab *t = symtabTrain(s.v, s.len, s.n);
    samplesFree(&s);
    return t;
}

/* Codes `v`, checks the bound, decodes into an exact buffer and a roomy
 * one, and checks the decoded length; returns the coded size. */
static size_t roundTrip(const symtab *t, const unsigned char *v, size_t len) {
    unsigned char *code = malloc(SYMTAB_ENCODE_BOUND(len) + 1);
    size_t n = symtabEncode(t, v, len, code);
    assert_true(n <= SYMTAB_ENCODE_BOUND(len));
    assert_int_equal(symtabDecodedLen(t, code, n), len);
    unsigned char *exact = malloc(len ? len : 1);
    assert_int_equal(symtabDecode(t, code, n, exact, len), len);
    assert_memory_equal(exact, v, len);
    unsigned char *roomy = malloc(len + 16);
    assert_int_equal(symtabDecode(t, code, n, roomy, len + 16), len);
    assert_memory_equal(roomy, v, len);
    if (len) assert_int_equal(symtabDecode(t, code, n, exact, len - 1), SIZE_MAX);
    /* A prefix: at least `want` bytes (a symbol may run past it), the
     * same as the whole decode's, or all of them when the value is shorter. */
    for (size_t want = 0; want <= len + 1; want += 1 + want / 4) {
        size_t got = symtabDecodePrefix(t, code, n, roomy, len + 16, want);
        assert_true(got >= (want < len ? want : len) && got <= len && got < want + 8 + (want == 0));
        assert_memory_equal(roomy, v, got);
    }
    free(code);
    free(exact);
    free(roomy);
    return n;
}

/* --- Tests --- */

static void test_untrained(void **state) {
    (void)state;
    symtab *t = symtabTrain(NULL, NULL, 0);
    assert_int_equal(symtabSymbols(t), 0);
    unsigned char v[256];
    for (int i = 0; i < 256; i++) v[i] = (unsigned char)i;
    assert_int_equal(roundTrip(t, v, sizeof(v)), 2 * sizeof(v));
    assert_int_equal(roundTrip(t, v, 0), 0);
    assert_true(symtabBytes(t) > 0);
    symtabFree(t);
}

static void test_symbols(void **state) {
    (void)state;
    symtab *t = trainEnglish();
    int n = symtabSymbols(t);
    assert_true(n > 16 && n <= 255);
    uint64_t seen[255];
    unsigned char out[16];
    for (int c = 0; c < 255; c++) {
        unsigned char code = (unsigned char)c;
        size_t len = symtabDecode(t, &code, 1, out, sizeof(out));
        if (c >= n) {
            assert_int_equal(len, SIZE_MAX);
            assert_int_equal(symtabDecodedLen(t, &code, 1), SIZE_MAX);
            continue;
        }
        assert_true(len >= 1 && len <= 8);
        uint64_t key = 0;
        memcpy(&key, out, len);
        key = key * 16 + len;
        for (int d = 0; d < c; d++) assert_true(seen[d] != key);
        seen[c] = key;
        /* A symbol coded alone is its own code. */
        unsigned char back[16];
        assert_int_equal(symtabEncode(t, out, len, back), 1);
        assert_int_equal(back[0], c);
    }
    symtabFree(t);
}

static void test_compresses_text(void **state) {
    (void)state;
    symtab *t = trainEnglish();
    size_t in = 0, out = 0;
    for (size_t i = 0; i < COUNT(english); i++) {
        in += strlen(english[i]);
        out += roundTrip(t, (const unsigned char *)english[i], strlen(english[i]));
    }
    assert_true(out * 10 < in * 6);
    /* Unseen text of the same kind compresses too. */
    const char *unseen = "The cat is busy making plans for the evening, while the dog dreams of home.";
    assert_true(roundTrip(t, (const unsigned char *)unseen, strlen(unseen)) < strlen(unseen));
    symtabFree(t);
}

/* A trainer in steps of any size builds the very table symtabTrain does. */
static void test_trainer_steps(void **state) {
    (void)state;
    samples s = englishSamples(3);
    symtab *whole = symtabTrain(s.v, s.len, s.n);
    static const size_t steps[] = {1, 7, 48, 1000};
    for (size_t k = 0; k < COUNT(steps); k++) {
        symtabTrainer *tr = symtabTrainerCreate(s.v, s.len, s.n);
        int calls = 0;
        while (!symtabTrainerStep(tr, steps[k])) calls++;
        assert_true(calls >= (int)(s.n / steps[k]));
        symtab *t = symtabTrainerFinish(tr);
        assert_int_equal(symtabSymbols(t), symtabSymbols(whole));
        for (size_t i = 0; i < COUNT(english); i++) {
            unsigned char a[256], b[256];
            size_t la = symtabEncode(whole, (const unsigned char *)english[i], strlen(english[i]), a);
            size_t lb = symtabEncode(t, (const unsigned char *)english[i], strlen(english[i]), b);
            assert_int_equal(la, lb);
            assert_memory_equal(a, b, la);
        }
        symtabFree(t);
    }
    /* Dropped midway, it frees what it holds (the sanitizers' build checks). */
    symtabTrainer *tr = symtabTrainerCreate(s.v, s.len, s.n);
    symtabTrainerStep(tr, 5);
    symtabTrainerFree(tr);
    symtabFree(whole);
    samplesFree(&s);
}

static void test_malformed(void **state) {
    (void)state;
    symtab *t = trainEnglish();
    unsigned char out[64];
    unsigned char esc[] = {255};
    assert_int_equal(symtabDecode(t, esc, 1, out, sizeof(out)), SIZE_MAX);
    assert_int_equal(symtabDecodedLen(t, esc, 1), SIZE_MAX);
    /* An unused code among eight or more plain codes (the length's
     * word-at-a-time path) is refused, wherever it sits. */
    unsigned char wide[16 * 8 + 8];
    int n0 = symtabSymbols(t);
    assert_true(n0 < 255);
    for (int at = 0; at < 16; at++) {
        unsigned char run[16];
        memset(run, 0, sizeof(run));
        run[at] = (unsigned char)n0;
        assert_int_equal(symtabDecodedLen(t, run, sizeof(run)), SIZE_MAX);
        assert_int_equal(symtabDecode(t, run, sizeof(run), wide, sizeof(wide)), SIZE_MAX);
    }
    /* An escape at each place of a word, its literal the escape's own byte. */
    for (int at = 0; at < 15; at++) {
        unsigned char run[16];
        memset(run, 0, sizeof(run));
        run[at] = 255;
        run[at + 1] = 255;
        size_t want = symtabDecode(t, run, sizeof(run), wide, sizeof(wide));
        assert_true(want != SIZE_MAX);
        assert_int_equal(symtabDecodedLen(t, run, sizeof(run)), want);
    }
    unsigned char two[] = {255, 'a', 255};
    assert_int_equal(symtabDecode(t, two, 3, out, sizeof(out)), SIZE_MAX);
    assert_int_equal(symtabDecode(t, two, 2, out, sizeof(out)), 1);
    assert_int_equal(symtabDecode(t, two, 2, out, 0), SIZE_MAX);
    /* Every buffer one byte short of a long value is refused. */
    const unsigned char *v = (const unsigned char *)english[0];
    size_t len = strlen(english[0]);
    unsigned char code[256];
    size_t n = symtabEncode(t, v, len, code);
    for (size_t cap = 0; cap < len; cap++) {
        unsigned char *buf = malloc(cap ? cap : 1);
        assert_int_equal(symtabDecode(t, code, n, buf, cap), SIZE_MAX);
        free(buf);
    }
    symtabFree(t);
}

/* Symbols that end in zero bytes are never taken for the zero padding
 * past the end of an input. */
static void test_zero_bytes_at_end(void **state) {
    (void)state;
    static const unsigned char z[] = "ab\0\0cd\0\0ab\0\0cd\0\0ab\0\0cd\0\0";
    const unsigned char *v[64];
    size_t len[64];
    for (int i = 0; i < 64; i++) v[i] = z, len[i] = sizeof(z) - 1;
    symtab *t = symtabTrain(v, len, 64);
    static const unsigned char *tails[] = {(const unsigned char *)"ab", (const unsigned char *)"xab",
                                           (const unsigned char *)"ab\0", (const unsigned char *)"cd\0",
                                           (const unsigned char *)"abcd"};
    for (size_t i = 0; i < COUNT(tails); i++) roundTrip(t, tails[i], strlen((const char *)tails[i]));
    roundTrip(t, z, 3);
    roundTrip(t, z, 7);
    for (size_t l = 0; l <= sizeof(z) - 1; l++) roundTrip(t, z + (sizeof(z) - 1 - l), l);
    symtabFree(t);
}

/* A value of one of several kinds: English words, binary, runs of one
 * byte, digits, or a mixture. */
static size_t randomValue(uint64_t *x, unsigned char *v, size_t max) {
    size_t len = rng(x) % (max + 1);
    switch (rng(x) % 5) {
    case 0:
        for (size_t i = 0; i < len;) {
            const char *e = english[rng(x) % COUNT(english)];
            size_t off = rng(x) % strlen(e), k = rng(x) % 12 + 1;
            for (; k && e[off] && i < len; k--) v[i++] = (unsigned char)e[off++];
        }
        break;
    case 1:
        for (size_t i = 0; i < len; i++) v[i] = (unsigned char)rng(x);
        break;
    case 2: memset(v, (int)(rng(x) & 0xff), len); break;
    case 3:
        for (size_t i = 0; i < len; i++) v[i] = (unsigned char)('0' + rng(x) % 10);
        break;
    default:
        for (size_t i = 0; i < len; i++) v[i] = (rng(x) & 3) ? (unsigned char)"the \0\xff"[rng(x) % 6] : (unsigned char)rng(x);
    }
    return len;
}

static void test_differential(void **state) {
    (void)state;
    const char *env = getenv("SYMTAB_DIFF_OPS");
    long ops = env ? atol(env) : 1000000;
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    enum { MAXLEN = 600,
           TRAIN = 400 };
    unsigned char *pool = malloc((size_t)TRAIN * MAXLEN);
    const unsigned char *v[TRAIN];
    size_t len[TRAIN];
    unsigned char value[MAXLEN];
    long done = 0;
    for (int table = 0; done < ops; table++) {
        /* Tables trained on one kind of value or on a mixture. */
        size_t n = rng(&x) % TRAIN;
        uint64_t kind = x;
        for (size_t i = 0; i < n; i++) {
            uint64_t y = table % 3 == 0 ? kind : x;
            len[i] = randomValue(&y, pool + i * MAXLEN, rng(&x) % 2 ? 100 : MAXLEN);
            v[i] = pool + i * MAXLEN;
            rng(&x);
        }
        symtab *t = symtabTrain(v, len, n);
        assert_true(symtabSymbols(t) <= 255);
        for (int k = 0; k < 5000 && done < ops; k++, done++) {
            size_t l = randomValue(&x, value, rng(&x) % 4 ? 120 : MAXLEN);
            roundTrip(t, value, l);
        }
        symtabFree(t);
    }
    free(pool);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_untrained),
        cmocka_unit_test(test_symbols),
        cmocka_unit_test(test_compresses_text),
        cmocka_unit_test(test_trainer_steps),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_zero_bytes_at_end),
        cmocka_unit_test(test_differential),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
