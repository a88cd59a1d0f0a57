# shmlease - plain GNU make, no configure step.
#
#   make            libshmlease.a, libshmlease.so, the shmlease tool, build/examples/
#   make demo       builds and runs the demo on a fresh table
#   make demo-etcd  the same story on a throwaway three-member etcd cluster,
#                   its leader killed half-way
#   make examples   builds examples/*.c into build/examples/ and the demo into build/
#   make test       installs criterion, man-db, promtool and systemd-analyze if missing,
#                   builds and runs every test,
#                   then test-installed (examples built against a DESTDIR install);
#                   fails naming any segment a test left in /dev/shm
#   make check      the tests under ASan+UBSan, the threaded ones under TSan, the Python
#                   tests with the extension under ASan+UBSan
#   make stress     a long fault campaign (STRESS_SECONDS=600 by default)
#   make stress-selftest  the campaign catches each deliberate bug (make test runs it)
#   make crash-sweep  every API operation killed at its 1st, 2nd ... system call,
#                   the table checked and waiters made to go through after each
#                   kill (make test runs it too)
#   make python     the Python package, built from these sources into build/venv
#   make test-python  its pytest suite (make test runs it)
#   make bench-python  the Python binding against filelock and fasteners
#   make stress-etcd  the campaign on a throwaway three-member etcd cluster whose
#                   members are killed, stopped and restarted and whose holder
#                   records are deleted (STRESS_ETCD_SECONDS=600)
#   make bench      builds and runs the benchmark (results in build/bench/);
#                   make bench-deps installs Redis, PostgreSQL and gnuplot
#   make bench-align  the benchmark with and without -falign-functions=64 (the
#                   build's default) in alternating runs (AB_RUNS=5)
#   make fuzz       libFuzzer over segment bytes and etcd responses (clang;
#                   FUZZ_TIME=seconds per target, default 60)
#   make test-noetcd  the tests on a build without etcd (build/noetcd; CI runs it)
#   make ETCD=0     leaves the etcd client (etcd/) out; by default it is built
#                   when pkg-config finds libcurl and json-c (ETCD=1 requires them)
#   make corpus     remakes the fuzz seeds (tests/corpus/seed-*) with this build's
#                   layout: run it after every layout change, commit the result
#   make install    PREFIX=/usr/local DESTDIR=  (also: uninstall)
#   make deb        Debian packages in build/ (apt-get build-dep ./ first, as root)
#   make deb-check  builds them, installs them, uses them, purges them (as root)
#   make format-check, make clean; V=1 shows the commands

