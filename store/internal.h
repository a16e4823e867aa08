/*
 * internal.h - the inside of store/, shared by its files and seen by no
 * one else: only the .c files of store/ include it (fs/ and layout/ see
 * store.h).
 *
 * It holds the layout of every struct more than one file of store/
 * touches, each shared field marked with the lock that guards it; the
 * core's own lock wrappers (a bucket's, the world lock; the lock order,
 * enum store_lock_level, and the checked lock()/unlock() are in
 * engine.h, which an engine's locks take part in); small inline helpers;
 * and the functions one file defines for the others, grouped under the
 * file that defines them, at the end.
 *
 * Authority
 * ---------
 * The hierarchy is the one authority:
 *
 *   store->tenants   name -> tenant          guarded by store->lock
 *   tenant->parents  name -> parent bucket   guarded by tenant->lock
 *   tenant->tombs    name -> tombstone       guarded by tenant->lock
 *   parent->links    name -> link -> state   guarded by parent->lock
 *   state fields     content, version, nlink guarded by the state's stripe
 *
 * Every event, cleanup and query that concerns a parent's children
 * carries the parent, so the children live in their parent's bucket and
 * are found there by name, never by a scan of a flat table.  A node is
 * alive exactly while it is reachable from the hierarchy; the transition
 * that unhooks it sets node->dead inside the same critical section, so
 * "dead" and "unreachable" are never seen apart.  One secondary index
 * holds no fact of its own and says how it stays in step: the deadline
 * heap (lease.c).  Which nodes the kernel knows is not the store's
 * business: the adapter keeps its own table of them (fs/inode.c), each
 * entry a counted reference.
 *
 * Files
 * -----
 *   engine.h    the method table an authority implements (struct
 *               store_ops), what an engine decides for a transition it
 *               applies (struct given), the core functions it may call,
 *               the lock order and its checked wrappers
 *   api.c       store.h's transitions: the common front checks, then the
 *               table
 *   embedded.c  the embedded authority's table (embedded_ops), and
 *               the transition wrapper an engine applies entries in
 *   base.c      the ground floor: refusals, the clock, node references,
 *               a lease record's release, the reaper's wake-up
 *   store.c     the store object: lifecycle, limits, counters, .stats
 *   node.c      nodes: identity, attributes read, special files
 *   setattr.c   the setattr transition
 *   lookup.c    lookup and directory listings
 *   bucket.c    a bucket's links and their states; the cascade
 *   tenant.c    tenants: create, cleanup
 *   parent.c    parents: join, leave, depart, expire
 *   tomb.c      departed tombstones and their queue
 *   child.c     children: create, unlink, link, rename, exchange, expiry
 *   content.c   content: stages of open files, publication
 *   lease.c     leases, the deadline heap
 *   reaper.c    the reaper: its thread, its passes, when it wakes
 *   events.c    event lines and the hooks run after a transition
 *   drain.c     drains of the store and of a tenant
 *   snapshot.c  point-in-time snapshots, copy before write
 *   check.c     the recount (store_check_all)
 *   lockcheck.c the lock order, checked in test builds
 * and, apart: evlog.c (the event log's ring), ptab.c (the open-addressed
 * tables), cred.c (permissions), fault.c (allocation failures in test
 * builds).  Calls go one way: api.c and embedded.c above the mechanisms,
 * the mechanisms above base.c; no two files call each other in a circle.
 * An engine (the shared store on Redis, redis/) is no part of the core:
 * it includes store.h and engine.h, and the core names none of it.
 */
#ifndef STATEFS_STORE_INTERNAL_H
#define STATEFS_STORE_INTERNAL_H

#include "store/store.h"
#include "store/engine.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/evlog.h"
#include "store/ptab.h"


#define STRIPES 256

/* Node ----------------------------------------------------------------- */

/*
 * Every node starts with this.  A child is the bulk of the store's
 * memory, so the fields are packed (four bytes to spare at the end) and
 * what only some nodes need (a lease) lives elsewhere: a child is 88
 * bytes, one 96-byte allocation (checked below struct child).
 */
