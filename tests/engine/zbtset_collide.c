/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Finds members whose keys collide, for zsColliders in zbtset_diff.h: a
 * keyed tree's key is the top ZBT_KEY_BITS of a member's seeded siphash, so
 * among random members those that share one are rare, and a run of equal
 * keys (ordered by member bytes, over several leaves) never forms. This
 * hashes 2^logn candidate members (named as zsColliderName names them: the
 * two must agree), sorts them by key and prints groups as "size, i...":
 * the largest groups, then groups of eight, five, three and two.
 *
 *   make build/engine/zbtset_collide && build/engine/zbtset_collide 24 27
 *
 * (2^27 candidates: half a minute and 2 GiB.)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t siphash(const uint8_t *in, const size_t inlen, const uint8_t *k);

static const uint8_t seed[16] = {'z', 'b', 't', 's', 'e', 't', ' ', 'u', 'n', 'i', 't', ' ', 't', 'e', 's', 't'};

/* The same as zsColliderName in zbtset_diff.h. */
static size_t colliderName(uint32_t i, unsigned char *buf) {
    static const int lens[8] = {0, 24, 30, 31, 64, 65, 90, 200};
    int n = snprintf((char *)buf, 16, "c%u", i);
    int len = lens[(uint32_t)(i * 2654435761u) >> 29];
    for (int j = n; j < len; j++) buf[j] = (unsigned char)"-=+."[(i + (uint32_t)j) & 3];
    return (size_t)(len > n ? len : n);
}

typedef struct group {
    uint32_t at, size; /* Into the sorted candidates. */
} group;

static int bySizeDesc(const void *a, const void *b) {
    const group *x = a, *y = b;
    if (x->size != y->size) return x->size > y->size ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

static int line;

/* Prints a token, breaking lines at 110 columns. */
static void token(const char *tok) {
    int n = (int)strlen(tok);
    if (line && line + 1 + n > 110) {
        printf("\n");
        line = 0;
    }
    printf("%s%s", line ? " " : "    ", tok);
    line += (line ? 1 : 4) + n;
}

static void emit(const uint64_t *a, const group *g) {
    char buf[16];
    snprintf(buf, sizeof(buf), "%u,", g->size);
    token(buf);
    for (uint32_t k = 0; k < g->size; k++) {
        snprintf(buf, sizeof(buf), "%u,", (uint32_t)a[g->at + k]);
        token(buf);
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s key-bits log2-candidates\n", argv[0]);
        return 2;
    }
    int bits = atoi(argv[1]), logn = atoi(argv[2]);
    if (bits < 8 || bits > 32 || logn < 10 || logn > 31) return 2;
    uint32_t n = 1u << logn;
    /* (key << 32 | i), sorted by key with two 16-bit radix passes. */
    uint64_t *a = malloc(sizeof(uint64_t) * n), *b = malloc(sizeof(uint64_t) * n);
    if (!a || !b) return 1;
    unsigned char buf[256];
    for (uint32_t i = 0; i < n; i++) {
        size_t len = colliderName(i, buf);
        a[i] = (siphash(buf, len, seed) >> (64 - bits)) << 32 | i;
    }
    static uint32_t count[65537];
    for (int pass = 0; pass < 2; pass++) {
        int shift = 32 + 16 * pass;
        memset(count, 0, sizeof(count));
        for (uint32_t i = 0; i < n; i++) count[((a[i] >> shift) & 0xffff) + 1]++;
        for (int d = 0; d < 65536; d++) count[d + 1] += count[d];
        for (uint32_t i = 0; i < n; i++) b[count[(a[i] >> shift) & 0xffff]++] = a[i];
        uint64_t *t = a;
        a = b;
        b = t;
    }
    size_t ngroups = 0, cap = 1 << 20;
    group *gs = malloc(sizeof(group) * cap);
    for (uint32_t i = 0, j; i < n; i = j) {
        for (j = i; j < n && a[j] >> 32 == a[i] >> 32;) j++;
        if (j - i < 2) continue;
        if (ngroups == cap) gs = realloc(gs, sizeof(group) * (cap *= 2));
        gs[ngroups++] = (group){i, j - i};
    }
    /* The largest eight; then, in the order of their keys, 40 groups each
     * of eight, five and three members, 60 of two. */
    qsort(gs, ngroups, sizeof(group), bySizeDesc);
    for (size_t i = 0; i < 8 && i < ngroups; i++) emit(a, &gs[i]);
    const uint32_t sizes[] = {8, 5, 3, 2}, wanted[] = {40, 40, 40, 60};
    for (int s = 0; s < 4; s++) {
        group *pick = malloc(sizeof(group) * wanted[s]);
        uint32_t got = 0;
        for (size_t i = 8; i < ngroups && got < wanted[s]; i++)
            if (gs[i].size == sizes[s]) pick[got++] = gs[i];
        for (uint32_t i = 0; i < got; i++) emit(a, &pick[i]);
        free(pick);
    }
    printf("\n");
    free(gs);
    free(a);
    free(b);
    return 0;
}
