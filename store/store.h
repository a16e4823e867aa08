/*
 * store.h - the authority of statefs, as the adapter sees it.
 *
 * The store owns every fact statefs knows: tenants, parents (members that
 * own a bucket), children (items) and their states, departed tombstones,
 * the counters behind .stats, and each node's inode number.  It is pure
 * C: no FUSE, no file formats.  Every transition is one function below;
 * each returns 0 (or a positive result) on success and a negative errno
 * on failure, and a failed transition changes nothing.
 *
 * Shape: tenant -> parent bucket -> child link -> state.  Each fact is
 * kept once, in the bucket of the parent every operation on it names.
 *
 *   store      tenant table (name -> tenant)
 *   tenant     parent table (name -> parent), tombstones (name -> gen)
 *   parent     one bucket: lock, generation, child links (name -> state);
 *              a parent that leaves is taken out of the table with its
 *              links in one critical section, and a tombstone filed
 *   state      the child's content, version, attributes and link count;
 *              one state may be linked from several parents of a tenant
 *
 * A node (tenant, parent, state, special file) is one incarnation: its
 * inode number comes from a monotone allocator and is never reused, so a
 * rejoin or a re-create is a new node, and an operation that reaches the
 * store through an older node fails with -ESTALE.
 *
 * The seam
 * --------
 * This header is the authority's interface: all fs/ and layout/ see of
 * the store, and what a second authority (a shared store) implements.
 * It has the transitions, the reads (lookup, listings, attributes,
 * leases, .stats, snapshots, special files and their inode numbers,
 * store_special_ino), the drains, the event log and the hooks that run
 * after a transition, and the reaper (store_reaper_start, store_reap_due:
 * when things end on their own is the authority's policy).  Callers hold
 * opaque handles (nodes, counted with store_node_ref/unref; stages; event
 * readers) and touch no field of them; the only structs whose fields
 * they see are the plain values they fill or are given: store_limits,
 * store_clock, store_owner, store_cred (store/cred.h, with the permission
 * rules), store_attr, store_stats, store_lease, store_dirlist and
 * store_dirent, store_event, store_snapshot and store_snap_row.
 * scripts/check-seam.sh, run by `make test`, keeps it so.
 *
 * Not here: what the kernel holds (its inode table and lookup counts,
 * fs/inode.c; how long it may cache, layout/'s struct layout_mount), and
 * the embedded store's own mechanics (the world lock, buckets and
 * stripes, the deadline heap, the event ring, a snapshot's copy-before-
 * write epochs: store/internal.h and the file of each), nor what tests
 * use to look inside it or steer it (store/store_test.h).
 *
 * How it is built is told where it is built: each file of store/ opens
 * with the mechanism it owns and the locks it takes; the shared structs,
 * the lock order and a map of the files are in store/internal.h.
 */
#ifndef STATEFS_STORE_H
#define STATEFS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "store/cred.h"
#include "store/lock.h"
#include "store/hooks.h"

struct store;
struct store_node;
struct store_stage;

/* Inode number of the root directory (the kernel's FUSE_ROOT_ID). */
#define STORE_ROOT_INO 1

/* Special files: each directory that has them owns this many inode slots. */
#define STORE_NSPECIAL 8

enum store_kind {
	STORE_ROOT = 0,   /* the mountpoint */
	STORE_TENANT,     /* MNT/T */
	STORE_PARENT,     /* MNT/T/P, one bucket */
	STORE_CHILD,      /* MNT/T/P/C, a state (possibly linked twice) */
	STORE_SPECIAL,    /* MNT/.x or MNT/T/.x, a slot of the root or a tenant */
};

enum store_state { STORE_READY = 0, STORE_DRAINING, STORE_DRAINED };

/*
 * A tenant's share of a store-wide ceiling left to the store: half the
 * ceiling, rounded up, so that no one tenant can take all of it.
 * store_new() puts the number in its place (store_limits() shows it).
 */
#define STORE_SHARE_AUTO UINT64_MAX

/*
 * Ceilings, quotas and durations.  0 as a quota or a TTL means "none".
 * Durations are milliseconds.
 */
struct store_limits {
	uint64_t max_tenants;
	uint64_t max_parents;
	uint64_t max_children;   /* states, store-wide */
	uint64_t max_bytes;      /* content bytes, store-wide */
	uint64_t max_payload;    /* content bytes of one child */
	uint64_t max_name;       /* bytes in one name */
	uint64_t max_tombstones; /* departed tombstones, store-wide */
	uint64_t tombstone_ttl_ms;
	uint64_t parent_quota;   /* entries (links) in one parent; 0 = none */
	uint64_t tenant_quota;   /* entries (links) in one tenant; 0 = none */
	/* The most of each store-wide ceiling one tenant may hold (its
	 * share, refused with EDQUOT): 0 = no share, only the ceiling;
	 * STORE_SHARE_AUTO (the default) = half the ceiling. */
	uint64_t tenant_max_parents;
	uint64_t tenant_max_children;   /* states */
	uint64_t tenant_max_bytes;
	uint64_t tenant_max_tombstones; /* .depart of any name included */
	/* Memory open .snapshot files may hold (store_snapshot_hold):
	 * store-wide, and one uid's share of it (STORE_SHARE_AUTO: half;
	 * 0: no share; uid 0 has none). */
	uint64_t max_snapshot_bytes;
	uint64_t user_max_snapshot_bytes;
	uint64_t default_ttl_ms; /* TTL a new child starts with; 0 = none */
	uint64_t drain_window_ms;
	bool testclock;          /* manual clock advanced through .clock */
	/* Lines the event log keeps (STORE_EVENT_LOG, >= 1).  Not a mount
	 * option: tests that make many stores use a small one. */
	uint64_t event_log;
};

