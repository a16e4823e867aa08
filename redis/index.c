/*
 * index.c - a mirror's index of nodes by the shared store's inode
 * number, the table of the tenants it follows, and the follower's
 * positions in their logs.
 *
 * What it owns
 * ------------
 * A secondary index, the mirror's only (the embedded store keeps none):
 * every live node by the shared store's inode number, for entries that
 * name a node by its number alone.
 *  1. Authority: the hierarchy.  The index holds a counted reference
 *     and nothing else.
 *  2. Updated by the apply path only: a node made by an entry (or a
 *     load) is put in at once.
 *  3. A stale entry (its node died in a cascade) is told by node->dead:
 *     a lookup skips it, and a sweep, once as many entries were added
 *     as it holds (amortized O(1) per entry), drops those that were dead
 *     at the sweep before already.
 *  4. A new store instance builds a new mirror: it is not rebuilt.
 *  5. Tests: tests/unit/redis/test_mirror.c (every entry kind against the
 *     embedded store's snapshot).
 * Tenants are followed by id (struct mtenant): the tenant node, the
 * last seq applied, whether it has gone.  A tenant node knows its id
 * (tenant->engine_id), so a transition finds it by hash, never by a
 * walk of the table.  A tenant whose log has ended (its cleanup, or a
 * drain that removed it) is dropped from the table once that entry is
 * applied (mirror_apply): ids are given in order, so an id at or below
 * the highest followed that is no longer in the table has gone.
 *
 * The mirror's own state (struct mirror, redis/mirror.h) is made here
 * (mirror_attach), emptied for a new store instance (mirror_reset) and
 * freed with the store (mirror_free).
 *
 * The follower's positions (remote->pos, remote->ix: the last entry id
 * read of each tenant's log, found by tenant id through a hash) are
 * kept here too, beside the tenants they follow: the follower
 * (redis/follow.c) moves them as it reads, and a load of every tenant
 * (redis/load.c) sets them anew.
 *
 * Threads and locks
 * -----------------
 * mirror->lock (LOCK_ENGINE_INDEX, a leaf) guards the index and the tenant
 * table, held only to look up or change them, never across a
 * transition; a reference is dropped after it is let go.  The applying
 * thread (redis/apply.c, redis/load.c) changes them;
 * transitions, on their callers' threads, look them up (a tenant's id,
 * a node by the shared store's number, what was applied).  The
 * positions are the follower thread's alone (or its starter's, before it
 * runs): no lock.
 */
#include "store/engine.h"
#include "redis/mirror.h"
#include "redis/internal.h"

#include <errno.h>

/* The index and the tenants ----------------------------------------------- */

/* A mirror alone (a test's, or one not yet behind a shared store): the
 * embedded transitions (every slot NULL), and the index freed with the
 * store. */
const struct store_ops mirror_ops = { .close = mirror_free };

int mirror_attach(struct store *s, const char *by, uint64_t ino_offset)
{
	struct mirror *m = st_calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->apply, NULL);
	pthread_mutex_init(&m->lock, NULL);
	m->ino_offset = ino_offset;
	snprintf(m->by, sizeof(m->by), "%s", by ? by : "");
	/* Redis enforces these; the mirror follows (see the top). */
	store_lift_limits(s);
	store_number_from(s, ino_offset);
	store_set_engine(s, &mirror_ops, m);
	return 0;
}

int mirror_reset(struct store *s, uint64_t ino_offset)
{
	struct mirror *m = mirror_of(s);
	struct mnode *x, *xt, *idx;
	struct mtenant *mt, *mtt, *ts;

	lock(&m->apply, LOCK_ENGINE_APPLY);
	lock(&m->lock, LOCK_ENGINE_INDEX);
	idx = m->index;
	ts = m->tenants;
	m->index = NULL;
	m->tenants = NULL;
	m->added = 0;
	m->max_tid = 0;
	m->root_seq = 0;
	m->gseq_applied = 0;
	atomic_store(&m->ino_offset, ino_offset);
	unlock(&m->lock, LOCK_ENGINE_INDEX);
	HASH_ITER(hh, idx, x, xt) {
		HASH_DELETE(hh, idx, x);
		store_node_unref(s, x->n);
		free(x);
	}
	HASH_ITER(hh, ts, mt, mtt) {
		HASH_DELETE(hh, ts, mt);
		if (mt->t)
			store_node_unref(s, tenant_node(mt->t));
		free(mt);
	}
	unlock(&m->apply, LOCK_ENGINE_APPLY);
	return 0;
}

