/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 */

/* Reading ahead for the members of pipelined commands
 * ===================================================
 *
 * A client's pipeline is parsed into a queue of commands before the first of
 * them runs, and upstream then asks for the keys they name, all at once
 * (prefetchCommandQueueKeys in networking.c). A point command on a big
 * sorted set (ZSCORE, ZINCRBY, ZADD, ZREM, ZRANK, ...) goes on to look its
 * member up in the tree (zbtree.c): the index slot, then the leaf it names,
 * two misses one after the other, and a pipeline of such commands waits for
 * every one in turn. Here the queue's members are looked up ahead, together
 * (zbtPrefetchMany), so that their misses overlap and each command finds its
 * lines in the cache when it runs. A big set of strings' SISMEMBER, SADD and
 * SREM have their member's bucket asked for (hpset.c, hpsPrefetch): one line,
 * found from the member's hash in the form the set stores it (setpack.c).
 * A big set of integers' SISMEMBER, SMISMEMBER, SADD and SREM have the
 * block their member falls in asked for (ibset.c, ibsPrefetch), whose
 * index is mostly in the cache. SADDEX and ZADDEX have their members read
 * ahead as SADD and ZADD do, and also in the key's index of times when that
 * is a tree (t_member_ttl.c).
 *
 * A lone command (pipeline 1) on a big sorted set has only its index slot
 * asked for (zbtPrefetchOne), though upstream asks for no key then: the
 * slot comes in while the command makes its way through processCommand.
 * A lone command on a big set of strings has its bucket asked for
 * likewise. (What each saves is in docs/engine.md.)
 *
 * A lone command that names at most one key skips upstream's key batch
 * (prefetchLoneCommand): upstream hashes that key to start a batch of one,
 * which it then drops as not worth running, so the hash is thrown away on
 * every such command.
 *
 * The batch is arrays on the stack, up to ZBT_PREFETCH_MAX entries: the
 * tree, the member and its length. A set member's stored form and hash are
 * kept until the next batch (prefetchedMember), so that its command takes
 * them instead of working them out again.
 *
 * It is a hint and nothing else: it reads the keyspace and the values as
 * they are before the queue runs and writes nothing of theirs. A command
 * it misreads (a key a queued SELECT makes another) only costs its lines.
 * `prefetch-batch-max-size` bounds it as it bounds upstream's batch (0 or 1
 * turns both off).
 */

#include "server.h"
#include "memberttl.h"
#include "setpack.h"

#include <ctype.h>

typedef struct memberBatch {
    zbt *tree[ZBT_PREFETCH_MAX];
    const unsigned char *m[ZBT_PREFETCH_MAX];
    size_t len[ZBT_PREFETCH_MAX];
    size_t n, max;
    /* Members of big sets of strings: their sets and hashes. */
    hpset *set[ZBT_PREFETCH_MAX];
    uint64_t hash[ZBT_PREFETCH_MAX];
    size_t sets;
    size_t ints; /* Members of big sets of integers, asked for at once. */
    /* The last key looked up: a pipeline mostly names one key over and over. */
    sds lastKey;
    robj *lastVal;
} memberBatch;

static int batchFull(const memberBatch *b) {
    return b->n + b->sets + b->ints >= b->max;
}

/* ZADD's options before its first score. Every option is a word of two or
 * four letters; a score is a number or "inf", so most arguments are told
 * apart without comparing them to each option (W1 sends a score where an
 * option may stand in every ZADD). */
static int isZaddOption(sds a) {
    static const char *const options[] = {"nx", "xx", "gt", "lt", "ch", "incr"};
    size_t len = sdslen(a);
    if ((len != 2 && len != 4) || !isalpha((unsigned char)a[0])) return 0;
    for (size_t i = 0; i < sizeof(options) / sizeof(options[0]); i++)
        if (!strcasecmp(a, options[i])) return 1;
    return 0;
}

/* Where cmd's members are among its arguments: argv[first], argv[first +
 * step], ... below argv[end]. Returns 0 for a command that names none. */
