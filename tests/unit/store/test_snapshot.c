/*
 * test_snapshot.c - unit tests of snapshots (store/snapshot.c).
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

static const char *snap_kind_name(enum store_snap_kind k)
{
	switch (k) {
	case STORE_SNAP_TENANT: return "tenant";
	case STORE_SNAP_PARENT: return "parent";
	case STORE_SNAP_CHILD: return "child";
	case STORE_SNAP_TOMBSTONE: return "tombstone";
	}
	return "?";
}

/* One row as text, independent of layout/ (for messages and compares). */
static void row_str(char *buf, size_t cap, const struct store_snap_row *r)
{
	snprintf(buf, cap,
		 "%s [%s] [%s] [%s] gen=%" PRId64 " ver=%" PRId64
		 " size=%" PRId64 " nlink=%" PRId64 " ttl=%" PRId64
		 " ino=%" PRId64,
		 snap_kind_name(r->kind), r->tenant ? r->tenant : "(null)",
		 r->parent ? r->parent : "(null)",
		 r->child ? r->child : "(null)", r->generation, r->version,
		 r->size, r->nlink, r->ttl_ms_left, r->ino);
}

/* The whole snapshot as text, one row_str() a line (malloc'd); with
 * @owned, each row also shows the tenant owner and mode it carries. */
static char *snap_text(const struct store_snapshot *sn, bool owned)
{
	size_t cap = 300 * (sn->n + 1), len = 0;
	char *out = malloc(cap);

	assert_non_null(out);
	out[0] = '\0';
	for (size_t i = 0; i < sn->n; i++) {
		const struct store_snap_row *r = &sn->rows[i];

		row_str(out + len, cap - len - 1, r);
		len += strlen(out + len);
		if (owned)
			len += (size_t)snprintf(out + len, cap - len,
						" own=%u:%u:%o",
						(unsigned)r->tenant_uid,
						(unsigned)r->tenant_gid,
						(unsigned)r->tenant_mode);
		out[len++] = '\n';
		out[len] = '\0';
	}
	return out;
}

static char *snap_str(const struct store_snapshot *sn)
{
	return snap_text(sn, false);
}

static void dump_snap(const struct store_snapshot *sn)
{
	char *s = snap_str(sn);

	print_error("snapshot (%zu rows):\n%s", sn->n, s);
	free(s);
}

/* An expected row: names NULL mean "". */
struct xrow {
	enum store_snap_kind kind;
	const char *tenant, *parent, *child;
	int64_t generation, version, size, nlink, ttl_ms_left, ino;
};

#define XTENANT(t, ino) { STORE_SNAP_TENANT, t, "", "", -1, -1, -1, -1, -1, ino }

#define XPARENT(t, p, g, ttl, ino) \
	{ STORE_SNAP_PARENT, t, p, "", g, -1, -1, -1, ttl, ino }

#define XCHILD(t, p, ch, g, v, sz, nl, ttl, ino) \
	{ STORE_SNAP_CHILD, t, p, ch, g, v, sz, nl, ttl, ino }

#define XTOMB(t, p, g, ttl) \
	{ STORE_SNAP_TOMBSTONE, t, p, "", g, -1, -1, -1, ttl, -1 }

static bool row_key_is(const struct store_snap_row *r, enum store_snap_kind k,
		       const char *t, const char *p, const char *ch)
{
	return r->kind == k && r->tenant && r->parent && r->child &&
	       strcmp(r->tenant, t) == 0 && strcmp(r->parent, p) == 0 &&
	       strcmp(r->child, ch) == 0;
}

/* How many rows of @sn have this key. */
static size_t snap_count(const struct store_snapshot *sn,
			 enum store_snap_kind k, const char *t, const char *p,
			 const char *ch)
{
	size_t n = 0;

	for (size_t i = 0; i < sn->n; i++)
		n += row_key_is(&sn->rows[i], k, t, p, ch);
	return n;
}

