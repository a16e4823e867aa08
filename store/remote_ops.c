/*
 * remote_ops.c - a store with the shared store behind it: several mounts
 * on several hosts share one state through Redis (SHARED-STORE.md).
 *
 * The design
 * ----------
 * One interface, two authorities.  fs/ calls store.h whatever the store
 * is.  A store made by store_new_remote() is a mirror (store/mirror.c):
 * the embedded store's own structures, changed only by applying the
 * shared store's log entries in seq order.  Each transition of store.h
 * dispatches in its first two lines: the embedded store runs its own
 * code; a mirror calls the function of statefs's Functions library that
 * makes that transition (store/statefs.lua, whose opening essay is the
 * contract between Redis and the mount: keys, calling convention,
 * outcomes, entries), here, through the connection pool
 * (store/rconn.c).  Redis makes every check, in the embedded store's
 * order, and decides every number; the mount never reads, checks and
 * writes from the client.  Each call carries an operation id (this
 * mount's id, a counter: MOUNT:N; a retry after a lost reply applies it
 * at most once) and a deadline on the store's clock (the estimate of its
 * now plus store_timeout: a call that reaches Redis later does nothing).
 * The outcome gives the seq of the entry it appended (or the seq the log
 * was at, for a refusal); the transition waits until this mount's
 * mirror has applied that seq (read-your-writes: an EEXIST is never
 * followed by an ENOENT from a stale mirror), then answers from the
 * mirror: the node by the inode number the outcome gives, with a
 * reference, and its attributes.  Reads (lookups, getattr, listings,
 * stage reads, snapshots, leases, names, events) are the mirror's,
 * unchanged.
 *
 * The follower (store/follow.c) is one thread with one dedicated
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
 * reply in time returns -EIO and, thanks to its deadline, did not
 * happen.  .stats says "store connected" or "disconnected".
 *
 * What it owns
 * ------------
 * struct remote (store/shared.h): the configuration, the pool, this
 * mount's id and operation counter, the clock estimate, the instance,
 * and the follower's state.
 *
 * Threads and locks
 * -----------------
 * Transitions run on the caller's thread and hold no store lock while
 * they wait on the network or for the follower: they call Redis, then
 * wait on remote->applied under remote->lock (LOCK_REMOTE, held alone:
 * the mirror's own lock is taken only after it is let go), then read
 * the mirror as any reader does.  The follower thread (follow.c)
 * applies entries through the embedded transitions, which take the
 * store's locks in their order, and then broadcasts remote->applied.
 */
#include "store/internal.h"
#include "store/mirror.h"
#include "store/shared.h"
#include "store/statefs_lua.h"

#include <errno.h>
#include <inttypes.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

/* The library version this mount speaks (store/statefs.lua). */
#define LIBVERSION 2
#define POOL_SIZE 8

/* Outcomes ------------------------------------------------------------------ */

static const struct {
	const char *name;
	int err;
} errnames[] = {
	{ "ENOENT", ENOENT }, { "EEXIST", EEXIST }, { "ESTALE", ESTALE },
	{ "EAGAIN", EAGAIN }, { "ENOSPC", ENOSPC }, { "EDQUOT", EDQUOT },
	{ "EFBIG", EFBIG }, { "EINVAL", EINVAL }, { "ENAMETOOLONG", ENAMETOOLONG },
	{ "EROFS", EROFS }, { "EXDEV", EXDEV }, { "EACCES", EACCES },
	{ "EISDIR", EISDIR }, { "EPERM", EPERM }, { "ETIMEDOUT", EIO },
};

static int errno_of(const char *name)
{
	for (size_t i = 0; i < sizeof(errnames) / sizeof(errnames[0]); i++)
		if (strcmp(errnames[i].name, name) == 0)
			return -errnames[i].err;
	return -EPROTO;
}

/* Element @i of outcome @r as a number (an integer reply or a decimal). */
static uint64_t out_u64(const redisReply *r, size_t i)
{
	if (!r || i >= r->elements)
		return 0;
	if (r->element[i]->type == REDIS_REPLY_INTEGER)
		return (uint64_t)r->element[i]->integer;
	if (r->element[i]->type == REDIS_REPLY_STRING)
		return strtoull(r->element[i]->str, NULL, 10);
	return 0;
}

/* The clock ------------------------------------------------------------------ */

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The mirror's store clock: the estimate of the store's. */
static uint64_t remote_clock(void *arg)
{
	struct remote *r = arg;
	uint64_t est, floor = atomic_load(&r->floor_ms);

	if (r->testclock) {
		est = r->s && r->s->mirror ? mirror_testclock(r->s) : 0;
	} else {
		est = (uint64_t)((int64_t)mono_ms() + atomic_load(&r->offset_ms));
	}
	while (est > floor &&
	       !atomic_compare_exchange_weak(&r->floor_ms, &floor, est))
		;
	return est > floor ? est : floor;
}

void remote_saw_now(struct store *s, uint64_t now_ms)
{
	struct remote *r = s->remote;
	int_fast64_t off = (int64_t)now_ms - (int64_t)mono_ms();
	int_fast64_t cur = atomic_load(&r->offset_ms);
	uint64_t floor = atomic_load(&r->floor_ms);

	if (!r->testclock) {
		/* The smallest delay seen is the best estimate: a reply
		 * that travelled longer says the store is earlier than it
		 * is.  The offset only grows. */
		while (off > cur &&
		       !atomic_compare_exchange_weak(&r->offset_ms, &cur, off))
			;
	}
	while (now_ms > floor &&
	       !atomic_compare_exchange_weak(&r->floor_ms, &floor, now_ms))
		;
}

/* Calls ------------------------------------------------------------------------ */

