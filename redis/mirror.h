/*
 * mirror.h - a mirror: the embedded store's structures changed only by
 * the shared store's log entries.  Private to redis/: a mirror's files
 * (redis/apply.c applies entries, redis/index.c keeps the index and
 * the tenants followed, redis/load.c loads dumps, redis/dump.c reads
 * them and redis/diff.c applies one as a difference), the engine's
 * transitions and follower (redis/ops.c, redis/follow.c) and the tests
 * use it; fs/ sees store.h only.
 *
 * It names no hiredis type: an entry is a plain struct entry
 * (redis/entry.h, parsed by redis/entry.c from what XREAD gives), a dump
 * an opaque struct dump_val read through redis/dump.c (from what
 * sfs_dump gives; redis/lua/contract.lua's essay says every field).  Every
 * function returns 0 or -errno; none may be called with a store lock
 * held.
 */
#ifndef STATEFS_REDIS_MIRROR_H
#define STATEFS_REDIS_MIRROR_H

#include <stdbool.h>
#include <stdint.h>

#include "redis/entry.h"
#include "store/engine.h"
#include "store/store.h"

/* A value of a dump (an array, a string, a number): read only through
 * redis/dump.c's functions, which alone know how a dump travels. */
struct dump_val;
struct redisReply;

/* A mirror's own structures (its three files'): the index's entries, the
 * tenants followed, the mirror. */
struct mnode {
	UT_hash_handle hh;
	uint64_t ino;                  /* local */
	struct store_node *n;          /* counted */
	bool doomed;                   /* dead at the last sweep */
};

struct mtenant {
	UT_hash_handle hh;
	uint64_t tid;
	struct tenant *t;              /* counted; NULL until it is made */
	uint64_t seq;                  /* the last seq applied */
	bool gone;
	/* Use (redis/use.c), all under the mirror's lock: a shell is the
	 * tenant's node alone, its copy dropped and its log not followed
	 * (seq then means nothing); when it was last used (the store's
	 * clock); how many of its inodes the kernel holds; when the kernel
	 * was last asked to forget it; an unload under way.  A shell's
	 * link count is the store's (tenant_set_shell_parents): its parent
	 * count as of its log's seq @shell_seq, read again when that moved
	 * (remote_shells_refresh). */
	bool shell;
	bool unloading;
	uint64_t used_ms;
	int64_t holds;
	uint64_t asked_ms;
	uint64_t shell_seq;
	uint64_t own_n;                /* entries its callers applied */
	char name[];                   /* immutable */
};

struct mirror {
	/* LOCK_ENGINE_APPLY: held by whoever changes the mirror by the
	 * store's logs, across the change (an entry applied, a tenant
	 * loaded, unloaded or dropped, the whole reset): the follower, or
	 * a caller applying its own call's entries (redis/own.c). */
	pthread_mutex_t apply;
	/* apply: the last number of the store's order of all tenants
	 * applied (gorder), 0 when not known: a caller applies its own
	 * entry only when it is the next (mirror_apply_next). */
	_Atomic uint64_t gseq_applied;
	pthread_mutex_t lock;          /* LOCK_ENGINE_INDEX */
	struct mnode *index;           /* lock: local ino -> node */
	size_t added;                  /* lock: since the last sweep */
	struct mtenant *tenants;       /* lock: tid -> tenant */
	/* lock: the highest tenant id followed in this instance.  Ids are
	 * given in order, so one at or below it that is not followed has
	 * gone (its entry is dropped when its log ends). */
	uint64_t max_tid;
	/* What was applied of the root log: written by the apply thread,
	 * read by transitions waiting for their outcome (wait_seq). */
	_Atomic uint64_t root_seq;
	/* The store has one order of all tenants (its meta's gseq, read
	 * from the root's dump): the root numbered by it, a tenant's load
	 * unsettling it (store_root_order).  Written by the apply thread. */
	_Atomic bool gorder;
	_Atomic uint64_t ino_offset;   /* changes with a new instance */
	_Atomic uint64_t testclock_ms;
	char by[64];                   /* immutable: this mount's id */
	/* The shared store behind it (redis/internal.h), NULL for a mirror
	 * alone (a test's).  Set once, before the store is used. */
	struct remote *remote;
};

/* The mirror of store @s: its engine state (store_set_engine). */
static inline struct mirror *mirror_of(const struct store *s)
{
	return (struct mirror *)store_engine(s);
}

/* The shared store behind @s, or NULL. */
static inline struct remote *remote_of(const struct store *s)
{
	struct mirror *m = mirror_of(s);

	return m ? m->remote : NULL;
}

/* A mirror alone: the embedded transitions, and its index freed with the
 * store (redis/index.c). */
extern const struct store_ops mirror_ops;

/* redis/apply.c */

