/*
 * test_leases.c - unit tests of the store's leases (TTL), its reaper and
 * its event log, single-threaded, with a fake monotonic clock.
 *
 * What is checked is what statefs(8) (LEASES, WATCHING) and store.h
 * promise:
 *
 *  - a lease gives a deadline = now + ttl on the injected clock; renewal
 *    moves it, ttl 0 removes it; child_ttl of a parent (else default_ttl)
 *    is what a new child starts with;
 *  - a node is never visible or usable once now >= its deadline, reaped or
 *    not, and its name is free at once; the reaper (store_expire) removes
 *    due nodes oldest deadline first, within its budget, and ages out
 *    tombstones; store_next_deadline says when it should run next;
 *  - a parent expiring leaves as by rmdir (cascade, tombstone, rejoin at
 *    generation + 1); a state expiring ends whatever links reach it;
 *  - the event log: one line per transition, in the documented format,
 *    strictly increasing sequence numbers, tenant scope, overflow, the
 *    event hook and the watcher view (store_events_next).
 *
 * Every test gets a fresh store (setup) and its teardown asserts
 * store_check_all() == 0 before freeing it.  Every node pointer the store
 * hands out carries a reference that the test drops; ASan's leak checker
 * catches the ones we forget.
 */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "store/store.h"
#include "tests/unit/unit.h"
#include "tests/unit/fixture.h"

/* Helpers ------------------------------------------------------------- */

static void assert_lease(struct ctx *c, struct store_node *n, uint64_t ttl,
			 uint64_t deadline)
{
	struct store_lease l = lease(c, n);

	assert_int_equal(l.ttl_ms, ttl);
	assert_int_equal(l.deadline_ms, deadline);
}

/* Event readers ------------------------------------------------------- */

