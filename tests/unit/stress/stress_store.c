/*
 * stress_store.c - concurrency tests of store/, built twice: under
 * ASan+UBSan and under TSan (`make build/unit/stress_store{,.tsan}`).
 *
 * Two kinds of test:
 *
 *  - Races with one expected outcome, run in lock-step rounds (every
 *    thread waits at a barrier, then all hit the same key at once):
 *    exclusive create has one winner, unlink has one winner, a leave
 *    racing admissions through the old handle leaves no child behind, a
 *    shared state removed from one bucket while a link or rename adds it
 *    elsewhere lives exactly as long as a link reaches it, concurrent
 *    registrations in one parent are never lost (each is an entry of
 *    its own, never a shared list read, changed and written back).
 *
 *  - A mixed random workload: N threads for a bounded number of
 *    operations doing admissions, unlinks, links, renames, leaves,
 *    rejoins, departs, tenant cleanups, stage publications (REPLACE,
 *    APPEND, CAS), truncations, reads, listings, the kernel's inode
 *    table's traffic (fs/inode.c, as the adapter drives it) and
 *    clock ticks, on a few overlapping names in two tenants with small
 *    ceilings and quotas, so that links and renames collide and refusals
 *    happen.  Every return code is checked against the set the operation
 *    may return; content is written in uniform 8-byte blocks so a reader
 *    that saw a mix of two publications is caught.  After the threads
 *    join, store_check_all() must pass and the stats gauges must equal a
 *    recount through store_list() of every tenant and parent.
 *
 * Last, store_check_all() runs concurrently with the workload: it takes
 * every lock in order, so it must see a consistent store; and the event
 * stream of a workload of every transition replays to the store it left.
 * And a mirror of the shared store (redis/apply.c): what it applied of
 * the root log is read by transitions waiting for their outcome while
 * the follower applies more.
 *
 * Knobs: STRESS_ITERS (operations per thread, default 40000: ~3 s for
 * the whole file under TSan on 2 cores), STRESS_SEED, and cmocka's
 * TEST_FILTER / TEST_SKIP globs.
 *
 * Worker threads never call cmocka's assertions (they longjmp to the
 * main thread's frame): they record failures, and the main thread
 * asserts after joining.  The clock is a manual atomic one so that
 * tombstones (and, in one run, child leases) age out while threads run.
 */
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

static const char *const TEN[NTEN] = { "t0", "t1" };
static const char *const PAR[NPAR] = { "p0", "p1", "p2", "p3" };
static const char *const CHI[NCHILD] = { "c0", "c1", "c2", "c3", "c4", "c5" };

static const struct store_owner DOWN = { 1000, 1000, 0755 };
static const struct store_owner FOWN = { 1000, 1000, 0644 };

static uint64_t atomic_clock_now(void *arg)
{
	return __atomic_load_n((uint64_t *)arg, __ATOMIC_ACQUIRE);
}

static void atomic_clock_advance(uint64_t *clk, uint64_t ms)
{
	__atomic_fetch_add(clk, ms, __ATOMIC_ACQ_REL);
}

/* Failure recording (worker threads) ---------------------------------- */

struct failures {
	pthread_mutex_t mu;
	long n;
	char first[512];
};

static struct failures g_fail = { PTHREAD_MUTEX_INITIALIZER, 0, "" };

static void failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void failf(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&g_fail.mu);
	if (g_fail.n++ == 0) {
		va_start(ap, fmt);
		vsnprintf(g_fail.first, sizeof g_fail.first, fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&g_fail.mu);
}

static void failures_reset(void)
{
	pthread_mutex_lock(&g_fail.mu);
	g_fail.n = 0;
	g_fail.first[0] = '\0';
	pthread_mutex_unlock(&g_fail.mu);
}

static void assert_no_failures(void)
{
	long n;

	pthread_mutex_lock(&g_fail.mu);
	n = g_fail.n;
	pthread_mutex_unlock(&g_fail.mu);
	if (n)
		fail_msg("%ld failure(s) in worker threads; first: %s", n,
			 g_fail.first);
}

/* Allowed return codes -------------------------------------------------- */

enum op {
	OP_CREATE, OP_UNLINK, OP_LINK, OP_LINK_XDEV, OP_RENAME, OP_RENAME_XDEV,
	OP_RMDIR, OP_MKDIR, OP_DEPART, OP_STAGE_OPEN, OP_STAGE_WRITE,
	OP_PUBLISH, OP_READ, OP_TRUNC, OP_GETATTR, OP_LIST, OP_LOOKUP,
	OP_CLEANUP, OP_NOPS
};

static const char *const OPNAME[OP_NOPS] = {
	"create", "unlink", "link", "link-xdev", "rename", "rename-xdev",
	"rmdir", "mkdir", "depart", "stage_open", "stage_write", "publish",
	"read", "truncate", "getattr", "list", "lookup", "cleanup",
};

/* The negative errnos each operation may return (0 / success aside). */
#define MAXALLOW 8
static const int ALLOWED[OP_NOPS][MAXALLOW] = {
	[OP_CREATE] = { EEXIST, ESTALE, ENOENT, ENOSPC, EDQUOT, EROFS },
	[OP_UNLINK] = { ENOENT, ESTALE },
	[OP_LINK] = { EEXIST, ESTALE, ENOENT, ENOSPC, EDQUOT, EROFS },
	[OP_LINK_XDEV] = { EXDEV, ESTALE },
	[OP_RENAME] = { ENOENT, EEXIST, ESTALE, ENOSPC, EDQUOT, EROFS },
	[OP_RENAME_XDEV] = { EXDEV, ESTALE, ENOENT },
	[OP_RMDIR] = { ENOENT, ENOSPC, EDQUOT, ESTALE },
	[OP_MKDIR] = { EEXIST, ENOSPC, EDQUOT, ESTALE, EROFS },
	[OP_DEPART] = { ENOSPC, EDQUOT, ESTALE },
	[OP_STAGE_OPEN] = { ESTALE },
	[OP_STAGE_WRITE] = { EFBIG, ENOSPC, EDQUOT, ESTALE },
	[OP_PUBLISH] = { EAGAIN, ESTALE, EFBIG, ENOSPC, EDQUOT },
	[OP_READ] = { ESTALE },
	[OP_TRUNC] = { ESTALE, EFBIG, ENOSPC, EDQUOT },
	[OP_GETATTR] = { ESTALE },
	[OP_LIST] = { ESTALE },
	[OP_LOOKUP] = { ENOENT, ESTALE },
	[OP_CLEANUP] = { ENOENT },
};

/* Per-run histogram of outcomes: [op][0] = success, [op][e] = -e. */
#define NERR 134
static long g_hist[OP_NOPS][NERR];
static pthread_mutex_t g_hist_mu = PTHREAD_MUTEX_INITIALIZER;

/* An extra errno allowed in a run with child leases (expiry: ENOENT). */
static int g_extra_allowed;

static bool rc_allowed(enum op op, long e)
{
	if (e == g_extra_allowed)
		return true;
	for (int i = 0; i < MAXALLOW && ALLOWED[op][i]; i++)
		if (ALLOWED[op][i] == e)
			return true;
	return false;
}

struct worker;
static void snapshot_check(struct worker *w, struct store_node *tenant);

static void rc_check(struct worker *w, enum op op, long rc);

/* Lock-step races --------------------------------------------------------- */

struct race {
	struct store *s;
	pthread_barrier_t start, done;
	int rounds;
	int nthreads;
	/* per round, set by main before `start` */
	struct store_node *parent;
	char name[32];
	int mode;        /* test specific */
	/* per round, per thread results */
	int rc[NTHREADS];
	bool created[NTHREADS];
	uint64_t ino[NTHREADS];
	struct store_node *node[NTHREADS];
	struct store_stage *stage; /* test_race_one_stage_shared */
};

struct race_arg {
	struct race *r;
	int tid;
	void (*fn)(struct race *r, int tid);
};

static void *race_thread(void *p)
{
	struct race_arg *a = p;

	for (int i = 0; i < a->r->rounds; i++) {
		pthread_barrier_wait(&a->r->start);
		a->fn(a->r, a->tid);
		pthread_barrier_wait(&a->r->done);
	}
	return NULL;
}

static void race_start(struct race *r, struct store *s, int rounds,
		       void (*fn)(struct race *, int), pthread_t *th,
		       struct race_arg *args)
{
	memset(r, 0, sizeof *r);
	r->s = s;
	r->rounds = rounds;
	r->nthreads = NTHREADS;
	assert_int_equal(pthread_barrier_init(&r->start, NULL, NTHREADS + 1),
			 0);
	assert_int_equal(pthread_barrier_init(&r->done, NULL, NTHREADS + 1), 0);
	for (int i = 0; i < NTHREADS; i++) {
		args[i].r = r;
		args[i].tid = i;
		args[i].fn = fn;
		assert_int_equal(pthread_create(&th[i], NULL, race_thread,
						&args[i]), 0);
	}
}

static void race_join(struct race *r, pthread_t *th)
{
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&r->start);
	pthread_barrier_destroy(&r->done);
}

static struct store *new_store(const struct store_limits *l, uint64_t *clk)
{
	struct store *s = NULL;
	struct store_clock clock = { atomic_clock_now, clk };

	assert_int_equal(store_new(l, &clock, &s), 0);
	return s;
}

static void check_all_ok(struct store *s)
{
	char why[256] = "";
	int rc = store_check_all(s, why, sizeof why);

	if (rc != 0)
		fail_msg("store_check_all: %d (%s)", rc, why);
}

static struct store_node *mkdir_or_fail(struct store *s, struct store_node *dir,
					const char *name)
{
	struct store_node *n = NULL;
	int rc = store_mkdir(s, dir, name, &DOWN, &n);

	if (rc != 0)
		fail_msg("store_mkdir(%s): %d", name, rc);
	return n;
}

static void race_create_fn(struct race *r, int tid)
{
	struct store_node *n = NULL;
	bool created = false;
	bool excl = r->mode == 0;

	r->rc[tid] = store_create(r->s, r->parent, r->name, &FOWN, excl, &n,
				  &created);
	r->created[tid] = created;
	r->ino[tid] = 0;
	if (r->rc[tid] == 0) {
		r->ino[tid] = store_node_ino(n);
		store_node_unref(r->s, n);
	}
}

/* O_EXCL create of one name: one winner, the others -EEXIST; plain create:
 * all succeed, one created it, all got the same node. */
static void test_race_create_one_winner(void **state)
{
	uint64_t clk = 1000;
	struct store_limits l;
	struct store *s;
	struct store_node *t, *p;
	struct race r;
	pthread_t th[NTHREADS];
	struct race_arg args[NTHREADS];
	const int rounds = 200;

	store_limits_default(&l);
	s = new_store(&l, &clk);
	t = mkdir_or_fail(s, store_root(s), "t");
	p = mkdir_or_fail(s, t, "p");
	race_start(&r, s, rounds, race_create_fn, th, args);
	for (int i = 0; i < rounds; i++) {
		int wins = 0, exists = 0;

		r.parent = p;
		r.mode = i & 1;
		snprintf(r.name, sizeof r.name, "c%d", i);
		pthread_barrier_wait(&r.start);
		pthread_barrier_wait(&r.done);
		for (int k = 0; k < NTHREADS; k++) {
			if (r.rc[k] == 0 && r.created[k])
				wins++;
			else if (r.rc[k] == -EEXIST && r.mode == 0)
				exists++;
			else if (r.rc[k] == 0 && r.mode == 1)
				assert_int_equal(r.ino[k], r.ino[0]);
			else
				fail_msg("round %d thread %d: rc %d created %d",
					 i, k, r.rc[k], r.created[k]);
		}
		assert_int_equal(wins, 1);
		if (r.mode == 0)
			assert_int_equal(exists, NTHREADS - 1);
	}
	race_join(&r, th);
	{
		struct store_stats st;

		assert_int_equal(store_stats(s, NULL, &st), 0);
		assert_int_equal(st.children, rounds);
		assert_int_equal(st.admissions, rounds);
	}
	check_all_ok(s);
	store_node_unref(s, p);
	store_node_unref(s, t);
	store_free(s);
}

static void race_unlink_fn(struct race *r, int tid)
{
	r->rc[tid] = store_unlink(r->s, r->parent, r->name);
}

