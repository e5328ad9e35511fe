/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 */

/* String values held compressed
 * =============================
 *
 * With string-compression on (off by default until every string command
 * on coded values at pipeline 16 is as fast as upstream's: docs/engine.md
 * part 7), a
 * string value of string-compression-min-size to -max-size bytes may be
 * held coded with a symbol table (symtab.c) that the server trains from a
 * sample of its own values, or, from string-compression-zstd-min-size
 * bytes on, as a zstd frame with a dictionary trained from the same
 * sample. Such a value is an object of encoding OBJ_ENCODING_COMPRESSED
 * whose value bytes (an sds, embedded with the key as an embstr's are, or
 * allocated apart) are
 *
 *    +-----+-----------------------+
 *    | gen | codes ...             |     gen 0..126
 *    +-----+-----------------------+
 *       1    symtabEncode()'s output
 *
 *    +-----+--------+--------------+
 *    | gen | length | frame ...    |     gen 0x80 | 0..126
 *    +-----+--------+--------------+
 *       1    1..10    ZSTD_compress2()'s output: magicless, with no
 *                     checksum, dictionary id or content size
 *
 * `gen`'s low 7 bits name the generation that coded it: a symbol table
 * and, when enough long values were sampled, a zstd dictionary. `length`
 * is the plain length (7 bits a byte, low ones first, the top bit set on
 * all but the last), so that STRLEN and the counts below decode nothing.
 * Example: with table 0 holding "the " as code 0, the value "the end" may
 * be 00 00 FF 'e' FF 'n' FF 'd' (8 bytes for 7: it would stay plain, see
 * below).
 *
 * Who sees what:
 * - Commands never see a compressed value. GET, MGET, GETRANGE, STRLEN
 *   and APPEND look up the stored object (LOOKUP_STORED) and decode it
 *   straight into their reply or new value (strcompAddReplyBulk,
 *   strcompPlainBytes, dbUnshareStringValue). For all others lookupKey()
 *   hands them a temporary plain copy (strcompReadable), which lives until the
 *   execution unit that asked for it ends (exitExecutionUnit calls
 *   strcompReleaseTemps). A temporary starts with two references, one of
 *   them held for it, so that code that changes a string in place only
 *   when it is the sole owner (dbUnshareStringValue) replaces the stored
 *   value instead of changing the copy. So a read writes nothing shared
 *   with a fork child, and a write replaces the compressed value with a
 *   plain one, which the background pass compresses again.
 * - What reads the keyspace without a lookup decodes for itself: RDB and
 *   DUMP payloads, AOF rewrite, DEBUG DIGEST, a module's scan. Files and
 *   streams carry plain values only.
 * - OBJECT ENCODING says "compressed"; MEMORY USAGE counts the coded bytes.
 *
 * Generations. A table is trained once string-compression-train-values
 * distinct eligible values can be sampled. Later, once a minute at most
 * and only when the pass or a load coded STRCOMP_RETRY_WINDOW times that
 * many values since the last try, a candidate is trained from four
 * fifths of a fresh sample and takes over only if it codes the other fifth
 * in STRCOMP_ADOPT_GAIN times fewer bytes than the current table does (the
 * data drifted), or when it brings a zstd dictionary the current one
 * lacks; else it is dropped. Training copies its samples and runs in
 * steps within the cron's budget (symtabTrainerStep), so it never stops
 * the server for long; the dictionary of an adopted table is trained in
 * one call (ZDICT's fastCover, 6-10 ms). Values keep the generation that
 * coded them; each
 * counts the values that use it (atomically outside the main thread: a
 * lazy-free thread may free values) and is freed by the cron once it has
 * none and a newer one exists. At
 * most STRCOMP_GENERATIONS tables live at once; retraining waits for a
 * free one.
 *
 * When values are coded:
 * - on load, where an RDB's value is stored (dbAddRDBLoad calls
 *   strcompTryCompress), once a table exists; not on write, where the
 *   value is also the command's argv, read again to propagate it;
 * - by the background pass, string-compression-cycle-us of each cron call:
 *   values stored before the table existed, values changed in place
 *   (APPEND, SETRANGE, SETBIT...), values loaded from an RDB or AOF, and
 *   values of an older table; a plain value only once it has gone
 *   untouched for STRCOMP_COLD_SECONDS. No pass runs while a fork child
 *   exists.
 * A value is coded only when that saves bytes: one that would not shrink
 * stays as it is.
 *
 * Invariants:
 * - gen[g]'s values (mine + theirs) is the number of live objects of encoding
 *   OBJ_ENCODING_COMPRESSED whose first value byte's low 7 bits are g;
 *   gen[g].table is non-NULL while it is non-zero or g is the current
 *   table, and so are gen[g].cdict and .ddict while a value of g is a
 *   frame (a frame is coded only with a dictionary, and both go together).
 * - Every temporary in `temps` has one reference held for it and one for
 *   the temps list; others may take more (a reply that holds the object).
 *
 * Public prefix `strcomp`.
 */
#include "server.h"
#include "strcomp.h"
#include "symtab.h"

#include <stdatomic.h>
#define ZSTD_STATIC_LINKING_ONLY /* magicless frames, our allocator */
#include <zstd.h>
#define ZDICT_STATIC_LINKING_ONLY /* fastCover with fixed parameters */
#include <zdict.h>

/* Generations alive at once: the generation byte's low 7 bits name one
 * (0..126); its top bit, STRCOMP_ZSTD, says the value is a zstd frame. */
