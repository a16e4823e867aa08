/*
 * compare.c - fuzz_store's store side (tests/fuzz/fuzz_store.c says what the
 * target checks): the input's names looked up in the store, and after
 * every step the whole store compared with the model: listings,
 * attributes, contents, inode numbers, snapshots, gauges, drain states.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "store/store_test.h"

#include "tests/fuzz/fuzz_store.h"

/* The store side: names, lookups ------------------------------------------------ */

uint8_t take(struct fz *f)
{
	return f->pos < f->len ? f->in[f->pos++] : 0;
}

int lookup_tenant(struct fz *f, int ti, struct store_node **out)
{
	return store_lookup(f->s, store_root(f->s), TN[ti], out);
}

int lookup_parent(struct fz *f, int ti, int pi, struct store_node **out)
{
	struct store_node *t;
	int rc = lookup_tenant(f, ti, &t);

	if (rc)
		return rc;
	rc = store_lookup(f->s, t, PN[pi], out);
	store_node_unref(f->s, t);
	return rc;
}

int lookup_child(struct fz *f, int ti, int pi, int ci,
		 struct store_node **out)
{
	struct store_node *p;
	int rc = lookup_parent(f, ti, pi, &p);

	if (rc)
		return rc;
	rc = store_lookup(f->s, p, CN[ci], out);
	store_node_unref(f->s, p);
	return rc;
}

/* A lookup the model says fails must fail with ENOENT, and one it says
 * succeeds must succeed. */
void expect_found(struct fz *f, const char *what, int rc, bool found)
{
	expect(f, what, rc, found ? OK : M(ENOENT));
}

/* Inode @ino belongs to model object *@known (0: first sight): it must
 * stay the same for the object's life and never have been seen before. */
static void ino_claim(struct fz *f, uint64_t *known, uint64_t ino,
		      const char *what)
{
	if (*known) {
		if (*known != ino)
			die(f, "%s changed inode %" PRIu64 " -> %" PRIu64, what,
			    *known, ino);
		return;
	}
	for (size_t i = 0; i < f->ninos; i++)
		if (f->inos[i] == ino)
			die(f, "%s reuses inode %" PRIu64, what, ino);
	if (f->ninos < MAX_INOS)
		f->inos[f->ninos++] = ino;
	*known = ino;
}

/* Full comparison ------------------------------------------------------------------ */

static int name_index(const char *const *names, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return i;
	return -1;
}

/* A listing of @dir must hold exactly the names in @want (a bitmask
 * over @names). */
void compare_list(struct fz *f, struct store_node *dir,
		  const char *const *names, int n, unsigned want,
		  const char *what)
{
	struct store_dirlist dl;
	unsigned got = 0;
	int rc = store_list(f->s, dir, &dl);

	expect(f, what, rc, OK);
	for (size_t i = 0; i < dl.n; i++) {
		int k = name_index(names, n, dl.e[i].name);

		if (k < 0 || (got & (1u << k)))
			die(f, "%s lists '%s' (unknown or twice)", what,
			    dl.e[i].name);
		got |= 1u << k;
	}
	store_dirlist_free(&dl);
	if (got != want)
		die(f, "%s lists set 0x%x, the model has 0x%x", what, got, want);
}

static void compare_content(struct fz *f, struct store_node *c,
			    const struct mstate *st, const char *what)
{
	struct store_stage *g;
	uint8_t buf[64];
	ssize_t n;
	int rc = store_stage_open(f->s, c, STORE_STAGE_READ, &g);

	expect(f, what, rc, OK);
	n = store_stage_read(g, buf, sizeof(buf), 0);
	store_stage_close(g);
	if (n != (ssize_t)st->len || memcmp(buf, st->data, st->len) != 0)
		die(f, "%s content: store has %zd bytes, model %zu", what, n,
		    st->len);
}

