# The sorted-set engine built on its own: cmocka unit tests, the same under
# AddressSanitizer and UndefinedBehaviorSanitizer, the libFuzzer targets and
# the engine's benchmark. Included by the top-level Makefile. test_zbtree
# and fuzz_zbtree drive sorted sets; test_ibset and fuzz_ibset big integer
# sets (ibset.c); test_hpset and fuzz_hpset big sets of strings (hpset.c);
# test_setpack and fuzz_setpack the packed form a big set stores its
# members in (setpack.c); test_symtab and fuzz_symtab the symbol-table
# codec of short values (symtab.c).
#
# The engine links only upstream's allocator and small helpers, compiled
# here from the assembled tree: zmalloc.c (with the bundled jemalloc, so the
# byte counts are the server's; with libc malloc under the sanitizers),
# serverassert.c and siphash.c.

ENGINE_SRC := src/zbtree.c src/zmindex.c
ENGINE_HDR := src/zbtree.h src/zmindex.h src/countedalloc.h tests/engine/zbt_diff.h
IBSET_SRC := src/ibset.c
IBSET_HDR := src/ibset.h src/countedalloc.h tests/engine/ibs_diff.h
HPSET_SRC := src/hpset.c
HPSET_HDR := src/hpset.h src/countedalloc.h tests/engine/hps_diff.h
# Six size classes (segments of at most 1 KiB): a few hundred members
# split and merge segments, so the differential run checks both often.
HPSET_SMALL := -DHPS_SEG_CLASSES=6
SETPACK_SRC := src/setpack.c
SETPACK_HDR := src/setpack.h
ENGINE_HELPERS := $(TREE)/src/zmalloc.c $(TREE)/src/serverassert.c $(TREE)/src/siphash.c
ENGINE_OUT := build/engine
ENGINE_WARN := -Wall -W -Wno-missing-field-initializers -Wstrict-prototypes
ENGINE_INC := -Isrc -Itests/engine -I$(TREE)/src
ENGINE_JEMALLOC := -I$(TREE)/deps/jemalloc/include -DUSE_JEMALLOC
ENGINE_JEMALLOC_LIB := $(TREE)/deps/jemalloc/lib/libjemalloc.a -lm -ldl -lpthread
ENGINE_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_SECONDS ?= 600

$(ENGINE_OUT)/test_zbtree: tests/engine/test_zbtree.c $(ENGINE_SRC) $(ENGINE_HDR) | all
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g $(ENGINE_WARN) $(ENGINE_INC) $(ENGINE_JEMALLOC) -o $@ \
		tests/engine/test_zbtree.c $(ENGINE_SRC) $(ENGINE_HELPERS) $(ENGINE_JEMALLOC_LIB) -lcmocka

# Small nodes: a few hundred entries make a tree four levels deep, so the
# differential run checks splits and merges at every level after each step.
ENGINE_SMALL := -DZBT_LEAF_BYTES=160 -DZBT_INNER_BYTES=256

$(ENGINE_OUT)/test_zbtree_small: tests/engine/test_zbtree.c $(ENGINE_SRC) $(ENGINE_HDR) | all
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g $(ENGINE_SMALL) $(ENGINE_WARN) $(ENGINE_INC) $(ENGINE_JEMALLOC) -o $@ \
		tests/engine/test_zbtree.c $(ENGINE_SRC) $(ENGINE_HELPERS) $(ENGINE_JEMALLOC_LIB) -lcmocka

$(ENGINE_OUT)/test_zbtree_san: tests/engine/test_zbtree.c $(ENGINE_SRC) $(ENGINE_HDR) | all
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O1 -g $(ENGINE_SMALL) $(ENGINE_SAN) $(ENGINE_WARN) $(ENGINE_INC) -o $@ \
		tests/engine/test_zbtree.c $(ENGINE_SRC) $(ENGINE_HELPERS) -lm -lcmocka

