/*
 * engine.h - what an authority behind store.h implements, and the core
 * functions it may call.
 *
 * One interface, several authorities.  fs/ and layout/ call store.h
 * whatever stands behind it; store.h's transitions (store/api.c) make the
 * checks every authority makes identically and first (the kind of node,
 * ENOTDIR, the root's mkdir and rmdir meaning a tenant), then call the
 * store's method table, struct store_ops below, one slot per transition
 * of the domain: the embedded store's table (store/embedded.c, each slot
 * a core transition in its TRANSITION wrapper) or an engine's (the shared
 * store on Redis: redis/ops.c, each slot one call of the Functions
 * library, the wait for the follower, the answer from the mirror).  The
 * shape is SQLite's sqlite3_io_methods: a table of function pointers the
 * core calls and never looks behind; the engine keeps its own state
 * behind the store's opaque engine pointer, as Redis's ae.c keeps
 * ae_epoll.c's behind apidata.
 *
 * An order of checks the contract fixes past those common ones stays with
 * each authority: written once in C (the core) for the embedded store,
 * once in the engine's own terms (redis/statefs.lua) for another.
 *
 * A mirror
 * --------
 * An engine whose reads are served from a copy of the store (a mirror:
 * the core's own structures, changed only by applying what the engine's
 * authority decided) applies each change with the core's own transitions,
 * listed below, so one set of mutation code serves every authority.  What
 * the engine decided for a transition it applies (the time, the inode
 * number, the sequence numbers of its lines, whether they are internal)
 * reaches the core as a struct given, passed to the transition; the
 * embedded store passes NULL: the core decides.
 *
 * Every structure of the core stays opaque to an engine: it reads and
 * changes a mirror's nodes only through the functions below (a node's
 * view as a tenant, a parent or a state; the walks of a tenant's links
 * and parents, which call back under the core's locks; what a load or
 * a difference sets: owner and times, a lease, a tombstone, a drain),
 * never by a field.  The functions are grouped by the file that defines
 * them, as the kernel's fs/kernfs/kernfs-internal.h groups its own;
 * their structs are in store/internal.h, the core's alone.
 *
 * Shared whole, because an engine's own code takes part in them: the
 * lock order (enum store_lock_level, its one statement, with the lock
 * wrappers that check it in test builds: an engine's locks are levels
 * of it), the uthash setting (an engine's tables fail as the core's,
 * through st_malloc, store/alloc.h) and the wall time a transition
 * stamps.
 */
#ifndef STATEFS_STORE_ENGINE_H
#define STATEFS_STORE_ENGINE_H

#include "store/store.h"
#include "store/alloc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* uthash: running out of memory is an error the caller sees, not an exit.
 * Set by a failed add, on the thread that made it (defined in store.c);
 * an engine's own tables (an index of its nodes) fail the same way. */
extern __thread int hash_oom;
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(obj) (hash_oom = 1)
#define uthash_malloc(sz) st_malloc(sz)
#include <uthash.h>
#include <utlist.h>

/* Locks ------------------------------------------------------------------ */

/*
 * The lock order.  Each lock of the store has a level, numbered outermost
 * first; a thread takes a lock only at a level above every level it
 * holds, so every path that holds two locks takes them in one order and
 * no two paths can wait for each other.  The rules, each checked on every
 * acquisition in test builds (lockcheck.c):
 *  - above every level held: never an outer lock after an inner one, nor
 *    two locks of one level;
 *  - except buckets (LOCK_PARENT), held together only in ascending inode
 *    order (a rename's two buckets, an expiry's or a cleanup's buckets),
 *    and stripes (LOCK_STRIPE), two at once only when links exchange
 *    states, the lower address first;
 *  - a leaf (LOCK_FIRST_LEAF and above) takes nothing while held;
 *  - an engine (engine.h) has one leaf of its own (LOCK_ENGINE_INDEX),
 *    one lock outside every store lock (LOCK_ENGINE_APPLY: whoever
 *    changes its mirror holds it across the embedded transitions that
 *    do, never across a network wait) and four locks outside the
 *    store's (its transport's two, the state of what it applied, its
 *    locks'): each of those is held alone, and no store lock is held
 *    while calling into the engine's transport or waiting for it at all
 *    (every call may wait on the network).
 * Hooks and callbacks run with no store lock held (the event and
 * attribute hooks run after the transition let go), but one:
 * store_node_names() calls its callback under the state's stripe, and
 * the callback only copies what it is given.
 */
