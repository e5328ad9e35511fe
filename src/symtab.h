/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * symtab.h - a static table of up to 255 symbols of 1 to 8 bytes, trained
 * from samples, that codes short strings one by one (see symtab.c).
 */
#ifndef SYMTAB_H
#define SYMTAB_H

#include <stddef.h>
#include <stdint.h>

typedef struct symtab symtab;

/* The most bytes symtabEncode() writes for `len` bytes of input: every
 * byte escaped. */
#define SYMTAB_ENCODE_BOUND(len) (2 * (size_t)(len))

/* Trains a table from `n` samples (each `lens[i]` bytes at `samples[i]`).
 * Never fails; with no samples the table codes every byte as an escape. */
symtab *symtabTrain(const unsigned char *const *samples, const size_t *lens, size_t n);
void symtabFree(symtab *t);

/* The same training in steps, for a caller that must not stop for long:
 * the samples stay the caller's and unchanged until the trainer is done.
 * A step codes up to `samples` samples (and, at the end of a generation,
 * chooses the next table's symbols); it returns 1 once training is done.
 * Finish runs what is left and returns the table; Free drops it all. */
typedef struct symtabTrainer symtabTrainer;
symtabTrainer *symtabTrainerCreate(const unsigned char *const *samples, const size_t *lens, size_t n);
int symtabTrainerStep(symtabTrainer *tr, size_t samples);
symtab *symtabTrainerFinish(symtabTrainer *tr);
void symtabTrainerFree(symtabTrainer *tr);

/* Codes `len` bytes of `in` into `out`, which has room for
 * SYMTAB_ENCODE_BOUND(len) bytes; returns the bytes written. */
size_t symtabEncode(const symtab *t, const unsigned char *in, size_t len, unsigned char *out);

/* Decodes `len` bytes of codes into `out`, which has room for `cap` bytes.
 * Returns the bytes written, or SIZE_MAX when the codes are malformed (an
 * escape with no byte after it) or decode to more than `cap` bytes. */
size_t symtabDecode(const symtab *t, const unsigned char *in, size_t len, unsigned char *out, size_t cap);

/* The same, stopping once `want` or more bytes are written (the codes
 * after are neither decoded nor checked): returns the bytes written, fewer
 * than `want` only when the codes end first. */
size_t symtabDecodePrefix(const symtab *t,
                          const unsigned char *in,
                          size_t len,
                          unsigned char *out,
                          size_t cap,
                          size_t want);

/* The decoded length of `len` bytes of codes, or SIZE_MAX if malformed. */
size_t symtabDecodedLen(const symtab *t, const unsigned char *in, size_t len);

/* The table's symbols and the bytes it takes in memory. */
int symtabSymbols(const symtab *t);
size_t symtabBytes(const symtab *t);

#endif
