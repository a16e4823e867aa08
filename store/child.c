/*
 * child.c - children: admission, removal, a second link, rename and
 * exchange, and the expiry of a state.
 *
 * What it owns
 * ------------
 * The transitions of a parent's entries.  A child is a link in a bucket
 * reaching a state (bucket.c); creating one admits a new state and its
 * first link, link() admits one more link to a state of the same tenant,
 * unlink() takes one away (the state ends with its last), rename() moves
 * a link between two buckets of a tenant, and an exchange makes two links
 * trade their states.  Admission (admit_locked) makes every refusal in
 * this order before anything changes: drain, a parent gone,
 * max_children, the quotas (parent_quota, tenant_quota, the tenant's
 * share of max_children); what can still fail after it (room in the
 * bucket) is reserved next and undone on failure.
 * A state past its deadline is expired as by unlink from every bucket
 * that links it (child_expire), by the reaper or by the operation that
 * finds it: its name is free at once.
 *
 * Locks
 * -----
 * Each transition holds the world lock shared (TRANSITION), then the
 * bucket's lock (LOCK_PARENT; a rename both buckets, by ascending inode,
 * lock_pair), then the state's stripe (LOCK_STRIPE) for the state's side;
 * an exchange takes both states' stripes by ascending address.
 * child_expire() is called with no lock but the world lock: it locks every
 * bucket that links the state by ascending inode, then the stripe.  An
 * operation that meets an expired state under a bucket lock lets go,
 * expires it (expired_reap) and starts over.  admit_locked(),
 * link_reserve_locked(), link_find_locked() and links_exchange_locked()
 * expect the bucket's lock (both buckets' for an exchange).
 */
#include "store/internal.h"

#include <errno.h>

/* Emit @op for link @l of bucket @p (p->lock held). */
static void emit_link(struct store *s, struct given *g, enum store_op op, bool internal,
		      struct parent *p, const char *name, struct child *c,
		      int64_t version)
{
	emit(s, g, op, internal, &c->node, p->tenant, p->name, name,
	     (int64_t)p->generation, version);
}

/*
 * State @c has passed its deadline: remove it as by unlink from every
 * parent that links it, in one critical section of all those buckets
 * (locked in inode order, then the state's stripe).  No lock held by the
 * caller.  Returns 1 when it expired, 0 when it was renewed or removed
 * meanwhile.
 */
int child_expire(struct store *s, struct given *g, struct child *c, uint64_t now)
{
	for (int tries = 0; tries < 16; tries++) {
		struct parent **ps;
		struct link *l, *detached = NULL;
		uint32_t n = 0, k = 0;
		bool same = true;

		lock(stripe(s, c), LOCK_STRIPE);
		if (c->node.nlink == 0 || !is_expired(s, &c->node, now)) {
			unlock(stripe(s, c), LOCK_STRIPE);
			return 0;
		}
		ps = st_malloc(c->node.nlink * sizeof(*ps));
		if (!ps) {
			unlock(stripe(s, c), LOCK_STRIPE);
			return 0;
		}
		LL_FOREACH2(c->slinks, l, snext) {
			store_node_ref(&l->parent->node);
			ps[n++] = l->parent;
		}
		unlock(stripe(s, c), LOCK_STRIPE);
		qsort(ps, n, sizeof(*ps), parent_cmp);
		for (uint32_t i = 0; i < n; i++)
			if (i == 0 || ps[i] != ps[i - 1]) {
				bucket_lock(ps[i]);
				snap_parent_cow(s, ps[i]);
			}

		lock(stripe(s, c), LOCK_STRIPE);
		LL_FOREACH2(c->slinks, l, snext) {
			k++;
			if (!bsearch(&l->parent, ps, n, sizeof(*ps), parent_cmp))
				same = false;
		}
		same = same && k == n && c->node.nlink == n && n > 0 &&
			is_expired(s, &c->node, now);
		unlock(stripe(s, c), LOCK_STRIPE);
		if (same) {
			/* Every link goes; the last one ends the state. */
			while ((l = c->slinks)) {
				struct parent *p = l->parent;

				bucket_del(p, l);
				p->nlinks--;
				gauge_sub(&s->links_n, 1, "links");
				gauge_sub(&p->tenant->links_n, 1, "tenant links");
				touch_dir(&p->meta, g);
				state_unlink_locked(s, g, l, STORE_OP_EXPIRE);
				l->snext = detached;
				detached = l;
			}
		}
		for (uint32_t i = n; i > 0; i--)
			if (i == 1 || ps[i - 1] != ps[i - 2])
				bucket_unlock(ps[i - 1]);
		for (uint32_t i = 0; i < n; i++)
			store_node_unref(s, &ps[i]->node);
		free(ps);
		while ((l = detached)) {
			detached = l->snext;
			store_node_unref(s, &l->child->node);
			free(l);
		}
		if (same)
			return 1;
	}
	return 0;
}

