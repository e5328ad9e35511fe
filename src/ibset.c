/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * ibset: the members of a big set of integers, sorted and packed.
 *
 * A set whose members are all integers (what intset takes: the whole signed
 * 64-bit range) keeps them in ascending order, in blocks of at most
 * IB_BLOCK_BYTES, behind a two-level index that counts members:
 *
 *   ibset { tag, count, npages, mins[], pages[], pcounts[] }
 *            |
 *            +--> ibPage { nblocks, bases[128], counts[128], blocks[128] }
 *                             |
 *                             +--> ibBlock [bytes|cap|enc|pad][data ...]
 *
 * Values are compared as unsigned after flipping the sign bit (ibKey), so
 * that unsigned order is the integers' order. A block holds the members
 * from its base up to the next block's base, each stored as its offset from
 * the base, in one of two encodings:
 *
 *   array:  offsets, ascending, each 1, 2, 4 or 8 bytes wide (the width
 *           that holds the block's largest offset); binary searched.
 *           [o0][o1]...[on-1]             data bytes: count * width
 *   bitmap: bit i (of 64-bit words, bit i%64 of word i/64) is set when
 *           base + i is a member.          data bytes: words * 8
 *
 * A block takes whichever is smaller (the bitmap at a tie: its lookups take
 * one load), decided when a member is added. So a run of consecutive
 * integers costs a bit a member, 1M random integers below 10^8 (offsets
 * under 65,536 in a block of a couple hundred) two bytes, and integers
 * spread over the whole range eight, as in an intset.
 *
 * Invariants:
 * - Every block holds one member or more; bases ascend strictly across the
 *   whole set; a block's members lie in [its base, the next block's base).
 *   A block's base is at or below its first member (deletes leave it).
 * - A block's data is at most IB_BLOCK_DATA bytes; its allocation is 8
 *   bytes of header and cap bytes of data, cap >= bytes.
 * - A page holds 1 to IB_PAGE_BLOCKS blocks; counts[] are its blocks'
 *   member counts; mins[p] is page p's first base; pcounts[p] the page's
 *   members; count the set's.
 * - bytes is what the set has allocated, for MEMORY USAGE in O(1).
 *
 * Growth is a block at a time. A block that would outgrow IB_BLOCK_DATA
 * splits in two at its middle member, except for a new greatest or least
 * member: the greatest of a full block goes to the next block, whose base
 * drops to take it (members added going down into a gap fill one block),
 * or, in the set's last block, starts a block of its own (an ascending load
 * leaves full blocks); the least starts a block of its own. A base that
 * drops goes down by whole bitmap words where the block before leaves room,
 * so that a block is re-encoded once in 64 members added going down. A
 * page splits in halves, or at the set's end a new page starts. A block
 * that drops under a quarter of IB_BLOCK_DATA merges with a neighbour when
 * the two fit in half of it; sparse neighbouring pages likewise.
 *
 * A random member or a member by rank walks pcounts[], then a page's
 * counts[], then the block (an index, or a select over bitmap words).
 *
 * Public names start with ibs; internal functions are static.
 */

#include "ibset.h"

#include <string.h>

#include "countedalloc.h"
#include "zmalloc.h"
#include "serverassert.h"

/* --- Sizes --- */

/* A block's allocation, header included. 512 is a size class of the
 * allocator: a full block wastes nothing. A block of this size holds 504
 * bytes of data: 252 two-byte offsets (a couple hundred members per lookup,
 * eight probes) or a bitmap of 4,032 integers. */
#ifndef IB_BLOCK_BYTES
#define IB_BLOCK_BYTES 512
#endif
#define IB_BLOCK_HEADER 8
#define IB_BLOCK_DATA (IB_BLOCK_BYTES - IB_BLOCK_HEADER)
/* The most members a block can hold: every bit of a full bitmap. */
#define IB_BLOCK_MAX_MEMBERS (IB_BLOCK_DATA * 8)

/* Blocks a page indexes. 128 keeps a page near 2.3 KiB and a walk over its
 * counts short; a set of 1M members has a few dozen pages. */
#ifndef IB_PAGE_BLOCKS
#define IB_PAGE_BLOCKS 128
#endif

/* Encodings of a block. An array's width is 1 << enc bytes. */
#define IB_ENC_W1 0
#define IB_ENC_W2 1
#define IB_ENC_W4 2
#define IB_ENC_W8 3
#define IB_ENC_BITMAP 4

typedef struct ibBlock {
    uint16_t bytes; /* Data bytes in use. */
    uint16_t cap;   /* Data bytes allocated. */
    uint8_t enc;
    uint8_t unused[3];
    uint64_t data[]; /* Offsets or bitmap words (8-byte aligned). */
} ibBlock;

_Static_assert(sizeof(ibBlock) == IB_BLOCK_HEADER, "a block's header is 8 bytes");
_Static_assert(IB_BLOCK_DATA % 8 == 0, "a full bitmap is whole words");
_Static_assert(IB_BLOCK_MAX_MEMBERS < 65536, "a block's count fits 16 bits");

typedef struct ibPage {
    uint32_t nblocks;
    uint32_t count; /* Members in the page. */
    uint64_t bases[IB_PAGE_BLOCKS];
    ibBlock *blocks[IB_PAGE_BLOCKS];
    uint16_t counts[IB_PAGE_BLOCKS];
} ibPage;