struct store_node {
	uint64_t ino;                  /* immutable */
	atomic_uint refs;
	/* Its lease record (0: it never had one; see lease.c), set once
	 * under the owner's lock and the heap lock, read anywhere. */
	_Atomic uint32_t lease;
	/* A state: the snapshot it was last frozen for, the low 32 bits of
	 * the epoch (its stripe; see snapshot.c); directories: unused. */
	uint32_t epoch;
	uint8_t kind;                  /* enum store_kind, immutable */
	atomic_bool dead;
	uint16_t mode;                 /* permission bits (see struct meta) */
	uint32_t nlink;                /* a state: the links that reach it
					* (its stripe); directories: unused */
};

/*
 * A node's lease: its deadline (0: none), written under the owner's lock
 * and the heap lock, read anywhere; its ttl under the owner's lock; its
 * place in the heap under the heap lock.  Records live in chunks that
 * never move (s->lease_dir), so a reader holding only the node can read
 * the deadline; a record goes back to the free list when its node is
 * freed.
 */
struct lease {
	atomic_uint_fast64_t deadline;
	uint64_t ttl_ms;
	uint32_t heap_idx;
	uint32_t next_free;            /* heap lock: the free list */
};

#define NOT_IN_HEAP UINT32_MAX
#define LEASE_CHUNK_BITS 14
#define LEASE_CHUNK (1u << LEASE_CHUNK_BITS)
#define LEASE_CHUNKS (1u << (32 - LEASE_CHUNK_BITS))

/* A special file: a node inside its directory's record. */
struct special {
	struct store_node node;        /* kind STORE_SPECIAL */
	struct store_node *owner;      /* counts go here */
	int slot;
};

/*
 * Attributes a directory or a state shows, with node->mode; guarded by
 * the node's lock.  Times are nanoseconds since the epoch.
 */
struct meta {
	int64_t atime, mtime, ctime;
	uid_t uid;
	gid_t gid;
};

/* Immutable, counted content.  NULL stands for empty. */
struct blob {
	atomic_uint refs;
	uint32_t len;                  /* max_payload is far below 4 GiB */
	char data[];
};

/* A departed tombstone (tomb.c): in its tenant's table and the queue. */
struct tomb {
	UT_hash_handle hh;             /* tenant->tombs (tenant->lock) */
	struct tomb *prev, *next;      /* store->tomb_fifo (tomb_lock) */
	struct tenant *tenant;         /* immutable: the table that holds it */
	uint64_t generation;           /* tenant->lock */
	uint64_t deadline_ms;          /* tenant->lock; the queue's order */
	char name[];                   /* immutable */
};

struct tenant {
	struct store_node node;        /* kind STORE_TENANT */
	struct special special[STORE_NSPECIAL];
	char *name;                    /* immutable */
	UT_hash_handle hh;             /* store->tenants (store->lock) */
	pthread_mutex_t lock;          /* LOCK_TENANT */
	struct parent *parents;        /* lock */
	struct tomb *tombs;            /* lock */
	struct meta meta;              /* lock; uid, gid and mode are
					* written under acl_lock as well */
	/* A leaf (LOCK_ACL): lets emit() read meta's uid, gid and mode from
	 * a transition that holds only a bucket or a stripe. */
	pthread_mutex_t acl_lock;
	uint64_t snap_epoch;           /* lock: see snapshot.c */
	/* Gauges of this tenant, updated with the store-wide ones; all but
	 * links_n are also its shares (reserved like the ceilings), and
	 * staged_n, what its open stages hold, counts in bytes_n's. */
	atomic_uint_fast64_t parents_n, children_n, links_n, tombs_n, bytes_n,
		staged_n;
	/* This tenant's own drain (enum store_state) and its deadline;
	 * changed under lock, read anywhere. */
	atomic_int drain_state;
	atomic_uint_fast64_t drain_deadline;
	/* An engine's id of this tenant, 0 until the engine knows it as
	 * this node (the engine's lock). */
	uint64_t engine_id;
	/* The link count an engine gives a tenant it holds only the node
	 * of (a shared store's shell: its parents not loaded), 2 + the
	 * parents its authority has; 0: counted from parents, as always.
	 * Written by the engine, read by attr_locked. */
	atomic_uint_fast64_t shell_nlink;
	/* The number the newest line of this tenant shows (its transition's
	 * place in the log, or an engine's number for it), written by
	 * emit() inside the transition; 0 before the first.  What a
	 * tenant's .snapshot says it ends at (snapshot.c). */
	atomic_uint_fast64_t seq_shown;
};