/* @sn has exactly the rows @want (in any order). */
static void assert_snap(const struct store_snapshot *sn,
			const struct xrow *want, size_t nwant)
{
	bool bad = sn->n != nwant;
	char msg[512] = "";

	if (bad)
		snprintf(msg, sizeof msg, "%zu rows, expected %zu", sn->n,
			 nwant);
	for (size_t i = 0; i < sn->n; i++) {
		const struct store_snap_row *r = &sn->rows[i];

		if (!r->tenant || !r->parent || !r->child) {
			snprintf(msg, sizeof msg, "row %zu has a NULL name", i);
			bad = true;
		}
	}
	for (size_t w = 0; !bad && w < nwant; w++) {
		const struct xrow *x = &want[w];
		const char *p = x->parent ? x->parent : "";
		const char *ch = x->child ? x->child : "";
		const struct store_snap_row *r = NULL;
		size_t hits = 0;

		for (size_t i = 0; i < sn->n; i++)
			if (row_key_is(&sn->rows[i], x->kind, x->tenant, p,
				       ch)) {
				r = &sn->rows[i];
				hits++;
			}
		if (hits != 1) {
			snprintf(msg, sizeof msg, "%zu rows for %s %s/%s/%s",
				 hits, snap_kind_name(x->kind), x->tenant, p,
				 ch);
			bad = true;
			break;
		}
		if (r->generation != x->generation ||
		    r->version != x->version || r->size != x->size ||
		    r->nlink != x->nlink ||
		    r->ttl_ms_left != x->ttl_ms_left || r->ino != x->ino) {
			char got[256];

			row_str(got, sizeof got, r);
			snprintf(msg, sizeof msg,
				 "row %s, expected gen=%" PRId64 " ver=%" PRId64
				 " size=%" PRId64 " nlink=%" PRId64
				 " ttl=%" PRId64 " ino=%" PRId64,
				 got, x->generation, x->version, x->size,
				 x->nlink, x->ttl_ms_left, x->ino);
			bad = true;
		}
	}
	if (bad) {
		dump_snap(sn);
		fail_msg("snapshot: %s", msg);
	}
}

/* A row's rank among its tenant's rows: its own row, its buckets (a
 * parent's row, then its children), its tombstones. */
static int rank_of(const struct store_snap_row *r)
{
	return r->kind == STORE_SNAP_TENANT ? 0 :
	       r->kind == STORE_SNAP_TOMBSTONE ? 2 : 1;
}

/* Negative, 0 or positive as @a comes before, with or after @b in
 * statefs(8)'s order: tenant name, rank, parent name, child name, each
 * in byte order. */
static int row_order(const struct store_snap_row *a,
		     const struct store_snap_row *b)
{
	int c = strcmp(a->tenant, b->tenant);

	if (c == 0)
		c = rank_of(a) - rank_of(b);
	if (c == 0)
		c = strcmp(a->parent, b->parent);
	if (c == 0)
		c = strcmp(a->child, b->child);
	return c;
}

/* Every row of @sn comes strictly after the one before it. */
static void assert_sorted(const struct store_snapshot *sn)
{
	for (size_t i = 1; i < sn->n; i++) {
		if (row_order(&sn->rows[i - 1], &sn->rows[i]) < 0)
			continue;
		dump_snap(sn);
		fail_msg("snapshot rows %zu and %zu are out of order", i - 1, i);
	}
}

static void take(struct ctx *c, struct store_node *tenant,
		 struct store_snapshot *sn)
{
	memset(sn, 0xa5, sizeof *sn);
	assert_int_equal(store_snapshot_take(c->s, tenant, sn), 0);
	assert_int_equal(sn->taken_ms, now(c));
	if (sn->n)
		assert_non_null(sn->rows);
	assert_sorted(sn);
}

static int64_t ino(struct store_node *n)
{
	return (int64_t)store_node_ino(n);
}

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

/* The store of the snapshot tests: see the rows expected below. */
struct world {
	struct store_node *t, *u, *p, *q, *r, *a, *b, *l;
	uint64_t t0;
};

