/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * hpset: the members of a big set of strings, packed in hashed buckets.
 *
 * A lookup should cost what upstream's hashtable's does, one line from
 * memory, which can be asked for ahead of time, while the members stay
 * packed as in a listpack. So members live inline in 128-byte buckets
 * (two lines, asked for together) picked by their hash, buckets make up
 * segments, and a directory of the hash's top bits points to the segments
 * (extendible hashing):
 *
 *   hpset { tag, count, dir[2^depth] (+ bound[2^depth]), timed, earliest }
 *                        |  slot = segment pointer << 16 | homes << 6 | depth
 *                        |  bound = the slot's segment's earliest, from the
 *                        |          set's first time on (boundsOf)
 *                        +--> segment (a bucket's room of header, then buckets)
 *                             [earliest base count used homes depth moreBits ...]
 *                             [bucket 0][bucket 1] ... [bucket homes-1]
 *                             [extra]                     (EXTRA, no home)
 *
 *   bucket: [meta][tag len bytes...][tag len bytes...] ... [free]
 *           meta = bytes of entries (7 bits) | OVERFLOWED (0x80)
 *   entry:  tag, [timed:1 more:2 len:5], then the member's bytes (len <=
 *           INLINE_MAX) or, with len OUT_OF_LINE, an 8-byte pointer to
 *           [u32 len][bytes]; then, if timed, its time (1 .. 2^48 ms):
 *           3 bytes [time - base:23 0] or 7 bytes [time - 1:55 1]
 *
 * A segment of local depth d holds the members whose hash has its d-bit
 * prefix; it is pointed to by the 2^(depth-d) directory slots of that
 * prefix. A member's tag is the next 8 bits of its hash, bits d to d+7, and
 * its home bucket is tag * homes / 256: buckets follow the hash's order.
 * The 2 bits after the tag ride in the len byte ("more"), of which the
 * segment's first moreBits are right: a split takes its bit from the tag's
 * top and shifts the next one in from them, so it hashes no member again
 * while one is left.
 *
 * A member may carry a time (the server's expire time of a set member),
 * which costs its entry 3 bytes within 2.3 hours of its segment's base (a
 * segment's first time, or its earliest when it is built) and 7 bytes
 * elsewhere: a 24-character lowercase member then takes 21 bytes, six to a
 * bucket (seven without), where 6 bytes would leave five. Each segment
 * keeps a lower bound of its entries' times (earliest), and the set one of
 * its segments': the members due at a time are found, and taken out where
 * they lie, by reading only the segments whose bound has come (hpsDue),
 * and a set whose bound has not come has none.
 * An insert goes to the first bucket from the home on with room for it,
 * and marks the buckets it passed OVERFLOWED; a lookup goes on past its
 * home only while buckets are marked (as upstream's "ever full" buckets).
 *
 * Invariants:
 * - A member lies at its home or after it, and every bucket from its home
 *   to the one before its own is OVERFLOWED. Buckets hold at most
 *   MAX_PER_BUCKET entries, and the set's maxPer is at least any bucket's.
 * - A segment's count and used are its entries and their bytes; its
 *   allocation is a jemalloc size class of whole buckets (so that buckets
 *   start on lines), between SEG_MIN_BYTES and SEG_MAX_BYTES. Every slot
 *   of a segment carries its current home count and depth.
 * - The directory is 2^depth slots; a segment of depth d <= depth fills
 *   the aligned run of 2^(depth-d) slots of its prefix; atDepth counts the
 *   segments of depth `depth`.
 * - bytes is what the set has allocated, for MEMORY USAGE in O(1).
 * - timed counts the entries with a time; a segment's earliest is at most
 *   every time it holds, and the set's at most every time. A set that has
 *   had a time has bounds, each its slot's segment's earliest.
 *
 * Growth: a segment past its load (MAX_LOAD and its kin) is rebuilt a size
 * class larger (two from WIDE_HOMES on, in a big set), placing entries by
 * their stored tags (no member is read or hashed); past the largest class
 * it splits in two by hash bit d, the tags' top bit. Its members are
 * hashed again only when no more bit is left: at the first growth after
 * the split that used the last (while the segment holds fewest), else at
 * the split that needs one (upstream's hashtable rehashes every member each
 * time it doubles). No
 * step allocates more than two segments, so no insert stalls or adds more
 * than 16 KiB. Deletes rebuild a segment below MIN_LOAD smaller and merge
 * two buddies that fit in one: the merged tag is the prefix's last bit
 * followed by the tag's top seven, so merging reads no member either.
 *
 * SSCAN's cursor is a position in a 48-bit hash space (HASH_POS_BITS). A
 * call emits the members whose known position (the top d+8 bits of their
 * hash) lies from the cursor up to a bucket boundary of the layout it
 * finds, and the members displaced beyond that boundary from before it, so
 * every member is emitted by the call whose range holds its hash, however
 * segments split, grow or merge between calls (members astride the cursor
 * may come twice, as SCAN allows).
 *
 * A random member: a directory slot, a bucket of a whole-size segment and
 * an entry among maxPer, each uniform, kept when they name an entry and
 * after a coin of 2^(d-depth) that evens out segments of smaller depth
 * (rejection sampling: every member is equally likely); after
 * RANDOM_TRIES misses (a set left sparse), a uniform rank walked to.
 *
 * Public names start with hps; internal functions are static.
 */

#include "hpset.h"

#include <stdio.h>
#include <string.h>

#include "countedalloc.h"
#include "zmalloc.h"
#include "serverassert.h"

uint64_t siphash(const uint8_t *in, const size_t inlen, const uint8_t *k);

#define LINE 64
#define BUCKET 128 /* Two lines, asked for together. */
#define BUCKET_ROOM (BUCKET - 1) /* Bytes for entries after the meta byte. */
#define META_USED 0x7f
#define META_OVERFLOWED 0x80
#define ENTRY_HEAD 2
#define INLINE_MAX 30    /* Longer members live out of line. */
#define LEN_MASK 0x1f
#define OUT_OF_LINE 0x1f /* The len code of an out-of-line member. */
#define MORE_SHIFT 5
#define MORE_BITS 2
#define MORE_MASK ((1u << MORE_BITS) - 1)
#define TIMED 0x80 /* In the len byte: a time follows the member. */
/* A time field, little-endian, its lowest bit the form: short, the time
 * less the segment's base in the 23 bits above (2.3 hours of ms); long,
 * the time less one. */
#define TIME_SHORT 3
#define TIME_LONG 7
#define TIME_SHORT_SPAN (UINT64_C(1) << 23)
#define NO_TIME UINT64_MAX /* A segment's or set's earliest with no time. */
#define OOL_ENTRY (ENTRY_HEAD + sizeof(void *))
#define MAX_PER_BUCKET 12
#define EXTRA 1 /* Buckets past the last home, where a run may end. */
#define TAG_BITS 8
#define SEG_MIN_BYTES 384
/* Segments of up to 16 KiB keep the directory small enough to stay in the
 * cache more often: a quarter of the slots that 8 KiB segments need, at
 * the same memory; 32 KiB gained nothing more (docs/engine.md, part 3:
 * SEG_MAX_HOMES, 09e0638). A slot holds home counts below 1024, and past
 * 256 homes (tag * homes / 256) some would get no tag. */
#define SEG_MAX_HOMES 126 /* The last of seg_homes: 16 KiB. */
#define SEG_MAX_BUCKETS (SEG_MAX_HOMES + EXTRA)
#define SEG_MAX_BYTES (BUCKET * (1 + SEG_MAX_BUCKETS))
#define MAX_DEPTH 40
#define PRESIZE_ENTRIES 256 /* Members a segment is expected to get. */
#define HASH_POS_BITS 48
/* Loads, as a share of what a segment's buckets hold of entries its size:
 * the most a segment takes before it grows, and what it is built at. A set
 * of one segment is dense (SMALL_), a set of several less so; a set of
 * BIG_MEMBERS or more less again (BIG_), because a fuller segment overflows
 * more buckets, and a lookup or insert whose home is overflowed reads the
 * next bucket too: at the big loads half as many buckets overflow, for
 * about three more bytes a member (docs/engine.md, part 3: BIG_MAX_LOAD,
 * 45d059d). Below BIG_MEMBERS the set stays dense, as W3 asks it to take no
 * more than a HASH of its members, which the big loads broke at a few hundred. */
#define SMALL_MAX_LOAD 0.92
#define SMALL_BUILD_LOAD 0.85
#define MAX_LOAD 0.9
#define BUILD_LOAD 0.75
#define BIG_MAX_LOAD 0.8
#define BIG_BUILD_LOAD 0.65
#define BIG_MEMBERS 65536
/* In a set of WIDE_MEMBERS or more, a segment of WIDE_HOMES homes or more
 * grows two size classes a step, else one. Each step moves every entry of
 * the segment, and the large classes are a sixth to a fifth apart: one
 * class a step costs six moves an insert, two three. Measured with
 * 24-character strings from 0.5M to 4M members (at loads 0.9 and 0.75),
 * this costs 25.4 B/member on average instead of 24.4 (at most 26.9
 * instead of 25.7) and saves a seventh of an insert's CPU. A smaller set
 * stays dense: up to 512 members a HASH of the same members is a listpack
 * (W3), which it must not exceed. */
#ifndef WIDE_HOMES
#define WIDE_HOMES 38
#endif
#define WIDE_MEMBERS 1024
#define MIN_LOAD 0.30

typedef struct segment {
    uint64_t earliest; /* At most any time its entries hold (NO_TIME). */
    uint64_t base;     /* Short times count from it; 0 while none does. */
    uint32_t count;    /* Entries. */
    uint32_t used;  /* Bytes of entries. */
    uint16_t homes; /* Home buckets; EXTRA more follow. */
    uint8_t depth;
    uint8_t moreBits; /* Leading bits of every entry's "more" that are right. */
    /* The entries the segment takes before it grows, worked out while its
     * entries average avg bytes (rounded up) and the set keeps the loads
     * set_loads[loads]; see takesOneMore. */
    uint32_t limit;
    uint8_t avg, loads;
    uint8_t pad[BUCKET - 34];
} segment;

struct hpset {
    uint64_t tag; /* HPSET_TAG */
    uint64_t count;
    size_t bytes;
    uint64_t *dir; /* Slots: see slotFor. */
    uint32_t segments;
    uint32_t atDepth; /* Segments whose depth is the directory's. */
    uint64_t timed;    /* Entries with a time. */
    uint64_t earliest; /* At most any segment's earliest (NO_TIME). */
    uint8_t depth;
    uint8_t maxPer;
    uint8_t mark;    /* The server's (hpsMark): carried, never read. */
    uint8_t bounded; /* The directory's allocation holds bounds (boundsOf). */
};

_Static_assert(sizeof(segment) == BUCKET, "a segment's header is one bucket");
_Static_assert(sizeof(hpset) == 64, "an hpset is a 64-byte size class");

static uint8_t hash_seed[16];
static int pages_shared = 0;

void hpsSetHashSeed(const uint8_t seed[16]) { memcpy(hash_seed, seed, sizeof(hash_seed)); }
void hpsSetPagesShared(int shared) { pages_shared = shared; }
uint64_t hpsHash(const unsigned char *m, size_t len) { return siphash(m, len, hash_seed); }

/* --- Entries and buckets --- */

static inline unsigned char *bucketAt(const segment *g, unsigned i) {
    return (unsigned char *)g + BUCKET * (1 + (size_t)i);
}

static inline unsigned segBuckets(const segment *g) { return g->homes + EXTRA; }
static inline size_t segBytes(unsigned homes) { return (size_t)BUCKET * (1 + homes + EXTRA); }
static inline unsigned tagOf(uint64_t h, unsigned depth) { return (unsigned)((h << depth) >> (64 - TAG_BITS)); }
static inline unsigned moreOf(uint64_t h, unsigned depth) {
    return (unsigned)((h << (depth + TAG_BITS)) >> (64 - MORE_BITS));
}
static inline unsigned lenCode(const unsigned char *e) { return e[1] & LEN_MASK; }
static inline unsigned moreCode(const unsigned char *e) { return (e[1] >> MORE_SHIFT) & MORE_MASK; }
static inline int isTimed(const unsigned char *e) { return (e[1] & TIMED) != 0; }
static inline unsigned homeOf(unsigned tag, unsigned homes) { return (tag * homes) >> TAG_BITS; }
static inline size_t slotOf(const hpset *s, uint64_t h) { return s->depth ? h >> (64 - s->depth) : 0; }

/* A directory slot carries its segment's home count and depth beside the
 * pointer (user-space addresses take 48 bits), so that the line of a
 * lookup is known without a read of the segment. */
static inline uint64_t slotFor(const segment *g) {
    return ((uint64_t)(uintptr_t)g << 16) | ((uint64_t)g->homes << 6) | g->depth;
}
static inline segment *slotSegment(uint64_t slot) { return (segment *)(uintptr_t)(slot >> 16); }
static inline unsigned slotHomes(uint64_t slot) { return (slot >> 6) & 0x3ff; }
static inline unsigned slotDepth(uint64_t slot) { return slot & 0x3f; }
static inline segment *segAt(const hpset *s, size_t i) { return slotSegment(s->dir[i]); }
/* The first of the slots of segment g, one of which is slot i. */
static inline size_t firstSlot(const hpset *s, size_t i, const segment *g) {
    return i & ~(((size_t)1 << (s->depth - g->depth)) - 1);
}
/* From a set's first time on, its directory's slots are followed by as
 * many bounds: each its segment's earliest, so that a walk for due members
 * reads one array, not every segment's header. */
static inline uint64_t *boundsOf(const hpset *s) { return s->bounded ? s->dir + ((size_t)1 << s->depth) : NULL; }
static inline size_t dirBytes(const hpset *s, unsigned depth) {
    return (sizeof(uint64_t) << depth) * (s->bounded ? 2 : 1);
}
static inline size_t payloadSize(const unsigned char *e) {
    return lenCode(e) == OUT_OF_LINE ? sizeof(void *) : lenCode(e);
}
static inline size_t timeFieldSize(const unsigned char *f) { return f[0] & 1 ? TIME_LONG : TIME_SHORT; }
static inline size_t entrySize(const unsigned char *e) {
    size_t ps = ENTRY_HEAD + payloadSize(e);
    return ps + (isTimed(e) ? timeFieldSize(e + ps) : 0);
}
static inline size_t storedSize(size_t len) {
    return len <= INLINE_MAX ? ENTRY_HEAD + len : OOL_ENTRY;
}

/* The time of timed entry e of segment g, 1 .. 2^48. */
static inline uint64_t entryTime(const segment *g, const unsigned char *e) {
    const unsigned char *f = e + ENTRY_HEAD + payloadSize(e);
    size_t n = timeFieldSize(f);
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = (v << 8) | f[i];
    return n == TIME_SHORT ? g->base + (v >> 1) : (v >> 1) + 1;
}

/* The bytes time t takes in segment g: short from its base, which a
 * segment without one takes from its first time. */
static inline size_t timeSizeIn(const segment *g, uint64_t t) {
    uint64_t base = g->base ? g->base : t;
    return t >= base && t - base < TIME_SHORT_SPAN ? TIME_SHORT : TIME_LONG;
}

/* Writes time t's field at f for segment g (taking t as its base if it
 * has none); returns its size. */
static inline size_t putTime(unsigned char *f, segment *g, uint64_t t) {
    size_t n = timeSizeIn(g, t);
    if (!g->base) g->base = t;
    uint64_t v = n == TIME_SHORT ? (t - g->base) << 1 : ((t - 1) << 1) | 1;
    for (size_t i = 0; i < n; i++, v >>= 8) f[i] = (unsigned char)v;
    return n;
}

static inline uint64_t earlierOf(uint64_t a, uint64_t b) { return a < b ? a : b; }

static inline const unsigned char *oolBlock(const unsigned char *e) {
    const unsigned char *p;
    memcpy(&p, e + ENTRY_HEAD, sizeof(p));
    return p;
}

/* The member an entry holds. */
static inline const unsigned char *entryMember(const unsigned char *e, size_t *len) {
    if (lenCode(e) != OUT_OF_LINE) {
        *len = lenCode(e);
        return e + ENTRY_HEAD;
    }
    const unsigned char *p = oolBlock(e);
    uint32_t l;
    memcpy(&l, p, sizeof(l));
    *len = l;
    return p + sizeof(l);
}

/* Whether a and b, of len bytes, are the same. A bucket's entries mostly
 * share their tag with a few others (the tag picks the home bucket), so a
 * word compared here saves most of the calls to memcmp. */
static inline int sameBytes(const unsigned char *a, const unsigned char *b, size_t len) {
    if (len >= sizeof(uint64_t)) {
        uint64_t x, y;
        memcpy(&x, a + len - sizeof(x), sizeof(x));
        memcpy(&y, b + len - sizeof(y), sizeof(y));
        if (x != y) return 0;
    }
    return memcmp(a, b, len) == 0;
}

static inline int entryIs(const unsigned char *e, const unsigned char *m, size_t len) {
    if (lenCode(e) != OUT_OF_LINE) return lenCode(e) == len && sameBytes(e + ENTRY_HEAD, m, len);
    if (len <= INLINE_MAX) return 0;
    size_t l;
    const unsigned char *p = entryMember(e, &l);
    return l == len && sameBytes(p, m, len);
}

static inline unsigned bucketEnd(const unsigned char *b) { return 1 + (b[0] & META_USED); }

static unsigned bucketEntries(const unsigned char *b) {
    unsigned n = 0, end = bucketEnd(b);
    for (unsigned p = 1; p < end; p += entrySize(b + p)) n++;
    return n;
}

/* --- Segments: allocation (every byte counted in s->bytes) --- */

/* The jemalloc size classes of whole lines a segment takes (four a
 * doubling, as jemalloc's), as home bucket counts. */
static const uint16_t seg_homes[] = {
    1, 2, 3, 4, 5, 6, 8, 10, 12, 14, 18, 22, 26, 30, 38, 46, 54, 62, 78, 94, 110, SEG_MAX_HOMES,
};
/* Fewer classes (HPS_SEG_CLASSES) make segments split sooner: the tests'
 * small builds. */
#ifdef HPS_SEG_CLASSES
#define SEG_SIZES HPS_SEG_CLASSES
#else
#define SEG_SIZES (sizeof(seg_homes) / sizeof(seg_homes[0]))
#endif

static segment *segNew(hpset *s, unsigned homes, unsigned depth) {
    segment *g = countedAlloc(&s->bytes, segBytes(homes));
    assert(((uintptr_t)g >> 48) == 0);
    memset(g, 0, segBytes(homes));
    g->earliest = NO_TIME;
    g->homes = homes;
    g->depth = depth;
    g->moreBits = MORE_BITS;
    s->segments++;
    return g;
}

static void segFree(hpset *s, segment *g) {
    s->segments--;
    countedFree(&s->bytes, g);
}

/* Entries a bucket holds when they are as large as the segment's are on
 * average. */
static unsigned perBucketOfAvg(unsigned avg) {
    unsigned n = avg ? BUCKET_ROOM / avg : MAX_PER_BUCKET;
    return n < 1 ? 1 : n > MAX_PER_BUCKET ? MAX_PER_BUCKET : n;
}

static unsigned perBucket(uint64_t count, uint64_t used) {
    if (!count) return 3;
    return perBucketOfAvg((unsigned)((used + count - 1) / count));
}

/* The smallest size class whose buckets hold count entries at load, from
 * class `from` on; SEG_SIZES when none does. */
static unsigned sizeFor(uint64_t count, uint64_t used, double load, unsigned from) {
    double need = (double)count / (perBucket(count, used) * load);
    for (unsigned i = from; i < SEG_SIZES; i++)
        if (seg_homes[i] >= need) return i;
    return SEG_SIZES;
}

/* The loads a segment grows past and is built at (see SMALL_MAX_LOAD), by
 * the set's size: one segment, several, or BIG_MEMBERS members or more. */
static const struct {
    double max, build;
} set_loads[] = {{SMALL_MAX_LOAD, SMALL_BUILD_LOAD}, {MAX_LOAD, BUILD_LOAD}, {BIG_MAX_LOAD, BIG_BUILD_LOAD}};

/* The index in set_loads of a set of several segments: splits, merges and
 * shrinks build at it even while the set has one. */
static uint8_t severalLoads(const hpset *s) { return s->count < BIG_MEMBERS ? 1 : 2; }
static uint8_t loadsOf(const hpset *s) { return s->segments == 1 ? 0 : severalLoads(s); }
static double buildLoad(const hpset *s) { return set_loads[severalLoads(s)].build; }

static unsigned sizeClassOf(const segment *g) {
    for (unsigned i = 0; i < SEG_SIZES; i++)
        if (seg_homes[i] == g->homes) return i;
    return SEG_SIZES;
}

/* --- Placing entries --- */


/* Appends entry e to bucket b of segment g, which holds n entries and has
 * room for it. */
static void putEntry(hpset *s, segment *g, unsigned char *b, unsigned n, const unsigned char *e, size_t es) {
    memcpy(b + 1 + (b[0] & META_USED), e, es);
    b[0] += es;
    g->count++;
    g->used += es;
    if (n + 1 > s->maxPer) s->maxPer = n + 1;
}

/* Puts entry e (tag already in e[0]) at its home or after; 0 when the run
 * would go past the last bucket. */
static int place(hpset *s, segment *g, const unsigned char *e, size_t es) {
    unsigned total = segBuckets(g);
    for (unsigned j = homeOf(e[0], g->homes); j < total; j++) {
        unsigned char *b = bucketAt(g, j);
        if ((b[0] & META_USED) + es <= BUCKET_ROOM) {
            unsigned n = bucketEntries(b);
            if (n < MAX_PER_BUCKET) {
                putEntry(s, g, b, n, e, es);
                return 1;
            }
        }
        b[0] |= META_OVERFLOWED;
    }
    return 0;
}

/* An entry to move: where it is, its time (0: none), and its tag and more
 * bits for where it goes. */
typedef struct moving {
    const unsigned char *e;
    uint64_t t;
    uint8_t tag, more;
} moving;

static moving *gather(const segment *g, moving *v) {
    unsigned total = segBuckets(g);
    for (unsigned j = 0; j < total; j++) {
        const unsigned char *b = bucketAt(g, j);
        unsigned end = bucketEnd(b);
        for (unsigned p = 1; p < end; p += entrySize(b + p)) {
            v->e = b + p;
            v->t = isTimed(b + p) ? entryTime(g, b + p) : 0;
            v->tag = b[p];
            v->more = (uint8_t)moreCode(b + p);
            v++;
        }
    }
    return v;
}

/* A segment of the given depth holding v[0..n) with their tags and more
 * bits (moreBits of them right), in size class `cls` or the first larger
 * one they fit in; NULL when none does. Its base is its earliest time, and
 * times are written again from it. */
static segment *build(hpset *s, const moving *v, size_t n, unsigned depth, unsigned moreBits, unsigned cls) {
    uint64_t earliest = NO_TIME;
    for (size_t i = 0; i < n; i++)
        if (v[i].t) earliest = earlierOf(earliest, v[i].t);
    for (; cls < SEG_SIZES; cls++) {
        segment *g = segNew(s, seg_homes[cls], depth);
        unsigned char entries[SEG_MAX_BUCKETS] = {0};
        unsigned homes = g->homes, total = segBuckets(g), maxPer = s->maxPer;
        size_t i;
        g->moreBits = moreBits;
        g->base = earliest == NO_TIME ? 0 : earliest;
        for (i = 0; i < n; i++) {
            const unsigned char *e = v[i].e;
            size_t ps = ENTRY_HEAD + payloadSize(e), es = ps + (v[i].t ? timeSizeIn(g, v[i].t) : 0);
            unsigned j = homeOf(v[i].tag, homes);
            unsigned char *b = NULL;
            for (; j < total; j++) {
                b = bucketAt(g, j);
                if ((b[0] & META_USED) + es <= BUCKET_ROOM && entries[j] < MAX_PER_BUCKET) break;
                b[0] |= META_OVERFLOWED;
            }
            if (j == total) break;
            unsigned char *to = b + 1 + (b[0] & META_USED);
            memcpy(to, e, ps);
            to[0] = v[i].tag;
            to[1] = (unsigned char)((e[1] & (LEN_MASK | TIMED)) | (v[i].more << MORE_SHIFT));
            if (v[i].t) putTime(to + ps, g, v[i].t);
            b[0] += es;
            if (++entries[j] > maxPer) maxPer = entries[j];
            g->used += es;
        }
        if (i == n) {
            g->count = n;
            g->earliest = earliest;
            s->maxPer = maxPer;
            return g;
        }
        segFree(s, g);
    }
    return NULL;
}

/* Sets the bounds of the slots of segment g, which starts at slot
 * `first`, to its earliest. */
static void fillBounds(hpset *s, size_t first, const segment *g) {
    uint64_t *bound = boundsOf(s);
    if (!bound) return;
    size_t n = (size_t)1 << (s->depth - g->depth);
    for (size_t i = 0; i < n; i++) bound[first + i] = g->earliest;
}

static void fillSlots(hpset *s, segment *g, uint64_t prefix) {
    size_t first = prefix << (s->depth - g->depth), n = (size_t)1 << (s->depth - g->depth);
    uint64_t v = slotFor(g);
    for (size_t i = 0; i < n; i++) s->dir[first + i] = v;
    fillBounds(s, first, g);
}

/* The directory at depth+1 (step 1) or depth-1 (step -1): slot i of the
 * new one is slot i/2 of the old, or slot 2i; bounds likewise. */
static void resizeDir(hpset *s, int step) {
    unsigned depth = s->depth + step;
    size_t n = (size_t)1 << depth;
    uint64_t *dir = countedAlloc(&s->bytes, dirBytes(s, depth)), *bound = boundsOf(s);
    for (size_t i = 0; i < n; i++) {
        size_t from = step > 0 ? i >> 1 : 2 * i;
        dir[i] = s->dir[from];
        if (bound) dir[n + i] = bound[from];
    }
    countedFree(&s->bytes, s->dir);
    s->dir = dir;
    s->depth = depth;
}

static void doubleDir(hpset *s) {
    assert(s->depth < MAX_DEPTH);
    resizeDir(s, 1);
    s->atDepth = 0;
}

/* Gives the directory its bounds, at a set's first time. */
static void addBounds(hpset *s) {
    size_t n = (size_t)1 << s->depth;
    uint64_t *dir = countedAlloc(&s->bytes, 2 * n * sizeof(*dir));
    memcpy(dir, s->dir, n * sizeof(*dir));
    for (size_t i = 0; i < n; i++) dir[n + i] = segAt(s, i)->earliest;
    countedFree(&s->bytes, s->dir);
    s->dir = dir;
    s->bounded = 1;
}

static void halveDirWhileShallow(hpset *s) {
    while (s->depth && !s->atDepth && !pages_shared) {
        resizeDir(s, -1);
        size_t n = (size_t)1 << s->depth;
        for (size_t i = 0; i < n; i += (size_t)1 << (s->depth - slotDepth(s->dir[i])))
            if (slotDepth(s->dir[i]) == s->depth) s->atDepth++;
    }
}

static void noteDepth(hpset *s, const segment *g, int delta) {
    if (g->depth == s->depth) s->atDepth += delta;
}

/* Installs v[0..n), tagged for depth d with moreBits right, as the
 * segments of prefix `prefix`: one when they fit, else split by hash bit d,
 * recursively. A split takes bit d from the tags' top and shifts the first
 * more bit in; with none left, it hashes the members again. */
static void install(hpset *s, moving *v, size_t n, unsigned d, unsigned moreBits, uint64_t prefix, int mustSplit) {
    if (!mustSplit) {
        uint64_t used = 0;
        for (size_t i = 0; i < n; i++) used += entrySize(v[i].e);
        segment *g = build(s, v, n, d, moreBits, sizeFor(n, used, buildLoad(s), 0));
        if (g) {
            noteDepth(s, g, 1);
            fillSlots(s, g, prefix);
            return;
        }
    }
    if (d + 1 > s->depth) doubleDir(s);
    size_t zeros = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned bit = v[i].tag >> (TAG_BITS - 1);
        if (moreBits) {
            v[i].tag = (uint8_t)((v[i].tag << 1) | (v[i].more >> (MORE_BITS - 1)));
            v[i].more = (uint8_t)((v[i].more << 1) & ((1u << MORE_BITS) - 1));
        } else {
            size_t len;
            const unsigned char *m = entryMember(v[i].e, &len);
            uint64_t h = hpsHash(m, len);
            v[i].tag = (uint8_t)tagOf(h, d + 1);
            v[i].more = (uint8_t)moreOf(h, d + 1);
        }
        if (!bit) {
            moving t = v[i];
            v[i] = v[zeros];
            v[zeros++] = t;
        }
    }
    unsigned next = moreBits ? moreBits - 1 : MORE_BITS;
    install(s, v, zeros, d + 1, next, prefix << 1, 0);
    install(s, v + zeros, n - zeros, d + 1, next, (prefix << 1) | 1, 0);
}

static uint64_t prefixOf(const hpset *s, size_t slot, const segment *g) {
    return g->depth ? (uint64_t)slot >> (s->depth - g->depth) : 0;
}

/* Puts ng, built from g at g's depth, where g was, and frees g. */
static void replaceSegment(hpset *s, size_t slot, segment *g, segment *ng) {
    noteDepth(s, g, -1);
    noteDepth(s, ng, 1);
    fillSlots(s, ng, prefixOf(s, slot, g));
    segFree(s, g);
}

/* Whether segment g takes one more entry of es bytes before it grows
 * (MAX_LOAD). Its limit is worked out again only when the entries' average
 * size moves past a whole byte, which spares most inserts two divisions. */
static int takesOneMore(const hpset *s, segment *g, size_t es) {
    uint64_t n = (uint64_t)g->count + 1, used = g->used + es;
    uint8_t loads = loadsOf(s);
    if (!g->avg || used > (uint64_t)g->avg * n || used <= (uint64_t)(g->avg - 1) * n || g->loads != loads) {
        g->avg = (uint8_t)((used + n - 1) / n);
        g->loads = loads;
        g->limit = (uint32_t)(set_loads[loads].max * g->homes * perBucketOfAvg(g->avg));
    }
    return n <= g->limit;
}

/* Entries over what the segment's buckets hold of entries its size. */
static double loadOf(const segment *g) {
    return (double)g->count / ((double)g->homes * perBucket(g->count, g->used));
}

/* Works out v[0..n)'s more bits again from their members' hashes, at
 * depth d. */
static void rehashMore(moving *v, size_t n, unsigned d) {
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const unsigned char *m = entryMember(v[i].e, &len);
        v[i].more = (uint8_t)moreOf(hpsHash(m, len), d);
    }
}