struct ibset {
    uint64_t tag; /* IBSET_TAG */
    uint64_t count;
    size_t bytes;
    uint32_t npages, pagecap;
    uint64_t *mins;    /* By page: its first block's base. */
    uint64_t *pcounts; /* By page: its members. */
    ibPage **pages;
};

/* Scratch for re-encoding a block: every member of a full block and one
 * more. The server touches sets from one thread at a time. */
static uint64_t scratch[IB_BLOCK_MAX_MEMBERS + 1];

static inline uint64_t ibKey(int64_t v) {
    return (uint64_t)v ^ (UINT64_C(1) << 63);
}

static inline int64_t ibValue(uint64_t k) {
    return (int64_t)(k ^ (UINT64_C(1) << 63));
}

/* --- Blocks (every allocation counted in s->bytes) --- */

static inline unsigned widthEnc(uint64_t maxoff) {
    if (maxoff <= UINT8_MAX) return IB_ENC_W1;
    if (maxoff <= UINT16_MAX) return IB_ENC_W2;
    if (maxoff <= UINT32_MAX) return IB_ENC_W4;
    return IB_ENC_W8;
}

static inline size_t bitmapBytes(uint64_t maxoff) {
    return (maxoff / 64 + 1) * 8;
}

/* The encoding that holds n members whose greatest offset is maxoff in the
 * fewest bytes, and those bytes (which may exceed IB_BLOCK_DATA). */
static unsigned bestEnc(uint64_t n, uint64_t maxoff, size_t *bytes) {
    unsigned enc = widthEnc(maxoff);
    size_t array = n << enc;
    if (maxoff < (uint64_t)IB_BLOCK_DATA * 8 && bitmapBytes(maxoff) <= array) {
        *bytes = bitmapBytes(maxoff);
        return IB_ENC_BITMAP;
    }
    *bytes = array;
    return enc;
}

static inline uint64_t arrayGet(const ibBlock *b, uint32_t i) {
    switch (b->enc) {
    case IB_ENC_W1: return ((const uint8_t *)b->data)[i];
    case IB_ENC_W2: return ((const uint16_t *)b->data)[i];
    case IB_ENC_W4: return ((const uint32_t *)b->data)[i];
    default: return ((const uint64_t *)b->data)[i];
    }
}

static inline void arraySet(ibBlock *b, uint32_t i, uint64_t off) {
    switch (b->enc) {
    case IB_ENC_W1: ((uint8_t *)b->data)[i] = (uint8_t)off; break;
    case IB_ENC_W2: ((uint16_t *)b->data)[i] = (uint16_t)off; break;
    case IB_ENC_W4: ((uint32_t *)b->data)[i] = (uint32_t)off; break;
    default: ((uint64_t *)b->data)[i] = off; break;
    }
}

/* The index of the first offset >= off in an array block of n members.
 * Branch-free: the halving picks its side with a conditional move, since
 * which side a random member falls on is a coin the branch predictor
 * loses half the time. */
static uint32_t arrayLowerBound(const ibBlock *b, uint32_t n, uint64_t off) {
    if (!n) return 0;
#define IB_LOWER_BOUND(T)                                  \
    do {                                                   \
        const T *a = (const T *)b->data, *p = a;           \
        for (uint32_t len = n; len > 1;) {                 \
            uint32_t half = len / 2;                       \
            p = p[half] < off ? p + half : p;              \
            len -= half;                                   \
        }                                                  \
        return (uint32_t)(p - a) + (*p < off);             \
    } while (0)
    switch (b->enc) {
    case IB_ENC_W1: IB_LOWER_BOUND(uint8_t);
    case IB_ENC_W2: IB_LOWER_BOUND(uint16_t);
    case IB_ENC_W4: IB_LOWER_BOUND(uint32_t);
    default: IB_LOWER_BOUND(uint64_t);
    }
#undef IB_LOWER_BOUND
}

static inline int bitmapTest(const ibBlock *b, uint64_t off) {
    return off < (uint64_t)b->bytes * 8 && (b->data[off / 64] >> (off % 64)) & 1;
}

/* The first set bit at or after bit `from`, or -1. */
static int64_t bitmapNextSet(const ibBlock *b, uint64_t from) {
    uint32_t words = b->bytes / 8;
    uint64_t w = from / 64;
    if (w >= words) return -1;
    uint64_t bits = b->data[w] & (~UINT64_C(0) << (from % 64));
    while (!bits) {
        if (++w == words) return -1;
        bits = b->data[w];
    }
    return (int64_t)(w * 64 + __builtin_ctzll(bits));
}

/* The bit of the r-th (0-based) set bit. */
static uint64_t bitmapSelect(const ibBlock *b, uint32_t r) {
    uint32_t w = 0;
    for (;; w++) {
        uint32_t ones = __builtin_popcountll(b->data[w]);
        if (r < ones) break;
        r -= ones;
    }
    uint64_t bits = b->data[w];
    while (r--) bits &= bits - 1;
    return (uint64_t)w * 64 + __builtin_ctzll(bits);
}

/* The greatest offset in a block of n members. */
static uint64_t blockMaxOffset(const ibBlock *b, uint32_t n) {
    if (b->enc != IB_ENC_BITMAP) return arrayGet(b, n - 1);
    uint32_t w = b->bytes / 8;
    while (!b->data[w - 1]) w--;
    return (uint64_t)(w - 1) * 64 + 63 - __builtin_clzll(b->data[w - 1]);
}