/* Terminal removal: exactly one caller wins, the others get -ENOENT. */
static void test_race_unlink_one_winner(void **state)
{
	uint64_t clk = 1000;
	struct store_limits l;
	struct store *s;
	struct store_node *t, *p, *q;
	struct race r;
	pthread_t th[NTHREADS];
	struct race_arg args[NTHREADS];
	const int rounds = 200;

	store_limits_default(&l);
	s = new_store(&l, &clk);
	t = mkdir_or_fail(s, store_root(s), "t");
	p = mkdir_or_fail(s, t, "p");
	q = mkdir_or_fail(s, t, "q");
	race_start(&r, s, rounds, race_unlink_fn, th, args);
	for (int i = 0; i < rounds; i++) {
		struct store_node *c = NULL;
		bool created;
		int wins = 0;

		snprintf(r.name, sizeof r.name, "c%d", i % 3);
		assert_int_equal(store_create(s, p, r.name, &FOWN, true, &c,
					      &created), 0);
		/* Every other round the state is shared with q: unlinking
		 * p's link must not end it. */
		if (i & 1)
			assert_int_equal(store_link(s, c, q, r.name), 0);
		r.parent = p;
		pthread_barrier_wait(&r.start);
		pthread_barrier_wait(&r.done);
		for (int k = 0; k < NTHREADS; k++) {
			if (r.rc[k] == 0)
				wins++;
			else if (r.rc[k] != -ENOENT)
				fail_msg("round %d thread %d: rc %d", i, k,
					 r.rc[k]);
		}
		assert_int_equal(wins, 1);
		if (i & 1) {
			assert_true(store_node_live(c));
			assert_int_equal(store_unlink(s, q, r.name), 0);
		}
		assert_false(store_node_live(c));
		store_node_unref(s, c);
	}
	race_join(&r, th);
	{
		struct store_stats st;

		assert_int_equal(store_stats(s, NULL, &st), 0);
		assert_int_equal(st.children, 0);
		assert_int_equal(st.links, 0);
	}
	check_all_ok(s);
	store_node_unref(s, q);
	store_node_unref(s, p);
	store_node_unref(s, t);
	store_free(s);
}

/* Thread 0 leaves p (rmdir or depart) while the others admit children
 * through the handle they resolved before: every admission either
 * happened before the leave (and the cascade removed it) or fails
 * -ESTALE; nothing survives in the departed bucket. */
static void race_leave_fn(struct race *r, int tid)
{
	struct store_node *tenant = store_node_tenant(r->parent);

	if (tid == 0) {
		int rc = r->mode ? store_depart(r->s, tenant, "p", NULL)
				 : store_rmdir(r->s, tenant, "p", NULL);

		if (rc != 0)
			failf("leave: %d", rc);
		return;
	}
	r->node[tid] = NULL;
	r->rc[tid] = 0;
	for (int k = 0; k < 8; k++) {
		char name[32];
		struct store_node *n = NULL;
		bool created;
		int rc;

		snprintf(name, sizeof name, "w%d_%d", tid, k);
		rc = store_create(r->s, r->parent, name, &FOWN, true, &n,
				  &created);
		if (rc == 0) {
			if (r->node[tid])
				store_node_unref(r->s, r->node[tid]);
			r->node[tid] = n;
		} else if (rc != -ESTALE) {
			failf("create during leave: %d", rc);
		} else {
			r->rc[tid] = rc;
		}
	}
}

static void test_race_leave_vs_admission(void **state)
{
	uint64_t clk = 1000;
	struct store_limits l;
	struct store *s;
	struct store_node *t;
	struct race r;
	pthread_t th[NTHREADS];
	struct race_arg args[NTHREADS];
	const int rounds = 150;

	failures_reset();
	store_limits_default(&l);
	s = new_store(&l, &clk);
	t = mkdir_or_fail(s, store_root(s), "t");
	race_start(&r, s, rounds, race_leave_fn, th, args);
	for (int i = 0; i < rounds; i++) {
		struct store_node *p = mkdir_or_fail(s, t, "p");
		struct store_dirlist dl;
		uint64_t g;

		assert_int_equal(store_parent_generation(s, p, &g), 0);
		assert_int_equal(g, (uint64_t)i + 1);
		r.parent = p;
		r.mode = i & 1;
		pthread_barrier_wait(&r.start);
		pthread_barrier_wait(&r.done);
		assert_false(store_node_live(p));
		for (int k = 1; k < NTHREADS; k++) {
			if (r.node[k]) {
				/* Admitted before the leave: gone with it. */
				assert_false(store_node_live(r.node[k]));
				store_node_unref(s, r.node[k]);
				r.node[k] = NULL;
			}
		}
		assert_int_equal(store_list(s, t, &dl), 0);
		assert_int_equal(dl.n, 0);
		store_dirlist_free(&dl);
		check_all_ok(s);
		store_node_unref(s, p);
	}
	race_join(&r, th);
	assert_no_failures();
	{
		struct store_stats st;

		assert_int_equal(store_stats(s, NULL, &st), 0);
		assert_int_equal(st.children, 0);
		assert_int_equal(st.links, 0);
		assert_int_equal(st.parents, 0);
		assert_int_equal(st.tombstones, 1);
	}
	check_all_ok(s);
	store_node_unref(s, t);
	store_free(s);
}

/*
 * A shared state removed from one bucket while another operation adds or
 * moves a link to it (each change is made by one transition, which
 * checks under the state's lock that the state is still the one it
 * found):
 *   mode 0: unlink p/c  vs  link c -> q/c
 *   mode 1: unlink p/c  vs  rename p/c -> q/d
 *   mode 2: leave p     vs  link c -> q/c  vs  rename p/c -> q/e
 * Whatever the interleaving, the state lives exactly as long as a link
 * reaches it, and its nlink is the number of links that do.
 */
struct shared_race {
	struct store_node *t, *p, *q, *c;
};

static struct shared_race g_sr;

static void race_shared_fn(struct race *r, int tid)
{
	struct store *s = r->s;

	r->rc[tid] = 0;
	switch (tid) {
	case 0:
		r->rc[0] = r->mode == 2 ? store_rmdir(s, g_sr.t, "p", NULL)
					: store_unlink(s, g_sr.p, "c");
		break;
	case 1:
		r->rc[1] = r->mode == 1
			? store_rename(s, g_sr.p, "c", g_sr.q, "d", 0)
			: store_link(s, g_sr.c, g_sr.q, "c");
		break;
	case 2:
		if (r->mode == 2)
			r->rc[2] = store_rename(s, g_sr.p, "c", g_sr.q, "e", 0);
		break;
	default:
		break;
	}
}

static void test_race_shared_state_removal(void **state)
{
	uint64_t clk = 1000;
	struct store_limits l;
	struct store *s;
	struct race r;
	pthread_t th[NTHREADS];
	struct race_arg args[NTHREADS];
	const int rounds = 300;
	int seen[3][2] = { { 0 } };

	store_limits_default(&l);
	s = new_store(&l, &clk);
	g_sr.t = mkdir_or_fail(s, store_root(s), "t");
	g_sr.q = mkdir_or_fail(s, g_sr.t, "q");
	race_start(&r, s, rounds, race_shared_fn, th, args);
	for (int i = 0; i < rounds; i++) {
		struct store_dirlist dl;
		struct store_attr a;
		bool created;
		int mode = i % 3, want_links = 0;

		if (!g_sr.p)
			g_sr.p = mkdir_or_fail(s, g_sr.t, "p");
		assert_int_equal(store_create(s, g_sr.p, "c", &FOWN, true,
					      &g_sr.c, &created), 0);
		r.mode = mode;
		pthread_barrier_wait(&r.start);
		pthread_barrier_wait(&r.done);

		switch (mode) {
		case 0:
			assert_int_equal(r.rc[0], 0);
			if (r.rc[1] != 0 && r.rc[1] != -ESTALE)
				fail_msg("round %d: link %d", i, r.rc[1]);
			want_links = r.rc[1] == 0;
			break;
		case 1:
			if (!((r.rc[0] == 0 && r.rc[1] == -ENOENT) ||
			      (r.rc[0] == -ENOENT && r.rc[1] == 0)))
				fail_msg("round %d: unlink %d rename %d", i,
					 r.rc[0], r.rc[1]);
			want_links = r.rc[1] == 0;
			break;
		case 2:
			assert_int_equal(r.rc[0], 0);
			if (r.rc[1] != 0 && r.rc[1] != -ESTALE)
				fail_msg("round %d: link %d", i, r.rc[1]);
			if (r.rc[2] != 0 && r.rc[2] != -ESTALE)
				fail_msg("round %d: rename %d", i, r.rc[2]);
			want_links = (r.rc[1] == 0) + (r.rc[2] == 0);
			break;
		}
		seen[mode][want_links > 0]++;
		assert_int_equal(store_list(s, g_sr.q, &dl), 0);
		assert_int_equal(dl.n, (size_t)want_links);
		for (size_t k = 0; k < dl.n; k++)
			assert_int_equal(dl.e[k].ino, store_node_ino(g_sr.c));
		if (want_links) {
			assert_true(store_node_live(g_sr.c));
			assert_int_equal(store_getattr(s, g_sr.c, &a), 0);
			assert_int_equal(a.nlink, want_links);
		} else {
			assert_false(store_node_live(g_sr.c));
			assert_int_equal(store_getattr(s, g_sr.c, &a), -ESTALE);
		}
		for (size_t k = 0; k < dl.n; k++)
			assert_int_equal(store_unlink(s, g_sr.q, dl.e[k].name),
					 0);
		store_dirlist_free(&dl);
		if (mode != 2)
			assert_int_equal(store_unlink(s, g_sr.p, "c"), -ENOENT);
		assert_false(store_node_live(g_sr.c));
		check_all_ok(s);
		store_node_unref(s, g_sr.c);
		g_sr.c = NULL;
		if (mode == 2) {
			store_node_unref(s, g_sr.p);
			g_sr.p = NULL;
		}
	}
	race_join(&r, th);
	printf("# shared-state races (mode: removed first / link won): "
	       "%d/%d %d/%d %d/%d\n", seen[0][0], seen[0][1], seen[1][0],
	       seen[1][1], seen[2][0], seen[2][1]);
	{
		struct store_stats st;

		assert_int_equal(store_stats(s, NULL, &st), 0);
		assert_int_equal(st.children, 0);
		assert_int_equal(st.links, 0);
	}
	check_all_ok(s);
	if (g_sr.p)
		store_node_unref(s, g_sr.p);
	store_node_unref(s, g_sr.q);
	store_node_unref(s, g_sr.t);
	memset(&g_sr, 0, sizeof g_sr);
	store_free(s);
}

/* Concurrent registrations into one parent are never lost. */
static void race_register_fn(struct race *r, int tid)
{
	for (int k = 0; k < 16; k++) {
		char name[48];
		struct store_node *n = NULL;
		bool created;
		int rc;

		snprintf(name, sizeof name, "%s_%d_%d", r->name, tid, k);
		rc = store_create(r->s, r->parent, name, &FOWN, true, &n,
				  &created);
		if (rc != 0) {
			failf("register %s: %d", name, rc);
			continue;
		}
		store_node_unref(r->s, n);
	}
}

static void test_race_registrations_not_lost(void **state)
{
	uint64_t clk = 1000;
	struct store_limits l;
	struct store *s;
	struct store_node *t, *p;
	struct race r;
	pthread_t th[NTHREADS];
	struct race_arg args[NTHREADS];
	const int rounds = 20;

	failures_reset();
	store_limits_default(&l);
	s = new_store(&l, &clk);
	t = mkdir_or_fail(s, store_root(s), "t");
	p = mkdir_or_fail(s, t, "p");
	race_start(&r, s, rounds, race_register_fn, th, args);
	for (int i = 0; i < rounds; i++) {
		struct store_dirlist dl;

		r.parent = p;
		snprintf(r.name, sizeof r.name, "r%d", i);
		pthread_barrier_wait(&r.start);
		pthread_barrier_wait(&r.done);
		assert_int_equal(store_list(s, p, &dl), 0);
		assert_int_equal(dl.n, (size_t)(i + 1) * NTHREADS * 16);
		store_dirlist_free(&dl);
	}
	race_join(&r, th);
	assert_no_failures();
	check_all_ok(s);
	store_node_unref(s, p);
	store_node_unref(s, t);
	store_free(s);
}

/*
 * One stage used by every thread at once, as threads sharing one open
 * file use it (FUSE sends their requests in parallel): two write 8-byte
 * blocks, one truncates, one reads, one flushes (close of a dup), one
 * publishes (fsync).  Every answer is one the operation may give, and
 * what a read sees and what ends up published is whole blocks.  Under
 * TSan this is the check that nothing of the stage is touched outside
 * its lock.
 */
static bool blocks_whole(const char *buf, size_t n)
{
	if (n % 8)
		return false;
	for (size_t b = 0; b < n; b += 8)
		for (size_t i = 1; i < 8; i++)
			if (buf[b + i] != buf[b])
				return false;
	return true;
}

