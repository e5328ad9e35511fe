/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Unit tests of vkeys.c, which keys of a keyspace have an expire time,
 * built with upstream's kvstore.c and hashtable.c as the server builds
 * them: a keyspace of four slots (as a cluster's, tables allocated on
 * demand and freed when empty) whose entries are small structs with an
 * expire field.
 *
 * - A full round of the scan visits every volatile key and nothing else,
 *   through growth; two rounds without adds leave no more marks than
 *   volatile keys.
 * - Slots are chosen in proportion to their volatile keys; samples are
 *   volatile keys of the slot; importing slots are counted apart and
 *   neither scanned nor chosen.
 * - A differential run against a model: inserts, deletes, TTLs given and
 *   taken, scan steps that delete what they visit (as active expiry does),
 *   samples, importing flips, incremental rehashing and shrinking, with
 *   vkeysCheck() and the model's counts after every step.
 *
 * Built plain and under the sanitizers. VKEYS_DIFF_OPS scales the
 * differential run, VKEYS_SEED changes its random choices;
 * VKEYS_TEST=<pattern> runs the matching tests alone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hashtable.h"
#include "kvstore.h"
#include "monotonic.h"
#include "vkeys.h"
#include "zmalloc.h"

/* --- A keyspace of small entries --- */

#define SLOT_BITS 2
#define SLOTS (1 << SLOT_BITS)

typedef struct {
    long long expire; /* -1: none */
    int present;
    int slot;
    char key[16];
} entry;

static const void *entryKey(const void *e) {
    return ((const entry *)e)->key;
}

static uint64_t keyHash(const void *k) {
    return hashtableGenHashFunction(k, strlen(k));
}

static int keyCompare(const void *a, const void *b) {
    return strcmp(a, b);
}

static bool entryIsVolatile(const void *e) {
    return ((const entry *)e)->expire != -1;
}

static hashtableType keysType = {
    .entryGetKey = entryKey,
    .hashFunction = keyHash,
    .keyCompare = keyCompare,
    .rehashingStarted = kvstoreHashtableRehashingStarted,
    .rehashingCompleted = kvstoreHashtableRehashingCompleted,
    .trackMemUsage = kvstoreHashtableTrackMemUsage,
    .getMetadataSize = kvstoreHashtableMetadataSize,
};

typedef struct {
    kvstore *keys;
    vkeys *vk;
    entry *ents;
    int n;
    unsigned long long volatiles[SLOTS];
    int importing[SLOTS];
} space;

static uint64_t rngState = 0x9e3779b97f4a7c15ULL;
static uint64_t rng(void) {
    rngState ^= rngState << 13, rngState ^= rngState >> 7, rngState ^= rngState << 17;
    return rngState;
}

static space *spaceCreate(int n) {
    space *sp = calloc(1, sizeof(*sp));
    sp->keys = kvstoreCreate(&keysType, SLOT_BITS, KVSTORE_ALLOCATE_HASHTABLES_ON_DEMAND | KVSTORE_FREE_EMPTY_HASHTABLES);
    sp->vk = vkeysCreate(SLOT_BITS, entryIsVolatile);
    sp->ents = calloc(n, sizeof(entry));
    sp->n = n;
    for (int i = 0; i < n; i++) {
        sp->ents[i].expire = -1;
        sp->ents[i].slot = i % SLOTS;
        snprintf(sp->ents[i].key, sizeof(sp->ents[i].key), "k:%d", i);
    }
    return sp;
}

static void spaceRelease(space *sp) {
    vkeysRelease(sp->vk);
    kvstoreRelease(sp->keys);
    free(sp->ents);
    free(sp);
}

static void insert(space *sp, int i, int isVolatile) {
    entry *e = &sp->ents[i];
    if (e->present) return;
    assert_true(kvstoreHashtableAdd(sp->keys, e->slot, e));
    e->present = 1;
    if (isVolatile) {
        e->expire = 1000 + i;
        vkeysAdd(sp->vk, sp->keys, e->slot, e->key);
        sp->volatiles[e->slot]++;
    }
}

static void removeEntry(space *sp, int i) {
    entry *e = &sp->ents[i];
    if (!e->present) return;
    assert_true(kvstoreHashtableDelete(sp->keys, e->slot, e->key));
    e->present = 0;
    if (e->expire != -1) {
        vkeysRemove(sp->vk, e->slot);
        sp->volatiles[e->slot]--;
        e->expire = -1;
    }
}