void remote_tenant_key(struct store *s, uint64_t tid, char *buf, size_t len)
{
	const char *p = s->remote->cfg.prefix;

	snprintf(buf, len, "%s:{%s.t%" PRIu64 "}:t", p, p, tid);
}

int remote_fcall(struct store *s, const char *fn, bool mutation, int nkeys,
		 const char *const *keys, int argc, const char *const *argv,
		 const size_t *argvlen, redisReply **out)
{
	struct remote *r = s->remote;
	int n = 0, total = 4 + nkeys + 3 + argc, rc;
	const char **av = st_calloc((size_t)total, sizeof(*av));
	size_t *al = st_calloc((size_t)total, sizeof(*al));
	char nk[16], opid[48], deadline[24], inst[17];
	redisReply *rep = NULL;

	*out = NULL;
	if (!av || !al) {
		free(av);
		free(al);
		return -ENOMEM;
	}
	lock(&r->lock, LOCK_REMOTE);
	memcpy(inst, r->instance, sizeof(inst));
	unlock(&r->lock, LOCK_REMOTE);
	snprintf(nk, sizeof(nk), "%d", nkeys + 1);
	opid[0] = deadline[0] = '\0';
	if (mutation) {
		snprintf(opid, sizeof(opid), "%s:%" PRIuFAST64, r->mount,
			 atomic_fetch_add(&r->opn, 1) + 1);
		/* Past it, the call does nothing: a reply lost after it is
		 * an -EIO that did not happen. */
		snprintf(deadline, sizeof(deadline), "%" PRIu64,
			 store_now_ms(s) + r->cfg.timeout_ms);
	}
	av[n++] = mutation ? "FCALL" : "FCALL_RO";
	av[n++] = fn;
	av[n++] = nk;
	av[n++] = r->meta;
	for (int i = 0; i < nkeys; i++)
		av[n++] = keys[i];
	av[n++] = inst;
	av[n++] = opid;
	av[n++] = deadline;
	for (int i = 0; i < n; i++)
		al[i] = strlen(av[i]);
	for (int i = 0; i < argc; i++) {
		av[n] = argv[i];
		al[n++] = argvlen ? argvlen[i] : strlen(argv[i]);
	}
	rc = rconn_pool_call(r->pool, 0, n, av, al, &rep);
	free(av);
	free(al);
	if (rc)
		return rc == -ENOMEM ? rc : -EIO;
	if (rep->type == REDIS_REPLY_ERROR) {
		fprintf(stderr, "statefs: %s: %s\n", fn, rep->str);
		freeReplyObject(rep);
		return -EIO;
	}
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 3 ||
	    rep->element[0]->type != REDIS_REPLY_STRING) {
		freeReplyObject(rep);
		return -EPROTO;
	}
	remote_saw_now(s, out_u64(rep, 1));
	*out = rep;
	if (strcmp(rep->element[0]->str, "OK") == 0)
		return 0;
	if (strcmp(rep->element[0]->str, "ESTALEINST") == 0) {
		lock(&r->lock, LOCK_REMOTE);
		r->reinit = true;
		unlock(&r->lock, LOCK_REMOTE);
		return -ESTALE;
	}
	return errno_of(rep->element[0]->str);
}

/*
 * Wait until the mirror has applied tenant @tid's log up to @seq (the
 * root log's for 0), or the tenant went, for at most store_timeout.
 * 0, or -EIO when the follower did not get there in time.
 */
static int wait_seq(struct store *s, uint64_t tid, uint64_t seq)
{
	struct remote *r = s->remote;
	uint64_t until = mono_ms() + r->cfg.timeout_ms + 1000;

	for (;;) {
		uint64_t at = 0, batches;
		bool gone = false;
		struct timespec ts;

		lock(&r->lock, LOCK_REMOTE);
		batches = r->batches;
		unlock(&r->lock, LOCK_REMOTE);
		if (mirror_applied(s, tid, &at, &gone) == 0 && (gone || at >= seq))
			return 0;
		if (mono_ms() >= until)
			return -EIO;
		lock(&r->lock, LOCK_REMOTE);
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50 * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		if (r->batches == batches)
			pthread_cond_timedwait(&r->applied, &r->lock, &ts);
		unlock(&r->lock, LOCK_REMOTE);
	}
}

/* The outcome @rep of a call about tenant @tid: wait for its seq.  The
 * outcome's errno @rc stands whatever the wait gives, but for success,
 * which needs the mirror to answer. */
static int settle(struct store *s, uint64_t tid, int rc, redisReply *rep)
{
	int w;

	if (!rep)
		return rc;
	w = wait_seq(s, tid, out_u64(rep, 2));
	return rc ? rc : w;
}

/* Arguments ---------------------------------------------------------------- */

/* Small decimal buffers for one call's arguments. */
struct args {
	const char *v[16];
	char num[16][24];
	int n;
};

static void a_str(struct args *a, const char *s)
{
	a->v[a->n++] = s;
}

static void a_u64(struct args *a, uint64_t v)
{
	snprintf(a->num[a->n], sizeof(a->num[a->n]), "%" PRIu64, v);
	a->v[a->n] = a->num[a->n];
	a->n++;
}

static void a_i64(struct args *a, int64_t v)
{
	snprintf(a->num[a->n], sizeof(a->num[a->n]), "%" PRId64, v);
	a->v[a->n] = a->num[a->n];
	a->n++;
}

/* A credential: UID GID GROUPS ("" for none); @groups must outlive the
 * call (the caller's buffer). */
