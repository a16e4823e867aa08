/*
 * test_drain.c - unit tests of the store's drain and snapshot, and of the
 * .snapshot and .drain formats of layout/, with a fake monotonic clock.
 *
 * What is checked is what CONTRACT.md s.5 (.snapshot, .drain), seed 001
 * ("Restart and graceful drain") and store.h / layout.h promise:
 *
 *  - a drain (of the whole store or of one tenant) starts with a deadline
 *    of now + drain_window that a second call does not move; while it runs
 *    every new tenant, parent, child, link, rename into a parent and lease
 *    change or renewal in scope is refused with -EROFS, while existing
 *    children may still be written and removed; at the deadline, or as
 *    soon as no child remains in scope, everything in scope is cleared in
 *    one transition (the tenants too for the whole store; a drained tenant
 *    stays, empty) and the scope stays drained, refusing;
 *  - store_drain_now() ends the window at once; store_next_deadline()
 *    includes a running drain's deadline; the event log has one
 *    "drain" line at the start and one per parent (and per tenant, for the
 *    whole store) at the clear, internal, naming the removed node;
 *  - a snapshot lists exactly the tenants, parents, child links and
 *    tombstones in scope with their documented fields, leaves expired
 *    nodes out, owns its memory, and is consistent even while other
 *    threads move a child between parents;
 *  - the .snapshot header and rows and the .drain text, snprintf-like.
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
 * Every test gets a fresh store (setup) and its teardown asserts
 * store_check_all() == 0 before freeing it.  Every node pointer the store
 * hands out carries a reference that the test drops; ASan's leak checker
 * catches the ones we forget.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "layout/layout.h"
#include "store/store.h"
#include "tests/unit/unit.h"
#include "tests/unit/fixture.h"

#define WINDOW 30000 /* the documented default drain_window, ms */

/* Helpers ------------------------------------------------------------- */

/* The gauges of @tenant (NULL: the store) are all zero. */
static void assert_empty_gauges(struct ctx *c, struct store_node *tenant)
{
	struct store_stats st = stats(c, tenant);

	if (!tenant)
		assert_int_equal(st.tenants, 0);
	assert_int_equal(st.parents, 0);
	assert_int_equal(st.children, 0);
	assert_int_equal(st.links, 0);
	assert_int_equal(st.tombstones, 0);
	assert_int_equal(st.bytes, 0);
}

/* The drain state of @tenant (NULL: the store), and its ms_left. */
static enum store_state dstate(struct ctx *c, struct store_node *tenant,
			       uint64_t *left)
{
	uint64_t ms = 0xdeadbeef;
	enum store_state st = store_drain_state(c->s, tenant, &ms);

	if (left)
		*left = ms;
	return st;
}

static void assert_draining(struct ctx *c, struct store_node *tenant,
			    uint64_t ms_left)
{
	uint64_t left = 0;
	enum store_state st = dstate(c, tenant, &left);

	if (st != STORE_DRAINING)
		fail_msg("drain state %d, expected draining", (int)st);
	assert_int_equal(left, ms_left);
}

static void assert_dstate(struct ctx *c, struct store_node *tenant,
			  enum store_state want)
{
	enum store_state st = dstate(c, tenant, NULL);

	if (st != want)
		fail_msg("drain state %d, expected %d", (int)st, (int)want);
}

static uint64_t refused_draining(struct ctx *c)
{
	return stats(c, NULL).refused[STORE_REFUSED_DRAINING];
}

/* Event readers ------------------------------------------------------- */

static int cmp_strp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* @text's lines sorted (malloc'd): a multiset of lines as one string. */
static char *sorted_lines(const char *text)
{
	size_t n = 0, len = strlen(text);
	char *copy = strdup(text), *out = malloc(len + 1), **v, *p;

	assert_non_null(copy);
	assert_non_null(out);
	for (p = copy; *p; p++)
		n += *p == '\n';
	v = calloc(n + 1, sizeof *v);
	assert_non_null(v);
	n = 0;
	for (p = copy; *p;) {
		char *nl = strchr(p, '\n');

		assert_non_null(nl);
		*nl = '\0';
		v[n++] = p;
		p = nl + 1;
	}
	qsort(v, n, sizeof *v, cmp_strp);
	out[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		strcat(out, v[i]);
		strcat(out, "\n");
	}
	free(v);
	free(copy);
	return out;
}

