/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 */

/* Sorted-set B+ tree
 * ==================
 *
 * The encoding of every sorted set that outgrows its listpack: a B+ tree
 * whose leaves hold the (score, member) entries themselves, packed, whose
 * inner nodes count the entries below each child (so ranks are O(log n)),
 * and a member index (zmindex.c) from member to leaf. A member costs its
 * bytes, one to three bytes of encoding and an eight-byte index slot; there
 * is no allocation per member unless it is longer than ZBT_MAX_INLINE.
 *
 * Order: by score, then by member bytes as memcmp compares them (a shorter
 * member first on a common prefix), as upstream's skiplist orders them.
 *
 * Leaves
 * ------
 *
 * A leaf is one allocation of at most ZBT_LEAF_BYTES:
 *
 *    +--------+------+------+----+------+-------+-------+-----+-------------+------+
 *    | parent | prev | next | id | used | count | alloc | run | entries ... | free |
 *    +--------+------+------+----+------+-------+-------+-----+-------------+------+
 *       8       8      8      4     2      2       2      1    up to ZBT_LEAF_BYTES - 35
 *
 * sized to its entries: the allocator's size class of what they take (so a
 * leaf wastes at most one class step), grown by realloc as entries arrive
 * and shrunk when they go. Leaves at the tree's edges, where sequential
 * inserts arrive, are allocated whole. A big tree keeps its leaves in an
 * arena instead, whole, where a leaf's id gives its address (see "Leaf
 * arena").
 *
 * `run` says where the leaf's last insert went, to find runs of inserts
 * (below): bits 6..0 are one more than its index (0 for none, or past
 * 126), bit 7 is set when it went right after or right before the insert
 * before it. It is a hint: a wrong one only makes a full leaf split in
 * another place.
 *
 * Entries follow each other with no gap, in order. An entry is
 *
 *    [hdr] [score: 0, 1, 2, 4 or 8 bytes] [length] [member bytes]
 *
 * hdr bits 7..5: how the score is stored, relative to the score of the
 * entry before it in the leaf (0.0 for the first entry):
 *
 *    0 SAME   the previous score, bit for bit        0 bytes
 *    1 D8     previous + an unsigned integer delta   1 byte
 *    2 D16                                           2 bytes
 *    3 D32                                           4 bytes
 *    4 RAW    the double itself                      8 bytes
 *    5 X16    the previous score's bits, XORed with  2 bytes
 *    6 X32    the low bits given (the high ones      4 bytes
 *    7 X48    agree: sign, exponent, top mantissa)   6 bytes
 *
 * A delta is used only when previous + delta gives back the very bits of
 * the score, so every double (-0.0, infinities, subnormals) round-trips.
 * Sequential integer scores cost one byte; neighbouring fractions, which
 * share their high bits in a sorted leaf, six bytes or fewer.
 *
 * hdr bits 4..0: the member's length,
 *
 *    0..29  inline, this many bytes follow
 *    30     inline, one byte of length follows (30..ZBT_MAX_INLINE)
 *    31     out of line: eight bytes of length and an eight-byte pointer
 *           follow; the member bytes are an allocation of their own
 *
 * An entry with a time (zbtSetTime) sets the top bit of its length: the
 * length byte of code 30, which a shorter member then takes too (inline
 * lengths stop at 64), or bit 63 of an out-of-line length. The time
 * follows the rest of the entry, in one of two forms that the low bit of
 * its first byte tells apart:
 *
 *    [hdr] [score] [len | 0x80] [member bytes] [time]
 *
 *    short  4 bytes  (time - base) << 1          time in base .. base + 2^31 - 1
 *    long   7 bytes  (time - 1) << 1 | 1         any time, 1 .. ZBT_TIME_MAX
 *
 * base is the tree's (see "Times"): about a day before the times it holds,
 * so that times up to about 24 days ahead take the short form.
 *
 * Example: "m:42" with score 42 after "m:41" with score 41 is
 * 0x24 0x01 'm' ':' '4' '2' (D8, length 4, delta 1).
 *
 * Multi-byte fields are in host byte order: leaves are never persisted.
 * Entries are decoded where they lie in their leaf, never from a copy: a
 * score is read as the eight bytes that end with it, which for the first
 * entry reach back into the leaf's header.
 *
 * Inner nodes
 * -----------
 *
 *    +--------+---+-----+-------+----+-------------+----------------+-------------+
 *    | parent | n | cap | level | at | count[cap]  | minscore[cap]  | child[cap]  |
 *    +--------+---+-----+-------+----+-------------+----------------+-------------+
 *        8      2    2     1+1    2    8 each        8 each           8 each
 *
 * for each child: the entries below it, the smallest score below it, the
 * pointer; level is 1 when the children are leaves. `at` is where the node
 * was last found among its parent's children: a write going up checks
 * there before it searches (innerPos). A node holds up to
 * ZBT_INNER_FANOUT children (42 in 1 KiB); a root starts with room for
 * two and grows by reallocation, so a set just past its listpack pays for
 * a handful of children, not for 42.
 *
 * Invariants
 * ----------
 *
 * - Keys strictly increase along the leaf chain (head..tail via next).
 * - count[i] of an inner node is the number of entries below child i;
 *   minscore[i] is the score of the first entry below child i.
 * - Every leaf but a lone root leaf holds an entry; every inner node but
 *   the root has at least ZBT_INNER_MIN children (one, on the tree's left
 *   or right edge, where sequential inserts start new nodes); the root has
 *   two or more, in an allocation that grows with it.
 * - Each entry has exactly one index slot (its hash bits, its leaf's id).
 * - A tree with times: an entry's time is no earlier than its leaf's
 *   bound, and the tree's earliest no later than any bound (see "Times").
 *
 * Inserting
 * ---------
 *
 * An entry that fits its leaf is spliced in (the next entry is re-encoded,
 * as its delta changes). When it does not fit:
 * - After the end of the leaf, a new leaf takes the entry alone (and before
 *   its front, likewise, when the leaf before has no room): sequential
 *   inserts, ascending or descending, leave every leaf full.
 * - Else, inside a run, cut at the entry: when the leaf's last insert went
 *   just before (or just after) this one, the leaf is split there. Runs
 *   inside the tree are a queue's producers, each after its own last
 *   entry. Spread evenly, the place a run inserts at would stay inside a
 *   full leaf, and every few inserts would move its neighbours' entries
 *   again; cut, the run goes on at a leaf's end, as above.
 * - Else, shared with a sibling: when the leaf and its neighbour (the one
 *   with more room) fit in two leaves with room to spare, their entries
 *   are spread evenly over both.
 * - Else, split: the leaf and its full neighbour are spread over three
 *   leaves (each two thirds full), or a lone leaf over two.
 * Random inserts so leave leaves about 80% full, and as leaves are sized
 * to their entries, what is not full costs at most a size-class step.
 *
 * Deleting
 * --------
 *
 * A leaf that falls below ZBT_LEAF_MIN_FILL after a delete is merged with a
 * neighbour when both fit in one leaf, or else evens out with it; but the
 * first and the last leaf, where queues pop, are left to empty. Inner
 * nodes below ZBT_INNER_MIN children merge with or borrow from a sibling.
 *
 * All moves between leaves go through one routine (rewrite) that decodes
 * the entries of one or two leaves, lays them out again over as many
 * leaves as needed, fixes the counts, the minimum scores and the structure
 * of the tree, and re-points the index slots of the entries that moved.
 * An entry that still follows the entry it followed keeps its bytes: they
 * are copied, not encoded again (a delta depends on the entry before).
 *
 * Conventions: public functions are prefixed "zbt", macros "ZBT_";
 * internal functions are static and unprefixed.
 */

#include "zbtree.h"
#include "zmindex.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "countedalloc.h"
#include "serverassert.h"
#include "zmalloc.h"

uint64_t siphash(const uint8_t *in, const size_t inlen, const uint8_t *k);

/* --- Layout --- */

struct zbtInner;

struct zbtLeaf {
    struct zbtInner *parent;
    zbtLeaf *prev, *next;
    uint32_t id;
    uint16_t used;
    uint16_t count;
    uint16_t alloc; /* Bytes allocated: asking the allocator costs a miss. */
    uint8_t run;    /* Where the last insert went (see above). */
    unsigned char data[];
};

#define ZBT_INNER_FANOUT ((ZBT_INNER_BYTES - 16) / (sizeof(unsigned long) + sizeof(double) + sizeof(void *)))
#define ZBT_INNER_MIN (ZBT_INNER_FANOUT / 4)

typedef struct zbtInner {
    struct zbtInner *parent;
    uint16_t n, cap;
    uint8_t level;
    uint16_t at; /* Where it was last found among its parent's children. */
    /* unsigned long count[cap]; double minscore[cap]; void *child[cap]; */
} zbtInner;

_Static_assert(sizeof(zbtInner) == 16, "an inner node's header outgrew its 16 bytes");

static inline unsigned long *cnt(const zbtInner *p) { return (unsigned long *)(p + 1); }
static inline double *mins(const zbtInner *p) { return (double *)(cnt(p) + p->cap); }
static inline void **kids(const zbtInner *p) { return (void **)(mins(p) + p->cap); }

#define LEAF_PAYLOAD (ZBT_LEAF_BYTES - offsetof(zbtLeaf, data))

/* Bytes of a leaf worth fetching before its header is read (findMember). */
#define LEAF_AHEAD (ZBT_LEAF_BYTES * 3 / 4)

/* Asks for the lines of a node from byte `from` up to byte `end`. */
static inline void prefetchBytes(const void *node, size_t from, size_t end) {
    for (size_t off = from; off < end; off += 64) __builtin_prefetch((const char *)node + off);
}

/* Asks for a leaf's first LEAF_AHEAD bytes at once: what a scan of it reads
 * first, before its header says how far its entries reach. */
static inline void prefetchLeafHead(const void *leaf) {
    prefetchBytes(leaf, 0, LEAF_AHEAD);
}

/* A tree of up to ZBT_INDEX_ON entries has no member index: a lookup
 * reads its few leaves from the head, as a listpack of upstream's default
 * size (zset-max-listpack-entries 128) is read, and the index's slots
 * (about 9 bytes an entry, and a segment's header) are saved. Such trees
 * are those a listpack could not hold: members over
 * zset-max-listpack-value, or with times (t_member_ttl.c). The index is
 * built in one pass when the tree grows past ZBT_INDEX_ON or takes an
 * out-of-line member (oolCopy), and given back when deletes bring it below
 * ZBT_INDEX_OFF with none left. */
#define ZBT_INDEX_ON 128
#define ZBT_INDEX_OFF 64

/* A leaf below 40% after a delete is merged or evened out with a
 * neighbour; 40% rather than 50% so that a leaf just split in two does not
 * merge back at its next delete. */
#define ZBT_LEAF_MIN_FILL (LEAF_PAYLOAD * 2 / 5)

/* Two neighbours share their entries, rather than split, while both fit in
 * 90% of two leaves: the rest is room for the next inserts. */
#define ZBT_SHARE_FILL_PCT 90

/* In an arena (below), where a leaf takes ZBT_LEAF_BYTES however full, two
 * neighbours share up to 98%: leaves come out fuller, for a few more moves
 * per insert. */
#define ZBT_ARENA_SHARE_FILL_PCT 98

/* Fields are ordered by size, so that the struct takes a 160-byte
 * allocation: a set just past its listpack pays for every byte of it. */
struct zbt {
    void *root;
    unsigned long length;
    zbtLeaf *head, *tail;
    zbtLeaf **leaves; /* By id; a free id holds (next free id << 1) | 1. */
    size_t bytes;     /* Allocated bytes but the index's. */
    zmi *index;
    /* Bulk appends: the end leaf whose count and minimum are not yet
     * carried up, and where the tail's last entry is (offset, and the score
     * before it), valid while lastVersion == version. */
    zbtLeaf *pendingLeaf;
    uint32_t pendingCount; /* At most a leaf's entries. */
    uint32_t nfree;        /* Free ids below nids. */
    uint64_t version, lastVersion;
    double lastPrev;
    /* The entry last found or positioned on, valid while foundVersion ==
     * version: a write usually follows a read of the same member (ZINCRBY,
     * ZADD of an existing member, ZPOPMIN), and takes it from here rather
     * than probing the index and scanning the leaf again. The member is
     * compared before the entry is used. */
    uint64_t foundVersion, foundHash;
    zbtLeaf *foundLeaf;
    double foundPrev;
    uint32_t nids, idcap, freeid;
    uint16_t lastOff;
    uint16_t foundIdx, foundOff, foundPrevOff;
    int8_t appendDir;
    uint8_t height; /* 0 when the root is a leaf. */
    uint8_t foundHashed;
    uint8_t mark;           /* The server's (zbtMark): carried, never read. */
    struct zbtTimes *times; /* NULL until an entry first has a time. */
};

_Static_assert(sizeof(struct zbt) <= 160, "a tree's struct outgrew its allocation class");

/* --- Entries --- */

#define SC_SAME 0
#define SC_D8 1
#define SC_D16 2
#define SC_D32 3
#define SC_RAW 4
#define SC_X16 5
#define SC_X32 6
#define SC_X48 7

#define LEN_BYTE 30
#define LEN_OOL 31

/* A timed entry: the top bit of its length (the byte of a LEN_BYTE entry,
 * which a short member takes too then; the eight bytes of an out-of-line
 * one), and its time after the rest of the entry, short or long. */
#define LEN_TIMED 0x80
#define OOL_TIMED (UINT64_C(1) << 63)
#define TIME_SHORT_BYTES 4
#define TIME_LONG_BYTES 7
#define TIME_SHORT_SPAN (UINT64_C(1) << (8 * TIME_SHORT_BYTES - 1))
_Static_assert(ZBT_MAX_INLINE < LEN_TIMED, "an inline length reaches the time flag");
_Static_assert((ZBT_TIME_MAX - 1) << 1 >> (8 * TIME_LONG_BYTES) == 0, "a time outgrew its long form");

/* An entry's header byte: the score code in bits 7..5, the length code in
 * bits 4..0. */
#define HDR_SCORE_SHIFT 5
#define HDR_LEN_MASK 0x1f
_Static_assert(SC_X48 << HDR_SCORE_SHIFT <= 0xff, "a score code outgrew the header's top bits");
_Static_assert(LEN_OOL == HDR_LEN_MASK, "the length codes fill the header's low bits");

static inline int hdrScoreCode(uint8_t hdr) { return hdr >> HDR_SCORE_SHIFT; }
static inline int hdrLenCode(uint8_t hdr) { return hdr & HDR_LEN_MASK; }
static inline uint8_t makeHdr(int sc, unsigned lc) { return (uint8_t)(sc << HDR_SCORE_SHIFT | lc); }
/* An out-of-line member's length takes eight bytes: members of 4 GiB and
 * more are stored whole, as upstream's skiplist stores them. */
#define OOL_LEN_BYTES 8

/* One entry, decoded, or one to be encoded. Member bytes are inline in some
 * buffer, or out of line in `ool` (then m == ool). */
typedef struct item {
    double score;
    const unsigned char *m;
    size_t len;
    unsigned char *ool;
    uint32_t from; /* Leaf id it was in; 0 for a new entry. */
    uint16_t size; /* Encoded size, when decoded. */
    uint16_t off;  /* Where it was in that leaf (leafItems). */
    uint64_t when; /* Its time, 0 for none. */
} item;

_Static_assert(sizeof(item) == 48, "an item outgrew its 48 bytes: splits keep two leaves' on the stack");

static uint8_t hash_seed[16];

void zbtSetHashSeed(const uint8_t seed[16]) { memcpy(hash_seed, seed, sizeof(hash_seed)); }

static inline uint64_t memberHash(const unsigned char *m, size_t len) { return siphash(m, len, hash_seed); }

static inline int sameBits(double a, double b) { return memcmp(&a, &b, sizeof(double)) == 0; }

static inline uint64_t bitsOf(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof(u));
    return u;
}

static inline double fromBits(uint64_t u) {
    double d;
    memcpy(&d, &u, sizeof(d));
    return d;
}

/* How `score` is stored after `prev`, and the delta (or XOR) if any. */
static int scoreCode(double prev, double score, uint64_t *delta) {
    if (sameBits(prev, score)) return SC_SAME;
    /* Any whole difference will do, as long as adding it back gives the
     * very bits of the score. */
    double diff = score - prev;
    if (diff >= 1.0 && diff <= (double)UINT32_MAX) {
        uint32_t d = (uint32_t)diff;
        if ((double)d == diff && sameBits(prev + (double)d, score)) {
            *delta = d;
            if (d <= UINT8_MAX) return SC_D8;
            if (d <= UINT16_MAX) return SC_D16;
            /* X16 may be as short; D32 is not beaten by X32 */
            if ((bitsOf(score) ^ bitsOf(prev)) >> 16 != 0) return SC_D32;
        }
    }
    uint64_t x = bitsOf(score) ^ bitsOf(prev);
    *delta = x;
    if (x >> 16 == 0) return SC_X16;
    if (x >> 32 == 0) return SC_X32;
    if (x >> 48 == 0) return SC_X48;
    return SC_RAW;
}

static const uint8_t scoreBytes[] = {0, 1, 2, 4, 8, 2, 4, 6};

static inline uint64_t timeBase(const zbt *t);

/* The bytes of a time's form: 0 for none. */
static inline size_t timeBytesFor(uint64_t base, uint64_t when) {
    if (!when) return 0;
    return when >= base && when - base < TIME_SHORT_SPAN ? TIME_SHORT_BYTES : TIME_LONG_BYTES;
}

/* The bytes of the time whose first byte is `first`. */
static inline size_t timeFormBytes(uint8_t first) { return first & 1 ? TIME_LONG_BYTES : TIME_SHORT_BYTES; }

static size_t encodedSize(double prev, double score, size_t len, int ool, size_t timeBytes) {
    uint64_t d;
    size_t size = 1 + scoreBytes[scoreCode(prev, score, &d)] + timeBytes;
    if (ool) return size + OOL_LEN_BYTES + sizeof(void *);
    return size + (len >= LEN_BYTE || timeBytes) + len;
}

static inline size_t itemSize(const zbt *t, double prev, const item *it) {
    return encodedSize(prev, it->score, it->len, it->ool != NULL, timeBytesFor(timeBase(t), it->when));
}