static size_t count_lines(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* Skip events until one of @op; fails if there is none. */
static void next_op(struct ctx *c, struct store_event_reader *r,
		    enum store_op op, struct store_event *ev)
{
	for (;;) {
		next_ev(c, r, ev);
		if (ev->op == op)
			return;
		store_event_free(ev);
	}
}

/* Leases: get, set, kinds ----------------------------------------------- */

static void test_lease_get_set_kinds(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a, *sp = NULL;
	struct store_lease l;
	uint64_t t0;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	assert_int_equal(store_special(c->s, t, 0, &sp), 0);

	/* Only children and parents have leases. */
	assert_int_equal(store_lease_get(c->s, root(c), &l), -EINVAL);
	assert_int_equal(store_lease_get(c->s, t, &l), -EINVAL);
	assert_int_equal(store_lease_get(c->s, sp, &l), -EINVAL);
	assert_int_equal(store_set_ttl(c->s, t, 100), -EINVAL);
	assert_int_equal(store_set_ttl(c->s, root(c), 100), -EINVAL);
	assert_int_equal(store_set_child_ttl(c->s, t, 100), -EINVAL);
	assert_int_equal(store_set_child_ttl(c->s, a, 100), -EINVAL);

	/* Without default_ttl nothing has a lease. */
	l = lease(c, a);
	assert_int_equal(l.ttl_ms, 0);
	assert_int_equal(l.deadline_ms, 0);
	l = lease(c, p);
	assert_int_equal(l.ttl_ms, 0);
	assert_int_equal(l.deadline_ms, 0);
	assert_int_equal(l.child_ttl_ms, 0);
	assert_int_equal(store_next_deadline(c->s), UINT64_MAX);

	t0 = now(c);
	set_ttl(c, a, 500);
	assert_lease(c, a, 500, t0 + 500);
	set_ttl(c, p, 2000);
	assert_lease(c, p, 2000, t0 + 2000);
	/* A new TTL restarts from now. */
	advance(c, 100);
	set_ttl(c, a, 700);
	assert_lease(c, a, 700, t0 + 800);
	assert_int_equal(store_next_deadline(c->s), t0 + 800);
	set_ttl(c, a, 5000);
	assert_int_equal(store_next_deadline(c->s), t0 + 2000);

	put(c, sp);
	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/*
 * Durations are bounded (STORE_DURATION_MAX_MS), so now + ttl never
 * wraps: a longer ttl or child_ttl, a lease on a clock past
 * STORE_CLOCK_MAX_MS and a store whose duration limits are longer are
 * refused with -EINVAL, and nothing changes.
 */
static void test_durations_bounded(void **state)
{
	static const uint64_t too_long[] = {
		STORE_DURATION_MAX_MS + 1, (uint64_t)INT64_MAX + 1,
		UINT64_MAX - 1000, UINT64_MAX,
	};
	struct ctx *c = *state;
	struct store_node *t, *p, *a, *b;
	struct store_limits l;
	struct store *s2 = NULL;
	struct store_stats s0, s1;
	uint64_t t0;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	b = cr(c, p, "b");
	t0 = now(c);
	set_ttl(c, a, 5000);
	assert_int_equal(store_set_child_ttl(c->s, p, 3000), 0);
	s0 = stats(c, NULL);
	for (size_t i = 0; i < sizeof(too_long) / sizeof(too_long[0]); i++) {
		assert_int_equal(store_set_ttl(c->s, a, too_long[i]), -EINVAL);
		assert_int_equal(store_set_ttl(c->s, p, too_long[i]), -EINVAL);
		assert_int_equal(store_set_child_ttl(c->s, p, too_long[i]),
				 -EINVAL);
	}
	assert_lease(c, a, 5000, t0 + 5000);
	assert_lease(c, p, 0, 0);
	assert_int_equal(lease(c, p).child_ttl_ms, 3000);
	s1 = stats(c, NULL);
	assert_int_equal(s1.children, s0.children);
	assert_int_equal(s1.expiries, s0.expiries);
	assert_int_equal(store_next_deadline(c->s), t0 + 5000);

	/* The longest is taken, and its deadline is exact. */
	set_ttl(c, b, STORE_DURATION_MAX_MS);
	assert_lease(c, b, STORE_DURATION_MAX_MS, t0 + STORE_DURATION_MAX_MS);
	assert_int_equal(store_set_child_ttl(c->s, p, STORE_DURATION_MAX_MS), 0);
	set_ttl(c, b, 0);
	set_ttl(c, a, 0);

	/* A clock past its range gives no new deadline; a node without a
	 * lease is still touched. */
	advance(c, STORE_CLOCK_MAX_MS + 1 - now(c));
	assert_int_equal(store_set_ttl(c->s, a, 1000), -EINVAL);
	assert_lease(c, a, 0, 0);
	assert_int_equal(store_renew(c->s, a), 0);

	/* A store is not made with longer duration limits. */
	store_limits_default(&l);
	l.default_ttl_ms = STORE_DURATION_MAX_MS + 1;
	assert_int_equal(store_new(&l, NULL, &s2), -EINVAL);
	store_limits_default(&l);
	l.tombstone_ttl_ms = UINT64_MAX;
	assert_int_equal(store_new(&l, NULL, &s2), -EINVAL);
	store_limits_default(&l);
	l.drain_window_ms = UINT64_MAX;
	assert_int_equal(store_new(&l, NULL, &s2), -EINVAL);
	assert_null(s2);

	put(c, b);
	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* Expiry order and the reaper's budget ---------------------------------- */

static void test_expire_deadline_order(void **state)
{
	struct ctx *c = *state;
	static const uint64_t ttl[5] = { 500, 100, 400, 200, 300 };
	static const char *const name[5] = { "c0", "c1", "c2", "c3", "c4" };
	static const int order[4] = { 3, 4, 2, 0 }; /* after c1 */
	struct store_node *t, *p, *n[5];
	struct store_event_reader *re;
	struct store_event ev;
	struct rd d;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	for (int i = 0; i < 5; i++) {
		n[i] = cr(c, p, name[i]);
		set_ttl(c, n[i], ttl[i]);
	}
	rd_open(c, &d, NULL);
	re = ev_open(c, NULL);
	assert_int_equal(store_expire(c->s, 10), 0);

	/* Only c1 is due. */
	advance(c, 150);
	assert_int_equal(store_expire(c->s, 10), 1);
	next_op(c, re, STORE_OP_EXPIRE, &ev);
	assert_string_equal(ev.child, "c1");
	assert_int_equal(ev.ino, store_node_ino(n[1]));
	store_event_free(&ev);
	assert_list(c, p, "c0,c2,c3,c4");

	/* All due: one at a time, oldest deadline first. */
	advance(c, 1000);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(store_expire(c->s, 1), 1);
		next_op(c, re, STORE_OP_EXPIRE, &ev);
		if (strcmp(ev.child, name[order[i]]) != 0)
			fail_msg("expiry %d: %s, expected %s", i + 2, ev.child,
				 name[order[i]]);
		assert_int_equal(ev.ino, store_node_ino(n[order[i]]));
		assert_int_equal(ev.kind, STORE_CHILD);
		store_event_free(&ev);
	}
	assert_int_equal(store_expire(c->s, 1), 0);
	assert_int_equal(store_events_next(c->s, re, &ev), 0);
	expect_events(c, &d,
		      EV("expire", "t", "p", "c1", "1", "0")
		      EV("expire", "t", "p", "c3", "1", "0")
		      EV("expire", "t", "p", "c4", "1", "0")
		      EV("expire", "t", "p", "c2", "1", "0")
		      EV("expire", "t", "p", "c0", "1", "0"));
	assert_int_equal(stats(c, NULL).expiries, 5);
	assert_int_equal(stats(c, NULL).children, 0);
	assert_list(c, p, "");
	for (int i = 0; i < 5; i++) {
		assert_int_equal(getattr_rc(c, n[i]), -ESTALE);
		put(c, n[i]);
	}
	put(c, p);
	put(c, t);
	check_ok(c);
}

static void test_expire_budget(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p;
	char name[16];
	uint64_t t0;
	struct store_stats s;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	t0 = now(c);
	for (int i = 0; i < 12; i++) {
		struct store_node *n;

		snprintf(name, sizeof name, "c%02d", i);
		n = cr(c, p, name);
		set_ttl(c, n, i < 10 ? 100 + (uint64_t)i : 100000);
		put(c, n);
	}
	advance(c, 200);
	/* Ten due, two not: the budget bounds the work of each call. */
	assert_int_equal(store_expire(c->s, 0), 0);
	assert_int_equal(store_expire(c->s, 3), 3);
	assert_int_equal(store_expire(c->s, 3), 3);
	assert_int_equal(store_expire(c->s, 3), 3);
	assert_int_equal(store_expire(c->s, 3), 1);
	assert_int_equal(store_expire(c->s, 3), 0);
	s = stats(c, NULL);
	assert_int_equal(s.expiries, 10);
	assert_int_equal(s.children, 2);
	assert_int_equal(s.links, 2);
	assert_list(c, p, "c10,c11");
	assert_int_equal(store_next_deadline(c->s), t0 + 100000);

	put(c, p);
	put(c, t);
	check_ok(c);
}

/* store_next_deadline ----------------------------------------------------- */

static void test_next_deadline(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *a, *b;
	uint64_t t0, tomb;

	assert_int_equal(store_next_deadline(c->s), UINT64_MAX);
	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	a = cr(c, p, "a");
	b = cr(c, p, "b");
	/* Nodes without leases: nothing pending. */
	assert_int_equal(store_next_deadline(c->s), UINT64_MAX);

	t0 = now(c);
	set_ttl(c, a, 500);
	assert_int_equal(store_next_deadline(c->s), t0 + 500);
	set_ttl(c, b, 300);
	assert_int_equal(store_next_deadline(c->s), t0 + 300);
	set_ttl(c, q, 200);                 /* a parent's lease counts */
	assert_int_equal(store_next_deadline(c->s), t0 + 200);
	assert_int_equal(mkdir_rc(c, t, "r"), 0);
	assert_int_equal(store_rmdir(c->s, t, "r", NULL), 0); /* a tombstone */
	tomb = t0 + c->lim.tombstone_ttl_ms;
	assert_int_equal(store_next_deadline(c->s), t0 + 200);

	/* Renewal moves the deadline. */
	advance(c, 50);
	assert_int_equal(store_renew(c->s, q), 0);
	assert_int_equal(store_next_deadline(c->s), t0 + 250);

	/* Due nodes are reaped at their deadline, so that q's tombstone
	 * is dated the same whichever time the store takes for it. */
	advance(c, 200);                    /* t0 + 250 */
	assert_int_equal(store_next_deadline(c->s), t0 + 250);
	assert_int_equal(store_expire(c->s, 1), 1); /* q */
	assert_int_equal(store_next_deadline(c->s), t0 + 300);
	advance(c, 50);                     /* t0 + 300 */
	assert_int_equal(store_next_deadline(c->s), t0 + 300);
	assert_int_equal(store_expire(c->s, 1), 1); /* b */
	assert_int_equal(store_next_deadline(c->s), t0 + 500);
	assert_int_equal(store_expire(c->s, 10), 0);

	/* A due node stays pending until the reaper has run. */
	advance(c, 250);                    /* t0 + 550 */
	assert_int_equal(store_next_deadline(c->s), t0 + 500);
	assert_int_equal(store_expire(c->s, 10), 1); /* a */
	/* Only tombstones left (r's, and q's from its expiry). */
	assert_int_equal(store_next_deadline(c->s), tomb);
	advance(c, tomb - now(c));
	assert_int_equal(store_next_deadline(c->s), tomb);
	store_expire(c->s, 10);
	assert_int_equal(store_next_deadline(c->s),
			 t0 + 250 + c->lim.tombstone_ttl_ms);
	advance(c, 250);
	assert_int_equal(store_next_deadline(c->s), now(c));
	store_expire(c->s, 10);
	assert_int_equal(store_next_deadline(c->s), UINT64_MAX);
	assert_int_equal(stats(c, NULL).tombstones, 0);

	put(c, a);
	put(c, b);
	put(c, q);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* A lease that ends early (ttl 0, unlink, leave) is no longer pending. */
static void test_next_deadline_forgets_removed_leases(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *a, *b;
	uint64_t t0;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	a = cr(c, p, "a");
	b = cr(c, p, "b");
	t0 = now(c);
	set_ttl(c, a, 500);
	set_ttl(c, b, 300);
	set_ttl(c, q, 200);
	assert_int_equal(store_next_deadline(c->s), t0 + 200);
	set_ttl(c, q, 0);
	assert_int_equal(store_next_deadline(c->s), t0 + 300);
	assert_int_equal(store_unlink(c->s, p, "b"), 0);
	assert_int_equal(store_next_deadline(c->s), t0 + 500);
	/* Tenant cleanup takes a's lease with it. */
	assert_int_equal(store_rmdir(c->s, root(c), "t", NULL), 0);
	assert_int_equal(store_next_deadline(c->s), UINT64_MAX);
	advance(c, 1000);
	assert_int_equal(store_expire(c->s, 10), 0);
	assert_int_equal(stats(c, NULL).expiries, 0);

	put(c, a);
	put(c, b);
	put(c, q);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* Renewal ----------------------------------------------------------------- */

static void test_renew(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *a, *b;
	struct store_lease l;
	uint64_t t0;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");     /* no lease */
	q = mk(c, t, "q");     /* a member's heartbeat lease */
	a = cr(c, p, "a");     /* a lease */
	b = cr(c, p, "b");     /* none */
	t0 = now(c);
	set_ttl(c, a, 1000);
	set_ttl(c, q, 1000);

	advance(c, 400);
	assert_int_equal(store_renew(c->s, a), 0);
	assert_int_equal(store_renew(c->s, q), 0);
	assert_lease(c, a, 1000, t0 + 1400);
	assert_lease(c, q, 1000, t0 + 1400);
	assert_int_equal(store_next_deadline(c->s), t0 + 1400);

	/* Without a lease: 0, and nothing changes. */
	assert_int_equal(store_renew(c->s, b), 0);
	assert_int_equal(store_renew(c->s, p), 0);
	assert_lease(c, b, 0, 0);
	l = lease(c, p);
	assert_int_equal(l.ttl_ms, 0);
	assert_int_equal(l.deadline_ms, 0);
	assert_int_equal(l.child_ttl_ms, 0);
	assert_int_equal(store_next_deadline(c->s), t0 + 1400);

	advance(c, 999);
	assert_int_equal(lookup_rc(c, p, "a"), 0);
	assert_int_equal(lookup_rc(c, t, "q"), 0);
	assert_int_equal(store_expire(c->s, 10), 0);
	advance(c, 1);
	assert_int_equal(lookup_rc(c, p, "a"), -ENOENT);
	assert_int_equal(lookup_rc(c, t, "q"), -ENOENT);
	/* (The lookups may have reaped them already.) */
	store_expire(c->s, 10);
	assert_int_equal(stats(c, NULL).expiries, 2);
	/* b and p never expire. */
	advance(c, 1000000);
	assert_int_equal(store_expire(c->s, 10), 0);
	assert_list(c, p, "b");
	assert_list(c, t, "p");

	put(c, a);
	put(c, b);
	put(c, q);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* A dead or expired node cannot be renewed: a stale holder never extends
 * the new holder's lease. */
static void test_renew_stale(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *r, *a, *b, *x, *x2;
	struct store_stats s;
	uint64_t t1;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");

	/* Unlinked. */
	a = cr(c, p, "a");
	set_ttl(c, a, 1000);
	assert_int_equal(store_unlink(c->s, p, "a"), 0);
	assert_int_equal(store_renew(c->s, a), -ESTALE);
	assert_int_equal(store_set_ttl(c->s, a, 1000), -ESTALE);

	/* Expired, before and after the reaper. */
	b = cr(c, p, "b");
	set_ttl(c, b, 100);
	r = mk(c, t, "r");
	set_ttl(c, r, 100);
	advance(c, 100);
	assert_int_equal(store_renew(c->s, b), -ESTALE);
	assert_int_equal(store_set_ttl(c->s, b, 5000), -ESTALE);
	assert_int_equal(store_renew(c->s, r), -ESTALE);
	assert_int_equal(store_set_ttl(c->s, r, 5000), -ESTALE);
	assert_int_equal(lookup_rc(c, p, "b"), -ENOENT);
	assert_int_equal(lookup_rc(c, t, "r"), -ENOENT);
	store_expire(c->s, 10);
	assert_int_equal(store_renew(c->s, b), -ESTALE);
	assert_int_equal(store_renew(c->s, r), -ESTALE);
	s = stats(c, NULL);
	assert_int_equal(s.expiries, 2);

	/* An earlier incarnation of the same name. */
	x = cr(c, p, "x");
	set_ttl(c, x, 1000);
	assert_int_equal(store_unlink(c->s, p, "x"), 0);
	advance(c, 10);
	t1 = now(c);
	x2 = cr(c, p, "x");
	set_ttl(c, x2, 1000);
	advance(c, 500);
	assert_int_equal(store_renew(c->s, x), -ESTALE);
	assert_lease(c, x2, 1000, t1 + 1000);

	/* An old parent handle after leave. */
	q = mk(c, t, "q");
	set_ttl(c, q, 1000);
	assert_int_equal(store_rmdir(c->s, t, "q", NULL), 0);
	assert_int_equal(store_renew(c->s, q), -ESTALE);
	assert_int_equal(store_set_ttl(c->s, q, 1000), -ESTALE);
	put(c, q);
	q = mk(c, t, "q");
	assert_lease(c, q, 0, 0);

	put(c, q);
	put(c, x);
	put(c, x2);
	put(c, r);
	put(c, b);
	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* TTL 0, child_ttl, default_ttl ------------------------------------------ */

static void test_set_ttl_zero_removes_lease(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t, *p, *a;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	set_ttl(c, a, 500);
	set_ttl(c, p, 500);
	advance(c, 100);
	set_ttl(c, a, 0);
	set_ttl(c, p, 0);
	assert_lease(c, a, 0, 0);
	assert_lease(c, p, 0, 0);
	assert_int_equal(store_next_deadline(c->s), UINT64_MAX);
	advance(c, 100000);
	assert_int_equal(store_expire(c->s, 10), 0);
	assert_int_equal(lookup_rc(c, t, "p"), 0);
	assert_int_equal(lookup_rc(c, p, "a"), 0);
	assert_int_equal(stats(c, NULL).expiries, 0);
	put(c, a);
	put(c, p);
	put(c, t);

	/* Also a lease a child started with from default_ttl. */
	store_limits_default(&l);
	l.default_ttl_ms = 1000;
	reopen(c, &l);
	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	assert_lease(c, a, 1000, now(c) + 1000);
	set_ttl(c, a, 0);
	assert_lease(c, a, 0, 0);
	advance(c, 5000);
	assert_int_equal(store_expire(c->s, 10), 0);
	assert_int_equal(lookup_rc(c, p, "a"), 0);
	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

static void test_child_ttl_and_default_ttl(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t, *p, *p1, *p2, *a, *b, *x, *y, *z;
	struct store_lease pl;
	uint64_t t0;

	/* default_ttl 0: children start without a lease ... */
	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	assert_lease(c, a, 0, 0);
	/* ... unless their parent has a child_ttl. */
	assert_int_equal(store_set_child_ttl(c->s, p, 250), 0);
	pl = lease(c, p);
	assert_int_equal(pl.child_ttl_ms, 250);
	assert_int_equal(pl.ttl_ms, 0);      /* not the parent's own lease */
	assert_int_equal(pl.deadline_ms, 0);
	b = cr(c, p, "b");
	assert_lease(c, b, 250, now(c) + 250);
	assert_lease(c, a, 0, 0);            /* only future children */
	put(c, a);
	put(c, b);
	put(c, p);
	put(c, t);

	store_limits_default(&l);
	l.default_ttl_ms = 1000;
	reopen(c, &l);
	t = mk(c, root(c), "t");
	p1 = mk(c, t, "p1");
	p2 = mk(c, t, "p2");
	assert_int_equal(store_set_child_ttl(c->s, p1, 300), 0);
	t0 = now(c);
	x = cr(c, p1, "x");                  /* child_ttl wins */
	y = cr(c, p2, "y");                  /* default_ttl */
	assert_lease(c, x, 300, t0 + 300);
	assert_lease(c, y, 1000, t0 + 1000);
	assert_lease(c, p1, 0, 0);
	assert_int_equal(store_set_child_ttl(c->s, p1, 0), 0);
	assert_int_equal(lease(c, p1).child_ttl_ms, 0);
	z = cr(c, p1, "z");                  /* back to default_ttl */
	assert_lease(c, z, 1000, t0 + 1000);
	assert_lease(c, x, 300, t0 + 300);   /* unchanged */

	advance(c, 300);
	assert_int_equal(lookup_rc(c, p1, "x"), -ENOENT);
	assert_int_equal(lookup_rc(c, p1, "z"), 0);
	assert_int_equal(lookup_rc(c, p2, "y"), 0);
	advance(c, 700);
	assert_int_equal(lookup_rc(c, p1, "z"), -ENOENT);
	assert_int_equal(lookup_rc(c, p2, "y"), -ENOENT);
	store_expire(c->s, 10);
	assert_int_equal(stats(c, NULL).expiries, 3);
	assert_int_equal(stats(c, NULL).children, 0);

	put(c, x);
	put(c, y);
	put(c, z);
	put(c, p1);
	put(c, p2);
	put(c, t);
	check_ok(c);
}

/* Parents: expiry is a leave ---------------------------------------------- */

static void test_parent_expiry_cascades(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *a, *b, *n;
	struct store_stats s0, s1;
	struct store_attr at;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	put(c, p);
	assert_int_equal(store_rmdir(c->s, t, "p", NULL), 0);
	p = mk(c, t, "p");
	assert_int_equal(gen(c, p), 2);
	q = mk(c, t, "q");
	a = cr(c, p, "a");                   /* shared with q */
	b = cr(c, p, "b");                   /* only in p, own lease */
	publish(c, a, STORE_STAGE_REPLACE, "aa");
	publish(c, b, STORE_STAGE_REPLACE, "bbb");
	set_ttl(c, b, 100000);
	assert_int_equal(store_link(c->s, a, q, "a2"), 0);
	s0 = stats(c, NULL);
	assert_int_equal(s0.tombstones, 0);

	set_ttl(c, p, 1000);
	advance(c, 1000);
	assert_int_equal(lookup_rc(c, t, "p"), -ENOENT);
	assert_list(c, t, "q");
	assert_int_equal(getattr_rc(c, p), -ESTALE);

	store_expire(c->s, 16);
	s1 = stats(c, NULL);
	assert_int_equal(s1.parents, 1);
	assert_int_equal(s1.children, 1);    /* a's state lives on in q */
	assert_int_equal(s1.links, 1);
	assert_int_equal(s1.bytes, 2);
	assert_int_equal(s1.tombstones, 1);
	assert_int_equal(s1.leaves, s0.leaves + 1);
	assert_int_equal(s1.expiries, s0.expiries + 1);
	assert_int_equal(getattr_rc(c, b), -ESTALE);
	assert_int_equal(store_getattr(c->s, a, &at), 0);
	assert_int_equal(at.nlink, 1);
	assert_int_equal(lookup_rc(c, q, "a2"), 0);
	assert_int_equal(store_expire(c->s, 16), 0);

	/* The tombstone kept the generation: the rejoin is the next one. */
	n = mk(c, t, "p");
	assert_int_equal(gen(c, n), 3);
	assert_list(c, n, "");
	assert_int_equal(stats(c, NULL).tombstones, 0);
	assert_lease(c, n, 0, 0);
	/* b's lease went with it; the tombstone was cleared by the rejoin. */
	assert_int_equal(store_next_deadline(c->s), UINT64_MAX);

	put(c, n);
	put(c, a);
	put(c, b);
	put(c, q);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* Past its deadline a parent is gone for everyone, reaped or not: its
 * children cannot be reached or used, and the name is free for a join. */
static void test_parent_expired_before_reap(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *x, *n = NULL, *p2;
	struct store_stage *st = NULL, *st2 = NULL;
	struct store_stats s;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	x = cr(c, p, "x");
	publish(c, x, STORE_STAGE_REPLACE, "v");
	set_ttl(c, p, 500);
	assert_int_equal(store_stage_open(c->s, x, STORE_STAGE_REPLACE, &st),
			 0);
	advance(c, 499);
	assert_int_equal(lookup_rc(c, t, "p"), 0);
	assert_int_equal(lookup_rc(c, p, "x"), 0);
	advance(c, 1);

	assert_int_equal(lookup_rc(c, t, "p"), -ENOENT);
	assert_list(c, t, "");
	assert_int_equal(getattr_rc(c, p), -ESTALE);
	assert_int_equal(store_renew(c->s, p), -ESTALE);
	assert_int_equal(store_rmdir(c->s, t, "p", NULL), -ENOENT);
	/* Nothing gets in or out through the old handle. */
	assert_int_equal(create_rc(c, p, "y", true), -ESTALE);
	assert_int_equal(store_lookup(c->s, p, "x", &n), -ESTALE);
	assert_int_equal(getattr_rc(c, x), -ESTALE);
	assert_int_equal(store_stage_open(c->s, x, STORE_STAGE_READ, &st2),
			 -ESTALE);
	assert_int_equal(store_stage_write(st, "w", 1, 0), -ESTALE);
	store_stage_close(st);

	/* The name is free: a join is the next generation. */
	p2 = mk(c, t, "p");
	assert_int_equal(gen(c, p2), 2);
	assert_list(c, p2, "");
	s = stats(c, NULL);
	assert_int_equal(s.expiries, 1);
	assert_int_equal(s.leaves, 1);
	assert_int_equal(s.parents, 1);
	assert_int_equal(s.children, 0);
	assert_int_equal(s.bytes, 0);
	assert_int_equal(s.tombstones, 0);
	assert_int_equal(store_expire(c->s, 16), 0);
	assert_int_equal(stats(c, NULL).expiries, 1);

	put(c, p2);
	put(c, x);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* Children: a shared state ------------------------------------------------- */

static void test_shared_state_expiry_ends_all_links(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p1, *p2, *a, *d;
	struct store_stats s;
	struct store_lease la, ld;
	struct rd rd;
	char *ev, *line;
	int nexp = 0;

	t = mk(c, root(c), "t");
	p1 = mk(c, t, "p1");
	p2 = mk(c, t, "p2");
	a = cr(c, p1, "c");
	assert_int_equal(store_link(c->s, a, p2, "d"), 0);
	d = lk(c, p2, "d");
	set_ttl(c, d, 500);                  /* through either link */
	la = lease(c, a);
	ld = lease(c, d);
	assert_int_equal(la.ttl_ms, 500);
	assert_int_equal(la.deadline_ms, ld.deadline_ms);
	rd_open(c, &rd, NULL);

	advance(c, 500);
	assert_int_equal(lookup_rc(c, p1, "c"), -ENOENT);
	assert_int_equal(lookup_rc(c, p2, "d"), -ENOENT);
	assert_list(c, p1, "");
	assert_list(c, p2, "");
	assert_int_equal(getattr_rc(c, a), -ESTALE);
	store_expire(c->s, 16);
	s = stats(c, NULL);
	assert_int_equal(s.children, 0);
	assert_int_equal(s.links, 0);
	assert_int_equal(s.expiries, 1);
	assert_int_equal(store_expire(c->s, 16), 0);

	/* One state expired; its lines name the links it had. */
	ev = rd_take(c, &rd);
	for (line = ev; *line; line = strchr(line, '\n') + 1) {
		if (strncmp(line, EV("expire", "t", "p1", "c", "1", "0"),
			    strlen(EV("expire", "t", "p1", "c", "1", "0"))) &&
		    strncmp(line, EV("expire", "t", "p2", "d", "1", "0"),
			    strlen(EV("expire", "t", "p2", "d", "1", "0"))))
			fail_msg("unexpected line after a shared expiry: %s",
				 line);
		nexp++;
	}
	print_message("# shared state expiry: %d expire line(s)\n", nexp);
	assert_true(nexp >= 1 && nexp <= 2);
	free(ev);

	/* Both names are free. */
	assert_int_equal(create_rc(c, p1, "c", true), 0);
	assert_int_equal(create_rc(c, p2, "d", true), 0);

	put(c, a);
	put(c, d);
	put(c, p1);
	put(c, p2);
	put(c, t);
	check_ok(c);
}

/* Visibility before reaping -------------------------------------------- */

static void test_child_invisible_at_deadline_before_reap(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a, *sib, *a2;
	struct store_stage *st = NULL, *st2 = NULL;
	struct store_stats s0, s;
	uint64_t t0;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	sib = cr(c, p, "sib");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "old");
	t0 = now(c);
	set_ttl(c, a, 1000);
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &st),
			 0);
	s0 = stats(c, NULL);

	advance(c, 999);
	assert_int_equal(lookup_rc(c, p, "a"), 0);
	assert_list(c, p, "a,sib");
	assert_int_equal(getattr_rc(c, a), 0);

	/* now == deadline: gone, and no store_expire has run. */
	advance(c, 1);
	assert_int_equal(now(c), t0 + 1000);
	assert_int_equal(lookup_rc(c, p, "a"), -ENOENT);
	assert_list(c, p, "sib");
	assert_int_equal(getattr_rc(c, a), -ESTALE);
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_READ, &st2),
			 -ESTALE);
	assert_int_equal(store_stage_write(st, "new", 3, 0), -ESTALE);
	assert_int_equal(store_stage_publish(st), -ESTALE);
	store_stage_close(st);
	assert_int_equal(store_renew(c->s, a), -ESTALE);
	assert_int_equal(store_unlink(c->s, p, "a"), -ENOENT);
	assert_int_equal(lookup_rc(c, p, "sib"), 0);

	/* The name is free. */
	{
		struct store_node *n = NULL;
		bool created = false;

		assert_int_equal(store_create(c->s, p, "a", &FOWN, true, &n,
					      &created), 0);
		assert_true(created);
		a2 = n;
	}
	assert_true(store_node_ino(a2) != store_node_ino(a));
	assert_int_equal(getattr_rc(c, a2), 0);
	assert_list(c, p, "a,sib");
	s = stats(c, NULL);
	assert_int_equal(s.expiries, s0.expiries + 1);
	assert_int_equal(s.children, 2);
	assert_int_equal(s.links, 2);
	assert_int_equal(s.bytes, 0);
	/* The old one was dealt with once: the reaper finds nothing. */
	assert_int_equal(store_expire(c->s, 16), 0);
	assert_int_equal(stats(c, NULL).expiries, s0.expiries + 1);
	assert_int_equal(lookup_rc(c, p, "a"), 0);

	put(c, a2);
	put(c, a);
	put(c, sib);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* Time ---------------------------------------------------------------- */

/*
 * Deadlines follow the injected clock exactly, and nothing else: with the
 * fake clock standing still, 50 ms of real time do not expire a 10 ms
 * lease, and the deadline is exactly fake now + ttl.
 */
static void test_deadlines_follow_injected_clock(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct timespec ts = { 0, 50 * 1000 * 1000 };
	uint64_t t0;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	t0 = now(c);
	set_ttl(c, a, 10);
	set_ttl(c, p, 10);
	assert_int_equal(store_now_ms(c->s), t0);
	while (nanosleep(&ts, &ts) != 0)
		;
	assert_int_equal(store_now_ms(c->s), t0);
	assert_int_equal(lookup_rc(c, t, "p"), 0);
	assert_int_equal(lookup_rc(c, p, "a"), 0);
	assert_int_equal(store_expire(c->s, 10), 0);
	assert_int_equal(store_next_deadline(c->s), t0 + 10);
	assert_lease(c, a, 10, t0 + 10);
	assert_lease(c, p, 10, t0 + 10);
	assert_int_equal(stats(c, NULL).expiries, 0);

	advance(c, 9);
	assert_int_equal(lookup_rc(c, p, "a"), 0);
	assert_int_equal(store_expire(c->s, 10), 0);
	advance(c, 1);
	assert_int_equal(lookup_rc(c, t, "p"), -ENOENT);
	store_expire(c->s, 10);
	assert_int_equal(stats(c, NULL).expiries >= 1, 1);
	assert_int_equal(stats(c, NULL).parents, 0);
	assert_int_equal(stats(c, NULL).children, 0);

	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* Tombstones age out through the reaper. */
static void test_tombstone_aging_via_expire(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t, *q;
	uint64_t t0;

	store_limits_default(&l);
	l.tombstone_ttl_ms = 1000;
	reopen(c, &l);
	t = mk(c, root(c), "t");
	assert_int_equal(mkdir_rc(c, t, "p"), 0);
	q = mk(c, t, "q");
	t0 = now(c);
	assert_int_equal(store_rmdir(c->s, t, "p", NULL), 0);
	assert_int_equal(store_next_deadline(c->s), t0 + 1000);
	set_ttl(c, q, 200);
	assert_int_equal(store_next_deadline(c->s), t0 + 200);

	advance(c, 200);
	assert_int_equal(store_expire(c->s, 10), 1);  /* q leaves */
	assert_int_equal(stats(c, NULL).tombstones, 2);
	assert_int_equal(store_next_deadline(c->s), t0 + 1000);

	advance(c, 800);                             /* p's tombstone due */
	assert_int_equal(store_next_deadline(c->s), t0 + 1000);
	store_expire(c->s, 10);
	assert_int_equal(store_next_deadline(c->s), t0 + 1200);
	assert_int_equal(stats(c, NULL).tombstones, 1);

	advance(c, 200);                             /* q's */
	store_expire(c->s, 10);
	assert_int_equal(store_next_deadline(c->s), UINT64_MAX);
	assert_int_equal(stats(c, NULL).tombstones, 0);
	assert_int_equal(stats(c, t).tombstones, 0);

	/* Aged out: the next joins start over at generation 1. */
	{
		struct store_node *n = mk(c, t, "p");

		assert_int_equal(gen(c, n), 1);
		put(c, n);
		n = mk(c, t, "q");
		assert_int_equal(gen(c, n), 1);
		put(c, n);
	}
	put(c, q);
	put(c, t);
	check_ok(c);
}

/* Events: the lines ------------------------------------------------------- */

static void test_events_lines(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *a, *k, *g, *n = NULL;
	struct store_stage *st = NULL;
	struct store_attr in, out;
	struct rd d;
	bool created = true;

	rd_open(c, &d, NULL);
	assert_false(store_events_pending(c->s, d.r));
	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	a = cr(c, p, "a");
	expect_events(c, &d,
		      EV("join", "t", "-", "-", "-", "-")
		      EV("join", "t", "p", "-", "1", "-")
		      EV("join", "t", "q", "-", "1", "-")
		      EV("create", "t", "p", "a", "1", "0"));

	/* Failed operations, and opening an existing child: no line. */
	assert_int_equal(create_rc(c, p, "a", true), -EEXIST);
	assert_int_equal(store_create(c->s, p, "a", &FOWN, false, &n,
				      &created), 0);
	assert_false(created);
	put(c, n);
	assert_int_equal(mkdir_rc(c, t, "p"), -EEXIST);
	assert_int_equal(mkdir_rc(c, root(c), "t"), -EEXIST);
	assert_int_equal(store_unlink(c->s, p, "zz"), -ENOENT);
	assert_int_equal(store_rmdir(c->s, t, "zz", NULL), -ENOENT);
	assert_int_equal(store_rmdir(c->s, root(c), "zz", NULL), -ENOENT);
	assert_int_equal(store_link(c->s, a, p, "a"), -EEXIST);
	assert_int_equal(store_rename(c->s, p, "zz", q, "zz", 0), -ENOENT);
	assert_false(store_events_pending(c->s, d.r));
	expect_events(c, &d, "");

	/* Publications. */
	publish(c, a, STORE_STAGE_REPLACE, "xy");
	publish(c, a, STORE_STAGE_APPEND, "z");
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_CAS, &st), 0);
	publish(c, a, STORE_STAGE_REPLACE, "w");
	assert_int_equal(store_stage_write(st, "Q", 1, 0), 1);
	assert_int_equal(store_stage_publish(st), -EAGAIN); /* no line */
	store_stage_close(st);
	st = NULL;
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_APPEND, &st),
			 0);
	store_stage_close(st);                              /* no line */
	memset(&in, 0, sizeof in);
	in.size = 1;
	assert_int_equal(store_setattr(c->s, a, STORE_SET_SIZE, &in, &out), 0);
	expect_events(c, &d,
		      EV("write", "t", "p", "a", "1", "1")
		      EV("write", "t", "p", "a", "1", "2")
		      EV("write", "t", "p", "a", "1", "3")
		      EV("write", "t", "p", "a", "1", "4"));

	/* Links and renames name their destination, then their source. */
	assert_int_equal(store_link(c->s, a, q, "a2"), 0);
	k = cr(c, p, "k");
	assert_int_equal(store_rename(c->s, p, "k", q, "k2", 0), 0);
	assert_int_equal(store_unlink(c->s, q, "a2"), 0);
	expect_events(c, &d,
		      EVF("link", "t", "q", "a2", "1", "4", "p", "a")
		      EV("create", "t", "p", "k", "1", "0")
		      EVF("rename", "t", "q", "k2", "1", "0", "p", "k")
		      EV("unlink", "t", "q", "a2", "1", "4"));

	/* Leave (with a child: one line), rejoin, departs. */
	assert_int_equal(store_rmdir(c->s, t, "q", NULL), 0);
	put(c, q);
	q = mk(c, t, "q");
	assert_int_equal(store_depart(c->s, t, "ghost", NULL), 0);
	assert_int_equal(store_depart(c->s, t, "q", NULL), 0);
	g = mk(c, t, "ghost");
	assert_int_equal(store_unlink(c->s, p, "a"), 0);
	expect_events(c, &d,
		      EV("leave", "t", "q", "-", "1", "-")
		      EV("join", "t", "q", "-", "2", "-")
		      EV("depart", "t", "ghost", "-", "0", "-")
		      EV("depart", "t", "q", "-", "2", "-")
		      EV("join", "t", "ghost", "-", "1", "-")
		      EV("unlink", "t", "p", "a", "1", "4"));

	/* Tenant cleanup: one line for everything. */
	assert_int_equal(store_rmdir(c->s, root(c), "t", NULL), 0);
	expect_events(c, &d, EV("cleanup", "t", "-", "-", "-", "-"));
	assert_false(store_events_pending(c->s, d.r));

	put(c, g);
	put(c, k);
	put(c, a);
	put(c, q);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/*
 * Links, renames and exchanges name both sides, so a replay of the lines
 * rebuilds the tree: the destination in the usual fields (with its
 * parent's generation and the version of the state it now reaches), the
 * source in two more.  A replaced destination is unlinked first, on its
 * own line.  Refused and no-op renames append nothing.
 */
static void test_events_rename_lines(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *a, *b, *gone, *x, *y, *z;
	struct rd d;

	t = mk(c, root(c), "t");
	a = mk(c, t, "A");
	gone = mk(c, t, "B");
	assert_int_equal(store_rmdir(c->s, t, "B", NULL), 0);
	put(c, gone);
	b = mk(c, t, "B");                           /* generation 2 */
	x = cr(c, a, "x");
	y = cr(c, a, "y");
	z = cr(c, b, "z");
	publish(c, x, STORE_STAGE_REPLACE, "x1");
	publish(c, x, STORE_STAGE_REPLACE, "x2");    /* version 2 */
	publish(c, y, STORE_STAGE_REPLACE, "y1");    /* version 1 */
	publish(c, z, STORE_STAGE_REPLACE, "z1");
	rd_open_strict(c, &d, NULL);

	assert_int_equal(store_rename(c->s, a, "x", b, "x2", 0), 0);
	assert_int_equal(store_rename(c->s, a, "y", b, "z", 0), 0);
	expect_events(c, &d,
		      EVF("rename", "t", "B", "x2", "2", "2", "A", "x")
		      EV("unlink", "t", "B", "z", "2", "1")
		      EVF("rename", "t", "B", "z", "2", "1", "A", "y"));

	assert_int_equal(store_link(c->s, x, a, "lnk"), 0);
	assert_int_equal(store_rename(c->s, a, "lnk", b, "z",
				      STORE_RENAME_EXCHANGE), 0);
	expect_events(c, &d,
		      EVF("link", "t", "A", "lnk", "1", "2", "B", "x2")
		      EVF("exchange", "t", "B", "z", "2", "2", "A", "lnk"));
	assert_int_equal(ino_of(c, b, "z"), store_node_ino(x));
	assert_int_equal(ino_of(c, a, "lnk"), store_node_ino(y));

	/* Refused, and between two names of one state: nothing. */
	assert_int_equal(store_rename(c->s, b, "x2", a, "lnk",
				      STORE_RENAME_NOREPLACE), -EEXIST);
	assert_int_equal(store_rename(c->s, b, "x2", b, "z", 0), 0);
	assert_int_equal(store_rename(c->s, a, "none", b, "z",
				      STORE_RENAME_EXCHANGE), -ENOENT);
	assert_false(store_events_pending(c->s, d.r));
	expect_events(c, &d, "");

	/* Two names of one state trade it: the line, and nothing moves. */
	assert_int_equal(store_rename(c->s, b, "x2", b, "z",
				      STORE_RENAME_EXCHANGE), 0);
	expect_events(c, &d,
		      EVF("exchange", "t", "B", "z", "2", "2", "B", "x2"));
	assert_int_equal(ino_of(c, b, "z"), store_node_ino(x));
	assert_int_equal(ino_of(c, b, "x2"), store_node_ino(x));

	put(c, z);
	put(c, y);
	put(c, x);
	put(c, b);
	put(c, a);
	put(c, t);
	check_ok(c);
}

static void test_events_expire_lines(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *r, *a, *b;
	struct rd d;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	put(c, p);
	assert_int_equal(store_rmdir(c->s, t, "p", NULL), 0);
	p = mk(c, t, "p");                   /* generation 2 */
	q = mk(c, t, "q");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "x");
	set_ttl(c, a, 100);
	set_ttl(c, q, 150);

	/* Through the reaper. */
	rd_open(c, &d, NULL);
	advance(c, 150);
	assert_int_equal(store_expire(c->s, 10), 2);
	expect_events(c, &d,
		      EV("expire", "t", "p", "a", "2", "1")
		      EV("expire", "t", "q", "-", "1", "-"));

	/* Without the reaper: a new admission of the name first ends the
	 * expired node, in that order. */
	b = cr(c, p, "b");
	set_ttl(c, b, 100);
	r = mk(c, t, "r");
	set_ttl(c, r, 100);
	expect_events(c, &d,
		      EV("create", "t", "p", "b", "2", "0")
		      EV("join", "t", "r", "-", "1", "-"));
	advance(c, 100);
	assert_int_equal(create_rc(c, p, "b", true), 0);
	assert_int_equal(mkdir_rc(c, t, "r"), 0);
	expect_events(c, &d,
		      EV("expire", "t", "p", "b", "2", "0")
		      EV("create", "t", "p", "b", "2", "0")
		      EV("expire", "t", "r", "-", "1", "-")
		      EV("join", "t", "r", "-", "2", "-"));
	/* Each expiry has exactly one line. */
	assert_int_equal(store_expire(c->s, 10), 0);
	expect_events(c, &d, "");
	assert_int_equal(stats(c, NULL).expiries, 4);

	put(c, b);
	put(c, a);
	put(c, r);
	put(c, q);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* A tenant's reader sees its tenant's lines, with the store's numbers. */
static void test_events_tenant_scope(void **state)
{
	struct ctx *c = *state;
	struct store_node *t1, *t2, *p1, *p2, *a1, *a2;
	struct rd all, r1, r2;
	char *raw_all, *raw_1, *want, *line, *w;

	t1 = mk(c, root(c), "t1");
	t2 = mk(c, root(c), "t2");
	rd_open(c, &all, NULL);
	rd_open(c, &r1, t1);
	rd_open(c, &r2, t2);
	p1 = mk(c, t1, "p");
	p2 = mk(c, t2, "p");
	a1 = cr(c, p1, "a");
	a2 = cr(c, p2, "a");
	publish(c, a2, STORE_STAGE_REPLACE, "2");
	publish(c, a1, STORE_STAGE_REPLACE, "1");
	assert_int_equal(store_unlink(c->s, p2, "a"), 0);
	assert_int_equal(store_depart(c->s, t2, "x", NULL), 0);
	assert_int_equal(store_rmdir(c->s, root(c), "t2", NULL), 0);
	assert_int_equal(mkdir_rc(c, root(c), "t3"), 0);
	assert_int_equal(store_rmdir(c->s, t1, "p", NULL), 0);

	raw_all = rd_raw(c, &all, NULL);
	raw_1 = rd_raw(c, &r1, NULL);
	/* r1 = the lines of all whose tenant is t1, same numbers. */
	want = malloc(strlen(raw_all) + 1);
	assert_non_null(want);
	w = want;
	for (line = raw_all; *line;) {
		char *nl = strchr(line, '\n');
		char *tab = strchr(line, '\t');

		assert_non_null(nl);
		assert_non_null(tab);
		tab = strchr(tab + 1, '\t');
		assert_non_null(tab);
		if (strncmp(tab, "\tt1\t", 4) == 0) {
			memcpy(w, line, (size_t)(nl + 1 - line));
			w += nl + 1 - line;
		}
		line = nl + 1;
	}
	*w = '\0';
	assert_int_equal(count_lines(raw_all), 11);
	assert_string_equal(raw_1, want);
	free(raw_all);
	free(raw_1);
	free(want);

	expect_events(c, &r2,
		      EV("join", "t2", "p", "-", "1", "-")
		      EV("create", "t2", "p", "a", "1", "0")
		      EV("write", "t2", "p", "a", "1", "1")
		      EV("unlink", "t2", "p", "a", "1", "1")
		      EV("depart", "t2", "x", "-", "0", "-")
		      EV("cleanup", "t2", "-", "-", "-", "-"));
	assert_int_equal(store_rmdir(c->s, root(c), "t1", NULL), 0);
	expect_events(c, &r1, EV("cleanup", "t1", "-", "-", "-", "-"));
	expect_events(c, &r2, "");

	put(c, a1);
	put(c, a2);
	put(c, p1);
	put(c, p2);
	put(c, t1);
	put(c, t2);
	check_ok(c);
}

static void test_events_open_at_present_and_pending(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *u, *p;
	struct rd d, dt;
	char buf[256];

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	p = mk(c, t, "p");
	/* A reader starts at the present: nothing of the past. */
	rd_open(c, &d, NULL);
	assert_false(store_events_pending(c->s, d.r));
	assert_int_equal(store_events_read(c->s, d.r, buf, sizeof buf), 0);
	assert_int_equal(create_rc(c, p, "a", true), 0);
	assert_true(store_events_pending(c->s, d.r));
	expect_events(c, &d, EV("create", "t", "p", "a", "1", "0"));
	assert_false(store_events_pending(c->s, d.r));
	assert_int_equal(store_events_read(c->s, d.r, buf, sizeof buf), 0);

	/* Two readers are independent. */
	rd_open(c, &dt, t);
	assert_int_equal(store_unlink(c->s, p, "a"), 0);
	assert_true(store_events_pending(c->s, d.r));
	assert_true(store_events_pending(c->s, dt.r));
	expect_events(c, &dt, EV("unlink", "t", "p", "a", "1", "0"));
	assert_true(store_events_pending(c->s, d.r));
	expect_events(c, &d, EV("unlink", "t", "p", "a", "1", "0"));

	/* A tenant's reader has nothing to read after another tenant's
	 * transition. */
	assert_int_equal(mkdir_rc(c, u, "q"), 0);
	assert_true(store_events_pending(c->s, d.r));
	assert_false(store_events_pending(c->s, dt.r));
	assert_int_equal(store_events_read(c->s, dt.r, buf, sizeof buf), 0);
	expect_events(c, &d, EV("join", "u", "q", "-", "1", "-"));

	put(c, p);
	put(c, u);
	put(c, t);
	check_ok(c);
}

/* Reads copy whole lines only, and a short buffer loses nothing. */
static void test_events_read_whole_lines(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p;
	struct rd d;
	char small[40], *rest, all[512] = "";
	size_t got;

	rd_open(c, &d, NULL);
	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	assert_int_equal(create_rc(c, p, "abc", true), 0);
	for (int i = 0; i < 2; i++) {
		got = store_events_read(c->s, d.r, small, sizeof small - 1);
		assert_true(got <= sizeof small - 1);
		assert_true(got > 0);
		assert_int_equal(small[got - 1], '\n');
		small[got] = '\0';
		strcat(all, small);
	}
	/* 5 bytes hold no line: nothing copied, nothing lost. */
	got = store_events_read(c->s, d.r, small, 5);
	if (got) {
		assert_true(got <= 5);
		assert_int_equal(small[got - 1], '\n');
		small[got] = '\0';
		strcat(all, small);
	}
	rest = rd_raw(c, &d, NULL);
	strcat(all, rest);
	free(rest);
	assert_int_equal(count_lines(all), 3);
	assert_non_null(strstr(all, "\tjoin\tt\t-\t-\t-\t-\n"));
	assert_non_null(strstr(all, "\tjoin\tt\tp\t-\t1\t-\n"));
	assert_non_null(strstr(all, "\tcreate\tt\tp\tabc\t1\t0\n"));

	put(c, p);
	put(c, t);
	check_ok(c);
}

/*
 * A reader that falls more than STORE_EVENT_WINDOW lines behind gets one
 * "overflow" line and then later lines: a contiguous run ending at the
 * newest, as a reader that kept up saw them, then every new line.
 */
static void test_events_overflow(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct rd slow, fast;
	char *truth = NULL, *got, *after, *chunk;
	size_t tlen = 0, glen, alen, nafter;
	const int n = STORE_EVENT_WINDOW + 500;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	rd_open(c, &slow, NULL);
	rd_open(c, &fast, NULL);
	truth = calloc(1, 1);
	assert_non_null(truth);
	for (int i = 0; i < n; i++) {
		publish(c, a, STORE_STAGE_REPLACE, "x");
		if (i % 256 == 255 || i == n - 1) {
			size_t l;

			chunk = rd_raw(c, &fast, &l);
			assert_false(fast.overflows);
			truth = realloc(truth, tlen + l + 1);
			assert_non_null(truth);
			memcpy(truth + tlen, chunk, l + 1);
			tlen += l;
			free(chunk);
		}
	}
	assert_int_equal(count_lines(truth), n);
	assert_true(store_events_pending(c->s, slow.r));

	got = rd_raw(c, &slow, &glen);
	if (strncmp(got, "overflow\n", 9) != 0)
		fail_msg("a reader %d lines behind got no overflow line first: "
			 "%.60s", n, got);
	after = got + 9;
	alen = glen - 9;
	assert_null(strstr(after, "overflow\n"));
	nafter = count_lines(after);
	print_message("# overflow: %zu lines after the overflow line\n",
		      nafter);
	assert_true(nafter >= 1);
	assert_true(nafter <= STORE_EVENT_WINDOW);
	/* A suffix of what the reader that kept up saw. */
	assert_true(alen <= tlen);
	assert_int_equal(tlen == alen || truth[tlen - alen - 1] == '\n', 1);
	assert_memory_equal(truth + tlen - alen, after, alen);
	free(got);

	/* Then it continues with every new line, once. */
	publish(c, a, STORE_STAGE_APPEND, "y");
	chunk = rd_raw(c, &fast, NULL);
	got = rd_raw(c, &slow, NULL);
	assert_string_equal(got, chunk);
	assert_int_equal(count_lines(got), 1);
	free(got);
	free(chunk);
	assert_false(store_events_pending(c->s, slow.r));

	free(truth);
	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* The watcher view falls behind too: -EOVERFLOW, then it continues. */
static void test_events_next_overflow(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_event_reader *re;
	struct store_event ev;
	struct rd fast;
	uint64_t newest = 0, prev = 0;
	int rc, n = 0;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	re = ev_open(c, NULL);
	rd_open(c, &fast, NULL);
	for (int i = 0; i < STORE_EVENT_LOG + 100; i++) {
		publish(c, a, STORE_STAGE_REPLACE, "x");
		if (i % 1024 == 1023)
			free(rd_take(c, &fast));
	}
	free(rd_take(c, &fast));
	newest = fast.last;

	memset(&ev, 0, sizeof ev);
	assert_int_equal(store_events_next(c->s, re, &ev), -EOVERFLOW);
	while ((rc = store_events_next(c->s, re, &ev)) == 1) {
		assert_true(ev.seq > prev);
		assert_int_equal(ev.op, STORE_OP_WRITE);
		prev = ev.seq;
		n++;
		store_event_free(&ev);
		memset(&ev, 0, sizeof ev);
	}
	assert_int_equal(rc, 0);
	assert_true(n >= 1);
	assert_int_equal(prev, newest);
	publish(c, a, STORE_STAGE_REPLACE, "y");
	next_ev(c, re, &ev);
	assert_true(ev.seq > newest);
	store_event_free(&ev);

	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* A tenant made by @o (uid, gid, mode). */
static struct store_node *mk_owned(struct ctx *c, const char *name,
				   const struct store_owner *o)
{
	struct store_node *n = NULL;

	assert_int_equal(store_mkdir(c->s, root(c), name, o, &n), 0);
	return n;
}

static void chmod_node(struct ctx *c, struct store_node *n, mode_t mode)
{
	struct store_attr in;

	memset(&in, 0, sizeof in);
	in.mode = mode;
	assert_int_equal(store_setattr(c->s, n, STORE_SET_MODE, &in, NULL), 0);
}

/* The sequence numbers of @raw's lines, as one string "n n n ". */
static void seqs_of(const char *raw, char *out, size_t cap)
{
	out[0] = '\0';
	for (const char *l = raw; *l;) {
		const char *nl = strchr(l, '\n');
		size_t used = strlen(out);

		snprintf(out + used, cap - used, "%llu ", strtoull(l, NULL, 10));
		l = nl + 1;
	}
}

/*
 * A reader with credentials sees the lines of the tenants they may list
 * (read and search), judged by the tenant's mode when each line was
 * appended, with the store's sequence numbers; root and the owner see all.
 */
static void test_events_filtered_by_reader(void **state)
{
	static const gid_t g2000[] = { 2000 };
	const struct store_owner closed_o = { 1001, 1001, 0700 };
	const struct store_owner group_o = { 1001, 2000, 0750 };
	const struct store_owner open_o = { 1001, 1001, 0755 };
	const struct store_cred owner = { 1001, 1001, NULL, 0 };
	const struct store_cred member = { 1002, 1002, g2000, 1 };
	const struct store_cred other = { 1003, 1003, NULL, 0 };
	const struct store_cred rootc = { 0, 0, NULL, 0 };
	struct ctx *c = *state;
	struct store_node *closed, *group, *open, *p, *r;
	struct rd all, ro, rm, rx, rr;
	char *raw, seq_all[256], seq_x[256], want[256];

	rd_open(c, &all, NULL);
	rd_open_as(c, &ro, NULL, &owner);
	rd_open_as(c, &rm, NULL, &member);
	rd_open_as(c, &rx, NULL, &other);
	rd_open_as(c, &rr, NULL, &rootc);

	closed = mk_owned(c, "closed", &closed_o);
	group = mk_owned(c, "group", &group_o);
	open = mk_owned(c, "open", &open_o);
	p = mk(c, closed, "p");
	assert_int_equal(create_rc(c, p, "a", true), 0);
	put(c, p);
	assert_int_equal(mkdir_rc(c, group, "p"), 0);
	assert_int_equal(mkdir_rc(c, open, "p"), 0);
	/* Opened up: from now on others see it; and closed again. */
	chmod_node(c, closed, 0755);
	assert_int_equal(mkdir_rc(c, closed, "q"), 0);
	chmod_node(c, closed, 0700);
	assert_int_equal(mkdir_rc(c, closed, "r"), 0);

	expect_events(c, &rx,
		      EV("join", "open", "-", "-", "-", "-")
		      EV("join", "open", "p", "-", "1", "-")
		      EV("join", "closed", "q", "-", "1", "-"));
	expect_events(c, &rm,
		      EV("join", "group", "-", "-", "-", "-")
		      EV("join", "open", "-", "-", "-", "-")
		      EV("join", "group", "p", "-", "1", "-")
		      EV("join", "open", "p", "-", "1", "-")
		      EV("join", "closed", "q", "-", "1", "-"));
	/* The owner, root and a reader without credentials see all 9. */
	raw = rd_raw(c, &all, NULL);
	assert_int_equal(count_lines(raw), 9);
	seqs_of(raw, seq_all, sizeof seq_all);
	free(raw);
	raw = rd_raw(c, &ro, NULL);
	seqs_of(raw, want, sizeof want);
	assert_string_equal(want, seq_all);
	free(raw);
	raw = rd_raw(c, &rr, NULL);
	seqs_of(raw, want, sizeof want);
	assert_string_equal(want, seq_all);
	free(raw);

	/* The filtered reader's numbers are the store's: a gap, not a
	 * renumbering. */
	rd_open_as(c, &rx, NULL, &other);
	rd_open(c, &all, NULL);
	r = lk(c, closed, "r");
	assert_int_equal(create_rc(c, r, "x", true), 0);
	put(c, r);
	assert_int_equal(mkdir_rc(c, open, "z"), 0);
	raw = rd_raw(c, &all, NULL);
	seqs_of(raw, seq_all, sizeof seq_all);
	free(raw);
	raw = rd_raw(c, &rx, NULL);
	seqs_of(raw, seq_x, sizeof seq_x);
	assert_int_equal(count_lines(raw), 1);
	free(raw);
	assert_non_null(strstr(seq_all, seq_x));
	assert_string_not_equal(seq_all, seq_x);

	/* A line of no tenant is everyone's. */
	assert_int_equal(store_drain(c->s, NULL), 0);
	expect_events(c, &rx, EV("drain", "-", "-", "-", "-", "-"));

	put(c, closed);
	put(c, group);
	put(c, open);
	check_ok(c);
}

/*
 * Lines a reader does not see never make it overflow while they are in
 * the log: a reader 5000 hidden lines behind reads the next visible line
 * as if nothing had happened.  A reader that is moved along (pending, as
 * the daemon's event thread asks after each transition) never overflows
 * on hidden lines at all; one left alone longer than the log holds gets
 * an overflow line, as it cannot tell what it missed.
 */
static void test_events_filtered_no_overflow(void **state)
{
	const struct store_owner closed_o = { 1001, 1001, 0700 };
	const struct store_cred other = { 1003, 1003, NULL, 0 };
	struct ctx *c = *state;
	struct store_node *closed, *open, *p, *a;
	struct rd idle, polled, wrapped, all;
	const int n = STORE_EVENT_WINDOW + 904;

	closed = mk_owned(c, "closed", &closed_o);
	open = mk(c, root(c), "open");
	p = mk(c, closed, "p");
	a = cr(c, p, "a");
	rd_open_as(c, &idle, NULL, &other);
	rd_open(c, &all, NULL);
	for (int i = 0; i < n; i++)
		publish(c, a, STORE_STAGE_REPLACE, "x");
	assert_false(store_events_pending(c->s, idle.r));
	assert_int_equal(mkdir_rc(c, open, "q"), 0);
	assert_true(store_events_pending(c->s, idle.r));
	expect_events(c, &idle, EV("join", "open", "q", "-", "1", "-"));
	assert_int_equal(idle.overflows, 0);
	/* The same distance in lines it sees is an overflow, as before. */
	free(rd_take(c, &all));
	assert_int_equal(all.overflows, 1);

	rd_open_as(c, &polled, NULL, &other);
	rd_open_as(c, &wrapped, NULL, &other);
	for (int i = 0; i < STORE_EVENT_LOG + 100; i++) {
		publish(c, a, STORE_STAGE_REPLACE, "x");
		if (i % 1000 == 999)
			assert_false(store_events_pending(c->s, polled.r));
	}
	assert_int_equal(mkdir_rc(c, open, "r"), 0);
	expect_events(c, &polled, EV("join", "open", "r", "-", "1", "-"));
	assert_int_equal(polled.overflows, 0);
	expect_events(c, &wrapped,
		      "overflow\n" EV("join", "open", "r", "-", "1", "-"));

	put(c, a);
	put(c, p);
	put(c, open);
	put(c, closed);
	check_ok(c);
}

/* A store made with a smaller event log keeps that many lines, and a
 * reader that falls behind all of them overflows. */
static void test_events_small_log(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t, *p, *a;
	struct store *bad = NULL;
	struct rd d;
	char *got;

	store_limits_default(&l);
	assert_int_equal(l.event_log, STORE_EVENT_LOG);
	l.event_log = 0;
	assert_int_equal(store_new(&l, NULL, &bad), -EINVAL);
	assert_null(bad);
	l.event_log = 8;
	reopen(c, &l);
	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	rd_open(c, &d, NULL);
	for (int i = 0; i < 20; i++)
		publish(c, a, STORE_STAGE_REPLACE, "x");
	got = rd_take(c, &d);
	assert_int_equal(d.overflows, 1);
	assert_int_equal(count_lines(got), 1 + 8);
	free(got);
	publish(c, a, STORE_STAGE_REPLACE, "y");
	expect_events(c, &d, EV("write", "t", "p", "a", "1", "21"));
	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* Events for the watcher machinery ---------------------------------------- */

static void test_events_next_internal(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *r, *a, *b;
	struct store_event_reader *re;
	struct store_event ev;
	struct rd d;
	uint64_t seq;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	r = mk(c, t, "r");
	re = ev_open(c, NULL);
	rd_open(c, &d, NULL);

	a = cr(c, p, "a");
	next_ev(c, re, &ev);
	assert_int_equal(ev.op, STORE_OP_CREATE);
	assert_false(ev.internal);
	assert_string_equal(ev.tenant, "t");
	assert_string_equal(ev.parent, "p");
	assert_string_equal(ev.child, "a");
	seq = ev.seq;
	store_event_free(&ev);
	free(rd_take(c, &d));
	assert_int_equal(d.last, seq);        /* the same numbers */

	assert_int_equal(store_unlink(c->s, p, "a"), 0);
	next_ev(c, re, &ev);
	assert_int_equal(ev.op, STORE_OP_UNLINK);
	assert_false(ev.internal);
	assert_int_equal(ev.kind, STORE_CHILD);
	assert_int_equal(ev.ino, store_node_ino(a));
	assert_string_equal(ev.parent, "p");
	assert_string_equal(ev.child, "a");
	assert_true(ev.seq > seq);
	seq = ev.seq;
	store_event_free(&ev);

	b = cr(c, p, "b");
	set_ttl(c, b, 100);
	set_ttl(c, q, 200);
	advance(c, 200);
	assert_int_equal(store_expire(c->s, 10), 2);
	next_op(c, re, STORE_OP_EXPIRE, &ev);
	assert_true(ev.internal);
	assert_int_equal(ev.kind, STORE_CHILD);
	assert_int_equal(ev.ino, store_node_ino(b));
	assert_string_equal(ev.tenant, "t");
	assert_string_equal(ev.parent, "p");
	assert_string_equal(ev.child, "b");
	assert_true(ev.seq > seq);
	seq = ev.seq;
	store_event_free(&ev);
	next_ev(c, re, &ev);
	assert_int_equal(ev.op, STORE_OP_EXPIRE);
	assert_true(ev.internal);
	assert_int_equal(ev.kind, STORE_PARENT);
	assert_int_equal(ev.ino, store_node_ino(q));
	assert_string_equal(ev.parent, "q");
	assert_string_equal(ev.child, "");
	assert_true(ev.seq > seq);
	seq = ev.seq;
	store_event_free(&ev);

	assert_int_equal(store_depart(c->s, t, "r", NULL), 0);
	next_ev(c, re, &ev);
	assert_int_equal(ev.op, STORE_OP_DEPART);
	assert_true(ev.internal);
	assert_int_equal(ev.kind, STORE_PARENT);
	assert_int_equal(ev.ino, store_node_ino(r));
	assert_string_equal(ev.parent, "r");
	assert_string_equal(ev.child, "");
	store_event_free(&ev);

	assert_int_equal(store_depart(c->s, t, "ghost", NULL), 0);
	next_ev(c, re, &ev);
	assert_int_equal(ev.op, STORE_OP_DEPART);
	assert_true(ev.internal);
	assert_string_equal(ev.parent, "ghost");
	store_event_free(&ev);

	/* rmdir of P is a request on P's own path. */
	assert_int_equal(store_rmdir(c->s, t, "p", NULL), 0);
	next_ev(c, re, &ev);
	assert_int_equal(ev.op, STORE_OP_LEAVE);
	assert_false(ev.internal);
	assert_int_equal(ev.kind, STORE_PARENT);
	assert_int_equal(ev.ino, store_node_ino(p));
	store_event_free(&ev);

	assert_int_equal(store_events_next(c->s, re, &ev), 0);

	put(c, a);
	put(c, b);
	put(c, r);
	put(c, q);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/*
 * The event hook: once after each transition that appended lines (not
 * for a failed one, nor for one that appended nothing), telling whether
 * one of them was internal.
 */
static void test_event_hook(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *a, *b;
	struct rd d;
	unsigned long h0, i0;

	rd_open(c, &d, NULL);
	assert_int_equal(c->hooks, 0);
	t = mk(c, root(c), "t");
	assert_int_equal(c->hooks, 1);
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	a = cr(c, p, "a");
	assert_int_equal(c->hooks, 4);
	publish(c, a, STORE_STAGE_REPLACE, "x");
	assert_int_equal(c->hooks, 5);
	assert_int_equal(c->hooks_internal, 0);
	/* When the hook has run, the line is there to read. */
	expect_events(c, &d,
		      EV("join", "t", "-", "-", "-", "-")
		      EV("join", "t", "p", "-", "1", "-")
		      EV("join", "t", "q", "-", "1", "-")
		      EV("create", "t", "p", "a", "1", "0")
		      EV("write", "t", "p", "a", "1", "1"));

	/* Failed transitions and ones without a line: no call. */
	h0 = c->hooks;
	assert_int_equal(create_rc(c, p, "a", true), -EEXIST);
	assert_int_equal(store_unlink(c->s, p, "zz"), -ENOENT);
	assert_int_equal(mkdir_rc(c, t, "p"), -EEXIST);
	assert_int_equal(store_rmdir(c->s, t, "zz", NULL), -ENOENT);
	set_ttl(c, a, 10);
	assert_int_equal(store_renew(c->s, a), 0);
	assert_int_equal(store_expire(c->s, 10), 0);
	assert_int_equal(c->hooks, h0);
	assert_false(store_events_pending(c->s, d.r));

	/* One call for a transition of several lines: a's state, linked
	 * twice, and b expire in one reaper run (three lines). */
	assert_int_equal(store_link(c->s, a, q, "a2"), 0);
	assert_int_equal(c->hooks, h0 + 1);
	b = cr(c, q, "b");
	set_ttl(c, b, 10);
	h0 = c->hooks;
	i0 = c->hooks_internal;
	advance(c, 10);
	assert_int_equal(store_expire(c->s, 10), 2);
	assert_int_equal(c->hooks, h0 + 1);
	assert_int_equal(c->hooks_internal, i0 + 1);
	free(rd_take(c, &d));

	/* depart is internal, unlink is not. */
	h0 = c->hooks;
	assert_int_equal(store_depart(c->s, t, "ghost", NULL), 0);
	assert_int_equal(c->hooks, h0 + 1);
	assert_int_equal(c->hooks_internal, i0 + 2);
	assert_int_equal(create_rc(c, q, "b", true), 0);
	assert_int_equal(store_unlink(c->s, q, "b"), 0);
	assert_int_equal(c->hooks, h0 + 3);
	assert_int_equal(c->hooks_internal, i0 + 2);
	assert_int_equal(store_rmdir(c->s, root(c), "t", NULL), 0);
	assert_int_equal(c->hooks, h0 + 4);
	{
		char *ev = rd_take(c, &d);

		assert_int_equal(count_lines(ev), 4); /* depart, create,
							 unlink, cleanup */
		free(ev);
	}

	put(c, b);
	put(c, a);
	put(c, q);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* Edge cases ----------------------------------------------------------- */

/*
 * A parent whose deadline came first takes its children with it: an
 * operation through its old handle fails with -ESTALE and changes
 * nothing, not even by reaping a child that would have expired later.
 */
static void test_expired_parent_handle_changes_nothing(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *a, *b;
	struct store_dirlist dl = { 0, NULL };
	struct store_stats s0, s1;
	struct rd d;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	a = cr(c, p, "a");
	b = cr(c, q, "b");
	set_ttl(c, p, 100);
	set_ttl(c, a, 150);
	rd_open(c, &d, NULL);
	advance(c, 200);
	s0 = stats(c, NULL);

	assert_int_equal(create_rc(c, p, "a", true), -ESTALE);
	assert_int_equal(create_rc(c, p, "a", false), -ESTALE);
	assert_int_equal(create_rc(c, p, "n", true), -ESTALE);
	assert_int_equal(store_unlink(c->s, p, "a"), -ESTALE);
	assert_int_equal(store_link(c->s, b, p, "a"), -ESTALE);
	assert_int_equal(store_link(c->s, b, p, "b2"), -ESTALE);
	assert_int_equal(store_rename(c->s, q, "b", p, "a", 0), -ESTALE);
	assert_int_equal(store_rename(c->s, p, "a", q, "a", 0), -ESTALE);
	assert_int_equal(store_list(c->s, p, &dl), -ESTALE);
	assert_int_equal(lookup_rc(c, p, "a"), -ESTALE);
	s1 = stats(c, NULL);
	assert_int_equal(s1.expiries, s0.expiries);
	assert_int_equal(s1.admissions, s0.admissions);
	assert_int_equal(s1.removals, s0.removals);
	assert_list(c, q, "b");

	/* The reaper: p's deadline is first, and the leave takes a. */
	store_expire(c->s, 16);
	expect_events(c, &d, EV("expire", "t", "p", "-", "1", "-"));
	s1 = stats(c, NULL);
	assert_int_equal(s1.expiries, s0.expiries + 1);
	assert_int_equal(s1.children, 1);

	put(c, a);
	put(c, b);
	put(c, q);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* Any budget is a bound, however large. */
static void test_expire_large_budgets(void **state)
{
	struct ctx *c = *state;
	static const unsigned budgets[] = { 1u << 31, (1u << 31) + 1,
					    UINT32_MAX - 1, UINT32_MAX };
	struct store_node *t, *p;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	for (size_t i = 0; i < sizeof budgets / sizeof budgets[0]; i++) {
		char name[16];
		struct store_node *n;

		snprintf(name, sizeof name, "c%zu", i);
		n = cr(c, p, name);
		set_ttl(c, n, 10);
		advance(c, 10);
		if (store_expire(c->s, budgets[i]) != 1)
			fail_msg("store_expire(budget %u) with one due node "
				 "did not expire it", budgets[i]);
		assert_int_equal(getattr_rc(c, n), -ESTALE);
		put(c, n);
	}
	assert_int_equal(stats(c, NULL).expiries, 4);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* Leases of nodes removed otherwise leave nothing pending behind. */
static void test_removed_parent_leases_not_pending(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *u, *q, *r, *w;
	uint64_t t0, tomb;

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	q = mk(c, t, "q");
	r = mk(c, t, "r");
	w = mk(c, u, "w");
	t0 = now(c);
	set_ttl(c, q, 100);
	set_ttl(c, r, 200);
	set_ttl(c, w, 300);
	tomb = t0 + c->lim.tombstone_ttl_ms;
	assert_int_equal(store_rmdir(c->s, t, "q", NULL), 0);
	assert_int_equal(store_next_deadline(c->s), t0 + 200);
	assert_int_equal(store_depart(c->s, t, "r", NULL), 0);
	assert_int_equal(store_next_deadline(c->s), t0 + 300);
	assert_int_equal(store_rmdir(c->s, root(c), "u", NULL), 0);
	assert_int_equal(store_next_deadline(c->s), tomb);
	advance(c, 1000);
	assert_int_equal(store_expire(c->s, 16), 0);
	assert_int_equal(stats(c, NULL).expiries, 0);
	assert_int_equal(stats(c, NULL).leaves, 3);

	put(c, w);
	put(c, r);
	put(c, q);
	put(c, u);
	put(c, t);
	check_ok(c);
}

/* An expired name is free for every kind of admission; an expired
 * source is gone. */
static void test_admissions_onto_expired_names(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *a, *x, *y, *z, *n;
	struct store_stats s0, s1;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	a = cr(c, p, "a");                   /* no lease */
	x = cr(c, q, "x");
	y = cr(c, q, "y");
	z = cr(c, p, "z");
	set_ttl(c, x, 100);
	set_ttl(c, y, 100);
	set_ttl(c, z, 100);
	advance(c, 100);
	s0 = stats(c, NULL);

	/* link onto an expired name. */
	assert_int_equal(store_link(c->s, a, q, "x"), 0);
	/* rename onto an expired name, even under NOREPLACE. */
	n = cr(c, p, "m");
	assert_int_equal(store_rename(c->s, p, "m", q, "y",
				      STORE_RENAME_NOREPLACE), 0);
	/* An expired source cannot be moved or linked. */
	assert_int_equal(store_rename(c->s, p, "z", q, "z", 0), -ENOENT);
	assert_int_equal(store_link(c->s, z, q, "z2"), -ESTALE);

	s1 = stats(c, NULL);
	assert_int_equal(s1.expiries, s0.expiries + 3);
	assert_int_equal(s1.removals, s0.removals);
	assert_int_equal(s1.children, 2);    /* a, m */
	assert_int_equal(s1.links, 3);       /* p/a, q/x, q/y */
	assert_list(c, p, "a");
	assert_int_equal(ino_of(c, q, "x"), store_node_ino(a));
	assert_int_equal(ino_of(c, q, "y"), store_node_ino(n));
	assert_int_equal(getattr_rc(c, x), -ESTALE);
	assert_int_equal(getattr_rc(c, y), -ESTALE);
	assert_int_equal(getattr_rc(c, z), -ESTALE);
	assert_int_equal(store_expire(c->s, 16), 0);

	put(c, n);
	put(c, x);
	put(c, y);
	put(c, z);
	put(c, a);
	put(c, q);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* A member-left for a parent that has expired: it left at its deadline,
 * and the rejoin is still the next generation. */
static void test_depart_of_expired_parent(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *n;
	struct rd d;
	char *ev;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	set_ttl(c, p, 100);
	rd_open(c, &d, NULL);
	advance(c, 100);
	assert_int_equal(store_depart(c->s, t, "p", NULL), 0);
	ev = rd_take(c, &d);
	if (strncmp(ev, EV("expire", "t", "p", "-", "1", "-"),
		    strlen(EV("expire", "t", "p", "-", "1", "-"))) != 0)
		fail_msg("depart of an expired parent: first line %s", ev);
	assert_int_equal(count_lines(ev), 2);
	assert_non_null(strstr(ev, "depart\tt\tp\t-\t"));
	free(ev);
	assert_int_equal(stats(c, NULL).tombstones, 1);
	assert_int_equal(stats(c, NULL).expiries, 1);
	assert_int_equal(store_expire(c->s, 16), 0);
	n = mk(c, t, "p");
	assert_int_equal(gen(c, n), 2);

	put(c, n);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* A random sequence against a model ---------------------------------------- */

/*
 * Children in two parents (child_ttl 20 and the default 50) under random
 * creates, unlinks, renewals, new TTLs, publications, lookups, listings,
 * clock steps and reaper runs with small budgets.  The model is driven by
 * the event lines, so it checks them too: a create only of an absent
 * name, an unlink or write only of a visible one, an expire only of a due
 * one, and each reaper run expires min(budget, due) nodes, the oldest
 * deadlines first.  After every step store_next_deadline() is the model's
 * earliest deadline.
 */
#define MP 2
#define MN 12

struct mslot {
	struct store_node *h;  /* last incarnation's handle (maybe dead) */
	bool present;          /* in the store, maybe expired, unreaped */
	bool live;             /* h is the present incarnation */
	uint64_t ttl, deadline;
};

struct model {
	struct ctx *c;
	struct store_node *p[MP];
	struct mslot m[MP][MN];
	uint64_t ptl[MP];      /* the TTL new children start with */
	struct rd d;
	uint64_t expiries;
	uint64_t exp_deadline[64]; /* deadlines expired by the last lines */
	int nexp;
};

static const char *const MPN[MP] = { "p0", "p1" };

static bool m_visible(struct model *m, struct mslot *x)
{
	return x->present && (!x->deadline || x->deadline > now(m->c));
}

static struct mslot *m_slot(struct model *m, const char *pn, const char *cn)
{
	for (int i = 0; i < MP; i++)
		if (strcmp(pn, MPN[i]) == 0) {
			int k = atoi(cn + 1);

			if (cn[0] == 'c' && k >= 0 && k < MN)
				return &m->m[i][k];
		}
	fail_msg("event for an unknown slot %s/%s", pn, cn);
	return NULL;
}

/* Apply the pending event lines to the model, checking each. */
static void m_events(struct model *m)
{
	char *ev = rd_take(m->c, &m->d), *line = ev;

	m->nexp = 0;
	while (*line) {
		char f[7][64];
		char *nl = strchr(line, '\n');
		struct mslot *x;
		int nf = 0;
		char *q = line;

		assert_non_null(nl);
		*nl = '\0';
		while (nf < 7) {
			char *tab = strchr(q, '\t');
			size_t n = tab ? (size_t)(tab - q) : strlen(q);

			assert_true(n < sizeof f[0]);
			memcpy(f[nf], q, n);
			f[nf++][n] = '\0';
			if (!tab)
				break;
			q = tab + 1;
		}
		if (nf != 6 || strcmp(f[1], "t") != 0)
			fail_msg("unexpected event line: %s", line);
		x = m_slot(m, f[2], f[3]);
		if (strcmp(f[0], "create") == 0) {
			if (x->present)
				fail_msg("create of a present name: %s", line);
			x->present = true;
		} else if (strcmp(f[0], "unlink") == 0) {
			if (!m_visible(m, x))
				fail_msg("unlink of an invisible name: %s",
					 line);
			x->present = false;
			x->live = false;
		} else if (strcmp(f[0], "write") == 0) {
			if (!m_visible(m, x))
				fail_msg("write of an invisible name: %s",
					 line);
		} else if (strcmp(f[0], "expire") == 0) {
			if (!x->present || !x->deadline ||
			    x->deadline > now(m->c))
				fail_msg("expire of a node not due (present %d "
					 "deadline %llu now %llu): %s",
					 x->present,
					 (unsigned long long)x->deadline,
					 (unsigned long long)now(m->c), line);
			x->present = false;
			x->live = false;
			m->expiries++;
			if (m->nexp < 64)
				m->exp_deadline[m->nexp++] = x->deadline;
		} else {
			fail_msg("unexpected event line: %s", line);
		}
		line = nl + 1;
	}
	free(ev);
}

static uint64_t m_next_deadline(struct model *m)
{
	uint64_t next = UINT64_MAX;

	for (int i = 0; i < MP; i++)
		for (int k = 0; k < MN; k++)
			if (m->m[i][k].present && m->m[i][k].deadline &&
			    m->m[i][k].deadline < next)
				next = m->m[i][k].deadline;
	return next;
}

static void m_step(struct model *m, unsigned *seed)
{
	struct ctx *c = m->c;
	int pi = rand_r(seed) % MP, ki = rand_r(seed) % MN;
	struct mslot *x = &m->m[pi][ki];
	struct store_node *p = m->p[pi];
	char name[8];
	unsigned op = (unsigned)rand_r(seed) % 100;
	int rc;

	snprintf(name, sizeof name, "c%d", ki);
	if (op < 20) {                               /* create */
		struct store_node *n = NULL;
		bool created = false, vis = m_visible(m, x);

		rc = store_create(c->s, p, name, &FOWN, true, &n, &created);
		assert_int_equal(rc, vis ? -EEXIST : 0);
		m_events(m);
		if (rc == 0) {
			assert_true(x->present);
			if (x->h)
				put(c, x->h);
			x->h = n;
			x->live = true;
			x->ttl = m->ptl[pi];
			x->deadline = x->ttl ? now(c) + x->ttl : 0;
			assert_lease(c, n, x->ttl, x->deadline);
		}
	} else if (op < 30) {                        /* unlink */
		bool vis = m_visible(m, x);

		rc = store_unlink(c->s, p, name);
		assert_int_equal(rc, vis ? 0 : -ENOENT);
		m_events(m);
		if (vis)
			assert_false(x->present);
	} else if (op < 45 && x->h) {                /* renew */
		bool ok = x->live && m_visible(m, x);

		rc = store_renew(c->s, x->h);
		assert_int_equal(rc, ok ? 0 : -ESTALE);
		if (ok && x->ttl)
			x->deadline = now(c) + x->ttl;
		if (ok)
			assert_lease(c, x->h, x->ttl, x->deadline);
		m_events(m);
	} else if (op < 55 && x->h) {                /* set_ttl */
		bool ok = x->live && m_visible(m, x);
		uint64_t ttl = rand_r(seed) % 10 == 0 ? 0 :
			       1 + (uint64_t)(rand_r(seed) % 120);

		rc = store_set_ttl(c->s, x->h, ttl);
		assert_int_equal(rc, ok ? 0 : -ESTALE);
		if (ok) {
			x->ttl = ttl;
			x->deadline = ttl ? now(c) + ttl : 0;
			assert_lease(c, x->h, x->ttl, x->deadline);
		}
		m_events(m);
	} else if (op < 70) {                        /* the clock */
		advance(c, (uint64_t)(rand_r(seed) % 26));
	} else if (op < 80) {                        /* the reaper */
		unsigned budget = (unsigned)rand_r(seed) % 5, got, ndue = 0;

		for (int i = 0; i < MP; i++)
			for (int k = 0; k < MN; k++) {
				struct mslot *y = &m->m[i][k];

				if (y->present && y->deadline &&
				    y->deadline <= now(c))
					ndue++;
			}
		got = store_expire(c->s, budget);
		m_events(m);
		assert_int_equal(got, (unsigned)m->nexp);
		assert_int_equal(got, budget < ndue ? budget : ndue);
		/* Oldest first: nothing left due is older than what went. */
		for (int e = 1; e < m->nexp; e++)
			assert_true(m->exp_deadline[e - 1] <=
				    m->exp_deadline[e]);
		if (m->nexp) {
			uint64_t newest = m->exp_deadline[m->nexp - 1];

			for (int i = 0; i < MP; i++)
				for (int k = 0; k < MN; k++) {
					struct mslot *y = &m->m[i][k];

					if (y->present && y->deadline &&
					    y->deadline <= now(c))
						assert_true(y->deadline >=
							    newest);
				}
		}
	} else if (op < 88) {                        /* lookup */
		struct store_node *n = NULL;

		rc = store_lookup(c->s, p, name, &n);
		m_events(m);
		assert_int_equal(rc, m_visible(m, x) ? 0 : -ENOENT);
		if (rc == 0) {
			assert_true(x->live);
			assert_int_equal(store_node_ino(n),
					 store_node_ino(x->h));
			put(c, n);
		}
	} else if (op < 93) {                        /* listing */
		struct store_dirlist dl = { 0, NULL };
		bool seen[MN] = { false };

		assert_int_equal(store_list(c->s, p, &dl), 0);
		m_events(m);
		for (size_t e = 0; e < dl.n; e++) {
			int k = atoi(dl.e[e].name + 1);

			assert_true(k >= 0 && k < MN);
			assert_false(seen[k]);
			seen[k] = true;
		}
		store_dirlist_free(&dl);
		for (int k = 0; k < MN; k++)
			if (seen[k] != m_visible(m, &m->m[pi][k]))
				fail_msg("listing of %s: %s %s, model says "
					 "%s", MPN[pi], MPN[pi] + 0,
					 seen[k] ? "listed" : "not listed",
					 m_visible(m, &m->m[pi][k]) ?
						 "visible" : "invisible");
	} else if (x->h) {                           /* publication */
		struct store_stage *st = NULL;
		bool ok = x->live && m_visible(m, x);

		rc = store_stage_open(c->s, x->h, STORE_STAGE_REPLACE, &st);
		if (rc == 0) {
			ssize_t w = store_stage_write(st, "abc", 3, 0);

			rc = w < 0 ? (int)w : store_stage_publish(st);
			store_stage_close(st);
		}
		assert_int_equal(rc, ok ? 0 : -ESTALE);
		m_events(m);
	}
	assert_int_equal(store_next_deadline(c->s), m_next_deadline(m));
}

static void test_lease_model_random(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t;
	struct model *m = calloc(1, sizeof *m);
	unsigned seed = 0x1ea5e, seed0;
	int steps = 30000;

	assert_non_null(m);
	if (getenv("LEASE_SEED"))
		seed = (unsigned)strtoul(getenv("LEASE_SEED"), NULL, 0);
	seed0 = seed;
	store_limits_default(&l);
	l.default_ttl_ms = 50;
	reopen(c, &l);
	m->c = c;
	t = mk(c, root(c), "t");
	for (int i = 0; i < MP; i++)
		m->p[i] = mk(c, t, MPN[i]);
	assert_int_equal(store_set_child_ttl(c->s, m->p[0], 20), 0);
	m->ptl[0] = 20;
	m->ptl[1] = 50;
	rd_open(c, &m->d, NULL);

	for (int i = 0; i < steps; i++) {
		m_step(m, &seed);
		if (i % 1000 == 999) {
			assert_int_equal(stats(c, NULL).expiries, m->expiries);
			check_ok(c);
		}
	}
	/* Drain: everything due goes, and the counters agree. */
	advance(c, 1000);
	while (store_expire(c->s, 7))
		;
	m_events(m);
	assert_int_equal(stats(c, NULL).expiries, m->expiries);
	assert_int_equal(store_next_deadline(c->s), m_next_deadline(m));
	{
		uint64_t present = 0;

		for (int i = 0; i < MP; i++)
			for (int k = 0; k < MN; k++)
				present += m->m[i][k].present;
		assert_int_equal(stats(c, NULL).children, present);
	}
	print_message("# model: %d steps, %llu expiries (seed %#x)\n", steps,
		      (unsigned long long)m->expiries, seed0);

	for (int i = 0; i < MP; i++) {
		for (int k = 0; k < MN; k++)
			if (m->m[i][k].h)
				put(c, m->m[i][k].h);
		put(c, m->p[i]);
	}
	put(c, t);
	free(m);
	check_ok(c);
}

/* Publications in the middle of a cascade ------------------------------------ */

/*
 * A publication that lands while a cascade (leave, .depart, a parent's
 * expiry, a tenant cleanup) is taking the departing parent's links out is
 * ordered by the stream: its lines come before the parent's removal line,
 * or it is refused (the state is gone: -ESTALE) or does not name the
 * departed parent (the state lives on in another bucket).  Replaying the
 * stream never puts a child back into a departed parent.  The cascade
 * hook runs a publication on every state, on another thread, before each
 * link goes; during a cleanup another thread also makes a new tenant of
 * the same name, whose join must come after the cleanup's line.  (A
 * drain's clear holds every transition off: nothing can land inside it.)
 */
enum cascade_kind { CASCADE_LEAVE, CASCADE_DEPART, CASCADE_EXPIRE,
		    CASCADE_CLEANUP, NCASCADE };

#define MIDSTEPS 8

struct midcascade {
	struct store *s;
	struct store_node *n[3];
	unsigned steps;
	int rc[MIDSTEPS][3];
	/* A cleanup: a thread makes a tenant of the same name meanwhile. */
	bool remake;
	pthread_t remake_th;
	bool remake_started, remake_joined;
	struct store_node *remade;
	int remake_rc;
};

static void *midcascade_remake(void *arg)
{
	struct midcascade *m = arg;

	m->remake_rc = store_mkdir(m->s, store_root(m->s), "t", &DOWN,
				   &m->remade);
	return NULL;
}

static void *midcascade_publish(void *arg)
{
	struct midcascade *m = arg;

	for (int i = 0; i < 3; i++) {
		struct store_stage *st = NULL;
		int rc = store_stage_open(m->s, m->n[i], STORE_STAGE_REPLACE,
					  &st);

		if (rc == 0) {
			ssize_t w = store_stage_write(st, "mid", 3, 0);

			rc = w < 0 ? (int)w : store_stage_publish(st);
			store_stage_close(st);
		}
		m->rc[m->steps][i] = rc;
	}
	return NULL;
}

static void midcascade_step(void *arg)
{
	struct midcascade *m = arg;
	pthread_t th;

	if (m->steps >= MIDSTEPS)
		return;
	if (pthread_create(&th, NULL, midcascade_publish, m) != 0)
		abort();
	pthread_join(th, NULL);
	m->steps++;
	if (m->remake && !m->remake_started) {
		struct timespec dl;

		/* The name is taken until the cleanup's line: the mkdir
		 * waits for it.  Give it time to show that it does not. */
		if (pthread_create(&m->remake_th, NULL, midcascade_remake, m))
			abort();
		m->remake_started = true;
		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_nsec += 300 * 1000000L;
		dl.tv_sec += dl.tv_nsec / 1000000000L;
		dl.tv_nsec %= 1000000000L;
		m->remake_joined =
			pthread_timedjoin_np(m->remake_th, NULL, &dl) == 0;
	}
}

/*
 * @lines (no sequence numbers): the removal line of parent "p" (or of
 * tenant "t" for a cleanup) comes last but for lines of other buckets,
 * and no line of a child of p follows it.
 */
static void assert_no_child_line_after(const char *lines, const char *removal,
				       bool whole_tenant)
{
	const char *line = lines;
	bool removed = false;
	int removals = 0;

	while (*line) {
		const char *nl = strchr(line, '\n');
		char op[16], t[16], p[16], ch[16];

		assert_non_null(nl);
		if (sscanf(line, "%15[^\t]\t%15[^\t]\t%15[^\t]\t%15[^\t]", op, t,
			   p, ch) != 4)
			fail_msg("bad event line: %.*s", (int)(nl - line), line);
		if (strncmp(line, removal, strlen(removal)) == 0) {
			removed = true;
			removals++;
		} else if (removed && strcmp(t, "t") == 0 &&
			   strcmp(ch, "-") != 0 &&
			   (whole_tenant || strcmp(p, "p") == 0)) {
			print_error("events:\n%s", lines);
			fail_msg("a child line after %.*s: %.*s",
				 (int)strlen(removal) - 1, removal,
				 (int)(nl - line), line);
		}
		line = nl + 1;
	}
	if (removals != 1) {
		print_error("events:\n%s", lines);
		fail_msg("%d removal lines %s", removals, removal);
	}
}

static void test_cascade_orders_publications(void **state)
{
	static const char *const removal[NCASCADE] = {
		[CASCADE_LEAVE] = EV("leave", "t", "p", "-", "1", "-"),
		[CASCADE_DEPART] = EV("depart", "t", "p", "-", "1", "-"),
		[CASCADE_EXPIRE] = EV("expire", "t", "p", "-", "1", "-"),
		[CASCADE_CLEANUP] = EV("cleanup", "t", "-", "-", "-", "-"),
	};
	struct ctx *c = *state;

	for (int k = 0; k < NCASCADE; k++) {
		struct midcascade m = { 0 };
		struct store_limits l;
		struct store_node *t, *p, *q;
		struct rd d;
		char *lines;
		int published[3] = { 0 };

		store_limits_default(&l);
		reopen(c, &l);
		t = mk(c, root(c), "t");
		p = mk(c, t, "p");
		q = mk(c, t, "q");
		m.s = c->s;
		m.remake = k == CASCADE_CLEANUP;
		m.n[0] = cr(c, p, "a");            /* only in p */
		m.n[1] = cr(c, p, "sh");           /* also in q */
		m.n[2] = cr(c, p, "b");            /* only in p */
		assert_int_equal(store_link(c->s, m.n[1], q, "sh2"), 0);
		if (k == CASCADE_EXPIRE)
			set_ttl(c, p, 100);
		rd_open_strict(c, &d, NULL);
		store_cascade_step_hook(c->s, midcascade_step, &m);
		switch (k) {
		case CASCADE_LEAVE:
			assert_int_equal(store_rmdir(c->s, t, "p", NULL), 0);
			break;
		case CASCADE_DEPART:
			assert_int_equal(store_depart(c->s, t, "p", NULL), 0);
			break;
		case CASCADE_EXPIRE:
			advance(c, 100);
			assert_int_equal(store_expire(c->s, 10), 1);
			break;
		case CASCADE_CLEANUP:
			assert_int_equal(store_rmdir(c->s, root(c), "t", NULL),
					 0);
			break;
		}
		store_cascade_step_hook(c->s, NULL, NULL);
		if (m.remake_started && !m.remake_joined)
			pthread_join(m.remake_th, NULL);

		/* One step per link of p (a cleanup: of p and of q). */
		assert_int_equal(m.steps, k == CASCADE_CLEANUP ? 4 : 3);
		for (unsigned st = 0; st < m.steps; st++)
			for (int i = 0; i < 3; i++) {
				int rc = m.rc[st][i];

				if (rc != 0 && rc != -ESTALE)
					fail_msg("cascade %d step %u state %d: "
						 "%d", k, st, i, rc);
				published[i] += rc == 0;
			}
		/* Before the first link went, every state took it. */
		for (int i = 0; i < 3; i++)
			assert_int_equal(m.rc[0][i], 0);
		lines = rd_take(c, &d);
		assert_no_child_line_after(lines, removal[k],
					   k == CASCADE_CLEANUP);
		if (m.remake) {
			/* The new tenant joined after the old one went. */
			const char *gone = strstr(lines, removal[k]);
			const char *join = strstr(lines, EV("join", "t", "-",
							    "-", "-", "-"));

			assert_true(m.remake_started);
			assert_int_equal(m.remake_rc, 0);
			put(c, m.remade);
			if (!gone || !join || join < gone) {
				print_error("events:\n%s", lines);
				fail_msg("the new tenant's join is not after "
					 "the cleanup");
			}
		}
		free(lines);

		/* What was published stands on what lives on. */
		assert_false(store_node_live(m.n[0]));
		assert_false(store_node_live(m.n[2]));
		if (k == CASCADE_CLEANUP) {
			assert_false(store_node_live(m.n[1]));
		} else {
			assert_int_equal(version(c, m.n[1]),
					 (uint64_t)published[1]);
			assert_list(c, q, "sh2");
		}
		for (int i = 0; i < 3; i++)
			put(c, m.n[i]);
		put(c, q);
		put(c, p);
		put(c, t);
		check_ok(c);
	}
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup_hooked, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_lease_get_set_kinds),
		T(test_durations_bounded),
		T(test_expire_deadline_order),
		T(test_expire_budget),
		T(test_next_deadline),
		T(test_next_deadline_forgets_removed_leases),
		T(test_renew),
		T(test_renew_stale),
		T(test_set_ttl_zero_removes_lease),
		T(test_child_ttl_and_default_ttl),
		T(test_parent_expiry_cascades),
		T(test_parent_expired_before_reap),
		T(test_shared_state_expiry_ends_all_links),
		T(test_child_invisible_at_deadline_before_reap),
		T(test_deadlines_follow_injected_clock),
		T(test_tombstone_aging_via_expire),
		T(test_events_lines),
		T(test_events_rename_lines),
		T(test_events_expire_lines),
		T(test_events_tenant_scope),
		T(test_events_open_at_present_and_pending),
		T(test_events_read_whole_lines),
		T(test_events_overflow),
		T(test_events_next_overflow),
		T(test_events_filtered_by_reader),
		T(test_events_filtered_no_overflow),
		T(test_events_small_log),
		T(test_events_next_internal),
		T(test_event_hook),
		T(test_expired_parent_handle_changes_nothing),
		T(test_expire_large_budgets),
		T(test_removed_parent_leases_not_pending),
		T(test_admissions_onto_expired_names),
		T(test_depart_of_expired_parent),
		T(test_lease_model_random),
		T(test_cascade_orders_publications),
	};

	/* TEST_FILTER / TEST_SKIP: glob patterns of test names to run / skip. */
	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	if (getenv("TEST_SKIP"))
		cmocka_set_skip_filter(getenv("TEST_SKIP"));
	return cmocka_run_group_tests_name("leases", tests, NULL, NULL);
}
