/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Sets past their intset or listpack, as the server sees them.
 *
 * A big set is an robj of type OBJ_SET, encoding OBJ_ENCODING_BTREE, whose
 * value is one of two engines, told apart by the value's first word
 * (ibsIsSet, hpsIsSet):
 *
 *   robj { OBJ_SET, OBJ_ENCODING_BTREE, ptr } --> ibset   every member an integer
 *                                          \--> hpset   any other set
 *
 * The integer form (ibset.c) keeps the members as sorted 64-bit integers in
 * blocks of offsets or bitmaps: a run of consecutive integers costs a bit a
 * member, a million random integers below 10^8 about two bytes. A big set
 * starts in it (an intset past its limit, a set created big with integers
 * only) and moves to the string form, for good, when a member that is no
 * integer arrives. "Integer" is what an intset takes: a string that
 * string2ll parses, so the member's bytes are the integer's decimal form.
 *
 * The string form (hpset.c) packs members inline in cache-line buckets
 * addressed by their hash, as their stored form (setpack.c): a 24-character
 * alphanumeric member takes 19 bytes. A lookup reads one line, which a
 * pipeline's commands ask for ahead (memberprefetch.c).
 *
 * Both forms give SSCAN a cursor that is a place in their order (a hash
 * position below 2^48 for the string form; 2^62 plus a quarter of the
 * integer to go on from for the integer form), so that SCAN's guarantee
 * holds through growth and shrinking; a cursor of the integer form given to
 * the string form (the set changed form mid-scan) starts it again. Sets of
 * integers are all in one order, so an intersection of them walks them side
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
#include "hpset.h"
#include "mt19937-64.h"
#include "setpack.h"

static inline int isIntegers(const robj *set) {
    return ibsIsSet(objectGetVal(set));
}

int setBtreeIsIntegers(const robj *set) {
    return isIntegers(set);
}

/* A big set starts in the integer form; its first member that is no
 * integer moves it to the string form (setBtreeAdd). */
robj *createSetBtreeObject(void) {
    robj *o = createObject(OBJ_SET, ibsCreate());
    o->encoding = OBJ_ENCODING_BTREE;
    return o;
}

void setBtreeFree(void *v) {
    if (ibsIsSet(v))
        ibsFree(v);
    else
        hpsFree(v);
}

size_t setBtreeAllocSize(const void *v) {
    return ibsIsSet(v) ? ibsAllocSize(v) : hpsAllocSize(v);
}

/* The integer form to the string form, for good, sized for `expected`
 * members. */
static hpset *stringsFromSet(robj *setobj, unsigned long expected);

static void moveToStrings(robj *set, unsigned long expected) {
    hpset *t = stringsFromSet(set, expected);
    serverAssert(t); /* a set has no repeats */
    ibsFree(objectGetVal(set));
    objectSetVal(set, t);
}

/* A member as the string form stores it (setpack.c): packed, escaped, or
 * as it is. */
typedef struct storedMember {
    const unsigned char *p;
    size_t len;
    uint64_t hash;
    const unsigned char *m;
    unsigned char buf[SPK_ENC_BUF];
} storedMember;

static void encodeMember(storedMember *s, const char *m, size_t len) {
    s->m = (const unsigned char *)m;
    s->len = spkEncode(s->m, len, s->buf, &s->p);
    s->hash = hpsHash(s->p, s->len);
}

/* A command's member: the read-ahead has mostly encoded and hashed it. */
static void storeMember(storedMember *s, const char *m, size_t len) {
    s->m = (const unsigned char *)m;
    s->len = prefetchedMember(s->m, len, s->buf, &s->hash);
    if (s->len)
        s->p = s->buf;
    else
        encodeMember(s, m, len);
}

static void storedMemberDone(storedMember *s) {
    spkRelease(s->p, s->m, s->buf);
}

/* The engine's form of an expire time (when < 0: none): its times run
 * from 1 ms, so a time of 0, long past, is kept as 1. */
static uint64_t engineTime(long long when) {
    return when < 0 ? 0 : when ? (uint64_t)when : 1;
}

/* Adds a member with time t (0: none); a member already there keeps its
 * time, or takes t when retime is set (one lookup for both). An integer
 * without a time goes into the integer form. Returns 1 if added. */
