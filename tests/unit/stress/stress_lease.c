/*
 * stress_lease.c - leases, the reaper and the event log under
 * concurrency.
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
	return read_pending(r->s, r->r, &r->ev, &r->evlen, &r->evcap);
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

const struct CMUnitTest stress_lease_tests[] = {
	cmocka_unit_test(test_leases_and_events),
};
const size_t stress_lease_ntests = sizeof(stress_lease_tests) / sizeof(stress_lease_tests[0]);