static void a_cred(struct args *a, const struct store_cred *c, char *groups,
		   size_t glen)
{
	size_t used = 0;

	groups[0] = '\0';
	if (!c) {
		a_str(a, "");
		a_str(a, "");
		a_str(a, "");
		return;
	}
	a_u64(a, c->uid);
	a_u64(a, c->gid);
	for (size_t i = 0; i < c->ngroups && used + 24 < glen; i++)
		used += (size_t)snprintf(groups + used, glen - used, "%s%u",
					 i ? "," : "", (unsigned)c->groups[i]);
	a_str(a, groups);
}

/* The tenant id and key of tenant node @t; false when the mirror does
 * not follow it (dead). */
static bool tkey(struct store *s, struct store_node *t, uint64_t *tid,
		 char *buf, size_t len)
{
	if (!t)
		return false;
	*tid = mirror_tid_of(s, t);
	if (!*tid)
		return false;
	remote_tenant_key(s, *tid, buf, len);
	return true;
}

/* The tenant node state @c belongs to (its links' parents'), with a
 * reference, or NULL when it has no link. */
static struct store_node *state_tenant(struct store *s, struct child *c)
{
	struct store_node *t = NULL;

	lock(stripe(s, c), LOCK_STRIPE);
	if (c->node.nlink) {
		t = &child_tenant(c)->node;
		store_node_ref(t);
	}
	unlock(stripe(s, c), LOCK_STRIPE);
	return t;
}

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
		node_lock(s, n);
		attr_locked(s, n, attr);
		node_unlock(s, n);
		if (attr->nlink == 0)
			attr->nlink = 1;
	}
	*out = n;
	return 0;
}

/* Transitions --------------------------------------------------------------- */

int remote_mkdir(struct store *s, struct store_node *dir, const char *name,
		 const struct store_owner *owner, struct store_node **out,
		 struct store_attr *attr)
{
	struct store_owner o = *owner;
	struct args a = { .n = 0 };
	char key[160];
	redisReply *rep = NULL;
	uint64_t tid, ino;
	int rc;

	if (is_dead(dir))
		return -ESTALE;
	switch (dir->kind) {
	case STORE_ROOT:
		/* A new tenant inherits from this mount's root. */
		lock(&s->lock, LOCK_STORE);
		if (s->root.mode & S_ISGID) {
			o.gid = s->root_meta.gid;
			o.mode |= S_ISGID;
		}
		unlock(&s->lock, LOCK_STORE);
		a_str(&a, name);
		a_u64(&a, o.uid);
		a_u64(&a, o.gid);
		a_u64(&a, o.mode & 07777);
		rc = remote_fcall(s, "sfs_mkdir_tenant", true, 0, NULL, a.n, a.v,
				  NULL, &rep);
		if (rc == 0) {
			tid = out_u64(rep, 3);
			ino = out_u64(rep, 4);
			rc = wait_seq(s, 0, out_u64(rep, 5));
			if (rc == 0)
				rc = wait_seq(s, tid, out_u64(rep, 2));
			if (rc == 0)
				rc = answer(s, ino, out, attr);
		}
		break;
	case STORE_TENANT:
		if (!tkey(s, dir, &tid, key, sizeof(key)))
			return -ESTALE;
		a_str(&a, name);
		a_u64(&a, o.uid);
		a_u64(&a, o.gid);
		a_u64(&a, o.mode & 07777);
		rc = remote_fcall(s, "sfs_join", true, 1,
				  (const char *[]){ key }, a.n, a.v, NULL, &rep);
		ino = rc == 0 ? out_u64(rep, 3) : 0;
		rc = settle(s, tid, rc, rep);
		if (rc == 0)
			rc = answer(s, ino, out, attr);
		break;
	case STORE_PARENT:
		return -EPERM;
	default:
		return -ENOTDIR;
	}
	if (rep)
		freeReplyObject(rep);
	return rc;
}

int remote_rmdir(struct store *s, struct store_node *dir, const char *name,
		 const struct store_cred *cred)
{
	struct args a = { .n = 0 };
	char key[160], groups[4096];
	redisReply *rep = NULL;
	struct store_node *n;
	uint64_t tid = 0;
	int rc;

	switch (dir->kind) {
	case STORE_ROOT:
		if (store_lookup(s, dir, name, &n) == 0) {
			tid = mirror_tid_of(s, n);
			store_node_unref(s, n);
		}
		a_str(&a, name);
		a_cred(&a, cred, groups, sizeof(groups));
		rc = remote_fcall(s, "sfs_rmdir_tenant", true, 0, NULL, a.n,
				  a.v, NULL, &rep);
		if (rc == 0 && tid)
			rc = wait_seq(s, tid, out_u64(rep, 2));
		if (rc == 0)
			rc = wait_seq(s, 0, out_u64(rep, 3));
		break;
	case STORE_TENANT:
		if (!tkey(s, dir, &tid, key, sizeof(key)))
			return -ESTALE;
		a_str(&a, name);
		a_cred(&a, cred, groups, sizeof(groups));
		rc = remote_fcall(s, "sfs_leave", true, 1,
				  (const char *[]){ key }, a.n, a.v, NULL, &rep);
		rc = settle(s, tid, rc, rep);
		break;
	case STORE_PARENT:
		rc = store_lookup(s, dir, name, &n);
		if (rc)
			return rc;
		store_node_unref(s, n);
		return -ENOTDIR;
	default:
		return -ENOTDIR;
	}
	if (rep)
		freeReplyObject(rep);
	return rc;
}

int remote_depart(struct store *s, struct store_node *tenant, const char *name,
		  const struct store_cred *cred)
{
	struct args a = { .n = 0 };
	char key[160], groups[4096];
	redisReply *rep = NULL;
	uint64_t tid;
	int rc;

	if (tenant->kind != STORE_TENANT)
		return -EPERM;
	if (!tkey(s, tenant, &tid, key, sizeof(key)))
		return -ESTALE;
	a_str(&a, name);
	a_cred(&a, cred, groups, sizeof(groups));
	rc = remote_fcall(s, "sfs_depart", true, 1, (const char *[]){ key },
			  a.n, a.v, NULL, &rep);
	rc = settle(s, tid, rc, rep);
	if (rep)
		freeReplyObject(rep);
	return rc;
}

