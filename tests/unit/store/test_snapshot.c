/*
 * test_snapshot.c - unit tests of snapshots (store/snapshot.c): their
 * rows, their scopes, their order, the memory they hold and their text.
 * That a snapshot is one instant whatever transitions run while it is
 * copied is tested in test_snapshot_midway.c.
 *
 * What CONTRACT.md s.5 (.snapshot) and store.h promise: a snapshot lists
 * exactly the tenants, parents, child links and tombstones in scope with
 * their documented fields, leaves expired nodes out, owns its memory, is
 * the store at one instant whatever transitions run while it is copied
 * (and while other threads move a child between parents), and the
 * memory open snapshots hold is bounded store-wide and per uid.
 *
 * The snapshot fields that do not apply to a kind are -1 / "" (store.h).
 * This suite reads "apply" as:
 *   tenant     tenant, ino
 *   parent     tenant, parent, generation, ttl_ms_left (lease), ino
 *   child      tenant, parent, child, generation (of its parent), version,
 *              size, nlink, ttl_ms_left (lease), ino (the state's)
 *   tombstone  tenant, parent, generation, ttl_ms_left (time until it
 *              ages out)
 * and a node without a lease has ttl_ms_left -1.
 *
 * The fixture (fixture.h) gives each test a fresh store on a manual
 * clock and holds the nodes the test is handed; its teardown releases
 * them and recounts the store (store_check_all).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout/layout.h"
#include "store/store.h"
#include "tests/unit/unit.h"
#include "tests/unit/store/fixture.h"
#include "tests/unit/store/snapshot.h"

/* Snapshot ------------------------------------------------------------------ */

static void test_snapshot_empty(void **state)
{
	struct ctx *c = *state;
	struct store_snapshot sn;

	take(c, NULL, &sn);
	assert_int_equal(sn.n, 0);
	store_snapshot_free(&sn);
	check_ok(c);
}

static void test_snapshot_root_rows(void **state)
{
	struct ctx *c = *state;
	struct store_snapshot sn;
	struct world w;
	int64_t tomb = (int64_t)c->lim.tombstone_ttl_ms - 1200;

	build_world(c, &w);
	take(c, NULL, &sn);
	{
		const struct xrow want[] = {
			XTENANT("t", ino(w.t)),
			XTENANT("u", ino(w.u)),
			XPARENT("t", "p", 1, -1, ino(w.p)),
			XPARENT("t", "q", 2, 9000 - 1200, ino(w.q)),
			XPARENT("u", "r", 1, -1, ino(w.r)),
			XCHILD("t", "p", "a", 1, 2, 7, 2, -1, ino(w.a)),
			XCHILD("t", "q", "shared", 2, 2, 7, 2, -1, ino(w.a)),
			XCHILD("t", "q", "b", 2, 0, 0, 1, -1, ino(w.b)),
			XCHILD("u", "r", "l", 1, 1, 3, 1, 5000 - 1200,
			       ino(w.l)),
			XTOMB("t", "ghost", 0, tomb),
		};

		assert_snap(&sn, want, sizeof want / sizeof want[0]);
	}
	store_snapshot_free(&sn);

	/* The clock moves the TTLs left, exactly. */
	advance(c, 800);
	take(c, NULL, &sn);
	assert_int_equal(sn.n, 10);
	for (size_t i = 0; i < sn.n; i++) {
		const struct store_snap_row *r = &sn.rows[i];

		if (row_key_is(r, STORE_SNAP_CHILD, "u", "r", "l"))
			assert_int_equal(r->ttl_ms_left, 5000 - 2000);
		if (row_key_is(r, STORE_SNAP_PARENT, "t", "q", ""))
			assert_int_equal(r->ttl_ms_left, 9000 - 2000);
		if (r->kind == STORE_SNAP_TOMBSTONE)
			assert_int_equal(r->ttl_ms_left, tomb - 800);
	}
	store_snapshot_free(&sn);

	check_ok(c);
}