static void compare_child(struct fz *f, struct store_node *p, int ti, int pi,
			  int ci)
{
	struct model *m = &f->m;
	int sid = m->t[ti].p[pi].link[ci];
	struct mstate *st = &m->st[sid];
	struct store_node *c;
	struct store_attr a;
	struct store_lease l;
	uint64_t v = 0;
	char what[32];
	int rc;

	snprintf(what, sizeof(what), "%s/%s/%s", TN[ti], PN[pi], CN[ci]);
	rc = store_lookup(f->s, p, CN[ci], &c);
	expect_found(f, what, rc, true);
	ino_claim(f, &st->ino, store_node_ino(c), what);
	expect(f, what, store_child_version(f->s, c, &v), OK);
	if (v != st->version)
		die(f, "%s version %" PRIu64 ", model %" PRIu64, what, v,
		    st->version);
	expect(f, what, store_getattr(f->s, c, &a), OK);
	if ((a.nlink != st->nlink && !f->peeking) || a.size != st->len)
		die(f, "%s nlink %u size %" PRIu64 ", model nlink %u size %zu",
		    what, a.nlink, a.size, st->nlink, st->len);
	expect(f, what, store_lease_get(f->s, c, &l), OK);
	if (l.ttl_ms != st->ttl || l.deadline_ms != st->deadline)
		die(f, "%s lease ttl %" PRIu64 " deadline +%" PRId64
		    ", model ttl %" PRIu64 " deadline +%" PRId64, what,
		    l.ttl_ms, (int64_t)(l.deadline_ms - m->now), st->ttl,
		    (int64_t)(st->deadline - m->now));
	compare_content(f, c, st, what);
	store_node_unref(f->s, c);
}

static void compare_parent(struct fz *f, struct store_node *t, int ti, int pi)
{
	struct model *m = &f->m;
	struct mparent *mp = &m->t[ti].p[pi];
	struct store_node *p, *c;
	struct store_lease l;
	uint64_t g = 0;
	unsigned want = 0;
	char what[32];
	int rc;

	snprintf(what, sizeof(what), "%s/%s", TN[ti], PN[pi]);
	rc = store_lookup(f->s, t, PN[pi], &p);
	expect_found(f, what, rc, mp->live);
	if (rc)
		return;
	ino_claim(f, &mp->ino, store_node_ino(p), what);
	expect(f, what, store_parent_generation(f->s, p, &g), OK);
	if (g != mp->gen)
		die(f, "%s generation %" PRIu64 ", model %" PRIu64, what, g,
		    mp->gen);
	expect(f, what, store_lease_get(f->s, p, &l), OK);
	if (l.ttl_ms != mp->ttl || l.deadline_ms != mp->deadline ||
	    l.child_ttl_ms != mp->child_ttl)
		die(f, "%s lease ttl %" PRIu64 " child_ttl %" PRIu64
		    " deadline +%" PRId64 ", model %" PRIu64 " %" PRIu64
		    " +%" PRId64, what, l.ttl_ms, l.child_ttl_ms,
		    (int64_t)(l.deadline_ms - m->now), mp->ttl, mp->child_ttl,
		    (int64_t)(mp->deadline - m->now));
	for (int ci = 0; ci < NC; ci++)
		if (mp->link[ci] >= 0)
			want |= 1u << ci;
	compare_list(f, p, CN, NC, want, what);
	for (int ci = 0; ci < NC; ci++) {
		if (mp->link[ci] >= 0) {
			compare_child(f, p, ti, pi, ci);
		} else {
			rc = store_lookup(f->s, p, CN[ci], &c);
			expect_found(f, "lookup of a child the model lacks", rc,
				     false);
		}
	}
	store_node_unref(f->s, p);
}

/*
 * The rows of @snap must be the listing of model @m (the tenant @only, or
 * the whole store when @only < 0): every tenant, parent, child link and
 * tombstone once, with its generation, version, size, nlink, time left
 * and inode (where the model knows it), in name order (statefs(8),
 * .snapshot: tenants by name, each with its own row first, then its
 * buckets by parent name, each a parent's row and its children's by
 * name, then its tombstones by name; byte order).  @peeking: the
 * reaper has not run (tombstones and nlink are not settled yet).
 */
