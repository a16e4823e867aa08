/*
 * snapshot.h - what the snapshot tests (test_snapshot.c,
 * test_snapshot_midway.c) share: a snapshot's rows as text, the rows
 * expected of one (struct xrow, assert_snap), their order, and the store
 * most of them take it of (struct world, build_world).
 *
 * Include it after tests/unit/store/fixture.h.
 */
#ifndef STATEFS_UNIT_SNAPSHOT_H
#define STATEFS_UNIT_SNAPSHOT_H

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
static inline void row_str(char *buf, size_t cap, const struct store_snap_row *r)
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
static inline char *snap_text(const struct store_snapshot *sn, bool owned)
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

static inline char *snap_str(const struct store_snapshot *sn)
{
	return snap_text(sn, false);
}

static inline void dump_snap(const struct store_snapshot *sn)
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

static inline bool row_key_is(const struct store_snap_row *r, enum store_snap_kind k,
		       const char *t, const char *p, const char *ch)
{
	return r->kind == k && r->tenant && r->parent && r->child &&
	       strcmp(r->tenant, t) == 0 && strcmp(r->parent, p) == 0 &&
	       strcmp(r->child, ch) == 0;
}

/* How many rows of @sn have this key. */
static inline size_t snap_count(const struct store_snapshot *sn,
			 enum store_snap_kind k, const char *t, const char *p,
			 const char *ch)
{
	size_t n = 0;

	for (size_t i = 0; i < sn->n; i++)
		n += row_key_is(&sn->rows[i], k, t, p, ch);
	return n;
}

/* @sn has exactly the rows @want (in any order). */
static inline void assert_snap(const struct store_snapshot *sn,
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
static inline int rank_of(const struct store_snap_row *r)
{
	return r->kind == STORE_SNAP_TENANT ? 0 :
	       r->kind == STORE_SNAP_TOMBSTONE ? 2 : 1;
}

/* Negative, 0 or positive as @a comes before, with or after @b in
 * statefs(8)'s order: tenant name, rank, parent name, child name, each
 * in byte order. */
static inline int row_order(const struct store_snap_row *a,
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
static inline void assert_sorted(const struct store_snapshot *sn)
{
	for (size_t i = 1; i < sn->n; i++) {
		if (row_order(&sn->rows[i - 1], &sn->rows[i]) < 0)
			continue;
		dump_snap(sn);
		fail_msg("snapshot rows %zu and %zu are out of order", i - 1, i);
	}
}

static inline void take(struct ctx *c, struct store_node *tenant,
		 struct store_snapshot *sn)
{
	memset(sn, 0xa5, sizeof *sn);
	assert_int_equal(store_snapshot_take(c->s, tenant, sn), 0);
	assert_int_equal(sn->taken_ms, now(c));
	if (sn->n)
		assert_non_null(sn->rows);
	assert_sorted(sn);
}

static inline int64_t ino(struct store_node *n)
{
	return (int64_t)store_node_ino(n);
}

/* The store of the snapshot tests: see the rows expected below. */
struct world {
	struct store_node *t, *u, *p, *q, *r, *a, *b, *l;
	uint64_t t0;
};

static inline void build_world(struct ctx *c, struct world *w)
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

#endif /* STATEFS_UNIT_SNAPSHOT_H */