struct parent {
	struct store_node node;        /* kind STORE_PARENT */
	char *name;                    /* immutable */
	struct tenant *tenant;         /* immutable, counted */
	uint64_t generation;           /* immutable */
	UT_hash_handle hh;             /* tenant->parents (tenant->lock) */
	pthread_mutex_t lock;          /* the bucket: LOCK_PARENT */
	struct ptab links;             /* lock: name -> struct link */
	uint64_t nlinks;               /* lock: entries, for parent_quota */
	struct meta meta;              /* lock */
	uint64_t child_ttl_ms;         /* lock: what new children start with */
	/* Written under lock; the snapshot walker also peeks at it under
	 * tenant->lock to skip copied buckets. */
	atomic_uint_fast64_t snap_epoch;
};

/*
 * A state.  Its tenant is its links' parents' (links never cross
 * tenants): child_tenant() while it has a link.
 */
struct child {
	struct store_node node;        /* kind STORE_CHILD */
	/* Guarded by the state's stripe lock. */
	struct blob *content;
	uint64_t version;
	struct link *slinks;           /* the links that reach this state */
	struct meta meta;              /* and node.nlink, node.mode */
};

_Static_assert(sizeof(void *) != 8 || sizeof(struct child) <= 88,
	       "a child fits one 96-byte allocation with malloc's header");

struct link {
	struct child *child;           /* counted; changes under both the
					* bucket lock and the state stripe */
	struct parent *parent;         /* the bucket that holds it */
	struct link *snext;            /* child->slinks (stripe) */
	uint32_t hash;                 /* ptab_hash_name(name) */
	char name[];
};

/* The tenant of state @c, which has a link (its stripe held). */
static inline struct tenant *child_tenant(const struct child *c)
{
	return c->slinks->parent->tenant;
}

struct store {
	/* The limits the transitions enforce (immutable).  A store an
	 * engine applies changes to may have its store-wide ceilings,
	 * quotas and shares 0 (none): the engine's authority enforces them,
	 * and the copy applies them in an order of its own. */
	struct store_limits lim;
	/* The store's limits as store_limits() shows them and a stage's
	 * write checks them (immutable): lim, for the embedded store. */
	struct store_limits shown;
	/* The authority's method table (engine.h: embedded_ops unless an
	 * engine set its own) and the engine's state, opaque to the core;
	 * NULL for the embedded store.  Set once, before the store is used
	 * (store_set_engine). */
	const struct store_ops *ops;
	void *engine;
	struct store_clock clock;      /* immutable */
	/* Immutable, but a mirror's: a new store instance changes it (the
	 * follower) while .stats reads it. */
	_Atomic uint64_t instance;
	uint64_t born_ms;              /* immutable */
	atomic_int state;              /* enum store_state, under lock */
	atomic_uint_fast64_t drain_deadline;
	atomic_int tenants_draining;   /* tenants whose drain runs */
	atomic_uint_fast64_t next_ino;

	/*
	 * The world lock, outermost of all but the snapshot taker: every
	 * transition holds it shared; a drain's clear and the recount hold
	 * it exclusive, and a snapshot only for the two moments that start
	 * and end it (snapshot.c), so each sees the store between
	 * transitions.  Writers are preferred so none is starved.
	 */
	pthread_rwlock_t world;        /* LOCK_WORLD */
	pthread_mutex_t lock;          /* LOCK_STORE: the tenant table and
					* the root */
	struct tenant *tenants;        /* lock */
	struct store_node root;
	struct special root_special[STORE_NSPECIAL];
	struct meta root_meta;         /* lock */

	/* Every tombstone, oldest deadline first (all share one TTL, so
	 * insertion order is deadline order).  A leaf lock (LOCK_TOMBQ),
	 * taken under a tenant lock. */
	pthread_mutex_t tomb_lock;
	struct tomb *tomb_fifo;        /* tomb_lock */

	/*
	 * Leases: a binary min-heap of nodes by deadline, each entry a
	 * counted reference; the heap's capacity is the ceilings
	 * (max_parents + max_children), allocated once, so an insert never
	 * fails.  The authority for a deadline is the node (its owner's
	 * lock); the heap is a secondary index updated in the same critical
	 * section by the same owner (lease.c).  A leaf lock (LOCK_HEAP).
	 */
	pthread_mutex_t heap_lock;
	struct store_node **heap;      /* heap_lock */
	size_t heap_n, heap_cap;       /* heap_lock */
	/* Lease records: LEASE_CHUNKS pointers to chunks of LEASE_CHUNK,
	 * filled in under heap_lock and never moved until store_free();
	 * record 0 is never used. */
	struct lease **lease_dir;
	uint32_t lease_top;            /* heap_lock: records handed out */
	uint32_t lease_free;           /* heap_lock: free list (0: empty) */