static int memberArgs(const struct serverCommand *cmd, robj **argv, int argc, int *first, int *step, int *end) {
    serverCommandProc *proc = cmd->proc;
    *first = 2;
    *step = 1;
    *end = argc;
    if (proc == zscoreCommand || proc == zrankCommand || proc == zrevrankCommand) {
        *end = 3;
    } else if (proc == zincrbyCommand) {
        *first = 3;
        *end = 4;
    } else if (proc == zaddCommand) {
        while (*first < argc && sdsEncodedObject(argv[*first]) && isZaddOption(objectGetVal(argv[*first]))) (*first)++;
        (*first)++; /* the score */
        *step = 2;
    } else if (proc == sismemberCommand) {
        *end = 3;
    } else if (proc == saddexCommand || proc == zaddexCommand) {
        /* Options, then MEMBERS n and the members (ZADDEX: score-member
         * pairs). Options may follow the members too, and are then read
         * ahead as if they were members, for nothing. MEMBERS is told
         * as the commands tell it, by its length first (a strcasecmp per
         * argument was 1.5% of SADDEX's CPU at P16). */
        while (*first < argc &&
               !(sdsEncodedObject(argv[*first]) && memberTtlOptIs(objectGetVal(argv[*first]), "members")))
            (*first)++;
        *first += proc == zaddexCommand ? 3 : 2;
        *step = proc == zaddexCommand ? 2 : 1;
    } else if (proc != zremCommand && proc != zmscoreCommand && proc != saddCommand && proc != sremCommand &&
               proc != smismemberCommand) {
        return 0;
    }
    return *first < argc;
}

/* The value a member of the key is looked up in (a sorted set's tree, a
 * big set of strings), or NULL. */
static void *valueOf(memberBatch *b, client *c, robj *keyobj) {
    if (!c->db || !sdsEncodedObject(keyobj)) return NULL;
    sds key = objectGetVal(keyobj);
    if (!b->lastKey || sdslen(key) != sdslen(b->lastKey) || memcmp(key, b->lastKey, sdslen(key))) {
        b->lastKey = key;
        b->lastVal = dbFind(c->db, key);
    }
    robj *o = b->lastVal;
    if (!o || o->encoding != OBJ_ENCODING_BTREE || (o->type != OBJ_ZSET && o->type != OBJ_SET)) return NULL;
    return objectGetVal(o);
}

/* The stored forms and hashes of the set members the last batch read ahead
 * for, so that their commands need not encode and hash them again (a
 * seventh of SADD's own work at 1M members). An entry is found by the
 * member's bytes, not by where they lie: a stale one still holds what those
 * bytes encode and hash to, so whoever finds it gets the right answer. */
#define MEMO_MAX_LEN 32
typedef struct memberMemo {
    uint8_t len, elen;
    unsigned char m[MEMO_MAX_LEN];
    unsigned char e[MEMO_MAX_LEN + 1]; /* escaping adds a byte */
    uint64_t h;
} memberMemo;

static memberMemo memo[ZBT_PREFETCH_MAX];
static size_t memo_count, memo_next;

static void memoAdd(const unsigned char *m, size_t len, const unsigned char *e, size_t elen, uint64_t h) {
    if (len > MEMO_MAX_LEN || elen > MEMO_MAX_LEN + 1 || memo_count == ZBT_PREFETCH_MAX) return;
    memberMemo *k = &memo[memo_count++];
    k->len = (uint8_t)len;
    k->elen = (uint8_t)elen;
    memcpy(k->m, m, len);
    memcpy(k->e, e, elen);
    k->h = h;
}

/* Member m's stored form copied into buf (SPK_ENC_BUF bytes) and its hash,
 * when the read-ahead worked them out. Commands run in queue order and take
 * their members in the order they were read ahead, so the search starts
 * after the last entry taken (past the entries of a command that failed),
 * and the commands queued past the batch cost nothing. Returns the stored
 * form's length, 0 when m is not there. */
size_t prefetchedMember(const unsigned char *m, size_t len, unsigned char *buf, uint64_t *h) {
    for (size_t i = memo_next; i < memo_count; i++) {
        memberMemo *k = &memo[i];
        if (k->len != len || memcmp(k->m, m, len)) continue;
        memcpy(buf, k->e, k->elen);
        *h = k->h;
        memo_next = i + 1;
        return k->elen;
    }
    return 0;
}

/* A big set's member: the hash of its stored form, and its directory slot
 * asked for; its bucket once every slot is (prefetchQueuedMembers). */
/* The hash of a set member's stored form; memo: keep both for its command. */
static uint64_t storedHash(const unsigned char *m, size_t mlen, int memo) {
    unsigned char buf[SPK_ENC_BUF];
    const unsigned char *out;
    size_t len = spkEncode(m, mlen, buf, &out);
    uint64_t h = hpsHash(out, len);
    if (memo) memoAdd(m, mlen, out, len, h);
    spkRelease(out, m, buf);
    return h;
}