/* Makes room for one more entry of es bytes in the segment at slot. */
static void grow(hpset *s, size_t slot, size_t es) {
    segment *g = segAt(s, slot);
    uint64_t prefix = prefixOf(s, slot, g);
    moving stackv[256], *v = g->count + 1 <= 256 ? stackv : zmalloc(sizeof(*v) * (g->count + 1));
    unsigned cls = sizeClassOf(g);
    unsigned next = sizeFor(g->count + 1, g->used + es, set_loads[loadsOf(s)].build, 0);
    unsigned step = g->homes >= WIDE_HOMES && s->count >= WIDE_MEMBERS ? 2 : 1;
    if (next < cls + step) next = cls + step;
    if (next > SEG_SIZES) next = SEG_SIZES;
    segment *ng = NULL;
    size_t n = gather(g, v) - v;
    unsigned moreBits = g->moreBits;
    if (!moreBits && next < SEG_SIZES) {
        /* Its next split would hash every member; it holds fewer now. */
        rehashMore(v, n, g->depth);
        moreBits = MORE_BITS;
    }
    if (next < SEG_SIZES) ng = build(s, v, n, g->depth, moreBits, next);
    if (ng) {
        replaceSegment(s, slot, g, ng);
    } else {
        noteDepth(s, g, -1);
        install(s, v, n, g->depth, moreBits, prefix, 1);
        segFree(s, g);
    }
    if (v != stackv) zfree(v);
}