void compare_snapshot_rows(struct fz *f, const struct store_snapshot *snap,
			   const struct model *m, int only, bool peeking,
			   const char *what)
{
	unsigned rows[4] = { 0 }, want[4] = { 0 };
	bool seen_t[NT] = { false }, seen_p[NT][NP] = { { false } };
	bool seen_c[NT][NP][NC] = { { { false } } }, seen_tb[NT][NP] = { { false } };
	const char *last_t = NULL, *last_p = NULL, *last_c = NULL;
	int cur_t = -1, cur_p = -1, phase = 0; /* 1 buckets, 2 tombstones */

	for (size_t i = 0; i < snap->n; i++) {
		const struct store_snap_row *r = &snap->rows[i];
		int ti = name_index(TN, NT, r->tenant);
		int pi = r->kind == STORE_SNAP_TENANT ? 0 :
			 name_index(PN, NP, r->parent);
		int ci = r->kind == STORE_SNAP_CHILD ?
			 name_index(CN, NC, r->child) : 0;
		bool dup;

		if (ti < 0 || pi < 0 || ci < 0 || !m->t[ti].live ||
		    (only >= 0 && ti != only))
			die(f, "%s: row of unknown %s/%s/%s", what, r->tenant,
			    r->parent, r->child);
		if (r->kind > STORE_SNAP_TOMBSTONE)
			die(f, "%s: row of kind %d", what, (int)r->kind);
		rows[r->kind]++;
		/* Scope order. */
		if (r->kind == STORE_SNAP_TENANT) {
			if (last_t && strcmp(r->tenant, last_t) <= 0)
				die(f, "%s: tenant %s out of order", what, r->tenant);
			last_t = r->tenant;
			last_p = NULL;
			cur_t = ti;
			cur_p = -1;
			phase = 1;
		} else if (ti != cur_t) {
			die(f, "%s: row of %s/%s/%s outside its tenant's", what,
			    r->tenant, r->parent, r->child);
		} else if (r->kind == STORE_SNAP_PARENT) {
			if (phase != 1 || (last_p && strcmp(r->parent, last_p) <= 0))
				die(f, "%s: parent %s/%s out of order", what,
				    r->tenant, r->parent);
			last_p = r->parent;
			last_c = NULL;
			cur_p = pi;
		} else if (r->kind == STORE_SNAP_CHILD) {
			if (phase != 1 || pi != cur_p)
				die(f, "%s: child %s/%s/%s not after its parent",
				    what, r->tenant, r->parent, r->child);
			if (last_c && strcmp(r->child, last_c) <= 0)
				die(f, "%s: child %s/%s/%s out of order", what,
				    r->tenant, r->parent, r->child);
			last_c = r->child;
		} else {
			if (phase == 2 && strcmp(r->parent, last_p) <= 0)
				die(f, "%s: tombstone %s/%s out of order", what,
				    r->tenant, r->parent);
			phase = 2;
			last_p = r->parent;
		}
		dup = r->kind == STORE_SNAP_TENANT ? seen_t[ti] :
		      r->kind == STORE_SNAP_PARENT ? seen_p[ti][pi] :
		      r->kind == STORE_SNAP_CHILD ? seen_c[ti][pi][ci] :
		      seen_tb[ti][pi];
		if (dup)
			die(f, "%s: %s/%s/%s (kind %d) listed twice", what,
			    r->tenant, r->parent, r->child, (int)r->kind);
		if (r->kind == STORE_SNAP_TENANT) {
			seen_t[ti] = true;
			if (m->t[ti].ino && r->ino != (int64_t)m->t[ti].ino)
				die(f, "%s: tenant %s inode %" PRId64, what,
				    r->tenant, r->ino);
		} else if (r->kind == STORE_SNAP_TOMBSTONE && peeking) {
			seen_tb[ti][pi] = true;
			continue; /* an unreaped parent has none yet */
		} else if (r->kind == STORE_SNAP_TOMBSTONE) {
			const struct mtomb *tb = &m->t[ti].tomb[pi];

			seen_tb[ti][pi] = true;
			if (!tb->live || r->generation != (int64_t)tb->gen ||
			    r->ttl_ms_left != (int64_t)(tb->deadline - m->now))
				die(f, "%s: tombstone %s/%s gen %" PRId64
				    " ttl_left %" PRId64 "; model %s gen %"
				    PRIu64 " ttl_left %" PRId64, what, r->tenant,
				    r->parent, r->generation, r->ttl_ms_left,
				    tb->live ? "has" : "lacks", tb->gen,
				    (int64_t)(tb->deadline - m->now));
		} else if (r->kind == STORE_SNAP_PARENT) {
			const struct mparent *p = &m->t[ti].p[pi];
			int64_t ttl = p->deadline ?
				(int64_t)(p->deadline - m->now) : -1;

			seen_p[ti][pi] = true;
			if (!p->live || r->generation != (int64_t)p->gen ||
			    r->ttl_ms_left != ttl ||
			    (p->ino && r->ino != (int64_t)p->ino))
				die(f, "%s: parent row %s/%s gen %" PRId64
				    " ttl_left %" PRId64 " inode %" PRId64, what,
				    r->tenant, r->parent, r->generation,
				    r->ttl_ms_left, r->ino);
		} else {
			int sid = m_child(m, ti, pi, ci);
			const struct mstate *st = &m->st[sid < 0 ? 0 : sid];
			int64_t ttl = st->deadline ?
				(int64_t)(st->deadline - m->now) : -1;

			seen_c[ti][pi][ci] = true;
			if (sid < 0 || r->version != (int64_t)st->version ||
			    r->size != (int64_t)st->len ||
			    (r->nlink != (int64_t)st->nlink && !peeking) ||
			    r->ttl_ms_left != ttl ||
			    r->generation != (int64_t)m->t[ti].p[pi].gen ||
			    (st->ino && r->ino != (int64_t)st->ino))
				die(f, "%s: child row %s/%s/%s version %" PRId64
				    " size %" PRId64 " nlink %" PRId64
				    " ttl_left %" PRId64 " gen %" PRId64, what,
				    r->tenant, r->parent, r->child, r->version,
				    r->size, r->nlink, r->ttl_ms_left,
				    r->generation);
		}
	}
	for (int t = 0; t < NT; t++) {
		if (!m->t[t].live || (only >= 0 && t != only))
			continue;
		want[STORE_SNAP_TENANT]++;
		want[STORE_SNAP_PARENT] += m_count_parents(m, t);
		want[STORE_SNAP_TOMBSTONE] += m_count_tombs(m, t);
		want[STORE_SNAP_CHILD] += m_tenant_links(&m->t[t]);
	}
	for (int k = 0; k < 4; k++)
		if (rows[k] != want[k] &&
		    !(peeking && k == STORE_SNAP_TOMBSTONE))
			die(f, "%s has %u rows of kind %d, model %u", what,
			    rows[k], k, want[k]);
}

