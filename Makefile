# Builds the fork: upstream Valkey (deps/valkey.pin) assembled under build/
# with our patches/ and our own files, then built with upstream's Makefile.
#
#   make                 build ./src/valkey-server and friends
#   make test            what CI runs: unit tests, the Tcl suite (see TEST_ARGS),
#                        then upstream's module API suite
#   make test-san        a server built with ASan and UBSan (build/san) through
#                        the sorted-set, set, geo, dump and rdb tests
#   make test-unit       upstream's googletest unit tests, our cmocka tests
#                        (also under ASan and UBSan) and the engine's memory targets
#   make install         upstream's install (PREFIX=...); also noopt, valgrind, ...
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
	test-tcl test-modules test-san bench bench-full clean distclean

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

test: test-unit test-tcl test-modules

# Upstream's C unit tests are C++ with googletest since 9.0 (src/unit,
# Debian's libgtest-dev and libgmock-dev); its test-unit builds and runs them.
test-unit: all test-deps
	+$(MAKE) -C $(TREE)/src -j$(JOBS) test-unit
	+$(MAKE) test-engine test-engine-san test-engine-memory

# The suite runs the reference build next to ours (integration/fork-compat,
# and the cluster and fault tests compare with it).
test-tcl: all test-deps upstream
	./runtest $(TEST_ARGS)

# Upstream runs its module API tests apart from the suite (runtest-moduleapi
# builds the test modules first); they hold the sorted-set range iterators.
test-modules: all test-deps
	cd $(TREE) && ./runtest-moduleapi $(subst tests/ci-skip.txt,$(CURDIR)/tests/ci-skip.txt,$(TEST_ARGS))

# The same tree built again with AddressSanitizer and UndefinedBehaviorSanitizer
# (build/san: a copy of build/valkey, so its links into src/ and tests/ still
# resolve), then the tests that touch sorted sets, TTLs and strings most.
SAN := build/san
SAN_TESTS := unit/type/zset unit/type/set unit/type/fork-set unit/type/fork-zprefetch unit/geo unit/sort unit/dump unit/scan unit/keyspace \
	unit/expire unit/fork-keyttl unit/type/string unit/type/incr unit/type/fork-strcomp \
	unit/type/fork-member-ttl unit/hashexpire \
	unit/cluster/fork-pubsub-bus \
	integration/rdb integration/corrupt-dump integration/corrupt-dump-fuzzer \
	integration/convert-ziplist-zset-on-load
# The module API's sorted-set iterators, ours and upstream's.
SAN_MODULE_TESTS := unit/moduleapi/fork-zsetrange unit/moduleapi/zset
# Members kept out of line are pointed to from inside packed leaves, where
# LeakSanitizer does not look (tests/lsan.supp says why).
SAN_ENV := LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp
test-san: all test-deps
	rm -rf $(SAN) && cp -a $(TREE) $(SAN)
	+$(MAKE) -C $(SAN) distclean
	+$(MAKE) -C $(SAN) -j$(JOBS) SANITIZER=address \
		SERVER_CFLAGS='-fsanitize=undefined -fno-sanitize-recover=undefined' \
		SERVER_LDFLAGS='-fsanitize=undefined'
	cd $(SAN) && $(SAN_ENV) ./runtest --clients 2 --no-latency $(addprefix --single ,$(SAN_TESTS))
	cd $(SAN) && $(SAN_ENV) ./runtest-moduleapi --clients 2 --no-latency $(addprefix --single ,$(SAN_MODULE_TESTS))

# Upstream's own targets, run in the assembled tree as upstream runs them:
# `make install PREFIX=/opt/valkey`, `make noopt`, `make valgrind`, ... A
# relative PREFIX is made absolute, since upstream's make runs in build/.
UPSTREAM_TARGETS := install uninstall noopt valgrind helgrind 32bit gcov
.PHONY: $(UPSTREAM_TARGETS)
$(UPSTREAM_TARGETS): tree
	+$(MAKE) -C $(TREE) -j$(JOBS) $@ $(if $(PREFIX),PREFIX=$(abspath $(PREFIX)))
	@utils/tree.sh link-programs

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