static int blockContains(const ibBlock *b, uint32_t n, uint64_t off) {
    if (b->enc == IB_ENC_BITMAP) return bitmapTest(b, off);
    uint32_t i = arrayLowerBound(b, n, off);
    return i < n && arrayGet(b, i) == off;
}

/* The block's members as keys (base + offset), into out. */
static void blockDecode(const ibBlock *b, uint32_t n, uint64_t base, uint64_t *out) {
    if (b->enc == IB_ENC_BITMAP) {
        uint32_t k = 0;
        for (uint32_t w = 0; w < b->bytes / 8; w++) {
            for (uint64_t bits = b->data[w]; bits; bits &= bits - 1)
                out[k++] = base + (uint64_t)w * 64 + __builtin_ctzll(bits);
        }
        assert(k == n);
    } else {
        for (uint32_t i = 0; i < n; i++) out[i] = base + arrayGet(b, i);
    }
}

/* Makes sure b can hold `bytes` of data, growing or shrinking its
 * allocation to the allocator's class for it. */
static ibBlock *blockResize(ibset *s, ibBlock *b, size_t bytes) {
    if (b && bytes <= b->cap && 2 * (bytes + IB_BLOCK_HEADER) > (size_t)b->cap + IB_BLOCK_HEADER) return b;
    size_t usable;
    b = countedRealloc(&s->bytes, b, IB_BLOCK_HEADER + bytes, &usable);
    usable -= IB_BLOCK_HEADER;
    b->cap = usable > IB_BLOCK_DATA ? IB_BLOCK_DATA : (uint16_t)usable;
    return b;
}

/* Writes n ascending keys (all >= base) into b (NULL: a new block) in the
 * smallest encoding, which must fit IB_BLOCK_DATA. */
static ibBlock *blockEncode(ibset *s, ibBlock *b, uint64_t base, const uint64_t *keys, uint32_t n) {
    size_t bytes;
    unsigned enc = bestEnc(n, keys[n - 1] - base, &bytes);
    assert(bytes <= IB_BLOCK_DATA);
    b = blockResize(s, b, bytes);
    b->enc = enc;
    b->bytes = (uint16_t)bytes;
    if (enc == IB_ENC_BITMAP) {
        memset(b->data, 0, bytes);
        for (uint32_t i = 0; i < n; i++) {
            uint64_t off = keys[i] - base;
            b->data[off / 64] |= UINT64_C(1) << (off % 64);
        }
    } else {
        for (uint32_t i = 0; i < n; i++) arraySet(b, i, keys[i] - base);
    }
    return b;
}

/* Adds off, not a member, to a block of n members when it fits without
 * another encoding or a split; in an array it goes at index `at` (where
 * the caller's search for it ended). Returns NULL when it does not fit so. */
static ibBlock *blockTryAdd(ibset *s, ibBlock *b, uint32_t n, uint64_t off, uint32_t at) {
    uint64_t maxoff = blockMaxOffset(b, n);
    if (off > maxoff) maxoff = off;
    size_t bytes;
    unsigned enc = bestEnc(n + 1, maxoff, &bytes);
    if (enc != b->enc || bytes > IB_BLOCK_DATA) return NULL;
    if (enc == IB_ENC_BITMAP) {
        if (bytes > b->bytes) {
            uint16_t old = b->bytes;
            b = blockResize(s, b, bytes);
            memset((unsigned char *)b->data + old, 0, bytes - old);
            b->bytes = (uint16_t)bytes;
        }
        b->data[off / 64] |= UINT64_C(1) << (off % 64);
    } else {
        b = blockResize(s, b, bytes);
        unsigned w = 1u << enc;
        unsigned char *d = (unsigned char *)b->data;
        memmove(d + (at + 1) * w, d + at * w, (n - at) * w);
        arraySet(b, at, off);
        b->bytes = (uint16_t)bytes;
    }
    return b;
}

/* --- Pages and the top level --- */

static ibPage *pageCreate(ibset *s) {
    ibPage *pg = countedAlloc(&s->bytes, sizeof(ibPage));
    pg->nblocks = 0;
    pg->count = 0;
    return pg;
}

/* Makes room for page index p at the top, shifting pages p.. up. */
static void topInsertPage(ibset *s, uint32_t p, ibPage *pg) {
    if (s->npages == s->pagecap) {
        uint32_t cap = s->pagecap ? s->pagecap * 2 : 4;
        s->mins = countedRealloc(&s->bytes, s->mins, cap * sizeof(uint64_t), NULL);
        s->pcounts = countedRealloc(&s->bytes, s->pcounts, cap * sizeof(uint64_t), NULL);
        s->pages = countedRealloc(&s->bytes, s->pages, cap * sizeof(ibPage *), NULL);
        s->pagecap = cap;
    }
    uint32_t tail = s->npages - p;
    memmove(s->mins + p + 1, s->mins + p, tail * sizeof(uint64_t));
    memmove(s->pcounts + p + 1, s->pcounts + p, tail * sizeof(uint64_t));
    memmove(s->pages + p + 1, s->pages + p, tail * sizeof(ibPage *));
    s->pages[p] = pg;
    s->mins[p] = pg->nblocks ? pg->bases[0] : 0;
    s->pcounts[p] = pg->count;
    s->npages++;
}

