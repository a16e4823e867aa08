/*
 * stress_check.c - what the mixed workload (stress_mixed.c) is checked
 * against: a snapshot taken while the threads run is one state of the
 * store, and the gauges equal a recount through store_list().
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "fs/inode.h"
#include "redis/mirror.h"
#include "store/store.h"
#include "tests/unit/unit.h"
#include "tests/unit/stress/stress.h"

struct snap_state_row {
	int64_t ino, nlink, version, size;
};

static int cmp_state_row(const void *a, const void *b)
{
	const struct snap_state_row *x = a, *y = b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* A row's key in statefs(8)'s order: tenant name, rank (the tenant's
 * row, its parents' and children's, its tombstones), parent, child. */
static int snap_row_order(const struct store_snap_row *a,
			  const struct store_snap_row *b)
{
	int ra = a->kind == STORE_SNAP_TENANT ? 0 :
		 a->kind == STORE_SNAP_TOMBSTONE ? 2 : 1;
	int rb = b->kind == STORE_SNAP_TENANT ? 0 :
		 b->kind == STORE_SNAP_TOMBSTONE ? 2 : 1;
	int c = strcmp(a->tenant, b->tenant);

	if (c == 0)
		c = ra - rb;
	if (c == 0)
		c = strcmp(a->parent, b->parent);
	if (c == 0)
		c = strcmp(a->child, b->child);
	return c;
}

/*
 * A snapshot taken while the other threads run must be one state of the
 * store: rows in scope order (a tenant's row, each parent's row followed
 * by its children of the same generation, its tombstones; by name, each
 * row after the one before), no name twice, and every state shown as many times as its nlink says, with
 * the same version and size under every name (a state linked from two
 * buckets copied at different moments would break that).
 */
void snapshot_check(struct worker *w, struct store_node *tenant)
{
	struct store_snapshot sn;
	struct snap_state_row *st;
	const char *tname = NULL, *pname = NULL;
	int64_t pgen = -1;
	bool tombs = false;
	size_t n = 0;
	int rc = store_snapshot_take(w->m->s, tenant, &sn);

	put(w, tenant);
	if (rc != 0) {
		if (!(rc == -ESTALE && tenant))
			failf("snapshot: %d", rc);
		return;
	}
	atomic_fetch_add(&w->m->snaps, 1);
	st = calloc(sn.n + 1, sizeof *st);
	if (!st) {
		failf("oom");
		store_snapshot_free(&sn);
		return;
	}
	for (size_t i = 0; i < sn.n; i++) {
		const struct store_snap_row *r = &sn.rows[i];

		if (i > 0 && snap_row_order(&sn.rows[i - 1], r) >= 0)
			failf("snapshot: %s/%s/%s out of order", r->tenant,
			      r->parent, r->child);
		switch (r->kind) {
		case STORE_SNAP_TENANT:
			if (tname && strcmp(tname, r->tenant) == 0)
				failf("snapshot: tenant %s twice", r->tenant);
			tname = r->tenant;
			pname = NULL;
			tombs = false;
			break;
		case STORE_SNAP_PARENT:
			if (!tname || strcmp(tname, r->tenant) != 0 || tombs)
				failf("snapshot: parent %s/%s out of place",
				      r->tenant, r->parent);
			for (size_t k = 0; k < i; k++)
				if (sn.rows[k].kind == STORE_SNAP_PARENT &&
				    strcmp(sn.rows[k].tenant, r->tenant) == 0 &&
				    strcmp(sn.rows[k].parent, r->parent) == 0)
					failf("snapshot: parent %s/%s twice",
					      r->tenant, r->parent);
			pname = r->parent;
			pgen = r->generation;
			break;
		case STORE_SNAP_CHILD:
			if (!pname || strcmp(pname, r->parent) != 0 ||
			    strcmp(tname, r->tenant) != 0 ||
			    r->generation != pgen || tombs)
				failf("snapshot: child %s/%s/%s out of place",
				      r->tenant, r->parent, r->child);
			st[n++] = (struct snap_state_row){ r->ino, r->nlink,
							   r->version, r->size };
			break;
		case STORE_SNAP_TOMBSTONE:
			if (!tname || strcmp(tname, r->tenant) != 0)
				failf("snapshot: tombstone out of place");
			tombs = true;
			break;
		}
	}
	qsort(st, n, sizeof *st, cmp_state_row);
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i; j < n && st[j].ino == st[i].ino; j++)
			if (st[j].nlink != st[i].nlink ||
			    st[j].version != st[i].version ||
			    st[j].size != st[i].size)
				failf("snapshot: state %lld differs by name",
				      (long long)st[i].ino);
		if ((int64_t)(j - i) != st[i].nlink)
			failf("snapshot: state %lld shown %zu times, nlink %lld",
			      (long long)st[i].ino, j - i,
			      (long long)st[i].nlink);
	}
	free(st);
	store_snapshot_free(&sn);
}

/* Recount one tenant through store_list(); checks nlink of every state
 * and the per-parent quota on the way. */
void recount_tenant(struct store *s, struct store_node *t,
			   const struct store_limits *l, struct recount *rc)
{
	struct store_dirlist pl, cl;
	uint64_t seen[NPAR * NCHILD];
	size_t nseen = 0;
	uint64_t tlinks = 0;

	assert_int_equal(store_list(s, t, &pl), 0);
	rc->tenants++;
	for (size_t i = 0; i < pl.n; i++) {
		struct store_node *p = NULL;

		assert_int_equal(pl.e[i].kind, STORE_PARENT);
		assert_int_equal(store_lookup(s, t, pl.e[i].name, &p), 0);
		assert_int_equal(store_node_ino(p), pl.e[i].ino);
		rc->parents++;
		assert_int_equal(store_list(s, p, &cl), 0);
		if (l->parent_quota)
			assert_true(cl.n <= l->parent_quota);
		for (size_t k = 0; k < cl.n; k++) {
			struct store_node *c = NULL;
			struct store_attr a;
			uint32_t refs = 0;
			bool dup = false;

			rc->links++;
			tlinks++;
			for (size_t j = 0; j < nseen; j++)
				dup |= seen[j] == cl.e[k].ino;
			if (dup)
				continue;
			assert_true(nseen < NPAR * NCHILD);
			seen[nseen++] = cl.e[k].ino;
			assert_int_equal(store_lookup(s, p, cl.e[k].name, &c),
					 0);
			assert_int_equal(store_getattr(s, c, &a), 0);
			assert_int_equal(a.ino, cl.e[k].ino);
			rc->children++;
			rc->bytes += a.size;
			assert_true(a.size <= l->max_payload);
			/* nlink = the links that reach the state; all of
			 * them are in this tenant, recount below. */
			refs = a.nlink;
			{
				uint32_t found = 0;

				for (size_t pi = 0; pi < pl.n; pi++) {
					struct store_node *pp = NULL;
					struct store_dirlist xl;

					assert_int_equal(store_lookup(s, t,
						pl.e[pi].name, &pp), 0);
					assert_int_equal(store_list(s, pp, &xl),
							 0);
					for (size_t x = 0; x < xl.n; x++)
						found += xl.e[x].ino ==
							 a.ino;
					store_dirlist_free(&xl);
					store_node_unref(s, pp);
				}
				assert_int_equal(found, refs);
			}
			store_node_unref(s, c);
		}
		store_dirlist_free(&cl);
		store_node_unref(s, p);
	}
	if (l->tenant_quota)
		assert_true(tlinks <= l->tenant_quota);
	store_dirlist_free(&pl);
}

