/*
 * ops.c - a store with the shared store behind it: several mounts on
 * several hosts share one state through Redis (docs/shared-store.md).
 *
 * The design
 * ----------
 * One interface, two authorities.  fs/ calls store.h whatever the store
 * is.  A store made by redis_store_new() is a mirror (redis/apply.c):
 * the embedded store's own structures, changed only by applying the
 * shared store's log entries in seq order.  Each transition of store.h
 * makes its common checks (store/api.c), then calls its slot of the
 * store's method table (store/engine.h): the embedded store's runs its
 * own code; a mirror's, redis_ops below, calls the function of statefs's
 * Functions library that makes that transition (redis/lua/contract.lua,
 * whose opening essay is the
 * contract between Redis and the mount: keys, calling convention,
 * outcomes, entries), here, through the connection pool
 * (redis/conn.c).  Redis makes every check, in the embedded store's
 * order, and decides every number; the mount never reads, checks and
 * writes from the client.  Each call carries an operation id (this
 * mount's id, a counter: MOUNT:N; a retry after a lost reply applies it
 * at most once) and a deadline on the server's real time, TIME, whatever
 * the store's clock (a lower bound of it now plus store_timeout: a call
 * that reaches Redis later does nothing).
 * The outcome gives the seq of the entry it appended (or the seq the log
 * was at, for a refusal), and a success the entries themselves: the
 * calling thread applies them at once when they are the next ones
 * (redis/own.c), else the transition waits until this mount's
 * mirror has applied that seq (read-your-writes: an EEXIST is never
 * followed by an ENOENT from a stale mirror); then it answers from the
 * mirror: the node by the inode number the outcome gives, with a
 * reference, and its attributes.  Reads (lookups, getattr, listings,
 * stage reads, snapshots, leases, names, events) are the mirror's,
 * unchanged.
 *
 * The follower (redis/follow.c) is one thread with one dedicated
 * connection, blocked in XREAD on the root log and every followed
 * tenant's log; it applies each entry in order, reloads a tenant from
 * sfs_dump when its position fell off a trimmed log (a gap) or the
 * mirror could not apply an entry, and makes the whole mirror a new
 * store instance when Redis's instance changed (ESTALEINST: restarted
 * without persistence, flushed, failed over to another history): every
 * node dies (old handles get ESTALE), .stats shows the new instance,
 * everything is loaded again from the dumps, and the new instance's
 * inode numbers are offset past every number this mount ever handed
 * out, so the kernel never sees one reused.
 *
 * Events: each applied entry appends its .events lines with the
 * entry's seq numbers (per tenant; the root log's for root lines).  A
 * line of a change this mount asked for is internal as the embedded
 * store makes it (the kernel raised inotify for the request already);
 * a line of another mount's change, or of any reaper's expiry, is
 * internal: fs/'s echo machinery replays it through the mount so that
 * inotify sees it.  Entries carry who made them (by: the operation id's
 * MOUNT).
 *
 * Time: the mirror's clock (its store_clock) is the estimate of the
 * store's: local CLOCK_MONOTONIC plus the offset learned from every
 * reply's now_ms, never going backwards.  Under testclock the store's
 * clock is meta clock_ms: moved by .clock writes (sfs_clock_advance,
 * then sfs_expire of what is due) and learned from the root log's clock
 * entries.  The mirror never expires anything by itself: store_expire()
 * asks Redis (sfs_expire of each tenant and of the store's scope) when
 * the mirror's deadline heap says something is due, and the entries
 * that come back remove what went.  A node past its deadline by the
 * estimate is invisible at once (is_expired, as in the embedded store).
 *
 * Failure: rconn retries within store_timeout; a mutation that got no
 * reply in time is fenced (sfs_fence: its recorded outcome, or a
 * refusal recorded so that it never runs; redis/call.c), so it
 * returns what it did, or -EIO and did not happen.  .stats says "store
 * connected" or "disconnected".  A key of the store that is not as
 * statefs made it (outcome EDAMAGED KEY: nothing was written; or an
 * ESTALE for a node the mirror, caught up, still shows: settle_node)
 * is -EIO, counted (.stats store_damaged) and logged once
 * (remote_damaged_key, redis/call.c); the follower leaves a
 * tenant's log of another type out until it is mended (redis/follow.c).
 *
 * What it owns
 * ------------
 * Here: the transitions, each a call of the library's function and an
 * answer from the mirror.  The shared store's other files: the calling
 * convention, outcomes and the wait for the follower
 * (redis/call.c); the clock estimate (redis/estimate.c) and expiry
 * (redis/clock.c); start (redis/start.c), a new instance's init
 * (redis/instance.c), loads (redis/load.c), stop (redis/stop.c),
 * .stats (redis/stats.c); the follower (redis/follow.c); the mirror
 * (redis/apply.c, redis/index.c, redis/dump.c, redis/diff.c); a call's
 * own entries applied by its caller (redis/own.c); every
 * file in order in redis/internal.h.
 * What they share, struct remote (redis/internal.h): the configuration,
 * the pool, this mount's id and operation counter, the clock estimate,
 * the instance, and the follower's state.
 *
 * Threads and locks
 * -----------------
 * Transitions run on the caller's thread and hold no store lock while
 * they wait on the network or for the follower: they call Redis, then
 * wait on remote->applied under remote->lock (LOCK_ENGINE_STATE, held alone:
 * the mirror's own lock is taken only after it is let go), then read
 * the mirror as any reader does; applying their own entries, they take
 * the mirror's apply lock (LOCK_ENGINE_APPLY) after the reply came.  The follower thread (follow.c)
 * applies entries through the embedded transitions, which take the
 * store's locks in their order, and then broadcasts remote->applied.
 */
