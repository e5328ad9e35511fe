/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Set members that expire: SADDEX, SEXPIRE and their kin (Redis 8.12's
 * names, arguments and replies).
 *
 * A set with a member that has an expire time is in the big form
 * (t_set_btree.c), and the form's engine carries an index of the times:
 * a sorted set whose members are the set's volatile members, scored by
 * their expire times in Unix milliseconds. It is upstream's sorted set
 * (a listpack while small) or ours (zbtree.c) past that:
 *
 *   robj { OBJ_SET, BTREE } --> ibset | hpset { ..., aux }
 *                                                     |
 *                   robj { OBJ_ZSET } <---------------+
 *                   member -> expire time (ms), ordered by time
 *
 * So the earliest time is the index's first entry, a member's time is a
 * score lookup, and the members due are a prefix of the index.
 *
 * Invariants:
 * - Every member of the index is a member of the set, with a time no
 *   later than TTL_MAX_MS (2^53 ms, which a score holds exactly).
 * - A set has an index, possibly empty, exactly while it is in its
 *   database's keys_with_volatile_items (objectHasVolatileItems), which
 *   the FIELDS job of active expiry (expire.c) walks. Removing a member
 *   (setBtreeRemove) may leave the index empty; whoever next holds the
 *   database for it (a TTL command, a reclaim) frees it and untracks the
 *   key.
 * - A set with an index stays in the big form: SPOP of most of a set,
 *   which rebuilds the rest into a new small set, pops one by one instead.
 *
 * Who removes a due member:
 * - lookupKey(), on a primary, before a command sees the set
 *   (setExpireDueMembersOnLookup), so that no command sees one there;
 * - active expiry, within active-expire-effort's budget, for sets nobody
 *   reads (setReclaimExpiredMembers, through dbReclaimExpiredFields).
 * Both propagate SREM of the members, and delete a set left empty, as
 * upstream's hash field expiry propagates HDEL. A replica removes members
 * on its primary's SREM only.
 *
 * Commands that set a time propagate it as an absolute one (SPEXPIREAT,
 * SADDEX ... PXAT), and a time already past as SREM of the members it
 * removes.
 */

#include "server.h"
#include "expire.h"
#include "hpset.h"
#include "rdb.h"

/* 2^53 ms, past the year 285000: a score holds every time up to it. */
#define TTL_MAX_MS (1LL << 53)
/* Members a propagated SREM names at most. */
#define RECLAIM_BATCH 1024

/* Per-member reply codes of SEXPIRE and SPERSIST. */
#define MEMBER_MISSING -2
#define MEMBER_NO_TTL -1
#define MEMBER_UNCHANGED 0
#define MEMBER_SET 1
#define MEMBER_REMOVED 2

static long long stat_expired_members = 0;
static robj *srem_cmd, *spexpireat_cmd, *saddex_cmd, *pxat_arg, *keepttl_arg, *members_arg;

static robj *sharedName(robj **o, const char *name) {
    if (!*o) *o = makeObjectShared(createStringObject(name, strlen(name)));
    return *o;
}

/* --- The index --- */

static robj *ttlIndex(robj *set) {
    if (set->type != OBJ_SET || set->encoding != OBJ_ENCODING_BTREE) return NULL;
    return *setBtreeTtlSlot(objectGetVal(set));
}

bool setHasVolatileMembers(robj *set) {
    robj *ttls = ttlIndex(set);
    return ttls && zsetLength(ttls);
}

bool objectHasVolatileItems(robj *o) {
    if (o->type == OBJ_HASH) return hashTypeHasVolatileFields(o);
    return ttlIndex(o) != NULL;
}

void setTtlIndexFree(robj *ttls) {
    if (ttls) decrRefCount(ttls);
}

size_t setTtlIndexAllocSize(robj *ttls) {
    if (!ttls) return 0;
    void *v = objectGetVal(ttls);
    size_t bytes = zmalloc_size(ttls);
    return bytes + (ttls->encoding == OBJ_ENCODING_LISTPACK ? zmalloc_size(v) : zbtAllocSize(v));
}

void setTtlIndexForget(robj *ttls, const char *m, size_t len) {
    sds s = sdsnewlen(m, len);
    zsetDel(ttls, s);
    sdsfree(s);
}