#define STRCOMP_GENERATIONS 127
#define STRCOMP_ZSTD 0x80
/* Long values' dictionaries: at most STRCOMP_DICT_BYTES, trained by zstd's
 * fastCover (parameters below) from a generation's samples of
 * string-compression-zstd-min-size bytes or more, when there are
 * STRCOMP_DICT_MIN_SAMPLES of them. On W9's documents (0.5-2 KB), 256 KiB
 * of samples train one in about 6 ms, which codes held-out documents 2.56
 * times smaller at level 3 (the symbol table: 1.81) and decodes one in
 * about 1.45 µs (the table: 0.42); ZDICT_trainFromBuffer's search of
 * parameters took 59 ms for 2.56, a dictionary of raw samples 4 ms for
 * 2.54, level 1 gave 2.45 and level -1 1.96 (decoding in 0.8 µs).
 * docs/engine.md part 7. */
#define STRCOMP_DICT_BYTES (32 * 1024)
#define STRCOMP_DICT_MIN_SAMPLES 16
#define STRCOMP_ZSTD_LEVEL 3
#define STRCOMP_DICT_K 200
#define STRCOMP_DICT_D 8
#define STRCOMP_DICT_F 18
/* Training takes at most this many bytes of samples: 256 KiB trains a
 * table in about 15 ms on the development VM (docs/engine.md part 7). */
#define STRCOMP_SAMPLE_BYTES (256 * 1024)
/* Random picks per value wanted when sampling, before giving up. */
#define STRCOMP_SAMPLE_TRIES 4
/* Seconds between attempts to train when too few values were found, and
 * from one table to the next when the data drifts. */
#define STRCOMP_TRAIN_RETRY_SECONDS 1
#define STRCOMP_RETRAIN_SECONDS 60
/* A candidate table is tried once this many times train_values were
 * coded since the last try, and takes over when the current table's coded
 * bytes of the held-out samples are this many times its own. A comparison with the
 * table's own training ratio (retrain when values code 15% worse) missed
 * W9's documents overwritten with order records: the old table coded them
 * about as well as it had coded W9, and a new one coded them 1.37 times
 * smaller (utils/bench/strcomp-drift, docs/engine.md part 7). */
#define STRCOMP_RETRY_WINDOW 4
#define STRCOMP_ADOPT_GAIN 1.10
/* One in this many samples is held out of a candidate's training to judge
 * it: judged on its own training samples, a candidate trained from 200
 * values of the same data as the current table beat it by 10% about one
 * time in two (fork-strcomp's candidate test). */
#define STRCOMP_HOLDOUT 5
/* Samples a training step codes: 32 of W6's texts take about 20 µs; a
 * generation's end (choosing 255 of the candidates) about 2 ms. */
#define STRCOMP_TRAIN_STEP 32
/* Keys the background pass gathers from one scan step before coding them. */
#define STRCOMP_BATCH 128
/* A new pass starts when this many writes happened since the last one
 * started (those made while it ran may be behind its cursor). */
#define STRCOMP_PASS_DIRTY 1000
/* A pass that codes fewer than one in STRCOMP_PASS_FUTILE of the plain
 * values it tries (incompressible data) doubles the writes the next one
 * waits for, up to STRCOMP_PASS_DIRTY << STRCOMP_PASS_BACKOFF_MAX; one
 * that codes more starts the wait over. So a keyspace of values that do
 * not code smaller costs passes ever more seldom, not the whole budget. */
#define STRCOMP_PASS_FUTILE 16
#define STRCOMP_PASS_BACKOFF_MAX 10
/* The pass codes a plain value only once it has gone untouched this long
 * (its LRU; under an LFU policy every plain value): one written lately is
 * likely written again (APPEND, counters, sessions), and coding it would
 * be undone by the next write. A pass that left such values starts again
 * this long after it ended, writes or not. With values coded again right
 * after each write, APPEND at pipeline 16 ran at 0.80 of the reference's
 * (utils/bench/string-rounds at 8590732). */
#define STRCOMP_COLD_SECONDS 5

strcompConfigs strcomp_config = {.enabled = 0,
                                 .min_size = 16,
                                 .max_size = 4096,
                                 .zstd_min_size = 256,
                                 .train_values = 1000,
                                 .cycle_us = 2500};

typedef struct {
    symtab *table;
    /* Its values, their decoded bytes and their coded bytes (the gen byte
     * included): the main thread counts them in `mine`, other threads (a
     * lazy free) atomically in `theirs`; each figure is the sum of both. */
    struct {
        long long values, raw_bytes, coded_bytes;
    } mine;
    struct {
        atomic_llong values, raw_bytes, coded_bytes;
    } theirs;
    double trained_ratio; /* raw / coded over its training sample */
    /* Long values' dictionary, NULL when too few long samples trained it
     * (long values then use the table). */
    ZSTD_CDict *cdict;
    ZSTD_DDict *ddict;
} strcompGen;

typedef struct {
    robj *o;
    int depth;
} strcompTemp;

