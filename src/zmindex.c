/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 */

/* Member index
 * ============
 *
 * Maps a sorted-set member to the id of the B+ tree leaf that holds it
 * (zbtree.c), so that ZSCORE and the existence check of ZADD cost one hash
 * and one short leaf scan. It stores no member and no pointer: a slot is
 * eight bytes,
 *
 *     63                32 31                 0
 *    +--------------------+--------------------+
 *    | top 32 hash bits   | leaf id (never 0)  |     0 = empty slot
 *    +--------------------+--------------------+
 *
 * and a lookup yields the ids of the leaves whose slot has the member's hash
 * bits; the caller scans those leaves for the member.
 *
 * Layout
 * ------
 *
 * The index is a directory of 2^depth segments (extendible hashing): the top
 * `depth` bits of a hash pick the directory entry. A segment of local depth d
 * is shared by the 2^(depth-d) entries whose top d bits agree.
 *
 *    dir: [ s0 | s0 | s1 | s2 ]        depth 2; s0 has local depth 1
 *
 * A segment is a linear-probing table of `cap` slots whose homes cover its
 * share of the hash space in order, so a slot's home follows from the hash
 * bits it stores,
 *
 *    home = ((h32 << d) * cap) >> 32,
 *
 * and runs wrap around from the last slot to the first.
 *
 * Invariants
 * ----------
 *
 * - Robin Hood order: a slot sits at or after its home (cyclically) with no
 *   empty slot in between, and going along a run, homes never decrease and
 *   equal homes come in hash order. Read from the first slot that did not
 *   wrap, a segment is sorted by hash. So a lookup stops at the first slot
 *   closer to its home than the lookup is to its own, and a delete shifts
 *   the rest of its run back by one (no tombstones).
 * - Every hash in a segment has the segment's top-d-bit prefix.
 * - Two slots with the same value are interchangeable: which of two members
 *   of one leaf with equal hash bits owns which slot does not matter.
 *
 * Growing
 * -------
 *
 * A segment past its full load is rebuilt larger, or, at ZMI_SEG_MAX_CAP,
 * split in two by its next hash bit. Because slots are sorted by hash, the
 * split is a prefix and a suffix, and both rebuilds are one sequential pass.
 * No insert ever rehashes more than one segment, and the index never holds
 * more than one segment twice: the memory and the pause of a resize are
 * bounded by ZMI_SEG_MAX_CAP whatever the size of the set. Hash bits are
 * stored, so no member is read (nor hashed again) to move a slot.
 *
 * Conventions: public functions are prefixed "zmi", macros "ZMI_"; internal
 * functions are static and unprefixed.
 */

#include "zmindex.h"

#include <stdio.h>
#include <string.h>

#include "countedalloc.h"
#include "serverassert.h"
#include "zmalloc.h"

/* --- Tunables --- */

/* Slots per segment before it splits: a segment stays within 32 KiB, so
 * rebuilding one takes a few microseconds and no single insert stalls. */
#define ZMI_SEG_MAX_BYTES 32768
#define ZMI_SEG_MAX_CAP ((ZMI_SEG_MAX_BYTES - sizeof(segment)) / sizeof(uint64_t))
#define ZMI_SEG_MIN_CAP 8

/* A segment is rebuilt when an insert would take it past its full load,
 * to 85% (more when its allocation's size class holds more): eight bytes a slot
 * make about nine bytes a member. Robin Hood order keeps misses short at
 * such loads: a lookup stops as soon as it is further from its home than
 * the slot it looks at.
 *
 * The full load is 97% less a spread of up to 10% that depends on the
 * segment's hash prefix. Uniform hashes fill every segment at the same
 * rate, and the allocator's size classes (four a doubling) make every
 * segment take the same steps; with one full load for all, all of them
 * were rebuilt within the same two or three million inserts, a rehash of
 * the whole index in one burst (W1: at 40M and 48M members, 16,384
 * segments of 20-24 KiB each, the server a third slower for a million
 * inserts). Spread, the same rebuilds come over five million or more. It
 * costs memory: a lower full load on average, about 0.3 bytes a member
 * (from 1M to 8M members, 9.20 before, 9.53 with the spread; 95% to 86%
 * cost 0.5). The spread stays above the build load, so
 * a rebuild always grows the segment. */
#define ZMI_MAX_LOAD_PERMILLE 970
#define ZMI_LOAD_SPREAD_PERMILLE 100
#define ZMI_BUILD_LOAD_PCT 85

