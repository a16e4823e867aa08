/*
 * test_store.c - unit tests of store/: every transition of store.h driven
 * directly, single-threaded, with a fake monotonic clock.
 *
 * What is checked is behaviour statefs(8) and store.h promise, never an
 * implementation detail: tenants, parents (join, leave, generations, departed tombstones and their pool and TTL), children
 * (admission, idempotency, terminal removal, incarnations), links,
 * renames, staged writes and their publication modes, quotas and
 * ceilings, listings and counters.
 *
 * Every test gets a fresh store (setup) and its teardown asserts
 * store_check_all() == 0 before freeing it, so each test also checks that
 * the counters equal a recount after whatever it did.  Every node pointer
 * the store hands out carries a reference that the test drops with
 * store_node_unref(); ASan's leak checker catches the ones we forget.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store/store.h"
#include "tests/unit/unit.h"
#include "tests/unit/fixture.h"

/* Helpers ------------------------------------------------------------- */

/* Read everything a stage sees from offset 0 into @buf (NUL-terminated). */
static size_t stage_slurp(struct store_stage *st, char *buf, size_t cap)
{
	size_t got = 0;

	for (;;) {
		ssize_t r = store_stage_read(st, buf + got, cap - 1 - got, got);

		assert_true(r >= 0);
		if (r == 0)
			break;
		got += (size_t)r;
		assert_true(got < cap - 1);
	}
	buf[got] = '\0';
	return got;
}

/* The current content of @child, as a new read stage sees it. */
static size_t content(struct ctx *c, struct store_node *child, char *buf,
		      size_t cap)
{
	struct store_stage *st = NULL;
	size_t n;

	assert_int_equal(store_stage_open(c->s, child, STORE_STAGE_READ, &st),
			 0);
	n = stage_slurp(st, buf, cap);
	store_stage_close(st);
	return n;
}

static void assert_content(struct ctx *c, struct store_node *child,
			   const char *want)
{
	char buf[4096];
	size_t n = content(c, child, buf, sizeof buf);

	assert_int_equal(n, strlen(want));
	assert_memory_equal(buf, want, n);
}

static void assert_gauges_eq(const struct store_stats *a,
			     const struct store_stats *b)
{
	assert_int_equal(a->tenants, b->tenants);
	assert_int_equal(a->parents, b->parents);
	assert_int_equal(a->children, b->children);
	assert_int_equal(a->links, b->links);
	assert_int_equal(a->tombstones, b->tombstones);
	assert_int_equal(a->bytes, b->bytes);
}

static void assert_gauges(struct ctx *c, struct store_node *tenant,
			  uint64_t tenants, uint64_t parents, uint64_t children,
			  uint64_t links, uint64_t tombstones, uint64_t bytes)
{
	struct store_stats st = stats(c, tenant);

	assert_int_equal(st.tenants, tenants);
	assert_int_equal(st.parents, parents);
	assert_int_equal(st.children, children);
	assert_int_equal(st.links, links);
	assert_int_equal(st.tombstones, tombstones);
	assert_int_equal(st.bytes, bytes);
}

static uint32_t nlink(struct ctx *c, struct store_node *n)
{
	struct store_attr a;

	assert_int_equal(store_getattr(c->s, n, &a), 0);
	return a.nlink;
}

/* Tenants ------------------------------------------------------------- */

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
	put(c, t);
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
	put(c, p2);
	p2 = mk(c, t2, "r");
	assert_int_equal(gen(c, p2), 1);
	put(c, p2);
	p2 = mk(c, t2, "ghost");
	assert_int_equal(gen(c, p2), 1);
	put(c, p2);
	assert_gauges(c, t2, 1, 3, 0, 0, 0, 0);

	put(c, t2);
	put(c, ua);
	put(c, up);
	put(c, b);
	put(c, a);
	put(c, q);
	put(c, p);
	put(c, u);
	put(c, t);
	check_ok(c);
}

/* Parents ------------------------------------------------------------- */

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

	put(c, p3);
	put(c, p2);
	put(c, a);
	put(c, p);
	put(c, t);
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
	put(c, p);
	put(c, t);
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
	put(c, p2);
	put(c, b);
	put(c, a);
	put(c, q);
	put(c, p);
	put(c, t);
	check_ok(c);
}

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
	put(c, g);
	put(c, a);
	put(c, p);
	put(c, t);
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
	put(c, p);
	assert_int_equal(stats(c, t).tombstones, 3);

	/* Past it, the tombstone is gone: the rejoin starts over at 1. */
	fake_clock_advance(&c->clk, 2);
	p = mk(c, t, "p2");
	assert_int_equal(gen(c, p), 1);
	put(c, p);
	/* p3 and p4 aged out too, without a rejoin. */
	assert_int_equal(mkdir_rc(c, root(c), "other"), 0);
	assert_int_equal(stats(c, t).tombstones, 0);
	assert_int_equal(stats(c, NULL).tombstones, 0);
	p = mk(c, t, "p4");
	assert_int_equal(gen(c, p), 1);
	put(c, p);
	p = mk(c, t, "p3");
	assert_int_equal(gen(c, p), 1);
	put(c, p);
	put(c, t);
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
	put(c, u);
	put(c, t);
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
	put(c, t);
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
	put(c, u);
	put(c, t);
	check_ok(c);
}

/* Children ------------------------------------------------------------ */

