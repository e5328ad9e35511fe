/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * libFuzzer target for big integer sets (ibset.c): the input drives a set
 * and the model of ibs_diff.h side by side, values of every kind mixed
 * (dense runs, random below 10^8, the whole range, clusters, the edges), a
 * defrag in steps running across the other operations; ibsCheck() after
 * each operation. Any difference, failed invariant, sanitizer report or
 * crash is a finding.
 *
 *   make fuzz-ibset FUZZ_SECONDS=600
 */
#include "ibs_diff.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static ibdState st;
    ibdInit(&st);
    ibdReader r = {data, data + size};
    const char *err = NULL;
    while (!err && r.p < r.end) {
        err = ibdStep(&st, &r);
        if (!err) err = ibsCheck(st.s);
    }
    if (!err) err = ibdFull(&st);
    if (err) {
        fprintf(stderr, "ibset differs from the model after %lu operations: %s\n", st.ops, err);
        abort();
    }
    ibdFree(&st);
    return 0;
}