	/* The snapshot being taken (see snapshot.c): changed only under the
	 * exclusive world lock, so a transition sees one value throughout. */
	pthread_mutex_t snap_taker;    /* LOCK_SNAP_TAKER */
	uint64_t snap_epochs;          /* written with the world exclusive */
	struct snap_run *_Atomic snap;
#ifdef STORE_FAULTS
	void (*snap_step_fn)(void *arg, unsigned step);
	void *snap_step_arg;
	void (*cascade_step_fn)(void *arg);
	void *cascade_step_arg;
#endif

	/* The memory open snapshots hold (store_snapshot_hold), in all
	 * and per uid (an entry while it holds some).  A leaf lock
	 * (LOCK_SNAP_HOLD). */
	pthread_mutex_t hold_lock;
	uint64_t held;                 /* hold_lock */
	struct snap_hold *holds;       /* hold_lock: uid -> bytes */

	struct evlog *events;
	/* An engine whose authority has one order of all tenants (a
	 * mirror of one Redis, store_root_order): its root lines show that
	 * order's numbers (struct given's gseq); gseq_shown is the newest
	 * one shown or loaded (the root's .snapshot ends there while
	 * root_settled), changed by the applying thread inside its
	 * transitions.  All three atomics, no lock. */
	atomic_bool root_order, root_settled;
	atomic_uint_fast64_t gseq_shown;
	/* The root's log holds every line of that order only above this
	 * number (store_root_floor): a tenant the engine had not copied
	 * was loaded at it, its earlier lines never shown here.  A root
	 * reader started at or below it is served by the engine's
	 * history. */
	atomic_uint_fast64_t gseq_floor;
	void (*event_hook)(void *arg, bool internal);
	void *event_arg;
	void (*attr_hook)(void *arg, const uint64_t *ino, size_t n);
	void *attr_arg;
	void (*touch_hook)(void *arg, struct store_node *n);
	void *touch_arg;
	void (*forget_hook)(void *arg, struct store_node *n);
	void *forget_arg;

	/*
	 * The reaper thread (reaper.c).  reap_at is the deadline it sleeps
	 * until (UINT64_MAX: none), 0 while it runs or when it is not
	 * started; whoever sets an earlier deadline wakes it (reaper_note).
	 * A leaf lock (LOCK_REAPER).
	 */
	pthread_mutex_t reap_lock;
	pthread_cond_t reap_cond;      /* reap_lock */
	bool reap_kicked;              /* reap_lock: an earlier deadline */
	bool reap_stop;                /* reap_lock */
	bool reap_started;             /* the starter's */
	pthread_t reap_thread;
	atomic_uint_fast64_t reap_at;

	/* A state's fields are guarded by the stripe its inode number
	 * picks (LOCK_STRIPE): states share 256 mutexes, not one each. */
	pthread_mutex_t stripes[STRIPES];

	/* Gauges (staged_n: bytes the open stages hold, store/content.c). */
	atomic_uint_fast64_t tenants_n, parents_n, children_n, links_n,
		tombs_n, bytes_n, staged_n;
	/* Event counters. */
	atomic_uint_fast64_t admissions, removals, expiries, joins, leaves;
	atomic_uint_fast64_t refused[STORE_NREFUSAL];
};

/* What one uid's open snapshots hold (see store_snapshot_hold). */
struct snap_hold {
	UT_hash_handle hh;             /* s->holds (hold_lock) */
	uid_t uid;
	uint64_t bytes;
};

/* A bucket's lock: buckets held together are taken by ascending inode. */
#define bucket_lock(p) lock_keyed(&(p)->lock, LOCK_PARENT, (p)->node.ino)
#define bucket_unlock(p) unlock(&(p)->lock, LOCK_PARENT)

/*
 * A call into code that takes a lock of its own, which is not taken
 * through these wrappers (the event log's mutex, store/evlog.c): checked
 * as if the call took it.
 */
#define lock_call_begin(level) LOCKCHECK_TAKE((level), 0)
#define lock_call_end(level) LOCKCHECK_DROP(level)