/* Merges the segment at slot with its buddy when both are at the same
 * depth and fit together in half the largest size. Returns 1 when they
 * did. */
static int mergeBuddies(hpset *s, size_t slot) {
    segment *g = segAt(s, slot);
    if (!g->depth) return 0;
    uint64_t prefix = prefixOf(s, slot, g);
    segment *buddy = segAt(s, (prefix ^ 1) << (s->depth - g->depth));
    if (buddy->depth != g->depth) return 0;
    uint64_t count = g->count + buddy->count, used = g->used + buddy->used;
    unsigned cls = sizeFor(count, used, buildLoad(s), 0);
    if (cls >= SEG_SIZES || seg_homes[cls] * 2 > seg_homes[SEG_SIZES - 1]) return 0;
    segment *lo = prefix & 1 ? buddy : g, *hi = prefix & 1 ? g : buddy;
    /* One level up: the prefix's last bit goes in front of the tag, the
     * tag's last bit in front of the more bits. */
    moving *v = zmalloc(sizeof(*v) * (count ? count : 1));
    moving *mid = gather(lo, v), *end = gather(hi, mid);
    for (moving *p = v; p < end; p++) {
        unsigned bit = p >= mid;
        p->more = (uint8_t)(((p->tag & 1) << (MORE_BITS - 1)) | (p->more >> 1));
        p->tag = (uint8_t)((bit << (TAG_BITS - 1)) | (p->tag >> 1));
    }
    unsigned moreBits = (lo->moreBits < hi->moreBits ? lo->moreBits : hi->moreBits) + 1;
    if (moreBits > MORE_BITS) moreBits = MORE_BITS;
    segment *ng = build(s, v, count, g->depth - 1, moreBits, cls);
    zfree(v);
    if (!ng) return 0;
    noteDepth(s, lo, -1);
    noteDepth(s, hi, -1);
    fillSlots(s, ng, prefix >> 1);
    noteDepth(s, ng, 1);
    segFree(s, lo);
    segFree(s, hi);
    return 1;
}