#include "store/engine.h"
#include "redis/mirror.h"
#include "redis/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <sys/stat.h>

/* The node the outcome names (inode @ino), with a reference, for the
 * caller (and its attributes as of now when @attr). */
static int answer(struct store *s, uint64_t ino, struct store_node **out,
		  struct store_attr *attr)
{
	/* Removed since (another mount's change applied right after): the
	 * node still, dead, as the embedded store returns it in that race. */
	struct store_node *n = mirror_node_any(s, ino);

	if (!n)
		return -EIO;
	if (attr && store_getattr(s, n, attr) == -ESTALE) {
		/* Dead already: its attributes as it was made (the kernel's
		 * next look finds it gone). */
		node_attr_any(s, n, attr);
		if (attr->nlink == 0)
			attr->nlink = 1;
	}
	*out = n;
	return 0;
}

/* Transitions --------------------------------------------------------------- */

static int remote_tenant_make(struct store *s, const char *name,
			      const struct store_owner *owner,
			      struct store_node **out, struct store_attr *attr)
{
	struct store_owner o = *owner;
	struct args a = { .n = 0 };
	redisReply *rep = NULL;
	uint64_t tid, ino;
	bool again = false;
	int rc;

	/* A new tenant inherits from this mount's root. */
	root_inherit_owner(s, &o);
	a_str(&a, name);
	a_u64(&a, o.uid);
	a_u64(&a, o.gid);
	a_u64(&a, o.mode & 07777);
retry:
	rc = remote_fcall(s, "sfs_mkdir_tenant", true, 0, NULL, a.n, a.v,
			  NULL, &rep);
	if (rc == 0) {
		uint64_t seq = out_u64(rep, 2);

		tid = out_u64(rep, 3);
		ino = out_u64(rep, 4);
		rc = wait_seq(s, 0, out_u64(rep, 5));
		/* The tenant layout: listed at the root, made in its slot. */
		if (rc == 0 && remote_tenant_layout(s))
			rc = remote_tenant_make2(s, name, tid, &o, out_u64(rep, 1),
						 out_u64(rep, 6), &seq);
		if (rc == 0)
			rc = wait_seq(s, tid, seq);
		if (rc == 0)
			rc = answer(s, ino, out, attr);
	} else if (rep) {
		/* A refusal: from here on the mirror answers as Redis
		 * did (read-your-writes), so the tenant an EEXIST
		 * names, another mount's, is there when this returns:
		 * the root log names it, its own log makes it. */
		/* The tenant layout: a name listed whose maker stopped
		 * between two steps is rolled forward: a tenant made now
		 * (the refusal holds: the tenant it names is there), or one
		 * removed unlisted, and the mkdir made again, once. */
		if (rc == -EEXIST && remote_tenant_layout(s) && !again &&
		    remote_tenant_roll_forward(s, name) == 1) {
			freeReplyObject(rep);
			rep = NULL;
			again = true;
			goto retry;
		}
		if (wait_seq(s, 0, out_u64(rep, 2)) == 0 && rc == -EEXIST &&
		    (tid = mirror_tid_named(s, name)) != 0)
			wait_seq(s, tid, 1);
	}
	if (rep)
		freeReplyObject(rep);
	return rc;
}

