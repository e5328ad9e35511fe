/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 */

/* Symbol tables for short strings
 * ===============================
 *
 * A codec for values too short for a general compressor: a static table
 * maps up to 255 one-byte codes to symbols of 1 to 8 bytes, and a string is
 * coded, one by one and with no header, as the codes of the symbols that
 * cover it, left to right. A byte no symbol starts with is escaped. The
 * idea is FSST's (Boncz, Neumann, Leis: "FSST: Fast Random Access String
 * Compression", VLDB 2020); this is an implementation of it written from
 * the paper's description.
 *
 * Codes
 * -----
 *
 *    0 .. 254   the symbol with that code: its 1..8 bytes follow in the output
 *    255        escape: the next input byte is a literal
 *
 * Example: with symbols 0 = "the ", 1 = "qu", coding "the quiz" gives
 * 0x00 0x01 0xff 'i' 0xff 'z' (six bytes for eight).
 *
 * The table
 * ---------
 *
 *    sym[code], len[code]   each symbol's bytes (little-endian in a word, the
 *                           bytes above its length zero) and its length
 *    lookup[h]              symbols of 3..8 bytes, at most one per slot,
 *                           the slot a hash of their first three bytes
 *    pair[x]                for every two bytes x: the code of the two-byte
 *                           symbol x if there is one, else what byte[] says
 *                           of x's first byte
 *    byte[b]                the one-byte symbol b's code, or the escape
 *
 * The encoder takes, at each position, the symbol in the lookup slot of
 * the next three bytes if it matches the input there, else the pair[]
 * entry of the next two bytes. So a long symbol that shares its slot with
 * another is never used: training keeps only the better one.
 *
 * Training
 * --------
 *
 * Starting from an empty table (every byte escaped), SYMTAB_GENERATIONS
 * rounds each code the samples with the current table and count, for every
 * code used (an escaped byte counting as the one-byte symbol it carries),
 * how often it appears and how often each code follows it. The candidates
 * of the next table are the symbols used and the concatenations (up to 8
 * bytes) of the pairs seen, each gaining its count times its length: the
 * input bytes it would cover. One-byte candidates gain
 * SYMTAB_BYTE_BOOST times more, since each one saves an escape byte on
 * every occurrence. The best 255 by gain that fit the lookup make the
 * next table. A trainer (symtabTrainerCreate) does the same in steps of a
 * given number of samples, the candidates chosen at a generation's end.
 *
 * Invariants:
 * - len[c] is 0 for an unused code, 1..8 otherwise; no two codes hold the
 *   same symbol.
 * - pair[x] and byte[b] name a symbol whose bytes begin the input they are
 *   looked up with (or the escape, of length 1): encoding never fails and
 *   decoding gives back the input.
 *
 * Public prefix `symtab`.
 */
#include "symtab.h"

#include <stdlib.h>
#include <string.h>

#include "zmalloc.h"

#define SYMTAB_ESCAPE 255
#define SYMTAB_MAX_SYMBOLS 255
#define SYMTAB_MAX_LEN 8
/* Rounds of training. The gain of further rounds, measured on short
 * English texts (docs/engine.md part 7), is under 1% of the coded bytes. */
#define SYMTAB_GENERATIONS 5
/* Slots for the symbols of 3 bytes and more: 2^11, so that 255 symbols
 * rarely collide. */
#define SYMTAB_LOOKUP_BITS 11
#define SYMTAB_BYTE_BOOST 8
/* Candidates sorted at a generation's end: 255 symbols and room for those
 * a taken lookup slot turns away. */
#define SYMTAB_BEST 2048
/* Candidate indexes while training: the 255 codes, then 256 + b for an
 * escaped byte b. */
#define SYMTAB_CAND 512

typedef struct {
    uint64_t sym;
    uint8_t len;
    uint8_t code;
} symtabSlot;