static int addMember(robj *set, const char *m, size_t len, uint64_t t, int retime) {
    if (isIntegers(set)) {
        long long v;
        if (!t && string2ll(m, len, &v)) return ibsInsert(objectGetVal(set), v);
        moveToStrings(set, 0);
    }
    storedMember s;
    storeMember(&s, m, len);
    hpset *hs = objectGetVal(set);
    int added = retime ? hpsAddTimedHashed(hs, s.hash, s.p, s.len, t) : hpsInsertHashed(hs, s.hash, s.p, s.len);
    storedMemberDone(&s);
    return added;
}

/* Returns 1 if the member was added, 0 if it was there. */
int setBtreeAdd(robj *set, const char *m, size_t len) {
    return addMember(set, m, len, 0, 0);
}

/* The member may come from this set's own buckets (SPOP's iterations): the
 * engine reads it before the entry goes. */
int setBtreeRemove(robj *set, const char *m, size_t len) {
    if (isIntegers(set)) {
        long long v;
        return string2ll(m, len, &v) && ibsDelete(objectGetVal(set), v);
    }
    storedMember s;
    storeMember(&s, m, len);
    int removed = hpsDeleteHashed(objectGetVal(set), s.hash, s.p, s.len);
    storedMemberDone(&s);
    return removed;
}

int setBtreeIsMember(robj *set, const char *m, size_t len) {
    if (isIntegers(set)) {
        long long v;
        return string2ll(m, len, &v) && ibsContains(objectGetVal(set), v);
    }
    storedMember s;
    storeMember(&s, m, len);
    int found = hpsContainsHashed(objectGetVal(set), s.hash, s.p, s.len);
    storedMemberDone(&s);
    return found;
}

/* SMISMEMBER: a reply of 1 or 0 for each member. The string form asks for
 * a batch of members' buckets at once, then looks them up. */
#define MEMBER_BATCH 16

void setBtreeReplyIsMembers(client *c, robj *set, robj **members, int n) {
    if (isIntegers(set)) {
        for (int j = 0; j < n; j++) {
            sds m = objectGetVal(members[j]);
            addReply(c, setBtreeIsMember(set, m, sdslen(m)) ? shared.cone : shared.czero);
        }
        return;
    }
    hpset *hs = objectGetVal(set);
    storedMember s[MEMBER_BATCH];
    for (int from = 0; from < n; from += MEMBER_BATCH) {
        int k = n - from < MEMBER_BATCH ? n - from : MEMBER_BATCH;
        for (int j = 0; j < k; j++) {
            sds m = objectGetVal(members[from + j]);
            storeMember(&s[j], m, sdslen(m));
            hpsPrefetch(hs, s[j].hash);
        }
        for (int j = 0; j < k; j++) {
            addReply(c, hpsContainsHashed(hs, s[j].hash, s[j].p, s[j].len) ? shared.cone : shared.czero);
            storedMemberDone(&s[j]);
        }
    }
}

unsigned long setBtreeSize(const robj *set) {
    return isIntegers(set) ? ibsLength(objectGetVal(set)) : hpsLength(objectGetVal(set));
}

static uint64_t randomBits(void) {
    return genrand64_int64();
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
    const unsigned char *e, *m;
    size_t elen;
    serverAssert(hpsRandom(objectGetVal(set), randomBits, &e, &elen));
    *len = spkDecode(e, elen, buf, &m);
    *str = (char *)m;
}

/* Iteration: a cursor of either engine, allocated for the iterator's life
 * on its first step; the string form's with a buffer its members unpack
 * into. */
typedef struct stringsIter {
    hpsIter it;
    unsigned char buf[SPK_DEC_BUF];
} stringsIter;

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
    stringsIter *it = si->btree_iter;
    if (!it) {
        it = si->btree_iter = zmalloc(sizeof(*it));
        hpsIterInit(objectGetVal(si->subject), &it->it);
    }
    const unsigned char *e, *m;
    size_t elen;
    if (!hpsIterNext(&it->it, &e, &elen)) return 0;
    *len = spkDecode(e, elen, it->buf, &m);
    *str = (char *)m;
    *llele = -123456789; /* Not needed. Defensive. */
    return 1;
}

void setBtreeIterRelease(setTypeIterator *si) {
    zfree(si->btree_iter);
}

/* Builds the string form from a set of another encoding or form, sized
 * for its members up front. Returns NULL when a member repeats (a listpack
 * loaded unchecked). */