/*
 * The admission checks every new entry in bucket @p passes (p->lock
 * held), in this order: store ready, parent alive, global
 * ceilings, quotas (the tenant's share of max_children among them).  On
 * success the entry is reserved in the tenant quota (and a state in
 * max_children and the tenant's share when @new_state); the caller
 * inserts or calls admit_undo().
 */
static int admit_locked(struct store *s, struct given *g, struct parent *p, bool new_state,
			uint64_t now)
{
	struct tenant *t = p->tenant;

	store_assert_held(LOCK_PARENT);
	if (draining(s, g, t))
		return -EROFS;
	if (gone(s, &p->node, now))
		return -ESTALE;
	if (new_state && !reserve(&s->children_n, 1, s->lim.max_children))
		return -ENOSPC;
	if ((s->lim.parent_quota && p->nlinks + 1 > s->lim.parent_quota) ||
	    !reserve(&t->links_n, 1, s->lim.tenant_quota)) {
		if (new_state)
			gauge_sub(&s->children_n, 1, "children");
		return -EDQUOT;
	}
	if (new_state &&
	    !reserve(&t->children_n, 1, s->lim.tenant_max_children)) {
		gauge_sub(&t->links_n, 1, "tenant links");
		gauge_sub(&s->children_n, 1, "children");
		return -EDQUOT;
	}
	return 0;
}

static void admit_undo(struct store *s, struct parent *p, bool new_state)
{
	gauge_sub(&p->tenant->links_n, 1, "tenant links");
	if (new_state) {
		gauge_sub(&p->tenant->children_n, 1, "tenant children");
		gauge_sub(&s->children_n, 1, "children");
	}
}

/* Room for one more entry in @p, whose admission is reserved (p->lock
 * held): the one step of an insert that can fail.  -ENOMEM undoes the
 * admission. */
static int link_reserve_locked(struct store *s, struct given *g, struct parent *p,
			       bool new_state)
{
	store_assert_held(LOCK_PARENT);
	if (ptab_reserve(&p->links, link_hash)) {
		admit_undo(s, p, new_state);
		return -ENOMEM;
	}
	return 0;
}

/*
 * Find @name in bucket @p (p->lock held).  A link whose state has
 * expired is returned in *@expired (with a reference) instead: the
 * caller unlocks, calls child_expire() and retries.
 */
static struct link *link_find_locked(struct store *s, struct parent *p,
				     const char *name, uint64_t now,
				     struct child **expired)
{
	struct link *l = bucket_find(p, name);

	store_assert_held(LOCK_PARENT);
	if (l && is_expired(s, &l->child->node, now)) {
		*expired = l->child;
		store_node_ref(&l->child->node);
		return NULL;
	}
	return l;
}

/* Reap a state found expired under a bucket lock (now released). */
static void expired_reap(struct store *s, struct given *g, struct child **c, uint64_t now)
{
	child_expire(s, g, *c, now);
	store_node_unref(s, &(*c)->node);
	*c = NULL;
}

