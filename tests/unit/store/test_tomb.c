/*
 * test_tomb.c - unit tests of departed tombstones (store/tomb.c).
 *
 * Tombstones count in max_tombstones (a leave that would pass it is
 * refused whole); at tombstone_ttl they age out, whether or not the
 * reaper ran or anything touched their tenant, and free their slot; a
 * join after one starts over at generation 1.
 *
 * The fixture (fixture.h) gives each test a fresh store on a manual
 * clock and holds the nodes the test is handed; its teardown releases
 * them and recounts the store (store_check_all).
 */
#include <errno.h>

#include "store/store.h"
#include "tests/unit/unit.h"
#include "tests/unit/store/fixture.h"

static void test_max_tombstones_refuses_leave(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t, *p, *a, *g;
	struct store_stats before, after;

	store_limits_default(&l);
	l.max_tombstones = 1;
	reopen(c, &l);

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "hi");
	assert_int_equal(store_depart(c->s, t, "ghost", NULL), 0);

	before = stats(c, NULL);
	assert_int_equal(store_rmdir(c->s, t, "p", NULL), -ENOSPC);
	assert_int_equal(store_depart(c->s, t, "p", NULL), -ENOSPC);
	assert_int_equal(store_depart(c->s, t, "other", NULL), -ENOSPC);
	after = stats(c, NULL);
	assert_gauges_eq(&before, &after);
	assert_int_equal(after.leaves, before.leaves);
	assert_true(after.refused[STORE_REFUSED_CAPACITY] >=
		    before.refused[STORE_REFUSED_CAPACITY] + 3);
	/* Nothing was removed. */
	assert_true(store_node_live(p));
	assert_true(store_node_live(a));
	assert_int_equal(gen(c, p), 1);
	assert_list(c, p, "a");
	assert_content(c, a, "hi");
	assert_gauges(c, t, 1, 1, 1, 1, 1, 2);
	check_ok(c);

	/* A rejoin of ghost frees the slot: now p can leave. */
	g = mk(c, t, "ghost");
	assert_int_equal(gen(c, g), 1);
	assert_int_equal(store_rmdir(c->s, t, "p", NULL), 0);
	assert_false(store_node_live(a));
	assert_gauges(c, t, 1, 1, 0, 0, 1, 0);
	check_ok(c);
}

static void test_tombstone_ttl(void **state)
{
	struct ctx *c = *state;
	uint64_t ttl = c->lim.tombstone_ttl_ms;
	struct store_node *t, *p;

	assert_int_equal(ttl, 600000);
	t = mk(c, root(c), "t");
	assert_int_equal(mkdir_rc(c, t, "p1"), 0);
	assert_int_equal(mkdir_rc(c, t, "p2"), 0);
	assert_int_equal(mkdir_rc(c, t, "p3"), 0);
	assert_int_equal(store_rmdir(c->s, t, "p1", NULL), 0);
	assert_int_equal(store_rmdir(c->s, t, "p2", NULL), 0);
	assert_int_equal(store_rmdir(c->s, t, "p3", NULL), 0);
	assert_int_equal(store_depart(c->s, t, "p4", NULL), 0);
	assert_gauges(c, t, 1, 0, 0, 0, 4, 0);

	/* Just before the TTL the tombstone still counts. */
	fake_clock_advance(&c->clk, ttl - 1);
	p = mk(c, t, "p1");
	assert_int_equal(gen(c, p), 2);
	assert_int_equal(stats(c, t).tombstones, 3);

	/* Past it, the tombstone is gone: the rejoin starts over at 1. */
	fake_clock_advance(&c->clk, 2);
	p = mk(c, t, "p2");
	assert_int_equal(gen(c, p), 1);
	/* p3 and p4 aged out too, without a rejoin. */
	assert_int_equal(mkdir_rc(c, root(c), "other"), 0);
	assert_int_equal(stats(c, t).tombstones, 0);
	assert_int_equal(stats(c, NULL).tombstones, 0);
	p = mk(c, t, "p4");
	assert_int_equal(gen(c, p), 1);
	p = mk(c, t, "p3");
	assert_int_equal(gen(c, p), 1);
	check_ok(c);
}

/* .stats counts only tombstones that have not aged out, whether or not
 * anything touched their tenant since. */
static void test_tombstone_ttl_stats_without_access(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *u;

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	assert_int_equal(store_depart(c->s, t, "x", NULL), 0);
	assert_int_equal(stats(c, NULL).tombstones, 1);
	fake_clock_advance(&c->clk, c->lim.tombstone_ttl_ms + 1);
	/* Activity elsewhere in the store, none in t. */
	assert_int_equal(mkdir_rc(c, u, "p"), 0);
	assert_int_equal(store_rmdir(c->s, u, "p", NULL), 0);
	assert_int_equal(stats(c, NULL).tombstones, 1); /* u's, fresh */
	assert_int_equal(stats(c, t).tombstones, 0);
	check_ok(c);
}

static void test_tombstone_ttl_frees_pool(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t;

	store_limits_default(&l);
	l.max_tombstones = 1;
	l.tombstone_ttl_ms = 1000;
	reopen(c, &l);

	t = mk(c, root(c), "t");
	assert_int_equal(store_depart(c->s, t, "a", NULL), 0);
	assert_int_equal(store_depart(c->s, t, "b", NULL), -ENOSPC);
	fake_clock_advance(&c->clk, 1001);
	/* An aged-out tombstone no longer holds a slot of the pool. */
	assert_int_equal(store_depart(c->s, t, "b", NULL), 0);
	assert_gauges(c, t, 1, 0, 0, 0, 1, 0);
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
		n = mk(c, t, "q");
		assert_int_equal(gen(c, n), 1);
	}
	check_ok(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_max_tombstones_refuses_leave),
		TEST(test_tombstone_ttl),
		TEST(test_tombstone_ttl_stats_without_access),
		TEST(test_tombstone_ttl_frees_pool),
		TEST_HOOKED(test_tombstone_aging_via_expire),
	};

	return run_store_tests("tomb", tests);
}