/* Fill @l with the documented defaults (the tenant shares
 * STORE_SHARE_AUTO). */
void store_limits_default(struct store_limits *l);

/*
 * Time bounds.  Every duration the store takes (a lease, a child_ttl,
 * tombstone_ttl, default_ttl, drain_window) and every
 * advance of the manual clock is at most STORE_DURATION_MAX_MS (10^9 s,
 * about 31.7 years), and a clock the store reads stays at or below
 * STORE_CLOCK_MAX_MS (8 * 10^12 ms, about 253 years: CLOCK_MONOTONIC
 * counts from boot, and the manual clock refuses to pass it).  So a
 * deadline, now + duration, is below 9 * 10^12 ms: it never wraps, in
 * milliseconds nor as int64 nanoseconds (9.22 * 10^12 ms).  What is
 * longer is refused with -EINVAL, never cut short or wrapped.
 */
#define STORE_DURATION_MAX_MS 1000000000000ULL
#define STORE_CLOCK_MAX_MS (8 * STORE_DURATION_MAX_MS)

/*
 * The injected monotonic clock.  now_ms() must never go backwards, and
 * should stay at or below STORE_CLOCK_MAX_MS (past it, leases are
 * refused).  NULL now_ms means CLOCK_MONOTONIC.
 */
struct store_clock {
	uint64_t (*now_ms)(void *arg);
	void *arg;
};

/* Who creates a node, and with which permission bits (umask applied). */
struct store_owner {
	uid_t uid;
	gid_t gid;
	mode_t mode; /* permission bits only */
};

/* What stat(2) shows of a node. */
struct store_attr {
	uint64_t ino;
	mode_t mode;      /* S_IFDIR/S_IFREG | permission bits */
	uid_t uid;
	gid_t gid;
	uint32_t nlink;
	uint64_t size;
	struct timespec atime, mtime, ctime;
};

/*
 * Counters behind .stats.  Gauges are exact (owned by the transitions);
 * the event counters only grow.
 */
enum store_refusal {
	STORE_REFUSED_CAPACITY = 0, /* ENOSPC */
	STORE_REFUSED_QUOTA,        /* EDQUOT */
	STORE_REFUSED_PAYLOAD,      /* EFBIG */
	STORE_REFUSED_DRAINING,     /* EROFS */
	STORE_REFUSED_EXISTS,       /* EEXIST */
	STORE_REFUSED_STALE,        /* ESTALE */
	STORE_REFUSED_CONFLICT,     /* EAGAIN */
	STORE_REFUSED_GONE,         /* ENOENT: departed or removed target */
	STORE_NREFUSAL
};

struct store_stats {
	uint64_t tenants, parents, children, links, tombstones, bytes, staged_bytes;
	uint64_t snapshot_bytes;   /* held by open snapshots, store-wide */
	uint64_t admissions, removals, expiries, joins, leaves;
	uint64_t refused[STORE_NREFUSAL];
	uint64_t damaged;  /* a shared store's calls refused as damaged (EIO) */
	/* A shared store's locks (store_lock): those this mount's owners
	 * hold (one per owner, kind and child) and its waiting requests. */
	uint64_t locks_held, lock_waiters;
};

/* Lifecycle ---------------------------------------------------------- */

/*
 * Make a new, empty store instance with a fresh random instance id.
 * @clock may be NULL (CLOCK_MONOTONIC).  Each STORE_SHARE_AUTO share
 * becomes half its ceiling, rounded up.  Returns 0 or -ENOMEM/-EINVAL
 * (max_name or event_log 0, a duration over STORE_DURATION_MAX_MS).
 */
int store_new(const struct store_limits *limits,
	      const struct store_clock *clock, struct store **out);

/* Free the store and every node.  No other thread may use it. */
void store_free(struct store *s);
/* Stop every thread of the store's engine that runs its hooks (on a
 * shared store, the follower: it applies other mounts' entries and calls
 * the hooks as it does).  After it no hook runs but from a caller's own
 * transition; for an adapter about to let go of what its hooks use (the
 * FUSE session).  Idempotent; store_free() does it too. */
void store_quiesce(struct store *s);

/* A store of an engine's (store/engine.h) is made by the engine: the
 * shared store on Redis by redis_store_new() (redis/redis.h).
 * store_free() frees it as any other. */

/* Is @s a copy of a shared store's, its authority an engine's?  (A
 * daemon's SIGTERM then does not drain it: other mounts use it.) */
bool store_is_shared(const struct store *s);

/* The line .stats shows: "store embedded", or whether the latest
 * exchange with the shared store succeeded. */
enum store_link {
	STORE_LINK_EMBEDDED = 0,
	STORE_LINK_CONNECTED,
	STORE_LINK_DISCONNECTED,
};
enum store_link store_connection(const struct store *s);

/*
 * fsync of a directory: return once this mount has applied every
 * transition the shared store committed before the call (as ZooKeeper's
 * sync).  The embedded store returns 0 at once.  -EIO when the store
 * could not be reached within store_timeout.
 */
int store_sync(struct store *s, struct store_node *n);