static void test_child_create_excl_idempotent(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a, *n = NULL;
	struct store_stats s0, s1;
	struct store_attr at;
	bool created = true;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	s0 = stats(c, NULL);
	a = cr(c, p, "a");
	assert_int_equal(store_node_kind(a), STORE_CHILD);
	assert_int_equal(store_node_depth(a), 3);
	assert_true(store_node_live(a));
	assert_null(store_node_tenant(a)); /* its parents' */
	assert_int_equal(store_getattr(c->s, a, &at), 0);
	assert_true(S_ISREG(at.mode));
	assert_int_equal(at.mode & 07777, 0644);
	assert_int_equal(at.uid, 1000);
	assert_int_equal(at.nlink, 1);
	assert_int_equal(at.size, 0);
	assert_int_equal(at.ino, store_node_ino(a));

	/* O_EXCL on an existing child. */
	assert_int_equal(store_create(c->s, p, "a", &FOWN, true, &n, &created),
			 -EEXIST);
	s1 = stats(c, NULL);
	assert_int_equal(s1.refused[STORE_REFUSED_EXISTS],
			 s0.refused[STORE_REFUSED_EXISTS] + 1);

	/* Plain O_CREAT opens the existing child. */
	n = NULL;
	created = true;
	assert_int_equal(store_create(c->s, p, "a", &FOWN, false, &n, &created),
			 0);
	assert_non_null(n);
	assert_false(created);
	assert_int_equal(store_node_ino(n), store_node_ino(a));
	put(c, n);

	n = NULL;
	created = false;
	assert_int_equal(store_create(c->s, p, "b", &FOWN, false, &n, &created),
			 0);
	assert_true(created);
	assert_true(store_node_ino(n) > store_node_ino(a));
	put(c, n);

	s1 = stats(c, NULL);
	assert_int_equal(s1.admissions, s0.admissions + 2);
	assert_gauges(c, t, 1, 1, 2, 2, 0, 0);
	assert_list(c, p, "a,b");

	/* Terminal removal: exactly one winner. */
	s0 = stats(c, NULL);
	assert_int_equal(store_unlink(c->s, p, "a"), 0);
	assert_int_equal(store_unlink(c->s, p, "a"), -ENOENT);
	s1 = stats(c, NULL);
	assert_int_equal(s1.removals, s0.removals + 1);
	assert_false(store_node_live(a));
	assert_int_equal(lookup_rc(c, p, "a"), -ENOENT);
	assert_gauges(c, t, 1, 1, 1, 1, 0, 0);

	/* unlink of a name that is not a child. */
	{
		int rc = store_unlink(c->s, t, "p");

		assert_true(rc == -EISDIR || rc == -EPERM);
		assert_true(store_node_live(p));
	}
	/* A child is not a directory. */
	n = lk(c, p, "b");
	assert_int_equal(lookup_rc(c, n, "x"), -ENOTDIR);
	put(c, n);

	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

static void test_child_old_incarnation_stale(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *old, *neu;
	struct store_stage *st = NULL;
	struct store_attr at;
	uint64_t v;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	old = cr(c, p, "a");
	publish(c, old, STORE_STAGE_REPLACE, "one");
	assert_int_equal(store_unlink(c->s, p, "a"), 0);
	neu = cr(c, p, "a");
	assert_true(store_node_ino(neu) != store_node_ino(old));
	assert_true(store_node_ino(neu) > store_node_ino(old));
	assert_int_equal(ino_of(c, p, "a"), store_node_ino(neu));
	v = version(c, neu);

	assert_false(store_node_live(old));
	assert_int_equal(store_getattr(c->s, old, &at), -ESTALE);
	assert_int_equal(store_stage_open(c->s, old, STORE_STAGE_READ, &st),
			 -ESTALE);
	assert_int_equal(store_stage_open(c->s, old, STORE_STAGE_REPLACE, &st),
			 -ESTALE);
	assert_int_equal(store_link(c->s, old, q, "a"), -ESTALE);
	at.mode = 0600;
	assert_int_equal(store_setattr(c->s, old, STORE_SET_MODE, &at, &at),
			 -ESTALE);

	/* The new incarnation is untouched. */
	assert_true(store_node_live(neu));
	assert_int_equal(store_getattr(c->s, neu, &at), 0);
	assert_int_equal(at.size, 0);
	assert_int_equal(at.mode & 07777, 0644);
	assert_int_equal(version(c, neu), v);
	assert_content(c, neu, "");
	assert_list(c, q, "");
	assert_gauges(c, t, 1, 2, 1, 1, 0, 0);

	put(c, neu);
	put(c, old);
	put(c, q);
	put(c, p);
	put(c, t);
	check_ok(c);
}

static void test_inode_numbers_monotone(void **state)
{
	struct ctx *c = *state;
	uint64_t seen[64];
	size_t n = 0;
	struct store_node *t, *p, *x;

	seen[n++] = STORE_ROOT_INO;
	t = mk(c, root(c), "t");
	seen[n++] = store_node_ino(t);
	p = mk(c, t, "p");
	seen[n++] = store_node_ino(p);
	for (int round = 0; round < 4; round++) {
		x = cr(c, p, "c");
		seen[n++] = store_node_ino(x);
		put(c, x);
		assert_int_equal(store_unlink(c->s, p, "c"), 0);
		x = mk(c, t, "q");
		seen[n++] = store_node_ino(x);
		put(c, x);
		assert_int_equal(store_rmdir(c->s, t, "q", NULL), 0);
	}
	assert_int_equal(store_rmdir(c->s, root(c), "t", NULL), 0);
	put(c, p);
	put(c, t);
	t = mk(c, root(c), "t");
	seen[n++] = store_node_ino(t);
	put(c, t);

	/* Strictly increasing in creation order, hence never reused. */
	for (size_t i = 1; i < n; i++)
		if (seen[i] <= seen[i - 1])
			fail_msg("ino #%zu = %llu not > #%zu = %llu", i,
				 (unsigned long long)seen[i], i - 1,
				 (unsigned long long)seen[i - 1]);
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

	put(c, x);
	put(c, q);
	put(c, neu);
	put(c, old);
	put(c, t);
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

	put(c, a2);
	put(c, p2);
	put(c, t2);
	put(c, a1);
	put(c, p1);
	put(c, t1);
	check_ok(c);
}

/* Links --------------------------------------------------------------- */

static void test_link_shares_state(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *u, *p, *q, *r, *a, *qa;
	struct store_stats s0, s1;

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	r = mk(c, u, "r");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "shared");

	s0 = stats(c, NULL);
	assert_int_equal(store_link(c->s, a, q, "c"), 0);
	s1 = stats(c, NULL);
	assert_int_equal(s1.admissions, s0.admissions + 1);
	assert_int_equal(nlink(c, a), 2);
	assert_gauges(c, t, 1, 2, 1, 2, 0, 6);
	qa = lk(c, q, "c");
	assert_int_equal(store_node_ino(qa), store_node_ino(a));
	assert_int_equal(nlink(c, qa), 2);
	assert_content(c, qa, "shared");

	/* One state: a publication through one link is seen by the other. */
	publish(c, qa, STORE_STAGE_REPLACE, "new");
	assert_content(c, a, "new");
	assert_int_equal(version(c, a), version(c, qa));
	assert_gauges(c, t, 1, 2, 1, 2, 0, 3);

	/* Existing name, other tenant. */
	s0 = stats(c, NULL);
	assert_int_equal(store_link(c->s, a, q, "c"), -EEXIST);
	assert_int_equal(store_link(c->s, a, r, "a"), -EXDEV);
	s1 = stats(c, NULL);
	assert_gauges_eq(&s0, &s1);
	assert_list(c, r, "");
	assert_int_equal(nlink(c, a), 2);

	/* The state ends with its last link, not before. */
	assert_int_equal(store_unlink(c->s, p, "a"), 0);
	assert_true(store_node_live(a));
	assert_int_equal(nlink(c, a), 1);
	assert_content(c, a, "new");
	assert_gauges(c, t, 1, 2, 1, 1, 0, 3);
	/* A stage keeps working through the remaining link. */
	publish(c, a, STORE_STAGE_APPEND, "er");
	assert_content(c, qa, "newer");
	check_ok(c);

	assert_int_equal(store_unlink(c->s, q, "c"), 0);
	assert_false(store_node_live(a));
	{
		struct store_attr at;

		assert_int_equal(store_getattr(c->s, a, &at), -ESTALE);
	}
	assert_gauges(c, t, 1, 2, 0, 0, 0, 0);
	assert_gauges(c, NULL, 2, 3, 0, 0, 0, 0);

	put(c, qa);
	put(c, a);
	put(c, r);
	put(c, q);
	put(c, p);
	put(c, u);
	put(c, t);
	check_ok(c);
}

static void test_link_survives_leave_of_other_parent(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *a;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "keep");
	assert_int_equal(store_link(c->s, a, q, "a2"), 0);

	assert_int_equal(store_rmdir(c->s, t, "p", NULL), 0);
	assert_true(store_node_live(a));
	assert_int_equal(nlink(c, a), 1);
	assert_content(c, a, "keep");
	assert_int_equal(ino_of(c, q, "a2"), store_node_ino(a));
	assert_gauges(c, t, 1, 1, 1, 1, 1, 4);
	check_ok(c);

	/* And the leave of the last parent ends it. */
	assert_int_equal(store_rmdir(c->s, t, "q", NULL), 0);
	assert_false(store_node_live(a));
	assert_gauges(c, t, 1, 0, 0, 0, 2, 0);
	put(c, a);
	put(c, q);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* Renames ------------------------------------------------------------- */

static void test_rename_between_parents(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *a;
	struct store_stats s0, s1;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "A");

	s0 = stats(c, NULL);
	assert_int_equal(store_rename(c->s, p, "a", q, "b", 0), 0);
	s1 = stats(c, NULL);
	assert_gauges_eq(&s0, &s1);
	assert_int_equal(lookup_rc(c, p, "a"), -ENOENT);
	assert_int_equal(ino_of(c, q, "b"), store_node_ino(a));
	assert_true(store_node_live(a));
	assert_int_equal(nlink(c, a), 1);
	assert_content(c, a, "A");
	assert_list(c, p, "");
	assert_list(c, q, "b");

	/* Within one parent. */
	assert_int_equal(store_rename(c->s, q, "b", q, "c", 0), 0);
	assert_list(c, q, "c");
	assert_int_equal(ino_of(c, q, "c"), store_node_ino(a));

	/* Missing source. */
	assert_int_equal(store_rename(c->s, p, "zz", q, "zz", 0), -ENOENT);
	assert_int_equal(store_rename(c->s, p, "zz", q, "zz",
				      STORE_RENAME_NOREPLACE), -ENOENT);
	/* NOREPLACE onto a free name works. */
	assert_int_equal(store_rename(c->s, q, "c", p, "a",
				      STORE_RENAME_NOREPLACE), 0);
	assert_list(c, p, "a");
	assert_list(c, q, "");
	assert_gauges(c, t, 1, 2, 1, 1, 0, 1);

	put(c, a);
	put(c, q);
	put(c, p);
	put(c, t);
	check_ok(c);
}

