/*
 * apply.c - a mirror: the embedded store's own structures, changed only
 * by applying the shared store's log entries in seq order, and loaded
 * from its dumps.
 *
 * What it owns
 * ------------
 * A mirror decides nothing.  Redis decided (redis/lua/: every
 * check, every number); an entry says what changed, with every number
 * it needs.  The mirror applies it with the embedded store's own
 * transitions (child_create, parent_leave, child_expire, ...: the same
 * mutation code, the same cascades, the same .events lines), run with
 * the entry as their source of numbers: each is passed the entry's
 * struct given (store/engine.h), which gives the wall
 * time they stamp (the entry's ns), the store clock they read (its ms,
 * so a lease's or a tombstone's deadline is the one Redis computed), the
 * inode number of the node they make, the sequence numbers their lines
 * show (the entry's, per tenant) and whether the lines are internal
 * (another mount's change, or a reaper's), and draining() refuses
 * nothing.  The mirror's own ceilings, quotas and shares are none
 * (mirror_attach): it applies several tenants' logs in an order of its
 * own, and a store-wide count may be briefly ahead of Redis's order.
 * What the transitions compute themselves (a generation, a version, a
 * deadline) is compared with the entry: a difference means the mirror
 * is not the store, and the tenant is reloaded (-EUCLEAN).
 *
 * Here: each kind of entry applied, from a plain struct entry
 * (redis/entry.h; parsed from the reply by redis/entry.c, so nothing
 * here knows how an entry travels).  The index of nodes by the shared
 * store's inode number and the tenants followed are redis/index.c's;
 * loading a tenant from its dump is redis/load.c's; the structures of
 * the three are in redis/mirror.h.
 *
 * Locks
 * -----
 * Applying an entry runs the embedded transitions, which take their own
 * locks (the world lock shared, then the tenant's, the bucket's, the
 * stripe...); a drain's clear holds the world lock exclusive.  The
 * mirror's lock (LOCK_ENGINE_INDEX, redis/index.c) is taken only to
 * look up or change the index and the tenants, never across a
 * transition.  One thread applies at a time, holding the mirror's
 * apply lock (LOCK_ENGINE_APPLY, outside every store lock) across the
 * change: the follower (redis/follow.c, or a test), or a caller whose
 * call's outcome gave its own entries (mirror_apply_next, redis/own.c);
 * readers use the hierarchy as they always do.
 */
#include "store/engine.h"
#include "redis/mirror.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <sys/stat.h>

/* Applying ------------------------------------------------------------------ */

/* The node entry field @name names (a shared store inode number), of
 * kind @kind, with a reference; NULL when it is not live here. */
static struct store_node *node_of(struct store *s, const struct entry *e,
				  const char *name, enum store_kind kind)
{
	uint64_t ino;
	struct store_node *n;

	if (!entry_u64(e, name, &ino))
		return NULL;
	n = index_get(mirror_of(s), ino + mirror_of(s)->ino_offset);
	if (n && store_node_kind(n) != kind) {
		store_node_unref(s, n);
		n = NULL;
	}
	return n;
}

static bool owner_of(const struct entry *e, struct store_owner *o)
{
	uint64_t uid, gid, mode;

	if (!entry_u64(e, "uid", &uid) || !entry_u64(e, "gid", &gid) || !entry_u64(e, "mode", &mode))
		return false;
	o->uid = (uid_t)uid;
	o->gid = (gid_t)gid;
	o->mode = (mode_t)mode;
	return true;
}

/* A transition's outcome while applying: any refusal means the mirror
 * is not the store. */
static int applied(int rc)
{
	return rc < 0 ? -EUCLEAN : 0;
}