# Big integer sets, built plain and under the sanitizers. Their tests link
# the big sets of strings too, only to tell the two apart (ibsIsSet). All
# of them take about 16 s in the plain build, half of it the differential
# run (a million operations, ibsCheck after each); IBS_DIFF_OPS scales the
# run as ZBT_DIFF_OPS does the others (a fifth under the sanitizers: 15 s).
$(ENGINE_OUT)/test_ibset: tests/engine/test_ibset.c $(IBSET_SRC) $(IBSET_HDR) $(HPSET_SRC) src/hpset.h | all
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g $(ENGINE_WARN) $(ENGINE_INC) $(ENGINE_JEMALLOC) -o $@ \
		tests/engine/test_ibset.c $(IBSET_SRC) $(HPSET_SRC) $(ENGINE_HELPERS) $(ENGINE_JEMALLOC_LIB) -lcmocka

$(ENGINE_OUT)/test_ibset_san: tests/engine/test_ibset.c $(IBSET_SRC) $(IBSET_HDR) $(HPSET_SRC) src/hpset.h | all
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O1 -g $(ENGINE_SAN) $(ENGINE_WARN) $(ENGINE_INC) -o $@ \
		tests/engine/test_ibset.c $(IBSET_SRC) $(HPSET_SRC) $(ENGINE_HELPERS) -lm -lcmocka

# Packed set members, built plain and under the sanitizers (the codec and
# the allocator alone): under a second in the plain build, about 2 s under
# the sanitizers.
$(ENGINE_OUT)/test_setpack: tests/engine/test_setpack.c $(SETPACK_SRC) $(SETPACK_HDR) | all
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g $(ENGINE_WARN) $(ENGINE_INC) $(ENGINE_JEMALLOC) -o $@ \
		tests/engine/test_setpack.c $(SETPACK_SRC) $(ENGINE_HELPERS) $(ENGINE_JEMALLOC_LIB) -lcmocka

$(ENGINE_OUT)/test_setpack_san: tests/engine/test_setpack.c $(SETPACK_SRC) $(SETPACK_HDR) | all
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O1 -g $(ENGINE_SAN) $(ENGINE_WARN) $(ENGINE_INC) -o $@ \
		tests/engine/test_setpack.c $(SETPACK_SRC) $(ENGINE_HELPERS) -lm -lcmocka

# The benchmark compares with upstream's listpack: it links listpack.c and
# what listpack.c needs (util.c, sds.c, sha256.c, fpconv; since 9.0 also
# valkey_strtod.c and monotonic.c, which util.c calls).
ENGINE_LISTPACK := $(TREE)/src/listpack.c $(TREE)/src/util.c $(TREE)/src/sds.c $(TREE)/src/sha256.c \
	$(TREE)/src/valkey_strtod.c $(TREE)/src/monotonic.c \
	$(TREE)/deps/fpconv/libfpconv.a

$(ENGINE_OUT)/bench_zbtree: tests/engine/bench_zbtree.c $(ENGINE_SRC) $(ENGINE_HDR) | all
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O3 -g $(ENGINE_WARN) $(ENGINE_INC) -I$(TREE)/deps/fpconv -I$(TREE)/deps/fast_float $(ENGINE_JEMALLOC) -o $@ \
		tests/engine/bench_zbtree.c $(ENGINE_SRC) $(ENGINE_HELPERS) $(ENGINE_LISTPACK) $(ENGINE_JEMALLOC_LIB)

$(ENGINE_OUT)/fuzz_zbtree: tests/engine/fuzz_zbtree.c $(ENGINE_SRC) $(ENGINE_HDR) | all
	@utils/install-deps.sh fuzz
	@mkdir -p $(@D)
	clang -std=gnu11 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		$(ENGINE_SMALL) $(ENGINE_INC) -o $@ tests/engine/fuzz_zbtree.c $(ENGINE_SRC) $(ENGINE_HELPERS) -lm

# Big sets of strings, built the same three ways. The differential run
# (HPS_DIFF_OPS operations: half a million in the plain build, about 15 s)
# checks every invariant after each operation while the set is small.
$(ENGINE_OUT)/test_hpset: tests/engine/test_hpset.c $(HPSET_SRC) $(HPSET_HDR) | all
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g $(ENGINE_WARN) $(ENGINE_INC) $(ENGINE_JEMALLOC) -o $@ \
		tests/engine/test_hpset.c $(HPSET_SRC) $(ENGINE_HELPERS) $(ENGINE_JEMALLOC_LIB) -lcmocka

