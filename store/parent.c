/*
 * parent.c - parents: a member joins (mkdir in a tenant), leaves (rmdir),
 * departs (.depart, even before it joined) or expires, and the mkdir and
 * rmdir that reach tenants and parents alike.
 *
 * What it owns
 * ------------
 * A tenant's parent table (tenant->parents, name -> parent, under the
 * tenant's lock) and each parent's generation: 1 on a first join, the
 * departed tombstone's plus one on a rejoin (tomb.c), so a member's
 * incarnations are told apart.  A parent leaves in one critical section
 * of its bucket: it is marked dead, every link is taken out of it
 * (bucket_clear_locked, the cascade), it leaves the table, and its
 * tombstone is filed, all before the tenant's lock is let go; so no one
 * sees a departed parent with children, or a departed name without its
 * tombstone.  An expiry leaves the same way, tombstone included, even when
 * the tombstone pool is full (an expiry cannot be refused).
 *
 * Locks
 * -----
 * Every transition holds the world lock shared, then the tenant's lock
 * (LOCK_TENANT), then the bucket's (LOCK_PARENT), then, during the
 * cascade, each state's stripe (LOCK_STRIPE) in turn.  A parent found
 * past its deadline is expired under the tenant's lock on the way
 * (parent_find_locked); what it held is freed after the lock is let go
 * (reaped_free).  parent_unhook_locked() expects both the tenant's and
 * the bucket's lock, and lets go of the bucket's; parent_remove_locked(),
 * parent_expire_locked() and parent_find_locked() expect the tenant's;
 * may_remove_parent_locked() expects both.
 */
#include "store/internal.h"

#include <errno.h>
#include <sys/stat.h>

/*
 * Parent @p leaves (t->lock and p->lock held; p->lock is released): one
 * critical section of its bucket marks it departed and clears it; it
 * leaves the tenant's table.  The caller has placed the tombstone and
 * frees the returned links and the table's reference on @p after
 * unlocking.
 */
struct ptab parent_unhook_locked(struct store *s, struct given *g, struct tenant *t,
				 struct parent *p)
{
	struct ptab links;

	store_assert_held(LOCK_TENANT);
	store_assert_held(LOCK_PARENT);
	snap_parent_cow(s, p);
	atomic_store(&p->node.dead, true);
	links = bucket_clear_locked(s, g, p);
	/* After its links went: a state frozen for a snapshot meanwhile
	 * still tells an expired parent's link by its deadline. */
	lease_clear(s, &p->node);
	bucket_unlock(p);
	HASH_DEL(t->parents, p);
	gauge_sub(&t->parents_n, 1, "tenant parents");
	gauge_sub(&s->parents_n, 1, "parents");
	touch_dir(&t->meta, g);
	return links;
}

/* As parent_unhook_locked(), taking the bucket's lock (t->lock held). */
struct ptab parent_remove_locked(struct store *s, struct given *g, struct tenant *t,
				 struct parent *p)
{
	store_assert_held(LOCK_TENANT);
	bucket_lock(p);
	return parent_unhook_locked(s, g, t, p);
}

/*
 * Could @cred remove parent @p of @t with what it holds by hand on
 * Linux, emptying it first (t->lock and p->lock held)?  The tenant's
 * sticky bit; then, when @p has a child not past its deadline at @now,
 * write and search permission on @p, and @p's sticky bit for each child.
 * No @cred, or root: yes.
 */
bool may_remove_parent_locked(struct store *s, struct tenant *t,
			      struct parent *p,
			      const struct store_cred *cred, uint64_t now)
{
	const struct meta *pm = &p->meta;
	const unsigned pmode = p->node.mode;
	struct link *l;
	uint32_t i;
	bool wx, sticky;

	store_assert_held(LOCK_TENANT);
	store_assert_held(LOCK_PARENT);
	if (!cred || cred->uid == 0)
		return true;
	if (!store_cred_sticky_ok(cred, t->meta.uid, t->node.mode, pm->uid))
		return false;
	wx = store_cred_may(cred, pm->uid, pm->gid, pmode,
			    STORE_MAY_WRITE | STORE_MAY_EXEC);
	sticky = (pmode & S_ISVTX) && cred->uid != pm->uid;
	if (wx && !sticky)
		return true; /* may remove any child */
	ptab_for_each(&p->links, i, l) {
		struct child *c = l->child;
		uid_t owner;

		if (is_expired(s, &c->node, now))
			continue; /* gone already, reaped or not */
		if (!wx)
			return false; /* not empty */
		lock(stripe(s, c), LOCK_STRIPE);
		owner = c->meta.uid;
		unlock(stripe(s, c), LOCK_STRIPE);
		if (owner != cred->uid)
			return false; /* sticky: only its own children */
	}
	return true;
}