/* The low n bytes of v, little-endian. */
static inline void putLow(unsigned char *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* The n bytes at p, little-endian. */
static inline uint64_t getLow(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static size_t putTime(unsigned char *p, uint64_t base, uint64_t when) {
    size_t bytes = timeBytesFor(base, when);
    if (bytes == TIME_SHORT_BYTES) putLow(p, (when - base) << 1, TIME_SHORT_BYTES);
    else putLow(p, (when - 1) << 1 | 1, TIME_LONG_BYTES);
    return bytes;
}

static inline uint64_t getTime(const unsigned char *p, size_t bytes, uint64_t base) {
    uint64_t v = getLow(p, (int)bytes);
    return bytes == TIME_SHORT_BYTES ? base + (v >> 1) : (v >> 1) + 1;
}

static size_t encode(const zbt *t, unsigned char *p, double prev, const item *it) {
    uint64_t d = 0;
    int sc = scoreCode(prev, it->score, &d);
    unsigned char *start = p++;
    if (sc == SC_RAW) memcpy(p, &it->score, 8);
    else putLow(p, d, scoreBytes[sc]);
    p += scoreBytes[sc];
    if (it->ool) {
        *start = makeHdr(sc, LEN_OOL);
        uint64_t len = it->len | (it->when ? OOL_TIMED : 0);
        memcpy(p, &len, OOL_LEN_BYTES);
        memcpy(p + OOL_LEN_BYTES, &it->ool, sizeof(void *));
        p += OOL_LEN_BYTES + sizeof(void *);
    } else if (it->len >= LEN_BYTE || it->when) {
        *start = makeHdr(sc, LEN_BYTE);
        *p++ = (uint8_t)(it->len | (it->when ? LEN_TIMED : 0));
        memcpy(p, it->m, it->len);
        p += it->len;
    } else {
        *start = makeHdr(sc, (unsigned)it->len);
        memcpy(p, it->m, it->len);
        p += it->len;
    }
    if (it->when) p += putTime(p, timeBase(t), it->when);
    return (size_t)(p - start);
}

/* Stored score bytes, by score code: how far to shift the eight bytes that
 * end with them, and a mask over what is left. */
static const uint8_t scoreShift[] = {63, 56, 48, 32, 0, 48, 32, 16};
static const uint64_t scoreMask[] = {0, 0xff, 0xffff, 0xffffffff, UINT64_MAX, 0xffff, 0xffffffff, 0xffffffffffff};

/* The score of the entry at q, whose score code is sc, after `prev`.
 *
 * Without a branch on the code: random scores mix the codes from one entry
 * to the next, and a mispredicted jump per entry cost more than a scan's
 * compares. It loads the eight bytes that end with the stored ones, which
 * for the first entry of a leaf reach back into the leaf's header: entries
 * are only ever decoded in place. */
static inline double entryScore(const unsigned char *q, int sc, double prev) {
    uint64_t v;
    memcpy(&v, q + scoreBytes[sc] - 7, sizeof(v));
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    v = (v >> scoreShift[sc]) & scoreMask[sc];
    /* A delta has at most 32 bits, so the signed conversion is exact; for
     * the other codes the sum is not used. */
    uint64_t sum = bitsOf(prev + (double)(int64_t)(v & 0xffffffff));
    uint64_t xored = (sc == SC_RAW ? 0 : bitsOf(prev)) ^ v;
    uint64_t isDelta = -(uint64_t)((unsigned)(sc - SC_D8) <= SC_D32 - SC_D8);
    return fromBits((sum & isDelta) | (xored & ~isDelta));
}

/* The bytes before an entry's member (its header byte and the stored
 * score: 1 + scoreBytes[code]) as the nibbles of one constant, nibble i for
 * score code i. Scans take an entry's size from its header byte with shifts
 * instead of a table load: each entry's size is on the chain of dependent
 * steps from one entry to the next, and a load is the slowest step there
 * (ZSCORE scans about 17 entries a lookup, an insert at the end of a leaf
 * all of them). */
#define HEAD_BYTES_NIBBLES 0x75395321u

static inline size_t headBytesOf(uint8_t hdr) { return (HEAD_BYTES_NIBBLES >> (hdrScoreCode(hdr) * 4)) & 15; }

/* The member of the entry at q, and the bytes of its time (0 for none;
 * they end the entry). Returns the entry's size. An entry without a time
 * takes the same instructions as before times were: the flag is read with
 * the length. */
static inline size_t peekEntry(const unsigned char *q, const unsigned char **m, size_t *len, size_t *timeBytes) {
    uint8_t hdr = q[0], lc = (uint8_t)hdrLenCode(hdr);
    const unsigned char *p = q + headBytesOf(hdr);
    if (lc == LEN_OOL) {
        uint64_t l64;
        memcpy(&l64, p, OOL_LEN_BYTES);
        memcpy((void *)m, p + OOL_LEN_BYTES, sizeof(void *));
        *len = (size_t)(l64 & ~OOL_TIMED);
        p += OOL_LEN_BYTES + sizeof(void *);
        *timeBytes = l64 & OOL_TIMED ? timeFormBytes(*p) : 0;
        return (size_t)(p - q) + *timeBytes;
    }
    *timeBytes = 0;
    if (lc == LEN_BYTE) {
        uint8_t b = *p++;
        lc = b & (LEN_TIMED - 1);
        if (b & LEN_TIMED) *timeBytes = timeFormBytes(p[lc]);
    }
    *len = lc;
    *m = p;
    return (size_t)(p + lc - q) + *timeBytes;
}

/* The member of the entry at q. Returns the entry's size. */
static inline size_t peekMember(const unsigned char *q, const unsigned char **m, size_t *len) {
    size_t timeBytes;
    return peekEntry(q, m, len, &timeBytes);
}

static void decode(const zbt *t, const unsigned char *p, double prev, item *it) {
    size_t len, timeBytes;
    it->score = entryScore(p, hdrScoreCode(p[0]), prev);
    it->size = (uint16_t)peekEntry(p, &it->m, &len, &timeBytes);
    it->len = len;
    it->ool = hdrLenCode(p[0]) == LEN_OOL ? (unsigned char *)it->m : NULL;
    it->when = timeBytes ? getTime(p + it->size - timeBytes, timeBytes, timeBase(t)) : 0;
}

static inline int cmpMember(const unsigned char *a, size_t al, const unsigned char *b, size_t bl) {
    size_t min = al < bl ? al : bl;
    int c = min ? memcmp(a, b, min) : 0;
    if (c) return c;
    return al < bl ? -1 : al > bl;
}

static inline int cmpKey(double s1, const unsigned char *m1, size_t l1, double s2, const unsigned char *m2, size_t l2) {
    if (s1 < s2) return -1;
    if (s1 > s2) return 1;
    return cmpMember(m1, l1, m2, l2);
}

int zbtCompare(double s1, const unsigned char *m1, size_t l1, double s2, const unsigned char *m2, size_t l2) {
    return cmpKey(s1, m1, l1, s2, m2, l2);
}

/* --- Allocation --- */

static void leafMoved(zbt *t, zbtLeaf *old, zbtLeaf *l);

static void indexBuild(zbt *t);

/* A member's own allocation. Its tree is indexed from then on: a lookup
 * reads an out-of-line member only where its length matches, and members
 * of one length each behind a pointer would cost a miss an entry. */
static unsigned char *oolCopy(zbt *t, const unsigned char *m, size_t len) {
    if (!t->index) indexBuild(t);
    unsigned char *p = countedAlloc(&t->bytes, len ? len : 1);
    memcpy(p, m, len);
    return p;
}

/* --- Leaf arena ---
 *
 * ZSCORE's lookup is three dependent reads: the index slot, the leaf
 * table's entry for the slot's id, the leaf. Past a few hundred leaves the
 * table no longer stays in the cache and its read costs a fifth of the
 * lookup (ZSCORE at pipeline 16: 6% of the server's time). It held ZSCORE
 * at parity with the reference (0.98-1.00); with the arena it is 1.02-1.06
 * (utils/bench/side-by-side --together). A big tree
 * therefore keeps its leaves in an arena where an id is an address:
 *
 *    leaves[0] --> +--------+-----+----------+----------+-----+
 *                  | nchunk | cap | chunk[0] | chunk[1] | ... |
 *                  +--------+-----+----------+----------+-----+
 *                                      |
 *                                      v
 *                  +--------+--------+-----+---------+
 *                  | id 0   | id 1   | ... | id 63   |   ARENA_CHUNK_LEAVES
 *                  +--------+--------+-----+---------+   slots of ZBT_LEAF_BYTES
 *
 * Leaf id i is slot i % 64 of chunk i / 64, so findMember reads the chunk
 * pointer (a table 1/64th the size of the leaf table, which stays cached)
 * instead of the table. Slot 0 of the leaf table, which no leaf uses,
 * holds the arena; a tree without one has NULL there.
 *
 * The price is memory: an arena's leaves take ZBT_LEAF_BYTES whatever they
 * hold, where a leaf of its own takes the size class of its entries.
 * Leaves filled in order (W1, RDB loads) are full either way. Leaves
 * filled at random would cost 1.7 bytes a member more (1M members "m:<i>"
 * with random scores: 24.2 -> 25.9 B/member), so neighbours in an arena
 * share their entries further before they split (ZBT_ARENA_SHARE_FILL_PCT):
 * 25.2 B/member, and 47.7 rather than 44.4 for 5M random 20-byte members
 * (make test-engine-memory). Small trees, whose leaf table stays cached,
 * keep their leaves sized to their entries.
 *
 * Invariants:
 * - A tree has an arena iff it had ZBT_ARENA_ON live leaves or more since
 *   it last had fewer than ZBT_ARENA_OFF (hysteresis: no flapping).
 * - In an arena, leafAt(t, id) == arenaSlot(id) for every live id, and
 *   chunks cover exactly the ids below nids.
 * - Free ids below nids are at most live / 32 + ARENA_SLACK after every
 *   write: tend() moves the leaf with the top id into a free id and gives
 *   back the top. Moving a leaf changes its id, so its entries' index
 *   slots are re-pointed; as a delete frees at most one leaf per ~20
 *   entries, that is about one re-point per delete.
 *
 * Leaves move only between writes (tend() runs as a write returns), so no
 * position held inside a write goes stale. */

#define ARENA_CHUNK_LEAVES 64
#ifndef ZBT_ARENA_ON
#define ZBT_ARENA_ON 512
#endif
#ifndef ZBT_ARENA_OFF
#define ZBT_ARENA_OFF 128
#endif
#define ARENA_SLACK 16

typedef struct leafArena {
    uint32_t nchunks, cap;
    unsigned char *chunk[];
} leafArena;

/* The leaf table: one block, grown by reallocation, up to
 * LEAF_TABLE_BLOCK ids; past that, a directory of blocks of that many ids,
 * one more block at a time, so that no insert copies more than a block
 * (32 KiB) or the directory (8 bytes a block: 7 KiB at 100M members),
 * however big the set. (A single table was copied whole as it grew: 28 MiB
 * in one insert at 100M members.)
 *
 *    t->leaves --> [ arena | block 0 | block 1 | ... ]    a directory
 *    t->leaves --> [ arena | id 1 | id 2 | ... ]           one block
 *
 * Either way t->leaves[0] is the arena, read by every lookup in one load;
 * in a directory, slot 0 of block 0 is unused. */
#define LEAF_TABLE_BLOCK 4096

static inline zbtLeaf ***tableBlocksOf(const zbt *t) { return (zbtLeaf ***)t->leaves + 1; }

static inline zbtLeaf **leafSlot(const zbt *t, uint32_t id) {
    if (t->idcap <= LEAF_TABLE_BLOCK) return &t->leaves[id];
    return &tableBlocksOf(t)[id / LEAF_TABLE_BLOCK][id % LEAF_TABLE_BLOCK];
}

static inline zbtLeaf *leafAt(const zbt *t, uint32_t id) { return *leafSlot(t, id); }

/* Blocks behind the directory; 0 while the table is one block. */
static inline uint32_t tableBlocks(const zbt *t) {
    return t->idcap <= LEAF_TABLE_BLOCK ? 0 : t->idcap / LEAF_TABLE_BLOCK;
}

static void leafTableGrow(zbt *t) {
    if (t->idcap < LEAF_TABLE_BLOCK) {
        /* Small steps: a tree of a few leaves (a set just past its
         * listpack) pays for each id it holds, not for eight more. */
        uint32_t cap = t->idcap < 8 ? t->idcap * 2 : t->idcap + t->idcap / 2 + 2;
        if (cap > LEAF_TABLE_BLOCK) cap = LEAF_TABLE_BLOCK;
        t->leaves = countedRealloc(&t->bytes, t->leaves, sizeof(zbtLeaf *) * cap, NULL);
        t->idcap = cap;
        return;
    }
    uint32_t n = tableBlocks(t);
    zbtLeaf ***dir;
    if (n == 0) {
        dir = countedAlloc(&t->bytes, sizeof(*dir) * 4);
        dir[0] = (zbtLeaf **)t->leaves[0]; /* the arena */
        dir[1] = t->leaves;
        t->leaves[0] = NULL;
        n = 1;
    } else {
        dir = (zbtLeaf ***)t->leaves;
        if (sizeof(*dir) * (n + 2) > zmalloc_size(dir))
            dir = countedRealloc(&t->bytes, dir, sizeof(*dir) * (n + 1) * 2, NULL);
    }
    dir[1 + n] = countedAlloc(&t->bytes, sizeof(zbtLeaf *) * LEAF_TABLE_BLOCK);
    t->leaves = (zbtLeaf **)dir;
    t->idcap = (n + 1) * LEAF_TABLE_BLOCK;
}

static size_t leafTableBytes(const zbt *t) {
    size_t bytes = zmalloc_size(t->leaves);
    for (uint32_t i = 0; i < tableBlocks(t); i++) bytes += zmalloc_size(tableBlocksOf(t)[i]);
    return bytes;
}

static void leafTableFree(zbt *t) {
    for (uint32_t i = 0; i < tableBlocks(t); i++) zfree(tableBlocksOf(t)[i]);
    zfree(t->leaves);
}

static inline leafArena *arenaOf(const zbt *t) { return (leafArena *)t->leaves[0]; }

static inline void setArena(zbt *t, leafArena *a) { t->leaves[0] = (zbtLeaf *)a; }

static inline zbtLeaf *arenaSlot(const leafArena *a, uint32_t id) {
    return (zbtLeaf *)(a->chunk[id / ARENA_CHUNK_LEAVES] + (size_t)(id % ARENA_CHUNK_LEAVES) * ZBT_LEAF_BYTES);
}

/* The leaf of a live id, given the tree's arena (arenaOf, NULL for none),
 * which a caller looking up several ids reads once. */
static inline zbtLeaf *leafById(const zbt *t, const leafArena *a, uint32_t id) {
    return a ? arenaSlot(a, id) : leafAt(t, id);
}

/* Chunks that hold ids 0 .. ids - 1. */
static inline uint32_t chunksFor(uint32_t ids) { return (ids + ARENA_CHUNK_LEAVES - 1) / ARENA_CHUNK_LEAVES; }

/* Makes the arena (creating it) cover ids below `ids`. */
static leafArena *arenaReserve(zbt *t, uint32_t ids) {
    leafArena *a = arenaOf(t);
    uint32_t need = chunksFor(ids);
    if (!a || need > a->cap) {
        int fresh = !a;
        uint32_t cap = need + need / 4 + 2;
        size_t usable;
        a = countedRealloc(&t->bytes, a, sizeof(*a) + sizeof(a->chunk[0]) * cap, &usable);
        if (fresh) a->nchunks = 0;
        a->cap = (uint32_t)((usable - sizeof(*a)) / sizeof(a->chunk[0]));
        setArena(t, a);
    }
    while (a->nchunks < need) a->chunk[a->nchunks++] = countedAlloc(&t->bytes, (size_t)ARENA_CHUNK_LEAVES * ZBT_LEAF_BYTES);
    return a;
}

/* --- Times ---
 *
 * A tree whose entries have times (zbtSetTime) keeps beside it
 *
 *    times --> +----------+-------+------+-----+----------+----------+-----+
 *              | earliest | timed | base | cap | bound[0] | bound[1] | ... |
 *              +----------+-------+------+-----+----------+----------+-----+
 *                   8         8      8      8    8 a leaf id, cap of them
 *
 * bound[id] is no later than the time of any entry of leaf id, and
 * NO_TIME when it has none (or the id is free); earliest is no later than
 * any bound. Writes keep them so: a time given takes the minimum, a leaf
 * laid out again gets the exact minimum of its entries, a delete leaves
 * them as they were. zbtDue, which reads the leaves whose bound has come,
 * sets them exact again. `timed` counts the entries that have a time.
 *
 * A tree that never had a time has no such block, and its entries no time
 * bytes: it costs what it did before times were.
 *
 * base is what short times count from (see "Entries"): every short time is
 * in base .. base + 2^31 - 1, as its form says. It moves only when that
 * stays true without moving an entry:
 * - A tree holding no time takes base = t - TIME_BASE_SLACK at its next
 *   time t, so that times given a little before t are short too.
 * - zbtDue, once it has made earliest exact, takes the earlier of it and
 *   the clock it was given (new times mostly come after the clock), and
 *   when that is TIME_REBASE_AFTER or more past base, moves base up to it
 *   less TIME_BASE_SLACK: every short time is written again where it lies,
 *   smaller by the same amount, in the same four bytes (rebase). A tree
 *   whose times move on with the clock, a sliding window's, so keeps its
 *   times short, for one pass over its timed leaves every three days of
 *   that clock.
 * A long time that a new base would let be short stays long until its
 * entry is encoded again: the size of an entry in place is read from it,
 * never computed from its fields. */
#define NO_TIME UINT64_MAX

/* 2^26 ms, 18.6 hours: a time given up to that long before a tree's
 * first is short too; one up to 2^31 ms (24.8 days) less that after it. */
#define TIME_BASE_SLACK (UINT64_C(1) << 26)

/* 2^28 ms, 3.1 days: how far the clock may pass base before zbtDue moves
 * base up. Times up to 24.8 - 3.1 - 0.8 = 20.9 days ahead of the clock
 * stay short, in a tree whose members come due every few days or more
 * often. */
#define TIME_REBASE_AFTER (UINT64_C(1) << 28)

typedef struct zbtTimes {
    uint64_t earliest, timed, base;
    size_t cap;
    uint64_t bound[];
} zbtTimes;

static inline uint64_t timeBase(const zbt *t) { return t->times ? t->times->base : 0; }

/* Room for a bound per id below `ids`: grown to the leaf table's
 * capacity, new bounds NO_TIME. */
static void timesReserve(zbt *t, uint32_t ids) {
    zbtTimes *tm = t->times;
    if (tm && tm->cap >= ids) return;
    size_t cap = tm ? tm->cap : 0, want = t->idcap > ids ? t->idcap : ids, usable;
    tm = countedRealloc(&t->bytes, tm, sizeof(zbtTimes) + want * sizeof(uint64_t), &usable);
    if (!t->times) {
        tm->earliest = NO_TIME;
        tm->timed = 0;
        tm->base = 0;
    }
    tm->cap = (usable - sizeof(zbtTimes)) / sizeof(uint64_t);
    for (size_t i = cap; i < tm->cap; i++) tm->bound[i] = NO_TIME;
    t->times = tm;
}

/* Ready to encode the time `when`: the block is there, and a tree that
 * holds no time takes its base from `when`. */
static void timesFor(zbt *t, uint64_t when) {
    timesReserve(t, t->nids);
    if (t->times->timed == 0) t->times->base = when > TIME_BASE_SLACK ? when - TIME_BASE_SLACK : 0;
}

/* Moves base up to `base`, no later than any time the tree holds: each
 * short time is written again in place (see "Times"). */
static void rebase(zbt *t, uint64_t base) {
    zbtTimes *tm = t->times;
    uint64_t by = (base - tm->base) << 1;
    for (uint32_t id = 1; id < t->nids; id++) {
        if (tm->bound[id] == NO_TIME) continue;
        zbtLeaf *l = leafAt(t, id);
        size_t off = 0;
        for (int i = 0; i < l->count; i++) {
            const unsigned char *m;
            size_t len, timeBytes, size = peekEntry(l->data + off, &m, &len, &timeBytes);
            if (timeBytes == TIME_SHORT_BYTES) {
                unsigned char *p = l->data + off + size - TIME_SHORT_BYTES;
                uint64_t v = getLow(p, TIME_SHORT_BYTES);
                assert(v >= by);
                putLow(p, v - by, TIME_SHORT_BYTES);
            }
            off += size;
        }
    }
    tm->base = base;
}

/* A time now held in leaf id. */
static inline void noteTime(zbt *t, uint32_t id, uint64_t when) {
    zbtTimes *tm = t->times;
    if (when < tm->bound[id]) tm->bound[id] = when;
    if (when < tm->earliest) tm->earliest = when;
}

static inline void setBound(zbt *t, uint32_t id, uint64_t bound) {
    zbtTimes *tm = t->times;
    if (!tm) return;
    tm->bound[id] = bound;
    if (bound < tm->earliest) tm->earliest = bound;
}

/* Payload bytes a leaf has room for. */
static inline size_t leafCap(const zbtLeaf *l) {
    size_t cap = l->alloc - offsetof(zbtLeaf, data);
    return cap < LEAF_PAYLOAD ? cap : LEAF_PAYLOAD;
}

/* An id for a new leaf: a free one, or the next. Free ids at or past nids,
 * left in the list when the arena gave back its top (arenaShrink), are
 * dropped on the way: the list is emptied before nids grows again. */
static uint32_t takeId(zbt *t) {
    while (t->freeid) {
        uint32_t id = t->freeid;
        t->freeid = (uint32_t)((uintptr_t)leafAt(t, id) >> 1);
        if (id < t->nids) {
            t->nfree--;
            return id;
        }
    }
    if (t->nids == t->idcap) leafTableGrow(t);
    if (t->times) timesReserve(t, t->nids + 1);
    return t->nids++;
}

static zbtLeaf *leafNew(zbt *t, size_t payload) {
    uint32_t id = takeId(t);
    zbtLeaf *l;
    if (arenaOf(t)) {
        l = arenaSlot(arenaReserve(t, id + 1), id);
        l->alloc = ZBT_LEAF_BYTES;
    } else {
        size_t usable;
        l = countedAllocUsable(&t->bytes, offsetof(zbtLeaf, data) + (payload ? payload : 1), &usable);
        l->alloc = (uint16_t)usable;
    }
    l->id = id;
    l->parent = NULL;
    l->prev = l->next = NULL;
    l->used = l->count = 0;
    l->run = 0;
    *leafSlot(t, id) = l;
    setBound(t, id, NO_TIME);
    return l;
}

/* Gives a leaf room for `payload` bytes, or gives back what it has beyond
 * them when that is a quarter of it or more. Returns its new address. An
 * arena's leaves have all the room there is. */
static zbtLeaf *leafFit(zbt *t, zbtLeaf *l, size_t payload) {
    size_t have = l->alloc, want = offsetof(zbtLeaf, data) + (payload ? payload : 1);
    if (want <= have && (have - want) * 4 < have) return l;
    if (have == ZBT_LEAF_BYTES && arenaOf(t)) return l;
    size_t usable;
    zbtLeaf *n = zrealloc_usable(l, want, &usable);
    n->alloc = (uint16_t)usable;
    t->bytes = t->bytes - have + usable;
    if (n != l) leafMoved(t, l, n);
    return n;
}

/* Frees a leaf's id; its bytes go back to the allocator, or stay in the
 * arena until tend() gives back the arena's top. */
static void leafDrop(zbt *t, zbtLeaf *l) {
    setBound(t, l->id, NO_TIME);
    *leafSlot(t, l->id) = (zbtLeaf *)(((uintptr_t)t->freeid << 1) | 1);
    t->freeid = l->id;
    t->nfree++;
    if (arenaOf(t))
        l->parent = NULL; /* a free id's slot has no parent (zbtCheck) */
    else
        countedFree(&t->bytes, l);
}

static size_t innerBytes(int cap) {
    return sizeof(zbtInner) + (size_t)cap * (sizeof(unsigned long) + sizeof(double) + sizeof(void *));
}

/* A node for at least cap children: as many as its allocation holds, up
 * to the fanout. */
static zbtInner *innerNew(zbt *t, uint8_t level, int cap) {
    size_t usable;
    zbtInner *in = countedAllocUsable(&t->bytes, innerBytes(cap), &usable);
    size_t fits = (usable - sizeof(zbtInner)) / (sizeof(unsigned long) + sizeof(double) + sizeof(void *));
    if (fits > (size_t)cap) cap = fits < ZBT_INNER_FANOUT ? (int)fits : (int)ZBT_INNER_FANOUT;
    in->parent = NULL;
    in->n = 0;
    in->cap = (uint16_t)cap;
    in->level = level;
    return in;
}

/* --- Navigation --- */

static inline zbtInner *parentOf(const void *node, int isLeaf) {
    return isLeaf ? ((const zbtLeaf *)node)->parent : ((const zbtInner *)node)->parent;
}

static inline void setParent(void *node, int isLeaf, zbtInner *p) {
    if (isLeaf)
        ((zbtLeaf *)node)->parent = p;
    else
        ((zbtInner *)node)->parent = p;
}

/* From the end, where appends go, but the first child first: that is where
 * queues pop. */
static int childPos(const zbtInner *p, const void *child) {
    if (kids(p)[0] == child) return 0;
    for (int i = p->n - 1; i > 0; i--)
        if (kids(p)[i] == child) return i;
    assert(0);
    return -1;
}

static zbtLeaf *leftmostLeaf(void *node, int level) {
    while (level-- > 0) node = kids(((zbtInner *)node))[0];
    return node;
}

static double leafFirstScore(const zbtLeaf *l) { return entryScore(l->data, hdrScoreCode(l->data[0]), 0.0); }

/* Where an inner node is among its parent's children: where a write found
 * it last, as most stay put for thousands of writes, or else searched for. */
static int innerPos(const zbtInner *p, zbtInner *node) {
    int at = node->at;
    if (at < p->n && kids(p)[at] == node) return at;
    at = childPos(p, node);
    node->at = (uint16_t)at;
    return at;
}

/* Adds delta to the counts of every ancestor of the leaf. */
static void addCount(zbtLeaf *l, long delta) {
    zbtInner *node = l->parent, *p;
    if (!node) return;
    cnt(node)[childPos(node, l)] += delta;
    for (; (p = node->parent); node = p) cnt(p)[innerPos(p, node)] += delta;
}

/* After the first entry below node changed: carries its score up as far as
 * the node is a first child. */
static void fixMin(void *node, int isLeaf) {
    if (isLeaf && ((zbtLeaf *)node)->count == 0) return;
    double min = isLeaf ? leafFirstScore(node) : mins(((zbtInner *)node))[0];
    for (zbtInner *p = parentOf(node, isLeaf); p; node = p, p = p->parent) {
        int pos = childPos(p, node);
        if (sameBits(mins(p)[pos], min)) return;
        mins(p)[pos] = min;
        if (pos) return;
    }
}

static unsigned long leafRank(const zbtLeaf *l) {
    unsigned long rank = 0;
    const void *node = l;
    for (const zbtInner *p = l->parent; p; node = p, p = p->parent)
        for (int i = 0; kids(p)[i] != node; i++) rank += cnt(p)[i];
    return rank;
}

/* Points everything that refers to a leaf at its new address. */
static void leafMoved(zbt *t, zbtLeaf *old, zbtLeaf *l) {
    *leafSlot(t, l->id) = l;
    if (l->prev) l->prev->next = l;
    else t->head = l;
    if (l->next) l->next->prev = l;
    else t->tail = l;
    if (l->parent) kids(l->parent)[childPos(l->parent, old)] = l;
    else t->root = l;
    if (t->pendingLeaf == old) t->pendingLeaf = l;
    if (t->foundLeaf == old) t->foundLeaf = l;
}

/* --- Arena upkeep, between writes --- */

/* Copies a leaf (header and entries) to `to`, which has `alloc` bytes, and
 * points everything that refers to it there. */
static void leafCopy(zbt *t, zbtLeaf *l, zbtLeaf *to, uint16_t alloc) {
    memcpy(to, l, offsetof(zbtLeaf, data) + l->used);
    to->alloc = alloc;
    leafMoved(t, l, to);
}

/* Frees the arena's chunks past the first `keep`. */
static void arenaTrim(zbt *t, leafArena *a, uint32_t keep) {
    while (a->nchunks > keep) countedFree(&t->bytes, a->chunk[--a->nchunks]);
}

/* Moves every leaf into a new arena, keeping its id. */
static void arenaOn(zbt *t) {
    leafArena *a = arenaReserve(t, t->nids);
    for (uint32_t id = 1; id < t->nids; id++) {
        zbtLeaf *l = leafAt(t, id);
        if ((uintptr_t)l & 1) {
            arenaSlot(a, id)->parent = NULL; /* see leafDrop */
            continue;
        }
        leafCopy(t, l, arenaSlot(a, id), ZBT_LEAF_BYTES);
        countedFree(&t->bytes, l);
    }
}

/* Gives every leaf an allocation of its own again and frees the arena. */
static void arenaOff(zbt *t) {
    leafArena *a = arenaOf(t);
    for (uint32_t id = 1; id < t->nids; id++) {
        zbtLeaf *l = leafAt(t, id);
        if ((uintptr_t)l & 1) continue;
        size_t usable;
        zbtLeaf *own = countedAllocUsable(&t->bytes, offsetof(zbtLeaf, data) + (l->used ? l->used : 1), &usable);
        leafCopy(t, l, own, (uint16_t)usable);
    }
    arenaTrim(t, a, 0);
    setArena(t, NULL);
    countedFree(&t->bytes, a);
}

/* An entry's slot, in a tree that has an index. */
static inline void indexInsert(zbt *t, uint64_t h, uint32_t id) {
    if (t->index) zmiInsert(t->index, h, id);
}

static inline void indexRemove(zbt *t, uint64_t h, uint32_t id) {
    if (!t->index) return;
    int ok = zmiRemove(t->index, h, id);
    assert(ok);
}

/* Points the index slots of a leaf's entries, which were under id `from`,
 * at the leaf's id. */
static void repointLeaf(zbt *t, const zbtLeaf *l, uint32_t from) {
    if (!t->index) return;
    uint64_t hash[ZBT_LEAF_MAX_ENTRIES];
    size_t off = 0;
    double prev = 0.0;
    for (int i = 0; i < l->count; i++) {
        item it;
        decode(t, l->data + off, prev, &it);
        hash[i] = memberHash(it.m, it.len);
        zmiPrefetch(t->index, hash[i]);
        prev = it.score;
        off += it.size;
    }
    for (int i = 0; i < l->count; i++) {
        int ok = zmiRepoint(t->index, hash[i], from, l->id);
        assert(ok);
    }
}

/* More free ids than a tree keeps: 1/32 of its leaves, and some. */
static inline int idsToGiveBack(const zbt *t) {
    uint32_t live = t->nids - 1 - t->nfree;
    return t->nfree > live / 32 + ARENA_SLACK;
}

/* Takes the top id out: a free one is just dropped (NULL); a live leaf is
 * returned with the free id below it is to take, *id, and its old slot
 * emptied. */
static zbtLeaf *dropTopId(zbt *t, uint32_t *id) {
    uint32_t top = t->nids - 1;
    zbtLeaf *l = leafAt(t, top);
    t->nids--; /* takeId hands out ids below it; a free top stays listed past it */
    if ((uintptr_t)l & 1) {
        t->nfree--;
        return NULL;
    }
    *id = takeId(t);
    *leafSlot(t, top) = NULL;
    return l;
}

/* An arena's top id: its leaf moves into the slot of a free id below. */
static void arenaShrink(zbt *t) {
    uint32_t top = t->nids - 1, id;
    zbtLeaf *l = dropTopId(t, &id);
    if (!l) return;
    zbtLeaf *slot = arenaSlot(arenaOf(t), id);
    leafCopy(t, l, slot, ZBT_LEAF_BYTES);
    slot->id = id;
    *leafSlot(t, id) = slot;
    if (t->times) {
        t->times->bound[id] = t->times->bound[top];
        t->times->bound[top] = NO_TIME;
    }
    repointLeaf(t, slot, top);
}

static void tendSlow(zbt *t) {
    leafArena *a = arenaOf(t);
    uint32_t live = t->nids - 1 - t->nfree;
    if (!a) {
        arenaOn(t);
        return;
    }
    if (live < ZBT_ARENA_OFF) {
        arenaOff(t);
        return;
    }
    while (idsToGiveBack(t)) arenaShrink(t);
    arenaTrim(t, a, chunksFor(t->nids));
}

/* Set while a fork child shares the server's pages: a read then writes
 * nothing to a tree (a write to its struct would copy that page for every
 * tree read, where upstream's reads copy nothing). */
static int pagesShared;

/* Run as a write returns: takes a tree into its arena, or out, and keeps
 * the arena's free ids few. */
static inline void tend(zbt *t) {
    uint32_t live = t->nids - 1 - t->nfree;
    if (arenaOf(t) ? live < ZBT_ARENA_OFF || idsToGiveBack(t) : live >= ZBT_ARENA_ON) tendSlow(t);
    if (!t->index && t->length > ZBT_INDEX_ON) indexBuild(t);
}

/* Does the tree hold an out-of-line member? */
static int anyOol(const zbt *t) {
    for (zbtLeaf *l = t->head; l; l = l->next) {
        size_t off = 0;
        for (int i = 0; i < l->count; i++) {
            const unsigned char *m;
            size_t len;
            if (hdrLenCode(l->data[off]) == LEN_OOL) return 1;
            off += peekMember(l->data + off, &m, &len);
        }
    }
    return 0;
}

/* After deletes: a tree fallen below ZBT_INDEX_OFF, with no out-of-line
 * member, gives its index back. */
static inline void tendShrunk(zbt *t) {
    tend(t);
    if (t->index && t->length < ZBT_INDEX_OFF && !anyOol(t)) {
        zmiFree(t->index);
        t->index = NULL;
    }
}

/* --- Structure: adding and removing children --- */

static void innerPut(zbt *t, zbtInner *p, int pos, void *child, unsigned long count, double min);

/* A new root starts small (a set just past its listpack has a handful of
 * leaves) and grows to the full fanout before it ever splits. */
#define ZBT_ROOT_CAP 2

/* Starts a new root over two nodes of the old root's level. */
static void newRoot(zbt *t, void *a, void *b, unsigned long ca, unsigned long cb, double ma, double mb) {
    zbtInner *r = innerNew(t, t->height + 1, ZBT_ROOT_CAP);
    int isLeaf = t->height == 0;
    r->n = 2;
    kids(r)[0] = a;
    kids(r)[1] = b;
    cnt(r)[0] = ca;
    cnt(r)[1] = cb;
    mins(r)[0] = ma;
    mins(r)[1] = mb;
    setParent(a, isLeaf, r);
    setParent(b, isLeaf, r);
    t->root = r;
    t->height++;
}

static unsigned long sumCounts(const zbtInner *in) {
    unsigned long sum = 0;
    for (int i = 0; i < in->n; i++) sum += cnt(in)[i];
    return sum;
}

/* Moves a node below the full fanout to a larger allocation. */
static zbtInner *innerGrow(zbt *t, zbtInner *p) {
    int cap = p->cap + 1; /* innerNew rounds up to the allocation's size class */
    zbtInner *g = innerNew(t, p->level, cap);
    g->parent = p->parent;
    g->n = p->n;
    memcpy(kids(g), kids(p), p->n * sizeof(void *));
    memcpy(cnt(g), cnt(p), p->n * sizeof(unsigned long));
    memcpy(mins(g), mins(p), p->n * sizeof(double));
    for (int i = 0; i < g->n; i++) setParent(kids(g)[i], g->level == 1, g);
    if (g->parent) kids(g->parent)[childPos(g->parent, p)] = g;
    else t->root = g;
    countedFree(&t->bytes, p);
    return g;
}

/* Is node the last (or, first) child of every ancestor: on the tree's right
 * (left) edge, where sequential inserts arrive? */
static int onEdge(const zbtInner *node, int right) {
    for (const zbtInner *p = node->parent; p; node = p, p = p->parent)
        if (kids(p)[right ? p->n - 1 : 0] != node) return 0;
    return 1;
}

/* Puts a child at pos of p. The ancestors of p already count its entries;
 * p gains them. A full p splits in two and passes its right half up. */
static void innerPut(zbt *t, zbtInner *p, int pos, void *child, unsigned long count, double min) {
    int isLeaf = p->level == 1;
    if (p->n == p->cap && p->cap < ZBT_INNER_FANOUT) p = innerGrow(t, p);
    if (p->n < p->cap) {
        int tail = p->n - pos;
        memmove(kids(p) + pos + 1, kids(p) + pos, tail * sizeof(void *));
        memmove(cnt(p) + pos + 1, cnt(p) + pos, tail * sizeof(unsigned long));
        memmove(mins(p) + pos + 1, mins(p) + pos, tail * sizeof(double));
        kids(p)[pos] = child;
        cnt(p)[pos] = count;
        mins(p)[pos] = min;
        p->n++;
        setParent(child, isLeaf, p);
        if (pos == 0) fixMin(p, 0);
        return;
    }

    /* Split: the F+1 children, half and half; but a child added at the
     * tree's edge starts a node of its own, so that sequential inserts
     * leave full nodes behind them. */
    const int total = ZBT_INNER_FANOUT + 1;
    int keep = total / 2;
    if (pos == p->n && onEdge(p, 1)) keep = total - 1;
    else if (pos == 0 && onEdge(p, 0)) keep = 1;
    void *ch[ZBT_INNER_FANOUT + 1];
    unsigned long co[ZBT_INNER_FANOUT + 1];
    double mi[ZBT_INNER_FANOUT + 1];
    for (int i = 0, j = 0; i < total; i++) {
        if (i == pos) {
            ch[i] = child;
            co[i] = count;
            mi[i] = min;
        } else {
            ch[i] = kids(p)[j];
            co[i] = cnt(p)[j];
            mi[i] = mins(p)[j];
            j++;
        }
    }
    zbtInner *q = innerNew(t, p->level, ZBT_INNER_FANOUT);
    p->n = keep;
    q->n = total - keep;
    memcpy(kids(p), ch, keep * sizeof(void *));
    memcpy(cnt(p), co, keep * sizeof(unsigned long));
    memcpy(mins(p), mi, keep * sizeof(double));
    memcpy(kids(q), ch + keep, q->n * sizeof(void *));
    memcpy(cnt(q), co + keep, q->n * sizeof(unsigned long));
    memcpy(mins(q), mi + keep, q->n * sizeof(double));
    for (int i = 0; i < p->n; i++) setParent(kids(p)[i], isLeaf, p);
    for (int i = 0; i < q->n; i++) setParent(kids(q)[i], isLeaf, q);
    unsigned long qcount = sumCounts(q);
    if (!p->parent) {
        newRoot(t, p, q, sumCounts(p), qcount, mins(p)[0], mins(q)[0]);
    } else {
        zbtInner *gp = p->parent;
        int pp = childPos(gp, p);
        cnt(gp)[pp] -= qcount;
        innerPut(t, gp, pp + 1, q, qcount, mins(q)[0]);
    }
    if (pos == 0) fixMin(p, 0);
}

/* Links a new leaf r holding entries beside leaf x (after it, or before). */
static void leafAttach(zbt *t, zbtLeaf *x, zbtLeaf *r, int after) {
    if (after) {
        r->prev = x;
        r->next = x->next;
        if (x->next) x->next->prev = r;
        else t->tail = r;
        x->next = r;
    } else {
        r->next = x;
        r->prev = x->prev;
        if (x->prev) x->prev->next = r;
        else t->head = r;
        x->prev = r;
    }
    double rmin = leafFirstScore(r);
    if (!x->parent) {
        double xmin = x->count ? leafFirstScore(x) : 0.0;
        if (after) newRoot(t, x, r, x->count, r->count, xmin, rmin);
        else newRoot(t, r, x, r->count, x->count, rmin, xmin);
        return;
    }
    addCount(x, r->count);
    zbtInner *p = x->parent;
    int pos = childPos(p, x);
    cnt(p)[pos] -= r->count;
    innerPut(t, p, after ? pos + 1 : pos, r, r->count, rmin);
}

static void innerRebalance(zbt *t, zbtInner *p);

/* Removes child pos of p; its entries must already be counted out. */
static void innerRemove(zbt *t, zbtInner *p, int pos) {
    int tail = p->n - pos - 1;
    memmove(kids(p) + pos, kids(p) + pos + 1, tail * sizeof(void *));
    memmove(cnt(p) + pos, cnt(p) + pos + 1, tail * sizeof(unsigned long));
    memmove(mins(p) + pos, mins(p) + pos + 1, tail * sizeof(double));
    p->n--;
    if (p->n == 0) {
        /* A node on the tree's edge can hold a single child: it goes too. */
        assert(p->parent);
        zbtInner *gp = p->parent;
        int pp = childPos(gp, p);
        countedFree(&t->bytes, p);
        innerRemove(t, gp, pp);
        return;
    }
    if (pos == 0) fixMin(p, 0);
    innerRebalance(t, p);
}

/* Moves children [from, from+k) of a to position `at` of b (siblings under
 * one parent), moving their counts in the parent too. */
static void innerMove(zbtInner *a, int from, int k, zbtInner *b, int at) {
    int isLeaf = a->level == 1;
    unsigned long moved = 0;
    memmove(kids(b) + at + k, kids(b) + at, (b->n - at) * sizeof(void *));
    memmove(cnt(b) + at + k, cnt(b) + at, (b->n - at) * sizeof(unsigned long));
    memmove(mins(b) + at + k, mins(b) + at, (b->n - at) * sizeof(double));
    memcpy(kids(b) + at, kids(a) + from, k * sizeof(void *));
    memcpy(cnt(b) + at, cnt(a) + from, k * sizeof(unsigned long));
    memcpy(mins(b) + at, mins(a) + from, k * sizeof(double));
    b->n += k;
    for (int i = 0; i < k; i++) {
        setParent(kids(b)[at + i], isLeaf, b);
        moved += cnt(b)[at + i];
    }
    int tail = a->n - from - k;
    memmove(kids(a) + from, kids(a) + from + k, tail * sizeof(void *));
    memmove(cnt(a) + from, cnt(a) + from + k, tail * sizeof(unsigned long));
    memmove(mins(a) + from, mins(a) + from + k, tail * sizeof(double));
    a->n -= k;
    zbtInner *gp = a->parent;
    cnt(gp)[childPos(gp, a)] -= moved;
    cnt(gp)[childPos(gp, b)] += moved;
}

/* Keeps the root at two or more children and other inner nodes at
 * ZBT_INNER_MIN or more, by merging with or borrowing from a sibling. */
static void innerRebalance(zbt *t, zbtInner *p) {
    if (!p->parent) {
        while (t->height > 0 && ((zbtInner *)t->root)->n == 1) {
            zbtInner *r = t->root;
            t->root = kids(r)[0];
            t->height--;
            setParent(t->root, t->height == 0, NULL);
            countedFree(&t->bytes, r);
        }
        return;
    }
    if (p->n >= ZBT_INNER_MIN || p->parent->n < 2) return; /* a lone child on an edge */
    zbtInner *gp = p->parent;
    int pos = childPos(gp, p);
    zbtInner *left, *right;
    if (pos + 1 < gp->n) {
        left = p;
        right = kids(gp)[pos + 1];
    } else {
        left = kids(gp)[pos - 1];
        right = p;
    }
    if (left->n + right->n <= (int)ZBT_INNER_FANOUT) {
        innerMove(right, 0, right->n, left, left->n);
        innerRemove(t, gp, childPos(gp, right));
        countedFree(&t->bytes, right);
        return;
    }
    int half = (left->n + right->n) / 2;
    if (left->n < half) {
        innerMove(right, 0, half - left->n, left, left->n);
    } else {
        innerMove(left, half, left->n - half, right, 0);
    }
    mins(gp)[childPos(gp, right)] = mins(right)[0];
}

/* Unlinks and frees an empty leaf (never the last one). */
static void leafRemove(zbt *t, zbtLeaf *l) {
    assert(l->count == 0 && l->parent);
    if (l->prev) l->prev->next = l->next;
    else t->head = l->next;
    if (l->next) l->next->prev = l->prev;
    else t->tail = l->prev;
    zbtInner *p = l->parent;
    int pos = childPos(p, l);
    leafDrop(t, l);
    innerRemove(t, p, pos);
}

/* --- Moving entries between leaves --- */

/* Decodes the entries of a leaf into items whose inline members point into
 * buf (a copy of the payload), so the leaf can be rewritten. */
static int leafItems(const zbt *t, const zbtLeaf *l, unsigned char *buf, item *out) {
    memcpy(buf, l->data, l->used);
    double prev = 0.0;
    size_t off = 0;
    for (int i = 0; i < l->count; i++) {
        decode(t, l->data + off, prev, &out[i]);
        if (!out[i].ool) out[i].m = buf + (out[i].m - l->data);
        out[i].from = l->id;
        out[i].off = (uint16_t)off;
        prev = out[i].score;
        off += out[i].size;
    }
    return l->count;
}

/* Where to cut items over at most `m` leaves, as evenly as they fit: cut[j]
 * is the first item of leaf j, cut[used] == n. seq[i] is the size of item i
 * after item i - 1. Returns the leaves used, or -1 when they do not fit in
 * m. */
static int planLeaves(const zbt *t, const item *items, const uint16_t *seq, int n, int m, int *cut) {
    size_t remaining = 0;
    for (int i = 0; i < n; i++) remaining += seq[i];
    int start = 0, j = 0;
    for (; j < m && start < n; j++) {
        size_t target = (remaining + (m - j) - 1) / (m - j), bytes = 0, done = 0;
        int i = start;
        while (i < n) {
            size_t size = i == start ? itemSize(t, 0.0, &items[i]) : seq[i];
            if (bytes + size > LEAF_PAYLOAD) break;
            if (j < m - 1 && bytes && bytes + size / 2 > target) break;
            bytes += size;
            done += seq[i];
            i++;
        }
        cut[j] = start;
        remaining -= done < remaining ? done : remaining;
        start = i;
    }
    cut[j] = n;
    return start == n ? j : -1;
}

/* Does item i follow item i - 1 as it did in their leaf? Then its bytes
 * there are its encoding after it, to be copied rather than encoded again
 * (a split or share moves whole runs of entries): they lie where its
 * member ends, inline. */
static inline int keepsBytes(const item *items, int i) {
    const item *a = &items[i - 1], *b = &items[i];
    return b->from && b->from == a->from && a->off + a->size == b->off && !b->ool;
}

static inline const unsigned char *itemBytes(const item *it) {
    return it->m + it->len + (it->when ? timeFormBytes(it->m[it->len]) : 0) - it->size;
}

static void itemSeq(const zbt *t, const item *items, int n, uint16_t *seq) {
    for (int i = 0; i < n; i++)
        seq[i] = i && keepsBytes(items, i) ? items[i].size : (uint16_t)itemSize(t, i ? items[i - 1].score : 0.0, &items[i]);
}

/* Lays items (sorted, from the leaves src[0..nsrc), in chain order, plus
 * any new ones) out over `used` leaves, leaf j taking items [cut[j],
 * cut[j+1]): the sources in order, then new leaves after the last source.
 * Sources left empty are removed. Then fixes counts, minimums and index
 * slots. */
static void layOut(zbt *t, zbtLeaf **src, int nsrc, item *items, int n, const uint16_t *seq, const int *cut, int used) {
    zbtLeaf *tl[8];
    uint16_t oldCount[8];
    for (int j = 0; j < nsrc; j++) oldCount[j] = src[j]->count;
    for (int j = 0; j < used; j++) {
        size_t need = itemSize(t, 0.0, &items[cut[j]]);
        for (int i = cut[j] + 1; i < cut[j + 1]; i++) need += seq[i];
        zbtLeaf *l = tl[j] = j < nsrc ? (src[j] = leafFit(t, src[j], need)) : leafNew(t, need);
        l->run = 0;
        size_t off = 0;
        uint64_t bound = NO_TIME;
        for (int i = cut[j]; i < cut[j + 1]; i++) {
            if (items[i].when && items[i].when < bound) bound = items[i].when;
            if (i > cut[j] && keepsBytes(items, i)) {
                memcpy(l->data + off, itemBytes(&items[i]), items[i].size);
                off += items[i].size;
            } else {
                off += encode(t, l->data + off, i == cut[j] ? 0.0 : items[i - 1].score, &items[i]);
            }
        }
        l->used = (uint16_t)off;
        l->count = (uint16_t)(cut[j + 1] - cut[j]);
        setBound(t, l->id, bound);
    }
    for (int j = used; j < nsrc; j++) src[j]->used = src[j]->count = 0;

    for (int j = 0; j < nsrc; j++) {
        long delta = (long)src[j]->count - oldCount[j];
        if (delta) addCount(src[j], delta);
    }
    for (int j = nsrc; j < used; j++) leafAttach(t, tl[j - 1], tl[j], 1);
    for (int j = 0; j < used && j < nsrc; j++) fixMin(tl[j], 1);

    /* Index slots of the entries that changed leaf: all their slots are
     * asked for first, so that their misses overlap. */
    uint64_t hash[2 * LEAF_PAYLOAD + 1];
    uint32_t to[2 * LEAF_PAYLOAD + 1];
    int moved = 0;
    for (int j = 0; j < used && t->index; j++) {
        for (int i = cut[j]; i < cut[j + 1]; i++) {
            to[i] = tl[j]->id;
            if (items[i].from == to[i]) continue;
            hash[i] = memberHash(items[i].m, items[i].len);
            zmiPrefetch(t->index, hash[i]);
            moved++;
        }
    }
    for (int i = 0; moved && i < n; i++) {
        if (items[i].from == 0) zmiInsert(t->index, hash[i], to[i]);
        else if (items[i].from != to[i]) {
            int ok = zmiRepoint(t->index, hash[i], items[i].from, to[i]);
            assert(ok);
        }
    }
    for (int j = used; j < nsrc; j++)
        if (t->height > 0) leafRemove(t, src[j]);
}

/* layOut over as few leaves as hold the items, m or more, as evenly as
 * they fit. */
static void rewrite(zbt *t, zbtLeaf **src, int nsrc, item *items, int n, int m) {
    int cut[8], used;
    uint16_t seq[2 * LEAF_PAYLOAD + 1];
    itemSeq(t, items, n, seq);
    while ((used = planLeaves(t, items, seq, n, m, cut)) < 0) m++;
    assert(m <= 7);
    layOut(t, src, nsrc, items, n, seq, cut, used);
}

/* A leaf below the minimum fill is merged with a neighbour, or evens out
 * with it; an empty one goes. */
static void leafRebalance(zbt *t, zbtLeaf *l) {
    if (t->height == 0 || l->used >= ZBT_LEAF_MIN_FILL) return;
    if (l->count == 0) {
        leafRemove(t, l);
        return;
    }
    /* The leaves at the ends of the chain are where queues pop (ZPOPMIN,
     * ZPOPMAX): merging or evening one out would move entries, and
     * re-point their index slots, that are about to go. They are left to
     * empty instead; that is at most two leaves below the fill. */
    if (!l->prev || !l->next) return;
    zbtLeaf *src[2] = {l, l->next};
    int merge = (size_t)src[0]->used + src[1]->used + 16 <= LEAF_PAYLOAD;
    unsigned char buf[2 * LEAF_PAYLOAD];
    item items[2 * LEAF_PAYLOAD];
    int n = leafItems(t, src[0], buf, items);
    n += leafItems(t, src[1], buf + src[0]->used, items + n);
    rewrite(t, src, 2, items, n, merge ? 1 : 2);
}

/* --- Finding keys --- */

/* Does the first entry below child i of p come at or before the key? */
static int childAtOrBefore(const zbtInner *p, int i, double s, const unsigned char *m, size_t len) {
    if (mins(p)[i] < s) return 1;
    if (mins(p)[i] > s) return 0;
    const unsigned char *em;
    size_t elen;
    peekMember(leftmostLeaf(kids(p)[i], p->level - 1)->data, &em, &elen);
    return cmpMember(em, elen, m, len) <= 0;
}

/* The leaf where the key is or would go: the last whose first entry is at
 * or before the key (the head when none is). */
static inline void *descendStep(const zbtInner *p, double s, const unsigned char *m, size_t len) {
    int lo = 0, hi = p->n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (childAtOrBefore(p, mid, s, m, len)) lo = mid;
        else hi = mid - 1;
    }
    return kids(p)[lo];
}

static zbtLeaf *descendKey(const zbt *t, double s, const unsigned char *m, size_t len) {
    void *node = t->root;
    for (int level = t->height; level > 0; level--) node = descendStep(node, s, m, len);
    return node;
}

/* A position in a leaf. */
typedef struct pos {
    zbtLeaf *leaf;
    uint16_t idx, off;
    uint16_t prevOff; /* Offset of the entry before, when idx > 0. */
    double prev;      /* Score of the entry before, or 0.0. */
    item it;          /* The entry at idx, when idx < count. */
} pos;

/* The first entry of l not before the key; idx == count when none. */
static int leafSeekKey(const zbt *t, zbtLeaf *l, double s, const unsigned char *m, size_t len, pos *p) {
    p->leaf = l;
    p->prev = 0.0;
    p->off = p->prevOff = 0;
    for (p->idx = 0; p->idx < l->count; p->idx++) {
        const unsigned char *q = l->data + p->off, *em;
        double score = entryScore(q, hdrScoreCode(q[0]), p->prev);
        size_t elen, size = peekMember(q, &em, &elen);
        /* Members are compared only from the key's score on. */
        if (score >= s) {
            decode(t, q, p->prev, &p->it);
            int c = cmpKey(score, em, elen, s, m, len);
            if (c >= 0) return c == 0;
        }
        p->prev = score;
        p->prevOff = p->off;
        p->off += size;
    }
    return 0;
}

/* The last eight bytes of a member as they lie in memory, and which of
 * them are the member's: a member shorter than eight bytes takes the high
 * end and the rest is masked off (whatever precedes it in the leaf). */
typedef struct memberTail {
    uint64_t bytes, mask;
} memberTail;

static memberTail tailOf(const unsigned char *m, size_t len) {
    unsigned char b[8] = {0}, k[8] = {0};
    size_t n = len < 8 ? len : 8;
    memcpy(b + 8 - n, m + len - n, n);
    memset(k + 8 - n, 0xff, n);
    memberTail t;
    memcpy(&t.bytes, b, 8);
    memcpy(&t.mask, k, 8);
    return t;
}

/* The entry of l whose member is m, in one pass with no branch but the one
 * taken when a candidate turns up: an entry is one when its length and
 * (inline) its last eight bytes agree, read where they end the member (for
 * the first entries that reaches back into the header, masked off). Only a
 * candidate's bytes are compared. Branching on the length first cost a
 * mispredicted jump per entry when members of a few lengths mix (ZSCORE of
 * 20,000 members "m:0".."m:19999": a quarter of the lookup). The scores are
 * carried along: they are deltas. */

static int leafFindMember(const zbt *t, zbtLeaf *l, const unsigned char *m, size_t len, memberTail tail, pos *p) {
    const unsigned char *q = l->data, *prevq = q;
    double prev = 0.0;
    for (int idx = 0, count = l->count; idx < count; idx++) {
        const unsigned char *em;
        size_t elen, size = peekMember(q, &em, &elen);
        int ool = hdrLenCode(q[0]) == LEN_OOL;
        /* An inline member ends where its time starts, or the entry; an
         * out-of-line one is not read here. */
        uint64_t last;
        memcpy(&last, ool ? q : em + elen - 8, 8);
        if ((elen == len) & (ool | (((last ^ tail.bytes) & tail.mask) == 0)) && memcmp(em, m, len) == 0) {
            p->leaf = l;
            p->idx = (uint16_t)idx;
            p->off = (uint16_t)(q - l->data);
            p->prevOff = (uint16_t)(prevq - l->data);
            p->prev = prev;
            decode(t, q, prev, &p->it);
            return 1;
        }
        prev = entryScore(q, hdrScoreCode(q[0]), prev);
        prevq = q;
        q += size;
    }
    return 0;
}

/* Finds the member through the index: each leaf the index names for its
 * hash is scanned once. */
static int findMember(zbt *t, const unsigned char *m, size_t len, uint64_t h, pos *p) {
    zmiIter iter;
    memberTail tail = tailOf(m, len);
    if (!t->index) {
        /* A small tree: each of its few leaves, as a listpack is read. Its
         * leaves are apart where a listpack is one run of bytes that the
         * hardware streams in, so each is asked for whole before it is
         * read, and the next one's head while it is (without: 65% of the
         * scan's samples waited on a leaf's header or its lines, in a rate
         * limiter of 10,000 keys of 100 members). */
        zbtLeaf *l = t->head;
        if (l) prefetchLeafHead(l);
        for (; l; l = l->next) {
            prefetchBytes(l, LEAF_AHEAD, offsetof(zbtLeaf, data) + l->used);
            if (l->next) prefetchLeafHead(l->next);
            if (leafFindMember(t, l, m, len, tail, p)) return 1;
        }
        return 0;
    }
    const leafArena *a = arenaOf(t);
    for (uint32_t id = zmiFirst(t->index, h, &iter); id; id = zmiNext(&iter)) {
        zbtLeaf *l = leafById(t, a, id);
        /* The scan reads most of the leaf: its first three quarters are
         * asked for at once, the rest only as far as its entries reach,
         * once the header says so. A line fetched for nothing cost ZSCORE
         * 5% at pipeline 16 (utils/bench/side-by-side, build against
         * build). */
        prefetchLeafHead(l);
        size_t end = offsetof(zbtLeaf, data) + l->used;
        prefetchBytes(l, LEAF_AHEAD, end);
        if (leafFindMember(t, l, m, len, tail, p)) return 1;
    }
    return 0;
}

/* A tree past ZBT_INDEX_ON entries indexes them all in one pass. */
static void indexBuild(zbt *t) {
    t->index = zmiCreate(t->length);
    for (zbtLeaf *l = t->head; l; l = l->next) {
        size_t off = 0;
        for (int i = 0; i < l->count; i++) {
            const unsigned char *m;
            size_t len;
            off += peekMember(l->data + off, &m, &len);
            zmiInsert(t->index, memberHash(m, len), l->id);
        }
    }
}

void zbtSetPagesShared(int shared) {
    pagesShared = shared;
    zmiSetPagesShared(shared);
}

static void remember(zbt *t, const pos *p, uint64_t h, int hashed) {
    if (pagesShared) return;
    t->foundVersion = t->version;
    t->foundLeaf = p->leaf;
    t->foundIdx = p->idx;
    t->foundOff = p->off;
    t->foundPrevOff = p->prevOff;
    t->foundPrev = p->prev;
    t->foundHash = h;
    t->foundHashed = (uint8_t)hashed;
}

/* findMember, starting with the entry remembered last. Sets *h to the
 * member's hash. */
static int lookup(zbt *t, const unsigned char *m, size_t len, uint64_t *h, pos *p) {
    if (t->foundLeaf && t->foundVersion == t->version) {
        zbtLeaf *l = t->foundLeaf;
        decode(t, l->data + t->foundOff, t->foundPrev, &p->it);
        if (p->it.len == len && memcmp(p->it.m, m, len) == 0) {
            p->leaf = l;
            p->idx = t->foundIdx;
            p->off = t->foundOff;
            p->prevOff = t->foundPrevOff;
            p->prev = t->foundPrev;
            if (!t->foundHashed) {
                t->foundHash = memberHash(m, len);
                t->foundHashed = 1;
            }
            *h = t->foundHash;
            return 1;
        }
    }
    *h = memberHash(m, len);
    if (!findMember(t, m, len, *h, p)) return 0;
    remember(t, p, *h, 1);
    return 1;
}

static void cursorSet(zbtCursor *c, zbt *t, const pos *p) {
    c->t = t;
    c->leaf = p->leaf;
    c->idx = p->idx;
    c->off = p->off;
    c->size = p->it.size;
    c->score = p->it.score;
    c->member = p->it.m;
    c->len = p->it.len;
    c->when = p->it.when;
    c->cached = NULL;
}

/* Positions c on entry idx of leaf l. */
static void cursorAt(zbtCursor *c, zbt *t, zbtLeaf *l, int idx) {
    pos p = {.leaf = l, .prev = 0.0, .off = 0};
    for (p.idx = 0;; p.idx++) {
        decode(t, l->data + p.off, p.prev, &p.it);
        if (p.idx == idx) break;
        p.prev = p.it.score;
        p.prevOff = p.off;
        p.off += p.it.size;
    }
    remember(t, &p, 0, 0);
    cursorSet(c, t, &p);
}

/* --- Bulk appends --- */

/* Carries the counts and the minimum of bulk appends up the tree. Every
 * public function but zbtAppend starts with it. */
static void settle(zbt *t) {
    if (!t->pendingLeaf) return;
    zbtLeaf *l = t->pendingLeaf;
    t->pendingLeaf = NULL;
    if (t->pendingCount) addCount(l, (long)t->pendingCount);
    t->pendingCount = 0;
    fixMin(l, 1);
}

static void touch(zbt *t) {
    settle(t);
    t->version++;
}

/* --- Inserting --- */

#define RUN_INDEX 0x7f
#define RUN_STREAK 0x80

/* The run field of a leaf whose last insert went to index idx. */
static inline uint8_t runAt(int idx, int streak) {
    return (uint8_t)((idx < RUN_INDEX ? idx + 1 : 0) | (streak ? RUN_STREAK : 0));
}

/* Does an insert at idx go right after or right before the last one? */
static inline int nextToLast(const zbtLeaf *l, int idx) {
    int last = l->run & RUN_INDEX;
    return last && (idx == last || idx + 1 == last);
}

/* ... and did the last one too: a run, not chance. */
static inline int inRun(const zbtLeaf *l, int idx) { return (l->run & RUN_STREAK) && nextToLast(l, idx); }

/* leafItems, with `it` put at index idx. */
static int leafItemsWith(const zbt *t, const zbtLeaf *l, unsigned char *buf, item *out, int idx, const item *it) {
    int k = leafItems(t, l, buf, out);
    memmove(out + idx + 1, out + idx, (k - idx) * sizeof(item));
    out[idx] = *it;
    out[idx].from = 0;
    out[idx].off = 0;
    return k + 1;
}

/* Splits the full leaf of p at `it`, which a run of inserts puts next to
 * the leaf's last insert: after it (ascending), the run goes on at the end
 * of the left leaf; before it (descending), at the front of the right one.
 * Returns 0, and changes nothing, when a side would not fit in a leaf. */
static int cutRun(zbt *t, pos *p, item *it, unsigned char *bytes, item *items) {
    zbtLeaf *l = p->leaf;
    int ascending = p->idx == (l->run & RUN_INDEX);
    int n = leafItemsWith(t, l, bytes, items, p->idx, it);
    int cut[3] = {0, ascending ? p->idx + 1 : p->idx, n};
    uint16_t seq[LEAF_PAYLOAD + 1];
    itemSeq(t, items, n, seq);
    size_t left = 0, right = itemSize(t, 0.0, &items[cut[1]]);
    for (int i = 0; i < cut[1]; i++) left += seq[i];
    for (int i = cut[1] + 1; i < n; i++) right += seq[i];
    if (left > LEAF_PAYLOAD || right > LEAF_PAYLOAD) return 0;
    zbtLeaf *src[1] = {l};
    layOut(t, src, 1, items, n, seq, cut, 2);
    if (ascending) src[0]->run = runAt(p->idx, 1);
    else src[0]->next->run = runAt(0, 1);
    return 1;
}

/* Whether an insert at idx goes to an end of a tree of several leaves:
 * where a run of ascending or descending scores (times, counters) goes
 * on. A tree of one leaf grows it a size class at a time, as a listpack
 * grows. */
static inline int atEdge(const zbtLeaf *l, int idx) {
    return (idx == l->count && !l->next && l->prev) || (idx == 0 && !l->prev && l->next);
}

/* Room for a leaf at an end of the tree that needs `need` payload bytes:
 * twice what it has, so that a run filling it from one entry reallocates
 * it three or four times rather than at every size class. Such a leaf
 * starts with its one entry, where it took ZBT_LEAF_BYTES: a small tree's
 * last leaf, half empty on average, was a sixteenth of a rate limiter's
 * memory (10,000 keys of about 100 members: 30.7 MB, 29.0 with this, for
 * the same server CPU a request; growing by half took 28.9 MB and 4% more
 * CPU). */
static inline size_t edgeRoom(const zbtLeaf *l, size_t need) {
    size_t more = 2 * leafCap(l);
    if (more > LEAF_PAYLOAD) more = LEAF_PAYLOAD;
    return need > more ? need : more;
}

/* Inserts it (whose member is not in the set) at position p. An entry
 * spliced into its leaf is remembered as found (zbt's found*): ZADDEX
 * gives the member it adds its time next. */
static void insertAt(zbt *t, pos *p, item *it, uint64_t h) {
    zbtLeaf *l = p->leaf;
    /* A key between two leaves is placed at the end of the first
     * (descendKey); a descending run goes on at the front of the second.
     * An ascending run at the end of this leaf skips the look, as the next
     * leaf's header is a miss on each of its inserts. */
    if (p->idx == l->count && !inRun(l, p->idx) && l->next && inRun(l->next, 0)) {
        l = p->leaf = l->next;
        p->idx = p->off = p->prevOff = 0;
        p->prev = 0.0;
        decode(t, l->data, 0.0, &p->it);
    }
    unsigned char buf[2 * (1 + 8 + 1 + ZBT_MAX_INLINE) + 16];
    size_t newSize = encode(t, buf, p->prev, it), oldSize = 0;
    if (p->idx < l->count) {
        newSize += encode(t, buf + newSize, it->score, &p->it);
        oldSize = p->it.size;
    }
    size_t need = l->used - oldSize + newSize;
    if (need <= LEAF_PAYLOAD) {
        if (need > leafCap(l)) l = leafFit(t, l, atEdge(l, p->idx) ? edgeRoom(l, need) : need);
        memmove(l->data + p->off + newSize, l->data + p->off + oldSize, l->used - p->off - oldSize);
        memcpy(l->data + p->off, buf, newSize);
        l->used += newSize - oldSize;
        l->count++;
        l->run = runAt(p->idx, nextToLast(l, p->idx));
        addCount(l, 1);
        if (p->idx == 0) fixMin(l, 1);
        if (it->when) noteTime(t, l->id, it->when);
        indexInsert(t, h, l->id);
        p->leaf = l;
        remember(t, p, h, 1);
        return;
    }

    /* After the end of a full leaf, or before its front with no room
     * beyond: a leaf of its own. Sharing would move entries, and re-point
     * their index slots, that ascending runs (a queue's producers, each
     * after its own last entry) would move again at their next insert. */
    int atEnd = p->idx == l->count, atFront = p->idx == 0;
    int frontRoom = atFront && l->prev && l->prev->used + itemSize(t, 0.0, it) + 9 <= LEAF_PAYLOAD;
    if (atEnd || (atFront && (!frontRoom || inRun(l, 0)))) {
        zbtLeaf *r = leafNew(t, itemSize(t, 0.0, it));
        r->used = (uint16_t)encode(t, r->data, 0.0, it);
        r->count = 1;
        r->run = runAt(0, l->run & RUN_STREAK);
        leafAttach(t, l, r, atEnd);
        if (it->when) noteTime(t, r->id, it->when);
        indexInsert(t, h, r->id);
        return;
    }

    unsigned char bytes[2 * LEAF_PAYLOAD];
    item items[2 * LEAF_PAYLOAD + 1];
    if (p->idx > 0 && inRun(l, p->idx) && cutRun(t, p, it, bytes, items)) return;

    /* Share with the neighbour with more room, or split. */
    zbtLeaf *src[2];
    int nsrc = 1;
    src[0] = l;
    zbtLeaf *nb = l->prev;
    if (!nb || (l->next && l->next->used < nb->used)) nb = l->next;
    if (nb) {
        nsrc = 2;
        src[0] = nb == l->prev ? nb : l;
        src[1] = nb == l->prev ? l : nb;
    }
    int n = 0;
    size_t total = 0;
    for (int j = 0; j < nsrc; j++) {
        n += src[j] == l ? leafItemsWith(t, l, bytes + total, items + n, p->idx, it)
                         : leafItems(t, src[j], bytes + total, items + n);
        total += src[j]->used;
    }
    int m = nsrc;
    int sharePct = arenaOf(t) ? ZBT_ARENA_SHARE_FILL_PCT : ZBT_SHARE_FILL_PCT;
    if ((total + newSize) * 100 > (size_t)nsrc * LEAF_PAYLOAD * sharePct) m = nsrc + 1;
    rewrite(t, src, nsrc, items, n, m);
}

/* --- Deleting --- */

/* Deletes the entry at p; frees its member unless keepOol. */
static void deleteInLeaf(zbt *t, zbtLeaf *l, int idx, int k, int keepOol);

/* After the first or last entry of the set went: asks for the index slot
 * of the entry that took its place, as queues pop again at the same end
 * (ZPOPMIN with a count, consumers draining a queue) and the slot is a
 * miss otherwise. */
static void prefetchNextPop(zbt *t, const zbtLeaf *l, const pos *p) {
    const unsigned char *q, *m;
    size_t len;
    if (p->idx == 0 && l == t->head && l->count) q = l->data;
    else if (p->idx == l->count && l == t->tail && l->count) q = l->data + p->prevOff;
    else return;
    if (!t->index) return;
    peekMember(q, &m, &len);
    zmiPrefetch(t->index, memberHash(m, len));
}

static void deleteAt(zbt *t, pos *p, uint64_t h, int keepOol) {
    zbtLeaf *l = p->leaf;
    unsigned char buf[1 + 8 + 1 + ZBT_MAX_INLINE + 16];
    size_t oldSize = p->it.size, newSize = 0;
    if (p->idx + 1 < l->count) {
        item next;
        decode(t, l->data + p->off + p->it.size, p->it.score, &next);
        oldSize += next.size;
        newSize = encode(t, buf, p->prev, &next);
    }
    if (l->used - oldSize + newSize > leafCap(l)) {
        /* The next entry's new delta takes more than the entry gave back
         * (deltas chain): lay the leaf out again. */
        deleteInLeaf(t, l, p->idx, 1, keepOol);
        return;
    }
    indexRemove(t, h, l->id);
    if (p->it.when) t->times->timed--;
    if (p->it.ool && !keepOol) countedFree(&t->bytes, p->it.ool);
    memmove(l->data + p->off + newSize, l->data + p->off + oldSize, l->used - p->off - oldSize);
    memcpy(l->data + p->off, buf, newSize);
    l->used -= oldSize - newSize;
    l->count--;
    l->run = 0;
    t->length--;
    addCount(l, -1);
    if (p->idx == 0) fixMin(l, 1);
    prefetchNextPop(t, l, p);
    if (t->height > 0 && l->count == 0) {
        leafRemove(t, l);
        return;
    }
    l = leafFit(t, l, l->used);
    leafRebalance(t, l);
}

/* --- API: the set --- */

zbt *zbtCreate(size_t expected) {
    size_t usable;
    zbt *t = zmalloc_usable(sizeof(*t), &usable);
    memset(t, 0, sizeof(*t));
    t->bytes = usable;
    /* Two ids (0 is never a leaf's) for a tree that starts with one leaf
     * and no index: a sorted set of a few members with times, which a listpack
     * cannot hold, pays for no more. */
    t->idcap = expected > ZBT_INDEX_ON ? 8 : 2;
    t->leaves = countedAlloc(&t->bytes, sizeof(zbtLeaf *) * t->idcap);
    t->nids = 1; /* id 0 means "no leaf" to the index */
    setArena(t, NULL);
    t->index = expected > ZBT_INDEX_ON ? zmiCreate(expected) : NULL;
    zbtLeaf *l = leafNew(t, 64);
    t->root = t->head = t->tail = l;
    return t;
}

static void freeNode(zbt *t, void *node, int level) {
    if (level == 0) return; /* leaves go along the chain */
    zbtInner *in = node;
    for (int i = 0; i < in->n; i++) freeNode(t, kids(in)[i], level - 1);
    zfree(in);
}

void zbtFree(zbt *t) {
    if (!t) return;
    freeNode(t, t->root, t->height);
    for (zbtLeaf *l = t->head, *next; l; l = next) {
        next = l->next;
        size_t off = 0;
        double prev = 0.0;
        for (int i = 0; i < l->count; i++) {
            item it;
            decode(t, l->data + off, prev, &it);
            if (it.ool) zfree(it.ool);
            prev = it.score;
            off += it.size;
        }
        if (!arenaOf(t)) zfree(l);
    }
    leafArena *a = arenaOf(t);
    if (a) {
        arenaTrim(t, a, 0);
        zfree(a);
    }
    leafTableFree(t);
    if (t->index) zmiFree(t->index);
    zfree(t->times);
    zfree(t);
}

unsigned long zbtLength(const zbt *t) { return t->length; }

int zbtHeight(const zbt *t) { return t->height; }

const zmi *zbtIndex(const zbt *t) { return t->index; }

size_t zbtAllocSize(const zbt *t) { return t->bytes + (t->index ? zmiAllocSize(t->index) : 0); }

int zbtFind(zbt *t, const unsigned char *m, size_t len, zbtCursor *c) {
    settle(t);
    pos p;
    uint64_t h;
    if (!lookup(t, m, len, &h, &p)) return 0;
    cursorSet(c, t, &p);
    return 1;
}

int zbtScore(zbt *t, const unsigned char *m, size_t len, double *score) {
    pos p;
    uint64_t h;
    if (!lookup(t, m, len, &h, &p)) return 0;
    *score = p.it.score;
    return 1;
}

/* Asks for the lines that lookups of these members will read, before any of
 * the lookups runs: the commands of a pipeline, queued in their client
 * (memberprefetch.c). Each lookup alone waits for two misses, the index
 * slot and then the leaf it names; asked for together, first every slot,
 * then every leaf, the misses of all of them overlap. */
void zbtPrefetchMany(zbt *const *t, const unsigned char *const *m, const size_t *len, size_t n) {
    if (n > ZBT_PREFETCH_MAX) n = ZBT_PREFETCH_MAX;
    uint64_t h[ZBT_PREFETCH_MAX];
    for (size_t i = 0; i < n; i++) {
        if (!t[i]->index) continue;
        h[i] = memberHash(m[i], len[i]);
        zmiPrefetch(t[i]->index, h[i]);
    }
    /* A member not in the index (a new one) names no leaf; a small tree's
     * few leaves are scanned from its head. */
    for (size_t i = 0; i < n; i++) {
        if (!t[i]->index) {
            prefetchLeafHead(t[i]->head);
            continue;
        }
        zmiIter iter;
        uint32_t id = zmiFirst(t[i]->index, h[i], &iter);
        if (id) prefetchLeafHead(leafById(t[i], arenaOf(t[i]), id));
    }
}

/* A lone command's lookup (pipeline 1): its index slot is asked for, as it
 * is parsed, and comes in while processCommand runs; the leaf it names
 * cannot be asked for before the slot is read. */
void zbtPrefetchOne(zbt *t, const unsigned char *m, size_t len) {
    if (t->index) zmiPrefetch(t->index, memberHash(m, len));
}

static int insertNew(zbt *t, double score, const unsigned char *m, size_t len, unsigned char *ool, uint64_t h,
                     uint64_t when) {
    item it = {.score = score, .m = m, .len = len, .ool = ool, .when = when};
    if (!ool && len > ZBT_MAX_INLINE) it.m = it.ool = oolCopy(t, m, len);
    if (when) {
        timesFor(t, when);
        t->times->timed++;
    }
    pos p;
    leafSeekKey(t, descendKey(t, score, m, len), score, m, len, &p);
    insertAt(t, &p, &it, h);
    t->length++;
    return ZBT_OK;
}

int zbtInsert(zbt *t, double score, const unsigned char *m, size_t len) {
    if (isnan(score)) return ZBT_ERR_NAN;
    touch(t);
    uint64_t h = memberHash(m, len);
    pos p;
    if (findMember(t, m, len, h, &p)) return ZBT_ERR_DUP;
    int r = insertNew(t, score, m, len, NULL, h, 0);
    tend(t);
    return r;
}

int zbtScoreOrMiss(zbt *t, const unsigned char *m, size_t len, double *score, zbtMiss *miss) {
    pos p;
    uint64_t h;
    if (lookup(t, m, len, &h, &p)) {
        *score = p.it.score;
        return 1;
    }
    miss->hash = h;
    miss->version = t->version;
    return 0;
}

int zbtInsertMissing(zbt *t, double score, const unsigned char *m, size_t len, const zbtMiss *miss) {
    return zbtInsertMissingTimed(t, score, m, len, miss, 0);
}

int zbtInsertMissingTimed(zbt *t, double score, const unsigned char *m, size_t len, const zbtMiss *miss,
                          uint64_t when) {
    if (isnan(score)) return ZBT_ERR_NAN;
    assert(miss->version == t->version && when <= ZBT_TIME_MAX);
    touch(t);
    int r = insertNew(t, score, m, len, NULL, miss->hash, when);
    tend(t);
    return r;
}

int zbtDelete(zbt *t, const unsigned char *m, size_t len, double *score) {
    uint64_t h;
    pos p;
    int found = lookup(t, m, len, &h, &p);
    touch(t); /* settles counts; entries stay where lookup found them */
    if (!found) return 0;
    if (score) *score = p.it.score;
    deleteAt(t, &p, h, 0);
    tendShrunk(t);
    return 1;
}

/* Is the entry at p, given a new score, still between its neighbours? Only
 * the neighbour it moves towards can be passed. `next` is the entry after
 * it in its leaf, if any. */
static int keepsPlace(const zbt *t, const pos *p, const item *next, double score) {
    const zbtLeaf *l = p->leaf;
    const unsigned char *m = p->it.m;
    size_t len = p->it.len;
    if (score > p->it.score) {
        item after;
        if (next)
            after = *next;
        else if (l->next)
            decode(t, l->next->data, 0.0, &after);
        else
            return 1;
        return cmpKey(score, m, len, after.score, after.m, after.len) < 0;
    }
    if (score < p->it.score) {
        /* The score before is p->prev: the entry there is decoded for its
         * member alone. The last entry of the leaf before would take a
         * walk over that leaf; such a rare case moves instead. */
        if (p->idx == 0) return l->prev == NULL;
        item before;
        decode(t, l->data + p->prevOff, 0.0, &before);
        return cmpKey(p->prev, before.m, before.len, score, m, len) < 0;
    }
    return 1; /* 0.0 and -0.0: equal, so in order either way */
}

/* Takes the entry at p out and puts it in again with the score and time
 * given, where they place it, keeping an out-of-line member as it is
 * (deleteAt counts its old time out, insertNew the new one in). */
static void reinsert(zbt *t, pos *p, uint64_t h, double score, uint64_t when) {
    unsigned char copy[ZBT_MAX_INLINE];
    unsigned char *ool = p->it.ool;
    const unsigned char *member = ool;
    size_t len = p->it.len;
    if (!ool) {
        memcpy(copy, p->it.m, len);
        member = copy;
    }
    deleteAt(t, p, h, 1);
    insertNew(t, score, member, len, ool, h, when);
    tend(t);
}

/* Gives the entry at p (which lookup found, the tree touched since) a new
 * score and time. In place when it keeps its place between its neighbours
 * and its leaf has room: the entry is encoded again, and the next one too
 * when the score changed (its delta did); the entries after them keep
 * their bytes. Else out and in again, which splits or shares a full leaf
 * as an insert does. */
static void rewriteEntry(zbt *t, pos *p, uint64_t h, double score, uint64_t when) {
    if (when) timesFor(t, when);
    zbtLeaf *l = p->leaf;
    int moves = !sameBits(p->it.score, score);
    item next;
    int hasNext = moves && p->idx + 1 < l->count;
    if (hasNext) decode(t, l->data + p->off + p->it.size, p->it.score, &next);
    if (!moves || keepsPlace(t, p, hasNext ? &next : NULL, score)) {
        unsigned char buf[2 * (1 + 8 + 1 + ZBT_MAX_INLINE + TIME_LONG_BYTES)];
        item now = p->it;
        now.score = score;
        now.when = when;
        size_t oldSize = p->it.size, newSize = encode(t, buf, p->prev, &now);
        if (hasNext) {
            oldSize += next.size;
            newSize += encode(t, buf + newSize, score, &next);
        }
        if (l->used - oldSize + newSize <= LEAF_PAYLOAD) {
            /* Grow before moving the tail, shrink after; an entry stored
             * in as many bytes as before (a small increment) moves nothing. */
            if (newSize != oldSize) {
                if (l->used - oldSize + newSize > leafCap(l)) l = leafFit(t, l, l->used - oldSize + newSize);
                memmove(l->data + p->off + newSize, l->data + p->off + oldSize, l->used - p->off - oldSize);
                l->used += newSize - oldSize;
                l = leafFit(t, l, l->used);
            }
            memcpy(l->data + p->off, buf, newSize);
            if (moves && p->idx == 0) fixMin(l, 1);
            if (when) noteTime(t, l->id, when);
            if (t->times) t->times->timed += (when != 0) - (p->it.when != 0);
            return;
        }
    }
    reinsert(t, p, h, score, when);
}

int zbtUpdate(zbt *t, const unsigned char *m, size_t len, double score, uint64_t when) {
    if (isnan(score)) return ZBT_ERR_NAN;
    assert(when <= ZBT_TIME_MAX || when == ZBT_TIME_KEEP);
    uint64_t h;
    pos p;
    int found = lookup(t, m, len, &h, &p);
    touch(t); /* settles counts; entries stay where lookup found them */
    if (!found) return 0;
    if (when == ZBT_TIME_KEEP) when = p.it.when;
    if (sameBits(p.it.score, score) && p.it.when == when) return 1;
    rewriteEntry(t, &p, h, score, when);
    return 1;
}

int zbtUpdateScore(zbt *t, const unsigned char *m, size_t len, double score) {
    return zbtUpdate(t, m, len, score, ZBT_TIME_KEEP);
}

int zbtRank(zbt *t, const unsigned char *m, size_t len, int reverse, unsigned long *rank) {
    settle(t);
    pos p;
    uint64_t h;
    if (!lookup(t, m, len, &h, &p)) return 0;
    unsigned long r = leafRank(p.leaf) + p.idx;
    *rank = reverse ? t->length - 1 - r : r;
    return 1;
}

/* --- API: times --- */

int zbtTime(zbt *t, const unsigned char *m, size_t len, uint64_t *when) {
    pos p;
    uint64_t h;
    if (!lookup(t, m, len, &h, &p)) return 0;
    *when = p.it.when;
    return 1;
}

int zbtSetTime(zbt *t, const unsigned char *m, size_t len, uint64_t when, uint64_t *old) {
    assert(when <= ZBT_TIME_MAX);
    uint64_t h;
    pos p;
    int found = lookup(t, m, len, &h, &p);
    touch(t); /* settles counts; entries stay where lookup found them */
    if (!found) return 0;
    if (old) *old = p.it.when;
    if (p.it.when != when) rewriteEntry(t, &p, h, p.it.score, when);
    return 1;
}

uint64_t zbtEarliest(const zbt *t) {
    return t->times && t->times->earliest != NO_TIME ? t->times->earliest : 0;
}

uint64_t zbtTimedCount(const zbt *t) { return t->times ? t->times->timed : 0; }

uint8_t *zbtMark(zbt *t) { return &t->mark; }

/* takeDueInLeaf for a leaf whose entries would not fit it once the taken
 * ones went (the deltas after them grew more than they gave back): laid
 * out again by rewrite, which may split it. */
static size_t takeDueByRewrite(zbt *t, zbtLeaf *l, uint64_t now, size_t max, zbtDueFn fn, void *ctx) {
    unsigned char buf[LEAF_PAYLOAD];
    item items[LEAF_PAYLOAD];
    int n = leafItems(t, l, buf, items), kept = 0;
    size_t taken = 0;
    for (int i = 0; i < n; i++) {
        item *it = &items[i];
        if (!it->when || it->when > now || taken == max) {
            items[kept++] = *it;
            continue;
        }
        fn(ctx, it->m, it->len, it->score, it->when);
        if (t->index) indexRemove(t, memberHash(it->m, it->len), l->id);
        if (it->ool) countedFree(&t->bytes, it->ool);
        taken++;
    }
    t->times->timed -= taken;
    t->length -= taken;
    zbtLeaf *src[1] = {l};
    rewrite(t, src, 1, items, kept, 1); /* sets the bound exact, or frees an emptied leaf */
    if (kept) leafRebalance(t, src[0]);
    return taken;
}

/* Takes the entries of leaf l whose time is `now` or earlier out, up to
 * max of them, handing each to fn first; sets the leaf's bound exact.
 * Returns how many. The leaf is written again in one pass: entries kept
 * are copied as they are, but for the one after each taken entry, whose
 * delta changes and is encoded again. A visit of active expiry usually
 * finds one or two due entries in a leaf, and laying the whole leaf out
 * again (rewrite) for them cost more than finding them. */
static size_t takeDueInLeaf(zbt *t, zbtLeaf *l, uint64_t now, size_t max, zbtDueFn fn, void *ctx) {
    unsigned char buf[LEAF_PAYLOAD + 1 + 8 + 1 + ZBT_MAX_INLINE + TIME_LONG_BYTES];
    uint16_t dueOff[LEAF_PAYLOAD];
    double duePrev[LEAF_PAYLOAD];
    size_t taken = 0, out = 0, off = 0;
    double prev = 0.0, keptPrev = 0.0;
    int follows = 1; /* the entry before is the one it was encoded after */
    uint64_t bound = NO_TIME;
    for (int i = 0; i < l->count; i++) {
        item it;
        decode(t, l->data + off, prev, &it);
        if (it.when && it.when <= now && taken < max) {
            dueOff[taken] = (uint16_t)off;
            duePrev[taken++] = prev;
            follows = 0;
        } else {
            if (it.when && it.when < bound) bound = it.when;
            if (out <= LEAF_PAYLOAD) {
                if (follows) memcpy(buf + out, l->data + off, it.size);
                out += follows ? it.size : encode(t, buf + out, keptPrev, &it);
            }
            keptPrev = it.score;
            follows = 1;
        }
        prev = it.score;
        off += it.size;
    }
    t->times->bound[l->id] = bound;
    if (!taken) return 0;
    if (out > LEAF_PAYLOAD) return takeDueByRewrite(t, l, now, max, fn, ctx);

    uint64_t hash[LEAF_PAYLOAD];
    for (size_t k = 0; k < taken; k++) {
        item it;
        decode(t, l->data + dueOff[k], duePrev[k], &it);
        fn(ctx, it.m, it.len, it.score, it.when);
        if (t->index) {
            hash[k] = memberHash(it.m, it.len);
            zmiPrefetch(t->index, hash[k]);
        }
        if (it.ool) countedFree(&t->bytes, it.ool);
    }
    for (size_t k = 0; k < taken && t->index; k++) indexRemove(t, hash[k], l->id);
    int firstGone = dueOff[0] == 0;
    memcpy(l->data, buf, out);
    l->used = (uint16_t)out;
    l->count -= (uint16_t)taken;
    l->run = 0;
    t->length -= taken;
    t->times->timed -= taken;
    addCount(l, -(long)taken);
    if (l->count == 0) {
        if (t->height > 0) leafRemove(t, l);
        return taken;
    }
    if (firstGone) fixMin(l, 1);
    l = leafFit(t, l, l->used);
    leafRebalance(t, l);
    return taken;
}

size_t zbtDue(zbt *t, uint64_t now, size_t max, zbtDueFn fn, void *ctx) {
    if (!t->times || t->times->earliest > now) return 0;
    touch(t);
    zbtTimes *tm = t->times;
    size_t taken = 0;
    for (;;) {
        /* A merge may bring entries of a leaf not read yet into one read
         * before: another pass over the bounds finds them. */
        for (uint32_t id = 1; id < t->nids && taken < max; id++)
            if (tm->bound[id] <= now) taken += takeDueInLeaf(t, leafAt(t, id), now, max - taken, fn, ctx);
        uint64_t earliest = NO_TIME;
        for (uint32_t id = 1; id < t->nids; id++)
            if (tm->bound[id] < earliest) earliest = tm->bound[id];
        tm->earliest = earliest;
        if (earliest > now || taken == max) break;
    }
    uint64_t floor = tm->earliest < now ? tm->earliest : now;
    if (tm->timed && floor >= tm->base + TIME_REBASE_AFTER) rebase(t, floor - TIME_BASE_SLACK);
    tendShrunk(t);
    return taken;
}

/* --- API: bulk appends --- */

/* The last entry of the tail, and where it is. */
static void tailLast(zbt *t, item *it, uint16_t *off, double *prev) {
    zbtLeaf *l = t->tail;
    if (t->lastVersion == t->version) {
        *off = t->lastOff;
        *prev = t->lastPrev;
    } else {
        size_t o = 0;
        double p = 0.0;
        for (int i = 0; i + 1 < l->count; i++) {
            decode(t, l->data + o, p, it);
            p = it->score;
            o += it->size;
        }
        *off = (uint16_t)o;
        *prev = p;
    }
    decode(t, l->data + *off, *prev, it);
}

/* Marks l as holding appends not yet counted in its ancestors. */
static void pend(zbt *t, zbtLeaf *l) {
    if (t->pendingLeaf != l) settle(t);
    t->pendingLeaf = l;
    t->pendingCount++;
}

/* Adds an entry before the first or after the last one, for loading sorted
 * input (RDB keeps sorted sets in descending order) in O(1) per entry: no
 * descent, and counts carried up once per leaf. Returns ZBT_ERR_ORDER when
 * the entry is at neither end, or not at the end the previous appends
 * went to; the caller then inserts the rest. */
int zbtAppend(zbt *t, double score, const unsigned char *m, size_t len) {
    return zbtAppendTimed(t, score, m, len, 0);
}

int zbtAppendTimed(zbt *t, double score, const unsigned char *m, size_t len, uint64_t when) {
    if (isnan(score)) return ZBT_ERR_NAN;
    assert(when <= ZBT_TIME_MAX);
    if (t->length == 0) {
        t->appendDir = 0;
        touch(t);
        uint64_t h = memberHash(m, len);
        int r = insertNew(t, score, m, len, NULL, h, when);
        tend(t);
        return r;
    }
    item edge;
    uint16_t lastOff = 0;
    double lastPrev = 0.0;
    int dir = 0;
    if (t->appendDir >= 0) {
        tailLast(t, &edge, &lastOff, &lastPrev);
        if (cmpKey(score, m, len, edge.score, edge.m, edge.len) > 0) dir = 1;
    }
    if (!dir && t->appendDir <= 0) {
        decode(t, t->head->data, 0.0, &edge);
        if (cmpKey(score, m, len, edge.score, edge.m, edge.len) < 0) dir = -1;
    }
    if (!dir) return ZBT_ERR_ORDER;
    uint64_t h = memberHash(m, len);
    pos p;
    if (findMember(t, m, len, h, &p)) return ZBT_ERR_DUP;

    item it = {.score = score, .m = m, .len = len, .when = when};
    if (len > ZBT_MAX_INLINE) it.m = it.ool = oolCopy(t, m, len);
    if (when) {
        timesFor(t, when);
        t->times->timed++;
    }
    t->foundLeaf = NULL; /* appends keep the version (see tailLast) */
    t->appendDir = dir;
    t->length++;
    if (dir > 0) {
        zbtLeaf *l = t->tail;
        size_t size = itemSize(t, edge.score, &it);
        if (l->used + size <= LEAF_PAYLOAD) {
            if (l->used + size > leafCap(l)) l = leafFit(t, l, LEAF_PAYLOAD);
            t->lastOff = l->used;
            t->lastPrev = edge.score;
            l->used += encode(t, l->data + l->used, edge.score, &it);
            l->count++;
            pend(t, l);
        } else {
            settle(t);
            zbtLeaf *r = leafNew(t, LEAF_PAYLOAD);
            r->used = (uint16_t)encode(t, r->data, 0.0, &it);
            r->count = 1;
            leafAttach(t, l, r, 1);
            t->lastOff = 0;
            t->lastPrev = 0.0;
            l = r;
        }
        t->lastVersion = t->version;
        if (when) noteTime(t, l->id, when);
        indexInsert(t, h, l->id);
        tend(t);
        return ZBT_OK;
    }

    zbtLeaf *l = t->head;
    unsigned char buf[2 * (1 + 8 + 1 + ZBT_MAX_INLINE) + 16];
    size_t size = encode(t, buf, 0.0, &it);
    size += encode(t, buf + size, score, &edge);
    if (l->used - edge.size + size <= LEAF_PAYLOAD) {
        if (l->used - edge.size + size > leafCap(l)) l = leafFit(t, l, LEAF_PAYLOAD);
        memmove(l->data + size, l->data + edge.size, l->used - edge.size);
        memcpy(l->data, buf, size);
        l->used += size - edge.size;
        l->count++;
        pend(t, l);
    } else {
        settle(t);
        zbtLeaf *r = leafNew(t, LEAF_PAYLOAD);
        r->used = (uint16_t)encode(t, r->data, 0.0, &it);
        r->count = 1;
        leafAttach(t, l, r, 0);
        l = r;
    }
    t->version++; /* the tail's last entry may have moved */
    if (when) noteTime(t, l->id, when);
    indexInsert(t, h, l->id);
    tend(t);
    return ZBT_OK;
}

/* Ends a run of appends: the end leaves, allocated whole for the appends,
 * give back what they do not use. */
void zbtAppendDone(zbt *t) {
    settle(t);
    leafFit(t, t->head, t->head->used);
    leafFit(t, t->tail, t->tail->used);
    t->version++;
}

/* --- API: positions --- */

int zbtAtRank(zbt *t, unsigned long rank, zbtCursor *c) {
    settle(t);
    if (rank >= t->length) return 0;
    void *node = t->root;
    for (int level = t->height; level > 0; level--) {
        zbtInner *p = node;
        int i = 0;
        while (rank >= cnt(p)[i]) rank -= cnt(p)[i++];
        node = kids(p)[i];
    }
    cursorAt(c, t, node, (int)rank);
    return 1;
}

int zbtSeek(zbt *t, double score, const unsigned char *m, size_t len, zbtCursor *c) {
    settle(t);
    if (!t->length) return 0;
    pos p;
    zbtLeaf *l = descendKey(t, score, m, len);
    leafSeekKey(t, l, score, m, len, &p);
    if (p.idx == l->count) {
        if (!l->next) return 0;
        l = l->next, p.idx = 0;
    }
    cursorAt(c, t, l, p.idx);
    return 1;
}

uint64_t zbtVersion(zbt *t) {
    settle(t);
    return t->version;
}

unsigned long zbtCursorRank(const zbtCursor *c) { return leafRank(c->leaf) + c->idx; }

static void cursorItem(zbtCursor *c, const item *it) {
    c->size = it->size;
    c->score = it->score;
    c->member = it->m;
    c->len = it->len;
    c->when = it->when;
}

int zbtNext(zbtCursor *c) {
    item it;
    if (c->idx + 1 < c->leaf->count) {
        decode(c->t, c->leaf->data + c->off + c->size, c->score, &it);
        c->off += c->size;
        c->idx++;
    } else {
        if (!c->leaf->next) return 0;
        c->leaf = c->leaf->next;
        decode(c->t, c->leaf->data, 0.0, &it);
        c->off = 0;
        c->idx = 0;
    }
    cursorItem(c, &it);
    return 1;
}

/* Entries are delta-encoded forwards: stepping back reads the leaf once
 * into the cursor's table of offsets and scores. */
static void cursorCache(zbtCursor *c) {
    if (c->cached == c->leaf) return;
    const zbtLeaf *l = c->leaf;
    size_t off = 0;
    double prev = 0.0;
    for (int i = 0; i < l->count; i++) {
        item it;
        decode(c->t, l->data + off, prev, &it);
        c->offs[i] = (uint16_t)off;
        c->scores[i] = it.score;
        prev = it.score;
        off += it.size;
    }
    c->cached = c->leaf;
}

int zbtPrev(zbtCursor *c) {
    if (c->idx == 0) {
        if (!c->leaf->prev) return 0;
        c->leaf = c->leaf->prev;
        c->idx = c->leaf->count;
    }
    cursorCache(c);
    c->idx--;
    c->off = c->offs[c->idx];
    item it;
    decode(c->t, c->leaf->data + c->off, c->idx ? c->scores[c->idx - 1] : 0.0, &it);
    cursorItem(c, &it);
    return 1;
}

int zbtFirst(zbt *t, zbtCursor *c) {
    settle(t);
    if (!t->length) return 0;
    cursorAt(c, t, t->head, 0);
    return 1;
}

int zbtLast(zbt *t, zbtCursor *c) {
    settle(t);
    if (!t->length) return 0;
    cursorAt(c, t, t->tail, t->tail->count - 1);
    return 1;
}

/* --- API: ranges --- */

int zbtScoreRangeEmpty(const zbtScoreRange *r) {
    if (isnan(r->min) || isnan(r->max)) return 1;
    return r->min > r->max || (r->min == r->max && (r->minex || r->maxex));
}

static inline int gteMin(double v, const zbtScoreRange *r) { return r->minex ? v > r->min : v >= r->min; }
static inline int lteMax(double v, const zbtScoreRange *r) { return r->maxex ? v < r->max : v <= r->max; }

int zbtScoreInRange(double score, const zbtScoreRange *r) {
    return !zbtScoreRangeEmpty(r) && gteMin(score, r) && lteMax(score, r);
}

int zbtLexRangeEmpty(const zbtLexRange *r) {
    if (r->min.inf > 0 || r->max.inf < 0) return 1;
    if (r->min.inf < 0 || r->max.inf > 0) return 0;
    int c = cmpMember(r->min.s, r->min.len, r->max.s, r->max.len);
    return c > 0 || (c == 0 && (r->min.ex || r->max.ex));
}

static int lexGteMin(const unsigned char *m, size_t len, const zbtLexRange *r) {
    if (r->min.inf) return r->min.inf < 0;
    int c = cmpMember(m, len, r->min.s, r->min.len);
    return r->min.ex ? c > 0 : c >= 0;
}

static int lexLteMax(const unsigned char *m, size_t len, const zbtLexRange *r) {
    if (r->max.inf) return r->max.inf > 0;
    int c = cmpMember(m, len, r->max.s, r->max.len);
    return r->max.ex ? c < 0 : c <= 0;
}

int zbtLexInRange(const unsigned char *m, size_t len, const zbtLexRange *r) {
    return !zbtLexRangeEmpty(r) && lexGteMin(m, len, r) && lexLteMax(m, len, r);
}

/* A test on the first entry below a child, true for a prefix of the
 * children or for a suffix. */
typedef int (*childTest)(const zbtInner *p, int i, const void *range);

static int minGteMin(const zbtInner *p, int i, const void *r) { return gteMin(mins(p)[i], r); }
static int minLteMax(const zbtInner *p, int i, const void *r) { return lteMax(mins(p)[i], r); }

static int firstMemberTest(const zbtInner *p, int i, const void *r, int max) {
    const unsigned char *em;
    size_t elen;
    peekMember(leftmostLeaf(kids(p)[i], p->level - 1)->data, &em, &elen);
    return max ? lexLteMax(em, elen, r) : lexGteMin(em, elen, r);
}
static int firstGteLexMin(const zbtInner *p, int i, const void *r) { return firstMemberTest(p, i, r, 0); }
static int firstLteLexMax(const zbtInner *p, int i, const void *r) { return firstMemberTest(p, i, r, 1); }

/* Descends to the leaf where the first entry passing `gte` is: in the child
 * before the first child whose first entry passes. */
static zbtLeaf *descendFirst(const zbt *t, childTest gte, const void *r) {
    void *node = t->root;
    for (int level = t->height; level > 0; level--) {
        const zbtInner *p = node;
        int lo = 0, hi = p->n; /* first passing child in [lo, hi] */
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (gte(p, mid, r)) hi = mid;
            else lo = mid + 1;
        }
        node = kids(p)[lo > 0 ? lo - 1 : 0];
    }
    return node;
}

