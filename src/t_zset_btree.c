/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Sorted sets past their listpack, as the server sees them.
 *
 * A big sorted set is an robj of type OBJ_ZSET, encoding OBJ_ENCODING_BTREE,
 * whose ptr is the engine's tree (zbtree.c) and nothing else: the tree holds
 * the members and scores packed in its leaves and finds members through its
 * own index, so there is no dict or hashtable beside it.
 *
 *   robj { type OBJ_ZSET, encoding OBJ_ENCODING_BTREE, ptr } --> zbt
 *
 * What lives here is what t_zset.c, rdb.c and their neighbours need around
 * the engine's API: building a tree from a listpack or from loaded entries,
 * copying one, turning upstream's lex range spec into the engine's, random
 * members. The engine's own calls (zbtInsert, zbtRank, cursors, ...) are
 * made where upstream made the skiplist's.
 */

#include "server.h"
#include "vector.h"
#include "mt19937-64.h"
#include "zmindex.h"

#include <math.h>

/* Presizing the member index past this gains little (it grows a segment at
 * a time, without a stall) and would let a corrupt RDB length allocate. */
#define ZSET_BTREE_PRESIZE_MAX (1 << 20)

robj *createZsetBtreeObject(size_t expected) {
    if (expected > ZSET_BTREE_PRESIZE_MAX) expected = ZSET_BTREE_PRESIZE_MAX;
    robj *o = createObject(OBJ_ZSET, zbtCreate(expected));
    o->encoding = OBJ_ENCODING_BTREE;
    return o;
}

/* Adds an entry of a sorted input (ascending or descending): appended in
 * O(1) at the end the input runs to, inserted when it is out of order.
 * Returns ZBT_OK, or ZBT_ERR_DUP / ZBT_ERR_NAN for input that is no set. */
int zsetBtreeAdd(zbt *t, double score, const unsigned char *m, size_t len) {
    int ret = zbtAppend(t, score, m, len);
    if (ret == ZBT_ERR_ORDER) ret = zbtInsert(t, score, m, len);
    return ret;
}

/* ZADD that creates a key past the listpack (W4's sets of a few hundred
 * members in one command): the members sorted by score and member, then
 * appended, fill the tree in one pass and its leaves whole, instead of an
 * insert each into leaves split half full. `argv` holds the command's
 * score/member pairs (members at odd offsets), `scores` their parsed
 * values. Returns 1, or 0 with the tree emptied again when a member
 * repeats, so that ZADD then applies its rules for repeats one by one. */
typedef struct zaddEntry {
    double score;
    sds member;
} zaddEntry;

static int zaddEntryCompare(const void *a, const void *b) {
    const zaddEntry *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? -1 : 1;
    return sdscmp(x->member, y->member);
}

int zsetBtreeAddNew(robj *zobj, const double *scores, robj **argv, size_t n) {
    zbt *t = objectGetVal(zobj);
    serverAssert(zbtLength(t) == 0);
    zaddEntry *entries = zmalloc(sizeof(*entries) * n);
    for (size_t j = 0; j < n; j++) {
        entries[j].score = scores[j];
        entries[j].member = objectGetVal(argv[j * 2 + 1]);
    }
    qsort(entries, n, sizeof(*entries), zaddEntryCompare);
    int distinct = 1;
    for (size_t j = 0; j < n && distinct; j++) {
        const zaddEntry *e = &entries[j];
        distinct = zsetBtreeAdd(t, e->score, (unsigned char *)e->member, sdslen(e->member)) == ZBT_OK;
    }
    zfree(entries);
    if (!distinct) {
        zbtFree(t);
        objectSetVal(zobj, zbtCreate(n > ZSET_BTREE_PRESIZE_MAX ? ZSET_BTREE_PRESIZE_MAX : n));
        return 0;
    }
    zbtAppendDone(t);
    return 1;
}

/* Builds the tree of a listpack-encoded set and frees the listpack; or,
 * when the listpack is no set (a duplicate member, a NaN score: only a
 * corrupt payload holds them), returns NULL and leaves it as it is. */
zbt *zsetBtreeFromListpack(unsigned char *zl, size_t cap) {
    zbt *t = zbtCreate(cap > ZSET_BTREE_PRESIZE_MAX ? ZSET_BTREE_PRESIZE_MAX : cap);
    unsigned char *eptr = lpSeek(zl, 0), *sptr;
    while (eptr != NULL) {
        sptr = lpNext(zl, eptr);
        serverAssert(sptr != NULL);
        unsigned char buf[LP_INTBUF_SIZE];
        int64_t vlen;
        unsigned char *vstr = lpGet(eptr, &vlen, buf);
        if (zsetBtreeAdd(t, zzlGetScore(sptr), vstr, vlen) != ZBT_OK) {
            zbtFree(t);
            return NULL;
        }
        eptr = lpNext(zl, sptr);
    }
    zbtAppendDone(t);
    zfree(zl);
    return t;
}