static void addSetMember(memberBatch *b, hpset *s, robj *member) {
    uint64_t h = storedHash((const unsigned char *)objectGetVal(member), sdslen(objectGetVal(member)), 1);
    hpsPrefetchSlot(s, h);
    b->set[b->sets] = s;
    b->hash[b->sets++] = h;
}

/* Members argv[first], argv[first + step], ... below argv[end], to be
 * looked up in tree t. */
static void addTreeMembers(memberBatch *b, zbt *t, robj **argv, int first, int step, int end) {
    for (int j = first; j < end && !batchFull(b); j += step) {
        if (!sdsEncodedObject(argv[j])) continue;
        b->tree[b->n] = t;
        b->m[b->n] = (const unsigned char *)objectGetVal(argv[j]);
        b->len[b->n++] = sdslen(objectGetVal(argv[j]));
    }
}

/* Whether a command may name members: one test passes over the commands
 * of other types, in the queue's loop (a pipeline of GETs came to 0.5% of
 * its CPU in memberArgs' comparisons, and to 0.5% more in the calls of a
 * loop that made the test in the callee, `perf` at 46c6083). */
static inline int mayNameMembers(const struct serverCommand *cmd, int argc) {
    return cmd && argc >= 3 && (cmd->acl_categories & (ACL_CATEGORY_SET | ACL_CATEGORY_SORTEDSET));
}

static void addCommand(memberBatch *b, client *c, const struct serverCommand *cmd, robj **argv, int argc) {
    int first, step, end;
    if (!memberArgs(cmd, argv, argc, &first, &step, &end)) return;
    void *v = valueOf(b, c, argv[1]);
    if (!v) return;
    if (ibsIsSet(v)) {
        /* Integers: the block each would be in. */
        for (int j = first; j < end && !batchFull(b); j += step) {
            long long ll;
            if (sdsEncodedObject(argv[j]) && string2ll(objectGetVal(argv[j]), sdslen(objectGetVal(argv[j])), &ll)) {
                ibsPrefetch(v, ll);
                b->ints++;
            }
        }
        return;
    }
    if (hpsIsSet(v)) {
        /* SMISMEMBER asks for its members' buckets itself. */
        if (cmd->proc == smismemberCommand) return;
        for (int j = first; j < end && !batchFull(b); j += step)
            if (sdsEncodedObject(argv[j])) addSetMember(b, v, argv[j]);
        return;
    }
    addTreeMembers(b, v, argv, first, step, end);
}

void prefetchQueuedMembers(client *c) {
    memberBatch b;
    memo_count = memo_next = 0;
    b.n = b.sets = b.ints = 0;
    b.max = server.prefetch_batch_max_size < ZBT_PREFETCH_MAX ? server.prefetch_batch_max_size : ZBT_PREFETCH_MAX;
    b.lastKey = NULL;
    b.lastVal = NULL;
    if (mayNameMembers(c->parsed_cmd, c->argc) && !(c->read_flags & READ_FLAGS_BAD_ARITY))
        addCommand(&b, c, c->parsed_cmd, c->argv, c->argc);
    for (int i = c->cmd_queue.off; i < c->cmd_queue.len && !batchFull(&b); i++) {
        parsedCommand *p = &c->cmd_queue.cmds[i];
        if (mayNameMembers(p->cmd, p->argc) && !(p->read_flags & READ_FLAGS_BAD_ARITY))
            addCommand(&b, c, p->cmd, p->argv, p->argc);
    }
    for (size_t i = 0; i < b.sets; i++) hpsPrefetch(b.set[i], b.hash[i]);
    if (b.n > 1)
        zbtPrefetchMany(b.tree, b.m, b.len, b.n);
    else if (b.n == 1)
        zbtPrefetchOne(b.tree[0], b.m[0], b.len[0]);
}

/* Reads ahead for a lone command that names at most one key, where
 * upstream's key batch would hold one key and be dropped; returns 0 for any
 * other, which takes upstream's batch. Its key count comes from its key
 * specs, as COMMAND's (first, last, step) does: one range of one key, and
 * no keys found by other means (CMD_MOVABLE_KEYS). */
int prefetchLoneCommand(client *c) {
    struct serverCommand *cmd = c->parsed_cmd;
    int queued = c->cmd_queue.off < c->cmd_queue.len; /* a pipeline: commands wait behind this one */
    if (queued || !cmd || (c->read_flags & READ_FLAGS_BAD_ARITY)) return 0;
    if ((cmd->flags & CMD_MOVABLE_KEYS) || cmd->legacy_range_key_spec.fk.range.lastkey != 0) return 0;
    prefetchQueuedMembers(c);
    return 1;
}