static void build_world(struct ctx *c, struct world *w)
{
	w->t0 = now(c);
	w->t = mk(c, root(c), "t");
	w->u = mk(c, root(c), "u");
	w->p = mk(c, w->t, "p");
	mk(c, w->t, "q");
	assert_int_equal(store_rmdir(c->s, w->t, "q", NULL), 0); /* tombstone g1 */
	w->q = mk(c, w->t, "q");                       /* generation 2 */
	w->r = mk(c, w->u, "r");
	assert_int_equal(store_depart(c->s, w->t, "ghost", NULL), 0); /* g0 */
	w->a = cr(c, w->p, "a");
	publish(c, w->a, STORE_STAGE_REPLACE, "hello");
	publish(c, w->a, STORE_STAGE_APPEND, "!!");  /* version 2, size 7 */
	assert_int_equal(store_link(c->s, w->a, w->q, "shared"), 0);
	w->b = cr(c, w->q, "b");                     /* version 0, size 0 */
	w->l = cr(c, w->r, "l");
	publish(c, w->l, STORE_STAGE_REPLACE, "xyz");
	set_ttl(c, w->l, 5000);
	set_ttl(c, w->q, 9000);
	advance(c, 1200);
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

/* Snapshot with transitions in the middle of its copy ---------------------- */

/*
 * One transition (or a few) that changes what build_world() made.  Alone,
 * each must succeed; in a sequence (one per step) an earlier one may have
 * taken away what a later one needs, so only a lone run checks codes.
 */
typedef void (*mutation)(struct ctx *c, struct world *w);

static bool midway_alone;

#define OK(call)                                                      \
	do {                                                          \
		int rc_ = (call);                                     \
		if (midway_alone && rc_ != 0)                         \
			fail_msg("%s: %d", #call, rc_);               \
	} while (0)

static void mut_publish_shared(struct ctx *c, struct world *w)
{
	OK(publish_rc(c, w->a, STORE_STAGE_REPLACE,
		      "a much longer state than before"));
}

static void mut_truncate_shared(struct ctx *c, struct world *w)
{
	struct store_attr in = { .size = 1 };

	OK(store_setattr(c->s, w->a, STORE_SET_SIZE, &in, NULL));
}

static void mut_unlink(struct ctx *c, struct world *w)
{
	OK(store_unlink(c->s, w->q, "b"));
}

static void mut_unlink_shared(struct ctx *c, struct world *w)
{
	OK(store_unlink(c->s, w->q, "shared"));
}

static void mut_create(struct ctx *c, struct world *w)
{
	OK(create_rc(c, w->p, "new", true));
}

static void mut_link(struct ctx *c, struct world *w)
{
	OK(store_link(c->s, w->b, w->p, "b2"));
}

static void mut_rename_across(struct ctx *c, struct world *w)
{
	OK(store_rename(c->s, w->p, "a", w->q, "moved", 0));
}

static void mut_rename_over(struct ctx *c, struct world *w)
{
	OK(store_rename(c->s, w->q, "b", w->p, "a", 0));
}

static void mut_exchange(struct ctx *c, struct world *w)
{
	OK(store_rename(c->s, w->q, "b", w->p, "a", STORE_RENAME_EXCHANGE));
}

/* Give @n a 1 ms lease, let it run out, reap: @n must be gone. */
static void expire_now(struct ctx *c, struct store_node *n)
{
	OK(store_set_ttl(c->s, n, 1));
	advance(c, 5);
	(void)store_expire(c->s, 100);
	OK(store_node_live(n) ? -EEXIST : 0);
}

static void mut_child_expires(struct ctx *c, struct world *w)
{
	expire_now(c, w->l);
}

static void mut_shared_lease(struct ctx *c, struct world *w)
{
	OK(store_set_ttl(c->s, w->a, 700));
}

static void mut_renew_parent(struct ctx *c, struct world *w)
{
	advance(c, 100);
	OK(store_renew(c->s, w->q));
}

static void mut_parent_expires(struct ctx *c, struct world *w)
{
	expire_now(c, w->q);
}

static void mut_leave(struct ctx *c, struct world *w)
{
	OK(store_rmdir(c->s, w->t, "p", NULL));
}

static void mut_depart_again(struct ctx *c, struct world *w)
{
	advance(c, 50);
	OK(store_depart(c->s, w->t, "ghost", NULL));
}

static void mut_rejoin(struct ctx *c, struct world *w)
{
	OK(mkdir_rc(c, w->t, "ghost"));
}

static void mut_tombstone_ages_out(struct ctx *c, struct world *w)
{
	(void)w;
	advance(c, c->lim.tombstone_ttl_ms);
	/* Ages out "ghost"; q's lease runs out too and leaves its own. */
	(void)store_expire(c->s, 100);
	OK(stats(c, NULL).tombstones == 1 ? 0 : -1);
}

static void mut_chmod_tenant(struct ctx *c, struct world *w)
{
	struct store_attr in = { .mode = 0700, .uid = 77 };

	OK(store_setattr(c->s, w->t, STORE_SET_MODE | STORE_SET_UID, &in,
			 NULL));
}

static void mut_cleanup_tenant(struct ctx *c, struct world *w)
{
	(void)w;
	OK(store_rmdir(c->s, root(c), "u", NULL));
}

static void mut_new_nodes(struct ctx *c, struct world *w)
{
	struct store_node *v = NULL, *n = NULL;

	OK(store_mkdir(c->s, root(c), "v", &DOWN, &v));
	if (v)
		OK(store_mkdir(c->s, v, "n", &DOWN, &n));
	if (n)
		OK(create_rc(c, n, "x", true));
	OK(mkdir_rc(c, w->t, "late"));
	if (n)
		put(c, n);
	if (v)
		put(c, v);
}

static void mut_drain_tenant(struct ctx *c, struct world *w)
{
	OK(store_drain_now(c->s, w->t));
}

static void mut_drain_store(struct ctx *c, struct world *w)
{
	(void)w;
	OK(store_drain_now(c->s, NULL));
}

static const struct {
	const char *name;
	mutation fn;
} mutations[] = {
#define M(f) { #f, f }
	M(mut_publish_shared), M(mut_truncate_shared), M(mut_unlink),
	M(mut_unlink_shared), M(mut_create), M(mut_link),
	M(mut_rename_across), M(mut_rename_over), M(mut_exchange),
	M(mut_child_expires), M(mut_shared_lease), M(mut_renew_parent),
	M(mut_parent_expires), M(mut_leave), M(mut_depart_again),
	M(mut_rejoin), M(mut_tombstone_ages_out), M(mut_chmod_tenant),
	M(mut_cleanup_tenant), M(mut_new_nodes), M(mut_drain_tenant),
	M(mut_drain_store),
#undef M
};

#define NMUT (sizeof mutations / sizeof mutations[0])

struct midway {
	struct ctx *c;
	struct world *w;
	unsigned at;          /* run at this step (UINT_MAX: each step one) */
	size_t first;         /* with at == UINT_MAX: the mutation of step 0 */
	unsigned ran, steps;
	bool wrap;            /* the snapshot's epoch wraps (see below) */
};

static void midway_step(void *arg, unsigned step)
{
	struct midway *m = arg;

	m->steps = step + 1;
	if (m->at == step) {
		mutations[m->first].fn(m->c, m->w);
		m->ran++;
	} else if (m->at == UINT_MAX && m->first + step < NMUT) {
		mutations[m->first + step].fn(m->c, m->w);
		m->ran++;
	}
}

/*
 * The snapshot is the store at the instant it was taken, whatever
 * transitions run while it is copied: before any unit is copied, between
 * any two units, after the last.  Reference: a snapshot taken just before
 * with nothing running (its rows are checked by the tests above).  And
 * the store did move on: a snapshot after differs.
 */
static void check_midway(struct ctx *c, struct midway *m, bool tenant_scope)
{
	struct store_limits l;
	struct store_snapshot before, during, after;
	struct world w;
	char *sb, *sd, *sa;

	store_limits_default(&l);
	reopen(c, &l);
	if (m->wrap)
		store_snapshot_epochs(c->s, 1);
	build_world(c, &w);
	m->c = c;
	m->w = &w;
	m->ran = m->steps = 0;
	take(c, tenant_scope ? w.t : NULL, &before);
	if (m->wrap)
		store_snapshot_epochs(c->s, (1ull << 32) - 1);
	store_snapshot_step_hook(c->s, midway_step, m);
	assert_int_equal(store_snapshot_take(c->s, tenant_scope ? w.t : NULL,
					     &during), 0);
	store_snapshot_step_hook(c->s, NULL, NULL);
	assert_sorted(&during);
	sb = snap_text(&before, true);
	sd = snap_text(&during, true);
	if (strcmp(sb, sd) != 0) {
		print_error("%s at step %u (%s scope)\nbefore:\n%sduring:\n%s",
			    mutations[m->first].name, m->at,
			    tenant_scope ? "tenant" : "root", sb, sd);
		fail_msg("the snapshot is not the store at its instant");
	}
	assert_int_equal(during.taken_ms, before.taken_ms);
	if (m->ran) {
		assert_int_equal(store_snapshot_take(c->s, NULL, &after), 0);
		sa = snap_text(&after, true);
		if (tenant_scope && m->at != UINT_MAX &&
		    (mutations[m->first].fn == mut_cleanup_tenant ||
		     mutations[m->first].fn == mut_new_nodes))
			; /* changes outside the tenant's scope only */
		else if (strcmp(sa, sb) == 0 && !tenant_scope)
			fail_msg("%s at step %u changed nothing",
				 mutations[m->first].name, m->at);
		free(sa);
		store_snapshot_free(&after);
	}
	free(sb);
	free(sd);
	store_snapshot_free(&before);
	store_snapshot_free(&during);
	check_ok(c);
}

static void test_snapshot_midway_each_transition(void **state)
{
	struct ctx *c = *state;
	unsigned runs = 0;

	for (size_t i = 0; i < NMUT; i++) {
		for (int scope = 0; scope < 2; scope++) {
			for (unsigned at = 0;; at++) {
				struct midway m = { .at = at, .first = i };

				midway_alone = true;
				check_midway(c, &m, scope);
				if (!m.ran)
					break; /* past the last step */
				runs++;
			}
		}
	}
	print_message("# %u snapshots with a transition midway\n", runs);
	/*
	 * build_world() has tenants t, u and buckets p, q (in t), r (in u):
	 * steps 0 to 5 at the root, 0 to 3 in t; fewer when the transition
	 * removed a unit before the taker reached it.
	 */
	assert_true(runs >= NMUT * 8);
}

/* Many transitions, one at each step, starting from each mutation. */
static void test_snapshot_midway_one_per_step(void **state)
{
	struct ctx *c = *state;

	for (size_t i = 0; i < NMUT; i++) {
		struct midway m = { .at = UINT_MAX, .first = i };

		midway_alone = false;
		check_midway(c, &m, false);
		assert_true(m.ran >= 1);
		m = (struct midway){ .at = UINT_MAX, .first = i };
		check_midway(c, &m, true);
	}
}

/*
 * States keep the low 32 bits of the epoch that froze them.  The world is
 * built at epoch 1 and the snapshot's epoch is the one after 2^32 - 1:
 * 2^32 would be 0 there, so it is 2^32 + 1, whose low bits (1) are the
 * world's.  Only the reset at the wrap keeps every transition midway from
 * finding its state "already frozen" and showing through.
 */
static void test_snapshot_midway_epoch_wrap(void **state)
{
	struct ctx *c = *state;

	for (size_t i = 0; i < NMUT; i++) {
		struct midway m = { .at = 0, .first = i, .wrap = true };

		midway_alone = true;
		check_midway(c, &m, false);
		assert_true(m.ran == 1);
	}
}

/* Snapshot while threads move a child ------------------------------------- */

struct mover {
	struct store *s;
	struct store_node *from, *to;
	atomic_bool *stop;
	unsigned long moves;
	int bad;           /* first unexpected return code, 0 for none */
};

static void *mover_main(void *arg)
{
	struct mover *m = arg;

	while (!atomic_load(m->stop)) {
		int rc = store_rename(m->s, m->from, "x", m->to, "x", 0);

		if (rc == 0)
			m->moves++;
		else if (rc != -ENOENT && !m->bad)
			m->bad = rc;
	}
	return NULL;
}

struct churner {
	struct store *s;
	struct store_node *p;
	atomic_bool *stop;
	int bad;
};

/* Creates and unlinks other children, so the bucket changes shape. */
static void *churner_main(void *arg)
{
	struct churner *ch = arg;
	unsigned i = 0;

	while (!atomic_load(ch->stop)) {
		char name[16];
		struct store_node *n = NULL;
		bool created;
		int rc;

		snprintf(name, sizeof name, "y%u", i++ % 8);
		rc = store_create(ch->s, ch->p, name, &FOWN, true, &n,
				  &created);
		if (rc == 0)
			store_node_unref(ch->s, n);
		else if (!ch->bad)
			ch->bad = rc;
		rc = store_unlink(ch->s, ch->p, name);
		if (rc != 0 && !ch->bad)
			ch->bad = rc;
	}
	return NULL;
}

static void test_snapshot_consistent_under_renames(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *a, *b, *x;
	struct mover m[2];
	struct churner ch;
	pthread_t th[3];
	atomic_bool stop;
	int64_t xino;
	unsigned long in_a = 0, in_b = 0;
	int rounds = 1500;
	char msg[512] = "";

	t = mk(c, root(c), "t");
	a = mk(c, t, "a");
	b = mk(c, t, "b");
	x = cr(c, a, "x");
	publish(c, x, STORE_STAGE_REPLACE, "payload");
	xino = ino(x);
	atomic_init(&stop, false);
	m[0] = (struct mover){ c->s, a, b, &stop, 0, 0 };
	m[1] = (struct mover){ c->s, b, a, &stop, 0, 0 };
	ch = (struct churner){ c->s, b, &stop, 0 };
	assert_int_equal(pthread_create(&th[0], NULL, mover_main, &m[0]), 0);
	assert_int_equal(pthread_create(&th[1], NULL, mover_main, &m[1]), 0);
	assert_int_equal(pthread_create(&th[2], NULL, churner_main, &ch), 0);

	/*
	 * No cmocka assertion while the threads run: a failure would jump
	 * out of this frame, which the threads still use.  Record the first
	 * problem, stop, join, then fail.
	 */
	for (int i = 0; i < rounds && !msg[0]; i++) {
		struct store_snapshot sn;
		size_t seen = 0, tenants = 0, parents = 0;
		const struct store_snap_row *xr = NULL;
		int rc = store_snapshot_take(c->s, i % 2 ? t : NULL, &sn);

		if (rc != 0) {
			snprintf(msg, sizeof msg, "snapshot %d: %d", i, rc);
			break;
		}
		for (size_t k = 0; k < sn.n; k++) {
			const struct store_snap_row *r = &sn.rows[k];

			tenants += r->kind == STORE_SNAP_TENANT;
			parents += r->kind == STORE_SNAP_PARENT;
			if (r->kind == STORE_SNAP_CHILD &&
			    strcmp(r->child, "x") == 0) {
				seen++;
				xr = r;
			}
		}
		if (seen != 1 || tenants != 1 || parents != 2) {
			dump_snap(&sn);
			snprintf(msg, sizeof msg,
				 "snapshot %d: x %zu times, %zu tenants, "
				 "%zu parents", i, seen, tenants, parents);
		} else if (xr->ino != xino || xr->nlink != 1 ||
			   xr->size != 7 || xr->version != 1) {
			char row[256];

			row_str(row, sizeof row, xr);
			snprintf(msg, sizeof msg, "snapshot %d: x is %s", i,
				 row);
		} else if (strcmp(xr->parent, "a") == 0) {
			in_a++;
		} else if (strcmp(xr->parent, "b") == 0) {
			in_b++;
		} else {
			snprintf(msg, sizeof msg, "snapshot %d: x in %s", i,
				 xr->parent);
		}
		store_snapshot_free(&sn);
		if (i == rounds / 2) {
			char why[256] = "";

			if (store_check_all(c->s, why, sizeof why) != 0)
				snprintf(msg, sizeof msg, "check_all: %s", why);
		}
	}
	atomic_store(&stop, true);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	if (msg[0])
		fail_msg("%s", msg);
	assert_int_equal(m[0].bad, 0);
	assert_int_equal(m[1].bad, 0);
	assert_int_equal(ch.bad, 0);
	print_message("# %lu + %lu moves; x seen in a %lu, in b %lu times\n",
		      m[0].moves, m[1].moves, in_a, in_b);
	assert_true(m[0].moves + m[1].moves > 0);
	assert_int_equal(stats(c, NULL).children, 1);
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
		TEST_HOOKED(test_snapshot_midway_each_transition),
		TEST_HOOKED(test_snapshot_midway_one_per_step),
		TEST_HOOKED(test_snapshot_midway_epoch_wrap),
		TEST_HOOKED(test_snapshot_consistent_under_renames),
		TEST_HOOKED(test_snapshot_hold_bounds),
		TEST_HOOKED(test_layout_rows_of_a_snapshot),
		TEST_HOOKED(test_snapshot_seq),
	};

	return run_store_tests("snapshot", tests);
}