static int remote_join(struct store *s, struct store_node *dir,
		       const char *name, const struct store_owner *owner,
		       struct store_node **out, struct store_attr *attr)
{
	struct args a = { .n = 0 };
	char key[160];
	redisReply *rep = NULL;
	uint64_t tid, ino;
	int rc;

	if (node_dead(dir))
		return refuse(s, -ESTALE);
	if (!tkey(s, dir, &tid, key, sizeof(key)))
		return refuse(s, -ESTALE);
	a_str(&a, name);
	a_u64(&a, owner->uid);
	a_u64(&a, owner->gid);
	a_u64(&a, owner->mode & 07777);
	rc = remote_fcall(s, "sfs_join", true, 1,
			  (const char *[]){ key }, a.n, a.v, NULL, &rep);
	ino = rc == 0 ? out_u64(rep, 3) : 0;
	rc = settle(s, tid, rc, rep);
	if (rc == 0)
		rc = answer(s, ino, out, attr);
	if (rep)
		freeReplyObject(rep);
	return rc;
}

/* rmdir of tenant @name (@tid as the mirror knows it, 0: none) in the
 * tenant layout: cleared in its slot, then unlisted at the root; a
 * tenant found gone in its slot is unlisted all the same (the roll
 * forward of an rmdir that stopped between the two), and ENOENT. */
static int tenant_remove2(struct store *s, const char *name, uint64_t tid,
			  struct args *a)
{
	char key[160];
	redisReply *rep = NULL;
	int rc;

	if (!tid)
		return -ENOENT;
	remote_tenant_key(s, tid, key, sizeof(key));
	rc = remote_fcall(s, "sfs_rmdir_tenant", true, 1,
			  (const char *[]){ key }, a->n, a->v, NULL, &rep);
	if (rc == 0)
		rc = wait_seq(s, tid, out_u64(rep, 2));
	if (rc == 0 || rc == -ENOENT || (rc == -ESTALE && rep)) {
		int urc = remote_tenant_unlist(s, name, tid);

		if (rc == 0)
			rc = urc;
		else
			rc = -ENOENT;
	}
	if (rep)
		freeReplyObject(rep);
	return rc;
}