/* Converts a listpack-encoded set just loaded (RDB, RESTORE) to a tree.
 * Returns C_ERR, the object unchanged, when the listpack is no set. */
int zsetConvertFromLoadedListpack(robj *o) {
    zbt *t = zsetBtreeFromListpack(objectGetVal(o), zsetLength(o));
    if (t == NULL) return C_ERR;
    objectSetVal(o, t);
    o->encoding = OBJ_ENCODING_BTREE;
    return C_OK;
}

/* COPY: appended in order with the members' times (t_member_ttl.c),
 * leaves filled whole; the mark that goes with the times too. */
zbt *zsetBtreeDup(zbt *t) {
    zbt *copy = zbtCreate(zbtLength(t));
    zbtCursor *cur = zmalloc(sizeof(*cur));
    for (int more = zbtFirst(t, cur); more; more = zbtNext(cur))
        serverAssert(zbtAppendTimed(copy, cur->score, cur->member, cur->len, cur->when) == ZBT_OK);
    zfree(cur);
    zbtAppendDone(copy);
    *zbtMark(copy) = *zbtMark(t);
    return copy;
}

/* Upstream's lex bounds are sds strings, or shared.minstring/maxstring for
 * - and +; the engine's are byte ranges with an infinity flag. */
static zbtLexBound lexBound(sds s, int ex) {
    zbtLexBound b = {.s = NULL, .len = 0, .inf = 0, .ex = ex};
    if (s == shared.minstring) {
        b.inf = -1;
    } else if (s == shared.maxstring) {
        b.inf = 1;
    } else {
        b.s = (const unsigned char *)s;
        b.len = sdslen(s);
    }
    return b;
}

zbtLexRange zsetBtreeLexRange(const zlexrangespec *spec) {
    zbtLexRange r = {.min = lexBound(spec->min, spec->minex), .max = lexBound(spec->max, spec->maxex)};
    return r;
}

/* A member picked uniformly: the entry at a random rank. The member's bytes
 * stay valid until the next write to the tree. */
void zsetBtreeRandomEntry(zbt *t, listpackEntry *key, double *score) {
    zbtCursor cur; /* on the stack: ZRANDMEMBER calls this once per member */
    serverAssert(zbtAtRank(t, genrand64_int64() % zbtLength(t), &cur));
    key->sval = (unsigned char *)cur.member;
    key->slen = cur.len;
    if (score) *score = cur.score;
}

/* ZRANDMEMBER's count of distinct members when the count is close to the
 * set's size: a partial Fisher-Yates shuffle of the ranks picks them
 * uniformly and in random order, and each is read where it lies, so no
 * member is copied. */
void zsetBtreeReplyRandomDistinct(client *c, zbt *t, unsigned long count, int withscores) {
    unsigned long size = zbtLength(t);
    serverAssert(count <= size);
    unsigned long *ranks = zmalloc(sizeof(*ranks) * size);
    for (unsigned long i = 0; i < size; i++) ranks[i] = i;
    zbtCursor cur;
    for (unsigned long i = 0; i < count; i++) {
        unsigned long j = i + genrand64_int64() % (size - i);
        unsigned long rank = ranks[j];
        ranks[j] = ranks[i];
        serverAssert(zbtAtRank(t, rank, &cur));
        if (withscores && c->resp > 2) addReplyArrayLen(c, 2);
        addReplyBulkCBuffer(c, cur.member, cur.len);
        if (withscores) addReplyDouble(c, cur.score);
    }
    zfree(ranks);
}

/* The longest member's length, adding every member's to *totallen. */
size_t zsetBtreeMaxMemberLength(zbt *t, size_t *totallen) {
    size_t maxlen = 0;
    zbtCursor *cur = zmalloc(sizeof(*cur));
    for (int more = zbtFirst(t, cur); more; more = zbtNext(cur)) {
        if (cur->len > maxlen) maxlen = cur->len;
        if (totallen) *totallen += cur->len;
    }
    zfree(cur);
    return maxlen;
}

/* ZSCAN: members in the order of their hashes, so that a cursor stays valid
 * while the set grows and shrinks (the guarantee SCAN gives). Members, and
 * scores unless only_keys, go to `out` (a vector of stringRef) as new sds
 * strings, which the caller frees with sdsfree. */
