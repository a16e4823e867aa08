/*
 * test_store.c - unit tests of the store object's limits and counters
 * (store/store.c).
 *
 * Quotas (parent_quota, tenant_quota), ceilings (max_children counts
 * states, not links) and each tenant's share of a store-wide ceiling are
 * reserved before anything changes: a refusal is -EDQUOT or -ENOSPC,
 * counted under its reason, and changes nothing.  The .stats counters
 * count each admission, removal, join, leave and refusal once.
 *
 * The fixture (fixture.h) gives each test a fresh store on a manual
 * clock and holds the nodes the test is handed; its teardown releases
 * them and recounts the store (store_check_all).
 */
#include <errno.h>
#include <stdio.h>

#include "store/store.h"
#include "tests/unit/unit.h"
#include "tests/unit/store/fixture.h"

/* Quotas and ceilings --------------------------------------------------- */

static void test_parent_quota(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t, *p, *q, *x, *n = NULL;
	struct store_stats s0, s1;
	bool created = true;

	store_limits_default(&l);
	l.parent_quota = 2;
	reopen(c, &l);

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	assert_int_equal(create_rc(c, p, "a", true), 0);
	assert_int_equal(create_rc(c, p, "b", true), 0);
	x = cr(c, q, "x");

	s0 = stats(c, NULL);
	assert_int_equal(create_rc(c, p, "c", true), -EDQUOT);
	assert_int_equal(create_rc(c, p, "c", false), -EDQUOT);
	assert_int_equal(store_link(c->s, x, p, "x"), -EDQUOT);
	assert_int_equal(store_rename(c->s, q, "x", p, "x", 0), -EDQUOT);
	s1 = stats(c, NULL);
	assert_gauges_eq(&s0, &s1);
	assert_int_equal(s1.admissions, s0.admissions);
	assert_int_equal(s1.refused[STORE_REFUSED_QUOTA],
			 s0.refused[STORE_REFUSED_QUOTA] + 4);
	assert_list(c, p, "a,b");
	assert_list(c, q, "x");

	/* Opening an existing child is not an admission. */
	assert_int_equal(store_create(c->s, p, "a", &FOWN, false, &n, &created),
			 0);
	assert_false(created);
	put(c, n);
	/* A rename inside the parent does not add an entry. */
	assert_int_equal(store_rename(c->s, p, "a", p, "z", 0), 0);
	assert_int_equal(lookup_rc(c, p, "a"), -ENOENT);
	assert_int_equal(lookup_rc(c, p, "z"), 0);
	assert_int_equal(lookup_rc(c, p, "b"), 0);
	/* Other parents are not limited by p's count. */
	assert_int_equal(create_rc(c, q, "y", true), 0);

	assert_int_equal(store_unlink(c->s, p, "b"), 0);
	assert_int_equal(store_link(c->s, x, p, "x"), 0);
	assert_int_equal(nlink(c, x), 2);
	assert_int_equal(create_rc(c, p, "c", true), -EDQUOT);
	check_ok(c);
}

static void test_parent_quota_rename_replace_in_full_parent(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t, *p, *q, *x;

	store_limits_default(&l);
	l.parent_quota = 2;
	reopen(c, &l);

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	assert_int_equal(create_rc(c, p, "a", true), 0);
	assert_int_equal(create_rc(c, p, "b", true), 0);
	x = cr(c, q, "x");
	/* mv q/x p/b in a full p: p keeps 2 entries, so it is allowed. */
	assert_int_equal(store_rename(c->s, q, "x", p, "b", 0), 0);
	assert_list(c, p, "a,b");
	assert_list(c, q, "");
	assert_int_equal(ino_of(c, p, "b"), store_node_ino(x));
	assert_gauges(c, t, 1, 2, 2, 2, 0, 0);
	check_ok(c);
}

/*
 * Each store-wide resource a tenant can fill has a per-tenant share,
 * half the ceiling by default: a tenant at its share gets EDQUOT and
 * changes nothing, while the others still have their room; the ceiling
 * still answers ENOSPC first.
 */