static void topRemovePage(ibset *s, uint32_t p) {
    countedFree(&s->bytes, s->pages[p]);
    uint32_t tail = s->npages - p - 1;
    memmove(s->mins + p, s->mins + p + 1, tail * sizeof(uint64_t));
    memmove(s->pcounts + p, s->pcounts + p + 1, tail * sizeof(uint64_t));
    memmove(s->pages + p, s->pages + p + 1, tail * sizeof(ibPage *));
    s->npages--;
    if (s->npages == 0) {
        countedFree(&s->bytes, s->mins);
        countedFree(&s->bytes, s->pcounts);
        countedFree(&s->bytes, s->pages);
        s->mins = s->pcounts = NULL;
        s->pages = NULL;
        s->pagecap = 0;
    }
}

/* Moves blocks [from, nblocks) of page src to the start of page dst (dst
 * empty, or its blocks come after). */
static void pageMoveTail(ibPage *src, uint32_t from, ibPage *dst) {
    uint32_t n = src->nblocks - from;
    memmove(dst->bases + n, dst->bases, dst->nblocks * sizeof(uint64_t));
    memmove(dst->blocks + n, dst->blocks, dst->nblocks * sizeof(ibBlock *));
    memmove(dst->counts + n, dst->counts, dst->nblocks * sizeof(uint16_t));
    memcpy(dst->bases, src->bases + from, n * sizeof(uint64_t));
    memcpy(dst->blocks, src->blocks + from, n * sizeof(ibBlock *));
    memcpy(dst->counts, src->counts + from, n * sizeof(uint16_t));
    uint32_t moved = 0;
    for (uint32_t i = 0; i < n; i++) moved += dst->counts[i];
    dst->nblocks += n;
    dst->count += moved;
    src->nblocks = from;
    src->count -= moved;
}

/* Inserts block b (n members, base) at index i of page p, splitting the
 * page when it is full. */
static void pageInsertBlock(ibset *s, uint32_t p, uint32_t i, uint64_t base, ibBlock *b, uint32_t n) {
    ibPage *pg = s->pages[p];
    if (pg->nblocks == IB_PAGE_BLOCKS) {
        /* Split: at the end of the last page, a new page (ascending loads
         * leave full pages); elsewhere, in halves. */
        ibPage *right = pageCreate(s);
        uint32_t at = (i == pg->nblocks && p == s->npages - 1) ? pg->nblocks : pg->nblocks / 2;
        pageMoveTail(pg, at, right);
        s->pcounts[p] = pg->count;
        topInsertPage(s, p + 1, right);
        if (i >= at) {
            p++;
            i -= at;
            pg = right;
        }
    }
    uint32_t tail = pg->nblocks - i;
    memmove(pg->bases + i + 1, pg->bases + i, tail * sizeof(uint64_t));
    memmove(pg->blocks + i + 1, pg->blocks + i, tail * sizeof(ibBlock *));
    memmove(pg->counts + i + 1, pg->counts + i, tail * sizeof(uint16_t));
    pg->bases[i] = base;
    pg->blocks[i] = b;
    pg->counts[i] = (uint16_t)n;
    pg->nblocks++;
    pg->count += n;
    s->pcounts[p] = pg->count;
    s->mins[p] = pg->bases[0];
}

/* Removes block i of page p (its members already accounted for). */
static void pageRemoveBlock(ibset *s, uint32_t p, uint32_t i) {
    ibPage *pg = s->pages[p];
    countedFree(&s->bytes, pg->blocks[i]);
    uint32_t tail = pg->nblocks - i - 1;
    memmove(pg->bases + i, pg->bases + i + 1, tail * sizeof(uint64_t));
    memmove(pg->blocks + i, pg->blocks + i + 1, tail * sizeof(ibBlock *));
    memmove(pg->counts + i, pg->counts + i + 1, tail * sizeof(uint16_t));
    pg->nblocks--;
    if (pg->nblocks == 0) {
        topRemovePage(s, p);
        return;
    }
    s->mins[p] = pg->bases[0];
}

/* The last of n ascending bases at or below k, or 0 when k is below them
 * all: the page (over mins) or the block (over a page's bases) whose range
 * holds k. */
static uint32_t findRange(const uint64_t *bases, uint32_t n, uint64_t k) {
    const uint64_t *p = bases;
    for (uint32_t len = n; len > 1;) { /* branch-free, as arrayLowerBound */
        uint32_t half = len / 2;
        p = p[half] <= k ? p + half : p;
        len -= half;
    }
    return (uint32_t)(p - bases);
}

static inline uint32_t findPage(const ibset *s, uint64_t k) {
    return findRange(s->mins, s->npages, k);
}

static inline uint32_t findBlock(const ibPage *pg, uint64_t k) {
    return findRange(pg->bases, pg->nblocks, k);
}

/* --- The set --- */

ibset *ibsCreate(void) {
    size_t usable;
    ibset *s = zmalloc_usable(sizeof(*s), &usable);
    s->tag = IBSET_TAG;
    s->count = 0;
    s->bytes = usable;
    s->npages = s->pagecap = 0;
    s->mins = s->pcounts = NULL;
    s->pages = NULL;
    return s;
}