/* The index's earliest entry: 0 when it is empty, else 1 with *when set
 * and, if m is not NULL, *m a new sds of the member. */
static int indexFirst(robj *ttls, sds *m, long long *when) {
    if (ttls->encoding == OBJ_ENCODING_LISTPACK) {
        unsigned char *zl = objectGetVal(ttls);
        unsigned char *eptr = lpSeek(zl, 0);
        if (!eptr) return 0;
        *when = (long long)zzlGetScore(lpNext(zl, eptr));
        if (m) *m = lpGetObject(eptr);
        return 1;
    }
    zbtCursor c;
    if (!zbtFirst(objectGetVal(ttls), &c)) return 0;
    *when = (long long)c.score;
    if (m) *m = sdsnewlen(c.member, c.len);
    return 1;
}

/* The member's expire time, or EXPIRY_NONE. */
static long long memberExpire(robj *set, sds m) {
    robj *ttls = ttlIndex(set);
    double score;
    if (!ttls || zsetScore(ttls, m, &score) == C_ERR) return EXPIRY_NONE;
    return (long long)score;
}

/* Gives a member of the set an expire time; the set moves to the big
 * form and into the database's volatile items if it was not there. */
static void setMemberExpire(serverDb *db, robj *set, sds m, long long when) {
    if (set->encoding != OBJ_ENCODING_BTREE) setTypeConvert(set, OBJ_ENCODING_BTREE);
    robj **slot = setBtreeTtlSlot(objectGetVal(set));
    if (!*slot) {
        *slot = createZsetListpackObject();
        dbTrackKeyWithVolatileItems(db, set);
    }
    int out = 0;
    zsetAdd(*slot, (double)when, m, ZADD_IN_NONE, &out, NULL);
}

/* Returns 1 if the member had an expire time. */
static int persistMember(robj *set, sds m) {
    robj *ttls = ttlIndex(set);
    return ttls && zsetDel(ttls, m);
}

/* Frees an index left empty and takes the set out of the volatile items. */
static void tidyIndex(serverDb *db, robj *set) {
    robj *ttls = ttlIndex(set);
    if (!ttls || zsetLength(ttls)) return;
    dbUntrackKeyWithVolatileItems(db, set);
    *setBtreeTtlSlot(objectGetVal(set)) = NULL;
    setTtlIndexFree(ttls);
}

/* --- Removing due members --- */

static void propagateSrem(serverDb *db, robj *keyobj, robj **members, int n, int didx) {
    robj *argv[2 + RECLAIM_BATCH];
    argv[0] = sharedName(&srem_cmd, "SREM");
    argv[1] = keyobj;
    memcpy(argv + 2, members, n * sizeof(robj *));
    int prev_replication_allowed = server.replication_allowed;
    server.replication_allowed = 1;
    alsoPropagate(db->id, argv, 2 + n, PROPAGATE_AOF | PROPAGATE_REPL, didx);
    server.replication_allowed = prev_replication_allowed;
}

/* Removes up to max members of the set whose time is `now` or earlier,
 * propagates their SREM, and deletes the key if the set is left empty
 * (*deleted then set). Returns the members removed. */
static size_t reclaimDue(serverDb *db, robj *set, robj *keyobj, mstime_t now, unsigned long max, int didx,
                         int *deleted) {
    robj *batch[RECLAIM_BATCH];
    size_t total = 0;
    *deleted = 0;
    while (max) {
        int n = 0;
        sds m;
        long long when;
        while (n < RECLAIM_BATCH && max && indexFirst(ttlIndex(set), &m, &when)) {
            if (when > now) {
                sdsfree(m);
                break;
            }
            serverAssert(setBtreeRemove(set, m, sdslen(m)));
            batch[n++] = createObject(OBJ_STRING, m);
            max--;
        }
        if (!n) break;
        propagateSrem(db, keyobj, batch, n, didx);
        for (int i = 0; i < n; i++) decrRefCount(batch[i]);
        total += n;
        if (n < RECLAIM_BATCH) break;
    }
    if (!total) return 0;
    stat_expired_members += total;
    notifyKeyspaceEvent(NOTIFY_SET, "sexpired", keyobj, db->id);
    if (setTypeSize(set) == 0) {
        dbDelete(db, keyobj);
        notifyKeyspaceEvent(NOTIFY_GENERIC, "del", keyobj, db->id);
        *deleted = 1;
    } else {
        tidyIndex(db, set);
    }
    signalModifiedKey(NULL, db, keyobj);
    return total;
}