static void test_tenant_shares(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t, *u, *a, *b, *x, *y, *c1, *c2, *d1;
	struct store_stats s0, s1;
	struct store_stage *st = NULL;
	struct store_attr in = { .size = 1 };

	store_limits_default(&l);
	l.max_parents = 4;
	l.max_children = 5;
	l.max_bytes = 20;
	l.max_tombstones = 4;
	reopen(c, &l);
	/* Half of each ceiling, rounded up. */
	assert_int_equal(store_limits(c->s)->tenant_max_parents, 2);
	assert_int_equal(store_limits(c->s)->tenant_max_children, 3);
	assert_int_equal(store_limits(c->s)->tenant_max_bytes, 10);
	assert_int_equal(store_limits(c->s)->tenant_max_tombstones, 2);

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	/* Parents. */
	a = mk(c, t, "a");
	b = mk(c, t, "b");
	s0 = stats(c, NULL);
	assert_int_equal(mkdir_rc(c, t, "c"), -EDQUOT);
	s1 = stats(c, NULL);
	assert_gauges_eq(&s0, &s1);
	assert_int_equal(s1.refused[STORE_REFUSED_QUOTA],
			 s0.refused[STORE_REFUSED_QUOTA] + 1);
	x = mk(c, u, "x");
	y = mk(c, u, "y");
	/* At the ceiling, ENOSPC comes first. */
	assert_int_equal(mkdir_rc(c, u, "z"), -ENOSPC);
	assert_int_equal(mkdir_rc(c, t, "c"), -ENOSPC);

	/* Children (states): a link adds none. */
	c1 = cr(c, a, "c1");
	c2 = cr(c, a, "c2");
	assert_int_equal(create_rc(c, b, "c3", true), 0);
	s0 = stats(c, NULL);
	assert_int_equal(create_rc(c, b, "c4", true), -EDQUOT);
	s1 = stats(c, NULL);
	assert_gauges_eq(&s0, &s1);
	assert_int_equal(store_link(c->s, c1, b, "c1"), 0);
	d1 = cr(c, x, "d1");
	assert_int_equal(create_rc(c, y, "d2", true), 0);
	assert_int_equal(create_rc(c, y, "d3", true), -ENOSPC);
	assert_gauges(c, t, 1, 2, 3, 4, 0, 0);
	assert_gauges(c, u, 1, 2, 2, 2, 0, 0);

	/* Bytes: the failing write reports it, the publication and a
	 * resize too, and the other tenant still has its room. */
	publish(c, c1, STORE_STAGE_REPLACE, "0123456789");
	s0 = stats(c, NULL);
	assert_int_equal(store_stage_open(c->s, c2, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_write(st, "x", 1, 0), -EDQUOT);
	store_stage_close(st);
	assert_int_equal(store_setattr(c->s, c2, STORE_SET_SIZE, &in, NULL),
			 -EDQUOT);
	assert_int_equal(publish_rc(c, c1, STORE_STAGE_APPEND, "!"), -EDQUOT);
	s1 = stats(c, NULL);
	assert_gauges_eq(&s0, &s1);
	assert_int_equal(s1.refused[STORE_REFUSED_QUOTA],
			 s0.refused[STORE_REFUSED_QUOTA] + 3);
	publish(c, d1, STORE_STAGE_REPLACE, "abcdefghij");
	assert_gauges(c, u, 1, 2, 2, 2, 0, 10);
	/* Shrinking frees the tenant's room. */
	publish(c, c1, STORE_STAGE_REPLACE, "012345678");
	publish(c, c2, STORE_STAGE_REPLACE, "x");
	assert_gauges(c, t, 1, 2, 3, 4, 0, 10);

	/* Tombstones: made-up names fill the tenant's share only; then
	 * its own leave is refused whole, and the other's works. */
	assert_int_equal(store_depart(c->s, t, "ghost1", NULL), 0);
	assert_int_equal(store_depart(c->s, t, "ghost2", NULL), 0);
	s0 = stats(c, NULL);
	assert_int_equal(store_depart(c->s, t, "ghost3", NULL), -EDQUOT);
	assert_int_equal(store_rmdir(c->s, t, "a", NULL), -EDQUOT);
	assert_int_equal(store_depart(c->s, t, "b", NULL), -EDQUOT);
	s1 = stats(c, NULL);
	assert_gauges_eq(&s0, &s1);
	assert_int_equal(s1.leaves, s0.leaves);
	assert_true(store_node_live(a));
	assert_list(c, a, "c1,c2");
	/* Departing a tombstone's name again takes nothing more. */
	assert_int_equal(store_depart(c->s, t, "ghost1", NULL), 0);
	assert_int_equal(store_rmdir(c->s, u, "x", NULL), 0);
	assert_int_equal(store_depart(c->s, u, "ghost", NULL), 0);
	/* The pool is full now: ENOSPC comes first. */
	assert_int_equal(store_rmdir(c->s, u, "y", NULL), -ENOSPC);
	assert_int_equal(store_depart(c->s, t, "ghost3", NULL), -ENOSPC);
	assert_gauges(c, t, 1, 2, 3, 4, 2, 10);
	assert_gauges(c, u, 1, 1, 1, 1, 2, 0);
	/* Aged out, they make room again. */
	advance(c, l.tombstone_ttl_ms);
	assert_int_equal(store_rmdir(c->s, t, "a", NULL), 0);
	assert_gauges(c, t, 1, 1, 2, 2, 1, 9); /* c1 lives on in b */
	check_ok(c);
}

/* 0 takes a share away (the ceiling alone); a number sets it. */
static void test_tenant_shares_explicit(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t, *p;

	store_limits_default(&l);
	l.max_parents = 4;
	l.max_tombstones = 4;
	l.tenant_max_parents = 0;
	l.tenant_max_tombstones = 3;
	reopen(c, &l);
	assert_int_equal(store_limits(c->s)->tenant_max_parents, 0);
	assert_int_equal(store_limits(c->s)->tenant_max_tombstones, 3);
	t = mk(c, root(c), "t");
	for (int i = 0; i < 4; i++) {
		char name[16];

		snprintf(name, sizeof name, "p%d", i);
		assert_int_equal(mkdir_rc(c, t, name), 0);
	}
	assert_int_equal(mkdir_rc(c, t, "p4"), -ENOSPC);
	assert_int_equal(store_depart(c->s, t, "g0", NULL), 0);
	assert_int_equal(store_depart(c->s, t, "g1", NULL), 0);
	assert_int_equal(store_rmdir(c->s, t, "p0", NULL), 0);
	assert_int_equal(store_rmdir(c->s, t, "p1", NULL), -EDQUOT);
	p = lk(c, t, "p1");
	assert_true(store_node_live(p));
	assert_gauges(c, t, 1, 3, 0, 0, 3, 0);
	check_ok(c);
}

static void test_tenant_quota(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t, *u, *p, *q, *r, *a;
	struct store_stats s0, s1;

	store_limits_default(&l);
	l.tenant_quota = 3;
	reopen(c, &l);

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	r = mk(c, u, "r");
	a = cr(c, p, "a");
	assert_int_equal(create_rc(c, p, "b", true), 0);
	assert_int_equal(create_rc(c, q, "c", true), 0);

	s0 = stats(c, NULL);
	assert_int_equal(create_rc(c, q, "d", true), -EDQUOT);
	assert_int_equal(store_link(c->s, a, q, "a"), -EDQUOT); /* links count */
	s1 = stats(c, NULL);
	assert_gauges_eq(&s0, &s1);
	assert_int_equal(s1.refused[STORE_REFUSED_QUOTA],
			 s0.refused[STORE_REFUSED_QUOTA] + 2);
	/* A rename inside the tenant adds no entry. */
	assert_int_equal(store_rename(c->s, p, "b", q, "b", 0), 0);
	/* Another tenant has its own quota. */
	assert_int_equal(create_rc(c, r, "1", true), 0);
	assert_int_equal(create_rc(c, r, "2", true), 0);
	assert_int_equal(create_rc(c, r, "3", true), 0);
	assert_int_equal(create_rc(c, r, "4", true), -EDQUOT);

	assert_int_equal(store_unlink(c->s, q, "b"), 0);
	assert_int_equal(store_link(c->s, a, q, "a"), 0);
	assert_gauges(c, t, 1, 2, 2, 3, 0, 0);
	assert_int_equal(create_rc(c, q, "d", true), -EDQUOT);
	check_ok(c);
}

static void test_max_children_counts_states(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t, *u, *p, *q, *r, *a;
	struct store_stats s0, s1;

	store_limits_default(&l);
	l.max_children = 2;
	l.tenant_max_children = 0; /* the ceiling alone */
	reopen(c, &l);

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	r = mk(c, u, "r");
	a = cr(c, p, "a");
	/* A link adds no state. */
	assert_int_equal(store_link(c->s, a, q, "a"), 0);
	assert_int_equal(create_rc(c, q, "b", true), 0);
	assert_gauges(c, NULL, 2, 3, 2, 3, 0, 0);

	s0 = stats(c, NULL);
	assert_int_equal(create_rc(c, p, "c", true), -ENOSPC);
	assert_int_equal(create_rc(c, r, "c", true), -ENOSPC); /* store-wide */
	s1 = stats(c, NULL);
	assert_gauges_eq(&s0, &s1);
	assert_int_equal(s1.refused[STORE_REFUSED_CAPACITY],
			 s0.refused[STORE_REFUSED_CAPACITY] + 2);
	/* But more links still fit. */
	assert_int_equal(store_link(c->s, a, p, "a2"), 0);
	assert_gauges(c, NULL, 2, 3, 2, 4, 0, 0);

	/* Removing one link of a shared state frees no state slot. */
	assert_int_equal(store_unlink(c->s, p, "a"), 0);
	assert_int_equal(create_rc(c, r, "c", true), -ENOSPC);
	assert_int_equal(store_unlink(c->s, q, "b"), 0);
	assert_int_equal(create_rc(c, r, "c", true), 0);
	check_ok(c);
}

/* Counters ---------------------------------------------------------------- */

static void test_stats_counters(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t, *u, *p, *a, *old;
	struct store_stage *st = NULL;
	struct store_stats s0, s1;
	char big[8] = "xxxxxxx";

	store_limits_default(&l);
	l.max_payload = 4;
	l.max_tenants = 2;
	reopen(c, &l);

	s0 = stats(c, NULL);
	assert_int_equal(s0.tenants, 0);
	assert_int_equal(s0.admissions, 0);
	assert_int_equal(s0.removals, 0);
	assert_int_equal(s0.expiries, 0);
	assert_int_equal(s0.joins, 0);
	assert_int_equal(s0.leaves, 0);
	for (int i = 0; i < STORE_NREFUSAL; i++)
		assert_int_equal(s0.refused[i], 0);

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	p = mk(c, t, "p");
	old = mk(c, t, "old");
	a = cr(c, p, "a");
	assert_int_equal(create_rc(c, p, "b", true), 0);
	s1 = stats(c, NULL);
	assert_int_equal(s1.joins, 2);
	assert_int_equal(s1.admissions, 2);
	assert_int_equal(s1.tenants, 2);
	assert_int_equal(s1.parents, 2);
	assert_int_equal(s1.children, 2);
	assert_int_equal(s1.links, 2);

	/* Each refusal is counted once under its reason, nothing else moves. */
	s0 = stats(c, NULL);
	assert_int_equal(mkdir_rc(c, root(c), "v"), -ENOSPC);
	s1 = stats(c, NULL);
	assert_int_equal(s1.refused[STORE_REFUSED_CAPACITY],
			 s0.refused[STORE_REFUSED_CAPACITY] + 1);
	assert_gauges_eq(&s0, &s1);

	s0 = s1;
	assert_int_equal(create_rc(c, p, "a", true), -EEXIST);
	s1 = stats(c, NULL);
	assert_int_equal(s1.refused[STORE_REFUSED_EXISTS],
			 s0.refused[STORE_REFUSED_EXISTS] + 1);
	assert_int_equal(s1.admissions, s0.admissions);

	s0 = s1;
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_write(st, big, 5, 0), -EFBIG);
	store_stage_close(st);
	s1 = stats(c, NULL);
	assert_int_equal(s1.refused[STORE_REFUSED_PAYLOAD],
			 s0.refused[STORE_REFUSED_PAYLOAD] + 1);

	assert_int_equal(store_rmdir(c->s, t, "old", NULL), 0);
	s0 = stats(c, NULL);
	assert_int_equal(create_rc(c, old, "x", true), -ESTALE);
	s1 = stats(c, NULL);
	assert_int_equal(s1.refused[STORE_REFUSED_STALE],
			 s0.refused[STORE_REFUSED_STALE] + 1);
	assert_int_equal(s1.leaves, s0.leaves);
	assert_int_equal(s1.leaves, 1);
	assert_int_equal(s1.tombstones, 1);

	s0 = s1;
	assert_int_equal(store_unlink(c->s, p, "b"), 0);
	s1 = stats(c, NULL);
	assert_int_equal(s1.removals, s0.removals + 1);
	assert_int_equal(s1.children, s0.children - 1);
	assert_int_equal(s1.links, s0.links - 1);
	assert_int_equal(s1.admissions, s0.admissions);

	/* Per tenant: the gauges of that tenant only. */
	publish(c, a, STORE_STAGE_REPLACE, "abc");
	assert_gauges(c, t, 1, 1, 1, 1, 1, 3);
	assert_gauges(c, u, 1, 0, 0, 0, 0, 0);
	assert_gauges(c, NULL, 2, 1, 1, 1, 1, 3);
	check_ok(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_parent_quota),
		TEST(test_parent_quota_rename_replace_in_full_parent),
		TEST(test_tenant_shares),
		TEST(test_tenant_shares_explicit),
		TEST(test_tenant_quota),
		TEST(test_max_children_counts_states),
		TEST(test_stats_counters),
	};

	return run_store_tests("store", tests);
}
