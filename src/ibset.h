/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * The engine of big integer sets: signed 64-bit integers, sorted, packed in
 * small blocks (fixed-width offsets or a bitmap) behind a two-level index
 * that counts members. See ibset.c for the layout.
 */
#ifndef IBSET_H
#define IBSET_H

#include <stddef.h>
#include <stdint.h>

typedef struct ibset ibset;

/* The first word of every ibset. A big set of strings (hpset.c) behind the
 * same object encoding starts with its own tag (HPSET_TAG): this word is
 * what tells the two apart (ibsIsSet). */
#define IBSET_TAG UINT64_C(0x7465736b636f6c01)

/* A position: the member and where it lies. Valid until the next write. */
typedef struct ibsCursor {
    const ibset *s;
    uint32_t page, block;
    uint32_t pos; /* Index in an array block, bit in a bitmap block. */
    int64_t value;
} ibsCursor;

ibset *ibsCreate(void);
void ibsFree(ibset *s);
int ibsIsSet(const void *p);
uint64_t ibsLength(const ibset *s);
size_t ibsAllocSize(const ibset *s);

/* Insert: 1 if added, 0 if it was there. Delete: 1 if it was there. */
int ibsInsert(ibset *s, int64_t v);
int ibsDelete(ibset *s, int64_t v);
int ibsContains(const ibset *s, int64_t v);
void ibsPrefetch(const ibset *s, int64_t v);

/* Bulk building from ascending input: v must exceed every member (returns
 * 0 and does nothing otherwise). Fills blocks whole. */
int ibsAppend(ibset *s, int64_t v);

/* The member of 0-based rank r < ibsLength. */
int64_t ibsAtRank(const ibset *s, uint64_t r);

/* Walking in ascending order. ibsSeek: the first member >= v. Each returns
 * 0 when there is no such member. */
int ibsFirst(const ibset *s, ibsCursor *c);
int ibsSeek(const ibset *s, int64_t v, ibsCursor *c);
int ibsNext(ibsCursor *c);

/* Defrag (upstream's activeDefragAlloc contract: fn returns the new
 * address, or NULL when the allocation did not move). The shell is the
 * struct and its index (returns the set's new address, or NULL); the
 * blocks go a page of the index at a time from page `from`, `count` pages
 * a call, until it returns 0. The set may change between steps. */
ibset *ibsDefragShell(ibset *s, void *(*fn)(void *));
uint32_t ibsDefragBlocks(ibset *s, uint32_t from, uint32_t count, void *(*fn)(void *));

/* Calls fn on each allocation of min bytes or more (a fork child that has
 * saved the set hands their pages back). */
void ibsDismiss(ibset *s, size_t min, void (*fn)(void *ptr, size_t size));

typedef struct ibsStats {
    size_t pages, blocks;
    size_t arrayBlocks[4]; /* Of offsets 1, 2, 4 and 8 bytes wide. */
    size_t bitmapBlocks;
    size_t blockBytes, indexBytes; /* Allocated. */
    size_t dataBytes;              /* Bytes of members in the blocks. */
} ibsStats;

void ibsGetStats(const ibset *s, ibsStats *st);

/* NULL when every invariant holds, else what is wrong. */
const char *ibsCheck(const ibset *s);

#endif