int child_create(struct store *s, struct given *g, struct store_node *parent, const char *name,
		 const struct store_owner *owner, bool excl,
		 struct store_node **out, bool *created,
		 struct store_attr *attr)
{
	struct parent *p = as_parent(parent);
	struct child *c, *expired = NULL;
	struct link *l, *old;
	uint64_t now = now_of(s, g), ttl;
	int rc;

	if (!p)
		return parent->kind == STORE_CHILD ? -ENOTDIR : -EPERM;
	c = st_calloc(1, sizeof(*c));
	l = c ? link_new(name, c) : NULL;
	if (!l) {
		free(c);
		return -ENOMEM;
	}
	node_init(&c->node, ino_alloc(s, g, 1), STORE_CHILD);
	c->node.epoch = (uint32_t)s->snap_epochs; /* not in a snapshot being taken */
	meta_init(&c->node, &c->meta, owner, g);
retry:
	bucket_lock(p);
	snap_parent_cow(s, p);
	/* Through a departed or expired parent nothing happens, not even
	 * the reaping of what it held. */
	old = gone(s, &p->node, now) ? NULL :
		link_find_locked(s, p, name, now, &expired);
	if (expired) {
		bucket_unlock(p);
		expired_reap(s, g, &expired, now);
		goto retry;
	}
	if (old) {
		rc = excl ? -EEXIST : 0;
		if (rc == 0) {
			*out = &old->child->node;
			store_node_ref(*out);
			*created = false;
			if (attr) {
				lock(stripe(s, old->child), LOCK_STRIPE);
				attr_locked(s, *out, attr);
				unlock(stripe(s, old->child), LOCK_STRIPE);
			}
		}
		bucket_unlock(p);
		free(l);
		free(c);
		return rc ? refuse(s, rc) : 0;
	}
	rc = admit_locked(s, g, p, true, now);
	ttl = p->child_ttl_ms ? p->child_ttl_ms : s->lim.default_ttl_ms;
	if (rc == 0 && ttl && lease_ensure(s, &c->node)) {
		admit_undo(s, p, true);
		rc = -ENOMEM;
	}
	/* The last step that can fail: nothing else is undone after it. */
	if (rc == 0)
		rc = link_reserve_locked(s, g, p, true);
	if (rc == 0) {
		meta_inherit(&c->node, &c->meta, &p->node, &p->meta, false);
		lock(stripe(s, c), LOCK_STRIPE);
		link_attach_locked(p, l);
		unlock(stripe(s, c), LOCK_STRIPE);
		link_insert_locked(s, g, p, l, true);
	}
	if (rc == 0) {
		store_node_ref(&c->node);          /* the caller's */
		atomic_fetch_add(&s->admissions, 1);
		if (ttl) {
			lease_of(s, &c->node)->ttl_ms = ttl;
			lease_set(s, &c->node, now + ttl);
		}
		emit_link(s, g, STORE_OP_CREATE, false, p, name, c, 0);
		if (attr) {
			lock(stripe(s, c), LOCK_STRIPE);
			attr_locked(s, &c->node, attr);
			unlock(stripe(s, c), LOCK_STRIPE);
		}
	}
	bucket_unlock(p);
	if (rc) {
		lease_release(s, &c->node);
		free(l);
		free(c);
		return refuse(s, rc);
	}
	*out = &c->node;
	*created = true;
	return 0;
}

int child_unlink(struct store *s, struct given *g, struct store_node *parent, const char *name)
{
	struct parent *p = as_parent(parent);
	struct child *expired = NULL;
	struct link *l = NULL;
	uint64_t now = now_of(s, g);
	int rc = 0;

	if (!p)
		return parent->kind == STORE_CHILD ? -ENOTDIR : -EPERM;
	bucket_lock(p);
	snap_parent_cow(s, p);
	if (gone(s, parent, now))
		rc = -ESTALE;
	else
		l = link_find_locked(s, p, name, now, &expired);
	if (!rc && !l)
		rc = -ENOENT; /* an expired child is gone already */
	if (!rc)
		link_remove_locked(s, g, p, l);
	bucket_unlock(p);
	if (expired)
		expired_reap(s, g, &expired, now);
	if (rc)
		return refuse(s, rc);
	link_free(s, l);
	return 0;
}