static void test_snapshot_tenant_scope(void **state)
{
	struct ctx *c = *state;
	struct store_snapshot sn;
	struct world w;
	int64_t tomb = (int64_t)c->lim.tombstone_ttl_ms - 1200;

	build_world(c, &w);
	take(c, w.t, &sn);
	{
		const struct xrow want[] = {
			XTENANT("t", ino(w.t)),
			XPARENT("t", "p", 1, -1, ino(w.p)),
			XPARENT("t", "q", 2, 9000 - 1200, ino(w.q)),
			XCHILD("t", "p", "a", 1, 2, 7, 2, -1, ino(w.a)),
			XCHILD("t", "q", "shared", 2, 2, 7, 2, -1, ino(w.a)),
			XCHILD("t", "q", "b", 2, 0, 0, 1, -1, ino(w.b)),
			XTOMB("t", "ghost", 0, tomb),
		};

		assert_snap(&sn, want, sizeof want / sizeof want[0]);
	}
	store_snapshot_free(&sn);

	take(c, w.u, &sn);
	{
		const struct xrow want[] = {
			XTENANT("u", ino(w.u)),
			XPARENT("u", "r", 1, -1, ino(w.r)),
			XCHILD("u", "r", "l", 1, 1, 3, 1, 5000 - 1200,
			       ino(w.l)),
		};

		assert_snap(&sn, want, sizeof want / sizeof want[0]);
	}
	store_snapshot_free(&sn);
	check_ok(c);
}

/*
 * Rows are in name order, byte by byte, whatever order the tables hold
 * them in: tenants, parents and children made in an order of their own,
 * with names no hash or locale keeps in byte order; and a bucket whose
 * table grew and shrank again lists the same rows in the same order.
 */
static void test_snapshot_sorted_by_name(void **state)
{
	static const char *const names[] = {
		"zeta", "B", "a-b", "a", "ab", "_x", "~", "10", "9", "1",
		"caf\xc3\xa9", "a.b", "Z",
	};
	enum { N = sizeof names / sizeof names[0] };
	struct ctx *c = *state;
	struct store_snapshot sn;
	struct store_node *t = NULL, *p = NULL;
	char *s1, *s2, name[16];

	for (size_t i = 0; i < N; i++) {
		struct store_node *ti = mk(c, root(c), names[i]);

		for (size_t j = 0; j < N; j++) {
			struct store_node *pj = mk(c, ti, names[(i + j) % N]);

			/* Five parents of N children, in an order of their
			 * own (5 and N have no common factor). */
			if (j % 3 == 0)
				for (size_t k = 0; k < N; k++)
					cr(c, pj, names[(j + k * 5) % N]);
			if (i == 0 && j == 0) {
				t = ti;
				p = pj;
			}
		}
		assert_int_equal(store_depart(c->s, ti, "gone", NULL), 0);
		assert_int_equal(store_depart(c->s, ti, "Gone", NULL), 0);
		assert_int_equal(store_rmdir(c->s, ti, names[(i + 1) % N], NULL),
				 0);
	}
	/* take() checks the order. */
	take(c, NULL, &sn);
	assert_int_equal(sn.n, N * (1 + (N - 1) + 5 * N + 3));
	assert_int_equal(sn.rows[0].kind, STORE_SNAP_TENANT);
	assert_string_equal(sn.rows[0].tenant, "1");
	assert_int_equal(sn.rows[sn.n - 1].kind, STORE_SNAP_TOMBSTONE);
	assert_string_equal(sn.rows[sn.n - 1].tenant, "~");
	/* (its tombstones: "10", the parent that left, "Gone", "gone") */
	assert_string_equal(sn.rows[sn.n - 1].parent, "gone");
	store_snapshot_free(&sn);
	take(c, t, &sn);
	assert_int_equal(sn.n, 1 + (N - 1) + 5 * N + 3);
	s1 = snap_str(&sn);
	store_snapshot_free(&sn);

	/* A bucket's table grows past 400 links and shrinks back. */
	for (int i = 0; i < 400; i++) {
		snprintf(name, sizeof name, "x%d", i);
		assert_int_equal(create_rc(c, p, name, true), 0);
	}
	for (int i = 0; i < 400; i++) {
		snprintf(name, sizeof name, "x%d", i);
		assert_int_equal(store_unlink(c->s, p, name), 0);
	}
	take(c, t, &sn);
	s2 = snap_str(&sn);
	assert_string_equal(s1, s2);
	free(s1);
	free(s2);
	store_snapshot_free(&sn);
	check_ok(c);
}

