/*
 * tenant.c - tenants: the isolation and quota boundary, made by a mkdir at
 * the root and cleaned up, with everything in it, by an rmdir there.
 *
 * What it owns
 * ------------
 * The tenant table (s->tenants, name -> tenant, under the store lock)
 * and, per tenant, its parent table and attributes (under its own lock),
 * its gauges, which are also its shares of the store-wide ceilings
 * (reserved like the ceilings, right after them), and its special files
 * (a block of inode numbers taken with the tenant's own).  A cleanup
 * removes every parent with its children (tenant_clear_locked, each
 * parent's cascade in turn) and every tombstone, and the tenant leaves the
 * table, in one transition; so does a drain's clear of a tenant, which
 * leaves the tenant itself in place (drain.c).
 *
 * Locks
 * -----
 * Both transitions hold the world lock shared, then the store lock
 * (LOCK_STORE).  A cleanup then takes the tenant's lock (LOCK_TENANT)
 * and, when a caller's right to the cascade must be judged, every bucket
 * of the tenant by ascending inode (LOCK_PARENT,
 * tenant_lock_for_cascade), held from the check to each bucket's
 * removal; the cascade takes each state's stripe in turn.
 * tenant_clear_locked() and tenant_lock_for_cascade() expect the
 * tenant's lock held.
 */
#include "store/internal.h"

#include <errno.h>

int tenant_create(struct store *s, struct given *g, const char *name,
		  const struct store_owner *owner,
		  struct store_node **out, struct store_attr *attr)
{
	struct tenant *t, *old;
	int rc = 0;

	t = st_calloc(1, sizeof(*t));
	if (!t || !(t->name = st_strdup(name))) {
		free(t);
		return -ENOMEM;
	}
	node_init(&t->node, ino_alloc(s, g, 1 + STORE_NSPECIAL), STORE_TENANT);
	specials_init(t->special, &t->node);
	pthread_mutex_init(&t->lock, NULL);
	pthread_mutex_init(&t->acl_lock, NULL);
	meta_init(&t->node, &t->meta, owner, g);
	t->snap_epoch = s->snap_epochs; /* not in a snapshot being taken */

	lock(&s->lock, LOCK_STORE);
	HASH_FIND_STR(s->tenants, name, old);
	if (draining(s, g, NULL))
		rc = -EROFS;
	else if (old)
		rc = -EEXIST;
	else if (!reserve(&s->tenants_n, 1, s->lim.max_tenants))
		rc = -ENOSPC;
	if (rc == 0) {
		/* Not reachable yet: its owner is still only ours to set. */
		meta_inherit(&t->node, &t->meta, &s->root, &s->root_meta, true);
		hash_oom = 0;
		HASH_ADD_KEYPTR(hh, s->tenants, t->name, strlen(t->name), t);
		if (hash_oom)
			rc = -ENOMEM;
		if (rc) {
			gauge_sub(&s->tenants_n, 1, "tenants");
		} else {
			/* Without t->lock: t is found only under s->lock. */
			if (attr)
				attr_locked(s, &t->node, attr);
			touch_dir(&s->root_meta, g);
			store_node_ref(&t->node); /* the caller's */
			emit(s, g, STORE_OP_JOIN, false, &t->node, t, NULL, NULL,
			     -1, -1);
		}
	}
	unlock(&s->lock, LOCK_STORE);
	if (rc) {
		store_node_unref(s, &t->node);
		return refuse(s, rc);
	}
	*out = &t->node;
	return 0;
}

/*
 * Remove every parent of @t (t->lock held), cascade included, and its
 * tombstones: the body of a tenant cleanup and of a drain's clear.  With
 * @op each parent's removal is reported as an internal event (so the
 * watch machinery echoes it).  With @plocked the caller holds every
 * bucket's lock; each is released as its parent goes.
 */
void tenant_clear_locked(struct store *s, struct given *g, struct tenant *t,
			 enum store_op op, bool plocked)
{
	struct parent *p, *tmp;

	store_assert_held(LOCK_TENANT);
	HASH_ITER(hh, t->parents, p, tmp) {
		struct ptab links;

		links = plocked ? parent_unhook_locked(s, g, t, p) :
				  parent_remove_locked(s, g, t, p);
		/* After the cascade, as every parent's removal line. */
		if (op != NO_EVENT)
			emit(s, g, op, true, &p->node, t, p->name, NULL,
			     (int64_t)p->generation, -1);
		atomic_fetch_add(&s->leaves, 1);
		links_free(s, &links);
		store_node_unref(s, &p->node);
	}
	tombs_drop_all_locked(s, t);
}