/*
 * -o testclock on a shared store: move the store's clock @ms forward
 * (the store's, so every mount's clock moves) and expire what is due.
 * -ENOTSUP for the embedded store (fs/ keeps its manual clock), -EINVAL
 * past the bounds of STORE_DURATION_MAX_MS, -EIO unreachable.
 */
int store_clock_advance(struct store *s, uint64_t ms);

const struct store_limits *store_limits(const struct store *s);
uint64_t store_instance_id(const struct store *s);
uint64_t store_now_ms(const struct store *s);
uint64_t store_uptime_ms(const struct store *s);
enum store_state store_state(const struct store *s);

/* Nodes ---------------------------------------------------------------- */

/*
 * Take or drop a reference.  Every node pointer a caller holds is
 * counted; store_node_unref() frees a node once it is out of the
 * hierarchy and nothing references it.
 */
void store_node_ref(struct store_node *n);
void store_node_unref(struct store *s, struct store_node *n);

enum store_kind store_node_kind(const struct store_node *n);
uint64_t store_node_ino(const struct store_node *n);
/* For STORE_SPECIAL: the slot index (0..STORE_NSPECIAL-1). */
int store_node_slot(const struct store_node *n);
/* Depth in the tree: root 0, tenant 1, parent 2, child 3; a special file
 * has the depth of its directory plus one. */
int store_node_depth(const struct store_node *n);
/* The tenant a directory belongs to (the node itself for a tenant; a
 * special file of a tenant gives its tenant); NULL for the root and its
 * special files, and for a child (a state has no tenant of its own: it
 * is its parents').  Borrowed: valid while the caller holds a reference
 * to @n. */
struct store_node *store_node_tenant(struct store_node *n);
/* Name of a tenant or parent node (borrowed, immutable).  "" otherwise. */
const char *store_node_name(const struct store_node *n);
/* True while the node is part of the live hierarchy. */
bool store_node_live(const struct store_node *n);

/* The root node; borrowed, lives as long as the store. */
struct store_node *store_root(struct store *s);

/*
 * The inode number of the special file in slot @slot (0..STORE_NSPECIAL-1)
 * of the root or tenant numbered @dir_ino: the numbers right after the
 * directory's own, which a tenant takes as one block.  The one place
 * that arithmetic is written; store_special() gives the node.
 */
uint64_t store_special_ino(uint64_t dir_ino, int slot);

/*
 * The special-file node in slot @slot of @dir (the root or a tenant),
 * with a new reference.  -ENOTDIR for other kinds, -ESTALE when @dir is
 * dead, -EINVAL for a bad slot.
 */
int store_special(struct store *s, struct store_node *dir, int slot,
		  struct store_node **out);

/* Attributes --------------------------------------------------------- */

/* Read the attributes of @n.  -ESTALE when @n is dead. */
int store_getattr(struct store *s, struct store_node *n, struct store_attr *a);

#define STORE_SET_MODE  (1u << 0)
#define STORE_SET_UID   (1u << 1)
#define STORE_SET_GID   (1u << 2)
#define STORE_SET_ATIME (1u << 3)
#define STORE_SET_MTIME (1u << 4)
#define STORE_SET_SIZE  (1u << 5)
#define STORE_SET_KILL_SUID (1u << 6) /* clear S_ISUID, whatever the mode */
#define STORE_SET_KILL_SGID (1u << 7) /* clear S_ISGID, whatever the mode */
#define STORE_SET_RENEW     (1u << 8) /* renew the lease too (touch) */

/*
 * Change attributes of @n: the fields named by @mask from @in, as one
 * transition with one outcome: every refusal comes before the first
 * change.  The KILL bits clear their mode bit and leave the others as
 * they are, so a concurrent chmod is not undone.  A size change of a
 * child is a publication (truncate or zero-extend, version + 1); -EFBIG
 * over max_payload, -ENOSPC over max_bytes, -EDQUOT over the tenant's
 * share of it, -EISDIR for a directory.  STORE_SET_RENEW also renews the
 * lease of a child or parent as store_renew() does (-EROFS while
 * draining, for a node that has a lease; ignored for other kinds).
 * -ESTALE when @n is dead.  Fills @out (may be NULL) with the
 * attributes as of the transition.
 */
int store_setattr(struct store *s, struct store_node *n, unsigned mask,
		  const struct store_attr *in, struct store_attr *out);

/* The generation of a parent (-EINVAL for other kinds, -ESTALE dead). */
int store_parent_generation(struct store *s, struct store_node *n,
			    uint64_t *gen);
/* The version of a child's state (-EINVAL for other kinds). */
int store_child_version(struct store *s, struct store_node *n,
			uint64_t *version);

/* Tree transitions ---------------------------------------------------- */

/*
 * Find @name in directory @dir (root, tenant or parent) and return the
 * node with a new reference.  Special names are not the store's business
 * (layout/ maps them to store_special()).  -ENOENT when absent, -ESTALE
 * when @dir is dead, -ENOTDIR when @dir is a child or special file.
 */
int store_lookup(struct store *s, struct store_node *dir, const char *name,
		 struct store_node **out);

/*
 * mkdir: in the root, create a tenant; in a tenant, join a parent
 * (generation 1, or the departed tombstone's generation + 1, clearing the
 * tombstone).  Returns the new node with a new reference.
 * -EEXIST live name, -ENOSPC ceiling, -EDQUOT the tenant's share of
 * max_parents, -EROFS draining, -EPERM inside a parent, -ESTALE dead
 * @dir.  Names are validated by the caller.
 */