/* A snapshot of the whole store now, against the model. */
static void compare_snapshot(struct fz *f)
{
	struct store_snapshot snap;
	int rc = store_snapshot_take(f->s, NULL, &snap);

	expect(f, "store_snapshot_take", rc, OK);
	compare_snapshot_rows(f, &snap, &f->m, -1, f->peeking, "snapshot");
	store_snapshot_free(&snap);
}

static void compare_gauges(struct fz *f, struct store_node *tnode, int ti)
{
	struct model *m = &f->m;
	struct store_stats st;
	uint64_t links = 0;

	expect(f, "store_stats", store_stats(f->s, tnode, &st), OK);
	for (int t = 0; t < NT; t++)
		if (m->t[t].live && (ti < 0 || ti == t))
			links += m_tenant_links(&m->t[t]);
	if (st.tenants != (ti < 0 ? m_count_tenants(m) : 1) ||
	    st.parents != m_count_parents(m, ti) ||
	    st.children != m_count_states(m, ti) || st.links != links ||
	    st.tombstones != m_count_tombs(m, ti) ||
	    st.bytes != m_count_bytes(m, ti) ||
	    st.staged_bytes != m_count_staged(m, ti, NULL))
		die(f, "stats of %s: tenants %" PRIu64 " parents %" PRIu64
		    " children %" PRIu64 " links %" PRIu64 " tombstones %"
		    PRIu64 " bytes %" PRIu64 " staged %" PRIu64 "; model %u %u %u %"
		    PRIu64 " %u %" PRIu64 " %" PRIu64,
		    ti < 0 ? "the store" : TN[ti], st.tenants,
		    st.parents, st.children, st.links, st.tombstones, st.bytes,
		    st.staged_bytes,
		    ti < 0 ? m_count_tenants(m) : 1, m_count_parents(m, ti),
		    m_count_states(m, ti), links, m_count_tombs(m, ti),
		    m_count_bytes(m, ti), m_count_staged(m, ti, NULL));
}

/* What .drain of the store (@ti < 0) or of a tenant reads. */
static void compare_drain(struct fz *f, struct store_node *tnode, int ti)
{
	struct model *m = &f->m;
	enum store_state want = m->state, got;
	uint64_t dl = m->drain_deadline, left = 0, want_left;

	if (ti >= 0) {
		const struct mtenant *t = &m->t[ti];

		/* a tenant is as far as the further of its drain and the
		 * store's; two running drains end at the earlier */
		if (t->drain > want ||
		    (t->drain == STORE_DRAINING && want == STORE_DRAINING &&
		     t->drain_deadline < dl)) {
			want = t->drain;
			dl = t->drain_deadline;
		}
	}
	want_left = want == STORE_DRAINING && dl > m->now ? dl - m->now : 0;
	got = store_drain_state(f->s, tnode, &left);
	if (got != want || left != want_left)
		die(f, "drain state of %s: %d (%" PRIu64 " ms left), model %d (%"
		    PRIu64 ")", ti < 0 ? "the store" : TN[ti], got, left, want,
		    want_left);
}

