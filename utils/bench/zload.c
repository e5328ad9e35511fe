/* zload: the load generator of the benchmark suite (utils/bench/run).
 *
 * A small RESP client built on the bundled libvalkey (9.x's renamed hiredis):
 * it connects and parses replies (with reply functions that build no
 * objects), commands are
 * written straight into a buffer. It streams: commands are generated as the
 * socket takes them and replies are consumed as they arrive, so a pipeline
 * of 250,000 commands never sits in the client's memory at once.
 *
 * Modes (one per invocation; results go to stdout, one JSON object, or to
 * the CSV file named by --csv):
 *
 *   zadd1   one key, one ZADD per member, in pipelines of --pipeline commands
 *           (the client waits for every reply of a pipeline before it sends
 *           the next). Members are m:{i} (--mlen 0) or random alphanumeric
 *           strings of --mlen bytes; scores are i (--order seq) or random
 *           integers below --score-max (--order rand). With --sample S an
 *           `INFO memory cpu` rides in the stream after every S inserts and a
 *           CSV row is written when its reply arrives. --op sadd sends
 *           SADD key i (--order seq) or a random integer below --score-max
 *           instead, one member per command.              (W1, W4, W5, W7)
 *   w3      --n inserts of random 24-character lowercase strings into one key
 *           (--type set|hash|zset|zset-rand), each followed by
 *           `MEMORY USAGE key SAMPLES 0`; CSV rows n,bytes.         (W3)
 *   zsets   --keys keys zk:{i}, each made by one ZADD of between --min and
 *           --max random members of --mlen bytes with random scores.  (W4)
 *   bench   closed loop: --conns connections, each sending --pipeline
 *           operations at a time and waiting for all their replies, for
 *           --warmup then --seconds seconds. Reports ops/s (a pipeline counts
 *           for the part of its round trip inside the window), latency
 *           percentiles of a pipeline round trip, and the server's CPU time
 *           over the measured window (INFO cpu on a separate connection, or
 *           with --pid from /proc). The set operations (sismember … spop) work
 *           on the set --key of members 0 … n−1 of --shape (mode sadd), and
 *           report the members their replies held (elements). With --sync
 *           DIR --parties N the clients of one turn keep loading their
 *           servers until each has had back the batches it sent before the
 *           end of its window (see sync_mark). With --limit L the run sends
 *           L operations in all and its window is the whole run, from the
 *           first batch to the last reply (no warm-up, no --seconds): SADD
 *           of L new members, say, however long they take.     (W4, W5, W7)
 *   sadd    one set --key of --n members of --shape (int: distinct random
 *           integers below 10^8; seq: 0 … n−1; str: distinct random
 *           24-character lowercase strings), members --offset … --offset+n−1
 *           of the shape, in SADDs of --chunk members, --pipeline SADDs at
 *           a time.                                                  (W7)
 *   scan    one whole SSCAN of --key, COUNT 100, on one connection; writes
 *           its cursors to --csv (bench --op sscan --cursors starts its scans
 *           spread over them) and reports its time.                  (W7)
 *   zkeys   --keys keys zk:{i}, each of --n members m:{j} (j = 0 … n−1) with
 *           random integer scores, in ZADDs of --chunk members (0: the whole
 *           key in one ZADD), --pipeline ZADDs at a time.           (W8)
 *   bgsave  runs one operation (--op, e.g. keys-zscore or keys-zincrby) on one
 *           connection, --pipeline operations at a time, paced at --rate
 *           operations/s (0: as fast as the replies come back); after
 *           --warmup seconds of it sends BGSAVE on a second connection and
 *           counts the operations sent until the save ends: when the file
 *           --rdb appears (the child renames its temporary file as its last
 *           step; without --rdb, when INFO says rdb_bgsave_in_progress:0).
 *           With --limit L it sends no more than L operations during the
 *           save (then waits for the save's end without load). With --pid
 *           (the server's process id, on this machine) it also samples, every
 *           20 ms while the child lives, the child's Private_Dirty from
 *           /proc/<child>/smaps_rollup (what rdb_last_cow_size reports, but
 *           the child itself reads it only every 1024 keys and at its end,
 *           after it may have handed pages back) and the server's RSS.
 *           Then the load stops, and once the parent has reaped the child it
 *           reports rdb_last_cow_size, used_memory before and during the
 *           save, the save's duration and the fork time.            (W8)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <valkey/valkey.h>

/* ---------- small helpers ---------- */

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("zload: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* splitmix64: a tiny, fast, well-mixed generator; a seed gives one stream. */
typedef struct {
    uint64_t s;
} rng_t;

static uint64_t rng_next(rng_t *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, n). */
static uint64_t rng_below(rng_t *r, uint64_t n) {
    return (uint64_t)(((unsigned __int128)rng_next(r) * n) >> 64);
}

static const char ALNUM[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

static void rng_alnum(rng_t *r, char *dst, int len) {
    for (int i = 0; i < len; i++) dst[i] = ALNUM[rng_below(r, 62)];
}

static void rng_lower(rng_t *r, char *dst, int len) {
    for (int i = 0; i < len; i++) dst[i] = 'a' + rng_below(r, 26);
}

/* Decimal digits of v into dst (no terminator); returns the length. */
static int fmt_ll(char *dst, long long v) {
    char tmp[24];
    int n = 0, len = 0;
    unsigned long long u = v < 0 ? -(unsigned long long)v : (unsigned long long)v;
    do {
        tmp[n++] = '0' + u % 10;
        u /= 10;
    } while (u);
    if (v < 0) dst[len++] = '-';
    while (n) dst[len++] = tmp[--n];
    return len;
}

/* ---------- output buffer: RESP commands written by hand ---------- */

typedef struct {
    char *p;
    size_t len; /* bytes held */
    size_t off; /* bytes already written to the socket */
    size_t cap;
} buf_t;

static void buf_need(buf_t *b, size_t n) {
    if (b->off && b->off == b->len) b->off = b->len = 0;
    if (b->len + n <= b->cap) return;
    if (b->off) { /* move the unsent tail to the front first */
        memmove(b->p, b->p + b->off, b->len - b->off);
        b->len -= b->off;
        b->off = 0;
        if (b->len + n <= b->cap) return;
    }
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n) cap *= 2;
    b->p = realloc(b->p, cap);
    if (!b->p) die("out of memory");
    b->cap = cap;
}

static inline size_t buf_pending(const buf_t *b) { return b->len - b->off; }

static void put_hdr(buf_t *b, char kind, long long n) {
    buf_need(b, 24);
    b->p[b->len++] = kind;
    b->len += fmt_ll(b->p + b->len, n);
    b->p[b->len++] = '\r';
    b->p[b->len++] = '\n';
}

static void put_argc(buf_t *b, int argc) { put_hdr(b, '*', argc); }

static void put_arg(buf_t *b, const char *s, size_t n) {
    put_hdr(b, '$', (long long)n);
    buf_need(b, n + 2);
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len++] = '\r';
    b->p[b->len++] = '\n';
}

static void put_str(buf_t *b, const char *s) { put_arg(b, s, strlen(s)); }

static void put_ll(buf_t *b, long long v) {
    char tmp[24];
    put_arg(b, tmp, fmt_ll(tmp, v));
}

/* "prefix{v}" as one argument, e.g. m:42. */
static void put_prefixed(buf_t *b, const char *prefix, long long v) {
    char tmp[64];
    size_t pl = strlen(prefix);
    memcpy(tmp, prefix, pl);
    put_arg(b, tmp, pl + fmt_ll(tmp + pl, v));
}

/* ---------- set members (W7): member i of a shape, distinct for distinct i ---------- */

/* The shapes of --shape: int, distinct pseudo-random integers below 10^8; seq, the
 * integer i itself; str, distinct pseudo-random 24-character lowercase strings. */
enum { SHAPE_INT, SHAPE_SEQ, SHAPE_STR };
static const char *shape_names[] = {"int", "seq", "str", NULL};
#define INT_RANGE 100000000LL

/* splitmix64's finalizer: a bijection of 64-bit values. */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A pseudo-random permutation of [0, INT_RANGE): a 4-round Feistel network on
 * 28 bits, applied again until the value falls in range (cycle walking keeps it
 * a bijection of the range). Member i of shape int is perm_int(i), so the first n
 * indices give n distinct random integers and any index past them a non-member. */
static long long perm_int(uint64_t key, long long i) {
    uint64_t x = (uint64_t)i;
    do {
        uint64_t l = x >> 14, r = x & 0x3fff;
        for (uint64_t k = 0; k < 4; k++) {
            uint64_t f = mix64(key + (k << 32) + r) & 0x3fff;
            uint64_t t = r;
            r = l ^ f;
            l = t;
        }
        x = l << 14 | r;
    } while (x >= (uint64_t)INT_RANGE);
    return (long long)x;
}

/* Member i of shape str: 10 letters drawn from a generator seeded with x = mix64(i ^ key),
 * then x itself in 14 base-26 digits (26^14 > 2^64), so distinct i give distinct strings. */
static void member_str(uint64_t key, long long i, char *dst) {
    uint64_t x = mix64((uint64_t)i ^ key);
    rng_t r = {x};
    rng_lower(&r, dst, 10);
    for (int j = 10; j < 24; j++) dst[j] = 'a' + x % 26, x /= 26;
}

static void put_member(buf_t *b, int shape, uint64_t key, long long i) {
    if (shape == SHAPE_STR) {
        char m[24];
        member_str(key, i, m);
        put_arg(b, m, 24);
    } else {
        if (shape == SHAPE_INT && (i < 0 || i >= INT_RANGE)) die("member index %lld is past the int shape's range", i);
        put_ll(b, shape == SHAPE_INT ? perm_int(key, i) : i);
    }
}

