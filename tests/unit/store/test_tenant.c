/*
 * test_tenant.c - unit tests of tenants (store/tenant.c).
 *
 * A tenant is made by a mkdir at the root (max_tenants bounds them) and
 * cleaned up by an rmdir there, with everything in it, in one transition;
 * its nodes then answer -ESTALE, also where the other end of a link or a
 * rename is in a new incarnation.  A caller other than root may clean up
 * a tenant or leave a parent only as far as it could empty it by hand on
 * Linux; a refusal is -EACCES and changes nothing.
 *
 * The fixture (fixture.h) gives each test a fresh store on a manual
 * clock and holds the nodes the test is handed; its teardown releases
 * them and recounts the store (store_check_all).
 */
#include <errno.h>
#include <sys/stat.h>

#include "store/store.h"
#include "tests/unit/unit.h"
#include "tests/unit/store/fixture.h"

/* Creation and cleanup ---------------------------------------------------- */

static void test_root_and_tenant_mkdir(void **state)
{
	struct ctx *c = *state;
	struct store_node *r = root(c), *t, *n = NULL;
	struct store_attr a;

	assert_int_equal(store_node_kind(r), STORE_ROOT);
	assert_int_equal(store_node_ino(r), STORE_ROOT_INO);
	assert_int_equal(store_node_depth(r), 0);
	assert_true(store_node_live(r));
	assert_null(store_node_tenant(r));
	assert_int_equal(store_state(c->s), STORE_READY);
	assert_int_equal(store_now_ms(c->s), c->clk.now_ms);
	assert_int_equal(store_limits(c->s)->max_tenants, 1024);

	t = mk(c, r, "acme");
	assert_int_equal(store_node_kind(t), STORE_TENANT);
	assert_int_equal(store_node_depth(t), 1);
	assert_string_equal(store_node_name(t), "acme");
	assert_true(store_node_live(t));
	assert_true(store_node_tenant(t) == t);
	assert_true(store_node_ino(t) != STORE_ROOT_INO);

	assert_int_equal(store_getattr(c->s, t, &a), 0);
	assert_true(S_ISDIR(a.mode));
	assert_int_equal(a.mode & 07777, 0755);
	assert_int_equal(a.uid, 1000);
	assert_int_equal(a.gid, 1000);
	assert_int_equal(a.ino, store_node_ino(t));

	assert_int_equal(ino_of(c, r, "acme"), store_node_ino(t));
	assert_int_equal(store_mkdir(c->s, r, "acme", &DOWN, &n), -EEXIST);
	assert_int_equal(lookup_rc(c, r, "nope"), -ENOENT);
	assert_gauges(c, NULL, 1, 0, 0, 0, 0, 0);

	/* A regular file at root or tenant level is refused. */
	assert_int_equal(create_rc(c, r, "f", true), -EPERM);
	assert_int_equal(create_rc(c, t, "f", true), -EPERM);
	/* rmdir of a missing tenant. */
	assert_int_equal(store_rmdir(c->s, r, "nope", NULL), -ENOENT);
	assert_gauges(c, NULL, 1, 0, 0, 0, 0, 0);
	check_ok(c);
}

static void test_max_tenants(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_stats before, after;

	store_limits_default(&l);
	l.max_tenants = 2;
	reopen(c, &l);

	assert_int_equal(mkdir_rc(c, root(c), "a"), 0);
	assert_int_equal(mkdir_rc(c, root(c), "b"), 0);
	before = stats(c, NULL);
	assert_int_equal(mkdir_rc(c, root(c), "c"), -ENOSPC);
	after = stats(c, NULL);
	assert_gauges_eq(&before, &after);
	assert_int_equal(after.refused[STORE_REFUSED_CAPACITY],
			 before.refused[STORE_REFUSED_CAPACITY] + 1);
	assert_int_equal(lookup_rc(c, root(c), "c"), -ENOENT);

	/* Cleaning one tenant up frees its slot. */
	assert_int_equal(store_rmdir(c->s, root(c), "a", NULL), 0);
	assert_int_equal(mkdir_rc(c, root(c), "c"), 0);
	assert_gauges(c, NULL, 2, 0, 0, 0, 0, 0);
	check_ok(c);
}