int store_mkdir(struct store *s, struct store_node *dir, const char *name,
		const struct store_owner *owner, struct store_node **out);

/*
 * rmdir: in a tenant, leave parent @name (cascade + departed tombstone,
 * one critical section of the bucket); in the root, clean up tenant
 * @name (everything in it, one transition).  -ENOENT absent, -ENOSPC
 * tombstone pool full, -EDQUOT the tenant's share of it full (nothing
 * removed); inside a parent, -ENOTDIR for
 * a child and -ENOENT for nothing, as rmdir(2) answers.
 *
 * With @cred (NULL: no check), the cascade must be one @cred could do by
 * hand on Linux, emptying the directory first (root always may): a
 * parent with children needs write and search permission on the parent,
 * and a sticky parent not @cred's also needs every child to be @cred's;
 * a tenant with parents needs write and search permission on the tenant,
 * and each parent must pass the same rule, a sticky tenant not @cred's
 * also needing every parent to be @cred's.  Else -EACCES, nothing
 * removed.  The check and the removal are one critical section.  Write
 * and search permission on @dir itself is the kernel's to check.
 */
int store_rmdir(struct store *s, struct store_node *dir, const char *name,
		const struct store_cred *cred);

/*
 * Record a departed tombstone for parent @name of tenant @tenant, whether
 * or not it exists (an out-of-order member-left); a live parent leaves
 * with the same cascade as store_rmdir(), under the same @cred check
 * (NULL: none).  -ENOSPC when the pool is full, -EDQUOT when the
 * tenant's share of it is (a name that never joined counts like any
 * other), -EACCES refused.
 */
int store_depart(struct store *s, struct store_node *tenant, const char *name,
		 const struct store_cred *cred);

/*
 * Admit child @name into parent @parent: one critical section of the
 * bucket (store ready, parent live, ceilings, quotas, insert).  When the
 * name exists: -EEXIST if @excl, else the existing child is returned and
 * *created is false.  -ENOSPC max_children, -EDQUOT parent_quota,
 * tenant_quota or the tenant's share of max_children.  -EPERM unless
 * @parent is a parent.
 */
int store_create(struct store *s, struct store_node *parent, const char *name,
		 const struct store_owner *owner, bool excl,
		 struct store_node **out, bool *created);

/*
 * Terminal removal of child @name from @parent.  Exactly one caller wins;
 * others get -ENOENT.  -ESTALE when @parent is dead.  -EISDIR/-EPERM for
 * names that are not children.
 */
int store_unlink(struct store *s, struct store_node *parent, const char *name);

/*
 * Add a link @name in @parent to the state of @child (same tenant, else
 * -EXDEV).  Admission at the destination (quotas, ready).  -ESTALE when
 * @child or @parent is dead, -EEXIST when @name exists.
 */
int store_link(struct store *s, struct store_node *child,
	       struct store_node *parent, const char *name);

/*
 * The transitions that give the kernel an entry (mkdir, create, link)
 * come in a second form for the adapter, store_*_entry(): the same
 * transition, which also fills @attr with the node's attributes as of
 * the transition, so the reply needs no second call that could find the
 * node changed or gone.  The adapter makes room for the kernel's lookup
 * before it calls (fs/inode.c), so once the store has changed the reply
 * has nothing left that can fail.  See store_mkdir(), store_create() and
 * store_link() for the rest.
 */
int store_mkdir_entry(struct store *s, struct store_node *dir, const char *name,
		      const struct store_owner *owner, struct store_node **out,
		      struct store_attr *attr);
int store_create_entry(struct store *s, struct store_node *parent,
		       const char *name, const struct store_owner *owner,
		       bool excl, struct store_node **out, bool *created,
		       struct store_attr *attr);
int store_link_entry(struct store *s, struct store_node *child,
		     struct store_node *parent, const char *name,
		     struct store_attr *attr);

#define STORE_RENAME_NOREPLACE (1u << 0)
#define STORE_RENAME_EXCHANGE  (1u << 1)

/*
 * Move child @name of @from to @to_name in @to (same tenant, else
 * -EXDEV), atomically: both buckets are locked in inode order.  A
 * replaced destination is a terminal removal.  -EPERM for anything but a
 * child between parents, -EEXIST under NOREPLACE, -ENOENT for a missing
 * source (or a missing destination under EXCHANGE).
 */
int store_rename(struct store *s, struct store_node *from, const char *name,
		 struct store_node *to, const char *to_name, unsigned flags);

/*
 * A consistent listing of a directory's entries, taken in one critical
 * section (the snapshot a readdir stream serves from), in no promised
 * order (tenants and parents come in the order they were made, a
 * parent's children in its table's order); each has its name, inode
 * number and kind.  Special files are not included.  Free with store_dirlist_free().
 */
struct store_dirent {
	uint64_t ino;
	enum store_kind kind;
	char *name;
};
struct store_dirlist {
	size_t n;
	struct store_dirent *e;
};
int store_list(struct store *s, struct store_node *dir,
	       struct store_dirlist *out);
void store_dirlist_free(struct store_dirlist *l);

/* Content: staged writes, one publication per close/fsync ------------- */

