/*
 * store.c - the authoritative in-memory store.
 *
 * Authority
 * ---------
 * The hierarchy is the one authority (seed 000):
 *
 *   store->tenants   name -> tenant          guarded by store->lock
 *   tenant->parents  name -> parent bucket   guarded by tenant->lock
 *   tenant->tombs    name -> tombstone       guarded by tenant->lock
 *   parent->links    name -> link -> state   guarded by parent->lock
 *   state fields     content, version, nlink guarded by the state's stripe
 *
 * A node is alive exactly while it is reachable from the hierarchy; the
 * transition that unhooks it sets node->dead inside the same critical
 * section, so "dead" and "unreachable" are never seen apart.
 *
 * No lock is held across a call out of the store.  Counters are atomics
 * updated by the transition that changes the fact they count, inside its
 * critical section; a counter that would go below zero aborts (a bug).
 *
 * Ceilings and quotas are reserved (compare-and-swap against the limit)
 * after every other check and before the insert, and released if a later
 * step fails, so a refused admission changes nothing.  A tenant's share
 * of a ceiling (tenant_max_*) is one more reservation, on the tenant's
 * own gauge, right after the store's: every store-wide resource a tenant
 * can fill (parents, states, bytes, tombstones) is counted per tenant
 * before it is taken, so one tenant cannot take it all from the others.
 */
#include "store/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

__thread int hash_oom;

/* Helpers ---------------------------------------------------------------- */

int refuse(struct store *s, int rc)
{
	int r = -1;

	switch (rc) {
	case -ENOSPC: r = STORE_REFUSED_CAPACITY; break;
	case -EDQUOT: r = STORE_REFUSED_QUOTA; break;
	case -EFBIG: r = STORE_REFUSED_PAYLOAD; break;
	case -EROFS: r = STORE_REFUSED_DRAINING; break;
	case -EEXIST: r = STORE_REFUSED_EXISTS; break;
	case -ESTALE: r = STORE_REFUSED_STALE; break;
	case -EAGAIN: r = STORE_REFUSED_CONFLICT; break;
	case -ENOENT: r = STORE_REFUSED_GONE; break;
	}
	if (r >= 0)
		atomic_fetch_add(&s->refused[r], 1);
	return rc;
}

/* Lifecycle ------------------------------------------------------------------ */

void store_limits_default(struct store_limits *l)
{
	memset(l, 0, sizeof(*l));
	l->max_tenants = 1024;
	l->max_parents = 65536;
	l->max_children = 1048576;
	l->max_bytes = 1073741824;
	l->max_payload = 65536;
	l->max_name = 255;
	l->max_tombstones = 65536;
	l->tombstone_ttl_ms = 600 * 1000;
	l->parent_quota = 0;
	l->tenant_quota = 0;
	l->tenant_max_parents = STORE_SHARE_AUTO;
	l->tenant_max_children = STORE_SHARE_AUTO;
	l->tenant_max_bytes = STORE_SHARE_AUTO;
	l->tenant_max_tombstones = STORE_SHARE_AUTO;
	l->default_ttl_ms = 0;
	l->drain_window_ms = 30 * 1000;
	l->max_snapshot_bytes = 512u << 20;
	l->user_max_snapshot_bytes = STORE_SHARE_AUTO;
	l->testclock = false;
	l->cache_timeout_ms = 3600 * 1000;
	l->event_log = STORE_EVENT_LOG;
}

/* A tenant's share @v of @ceiling as the store keeps it. */
static uint64_t share_of(uint64_t v, uint64_t ceiling)
{
	return v == STORE_SHARE_AUTO ? ceiling / 2 + ceiling % 2 : v;
}