static int shape_index(const char *name) {
    for (int i = 0; shape_names[i]; i++)
        if (!strcmp(name, shape_names[i])) return i;
    die("--shape must be int, seq or str");
    return -1;
}

/* ---------- replies: parsed by libvalkey, no objects built ---------- */

typedef struct {
    int want_str;   /* copy the next top-level string reply into str */
    char *str;      /* that copy, NUL-terminated */
    size_t str_cap;
    int type;       /* type of the last top-level reply */
    long long integer;
    long long int_sum;  /* sum of the top-level integer replies */
    long long elements; /* strings inside arrays (members of SMEMBERS, SSCAN, ...) */
    buf_t *collect; /* when set: the first string of each reply (a bulk string reply itself, or
                     * element 0 of an array reply) is appended here, as a 4-byte length and the bytes */
    long long errors, nils;
    char errmsg[256];
} capture_t;

static char dummy_object;
#define DUMMY ((void *)&dummy_object)

static void cap_top(const valkeyReadTask *t, int type) {
    if (!t->parent) ((capture_t *)t->privdata)->type = type;
}

static void *on_string(const valkeyReadTask *t, char *s, size_t len) {
    capture_t *c = t->privdata;
    if (t->type == VALKEY_REPLY_ERROR) {
        if (!c->errors) snprintf(c->errmsg, sizeof c->errmsg, "%.*s", (int)(len > 200 ? 200 : len), s);
        c->errors++;
    }
    int first = !t->parent || (!t->parent->parent && t->idx == 0);
    if (c->collect && first && t->type != VALKEY_REPLY_ERROR) {
        uint32_t n32 = (uint32_t)len;
        buf_need(c->collect, len + 4);
        memcpy(c->collect->p + c->collect->len, &n32, 4);
        memcpy(c->collect->p + c->collect->len + 4, s, len);
        c->collect->len += len + 4;
    } else if (t->parent) {
        c->elements++;
    }
    if (!t->parent) {
        c->type = t->type;
        if (c->want_str) {
            if (c->str_cap < len + 1) {
                c->str_cap = len + 1;
                c->str = realloc(c->str, c->str_cap);
                if (!c->str) die("out of memory");
            }
            memcpy(c->str, s, len);
            c->str[len] = '\0';
        }
    }
    return DUMMY;
}

static void *on_array(const valkeyReadTask *t, size_t n) {
    (void)n;
    cap_top(t, t->type);
    return DUMMY;
}

static void *on_integer(const valkeyReadTask *t, long long v) {
    if (!t->parent) ((capture_t *)t->privdata)->integer = v, ((capture_t *)t->privdata)->int_sum += v;
    cap_top(t, VALKEY_REPLY_INTEGER);
    return DUMMY;
}

static void *on_double(const valkeyReadTask *t, double d, char *s, size_t len) {
    (void)d, (void)s, (void)len;
    cap_top(t, VALKEY_REPLY_DOUBLE);
    return DUMMY;
}

static void *on_nil(const valkeyReadTask *t) {
    if (!t->parent) ((capture_t *)t->privdata)->nils++;
    cap_top(t, VALKEY_REPLY_NIL);
    return DUMMY;
}

static void *on_bool(const valkeyReadTask *t, int v) {
    (void)v;
    cap_top(t, VALKEY_REPLY_BOOL);
    return DUMMY;
}

static void on_free(void *o) { (void)o; }

static valkeyReplyObjectFunctions no_objects = {on_string, on_array, on_integer, on_double, on_nil, on_bool, on_free};

/* ---------- connections ---------- */

typedef struct {
    valkeyContext *ctx;
    int fd;
    valkeyReader *rd;
    capture_t cap;
    buf_t out;
    long long pending;   /* replies still to come for the current batch */
    double t_sent;       /* when the current batch was sent */
    int units;           /* operations in the current batch */
    long long elem_mark; /* cap.elements when the current batch was sent */
    int want_out;        /* EPOLLOUT registered */
    int done;
} conn_t;

static const char *g_host = "127.0.0.1";
static int g_port = 6379;

static void conn_open(conn_t *c) {
    memset(c, 0, sizeof *c);
    c->ctx = valkeyConnect(g_host, g_port);
    if (!c->ctx || c->ctx->err) die("cannot connect to %s:%d: %s", g_host, g_port, c->ctx ? c->ctx->errstr : "?");
    c->fd = c->ctx->fd;
    int fl = fcntl(c->fd, F_GETFL);
    fcntl(c->fd, F_SETFL, fl | O_NONBLOCK);
    c->rd = valkeyReaderCreateWithFunctions(&no_objects);
    if (!c->rd) die("out of memory");
    c->rd->privdata = &c->cap;
}

static void conn_close(conn_t *c) {
    valkeyReaderFree(c->rd);
    valkeyFree(c->ctx); /* closes the socket */
    free(c->out.p);
    free(c->cap.str);
}

