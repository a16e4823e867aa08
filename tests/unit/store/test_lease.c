/*
 * test_lease.c - unit tests of leases (store/lease.c): their kinds, their
 * bounds, renewal, ttl 0, child_ttl and default_ttl, and the injected
 * clock.  The expiry of what they bound, the reaper's order and budget
 * and store_next_deadline are tested in test_reaper.c.
 *
 * What CONTRACT.md (s.4 Leases), seed 001 ("Time and cleanup") and
 * store.h promise: a lease gives a deadline = now + ttl on the injected
 * clock, and nothing else moves it; durations are bounded; renewal moves
 * it, ttl 0 removes it; child_ttl of a parent (else default_ttl) is what
 * a new child starts with.
 *
 *
 * The fixture (fixture.h) gives each test a fresh store on a manual
 * clock and holds the nodes the test is handed; its teardown releases
 * them and recounts the store (store_check_all).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/store.h"
#include "tests/unit/unit.h"
#include "tests/unit/store/fixture.h"

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
	keep(c, sp);

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
	q = mk(c, t, "q");
	assert_lease(c, q, 0, 0);
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
	check_ok(c);
}

static void test_default_ttl_expires_child(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t, *p, *a;
	struct store_stats s;
	struct store_attr at;
	int rc;

	store_limits_default(&l);
	l.default_ttl_ms = 1000;
	reopen(c, &l);

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	fake_clock_advance(&c->clk, 999);
	assert_int_equal(lookup_rc(c, p, "a"), 0);
	fake_clock_advance(&c->clk, 2);
	/* Past its deadline a child is never visible, reaped or not. */
	assert_int_equal(lookup_rc(c, p, "a"), -ENOENT);
	assert_list(c, p, "");
	rc = store_getattr(c->s, a, &at);
	assert_true(rc == -ESTALE || rc == -ENOENT);
	/* The name is free again. */
	assert_int_equal(create_rc(c, p, "a", true), 0);
	s = stats(c, NULL);
	assert_int_equal(s.expiries, 1);
	assert_int_equal(s.children, 1);
	assert_int_equal(s.links, 1);
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
	check_ok(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST_HOOKED(test_lease_get_set_kinds),
		TEST_HOOKED(test_durations_bounded),
		TEST_HOOKED(test_renew),
		TEST_HOOKED(test_renew_stale),
		TEST_HOOKED(test_set_ttl_zero_removes_lease),
		TEST_HOOKED(test_child_ttl_and_default_ttl),
		TEST(test_default_ttl_expires_child),
		TEST_HOOKED(test_deadlines_follow_injected_clock),
	};

	return run_store_tests("lease", tests);
}