/* After a delete: a segment below MIN_LOAD merges with its buddy when the
 * two fit in one, and the result with its own buddy, and so on (a set
 * emptied gives back every segment but one); else it is rebuilt smaller. */
static void shrink(hpset *s, size_t slot) {
    if (pages_shared) return;
    int merged = 0;
    while (loadOf(segAt(s, slot)) < MIN_LOAD && mergeBuddies(s, slot)) merged = 1;
    if (merged) {
        halveDirWhileShallow(s);
        return;
    }
    segment *g = segAt(s, slot);
    unsigned cls = sizeClassOf(g);
    if (loadOf(g) >= MIN_LOAD || cls == 0) return;
    unsigned to = sizeFor(g->count, g->used, buildLoad(s), 0);
    if (to >= cls) return;
    moving stackv[256], *v = g->count <= 256 ? stackv : zmalloc(sizeof(*v) * g->count);
    gather(g, v);
    segment *ng = build(s, v, g->count, g->depth, g->moreBits, to);
    if (v != stackv) zfree(v);
    if (ng) replaceSegment(s, slot, g, ng);
}

/* --- The set --- */

hpset *hpsCreate(uint64_t expected) {
    hpset *s = zcalloc(sizeof(*s));
    s->tag = HPSET_TAG;
    s->earliest = NO_TIME;
    s->bytes = zmalloc_size(s);
    /* As many segments as the members expected need, each starting small:
     * growing in place moves entries but hashes none, where splits would
     * hash every member again at each doubling. */
    unsigned depth = 0;
    while (depth < 24 && (expected >> depth) > PRESIZE_ENTRIES) depth++;
    s->dir = countedAlloc(&s->bytes, sizeof(*s->dir) << depth);
    s->depth = depth;
    for (size_t i = 0; i < ((size_t)1 << depth); i++) s->dir[i] = slotFor(segNew(s, seg_homes[0], depth));
    s->atDepth = (uint64_t)1 << depth;
    return s;
}