static void test_rename_noreplace_and_replace(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *r, *a, *b, *d;
	struct store_stats s0, s1;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	r = mk(c, t, "r");
	a = cr(c, p, "a");
	b = cr(c, q, "b");
	d = cr(c, q, "d");
	publish(c, a, STORE_STAGE_REPLACE, "A");
	publish(c, b, STORE_STAGE_REPLACE, "BB");
	publish(c, d, STORE_STAGE_REPLACE, "DDD");
	assert_int_equal(store_link(c->s, d, r, "d"), 0);

	s0 = stats(c, NULL);
	assert_int_equal(store_rename(c->s, p, "a", q, "b",
				      STORE_RENAME_NOREPLACE), -EEXIST);
	s1 = stats(c, NULL);
	assert_gauges_eq(&s0, &s1);
	assert_int_equal(ino_of(c, p, "a"), store_node_ino(a));
	assert_int_equal(ino_of(c, q, "b"), store_node_ino(b));
	assert_content(c, b, "BB");

	/* A replaced destination is a terminal removal. */
	s0 = stats(c, NULL);
	assert_int_equal(store_rename(c->s, p, "a", q, "b", 0), 0);
	s1 = stats(c, NULL);
	assert_int_equal(s1.removals, s0.removals + 1);
	assert_false(store_node_live(b));
	assert_int_equal(ino_of(c, q, "b"), store_node_ino(a));
	assert_content(c, a, "A");
	assert_list(c, p, "");
	assert_gauges(c, t, 1, 3, 2, 3, 0, 4);
	check_ok(c);

	/* A replaced destination that is linked elsewhere only loses a link. */
	assert_int_equal(store_rename(c->s, q, "b", q, "d", 0), 0);
	assert_true(store_node_live(d));
	assert_int_equal(nlink(c, d), 1);
	assert_int_equal(ino_of(c, q, "d"), store_node_ino(a));
	assert_int_equal(ino_of(c, r, "d"), store_node_ino(d));
	assert_list(c, q, "d");
	assert_gauges(c, t, 1, 3, 2, 2, 0, 4);

	put(c, d);
	put(c, b);
	put(c, a);
	put(c, r);
	put(c, q);
	put(c, p);
	put(c, t);
	check_ok(c);
}

static void test_rename_exchange(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *a, *b;
	struct store_stats s0, s1;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	a = cr(c, p, "a");
	b = cr(c, q, "b");
	publish(c, a, STORE_STAGE_REPLACE, "A");
	publish(c, b, STORE_STAGE_REPLACE, "B");

	s0 = stats(c, NULL);
	assert_int_equal(store_rename(c->s, p, "a", q, "b",
				      STORE_RENAME_EXCHANGE), 0);
	s1 = stats(c, NULL);
	assert_gauges_eq(&s0, &s1);
	assert_int_equal(s1.removals, s0.removals);
	assert_int_equal(ino_of(c, p, "a"), store_node_ino(b));
	assert_int_equal(ino_of(c, q, "b"), store_node_ino(a));
	assert_true(store_node_live(a));
	assert_true(store_node_live(b));
	assert_content(c, a, "A");
	assert_content(c, b, "B");

	/* EXCHANGE needs both ends. */
	assert_int_equal(store_rename(c->s, p, "a", q, "zz",
				      STORE_RENAME_EXCHANGE), -ENOENT);
	assert_int_equal(ino_of(c, p, "a"), store_node_ino(b));
	assert_list(c, q, "b");

	/* A name exchanged with itself, and two names of one state. */
	assert_int_equal(store_rename(c->s, p, "a", p, "a",
				      STORE_RENAME_EXCHANGE), 0);
	assert_int_equal(ino_of(c, p, "a"), store_node_ino(b));
	assert_int_equal(store_link(c->s, b, q, "b2"), 0);
	assert_int_equal(store_rename(c->s, p, "a", q, "b2",
				      STORE_RENAME_EXCHANGE), 0);
	assert_int_equal(ino_of(c, p, "a"), store_node_ino(b));
	assert_int_equal(ino_of(c, q, "b2"), store_node_ino(b));
	check_ok(c);

	put(c, b);
	put(c, a);
	put(c, q);
	put(c, p);
	put(c, t);
	check_ok(c);
}

static void test_rename_eperm_exdev(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *u, *p, *q, *r;
	struct store_stats s0, s1;

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	r = mk(c, u, "r");
	assert_int_equal(create_rc(c, p, "a", true), 0);

	s0 = stats(c, NULL);
	/* Tenants and parents cannot be renamed. */
	assert_int_equal(store_rename(c->s, root(c), "t", root(c), "t2", 0),
			 -EPERM);
	assert_int_equal(store_rename(c->s, t, "p", t, "p2", 0), -EPERM);
	{
		int rc = store_rename(c->s, t, "p", u, "p", 0);

		assert_true(rc == -EPERM || rc == -EXDEV);
	}
	/* Across tenants. */
	assert_int_equal(store_rename(c->s, p, "a", r, "a", 0), -EXDEV);
	s1 = stats(c, NULL);
	assert_gauges_eq(&s0, &s1);
	assert_list(c, root(c), "t,u");
	assert_list(c, t, "p,q");
	assert_list(c, p, "a");
	assert_list(c, r, "");

	put(c, r);
	put(c, q);
	put(c, p);
	put(c, u);
	put(c, t);
	check_ok(c);
}

/* Stages --------------------------------------------------------------- */

static void test_stage_replace_publishes(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_stage *st = NULL, *rd = NULL;
	char buf[64];
	uint64_t v0;
	struct store_attr at;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "old");
	v0 = version(c, a);

	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_write(st, "new!", 4, 0), 4);
	/* The stage reads its own staged bytes... */
	assert_int_equal(stage_slurp(st, buf, sizeof buf), 4);
	assert_string_equal(buf, "new!");
	/* ...while everyone else still sees the old state. */
	assert_content(c, a, "old");
	assert_int_equal(version(c, a), v0);
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_READ, &rd), 0);

	assert_int_equal(store_stage_publish(st), 0);
	assert_int_equal(version(c, a), v0 + 1);
	assert_content(c, a, "new!");
	assert_int_equal(store_getattr(c->s, a, &at), 0);
	assert_int_equal(at.size, 4);
	assert_gauges(c, t, 1, 1, 1, 1, 0, 4);
	/* A clean stage publishes nothing. */
	assert_int_equal(store_stage_publish(st), 0);
	assert_int_equal(version(c, a), v0 + 1);
	store_stage_close(st);

	/* A read stage never publishes and refuses writes. */
	assert_int_equal(store_stage_write(rd, "x", 1, 0), -EBADF);
	assert_int_equal(store_stage_publish(rd), 0);
	assert_int_equal(version(c, a), v0 + 1);
	store_stage_close(rd);

	/* A stage closed without publishing changes nothing. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_write(st, "zzz", 3, 0), 3);
	store_stage_close(st);
	assert_content(c, a, "new!");
	assert_int_equal(version(c, a), v0 + 1);

	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

static void test_stage_replace_dirty_at_open(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_stage *st = NULL;
	struct store_attr at;
	uint64_t v0;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "abc");
	v0 = version(c, a);

	/* echo -n > f: O_TRUNC with no write still publishes (empty). */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_publish(st), 0);
	store_stage_close(st);
	assert_int_equal(version(c, a), v0 + 1);
	assert_content(c, a, "");
	assert_int_equal(store_getattr(c->s, a, &at), 0);
	assert_int_equal(at.size, 0);
	assert_gauges(c, t, 1, 1, 1, 1, 0, 0);

	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