/* Writes what the socket takes now. Returns 0, or -1 when the peer is gone. */
static int conn_flush(conn_t *c) {
    while (buf_pending(&c->out)) {
        ssize_t w = write(c->fd, c->out.p + c->out.off, buf_pending(&c->out));
        if (w > 0) {
            c->out.off += w;
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        return -1;
    }
    c->out.off = c->out.len = 0;
    return 0;
}

/* Reads what the socket holds now (one read). Returns bytes, 0 when nothing
 * was there, dies when the server closed the connection. */
static ssize_t conn_fill(conn_t *c) {
    char tmp[16384];
    for (;;) {
        ssize_t r = read(c->fd, tmp, sizeof tmp);
        if (r > 0) {
            if (valkeyReaderFeed(c->rd, tmp, r) != VALKEY_OK) die("reader: %s", c->rd->errstr);
            return r;
        }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        die("server closed the connection (%s)", r == 0 ? "EOF" : strerror(errno));
    }
}

/* 1 when a whole reply was taken from the reader's buffer. */
static int conn_reply(conn_t *c) {
    void *reply;
    if (valkeyReaderGetReply(c->rd, &reply) != VALKEY_OK) die("protocol error: %s", c->rd->errstr);
    return reply != NULL;
}

static void wait_fd(int fd, short events) {
    struct pollfd p = {.fd = fd, .events = events};
    if (poll(&p, 1, 30000) == 0) die("server did not answer within 30 s");
}

/* One turn of a streaming pipeline: sends what is buffered, takes every
 * reply that has arrived, and when none had, reads more or waits for the
 * socket. */
static void conn_turn(conn_t *c, long long *replies) {
    if (conn_flush(c) < 0) die("write failed: %s", strerror(errno));
    int progressed = 0;
    while (conn_reply(c)) (*replies)++, progressed = 1;
    if (!progressed && conn_fill(c) == 0) wait_fd(c->fd, POLLIN | (buf_pending(&c->out) ? POLLOUT : 0));
}

/* Sends everything buffered and waits for n replies; the last one's string
 * is kept in cap.str when it is a string. */
static void conn_sync(conn_t *c, int n) {
    int got = 0;
    while (buf_pending(&c->out)) {
        if (conn_flush(c) < 0) die("write failed: %s", strerror(errno));
        if (buf_pending(&c->out)) wait_fd(c->fd, POLLOUT | POLLIN);
    }
    c->cap.want_str = 1;
    while (got < n) {
        while (got < n && conn_reply(c)) got++;
        if (got < n && conn_fill(c) == 0) wait_fd(c->fd, POLLIN);
    }
    c->cap.want_str = 0;
}

/* A numeric field of an INFO reply, or NAN. */
static double info_field(const char *info, const char *name) {
    size_t n = strlen(name);
    for (const char *p = info; p && *p; p = strchr(p, '\n')) {
        if (*p == '\n') p++;
        if (!strncmp(p, name, n) && p[n] == ':') return strtod(p + n + 1, NULL);
    }
    return NAN;
}

typedef struct {
    double used_memory, rss, cpu;
    double clients; /* mem_clients_normal: the clients' buffers, a pipeline's queries among them */
} info_t;

static info_t parse_info(const char *s) {
    info_t i;
    i.used_memory = info_field(s, "used_memory");
    i.rss = info_field(s, "used_memory_rss");
    i.cpu = info_field(s, "used_cpu_user") + info_field(s, "used_cpu_sys");
    i.clients = info_field(s, "mem_clients_normal");
    return i;
}

static void put_info(buf_t *b) {
    put_argc(b, 3);
    put_str(b, "INFO");
    put_str(b, "memory");
    put_str(b, "cpu");
}

static info_t conn_info(conn_t *c) {
    put_info(&c->out);
    conn_sync(c, 1);
    if (c->cap.type != VALKEY_REPLY_STRING && c->cap.type != VALKEY_REPLY_VERB) die("INFO failed: %s", c->cap.errmsg);
    return parse_info(c->cap.str);
}

static void check_errors(conn_t *c, const char *what) {
    if (c->cap.errors) die("%s: %lld error replies, first: %s", what, c->cap.errors, c->cap.errmsg);
}

/* ---------- options ---------- */

typedef struct {
    const char *mode, *key, *key2, *csv, *type, *order, *op, *rdb, *shape, *cursors, *sync;
    long long n, pipeline, sample, keys, min, max, mlen, conns, offset, score_max, seed, chunk, limit, pid, parties,
        window;
    double seconds, warmup, rate;
} opts_t;

static opts_t O = {
    .key = NULL, .key2 = "s2", .type = "set", .order = "seq", .op = "zscore", .shape = "int",
    .n = 1000000, .pipeline = 1, .sample = 0, .keys = 1000, .min = 10, .max = 128, .mlen = 0,
    .conns = 50, .offset = 0, .score_max = 1000000000LL, .seed = 1, .seconds = 3, .warmup = 0.5,
    .chunk = 0, .rate = 0, .rdb = NULL, .limit = 0, .pid = 0, .window = 60000,
};

/* The key of the set members' generators (perm_int, member_str): fixed, so that
 * a load and the operations that follow it name the same members. */
#define MEMBER_KEY 0x5e7b16c0ffee19ULL

/* ---------- sadd: one set, SADDs of --chunk members ---------- */

static int mode_sadd(void) {
    int shape = shape_index(O.shape);
    if (O.n < 1 || O.pipeline < 1) die("--n and --pipeline must be at least 1");
    long long chunk = O.chunk > 0 ? O.chunk : 1000;
    long long cmds = (O.n + chunk - 1) / chunk;
    conn_t c;
    conn_open(&c);
    info_t base = conn_info(&c);
    const char *key = O.key ? O.key : "s";
    long long sent = 0, replies = 0, done = 0;
    const size_t HIGH = 64 * 1024;
    c.cap.int_sum = 0;
    double t0 = now_s();
    while (done < cmds) {
        long long end = done + O.pipeline < cmds ? done + O.pipeline : cmds;
        long long q = done;
        while (q < end || replies < sent) {
            while (q < end && buf_pending(&c.out) < HIGH) {
                long long lo = q * chunk, hi = lo + chunk < O.n ? lo + chunk : O.n;
                put_argc(&c.out, 2 + (int)(hi - lo));
                put_arg(&c.out, "SADD", 4);
                put_str(&c.out, key);
                for (long long i = lo; i < hi; i++) put_member(&c.out, shape, MEMBER_KEY, O.offset + i);
                sent++;
                q++;
            }
            conn_turn(&c, &replies);
        }
        done = end;
    }
    double elapsed = now_s() - t0;
    check_errors(&c, "SADD");
    long long added = c.cap.int_sum;
    info_t fin = conn_info(&c);
    printf("{\"members\": %lld, \"added\": %lld, \"elapsed_s\": %.6f, \"used_memory_before\": %.0f, "
           "\"used_memory\": %.0f, \"used_memory_rss\": %.0f, \"cpu_s\": %.6f}\n",
           O.n, added, elapsed, base.used_memory, fin.used_memory, fin.rss, fin.cpu - base.cpu);
    conn_close(&c);
    return 0;
}

/* ---------- zadd1: one key, one member per ZADD, streamed ---------- */

typedef struct {
    rng_t rng;
    int seq, mlen, sadd;
    const char *key;
} zadd1_t;

static void gen_zadd1(buf_t *b, zadd1_t *g, long long i) {
    if (g->sadd) {
        put_argc(b, 3);
        put_arg(b, "SADD", 4);
        put_str(b, g->key);
        put_ll(b, g->seq ? i : (long long)rng_below(&g->rng, O.score_max));
        return;
    }
    put_argc(b, 4);
    put_arg(b, "ZADD", 4);
    put_str(b, g->key);
    put_ll(b, g->seq ? i : (long long)rng_below(&g->rng, O.score_max));
    if (g->mlen) {
        char m[256];
        rng_alnum(&g->rng, m, g->mlen);
        put_arg(b, m, g->mlen);
    } else {
        put_prefixed(b, "m:", i);
    }
}

static int mode_zadd1(void) {
    zadd1_t g = {.rng = {O.seed * 0x2545F4914F6CDD1DULL + 7}, .seq = !strcmp(O.order, "seq"), .mlen = (int)O.mlen,
                 .sadd = !strcmp(O.op, "sadd"),
                 .key = O.key ? O.key : "z"};
    if (O.mlen < 0 || O.mlen > 255) die("--mlen must be 0..255");
    if (O.pipeline < 1) die("--pipeline must be at least 1");
    FILE *csv = NULL;
    if (O.sample > 0) {
        if (!O.csv) die("--sample needs --csv");
        csv = fopen(O.csv, "w");
        if (!csv) die("cannot write %s", O.csv);
        fprintf(csv, "inserts,elapsed_s,used_memory,used_memory_rss,interval_s,interval_rate,cpu_s,mem_clients\n");
    }
    conn_t c;
    conn_open(&c);
    info_t base = conn_info(&c);
    if (csv) fprintf(csv, "0,0.000000,%.0f,%.0f,0,0,0,%.0f\n", base.used_memory, base.rss, base.clients);

    /* Reply numbers of the INFO commands riding in the stream. */
    long long nmark = O.sample > 0 ? O.n / O.sample + 2 : 1;
    long long *mark_reply = calloc(nmark, sizeof *mark_reply), *mark_ins = calloc(nmark, sizeof *mark_ins);
    long long mhead = 0, mtail = 0;
    long long sent_cmds = 0, replies = 0, inserted = 0;
    long long prev_ins = 0;
    double t0 = now_s(), prev_t = t0, min_rate = 0;
    const size_t HIGH = 64 * 1024;

    while (inserted < O.n) {
        long long end = inserted + O.pipeline < O.n ? inserted + O.pipeline : O.n;
        long long i = inserted;
        while (i < end || replies < sent_cmds) {
            while (i < end && buf_pending(&c.out) < HIGH) {
                gen_zadd1(&c.out, &g, i);
                sent_cmds++;
                i++;
                if (O.sample > 0 && i % O.sample == 0) {
                    put_info(&c.out);
                    mark_reply[mtail] = sent_cmds;
                    mark_ins[mtail++] = i;
                    sent_cmds++;
                }
            }
            if (conn_flush(&c) < 0) die("write failed: %s", strerror(errno));
            int progressed = 0;
            for (;;) {
                c.cap.want_str = mhead < mtail && replies == mark_reply[mhead];
                if (!conn_reply(&c)) break;
                progressed = 1;
                if (c.cap.want_str) {
                    double t = now_s();
                    if (c.cap.type != VALKEY_REPLY_STRING && c.cap.type != VALKEY_REPLY_VERB) die("INFO failed");
                    info_t in = parse_info(c.cap.str);
                    long long ins = mark_ins[mhead++];
                    double rate = (ins - prev_ins) / (t - prev_t);
                    fprintf(csv, "%lld,%.6f,%.0f,%.0f,%.6f,%.1f,%.6f,%.0f\n", ins, t - t0, in.used_memory, in.rss,
                            t - prev_t, rate, in.cpu - base.cpu, in.clients);
                    fflush(csv);
                    if (min_rate == 0 || rate < min_rate) min_rate = rate;
                    prev_ins = ins;
                    prev_t = t;
                }
                replies++;
            }
            c.cap.want_str = 0;
            if (progressed) continue;
            if (conn_fill(&c) == 0) wait_fd(c.fd, POLLIN | (buf_pending(&c.out) ? POLLOUT : 0));
        }
        inserted = end;
    }
    double elapsed = now_s() - t0;
    check_errors(&c, "ZADD");
    info_t fin = conn_info(&c);
    printf("{\"inserts\": %lld, \"elapsed_s\": %.6f, \"rate\": %.1f, \"used_memory_before\": %.0f, "
           "\"used_memory\": %.0f, \"used_memory_rss\": %.0f, \"cpu_s\": %.6f}\n",
           O.n, elapsed, O.n / elapsed, base.used_memory, fin.used_memory, fin.rss, fin.cpu - base.cpu);
    if (csv) fclose(csv);
    free(mark_reply);
    free(mark_ins);
    conn_close(&c);
    return 0;
}

/* ---------- w3: MEMORY USAGE after every insert ---------- */

static int mode_w3(void) {
    enum { SET, HASH, ZSET, ZSET_RAND } type;
    if (!strcmp(O.type, "set")) type = SET;
    else if (!strcmp(O.type, "hash")) type = HASH;
    else if (!strcmp(O.type, "zset")) type = ZSET;
    else if (!strcmp(O.type, "zset-rand")) type = ZSET_RAND;
    else die("--type must be set, hash, zset or zset-rand");
    const char *key = O.key ? O.key : "w3";
    rng_t names = {O.seed}, scores = {O.seed + 1000};
    FILE *out = O.csv ? fopen(O.csv, "w") : stdout;
    if (!out) die("cannot write %s", O.csv);
    fprintf(out, "n,bytes\n");
    conn_t c;
    conn_open(&c);
    char s[24];
    for (long long i = 1; i <= O.n; i++) {
        rng_lower(&names, s, 24);
        switch (type) {
        case SET:
            put_argc(&c.out, 3), put_str(&c.out, "SADD"), put_str(&c.out, key), put_arg(&c.out, s, 24);
            break;
        case HASH:
            put_argc(&c.out, 4), put_str(&c.out, "HSET"), put_str(&c.out, key), put_arg(&c.out, s, 24);
            put_str(&c.out, "1");
            break;
        case ZSET:
        case ZSET_RAND:
            put_argc(&c.out, 4), put_str(&c.out, "ZADD"), put_str(&c.out, key);
            if (type == ZSET) put_str(&c.out, "1");
            else put_ll(&c.out, (long long)rng_below(&scores, O.score_max));
            put_arg(&c.out, s, 24);
            break;
        }
        put_argc(&c.out, 5), put_str(&c.out, "MEMORY"), put_str(&c.out, "USAGE"), put_str(&c.out, key);
        put_str(&c.out, "SAMPLES"), put_str(&c.out, "0");
        conn_sync(&c, 2);
        if (c.cap.type != VALKEY_REPLY_INTEGER) die("MEMORY USAGE failed: %s", c.cap.errmsg);
        fprintf(out, "%lld,%lld\n", i, c.cap.integer);
    }
    check_errors(&c, "w3");
    if (out != stdout) fclose(out);
    conn_close(&c);
    return 0;
}

/* ---------- zsets: many keys, one multi-member ZADD each ---------- */

static int mode_zsets(void) {
    if (O.min < 1 || O.max < O.min) die("need 1 <= --min <= --max");
    if (O.mlen < 1 || O.mlen > 255) die("--mlen must be 1..255");
    rng_t r = {O.seed * 0x9E3779B97F4A7C15ULL + 11};
    conn_t c;
    conn_open(&c);
    info_t base = conn_info(&c);
    long long members = 0, sent = 0, replies = 0, done = 0;
    const size_t HIGH = 64 * 1024;
    long long batch = O.pipeline;
    double t0 = now_s();
    char m[256];
    while (done < O.keys) {
        long long end = done + batch < O.keys ? done + batch : O.keys;
        long long k = done;
        while (k < end || replies < sent) {
            while (k < end && buf_pending(&c.out) < HIGH) {
                long long cnt = O.min + (long long)rng_below(&r, O.max - O.min + 1);
                put_argc(&c.out, 2 + 2 * cnt);
                put_arg(&c.out, "ZADD", 4);
                put_prefixed(&c.out, "zk:", k);
                for (long long j = 0; j < cnt; j++) {
                    put_ll(&c.out, (long long)rng_below(&r, O.score_max));
                    rng_alnum(&r, m, O.mlen);
                    put_arg(&c.out, m, O.mlen);
                }
                members += cnt;
                sent++;
                k++;
            }
            conn_turn(&c, &replies);
        }
        done = end;
    }
    double elapsed = now_s() - t0;
    check_errors(&c, "ZADD");
    info_t fin = conn_info(&c);
    printf("{\"keys\": %lld, \"members\": %lld, \"elapsed_s\": %.6f, \"used_memory_before\": %.0f, "
           "\"used_memory\": %.0f, \"used_memory_rss\": %.0f, \"cpu_s\": %.6f}\n",
           O.keys, members, elapsed, base.used_memory, fin.used_memory, fin.rss, fin.cpu - base.cpu);
    conn_close(&c);
    return 0;
}

/* ---------- zkeys: --keys keys of --n addressable members each ---------- */

static int mode_zkeys(void) {
    if (O.keys < 1 || O.n < 1) die("--keys and --n must be at least 1");
    if (O.pipeline < 1) die("--pipeline must be at least 1");
    long long chunk = O.chunk > 0 && O.chunk < O.n ? O.chunk : O.n; /* members per ZADD */
    long long per_key = (O.n + chunk - 1) / chunk;                  /* ZADDs per key */
    long long total = O.keys * per_key;
    rng_t r = {O.seed * 0x9E3779B97F4A7C15ULL + 13};
    conn_t c;
    conn_open(&c);
    info_t base = conn_info(&c);
    long long sent = 0, replies = 0, done = 0;
    const size_t HIGH = 64 * 1024;
    double t0 = now_s();
    while (done < total) {
        long long end = done + O.pipeline < total ? done + O.pipeline : total;
        long long q = done;
        while (q < end || replies < sent) {
            while (q < end && buf_pending(&c.out) < HIGH) {
                long long k = q / per_key, lo = q % per_key * chunk;
                long long hi = lo + chunk < O.n ? lo + chunk : O.n;
                put_argc(&c.out, 2 + 2 * (hi - lo));
                put_arg(&c.out, "ZADD", 4);
                put_prefixed(&c.out, "zk:", k);
                for (long long j = lo; j < hi; j++) {
                    put_ll(&c.out, (long long)rng_below(&r, O.score_max));
                    put_prefixed(&c.out, "m:", j);
                }
                sent++;
                q++;
            }
            conn_turn(&c, &replies);
        }
        done = end;
    }
    double elapsed = now_s() - t0;
    check_errors(&c, "ZADD");
    info_t fin = conn_info(&c);
    printf("{\"keys\": %lld, \"members\": %lld, \"elapsed_s\": %.6f, \"used_memory_before\": %.0f, "
           "\"used_memory\": %.0f, \"used_memory_rss\": %.0f, \"cpu_s\": %.6f}\n",
           O.keys, O.keys * O.n, elapsed, base.used_memory, fin.used_memory, fin.rss, fin.cpu - base.cpu);
    conn_close(&c);
    return 0;
}

/* ---------- bench: closed-loop throughput and latency ---------- */

/* Latency histogram, log-linear: exact below 64 ns, then 32 buckets per
 * power of two (about 3% wide). */
#define HBUCKETS 2048
static uint64_t hist[HBUCKETS];

static int hist_index(uint64_t ns) {
    if (ns < 64) return (int)ns;
    int e = 63 - __builtin_clzll(ns);
    int idx = 32 * (e - 5) + (int)(ns >> (e - 5));
    return idx < HBUCKETS ? idx : HBUCKETS - 1;
}

static double hist_value(int idx) {
    if (idx < 64) return idx;
    int e = idx / 32 + 4;
    double m = idx % 32 + 32;
    return (m + 0.5) * (double)(1ULL << (e - 5));
}

static double hist_percentile(double q) {
    uint64_t total = 0, acc = 0;
    for (int i = 0; i < HBUCKETS; i++) total += hist[i];
    if (!total) return 0;
    uint64_t want = (uint64_t)ceil(q * total);
    if (want < 1) want = 1;
    for (int i = 0; i < HBUCKETS; i++) {
        acc += hist[i];
        if (acc >= want) return hist_value(i);
    }
    return hist_value(HBUCKETS - 1);
}

enum {
    OP_ZSCORE, OP_ZRANK, OP_ZREVRANK, OP_ZRANGE10, OP_ZRANGE100, OP_ZRANGEBYSCORE, OP_ZADD, OP_ZINCRBY,
    OP_CHURN, OP_ZPOPMIN, OP_KEYS_RANGEBYSCORE, OP_KEYS_ZSCORE, OP_KEYS_ZINCRBY, OP_RATELIMIT, OP_RATELIMIT_EX,
    OP_SISMEMBER, OP_SMISMEMBER, OP_SRANDMEMBER, OP_SSCAN, OP_SMEMBERS, OP_SINTER, OP_SINTERCARD, OP_SADD,
    OP_SREM, OP_SPOP,
};

static const char *op_names[] = {
    "zscore", "zrank", "zrevrank", "zrange10", "zrange100", "zrangebyscore", "zadd", "zincrby",
    "churn", "zpopmin", "keys-rangebyscore", "keys-zscore", "keys-zincrby", "ratelimit", "ratelimit-ex",
    "sismember", "smismember", "srandmember", "sscan", "smembers", "sinter", "sintercard", "sadd",
    "srem", "spop", NULL,
};

typedef struct {
    int op;
    rng_t rng;
    const char *key;
    long long tail; /* next refill member for zpopmin; next new member for sadd */
    /* set operations (W7): members of --shape; the set holds indices 0 … n−1 */
    int shape;
    long long stride;   /* sadd: a connection's new members are tail, tail + stride, … */
    int slot;           /* sscan: which of the connection's scans the next SSCAN continues */
    char (*cursor)[24]; /* sscan: each scan's cursor, --pipeline of them */
} opgen_t;

#define SMISMEMBER_N 5 /* members per SMISMEMBER */

/* Appends one operation; returns the number of commands it took. */
static int gen_op(opgen_t *g, buf_t *b) {
    long long r = (long long)rng_below(&g->rng, O.n);
    switch (g->op) {
    case OP_ZSCORE:
    case OP_ZRANK:
    case OP_ZREVRANK:
        put_argc(b, 3);
        put_str(b, g->op == OP_ZSCORE ? "ZSCORE" : g->op == OP_ZRANK ? "ZRANK" : "ZREVRANK");
        put_str(b, g->key);
        put_prefixed(b, "m:", r);
        return 1;
    case OP_ZRANGE10:
    case OP_ZRANGE100: {
        long long len = g->op == OP_ZRANGE10 ? 10 : 100;
        long long start = (long long)rng_below(&g->rng, O.n > len ? O.n - len + 1 : 1);
        put_argc(b, 4), put_str(b, "ZRANGE"), put_str(b, g->key);
        put_ll(b, start), put_ll(b, start + len - 1);
        return 1;
    }
    case OP_ZRANGEBYSCORE:
        put_argc(b, 7), put_str(b, "ZRANGEBYSCORE"), put_str(b, g->key);
        put_ll(b, (long long)rng_below(&g->rng, O.score_max)), put_str(b, "+inf");
        put_str(b, "LIMIT"), put_str(b, "0"), put_str(b, "10");
        return 1;
    case OP_ZADD:
        put_argc(b, 4), put_str(b, "ZADD"), put_str(b, g->key);
        put_ll(b, (long long)rng_below(&g->rng, O.score_max)), put_prefixed(b, "m:", r);
        return 1;
    case OP_ZINCRBY:
        put_argc(b, 4), put_str(b, "ZINCRBY"), put_str(b, g->key), put_str(b, "1"), put_prefixed(b, "m:", r);
        return 1;
    case OP_CHURN: /* take a member out and put it back with a new score */
        put_argc(b, 3), put_str(b, "ZREM"), put_str(b, g->key), put_prefixed(b, "m:", r);
        put_argc(b, 4), put_str(b, "ZADD"), put_str(b, g->key);
        put_ll(b, (long long)rng_below(&g->rng, O.score_max)), put_prefixed(b, "m:", r);
        return 2;
    case OP_ZPOPMIN: /* a queue: pop the lowest, push a new highest */
        put_argc(b, 2), put_str(b, "ZPOPMIN"), put_str(b, g->key);
        put_argc(b, 4), put_str(b, "ZADD"), put_str(b, g->key);
        put_ll(b, O.score_max + g->tail), put_prefixed(b, "m:", g->tail);
        g->tail++;
        return 2;
    case OP_KEYS_RANGEBYSCORE: { /* W4: a window of 1/8 of the score range on a random key */
        long long lo = (long long)rng_below(&g->rng, O.score_max);
        put_argc(b, 4), put_str(b, "ZRANGEBYSCORE");
        put_prefixed(b, "zk:", (long long)rng_below(&g->rng, O.keys));
        put_ll(b, lo), put_ll(b, lo + O.score_max / 8);
        return 1;
    }
    case OP_KEYS_ZSCORE: /* W8: a random member m:{r} of a random key zk:{i} (zkeys) */
    case OP_KEYS_ZINCRBY:
        if (g->op == OP_KEYS_ZSCORE) put_argc(b, 3), put_str(b, "ZSCORE");
        else put_argc(b, 4), put_str(b, "ZINCRBY");
        put_prefixed(b, "zk:", (long long)rng_below(&g->rng, O.keys));
        if (g->op == OP_KEYS_ZINCRBY) put_str(b, "1");
        put_prefixed(b, "m:", r);
        return 1;
    /* A sliding-window rate limiter's request on a random key rl:{i} of --keys: the request (a
     * new member, scored by the time now in ms) goes in, the window of --window ms is trimmed
     * and counted. ratelimit is upstream's way (ZADD, ZREMRANGEBYSCORE, ZCARD), ratelimit-ex
     * gives the member the window as its time instead (ZADDEX ... PX, ZCARD). (issue #47) */
    case OP_RATELIMIT:
    case OP_RATELIMIT_EX: {
        long long key = (long long)rng_below(&g->rng, O.keys), ms = (long long)(now_s() * 1e3);
        if (g->op == OP_RATELIMIT) {
            put_argc(b, 4), put_str(b, "ZADD"), put_prefixed(b, "rl:", key);
            put_ll(b, ms), put_prefixed(b, "r:", g->tail++);
            put_argc(b, 4), put_str(b, "ZREMRANGEBYSCORE"), put_prefixed(b, "rl:", key);
            put_str(b, "-inf"), put_ll(b, ms - O.window);
        } else {
            put_argc(b, 8), put_str(b, "ZADDEX"), put_prefixed(b, "rl:", key), put_str(b, "PX");
            put_ll(b, O.window), put_str(b, "MEMBERS"), put_str(b, "1"), put_ll(b, ms);
            put_prefixed(b, "r:", g->tail++);
        }
        put_argc(b, 2), put_str(b, "ZCARD"), put_prefixed(b, "rl:", key);
        return g->op == OP_RATELIMIT ? 3 : 2;
    }
    /* W7: the set --key of members 0 … n−1 of --shape; lookups draw an index below 2n, so half
     * of them miss. */
    case OP_SISMEMBER:
        put_argc(b, 3), put_str(b, "SISMEMBER"), put_str(b, g->key);
        put_member(b, g->shape, MEMBER_KEY, (long long)rng_below(&g->rng, 2 * O.n));
        return 1;
    case OP_SMISMEMBER:
        put_argc(b, 2 + SMISMEMBER_N), put_str(b, "SMISMEMBER"), put_str(b, g->key);
        for (int k = 0; k < SMISMEMBER_N; k++) put_member(b, g->shape, MEMBER_KEY, (long long)rng_below(&g->rng, 2 * O.n));
        return 1;
    case OP_SRANDMEMBER:
        put_argc(b, 2), put_str(b, "SRANDMEMBER"), put_str(b, g->key);
        return 1;
    case OP_SSCAN: /* one step of one of the connection's scans */
        put_argc(b, 5), put_str(b, "SSCAN"), put_str(b, g->key), put_str(b, g->cursor[g->slot++]);
        put_str(b, "COUNT"), put_str(b, "100");
        return 1;
    case OP_SMEMBERS:
        put_argc(b, 2), put_str(b, "SMEMBERS"), put_str(b, g->key);
        return 1;
    case OP_SINTER:
        put_argc(b, 3), put_str(b, "SINTER"), put_str(b, g->key), put_str(b, O.key2);
        return 1;
    case OP_SINTERCARD:
        put_argc(b, 4), put_str(b, "SINTERCARD"), put_str(b, "2"), put_str(b, g->key), put_str(b, O.key2);
        return 1;
    case OP_SADD: /* a member never added before */
        put_argc(b, 3), put_str(b, "SADD"), put_str(b, g->key), put_member(b, g->shape, MEMBER_KEY, g->tail);
        g->tail += g->stride;
        return 1;
    case OP_SREM: /* take a present member out and put it back */
        put_argc(b, 3), put_str(b, "SREM"), put_str(b, g->key), put_member(b, g->shape, MEMBER_KEY, r);
        put_argc(b, 3), put_str(b, "SADD"), put_str(b, g->key), put_member(b, g->shape, MEMBER_KEY, r);
        return 2;
    case OP_SPOP: /* the SADD that puts the member back goes out with the next batch (set_batch_start) */
        put_argc(b, 2), put_str(b, "SPOP"), put_str(b, g->key);
        return 1;
    }
    die("bad op");
    return 0;
}

/* What a batch of set operations takes from the replies of the one before (collected
 * in c->collect): SPOP's popped members, each put back by an SADD at the head of this
 * batch, and SSCAN's cursors (a scan that reached 0 starts again). Returns the commands
 * it added. */
static long long set_batch_start(conn_t *c, opgen_t *g) {
    long long cmds = 0;
    size_t off = 0, k = 0;
    buf_t *col = c->cap.collect;
    if (!col) return 0;
    while (off < col->len) {
        uint32_t len;
        memcpy(&len, col->p + off, 4);
        const char *m = col->p + off + 4;
        if (g->op == OP_SPOP) {
            put_argc(&c->out, 3), put_str(&c->out, "SADD"), put_str(&c->out, g->key), put_arg(&c->out, m, len);
            cmds++;
        } else if (g->op == OP_SSCAN && k < (size_t)O.pipeline) {
            if (len >= sizeof g->cursor[0]) die("SSCAN cursor too long");
            memcpy(g->cursor[k], m, len);
            g->cursor[k][len] = '\0';
        }
        k++;
        off += 4 + len;
    }
    col->len = col->off = 0;
    g->slot = 0;
    return cmds;
}

/* A batch of --pipeline operations, or of `units` when fewer are left to send (--limit). */
static void issue_batch(conn_t *c, opgen_t *g, int ep, long long units) {
    long long cmds = set_batch_start(c, g);
    c->elem_mark = c->cap.elements;
    for (long long k = 0; k < units; k++) cmds += gen_op(g, &c->out);
    c->pending = cmds;
    c->units = (int)units;
    c->t_sent = now_s();
    if (conn_flush(c) < 0) die("write failed: %s", strerror(errno));
    int want = buf_pending(&c->out) > 0;
    if (want != c->want_out) {
        struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0), .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
        c->want_out = want;
    }
}

