/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Differential testing of the sorted-set engine (src/zbtree.c) against a
 * reference model that cannot be wrong in interesting ways: a sorted array
 * of (score, member, time) scanned linearly, with a clock the stream moves
 * on for the entries' times. A stream of bytes drives both, one
 * operation at a time, and every result is compared. The cmocka test feeds
 * it bytes from a seeded generator, the libFuzzer target its inputs.
 *
 * diffStep() returns NULL, or what differed.
 */
#ifndef ZBT_DIFF_H
#define ZBT_DIFF_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zbtree.h"
#include "zmalloc.h"

/* --- The model --- */

typedef struct mEntry {
    double score;
    unsigned char *m;
    size_t len;
    uint64_t when; /* 0: none */
} mEntry;

typedef struct model {
    mEntry *e;
    size_t n, cap;
} model;

static int mCmpMember(const unsigned char *a, size_t al, const unsigned char *b, size_t bl) {
    size_t min = al < bl ? al : bl;
    int c = min ? memcmp(a, b, min) : 0;
    if (c) return c;
    return al < bl ? -1 : al > bl;
}

static int mCmp(double s1, const unsigned char *m1, size_t l1, double s2, const unsigned char *m2, size_t l2) {
    if (s1 < s2) return -1;
    if (s1 > s2) return 1;
    return mCmpMember(m1, l1, m2, l2);
}

static long mFind(const model *md, const unsigned char *m, size_t len) {
    for (size_t i = 0; i < md->n; i++)
        if (md->e[i].len == len && memcmp(md->e[i].m, m, len) == 0) return (long)i;
    return -1;
}

static void mInsert(model *md, double score, const unsigned char *m, size_t len, uint64_t when) {
    if (md->n == md->cap) {
        md->cap = md->cap * 2 + 16;
        md->e = realloc(md->e, md->cap * sizeof(mEntry));
    }
    size_t i = 0;
    while (i < md->n && mCmp(md->e[i].score, md->e[i].m, md->e[i].len, score, m, len) < 0) i++;
    memmove(md->e + i + 1, md->e + i, (md->n - i) * sizeof(mEntry));
    md->e[i].score = score;
    md->e[i].m = malloc(len ? len : 1);
    memcpy(md->e[i].m, m, len);
    md->e[i].len = len;
    md->e[i].when = when;
    md->n++;
}

static void mRemoveAt(model *md, size_t i) {
    free(md->e[i].m);
    memmove(md->e + i, md->e + i + 1, (md->n - i - 1) * sizeof(mEntry));
    md->n--;
}

static void mFree(model *md) {
    for (size_t i = 0; i < md->n; i++) free(md->e[i].m);
    free(md->e);
    memset(md, 0, sizeof(*md));
}

static int mScoreIn(double s, const zbtScoreRange *r) {
    if (isnan(r->min) || isnan(r->max)) return 0;
    return (r->minex ? s > r->min : s >= r->min) && (r->maxex ? s < r->max : s <= r->max);
}

static int mLexIn(const unsigned char *m, size_t len, const zbtLexRange *r) {
    int ge, le;
    if (r->min.inf) ge = r->min.inf < 0;
    else {
        int c = mCmpMember(m, len, r->min.s, r->min.len);
        ge = r->min.ex ? c > 0 : c >= 0;
    }
    if (r->max.inf) le = r->max.inf > 0;
    else {
        int c = mCmpMember(m, len, r->max.s, r->max.len);
        le = r->max.ex ? c < 0 : c <= 0;
    }
    return ge && le;
}

/* First and last index in range, as the engine defines it on a set whose
 * order is by score: the first entry from the start that is in range, and
 * the last one. Returns 0 when none is. */
static int mSpan(const model *md, int lex, const void *r, size_t *a, size_t *b) {
    int found = 0;
    for (size_t i = 0; i < md->n; i++) {
        int in = lex ? mLexIn(md->e[i].m, md->e[i].len, r) : mScoreIn(md->e[i].score, r);
        if (in) {
            if (!found) *a = i;
            *b = i;
            found = 1;
        }
    }
    return found;
}

/* --- The driver --- */

typedef struct reader {
    const uint8_t *p, *end;
} reader;

static uint8_t rdByte(reader *r) { return r->p < r->end ? *r->p++ : 0; }
static uint32_t rdU16(reader *r) { return rdByte(r) | (uint32_t)rdByte(r) << 8; }

