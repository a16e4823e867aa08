/*
 * stress_race.c - races with one expected outcome, run in lock-step
 * rounds (every thread waits at a barrier, then all hit the same key at
 * once): exclusive create has one winner, unlink has one winner, a leave
 * racing admissions through the old handle leaves no child behind, a
 * shared state removed from one bucket while a link or rename adds it
 * elsewhere lives exactly as long as a link reaches it, concurrent
 * registrations in one parent are never lost (each is an entry of its
 * own, never a shared list read, changed and written back), and one
 * stage shared by threads publishes whole.
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
#include "tests/unit/stress/stress.h"

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

const struct CMUnitTest stress_race_tests[] = {
	cmocka_unit_test(test_race_create_one_winner),
	cmocka_unit_test(test_race_unlink_one_winner),
	cmocka_unit_test(test_race_leave_vs_admission),
	cmocka_unit_test(test_race_shared_state_removal),
	cmocka_unit_test(test_race_registrations_not_lost),
	cmocka_unit_test(test_race_one_stage_shared),
};
const size_t stress_race_ntests = sizeof(stress_race_tests) / sizeof(stress_race_tests[0]);
