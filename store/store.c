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

/*
 * Parent @p leaves (t->lock and p->lock held; p->lock is released): one
 * critical section of its bucket marks it departed and clears it; it
 * leaves the tenant's table.  The caller has placed the tombstone and
 * frees the returned links and the table's reference on @p after
 * unlocking.
 */
struct ptab parent_unhook_locked(struct store *s, struct tenant *t,
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
struct ptab parent_remove_locked(struct store *s, struct tenant *t,
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

