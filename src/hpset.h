/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * The engine of big sets of strings: members packed inline in cache-line
 * buckets addressed by their hash, in segments under a directory of the
 * hash's top bits. See hpset.c for the layout.
 */
#ifndef HPSET_H
#define HPSET_H

#include <stddef.h>
#include <stdint.h>

typedef struct hpset hpset;

/* The first word of every hpset, odd as an ibset's (IBSET_TAG) and
 * different from it: what tells the engines behind one encoding apart. */
#define HPSET_TAG UINT64_C(0x7465736b63617003)

/* The seed of the members' hashes (upstream's siphash), set by the server
 * at start so that crafted members cannot pile into one segment. */
void hpsSetHashSeed(const uint8_t seed[16]);
uint64_t hpsHash(const unsigned char *m, size_t len);

/* expected: members about to come (a load), or 0. */
hpset *hpsCreate(uint64_t expected);
void hpsFree(hpset *s);
int hpsIsSet(const void *p);
/* A byte the server keeps with the set (whether its database tracks it
 * for its members' times, t_member_ttl.c), 0 in a new set. The engine
 * carries it and never reads it. */
uint8_t *hpsMark(hpset *s);
uint64_t hpsLength(const hpset *s);
size_t hpsAllocSize(const hpset *s);

/* Insert: 1 if added, 0 if it was there. Delete: 1 if it was there. The
 * Hashed forms take hpsHash(m, len), computed once for a read ahead. A
 * member to delete may lie in the set itself (an iterator's): it is read
 * before its entry goes. */
int hpsInsert(hpset *s, const unsigned char *m, size_t len);
int hpsInsertHashed(hpset *s, uint64_t hash, const unsigned char *m, size_t len);
int hpsDelete(hpset *s, const unsigned char *m, size_t len);
int hpsDeleteHashed(hpset *s, uint64_t hash, const unsigned char *m, size_t len);
int hpsContains(const hpset *s, const unsigned char *m, size_t len);
int hpsContainsHashed(const hpset *s, uint64_t hash, const unsigned char *m, size_t len);
/* Asks for the lines a lookup of hash will read. hpsPrefetchSlot asks for
 * the directory slot hpsPrefetch reads first: a batch asks for all its
 * slots, then all its buckets. */
void hpsPrefetch(const hpset *s, uint64_t hash);
void hpsPrefetchSlot(const hpset *s, uint64_t hash);

/* A member picked uniformly (rnd: 64 random bits a call); 0 when empty.
 * *m points into the set, valid until the next write. */
int hpsRandom(const hpset *s, uint64_t (*rnd)(void), const unsigned char **m, size_t *len);

/* Times: a member may carry one, 1 .. HPS_TIME_MAX (the server's expire
 * times in Unix ms), stored beside it in its entry; 0 is none. A member's
 * time stays through growth, splits, merges and defrag, and goes with it.
 * hpsTimeHashed: 1 if m is a member, with *t its time or 0.
 * hpsSetTimeHashed: sets (t 0: drops) a member's time, *old (unless NULL)
 * its time before; 0 if no member.
 * hpsEarliest: at most the earliest time of any member (0: none).
 * hpsDue: takes out up to max members whose time is `now` or earlier,
 * handing each to fn first (m lies in the set until fn returns); returns
 * how many. */
#define HPS_TIME_MAX (UINT64_C(1) << 48)
int hpsInsertTimed(hpset *s, const unsigned char *m, size_t len, uint64_t t);
/* Adds m with time t, or gives a member already there time t (0: none):
 * one probe for both. Returns 1 if added. */
int hpsAddTimedHashed(hpset *s, uint64_t hash, const unsigned char *m, size_t len, uint64_t t);
int hpsTimeHashed(const hpset *s, uint64_t hash, const unsigned char *m, size_t len, uint64_t *t);
int hpsSetTimeHashed(hpset *s, uint64_t hash, const unsigned char *m, size_t len, uint64_t t, uint64_t *old);
uint64_t hpsEarliest(const hpset *s);
uint64_t hpsTimedCount(const hpset *s);
typedef void (*hpsDueFn)(void *ctx, const unsigned char *m, size_t len, uint64_t t);
size_t hpsDue(hpset *s, uint64_t now, size_t max, hpsDueFn fn, void *ctx);

/* Every member once, in no order, while the set is not written. */
typedef struct hpsIter {
    const hpset *s;
    uint64_t slot; /* Directory slot of the segment. */
    uint32_t bucket, off;
} hpsIter;

void hpsIterInit(const hpset *s, hpsIter *it);
int hpsIterNext(hpsIter *it, const unsigned char **m, size_t *len);
int hpsIterNextTimed(hpsIter *it, const unsigned char **m, size_t *len, uint64_t *t);

/* SSCAN: visits at least count members (all when fewer), in the order of
 * their hashes from cursor on (0 to start); returns the cursor to go on
 * with, 0 when done. A member present for the whole scan is visited at
 * least once, whatever grows, shrinks or splits meanwhile. */
typedef void (*hpsScanFn)(void *ctx, const unsigned char *m, size_t len);
uint64_t hpsScan(const hpset *s, uint64_t cursor, size_t count, hpsScanFn fn, void *ctx);

/* While set (a fork child shares the pages), deletes rebuild nothing
 * smaller: upstream's hash tables do not resize then either. */
void hpsSetPagesShared(int shared);

/* Defrag (upstream's activeDefragAlloc contract: fn returns the new
 * address, or NULL when it did not move the allocation). The shell is the
 * struct and the directory (returns the set's new address, or NULL); the
 * segments and their out-of-line members go in steps from cursor 0, about
 * count segments a call, until a call returns 0. The set may change
 * between the steps. */
hpset *hpsDefragShell(hpset *s, void *(*fn)(void *));
uint64_t hpsDefragSegments(hpset *s, uint64_t cursor, size_t count, void *(*fn)(void *));

/* Calls fn on each allocation of `min` bytes or more: a fork child that
 * has saved the set hands their pages back (upstream's dismissObject). */
void hpsDismiss(hpset *s, size_t min, void (*fn)(void *ptr, size_t size));

typedef struct hpsStats {
    uint64_t members, segments, buckets, overflowed;
    size_t bytes, segmentBytes, entryBytes, outOfLineBytes, dirBytes;
    unsigned depth, maxPerBucket;
} hpsStats;

void hpsGetStats(const hpset *s, hpsStats *st);

/* NULL when every invariant holds, else what is wrong. */
const char *hpsCheck(const hpset *s);

#endif
