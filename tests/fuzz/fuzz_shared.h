/*
 * fuzz_shared.h - what the parts of the fuzz_shared target share: its
 * name space and ceilings, the two sides and the state of one input
 * (F), and each part's functions, grouped under the file that defines
 * them.
 *
 * One libFuzzer target, build/fuzz/fuzz_shared, of
 * tests/fuzz/fuzz_shared.c (its redis-server, failing and tracing, the
 * input, one input's setup: its essay says what the target checks) and
 * the files of tests/fuzz/shared/: ops.c, the operations applied to
 * both sides; compare.c, what both sides must show after every step.
 */
#ifndef STATEFS_FUZZ_SHARED_H
#define STATEFS_FUZZ_SHARED_H

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "redis/redis.h"
#include "tests/unit/redis/cluster_fixture.h"
#include "tests/unit/redis/redis_fixture.h"
#include "store/store.h"

#define NT 2
#define CLUSTER_PRIMARIES 3
#define NP 3
#define NC 4
#define NSTAGE 2
#define NHANDLE 2
#define MAX_OPS 128
#define MAX_PAYLOAD 8
#define TEXT_MAX 16384
#define MAX_PAIRS 1024

static const char *const TN[NT] = { "t0", "t1" };
static const char *const PN[NP] = { "p0", "p1", "p2" };
static const char *const CN[NC] = { "c0", "c1", "c2", "c3" };

static const uint64_t TTLS[8] = { 0, 1, 100, 250, 500, 700, 1000, 2000 };
static const uint64_t ADVANCES[8] = { 1, 50, 99, 100, 250, 500, 1000, 3000 };
static const uint64_t OFFSETS[8] = { 0, 0, 1, 2, 4, 7, 9, 1u << 20 };
static const mode_t MODES[8] = { 0755, 0700, 0777, 01777, 0500, 0311, 0644, 0 };

static const struct store_owner OWNERS[2] = {
	{ 1000, 1000, 0755 },
	{ 2000, 2000, 01777 },
};
/* Who removes: nobody checked, the first owner, another user. */
static const struct store_cred CREDS[3] = {
	{ 0, 0, NULL, 0 }, { 1000, 1000, NULL, 0 }, { 2000, 2000, NULL, 0 },
};

#define EMB 0
#define SHR 1
static const char *const SIDE[2] = { "embedded", "shared" };

/* One authority and what the input keeps open on it. */
struct side {
	struct store *s;
	struct store_stage *stage[NSTAGE];
	struct store_node *handle[NHANDLE];
};
/* The whole state of the target (fuzz_shared.c defines it). */
struct fuzz_shared {
	/* the redis-server of this process, or (FUZZ_SHARED_CLUSTER=1)
	 * its Redis Cluster of CLUSTER_PRIMARIES primaries */
	struct redis_fixture redis;
	struct cluster_fixture cluster;
	bool on_cluster;
	/* FUZZ_SHARED_SKIP=store-drain (shared/ops.c, op_drain) */
	bool skip_store_drain;
	/* the current input */
	struct side d[2];
	uint64_t clock;                /* the embedded store's clock */
	const uint8_t *in;
	size_t len, pos;
	char trace[MAX_OPS * 2][128];
	size_t ntrace;
	bool live_trace;
	char text[2][TEXT_MAX];        /* what verify() compares */
	/* Inode identity: pair[k] = { embedded ino, shared ino } */
	uint64_t pair[MAX_PAIRS][2];
	size_t npair;
};

extern struct fuzz_shared F;

/* A path byte: tenant bit 0, parent bits 1-2, child bits 3-4, extra 5-7. */
struct path {
	int t, p, c, x;
};

/* tests/fuzz/fuzz_shared.c: failing and tracing, the input, the nodes */
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void note_skip(void);
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void same(const char *what, long a, long b);
void pair_ino(const char *what, uint64_t a, uint64_t b, bool traced);
int64_t ino_as(int i, int64_t ino);
unsigned next_byte(void);
struct path next_path(void);
bool find(const struct path *p, int depth, struct store_node *n[2]);
void unref2(struct store_node *n[2]);

/* tests/fuzz/shared/ops.c: the operations */
void run_op(void);

/* tests/fuzz/shared/compare.c: what both sides must show */
void fz_settle(void);
void verify(void);

#endif /* STATEFS_FUZZ_SHARED_H */