static void giveTtl(space *sp, int i) {
    entry *e = &sp->ents[i];
    if (!e->present || e->expire != -1) return;
    e->expire = 5000 + i;
    vkeysAdd(sp->vk, sp->keys, e->slot, e->key);
    sp->volatiles[e->slot]++;
}

static void persist(space *sp, int i) {
    entry *e = &sp->ents[i];
    if (!e->present || e->expire == -1) return;
    e->expire = -1;
    vkeysRemove(sp->vk, e->slot);
    sp->volatiles[e->slot]--;
}

static void checkSpace(space *sp) {
    const char *err = vkeysCheck(sp->vk, sp->keys);
    if (err) fail_msg("vkeysCheck: %s", err);
    unsigned long long total = 0, importing = 0;
    for (int s = 0; s < SLOTS; s++) {
        assert_int_equal(vkeysSlotSize(sp->vk, s), sp->volatiles[s]);
        if (sp->importing[s])
            importing += sp->volatiles[s];
        else
            total += sp->volatiles[s];
    }
    assert_int_equal(vkeysSize(sp->vk), total);
    assert_int_equal(vkeysImportingSize(sp->vk), importing);
}

/* A scan step's callback: records what it sees, and (with `expire`)
 * deletes a third of it, as active expiry deletes what is due. */
typedef struct {
    space *sp;
    unsigned char *seen;
    int expire;
    long visits;
} scanCtx;

static void scanCb(void *privdata, void *e_, int didx) {
    scanCtx *ctx = privdata;
    entry *e = e_;
    assert_true(e->present);
    assert_int_not_equal(e->expire, -1);
    assert_int_equal(e->slot, didx);
    assert_false(ctx->sp->importing[didx]);
    int i = (int)(e - ctx->sp->ents);
    if (ctx->seen) ctx->seen[i] = 1;
    ctx->visits++;
    if (ctx->expire && rng() % 3 == 0) removeEntry(ctx->sp, i);
}

/* One whole round of the scan, from cursor 0 until it comes back to 0. */
static void scanRound(space *sp, scanCtx *ctx) {
    unsigned long long cursor = 0;
    long steps = 0;
    do {
        cursor = vkeysScan(sp->vk, sp->keys, cursor, scanCb, NULL, ctx);
        assert_true(++steps < 50000000);
    } while (cursor != 0);
}

/* --- Tests --- */

static void test_round_sees_every_volatile_key(void **state) {
    (void)state;
    space *sp = spaceCreate(40000);
    for (int i = 0; i < 40000; i++) {
        insert(sp, i, rng() % 10 == 0);
        if (i % 5000 == 4999) {
            /* Mid-growth, tables rehashing: a round sees every volatile key. */
            unsigned char *seen = calloc(sp->n, 1);
            scanCtx ctx = {.sp = sp, .seen = seen};
            scanRound(sp, &ctx);
            for (int j = 0; j <= i; j++) assert_int_equal(seen[j], sp->ents[j].expire != -1);
            free(seen);
            checkSpace(sp);
        }
    }
    /* Take nine in ten TTLs away: two rounds leave at most a mark a
     * volatile key in every slot. */
    for (int i = 0; i < 40000; i++)
        if (rng() % 10) persist(sp, i);
    for (int s = 0; s < SLOTS; s++) kvstoreIncrementallyRehash(sp->keys, 1000000);
    scanCtx ctx = {.sp = sp};
    scanRound(sp, &ctx);
    scanRound(sp, &ctx);
    for (int s = 0; s < SLOTS; s++) {
        assert_true(vkeysSetMarks(sp->vk, s) <= sp->volatiles[s]);
    }
    checkSpace(sp);
    spaceRelease(sp);
}

