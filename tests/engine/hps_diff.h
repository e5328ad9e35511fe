/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Differential testing of big sets of strings (hpset.c) against a model
 * that cannot be wrong in interesting ways: an array of the members and an
 * open-addressing table of their indexes, hashed with FNV-1a. A stream of
 * bytes drives both, one operation at a time, and every result is
 * compared: added or not, deleted or not, found or not, that a random
 * member is a member, that an iteration visits each member once, and that
 * a scan visits every member present throughout it while the set is
 * written between its calls (SSCAN's guarantee). The cmocka tests
 * (test_hpset.c) feed it bytes from a seeded generator; the libFuzzer
 * target (fuzz_hpset.c) its inputs.
 *
 * Members come in several shapes: short ones (many to a bucket), the
 * lengths of packed set members (about 20 bytes, three to six a bucket),
 * inline members at the longest, and members kept out of line; and from a
 * small pool, so that inserts meet members already there. A defrag in
 * steps runs across the other operations, and the pages are now and then
 * marked shared (a fork child), when deletes must rebuild nothing.
 * Members get, change and lose times against a clock the run moves, and
 * the members due are taken out (hpsDue) as the server's expiry does.
 *
 * hpdStep() returns NULL, or what differed; the caller runs hpsCheck().
 */
#ifndef HPS_DIFF_H
#define HPS_DIFF_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpset.h"
#include "zmalloc.h"

/* --- The model --- */

#define HPD_MAX_LEN 80
#ifndef HPD_SOFT_MAX
#define HPD_SOFT_MAX 8000 /* Members past which inserts lean to deletes. */
#endif

typedef struct hpdMember {
    uint8_t len;
    unsigned char b[HPD_MAX_LEN];
    uint64_t t; /* its time, 0 for none */
} hpdMember;

typedef struct hpdModel {
    hpdMember *v;     /* members, in no order */
    size_t n, cap;    /* members; room in v */
    uint32_t *slots;  /* index + 1 into v, 0 empty; linear probing */
    size_t slotCount; /* a power of two, at least twice n */
} hpdModel;

static uint64_t hpdFnv(const unsigned char *m, size_t len) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) h = (h ^ m[i]) * 1099511628211ULL;
    return h;
}

/* The slot of m, or of the empty slot where it would go. */
static size_t hpdSlot(const hpdModel *md, const unsigned char *m, size_t len) {
    size_t mask = md->slotCount - 1, i = hpdFnv(m, len) & mask;
    for (;; i = (i + 1) & mask) {
        uint32_t k = md->slots[i];
        if (!k) return i;
        const hpdMember *e = &md->v[k - 1];
        if (e->len == len && memcmp(e->b, m, len) == 0) return i;
    }
}

static void hpdRehash(hpdModel *md, size_t slotCount) {
    free(md->slots);
    md->slotCount = slotCount;
    md->slots = calloc(slotCount, sizeof(uint32_t));
    for (size_t k = 0; k < md->n; k++) md->slots[hpdSlot(md, md->v[k].b, md->v[k].len)] = (uint32_t)k + 1;
}

static int hpdHas(const hpdModel *md, const unsigned char *m, size_t len) {
    return md->slotCount && md->slots[hpdSlot(md, m, len)] != 0;
}

/* Returns 1 when added. */
static int hpdAdd(hpdModel *md, const unsigned char *m, size_t len) {
    if (2 * (md->n + 1) > md->slotCount) hpdRehash(md, md->slotCount ? md->slotCount * 2 : 64);
    size_t i = hpdSlot(md, m, len);
    if (md->slots[i]) return 0;
    if (md->n == md->cap) {
        md->cap = md->cap ? md->cap * 2 : 64;
        md->v = realloc(md->v, md->cap * sizeof(*md->v));
    }
    md->v[md->n].len = (uint8_t)len;
    md->v[md->n].t = 0;
    memcpy(md->v[md->n].b, m, len);
    md->slots[i] = (uint32_t)++md->n;
    return 1;
}