struct symtab {
    uint64_t sym[256];
    uint8_t len[256];
    int nsymbols;
    uint16_t byte[256];   /* (length << 8) | code */
    uint16_t pair[65536]; /* (length << 8) | code */
    symtabSlot lookup[1 << SYMTAB_LOOKUP_BITS];
};

/* --- Words --- */

static inline uint64_t load64(const unsigned char *p) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t w;
    memcpy(&w, p, sizeof(w));
    return w;
#else
    uint64_t w = 0;
    for (int i = 7; i >= 0; i--) w = (w << 8) | p[i];
    return w;
#endif
}

static inline void store64(unsigned char *p, uint64_t w) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p, &w, sizeof(w));
#else
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(w >> (8 * i));
#endif
}

/* The up to 8 bytes at p, of which `left` remain, zero past the end. */
static inline uint64_t loadTail(const unsigned char *p, size_t left) {
    if (left >= 8) return load64(p);
    uint64_t w = 0;
    for (size_t i = left; i-- > 0;) w = (w << 8) | p[i];
    return w;
}

static inline uint64_t maskOf(unsigned len) {
    return len >= 8 ? ~(uint64_t)0 : (((uint64_t)1 << (8 * len)) - 1);
}

static inline unsigned slotOf(uint64_t w) {
    return (unsigned)(((w & 0xffffff) * 0x9e3779b1u) >> (32 - SYMTAB_LOOKUP_BITS)) & ((1u << SYMTAB_LOOKUP_BITS) - 1);
}

/* --- Coding --- */

/* The code for the input whose next bytes are `w` (`left` > 0 of them
 * remain: bytes of w past the end are zero) and the bytes it covers. */
static inline unsigned nextCode(const symtab *t, uint64_t w, size_t left, unsigned *code) {
    if (left >= 3) {
        const symtabSlot *s = &t->lookup[slotOf(w)];
        if (s->len && s->len <= left && (w & maskOf(s->len)) == s->sym) {
            *code = s->code;
            return s->len;
        }
    }
    uint16_t e = left >= 2 ? t->pair[w & 0xffff] : t->byte[w & 0xff];
    *code = e & 0xff;
    return e >> 8;
}

static inline size_t emit(unsigned char *out, size_t o, unsigned code, unsigned char first) {
    out[o++] = (unsigned char)code;
    if (code == SYMTAB_ESCAPE) out[o++] = first;
    return o;
}

size_t symtabEncode(const symtab *t, const unsigned char *in, size_t len, unsigned char *out) {
    size_t i = 0, o = 0;
    unsigned code;
    while (i + 8 <= len) {
        unsigned n = nextCode(t, load64(in + i), len - i, &code);
        o = emit(out, o, code, in[i]);
        i += n;
    }
    while (i < len) {
        unsigned n = nextCode(t, loadTail(in + i, len - i), len - i, &code);
        o = emit(out, o, code, in[i]);
        i += n;
    }
    return o;
}

size_t symtabDecode(const symtab *t, const unsigned char *in, size_t len, unsigned char *out, size_t cap) {
    return symtabDecodePrefix(t, in, len, out, cap, SIZE_MAX);
}

size_t symtabDecodePrefix(const symtab *t,
                          const unsigned char *in,
                          size_t len,
                          unsigned char *out,
                          size_t cap,
                          size_t want) {
    size_t o = 0;
    unsigned unused = 0; /* becomes non-zero at a code with no symbol */
    for (size_t i = 0; i < len && o < want;) {
        unsigned code = in[i++];
        if (code != SYMTAB_ESCAPE && cap - o >= 8) {
            /* The common case: all 8 bytes of the word stored, the symbol's
             * own ones kept. */
            unsigned n = t->len[code];
            store64(out + o, t->sym[code]);
            unused |= n == 0;
            o += n;
        } else if (code == SYMTAB_ESCAPE) {
            if (i == len || o == cap) return SIZE_MAX;
            out[o++] = in[i++];
        } else {
            unsigned n = t->len[code];
            if (n == 0 || cap - o < n) return SIZE_MAX;
            for (unsigned b = 0; b < n; b++) out[o + b] = (unsigned char)(t->sym[code] >> (8 * b));
            o += n;
        }
    }
    return unused ? SIZE_MAX : o;
}