void hpsFree(hpset *s) {
    if (!s) return;
    size_t n = (size_t)1 << s->depth;
    for (size_t i = 0; i < n;) {
        segment *g = segAt(s, i);
        unsigned total = segBuckets(g);
        for (unsigned j = 0; j < total; j++) {
            unsigned char *b = bucketAt(g, j);
            unsigned end = bucketEnd(b);
            for (unsigned p = 1; p < end; p += entrySize(b + p))
                if (lenCode(b + p) == OUT_OF_LINE) zfree((void *)oolBlock(b + p));
        }
        i += (size_t)1 << (s->depth - g->depth);
        zfree(g);
    }
    zfree(s->dir);
    zfree(s);
}

uint8_t *hpsMark(hpset *s) {
    return &s->mark;
}

int hpsIsSet(const void *p) {
    uint64_t tag;
    memcpy(&tag, p, sizeof(tag));
    return tag == HPSET_TAG;
}

uint64_t hpsLength(const hpset *s) { return s->count; }
size_t hpsAllocSize(const hpset *s) { return s->bytes; }

/* The entry for m, and its bucket; NULL when m is not a member. An insert,
 * which would walk the same buckets again to place m, passes room: then,
 * when m is no member, *room is the first bucket walked that has room for
 * an entry of es bytes (NULL when none) and *entries its entries. The
 * buckets before it are OVERFLOWED, as the walk went on past them. Inlined,
 * a lookup's walk drops what only an insert's needs. */
static inline unsigned char *probe(const hpset *s, uint64_t h, const unsigned char *m, size_t len,
                                   unsigned char **bucket, size_t es, unsigned char **room, unsigned *entries) {
    uint64_t slot = s->dir[slotOf(s, h)];
    const segment *g = slotSegment(slot);
    unsigned homes = slotHomes(slot), tag = tagOf(h, slotDepth(slot)), total = homes + EXTRA;
    if (room) *room = NULL;
    for (unsigned j = homeOf(tag, homes); j < total; j++) {
        unsigned char *b = bucketAt(g, j);
        unsigned end = bucketEnd(b), n = 0;
        for (unsigned p = 1; p < end; p += entrySize(b + p), n++) {
            if (b[p] == tag && entryIs(b + p, m, len)) {
                if (bucket) *bucket = b;
                return b + p;
            }
        }
        if (room && !*room && n < MAX_PER_BUCKET && end - 1 + es <= BUCKET_ROOM) {
            *room = b;
            *entries = n;
        }
        if (!(b[0] & META_OVERFLOWED)) break;
    }
    return NULL;
}

static unsigned char *findEntry(const hpset *s, uint64_t h, const unsigned char *m, size_t len, unsigned char **bucket) {
    return probe(s, h, m, len, bucket, 0, NULL, NULL);
}

void hpsPrefetch(const hpset *s, uint64_t h) {
    uint64_t slot = s->dir[slotOf(s, h)];
    const segment *g = slotSegment(slot);
    const unsigned char *b = bucketAt(g, homeOf(tagOf(h, slotDepth(slot)), slotHomes(slot)));
    __builtin_prefetch(b);
    __builtin_prefetch(b + LINE);
    /* The next bucket's first line: its meta byte and first entries, which
     * a walk past an overflowed home reads. */
    __builtin_prefetch(b + BUCKET);
    __builtin_prefetch(g);
}