/* Descends to the leaf of the last entry passing `lte`: the last child whose
 * first entry passes. NULL when no entry passes. */
static zbtLeaf *descendLast(const zbt *t, childTest lte, const void *r) {
    void *node = t->root;
    for (int level = t->height; level > 0; level--) {
        const zbtInner *p = node;
        int lo = -1, hi = p->n - 1; /* last passing child in [lo, hi] */
        while (lo < hi) {
            int mid = (lo + hi + 1) / 2;
            if (lte(p, mid, r)) lo = mid;
            else hi = mid - 1;
        }
        if (lo < 0) return NULL;
        node = kids(p)[lo];
    }
    return node;
}

typedef int (*entryTest)(const item *it, const void *range);
static int itemGteMin(const item *it, const void *r) { return gteMin(it->score, r); }
static int itemLteMax(const item *it, const void *r) { return lteMax(it->score, r); }
static int itemGteLexMin(const item *it, const void *r) { return lexGteMin(it->m, it->len, r); }
static int itemLteLexMax(const item *it, const void *r) { return lexLteMax(it->m, it->len, r); }

/* The first entry from leaf l on that passes gte, if it also passes lte. */
static int seekFirst(zbt *t, zbtLeaf *l, entryTest gte, entryTest lte, const void *r, zbtCursor *c) {
    pos p = {.leaf = l, .prev = 0.0, .off = 0};
    for (p.idx = 0; p.idx < l->count; p.idx++) {
        decode(t, l->data + p.off, p.prev, &p.it);
        if (gte(&p.it, r)) break;
        p.prev = p.it.score;
        p.off += p.it.size;
    }
    if (p.idx == l->count) {
        if (!l->next) return 0;
        p.leaf = l->next;
        p.idx = p.off = 0;
        p.prev = 0.0;
        decode(t, p.leaf->data, 0.0, &p.it);
    }
    if (!lte(&p.it, r)) return 0;
    cursorSet(c, t, &p);
    return 1;
}