static void test_stage_flush(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_stage *st = NULL;
	uint64_t v0;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "abc");
	v0 = version(c, a);

	/* A flush before any write of an O_TRUNC stage publishes nothing... */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_flush(st), 0);
	assert_int_equal(version(c, a), v0);
	assert_content(c, a, "abc");
	/* ...after a write it publishes... */
	assert_int_equal(store_stage_write(st, "xy", 2, 0), 2);
	assert_int_equal(store_stage_flush(st), 0);
	assert_int_equal(version(c, a), v0 + 1);
	assert_content(c, a, "xy");
	/* ...and the release has nothing left to publish. */
	assert_int_equal(store_stage_publish(st), 0);
	assert_int_equal(version(c, a), v0 + 1);
	store_stage_close(st);

	/* An O_TRUNC stage never written still publishes (empty) at release. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_flush(st), 0);
	assert_int_equal(store_stage_publish(st), 0);
	store_stage_close(st);
	assert_int_equal(version(c, a), v0 + 2);
	assert_content(c, a, "");

	/* A truncation counts as a write for flush. */
	publish(c, a, STORE_STAGE_REPLACE, "hello");
	v0 = version(c, a);
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_CAS, &st), 0);
	assert_int_equal(store_stage_truncate(st, 2), 0);
	assert_int_equal(store_stage_flush(st), 0);
	assert_int_equal(version(c, a), v0 + 1);
	assert_content(c, a, "he");
	store_stage_close(st);

	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

static void test_stage_append(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_stage *ap = NULL, *ap2 = NULL;
	uint64_t v0;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "a");

	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_APPEND, &ap), 0);
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_APPEND, &ap2), 0);
	/* Another publication happens after the append stage opened. */
	publish(c, a, STORE_STAGE_REPLACE, "XY");
	v0 = version(c, a);
	assert_int_equal(store_stage_write(ap, "b", 1, 0), 1);
	assert_int_equal(store_stage_write(ap, "c", 1, 12345), 1);
	assert_int_equal(store_stage_write(ap2, "d", 1, 0), 1);
	assert_content(c, a, "XY");
	assert_int_equal(store_stage_publish(ap), 0);
	assert_int_equal(version(c, a), v0 + 1);
	assert_content(c, a, "XYbc");
	assert_int_equal(store_stage_publish(ap2), 0);
	assert_int_equal(version(c, a), v0 + 2);
	assert_content(c, a, "XYbcd");
	store_stage_close(ap2);
	store_stage_close(ap);
	assert_gauges(c, t, 1, 1, 1, 1, 0, 5);

	/* An append stage with nothing written does not publish. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_APPEND, &ap), 0);
	assert_int_equal(store_stage_publish(ap), 0);
	store_stage_close(ap);
	assert_int_equal(version(c, a), v0 + 2);

	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

static void test_stage_cas(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_stage *cas = NULL;
	struct store_stats s0, s1;
	uint64_t v0;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "hello");
	v0 = version(c, a);

	/* An in-place edit: the untouched bytes stay. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_CAS, &cas), 0);
	assert_int_equal(store_stage_write(cas, "J", 1, 0), 1);
	assert_int_equal(store_stage_publish(cas), 0);
	store_stage_close(cas);
	assert_int_equal(version(c, a), v0 + 1);
	assert_content(c, a, "Jello");

	/* An open/close with no write does not publish. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_CAS, &cas), 0);
	assert_int_equal(store_stage_publish(cas), 0);
	store_stage_close(cas);
	assert_int_equal(version(c, a), v0 + 1);

	/* The CAS loses against a publication since its open. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_CAS, &cas), 0);
	publish(c, a, STORE_STAGE_REPLACE, "other");
	v0 = version(c, a);
	assert_int_equal(store_stage_write(cas, "ZZ", 2, 0), 2);
	s0 = stats(c, NULL);
	assert_int_equal(store_stage_publish(cas), -EAGAIN);
	s1 = stats(c, NULL);
	assert_gauges_eq(&s0, &s1);
	assert_int_equal(s1.refused[STORE_REFUSED_CONFLICT],
			 s0.refused[STORE_REFUSED_CONFLICT] + 1);
	assert_int_equal(version(c, a), v0);
	assert_content(c, a, "other");
	/* The failed stage is clean: nothing is retried on release. */
	assert_int_equal(store_stage_publish(cas), 0);
	store_stage_close(cas);
	assert_int_equal(version(c, a), v0);
	assert_content(c, a, "other");

	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/*
 * CAS compares against the version current at open (statefs(8),
 * CHILDREN; store.h: "in-place edit against the open version"), even when the
 * stage read the newer state before writing: a read pass re-pins what
 * the stage reads, not what its publication is conditional on.
 */
static void test_stage_cas_base_is_open_version(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_stage *cas = NULL;
	char buf[16];
	uint64_t v;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "one");

	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_CAS, &cas), 0);
	publish(c, a, STORE_STAGE_REPLACE, "two");
	v = version(c, a);
	/* Whether this read shows the open state or the newer one, the
	 * publication stays conditional on the version at open. */
	assert_int_equal(store_stage_read(cas, buf, sizeof buf, 0), 3);
	assert_true(memcmp(buf, "one", 3) == 0 || memcmp(buf, "two", 3) == 0);
	assert_int_equal(store_stage_write(cas, "T", 1, 0), 1);
	assert_int_equal(store_stage_publish(cas), -EAGAIN);
	store_stage_close(cas);
	assert_int_equal(version(c, a), v);
	assert_content(c, a, "two");

	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

static void test_stage_reader_pinned(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_stage *rd = NULL, *rd2 = NULL;
	char buf[64];

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "v1");

	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_READ, &rd), 0);
	assert_int_equal(store_stage_read(rd, buf, 2, 0), 2);
	assert_memory_equal(buf, "v1", 2);
	publish(c, a, STORE_STAGE_REPLACE, "second");
	/* Still the old state past offset 0: never a mix. */
	assert_int_equal(store_stage_read(rd, buf, sizeof buf, 1), 1);
	assert_memory_equal(buf, "1", 1);
	assert_int_equal(store_stage_read(rd, buf, sizeof buf, 2), 0);
	/* A new pass from offset 0 sees the newest publication. */
	assert_int_equal(store_stage_read(rd, buf, sizeof buf, 0), 6);
	assert_memory_equal(buf, "second", 6);

	/* Pinned at open, before any read. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_READ, &rd2), 0);
	publish(c, a, STORE_STAGE_REPLACE, "third!!!");
	assert_int_equal(store_stage_read(rd2, buf, sizeof buf, 3), 3);
	assert_memory_equal(buf, "ond", 3);
	assert_int_equal(store_stage_read(rd, buf, sizeof buf, 3), 3);
	assert_memory_equal(buf, "ond", 3);
	assert_int_equal(store_stage_read(rd2, buf, sizeof buf, 0), 8);
	assert_memory_equal(buf, "third!!!", 8);
	store_stage_close(rd2);
	store_stage_close(rd);

	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

static void test_stage_reader_reads_on(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_stage *rd = NULL, *empty = NULL;
	char buf[64];

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_READ, &empty), 0);
	publish(c, a, STORE_STAGE_REPLACE, "one\n");

	/* tail -f: everything read, then an append: the read at the end
	 * goes on with the appended bytes. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_READ, &rd), 0);
	assert_int_equal(store_stage_read(rd, buf, sizeof buf, 0), 4);
	assert_int_equal(store_stage_read(rd, buf, sizeof buf, 4), 0);
	publish(c, a, STORE_STAGE_APPEND, "two\n");
	assert_int_equal(store_stage_read(rd, buf, sizeof buf, 4), 4);
	assert_memory_equal(buf, "two\n", 4);
	publish(c, a, STORE_STAGE_APPEND, "three\n");
	publish(c, a, STORE_STAGE_APPEND, "four\n");
	assert_int_equal(store_stage_read(rd, buf, sizeof buf, 8), 11);
	assert_memory_equal(buf, "three\nfour\n", 11);
	/* A reader that opened on the empty state has seen a prefix of
	 * every state. */
	assert_int_equal(store_stage_read(empty, buf, sizeof buf, 4), 15);
	assert_memory_equal(buf, "two\nthree\nfour\n", 15);

	/* A replacement is no continuation of what was read: the reader
	 * stays at its end, never a mix, until it starts a new pass. */
	publish(c, a, STORE_STAGE_REPLACE, "something else entirely\n");
	assert_int_equal(store_stage_read(rd, buf, sizeof buf, 19), 0);
	assert_int_equal(store_stage_read(rd, buf, sizeof buf, 0), 24);
	assert_memory_equal(buf, "something else entirely\n", 24);
	/* A reader in the middle keeps its state: no jump into a newer one. */
	assert_int_equal(store_stage_read(rd, buf, 4, 0), 4);
	publish(c, a, STORE_STAGE_APPEND, "more\n");
	assert_int_equal(store_stage_read(rd, buf, sizeof buf, 20), 4);
	assert_memory_equal(buf, "ely\n", 4);
	assert_int_equal(store_stage_read(rd, buf, sizeof buf, 24), 5);
	assert_memory_equal(buf, "more\n", 5);
	store_stage_close(empty);
	store_stage_close(rd);

	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* Set @child's mtime to @sec seconds since the epoch (utimensat). */