void mirror_free(struct store *s)
{
	struct mirror *m = mirror_of(s);
	struct mnode *x, *xt;
	struct mtenant *mt, *mtt;

	if (!m)
		return;
	HASH_ITER(hh, m->index, x, xt) {
		HASH_DEL(m->index, x);
		store_node_unref(s, x->n);
		free(x);
	}
	HASH_ITER(hh, m->tenants, mt, mtt) {
		HASH_DEL(m->tenants, mt);
		if (mt->t)
			store_node_unref(s, tenant_node(mt->t));
		free(mt);
	}
	pthread_mutex_destroy(&m->lock);
	pthread_mutex_destroy(&m->apply);
	free(m);
	store_drop_engine(s);
}

/*
 * Drop the index's entries that were dead at the last sweep already (no
 * lock held): a transition that made a node another mount's change
 * removed at once still finds it, dead, to answer with
 * (mirror_node_any).
 */
static void index_sweep(struct store *s, struct mirror *m)
{
	struct mnode *x, *xt, *dead = NULL;

	lock(&m->lock, LOCK_ENGINE_INDEX);
	HASH_ITER(hh, m->index, x, xt) {
		if (node_dead(x->n) && !x->doomed) {
			x->doomed = true;
		} else if (node_dead(x->n)) {
			HASH_DEL(m->index, x);
			x->hh.next = dead;
			dead = x;
		}
	}
	m->added = 0;
	unlock(&m->lock, LOCK_ENGINE_INDEX);
	while ((x = dead)) {
		dead = x->hh.next;
		store_node_unref(s, x->n);
		free(x);
	}
}

/* Put node @n (its reference handed over) in the index. */
int index_put(struct store *s, struct mirror *m, struct store_node *n)
{
	struct mnode *x = st_calloc(1, sizeof(*x)), *old;
	bool sweep;

	if (!x) {
		store_node_unref(s, n);
		return -ENOMEM;
	}
	x->ino = store_node_ino(n);
	x->n = n;
	lock(&m->lock, LOCK_ENGINE_INDEX);
	HASH_FIND(hh, m->index, &x->ino, sizeof(x->ino), old);
	if (old)
		HASH_DEL(m->index, old);
	hash_oom = 0;
	HASH_ADD(hh, m->index, ino, sizeof(x->ino), x);
	if (hash_oom) {
		unlock(&m->lock, LOCK_ENGINE_INDEX);
		store_node_unref(s, n);
		free(x);
		x = NULL;
	} else {
		sweep = ++m->added > 1024 && m->added > HASH_COUNT(m->index) / 2;
		unlock(&m->lock, LOCK_ENGINE_INDEX);
	}
	if (old) {
		store_node_unref(s, old->n);
		free(old);
	}
	if (!x)
		return -ENOMEM;
	if (sweep)
		index_sweep(s, m);
	return 0;
}

/* The live node with local inode @ino, with a reference, or NULL. */
struct store_node *index_get(struct mirror *m, uint64_t ino)
{
	struct mnode *x;
	struct store_node *n = NULL;

	lock(&m->lock, LOCK_ENGINE_INDEX);
	HASH_FIND(hh, m->index, &ino, sizeof(ino), x);
	if (x && !node_dead(x->n)) {
		n = x->n;
		store_node_ref(n);
	}
	unlock(&m->lock, LOCK_ENGINE_INDEX);
	return n;
}