static int apply_join(struct store *s, struct given *g, struct mtenant *mt,
		      const struct entry *e)
{
	struct mirror *m = mirror_of(s);
	struct store_owner o;
	struct store_node *n = NULL;
	const char *kind = entry_str(e, "kind"), *name = entry_str(e, "name");
	uint64_t ino, gen;
	int rc;

	if (!kind || !name || !owner_of(e, &o) || !entry_u64(e, "ino", &ino))
		return -EPROTO;
	g->ino = ino + m->ino_offset;
	if (strcmp(kind, "tenant") == 0) {
		struct store_node *old;

		/* A cleanup of an earlier tenant of the name orders before
		 * this join in the store, but is in another log: it may
		 * not be applied yet.  It is now. */
		old = tenant_find(s, name);
		if (old) {
			struct given q = *g;

			q.quiet = true;
			ENGINE_TRANSITION(s, tenant_cleanup(s, &q, name, NULL));
			store_node_unref(s, old);
		}
		rc = ENGINE_TRANSITION(s, tenant_create(s, g, name, &o, &n, NULL));
		if (rc)
			return applied(rc);
		store_node_ref(n);
		lock(&m->lock, LOCK_ENGINE_INDEX);
		if (mt->t)
			store_node_unref(s, tenant_node(mt->t));
		mt_set_locked(m, mt, node_tenant(n));
		unlock(&m->lock, LOCK_ENGINE_INDEX);
		return index_put(s, m, n);
	}
	if (strcmp(kind, "parent") != 0 || !entry_u64(e, "gen", &gen))
		return -EPROTO;
	/* No copy of the tenant (a reload of it failed), or a dead one:
	 * nothing of it applies until it is reloaded. */
	if (!mt->t || node_dead(tenant_node(mt->t)))
		return -EUCLEAN;
	rc = ENGINE_TRANSITION(s, parent_join(s, g, mt->t, name, &o, &n, NULL));
	if (rc)
		return applied(rc);
	if (parent_generation(node_parent(n)) != gen) {
		store_node_unref(s, n);
		return -EUCLEAN;
	}
	return index_put(s, m, n);
}

static int apply_create(struct store *s, struct given *g, const struct entry *e)
{
	struct store_node *p = node_of(s, e, "pino", STORE_PARENT), *n = NULL;
	const char *name = entry_str(e, "child");
	struct store_owner o;
	uint64_t ino, deadline;
	bool created = false;
	int rc;

	if (!p)
		return -EUCLEAN;
	if (!name || !owner_of(e, &o) || !entry_u64(e, "ino", &ino) ||
	    !entry_u64(e, "deadline", &deadline)) {
		store_node_unref(s, p);
		return -EPROTO;
	}
	g->ino = ino + mirror_of(s)->ino_offset;
	rc = ENGINE_TRANSITION(s, child_create(s, g, p, name, &o, true, &n, &created, NULL));
	store_node_unref(s, p);
	if (rc)
		return applied(rc);
	if (node_deadline(s, n) != deadline) {
		store_node_unref(s, n);
		return -EUCLEAN;
	}
	return index_put(s, mirror_of(s), n);
}

/* Set @n's attributes as entry @e gives them (an attr entry, or the
 * attributes of a size change), and its renewed deadline. */
static int apply_attrs(struct store *s, struct given *g, struct store_node *n,
		       const struct entry *e)
{
	struct store_attr in = { 0 };
	unsigned mask = 0;
	uint64_t v, deadline = 0;
	int64_t t;
	int rc;

	if (entry_u64(e, "mode", &v)) {
		mask |= STORE_SET_MODE;
		in.mode = (mode_t)v;
	}
	if (entry_u64(e, "uid", &v)) {
		mask |= STORE_SET_UID;
		in.uid = (uid_t)v;
	}
	if (entry_u64(e, "gid", &v)) {
		mask |= STORE_SET_GID;
		in.gid = (gid_t)v;
	}
	if (dec_i64(entry_str(e, "atime"), &t)) {
		mask |= STORE_SET_ATIME;
		in.atime.tv_sec = t / NS_PER_S;
		in.atime.tv_nsec = t % NS_PER_S;
	}
	if (dec_i64(entry_str(e, "mtime"), &t) && strcmp(e->op, "attr") == 0) {
		mask |= STORE_SET_MTIME;
		in.mtime.tv_sec = t / NS_PER_S;
		in.mtime.tv_nsec = t % NS_PER_S;
	}
	if (entry_u64(e, "deadline", &deadline))
		mask |= STORE_SET_RENEW;
	if (!mask && !entry_str(e, "ctime"))
		return 0;
	rc = ENGINE_TRANSITION(s, node_setattr(s, g, n, mask, &in, NULL));
	if (rc)
		return applied(rc);
	if ((mask & STORE_SET_RENEW) && node_deadline(s, n) != deadline)
		return -EUCLEAN;
	return 0;
}