/* Earliest time of the set's index, LLONG_MAX without one. */
static long long earliest(robj *set) {
    robj *ttls = ttlIndex(set);
    long long when;
    return ttls && indexFirst(ttls, NULL, &when) ? when : LLONG_MAX;
}

int setExpireDueMembersOnLookup(serverDb *db, robj *key, robj *set, int expire_flags, int didx) {
    if (!ttlIndex(set) || server.lazy_expire_disabled) return 0;
    mstime_t now = commandTimeSnapshot();
    if (earliest(set) > now) return 0;
    if (getExpirationPolicyWithFlags(expire_flags) != POLICY_DELETE_EXPIRED) return 0;
    int deleted;
    reclaimDue(db, set, key, now, ULONG_MAX, didx, &deleted);
    return deleted;
}

size_t setReclaimExpiredMembers(robj *set, serverDb *db, mstime_t now, unsigned long max, int didx) {
    if (earliest(set) > now) {
        tidyIndex(db, set);
        return 0;
    }
    robj *keyobj = createStringObjectFromSds(sdsdup(objectGetKey(set)));
    enterExecutionUnit(1, 0);
    int deleted;
    size_t removed = reclaimDue(db, set, keyobj, now, max, didx, &deleted);
    exitExecutionUnit();
    postExecutionUnitOperations();
    decrRefCount(keyobj);
    return removed;
}

sds setTtlInfo(sds info) {
    return sdscatprintf(info, "expired_set_members:%lld\r\n", stat_expired_members);
}

/* --- Arguments --- */

/* Parses `MEMBERS nummembers member...` at argv[at] (the STTL family and
 * SPERSIST: the block is the command's last). Returns the index of the
 * first member, or 0 after an error reply. */