enum store_lock_level {
	LOCK_NONE = 0,
	LOCK_ENGINE_APPLY, /* 1 an engine's mirror changed by its log: one
			   *    thread applies at a time (redis/apply.c) */
	LOCK_SNAP_TAKER,  /*  2 s->snap_taker: one snapshot at a time */
	LOCK_WORLD,       /*  3 s->world: shared by transitions, exclusive
			   *    for a full scan */
	LOCK_STORE,       /*  4 s->lock: the tenant table and the root */
	LOCK_TENANT,      /*  5 tenant->lock */
	LOCK_PARENT,      /*  6 parent->lock, the bucket (ascending inode) */
	LOCK_SNAP_ROWS,   /*  7 snap_run->lock: rows copied by transitions */
	LOCK_STAGE,       /*  8 store_stage->lock */
	LOCK_STRIPE,      /*  9 s->stripes[]: a state (ascending address) */
	/* Leaves. */
	LOCK_FROZEN,      /* 10 snap_run->frozen_lock: states frozen */
	LOCK_HEAP,        /* 11 s->heap_lock: the lease heap and records */
	LOCK_ACL,         /* 12 tenant->acl_lock: its owner and mode */
	LOCK_EVLOG,       /* 13 the event log's mutex (store/evlog.c) */
	LOCK_TOMBQ,       /* 14 s->tomb_lock: the tombstone queue */
	LOCK_SNAP_HOLD,   /* 15 s->hold_lock: what open snapshots hold */
	LOCK_REAPER,      /* 16 s->reap_lock: the reaper's wake-ups */
	LOCK_ENGINE_INDEX, /* 17 an engine's index of its nodes and tenants
			   *    (redis/index.c) */
	/* Held alone: no store lock is held while calling into an
	 * engine's transport (it waits on the network). */
	LOCK_ENGINE_POOL, /* 18 its connection pool (redis/conn.c) */
	LOCK_ENGINE_CONN, /* 19 one connection (redis/conn.c) */
	LOCK_ENGINE_STATE, /* 20 what its follower applied and the link's
			   *    state (redis/follow.c) */
	LOCK_ENGINE_LOCKS, /* 21 its lock requests, sessions and what it
			   *    holds (redis/lock.c) */
	LOCK_NLEVELS
};

#define LOCK_FIRST_LEAF LOCK_FROZEN
#define LOCK_FIRST_ALONE LOCK_ENGINE_POOL

/*
 * Every acquisition of a store lock names its level (enum
 * store_lock_level, above).  Builds with
 * -DSTORE_LOCKCHECK (the unit, stress and fuzz builds) record, per
 * thread, the levels held and abort with both places named when a thread
 * takes a lock out of order (store/lockcheck.c); other builds compile to
 * the bare pthread calls.  The check runs before the thread waits, so an
 * order that could deadlock is reported on the first run that takes it,
 * not on the unlucky one.
 */
#ifdef STORE_LOCKCHECK
void store_lockcheck_take(enum store_lock_level level, uint64_t key,
			  const char *file, int line);
void store_lockcheck_drop(enum store_lock_level level, const char *file,
			  int line);
void store_lockcheck_held(enum store_lock_level level, const char *file,
			  int line);
#define LOCKCHECK_TAKE(level, key) \
	store_lockcheck_take((level), (key), __FILE__, __LINE__)
#define LOCKCHECK_DROP(level) store_lockcheck_drop((level), __FILE__, __LINE__)
/* The caller holds a lock of @level (at the top of a _locked function). */
#define store_assert_held(level) \
	store_lockcheck_held((level), __FILE__, __LINE__)
#else
#define LOCKCHECK_TAKE(level, key) ((void)0)
#define LOCKCHECK_DROP(level) ((void)0)
#define store_assert_held(level) ((void)0)
#endif