static int apply_write(struct store *s, struct given *g, const struct entry *e)
{
	struct store_node *n = node_of(s, e, "ino", STORE_CHILD);
	const char *data;
	size_t len = 0;
	uint64_t ver;
	int64_t mtime;
	bool keep;
	int rc;

	if (!n)
		return -EUCLEAN;
	data = entry_get(e, "data", &len);
	if (!data || !entry_u64(e, "ver", &ver)) {
		store_node_unref(s, n);
		return -EPROTO;
	}
	/* A write entry of sfs_publish names the mtime it kept; one of
	 * sfs_setattr (kind=child) names the mtime the call set. */
	keep = !entry_str(e, "kind") && dec_i64(entry_str(e, "mtime"), &mtime);
	rc = ENGINE_TRANSITION(s, content_publish(s, g, node_child(n), data, len,
						  keep ? &mtime : NULL));
	if (rc == 0 && state_version(s, node_child(n)) != ver)
		rc = -EUCLEAN;
	if (rc == 0 && entry_str(e, "kind")) {
		rc = apply_attrs(s, g, n, e);
		if (rc == 0 && dec_i64(entry_str(e, "mtime"), &mtime)) {
			state_set_mtime(s, node_child(n), mtime);
		}
	}
	store_node_unref(s, n);
	return applied(rc);
}

/* The node an attr, ttl or renew entry names: KIND and INO. */
static struct store_node *node_of_kind(struct store *s, struct mtenant *mt,
				       const struct entry *e)
{
	const char *kind = entry_str(e, "kind");

	if (!kind)
		return NULL;
	if (strcmp(kind, "tenant") == 0) {
		uint64_t ino;

		if (!entry_u64(e, "ino", &ino) ||
		    store_node_ino(tenant_node(mt->t)) != ino + mirror_of(s)->ino_offset)
			return NULL;
		store_node_ref(tenant_node(mt->t));
		return tenant_node(mt->t);
	}
	return node_of(s, e, "ino", strcmp(kind, "parent") == 0 ?
			  STORE_PARENT : STORE_CHILD);
}

/* Another mount changed @n's attributes, which no line tells of: the
 * watcher machinery raises ATTRIB for it (store_set_touch_hook). */
static void touched(struct store *s, struct given *g, struct store_node *n)
{
	if (g->others && !g->quiet)
		node_touched(s, n);
}

static int apply_lease(struct store *s, struct given *g, struct mtenant *mt,
		       const struct entry *e, bool set)
{
	struct store_node *n = node_of_kind(s, mt, e);
	uint64_t ttl, deadline;
	int rc;

	if (!n)
		return -EUCLEAN;
	if (!entry_u64(e, "ttl", &ttl) || !entry_u64(e, "deadline", &deadline)) {
		store_node_unref(s, n);
		return -EPROTO;
	}
	rc = ENGINE_TRANSITION(s, lease_change(s, g, n, set, ttl));
	if (rc == 0 && node_deadline(s, n) != deadline)
		rc = -EUCLEAN;
	if (rc == 0)
		touched(s, g, n);
	store_node_unref(s, n);
	return applied(rc);
}

static int apply_expire(struct store *s, struct given *g, const struct entry *e)
{
	const char *kind = entry_str(e, "kind");
	struct store_node *n;
	int done;

	if (!kind)
		return -EPROTO;
	n = node_of(s, e, "ino", strcmp(kind, "parent") == 0 ?
		    STORE_PARENT : STORE_CHILD);
	if (!n)
		return -EUCLEAN;
	if (store_node_kind(n) == STORE_PARENT)
		done = ENGINE_TRANSITION(s, parent_expire(s, g, node_parent(n), e->ms));
	else
		done = ENGINE_TRANSITION(s, child_expire(s, g, node_child(n), e->ms));
	store_node_unref(s, n);
	return done == 1 ? 0 : -EUCLEAN;
}

static int apply_rename(struct store *s, struct given *g, const struct entry *e, unsigned flags)
{
	struct store_node *a = node_of(s, e, "pino", STORE_PARENT);
	struct store_node *b = node_of(s, e, "to_pino", STORE_PARENT);
	const char *name = entry_str(e, "child"), *to = entry_str(e, "to_child");
	int rc = -EUCLEAN;

	if (a && b && name && to)
		rc = applied(ENGINE_TRANSITION(s, child_rename(s, g, a, name, b, to, flags)));
	if (a)
		store_node_unref(s, a);
	if (b)
		store_node_unref(s, b);
	return rc;
}

static int apply_tomb_age(struct store *s, struct tenant *t,
			  const struct entry *e)
{
	const char *name = entry_str(e, "name");

	if (!name)
		return -EPROTO;
	tomb_age(s, t, name);
	return 0;
}

static int apply_child_ttl(struct store *s, struct given *g, const struct entry *e)
{
	struct store_node *n = node_of(s, e, "ino", STORE_PARENT);
	uint64_t ttl;

	if (!n)
		return -EUCLEAN;
	if (!entry_u64(e, "ttl", &ttl)) {
		store_node_unref(s, n);
		return -EPROTO;
	}
	parent_set_child_ttl(node_parent(n), ttl);
	touched(s, g, n);
	store_node_unref(s, n);
	return 0;
}