/*
 * The pending lines of @d are @want in any order (the lines of one
 * transition, like a drain's clear, have no promised order).
 */
static void expect_events_any_order(struct ctx *c, struct rd *d,
				    const char *want)
{
	char *got = rd_take(c, d);
	char *sg = sorted_lines(got), *sw = sorted_lines(want);

	if (strcmp(sg, sw) != 0) {
		print_error("events expected (any order):\n%sgot:\n%s", want,
			    got);
		free(got);
		free(sg);
		free(sw);
		fail_msg("event lines differ");
	}
	free(got);
	free(sg);
	free(sw);
}


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

static void take(struct ctx *c, struct store_node *tenant,
		 struct store_snapshot *sn)
{
	memset(sn, 0xa5, sizeof *sn);
	assert_int_equal(store_snapshot_take(c->s, tenant, sn), 0);
	assert_int_equal(sn->taken_ms, now(c));
	if (sn->n)
		assert_non_null(sn->rows);
}

static int64_t ino(struct store_node *n)
{
	return (int64_t)store_node_ino(n);
}

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
	put(c, t);
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

	put(c, a);
	put(c, p);
	put(c, t);
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

	put(c, l);
	put(c, b);
	put(c, a);
	put(c, q);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* At the deadline the reaper (store_expire) settles the drain too. */