/* A lone segment, the index of a set of up to a few thousand members, is
 * rebuilt fuller. There the index is a large share of the set's bytes and
 * the allocator's size classes are a quarter apart, so a rebuild to 85%
 * that spills just past one pays for a whole step (docs/engine.md has the
 * figures). Its rebuilds are small, so that they come more often costs
 * little. */
#define ZMI_BUILD_LOAD_LONE_PCT 90

/* Below this load a segment is rebuilt smaller, and two buddies that fit in
 * half a segment are merged, so deletes give memory back. */
#define ZMI_MIN_LOAD_PCT 35

/* Deepest split: below it, too few hash bits would be left for the homes. */
#define ZMI_MAX_DEPTH 24

typedef struct segment {
    uint32_t cap;   /* Slots. */
    uint32_t count; /* Occupied slots. */
    uint8_t depth;  /* Local depth: how many top hash bits it shares. */
    uint64_t slot[];
} segment;

/* A directory entry keeps the two fields of its segment that place a hash,
 * so that a lookup goes from the directory straight to the slot: reading
 * the segment's header first would be one more miss before it. */
typedef struct dirEntry {
    segment *seg;
    uint32_t cap;
    uint32_t depth;
} dirEntry;

struct zmi {
    dirEntry *dir;
    uint8_t depth;
    size_t count;
    size_t bytes; /* Allocated bytes, this struct included. */
};

/* --- Helpers --- */

static inline uint32_t slotHash(uint64_t v) { return (uint32_t)(v >> 32); }
static inline uint32_t slotId(uint64_t v) { return (uint32_t)v; }
static inline uint64_t slotMake(uint32_t h32, uint32_t id) { return ((uint64_t)h32 << 32) | id; }

static inline uint32_t homeIn(uint32_t cap, uint32_t depth, uint32_t h32) {
    uint32_t bits = depth ? h32 << depth : h32;
    return (uint32_t)(((uint64_t)bits * cap) >> 32);
}

static inline uint32_t home(const segment *s, uint32_t h32) { return homeIn(s->cap, s->depth, h32); }

/* How far slot value v at position pos is from its home. */
static inline uint32_t distanceIn(uint32_t cap, uint32_t depth, uint64_t v, uint32_t pos) {
    uint32_t h = homeIn(cap, depth, slotHash(v));
    return pos >= h ? pos - h : pos + cap - h;
}

static inline uint32_t distance(const segment *s, uint64_t v, uint32_t pos) {
    return distanceIn(s->cap, s->depth, v, pos);
}

static inline uint32_t nextPos(const segment *s, uint32_t pos) { return pos + 1 == s->cap ? 0 : pos + 1; }

static inline uint32_t dirIndex(const zmi *ix, uint32_t h32) {
    return ix->depth ? h32 >> (32 - ix->depth) : 0;
}

static inline uint32_t dirSpan(const zmi *ix, const segment *s) { return 1u << (ix->depth - s->depth); }
/* The same from directory entry i's copy of the depth, which holds while
 * the segment itself reads as zeros (handed back: zmiDismissSegments). */
static inline uint32_t dirSpanAt(const zmi *ix, uint32_t i) { return 1u << (ix->depth - ix->dir[i].depth); }

/* Slots for a segment of `count` entries loaded about `pct` percent
 * (segBuild adds what fills the allocation's size class). */
static uint32_t capForLoad(size_t count, uint32_t pct) {
    size_t cap = count * 100 / pct + 1;
    return cap < ZMI_SEG_MIN_CAP ? ZMI_SEG_MIN_CAP : (uint32_t)cap;
}

static uint32_t capFor(size_t count) { return capForLoad(count, ZMI_BUILD_LOAD_PCT); }

/* --- Segments --- */

/* Inserts in Robin Hood order: after the slots further from their homes
 * and those of the same home with smaller or equal hash. The segment must
 * have an empty slot. */
static void segInsert(segment *s, uint32_t h32, uint32_t id) {
    uint32_t pos = home(s, h32), dist = 0;
    while (s->slot[pos]) {
        uint32_t d = distance(s, s->slot[pos], pos);
        if (d < dist || (d == dist && slotHash(s->slot[pos]) > h32)) break;
        pos = nextPos(s, pos);
        dist++;
    }
    uint64_t carry = slotMake(h32, id);
    while (carry) { /* shift the rest of the run right by one */
        uint64_t v = s->slot[pos];
        s->slot[pos] = carry;
        carry = v;
        pos = nextPos(s, pos);
    }
    s->count++;
}