/* ---------- scan: one whole SSCAN ---------- */

/* One whole SSCAN of the set, COUNT 100, on one connection: writes every cursor it
 * went through ("0" first) to --csv, one a line, and reports the scan's time and
 * the members it returned. The bench's sscan starts its scans at cursors spread
 * over this list (--cursors), so that together they run over the whole set rather
 * than all over its first few hundred members. */
static int mode_scan(void) {
    if (!O.csv) die("scan needs --csv");
    FILE *out = fopen(O.csv, "w");
    if (!out) die("cannot write %s", O.csv);
    conn_t c;
    conn_open(&c);
    buf_t col = {0};
    char cur[24] = "0";
    long long calls = 0;
    c.cap.collect = &col;
    double t0 = now_s();
    do {
        fprintf(out, "%s\n", cur);
        put_argc(&c.out, 5), put_str(&c.out, "SSCAN"), put_str(&c.out, O.key ? O.key : "s"), put_str(&c.out, cur);
        put_str(&c.out, "COUNT"), put_str(&c.out, "100");
        conn_sync(&c, 1);
        calls++;
        check_errors(&c, "SSCAN");
        uint32_t len;
        if (col.len < 4) die("SSCAN: no cursor in the reply");
        memcpy(&len, col.p, 4);
        if (len >= sizeof cur) die("SSCAN cursor too long");
        memcpy(cur, col.p + 4, len);
        cur[len] = '\0';
        col.len = col.off = 0;
    } while (strcmp(cur, "0"));
    double secs = now_s() - t0;
    fclose(out);
    printf("{\"calls\": %lld, \"members\": %lld, \"scan_s\": %.6f}\n", calls, c.cap.elements, secs);
    c.cap.collect = NULL;
    free(col.p);
    conn_close(&c);
    return 0;
}