static int remote_tenant_remove(struct store *s, const char *name,
				const struct store_cred *cred)
{
	struct args a = { .n = 0 };
	char groups[4096];
	redisReply *rep = NULL;
	struct store_node *n, *dir = store_root(s);
	uint64_t tid = 0, gen;
	int rc;

	gen = remote_generation(s);
	if (store_lookup(s, dir, name, &n) == 0) {
		tid = mirror_tid_of(s, n);
		store_node_unref(s, n);
	}
	a_str(&a, name);
	a_cred(&a, cred, groups, sizeof(groups));
	if (remote_tenant_layout(s))
		return tenant_remove2(s, name, tid, &a);
	rc = remote_fcall(s, "sfs_rmdir_tenant", true, 0, NULL, a.n,
			  a.v, NULL, &rep);
	if (remote_generation(s) != gen) {
		/* Made again on a new instance (remote_fcall): the
		 * tenant, if any, is the new instance's. */
		tid = 0;
		if (store_lookup(s, dir, name, &n) == 0) {
			tid = mirror_tid_of(s, n);
			store_node_unref(s, n);
		}
	}
	if (rc == 0) {
		if (tid)
			rc = wait_seq(s, tid, out_u64(rep, 2));
		if (rc == 0)
			rc = wait_seq(s, 0, out_u64(rep, 3));
	} else if (rep) {
		/* A refusal: from here on the mirror answers as Redis
		 * did (read-your-writes), so a tenant an ENOENT says
		 * another mount removed is gone from it too. */
		if (wait_seq(s, 0, out_u64(rep, 2)) == 0 && rc == -ENOENT &&
		    tid)
			wait_seq(s, tid, UINT64_MAX);
	}
	if (rep)
		freeReplyObject(rep);
	return rc;
}

static int remote_leave(struct store *s, struct store_node *dir,
			const char *name, const struct store_cred *cred)
{
	struct args a = { .n = 0 };
	char key[160], groups[4096];
	redisReply *rep = NULL;
	uint64_t tid = 0;
	int rc;

	if (!tkey(s, dir, &tid, key, sizeof(key)))
		return refuse(s, -ESTALE);
	a_str(&a, name);
	a_cred(&a, cred, groups, sizeof(groups));
	rc = remote_fcall(s, "sfs_leave", true, 1,
			  (const char *[]){ key }, a.n, a.v, NULL, &rep);
	rc = settle(s, tid, rc, rep);
	if (rep)
		freeReplyObject(rep);
	return rc;
}

static int remote_depart(struct store *s, struct store_node *tenant,
			 const char *name, const struct store_cred *cred)
{
	struct args a = { .n = 0 };
	char key[160], groups[4096];
	redisReply *rep = NULL;
	uint64_t tid;
	int rc;

	if (!tkey(s, tenant, &tid, key, sizeof(key)))
		return refuse(s, -ESTALE);
	a_str(&a, name);
	a_cred(&a, cred, groups, sizeof(groups));
	rc = remote_fcall(s, "sfs_depart", true, 1, (const char *[]){ key },
			  a.n, a.v, NULL, &rep);
	rc = settle(s, tid, rc, rep);
	if (rep)
		freeReplyObject(rep);
	return rc;
}

static int remote_create(struct store *s, struct store_node *parent, const char *name,
		  const struct store_owner *owner, bool excl,
		  struct store_node **out, bool *created,
		  struct store_attr *attr)
{
	struct args a = { .n = 0 };
	char key[160];
	redisReply *rep = NULL;
	uint64_t tid, ino = 0;
	bool made = false;
	int rc;

	/* A tenant gone from the mirror: the admission's order, a drain of
	 * the store (EROFS) before the parent's death (ESTALE). */
	if (!tkey(s, store_node_tenant(parent), &tid, key, sizeof(key)))
		return refuse(s, store_state(s) != STORE_READY ? -EROFS : -ESTALE);
	a_u64(&a, mirror_remote_ino(s, parent));
	a_str(&a, name);
	a_u64(&a, owner->uid);
	a_u64(&a, owner->gid);
	a_u64(&a, owner->mode & 07777);
	a_str(&a, excl ? "1" : "0");
	rc = remote_fcall(s, "sfs_create", true, 1, (const char *[]){ key },
			  a.n, a.v, NULL, &rep);
	if (rc == 0) {
		ino = out_u64(rep, 3);
		made = out_u64(rep, 4) == 1;
	}
	rc = settle_node(s, tid, rc, rep, parent);
	if (rc == 0)
		rc = answer(s, ino, out, attr);
	if (rc == 0)
		*created = made;
	if (rep)
		freeReplyObject(rep);
	return rc;
}

