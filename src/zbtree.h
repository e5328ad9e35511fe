/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * The engine of big sorted sets: a packed, rank-annotated B+ tree of
 * (score, member) entries with a member index. See zbtree.c for the layout.
 */
#ifndef ZBTREE_H
#define ZBTREE_H

#include <stddef.h>
#include <stdint.h>

typedef struct zbt zbt;
typedef struct zbtLeaf zbtLeaf;

/* Members longer than this live out of line, behind a pointer. */
#define ZBT_MAX_INLINE 64

/* Node sizes: a leaf, an inner node. Tests build the engine with small
 * nodes too, so that a few hundred entries make a deep tree. */
#ifndef ZBT_LEAF_BYTES
#define ZBT_LEAF_BYTES 512
#endif
#ifndef ZBT_INNER_BYTES
#define ZBT_INNER_BYTES 1024
#endif

/* Entries a leaf can hold at most (every entry takes a byte or more). */
#define ZBT_LEAF_MAX_ENTRIES ZBT_LEAF_BYTES

/* A position in the tree and a view of its entry. The member bytes stay
 * valid until the next write to the tree. */
typedef struct zbtCursor {
    zbt *t;
    zbtLeaf *leaf;
    uint16_t off;  /* Offset of the entry in the leaf's payload. */
    uint16_t idx;  /* Index of the entry in the leaf. */
    uint16_t size; /* Encoded size of the entry. */
    double score;
    const unsigned char *member;
    size_t len;
    uint64_t when; /* The entry's time (zbtSetTime), 0 for none. */
    /* Offsets and scores of the leaf's entries, filled when stepping
     * backwards (entries are variable-length and delta-encoded). */
    zbtLeaf *cached;
    uint16_t offs[ZBT_LEAF_MAX_ENTRIES];
    double scores[ZBT_LEAF_MAX_ENTRIES];
} zbtCursor;

/* Bounds of a score range, as ZRANGEBYSCORE takes them. */
typedef struct zbtScoreRange {
    double min, max;
    int minex, maxex; /* Exclusive bounds. */
} zbtScoreRange;

/* Bounds of a lex range: a NULL bound with inf set is - (inf < 0) or +
 * (inf > 0). */
typedef struct zbtLexBound {
    const unsigned char *s;
    size_t len;
    int inf;
    int ex;
} zbtLexBound;

typedef struct zbtLexRange {
    zbtLexBound min, max;
} zbtLexRange;

enum {
    ZBT_OK = 0,
    ZBT_ERR_ORDER = 1, /* zbtAppend: the entry does not follow the last one. */
    ZBT_ERR_DUP = 2,   /* The member is already in the set. */
    ZBT_ERR_NAN = 3,   /* NaN is no score. */
};

zbt *zbtCreate(size_t expected);
void zbtFree(zbt *t);
unsigned long zbtLength(const zbt *t);
size_t zbtAllocSize(const zbt *t);
void zbtSetHashSeed(const uint8_t seed[16]);
/* While set (a fork child shares the server's pages), reads write nothing
 * to a tree and the member index gives back no memory (upstream's hash
 * tables avoid resizing then, likewise). */
void zbtSetPagesShared(int shared);

/* By member. */
int zbtScore(zbt *t, const unsigned char *m, size_t len, double *score);
int zbtFind(zbt *t, const unsigned char *m, size_t len, zbtCursor *c);
/* Reads ahead for lookups of m[i] in t[i] about to come (at most
 * ZBT_PREFETCH_MAX are used). The lookups that follow are best made in the
 * same order, one each. Writes nothing. */
#define ZBT_PREFETCH_MAX 16
void zbtPrefetchMany(zbt *const *t, const unsigned char *const *m, const size_t *len, size_t n);
/* For one lookup about to come: asks for the first line it will wait for. */
void zbtPrefetchOne(zbt *t, const unsigned char *m, size_t len);
int zbtInsert(zbt *t, double score, const unsigned char *m, size_t len);

/* ZADD's check and insert with one hash and one probe of the index:
 * zbtScore that, when the member is missing, fills a zbtMiss with which
 * zbtInsertMissing adds that same member, as long as nothing wrote to the
 * tree in between. */
typedef struct zbtMiss {
    uint64_t hash, version;
} zbtMiss;