void hpsPrefetchSlot(const hpset *s, uint64_t h) {
    __builtin_prefetch(&s->dir[slotOf(s, h)]);
}

int hpsContainsHashed(const hpset *s, uint64_t h, const unsigned char *m, size_t len) {
    return findEntry(s, h, m, len, NULL) != NULL;
}

int hpsContains(const hpset *s, const unsigned char *m, size_t len) {
    return hpsContainsHashed(s, hpsHash(m, len), m, len);
}

/* Notes time t (0: none) of an entry going into segment g, at slot. */
static void noteTime(hpset *s, size_t slot, segment *g, uint64_t t) {
    if (!t) return;
    s->timed++;
    s->earliest = earlierOf(s->earliest, t);
    if (t >= g->earliest) return;
    g->earliest = t;
    if (s->bounded)
        fillBounds(s, firstSlot(s, slot, g), g);
    else
        addBounds(s);
}

/* Puts the entry whose tag, len byte and payload are e's first ps bytes
 * (its buffer has room for a time field after them), with time t (0:
 * none), for hash h: into *room when an insert's probe found one for the
 * size it takes, else from its home on, growing until it fits. */
static void placeNew(hpset *s, uint64_t h, unsigned char *e, size_t ps, unsigned char *room, unsigned entries,
                     uint64_t t) {
    for (;;) {
        size_t slot = slotOf(s, h);
        segment *g = segAt(s, slot);
        size_t es = ps + (t ? timeSizeIn(g, t) : 0);
        if (takesOneMore(s, g, es)) {
            e[0] = tagOf(h, g->depth);
            e[1] = (unsigned char)((e[1] & LEN_MASK) | (moreOf(h, g->depth) << MORE_SHIFT) | (t ? TIMED : 0));
            if (t) putTime(e + ps, g, t);
            if (room || place(s, g, e, es)) {
                if (room) putEntry(s, g, room, entries, e, es);
                noteTime(s, slot, g, t);
                break;
            }
        }
        room = NULL;
        grow(s, slot, es);
    }
    s->count++;
}

#define ENTRY_BUF ((OOL_ENTRY > ENTRY_HEAD + INLINE_MAX ? OOL_ENTRY : ENTRY_HEAD + INLINE_MAX) + TIME_LONG)

static void setTimeAt(hpset *s, uint64_t h, unsigned char *b, unsigned char *e, uint64_t t);

/* Adds m with time t (0: none); a member already there keeps its time,
 * or takes t when retime is set. Returns 1 if added. */
static int insertTimed(hpset *s, uint64_t h, const unsigned char *m, size_t len, uint64_t t, int retime) {
    unsigned char e[ENTRY_BUF];
    size_t ps = storedSize(len), es = ps + (t ? timeSizeIn(segAt(s, slotOf(s, h)), t) : 0);
    unsigned char *room, *b, *found;
    unsigned entries = 0;
    assert(t <= HPS_TIME_MAX);
    if ((found = probe(s, h, m, len, &b, es, &room, &entries))) {
        if (retime) setTimeAt(s, h, b, found, t);
        return 0;
    }
    if (len <= INLINE_MAX) {
        e[1] = (unsigned char)len;
        memcpy(e + ENTRY_HEAD, m, len);
    } else {
        assert(len <= UINT32_MAX);
        unsigned char *p = countedAlloc(&s->bytes, sizeof(uint32_t) + len);
        uint32_t l = (uint32_t)len;
        memcpy(p, &l, sizeof(l));
        memcpy(p + sizeof(l), m, len);
        e[1] = OUT_OF_LINE;
        memcpy(e + ENTRY_HEAD, &p, sizeof(p));
    }
    placeNew(s, h, e, ps, room, entries, t);
    return 1;
}

int hpsInsertHashed(hpset *s, uint64_t h, const unsigned char *m, size_t len) {
    return insertTimed(s, h, m, len, 0, 0);
}

int hpsInsertTimed(hpset *s, const unsigned char *m, size_t len, uint64_t t) {
    return insertTimed(s, hpsHash(m, len), m, len, t, 0);
}

int hpsAddTimedHashed(hpset *s, uint64_t h, const unsigned char *m, size_t len, uint64_t t) {
    return insertTimed(s, h, m, len, t, 1);
}

int hpsInsert(hpset *s, const unsigned char *m, size_t len) { return hpsInsertHashed(s, hpsHash(m, len), m, len); }

/* Takes entry e's bytes out of bucket b of segment g; the member's block,
 * if out of line, stays. */
static void cutEntry(hpset *s, segment *g, unsigned char *b, unsigned char *e) {
    size_t es = entrySize(e);
    unsigned end = bucketEnd(b);
    if (isTimed(e)) s->timed--;
    memmove(e, e + es, (b + end) - (e + es));
    b[0] -= es;
    g->count--;
    g->used -= es;
    s->count--;
}

int hpsDeleteHashed(hpset *s, uint64_t h, const unsigned char *m, size_t len) {
    unsigned char *b;
    unsigned char *e = findEntry(s, h, m, len, &b);
    if (!e) return 0;
    size_t slot = slotOf(s, h);
    void *ool = lenCode(e) == OUT_OF_LINE ? (void *)oolBlock(e) : NULL;
    cutEntry(s, segAt(s, slot), b, e);
    countedFree(&s->bytes, ool);
    shrink(s, slot);
    return 1;
}

int hpsDelete(hpset *s, const unsigned char *m, size_t len) { return hpsDeleteHashed(s, hpsHash(m, len), m, len); }

/* --- Times --- */

int hpsTimeHashed(const hpset *s, uint64_t h, const unsigned char *m, size_t len, uint64_t *t) {
    const unsigned char *e = findEntry(s, h, m, len, NULL);
    if (!e) return 0;
    *t = isTimed(e) ? entryTime(segAt(s, slotOf(s, h)), e) : 0;
    return 1;
}

/* Sets entry e's time (in bucket b of the segment of hash h) to t (0:
 * none). The time field is written again in place, the bucket's later
 * entries moving by the change in its size, when the bucket has room; else
 * the entry moves, as an insert places it. */
static void setTimeAt(hpset *s, uint64_t h, unsigned char *b, unsigned char *e, uint64_t t) {
    segment *g = segAt(s, slotOf(s, h));
    size_t ps = ENTRY_HEAD + payloadSize(e), old = isTimed(e) ? timeFieldSize(e + ps) : 0;
    size_t now = t ? timeSizeIn(g, t) : 0;
    unsigned char *f = e + ps, *end = b + bucketEnd(b);
    if (now > old && (b[0] & META_USED) + now - old > BUCKET_ROOM) {
        unsigned char ne[ENTRY_BUF];
        memcpy(ne, e, ps);
        cutEntry(s, g, b, e);
        placeNew(s, h, ne, ps, NULL, 0, t);
        return;
    }
    memmove(f + now, f + old, end - (f + old));
    b[0] = (unsigned char)(b[0] + now - old);
    g->used = (uint32_t)(g->used + now - old);
    if (old) s->timed--;
    e[1] &= ~TIMED;
    if (t) {
        e[1] |= TIMED;
        putTime(f, g, t);
        noteTime(s, slotOf(s, h), g, t);
    }
}

int hpsSetTimeHashed(hpset *s, uint64_t h, const unsigned char *m, size_t len, uint64_t t, uint64_t *old) {
    unsigned char *b;
    unsigned char *e = findEntry(s, h, m, len, &b);
    assert(t <= HPS_TIME_MAX);
    if (!e) return 0;
    if (old) *old = isTimed(e) ? entryTime(segAt(s, slotOf(s, h)), e) : 0;
    setTimeAt(s, h, b, e, t);
    return 1;
}

uint64_t hpsEarliest(const hpset *s) { return s->earliest == NO_TIME ? 0 : s->earliest; }
uint64_t hpsTimedCount(const hpset *s) { return s->timed; }

/* Takes segment g's entries due at `now` out, up to max, handing each to
 * fn before it goes. When it has read them all (*whole), g's earliest
 * becomes the least time left. Returns how many it took. */
