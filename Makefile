# statefs build.  `make` builds build/statefs; `make test` and `make run`
# first install what is missing (scripts/deps.sh).

# `make` alone is `make all` (the daemon and its man page), whatever rule
# comes first below.
.DEFAULT_GOAL := all

CC      ?= cc
FUSE_CFLAGS := $(shell pkg-config --cflags fuse3 2>/dev/null)
FUSE_LIBS   := $(shell pkg-config --libs fuse3 2>/dev/null)
HIREDIS_CFLAGS := $(shell pkg-config --cflags hiredis 2>/dev/null)
HIREDIS_LIBS   := $(shell pkg-config --libs hiredis 2>/dev/null)
# The shared store's TLS stream (redis/link.c) is OpenSSL's; hiredis
# formats and parses the protocol on it, so whatever links redis/ links both.
OPENSSL_LIBS   := $(shell pkg-config --libs openssl 2>/dev/null)
HIREDIS_LIBS   += $(OPENSSL_LIBS)
# sd_notify(3): the daemon tells systemd when the mount is ready.
SYSTEMD_CFLAGS := $(shell pkg-config --cflags libsystemd 2>/dev/null)
SYSTEMD_LIBS   := $(shell pkg-config --libs libsystemd 2>/dev/null)
WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-parameter
CFLAGS  ?= -O2 -g
CFLAGS  += -std=gnu11 $(WARN) -pthread -I.
B       := build

# store/ is the interface and the embedded store; redis/ the shared
# store's engine on Redis: its mirror, transport and Functions library
# (redis/lua/*.lua as C data, build/gen/statefs_lua.c, below).
STORE_SRC  := $(wildcard store/*.c)
REDIS_SRC  := $(wildcard redis/*.c) $(B)/gen/statefs_lua.c
LAYOUT_SRC := $(wildcard layout/*.c)
FS_SRC     := $(wildcard fs/*.c)
# lib/: what every layer may use and that uses none of them (lib/text.c,
# the snprintf-style appender); it goes with the core, wherever store/ goes.
COMMON_SRC := $(wildcard lib/*.c)
# Two libraries, each one archive per flavour (below): libstatefs.a, the
# core, layout/ and lib/, which needs no hiredis;
# libstatefs-redis.a, the engine on Redis, which needs the first.  The
# embedded store's tests and tools link the first alone, the daemon and
# the shared store's tests both.
CORE_SRC   := $(STORE_SRC) $(LAYOUT_SRC) $(COMMON_SRC)

# Each source is compiled once per flavour into build/obj/FLAVOUR/, with
# -MMD -MP dependency files, and every binary of that flavour links the
# same objects:
#   rel   the daemon and the benchmarks (CFLAGS)
#   asan  unit tests: ASan/UBSan, the test hooks (-DSTORE_FAULTS,
#         store/alloc.h's allocation-failure injection) and the lock
#         order checked on every acquisition (-DSTORE_LOCKCHECK,
#         store/lockcheck.c)
#   tsan  the concurrency tests under ThreadSanitizer (stress_store,
#         test_remote_ops), hooks and lock order checks on
#   fuzz  libFuzzer targets (clang, see below)
ASAN := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined -DSTORE_FAULTS -DSTORE_LOCKCHECK
TSAN := -O1 -g -fsanitize=thread -DSTORE_FAULTS -DSTORE_LOCKCHECK
BASE := -std=gnu11 $(WARN) -pthread -I. -MMD -MP

obj = $(patsubst %.c,$(B)/obj/$(1)/%.o,$(2))
LIB_SRC := $(CORE_SRC) $(REDIS_SRC)

# The archives: build/libstatefs.a and build/libstatefs-redis.a for the
# daemon and the tools (rel), build/FLAVOUR/lib*.a for the tests.
# $(call core,FLAVOUR) is the first alone, $(call libs,FLAVOUR) both, in
# link order (the engine before the core it calls).
libdir = $(if $(filter rel,$(1)),$(B),$(B)/$(1))
core = $(call libdir,$(1))/libstatefs.a
libs = $(call libdir,$(1))/libstatefs-redis.a $(call core,$(1))
define LIBRARIES
$(call core,$(1)): $(call obj,$(1),$(CORE_SRC))
	@mkdir -p $$(@D)
	rm -f $$@
	ar rcs $$@ $$^
$(call libdir,$(1))/libstatefs-redis.a: $(call obj,$(1),$(REDIS_SRC))
	@mkdir -p $$(@D)
	rm -f $$@
	ar rcs $$@ $$^
endef
$(foreach f,rel asan tsan,$(eval $(call LIBRARIES,$(f))))

$(B)/obj/rel/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP $(FUSE_CFLAGS) $(HIREDIS_CFLAGS) $(SYSTEMD_CFLAGS) -c -o $@ $<
$(B)/obj/asan/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(BASE) $(ASAN) $(FUSE_CFLAGS) $(HIREDIS_CFLAGS) -c -o $@ $<
$(B)/obj/tsan/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(BASE) $(TSAN) $(HIREDIS_CFLAGS) -c -o $@ $<

-include $(shell find $(B)/obj -name '*.d' 2>/dev/null)
# Objects are kept between builds, not removed as intermediates.
.SECONDARY:

# The shared store's Redis Functions library: the parts of redis/lua/,
# in this order, one after the other, make build/gen/statefs.lua, the
# text FUNCTION LOAD takes (contract.lua, with the `#!lua name=statefs`
# line, first; each part uses only what the parts before it define:
# "Files" in contract.lua's essay).  Every part is listed here:
# tests/unit/redis/test_statefs_lua.c checks that none is left out.
LUA_SRC := $(addprefix redis/lua/,contract.lua base.lua call.lua \
	   tomb.lua bucket.lua parent.lua tenant.lua child.lua content.lua \
	   setattr.lua lease.lua drain.lua reaper.lua store.lua dump.lua \
	   register.lua lock.lua)

$(B)/gen/statefs.lua: $(LUA_SRC)
	@mkdir -p $(@D)
	cat $(LUA_SRC) >$@.tmp
	mv $@.tmp $@

# That library as C data (redis/statefs_lua.h): each byte becomes a 0xNN
# initializer (od and sed, nothing more), then a NUL.  Compiled per
# flavour like any source, as build/obj/FLAVOUR/build/gen/statefs_lua.o.
$(B)/gen/statefs_lua.c: $(B)/gen/statefs.lua
	@mkdir -p $(@D)
	{ echo '/* Made from build/gen/statefs.lua (LUA_SRC) by the Makefile: do not edit. */'; \
	  echo '#include "redis/statefs_lua.h"'; \
	  echo 'const char store_statefs_lua[] = {'; \
	  od -An -v -tx1 $< | sed 's/ \([0-9a-f][0-9a-f]\)/0x\1,/g'; \
	  echo '0x00 };'; \
	  echo 'const size_t store_statefs_lua_len = sizeof(store_statefs_lua) - 1;'; \
	} >$@.tmp
	mv $@.tmp $@

