/*
 * stress.h - what the parts of the store's stress test share
 * (tests/unit/stress/stress_*.c, one binary: build/unit/stress_store and
 * build/unit/stress_store.tsan).
 *
 * stress_store.c runs every part's tests as one cmocka group and records
 * the worker threads' failures; each other file is a mechanism under
 * concurrency: stress_race.c the lock-step races, stress_mixed.c the
 * mixed random workload and stress_check.c what it is checked against,
 * stress_lease.c leases, the reaper and the event log, stress_replay.c
 * the event stream replayed to the store, stress_mirror.c a mirror's
 * root log position.  Each exports its tests as NAME_tests and
 * NAME_ntests.
 *
 * Worker threads never call cmocka's assertions (they longjmp to the
 * main thread's frame): they record failures with failf(), and the main
 * thread asserts after joining (assert_no_failures).
 */
#ifndef STATEFS_UNIT_STRESS_H
#define STATEFS_UNIT_STRESS_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "fs/inode.h"
#include "redis/mirror.h"
#include "store/store.h"
#include "tests/unit/unit.h"

#define NTHREADS 6
#define NTEN 2
#define NPAR 4
#define NCHILD 6
#define NREM 8
#define MAXPAY 64

static const struct store_owner DOWN = { 1000, 1000, 0755 };
static const struct store_owner FOWN = { 1000, 1000, 0644 };

static inline uint64_t atomic_clock_now(void *arg)
{
	return __atomic_load_n((uint64_t *)arg, __ATOMIC_ACQUIRE);
}

static inline void atomic_clock_advance(uint64_t *clk, uint64_t ms)
{
	__atomic_fetch_add(clk, ms, __ATOMIC_ACQ_REL);
}

/* Failure recording (stress_store.c) ------------------------------------ */

/* Record a failure of a worker thread (the first one's text is kept). */
void failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Forget the failures recorded so far (at the start of a test). */
void failures_reset(void);
/* Fail the test if a worker thread recorded a failure. */
void assert_no_failures(void);

/* A store and its first nodes ---------------------------------------------- */

static inline struct store *new_store(const struct store_limits *l, uint64_t *clk)
{
	struct store *s = NULL;
	struct store_clock clock = { atomic_clock_now, clk };

	assert_int_equal(store_new(l, &clock, &s), 0);
	return s;
}

/* Read whatever reader @rd has pending onto the end of *@ev (*@len bytes
 * of *@cap, grown as needed, kept NUL-terminated); returns the bytes
 * read.  Out of memory: a failure (failf), the buffer emptied. */
static inline size_t read_pending(struct store *s, struct store_event_reader *rd,
				  char **ev, size_t *len, size_t *cap)
{
	size_t total = 0, got;

	do {
		if (*cap - *len < 65536) {
			*cap = *cap ? 2 * *cap : 1 << 20;
			*ev = realloc(*ev, *cap);
			if (!*ev) {
				failf("oom");
				*cap = *len = 0;
				return total;
			}
		}
		got = store_events_read(s, rd, *ev + *len, *cap - *len - 1);
		*len += got;
		total += got;
	} while (got);
	(*ev)[*len] = '\0';
	return total;
}

static inline void check_all_ok(struct store *s)
{
	char why[256] = "";
	int rc = store_check_all(s, why, sizeof why);

	if (rc != 0)
		fail_msg("store_check_all: %d (%s)", rc, why);
}

static inline struct store_node *mkdir_or_fail(struct store *s, struct store_node *dir,
					const char *name)
{
	struct store_node *n = NULL;
	int rc = store_mkdir(s, dir, name, &DOWN, &n);

	if (rc != 0)
		fail_msg("store_mkdir(%s): %d", name, rc);
	return n;
}

/* STRESS_ITERS: the operations per thread of the mixed workload. */
static inline int mixed_iters(void)
{
	const char *e = getenv("STRESS_ITERS");

	return e ? atoi(e) : 40000;
}

/* STRESS_SEED varies the random workload (the default is fixed). */
static inline unsigned seed_base(void)
{
	const char *e = getenv("STRESS_SEED");

	return e ? (unsigned)strtoul(e, NULL, 0) : 0x5eed;
}

/* The mixed workload (stress_mixed.c), checked by stress_check.c ------------ */

struct mixed {
	struct store *s;
	struct fs_inodes inodes;  /* what the kernel would know */
	uint64_t clk;
	int iters;
	bool leases;
	unsigned check_every; /* per 10000 ops: concurrent store_check_all */
	unsigned snap_every;  /* per 10000 ops: a snapshot, checked */
	atomic_long snaps;
};

struct worker {
	struct mixed *m;
	int id;
	unsigned seed;
	struct store_node *pcache[NTEN][NPAR]; /* parent handles, maybe dead */
	struct store_node *ccache[NTEN][4];    /* child handles, maybe dead */
	struct store_node *ctenant[NTEN][4];   /* the tenant each was found in */
	struct { uint64_t ino; uint64_t n; } rem[NREM];
	uint64_t *inos;
	size_t ninos, cap;
	long ops;
};
static inline void put(struct worker *w, struct store_node *n)
{
	if (n)
		store_node_unref(w->m->s, n);
}

/*
 * A snapshot taken while the other threads run must be one state of the
 * store (stress_check.c).
 */
void snapshot_check(struct worker *w, struct store_node *tenant);

struct recount {
	uint64_t tenants, parents, children, links, bytes;
};
/* Recount one tenant through store_list(); checks nlink of every state
 * and the per-parent quota on the way (stress_check.c). */
void recount_tenant(struct store *s, struct store_node *t,
		    const struct store_limits *l, struct recount *rc);

/* Each part's tests --------------------------------------------------------- */

extern const struct CMUnitTest stress_race_tests[];
extern const size_t stress_race_ntests;
extern const struct CMUnitTest stress_mixed_tests[];
extern const size_t stress_mixed_ntests;
extern const struct CMUnitTest stress_lease_tests[];
extern const size_t stress_lease_ntests;
extern const struct CMUnitTest stress_replay_tests[];
extern const size_t stress_replay_ntests;
extern const struct CMUnitTest stress_mirror_tests[];
extern const size_t stress_mirror_ntests;

#endif /* STATEFS_UNIT_STRESS_H */