static void set_mtime(struct ctx *c, struct store_node *child, time_t sec)
{
	struct store_attr in = { .mtime = { .tv_sec = sec } };

	assert_int_equal(store_setattr(c->s, child, STORE_SET_MTIME, &in, NULL),
			 0);
}

static time_t mtime_of(struct ctx *c, struct store_node *n)
{
	struct store_attr a;

	assert_int_equal(store_getattr(c->s, n, &a), 0);
	return a.mtime.tv_sec;
}

static void test_stage_keeps_mtime_set_before_close(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_stage *st = NULL;
	const time_t then = 981173106; /* 2001-02-03 */

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");

	/* cp -p: write, set the source's mtime on the open file, close. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_CAS, &st), 0);
	assert_int_equal(store_stage_write(st, "abc", 3, 0), 3);
	set_mtime(c, a, then);
	assert_int_equal(store_stage_publish(st), 0);
	assert_int_equal(mtime_of(c, a), then);
	assert_int_equal(version(c, a), 1);
	store_stage_close(st);

	/* O_TRUNC with no write, then the time: kept as well. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &st), 0);
	set_mtime(c, a, then + 1);
	assert_int_equal(store_stage_publish(st), 0);
	assert_int_equal(mtime_of(c, a), then + 1);
	store_stage_close(st);

	/* A write after the time stamps the content anew. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_APPEND, &st), 0);
	set_mtime(c, a, then);
	assert_int_equal(store_stage_write(st, "d", 1, 0), 1);
	assert_int_equal(store_stage_publish(st), 0);
	assert_true(mtime_of(c, a) > then + 1);
	store_stage_close(st);

	/* So does an ftruncate after it. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_CAS, &st), 0);
	set_mtime(c, a, then);
	assert_int_equal(store_stage_truncate(st, 1), 0);
	assert_int_equal(store_stage_publish(st), 0);
	assert_true(mtime_of(c, a) > then + 1);
	store_stage_close(st);

	/* Another publication after this stage's last write: the time set
	 * since belonged to that state, not to this one. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_APPEND, &st), 0);
	assert_int_equal(store_stage_write(st, "e", 1, 0), 1);
	publish(c, a, STORE_STAGE_APPEND, "f");
	set_mtime(c, a, then);
	assert_int_equal(store_stage_publish(st), 0);
	assert_true(mtime_of(c, a) > then + 1);
	assert_content(c, a, "dfe");
	store_stage_close(st);

	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

static void test_stage_payload_limit(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t, *p, *a;
	struct store_stage *st = NULL;
	struct store_stats s0, s1;
	char big[32];
	struct store_attr in, out;

	store_limits_default(&l);
	l.max_payload = 16;
	reopen(c, &l);
	memset(big, 'x', sizeof big);

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	/* Each refused write abandons its stage (see
	 * test_stage_refused_write_changes_nothing): one stage per case. */
	s0 = stats(c, NULL);
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_write(st, big, 17, 0), -EFBIG);
	store_stage_close(st);
	s1 = stats(c, NULL);
	assert_int_equal(s1.refused[STORE_REFUSED_PAYLOAD],
			 s0.refused[STORE_REFUSED_PAYLOAD] + 1);
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_write(st, big, 10, 10), -EFBIG);
	store_stage_close(st);
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_write(st, big, 10, 0), 10);
	assert_int_equal(store_stage_write(st, big, 6, 10), 6); /* exactly 16 */
	assert_int_equal(store_stage_publish(st), 0);
	store_stage_close(st);
	assert_gauges(c, t, 1, 1, 1, 1, 0, 16);
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_CAS, &st), 0);
	assert_int_equal(store_stage_write(st, big, 1, 16), -EFBIG);
	store_stage_close(st);

	/* Appending to a full child fails at write time. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_APPEND, &st), 0);
	assert_int_equal(store_stage_write(st, "y", 1, 0), -EFBIG);
	store_stage_close(st);

	/* A size change over max_payload. */
	in.size = 17;
	assert_int_equal(store_setattr(c->s, a, STORE_SET_SIZE, &in, &out),
			 -EFBIG);
	assert_gauges(c, t, 1, 1, 1, 1, 0, 16);

	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

static void test_stage_bytes_ceiling(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t, *p, *a, *b;
	struct store_stage *st = NULL;
	struct store_stats s0, s1;
	struct store_attr in, out;
	char big[32];

	store_limits_default(&l);
	l.max_bytes = 20;
	l.tenant_max_bytes = 0; /* the ceiling alone */
	reopen(c, &l);
	memset(big, 'x', sizeof big);

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	b = cr(c, p, "b");
	publish(c, a, STORE_STAGE_REPLACE, "123456789012345"); /* 15 */

	s0 = stats(c, NULL);
	assert_int_equal(store_stage_open(c->s, b, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_write(st, big, 6, 0), -ENOSPC);
	assert_int_equal(store_stage_flush(st), -ENOSPC);
	store_stage_close(st);
	s1 = stats(c, NULL);
	assert_gauges_eq(&s0, &s1);
	assert_int_equal(s1.refused[STORE_REFUSED_CAPACITY],
			 s0.refused[STORE_REFUSED_CAPACITY] + 1);
	assert_int_equal(store_stage_open(c->s, b, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_write(st, big, 5, 0), 5);
	assert_int_equal(store_stage_publish(st), 0);
	store_stage_close(st);
	assert_gauges(c, t, 1, 1, 2, 2, 0, 20);

	in.size = 6;
	assert_int_equal(store_setattr(c->s, b, STORE_SET_SIZE, &in, &out),
			 -ENOSPC);
	assert_gauges(c, t, 1, 1, 2, 2, 0, 20);

	/* Replacing content frees what it replaces: 15 -> 15 fits. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_write(st, big, 15, 0), 15);
	assert_int_equal(store_stage_publish(st), 0);
	store_stage_close(st);
	assert_gauges(c, t, 1, 1, 2, 2, 0, 20);

	put(c, b);
	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/*
 * No failed operation changes anything: `echo too-long > f` (O_TRUNC,
 * whose write is refused, and whose close error bash ignores) leaves f
 * as it was, instead of publishing the empty image an O_TRUNC stage
 * starts with.  The refused stage is abandoned: later writes, flush and
 * release publish nothing, and every flush (close) and publication
 * (fsync) reports the refusal, so no close says success for it.
 */
static void test_stage_refused_write_changes_nothing(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t, *p, *a;
	struct store_stage *st = NULL;
	struct store_stats s0, s1;
	char big[32];
	uint64_t v;
	int rc;

	store_limits_default(&l);
	l.max_payload = 16;
	reopen(c, &l);
	memset(big, 'x', sizeof big);

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "keep");
	v = version(c, a);

	for (int mode = STORE_STAGE_REPLACE; mode <= STORE_STAGE_CAS; mode++) {
		s0 = stats(c, NULL);
		assert_int_equal(store_stage_open(c->s, a, mode, &st), 0);
		assert_int_equal(store_stage_write(st, big, 17, 0), -EFBIG);
		/* A later write that would fit does not revive the stage. */
		rc = store_stage_write(st, "ok", 2, 0);
		assert_true(rc == -EFBIG);
		assert_int_equal(store_stage_flush(st), -EFBIG);
		assert_int_equal(version(c, a), v);
		rc = store_stage_publish(st);
		assert_int_equal(rc, -EFBIG);
		/* A second close (a dup) says the same. */
		assert_int_equal(store_stage_flush(st), -EFBIG);
		store_stage_close(st);
		assert_int_equal(version(c, a), v);
		assert_content(c, a, "keep");
		s1 = stats(c, NULL);
		assert_gauges_eq(&s0, &s1);
		/* Counted once, at the write that was refused. */
		assert_int_equal(s1.refused[STORE_REFUSED_PAYLOAD],
				 s0.refused[STORE_REFUSED_PAYLOAD] + 1);
	}

	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

static void test_stage_on_removed_child_stale(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a, *a2;
	struct store_stage *st = NULL, *st2 = NULL, *rd = NULL;
	char buf[16];
	uint64_t v;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "orig");

	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_APPEND, &st2), 0);
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_READ, &rd), 0);
	assert_int_equal(store_stage_write(st2, "zz", 2, 0), 2);
	assert_int_equal(store_unlink(c->s, p, "a"), 0);
	a2 = cr(c, p, "a");
	v = version(c, a2);

	assert_int_equal(store_stage_write(st, "late", 4, 0), -ESTALE);
	assert_int_equal(store_stage_publish(st), -ESTALE);
	assert_int_equal(store_stage_publish(st2), -ESTALE);
	assert_int_equal(store_stage_read(rd, buf, sizeof buf, 0), -ESTALE);
	store_stage_close(rd);
	store_stage_close(st2);
	store_stage_close(st);
	/* The new incarnation is untouched. */
	assert_int_equal(version(c, a2), v);
	assert_content(c, a2, "");
	assert_gauges(c, t, 1, 1, 1, 1, 0, 0);

	/* The same through a leave of the parent. */
	assert_int_equal(store_stage_open(c->s, a2, STORE_STAGE_REPLACE, &st),
			 0);
	assert_int_equal(store_stage_write(st, "x", 1, 0), 1);
	assert_int_equal(store_rmdir(c->s, t, "p", NULL), 0);
	assert_int_equal(store_stage_write(st, "y", 1, 1), -ESTALE);
	assert_int_equal(store_stage_publish(st), -ESTALE);
	store_stage_close(st);
	assert_gauges(c, t, 1, 0, 0, 0, 1, 0);

	put(c, a2);
	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