static void race_stage_fn(struct race *r, int tid)
{
	struct store_stage *st = r->stage;
	char blk[8], buf[2 * MAXPAY];
	long rc;

	memset(blk, 'a' + tid, sizeof blk);
	switch (tid) {
	case 0:
	case 1:
		rc = store_stage_write(st, blk, sizeof blk, 8 * (uint64_t)tid);
		if (rc != 8 && rc != -EFBIG)
			failf("shared stage write: %ld", rc);
		break;
	case 2:
		rc = store_stage_truncate(st, 8 * (uint64_t)(r->mode % 3));
		if (rc != 0)
			failf("shared stage truncate: %ld", rc);
		break;
	case 3:
		rc = store_stage_read(st, buf, sizeof buf, 0);
		if (rc < 0)
			failf("shared stage read: %ld", rc);
		else if (!blocks_whole(buf, (size_t)rc))
			failf("shared stage read %ld bytes, not whole blocks", rc);
		break;
	case 4:
		rc = store_stage_flush(st);
		if (rc != 0 && rc != -EFBIG)
			failf("shared stage flush: %ld", rc);
		break;
	default:
		rc = store_stage_publish(st);
		if (rc != 0 && rc != -EFBIG)
			failf("shared stage publish: %ld", rc);
		break;
	}
}

static void test_race_one_stage_shared(void **state)
{
	uint64_t clk = 1000;
	struct store_limits l;
	struct store *s;
	struct store_node *t, *p, *c = NULL;
	struct store_stage *rd = NULL;
	struct race r;
	pthread_t th[NTHREADS];
	struct race_arg args[NTHREADS];
	char buf[2 * MAXPAY];
	const int rounds = 300;
	bool created;

	failures_reset();
	store_limits_default(&l);
	l.max_payload = MAXPAY;
	s = new_store(&l, &clk);
	t = mkdir_or_fail(s, store_root(s), "t");
	p = mkdir_or_fail(s, t, "p");
	assert_int_equal(store_create(s, p, "c", &FOWN, true, &c, &created), 0);
	race_start(&r, s, rounds, race_stage_fn, th, args);
	for (int i = 0; i < rounds; i++) {
		ssize_t n;

		/* REPLACE, APPEND (which the truncation turns into a
		 * REPLACE while the others write), CAS. */
		r.mode = i;
		assert_int_equal(store_stage_open(s, c, 1 + i % 3, &r.stage), 0);
		pthread_barrier_wait(&r.start);
		pthread_barrier_wait(&r.done);
		/* The release. */
		n = store_stage_publish(r.stage);
		if (n != 0 && n != -EFBIG)
			fail_msg("round %d: release publish %zd", i, n);
		store_stage_close(r.stage);
		assert_int_equal(store_stage_open(s, c, STORE_STAGE_READ, &rd), 0);
		n = store_stage_read(rd, buf, sizeof buf, 0);
		store_stage_close(rd);
		if (n < 0 || n > MAXPAY || !blocks_whole(buf, (size_t)n))
			fail_msg("round %d: published %zd bytes, not whole blocks",
				 i, n);
	}
	race_join(&r, th);
	assert_no_failures();
	check_all_ok(s);
	store_node_unref(s, c);
	store_node_unref(s, p);
	store_node_unref(s, t);
	store_free(s);
}

/* The mixed random workload ------------------------------------------------ */

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

static void rc_check(struct worker *w, enum op op, long rc)
{
	long e = rc < 0 ? -rc : 0;

	if (rc < 0 && !rc_allowed(op, e))
		failf("thread %d: %s returned %ld (%s)", w->id, OPNAME[op], rc,
		      strerror((int)e));
	pthread_mutex_lock(&g_hist_mu);
	g_hist[op][e < NERR ? e : NERR - 1]++;
	pthread_mutex_unlock(&g_hist_mu);
}

static unsigned rnd(struct worker *w, unsigned n)
{
	return (unsigned)rand_r(&w->seed) % n;
}

static void record_ino(struct worker *w, struct store_node *n)
{
	if (w->ninos == w->cap) {
		w->cap = w->cap ? 2 * w->cap : 256;
		w->inos = realloc(w->inos, w->cap * sizeof *w->inos);
		if (!w->inos) {
			failf("oom");
			w->cap = w->ninos = 0;
			return;
		}
	}
	w->inos[w->ninos++] = store_node_ino(n);
}

static void put(struct worker *w, struct store_node *n)
{
	if (n)
		store_node_unref(w->m->s, n);
}

/* The live tenant @ti (new reference), making it when it is missing. */
static struct store_node *get_tenant(struct worker *w, int ti)
{
	struct store *s = w->m->s;

	for (int tries = 0; tries < 4; tries++) {
		struct store_node *n = NULL;
		int rc = store_lookup(s, store_root(s), TEN[ti], &n);

		if (rc == 0)
			return n;
		if (rc != -ENOENT) {
			failf("lookup tenant: %d", rc);
			return NULL;
		}
		rc = store_mkdir(s, store_root(s), TEN[ti], &DOWN, &n);
		if (rc == 0) {
			record_ino(w, n);
			return n;
		}
		if (rc != -EEXIST) {
			failf("mkdir tenant: %d", rc);
			return NULL;
		}
	}
	return NULL;
}

/* A parent handle: a cached one (maybe of an earlier incarnation) or a
 * fresh lookup; NULL when the parent is absent. */
static struct store_node *get_parent(struct worker *w, int ti, int pi)
{
	struct store *s = w->m->s;
	struct store_node *t, *n = NULL;
	int rc;

	if (w->pcache[ti][pi] && rnd(w, 3) == 0) {
		store_node_ref(w->pcache[ti][pi]);
		return w->pcache[ti][pi];
	}
	t = get_tenant(w, ti);
	if (!t)
		return NULL;
	rc = store_lookup(s, t, PAR[pi], &n);
	rc_check(w, OP_LOOKUP, rc);
	put(w, t);
	if (rc != 0)
		return NULL;
	put(w, w->pcache[ti][pi]);
	store_node_ref(n);
	w->pcache[ti][pi] = n;
	return n;
}

/* A child handle: cached or through a parent; NULL when absent.  With
 * @tenant, the tenant it was found in (borrowed from the cache). */
static struct store_node *get_child(struct worker *w, int ti,
				    struct store_node **tenant)
{
	struct store *s = w->m->s;
	struct store_node *p, *n = NULL;
	int slot = rnd(w, 4);
	int rc;

	if (w->ccache[ti][slot] && rnd(w, 3) == 0) {
		store_node_ref(w->ccache[ti][slot]);
		if (tenant)
			*tenant = w->ctenant[ti][slot];
		return w->ccache[ti][slot];
	}
	p = get_parent(w, ti, rnd(w, NPAR));
	if (!p)
		return NULL;
	rc = store_lookup(s, p, CHI[rnd(w, NCHILD)], &n);
	rc_check(w, OP_LOOKUP, rc);
	if (rc != 0) {
		put(w, p);
		return NULL;
	}
	if (store_node_kind(n) != STORE_CHILD)
		failf("lookup in a parent gave kind %d", store_node_kind(n));
	put(w, w->ccache[ti][slot]);
	put(w, w->ctenant[ti][slot]);
	store_node_ref(n);
	w->ccache[ti][slot] = n;
	w->ctenant[ti][slot] = store_node_tenant(p);
	store_node_ref(w->ctenant[ti][slot]);
	put(w, p);
	if (tenant)
		*tenant = w->ctenant[ti][slot];
	return n;
}

/* Content is uniform 8-byte blocks; a reader seeing a mix fails this. */
static void check_blocks(struct worker *w, const char *buf, size_t n)
{
	if (n % 8) {
		failf("content of %zu bytes is not whole blocks", n);
		return;
	}
	for (size_t b = 0; b < n; b += 8)
		for (size_t i = 1; i < 8; i++)
			if (buf[b + i] != buf[b]) {
				failf("torn content at block %zu", b / 8);
				return;
			}
	if (n > MAXPAY)
		failf("content of %zu bytes over max_payload", n);
}

static void do_stage(struct worker *w, int ti)
{
	struct store_node *c = get_child(w, ti, NULL);
	struct store_stage *st = NULL;
	enum store_stage_mode mode;
	char blk[24];
	int rc;

	if (!c)
		return;
	mode = (enum store_stage_mode)(1 + rnd(w, 3));
	rc = store_stage_open(w->m->s, c, mode, &st);
	rc_check(w, OP_STAGE_OPEN, rc);
	if (rc == 0) {
		int nblk = 1 + rnd(w, 3);
		uint64_t off = mode == STORE_STAGE_CAS ? 8 * rnd(w, 3) : 0;
		ssize_t wr;

		memset(blk, 'A' + rnd(w, 26), sizeof blk);
		if (rnd(w, 8) == 0)
			nblk = 0; /* REPLACE: truncate to empty */
		if (nblk) {
			wr = store_stage_write(st, blk, 8 * nblk, off);
			rc_check(w, OP_STAGE_WRITE, wr < 0 ? wr : 0);
			if (wr >= 0 && wr != 8 * nblk)
				failf("short stage write %zd", wr);
		}
		if (rnd(w, 4) == 0)
			sched_yield(); /* let others publish in between */
		rc = store_stage_publish(st);
		rc_check(w, OP_PUBLISH, rc);
		if (rc == -EAGAIN && mode != STORE_STAGE_CAS)
			failf("publish -EAGAIN in mode %d", mode);
		store_stage_close(st);
	}
	put(w, c);
}

static void do_read(struct worker *w, int ti)
{
	struct store_node *c = get_child(w, ti, NULL);
	struct store_stage *st = NULL;
	char buf[4 * MAXPAY];
	int rc;

	if (!c)
		return;
	rc = store_stage_open(w->m->s, c, STORE_STAGE_READ, &st);
	rc_check(w, OP_STAGE_OPEN, rc);
	if (rc == 0) {
		size_t got = 0;
		ssize_t r;

		/* Small reads, so a publication can land between them. */
		while ((r = store_stage_read(st, buf + got, 5, got)) > 0 &&
		       got + 5 < sizeof buf)
			got += (size_t)r;
		rc_check(w, OP_READ, r < 0 ? r : 0);
		if (r >= 0)
			check_blocks(w, buf, got);
		store_stage_close(st);
	}
	put(w, c);
}

static void do_remember(struct worker *w, int ti)
{
	struct store *s = w->m->s;
	struct fs_inodes *t = &w->m->inodes;
	int slot = rnd(w, NREM);
	struct store_node *n;

	if (w->rem[slot].n && rnd(w, 2)) {
		/* The kernel still knows it: the table must too. */
		n = fs_inode_get(t, s, w->rem[slot].ino);
		if (!n) {
			failf("fs_inode_get(%llu) NULL with %llu lookups",
			      (unsigned long long)w->rem[slot].ino,
			      (unsigned long long)w->rem[slot].n);
			return;
		}
		if (store_node_ino(n) != w->rem[slot].ino)
			failf("fs_inode_get gave another inode");
		put(w, n);
		fs_inode_forget(t, s, w->rem[slot].ino, w->rem[slot].n);
		w->rem[slot].n = 0;
		return;
	}
	n = rnd(w, 2) ? get_child(w, ti, NULL) : get_parent(w, ti, rnd(w, NPAR));
	if (!n)
		return;
	if (w->rem[slot].n && w->rem[slot].ino != store_node_ino(n)) {
		fs_inode_forget(t, s, w->rem[slot].ino, w->rem[slot].n);
		w->rem[slot].n = 0;
	}
	if (fs_inode_remember(t, n) != 0) {
		failf("fs_inode_remember: out of memory");
		put(w, n);
		return;
	}
	w->rem[slot].ino = store_node_ino(n);
	w->rem[slot].n++;
	put(w, n);
}

/*
 * -EXDEV between two nodes of one tenant name: allowed only when they
 * belong to different incarnations of the tenant (a cached handle from
 * before a cleanup), where the contract would rather say -ESTALE
 * (test_tenant.c checks that single-threaded); counted apart, then
 * treated as -ESTALE.  Within one tenant incarnation it is a bug.
 * Success across tenant names is always a bug.
 */
static long g_xdev_dead;

/* @a and @b: the tenants the two sides were found in. */
static int xdev_filter(struct worker *w, int rc, bool xdev,
		       struct store_node *a, struct store_node *b)
{
	if (xdev && rc == 0)
		failf("thread %d: link/rename across tenants succeeded", w->id);
	if (rc != -EXDEV || xdev)
		return rc;
	if (a == b) {
		failf("thread %d: -EXDEV within one tenant", w->id);
		return rc;
	}
	__atomic_fetch_add(&g_xdev_dead, 1, __ATOMIC_RELAXED);
	return -ESTALE;
}

