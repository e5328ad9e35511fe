# Builds the fork: upstream Valkey (deps/valkey.pin) assembled under build/
# with our patches/ and our own files, then built with upstream's Makefile.
#
#   make                 build ./src/valkey-server and friends
#   make test            what CI runs: unit tests, then the Tcl suite (see TEST_ARGS)
#   make test-unit       our cmocka tests (also under ASan and UBSan) and
#                        upstream's valkey-unit-tests
#   make fuzz            the engine's differential fuzzer (FUZZ_SECONDS=600)
#   make bench-engine    the engine's memory and speed figures
#   make upstream        the unpatched reference build, in build/upstream
#   make patches         export edits made in build/valkey to patches/
#   make check-patches   fail when build/valkey holds edits patches/ lacks
#   make bench           the workloads of ../shared/workloads.md, scaled down,
#                        ours against the reference (bench-full: published sizes)
#
# Variables given here (SANITIZER=address, OPTIMIZATION=-O0, MALLOC=libc, ...)
# reach upstream's Makefile unchanged.

TREE := build/valkey
REF := build/upstream
JOBS ?= $(shell nproc)

# The Tcl suite as CI runs it: the whole suite, two clients (the cores
# there are), latency assertions off (two shared cores make them noise), and
# tests/ci-skip.txt (tests that fail on the unpatched reference here too,
# each with its reason). README.md gives the figures.
TEST_ARGS ?= --clients 2 --no-latency --skipfile tests/ci-skip.txt

.PHONY: all tree deps test-deps upstream patches check-patches test test-unit \
	test-tcl bench bench-full clean distclean

all: tree
	+$(MAKE) -C $(TREE) -j$(JOBS)
	@utils/tree.sh link-programs

tree: deps
	@utils/tree.sh assemble

deps:
	@utils/install-deps.sh build

test-deps:
	@utils/install-deps.sh build test

upstream: tree
	@utils/tree.sh upstream
	+$(MAKE) -C $(REF) -j$(JOBS)

patches:
	@utils/tree.sh export

check-patches:
	@utils/tree.sh check

test: test-unit test-tcl

test-unit: all test-deps
	+$(MAKE) -C $(TREE)/src -j$(JOBS) valkey-unit-tests
	cd $(TREE)/src && ./valkey-unit-tests
	+$(MAKE) test-engine test-engine-san

# The fork's cluster and fault tests compare with the reference build.
test-tcl: all test-deps upstream
	./runtest $(TEST_ARGS)

bench: all upstream
	utils/bench/run quick

bench-full: all upstream
	utils/bench/run full

include tests/engine/engine.mk

# Removes what the builds made, keeping the assembled trees and downloads.
clean:
	-$(MAKE) -C $(TREE) clean
	-$(MAKE) -C $(REF) clean
	rm -f $(addprefix src/,valkey-server valkey-cli valkey-benchmark valkey-check-rdb valkey-check-aof valkey-sentinel)

# Removes build/ entirely, after checking that no edit there would be lost.
distclean:
	@utils/tree.sh check >/dev/null || { utils/tree.sh check; exit 1; }
	rm -rf build
	rm -f $(addprefix src/,valkey-server valkey-cli valkey-benchmark valkey-check-rdb valkey-check-aof valkey-sentinel)