/* Builds a segment from slots sorted by hash, with at least cap slots: as
 * many as its allocation holds, since they are paid for anyway. */
static segment *segBuild(zmi *ix, uint8_t depth, uint32_t cap, const uint64_t *v, uint32_t n) {
    size_t usable;
    segment *s = countedAllocUsable(&ix->bytes, sizeof(segment) + (size_t)cap * sizeof(uint64_t), &usable);
    size_t fits = (usable - sizeof(segment)) / sizeof(uint64_t);
    if (fits > cap && (fits <= ZMI_SEG_MAX_CAP || cap > ZMI_SEG_MAX_CAP)) cap = (uint32_t)fits;
    s->cap = cap;
    s->count = 0;
    s->depth = depth;
    memset(s->slot, 0, (size_t)cap * sizeof(uint64_t));
    /* In order, each at its home or after the one before; what runs past
     * the last slot wraps through segInsert. */
    int64_t last = -1;
    uint32_t i = 0;
    for (; i < n; i++) {
        int64_t h = home(s, slotHash(v[i]));
        int64_t p = h > last ? h : last + 1;
        if (p >= cap) break;
        s->slot[p] = v[i];
        s->count++;
        last = p;
    }
    for (; i < n; i++) segInsert(s, slotHash(v[i]), slotId(v[i]));
    return s;
}

/* Copies the occupied slots of s to out in hash order: from the first slot
 * that did not wrap around. Returns how many. */
static uint32_t segCollect(const segment *s, uint64_t *out) {
    uint32_t start = 0, n = 0;
    while (start < s->cap && s->slot[start] && home(s, slotHash(s->slot[start])) > start) start++;
    for (uint32_t k = 0, p = start; k < s->cap; k++, p = nextPos(s, p))
        if (s->slot[p]) out[n++] = s->slot[p];
    return n;
}

static void dirSet(zmi *ix, uint32_t first, uint32_t span, segment *s) {
    for (uint32_t i = 0; i < span; i++) ix->dir[first + i] = (dirEntry){s, s->cap, s->depth};
}

static uint32_t dirFirst(const zmi *ix, const segment *s, uint32_t di) { return di & ~(dirSpan(ix, s) - 1); }

static void dirDouble(zmi *ix) {
    uint32_t n = 1u << ix->depth;
    dirEntry *dir = countedAlloc(&ix->bytes, sizeof(dirEntry) * n * 2);
    for (uint32_t i = 0; i < n; i++) dir[2 * i] = dir[2 * i + 1] = ix->dir[i];
    countedFree(&ix->bytes, ix->dir);
    ix->dir = dir;
    ix->depth++;
}

/* Rebuilds the segment at directory entry di with room for `count` slots:
 * larger, smaller or split in two. */
static void segResize(zmi *ix, uint32_t di, size_t count) {
    segment *s = ix->dir[di].seg;
    uint64_t *v = zmalloc(sizeof(uint64_t) * (s->count ? s->count : 1));
    uint32_t n = segCollect(s, v);
    uint32_t first = dirFirst(ix, s, di);
    uint32_t span = dirSpan(ix, s);

    if (capFor(count) <= ZMI_SEG_MAX_CAP || s->depth >= ZMI_MAX_DEPTH) {
        uint32_t cap = ix->depth == 0 ? capForLoad(count, ZMI_BUILD_LOAD_LONE_PCT) : capFor(count);
        dirSet(ix, first, span, segBuild(ix, s->depth, cap, v, n));
    } else {
        if (s->depth == ix->depth) {
            dirDouble(ix);
            first *= 2;
            span *= 2;
        }
        /* Sorted by hash, so the next bit splits them into a prefix and a
         * suffix. */
        uint32_t bit = 1u << (31 - s->depth), k = 0;
        while (k < n && !(slotHash(v[k]) & bit)) k++;
        dirSet(ix, first, span / 2, segBuild(ix, s->depth + 1, capFor(k), v, k));
        dirSet(ix, first + span / 2, span / 2, segBuild(ix, s->depth + 1, capFor(n - k), v + k, n - k));
    }
    zfree(v);
    countedFree(&ix->bytes, s);
}

/* Merges the segment at di with its buddy (same depth, last prefix bit
 * flipped) when together they fit half a segment and that saves memory. */