void ibsFree(ibset *s) {
    for (uint32_t p = 0; p < s->npages; p++) {
        ibPage *pg = s->pages[p];
        for (uint32_t i = 0; i < pg->nblocks; i++) zfree(pg->blocks[i]);
        zfree(pg);
    }
    zfree(s->mins);
    zfree(s->pcounts);
    zfree(s->pages);
    zfree(s);
}

int ibsIsSet(const void *p) {
    return *(const uint64_t *)p == IBSET_TAG;
}

uint64_t ibsLength(const ibset *s) {
    return s->count;
}

size_t ibsAllocSize(const ibset *s) {
    return s->bytes;
}

int ibsContains(const ibset *s, int64_t v) {
    if (!s->npages) return 0;
    uint64_t k = ibKey(v);
    const ibPage *pg = s->pages[findPage(s, k)];
    uint32_t i = findBlock(pg, k);
    if (k < pg->bases[i]) return 0;
    return blockContains(pg->blocks[i], pg->counts[i], k - pg->bases[i]);
}

/* Asks for every line from p for the next bytes. */
static inline void prefetchRange(const void *p, size_t bytes) {
    const char *c = p, *last = c + bytes - 1;
    for (; c <= last; c += 64) __builtin_prefetch(c);
    __builtin_prefetch(last);
}

/* Asks for the lines of the block where v is or would go, and of its
 * count: a read-ahead for the members of pipelined commands
 * (memberprefetch.c). The top of the index (mins[]) is small and mostly in
 * the cache. The page it names is a couple of KiB that a busy server (a
 * lone command between two system calls) has often let go, and the search
 * over its bases is a chain of loads, each on the last one's answer: so
 * the page's bases and block pointers are all asked for first, and their
 * misses overlap (docs/engine.md has what that saves). A block's
 * allocation may end before IB_BLOCK_BYTES, and prefetches past it are
 * harmless. */
void ibsPrefetch(const ibset *s, int64_t v) {
    if (!s->npages) return;
    uint64_t k = ibKey(v);
    const ibPage *pg = s->pages[findPage(s, k)];
    prefetchRange(pg->bases, pg->nblocks * sizeof(pg->bases[0]));
    prefetchRange(pg->blocks, pg->nblocks * sizeof(pg->blocks[0]));
    uint32_t i = findBlock(pg, k);
    prefetchRange(pg->blocks[i], IB_BLOCK_BYTES);
    __builtin_prefetch(&pg->counts[i]);
}

/* Adds one to the counts of block i of page p. */
static void countAdded(ibset *s, uint32_t p, uint32_t i, int delta) {
    ibPage *pg = s->pages[p];
    pg->counts[i] += delta;
    pg->count += delta;
    s->pcounts[p] += delta;
    s->count += delta;
}

/* The lowest base block i of page p may have: above every member of the
 * block before it (0 for the set's first block). */
static uint64_t baseFloor(const ibset *s, uint32_t p, uint32_t i) {
    if (i == 0) {
        if (p == 0) return 0;
        p--;
        i = s->pages[p]->nblocks;
    }
    const ibPage *pg = s->pages[p];
    return pg->bases[i - 1] + blockMaxOffset(pg->blocks[i - 1], pg->counts[i - 1]) + 1;
}

/* The base of block i of page p when k, below its base, joins it: lowered
 * by whole bitmap words where the block before leaves room, so that
 * members added going down re-encode the block once in 64 integers, not
 * at each. */
static uint64_t lowerBase(const ibset *s, uint32_t p, uint32_t i, uint64_t k) {
    uint64_t base = s->pages[p]->bases[i];
    uint64_t d = base - k;
    if (d > UINT64_MAX - 63) return k;
    d = (d + 63) & ~UINT64_C(63);
    return d <= base - baseFloor(s, p, i) ? base - d : k;
}

/* Block i of page p cannot take key k in its encoding: re-encode it with
 * k, splitting it in two when the result outgrows a block. */
static void blockRebuild(ibset *s, uint32_t p, uint32_t i, uint64_t k) {
    ibPage *pg = s->pages[p];
    uint32_t n = pg->counts[i];
    uint64_t base = pg->bases[i];
    blockDecode(pg->blocks[i], n, base, scratch);
    /* k goes in order; it may be below base (the set's new minimum). */
    uint32_t at = n;
    while (at > 0 && scratch[at - 1] > k) at--;
    memmove(scratch + at + 1, scratch + at, (n - at) * sizeof(uint64_t));
    scratch[at] = k;
    n++;
    if (k < base) base = lowerBase(s, p, i, k);

    size_t bytes;
    bestEnc(n, scratch[n - 1] - base, &bytes);
    if (bytes <= IB_BLOCK_DATA) {
        pg->blocks[i] = blockEncode(s, pg->blocks[i], base, scratch, n);
        pg->bases[i] = base;
        if (i == 0) s->mins[p] = base;
        countAdded(s, p, i, 1);
        return;
    }
    /* A new greatest member of a full block joins the next block, below
     * its base: members added going down into the gap between two full
     * blocks then fill one block, rather than a block each. */
    if (at == n - 1 && (i + 1 < pg->nblocks || p + 1 < s->npages)) {
        if (i + 1 < pg->nblocks)
            blockRebuild(s, p, i + 1, k);
        else
            blockRebuild(s, p + 1, 0, k);
        return;
    }
    /* Split. A new greatest (of the set's last block: an ascending load
     * leaves full blocks) or least member goes into a block of its own:
     * the others fitted before. Otherwise halves, each of which spans no
     * more than the block did. */
    uint32_t left = at == n - 1 ? n - 1 : (at == 0 ? 1 : n / 2);
    pg->blocks[i] = blockEncode(s, pg->blocks[i], base, scratch, left);
    pg->bases[i] = base;
    if (i == 0) s->mins[p] = base;
    pg->count += left - pg->counts[i];
    s->pcounts[p] = pg->count;
    pg->counts[i] = (uint16_t)left;
    ibBlock *right = blockEncode(s, NULL, scratch[left], scratch + left, n - left);
    s->count++;
    pageInsertBlock(s, p, i + 1, scratch[left], right, n - left);
}