$(ENGINE_OUT)/test_hpset_small: tests/engine/test_hpset.c $(HPSET_SRC) $(HPSET_HDR) | all
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g $(HPSET_SMALL) $(ENGINE_WARN) $(ENGINE_INC) $(ENGINE_JEMALLOC) -o $@ \
		tests/engine/test_hpset.c $(HPSET_SRC) $(ENGINE_HELPERS) $(ENGINE_JEMALLOC_LIB) -lcmocka

$(ENGINE_OUT)/test_hpset_san: tests/engine/test_hpset.c $(HPSET_SRC) $(HPSET_HDR) | all
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O1 -g $(HPSET_SMALL) $(ENGINE_SAN) $(ENGINE_WARN) $(ENGINE_INC) -o $@ \
		tests/engine/test_hpset.c $(HPSET_SRC) $(ENGINE_HELPERS) -lm -lcmocka

$(ENGINE_OUT)/fuzz_hpset: tests/engine/fuzz_hpset.c $(HPSET_SRC) $(HPSET_HDR) | all
	@utils/install-deps.sh fuzz
	@mkdir -p $(@D)
	clang -std=gnu11 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		$(HPSET_SMALL) $(ENGINE_INC) -o $@ tests/engine/fuzz_hpset.c $(HPSET_SRC) $(ENGINE_HELPERS) -lm

# Small blocks and pages for the fuzzer: 56 bytes of data a block, four
# blocks a page, so that short inputs split and merge pages too.
IBSET_SMALL := -DIB_BLOCK_BYTES=64 -DIB_PAGE_BLOCKS=4

$(ENGINE_OUT)/fuzz_ibset: tests/engine/fuzz_ibset.c $(IBSET_SRC) $(IBSET_HDR) | all
	@utils/install-deps.sh fuzz
	@mkdir -p $(@D)
	clang -std=gnu11 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		$(IBSET_SMALL) $(ENGINE_INC) -o $@ tests/engine/fuzz_ibset.c $(IBSET_SRC) $(ENGINE_HELPERS) -lm

$(ENGINE_OUT)/fuzz_setpack: tests/engine/fuzz_setpack.c $(SETPACK_SRC) $(SETPACK_HDR) | all
	@utils/install-deps.sh fuzz
	@mkdir -p $(@D)
	clang -std=gnu11 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		$(ENGINE_INC) -o $@ tests/engine/fuzz_setpack.c $(SETPACK_SRC) $(ENGINE_HELPERS) -lm

# A key's expire time in four bytes (keyttl.c), built plain and under the
# sanitizers: it needs nothing of the server. About a second in the plain
# build (the year of a cache and the differential run), three under the
# sanitizers.
KEYTTL_SRC := src/keyttl.c
KEYTTL_HDR := src/keyttl.h

$(ENGINE_OUT)/test_keyttl: tests/engine/test_keyttl.c $(KEYTTL_SRC) $(KEYTTL_HDR) | all
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g $(ENGINE_WARN) $(ENGINE_INC) -o $@ tests/engine/test_keyttl.c $(KEYTTL_SRC) -lcmocka

$(ENGINE_OUT)/test_keyttl_san: tests/engine/test_keyttl.c $(KEYTTL_SRC) $(KEYTTL_HDR) | all
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O1 -g $(ENGINE_SAN) $(ENGINE_WARN) $(ENGINE_INC) -o $@ tests/engine/test_keyttl.c $(KEYTTL_SRC) -lcmocka

# Which keys have an expire time (vkeys.c), built with upstream's kvstore.c
# and hashtable.c and what they link (util.c's hash mixer among them), plain
# and under the sanitizers: about 2 s plain, 15 s under the sanitizers with
# a fifth of the differential run.
VKEYS_SRC := src/vkeys.c
VKEYS_HDR := src/vkeys.h
VKEYS_UPSTREAM := $(addprefix $(TREE)/src/,kvstore.c hashtable.c adlist.c monotonic.c mt19937-64.c siphash.c \
	zmalloc.c serverassert.c util.c sds.c sha256.c valkey_strtod.c) $(TREE)/deps/fpconv/libfpconv.a
