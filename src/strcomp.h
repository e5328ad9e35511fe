/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * strcomp.h - string values held compressed with symbol tables the server
 * trains from its own values (strcomp.c).
 */
#ifndef STRCOMP_H
#define STRCOMP_H

#include <stdbool.h>
#include <stddef.h>

struct serverObject;
struct client;

/* The configs (config.c registers them). */
typedef struct {
    int enabled;       /* string-compression */
    int min_size;      /* string-compression-min-size: shorter values stay plain */
    int max_size;      /* string-compression-max-size: longer values stay plain */
    int zstd_min_size; /* string-compression-zstd-min-size: from here on, zstd (0: never) */
    int train_values;  /* string-compression-train-values: values a table is trained from */
    int cycle_us;      /* string-compression-cycle-us: background work a cron call, µs */
} strcompConfigs;
extern strcompConfigs strcomp_config;

/* A value to store: the compressed form of a plain string `val` when the
 * current table codes it in fewer bytes (val's reference released), else
 * `val` itself. */
struct serverObject *strcompTryCompress(struct serverObject *val);

/* A value found by a lookup: a compressed one is decoded into a temporary
 * plain string, which lives until the execution unit that asked for it
 * ends; any other value is returned as it is. */
struct serverObject *strcompReadable(struct serverObject *val);

/* Makes t (a new object, refcount 1) such a temporary, released with the
 * execution unit that asked for it: also what a replica's read of a set
 * with members due sees (t_member_ttl.c). Returns t. */
struct serverObject *strcompHoldTemp(struct serverObject *t);

/* Replies with a string value (addReplyBulk), a compressed one decoded
 * straight into the reply: GET, MGET and the like read through this with
 * LOOKUP_STORED, and no temporary is made. */
void strcompAddReplyBulk(struct client *c, struct serverObject *o);

/* Releases the temporaries of execution units deeper than `nesting` (-1:
 * all of them, outside any unit). */
void strcompReleaseTemps(int nesting);

/* A new plain string object with a compressed value's bytes (refcount 1). */
struct serverObject *strcompDecodeObject(const struct serverObject *val);
/* A new RAW string object with a compressed value's bytes (refcount 1):
 * what dbUnshareStringValue hands APPEND, SETRANGE and the bit commands. */
struct serverObject *strcompDecodeRaw(const struct serverObject *val);
/* The decoded length of a compressed value. */
size_t strcompDecodedLen(const struct serverObject *val);

/* A compressed object's reference to its table: taken by each object that
 * holds a compressed value, dropped when it is freed (any thread, with
 * its value when that is allocated apart). */
void strcompRetain(const struct serverObject *val);
void strcompFreeValue(struct serverObject *val);

/* A compressed value's plain bytes, in a buffer that the next call to
 * strcomp.c may reuse. */
const unsigned char *strcompPlainBytes(const struct serverObject *val, size_t *len);
/* The same, decoded only until `want` or more bytes are there (GETRANGE's
 * range): *len is fewer than `want` only when the value is shorter, and
 * then it is the value's length. */
const unsigned char *strcompPlainPrefix(const struct serverObject *val, size_t want, size_t *len);

/* Training, retraining and the background pass (serverCron). */
void strcompCron(void);
/* INFO memory's lines. */
char *strcompInfo(char *info);
/* DEBUG STRCOMP TRAIN|TRY|SWEEP. */
void strcompDebugCommand(struct client *c);

#endif
