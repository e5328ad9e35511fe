/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * codec-study.c - how well, and how fast, candidate codecs code values one
 * by one (issue #46): our symbol table (src/symtab.c) and zstd with and
 * without a dictionary trained by zstd's ZDICT, at several sizes.
 *
 *   codec-study FILE [TRAIN_PERCENT]
 *
 * FILE holds one value a line. The lines are shuffled with a fixed seed;
 * the first TRAIN_PERCENT (default 20) train, the rest are coded one by
 * one. For each codec: input bytes / coded bytes over the held-out values
 * (higher is better), and the median over 5 passes of ns a value to code
 * and to decode. zstd frames are magicless, with no checksum, no
 * dictionary id and no content size (a server keeps the length beside the
 * value), so their overhead is what a server would pay. The rows "server's
 * dict" train a 32 KB dictionary as src/strcomp.c does (fastCover with
 * fixed parameters, on as many training values as 256 KiB hold), at the
 * server's level 3 and at 1 and --fast=1 for comparison. The last two rows
 * code the held-out values in blocks of 16 (", x16"), for comparison with
 * coding blocks of objects; times are then a block's.
 *
 * Built and run by utils/bench/codec-study.
 */
#define ZSTD_STATIC_LINKING_ONLY
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define ZDICT_STATIC_LINKING_ONLY /* fastCover with fixed parameters, as the server trains */
#include <zdict.h>
#include <zstd.h>

#include "symtab.h"

typedef struct {
    unsigned char **v;
    size_t *len;
    size_t n;
} values;

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median5(double *x) {
    qsort(x, 5, sizeof(double), cmpd);
    return x[2];
}

static values readLines(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(1);
    }
    values vs = {0};
    size_t cap = 0;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t l;
    while ((l = getline(&line, &lcap, f)) > 0) {
        if (line[l - 1] == '\n') l--;
        if (l == 0) continue;
        if (vs.n == cap) {
            cap = cap ? cap * 2 : 1024;
            vs.v = realloc(vs.v, cap * sizeof(*vs.v));
            vs.len = realloc(vs.len, cap * sizeof(*vs.len));
        }
        vs.v[vs.n] = malloc(l);
        memcpy(vs.v[vs.n], line, l);
        vs.len[vs.n++] = l;
    }
    free(line);
    fclose(f);
    return vs;
}

static void shuffle(values *vs) {
    unsigned long long s = 0x2545f4914f6cdd1dULL;
    for (size_t i = vs->n - 1; i > 0; i--) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        size_t j = s % (i + 1);
        unsigned char *tv = vs->v[i];
        vs->v[i] = vs->v[j], vs->v[j] = tv;
        size_t tl = vs->len[i];
        vs->len[i] = vs->len[j], vs->len[j] = tl;
    }
}

/* A codec under study: codes into `out` (room for `cap` bytes) and decodes
 * back, each returning the bytes written, or SIZE_MAX on failure. */
typedef struct {
    const char *name;
    size_t table; /* bytes of its table or dictionary */
    size_t (*encode)(void *ctx, const unsigned char *in, size_t len, unsigned char *out, size_t cap);
    size_t (*decode)(void *ctx, const unsigned char *in, size_t len, unsigned char *out, size_t cap);
    void *ctx;
} codec;

/* Codes every held-out value 5 times and decodes the codes 5 times,
 * checking each value comes back; prints the ratio and the median ns a
 * value. A value that would grow counts at its own size: a server keeps
 * it plain. */
static void measure(const codec *c, const values *test, size_t maxlen, size_t bound) {
    unsigned char *buf = malloc(bound), *back = malloc(maxlen + 8);
    unsigned char **coded = malloc(test->n * sizeof(*coded));
    size_t *clen = malloc(test->n * sizeof(*clen));
    size_t in = 0, out = 0;
    double enc[5], dec[5];
    for (int pass = 0; pass < 5; pass++) {
        double t0 = now_ns();
        in = out = 0;
        for (size_t i = 0; i < test->n; i++) {
            size_t o = c->encode(c->ctx, test->v[i], test->len[i], buf, bound);
            if (o == SIZE_MAX) {
                fprintf(stderr, "%s: value %zu does not code\n", c->name, i);
                exit(1);
            }
            in += test->len[i];
            out += o < test->len[i] ? o : test->len[i];
            if (pass == 0) {
                coded[i] = malloc(o);
                memcpy(coded[i], buf, o);
                clen[i] = o;
            }
        }
        enc[pass] = (now_ns() - t0) / test->n;
        t0 = now_ns();
        size_t sum = 0;
        for (size_t i = 0; i < test->n; i++) sum += c->decode(c->ctx, coded[i], clen[i], back, maxlen + 8);
        dec[pass] = (now_ns() - t0) / test->n;
        for (size_t i = 0; i < test->n; i++) {
            size_t d = c->decode(c->ctx, coded[i], clen[i], back, maxlen + 8);
            if (d != test->len[i] || memcmp(back, test->v[i], d)) {
                fprintf(stderr, "%s: value %zu does not round-trip (%zu)\n", c->name, i, sum);
                exit(1);
            }
        }
    }
    printf("%-36s %8.3f %10.1f %10.1f %10zu\n", c->name, (double)in / out, median5(enc), median5(dec), c->table);
    for (size_t i = 0; i < test->n; i++) free(coded[i]);
    free(coded);
    free(clen);
    free(buf);
    free(back);
}