VKEYS_INC := $(ENGINE_INC) -I$(TREE)/deps/fpconv -I$(TREE)/deps/fast_float

$(ENGINE_OUT)/test_vkeys: tests/engine/test_vkeys.c $(VKEYS_SRC) $(VKEYS_HDR) | all
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g $(ENGINE_WARN) $(VKEYS_INC) $(ENGINE_JEMALLOC) -o $@ \
		tests/engine/test_vkeys.c $(VKEYS_SRC) $(VKEYS_UPSTREAM) $(ENGINE_JEMALLOC_LIB) -lcmocka

$(ENGINE_OUT)/test_vkeys_san: tests/engine/test_vkeys.c $(VKEYS_SRC) $(VKEYS_HDR) | all
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O1 -g $(ENGINE_SAN) $(ENGINE_WARN) $(VKEYS_INC) -o $@ \
		tests/engine/test_vkeys.c $(VKEYS_SRC) $(VKEYS_UPSTREAM) -lm -lcmocka

# Symbol tables for short strings (symtab.c), built plain and under the
# sanitizers: about 2 s plain (a million values through two hundred
# tables), the sanitizers' a fifth of it. Its libFuzzer target, and the
# codec study (utils/bench/codec-study), which links zstd as well.
SYMTAB_SRC := src/symtab.c
SYMTAB_HDR := src/symtab.h

$(ENGINE_OUT)/test_symtab: tests/engine/test_symtab.c $(SYMTAB_SRC) $(SYMTAB_HDR) | all
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g $(ENGINE_WARN) $(ENGINE_INC) $(ENGINE_JEMALLOC) -o $@ \
		tests/engine/test_symtab.c $(SYMTAB_SRC) $(ENGINE_HELPERS) $(ENGINE_JEMALLOC_LIB) -lcmocka

$(ENGINE_OUT)/test_symtab_san: tests/engine/test_symtab.c $(SYMTAB_SRC) $(SYMTAB_HDR) | all
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O1 -g $(ENGINE_SAN) $(ENGINE_WARN) $(ENGINE_INC) -o $@ \
		tests/engine/test_symtab.c $(SYMTAB_SRC) $(ENGINE_HELPERS) -lm -lcmocka

$(ENGINE_OUT)/fuzz_symtab: tests/engine/fuzz_symtab.c $(SYMTAB_SRC) $(SYMTAB_HDR) | all
	@utils/install-deps.sh fuzz
	@mkdir -p $(@D)
	clang -std=gnu11 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		$(ENGINE_INC) -o $@ tests/engine/fuzz_symtab.c $(SYMTAB_SRC) $(ENGINE_HELPERS) -lm

$(ENGINE_OUT)/codec-study: utils/bench/codec-study.c $(SYMTAB_SRC) $(SYMTAB_HDR) | all
	@utils/install-deps.sh bench
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g $(ENGINE_WARN) $(ENGINE_INC) $(ENGINE_JEMALLOC) -o $@ \
		utils/bench/codec-study.c $(SYMTAB_SRC) $(ENGINE_HELPERS) $(ENGINE_JEMALLOC_LIB) -lzstd

.PHONY: test-engine test-engine-san test-engine-memory fuzz fuzz-zbtree fuzz-ibset fuzz-hpset fuzz-setpack \
	fuzz-symtab bench-engine

test-engine: $(ENGINE_OUT)/test_zbtree $(ENGINE_OUT)/test_zbtree_small $(ENGINE_OUT)/test_ibset \
		$(ENGINE_OUT)/test_hpset $(ENGINE_OUT)/test_hpset_small $(ENGINE_OUT)/test_setpack \
		$(ENGINE_OUT)/test_keyttl $(ENGINE_OUT)/test_vkeys $(ENGINE_OUT)/test_symtab
	$(ENGINE_OUT)/test_zbtree
	ZBT_TEST_HUGE=0 $(ENGINE_OUT)/test_zbtree_small
	$(ENGINE_OUT)/test_ibset
	HPS_DIFF_OPS=500000 $(ENGINE_OUT)/test_hpset
	HPS_DIFF_OPS=300000 $(ENGINE_OUT)/test_hpset_small
	$(ENGINE_OUT)/test_setpack
	$(ENGINE_OUT)/test_keyttl
	$(ENGINE_OUT)/test_vkeys
	VKEYS_SEED=0x5eed VKEYS_DIFF_OPS=300000 $(ENGINE_OUT)/test_vkeys
	$(ENGINE_OUT)/test_symtab

