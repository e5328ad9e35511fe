/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * libFuzzer target for keyed trees (the members of big sets): the input
 * drives a keyed tree and the model of zbtset_diff.h side by side, a scan
 * running across the other operations; any difference, failed invariant,
 * sanitizer report or crash is a finding. Built with small nodes, so that
 * short inputs reach deep trees.
 *
 *   make fuzz-zbtset FUZZ_SECONDS=600
 */
#include "zbtset_diff.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int seeded;
    if (!seeded) {
        zbtSetHashSeed(zsSeed);
        seeded = 1;
    }
    static zsState st;
    zsInit(&st);
    zsReader r = {data, data + size};
    const char *err = NULL;
    while (!err && r.p < r.end) {
        err = zsStep(&st, &r);
        if (!err) err = zbtCheck(st.t);
    }
    /* A scan under way is taken to its end, with nothing changing. */
    while (!err && st.scanning) err = zsScanStep(&st, 7);
    if (!err) err = zsFull(&st);
    if (err) {
        fprintf(stderr, "keyed tree differs from the model after %lu operations: %s\n", st.ops, err);
        abort();
    }
    zsFree(&st);
    return 0;
}