static const double diffScores[] = {
    -INFINITY, -1e300, -4294967296.0, -3.5, -1.0, -0.0, 0.0, 4.9406564584124654e-324, 0.1, 0.5,
    1.0, 2.0, 2.5, 3.0, 255.0, 256.0, 65535.0, 65536.0, 4294967295.0, 4294967296.0,
    9007199254740992.0, 9007199254740994.0, 1e15, 1e300, INFINITY};

/* Set to give every new entry score 0, for lex ranges. */
static int diffLexMode;

static double rdScore(reader *r) {
    uint8_t b = rdByte(r);
    if (diffLexMode) return 0.0;
    if (b < 100) return (double)(b % 8); /* ties, many of them */
    if (b < 200) return diffScores[b % (sizeof(diffScores) / sizeof(diffScores[0]))];
    return (double)rdU16(r) / 7.0;
}

static const uint16_t diffLens[] = {0, 1, 1, 2, 2, 3, 4, 5, 8, 12, 20, 29, 30, 31, 40, 64, 65, 100, 300};

/* A member: often one already in the model, else a new one from a small
 * alphabet (so that new ones collide with old ones too). */
static size_t rdMember(reader *r, const model *md, unsigned char *buf) {
    uint8_t b = rdByte(r);
    if (md->n && b < 128) {
        const mEntry *e = &md->e[rdU16(r) % md->n];
        memcpy(buf, e->m, e->len);
        return e->len;
    }
    size_t len = diffLens[rdByte(r) % (sizeof(diffLens) / sizeof(diffLens[0]))];
    uint8_t seed = rdByte(r);
    for (size_t i = 0; i < len; i++) buf[i] = (unsigned char)("abc\0\xff"[(seed + i * (seed | 1)) % 5]);
    if (len) buf[len - 1] = (unsigned char)('a' + rdByte(r) % 26);
    return len;
}

static void rdLexBound(reader *r, const model *md, zbtLexBound *b, unsigned char *buf) {
    uint8_t k = rdByte(r) % 8;
    b->inf = k == 0 ? -1 : k == 1 ? 1 : 0;
    b->ex = rdByte(r) & 1;
    b->len = b->inf ? 0 : rdMember(r, md, buf);
    b->s = buf;
}

static const char *diffFail(char *err, size_t size, const char *what, long a, long b) {
    snprintf(err, size, "%s: engine %ld, model %ld", what, a, b);
    return err;
}

#define DIFF_EXPECT(cond, what, a, b)                                                         \
    do {                                                                                      \
        if (!(cond)) return diffFail(st->err, sizeof(st->err), what, (long)(a), (long)(b));   \
    } while (0)

typedef struct diffState {
    zbt *t;
    model md;
    zbtCursor cur;
    char err[256];
    unsigned long ops;
    int defragging;    /* A defrag in steps is under way, */
    uint32_t defragAt; /* to go on from this leaf id. */
    uint64_t now;      /* The clock of the entries' times. */
    model due;         /* What zbtDue handed out. */
} diffState;

static void diffTakeDue(void *ctx, const unsigned char *m, size_t len, double score, uint64_t when) {
    mInsert(ctx, score, m, len, when);
}

/* A time near the clock, past or to come, often shared; now and then one
 * days before or weeks after it (on both sides of a short time's reach
 * from the tree's base), or the last one there is. */
static uint64_t rdTime(reader *r, uint64_t now) {
    uint8_t b = rdByte(r);
    if (b == 255) return ZBT_TIME_MAX;
    if (b < 192) return now + b % 64 - 16;
    uint64_t w = now + ((uint64_t)(b % 64) << 26) - (UINT64_C(8) << 26);
    return w < ZBT_TIME_MAX ? w : ZBT_TIME_MAX;
}

/* Compares the engine's entries from cursor c on, k of them, with the
 * model's from index i, forwards or backwards. */
static const char *diffWalk(diffState *st, zbtCursor *c, long i, int k, int back) {
    for (int j = 0; j < k && i >= 0 && (size_t)i < st->md.n; j++) {
        const mEntry *e = &st->md.e[i];
        DIFF_EXPECT(c->len == e->len && memcmp(c->member, e->m, e->len) == 0, "walk member", j, i);
        DIFF_EXPECT(memcmp(&c->score, &e->score, sizeof(double)) == 0, "walk score bits", j, i);
        DIFF_EXPECT(zbtCursorRank(c) == (unsigned long)i, "walk rank", zbtCursorRank(c), i);
        DIFF_EXPECT(c->when == e->when, "walk time", c->when, e->when);
        i += back ? -1 : 1;
        int more = back ? zbtPrev(c) : zbtNext(c);
        DIFF_EXPECT(more == (i >= 0 && (size_t)i < st->md.n), "walk end", more, i);
        if (!more) break;
    }
    return NULL;
}