static struct {
    strcompGen gen[STRCOMP_GENERATIONS];
    int current; /* the table new values are coded with, -1 before the first */
    time_t next_train;
    /* Values coded (by the pass or on load) since the last training. */
    unsigned long long window_values;
    unsigned long long tried, adopted; /* candidate tables */
    /* The background pass. */
    int pass_db;
    unsigned long long pass_cursor;
    int pass_running;
    long long pass_start_dirty;                /* server.dirty when the pass (last) started */
    unsigned long long pass_tried, pass_coded; /* plain values, this pass */
    unsigned long long pass_hot;               /* plain values left as written lately, this pass */
    long long pass_again_ms;                   /* a pass that left some starts again then (0: none) */
    bool pass_all;                             /* DEBUG STRCOMP SWEEP: hot values too */
    int pass_backoff;                          /* the wait is STRCOMP_PASS_DIRTY << this */
    unsigned long long passes, recoded;
    long long cycle_us_max; /* the longest cron call's work, µs */
    /* A table being trained, in steps, from copied samples. */
    struct {
        symtabTrainer *tr;
        unsigned char *arena;
        const unsigned char **v;
        size_t *len;
        size_t n;      /* samples */
        size_t ntrain; /* the first ntrain train; a candidate is judged on the rest */
    } job;
    /* Temporaries, innermost last. */
    strcompTemp *temps;
    size_t ntemps, temps_cap;
    /* A buffer for coding and decoding. */
    unsigned char *buf;
    size_t buf_cap;
    /* zstd's contexts, made with the first dictionary, and the generation
     * whose dictionary the compression one references (-1: none; a
     * dictionary is named on each decode). */
    ZSTD_CCtx *cctx;
    ZSTD_DCtx *dctx;
    int cctx_gen;
} sc = {.current = -1, .cctx_gen = -1};

/* --- Buffers --- */

static unsigned char *scratch(size_t len) {
    if (len > sc.buf_cap) {
        sc.buf_cap = len < 256 ? 256 : len;
        sc.buf = zrealloc(sc.buf, sc.buf_cap);
    }
    return sc.buf;
}

/* --- Values --- */

static inline const unsigned char *payloadOf(const robj *o) {
    return objectGetVal(o);
}

/* The generation of the coded value `p`, and whether it is a zstd frame. */
static inline strcompGen *genOf(const unsigned char *p) {
    return &sc.gen[p[0] & ~STRCOMP_ZSTD];
}

static inline bool isZstd(const unsigned char *p) {
    return p[0] & STRCOMP_ZSTD;
}

/* A long value's plain length, before its frame: 7 bits a byte, low ones
 * first, the top bit set on all bytes but the last. */
static size_t putLength(unsigned char *out, size_t len) {
    size_t n = 0;
    while (len >= 0x80) {
        out[n++] = (unsigned char)(len | 0x80);
        len >>= 7;
    }
    out[n++] = (unsigned char)len;
    return n;
}

static size_t getLength(const unsigned char *in, size_t *len) {
    size_t n = 0, v = 0;
    do {
        v |= (size_t)(in[n] & 0x7f) << (7 * n);
    } while (in[n++] & 0x80);
    *len = v;
    return n;
}

/* Set in the main thread (by the cron): its counts need no atomics. */
static _Thread_local bool in_main_thread;

/* The decoded length of the coded value `p` of `plen` bytes (gen byte
 * included). */
static size_t decodedLen(const unsigned char *p, size_t plen) {
    size_t len;
    if (isZstd(p)) {
        getLength(p + 1, &len);
        return len;
    }
    len = symtabDecodedLen(genOf(p)->table, p + 1, plen - 1);
    serverAssert(len != SIZE_MAX);
    return len;
}

size_t strcompDecodedLen(const robj *o) {
    const unsigned char *p = payloadOf(o);
    return decodedLen(p, sdslen((sds)p));
}

/* Counts a value in (+1) or out (-1) of its table's figures. */
static void countValue(const robj *o, int sign) {
    const unsigned char *p = payloadOf(o);
    size_t plen = sdslen((sds)p);
    strcompGen *g = genOf(p);
    serverAssert(g->table != NULL);
    long long raw = sign * (long long)decodedLen(p, plen), coded = sign * (long long)plen;
    if (in_main_thread) {
        g->mine.values += sign;
        g->mine.raw_bytes += raw;
        g->mine.coded_bytes += coded;
    } else {
        atomic_fetch_add_explicit(&g->theirs.values, sign, memory_order_relaxed);
        atomic_fetch_add_explicit(&g->theirs.raw_bytes, raw, memory_order_relaxed);
        atomic_fetch_add_explicit(&g->theirs.coded_bytes, coded, memory_order_relaxed);
    }
}

/* A table's figures (the main thread's). */
static unsigned long long genValues(strcompGen *g) {
    return g->mine.values + atomic_load_explicit(&g->theirs.values, memory_order_relaxed);
}

static unsigned long long genRawBytes(strcompGen *g) {
    return g->mine.raw_bytes + atomic_load_explicit(&g->theirs.raw_bytes, memory_order_relaxed);
}

static unsigned long long genCodedBytes(strcompGen *g) {
    return g->mine.coded_bytes + atomic_load_explicit(&g->theirs.coded_bytes, memory_order_relaxed);
}

void strcompRetain(const robj *o) {
    countValue(o, 1);
}

/* Drops a freed object's reference to its table; frees its value when it
 * is allocated apart. */
void strcompFreeValue(robj *o) {
    if (!o->hasembval && o->val_ptr == NULL) return; /* its value moved to another object */
    countValue(o, -1);
    if (!o->hasembval) sdsfree(o->val_ptr);
}

/* The plain bytes of a compressed value, in the shared buffer: decoded in
 * one pass into room for the most its codes can give (8 bytes a code). */
const unsigned char *strcompPlainBytes(const robj *o, size_t *len) {
    return strcompPlainPrefix(o, SIZE_MAX, len);
}

/* Decodes the zstd frame of the long value `p` of `plen` bytes into `out`,
 * which has room for its `len` plain bytes. */