static void one_op(struct worker *w)
{
	struct store *s = w->m->s;
	int ti = rnd(w, NTEN);
	unsigned dice = rnd(w, 10000);
	struct store_node *p, *q, *c, *t, *n = NULL;
	bool created = false;
	int rc;

	if (dice < 1800) { /* admission */
		p = get_parent(w, ti, rnd(w, NPAR));
		if (!p)
			return;
		rc = store_create(s, p, CHI[rnd(w, NCHILD)], &FOWN,
				  rnd(w, 2), &n, &created);
		rc_check(w, OP_CREATE, rc);
		if (rc == 0) {
			if (store_node_kind(n) != STORE_CHILD)
				failf("create gave kind %d",
				      store_node_kind(n));
			if (created)
				record_ino(w, n);
			put(w, n);
		}
		put(w, p);
	} else if (dice < 2600) { /* terminal removal */
		p = get_parent(w, ti, rnd(w, NPAR));
		if (!p)
			return;
		rc = store_unlink(s, p, CHI[rnd(w, NCHILD)]);
		rc_check(w, OP_UNLINK, rc);
		put(w, p);
	} else if (dice < 3500) { /* link, sometimes across tenants */
		bool xdev = rnd(w, 16) == 0;

		struct store_node *ct;

		c = get_child(w, ti, &ct);
		if (!c)
			return;
		q = get_parent(w, xdev ? 1 - ti : ti, rnd(w, NPAR));
		if (q) {
			rc = store_link(s, c, q, CHI[rnd(w, NCHILD)]);
			rc = xdev_filter(w, rc, xdev, ct, store_node_tenant(q));
			rc_check(w, xdev ? OP_LINK_XDEV : OP_LINK, rc);
			put(w, q);
		}
		put(w, c);
	} else if (dice < 4400) { /* rename */
		bool xdev = rnd(w, 16) == 0;
		static const unsigned flags[] = {
			0, 0, STORE_RENAME_NOREPLACE, STORE_RENAME_EXCHANGE
		};

		p = get_parent(w, ti, rnd(w, NPAR));
		if (!p)
			return;
		q = get_parent(w, xdev ? 1 - ti : ti, rnd(w, NPAR));
		if (q) {
			rc = store_rename(s, p, CHI[rnd(w, NCHILD)], q,
					  CHI[rnd(w, NCHILD)], flags[rnd(w, 4)]);
			rc = xdev_filter(w, rc, xdev, store_node_tenant(p),
					 store_node_tenant(q));
			rc_check(w, xdev ? OP_RENAME_XDEV : OP_RENAME, rc);
			put(w, q);
		}
		put(w, p);
	} else if (dice < 4650) { /* leave */
		t = get_tenant(w, ti);
		if (!t)
			return;
		rc = store_rmdir(s, t, PAR[rnd(w, NPAR)], NULL);
		rc_check(w, OP_RMDIR, rc);
		put(w, t);
	} else if (dice < 5150) { /* join / rejoin */
		t = get_tenant(w, ti);
		if (!t)
			return;
		rc = store_mkdir(s, t, PAR[rnd(w, NPAR)], &DOWN, &n);
		rc_check(w, OP_MKDIR, rc);
		if (rc == 0) {
			uint64_t g = 0;

			record_ino(w, n);
			rc = store_parent_generation(s, n, &g);
			if (rc != 0 && rc != -ESTALE)
				failf("generation: %d", rc);
			if (rc == 0 && g == 0)
				failf("joined with generation 0");
			put(w, n);
		}
		put(w, t);
	} else if (dice < 5300) { /* out-of-order member-left */
		t = get_tenant(w, ti);
		if (!t)
			return;
		rc = store_depart(s, t, PAR[rnd(w, NPAR)], NULL);
		rc_check(w, OP_DEPART, rc);
		put(w, t);
	} else if (dice < 6800) {
		do_stage(w, ti);
	} else if (dice < 7600) {
		do_read(w, ti);
	} else if (dice < 7900) { /* truncate */
		struct store_attr in, out;

		c = get_child(w, ti, NULL);
		if (!c)
			return;
		memset(&in, 0, sizeof in);
		in.size = 8 * rnd(w, 10);
		rc = store_setattr(s, c, STORE_SET_SIZE, &in, &out);
		rc_check(w, OP_TRUNC, rc);
		put(w, c);
	} else if (dice < 8400) { /* getattr through cached handles */
		struct store_attr a;

		n = rnd(w, 2) ? get_child(w, ti, NULL)
			      : get_parent(w, ti, rnd(w, NPAR));
		if (!n)
			return;
		rc = store_getattr(s, n, &a);
		rc_check(w, OP_GETATTR, rc);
		if (rc == 0 && a.ino != store_node_ino(n))
			failf("getattr ino mismatch");
		put(w, n);
	} else if (dice < 8800) { /* listing */
		struct store_dirlist dl;

		p = get_parent(w, ti, rnd(w, NPAR));
		if (!p)
			return;
		rc = store_list(s, p, &dl);
		rc_check(w, OP_LIST, rc);
		if (rc == 0) {
			for (size_t i = 0; i < dl.n; i++)
				if (dl.e[i].kind != STORE_CHILD)
					failf("listed kind %d", dl.e[i].kind);
			if (dl.n > NCHILD)
				failf("parent lists %zu entries", dl.n);
			store_dirlist_free(&dl);
		}
		put(w, p);
	} else if (dice < 9300) {
		do_remember(w, ti);
	} else if (dice < 9500) {
		struct store_stats st;

		rc = store_stats(s, NULL, &st);
		if (rc != 0)
			failf("stats: %d", rc);
		t = get_tenant(w, ti);
		if (t) {
			if (store_stats(s, t, &st) != 0 && store_node_live(t))
				failf("tenant stats failed");
			put(w, t);
		}
	} else if (dice < 9700) {
		atomic_clock_advance(&w->m->clk, 250);
	} else if (dice < 9710) { /* tenant cleanup */
		rc = store_rmdir(s, store_root(s), TEN[ti], NULL);
		rc_check(w, OP_CLEANUP, rc);
	} else if (dice >= 9710 && dice < 9710 + w->m->check_every) {
		char why[256] = "";

		/* Takes every lock in order: must see a consistent store. */
		rc = store_check_all(s, why, sizeof why);
		if (rc != 0)
			failf("concurrent store_check_all: %d (%s)", rc, why);
	} else if (dice >= 9710 + w->m->check_every &&
		   dice < 9710 + w->m->check_every + w->m->snap_every) {
		snapshot_check(w, rnd(w, 2) ? get_tenant(w, ti) : NULL);
	} else { /* drop cached handles */
		for (int i = 0; i < 4; i++) {
			put(w, w->ccache[ti][i]);
			put(w, w->ctenant[ti][i]);
			w->ccache[ti][i] = NULL;
			w->ctenant[ti][i] = NULL;
		}
	}
}

struct snap_state_row {
	int64_t ino, nlink, version, size;
};

static int cmp_state_row(const void *a, const void *b)
{
	const struct snap_state_row *x = a, *y = b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* A row's key in statefs(8)'s order: tenant name, rank (the tenant's
 * row, its parents' and children's, its tombstones), parent, child. */
static int snap_row_order(const struct store_snap_row *a,
			  const struct store_snap_row *b)
{
	int ra = a->kind == STORE_SNAP_TENANT ? 0 :
		 a->kind == STORE_SNAP_TOMBSTONE ? 2 : 1;
	int rb = b->kind == STORE_SNAP_TENANT ? 0 :
		 b->kind == STORE_SNAP_TOMBSTONE ? 2 : 1;
	int c = strcmp(a->tenant, b->tenant);

	if (c == 0)
		c = ra - rb;
	if (c == 0)
		c = strcmp(a->parent, b->parent);
	if (c == 0)
		c = strcmp(a->child, b->child);
	return c;
}

/*
 * A snapshot taken while the other threads run must be one state of the
 * store: rows in scope order (a tenant's row, each parent's row followed
 * by its children of the same generation, its tombstones; by name, each
 * row after the one before), no name twice, and every state shown as many times as its nlink says, with
 * the same version and size under every name (a state linked from two
 * buckets copied at different moments would break that).
 */
static void snapshot_check(struct worker *w, struct store_node *tenant)
{
	struct store_snapshot sn;
	struct snap_state_row *st;
	const char *tname = NULL, *pname = NULL;
	int64_t pgen = -1;
	bool tombs = false;
	size_t n = 0;
	int rc = store_snapshot_take(w->m->s, tenant, &sn);

	put(w, tenant);
	if (rc != 0) {
		if (!(rc == -ESTALE && tenant))
			failf("snapshot: %d", rc);
		return;
	}
	atomic_fetch_add(&w->m->snaps, 1);
	st = calloc(sn.n + 1, sizeof *st);
	if (!st) {
		failf("oom");
		store_snapshot_free(&sn);
		return;
	}
	for (size_t i = 0; i < sn.n; i++) {
		const struct store_snap_row *r = &sn.rows[i];

		if (i > 0 && snap_row_order(&sn.rows[i - 1], r) >= 0)
			failf("snapshot: %s/%s/%s out of order", r->tenant,
			      r->parent, r->child);
		switch (r->kind) {
		case STORE_SNAP_TENANT:
			if (tname && strcmp(tname, r->tenant) == 0)
				failf("snapshot: tenant %s twice", r->tenant);
			tname = r->tenant;
			pname = NULL;
			tombs = false;
			break;
		case STORE_SNAP_PARENT:
			if (!tname || strcmp(tname, r->tenant) != 0 || tombs)
				failf("snapshot: parent %s/%s out of place",
				      r->tenant, r->parent);
			for (size_t k = 0; k < i; k++)
				if (sn.rows[k].kind == STORE_SNAP_PARENT &&
				    strcmp(sn.rows[k].tenant, r->tenant) == 0 &&
				    strcmp(sn.rows[k].parent, r->parent) == 0)
					failf("snapshot: parent %s/%s twice",
					      r->tenant, r->parent);
			pname = r->parent;
			pgen = r->generation;
			break;
		case STORE_SNAP_CHILD:
			if (!pname || strcmp(pname, r->parent) != 0 ||
			    strcmp(tname, r->tenant) != 0 ||
			    r->generation != pgen || tombs)
				failf("snapshot: child %s/%s/%s out of place",
				      r->tenant, r->parent, r->child);
			st[n++] = (struct snap_state_row){ r->ino, r->nlink,
							   r->version, r->size };
			break;
		case STORE_SNAP_TOMBSTONE:
			if (!tname || strcmp(tname, r->tenant) != 0)
				failf("snapshot: tombstone out of place");
			tombs = true;
			break;
		}
	}
	qsort(st, n, sizeof *st, cmp_state_row);
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i; j < n && st[j].ino == st[i].ino; j++)
			if (st[j].nlink != st[i].nlink ||
			    st[j].version != st[i].version ||
			    st[j].size != st[i].size)
				failf("snapshot: state %lld differs by name",
				      (long long)st[i].ino);
		if ((int64_t)(j - i) != st[i].nlink)
			failf("snapshot: state %lld shown %zu times, nlink %lld",
			      (long long)st[i].ino, j - i,
			      (long long)st[i].nlink);
	}
	free(st);
	store_snapshot_free(&sn);
}