int child_link(struct store *s, struct given *g, struct store_node *child,
	       struct store_node *parent, const char *name,
	       struct store_attr *attr)
{
	struct parent *p = as_parent(parent);
	struct child *c = as_child(child), *expired = NULL;
	struct link *l, *old;
	struct tenant *t;
	uint64_t now = now_of(s, g);
	int rc = 0;

	if (!c || !p)
		return -EPERM;
	if (gone(s, child, now) || gone(s, parent, now))
		return refuse(s, -ESTALE);
	lock(stripe(s, c), LOCK_STRIPE);
	t = c->node.nlink ? child_tenant(c) : NULL;
	unlock(stripe(s, c), LOCK_STRIPE);
	if (!t)
		return refuse(s, -ESTALE);
	if (t != p->tenant)
		return -EXDEV;
	l = link_new(name, c);
	if (!l)
		return -ENOMEM;
retry:
	bucket_lock(p);
	snap_parent_cow(s, p);
	old = link_find_locked(s, p, name, now, &expired);
	if (expired) {
		bucket_unlock(p);
		expired_reap(s, g, &expired, now);
		goto retry;
	}
	if (gone(s, parent, now))
		rc = -ESTALE;
	else if (old)
		rc = -EEXIST;
	else
		rc = admit_locked(s, g, p, false, now);
	if (rc == 0)
		rc = link_reserve_locked(s, g, p, false);
	if (rc == 0) {
		/* The state must still live, checked under its stripe: a
		 * concurrent last unlink either ran first (stale) or will
		 * see this link. */
		lock(stripe(s, c), LOCK_STRIPE);
		if (c->node.nlink == 0 || is_expired(s, &c->node, now))
			rc = -ESTALE;
		if (rc == 0) {
			snap_state_cow(s, c);
			link_attach_locked(p, l);
			c->meta.ctime = wall_now(g);
			/* The source: the name the state gained before. */
			emit_from_locked(s, g, STORE_OP_LINK, c, l, l->snext);
			if (attr)
				attr_locked(s, &c->node, attr);
		}
		unlock(stripe(s, c), LOCK_STRIPE);
		if (rc)
			admit_undo(s, p, false);
	}
	if (rc == 0) {
		link_insert_locked(s, g, p, l, false);
		store_node_ref(&c->node); /* the link's */
		atomic_fetch_add(&s->admissions, 1);
	}
	bucket_unlock(p);
	if (rc) {
		free(l);
		return refuse(s, rc);
	}
	return 0;
}

/*
 * Links @x and @y trade states (both bucket locks held), in one critical
 * section of both states' stripes (the lower stripe first), so neither
 * state is ever seen counting a link it cannot find; the exchange line
 * (destination @y, source @x) is appended in it.
 */
static void links_exchange_locked(struct store *s, struct given *g, struct link *x,
				  struct link *y)
{
	struct child *cx = x->child, *cy = y->child;
	pthread_mutex_t *mx = stripe(s, cx), *my = stripe(s, cy);

	store_assert_held(LOCK_PARENT);
	lock(mx < my ? mx : my, LOCK_STRIPE);
	if (mx != my)
		lock(mx < my ? my : mx, LOCK_STRIPE);
	if (x != y) { /* else a name exchanged with itself */
		LL_DELETE2(cx->slinks, x, snext);
		LL_DELETE2(cy->slinks, y, snext);
		x->child = cy;
		y->child = cx;
		LL_PREPEND2(cy->slinks, x, snext);
		LL_PREPEND2(cx->slinks, y, snext);
	}
	emit_from_locked(s, g, STORE_OP_EXCHANGE, y->child, y, x);
	if (mx != my)
		unlock(mx < my ? my : mx, LOCK_STRIPE);
	unlock(mx < my ? mx : my, LOCK_STRIPE);
}