/* The cursors a scan wrote (mode scan), *n of them. */
static char (*read_cursors(const char *path, long long *n))[24] {
    FILE *f = fopen(path, "r");
    if (!f) die("cannot read %s", path);
    long long cap = 1024, cnt = 0;
    char(*cur)[24] = malloc(cap * sizeof *cur);
    char line[64];
    while (cur && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (strlen(line) >= sizeof cur[0]) die("%s: cursor too long", path);
        if (cnt == cap) cur = realloc(cur, (cap *= 2) * sizeof *cur);
        if (cur) strcpy(cur[cnt++], line);
    }
    if (!cur) die("out of memory");
    fclose(f);
    if (!cnt) die("%s holds no cursor", path);
    *n = cnt;
    return cur;
}

/* The CPU time of process pid so far (seconds), from /proc: read at once, where an
 * INFO would wait behind the commands the server is busy with (a pipeline of
 * SINTERs takes seconds). The run times of its threads in nanoseconds
 * (task/<tid>/schedstat); where the kernel keeps no schedstat, user + system
 * time in clock ticks (10 ms steps, stat). */
static double proc_cpu(long long pid) {
    char path[320], buf[1024];
    snprintf(path, sizeof path, "/proc/%lld/task", pid);
    DIR *d = opendir(path);
    if (!d) die("cannot read %s", path);
    double ns = 0;
    int threads = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "/proc/%lld/task/%s/schedstat", pid, e->d_name);
        FILE *f = fopen(path, "r");
        unsigned long long run;
        if (f && fscanf(f, "%llu", &run) == 1) ns += run, threads++;
        if (f) fclose(f);
    }
    closedir(d);
    if (threads) return ns * 1e-9;
    snprintf(path, sizeof path, "/proc/%lld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) die("cannot read %s", path);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* fields after the command name; utime, stime are the 12th, 13th */
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        die("cannot parse %s", path);
    return (double)(ut + st) / sysconf(_SC_CLK_TCK);
}