static int remote_unlink(struct store *s, struct store_node *parent,
			 const char *name)
{
	struct args a = { .n = 0 };
	char key[160];
	redisReply *rep = NULL;
	uint64_t tid;
	int rc;

	if (!tkey(s, store_node_tenant(parent), &tid, key, sizeof(key)))
		return refuse(s, -ESTALE);
	a_u64(&a, mirror_remote_ino(s, parent));
	a_str(&a, name);
	rc = remote_fcall(s, "sfs_unlink", true, 1, (const char *[]){ key },
			  a.n, a.v, NULL, &rep);
	rc = settle_node(s, tid, rc, rep, parent);
	if (rep)
		freeReplyObject(rep);
	return rc;
}

/*
 * The other tenant of a call about two (link, rename: tenant @tid's key
 * first, tenant @other's second, which decides EXDEV).  In the tenant
 * layout the call goes to the first tenant's slot alone and names the
 * other by its TID (EXDEV there), and the other's node @n gone is the
 * mirror's ESTALE.  The keys to send (1 or 2), or -ESTALE.
 */
static int other_tenant(struct store *s, struct args *a, uint64_t tid,
			uint64_t other, struct store_node *n)
{
	if (!remote_tenant_layout(s))
		return 2;
	if (other != tid && node_dead(n))
		return -ESTALE;
	a_u64(a, other);
	return 1;
}

static int remote_link(struct store *s, struct store_node *child,
		struct store_node *parent, const char *name,
		struct store_attr *attr)
{
	struct args a = { .n = 0 };
	struct child *c = node_child(child);
	struct store_node *ct, *n;
	char key[160], ckey[160];
	redisReply *rep = NULL;
	uint64_t tid, ctid;
	int rc, nk;

	if (!tkey(s, store_node_tenant(parent), &tid, key, sizeof(key)))
		return refuse(s, -ESTALE);
	ct = state_tenant(s, c);
	if (!ct)
		return refuse(s, -ESTALE);
	rc = tkey(s, ct, &ctid, ckey, sizeof(ckey)) ? 0 : -ESTALE;
	store_node_unref(s, ct);
	if (rc)
		return refuse(s, rc);
	a_u64(&a, mirror_remote_ino(s, child));
	a_u64(&a, mirror_remote_ino(s, parent));
	a_str(&a, name);
	/* Its state's ESTALE, which the contract puts first, is the
	 * mirror's in the tenant layout. */
	if ((nk = other_tenant(s, &a, tid, ctid, child)) < 0)
		return refuse(s, nk);
	rc = remote_fcall(s, "sfs_link", true, nk,
			  (const char *[]){ key, ckey }, a.n, a.v, NULL, &rep);
	rc = settle(s, tid, rc, rep);
	if (rc == 0 && attr) {
		rc = answer(s, mirror_remote_ino(s, child), &n, attr);
		if (rc == 0)
			store_node_unref(s, n);
	}
	if (rep)
		freeReplyObject(rep);
	return rc;
}

static int remote_rename(struct store *s, struct store_node *from, const char *name,
		  struct store_node *to, const char *to_name, unsigned flags)
{
	struct args a = { .n = 0 };
	char key[160], bkey[160];
	redisReply *rep = NULL;
	uint64_t tid, btid;
	int rc, nk;

	if (!tkey(s, store_node_tenant(from), &tid, key, sizeof(key)) ||
	    !tkey(s, store_node_tenant(to), &btid, bkey, sizeof(bkey)))
		return refuse(s, -ESTALE);
	a_u64(&a, mirror_remote_ino(s, from));
	a_str(&a, name);
	a_u64(&a, mirror_remote_ino(s, to));
	a_str(&a, to_name);
	a_u64(&a, (flags & STORE_RENAME_NOREPLACE ? 1 : 0) |
		  (flags & STORE_RENAME_EXCHANGE ? 2 : 0));
	if ((nk = other_tenant(s, &a, tid, btid, to)) < 0)
		return refuse(s, nk);
	rc = remote_fcall(s, "sfs_rename", true, nk,
			  (const char *[]){ key, bkey }, a.n, a.v, NULL, &rep);
	rc = settle(s, tid, rc, rep);
	if (rep)
		freeReplyObject(rep);
	return rc;
}

