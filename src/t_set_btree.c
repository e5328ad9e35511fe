/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Sets past their intset or listpack, as the server sees them.
 *
 * A big set is an robj of type OBJ_SET, encoding OBJ_ENCODING_BTREE, whose
 * value is one of two forms, told apart by the value's first word
 * (ibsIsSet):
 *
 *   robj { OBJ_SET, OBJ_ENCODING_BTREE, ptr } --> ibset       every member an integer
 *                                          \--> zbt (keyed)   any other set
 *
 * The integer form (ibset.c) keeps the members as sorted 64-bit integers in
 * blocks of offsets or bitmaps: a run of consecutive integers costs a bit a
 * member, a million random integers below 10^8 about two bytes. A big set
 * starts in it (an intset past its limit, a set created big with integers
 * only) and moves to a keyed tree, for good, when a member that is no
 * integer arrives. "Integer" is what an intset takes: a string that
 * string2ll parses, so the member's bytes are the integer's decimal form.
 *
 * The keyed tree is a tree of the sorted-set engine (zbtree.c) whose
 * entries' scores are their members' keys, the top 24 bits of the member's
 * seeded hash:
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
 * defrag in steps, dismiss in a fork child.
 *
 * Both forms give SSCAN a cursor that is a place in their order (a key
 * below 2^24 for a keyed tree; 2^62 plus a quarter of the integer to go on
 * from for the integer form), so that SCAN's guarantee holds through growth
 * and shrinking; a cursor of the integer form given to a keyed tree (the
 * set changed form mid-scan) starts it again. Every set of one form is in the
 * same order, so an intersection of big sets of one form walks them side
 * by side instead of probing one per member.
 *
 * Upstream's hashtable encoding stays for the temporary sets of SUNION and
 * SDIFF replies (they live for one command and are probed member by member);
 * every set that is stored goes from intset or listpack to this encoding.
 *
 * What lives here is what t_set.c and its neighbours need around the
 * engines' APIs; t_set.c calls these where upstream touched the hashtable.
 */

#include "server.h"
#include "mt19937-64.h"
#include "setpack.h"

static inline int isIntegers(const robj *set) {
    return ibsIsSet(objectGetVal(set));
}

int setBtreeIsIntegers(const robj *set) {
    return isIntegers(set);
}

/* A big set starts in the integer form; its first member that is no
 * integer moves it to a keyed tree (setBtreeAdd). */
robj *createSetBtreeObject(void) {
    robj *o = createObject(OBJ_SET, ibsCreate());
    o->encoding = OBJ_ENCODING_BTREE;
    return o;
}

void setBtreeFree(void *v) {
    if (ibsIsSet(v))
        ibsFree(v);
    else
        zbtFree(v);
}

size_t setBtreeAllocSize(const void *v) {
    return ibsIsSet(v) ? ibsAllocSize(v) : zbtAllocSize(v);
}

/* The integer form to a keyed tree, for good. */
static zbt *keyedFromSet(robj *setobj);

static void moveToKeyed(robj *set) {
    zbt *t = keyedFromSet(set);
    serverAssert(t); /* a set has no repeats */
    ibsFree(objectGetVal(set));
    objectSetVal(set, t);
}

/* A member as a keyed tree stores it (setpack.c): packed, escaped, or as
 * it is. */
typedef struct storedMember {
    const unsigned char *p;
    size_t len;
    const unsigned char *m;
    unsigned char buf[SPK_ENC_BUF];
} storedMember;

static void storeMember(storedMember *s, const char *m, size_t len) {
    s->m = (const unsigned char *)m;
    s->len = spkEncode(s->m, len, s->buf, &s->p);
}

static void storedMemberDone(storedMember *s) {
    spkRelease(s->p, s->m, s->buf);
}

/* Returns 1 if the member was added, 0 if it was there. */
int setBtreeAdd(robj *set, const char *m, size_t len) {
    if (isIntegers(set)) {
        long long v;
        if (string2ll(m, len, &v)) return ibsInsert(objectGetVal(set), v);
        moveToKeyed(set);
    }
    storedMember s;
    storeMember(&s, m, len);
    int added = zbtInsert(objectGetVal(set), 0.0, s.p, s.len) == ZBT_OK;
    storedMemberDone(&s);
    return added;
}

/* The member may come from this set's own leaves (SPOP's iterations): the
 * engine reads it before the entry goes. */
int setBtreeRemove(robj *set, const char *m, size_t len) {
    if (isIntegers(set)) {
        long long v;
        return string2ll(m, len, &v) && ibsDelete(objectGetVal(set), v);
    }
    storedMember s;
    storeMember(&s, m, len);
    int removed = zbtDelete(objectGetVal(set), s.p, s.len, NULL);
    storedMemberDone(&s);
    return removed;
}