/* --sync DIR --parties N: the clients of one turn (one per server, each its own
 * process) keep their load going until all of them have had back every batch
 * they sent before the end of their window, and each marks that by a file in
 * DIR. Otherwise the server whose last batch returns last would run it alone,
 * faster, and the window would count it at that pace. */
static void sync_mark(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/%ld", dir, (long)getpid());
    FILE *f = fopen(path, "w");
    if (!f) die("cannot write %s", path);
    fclose(f);
}

static int sync_count(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) die("cannot read %s", dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

/* The server's CPU time: from /proc with --pid, else from INFO on the control connection. */
static info_t bench_cpu(conn_t *ctl) {
    if (!O.pid) return conn_info(ctl);
    info_t i = {0};
    i.cpu = proc_cpu(O.pid);
    return i;
}

/* Every batch the window counts is back: the end of the whole-batch CPU span (--pid);
 * with --sync, the mark, and when the other clients are back too, no more batches. */
static void counted_back(double *cpu_last, long long *units_whole, long long units_back, int *draining,
                         int *stopping) {
    if (O.pid) *cpu_last = proc_cpu(O.pid), *units_whole = units_back;
    if (*draining) {
        sync_mark(O.sync);
        if (sync_count(O.sync) >= O.parties) *draining = 0, *stopping = 1;
    }
}

/* The connection's next batch: --pipeline operations, or what --limit leaves of them.
 * Returns 0, sending nothing, once --limit operations have been sent. */
static int next_batch(conn_t *c, opgen_t *g, int ep, long long *issued) {
    long long units = O.limit > 0 && O.limit - *issued < O.pipeline ? O.limit - *issued : O.pipeline;
    if (units <= 0) return 0;
    issue_batch(c, g, ep, units);
    *issued += units;
    return 1;
}

static int mode_bench(void) {
    int op = -1;
    for (int i = 0; op_names[i]; i++)
        if (!strcmp(O.op, op_names[i])) op = i;
    if (op < 0) die("unknown --op %s", O.op);
    if (O.conns < 1 || O.pipeline < 1) die("--conns and --pipeline must be at least 1");
    conn_t ctl;
    conn_open(&ctl);
    conn_t *cs = calloc(O.conns, sizeof *cs);
    opgen_t *gs = calloc(O.conns, sizeof *gs);
    int ep = epoll_create1(0);
    int set_op = op >= OP_SISMEMBER, shape = set_op ? shape_index(O.shape) : 0;
    const char *key = O.key ? O.key : set_op ? "s" : "z";
    long long ncur = 1;
    char(*cur)[24] = NULL;
    if (op == OP_SSCAN) {
        if (O.cursors) cur = read_cursors(O.cursors, &ncur);
        else if ((cur = calloc(1, sizeof *cur))) strcpy(cur[0], "0");
        if (!cur) die("out of memory");
    }
    for (int i = 0; i < O.conns; i++) {
        conn_open(&cs[i]);
        gs[i].op = op;
        gs[i].rng.s = (O.seed << 20) + 977 * i + 1;
        gs[i].key = key;
        /* refill members: disjoint per connection and per run (--offset) */
        gs[i].tail = O.n + O.offset + (long long)i * 1000000000LL;
        gs[i].shape = shape;
        if (op == OP_SADD) { /* new members: indices from 2n on (lookups' misses stay below), interleaved */
            gs[i].tail = 2 * O.n + O.offset + i;
            gs[i].stride = O.conns;
        }
        if (op == OP_SPOP || op == OP_SSCAN) {
            cs[i].cap.collect = calloc(1, sizeof(buf_t));
            if (!cs[i].cap.collect) die("out of memory");
        }
        if (op == OP_SSCAN) { /* the scans start spread evenly over one whole scan's cursors (--cursors) */
            gs[i].cursor = calloc(O.pipeline, sizeof *gs[i].cursor);
            if (!gs[i].cursor) die("out of memory");
            for (long long k = 0; k < O.pipeline; k++)
                strcpy(gs[i].cursor[k], cur[(i * O.pipeline + k) * ncur / (O.conns * O.pipeline)]);
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &cs[i]};
        epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &ev);
    }
    /* Phases: warm-up, measuring (m_start … m_end), draining (with --sync: the load goes on
     * until every client's batches sent before m_end are back), stopping (no new batches). */
    double t_start = now_s();
    double m_start = t_start + O.warmup, m_end = m_start + O.seconds;
    int measuring = 0, draining = 0, stopping = 0, active = (int)O.conns;
    /* Operations in the measured window: a batch counts for the part of its round trip
     * that lies inside the window, so a batch that straddles an edge counts in part
     * (this matters only for operations of many milliseconds: SMEMBERS, SINTER). */
    double ops = 0, elements = 0;
    info_t cpu0 = {0}, cpu1 = {0};
    /* With --pid, CPU per op over whole batches: the server's CPU time from the first batch
     * to the return of the last batch the window counts, over the operations of every batch
     * back by then (a window shorter than one batch of SINTERs still gets it right). */
    double cpu_first = O.pid ? proc_cpu(O.pid) : 0, cpu_last = 0;
    long long units_back = 0, units_whole = 0, counted_out = 0;
    if (O.limit > 0) { /* a fixed count of operations: the whole run is the window */
        O.warmup = 0;
        O.seconds = 1e9;
    }
    long long issued = 0; /* operations sent, against --limit */
    if (O.warmup <= 0) {
        cpu0 = bench_cpu(&ctl);
        m_start = now_s();
        m_end = m_start + O.seconds;
        measuring = 1;
    }
    for (int i = 0; i < O.conns; i++)
        if (!next_batch(&cs[i], &gs[i], ep, &issued)) cs[i].done = 1, active--;
    struct epoll_event evs[256];
    double t_stop_deadline = 0;
    while (active > 0) {
        double next = measuring ? m_end : draining || stopping ? 0 : m_start, wait_ms = draining ? 10 : 100;
        if (next && (next - now_s()) * 1e3 < wait_ms) wait_ms = (next - now_s()) * 1e3;
        int n = epoll_wait(ep, evs, 256, wait_ms > 0 ? (int)ceil(wait_ms) : 0);
        if (n < 0 && errno != EINTR) die("epoll_wait: %s", strerror(errno));
        double t = now_s();
        if (!measuring && !draining && !stopping && t >= m_start) {
            cpu0 = bench_cpu(&ctl);
            m_start = now_s();
            m_end = m_start + O.seconds;
            measuring = 1;
            t = now_s();
        }
        if (measuring && t >= m_end) {
            cpu1 = bench_cpu(&ctl);
            measuring = 0;
            if (O.sync) draining = 1;
            else stopping = 1;
            /* the batches out that the window counts (a batch back since m_end went out again after it) */
            for (int i = 0; i < O.conns; i++) counted_out += cs[i].t_sent <= m_end;
            if (!counted_out) counted_back(&cpu_last, &units_whole, units_back, &draining, &stopping);
            t_stop_deadline = now_s() + 60;
            t = now_s();
        }
        if (draining && !counted_out && sync_count(O.sync) >= O.parties) draining = 0, stopping = 1;
        if ((draining || stopping) && t > t_stop_deadline) die("replies still missing 60 s after the end");
        for (int e = 0; e < n; e++) {
            conn_t *c = evs[e].data.ptr;
            if (c->done) continue;
            if (evs[e].events & EPOLLOUT) {
                if (conn_flush(c) < 0) die("write failed: %s", strerror(errno));
                if (!buf_pending(&c->out) && c->want_out) {
                    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
                    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                    c->want_out = 0;
                }
            }
            if (!(evs[e].events & (EPOLLIN | EPOLLERR | EPOLLHUP))) continue;
            conn_fill(c);
            while (c->pending > 0 && conn_reply(c)) {
                if (--c->pending) continue;
                /* the whole batch is back */
                double t2 = now_s();
                if (measuring && t2 <= m_end) {
                    uint64_t ns = (uint64_t)((t2 - c->t_sent) * 1e9);
                    hist[hist_index(ns)] += c->units;
                }
                double lo = c->t_sent > m_start ? c->t_sent : m_start, hi = t2 < m_end ? t2 : m_end;
                if ((measuring || draining || stopping) && hi > lo) {
                    double part = t2 > c->t_sent ? (hi - lo) / (t2 - c->t_sent) : 1;
                    ops += part * c->units;
                    elements += part * (c->cap.elements - c->elem_mark);
                }
                if (c->t_sent <= m_end) units_back += c->units;
                if ((draining || stopping) && c->t_sent <= m_end && --counted_out == 0)
                    counted_back(&cpu_last, &units_whole, units_back, &draining, &stopping);
                if (stopping || !next_batch(c, &gs[c - cs], ep, &issued)) {
                    c->done = 1;
                    active--;
                }
            }
        }
    }
    if (O.limit > 0) { /* the window ends with the last reply */
        cpu1 = bench_cpu(&ctl);
        O.seconds = now_s() - m_start;
        if (O.pid) cpu_last = proc_cpu(O.pid), units_whole = units_back;
    }
    if (op == OP_SPOP) /* put back what the last batches popped (not measured) */
        for (int i = 0; i < O.conns; i++) {
            long long n = set_batch_start(&cs[i], &gs[i]);
            if (n) conn_sync(&cs[i], (int)n);
        }
    long long errors = 0, nils = 0;
    const char *errmsg = "";
    for (int i = 0; i < O.conns; i++) {
        errors += cs[i].cap.errors;
        nils += cs[i].cap.nils;
        if (cs[i].cap.errors && !*errmsg) errmsg = cs[i].cap.errmsg;
    }
    if (errors) die("%s: %lld error replies, first: %s", O.op, errors, errmsg);
    double cpu = cpu1.cpu - cpu0.cpu;
    double cpu_per_op = O.pid ? (units_whole ? (cpu_last - cpu_first) * 1e6 / units_whole : 0) : ops ? cpu * 1e6 / ops : 0;
    printf("{\"op\": \"%s\", \"conns\": %lld, \"pipeline\": %lld, \"seconds\": %.6f, \"ops\": %.1f, "
           "\"ops_per_sec\": %.1f, \"p50_us\": %.2f, \"p99_us\": %.2f, \"p999_us\": %.2f, \"cpu_s\": %.6f, "
           "\"cpu_us_per_op\": %.4f, \"server_util\": %.3f, \"nils\": %lld, \"elements\": %lld, "
           "\"elements_per_sec\": %.1f}\n",
           O.op, O.conns, O.pipeline, O.seconds, ops, ops / O.seconds,
           hist_percentile(0.50) / 1e3, hist_percentile(0.99) / 1e3, hist_percentile(0.999) / 1e3, cpu,
           cpu_per_op, cpu / O.seconds, nils, (long long)elements, elements / O.seconds);
    for (int i = 0; i < O.conns; i++) {
        free(cs[i].cap.collect ? cs[i].cap.collect->p : NULL);
        free(cs[i].cap.collect);
        free(gs[i].cursor);
        conn_close(&cs[i]);
    }
    free(cur);
    conn_close(&ctl);
    close(ep);
    free(cs);
    free(gs);
    return 0;
}