static size_t takeDueIn(hpset *s, segment *g, uint64_t now, size_t max, hpsDueFn fn, void *ctx, int *whole) {
    uint64_t next = NO_TIME;
    size_t n = 0;
    unsigned total = segBuckets(g);
    *whole = 0;
    for (unsigned j = 0; j < total; j++) {
        unsigned char *b = bucketAt(g, j);
        for (unsigned p = 1; p < bucketEnd(b);) {
            unsigned char *e = b + p;
            uint64_t t = isTimed(e) ? entryTime(g, e) : 0;
            if (t <= now && t) {
                if (n == max) return n;
                size_t len;
                const unsigned char *m = entryMember(e, &len);
                void *ool = lenCode(e) == OUT_OF_LINE ? (void *)oolBlock(e) : NULL;
                fn(ctx, m, len, t);
                cutEntry(s, g, b, e); /* the next entry moves to p */
                countedFree(&s->bytes, ool);
                n++;
                continue;
            }
            if (t) next = earlierOf(next, t);
            p += entrySize(e);
        }
    }
    g->earliest = next;
    *whole = 1;
    return n;
}

/* Segments whose bound has come are read whole, and their due entries
 * taken out (each handed to fn first), the segment shrinking after as a
 * delete's does; its earliest becomes the least time left. The walk reads
 * the directory's bounds, and only the segments due. A shrink that merged
 * in a buddy not yet read has the merged segment read. A walk cut short by
 * max leaves the set's earliest as it was; a whole one sets it to the
 * segments' least. */
size_t hpsDue(hpset *s, uint64_t now, size_t max, hpsDueFn fn, void *ctx) {
    if (!s->timed || s->earliest > now) return 0;
    size_t n = 0;
    uint64_t earliest = NO_TIME;
    for (size_t i = 0; i < ((size_t)1 << s->depth);) {
        uint64_t bound = boundsOf(s)[i];
        if (bound > now) {
            earliest = earlierOf(earliest, bound);
            i++;
            continue;
        }
        segment *g = segAt(s, i); /* i is its first slot: the ones before it had passed */
        int whole;
        size_t took = takeDueIn(s, g, now, max - n, fn, ctx, &whole);
        n += took;
        if (took) {
            uint64_t at = s->depth ? (uint64_t)i << (64 - s->depth) : 0;
            shrink(s, i);
            i = s->depth ? at >> (64 - s->depth) : 0;
            g = segAt(s, i);
            i = firstSlot(s, i, g);
        }
        fillBounds(s, i, g);
        if (!whole) return n;
    }
    s->earliest = earliest;
    return n;
}

/* --- Reading the whole set --- */

/* The member of rank r in the order of a walk (segments in directory
 * order, their buckets, their entries). */
static const unsigned char *atRank(const hpset *s, uint64_t r, size_t *len) {
    size_t slots = (size_t)1 << s->depth;
    for (size_t i = 0; i < slots;) {
        const segment *g = segAt(s, i);
        if (r < g->count) {
            for (unsigned j = 0;; j++) {
                const unsigned char *b = bucketAt(g, j);
                unsigned end = bucketEnd(b);
                for (unsigned p = 1; p < end; p += entrySize(b + p))
                    if (!r--) return entryMember(b + p, len);
            }
        }
        r -= g->count;
        i += (size_t)1 << (s->depth - g->depth);
    }
    assert(0);
    return NULL;
}

#define RANDOM_TRIES 1024

int hpsRandom(const hpset *s, uint64_t (*rnd)(void), const unsigned char **m, size_t *len) {
    if (!s->count) return 0;
    unsigned maxPer = s->maxPer ? s->maxPer : 1;
    for (int tries = 0; tries < RANDOM_TRIES; tries++) {
        uint64_t slot = s->dir[slotOf(s, rnd())], r2 = rnd(), r3 = rnd();
        unsigned coin = s->depth - slotDepth(slot);
        if (coin && (r2 & ((UINT64_C(1) << coin) - 1))) continue;
        unsigned j = (unsigned)(((r3 & 0xffffffff) * (seg_homes[SEG_SIZES - 1] + EXTRA)) >> 32);
        if (j >= slotHomes(slot) + EXTRA) continue;
        unsigned k = (unsigned)(((r3 >> 32) * maxPer) >> 32);
        const unsigned char *b = bucketAt(slotSegment(slot), j);
        unsigned end = bucketEnd(b), p = 1;
        for (; p < end && k; p += entrySize(b + p)) k--;
        if (p >= end) continue;
        *m = entryMember(b + p, len);
        return 1;
    }
    /* A set left sparse (emptied while a fork child kept its segments from
     * shrinking): a rank, and a walk to it. */
    *m = atRank(s, rnd() % s->count, len);
    return 1;
}

void hpsIterInit(const hpset *s, hpsIter *it) {
    it->s = s;
    it->slot = 0;
    it->bucket = 0;
    it->off = 1;
}

int hpsIterNext(hpsIter *it, const unsigned char **m, size_t *len) {
    uint64_t t;
    return hpsIterNextTimed(it, m, len, &t);
}

int hpsIterNextTimed(hpsIter *it, const unsigned char **m, size_t *len, uint64_t *t) {
    const hpset *s = it->s;
    size_t slots = (size_t)1 << s->depth;
    while (it->slot < slots) {
        const segment *g = segAt(s, it->slot);
        while (it->bucket < segBuckets(g)) {
            const unsigned char *b = bucketAt(g, it->bucket);
            if (it->off < bucketEnd(b)) {
                *m = entryMember(b + it->off, len);
                *t = isTimed(b + it->off) ? entryTime(g, b + it->off) : 0;
                it->off += entrySize(b + it->off);
                return 1;
            }
            it->bucket++;
            it->off = 1;
        }
        it->slot += (size_t)1 << (s->depth - g->depth);
        it->bucket = 0;
    }
    return 0;
}

/* Emits the entries of bucket b whose tag is at least tc and whose home is
 * at most last. */
static size_t emitBucket(const unsigned char *b, unsigned tc, unsigned last, unsigned homes, hpsScanFn fn, void *ctx) {
    size_t n = 0;
    unsigned end = bucketEnd(b);
    for (unsigned p = 1; p < end; p += entrySize(b + p)) {
        if (b[p] < tc || homeOf(b[p], homes) > last) continue;
        size_t len;
        const unsigned char *m = entryMember(b + p, &len);
        fn(ctx, m, len);
        n++;
    }
    return n;
}

uint64_t hpsScan(const hpset *s, uint64_t cursor, size_t count, hpsScanFn fn, void *ctx) {
    const uint64_t space = UINT64_C(1) << HASH_POS_BITS;
    uint64_t pos = cursor;
    size_t emitted = 0;
    if (pos >= space) return 0;
    for (;;) {
        size_t slot = s->depth ? pos >> (HASH_POS_BITS - s->depth) : 0;
        const segment *g = segAt(s, slot);
        unsigned d = g->depth, shift = HASH_POS_BITS - d - TAG_BITS;
        uint64_t start = d ? (pos >> (HASH_POS_BITS - d)) << (HASH_POS_BITS - d) : 0;
        unsigned tc = (unsigned)((pos - start) >> shift), homes = g->homes;
        for (unsigned j = homeOf(tc, homes); j < homes; j++) {
            emitted += emitBucket(bucketAt(g, j), tc, j, homes, fn, ctx);
            if (emitted < count || j + 1 == homes) continue;
            /* Stop at this bucket's end: the members of homes up to j that
             * ran past it, then where the next home's tags begin. */
            for (unsigned k = j + 1; k < segBuckets(g) && (bucketAt(g, k - 1)[0] & META_OVERFLOWED); k++)
                emitBucket(bucketAt(g, k), tc, j, homes, fn, ctx);
            unsigned tend = (unsigned)(((j + 1) * (1u << TAG_BITS) + homes - 1) / homes);
            return start + ((uint64_t)tend << shift);
        }
        for (unsigned k = homes; k < segBuckets(g); k++) emitted += emitBucket(bucketAt(g, k), tc, homes, homes, fn, ctx);
        pos = start + (UINT64_C(1) << (HASH_POS_BITS - d));
        if (pos >= space) return 0;
        if (emitted >= count) return pos;
    }
}