static void zstdDecode(const unsigned char *p, size_t plen, unsigned char *out, size_t len) {
    size_t stated, at = 1 + getLength(p + 1, &stated);
    size_t n = ZSTD_decompress_usingDDict(sc.dctx, out, len, p + at, plen - at, genOf(p)->ddict);
    serverAssert(!ZSTD_isError(n) && n == len);
}

const unsigned char *strcompPlainPrefix(const robj *o, size_t want, size_t *len) {
    const unsigned char *p = payloadOf(o);
    size_t plen = sdslen((sds)p) - 1;
    if (isZstd(p)) { /* decoded whole: a frame has no cheap prefix */
        *len = decodedLen(p, plen + 1);
        unsigned char *out = scratch(*len);
        zstdDecode(p, plen + 1, out, *len);
        return out;
    }
    size_t cap = plen * 8 + 8;
    unsigned char *out = scratch(cap);
    *len = symtabDecodePrefix(genOf(p)->table, p + 1, plen, out, cap, want);
    serverAssert(*len != SIZE_MAX);
    return out;
}

robj *strcompDecodeRaw(const robj *o) {
    size_t len;
    const unsigned char *s = strcompPlainBytes(o, &len);
    return createRawStringObject((const char *)s, len);
}

void strcompAddReplyBulk(client *c, robj *o) {
    if (o->encoding != OBJ_ENCODING_COMPRESSED) {
        addReplyBulk(c, o);
        return;
    }
    size_t len;
    const unsigned char *s = strcompPlainBytes(o, &len);
    addReplyBulkCBuffer(c, s, len);
}

robj *strcompDecodeObject(const robj *o) {
    size_t len;
    const unsigned char *s = strcompPlainBytes(o, &len);
    return createStringObject((const char *)s, len);
}

/* Codes `len` plain bytes, long ones, as a zstd frame with the current
 * generation's dictionary into `out`; returns the coded bytes, or SIZE_MAX. */
static size_t zstdEncode(const unsigned char *s, size_t len, unsigned char *out, size_t cap) {
    out[0] = (unsigned char)(STRCOMP_ZSTD | sc.current);
    size_t at = 1 + putLength(out + 1, len);
    if (sc.cctx_gen != sc.current) {
        ZSTD_CCtx_refCDict(sc.cctx, sc.gen[sc.current].cdict);
        sc.cctx_gen = sc.current;
    }
    size_t n = ZSTD_compress2(sc.cctx, out + at, cap - at, s, len);
    return ZSTD_isError(n) ? SIZE_MAX : at + n;
}

/* Whether a value of `len` plain bytes is coded with zstd. */
static bool codesWithZstd(size_t len) {
    return sc.gen[sc.current].cdict && strcomp_config.zstd_min_size && len >= (size_t)strcomp_config.zstd_min_size;
}

/* A new compressed object for `len` plain bytes, coded with the current
 * generation, or NULL when coding would not save a byte. */
static robj *compressBytes(const unsigned char *s, size_t len) {
    if (sc.current < 0) return NULL;
    unsigned char *out;
    size_t n;
    if (codesWithZstd(len)) {
        size_t cap = 1 + 10 + ZSTD_compressBound(len);
        out = scratch(cap);
        n = zstdEncode(s, len, out, cap);
    } else {
        out = scratch(SYMTAB_ENCODE_BOUND(len) + 1);
        out[0] = (unsigned char)sc.current;
        n = symtabEncode(sc.gen[sc.current].table, s, len, out + 1) + 1;
    }
    sc.window_values++;
    if (n >= len) return NULL;
    robj *c = createStringObject((const char *)out, n);
    c->encoding = OBJ_ENCODING_COMPRESSED;
    strcompRetain(c);
    return c;
}

static bool eligible(const robj *o) {
    if (o->type != OBJ_STRING || !sdsEncodedObject(o)) return false;
    size_t len = sdslen(objectGetVal(o));
    return len >= (size_t)strcomp_config.min_size && len <= (size_t)strcomp_config.max_size;
}

robj *strcompTryCompress(robj *val) {
    if (!strcomp_config.enabled || sc.current < 0 || !eligible(val)) return val;
    const unsigned char *s = objectGetVal(val);
    size_t len = sdslen(objectGetVal(val));
    robj *c = compressBytes(s, len);
    if (!c) return val;
    c->lru = val->lru;
    decrRefCount(val);
    return c;
}

/* --- Temporaries --- */

robj *strcompHoldTemp(robj *t) {
    incrRefCount(t); /* the reference held for it, see the invariants */
    if (sc.ntemps == sc.temps_cap) {
        sc.temps_cap = sc.temps_cap ? sc.temps_cap * 2 : 16;
        sc.temps = zrealloc(sc.temps, sc.temps_cap * sizeof(*sc.temps));
    }
    sc.temps[sc.ntemps++] = (strcompTemp){t, server.execution_nesting};
    return t;
}

robj *strcompReadable(robj *val) {
    if (val->encoding != OBJ_ENCODING_COMPRESSED) return val;
    size_t len;
    const unsigned char *s = strcompPlainBytes(val, &len);
    robj *t = createStringObjectWithExpire((const char *)s, len, objectGetExpire(val));
    t->lru = val->lru;
    return strcompHoldTemp(t);
}

void strcompReleaseTemps(int nesting) {
    while (sc.ntemps && sc.temps[sc.ntemps - 1].depth > nesting) {
        robj *t = sc.temps[--sc.ntemps].o;
        decrRefCount(t);
        decrRefCount(t);
    }
}