/* The world lock, shared: one transition runs. */
#define world_enter(s)                                                \
	do {                                                          \
		LOCKCHECK_TAKE(LOCK_WORLD, 0);                        \
		if (pthread_rwlock_rdlock(&(s)->world) != 0)          \
			abort();                                      \
	} while (0)

#define world_exit(s)                                                 \
	do {                                                          \
		if (pthread_rwlock_unlock(&(s)->world) != 0)          \
			abort();                                      \
		LOCKCHECK_DROP(LOCK_WORLD);                           \
	} while (0)

/*
 * Hold the whole store still for an explicit full scan: no transition
 * runs until scan_end().  Lookups and reads go on; they change nothing.
 */
#define scan_begin(s)                                                 \
	do {                                                          \
		LOCKCHECK_TAKE(LOCK_WORLD, 0);                        \
		if (pthread_rwlock_wrlock(&(s)->world) != 0)          \
			abort();                                      \
	} while (0)

#define scan_end(s) world_exit(s)

/* Helpers ---------------------------------------------------------------- */

/* Take @n from counter @c; going below zero is a bug that must be loud. */
static inline void gauge_sub(atomic_uint_fast64_t *c, uint64_t n, const char *what)
{
	uint64_t old = atomic_fetch_sub(c, n);

	if (old < n) {
		fprintf(stderr, "statefs: store counter %s underflow (%llu - %llu)\n",
			what, (unsigned long long)old, (unsigned long long)n);
		abort();
	}
}

static inline void gauge_add(atomic_uint_fast64_t *c, uint64_t n)
{
	atomic_fetch_add(c, n);
}

/*
 * Reserve @n units of @c below @limit (0 = unlimited): all or nothing,
 * never above the limit even under concurrency.
 */
static inline bool reserve(atomic_uint_fast64_t *c, uint64_t n, uint64_t limit)
{
	uint64_t cur = atomic_load(c);

	do {
		if (limit && (cur + n > limit || cur + n < cur))
			return false;
	} while (!atomic_compare_exchange_weak(c, &cur, cur + n));
	return true;
}

/*
 * What a transition reads from its struct given (engine.h) when an engine
 * decided it, else from the store: the store clock (now_of, base.c),
 * the wall time (wall_now, engine.h), the next inode number, whether a
 * drain refuses it.  @g NULL: the store decides (the embedded store,
 * every transition of its own).
 */
static inline void touch_dir(struct meta *m, const struct given *g)
{
	m->mtime = m->ctime = wall_now(g);
}

static inline uint64_t ino_alloc(struct store *s, struct given *g, uint64_t n)
{
	uint64_t ino, top;

	if (!g || !g->ino)
		return atomic_fetch_add(&s->next_ino, n);
	/* The engine's number for the node.  next_ino stays past every
	 * number handed out (a new instance's numbers start above it). */
	ino = g->ino;
	g->ino = 0;
	top = atomic_load(&s->next_ino);
	while (top < ino + n &&
	       !atomic_compare_exchange_weak(&s->next_ino, &top, ino + n))
		;
	return ino;
}

static inline pthread_mutex_t *stripe(struct store *s, struct child *c)
{
	return &s->stripes[c->node.ino % STRIPES];
}

static inline struct special *as_special(const struct store_node *n)
{
	return n->kind == STORE_SPECIAL ? (struct special *)n : NULL;
}

/* The node whose reference counts @n's: a special file's directory. */
static inline struct store_node *counted(struct store_node *n)
{
	return n->kind == STORE_SPECIAL ? as_special(n)->owner : n;
}

static inline bool is_dead(const struct store_node *n)
{
	const struct store_node *o = counted((struct store_node *)n);

	return atomic_load(&n->dead) || atomic_load(&o->dead);
}

/* Does the store, or tenant @t, refuse new things (a drain)?  A tenant
 * that was removed has no drain left: what reaches it is stale. */
static inline bool draining(struct store *s, const struct given *g,
			    struct tenant *t)
{
	if (g)
		return false; /* the engine's authority admitted it */
	return atomic_load(&s->state) != STORE_READY ||
	       (t && !atomic_load(&t->node.dead) &&
		atomic_load(&t->drain_state) != STORE_READY);
}

static inline struct tenant *as_tenant(struct store_node *n)
{
	return n && n->kind == STORE_TENANT ? (struct tenant *)n : NULL;
}