/* How a stage publishes, chosen from the open flags. */
enum store_stage_mode {
	STORE_STAGE_READ = 0, /* read-only: never publishes */
	STORE_STAGE_REPLACE,  /* O_TRUNC: publish the staged bytes */
	STORE_STAGE_APPEND,   /* O_APPEND: append atomically to current */
	STORE_STAGE_CAS,      /* in-place edit against the open version */
};

/*
 * Open a stage on child @child.  A REPLACE stage is dirty from the start
 * (an O_TRUNC open publishes even with no write).  -ESTALE when dead.
 */
int store_stage_open(struct store *s, struct store_node *child,
		     enum store_stage_mode mode, struct store_stage **out);

/*
 * store_stage_open() in two steps, for an open that creates its child
 * (FUSE create): store_stage_new() takes what can fail (-ENOMEM) before
 * the admission, store_stage_attach() binds the stage to the child the
 * admission returned and cannot fail.  A stage attached to a child that
 * was removed in between answers -ESTALE from then on.  An unattached
 * stage is freed with store_stage_close().
 */
int store_stage_new(struct store *s, enum store_stage_mode mode,
		    struct store_stage **out);
void store_stage_attach(struct store_stage *st, struct store_node *child);

/*
 * Stage @len bytes at @off (ignored for APPEND).  Limits are checked
 * here so the failing write reports them: -EFBIG over max_payload,
 * -ENOSPC over max_bytes, -EDQUOT over the tenant's share of it (the
 * stage's size counts beside every published and staged byte, until
 * it is published or closed), -ESTALE when the child is gone, -EBADF on
 * a read stage.  Returns @len.  A refused write abandons the stage: what
 * it staged is dropped, later writes, the publication (fsync) and the
 * flush (close) return the same error, and nothing is published (the
 * whole open-write-close transition failed and changed nothing).
 */
ssize_t store_stage_write(struct store_stage *st, const void *buf,
			  size_t len, uint64_t off);

/*
 * Read up to @len bytes at @off from what this stage sees: its own staged
 * bytes when it has written (after the pinned state for APPEND: its
 * pending tail), else the state pinned at open.  On
 * a read-only stage a read at offset 0 re-pins the current state, so a
 * new pass sees the newest publication, never a mix; so does a read at
 * or past the end of the pinned state when the current state begins
 * with all of it (an append), so a reader that has seen everything reads
 * on into the newest (tail -f), having read a prefix of it.  A writable
 * stage keeps the state it opened on (its CAS base).  -ESTALE if gone.
 */
ssize_t store_stage_read(struct store_stage *st, void *buf, size_t len,
			 uint64_t off);

/* Truncate or extend the staged content (ftruncate on an open file).
 * -EFBIG, -ENOSPC, -EDQUOT as a write; -EBADF on a read stage, -ENOMEM. */
int store_stage_truncate(struct store_stage *st, uint64_t size);

/* Take every refusal of store_stage_truncate(@st, @size) now, changing
 * nothing but the room it needs (made), so that the truncate which
 * follows cannot fail, unless another write of the same stage grew it
 * meanwhile: for a truncate that goes with a transition (fs/: an
 * ftruncate also sets the times). */
int store_stage_truncate_reserve(struct store_stage *st, uint64_t size);

/* fallocate mode 0: make what this stage sees at least @off + @len bytes
 * long, as a write of zeros past its end would, with the refusals of
 * store_stage_write(); 0 when it is long enough already. */
int store_stage_allocate(struct store_stage *st, uint64_t off, uint64_t len);

/*
 * Publish the staged content as one transition if the stage is dirty
 * (close, fsync).  -EAGAIN when a CAS stage lost (another publication
 * since open), -ESTALE when the child is gone, -EFBIG/-ENOSPC/-EDQUOT
 * limits.
 * On success the stage is clean and based on the new version; on
 * failure it is clean too (the staged bytes are dropped: a failed
 * publication changes nothing and is not retried on release).
 * A publication stamps the state's mtime with the time of day, unless
 * an mtime was set (store_setattr) after this stage's last write or
 * truncation, or after its open if it has neither, with no other
 * publication in between: that one is kept (cp -p sets it before close).
 */
int store_stage_publish(struct store_stage *st);

/*
 * close(2) of one descriptor (FUSE flush): publish only when this stage
 * was written to or truncated.  An O_TRUNC open that has not written yet
 * (a shell that dups and closes the descriptor before writing) must not
 * publish an empty state in between; it publishes at release.  After a
 * refused write it publishes nothing and returns that write's error
 * (every close of the open file does), so close(2) never reports success
 * for an open-write-close that changed nothing.
 */
int store_stage_flush(struct store_stage *st);

/* Drop a stage without publishing. */
void store_stage_close(struct store_stage *st);

/* Leases (TTL) ---------------------------------------------------------- */

/*
 * A node's lease: @ttl_ms (0 = none) and, when it has one, the deadline
 * on the store's monotonic clock.  A child or a parent past its deadline
 * is never visible or usable, whether or not the reaper has run yet:
 * lookups and listings skip it, operations on it give -ESTALE, and its
 * name is free for a new admission.
 */
struct store_lease {
	uint64_t ttl_ms;
	uint64_t deadline_ms;   /* 0 when ttl_ms is 0 */
	uint64_t child_ttl_ms;  /* parents: the TTL new children start with */
};

/* Read the lease of a child or parent (-EINVAL for other kinds). */
int store_lease_get(struct store *s, struct store_node *n,
		    struct store_lease *out);

