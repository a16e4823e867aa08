/*
 * test_drain.c - unit tests of draining the store (store/drain.c): the
 * state machine, ending early, ending now, the event lines of a drain
 * and what .drain shows.  One tenant's drain is tested in
 * test_drain_tenant.c.
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

/* Drain: the state machine ----------------------------------------------- */

static void test_drain_state_ready(void **state)
{
	struct ctx *c = *state;
	struct store_node *t;

	assert_dstate(c, NULL, STORE_READY);
	assert_int_equal(store_state(c->s), STORE_READY);
	t = mk(c, root(c), "t");
	assert_dstate(c, t, STORE_READY);
	assert_int_equal(store_next_deadline(c->s), UINT64_MAX);
	check_ok(c);
}

static void test_drain_window_counts_down(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	uint64_t t0;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	assert_int_equal(store_next_deadline(c->s), UINT64_MAX);

	t0 = now(c);
	assert_int_equal(store_drain(c->s, NULL), 0);
	assert_draining(c, NULL, WINDOW);
	assert_int_equal(store_state(c->s), STORE_DRAINING);
	/* A tenant is draining when the store is. */
	assert_draining(c, t, WINDOW);
	/* The reaper must run at the deadline. */
	assert_int_equal(store_next_deadline(c->s), t0 + WINDOW);

	advance(c, 1000);
	assert_draining(c, NULL, WINDOW - 1000);
	/* Idempotent: a second drain does not move the deadline. */
	assert_int_equal(store_drain(c->s, NULL), 0);
	assert_draining(c, NULL, WINDOW - 1000);
	assert_int_equal(store_next_deadline(c->s), t0 + WINDOW);
	advance(c, 4000);
	assert_int_equal(store_drain(c->s, NULL), 0);
	assert_draining(c, NULL, WINDOW - 5000);
	/* A tenant drain inside a store drain moves nothing either. */
	assert_int_equal(store_drain(c->s, t), 0);
	assert_draining(c, t, WINDOW - 5000);
	assert_draining(c, NULL, WINDOW - 5000);

	advance(c, WINDOW - 5000 - 1);
	assert_draining(c, NULL, 1);
	assert_int_equal(lookup_rc(c, p, "a"), 0);
	check_ok(c);

	/* At the deadline: everything goes, in one transition. */
	advance(c, 1);
	assert_dstate(c, NULL, STORE_DRAINED);
	assert_int_equal(store_state(c->s), STORE_DRAINED);
	assert_empty_gauges(c, NULL);
	assert_list(c, root(c), "");
	assert_int_equal(lookup_rc(c, root(c), "t"), -ENOENT);
	assert_int_equal(getattr_rc(c, t), -ESTALE);
	assert_int_equal(getattr_rc(c, p), -ESTALE);
	assert_int_equal(getattr_rc(c, a), -ESTALE);
	assert_int_equal(store_next_deadline(c->s), UINT64_MAX);
	check_ok(c);

	/* Drained stays drained, and still refuses. */
	assert_int_equal(mkdir_rc(c, root(c), "t"), -EROFS);
	assert_int_equal(mkdir_rc(c, root(c), "u"), -EROFS);
	assert_int_equal(store_drain(c->s, NULL), 0);
	assert_dstate(c, NULL, STORE_DRAINED);
	assert_int_equal(store_drain_now(c->s, NULL), 0);
	assert_dstate(c, NULL, STORE_DRAINED);
	advance(c, 10 * WINDOW);
	assert_dstate(c, NULL, STORE_DRAINED);
	assert_int_equal(mkdir_rc(c, root(c), "t"), -EROFS);
	assert_empty_gauges(c, NULL);
	check_ok(c);
}