static uint64_t monotonic_ms(void *arg)
{
	struct timespec ts;

	(void)arg;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int store_new(const struct store_limits *limits,
	      const struct store_clock *clock, struct store **out)
{
	struct store *s;
	struct store_owner root_owner = { .uid = 0, .gid = 0, .mode = 0755 };

	if (!limits || !out || !limits->max_name || !limits->event_log)
		return -EINVAL;
	/* Deadlines are now + these: bounded, they cannot wrap. */
	if (limits->tombstone_ttl_ms > STORE_DURATION_MAX_MS ||
	    limits->default_ttl_ms > STORE_DURATION_MAX_MS ||
	    limits->drain_window_ms > STORE_DURATION_MAX_MS ||
	    limits->cache_timeout_ms > STORE_DURATION_MAX_MS)
		return -EINVAL;
	s = st_calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->lim = *limits;
	s->lim.tenant_max_parents = share_of(limits->tenant_max_parents,
					     limits->max_parents);
	s->lim.tenant_max_children = share_of(limits->tenant_max_children,
					      limits->max_children);
	s->lim.tenant_max_bytes = share_of(limits->tenant_max_bytes,
					   limits->max_bytes);
	s->lim.tenant_max_tombstones = share_of(limits->tenant_max_tombstones,
						limits->max_tombstones);
	s->lim.user_max_snapshot_bytes =
		share_of(limits->user_max_snapshot_bytes,
			 limits->max_snapshot_bytes);
	s->clock.now_ms = clock && clock->now_ms ? clock->now_ms : monotonic_ms;
	s->clock.arg = clock ? clock->arg : NULL;
	if (getrandom(&s->instance, sizeof(s->instance), 0) !=
	    (ssize_t)sizeof(s->instance))
		s->instance = (uint64_t)wall_now() ^ (uint64_t)getpid();
	s->born_ms = s->clock.now_ms(s->clock.arg);
	atomic_init(&s->state, STORE_READY);
	pthread_rwlockattr_t wa;

	pthread_rwlockattr_init(&wa);
	pthread_rwlockattr_setkind_np(&wa,
		PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&s->world, &wa);
	pthread_rwlockattr_destroy(&wa);
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->tomb_lock, NULL);
	pthread_mutex_init(&s->heap_lock, NULL);
	pthread_mutex_init(&s->snap_taker, NULL);
	pthread_mutex_init(&s->hold_lock, NULL);
	/* Address space for the ceilings; pages are touched only as the
	 * heap grows. */
	s->heap_cap = s->lim.max_parents + s->lim.max_children;
	s->heap = st_malloc(s->heap_cap * sizeof(*s->heap));
	s->lease_dir = st_calloc(LEASE_CHUNKS, sizeof(*s->lease_dir));
	s->events = evlog_new(s->lim.event_log);
	if (!s->heap || !s->lease_dir || !s->events) {
		free(s->heap);
		free(s->lease_dir);
		evlog_free(s->events);
		free(s);
		return -ENOMEM;
	}
	for (int i = 0; i < STRIPES; i++)
		pthread_mutex_init(&s->stripes[i], NULL);

	node_init(&s->root, STORE_ROOT_INO, STORE_ROOT);
	specials_init(s->root_special, &s->root);
	meta_init(&s->root, &s->root_meta, &root_owner);
	atomic_init(&s->next_ino, STORE_ROOT_INO + 1 + STORE_NSPECIAL);
	for (int i = 0; i < INO_SHARDS; i++)
		pthread_mutex_init(&s->shards[i].lock, NULL);
	*out = s;
	return 0;
}

void store_free(struct store *s)
{
	struct tenant *t, *tt;
	struct parent *p, *pp;

	if (!s)
		return;
	/* Drop the heap's references, then what the kernel still held. */
	for (size_t i = 0; i < s->heap_n; i++) {
		lease_of(s, s->heap[i])->heap_idx = NOT_IN_HEAP;
		store_node_unref(s, s->heap[i]);
	}
	free(s->heap);
	evlog_free(s->events);
	for (int i = 0; i < INO_SHARDS; i++) {
		struct ptab *tab = &s->shards[i].tab;
		struct store_node *n;
		uint32_t k;

		ptab_for_each(tab, k, n)
			store_node_unref(s, n);
		ptab_free(tab);
		pthread_mutex_destroy(&s->shards[i].lock);
	}
	HASH_ITER(hh, s->tenants, t, tt) {
		HASH_DEL(s->tenants, t);
		HASH_ITER(hh, t->parents, p, pp) {
			HASH_DEL(t->parents, p);
			links_free(s, &p->links);
			store_node_unref(s, &p->node);
		}
		tombs_free(t);
		store_node_unref(s, &t->node);
	}
	for (int i = 0; i < STRIPES; i++)
		pthread_mutex_destroy(&s->stripes[i]);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->tomb_lock);
	pthread_mutex_destroy(&s->heap_lock);
	pthread_mutex_destroy(&s->snap_taker);
	{
		struct snap_hold *h, *hh;

		HASH_ITER(hh, s->holds, h, hh) {
			HASH_DEL(s->holds, h);
			free(h);
		}
	}
	pthread_mutex_destroy(&s->hold_lock);
	pthread_rwlock_destroy(&s->world);
	for (uint32_t i = 0; i < LEASE_CHUNKS && s->lease_dir[i]; i++)
		free(s->lease_dir[i]);
	free(s->lease_dir);
	free(s);
}