/*
 * Lock every bucket of @t, in inode order (t->lock held), and decide
 * whether @cred (not root) could empty @t by hand (see store_rmdir).  On
 * 0 the buckets stay locked for tenant_clear_locked(); on -EACCES or
 * -ENOMEM none is.
 */
int tenant_lock_for_cascade(struct store *s, struct given *g, struct tenant *t,
			    const struct store_cred *cred)
{
	size_t n = HASH_COUNT(t->parents), live = 0;
	uint64_t now = now_of(s, g);
	struct parent **ps, *p;
	bool ok = true;
	size_t i = 0;

	if (!n)
		return 0;
	ps = st_malloc(n * sizeof(*ps));
	if (!ps)
		return -ENOMEM;
	for (p = t->parents; p; p = p->hh.next)
		ps[i++] = p;
	qsort(ps, n, sizeof(*ps), parent_cmp);
	for (i = 0; i < n; i++)
		bucket_lock(ps[i]);
	for (i = 0; i < n && ok; i++) {
		if (is_expired(s, &ps[i]->node, now))
			continue; /* gone already, reaped or not */
		live++;
		ok = may_remove_parent_locked(s, t, ps[i], cred, now);
	}
	if (ok && live)
		ok = store_cred_may(cred, t->meta.uid, t->meta.gid, t->node.mode,
				    STORE_MAY_WRITE | STORE_MAY_EXEC);
	if (!ok)
		for (i = n; i > 0; i--)
			bucket_unlock(ps[i - 1]);
	free(ps);
	return ok ? 0 : -EACCES;
}

int tenant_cleanup(struct store *s, struct given *g, const char *name,
		   const struct store_cred *cred)
{
	bool check = cred && cred->uid != 0;
	struct tenant *t;
	int rc;

	lock(&s->lock, LOCK_STORE);
	HASH_FIND_STR(s->tenants, name, t);
	if (!t) {
		unlock(&s->lock, LOCK_STORE);
		return -ENOENT;
	}
	lock(&t->lock, LOCK_TENANT);
	rc = check ? tenant_lock_for_cascade(s, g, t, cred) : 0;
	if (rc) {
		unlock(&t->lock, LOCK_TENANT);
		unlock(&s->lock, LOCK_STORE);
		return rc;
	}
	atomic_store(&t->node.dead, true);
	HASH_DEL(s->tenants, t);
	gauge_sub(&s->tenants_n, 1, "tenants");
	touch_dir(&s->root_meta, g);
	if (atomic_load(&t->drain_state) == STORE_DRAINING)
		atomic_fetch_sub(&s->tenants_draining, 1);

	/* The table stays locked until the line (as a drain's clear): a
	 * new tenant of the name joins after it ("Event order", events.c). */
	tenant_clear_locked(s, g, t, NO_EVENT, check);
	emit(s, g, STORE_OP_CLEANUP, false, &t->node, t, NULL, NULL, -1, -1);
	unlock(&t->lock, LOCK_TENANT);
	unlock(&s->lock, LOCK_STORE);
	store_node_unref(s, &t->node); /* the table's reference */
	return 0;
}

/* Contract in engine.h. */
uint64_t tenants_end_instance(struct store *s, struct given *g)
{
	struct tenant *t, *tt;

	HASH_ITER(hh, s->tenants, t, tt)
		TRANSITION(s, tenant_cleanup(s, g, t->name, NULL));
	emit_overflow(s, NULL);
	event_hook_run(s);
	lock(&s->lock, LOCK_STORE);
	atomic_store(&s->state, STORE_READY);
	unlock(&s->lock, LOCK_STORE);
	return atomic_load(&s->next_ino) -
	       (STORE_ROOT_INO + 1 + STORE_NSPECIAL);
}

/* Contract in engine.h. */
struct store_node *tenant_find(struct store *s, const char *name)
{
	struct tenant *t;

	lock(&s->lock, LOCK_STORE);
	HASH_FIND_STR(s->tenants, name, t);
	if (t)
		store_node_ref(&t->node);
	unlock(&s->lock, LOCK_STORE);
	return t ? &t->node : NULL;
}