static void test_tenant_cleanup_cascade(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *u, *p, *q, *a, *b, *ua, *up, *t2, *p2;
	uint64_t t_ino;

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	a = cr(c, p, "a");
	b = cr(c, p, "b");
	publish(c, a, STORE_STAGE_REPLACE, "hello");
	assert_int_equal(store_link(c->s, a, q, "a"), 0);
	assert_int_equal(mkdir_rc(c, t, "r"), 0);
	assert_int_equal(store_rmdir(c->s, t, "r", NULL), 0);       /* tombstone */
	assert_int_equal(store_depart(c->s, t, "ghost", NULL), 0);  /* tombstone */
	up = mk(c, u, "up");
	ua = cr(c, up, "ua");
	publish(c, ua, STORE_STAGE_REPLACE, "xyz");
	assert_gauges(c, t, 1, 2, 2, 3, 2, 5);
	assert_gauges(c, NULL, 2, 3, 3, 4, 2, 8);
	t_ino = store_node_ino(t);

	assert_int_equal(store_rmdir(c->s, root(c), "t", NULL), 0);
	/* Everything of t went, in one transition; u is untouched. */
	assert_gauges(c, NULL, 1, 1, 1, 1, 0, 3);
	assert_gauges(c, u, 1, 1, 1, 1, 0, 3);
	assert_content(c, ua, "xyz");
	assert_list(c, root(c), "u");
	assert_int_equal(lookup_rc(c, root(c), "t"), -ENOENT);
	check_ok(c);

	/* Every node of t is dead and answers -ESTALE. */
	{
		struct store_node *dead[] = { t, p, q, a, b };
		struct store_attr at;
		struct store_stage *st = NULL;

		for (size_t i = 0; i < sizeof dead / sizeof dead[0]; i++) {
			assert_false(store_node_live(dead[i]));
			assert_int_equal(store_getattr(c->s, dead[i], &at),
					 -ESTALE);
		}
		assert_int_equal(lookup_rc(c, t, "p"), -ESTALE);
		assert_int_equal(mkdir_rc(c, t, "p"), -ESTALE);
		assert_int_equal(create_rc(c, p, "z", true), -ESTALE);
		assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_READ,
						  &st), -ESTALE);
	}

	/* A new t is a new, empty incarnation: no tombstones survive. */
	t2 = mk(c, root(c), "t");
	assert_true(store_node_ino(t2) > t_ino);
	assert_list(c, t2, "");
	p2 = mk(c, t2, "p");
	assert_int_equal(gen(c, p2), 1);
	p2 = mk(c, t2, "r");
	assert_int_equal(gen(c, p2), 1);
	p2 = mk(c, t2, "ghost");
	assert_int_equal(gen(c, p2), 1);
	assert_gauges(c, t2, 1, 3, 0, 0, 0, 0);
	check_ok(c);
}

/* Handles of an earlier incarnation of the tenant (an old working
 * directory kept across `rmdir T; mkdir T`) answer -ESTALE, also where
 * the other end of a link or rename is in the new incarnation. */
static void test_old_tenant_incarnation_handles(void **state)
{
	struct ctx *c = *state;
	struct store_node *t1, *p1, *a1, *t2, *p2, *a2;
	struct store_stats s0, s1;

	t1 = mk(c, root(c), "t");
	p1 = mk(c, t1, "p");
	a1 = cr(c, p1, "a");
	assert_int_equal(store_rmdir(c->s, root(c), "t", NULL), 0);
	t2 = mk(c, root(c), "t");
	p2 = mk(c, t2, "p");
	a2 = cr(c, p2, "a");

	s0 = stats(c, NULL);
	assert_int_equal(store_link(c->s, a2, p1, "b"), -ESTALE);
	assert_int_equal(store_link(c->s, a1, p2, "b"), -ESTALE);
	assert_int_equal(store_rename(c->s, p2, "a", p1, "a", 0), -ESTALE);
	assert_int_equal(store_rename(c->s, p1, "a", p2, "b", 0), -ESTALE);
	assert_int_equal(mkdir_rc(c, t1, "q"), -ESTALE);
	assert_int_equal(store_rmdir(c->s, t1, "p", NULL), -ESTALE);
	assert_int_equal(store_depart(c->s, t1, "p", NULL), -ESTALE);
	s1 = stats(c, NULL);
	assert_gauges_eq(&s0, &s1);
	assert_list(c, p2, "a");
	assert_int_equal(gen(c, p2), 1);
	check_ok(c);
}

/* Cascade permissions ----------------------------------------------------- */