/* The last entry of leaf l that passes lte, if it also passes gte. */
static int seekLast(zbt *t, zbtLeaf *l, entryTest lte, entryTest gte, const void *r, zbtCursor *c) {
    pos p = {.leaf = l, .prev = 0.0, .off = 0}, found = {0};
    int any = 0;
    for (p.idx = 0; p.idx < l->count; p.idx++) {
        decode(t, l->data + p.off, p.prev, &p.it);
        if (!lte(&p.it, r)) break;
        found = p;
        any = 1;
        p.prev = p.it.score;
        p.off += p.it.size;
    }
    if (!any || !gte(&found.it, r)) return 0;
    cursorSet(c, t, &found);
    return 1;
}

int zbtFirstInScoreRange(zbt *t, const zbtScoreRange *r, zbtCursor *c) {
    settle(t);
    if (!t->length || zbtScoreRangeEmpty(r)) return 0;
    return seekFirst(t, descendFirst(t, minGteMin, r), itemGteMin, itemLteMax, r, c);
}

int zbtLastInScoreRange(zbt *t, const zbtScoreRange *r, zbtCursor *c) {
    settle(t);
    if (!t->length || zbtScoreRangeEmpty(r)) return 0;
    zbtLeaf *l = descendLast(t, minLteMax, r);
    return l && seekLast(t, l, itemLteMax, itemGteMin, r, c);
}