/*
 * Apply entry @e of tenant @tid's log (0: the root log) in order.  An
 * entry at or below what was applied already is skipped (0); one that
 * is not the next (a gap: the position fell off a trimmed log) is
 * -ERANGE, nothing applied; one the mirror cannot apply as the shared
 * store did (its structures differ: a bug, or a lost entry) is
 * -EUCLEAN, and the caller reloads the tenant.  -ENOENT for a tenant
 * the mirror does not follow.
 */
int mirror_apply(struct store *s, uint64_t tid, const struct entry *e);

/*
 * Apply entry @e of tenant @tid's log, given rather than read (by this
 * mount's own call's outcome, on the caller's thread, or by the news of
 * another's, on the follower's: redis/own.c): only when it is the
 * next entry of a tenant the mirror holds whole (not a shell, not being
 * unloaded, not gone), the next number of the store's order where the
 * store has one, and of a kind that leaves the tenant in place.  0 when
 * applied; -EAGAIN when it is not the next or not of such a kind
 * (nothing applied: the follower applies it from the log); another
 * -errno when it did not apply, which the follower meets again.
 */
int mirror_apply_next(struct store *s, uint64_t tid, const struct entry *e);

/* redis/index.c */

/*
 * Make @s (new, empty, not used yet) a mirror: its transitions enforce no
 * store-wide ceiling, quota or share of their own (the shared store
 * does; store_limits() still shows them), an entry whose by is @by is
 * this mount's own (its lines are not internal), and the shared store's
 * inode number N is N + @ino_offset here.  0 or -ENOMEM.
 */
int mirror_attach(struct store *s, const char *by, uint64_t ino_offset);

/* The store is a new instance: forget every tenant and node (the caller
 * has removed them from the hierarchy), and number the new instance's
 * nodes past @ino_offset. */
int mirror_reset(struct store *s, uint64_t ino_offset);

/* store_free()'s part: the mirror's index and tenants. */
void mirror_free(struct store *s);

/*
 * A tenant of the store appeared (a root tenant entry, or sfs_dump of
 * the root): follow @tid, named @name, from seq 0 on.  Nothing changes
 * when it is followed already.
 */
int mirror_tenant_add(struct store *s, uint64_t tid, const char *name);

/*
 * What the mirror has applied of tenant @tid's log (the root's for 0),
 * and whether the tenant has gone (its cleanup applied, or a drain of
 * the store removed it; a tenant gone is forgotten, and any id at or
 * below the highest followed that is not followed any more has gone).
 * -ENOENT for a tenant not followed yet.
 */
int mirror_applied(struct store *s, uint64_t tid, uint64_t *seq, bool *gone);

/* Set what the root log was applied up to (after a load of the root). */
void mirror_root_at(struct store *s, uint64_t seq);

/* The tenants followed and not gone (@shells: the shells, which are not
 * followed, redis/use.c), into @tids (at most @cap; NULL when @cap is
 * 0); returns how many there are. */
size_t mirror_tenants(struct store *s, uint64_t *tids, size_t cap,
		      bool shells);

/* The tenants not followed: the shells and those being unloaded (their
 * copy half dropped), as mirror_tenants gives them. */
size_t mirror_tenants_unfollowed(struct store *s, uint64_t *tids, size_t cap);

/* The id of the newest tenant named @name the mirror follows and has not
 * seen go (made or not yet), or 0.  A scan: for refusals, which are
 * rare. */
uint64_t mirror_tid_named(struct store *s, const char *name);

/* The tenant id of tenant node @tenant, or 0. */
uint64_t mirror_tid_of(struct store *s, struct store_node *tenant);

/* The shared store's inode number of local node @n. */
uint64_t mirror_remote_ino(struct store *s, const struct store_node *n);

/* The node the shared store calls @ino, dead or not (until the index
 * sweeps it), with a reference, or NULL. */
struct store_node *mirror_node_any(struct store *s, uint64_t ino);

/* The live node the shared store calls @ino, with a reference, or NULL. */
struct store_node *mirror_node(struct store *s, uint64_t ino);

/* Under testclock: the store's clock as the root log last told it. */
uint64_t mirror_testclock(struct store *s);

/* Put node @n (its reference handed over) in the index. */
int index_put(struct store *s, struct mirror *m, struct store_node *n);
/* The live node with local inode @ino, with a reference, or NULL. */
struct store_node *index_get(struct mirror *m, uint64_t ino);
/* The tenant followed as @tid, or NULL (mirror->lock held). */
struct mtenant *mt_find_locked(struct mirror *m, uint64_t tid);
/* Follow @mt as tenant node @t (its reference handed over; NULL: no
 * copy), which learns its id (mirror->lock held). */
void mt_set_locked(struct mirror *m, struct mtenant *mt, struct tenant *t);

/* redis/load.c */

