/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * A key's expire time in four bytes where it can be: keyttl.c says how.
 */
#ifndef KEYTTL_H
#define KEYTTL_H

#include <stdbool.h>
#include <stdint.h>

/* The word that says "no expire" in a short field (an object keeps its
 * expire field once it has one, as upstream's does). */
#define KTTL_NONE_WORD UINT32_MAX

/* Four tags, each owning one generation at a time. */
#define KTTL_TAG_BITS 2
#define KTTL_TAGS (1 << KTTL_TAG_BITS)
#define KTTL_OFFSET_BITS (32 - KTTL_TAG_BITS)
#define KTTL_OFFSET_MASK ((UINT32_C(1) << KTTL_OFFSET_BITS) - 1)
/* The largest offset a short form holds: the one above it, with tag 3, is
 * KTTL_NONE_WORD, so no tag uses it. */
#define KTTL_OFFSET_MAX (KTTL_OFFSET_MASK - 1)
/* A generation is 2^28 ms (3 days, 2 h 33 min); its base is a multiple of
 * that, and its window the 2^30 ms (12 days, 10 h) from its base. */
#define KTTL_GEN_BITS 28
#define KTTL_GEN_MS (INT64_C(1) << KTTL_GEN_BITS)
/* Short forms hold times from the epoch to 2^62 ms (146 million years);
 * the rest (the times before 1970 PEXPIREAT accepts among them) take the
 * long form. */
#define KTTL_TIME_MAX (INT64_C(1) << 62)

bool kttlFits(long long when);
bool kttlEncode(long long when, uint32_t *word);
long long kttlDecode(uint32_t word);
void kttlRelease(uint32_t word);

/* What a tag holds: the generation it owns (-1 before its first) and how
 * many short fields name it. For INFO, DEBUG and the unit tests. */
long long kttlTagGeneration(int tag);
unsigned long long kttlTagUsers(int tag);
void kttlReset(void);

#endif