typedef struct scanTarget {
    sds pattern;
    int only_keys;
    vector *out;
} scanTarget;

static void scanPush(vector *out, sds s) {
    stringRef *item = vectorPush(out);
    item->buf = s;
    item->len = sdslen(s);
}

static void scanEmit(void *privdata, const unsigned char *m, size_t len, double score) {
    scanTarget *st = privdata;
    if (st->pattern && !stringmatchlen(st->pattern, sdslen(st->pattern), (const char *)m, len, 0)) return;
    scanPush(st->out, sdsnewlen(m, len));
    if (!st->only_keys) {
        char buf[MAX_LONG_DOUBLE_CHARS];
        int slen = ld2string(buf, sizeof(buf), score, LD_STR_AUTO);
        scanPush(st->out, sdsnewlen(buf, slen));
    }
}

unsigned long long zsetBtreeScan(zbt *t, unsigned long long cursor, long count, sds pattern, int only_keys, vector *out) {
    scanTarget st = {.pattern = pattern, .only_keys = only_keys, .out = out};
    size_t n = count > 0 ? (size_t)count : 1;
    /* A big set (t_set_btree.c), either form. */
    if (ibsIsSet(t) || hpsIsSet(t)) return setBtreeScan(t, cursor, n, scanEmit, &st);
    return zbtScan(t, cursor, n, scanEmit, &st);
}

/* Module range iterators
 * ----------------------
 *
 * A module's range iterator over a big set (module.c keeps it in the key,
 * outside the per-type union, so that it is freed whatever becomes of the
 * key) is an engine cursor and a copy of the entry it is on:
 *
 *   zsetModuleCursor { tree, version, valid, score, member (sds), cursor }
 *
 * The cursor is used while the tree is the one it was taken in and at the
 * same version. After a change (the module added or removed members, even
 * through the same iterator's key) the copy finds the iterator's place
 * again: like upstream's skiplist node, it stays on its entry, and steps
 * from there to the entries now next to it, whether or not its own entry
 * is still there. Its entry is also what CurrentElement returns, so that a
 * removed entry is never read. */
struct zsetModuleCursor {
    zbt *tree;
    uint64_t version;
    int valid; /* cur is usable (at tree and version). */
    double score;
    sds member;
    zbtCursor cur;
};

static void moduleCursorTake(zsetModuleCursor *mc, zbt *t) {
    mc->tree = t;
    mc->version = zbtVersion(t);
    mc->valid = 1;
    mc->score = mc->cur.score;
    mc->member = sdscpylen(mc->member, (const char *)mc->cur.member, mc->cur.len);
}

static int inModuleRange(const zbtCursor *cur, int byscore, zrangespec *rs, zlexrangespec *lrs) {
    if (byscore) return zbtScoreInRange(cur->score, rs);
    zbtLexRange lr = zsetBtreeLexRange(lrs);
    return zbtLexInRange(cur->member, cur->len, &lr);
}

/* The iterator on the first (or last) entry of the range, or NULL. */
zsetModuleCursor *zsetModuleCursorFirst(zbt *t, int first, int byscore, zrangespec *rs, zlexrangespec *lrs) {
    zsetModuleCursor *mc = zmalloc(sizeof(*mc));
    int found;
    if (byscore) {
        found = first ? zbtFirstInScoreRange(t, rs, &mc->cur) : zbtLastInScoreRange(t, rs, &mc->cur);
    } else {
        zbtLexRange lr = zsetBtreeLexRange(lrs);
        found = first ? zbtFirstInLexRange(t, &lr, &mc->cur) : zbtLastInLexRange(t, &lr, &mc->cur);
    }
    if (!found) {
        zfree(mc);
        return NULL;
    }
    mc->member = sdsempty();
    moduleCursorTake(mc, t);
    return mc;
}

/* An iterator that was on (score, member) of a listpack that became the
 * tree t under it: it goes on from that entry's place. */
zsetModuleCursor *zsetModuleCursorAt(zbt *t, double score, sds member) {
    zsetModuleCursor *mc = zcalloc(sizeof(*mc));
    mc->tree = t;
    mc->valid = 0;
    mc->score = score;
    mc->member = sdsdup(member);
    return mc;
}

void zsetModuleCursorFree(zsetModuleCursor *mc) {
    if (!mc) return;
    sdsfree(mc->member);
    zfree(mc);
}