struct store_node *mirror_node_any(struct store *s, uint64_t ino)
{
	struct mirror *m = mirror_of(s);
	uint64_t local = ino + m->ino_offset;
	struct store_node *n = NULL;
	struct mnode *x;

	lock(&m->lock, LOCK_ENGINE_INDEX);
	HASH_FIND(hh, m->index, &local, sizeof(local), x);
	if (x) {
		n = x->n;
		store_node_ref(n);
	}
	unlock(&m->lock, LOCK_ENGINE_INDEX);
	return n;
}

struct store_node *mirror_node(struct store *s, uint64_t ino)
{
	return index_get(mirror_of(s), ino + mirror_of(s)->ino_offset);
}

uint64_t mirror_remote_ino(struct store *s, const struct store_node *n)
{
	return store_node_ino(n) - mirror_of(s)->ino_offset;
}

struct mtenant *mt_find_locked(struct mirror *m, uint64_t tid)
{
	struct mtenant *mt;

	store_assert_held(LOCK_ENGINE_INDEX);
	HASH_FIND(hh, m->tenants, &tid, sizeof(tid), mt);
	return mt;
}

int mirror_tenant_add(struct store *s, uint64_t tid, const char *name)
{
	struct mirror *m = mirror_of(s);
	struct mtenant *mt;
	int rc = 0;

	if (!name)
		name = "";
	lock(&m->lock, LOCK_ENGINE_INDEX);
	if (!mt_find_locked(m, tid)) {
		mt = st_calloc(1, sizeof(*mt) + strlen(name) + 1);
		if (!mt) {
			rc = -ENOMEM;
		} else {
			mt->tid = tid;
			strcpy(mt->name, name);
			hash_oom = 0;
			HASH_ADD(hh, m->tenants, tid, sizeof(mt->tid), mt);
			if (hash_oom) {
				free(mt);
				rc = -ENOMEM;
			} else if (tid > m->max_tid) {
				m->max_tid = tid;
			}
		}
	}
	unlock(&m->lock, LOCK_ENGINE_INDEX);
	return rc;
}

int mirror_applied(struct store *s, uint64_t tid, uint64_t *seq, bool *gone)
{
	struct mirror *m = mirror_of(s);
	struct mtenant *mt;
	int rc = 0;

	if (tid == 0) {
		*seq = m->root_seq;
		*gone = false;
		return 0;
	}
	lock(&m->lock, LOCK_ENGINE_INDEX);
	mt = mt_find_locked(m, tid);
	if (mt) {
		*seq = mt->seq;
		*gone = mt->gone;
	} else if (tid <= m->max_tid) {
		*seq = 0;
		*gone = true;
	} else {
		rc = -ENOENT;
	}
	unlock(&m->lock, LOCK_ENGINE_INDEX);
	return rc;
}

void mirror_root_at(struct store *s, uint64_t seq)
{
	mirror_of(s)->root_seq = seq;
}

size_t mirror_tenants(struct store *s, uint64_t *tids, size_t cap,
		      bool shells)
{
	struct mirror *m = mirror_of(s);
	struct mtenant *mt;
	size_t n = 0;

	lock(&m->lock, LOCK_ENGINE_INDEX);
	for (mt = m->tenants; mt; mt = mt->hh.next)
		if (!mt->gone && mt->shell == shells) {
			if (n < cap)
				tids[n] = mt->tid;
			n++;
		}
	unlock(&m->lock, LOCK_ENGINE_INDEX);
	return n;
}

size_t mirror_tenants_unfollowed(struct store *s, uint64_t *tids, size_t cap)
{
	struct mirror *m = mirror_of(s);
	struct mtenant *mt;
	size_t n = 0;

	lock(&m->lock, LOCK_ENGINE_INDEX);
	for (mt = m->tenants; mt; mt = mt->hh.next)
		if (!mt->gone && (mt->shell || mt->unloading)) {
			if (n < cap)
				tids[n] = mt->tid;
			n++;
		}
	unlock(&m->lock, LOCK_ENGINE_INDEX);
	return n;
}