int ibsInsert(ibset *s, int64_t v) {
    uint64_t k = ibKey(v);
    if (!s->npages) {
        ibPage *pg = pageCreate(s);
        topInsertPage(s, 0, pg);
        pageInsertBlock(s, 0, 0, k, blockEncode(s, NULL, k, &k, 1), 1);
        s->count = 1;
        return 1;
    }
    uint32_t p = findPage(s, k);
    ibPage *pg = s->pages[p];
    uint32_t i = findBlock(pg, k);
    uint64_t base = pg->bases[i];
    if (k >= base) {
        uint64_t off = k - base;
        ibBlock *b = pg->blocks[i];
        uint32_t n = pg->counts[i], at = 0;
        if (b->enc == IB_ENC_BITMAP) {
            if (bitmapTest(b, off)) return 0;
        } else {
            at = arrayLowerBound(b, n, off);
            if (at < n && arrayGet(b, at) == off) return 0;
        }
        if ((b = blockTryAdd(s, b, n, off, at)) != NULL) {
            pg->blocks[i] = b;
            countAdded(s, p, i, 1);
            return 1;
        }
    }
    blockRebuild(s, p, i, k);
    return 1;
}

int ibsAppend(ibset *s, int64_t v) {
    if (!s->npages) return ibsInsert(s, v);
    uint64_t k = ibKey(v);
    uint32_t p = s->npages - 1;
    ibPage *pg = s->pages[p];
    uint32_t i = pg->nblocks - 1;
    ibBlock *b = pg->blocks[i];
    uint64_t base = pg->bases[i];
    if (k <= base + blockMaxOffset(b, pg->counts[i])) return 0;
    if ((b = blockTryAdd(s, b, pg->counts[i], k - base, pg->counts[i])) != NULL) {
        pg->blocks[i] = b;
        countAdded(s, p, i, 1);
    } else {
        blockRebuild(s, p, i, k);
    }
    return 1;
}

/* Block i of page p and its next neighbour in the page become one when
 * the two fit in half a block. */
static void maybeMergeBlocks(ibset *s, uint32_t p, uint32_t i) {
    ibPage *pg = s->pages[p];
    if (i + 1 >= pg->nblocks) return;
    ibBlock *a = pg->blocks[i], *b = pg->blocks[i + 1];
    uint32_t na = pg->counts[i], nb = pg->counts[i + 1];
    /* Half a block holds this many members at most (as a bitmap). */
    if (na + nb > IB_BLOCK_DATA / 2 * 8) return;
    blockDecode(a, na, pg->bases[i], scratch);
    blockDecode(b, nb, pg->bases[i + 1], scratch + na);
    size_t bytes;
    bestEnc(na + nb, scratch[na + nb - 1] - pg->bases[i], &bytes);
    if (bytes > IB_BLOCK_DATA / 2) return;
    pg->blocks[i] = blockEncode(s, a, pg->bases[i], scratch, na + nb);
    pg->counts[i] = (uint16_t)(na + nb);
    pg->counts[i + 1] = 0;
    pageRemoveBlock(s, p, i + 1);
}

/* Page p and its next neighbour, when both are sparse, become one. */
static void maybeMergePages(ibset *s, uint32_t p) {
    if (p + 1 >= s->npages) return;
    ibPage *a = s->pages[p], *b = s->pages[p + 1];
    if (a->nblocks + b->nblocks > IB_PAGE_BLOCKS / 2) return;
    /* b's blocks go after a's. */
    memcpy(a->bases + a->nblocks, b->bases, b->nblocks * sizeof(uint64_t));
    memcpy(a->blocks + a->nblocks, b->blocks, b->nblocks * sizeof(ibBlock *));
    memcpy(a->counts + a->nblocks, b->counts, b->nblocks * sizeof(uint16_t));
    a->nblocks += b->nblocks;
    a->count += b->count;
    s->pcounts[p] = a->count;
    b->nblocks = 0;
    topRemovePage(s, p + 1);
}