/*
 * Parent @p has passed its deadline (t->lock held): it leaves as by
 * rmdir, cascade and tombstone.  An expiry cannot be refused, so when the
 * pool (or the tenant's share of it) is full its tombstone is kept
 * anyway: the pool overshoots by at most the parents that expire while
 * it is full, and rmdir stays refused until it is back under.  Returns
 * the detached links.
 */
static struct ptab parent_expire_locked(struct store *s, struct given *g, struct tenant *t,
					struct parent *p, uint64_t now)
{
	struct tomb *tb = tomb_new(p->name);
	struct ptab links;

	store_assert_held(LOCK_TENANT);
	if (tb) {
		atomic_fetch_add(&s->tombs_n, 1);
		atomic_fetch_add(&t->tombs_n, 1);
		if (tomb_insert_locked(s, t, tb, p->generation, now))
			free(tb);
	}
	atomic_fetch_add(&s->expiries, 1);
	atomic_fetch_add(&s->leaves, 1);
	links = parent_remove_locked(s, g, t, p);
	/* After the cascade: see "Event order" in events.c. */
	emit(s, g, STORE_OP_EXPIRE, true, &p->node, t, p->name, NULL,
	     (int64_t)p->generation, -1);
	return links;
}

/*
 * The live parent called @name in @t at @now (t->lock held), reaping an
 * expired one on the way.  *@reaped collects what to free after unlock.
 */
static struct parent *parent_find_locked(struct store *s, struct given *g, struct tenant *t,
					 const char *name, uint64_t now,
					 struct parent **reaped,
					 struct ptab *links)
{
	struct parent *p;

	store_assert_held(LOCK_TENANT);
	HASH_FIND_STR(t->parents, name, p);
	if (p && is_expired(s, &p->node, now)) {
		*links = parent_expire_locked(s, g, t, p, now);
		*reaped = p;
		p = NULL;
	}
	return p;
}

static void reaped_free(struct store *s, struct parent *p, struct ptab *links)
{
	if (p) {
		links_free(s, links);
		store_node_unref(s, &p->node);
	}
}

int parent_join(struct store *s, struct given *g, struct tenant *t, const char *name,
		       const struct store_owner *owner, struct store_node **out,
		       struct store_attr *attr)
{
	struct parent *p, *old, *reaped = NULL;
	struct ptab rlinks = { 0 };
	struct tomb *tb;
	uint64_t now = now_of(s, g);
	int rc = 0;

	p = st_calloc(1, sizeof(*p));
	if (!p || !(p->name = st_strdup(name))) {
		free(p);
		return -ENOMEM;
	}
	node_init(&p->node, ino_alloc(s, g, 1), STORE_PARENT);
	pthread_mutex_init(&p->lock, NULL);
	meta_init(&p->node, &p->meta, owner, g);
	atomic_init(&p->snap_epoch, s->snap_epochs);
	p->tenant = t;

	lock(&t->lock, LOCK_TENANT);
	old = parent_find_locked(s, g, t, name, now, &reaped, &rlinks);
	if (is_dead(&t->node))
		rc = -ESTALE;
	else if (draining(s, g, t))
		rc = -EROFS;
	else if (old)
		rc = -EEXIST;
	else if (!reserve(&s->parents_n, 1, s->lim.max_parents))
		rc = -ENOSPC;
	else if (!reserve(&t->parents_n, 1, s->lim.tenant_max_parents)) {
		gauge_sub(&s->parents_n, 1, "parents");
		rc = -EDQUOT;
	}
	if (rc == 0) {
		tb = tomb_find_locked(s, t, name, now);
		p->generation = tb ? tb->generation + 1 : 1;
		meta_inherit(&p->node, &p->meta, &t->node, &t->meta, true);
		hash_oom = 0;
		HASH_ADD_KEYPTR(hh, t->parents, p->name, strlen(p->name), p);
		if (hash_oom)
			rc = -ENOMEM;
		if (rc) {
			gauge_sub(&t->parents_n, 1, "tenant parents");
			gauge_sub(&s->parents_n, 1, "parents");
		} else {
			/* Without p->lock: p is found only under t->lock. */
			if (attr)
				attr_locked(s, &p->node, attr);
			/* An explicit rejoin clears the tombstone. */
			if (tb)
				tomb_drop_locked(s, t, tb);
			atomic_fetch_add(&s->joins, 1);
			store_node_ref(&t->node); /* p->tenant */
			store_node_ref(&p->node); /* the caller's */
			touch_dir(&t->meta, g);
			emit(s, g, STORE_OP_JOIN, false, &p->node, t, p->name, NULL,
			     (int64_t)p->generation, -1);
		}
	}
	unlock(&t->lock, LOCK_TENANT);
	reaped_free(s, reaped, &rlinks);
	if (rc) {
		p->tenant = NULL;
		pthread_mutex_destroy(&p->lock);
		free(p->name);
		free(p);
		return refuse(s, rc);
	}
	*out = &p->node;
	return 0;
}