int zbtFirstInLexRange(zbt *t, const zbtLexRange *r, zbtCursor *c) {
    settle(t);
    if (!t->length || zbtLexRangeEmpty(r)) return 0;
    return seekFirst(t, descendFirst(t, firstGteLexMin, r), itemGteLexMin, itemLteLexMax, r, c);
}

int zbtLastInLexRange(zbt *t, const zbtLexRange *r, zbtCursor *c) {
    settle(t);
    if (!t->length || zbtLexRangeEmpty(r)) return 0;
    zbtLeaf *l = descendLast(t, firstLteLexMax, r);
    return l && seekLast(t, l, itemLteLexMax, itemGteLexMin, r, c);
}

/* Ranks of the first and last entries of a range; 0 when it is empty. */
static int rankSpan(zbt *t, int lex, const void *r, unsigned long *first, unsigned long *last) {
    zbtCursor *c = zmalloc(sizeof(*c));
    int found = lex ? zbtFirstInLexRange(t, r, c) : zbtFirstInScoreRange(t, r, c);
    if (found) {
        *first = zbtCursorRank(c);
        found = lex ? zbtLastInLexRange(t, r, c) : zbtLastInScoreRange(t, r, c);
        if (found) *last = zbtCursorRank(c);
    }
    zfree(c);
    return found && *first <= *last;
}

