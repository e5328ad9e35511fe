/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Members that expire, of sets and sorted sets: SADDEX, SEXPIRE and their
 * kin (Redis 8.12's names, arguments and replies), and the same family for
 * sorted sets (ZADDEX, ZEXPIRE, ZTTL, ZPERSIST, ...).
 *
 * A set or sorted set with a member that has an expire time is in its big
 * form (t_set_btree.c, t_zset_btree.c), whose engine keeps each time in
 * its member's entry (a set of integers moves to the string form), with a
 * bound no later than any time in each segment or leaf, and in the key:
 *
 *   robj { OBJ_SET, BTREE }  --> hpset { ..., timed, earliest, mark }
 *                                  entry [member][time]
 *   robj { OBJ_ZSET, BTREE } --> zbt { ..., mark, times { earliest,
 *                                  timed, bound per leaf } }
 *                                  entry [score][member][time]
 *
 * So a member's time is read with it, and the due members are found in
 * the segments or leaves whose bound has come (setBtreeDue, zbtDue).
 *
 * Invariants:
 * - A time is no later than TTL_MAX_MS (2^48 ms, Redis's bound for a
 *   member's time; a score holds every time up to 2^53 exactly). Every
 *   member of an index is a member of the key.
 * - A key has its mark set exactly while it is in its database's
 *   keys_with_volatile_items (objectHasVolatileItems), which the FIELDS
 *   job of active expiry (expire.c) walks. Removing a member
 *   (setBtreeRemove, zsetDel, ZREMRANGE*) takes its time away and may
 *   leave none; whoever next holds the database for it (a TTL command, a
 *   reclaim) untracks the key (tidyIndex).
 * - A tracked key stays in the big form: SPOP of most of a set, which
 *   rebuilds the rest into a new small set, pops one by one instead.
 *
 * Who removes a due member:
 * - lookupKey(), on a primary, before a command sees the key
 *   (memberTtlOnLookup), so that no command sees one there;
 * - active expiry, within active-expire-effort's budget, for keys nobody
 *   reads (memberTtlReclaim, through dbReclaimExpiredFields).
 * Both propagate SREM / ZREM of the members, and delete a key left empty,
 * as upstream's hash field expiry propagates HDEL. A replica removes
 * members on its primary's SREM / ZREM only; until then its reads see a
 * temporary copy without the due ones (strcompHoldTemp), as upstream's
 * replicas hide an expired key.
 *
 * Commands that set a time propagate it as an absolute one (SPEXPIREAT,
 * SADDEX ... PXAT and their sorted-set twins), and a time already past as
 * SREM / ZREM of the members it removes.
 */

#include "server.h"
#include "expire.h"
#include "hpset.h"
#include "memberttl.h"
#include "rdb.h"
#include "strcomp.h"

/* 2^48 ms, in the year 10889: Redis's bound for a member's time. */
#define TTL_MAX_MS (1LL << 48)
/* How long active expiry lets a key's due members gather before it reads
 * its due segments or leaves for them (docs/engine.md part 8). */
#define RECLAIM_LAG_MS 3000
/* Members a propagated SREM names at most. */
#define RECLAIM_BATCH 1024

/* Per-member reply codes of SEXPIRE and SPERSIST. */
#define MEMBER_MISSING -2
#define MEMBER_NO_TTL -1
#define MEMBER_UNCHANGED 0
#define MEMBER_SET 1
#define MEMBER_REMOVED 2

static long long stat_expired_members = 0;
static robj *saddex_cmd, *zaddex_cmd, *pxat_arg, *keepttl_arg, *members_arg;

/* What differs between a set and a sorted set here. */
typedef struct memberKind {
    int type, notify;
    const char *rem, *pexpireat;      /* The commands propagated. */
    char *expired, *expire, *persist; /* Keyspace events. */
    char *remevent;
    robj *rem_cmd, *pexpireat_cmd;
} memberKind;

static memberKind set_kind = {OBJ_SET, NOTIFY_SET, "SREM", "SPEXPIREAT", "sexpired", "sexpire", "spersist", "srem"};
static memberKind zset_kind = {OBJ_ZSET, NOTIFY_ZSET, "ZREM", "ZPEXPIREAT", "zexpired", "zexpire", "zpersist", "zrem"};

static memberKind *kindOf(const robj *o) {
    return o->type == OBJ_SET ? &set_kind : &zset_kind;
}

static robj *sharedName(robj **o, const char *name) {
    if (!*o) *o = makeObjectShared(createStringObject(name, strlen(name)));
    return *o;
}

/* --- The engines' times --- */

/* A big set: its times are in its engine (setBtreeMemberTime and kin). */
static int bigSet(const robj *o) {
    return o->type == OBJ_SET && o->encoding == OBJ_ENCODING_BTREE;
}

/* A big sorted set's tree, NULL for any other key. */
static zbt *treeOf(const robj *o) {
    return o->type == OBJ_ZSET && o->encoding == OBJ_ENCODING_BTREE ? objectGetVal(o) : NULL;
}

/* The engines count times from 1 ms: a time of 0, long past, is kept as
 * 1 (as t_set_btree.c does). */
static uint64_t engineTime(long long when) {
    return when < 0 ? 0 : when == 0 ? 1 : (uint64_t)when;
}

static unsigned long timedCount(robj *o) {
    if (bigSet(o)) return setBtreeTimedCount(o);
    zbt *t = treeOf(o);
    return t ? zbtTimedCount(t) : 0;
}

bool objectHasVolatileMembers(robj *o) {
    return timedCount(o) != 0;
}

/* The key's mark: whether its database tracks it for its times. NULL for
 * a key that cannot have a time (another type, a small form, a set of
 * integers). */
static uint8_t *markOf(robj *o) {
    if (bigSet(o)) return setBtreeMark(o);
    zbt *t = treeOf(o);
    return t ? zbtMark(t) : NULL;
}

/* Whether the key is in its database's volatile items. */
static int tracked(robj *o) {
    uint8_t *mark = markOf(o);
    return mark && *mark;
}

bool objectHasVolatileItems(robj *o) {
    if (o->type == OBJ_HASH) return hashTypeHasVolatileFields(o);
    return tracked(o);
}

/* --- Members, whatever the key's type --- */

static int isMember(robj *o, sds m) {
    double score;
    return o->type == OBJ_SET ? setTypeIsMember(o, m) : zsetScore(o, m, &score) == C_OK;
}

/* Removes a member and its time. Returns 1 if it was there. */
static int removeMember(robj *o, sds m) {
    return o->type == OBJ_SET ? setTypeRemove(o, m) : zsetDel(o, m);
}

static unsigned long memberCount(robj *o) {
    return o->type == OBJ_SET ? setTypeSize(o) : zsetLength(o);
}

/* The member's expire time, or EXPIRY_NONE. */
static long long memberExpire(robj *o, sds m) {
    long long when;
    if (bigSet(o)) return setBtreeMemberTime(o, m, sdslen(m), &when) ? when : EXPIRY_NONE;
    zbt *t = treeOf(o);
    uint64_t w = 0;
    if (!t || !zbtTimedCount(t) || !zbtTime(t, (const unsigned char *)m, sdslen(m), &w) || !w) return EXPIRY_NONE;
    return (long long)w;
}

/* Marks a big key as having times and tracks it in its database's
 * volatile items, if it was not. */
static void trackKey(serverDb *db, robj *o) {
    uint8_t *mark = markOf(o);
    if (*mark) return;
    *mark = 1;
    dbTrackKeyWithVolatileItems(db, o);
}

/* Gives a member of the key an expire time; the key moves to the big
 * form and into the database's volatile items if it was not there. */
static void setMemberExpire(serverDb *db, robj *o, sds m, long long when) {
    if (o->encoding != OBJ_ENCODING_BTREE) {
        if (o->type == OBJ_SET)
            setTypeConvert(o, OBJ_ENCODING_BTREE);
        else
            zsetConvert(o, OBJ_ENCODING_BTREE);
    }
    if (bigSet(o))
        serverAssert(setBtreeSetMemberTime(o, m, sdslen(m), when, NULL));
    else
        serverAssert(zbtSetTime(treeOf(o), (const unsigned char *)m, sdslen(m), engineTime(when), NULL));
    trackKey(db, o);
}

/* Returns 1 if the member had an expire time. */
static int persistMember(robj *o, sds m) {
    int had;
    if (bigSet(o)) return setBtreeSetMemberTime(o, m, sdslen(m), -1, &had) && had;
    zbt *t = treeOf(o);
    uint64_t old = 0;
    return t && zbtTimedCount(t) && zbtSetTime(t, (const unsigned char *)m, sdslen(m), 0, &old) && old;
}

/* Takes a key left without times out of the volatile items. */
static void tidyIndex(serverDb *db, robj *o) {
    if (!tracked(o) || timedCount(o)) return;
    dbUntrackKeyWithVolatileItems(db, o);
    *markOf(o) = 0;
}

/* --- Removing due members --- */

typedef struct takenDue {
    void (*fn)(void *ctx, robj *m);
    void *ctx;
} takenDue;

static void takeDue(void *ctx, const unsigned char *m, size_t len) {
    takenDue *d = ctx;
    /* One allocation, which SREM / ZREM propagates as it is. */
    d->fn(d->ctx, createStringObject((const char *)m, len));
}

static void takeSetDue(void *ctx, const unsigned char *m, size_t len, long long when) {
    UNUSED(when);
    takeDue(ctx, m, len);
}

static void takeZsetDue(void *ctx, const unsigned char *m, size_t len, double score, uint64_t when) {
    UNUSED(score);
    UNUSED(when);
    takeDue(ctx, m, len);
}

/* Removes the key's members due at `now`, up to max, handing each to fn
 * (which takes the object): its engine takes them out segment by segment,
 * or leaf by leaf, where it finds them. Returns how many. */
static size_t removeDue(robj *o, mstime_t now, size_t max, void (*fn)(void *ctx, robj *m), void *ctx) {
    takenDue d = {fn, ctx};
    if (bigSet(o)) return setBtreeDue(o, now, max, takeSetDue, &d);
    zbt *t = treeOf(o);
    return t && now >= 1 ? zbtDue(t, (uint64_t)now, max, takeZsetDue, &d) : 0;
}

typedef struct dueBatch {
    robj *members[RECLAIM_BATCH];
    int n;
} dueBatch;

static void collectDue(void *ctx, robj *m) {
    dueBatch *b = ctx;
    b->members[b->n++] = m;
}

static void dropDue(void *ctx, robj *m) {
    UNUSED(ctx);
    decrRefCount(m);
}

/* SREM / ZREM key member... (n <= RECLAIM_BATCH). */
static void propagateRemoval(memberKind *k, serverDb *db, robj *keyobj, robj **members, int n, int didx) {
    robj *argv[2 + RECLAIM_BATCH];
    argv[0] = sharedName(&k->rem_cmd, k->rem);
    argv[1] = keyobj;
    memcpy(argv + 2, members, n * sizeof(robj *));
    int prev_replication_allowed = server.replication_allowed;
    server.replication_allowed = 1;
    alsoPropagate(db->id, argv, 2 + n, PROPAGATE_AOF | PROPAGATE_REPL, didx);
    server.replication_allowed = prev_replication_allowed;
}

/* Removes up to max members of the key whose time is `now` or earlier,
 * propagates their removal, and deletes the key if it is left empty
 * (*deleted then set). Returns the members removed. */
static size_t reclaimDue(serverDb *db, robj *o, robj *keyobj, mstime_t now, unsigned long max, int didx,
                         int *deleted) {
    memberKind *k = kindOf(o);
    dueBatch batch;
    size_t total = 0;
    *deleted = 0;
    while (max) {
        batch.n = 0;
        size_t n = removeDue(o, now, max < RECLAIM_BATCH ? max : RECLAIM_BATCH, collectDue, &batch);
        if (!n) break;
        propagateRemoval(k, db, keyobj, batch.members, batch.n, didx);
        for (int i = 0; i < batch.n; i++) decrRefCount(batch.members[i]);
        total += n;
        max -= n;
        if (n < RECLAIM_BATCH) break;
    }
    if (!total) return 0;
    stat_expired_members += total;
    notifyKeyspaceEvent(k->notify, k->expired, keyobj, db->id);
    if (memberCount(o) == 0) {
        dbDelete(db, keyobj);
        notifyKeyspaceEvent(NOTIFY_GENERIC, "del", keyobj, db->id);
        *deleted = 1;
    } else {
        tidyIndex(db, o);
    }
    signalModifiedKey(NULL, db, keyobj);
    return total;
}

/* At most the earliest time of the key's members, LLONG_MAX without one. */
static long long earliest(robj *o) {
    if (bigSet(o)) return setBtreeEarliest(o);
    zbt *t = treeOf(o);
    uint64_t when = t ? zbtEarliest(t) : 0;
    return when ? (long long)when : LLONG_MAX;
}

/* A copy of the key without its members due at `now`, or NULL if none is
 * left: what a replica's read sees. */
static robj *copyWithoutDue(robj *o, mstime_t now) {
    robj *copy = o->type == OBJ_SET ? setTypeDup(o) : zsetDup(o);
    removeDue(copy, now, SIZE_MAX, dropDue, NULL);
    if (memberCount(copy)) return copy;
    decrRefCount(copy);
    return NULL;
}

robj *memberTtlOnLookup(serverDb *db, robj *key, robj *o, int lookup_flags, int expire_flags, int didx) {
    if (!tracked(o) || server.lazy_expire_disabled) return o;
    mstime_t now = commandTimeSnapshot();
    if (earliest(o) > now) return o;
    expirationPolicy policy = getExpirationPolicyWithFlags(expire_flags);
    if (policy == POLICY_DELETE_EXPIRED) {
        int deleted;
        reclaimDue(db, o, key, now, ULONG_MAX, didx, &deleted);
        return deleted ? NULL : o;
    }
    /* A replica (or a paused primary) keeps due members until they are
     * removed for it, but a read does not see them: it reads a temporary
     * copy without them, released with its execution unit. A write (a
     * writable replica's) sees the key as it is. */
    if (policy == POLICY_IGNORE_EXPIRE || (lookup_flags & LOOKUP_WRITE)) return o;
    robj *copy = copyWithoutDue(o, now);
    return copy ? strcompHoldTemp(copy) : NULL;
}

size_t memberTtlReclaim(robj *o, serverDb *db, mstime_t now, unsigned long max, int didx) {
    /* Due members are found by reading due segments or leaves whole, so
     * active expiry lets them gather for a while first (a lookup takes
     * them at once). */
    if (earliest(o) > now - RECLAIM_LAG_MS) {
        tidyIndex(db, o);
        return 0;
    }
    robj *keyobj = createStringObjectFromSds(objectGetKey(o));
    enterExecutionUnit(1, 0);
    int deleted;
    size_t removed = reclaimDue(db, o, keyobj, now, max, didx, &deleted);
    exitExecutionUnit();
    postExecutionUnitOperations();
    decrRefCount(keyobj);
    return removed;
}

sds memberTtlInfo(sds info) {
    return sdscatprintf(info, "expired_members:%lld\r\n", stat_expired_members);
}

typedef int (*ttlEntryFn)(void *ctx, const unsigned char *m, size_t len, long long when);
static int forEachTtl(robj *o, ttlEntryFn fn, void *ctx);

/* --- DEBUG BTREE --- */

sds memberTtlDebugInfo(sds s, robj *o) {
    long long when = earliest(o);
    return sdscatfmt(s, "volatile_members:%U\r\nearliest_expire_ms:%I\r\n", (unsigned long long)timedCount(o),
                     when == LLONG_MAX ? -1 : when);
}

typedef struct checkCtx {
    robj *o;
    const char *err;
} checkCtx;

static int checkTtlEntry(void *ctx, const unsigned char *m, size_t len, long long when) {
    checkCtx *cc = ctx;
    sds member = sdsnewlen(m, len);
    if (!isMember(cc->o, member))
        cc->err = "an expire time for no member";
    else if (when < 0 || when > TTL_MAX_MS)
        cc->err = "an expire time out of range";
    else if (when < earliest(cc->o))
        cc->err = "an expire time before the key's earliest";
    sdsfree(member);
    return cc->err == NULL;
}

const char *memberTtlCheck(robj *o) {
    checkCtx cc = {o, NULL};
    forEachTtl(o, checkTtlEntry, &cc);
    if (!cc.err && objectHasVolatileMembers(o) && !tracked(o)) cc.err = "a key with times is not tracked";
    return cc.err;
}

/* --- Arguments --- */


/* Parses `MEMBERS nummembers member...` at argv[at] (the STTL family and
 * SPERSIST: the block is the command's last). Returns the index of the
 * first member, or 0 after an error reply. */
static int parseFixedMembers(client *c, int at, long long *n) {
    if (at >= c->argc || !memberTtlOptIs(objectGetVal(c->argv[at]), "members")) {
        addReplyError(c, "Mandatory argument MEMBERS is missing or not at the right position");
        return 0;
    }
    if (getLongLongFromObject(c->argv[at + 1], n) != C_OK || *n <= 0) {
        addReplyError(c, "Number of members must be a positive integer");
        return 0;
    }
    if (*n != c->argc - at - 2) {
        addReplyError(c, "The `nummembers` parameter must match the number of arguments");
        return 0;
    }
    return at + 2;
}

/* Reads a MEMBERS block found at argv[*j] among other options: sets
 * *first and *n and moves *j past the block. C_ERR after an error reply. */
static int parseMembersBlock(client *c, int *j, int *first, long long *n, const char *badcount) {
    if (*first) {
        addReplyError(c, "MEMBERS keyword specified multiple times");
        return C_ERR;
    }
    if (*j + 1 >= c->argc || getLongLongFromObject(c->argv[*j + 1], n) != C_OK || *n <= 0) {
        addReplyError(c, badcount);
        return C_ERR;
    }
    if (*n > c->argc - *j - 2) {
        addReplyError(c, "wrong number of arguments");
        return C_ERR;
    }
    *first = *j + 2;
    *j += 2 + (int)*n;
    return C_OK;
}

/* The time argument as Unix milliseconds, within TTL_MAX_MS. */
static int parseWhen(client *c, robj *arg, mstime_t basetime, int unit, mstime_t *when) {
    if (convertExpireArgumentToUnixTime(c, arg, basetime, unit, when) != C_OK) return C_ERR;
    if (*when > TTL_MAX_MS) {
        addReplyErrorExpireTime(c);
        return C_ERR;
    }
    return C_OK;
}

/* Deletes a key left empty. Returns 1 if it did. */
static int deleteIfEmpty(client *c, robj *o) {
    if (memberCount(o)) return 0;
    dbDelete(c->db, c->argv[1]);
    notifyKeyspaceEvent(NOTIFY_GENERIC, "del", c->argv[1], c->db->id);
    return 1;
}

/* Removes the members given that a time past removed, propagating their
 * removal; the command itself is not propagated unless it changed more. */
static void propagateRemovals(client *c, memberKind *k, robj **members, int n) {
    for (int i = 0; i < n; i += RECLAIM_BATCH) {
        int batch = n - i < RECLAIM_BATCH ? n - i : RECLAIM_BATCH;
        propagateRemoval(k, c->db, c->argv[1], members + i, batch, c->slot);
    }
    notifyKeyspaceEvent(k->notify, k->remevent, c->argv[1], c->db->id);
}

/* --- SEXPIRE, SPEXPIRE, SEXPIREAT, SPEXPIREAT and ZEXPIRE's kin --- */

static int conditionHolds(int flags, long long cur, long long when) {
    if (flags & EXPIRE_NX) return cur == EXPIRY_NONE;
    if (flags & EXPIRE_XX) return cur != EXPIRY_NONE;
    if (flags & EXPIRE_GT) return cur != EXPIRY_NONE && when > cur;
    if (flags & EXPIRE_LT) return cur == EXPIRY_NONE || when < cur;
    return 1;
}

static void expireGeneric(client *c, memberKind *k, mstime_t basetime, int unit) {
    robj *o = lookupKeyWrite(c->db, c->argv[1]);
    if (checkType(c, o, k->type)) return;

    int flags = 0, first = 0, condidx = 0;
    long long n = 0;
    for (int j = 3; j < c->argc;) {
        sds opt = objectGetVal(c->argv[j]);
        int flag = memberTtlOptIs(opt, "nx")   ? EXPIRE_NX
                   : memberTtlOptIs(opt, "xx") ? EXPIRE_XX
                   : memberTtlOptIs(opt, "gt") ? EXPIRE_GT
                   : memberTtlOptIs(opt, "lt") ? EXPIRE_LT
                                            : 0;
        if (memberTtlOptIs(opt, "members")) {
            if (parseMembersBlock(c, &j, &first, &n, "Parameter `numMembers` should be greater than 0") != C_OK)
                return;
        } else if (flag) {
            if (flags) {
                addReplyError(c, "Multiple condition flags specified");
                return;
            }
            flags = flag;
            condidx = j++;
        } else {
            addReplyErrorFormat(c, "unknown argument: %s", opt);
            return;
        }
    }
    if (!first) {
        addReplyError(c, "missing MEMBERS argument");
        return;
    }
    mstime_t when;
    if (parseWhen(c, c->argv[2], basetime, unit, &when) != C_OK) return;

    int past = checkAlreadyExpired(when);
    robj **done = zmalloc(sizeof(robj *) * n); /* set from the front, removed from the end */
    int nset = 0, nremoved = 0;
    addReplyArrayLen(c, n);
    for (long long i = 0; i < n; i++) {
        robj *arg = c->argv[first + i];
        sds m = objectGetVal(arg);
        long long cur = o ? memberExpire(o, m) : EXPIRY_NONE; /* a time: a member */
        if (!o || (cur == EXPIRY_NONE && !isMember(o, m))) {
            addReplyLongLong(c, MEMBER_MISSING);
        } else if (!conditionHolds(flags, cur, when)) {
            addReplyLongLong(c, MEMBER_UNCHANGED);
        } else if (past) {
            removeMember(o, m);
            done[n - 1 - nremoved++] = arg;
            addReplyLongLong(c, MEMBER_REMOVED);
        } else {
            setMemberExpire(c->db, o, m, when);
            done[nset++] = arg;
            addReplyLongLong(c, MEMBER_SET);
        }
    }
    if (nremoved) propagateRemovals(c, k, done + n - nremoved, nremoved);
    if (nset) {
        /* ?PEXPIREAT key when [condition] MEMBERS k <the members set>. */
        int argc = 0;
        robj **argv = zmalloc(sizeof(robj *) * (nset + 6));
        argv[argc++] = sharedName(&k->pexpireat_cmd, k->pexpireat);
        argv[argc++] = c->argv[1];
        argv[argc++] = createStringObjectFromLongLong(when);
        if (condidx) argv[argc++] = c->argv[condidx];
        argv[argc++] = sharedName(&members_arg, "MEMBERS");
        argv[argc++] = createStringObjectFromLongLong(nset);
        for (int i = 0; i < nset; i++) argv[argc++] = done[i];
        for (int i = 0; i < argc; i++)
            if (i != 2 && i != argc - nset - 1) incrRefCount(argv[i]);
        replaceClientCommandVector(c, argc, argv);
        notifyKeyspaceEvent(k->notify, k->expire, c->argv[1], c->db->id);
    } else {
        preventCommandPropagation(c);
    }
    zfree(done);
    if (nset || nremoved) {
        signalModifiedKey(c, c->db, c->argv[1]);
        server.dirty += nset + nremoved;
        if (!deleteIfEmpty(c, o)) tidyIndex(c->db, o);
    }
}

void sexpireCommand(client *c) {
    expireGeneric(c, &set_kind, commandTimeSnapshot(), UNIT_SECONDS);
}

void spexpireCommand(client *c) {
    expireGeneric(c, &set_kind, commandTimeSnapshot(), UNIT_MILLISECONDS);
}

void sexpireatCommand(client *c) {
    expireGeneric(c, &set_kind, 0, UNIT_SECONDS);
}

void spexpireatCommand(client *c) {
    expireGeneric(c, &set_kind, 0, UNIT_MILLISECONDS);
}

void zexpireCommand(client *c) {
    expireGeneric(c, &zset_kind, commandTimeSnapshot(), UNIT_SECONDS);
}

void zpexpireCommand(client *c) {
    expireGeneric(c, &zset_kind, commandTimeSnapshot(), UNIT_MILLISECONDS);
}

void zexpireatCommand(client *c) {
    expireGeneric(c, &zset_kind, 0, UNIT_SECONDS);
}

void zpexpireatCommand(client *c) {
    expireGeneric(c, &zset_kind, 0, UNIT_MILLISECONDS);
}

/* --- STTL, SPTTL, SEXPIRETIME, SPEXPIRETIME and ZTTL's kin --- */

static void ttlGeneric(client *c, memberKind *k, mstime_t basetime, int unit) {
    robj *o = lookupKeyRead(c->db, c->argv[1]);
    if (checkType(c, o, k->type)) return;
    long long n;
    int first = parseFixedMembers(c, 2, &n);
    if (!first) return;
    addReplyArrayLen(c, n);
    for (long long i = 0; i < n; i++) {
        sds m = objectGetVal(c->argv[first + i]);
        long long when = o ? memberExpire(o, m) : EXPIRY_NONE; /* a time: a member */
        if (!o || (when == EXPIRY_NONE && !isMember(o, m))) {
            addReplyLongLong(c, MEMBER_MISSING);
        } else if (when == EXPIRY_NONE) {
            addReplyLongLong(c, MEMBER_NO_TTL);
        } else {
            long long left = when - basetime;
            if (left < 0) left = 0;
            addReplyLongLong(c, unit == UNIT_MILLISECONDS ? left : (left + 999) / 1000);
        }
    }
}

void sttlCommand(client *c) {
    ttlGeneric(c, &set_kind, commandTimeSnapshot(), UNIT_SECONDS);
}

void spttlCommand(client *c) {
    ttlGeneric(c, &set_kind, commandTimeSnapshot(), UNIT_MILLISECONDS);
}

void sexpiretimeCommand(client *c) {
    ttlGeneric(c, &set_kind, 0, UNIT_SECONDS);
}

void spexpiretimeCommand(client *c) {
    ttlGeneric(c, &set_kind, 0, UNIT_MILLISECONDS);
}

void zttlCommand(client *c) {
    ttlGeneric(c, &zset_kind, commandTimeSnapshot(), UNIT_SECONDS);
}

void zpttlCommand(client *c) {
    ttlGeneric(c, &zset_kind, commandTimeSnapshot(), UNIT_MILLISECONDS);
}

void zexpiretimeCommand(client *c) {
    ttlGeneric(c, &zset_kind, 0, UNIT_SECONDS);
}

void zpexpiretimeCommand(client *c) {
    ttlGeneric(c, &zset_kind, 0, UNIT_MILLISECONDS);
}

/* --- SPERSIST, ZPERSIST --- */

static void persistGeneric(client *c, memberKind *k) {
    robj *o = lookupKeyWrite(c->db, c->argv[1]);
    if (checkType(c, o, k->type)) return;
    long long n;
    int first = parseFixedMembers(c, 2, &n);
    if (!first) return;
    int persisted = 0;
    addReplyArrayLen(c, n);
    for (long long i = 0; i < n; i++) {
        sds m = objectGetVal(c->argv[first + i]);
        if (o && persistMember(o, m)) { /* a time: a member */
            persisted++;
            addReplyLongLong(c, MEMBER_SET);
        } else if (!o || !isMember(o, m)) {
            addReplyLongLong(c, MEMBER_MISSING);
        } else {
            addReplyLongLong(c, MEMBER_NO_TTL);
        }
    }
    if (persisted) {
        tidyIndex(c->db, o);
        notifyKeyspaceEvent(k->notify, k->persist, c->argv[1], c->db->id);
        signalModifiedKey(c, c->db, c->argv[1]);
        server.dirty += persisted;
    }
}

void spersistCommand(client *c) {
    persistGeneric(c, &set_kind);
}

void zpersistCommand(client *c) {
    persistGeneric(c, &zset_kind);
}

/* --- SADDEX, ZADDEX --- */

#define ADDEX_MNX (1 << 0) /* SADDEX */
#define ADDEX_MXX (1 << 1)
#define ADDEX_KEEPTTL (1 << 2)

/* The options both take: [EX s | PX ms | EXAT s | PXAT ms | KEEPTTL] and
 * the MEMBERS block, among the command's own (`own` parses one at argv[j]
 * and returns how many arguments it took, 0 if it is none, -1 after an
 * error reply). *first and *n give the block; *expire the time argument,
 * NULL without one. C_ERR after an error reply. */
typedef int (*ownOptionFn)(client *c, int j, void *ctx);

static int parseAddexOptions(client *c, ownOptionFn own, void *ctx, int pairs, const char *badcount, int *flags,
                             int *first, long long *n, robj **expire, mstime_t *when) {
    int unit = UNIT_SECONDS;
    mstime_t basetime = 0;
    for (int j = 2; j < c->argc;) {
        sds opt = objectGetVal(c->argv[j]);
        if (memberTtlOptIs(opt, "members")) {
            long long count;
            int at = j;
            if (parseMembersBlock(c, &j, first, &count, badcount) != C_OK) return C_ERR;
            if (pairs) {
                /* ZADDEX's block holds count score-member pairs. */
                if (count > (c->argc - at - 2) / 2) {
                    addReplyError(c, "wrong number of arguments");
                    return C_ERR;
                }
                j = at + 2 + (int)count * 2;
            }
            *n = count;
            continue;
        }
        int ex = memberTtlOptIs(opt, "ex") || memberTtlOptIs(opt, "px") || memberTtlOptIs(opt, "exat") ||
                 memberTtlOptIs(opt, "pxat");
        if (ex || memberTtlOptIs(opt, "keepttl")) {
            if (*expire || (*flags & ADDEX_KEEPTTL)) {
                addReplyError(c, "Only one of EX, PX, EXAT, PXAT or KEEPTTL arguments can be specified");
                return C_ERR;
            }
            if (!ex) {
                *flags |= ADDEX_KEEPTTL;
                j++;
                continue;
            }
            if (j + 1 >= c->argc) {
                addReplyError(c, "missing expire time");
                return C_ERR;
            }
            unit = (opt[0] == 'p' || opt[0] == 'P') ? UNIT_MILLISECONDS : UNIT_SECONDS;
            basetime = sdslen(opt) == 2 ? commandTimeSnapshot() : 0;
            *expire = c->argv[j + 1];
            j += 2;
            continue;
        }
        int took = own(c, j, ctx);
        if (took < 0) return C_ERR;
        if (!took) {
            addReplyErrorFormat(c, "unknown argument: %s", opt);
            return C_ERR;
        }
        j += took;
    }
    if (!*first) {
        addReplyError(c, "missing MEMBERS argument");
        return C_ERR;
    }
    if (*expire && parseWhen(c, *expire, basetime, unit, when) != C_OK) return C_ERR;
    return C_OK;
}

/* What a member the command let through gets: the time given, its own
 * (KEEPTTL), or none. */
static void applyAddexTime(serverDb *db, robj *o, sds m, int flags, robj *expire, mstime_t when) {
    if (expire)
        setMemberExpire(db, o, m, when);
    else if (!(flags & ADDEX_KEEPTTL))
        persistMember(o, m);
}

/* SADDEX's add: a big set adds the member and sets or drops its time in
 * one lookup. */
static void saddexMember(serverDb *db, robj *set, sds m, int flags, robj *expire, mstime_t when) {
    if (set->encoding != OBJ_ENCODING_BTREE || (flags & ADDEX_KEEPTTL)) {
        setTypeAdd(set, m);
        applyAddexTime(db, set, m, flags, expire, when);
        return;
    }
    setBtreeAddTimed(set, m, sdslen(m), expire ? when : -1);
    if (expire) trackKey(db, set);
}

/* ZADDEX's add: a sorted set in its tree form adds or moves the member and
 * sets, keeps or drops its time in one write. Returns zsetAdd's. */
static int zaddexMember(serverDb *db, robj *zset, double score, sds m, int in, int *out, int flags, robj *expire,
                        mstime_t when) {
    double newscore;
    if (zset->encoding != OBJ_ENCODING_BTREE) {
        if (!zsetAdd(zset, score, m, in, out, &newscore)) return 0;
        if (!(*out & ZADD_OUT_NOP)) applyAddexTime(db, zset, m, flags, expire, when);
        return 1;
    }
    uint64_t given = expire ? engineTime(when) : (flags & ADDEX_KEEPTTL) ? ZBT_TIME_KEEP : 0;
    if (!zsetAddTimed(zset, score, m, in, out, &newscore, given)) return 0;
    if (expire && !(*out & ZADD_OUT_NOP)) trackKey(db, zset);
    return 1;
}

/* Replaces the command's vector with `name key [PXAT when | KEEPTTL]
 * MEMBERS n <items>` (items: n members, or n score-member pairs), which
 * replays what happened here whatever the conditions. A command that was
 * `name key EX|PX|EXAT|PXAT t MEMBERS n <items>` and went through whole
 * (nothing after its items, every one taken) keeps its vector, with PXAT and the
 * time written over its own two (as upstream rewrites SET's EX), or as it
 * is when they were PXAT. `first` is where the block's items begin when
 * every one went through, else 0. */
static void rewriteAddex(client *c, robj **name, const char *namestr, int flags, robj *expire, mstime_t when,
                         robj **items, long long n, int per, int first) {
    if (first == 6 && c->argc == 6 + n * per && expire && expire == c->argv[3]) {
        if (memberTtlOptIs(objectGetVal(c->argv[2]), "pxat")) return;
        robj *t = createStringObjectFromLongLong(when);
        rewriteClientCommandArgument(c, 2, sharedName(&pxat_arg, "PXAT"));
        rewriteClientCommandArgument(c, 3, t);
        decrRefCount(t);
        return;
    }
    int argc = 0;
    robj **argv = zmalloc(sizeof(robj *) * (n * per + 6));
    argv[argc++] = sharedName(name, namestr);
    argv[argc++] = c->argv[1];
    incrRefCount(c->argv[1]);
    if (expire) {
        argv[argc++] = sharedName(&pxat_arg, "PXAT");
        argv[argc++] = createStringObjectFromLongLong(when);
    } else if (flags & ADDEX_KEEPTTL) {
        argv[argc++] = sharedName(&keepttl_arg, "KEEPTTL");
    }
    argv[argc++] = sharedName(&members_arg, "MEMBERS");
    argv[argc++] = createStringObjectFromLongLong(n);
    for (long long i = 0; i < n * per; i++) {
        argv[argc++] = items[i];
        incrRefCount(items[i]);
    }
    replaceClientCommandVector(c, argc, argv);
}

static int saddexOption(client *c, int j, void *ctx) {
    int *flags = ctx;
    sds opt = objectGetVal(c->argv[j]);
    int cond = memberTtlOptIs(opt, "mnx") ? ADDEX_MNX : memberTtlOptIs(opt, "mxx") ? ADDEX_MXX : 0;
    if (!cond) return 0;
    if (*flags & (ADDEX_MNX | ADDEX_MXX)) {
        addReplyError(c, "Only one of MXX or MNX arguments can be specified");
        return -1;
    }
    *flags |= cond;
    return 1;
}

void saddexCommand(client *c) {
    int flags = 0, first = 0;
    long long n = 0;
    robj *expire = NULL;
    mstime_t when = EXPIRY_NONE;
    if (parseAddexOptions(c, saddexOption, &flags, 0, "invalid number of members", &flags, &first, &n, &expire,
                          &when) != C_OK)
        return;

    robj *set = lookupKeyWrite(c->db, c->argv[1]);
    if (checkType(c, set, OBJ_SET)) return;
    for (long long i = 0; i < n && (flags & (ADDEX_MNX | ADDEX_MXX)); i++) {
        int there = set && setTypeIsMember(set, objectGetVal(c->argv[first + i]));
        if ((flags & ADDEX_MNX) ? there : !there) {
            addReply(c, shared.czero);
            return;
        }
    }

    if (expire && checkAlreadyExpired(when)) {
        /* A time past removes the members that are there, adds none. */
        robj **removed = zmalloc(sizeof(robj *) * n);
        int nremoved = 0;
        for (long long i = 0; set && i < n; i++)
            if (setTypeRemove(set, objectGetVal(c->argv[first + i]))) removed[nremoved++] = c->argv[first + i];
        preventCommandPropagation(c);
        if (nremoved) {
            propagateRemovals(c, &set_kind, removed, nremoved);
            signalModifiedKey(c, c->db, c->argv[1]);
            server.dirty += nremoved;
            if (!deleteIfEmpty(c, set)) tidyIndex(c->db, set);
        }
        zfree(removed);
        addReply(c, shared.cone);
        return;
    }

    if (!set) {
        set = setTypeCreate(objectGetVal(c->argv[first]), n);
        dbAdd(c->db, c->argv[1], &set);
    }
    for (long long i = 0; i < n; i++) {
        saddexMember(c->db, set, objectGetVal(c->argv[first + i]), flags, expire, when);
    }
    tidyIndex(c->db, set);
    rewriteAddex(c, &saddex_cmd, "SADDEX", flags, expire, when, c->argv + first, n, 1, first);
    notifyKeyspaceEvent(NOTIFY_SET, "sadd", c->argv[1], c->db->id);
    if (expire) notifyKeyspaceEvent(NOTIFY_SET, "sexpire", c->argv[1], c->db->id);
    signalModifiedKey(c, c->db, c->argv[1]);
    server.dirty += n;
    addReply(c, shared.cone);
}

#define ZADDEX_CH (1 << 10) /* Beside ZADD_IN_* */

/* ZADDEX key [NX | XX] [GT | LT] [CH] [EX s | PX ms | EXAT s | PXAT ms |
 * KEEPTTL] MEMBERS n score member [score member ...]: ZADD's conditions
 * and reply, and SADDEX's times, given to the members ZADD's conditions
 * let through. */
static int zaddexOption(client *c, int j, void *ctx) {
    int *zflags = ctx;
    sds opt = objectGetVal(c->argv[j]);
    int f = memberTtlOptIs(opt, "nx")   ? ZADD_IN_NX
            : memberTtlOptIs(opt, "xx") ? ZADD_IN_XX
            : memberTtlOptIs(opt, "gt") ? ZADD_IN_GT
            : memberTtlOptIs(opt, "lt") ? ZADD_IN_LT
            : memberTtlOptIs(opt, "ch") ? ZADDEX_CH
                                     : 0;
    *zflags |= f;
    return f ? 1 : 0;
}

void zaddexCommand(client *c) {
    int flags = 0, zflags = 0, first = 0;
    long long n = 0;
    robj *expire = NULL;
    mstime_t when = EXPIRY_NONE;
    if (parseAddexOptions(c, zaddexOption, &zflags, 1, "invalid number of members", &flags, &first, &n, &expire,
                          &when) != C_OK)
        return;
    int nx = zflags & ZADD_IN_NX, xx = zflags & ZADD_IN_XX, gt = zflags & ZADD_IN_GT, lt = zflags & ZADD_IN_LT;
    if (nx && xx) {
        addReplyError(c, "XX and NX options at the same time are not compatible");
        return;
    }
    if ((gt && nx) || (lt && nx) || (gt && lt)) {
        addReplyError(c, "GT, LT, and/or NX options at the same time are not compatible");
        return;
    }
    double *scores = zmalloc(sizeof(double) * n);
    for (long long i = 0; i < n; i++) {
        if (getDoubleFromObjectOrReply(c, c->argv[first + 2 * i], &scores[i], NULL) != C_OK) {
            zfree(scores);
            return;
        }
    }

    robj *zobj = lookupKeyWrite(c->db, c->argv[1]);
    if (checkType(c, zobj, OBJ_ZSET)) {
        zfree(scores);
        return;
    }
    int in = zflags & (ZADD_IN_NX | ZADD_IN_XX | ZADD_IN_GT | ZADD_IN_LT);
    robj **through = zmalloc(sizeof(robj *) * 2 * n); /* pairs let through */
    long long nthrough = 0, added = 0, updated = 0;

    if (expire && checkAlreadyExpired(when)) {
        /* A time past removes the members that are there (those the
         * conditions let through), adds none. */
        for (long long i = 0; zobj && i < n; i++) {
            sds m = objectGetVal(c->argv[first + 2 * i + 1]);
            double cur;
            if (nx || zsetScore(zobj, m, &cur) == C_ERR) continue;
            if ((gt && !(scores[i] > cur)) || (lt && !(scores[i] < cur))) continue;
            removeMember(zobj, m);
            through[nthrough++] = c->argv[first + 2 * i + 1];
        }
        preventCommandPropagation(c);
        if (nthrough) {
            propagateRemovals(c, &zset_kind, through, nthrough);
            signalModifiedKey(c, c->db, c->argv[1]);
            server.dirty += nthrough;
            if (!deleteIfEmpty(c, zobj)) tidyIndex(c->db, zobj);
        }
        zfree(scores);
        zfree(through);
        addReply(c, shared.czero);
        return;
    }

    if (!zobj) {
        if (xx) {
            zfree(scores);
            zfree(through);
            addReply(c, shared.czero);
            return;
        }
        zobj = zsetTypeCreate(n, 0);
        dbAdd(c->db, c->argv[1], &zobj);
    }
    for (long long i = 0; i < n; i++) {
        sds m = objectGetVal(c->argv[first + 2 * i + 1]);
        int out = 0;
        if (!zaddexMember(c->db, zobj, scores[i], m, in, &out, flags, expire, when)) continue; /* NaN */
        if (out & ZADD_OUT_NOP) continue;
        if (out & ZADD_OUT_ADDED) added++;
        if (out & ZADD_OUT_UPDATED) updated++;
        through[nthrough++] = c->argv[first + 2 * i];
        through[nthrough++] = c->argv[first + 2 * i + 1];
    }
    zfree(scores);
    addReplyLongLong(c, (zflags & ZADDEX_CH) ? added + updated : added);
    if (!nthrough) {
        preventCommandPropagation(c);
        zfree(through);
        if (!zsetLength(zobj)) dbDelete(c->db, c->argv[1]);
        return;
    }
    tidyIndex(c->db, zobj);
    rewriteAddex(c, &zaddex_cmd, "ZADDEX", flags, expire, when, through, nthrough / 2, 2, nthrough == 2 * n ? first : 0);
    zfree(through);
    notifyKeyspaceEvent(NOTIFY_ZSET, "zadd", c->argv[1], c->db->id);
    if (expire) notifyKeyspaceEvent(NOTIFY_ZSET, "zexpire", c->argv[1], c->db->id);
    signalModifiedKey(c, c->db, c->argv[1]);
    server.dirty += nthrough / 2;
}

/* --- Files: RDB, DUMP payloads and AOF rewrite --- */

/* Calls fn on each member with a time, in no order, until it returns 0
 * (then returns 0). The member lies in the key, or in a buffer the next
 * one reuses. */
static int forEachTtl(robj *o, ttlEntryFn fn, void *ctx) {
    if (bigSet(o)) return setBtreeForEachTime(o, fn, ctx);
    zbt *t = treeOf(o);
    if (!t || !zbtTimedCount(t)) return 1;
    zbtCursor *c = zmalloc(sizeof(*c));
    int ok = 1;
    for (int more = zbtFirst(t, c); ok && more; more = zbtNext(c))
        if (c->when) ok = fn(ctx, c->member, c->len, (long long)c->when);
    zfree(c);
    return ok;
}

typedef struct rdbSaveCtx {
    rio *rdb;
    ssize_t written;
} rdbSaveCtx;

static int saveTtlEntry(void *ctx, const unsigned char *m, size_t len, long long when) {
    rdbSaveCtx *sc = ctx;
    ssize_t n1 = rdbSaveRawString(sc->rdb, (unsigned char *)m, len);
    ssize_t n2 = n1 == -1 ? -1 : rdbSaveMillisecondTime(sc->rdb, when);
    if (n2 == -1) return 0;
    sc->written += n1 + n2;
    return 1;
}

/* After the key's own body (RDB_TYPE_SET's or RDB_TYPE_ZSET_2's), the
 * fork's types RDB_TYPE_SET_VOLATILE and RDB_TYPE_ZSET_VOLATILE hold the
 * members' times: the count of volatile members, then each one's string
 * and its time (8 bytes, as RDB saves a key's). Returns bytes written, or
 * -1. */
ssize_t memberTtlRdbSave(rio *rdb, robj *o) {
    rdbSaveCtx sc = {rdb, 0};
    int n = rdbSaveLen(rdb, timedCount(o));
    if (n == -1) return -1;
    sc.written = n;
    return forEachTtl(o, saveTtlEntry, &sc) ? sc.written : -1;
}

/* Reads what memberTtlRdbSave wrote into a key just loaded (not yet in a
 * database: dbAddRDBLoad tracks it). C_ERR on a corrupt or short body: a
 * count of none or more than the members, a member that is not one or
 * comes twice, a time out of range. */
int memberTtlRdbLoad(rio *rdb, robj *o) {
    uint64_t n = rdbLoadLen(rdb, NULL);
    if (n == RDB_LENERR || n == 0 || n > memberCount(o)) return C_ERR;
    if (o->encoding != OBJ_ENCODING_BTREE) {
        if (o->type == OBJ_SET)
            setTypeConvert(o, OBJ_ENCODING_BTREE);
        else
            zsetConvert(o, OBJ_ENCODING_BTREE);
    }
    zbt *t = treeOf(o);
    for (uint64_t i = 0; i < n; i++) {
        sds m = rdbGenericLoadStringObject(rdb, RDB_LOAD_SDS, NULL);
        if (!m) return C_ERR;
        long long when = rdbLoadMillisecondTime(rdb, RDB_VERSION);
        int had;
        uint64_t old = 0;
        int ok = !rioGetReadError(rdb) && when >= 0 && when <= TTL_MAX_MS;
        /* A member the key lacks, or one given a time twice, is corrupt. */
        if (ok && t)
            ok = zbtSetTime(t, (const unsigned char *)m, sdslen(m), engineTime(when), &old) && !old;
        else if (ok)
            ok = setBtreeSetMemberTime(o, m, sdslen(m), when, &had) && !had;
        sdsfree(m);
        if (!ok) return C_ERR;
    }
    if (t) {
        /* The times grew entries of leaves the load had filled whole,
         * which split them: the tree is built again in one pass, as a
         * copy's is, so that a reload costs what the writes did. */
        objectSetVal(o, zsetBtreeDup(t));
        zbtFree(t);
    }
    *markOf(o) = 1; /* the key is not in a database yet: dbAddRDBLoad tracks it */
    return C_OK;
}

typedef struct aofCtx {
    rio *r;
    robj *key;
    memberKind *k;
    const unsigned char *m[AOF_REWRITE_ITEMS_PER_CMD];
    size_t len[AOF_REWRITE_ITEMS_PER_CMD];
    unsigned char shortm[AOF_REWRITE_ITEMS_PER_CMD][LONG_STR_SIZE];
    sds owned[AOF_REWRITE_ITEMS_PER_CMD]; /* Copies of a set's longer members. */
    long long when;
    int n, copy;
} aofCtx;

static void dropCopies(aofCtx *a) {
    for (int i = 0; i < a->n; i++) {
        sdsfree(a->owned[i]);
        a->owned[i] = NULL;
    }
}

/* ?PEXPIREAT key when MEMBERS n member... for a run of equal times. */
static int flushAof(aofCtx *a) {
    if (!a->n) return 1;
    if (!rioWriteBulkCount(a->r, '*', 5 + a->n) || !rioWriteBulkString(a->r, a->k->pexpireat, 10) ||
        !rioWriteBulkObject(a->r, a->key) || !rioWriteBulkLongLong(a->r, a->when) ||
        !rioWriteBulkString(a->r, "MEMBERS", 7) || !rioWriteBulkLongLong(a->r, a->n))
        return 0;
    for (int i = 0; i < a->n; i++)
        if (!rioWriteBulkString(a->r, (const char *)a->m[i], a->len[i])) return 0;
    dropCopies(a);
    a->n = 0;
    return 1;
}

static int aofTtlEntry(void *ctx, const unsigned char *m, size_t len, long long when) {
    aofCtx *a = ctx;
    if (a->n && (when != a->when || a->n == AOF_REWRITE_ITEMS_PER_CMD) && !flushAof(a)) return 0;
    /* A sorted set's longer member lies in its tree, unchanged until the
     * flush; a short one is copied anyway, and a set's member, which may
     * be unpacked into a buffer the next one reuses, too. */
    if (len <= LONG_STR_SIZE) {
        memcpy(a->shortm[a->n], m, len);
        m = a->shortm[a->n];
    } else if (a->copy) {
        a->owned[a->n] = sdsnewlen(m, len);
        m = (const unsigned char *)a->owned[a->n];
    }
    a->when = when;
    a->m[a->n] = m;
    a->len[a->n] = len;
    a->n++;
    return 1;
}

/* After the SADDs / ZADDs of a key, its members' times as absolute ones.
 * Returns 0 on a write error. */
int memberTtlRewriteAof(rio *r, robj *key, robj *o) {
    if (!objectHasVolatileMembers(o)) return 1;
    aofCtx a = {.r = r, .key = key, .k = kindOf(o), .copy = bigSet(o)};
    int ok = forEachTtl(o, aofTtlEntry, &a) && flushAof(&a);
    dropCopies(&a);
    return ok;
}