/* The library's name of a node's kind, and its tenant node. */
static const char *kind_name(struct store_node *n, struct store_node **tenant)
{
	switch (store_node_kind(n)) {
	case STORE_TENANT:
		*tenant = n;
		store_node_ref(n);
		return "tenant";
	case STORE_PARENT:
		*tenant = store_node_tenant(n);
		store_node_ref(*tenant);
		return "parent";
	case STORE_CHILD:
		return "child";
	default:
		return NULL;
	}
}

static int remote_setattr(struct store *s, struct store_node *n, unsigned mask,
		   const struct store_attr *in, struct store_attr *out)
{
	struct args a = { .n = 0 };
	struct store_node *t = NULL;
	const char *kind;
	char key[160];
	redisReply *rep = NULL;
	uint64_t tid;
	int rc;

	if (store_node_kind(n) == STORE_ROOT)
		/* The root is this mount's own (its mounter's). */
		return embedded_ops.setattr(s, n, mask, in, out);
	kind = kind_name(n, &t);
	if (!kind)
		return -EPERM;
	if (store_node_kind(n) == STORE_CHILD)
		t = state_tenant(s, node_child(n));
	if (!t)
		return refuse(s, -ESTALE);
	rc = tkey(s, t, &tid, key, sizeof(key)) ? 0 : -ESTALE;
	store_node_unref(s, t);
	if (rc)
		return refuse(s, rc);
	if ((mask & STORE_SET_SIZE) && store_node_kind(n) != STORE_CHILD)
		return -EISDIR;
	a_str(&a, kind);
	a_u64(&a, mirror_remote_ino(s, n));
	if (mask & STORE_SET_MODE)
		a_u64(&a, in->mode & 07777);
	else
		a_str(&a, "");
	if (mask & STORE_SET_UID)
		a_u64(&a, in->uid);
	else
		a_str(&a, "");
	if (mask & STORE_SET_GID)
		a_u64(&a, in->gid);
	else
		a_str(&a, "");
	if (mask & STORE_SET_ATIME)
		a_i64(&a, (int64_t)in->atime.tv_sec * NS_PER_S + in->atime.tv_nsec);
	else
		a_str(&a, "");
	if (mask & STORE_SET_MTIME)
		a_i64(&a, (int64_t)in->mtime.tv_sec * NS_PER_S + in->mtime.tv_nsec);
	else
		a_str(&a, "");
	if (mask & STORE_SET_SIZE)
		a_u64(&a, in->size);
	else
		a_str(&a, "");
	if (mask & (STORE_SET_KILL_SUID | STORE_SET_KILL_SGID))
		a_u64(&a, (mask & STORE_SET_KILL_SUID ? 1 : 0) |
			  (mask & STORE_SET_KILL_SGID ? 2 : 0));
	else
		a_str(&a, "");
	a_str(&a, mask & STORE_SET_RENEW ? "1" : "");
	rc = remote_fcall(s, "sfs_setattr", true, 1, (const char *[]){ key },
			  a.n, a.v, NULL, &rep);
	rc = settle_node(s, tid, rc, rep, n);
	if (rc == 0 && out)
		rc = store_getattr(s, n, out);
	if (rep)
		freeReplyObject(rep);
	return rc;
}