/* Whether any of the 8 bytes of w is the escape. */
static inline int hasEscape(uint64_t w) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    return ((~w - ones) & w & highs) != 0;
}

size_t symtabDecodedLen(const symtab *t, const unsigned char *in, size_t len) {
    size_t o = 0;
    unsigned unused = 0; /* becomes non-zero at a code with no symbol */
    for (size_t i = 0; i < len;) {
        /* Eight codes at once where none of them is the escape: their
         * lengths add up independently (most words of short texts). */
        if (len - i >= 8 && !hasEscape(load64(in + i))) {
            const unsigned char *c = in + i;
            unsigned a = t->len[c[0]], b = t->len[c[1]], d = t->len[c[2]], e = t->len[c[3]];
            unsigned f = t->len[c[4]], g = t->len[c[5]], h = t->len[c[6]], k = t->len[c[7]];
            unused |= !a | !b | !d | !e | !f | !g | !h | !k;
            o += a + b + d + e + f + g + h + k;
            i += 8;
            continue;
        }
        unsigned code = in[i++];
        if (code == SYMTAB_ESCAPE) {
            if (i == len) return SIZE_MAX;
            i++;
            o++;
        } else if (t->len[code] == 0) {
            return SIZE_MAX;
        } else {
            o += t->len[code];
        }
    }
    return unused ? SIZE_MAX : o;
}

/* --- Building a table --- */

typedef struct {
    uint64_t sym;
    uint64_t gain;
    uint8_t len;
} symtabCand;

/* Empties the table: every byte escaped. */
static void tableReset(symtab *t) {
    memset(t->len, 0, sizeof(t->len));
    memset(t->lookup, 0, sizeof(t->lookup));
    t->nsymbols = 0;
    for (int b = 0; b < 256; b++) t->byte[b] = (1 << 8) | SYMTAB_ESCAPE;
}

/* Adds a symbol if it fits the lookup; returns whether it did. */
static int tableAdd(symtab *t, uint64_t sym, unsigned len) {
    if (t->nsymbols == SYMTAB_MAX_SYMBOLS) return 0;
    unsigned code = (unsigned)t->nsymbols;
    if (len >= 3) {
        symtabSlot *s = &t->lookup[slotOf(sym)];
        if (s->len) return 0;
        s->sym = sym;
        s->len = (uint8_t)len;
        s->code = (uint8_t)code;
    } else if (len == 1) {
        t->byte[sym & 0xff] = (uint16_t)((1 << 8) | code);
    }
    t->sym[code] = sym;
    t->len[code] = (uint8_t)len;
    t->nsymbols++;
    return 1;
}

/* Fills pair[] once the symbols are in: a two-byte symbol where there is
 * one, else the first byte's entry. */
static void tableFinish(symtab *t) {
    for (unsigned x = 0; x < 65536; x++) t->pair[x] = t->byte[x & 0xff];
    for (int c = 0; c < t->nsymbols; c++) {
        if (t->len[c] == 2) t->pair[t->sym[c] & 0xffff] = (uint16_t)((2 << 8) | c);
    }
}

static int candBySymbol(const void *a, const void *b) {
    const symtabCand *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->sym < y->sym ? -1 : x->sym > y->sym;
}

static int candByGain(const void *a, const void *b) {
    const symtabCand *x = a, *y = b;
    if (x->gain != y->gain) return x->gain > y->gain ? -1 : 1;
    return candBySymbol(a, b);
}

/* The symbol a training index stands for: a code, or an escaped byte. */
static void candSymbol(const symtab *t, unsigned idx, uint64_t *sym, unsigned *len) {
    if (idx >= 256) {
        *sym = idx - 256;
        *len = 1;
    } else {
        *sym = t->sym[idx];
        *len = t->len[idx];
    }
}

