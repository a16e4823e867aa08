/*
 * test_drain_tenant.c - unit tests of draining one tenant
 * (store/drain.c): its window, what it refuses and to whom, its clear,
 * and the tenant left drained and empty beside the others.
 *
 * What CONTRACT.md s.5 (.drain), seed 001 ("Restart and graceful drain")
 * and store.h promise: a drain (of the whole store or of one tenant)
 * starts with a deadline of now + drain_window that a second call does
 * not move; while it runs every new tenant, parent, child, link, rename
 * into a parent and lease change or renewal in scope is refused with
 * -EROFS, while existing children may still be written and removed; at
 * the deadline, or as soon as no child remains in scope, everything in
 * scope is cleared in one transition (the tenants too for the whole
 * store; a drained tenant stays, empty) and the scope stays drained,
 * refusing.  store_drain_now() ends the window at once;
 * store_next_deadline() includes a running drain's deadline; the event
 * log has one "drain" line at the start and one per parent (and per
 * tenant, for the whole store) at the clear, internal, naming the removed
 * node.  A tenant's drain starts only for a caller that could empty the
 * tenant by hand.
 *
 * The fixture (fixture.h) gives each test a fresh store on a manual
 * clock and holds the nodes the test is handed; its teardown releases
 * them and recounts the store (store_check_all).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "layout/layout.h"
#include "store/store.h"
#include "tests/unit/unit.h"
#include "tests/unit/store/fixture.h"
#include "tests/unit/store/drain.h"

/* Drain: one tenant -------------------------------------------------------- */