/* The entry `offset` places into a range from its start (or, reverse, from
 * its end): what LIMIT offset asks for, by rank arithmetic rather than by
 * stepping. A negative offset is outside every range. */
/* The offset-th entry of the range from its first (from its last when
 * reverse). A negative offset counts from the other end, -1 the last entry
 * there, as upstream 9.1's skiplist takes LIMIT's offset (ZRANGEBYSCORE
 * 10 20 LIMIT -1 1 gives the last entry of the range; a listpack gives
 * nothing, upstream's as ours). */
static int nthInRange(zbt *t, int lex, const void *r, long offset, int reverse, zbtCursor *c) {
    unsigned long a, b;
    if (!rankSpan(t, lex, r, &a, &b)) return 0;
    /* n-th from the first (n >= 0) or from past the last (n < 0). */
    long n = reverse ? -(offset + 1) : offset;
    unsigned long span = b - a + 1;
    if (n >= 0) return (unsigned long)n < span && zbtAtRank(t, a + (unsigned long)n, c);
    unsigned long back = (unsigned long)-(n + 1); /* 0 for the last */
    return back < span && zbtAtRank(t, b - back, c);
}

int zbtNthInScoreRange(zbt *t, const zbtScoreRange *r, long offset, int reverse, zbtCursor *c) {
    return nthInRange(t, 0, r, offset, reverse, c);
}