/*
 * Give child or parent @n a TTL (0 removes the lease): the deadline
 * becomes now + ttl.  -EROFS while draining, -ESTALE dead or expired,
 * -EINVAL for other kinds, a TTL over STORE_DURATION_MAX_MS or a clock
 * past STORE_CLOCK_MAX_MS (nothing changes).
 */
int store_set_ttl(struct store *s, struct store_node *n, uint64_t ttl_ms);

/*
 * Set the TTL future children of parent @n start with (0: the store's
 * default_ttl).  -EINVAL for other kinds or a TTL over
 * STORE_DURATION_MAX_MS (nothing changes), -ESTALE dead or expired.
 */
int store_set_child_ttl(struct store *s, struct store_node *n,
			uint64_t ttl_ms);

/*
 * Renew the lease of @n (touch): deadline = now + ttl.  A node without a
 * lease is left as it is (returns 0).  -EROFS while draining, -ESTALE
 * dead or expired, -EINVAL with a clock past STORE_CLOCK_MAX_MS.
 */
int store_renew(struct store *s, struct store_node *n);

/*
 * One pass of the reaper: remove nodes whose deadline has passed (a child
 * as by unlink, a parent as by rmdir), age out due tombstones and end the
 * drains whose window is over, at most @budget removals, oldest deadline
 * first.  Finds them in a deadline heap (no scan).  Returns how many
 * nodes expired.
 */
unsigned store_expire(struct store *s, unsigned budget);

/*
 * Run passes until nothing is due (bounded passes, so transitions get the
 * locks between them).  For a manual clock (limits.testclock) that was
 * just moved: it runs every expiry the move made due before returning.
 * Returns how many nodes expired.
 */
unsigned store_reap_due(struct store *s);

/*
 * The reaper: a thread of the store's that runs store_reap_due() when the
 * earliest deadline (store_next_deadline) comes, so leases, tombstones
 * and drain windows end on time with nobody calling in.  It sleeps until
 * then, and a transition that sets an earlier deadline wakes it; with
 * nothing due it never wakes.  Under limits.testclock no thread starts
 * (the clock moves only by hand: see store_reap_due).  Start it once the
 * hooks are set (the expiries it runs call them); 0 or -EAGAIN.
 * store_reaper_stop() ends and joins it, when it runs; store_free() does
 * too.
 */
int store_reaper_start(struct store *s);
void store_reaper_stop(struct store *s);

/*
 * The earliest deadline still pending (leases and tombstones), or
 * UINT64_MAX when there is none: when the reaper should run next.
 */
uint64_t store_next_deadline(struct store *s);

/* Events ------------------------------------------------------------------ */

/*
 * Every transition appends one line to the store's event log, inside its
 * critical section, so sequence numbers follow the order in which the
 * transitions happened (store/events.c, "Event order"):
 *
 *   SEQ \t OP \t TENANT \t PARENT \t CHILD \t GENERATION \t VERSION \n
 *
 * An empty field is "-".  OP is one of join leave depart create write
 * unlink link rename exchange expire drain cleanup.  GENERATION is the
 * parent's; VERSION the state's.  Three operations name a second child of
 * the same tenant in two more fields, so that a replay of the lines
 * rebuilds the tree:
 *
 *   ... \t VERSION \t FROM_PARENT \t FROM_CHILD \n
 *
 *   link      PARENT/CHILD now reaches the state FROM_PARENT/FROM_CHILD
 *             reaches (one of its names at that point of the stream);
 *   rename    the child FROM_PARENT/FROM_CHILD is now PARENT/CHILD; a
 *             destination it replaced has its own unlink line before
 *             it, so the destination is free when the line applies;
 *   exchange  the two names trade their states; VERSION is that of the
 *             state now under PARENT/CHILD.
 *
 * A transition that changes more than one node appends one line for what
 * it did, not one per child: a leave, depart or expiry of a parent (and a
 * drain's clear of one) removes its children with it, a cleanup removes
 * the tenant with everything in it; a publication on a state with
 * several links appends one write line per name.  The log keeps the newest
 * limits.event_log lines (STORE_EVENT_LOG unless a test chose fewer);
 * each reader may fall at most STORE_EVENT_WINDOW (or the whole log)
 * lines behind its end (the newest line, or the last the watch machinery
 * has acted on when it gates readers, see store_events_gate), and lose
 * no line it had not reached to the ring wrapping, before it gets one
 * "overflow" line and continues within its window (lines it does not
 * see excepted).  Appending never waits for a reader.
 */
#define STORE_EVENT_LOG    65536
#define STORE_EVENT_WINDOW 4096

enum store_op {
	STORE_OP_JOIN = 0,
	STORE_OP_LEAVE,
	STORE_OP_DEPART,
	STORE_OP_CREATE,
	STORE_OP_WRITE,
	STORE_OP_UNLINK,
	STORE_OP_LINK,
	STORE_OP_RENAME,
	STORE_OP_EXPIRE,
	STORE_OP_DRAIN,
	STORE_OP_CLEANUP,
	STORE_OP_EXCHANGE,
};

/*
 * A reader of the log (opaque): its position, its scope and, optionally,
 * whose eyes it reads with.  Its owner calls the store_events_* functions
 * on it from one thread at a time (they move it), and nothing else
 * touches it.
 */
struct store_event_reader;

/*
 * A reader that sees only the internal lines (an expiry, a .depart, a
 * drain's clear: what the watcher machinery acts on): the others never
 * make it fall behind, not even once they have left the log; it falls
 * behind only when an internal line it had not reached was overwritten.
 * So a reader that acts on internal lines alone may sleep while the log
 * moves on and catch up cheaply when one comes.
 */
