/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Set members packed in fewer bits a character
 * ============================================
 *
 * What a big set of strings (hpset.c) stores for a member whose
 * characters all come from a small alphabet: the characters' places in it,
 * 4, 5 or 6 bits each, behind one tag byte. The members users put in sets
 * mostly are such: hex digests and ids, lowercase words and tags, base64url
 * and alphanumeric tokens. A 24-character lowercase member takes 16 bytes
 * instead of 24, a 32-digit hex digest 17 instead of 32.
 *
 *    alphabet  bits  characters
 *    HEX       4     0-9 a-f
 *    LOWER     5     a-z and - _ . : @ /
 *    WORD      6     0-9 A-Z a-z and - _
 *
 * A stored member is one of
 *
 *    [bytes ...]                 the member itself, when its first byte is
 *                                below 0xF8 (or it is empty)
 *    [0xF8] [bytes ...]          the member itself, escaped: its first byte
 *                                is 0xF8 or more
 *    [tag] [packed bits ...]     tag = 0xF9 + 2 * alphabet + (length & 1);
 *                                the characters' places, first character in
 *                                the high bits of the first byte, the last
 *                                byte padded with zero bits
 *
 * Bytes 0xF8..0xFF never start UTF-8 text, so no text member pays for the
 * escape. A packed member's length is what its packed bytes hold, less one
 * when the tag's parity says so: with 4 bits or more a character, a byte
 * count leaves two lengths possible, of different parities.
 *
 * Invariants: a member has exactly one stored form (the first alphabet, in
 * the order above, that holds all its characters, when packing it saves
 * bytes and it is at most SPK_MAX_CHARS long; else the member itself), so
 * two members are equal exactly when their stored forms are, and a set
 * compares and hashes stored forms without decoding them.
 */

#include "setpack.h"

#include <stdint.h>
#include <string.h>

#include "zmalloc.h"

#define TAG_ESCAPE 0xF8
#define TAG_PACKED 0xF9
#define ALPHABETS 3

static const char *const alphabet[ALPHABETS] = {
    "0123456789abcdef",
    "abcdefghijklmnopqrstuvwxyz-_.:@/",
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_",
};

/* For each byte: bit a set when alphabet a holds it; and its place there. */
static uint8_t inAlphabets[256];
static uint8_t place[ALPHABETS][256];
static int tablesReady;

static void initTables(void) {
    for (int a = 0; a < ALPHABETS; a++) {
        for (int i = 0; alphabet[a][i]; i++) {
            unsigned char ch = (unsigned char)alphabet[a][i];
            inAlphabets[ch] |= (uint8_t)(1 << a);
            place[a][ch] = (uint8_t)i;
        }
    }
    tablesReady = 1;
}

/* The smallest alphabet that holds every character of m, or -1. Four
 * running masks and no early exit: the loop is on every lookup's path
 * (SISMEMBER, SADD), and one mask would chain each step to the one before. */
static int alphabetOf(const unsigned char *m, size_t len) {
    const unsigned all = (1 << ALPHABETS) - 1;
    unsigned a = all, b = all, c = all, d = all;
    size_t i = 0;
    for (; i + 4 <= len; i += 4) {
        a &= inAlphabets[m[i]];
        b &= inAlphabets[m[i + 1]];
        c &= inAlphabets[m[i + 2]];
        d &= inAlphabets[m[i + 3]];
    }
    for (; i < len; i++) a &= inAlphabets[m[i]];
    unsigned mask = a & b & c & d;
    return mask ? __builtin_ctz(mask) : -1;
}

/* Eight characters of `bits` bits each make `bits` whole bytes: whole
 * groups are packed in a word with no branch (bits is a constant in each
 * caller below, so the loops unroll), the rest as they come. */
static inline void packBits(const unsigned char *m, size_t len, const uint8_t *pl, int bits, unsigned char *out) {
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t group = 0;
        for (int k = 0; k < 8; k++) group = (group << bits) | pl[m[i + k]];
        for (int k = bits - 1; k >= 0; k--) *out++ = (unsigned char)(group >> (8 * k));
    }
    int held = 0;
    uint32_t acc = 0;
    for (; i < len; i++) {
        acc = (acc << bits) | pl[m[i]];
        held += bits;
        if (held >= 8) {
            held -= 8;
            *out++ = (unsigned char)(acc >> held);
        }
    }
    if (held) *out = (unsigned char)(acc << (8 - held));
}

static void pack(const unsigned char *m, size_t len, int a, unsigned char *out) {
    switch (a) {
    case 0: packBits(m, len, place[0], 4, out); break;
    case 1: packBits(m, len, place[1], 5, out); break;
    default: packBits(m, len, place[2], 6, out); break;
    }
}

static void unpack(const unsigned char *in, size_t n, int a, unsigned char *out) {
    const char *abc = alphabet[a];
    int bits = 4 + a, held = 0;
    uint32_t acc = 0, symbol = (1u << bits) - 1;
    for (size_t i = 0; i < n; i++) {
        if (held < bits) {
            acc = (acc << 8) | *in++;
            held += 8;
        }
        held -= bits;
        out[i] = (unsigned char)abc[(acc >> held) & symbol];
    }
}

size_t spkEncode(const unsigned char *m, size_t len, unsigned char *buf, const unsigned char **out) {
    if (!tablesReady) initTables();
    if (len >= 3 && len <= SPK_MAX_CHARS) {
        int a = alphabetOf(m, len);
        size_t packed = a < 0 ? len : (len * (4 + a) + 7) / 8;
        if (1 + packed < len) {
            buf[0] = (unsigned char)(TAG_PACKED + 2 * a + (len & 1));
            pack(m, len, a, buf + 1);
            *out = buf;
            return 1 + packed;
        }
    }
    if (len == 0 || m[0] < TAG_ESCAPE) {
        *out = m;
        return len;
    }
    unsigned char *e = len + 1 <= SPK_ENC_BUF ? buf : zmalloc(len + 1);
    e[0] = TAG_ESCAPE;
    memcpy(e + 1, m, len);
    *out = e;
    return len + 1;
}

void spkRelease(const unsigned char *out, const unsigned char *m, const unsigned char *buf) {
    if (out != m && out != buf) zfree((void *)out);
}

size_t spkDecode(const unsigned char *e, size_t elen, unsigned char *buf, const unsigned char **out) {
    if (elen == 0 || e[0] < TAG_ESCAPE) {
        *out = e;
        return elen;
    }
    if (e[0] == TAG_ESCAPE) {
        *out = e + 1;
        return elen - 1;
    }
    int tag = e[0] - TAG_PACKED, a = tag >> 1;
    if (a >= ALPHABETS) { /* never: no tag is 0xFF */
        *out = e;
        return elen;
    }
    size_t n = (elen - 1) * 8 / (4 + a);
    if ((n & 1) != (size_t)(tag & 1)) n = n ? n - 1 : 0;
    if (n > SPK_DEC_BUF) n = SPK_DEC_BUF; /* never: only shorter members are packed */
    unpack(e + 1, n, a, buf);
    *out = buf;
    return n;
}