static void test_tenant_drain(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *u, *p, *q, *r, *a, *x, *tt = NULL;
	struct store_stats su;
	struct rd d, dt, du;
	uint64_t t0, r0;

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	r = mk(c, u, "r");
	a = cr(c, p, "a");
	cr(c, q, "b");
	x = cr(c, r, "x");
	publish(c, a, STORE_STAGE_REPLACE, "aaaa");
	publish(c, x, STORE_STAGE_REPLACE, "xx");
	assert_int_equal(store_depart(c->s, t, "ghost", NULL), 0);
	su = stats(c, u);
	rd_open_strict(c, &d, NULL);
	rd_open_strict(c, &dt, t);
	rd_open_strict(c, &du, u);
	r0 = refused_draining(c);

	t0 = now(c);
	assert_int_equal(store_drain(c->s, t), 0);
	expect_events(c, &d, EV("drain", "t", "-", "-", "-", "-"));
	expect_events(c, &dt, EV("drain", "t", "-", "-", "-", "-"));
	expect_events(c, &du, "");
	assert_draining(c, t, WINDOW);
	assert_dstate(c, u, STORE_READY);
	assert_dstate(c, NULL, STORE_READY);
	assert_int_equal(store_state(c->s), STORE_READY);
	assert_int_equal(store_next_deadline(c->s), t0 + WINDOW);

	advance(c, 2000);
	assert_int_equal(store_drain(c->s, t), 0);         /* idempotent */
	assert_draining(c, t, WINDOW - 2000);
	assert_int_equal(store_next_deadline(c->s), t0 + WINDOW);

	/* In t: no new parent, child or link. */
	assert_int_equal(mkdir_rc(c, t, "new"), -EROFS);
	assert_int_equal(mkdir_rc(c, t, "ghost"), -EROFS);  /* a rejoin */
	assert_int_equal(create_rc(c, p, "new", true), -EROFS);
	assert_int_equal(store_link(c->s, a, q, "a2"), -EROFS);
	assert_int_equal(store_rename(c->s, p, "a", q, "a", 0), -EROFS);
	assert_int_equal(store_set_ttl(c->s, a, 500), -EROFS);
	assert_int_equal(refused_draining(c), r0 + 6);
	/* ... but its children may be written and removed. */
	publish(c, a, STORE_STAGE_APPEND, "b");
	assert_int_equal(store_unlink(c->s, q, "b"), 0);
	/* The rest of the store admits as before. */
	assert_int_equal(mkdir_rc(c, root(c), "v"), 0);
	assert_int_equal(mkdir_rc(c, u, "r2"), 0);
	assert_int_equal(create_rc(c, r, "y", true), 0);
	set_ttl(c, x, 100000);
	assert_int_equal(store_renew(c->s, x), 0);
	assert_int_equal(store_rmdir(c->s, u, "r2", NULL), 0);
	assert_int_equal(store_unlink(c->s, r, "y"), 0);
	free(rd_take(c, &d));
	free(rd_take(c, &dt));
	free(rd_take(c, &du));
	check_ok(c);

	/* At the deadline: t is empty, still there, still refusing. */
	advance(c, WINDOW - 2000);
	assert_dstate(c, t, STORE_DRAINED);
	assert_dstate(c, NULL, STORE_READY);
	assert_dstate(c, u, STORE_READY);
	assert_int_equal(store_lookup(c->s, root(c), "t", &tt), 0);
	assert_int_equal(store_node_ino(tt), store_node_ino(t));
	put(c, tt);
	assert_int_equal(getattr_rc(c, t), 0);
	assert_list(c, t, "");
	assert_list(c, root(c), "t,u,v");
	assert_empty_gauges(c, t);
	assert_int_equal(stats(c, t).tenants, 1);
	assert_int_equal(getattr_rc(c, p), -ESTALE);
	assert_int_equal(getattr_rc(c, a), -ESTALE);
	assert_int_equal(lookup_rc(c, t, "p"), -ENOENT);
	assert_int_equal(mkdir_rc(c, t, "p"), -EROFS);
	assert_int_equal(mkdir_rc(c, t, "new"), -EROFS);
	assert_int_equal(store_drain(c->s, t), 0);
	assert_dstate(c, t, STORE_DRAINED);
	expect_events_any_order(c, &dt,
				EV("drain", "t", "p", "-", "1", "-")
				EV("drain", "t", "q", "-", "1", "-"));
	expect_events_any_order(c, &d,
				EV("drain", "t", "p", "-", "1", "-")
				EV("drain", "t", "q", "-", "1", "-"));
	expect_events(c, &du, "");
	/* The other tenant is untouched. */
	{
		struct store_stats s = stats(c, u);

		assert_int_equal(s.parents, su.parents);
		assert_int_equal(s.children, su.children);
		assert_int_equal(s.bytes, su.bytes);
	}
	assert_int_equal(getattr_rc(c, x), 0);
	assert_int_equal(stats(c, NULL).tenants, 3);
	assert_int_equal(stats(c, NULL).parents, 1);
	assert_int_equal(stats(c, NULL).children, 1);
	assert_int_equal(stats(c, NULL).tombstones, 1);   /* u's r2 */
	assert_int_equal(stats(c, NULL).bytes, 2);
	/* Only x's lease is pending now. */
	assert_int_equal(store_next_deadline(c->s), lease(c, x).deadline_ms);
	check_ok(c);

	/* Then the whole store: t was drained already. */
	assert_int_equal(store_drain(c->s, NULL), 0);
	assert_draining(c, NULL, WINDOW);
	assert_int_equal(store_unlink(c->s, r, "x"), 0);
	assert_dstate(c, NULL, STORE_DRAINED);
	assert_empty_gauges(c, NULL);
	assert_int_equal(getattr_rc(c, t), -ESTALE);
	check_ok(c);
}

static void test_tenant_drain_ends_early(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *u, *p, *r, *x;

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	p = mk(c, t, "p");
	r = mk(c, u, "r");
	cr(c, p, "a");
	x = cr(c, r, "x");
	assert_int_equal(store_drain(c->s, t), 0);
	assert_int_equal(store_unlink(c->s, p, "a"), 0);
	/* The children of other tenants do not keep t's drain running. */
	assert_dstate(c, t, STORE_DRAINED);
	assert_int_equal(getattr_rc(c, p), -ESTALE);
	assert_int_equal(getattr_rc(c, x), 0);
	assert_int_equal(store_next_deadline(c->s), UINT64_MAX);
	assert_int_equal(mkdir_rc(c, t, "p"), -EROFS);
	check_ok(c);
}

static void test_tenant_drain_via_expire(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "abc");
	assert_int_equal(store_drain(c->s, t), 0);
	advance(c, WINDOW);
	(void)store_expire(c->s, 100);
	assert_empty_gauges(c, t);
	assert_int_equal(stats(c, NULL).parents, 0);
	assert_int_equal(stats(c, NULL).bytes, 0);
	assert_int_equal(store_next_deadline(c->s), UINT64_MAX);
	assert_dstate(c, t, STORE_DRAINED);
	check_ok(c);
}