static int remote_publish(struct store *s, struct store_node *n, const char *mode,
		   uint64_t base, const void *data, size_t len,
		   uint64_t seen_version, int64_t seen_mtime)
{
	struct args a = { .n = 0 };
	struct store_node *t = state_tenant(s, node_child(n));
	const char *v[8];
	size_t l[8];
	char key[160];
	redisReply *rep = NULL;
	uint64_t tid;
	int rc;

	/* A child this mount already saw go is refused here, never asked
	 * for: counted here, as the embedded store counts it. */
	if (!t)
		return refuse(s, -ESTALE);
	rc = tkey(s, t, &tid, key, sizeof(key)) ? 0 : -ESTALE;
	store_node_unref(s, t);
	if (rc)
		return refuse(s, rc);
	a_u64(&a, mirror_remote_ino(s, n));
	a_str(&a, mode);
	if (strcmp(mode, "cas") == 0)
		a_u64(&a, base);
	else
		a_str(&a, "");
	a_str(&a, "");                 /* the data, below */
	a_u64(&a, seen_version);
	a_i64(&a, seen_mtime);
	for (int i = 0; i < a.n; i++) {
		v[i] = a.v[i];
		l[i] = strlen(a.v[i]);
	}
	v[3] = len ? data : "";
	l[3] = len;
	rc = remote_fcall(s, "sfs_publish", true, 1, (const char *[]){ key },
			  a.n, v, l, &rep);
	rc = settle_node(s, tid, rc, rep, n);
	if (rep)
		freeReplyObject(rep);
	return rc;
}

static int remote_lease(struct store *s, struct store_node *n, bool set,
			uint64_t ttl)
{
	struct args a = { .n = 0 };
	struct store_node *t = NULL;
	const char *kind;
	char key[160];
	redisReply *rep = NULL;
	uint64_t tid;
	int rc;

	kind = kind_name(n, &t);
	if (store_node_kind(n) == STORE_CHILD)
		t = state_tenant(s, node_child(n));
	if (!t)
		return refuse(s, -ESTALE);
	rc = tkey(s, t, &tid, key, sizeof(key)) ? 0 : -ESTALE;
	store_node_unref(s, t);
	if (rc)
		return refuse(s, rc);
	a_str(&a, kind);
	a_u64(&a, mirror_remote_ino(s, n));
	if (set)
		a_u64(&a, ttl);
	rc = remote_fcall(s, set ? "sfs_set_ttl" : "sfs_renew", true, 1,
			  (const char *[]){ key }, a.n, a.v, NULL, &rep);
	rc = settle_node(s, tid, rc, rep, n);
	if (rep)
		freeReplyObject(rep);
	return rc;
}

static int remote_set_ttl(struct store *s, struct store_node *n, uint64_t ttl)
{
	return remote_lease(s, n, true, ttl);
}

static int remote_renew(struct store *s, struct store_node *n)
{
	return remote_lease(s, n, false, 0);
}

static int remote_set_child_ttl(struct store *s, struct store_node *n,
				uint64_t ttl)
{
	struct args a = { .n = 0 };
	char key[160];
	redisReply *rep = NULL;
	uint64_t tid;
	int rc;

	if (!tkey(s, store_node_tenant(n), &tid, key, sizeof(key)))
		return -ESTALE; /* not counted, as lease_child_ttl */
	a_u64(&a, mirror_remote_ino(s, n));
	a_u64(&a, ttl);
	rc = remote_fcall(s, "sfs_set_child_ttl", true, 1,
			  (const char *[]){ key }, a.n, a.v, NULL, &rep);
	rc = settle(s, tid, rc, rep);
	if (rep)
		freeReplyObject(rep);
	return rc;
}