# The unit tests mirror the sources: tests/unit/store/, redis/, layout/,
# fs/ and stress/ hold the tests of store/, redis/, layout/, fs/ and the
# stress test; each test_NAME.c becomes build/unit/test_NAME.
UNIT_SRC   := $(wildcard tests/unit/*/test_*.c)
UNIT_TESTS := $(patsubst %.c,$(B)/unit/%,$(notdir $(UNIT_SRC)))
# unit_src NAME: the source of build/unit/NAME.
unit_src = $(filter %/$(1).c,$(UNIT_SRC))
STRESS     := $(B)/unit/stress_store $(B)/unit/stress_store.tsan \
	      $(B)/unit/test_remote_ops.tsan

.PHONY: all deps unit test test-cluster check run clean bench bench-snapshot bench-tls bench-mounts bench-cluster install uninstall

all: $(B)/statefs $(B)/statefs.8

$(B)/statefs: $(call obj,rel,$(FS_SRC)) $(call libs,rel)
	$(CC) $(CFLAGS) -o $@ $^ $(FUSE_LIBS) $(SYSTEMD_LIBS) $(HIREDIS_LIBS)

# The man page: docs/statefs.8.scd with its @OPTIONS@ line replaced by
# the option table --help prints (layout_help_scdoc, through
# scripts/mangen.c), then scdoc(1).
$(B)/mangen: $(call obj,rel,scripts/mangen.c) $(call core,rel)
	$(CC) $(CFLAGS) -o $@ $^

$(B)/statefs.8: docs/statefs.8.scd $(B)/mangen
	$(B)/mangen < $< > $(B)/statefs.8.scd
	scdoc < $(B)/statefs.8.scd > $@.tmp
	mv $@.tmp $@

# Installing, as a distribution's package does: `make install
# DESTDIR=STAGING PREFIX=/usr`.  statefs goes to bin, as sshfs and s3fs
# do: any user may mount it (through fusermount3), and mount(8) runs
# mount.fuse3 with no PATH, whose shell then finds statefs in /usr/bin or
# /usr/local/bin (statefs(8), MOUNTING).  The units name the installed
# binary, so they are written at install time.
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
MANDIR  ?= $(PREFIX)/share/man
UNITDIR ?= $(PREFIX)/lib/systemd/system
INSTALL ?= install
UNITS   := statefs.service statefs@.service

install: all
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(UNITDIR)
	$(INSTALL) -m 0755 $(B)/statefs $(DESTDIR)$(BINDIR)/statefs
	$(INSTALL) -m 0644 $(B)/statefs.8 $(DESTDIR)$(MANDIR)/man8/statefs.8
	for u in $(UNITS); do \
		sed 's|@BINDIR@|$(BINDIR)|g' dist/$$u.in > $(B)/$$u && \
		$(INSTALL) -m 0644 $(B)/$$u $(DESTDIR)$(UNITDIR)/$$u || exit 1; \
	done

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/statefs $(DESTDIR)$(MANDIR)/man8/statefs.8
	for u in $(UNITS); do rm -f $(DESTDIR)$(UNITDIR)/$$u; done

# The fs/ adapter's unit tests (tests/unit/fs/test_*.c, each a binary)
# run every file of fs/ but main.c against the stand-in for libfuse in
# tests/unit/fs/fuse_stub.c (it defines every libfuse function they
# call: not linked with libfuse).
FS_TESTS := $(patsubst %.c,$(B)/unit/%,$(notdir $(wildcard tests/unit/fs/test_*.c)))
FS_UNDER_TEST := $(call obj,asan,tests/unit/fs/fuse_stub.c $(filter-out fs/main.c,$(FS_SRC)))

# The store's stress test, one binary of tests/unit/stress/stress_*.c,
# races the kernel's inode table (fs/inode.c, which needs no libfuse)
# against the removals of the nodes it holds.  (It also races a
# mirror's applying: both libraries.)
STRESS_SRC := $(wildcard tests/unit/stress/stress_*.c)
$(B)/unit/stress_store: $(call obj,asan,$(STRESS_SRC) fs/inode.c) $(call libs,asan)
	@mkdir -p $(@D)
	$(CC) $(ASAN) -pthread -o $@ $^ -lcmocka $(HIREDIS_LIBS)

# The shared store's tests (the mirror, the transport, the engine, the
# Functions library) link both libraries; every other unit test the
# core's alone.
REDIS_TESTS := $(patsubst %,$(B)/unit/%,test_cluster test_cluster_pool test_link test_mirror test_rconn \
	       test_remote_clock test_remote_lock test_remote_ops \
	       test_remote_options test_statefs_lua)

# (Second expansion: each binary's object is found by its name.)
.SECONDEXPANSION:
$(REDIS_TESTS): $(B)/unit/%: $$(call obj,asan,$$(call unit_src,$$*)) $(call libs,asan)
	@mkdir -p $(@D)
	$(CC) $(ASAN) -pthread -o $@ $^ -lcmocka $(HIREDIS_LIBS)

$(FS_TESTS): $(B)/unit/%: $$(call obj,asan,$$(call unit_src,$$*)) $(FS_UNDER_TEST) $(call core,asan)
	@mkdir -p $(@D)
	$(CC) $(ASAN) -pthread -o $@ $^ -lcmocka

$(filter-out $(REDIS_TESTS) $(FS_TESTS),$(UNIT_TESTS)): $(B)/unit/%: $$(call obj,asan,$$(call unit_src,$$*)) $(call core,asan)
	@mkdir -p $(@D)
	$(CC) $(ASAN) -pthread -o $@ $^ -lcmocka

$(B)/unit/stress_store.tsan: $(call obj,tsan,$(STRESS_SRC) fs/inode.c) $(call libs,tsan)
	@mkdir -p $(@D)
	$(CC) $(TSAN) -pthread -o $@ $^ -lcmocka $(HIREDIS_LIBS)

# A mount on a shared store runs its follower beside the callers'
# threads: its test runs under TSan too.
$(B)/unit/test_remote_ops.tsan: $(call obj,tsan,tests/unit/redis/test_remote_ops.c) $(call libs,tsan)
	@mkdir -p $(@D)
	$(CC) $(TSAN) -pthread -o $@ $^ -lcmocka $(HIREDIS_LIBS)

# The cluster pool's threads under TSan too (built on demand:
# make build/unit/test_cluster_pool.tsan).
$(B)/unit/test_cluster_pool.tsan: $(call obj,tsan,tests/unit/redis/test_cluster_pool.c) $(call libs,tsan)
	@mkdir -p $(@D)
	$(CC) $(TSAN) -pthread -o $@ $^ -lcmocka $(HIREDIS_LIBS)

unit: $(UNIT_TESTS) $(STRESS)

deps:
	@scripts/deps.sh

# make test and make check build on every core (-j as many as nproc
# says), unless the command line chose (make -j2 test, make -j1 check):
# a clean tree is four flavours of every source.  Read in the recipe,
# where MAKEFLAGS holds the command line's -j.
NPROC := $(shell nproc 2>/dev/null || echo 1)
JOBS   = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(NPROC))

test: deps
	@$(MAKE) --no-print-directory $(JOBS) all unit fuzz-build
	@scripts/run-tests.sh

# The quick set, for every commit: the daemon, the unit tests but the
# TSan builds, the embedded store's bats suites but the slow ones, the
# seam (scripts/run-tests.sh --check).
check: deps
	@$(MAKE) --no-print-directory $(JOBS) all $(UNIT_TESTS) $(B)/unit/stress_store
	@scripts/run-tests.sh --check

# The shared store's bats group on a Redis Cluster of 3 primaries and 3
# replicas a file (STATEFS_STORE=cluster, scripts/run-tests.sh
# --cluster); not part of make test until a mount on a cluster works.
test-cluster: deps
	@$(MAKE) --no-print-directory $(JOBS) all
	@scripts/run-tests.sh --cluster

run: deps
	@$(MAKE) --no-print-directory all
	@scripts/run.sh

clean:
	rm -rf $(B)

# Snapshot stall benchmark: 1,000,000 children, admissions timed while
# store_snapshot_take() runs (scripts/bench/snapshot_stall.c).
$(B)/bench/snapshot_stall: $(call obj,rel,scripts/bench/snapshot_stall.c) $(call core,rel)
	@mkdir -p $(B)/bench
	$(CC) $(CFLAGS) -o $@ $^

# The benchmark suite (scripts/bench/run.sh): statefs against tmpfs and
# a minimal FUSE filesystem (the floor), statefs on the shared store (its
# own redis-server) beside them, then the store-level stall benchmarks.
# Not part of `make test`; needs root (mounts, drop_caches).  BENCH_QUICK=1
# in the environment: a reduced run of a few minutes.
BENCH_PKGS := fsmark gnuplot-nox bc valgrind

$(B)/bench/loadgen: scripts/bench/loadgen.c
	@mkdir -p $(B)/bench
	$(CC) -std=gnu11 $(WARN) -pthread -O2 -g -o $@ $<

$(B)/bench/floorfs: scripts/bench/floorfs.c
	@mkdir -p $(B)/bench
	$(CC) -std=gnu11 $(WARN) -pthread -O2 -g $(FUSE_CFLAGS) -o $@ $< $(FUSE_LIBS)

bench: deps
	@scripts/deps.sh $(BENCH_PKGS)
	@$(MAKE) --no-print-directory all $(B)/bench/loadgen $(B)/bench/floorfs \
		$(B)/bench/snapshot_stall
	scripts/bench/run.sh
	$(MAKE) --no-print-directory bench-snapshot bench-tls bench-mounts bench-cluster

# The cost of TLS per transition: create, unlink and the other point
# phases on a mount over rediss:// against one over redis://, one
# redis-server, in one run (scripts/bench/tls.sh).
bench-tls: all $(B)/bench/loadgen
	scripts/bench/tls.sh

# What idle mounts cost Redis per transition (1, 4 and 16 mounts, one
# busy), and the memory of a mount that uses 1 tenant of 1,000
# (scripts/bench/mounts.sh), into build/bench/mounts.txt.
bench-mounts: all
	@mkdir -p $(B)/bench
	scripts/bench/mounts.sh | tee $(B)/bench/mounts.txt

# The shared store on a Redis Cluster of 3 primaries and 3 replicas: the
# share of FCALLs on each primary (target 25%..42% each), main-thread
# CPU per transition on each shard and the ceiling of N shards computed
# from it, for 300 tenants through a mount (scripts/bench/cluster.sh;
# --selftest drives the statistics without a mount), into
# build/bench/cluster.txt.
bench-cluster: all
	@mkdir -p $(B)/bench
	@st=0; scripts/bench/cluster.sh >$(B)/bench/cluster.txt 2>&1 || st=$$?; \
		cat $(B)/bench/cluster.txt; exit $$st

bench-snapshot: $(B)/bench/snapshot_stall
	$(B)/bench/snapshot_stall
	$(B)/bench/snapshot_stall --populated
	$(B)/bench/snapshot_stall --expiry

# Fuzzing: libFuzzer targets tests/fuzz/fuzz_*.c (clang-14 and its
# libclang-rt-14-dev runtime, from scripts/deps.sh), each built with ASan,
# UBSan, the store's test hooks (-DSTORE_FAULTS: fuzz_store runs
# operations inside a snapshot through store_snapshot_step_hook) and the
# lock order checks (-DSTORE_LOCKCHECK) into build/fuzz/.  `make fuzz`
# runs each for FUZZ_SECONDS on a copy of its seed corpus kept in
# build/fuzz/corpus/ (the committed corpus tests/fuzz/corpus/ stays
# small); `make fuzz-smoke` runs each for 5 s from the seeds alone, as
# `make test` does.  tests/fuzz/run.sh says
# how to reproduce a finding.
FUZZ_CC      ?= clang-14
FUZZ_SECONDS ?= 60
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined \
	-fsanitize-coverage-ignorelist=tests/fuzz/coverage-ignore.txt
FUZZ_FLAGS   := $(BASE) -g -O1 -DSTORE_FAULTS -DSTORE_LOCKCHECK -fsanitize=fuzzer-no-link $(FUZZ_SAN)
FUZZ_TARGETS := $(patsubst tests/fuzz/%.c,$(B)/fuzz/%,$(wildcard tests/fuzz/fuzz_*.c))

.PHONY: fuzz fuzz-build fuzz-smoke fuzz-cluster

$(B)/obj/fuzz/%.o: %.c tests/fuzz/coverage-ignore.txt
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(HIREDIS_CFLAGS) -c -o $@ $<

# layout/ needs store_limits_default() from store/.
$(B)/fuzz/%: $(B)/obj/fuzz/tests/fuzz/%.o $(call obj,fuzz,$(LIB_SRC))
	@mkdir -p $(@D)
	$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_SAN) -pthread -o $@ $^ $(HIREDIS_LIBS)

# fuzz_store and fuzz_shared are each one target of several files: the
# entry point tests/fuzz/fuzz_NAME.c, beside its header fuzz_NAME.h,
# and its parts in tests/fuzz/NAME/.
$(B)/fuzz/fuzz_store: $(call obj,fuzz,$(wildcard tests/fuzz/store/*.c))
$(B)/fuzz/fuzz_shared: $(call obj,fuzz,$(wildcard tests/fuzz/shared/*.c))

fuzz-build: $(FUZZ_TARGETS)

fuzz: deps
	@$(MAKE) --no-print-directory fuzz-build
	@tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

fuzz-smoke: deps
	@$(MAKE) --no-print-directory fuzz-build
	@tests/fuzz/run.sh --smoke 5 $(FUZZ_TARGETS)

# fuzz_shared on a Redis Cluster of 3 primaries it starts itself
# (FUZZ_SHARED_CLUSTER=1: tests/fuzz/README.md, "Cluster mode") for
# FUZZ_SECONDS, its corpus build/fuzz/corpus/fuzz_shared-cluster.
fuzz-cluster: deps
	@$(MAKE) --no-print-directory $(B)/fuzz/fuzz_shared
	@tests/fuzz/run.sh --cluster $(FUZZ_SECONDS) $(B)/fuzz/fuzz_shared