VERSION := $(shell sed -n 's/^\#define[ \t]*SHLEASE_VERSION_STRING[ \t]*"\(.*\)"/\1/p' lib/shmlease.h)
MAJOR   := $(shell sed -n 's/^\#define[ \t]*SHLEASE_VERSION_MAJOR[ \t]*\([0-9]*\)/\1/p' lib/shmlease.h)
MINOR   := $(shell sed -n 's/^\#define[ \t]*SHLEASE_VERSION_MINOR[ \t]*\([0-9]*\)/\1/p' lib/shmlease.h)
# The public header: shmlease.h and the groups it includes (lib/shmlease/),
# installed as they are in the tree.
PUBLIC_H := lib/shmlease.h $(wildcard lib/shmlease/*.h)

PREFIX     ?= /usr/local
DESTDIR    ?=
bindir     ?= $(PREFIX)/bin
libdir     ?= $(PREFIX)/lib
includedir ?= $(PREFIX)/include
mandir     ?= $(PREFIX)/share/man
pkgconfigdir ?= $(libdir)/pkgconfig

CC      ?= cc
OPT     ?= -O2
CSTD    := -std=c11
WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wvla
CPPFLAGS += -D_GNU_SOURCE -Ilib
CFLAGS  ?= $(OPT) -g
# TLS descriptors where the compiler has them (x86-64): the library's one
# thread-local (lib/kind_shm/name_cache.c) then costs a load, not a __tls_get_addr
# call, in a program that links libshmlease.so.
TLS_DIALECT := $(shell $(CC) -mtls-dialect=gnu2 -E -x c /dev/null >/dev/null 2>&1 && echo -mtls-dialect=gnu2)
# Functions on 64-byte boundaries: where a hot function's code falls
# otherwise moves with every change anywhere in the library, and one
# placement of the lease path cost the bound acquire+release 25 % (105
# against 83 ns, every run without address randomisation; docs/BENCHMARKS.md).
ALIGN   ?= -falign-functions=64
ALL_CFLAGS = $(CSTD) $(WARN) $(CFLAGS) $(ALIGN) $(TLS_DIALECT) -fvisibility=hidden -fPIC -MMD -MP
LDLIBS  += -lpthread

# The etcd client (etcd/): libcurl and json-c, found with pkg-config. lib/
# sees SHL_HAVE_ETCD 1 or 0.
ETCD ?=
ETCD_PKGS := libcurl json-c
ifeq ($(ETCD),0)
HAVE_ETCD := 0
else
HAVE_ETCD := $(shell pkg-config --exists $(ETCD_PKGS) 2>/dev/null && echo 1 || echo 0)
ifeq ($(ETCD)$(HAVE_ETCD),10)
$(error ETCD=1 but pkg-config does not find $(ETCD_PKGS): sudo apt-get install -y libcurl4-openssl-dev libjson-c-dev pkg-config)
endif
endif
# libcurl is not linked: etcd/curl_api.c loads it (dlopen) on the first use
# of an etcd table, so that programs using shared-memory tables only do not
# load it and its many dependencies (most of a program's start-up time).
# json-c is small and without dependencies: linked.
ETCD_LINKED_PKGS := json-c
PC_LIBS_PRIVATE := -lpthread
ifeq ($(HAVE_ETCD),1)
ETCD_CFLAGS := $(shell pkg-config --cflags $(ETCD_PKGS))
ETCD_LIBS   := $(shell pkg-config --libs $(ETCD_LINKED_PKGS)) -ldl
PC_REQUIRES := $(ETCD_LINKED_PKGS)
PC_LIBS_PRIVATE += -ldl
endif
CPPFLAGS += -DSHL_HAVE_ETCD=$(HAVE_ETCD) $(ETCD_CFLAGS)
LDLIBS   += $(ETCD_LIBS)

B := build
ifeq ($(V),1)
Q :=
else
Q := @
endif

LIB_SRC  := $(wildcard shm/*.c) $(wildcard lib/*.c) $(wildcard lib/kind_shm/*.c) $(wildcard lib/kind_etcd/*.c)
ifeq ($(HAVE_ETCD),1)
LIB_SRC  += $(wildcard etcd/*.c)
endif
TOOL_SRC := $(wildcard tools/*.c)
TEST_SRC := $(wildcard tests/test_*.c)
ifneq ($(HAVE_ETCD),1)
TEST_SRC := $(filter-out tests/test_etcd_%.c,$(TEST_SRC))
endif
# examples/demo.c is built by `make demo` only.
EXAMPLE_SRC := $(filter-out examples/demo.c,$(wildcard examples/*.c))
EXAMPLES := $(EXAMPLE_SRC:examples/%.c=$(B)/examples/%)
# tests/threads_*.c: the threaded cases, run by criterion and by the TSan runner.
THREAD_CASE_SRC := $(wildcard tests/threads_*.c)
TEST_HELPER_SRC := $(wildcard tests/helper_*.c) $(THREAD_CASE_SRC)
ifeq ($(HAVE_ETCD),1)
# Throwaway etcd members for the tests (etcd from PATH), and the fuzz body
# of the client's parsers.
TEST_HELPER_SRC += tools/etcd_cluster.c tests/etcd_fuzz.c tests/etcd_table.c
endif

LIB_OBJ  := $(LIB_SRC:%.c=$(B)/rel/%.o)
TLIB_OBJ := $(LIB_SRC:%.c=$(B)/test/%.o)
TOOL_OBJ := $(TOOL_SRC:%.c=$(B)/rel/%.o)

# Before 1.0 every minor release may change the ABI (structures grow), so
# the SONAME carries the minor too: a program built against 0.1 does not load 0.2.
SONAME   := libshmlease.so.$(MAJOR)$(if $(filter 0,$(MAJOR)),.$(MINOR))
SO       := $(B)/libshmlease.so.$(VERSION)
A        := $(B)/libshmlease.a
TA       := $(B)/test/libshmlease-test.a
TOOL     := $(B)/shmlease
TTOOL    := $(B)/test/shmlease
DEMO     := $(B)/demo
BENCH_PROGS := $(B)/bench/wake-latency

.PHONY: bench-progs all test check demo bench bench-align bench-deps install uninstall clean format \
	format-check deps deps-etcd deps-ops check-deps tests-build test-installed test-shm-left test-layers test-guards FORCE stress stress-selftest \
	stress-etcd demo-etcd fuzz corpus python python-deps test-python check-python bench-python test-noetcd \
	deb deb-deps deb-check

all: $(A) $(SO) $(B)/libshmlease.so $(TOOL) $(EXAMPLES)

# Objects are remade when the build's configuration (etcd in or out) changes.
BUILD_CONFIG := $(B)/config-etcd-$(HAVE_ETCD)
$(BUILD_CONFIG):
	@mkdir -p $(B)
	$(Q)rm -f $(B)/config-etcd-* && touch $@

$(B)/rel/%.o: %.c $(BUILD_CONFIG)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -c -o $@ $<

# The test build: the same sources with the crash points compiled in.
$(B)/test/%.o: %.c $(BUILD_CONFIG)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC test $<")
	$(Q)$(CC) $(CPPFLAGS) -DSHL_TESTING $(ALL_CFLAGS) -c -o $@ $<

$(A): $(LIB_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(TA): $(TLIB_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(SO): $(LIB_OBJ) lib/shmlease.map
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=lib/shmlease.map -Wl,-z,defs \
		$(CFLAGS) $(LDFLAGS) -o $@ $(LIB_OBJ) $(LDLIBS)

$(B)/libshmlease.so: $(SO)
	$(Q)ln -sf libshmlease.so.$(VERSION) $(B)/$(SONAME)
	$(Q)ln -sf $(SONAME) $@

$(TOOL): $(TOOL_OBJ) $(A)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(TOOL_OBJ) $(A) $(LDLIBS)

# Examples are compiled as a program outside the tree would be: the public
# header only, none of the library's own preprocessor flags.
$(B)/examples/%: examples/%.c $(PUBLIC_H) $(A)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC LD   $@")
	$(Q)$(CC) $(CSTD) $(WARN) $(CFLAGS) -Ilib -o $@ $< $(A) $(LDLIBS)

# Phony: the folder examples/ would otherwise satisfy it.
.PHONY: examples
examples: $(EXAMPLES) $(DEMO)

# The tool linked with the test library, for tests that need its test-only
# switches (crash points, SHL_MUTATION).
$(TTOOL): $(TOOL_OBJ) $(TA)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $(TOOL_OBJ) $(TA) $(LDLIBS)

# ---------------------------------------------------------------- tests

# criterion: installed when missing (as root), otherwise the exact command.
deps:
	@if ! printf '#include <criterion/criterion.h>\n' | $(CC) -E -x c - >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "  DEPS    installing libcriterion-dev"; \
	    DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libcriterion-dev pkg-config >/dev/null || exit 1; \
	  else \
	    echo "criterion is missing. Install it with:" >&2; \
	    echo "  sudo apt-get install -y libcriterion-dev pkg-config" >&2; exit 1; \
	  fi; \
	fi
	@if ! command -v man >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "  DEPS    installing man-db (the man page tests render the pages)"; \
	    DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq man-db >/dev/null || exit 1; \
	  else \
	    echo "man is missing. Install it with:" >&2; \
	    echo "  sudo apt-get install -y man-db" >&2; exit 1; \
	  fi; \
	fi

# promtool (Debian's prometheus) checks shmlease metrics' output, and
# python3-prometheus-client's parser its OpenMetrics; systemd-analyze verifies
# the example units (tests/test_tool_metrics.c, tests/test_systemd_units.c).
deps: deps-ops
deps-ops:
	@missing=; \
	command -v promtool >/dev/null || missing="$$missing prometheus"; \
	command -v systemd-analyze >/dev/null || missing="$$missing systemd"; \
	/usr/bin/python3 -c 'import prometheus_client' 2>/dev/null || missing="$$missing python3-prometheus-client"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "  DEPS    installing$$missing"; \
	    DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null || exit 1; \
	  else \
	    echo "the metrics and systemd tests need:$$missing. Install them with:" >&2; \
	    echo "  sudo apt-get install -y --no-install-recommends$$missing" >&2; exit 1; \
	  fi; \
	fi

# etcd (server and etcdctl), the client's libraries and openssl (the TLS
# tests make their certificates with it): installed when missing unless
# ETCD=0. The sub-make of `test` then finds them.
ifneq ($(ETCD),0)
deps: deps-etcd
endif
deps-etcd:
	@missing=; \
	command -v etcd >/dev/null || missing="$$missing etcd-server"; \
	command -v etcdctl >/dev/null || missing="$$missing etcd-client"; \
	command -v openssl >/dev/null || missing="$$missing openssl"; \
	command -v pkg-config >/dev/null || missing="$$missing pkg-config"; \
	pkg-config --exists libcurl 2>/dev/null || missing="$$missing libcurl4-openssl-dev"; \
	pkg-config --exists json-c 2>/dev/null || missing="$$missing libjson-c-dev"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "  DEPS    installing$$missing"; \
	    DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
	  else \
	    echo "the etcd tests need:$$missing. Install them with:" >&2; \
	    echo "  sudo apt-get install -y$$missing" >&2; \
	    echo "(or leave etcd out: make ETCD=0 test)" >&2; exit 1; \
	  fi; \
	fi

# clang (with its sanitizer runtimes) for the ThreadSanitizer build.
check-deps: deps
	@if ! command -v clang >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "  DEPS    installing clang"; \
	    DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang libclang-rt-dev >/dev/null || exit 1; \
	  else \
	    echo "clang is missing. Install it with:" >&2; \
	    echo "  sudo apt-get install -y clang libclang-rt-dev" >&2; exit 1; \
	  fi; \
	fi

TEST_BIN := $(B)/test/shmlease-tests
TEST_OBJ := $(TEST_SRC:%.c=$(B)/test/%.o) $(TEST_HELPER_SRC:%.c=$(B)/test/%.o)
# The stress campaign's checker, unit-tested on hand-made evidence.
TEST_OBJ += $(B)/test/tools/stress_check.o $(B)/test/tools/stress_log.o \
	$(B)/test/tools/stress_interval.o $(B)/test/tools/stress_removed.o
# The metrics' label escaping, unit-tested.
TEST_OBJ += $(B)/test/tools/metrics_text.o

$(TEST_BIN): $(TEST_OBJ) $(TA)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $(TEST_OBJ) $(TA) -lcriterion $(LDLIBS)

# The crash sweep: every API operation killed at each of its system calls in
# turn (tests/crash_sweep.c), with CRASH_SWEEP_ARGS (--op NAME, --verbose).
# make test runs it too (tests/test_crash_sweep.c): it takes seconds.
CRASH_SWEEP := $(B)/test/crash-sweep
$(CRASH_SWEEP): $(B)/test/tests/crash_sweep.o $(B)/test/tests/helper_seccomp.o $(TA)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

.PHONY: crash-sweep
crash-sweep: $(CRASH_SWEEP)
	$(Q)$(CRASH_SWEEP) $(CRASH_SWEEP_ARGS)

# The threaded cases without criterion, for ThreadSanitizer.
$(B)/test/tsan-threads: $(B)/test/tests/tsan_main.o $(THREAD_CASE_SRC:%.c=$(B)/test/%.o) $(TA)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# Programs the tests run as separate processes (tool, examples).
tests-build: all $(TEST_BIN) $(DEMO) $(TTOOL) $(CRASH_SWEEP) $(if $(filter 1,$(HAVE_ETCD)),$(B)/shmlease-cluster)

# Every run of the tests marks the names of what it creates in /dev/shm
# with a value of its own (tests/run_mark.h); test-shm-left, at the end,
# fails naming every entry that carries it (and removes them). Others' runs
# at the same time on the machine carry other marks.
ifndef SHL_TEST_RUN
SHL_TEST_RUN := run$(shell od -An -N4 -tx4 /dev/urandom | tr -d ' \n')
endif
export SHL_TEST_RUN

TEST_JOBS ?= 2
test: deps
	$(Q)$(MAKE) --no-print-directory tests-build
	$(Q)$(MAKE) --no-print-directory test-layers
	$(Q)$(MAKE) --no-print-directory test-guards
	$(Q)SHL_TOOL=$(abspath $(TOOL)) SHL_TEST_TOOL=$(abspath $(TTOOL)) \
		SHL_EXAMPLES=$(abspath $(B)/examples) SHL_ROOT=$(CURDIR) SHL_BUILD=$(abspath $(B)) \
		$(TEST_BIN) --jobs $(TEST_JOBS) $(TEST_ARGS)
	$(Q)$(MAKE) --no-print-directory stress-selftest
	$(Q)$(MAKE) --no-print-directory test-installed
	$(Q)$(MAKE) --no-print-directory test-python
	$(Q)$(MAKE) --no-print-directory test-shm-left

# The library's layers (docs/DEVELOPING.md, Map), checked on its objects:
# who calls whom, and who includes what. `python3 tests/layers.py build/rel
# --graph` prints the call graph and its loops.
test-layers: $(A)
	$(Q)$(PYTHON) tests/layers.py $(B)/rel

# A test that may hang says so with t_guard(seconds) (tests/common.h), not
# criterion's .timeout: the runner's bookkeeping of a .timeout now and then
# leaks 48 bytes, and LeakSanitizer then fails make check after every test
# has passed.
test-guards:
	$(Q)if grep -n 'Test(.*\.timeout *=' tests/*.c; then \
	  echo "tests: use t_guard(seconds) (tests/common.h), not criterion's .timeout" >&2; exit 1; \
	fi

test-shm-left:
	$(Q)left=$$(ls -A /dev/shm | grep -F -e '$(SHL_TEST_RUN)'); \
	if [ -n "$$left" ]; then \
	  echo "the tests left in /dev/shm (removed now):" $$left >&2; \
	  for f in $$left; do rm -rf "/dev/shm/$$f"; done; exit 1; \
	fi

# The build without etcd support (ETCD=0) in its own directory, and the
# criterion suite on it: etcd names must give SHL_ENOTSUP there, and every
# shared-memory test pass without libcurl and json-c. CI runs it.
NOETCD := $(B)/noetcd
test-noetcd: deps
	$(Q)$(MAKE) --no-print-directory B=$(NOETCD) ETCD=0 tests-build
	$(Q)SHL_TOOL=$(abspath $(NOETCD)/shmlease) SHL_TEST_TOOL=$(abspath $(NOETCD)/test/shmlease) \
		SHL_EXAMPLES=$(abspath $(NOETCD)/examples) SHL_ROOT=$(CURDIR) \
		SHL_BUILD=$(abspath $(NOETCD)) \
		$(NOETCD)/test/shmlease-tests --jobs $(TEST_JOBS) $(TEST_ARGS)
	$(Q)$(MAKE) --no-print-directory test-shm-left

# Installed use: install into a temporary DESTDIR, build the examples there
# with pkg-config (static and shared), run them, uninstall.
test-installed: all
	$(Q)MAKE="$(MAKE)" CC="$(CC)" B="$(B)" sh tests/installed.sh

# Sanitizer builds, each in its own directory.
check: check-deps all
	$(Q)$(MAKE) --no-print-directory test-guards
	$(Q)$(MAKE) --no-print-directory B=$(B)/asan OPT=-O1 \
		CFLAGS="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
		tests-build
	$(Q)ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
		SHL_TOOL=$(abspath $(B)/asan/shmlease) SHL_EXAMPLES=$(abspath $(B)/asan/examples) \
		SHL_TEST_TOOL=$(abspath $(B)/asan/test/shmlease) \
		SHL_ROOT=$(CURDIR) \
		$(B)/asan/test/shmlease-tests --jobs $(TEST_JOBS) $(TEST_ARGS)
	$(Q)$(MAKE) --no-print-directory B=$(B)/tsan CC=clang \
		CFLAGS="-O1 -g -fsanitize=thread -fno-omit-frame-pointer" $(B)/tsan/test/tsan-threads
	$(Q)TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 $(B)/tsan/test/tsan-threads
	$(Q)$(MAKE) --no-print-directory check-python
	$(Q)$(MAKE) --no-print-directory test-shm-left

# ---------------------------------------------------------------- bench

# Benchmark programs, for make bench to run: $(B)/bench/<name>.
$(B)/bench/wake-latency: $(B)/rel/tools/bench/wake_latency.o $(A)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $< $(A) $(LDLIBS)

bench-progs: $(BENCH_PROGS)

# ---------------------------------------------------------------- stress

# A long fault campaign: make stress [STRESS_SECONDS=600] [STRESS_WORKERS=16] ...
# All faults on, repair and check on the live table and removals of the
# table's name (a dozen a minute, half by shl_unlink, half by unlink(2))
# included; then a shorter
# campaign on a table with a token floor, and one per crash point with the
# test build's tool (every worker dies again and again inside a critical
# section). The JSON summaries show what was done.
STRESS_SECONDS ?= 600
STRESS_WORKERS ?= 16
STRESS_LEASES  ?= 4
STRESS_TTL_MS  ?= 100
STRESS_KILL_RATE  ?= 3
STRESS_PAUSE_RATE ?= 5
STRESS_REVOKE_RATE ?= 1
STRESS_REPAIR_RATE ?= 2
STRESS_REMOVE_RATE ?= 0.2
STRESS_FLOOR_SECONDS ?= 60
STRESS_SEED    ?=
STRESS_ARGS = --workers $(STRESS_WORKERS) --leases $(STRESS_LEASES) \
	--ttl-ms $(STRESS_TTL_MS) --kill-rate $(STRESS_KILL_RATE) --pause-rate $(STRESS_PAUSE_RATE) \
	--revoke-rate $(STRESS_REVOKE_RATE) --repair-rate $(STRESS_REPAIR_RATE) \
	--remove-rate $(STRESS_REMOVE_RATE) $(if $(STRESS_SEED),--seed $(STRESS_SEED))
# Crash points (lib/kind_shm/crashpoint.h), each at its 7th hit unless given as
# N:HIT: mid value copy, value committed with its bracket open, after the
# guarded callback, mid acquisition. Then the pool's: a group taken but not
# yet named (41) and one no longer named but not yet given back (42), on a
# waiter pool of one group (a lease keeps its first group, so it is taken
# and given back mostly when a wait on another lease takes it back: rare
# enough that a third take-back in one worker needs some 30 s). Then a
# spare value buffer taken back, its value copied home but not committed
# (43), on a value pool of one spare for the two leases. Then
# every worker dies at its first wake-up owed to waiters (crash point 40:
# lease freed and unlocked, waiters not woken), where a waiter could be
# left asleep on the freed lease. Each campaign fails if no worker died at
# its point (tools/stress_crashpoint.sh).
STRESS_CRASHPOINTS ?= 9 11 12 3
STRESS_POOL_CRASHPOINTS ?= 41:1 42:1 42:3
STRESS_POOL_SECONDS ?= 30
STRESS_VALUE_CRASHPOINTS ?= 43:1
CRASHPOINT_ARGS = --workers 6 --leases 2 --kill-rate 0 --pause-rate 0 --revoke-rate 1 --repair-rate 2
stress: all $(TTOOL)
	@echo "stress: $(STRESS_SECONDS) s, $(STRESS_WORKERS) workers, $(STRESS_LEASES) leases," \
		"ttl $(STRESS_TTL_MS) ms, kill rate $(STRESS_KILL_RATE)/s, pause rate $(STRESS_PAUSE_RATE)/s," \
		"revoke rate $(STRESS_REVOKE_RATE)/s, repair rate $(STRESS_REPAIR_RATE)/s," \
		"remove rate $(STRESS_REMOVE_RATE)/s" \
		"$(if $(STRESS_SEED),seed $(STRESS_SEED),random seed)"
	$(Q)$(TOOL) stress --seconds $(STRESS_SECONDS) $(STRESS_ARGS) --json
	@echo "stress: $(STRESS_FLOOR_SECONDS) s on a table with a token floor"
	$(Q)d=$$(mktemp -d) && $(TOOL) stress --seconds $(STRESS_FLOOR_SECONDS) $(STRESS_ARGS) \
		--token-state $$d/tokens --json; rc=$$?; rm -rf $$d; exit $$rc
	$(Q)for cp in $(STRESS_CRASHPOINTS); do \
	  case $$cp in *:*) ;; *) cp=$$cp:7 ;; esac; \
	  echo "stress: crash point $$cp"; \
	  sh tools/stress_crashpoint.sh $(TTOOL) $$cp 5 $(CRASHPOINT_ARGS) || exit 1; \
	done
	$(Q)for cp in $(STRESS_POOL_CRASHPOINTS); do \
	  echo "stress: crash point $$cp, a waiter pool of one group"; \
	  sh tools/stress_crashpoint.sh $(TTOOL) $$cp $(STRESS_POOL_SECONDS) $(CRASHPOINT_ARGS) \
	    --max-waiters 8 || exit 1; \
	done
	$(Q)for cp in $(STRESS_VALUE_CRASHPOINTS); do \
	  echo "stress: crash point $$cp, a value pool of one spare"; \
	  sh tools/stress_crashpoint.sh $(TTOOL) $$cp 10 $(CRASHPOINT_ARGS) --spare-values 1 || exit 1; \
	done
	@echo "stress: crash point 40:1 (deaths between unlock and wake-up)"
	$(Q)sh tools/stress_crashpoint.sh $(TTOOL) 40:1 10 $(CRASHPOINT_ARGS)

# The same campaign on an etcd table: a throwaway three-member cluster whose
# members (the leader often) are SIGKILLed, SIGSTOPped and restarted while
# the workers run, and whose holder records an admin deletes under their
# holders: make stress-etcd [STRESS_ETCD_SECONDS=600]. What cannot
# apply on etcd (repair, the guarded section, late accepts) is listed in the
# summary. `make test` runs a short one (stress-selftest).
STRESS_ETCD_SECONDS ?= 600
STRESS_ETCD_WORKERS ?= 8
STRESS_ETCD_ARGS = --workers $(STRESS_ETCD_WORKERS) --leases $(STRESS_LEASES) --readers 2 \
	--kill-rate 1 --pause-rate 1 --revoke-rate $(STRESS_REVOKE_RATE) \
	$(if $(STRESS_SEED),--seed $(STRESS_SEED))
stress-etcd: all
	@echo "stress-etcd: $(STRESS_ETCD_SECONDS) s, $(STRESS_ETCD_WORKERS) workers, three members, member and admin chaos"
	$(Q)$(TOOL) stress --etcd-cluster 3 --member-chaos --admin-chaos --seconds $(STRESS_ETCD_SECONDS) \
		$(STRESS_ETCD_ARGS)

# The campaign must fail on a broken library: one short campaign per
# deliberate bug of the test build (lib/mutation.h), and one clean run.
stress-selftest: $(TTOOL)
	$(Q)SELFTEST_ETCD=$(HAVE_ETCD) sh tools/stress_selftest.sh $(TTOOL)

# ---------------------------------------------------------------- fuzz

# The library built with coverage for libFuzzer; new inputs go to a scratch
# directory, the committed seeds in tests/corpus/ are read (and replayed by
# `make test`). With etcd support, a second target fuzzes the etcd client's
# response parsers from tests/corpus-etcd/ (seeds: real etcd 3.4 answers). Copy an input worth keeping into tests/corpus/ by hand (any
# name but seed-*, which `make corpus` owns). An input that runs longer than
# FUZZ_TIMEOUT seconds is a hang, reported like a crash.
FUZZ_TIME ?= 60
FUZZ_TIMEOUT ?= 20
FUZZ_SAN  := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_BIN  := $(B)/fuzz/fuzz_segment
# The etcd client's response parsers (tests/corpus-etcd/ holds real answers).
FUZZ_ETCD_BIN := $(B)/fuzz/fuzz_etcd
fuzz: check-deps
	$(Q)$(MAKE) --no-print-directory B=$(B)/fuzz CC=clang \
		CFLAGS="-O1 -g -fsanitize=fuzzer-no-link $(FUZZ_SAN)" $(B)/fuzz/test/libshmlease-test.a
	$(Q)clang $(CPPFLAGS) $(CSTD) $(WARN) -O1 -g -fsanitize=fuzzer $(FUZZ_SAN) -o $(FUZZ_BIN) \
		tests/fuzz/fuzz_segment.c tests/helper_fuzz.c $(B)/fuzz/test/libshmlease-test.a $(LDLIBS)
	$(Q)mkdir -p $(B)/fuzz/corpus
	$(Q)$(FUZZ_BIN) -max_total_time=$(FUZZ_TIME) -max_len=65536 -timeout=$(FUZZ_TIMEOUT) \
		$(B)/fuzz/corpus tests/corpus
ifeq ($(HAVE_ETCD),1)
	$(Q)clang $(CPPFLAGS) $(CSTD) $(WARN) -O1 -g -fsanitize=fuzzer $(FUZZ_SAN) -o $(FUZZ_ETCD_BIN) \
		tests/fuzz/fuzz_etcd.c tests/etcd_fuzz.c $(B)/fuzz/test/libshmlease-test.a $(LDLIBS)
	$(Q)mkdir -p $(B)/fuzz/corpus-etcd
	$(Q)$(FUZZ_ETCD_BIN) -max_total_time=$(FUZZ_TIME) -max_len=65536 -timeout=$(FUZZ_TIMEOUT) \
		-artifact_prefix=$(B)/fuzz/ $(B)/fuzz/corpus-etcd tests/corpus-etcd
endif

# The seeds: real tables brought into each state (healthy, crashed at a
# crash point, damaged) by the test build, copied byte for byte. A seed made
# by another layout stops at the format word, so they are remade from the
# build at hand; test_corpus fails while they are stale.
CORPUS_GEN := $(B)/test/mkcorpus
$(CORPUS_GEN): $(B)/test/tests/fuzz/mkcorpus.o $(TA)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

corpus: $(CORPUS_GEN)
	$(Q)rm -f tests/corpus/seed-*
	$(Q)$(CORPUS_GEN) tests/corpus

# ---------------------------------------------------------------- demo

$(DEMO): $(B)/rel/examples/demo.o $(A)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $< $(A) $(LDLIBS)

demo: all $(DEMO)
	$(Q)$(DEMO) --ls $(TOOL)

# The demo's story on an etcd table: a throwaway three-member cluster
# (shmlease-cluster, not installed), the leader SIGKILLed half-way; then
# leader election between two hosts, one SIGKILLed (examples/leader_etcd.sh).
CLUSTER := $(B)/shmlease-cluster
$(CLUSTER): $(B)/rel/tools/cluster/main.o $(B)/rel/tools/etcd_cluster.o $(A)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

ifeq ($(HAVE_ETCD),1)
demo-etcd: all $(DEMO) $(CLUSTER)
	$(Q)$(CLUSTER) 3 -- $(DEMO) --table etcd://@ENDPOINTS@/demo --kill-leader --ls $(TOOL)
	$(Q)SHMLEASE=$(abspath $(TOOL)) $(CLUSTER) 3 -- sh examples/leader_etcd.sh \
		etcd://@ENDPOINTS@/elect
else
demo-etcd:
	@echo "demo-etcd needs etcd support (libcurl and json-c; see make deps-etcd)" >&2; exit 1
endif

# ---------------------------------------------------------------- bench

# Not installed: measures the library against the floor and the alternatives
# (docs/BENCHMARKS.md). Redis and PostgreSQL rows need their servers
# installed (make bench-deps); without them those rows say so and are skipped.
# wake_latency.c is a program of its own (bench-progs), not a part.
BENCH_SRC := $(filter-out tools/bench/wake_latency.c,$(wildcard tools/bench/*.c))
BENCH_OBJ := $(BENCH_SRC:%.c=$(B)/rel/%.o)
BENCH     := $(B)/bench/shmlease-bench
PQ_INC    := $(shell pg_config --includedir 2>/dev/null)
BENCH_CPPFLAGS := -Itools/bench
BENCH_LIBS :=
ifneq ($(PQ_INC),)
ifneq ($(wildcard $(PQ_INC)/libpq-fe.h),)
BENCH_CPPFLAGS += -DBENCH_HAVE_PQ -I$(PQ_INC)
BENCH_LIBS += -lpq
endif
endif
ifneq ($(shell cat $(PUBLIC_H) | grep -c 'shl_acquire_wait'),0)
BENCH_CPPFLAGS += -DBENCH_HAVE_WAIT
endif
# The pool options (shl_options.max_shared, .history): the lean table's row.
ifneq ($(shell cat $(PUBLIC_H) | grep -c 'max_shared;'),0)
BENCH_CPPFLAGS += -DBENCH_HAVE_POOLS
endif
ifeq ($(HAVE_ETCD),1)
# The etcd rows start their member with the launcher of tools/etcd_cluster.c.
BENCH_CPPFLAGS += -DBENCH_HAVE_ETCD -Itools
BENCH_OBJ += $(B)/rel/tools/etcd_cluster.o
else
BENCH_OBJ := $(filter-out $(B)/rel/tools/bench/rows_etcd.o,$(BENCH_OBJ))
endif
$(BENCH_OBJ): CPPFLAGS += $(BENCH_CPPFLAGS)

$(BENCH): $(BENCH_OBJ) $(A)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $(BENCH_OBJ) $(A) $(BENCH_LIBS) $(LDLIBS)

BENCH_ARGS ?=
bench: all $(BENCH) $(BENCH_PROGS)
	$(Q)$(BENCH) --tool $(abspath $(TOOL)) --out $(B)/bench $(BENCH_ARGS)

# What -falign-functions=64 does to the rows: the benchmark built without
# it (in $(B)/noalign, a) and as usual (b), in alternating runs, AB_RUNS
# each (tools/bench/ab.sh; the spreads mean something on a quiet machine
# only).
AB_RUNS ?= 5
bench-align: all $(BENCH)
	$(Q)$(MAKE) --no-print-directory B=$(B)/noalign ALIGN= $(B)/noalign/bench/shmlease-bench
	$(Q)sh tools/bench/ab.sh $(B)/noalign/bench/shmlease-bench $(BENCH) $(abspath $(TOOL)) \
		$(B)/bench-align $(AB_RUNS) $(BENCH_ARGS)

bench-deps:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "  DEPS    redis-server postgresql libpq-dev gnuplot-nox"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    redis-server postgresql libpq-dev gnuplot-nox >/dev/null; \
	else \
	  echo "Install the benchmark's servers and plotter with:" >&2; \
	  echo "  sudo apt-get install -y redis-server postgresql libpq-dev gnuplot-nox" >&2; \
	  exit 1; \
	fi

# ---------------------------------------------------------------- python

# The package python/ (a CPython extension that compiles the library's own
# sources) installed into a local virtual environment, as a user would:
# venv --system-site-packages, then pip without an index. Debian's python3 has
# the test and benchmark modules (pytest, filelock, fasteners, mypy) as packages.
PYTHON   ?= /usr/bin/python3
PY_VENV  := $(B)/venv
PY_STAMP := $(PY_VENV)/.installed
PY_SRC   := $(wildcard python/pyproject.toml python/_build/*.py python/src/*.[ch] python/shmlease/*) \
	$(LIB_SRC) $(wildcard lib/*.h lib/*/*.h shm/*.h etcd/*.c etcd/*.h)
PY_DEBS  := python3-venv python3-dev python3-pytest python3-filelock python3-fasteners mypy

python-deps:
	@missing=; \
	$(PYTHON) -c 'import venv, ensurepip' 2>/dev/null || missing="$$missing python3-venv"; \
	$(PYTHON) -c 'import os, sysconfig; assert os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' \
		2>/dev/null || missing="$$missing python3-dev"; \
	$(PYTHON) -c 'import pytest' 2>/dev/null || missing="$$missing python3-pytest"; \
	$(PYTHON) -c 'import filelock' 2>/dev/null || missing="$$missing python3-filelock"; \
	$(PYTHON) -c 'import fasteners' 2>/dev/null || missing="$$missing python3-fasteners"; \
	$(PYTHON) -c 'import mypy' 2>/dev/null || missing="$$missing mypy"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "  DEPS   $$missing"; \
	    DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
	  else \
	    echo "missing Python packages. Install them with:" >&2; \
	    echo "  sudo apt-get install -y$$missing" >&2; exit 1; \
	  fi; \
	fi

$(PY_STAMP): $(PY_SRC)
	$(Q)$(MAKE) --no-print-directory python-deps
	$(Q)test -x $(PY_VENV)/bin/python || $(PYTHON) -m venv --system-site-packages $(PY_VENV)
	@$(if $(Q),echo "  PIP     python/ -> $(PY_VENV)")
	$(Q)SHMLEASE_CFLAGS="-Werror $(SHMLEASE_CFLAGS)" SHMLEASE_ETCD="$(ETCD)" PIP_NO_INDEX=1 \
		$(PY_VENV)/bin/pip install $(if $(Q),-q) --no-build-isolation --no-deps --force-reinstall ./python
	$(Q)touch $@

python: $(PY_STAMP)

PYTEST_ARGS ?=
test-python: python
	$(Q)cd python && PYTHONDONTWRITEBYTECODE=1 \
		$(abspath $(PY_VENV))/bin/python -P -m pytest -q -p no:cacheprovider tests $(PYTEST_ARGS)

# The Python tests again with the extension (and the library in it) built
# under ASan and UBSan; the interpreter itself is not instrumented, so the
# runtimes are preloaded and leak detection (the interpreter's) is off.
PY_SAN       := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
PY_ASAN_VENV := $(B)/asan/venv
# Where the sanitizers write their reports: pytest holds the tests' stderr
# in a file it prints only for a test that ends, so a report that ends the
# interpreter would otherwise be lost. Printed, and the target fails, when
# any process wrote one.
PY_SAN_LOG   := $(B)/asan/python-san
check-python: python-deps
	$(Q)test -x $(PY_ASAN_VENV)/bin/python || $(PYTHON) -m venv --system-site-packages $(PY_ASAN_VENV)
	@$(if $(Q),echo "  PIP     python/ (ASan, UBSan) -> $(PY_ASAN_VENV)")
	$(Q)SHMLEASE_CFLAGS="-O1 -Werror $(PY_SAN)" LDFLAGS="$(PY_SAN)" SHMLEASE_ETCD="$(ETCD)" PIP_NO_INDEX=1 \
		$(PY_ASAN_VENV)/bin/pip install -q --no-build-isolation --no-deps --force-reinstall ./python
	$(Q)rm -rf $(PY_SAN_LOG) && mkdir -p $(PY_SAN_LOG)
	$(Q)cd python && PYTHONDONTWRITEBYTECODE=1 \
		LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so)" \
		ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:log_path=$(abspath $(PY_SAN_LOG))/asan \
		UBSAN_OPTIONS=print_stacktrace=1:log_path=$(abspath $(PY_SAN_LOG))/ubsan \
		$(abspath $(PY_ASAN_VENV))/bin/python -P -m pytest -q -p no:cacheprovider tests $(PYTEST_ARGS) || \
		{ rc=$$?; for f in $(abspath $(PY_SAN_LOG))/*; do test -f "$$f" && { echo "--- $$f"; cat "$$f"; }; done; exit $$rc; }
	$(Q)for f in $(PY_SAN_LOG)/*; do test -f "$$f" || continue; echo "--- $$f"; cat "$$f"; exit 1; done

bench-python: python
	@mkdir -p $(B)/bench
	$(Q)$(PY_VENV)/bin/python -P python/bench/bench.py --json $(B)/bench/python.json $(BENCH_PYTHON_ARGS)

# ---------------------------------------------------------------- install

# Made on every install: PREFIX and libdir may differ from the last one.
$(B)/shmlease.pc: shmlease.pc.in lib/shmlease.h FORCE
	@mkdir -p $(B)
	$(Q)sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(libdir)|' \
		-e 's|@INCLUDEDIR@|$(includedir)|' -e 's|@VERSION@|$(VERSION)|' \
		-e 's|@REQUIRES_PRIVATE@|$(PC_REQUIRES)|' -e '/^Requires.private: *$$/d' \
		-e 's|@LIBS_PRIVATE@|$(PC_LIBS_PRIVATE)|' $< > $@

# Every page in man/, in the section its suffix names.
MAN_PAGES := $(wildcard man/*.[1-8])

# A page name for each function (shmlease(3)'s .SS lines) and subcommand
# (shmlease(1)'s SYNOPSIS), git style: a .so link to the one page that
# documents it, so that `man shl_acquire` and `man shmlease-run` work.
MAN3_LINKS = $(shell sed -n 's/^\.SS \(shl_.*\)/\1/p' man/shmlease.3 | tr -d ',')
MAN1_LINKS = $(shell sed -n 's/^\.B shmlease \([a-z-]*\)$$/shmlease-\1/p' man/shmlease.1 | sort -u)
install: all $(B)/shmlease.pc
	install -d $(DESTDIR)$(bindir) $(DESTDIR)$(libdir) $(DESTDIR)$(includedir) \
		$(DESTDIR)$(includedir)/shmlease $(DESTDIR)$(pkgconfigdir)
	install -m 0644 lib/shmlease.h $(DESTDIR)$(includedir)/shmlease.h
	install -m 0644 $(filter lib/shmlease/%,$(PUBLIC_H)) $(DESTDIR)$(includedir)/shmlease/
	install -m 0644 $(A) $(DESTDIR)$(libdir)/libshmlease.a
	install -m 0755 $(SO) $(DESTDIR)$(libdir)/libshmlease.so.$(VERSION)
	ln -sf libshmlease.so.$(VERSION) $(DESTDIR)$(libdir)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(libdir)/libshmlease.so
	install -m 0644 $(B)/shmlease.pc $(DESTDIR)$(pkgconfigdir)/shmlease.pc
	install -m 0755 $(TOOL) $(DESTDIR)$(bindir)/shmlease
	$(Q)for p in $(MAN_PAGES); do \
	  d=$(DESTDIR)$(mandir)/man$${p##*.}; echo "install -m 0644 $$p $$d/"; \
	  install -d $$d && install -m 0644 $$p $$d/ || exit 1; \
	done
	for f in $(MAN3_LINKS); do echo .so man3/shmlease.3 >$(DESTDIR)$(mandir)/man3/$$f.3; done
	for f in $(MAN1_LINKS); do echo .so man1/shmlease.1 >$(DESTDIR)$(mandir)/man1/$$f.1; done

uninstall:
	rm -f $(DESTDIR)$(includedir)/shmlease.h $(DESTDIR)$(libdir)/libshmlease.a \
		$(DESTDIR)$(libdir)/libshmlease.so.$(VERSION) $(DESTDIR)$(libdir)/$(SONAME) \
		$(DESTDIR)$(libdir)/libshmlease.so $(DESTDIR)$(pkgconfigdir)/shmlease.pc \
		$(DESTDIR)$(bindir)/shmlease
	rm -f $(patsubst lib/%,$(DESTDIR)$(includedir)/%,$(filter lib/shmlease/%,$(PUBLIC_H)))
	[ ! -d $(DESTDIR)$(includedir)/shmlease ] || \
		rmdir --ignore-fail-on-non-empty $(DESTDIR)$(includedir)/shmlease
	for p in $(notdir $(MAN_PAGES)); do rm -f $(DESTDIR)$(mandir)/man$${p##*.}/$$p; done
	rm -f $(MAN3_LINKS:%=$(DESTDIR)$(mandir)/man3/%.3) $(MAN1_LINKS:%=$(DESTDIR)$(mandir)/man1/%.1)

# ---------------------------------------------------------------- deb

# Debian packages (debian/): libshmlease0.3, libshmlease-dev, shmlease,
# python3-shmlease. Built from a copy of the tree in $(B)/deb/src, so that
# dpkg-buildpackage's clean and its output in ../ touch neither this build
# nor the folder above the tree; the .debs are left in $(B)/ (their
# detached debug symbols in $(B)/dbgsym/).
# DEB_BUILD_OPTIONS=nocheck skips the tests that debian/rules runs.
DEB_DIR := $(B)/deb
deb-deps:
	@if ! dpkg-checkbuilddeps >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "  DEPS    apt-get build-dep ./"; \
	    DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get build-dep -y -qq ./ >/dev/null || exit 1; \
	  else \
	    echo "the package build needs its build dependencies. Install them with:" >&2; \
	    echo "  sudo apt-get build-dep ./" >&2; exit 1; \
	  fi; \
	fi

deb: deb-deps
	$(Q)rm -rf $(DEB_DIR) && mkdir -p $(DEB_DIR)/src && rm -f $(B)/*.deb $(B)/dbgsym/*.deb
	$(Q)tar -cf - --exclude=./$(B) --exclude=./.git --exclude=./.pybuild . | tar -xf - -C $(DEB_DIR)/src
	$(Q)cd $(DEB_DIR)/src && dpkg-buildpackage -us -uc -b
	$(Q)mkdir -p $(B)/dbgsym && for f in $(DEB_DIR)/*-dbgsym_*.deb; do \
	  if [ -e "$$f" ]; then mv "$$f" $(B)/dbgsym/ || exit 1; fi; \
	done
	$(Q)mv $(DEB_DIR)/*.deb $(B)/
	$(Q)rm -rf $(DEB_DIR)
	@ls -l $(B)/*.deb

# The packages installed and used as a user would, then purged (CI runs it
# with DEB_BUILD_OPTIONS=nocheck after the suite): tests/deb_check.sh.
deb-check: deb
	$(Q)sh tests/deb_check.sh $(B)

# ---------------------------------------------------------------- misc

FORMAT_SRC := $(wildcard shm/*.[ch] etcd/*.[ch] lib/*.[ch] lib/*/*.[ch] tools/*.[ch] tests/*.[ch] tests/fuzz/*.c \
	examples/*.[ch] tools/cluster/*.c python/src/*.[ch])
format:
	clang-format -i $(FORMAT_SRC)
format-check:
	clang-format --dry-run --Werror $(FORMAT_SRC)

clean:
	rm -rf $(B)

-include $(shell find $(B) -name '*.d' 2>/dev/null)
