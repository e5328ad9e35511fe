/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * The keys of a database that have an expire time, found through the
 * keyspace itself: vkeys.c says how.
 */
#ifndef VKEYS_H
#define VKEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvstore.h"

typedef struct vkeys vkeys;

/* Whether an entry of the keyspace has an expire time. */
typedef bool vkeysEntryIsVolatile(const void *entry);

vkeys *vkeysCreate(int num_slots_bits, vkeysEntryIsVolatile *is_volatile);
void vkeysEmpty(vkeys *vk);
void vkeysRelease(vkeys *vk);

/* A key of `keys` (in slot `didx`) gets an expire time, or loses it (by
 * PERSIST, or by leaving the keyspace). */
void vkeysAdd(vkeys *vk, kvstore *keys, int didx, const void *key);
void vkeysRemove(vkeys *vk, int didx);

void vkeysSetImporting(vkeys *vk, int didx, int is_importing);

/* Counts, as kvstore's: importing slots apart. */
unsigned long long vkeysSize(vkeys *vk);
unsigned long long vkeysImportingSize(vkeys *vk);
unsigned long vkeysSlotSize(vkeys *vk, int didx);
int vkeysNumNonEmptySlots(vkeys *vk);
size_t vkeysMemUsage(vkeys *vk);
size_t vkeysMarkBytes(vkeys *vk);

/* Active expiry's walk over the volatile keys of `keys`: one marked bucket
 * a call, the cursor as kvstoreScan's. */
unsigned long long vkeysScan(vkeys *vk,
                             kvstore *keys,
                             unsigned long long cursor,
                             kvstoreScanFunction scan_cb,
                             kvstoreScanShouldSkipHashtable *skip_cb,
                             void *privdata);

/* Eviction's samples: a slot chosen in proportion to its volatile keys,
 * then volatile keys from a random place in it. */
int vkeysFairRandomSlot(vkeys *vk);
unsigned vkeysSampleEntries(vkeys *vk, kvstore *keys, int didx, void **dst, unsigned count);
bool vkeysRandomEntry(vkeys *vk, kvstore *keys, int didx, void **found);

const char *vkeysCheck(vkeys *vk, kvstore *keys);
size_t vkeysSetMarks(vkeys *vk, int didx);

#endif
