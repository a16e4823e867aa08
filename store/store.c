/*
 * store.c - the store object: its lifecycle and limits, its method
 * table (embedded_ops unless an engine sets its own: store_set_engine),
 * and the counters behind .stats (the refusals are counted by refuse()
 * and the clock read by store_now_ms(), base.c).
 *
 * What it owns
 * ------------
 * struct store (internal.h): the limits, fixed at store_new() (each
 * STORE_SHARE_AUTO share made half its ceiling), the injected monotonic
 * clock, the instance id, the locks and tables every mechanism hangs off,
 * and the gauges and event counters.  Counters are atomics updated by the
 * transition that changes the fact they count, inside its critical
 * section; a gauge that would go below zero aborts (a bug).
 *
 * Ceilings and quotas are reserved (compare-and-swap against the limit)
 * after every other check and before the insert, and released if a later
 * step fails, so a refused admission changes nothing.  A tenant's share
 * of a ceiling (tenant_max_*) is one more reservation, on the tenant's
 * own gauge, right after the store's: every store-wide resource a tenant
 * can fill (parents, states, bytes, tombstones) is counted per tenant
 * before it is taken, so one tenant cannot take it all from the others.
 *
 * Transitions
 * -----------
 * Every store.h function that changes a fact runs as one transition
 * (TRANSITION, internal.h): under the world lock shared, then the locks
 * of what it changes, then, with every lock released, the hooks that
 * wake event readers (events.c).  A full scan holds the world lock
 * exclusive (scan_begin): a drain's clear, the recount, the two instants
 * of a snapshot; so each sees the store between transitions.  Lookups,
 * reads and a stage's writes change no shared fact and take no world
 * lock.
 *
 * Locks
 * -----
 * store_new() and store_free() run with no other thread using the store
 * (store_free() stops the reaper first, if it runs).
 * The embedded store's .stats (stats_embedded) ages out due tombstones
 * as a transition would, then reads the gauges without a lock and the snapshot memory under
 * s->hold_lock (LOCK_SNAP_HOLD, a leaf).
 */
#include "store/internal.h"

#include <errno.h>
#include <sys/random.h>
#include <unistd.h>

/* uthash ran out of memory in this thread's last add (internal.h). */
__thread int hash_oom;

/* Lifecycle -------------------------------------------------------------- */

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
	uint64_t instance;

	if (!limits || !out || !limits->max_name || !limits->event_log)
		return -EINVAL;
	/* Deadlines are now + these: bounded, they cannot wrap. */
	if (limits->tombstone_ttl_ms > STORE_DURATION_MAX_MS ||
	    limits->default_ttl_ms > STORE_DURATION_MAX_MS ||
	    limits->drain_window_ms > STORE_DURATION_MAX_MS)
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
	s->shown = s->lim;
	s->clock.now_ms = clock && clock->now_ms ? clock->now_ms : monotonic_ms;
	s->clock.arg = clock ? clock->arg : NULL;
	if (getrandom(&instance, sizeof(instance), 0) != (ssize_t)sizeof(instance))
		instance = (uint64_t)wall_now(NULL) ^ (uint64_t)getpid();
	atomic_init(&s->instance, instance);
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
	pthread_mutex_init(&s->reap_lock, NULL);
	{
		pthread_condattr_t ca;

		/* The reaper sleeps on the monotonic clock, as deadlines run. */
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&s->reap_cond, &ca);
		pthread_condattr_destroy(&ca);
	}
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
	meta_init(&s->root, &s->root_meta, &root_owner, NULL);
	atomic_init(&s->next_ino, STORE_ROOT_INO + 1 + STORE_NSPECIAL);
	s->ops = &embedded_ops;
	*out = s;
	return 0;
}

void store_quiesce(struct store *s)
{
	if (s && s->ops->quiesce)
		s->ops->quiesce(s);
}