int ibsDelete(ibset *s, int64_t v) {
    if (!s->npages) return 0;
    uint64_t k = ibKey(v);
    uint32_t p = findPage(s, k);
    ibPage *pg = s->pages[p];
    uint32_t i = findBlock(pg, k);
    if (k < pg->bases[i]) return 0;
    uint64_t off = k - pg->bases[i];
    ibBlock *b = pg->blocks[i];
    uint32_t n = pg->counts[i];
    if (b->enc == IB_ENC_BITMAP) {
        if (!bitmapTest(b, off)) return 0;
        b->data[off / 64] &= ~(UINT64_C(1) << (off % 64));
    } else {
        uint32_t at = arrayLowerBound(b, n, off);
        if (at == n || arrayGet(b, at) != off) return 0;
        unsigned w = 1u << b->enc;
        unsigned char *d = (unsigned char *)b->data;
        memmove(d + at * w, d + (at + 1) * w, (n - at - 1) * w);
        b->bytes -= w;
    }
    countAdded(s, p, i, -1);
    n--;
    if (n == 0) {
        pageRemoveBlock(s, p, i);
        if (p < s->npages) maybeMergePages(s, p ? p - 1 : 0);
        return 1;
    }
    if (b->enc == IB_ENC_BITMAP) {
        /* Trailing empty words go; a sparse bitmap becomes an array. */
        uint32_t words = b->bytes / 8;
        while (!b->data[words - 1]) words--;
        b->bytes = (uint16_t)(words * 8);
        size_t bytes;
        if (bestEnc(n, blockMaxOffset(b, n), &bytes) != IB_ENC_BITMAP && bytes * 2 <= b->bytes) {
            blockDecode(b, n, pg->bases[i], scratch);
            b = blockEncode(s, b, pg->bases[i], scratch, n);
        }
    }
    pg->blocks[i] = b = blockResize(s, b, b->bytes);
    /* A block under a quarter full looks at a neighbour (only then, so
     * that a delete reads no other block). */
    if (b->bytes < IB_BLOCK_DATA / 4) maybeMergeBlocks(s, p, i > 0 ? i - 1 : i);
    return 1;
}

/* --- Ranks and cursors --- */

static int64_t blockAt(const ibBlock *b, uint64_t base, uint32_t r, uint32_t *pos) {
    uint64_t off;
    if (b->enc == IB_ENC_BITMAP) {
        off = bitmapSelect(b, r);
        *pos = (uint32_t)off;
    } else {
        off = arrayGet(b, r);
        *pos = r;
    }
    return ibValue(base + off);
}

int64_t ibsAtRank(const ibset *s, uint64_t r) {
    assert(r < s->count);
    uint32_t p = 0;
    while (r >= s->pcounts[p]) r -= s->pcounts[p++];
    const ibPage *pg = s->pages[p];
    uint32_t i = 0;
    while (r >= pg->counts[i]) r -= pg->counts[i++];
    uint32_t pos;
    return blockAt(pg->blocks[i], pg->bases[i], (uint32_t)r, &pos);
}

/* The cursor at the first member of block (page, block), or the first
 * block after it. */
static int cursorAtBlock(ibsCursor *c, uint32_t page, uint32_t block) {
    const ibset *s = c->s;
    if (page < s->npages && block >= s->pages[page]->nblocks) {
        page++;
        block = 0;
    }
    if (page >= s->npages) return 0;
    const ibPage *pg = s->pages[page];
    c->page = page;
    c->block = block;
    c->value = blockAt(pg->blocks[block], pg->bases[block], 0, &c->pos);
    return 1;
}

int ibsFirst(const ibset *s, ibsCursor *c) {
    c->s = s;
    return cursorAtBlock(c, 0, 0);
}

int ibsNext(ibsCursor *c) {
    const ibPage *pg = c->s->pages[c->page];
    const ibBlock *b = pg->blocks[c->block];
    if (b->enc == IB_ENC_BITMAP) {
        int64_t bit = bitmapNextSet(b, (uint64_t)c->pos + 1);
        if (bit >= 0) {
            c->pos = (uint32_t)bit;
            c->value = ibValue(pg->bases[c->block] + (uint64_t)bit);
            return 1;
        }
    } else if (c->pos + 1 < pg->counts[c->block]) {
        c->pos++;
        c->value = ibValue(pg->bases[c->block] + arrayGet(b, c->pos));
        return 1;
    }
    return cursorAtBlock(c, c->page, c->block + 1);
}

int ibsSeek(const ibset *s, int64_t v, ibsCursor *c) {
    c->s = s;
    if (!s->npages) return 0;
    uint64_t k = ibKey(v);
    uint32_t p = findPage(s, k);
    const ibPage *pg = s->pages[p];
    uint32_t i = findBlock(pg, k);
    uint64_t base = pg->bases[i];
    if (k < base) return cursorAtBlock(c, p, i);
    const ibBlock *b = pg->blocks[i];
    uint64_t off = k - base;
    c->page = p;
    c->block = i;
    if (b->enc == IB_ENC_BITMAP) {
        int64_t bit = bitmapNextSet(b, off);
        if (bit >= 0) {
            c->pos = (uint32_t)bit;
            c->value = ibValue(base + (uint64_t)bit);
            return 1;
        }
    } else {
        uint32_t at = arrayLowerBound(b, pg->counts[i], off);
        if (at < pg->counts[i]) {
            c->pos = at;
            c->value = ibValue(base + arrayGet(b, at));
            return 1;
        }
    }
    return cursorAtBlock(c, p, i + 1);
}

/* --- Defrag, dismiss --- */

static void *moved(void *p, void *(*fn)(void *)) {
    void *n = fn(p);
    return n ? n : p;
}

ibset *ibsDefragShell(ibset *s, void *(*fn)(void *)) {
    ibset *ns = fn(s);
    if (ns) s = ns;
    if (s->npages) {
        s->mins = moved(s->mins, fn);
        s->pcounts = moved(s->pcounts, fn);
        s->pages = moved(s->pages, fn);
        for (uint32_t p = 0; p < s->npages; p++) s->pages[p] = moved(s->pages[p], fn);
    }
    return ns;
}