static void test_drain_deadline_via_expire(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *u, *p, *q, *r, *a, *b, *k;

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
	k = mk(c, t, "k");
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

	put(c, k);
	put(c, b);
	put(c, a);
	put(c, r);
	put(c, q);
	put(c, p);
	put(c, u);
	put(c, t);
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
	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* Drain: ending early ---------------------------------------------------- */

static void test_drain_ends_when_last_child_goes(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *a, *b;
	struct rd d;
	uint64_t left = 0;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	a = cr(c, p, "a");
	b = cr(c, p, "b");
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

	put(c, b);
	put(c, a);
	put(c, q);
	put(c, p);
	put(c, t);
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
	put(c, a);
	put(c, p);
	put(c, t);
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
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* drain_window=0: the deadline is the start. */
static void test_drain_window_zero(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t, *p, *a;

	store_limits_default(&l);
	l.drain_window_ms = 0;
	reopen(c, &l);
	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	assert_int_equal(store_drain(c->s, NULL), 0);
	assert_dstate(c, NULL, STORE_DRAINED);
	assert_empty_gauges(c, NULL);
	put(c, a);
	put(c, p);
	put(c, t);
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
	put(c, a);
	put(c, p);
	put(c, t);
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
	put(c, b);
	put(c, a);
	put(c, r);
	put(c, p);
	put(c, u);
	put(c, t);
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
	put(c, t);
	check_ok(c);
}

/* Drain: one tenant -------------------------------------------------------- */

static void test_tenant_drain(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *u, *p, *q, *r, *a, *b, *x, *tt = NULL;
	struct store_stats su;
	struct rd d, dt, du;
	uint64_t t0, r0;

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	r = mk(c, u, "r");
	a = cr(c, p, "a");
	b = cr(c, q, "b");
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

	put(c, x);
	put(c, b);
	put(c, a);
	put(c, r);
	put(c, q);
	put(c, p);
	put(c, u);
	put(c, t);
	check_ok(c);
}

static void test_tenant_drain_ends_early(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *u, *p, *r, *a, *x;

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	p = mk(c, t, "p");
	r = mk(c, u, "r");
	a = cr(c, p, "a");
	x = cr(c, r, "x");
	assert_int_equal(store_drain(c->s, t), 0);
	assert_int_equal(store_unlink(c->s, p, "a"), 0);
	/* The children of other tenants do not keep t's drain running. */
	assert_dstate(c, t, STORE_DRAINED);
	assert_int_equal(getattr_rc(c, p), -ESTALE);
	assert_int_equal(getattr_rc(c, x), 0);
	assert_int_equal(store_next_deadline(c->s), UINT64_MAX);
	assert_int_equal(mkdir_rc(c, t, "p"), -EROFS);
	put(c, x);
	put(c, a);
	put(c, r);
	put(c, p);
	put(c, u);
	put(c, t);
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
	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* A tenant's own drain inside a store drain keeps its own deadline. */
static void test_tenant_drain_then_store_drain(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *u, *p, *r, *a, *x;

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	p = mk(c, t, "p");
	r = mk(c, u, "r");
	a = cr(c, p, "a");
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
	put(c, x);
	put(c, a);
	put(c, r);
	put(c, p);
	put(c, u);
	put(c, t);
	check_ok(c);
}

/* A tenant drained already stays drained when the store starts to drain. */
static void test_drained_tenant_in_draining_store(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *u, *p, *r, *a, *x;

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	p = mk(c, t, "p");
	r = mk(c, u, "r");
	a = cr(c, p, "a");
	x = cr(c, r, "x");
	assert_int_equal(store_drain_now(c->s, t), 0);
	assert_dstate(c, t, STORE_DRAINED);
	assert_int_equal(store_drain(c->s, NULL), 0);
	assert_draining(c, NULL, WINDOW);
	assert_draining(c, u, WINDOW);
	assert_dstate(c, t, STORE_DRAINED);
	assert_int_equal(store_drain_now(c->s, NULL), 0);
	assert_dstate(c, NULL, STORE_DRAINED);
	put(c, x);
	put(c, a);
	put(c, r);
	put(c, p);
	put(c, u);
	put(c, t);
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
	put(c, x);
	put(c, a);
	put(c, r);
	put(c, p);
	put(c, u);
	put(c, t);
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
	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* Cleaning up a draining tenant leaves nothing pending. */
static void test_cleanup_of_draining_tenant(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a, *t2;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	assert_int_equal(store_drain(c->s, t), 0);
	assert_int_equal(store_rmdir(c->s, root(c), "t", NULL), 0);
	assert_int_equal(store_next_deadline(c->s), UINT64_MAX);
	assert_dstate(c, NULL, STORE_READY);
	/* A new tenant of that name is a new node, not draining. */
	t2 = mk(c, root(c), "t");
	assert_dstate(c, t2, STORE_READY);
	assert_int_equal(mkdir_rc(c, t2, "p"), 0);
	advance(c, WINDOW);
	(void)store_expire(c->s, 100);
	assert_int_equal(lookup_rc(c, t2, "p"), 0);
	assert_dstate(c, t2, STORE_READY);
	put(c, t2);
	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

/* Drain: events ------------------------------------------------------------ */

static void test_drain_events_internal(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *u, *p, *q, *r, *a;
	struct store_event_reader re;
	struct store_event ev;
	unsigned long hi;
	int seen_t = 0, seen_u = 0, seen_p = 0, seen_q = 0, seen_r = 0;
	struct rd d;

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	assert_int_equal(store_rmdir(c->s, t, "q", NULL), 0);
	put(c, q);
	q = mk(c, t, "q");                               /* generation 2 */
	assert_int_equal(gen(c, q), 2);
	r = mk(c, u, "r");
	a = cr(c, p, "a");
	assert_int_equal(store_link(c->s, a, r, "a"), -EXDEV);
	store_events_open(c->s, NULL, &re);
	rd_open_strict(c, &d, NULL);

	assert_int_equal(store_drain(c->s, NULL), 0);
	next_ev(c, &re, &ev);
	assert_int_equal(ev.op, STORE_OP_DRAIN);
	assert_string_equal(ev.tenant, "");
	assert_string_equal(ev.parent, "");
	assert_string_equal(ev.child, "");
	store_event_free(&ev);
	assert_int_equal(store_events_next(c->s, &re, &ev), 0);
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
		next_ev(c, &re, &ev);
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
	assert_int_equal(store_events_next(c->s, &re, &ev), 0);
	assert_true(seen_t == 1 && seen_u == 1 && seen_p == 1 && seen_q == 1 &&
		    seen_r == 1);

	put(c, a);
	put(c, r);
	put(c, q);
	put(c, p);
	put(c, u);
	put(c, t);
	check_ok(c);
}

static void test_tenant_drain_events_internal(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_event_reader re;
	struct store_event ev;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	store_events_open(c->s, NULL, &re);
	assert_int_equal(store_drain(c->s, t), 0);
	next_ev(c, &re, &ev);
	assert_int_equal(ev.op, STORE_OP_DRAIN);
	assert_string_equal(ev.tenant, "t");
	assert_string_equal(ev.parent, "");
	store_event_free(&ev);
	assert_int_equal(store_drain_now(c->s, t), 0);
	next_ev(c, &re, &ev);
	assert_int_equal(ev.op, STORE_OP_DRAIN);
	assert_true(ev.internal);
	assert_int_equal(ev.kind, STORE_PARENT);
	assert_int_equal(ev.ino, store_node_ino(p));
	assert_string_equal(ev.tenant, "t");
	assert_string_equal(ev.parent, "p");
	assert_string_equal(ev.child, "");
	store_event_free(&ev);
	/* A drained tenant is not removed: no tenant line. */
	assert_int_equal(store_events_next(c->s, &re, &ev), 0);
	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
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
	struct store_node *gone;

	w->t0 = now(c);
	w->t = mk(c, root(c), "t");
	w->u = mk(c, root(c), "u");
	w->p = mk(c, w->t, "p");
	gone = mk(c, w->t, "q");
	assert_int_equal(store_rmdir(c->s, w->t, "q", NULL), 0); /* tombstone g1 */
	put(c, gone);
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

static void drop_world(struct ctx *c, struct world *w)
{
	put(c, w->l);
	put(c, w->b);
	put(c, w->a);
	put(c, w->r);
	put(c, w->q);
	put(c, w->p);
	put(c, w->u);
	put(c, w->t);
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

	drop_world(c, &w);
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
	drop_world(c, &w);
	check_ok(c);
}

static void test_snapshot_leaves_out_expired(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_snapshot sn;
	struct store_node *t, *p, *q, *a, *b, *e, *f;

	store_limits_default(&l);
	l.tombstone_ttl_ms = 3000;
	reopen(c, &l);
	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	a = cr(c, p, "a");
	b = cr(c, p, "b");
	e = cr(c, q, "e");
	f = cr(c, q, "f");
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

	put(c, f);
	put(c, e);
	put(c, b);
	put(c, a);
	put(c, q);
	put(c, p);
	put(c, t);
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

		put(c, x);
		put(c, d);
		put(c, b);
		put(c, a);
		put(c, t);
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

	drop_world(c, &w);
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
	drop_world(c, &w);
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
	drop_world(c, &w);
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
	drop_world(c, &w);
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

	put(c, x);
	put(c, b);
	put(c, a);
	put(c, t);
	check_ok(c);
}

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

/* Layout: .snapshot and .drain -------------------------------------------- */

static void test_layout_snapshot_header(void **state)
{
	(void)state;
	assert_string_equal(layout_snapshot_header,
			    "kind\ttenant\tparent\tchild\tgeneration\tversion"
			    "\tsize\tnlink\tttl_ms_left\tinode\n");
}

/* layout_format_snapshot_row(@r) is @want, and snprintf-like. */
static void assert_row_format(const struct store_snap_row *r,
			      const char *want)
{
	char buf[512], small[64];
	size_t need = layout_format_snapshot_row(NULL, 0, r);
	size_t wl = strlen(want);

	assert_int_equal(need, wl);
	memset(buf, 'Z', sizeof buf);
	assert_int_equal(layout_format_snapshot_row(buf, sizeof buf, r), wl);
	assert_string_equal(buf, want);

	/* Exactly big enough, and one byte short. */
	memset(buf, 'Z', sizeof buf);
	assert_int_equal(layout_format_snapshot_row(buf, wl + 1, r), wl);
	assert_string_equal(buf, want);
	assert_int_equal(buf[wl + 1], 'Z');
	memset(buf, 'Z', sizeof buf);
	assert_int_equal(layout_format_snapshot_row(buf, wl, r), wl);
	assert_int_equal(buf[wl - 1], '\0');
	assert_memory_equal(buf, want, wl - 1);
	assert_int_equal(buf[wl], 'Z');

	/* Small capacities: never past @cap, always terminated. */
	for (size_t cap = 1; cap < sizeof small && cap <= wl; cap++) {
		memset(small, 'Z', sizeof small);
		assert_int_equal(layout_format_snapshot_row(small, cap, r), wl);
		assert_int_equal(small[cap - 1], '\0');
		assert_memory_equal(small, want, cap - 1);
		if (cap < sizeof small)
			assert_int_equal(small[cap], 'Z');
	}
	/* cap 0 writes nothing. */
	memset(small, 'Z', sizeof small);
	assert_int_equal(layout_format_snapshot_row(small, 0, r), wl);
	assert_int_equal(small[0], 'Z');
}

static void test_layout_snapshot_rows(void **state)
{
	const struct store_snap_row tenant = {
		STORE_SNAP_TENANT, "acme", "", "", -1, -1, -1, -1, -1, 17, 0, 0, 0
	};
	const struct store_snap_row parent = {
		STORE_SNAP_PARENT, "acme", "w1", "", 3, -1, -1, -1, 4500, 42, 0, 0, 0
	};
	const struct store_snap_row parent_nolease = {
		STORE_SNAP_PARENT, "acme", "w1", "", 1, -1, -1, -1, -1, 43, 0, 0, 0
	};
	const struct store_snap_row child = {
		STORE_SNAP_CHILD, "acme", "w1", "job-7", 3, 12, 65536, 2, 0,
		99, 0, 0, 0
	};
	const struct store_snap_row child_nolease = {
		STORE_SNAP_CHILD, "acme", "w1", "j", 1, 0, 0, 1, -1, 100, 0, 0, 0
	};
	const struct store_snap_row tomb = {
		STORE_SNAP_TOMBSTONE, "acme", "w2", "", 0, -1, -1, -1, 599900,
		-1, 0, 0, 0
	};
	const struct store_snap_row big = {
		STORE_SNAP_CHILD, "t", "p", "c", INT64_MAX, INT64_MAX,
		INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, 0, 0, 0
	};
	const struct store_snap_row utf8 = {
		STORE_SNAP_CHILD, "caf\xc3\xa9", "p", "\xe5\x90\x8d", 1, 1, 1,
		1, -1, 5, 0, 0, 0
	};

	(void)state;
	assert_row_format(&tenant,
			  "tenant\tacme\t-\t-\t-\t-\t-\t-\t-\t17\n");
	assert_row_format(&parent,
			  "parent\tacme\tw1\t-\t3\t-\t-\t-\t4500\t42\n");
	assert_row_format(&parent_nolease,
			  "parent\tacme\tw1\t-\t1\t-\t-\t-\t-\t43\n");
	assert_row_format(&child,
			  "child\tacme\tw1\tjob-7\t3\t12\t65536\t2\t0\t99\n");
	assert_row_format(&child_nolease,
			  "child\tacme\tw1\tj\t1\t0\t0\t1\t-\t100\n");
	assert_row_format(&tomb,
			  "tombstone\tacme\tw2\t-\t0\t-\t-\t-\t599900\t-\n");
	assert_row_format(&big,
			  "child\tt\tp\tc\t9223372036854775807"
			  "\t9223372036854775807\t9223372036854775807"
			  "\t9223372036854775807\t9223372036854775807"
			  "\t9223372036854775807\n");
	assert_row_format(&utf8,
			  "child\tcaf\xc3\xa9\tp\t\xe5\x90\x8d\t1\t1\t1\t1\t-\t5\n");
}

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
	drop_world(c, &w);
	check_ok(c);
}

static void assert_drain_format(enum store_state st, uint64_t ms,
				const char *want)
{
	char buf[64], small[32];
	size_t wl = strlen(want);

	assert_int_equal(layout_format_drain(NULL, 0, st, ms), wl);
	memset(buf, 'Z', sizeof buf);
	assert_int_equal(layout_format_drain(buf, sizeof buf, st, ms), wl);
	assert_string_equal(buf, want);
	for (size_t cap = 1; cap <= wl; cap++) {
		memset(small, 'Z', sizeof small);
		assert_int_equal(layout_format_drain(small, cap, st, ms), wl);
		assert_int_equal(small[cap - 1], '\0');
		assert_memory_equal(small, want, cap - 1);
		assert_int_equal(small[cap], 'Z');
	}
	memset(small, 'Z', sizeof small);
	assert_int_equal(layout_format_drain(small, 0, st, ms), wl);
	assert_int_equal(small[0], 'Z');
}

static void test_layout_drain(void **state)
{
	(void)state;
	assert_drain_format(STORE_READY, 0, "ready\n");
	assert_drain_format(STORE_READY, 1234, "ready\n");
	assert_drain_format(STORE_DRAINING, 1234, "draining 1234\n");
	assert_drain_format(STORE_DRAINING, 30000, "draining 30000\n");
	assert_drain_format(STORE_DRAINING, 0, "draining 0\n");
	assert_drain_format(STORE_DRAINING, UINT64_MAX,
			    "draining 18446744073709551615\n");
	assert_drain_format(STORE_DRAINED, 0, "drained\n");
	assert_drain_format(STORE_DRAINED, 77, "drained\n");
}

/* What .drain would show, from the store's answer. */
static void test_layout_drain_of_store(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	char buf[64];
	uint64_t left = 0;
	enum store_state st;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
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
	put(c, a);
	put(c, p);
	put(c, t);
	check_ok(c);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup_hooked, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_drain_state_ready),
		T(test_drain_window_counts_down),
		T(test_drain_refusals),
		T(test_drain_deadline_via_expire),
		T(test_drain_clear_ends_open_stages),
		T(test_drain_ends_when_last_child_goes),
		T(test_drain_ends_when_last_child_expires),
		T(test_drain_without_children_ends_at_once),
		T(test_drain_window_zero),
		T(test_drain_now_ends_the_window),
		T(test_drain_now_without_drain),
		T(test_drain_stale_tenant),
		T(test_tenant_drain),
		T(test_tenant_drain_ends_early),
		T(test_tenant_drain_via_expire),
		T(test_tenant_drain_then_store_drain),
		T(test_drained_tenant_in_draining_store),
		T(test_tenant_drain_ends_on_reap),
		T(test_drain_ends_when_last_child_is_past_deadline),
		T(test_cleanup_of_draining_tenant),
		T(test_drain_events_internal),
		T(test_tenant_drain_events_internal),
		T(test_snapshot_empty),
		T(test_snapshot_root_rows),
		T(test_snapshot_tenant_scope),
		T(test_snapshot_leaves_out_expired),
		T(test_snapshot_nlink_leaves_out_expired_parents),
		T(test_snapshot_unaffected_by_later_changes),
		T(test_snapshot_and_drain),
		T(test_snapshot_drained_tenant),
		T(test_snapshot_midway_each_transition),
		T(test_snapshot_midway_one_per_step),
		T(test_snapshot_midway_epoch_wrap),
		T(test_snapshot_consistent_under_renames),
		T(test_snapshot_hold_bounds),
		T(test_layout_snapshot_header),
		T(test_layout_snapshot_rows),
		T(test_layout_rows_of_a_snapshot),
		T(test_layout_drain),
		T(test_layout_drain_of_store),
	};

	/* TEST_FILTER / TEST_SKIP: glob patterns of test names to run / skip. */
	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	if (getenv("TEST_SKIP"))
		cmocka_set_skip_filter(getenv("TEST_SKIP"));
	return cmocka_run_group_tests_name("drain", tests, NULL, NULL);
}