static int parseFixedMembers(client *c, int at, long long *n) {
    if (at >= c->argc || strcasecmp(objectGetVal(c->argv[at]), "members")) {
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

/* Deletes the key of a set left empty. Returns 1 if it did. */
static int deleteIfEmpty(client *c, robj *set) {
    if (setTypeSize(set)) return 0;
    dbDelete(c->db, c->argv[1]);
    notifyKeyspaceEvent(NOTIFY_GENERIC, "del", c->argv[1], c->db->id);
    return 1;
}

/* --- SEXPIRE, SPEXPIRE, SEXPIREAT, SPEXPIREAT --- */

static int conditionHolds(int flags, long long cur, long long when) {
    if (flags & EXPIRE_NX) return cur == EXPIRY_NONE;
    if (flags & EXPIRE_XX) return cur != EXPIRY_NONE;
    if (flags & EXPIRE_GT) return cur != EXPIRY_NONE && when > cur;
    if (flags & EXPIRE_LT) return cur == EXPIRY_NONE || when < cur;
    return 1;
}

static void sexpireGenericCommand(client *c, mstime_t basetime, int unit) {
    robj *set = lookupKeyWrite(c->db, c->argv[1]);
    if (checkType(c, set, OBJ_SET)) return;

    int flags = 0, first = 0, condidx = 0;
    long long n = 0;
    for (int j = 3; j < c->argc;) {
        const char *opt = objectGetVal(c->argv[j]);
        int flag = !strcasecmp(opt, "nx")   ? EXPIRE_NX
                   : !strcasecmp(opt, "xx") ? EXPIRE_XX
                   : !strcasecmp(opt, "gt") ? EXPIRE_GT
                   : !strcasecmp(opt, "lt") ? EXPIRE_LT
                                            : 0;
        if (!strcasecmp(opt, "members")) {
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
    robj **done = zmalloc(sizeof(robj *) * n); /* set or removed */
    int nset = 0, nremoved = 0;
    addReplyArrayLen(c, n);
    for (long long i = 0; i < n; i++) {
        robj *arg = c->argv[first + i];
        sds m = objectGetVal(arg);
        if (!set || !setTypeIsMember(set, m)) {
            addReplyLongLong(c, MEMBER_MISSING);
        } else if (!conditionHolds(flags, memberExpire(set, m), when)) {
            addReplyLongLong(c, MEMBER_UNCHANGED);
        } else if (past) {
            setTypeRemove(set, m);
            done[n - 1 - nremoved++] = arg; /* removed ones fill from the end */
            addReplyLongLong(c, MEMBER_REMOVED);
        } else {
            setMemberExpire(c->db, set, m, when);
            done[nset++] = arg;
            addReplyLongLong(c, MEMBER_SET);
        }
    }
    if (nremoved) {
        for (int i = 0; i < nremoved; i += RECLAIM_BATCH) {
            int k = nremoved - i < RECLAIM_BATCH ? nremoved - i : RECLAIM_BATCH;
            propagateSrem(c->db, c->argv[1], done + n - nremoved + i, k, c->slot);
        }
        notifyKeyspaceEvent(NOTIFY_SET, "srem", c->argv[1], c->db->id);
    }
    if (nset) {
        /* SPEXPIREAT key when [condition] MEMBERS k <the members set>. */
        int argc = 0;
        robj **argv = zmalloc(sizeof(robj *) * (nset + 6));
        argv[argc++] = sharedName(&spexpireat_cmd, "SPEXPIREAT");
        argv[argc++] = c->argv[1];
        argv[argc++] = createStringObjectFromLongLong(when);
        if (condidx) argv[argc++] = c->argv[condidx];
        argv[argc++] = sharedName(&members_arg, "MEMBERS");
        argv[argc++] = createStringObjectFromLongLong(nset);
        for (int i = 0; i < nset; i++) argv[argc++] = done[i];
        for (int i = 0; i < argc; i++)
            if (i != 2 && i != argc - nset - 1) incrRefCount(argv[i]);
        replaceClientCommandVector(c, argc, argv);
        notifyKeyspaceEvent(NOTIFY_SET, "sexpire", c->argv[1], c->db->id);
    } else {
        preventCommandPropagation(c);
    }
    zfree(done);
    if (nset || nremoved) {
        signalModifiedKey(c, c->db, c->argv[1]);
        server.dirty += nset + nremoved;
        if (!deleteIfEmpty(c, set)) tidyIndex(c->db, set);
    }
}

void sexpireCommand(client *c) {
    sexpireGenericCommand(c, commandTimeSnapshot(), UNIT_SECONDS);
}

void spexpireCommand(client *c) {
    sexpireGenericCommand(c, commandTimeSnapshot(), UNIT_MILLISECONDS);
}

void sexpireatCommand(client *c) {
    sexpireGenericCommand(c, 0, UNIT_SECONDS);
}

void spexpireatCommand(client *c) {
    sexpireGenericCommand(c, 0, UNIT_MILLISECONDS);
}

/* --- STTL, SPTTL, SEXPIRETIME, SPEXPIRETIME --- */

static void sttlGenericCommand(client *c, mstime_t basetime, int unit) {
    robj *set = lookupKeyRead(c->db, c->argv[1]);
    if (checkType(c, set, OBJ_SET)) return;
    long long n;
    int first = parseFixedMembers(c, 2, &n);
    if (!first) return;
    addReplyArrayLen(c, n);
    for (long long i = 0; i < n; i++) {
        sds m = objectGetVal(c->argv[first + i]);
        long long when;
        if (!set || !setTypeIsMember(set, m)) {
            addReplyLongLong(c, MEMBER_MISSING);
        } else if ((when = memberExpire(set, m)) == EXPIRY_NONE) {
            addReplyLongLong(c, MEMBER_NO_TTL);
        } else {
            long long left = when - basetime;
            if (left < 0) left = 0;
            addReplyLongLong(c, unit == UNIT_MILLISECONDS ? left : (left + 999) / 1000);
        }
    }
}

void sttlCommand(client *c) {
    sttlGenericCommand(c, commandTimeSnapshot(), UNIT_SECONDS);
}

void spttlCommand(client *c) {
    sttlGenericCommand(c, commandTimeSnapshot(), UNIT_MILLISECONDS);
}

void sexpiretimeCommand(client *c) {
    sttlGenericCommand(c, 0, UNIT_SECONDS);
}

void spexpiretimeCommand(client *c) {
    sttlGenericCommand(c, 0, UNIT_MILLISECONDS);
}

/* --- SPERSIST --- */

void spersistCommand(client *c) {
    robj *set = lookupKeyWrite(c->db, c->argv[1]);
    if (checkType(c, set, OBJ_SET)) return;
    long long n;
    int first = parseFixedMembers(c, 2, &n);
    if (!first) return;
    int persisted = 0;
    addReplyArrayLen(c, n);
    for (long long i = 0; i < n; i++) {
        sds m = objectGetVal(c->argv[first + i]);
        if (!set || !setTypeIsMember(set, m)) {
            addReplyLongLong(c, MEMBER_MISSING);
        } else if (!persistMember(set, m)) {
            addReplyLongLong(c, MEMBER_NO_TTL);
        } else {
            persisted++;
            addReplyLongLong(c, MEMBER_SET);
        }
    }
    if (persisted) {
        tidyIndex(c->db, set);
        notifyKeyspaceEvent(NOTIFY_SET, "spersist", c->argv[1], c->db->id);
        signalModifiedKey(c, c->db, c->argv[1]);
        server.dirty += persisted;
    }
}

/* --- SADDEX --- */

#define SADDEX_MNX (1 << 0)
#define SADDEX_MXX (1 << 1)
#define SADDEX_KEEPTTL (1 << 2)

void saddexCommand(client *c) {
    int flags = 0, first = 0, unit = UNIT_SECONDS;
    long long n = 0;
    robj *expire = NULL;
    mstime_t basetime = 0, when = EXPIRY_NONE;
    for (int j = 2; j < c->argc;) {
        const char *opt = objectGetVal(c->argv[j]);
        if (!strcasecmp(opt, "members")) {
            if (parseMembersBlock(c, &j, &first, &n, "invalid number of members") != C_OK) return;
            continue;
        }
        int cond = !strcasecmp(opt, "mnx") ? SADDEX_MNX : !strcasecmp(opt, "mxx") ? SADDEX_MXX : 0;
        int ex = !strcasecmp(opt, "ex") || !strcasecmp(opt, "px") || !strcasecmp(opt, "exat") ||
                 !strcasecmp(opt, "pxat");
        if (cond) {
            if (flags & (SADDEX_MNX | SADDEX_MXX)) {
                addReplyError(c, "Only one of MXX or MNX arguments can be specified");
                return;
            }
            flags |= cond;
            j++;
        } else if (ex || !strcasecmp(opt, "keepttl")) {
            if (expire || (flags & SADDEX_KEEPTTL)) {
                addReplyError(c, "Only one of EX, PX, EXAT, PXAT or KEEPTTL arguments can be specified");
                return;
            }
            if (!ex) {
                flags |= SADDEX_KEEPTTL;
                j++;
                continue;
            }
            if (j + 1 >= c->argc) {
                addReplyError(c, "missing expire time");
                return;
            }
            unit = (opt[0] == 'p' || opt[0] == 'P') ? UNIT_MILLISECONDS : UNIT_SECONDS;
            basetime = strlen(opt) == 2 ? commandTimeSnapshot() : 0;
            expire = c->argv[j + 1];
            j += 2;
        } else {
            addReplyErrorFormat(c, "unknown argument: %s", opt);
            return;
        }
    }
    if (!first) {
        addReplyError(c, "missing MEMBERS argument");
        return;
    }
    if (expire && parseWhen(c, expire, basetime, unit, &when) != C_OK) return;

    robj *set = lookupKeyWrite(c->db, c->argv[1]);
    if (checkType(c, set, OBJ_SET)) return;
    for (long long i = 0; i < n && (flags & (SADDEX_MNX | SADDEX_MXX)); i++) {
        int there = set && setTypeIsMember(set, objectGetVal(c->argv[first + i]));
        if ((flags & SADDEX_MNX) ? there : !there) {
            addReply(c, shared.czero);
            return;
        }
    }

    if (expire && checkAlreadyExpired(when)) {
        /* A time past removes the members that are there, adds none. */
        int removed = 0;
        for (long long i = 0; set && i < n; i++) {
            robj *arg = c->argv[first + i];
            if (!setTypeRemove(set, objectGetVal(arg))) continue;
            propagateSrem(c->db, c->argv[1], &arg, 1, c->slot);
            removed++;
        }
        preventCommandPropagation(c);
        if (removed) {
            notifyKeyspaceEvent(NOTIFY_SET, "srem", c->argv[1], c->db->id);
            signalModifiedKey(c, c->db, c->argv[1]);
            server.dirty += removed;
            if (!deleteIfEmpty(c, set)) tidyIndex(c->db, set);
        }
        addReply(c, shared.cone);
        return;
    }

    if (!set) {
        set = setTypeCreate(objectGetVal(c->argv[first]), n);
        dbAdd(c->db, c->argv[1], &set);
    }
    for (long long i = 0; i < n; i++) {
        sds m = objectGetVal(c->argv[first + i]);
        setTypeAdd(set, m);
        if (expire)
            setMemberExpire(c->db, set, m, when);
        else if (!(flags & SADDEX_KEEPTTL))
            persistMember(set, m);
    }
    tidyIndex(c->db, set);

    /* SADDEX key [PXAT when | KEEPTTL] MEMBERS n member...: the condition
     * held here, so it holds where the command is replayed. */
    int argc = 0;
    robj **argv = zmalloc(sizeof(robj *) * (n + 6));
    argv[argc++] = sharedName(&saddex_cmd, "SADDEX");
    argv[argc++] = c->argv[1];
    if (expire) {
        argv[argc++] = sharedName(&pxat_arg, "PXAT");
        argv[argc++] = createStringObjectFromLongLong(when);
    } else if (flags & SADDEX_KEEPTTL) {
        argv[argc++] = sharedName(&keepttl_arg, "KEEPTTL");
    }
    argv[argc++] = sharedName(&members_arg, "MEMBERS");
    int countidx = argc;
    argv[argc++] = createStringObjectFromLongLong(n);
    for (long long i = 0; i < n; i++) argv[argc++] = c->argv[first + i];
    for (int i = 0; i < argc; i++)
        if (i != countidx && !(expire && i == 3)) incrRefCount(argv[i]);
    replaceClientCommandVector(c, argc, argv);

    notifyKeyspaceEvent(NOTIFY_SET, "sadd", c->argv[1], c->db->id);
    if (expire) notifyKeyspaceEvent(NOTIFY_SET, "sexpire", c->argv[1], c->db->id);
    signalModifiedKey(c, c->db, c->argv[1]);
    server.dirty += n;
    addReply(c, shared.cone);
}

/* --- Files: RDB, DUMP payloads and AOF rewrite --- */

/* Calls fn on each entry of the set's index, in the order of their times;
 * stops, returning 0, when fn does. */
typedef int (*ttlEntryFn)(void *ctx, const unsigned char *m, size_t len, long long when);

static int forEachTtl(robj *set, ttlEntryFn fn, void *ctx) {
    robj *ttls = ttlIndex(set);
    if (!ttls) return 1;
    if (ttls->encoding == OBJ_ENCODING_LISTPACK) {
        unsigned char *zl = objectGetVal(ttls);
        unsigned char *eptr = lpSeek(zl, 0), *sptr;
        unsigned char buf[LONG_STR_SIZE];
        while (eptr) {
            sptr = lpNext(zl, eptr);
            unsigned int len;
            long long v;
            unsigned char *s = lpGetValue(eptr, &len, &v);
            if (!s) {
                len = ll2string((char *)buf, sizeof(buf), v);
                s = buf;
            }
            if (!fn(ctx, s, len, (long long)zzlGetScore(sptr))) return 0;
            eptr = lpNext(zl, sptr);
        }
        return 1;
    }
    zbtCursor c;
    for (int more = zbtFirst(objectGetVal(ttls), &c); more; more = zbtNext(&c))
        if (!fn(ctx, c.member, c.len, (long long)c.score)) return 0;
    return 1;
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

/* After the members (RDB_TYPE_SET's body), RDB_TYPE_SET_VOLATILE holds
 * their times: the count of volatile members, then each one's string and
 * its time (8 bytes, as RDB saves a key's). Returns bytes written, or -1. */
ssize_t setTtlRdbSave(rio *rdb, robj *set) {
    robj *ttls = ttlIndex(set);
    rdbSaveCtx sc = {rdb, 0};
    int n = rdbSaveLen(rdb, ttls ? zsetLength(ttls) : 0);
    if (n == -1) return -1;
    sc.written = n;
    return forEachTtl(set, saveTtlEntry, &sc) ? sc.written : -1;
}

/* Reads what setTtlRdbSave wrote into a set just loaded (not yet in a
 * database: dbAddRDBLoad tracks it). C_ERR on a corrupt or short body: a
 * count of none or more than the members, a member that is not one or
 * comes twice, a time out of range. */
int setTtlRdbLoad(rio *rdb, robj *set) {
    uint64_t n = rdbLoadLen(rdb, NULL);
    if (n == RDB_LENERR || n == 0 || n > setTypeSize(set)) return C_ERR;
    if (set->encoding != OBJ_ENCODING_BTREE) setTypeConvert(set, OBJ_ENCODING_BTREE);
    robj **slot = setBtreeTtlSlot(objectGetVal(set));
    *slot = createZsetListpackObject();
    for (uint64_t i = 0; i < n; i++) {
        sds m = rdbGenericLoadStringObject(rdb, RDB_LOAD_SDS, NULL);
        if (!m) return C_ERR;
        long long when = rdbLoadMillisecondTime(rdb, RDB_VERSION);
        int out = 0;
        int ok = !rioGetReadError(rdb) && when >= 0 && when <= TTL_MAX_MS && setTypeIsMember(set, m) &&
                 zsetAdd(*slot, (double)when, m, ZADD_IN_NX, &out, NULL) && (out & ZADD_OUT_ADDED);
        sdsfree(m);
        if (!ok) return C_ERR;
    }
    return C_OK;
}

typedef struct aofCtx {
    rio *r;
    robj *key;
    const unsigned char *m[AOF_REWRITE_ITEMS_PER_CMD];
    size_t len[AOF_REWRITE_ITEMS_PER_CMD];
    unsigned char shortm[AOF_REWRITE_ITEMS_PER_CMD][LONG_STR_SIZE];
    long long when;
    int n;
} aofCtx;

/* SPEXPIREAT key when MEMBERS n member... for a run of equal times. */
static int flushAof(aofCtx *a) {
    if (!a->n) return 1;
    if (!rioWriteBulkCount(a->r, '*', 5 + a->n) || !rioWriteBulkString(a->r, "SPEXPIREAT", 10) ||
        !rioWriteBulkObject(a->r, a->key) || !rioWriteBulkLongLong(a->r, a->when) ||
        !rioWriteBulkString(a->r, "MEMBERS", 7) || !rioWriteBulkLongLong(a->r, a->n))
        return 0;
    for (int i = 0; i < a->n; i++)
        if (!rioWriteBulkString(a->r, (const char *)a->m[i], a->len[i])) return 0;
    a->n = 0;
    return 1;
}

static int aofTtlEntry(void *ctx, const unsigned char *m, size_t len, long long when) {
    aofCtx *a = ctx;
    if (a->n && (when != a->when || a->n == AOF_REWRITE_ITEMS_PER_CMD) && !flushAof(a)) return 0;
    /* A longer member lies in the index, unchanged until the flush; a
     * short one may be an integer decoded into a buffer the next entry
     * reuses, so it is copied. */
    if (len <= LONG_STR_SIZE) {
        memcpy(a->shortm[a->n], m, len);
        m = a->shortm[a->n];
    }
    a->when = when;
    a->m[a->n] = m;
    a->len[a->n] = len;
    a->n++;
    return 1;
}

/* After the SADDs of a set, its members' times as absolute ones. Returns
 * 0 on a write error. */
int setTtlRewriteAof(rio *r, robj *key, robj *set) {
    if (!setHasVolatileMembers(set)) return 1;
    aofCtx a = {.r = r, .key = key};
    return forEachTtl(set, aofTtlEntry, &a) && flushAof(&a);
}