/* --- Training --- */

/* Whether a value may be a training sample: a string of the eligible
 * size, plain or compressed. */
static bool sampleable(const robj *o) {
    if (o->type != OBJ_STRING) return false;
    if (o->encoding == OBJ_ENCODING_COMPRESSED) {
        size_t len = strcompDecodedLen(o);
        return len >= (size_t)strcomp_config.min_size && len <= (size_t)strcomp_config.max_size;
    }
    return eligible(o);
}

/* Picks up to `want` distinct values at random across the databases, at
 * most STRCOMP_SAMPLE_BYTES in all, and copies their plain bytes into
 * `arena` (compressed ones decoded); returns how many. `*full` says
 * whether the bytes ran out before `want` values were found. */
static size_t sampleValues(size_t want, unsigned char *arena, const unsigned char **v, size_t *len, bool *full) {
    size_t n = 0, bytes = 0, slots = 1;
    *full = false;
    while (slots < 2 * want) slots *= 2;
    const void **seen = zcalloc(slots * sizeof(*seen)); /* open addressing on the object's address */
    int dbs[16], ndbs = 0;
    for (int j = 0; j < server.dbnum && ndbs < 16; j++) {
        if (server.db[j] && kvstoreSize(server.db[j]->keys)) dbs[ndbs++] = j;
    }
    for (size_t tries = 0; ndbs && tries < want * STRCOMP_SAMPLE_TRIES && n < want; tries++) {
        kvstore *keys = server.db[dbs[tries % ndbs]]->keys;
        int didx = kvstoreGetFairRandomHashtableIndex(keys);
        if (didx == KVSTORE_INDEX_NOT_FOUND) continue;
        void *entry;
        if (!hashtableFairRandomEntry(kvstoreGetHashtable(keys, didx), &entry)) continue;
        robj *o = entry;
        if (!sampleable(o)) continue;
        size_t h = ((uintptr_t)o >> 4) * 0x9e3779b97f4a7c15ULL >> 20;
        while (seen[h & (slots - 1)] && seen[h & (slots - 1)] != o) h++;
        if (seen[h & (slots - 1)]) continue;
        seen[h & (slots - 1)] = o;
        size_t l;
        const unsigned char *p = o->encoding == OBJ_ENCODING_COMPRESSED ? strcompPlainBytes(o, &l) : objectGetVal(o);
        if (o->encoding != OBJ_ENCODING_COMPRESSED) l = sdslen(objectGetVal(o));
        if (bytes + l > STRCOMP_SAMPLE_BYTES) {
            *full = true;
            break;
        }
        memcpy(arena + bytes, p, l);
        v[n] = arena + bytes;
        len[n++] = l;
        bytes += l;
    }
    zfree(seen);
    return n;
}

static void trainDrop(void);
static void passStart(void);

static int freeGeneration(void) {
    for (int g = 0; g < STRCOMP_GENERATIONS; g++) {
        if (!sc.gen[g].table) return g;
    }
    return -1;
}

/* Starts training a table from `min` or more sampled values, or as many
 * as STRCOMP_SAMPLE_BYTES holds (copied, so the keyspace may change
 * meanwhile); returns whether it did. */
static bool trainStart(size_t min) {
    if (sc.job.tr || freeGeneration() < 0) return false;
    size_t want = (size_t)strcomp_config.train_values;
    sc.job.v = zmalloc(want * sizeof(*sc.job.v));
    sc.job.len = zmalloc(want * sizeof(*sc.job.len));
    sc.job.arena = zmalloc(STRCOMP_SAMPLE_BYTES);
    bool full;
    sc.job.n = sampleValues(want, sc.job.arena, sc.job.v, sc.job.len, &full);
    sc.window_values = 0;
    if ((sc.job.n < min && !full) || sc.job.n == 0) {
        trainDrop();
        return false;
    }
    /* A candidate is judged against the current table on samples it was
     * not trained from: on its own it would win by fitting them. */
    sc.job.ntrain = sc.current >= 0 && sc.job.n >= STRCOMP_HOLDOUT ? sc.job.n - sc.job.n / STRCOMP_HOLDOUT : sc.job.n;
    sc.job.tr = symtabTrainerCreate(sc.job.v, sc.job.len, sc.job.ntrain);
    return true;
}

/* Frees what a training job holds. */
static void trainDrop(void) {
    if (sc.job.tr) symtabTrainerFree(sc.job.tr);
    zfree(sc.job.arena);
    zfree(sc.job.v);
    zfree(sc.job.len);
    memset(&sc.job, 0, sizeof(sc.job));
}

/* The bytes table `t` codes the job's samples from..to-1 in (a sample that
 * would not shrink counted plain). */
static size_t sampleCodedBytes(const symtab *t, size_t from, size_t to) {
    size_t coded = 0;
    unsigned char *out = NULL;
    for (size_t i = from; i < to; i++) {
        out = zrealloc(out, SYMTAB_ENCODE_BOUND(sc.job.len[i]) + 1);
        size_t c = symtabEncode(t, sc.job.v[i], sc.job.len[i], out) + 1;
        coded += c < sc.job.len[i] ? c : sc.job.len[i];
    }
    zfree(out);
    return coded;
}

static void *zstdAlloc(void *opaque, size_t size) {
    UNUSED(opaque);
    return zmalloc(size);
}

static void zstdFree(void *opaque, void *ptr) {
    UNUSED(opaque);
    zfree(ptr);
}

static const ZSTD_customMem zstd_mem = {zstdAlloc, zstdFree, NULL};