/* ---------- bgsave: a load running while a fork child saves ---------- */

/* A field of an INFO reply as a string (up to the end of its line), or "". */
static const char *info_str(const char *info, const char *name, char *dst, size_t cap) {
    size_t n = strlen(name);
    dst[0] = '\0';
    for (const char *p = info; p && *p; p = strchr(p, '\n')) {
        if (*p == '\n') p++;
        if (!strncmp(p, name, n) && p[n] == ':') {
            size_t len = strcspn(p + n + 1, "\r\n");
            if (len >= cap) len = cap - 1;
            memcpy(dst, p + n + 1, len);
            dst[len] = '\0';
            break;
        }
    }
    return dst;
}

/* Sends one command of up to 4 arguments on a control connection and waits
 * for its reply; its text stays in c->cap.str when it is a string. */
static void ctl_cmd(conn_t *c, const char *a0, const char *a1, const char *a2, const char *a3) {
    const char *argv[4] = {a0, a1, a2, a3};
    int argc = 0;
    while (argc < 4 && argv[argc]) argc++;
    put_argc(&c->out, argc);
    for (int i = 0; i < argc; i++) put_str(&c->out, argv[i]);
    conn_sync(c, 1);
    if (c->cap.errors) die("%s failed: %s", a0, c->cap.errmsg);
}

static const char *ctl_info(conn_t *c, const char *s1, const char *s2, const char *s3) {
    ctl_cmd(c, "INFO", s1, s2, s3);
    if (c->cap.type != VALKEY_REPLY_STRING && c->cap.type != VALKEY_REPLY_VERB) die("INFO failed");
    return c->cap.str;
}

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* The fork child of the server (--pid): its Private_Dirty and the server's
 * RSS, sampled from /proc. */
typedef struct {
    long child;             /* 0: not found yet; -1: gone */
    double private_dirty;   /* last sample, bytes */
    double private_max;     /* largest sample */
    double total_max;       /* largest server RSS + child's private bytes */
    long samples;
} childmon_t;

static long find_child(long pid) {
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%ld/task/%ld/children", pid, pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    long child = 0;
    if (fgets(buf, sizeof buf, f)) child = strtol(buf, NULL, 10);
    fclose(f);
    return child;
}

/* Sum of the "Name:  N kB" lines of a /proc file whose name starts with prefix; -1 when unreadable. */
static double proc_kb(const char *path, const char *prefix) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[256];
    double kb = 0;
    size_t n = strlen(prefix);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, prefix, n)) kb += strtod(strchr(line, ':') + 1, NULL);
    fclose(f);
    return kb;
}

static void childmon_sample(childmon_t *m) {
    if (!O.pid || m->child < 0) return;
    if (m->child == 0 && (m->child = find_child(O.pid)) == 0) return;
    char path[64];
    double dirty = 0, priv = 0; /* Private_Dirty; all Private_ lines (Clean, Dirty, Hugetlb) */
    snprintf(path, sizeof path, "/proc/%ld/smaps_rollup", m->child);
    FILE *f = fopen(path, "r"); /* one read: the kernel walks the child's page tables for it */
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "Private_", 8)) continue;
            double kb = strtod(strchr(line, ':') + 1, NULL);
            priv += kb;
            if (!strncmp(line, "Private_Dirty:", 14)) dirty += kb;
        }
        fclose(f);
    } else {
        priv = dirty = -1;
    }
    snprintf(path, sizeof path, "/proc/%lld/status", O.pid);
    double rss = proc_kb(path, "VmRSS");
    if (priv < 0 || dirty < 0 || rss < 0) {
        m->child = -1; /* gone (or a zombie: smaps_rollup of a zombie is empty) */
        return;
    }
    if (priv == 0 && dirty == 0) return;
    m->private_dirty = dirty * 1024;
    if (m->private_dirty > m->private_max) m->private_max = m->private_dirty;
    if ((rss + priv) * 1024 > m->total_max) m->total_max = (rss + priv) * 1024;
    m->samples++;
}