static inline void mutex_lock(pthread_mutex_t *m)
{
	if (pthread_mutex_lock(m) != 0)
		abort();
}

static inline void mutex_unlock(pthread_mutex_t *m)
{
	if (pthread_mutex_unlock(m) != 0)
		abort();
}

/*
 * Take mutex @m of level @level; @key orders two locks of one level that
 * may be held together (a bucket's inode number, a stripe's address).
 */
#define lock_keyed(m, level, key)                                     \
	do {                                                          \
		LOCKCHECK_TAKE((level), (key));                       \
		mutex_lock(m);                                        \
	} while (0)
/* Take mutex @m of level @level; stripes held together are ordered by
 * their address, buckets by their inode number (bucket_lock()). */
#define lock(m, level) lock_keyed((m), (level), (uintptr_t)(m))
#define unlock(m, level)                                              \
	do {                                                          \
		mutex_unlock(m);                                      \
		LOCKCHECK_DROP(level);                                \
	} while (0)

#define NS_PER_S 1000000000LL

struct tenant;
struct parent;
struct child;
struct tomb;

/*
 * What an engine decided for one transition it applies, in place of what
 * the core would decide: a mirror's copy of a change the engine's
 * authority made.  NULL wherever a transition takes one: the core
 * decides (the embedded store).  Owned by the caller, for the one call;
 * the core consumes ino (0 once the node it names is made) and advances
 * seq (one per line).
 */
struct given {
	int64_t ns;                    /* wall time stamped on nodes */
	uint64_t ms;                   /* the store clock the transition reads */
	uint64_t ino;                  /* the next node's inode; 0 once taken */
	uint64_t seq;                  /* the next line's shown number */
	uint64_t gseq;                 /* the next line's number in the
					* authority's order of all tenants
					* (the root's); 0: none */
	bool others;                   /* another mount's or a reaper's change:
					* every line is internal */
	bool quiet;                    /* a load, not a change: no line */
	bool hidden;                   /* a reload's difference: lines for
					* the watch machinery only */
};