int remote_create(struct store *s, struct store_node *parent, const char *name,
		  const struct store_owner *owner, bool excl,
		  struct store_node **out, bool *created,
		  struct store_attr *attr)
{
	struct args a = { .n = 0 };
	struct parent *p = as_parent(parent);
	char key[160];
	redisReply *rep = NULL;
	uint64_t tid, ino = 0;
	bool made = false;
	int rc;

	if (!p)
		return parent->kind == STORE_CHILD ? -ENOTDIR : -EPERM;
	if (!tkey(s, &p->tenant->node, &tid, key, sizeof(key)))
		return -ESTALE;
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
	rc = settle(s, tid, rc, rep);
	if (rc == 0)
		rc = answer(s, ino, out, attr);
	if (rc == 0)
		*created = made;
	if (rep)
		freeReplyObject(rep);
	return rc;
}

int remote_unlink(struct store *s, struct store_node *parent, const char *name)
{
	struct args a = { .n = 0 };
	struct parent *p = as_parent(parent);
	char key[160];
	redisReply *rep = NULL;
	uint64_t tid;
	int rc;

	if (!p)
		return parent->kind == STORE_CHILD ? -ENOTDIR : -EPERM;
	if (!tkey(s, &p->tenant->node, &tid, key, sizeof(key)))
		return -ESTALE;
	a_u64(&a, mirror_remote_ino(s, parent));
	a_str(&a, name);
	rc = remote_fcall(s, "sfs_unlink", true, 1, (const char *[]){ key },
			  a.n, a.v, NULL, &rep);
	rc = settle(s, tid, rc, rep);
	if (rep)
		freeReplyObject(rep);
	return rc;
}

int remote_link(struct store *s, struct store_node *child,
		struct store_node *parent, const char *name,
		struct store_attr *attr)
{
	struct args a = { .n = 0 };
	struct parent *p = as_parent(parent);
	struct child *c = as_child(child);
	struct store_node *ct, *n;
	char key[160], ckey[160];
	redisReply *rep = NULL;
	uint64_t tid, ctid;
	int rc;

	if (!c || !p)
		return -EPERM;
	if (!tkey(s, &p->tenant->node, &tid, key, sizeof(key)))
		return -ESTALE;
	ct = state_tenant(s, c);
	if (!ct)
		return -ESTALE;
	rc = tkey(s, ct, &ctid, ckey, sizeof(ckey)) ? 0 : -ESTALE;
	store_node_unref(s, ct);
	if (rc)
		return rc;
	a_u64(&a, mirror_remote_ino(s, child));
	a_u64(&a, mirror_remote_ino(s, parent));
	a_str(&a, name);
	rc = remote_fcall(s, "sfs_link", true, 2, (const char *[]){ key, ckey },
			  a.n, a.v, NULL, &rep);
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

int remote_rename(struct store *s, struct store_node *from, const char *name,
		  struct store_node *to, const char *to_name, unsigned flags)
{
	struct args a = { .n = 0 };
	struct parent *pa = as_parent(from), *pb = as_parent(to);
	char key[160], bkey[160];
	redisReply *rep = NULL;
	uint64_t tid, btid;
	int rc;