/* The tenant of @mt goes (a cleanup, or a drain of the store). */
static void mt_gone(struct store *s, struct mtenant *mt)
{
	lock(&mirror_of(s)->lock, LOCK_ENGINE_INDEX);
	mt->gone = true;
	unlock(&mirror_of(s)->lock, LOCK_ENGINE_INDEX);
}

static int apply_tenant(struct store *s, struct given *g, struct mtenant *mt,
			const struct entry *e)
{
	const char *op = e->op;
	struct tenant *t = mt->t;
	struct store_node *a, *b;
	uint64_t v;
	int rc;

	if (strcmp(op, "join") == 0)
		return apply_join(s, g, mt, e);
	if (!t || node_dead(tenant_node(t)))
		return -EUCLEAN;
	if (strcmp(op, "leave") == 0 || strcmp(op, "depart") == 0) {
		const char *name = entry_str(e, "name");

		if (!name || !entry_u64(e, "gen", &v))
			return -EPROTO;
		rc = ENGINE_TRANSITION(s, parent_leave(s, g, t, name, op[0] == 'l', NULL));
		return applied(rc);
	}
	if (strcmp(op, "expire") == 0)
		return apply_expire(s, g, e);
	if (strcmp(op, "create") == 0)
		return apply_create(s, g, e);
	if (strcmp(op, "unlink") == 0) {
		const char *name = entry_str(e, "child");

		a = node_of(s, e, "pino", STORE_PARENT);
		if (!a || !name) {
			if (a)
				store_node_unref(s, a);
			return -EUCLEAN;
		}
		rc = ENGINE_TRANSITION(s, child_unlink(s, g, a, name));
		store_node_unref(s, a);
		return applied(rc);
	}
	if (strcmp(op, "link") == 0) {
		const char *name = entry_str(e, "child");

		a = node_of(s, e, "ino", STORE_CHILD);
		b = node_of(s, e, "pino", STORE_PARENT);
		rc = a && b && name ?
		     ENGINE_TRANSITION(s, child_link(s, g, a, b, name, NULL)) : -EUCLEAN;
		if (a)
			store_node_unref(s, a);
		if (b)
			store_node_unref(s, b);
		return applied(rc);
	}
	if (strcmp(op, "rename") == 0)
		return apply_rename(s, g, e, 0);
	if (strcmp(op, "exchange") == 0)
		return apply_rename(s, g, e, STORE_RENAME_EXCHANGE);
	if (strcmp(op, "write") == 0)
		return apply_write(s, g, e);
	if (strcmp(op, "attr") == 0) {
		a = node_of_kind(s, mt, e);
		if (!a)
			return -EUCLEAN;
		rc = apply_attrs(s, g, a, e);
		if (rc == 0)
			touched(s, g, a);
		store_node_unref(s, a);
		return rc;
	}
	if (strcmp(op, "ttl") == 0 || strcmp(op, "renew") == 0)
		return apply_lease(s, g, mt, e, op[0] == 't');
	if (strcmp(op, "child_ttl") == 0)
		return apply_child_ttl(s, g, e);
	if (strcmp(op, "tomb_age") == 0)
		return apply_tomb_age(s, t, e);
	if (strcmp(op, "drain") == 0) {
		if (!entry_str(e, "clear")) {
			rc = ENGINE_TRANSITION(s, drain_start(s, g, t, e->ms, NULL));
			return applied(rc);
		}
		drain_clear_tenant(s, g, t, entry_str(e, "dead") != NULL);
		if (entry_str(e, "dead"))
			mt_gone(s, mt);
		return 0;
	}
	if (strcmp(op, "cleanup") == 0) {
		const char *name = store_node_name(tenant_node(t));
		struct store_node *cur;
		bool same;

		/* Unless a later tenant of the name joined already (which
		 * applied this cleanup first). */
		cur = tenant_find(s, name);
		same = cur == tenant_node(t);
		if (cur)
			store_node_unref(s, cur);
		if (same)
			ENGINE_TRANSITION(s, tenant_cleanup(s, g, name, NULL));
		mt_gone(s, mt);
		return 0;
	}
	return -EPROTO;
}