static void test_drain_refusals(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *a, *b, *l, *n = NULL;
	struct store_lease l0, p0;
	struct store_attr in, out;
	struct store_stats s0, s1;
	uint64_t r0, v;
	bool created = true;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	a = cr(c, p, "a");
	b = cr(c, p, "b");
	l = cr(c, q, "l");
	publish(c, a, STORE_STAGE_REPLACE, "hello");
	set_ttl(c, l, 100000);
	set_ttl(c, q, 200000);
	l0 = lease(c, l);
	p0 = lease(c, q);
	s0 = stats(c, NULL);
	r0 = s0.refused[STORE_REFUSED_DRAINING];

	assert_int_equal(store_drain(c->s, NULL), 0);
	advance(c, 10);

	/* Every new tenant, parent, child, link and lease change: EROFS. */
	assert_int_equal(mkdir_rc(c, root(c), "u"), -EROFS);
	assert_int_equal(mkdir_rc(c, t, "r"), -EROFS);
	assert_int_equal(create_rc(c, p, "new", true), -EROFS);
	assert_int_equal(create_rc(c, q, "new", false), -EROFS);
	assert_int_equal(store_link(c->s, a, q, "a2"), -EROFS);
	assert_int_equal(store_rename(c->s, p, "a", q, "a", 0), -EROFS);
	assert_int_equal(store_rename(c->s, p, "b", q, "b",
				      STORE_RENAME_NOREPLACE), -EROFS);
	assert_int_equal(store_set_ttl(c->s, l, 100), -EROFS);
	assert_int_equal(store_set_ttl(c->s, l, 0), -EROFS);
	assert_int_equal(store_renew(c->s, l), -EROFS);
	assert_int_equal(store_set_ttl(c->s, q, 100), -EROFS);
	assert_int_equal(store_renew(c->s, q), -EROFS);
	assert_int_equal(refused_draining(c), r0 + 12);

	/* ... and changed nothing. */
	assert_list(c, root(c), "t");
	assert_list(c, t, "p,q");
	assert_list(c, p, "a,b");
	assert_list(c, q, "l");
	s1 = stats(c, NULL);
	assert_int_equal(s1.tenants, s0.tenants);
	assert_int_equal(s1.parents, s0.parents);
	assert_int_equal(s1.children, s0.children);
	assert_int_equal(s1.links, s0.links);
	assert_int_equal(s1.bytes, s0.bytes);
	assert_int_equal(s1.admissions, s0.admissions);
	assert_int_equal(lease(c, l).ttl_ms, l0.ttl_ms);
	assert_int_equal(lease(c, l).deadline_ms, l0.deadline_ms);
	assert_int_equal(lease(c, q).deadline_ms, p0.deadline_ms);
	check_ok(c);

	/* Existing children may still be written, in every mode. */
	v = version(c, a);
	publish(c, a, STORE_STAGE_REPLACE, "xyz");
	publish(c, a, STORE_STAGE_APPEND, "!");
	publish(c, a, STORE_STAGE_CAS, "X");
	memset(&in, 0, sizeof in);
	in.size = 2;
	assert_int_equal(store_setattr(c->s, a, STORE_SET_SIZE, &in, &out), 0);
	assert_int_equal(out.size, 2);
	assert_int_equal(version(c, a), v + 4);
	assert_int_equal(stats(c, NULL).bytes, 2);
	/* Opening an existing child with O_CREAT is not an admission. */
	assert_int_equal(store_create(c->s, p, "a", &FOWN, false, &n,
				      &created), 0);
	assert_false(created);
	assert_int_equal(store_node_ino(n), store_node_ino(a));
	put(c, n);
	/* ... and removed. */
	assert_int_equal(store_unlink(c->s, p, "b"), 0);
	assert_int_equal(store_unlink(c->s, p, "b"), -ENOENT);
	assert_int_equal(getattr_rc(c, b), -ESTALE);
	assert_list(c, p, "a");
	assert_int_equal(refused_draining(c), r0 + 12);
	assert_draining(c, NULL, WINDOW - 10);
	check_ok(c);
	check_ok(c);
}