const struct store_limits *store_limits(const struct store *s)
{
	return &s->lim;
}

uint64_t store_instance_id(const struct store *s)
{
	return s->instance;
}

uint64_t store_now_ms(const struct store *s)
{
	return s->clock.now_ms(s->clock.arg);
}

uint64_t store_uptime_ms(const struct store *s)
{
	return store_now_ms(s) - s->born_ms;
}

enum store_state store_state(const struct store *s)
{
	return (enum store_state)atomic_load(&s->state);
}

/* Tenants ----------------------------------------------------------------------- */

static int tenant_create(struct store *s, const char *name,
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
	node_init(&t->node, ino_alloc(s, 1 + STORE_NSPECIAL), STORE_TENANT);
	specials_init(t->special, &t->node);
	pthread_mutex_init(&t->lock, NULL);
	pthread_mutex_init(&t->acl_lock, NULL);
	meta_init(&t->node, &t->meta, owner);
	t->snap_epoch = s->snap_epochs; /* not in a snapshot being taken */

	lock(&s->lock, LOCK_STORE);
	HASH_FIND_STR(s->tenants, name, old);
	if (draining(s, NULL))
		rc = -EROFS;
	else if (old)
		rc = -EEXIST;
	else if (!reserve(&s->tenants_n, 1, s->lim.max_tenants))
		rc = -ENOSPC;
	if (rc == 0) {
		/* Not reachable yet: its owner is still only ours to set. */
		meta_inherit(&t->node, &t->meta, &s->root, &s->root_meta, true);
		rc = entry_remember(s, &t->node, attr);
		if (rc == 0) {
			hash_oom = 0;
			HASH_ADD_KEYPTR(hh, s->tenants, t->name,
					strlen(t->name), t);
			if (hash_oom) {
				entry_undo(s, &t->node, attr);
				rc = -ENOMEM;
			}
		}
		if (rc) {
			gauge_sub(&s->tenants_n, 1, "tenants");
		} else {
			/* Without t->lock: t is found only under s->lock. */
			if (attr)
				attr_locked(s, &t->node, attr);
			touch_dir(&s->root_meta);
			store_node_ref(&t->node); /* the caller's */
			emit(s, STORE_OP_JOIN, false, &t->node, t, NULL, NULL,
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
 * Parent @p leaves (t->lock and p->lock held; p->lock is released): one
 * critical section of its bucket marks it departed and clears it; it
 * leaves the tenant's table.  The caller has placed the tombstone and
 * frees the returned links and the table's reference on @p after
 * unlocking.
 */
static struct ptab parent_unhook_locked(struct store *s, struct tenant *t,
					struct parent *p)
{
	struct ptab links;

	store_assert_held(LOCK_TENANT);
	store_assert_held(LOCK_PARENT);
	snap_parent_cow(s, p);
	atomic_store(&p->node.dead, true);
	links = bucket_clear_locked(s, p);
	/* After its links went: a state frozen for a snapshot meanwhile
	 * still tells an expired parent's link by its deadline. */
	lease_clear(s, &p->node);
	bucket_unlock(p);
	HASH_DEL(t->parents, p);
	gauge_sub(&t->parents_n, 1, "tenant parents");
	gauge_sub(&s->parents_n, 1, "parents");
	touch_dir(&t->meta);
	return links;
}

/* As parent_unhook_locked(), taking the bucket's lock (t->lock held). */
static struct ptab parent_remove_locked(struct store *s, struct tenant *t,
					struct parent *p)
{
	store_assert_held(LOCK_TENANT);
	bucket_lock(p);
	return parent_unhook_locked(s, t, p);
}

/*
 * Could @cred remove parent @p of @t with what it holds by hand on
 * Linux, emptying it first (t->lock and p->lock held)?  The tenant's
 * sticky bit; then, when @p has a child not past its deadline at @now,
 * write and search permission on @p, and @p's sticky bit for each child.
 * No @cred, or root: yes.
 */
static bool may_remove_parent_locked(struct store *s, struct tenant *t,
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
 * Remove every parent of @t (t->lock held), cascade included, and its
 * tombstones: the body of a tenant cleanup and of a drain's clear.  With
 * @op each parent's removal is reported as an internal event (so the
 * watch machinery echoes it).  With @plocked the caller holds every
 * bucket's lock; each is released as its parent goes.
 */
void tenant_clear_locked(struct store *s, struct tenant *t,
			 enum store_op op, bool plocked)
{
	struct parent *p, *tmp;

	store_assert_held(LOCK_TENANT);
	HASH_ITER(hh, t->parents, p, tmp) {
		struct ptab links;

		links = plocked ? parent_unhook_locked(s, t, p) :
				  parent_remove_locked(s, t, p);
		/* After the cascade, as every parent's removal line. */
		if (op != NO_EVENT)
			emit(s, op, true, &p->node, t, p->name, NULL,
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
int tenant_lock_for_cascade(struct store *s, struct tenant *t,
			    const struct store_cred *cred)
{
	size_t n = HASH_COUNT(t->parents), live = 0;
	uint64_t now = store_now_ms(s);
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

static int tenant_cleanup(struct store *s, const char *name,
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
	rc = check ? tenant_lock_for_cascade(s, t, cred) : 0;
	if (rc) {
		unlock(&t->lock, LOCK_TENANT);
		unlock(&s->lock, LOCK_STORE);
		return rc;
	}
	atomic_store(&t->node.dead, true);
	HASH_DEL(s->tenants, t);
	gauge_sub(&s->tenants_n, 1, "tenants");
	touch_dir(&s->root_meta);
	if (atomic_load(&t->drain_state) == STORE_DRAINING)
		atomic_fetch_sub(&s->tenants_draining, 1);

	/* The table stays locked until the line (as a drain's clear): a
	 * new tenant of the name joins after it ("Event order"). */
	tenant_clear_locked(s, t, NO_EVENT, check);
	emit(s, STORE_OP_CLEANUP, false, &t->node, t, NULL, NULL, -1, -1);
	unlock(&t->lock, LOCK_TENANT);
	unlock(&s->lock, LOCK_STORE);
	store_node_unref(s, &t->node); /* the table's reference */
	return 0;
}

/* Parents: join, leave, depart, expire -------------------------------------------- */

/*
 * Parent @p has passed its deadline (t->lock held): it leaves as by
 * rmdir, cascade and tombstone.  An expiry cannot be refused, so when the
 * pool (or the tenant's share of it) is full its tombstone is kept
 * anyway: the pool overshoots by at most the parents that expire while
 * it is full, and rmdir stays refused until it is back under.  Returns
 * the detached links.
 */
static struct ptab parent_expire_locked(struct store *s, struct tenant *t,
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
	links = parent_remove_locked(s, t, p);
	/* After the cascade: see "Event order". */
	emit(s, STORE_OP_EXPIRE, true, &p->node, t, p->name, NULL,
	     (int64_t)p->generation, -1);
	return links;
}

/*
 * The live parent called @name in @t at @now (t->lock held), reaping an
 * expired one on the way.  *@reaped collects what to free after unlock.
 */
static struct parent *parent_find_locked(struct store *s, struct tenant *t,
					 const char *name, uint64_t now,
					 struct parent **reaped,
					 struct ptab *links)
{
	struct parent *p;

	store_assert_held(LOCK_TENANT);
	HASH_FIND_STR(t->parents, name, p);
	if (p && is_expired(s, &p->node, now)) {
		*links = parent_expire_locked(s, t, p, now);
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

static int parent_join(struct store *s, struct tenant *t, const char *name,
		       const struct store_owner *owner, struct store_node **out,
		       struct store_attr *attr)
{
	struct parent *p, *old, *reaped = NULL;
	struct ptab rlinks = { 0 };
	struct tomb *tb;
	uint64_t now = store_now_ms(s);
	int rc = 0;

	p = st_calloc(1, sizeof(*p));
	if (!p || !(p->name = st_strdup(name))) {
		free(p);
		return -ENOMEM;
	}
	node_init(&p->node, ino_alloc(s, 1), STORE_PARENT);
	pthread_mutex_init(&p->lock, NULL);
	meta_init(&p->node, &p->meta, owner);
	atomic_init(&p->snap_epoch, s->snap_epochs);
	p->tenant = t;

	lock(&t->lock, LOCK_TENANT);
	old = parent_find_locked(s, t, name, now, &reaped, &rlinks);
	if (is_dead(&t->node))
		rc = -ESTALE;
	else if (draining(s, t))
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
		rc = entry_remember(s, &p->node, attr);
		if (rc == 0) {
			hash_oom = 0;
			HASH_ADD_KEYPTR(hh, t->parents, p->name,
					strlen(p->name), p);
			if (hash_oom) {
				entry_undo(s, &p->node, attr);
				rc = -ENOMEM;
			}
		}
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
			touch_dir(&t->meta);
			emit(s, STORE_OP_JOIN, false, &p->node, t, p->name, NULL,
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
static int parent_leave(struct store *s, struct tenant *t, const char *name,
			bool must_exist, const struct store_cred *cred)
{
	struct parent *p, *reaped = NULL;
	struct tomb *tb, *newtb;
	struct ptab links = { 0 }, rlinks = { 0 };
	uint64_t now = store_now_ms(s);
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
		p = parent_find_locked(s, t, name, now, &reaped, &rlinks);
		tb = tomb_find_locked(s, t, name, now);
		if (!p && must_exist) {
			rc = -ENOENT;
			break;
		}
		if (!p && tb) {
			/* Departed again before a rejoin: refresh the age. */
			tomb_refresh_locked(s, tb, now);
			emit(s, op, true, NULL, t, name, NULL,
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
		links = parent_unhook_locked(s, t, p);
		atomic_fetch_add(&s->leaves, 1);
	}
	/* After the cascade: a publication that reached one of P's states
	 * first is reported before this line (see "Event order"). */
	emit(s, op, op == STORE_OP_DEPART, p ? &p->node : NULL, t, name, NULL,
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
int parent_expire(struct store *s, struct parent *p, uint64_t now)
{
	struct tenant *t = p->tenant;
	struct parent *cur;
	struct ptab links = { 0 };
	int done = 0;

	lock(&t->lock, LOCK_TENANT);
	HASH_FIND_STR(t->parents, p->name, cur);
	if (cur == p && !is_dead(&p->node) && is_expired(s, &p->node, now)) {
		links = parent_expire_locked(s, t, p, now);
		done = 1;
	}
	unlock(&t->lock, LOCK_TENANT);
	if (done)
		reaped_free(s, p, &links);
	return done;
}

static int do_depart(struct store *s, struct store_node *tenant, const char *name,
		     const struct store_cred *cred)
{
	struct tenant *t = as_tenant(tenant);

	if (!t)
		return -EPERM;
	return parent_leave(s, t, name, false, cred);
}

static int do_mkdir(struct store *s, struct store_node *dir, const char *name,
		const struct store_owner *owner, struct store_node **out,
		struct store_attr *attr)
{
	if (is_dead(dir))
		return refuse(s, -ESTALE);
	switch (dir->kind) {
	case STORE_ROOT: return tenant_create(s, name, owner, out, attr);
	case STORE_TENANT:
		return parent_join(s, as_tenant(dir), name, owner, out, attr);
	case STORE_PARENT: return -EPERM;
	default: return -ENOTDIR;
	}
}

static int do_rmdir(struct store *s, struct store_node *dir, const char *name,
		    const struct store_cred *cred)
{
	struct store_node *n;
	int rc;

	switch (dir->kind) {
	case STORE_ROOT:
		return tenant_cleanup(s, name, cred);
	case STORE_TENANT:
		if (is_dead(dir))
			return refuse(s, -ESTALE);
		return parent_leave(s, as_tenant(dir), name, true, cred);
	case STORE_PARENT:
		rc = store_lookup(s, dir, name, &n);
		if (rc)
			return rc;
		store_node_unref(s, n);
		return -ENOTDIR;
	default:
		return -ENOTDIR;
	}
}

/* Children: admission, removal, link, rename, expiry ------------------------------- */

/* Emit @op for link @l of bucket @p (p->lock held). */
static void emit_link(struct store *s, enum store_op op, bool internal,
		      struct parent *p, const char *name, struct child *c,
		      int64_t version)
{
	emit(s, op, internal, &c->node, p->tenant, p->name, name,
	     (int64_t)p->generation, version);
}

/*
 * State @c has passed its deadline: remove it as by unlink from every
 * parent that links it, in one critical section of all those buckets
 * (locked in inode order, then the state's stripe).  No lock held by the
 * caller.  Returns 1 when it expired, 0 when it was renewed or removed
 * meanwhile.
 */
int child_expire(struct store *s, struct child *c, uint64_t now)
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
				touch_dir(&p->meta);
				state_unlink_locked(s, l, STORE_OP_EXPIRE);
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
 * held), in the contract's order: store ready, parent alive, global
 * ceilings, quotas (the tenant's share of max_children among them).  On
 * success the entry is reserved in the tenant quota (and a state in
 * max_children and the tenant's share when @new_state); the caller
 * inserts or calls admit_undo().
 */
static int admit_locked(struct store *s, struct parent *p, bool new_state,
			uint64_t now)
{
	struct tenant *t = p->tenant;

	store_assert_held(LOCK_PARENT);
	if (draining(s, t))
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

void admit_undo(struct store *s, struct parent *p, bool new_state)
{
	gauge_sub(&p->tenant->links_n, 1, "tenant links");
	if (new_state) {
		gauge_sub(&p->tenant->children_n, 1, "tenant children");
		gauge_sub(&s->children_n, 1, "children");
	}
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
static void expired_reap(struct store *s, struct child **c, uint64_t now)
{
	child_expire(s, *c, now);
	store_node_unref(s, &(*c)->node);
	*c = NULL;
}

static int do_create(struct store *s, struct store_node *parent, const char *name,
		 const struct store_owner *owner, bool excl,
		 struct store_node **out, bool *created,
		 struct store_attr *attr)
{
	struct parent *p = as_parent(parent);
	struct child *c, *expired = NULL;
	struct link *l, *old;
	uint64_t now = store_now_ms(s), ttl;
	int rc;

	if (!p)
		return parent->kind == STORE_CHILD ? -ENOTDIR : -EPERM;
	c = st_calloc(1, sizeof(*c));
	l = c ? link_new(name, c) : NULL;
	if (!l) {
		free(c);
		return -ENOMEM;
	}
	node_init(&c->node, ino_alloc(s, 1), STORE_CHILD);
	c->node.epoch = (uint32_t)s->snap_epochs; /* not in a snapshot being taken */
	meta_init(&c->node, &c->meta, owner);
retry:
	bucket_lock(p);
	snap_parent_cow(s, p);
	/* Through a departed or expired parent nothing happens, not even
	 * the reaping of what it held. */
	old = gone(s, &p->node, now) ? NULL :
		link_find_locked(s, p, name, now, &expired);
	if (expired) {
		bucket_unlock(p);
		expired_reap(s, &expired, now);
		goto retry;
	}
	if (old) {
		rc = excl ? -EEXIST : 0;
		if (rc == 0)
			rc = entry_remember(s, &old->child->node, attr);
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
	rc = admit_locked(s, p, true, now);
	ttl = p->child_ttl_ms ? p->child_ttl_ms : s->lim.default_ttl_ms;
	if (rc == 0 && ttl && lease_ensure(s, &c->node)) {
		admit_undo(s, p, true);
		rc = -ENOMEM;
	}
	if (rc == 0)
		rc = link_reserve_locked(s, p, true);
	/* The last step that can fail: nothing else is undone after it. */
	if (rc == 0 && (rc = entry_remember(s, &c->node, attr)) != 0)
		admit_undo(s, p, true);
	if (rc == 0) {
		meta_inherit(&c->node, &c->meta, &p->node, &p->meta, false);
		lock(stripe(s, c), LOCK_STRIPE);
		link_attach_locked(p, l);
		unlock(stripe(s, c), LOCK_STRIPE);
		link_insert_locked(s, p, l, true);
	}
	if (rc == 0) {
		store_node_ref(&c->node);          /* the caller's */
		atomic_fetch_add(&s->admissions, 1);
		if (ttl) {
			lease_of(s, &c->node)->ttl_ms = ttl;
			lease_set(s, &c->node, now + ttl);
		}
		emit_link(s, STORE_OP_CREATE, false, p, name, c, 0);
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

static int do_unlink(struct store *s, struct store_node *parent, const char *name)
{
	struct parent *p = as_parent(parent);
	struct child *expired = NULL;
	struct link *l = NULL;
	uint64_t now = store_now_ms(s);
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
		link_remove_locked(s, p, l);
	bucket_unlock(p);
	if (expired)
		expired_reap(s, &expired, now);
	if (rc)
		return refuse(s, rc);
	link_free(s, l);
	return 0;
}

static int do_link(struct store *s, struct store_node *child,
	       struct store_node *parent, const char *name,
	       struct store_attr *attr)
{
	struct parent *p = as_parent(parent);
	struct child *c = as_child(child), *expired = NULL;
	struct link *l, *old;
	struct tenant *t;
	uint64_t now = store_now_ms(s);
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
		expired_reap(s, &expired, now);
		goto retry;
	}
	if (gone(s, parent, now))
		rc = -ESTALE;
	else if (old)
		rc = -EEXIST;
	else
		rc = admit_locked(s, p, false, now);
	if (rc == 0)
		rc = link_reserve_locked(s, p, false);
	if (rc == 0) {
		/* The state must still live, checked under its stripe: a
		 * concurrent last unlink either ran first (stale) or will
		 * see this link. */
		lock(stripe(s, c), LOCK_STRIPE);
		if (c->node.nlink == 0 || is_expired(s, &c->node, now))
			rc = -ESTALE;
		else
			rc = entry_remember(s, &c->node, attr);
		if (rc == 0) {
			snap_state_cow(s, c);
			link_attach_locked(p, l);
			c->meta.ctime = wall_now();
			/* The source: the name the state gained before. */
			emit_from_locked(s, STORE_OP_LINK, c, l, l->snext);
			if (attr)
				attr_locked(s, &c->node, attr);
		}
		unlock(stripe(s, c), LOCK_STRIPE);
		if (rc)
			admit_undo(s, p, false);
	}
	if (rc == 0) {
		link_insert_locked(s, p, l, false);
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
static void links_exchange_locked(struct store *s, struct link *x,
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
	emit_from_locked(s, STORE_OP_EXCHANGE, y->child, y, x);
	if (mx != my)
		unlock(mx < my ? my : mx, LOCK_STRIPE);
	unlock(mx < my ? mx : my, LOCK_STRIPE);
}

static int do_rename(struct store *s, struct store_node *from, const char *name,
		 struct store_node *to, const char *to_name, unsigned flags)
{
	struct parent *a = as_parent(from), *b = as_parent(to);
	struct link *src = NULL, *dst = NULL, *moved = NULL;
	struct child *replaced = NULL, *expired = NULL, *c;
	uint64_t now = store_now_ms(s);
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
			expired_reap(s, &expired, now);
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
	if (draining(s, a->tenant)) {
		rc = -EROFS;
		goto out;
	}
	c = src->child;
	if (flags & STORE_RENAME_EXCHANGE) {
		links_exchange_locked(s, src, dst);
		touch_dir(&a->meta);
		touch_dir(&b->meta);
		goto out;
	}
	if (dst) {
		/* The destination entry takes the source's state: no
		 * allocation, so nothing can fail half-way.  The replaced
		 * state's unlink line comes first. */
		replaced = dst->child; /* the link's reference, dropped last */
		state_unlink_locked(s, dst, STORE_OP_UNLINK);
		dst->child = c;
		bucket_del(a, src);
		lock(stripe(s, c), LOCK_STRIPE);
		LL_PREPEND2(c->slinks, dst, snext);
		LL_DELETE2(c->slinks, src, snext);
		c->meta.ctime = wall_now();
		emit_from_locked(s, STORE_OP_RENAME, c, dst, src);
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
		c->meta.ctime = wall_now();
		emit_from_locked(s, STORE_OP_RENAME, c, moved, src);
		unlock(stripe(s, c), LOCK_STRIPE);
		moved = NULL;
	}
	touch_dir(&a->meta);
	touch_dir(&b->meta);
	free(src); /* its state reference moved with the entry */
out:
	unlock_pair(a, b);
	free(moved);
	if (replaced)
		store_node_unref(s, &replaced->node);
	return rc ? refuse(s, rc) : 0;
}

/* Transitions and scans --------------------------------------------------------- */

int store_depart(struct store *s, struct store_node *tenant, const char *name,
		 const struct store_cred *cred)
{
	return TRANSITION(s, do_depart(s, tenant, name, cred));
}

int store_mkdir(struct store *s, struct store_node *dir, const char *name,
		const struct store_owner *owner, struct store_node **out)
{
	return TRANSITION(s, do_mkdir(s, dir, name, owner, out, NULL));
}

int store_mkdir_entry(struct store *s, struct store_node *dir, const char *name,
		      const struct store_owner *owner, struct store_node **out,
		      struct store_attr *attr)
{
	return TRANSITION(s, do_mkdir(s, dir, name, owner, out, attr));
}

int store_rmdir(struct store *s, struct store_node *dir, const char *name,
		const struct store_cred *cred)
{
	return TRANSITION(s, do_rmdir(s, dir, name, cred));
}

int store_create(struct store *s, struct store_node *parent, const char *name,
		 const struct store_owner *owner, bool excl,
		 struct store_node **out, bool *created)
{
	return TRANSITION(s, do_create(s, parent, name, owner, excl, out,
				       created, NULL));
}

int store_create_entry(struct store *s, struct store_node *parent,
		       const char *name, const struct store_owner *owner,
		       bool excl, struct store_node **out, bool *created,
		       struct store_attr *attr)
{
	return TRANSITION(s, do_create(s, parent, name, owner, excl, out,
				       created, attr));
}

int store_unlink(struct store *s, struct store_node *parent, const char *name)
{
	return TRANSITION(s, do_unlink(s, parent, name));
}

int store_link(struct store *s, struct store_node *child,
	       struct store_node *parent, const char *name)
{
	return TRANSITION(s, do_link(s, child, parent, name, NULL));
}

int store_link_entry(struct store *s, struct store_node *child,
		     struct store_node *parent, const char *name,
		     struct store_attr *attr)
{
	return TRANSITION(s, do_link(s, child, parent, name, attr));
}

int store_rename(struct store *s, struct store_node *from, const char *name,
		 struct store_node *to, const char *to_name, unsigned flags)
{
	return TRANSITION(s, do_rename(s, from, name, to, to_name, flags));
}

/* Observability ------------------------------------------------------------------------ */

int store_stats(struct store *s, struct store_node *tenant, struct store_stats *o)
{
	struct tenant *t;

	/* Gauges count what is alive now: age out due tombstones first
	 * (bounded; the reaper does the rest). */
	world_enter(s);
	tombs_reap(s, store_now_ms(s), 64);
	world_exit(s);
	memset(o, 0, sizeof(*o));
	if (tenant) {
		t = as_tenant(tenant);
		if (!t)
			return -EINVAL;
		if (is_dead(tenant))
			return -ESTALE;
		o->tenants = 1;
		o->parents = atomic_load(&t->parents_n);
		o->children = atomic_load(&t->children_n);
		o->links = atomic_load(&t->links_n);
		o->tombstones = atomic_load(&t->tombs_n);
		o->bytes = atomic_load(&t->bytes_n);
	} else {
		o->tenants = atomic_load(&s->tenants_n);
		o->parents = atomic_load(&s->parents_n);
		o->children = atomic_load(&s->children_n);
		o->links = atomic_load(&s->links_n);
		o->tombstones = atomic_load(&s->tombs_n);
		o->bytes = atomic_load(&s->bytes_n);
	}
	lock(&s->hold_lock, LOCK_SNAP_HOLD);
	o->snapshot_bytes = s->held;
	unlock(&s->hold_lock, LOCK_SNAP_HOLD);
	o->admissions = atomic_load(&s->admissions);
	o->removals = atomic_load(&s->removals);
	o->expiries = atomic_load(&s->expiries);
	o->joins = atomic_load(&s->joins);
	o->leaves = atomic_load(&s->leaves);
	for (int i = 0; i < STORE_NREFUSAL; i++)
		o->refused[i] = atomic_load(&s->refused[i]);
	return 0;
}