static void test_slots_in_proportion_and_samples(void **state) {
    (void)state;
    space *sp = spaceCreate(40000);
    /* Volatile keys: slot 0 100, slot 1 300, slot 2 none, slot 3 600. */
    int want[SLOTS] = {100, 300, 0, 600}, have[SLOTS] = {0};
    for (int i = 0; i < 40000; i++) {
        int s = i % SLOTS;
        insert(sp, i, have[s] < want[s] && rng() % 4 == 0);
        if (sp->ents[i].expire != -1) have[s]++;
    }
    for (int s = 0; s < SLOTS; s++) assert_int_equal(sp->volatiles[s], want[s]);
    int picks[SLOTS] = {0};
    for (int k = 0; k < 20000; k++) {
        int s = vkeysFairRandomSlot(sp->vk);
        assert_true(s >= 0 && s < SLOTS);
        picks[s]++;
        void *samples[5];
        unsigned n = vkeysSampleEntries(sp->vk, sp->keys, s, samples, 5);
        assert_true(n >= 1 && n <= 5);
        for (unsigned j = 0; j < n; j++) {
            entry *e = samples[j];
            assert_true(e->present && e->expire != -1 && e->slot == s);
        }
    }
    assert_int_equal(picks[2], 0);
    for (int s = 0; s < SLOTS; s++) {
        double share = picks[s] / 20000.0, expect = want[s] / 1000.0;
        assert_true(share > expect - 0.03 && share < expect + 0.03);
    }
    /* An importing slot is counted apart, never chosen, never scanned. */
    vkeysSetImporting(sp->vk, 3, 1);
    sp->importing[3] = 1;
    checkSpace(sp);
    for (int k = 0; k < 2000; k++) assert_int_not_equal(vkeysFairRandomSlot(sp->vk), 3);
    scanCtx ctx = {.sp = sp};
    scanRound(sp, &ctx);
    assert_int_equal(ctx.visits, 400);
    vkeysSetImporting(sp->vk, 3, 0);
    sp->importing[3] = 0;
    checkSpace(sp);
    void *one;
    assert_true(vkeysRandomEntry(sp->vk, sp->keys, 3, &one));
    assert_int_not_equal(((entry *)one)->expire, -1);
    assert_false(vkeysRandomEntry(sp->vk, sp->keys, 2, &one));
    spaceRelease(sp);
}

static void test_differential(void **state) {
    (void)state;
    const char *env = getenv("VKEYS_DIFF_OPS");
    long ops = env ? atol(env) : 1000000;
    int n = 3000;
    space *sp = spaceCreate(n);
    unsigned long long cursor = 0;
    for (long op = 0; op < ops; op++) {
        /* Phases: grow, churn, shrink, so tables resize both ways. */
        int phase = (int)((op / 50000) % 3);
        int i = (int)(rng() % (uint64_t)n);
        unsigned r = (unsigned)(rng() % 100);
        if (r < (phase == 0 ? 40u : phase == 1 ? 20u : 5u)) {
            insert(sp, i, rng() % 3 == 0);
        } else if (r < 50) {
            removeEntry(sp, i);
        } else if (r < 62) {
            giveTtl(sp, i);
        } else if (r < 70) {
            persist(sp, i);
        } else if (r < 85) {
            scanCtx ctx = {.sp = sp, .expire = 1};
            cursor = vkeysScan(sp->vk, sp->keys, cursor, scanCb, NULL, &ctx);
        } else if (r < 95) {
            int s = vkeysFairRandomSlot(sp->vk);
            if (s >= 0) {
                assert_false(sp->importing[s]);
                assert_true(sp->volatiles[s] > 0);
                void *samples[4];
                unsigned got = vkeysSampleEntries(sp->vk, sp->keys, s, samples, 4);
                assert_true(got >= 1);
                for (unsigned j = 0; j < got; j++) assert_true(((entry *)samples[j])->expire != -1);
            } else {
                assert_int_equal(vkeysSize(sp->vk), 0);
            }
        } else if (r < 97) {
            int s = (int)(rng() % SLOTS);
            sp->importing[s] = !sp->importing[s];
            vkeysSetImporting(sp->vk, s, sp->importing[s]);
        } else if (r < 99) {
            kvstoreIncrementallyRehash(sp->keys, 100);
        } else {
            kvstoreTryResizeHashtables(sp->keys, SLOTS);
        }
        if (op % 64 == 0) checkSpace(sp);
    }
    checkSpace(sp);
    spaceRelease(sp);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_sees_every_volatile_key),
        cmocka_unit_test(test_slots_in_proportion_and_samples),
        cmocka_unit_test(test_differential),
    };
    monotonicInit();
    if (getenv("VKEYS_SEED")) rngState = strtoull(getenv("VKEYS_SEED"), NULL, 0) | 1;
    const char *only = getenv("VKEYS_TEST");
    if (only) cmocka_set_test_filter(only);
    return cmocka_run_group_tests_name("vkeys", tests, NULL, NULL);
}