/* At the deadline the reaper (store_expire) settles the drain too. */
static void test_drain_deadline_via_expire(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *u, *p, *q, *r, *a, *b;

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	r = mk(c, u, "r");
	a = cr(c, p, "a");
	b = cr(c, r, "b");
	publish(c, a, STORE_STAGE_REPLACE, "1234");
	publish(c, b, STORE_STAGE_REPLACE, "56");
	assert_int_equal(store_link(c->s, a, q, "a2"), 0);
	assert_int_equal(store_depart(c->s, t, "ghost", NULL), 0);
	mk(c, t, "k");
	assert_int_equal(store_rmdir(c->s, t, "k", NULL), 0);   /* a tombstone */
	assert_int_equal(stats(c, NULL).tombstones, 2);

	assert_int_equal(store_drain(c->s, NULL), 0);
	advance(c, WINDOW);
	(void)store_expire(c->s, 1000);
	/* Settled by the reaper, before anyone asks for the state. */
	assert_int_equal(store_state(c->s), STORE_DRAINED);
	assert_empty_gauges(c, NULL);
	check_ok(c);
	assert_dstate(c, NULL, STORE_DRAINED);
	assert_list(c, root(c), "");
	assert_int_equal(getattr_rc(c, u), -ESTALE);
	assert_int_equal(getattr_rc(c, b), -ESTALE);
	assert_int_equal(store_unlink(c->s, p, "a"), -ESTALE);
	assert_int_equal(store_next_deadline(c->s), UINT64_MAX);
	check_ok(c);
}

/* A stage opened before the clear cannot publish after it. */
static void test_drain_clear_ends_open_stages(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_stage *st = NULL;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	assert_int_equal(store_drain(c->s, NULL), 0);
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &st),
			 0);
	assert_int_equal(store_stage_write(st, "late", 4, 0), 4);
	advance(c, WINDOW);
	assert_dstate(c, NULL, STORE_DRAINED);
	assert_int_equal(store_stage_publish(st), -ESTALE);
	store_stage_close(st);
	assert_empty_gauges(c, NULL);
	check_ok(c);
}

/* Drain: ending early ---------------------------------------------------- */

static void test_drain_ends_when_last_child_goes(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *a;
	struct rd d;
	uint64_t left = 0;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	a = cr(c, p, "a");
	cr(c, p, "b");
	assert_int_equal(store_link(c->s, a, q, "a2"), 0); /* shared state */
	rd_open_strict(c, &d, NULL);

	assert_int_equal(store_drain(c->s, NULL), 0);
	expect_events(c, &d, EV("drain", "-", "-", "-", "-", "-"));
	advance(c, 100);
	assert_int_equal(store_unlink(c->s, p, "b"), 0);
	assert_draining(c, NULL, WINDOW - 100);
	assert_int_equal(store_unlink(c->s, p, "a"), 0);
	/* The state lives on through q/a2: still a child in scope. */
	assert_draining(c, NULL, WINDOW - 100);
	assert_int_equal(stats(c, NULL).children, 1);
	expect_events(c, &d,
		      EV("unlink", "t", "p", "b", "1", "0")
		      EV("unlink", "t", "p", "a", "1", "0"));
	assert_int_equal(store_unlink(c->s, q, "a2"), 0);
	expect_events(c, &d, EV("unlink", "t", "q", "a2", "1", "0"));

	/* No child remains: drained at once, without the clock moving. */
	assert_int_equal(store_drain_state(c->s, NULL, &left), STORE_DRAINED);
	assert_int_equal(store_state(c->s), STORE_DRAINED);
	assert_empty_gauges(c, NULL);
	assert_list(c, root(c), "");
	assert_int_equal(getattr_rc(c, t), -ESTALE);
	assert_int_equal(store_next_deadline(c->s), UINT64_MAX);
	expect_events_any_order(c, &d,
				EV("drain", "t", "p", "-", "1", "-")
				EV("drain", "t", "q", "-", "1", "-")
				EV("cleanup", "t", "-", "-", "-", "-"));
	assert_int_equal(mkdir_rc(c, root(c), "t"), -EROFS);
	check_ok(c);
	check_ok(c);
}

/* The last child expiring during the window ends the drain too. */
static void test_drain_ends_when_last_child_expires(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	set_ttl(c, a, 1000);
	assert_int_equal(store_drain(c->s, NULL), 0);
	/* The lease deadline comes first. */
	assert_int_equal(store_next_deadline(c->s), now(c) + 1000);
	advance(c, 999);
	assert_draining(c, NULL, WINDOW - 999);
	advance(c, 1);
	(void)store_expire(c->s, 100);
	assert_dstate(c, NULL, STORE_DRAINED);
	assert_empty_gauges(c, NULL);
	assert_int_equal(getattr_rc(c, a), -ESTALE);
	assert_int_equal(store_next_deadline(c->s), UINT64_MAX);
	check_ok(c);
}