sds zsetModuleCursorEntry(zsetModuleCursor *mc, double *score) {
    if (score) *score = mc->score;
    return mc->member;
}

/* Moves the iterator one entry forwards or backwards within the range
 * (score range when byscore, else lex range) of the set t. Returns 0, and
 * stays on its entry, when there is no such entry. */
int zsetModuleCursorStep(zsetModuleCursor *mc, zbt *t, int forward, int byscore, zrangespec *rs,
                         zlexrangespec *lrs) {
    zbtCursor *cur = &mc->cur;
    int moved;
    if (mc->valid && mc->tree == t && mc->version == zbtVersion(t)) {
        moved = forward ? zbtNext(cur) : zbtPrev(cur);
    } else {
        /* Its place again: the first entry at or after its own. */
        const unsigned char *m = (const unsigned char *)mc->member;
        size_t len = sdslen(mc->member);
        int found = zbtSeek(t, mc->score, m, len, cur);
        if (forward) {
            int same = found && cur->score == mc->score && cur->len == len && memcmp(cur->member, m, len) == 0;
            moved = found && (!same || zbtNext(cur));
        } else {
            moved = found ? zbtPrev(cur) : zbtLast(t, cur);
        }
    }
    if (moved && inModuleRange(cur, byscore, rs, lrs)) {
        moduleCursorTake(mc, t);
        return 1;
    }
    mc->valid = 0; /* cur left its entry: find it again next time */
    return 0;
}

/* The entry of a listpack set at or after (score, member), or NULL. */
static unsigned char *zsetListpackSeek(unsigned char *zl, double score, sds member) {
    unsigned char *eptr = lpSeek(zl, 0);
    while (eptr) {
        unsigned char *sptr = lpNext(zl, eptr);
        double s = zzlGetScore(sptr);
        if (s > score || (s == score && zzlCompareElements(eptr, (unsigned char *)member, sdslen(member)) >= 0))
            return eptr;
        eptr = lpNext(zl, sptr);
    }
    return NULL;
}

/* Where a module's iterator that was on (score, member) of a listpack set
 * goes on after a write through its key moved the listpack's entries: the
 * entry at or after its own in the listpack (NULL past the end), or, when
 * the set became a tree, a cursor of ours (*cursor) that finds that place
 * at its first step. */
void *zsetModuleIterFollow(robj *zobj, double score, sds member, zsetModuleCursor **cursor) {
    if (zobj->encoding == OBJ_ENCODING_LISTPACK) return zsetListpackSeek(objectGetVal(zobj), score, member);
    *cursor = zsetModuleCursorAt(objectGetVal(zobj), score, member);
    return *cursor;
}

/* Deep sanitization of a loaded zset listpack: every score a number and the
 * (score, member) pairs strictly ascending, which also rules out duplicate
 * members next to each other. (Duplicates apart are found by the caller's
 * check.) */
int zsetListpackIsOrdered(unsigned char *zl) {
    unsigned char prevbuf[LP_INTBUF_SIZE], buf[LP_INTBUF_SIZE];
    unsigned char *prev = NULL;
    size_t prevlen = 0;
    double prevscore = 0;
    unsigned char *eptr = lpSeek(zl, 0);
    while (eptr != NULL) {
        unsigned char *sptr = lpNext(zl, eptr);
        if (sptr == NULL) return 0;
        double score = zzlGetScore(sptr);
        if (isnan(score)) return 0;
        int64_t count;
        unsigned char *vstr = lpGet(eptr, &count, buf);
        size_t vlen = (size_t)count;
        if (prev) {
            int cmp = score < prevscore ? -1 : score > prevscore;
            if (cmp == 0) {
                int m = memcmp(prev, vstr, prevlen < vlen ? prevlen : vlen);
                cmp = m ? -m : (vlen > prevlen) - (vlen < prevlen);
            }
            if (cmp <= 0) return 0;
        }
        /* The previous member: a pointer into the listpack, or a copy of
         * an integer's digits. */
        if (vstr == buf) {
            memcpy(prevbuf, buf, vlen);
            prev = prevbuf;
        } else {
            prev = vstr;
        }
        prevlen = vlen;
        prevscore = score;
        eptr = lpNext(zl, sptr);
    }
    return 1;
}

/* dismissObject() of a big set, in a fork child that has saved it: the
 * tree's big allocations (arena chunks, index segments, the leaf table) go
 * back, whole pages, so the server's writes to them copy nothing. Its
 * small ones (inner nodes, leaves of a small tree) are left, as upstream
 * leaves a skiplist's nodes. */
