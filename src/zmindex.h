/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * The member index of a big sorted set: from a member's hash to the id of
 * the B+ tree leaf that holds it. See zmindex.c for the layout.
 */
#ifndef ZMINDEX_H
#define ZMINDEX_H

#include <stddef.h>
#include <stdint.h>

typedef struct zmi zmi;

/* Candidates for one hash, in no particular order: the caller checks each
 * leaf for the member. Valid until the index changes. */
typedef struct zmiIter {
    const void *seg;
    uint32_t cap, depth;
    uint32_t pos, dist;
    uint32_t h32;
} zmiIter;

zmi *zmiCreate(size_t expected);
void zmiFree(zmi *ix);
size_t zmiCount(const zmi *ix);
size_t zmiAllocSize(const zmi *ix);

uint32_t zmiFirst(const zmi *ix, uint64_t hash, zmiIter *it);
uint32_t zmiNext(zmiIter *it);
void zmiInsert(zmi *ix, uint64_t hash, uint32_t id);
/* Asks for the cache line where a lookup of hash starts. */
void zmiPrefetch(const zmi *ix, uint64_t hash);
int zmiRemove(zmi *ix, uint64_t hash, uint32_t id);
int zmiRepoint(zmi *ix, uint64_t hash, uint32_t from, uint32_t to);

/* Visits slots in hash order from hash bits `from` on, until `count` were
 * visited and every slot of the last hash was; returns where to go on,
 * 2^32 when done. Segments cover ranges of hashes, so a position stays
 * meaningful across resizes (ZSCAN's cursor). */
uint64_t zmiScan(const zmi *ix, uint64_t from, size_t count, void (*visit)(void *ctx, uint32_t h32, uint32_t id),
                 void *ctx);

/* While set, deletes rebuild no segment smaller (a fork child shares the
 * pages: upstream's hash tables avoid resizing then). */
void zmiSetPagesShared(int shared);

/* Calls fn on each allocation of `min` bytes or more (segments, the
 * directory). */
void zmiDismiss(zmi *ix, size_t min, void (*fn)(void *ptr, size_t size));
/* The segments alone. A lookup in segments handed back (read as zeros)
 * finds nothing: the directory it starts from is kept. */
void zmiDismissSegments(zmi *ix, size_t min, void (*fn)(void *ptr, size_t size));

/* Calls fn on each allocation; fn returns the new address or NULL if it did
 * not move the allocation (upstream's activeDefragAlloc contract). */
void zmiDefrag(zmi *ix, void *(*fn)(void *));

/* Calls visit on every (hash bits, id) slot, for the consistency check. The
 * hash bits are the top 32 bits of the member's hash. */
void zmiForEach(const zmi *ix, void (*visit)(void *ctx, uint32_t h32, uint32_t id), void *ctx);
const char *zmiCheck(const zmi *ix);

/* The index's figures, for DEBUG BTREE and DEBUG HTSTATS-KEY. */
typedef struct zmiStats {
    size_t entries, slots, segments, bytes;
    unsigned depth;            /* Directory depth: top hash bits it uses. */
    unsigned longestProbe;     /* Furthest slot from its home. */
    size_t largestSegmentBytes;
} zmiStats;

void zmiGetStats(const zmi *ix, zmiStats *st);

#endif