/* A drain of a scope without any child ends as soon as it starts. */
static void test_drain_without_children_ends_at_once(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p;
	struct rd d;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	rd_open_strict(c, &d, NULL);
	assert_int_equal(store_drain(c->s, NULL), 0);
	assert_dstate(c, NULL, STORE_DRAINED);
	assert_empty_gauges(c, NULL);
	assert_int_equal(getattr_rc(c, p), -ESTALE);
	expect_events_any_order(c, &d,
				EV("drain", "-", "-", "-", "-", "-")
				EV("drain", "t", "p", "-", "1", "-")
				EV("cleanup", "t", "-", "-", "-", "-"));
	check_ok(c);
}

/* drain_window=0: the deadline is the start. */
static void test_drain_window_zero(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t, *p;

	store_limits_default(&l);
	l.drain_window_ms = 0;
	reopen(c, &l);
	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	cr(c, p, "a");
	assert_int_equal(store_drain(c->s, NULL), 0);
	assert_dstate(c, NULL, STORE_DRAINED);
	assert_empty_gauges(c, NULL);
	check_ok(c);
}

/* Drain: ending now ------------------------------------------------------ */

static void test_drain_now_ends_the_window(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct rd d;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	rd_open_strict(c, &d, NULL);
	assert_int_equal(store_drain(c->s, NULL), 0);
	advance(c, 5);
	assert_draining(c, NULL, WINDOW - 5);
	expect_events(c, &d, EV("drain", "-", "-", "-", "-", "-"));

	assert_int_equal(store_drain_now(c->s, NULL), 0);
	/* Cleared at once, before anyone asks. */
	assert_int_equal(store_state(c->s), STORE_DRAINED);
	assert_empty_gauges(c, NULL);
	assert_dstate(c, NULL, STORE_DRAINED);
	assert_int_equal(getattr_rc(c, a), -ESTALE);
	assert_int_equal(store_next_deadline(c->s), UINT64_MAX);
	expect_events_any_order(c, &d,
				EV("drain", "t", "p", "-", "1", "-")
				EV("cleanup", "t", "-", "-", "-", "-"));
	/* Nothing more to clear. */
	assert_int_equal(store_drain_now(c->s, NULL), 0);
	advance(c, WINDOW);
	assert_dstate(c, NULL, STORE_DRAINED);
	expect_events(c, &d, "");
	check_ok(c);
}

/* A scope that is not draining starts and ends in one go. */
static void test_drain_now_without_drain(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *u, *p, *r, *a, *b;
	struct rd d;

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	p = mk(c, t, "p");
	r = mk(c, u, "r");
	a = cr(c, p, "a");
	b = cr(c, r, "b");
	rd_open_strict(c, &d, NULL);

	assert_int_equal(store_drain_now(c->s, t), 0);
	assert_dstate(c, t, STORE_DRAINED);
	assert_dstate(c, u, STORE_READY);
	assert_dstate(c, NULL, STORE_READY);
	assert_int_equal(getattr_rc(c, a), -ESTALE);
	assert_int_equal(getattr_rc(c, p), -ESTALE);
	assert_int_equal(lookup_rc(c, root(c), "t"), 0);
	assert_list(c, t, "");
	assert_int_equal(getattr_rc(c, b), 0);
	{
		char *got = rd_take(c, &d);
		const char *start = EV("drain", "t", "-", "-", "-", "-");

		/* The start line first, then the clear. */
		if (strncmp(got, start, strlen(start)) != 0 ||
		    strcmp(got + strlen(start),
			   EV("drain", "t", "p", "-", "1", "-")) != 0) {
			print_error("got:\n%s", got);
			free(got);
			fail_msg("drain_now of a tenant: unexpected events");
		}
		free(got);
	}

	assert_int_equal(store_drain_now(c->s, NULL), 0);
	assert_dstate(c, NULL, STORE_DRAINED);
	assert_empty_gauges(c, NULL);
	assert_int_equal(getattr_rc(c, b), -ESTALE);
	{
		char *got = rd_take(c, &d);
		const char *start = EV("drain", "-", "-", "-", "-", "-");
		char *rest, *want;

		if (strncmp(got, start, strlen(start)) != 0) {
			print_error("got:\n%s", got);
			free(got);
			fail_msg("drain_now of the store: no start line first");
		}
		rest = sorted_lines(got + strlen(start));
		want = sorted_lines(EV("cleanup", "t", "-", "-", "-", "-")
				    EV("drain", "u", "r", "-", "1", "-")
				    EV("cleanup", "u", "-", "-", "-", "-"));
		if (strcmp(rest, want) != 0)
			print_error("got:\n%s", got);
		free(got);
		assert_string_equal(rest, want);
		free(rest);
		free(want);
	}
	check_ok(c);
}