	if (!pa || !pb)
		return -EPERM;
	if (!tkey(s, &pa->tenant->node, &tid, key, sizeof(key)) ||
	    !tkey(s, &pb->tenant->node, &btid, bkey, sizeof(bkey)))
		return -ESTALE;
	a_u64(&a, mirror_remote_ino(s, from));
	a_str(&a, name);
	a_u64(&a, mirror_remote_ino(s, to));
	a_str(&a, to_name);
	a_u64(&a, (flags & STORE_RENAME_NOREPLACE ? 1 : 0) |
		  (flags & STORE_RENAME_EXCHANGE ? 2 : 0));
	rc = remote_fcall(s, "sfs_rename", true, 2, (const char *[]){ key, bkey },
			  a.n, a.v, NULL, &rep);
	rc = settle(s, tid, rc, rep);
	if (rep)
		freeReplyObject(rep);
	return rc;
}

/* The library's name of a node's kind, and its tenant node. */
static const char *kind_name(struct store_node *n, struct store_node **tenant)
{
	switch (n->kind) {
	case STORE_TENANT:
		*tenant = n;
		store_node_ref(n);
		return "tenant";
	case STORE_PARENT:
		*tenant = &as_parent(n)->tenant->node;
		store_node_ref(*tenant);
		return "parent";
	case STORE_CHILD:
		return "child";
	default:
		return NULL;
	}
}

int remote_setattr(struct store *s, struct store_node *n, unsigned mask,
		   const struct store_attr *in, struct store_attr *out)
{
	struct args a = { .n = 0 };
	struct store_node *t = NULL;
	const char *kind;
	char key[160];
	redisReply *rep = NULL;
	uint64_t tid;
	int rc;

	if (n->kind == STORE_ROOT)
		/* The root is this mount's own (its mounter's). */
		return TRANSITION(s, do_setattr(s, n, mask, in, out));
	kind = kind_name(n, &t);
	if (!kind)
		return -EPERM;
	if (n->kind == STORE_CHILD)
		t = state_tenant(s, as_child(n));
	if (!t)
		return -ESTALE;
	rc = tkey(s, t, &tid, key, sizeof(key)) ? 0 : -ESTALE;
	store_node_unref(s, t);
	if (rc)
		return rc;
	if ((mask & STORE_SET_SIZE) && n->kind != STORE_CHILD)
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
	rc = settle(s, tid, rc, rep);
	if (rc == 0 && out)
		rc = store_getattr(s, n, out);
	if (rep)
		freeReplyObject(rep);
	return rc;
}

int remote_publish(struct store *s, struct store_node *n, const char *mode,
		   uint64_t base, const void *data, size_t len,
		   uint64_t seen_version, int64_t seen_mtime)
{
	struct args a = { .n = 0 };
	struct store_node *t = state_tenant(s, as_child(n));
	const char *v[8];
	size_t l[8];
	char key[160];
	redisReply *rep = NULL;
	uint64_t tid;
	int rc;

	if (!t)
		return -ESTALE;
	rc = tkey(s, t, &tid, key, sizeof(key)) ? 0 : -ESTALE;
	store_node_unref(s, t);
	if (rc)
		return rc;
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
	rc = settle(s, tid, rc, rep);
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

	if (n->kind != STORE_PARENT && n->kind != STORE_CHILD)
		return -EINVAL;
	if (set && ttl > STORE_DURATION_MAX_MS)
		return -EINVAL;
	kind = kind_name(n, &t);
	if (n->kind == STORE_CHILD)
		t = state_tenant(s, as_child(n));
	if (!t)
		return -ESTALE;
	rc = tkey(s, t, &tid, key, sizeof(key)) ? 0 : -ESTALE;
	store_node_unref(s, t);
	if (rc)
		return rc;
	a_str(&a, kind);
	a_u64(&a, mirror_remote_ino(s, n));
	if (set)
		a_u64(&a, ttl);
	rc = remote_fcall(s, set ? "sfs_set_ttl" : "sfs_renew", true, 1,
			  (const char *[]){ key }, a.n, a.v, NULL, &rep);
	rc = settle(s, tid, rc, rep);
	if (rep)
		freeReplyObject(rep);
	return rc;
}

int remote_set_ttl(struct store *s, struct store_node *n, uint64_t ttl)
{
	return remote_lease(s, n, true, ttl);
}

int remote_renew(struct store *s, struct store_node *n)
{
	return remote_lease(s, n, false, 0);
}

int remote_set_child_ttl(struct store *s, struct store_node *n, uint64_t ttl)
{
	struct args a = { .n = 0 };
	struct parent *p = as_parent(n);
	char key[160];
	redisReply *rep = NULL;
	uint64_t tid;
	int rc;

	if (!p || ttl > STORE_DURATION_MAX_MS)
		return -EINVAL;
	if (!tkey(s, &p->tenant->node, &tid, key, sizeof(key)))
		return -ESTALE;
	a_u64(&a, mirror_remote_ino(s, n));
	a_u64(&a, ttl);
	rc = remote_fcall(s, "sfs_set_child_ttl", true, 1,
			  (const char *[]){ key }, a.n, a.v, NULL, &rep);
	rc = settle(s, tid, rc, rep);
	if (rep)
		freeReplyObject(rep);
	return rc;
}

int remote_drain(struct store *s, struct store_node *tenant,
		 const struct store_cred *cred, bool now)
{
	struct args a = { .n = 0 };
	char key[160], groups[4096];
	redisReply *rep = NULL;
	uint64_t tid = 0;
	int rc;

	if (tenant && tenant->kind != STORE_TENANT)
		return -EINVAL;
	if (tenant && !tkey(s, tenant, &tid, key, sizeof(key)))
		return -ESTALE;
	if (!now)
		a_cred(&a, cred, groups, sizeof(groups));
	rc = remote_fcall(s, now ? "sfs_drain_now" : "sfs_drain", true,
			  tenant ? 1 : 0, (const char *[]){ key }, a.n, a.v,
			  NULL, &rep);
	if (rep && !tenant && rc == 0) {
		uint64_t ids[1024];
		size_t n = mirror_tenants(s, ids, 1024);

		/* A drain of the store clears every tenant: each log. */
		rc = wait_seq(s, 0, out_u64(rep, 2));
		for (size_t i = 0; i < n && i < 1024 && rc == 0; i++) {
			redisReply *sr = NULL;
			char k[160];

			remote_tenant_key(s, ids[i], k, sizeof(k));
			if (remote_fcall(s, "sfs_sync", false, 1,
					 (const char *[]){ k }, 0, NULL, NULL,
					 &sr) == 0 &&
			    (int64_t)out_u64(sr, 3) >= 0)
				rc = wait_seq(s, ids[i], out_u64(sr, 3));
			if (sr)
				freeReplyObject(sr);
		}
	} else {
		rc = settle(s, tid, rc, rep);
	}
	if (rep)
		freeReplyObject(rep);
	return rc;
}

unsigned remote_expire(struct store *s, unsigned budget)
{
	uint64_t ids[1024];
	size_t n = mirror_tenants(s, ids, 1024);
	struct args a = { .n = 0 };
	redisReply *rep;
	unsigned done = 0;

	a_u64(&a, budget ? budget : 1);
	for (size_t i = 0; i < n && i < 1024; i++) {
		char key[160];
		int rc;

		remote_tenant_key(s, ids[i], key, sizeof(key));
		rep = NULL;
		rc = remote_fcall(s, "sfs_expire", true, 1,
				  (const char *[]){ key }, a.n, a.v, NULL, &rep);
		if (rc == 0)
			done += (unsigned)out_u64(rep, 3);
		settle(s, ids[i], rc, rep);
		if (rep)
			freeReplyObject(rep);
	}
	/* The store's scope: tombstones store-wide and a drain of the
	 * store. */
	rep = NULL;
	if (remote_fcall(s, "sfs_expire", true, 0, NULL, a.n, a.v, NULL,
			 &rep) == 0)
		wait_seq(s, 0, out_u64(rep, 2));
	if (rep)
		freeReplyObject(rep);
	return done;
}

unsigned remote_expire_due(struct store *s, unsigned budget)
{
	if (store_next_deadline(s) > store_now_ms(s) &&
	    atomic_load(&s->state) != STORE_DRAINING &&
	    atomic_load(&s->tenants_draining) == 0)
		return 0;
	return remote_expire(s, budget);
}

int remote_clock_advance(struct store *s, uint64_t ms)
{
	struct args a = { .n = 0 };
	redisReply *rep = NULL;
	int rc;

	a_u64(&a, ms);
	rc = remote_fcall(s, "sfs_clock_advance", true, 0, NULL, a.n, a.v,
			  NULL, &rep);
	if (rc == 0) {
		rc = wait_seq(s, 0, out_u64(rep, 2));
		remote_saw_now(s, out_u64(rep, 3));
	}
	if (rep)
		freeReplyObject(rep);
	return rc;
}

int remote_sync(struct store *s)
{
	uint64_t ids[1024];
	size_t n = mirror_tenants(s, ids, 1024);
	char (*keys)[160];
	const char **kp;
	redisReply *rep = NULL;
	int rc;

	if (n > 1024)
		n = 1024;
	keys = st_calloc(n + 1, sizeof(*keys));
	kp = st_calloc(n + 1, sizeof(*kp));
	if (!keys || !kp) {
		free(keys);
		free(kp);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		remote_tenant_key(s, ids[i], keys[i], sizeof(keys[i]));
		kp[i] = keys[i];
	}
	rc = remote_fcall(s, "sfs_sync", false, (int)n, kp, 0, NULL, NULL, &rep);
	if (rc == 0)
		rc = wait_seq(s, 0, out_u64(rep, 2));
	for (size_t i = 0; i < n && rc == 0; i++) {
		int64_t seq = (int64_t)out_u64(rep, 3 + i);

		if (seq >= 0)
			rc = wait_seq(s, ids[i], (uint64_t)seq);
	}
	if (rep)
		freeReplyObject(rep);
	free(keys);
	free(kp);
	return rc;
}

int remote_stats(struct store *s, struct store_node *tenant,
		 struct store_stats *o)
{
	static const char *const refused[STORE_NREFUSAL] = {
		"refused_capacity", "refused_quota", "refused_payload",
		"refused_draining", "refused_exists", "refused_stale",
		"refused_conflict", "refused_gone",
	};
	struct {
		const char *name;
		uint64_t *v;
	} f[] = {
		{ "tenants", &o->tenants }, { "parents", &o->parents },
		{ "children", &o->children }, { "links", &o->links },
		{ "tombstones", &o->tombstones }, { "bytes", &o->bytes },
		{ "admissions", &o->admissions }, { "removals", &o->removals },
		{ "expiries", &o->expiries }, { "joins", &o->joins },
		{ "leaves", &o->leaves },
	};
	char key[160];
	redisReply *rep = NULL;
	uint64_t tid;
	int rc;