static int remote_drain(struct store *s, struct store_node *tenant,
		 const struct store_cred *cred, bool now)
{
	struct args a = { .n = 0 };
	char key[160], groups[4096];
	redisReply *rep = NULL;
	uint64_t tid = 0;
	int rc;

	if (tenant && !tkey(s, tenant, &tid, key, sizeof(key)))
		return -ESTALE; /* not counted, as drain_start */
	if (!now)
		a_cred(&a, cred, groups, sizeof(groups));
	rc = remote_fcall(s, now ? "sfs_drain_now" : "sfs_drain", true,
			  tenant ? 1 : 0, (const char *[]){ key }, a.n, a.v,
			  NULL, &rep);
	if (rep && !tenant && rc == 0) {
		size_t n;
		uint64_t *ids = remote_tenants(s, &n);

		/* A drain of the store clears every tenant: each log.  (Out
		 * of memory for their list, the drain still stands: only the
		 * wait for the tenants' logs is lost.) */
		rc = wait_seq(s, 0, out_u64(rep, 2));
		/* The tenant layout: the drain recorded at the root is made
		 * each tenant's by the mount that asked. */
		if (rc == 0 && remote_tenant_layout(s))
			rc = remote_drain_fanout(s, now);
		if (rc == 0 && ids)
			rc = remote_wait_tenants(s, ids, n);
		free(ids);
	} else {
		rc = settle(s, tid, rc, rep);
	}
	if (rep)
		freeReplyObject(rep);
	return rc;
}

/*
 * A stage's publication: the shared store makes it (sfs_publish), with
 * no store lock held while it waits (the stage keeps its staged bytes
 * meanwhile, so its readers see them); then the stage is based on the
 * version it made, as the mirror shows it (stage_settle).
 */
static int remote_stage_publish(struct store_stage *st)
{
	struct stage_copy c;
	int rc = stage_take(st, &c);

	if (rc <= 0)
		return rc;
	rc = remote_publish(stage_store(st), c.child,
			    c.mode == STORE_STAGE_APPEND ? "append" :
			    c.mode == STORE_STAGE_CAS ? "cas" : "replace",
			    c.base_version, c.data, c.len, c.seen_version,
			    c.seen_mtime);
	stage_settle(st, &c, rc);
	return rc;
}

/* Before a drain's state is read: the mirror settles nothing itself, it
 * asks the shared store to (store_expire) when something is due. */
static void remote_expire_due_drains(struct store *s, struct store_node *tenant,
				     uint64_t now)
{
	struct tenant *t = tenant ? node_tenant(tenant) : NULL;

	if (store_next_deadline(s) <= now || drain_due(s, NULL, now) ||
	    (t && drain_due(s, t, now)))
		store_expire(s, 4096);
}

static int remote_sync_dir(struct store *s, struct store_node *n)
{
	(void)n;
	return remote_sync(s);
}

/* The shared store's table: every transition of the domain one call of
 * the Functions library (the reads are the mirror's, the core's). */
const struct store_ops redis_ops = {
	.tenant_make = remote_tenant_make,
	.tenant_remove = remote_tenant_remove,
	.join = remote_join,
	.leave = remote_leave,
	.depart = remote_depart,
	.create = remote_create,
	.unlink = remote_unlink,
	.link = remote_link,
	.rename = remote_rename,
	.setattr = remote_setattr,
	.publish = remote_stage_publish,
	.set_ttl = remote_set_ttl,
	.renew = remote_renew,
	.set_child_ttl = remote_set_child_ttl,
	.expire = remote_expire_due,        /* redis/clock.c */
	.expire_due = remote_expire_due_drains,
	.clock_advance = remote_clock_move, /* redis/clock.c */
	.drain = remote_drain,
	.stats = remote_stats_all,          /* redis/stats.c */
	.use = remote_use,                  /* redis/use.c */
	.hold = remote_hold,
	.release = remote_release,
	.sync = remote_sync_dir,
	.events_history = remote_events_history, /* redis/history.c */
	.root_settle = remote_root_settle,       /* redis/call.c */
	.lock_set = remote_lock,            /* redis/lock.c */
	.lock_kick = remote_lock_kick,
	.lock_test = remote_lock_test,
	.lock_drop = remote_lock_drop,
	.lock_stats = remote_lock_stats,
	.connection = remote_connection,    /* redis/stats.c */
	.quiesce = remote_quiesce,          /* redis/stop.c */
	.close = remote_close,              /* redis/stop.c */
};