/*
 * rmdir of a tenant or parent with content, by a caller other than root,
 * is allowed only as far as emptying it by hand would be on Linux; a
 * refusal is EACCES and changes nothing.
 */
static void test_rmdir_cascade_permissions(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *w, *p;
	struct store_stats was;

	/* A 0700 tenant of 1001 with a parent and a child: closed to 1002,
	 * open to its owner. */
	t = mk_as(c, root(c), "t", 1001, 0700);
	p = mk_as(c, t, "p", 1001, 0755);
	cr_as(c, p, "c", 1001);
	was = stats(c, NULL);
	assert_int_equal(store_rmdir(c->s, root(c), "t", &U2), -EACCES);
	assert_int_equal(store_depart(c->s, t, "p", &U2), -EACCES);
	assert_same_gauges(c, &was);
	assert_list(c, t, "p");
	assert_int_equal(store_rmdir(c->s, root(c), "t", &U1), 0);

	/* A 0777 tenant: its parents decide.  A 0700 parent of 1001 with a
	 * child cannot be emptied by 1002; an empty one can go. */
	w = mk_as(c, root(c), "w", 1001, 0777);
	p = mk_as(c, w, "p", 1001, 0700);
	mk_as(c, w, "q", 1001, 0700);
	cr_as(c, p, "c", 1001);
	was = stats(c, NULL);
	assert_int_equal(store_rmdir(c->s, w, "p", &U2), -EACCES);
	assert_int_equal(store_rmdir(c->s, root(c), "w", &U2), -EACCES);
	assert_same_gauges(c, &was);
	assert_list(c, w, "p,q");
	assert_list(c, p, "c");
	assert_int_equal(store_rmdir(c->s, w, "q", &U2), 0);
	/* A child past its deadline is gone, reaped or not. */
	{
		struct store_node *cc = lk(c, p, "c");

		set_ttl(c, cc, 100);
	}
	advance(c, 100);
	assert_int_equal(store_rmdir(c->s, root(c), "w", &U2), 0);

	/* A sticky tenant of 1001: 1003 may remove none of 1002's parents,
	 * so not the tenant either; its owner may. */
	t = mk_as(c, root(c), "s", 1001, 01777);
	p = mk_as(c, t, "p2", 1002, 0777);
	cr_as(c, p, "c", 1002);
	p = mk_as(c, t, "p3", 1003, 0755);
	was = stats(c, NULL);
	assert_int_equal(store_rmdir(c->s, root(c), "s", &U3), -EACCES);
	assert_int_equal(store_rmdir(c->s, t, "p2", &U3), -EACCES);
	assert_same_gauges(c, &was);
	assert_int_equal(store_rmdir(c->s, t, "p3", &U3), 0);
	assert_int_equal(store_rmdir(c->s, root(c), "s", &U1), 0);

	/* A sticky parent: each child must be the caller's, unless the
	 * parent is. */
	t = mk_as(c, root(c), "u", 1001, 0777);
	p = mk_as(c, t, "sp", 1001, 01777);
	cr_as(c, p, "mine", 1002);
	cr_as(c, p, "theirs", 1003);
	was = stats(c, NULL);
	assert_int_equal(store_rmdir(c->s, t, "sp", &U2), -EACCES);
	assert_int_equal(store_rmdir(c->s, root(c), "u", &U2), -EACCES);
	assert_same_gauges(c, &was);
	assert_int_equal(store_unlink(c->s, p, "theirs"), 0);
	assert_int_equal(store_rmdir(c->s, t, "sp", &U2), 0);

	/* Root, and a call without credentials, are never refused. */
	p = mk_as(c, t, "x", 1001, 0);
	cr_as(c, p, "c", 1001);
	p = mk_as(c, t, "y", 1001, 0);
	cr_as(c, p, "c", 1001);
	assert_int_equal(store_rmdir(c->s, t, "x", &ROOTC), 0);
	assert_int_equal(store_depart(c->s, t, "y", NULL), 0);
	assert_int_equal(store_rmdir(c->s, root(c), "u", &ROOTC), 0);
	check_ok(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_root_and_tenant_mkdir),
		TEST(test_max_tenants),
		TEST(test_tenant_cleanup_cascade),
		TEST(test_old_tenant_incarnation_handles),
		TEST(test_rmdir_cascade_permissions),
	};

	return run_store_tests("tenant", tests);
}