static void test_setattr_size_is_publication(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_attr in, out;
	uint64_t v0;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "hello");
	v0 = version(c, a);

	memset(&in, 0, sizeof in);
	in.size = 2;
	assert_int_equal(store_setattr(c->s, a, STORE_SET_SIZE, &in, &out), 0);
	assert_int_equal(out.size, 2);
	assert_int_equal(version(c, a), v0 + 1);
	assert_content(c, a, "he");
	assert_gauges(c, t, 1, 1, 1, 1, 0, 2);

	in.size = 4;
	assert_int_equal(store_setattr(c->s, a, STORE_SET_SIZE, &in, &out), 0);
	assert_int_equal(out.size, 4);
	assert_int_equal(version(c, a), v0 + 2);
	{
		char buf[16];

		assert_int_equal(content(c, a, buf, sizeof buf), 4);
		assert_memory_equal(buf, "he\0\0", 4);
	}
	assert_gauges(c, t, 1, 1, 1, 1, 0, 4);

	/* chmod/chown work. */
	in.mode = 0600;
	in.uid = 42;
	assert_int_equal(store_setattr(c->s, a, STORE_SET_MODE | STORE_SET_UID,
				       &in, &out), 0);
	assert_int_equal(out.mode & 07777, 0600);
	assert_true(S_ISREG(out.mode));
	assert_int_equal(out.uid, 42);
	assert_int_equal(store_getattr(c->s, a, &out), 0);
	assert_int_equal(out.mode & 07777, 0600);
	assert_int_equal(out.uid, 42);
	assert_int_equal(out.size, 4);

	/* The KILL bits clear their privilege bit and nothing else. */
	in.mode = 06751;
	assert_int_equal(store_setattr(c->s, a, STORE_SET_MODE, &in, &out), 0);
	assert_int_equal(store_setattr(c->s, a, STORE_SET_KILL_SUID, &in, &out),
			 0);
	assert_int_equal(out.mode & 07777, 02751);
	assert_int_equal(store_setattr(c->s, a, STORE_SET_KILL_SUID |
				       STORE_SET_KILL_SGID, &in, &out), 0);
	assert_int_equal(out.mode & 07777, 0751);
	assert_int_equal(out.uid, 42);
	assert_int_equal(version(c, a), v0 + 2);

	/* A directory has no size to set. */
	in.size = 0;
	assert_int_equal(store_setattr(c->s, p, STORE_SET_SIZE, &in, &out),
			 -EISDIR);
	in.mode = 0700;
	assert_int_equal(store_setattr(c->s, p, STORE_SET_MODE, &in, &out), 0);
	assert_int_equal(out.mode & 07777, 0700);
	assert_true(S_ISDIR(out.mode));

	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

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

	put(c, x);
	put(c, q);
	put(c, p);
	put(c, t);
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

	put(c, x);
	put(c, q);
	put(c, p);
	put(c, t);
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

	put(c, d1);
	put(c, c2);
	put(c, c1);
	put(c, y);
	put(c, x);
	put(c, b);
	put(c, a);
	put(c, u);
	put(c, t);
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
	put(c, p);
	assert_gauges(c, t, 1, 3, 0, 0, 3, 0);
	put(c, t);
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

	put(c, a);
	put(c, r);
	put(c, q);
	put(c, p);
	put(c, u);
	put(c, t);
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

	put(c, a);
	put(c, r);
	put(c, q);
	put(c, p);
	put(c, u);
	put(c, t);
	check_ok(c);
}

/* Listings and counters -------------------------------------------------- */

static void test_list_entries(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *z;
	struct store_dirlist l = { 0, NULL };

	t = mk(c, root(c), "t");
	assert_int_equal(mkdir_rc(c, root(c), "b"), 0);
	assert_int_equal(mkdir_rc(c, root(c), "a"), 0);
	assert_list(c, root(c), "a,b,t");

	p = mk(c, t, "zz");
	q = mk(c, t, "aa");
	assert_int_equal(mkdir_rc(c, t, "mm"), 0);
	assert_list(c, t, "aa,mm,zz");

	z = cr(c, p, "z");
	assert_int_equal(create_rc(c, p, "a", true), 0);
	assert_int_equal(create_rc(c, p, "m", true), 0);
	assert_list(c, p, "a,m,z");
	assert_int_equal(store_unlink(c->s, p, "a"), 0);
	assert_int_equal(create_rc(c, p, "a", true), 0);
	assert_list(c, p, "a,m,z");
	assert_int_equal(store_link(c->s, z, q, "k"), 0);
	assert_int_equal(create_rc(c, q, "j", true), 0);
	assert_list(c, q, "j,k");

	/* Entries carry the inode number and the kind. */
	assert_int_equal(store_list(c->s, p, &l), 0);
	assert_int_equal(l.n, 3);
	for (size_t i = 0; i < l.n; i++) {
		assert_int_equal(l.e[i].kind, STORE_CHILD);
		assert_int_equal(l.e[i].ino, ino_of(c, p, l.e[i].name));
	}
	store_dirlist_free(&l);
	assert_int_equal(store_list(c->s, t, &l), 0);
	assert_int_equal(l.n, 3);
	assert_int_equal(l.e[0].kind, STORE_PARENT);
	assert_int_equal(l.e[0].ino, store_node_ino(p));
	store_dirlist_free(&l);
	assert_int_equal(store_list(c->s, root(c), &l), 0);
	assert_int_equal(l.n, 3);
	assert_int_equal(l.e[0].kind, STORE_TENANT);
	assert_int_equal(l.e[0].ino, store_node_ino(t));
	store_dirlist_free(&l);

	/* A leave and a rejoin list the parent once. */
	assert_int_equal(store_rmdir(c->s, t, "zz", NULL), 0);
	assert_int_equal(mkdir_rc(c, t, "zz"), 0);
	assert_list(c, t, "aa,mm,zz");

	put(c, z);
	put(c, q);
	put(c, p);
	put(c, t);
	check_ok(c);
}

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

	put(c, a);
	put(c, old);
	put(c, p);
	put(c, u);
	put(c, t);
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

	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