static void *mixed_thread(void *arg)
{
	struct worker *w = arg;

	for (int i = 0; i < w->m->iters; i++) {
		one_op(w);
		w->ops++;
	}
	for (int i = 0; i < NREM; i++)
		if (w->rem[i].n)
			fs_inode_forget(&w->m->inodes, w->m->s, w->rem[i].ino,
					w->rem[i].n);
	for (int i = 0; i < NTEN; i++)
		for (int k = 0; k < NPAR; k++)
			put(w, w->pcache[i][k]);
	for (int i = 0; i < NTEN; i++)
		for (int k = 0; k < 4; k++) {
			put(w, w->ccache[i][k]);
			put(w, w->ctenant[i][k]);
		}
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* STRESS_SEED varies the random workload (the default is fixed). */
static unsigned seed_base(void)
{
	const char *e = getenv("STRESS_SEED");

	return e ? (unsigned)strtoul(e, NULL, 0) : 0x5eed;
}

struct recount {
	uint64_t tenants, parents, children, links, bytes;
};

/* Recount one tenant through store_list(); checks nlink of every state
 * and the per-parent quota on the way. */
static void recount_tenant(struct store *s, struct store_node *t,
			   const struct store_limits *l, struct recount *rc)
{
	struct store_dirlist pl, cl;
	uint64_t seen[NPAR * NCHILD];
	size_t nseen = 0;
	uint64_t tlinks = 0;

	assert_int_equal(store_list(s, t, &pl), 0);
	rc->tenants++;
	for (size_t i = 0; i < pl.n; i++) {
		struct store_node *p = NULL;

		assert_int_equal(pl.e[i].kind, STORE_PARENT);
		assert_int_equal(store_lookup(s, t, pl.e[i].name, &p), 0);
		assert_int_equal(store_node_ino(p), pl.e[i].ino);
		rc->parents++;
		assert_int_equal(store_list(s, p, &cl), 0);
		if (l->parent_quota)
			assert_true(cl.n <= l->parent_quota);
		for (size_t k = 0; k < cl.n; k++) {
			struct store_node *c = NULL;
			struct store_attr a;
			uint32_t refs = 0;
			bool dup = false;

			rc->links++;
			tlinks++;
			for (size_t j = 0; j < nseen; j++)
				dup |= seen[j] == cl.e[k].ino;
			if (dup)
				continue;
			assert_true(nseen < NPAR * NCHILD);
			seen[nseen++] = cl.e[k].ino;
			assert_int_equal(store_lookup(s, p, cl.e[k].name, &c),
					 0);
			assert_int_equal(store_getattr(s, c, &a), 0);
			assert_int_equal(a.ino, cl.e[k].ino);
			rc->children++;
			rc->bytes += a.size;
			assert_true(a.size <= l->max_payload);
			/* nlink = the links that reach the state; all of
			 * them are in this tenant, recount below. */
			refs = a.nlink;
			{
				uint32_t found = 0;

				for (size_t pi = 0; pi < pl.n; pi++) {
					struct store_node *pp = NULL;
					struct store_dirlist xl;

					assert_int_equal(store_lookup(s, t,
						pl.e[pi].name, &pp), 0);
					assert_int_equal(store_list(s, pp, &xl),
							 0);
					for (size_t x = 0; x < xl.n; x++)
						found += xl.e[x].ino ==
							 a.ino;
					store_dirlist_free(&xl);
					store_node_unref(s, pp);
				}
				assert_int_equal(found, refs);
			}
			store_node_unref(s, c);
		}
		store_dirlist_free(&cl);
		store_node_unref(s, p);
	}
	if (l->tenant_quota)
		assert_true(tlinks <= l->tenant_quota);
	store_dirlist_free(&pl);
}

static void run_mixed(const struct store_limits *l, int iters, bool leases,
		      unsigned check_every, unsigned snap_every)
{
	struct mixed m;
	struct worker w[NTHREADS];
	pthread_t th[NTHREADS];
	struct timespec t0, t1;
	struct store_stats st, tst;
	struct store_dirlist tl;
	struct recount all = { 0 };
	uint64_t *inos = NULL;
	size_t ninos = 0;

	failures_reset();
	memset(g_hist, 0, sizeof g_hist);
	g_xdev_dead = 0;
	g_extra_allowed = leases ? ENOENT : -1;
	memset(&m, 0, sizeof m);
	m.clk = 5000;
	m.iters = iters;
	m.leases = leases;
	m.check_every = check_every;
	m.snap_every = snap_every;
	atomic_init(&m.snaps, 0);
	m.s = new_store(l, &m.clk);
	fs_inodes_init(&m.inodes);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < NTHREADS; i++) {
		memset(&w[i], 0, sizeof w[i]);
		w[i].m = &m;
		w[i].id = i;
		w[i].seed = seed_base() + 7919u * (unsigned)i + (leases ? 1 : 0);
		assert_int_equal(pthread_create(&th[i], NULL, mixed_thread,
						&w[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);

	/* Outcome histogram: shows which paths the run exercised. */
	printf("# mixed%s: %d threads x %d ops (seed %#x) in %.2f s\n",
	       leases ? " (leases)" : "", NTHREADS, iters, seed_base(),
	       (double)(t1.tv_sec - t0.tv_sec) +
		       (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	for (int op = 0; op < OP_NOPS; op++) {
		printf("#   %-12s", OPNAME[op]);
		for (int e = 0; e < NERR; e++)
			if (g_hist[op][e])
				printf(" %s=%ld", e ? strerror(e) : "ok",
				       g_hist[op][e]);
		printf("\n");
	}

	if (snap_every)
		printf("#   snapshots taken and checked: %ld\n",
		       atomic_load(&m.snaps));
	printf("#   -EXDEV through a handle of an earlier tenant: %ld\n",
	       __atomic_load_n(&g_xdev_dead, __ATOMIC_RELAXED));
	assert_no_failures();
	check_all_ok(m.s);
	/* Children past their deadline are invisible but may not have been
	 * reaped yet; the gauges count them until they are, so reap what
	 * is due before recounting through the listings. */
	if (leases)
		while (store_expire(m.s, 64))
			;

	/* Inode numbers are never reused. */
	for (int i = 0; i < NTHREADS; i++) {
		inos = realloc(inos, (ninos + w[i].ninos + 1) * sizeof *inos);
		assert_non_null(inos);
		memcpy(inos + ninos, w[i].inos, w[i].ninos * sizeof *inos);
		ninos += w[i].ninos;
		free(w[i].inos);
	}
	qsort(inos, ninos, sizeof *inos, cmp_u64);
	for (size_t i = 1; i < ninos; i++)
		if (inos[i] == inos[i - 1])
			fail_msg("inode %llu handed out twice",
				 (unsigned long long)inos[i]);
	free(inos);

	/* The gauges equal a recount through the listings. */
	assert_int_equal(store_list(m.s, store_root(m.s), &tl), 0);
	for (size_t i = 0; i < tl.n; i++) {
		struct store_node *t = NULL;
		struct recount one = { 0 };

		assert_int_equal(tl.e[i].kind, STORE_TENANT);
		assert_int_equal(store_lookup(m.s, store_root(m.s),
					      tl.e[i].name, &t), 0);
		recount_tenant(m.s, t, l, &one);
		assert_int_equal(store_stats(m.s, t, &tst), 0);
		assert_int_equal(tst.tenants, 1);
		assert_int_equal(tst.parents, one.parents);
		assert_int_equal(tst.children, one.children);
		assert_int_equal(tst.links, one.links);
		assert_int_equal(tst.bytes, one.bytes);
		all.tenants += one.tenants;
		all.parents += one.parents;
		all.children += one.children;
		all.links += one.links;
		all.bytes += one.bytes;
		store_node_unref(m.s, t);
	}
	store_dirlist_free(&tl);
	assert_int_equal(store_stats(m.s, NULL, &st), 0);
	printf("#   end: tenants %llu parents %llu children %llu links %llu "
	       "tombstones %llu bytes %llu; admissions %llu removals %llu "
	       "expiries %llu joins %llu leaves %llu\n",
	       (unsigned long long)st.tenants, (unsigned long long)st.parents,
	       (unsigned long long)st.children, (unsigned long long)st.links,
	       (unsigned long long)st.tombstones, (unsigned long long)st.bytes,
	       (unsigned long long)st.admissions,
	       (unsigned long long)st.removals,
	       (unsigned long long)st.expiries, (unsigned long long)st.joins,
	       (unsigned long long)st.leaves);
	assert_int_equal(st.tenants, all.tenants);
	assert_int_equal(st.parents, all.parents);
	assert_int_equal(st.children, all.children);
	assert_int_equal(st.links, all.links);
	assert_int_equal(st.bytes, all.bytes);
	assert_true(st.tenants <= l->max_tenants);
	assert_true(st.parents <= l->max_parents);
	assert_true(st.children <= l->max_children);
	assert_true(st.bytes <= l->max_bytes);
	assert_true(st.tombstones <= l->max_tombstones);
	/* Every state admitted was removed or is still here. */
	assert_true(st.admissions >= st.children);

	/* Every lookup was forgotten: the table is empty. */
	assert_int_equal(m.inodes.n, 0);
	fs_inodes_clear(&m.inodes, m.s);
	store_free(m.s);
}

static void mixed_limits(struct store_limits *l)
{
	store_limits_default(l);
	l->max_parents = 7;          /* 2 tenants x 4 names: joins collide */
	l->max_children = 16;
	l->max_bytes = 256;
	l->max_payload = MAXPAY;
	l->max_tombstones = 5;
	l->tombstone_ttl_ms = 3000;  /* ages out as threads tick the clock */
	l->parent_quota = 5;
	l->tenant_quota = 18;
}

static int mixed_iters(void)
{
	const char *e = getenv("STRESS_ITERS");

	return e ? atoi(e) : 40000;
}

static void test_mixed_workload(void **state)
{
	struct store_limits l;

	mixed_limits(&l);
	run_mixed(&l, mixed_iters(), false, 0, 0);
}

/* The same with child leases that expire while the threads run. */
static void test_mixed_workload_with_leases(void **state)
{
	struct store_limits l;

	mixed_limits(&l);
	l.default_ttl_ms = 2000;
	run_mixed(&l, mixed_iters() / 2, true, 0, 0);
}

/*
 * store_check_all() takes every lock in order, so it may run while the
 * store is in use (a diagnostic scan of a live mount) and must then see a
 * consistent store and touch no freed memory.  Last in the list: under
 * ASan a use-after-free ends the program.
 */
static void test_check_all_concurrent(void **state)
{
	struct store_limits l;

	mixed_limits(&l);
	run_mixed(&l, mixed_iters() / 2, false, 200, 0);
}

/*
 * Snapshots taken by the workers themselves, between their transitions,
 * with leases running out: each must be one state of the store
 * (snapshot_check), and the copy-before-write hooks race the taker.
 */
static void test_snapshots_concurrent(void **state)
{
	struct store_limits l;

	mixed_limits(&l);
	l.default_ttl_ms = 2000;
	run_mixed(&l, mixed_iters() / 2, true, 0, 100);
}

/* Leases, the reaper and the event log under concurrency -------------------- */

/*
 * Children with short TTLs in three parents (child_ttl 8 ms, 25 ms and the
 * default 15 ms) while LW threads create, renew, unlink, look up, publish
 * and list them and tick the shared atomic clock, one thread runs reaper
 * passes (store_expire with a small budget) beside the store's own reaper
 * thread (store_reaper_start: the deadlines the workers set keep waking
 * it), and one reads the event log with a window as large as the log.  Workers check what they may: a
 * renewal sets deadline = now + ttl for a now between their clock reads
 * before and after, a child a lookup found was not past its deadline.
 * Afterwards: store_check_all() passes; replaying the event lines per
 * name (create: absent -> present; unlink, expire: present -> absent;
 * write: present) never contradicts itself and ends with exactly what
 * store_list() shows; the numbers of create, unlink and write lines equal
 * the successful calls, and the expire lines equal stats.expiries.
 */
#define LW 4
#define LPN 3
#define LCN 12
#define LHANDLES 4

static const char *const LPAR[LPN] = { "p0", "p1", "p2" };
static const uint64_t LTTL[LPN] = { 8, 25, 15 }; /* p2: default_ttl */

struct lrun {
	struct store *s;
	uint64_t clk;
	struct store_node *t, *p[LPN];
	int iters;
	int stop_expirer, stop_reader;   /* atomics */
	unsigned long reaped;            /* by the reaper thread */
	struct store_event_reader *r;    /* the reader thread's */
	char *ev;                        /* what it read */
	size_t evlen, evcap;
};

struct lworker {
	struct lrun *r;
	int id;
	unsigned seed;
	struct store_node *h[LHANDLES];  /* own children, maybe gone */
	uint64_t ttl[LHANDLES];
	long creates, unlinks, writes, renews, stale_renews, expired_seen;
};

static uint64_t lnow(struct lrun *r)
{
	return atomic_clock_now(&r->clk);
}

static void lrc(struct lworker *w, const char *what, int rc, int ok1, int ok2,
		int ok3)
{
	if (rc != 0 && rc != -ok1 && rc != -ok2 && rc != -ok3)
		failf("lease thread %d: %s returned %d (%s)", w->id, what, rc,
		      strerror(-rc));
}

/* The lease of @n, read after an operation that set its deadline at some
 * now in [@t0, clock after]: the deadline must be now + @ttl. */
static void lcheck_deadline(struct lworker *w, struct store_node *n,
			    uint64_t ttl, uint64_t t0, const char *what)
{
	struct store_lease l;
	int rc = store_lease_get(w->r->s, n, &l);
	uint64_t t1 = lnow(w->r);

	lrc(w, "lease_get", rc, ESTALE, 0, 0);
	if (rc)
		return;
	if (l.ttl_ms != ttl)
		failf("lease thread %d: %s: ttl %llu, expected %llu", w->id,
		      what, (unsigned long long)l.ttl_ms,
		      (unsigned long long)ttl);
	if (l.deadline_ms == 0)
		failf("lease thread %d: %s: store_lease_get returned 0 with "
		      "ttl %llu and no deadline (removed meanwhile? then "
		      "-ESTALE)", w->id, what, (unsigned long long)l.ttl_ms);
	else if (l.deadline_ms < t0 + ttl || l.deadline_ms > t1 + ttl)
		failf("lease thread %d: %s: deadline %llu outside [%llu, %llu]",
		      w->id, what, (unsigned long long)l.deadline_ms,
		      (unsigned long long)(t0 + ttl),
		      (unsigned long long)(t1 + ttl));
}

static void lease_op(struct lworker *w)
{
	struct lrun *r = w->r;
	struct store *s = r->s;
	unsigned op = (unsigned)rand_r(&w->seed) % 100;
	int pi = rand_r(&w->seed) % LPN, hi = rand_r(&w->seed) % LHANDLES;
	char name[8];
	uint64_t t0 = lnow(r);
	int rc;

	snprintf(name, sizeof name, "c%d", rand_r(&w->seed) % LCN);
	if (op < 25) {
		struct store_node *n = NULL;
		bool created = false;

		rc = store_create(s, r->p[pi], name, &FOWN, true, &n, &created);
		lrc(w, "create", rc, EEXIST, ENOSPC, EDQUOT);
		if (rc == 0) {
			if (!created)
				failf("exclusive create: not created");
			w->creates++;
			lcheck_deadline(w, n, LTTL[pi], t0, "create");
			if (w->h[hi])
				store_node_unref(s, w->h[hi]);
			w->h[hi] = n;
			w->ttl[hi] = LTTL[pi];
		}
	} else if (op < 45) {
		if (!w->h[hi])
			return;
		rc = store_renew(s, w->h[hi]);
		lrc(w, "renew", rc, ESTALE, 0, 0);
		if (rc == 0) {
			w->renews++;
			lcheck_deadline(w, w->h[hi], w->ttl[hi], t0, "renew");
		} else {
			w->stale_renews++;
		}
	} else if (op < 60) {
		rc = store_unlink(s, r->p[pi], name);
		lrc(w, "unlink", rc, ENOENT, 0, 0);
		if (rc == 0)
			w->unlinks++;
	} else if (op < 70) {
		struct store_node *n = NULL;
		struct store_lease l;

		rc = store_lookup(s, r->p[pi], name, &n);
		lrc(w, "lookup", rc, ENOENT, 0, 0);
		if (rc)
			return;
		/* Visible at the lookup's now >= t0, and deadlines only
		 * move forward: it was not due at t0. */
		rc = store_lease_get(s, n, &l);
		lrc(w, "lease_get", rc, ESTALE, 0, 0);
		if (rc == 0 && (l.deadline_ms == 0 || l.deadline_ms <= t0))
			failf("lease thread %d: lookup found a child with "
			      "deadline %llu at now >= %llu", w->id,
			      (unsigned long long)l.deadline_ms,
			      (unsigned long long)t0);
		if (rc)
			w->expired_seen++;
		store_node_unref(s, n);
	} else if (op < 80) {
		struct store_stage *st = NULL;

		if (!w->h[hi])
			return;
		rc = store_stage_open(s, w->h[hi], STORE_STAGE_REPLACE, &st);
		lrc(w, "stage_open", rc, ESTALE, 0, 0);
		if (rc)
			return;
		{
			ssize_t n = store_stage_write(st, "lease", 5, 0);

			rc = n < 0 ? (int)n : 0;
		}
		lrc(w, "stage_write", rc, ESTALE, 0, 0);
		if (rc == 0) {
			rc = store_stage_publish(st);
			lrc(w, "publish", rc, ESTALE, 0, 0);
			if (rc == 0)
				w->writes++;
		}
		store_stage_close(st);
	} else if (op < 88) {
		struct store_dirlist dl;

		rc = store_list(s, r->p[pi], &dl);
		lrc(w, "list", rc, 0, 0, 0);
		if (rc == 0)
			store_dirlist_free(&dl);
	} else {
		atomic_clock_advance(&r->clk, 1);
	}
}

static void *lease_worker(void *arg)
{
	struct lworker *w = arg;

	for (int i = 0; i < w->r->iters; i++)
		lease_op(w);
	for (int i = 0; i < LHANDLES; i++)
		if (w->h[i])
			store_node_unref(w->r->s, w->h[i]);
	return NULL;
}

static void *lease_expirer(void *arg)
{
	struct lrun *r = arg;

	while (!__atomic_load_n(&r->stop_expirer, __ATOMIC_ACQUIRE)) {
		unsigned n = store_expire(r->s, 3);

		if (n > 3)
			failf("store_expire(3) returned %u", n);
		r->reaped += n;
		if (!n)
			sched_yield();
	}
	return NULL;
}

/* Read whatever is pending into r->ev; returns the bytes read. */
static size_t lease_read(struct lrun *r)
{
	size_t total = 0, got;

	do {
		if (r->evcap - r->evlen < 65536) {
			r->evcap = r->evcap ? 2 * r->evcap : 1 << 20;
			r->ev = realloc(r->ev, r->evcap);
			if (!r->ev) {
				failf("oom");
				r->evcap = r->evlen = 0;
				return total;
			}
		}
		got = store_events_read(r->s, r->r, r->ev + r->evlen,
					r->evcap - r->evlen - 1);
		r->evlen += got;
		total += got;
	} while (got);
	r->ev[r->evlen] = '\0';
	return total;
}

static void *lease_reader(void *arg)
{
	struct lrun *r = arg;

	while (!__atomic_load_n(&r->stop_reader, __ATOMIC_ACQUIRE))
		if (!lease_read(r))
			sched_yield();
	return NULL;
}

struct lreplay {
	bool present[LPN][LCN];
	long creates, unlinks, writes, expires;
	uint64_t last_seq;
};

/* Replay r->ev from @from; fails the test on a contradiction. */
static void lease_replay(struct lrun *r, size_t from, struct lreplay *rp)
{
	char *line = r->ev + from;

	while (*line) {
		char *nl = strchr(line, '\n'), *end;
		char op[16], t[16], p[16], c[16], g[16], v[16];
		unsigned long long seq;
		int pi = -1, ci;
		bool *x;

		assert_non_null(nl);
		*nl = '\0';
		if (strcmp(line, "overflow") == 0)
			fail_msg("the event reader overflowed: raise its window "
				 "or lower STRESS_ITERS");
		seq = strtoull(line, &end, 10);
		if (*end != '\t' ||
		    sscanf(end + 1, "%15[^\t]\t%15[^\t]\t%15[^\t]\t%15[^\t]\t"
				    "%15[^\t]\t%15s", op, t, p, c, g, v) != 6)
			fail_msg("bad event line: %s", line);
		if (seq <= rp->last_seq)
			fail_msg("sequence %llu after %llu", seq,
				 (unsigned long long)rp->last_seq);
		rp->last_seq = seq;
		for (int i = 0; i < LPN; i++)
			if (strcmp(p, LPAR[i]) == 0)
				pi = i;
		ci = atoi(c + 1);
		if (strcmp(t, "lt") != 0 || pi < 0 || c[0] != 'c' || ci < 0 ||
		    ci >= LCN || strcmp(g, "1") != 0)
			fail_msg("unexpected event line: %s", line);
		x = &rp->present[pi][ci];
		if (strcmp(op, "create") == 0) {
			if (*x)
				fail_msg("create of a present child: %s", line);
			*x = true;
			rp->creates++;
		} else if (strcmp(op, "unlink") == 0 ||
			   strcmp(op, "expire") == 0) {
			if (!*x)
				fail_msg("%s of an absent child: %s", op, line);
			*x = false;
			if (op[0] == 'u')
				rp->unlinks++;
			else
				rp->expires++;
		} else if (strcmp(op, "write") == 0) {
			if (!*x)
				fail_msg("write of an absent child: %s", line);
			rp->writes++;
		} else {
			fail_msg("unexpected event line: %s", line);
		}
		*nl = '\n';
		line = nl + 1;
	}
}

/* The replayed state equals the listings and the gauges. */
static void lease_compare(struct lrun *r, const struct lreplay *rp)
{
	struct store_stats st;
	uint64_t present = 0;

	for (int i = 0; i < LPN; i++) {
		struct store_dirlist dl;
		bool listed[LCN] = { false };

		assert_int_equal(store_list(r->s, r->p[i], &dl), 0);
		for (size_t k = 0; k < dl.n; k++) {
			int ci = atoi(dl.e[k].name + 1);

			assert_true(ci >= 0 && ci < LCN);
			listed[ci] = true;
		}
		store_dirlist_free(&dl);
		for (int k = 0; k < LCN; k++) {
			if (listed[k] != rp->present[i][k])
				fail_msg("%s/c%d: listed %d, events say %d",
					 LPAR[i], k, listed[k],
					 rp->present[i][k]);
			present += listed[k];
		}
	}
	assert_int_equal(store_stats(r->s, NULL, &st), 0);
	assert_int_equal(st.children, present);
	assert_int_equal(st.links, present);
	assert_int_equal(st.expiries, (uint64_t)rp->expires);
}

static void test_leases_and_events(void **state)
{
	struct store_limits l;
	struct lrun r;
	struct lworker w[LW];
	struct lreplay rp;
	pthread_t th[LW], exp_th, rd_th;
	struct timespec t0, t1;
	long creates = 0, unlinks = 0, writes = 0, renews = 0, stale = 0,
	     seen = 0;
	unsigned long final_reaped = 0;
	size_t mark;
	int iters = mixed_iters() * 3 / 4;

	failures_reset();
	store_limits_default(&l);
	l.max_children = 24;         /* < 3 x 12 names: ENOSPC happens */
	l.parent_quota = 10;         /* and EDQUOT */
	l.default_ttl_ms = LTTL[2];
	memset(&r, 0, sizeof r);
	memset(&rp, 0, sizeof rp);
	r.clk = 5000;
	r.iters = iters;
	r.s = new_store(&l, &r.clk);
	r.t = mkdir_or_fail(r.s, store_root(r.s), "lt");
	for (int i = 0; i < LPN; i++) {
		r.p[i] = mkdir_or_fail(r.s, r.t, LPAR[i]);
		if (i < 2)
			assert_int_equal(store_set_child_ttl(r.s, r.p[i],
							     LTTL[i]), 0);
	}
	/* Read everything, or overflow. */
	assert_int_equal(store_events_open(r.s, NULL, NULL,
					   STORE_EVENTS_WHOLE_LOG, &r.r), 0);
	assert_int_equal(store_reaper_start(r.s), 0);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(pthread_create(&rd_th, NULL, lease_reader, &r), 0);
	assert_int_equal(pthread_create(&exp_th, NULL, lease_expirer, &r), 0);
	for (int i = 0; i < LW; i++) {
		memset(&w[i], 0, sizeof w[i]);
		w[i].r = &r;
		w[i].id = i;
		w[i].seed = seed_base() + 104729u * (unsigned)i;
		assert_int_equal(pthread_create(&th[i], NULL, lease_worker,
						&w[i]), 0);
	}
	for (int i = 0; i < LW; i++) {
		pthread_join(th[i], NULL);
		creates += w[i].creates;
		unlinks += w[i].unlinks;
		writes += w[i].writes;
		renews += w[i].renews;
		stale += w[i].stale_renews;
		seen += w[i].expired_seen;
	}
	store_reaper_stop(r.s);
	__atomic_store_n(&r.stop_expirer, 1, __ATOMIC_RELEASE);
	pthread_join(exp_th, NULL);
	__atomic_store_n(&r.stop_reader, 1, __ATOMIC_RELEASE);
	pthread_join(rd_th, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_no_failures();
	check_all_ok(r.s);

	/* The clock stands still: reap what is due, then compare. */
	for (unsigned n; (n = store_expire(r.s, 64));)
		final_reaped += n;
	assert_true(store_next_deadline(r.s) > lnow(&r));
	lease_read(&r);
	lease_replay(&r, 0, &rp);
	printf("# leases: %d threads x %d ops in %.2f s, clock +%llu ms: "
	       "creates %ld unlinks %ld writes %ld renews %ld (stale %ld) "
	       "expiries %ld (reaper %lu + %lu), lines %llu\n",
	       LW, iters,
	       (double)(t1.tv_sec - t0.tv_sec) +
		       (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
	       (unsigned long long)(lnow(&r) - 5000), creates, unlinks, writes,
	       renews, stale, rp.expires, r.reaped, final_reaped,
	       (unsigned long long)rp.last_seq);
	assert_int_equal(rp.creates, creates);
	assert_int_equal(rp.unlinks, unlinks);
	assert_int_equal(rp.writes, writes);
	assert_true((unsigned long)rp.expires >= r.reaped + final_reaped);
	assert_true(rp.expires > 0);
	lease_compare(&r, &rp);
	check_all_ok(r.s);

	/* Past every deadline: everything expires, and the lines say so. */
	atomic_clock_advance(&r.clk, 1000);
	while (store_expire(r.s, 64))
		;
	assert_int_equal(store_next_deadline(r.s), UINT64_MAX);
	mark = r.evlen;
	lease_read(&r);
	lease_replay(&r, mark, &rp);
	lease_compare(&r, &rp);
	for (int i = 0; i < LPN; i++)
		for (int k = 0; k < LCN; k++)
			assert_false(rp.present[i][k]);
	check_all_ok(r.s);

	free(r.ev);
	for (int i = 0; i < LPN; i++)
		store_node_unref(r.s, r.p[i]);
	store_node_unref(r.s, r.t);
	store_events_close(r.r);
	store_free(r.s);
}

/* The event stream replays to the store ------------------------------------- */

/*
 * RW threads run every kind of transition on a few names of one tenant
 * (admissions, publications, truncations, unlinks, links, renames,
 * NOREPLACE renames and exchanges, leaves, departs, rejoins, parent and
 * child leases, tenant cleanups) while one thread reaps and one reads the
 * event log.  Publications look their child up first, so they race the
 * leave, depart, expiry or cleanup that takes it away.  Afterwards the
 * lines are replayed on a model of the tree: every line must apply (a
 * child line names a live parent of its generation, a write or a removal
 * a present child, a create, link or rename a free destination, a link's
 * or rename's source a present child, versions follow the state's
 * publications), and the model must end as the store: the same names,
 * the same generations, the names that share a state in the model share
 * one in the store, with its version.
 */
#define RW 4
#define RPN 4
#define RCN 5
#define RSTATES (1 << 20)

static const char *const RPAR[RPN] = { "P0", "P1", "P2", "P3" };
static const char *const RCHI[RCN] = { "c0", "c1", "c2", "c3", "c4" };

struct rrun {
	struct store *s;
	uint64_t clk;
	int iters;
	int stop_reaper, stop_reader;    /* atomics */
	struct store_event_reader *r;    /* the reader thread's */
	char *ev;                        /* what it read */
	size_t evlen, evcap;
	long ops[8];                     /* successful calls, by kind */
};

struct rworker {
	struct rrun *r;
	unsigned seed;
};

static void rrc(const char *what, int rc, int ok1, int ok2, int ok3, int ok4)
{
	if (rc != 0 && rc != -ok1 && rc != -ok2 && rc != -ok3 && rc != -ok4)
		failf("replay worker: %s returned %d (%s)", what, rc,
		      strerror(-rc));
}

/* The node at @depth (1 tenant, 2 parent, 3 child) of the path, or NULL. */
static struct store_node *rlookup(struct rrun *r, int depth, int pi, int ci)
{
	struct store_node *t = NULL, *p = NULL, *c = NULL;

	if (store_lookup(r->s, store_root(r->s), "rt", &t) != 0)
		return NULL;
	if (depth == 1)
		return t;
	if (store_lookup(r->s, t, RPAR[pi], &p) != 0) {
		store_node_unref(r->s, t);
		return NULL;
	}
	store_node_unref(r->s, t);
	if (depth == 2)
		return p;
	if (store_lookup(r->s, p, RCHI[ci], &c) != 0)
		c = NULL;
	store_node_unref(r->s, p);
	return c;
}

static void replay_op(struct rworker *w)
{
	struct rrun *r = w->r;
	struct store *s = r->s;
	unsigned op = (unsigned)rand_r(&w->seed) % 1000;
	int pi = rand_r(&w->seed) % RPN, qi = rand_r(&w->seed) % RPN;
	int ci = rand_r(&w->seed) % RCN, di = rand_r(&w->seed) % RCN;
	struct store_node *n, *m;
	int rc;

	if (op < 300) {                                 /* publication */
		struct store_stage *st = NULL;
		bool app = rand_r(&w->seed) % 2;

		n = rlookup(r, 3, pi, ci);
		if (!n)
			return;
		sched_yield(); /* let a cascade start meanwhile */
		rc = store_stage_open(s, n, app ? STORE_STAGE_APPEND :
						  STORE_STAGE_REPLACE, &st);
		rrc("stage_open", rc, ESTALE, 0, 0, 0);
		if (rc == 0) {
			ssize_t k = store_stage_write(st, "abcd", 4, 0);

			rc = k < 0 ? (int)k : store_stage_publish(st);
			rrc("publish", rc, ESTALE, EFBIG, 0, 0);
			store_stage_close(st);
		}
		store_node_unref(s, n);
	} else if (op < 330) {                          /* truncation */
		struct store_attr in = { .size = 2 }, out;

		n = rlookup(r, 3, pi, ci);
		if (!n)
			return;
		rc = store_setattr(s, n, STORE_SET_SIZE, &in, &out);
		rrc("truncate", rc, ESTALE, 0, 0, 0);
		store_node_unref(s, n);
	} else if (op < 480) {                          /* admission */
		bool created = false;

		n = rlookup(r, 2, pi, 0);
		if (!n)
			return;
		rc = store_create(s, n, RCHI[ci], &FOWN, true, &m, &created);
		rrc("create", rc, EEXIST, ESTALE, 0, 0);
		if (rc == 0)
			store_node_unref(s, m);
		store_node_unref(s, n);
	} else if (op < 540) {                          /* unlink */
		n = rlookup(r, 2, pi, 0);
		if (!n)
			return;
		rc = store_unlink(s, n, RCHI[ci]);
		rrc("unlink", rc, ENOENT, ESTALE, 0, 0);
		store_node_unref(s, n);
	} else if (op < 640) {                          /* link */
		n = rlookup(r, 3, pi, ci);
		m = n ? rlookup(r, 2, qi, 0) : NULL;
		if (m) {
			rc = store_link(s, n, m, RCHI[di]);
			rrc("link", rc, EEXIST, ESTALE, 0, 0);
			store_node_unref(s, m);
		}
		if (n)
			store_node_unref(s, n);
	} else if (op < 760) {                          /* rename */
		static const unsigned flags[] = {
			0, 0, STORE_RENAME_NOREPLACE, STORE_RENAME_EXCHANGE
		};

		n = rlookup(r, 2, pi, 0);
		m = n ? rlookup(r, 2, qi, 0) : NULL;
		if (m) {
			rc = store_rename(s, n, RCHI[ci], m, RCHI[di],
					  flags[rand_r(&w->seed) % 4]);
			rrc("rename", rc, ENOENT, EEXIST, ESTALE, 0);
			store_node_unref(s, m);
		}
		if (n)
			store_node_unref(s, n);
	} else if (op < 840) {                          /* join */
		n = rlookup(r, 1, 0, 0);
		if (!n)
			return;
		rc = store_mkdir(s, n, RPAR[pi], &DOWN, &m);
		rrc("mkdir", rc, EEXIST, ESTALE, 0, 0);
		if (rc == 0)
			store_node_unref(s, m);
		store_node_unref(s, n);
	} else if (op < 860) {                          /* leave */
		n = rlookup(r, 1, 0, 0);
		if (!n)
			return;
		rc = store_rmdir(s, n, RPAR[pi], NULL);
		rrc("rmdir", rc, ENOENT, ESTALE, 0, 0);
		store_node_unref(s, n);
	} else if (op < 875) {                          /* depart */
		n = rlookup(r, 1, 0, 0);
		if (!n)
			return;
		rc = store_depart(s, n, RPAR[pi], NULL);
		rrc("depart", rc, ESTALE, 0, 0, 0);
		store_node_unref(s, n);
	} else if (op < 900) {                          /* leases */
		bool parent = rand_r(&w->seed) % 4 == 0;

		n = rlookup(r, parent ? 2 : 3, pi, ci);
		if (!n)
			return;
		rc = store_set_ttl(s, n, 1 + (unsigned)rand_r(&w->seed) % 20);
		rrc("set_ttl", rc, ESTALE, 0, 0, 0);
		store_node_unref(s, n);
	} else if (op < 995) {
		atomic_clock_advance(&r->clk, 1);
	} else if (op < 996) {                          /* tenant cleanup */
		rc = store_rmdir(s, store_root(s), "rt", NULL);
		rrc("cleanup", rc, ENOENT, 0, 0, 0);
	} else {                                        /* tenant again */
		rc = store_mkdir(s, store_root(s), "rt", &DOWN, &m);
		rrc("tenant mkdir", rc, EEXIST, 0, 0, 0);
		if (rc == 0)
			store_node_unref(s, m);
	}
}

static void *replay_worker(void *arg)
{
	struct rworker *w = arg;

	for (int i = 0; i < w->r->iters; i++)
		replay_op(w);
	return NULL;
}

static void *replay_reaper(void *arg)
{
	struct rrun *r = arg;

	while (!__atomic_load_n(&r->stop_reaper, __ATOMIC_ACQUIRE))
		if (!store_expire(r->s, 4))
			sched_yield();
	return NULL;
}

/* Read whatever is pending into r->ev; returns the bytes read. */
static size_t replay_read(struct rrun *r)
{
	size_t total = 0, got;

	do {
		if (r->evcap - r->evlen < 65536) {
			r->evcap = r->evcap ? 2 * r->evcap : 1 << 20;
			r->ev = realloc(r->ev, r->evcap);
			if (!r->ev) {
				failf("oom");
				r->evcap = r->evlen = 0;
				return total;
			}
		}
		got = store_events_read(r->s, r->r, r->ev + r->evlen,
					r->evcap - r->evlen - 1);
		r->evlen += got;
		total += got;
	} while (got);
	r->ev[r->evlen] = '\0';
	return total;
}

static void *replay_reader(void *arg)
{
	struct rrun *r = arg;

	while (!__atomic_load_n(&r->stop_reader, __ATOMIC_ACQUIRE))
		if (!replay_read(r))
			sched_yield();
	return NULL;
}

/* The tree the lines describe: state ids (0: no child) and versions. */
struct rmodel {
	bool tenant;
	bool parent[RPN];
	long gen[RPN];
	uint32_t state[RPN][RCN];
	int64_t *version;              /* by state id */
	uint32_t nstates;
	long lines;
	long by_op[16];                /* lines, by enum store_op */
};

static const char *const ROPS[] = {
	"join", "leave", "depart", "create", "write", "unlink", "link",
	"rename", "expire", "drain", "cleanup", "exchange",
};
#define RNOPS (int)(sizeof ROPS / sizeof ROPS[0])

static int rname_index(const char *const *names, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return i;
	return -1;
}

static void rparent_clear(struct rmodel *md, int pi)
{
	md->parent[pi] = false;
	memset(md->state[pi], 0, sizeof md->state[pi]);
}

/* Apply one line (fields split); fails the test when it cannot apply. */
static void replay_line(struct rmodel *md, char **f, int nf, const char *line)
{
	const char *op = f[1];
	int pi = rname_index(RPAR, RPN, f[3]), ci = rname_index(RCHI, RCN, f[4]);
	long g = strcmp(f[5], "-") ? atol(f[5]) : -1;
	int64_t v = strcmp(f[6], "-") ? atoll(f[6]) : -1;
	bool from = !strcmp(op, "link") || !strcmp(op, "rename") ||
		    !strcmp(op, "exchange");
	int fpi = from ? rname_index(RPAR, RPN, f[7]) : -1;
	int fci = from ? rname_index(RCHI, RCN, f[8]) : -1;
	uint32_t *x, *y;

	if (nf != (from ? 9 : 7) || strcmp(f[2], "rt") != 0 ||
	    rname_index(ROPS, RNOPS, op) < 0)
		fail_msg("bad line: %s", line);
	md->lines++;
	md->by_op[rname_index(ROPS, RNOPS, op)]++;
	if (!strcmp(op, "cleanup")) {
		if (!md->tenant)
			fail_msg("cleanup of an absent tenant: %s", line);
		md->tenant = false;
		for (int i = 0; i < RPN; i++)
			rparent_clear(md, i);
		return;
	}
	if (!strcmp(op, "join") && !strcmp(f[3], "-")) {
		if (md->tenant)
			fail_msg("join of a present tenant: %s", line);
		md->tenant = true;
		return;
	}
	if (!md->tenant || pi < 0)
		fail_msg("a line of an absent tenant or unknown parent: %s",
			 line);
	if (ci < 0) { /* a parent's line */
		if (strcmp(f[4], "-"))
			fail_msg("unknown child: %s", line);
		if (!strcmp(op, "join")) {
			if (md->parent[pi] || g < 1)
				fail_msg("join of a present parent: %s", line);
			md->parent[pi] = true;
			md->gen[pi] = g;
		} else if (!strcmp(op, "leave") || !strcmp(op, "expire") ||
			   !strcmp(op, "depart")) {
			if (md->parent[pi] && md->gen[pi] != g)
				fail_msg("removal of another generation: %s",
					 line);
			if (!md->parent[pi] && op[0] != 'd')
				fail_msg("%s of an absent parent: %s", op,
					 line);
			rparent_clear(md, pi);
		} else {
			fail_msg("unexpected line: %s", line);
		}
		return;
	}
	/* A child's line: its parent is present, of that generation. */
	if (!md->parent[pi] || md->gen[pi] != g)
		fail_msg("a child line of an absent parent (or of another "
			 "generation): %s", line);
	x = &md->state[pi][ci];
	if (from && (fpi < 0 || fci < 0 || !md->parent[fpi]))
		fail_msg("a source in an absent parent: %s", line);
	y = from ? &md->state[fpi][fci] : NULL;
	if (!strcmp(op, "create")) {
		if (*x || v != 0)
			fail_msg("create of a present child: %s", line);
		if (md->nstates + 1 >= RSTATES)
			fail_msg("too many states");
		*x = ++md->nstates;
		md->version[*x] = 0;
	} else if (!strcmp(op, "write")) {
		if (!*x)
			fail_msg("write of an absent child: %s", line);
		/* One line per name of the state, all with its new version. */
		if (v != md->version[*x] + 1 && v != md->version[*x])
			fail_msg("write of version %lld after %lld: %s",
				 (long long)v, (long long)md->version[*x],
				 line);
		md->version[*x] = v;
	} else if (!strcmp(op, "unlink") || !strcmp(op, "expire")) {
		if (!*x || md->version[*x] != v)
			fail_msg("%s of an absent child (or another version): "
				 "%s", op, line);
		*x = 0;
	} else if (!strcmp(op, "link") || !strcmp(op, "rename")) {
		if (*x || !*y || md->version[*y] != v)
			fail_msg("%s onto a present child, from an absent "
				 "one, or of another version: %s", op, line);
		*x = *y;
		if (op[0] == 'r')
			*y = 0;
	} else if (!strcmp(op, "exchange")) {
		uint32_t tmp;

		if (!*x || !*y)
			fail_msg("exchange with an absent child: %s", line);
		tmp = *x;
		*x = *y;
		*y = tmp;
		if (md->version[*x] != v)
			fail_msg("exchange: version %lld, model %lld: %s",
				 (long long)v, (long long)md->version[*x],
				 line);
	} else {
		fail_msg("unexpected line: %s", line);
	}
}

static void replay_lines(struct rmodel *md, char *text)
{
	char *line = text;

	while (*line) {
		char *nl = strchr(line, '\n'), *f[10], *save = NULL, *tok;
		char copy[256];
		int nf = 0;

		assert_non_null(nl);
		*nl = '\0';
		if (strcmp(line, "overflow") == 0 || !strncmp(line, "lost", 4))
			fail_msg("the event reader lost lines: %s", line);
		snprintf(copy, sizeof copy, "%s", line);
		for (tok = strtok_r(line, "\t", &save); tok && nf < 10;
		     tok = strtok_r(NULL, "\t", &save))
			f[nf++] = tok;
		if (nf < 7)
			fail_msg("bad line: %s", copy);
		replay_line(md, f, nf, copy);
		line = nl + 1;
	}
}

/* The model ends as the store is. */
static void replay_compare(struct rrun *r, const struct rmodel *md)
{
	uint64_t *ino = calloc(md->nstates + 1, sizeof *ino);
	struct store_node *t = rlookup(r, 1, 0, 0);

	assert_non_null(ino);
	assert_int_equal(t != NULL, md->tenant);
	for (int i = 0; t && i < RPN; i++) {
		struct store_node *p = rlookup(r, 2, i, 0);
		uint64_t g = 0;

		if ((p != NULL) != md->parent[i])
			fail_msg("%s: %s, the events say %s", RPAR[i],
				 p ? "present" : "absent",
				 md->parent[i] ? "present" : "absent");
		if (!p)
			continue;
		assert_int_equal(store_parent_generation(r->s, p, &g), 0);
		assert_int_equal(g, md->gen[i]);
		for (int k = 0; k < RCN; k++) {
			struct store_node *c = rlookup(r, 3, i, k);
			uint32_t id = md->state[i][k];
			uint64_t v = 0;

			if ((c != NULL) != (id != 0))
				fail_msg("%s/%s: %s, the events say %s",
					 RPAR[i], RCHI[k],
					 c ? "present" : "absent",
					 id ? "present" : "absent");
			if (!c)
				continue;
			if (!ino[id])
				ino[id] = store_node_ino(c);
			if (ino[id] != store_node_ino(c))
				fail_msg("%s/%s: not the state the events "
					 "say", RPAR[i], RCHI[k]);
			assert_int_equal(store_child_version(r->s, c, &v), 0);
			assert_int_equal((int64_t)v, md->version[id]);
			store_node_unref(r->s, c);
		}
		store_node_unref(r->s, p);
	}
	/* One inode, one state. */
	for (uint32_t a = 1; a <= md->nstates; a++)
		for (uint32_t b = a + 1; ino[a] && b <= md->nstates; b++)
			if (ino[a] == ino[b])
				fail_msg("states %u and %u are one inode", a,
					 b);
	if (t)
		store_node_unref(r->s, t);
	free(ino);
}

static void test_events_replay(void **state)
{
	struct store_limits l;
	struct rrun r;
	struct rworker w[RW];
	struct rmodel md;
	pthread_t th[RW], reap_th, rd_th;
	struct store_node *t;

	failures_reset();
	store_limits_default(&l);
	l.max_payload = 64;             /* appends are refused: EFBIG */
	memset(&r, 0, sizeof r);
	memset(&md, 0, sizeof md);
	md.version = calloc(RSTATES, sizeof *md.version);
	assert_non_null(md.version);
	r.clk = 5000;
	r.iters = mixed_iters() / 2;
	r.s = new_store(&l, &r.clk);
	/* Read everything, or overflow. */
	assert_int_equal(store_events_open(r.s, NULL, NULL,
					   STORE_EVENTS_WHOLE_LOG, &r.r), 0);
	t = mkdir_or_fail(r.s, store_root(r.s), "rt");
	store_node_unref(r.s, t);

	assert_int_equal(pthread_create(&rd_th, NULL, replay_reader, &r), 0);
	assert_int_equal(pthread_create(&reap_th, NULL, replay_reaper, &r), 0);
	for (int i = 0; i < RW; i++) {
		w[i].r = &r;
		w[i].seed = seed_base() + 15485863u * (unsigned)i;
		assert_int_equal(pthread_create(&th[i], NULL, replay_worker,
						&w[i]), 0);
	}
	for (int i = 0; i < RW; i++)
		pthread_join(th[i], NULL);
	__atomic_store_n(&r.stop_reaper, 1, __ATOMIC_RELEASE);
	pthread_join(reap_th, NULL);
	__atomic_store_n(&r.stop_reader, 1, __ATOMIC_RELEASE);
	pthread_join(rd_th, NULL);
	assert_no_failures();
	check_all_ok(r.s);

	/* The clock stands still: reap what is due, then compare. */
	while (store_expire(r.s, 64))
		;
	replay_read(&r);
	replay_lines(&md, r.ev);
	printf("# replay: %d threads x %d ops, %ld lines, %u states:", RW,
	       r.iters, md.lines, md.nstates);
	for (int i = 0; i < RNOPS; i++)
		printf(" %s %ld", ROPS[i], md.by_op[i]);
	printf("\n");
	replay_compare(&r, &md);
	check_all_ok(r.s);

	free(md.version);
	free(r.ev);
	store_events_close(r.r);
	store_free(r.s);
}

/* A mirror's root log position ----------------------------------------- */

#define ROOT_ENTRIES 20000

/* A root log entry "clock" of seq @seq, as XREAD gives its fields. */
struct root_entry {
	redisReply fields, f[10], *fp[10];
	char v[5][24];
};

static void root_entry_make(struct root_entry *x, uint64_t seq)
{
	static const char *const names[5] = { "seq", "op", "ms", "ns", "clock_ms" };

	memset(x, 0, sizeof(*x));
	snprintf(x->v[0], sizeof(x->v[0]), "%llu", (unsigned long long)seq);
	snprintf(x->v[1], sizeof(x->v[1]), "clock");
	snprintf(x->v[2], sizeof(x->v[2]), "0");
	snprintf(x->v[3], sizeof(x->v[3]), "0");
	snprintf(x->v[4], sizeof(x->v[4]), "%llu", (unsigned long long)seq);
	for (int i = 0; i < 5; i++) {
		x->f[2 * i].type = REDIS_REPLY_STRING;
		x->f[2 * i].str = (char *)names[i];
		x->f[2 * i].len = strlen(names[i]);
		x->f[2 * i + 1].type = REDIS_REPLY_STRING;
		x->f[2 * i + 1].str = x->v[i];
		x->f[2 * i + 1].len = strlen(x->v[i]);
	}
	for (int i = 0; i < 10; i++)
		x->fp[i] = &x->f[i];
	x->fields.type = REDIS_REPLY_ARRAY;
	x->fields.elements = 10;
	x->fields.element = x->fp;
}

struct root_run {
	struct store *s;
	atomic_bool done;
};

/* The follower's part: apply root entries 1..ROOT_ENTRIES in order. */
static void *root_applier(void *arg)
{
	struct root_run *r = arg;

	for (uint64_t seq = 1; seq <= ROOT_ENTRIES; seq++) {
		struct root_entry x;
		struct entry e;

		root_entry_make(&x, seq);
		if (entry_parse(&x.fields, &e) != 0 ||
		    mirror_apply(r->s, 0, &e) != 0) {
			failf("root entry %llu does not apply",
			      (unsigned long long)seq);
			break;
		}
	}
	atomic_store(&r->done, true);
	return NULL;
}

/* A transition's part: what was applied of the root log, read while the
 * follower applies, never goes back and ends at the last entry. */
static void test_mirror_root_position(void **state)
{
	struct store_limits l;
	struct root_run r = { .s = NULL };
	uint64_t seen = 0, at;
	bool gone, done;
	pthread_t th;

	(void)state;
	store_limits_default(&l);
	l.testclock = true;
	assert_int_equal(store_new(&l, NULL, &r.s), 0);
	assert_int_equal(mirror_attach(r.s, "m", 0), 0);
	failures_reset();
	atomic_store(&r.done, false);
	assert_int_equal(pthread_create(&th, NULL, root_applier, &r), 0);
	do {
		done = atomic_load(&r.done);
		assert_int_equal(mirror_applied(r.s, 0, &at, &gone), 0);
		if (at < seen)
			failf("the root position went back from %llu to %llu",
			      (unsigned long long)seen, (unsigned long long)at);
		seen = at;
		sched_yield();
	} while (!done);
	pthread_join(th, NULL);
	assert_no_failures();
	assert_int_equal(seen, ROOT_ENTRIES);
	store_free(r.s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_race_create_one_winner),
		cmocka_unit_test(test_race_unlink_one_winner),
		cmocka_unit_test(test_race_leave_vs_admission),
		cmocka_unit_test(test_race_shared_state_removal),
		cmocka_unit_test(test_race_registrations_not_lost),
		cmocka_unit_test(test_race_one_stage_shared),
		cmocka_unit_test(test_mixed_workload),
		cmocka_unit_test(test_mixed_workload_with_leases),
		cmocka_unit_test(test_check_all_concurrent),
		cmocka_unit_test(test_snapshots_concurrent),
		cmocka_unit_test(test_leases_and_events),
		cmocka_unit_test(test_events_replay),
		cmocka_unit_test(test_mirror_root_position),
	};

	setvbuf(stdout, NULL, _IOLBF, 0);
	/* TEST_FILTER / TEST_SKIP: glob patterns of test names to run / skip. */
	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	if (getenv("TEST_SKIP"))
		cmocka_set_skip_filter(getenv("TEST_SKIP"));
	return cmocka_run_group_tests_name("stress_store", tests, NULL, NULL);
}