/* A full scan, collected, to compare with the model as sets of members. */
typedef struct scanned {
    mEntry *e;
    size_t n, cap;
} scanned;

static void diffScanVisit(void *privdata, const unsigned char *m, size_t len, double score) {
    scanned *sc = privdata;
    if (sc->n == sc->cap) {
        sc->cap = sc->cap * 2 + 16;
        sc->e = realloc(sc->e, sc->cap * sizeof(mEntry));
    }
    sc->e[sc->n].m = malloc(len ? len : 1);
    memcpy(sc->e[sc->n].m, m, len);
    sc->e[sc->n].len = len;
    sc->e[sc->n++].score = score;
}

static int diffCmpByMember(const void *a, const void *b) {
    const mEntry *x = a, *y = b;
    return mCmpMember(x->m, x->len, y->m, y->len);
}

static const char *diffScan(diffState *st, size_t count) {
    scanned sc = {0};
    unsigned long long cursor = 0;
    int calls = 0;
    do {
        cursor = zbtScan(st->t, cursor, count, diffScanVisit, &sc);
        calls++;
    } while (cursor && calls < 1000000);
    mEntry *want = malloc((st->md.n + 1) * sizeof(mEntry));
    if (st->md.n) {
        memcpy(want, st->md.e, st->md.n * sizeof(mEntry));
        qsort(want, st->md.n, sizeof(mEntry), diffCmpByMember);
    }
    if (sc.n) qsort(sc.e, sc.n, sizeof(mEntry), diffCmpByMember);
    int same = sc.n == st->md.n;
    for (size_t i = 0; same && i < sc.n; i++)
        same = diffCmpByMember(&sc.e[i], &want[i]) == 0 && memcmp(&sc.e[i].score, &want[i].score, 8) == 0;
    size_t got = sc.n;
    for (size_t i = 0; i < sc.n; i++) free(sc.e[i].m);
    free(sc.e);
    free(want);
    DIFF_EXPECT(same, "full scan", got, st->md.n);
    return NULL;
}

static void *diffMove(void *p) {
    size_t size = zmalloc_size(p);
    void *q = zmalloc(size);
    memcpy(q, p, size);
    zfree(p);
    return q;
}