int zbtScoreOrMiss(zbt *t, const unsigned char *m, size_t len, double *score, zbtMiss *miss);
int zbtInsertMissing(zbt *t, double score, const unsigned char *m, size_t len, const zbtMiss *miss);
/* The same, the new entry with a time (0: none; see Times below). */
int zbtInsertMissingTimed(zbt *t, double score, const unsigned char *m, size_t len, const zbtMiss *miss,
                          uint64_t when);
/* The member may lie in the tree itself (a cursor's): it is read only
 * before the entry goes. */
int zbtDelete(zbt *t, const unsigned char *m, size_t len, double *score);
int zbtUpdateScore(zbt *t, const unsigned char *m, size_t len, double score);
/* A member's score and time at once (ZBT_TIME_KEEP keeps its time; see
 * Times below): 1 if m is a member, 0 if not, ZBT_ERR_NAN. */
#define ZBT_TIME_KEEP UINT64_MAX
int zbtUpdate(zbt *t, const unsigned char *m, size_t len, double score, uint64_t when);
int zbtRank(zbt *t, const unsigned char *m, size_t len, int reverse, unsigned long *rank);

/* Times: an entry may carry one, 1 .. ZBT_TIME_MAX (the server's expire
 * times in Unix ms), stored after it in its leaf; 0 is none. An entry's
 * time stays through splits, merges, score updates and defrag, and goes
 * with it. A tree that never had one pays nothing for them.
 * zbtTime: 1 if m is a member, with *when its time or 0.
 * zbtSetTime: sets (0: drops) a member's time, *old (unless NULL) its time
 * before; 0 if m is no member.
 * zbtEarliest: at most the earliest time of any entry (0: none); exact
 * after zbtDue.
 * zbtDue: takes out up to max entries whose time is `now` or earlier,
 * handing each to fn first (its member valid until fn returns); returns
 * how many. It reads the leaves whose bound has come. */
#define ZBT_TIME_MAX (UINT64_C(1) << 48)
int zbtTime(zbt *t, const unsigned char *m, size_t len, uint64_t *when);
int zbtSetTime(zbt *t, const unsigned char *m, size_t len, uint64_t when, uint64_t *old);
uint64_t zbtEarliest(const zbt *t);
uint64_t zbtTimedCount(const zbt *t);
typedef void (*zbtDueFn)(void *ctx, const unsigned char *m, size_t len, double score, uint64_t when);
size_t zbtDue(zbt *t, uint64_t now, size_t max, zbtDueFn fn, void *ctx);
/* A byte the server keeps with the tree (whether its database tracks the
 * key for its times), 0 in a new tree: carried, never read. */
uint8_t *zbtMark(zbt *t);

/* Bulk building from sorted input: ascending or descending, strictly. */
int zbtAppend(zbt *t, double score, const unsigned char *m, size_t len);
/* The same for an entry with a time (0: none; see zbtSetTime). */
int zbtAppendTimed(zbt *t, double score, const unsigned char *m, size_t len, uint64_t when);
void zbtAppendDone(zbt *t);

/* Positions: 0-based ranks. */
int zbtAtRank(zbt *t, unsigned long rank, zbtCursor *c);
unsigned long zbtCursorRank(const zbtCursor *c);
/* The first entry at or after (score, member); 0 when there is none. */
int zbtSeek(zbt *t, double score, const unsigned char *m, size_t len, zbtCursor *c);
/* The tree's order of entries: by score, then by the members' bytes. */
int zbtCompare(double s1, const unsigned char *m1, size_t l1, double s2, const unsigned char *m2, size_t l2);
/* Changes with every write that may move an entry (and with defrag): a
 * cursor taken at one version is valid while the version stays. */
uint64_t zbtVersion(zbt *t);
int zbtNext(zbtCursor *c);
int zbtPrev(zbtCursor *c);
int zbtFirst(zbt *t, zbtCursor *c);
int zbtLast(zbt *t, zbtCursor *c);

/* Ranges. First/last entry inside; counts; deletes (which also free the
 * members and their index slots). */