#define STORE_EVENTS_INTERNAL  (1u << 0)
/* A reader whose window is the whole log, not STORE_EVENT_WINDOW. */
#define STORE_EVENTS_WHOLE_LOG (1u << 1)

/*
 * Open a reader at the present (the next line appended is its first), of
 * the whole store (@tenant NULL) or of one tenant, with @flags
 * (STORE_EVENTS_*).  With @cred (NULL: every line in scope) it sees only
 * the lines of tenants @cred may list (store_cred_may_list), judged by
 * the tenant's owner, group and mode when each line was appended; lines
 * of no tenant are everyone's, and uid 0 sees every line.  Lines it does
 * not see keep their numbers (the reader sees gaps) and, while they are
 * in the log, never make it fall behind.  The reader keeps its own copy
 * of @cred.  Returns 0 and the reader in *@out, -ESTALE when @tenant
 * is dead, or -ENOMEM.  Close it with store_events_close().
 */
int store_events_open(struct store *s, struct store_node *tenant,
		      const struct store_cred *cred, unsigned flags,
		      struct store_event_reader **out);
void store_events_close(struct store_event_reader *r);

/*
 * Gate @r: from now on it reads, and reports as pending, only lines
 * before sequence number @until (0: no gate).  The watch machinery holds
 * .events readers back until it has acted on a line (fs/'s inval thread).
 */
void store_events_gate(struct store_event_reader *r, uint64_t until);

/*
 * Start @r (of tenant @tenant, NULL for the root) at the first line
 * numbered @seq or more, before its first read.  Numbers are those its
 * lines show: a place in the log, or on a shared store the tenant's own
 * (the root's reader skips each tenant's lines below @seq).  What the log
 * lacks of a tenant's lines its engine gives if it has them (a shared
 * store's log in Redis: no lock may be held, and its owner keeps every
 * other use of @r off meanwhile).  A number neither holds gives one
 * "overflow" line, then the log's oldest (the window becomes the whole
 * log); a number not reached yet waits for it.
 */
void store_events_start(struct store *s, struct store_event_reader *r,
			struct store_node *tenant, uint64_t seq);

/* The sequence number @r reads next. */
uint64_t store_events_position(const struct store_event_reader *r);

/* The sequence number the next line appended will get: where a reader
 * opened now starts. */
uint64_t store_events_end(struct store *s);

/*
 * Copy whole lines for @r into @buf (at most @len bytes), advancing it:
 * the bytes copied, 0 when nothing is pending, -ESTALE for a tenant's
 * reader past the end of its store instance.  One that fell behind gets
 * "overflow\n" first and jumps to the oldest line within its window.
 */
ssize_t store_events_read(struct store *s, struct store_event_reader *r,
			  char *buf, size_t len);

/* True when @r has something to read (or -ESTALE).  Moves @r past the
 * lines it does not see. */
bool store_events_pending(struct store *s, struct store_event_reader *r);

/*
 * One event as the watcher machinery needs it (fs/ echoes internal
 * removals through the mount so inotify sees them).
 */
struct store_event {
	uint64_t seq;
	enum store_op op;
	/* Not caused by a request on this mount's path, so the kernel has
	 * not raised inotify for it: an expiry, a .depart, a drain's clear,
	 * a tenant's removal by a store drain; on a shared store also every
	 * change another mount made (the watch machinery replays it through
	 * the mount). */
	bool internal;
	enum store_kind kind;   /* what went: STORE_PARENT or STORE_CHILD */
	uint64_t ino;           /* its inode */
	uint64_t tenant_ino;    /* the inode of its tenant */
	char *tenant, *parent, *child; /* names, "" when none */
	/* A link's, rename's or exchange's other name (the source; of an
	 * exchange, the name the state left); "" for every other line. */
	char *from_parent, *from_child;
};

/*
 * Fetch the event with sequence number >= @r's position (scope ignored,
 * but a STORE_EVENTS_INTERNAL reader gets only internal events), for the
 * watcher machinery.  Returns 1 and fills @ev (free with
 * store_event_free), 0 when none pending, -EOVERFLOW (@r moved to the
 * oldest) when it fell behind, -ENODATA for a line the log had no memory
 * to keep (skipped), -ENOMEM when @ev could not be filled (@r unchanged:
 * try again).
 */
int store_events_next(struct store *s, struct store_event_reader *r,
		      struct store_event *ev);
void store_event_free(struct store_event *ev);

/* The hooks a mount sets, and its use: store/hooks.h. */

/* Drain ------------------------------------------------------------------ */

/*
 * A drain of the whole store (@tenant NULL) or of one tenant.  The first
 * store_drain() starts it (deadline = now + drain_window); later calls
 * change nothing.  While it runs, every new tenant, parent, child, link
 * and lease renewal in scope is refused with -EROFS; existing children
 * may still be written and removed.  At the deadline, or as soon as no
 * child remains in scope, everything in scope is cleared in one
 * transition (the tenants too for the whole store; a drained tenant
 * stays, empty) and the scope is drained: still refusing.  Returns 0,
 * or -ESTALE for a dead tenant.
 */
int store_drain(struct store *s, struct store_node *tenant);

