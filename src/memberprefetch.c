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
 * lines in the cache when it runs. Big sets' keyed trees are left out: read
 * ahead, they were slower (see zbtPrefetchMany).
 *
 * The batch is three arrays on the stack, up to ZBT_PREFETCH_MAX entries:
 * the tree, the member and its length.
 *
 * It is a hint and nothing else: it reads the keyspace and the trees as they
 * are before the queue runs, writes nothing to either (a fork child may share
 * their pages), and no command does anything differently for it. A command
 * it misreads (a key a queued SELECT makes another) only costs its lines.
 * `prefetch-batch-max-size` bounds it as it bounds upstream's batch (0 or 1
 * turns both off).
 */

#include "server.h"

typedef struct memberBatch {
    zbt *tree[ZBT_PREFETCH_MAX];
    const unsigned char *m[ZBT_PREFETCH_MAX];
    size_t len[ZBT_PREFETCH_MAX];
    size_t n, max;
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
    } else if (proc != zremCommand && proc != zmscoreCommand) {
        return 0;
    }
    return *first < argc;
}

/* The tree a member of the key's value is looked up in, or NULL. */
static zbt *treeOf(memberBatch *b, client *c, robj *keyobj) {
    if (!c->db || !sdsEncodedObject(keyobj)) return NULL;
    sds key = objectGetVal(keyobj);
    if (!b->lastKey || sdslen(key) != sdslen(b->lastKey) || memcmp(key, b->lastKey, sdslen(key))) {
        b->lastKey = key;
        b->lastVal = dbFind(c->db, key);
    }
    robj *o = b->lastVal;
    return o && o->type == OBJ_ZSET && o->encoding == OBJ_ENCODING_BTREE ? objectGetVal(o) : NULL;
}

static void addCommand(memberBatch *b, client *c, const struct serverCommand *cmd, robj **argv, int argc) {
    int first, step, end;
    if (!cmd || argc < 3 || !memberArgs(cmd, argv, argc, &first, &step, &end)) return;
    zbt *t = treeOf(b, c, argv[1]);
    if (!t) return;
    for (int j = first; j < end && b->n < b->max; j += step) {
        if (!sdsEncodedObject(argv[j])) continue;
        sds member = objectGetVal(argv[j]);
        b->tree[b->n] = t;
        b->m[b->n] = (const unsigned char *)member;
        b->len[b->n++] = sdslen(member);
    }
}

void prefetchQueuedMembers(client *c) {
    memberBatch b;
    b.n = 0;
    b.max = server.prefetch_batch_max_size < ZBT_PREFETCH_MAX ? server.prefetch_batch_max_size : ZBT_PREFETCH_MAX;
    b.lastKey = NULL;
    b.lastVal = NULL;
    if (c->parsed_cmd && !(c->read_flags & READ_FLAGS_BAD_ARITY)) addCommand(&b, c, c->parsed_cmd, c->argv, c->argc);
    for (int i = c->cmd_queue.off; i < c->cmd_queue.len && b.n < b.max; i++) {
        parsedCommand *p = &c->cmd_queue.cmds[i];
        if (p->cmd && !(p->read_flags & READ_FLAGS_BAD_ARITY)) addCommand(&b, c, p->cmd, p->argv, p->argc);
    }
    if (b.n > 1) zbtPrefetchMany(b.tree, b.m, b.len, b.n);
}