/* Makes zstd's contexts: magicless frames with no checksum, dictionary id
 * or content size (a long value states its length itself). */
static void zstdContexts(void) {
    if (sc.cctx) return;
    sc.cctx = ZSTD_createCCtx_advanced(zstd_mem);
    sc.dctx = ZSTD_createDCtx_advanced(zstd_mem);
    serverAssert(sc.cctx && sc.dctx);
    ZSTD_CCtx_setParameter(sc.cctx, ZSTD_c_format, ZSTD_f_zstd1_magicless);
    ZSTD_CCtx_setParameter(sc.cctx, ZSTD_c_checksumFlag, 0);
    ZSTD_CCtx_setParameter(sc.cctx, ZSTD_c_dictIDFlag, 0);
    ZSTD_CCtx_setParameter(sc.cctx, ZSTD_c_contentSizeFlag, 0);
    ZSTD_CCtx_setParameter(sc.cctx, ZSTD_c_compressionLevel, STRCOMP_ZSTD_LEVEL);
    ZSTD_DCtx_setParameter(sc.dctx, ZSTD_d_format, ZSTD_f_zstd1_magicless);
}

/* Trains long values' dictionary for `g` from the job's samples of
 * string-compression-zstd-min-size bytes or more, when there are enough;
 * else `g` has none. */
static void trainDictionary(strcompGen *g) {
    size_t min = (size_t)strcomp_config.zstd_min_size, n = 0, bytes = 0;
    if (!min) return;
    for (size_t i = 0; i < sc.job.n; i++) {
        if (sc.job.len[i] >= min) n++, bytes += sc.job.len[i];
    }
    if (n < STRCOMP_DICT_MIN_SAMPLES) return;
    unsigned char *all = zmalloc(bytes);
    size_t *sizes = zmalloc(n * sizeof(*sizes));
    n = bytes = 0;
    for (size_t i = 0; i < sc.job.n; i++) {
        if (sc.job.len[i] < min) continue;
        memcpy(all + bytes, sc.job.v[i], sc.job.len[i]);
        bytes += sizes[n++] = sc.job.len[i];
    }
    size_t cap = bytes / 4 < STRCOMP_DICT_BYTES ? bytes / 4 : STRCOMP_DICT_BYTES;
    void *dict = zmalloc(cap);
    ZDICT_fastCover_params_t params = {.k = STRCOMP_DICT_K, .d = STRCOMP_DICT_D, .f = STRCOMP_DICT_F, .accel = 1};
    params.zParams.compressionLevel = STRCOMP_ZSTD_LEVEL;
    size_t dlen = ZDICT_trainFromBuffer_fastCover(dict, cap, all, sizes, (unsigned)n, params);
    if (!ZDICT_isError(dlen)) {
        zstdContexts();
        ZSTD_compressionParameters cp = ZSTD_getCParams(STRCOMP_ZSTD_LEVEL, ZSTD_CONTENTSIZE_UNKNOWN, dlen);
        g->cdict = ZSTD_createCDict_advanced(dict, dlen, ZSTD_dlm_byCopy, ZSTD_dct_fullDict, cp, zstd_mem);
        g->ddict = ZSTD_createDDict_advanced(dict, dlen, ZSTD_dlm_byCopy, ZSTD_dct_fullDict, zstd_mem);
        serverAssert(g->cdict && g->ddict);
    } else {
        serverLog(LL_VERBOSE, "String compression: no dictionary from %zu long values (%s)", n,
                  ZDICT_getErrorName(dlen));
    }
    zfree(dict);
    zfree(sizes);
    zfree(all);
}

/* Frees a generation's dictionary, which zstd's contexts then forget. */
static void freeDictionary(int g) {
    if (sc.cctx_gen == g) {
        ZSTD_CCtx_refCDict(sc.cctx, NULL);
        sc.cctx_gen = -1;
    }
    ZSTD_freeCDict(sc.gen[g].cdict);
    ZSTD_freeDDict(sc.gen[g].ddict);
    sc.gen[g].cdict = NULL;
    sc.gen[g].ddict = NULL;
}

/* Ends a training job: the table becomes the current one, and the pass
 * starts over to recode the values of the one before; unless `force` is
 * false and it neither beats the current one by STRCOMP_ADOPT_GAIN on the
 * held-out samples nor brings long values a dictionary the current one
 * lacks, when it is dropped. Returns the generation's number, or -1. */
static int trainInstall(bool force) {
    symtab *t = symtabTrainerFinish(sc.job.tr);
    sc.job.tr = NULL;
    int g = freeGeneration();
    serverAssert(g >= 0);
    size_t raw = 0, coded = sampleCodedBytes(t, 0, sc.job.ntrain);
    for (size_t i = 0; i < sc.job.ntrain; i++) raw += sc.job.len[i];
    bool gains = true;
    size_t mine = 0, now = 0;
    if (sc.current >= 0) {
        sc.tried++;
        mine = sampleCodedBytes(t, sc.job.ntrain, sc.job.n);
        now = sampleCodedBytes(sc.gen[sc.current].table, sc.job.ntrain, sc.job.n);
        gains = force || (double)mine * STRCOMP_ADOPT_GAIN <= (double)now;
    }
    /* Only a table that takes over, or a current one without a dictionary,
     * is worth a dictionary's training. */
    if (gains || !sc.gen[sc.current].cdict) trainDictionary(&sc.gen[g]);
    if (!gains && !sc.gen[g].cdict) {
        serverLog(LL_VERBOSE, "String compression: table %d kept (%zu bytes of held-out samples coded, a new one %zu)",
                  sc.current, now, mine);
        symtabFree(t);
        trainDrop();
        return -1;
    }
    if (sc.current >= 0) sc.adopted++;
    sc.gen[g].table = t;
    sc.gen[g].trained_ratio = coded ? (double)raw / coded : 1;
    sc.current = g;
    sc.pass_backoff = 0; /* values the last table left may code with this one */
    passStart();
    serverLog(LL_VERBOSE, "String compression: table %d trained from %zu values (%.3f)", g, sc.job.n,
              sc.gen[g].trained_ratio);
    trainDrop();
    return g;
}