	memset(o, 0, sizeof(*o));
	if (tenant && !tkey(s, tenant, &tid, key, sizeof(key)))
		return -ESTALE;
	rc = remote_fcall(s, "sfs_stats", false, tenant ? 1 : 0,
			  (const char *[]){ key }, 0, NULL, NULL, &rep);
	if (rc == 0) {
		for (size_t i = 3; i + 1 < rep->elements; i += 2) {
			const char *k = rep->element[i]->str;
			uint64_t v = out_u64(rep, i + 1);

			if (!k)
				continue;
			for (size_t j = 0; j < sizeof(f) / sizeof(f[0]); j++)
				if (strcmp(k, f[j].name) == 0)
					*f[j].v = v;
			for (int j = 0; j < STORE_NREFUSAL; j++)
				if (strcmp(k, refused[j]) == 0)
					o->refused[j] = v;
		}
	}
	if (rep)
		freeReplyObject(rep);
	return rc;
}

/* Start and stop ------------------------------------------------------------- */

/* Random hex of @n digits into @buf. */
static void random_hex(char *buf, size_t n)
{
	uint8_t b[16];

	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
		uint64_t x = (uint64_t)wall_now() ^ ((uint64_t)getpid() << 32);

		memcpy(b, &x, 8);
		memcpy(b + 8, &x, 8);
	}
	for (size_t i = 0; i < n; i++)
		buf[i] = "0123456789abcdef"[(b[i / 2] >> (i % 2 ? 0 : 4)) & 15];
	buf[n] = '\0';
}

/* The limits a mount sends to sfs_init: the Lua name, the field, whether
 * it is a duration (the mount option then says seconds, no _ms). */
static const struct {
	const char *name;
	size_t off;
	bool ms;
} lims[] = {
#define L(n) { #n, offsetof(struct store_limits, n), false }
	L(max_tenants), L(max_parents), L(max_children), L(max_bytes),
	L(max_payload), L(max_name), L(max_tombstones),
	{ "tombstone_ttl_ms", offsetof(struct store_limits, tombstone_ttl_ms), true },
	L(parent_quota), L(tenant_quota), L(tenant_max_parents),
	L(tenant_max_children), L(tenant_max_bytes), L(tenant_max_tombstones),
	{ "default_ttl_ms", offsetof(struct store_limits, default_ttl_ms), true },
	{ "drain_window_ms", offsetof(struct store_limits, drain_window_ms), true },
#undef L
};

static uint64_t *lim_field(struct store_limits *l, size_t i)
{
	return (uint64_t *)((char *)l + lims[i].off);
}