/* Returns 1 when it was there. The slots after it shift back (no
 * tombstones), and the last member takes its place in v. */
static int hpdDel(hpdModel *md, const unsigned char *m, size_t len) {
    if (!md->slotCount) return 0;
    size_t mask = md->slotCount - 1, i = hpdSlot(md, m, len);
    if (!md->slots[i]) return 0;
    size_t k = md->slots[i] - 1;
    for (size_t j = i;;) {
        j = (j + 1) & mask;
        if (!md->slots[j]) break;
        const hpdMember *e = &md->v[md->slots[j] - 1];
        size_t home = hpdFnv(e->b, e->len) & mask;
        /* Moves back unless its home lies cyclically in (i, j]. */
        int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!stays) {
            md->slots[i] = md->slots[j];
            i = j;
        }
    }
    md->slots[i] = 0;
    if (k != --md->n) {
        md->v[k] = md->v[md->n];
        md->slots[hpdSlot(md, md->v[k].b, md->v[k].len)] = (uint32_t)k + 1;
    }
    return 1;
}

/* The model's entry for m, or NULL. */
static hpdMember *hpdFind(hpdModel *md, const unsigned char *m, size_t len) {
    if (!md->slotCount) return NULL;
    uint32_t k = md->slots[hpdSlot(md, m, len)];
    return k ? &md->v[k - 1] : NULL;
}

static void hpdModelFree(hpdModel *md) {
    free(md->v);
    free(md->slots);
    memset(md, 0, sizeof(*md));
}

/* --- The driver --- */

typedef struct hpdReader {
    const uint8_t *p, *end;
} hpdReader;

static uint8_t hpdByte(hpdReader *r) {
    return r->p < r->end ? *r->p++ : 0;
}
static uint32_t hpdU16(hpdReader *r) {
    return hpdByte(r) | (uint32_t)hpdByte(r) << 8;
}
static uint32_t hpdU32(hpdReader *r) {
    return hpdU16(r) | hpdU16(r) << 16;
}
static size_t hpdIndex(hpdReader *r, size_t n) {
    return (hpdU16(r) | (uint32_t)hpdByte(r) << 16) % n;
}

typedef struct hpdState {
    hpset *s;
    hpdModel md;
    char err[320];
    unsigned long ops;
    int defragging;     /* A defrag in steps is under way, */
    uint64_t defragAt;  /* to go on from here. */
    int shared;         /* The pages are marked shared. */
    uint64_t rngState;  /* hpsRandom's bits */
    uint64_t now;       /* The clock of members' times. */
    /* A scan under way: its cursor, the members present since it began
     * (flags by model index would move; names are kept instead). */
    int scanning;
    uint64_t scanCursor;
    hpdModel scanWant;  /* present at the start and not deleted since */
    hpdModel scanSeen;  /* returned so far */
    /* What the run reached, to report. */
    unsigned long most, scans, randoms, defrags, dismissed, longest, timed, due;
} hpdState;

static const char *hpdFail(hpdState *st, const char *what, long long a, long long b) {
    snprintf(st->err, sizeof(st->err), "%s: engine %lld, model %lld (operation %lu, %zu members)", what, a, b,
             st->ops, st->md.n);
    return st->err;
}

#define HPD_EXPECT(cond, what, a, b)                                           \
    do {                                                                       \
        if (!(cond)) return hpdFail(st, what, (long long)(a), (long long)(b)); \
    } while (0)

static hpdState *hpd_current;