static void test_snapshot_leaves_out_expired(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_snapshot sn;
	struct store_node *t, *p, *q, *a, *b;

	store_limits_default(&l);
	l.tombstone_ttl_ms = 3000;
	reopen(c, &l);
	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	a = cr(c, p, "a");
	b = cr(c, p, "b");
	cr(c, q, "e");
	cr(c, q, "f");
	assert_int_equal(store_depart(c->s, t, "old", NULL), 0);
	advance(c, 1000);
	assert_int_equal(store_depart(c->s, t, "new", NULL), 0);
	set_ttl(c, b, 500);      /* a child */
	set_ttl(c, q, 800);      /* a parent, and with it e and f */
	set_ttl(c, a, 5000);
	advance(c, 2000);        /* b, q due; tombstone "old" aged out */

	/* Nothing reaped yet: the snapshot still leaves them all out. */
	take(c, NULL, &sn);
	assert_int_equal(snap_count(&sn, STORE_SNAP_CHILD, "t", "p", "b"), 0);
	assert_int_equal(snap_count(&sn, STORE_SNAP_PARENT, "t", "q", ""), 0);
	assert_int_equal(snap_count(&sn, STORE_SNAP_CHILD, "t", "q", "e"), 0);
	assert_int_equal(snap_count(&sn, STORE_SNAP_CHILD, "t", "q", "f"), 0);
	assert_int_equal(snap_count(&sn, STORE_SNAP_TOMBSTONE, "t", "old", ""),
			 0);
	assert_int_equal(snap_count(&sn, STORE_SNAP_TOMBSTONE, "t", "new", ""),
			 1);
	assert_int_equal(snap_count(&sn, STORE_SNAP_CHILD, "t", "p", "a"), 1);
	for (size_t i = 0; i < sn.n; i++)
		if (row_key_is(&sn.rows[i], STORE_SNAP_CHILD, "t", "p", "a"))
			assert_int_equal(sn.rows[i].ttl_ms_left, 3000);
		else if (row_key_is(&sn.rows[i], STORE_SNAP_TOMBSTONE, "t",
				    "new", ""))
			assert_int_equal(sn.rows[i].ttl_ms_left, 1000);
	store_snapshot_free(&sn);

	/* After the reaper: exactly what is left (q left a tombstone). */
	(void)store_expire(c->s, 100);
	take(c, NULL, &sn);
	{
		const struct xrow want[] = {
			XTENANT("t", ino(t)),
			XPARENT("t", "p", 1, -1, ino(p)),
			XCHILD("t", "p", "a", 1, 0, 0, 1, 3000, ino(a)),
			XTOMB("t", "new", 0, 1000),
			XTOMB("t", "q", 1, 3000), /* left at the reap */
		};

		assert_snap(&sn, want, sizeof want / sizeof want[0]);
	}
	store_snapshot_free(&sn);
	check_ok(c);
}

/*
 * A parent past its deadline is left out of a snapshot before the reaper
 * has run, and so are its links in the nlink of a state it shares: every
 * row's nlink is the number of rows of its state.  Also when the state is
 * frozen midway (a publication, the reaper taking the expired parent's
 * link, a new link) before the taker copies it.
 */
struct nlink_midway {
	struct ctx *c;
	struct store_node *x, *d;
	int what;
};

static void nlink_midway_step(void *arg, unsigned step)
{
	struct nlink_midway *m = arg;
	struct ctx *c = m->c;

	if (step != 0)
		return;
	switch (m->what) {
	case 1:
		publish(c, m->x, STORE_STAGE_REPLACE, "midway");
		break;
	case 2:
		assert_int_equal(store_expire(c->s, 10), 1); /* a's bucket */
		break;
	case 3:
		assert_int_equal(store_link(c->s, m->x, m->d, "x3"), 0);
		break;
	}
}