static int mode_bgsave(void) {
    int op = -1;
    for (int i = 0; op_names[i]; i++)
        if (!strcmp(O.op, op_names[i])) op = i;
    if (op < 0) die("unknown --op %s", O.op);
    if (op == OP_ZPOPMIN || op == OP_CHURN || op >= OP_SISMEMBER) die("--op %s is not supported by bgsave", O.op);
    if (O.pipeline < 1) die("--pipeline must be at least 1");
    if (O.rate < 0) die("--rate must be 0 (closed loop) or positive");
    if (O.rdb && file_exists(O.rdb)) die("%s exists already: remove it before the run", O.rdb);
    const double STAT_EVERY = 0.002, INFO_EVERY = 0.05, PROC_EVERY = 0.02;
    childmon_t mon = {0};
    double next_proc = 0;

    conn_t ctl, c;
    conn_open(&ctl);
    conn_open(&c);
    if (info_field(ctl_info(&ctl, "persistence", NULL, NULL), "rdb_bgsave_in_progress") != 0)
        die("a save is in progress already");
    opgen_t g = {.op = op, .rng = {(O.seed << 20) + 1}, .key = O.key ? O.key : "z"};

    enum { WARMUP, SAVING, ENDING } phase = WARMUP;
    long long issued = 0, ops_save = 0, pending = 0, replies_save = 0;
    int batch_in_save = 0;
    double t0 = now_s(), t_batch = 0, t_save = 0, t_end = 0, next_stat = 0, next_info = 0, max_rtt = 0;
    double used_before = 0, used_max = 0, cow_current_max = 0;
    int end_by_file = 0;

    for (;;) {
        double t = now_s();
        if (phase == WARMUP && t >= t0 + O.warmup) {
            used_before = used_max = info_field(ctl_info(&ctl, "memory", NULL, NULL), "used_memory");
            ctl_cmd(&ctl, "BGSAVE", NULL, NULL, NULL);
            if (strncmp(ctl.cap.str, "Background saving started", 25)) die("BGSAVE: %s", ctl.cap.str);
            t = t_save = now_s();
            phase = SAVING;
            next_stat = t + STAT_EVERY;
            next_info = t + INFO_EVERY;
            next_proc = t;
        }
        if (phase != WARMUP && t >= next_proc) {
            childmon_sample(&mon);
            t = now_s();
            next_proc = t + PROC_EVERY;
        }
        if (phase == SAVING && t >= next_stat) {
            next_stat = t + STAT_EVERY;
            if (O.rdb && file_exists(O.rdb)) {
                phase = ENDING, end_by_file = 1;
                t_end = t;
            }
        }
        if (phase == SAVING && t >= next_info) {
            const char *in = ctl_info(&ctl, "persistence", "memory", NULL);
            double used = info_field(in, "used_memory"), cow = info_field(in, "current_cow_size");
            if (used > used_max) used_max = used;
            if (cow > cow_current_max) cow_current_max = cow;
            if (info_field(in, "rdb_bgsave_in_progress") == 0) {
                phase = ENDING;
                t_end = now_s();
            }
            t = now_s();
            next_info = t + INFO_EVERY;
        }
        if (phase == ENDING && pending == 0) break;

        /* the next batch: one at a time, paced or closed loop */
        double wake = t + 1;
        if (phase == WARMUP) wake = t0 + O.warmup;
        if (phase == SAVING) wake = O.rdb && next_stat < next_info ? next_stat : next_info;
        if (phase != WARMUP && O.pid && mon.child >= 0 && next_proc < wake) wake = next_proc;
        int capped = phase == SAVING && O.limit > 0 && ops_save >= O.limit;
        if (pending == 0 && phase != ENDING && !capped) {
            long long want = O.pipeline;
            if (phase == SAVING && O.limit > 0 && O.limit - ops_save < want) want = O.limit - ops_save;
            if (O.rate > 0) {
                long long due = (long long)(O.rate * (t - t0)) + 1 - issued;
                if (due < want) want = due;
            }
            if (want > 0) {
                for (long long k = 0; k < want; k++) pending += gen_op(&g, &c.out);
                issued += want;
                if (phase == SAVING) ops_save += want;
                batch_in_save = phase == SAVING;
                t_batch = t;
                if (conn_flush(&c) < 0) die("write failed: %s", strerror(errno));
            } else {
                /* nothing due: sleep until the next operation is, at least 1 ms, so that
                 * a paced load goes out in batches rather than one command at a time */
                double due_at = t0 + (issued + 1) / O.rate;
                if (due_at < t + 0.001) due_at = t + 0.001;
                if (due_at < wake) wake = due_at;
            }
        }
        /* wait for replies, room to write, or the next deadline */
        double dt = wake - now_s();
        if (dt < 0) dt = 0;
        struct pollfd p = {.fd = c.fd, .events = (short)(pending ? POLLIN : 0) | (buf_pending(&c.out) ? POLLOUT : 0)};
        struct timespec ts = {.tv_sec = (time_t)dt, .tv_nsec = (long)((dt - (time_t)dt) * 1e9)};
        int pr = ppoll(&p, 1, &ts, NULL);
        if (pr < 0 && errno != EINTR) die("ppoll: %s", strerror(errno));
        if (pr > 0 && (p.revents & POLLOUT) && conn_flush(&c) < 0) die("write failed: %s", strerror(errno));
        if (pr > 0 && (p.revents & (POLLIN | POLLERR | POLLHUP))) {
            conn_fill(&c);
            while (pending > 0 && conn_reply(&c)) {
                pending--;
                if (batch_in_save) replies_save++;
            }
            if (pending == 0 && batch_in_save) {
                double rtt = now_s() - t_batch;
                if (rtt > max_rtt) max_rtt = rtt;
            }
        }
    }
    double t_load_end = now_s();

    /* the load has stopped; wait for the parent to reap the child */
    const char *in;
    for (;;) {
        if (now_s() >= next_proc) {
            childmon_sample(&mon);
            next_proc = now_s() + PROC_EVERY;
        }
        in = ctl_info(&ctl, "persistence", "memory", "stats");
        if (info_field(in, "rdb_bgsave_in_progress") == 0) break;
        if (now_s() - t_save > 3600) die("the save has not ended after an hour");
        usleep(5000);
    }
    double t_done = now_s();
    char status[64];
    info_str(in, "rdb_last_bgsave_status", status, sizeof status);
    double cow = info_field(in, "rdb_last_cow_size"), fork_us = info_field(in, "latest_fork_usec");
    double used_after = info_field(in, "used_memory");
    if (strcmp(status, "ok")) die("the save failed: rdb_last_bgsave_status:%s", status);
    if (O.rdb && !end_by_file) die("the save ended without writing %s", O.rdb);
    if (c.cap.errors) die("%s: %lld error replies, first: %s", O.op, c.cap.errors, c.cap.errmsg);
    double save_s = t_end - t_save;
    printf("{\"op\": \"%s\", \"pipeline\": %lld, \"rate\": %.0f, \"ops\": %lld, \"ops_save\": %lld, "
           "\"replies_save\": %lld, \"save_s\": %.6f, \"bgsave_s\": %.6f, \"load_s\": %.6f, "
           "\"rate_save\": %.1f, \"used_memory_before\": %.0f, \"used_memory_max\": %.0f, "
           "\"used_memory_after\": %.0f, \"cow\": %.0f, \"cow_current_max\": %.0f, \"fork_us\": %.0f, "
           "\"max_rtt_ms\": %.3f, \"end_by_file\": %d, \"nils\": %lld, \"proc_samples\": %ld, "
           "\"proc_cow_max\": %.0f, \"proc_cow_last\": %.0f, \"proc_total_max\": %.0f}\n",
           O.op, O.pipeline, O.rate, issued, ops_save, replies_save, save_s, t_done - t_save,
           t_load_end - t0, save_s > 0 ? ops_save / save_s : 0, used_before, used_max, used_after, cow,
           cow_current_max, fork_us, max_rtt * 1e3, end_by_file, c.cap.nils, mon.samples, mon.private_max,
           mon.private_dirty, mon.total_max);
    conn_close(&c);
    conn_close(&ctl);
    return 0;
}

/* ---------- main ---------- */

static void usage(void) {
    fprintf(stderr,
            "usage: zload MODE [options]\n"
            "  modes: zadd1 | w3 | zsets | zkeys | bench | bgsave | sadd | scan   (see the comment at the top of zload.c)\n"
            "  --host H --port P --key K --n N --pipeline P --sample S --csv FILE\n"
            "  --type set|hash|zset|zset-rand --order seq|rand --mlen L --score-max M --seed S\n"
            "  --keys K --min A --max B --op OP --conns C --seconds T --warmup W --offset O\n"
            "  --chunk C --rate R --rdb FILE --limit L --pid SERVER_PID --shape int|seq|str --key2 K --cursors FILE\n"
            "  --sync DIR --parties N --window MS\n");
    exit(2);
}

int main(int argc, char **argv) {
    static struct option longopts[] = {
        {"host", 1, 0, 'h'},  {"port", 1, 0, 'p'},   {"key", 1, 0, 'k'},      {"n", 1, 0, 'n'},
        {"pipeline", 1, 0, 'P'}, {"sample", 1, 0, 's'}, {"csv", 1, 0, 'c'},   {"type", 1, 0, 't'},
        {"order", 1, 0, 'o'}, {"mlen", 1, 0, 'l'},   {"score-max", 1, 0, 'M'}, {"seed", 1, 0, 'S'},
        {"keys", 1, 0, 'K'},  {"min", 1, 0, 'a'},    {"max", 1, 0, 'b'},       {"op", 1, 0, 'O'},
        {"conns", 1, 0, 'C'}, {"seconds", 1, 0, 'T'}, {"warmup", 1, 0, 'W'},   {"offset", 1, 0, 'f'},
        {"chunk", 1, 0, 'u'}, {"rate", 1, 0, 'r'},   {"rdb", 1, 0, 'd'},       {"limit", 1, 0, 'x'},
        {"pid", 1, 0, 'i'},   {"shape", 1, 0, 'e'}, {"key2", 1, 0, 'y'},       {"cursors", 1, 0, 'g'},
        {"sync", 1, 0, 'j'},  {"parties", 1, 0, 'q'}, {"window", 1, 0, 'w'},
        {0, 0, 0, 0},
    };
    if (argc < 2 || argv[1][0] == '-') usage();
    O.mode = argv[1];
    optind = 2;
    int ch;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (ch) {
        case 'h': g_host = optarg; break;
        case 'p': g_port = atoi(optarg); break;
        case 'k': O.key = optarg; break;
        case 'n': O.n = atoll(optarg); break;
        case 'P': O.pipeline = atoll(optarg); break;
        case 's': O.sample = atoll(optarg); break;
        case 'c': O.csv = optarg; break;
        case 't': O.type = optarg; break;
        case 'o': O.order = optarg; break;
        case 'l': O.mlen = atoll(optarg); break;
        case 'M': O.score_max = atoll(optarg); break;
        case 'S': O.seed = atoll(optarg); break;
        case 'K': O.keys = atoll(optarg); break;
        case 'a': O.min = atoll(optarg); break;
        case 'b': O.max = atoll(optarg); break;
        case 'O': O.op = optarg; break;
        case 'C': O.conns = atoll(optarg); break;
        case 'T': O.seconds = atof(optarg); break;
        case 'W': O.warmup = atof(optarg); break;
        case 'f': O.offset = atoll(optarg); break;
        case 'u': O.chunk = atoll(optarg); break;
        case 'r': O.rate = atof(optarg); break;
        case 'd': O.rdb = optarg; break;
        case 'x': O.limit = atoll(optarg); break;
        case 'i': O.pid = atoll(optarg); break;
        case 'e': O.shape = optarg; break;
        case 'y': O.key2 = optarg; break;
        case 'g': O.cursors = optarg; break;
        case 'j': O.sync = optarg; break;
        case 'q': O.parties = atoll(optarg); break;
        case 'w': O.window = atoll(optarg); break;
        default: usage();
        }
    }
    if (optind != argc) usage();
    if (!strcmp(O.mode, "zadd1")) return mode_zadd1();
    if (!strcmp(O.mode, "w3")) return mode_w3();
    if (!strcmp(O.mode, "zsets")) return mode_zsets();
    if (!strcmp(O.mode, "zkeys")) return mode_zkeys();
    if (!strcmp(O.mode, "bench")) return mode_bench();
    if (!strcmp(O.mode, "sadd")) return mode_sadd();
    if (!strcmp(O.mode, "scan")) return mode_scan();
    if (!strcmp(O.mode, "bgsave")) return mode_bgsave();
    usage();
    return 2;
}