static inline int64_t ns_of(struct timespec ts)
{
	return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

/* The wall time a transition stamps: @g's when an engine decided it,
 * else the clock's (@g NULL). */
static inline int64_t wall_now(const struct given *g)
{
	struct timespec ts;

	if (g)
		return g->ns;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ns_of(ts);
}

/*
 * The method table: one slot per transition of the domain.  Each returns
 * what the store.h function it serves returns (the errno sets are
 * store.h's), and is called by that function (store/api.c) once its
 * common checks passed: the node kinds are the ones named below.  A slot
 * left NULL is the embedded store's answer (embedded_ops).  Set once,
 * before the store is used, and never changed.
 */
struct store_ops {
	/* mkdir and rmdir in the root: a tenant made, a tenant's cleanup. */
	int (*tenant_make)(struct store *s, const char *name,
			   const struct store_owner *owner,
			   struct store_node **out, struct store_attr *attr);
	int (*tenant_remove)(struct store *s, const char *name,
			     const struct store_cred *cred);
	/* mkdir and rmdir in tenant @tenant, and its .depart. */
	int (*join)(struct store *s, struct store_node *tenant,
		    const char *name, const struct store_owner *owner,
		    struct store_node **out, struct store_attr *attr);
	int (*leave)(struct store *s, struct store_node *tenant,
		     const char *name, const struct store_cred *cred);
	int (*depart)(struct store *s, struct store_node *tenant,
		      const char *name, const struct store_cred *cred);
	/* The children: @parent a parent, @child a child. */
	int (*create)(struct store *s, struct store_node *parent,
		      const char *name, const struct store_owner *owner,
		      bool excl, struct store_node **out, bool *created,
		      struct store_attr *attr);
	int (*unlink)(struct store *s, struct store_node *parent,
		      const char *name);
	int (*link)(struct store *s, struct store_node *child,
		    struct store_node *parent, const char *name,
		    struct store_attr *attr);
	int (*rename)(struct store *s, struct store_node *from,
		      const char *name, struct store_node *to,
		      const char *to_name, unsigned flags);
	int (*setattr)(struct store *s, struct store_node *n, unsigned mask,
		       const struct store_attr *in, struct store_attr *out);
	/* A stage's publication (store_stage_publish). */
	int (*publish)(struct store_stage *st);
	/* Leases. */
	int (*set_ttl)(struct store *s, struct store_node *n, uint64_t ttl_ms);
	int (*renew)(struct store *s, struct store_node *n);
	int (*set_child_ttl)(struct store *s, struct store_node *n,
			     uint64_t ttl_ms);
	/* A pass of the reaper (store_expire). */
	unsigned (*expire)(struct store *s, unsigned budget);
	/* Settle what is due before a drain's state is read (@now the store
	 * clock; @tenant NULL: the store's): expiries and due drains. */
	void (*expire_due)(struct store *s, struct store_node *tenant,
			   uint64_t now);
	/* -o testclock moved by @ms (NULL: -ENOTSUP, fs/ keeps the clock). */
	int (*clock_advance)(struct store *s, uint64_t ms);
	/* store_drain_as (@now false) and store_drain_now (@now true, @cred
	 * NULL); @tenant NULL or a tenant. */
	int (*drain)(struct store *s, struct store_node *tenant,
		     const struct store_cred *cred, bool now);
	/* .stats (@tenant NULL or a tenant). */
	int (*stats)(struct store *s, struct store_node *tenant,
		     struct store_stats *out);
	/* A directory's fsync (NULL: 0 at once). */
	int (*sync)(struct store *s, struct store_node *n);
	/* For store_events_start: tenant @tenant's lines from @seq on that
	 * the authority holds, as @cred may see them, in *@text (malloc'ed,
	 * whole lines, up to number *@upto); no lock held.  0, or -ENODATA
	 * (it has not them), -EIO, -ENOMEM.  NULL: none. */
	int (*events_history)(struct store *s, struct store_node *tenant,
			      const struct store_cred *cred, uint64_t seq,
			      char **text, size_t *len, uint64_t *upto);
	/* Before a root .snapshot of a store with one order of all tenants
	 * (store_root_order): wait, with no lock held, a bounded time, for
	 * that number to be settled.  NULL: nothing to wait for. */
	void (*root_settle)(struct store *s);
	/* Locks on child @n: store_lock (lock_set), store_lock_kick,
	 * store_lock_test, store_lock_drop (NULL: -ENOLCK, the store keeps
	 * none, and nothing to drop); lock_stats adds this mount's locks
	 * to .stats. */
	int (*lock_set)(struct store *s, struct store_node *n,
			const struct store_lock_req *r);
	void (*lock_kick)(struct store *s);
	int (*lock_test)(struct store *s, struct store_node *n,
			 struct store_lock_req *r);
	void (*lock_drop)(struct store *s, struct store_node *n,
			  bool by_owner, uint64_t id);
	void (*lock_stats)(struct store *s, struct store_node *tenant,
			   struct store_stats *o);
	/* The link to the authority (NULL: STORE_LINK_EMBEDDED, and the store
	 * is not shared: store_is_shared). */
	enum store_link (*connection)(const struct store *s);
	/* store_use, store_hold and store_release (NULL: 0, 0, nothing). */
	int (*use)(struct store *s, struct store_node *n);
	uint64_t (*hold)(struct store *s, struct store_node *n);
	void (*release)(struct store *s, uint64_t token);
	/* Stop the engine's threads that run the store's hooks (a
	 * follower applying other mounts' entries), so that the adapter
	 * can let go of what its hooks use (store_quiesce; NULL: none). */
	void (*quiesce)(struct store *s);
	/* Let go of the engine's state, before the core frees the store
	 * (store_free; NULL: nothing to do). */
	void (*close)(struct store *s);
};

/* The embedded store's table: every slot filled (store/embedded.c). */
extern const struct store_ops embedded_ops;

/* store/embedded.c: one transition an engine applies, as the embedded
 * store's TRANSITION runs its own: transition_begin() takes the world
 * lock shared; transition_end() lets it go and runs the event hook (no
 * lock held any more).  ENGINE_TRANSITION(s, call) is the pair around
 * @call, and gives what @call returned. */
void transition_begin(struct store *s);
void transition_end(struct store *s);
#define ENGINE_TRANSITION(s, call)                                    \
	({                                                            \
		int erc_;                                             \
		transition_begin(s);                                  \
		erc_ = (call);                                        \
		transition_end(s);                                    \
		erc_;                                                 \
	})

/* The core functions an engine may call ---------------------------------- */

/* store/child.c: the children's transitions (their store.h forms, less
 * TRANSITION and the common checks) */
int child_expire(struct store *s, struct given *g, struct child *c, uint64_t now);
int child_create(struct store *s, struct given *g, struct store_node *parent, const char *name,
		 const struct store_owner *owner, bool excl,
		 struct store_node **out, bool *created,
		 struct store_attr *attr);
int child_unlink(struct store *s, struct given *g, struct store_node *parent, const char *name);
int child_link(struct store *s, struct given *g, struct store_node *child,
	       struct store_node *parent, const char *name,
	       struct store_attr *attr);
int child_rename(struct store *s, struct given *g, struct store_node *from, const char *name,
		 struct store_node *to, const char *to_name, unsigned flags);

/* store/bucket.c */
/* Call @fn for each link of tenant @t's parents (its parent's node, its
 * name, its state's inode number), under the tenant's lock and the
 * bucket's: @fn only copies what it is given.  Stops at the first
 * non-zero @fn returns, and returns it (0 when none). */
int tenant_each_link(struct store *s, struct tenant *t,
		     int (*fn)(void *arg, struct store_node *parent,
			       const char *name, uint64_t ino),
		     void *arg);
/* Call @fn for each link of state @c (its parent's node, its name),
 * under the state's stripe, until @fn returns true; whether it did. */
bool state_each_link(struct store *s, struct child *c,
		     bool (*fn)(void *arg, struct store_node *parent,
				const char *name),
		     void *arg);

/* store/content.c */
/* What a stage publishes, copied for an engine's publication. */
struct stage_copy {
	struct store_node *child;      /* borrowed: the stage's */
	enum store_stage_mode mode;
	char *data;                    /* the staged bytes (owned) */
	size_t len;
	uint64_t base_version;         /* a CAS stage's base */
	uint64_t seen_version;         /* the state as the stage last saw it */
	int64_t seen_mtime;
	uint64_t writes;               /* the stage's writes when copied */
};
struct store *stage_store(const struct store_stage *st);
/* Copy what @st would publish into @out: 1 when there is something to
 * publish, else what store_stage_publish() returns at once (0 when
 * clean, a refused write's error, -ENOMEM).  Takes the stage's lock. */
int stage_take(struct store_stage *st, struct stage_copy *out);
/* After the engine's publication of @copy answered @rc: the stage based
 * on what is published now, its staged bytes spent unless written again
 * meanwhile; frees @copy's data. */
void stage_settle(struct store_stage *st, struct stage_copy *copy, int rc);
/* Publish @len bytes @data as @c's content (a mirror's write entry), its
 * mtime @mtime when not NULL; takes the stripe.  0, -ESTALE, -ENOMEM. */
int content_publish(struct store *s, struct given *g, struct child *c, const void *data,
		    size_t len, const int64_t *mtime);

/* store/drain.c */
/* The store's drain state and deadline as a load of the engine's
 * authority has them (no lock: before anything reads them, or from the
 * one thread that applies). */
void store_load_state(struct store *s, enum store_state state);
void store_load_drain_deadline(struct store *s, uint64_t deadline);
/* Tenant @t's drain as the engine's authority has it: its state @want
 * and, unless it is and stays ready, its deadline @deadline; the count
 * of drains that run follows.  Takes the tenant's lock. */
void tenant_set_drain(struct store *s, struct tenant *t, enum store_state want,
		      uint64_t deadline);
/* The store's drain is over (what the engine's authority said): its
 * state STORE_DRAINED.  Takes the store lock. */
void store_set_drained(struct store *s);
/* Does a drain of some tenant run?  A hint, read without a lock. */
bool drains_running(struct store *s);
/* The tenants whose drain runs, each with a reference, into @out (at
 * most @max); returns how many.  Takes the store lock. */
size_t drains_tenants(struct store *s, struct store_node **out, size_t max);
/* Is a drain of the store (@t NULL) or of @t due to be cleared at @now? */
bool drain_due(struct store *s, struct tenant *t, uint64_t now);
int drain_start(struct store *s, struct given *g, struct tenant *t, uint64_t now,
		const struct store_cred *cred);
/* Clear @t's drain scope now, as one transition (a mirror's drain clear
 * entry); with @dead the tenant goes too. */
void drain_clear_tenant(struct store *s, struct given *g, struct tenant *t, bool dead);

/* store/events.c */
/* Readers in @t's scope get one "overflow" line here: a mirror reloaded
 * and lost the lines in between.  @t NULL: the store instance ended (the
 * root's readers get "overflow", every tenant's reader -ESTALE). */
void emit_overflow(struct store *s, struct tenant *t);
/* Tenant @tenant was loaded as of its engine's number @seq (it showed no
 * line for it): what its .snapshot's seq row says until its next line. */
void store_tenant_seq_set(struct store_node *tenant, uint64_t seq);
/*
 * The authority has one order of all tenants, whose numbers the root's
 * lines show (struct given's gseq).  The mirror holds the store as
 * after number @seq at least (the root's .snapshot ends there until a
 * line shows a later one); @settled false: a tenant was loaded (from
 * @seq) while other tenants are not applied as far, so no number says
 * what the whole holds until the engine calls again with @settled true
 * (a root .snapshot taken meanwhile says "-").  store_root_order_reset:
 * the same for a new store instance, whose numbers start again.  The
 * applying thread only, before it changes what @seq says.
 */
void store_root_order(struct store *s, uint64_t seq, bool settled);
void store_root_order_reset(struct store *s, uint64_t seq);
/* A tenant whose lines this store did not show (an engine's copy of
 * what its mount uses: a shell) was loaded as of number @seq of the
 * order of all tenants: the root's log lacks its lines up to there, so
 * a root reader started at @seq or before is served by the engine's
 * events_history, never by the log alone.  Any thread. */
void store_root_floor(struct store *s, uint64_t seq);
/* Is the root's number settled (store_root_order)?  False as well when
 * the authority has no such order. */
bool store_root_settled(struct store *s);
void event_hook_run(struct store *s);
/* Another mount changed @n's attributes, which no line tells of: run the
 * touch hook (store_set_touch_hook), if any.  No store lock held. */
void node_touched(struct store *s, struct store_node *n);
/* Ask the kernel to forget tenant @n: run the forget hook
 * (store_set_forget_hook), if any.  No store lock held. */
void node_forget_ask(struct store *s, struct store_node *n);

/* store/lease.c */
/* Set @n's lease as the engine's authority has it: its TTL @ttl_ms and
 * its deadline @deadline (0: none); nothing for a node that never had a
 * lease and gets none.  Takes @n's lock.  0 or -ENOMEM. */
int lease_load(struct store *s, struct store_node *n, uint64_t ttl_ms,
	       uint64_t deadline);
/* Set parent @p's children's TTL (its child_ttl) to @ttl_ms, as the
 * engine's authority did; takes the bucket. */
void parent_set_child_ttl(struct parent *p, uint64_t ttl_ms);
/* The nodes whose lease is due at @now (the top of the deadline heap,
 * walked without taking anything out), each with a reference, into @due
 * (at most @max); returns how many.  Takes the heap's lock. */
size_t lease_due(struct store *s, uint64_t now, struct store_node **due,
		 size_t max);
int lease_change(struct store *s, struct given *g, struct store_node *n, bool set,
		 uint64_t ttl_ms);

/* store/lookup.c */
/* store_lookup() at the store clock @g gives (NULL: the store's). */
int node_lookup(struct store *s, const struct given *g, struct store_node *dir,
		const char *name, struct store_node **out);

/* store/node.c */
void attr_locked(struct store *s, struct store_node *n,
		 struct store_attr *a);
/* Give @o, the owner of a tenant about to be made, what it inherits from
 * the root (the rule of a setgid directory: its group, and the setgid
 * bit); takes the store lock. */
void root_inherit_owner(struct store *s, struct store_owner *o);
/* @n as the tenant, parent or child the core functions below take, or
 * NULL when @n is not of that kind (or NULL). */
struct tenant *node_tenant(struct store_node *n);
struct parent *node_parent(struct store_node *n);
struct child *node_child(struct store_node *n);
/* The tenant of state @c (the tenant of its links' parents), with a
 * reference; NULL when it has no link.  Takes the state's stripe. */
struct store_node *state_tenant(struct store *s, struct child *c);
/* Tenant @t's node, and the number the engine calls it by (0 until the
 * engine sets one; the engine's own lock guards it). */
struct store_node *tenant_node(struct tenant *t);
uint64_t tenant_engine_id(const struct tenant *t);
void tenant_set_engine_id(struct tenant *t, uint64_t id);
/* Tenant @t is one the engine holds only the node of, its authority
 * counting @nparents parents: its link count is 2 + that (what the
 * kernel's stat shows), not 2 + the parents the core holds of it;
 * -1: counted from the core's again (it is loaded).  Returns the link
 * count it gave before (0: the core's).  Any lock, or none. */
uint64_t tenant_set_shell_parents(struct tenant *t, int64_t nparents);
/* How many parents the core holds of @t, dead or alive (as its link
 * count counts them); takes @t's lock. */
size_t tenant_nparents(struct store *s, struct tenant *t);
/* Set directory or state @n's owner (@o: uid, gid and mode) and times
 * as the engine's authority has them; takes @n's lock (and a tenant's
 * acl lock). */
void node_set_meta(struct store *s, struct store_node *n,
		   const struct store_owner *o, int64_t atime, int64_t mtime,
		   int64_t ctime);
/* @n's lease deadline (0: none); @p's generation; @c's version (takes
 * its stripe); @c's mtime set to @mtime (takes its stripe). */
uint64_t node_deadline(const struct store *s, const struct store_node *n);
uint64_t parent_generation(const struct parent *p);
uint64_t state_version(struct store *s, struct child *c);
void state_set_mtime(struct store *s, struct child *c, int64_t mtime);
/* @c's version set to @version (a load's); takes its stripe. */
void state_set_version(struct store *s, struct child *c, uint64_t version);
/* Parent @p's generation, for a parent made by a load or a difference
 * and seen by no one yet (no lock): the engine's authority's. */
void parent_set_generation(struct parent *p, uint64_t generation);
/* @c's link count (takes its stripe). */
uint32_t state_nlink(struct store *s, struct child *c);
/* What a watcher sees change of a directory's or a state's attributes
 * (its owner, mode and leases): node_seen() reads them, under @n's lock
 * (the deadline after it). */
struct node_seen {
	uid_t uid;
	gid_t gid;
	uint16_t mode;
	uint64_t ttl, deadline, child_ttl;
};
void node_seen(struct store *s, struct store_node *n, struct node_seen *out);
/* Is @n dead (or, a special file, its directory)?  A hint: it may die
 * right after. */
bool node_dead(const struct store_node *n);
/* @n's attributes into @a, dead or alive (store_getattr refuses a dead
 * node: this reads it as it was); @n a directory or a state, whose lock
 * it takes. */
void node_attr_any(struct store *s, struct store_node *n,
		   struct store_attr *a);

/* store/setattr.c */
int node_setattr(struct store *s, struct given *g, struct store_node *n, unsigned mask,
		 const struct store_attr *in, struct store_attr *out);

/* store/parent.c */
int parent_join(struct store *s, struct given *g, struct tenant *t, const char *name,
		const struct store_owner *owner, struct store_node **out,
		struct store_attr *attr);
int parent_expire(struct store *s, struct given *g, struct parent *p, uint64_t now);
int parent_leave(struct store *s, struct given *g, struct tenant *t, const char *name,
		 bool must_exist, const struct store_cred *cred);
/* Call @fn for each parent of tenant @t, under the tenant's lock, as
 * tenant_each_link(). */
int tenant_each_parent(struct store *s, struct tenant *t,
		       int (*fn)(void *arg, struct store_node *parent),
		       void *arg);

/* store/base.c */
/* Count refusal @rc by its kind for .stats, and return it. */
int refuse(struct store *s, int rc);

/* store/store.c */
/* Make @s an engine's (its table @ops, its state @engine, which the
 * engine's close slot lets go of): once, before the store is used. */
void store_set_engine(struct store *s, const struct store_ops *ops,
		      void *engine);
/* The engine's state store_set_engine() gave @s (NULL: none). */
void *store_engine(const struct store *s);
/* The engine let go of its state (its close slot): store_engine() gives
 * NULL from now on; the table stays. */
void store_drop_engine(struct store *s);
/* @s's transitions enforce no store-wide ceiling, quota or share of
 * their own from now on (the engine's authority does); store_limits()
 * still shows them.  Before the store is used. */
void store_lift_limits(struct store *s);
/* Number @s's next nodes past @ino_offset (as a new store numbers them
 * past the root and its special files).  Before the store is used, or
 * when a new instance of the engine's authority begins. */
void store_number_from(struct store *s, uint64_t ino_offset);
/* The instance id store_instance_id() shows from now on: the engine's
 * authority's, which a new instance of it changes. */
void store_set_instance(struct store *s, uint64_t instance);
/* store_uptime_ms() counts from now on (once the engine's clock is the
 * store's, after its first load). */
void store_restart_uptime(struct store *s);
/* The store's own gauges and counters (no tombstone aged first): 0,
 * -EINVAL or -ESTALE for @tenant, as store_stats(). */
int stats_gauges(struct store *s, struct store_node *tenant,
		 struct store_stats *o);
/* Add to @o what only this store knows: its own refusals, the memory its
 * open snapshots and stages hold. */
void stats_add_local(struct store *s, struct store_node *tenant,
		     struct store_stats *o);

/* store/tenant.c */
int tenant_create(struct store *s, struct given *g, const char *name,
		  const struct store_owner *owner,
		  struct store_node **out, struct store_attr *attr);
int tenant_cleanup(struct store *s, struct given *g, const char *name,
		   const struct store_cred *cred);
/* The tenant named @name, with a reference, or NULL.  Takes the store
 * lock. */
struct store_node *tenant_find(struct store *s, const char *name);

/* A store instance ended (the engine's authority began anew): every
 * tenant is cleaned up, each one transition under @g (silent with
 * quiet), then the root's .events readers get "overflow" and every
 * tenant's -ESTALE, and the store is ready again (a drain of the old
 * instance is over).  Returns how many inode numbers were handed out
 * past the root's and its special files': the new instance's nodes are
 * numbered past them.  Only the caller changes the tenant table
 * meanwhile; no store lock held. */
uint64_t tenants_end_instance(struct store *s, struct given *g);

/* store/tomb.c */
void tomb_drop_locked(struct store *s, struct tenant *t, struct tomb *tb);
struct tomb *tomb_new(const char *name);
int tomb_insert_locked(struct store *s, struct tenant *t,
		       struct tomb *tb, uint64_t gen, uint64_t now);
int tomb_reserve_locked(struct store *s, struct tenant *t);
/* Add to @t's tombstones @name, of generation @gen, due at @deadline
 * (the engine's authority's), as one transition with no line: takes the
 * world lock shared, then @t's.  0, -EPROTO for a deadline below the
 * tombstone TTL, -ENOMEM. */
int tomb_load(struct store *s, struct tenant *t, const char *name,
	      uint64_t gen, uint64_t deadline);
/* Drop every tombstone of @t (a reload loads them again), as one
 * transition with no line. */
void tombs_drop_all(struct store *s, struct tenant *t);
/* Drop @t's tombstone @name, if any (the engine's authority aged it), as
 * one transition with no line: takes the world lock shared, then @t's. */
void tomb_age(struct store *s, struct tenant *t, const char *name);

#endif /* STATEFS_STORE_ENGINE_H */
