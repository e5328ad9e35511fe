/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * memberttl.h: what t_member_ttl.c (the commands of members that expire)
 * shares with the files around it.
 */

#ifndef MEMBERTTL_H
#define MEMBERTTL_H

#include <string.h>

#include "sds.h"

/* Whether argument s is the option `name` (lower-case letters), in any
 * case: the lengths first, which settles most misses without a call.
 * The commands' own parsing and the read-ahead's search for MEMBERS
 * (memberprefetch.c) both ask it. */
static inline int memberTtlOptIs(sds s, const char *name) {
    size_t len = strlen(name);
    if (sdslen(s) != len) return 0;
    for (size_t i = 0; i < len; i++)
        if ((s[i] | 0x20) != name[i]) return 0;
    return 1;
}

#endif