/*
 * sfs_init: record this mount's limits, or compare them with the store's
 * (adopt them with store_limits=adopt).  Fills @l with what the store
 * has, and @instance.  0, or -EINVAL / -EPROTO / -EIO with a one-line
 * message in @err.
 */
static int init_store(struct remote *r, struct store_limits *l,
		      char *instance, char *err, size_t errlen)
{
	const char *av[64];
	char num[40][24], cand[17], ver[8];
	int n = 0, rc;
	redisReply *rep = NULL;
	char share_name[64];

	random_hex(cand, 16);
	snprintf(ver, sizeof(ver), "%d", LIBVERSION);
	av[n++] = "FCALL";
	av[n++] = "sfs_init";
	av[n++] = "1";
	av[n++] = r->meta;
	av[n++] = "";
	av[n++] = "";
	av[n++] = "";
	av[n++] = ver;
	av[n++] = cand;
	av[n++] = r->cfg.adopt_limits ? "1" : "0";
	for (size_t i = 0; i < sizeof(lims) / sizeof(lims[0]); i++) {
		av[n++] = lims[i].name;
		snprintf(num[i], sizeof(num[i]), "%" PRIu64, *lim_field(l, i));
		av[n++] = num[i];
	}
	av[n++] = "testclock";
	av[n++] = l->testclock ? "1" : "0";
	rc = rconn_pool_call(r->pool, 0, n, av, NULL, &rep);
	if (rc) {
		snprintf(err, errlen, "statefs: the shared store did not answer "
			 "within store_timeout");
		return -EIO;
	}
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 3) {
		snprintf(err, errlen, "statefs: sfs_init: %s",
			 rep->type == REDIS_REPLY_ERROR ? rep->str : "a bad reply");
		freeReplyObject(rep);
		return -EPROTO;
	}
	if (strcmp(rep->element[0]->str, "ELIMITS") == 0 && rep->elements >= 6) {
		const char *name = rep->element[3]->str;
		uint64_t have = out_u64(rep, 4), want = out_u64(rep, 5);
		bool ms = strstr(name, "_ms") != NULL;

		snprintf(share_name, sizeof(share_name), "%.*s",
			 ms ? (int)(strlen(name) - 3) : (int)strlen(name), name);
		if (ms)
			snprintf(err, errlen, "statefs: -o %s: the shared store "
				 "has %s=%" PRIu64 ".%03" PRIu64 ", this mount %"
				 PRIu64 ".%03" PRIu64 " (give the store's, or -o "
				 "store_limits=adopt)", share_name, share_name,
				 have / 1000, have % 1000, want / 1000, want % 1000);
		else
			snprintf(err, errlen, "statefs: -o %s: the shared store "
				 "has %s=%" PRIu64 ", this mount %" PRIu64
				 " (give the store's, or -o store_limits=adopt)",
				 share_name, share_name, have, want);
		freeReplyObject(rep);
		return -EINVAL;
	}
	if (strcmp(rep->element[0]->str, "OK") != 0) {
		snprintf(err, errlen, "statefs: the shared store refused this "
			 "mount: %s%s%s", rep->element[0]->str,
			 rep->elements > 3 && rep->element[3]->str ? " " : "",
			 rep->elements > 3 && rep->element[3]->str ?
			 rep->element[3]->str : "");
		freeReplyObject(rep);
		return -EINVAL;
	}
	snprintf(instance, 17, "%s", rep->element[3]->str);
	for (size_t i = 5; i + 1 < rep->elements; i += 2) {
		const char *k = rep->element[i]->str;

		for (size_t j = 0; k && j < sizeof(lims) / sizeof(lims[0]); j++)
			if (strcmp(k, lims[j].name) == 0)
				*lim_field(l, j) = out_u64(rep, i + 1);
		if (k && strcmp(k, "testclock") == 0)
			l->testclock = out_u64(rep, i + 1) == 1;
	}
	freeReplyObject(rep);
	return 0;
}

int remote_reinit(struct store *s)
{
	struct remote *r = s->remote;
	struct store_limits l = s->shown;
	char inst[17], err[512];
	int rc;

	rc = init_store(r, &l, inst, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "%s\n", err);
		return rc;
	}
	lock(&r->lock, LOCK_REMOTE);
	memcpy(r->instance, inst, sizeof(inst));
	r->instance_id = strtoull(inst, NULL, 16);
	s->instance = r->instance_id;
	r->generation++;
	unlock(&r->lock, LOCK_REMOTE);
	return 0;
}