int child_rename(struct store *s, struct given *g, struct store_node *from, const char *name,
		 struct store_node *to, const char *to_name, unsigned flags)
{
	struct parent *a = as_parent(from), *b = as_parent(to);
	struct link *src = NULL, *dst = NULL, *moved = NULL;
	struct child *replaced = NULL, *expired = NULL, *c;
	uint64_t now = now_of(s, g);
	bool same = false;
	int rc = 0;

	if (!a || !b)
		return -EPERM; /* tenants and parents cannot be renamed */
	if (gone(s, from, now) || gone(s, to, now))
		return refuse(s, -ESTALE);
	if (a->tenant != b->tenant)
		return -EXDEV;
	if ((flags & STORE_RENAME_EXCHANGE) && (flags & STORE_RENAME_NOREPLACE))
		return -EINVAL;
	moved = link_new(to_name, NULL);
	if (!moved)
		return -ENOMEM;
retry:
	lock_pair(a, b);
	snap_parent_cow(s, a);
	snap_parent_cow(s, b);
	if (gone(s, &a->node, now) || gone(s, &b->node, now))
		rc = -ESTALE;
	if (!rc) {
		src = link_find_locked(s, a, name, now, &expired);
		if (!expired)
			dst = link_find_locked(s, b, to_name, now, &expired);
		if (expired) {
			unlock_pair(a, b);
			expired_reap(s, g, &expired, now);
			goto retry;
		}
		if (!src)
			rc = -ENOENT;
		else if (flags & STORE_RENAME_EXCHANGE)
			rc = dst ? 0 : -ENOENT;
		else if (dst && (flags & STORE_RENAME_NOREPLACE))
			rc = -EEXIST;
		else if (dst && dst->child == src->child)
			same = true; /* POSIX: two links to one state: no-op */
	}
	if (rc || same)
		goto out;
	if (draining(s, g, a->tenant)) {
		rc = -EROFS;
		goto out;
	}
	c = src->child;
	if (flags & STORE_RENAME_EXCHANGE) {
		links_exchange_locked(s, g, src, dst);
		touch_dir(&a->meta, g);
		touch_dir(&b->meta, g);
		goto out;
	}
	if (dst) {
		/* The destination entry takes the source's state: no
		 * allocation, so nothing can fail half-way.  The replaced
		 * state's unlink line comes first. */
		replaced = dst->child; /* the link's reference, dropped last */
		state_unlink_locked(s, g, dst, STORE_OP_UNLINK);
		dst->child = c;
		bucket_del(a, src);
		lock(stripe(s, c), LOCK_STRIPE);
		LL_PREPEND2(c->slinks, dst, snext);
		LL_DELETE2(c->slinks, src, snext);
		c->meta.ctime = wall_now(g);
		emit_from_locked(s, g, STORE_OP_RENAME, c, dst, src);
		unlock(stripe(s, c), LOCK_STRIPE);
		a->nlinks--;
		gauge_sub(&s->links_n, 1, "links");
		gauge_sub(&a->tenant->links_n, 1, "tenant links");
	} else {
		/* Admission at the destination: it gains an entry. */
		if (a != b && s->lim.parent_quota &&
		    b->nlinks + 1 > s->lim.parent_quota) {
			rc = -EDQUOT;
			goto out;
		}
		moved->child = c;
		moved->parent = b;
		if (bucket_add(b, moved)) {
			rc = -ENOMEM;
			goto out;
		}
		b->nlinks++;
		bucket_del(a, src);
		a->nlinks--;
		lock(stripe(s, c), LOCK_STRIPE);
		LL_DELETE2(c->slinks, src, snext);
		LL_PREPEND2(c->slinks, moved, snext);
		c->meta.ctime = wall_now(g);
		emit_from_locked(s, g, STORE_OP_RENAME, c, moved, src);
		unlock(stripe(s, c), LOCK_STRIPE);
		moved = NULL;
	}
	touch_dir(&a->meta, g);
	touch_dir(&b->meta, g);
	free(src); /* its state reference moved with the entry */
out:
	unlock_pair(a, b);
	free(moved);
	if (replaced)
		store_node_unref(s, &replaced->node);
	return rc ? refuse(s, rc) : 0;
}

