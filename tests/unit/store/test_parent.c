/*
 * test_parent.c - unit tests of parents (store/parent.c).
 *
 * A member joins (mkdir in a tenant) at generation 1, leaves (rmdir) with
 * a cascade of its children and a tombstone, and rejoins at the next
 * generation; .depart does the same for a live parent and records a
 * tombstone for a name that never joined; max_parents bounds them.  A
 * parent past its deadline has left, reaped or not, as by rmdir.
 * Handles of a departed parent answer -ESTALE and change nothing.
 *
 * The fixture (fixture.h) gives each test a fresh store on a manual
 * clock and holds the nodes the test is handed; its teardown releases
 * them and recounts the store (store_check_all).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "tests/unit/unit.h"
#include "tests/unit/store/fixture.h"

/* Join, leave, rejoin, depart --------------------------------------------- */

static void test_parent_join_leave_rejoin(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *p2, *p3, *a, *n = NULL;
	struct store_stats s0, s1;
	struct store_attr at;
	uint64_t g = 0;

	t = mk(c, root(c), "t");
	s0 = stats(c, NULL);
	p = mk(c, t, "p");
	assert_int_equal(store_node_kind(p), STORE_PARENT);
	assert_int_equal(store_node_depth(p), 2);
	assert_string_equal(store_node_name(p), "p");
	assert_true(store_node_tenant(p) == t);
	assert_int_equal(gen(c, p), 1);
	s1 = stats(c, NULL);
	assert_int_equal(s1.joins, s0.joins + 1);
	assert_int_equal(store_mkdir(c->s, t, "p", &DOWN, &n), -EEXIST);

	a = cr(c, p, "a");
	assert_int_equal(create_rc(c, p, "b", true), 0);
	publish(c, a, STORE_STAGE_REPLACE, "data");
	assert_gauges(c, t, 1, 1, 2, 2, 0, 4);

	/* Leave with children: cascade + tombstone. */
	s0 = stats(c, NULL);
	assert_int_equal(store_rmdir(c->s, t, "p", NULL), 0);
	s1 = stats(c, NULL);
	assert_int_equal(s1.leaves, s0.leaves + 1);
	assert_gauges(c, t, 1, 0, 0, 0, 1, 0);
	assert_gauges(c, NULL, 1, 0, 0, 0, 1, 0);
	assert_int_equal(lookup_rc(c, t, "p"), -ENOENT);
	assert_list(c, t, "");
	assert_false(store_node_live(p));
	assert_false(store_node_live(a));
	assert_int_equal(store_getattr(c->s, p, &at), -ESTALE);
	assert_int_equal(store_getattr(c->s, a, &at), -ESTALE);
	assert_int_equal(store_parent_generation(c->s, p, &g), -ESTALE);
	/* A late admission through the old handle: -ESTALE, no change. */
	assert_int_equal(create_rc(c, p, "late", true), -ESTALE);
	assert_int_equal(create_rc(c, p, "late", false), -ESTALE);
	assert_gauges(c, t, 1, 0, 0, 0, 1, 0);
	assert_int_equal(store_rmdir(c->s, t, "p", NULL), -ENOENT);
	check_ok(c);

	/* Rejoin: generation + 1, tombstone cleared, new inode, empty. */
	p2 = mk(c, t, "p");
	assert_int_equal(gen(c, p2), 2);
	assert_true(store_node_ino(p2) > store_node_ino(p));
	assert_list(c, p2, "");
	assert_gauges(c, t, 1, 1, 0, 0, 0, 0);
	assert_int_equal(store_rmdir(c->s, t, "p", NULL), 0);
	p3 = mk(c, t, "p");
	assert_int_equal(gen(c, p3), 3);

	/* Nothing below a parent is a directory. */
	assert_int_equal(mkdir_rc(c, p3, "d"), -EPERM);
	{
		/* store.h says -EPERM; -ENOENT (no such name) and -ENOTDIR
		 * (a child) are what rmdir(2) itself would answer. */
		int rc = store_rmdir(c->s, p3, "d", NULL);

		assert_true(rc == -EPERM || rc == -ENOENT);
		assert_int_equal(create_rc(c, p3, "f", true), 0);
		rc = store_rmdir(c->s, p3, "f", NULL);
		assert_true(rc == -EPERM || rc == -ENOTDIR);
		assert_int_equal(store_unlink(c->s, p3, "f"), 0);
	}
	assert_gauges(c, t, 1, 1, 0, 0, 0, 0);
	check_ok(c);
}

static void test_depart_nonexisting_parent(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p;

	t = mk(c, root(c), "t");
	assert_int_equal(store_depart(c->s, t, "x", NULL), 0);
	assert_gauges(c, t, 1, 0, 0, 0, 1, 0);
	/* A second member-left of the same name keeps one tombstone. */
	assert_int_equal(store_depart(c->s, t, "x", NULL), 0);
	assert_gauges(c, t, 1, 0, 0, 0, 1, 0);
	assert_int_equal(lookup_rc(c, t, "x"), -ENOENT);
	assert_list(c, t, "");
	check_ok(c);

	/* The tombstone has generation 0: the join gets 1, and clears it. */
	p = mk(c, t, "x");
	assert_int_equal(gen(c, p), 1);
	assert_gauges(c, t, 1, 1, 0, 0, 0, 0);
	check_ok(c);
}