/*
 * Member left (rmdir, .depart): in one critical section of the bucket,
 * mark it departed and remove every child link; keep a tombstone.  With
 * @must_exist false a missing parent still gets its tombstone.  With
 * @cred the cascade must be one @cred could do by hand (-EACCES).
 */
int parent_leave(struct store *s, struct given *g, struct tenant *t, const char *name,
			bool must_exist, const struct store_cred *cred)
{
	struct parent *p, *reaped = NULL;
	struct tomb *tb, *newtb;
	struct ptab links = { 0 }, rlinks = { 0 };
	uint64_t now = now_of(s, g);
	enum store_op op = must_exist ? STORE_OP_LEAVE : STORE_OP_DEPART;
	int rc = 0, full;

	newtb = tomb_new(name);
	if (!newtb)
		return -ENOMEM;
	for (int attempt = 0;; attempt++) {
		lock(&t->lock, LOCK_TENANT);
		if (is_dead(&t->node)) {
			rc = -ESTALE;
			break;
		}
		p = parent_find_locked(s, g, t, name, now, &reaped, &rlinks);
		tb = tomb_find_locked(s, t, name, now);
		if (!p && must_exist) {
			rc = -ENOENT;
			break;
		}
		if (!p && tb) {
			/* Departed again before a rejoin: refresh the age. */
			tomb_refresh_locked(s, tb, now);
			emit(s, g, op, true, NULL, t, name, NULL,
			     (int64_t)tb->generation, -1);
			break;
		}
		full = tomb_reserve_locked(s, t);
		if (full == 0)
			break;
		unlock(&t->lock, LOCK_TENANT);
		reaped_free(s, reaped, &rlinks);
		reaped = NULL;
		/* Due tombstones (the tenant's among them) make room. */
		if (attempt > 0 ||
		    !tombs_reap(s, now, (unsigned)s->lim.max_tombstones)) {
			free(newtb);
			return refuse(s, full);
		}
	}
	if (rc || (!p && tb)) {
		unlock(&t->lock, LOCK_TENANT);
		reaped_free(s, reaped, &rlinks);
		free(newtb);
		return rc ? refuse(s, rc) : 0;
	}
	/* The bucket stays locked from the check to its removal. */
	if (p) {
		bucket_lock(p);
		if (!may_remove_parent_locked(s, t, p, cred, now)) {
			bucket_unlock(p);
			gauge_sub(&t->tombs_n, 1, "tenant tombstones");
			gauge_sub(&s->tombs_n, 1, "tombstones");
			rc = -EACCES;
		}
	}
	if (rc == 0) {
		rc = tomb_insert_locked(s, t, newtb, p ? p->generation : 0, now);
		if (rc && p)
			bucket_unlock(p);
	}
	if (rc) {
		unlock(&t->lock, LOCK_TENANT);
		reaped_free(s, reaped, &rlinks);
		free(newtb);
		return rc;
	}
	if (p) {
		links = parent_unhook_locked(s, g, t, p);
		atomic_fetch_add(&s->leaves, 1);
	}
	/* After the cascade: a publication that reached one of P's states
	 * first is reported before this line ("Event order", events.c). */
	emit(s, g, op, op == STORE_OP_DEPART, p ? &p->node : NULL, t, name, NULL,
	     p ? (int64_t)p->generation : 0, -1);
	unlock(&t->lock, LOCK_TENANT);
	reaped_free(s, reaped, &rlinks);
	reaped_free(s, p, &links);
	return 0;
}

/*
 * The reaper's way in for a parent: expire @p if it is still the live
 * parent of its name and still past its deadline.  Returns 1 if it left.
 */
int parent_expire(struct store *s, struct given *g, struct parent *p, uint64_t now)
{
	struct tenant *t = p->tenant;
	struct parent *cur;
	struct ptab links = { 0 };
	int done = 0;

	lock(&t->lock, LOCK_TENANT);
	HASH_FIND_STR(t->parents, p->name, cur);
	if (cur == p && !is_dead(&p->node) && is_expired(s, &p->node, now)) {
		links = parent_expire_locked(s, g, t, p, now);
		done = 1;
	}
	unlock(&t->lock, LOCK_TENANT);
	if (done)
		reaped_free(s, p, &links);
	return done;
}

/* Contract in engine.h. */
int tenant_each_parent(struct store *s, struct tenant *t,
		       int (*fn)(void *arg, struct store_node *parent),
		       void *arg)
{
	struct parent *p;
	int rc = 0;

	(void)s;
	lock(&t->lock, LOCK_TENANT);
	for (p = t->parents; p && rc == 0; p = p->hh.next)
		rc = fn(arg, &p->node);
	unlock(&t->lock, LOCK_TENANT);
	return rc;
}