void store_free(struct store *s)
{
	struct tenant *t, *tt;
	struct parent *p, *pp;

	if (!s)
		return;
	store_reaper_stop(s);
	if (s->ops->close)
		s->ops->close(s);
	/* Drop the heap's references first. */
	for (size_t i = 0; i < s->heap_n; i++) {
		lease_of(s, s->heap[i])->heap_idx = NOT_IN_HEAP;
		store_node_unref(s, s->heap[i]);
	}
	free(s->heap);
	evlog_free(s->events);
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
	pthread_mutex_destroy(&s->reap_lock);
	pthread_cond_destroy(&s->reap_cond);
	pthread_rwlock_destroy(&s->world);
	for (uint32_t i = 0; i < LEASE_CHUNKS && s->lease_dir[i]; i++)
		free(s->lease_dir[i]);
	free(s->lease_dir);
	free(s);
}

const struct store_limits *store_limits(const struct store *s)
{
	return &s->shown;
}

uint64_t store_instance_id(const struct store *s)
{
	return s->instance;
}

uint64_t store_uptime_ms(const struct store *s)
{
	return store_now_ms(s) - s->born_ms;
}

enum store_state store_state(const struct store *s)
{
	return (enum store_state)atomic_load(&s->state);
}

/* Observability ---------------------------------------------------------- */

void store_set_engine(struct store *s, const struct store_ops *ops,
		      void *engine)
{
	s->ops = ops;
	s->engine = engine;
}

void *store_engine(const struct store *s)
{
	return s->engine;
}

void store_drop_engine(struct store *s)
{
	s->engine = NULL;
}

void store_lift_limits(struct store *s)
{
	s->lim.max_tenants = s->lim.max_parents = s->lim.max_children = 0;
	s->lim.max_bytes = s->lim.max_tombstones = 0;
	s->lim.parent_quota = s->lim.tenant_quota = 0;
	s->lim.tenant_max_parents = s->lim.tenant_max_children = 0;
	s->lim.tenant_max_bytes = s->lim.tenant_max_tombstones = 0;
}

void store_number_from(struct store *s, uint64_t ino_offset)
{
	atomic_store(&s->next_ino, ino_offset + STORE_ROOT_INO + 1 + STORE_NSPECIAL);
}

void store_set_instance(struct store *s, uint64_t instance)
{
	atomic_store(&s->instance, instance);
}

void store_restart_uptime(struct store *s)
{
	s->born_ms = store_now_ms(s);
}

/* The embedded store's .stats (struct store_ops's stats). */
int stats_embedded(struct store *s, struct store_node *tenant,
		   struct store_stats *o)
{
	/* Gauges count what is alive now: age out due tombstones first
	 * (bounded; the reaper does the rest). */
	world_enter(s);
	tombs_reap(s, store_now_ms(s), 64);
	world_exit(s);
	return stats_gauges(s, tenant, o);
}

void stats_add_local(struct store *s, struct store_node *tenant,
		     struct store_stats *o)
{
	struct tenant *t = tenant ? as_tenant(tenant) : NULL;

	for (int i = 0; i < STORE_NREFUSAL; i++)
		o->refused[i] += atomic_load(&s->refused[i]);
	lock(&s->hold_lock, LOCK_SNAP_HOLD);
	o->snapshot_bytes = s->held;
	unlock(&s->hold_lock, LOCK_SNAP_HOLD);
	o->staged_bytes = atomic_load(t ? &t->staged_n : &s->staged_n);
}

int stats_gauges(struct store *s, struct store_node *tenant,
		 struct store_stats *o)
{
	struct tenant *t;

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
		o->staged_bytes = atomic_load(&t->staged_n);
	} else {
		o->tenants = atomic_load(&s->tenants_n);
		o->parents = atomic_load(&s->parents_n);
		o->children = atomic_load(&s->children_n);
		o->links = atomic_load(&s->links_n);
		o->tombstones = atomic_load(&s->tombs_n);
		o->bytes = atomic_load(&s->bytes_n);
		o->staged_bytes = atomic_load(&s->staged_n);
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