int setBtreeIsMember(robj *set, const char *m, size_t len) {
    if (isIntegers(set)) {
        long long v;
        return string2ll(m, len, &v) && ibsContains(objectGetVal(set), v);
    }
    double score;
    storedMember s;
    storeMember(&s, m, len);
    int found = zbtScore(objectGetVal(set), s.p, s.len, &score);
    storedMemberDone(&s);
    return found;
}

/* SMISMEMBER: a reply of 1 or 0 for each member. A keyed tree looks up a
 * batch of members at once (zbtKeyedContainsMany). */
#define MEMBER_BATCH 16

void setBtreeReplyIsMembers(client *c, robj *set, robj **members, int n) {
    if (isIntegers(set)) {
        for (int j = 0; j < n; j++) {
            sds m = objectGetVal(members[j]);
            addReply(c, setBtreeIsMember(set, m, sdslen(m)) ? shared.cone : shared.czero);
        }
        return;
    }
    storedMember s[MEMBER_BATCH];
    const unsigned char *p[MEMBER_BATCH];
    size_t len[MEMBER_BATCH];
    int found[MEMBER_BATCH];
    for (int from = 0; from < n; from += MEMBER_BATCH) {
        int k = n - from < MEMBER_BATCH ? n - from : MEMBER_BATCH;
        for (int j = 0; j < k; j++) {
            sds m = objectGetVal(members[from + j]);
            storeMember(&s[j], m, sdslen(m));
            p[j] = s[j].p;
            len[j] = s[j].len;
        }
        zbtKeyedContainsMany(objectGetVal(set), p, len, k, found);
        for (int j = 0; j < k; j++) {
            addReply(c, found[j] ? shared.cone : shared.czero);
            storedMemberDone(&s[j]);
        }
    }
}

unsigned long setBtreeSize(const robj *set) {
    return isIntegers(set) ? ibsLength(objectGetVal(set)) : zbtLength(objectGetVal(set));
}

/* A uniformly random member: an integer (*str NULL), or a member read where
 * it lies or unpacked into a buffer (valid until the next write to the set
 * or the next call). */
void setBtreeRandom(robj *set, char **str, size_t *len, int64_t *llele) {
    if (isIntegers(set)) {
        ibset *s = objectGetVal(set);
        *str = NULL;
        *llele = ibsAtRank(s, genrand64_int64() % ibsLength(s));
        return;
    }
    static unsigned char buf[SPK_DEC_BUF];
    listpackEntry e;
    const unsigned char *m;
    zsetBtreeRandomEntry(objectGetVal(set), &e, NULL);
    *len = spkDecode(e.sval, e.slen, buf, &m);
    *str = (char *)m;
}

/* Iteration: a cursor of either engine, allocated for the iterator's life
 * on its first step; a keyed tree's with a buffer its members unpack into. */
typedef struct keyedIter {
    zbtCursor c;
    unsigned char buf[SPK_DEC_BUF];
} keyedIter;

void setBtreeIterInit(setTypeIterator *si) {
    si->btree_iter = NULL;
}

/* Integers come back in *llele with *str NULL, as from an intset. */
int setBtreeIterNext(setTypeIterator *si, char **str, size_t *len, int64_t *llele) {
    int more;
    if (isIntegers(si->subject)) {
        ibsCursor *c = si->btree_iter;
        if (!c) {
            c = si->btree_iter = zmalloc(sizeof(*c));
            more = ibsFirst(objectGetVal(si->subject), c);
        } else {
            more = ibsNext(c);
        }
        if (!more) return 0;
        *str = NULL;
        *llele = c->value;
        return 1;
    }
    keyedIter *it = si->btree_iter;
    if (!it) {
        it = si->btree_iter = zmalloc(sizeof(*it));
        more = zbtFirst(objectGetVal(si->subject), &it->c);
    } else {
        more = zbtNext(&it->c);
    }
    if (!more) return 0;
    const unsigned char *m;
    *len = spkDecode(it->c.member, it->c.len, it->buf, &m);
    *str = (char *)m;
    *llele = -123456789; /* Not needed. Defensive. */
    return 1;
}

void setBtreeIterRelease(setTypeIterator *si) {
    zfree(si->btree_iter);
}

/* Builds a keyed tree from a set of another encoding or form: the members,
 * stored as the tree stores them (one string holds them all: an offset into
 * it while it grows, a pointer once it is whole), sorted by key, then
 * appended, fill its leaves whole. */