static int apply_root(struct store *s, struct given *g, const struct entry *e)
{
	const char *op = e->op;
	uint64_t v;

	if (strcmp(op, "tenant") == 0) {
		if (!entry_u64(e, "tid", &v))
			return -EPROTO;
		return mirror_tenant_add(s, v, entry_str(e, "name"));
	}
	if (strcmp(op, "drain") == 0)
		return applied(ENGINE_TRANSITION(s, drain_start(s, g, NULL, e->ms, NULL)));
	if (strcmp(op, "drained") == 0) {
		store_set_drained(s);
		return 0;
	}
	if (strcmp(op, "clock") == 0) {
		if (!entry_u64(e, "clock_ms", &v))
			return -EPROTO;
		atomic_store(&mirror_of(s)->testclock_ms, v);
		return 0;
	}
	return 0; /* cleanup: the tenant's own log says it */
}

/* mirror_apply's work, under m->apply; @own: the caller's own entry,
 * applied only as the next one (mirror_apply_next). */
static int apply_locked(struct store *s, uint64_t tid, const struct entry *e,
			bool own)
{
	struct mirror *m = mirror_of(s);
	struct mtenant *mt = NULL;
	struct given ctx = {
		.ns = e->ns, .ms = e->ms, .seq = e->seq, .gseq = e->gseq,
		.others = strcmp(e->by, m->by) != 0 || !*e->by,
	};
	uint64_t last, n = e->nseq > 1 ? e->nseq : 1;
	bool whole = true;
	int rc;

	if (tid) {
		lock(&m->lock, LOCK_ENGINE_INDEX);
		mt = mt_find_locked(m, tid);
		last = mt ? mt->seq : 0;
		if (mt)
			whole = mt->t && !mt->shell && !mt->unloading && !mt->gone;
		unlock(&m->lock, LOCK_ENGINE_INDEX);
		if (!mt)
			return own ? -EAGAIN : -ENOENT;
	} else {
		last = m->root_seq;
	}
	if (own && (!whole || e->seq != last + 1 ||
		    (atomic_load(&m->gorder) &&
		     (!e->gseq || e->gseq != m->gseq_applied + 1))))
		return -EAGAIN;
	if (e->seq <= last)
		return 0; /* applied already (a load overlapped the log) */
	if (e->seq != last + 1)
		return -ERANGE;
	/* The embedded store's rule for who caused a line, when the change
	 * is this mount's own. */
	if (!*m->by)
		ctx.others = false;
	rc = tid ? apply_tenant(s, &ctx, mt, e) : apply_root(s, &ctx, e);
	if (rc)
		return rc;
	if (e->gseq)
		m->gseq_applied = e->gseq + n - 1;
	if (tid) {
		struct tenant *drop = NULL;

		lock(&m->lock, LOCK_ENGINE_INDEX);
		mt->seq = e->seq + n - 1;
		if (own)
			mt->own_n++;
		if (mt->gone) {
			/* Its log has ended: forget it, so that the mirror
			 * does not grow with every tenant it ever saw
			 * (mirror_applied still says it went). */
			HASH_DEL(m->tenants, mt);
			drop = mt->t;
			free(mt);
		}
		unlock(&m->lock, LOCK_ENGINE_INDEX);
		if (drop)
			store_node_unref(s, tenant_node(drop));
	} else {
		m->root_seq = e->seq;
	}
	return 0;
}

int mirror_apply(struct store *s, uint64_t tid, const struct entry *e)
{
	struct mirror *m = mirror_of(s);
	int rc;

	lock(&m->apply, LOCK_ENGINE_APPLY);
	rc = apply_locked(s, tid, e, false);
	unlock(&m->apply, LOCK_ENGINE_APPLY);
	return rc;
}

/* The kinds of entry a caller applies itself: each changes the tenant's
 * nodes and leaves the tenant (a cleanup, a drain's clear, which end
 * it or touch the root, are the follower's, which follows them). */
static bool own_kind(const char *op)
{
	static const char *const kinds[] = {
		"create", "write", "unlink", "rename", "exchange", "link",
		"attr", "ttl", "renew", "join", "leave", "depart", "expire",
	};

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strcmp(op, kinds[i]) == 0)
			return true;
	return false;
}

int mirror_apply_next(struct store *s, uint64_t tid, const struct entry *e)
{
	struct mirror *m = mirror_of(s);
	int rc;

	if (!tid || !own_kind(e->op))
		return -EAGAIN;
	lock(&m->apply, LOCK_ENGINE_APPLY);
	rc = apply_locked(s, tid, e, true);
	unlock(&m->apply, LOCK_ENGINE_APPLY);
	return rc;
}
