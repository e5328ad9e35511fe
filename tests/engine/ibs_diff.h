/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Differential testing of big integer sets (ibset.c) against a model that
 * cannot be wrong in interesting ways: a sorted array of int64_t searched
 * by bisection. A stream of bytes drives both, one operation at a time,
 * and every result is compared: added or not, deleted or not, found or
 * not, the member at a rank, where a seek lands and the members a cursor
 * walks to from there, what an append accepts. The cmocka tests
 * (test_ibset.c) feed it bytes from a seeded generator, steering the sizes
 * and the kinds of values; the libFuzzer target (fuzz_ibset.c) its inputs.
 *
 * Values come from several distributions, so that every kind of block
 * forms and goes: dense small ranges (bitmap blocks, made sparse again by
 * strided and bulk deletes), random values below 10^8 (arrays of narrow
 * offsets), the whole int64 range (wide ones), clusters at spans of every
 * offset width around fixed centres, and the edges (INT64_MIN, -1, 0,
 * INT64_MAX and their neighbours). A defrag in steps runs across the
 * other operations, as the server's runs between commands.
 *
 * ibdStep() returns NULL, or what differed; the caller runs ibsCheck().
 */
#ifndef IBS_DIFF_H
#define IBS_DIFF_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibset.h"
#include "zmalloc.h"

/* --- The model --- */

typedef struct ibdModel {
    int64_t *v;
    size_t n, cap;
} ibdModel;