static void test_special_nodes(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *s0 = NULL, *s1 = NULL, *s0b = NULL,
			       *ts = NULL, *n = NULL;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	assert_int_equal(store_special(c->s, root(c), 0, &s0), 0);
	assert_int_equal(store_node_kind(s0), STORE_SPECIAL);
	assert_int_equal(store_node_slot(s0), 0);
	assert_int_equal(store_node_depth(s0), 1);
	assert_null(store_node_tenant(s0));
	assert_int_equal(store_special(c->s, root(c), 1, &s1), 0);
	assert_int_equal(store_special(c->s, root(c), 0, &s0b), 0);
	assert_int_equal(store_node_ino(s0), store_node_ino(s0b));
	assert_true(store_node_ino(s0) != store_node_ino(s1));
	assert_true(store_node_ino(s0) != STORE_ROOT_INO);

	assert_int_equal(store_special(c->s, t, 0, &ts), 0);
	assert_int_equal(store_node_depth(ts), 2);
	assert_true(store_node_tenant(ts) == t);
	assert_true(store_node_ino(ts) != store_node_ino(s0));
	assert_true(store_node_ino(ts) != store_node_ino(t));
	assert_true(store_node_ino(ts) != store_node_ino(p));

	assert_int_equal(store_special(c->s, p, 0, &n), -ENOTDIR);
	assert_int_equal(store_special(c->s, t, STORE_NSPECIAL, &n), -EINVAL);
	assert_int_equal(store_special(c->s, t, -1, &n), -EINVAL);
	/* Special files are not listed by the store. */
	assert_list(c, root(c), "t");
	assert_list(c, t, "p");

	assert_int_equal(store_rmdir(c->s, root(c), "t", NULL), 0);
	assert_int_equal(store_special(c->s, t, 0, &n), -ESTALE);

	put(c, ts);
	put(c, s0b);
	put(c, s1);
	put(c, s0);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* ftruncate on an O_APPEND file cuts the content, as on any file. */
static void test_stage_truncate_append(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_stage *st;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "hello");
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_APPEND, &st), 0);
	assert_int_equal(store_stage_truncate(st, 2), 0);
	assert_int_equal(store_stage_publish(st), 0);
	store_stage_close(st);
	assert_content(c, a, "he");
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_APPEND, &st), 0);
	assert_int_equal(store_stage_write(st, "llo", 3, 0), 3);
	assert_int_equal(store_stage_truncate(st, 4), 0);
	assert_int_equal(store_stage_publish(st), 0);
	store_stage_close(st);
	assert_content(c, a, "hell");
	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* The same on an empty child, before anything is staged: the stage
 * starts from nothing and is cut or zero-extended from there. */
static void test_stage_truncate_append_empty(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_stage *st;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_APPEND, &st), 0);
	assert_int_equal(store_stage_truncate(st, 0), 0);
	assert_int_equal(store_stage_publish(st), 0);
	store_stage_close(st);
	assert_content(c, a, "");
	assert_int_equal(version(c, a), 1);
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_APPEND, &st), 0);
	assert_int_equal(store_stage_truncate(st, 2), 0);
	assert_int_equal(store_stage_write(st, "x", 1, 0), 1);
	assert_int_equal(store_stage_publish(st), 0);
	store_stage_close(st);
	{
		char buf[8];
		struct store_stage *rd;
		ssize_t n;

		assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_READ, &rd),
				 0);
		n = store_stage_read(rd, buf, sizeof buf, 0);
		store_stage_close(rd);
		assert_int_equal(n, 2);
		assert_memory_equal(buf, "x\0", 2);
	}
	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* Cascade permissions --------------------------------------------------- */

static const struct store_cred U1 = { 1001, 1001, NULL, 0 };
static const struct store_cred U2 = { 1002, 1002, NULL, 0 };
static const struct store_cred U3 = { 1003, 1003, NULL, 0 };
static const struct store_cred ROOTC = { 0, 0, NULL, 0 };

/* A directory or child of @uid with @mode in @dir. */
static struct store_node *mk_as(struct ctx *c, struct store_node *dir,
				const char *name, uid_t uid, mode_t mode)
{
	const struct store_owner o = { uid, uid, mode };
	struct store_node *n = NULL;

	assert_int_equal(store_mkdir(c->s, dir, name, &o, &n), 0);
	return n;
}

static void cr_as(struct ctx *c, struct store_node *p, const char *name,
		  uid_t uid)
{
	const struct store_owner o = { uid, uid, 0644 };
	struct store_node *n = NULL;
	bool created = false;

	assert_int_equal(store_create(c->s, p, name, &o, true, &n, &created), 0);
	put(c, n);
}

/* The gauges of the whole store, for "nothing changed". */
static void assert_same_gauges(struct ctx *c, const struct store_stats *was)
{
	struct store_stats now = stats(c, NULL);

	assert_int_equal(now.tenants, was->tenants);
	assert_int_equal(now.parents, was->parents);
	assert_int_equal(now.children, was->children);
	assert_int_equal(now.links, was->links);
	assert_int_equal(now.tombstones, was->tombstones);
}

/*
 * rmdir of a tenant or parent with content, by a caller other than root,
 * is allowed only as far as emptying it by hand would be on Linux; a
 * refusal is EACCES and changes nothing.
 */