static void test_drain_stale_tenant(void **state)
{
	struct ctx *c = *state;
	struct store_node *t;
	struct store_snapshot sn;

	t = mk(c, root(c), "t");
	assert_int_equal(store_rmdir(c->s, root(c), "t", NULL), 0);
	assert_int_equal(store_drain(c->s, t), -ESTALE);
	assert_int_equal(store_drain_now(c->s, t), -ESTALE);
	assert_int_equal(store_snapshot_take(c->s, t, &sn), -ESTALE);
	assert_dstate(c, NULL, STORE_READY);
	assert_int_equal(store_next_deadline(c->s), UINT64_MAX);
	assert_int_equal(mkdir_rc(c, root(c), "t"), 0);
	check_ok(c);
}

/* Drain: events ------------------------------------------------------------ */

static void test_drain_events_internal(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *u, *p, *q, *r, *a;
	struct store_event_reader *re;
	struct store_event ev;
	unsigned long hi;
	int seen_t = 0, seen_u = 0, seen_p = 0, seen_q = 0, seen_r = 0;
	struct rd d;

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	assert_int_equal(store_rmdir(c->s, t, "q", NULL), 0);
	q = mk(c, t, "q");                               /* generation 2 */
	assert_int_equal(gen(c, q), 2);
	r = mk(c, u, "r");
	a = cr(c, p, "a");
	assert_int_equal(store_link(c->s, a, r, "a"), -EXDEV);
	re = ev_open(c, NULL);
	rd_open_strict(c, &d, NULL);

	assert_int_equal(store_drain(c->s, NULL), 0);
	next_ev(c, re, &ev);
	assert_int_equal(ev.op, STORE_OP_DRAIN);
	assert_string_equal(ev.tenant, "");
	assert_string_equal(ev.parent, "");
	assert_string_equal(ev.child, "");
	store_event_free(&ev);
	assert_int_equal(store_events_next(c->s, re, &ev), 0);
	expect_events(c, &d, EV("drain", "-", "-", "-", "-", "-"));

	hi = c->hooks_internal;
	advance(c, WINDOW);
	assert_dstate(c, NULL, STORE_DRAINED);
	assert_true(c->hooks_internal > hi);
	expect_events_any_order(c, &d,
				EV("drain", "t", "p", "-", "1", "-")
				EV("drain", "t", "q", "-", "2", "-")
				EV("cleanup", "t", "-", "-", "-", "-")
				EV("drain", "u", "r", "-", "1", "-")
				EV("cleanup", "u", "-", "-", "-", "-"));
	for (int i = 0; i < 5; i++) {
		next_ev(c, re, &ev);
		assert_true(ev.internal);
		assert_string_equal(ev.child, "");
		if (ev.parent[0] == '\0') {
			/* The tenant goes with the store's drain: its line is
			 * a cleanup, told apart from a tenant's drain
			 * starting. */
			assert_int_equal(ev.op, STORE_OP_CLEANUP);
			assert_int_equal(ev.kind, STORE_TENANT);
			if (strcmp(ev.tenant, "t") == 0) {
				assert_int_equal(ev.ino, store_node_ino(t));
				seen_t++;
			} else {
				assert_string_equal(ev.tenant, "u");
				assert_int_equal(ev.ino, store_node_ino(u));
				seen_u++;
			}
		} else {
			assert_int_equal(ev.op, STORE_OP_DRAIN);
			assert_int_equal(ev.kind, STORE_PARENT);
			if (strcmp(ev.parent, "p") == 0) {
				assert_string_equal(ev.tenant, "t");
				assert_int_equal(ev.ino, store_node_ino(p));
				seen_p++;
			} else if (strcmp(ev.parent, "q") == 0) {
				assert_string_equal(ev.tenant, "t");
				assert_int_equal(ev.ino, store_node_ino(q));
				seen_q++;
			} else {
				assert_string_equal(ev.parent, "r");
				assert_string_equal(ev.tenant, "u");
				assert_int_equal(ev.ino, store_node_ino(r));
				seen_r++;
			}
		}
		store_event_free(&ev);
	}
	assert_int_equal(store_events_next(c->s, re, &ev), 0);
	assert_true(seen_t == 1 && seen_u == 1 && seen_p == 1 && seen_q == 1 &&
		    seen_r == 1);
	check_ok(c);
}