static void segMergeBuddy(zmi *ix, uint32_t di) {
    segment *s = ix->dir[di].seg;
    /* Decided on s alone where it can be: almost every delete leaves s too
     * full to merge, and the buddy's header is a cache miss. */
    if (s->depth == 0 || capFor(s->count) > ZMI_SEG_MAX_CAP / 2) return;
    uint32_t span = dirSpan(ix, s);
    uint32_t first = dirFirst(ix, s, di);
    uint32_t buddyFirst = first ^ span;
    if (ix->dir[buddyFirst].depth != s->depth) return;
    segment *b = ix->dir[buddyFirst].seg;
    if (capFor(s->count + b->count) > ZMI_SEG_MAX_CAP / 2) return;
    if ((uint64_t)capFor(s->count + b->count) * 4 > ((uint64_t)s->cap + b->cap) * 3) return;

    segment *lo = first < buddyFirst ? s : b, *hi = first < buddyFirst ? b : s;
    uint64_t *v = zmalloc(sizeof(uint64_t) * (s->count + b->count + 1));
    uint32_t n = segCollect(lo, v);
    n += segCollect(hi, v + n);
    segment *m = segBuild(ix, s->depth - 1, capFor(n), v, n);
    dirSet(ix, first < buddyFirst ? first : buddyFirst, span * 2, m);
    zfree(v);
    countedFree(&ix->bytes, s);
    countedFree(&ix->bytes, b);
}

/* Position of the slot (h32, id) in s, or -1. */
static int64_t segFind(const segment *s, uint32_t h32, uint32_t id) {
    uint64_t want = slotMake(h32, id);
    for (uint32_t pos = home(s, h32), dist = 0; s->slot[pos] && dist < s->cap; pos = nextPos(s, pos), dist++) {
        if (s->slot[pos] == want) return pos;
        if (distance(s, s->slot[pos], pos) < dist) break;
    }
    return -1;
}

/* Empties slot p and pulls the rest of its run back towards their homes. */
static void segDelete(segment *s, uint32_t p) {
    uint32_t gap = p;
    for (uint32_t q = nextPos(s, p); s->slot[q] && distance(s, s->slot[q], q) > 0; q = nextPos(s, q)) {
        s->slot[gap] = s->slot[q];
        gap = q;
    }
    s->slot[gap] = 0;
    s->count--;
}

/* --- API --- */

zmi *zmiCreate(size_t expected) {
    size_t usable;
    zmi *ix = zmalloc_usable(sizeof(*ix), &usable);
    ix->bytes = usable;
    ix->count = 0;
    ix->depth = 0;
    ix->dir = countedAlloc(&ix->bytes, sizeof(dirEntry));
    /* Many segments from the start when the size is known (RDB load). */
    while (capFor(expected >> ix->depth) > ZMI_SEG_MAX_CAP / 2 && ix->depth < 16) dirDouble(ix);
    uint32_t n = 1u << ix->depth;
    for (uint32_t i = 0; i < n; i++) dirSet(ix, i, 1, segBuild(ix, ix->depth, capFor(expected >> ix->depth), NULL, 0));
    return ix;
}

void zmiFree(zmi *ix) {
    if (!ix) return;
    uint32_t n = 1u << ix->depth;
    for (uint32_t i = 0; i < n; i++) {
        segment *s = ix->dir[i].seg;
        if (i + 1 < n && ix->dir[i + 1].seg == s) continue; /* shared entries are adjacent */
        zfree(s);
    }
    zfree(ix->dir);
    zfree(ix);
}

size_t zmiCount(const zmi *ix) { return ix->count; }
size_t zmiAllocSize(const zmi *ix) { return ix->bytes; }

uint32_t zmiNext(zmiIter *it) {
    const uint64_t *slot = ((const segment *)it->seg)->slot;
    uint32_t cap = it->cap;
    while (it->dist < cap) {
        uint64_t v = slot[it->pos];
        if (!v || distanceIn(cap, it->depth, v, it->pos) < it->dist) break;
        it->pos = it->pos + 1 == cap ? 0 : it->pos + 1;
        it->dist++;
        if (slotHash(v) == it->h32) return slotId(v);
    }
    it->dist = cap;
    return 0;
}

uint32_t zmiFirst(const zmi *ix, uint64_t hash, zmiIter *it) {
    uint32_t h32 = (uint32_t)(hash >> 32);
    const dirEntry *e = &ix->dir[dirIndex(ix, h32)];
    it->seg = e->seg;
    it->cap = e->cap;
    it->depth = e->depth;
    it->h32 = h32;
    it->pos = homeIn(e->cap, e->depth, h32);
    it->dist = 0;
    return zmiNext(it);
}

