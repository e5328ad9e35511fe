/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Sets past their intset or listpack, as the server sees them.
 *
 * A big set is an robj of type OBJ_SET, encoding OBJ_ENCODING_BTREE, whose
 * value is a keyed tree of the sorted-set engine (zbtree.c): every entry's
 * score is its member's key, the top 24 bits of the member's seeded hash.
 *
 *   robj { type OBJ_SET, encoding OBJ_ENCODING_BTREE, ptr } --> zbt (keyed)
 *
 *   leaf entry: [header][key delta: 0-4 bytes][member, inline up to 64]
 *
 * The members are in the order of (key, member): hashes spread them
 * evenly, and between neighbours the key grows by 2^24 / n on average, a
 * delta of one or two bytes in a set of thousands or millions. A member is
 * found by descending the tree to its key, so a keyed tree has no member
 * index (8 bytes a member and more in a sorted set). Otherwise a set gets
 * what a big sorted set has: members packed in 512-byte leaves, growth a
 * leaf at a time (never a doubling), ranks for uniform random members,
 * defrag in steps, dismiss in a fork child. SSCAN's cursor is the key to go
 * on from, so that SCAN's guarantee holds through growth and shrinking.
 * Every keyed tree in the server is in the same order, so an intersection
 * of big sets walks them side by side instead of probing one per member.
 *
 * Upstream's hashtable encoding stays for the temporary sets of SUNION and
 * SDIFF replies (they live for one command and are probed member by member);
 * every set that is stored goes from intset or listpack to this encoding.
 *
 * What lives here is what t_set.c and its neighbours need around the
 * engine's API; t_set.c calls these where upstream touched the hashtable.
 */

#include "server.h"

robj *createSetBtreeObject(void) {
    robj *o = createObject(OBJ_SET, zbtCreateKeyed());
    o->encoding = OBJ_ENCODING_BTREE;
    return o;
}

/* Returns 1 if the member was added, 0 if it was there. */
int setBtreeAdd(robj *set, const char *m, size_t len) {
    return zbtInsert(objectGetVal(set), 0.0, (const unsigned char *)m, len) == ZBT_OK;
}

/* The member may come from this set's own leaves (SPOP's iterations): the
 * engine reads it before the entry goes. */
int setBtreeRemove(robj *set, const char *m, size_t len) {
    return zbtDelete(objectGetVal(set), (const unsigned char *)m, len, NULL);
}

int setBtreeIsMember(robj *set, const char *m, size_t len) {
    double score;
    return zbtScore(objectGetVal(set), (const unsigned char *)m, len, &score);
}

unsigned long setBtreeSize(const robj *set) {
    return zbtLength(objectGetVal(set));
}

/* A uniformly random member, read where it lies (valid until the next
 * write to the set). */
void setBtreeRandom(robj *set, char **str, size_t *len) {
    listpackEntry e;
    zsetBtreeRandomEntry(objectGetVal(set), &e, NULL);
    *str = (char *)e.sval;
    *len = e.slen;
}

/* Iteration: a cursor of the engine, allocated for the iterator's life. */
void setBtreeIterInit(setTypeIterator *si) {
    si->zbt_cursor = NULL;
}

int setBtreeIterNext(setTypeIterator *si, char **str, size_t *len) {
    int more;
    if (!si->zbt_cursor) {
        si->zbt_cursor = zmalloc(sizeof(zbtCursor));
        more = zbtFirst(objectGetVal(si->subject), si->zbt_cursor);
    } else {
        more = zbtNext(si->zbt_cursor);
    }
    if (!more) return 0;
    *str = (char *)si->zbt_cursor->member;
    *len = si->zbt_cursor->len;
    return 1;
}

void setBtreeIterRelease(setTypeIterator *si) {
    zfree(si->zbt_cursor);
}

/* Builds a tree from a small set (intset or listpack): the members sorted
 * by key, then appended, fill its leaves whole. */
typedef struct setMember {
    double key;    /* zbtMemberKey */
    const char *s; /* NULL: the member is the integer written in num. */
    size_t len;
    char num[LONG_STR_SIZE];
} setMember;

static const unsigned char *setMemberBytes(const setMember *e) {
    return (const unsigned char *)(e->s ? e->s : e->num);
}

static int setMemberCompare(const void *a, const void *b) {
    const setMember *x = a, *y = b;
    return zbtCompare(x->key, setMemberBytes(x), x->len, y->key, setMemberBytes(y), y->len);
}

