/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * vkeys.c - the keys of a database that have an expire time, without a
 * table of them
 *
 * Upstream keeps every key with an expire time twice: in the keyspace
 * (`db->keys`, a kvstore of hashtables, one per cluster slot) and in a
 * second kvstore, `db->expires`, of the same objects. That second table
 * costs 9 to 18 bytes a volatile key (a 64-byte bucket holds seven
 * pointers, at 50-100% fill), and serves three readers: counts (INFO's
 * `expires=`, RDB's size hints), active expiry (a scan of volatile keys)
 * and volatile eviction (random samples of them). A key's expire time
 * itself lives in its object.
 *
 * Here those readers walk the keyspace, and this file tells them where
 * the volatile keys are. Per slot:
 *
 *   count   the volatile keys in the slot (exact)
 *   marks   a bitmap of 2^rbits bits; bit b is set when a volatile key
 *           whose hash has b in its low rbits bits may be in the slot
 *
 * The keyspace's hashtable puts a key in the bucket its hash's low bits
 * name (a table of 2^e buckets, the bucket hash & (2^e - 1)), and its
 * scan visits, at one cursor position p, every key whose hash has p's low
 * e bits (in both tables while it rehashes, e then the smaller table's).
 * So with rbits <= e, position p holds volatile keys only if bit
 * p & (2^rbits - 1) is set; with rbits > e, only if one of the 2^(rbits-e)
 * bits congruent to p is. Marks are a property of hashes, not of tables:
 * growth, rehashing and shrinking move keys between buckets and leave
 * every mark true.
 *
 * Invariants:
 * - count is the number of keys in the slot's keyspace table whose object
 *   has an expire time (objectGetExpire() != -1); the callers (db.c)
 *   count where upstream added to and deleted from `db->expires`.
 * - Every such key's bit is set. A set bit may have no volatile key
 *   behind it (a superset): bits are set on add and cleared only by the
 *   active-expiry scan, once it has visited every position of a bit's run
 *   and met no volatile key, with no add to that bit meanwhile.
 * - rbits only grows on add (to the keyspace table's exponent, at most
 *   VK_MAX_RBITS), each bit copied to the two it becomes; it folds down
 *   (pairs ORed) when a scan finds the table more than VK_FOLD_SLACK
 *   exponents smaller. Either keeps every mark true.
 * - Marks are freed when a slot's count reaches 0.
 *
 * Runs. A scan's cursor visits positions in reverse-binary order: the
 * high bits of the position change fastest, so the 2^(e-rbits) positions
 * of one bit (same low rbits bits) come one after another. The scan opens
 * a run at a bit's first position, notes whether any visited bucket held
 * a volatile key, and clears the bit at its last position if none did.
 * A run resumed midway, a table resized meanwhile, or an add to the
 * run's bit, leaves the bit set. So does a visit at a cursor carried over
 * from a larger table (bits above the scan's mask): hashtableScan then
 * resumes that table's expansion of the position partway, and the call
 * does not see every key of the position. With a table smaller than the
 * bitmap, one whole visit covers all the bits congruent to its position,
 * and clears them if it met no volatile key.
 *
 * Counts with importing slots (atomic slot migration) follow kvstore's:
 * an importing slot's keys are counted apart, are left out of the
 * proportional choice of a slot, and are not scanned.
 *
 * vkeys.c knows nothing of the server: whether an entry of the keyspace
 * has an expire time is the creator's function (the server's reads the
 * object's field), so it is built and tested on its own with upstream's
 * kvstore.c and hashtable.c (tests/engine/test_vkeys.c).
 *
 * Public prefix `vkeys`.
 */
#include "vkeys.h"

#include <stdlib.h>
#include <string.h>

#include "mt19937-64.h"
#include "serverassert.h"
#include "zmalloc.h"

/* The largest bitmap a slot keeps: 2^26 bits (8 MiB), enough for a table
 * of 64M buckets (4 GiB of buckets, 450M keys); a larger table shares a
 * bit between the buckets whose low 26 bits agree. */
#define VK_MAX_RBITS 26
/* A scan folds a slot's bitmap when the table is this many exponents
 * smaller than the bitmap (a shrink), not at a growth's rehash, where the
 * smaller table is one exponent below the bitmap for a while. */
#define VK_FOLD_SLACK 2
/* Unmarked positions one scan call passes over before it returns, so that
 * a call stays short however sparse the marks are. */
#define VK_SKIPS_PER_STEP 1024

/* From hashtable.c: the scan cursor's next position under a mask. */
size_t nextCursor(size_t v, size_t mask);

typedef struct {
    unsigned long long count;
    uint64_t *marks;
    uint8_t rbits;
    uint8_t importing;
} vkSlot;

struct vkeys {
    vkeysEntryIsVolatile *is_volatile;
    int num_slots;
    int num_slots_bits;
    vkSlot *slots;                         /* NULL until the first add */
    unsigned long long total;              /* volatile keys, importing slots aside */
    unsigned long long importing_total;    /* volatile keys in importing slots */
    unsigned long long *tree;              /* Fenwick tree of counts, 1-based (num_slots > 1) */
    int nonempty;                          /* slots not importing with count > 0 */
    struct {
        int slot;
        size_t bit;
        int rbits;
        int exp;
        bool found;
        bool open;
    } run;
};

/* --- Bitmaps --- */

static size_t markWords(int rbits) {
    return rbits < 6 ? 1 : (size_t)1 << (rbits - 6);
}

static bool markGet(const vkSlot *s, size_t b) {
    return (s->marks[b >> 6] >> (b & 63)) & 1;
}

static void markSet(vkSlot *s, size_t b) {
    s->marks[b >> 6] |= (uint64_t)1 << (b & 63);
}

static void markClear(vkSlot *s, size_t b) {
    s->marks[b >> 6] &= ~((uint64_t)1 << (b & 63));
}

static size_t rmaskOf(int rbits) {
    return ((size_t)1 << rbits) - 1;
}

/* Resizes a slot's bitmap to `rbits`, keeping every mark true: a finer map
 * copies bit b to every b + k * 2^old, a coarser one ORs them together. */
static void markResize(vkeys *vk, int didx, vkSlot *s, int rbits) {
    uint64_t *marks = zcalloc(markWords(rbits) * sizeof(uint64_t));
    size_t oldn = (size_t)1 << s->rbits, newn = (size_t)1 << rbits;
    for (size_t b = 0; b < oldn; b++) {
        if (!markGet(s, b)) continue;
        if (newn >= oldn) {
            for (size_t c = b; c < newn; c += oldn) marks[c >> 6] |= (uint64_t)1 << (c & 63);
        } else {
            size_t c = b & (newn - 1);
            marks[c >> 6] |= (uint64_t)1 << (c & 63);
        }
    }
    zfree(s->marks);
    s->marks = marks;
    s->rbits = rbits;
    if (vk->run.slot == didx) vk->run.open = false;
}

/* Whether scan position `pos` under table mask `mask` may hold a volatile
 * key. */
static bool markedAt(const vkSlot *s, size_t pos, size_t mask) {
    size_t rmask = rmaskOf(s->rbits);
    if (mask >= rmask) return markGet(s, pos & rmask);
    for (size_t b = pos & mask; b <= rmask; b += mask + 1)
        if (markGet(s, b)) return true;
    return false;
}

/* --- The keyspace table's shape --- */

static int expOf(size_t buckets) {
    return buckets <= 1 ? 0 : 63 - __builtin_clzll((unsigned long long)buckets);
}

/* The mask of scan positions: the table's, or the smaller table's while
 * it rehashes, as hashtableScan uses. */
static size_t scanMask(hashtable *ht) {
    if (hashtableIsRehashing(ht)) {
        size_t from, to;
        hashtableRehashingInfo(ht, &from, &to);
        return (from < to ? from : to) - 1;
    }
    size_t n = hashtableBuckets(ht);
    return n ? n - 1 : 0;
}

/* The exponent of the table, the larger one while it rehashes. */
static int largestExp(hashtable *ht) {
    if (hashtableIsRehashing(ht)) {
        size_t from, to;
        hashtableRehashingInfo(ht, &from, &to);
        return expOf(from > to ? from : to);
    }
    return expOf(hashtableBuckets(ht));
}

/* --- Counts --- */

static void treeAdd(vkeys *vk, int didx, long long delta) {
    if (!vk->tree) return;
    for (int i = didx + 1; i <= vk->num_slots; i += i & -i) vk->tree[i] += delta;
}

/* The slot holding the target-th volatile key (1-based), in slot order. */
static int treeFind(vkeys *vk, unsigned long long target) {
    int pos = 0;
    for (int step = 1 << vk->num_slots_bits; step; step >>= 1) {
        if (pos + step <= vk->num_slots && vk->tree[pos + step] < target) {
            pos += step;
            target -= vk->tree[pos];
        }
    }
    return pos;
}

static void countChange(vkeys *vk, int didx, vkSlot *s, long long delta) {
    bool was = s->count > 0;
    s->count += delta;
    if (s->importing) {
        vk->importing_total += delta;
        return;
    }
    vk->total += delta;
    treeAdd(vk, didx, delta);
    vk->nonempty += (s->count > 0) - was;
}

/* --- Life cycle --- */

vkeys *vkeysCreate(int num_slots_bits, vkeysEntryIsVolatile *is_volatile) {
    vkeys *vk = zcalloc(sizeof(*vk));
    vk->is_volatile = is_volatile;
    vk->num_slots_bits = num_slots_bits;
    vk->num_slots = 1 << num_slots_bits;
    vk->run.slot = -1;
    return vk;
}

static vkSlot *slotOf(vkeys *vk, int didx) {
    if (!vk->slots) {
        vk->slots = zcalloc(sizeof(vkSlot) * vk->num_slots);
        if (vk->num_slots > 1) vk->tree = zcalloc(sizeof(unsigned long long) * (vk->num_slots + 1));
    }
    return &vk->slots[didx];
}

/* Forgets every key; importing flags stay (as kvstoreEmpty keeps them). */
void vkeysEmpty(vkeys *vk) {
    if (vk->slots) {
        for (int i = 0; i < vk->num_slots; i++) {
            zfree(vk->slots[i].marks);
            vk->slots[i].marks = NULL;
            vk->slots[i].count = 0;
            vk->slots[i].rbits = 0;
        }
        if (vk->tree) memset(vk->tree, 0, sizeof(unsigned long long) * (vk->num_slots + 1));
    }
    vk->total = vk->importing_total = 0;
    vk->nonempty = 0;
    vk->run.open = false;
}

void vkeysRelease(vkeys *vk) {
    if (!vk) return;
    vkeysEmpty(vk);
    zfree(vk->slots);
    zfree(vk->tree);
    zfree(vk);
}

/* --- Adds and removes --- */

void vkeysAdd(vkeys *vk, kvstore *keys, int didx, const void *key) {
    vkSlot *s = slotOf(vk, didx);
    hashtable *ht = kvstoreGetHashtable(keys, didx);
    int exp = ht ? largestExp(ht) : 0;
    if (exp > VK_MAX_RBITS) exp = VK_MAX_RBITS;
    if (!s->marks) {
        s->rbits = exp;
        s->marks = zcalloc(markWords(exp) * sizeof(uint64_t));
    } else if (exp > s->rbits) {
        markResize(vk, didx, s, exp);
    }
    size_t b = kvstoreGetHash(keys, key) & rmaskOf(s->rbits);
    markSet(s, b);
    if (vk->run.open && vk->run.slot == didx && vk->run.bit == b) vk->run.found = true;
    countChange(vk, didx, s, 1);
}

void vkeysRemove(vkeys *vk, int didx) {
    vkSlot *s = slotOf(vk, didx);
    assert(s->count > 0);
    countChange(vk, didx, s, -1);
    if (s->count == 0) {
        zfree(s->marks);
        s->marks = NULL;
        s->rbits = 0;
        if (vk->run.slot == didx) vk->run.open = false;
    }
}

void vkeysSetImporting(vkeys *vk, int didx, int is_importing) {
    vkSlot *s = slotOf(vk, didx);
    if (!!s->importing == !!is_importing) return;
    unsigned long long n = s->count;
    if (is_importing) {
        countChange(vk, didx, s, -(long long)n);
        s->count = n;
        s->importing = 1;
        vk->importing_total += n;
    } else {
        vk->importing_total -= n;
        s->importing = 0;
        s->count = 0;
        countChange(vk, didx, s, (long long)n);
    }
}

/* --- Counts --- */

unsigned long long vkeysSize(vkeys *vk) {
    return vk->total;
}

unsigned long long vkeysImportingSize(vkeys *vk) {
    return vk->importing_total;
}

unsigned long vkeysSlotSize(vkeys *vk, int didx) {
    return vk->slots ? vk->slots[didx].count : 0;
}

int vkeysNumNonEmptySlots(vkeys *vk) {
    return vk->nonempty;
}

size_t vkeysMarkBytes(vkeys *vk) {
    size_t bytes = 0;
    if (!vk->slots) return 0;
    for (int i = 0; i < vk->num_slots; i++)
        if (vk->slots[i].marks) bytes += markWords(vk->slots[i].rbits) * sizeof(uint64_t);
    return bytes;
}

size_t vkeysMemUsage(vkeys *vk) {
    size_t bytes = sizeof(*vk) + vkeysMarkBytes(vk);
    if (vk->slots) bytes += sizeof(vkSlot) * vk->num_slots;
    if (vk->tree) bytes += sizeof(unsigned long long) * (vk->num_slots + 1);
    return bytes;
}

/* --- Scans --- */

/* The first slot from `didx` on whose volatile keys a scan visits, or -1. */
static int nextScannedSlot(vkeys *vk, int didx) {
    if (!vk->slots) return -1;
    for (; didx < vk->num_slots; didx++) {
        if (vk->slots[didx].count && !vk->slots[didx].importing) return didx;
    }
    return -1;
}

static unsigned long long cursorOf(vkeys *vk, int didx, size_t pos) {
    if (vk->num_slots == 1) return pos;
    return ((unsigned long long)pos << vk->num_slots_bits) | (unsigned long long)didx;
}

typedef struct {
    vkeysEntryIsVolatile *is_volatile;
    kvstoreScanFunction fn;
    void *privdata;
    bool found;
} vkVisit;

static void visitVolatile(void *privdata, void *entry, int didx) {
    vkVisit *v = privdata;
    if (!v->is_volatile(entry)) return;
    v->found = true;
    v->fn(v->privdata, entry, didx);
}

/* Whether a visit at `pos` sees every key whose hash has pos's low bits
 * under `mask`. A cursor carried over from a larger table (bits above the
 * mask) resumes that table's expansion of the position partway: the keys
 * of its first part were visited by earlier calls. */
static bool visitIsWhole(size_t pos, size_t mask) {
    return (pos & ~mask) == 0;
}

/* Opens a run when `pos` is the first position of its bit's run. */
static void runBefore(vkeys *vk, int didx, const vkSlot *s, size_t pos, size_t mask) {
    size_t rmask = rmaskOf(s->rbits);
    if (mask < rmask || !visitIsWhole(pos, mask)) return;
    if ((pos & mask & ~rmask) != 0) return;
    vk->run.slot = didx;
    vk->run.bit = pos & rmask;
    vk->run.rbits = s->rbits;
    vk->run.exp = expOf(mask + 1);
    vk->run.found = false;
    vk->run.open = true;
}

/* After a visit: clears the bits the visit (or its whole run) showed
 * empty. With a table smaller than the bitmap, one visit covers all the
 * bits congruent to its position. */
static void runAfter(vkeys *vk, int didx, size_t pos, size_t mask, bool found) {
    vkSlot *s = &vk->slots[didx];
    if (!s->marks) return; /* the visit expired the slot's last volatile key */
    size_t rmask = rmaskOf(s->rbits);
    if (!visitIsWhole(pos, mask)) {
        if (vk->run.slot == didx) vk->run.open = false;
        return;
    }
    if (mask < rmask) {
        if (found) return;
        for (size_t b = pos & mask; b <= rmask; b += mask + 1) markClear(s, b);
        return;
    }
    if (!vk->run.open || vk->run.slot != didx || vk->run.bit != (pos & rmask) || vk->run.rbits != s->rbits ||
        vk->run.exp != expOf(mask + 1)) {
        return;
    }
    vk->run.found |= found;
    if ((pos & mask & ~rmask) == (mask & ~rmask)) {
        if (!vk->run.found) markClear(s, vk->run.bit);
        vk->run.open = false;
    }
}

unsigned long long vkeysScan(vkeys *vk,
                             kvstore *keys,
                             unsigned long long cursor,
                             kvstoreScanFunction scan_cb,
                             kvstoreScanShouldSkipHashtable *skip_cb,
                             void *privdata) {
    if (vk->total == 0) return 0;
    int didx = 0;
    size_t pos = cursor;
    if (vk->num_slots > 1) {
        didx = (int)(cursor & (unsigned long long)(vk->num_slots - 1));
        pos = cursor >> vk->num_slots_bits;
    }
    int first = nextScannedSlot(vk, didx);
    if (first < 0) return 0;
    if (first != didx) didx = first, pos = 0;

    vkSlot *s = &vk->slots[didx];
    hashtable *ht = kvstoreGetHashtable(keys, didx);
    if (!ht || hashtableSize(ht) == 0 || (skip_cb && skip_cb(ht))) goto next_slot;

    size_t mask = scanMask(ht);
    if (s->rbits > expOf(mask + 1) + VK_FOLD_SLACK) markResize(vk, didx, s, expOf(mask + 1));
    for (int skips = 0; !markedAt(s, pos, mask);) {
        pos = nextCursor(pos, mask);
        if (pos == 0) goto next_slot;
        if (++skips == VK_SKIPS_PER_STEP) return cursorOf(vk, didx, pos);
    }

    runBefore(vk, didx, s, pos, mask);
    vkVisit v = {.is_volatile = vk->is_volatile, .fn = scan_cb, .privdata = privdata, .found = false};
    unsigned long long next = kvstoreScan(keys, cursorOf(vk, didx, pos), didx, didx, visitVolatile, NULL, &v);
    runAfter(vk, didx, pos, mask, v.found);
    if (next != 0) return next;

next_slot:
    didx = nextScannedSlot(vk, didx + 1);
    return didx < 0 ? 0 : cursorOf(vk, didx, 0);
}

/* --- Samples --- */

int vkeysFairRandomSlot(vkeys *vk) {
    if (vk->total == 0) return KVSTORE_INDEX_NOT_FOUND;
    if (vk->num_slots == 1) return vk->slots[0].importing ? KVSTORE_INDEX_NOT_FOUND : 0;
    return treeFind(vk, (unsigned long long)(random() % vk->total) + 1);
}

typedef struct {
    vkeysEntryIsVolatile *is_volatile;
    void **dst;
    unsigned size;
    unsigned seen;
} vkSamples;

static void sampleVolatile(void *privdata, void *entry) {
    vkSamples *sm = privdata;
    if (!sm->is_volatile(entry)) return;
    if (sm->seen < sm->size) sm->dst[sm->seen] = entry;
    sm->seen++;
}

/* Up to `count` volatile keys of slot `didx`, taken from a random place on
 * as hashtableSampleEntries takes keys of a table. */
unsigned vkeysSampleEntries(vkeys *vk, kvstore *keys, int didx, void **dst, unsigned count) {
    if (!vk->slots || vk->slots[didx].count == 0) return 0;
    vkSlot *s = &vk->slots[didx];
    if (count > s->count) count = s->count;
    hashtable *ht = kvstoreGetHashtable(keys, didx);
    if (!ht || count == 0) return 0;
    vkSamples sm = {.is_volatile = vk->is_volatile, .dst = dst, .size = count, .seen = 0};
    size_t pos = (size_t)genrand64_int64();
    /* Two rounds of every position at most: the count says a volatile key
     * is there, and its mark leads to it within one. */
    size_t budget = 2 * (scanMask(ht) + 1) + 2;
    while (sm.seen < count && budget--) {
        size_t mask = scanMask(ht);
        if (!markedAt(s, pos, mask)) {
            pos = nextCursor(pos, mask);
            continue;
        }
        pos = hashtableScan(ht, pos, sampleVolatile, &sm);
    }
    return sm.seen < count ? sm.seen : count;
}

bool vkeysRandomEntry(vkeys *vk, kvstore *keys, int didx, void **found) {
    void *samples[8];
    unsigned n = vkeysSampleEntries(vk, keys, didx, samples, 8);
    if (n == 0) return false;
    *found = samples[random() % n];
    return true;
}

/* --- Check --- */

/* Walks every key of `keys` and checks the invariants above: each slot's
 * count is its volatile keys, each of them has its mark, the totals and
 * the tree agree. Returns NULL, or what is broken (a static string).
 * O(keys): for DEBUG and the tests. */
const char *vkeysCheck(vkeys *vk, kvstore *keys) {
    unsigned long long total = 0, importing_total = 0;
    int nonempty = 0;
    for (int didx = 0; didx < vk->num_slots; didx++) {
        vkSlot *s = vk->slots ? &vk->slots[didx] : NULL;
        unsigned long long n = 0;
        hashtable *ht = kvstoreGetHashtable(keys, didx);
        if (ht) {
            hashtableType *type = hashtableGetType(ht);
            kvstoreHashtableIterator *it = kvstoreGetHashtableIterator(keys, didx, 0);
            void *entry;
            while (kvstoreHashtableIteratorNext(it, &entry)) {
                if (!vk->is_volatile(entry)) continue;
                n++;
                if (!s || !s->marks) {
                    kvstoreReleaseHashtableIterator(it);
                    return "a volatile key in a slot without marks";
                }
                const void *key = type->entryGetKey ? type->entryGetKey(entry) : entry;
                if (!markGet(s, kvstoreGetHash(keys, key) & rmaskOf(s->rbits))) {
                    kvstoreReleaseHashtableIterator(it);
                    return "a volatile key without its mark";
                }
            }
            kvstoreReleaseHashtableIterator(it);
        }
        unsigned long long count = s ? s->count : 0;
        if (count != n) return "a slot's count is not its volatile keys";
        if (count == 0 && s && s->marks) return "marks kept for an empty slot";
        if (s && s->importing) {
            importing_total += count;
        } else {
            total += count;
            nonempty += count > 0;
            if (vk->tree) {
                unsigned long long below = 0, upto = 0;
                for (int i = didx; i > 0; i -= i & -i) below += vk->tree[i];
                for (int i = didx + 1; i > 0; i -= i & -i) upto += vk->tree[i];
                if (upto - below != count) return "the tree does not give a slot's count";
            }
        }
    }
    if (total != vk->total || importing_total != vk->importing_total) return "totals do not add up";
    if (nonempty != vk->nonempty) return "the count of non-empty slots is wrong";
    return NULL;
}

/* The marks set in a slot (for the tests: after a scan's whole round with
 * no add, each set bit has a volatile key behind it). */
size_t vkeysSetMarks(vkeys *vk, int didx) {
    if (!vk->slots || !vk->slots[didx].marks) return 0;
    const vkSlot *s = &vk->slots[didx];
    size_t n = 0;
    for (size_t w = 0; w < markWords(s->rbits); w++) n += (size_t)__builtin_popcountll(s->marks[w]);
    return n;
}