int zbtScoreRangeEmpty(const zbtScoreRange *r);
int zbtLexRangeEmpty(const zbtLexRange *r);
int zbtFirstInScoreRange(zbt *t, const zbtScoreRange *r, zbtCursor *c);
int zbtLastInScoreRange(zbt *t, const zbtScoreRange *r, zbtCursor *c);
int zbtFirstInLexRange(zbt *t, const zbtLexRange *r, zbtCursor *c);
int zbtLastInLexRange(zbt *t, const zbtLexRange *r, zbtCursor *c);
/* The offset-th entry from the range's first (its last when reverse); a
 * negative offset counts from the other end, -1 being the entry there
 * (upstream 9.1's LIMIT on a skiplist). */
int zbtNthInScoreRange(zbt *t, const zbtScoreRange *r, long offset, int reverse, zbtCursor *c);
int zbtNthInLexRange(zbt *t, const zbtLexRange *r, long offset, int reverse, zbtCursor *c);
unsigned long zbtCountScoreRange(zbt *t, const zbtScoreRange *r);
unsigned long zbtCountLexRange(zbt *t, const zbtLexRange *r);
unsigned long zbtDeleteRankRange(zbt *t, unsigned long start, unsigned long end);
unsigned long zbtDeleteScoreRange(zbt *t, const zbtScoreRange *r);
unsigned long zbtDeleteLexRange(zbt *t, const zbtLexRange *r);
int zbtScoreInRange(double score, const zbtScoreRange *r);
int zbtLexInRange(const unsigned char *m, size_t len, const zbtLexRange *r);

/* ZSCAN: visits members in the order of their hashes from cursor on (0 to
 * start), at least count of them, and returns the cursor to go on with (0
 * when done). A member present for the whole scan is visited exactly once,
 * whatever is added, removed or resized meanwhile. */
typedef void (*zbtScanFn)(void *privdata, const unsigned char *m, size_t len, double score);
unsigned long long zbtScan(zbt *t, unsigned long long cursor, size_t count, zbtScanFn fn, void *privdata);

/* Moves every allocation through fn (upstream's activeDefragAlloc
 * contract: the new address, or NULL when it did not move). Returns the
 * tree's new address, or NULL if the tree struct did not move. */
zbt *zbtDefrag(zbt *t, void *(*fn)(void *));

/* The same in steps, for a big tree (upstream's defrag-later): first the
 * tree's struct, inner nodes, leaf table and index, then its leaves by id,
 * count ids a call, from 0 until it returns 0. The tree may change between
 * the steps: a leaf that comes after a step is simply not visited. */
zbt *zbtDefragShell(zbt *t, void *(*fn)(void *));
uint32_t zbtDefragLeaves(zbt *t, uint32_t from, uint32_t count, void *(*fn)(void *));

/* Calls fn on each of the tree's allocations of `min` bytes or more (leaf
 * arena chunks, the leaf table, member index segments): a fork child that
 * has saved the tree hands their pages back (upstream's dismissObject). */
void zbtDismiss(zbt *t, size_t min, void (*fn)(void *ptr, size_t size));

/* The member index's segments alone, for a fork child about to save the
 * tree: a walk in order reads no index, and the server's writes to the
 * index while the save goes on (a ZINCRBY that moves a member re-points
 * its slot) then copy nothing. A member looked up after it is not found;
 * walks, ranks and ranges still work. zbtDismiss may follow. */
void zbtDismissIndex(zbt *t, size_t min, void (*fn)(void *ptr, size_t size));

/* Where the bytes of a tree go, for DEBUG and the benchmarks. */
typedef struct zbtStats {
    size_t leaves, inners, height;
    size_t leafBytes, innerBytes, oolBytes, indexBytes, otherBytes;
    size_t payloadUsed; /* Bytes of entries in the leaves. */
    size_t payloadCap;  /* Bytes leaves can hold entries in. */
    size_t arenaChunks; /* 0: every leaf is an allocation of its own. */
    size_t leafIds, freeIds;
} zbtStats;

/* The member index (zmindex.h), for its figures. */
const struct zmi *zbtIndex(const zbt *t);

/* The tree's height, in O(1) (crash reports). 0 when the root is a leaf. */
int zbtHeight(const zbt *t);

void zbtGetStats(zbt *t, zbtStats *s);

/* NULL when every invariant holds, else what is wrong. */
const char *zbtCheck(zbt *t);

#endif