uint64_t mirror_tid_named(struct store *s, const char *name)
{
	struct mirror *m = mirror_of(s);
	struct mtenant *mt;
	uint64_t tid = 0;

	lock(&m->lock, LOCK_ENGINE_INDEX);
	for (mt = m->tenants; mt; mt = mt->hh.next)
		if (!mt->gone && mt->tid > tid && strcmp(mt->name, name) == 0)
			tid = mt->tid;
	unlock(&m->lock, LOCK_ENGINE_INDEX);
	return tid;
}

/* Every transition asks this (tkey): a hash lookup, never a walk of
 * the tenants.  The node names its id; the id must still be followed
 * as this node (a reload or a new instance made another). */
uint64_t mirror_tid_of(struct store *s, struct store_node *tenant)
{
	struct mirror *m = mirror_of(s);
	struct mtenant *mt;
	uint64_t tid = 0;

	if (!tenant || store_node_kind(tenant) != STORE_TENANT)
		return 0;
	lock(&m->lock, LOCK_ENGINE_INDEX);
	tid = tenant_engine_id(node_tenant(tenant));
	mt = tid ? mt_find_locked(m, tid) : NULL;
	if (!mt || !mt->t || tenant_node(mt->t) != tenant)
		tid = 0;
	unlock(&m->lock, LOCK_ENGINE_INDEX);
	return tid;
}

void mt_set_locked(struct mirror *m, struct mtenant *mt, struct tenant *t)
{
	store_assert_held(LOCK_ENGINE_INDEX);
	mt->t = t;
	if (t)
		tenant_set_engine_id(t, mt->tid);
}

uint64_t mirror_testclock(struct store *s)
{
	return atomic_load(&mirror_of(s)->testclock_ms);
}

/* The follower's positions ------------------------------------------------------ */

struct follow_ix *follow_pos_find(struct remote *r, uint64_t tid)
{
	struct follow_ix *x;

	HASH_FIND(hh, r->ix, &tid, sizeof(tid), x);
	return x;
}

int follow_pos_add(struct remote *r, uint64_t tid, const char *id)
{
	struct follow_pos *np;
	struct follow_ix *x;

	if (follow_pos_find(r, tid))
		return 0;
	if (r->npos == r->cappos) {
		size_t cap = r->cappos ? r->cappos * 2 : 16;

		np = st_realloc(r->pos, cap * sizeof(*np));
		if (!np)
			return -ENOMEM;
		r->pos = np;
		r->cappos = cap;
	}
	x = st_calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->tid = tid;
	x->i = r->npos;
	hash_oom = 0;
	HASH_ADD(hh, r->ix, tid, sizeof(x->tid), x);
	if (hash_oom) {
		free(x);
		return -ENOMEM;
	}
	r->pos[r->npos].tid = tid;
	r->pos[r->npos].damaged = false;
	r->pos[r->npos].due = true;
	r->pos[r->npos].own_due = false;
	r->subs_dirty = true;
	snprintf(r->pos[r->npos].id, sizeof(r->pos[0].id), "%s", id);
	r->npos++;
	return 0;
}

void follow_pos_clear(struct remote *r)
{
	struct follow_ix *x, *xt;

	HASH_ITER(hh, r->ix, x, xt) {
		HASH_DEL(r->ix, x);
		free(x);
	}
	r->npos = 0;
	r->root_damaged = false;
	r->root_due = true;
	r->subs_dirty = true;
}

void follow_pos_del(struct remote *r, size_t i)
{
	struct follow_ix *x = follow_pos_find(r, r->pos[i].tid);

	if (x) {
		HASH_DEL(r->ix, x);
		free(x);
	}
	r->subs_dirty = true;
	r->pos[i] = r->pos[--r->npos];
	if (i < r->npos && (x = follow_pos_find(r, r->pos[i].tid)) != NULL)
		x->i = i;
}
