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
 *
 * A lone command (pipeline 1) on a big sorted set has only its index slot
 * asked for (zbtPrefetchOne), though upstream asks for no key then: the
 * slot comes in while the command makes its way through processCommand
 * (1M members, ZSCORE at pipeline 1: 80 ns less CPU a call, the slot's
 * miss). A lone command on a big set of strings has its bucket asked for
 * likewise (SADD and SISMEMBER at pipeline 1: 1.5-2% less CPU a call).
 *
 * The batch is arrays on the stack, up to ZBT_PREFETCH_MAX entries: the
 * tree, the member and its length.
 *
 * It is a hint and nothing else: it reads the keyspace and the values as
 * they are before the queue runs and writes nothing. A command it misreads
 * (a key a queued SELECT makes another) only costs its lines.
 * `prefetch-batch-max-size` bounds it as it bounds upstream's batch (0 or 1
 * turns both off).
 */

#include "server.h"
#include "setpack.h"

typedef struct memberBatch {
    zbt *tree[ZBT_PREFETCH_MAX];
    const unsigned char *m[ZBT_PREFETCH_MAX];
    size_t len[ZBT_PREFETCH_MAX];
    size_t n, max;
    /* Members of big sets of strings: their sets and hashes. */
    hpset *set[ZBT_PREFETCH_MAX];
    uint64_t hash[ZBT_PREFETCH_MAX];
    size_t sets;
    int lone; /* one command, nothing queued after it (pipeline 1) */
    /* The last key looked up: a pipeline mostly names one key over and over. */
    sds lastKey;
    robj *lastVal;
} memberBatch;

/* ZADD's options before its first score. */
static int isZaddOption(sds a) {
    static const char *const options[] = {"nx", "xx", "gt", "lt", "ch", "incr"};
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
    if (!o || o->encoding != OBJ_ENCODING_BTREE) return NULL;
    if (o->type == OBJ_ZSET) return objectGetVal(o);
    return o->type == OBJ_SET && hpsIsSet(objectGetVal(o)) ? objectGetVal(o) : NULL;
}

/* A big set's member: the hash of its stored form, and its directory slot
 * asked for; its bucket once every slot is (prefetchQueuedMembers). */
static void addSetMember(memberBatch *b, hpset *s, robj *member) {
    unsigned char buf[SPK_ENC_BUF];
    const unsigned char *out, *m = (const unsigned char *)objectGetVal(member);
    size_t len = spkEncode(m, sdslen(objectGetVal(member)), buf, &out);
    uint64_t h = hpsHash(out, len);
    spkRelease(out, m, buf);
    hpsPrefetchSlot(s, h);
    b->set[b->sets] = s;
    b->hash[b->sets++] = h;
}

static void addCommand(memberBatch *b, client *c, const struct serverCommand *cmd, robj **argv, int argc) {
    int first, step, end;
    if (!cmd || argc < 3 || !memberArgs(cmd, argv, argc, &first, &step, &end)) return;
    void *v = valueOf(b, c, argv[1]);
    if (!v) return;
    if (hpsIsSet(v)) {
        /* SMISMEMBER asks for its members' buckets itself. */
        if (cmd->proc == smismemberCommand) return;
        for (int j = first; j < end && b->n + b->sets < b->max; j += step)
            if (sdsEncodedObject(argv[j])) addSetMember(b, v, argv[j]);
        return;
    }
    zbt *t = v;
    for (int j = first; j < end && b->n + b->sets < b->max; j += step) {
        if (!sdsEncodedObject(argv[j])) continue;
        b->tree[b->n] = t;
        b->m[b->n] = (const unsigned char *)objectGetVal(argv[j]);
        b->len[b->n++] = sdslen(objectGetVal(argv[j]));
    }
}

void prefetchQueuedMembers(client *c) {
    memberBatch b;
    b.n = b.sets = 0;
    b.max = server.prefetch_batch_max_size < ZBT_PREFETCH_MAX ? server.prefetch_batch_max_size : ZBT_PREFETCH_MAX;
    b.lastKey = NULL;
    b.lastVal = NULL;
    b.lone = c->cmd_queue.off >= c->cmd_queue.len;
    if (c->parsed_cmd && !(c->read_flags & READ_FLAGS_BAD_ARITY)) addCommand(&b, c, c->parsed_cmd, c->argv, c->argc);
    for (int i = c->cmd_queue.off; i < c->cmd_queue.len && b.n + b.sets < b.max; i++) {
        parsedCommand *p = &c->cmd_queue.cmds[i];
        if (p->cmd && !(p->read_flags & READ_FLAGS_BAD_ARITY)) addCommand(&b, c, p->cmd, p->argv, p->argc);
    }
    for (size_t i = 0; i < b.sets; i++) hpsPrefetch(b.set[i], b.hash[i]);
    if (b.n > 1)
        zbtPrefetchMany(b.tree, b.m, b.len, b.n);
    else if (b.n == 1)
        zbtPrefetchOne(b.tree[0], b.m[0], b.len[0]);
}