/* Runs a training job's steps for up to `budget_us` (all of it when
 * negative); returns whether it ended (trainInstall's `force` when it did). */
static bool trainSteps(long long budget_us, bool force) {
    monotime start = getMonotonicUs();
    while (!symtabTrainerStep(sc.job.tr, STRCOMP_TRAIN_STEP)) {
        if (budget_us >= 0 && (long long)elapsedUs(start) >= budget_us) return false;
    }
    trainInstall(force);
    return true;
}

/* Whether enough values were coded since the last training to try a
 * candidate table. */
static bool retryDue(void) {
    return sc.window_values >= (unsigned long long)strcomp_config.train_values * STRCOMP_RETRY_WINDOW;
}

static void freeUnusedTables(void) {
    for (int g = 0; g < STRCOMP_GENERATIONS; g++) {
        if (g == sc.current || !sc.gen[g].table) continue;
        if (genValues(&sc.gen[g])) continue;
        symtabFree(sc.gen[g].table);
        sc.gen[g].table = NULL;
        freeDictionary(g);
    }
}

/* --- The background pass --- */

static void passStart(void) {
    sc.pass_running = 1;
    sc.pass_db = 0;
    sc.pass_cursor = 0;
    sc.pass_start_dirty = server.dirty;
    sc.pass_tried = sc.pass_coded = sc.pass_hot = 0;
    sc.pass_again_ms = 0;
}

/* Whether a plain value has gone untouched long enough to be coded. */
static bool cold(const robj *o) {
    if (sc.pass_all || lrulfu_isUsingLFU()) return true;
    return lru_getIdleSecs(o->lru) >= STRCOMP_COLD_SECONDS;
}

/* At a pass's end: how long the next one waits (see STRCOMP_PASS_FUTILE). */
static void passBackoff(void) {
    if (sc.pass_coded * STRCOMP_PASS_FUTILE < sc.pass_tried) {
        if (sc.pass_backoff < STRCOMP_PASS_BACKOFF_MAX) sc.pass_backoff++;
    } else {
        sc.pass_backoff = 0;
    }
}

typedef struct {
    sds keys[STRCOMP_BATCH];
    int n;
} strcompBatch;

/* Whether the pass should code (or recode) a stored value; a plain one
 * written lately is counted in pass_hot when `count`. */
static bool wantsCoding(const robj *o, bool count) {
    if (o->refcount != 1) return false;
    if (o->encoding == OBJ_ENCODING_COMPRESSED) return genOf(payloadOf(o)) != &sc.gen[sc.current];
    if (!eligible(o)) return false;
    if (cold(o)) return true;
    if (count) sc.pass_hot++;
    return false;
}

static void gatherKey(void *privdata, void *entry, int didx) {
    UNUSED(didx);
    strcompBatch *b = privdata;
    robj *o = entry;
    if (b->n < STRCOMP_BATCH && wantsCoding(o, true)) b->keys[b->n++] = sdsdup(objectGetKey(o));
}

/* Codes one gathered key's value again, if it is still there and wants it. */
static void recodeKey(serverDb *db, sds key) {
    robj *o = dbFind(db, key);
    if (!o || !wantsCoding(o, false)) return;
    robj *plain = o->encoding == OBJ_ENCODING_COMPRESSED ? strcompDecodeObject(o) : NULL;
    const unsigned char *s = plain ? objectGetVal(plain) : objectGetVal(o);
    size_t len = plain ? sdslen(objectGetVal(plain)) : sdslen(objectGetVal(o));
    robj *c = compressBytes(s, len);
    if (!plain) {
        sc.pass_tried++;
        sc.pass_coded += c != NULL;
    }
    if (!c && !plain) return;
    robj *val = c ? c : plain;
    if (c && plain) decrRefCount(plain);
    val->lru = o->lru;
    robj keyobj;
    initStaticStringObject(keyobj, key);
    dbReplaceValue(db, &keyobj, &val);
    sc.recoded++;
}

/* One step of the pass: a scan call and the keys it gave; returns whether
 * the pass is over. */
static bool passStep(void) {
    while (sc.pass_db < server.dbnum && (!server.db[sc.pass_db] || !kvstoreSize(server.db[sc.pass_db]->keys))) {
        sc.pass_db++;
        sc.pass_cursor = 0;
    }
    if (sc.pass_db >= server.dbnum) return true;
    serverDb *db = server.db[sc.pass_db];
    strcompBatch b = {.n = 0};
    sc.pass_cursor = kvstoreScan(db->keys, sc.pass_cursor, -1, -1, gatherKey, NULL, &b);
    for (int i = 0; i < b.n; i++) {
        recodeKey(db, b.keys[i]);
        sdsfree(b.keys[i]);
    }
    if (sc.pass_cursor == 0) sc.pass_db++;
    return false;
}

