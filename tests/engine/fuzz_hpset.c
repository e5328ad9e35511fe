/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * libFuzzer target for big sets of strings (hpset.c): the input drives a
 * set and the model of hps_diff.h side by side (inserts, deletes, lookups
 * read ahead or not, random members and pops, scans across writes, a
 * defrag in steps, dismisses, pages shared with a fork child), hpsCheck()
 * after each operation. Built with small segments (HPS_SEG_CLASSES), so
 * that short inputs split and merge them. Any difference, failed
 * invariant, sanitizer report or crash is a finding.
 *
 *   make fuzz-hpset FUZZ_SECONDS=600
 */
#include "hps_diff.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static hpdState st;
    static int seeded;
    if (!seeded) {
        uint8_t seed[16] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3};
        hpsSetHashSeed(seed);
        seeded = 1;
    }
    hpdInit(&st);
    hpdReader r = {data, data + size};
    const char *err = NULL;
    while (!err && r.p < r.end) {
        err = hpdStep(&st, &r);
        if (!err) err = hpsCheck(st.s);
    }
    if (!err) err = hpdFull(&st);
    if (err) {
        fprintf(stderr, "hpset differs from the model after %lu operations: %s\n", st.ops, err);
        abort();
    }
    hpdFree(&st);
    return 0;
}