void zmiPrefetch(const zmi *ix, uint64_t hash) {
    uint32_t h32 = (uint32_t)(hash >> 32);
    const dirEntry *e = &ix->dir[dirIndex(ix, h32)];
    const uint64_t *slot = &e->seg->slot[homeIn(e->cap, e->depth, h32)];
    __builtin_prefetch(slot);
    /* GCC counts a function that only prefetches as pure, and across files
     * (LTO) drops every call to it: this empty asm is a side effect. */
    __asm__ volatile(""
                     :
                     : "r"(slot));
}

/* Per mille of its slots a segment may fill: see ZMI_MAX_LOAD_PERMILLE. The
 * prefix and depth of the segment that holds h32 pick the spread. */
static uint32_t fullLoad(uint32_t depth, uint32_t h32) {
    uint32_t prefix = depth ? h32 >> (32 - depth) : 0;
    uint32_t mix = (prefix ^ (depth << 24)) * 0x9E3779B1u; /* Fibonacci hashing */
    return ZMI_MAX_LOAD_PERMILLE - (uint32_t)(((uint64_t)mix * ZMI_LOAD_SPREAD_PERMILLE) >> 32);
}

void zmiInsert(zmi *ix, uint64_t hash, uint32_t id) {
    uint32_t h32 = (uint32_t)(hash >> 32);
    uint32_t di = dirIndex(ix, h32);
    segment *s = ix->dir[di].seg;
    if ((uint64_t)(s->count + 1) * 1000 > (uint64_t)s->cap * fullLoad(ix->dir[di].depth, h32) ||
        s->count + 1 >= s->cap) {
        segResize(ix, di, s->count + 1);
        s = ix->dir[dirIndex(ix, h32)].seg;
    }
    segInsert(s, h32, id);
    ix->count++;
}

static int pagesShared;

void zmiSetPagesShared(int shared) { pagesShared = shared; }

int zmiRemove(zmi *ix, uint64_t hash, uint32_t id) {
    uint32_t h32 = (uint32_t)(hash >> 32);
    uint32_t di = dirIndex(ix, h32);
    segment *s = ix->dir[di].seg;
    int64_t p = segFind(s, h32, id);
    if (p < 0) return 0;
    segDelete(s, (uint32_t)p);
    ix->count--;
    if (pagesShared) return 1;
    if (s->cap > ZMI_SEG_MIN_CAP && (uint64_t)s->count * 100 < (uint64_t)s->cap * ZMI_MIN_LOAD_PCT) {
        segResize(ix, di, s->count);
    }
    segMergeBuddy(ix, dirIndex(ix, h32));
    return 1;
}

int zmiRepoint(zmi *ix, uint64_t hash, uint32_t from, uint32_t to) {
    uint32_t h32 = (uint32_t)(hash >> 32);
    segment *s = ix->dir[dirIndex(ix, h32)].seg;
    int64_t p = segFind(s, h32, from);
    if (p < 0) return 0;
    s->slot[p] = slotMake(h32, to);
    return 1;
}

void zmiGetStats(const zmi *ix, zmiStats *st) {
    memset(st, 0, sizeof(*st));
    if (!ix) return; /* a small tree's: none */
    st->entries = ix->count;
    st->bytes = ix->bytes;
    st->depth = ix->depth;
    uint32_t n = 1u << ix->depth;
    for (uint32_t i = 0; i < n; i += dirSpan(ix, ix->dir[i].seg)) {
        const segment *s = ix->dir[i].seg;
        size_t size = zmalloc_size((void *)s);
        st->segments++;
        st->slots += s->cap;
        if (size > st->largestSegmentBytes) st->largestSegmentBytes = size;
        for (uint32_t p = 0; p < s->cap; p++) {
            if (!s->slot[p]) continue;
            uint32_t d = distance(s, s->slot[p], p);
            if (d > st->longestProbe) st->longestProbe = d;
        }
    }
}

void zmiDismissSegments(zmi *ix, size_t min, void (*fn)(void *ptr, size_t size)) {
    uint32_t n = 1u << ix->depth;
    for (uint32_t i = 0; i < n; i += dirSpanAt(ix, i)) {
        size_t size = zmalloc_size(ix->dir[i].seg);
        if (size >= min) fn(ix->dir[i].seg, size);
    }
}

void zmiDismiss(zmi *ix, size_t min, void (*fn)(void *ptr, size_t size)) {
    zmiDismissSegments(ix, min, fn);
    if (zmalloc_size(ix->dir) >= min) fn(ix->dir, zmalloc_size(ix->dir));
}