static void runPass(long long budget_us) {
    monotime start = getMonotonicUs();
    while (sc.pass_running) {
        if (passStep()) {
            sc.pass_running = 0;
            /* Writes made while it ran, behind its cursor, wait for the next. */
            sc.passes++;
            passBackoff();
            if (sc.pass_hot) sc.pass_again_ms = server.mstime + STRCOMP_COLD_SECONDS * 1000;
            break;
        }
        if (budget_us >= 0 && (long long)elapsedUs(start) >= budget_us) break;
    }
}

static long long keyCount(void) {
    long long n = 0;
    for (int j = 0; j < server.dbnum; j++) {
        if (server.db[j]) n += kvstoreSize(server.db[j]->keys);
    }
    return n;
}

/* One cron call's work: training steps, then the pass, within the budget. */
static void cronWork(void) {
    monotime start = getMonotonicUs();
    long long budget = strcomp_config.cycle_us;
    if (sc.job.tr) {
        if (!trainSteps(budget, false)) return;
    } else if ((sc.current < 0 || retryDue()) && server.unixtime >= sc.next_train &&
               keyCount() >= strcomp_config.train_values) {
        bool started = trainStart((size_t)strcomp_config.train_values);
        sc.next_train = server.unixtime + (started ? STRCOMP_RETRAIN_SECONDS : STRCOMP_TRAIN_RETRY_SECONDS);
        return;
    }
    if (sc.current < 0) return;
    if (!sc.pass_running && (server.dirty - sc.pass_start_dirty >= (long long)STRCOMP_PASS_DIRTY << sc.pass_backoff ||
                             (sc.pass_again_ms && server.mstime >= sc.pass_again_ms)))
        passStart();
    long long left = budget - (long long)elapsedUs(start);
    if (left > 0) runPass(left);
}

void strcompCron(void) {
    in_main_thread = true;
    freeUnusedTables();
    if (!strcomp_config.enabled) {
        if (sc.job.tr) trainDrop();
        return;
    }
    if (hasActiveChildProcess()) return;
    monotime start = getMonotonicUs();
    cronWork();
    long long elapsed = (long long)elapsedUs(start);
    latencyAddSampleIfNeeded("string-compression-cycle", elapsed);
    sc.cycle_us_max = elapsed > sc.cycle_us_max ? elapsed : sc.cycle_us_max;
}

/* --- Introspection --- */

typedef struct {
    unsigned long long values, raw, coded;
    size_t table_bytes;
    int tables, dictionaries;
} strcompTotals;

static strcompTotals totals(void) {
    strcompTotals t = {0};
    for (int g = 0; g < STRCOMP_GENERATIONS; g++) {
        if (!sc.gen[g].table) continue;
        t.tables++;
        t.values += genValues(&sc.gen[g]);
        t.raw += genRawBytes(&sc.gen[g]);
        t.coded += genCodedBytes(&sc.gen[g]);
        t.table_bytes += symtabBytes(sc.gen[g].table);
        if (!sc.gen[g].cdict) continue;
        t.dictionaries++;
        t.table_bytes += ZSTD_sizeof_CDict(sc.gen[g].cdict) + ZSTD_sizeof_DDict(sc.gen[g].ddict);
    }
    return t;
}

char *strcompInfo(char *info) {
    strcompTotals t = totals();
    return sdscatprintf(info,
                        "string_compression_values:%llu\r\n"
                        "string_compression_raw_bytes:%llu\r\n"
                        "string_compression_bytes:%llu\r\n"
                        "string_compression_tables:%d\r\n"
                        "string_compression_dictionaries:%d\r\n"
                        "string_compression_table_bytes:%zu\r\n"
                        "string_compression_current_table:%d\r\n"
                        "string_compression_candidates:%llu\r\n"
                        "string_compression_candidates_adopted:%llu\r\n"
                        "string_compression_passes:%llu\r\n"
                        "string_compression_pass_wait:%lld\r\n"
                        "string_compression_cycle_us_max:%lld\r\n",
                        t.values, t.raw, t.coded, t.tables, t.dictionaries, t.table_bytes, sc.current, sc.tried, sc.adopted,
                        sc.passes, (long long)STRCOMP_PASS_DIRTY << sc.pass_backoff, sc.cycle_us_max);
}

/* DEBUG STRCOMP TRAIN: trains a new table now, from any number of
 * values. DEBUG STRCOMP SWEEP: runs the background pass to its end. */
void strcompDebugCommand(client *c) {
    if (c->argc < 3) {
        addReplyError(c, "DEBUG STRCOMP TRAIN|TRY|SWEEP");
        return;
    }
    const char *sub = objectGetVal(c->argv[2]);
    if (!strcasecmp(sub, "train") || !strcasecmp(sub, "try")) {
        /* TRY trains a candidate as the cron does, kept only if it beats the current table. */
        if (sc.job.tr) trainDrop();
        if (!trainStart(1)) {
            addReplyError(c, "no value to train from, or no free table");
            return;
        }
        trainSteps(-1, !strcasecmp(sub, "train"));
        sc.next_train = server.unixtime + STRCOMP_RETRAIN_SECONDS; /* the cron's next try waits as after its own */
        addReplyLongLong(c, sc.current);
    } else if (!strcasecmp(sub, "sweep")) {
        if (sc.current >= 0 && strcomp_config.enabled) {
            passStart();
            sc.pass_all = true;
            runPass(-1);
            sc.pass_all = false;
        }
        freeUnusedTables();
        addReplyLongLong(c, (long long)sc.recoded);
    } else {
        addReplyError(c, "DEBUG STRCOMP TRAIN|TRY|SWEEP");
    }
}