static size_t symEncode(void *ctx, const unsigned char *in, size_t len, unsigned char *out, size_t cap) {
    (void)cap;
    return symtabEncode(ctx, in, len, out);
}

static size_t symDecode(void *ctx, const unsigned char *in, size_t len, unsigned char *out, size_t cap) {
    return symtabDecode(ctx, in, len, out, cap);
}

static void studySymtab(const values *train, const values *test, size_t maxlen) {
    symtab *t = symtabTrain((const unsigned char *const *)train->v, train->len, train->n);
    codec c = {"symtab (255 symbols)", symtabBytes(t), symEncode, symDecode, t};
    measure(&c, test, maxlen, SYMTAB_ENCODE_BOUND(maxlen));
    symtabFree(t);
}

/* Values concatenated in blocks of `k`, as if a server coded them
 * together (Memcarrot's way): the same codec, fewer and longer inputs. */
static values blocksOf(const values *vs, size_t k, size_t *maxlen) {
    values b = {0};
    b.n = (vs->n + k - 1) / k;
    b.v = malloc(b.n * sizeof(*b.v));
    b.len = malloc(b.n * sizeof(*b.len));
    for (size_t i = 0; i < b.n; i++) {
        size_t len = 0;
        for (size_t j = i * k; j < vs->n && j < (i + 1) * k; j++) len += vs->len[j];
        b.v[i] = malloc(len);
        b.len[i] = 0;
        for (size_t j = i * k; j < vs->n && j < (i + 1) * k; j++) {
            memcpy(b.v[i] + b.len[i], vs->v[j], vs->len[j]);
            b.len[i] += vs->len[j];
        }
        if (b.len[i] > *maxlen) *maxlen = b.len[i];
    }
    return b;
}

typedef struct {
    ZSTD_CCtx *cc;
    ZSTD_DCtx *dc;
} zstdCtx;

static size_t zEncode(void *ctx, const unsigned char *in, size_t len, unsigned char *out, size_t cap) {
    size_t o = ZSTD_compress2(((zstdCtx *)ctx)->cc, out, cap, in, len);
    return ZSTD_isError(o) ? SIZE_MAX : o;
}

static size_t zDecode(void *ctx, const unsigned char *in, size_t len, unsigned char *out, size_t cap) {
    size_t o = ZSTD_decompressDCtx(((zstdCtx *)ctx)->dc, out, cap, in, len);
    return ZSTD_isError(o) ? SIZE_MAX : o;
}

/* How a dictionary is trained: ZDICT_trainFromBuffer's search of
 * parameters on every training value, or the server's way (src/strcomp.c):
 * fastCover with fixed parameters on as many as 256 KiB hold. */
enum { DICT_SEARCH, DICT_SERVER };

/* Trains a ZDICT dictionary of at most `size` bytes from the training
 * values; returns its length, 0 when training fails. */
static size_t trainDict(const values *train, size_t size, int how, int level, void **dict) {
    size_t total = 0, n = 0;
    for (; n < train->n; n++) {
        if (how == DICT_SERVER && total + train->len[n] > 256 * 1024) break;
        total += train->len[n];
    }
    unsigned char *all = malloc(total);
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(all + off, train->v[i], train->len[i]);
        off += train->len[i];
    }
    *dict = malloc(size);
    size_t dlen;
    double t0 = now_ns();
    if (how == DICT_SERVER) {
        ZDICT_fastCover_params_t p = {.k = 200, .d = 8, .f = 18, .accel = 1};
        p.zParams.compressionLevel = level;
        dlen = ZDICT_trainFromBuffer_fastCover(*dict, size, all, train->len, (unsigned)n, p);
    } else {
        dlen = ZDICT_trainFromBuffer(*dict, size, all, train->len, (unsigned)n);
    }
    if (how == DICT_SERVER) printf("(the server's dictionary: %zu values, trained in %.1f ms)\n", n, (now_ns() - t0) / 1e6);
    free(all);
    if (ZDICT_isError(dlen)) {
        printf("zstd dict %zu KB: %s\n", size / 1024, ZDICT_getErrorName(dlen));
        return 0;
    }
    return dlen;
}