uint32_t ibsDefragBlocks(ibset *s, uint32_t from, uint32_t count, void *(*fn)(void *)) {
    uint32_t p;
    for (p = from; p < s->npages && p - from < count; p++) {
        ibPage *pg = s->pages[p];
        for (uint32_t i = 0; i < pg->nblocks; i++) pg->blocks[i] = moved(pg->blocks[i], fn);
    }
    return p < s->npages ? p : 0;
}

void ibsDismiss(ibset *s, size_t min, void (*fn)(void *ptr, size_t size)) {
    size_t size;
    for (uint32_t p = 0; p < s->npages; p++) {
        ibPage *pg = s->pages[p];
        for (uint32_t i = 0; i < pg->nblocks; i++)
            if ((size = zmalloc_size(pg->blocks[i])) >= min) fn(pg->blocks[i], size);
        if ((size = zmalloc_size(pg)) >= min) fn(pg, size);
    }
    if (s->npages) {
        if ((size = zmalloc_size(s->mins)) >= min) fn(s->mins, size);
        if ((size = zmalloc_size(s->pcounts)) >= min) fn(s->pcounts, size);
        if ((size = zmalloc_size(s->pages)) >= min) fn(s->pages, size);
    }
}

/* --- Figures and the invariant check --- */

void ibsGetStats(const ibset *s, ibsStats *st) {
    memset(st, 0, sizeof(*st));
    st->pages = s->npages;
    st->indexBytes = zmalloc_size((void *)s);
    if (s->npages)
        st->indexBytes += zmalloc_size(s->mins) + zmalloc_size(s->pcounts) + zmalloc_size(s->pages);
    for (uint32_t p = 0; p < s->npages; p++) {
        const ibPage *pg = s->pages[p];
        st->indexBytes += zmalloc_size((void *)pg);
        for (uint32_t i = 0; i < pg->nblocks; i++) {
            const ibBlock *b = pg->blocks[i];
            st->blocks++;
            if (b->enc == IB_ENC_BITMAP)
                st->bitmapBlocks++;
            else
                st->arrayBlocks[b->enc]++;
            st->blockBytes += zmalloc_size((void *)b);
            st->dataBytes += b->bytes;
        }
    }
}

const char *ibsCheck(const ibset *s) {
    if (s->tag != IBSET_TAG) return "tag";
    if (s->npages > s->pagecap) return "more pages than room";
    if (!s->npages && s->count) return "members without pages";
    uint64_t total = 0, prevbase = 0;
    size_t bytes = zmalloc_size((void *)s);
    if (s->npages) bytes += zmalloc_size(s->mins) + zmalloc_size(s->pcounts) + zmalloc_size(s->pages);
    int first = 1;
    for (uint32_t p = 0; p < s->npages; p++) {
        const ibPage *pg = s->pages[p];
        bytes += zmalloc_size((void *)pg);
        if (pg->nblocks == 0 || pg->nblocks > IB_PAGE_BLOCKS) return "page block count";
        if (s->mins[p] != pg->bases[0]) return "page min is not its first base";
        uint64_t pcount = 0;
        for (uint32_t i = 0; i < pg->nblocks; i++) {
            const ibBlock *b = pg->blocks[i];
            uint32_t n = pg->counts[i];
            uint64_t base = pg->bases[i];
            bytes += zmalloc_size((void *)b);
            if (!first && base <= prevbase) return "bases do not ascend";
            first = 0;
            prevbase = base;
            if (n == 0) return "empty block";
            if (b->bytes > b->cap || b->cap > IB_BLOCK_DATA) return "block bytes past its room";
            if (zmalloc_size((void *)b) < IB_BLOCK_HEADER + (size_t)b->cap) return "block cap past its allocation";
            uint64_t next = (i + 1 < pg->nblocks) ? pg->bases[i + 1] : (p + 1 < s->npages ? s->mins[p + 1] : 0);
            int hasnext = (i + 1 < pg->nblocks) || (p + 1 < s->npages);
            uint64_t maxoff;
            if (b->enc == IB_ENC_BITMAP) {
                if (b->bytes == 0 || b->bytes % 8) return "bitmap size";
                uint32_t ones = 0;
                for (uint32_t w = 0; w < b->bytes / 8; w++) ones += __builtin_popcountll(b->data[w]);
                if (ones != n) return "bitmap count";
                if (!b->data[b->bytes / 8 - 1]) return "bitmap has trailing empty words";
                maxoff = blockMaxOffset(b, n);
            } else {
                if (b->enc > IB_ENC_W8) return "unknown encoding";
                if (b->bytes != (n << b->enc)) return "array size";
                for (uint32_t j = 1; j < n; j++)
                    if (arrayGet(b, j) <= arrayGet(b, j - 1)) return "array does not ascend";
                maxoff = arrayGet(b, n - 1);
            }
            if (base + maxoff < base) return "offset overflows";
            if (hasnext && base + maxoff >= next) return "member past the next block's base";
            pcount += n;
        }
        if (pcount != pg->count) return "page count";
        if (s->pcounts[p] != pg->count) return "top count";
        total += pcount;
    }
    if (total != s->count) return "set count";
    if (bytes != s->bytes) return "allocated bytes";
    return NULL;
}