void zsetBtreeDismiss(robj *o, size_t size_hint) {
    UNUSED(size_hint);
    if (o->type == OBJ_SET)
        setBtreeDismiss(o);
    else
        zbtDismiss(objectGetVal(o), server.page_size, dismissMemory);
}

/* A big sorted set about to be saved by an RDB or AOF child: its member
 * index goes back before the save instead of after it (the save walks the
 * leaves and reads no index), so that while the child saves it, the
 * server's writes to the index copy nothing. It is two fifths of a tree of
 * short members, and every write that moves a member to another leaf
 * re-points its slot. Gated as dismissObject is; not in a module's child,
 * which may look members up after it serialized the key. */
void zsetBtreeDismissIndexBeforeSave(robj *o) {
    if (server.in_fork_child != CHILD_TYPE_RDB && server.in_fork_child != CHILD_TYPE_AOF) return;
    if (server.thp_enabled || o->refcount != 1) return;
#if defined(USE_JEMALLOC) && defined(__linux__)
    zbtDismissIndex(objectGetVal(o), server.page_size, dismissMemory);
#endif
}

/* DEBUG BTREE <key> [CHECK] and DEBUG HTSTATS-KEY of a big set: the tree's
 * figures (a walk of its leaves, as DEBUG LISTPACK walks a listpack), or
 * the check of every invariant of the tree and its index. */
static sds catIndexStats(sds s, zbt *t) {
    zmiStats ix;
    zmiGetStats(zbtIndex(t), &ix);
    return sdscatfmt(s,
                     "index_entries:%U\r\nindex_slots:%U\r\nindex_load_permille:%U\r\n"
                     "index_segments:%U\r\nindex_depth:%u\r\nindex_longest_probe:%u\r\n"
                     "index_largest_segment_bytes:%U\r\nindex_bytes:%U\r\n",
                     (unsigned long long)ix.entries, (unsigned long long)ix.slots,
                     (unsigned long long)(ix.slots ? ix.entries * 1000 / ix.slots : 0),
                     (unsigned long long)ix.segments, ix.depth, ix.longestProbe,
                     (unsigned long long)ix.largestSegmentBytes, (unsigned long long)ix.bytes);
}

void zsetBtreeDebug(client *c, robj *o, int check) {
    zbt *t = objectGetVal(o);
    if (o->type == OBJ_SET) {
        setBtreeDebug(c, o, check); /* a big set (t_set_btree.c) */
        return;
    }
    if (check) {
        const char *err = zbtCheck(t);
        if (!err) err = memberTtlCheck(o);
        if (err) addReplyErrorFormat(c, "btree check failed: %s", err);
        else addReply(c, shared.ok);
        return;
    }
    zbtStats st;
    zbtGetStats(t, &st);
    sds s = sdscatfmt(sdsempty(),
                      "members:%U\r\nheight:%U\r\nleaves:%U\r\ninner_nodes:%U\r\n"
                      "leaf_fill_permille:%U\r\narena_chunks:%U\r\nleaf_ids:%U\r\nfree_leaf_ids:%U\r\n"
                      "leaf_bytes:%U\r\ninner_bytes:%U\r\nlong_member_bytes:%U\r\nother_bytes:%U\r\n",
                      (unsigned long long)zbtLength(t), (unsigned long long)st.height,
                      (unsigned long long)st.leaves, (unsigned long long)st.inners,
                      (unsigned long long)(st.payloadCap ? st.payloadUsed * 1000 / st.payloadCap : 0),
                      (unsigned long long)st.arenaChunks, (unsigned long long)st.leafIds,
                      (unsigned long long)st.freeIds, (unsigned long long)st.leafBytes,
                      (unsigned long long)st.innerBytes, (unsigned long long)st.oolBytes,
                      (unsigned long long)st.otherBytes);
    s = catIndexStats(s, t);
    s = sdscatfmt(s, "total_bytes:%U\r\n", (unsigned long long)zbtAllocSize(t));
    s = memberTtlDebugInfo(s, o);
    addReplyVerbatim(c, s, sdslen(s), "txt");
    sdsfree(s);
}

void zsetBtreeIndexStats(client *c, robj *o) {
    sds s = ibsIsSet(objectGetVal(o))   ? sdsnew("index:none (integer blocks)\r\n")
            : hpsIsSet(objectGetVal(o)) ? sdsnew("index:none (hashed buckets)\r\n")
                                        : catIndexStats(sdsempty(), objectGetVal(o));
    addReplyVerbatim(c, s, sdslen(s), "txt");
    sdsfree(s);
}