void zmiDefrag(zmi *ix, void *(*fn)(void *)) {
    uint32_t n = 1u << ix->depth;
    for (uint32_t i = 0; i < n;) {
        segment *s = ix->dir[i].seg;
        uint32_t span = dirSpan(ix, s);
        segment *moved = fn(s);
        if (moved) dirSet(ix, i, span, moved);
        i += span;
    }
    dirEntry *dir = fn(ix->dir);
    if (dir) ix->dir = dir;
}

uint64_t zmiScan(const zmi *ix, uint64_t from, size_t count, void (*visit)(void *ctx, uint32_t h32, uint32_t id),
                 void *ctx) {
    size_t seen = 0;
    while (from < (1ULL << 32)) {
        uint32_t h = (uint32_t)from;
        const segment *s = ix->dir[dirIndex(ix, h)].seg;
        uint64_t end = s->depth ? ((uint64_t)(h >> (32 - s->depth)) + 1) << (32 - s->depth) : 1ULL << 32;
        uint64_t *v = zmalloc(sizeof(uint64_t) * (s->count + 1));
        uint32_t n = segCollect(s, v), lo = 0, hi = n;
        while (lo < hi) { /* first slot with hash >= h */
            uint32_t mid = (lo + hi) / 2;
            if (slotHash(v[mid]) < h) lo = mid + 1;
            else hi = mid;
        }
        for (uint32_t i = lo; i < n; i++) {
            if (seen >= count && slotHash(v[i]) != slotHash(v[i - 1])) {
                uint64_t next = slotHash(v[i]);
                zfree(v);
                return next;
            }
            visit(ctx, slotHash(v[i]), slotId(v[i]));
            seen++;
        }
        zfree(v);
        from = end;
        if (seen >= count) break;
    }
    return from;
}

void zmiForEach(const zmi *ix, void (*visit)(void *ctx, uint32_t h32, uint32_t id), void *ctx) {
    uint32_t n = 1u << ix->depth;
    for (uint32_t i = 0; i < n;) {
        const segment *s = ix->dir[i].seg;
        for (uint32_t p = 0; p < s->cap; p++)
            if (s->slot[p]) visit(ctx, slotHash(s->slot[p]), slotId(s->slot[p]));
        i += dirSpan(ix, s);
    }
}

/* Returns NULL when every invariant of the header comment holds, else what
 * is wrong. */
const char *zmiCheck(const zmi *ix) {
    static char err[128];
    uint32_t n = 1u << ix->depth;
    size_t total = 0;
    for (uint32_t i = 0; i < n;) {
        const segment *s = ix->dir[i].seg;
        if (s->depth > ix->depth) return "segment deeper than the directory";
        uint32_t span = dirSpan(ix, s);
        if (i % span) return "segment not aligned in the directory";
        for (uint32_t j = 0; j < span; j++)
            if (ix->dir[i + j].seg != s) return "directory range of a segment is split";
        if (ix->dir[i].cap != s->cap || ix->dir[i].depth != s->depth) return "directory entry out of date";
        if (s->count >= s->cap) return "segment without an empty slot";
        uint32_t count = 0;
        for (uint32_t p = 0; p < s->cap; p++) {
            uint64_t v = s->slot[p];
            if (!v) continue;
            count++;
            uint32_t h32 = slotHash(v);
            if (slotId(v) == 0) return "slot with leaf id 0";
            if (ix->depth && (h32 >> (32 - ix->depth)) >> (ix->depth - s->depth) != i >> (ix->depth - s->depth))
                return "hash outside its segment's prefix";
            for (uint32_t q = home(s, h32); q != p; q = nextPos(s, q))
                if (!s->slot[q]) return "empty slot between a slot and its home";
        }
        if (count != s->count) {
            snprintf(err, sizeof(err), "segment count %u, %u slots used", s->count, count);
            return err;
        }
        uint64_t *v = zmalloc(sizeof(uint64_t) * (count + 1));
        uint32_t got = segCollect(s, v);
        int sorted = got == count;
        for (uint32_t k = 1; k < got && sorted; k++)
            if (slotHash(v[k - 1]) > slotHash(v[k])) sorted = 0;
        zfree(v);
        if (!sorted) return "slots out of Robin Hood order";
        total += count;
        i += span;
    }
    if (total != ix->count) return "index count differs from its segments";
    return NULL;
}