/* Codes every sample with `t`, counting the uses of each index and of
 * each pair of indexes in a row. */
static void countUses(const symtab *t,
                      const unsigned char *const *samples,
                      const size_t *lens,
                      size_t n,
                      uint32_t *count1,
                      uint32_t *count2) {
    for (size_t s = 0; s < n; s++) {
        const unsigned char *p = samples[s];
        unsigned prev = SYMTAB_CAND;
        for (size_t i = 0; i < lens[s];) {
            unsigned code;
            unsigned k = nextCode(t, loadTail(p + i, lens[s] - i), lens[s] - i, &code);
            unsigned idx = code == SYMTAB_ESCAPE ? 256u + p[i] : code;
            count1[idx]++;
            if (prev != SYMTAB_CAND) count2[prev * SYMTAB_CAND + idx]++;
            prev = idx;
            i += k;
        }
    }
}

/* The candidates of the next table, gains summed per distinct symbol;
 * returns their number. */
static size_t gatherCandidates(const symtab *t, const uint32_t *count1, const uint32_t *count2, symtabCand **out) {
    size_t cap = 1024, n = 0;
    symtabCand *c = zmalloc(cap * sizeof(*c));
    for (unsigned a = 0; a < SYMTAB_CAND; a++) {
        if (!count1[a]) continue;
        uint64_t sa;
        unsigned la;
        candSymbol(t, a, &sa, &la);
        if (n == cap) c = zrealloc(c, (cap *= 2) * sizeof(*c));
        c[n++] = (symtabCand){.sym = sa, .len = (uint8_t)la, .gain = (uint64_t)count1[a] * la * (la == 1 ? SYMTAB_BYTE_BOOST : 1)};
        if (la == SYMTAB_MAX_LEN) continue;
        for (unsigned b = 0; b < SYMTAB_CAND; b++) {
            uint32_t k = count2[a * SYMTAB_CAND + b];
            if (!k) continue;
            uint64_t sb;
            unsigned lb;
            candSymbol(t, b, &sb, &lb);
            unsigned l = la + lb > SYMTAB_MAX_LEN ? SYMTAB_MAX_LEN : la + lb;
            uint64_t s = (sa | (sb << (8 * la))) & maskOf(l);
            if (n == cap) c = zrealloc(c, (cap *= 2) * sizeof(*c));
            c[n++] = (symtabCand){.sym = s, .len = (uint8_t)l, .gain = (uint64_t)k * l};
        }
    }
    /* Gains summed per distinct symbol: open addressing on the symbol. */
    size_t slots = 1;
    while (slots < 2 * n) slots *= 2;
    uint32_t *at = zmalloc(slots * sizeof(*at));
    memset(at, 0xff, slots * sizeof(*at));
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        size_t h = (size_t)(((c[i].sym ^ ((uint64_t)c[i].len << 59)) * 0x9e3779b97f4a7c15ULL) >> 20) & (slots - 1);
        while (at[h] != UINT32_MAX && (c[at[h]].sym != c[i].sym || c[at[h]].len != c[i].len)) h = (h + 1) & (slots - 1);
        if (at[h] == UINT32_MAX) {
            at[h] = (uint32_t)m;
            c[m++] = c[i];
        } else {
            c[at[h]].gain += c[i].gain;
        }
    }
    zfree(at);
    *out = c;
    return m;
}

/* Moves the `k` best candidates (first in candByGain's order) to the
 * front, in no particular order: a quickselect. */
static void selectBest(symtabCand *c, size_t m, size_t k) {
    size_t lo = 0, hi = m;
    while (hi - lo > 1) {
        symtabCand tmp, pivot;
        size_t mid = lo + (hi - lo) / 2, store = lo;
        tmp = c[mid], c[mid] = c[hi - 1], c[hi - 1] = tmp;
        pivot = c[hi - 1];
        for (size_t i = lo; i < hi - 1; i++) {
            if (candByGain(&c[i], &pivot) < 0) tmp = c[i], c[i] = c[store], c[store++] = tmp;
        }
        tmp = c[store], c[store] = c[hi - 1], c[hi - 1] = tmp;
        /* Now c[lo, store) come before the pivot at `store`, the rest after. */
        if (store == k || store + 1 == k) return;
        if (k < store) {
            hi = store;
        } else {
            lo = store + 1;
        }
    }
}