static void test_snapshot_nlink_leaves_out_expired_parents(void **state)
{
	struct ctx *c = *state;

	for (int what = 0; what < 4; what++) {
		struct store_limits l;
		struct store_snapshot sn;
		struct store_node *t, *a, *b, *d, *x;
		struct nlink_midway m = { .c = c, .what = what };

		store_limits_default(&l);
		reopen(c, &l);
		t = mk(c, root(c), "t");
		a = mk(c, t, "a");
		b = mk(c, t, "b");
		d = mk(c, t, "d");
		x = cr(c, b, "x");
		publish(c, x, STORE_STAGE_REPLACE, "hello");
		assert_int_equal(store_link(c->s, x, a, "x2"), 0);
		set_ttl(c, a, 200);
		advance(c, 200);            /* a is due, not reaped */
		m.x = x;
		m.d = d;
		store_snapshot_step_hook(c->s, nlink_midway_step, &m);
		take(c, t, &sn);
		store_snapshot_step_hook(c->s, NULL, NULL);
		{
			const struct xrow want[] = {
				XTENANT("t", ino(t)),
				XPARENT("t", "b", 1, -1, ino(b)),
				XPARENT("t", "d", 1, -1, ino(d)),
				XCHILD("t", "b", "x", 1, 1, 5, 1, -1, ino(x)),
			};

			assert_snap(&sn, want, sizeof want / sizeof want[0]);
		}
		store_snapshot_free(&sn);

		check_ok(c);
	}
}

static void test_snapshot_unaffected_by_later_changes(void **state)
{
	struct ctx *c = *state;
	struct store_snapshot s1, s2;
	struct world w;
	char *before1, *before2, *after;

	build_world(c, &w);
	take(c, NULL, &s1);
	take(c, w.t, &s2);
	before1 = snap_str(&s1);
	before2 = snap_str(&s2);

	/* Change everything the snapshots name. */
	publish(c, w.a, STORE_STAGE_REPLACE, "a much longer state than before");
	assert_int_equal(store_unlink(c->s, w.q, "b"), 0);
	assert_int_equal(create_rc(c, w.p, "new", true), 0);
	set_ttl(c, w.l, 1);
	advance(c, 10);
	(void)store_expire(c->s, 100);
	assert_int_equal(store_rmdir(c->s, w.t, "p", NULL), 0);
	assert_int_equal(store_rmdir(c->s, root(c), "t", NULL), 0);
	assert_int_equal(store_rmdir(c->s, root(c), "u", NULL), 0);
	assert_int_equal(mkdir_rc(c, root(c), "t"), 0);

	after = snap_str(&s1);
	assert_string_equal(after, before1);
	free(after);
	after = snap_str(&s2);
	assert_string_equal(after, before2);
	free(after);
	store_snapshot_free(&s1);
	store_snapshot_free(&s2);
	free(before1);
	free(before2);

	/* And the store moved on. */
	take(c, NULL, &s1);
	assert_int_equal(s1.n, 1);
	assert_int_equal(s1.rows[0].kind, STORE_SNAP_TENANT);
	assert_string_equal(s1.rows[0].tenant, "t");
	store_snapshot_free(&s1);

	check_ok(c);
}

/* A snapshot during a drain, and of a drained store. */
static void test_snapshot_and_drain(void **state)
{
	struct ctx *c = *state;
	struct store_snapshot sn;
	struct world w;

	build_world(c, &w);
	assert_int_equal(store_drain(c->s, NULL), 0);
	take(c, NULL, &sn);
	assert_int_equal(sn.n, 10);
	store_snapshot_free(&sn);
	assert_int_equal(store_drain_now(c->s, NULL), 0);
	take(c, NULL, &sn);
	assert_int_equal(sn.n, 0);
	store_snapshot_free(&sn);
	check_ok(c);
}

