/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * keyttl.c - a key's expire time in four bytes where it can be
 *
 * Upstream keeps a key's expire time (absolute unix milliseconds) in an
 * 8-byte field of the key's object, between the object's header and its
 * embedded key. Here the field is one of two forms, told apart by the
 * header bit `expireshort`:
 *
 *   long form, 8 bytes:   the time as upstream stores it (any long long;
 *                         -1 is "no expire")
 *   short form, 4 bytes:  +-----+----------------------------------+
 *                         | tag |             offset               |
 *                         +-----+----------------------------------+
 *                          2 bits             30 bits
 *                         time = base(generation owned by tag) + offset;
 *                         the word 0xFFFFFFFF is "no expire"
 *
 * Time is cut into generations of KTTL_GEN_MS (2^28 ms, 3.1 days): the
 * base of generation g is g * KTTL_GEN_MS, and its window the 2^30 ms
 * (12.4 days, four generations) from its base. Each of the four tags owns
 * one generation at a time; a short field names a tag, and the tag's
 * generation gives the base. So a time fits a short field when it lies in
 * the window of a generation some tag owns, or when a tag is free to take
 * a generation whose window holds it.
 *
 * Invariants:
 * - users[t] is the number of short fields, in every object that exists,
 *   whose word names tag t (the "no expire" word names none).
 * - gen[t] changes only while users[t] is 0. So decoding needs nothing
 *   but the word and the table, at any time and on any thread that can
 *   read the object: no clock is read, and a base that moves on never
 *   reinterprets a stored field.
 * - A tag is taken for the generation one before the time's own, so the
 *   time lies one to two generations into the window and six to nine
 *   days later still fit. Times set as now + TTL keep fitting that tag as
 *   the clock moves; a tag is taken anew about every nine days, and its
 *   old generation is given up when the last field naming it goes
 *   (deleted, expired, persisted, or overwritten).
 * - When no tag owns a fitting window and none is free (fields of four
 *   different generations still live: keys long past due on a replica,
 *   say), a time takes the long form. Nothing is ever misread; memory is
 *   all that a long form costs.
 *
 * The counts are atomic: a lazily freed object releases its field on a
 * background thread. Tags are taken and counted up on the main thread
 * only, so a count seen at zero there stays zero until the main thread
 * itself encodes.
 *
 * Public prefix `kttl`; the object layout around the field is object.c's.
 */
#include "keyttl.h"

#include <stdatomic.h>

static struct {
    long long gen[KTTL_TAGS];                     /* -1: never owned */
    _Atomic unsigned long long users[KTTL_TAGS];
} kttl = {{-1, -1, -1, -1}, {0, 0, 0, 0}};

static long long genBase(long long gen) {
    return gen << KTTL_GEN_BITS;
}

/* The tag whose owned window holds `when`, or -1. */
static int ownedTagFor(long long when) {
    for (int t = 0; t < KTTL_TAGS; t++) {
        long long g = kttl.gen[t];
        if (g < 0) continue;
        long long base = genBase(g);
        if (when >= base && when - base <= KTTL_OFFSET_MAX) return t;
    }
    return -1;
}

/* A tag no field names, or -1. */
static int freeTag(void) {
    for (int t = 0; t < KTTL_TAGS; t++)
        if (atomic_load_explicit(&kttl.users[t], memory_order_acquire) == 0) return t;
    return -1;
}

static bool inShortRange(long long when) {
    return when >= 0 && when < KTTL_TIME_MAX;
}

/* Whether `when` would take a short field now. Takes no tag. */
bool kttlFits(long long when) {
    if (!inShortRange(when)) return false;
    return ownedTagFor(when) >= 0 || freeTag() >= 0;
}

/* Encodes `when` as a short field, counting the field as a user of its
 * tag: the caller stores `*word` in an object, and releases it with
 * kttlRelease when the object goes or the field changes. Returns false
 * (and counts nothing) when `when` needs the long form. */
bool kttlEncode(long long when, uint32_t *word) {
    if (!inShortRange(when)) return false;
    int t = ownedTagFor(when);
    if (t < 0) {
        if ((t = freeTag()) < 0) return false;
        long long g = (when >> KTTL_GEN_BITS) - 1;
        kttl.gen[t] = g < 0 ? 0 : g;
    }
    atomic_fetch_add_explicit(&kttl.users[t], 1, memory_order_relaxed);
    *word = ((uint32_t)t << KTTL_OFFSET_BITS) | (uint32_t)(when - genBase(kttl.gen[t]));
    return true;
}

/* The time a short field holds, or -1 for the "no expire" word. */
long long kttlDecode(uint32_t word) {
    if (word == KTTL_NONE_WORD) return -1;
    return genBase(kttl.gen[word >> KTTL_OFFSET_BITS]) + (word & KTTL_OFFSET_MASK);
}

/* A short field goes away (its object is freed, or the field rewritten). */
void kttlRelease(uint32_t word) {
    if (word == KTTL_NONE_WORD) return;
    atomic_fetch_sub_explicit(&kttl.users[word >> KTTL_OFFSET_BITS], 1, memory_order_release);
}

long long kttlTagGeneration(int tag) {
    return kttl.gen[tag];
}

unsigned long long kttlTagUsers(int tag) {
    return atomic_load_explicit(&kttl.users[tag], memory_order_relaxed);
}

/* Forgets every tag: for tests, with no short field left anywhere. */
void kttlReset(void) {
    for (int t = 0; t < KTTL_TAGS; t++) {
        kttl.gen[t] = -1;
        atomic_store(&kttl.users[t], 0);
    }
}