static void test_tenant_drain_events_internal(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p;
	struct store_event_reader *re;
	struct store_event ev;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	cr(c, p, "a");
	re = ev_open(c, NULL);
	assert_int_equal(store_drain(c->s, t), 0);
	next_ev(c, re, &ev);
	assert_int_equal(ev.op, STORE_OP_DRAIN);
	assert_string_equal(ev.tenant, "t");
	assert_string_equal(ev.parent, "");
	store_event_free(&ev);
	assert_int_equal(store_drain_now(c->s, t), 0);
	next_ev(c, re, &ev);
	assert_int_equal(ev.op, STORE_OP_DRAIN);
	assert_true(ev.internal);
	assert_int_equal(ev.kind, STORE_PARENT);
	assert_int_equal(ev.ino, store_node_ino(p));
	assert_string_equal(ev.tenant, "t");
	assert_string_equal(ev.parent, "p");
	assert_string_equal(ev.child, "");
	store_event_free(&ev);
	/* A drained tenant is not removed: no tenant line. */
	assert_int_equal(store_events_next(c->s, re, &ev), 0);
	check_ok(c);
}

/* What .drain shows ------------------------------------------------------- */

/* What .drain would show, from the store's answer. */
static void test_layout_drain_of_store(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p;
	char buf[64];
	uint64_t left = 0;
	enum store_state st;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	cr(c, p, "a");
	st = store_drain_state(c->s, NULL, &left);
	layout_format_drain(buf, sizeof buf, st, left);
	assert_string_equal(buf, "ready\n");
	assert_int_equal(store_drain(c->s, NULL), 0);
	advance(c, 766);
	st = store_drain_state(c->s, NULL, &left);
	layout_format_drain(buf, sizeof buf, st, left);
	assert_string_equal(buf, "draining 29234\n");
	advance(c, 29234);
	st = store_drain_state(c->s, NULL, &left);
	layout_format_drain(buf, sizeof buf, st, left);
	assert_string_equal(buf, "drained\n");
	check_ok(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST_HOOKED(test_drain_state_ready),
		TEST_HOOKED(test_drain_window_counts_down),
		TEST_HOOKED(test_drain_refusals),
		TEST_HOOKED(test_drain_deadline_via_expire),
		TEST_HOOKED(test_drain_clear_ends_open_stages),
		TEST_HOOKED(test_drain_ends_when_last_child_goes),
		TEST_HOOKED(test_drain_ends_when_last_child_expires),
		TEST_HOOKED(test_drain_without_children_ends_at_once),
		TEST_HOOKED(test_drain_window_zero),
		TEST_HOOKED(test_drain_now_ends_the_window),
		TEST_HOOKED(test_drain_now_without_drain),
		TEST_HOOKED(test_drain_stale_tenant),
		TEST_HOOKED(test_drain_events_internal),
		TEST_HOOKED(test_tenant_drain_events_internal),
		TEST_HOOKED(test_layout_drain_of_store),
	};

	return run_store_tests("drain", tests);
}
