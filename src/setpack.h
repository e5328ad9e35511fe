/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * How a big set of strings stores a member: packed in 4, 5 or 6 bits a
 * character when every character is of a small alphabet. See setpack.c.
 */
#ifndef SETPACK_H
#define SETPACK_H

#include <stddef.h>

/* Members up to this long are packed when they can be; the buffers below
 * hold any packed member and any decoded one. */
#define SPK_MAX_CHARS 128
#define SPK_ENC_BUF (1 + SPK_MAX_CHARS * 6 / 8)
#define SPK_DEC_BUF SPK_MAX_CHARS

/* The bytes to store for member m, set in *out: m itself, buf (of
 * SPK_ENC_BUF bytes), or, for a member that must be escaped and is longer
 * than buf, a new allocation that spkRelease frees. Returns their length. */
size_t spkEncode(const unsigned char *m, size_t len, unsigned char *buf, const unsigned char **out);
void spkRelease(const unsigned char *out, const unsigned char *m, const unsigned char *buf);

/* The member stored as e, set in *out: inside e, or unpacked into buf (of
 * SPK_DEC_BUF bytes). Returns its length. */
size_t spkDecode(const unsigned char *e, size_t elen, unsigned char *buf, const unsigned char **out);

#endif