typedef struct setMember {
    double key; /* zbtMemberKey */
    union {
        size_t off;
        const unsigned char *p;
    };
    size_t len;
} setMember;

static int setMemberCompare(const void *a, const void *b) {
    const setMember *x = a, *y = b;
    return zbtCompare(x->key, x->p, x->len, y->key, y->p, y->len);
}

/* Returns NULL when a member repeats (a listpack loaded unchecked). */
static zbt *keyedFromSet(robj *setobj) {
    unsigned long n = setTypeSize(setobj);
    zbt *t = zbtCreateKeyed();
    if (n == 0) return t;
    setMember *members = zmalloc(sizeof(*members) * n);
    sds bytes = sdsempty();
    setTypeIterator *si = setTypeInitIterator(setobj);
    char *str, num[LONG_STR_SIZE];
    size_t len;
    int64_t llval;
    unsigned long i = 0;
    while (setTypeNext(si, &str, &len, &llval) != -1) {
        if (!str) {
            len = ll2string(num, sizeof(num), llval);
            str = num;
        }
        storedMember sm;
        storeMember(&sm, str, len);
        setMember *e = &members[i++];
        e->off = sdslen(bytes);
        e->len = sm.len;
        e->key = zbtMemberKey(sm.p, sm.len);
        bytes = sdscatlen(bytes, sm.p, sm.len);
        storedMemberDone(&sm);
    }
    setTypeReleaseIterator(si);
    serverAssert(i == n);
    for (i = 0; i < n; i++) members[i].p = (const unsigned char *)bytes + members[i].off;
    qsort(members, n, sizeof(*members), setMemberCompare);
    for (i = 0; i < n && t; i++) {
        if (zbtAppend(t, 0.0, members[i].p, members[i].len) != ZBT_OK) {
            zbtFree(t);
            t = NULL;
        }
    }
    if (t) zbtAppendDone(t);
    sdsfree(bytes);
    zfree(members);
    return t;
}

static int int64Compare(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The integer form of a small set whose members are all integers, built
 * sorted in one pass. *integers is 0 (and NULL returned) when a member is
 * no integer; NULL with *integers 1 means a member repeats. */
static ibset *integersFromSet(robj *setobj, int *integers) {
    unsigned long n = setTypeSize(setobj), i = 0;
    int64_t *values = zmalloc(sizeof(*values) * (n ? n : 1));
    setTypeIterator *si = setTypeInitIterator(setobj);
    char *str;
    size_t len;
    int64_t llval;
    *integers = 1;
    while (setTypeNext(si, &str, &len, &llval) != -1) {
        long long v = llval;
        if (str && !string2ll(str, len, &v)) {
            *integers = 0;
            break;
        }
        values[i++] = v;
    }
    setTypeReleaseIterator(si);
    ibset *s = NULL;
    if (*integers) {
        serverAssert(i == n);
        qsort(values, n, sizeof(*values), int64Compare);
        s = ibsCreate();
        for (i = 0; i < n && s; i++) {
            if (!ibsAppend(s, values[i])) {
                ibsFree(s);
                s = NULL;
            }
        }
    }
    zfree(values);
    return s;
}

/* A small set (intset or listpack) as a big one: the integer form when
 * every member is an integer, else a keyed tree. NULL when a member
 * repeats (a listpack loaded unchecked). */
void *setBtreeFromSmall(robj *setobj) {
    int integers;
    ibset *s = integersFromSet(setobj, &integers);
    if (integers) return s;
    return keyedFromSet(setobj);
}

/* A set loaded from RDB or RESTORE as intset or listpack, past their
 * limits, into a big set: C_ERR, with the set unchanged, when a member
 * repeats (a payload loaded without deep sanitization). */
int setBtreeConvertLoaded(robj *o) {
    void *t = setBtreeFromSmall(o);
    if (!t) return C_ERR;
    freeSetObject(o);
    o->encoding = OBJ_ENCODING_BTREE;
    objectSetVal(o, t);
    return C_OK;
}

/* Adds a member of a set being loaded (RDB, RESTORE): in O(1) at the end
 * when members come in the form's order (as this encoding saves them),
 * inserted otherwise. Returns 0 for a member already there. */
int setBtreeLoadAdd(robj *set, const char *m, size_t len) {
    if (isIntegers(set)) {
        long long v;
        ibset *s = objectGetVal(set);
        if (string2ll(m, len, &v)) return ibsAppend(s, v) || ibsInsert(s, v);
        moveToKeyed(set);
    }
    zbt *t = objectGetVal(set);
    storedMember s;
    storeMember(&s, m, len);
    int ret = zbtAppend(t, 0.0, s.p, s.len);
    if (ret == ZBT_ERR_ORDER) ret = zbtInsert(t, 0.0, s.p, s.len);
    storedMemberDone(&s);
    return ret == ZBT_OK;
}

void setBtreeLoadDone(robj *set) {
    if (!isIntegers(set)) zbtAppendDone(objectGetVal(set));
}

/* SINTER and its kin when every set is a big one. Sets of one form are in
 * one order, and walked together: the members of keyed trees in key
 * order, integers ascending. The smallest set leads; each member of it
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

static void keyedIntersect(robj **sets, unsigned long setnum, int (*fn)(void *privdata, const char *m, size_t len),
                           void *privdata) {
    zbtCursor *cur = zmalloc(sizeof(zbtCursor) * setnum);
    unsigned char buf[SPK_DEC_BUF];
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
            const unsigned char *m;
            size_t len = spkDecode(cur[0].member, cur[0].len, buf, &m);
            if (!fn(privdata, (const char *)m, len)) break;
            more = zbtNext(&cur[0]);
        } else {
            /* Set j is past the lead's member: the lead goes to where it is. */
            more = advanceTo(sets[0], &cur[0], cur[j].score, cur[j].member, cur[j].len, &cmp);
        }
    }
