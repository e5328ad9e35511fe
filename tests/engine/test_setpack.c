/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Unit tests of the packed set members of setpack.c (4, 5 or 6 bits a
 * character behind a tag byte): every stored form checked byte for byte
 * against a reference encoder written here from the format alone (bit by
 * bit), where it is put (the member itself, the caller's buffer, or an
 * allocation spkRelease frees), a second encoding giving the same bytes,
 * and decoding giving the member back. Members: the empty one, every one
 * of one and two bytes, every length to 200 in each alphabet, members that
 * mix alphabets, SPK_MAX_CHARS and one more, escaped binary members short
 * and longer than SPK_ENC_BUF, UTF-8 text; the sizes the format promises;
 * and three hundred thousand random members of every kind, near neighbours
 * among them, whose stored forms are equal exactly when the members are.
 *
 * Built with the server's allocator, and under the sanitizers (where the
 * members are exact allocations, so a read past one is reported, and an
 * allocation not freed is a leak). SPK_TEST=<pattern> runs the tests whose
 * names match it alone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "setpack.h"
#include "zmalloc.h"

/* --- Helpers --- */

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static uint64_t rng(uint64_t *x) {
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

/* The alphabets, in order, as the format gives them; and a character of
 * each that the ones before it lack (0 for the first). */
enum { HEX, LOWER, WORD, ALPHABETS };
static const char *const alphabet[ALPHABETS] = {
    "0123456789abcdef",
    "abcdefghijklmnopqrstuvwxyz-_.:@/",
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_",
};
static const size_t alphabetSize[ALPHABETS] = {16, 32, 64};
static const unsigned char marker[ALPHABETS] = {0, 'z', 'Z'};

#define TAG_ESCAPE 0xF8
#define TAG_FIRST 0xF9
#define TAG_LAST 0xFE

/* A byte's place in each alphabet, -1 when it holds no such byte. */
static int refPlace[ALPHABETS][256];

static void refInit(void) {
    static int ready;
    if (ready) return;
    for (int a = 0; a < ALPHABETS; a++) {
        for (int c = 0; c < 256; c++) refPlace[a][c] = -1;
        for (size_t i = 0; alphabet[a][i]; i++) refPlace[a][(unsigned char)alphabet[a][i]] = (int)i;
        assert_int_equal(strlen(alphabet[a]), alphabetSize[a]);
    }
    ready = 1;
}

/* The bytes packing member m takes: the tag and its characters' places. */
static size_t packedSize(size_t len, int a) {
    return 1 + (len * (size_t)(4 + a) + 7) / 8;
}

/* The stored form of m, into out (len + 1 bytes), by the format's words
 * alone: the first alphabet that holds every character, packed bit by bit
 * when that saves bytes and m is at most SPK_MAX_CHARS long; else m, behind
 * the escape when its first byte is 0xF8 or more. *alpha is the alphabet
 * packed in, or -1. */
static size_t refEncode(const unsigned char *m, size_t len, unsigned char *out, int *alpha) {
    int a = -1;
    for (int i = 0; i < ALPHABETS && a < 0; i++) {
        size_t j = 0;
        while (j < len && refPlace[i][m[j]] >= 0) j++;
        if (j == len) a = i;
    }
    *alpha = -1;
    if (a >= 0 && len <= SPK_MAX_CHARS && packedSize(len, a) < len) {
        int bits = 4 + a;
        size_t n = packedSize(len, a);
        memset(out, 0, n);
        out[0] = (unsigned char)(TAG_FIRST + 2 * a + (len & 1));
        size_t pos = 0;
        for (size_t i = 0; i < len; i++)
            for (int b = bits - 1; b >= 0; b--, pos++)
                if ((refPlace[a][m[i]] >> b) & 1) out[1 + pos / 8] |= (unsigned char)(0x80 >> (pos % 8));
        *alpha = a;
        return n;
    }
    if (len > 0 && m[0] >= TAG_ESCAPE) {
        out[0] = TAG_ESCAPE;
        memcpy(out + 1, m, len);
        return len + 1;
    }
    memcpy(out, m, len);
    return len;
}

/* A member for a failure message: its length and first bytes. */
static const char *show(const unsigned char *m, size_t len) {
    static char s[3][256];
    static int which;
    char *p = s[which = (which + 1) % 3];
    int n = snprintf(p, 64, "(%zu bytes) \"", len);
    for (size_t i = 0; i < len && i < 40; i++) {
        if (m[i] >= 0x20 && m[i] < 0x7F && m[i] != '"' && m[i] != '\\')
            p[n++] = (char)m[i];
        else
            n += snprintf(p + n, 8, "\\x%02X", m[i]);
    }
    snprintf(p + n, 8, len > 40 ? "\"..." : "\"");
    return p;
}

/* Where spkEncode put a stored form. */
enum { AT_MEMBER, AT_BUF, AT_HEAP };

#define GUARD 32
#define GUARD_BYTE 0xA5

static void guardSet(unsigned char *buf, size_t size) {
    memset(buf + size, GUARD_BYTE, GUARD);
}

static void guardCheck(const unsigned char *buf, size_t size, const char *what, const unsigned char *m, size_t len) {
    for (size_t i = 0; i < GUARD; i++)
        if (buf[size + i] != GUARD_BYTE) fail_msg("%s written past its end, member %s", what, show(m, len));
}

/* Encodes member (len bytes) and checks everything of its stored form:
 * the bytes against the reference, where they are, the same bytes again
 * from another copy into another buffer, the member decoded back (from an
 * exact copy of the stored form), no buffer written past its size, every
 * allocation freed. Copies the stored form to keep (when given; len + 1
 * bytes) and returns its length; *where says where it was (when given). */
static size_t roundTrip(const unsigned char *member, size_t len, unsigned char *keep, int *where) {
    refInit();
    /* Exact allocations: ASan reports a read past the member. */
    unsigned char *m = malloc(len ? len : 1), *m2 = malloc(len ? len : 1), *ref = malloc(len + 1);
    memcpy(m, member, len);
    memcpy(m2, member, len);
    int alpha;
    size_t rlen = refEncode(m, len, ref, &alpha);

    unsigned char buf[SPK_ENC_BUF + GUARD], buf2[SPK_ENC_BUF + GUARD];
    guardSet(buf, SPK_ENC_BUF);
    guardSet(buf2, SPK_ENC_BUF);
    size_t used = zmalloc_used_memory();
    const unsigned char *s, *s2;
    size_t slen = spkEncode(m, len, buf, &s);
    guardCheck(buf, SPK_ENC_BUF, "encode buffer", m, len);
    if (slen != rlen || memcmp(s, ref, slen) != 0)
        fail_msg("member %s: stored form %s, the reference's %s", show(m, len), show(s, slen), show(ref, rlen));

    int w = s == m ? AT_MEMBER : s == buf ? AT_BUF : AT_HEAP;
    int expect = AT_BUF;
    if (alpha < 0 && (len == 0 || m[0] < TAG_ESCAPE)) expect = AT_MEMBER;
    if (alpha < 0 && len > 0 && m[0] >= TAG_ESCAPE && len + 1 > SPK_ENC_BUF) expect = AT_HEAP;
    if (w != expect) fail_msg("member %s: stored at %d, not %d", show(m, len), w, expect);
    if (w == AT_HEAP)
        assert_true(zmalloc_used_memory() > used);
    else
        assert_int_equal(zmalloc_used_memory(), used);

    /* The same bytes from another copy into another buffer. */
    size_t slen2 = spkEncode(m2, len, buf2, &s2);
    guardCheck(buf2, SPK_ENC_BUF, "encode buffer", m, len);
    if (slen2 != slen || memcmp(s2, s, slen) != 0) fail_msg("member %s: two stored forms", show(m, len));

    /* Decoded from an exact copy of the stored form. */
    unsigned char *e = malloc(slen ? slen : 1);
    unsigned char dec[SPK_DEC_BUF + GUARD];
    memcpy(e, s, slen);
    guardSet(dec, SPK_DEC_BUF);
    const unsigned char *d;
    size_t dlen = spkDecode(e, slen, dec, &d);
    guardCheck(dec, SPK_DEC_BUF, "decode buffer", m, len);
    if (dlen != len || memcmp(d, m, len) != 0)
        fail_msg("member %s: stored as %s, decoded as %s", show(m, len), show(s, slen), show(d, dlen));
    const unsigned char *at = alpha >= 0 ? dec : slen > 0 && e[0] == TAG_ESCAPE ? e + 1 : e;
    if (d != at) fail_msg("member %s: decoded in the wrong place", show(m, len));

    if (keep) memcpy(keep, s, slen);
    spkRelease(s, m, buf);
    spkRelease(s2, m2, buf2);
    assert_int_equal(zmalloc_used_memory(), used);
    free(e);
    free(ref);
    free(m2);
    free(m);
    if (where) *where = w;
    return slen;
}

static size_t roundTripStr(const char *m, int *where) {
    return roundTrip((const unsigned char *)m, strlen(m), NULL, where);
}

/* The stored form's first byte (encoded afresh). */
static int storedTag(const unsigned char *m, size_t len) {
    unsigned char buf[SPK_ENC_BUF];
    const unsigned char *s;
    size_t slen = spkEncode(m, len, buf, &s);
    int tag = slen ? s[0] : -1;
    spkRelease(s, m, buf);
    return tag;
}

/* --- Empty and short members --- */

/* Too short to pack: each is stored as itself, or escaped into the
 * buffer when its first byte is 0xF8 or more. */
static void test_setpack_empty_and_short(void **state) {
    (void)state;
    int where;
    unsigned char m[3] = {0};
    assert_int_equal(roundTrip(m, 0, NULL, &where), 0);
    assert_int_equal(where, AT_MEMBER);
    for (int a = 0; a < 256; a++) {
        m[0] = (unsigned char)a;
        assert_int_equal(roundTrip(m, 1, NULL, &where), a < TAG_ESCAPE ? 1 : 2);
        assert_int_equal(where, a < TAG_ESCAPE ? AT_MEMBER : AT_BUF);
        for (int b = 0; b < 256; b++) {
            m[1] = (unsigned char)b;
            assert_int_equal(roundTrip(m, 2, NULL, &where), a < TAG_ESCAPE ? 2 : 3);
            assert_int_equal(where, a < TAG_ESCAPE ? AT_MEMBER : AT_BUF);
        }
    }
    /* Three characters of any alphabet take three bytes at best packed:
     * each is stored as itself. */
    uint64_t x = 1;
    for (int i = 0; i < 20000; i++) {
        for (int j = 0; j < 3; j++) {
            int a = (int)(rng(&x) % ALPHABETS);
            m[j] = (unsigned char)alphabet[a][rng(&x) % alphabetSize[a]];
        }
        assert_int_equal(roundTrip(m, 3, NULL, &where), 3);
        assert_int_equal(where, AT_MEMBER);
    }
}

/* --- Every length in each alphabet --- */

/* Members of each alphabet (one character the alphabets before it lack
 * among them), of every length to 200: the characters in turn, the first
 * and the last place alone (all bits clear, all set), random ones. Each is
 * packed in its alphabet, to exactly 1 + ceil(len * bits / 8) bytes, when
 * that saves bytes and it is at most SPK_MAX_CHARS long, else stored as
 * itself. */
static void test_setpack_every_length(void **state) {
    (void)state;
    refInit();
    uint64_t x = 2;
    unsigned char m[200];
    for (int a = 0; a < ALPHABETS; a++) {
        const char *abc = alphabet[a];
        size_t size = alphabetSize[a];
        for (size_t len = 0; len <= 200; len++) {
            for (int v = 0; v < 12; v++) {
                for (size_t i = 0; i < len; i++) {
                    size_t p = v == 0   ? (i * 7 + len) % size
                               : v == 1 ? 0
                               : v == 2 ? size - 1
                                        : rng(&x) % size;
                    m[i] = (unsigned char)abc[p];
                }
                if (a > 0 && len > 0) m[rng(&x) % len] = marker[a];
                int where;
                size_t slen = roundTrip(m, len, NULL, &where);
                if (len <= SPK_MAX_CHARS && packedSize(len, a) < len) {
                    assert_int_equal(slen, packedSize(len, a));
                    assert_int_equal(where, AT_BUF);
                    assert_int_equal(storedTag(m, len), TAG_FIRST + 2 * a + (int)(len & 1));
                } else {
                    assert_int_equal(slen, len);
                    assert_int_equal(where, AT_MEMBER);
                }
            }
        }
    }
}

/* --- Sizes --- */

static void test_setpack_sizes(void **state) {
    (void)state;
    int where;
    /* The figures of the format's description. */
    assert_int_equal(roundTripStr("thequickbrownfoxjumpsovr", &where), 16); /* 24 lowercase */
    assert_int_equal(where, AT_BUF);
    assert_int_equal(roundTripStr("d41d8cd98f00b204e9800998ecf8427e", &where), 17); /* 32 hex */
    assert_int_equal(where, AT_BUF);
    /* Packed only when the tag and the packed bytes are fewer than the
     * characters: hex from 4, lowercase from 6, base64url from 8. */
    static const struct {
        const char *m;
        size_t stored;
    } cases[] = {
        {"abc", 3}, {"abcd", 3}, {"0123", 3}, {"01234", 4}, {"012345", 4},
        {"zzzz", 4}, {"zzzzz", 5}, {"zzzzzz", 5}, {"zzzzzzz", 6}, {"zzzzzzzz", 6},
        {"ZZZZZ", 5}, {"ZZZZZZ", 6}, {"ZZZZZZZ", 7}, {"ZZZZZZZZ", 7}, {"ZZZZZZZZZ", 8},
        {"user-1234", 8}, {"Hello_World", 10}, {"hello.world", 8},
    };
    for (size_t i = 0; i < COUNT(cases); i++) {
        size_t slen = roundTripStr(cases[i].m, &where);
        if (slen != cases[i].stored) fail_msg("\"%s\": %zu bytes, not %zu", cases[i].m, slen, cases[i].stored);
        assert_int_equal(where, slen < strlen(cases[i].m) ? AT_BUF : AT_MEMBER);
    }
    /* The biggest packed members: 128 base64url characters fill the
     * buffer exactly (the guard past it is checked). */
    unsigned char m[SPK_MAX_CHARS];
    memset(m, 'f', sizeof(m));
    assert_int_equal(roundTrip(m, SPK_MAX_CHARS, NULL, &where), 1 + SPK_MAX_CHARS / 2);
    memset(m, 'z', sizeof(m));
    assert_int_equal(roundTrip(m, SPK_MAX_CHARS, NULL, &where), 1 + SPK_MAX_CHARS * 5 / 8);
    memset(m, 'Z', sizeof(m));
    assert_int_equal(roundTrip(m, SPK_MAX_CHARS, NULL, &where), SPK_ENC_BUF);
    assert_int_equal(where, AT_BUF);
}

/* --- Members mixing alphabets --- */

/* The first alphabet that holds every character packs a member: digits
 * rule out the lowercase one, capitals both smaller ones, '.', ':', '@'
 * and '/' the base64url one; a member needing both sides is stored as
 * itself. */
static void test_setpack_mixed_alphabets(void **state) {
    (void)state;
    static const struct {
        const char *m;
        int alpha;
    } cases[] = {
        {"deadbeef01", HEX},
        {"550e8400e29b41d4a716446655440000", HEX},
        {"dead-beef", LOWER},
        {"hello.world", LOWER},
        {"a/b/c/d/e", LOWER},
        {"email@example.com", LOWER},
        {"tag:music:jazz", LOWER},
        {"deadbeef-01", WORD},
        {"550e8400-e29b-41d4-a716-446655440000", WORD},
        {"Hello_World", WORD},
        {"ABCDEF0123", WORD},
        {"dGhpcyBpcyBiYXNlNjQ", WORD},
        {"user:1234", -1},
        {"Hello.World", -1},
        {"path/to/file_1", -1},
        {"dGhpcyBpcyBiYXNlNjQ=", -1},
        {"hello world", -1},
        {"user@Example.com", -1},
    };
    for (size_t i = 0; i < COUNT(cases); i++) {
        const unsigned char *m = (const unsigned char *)cases[i].m;
        size_t len = strlen(cases[i].m);
        int where, a = cases[i].alpha;
        size_t slen = roundTrip(m, len, NULL, &where);
        if (a >= 0) {
            if (storedTag(m, len) != TAG_FIRST + 2 * a + (int)(len & 1))
                fail_msg("\"%s\": not packed in alphabet %d", cases[i].m, a);
            assert_int_equal(slen, packedSize(len, a));
        } else {
            if (where != AT_MEMBER) fail_msg("\"%s\": not stored as itself", cases[i].m);
            assert_int_equal(slen, len);
        }
    }

    /* Random members of characters from two or three alphabets, a byte
     * from none of them now and then (NUL, a space, DEL, 0x80). */
    static const unsigned char other[] = {0, ' ', '=', '+', 0x7F, 0x80, 0xC3};
    uint64_t x = 3;
    unsigned char m[160];
    for (int i = 0; i < 50000; i++) {
        size_t len = rng(&x) % 160;
        unsigned which = 1 + (unsigned)(rng(&x) % 7);
        for (size_t j = 0; j < len; j++) {
            int a;
            do a = (int)(rng(&x) % ALPHABETS);
            while (!(which & (1u << a)));
            m[j] = (unsigned char)alphabet[a][rng(&x) % alphabetSize[a]];
        }
        if (len > 0 && rng(&x) % 8 == 0) m[rng(&x) % len] = other[rng(&x) % COUNT(other)];
        roundTrip(m, len, NULL, NULL);
    }
}

/* --- The longest packed members --- */

/* SPK_MAX_CHARS characters are packed, one more are stored as themselves,
 * in each alphabet; so are longer ones. */
static void test_setpack_max_chars(void **state) {
    (void)state;
    uint64_t x = 4;
    unsigned char m[SPK_MAX_CHARS * 4];
    for (int a = 0; a < ALPHABETS; a++) {
        for (int v = 0; v < 100; v++) {
            for (size_t i = 0; i < sizeof(m); i++) m[i] = (unsigned char)alphabet[a][rng(&x) % alphabetSize[a]];
            if (a > 0) m[rng(&x) % (SPK_MAX_CHARS - 1)] = marker[a];
            int where;
            assert_int_equal(roundTrip(m, SPK_MAX_CHARS, NULL, &where), packedSize(SPK_MAX_CHARS, a));
            assert_int_equal(where, AT_BUF);
            assert_int_equal(storedTag(m, SPK_MAX_CHARS), TAG_FIRST + 2 * a);
            assert_int_equal(roundTrip(m, SPK_MAX_CHARS - 1, NULL, &where), packedSize(SPK_MAX_CHARS - 1, a));
            assert_int_equal(storedTag(m, SPK_MAX_CHARS - 1), TAG_FIRST + 2 * a + 1);
            size_t longer[] = {SPK_MAX_CHARS + 1, SPK_MAX_CHARS + 2, SPK_MAX_CHARS * 2, sizeof(m)};
            for (size_t i = 0; i < COUNT(longer); i++) {
                assert_int_equal(roundTrip(m, longer[i], NULL, &where), longer[i]);
                assert_int_equal(where, AT_MEMBER);
            }
        }
    }
}

/* --- Escaped members --- */

/* A member whose first byte is 0xF8..0xFF is stored behind the escape,
 * packable characters after it or not: in the buffer while that holds it,
 * else in an allocation spkRelease frees (roundTrip checks the bytes the
 * allocator holds before and after; ASan would report a leak). */
static void test_setpack_escaped(void **state) {
    (void)state;
    uint64_t x = 5;
    const size_t lens[] = {1, 2, 3, 4, 17, 50, SPK_ENC_BUF - 2, SPK_ENC_BUF - 1, SPK_ENC_BUF, SPK_ENC_BUF + 1,
                           SPK_MAX_CHARS, SPK_MAX_CHARS + 1, 200, 1000, 5000};
    unsigned char *m = malloc(5000);
    for (int first = TAG_ESCAPE; first <= 0xFF; first++) {
        for (size_t l = 0; l < COUNT(lens); l++) {
            size_t len = lens[l];
            for (int v = 0; v < 3; v++) {
                /* Random bytes; hex after the first; the escape again. */
                for (size_t i = 0; i < len; i++) {
                    if (v == 0) m[i] = (unsigned char)rng(&x);
                    if (v == 1) m[i] = (unsigned char)alphabet[HEX][rng(&x) % 16];
                    if (v == 2) m[i] = TAG_ESCAPE;
                }
                m[0] = (unsigned char)first;
                unsigned char *stored = malloc(len + 1);
                int where;
                assert_int_equal(roundTrip(m, len, stored, &where), len + 1);
                assert_int_equal(where, len + 1 <= SPK_ENC_BUF ? AT_BUF : AT_HEAP);
                assert_int_equal(stored[0], TAG_ESCAPE);
                assert_memory_equal(stored + 1, m, len);
                free(stored);
            }
        }
    }
    /* The allocation itself: held until spkRelease. */
    memset(m, 0xFF, 5000);
    unsigned char buf[SPK_ENC_BUF];
    const unsigned char *s;
    size_t used = zmalloc_used_memory();
    assert_int_equal(spkEncode(m, 5000, buf, &s), 5001);
    assert_true(s != m && s != buf);
    assert_true(zmalloc_used_memory() >= used + 5001);
    spkRelease(s, m, buf);
    assert_int_equal(zmalloc_used_memory(), used);
    free(m);
}

/* --- UTF-8 text --- */

/* No UTF-8 text starts with 0xF8..0xFF: text outside the alphabets is
 * stored as itself, the member's own bytes (*out is the member). */
static void test_setpack_utf8(void **state) {
    (void)state;
    static const char *const text[] = {
        "\xC3\xA9",                             /* é */
        "caf\xC3\xA9",                          /* café */
        "\xC3\xA9t\xC3\xA9",                    /* été */
        "\xC3\xBC" "ber",                       /* über */
        "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E", /* 日本語 */
        "\xF0\x9F\x98\x80",                     /* an emoji: 0xF0 < 0xF8 */
        "\xF4\x8F\xBF\xBF",                     /* U+10FFFF */
        "\xD0\xBF\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82",
        "abcdef\xC3\xA9",                       /* hex then not */
    };
    for (size_t i = 0; i < COUNT(text); i++) {
        int where;
        size_t len = strlen(text[i]);
        assert_int_equal(roundTripStr(text[i], &where), len);
        if (where != AT_MEMBER) fail_msg("%s: not stored as itself", show((const unsigned char *)text[i], len));
    }
    /* Random text of two to four-byte characters, ASCII among them, as
     * long as 300 bytes. */
    uint64_t x = 6;
    unsigned char m[320];
    for (int i = 0; i < 20000; i++) {
        size_t target = 1 + rng(&x) % 300, len = 0;
        while (len < target) {
            uint32_t r = (uint32_t)rng(&x), c;
            switch (r % 5) {
            case 0: c = 0x61 + r / 5 % 26; break;
            case 1: c = 0x80 + r / 5 % 0x780; break;
            case 2: c = 0x800 + r / 5 % 0xD000; break;
            case 3: c = 0x10000 + r / 5 % 0x100000; break;
            default: c = 0xC0 + r / 5 % 0x40; break;
            }
            if (c < 0x80) {
                m[len++] = (unsigned char)c;
            } else if (c < 0x800) {
                m[len++] = (unsigned char)(0xC0 | c >> 6);
                m[len++] = (unsigned char)(0x80 | (c & 0x3F));
            } else if (c < 0x10000) {
                m[len++] = (unsigned char)(0xE0 | c >> 12);
                m[len++] = (unsigned char)(0x80 | (c >> 6 & 0x3F));
                m[len++] = (unsigned char)(0x80 | (c & 0x3F));
            } else {
                m[len++] = (unsigned char)(0xF0 | c >> 18);
                m[len++] = (unsigned char)(0x80 | (c >> 12 & 0x3F));
                m[len++] = (unsigned char)(0x80 | (c >> 6 & 0x3F));
                m[len++] = (unsigned char)(0x80 | (c & 0x3F));
            }
        }
        int where, ascii = 1;
        for (size_t j = 0; j < len; j++) ascii &= m[j] < 0x80;
        size_t slen = roundTrip(m, len, NULL, &where);
        if (!ascii && (where != AT_MEMBER || slen != len)) fail_msg("%s: not stored as itself", show(m, len));
    }
}

/* --- Injectivity and canonical forms --- */

#define INJ_MEMBERS 300000
#define INJ_MAX_LEN 150

static const unsigned char *sortBytes;
static const uint32_t *sortOff, *sortLen;

static int byBytes(const void *pa, const void *pb) {
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    uint32_t la = sortLen[a], lb = sortLen[b];
    int c = memcmp(sortBytes + sortOff[a], sortBytes + sortOff[b], la < lb ? la : lb);
    return c ? c : (la > lb) - (la < lb);
}

static void sortBy(uint32_t *order, size_t n, const unsigned char *bytes, const uint32_t *off, const uint32_t *len) {
    for (size_t i = 0; i < n; i++) order[i] = (uint32_t)i;
    sortBytes = bytes, sortOff = off, sortLen = len;
    qsort(order, n, sizeof(*order), byBytes);
}

static int sameBytes(const unsigned char *bytes, const uint32_t *off, const uint32_t *len, uint32_t a, uint32_t b) {
    return len[a] == len[b] && memcmp(bytes + off[a], bytes + off[b], len[a]) == 0;
}

/* A random member into m (INJ_MAX_LEN + 1 bytes), often a near neighbour
 * of the one before it (prev, plen): a character more or fewer, one
 * character a place away, the escape before it, or its own stored form.
 * Short members of a few characters repeat. */
static size_t genMember(uint64_t *x, const unsigned char *prev, size_t plen, unsigned char *m) {
    size_t len = rng(x) % 141;
    switch (rng(x) % 9) {
    case 0:
    case 1:
    case 2: { /* one alphabet */
        int a = (int)(rng(x) % ALPHABETS);
        for (size_t i = 0; i < len; i++) m[i] = (unsigned char)alphabet[a][rng(x) % alphabetSize[a]];
        return len;
    }
    case 3: /* the three alphabets mixed */
        for (size_t i = 0; i < len; i++) {
            int a = (int)(rng(x) % ALPHABETS);
            m[i] = (unsigned char)alphabet[a][rng(x) % alphabetSize[a]];
        }
        return len;
    case 4: /* raw bytes, the first 0xF8 or more half the time */
        for (size_t i = 0; i < len; i++) m[i] = (unsigned char)rng(x);
        if (len > 0 && rng(x) % 2) m[0] = (unsigned char)(TAG_ESCAPE + rng(x) % 8);
        return len;
    case 5: { /* a few characters of a tiny alphabet: duplicates */
        static const unsigned char tiny[] = {'0', 'a', 'z', 'Z', 0, TAG_ESCAPE, 0xFF};
        len = rng(x) % 6;
        for (size_t i = 0; i < len; i++) m[i] = tiny[rng(x) % COUNT(tiny)];
        return len;
    }
    case 6: { /* a character more or fewer than the one before */
        memcpy(m, prev, plen);
        int a = (int)(rng(x) % ALPHABETS);
        if (plen > 0 && (plen >= INJ_MAX_LEN || rng(x) % 2)) return plen - 1;
        m[plen] = (unsigned char)alphabet[a][rng(x) % alphabetSize[a]];
        return plen + 1;
    }
    case 7: { /* one character of the one before a place away in its alphabet */
        memcpy(m, prev, plen);
        if (plen == 0) return 0;
        size_t i = rng(x) % plen;
        for (int a = 0; a < ALPHABETS; a++) {
            int p = refPlace[a][m[i]];
            if (p < 0) continue;
            p = (p + (rng(x) % 2 ? 1 : (int)alphabetSize[a] - 1)) % (int)alphabetSize[a];
            m[i] = (unsigned char)alphabet[a][p];
            break;
        }
        return plen;
    }
    default: /* the escape before the one before, or its stored form */
        if (plen < INJ_MAX_LEN && rng(x) % 2) {
            m[0] = TAG_ESCAPE;
            memcpy(m + 1, prev, plen);
            return plen + 1;
        } else {
            unsigned char buf[SPK_ENC_BUF];
            const unsigned char *s;
            size_t slen = spkEncode(prev, plen, buf, &s);
            if (slen > INJ_MAX_LEN) slen = INJ_MAX_LEN;
            memcpy(m, s, slen);
            spkRelease(s, prev, buf);
            return slen;
        }
    }
}

/* Three hundred thousand members of every kind, each round-tripped: their
 * stored forms are canonical (a packed one starts with a tag 0xF9..0xFE, a
 * raw one with a byte below 0xF8 or the escape, never 0xFF), two stored
 * forms are equal only when their members are (sorted by stored form), and
 * equal members have equal stored forms (sorted by member). */
static void test_setpack_injectivity(void **state) {
    (void)state;
    refInit();
    size_t n = INJ_MEMBERS;
    unsigned char *mem = malloc(n * (INJ_MAX_LEN + 1)), *sto = malloc(n * (INJ_MAX_LEN + 2));
    uint32_t *moff = malloc(n * sizeof(uint32_t)), *mlen = malloc(n * sizeof(uint32_t));
    uint32_t *soff = malloc(n * sizeof(uint32_t)), *slen = malloc(n * sizeof(uint32_t));
    uint32_t *order = malloc(n * sizeof(uint32_t));
    size_t mused = 0, sused = 0, packed[ALPHABETS] = {0}, escaped = 0, heap = 0, raw = 0;
    uint64_t x = 7;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *prev = i ? mem + moff[i - 1] : mem;
        size_t len = genMember(&x, prev, i ? mlen[i - 1] : 0, mem + mused);
        assert_true(len <= INJ_MAX_LEN);
        moff[i] = (uint32_t)mused, mlen[i] = (uint32_t)len;
        mused += len;
        int where;
        unsigned char *s = sto + sused;
        size_t sl = roundTrip(mem + moff[i], len, s, &where);
        soff[i] = (uint32_t)sused, slen[i] = (uint32_t)sl;
        sused += sl;
        /* Canonical: the first byte tells the form. */
        if (sl > 0 && s[0] >= TAG_FIRST) {
            if (s[0] > TAG_LAST) fail_msg("member %s: stored with first byte 0x%02X", show(mem + moff[i], len), s[0]);
            int a = (s[0] - TAG_FIRST) >> 1;
            assert_int_equal(where, AT_BUF);
            assert_int_equal(s[0] & 1, (TAG_FIRST & 1) ^ (len & 1));
            assert_int_equal(sl, packedSize(len, a));
            assert_true(sl < len && len <= SPK_MAX_CHARS);
            packed[a]++;
        } else if (sl > 0 && s[0] == TAG_ESCAPE) {
            assert_int_equal(sl, len + 1);
            assert_true(mem[moff[i]] >= TAG_ESCAPE);
            escaped++;
            heap += where == AT_HEAP;
        } else {
            assert_int_equal(sl, len);
            assert_int_equal(where, AT_MEMBER);
            raw++;
        }
    }

    /* Equal stored forms: equal members. */
    sortBy(order, n, sto, soff, slen);
    size_t forms = 1;
    for (size_t i = 1; i < n; i++) {
        uint32_t a = order[i - 1], b = order[i];
        if (!sameBytes(sto, soff, slen, a, b)) {
            forms++;
            continue;
        }
        if (!sameBytes(mem, moff, mlen, a, b))
            fail_msg("members %s and %s have one stored form %s", show(mem + moff[a], mlen[a]),
                     show(mem + moff[b], mlen[b]), show(sto + soff[a], slen[a]));
    }
    /* Equal members: equal stored forms. */
    sortBy(order, n, mem, moff, mlen);
    size_t members = 1;
    for (size_t i = 1; i < n; i++) {
        uint32_t a = order[i - 1], b = order[i];
        if (!sameBytes(mem, moff, mlen, a, b)) {
            members++;
            continue;
        }
        if (!sameBytes(sto, soff, slen, a, b)) fail_msg("member %s has two stored forms", show(mem + moff[a], mlen[a]));
    }
    assert_int_equal(forms, members);
    /* The run reached every form, and members repeat. */
    for (int a = 0; a < ALPHABETS; a++)
        if (packed[a] < 10000) fail_msg("only %zu members packed in alphabet %d", packed[a], a);
    assert_true(escaped > 10000 && heap > 1000 && raw > 10000);
    assert_true(n - members > 10000);

    free(order);
    free(slen);
    free(soff);
    free(mlen);
    free(moff);
    free(sto);
    free(mem);
}

int main(void) {
    /* SPK_TEST=<pattern> runs the tests whose names match it alone. */
    if (getenv("SPK_TEST")) cmocka_set_test_filter(getenv("SPK_TEST"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_setpack_empty_and_short),
        cmocka_unit_test(test_setpack_every_length),
        cmocka_unit_test(test_setpack_sizes),
        cmocka_unit_test(test_setpack_mixed_alphabets),
        cmocka_unit_test(test_setpack_max_chars),
        cmocka_unit_test(test_setpack_escaped),
        cmocka_unit_test(test_setpack_utf8),
        cmocka_unit_test(test_setpack_injectivity),
    };
    return cmocka_run_group_tests_name("setpack", tests, NULL, NULL);
}