/* Links that share a state in the model share an inode in the store
 * (checked by ino_claim per state); distinct states have distinct
 * inodes (ino_claim never hands one out twice). */
void verify(struct fz *f)
{
	struct model *m = &f->m;
	struct store_node *root = store_root(f->s), *t;
	unsigned want = 0;
	uint64_t next;
	char why[256] = "";

	f->verifying = true;
	for (int ti = 0; ti < NT; ti++)
		if (m->t[ti].live)
			want |= 1u << ti;
	compare_list(f, root, TN, NT, want, "the root");
	if (!f->peeking) {
		compare_gauges(f, NULL, -1);
		compare_drain(f, NULL, -1);
	}
	for (int ti = 0; ti < NT; ti++) {
		int rc = lookup_tenant(f, ti, &t);

		expect_found(f, TN[ti], rc, m->t[ti].live);
		if (rc)
			continue;
		ino_claim(f, &m->t[ti].ino, store_node_ino(t), TN[ti]);
		want = 0;
		for (int pi = 0; pi < NP; pi++)
			if (m->t[ti].p[pi].live)
				want |= 1u << pi;
		compare_list(f, t, PN, NP, want, TN[ti]);
		for (int pi = 0; pi < NP; pi++)
			compare_parent(f, t, ti, pi);
		if (!f->peeking) {
			compare_gauges(f, t, ti);
			compare_drain(f, t, ti);
		}
		store_node_unref(f->s, t);
	}
	/* Inside OP_SNAPSHOT the one snapshot at a time is being taken. */
	if (!f->in_snapshot)
		compare_snapshot(f);
	next = store_next_deadline(f->s);
	if (!f->peeking && next != m_next_deadline(m))
		die(f, "next deadline +%" PRId64 ", model +%" PRId64,
		    (int64_t)(next - m->now),
		    (int64_t)(m_next_deadline(m) - m->now));
	if (store_check_all(f->s, why, sizeof(why)) != 0)
		die(f, "store_check_all: %s", why);
	f->verifying = false;
}

/*
 * The clock has passed deadlines and no reaper has run (lazy expiry):
 * what the store shows must already be what it will be once the reaper
 * runs at this time (@after), as far as visibility goes: listings,
 * lookups, generations, versions, content, leases, snapshot rows and
 * handles of an expired parent (ESTALE).  Left out, because only the
 * reaper settles them: tombstones of expired parents, gauges, drains,
 * the deadline heap, and nlink (a state still counts the links of an
 * expired parent).  Nothing called here reaps.
 */
void peek_verify(struct fz *f, const struct model *after)
{
	struct model saved = f->m;
	struct store_dirlist dl;

	f->m = *after;
	f->peeking = true;
	verify(f);
	f->verifying = true;
	for (int i = 0; i < NHANDLE; i++) {
		struct mhandle *h = &f->h[i];
		int rc;

		if (!h->used)
			continue;
		rc = store_list(f->s, h->node, &dl);
		if (rc == 0)
			store_dirlist_free(&dl);
		expect(f, "list through a handle before the reaper", rc,
		       handle_valid(&f->m, h) ? OK : M(ESTALE));
	}
	f->verifying = f->peeking = false;
	/* keep the inodes learned meanwhile */
	for (int t = 0; t < NT; t++) {
		if (saved.t[t].inc == f->m.t[t].inc)
			saved.t[t].ino = f->m.t[t].ino;
		for (int p = 0; p < NP; p++)
			if (saved.t[t].p[p].inc == f->m.t[t].p[p].inc)
				saved.t[t].p[p].ino = f->m.t[t].p[p].ino;
	}
	for (int i = 0; i < NSLOT; i++)
		if (saved.st[i].inc == f->m.st[i].inc)
			saved.st[i].ino = f->m.st[i].ino;
	f->m = saved;
}

/* One reaper pass and a read of .drain, on both sides. */
void fz_settle(struct fz *f)
{
	store_expire(f->s, 1u << 16);
	store_drain_state(f->s, NULL, NULL);
	m_settle(&f->m);
}