/* Training in steps: the state between them. */
struct symtabTrainer {
    const unsigned char *const *samples;
    const size_t *lens;
    size_t n;
    size_t next; /* the next sample to count in this generation */
    int gen;     /* generations done */
    symtab *t;   /* the table of the generations done */
    uint32_t *count1, *count2;
};

symtabTrainer *symtabTrainerCreate(const unsigned char *const *samples, const size_t *lens, size_t n) {
    symtabTrainer *tr = zmalloc(sizeof(*tr));
    tr->samples = samples;
    tr->lens = lens;
    tr->n = n;
    tr->next = 0;
    tr->gen = 0;
    tr->t = zmalloc(sizeof(symtab));
    tableReset(tr->t);
    tableFinish(tr->t);
    tr->count1 = zcalloc(SYMTAB_CAND * sizeof(uint32_t));
    tr->count2 = zcalloc((size_t)SYMTAB_CAND * SYMTAB_CAND * sizeof(uint32_t));
    return tr;
}

/* Builds the next generation's table from the counts, and clears them. */
static void nextGeneration(symtabTrainer *tr) {
    symtabCand *c;
    size_t m = gatherCandidates(tr->t, tr->count1, tr->count2, &c);
    /* Only the best few are needed in order: sorting them alone keeps a
     * generation's end short (a full sort of tens of thousands took most
     * of a training's time). The rest is sorted only if they do not
     * yield 255 symbols that fit the lookup. */
    size_t best = m < SYMTAB_BEST ? m : SYMTAB_BEST;
    selectBest(c, m, best);
    qsort(c, best, sizeof(*c), candByGain);
    tableReset(tr->t);
    for (size_t i = 0; i < m && tr->t->nsymbols < SYMTAB_MAX_SYMBOLS; i++) {
        if (i == best) qsort(c + best, m - best, sizeof(*c), candByGain);
        tableAdd(tr->t, c[i].sym, c[i].len);
    }
    tableFinish(tr->t);
    zfree(c);
    memset(tr->count1, 0, SYMTAB_CAND * sizeof(uint32_t));
    memset(tr->count2, 0, (size_t)SYMTAB_CAND * SYMTAB_CAND * sizeof(uint32_t));
    tr->next = 0;
    tr->gen++;
}

int symtabTrainerStep(symtabTrainer *tr, size_t samples) {
    if (tr->gen == SYMTAB_GENERATIONS) return 1;
    size_t k = tr->n - tr->next < samples ? tr->n - tr->next : samples;
    countUses(tr->t, tr->samples + tr->next, tr->lens + tr->next, k, tr->count1, tr->count2);
    tr->next += k;
    if (tr->next == tr->n) nextGeneration(tr);
    return tr->gen == SYMTAB_GENERATIONS;
}

symtab *symtabTrainerFinish(symtabTrainer *tr) {
    while (!symtabTrainerStep(tr, SIZE_MAX))
        ;
    symtab *t = tr->t;
    zfree(tr->count1);
    zfree(tr->count2);
    zfree(tr);
    return t;
}

void symtabTrainerFree(symtabTrainer *tr) {
    symtabFree(tr->t);
    zfree(tr->count1);
    zfree(tr->count2);
    zfree(tr);
}

symtab *symtabTrain(const unsigned char *const *samples, const size_t *lens, size_t n) {
    return symtabTrainerFinish(symtabTrainerCreate(samples, lens, n));
}

void symtabFree(symtab *t) {
    zfree(t);
}

int symtabSymbols(const symtab *t) {
    return t->nsymbols;
}

size_t symtabBytes(const symtab *t) {
    return zmalloc_size((void *)t);
}
