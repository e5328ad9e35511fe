/*
 * Copyright (c) 2026, the authors of this fork of Valkey.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * libFuzzer target: the input drives the engine and the reference model of
 * zbt_diff.h side by side; any difference, failed invariant, sanitizer
 * report or crash is a finding. Built with small nodes, so that short
 * inputs reach deep trees.
 *
 *   make fuzz FUZZ_SECONDS=600
 */
#include "zbt_diff.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int seeded;
    if (!seeded) {
        uint8_t seed[16] = "fuzzing zbtree!";
        zbtSetHashSeed(seed);
        seeded = 1;
    }
    if (size < 1) return 0;
    diffLexMode = data[0] & 1;
    static diffState st;
    diffInit(&st);
    reader r = {data + 1, data + size};
    const char *err = NULL;
    while (!err && r.p < r.end) {
        err = diffStep(&st, &r);
        if (!err) err = zbtCheck(st.t);
    }
    if (!err) err = diffFull(&st);
    if (err) {
        fprintf(stderr, "zbtree differs from the model after %lu operations: %s\n", st.ops, err);
        abort();
    }
    diffFree(&st);
    return 0;
}