/* A tenant's own drain inside a store drain keeps its own deadline. */
static void test_tenant_drain_then_store_drain(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *u, *p, *r, *x;

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	p = mk(c, t, "p");
	r = mk(c, u, "r");
	cr(c, p, "a");
	x = cr(c, r, "x");
	assert_int_equal(store_drain(c->s, t), 0);        /* ends at +30 s */
	advance(c, 10000);
	assert_int_equal(store_drain(c->s, NULL), 0);     /* ends at +40 s */
	assert_draining(c, NULL, WINDOW);
	/* t is cleared at its own deadline, the earlier one. */
	assert_draining(c, t, WINDOW - 10000);
	assert_int_equal(store_next_deadline(c->s), now(c) + WINDOW - 10000);
	advance(c, WINDOW - 10000);
	(void)store_expire(c->s, 100);
	assert_int_equal(getattr_rc(c, p), -ESTALE);
	assert_int_equal(getattr_rc(c, x), 0);
	/* t is drained (cleared, refusing) while the store still drains. */
	assert_dstate(c, t, STORE_DRAINED);
	assert_draining(c, NULL, 10000);
	assert_int_equal(store_next_deadline(c->s), now(c) + 10000);
	advance(c, 10000);
	assert_dstate(c, NULL, STORE_DRAINED);
	assert_empty_gauges(c, NULL);
	check_ok(c);
}

/* A tenant drained already stays drained when the store starts to drain. */
static void test_drained_tenant_in_draining_store(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *u, *p, *r;

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	p = mk(c, t, "p");
	r = mk(c, u, "r");
	cr(c, p, "a");
	cr(c, r, "x");
	assert_int_equal(store_drain_now(c->s, t), 0);
	assert_dstate(c, t, STORE_DRAINED);
	assert_int_equal(store_drain(c->s, NULL), 0);
	assert_draining(c, NULL, WINDOW);
	assert_draining(c, u, WINDOW);
	assert_dstate(c, t, STORE_DRAINED);
	assert_int_equal(store_drain_now(c->s, NULL), 0);
	assert_dstate(c, NULL, STORE_DRAINED);
	check_ok(c);
}

/* The reaper ends a tenant's drain when its last child expires. */
static void test_tenant_drain_ends_on_reap(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *u, *p, *r, *a, *x;

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	p = mk(c, t, "p");
	r = mk(c, u, "r");
	a = cr(c, p, "a");
	x = cr(c, r, "x");
	set_ttl(c, a, 700);
	assert_int_equal(store_drain(c->s, t), 0);
	assert_int_equal(store_next_deadline(c->s), now(c) + 700);
	advance(c, 700);
	assert_int_equal(store_expire(c->s, 100), 1);
	/* Settled by the reaper: the parent is gone before anyone asks. */
	assert_int_equal(getattr_rc(c, p), -ESTALE);
	assert_int_equal(stats(c, t).parents, 0);
	assert_dstate(c, t, STORE_DRAINED);
	assert_dstate(c, NULL, STORE_READY);
	assert_int_equal(store_next_deadline(c->s), UINT64_MAX);
	assert_int_equal(getattr_rc(c, x), 0);
	check_ok(c);
}

/*
 * A child past its deadline is gone whether or not the reaper has run
 * (CONTRACT s.4), so it does not keep a drain running either.
 */
static void test_drain_ends_when_last_child_is_past_deadline(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	set_ttl(c, a, 1000);
	assert_int_equal(store_drain(c->s, NULL), 0);
	advance(c, 1000);
	/* No store_expire(): the drain state alone settles it. */
	assert_dstate(c, NULL, STORE_DRAINED);
	assert_empty_gauges(c, NULL);
	check_ok(c);
}

