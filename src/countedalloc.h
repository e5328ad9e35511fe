/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Allocations that keep a running count. Each engine (zbtree.c, zmindex.c,
 * ibset.c, hpset.c) holds the bytes it has allocated in one size_t, so that
 * MEMORY USAGE of its key is exact and costs nothing to answer. The count
 * moves by the allocator's usable size, not the size asked for: that is
 * what used_memory sees.
 */
#ifndef COUNTEDALLOC_H
#define COUNTEDALLOC_H

#include <stddef.h>

#include "zmalloc.h"

/* *usable is set to the allocation's usable size. */
static inline void *countedAllocUsable(size_t *bytes, size_t size, size_t *usable) {
    void *p = zmalloc_usable(size, usable);
    *bytes += *usable;
    return p;
}

static inline void *countedAlloc(size_t *bytes, size_t size) {
    size_t usable;
    return countedAllocUsable(bytes, size, &usable);
}

/* p may be NULL. *usable, unless NULL, is set to the new usable size. */
static inline void *countedRealloc(size_t *bytes, void *p, size_t size, size_t *usable) {
    size_t old = p ? zmalloc_size(p) : 0, now;
    p = zrealloc_usable(p, size, &now);
    *bytes += now - old;
    if (usable) *usable = now;
    return p;
}

/* p may be NULL. */
static inline void countedFree(size_t *bytes, void *p) {
    if (!p) return;
    *bytes -= zmalloc_size(p);
    zfree(p);
}

#endif