/*
 * store_drain() as @cred (NULL: no check).  A tenant's drain starts only
 * when its clear is a cascade @cred could do by hand, by the rule of
 * store_rmdir() for a tenant (write and search permission on the tenant
 * when it has parents, each parent passing the rule of a parent's leave,
 * the sticky bits); else -EACCES and nothing starts.  Judged when the
 * drain starts, in the same critical section; a drain already running
 * is not judged again (the write changes nothing).  A drain of the whole
 * store is not judged: it is its mount owner's.  -ENOMEM when the check
 * could not be made.
 */
int store_drain_as(struct store *s, struct store_node *tenant,
		   const struct store_cred *cred);

/*
 * End a running drain's window now (a second SIGTERM): the scope is
 * cleared at once.  A scope that is not draining starts and ends in one
 * go.  Returns 0 or -ESTALE.
 */
int store_drain_now(struct store *s, struct store_node *tenant);

/*
 * The drain state of the store or of one tenant (a tenant is draining or
 * drained when the store is), settling a drain that is due first; with
 * @ms_left the time left of a running drain's window.
 */
enum store_state store_drain_state(struct store *s, struct store_node *tenant,
				   uint64_t *ms_left);

/*
 * The earliest deadline that ends @n's visibility, 0 for none: its own
 * lease and, for a child, the leases of the parents that link it (a
 * parent's expiry removes its children).  What the kernel may cache
 * about @n must not outlive it.
 */
uint64_t store_node_horizon(struct store *s, struct store_node *n);

/*
 * Call @fn(@arg, directory inode, name) for every name @n has now: each
 * link of a child, the entry of a parent or a tenant.  For a child @fn
 * runs under the state's stripe: it must only copy what it is given,
 * and call nothing of the store's.
 */
void store_node_names(struct store *s, struct store_node *n,
		      void (*fn)(void *arg, uint64_t dir_ino, const char *name),
		      void *arg);

/* Snapshot ------------------------------------------------------------------- */

/*
 * One line of a snapshot.  Names point into the snapshot's own memory.
 * Fields that do not apply to a kind are -1 (numbers) or "" (names).
 */
enum store_snap_kind {
	STORE_SNAP_TENANT = 0,
	STORE_SNAP_PARENT,
	STORE_SNAP_CHILD,
	STORE_SNAP_TOMBSTONE,
};

struct store_snap_row {
	enum store_snap_kind kind;
	const char *tenant, *parent, *child;
	int64_t generation, version, size, nlink, ttl_ms_left, ino;
	/* The tenant's owner and permission bits, on every row of it: who
	 * may see the row (fs/ filters the root's .snapshot by them). */
	uid_t tenant_uid;
	gid_t tenant_gid;
	mode_t tenant_mode;
};

struct store_snapshot {
	size_t n;
	struct store_snap_row *rows;
	char *arena;                    /* the names */
	uint64_t taken_ms;              /* store clock when it was taken */
	uint64_t stall_us;              /* how long all transitions were
					 * held off */
	/* The number of the last event line it includes (its "seq" row:
	 * a reader started at seq + 1 reads every transition after it); -1
	 * where there is no one order (a shared store's root: per tenant). */
	int64_t seq;
};

/*
 * Take a consistent point-in-time listing of the store (@tenant NULL) or
 * of one tenant: every tenant, parent, child link and tombstone in scope,
 * as they were at one instant between two transitions (no transition
 * half in it); expired nodes are left out, and a child row's nlink counts
 * only the links the snapshot shows (not those of a parent past its
 * deadline, reaped or not).  Rows come sorted by name (byte order):
 * tenant by tenant, the tenant's row, each parent's row followed by its
 * children's, then its tombstones; so on every mount alike.
 *
 * Transitions are held off only for two short moments (fixing the
 * instant, O(tenants); withdrawing the copy machinery), reported in
 * stall_us.  In between, buckets are copied one at a time under their own
 * lock, and a transition that is about to change a bucket not copied yet
 * copies it first (store/snapshot.c).  The cost, O(nodes in scope)
 * time and memory, falls on the caller, who formats the rows afterwards
 * holding nothing.  One snapshot is taken at a time.  Free with
 * store_snapshot_free().  0, -ENOMEM or -ESTALE.
 */
int store_snapshot_take(struct store *s, struct store_node *tenant,
			struct store_snapshot *out);
void store_snapshot_free(struct store_snapshot *snap);

/*
 * The memory a snapshot's text holds while it is open (fs/ formats it
 * and keeps it per open file) is bounded: reserve @bytes for @uid
 * against max_snapshot_bytes and against @uid's share of it,
 * user_max_snapshot_bytes (uid 0, root, has no share: the store-wide
 * bound alone), so that no one user's open snapshots take the daemon's
 * memory.  Returns 0, -ENFILE when the store-wide bound would be passed,
 * -EMFILE when @uid's share would, -ENOMEM; nothing is held on failure.
 * Give it back with store_snapshot_release() when the file is closed.
 * Takes a leaf lock only.
 */
int store_snapshot_hold(struct store *s, uid_t uid, uint64_t bytes);
void store_snapshot_release(struct store *s, uid_t uid, uint64_t bytes);

/* Observability --------------------------------------------------------- */

/* Counters of the store (@tenant NULL) or of one tenant (gauges only are
 * per tenant: tenants=1, parents, children, links, tombstones, bytes and
 * staged_bytes, what its open stages hold unpublished). */
int store_stats(struct store *s, struct store_node *tenant,
		struct store_stats *out);

#endif /* STATEFS_STORE_H */
