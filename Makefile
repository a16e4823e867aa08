# statefs build.  `make` builds build/statefs; `make test` and `make run`
# first install what is missing (scripts/deps.sh).

CC      ?= cc
FUSE_CFLAGS := $(shell pkg-config --cflags fuse3 2>/dev/null)
FUSE_LIBS   := $(shell pkg-config --libs fuse3 2>/dev/null)
WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-parameter
CFLAGS  ?= -O2 -g
CFLAGS  += -std=gnu11 $(WARN) -pthread -I.
B       := build

STORE_SRC  := $(wildcard store/*.c)
LAYOUT_SRC := $(wildcard layout/*.c)
FS_SRC     := $(wildcard fs/*.c)
HDRS       := $(wildcard store/*.h layout/*.h fs/*.h)

# Test builds carry the allocation-failure hook (store/alloc.h).
ASAN := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined -DSTORE_FAULTS
TSAN := -O1 -g -fsanitize=thread -DSTORE_FAULTS

UNIT_TESTS := $(patsubst tests/unit/%.c,$(B)/unit/%,$(wildcard tests/unit/test_*.c))
STRESS     := $(B)/unit/stress_store $(B)/unit/stress_store.tsan

.PHONY: all deps unit test run clean bench-snapshot

all: $(B)/statefs

$(B)/statefs: $(STORE_SRC) $(LAYOUT_SRC) $(FS_SRC) $(HDRS)
	@mkdir -p $(B)
	$(CC) $(CFLAGS) $(FUSE_CFLAGS) -o $@ $(STORE_SRC) $(LAYOUT_SRC) $(FS_SRC) $(FUSE_LIBS)

$(B)/unit/test_%: tests/unit/test_%.c $(STORE_SRC) $(LAYOUT_SRC) $(HDRS) tests/unit/unit.h
	@mkdir -p $(B)/unit
	$(CC) -std=gnu11 $(WARN) -pthread -I. $(ASAN) -o $@ $< $(STORE_SRC) $(LAYOUT_SRC) -lcmocka

$(B)/unit/stress_store: tests/unit/stress_store.c $(STORE_SRC) $(HDRS) tests/unit/unit.h
	@mkdir -p $(B)/unit
	$(CC) -std=gnu11 $(WARN) -pthread -I. $(ASAN) -o $@ $< $(STORE_SRC) -lcmocka

$(B)/unit/stress_store.tsan: tests/unit/stress_store.c $(STORE_SRC) $(HDRS) tests/unit/unit.h
	@mkdir -p $(B)/unit
	$(CC) -std=gnu11 $(WARN) -pthread -I. $(TSAN) -o $@ $< $(STORE_SRC) -lcmocka

unit: $(UNIT_TESTS) $(STRESS)

deps:
	@scripts/deps.sh

test: deps
	@$(MAKE) --no-print-directory all unit
	@scripts/run-tests.sh

run: deps
	@$(MAKE) --no-print-directory all
	@scripts/run.sh

clean:
	rm -rf $(B)