static void studyZstd(const values *train,
                      const values *test,
                      size_t maxlen,
                      size_t dictsize,
                      int how,
                      int level,
                      const char *what) {
    void *dict = NULL;
    size_t dlen = 0;
    if (dictsize && (dlen = trainDict(train, dictsize, how, level, &dict)) == 0) {
        free(dict);
        return;
    }
    zstdCtx z = {ZSTD_createCCtx(), ZSTD_createDCtx()};
    ZSTD_CDict *cd = dict ? ZSTD_createCDict(dict, dlen, level) : NULL;
    ZSTD_DDict *dd = dict ? ZSTD_createDDict(dict, dlen) : NULL;
    ZSTD_CCtx_setParameter(z.cc, ZSTD_c_format, ZSTD_f_zstd1_magicless);
    ZSTD_CCtx_setParameter(z.cc, ZSTD_c_checksumFlag, 0);
    ZSTD_CCtx_setParameter(z.cc, ZSTD_c_dictIDFlag, 0);
    ZSTD_CCtx_setParameter(z.cc, ZSTD_c_contentSizeFlag, 0);
    ZSTD_CCtx_setParameter(z.cc, ZSTD_c_compressionLevel, level);
    if (cd) ZSTD_CCtx_refCDict(z.cc, cd);
    ZSTD_DCtx_setParameter(z.dc, ZSTD_d_format, ZSTD_f_zstd1_magicless);
    if (dd) ZSTD_DCtx_refDDict(z.dc, dd);
    char name[64], lv[16];
    snprintf(lv, sizeof(lv), level < 0 ? "--fast=%d" : "-%d", level < 0 ? -level : level);
    if (dictsize) {
        snprintf(name, sizeof(name), "zstd %s, %zu KB %s%s", lv, dictsize / 1024,
                 how == DICT_SERVER ? "server's dict" : "dictionary", what);
    } else {
        snprintf(name, sizeof(name), "zstd %s, no dictionary%s", lv, what);
    }
    codec c = {name, dlen, zEncode, zDecode, &z};
    measure(&c, test, maxlen, ZSTD_compressBound(maxlen));
    ZSTD_freeCCtx(z.cc);
    ZSTD_freeDCtx(z.dc);
    ZSTD_freeCDict(cd);
    ZSTD_freeDDict(dd);
    free(dict);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: codec-study FILE [TRAIN_PERCENT]\n");
        return 2;
    }
    int pct = argc > 2 ? atoi(argv[2]) : 20;
    values all = readLines(argv[1]);
    shuffle(&all);
    size_t ntrain = all.n * pct / 100, maxlen = 0, bytes = 0;
    for (size_t i = 0; i < all.n; i++) {
        if (all.len[i] > maxlen) maxlen = all.len[i];
        bytes += all.len[i];
    }
    values train = {all.v, all.len, ntrain};
    values test = {all.v + ntrain, all.len + ntrain, all.n - ntrain};
    printf("%s: %zu values, %.1f bytes on average; %zu train, %zu held out\n", argv[1], all.n,
           (double)bytes / all.n, train.n, test.n);
    printf("%-36s %8s %10s %10s %10s\n", "codec", "ratio", "code ns", "decode ns", "table B");
    studySymtab(&train, &test, maxlen);
    studyZstd(&train, &test, maxlen, 0, DICT_SEARCH, 3, "");
    static const size_t dicts[] = {16 << 10, 32 << 10, 64 << 10, 112 << 10};
    for (size_t i = 0; i < sizeof(dicts) / sizeof(dicts[0]); i++)
        studyZstd(&train, &test, maxlen, dicts[i], DICT_SEARCH, 3, "");
    studyZstd(&train, &test, maxlen, 64 << 10, DICT_SEARCH, 9, "");
    /* The server's: 32 KB from 256 KiB of samples, at level 3, 1 and fast 1. */
    static const int levels[] = {3, 1, -1};
    for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
        studyZstd(&train, &test, maxlen, 32 << 10, DICT_SERVER, levels[i], "");
    size_t bmax = maxlen;
    values blocks = blocksOf(&test, 16, &bmax);
    studyZstd(&train, &blocks, bmax, 64 << 10, DICT_SEARCH, 3, ", x16");
    studyZstd(&train, &blocks, bmax, 0, DICT_SEARCH, 3, ", x16");
    return 0;
}