static inline struct parent *as_parent(struct store_node *n)
{
	return n && n->kind == STORE_PARENT ? (struct parent *)n : NULL;
}

static inline struct child *as_child(struct store_node *n)
{
	return n && n->kind == STORE_CHILD ? (struct child *)n : NULL;
}

static inline struct lease *lease_at(const struct store *s, uint32_t i)
{
	return &s->lease_dir[i >> LEASE_CHUNK_BITS][i & (LEASE_CHUNK - 1)];
}

/* @n's lease record, or NULL when it never had one. */
static inline struct lease *lease_of(const struct store *s, const struct store_node *n)
{
	uint32_t i = atomic_load_explicit(&n->lease, memory_order_acquire);

	return i ? lease_at(s, i) : NULL;
}

/* @n's deadline (0: none). */
static inline uint64_t deadline_of(const struct store *s, const struct store_node *n)
{
	const struct lease *l = lease_of(s, n);

	return l ? atomic_load(&l->deadline) : 0;
}

/* @n's ttl (0: none); its owner's lock held. */
static inline uint64_t ttl_of(const struct store *s, const struct store_node *n)
{
	const struct lease *l = lease_of(s, n);

	return l ? l->ttl_ms : 0;
}

/*
 * The lock of directory or state @n (the store's for the root, the
 * tenant's, the bucket's, the state's stripe): the one that guards its
 * attributes, and its lease (a parent's or a state's "owner lock").
 */
static inline void node_lock(struct store *s, struct store_node *n)
{
	switch (n->kind) {
	case STORE_ROOT: lock(&s->lock, LOCK_STORE); break;
	case STORE_TENANT: lock(&as_tenant(n)->lock, LOCK_TENANT); break;
	case STORE_PARENT: bucket_lock(as_parent(n)); break;
	case STORE_CHILD: lock(stripe(s, as_child(n)), LOCK_STRIPE); break;
	default: abort(); /* a special file has no lock of its own */
	}
}

static inline void node_unlock(struct store *s, struct store_node *n)
{
	switch (n->kind) {
	case STORE_ROOT: unlock(&s->lock, LOCK_STORE); break;
	case STORE_TENANT: unlock(&as_tenant(n)->lock, LOCK_TENANT); break;
	case STORE_PARENT: bucket_unlock(as_parent(n)); break;
	case STORE_CHILD: unlock(stripe(s, as_child(n)), LOCK_STRIPE); break;
	default: abort();
	}
}

/* Past its deadline at @now: as good as gone, reaped or not. */
static inline bool is_expired(const struct store *s, const struct store_node *n,
		       uint64_t now)
{
	uint64_t d = deadline_of(s, n);

	return d && d <= now;
}

/* Dead, or expired at @now: no operation may use it. */
static inline bool gone(const struct store *s, const struct store_node *n,
		 uint64_t now)
{
	return is_dead(n) || is_expired(s, n, now);
}

static inline size_t blob_len(const struct blob *b)
{
	return b ? b->len : 0;
}

static inline struct blob *blob_ref(struct blob *b)
{
	if (b)
		atomic_fetch_add(&b->refs, 1);
	return b;
}

static inline void blob_unref(struct blob *b)
{
	if (b && atomic_fetch_sub(&b->refs, 1) == 1)
		free(b);
}

/* No event: a removal that is part of a larger transition (a leave). */
#define NO_EVENT ((enum store_op)-1)

/* Run one transition under the shared world lock, then wake event
 * readers (no lock held any more). */
#define TRANSITION(s, call)                                           \
	({                                                            \
		int rc_;                                              \
		world_enter(s);                                       \
		rc_ = (call);                                         \
		world_exit(s);                                        \
		event_hook_run(s);                                    \
		rc_;                                                  \
	})

/* The slot @name of @s's method table (engine.h), or the embedded
 * store's when the engine left it NULL. */
#define OP(s, name) ((s)->ops->name ? (s)->ops->name : embedded_ops.name)

/* Shared between the files of store/ ------------------------------------- */

/* (And the core functions an engine may call too: store/engine.h.) */

/* store/base.c: the ground floor (refuse() and store_now_ms() are in
 * engine.h and store.h) */
uint64_t now_of(const struct store *s, const struct given *g);
void lease_release(struct store *s, struct store_node *n);
void reaper_note(struct store *s, uint64_t deadline);