static const char *diffStep(diffState *st, reader *r) {
    unsigned char mb[400], lb1[400], lb2[400];
    zbt *t = st->t;
    model *md = &st->md;
    uint8_t op = rdByte(r) % 19;
    st->ops++;
    if (st->defragging) {
        st->defragAt = zbtDefragLeaves(t, st->defragAt, rdByte(r) % 4 + 1, diffMove);
        st->defragging = st->defragAt != 0;
    }
    switch (op) {
    case 0:
    case 1:
    case 2: { /* insert; op 2 as ZADD (and ZADDEX) does, through zbtScoreOrMiss */
        double s = rdScore(r), old;
        size_t len = rdMember(r, md, mb);
        uint64_t when = op == 2 && rdByte(r) < 96 ? rdTime(r, st->now) : 0;
        zbtMiss miss;
        int ret;
        if (op < 2) ret = zbtInsert(t, s, mb, len);
        else
            ret = zbtScoreOrMiss(t, mb, len, &old, &miss) ? ZBT_ERR_DUP
                                                          : zbtInsertMissingTimed(t, s, mb, len, &miss, when);
        long i = mFind(md, mb, len);
        DIFF_EXPECT(ret == (i >= 0 ? ZBT_ERR_DUP : ZBT_OK), "insert", ret, i);
        if (i < 0) mInsert(md, s, mb, len, when);
        break;
    }
    case 3: { /* delete */
        size_t len = rdMember(r, md, mb);
        double s = 0;
        int ret = zbtDelete(t, mb, len, &s);
        long i = mFind(md, mb, len);
        DIFF_EXPECT(ret == (i >= 0), "delete", ret, i);
        if (i >= 0) {
            DIFF_EXPECT(memcmp(&s, &md->e[i].score, sizeof(double)) == 0, "deleted score", s, md->e[i].score);
            mRemoveAt(md, (size_t)i);
        }
        break;
    }
    case 4: { /* update score, and now and then the time with it */
        size_t len = rdMember(r, md, mb);
        double s = rdScore(r);
        uint8_t k = rdByte(r);
        uint64_t given = k < 128 ? ZBT_TIME_KEEP : k < 160 ? 0 : rdTime(r, st->now);
        int ret = k < 64 ? zbtUpdateScore(t, mb, len, s) : zbtUpdate(t, mb, len, s, given);
        long i = mFind(md, mb, len);
        DIFF_EXPECT(ret == (i >= 0), "update", ret, i);
        if (i >= 0) {
            uint64_t when = given == ZBT_TIME_KEEP ? md->e[i].when : given;
            mRemoveAt(md, (size_t)i);
            mInsert(md, s, mb, len, when);
        }
        break;
    }
    case 5: { /* score and rank by member */
        size_t len = rdMember(r, md, mb);
        double s;
        unsigned long rank, rrank;
        long i = mFind(md, mb, len);
        int found = zbtScore(t, mb, len, &s);
        DIFF_EXPECT(found == (i >= 0), "score found", found, i);
        DIFF_EXPECT(zbtRank(t, mb, len, 0, &rank) == found, "rank found", !found, i);
        DIFF_EXPECT(zbtRank(t, mb, len, 1, &rrank) == found, "revrank found", !found, i);
        if (found) {
            DIFF_EXPECT(memcmp(&s, &md->e[i].score, sizeof(double)) == 0, "score", s, md->e[i].score);
            DIFF_EXPECT(rank == (unsigned long)i, "rank", rank, i);
            DIFF_EXPECT(rrank == md->n - 1 - (unsigned long)i, "revrank", rrank, md->n - 1 - i);
        }
        break;
    }
    case 6: { /* walk from a rank */
        unsigned long rank = md->n ? rdU16(r) % (md->n + 1) : 0;
        int back = rdByte(r) & 1, k = rdByte(r) % 64 + 1;
        int found = zbtAtRank(t, rank, &st->cur);
        DIFF_EXPECT(found == (rank < md->n), "at rank", found, rank);
        if (found) return diffWalk(st, &st->cur, (long)rank, k, back);
        break;
    }
    case 7:
    case 8: { /* score range: first, last, count, walk */
        zbtScoreRange sr = {rdScore(r), rdScore(r), rdByte(r) & 1, rdByte(r) & 1};
        if (rdByte(r) == 7) sr.min = NAN;
        size_t a = 0, b = 0;
        int in = mSpan(md, 0, &sr, &a, &b);
        int f = zbtFirstInScoreRange(t, &sr, &st->cur);
        DIFF_EXPECT(f == in, "first in score range", f, in);
        if (f) {
            DIFF_EXPECT(zbtCursorRank(&st->cur) == a, "first in score range rank", zbtCursorRank(&st->cur), a);
            const char *err = diffWalk(st, &st->cur, (long)a, (int)(b - a + 1 < 40 ? b - a + 1 : 40), 0);
            if (err) return err;
        }
        int l = zbtLastInScoreRange(t, &sr, &st->cur);
        DIFF_EXPECT(l == in, "last in score range", l, in);
        if (l) DIFF_EXPECT(zbtCursorRank(&st->cur) == b, "last in score range rank", zbtCursorRank(&st->cur), b);
        unsigned long count = zbtCountScoreRange(t, &sr);
        DIFF_EXPECT(count == (in ? b - a + 1 : 0), "count score range", count, in ? b - a + 1 : 0);
        break;
    }
    case 9:
    case 10: { /* lex range: first, last, count */
        zbtLexRange lr;
        rdLexBound(r, md, &lr.min, lb1);
        rdLexBound(r, md, &lr.max, lb2);
        /* Lex ranges are defined on sets of equal scores: give the model
         * and engine such a set now and then. */
        size_t a = 0, b = 0;
        int in = mSpan(md, 1, &lr, &a, &b);
        int sorted = 1;
        for (size_t i = 1; i < md->n && sorted; i++)
            if (mCmpMember(md->e[i - 1].m, md->e[i - 1].len, md->e[i].m, md->e[i].len) > 0) sorted = 0;
        if (!sorted) break; /* unspecified order: only the engine's own consistency counts */
        int f = zbtFirstInLexRange(t, &lr, &st->cur);
        DIFF_EXPECT(f == in, "first in lex range", f, in);
        if (f) DIFF_EXPECT(zbtCursorRank(&st->cur) == a, "first in lex range rank", zbtCursorRank(&st->cur), a);
        int l = zbtLastInLexRange(t, &lr, &st->cur);
        DIFF_EXPECT(l == in, "last in lex range", l, in);
        if (l) DIFF_EXPECT(zbtCursorRank(&st->cur) == b, "last in lex range rank", zbtCursorRank(&st->cur), b);
        unsigned long count = zbtCountLexRange(t, &lr);
        DIFF_EXPECT(count == (in ? b - a + 1 : 0), "count lex range", count, in ? b - a + 1 : 0);
        if (rdByte(r) < 16) {
            unsigned long del = zbtDeleteLexRange(t, &lr);
            DIFF_EXPECT(del == (in ? b - a + 1 : 0), "delete lex range", del, in ? b - a + 1 : 0);
            if (in)
                for (size_t i = b + 1; i-- > a;) mRemoveAt(md, i);
        }
        break;
    }
    case 11: { /* delete a rank range */
        if (rdByte(r) >= 64) break;
        unsigned long start = rdU16(r) % (md->n + 2), end = start + rdByte(r) % 40;
        unsigned long del = zbtDeleteRankRange(t, start, end);
        unsigned long want = start < md->n ? (end < md->n ? end : md->n - 1) - start + 1 : 0;
        DIFF_EXPECT(del == want, "delete rank range", del, want);
        for (unsigned long i = 0; i < want; i++) mRemoveAt(md, start);
        break;
    }
    case 12: { /* delete a score range */
        if (rdByte(r) >= 64) break;
        zbtScoreRange sr = {rdScore(r), rdScore(r), rdByte(r) & 1, rdByte(r) & 1};
        size_t a = 0, b = 0;
        int in = mSpan(md, 0, &sr, &a, &b);
        unsigned long del = zbtDeleteScoreRange(t, &sr);
        DIFF_EXPECT(del == (in ? b - a + 1 : 0), "delete score range", del, in ? b - a + 1 : 0);
        if (in)
            for (size_t i = b + 1; i-- > a;) mRemoveAt(md, i);
        break;
    }
    case 13: { /* bulk append at either end */
        int k = rdByte(r) % 32;
        for (int j = 0; j < k; j++) {
            double s = rdScore(r);
            size_t len = rdMember(r, md, mb);
            uint64_t when = rdByte(r) < 64 ? rdTime(r, st->now) : 0;
            int ret = when ? zbtAppendTimed(t, s, mb, len, when) : zbtAppend(t, s, mb, len);
            long i = mFind(md, mb, len);
            int before = md->n == 0 || mCmp(s, mb, len, md->e[0].score, md->e[0].m, md->e[0].len) < 0;
            int after = md->n == 0 ||
                        mCmp(s, mb, len, md->e[md->n - 1].score, md->e[md->n - 1].m, md->e[md->n - 1].len) > 0;
            if (ret == ZBT_OK) {
                DIFF_EXPECT(i < 0 && (before || after), "append accepted", ret, i);
                mInsert(md, s, mb, len, when);
            } else if (ret == ZBT_ERR_DUP) {
                DIFF_EXPECT(i >= 0, "append duplicate", ret, i);
            } else {
                DIFF_EXPECT(ret == ZBT_ERR_ORDER, "append error", ret, 0);
            }
        }
        zbtAppendDone(t);
        break;
    }
    case 14: { /* the ends, and a defrag pass now and then */
        int f = zbtFirst(t, &st->cur);
        DIFF_EXPECT(f == (md->n > 0), "first", f, md->n);
        if (f) {
            const char *err = diffWalk(st, &st->cur, 0, 3, 0);
            if (err) return err;
        }
        int l = zbtLast(t, &st->cur);
        DIFF_EXPECT(l == (md->n > 0), "last", l, md->n);
        if (l) {
            const char *err = diffWalk(st, &st->cur, (long)md->n - 1, 3, 1);
            if (err) return err;
        }
        uint8_t defrag = rdByte(r);
        if (defrag < 32) { /* all at once, or in steps between the next ops */
            zbt *moved = defrag & 1 ? zbtDefrag(t, diffMove) : zbtDefragShell(t, diffMove);
            if (moved) st->t = t = moved;
            st->defragging = !(defrag & 1);
            st->defragAt = 0;
        }
        if (rdByte(r) < 32) {
            const char *err = diffScan(st, rdByte(r) % 50 + 1);
            if (err) return err;
        }
        break;
    }
    case 15:
    case 16: { /* a member's time: read, set or dropped */
        size_t len = rdMember(r, md, mb);
        uint8_t k = rdByte(r);
        uint64_t when = k < 64 ? 0 : rdTime(r, st->now), old = 7, got = 7;
        long i = mFind(md, mb, len);
        int found = zbtTime(t, mb, len, &got);
        DIFF_EXPECT(found == (i >= 0), "time found", found, i);
        if (found) DIFF_EXPECT(got == md->e[i].when, "time", got, md->e[i].when);
        if (k < 32) break;
        found = zbtSetTime(t, mb, len, when, &old);
        DIFF_EXPECT(found == (i >= 0), "set time found", found, i);
        if (found) {
            DIFF_EXPECT(old == md->e[i].when, "old time", old, md->e[i].when);
            md->e[i].when = when;
        }
        break;
    }
    case 17: { /* the clock moves on; due entries go, all or some */
        uint8_t step = rdByte(r);
        /* Now and then by days, so that the tree's base moves up. */
        st->now += step < 240 ? step % 16 : (uint64_t)(step % 16) << 26;
        size_t max = rdByte(r) < 64 ? rdByte(r) % 8 : SIZE_MAX, due = 0, timed = 0;
        uint64_t first = 0;
        for (size_t i = 0; i < md->n; i++) {
            uint64_t w = md->e[i].when;
            if (w && w <= st->now) due++;
            if (w && (!first || w < first)) first = w;
            timed += w != 0;
        }
        DIFF_EXPECT(zbtTimedCount(t) == timed, "timed count", zbtTimedCount(t), timed);
        /* A bound: never later than a time, but deletes leave it where
         * it was. */
        uint64_t earliest = zbtEarliest(t);
        DIFF_EXPECT(!first || (earliest && earliest <= first), "earliest", earliest, first);
        size_t got = zbtDue(t, st->now, max, diffTakeDue, &st->due);
        size_t want = due < max ? due : max;
        DIFF_EXPECT(got == want && st->due.n == want, "due taken", got, want);
        for (size_t j = 0; j < st->due.n; j++) {
            const mEntry *e = &st->due.e[j];
            long i = mFind(md, e->m, e->len);
            DIFF_EXPECT(i >= 0 && md->e[i].when == e->when && e->when <= st->now &&
                            memcmp(&md->e[i].score, &e->score, sizeof(double)) == 0,
                        "due entry", j, i);
            mRemoveAt(md, (size_t)i);
        }
        mFree(&st->due);
        if (got < max) {
            first = 0;
            for (size_t i = 0; i < md->n; i++)
                if (md->e[i].when && (!first || md->e[i].when < first)) first = md->e[i].when;
            earliest = zbtEarliest(t);
            DIFF_EXPECT((!earliest || earliest > st->now) && (!first || (earliest && earliest <= first)),
                        "earliest after due", earliest, first);
        }
        break;
    }
    default: { /* NaN is refused and changes nothing */
        size_t len = rdMember(r, md, mb);
        DIFF_EXPECT(zbtInsert(t, NAN, mb, len) == ZBT_ERR_NAN, "insert NaN", 0, 0);
        DIFF_EXPECT(zbtUpdateScore(t, mb, len, NAN) == ZBT_ERR_NAN, "update NaN", 0, 0);
        break;
    }
    }
    DIFF_EXPECT(zbtLength(t) == md->n, "length", zbtLength(t), md->n);
    return NULL;
}

static void diffInit(diffState *st) {
    memset(st, 0, sizeof(*st));
    st->t = zbtCreate(0);
    st->now = UINT64_C(1) << 32; /* room for times days before it */
}

static void diffFree(diffState *st) {
    zbtFree(st->t);
    mFree(&st->md);
    mFree(&st->due);
}

/* Everything the engine holds equals the model: entries walked in full. */
static const char *diffFull(diffState *st) {
    const char *err = zbtCheck(st->t);
    if (err) return err;
    if (!st->md.n) return NULL;
    zbtFirst(st->t, &st->cur);
    return diffWalk(st, &st->cur, 0, (int)st->md.n, 0);
}

#endif