static void test_depart_live_parent_cascades(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *a, *b, *p2;
	struct store_stats s0, s1;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	a = cr(c, p, "a");
	b = cr(c, p, "b");
	publish(c, b, STORE_STAGE_REPLACE, "bee");
	assert_int_equal(store_link(c->s, b, q, "b"), 0);

	s0 = stats(c, NULL);
	assert_int_equal(store_depart(c->s, t, "p", NULL), 0);
	s1 = stats(c, NULL);
	assert_int_equal(s1.leaves, s0.leaves + 1);
	assert_int_equal(lookup_rc(c, t, "p"), -ENOENT);
	assert_false(store_node_live(p));
	assert_false(store_node_live(a));
	/* b was shared with q: it lost only p's link. */
	assert_true(store_node_live(b));
	assert_int_equal(nlink(c, b), 1);
	assert_content(c, b, "bee");
	assert_gauges(c, t, 1, 1, 1, 1, 1, 3);
	assert_int_equal(create_rc(c, p, "c", true), -ESTALE);
	check_ok(c);

	p2 = mk(c, t, "p");
	assert_int_equal(gen(c, p2), 2);
	check_ok(c);
}

static void test_max_parents(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t, *u;
	struct store_stats before, after;

	store_limits_default(&l);
	l.max_parents = 2;
	l.tenant_max_parents = 0; /* the ceiling alone */
	reopen(c, &l);

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	assert_int_equal(mkdir_rc(c, t, "a"), 0);
	assert_int_equal(mkdir_rc(c, u, "b"), 0);
	before = stats(c, NULL);
	assert_int_equal(mkdir_rc(c, t, "c"), -ENOSPC);
	assert_int_equal(mkdir_rc(c, u, "c"), -ENOSPC);
	after = stats(c, NULL);
	assert_gauges_eq(&before, &after);
	assert_int_equal(after.joins, before.joins);
	assert_int_equal(after.refused[STORE_REFUSED_CAPACITY],
			 before.refused[STORE_REFUSED_CAPACITY] + 2);
	assert_int_equal(store_rmdir(c->s, t, "a", NULL), 0);
	assert_int_equal(mkdir_rc(c, u, "c"), 0);
	check_ok(c);
}

static void test_dead_parent_handle_changes_nothing(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *old, *neu, *q, *x;
	struct store_stats s0, s1;

	t = mk(c, root(c), "t");
	old = mk(c, t, "p");
	q = mk(c, t, "q");
	x = cr(c, q, "x");
	assert_int_equal(store_rmdir(c->s, t, "p", NULL), 0);
	neu = mk(c, t, "p");
	assert_int_equal(create_rc(c, neu, "a", true), 0);

	s0 = stats(c, NULL);
	assert_int_equal(create_rc(c, old, "b", true), -ESTALE);
	assert_int_equal(create_rc(c, old, "a", false), -ESTALE);
	assert_int_equal(store_unlink(c->s, old, "a"), -ESTALE);
	assert_int_equal(store_link(c->s, x, old, "x"), -ESTALE);
	assert_int_equal(store_rename(c->s, q, "x", old, "x", 0), -ESTALE);
	assert_int_equal(store_rename(c->s, old, "a", q, "a", 0), -ESTALE);
	assert_int_equal(lookup_rc(c, old, "a"), -ESTALE);
	s1 = stats(c, NULL);
	assert_gauges_eq(&s0, &s1);
	assert_int_equal(s1.admissions, s0.admissions);
	assert_int_equal(s1.removals, s0.removals);
	assert_true(s1.refused[STORE_REFUSED_STALE] >
		    s0.refused[STORE_REFUSED_STALE]);

	/* The new incarnation is untouched. */
	assert_list(c, neu, "a");
	assert_list(c, q, "x");
	assert_int_equal(gen(c, neu), 2);
	assert_true(store_node_live(x));
	check_ok(c);
}

/* Cascade permissions ----------------------------------------------------- */

/*
 * .depart follows the rule of rmdir of the parent; a name that is not a
 * live parent (nothing to cascade) is recorded for anyone the kernel let
 * write.
 */
static void test_depart_cascade_permissions(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p;
	struct store_stats was;

	t = mk_as(c, root(c), "t", 1001, 0755);
	p = mk_as(c, t, "m", 1002, 0700);
	cr_as(c, p, "c", 1002);
	p = mk_as(c, t, "e", 1002, 0700);
	was = stats(c, NULL);
	/* The tenant's owner cannot empty another user's 0700 parent. */
	assert_int_equal(store_depart(c->s, t, "m", &U1), -EACCES);
	assert_same_gauges(c, &was);
	assert_list(c, t, "e,m");
	/* An empty one, or one that never joined, it departs. */
	assert_int_equal(store_depart(c->s, t, "e", &U1), 0);
	assert_int_equal(store_depart(c->s, t, "ghost", &U1), 0);
	/* Root can. */
	assert_int_equal(store_depart(c->s, t, "m", &ROOTC), 0);
	assert_list(c, t, "");
	assert_int_equal(stats(c, NULL).tombstones, 3);
	check_ok(c);
}

/* Expiry is a leave ------------------------------------------------------- */

static void test_parent_expiry_cascades(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *a, *b, *n;
	struct store_stats s0, s1;
	struct store_attr at;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
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
	check_ok(c);
}

/* An expired parent: its handles, its .depart ----------------------------- */

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
	check_ok(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_parent_join_leave_rejoin),
		TEST(test_depart_nonexisting_parent),
		TEST(test_depart_live_parent_cascades),
		TEST(test_max_parents),
		TEST(test_dead_parent_handle_changes_nothing),
		TEST(test_depart_cascade_permissions),
		TEST_HOOKED(test_parent_expiry_cascades),
		TEST_HOOKED(test_parent_expired_before_reap),
		TEST_HOOKED(test_expired_parent_handle_changes_nothing),
		TEST_HOOKED(test_depart_of_expired_parent),
	};

	return run_store_tests("parent", tests);
}