static uint64_t hpdRandomBits(void) {
    uint64_t x = hpd_current->rngState += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

/* A member: from a small pool of names (so that inserts repeat), or of a
 * length picked from the shapes above, its bytes from the input. */
static size_t hpdMemberOf(hpdReader *r, const hpdModel *md, unsigned char *m) {
    uint8_t kind = hpdByte(r);
    if (kind < 48 && md->n) { /* a member, as it is */
        const hpdMember *e = &md->v[hpdIndex(r, md->n)];
        memcpy(m, e->b, e->len);
        return e->len;
    }
    if (kind < 112) { /* from a pool of 4,096 names of about 20 bytes */
        return (size_t)snprintf((char *)m, HPD_MAX_LEN, "member:%05u:pool", hpdU16(r) % 4096);
    }
    static const uint8_t lens[] = {0, 1, 2, 3, 5, 8, 12, 16, 19, 19, 19, 20, 24, 29, 30, 31, 32, 45, 63, 64, 80};
    size_t len = lens[kind % sizeof(lens)];
    uint32_t seed = hpdU32(r);
    for (size_t i = 0; i < len; i++) {
        seed = seed * 1103515245u + 12345u;
        m[i] = (unsigned char)(kind & 1 ? 'a' + (seed >> 16) % 26 : seed >> 16);
    }
    return len;
}

static void *hpdMove(void *p) {
    size_t size = zmalloc_size(p);
    void *q = zmalloc(size);
    memcpy(q, p, size);
    zfree(p);
    return q;
}

static size_t hpdDismissMin, hpdDismissBad, hpdDismissBytes;

static void hpdDismissed(void *ptr, size_t size) {
    if (!ptr || size < hpdDismissMin) hpdDismissBad++;
    hpdDismissBytes += size;
}

typedef struct hpdVisit {
    hpdState *st;
    hpdModel *seen;
    const char *err;
    size_t visits;
} hpdVisit;

static void hpdScanVisit(void *ctx, const unsigned char *m, size_t len) {
    hpdVisit *v = ctx;
    v->visits++;
    if (!v->err && !hpdHas(&v->st->md, m, len)) v->err = "scan: a member the model lacks";
    if (v->seen) hpdAdd(v->seen, m, len);
}

/* Every member once, by the iterator. */
static const char *hpdIterate(hpdState *st) {
    hpdModel seen = {0};
    hpsIter it;
    const unsigned char *m;
    size_t len, n = 0;
    uint64_t t;
    hpsIterInit(st->s, &it);
    while (hpsIterNextTimed(&it, &m, &len, &t)) {
        n++;
        hpdMember *e = hpdFind(&st->md, m, len);
        if (!e || e->t != t) {
            hpdModelFree(&seen);
            return hpdFail(st, e ? "iterate: a time the model lacks" : "iterate: a member the model lacks",
                           (long long)t, e ? (long long)e->t : 0);
        }
        if (!hpdAdd(&seen, m, len)) {
            hpdModelFree(&seen);
            return hpdFail(st, "iterate: a member twice", (long long)len, 0);
        }
    }
    hpdModelFree(&seen);
    HPD_EXPECT(n == st->md.n, "iterate: members", n, st->md.n);
    return NULL;
}

/* One call of the scan under way, or a new scan. At its end, every member
 * present throughout must have come. */
static const char *hpdScanStep(hpdState *st, hpdReader *r) {
    if (!st->scanning) {
        hpdModelFree(&st->scanWant);
        hpdModelFree(&st->scanSeen);
        for (size_t k = 0; k < st->md.n; k++) hpdAdd(&st->scanWant, st->md.v[k].b, st->md.v[k].len);
        st->scanning = 1;
        st->scanCursor = 0;
    }
    static const size_t counts[] = {1, 3, 10, 100, 1000};
    hpdVisit v = {st, &st->scanSeen, NULL, 0};
    size_t count = counts[hpdByte(r) % 5];
    st->scanCursor = hpsScan(st->s, st->scanCursor, count, hpdScanVisit, &v);
    if (v.err) return hpdFail(st, v.err, 0, 0);
    if (st->scanCursor) {
        /* A call gives at least count members unless the scan ends. */
        HPD_EXPECT(v.visits >= count, "scan: a call short of count", v.visits, count);
        return NULL;
    }
    for (size_t k = 0; k < st->scanWant.n; k++) {
        const hpdMember *e = &st->scanWant.v[k];
        HPD_EXPECT(hpdHas(&st->scanSeen, e->b, e->len), "scan: a member present throughout was missed", e->len,
                   st->scanWant.n);
    }
    st->scanning = 0;
    st->scans++;
    return NULL;
}

/* A time near the clock: due already, soon, later, or the last one. */
static uint64_t hpdTimeOf(hpdState *st, hpdReader *r) {
    uint8_t b = hpdByte(r);
    if (b < 8) return HPS_TIME_MAX;
    uint64_t t = st->now + (b & 0x3f) * 4;
    return b < 48 && t > 100 ? t - 100 : t;
}

typedef struct hpdDueCtx {
    hpdState *st;
    hpdModel got;
    const char *err;
} hpdDueCtx;

static void hpdDueVisit(void *ctx, const unsigned char *m, size_t len, uint64_t t) {
    hpdDueCtx *d = ctx;
    hpdMember *e = hpdFind(&d->st->md, m, len);
    if (d->err) return;
    if (!e) d->err = "due: a member the model lacks";
    else if (e->t != t) d->err = "due: a time the model lacks";
    else if (!t || t > d->st->now) d->err = "due: a member not due";
    else if (!hpdAdd(&d->got, m, len)) d->err = "due: a member twice";
}

/* Times: set, dropped, added with a member, read; or the clock moves on
 * and the members due are taken out, as many as a max allows. */
static const char *hpdTimes(hpdState *st, hpdReader *r, uint8_t b) {
    hpdModel *md = &st->md;
    unsigned char m[HPD_MAX_LEN];
    size_t len = hpdMemberOf(r, md, m);
    hpdMember *e = hpdFind(md, m, len);
    if (b < 100) { /* set or drop a time; a new member comes with one */
        uint64_t t = hpdByte(r) < 64 ? 0 : hpdTimeOf(st, r);
        if (hpdByte(r) < 64) { /* added or re-timed in one probe */
            int ret = hpsAddTimedHashed(st->s, hpsHash(m, len), m, len, t);
            HPD_EXPECT(ret == (e == NULL), "add timed", ret, e == NULL);
            if (!e) hpdAdd(md, m, len);
            hpdFind(md, m, len)->t = t;
            st->timed++;
            return NULL;
        }
        if (!e && t) {
            HPD_EXPECT(hpsInsertTimed(st->s, m, len, t), "timed insert", 0, 1);
            hpdAdd(md, m, len);
            hpdFind(md, m, len)->t = t;
            st->timed++;
            return NULL;
        }
        uint64_t old = 12345;
        int ret = hpsSetTimeHashed(st->s, hpsHash(m, len), m, len, t, &old);
        HPD_EXPECT(ret == (e != NULL), "set time", ret, e != NULL);
        if (e) HPD_EXPECT(old == e->t, "set time: the time before", old, e->t);
        if (e) e->t = t;
        st->timed++;
        return NULL;
    }
    if (b < 150) { /* read a time */
        uint64_t t = 12345;
        int ret = hpsTimeHashed(st->s, hpsHash(m, len), m, len, &t);
        HPD_EXPECT(ret == (e != NULL), "time: found", ret, e != NULL);
        if (e) HPD_EXPECT(t == e->t, "time", t, e->t);
        return NULL;
    }
    st->now += hpdByte(r) % 64;
    static const size_t maxes[] = {1, 3, 50, SIZE_MAX};
    size_t max = maxes[hpdByte(r) % 4], want = 0;
    for (size_t k = 0; k < md->n; k++) want += md->v[k].t && md->v[k].t <= st->now;
    uint64_t least = UINT64_MAX;
    for (size_t k = 0; k < md->n; k++)
        if (md->v[k].t && md->v[k].t < least) least = md->v[k].t;
    HPD_EXPECT(hpsEarliest(st->s) <= (least == UINT64_MAX ? hpsEarliest(st->s) : least), "earliest after a time",
               hpsEarliest(st->s), least);
    hpdDueCtx d = {st, {0}, NULL};
    size_t n = hpsDue(st->s, st->now, max, hpdDueVisit, &d);
    if (!d.err && n != d.got.n) d.err = "due: the count returned";
    if (!d.err && n != (want < max ? want : max)) d.err = "due: not every due member";
    for (size_t k = 0; !d.err && k < d.got.n; k++) {
        HPD_EXPECT(!hpsContains(st->s, d.got.v[k].b, d.got.v[k].len), "due: taken out", 1, 0);
        hpdDel(md, d.got.v[k].b, d.got.v[k].len);
        hpdDel(&st->scanWant, d.got.v[k].b, d.got.v[k].len);
    }
    st->due += d.got.n;
    hpdModelFree(&d.got);
    if (d.err) return hpdFail(st, d.err, n, want);
    size_t timed = 0;
    for (size_t k = 0; k < md->n; k++) timed += md->v[k].t != 0;
    HPD_EXPECT(hpsTimedCount(st->s) == timed, "timed members", hpsTimedCount(st->s), timed);
    return NULL;
}

static const char *hpdStep(hpdState *st, hpdReader *r) {
    hpdModel *md = &st->md;
    unsigned char m[HPD_MAX_LEN];
    size_t len;
    uint8_t op = hpdByte(r) % 16;
    const char *err = NULL;
    st->ops++;
    hpd_current = st;
    if (op < 5 && md->n > HPD_SOFT_MAX && (op & 1)) op = 5; /* past it, inserts turn into deletes */
    if (st->defragging) {
        st->defragAt = hpsDefragSegments(st->s, st->defragAt, hpdByte(r) % 4 + 1, hpdMove);
        st->defragging = st->defragAt != 0;
    }
    switch (op) {
    case 0:
    case 1:
    case 2:
    case 3:
    case 4: { /* insert, one or a run */
        uint8_t b = hpdByte(r);
        int n = b < 200 ? 1 : (b - 199) * 20;
        for (int j = 0; j < n; j++) {
            len = hpdMemberOf(r, md, m);
            int ret = hpsInsert(st->s, m, len);
            int want = hpdAdd(md, m, len);
            HPD_EXPECT(ret == want, "insert", ret, want);
            if (len > st->longest) st->longest = len;
        }
        break;
    }
    case 5:
    case 6:
    case 7: { /* delete, one or a run of members */
        uint8_t b = hpdByte(r);
        int n = b < 220 ? 1 : (b - 219) * 40;
        for (int j = 0; j < n; j++) {
            len = hpdMemberOf(r, md, m);
            int ret = hpsDelete(st->s, m, len);
            int want = hpdDel(md, m, len);
            HPD_EXPECT(ret == want, "delete", ret, want);
            if (want) hpdDel(&st->scanWant, m, len);
        }
        break;
    }
    case 8:
    case 9: { /* contains, some after a read ahead */
        int k = hpdByte(r) % 4 + 1;
        for (int j = 0; j < k; j++) {
            len = hpdMemberOf(r, md, m);
            uint64_t h = hpsHash(m, len);
            if (j & 1) hpsPrefetch(st->s, h);
            int ret = hpsContainsHashed(st->s, h, m, len);
            HPD_EXPECT(ret == hpdHas(md, m, len), "contains", ret, !ret);
        }
        break;
    }
    case 10: { /* random members; one popped now and then, as SPOP */
        const unsigned char *rm;
        size_t rlen;
        int ret = hpsRandom(st->s, hpdRandomBits, &rm, &rlen);
        HPD_EXPECT(ret == (md->n > 0), "random: found", ret, md->n);
        if (!ret) break;
        HPD_EXPECT(hpdHas(md, rm, rlen), "random: not a member", rlen, 0);
        st->randoms++;
        if (hpdByte(r) < 96) {
            memcpy(m, rm, rlen); /* the member lies in the set: it is read before it goes */
            HPD_EXPECT(hpsDelete(st->s, rm, rlen), "pop", 0, 1);
            hpdDel(md, m, rlen);
            hpdDel(&st->scanWant, m, rlen);
        }
        break;
    }
    case 11:
    case 12: /* a scan's next call */
        err = hpdScanStep(st, r);
        break;
    case 13: { /* a defrag, a dismiss, the pages shared or not */
        uint8_t b = hpdByte(r);
        if (b < 24) {
            hpset *moved = hpsDefragShell(st->s, hpdMove);
            if (moved) st->s = moved;
            if (b < 8) {
                uint64_t at = 0;
                unsigned long calls = 0;
                do {
                    at = hpsDefragSegments(st->s, at, b % 3 + 1, hpdMove);
                    HPD_EXPECT(++calls <= md->n + 2, "defrag: does not end", calls, md->n);
                } while (at);
            } else {
                st->defragging = 1;
                st->defragAt = 0;
            }
            st->defrags++;
        } else if (b < 40) {
            static const size_t mins[] = {0, 1, 64, 512, 4096, 65536};
            hpdDismissMin = mins[hpdByte(r) % 6];
            hpdDismissBad = hpdDismissBytes = 0;
            hpsDismiss(st->s, hpdDismissMin, hpdDismissed);
            HPD_EXPECT(hpdDismissBad == 0, "dismiss: an allocation below the minimum", hpdDismissBad, hpdDismissMin);
            HPD_EXPECT(hpdDismissBytes <= hpsAllocSize(st->s), "dismiss: more bytes than allocated", hpdDismissBytes,
                       hpsAllocSize(st->s));
            st->dismissed++;
        } else if (b < 56) {
            st->shared = !st->shared;
            hpsSetPagesShared(st->shared);
        }
        break;
    }
    case 14: { /* the whole set now and then, else times */
        uint8_t b = hpdByte(r);
        if (b < 16)
            err = hpdIterate(st);
        else if (b < 216)
            err = hpdTimes(st, r, b - 16);
        break;
    }
    default: { /* a new set, sized for what is expected, filled */
        if (hpdByte(r) >= 8) break;
        size_t n = (size_t)hpdByte(r) * 16;
        hpsFree(st->s);
        hpdModelFree(md);
        st->scanning = 0;
        st->s = hpsCreate(n);
        for (size_t j = 0; j < n; j++) {
            len = (size_t)snprintf((char *)m, sizeof(m), "bulk:%zu:%u", j, (unsigned)st->ops);
            HPD_EXPECT(hpsInsert(st->s, m, len), "bulk insert", 0, j);
            hpdAdd(md, m, len);
        }
        break;
    }
    }
    if (err) return err;
    HPD_EXPECT(hpsLength(st->s) == md->n, "length", hpsLength(st->s), md->n);
    if (md->n > st->most) st->most = md->n;
    return NULL;
}

static void hpdInit(hpdState *st) {
    memset(st, 0, sizeof(*st));
    st->s = hpsCreate(0);
    st->rngState = 42;
    st->now = 1000;
}

static void hpdFree(hpdState *st) {
    hpsFree(st->s);
    hpdModelFree(&st->md);
    hpdModelFree(&st->scanWant);
    hpdModelFree(&st->scanSeen);
    hpsSetPagesShared(0);
}

/* Everything the set holds equals the model. */
static const char *hpdFull(hpdState *st) {
    const char *err = hpsCheck(st->s);
    if (err) return err;
    if (!hpsIsSet(st->s)) return "not an hpset";
    for (size_t k = 0; k < st->md.n; k++)
        HPD_EXPECT(hpsContains(st->s, st->md.v[k].b, st->md.v[k].len), "full: a member missing", k, st->md.n);
    return hpdIterate(st);
}

#endif