/* --- Defrag, dismiss, figures, checks --- */

hpset *hpsDefragShell(hpset *s, void *(*fn)(void *)) {
    hpset *ns = fn(s);
    if (ns) s = ns;
    uint64_t *dir = fn(s->dir);
    if (dir) s->dir = dir;
    return ns;
}

uint64_t hpsDefragSegments(hpset *s, uint64_t cursor, size_t count, void *(*fn)(void *)) {
    const uint64_t space = UINT64_C(1) << HASH_POS_BITS;
    uint64_t pos = cursor;
    for (size_t done = 0; done < count && pos < space; done++) {
        size_t slot = s->depth ? pos >> (HASH_POS_BITS - s->depth) : 0;
        segment *g = segAt(s, slot);
        uint64_t prefix = prefixOf(s, slot, g);
        unsigned total = segBuckets(g);
        for (unsigned j = 0; j < total; j++) {
            unsigned char *b = bucketAt(g, j);
            unsigned end = bucketEnd(b);
            for (unsigned p = 1; p < end; p += entrySize(b + p)) {
                if (lenCode(b + p) != OUT_OF_LINE) continue;
                void *moved = fn((void *)oolBlock(b + p));
                if (moved) memcpy(b + p + ENTRY_HEAD, &moved, sizeof(moved));
            }
        }
        segment *ng = fn(g);
        if (ng) fillSlots(s, ng, prefix);
        pos = (prefix + 1) << (HASH_POS_BITS - (ng ? ng : g)->depth);
        if (!(ng ? ng : g)->depth) pos = space;
    }
    return pos >= space ? 0 : pos;
}

void hpsDismiss(hpset *s, size_t min, void (*fn)(void *ptr, size_t size)) {
    size_t n = (size_t)1 << s->depth, size;
    for (size_t i = 0; i < n;) {
        segment *g = segAt(s, i);
        if ((size = zmalloc_size(g)) >= min) fn(g, size);
        i += (size_t)1 << (s->depth - g->depth);
    }
    if ((size = zmalloc_size(s->dir)) >= min) fn(s->dir, size);
}

void hpsGetStats(const hpset *s, hpsStats *st) {
    memset(st, 0, sizeof(*st));
    st->members = s->count;
    st->bytes = s->bytes;
    st->depth = s->depth;
    st->maxPerBucket = s->maxPer;
    st->dirBytes = zmalloc_size(s->dir);
    size_t n = (size_t)1 << s->depth;
    for (size_t i = 0; i < n;) {
        const segment *g = segAt(s, i);
        st->segments++;
        st->segmentBytes += zmalloc_size((void *)g);
        st->entryBytes += g->used;
        st->buckets += segBuckets(g);
        for (unsigned j = 0; j < segBuckets(g); j++) {
            const unsigned char *b = bucketAt(g, j);
            if (b[0] & META_OVERFLOWED) st->overflowed++;
            for (unsigned p = 1; p < bucketEnd(b); p += entrySize(b + p))
                if (lenCode(b + p) == OUT_OF_LINE) st->outOfLineBytes += zmalloc_size((void *)oolBlock(b + p));
        }
        i += (size_t)1 << (s->depth - g->depth);
    }
}

const char *hpsCheck(const hpset *s) {
    static char why[160];
#define FAIL(...)                                  \
    do {                                           \
        snprintf(why, sizeof(why), __VA_ARGS__);   \
        return why;                                \
    } while (0)
    if (s->tag != HPSET_TAG) FAIL("bad tag");
    size_t n = (size_t)1 << s->depth, bytes = zmalloc_size((void *)s) + zmalloc_size(s->dir);
    uint64_t count = 0, segments = 0, atDepth = 0, timed = 0;
    for (size_t i = 0; i < n;) {
        const segment *g = segAt(s, i);
        if (g->depth > s->depth) FAIL("segment deeper than the directory");
        size_t run = (size_t)1 << (s->depth - g->depth);
        if (i % run) FAIL("segment at slot %zu not aligned", i);
        for (size_t k = 0; k < run; k++) {
            if (s->dir[i + k] != slotFor(g)) FAIL("slot %zu not its segment's", i + k);
            if (s->bounded && boundsOf(s)[i + k] != g->earliest) FAIL("slot %zu's bound not its segment's", i + k);
        }
        if (zmalloc_size((void *)g) != segBytes(g->homes)) FAIL("segment not a size class");
        if (sizeClassOf(g) == SEG_SIZES) FAIL("odd home count %u", g->homes);
        bytes += zmalloc_size((void *)g);
        segments++;
        if (g->depth == s->depth) atDepth++;
        uint64_t prefix = prefixOf(s, i, g), gcount = 0, gused = 0;
        unsigned total = segBuckets(g);
        for (unsigned j = 0; j < total; j++) {
            const unsigned char *b = bucketAt(g, j);
            unsigned end = bucketEnd(b), entries = 0, p;
            for (p = 1; p < end; p += entrySize(b + p)) {
                const unsigned char *e = b + p;
                if (lenCode(e) != OUT_OF_LINE && lenCode(e) > INLINE_MAX) FAIL("inline member too long");
                size_t len;
                const unsigned char *m = entryMember(e, &len);
                if (lenCode(e) == OUT_OF_LINE) {
                    if (len <= INLINE_MAX) FAIL("short member out of line");
                    bytes += zmalloc_size((void *)oolBlock(e));
                }
                uint64_t h = hpsHash(m, len);
                if ((g->depth ? h >> (64 - g->depth) : 0) != prefix) FAIL("member outside its segment's prefix");
                if (tagOf(h, g->depth) != e[0]) FAIL("stale tag");
                unsigned keep = (1u << MORE_BITS) - (1u << (MORE_BITS - g->moreBits));
                if (((moreOf(h, g->depth) ^ moreCode(e)) & keep) != 0) FAIL("stale hash bits after the tag");
                unsigned home = homeOf(e[0], g->homes);
                if (home > j) FAIL("member before its home");
                for (unsigned k = home; k < j; k++)
                    if (!(bucketAt(g, k)[0] & META_OVERFLOWED)) FAIL("run through a bucket not marked");
                if (findEntry(s, h, m, len, NULL) != e) FAIL("member found elsewhere");
                if (isTimed(e)) {
                    uint64_t t = entryTime(g, e);
                    if (timeFieldSize(e + ENTRY_HEAD + payloadSize(e)) == TIME_SHORT && !g->base)
                        FAIL("a short time without a base");
                    if (t > HPS_TIME_MAX) FAIL("time out of range");
                    if (t < g->earliest) FAIL("a time before its segment's earliest");
                    if (t < s->earliest) FAIL("a time before the set's earliest");
                    timed++;
                }
                entries++;
                gused += entrySize(e);
            }
            if (p != end) FAIL("entries overrun their bucket");
            if (entries > MAX_PER_BUCKET || entries > s->maxPer) FAIL("bucket holds %u entries", entries);
            gcount += entries;
        }
        if (gcount != g->count || gused != g->used) FAIL("segment count or used wrong");
        count += gcount;
        i += run;
    }
    if (count != s->count) FAIL("count %llu, members %llu", (unsigned long long)s->count, (unsigned long long)count);
    if (segments != s->segments) FAIL("segments wrong");
    if (timed != s->timed) FAIL("timed %llu, counted %llu", (unsigned long long)s->timed, (unsigned long long)timed);
    if (timed && !s->bounded) FAIL("times without bounds");
    if (atDepth != s->atDepth) FAIL("atDepth %llu, counted %llu", (unsigned long long)s->atDepth, (unsigned long long)atDepth);
    if (bytes != s->bytes) FAIL("bytes %zu, counted %zu", s->bytes, bytes);
    return NULL;
#undef FAIL
}