int zbtNthInLexRange(zbt *t, const zbtLexRange *r, long offset, int reverse, zbtCursor *c) {
    return nthInRange(t, 1, r, offset, reverse, c);
}

unsigned long zbtCountScoreRange(zbt *t, const zbtScoreRange *r) {
    unsigned long a, b;
    return rankSpan(t, 0, r, &a, &b) ? b - a + 1 : 0;
}

unsigned long zbtCountLexRange(zbt *t, const zbtLexRange *r) {
    unsigned long a, b;
    return rankSpan(t, 1, r, &a, &b) ? b - a + 1 : 0;
}

/* Deletes entries [idx, idx+k) of leaf l (keeping out-of-line members
 * allocated when asked: the caller moves them). */
static void deleteInLeaf(zbt *t, zbtLeaf *l, int idx, int k, int keepOol) {
    unsigned char buf[LEAF_PAYLOAD];
    item items[LEAF_PAYLOAD];
    uint64_t hash[LEAF_PAYLOAD];
    int n = leafItems(t, l, buf, items);
    /* Every slot is asked for before the first goes, so that their misses
     * overlap: a range delete of a leaf's entries (the front of an index
     * of times, t_member_ttl.c) spent 22% of active expiry in zmiRemove
     * one miss after another. */
    for (int i = idx; i < idx + k && t->index; i++) {
        hash[i] = memberHash(items[i].m, items[i].len);
        zmiPrefetch(t->index, hash[i]);
    }
    for (int i = idx; i < idx + k; i++) {
        if (t->index) indexRemove(t, hash[i], l->id);
        if (items[i].when) t->times->timed--;
        if (items[i].ool && !keepOol) countedFree(&t->bytes, items[i].ool);
    }
    memmove(items + idx, items + idx + k, (n - idx - k) * sizeof(item));
    n -= k;
    t->length -= k;
    zbtLeaf *src[1] = {l};
    rewrite(t, src, 1, items, n, 1);
    if (n) leafRebalance(t, src[0]);
}

unsigned long zbtDeleteRankRange(zbt *t, unsigned long start, unsigned long end) {
    touch(t);
    if (t->length == 0 || start > end || start >= t->length) return 0;
    if (end >= t->length) end = t->length - 1;
    unsigned long todo = end - start + 1, done = 0;
    while (done < todo) {
        void *node = t->root;
        unsigned long rank = start;
        for (int level = t->height; level > 0; level--) {
            zbtInner *p = node;
            int i = 0;
            while (rank >= cnt(p)[i]) rank -= cnt(p)[i++];
            node = kids(p)[i];
        }
        zbtLeaf *l = node;
        unsigned long k = l->count - rank;
        if (k > todo - done) k = todo - done;
        deleteInLeaf(t, l, (int)rank, (int)k, 0);
        done += k;
    }
    tendShrunk(t);
    return done;
}

unsigned long zbtDeleteScoreRange(zbt *t, const zbtScoreRange *r) {
    unsigned long a, b;
    return rankSpan(t, 0, r, &a, &b) ? zbtDeleteRankRange(t, a, b) : 0;
}

unsigned long zbtDeleteLexRange(zbt *t, const zbtLexRange *r) {
    unsigned long a, b;
    return rankSpan(t, 1, r, &a, &b) ? zbtDeleteRankRange(t, a, b) : 0;
}

/* --- Scanning --- */

typedef struct scanBatch {
    uint64_t *slots;
    size_t n, cap;
} scanBatch;

