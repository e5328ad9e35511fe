/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * libFuzzer target for the symbol tables of symtab.c. The input is split
 * at its first 0xFF 0x00 pair: the part before trains a table (cut into
 * samples at each 0x0A), the part after is both a value to code and a
 * string of codes to decode. The value must come back from its codes,
 * within SYMTAB_ENCODE_BOUND, with symtabDecodedLen() predicting its
 * length and a buffer one byte short refused. The codes, decoded as they
 * are into buffers of every size up to their decoded length and beyond,
 * must be refused or give exactly symtabDecodedLen() bytes, never write
 * past the buffer, and code again to the same bytes' decoding. Any
 * difference, sanitizer report or crash is a finding.
 *
 *   make fuzz-symtab FUZZ_SECONDS=600
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symtab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_SAMPLES 512

static void fail(const char *what) {
    fprintf(stderr, "symtab: %s\n", what);
    abort();
}

static void checkValue(const symtab *t, const uint8_t *v, size_t len) {
    unsigned char *code = malloc(SYMTAB_ENCODE_BOUND(len) + 1);
    size_t n = symtabEncode(t, v, len, code);
    if (n > SYMTAB_ENCODE_BOUND(len)) fail("coded past the bound");
    if (symtabDecodedLen(t, code, n) != len) fail("decoded length differs");
    unsigned char *back = malloc(len + 1);
    if (symtabDecode(t, code, n, back, len) != len || memcmp(back, v, len) != 0) fail("value does not come back");
    if (len && symtabDecode(t, code, n, back, len - 1) != SIZE_MAX) fail("short buffer taken");
    free(code);
    free(back);
}

static void checkCodes(const symtab *t, const uint8_t *c, size_t len) {
    size_t want = symtabDecodedLen(t, c, len);
    size_t top = want == SIZE_MAX ? 8 * len + 8 : want + 8;
    for (size_t cap = 0; cap <= top; cap += (cap < 64 ? 1 : 7)) {
        /* An exact allocation: a write past it is reported. */
        unsigned char *out = malloc(cap ? cap : 1);
        size_t got = symtabDecode(t, c, len, out, cap);
        if (want == SIZE_MAX && got != SIZE_MAX) fail("malformed codes decoded");
        if (want != SIZE_MAX && cap >= want && got != want) fail("well-formed codes refused");
        if (want != SIZE_MAX && cap < want && got != SIZE_MAX) fail("short buffer taken");
        if (got != SIZE_MAX && got == want && want > 0) checkValue(t, out, got);
        free(out);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t split = size;
    for (size_t i = 0; i + 1 < size; i++) {
        if (data[i] == 0xff && data[i + 1] == 0x00) {
            split = i;
            break;
        }
    }
    const unsigned char *samples[MAX_SAMPLES];
    size_t lens[MAX_SAMPLES], n = 0, start = 0;
    for (size_t i = 0; i <= split && n < MAX_SAMPLES; i++) {
        if (i == split || data[i] == 0x0a) {
            samples[n] = data + start;
            lens[n++] = i - start;
            start = i + 1;
        }
    }
    symtab *t = symtabTrain(samples, lens, n);
    if (symtabSymbols(t) > 255) fail("more than 255 symbols");
    const uint8_t *rest = split + 2 <= size ? data + split + 2 : data + size;
    size_t rlen = (size_t)(data + size - rest);
    checkValue(t, rest, rlen);
    checkValue(t, data, split);
    checkCodes(t, rest, rlen);
    symtabFree(t);
    return 0;
}