/* store/bucket.c */
uint32_t link_hash(const void *l);
struct link *bucket_find(const struct parent *p, const char *name);
int bucket_add(struct parent *p, struct link *l);
void bucket_del(struct parent *p, struct link *l);
struct link *link_new(const char *name, struct child *c);
void link_free(struct store *s, struct link *l);
void links_free(struct store *s, struct ptab *links);
int parent_cmp(const void *a, const void *b);
void lock_pair(struct parent *a, struct parent *b);
void unlock_pair(struct parent *a, struct parent *b);
void link_attach_locked(struct parent *p, struct link *l);
void link_insert_locked(struct store *s, struct given *g, struct parent *p, struct link *l,
			bool new_state);
void link_remove_locked(struct store *s, struct given *g, struct parent *p, struct link *l);
bool state_unlink_locked(struct store *s, struct given *g, struct link *l, enum store_op op);
struct ptab bucket_clear_locked(struct store *s, struct given *g, struct parent *p);

/* store/content.c */
int stage_publish(struct store_stage *st);
int stage_flush_due(struct store_stage *st);
int content_resize_locked(struct store *s, struct given *g, struct child *c, uint64_t size);

/* store/drain.c */
void drains_settle_all(struct store *s);
int drain_run(struct store *s, struct store_node *tenant,
	      const struct store_cred *cred, bool now);
bool drain_settle(struct store *s, struct tenant *t, bool force);

/* store/events.c */
void emit(struct store *s, struct given *g, enum store_op op, bool internal,
	  struct store_node *n, struct tenant *t, const char *parent,
	  const char *child, int64_t gen, int64_t version);
void emit_from_locked(struct store *s, struct given *g, enum store_op op,
		      struct child *c, const struct link *to,
		      const struct link *from);
void note_attrs_changed(uint64_t ino);

/* store/lease.c */
int lease_child_ttl(struct store *s, struct store_node *n, uint64_t ttl_ms);
int lease_ensure(struct store *s, struct store_node *n);
void lease_set(struct store *s, struct store_node *n, uint64_t deadline);
void lease_clear(struct store *s, struct store_node *n);

/* store/node.c */
void node_init(struct store_node *n, uint64_t ino, enum store_kind k);
void specials_init(struct special *sp, struct store_node *owner);
void meta_init(struct store_node *n, struct meta *m,
	       const struct store_owner *o, struct given *g);
void meta_inherit(struct store_node *n, struct meta *m,
		  const struct store_node *dir, const struct meta *dm,
		  bool is_dir);

/* store/parent.c */
struct ptab parent_unhook_locked(struct store *s, struct given *g, struct tenant *t,
				 struct parent *p);
struct ptab parent_remove_locked(struct store *s, struct given *g, struct tenant *t,
				 struct parent *p);
bool may_remove_parent_locked(struct store *s, struct tenant *t,
			      struct parent *p,
			      const struct store_cred *cred, uint64_t now);
int do_mkdir(struct store *s, struct store_node *dir, const char *name,
	     const struct store_owner *owner, struct store_node **out,
	     struct store_attr *attr);

/* store/reaper.c */
unsigned reaper_expire(struct store *s, unsigned budget);
void drain_expire_due(struct store *s, struct store_node *tenant,
		      uint64_t now);

/* store/store.c */
int stats_embedded(struct store *s, struct store_node *tenant,
		   struct store_stats *o);

/* store/snapshot.c */
void snap_tenant_cow(struct store *s, struct tenant *t);
void snap_parent_cow(struct store *s, struct parent *p);
void snap_state_cow(struct store *s, struct child *c);

/* store/tenant.c */
void tenant_clear_locked(struct store *s, struct given *g, struct tenant *t,
			 enum store_op op, bool plocked);
int tenant_lock_for_cascade(struct store *s, struct given *g, struct tenant *t,
			    const struct store_cred *cred);

/* store/tomb.c */
void tomb_refresh_locked(struct store *s, struct tomb *tb, uint64_t now);
struct tomb *tomb_find_locked(struct store *s, struct tenant *t,
			      const char *name, uint64_t now);
void tombs_drop_all_locked(struct store *s, struct tenant *t);
void tombs_free(struct tenant *t);
unsigned tombs_reap(struct store *s, uint64_t now, unsigned budget);

#endif /* STATEFS_STORE_INTERNAL_H */