/* The first index whose value is >= v. */
static size_t ibdLowerBound(const ibdModel *md, int64_t v) {
    size_t lo = 0, hi = md->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (md->v[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static long ibdFind(const ibdModel *md, int64_t v) {
    size_t i = ibdLowerBound(md, v);
    return i < md->n && md->v[i] == v ? (long)i : -1;
}

static void ibdReserve(ibdModel *md, size_t n) {
    if (n <= md->cap) return;
    md->cap = md->cap * 2 > n ? md->cap * 2 : n + 64;
    md->v = realloc(md->v, md->cap * sizeof(int64_t));
}

static void ibdInsertAt(ibdModel *md, size_t i, int64_t v) {
    ibdReserve(md, md->n + 1);
    memmove(md->v + i + 1, md->v + i, (md->n - i) * sizeof(int64_t));
    md->v[i] = v;
    md->n++;
}

static void ibdRemoveRange(ibdModel *md, size_t i, size_t count) {
    memmove(md->v + i, md->v + i + count, (md->n - i - count) * sizeof(int64_t));
    md->n -= count;
}

/* Merges ascending values vals[0..k) that are not in the model yet. */
static void ibdMerge(ibdModel *md, const int64_t *vals, size_t k) {
    if (!k) return;
    ibdReserve(md, md->n + k);
    size_t i = md->n, j = k, out = md->n + k;
    while (j > 0) {
        if (i > 0 && md->v[i - 1] > vals[j - 1])
            md->v[--out] = md->v[--i];
        else
            md->v[--out] = vals[--j];
    }
    md->n += k;
}

/* Values pushed out of order, then sorted (for building big models). */
static void ibdPush(ibdModel *md, int64_t v) {
    ibdReserve(md, md->n + 1);
    md->v[md->n++] = v;
}

static int ibdCmp(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sorts, and drops duplicates. */
static void ibdSortUnique(ibdModel *md) {
    if (md->n < 2) return;
    qsort(md->v, md->n, sizeof(int64_t), ibdCmp);
    size_t out = 1;
    for (size_t i = 1; i < md->n; i++)
        if (md->v[i] != md->v[out - 1]) md->v[out++] = md->v[i];
    md->n = out;
}

static void ibdModelFree(ibdModel *md) {
    free(md->v);
    memset(md, 0, sizeof(*md));
}

/* --- The driver --- */

typedef struct ibdReader {
    const uint8_t *p, *end;
} ibdReader;

static uint8_t ibdByte(ibdReader *r) {
    return r->p < r->end ? *r->p++ : 0;
}
static uint32_t ibdU16(ibdReader *r) {
    return ibdByte(r) | (uint32_t)ibdByte(r) << 8;
}
static uint32_t ibdU32(ibdReader *r) {
    return ibdU16(r) | ibdU16(r) << 16;
}
static uint64_t ibdU64(ibdReader *r) {
    return ibdU32(r) | (uint64_t)ibdU32(r) << 32;
}
/* An index below n (n > 0), from three bytes. */
static size_t ibdIndex(ibdReader *r, size_t n) {
    return (ibdU16(r) | (uint32_t)ibdByte(r) << 16) % n;
}

/* The kinds of values (ibdState.dist steers them; IBD_MIXED takes the
 * kind from the input). */
enum {
    IBD_MIXED = -1,
    IBD_MEMBER,   /* a member of the model, or next to one */
    IBD_DENSE,    /* a small range: bitmap blocks */
    IBD_BELOW_E8, /* random below 10^8 */
    IBD_FULL,     /* random over the whole int64 range */
    IBD_CLUSTER,  /* around fixed centres, at spans of each offset width */
    IBD_EDGE,     /* INT64_MIN, -1, 0, INT64_MAX and their neighbours */
    IBD_KINDS
};

/* Where dense ranges lie: at both ends of the range, around zero (across
 * the sign) and elsewhere. */
static const int64_t ibdDenseBases[] = {
    INT64_MIN, INT64_MIN + 70000, -32768, 0, 1000000, (int64_t)1 << 40, INT64_MAX - 65535, 123456789012345};
static const uint32_t ibdDenseSpans[] = {256, 2048, 16384, 65536};

static const int64_t ibdCentres[] = {
    INT64_MIN, -((int64_t)1 << 62), -4294967296, -1, 0, 4294967296, 99999999, (int64_t)1 << 62, INT64_MAX,
    -7046029254386353131, 5764607523034234880, 1311768467463790320};

static const int64_t ibdEdges[] = {
    INT64_MIN, INT64_MIN + 1, INT64_MIN + 2, -4294967297, -4294967296, -2147483649, -2147483648, -65537, -65536, -257,
    -256, -2, -1, 0, 1, 2, 255, 256, 65535, 65536, 2147483647, 2147483648, 4294967295, 4294967296,
    INT64_MAX - 2, INT64_MAX - 1, INT64_MAX};

#define IBD_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* v + d without overflow: clamped to the range. */
static int64_t ibdAdd(int64_t v, int64_t d) {
    if (d > 0 && v > INT64_MAX - d) return INT64_MAX;
    if (d < 0 && v < INT64_MIN - d) return INT64_MIN;
    return v + d;
}

typedef struct ibdState {
    ibset *s;
    ibdModel md;
    ibsCursor cur;
    int dist; /* IBD_MIXED, or the kind of every value */
    char err[320];
    unsigned long ops;
    int defragging;    /* A defrag in steps is under way, */
    uint32_t defragAt; /* to go on from this page. */
    int64_t *tmp;      /* Values a bulk operation works on. */
    size_t tmpCap;
    /* What the run reached, to report. */
    unsigned long most, appended, refused, bulkDeleted, defrags, dismissed;
    size_t mostBitmaps, mostPages;
    size_t mostWidth[4];
} ibdState;

static const char *ibdFail(ibdState *st, const char *what, long long a, long long b) {
    snprintf(st->err, sizeof(st->err), "%s: engine %lld, model %lld (operation %lu, %zu members)", what, a, b,
             st->ops, st->md.n);
    return st->err;
}

#define IBD_EXPECT(cond, what, a, b)                                           \
    do {                                                                       \
        if (!(cond)) return ibdFail(st, what, (long long)(a), (long long)(b)); \
    } while (0)

static int64_t *ibdTmp(ibdState *st, size_t n) {
    if (n > st->tmpCap) {
        st->tmpCap = n + 1024;
        st->tmp = realloc(st->tmp, st->tmpCap * sizeof(int64_t));
    }
    return st->tmp;
}

/* A value of the given kind (IBD_MIXED: a kind from the input). */
static int64_t ibdValueOf(ibdReader *r, const ibdModel *md, int kind) {
    if (kind == IBD_MIXED) kind = ibdByte(r) % IBD_KINDS;
    switch (kind) {
    case IBD_MEMBER: {
        if (!md->n) return (int64_t)(ibdU32(r) % 1000);
        int64_t v = md->v[ibdIndex(r, md->n)];
        uint8_t b = ibdByte(r);
        if (b < 128) return v; /* itself */
        return ibdAdd(v, (int64_t)(b % 9) - 4);
    }
    case IBD_DENSE: {
        int64_t base = ibdDenseBases[ibdByte(r) % IBD_COUNT(ibdDenseBases)];
        uint32_t span = ibdDenseSpans[ibdByte(r) % IBD_COUNT(ibdDenseSpans)];
        return ibdAdd(base, (int64_t)(ibdU16(r) % span));
    }
    case IBD_BELOW_E8: return (int64_t)(ibdU32(r) % 100000000);
    case IBD_FULL: return (int64_t)ibdU64(r);
    case IBD_CLUSTER: {
        int64_t centre = ibdCentres[ibdByte(r) % IBD_COUNT(ibdCentres)];
        /* Spans of about 2^7, 2^15, 2^31 and 2^50 either side. */
        static const int shifts[] = {57, 49, 33, 14};
        int64_t off = (int64_t)(ibdU64(r) >> shifts[ibdByte(r) % 4]);
        return ibdAdd(centre, ibdByte(r) & 1 ? -off : off);
    }
    default: return ibdEdges[ibdByte(r) % IBD_COUNT(ibdEdges)];
    }
}

static int64_t ibdValue(ibdReader *r, ibdState *st) {
    /* A steered run still takes members and edges now and then. */
    int kind = st->dist;
    if (kind != IBD_MIXED) {
        uint8_t b = ibdByte(r);
        if (b < 16)
            kind = IBD_MEMBER;
        else if (b < 20)
            kind = IBD_EDGE;
    }
    return ibdValueOf(r, &st->md, kind);
}

/* Walks k steps from the model's i-th member, the cursor at it. */
static const char *ibdWalk(ibdState *st, ibsCursor *c, size_t i, int k) {
    for (int j = 0; j < k; j++) {
        IBD_EXPECT(c->value == st->md.v[i], "walk: value", c->value, st->md.v[i]);
        int more = ibsNext(c);
        int want = i + 1 < st->md.n;
        IBD_EXPECT(more == want, "walk: end", more, want);
        if (!more) break;
        i++;
    }
    return NULL;
}

static void *ibdMove(void *p) {
    size_t size = zmalloc_size(p);
    void *q = zmalloc(size);
    memcpy(q, p, size);
    zfree(p);
    return q;
}

static size_t ibdDismissMin, ibdDismissBad, ibdDismissCalls, ibdDismissBytes;

static void ibdDismissed(void *ptr, size_t size) {
    if (!ptr || size < ibdDismissMin) ibdDismissBad++;
    ibdDismissCalls++;
    ibdDismissBytes += size;
}

/* The stats add up, and the allocations they count are all in
 * ibsAllocSize. */
static const char *ibdStats(ibdState *st) {
    ibsStats s;
    ibsGetStats(st->s, &s);
    size_t sum = s.bitmapBlocks;
    for (int i = 0; i < 4; i++) {
        sum += s.arrayBlocks[i];
        if (s.arrayBlocks[i] > st->mostWidth[i]) st->mostWidth[i] = s.arrayBlocks[i];
    }
    IBD_EXPECT(sum == s.blocks, "stats: kinds of blocks", sum, s.blocks);
    if (st->md.n) IBD_EXPECT(s.blocks >= s.pages, "stats: pages without blocks", s.pages, s.blocks);
    IBD_EXPECT(s.dataBytes <= s.blockBytes, "stats: data bytes", s.dataBytes, s.blockBytes);
    IBD_EXPECT(s.blockBytes + s.indexBytes <= ibsAllocSize(st->s), "stats: alloc size", ibsAllocSize(st->s),
               s.blockBytes + s.indexBytes);
    if (st->md.n) IBD_EXPECT(s.blocks > 0, "stats: no blocks", s.blocks, st->md.n);
    if (s.bitmapBlocks > st->mostBitmaps) st->mostBitmaps = s.bitmapBlocks;
    if (s.pages > st->mostPages) st->mostPages = s.pages;
    return NULL;
}

/* Deletes the model's members [start, start + count) from the set, in one
 * of several orders. */
static const char *ibdDeleteRun(ibdState *st, size_t start, size_t count, uint8_t order) {
    ibdModel *md = &st->md;
    int64_t *vals = ibdTmp(st, count);
    memcpy(vals, md->v + start, count * sizeof(int64_t));
    for (size_t j = 0; j < count; j++) {
        size_t k;
        switch (order % 4) {
        case 0: k = j; break;                                                           /* ascending */
        case 1: k = count - 1 - j; break;                                               /* descending */
        case 2: k = j < (count + 1) / 2 ? j * 2 : (j - (count + 1) / 2) * 2 + 1; break; /* odd then even */
        default: k = (j + count / 2) % count; break;                                    /* from the middle, wrapping */
        }
        IBD_EXPECT(ibsDelete(st->s, vals[k]), "bulk delete", 0, vals[k]);
    }
    ibdRemoveRange(md, start, count);
    st->bulkDeleted += count;
    return NULL;
}

static const char *ibdAppends(ibdState *st, ibdReader *r) {
    ibdModel *md = &st->md;
    static const uint64_t steps[] = {1, 1, 1, 1, 2, 3, 7, 63, 64, 255, 256, 257, 4095, 4096, 65535, 65536, 65537,
                                     (uint64_t)1 << 20, (uint64_t)1 << 31, (uint64_t)1 << 32, (uint64_t)1 << 40,
                                     (uint64_t)1 << 62, UINT64_MAX};
    uint8_t b = ibdByte(r);
    int n = 1; /* one, a short run, or a load of up to 8,000 */
    if (b >= 240)
        n = (b - 239) * 500;
    else if (b >= 128)
        n = b % 64 + 1;
    uint8_t stepKind = ibdByte(r); /* one step for the run, or each its own */
    for (int j = 0; j < n; j++) {
        int64_t v;
        int want;
        uint8_t kind = ibdByte(r);
        /* Nothing goes past INT64_MAX: one refusal tells. */
        if (j && md->n && md->v[md->n - 1] == INT64_MAX) break;
        if (!md->n) {
            v = ibdValue(r, st);
            want = 1;
        } else if (kind < 224) {
            uint64_t step = steps[(stepKind < 128 ? stepKind : ibdByte(r)) % IBD_COUNT(steps)];
            if (step == UINT64_MAX) step = ibdU64(r) >> (ibdByte(r) % 64);
            int64_t max = md->v[md->n - 1];
            uint64_t room = (uint64_t)INT64_MAX - (uint64_t)max;
            v = step > room ? INT64_MAX : (int64_t)((uint64_t)max + step);
            want = v > max;
        } else {
            /* Not above the max: the max itself, a member, below the min,
             * between members. */
            switch (kind % 4) {
            case 0: v = md->v[md->n - 1]; break;
            case 1: v = md->v[ibdIndex(r, md->n)]; break;
            case 2: v = ibdAdd(md->v[0], -1); break;
            default: v = ibdAdd(md->v[md->n - 1], -1); break;
            }
            want = v > md->v[md->n - 1];
        }
        int ret = ibsAppend(st->s, v);
        IBD_EXPECT(ret == want, "append", ret, want);
        if (ret) {
            ibdInsertAt(md, md->n, v);
            st->appended++;
        } else {
            st->refused++;
            IBD_EXPECT(ibsLength(st->s) == md->n, "refused append: length", ibsLength(st->s), md->n);
            IBD_EXPECT(ibsContains(st->s, v) == (ibdFind(md, v) >= 0), "refused append: contains", !(ibdFind(md, v) >= 0), v);
        }
    }
    return NULL;
}

/* A run of values stepping by stride from v, inserted in some order: a
 * dense run fills bitmaps, a descending one inserts below each block's
 * first member. */
_Static_assert(56 * 128 < 7919, "a fill's scattered order is a permutation");

static const char *ibdFill(ibdState *st, ibdReader *r) {
    ibdModel *md = &st->md;
    int64_t v = ibdValue(r, st);
    uint8_t b = ibdByte(r), order = ibdByte(r);
    /* Mostly short; up to 7,168, more than a full bitmap holds. */
    size_t count = b < 200 ? (size_t)b % 64 + 1 : (size_t)(b - 199) * 128;
    int64_t stride = ibdByte(r) < 192 ? 1 : ibdByte(r) % 5 + 2;
    int64_t *vals = ibdTmp(st, count);
    size_t k = 0;
    for (; k < count; k++) {
        vals[k] = v;
        if (v > INT64_MAX - stride) {
            k++;
            break;
        }
        v += stride;
    }
    count = k;
    /* Which are new, before any goes in. */
    uint8_t *fresh = malloc(count);
    for (size_t j = 0; j < count; j++) fresh[j] = ibdFind(md, vals[j]) < 0;
    for (size_t j = 0; j < count; j++) {
        size_t at;
        switch (order % 3) {
        case 0: at = j; break;
        case 1: at = count - 1 - j; break;
        default: at = (j * 7919) % count; break; /* scattered: count < 7919, a prime */
        }
        int ret = ibsInsert(st->s, vals[at]);
        if (ret != fresh[at]) {
            free(fresh);
            return ibdFail(st, "fill: insert", ret, vals[at]);
        }
    }
    size_t n = 0;
    for (size_t j = 0; j < count; j++)
        if (fresh[j]) vals[n++] = vals[j];
    free(fresh);
    ibdMerge(md, vals, n);
    return NULL;
}

static const char *ibdStep(ibdState *st, ibdReader *r) {
    ibset *s = st->s;
    ibdModel *md = &st->md;
    ibsCursor *c = &st->cur;
    uint8_t op = ibdByte(r) % 16;
    const char *err = NULL;
    st->ops++;
    if (st->defragging) {
        st->defragAt = ibsDefragBlocks(s, st->defragAt, ibdByte(r) % 4 + 1, ibdMove);
        st->defragging = st->defragAt != 0;
    }
    switch (op) {
    case 0:
    case 1:
    case 2:
    case 3: { /* insert */
        int64_t v = ibdValue(r, st);
        int ret = ibsInsert(s, v);
        size_t i = ibdLowerBound(md, v);
        int had = i < md->n && md->v[i] == v;
        IBD_EXPECT(ret == !had, "insert", ret, v);
        if (!had) ibdInsertAt(md, i, v);
        break;
    }
    case 4:
    case 5: { /* delete */
        int64_t v = ibdValue(r, st);
        int ret = ibsDelete(s, v);
        long i = ibdFind(md, v);
        IBD_EXPECT(ret == (i >= 0), "delete", ret, v);
        if (i >= 0) ibdRemoveRange(md, (size_t)i, 1);
        break;
    }
    case 6: { /* contains, a few at once */
        int k = ibdByte(r) % 4 + 1;
        for (int j = 0; j < k; j++) {
            int64_t v = ibdValue(r, st);
            int ret = ibsContains(s, v);
            IBD_EXPECT(ret == (ibdFind(md, v) >= 0), "contains", ret, v);
        }
        break;
    }
    case 7: /* appends, one or a run (a load) */
        err = ibdAppends(st, r);
        break;
    case 8: { /* at rank: random ones, and the ends */
        if (!md->n) break;
        int k = ibdByte(r) % 4 + 1;
        for (int j = 0; j < k; j++) {
            size_t rank = ibdIndex(r, md->n);
            int64_t v = ibsAtRank(s, rank);
            IBD_EXPECT(v == md->v[rank], "at rank", v, md->v[rank]);
        }
        IBD_EXPECT(ibsAtRank(s, 0) == md->v[0], "at rank 0", ibsAtRank(s, 0), md->v[0]);
        IBD_EXPECT(ibsAtRank(s, md->n - 1) == md->v[md->n - 1], "at the last rank", ibsAtRank(s, md->n - 1),
                   md->v[md->n - 1]);
        break;
    }
    case 9: { /* seek, then a few steps */
        uint8_t kind = ibdByte(r) % 8;
        int64_t v;
        if (md->n && kind < 3) {
            int64_t m = md->v[ibdIndex(r, md->n)];
            v = kind == 0 ? m : ibdAdd(m, kind == 1 ? 1 : -1);
        } else if (md->n && kind == 3) {
            v = ibdByte(r) & 1 ? ibdAdd(md->v[0], -1) : INT64_MIN; /* below the min */
        } else if (md->n && kind == 4) {
            v = ibdByte(r) & 1 ? ibdAdd(md->v[md->n - 1], 1) : INT64_MAX; /* above the max, or INT64_MAX */
        } else {
            v = ibdValue(r, st);
        }
        size_t i = ibdLowerBound(md, v);
        int found = ibsSeek(s, v, c);
        IBD_EXPECT(found == (i < md->n), "seek: found", found, v);
        if (found) err = ibdWalk(st, c, i, ibdByte(r) % 8 + 1);
        break;
    }
    case 10: { /* the first, a few steps */
        int f = ibsFirst(s, c);
        IBD_EXPECT(f == (md->n > 0), "first", f, md->n);
        if (f) err = ibdWalk(st, c, 0, ibdByte(r) % 4 + 1);
        break;
    }
    case 11: { /* a run of members deleted, now and then */
        if (!md->n || ibdByte(r) >= 48) break;
        static const size_t counts[] = {1, 2, 3, 5, 8, 16, 30, 64, 100, 256, 1000, 5000};
        size_t start = ibdIndex(r, md->n), count = counts[ibdByte(r) % IBD_COUNT(counts)];
        if (count > md->n - start) count = md->n - start;
        err = ibdDeleteRun(st, start, count, ibdByte(r));
        break;
    }
    case 12: /* a run of values in (dense ones fill bitmaps) */
        err = ibdFill(st, r);
        break;
    case 13: { /* every k-th member of a run out (bitmaps go sparse) */
        if (!md->n) break;
        size_t start = ibdIndex(r, md->n), count = (size_t)ibdByte(r) * 8 + 1, every = ibdByte(r) % 4 + 2;
        if (count > md->n - start) count = md->n - start;
        size_t out = start;
        for (size_t j = 0; j < count; j++) {
            int64_t v = md->v[start + j];
            if (j % every == 0) {
                IBD_EXPECT(ibsDelete(s, v), "strided delete", 0, v);
            } else {
                md->v[out++] = v;
            }
        }
        ibdRemoveRange(md, out, start + count - out);
        break;
    }
    case 14: { /* a defrag, a dismiss, the stats, now and then */
        uint8_t b = ibdByte(r);
        if (b < 12) { /* all at once */
            ibset *moved = ibsDefragShell(s, ibdMove);
            if (moved) st->s = s = moved;
            uint32_t at = 0;
            unsigned long calls = 0;
            do {
                at = ibsDefragBlocks(s, at, b % 3 + 1, ibdMove);
                IBD_EXPECT(++calls <= md->n + 2, "defrag: does not end", calls, md->n);
            } while (at);
            st->defragging = 0;
            st->defrags++;
        } else if (b < 32) { /* in steps between the next operations */
            ibset *moved = ibsDefragShell(s, ibdMove);
            if (moved) st->s = s = moved;
            st->defragging = 1;
            st->defragAt = 0;
            st->defrags++;
        } else if (b < 40) {
            static const size_t mins[] = {0, 1, 64, 512, 4096, 65536};
            ibdDismissMin = mins[ibdByte(r) % IBD_COUNT(mins)];
            ibdDismissBad = ibdDismissBytes = 0;
            ibsDismiss(s, ibdDismissMin, ibdDismissed);
            IBD_EXPECT(ibdDismissBad == 0, "dismiss: an allocation below the minimum", ibdDismissBad,
                       ibdDismissMin);
            IBD_EXPECT(ibdDismissBytes <= ibsAllocSize(s), "dismiss: more bytes than allocated", ibdDismissBytes,
                       ibsAllocSize(s));
            st->dismissed++;
        } else if (b < 72) {
            err = ibdStats(st);
        }
        break;
    }
    default: { /* a random member out, as SPOP takes it */
        if (!md->n) break;
        size_t rank = ibdIndex(r, md->n);
        int64_t v = ibsAtRank(s, rank);
        IBD_EXPECT(v == md->v[rank], "pop: at rank", v, md->v[rank]);
        IBD_EXPECT(ibsDelete(s, v), "pop", 0, v);
        ibdRemoveRange(md, rank, 1);
        break;
    }
    }
    if (err) return err;
    IBD_EXPECT(ibsLength(st->s) == md->n, "length", ibsLength(st->s), md->n);
    if (md->n > st->most) st->most = md->n;
    return NULL;
}

static void ibdInit(ibdState *st) {
    memset(st, 0, sizeof(*st));
    st->s = ibsCreate();
    st->dist = IBD_MIXED;
}

static void ibdFree(ibdState *st) {
    ibsFree(st->s);
    ibdModelFree(&st->md);
    free(st->tmp);
    st->tmp = NULL;
    st->tmpCap = 0;
}

/* Everything the set holds equals the model: its invariants, then every
 * member walked from the first, and the first and last by rank. */
static const char *ibdFull(ibdState *st) {
    const char *err = ibsCheck(st->s);
    if (err) return err;
    if (!ibsIsSet(st->s)) return "not an ibset";
    ibdModel *md = &st->md;
    int f = ibsFirst(st->s, &st->cur);
    IBD_EXPECT(f == (md->n > 0), "full: first", f, md->n);
    if (!md->n) return NULL;
    if ((err = ibdWalk(st, &st->cur, 0, (int)md->n))) return err;
    IBD_EXPECT(ibsAtRank(st->s, md->n - 1) == md->v[md->n - 1], "full: last", ibsAtRank(st->s, md->n - 1),
               md->v[md->n - 1]);
    return ibdStats(st);
}

#endif