static void scanCollect(void *ctx, uint32_t h32, uint32_t id) {
    scanBatch *b = ctx;
    if (b->n == b->cap) {
        b->cap = b->cap * 2 + 16;
        b->slots = zrealloc(b->slots, b->cap * sizeof(uint64_t));
    }
    b->slots[b->n++] = ((uint64_t)h32 << 32) | id;
}

static int cmpU64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

unsigned long long zbtScan(zbt *t, unsigned long long cursor, size_t count, zbtScanFn fn, void *privdata) {
    if (cursor >= (1ULL << 32)) return 0;
    if (!t->index) {
        /* A small tree in one call, as a listpack is scanned: whatever
         * the cursor (an index dropped since the call before), every
         * member at least once. */
        zbtCursor c;
        for (int more = zbtFirst(t, &c); more; more = zbtNext(&c)) fn(privdata, c.member, c.len, c.score);
        return 0;
    }
    scanBatch b = {0};
    uint64_t next = zmiScan(t->index, cursor, count ? count : 1, scanCollect, &b);
    /* Each (hash, leaf) once: the members of that leaf with that hash. */
    if (b.n) qsort(b.slots, b.n, sizeof(uint64_t), cmpU64);
    for (size_t i = 0; i < b.n; i++) {
        if (i && b.slots[i] == b.slots[i - 1]) continue;
        uint32_t h32 = (uint32_t)(b.slots[i] >> 32);
        zbtLeaf *l = leafAt(t, (uint32_t)b.slots[i]);
        size_t off = 0;
        double prev = 0.0;
        for (int k = 0; k < l->count; k++) {
            item it;
            decode(t, l->data + off, prev, &it);
            if ((uint32_t)(memberHash(it.m, it.len) >> 32) == h32) fn(privdata, it.m, it.len, it.score);
            prev = it.score;
            off += it.size;
        }
    }
    zfree(b.slots);
    return next >= (1ULL << 32) ? 0 : next;
}

/* --- Defragmentation --- */

/* Moves the out-of-line members of a leaf. */
static void defragMembers(zbtLeaf *l, void *(*fn)(void *)) {
    size_t off = 0;
    for (int i = 0; i < l->count; i++) {
        const unsigned char *m;
        size_t len, timeBytes, size = peekEntry(l->data + off, &m, &len, &timeBytes);
        if (hdrLenCode(l->data[off]) == LEN_OOL) {
            unsigned char *moved = fn((void *)m);
            /* The pointer ends the entry, or comes before its time. */
            size_t at = off + size - timeBytes - sizeof(void *);
            if (moved) memcpy(l->data + at, &moved, sizeof(void *));
        }
        off += size;
    }
}

/* Moves an inner node and the inner nodes below it; returns its address.
 * Leaves are left to zbtDefragLeaves, but take their new parent here. */
static void *defragInner(void *node, int level, void *(*fn)(void *)) {
    zbtInner *moved = fn(node), *in = moved ? moved : node;
    for (int i = 0; i < in->n; i++) {
        if (level > 1) kids(in)[i] = defragInner(kids(in)[i], level - 1, fn);
        if (moved) setParent(kids(in)[i], level == 1, in);
    }
    return in;
}

zbt *zbtDefragShell(zbt *t, void *(*fn)(void *)) {
    touch(t);
    if (t->height) t->root = defragInner(t->root, t->height, fn);
    zbtLeaf ***blocks = tableBlocksOf(t);
    for (uint32_t i = 0; i < tableBlocks(t); i++) {
        zbtLeaf **block = fn(blocks[i]);
        if (block) blocks[i] = block;
    }
    zbtLeaf **leaves = fn(t->leaves);
    if (leaves) t->leaves = leaves;
    /* An arena's chunks stay: at 32 KiB they are not the allocator's to
     * move (upstream's defrag moves small allocations only). */
    leafArena *a = arenaOf(t) ? fn(arenaOf(t)) : NULL;
    if (a) setArena(t, a);
    if (t->index) {
        zmiDefrag(t->index, fn);
        zmi *ix = fn(t->index);
        if (ix) t->index = ix;
    }
    zbtTimes *tm = t->times ? fn(t->times) : NULL;
    if (tm) t->times = tm;
    return fn(t);
}

uint32_t zbtDefragLeaves(zbt *t, uint32_t from, uint32_t count, void *(*fn)(void *)) {
    touch(t);
    uint32_t id = from ? from : 1;
    for (; count && id < t->nids; count--, id++) {
        zbtLeaf *l = leafAt(t, id);
        if ((uintptr_t)l & 1) continue; /* A free id. */
        zbtLeaf *moved = arenaOf(t) ? NULL : fn(l);
        if (moved) leafMoved(t, l, moved), l = moved;
        defragMembers(l, fn);
    }
    return id < t->nids ? id : 0;
}

/* --- Dismissing --- */

void zbtDismiss(zbt *t, size_t min, void (*fn)(void *ptr, size_t size)) {
    /* Members stored out of line, when they are big on average (upstream
     * walks a set's members on the same condition); read before the arena's
     * chunks, which hold the pointers, are handed back. */
    if (t->length && t->bytes / t->length >= min) {
        for (zbtLeaf *l = t->head; l; l = l->next) {
            size_t off = 0;
            double prev = 0.0;
            for (int i = 0; i < l->count; i++) {
                item it;
                decode(t, l->data + off, prev, &it);
                if (it.ool && zmalloc_size(it.ool) >= min) fn(it.ool, zmalloc_size(it.ool));
                prev = it.score;
                off += it.size;
            }
        }
    }
    leafArena *a = arenaOf(t);
    if (a) {
        size_t chunk = (size_t)ARENA_CHUNK_LEAVES * ZBT_LEAF_BYTES;
        if (chunk >= min)
            for (uint32_t i = 0; i < a->nchunks; i++) fn(a->chunk[i], chunk);
        if (zmalloc_size(a) >= min) fn(a, zmalloc_size(a));
    }
    zbtLeaf ***blocks = tableBlocksOf(t);
    for (uint32_t i = 0; i < tableBlocks(t); i++) fn(blocks[i], zmalloc_size(blocks[i]));
    if (zmalloc_size(t->leaves) >= min) fn(t->leaves, zmalloc_size(t->leaves));
    if (t->times && zmalloc_size(t->times) >= min) fn(t->times, zmalloc_size(t->times));
    if (t->index) zmiDismiss(t->index, min, fn);
}

void zbtDismissIndex(zbt *t, size_t min, void (*fn)(void *ptr, size_t size)) {
    if (t->index) zmiDismissSegments(t->index, min, fn);
}

zbt *zbtDefrag(zbt *t, void *(*fn)(void *)) {
    zbt *moved = zbtDefragShell(t, fn);
    if (moved) t = moved;
    zbtDefragLeaves(t, 0, UINT32_MAX, fn);
    return moved;
}

/* --- Statistics --- */

static void statsNode(const zbt *t, void *node, int level, zbtStats *s) {
    if (level == 0) {
        zbtLeaf *l = node;
        s->leaves++;
        s->leafBytes += arenaOf(t) ? ZBT_LEAF_BYTES : zmalloc_size(l);
        s->payloadUsed += l->used;
        s->payloadCap += leafCap(l);
        size_t off = 0;
        double prev = 0.0;
        for (int i = 0; i < l->count; i++) {
            item it;
            decode(t, l->data + off, prev, &it);
            if (it.ool) s->oolBytes += zmalloc_size(it.ool);
            prev = it.score;
            off += it.size;
        }
        return;
    }
    zbtInner *in = node;
    s->inners++;
    s->innerBytes += zmalloc_size(in);
    for (int i = 0; i < in->n; i++) statsNode(t, kids(in)[i], level - 1, s);
}

void zbtGetStats(zbt *t, zbtStats *s) {
    settle(t);
    memset(s, 0, sizeof(*s));
    statsNode(t, t->root, t->height, s);
    s->height = t->height;
    s->indexBytes = t->index ? zmiAllocSize(t->index) : 0;
    s->otherBytes = t->bytes - s->leafBytes - s->innerBytes - s->oolBytes;
    s->arenaChunks = arenaOf(t) ? arenaOf(t)->nchunks : 0;
    s->leafIds = t->nids - 1;
    s->freeIds = t->nfree;
}

/* --- Consistency check --- */

typedef struct checkState {
    zbt *t;
    zbtLeaf *expect; /* next leaf of the chain, in tree order */
    unsigned long entries;
    size_t bytes;
    int haveLast;
    double lastScore;
    unsigned char lastMember[ZBT_MAX_INLINE];
    const unsigned char *lastOol;
    size_t lastLen;
    uint64_t *slots;
    size_t nslots;
    uint64_t timed;
    unsigned long ool;
    const char *err;
} checkState;

static char checkErr[256];

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            snprintf(checkErr, sizeof(checkErr), __VA_ARGS__);             \
            st->err = checkErr;                                            \
            return 0;                                                      \
        }                                                                  \
    } while (0)

static int checkLeaf(checkState *st, zbtLeaf *l, unsigned long *count, double *min) {
    zbt *t = st->t;
    CHECK(l == st->expect, "leaf %u out of chain order", l->id);
    st->expect = l->next;
    CHECK(l->next || t->tail == l, "tail is not the last leaf");
    CHECK(!l->next || l->next->prev == l, "broken prev link after leaf %u", l->id);
    CHECK(l->id > 0 && l->id < t->nids && leafAt(t, l->id) == l, "leaf %u not in the leaf table", l->id);
    CHECK(l->count > 0 || t->height == 0, "empty leaf %u in a tree", l->id);
    CHECK(l->used <= leafCap(l), "leaf %u overfull", l->id);
    if (arenaOf(t)) {
        CHECK(l == arenaSlot(arenaOf(t), l->id), "leaf %u not in its arena slot", l->id);
        CHECK(l->alloc == ZBT_LEAF_BYTES, "arena leaf %u: alloc %u", l->id, l->alloc);
    } else {
        st->bytes += zmalloc_size(l);
        CHECK(l->alloc == zmalloc_size(l), "leaf %u: alloc %u, allocated %zu", l->id, l->alloc, zmalloc_size(l));
    }
    size_t off = 0;
    double prev = 0.0;
    for (int i = 0; i < l->count; i++) {
        item it;
        CHECK(off < l->used, "leaf %u: entries past its used bytes", l->id);
        decode(t, l->data + off, prev, &it);
        CHECK(!isnan(it.score), "NaN score in leaf %u", l->id);
        if (it.ool) {
            CHECK(it.len > ZBT_MAX_INLINE, "short member out of line in leaf %u", l->id);
            st->bytes += zmalloc_size(it.ool);
            st->ool++;
        } else {
            CHECK(it.len <= ZBT_MAX_INLINE, "long member inline in leaf %u", l->id);
        }
        /* A long time may be one a later base lets be short (rebase). */
        size_t timeBytes = timeBytesFor(timeBase(t), it.when);
        if (it.when && itemSize(t, prev, &it) != it.size) timeBytes = TIME_LONG_BYTES;
        CHECK(encodedSize(prev, it.score, it.len, it.ool != NULL, timeBytes) == it.size,
              "leaf %u: entry %d not in its shortest encoding", l->id, i);
        if (st->haveLast) {
            const unsigned char *lm = st->lastOol ? st->lastOol : st->lastMember;
            CHECK(cmpKey(st->lastScore, lm, st->lastLen, it.score, it.m, it.len) < 0,
                  "keys out of order at leaf %u entry %d", l->id, i);
        }
        st->haveLast = 1;
        st->lastScore = it.score;
        st->lastLen = it.len;
        st->lastOol = it.ool;
        if (!it.ool) memcpy(st->lastMember, it.m, it.len);
        if (i == 0) *min = it.score;
        if (it.when) {
            CHECK(t->times && it.when <= ZBT_TIME_MAX, "leaf %u: entry %d has time %llu", l->id, i,
                  (unsigned long long)it.when);
            CHECK(t->times->bound[l->id] <= it.when, "leaf %u: bound %llu after entry %d's time %llu", l->id,
                  (unsigned long long)t->times->bound[l->id], i, (unsigned long long)it.when);
            st->timed++;
        }
        uint64_t h = memberHash(it.m, it.len);
        st->slots[st->nslots++] = (h & 0xffffffff00000000ULL) | l->id;
        prev = it.score;
        off += it.size;
    }
    CHECK(off == l->used, "leaf %u: used %u, entries take %zu", l->id, l->used, off);
    *count = l->count;
    st->entries += l->count;
    return 1;
}

static int checkNode(checkState *st, void *node, int level, zbtInner *parent, unsigned long *count, double *min) {
    if (level == 0) {
        CHECK(((zbtLeaf *)node)->parent == parent, "leaf with a wrong parent");
        return checkLeaf(st, node, count, min);
    }
    zbtInner *in = node;
    CHECK(in->parent == parent, "inner node with a wrong parent");
    CHECK(in->level == level, "inner node at level %d says %d", level, in->level);
    CHECK(in->n <= in->cap && in->cap <= ZBT_INNER_FANOUT && (!parent || in->cap == ZBT_INNER_FANOUT),
          "inner node with %d children in %d places", in->n, in->cap);
    CHECK(in->n >= (parent ? (onEdge(in, 0) || onEdge(in, 1) ? 1 : (int)ZBT_INNER_MIN) : 2),
          "inner node with %d children", in->n);
    st->bytes += zmalloc_size(in);
    unsigned long sum = 0;
    for (int i = 0; i < in->n; i++) {
        unsigned long c;
        double m;
        if (!checkNode(st, kids(in)[i], level - 1, in, &c, &m)) return 0;
        CHECK(c == cnt(in)[i], "count %lu below child %d, %lu counted", c, i, cnt(in)[i]);
        CHECK(sameBits(m, mins(in)[i]), "child %d: minimum %.17g, first score %.17g", i, mins(in)[i], m);
        sum += c;
    }
    *count = sum;
    *min = mins(in)[0];
    return 1;
}

static int cmpSlot(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void collectSlot(void *ctx, uint32_t h32, uint32_t id) {
    checkState *st = ctx;
    st->slots[st->nslots++] = ((uint64_t)h32 << 32) | id;
}

static int checkAll(checkState *st) {
    zbt *t = st->t;
    unsigned long count;
    double min;
    CHECK(t->head && !t->head->prev, "head has a prev link");
    if (!checkNode(st, t->root, t->height, NULL, &count, &min)) return 0;
    CHECK(st->expect == NULL, "leaf chain longer than the tree");
    CHECK(count == t->length && st->entries == t->length, "length %lu, %lu entries", t->length, count);
    /* Free ids past nids, which the arena gave back, may stay listed. */
    uint32_t free = 0, listed = 0;
    for (uint32_t id = t->freeid; id; id = (uint32_t)((uintptr_t)leafAt(t, id) >> 1)) {
        CHECK(id < t->idcap && ((uintptr_t)leafAt(t, id) & 1), "broken free id list");
        CHECK(++listed < t->idcap, "free id list loops");
        free += id < t->nids;
    }
    CHECK(free == t->nfree, "%u free ids listed below nids, nfree %u", free, t->nfree);
    size_t leafCount = 0;
    for (zbtLeaf *l = t->head; l; l = l->next) leafCount++;
    CHECK(leafCount + free + 1 == t->nids, "leaf ids: %zu leaves, %u free, %u handed out", leafCount, free, t->nids);
    const leafArena *a = arenaOf(t);
    if (a) {
        CHECK(leafCount >= ZBT_ARENA_OFF, "%zu leaves in an arena", leafCount);
        CHECK(t->nfree <= leafCount / 32 + ARENA_SLACK, "%u free ids in an arena of %zu leaves", t->nfree, leafCount);
        CHECK(a->nchunks == chunksFor(t->nids), "%u chunks for %u ids", a->nchunks, t->nids);
        st->bytes += zmalloc_size((void *)a);
        for (uint32_t i = 0; i < a->nchunks; i++) st->bytes += zmalloc_size(a->chunk[i]);
        for (uint32_t id = 1; id < t->nids; id++)
            CHECK(!((uintptr_t)leafAt(t, id) & 1) || !arenaSlot(a, id)->parent, "free id %u has a parent", id);
    } else {
        CHECK(leafCount < ZBT_ARENA_ON, "%zu leaves, none in an arena", leafCount);
    }
    if (t->times) {
        zbtTimes *tm = t->times;
        CHECK(tm->timed == st->timed, "%llu timed entries counted, %llu found", (unsigned long long)tm->timed,
              (unsigned long long)st->timed);
        CHECK(tm->cap >= t->nids, "bounds for %zu ids of %u", tm->cap, t->nids);
        for (uint32_t id = 1; id < t->nids; id++) {
            CHECK(tm->earliest <= tm->bound[id], "earliest %llu after leaf %u's bound",
                  (unsigned long long)tm->earliest, id);
            CHECK(!((uintptr_t)leafAt(t, id) & 1) || tm->bound[id] == NO_TIME, "free id %u has a bound", id);
        }
        st->bytes += zmalloc_size(tm);
    } else {
        CHECK(st->timed == 0, "timed entries without times");
    }
    st->bytes += zmalloc_size(t) + leafTableBytes(t);
    CHECK(st->bytes == t->bytes, "allocated bytes %zu, counted %zu", t->bytes, st->bytes);
    if (!t->index) {
        CHECK(t->length <= ZBT_INDEX_ON, "%lu entries without an index", t->length);
        CHECK(st->ool == 0, "%lu out-of-line members without an index", st->ool);
        return 1;
    }
    const char *ixErr = zmiCheck(t->index);
    CHECK(!ixErr, "index: %s", ixErr);
    CHECK(zmiCount(t->index) == t->length, "index holds %zu slots for %lu entries", zmiCount(t->index), t->length);
    size_t expected = st->nslots;
    zmiForEach(t->index, collectSlot, st);
    qsort(st->slots, expected, sizeof(uint64_t), cmpSlot);
    qsort(st->slots + expected, st->nslots - expected, sizeof(uint64_t), cmpSlot);
    CHECK(memcmp(st->slots, st->slots + expected, expected * sizeof(uint64_t)) == 0,
          "index slots differ from the entries' (hash, leaf)");
    return 1;
}

/* Validates every invariant of the header comment, the index's, and the
 * byte count behind zbtAllocSize. O(n log n): for tests. */
const char *zbtCheck(zbt *t) {
    settle(t);
    checkState st = {.t = t, .expect = t->head};
    st.slots = zmalloc(sizeof(uint64_t) * (t->length + 1) * 2);
    int ok = checkAll(&st);
    zfree(st.slots);
    return ok ? NULL : st.err;
}
