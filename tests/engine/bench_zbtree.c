/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * The engine's benchmark: bytes per member from the allocator, against the
 * targets of the engine's issue, and nanoseconds per operation at one
 * million members (median of three runs). Bytes are exact: zbtAllocSize()
 * sums jemalloc's usable sizes, and the process's allocator total is
 * printed beside it as a cross-check.
 *
 *   make bench-engine            (BENCH_SCALE=0.1 for a tenth of the sizes)
 *   make test-engine-memory      (the memory targets alone; exits 1 if one
 *                                 is missed: part of make test)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "listpack.h"
#include "zbtree.h"
#include "zmalloc.h"

static uint64_t rng = 0x2545F4914F6CDD1DULL;

static uint64_t next64(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void shuffle(long *v, long n) {
    for (long i = n - 1; i > 0; i--) {
        long j = (long)(next64() % (uint64_t)(i + 1)), x = v[i];
        v[i] = v[j];
        v[j] = x;
    }
}

static long *sequence(long n) {
    long *v = malloc(sizeof(long) * n);
    for (long i = 0; i < n; i++) v[i] = i;
    return v;
}

static int failures;

static void report(const char *what, double value, double target, const char *unit) {
    int ok = value <= target;
    if (!ok) failures++;
    printf("  %-58s %8.2f %s   (target <= %.2f: %s)\n", what, value, unit, target, ok ? "met" : "MISSED");
}

/* --- Memory --- */

static double wOneShape(long n, int random) {
    long *order = sequence(n);
    if (random) shuffle(order, n);
    size_t before = zmalloc_used_memory();
    zbt *t = zbtCreate(0);
    char m[32];
    double start = now();
    for (long i = 0; i < n; i++) {
        long k = order[i];
        zbtInsert(t, (double)k, (unsigned char *)m, (size_t)snprintf(m, sizeof(m), "m:%ld", k));
    }
    double secs = now() - start;
    double perMember = (double)zbtAllocSize(t) / n;
    zbtStats s;
    zbtGetStats(t, &s);
    printf("  %ld members m:{i}, score i, %s order: %.2f B/member (allocator total %.2f), %.0f inserts/s\n", n,
           random ? "random" : "sequential", perMember, (double)(zmalloc_used_memory() - before) / n, n / secs);
    printf("    leaves %zu (%.1f%% full), inner %zu, height %zu; per member: leaves %.2f, inner %.2f, index %.2f\n",
           s.leaves, 100.0 * s.payloadUsed / (s.leaves * (ZBT_LEAF_BYTES - 32.0)), s.inners, s.height,
           (double)s.leafBytes / n, (double)s.innerBytes / n, (double)s.indexBytes / n);
    zbtFree(t);
    free(order);
    return perMember;
}

static void randomMember(unsigned char *m, size_t len) {
    static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    for (size_t i = 0; i < len; i++) m[i] = (unsigned char)alnum[next64() % 62];
}

static double randomShape(long n, size_t len) {
    size_t before = zmalloc_used_memory();
    zbt *t = zbtCreate(0);
    unsigned char m[64];
    for (long i = 0; i < n; i++) {
        randomMember(m, len);
        double score = (double)(next64() >> 11) / 9007199254740992.0 * 1e6;
        if (zbtInsert(t, score, m, len) != ZBT_OK) i--;
    }
    double perMember = (double)zbtAllocSize(t) / n;
    printf("  %ld random %zu-byte members, random double scores: %.2f B/member (allocator total %.2f)\n", n, len,
           perMember, (double)(zmalloc_used_memory() - before) / n);
    zbtFree(t);
    return perMember;
}

/* The same entries as upstream's listpack encoding holds them: member,
 * then score (an integer when it is one, else its shortest text). */
static size_t listpackBytes(unsigned char **members, size_t len, const double *scores, long n) {
    unsigned char *lp = lpNew(0);
    for (long i = 0; i < n; i++) {
        lp = lpAppend(lp, members[i], (uint32_t)len);
        if (floor(scores[i]) == scores[i] && fabs(scores[i]) < 1e15) {
            lp = lpAppendInteger(lp, (long long)scores[i]);
        } else {
            char buf[32];
            int l = snprintf(buf, sizeof(buf), "%.17g", scores[i]);
            lp = lpAppend(lp, (unsigned char *)buf, (uint32_t)l);
        }
    }
    size_t bytes = zmalloc_size(lp);
    lpFree(lp);
    return bytes;
}


static int cmpEntry(const void *a, const void *b) {
    const double *x = a, *y = b;
    if (*x != *y) return *x < *y ? -1 : 1;
    return memcmp(x + 1, y + 1, 16);
}

/* Our bytes over the listpack's for the same members, as a set grows past
 * the listpack limit: the 128 listpack entries converted in order (bulk
 * appends, as the server converts), the 129th and the rest inserted in
 * random order. Returns the worst ratio up to maxN. */
static double listpackSweep(long maxN, size_t len, int integerScores, double *at129) {
    unsigned char **members = malloc(sizeof(unsigned char *) * maxN);
    double *scores = malloc(sizeof(double) * maxN);
    double worst = 0;
    long worstN = 0, have = 0, n = 129;
    zbt *t = zbtCreate(0);
    struct {
        double score;
        unsigned char m[16];
    } first[128];
    while (have < maxN) {
        unsigned char m[16];
        randomMember(m, len);
        double s = integerScores ? (double)(next64() % 1000000) : (double)(next64() >> 11) / 9007199254740992.0;
        if (have < 128) {
            first[have].score = s;
            memset(first[have].m, 0, 16);
            memcpy(first[have].m, m, len);
            if (++have == 128) {
                qsort(first, 128, sizeof(first[0]), cmpEntry);
                for (int i = 0; i < 128; i++) zbtAppend(t, first[i].score, first[i].m, len);
                zbtAppendDone(t);
            }
            continue;
        }
        if (zbtInsert(t, s, m, len) != ZBT_OK) continue;
        if (++have < n) continue;

        /* The listpack holds them in order: walk the tree for it. */
        zbtCursor *c = malloc(sizeof(*c));
        long i = 0;
        for (int ok = zbtFirst(t, c); ok; ok = zbtNext(c), i++) {
            members[i] = malloc(len);
            memcpy(members[i], c->member, len);
            scores[i] = c->score;
        }
        free(c);
        double ratio = (double)zbtAllocSize(t) / listpackBytes(members, len, scores, have);
        if (getenv("BENCH_CURVE")) {
            zbtStats st;
            zbtGetStats(t, &st);
            printf("    %ld: ours %zu (leaves %zu in %zu, inner %zu, index %zu, other %zu), listpack %zu: %.2fx\n", have,
                   zbtAllocSize(t), st.leafBytes, st.leaves, st.innerBytes, st.indexBytes, st.otherBytes,
                   listpackBytes(members, len, scores, have), ratio);
        }
        if (n == 129) *at129 = ratio;
        if (ratio > worst) {
            worst = ratio;
            worstN = n;
        }
        for (long j = 0; j < have; j++) free(members[j]);
        n = n < 300 ? n + 1 : (long)(n * 1.05);
    }
    zbtFree(t);
    printf("  %zu-byte members, %s scores, 129..%ld members: at 129 %.2fx, worst %.2fx (at %ld)\n", len,
           integerScores ? "integer" : "double", maxN, *at129, worst, worstN);
    free(members);
    free(scores);
    return worst;
}

/* --- Speed --- */

static int cmpDouble(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median3(double *v) {
    qsort(v, 3, sizeof(double), cmpDouble);
    return v[1];
}

enum { OP_INSERT, OP_SCORE, OP_RANK, OP_ATRANK, OP_ITER100, OP_DELETE, OP_COUNT };
static const char *opName[] = {"insert (random order)", "score of a member", "rank of a member",
                               "entry at a rank", "first in a score range + 99 next", "delete (random order)"};

static void speedRun(long n, double *ns) {
    long *order = sequence(n);
    shuffle(order, n);
    zbt *t = zbtCreate(0);
    char m[32];
    zbtCursor *c = malloc(sizeof(*c));
    double start = now();
    for (long i = 0; i < n; i++)
        zbtInsert(t, (double)(order[i] * 7 % n), (unsigned char *)m, (size_t)snprintf(m, sizeof(m), "member:%ld", order[i]));
    ns[OP_INSERT] = (now() - start) * 1e9 / n;

    shuffle(order, n);
    double sink = 0;
    start = now();
    for (long i = 0; i < n; i++) {
        double s;
        zbtScore(t, (unsigned char *)m, (size_t)snprintf(m, sizeof(m), "member:%ld", order[i]), &s);
        sink += s;
    }
    ns[OP_SCORE] = (now() - start) * 1e9 / n;

    start = now();
    for (long i = 0; i < n; i++) {
        unsigned long r;
        zbtRank(t, (unsigned char *)m, (size_t)snprintf(m, sizeof(m), "member:%ld", order[i]), 0, &r);
        sink += r;
    }
    ns[OP_RANK] = (now() - start) * 1e9 / n;

    start = now();
    for (long i = 0; i < n; i++) {
        zbtAtRank(t, (unsigned long)order[i], c);
        sink += c->score;
    }
    ns[OP_ATRANK] = (now() - start) * 1e9 / n;

    long iters = n / 10;
    start = now();
    for (long i = 0; i < iters; i++) {
        zbtScoreRange r = {(double)order[i], INFINITY, 0, 0};
        if (!zbtFirstInScoreRange(t, &r, c)) continue;
        for (int k = 0; k < 99 && zbtNext(c); k++) sink += c->score;
    }
    ns[OP_ITER100] = (now() - start) * 1e9 / iters;

    start = now();
    for (long i = 0; i < n; i++)
        zbtDelete(t, (unsigned char *)m, (size_t)snprintf(m, sizeof(m), "member:%ld", order[i]), NULL);
    ns[OP_DELETE] = (now() - start) * 1e9 / n;
    if (sink == 42) printf(" ");
    free(c);
    zbtFree(t);
    free(order);
}

static void speedReport(long n) {
    double runs[OP_COUNT][3];
    for (int r = 0; r < 3; r++) {
        double ns[OP_COUNT];
        speedRun(n, ns);
        for (int op = 0; op < OP_COUNT; op++) runs[op][r] = ns[op];
    }
    printf("\nSpeed at %ld members (ns per operation, median of 3 runs)\n", n);
    for (int op = 0; op < OP_COUNT; op++) printf("  %-40s %8.0f ns\n", opName[op], median3(runs[op]));
}

/* The slowest single insert while one set grows to n members (W1's
 * shape: "m:<i>" with score i), and the largest growth of the tree's bytes
 * in one insert: what a client waits for at worst, and whether some table
 * is copied whole as it grows (the leaf table was, 28 MiB at 100M). */
static void worstInsert(long n) {
    zbt *t = zbtCreate(0);
    unsigned char m[32];
    double worst = 0;
    long worstAt = 0, growAt = 0;
    size_t bytes = zbtAllocSize(t), grow = 0;
    double start = now();
    for (long i = 0; i < n; i++) {
        size_t len = (size_t)snprintf((char *)m, sizeof(m), "m:%ld", i);
        double t0 = now();
        zbtInsert(t, (double)i, m, len);
        double dt = now() - t0;
        if (dt > worst) worst = dt, worstAt = i;
        size_t b = zbtAllocSize(t);
        if (b > bytes && b - bytes > grow) grow = b - bytes, growAt = i;
        bytes = b;
    }
    printf("  %ld inserts in %.1f s: slowest %.0f us (at %ld), largest growth in one insert %zu bytes (at %ld)\n",
           n, now() - start, worst * 1e6, worstAt, grow, growAt);
    zbtFree(t);
}

int main(void) {
    uint8_t seed[16] = "engine benchmark";
    zbtSetHashSeed(seed);
    const char *env = getenv("BENCH_SCALE");
    double scale = env ? atof(env) : 1.0;

    printf("Memory (bytes per member, everything included: leaves, inner nodes, index, long members)\n");
    if (getenv("BENCH_WORST_INSERT")) {
        worstInsert(atol(getenv("BENCH_WORST_INSERT")));
        return 0;
    }
    if (getenv("BENCH_CURVE")) {
        double at;
        listpackSweep(2000, 10, 1, &at);
        return 0;
    }
    double w1 = wOneShape((long)(10000000 * scale), 0);
    double w1r = wOneShape((long)(10000000 * scale), 1);
    double r20 = randomShape((long)(5000000 * scale), 20);
    double at129i = 0, at129d = 0;
    double worstI = listpackSweep((long)(100000 * (scale < 1 ? 1 : scale)), 10, 1, &at129i);
    double worstD = listpackSweep((long)(100000 * (scale < 1 ? 1 : scale)), 10, 0, &at129d);
    printf("\nTargets\n");
    report("W1 shape, in order", w1, 24, "B/member");
    report("W1 shape, random order", w1r, 30, "B/member");
    report("5M random 20-byte members, random doubles, random order", r20, 48, "B/member");
    report("129 members of 10 bytes vs listpack (integer scores)", at129i, 1.6, "x");
    report("129 members of 10 bytes vs listpack (double scores)", at129d, 1.6, "x");
    report("worst ratio to listpack, 129..100,000 members (integer)", worstI, 1.6, "x");
    report("worst ratio to listpack, 129..100,000 members (double)", worstD, 1.6, "x");
    if (!getenv("BENCH_MEMORY_ONLY")) {
        speedReport((long)(1000000 * (scale < 1 ? 1 : scale)));
        printf("\nThe slowest insert (BENCH_WORST_INSERT=<members> runs this alone)\n");
        worstInsert((long)(100000000 * scale));
    }
    printf("\n%s\n", failures ? "Some targets were missed." : "All memory targets met.");
    return failures ? 1 : 0;
}