int remote_load_all(struct store *s)
{
	struct remote *r = s->remote;
	redisReply *rep = NULL, *tl;
	uint64_t clock_ms = 0;
	const char *state;
	int rc;

	rc = remote_fcall(s, "sfs_dump", false, 0, NULL, 0, NULL, NULL, &rep);
	if (rc) {
		if (rep)
			freeReplyObject(rep);
		return rc;
	}
	if (rep->elements < 6 || rep->element[4]->type != REDIS_REPLY_ARRAY ||
	    rep->element[5]->type != REDIS_REPLY_ARRAY) {
		freeReplyObject(rep);
		return -EPROTO;
	}
	mirror_root_at(s, out_u64(rep, 2));
	snprintf(r->root_id, sizeof(r->root_id), "%s",
		 rep->element[3]->str ? rep->element[3]->str : "0-0");
	/* The store's drain and clock, from its meta. */
	for (size_t i = 0; i + 1 < rep->element[4]->elements; i += 2) {
		const char *k = rep->element[4]->element[i]->str;
		const char *v = rep->element[4]->element[i + 1]->str;

		if (!k || !v)
			continue;
		if (strcmp(k, "state") == 0)
			state = v, atomic_store(&s->state,
				strcmp(state, "draining") == 0 ? STORE_DRAINING :
				strcmp(state, "drained") == 0 ? STORE_DRAINED :
				STORE_READY);
		else if (strcmp(k, "drain_deadline") == 0)
			atomic_store(&s->drain_deadline, strtoull(v, NULL, 10));
		else if (strcmp(k, "clock_ms") == 0)
			clock_ms = strtoull(v, NULL, 10);
	}
	if (r->testclock)
		remote_saw_now(s, clock_ms);
	tl = rep->element[5];
	r->npos = 0;
	for (size_t i = 0; i + 1 < tl->elements && rc == 0; i += 2) {
		uint64_t tid = strtoull(tl->element[i + 1]->str, NULL, 10);
		char key[160], id[48];
		redisReply *d = NULL;
		struct follow_pos *np;

		remote_tenant_key(s, tid, key, sizeof(key));
		rc = remote_fcall(s, "sfs_dump", false, 1, (const char *[]){ key },
				  0, NULL, NULL, &d);
		if (rc == -ESTALE && d && strcmp(d->element[0]->str, "ESTALE") == 0)
			rc = 0; /* gone since the root's dump */
		else if (rc == 0)
			rc = mirror_load_tenant(s, tid, d, id, sizeof(id));
		if (d)
			freeReplyObject(d);
		if (rc == 0 && r->npos == r->cappos) {
			size_t cap = r->cappos ? r->cappos * 2 : 16;

			np = st_realloc(r->pos, cap * sizeof(*np));
			if (!np) {
				rc = -ENOMEM;
				break;
			}
			r->pos = np;
			r->cappos = cap;
		}
		if (rc == 0) {
			r->pos[r->npos].tid = tid;
			snprintf(r->pos[r->npos].id, sizeof(r->pos[0].id), "%s", id);
			r->npos++;
		}
	}
	freeReplyObject(rep);
	return rc;
}

int store_new_remote(const struct store_limits *limits,
		     const struct store_remote *cfg, struct store **out,
		     char *err, size_t errlen)
{
	struct store_limits l = *limits;
	struct store_clock clock;
	struct remote *r;
	struct store *s = NULL;
	char inst[17];
	int rc;

	err[0] = '\0';
	if (!cfg || cfg->kind == STORE_REMOTE_NONE)
		return -EINVAL;
	r = st_calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->cfg = *cfg;
	explicit_bzero(r->cfg.password, sizeof(r->cfg.password));
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->applied, NULL);
	random_hex(r->mount, 16);
	snprintf(r->meta, sizeof(r->meta), "%s:{%s}:meta", cfg->prefix, cfg->prefix);
	snprintf(r->rootlog, sizeof(r->rootlog), "%s:{%s}:log", cfg->prefix,
		 cfg->prefix);
	rc = rconn_pool_open(cfg, POOL_SIZE, &r->pool, err, errlen);
	if (rc == 0)
		rc = rconn_library_ensure(r->pool, "statefs", store_statefs_lua,
					  LIBVERSION, err, errlen);
	/* The shares as the store keeps them (store_new's rule). */
	if (rc == 0) {
		struct store *tmp;

		rc = store_new(&l, NULL, &tmp);
		if (rc == 0) {
			l = tmp->shown;
			store_free(tmp);
		}
	}
	if (rc == 0)
		rc = init_store(r, &l, inst, err, errlen);
	if (rc == 0) {
		r->testclock = l.testclock;
		clock.now_ms = remote_clock;
		clock.arg = r;
		rc = store_new(&l, &clock, &s);
	}
	if (rc == 0)
		rc = mirror_attach(s, r->mount, 0);
	if (rc == 0) {
		r->s = s;
		s->remote = r;
		memcpy(r->instance, inst, sizeof(inst));
		r->instance_id = strtoull(inst, NULL, 16);
		s->instance = r->instance_id;
		rc = remote_load_all(s);
		/* The clock is the store's from here on. */
		s->born_ms = store_now_ms(s);
		if (rc && !err[0])
			snprintf(err, errlen, "statefs: cannot load the shared "
				 "store (%s)", strerror(-rc));
	}
	if (rc == 0) {
		rc = follow_start(s);
		if (rc && !err[0])
			snprintf(err, errlen, "statefs: cannot follow the shared "
				 "store (%s)", strerror(-rc));
	}
	if (rc) {
		if (s) {
			store_free(s); /* frees r through remote_free */
		} else {
			rconn_pool_close(r->pool);
			pthread_mutex_destroy(&r->lock);
			pthread_cond_destroy(&r->applied);
			free(r);
		}
		if (!err[0])
			snprintf(err, errlen, "statefs: cannot open the shared "
				 "store (%s)", strerror(-rc));
		return rc;
	}
	*out = s;
	return 0;
}

void remote_free(struct store *s)
{
	struct remote *r = s->remote;

	if (!r)
		return;
	follow_stop(s);
	rconn_pool_close(r->pool);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->applied);
	free(r->pos);
	free(r);
	s->remote = NULL;
}

bool store_is_shared(const struct store *s)
{
	return s->remote != NULL;
}

enum store_link store_connection(const struct store *s)
{
	if (!s->remote)
		return STORE_LINK_EMBEDDED;
	return rconn_pool_connected(s->remote->pool) ? STORE_LINK_CONNECTED :
						       STORE_LINK_DISCONNECTED;
}

int store_sync(struct store *s, struct store_node *n)
{
	(void)n;
	return s->remote ? remote_sync(s) : 0;
}

int store_clock_advance(struct store *s, uint64_t ms)
{
	int rc;

	if (!s->remote)
		return -ENOTSUP;
	rc = remote_clock_advance(s, ms);
	/* Then what is due goes, as the embedded store's reaper does when
	 * the manual clock moves. */
	if (rc == 0)
		remote_expire(s, 4096);
	return rc;
}
