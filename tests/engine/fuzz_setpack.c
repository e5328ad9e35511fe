/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * libFuzzer target for the packed set members of setpack.c: the input is a
 * member, and is split into more ([length] [bytes ...], a length byte of
 * 255 taking the next two bytes, little-endian); each of those is also
 * mapped onto each alphabet (byte b becomes the alphabet's character b mod
 * its size), so that most inputs reach the packed forms. Each member's
 * stored form must be canonical (a tag 0xF9..0xFE on exactly the members
 * packing saves bytes on, of the size the format gives; the escape on the
 * other members whose first byte is 0xF8 or more; else the member itself),
 * the same when encoded again from another copy into another buffer, and
 * decode to the member; two members of one input have equal stored forms
 * exactly when they are equal. Any difference, sanitizer report (a buffer
 * written past its size, an allocation spkRelease did not free) or crash
 * is a finding.
 *
 *   make fuzz-setpack FUZZ_SECONDS=600
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "setpack.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ALPHABETS 3
#define TAG_ESCAPE 0xF8
#define TAG_FIRST 0xF9
#define MAX_MEMBERS 256

static const char *const alphabet[ALPHABETS] = {
    "0123456789abcdef",
    "abcdefghijklmnopqrstuvwxyz-_.:@/",
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_",
};
static const size_t alphabetSize[ALPHABETS] = {16, 32, 64};
static uint8_t holds[ALPHABETS][256];

/* The members of one input and their stored forms (copies). */
typedef struct {
    unsigned char *m, *s;
    size_t len, slen;
} member;

static member members[MAX_MEMBERS];
static size_t nmembers;

static void show(const char *what, const unsigned char *m, size_t len) {
    fprintf(stderr, "setpack: %s; member of %zu bytes:", what, len);
    for (size_t i = 0; i < len && i < 200; i++) fprintf(stderr, " %02X", m[i]);
    fprintf(stderr, "\n");
}

static void fail(const char *what, const unsigned char *m, size_t len) {
    show(what, m, len);
    abort();
}

/* The stored length the format gives m, and its first byte (-1: none). */
static size_t expected(const unsigned char *m, size_t len, int *first) {
    int a = -1;
    for (int i = 0; i < ALPHABETS && a < 0; i++) {
        size_t j = 0;
        while (j < len && holds[i][m[j]]) j++;
        if (j == len) a = i;
    }
    if (a >= 0 && len <= SPK_MAX_CHARS) {
        size_t packed = 1 + (len * (size_t)(4 + a) + 7) / 8;
        if (packed < len) {
            *first = TAG_FIRST + 2 * a + (int)(len & 1);
            return packed;
        }
    }
    if (len > 0 && m[0] >= TAG_ESCAPE) {
        *first = TAG_ESCAPE;
        return len + 1;
    }
    *first = len ? m[0] : -1;
    return len;
}

static void check(const unsigned char *member0, size_t len) {
    /* Exact copies: ASan reports a read past either. */
    unsigned char *m = malloc(len ? len : 1), *m2 = malloc(len ? len : 1);
    memcpy(m, member0, len);
    memcpy(m2, member0, len);
    unsigned char buf[SPK_ENC_BUF], buf2[SPK_ENC_BUF], dec[SPK_DEC_BUF];
    const unsigned char *s, *s2, *d;
    size_t slen = spkEncode(m, len, buf, &s);
    int first;
    size_t elen = expected(m, len, &first);
    if (slen != elen) fail("stored length not the format's", m, len);
    if ((slen ? s[0] : -1) != first) fail("stored form's first byte not the format's", m, len);
    if (first == TAG_ESCAPE && memcmp(s + 1, m, len) != 0) fail("escaped member not itself", m, len);
    if (first >= 0 && first < TAG_ESCAPE && s != m) fail("raw member not stored as itself", m, len);
    if (first > TAG_ESCAPE && s != buf) fail("packed member not in the buffer", m, len);

    size_t slen2 = spkEncode(m2, len, buf2, &s2);
    if (slen2 != slen || memcmp(s2, s, slen) != 0) fail("two stored forms", m, len);

    unsigned char *e = malloc(slen ? slen : 1);
    memcpy(e, s, slen);
    size_t dlen = spkDecode(e, slen, dec, &d);
    if (dlen != len || memcmp(d, m, len) != 0) fail("decoded differently", m, len);

    spkRelease(s, m, buf);
    spkRelease(s2, m2, buf2);
    free(m2);
    if (nmembers < MAX_MEMBERS) {
        member *mb = &members[nmembers++];
        mb->m = m, mb->len = len;
        mb->s = e, mb->slen = slen;
    } else {
        free(e);
        free(m);
    }
}

/* member and its images in each alphabet. */
static void checkAll(const unsigned char *m, size_t len) {
    check(m, len);
    unsigned char *img = malloc(len ? len : 1);
    for (int a = 0; a < ALPHABETS; a++) {
        for (size_t i = 0; i < len; i++) img[i] = (unsigned char)alphabet[a][m[i] % alphabetSize[a]];
        check(img, len);
    }
    free(img);
}

static int same(const unsigned char *a, size_t alen, const unsigned char *b, size_t blen) {
    return alen == blen && memcmp(a, b, alen) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int ready;
    if (!ready) {
        for (int a = 0; a < ALPHABETS; a++)
            for (size_t i = 0; alphabet[a][i]; i++) holds[a][(unsigned char)alphabet[a][i]] = 1;
        ready = 1;
    }
    nmembers = 0;
    checkAll(data, size);
    const uint8_t *p = data, *end = data + size;
    while (p < end) {
        size_t len = *p++;
        if (len == 255) {
            len = end - p >= 2 ? (size_t)p[0] | (size_t)p[1] << 8 : 0;
            p += end - p >= 2 ? 2 : end - p;
        }
        if (len > (size_t)(end - p)) len = (size_t)(end - p);
        checkAll(p, len);
        p += len;
    }
    for (size_t i = 0; i < nmembers; i++) {
        for (size_t j = i + 1; j < nmembers; j++) {
            member *a = &members[i], *b = &members[j];
            if (same(a->m, a->len, b->m, b->len) != same(a->s, a->slen, b->s, b->slen)) {
                show("two members, one stored form, or one member, two", a->m, a->len);
                fail("the other", b->m, b->len);
            }
        }
    }
    for (size_t i = 0; i < nmembers; i++) {
        free(members[i].m);
        free(members[i].s);
    }
    return 0;
}