/* Returns NULL when a member repeats (a listpack loaded unchecked). */
zbt *setBtreeFromSmall(robj *setobj) {
    unsigned long n = setTypeSize(setobj);
    zbt *t = zbtCreateKeyed();
    if (n == 0) return t;
    setMember *members = zmalloc(sizeof(*members) * n);
    setTypeIterator *si = setTypeInitIterator(setobj);
    char *str;
    size_t len;
    int64_t llval;
    unsigned long i = 0;
    while (setTypeNext(si, &str, &len, &llval) != -1) {
        setMember *e = &members[i++];
        if (str) {
            e->s = str;
            e->len = len;
        } else {
            e->len = ll2string(e->num, sizeof(e->num), llval);
            e->s = NULL;
        }
        e->key = zbtMemberKey(setMemberBytes(e), e->len);
    }
    setTypeReleaseIterator(si);
    serverAssert(i == n);
    qsort(members, n, sizeof(*members), setMemberCompare);
    for (i = 0; i < n && t; i++) {
        if (zbtAppend(t, 0.0, setMemberBytes(&members[i]), members[i].len) != ZBT_OK) {
            zbtFree(t);
            t = NULL;
        }
    }
    if (t) zbtAppendDone(t);
    zfree(members);
    return t;
}

/* A set loaded from RDB or RESTORE as intset or listpack, past their
 * limits, into a tree: C_ERR, with the set unchanged, when a member
 * repeats (a payload loaded without deep sanitization). */
int setBtreeConvertLoaded(robj *o) {
    zbt *t = setBtreeFromSmall(o);
    if (!t) return C_ERR;
    freeSetObject(o);
    o->encoding = OBJ_ENCODING_BTREE;
    objectSetVal(o, t);
    return C_OK;
}

/* Adds a member of a set being loaded (RDB, RESTORE): in O(1) at the end
 * when members come in key order (as this encoding saves them), inserted
 * otherwise. Returns 0 for a member already there. */
int setBtreeLoadAdd(robj *set, const char *m, size_t len) {
    zbt *t = objectGetVal(set);
    int ret = zbtAppend(t, 0.0, (const unsigned char *)m, len);
    if (ret == ZBT_ERR_ORDER) ret = zbtInsert(t, 0.0, (const unsigned char *)m, len);
    return ret == ZBT_OK;
}

void setBtreeLoadDone(robj *set) {
    zbtAppendDone(objectGetVal(set));
}

/* SINTER and its kin when every set is a tree: the members of all of them
 * in key order, walked together. The smallest set leads; each member of it
 * seeks its place in the others (a few steps when it is near, a descent
 * when it is far), so that sets that overlap little are not read whole.
 * Calls fn for each member in all sets, until fn returns 0. */
static int cursorCompare(const zbtCursor *c, double key, const unsigned char *m, size_t len) {
    return zbtCompare(c->score, c->member, c->len, key, m, len);
}

/* Moves c to the first member at or after (key, m): a few steps when it is
 * near, a descent when it is far. Returns 0 past the end, else 1 with *cmp
 * the comparison of where c stands with (key, m), 0 or more. */
static int advanceTo(robj *set, zbtCursor *c, double key, const unsigned char *m, size_t len, int *cmp) {
    for (int steps = 0; (*cmp = cursorCompare(c, key, m, len)) < 0; steps++) {
        if (steps == 8) {
            if (!zbtSeek(objectGetVal(set), key, m, len, c)) return 0;
            *cmp = cursorCompare(c, key, m, len);
            return 1;
        }
        if (!zbtNext(c)) return 0;
    }
    return 1;
}

void setBtreeIntersect(robj **sets, unsigned long setnum, int (*fn)(void *privdata, const char *m, size_t len),
                       void *privdata) {
    zbtCursor *cur = zmalloc(sizeof(zbtCursor) * setnum);
    int more = 1, cmp;
    for (unsigned long j = 0; j < setnum && more; j++) more = zbtFirst(objectGetVal(sets[j]), &cur[j]);
    while (more) {
        unsigned long j;
        for (j = 1; j < setnum; j++) {
            if (sets[j] == sets[0]) continue;
            if (!advanceTo(sets[j], &cur[j], cur[0].score, cur[0].member, cur[0].len, &cmp)) goto done;
            if (cmp > 0) break;
        }
        if (j == setnum) {
            if (!fn(privdata, (const char *)cur[0].member, cur[0].len)) break;
            more = zbtNext(&cur[0]);
        } else {
            /* Set j is past the lead's member: the lead goes to where it is. */
            more = advanceTo(sets[0], &cur[0], cur[j].score, cur[j].member, cur[j].len, &cmp);
        }
    }
done:
    zfree(cur);
}