static void test_rmdir_cascade_permissions(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *w, *p, *q;
	struct store_stats was;

	/* A 0700 tenant of 1001 with a parent and a child: closed to 1002,
	 * open to its owner. */
	t = mk_as(c, root(c), "t", 1001, 0700);
	p = mk_as(c, t, "p", 1001, 0755);
	cr_as(c, p, "c", 1001);
	put(c, p);
	was = stats(c, NULL);
	assert_int_equal(store_rmdir(c->s, root(c), "t", &U2), -EACCES);
	assert_int_equal(store_depart(c->s, t, "p", &U2), -EACCES);
	assert_same_gauges(c, &was);
	assert_list(c, t, "p");
	assert_int_equal(store_rmdir(c->s, root(c), "t", &U1), 0);
	put(c, t);

	/* A 0777 tenant: its parents decide.  A 0700 parent of 1001 with a
	 * child cannot be emptied by 1002; an empty one can go. */
	w = mk_as(c, root(c), "w", 1001, 0777);
	p = mk_as(c, w, "p", 1001, 0700);
	q = mk_as(c, w, "q", 1001, 0700);
	cr_as(c, p, "c", 1001);
	was = stats(c, NULL);
	assert_int_equal(store_rmdir(c->s, w, "p", &U2), -EACCES);
	assert_int_equal(store_rmdir(c->s, root(c), "w", &U2), -EACCES);
	assert_same_gauges(c, &was);
	assert_list(c, w, "p,q");
	assert_list(c, p, "c");
	assert_int_equal(store_rmdir(c->s, w, "q", &U2), 0);
	put(c, q);
	/* A child past its deadline is gone, reaped or not. */
	{
		struct store_node *cc = lk(c, p, "c");

		set_ttl(c, cc, 100);
		put(c, cc);
	}
	advance(c, 100);
	assert_int_equal(store_rmdir(c->s, root(c), "w", &U2), 0);
	put(c, p);
	put(c, w);

	/* A sticky tenant of 1001: 1003 may remove none of 1002's parents,
	 * so not the tenant either; its owner may. */
	t = mk_as(c, root(c), "s", 1001, 01777);
	p = mk_as(c, t, "p2", 1002, 0777);
	cr_as(c, p, "c", 1002);
	put(c, p);
	p = mk_as(c, t, "p3", 1003, 0755);
	put(c, p);
	was = stats(c, NULL);
	assert_int_equal(store_rmdir(c->s, root(c), "s", &U3), -EACCES);
	assert_int_equal(store_rmdir(c->s, t, "p2", &U3), -EACCES);
	assert_same_gauges(c, &was);
	assert_int_equal(store_rmdir(c->s, t, "p3", &U3), 0);
	assert_int_equal(store_rmdir(c->s, root(c), "s", &U1), 0);
	put(c, t);

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
	put(c, p);

	/* Root, and a call without credentials, are never refused. */
	p = mk_as(c, t, "x", 1001, 0);
	cr_as(c, p, "c", 1001);
	put(c, p);
	p = mk_as(c, t, "y", 1001, 0);
	cr_as(c, p, "c", 1001);
	put(c, p);
	assert_int_equal(store_rmdir(c->s, t, "x", &ROOTC), 0);
	assert_int_equal(store_depart(c->s, t, "y", NULL), 0);
	assert_int_equal(store_rmdir(c->s, root(c), "u", &ROOTC), 0);
	put(c, t);
	check_ok(c);
}

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
	put(c, p);
	p = mk_as(c, t, "e", 1002, 0700);
	put(c, p);
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
	put(c, t);
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
	put(c, p);
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
	put(c, p);
	assert_int_equal(store_drain_as(c->s, t, &U1), 0);
	assert_int_equal(store_drain_state(c->s, t, NULL), STORE_DRAINING);
	/* A running drain is not judged again: nothing starts. */
	assert_int_equal(store_drain_as(c->s, t, &U3), 0);
	advance(c, c->lim.drain_window_ms);
	assert_int_equal(store_drain_state(c->s, t, NULL), STORE_DRAINED);
	assert_list(c, t, "");
	put(c, t);

	/* A 0755 tenant of 1001: 1002 could not remove its parents; root
	 * and a call without credentials may. */
	t = mk_as(c, root(c), "t", 1001, 0755);
	p = mk_as(c, t, "p", 1001, 0777);
	put(c, p);
	assert_int_equal(store_drain_as(c->s, t, &U2), -EACCES);
	assert_int_equal(store_drain_state(c->s, t, NULL), STORE_READY);
	assert_int_equal(store_drain_as(c->s, t, &ROOTC), 0);
	assert_int_equal(store_drain_state(c->s, t, NULL), STORE_DRAINED);
	put(c, t);
	t = mk_as(c, root(c), "u", 1001, 0755);
	p = mk_as(c, t, "p", 1002, 0700);
	cr_as(c, p, "c", 1002);
	put(c, p);
	assert_int_equal(store_drain_as(c->s, t, NULL), 0);
	assert_int_equal(store_drain_state(c->s, t, NULL), STORE_DRAINING);
	put(c, t);
	check_ok(c);
}

/* Owner and group of @n as stat shows them, and its mode bits. */
static void assert_owner(struct ctx *c, struct store_node *n, uid_t uid,
			 gid_t gid, mode_t mode)
{
	struct store_attr a;

	assert_int_equal(store_getattr(c->s, n, &a), 0);
	assert_int_equal(a.uid, uid);
	assert_int_equal(a.gid, gid);
	assert_int_equal(a.mode & 07777, mode);
}

static void chmod_chgrp(struct ctx *c, struct store_node *n, gid_t gid,
			mode_t mode)
{
	struct store_attr in;

	memset(&in, 0, sizeof in);
	in.gid = gid;
	in.mode = mode;
	assert_int_equal(store_setattr(c->s, n, STORE_SET_GID | STORE_SET_MODE,
				       &in, NULL), 0);
}

/*
 * A node made in a setgid directory takes the directory's group; a new
 * directory there is setgid too; elsewhere nodes take the caller's.
 */
static void test_setgid_directories(void **state)
{
	struct ctx *c = *state;
	const struct store_owner u2d = { 1002, 1002, 0755 };
	const struct store_owner u2f = { 1002, 1002, 0640 };
	struct store_node *t, *p, *q, *ch, *plain;
	bool created;

	/* Without the bit: the caller's group. */
	plain = mk_as(c, root(c), "plain", 1002, 0755);
	assert_owner(c, plain, 1002, 1002, 0755);

	/* The root is setgid: a new tenant takes its group and the bit. */
	chmod_chgrp(c, root(c), 3000, 02755);
	assert_int_equal(store_mkdir(c->s, root(c), "t", &u2d, &t), 0);
	assert_owner(c, t, 1002, 3000, 02755);
	/* So its parents, then their children (files: no bit added). */
	assert_int_equal(store_mkdir(c->s, t, "p", &u2d, &p), 0);
	assert_owner(c, p, 1002, 3000, 02755);
	assert_int_equal(store_create(c->s, p, "c", &u2f, true, &ch, &created),
			 0);
	assert_owner(c, ch, 1002, 3000, 0640);
	put(c, ch);
	/* The group the directory has now is what counts. */
	chmod_chgrp(c, p, 2000, 02770);
	assert_int_equal(store_create(c->s, p, "d", &u2f, true, &ch, &created),
			 0);
	assert_owner(c, ch, 1002, 2000, 0640);
	put(c, ch);
	/* The bit removed: the caller's group again. */
	chmod_chgrp(c, t, 3000, 0755);
	assert_int_equal(store_mkdir(c->s, t, "q", &u2d, &q), 0);
	assert_owner(c, q, 1002, 1002, 0755);
	assert_int_equal(store_create(c->s, q, "c", &u2f, true, &ch, &created),
			 0);
	assert_owner(c, ch, 1002, 1002, 0640);
	put(c, ch);
	/* Existing nodes keep theirs. */
	assert_owner(c, plain, 1002, 1002, 0755);

	put(c, q);
	put(c, p);
	put(c, t);
	put(c, plain);
	check_ok(c);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_stage_truncate_append),
		T(test_stage_truncate_append_empty),
		T(test_rmdir_cascade_permissions),
		T(test_depart_cascade_permissions),
		T(test_drain_cascade_permissions),
		T(test_setgid_directories),
		T(test_root_and_tenant_mkdir),
		T(test_max_tenants),
		T(test_tenant_cleanup_cascade),
		T(test_parent_join_leave_rejoin),
		T(test_depart_nonexisting_parent),
		T(test_depart_live_parent_cascades),
		T(test_max_tombstones_refuses_leave),
		T(test_tombstone_ttl),
		T(test_tombstone_ttl_stats_without_access),
		T(test_tombstone_ttl_frees_pool),
		T(test_max_parents),
		T(test_child_create_excl_idempotent),
		T(test_child_old_incarnation_stale),
		T(test_inode_numbers_monotone),
		T(test_dead_parent_handle_changes_nothing),
		T(test_old_tenant_incarnation_handles),
		T(test_link_shares_state),
		T(test_link_survives_leave_of_other_parent),
		T(test_rename_between_parents),
		T(test_rename_noreplace_and_replace),
		T(test_rename_exchange),
		T(test_rename_eperm_exdev),
		T(test_stage_replace_publishes),
		T(test_stage_replace_dirty_at_open),
		T(test_stage_flush),
		T(test_stage_append),
		T(test_stage_cas),
		T(test_stage_cas_base_is_open_version),
		T(test_stage_reader_pinned),
		T(test_stage_reader_reads_on),
		T(test_stage_keeps_mtime_set_before_close),
		T(test_stage_payload_limit),
		T(test_stage_bytes_ceiling),
		T(test_stage_refused_write_changes_nothing),
		T(test_stage_on_removed_child_stale),
		T(test_setattr_size_is_publication),
		T(test_parent_quota),
		T(test_parent_quota_rename_replace_in_full_parent),
		T(test_tenant_quota),
		T(test_tenant_shares),
		T(test_tenant_shares_explicit),
		T(test_max_children_counts_states),
		T(test_list_entries),
		T(test_stats_counters),
		T(test_default_ttl_expires_child),
		T(test_special_nodes),
	};

	/* TEST_FILTER / TEST_SKIP: glob patterns of test names to run / skip. */
	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	if (getenv("TEST_SKIP"))
		cmocka_set_skip_filter(getenv("TEST_SKIP"));
	return cmocka_run_group_tests_name("store", tests, NULL, NULL);
}