static hpset *stringsFromSet(robj *setobj, unsigned long expected) {
    unsigned long n = setTypeSize(setobj);
    hpset *t = hpsCreate(n > expected ? n : expected);
    setTypeIterator *si = setTypeInitIterator(setobj);
    char *str, num[LONG_STR_SIZE];
    size_t len;
    int64_t llval;
    while (t && setTypeNext(si, &str, &len, &llval) != -1) {
        if (!str) {
            len = ll2string(num, sizeof(num), llval);
            str = num;
        }
        storedMember sm;
        encodeMember(&sm, str, len);
        if (!hpsInsertHashed(t, sm.hash, sm.p, sm.len)) {
            hpsFree(t);
            t = NULL;
        }
        storedMemberDone(&sm);
    }
    setTypeReleaseIterator(si);
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
 * every member is an integer, else the string form. NULL when a member
 * repeats (a listpack loaded unchecked). */
void *setBtreeFromSmall(robj *setobj, unsigned long expected) {
    int integers;
    ibset *s = integersFromSet(setobj, &integers);
    if (integers) return s;
    return stringsFromSet(setobj, expected);
}

/* A set loaded from RDB or RESTORE as intset or listpack, past their
 * limits, into a big set: C_ERR, with the set unchanged, when a member
 * repeats (a payload loaded without deep sanitization). */
int setBtreeConvertLoaded(robj *o) {
    void *t = setBtreeFromSmall(o, 0);
    if (!t) return C_ERR;
    freeSetObject(o);
    o->encoding = OBJ_ENCODING_BTREE;
    objectSetVal(o, t);
    return C_OK;
}

/* Adds a member of a set being loaded (RDB, RESTORE) of `expected`
 * members: integers in O(1) at the end when they come ascending (as this
 * encoding saves them), inserted otherwise. Returns 0 for a member already
 * there. */
int setBtreeLoadAdd(robj *set, const char *m, size_t len, unsigned long expected) {
    if (isIntegers(set)) {
        long long v;
        ibset *s = objectGetVal(set);
        if (string2ll(m, len, &v)) return ibsAppend(s, v) || ibsInsert(s, v);
        moveToStrings(set, expected);
    }
    return setBtreeAdd(set, m, len);
}

void setBtreeLoadDone(robj *set) {
    UNUSED(set);
}

/* SINTER and its kin when every set is a big one. Sets of integers are in
 * one order, and walked together, ascending. The smallest set leads; each
 * member of it seeks its place in the others (a few steps when it is near,
 * a seek when it is far), so that sets that overlap little are not read
 * whole. Other sets are probed, one lookup a member of the smallest. Calls
 * fn for each member in all sets, until fn returns 0. */
/* Moves c to the first member >= v: a few steps when it is near, a seek
 * when it is far. Returns 0 past the end. */
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

/* Sets of the string form, or of both: the smallest one's members, probed
 * in the others. */
static void probeIntersect(robj **sets, unsigned long setnum, int (*fn)(void *privdata, const char *m, size_t len),
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
    else
        probeIntersect(sets, setnum, fn, privdata);
}

/* COPY of a big set: the same form. */
void *setBtreeDup(const void *v) {
    void *copy;
    if (hpsIsSet(v)) {
        copy = hpsCreate(hpsLength(v));
        hpsIter it;
        const unsigned char *e;
        size_t elen;
        uint64_t t;
        hpsIterInit(v, &it);
        while (hpsIterNextTimed(&it, &e, &elen, &t)) serverAssert(hpsInsertTimed(copy, e, elen, t));
        *hpsMark(copy) = *hpsMark((hpset *)v);
    } else {
        copy = ibsCreate();
        ibsCursor c;
        for (int more = ibsFirst(v, &c); more; more = ibsNext(&c)) serverAssert(ibsAppend(copy, c.value));
    }
    return copy;
}

/* --- Members' expire times (t_member_ttl.c) ---
 *
 * The string form keeps a member's time beside it in its entry (hpset.c);
 * a set of integers moves to it when a member first gets one. The engine's
 * times run from 1 ms: a time of 0, long past, is kept as 1. */

static hpset *stringsOf(robj *set) {
    return isIntegers(set) ? NULL : objectGetVal(set);
}

/* 1 with *when set if the member has a time, else 0. */
int setBtreeMemberTime(robj *set, const char *m, size_t len, long long *when) {
    hpset *hs = stringsOf(set);
    if (!hs || !hpsTimedCount(hs)) return 0;
    storedMember s;
    uint64_t t = 0;
    storeMember(&s, m, len);
    hpsTimeHashed(hs, s.hash, s.p, s.len, &t);
    storedMemberDone(&s);
    if (t) *when = (long long)t;
    return t != 0;
}

/* Gives a member a time (when < 0: takes it away), setting *had (unless
 * NULL) to whether it had one. Returns 0 if it is no member. */
int setBtreeSetMemberTime(robj *set, const char *m, size_t len, long long when, int *had) {
    if (when >= 0 && isIntegers(set)) moveToStrings(set, 0);
    hpset *hs = stringsOf(set);
    if (had) *had = 0;
    if (!hs) return setBtreeIsMember(set, m, len);
    storedMember s;
    uint64_t old = 0;
    storeMember(&s, m, len);
    int found = hpsSetTimeHashed(hs, s.hash, s.p, s.len, engineTime(when), &old);
    storedMemberDone(&s);
    if (had) *had = old != 0;
    return found;
}

/* Adds a member with a time (when < 0: none), or gives one already there
 * that time (or takes its time away): one lookup for both. Returns 1 if
 * added. */
int setBtreeAddTimed(robj *set, const char *m, size_t len, long long when) {
    return addMember(set, m, len, engineTime(when), 1);
}

unsigned long setBtreeTimedCount(robj *set) {
    hpset *hs = stringsOf(set);
    return hs ? hpsTimedCount(hs) : 0;
}

/* At most the earliest time of a member, LLONG_MAX with none. */
long long setBtreeEarliest(robj *set) {
    hpset *hs = stringsOf(set);
    uint64_t t = hs ? hpsEarliest(hs) : 0;
    return t ? (long long)t : LLONG_MAX;
}

/* The server's mark (whether the database tracks the set for its times);
 * NULL for a set of integers, which has no time. */
uint8_t *setBtreeMark(robj *set) {
    hpset *hs = stringsOf(set);
    return hs ? hpsMark(hs) : NULL;
}

typedef struct timedVisit {
    setBtreeTimeFn fn;
    void *ctx;
    unsigned char buf[SPK_DEC_BUF];
} timedVisit;

static void visitDue(void *ctx, const unsigned char *e, size_t elen, uint64_t t) {
    timedVisit *tv = ctx;
    const unsigned char *m;
    size_t len = spkDecode(e, elen, tv->buf, &m);
    tv->fn(tv->ctx, m, len, (long long)t);
}

/* Takes out up to max members whose time is `now` or earlier, handing
 * each to fn first (unpacked into a buffer the next one reuses). Returns
 * how many. */
size_t setBtreeDue(robj *set, long long now, size_t max, setBtreeTimeFn fn, void *ctx) {
    hpset *hs = stringsOf(set);
    if (!hs || now < 1) return 0;
    timedVisit tv = {.fn = fn, .ctx = ctx};
    return hpsDue(hs, (uint64_t)now, max, visitDue, &tv);
}

/* Calls fn on each member with a time, in no order (the member unpacked
 * into a buffer the next one reuses), until fn returns 0; returns 0 then. */
int setBtreeForEachTime(robj *set, int (*fn)(void *ctx, const unsigned char *m, size_t len, long long when),
                        void *ctx) {
    hpset *hs = stringsOf(set);
    if (!hs || !hpsTimedCount(hs)) return 1;
    unsigned char buf[SPK_DEC_BUF];
    hpsIter it;
    const unsigned char *e, *m;
    size_t elen;
    uint64_t t;
    hpsIterInit(hs, &it);
    while (hpsIterNextTimed(&it, &e, &elen, &t)) {
        if (!t) continue;
        size_t len = spkDecode(e, elen, buf, &m);
        if (!fn(ctx, m, len, (long long)t)) return 0;
    }
    return 1;
}

/* SSCAN of the integer form: members ascending from the cursor's integer.
 * The cursor is 2^62 | (k >> 2), k the next member as ibset.c orders them
 * (the sign bit flipped). It stays below 2^63, as the server replies with a
 * cursor as a signed number and reads it back as an unsigned one, and at
 * or above 2^62, so it is never the string form's cursor. As it drops k's last
 * two bits, a call goes on past count (by three members at most) until no
 * member it visited lies between the cursor and k: each member is visited
 * once, and every call moves on. 0 starts and ends. */
#define SCAN_INT_FLAG (UINT64_C(1) << 62)
#define SIGN_BIT (UINT64_C(1) << 63)

static unsigned long long intScan(ibset *s, unsigned long long cursor, size_t count, zbtScanFn fn, void *privdata) {
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

/* SSCAN of the string form: the engine's scan, each member unpacked
 * before fn sees it. */
typedef struct stringsScan {
    zbtScanFn fn;
    void *privdata;
    unsigned char buf[SPK_DEC_BUF];
} stringsScan;

static void stringsScanEmit(void *privdata, const unsigned char *e, size_t elen) {
    stringsScan *ss = privdata;
    const unsigned char *m;
    size_t len = spkDecode(e, elen, ss->buf, &m);
    ss->fn(ss->privdata, m, len, 0);
}

/* SSCAN of a big set, either form. */
unsigned long long setBtreeScan(void *v, unsigned long long cursor, size_t count, zbtScanFn fn, void *privdata) {
    if (ibsIsSet(v)) return intScan(v, cursor, count, fn, privdata);
    stringsScan ss = {.fn = fn, .privdata = privdata};
    if (cursor >= SCAN_INT_FLAG) cursor = 0; /* the integer form's: start again */
    return hpsScan(v, cursor, count, stringsScanEmit, &ss);
}

/* Active defrag of a big set: its struct and index (the integer form's
 * pages, the string form's directory) now, and the rest too unless the set
 * has more than `later` members. Returns 1 when the rest is left for
 * setBtreeDefragStep (upstream's defrag-later). */
int setBtreeDefrag(robj *set, void *(*fn)(void *), unsigned long later) {
    void *v = objectGetVal(set);
    void *moved = ibsIsSet(v) ? (void *)ibsDefragShell(v, fn) : (void *)hpsDefragShell(v, fn);
    if (moved) objectSetVal(set, moved);
    if (setBtreeSize(set) > later) return 1;
    for (unsigned long cursor = 0; (cursor = setBtreeDefragStep(set, cursor, fn));)
        ;
    return 0;
}

/* One step: the blocks of one page of the integer form's index, or a few
 * segments of the string form. Returns the cursor to go on with, 0 when
 * done. */
unsigned long setBtreeDefragStep(robj *set, unsigned long cursor, void *(*fn)(void *)) {
    void *v = objectGetVal(set);
    if (ibsIsSet(v)) return ibsDefragBlocks(v, (uint32_t)cursor, 1, fn);
    return hpsDefragSegments(v, cursor, 16, fn);
}

/* A fork child that has saved a big set hands back its large allocations. */
void setBtreeDismiss(robj *set) {
    void *v = objectGetVal(set);
    if (ibsIsSet(v))
        ibsDismiss(v, server.page_size, dismissMemory);
    else
        hpsDismiss(v, server.page_size, dismissMemory);
}

/* DEBUG BTREE of the integer form: its figures. */
static void intDebug(client *c, robj *set, ibset *s) {
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
    info = memberTtlDebugInfo(info, set);
    addReplyVerbatim(c, info, sdslen(info), "txt");
    sdsfree(info);
}

static void stringsDebug(client *c, robj *set, hpset *s) {
    hpsStats st;
    hpsGetStats(s, &st);
    sds info = sdscatfmt(sdsempty(),
                         "form:strings\r\nmembers:%U\r\nsegments:%U\r\ndirectory_depth:%u\r\nbuckets:%U\r\n"
                         "overflowed_buckets:%U\r\nmost_in_a_bucket:%u\r\nentry_bytes:%U\r\n"
                         "segment_bytes:%U\r\nlong_member_bytes:%U\r\ndirectory_bytes:%U\r\ntotal_bytes:%U\r\n",
                         (unsigned long long)st.members, (unsigned long long)st.segments, st.depth,
                         (unsigned long long)st.buckets, (unsigned long long)st.overflowed, st.maxPerBucket,
                         (unsigned long long)st.entryBytes, (unsigned long long)st.segmentBytes,
                         (unsigned long long)st.outOfLineBytes, (unsigned long long)st.dirBytes,
                         (unsigned long long)st.bytes);
    info = memberTtlDebugInfo(info, set);
    addReplyVerbatim(c, info, sdslen(info), "txt");
    sdsfree(info);
}

/* DEBUG BTREE <key> [CHECK] of a big set: its figures, or the check of
 * every invariant of its engine. */
void setBtreeDebug(client *c, robj *set, int check) {
    void *v = objectGetVal(set);
    if (check) {
        const char *err = ibsIsSet(v) ? ibsCheck(v) : hpsCheck(v);
        if (!err) err = memberTtlCheck(set);
        if (err)
            addReplyErrorFormat(c, "btree check failed: %s", err);
        else
            addReply(c, shared.ok);
    } else if (ibsIsSet(v)) {
        intDebug(c, set, v);
    } else {
        stringsDebug(c, set, v);
    }
}