static void test_snapshot_drained_tenant(void **state)
{
	struct ctx *c = *state;
	struct store_snapshot sn;
	struct world w;

	build_world(c, &w);
	assert_int_equal(store_drain_now(c->s, w.t), 0);
	take(c, w.t, &sn);
	{
		const struct xrow want[] = { XTENANT("t", ino(w.t)) };

		assert_snap(&sn, want, 1);
	}
	store_snapshot_free(&sn);
	take(c, NULL, &sn);
	assert_int_equal(sn.n, 4); /* t; u, r, l; and nothing else of t */
	assert_int_equal(snap_count(&sn, STORE_SNAP_TENANT, "t", "", ""), 1);
	assert_int_equal(snap_count(&sn, STORE_SNAP_CHILD, "u", "r", "l"), 1);
	store_snapshot_free(&sn);
	check_ok(c);
}

/* The memory open snapshots hold ------------------------------------------ */

/*
 * The memory open snapshots hold is bounded store-wide and per uid: a
 * hold past either is refused (ENFILE, EMFILE) and holds nothing; root
 * has no share; what is released is free again; .stats counts it.
 */
static void test_snapshot_hold_bounds(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;

	store_limits_default(&l);
	l.max_snapshot_bytes = 1000;
	reopen(c, &l);
	assert_int_equal(store_limits(c->s)->user_max_snapshot_bytes, 500);

	assert_int_equal(store_snapshot_hold(c->s, 1002, 501), -EMFILE);
	assert_int_equal(store_snapshot_hold(c->s, 1001, 300), 0);
	assert_int_equal(store_snapshot_hold(c->s, 1001, 200), 0);
	assert_int_equal(store_snapshot_hold(c->s, 1001, 1), -EMFILE);
	assert_int_equal(stats(c, NULL).snapshot_bytes, 500);
	/* Another user has its own share; the sum is bounded. */
	assert_int_equal(store_snapshot_hold(c->s, 1002, 400), 0);
	assert_int_equal(store_snapshot_hold(c->s, 1003, 101), -ENFILE);
	assert_int_equal(store_snapshot_hold(c->s, 0, 101), -ENFILE);
	assert_int_equal(store_snapshot_hold(c->s, 1001, 2000), -ENFILE);
	/* Root has no share, only the store-wide bound. */
	assert_int_equal(store_snapshot_hold(c->s, 0, 100), 0);
	assert_int_equal(stats(c, NULL).snapshot_bytes, 1000);
	store_snapshot_release(c->s, 1001, 300);
	assert_int_equal(store_snapshot_hold(c->s, 1003, 300), 0);
	assert_int_equal(store_snapshot_hold(c->s, 1001, 1), -ENFILE);
	store_snapshot_release(c->s, 1003, 300);
	assert_int_equal(store_snapshot_hold(c->s, 1001, 300), 0);
	store_snapshot_release(c->s, 1001, 300);
	store_snapshot_release(c->s, 1001, 200);
	store_snapshot_release(c->s, 1002, 400);
	store_snapshot_release(c->s, 0, 100);
	assert_int_equal(stats(c, NULL).snapshot_bytes, 0);
	/* Nothing held, every share is whole again. */
	assert_int_equal(store_snapshot_hold(c->s, 1001, 500), 0);
	store_snapshot_release(c->s, 1001, 500);

	/* Out of memory for a new uid's entry: refused, nothing held. */
	store_fault_fail_nth(1);
	assert_int_equal(store_snapshot_hold(c->s, 1004, 10), -ENOMEM);
	store_fault_fail_nth(0);
	assert_int_equal(stats(c, NULL).snapshot_bytes, 0);

	/* 0 takes the user share away. */
	l.user_max_snapshot_bytes = 0;
	reopen(c, &l);
	assert_int_equal(store_snapshot_hold(c->s, 1001, 1000), 0);
	assert_int_equal(store_snapshot_hold(c->s, 1002, 1), -ENFILE);
	store_snapshot_release(c->s, 1001, 1000);
}

/* Rows as .snapshot shows them -------------------------------------------- */