done:
    zfree(cur);
}

/* Moves c to the first member >= v, as advanceTo does. */
static int advanceToInteger(robj *set, ibsCursor *c, int64_t v) {
    for (int steps = 0; c->value < v; steps++) {
        if (steps == 8) return ibsSeek(objectGetVal(set), v, c);
        if (!ibsNext(c)) return 0;
    }
    return 1;
}

static void integersIntersect(robj **sets, unsigned long setnum,
                              int (*fn)(void *privdata, const char *m, size_t len), void *privdata) {
    ibsCursor *cur = zmalloc(sizeof(ibsCursor) * setnum);
    char buf[LONG_STR_SIZE];
    int more = 1;
    for (unsigned long j = 0; j < setnum && more; j++) more = ibsFirst(objectGetVal(sets[j]), &cur[j]);
    while (more) {
        unsigned long j;
        for (j = 1; j < setnum; j++) {
            if (sets[j] == sets[0]) continue;
            if (!advanceToInteger(sets[j], &cur[j], cur[0].value)) goto done;
            if (cur[j].value > cur[0].value) break;
        }
        if (j == setnum) {
            int len = ll2string(buf, sizeof(buf), cur[0].value);
            if (!fn(privdata, buf, len)) break;
            more = ibsNext(&cur[0]);
        } else {
            more = advanceToInteger(sets[0], &cur[0], cur[j].value);
        }
    }
done:
    zfree(cur);
}

/* Sets of both forms: the smallest one's members, probed in the others. */
static void mixedIntersect(robj **sets, unsigned long setnum, int (*fn)(void *privdata, const char *m, size_t len),
                           void *privdata) {
    setTypeIterator *si = setTypeInitIterator(sets[0]);
    char *str, buf[LONG_STR_SIZE];
    size_t len;
    int64_t llval;
    while (setTypeNext(si, &str, &len, &llval) != -1) {
        if (!str) {
            len = ll2string(buf, sizeof(buf), llval);
            str = buf;
        }
        unsigned long j;
        for (j = 1; j < setnum; j++)
            if (sets[j] != sets[0] && !setBtreeIsMember(sets[j], str, len)) break;
        if (j == setnum && !fn(privdata, str, len)) break;
    }
    setTypeReleaseIterator(si);
}

void setBtreeIntersect(robj **sets, unsigned long setnum, int (*fn)(void *privdata, const char *m, size_t len),
                       void *privdata) {
    unsigned long ints = 0;
    for (unsigned long j = 0; j < setnum; j++) ints += isIntegers(sets[j]);
    if (ints == setnum)
        integersIntersect(sets, setnum, fn, privdata);
    else if (ints == 0)
        keyedIntersect(sets, setnum, fn, privdata);
    else
        mixedIntersect(sets, setnum, fn, privdata);
}

/* COPY of a big set: the same form. */
void *setBtreeDup(const void *v) {
    if (!ibsIsSet(v)) return zsetBtreeDup((zbt *)v);
    ibset *copy = ibsCreate();
    ibsCursor c;
    for (int more = ibsFirst(v, &c); more; more = ibsNext(&c)) serverAssert(ibsAppend(copy, c.value));
    return copy;
}