/*
 * Load tenant @tid from @dump, the reply of sfs_dump for it (OK now seq
 * lastid T PARENTS STATES TOMBS), silently (no .events line).  A tenant
 * the mirror holds already gives its .events readers one "overflow"
 * line; when the dump is of the same incarnation of it, its copy is
 * made the dump by the difference (mirror_diff_tenant): the nodes that
 * live on are kept, with their handles.  Else, or when that fails, it
 * is replaced whole: every node of the old copy dies (a handle of it
 * gets ESTALE) and the dump's nodes are made with the store's inode
 * numbers.  Copies the log's last id into @lastid (at least 32 bytes).
 * 0, -EPROTO, -ENOMEM.
 */
int mirror_load_tenant(struct store *s, uint64_t tid,
		       const struct dump_val *dump, char *lastid, size_t idlen);

/* The same for a reload the follower asked for, unless a caller applied
 * entries of the tenant since it read @own_before (mirror_own_count)
 * before it asked for the dump, which may then be older than they are:
 * -EBUSY, nothing loaded (the follower reads the log again). */
int mirror_reload_tenant(struct store *s, uint64_t tid,
			 const struct dump_val *dump, char *lastid,
			 size_t idlen, uint64_t own_before);

/* How many entries of tenant @tid its callers applied
 * (mirror_apply_next) so far. */
uint64_t mirror_own_count(struct store *s, uint64_t tid);

/*
 * Make tenant @tid, which the store holds as @T (its hash, K V: as a
 * dump's row 4), a shell: its node alone, with the store's inode number,
 * owner, times and drain, silently; nothing of it is followed.  Nothing
 * changes when the mirror holds the tenant already.  0, -EPROTO,
 * -ENOMEM.
 */
int mirror_shell_tenant(struct store *s, uint64_t tid,
			const struct dump_val *T);

/* Shell @tid's parent count is @nparents as of its log's @seq (its link
 * count then 2 + that); nothing when it is no shell (any more) or shows
 * a count of a later seq.  The kernel is asked to forget a count that
 * changed. */
void mirror_shell_parents(struct store *s, uint64_t tid, uint64_t nparents,
			  uint64_t seq);

/*
 * Drop tenant @tid's copy, silently, keeping its node (its owner and
 * times as they were): the tenant becomes a shell.  Its parents, states,
 * tombstones go; nothing the kernel holds may be among them (the caller
 * checked).  The applying thread only.
 */
void mirror_unload_tenant(struct store *s, uint64_t tid);

/* Forget tenant @tid, which is gone (a shell's cleanup, read in the
 * root log), its node removed with hidden lines so the kernel forgets
 * its name (as a new instance removes the old tenants). */
void mirror_shell_gone(struct store *s, uint64_t tid);

/* redis/dump.c */

/* A dump as sfs_dump's reply @rep gives it (borrowed: valid while the
 * reply is). */
const struct dump_val *dump_of(const struct redisReply *rep);

/* A dump's fields, as mirror_load_tenant reads and checks them: an
 * array's length (0 for what is no array), a K V array's field (its
 * length too; a number), an array's element (an array, a string, a
 * number), a name this mount could show, an owner. */
size_t dump_len(const struct dump_val *v);
const char *dump_kv(const struct dump_val *v, const char *name);
const char *dump_kv_len(const struct dump_val *v, const char *name,
			size_t *len);
bool dump_kvu(const struct dump_val *r, const char *name, uint64_t *v);
const struct dump_val *dump_arr(const struct dump_val *v, size_t i);
const char *dump_str(const struct dump_val *v, size_t i);
bool dump_u64(const struct dump_val *d, size_t i, uint64_t *v);
bool dump_name_ok(const struct store *s, const char *name);
bool dump_owner(const struct dump_val *r, struct store_owner *o);
/* Set what a dump's row @r says of node @n: owner, mode and times, its
 * lease (0 or -ENOMEM), a tenant's drain (@T its row),
 * a tenant's tombstones (@tombs the TOMBS array: 0, -EPROTO, -ENOMEM). */
void dump_times(struct store *s, struct store_node *n,
		const struct dump_val *r);
int dump_lease(struct store *s, struct store_node *n, const struct dump_val *r);
void dump_drain(struct store *s, struct tenant *t, const struct dump_val *T);
int dump_tombs(struct store *s, struct tenant *t, const struct dump_val *tombs);


/* redis/diff.c */

/*
 * Make tenant @t, which the mirror holds, what @dump (of the same
 * incarnation of it) says, by the difference: nodes whose inode number
 * is in the dump are kept (their local numbers, the kernel's handles),
 * the rest goes, what the copy lacks is made, contents, attributes and
 * leases are set; every line of it is internal and hidden (the echo and
 * the inval thread see it, .events readers do not).  0; -EPROTO for a
 * malformed dump (nothing changed); -EUCLEAN or -ENOMEM when it could
 * not be applied (the caller replaces the tenant whole).  The applying
 * thread only, no store lock held.
 */
int mirror_diff_tenant(struct store *s, struct tenant *t,
		       const struct dump_val *dump);

#endif /* STATEFS_REDIS_MIRROR_H */