test-engine-san: $(ENGINE_OUT)/test_zbtree_san $(ENGINE_OUT)/test_ibset_san $(ENGINE_OUT)/test_hpset_san \
		$(ENGINE_OUT)/test_setpack_san $(ENGINE_OUT)/test_keyttl_san \
		$(ENGINE_OUT)/test_vkeys_san $(ENGINE_OUT)/test_symtab_san
	ZBT_TEST_HUGE=0 ZBT_DIFF_OPS=200000 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $(ENGINE_OUT)/test_zbtree_san
	IBS_DIFF_OPS=200000 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $(ENGINE_OUT)/test_ibset_san
	HPS_DIFF_OPS=100000 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $(ENGINE_OUT)/test_hpset_san
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $(ENGINE_OUT)/test_setpack_san
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $(ENGINE_OUT)/test_keyttl_san
	VKEYS_DIFF_OPS=200000 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $(ENGINE_OUT)/test_vkeys_san
	SYMTAB_DIFF_OPS=200000 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $(ENGINE_OUT)/test_symtab_san

# Runs each differential fuzzer in FUZZ_TARGETS for FUZZ_SECONDS, one after
# the other, from the corpus it keeps: sorted sets (zbtree, whose corpus is
# build/engine/corpus), big integer sets (ibset), big sets of strings
# (hpset) and packed set members (setpack).
# One alone: `make fuzz FUZZ_TARGETS=hpset FUZZ_SECONDS=60`, or
# `make fuzz-hpset`.
FUZZ_TARGETS ?= zbtree ibset hpset setpack symtab
fuzz: $(addprefix fuzz-,$(FUZZ_TARGETS))

fuzz-zbtree: $(ENGINE_OUT)/fuzz_zbtree
	@mkdir -p $(ENGINE_OUT)/corpus
	$(ENGINE_OUT)/fuzz_zbtree -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -print_final_stats=1 \
		$(ENGINE_OUT)/corpus

fuzz-ibset: $(ENGINE_OUT)/fuzz_ibset
	@mkdir -p $(ENGINE_OUT)/corpus-ibset
	$(ENGINE_OUT)/fuzz_ibset -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -print_final_stats=1 \
		$(ENGINE_OUT)/corpus-ibset

fuzz-hpset: $(ENGINE_OUT)/fuzz_hpset
	@mkdir -p $(ENGINE_OUT)/corpus-hpset
	$(ENGINE_OUT)/fuzz_hpset -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -print_final_stats=1 \
		$(ENGINE_OUT)/corpus-hpset

fuzz-setpack: $(ENGINE_OUT)/fuzz_setpack
	@mkdir -p $(ENGINE_OUT)/corpus-setpack
	$(ENGINE_OUT)/fuzz_setpack -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -print_final_stats=1 \
		$(ENGINE_OUT)/corpus-setpack

fuzz-symtab: $(ENGINE_OUT)/fuzz_symtab
	@mkdir -p $(ENGINE_OUT)/corpus-symtab
	$(ENGINE_OUT)/fuzz_symtab -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -print_final_stats=1 \
		$(ENGINE_OUT)/corpus-symtab

bench-engine: $(ENGINE_OUT)/bench_zbtree
	$(ENGINE_OUT)/bench_zbtree

# The memory targets alone, in the tests: bytes come from the allocator and
# the inputs from a fixed seed, so the figures are exact and a change that
# costs memory fails here (one had missed a target unnoticed for a while,
# as nothing ran the benchmark).
test-engine-memory: $(ENGINE_OUT)/bench_zbtree
	BENCH_MEMORY_ONLY=1 $(ENGINE_OUT)/bench_zbtree