/* Cleaning up a draining tenant leaves nothing pending. */
static void test_cleanup_of_draining_tenant(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *t2;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	cr(c, p, "a");
	assert_int_equal(store_drain(c->s, t), 0);
	assert_int_equal(store_rmdir(c->s, root(c), "t", NULL), 0);
	assert_int_equal(store_next_deadline(c->s), UINT64_MAX);
	assert_dstate(c, NULL, STORE_READY);
	/* Its drain went with it: an old handle of its parent is stale,
	 * not refused for a drain (as on a shared store). */
	assert_int_equal(create_rc(c, p, "b", false), -ESTALE);
	/* A new tenant of that name is a new node, not draining. */
	t2 = mk(c, root(c), "t");
	assert_dstate(c, t2, STORE_READY);
	assert_int_equal(mkdir_rc(c, t2, "p"), 0);
	advance(c, WINDOW);
	(void)store_expire(c->s, 100);
	assert_int_equal(lookup_rc(c, t2, "p"), 0);
	assert_dstate(c, t2, STORE_READY);
	check_ok(c);
}

/*
 * A tenant's drain clears what a cleanup of the tenant would: it starts
 * only for a caller that could empty the tenant by hand (the rule of
 * rmdir of the tenant); a refusal is EACCES and starts nothing.
 */
static void test_drain_cascade_permissions(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p;
	struct store_stats was;

	/* A shared sticky tenant of 1001 where 1002 keeps a 0755 parent
	 * with a child: its owner may remove the parent from the tenant,
	 * but could not empty it by hand. */
	t = mk_as(c, root(c), "shared", 1001, 01777);
	p = mk_as(c, t, "q", 1002, 0755);
	cr_as(c, p, "job", 1002);
	was = stats(c, NULL);
	assert_int_equal(store_drain_as(c->s, t, &U1), -EACCES);
	assert_int_equal(store_drain_as(c->s, t, &U3), -EACCES);
	assert_int_equal(store_drain_state(c->s, t, NULL), STORE_READY);
	assert_same_gauges(c, &was);
	assert_list(c, t, "q");
	assert_int_equal(mkdir_rc(c, t, "late"), 0); /* not draining */
	assert_int_equal(store_rmdir(c->s, t, "late", NULL), 0);
	/* Its owner may drain it once the parent is 0777 (or empty). */
	p = lk(c, t, "q");
	{
		struct store_attr in = { .mode = 0777 };

		assert_int_equal(store_setattr(c->s, p, STORE_SET_MODE, &in,
					       NULL), 0);
	}
	assert_int_equal(store_drain_as(c->s, t, &U1), 0);
	assert_int_equal(store_drain_state(c->s, t, NULL), STORE_DRAINING);
	/* A running drain is not judged again: nothing starts. */
	assert_int_equal(store_drain_as(c->s, t, &U3), 0);
	advance(c, c->lim.drain_window_ms);
	assert_int_equal(store_drain_state(c->s, t, NULL), STORE_DRAINED);
	assert_list(c, t, "");

	/* A 0755 tenant of 1001: 1002 could not remove its parents; root
	 * and a call without credentials may. */
	t = mk_as(c, root(c), "t", 1001, 0755);
	p = mk_as(c, t, "p", 1001, 0777);
	assert_int_equal(store_drain_as(c->s, t, &U2), -EACCES);
	assert_int_equal(store_drain_state(c->s, t, NULL), STORE_READY);
	assert_int_equal(store_drain_as(c->s, t, &ROOTC), 0);
	assert_int_equal(store_drain_state(c->s, t, NULL), STORE_DRAINED);
	t = mk_as(c, root(c), "u", 1001, 0755);
	p = mk_as(c, t, "p", 1002, 0700);
	cr_as(c, p, "c", 1002);
	assert_int_equal(store_drain_as(c->s, t, NULL), 0);
	assert_int_equal(store_drain_state(c->s, t, NULL), STORE_DRAINING);
	check_ok(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST_HOOKED(test_tenant_drain),
		TEST_HOOKED(test_tenant_drain_ends_early),
		TEST_HOOKED(test_tenant_drain_via_expire),
		TEST_HOOKED(test_tenant_drain_then_store_drain),
		TEST_HOOKED(test_drained_tenant_in_draining_store),
		TEST_HOOKED(test_tenant_drain_ends_on_reap),
		TEST_HOOKED(test_drain_ends_when_last_child_is_past_deadline),
		TEST_HOOKED(test_cleanup_of_draining_tenant),
		TEST(test_drain_cascade_permissions),
	};

	return run_store_tests("drain_tenant", tests);
}