/* Every row of a real snapshot formats into as many fields as the header. */
static void test_layout_rows_of_a_snapshot(void **state)
{
	struct ctx *c = *state;
	struct store_snapshot sn;
	struct world w;
	size_t hdr_tabs = 0;

	for (const char *p = layout_snapshot_header; *p; p++)
		hdr_tabs += *p == '\t';
	assert_int_equal(hdr_tabs, 9);
	build_world(c, &w);
	take(c, NULL, &sn);
	for (size_t i = 0; i < sn.n; i++) {
		char buf[1024];
		size_t n = layout_format_snapshot_row(buf, sizeof buf,
						      &sn.rows[i]);
		size_t tabs = 0;

		assert_true(n < sizeof buf);
		assert_int_equal(strlen(buf), n);
		assert_int_equal(buf[n - 1], '\n');
		for (size_t k = 0; k < n; k++)
			tabs += buf[k] == '\t';
		assert_int_equal(tabs, hdr_tabs);
		if (sn.rows[i].kind == STORE_SNAP_TENANT)
			assert_true(strncmp(buf, "tenant\t", 7) == 0);
		if (sn.rows[i].kind == STORE_SNAP_TOMBSTONE)
			assert_true(strcmp(buf + n - 3, "\t-\n") == 0);
	}
	store_snapshot_free(&sn);
	check_ok(c);
}

/*
 * A snapshot's seq is the number of the last line of the log it includes:
 * the log's last for the whole store, the tenant's own last line for a
 * tenant; a reader started at the next number reads exactly the lines
 * after it.  Its row in .snapshot: "seq", the number, eight "-".
 */
static void test_snapshot_seq(void **state)
{
	struct ctx *c = *state;
	struct store_snapshot sn;
	struct store_event_reader *r;
	struct world w;
	uint64_t end;
	char buf[256], want[64];
	ssize_t n;

	build_world(c, &w);
	end = store_events_end(c->s);
	take(c, NULL, &sn);
	assert_int_equal(sn.seq, (int64_t)end - 1);
	store_snapshot_free(&sn);

	mk(c, w.t, "z");
	take(c, w.u, &sn); /* u's last line came before z's join */
	assert_true(sn.seq > 0 && sn.seq < (int64_t)end);
	store_snapshot_free(&sn);
	take(c, w.t, &sn);
	assert_int_equal(sn.seq, (int64_t)store_events_end(c->s) - 1);

	assert_int_equal(store_events_open(c->s, w.t, NULL, 0, &r), 0);
	mk(c, w.t, "y");
	store_events_start(c->s, r, w.t, (uint64_t)sn.seq + 1);
	n = store_events_read(c->s, r, buf, sizeof buf - 1);
	assert_true(n > 0);
	buf[n] = '\0';
	snprintf(want, sizeof want, "%lld\tjoin\tt\ty\t",
		 (long long)sn.seq + 1);
	assert_memory_equal(buf, want, strlen(want));
	assert_int_equal(strchr(buf, '\n') - buf + 1, n);
	store_events_close(r);

	n = (ssize_t)layout_format_snapshot_seq(buf, sizeof buf, sn.seq);
	snprintf(want, sizeof want, "seq\t%lld\t-\t-\t-\t-\t-\t-\t-\t-\n",
		 (long long)sn.seq);
	assert_string_equal(buf, want);
	assert_int_equal(n, strlen(want));
	assert_int_equal(layout_format_snapshot_seq(NULL, 0, -1),
			 strlen("seq\t-\t-\t-\t-\t-\t-\t-\t-\t-\n"));
	store_snapshot_free(&sn);
	check_ok(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST_HOOKED(test_snapshot_empty),
		TEST_HOOKED(test_snapshot_root_rows),
		TEST_HOOKED(test_snapshot_tenant_scope),
		TEST_HOOKED(test_snapshot_sorted_by_name),
		TEST_HOOKED(test_snapshot_leaves_out_expired),
		TEST_HOOKED(test_snapshot_nlink_leaves_out_expired_parents),
		TEST_HOOKED(test_snapshot_unaffected_by_later_changes),
		TEST_HOOKED(test_snapshot_and_drain),
		TEST_HOOKED(test_snapshot_drained_tenant),
		TEST_HOOKED(test_snapshot_hold_bounds),
		TEST_HOOKED(test_layout_rows_of_a_snapshot),
		TEST_HOOKED(test_snapshot_seq),
	};

	return run_store_tests("snapshot", tests);
}