/* SSCAN of the integer form: members ascending from the cursor's integer.
 * The cursor is 2^62 | (k >> 2), k the next member as ibset.c orders them
 * (the sign bit flipped). It stays below 2^63, as the server replies with a
 * cursor as a signed number and reads it back as an unsigned one, and at
 * or above 2^62, so it is never a keyed tree's cursor. As it drops k's last
 * two bits, a call goes on past count (by three members at most) until no
 * member it visited lies between the cursor and k: each member is visited
 * once, and every call moves on. 0 starts and ends. */
#define SCAN_INT_FLAG (UINT64_C(1) << 62)
#define SIGN_BIT (UINT64_C(1) << 63)

unsigned long long setBtreeIntScan(ibset *s, unsigned long long cursor, size_t count, zbtScanFn fn, void *privdata) {
    int64_t from = INT64_MIN;
    if (cursor >= SCAN_INT_FLAG && cursor < SIGN_BIT) from = (int64_t)(((cursor - SCAN_INT_FLAG) << 2) ^ SIGN_BIT);
    ibsCursor c;
    char buf[LONG_STR_SIZE];
    uint64_t k = 0, last = 0;
    size_t n = 0;
    int more = ibsSeek(s, from, &c);
    while (more) {
        k = (uint64_t)c.value ^ SIGN_BIT;
        if (n >= count && (k & ~UINT64_C(3)) > last) break;
        int len = ll2string(buf, sizeof(buf), c.value);
        fn(privdata, (const unsigned char *)buf, len, 0);
        last = k;
        n++;
        more = ibsNext(&c);
    }
    return more ? SCAN_INT_FLAG | (k >> 2) : 0;
}

/* SSCAN of a keyed tree: the engine's scan, each member unpacked before fn
 * sees it. */
typedef struct keyedScan {
    zbtScanFn fn;
    void *privdata;
    unsigned char buf[SPK_DEC_BUF];
} keyedScan;

static void keyedScanEmit(void *privdata, const unsigned char *e, size_t elen, double key) {
    keyedScan *ks = privdata;
    const unsigned char *m;
    size_t len = spkDecode(e, elen, ks->buf, &m);
    ks->fn(ks->privdata, m, len, key);
}

unsigned long long setBtreeKeyedScan(zbt *t, unsigned long long cursor, size_t count, zbtScanFn fn, void *privdata) {
    keyedScan ks = {.fn = fn, .privdata = privdata};
    return zbtScan(t, cursor, count, keyedScanEmit, &ks);
}

/* Active defrag of the integer form: its struct and index now, and its
 * blocks too unless the set has more than `later` members. Returns 1 when
 * the blocks are left for setBtreeIntDefragStep (upstream's defrag-later). */
int setBtreeIntDefrag(robj *set, void *(*fn)(void *), unsigned long later) {
    ibset *s = ibsDefragShell(objectGetVal(set), fn);
    if (s) objectSetVal(set, s);
    if (ibsLength(objectGetVal(set)) > later) return 1;
    ibsDefragBlocks(objectGetVal(set), 0, UINT32_MAX, fn);
    return 0;
}

/* One step: the blocks of one page of the index. Returns the cursor to go
 * on with, 0 when done. */
unsigned long setBtreeIntDefragStep(robj *set, unsigned long cursor, void *(*fn)(void *)) {
    return ibsDefragBlocks(objectGetVal(set), (uint32_t)cursor, 1, fn);
}

/* DEBUG BTREE of the integer form: its figures. */
void setBtreeIntDebug(client *c, ibset *s) {
    ibsStats st;
    ibsGetStats(s, &st);
    sds info = sdscatfmt(sdsempty(),
                         "form:integers\r\nmembers:%U\r\npages:%U\r\nblocks:%U\r\n"
                         "array8_blocks:%U\r\narray16_blocks:%U\r\narray32_blocks:%U\r\narray64_blocks:%U\r\n"
                         "bitmap_blocks:%U\r\ndata_bytes:%U\r\nblock_bytes:%U\r\nindex_bytes:%U\r\n"
                         "total_bytes:%U\r\n",
                         (unsigned long long)ibsLength(s), (unsigned long long)st.pages,
                         (unsigned long long)st.blocks, (unsigned long long)st.arrayBlocks[0],
                         (unsigned long long)st.arrayBlocks[1], (unsigned long long)st.arrayBlocks[2],
                         (unsigned long long)st.arrayBlocks[3], (unsigned long long)st.bitmapBlocks,
                         (unsigned long long)st.dataBytes, (unsigned long long)st.blockBytes,
                         (unsigned long long)st.indexBytes, (unsigned long long)ibsAllocSize(s));
    addReplyVerbatim(c, info, sdslen(info), "txt");
    sdsfree(info);
}
