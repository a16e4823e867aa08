/*
 * mirror.c - a mirror: the embedded store's own structures, changed only
 * by applying the shared store's log entries in seq order, and loaded
 * from its dumps.
 *
 * What it owns
 * ------------
 * A mirror decides nothing.  Redis decided (store/statefs.lua: every
 * check, every number); an entry says what changed, with every number
 * it needs.  The mirror applies it with the embedded store's own
 * transitions (do_create, parent_leave, child_expire, ...: the same
 * mutation code, the same cascades, the same .events lines), run with
 * the entry as their source of numbers: while an entry is applied, this
 * thread's apply context (struct apply_ctx, internal.h) gives the wall
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
 * A secondary index, the mirror's only (the embedded store keeps none):
 * every live node by the shared store's inode number, for entries that
 * name a node by its number alone.
 *  1. Authority: the hierarchy.  The index holds a counted reference
 *     and nothing else.
 *  2. Updated by the apply path only: a node made by an entry (or a
 *     load) is put in at once.
 *  3. A stale entry (its node died in a cascade) is told by node->dead:
 *     a lookup skips it, and a sweep, once as many entries were added
 *     as it holds (amortized O(1) per entry), drops those that were dead
 *     at the sweep before already.
 *  4. A new store instance builds a new mirror: it is not rebuilt.
 *  5. Tests: tests/unit/test_mirror.c (every entry kind against the
 *     embedded store's snapshot).
 * Tenants are followed by id (struct mtenant): the tenant node, the
 * last seq applied, whether it has gone.
 *
 * Locks
 * -----
 * mirror->lock (LOCK_MIRROR, a leaf) guards the index and the tenant
 * table, held only to look up or change them, never across a
 * transition.  Applying an entry runs the embedded transitions, which
 * take their own locks (the world lock shared, then the tenant's, the
 * bucket's, the stripe...); a drain's clear holds the world lock
 * exclusive.  One thread applies (the follower, store/follow.c, or a
 * test); readers use the hierarchy as they always do.
 */
#include "store/internal.h"
#include "store/mirror.h"

#include <errno.h>
#include <inttypes.h>
#include <sys/stat.h>

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
};

struct mirror {
	pthread_mutex_t lock;          /* LOCK_MIRROR */
	struct mnode *index;           /* lock: local ino -> node */
	size_t added;                  /* lock: since the last sweep */
	struct mtenant *tenants;       /* lock: tid -> tenant */
	uint64_t root_seq;             /* the apply thread's */
	_Atomic uint64_t ino_offset;   /* changes with a new instance */
	_Atomic uint64_t testclock_ms;
	char by[64];                   /* immutable: this mount's id */
};

/* Entries ------------------------------------------------------------------ */

/* The value of field @name of @e, or NULL; its length in *@len. */
static const char *mf_len(const struct mentry *e, const char *name, size_t *len)
{
	const redisReply *f = e->fields;

	for (size_t i = 0; i + 1 < f->elements; i += 2)
		if (f->element[i]->type == REDIS_REPLY_STRING &&
		    strcmp(f->element[i]->str, name) == 0) {
			if (len)
				*len = f->element[i + 1]->len;
			return f->element[i + 1]->str;
		}
	return NULL;
}

static const char *mf(const struct mentry *e, const char *name)
{
	return mf_len(e, name, NULL);
}

/* Decimal @s into *@v; false when absent or malformed. */
static bool dec_u64(const char *s, uint64_t *v)
{
	char *end;

	if (!s || !*s || *s == '-')
		return false;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno == 0 && *end == '\0';
}

static bool dec_i64(const char *s, int64_t *v)
{
	char *end;

	if (!s || !*s)
		return false;
	errno = 0;
	*v = strtoll(s, &end, 10);
	return errno == 0 && *end == '\0';
}

static bool mfu(const struct mentry *e, const char *name, uint64_t *v)
{
	return dec_u64(mf(e, name), v);
}

int mentry_parse(const redisReply *fields, struct mentry *e)
{
	memset(e, 0, sizeof(*e));
	if (!fields || fields->type != REDIS_REPLY_ARRAY || fields->elements % 2)
		return -EPROTO;
	for (size_t i = 0; i < fields->elements; i++)
		if (fields->element[i]->type != REDIS_REPLY_STRING)
			return -EPROTO;
	e->fields = fields;
	e->op = mf(e, "op");
	e->by = mf(e, "by");
	if (!e->by)
		e->by = "";
	if (!e->op || !mfu(e, "seq", &e->seq) || !mfu(e, "ms", &e->ms) ||
	    !dec_i64(mf(e, "ns"), &e->ns))
		return -EPROTO;
	if (!mfu(e, "nseq", &e->nseq))
		e->nseq = 1;
	return 0;
}

/* The index and the tenants ----------------------------------------------- */

int mirror_attach(struct store *s, const char *by, uint64_t ino_offset)
{
	struct mirror *m = st_calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->lock, NULL);
	m->ino_offset = ino_offset;
	snprintf(m->by, sizeof(m->by), "%s", by ? by : "");
	/* Redis enforces these; the mirror follows (see the top). */
	s->lim.max_tenants = s->lim.max_parents = s->lim.max_children = 0;
	s->lim.max_bytes = s->lim.max_tombstones = 0;
	s->lim.parent_quota = s->lim.tenant_quota = 0;
	s->lim.tenant_max_parents = s->lim.tenant_max_children = 0;
	s->lim.tenant_max_bytes = s->lim.tenant_max_tombstones = 0;
	atomic_store(&s->next_ino, ino_offset + STORE_ROOT_INO + 1 + STORE_NSPECIAL);
	s->mirror = m;
	return 0;
}

int mirror_reset(struct store *s, uint64_t ino_offset)
{
	struct mirror *m = s->mirror;
	struct mnode *x, *xt, *idx;
	struct mtenant *mt, *mtt, *ts;

	lock(&m->lock, LOCK_MIRROR);
	idx = m->index;
	ts = m->tenants;
	m->index = NULL;
	m->tenants = NULL;
	m->added = 0;
	m->root_seq = 0;
	atomic_store(&m->ino_offset, ino_offset);
	unlock(&m->lock, LOCK_MIRROR);
	HASH_ITER(hh, idx, x, xt) {
		HASH_DELETE(hh, idx, x);
		store_node_unref(s, x->n);
		free(x);
	}
	HASH_ITER(hh, ts, mt, mtt) {
		HASH_DELETE(hh, ts, mt);
		if (mt->t)
			store_node_unref(s, &mt->t->node);
		free(mt);
	}
	return 0;
}

void mirror_free(struct store *s)
{
	struct mirror *m = s->mirror;
	struct mnode *x, *xt;
	struct mtenant *mt, *mtt;

	if (!m)
		return;
	HASH_ITER(hh, m->index, x, xt) {
		HASH_DEL(m->index, x);
		store_node_unref(s, x->n);
		free(x);
	}
	HASH_ITER(hh, m->tenants, mt, mtt) {
		HASH_DEL(m->tenants, mt);
		if (mt->t)
			store_node_unref(s, &mt->t->node);
		free(mt);
	}
	pthread_mutex_destroy(&m->lock);
	free(m);
	s->mirror = NULL;
}

/*
 * Drop the index's entries that were dead at the last sweep already (no
 * lock held): a transition that made a node another mount's change
 * removed at once still finds it, dead, to answer with
 * (mirror_node_any).
 */
static void index_sweep(struct store *s, struct mirror *m)
{
	struct mnode *x, *xt, *dead = NULL;

	lock(&m->lock, LOCK_MIRROR);
	HASH_ITER(hh, m->index, x, xt) {
		if (is_dead(x->n) && !x->doomed) {
			x->doomed = true;
		} else if (is_dead(x->n)) {
			HASH_DEL(m->index, x);
			x->hh.next = dead;
			dead = x;
		}
	}
	m->added = 0;
	unlock(&m->lock, LOCK_MIRROR);
	while ((x = dead)) {
		dead = x->hh.next;
		store_node_unref(s, x->n);
		free(x);
	}
}

/* Put node @n (its reference handed over) in the index. */
static int index_put(struct store *s, struct mirror *m, struct store_node *n)
{
	struct mnode *x = st_calloc(1, sizeof(*x)), *old;
	bool sweep;

	if (!x) {
		store_node_unref(s, n);
		return -ENOMEM;
	}
	x->ino = n->ino;
	x->n = n;
	lock(&m->lock, LOCK_MIRROR);
	HASH_FIND(hh, m->index, &x->ino, sizeof(x->ino), old);
	if (old)
		HASH_DEL(m->index, old);
	hash_oom = 0;
	HASH_ADD(hh, m->index, ino, sizeof(x->ino), x);
	if (hash_oom) {
		unlock(&m->lock, LOCK_MIRROR);
		store_node_unref(s, n);
		free(x);
		x = NULL;
	} else {
		sweep = ++m->added > 1024 && m->added > HASH_COUNT(m->index) / 2;
		unlock(&m->lock, LOCK_MIRROR);
	}
	if (old) {
		store_node_unref(s, old->n);
		free(old);
	}
	if (!x)
		return -ENOMEM;
	if (sweep)
		index_sweep(s, m);
	return 0;
}

/* The live node with local inode @ino, with a reference, or NULL. */
static struct store_node *index_get(struct mirror *m, uint64_t ino)
{
	struct mnode *x;
	struct store_node *n = NULL;

	lock(&m->lock, LOCK_MIRROR);
	HASH_FIND(hh, m->index, &ino, sizeof(ino), x);
	if (x && !is_dead(x->n)) {
		n = x->n;
		store_node_ref(n);
	}
	unlock(&m->lock, LOCK_MIRROR);
	return n;
}

struct store_node *mirror_node_any(struct store *s, uint64_t ino)
{
	struct mirror *m = s->mirror;
	uint64_t local = ino + m->ino_offset;
	struct store_node *n = NULL;
	struct mnode *x;

	lock(&m->lock, LOCK_MIRROR);
	HASH_FIND(hh, m->index, &local, sizeof(local), x);
	if (x) {
		n = x->n;
		store_node_ref(n);
	}
	unlock(&m->lock, LOCK_MIRROR);
	return n;
}

struct store_node *mirror_node(struct store *s, uint64_t ino)
{
	return index_get(s->mirror, ino + s->mirror->ino_offset);
}

uint64_t mirror_remote_ino(struct store *s, const struct store_node *n)
{
	return n->ino - s->mirror->ino_offset;
}

static struct mtenant *mt_find_locked(struct mirror *m, uint64_t tid)
{
	struct mtenant *mt;

	store_assert_held(LOCK_MIRROR);
	HASH_FIND(hh, m->tenants, &tid, sizeof(tid), mt);
	return mt;
}

int mirror_tenant_add(struct store *s, uint64_t tid, const char *name)
{
	struct mirror *m = s->mirror;
	struct mtenant *mt;
	int rc = 0;

	(void)name;
	lock(&m->lock, LOCK_MIRROR);
	if (!mt_find_locked(m, tid)) {
		mt = st_calloc(1, sizeof(*mt));
		if (!mt) {
			rc = -ENOMEM;
		} else {
			mt->tid = tid;
			hash_oom = 0;
			HASH_ADD(hh, m->tenants, tid, sizeof(mt->tid), mt);
			if (hash_oom) {
				free(mt);
				rc = -ENOMEM;
			}
		}
	}
	unlock(&m->lock, LOCK_MIRROR);
	return rc;
}

int mirror_applied(struct store *s, uint64_t tid, uint64_t *seq, bool *gone)
{
	struct mirror *m = s->mirror;
	struct mtenant *mt;
	int rc = 0;

	if (tid == 0) {
		*seq = m->root_seq;
		*gone = false;
		return 0;
	}
	lock(&m->lock, LOCK_MIRROR);
	mt = mt_find_locked(m, tid);
	if (mt) {
		*seq = mt->seq;
		*gone = mt->gone;
	} else {
		rc = -ENOENT;
	}
	unlock(&m->lock, LOCK_MIRROR);
	return rc;
}

void mirror_root_at(struct store *s, uint64_t seq)
{
	s->mirror->root_seq = seq;
}

size_t mirror_tenants(struct store *s, uint64_t *tids, size_t cap)
{
	struct mirror *m = s->mirror;
	struct mtenant *mt;
	size_t n = 0;

	lock(&m->lock, LOCK_MIRROR);
	for (mt = m->tenants; mt; mt = mt->hh.next)
		if (!mt->gone) {
			if (n < cap)
				tids[n] = mt->tid;
			n++;
		}
	unlock(&m->lock, LOCK_MIRROR);
	return n;
}

uint64_t mirror_tid_of(struct store *s, struct store_node *tenant)
{
	struct mirror *m = s->mirror;
	struct mtenant *mt;
	uint64_t tid = 0;

	lock(&m->lock, LOCK_MIRROR);
	for (mt = m->tenants; mt && !tid; mt = mt->hh.next)
		if (mt->t && &mt->t->node == tenant)
			tid = mt->tid;
	unlock(&m->lock, LOCK_MIRROR);
	return tid;
}

uint64_t mirror_testclock(struct store *s)
{
	return atomic_load(&s->mirror->testclock_ms);
}

/* Applying ------------------------------------------------------------------ */

/* The node entry field @name names (a shared store inode number), of
 * kind @kind, with a reference; NULL when it is not live here. */
static struct store_node *node_of(struct store *s, const struct mentry *e,
				  const char *name, enum store_kind kind)
{
	uint64_t ino;
	struct store_node *n;

	if (!mfu(e, name, &ino))
		return NULL;
	n = index_get(s->mirror, ino + s->mirror->ino_offset);
	if (n && n->kind != kind) {
		store_node_unref(s, n);
		n = NULL;
	}
	return n;
}

static bool owner_of(const struct mentry *e, struct store_owner *o)
{
	uint64_t uid, gid, mode;

	if (!mfu(e, "uid", &uid) || !mfu(e, "gid", &gid) || !mfu(e, "mode", &mode))
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

static int apply_join(struct store *s, struct mtenant *mt,
		      const struct mentry *e)
{
	struct mirror *m = s->mirror;
	struct store_owner o;
	struct store_node *n = NULL;
	const char *kind = mf(e, "kind"), *name = mf(e, "name");
	uint64_t ino, gen;
	int rc;

	if (!kind || !name || !owner_of(e, &o) || !mfu(e, "ino", &ino))
		return -EPROTO;
	applying->ino = ino + m->ino_offset;
	if (strcmp(kind, "tenant") == 0) {
		struct tenant *old;

		/* A cleanup of an earlier tenant of the name orders before
		 * this join in the store, but is in another log: it may
		 * not be applied yet.  It is now. */
		lock(&s->lock, LOCK_STORE);
		HASH_FIND_STR(s->tenants, name, old);
		if (old)
			store_node_ref(&old->node);
		unlock(&s->lock, LOCK_STORE);
		if (old) {
			struct apply_ctx *a = applying, q = *a;

			q.quiet = true;
			applying = &q;
			TRANSITION(s, tenant_cleanup(s, name, NULL));
			applying = a;
			store_node_unref(s, &old->node);
		}
		rc = TRANSITION(s, do_mkdir(s, &s->root, name, &o, &n, NULL));
		if (rc)
			return applied(rc);
		store_node_ref(n);
		lock(&m->lock, LOCK_MIRROR);
		if (mt->t)
			store_node_unref(s, &mt->t->node);
		mt->t = as_tenant(n);
		unlock(&m->lock, LOCK_MIRROR);
		return index_put(s, m, n);
	}
	if (strcmp(kind, "parent") != 0 || !mfu(e, "gen", &gen))
		return -EPROTO;
	rc = TRANSITION(s, do_mkdir(s, &mt->t->node, name, &o, &n, NULL));
	if (rc)
		return applied(rc);
	if (as_parent(n)->generation != gen) {
		store_node_unref(s, n);
		return -EUCLEAN;
	}
	return index_put(s, m, n);
}

static int apply_create(struct store *s, const struct mentry *e)
{
	struct store_node *p = node_of(s, e, "pino", STORE_PARENT), *n = NULL;
	const char *name = mf(e, "child");
	struct store_owner o;
	uint64_t ino, deadline;
	bool created = false;
	int rc;

	if (!p)
		return -EUCLEAN;
	if (!name || !owner_of(e, &o) || !mfu(e, "ino", &ino) ||
	    !mfu(e, "deadline", &deadline)) {
		store_node_unref(s, p);
		return -EPROTO;
	}
	applying->ino = ino + s->mirror->ino_offset;
	rc = TRANSITION(s, do_create(s, p, name, &o, true, &n, &created, NULL));
	store_node_unref(s, p);
	if (rc)
		return applied(rc);
	if (deadline_of(s, n) != deadline) {
		store_node_unref(s, n);
		return -EUCLEAN;
	}
	return index_put(s, s->mirror, n);
}

/* Set @n's attributes as entry @e gives them (an attr entry, or the
 * attributes of a size change), and its renewed deadline. */
static int apply_attrs(struct store *s, struct store_node *n,
		       const struct mentry *e)
{
	struct store_attr in = { 0 };
	unsigned mask = 0;
	uint64_t v, deadline = 0;
	int64_t t;
	int rc;

	if (mfu(e, "mode", &v)) {
		mask |= STORE_SET_MODE;
		in.mode = (mode_t)v;
	}
	if (mfu(e, "uid", &v)) {
		mask |= STORE_SET_UID;
		in.uid = (uid_t)v;
	}
	if (mfu(e, "gid", &v)) {
		mask |= STORE_SET_GID;
		in.gid = (gid_t)v;
	}
	if (dec_i64(mf(e, "atime"), &t)) {
		mask |= STORE_SET_ATIME;
		in.atime.tv_sec = t / NS_PER_S;
		in.atime.tv_nsec = t % NS_PER_S;
	}
	if (dec_i64(mf(e, "mtime"), &t) && strcmp(e->op, "attr") == 0) {
		mask |= STORE_SET_MTIME;
		in.mtime.tv_sec = t / NS_PER_S;
		in.mtime.tv_nsec = t % NS_PER_S;
	}
	if (mfu(e, "deadline", &deadline))
		mask |= STORE_SET_RENEW;
	if (!mask && !mf(e, "ctime"))
		return 0;
	rc = TRANSITION(s, do_setattr(s, n, mask, &in, NULL));
	if (rc)
		return applied(rc);
	if ((mask & STORE_SET_RENEW) && deadline_of(s, n) != deadline)
		return -EUCLEAN;
	return 0;
}

static int apply_write(struct store *s, const struct mentry *e)
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
	data = mf_len(e, "data", &len);
	if (!data || !mfu(e, "ver", &ver)) {
		store_node_unref(s, n);
		return -EPROTO;
	}
	/* A write entry of sfs_publish names the mtime it kept; one of
	 * sfs_setattr (kind=child) names the mtime the call set. */
	keep = !mf(e, "kind") && dec_i64(mf(e, "mtime"), &mtime);
	world_enter(s);
	rc = content_publish(s, as_child(n), data, len, keep ? &mtime : NULL);
	world_exit(s);
	event_hook_run(s);
	if (rc == 0 && as_child(n)->version != ver)
		rc = -EUCLEAN;
	if (rc == 0 && mf(e, "kind")) {
		rc = apply_attrs(s, n, e);
		if (rc == 0 && dec_i64(mf(e, "mtime"), &mtime)) {
			lock(stripe(s, as_child(n)), LOCK_STRIPE);
			as_child(n)->meta.mtime = mtime;
			unlock(stripe(s, as_child(n)), LOCK_STRIPE);
		}
	}
	store_node_unref(s, n);
	return applied(rc);
}

/* The node an attr, ttl or renew entry names: KIND and INO. */
static struct store_node *node_of_kind(struct store *s, struct mtenant *mt,
				       const struct mentry *e)
{
	const char *kind = mf(e, "kind");

	if (!kind)
		return NULL;
	if (strcmp(kind, "tenant") == 0) {
		uint64_t ino;

		if (!mfu(e, "ino", &ino) ||
		    mt->t->node.ino != ino + s->mirror->ino_offset)
			return NULL;
		store_node_ref(&mt->t->node);
		return &mt->t->node;
	}
	return node_of(s, e, "ino", strcmp(kind, "parent") == 0 ?
			  STORE_PARENT : STORE_CHILD);
}

static int apply_lease(struct store *s, struct mtenant *mt,
		       const struct mentry *e, bool set)
{
	struct store_node *n = node_of_kind(s, mt, e);
	uint64_t ttl, deadline;
	int rc;

	if (!n)
		return -EUCLEAN;
	if (!mfu(e, "ttl", &ttl) || !mfu(e, "deadline", &deadline)) {
		store_node_unref(s, n);
		return -EPROTO;
	}
	rc = TRANSITION(s, do_lease(s, n, set, ttl));
	if (rc == 0 && deadline_of(s, n) != deadline)
		rc = -EUCLEAN;
	store_node_unref(s, n);
	return applied(rc);
}

static int apply_expire(struct store *s, const struct mentry *e)
{
	const char *kind = mf(e, "kind");
	struct store_node *n;
	int done;

	if (!kind)
		return -EPROTO;
	n = node_of(s, e, "ino", strcmp(kind, "parent") == 0 ?
		    STORE_PARENT : STORE_CHILD);
	if (!n)
		return -EUCLEAN;
	if (n->kind == STORE_PARENT)
		done = TRANSITION(s, parent_expire(s, as_parent(n), e->ms));
	else
		done = TRANSITION(s, child_expire(s, as_child(n), e->ms));
	store_node_unref(s, n);
	return done == 1 ? 0 : -EUCLEAN;
}

static int apply_rename(struct store *s, const struct mentry *e, unsigned flags)
{
	struct store_node *a = node_of(s, e, "pino", STORE_PARENT);
	struct store_node *b = node_of(s, e, "to_pino", STORE_PARENT);
	const char *name = mf(e, "child"), *to = mf(e, "to_child");
	int rc = -EUCLEAN;

	if (a && b && name && to)
		rc = applied(TRANSITION(s, do_rename(s, a, name, b, to, flags)));
	if (a)
		store_node_unref(s, a);
	if (b)
		store_node_unref(s, b);
	return rc;
}

static int apply_tomb_age(struct store *s, struct tenant *t,
			  const struct mentry *e)
{
	const char *name = mf(e, "name");
	struct tomb *tb;

	if (!name)
		return -EPROTO;
	world_enter(s);
	lock(&t->lock, LOCK_TENANT);
	HASH_FIND_STR(t->tombs, name, tb);
	if (tb)
		tomb_drop_locked(s, t, tb);
	unlock(&t->lock, LOCK_TENANT);
	world_exit(s);
	return 0;
}

static int apply_child_ttl(struct store *s, const struct mentry *e)
{
	struct store_node *n = node_of(s, e, "ino", STORE_PARENT);
	uint64_t ttl;

	if (!n)
		return -EUCLEAN;
	if (!mfu(e, "ttl", &ttl)) {
		store_node_unref(s, n);
		return -EPROTO;
	}
	bucket_lock(as_parent(n));
	as_parent(n)->child_ttl_ms = ttl;
	bucket_unlock(as_parent(n));
	store_node_unref(s, n);
	return 0;
}

/* The tenant of @mt goes (a cleanup, or a drain of the store). */
static void mt_gone(struct store *s, struct mtenant *mt)
{
	lock(&s->mirror->lock, LOCK_MIRROR);
	mt->gone = true;
	unlock(&s->mirror->lock, LOCK_MIRROR);
}

static int apply_tenant(struct store *s, struct mtenant *mt,
			const struct mentry *e)
{
	const char *op = e->op;
	struct tenant *t = mt->t;
	struct store_node *a, *b;
	uint64_t v;
	int rc;

	if (strcmp(op, "join") == 0)
		return apply_join(s, mt, e);
	if (!t || is_dead(&t->node))
		return -EUCLEAN;
	if (strcmp(op, "leave") == 0 || strcmp(op, "depart") == 0) {
		const char *name = mf(e, "name");

		if (!name || !mfu(e, "gen", &v))
			return -EPROTO;
		rc = TRANSITION(s, parent_leave(s, t, name, op[0] == 'l', NULL));
		return applied(rc);
	}
	if (strcmp(op, "expire") == 0)
		return apply_expire(s, e);
	if (strcmp(op, "create") == 0)
		return apply_create(s, e);
	if (strcmp(op, "unlink") == 0) {
		const char *name = mf(e, "child");

		a = node_of(s, e, "pino", STORE_PARENT);
		if (!a || !name) {
			if (a)
				store_node_unref(s, a);
			return -EUCLEAN;
		}
		rc = TRANSITION(s, do_unlink(s, a, name));
		store_node_unref(s, a);
		return applied(rc);
	}
	if (strcmp(op, "link") == 0) {
		const char *name = mf(e, "child");

		a = node_of(s, e, "ino", STORE_CHILD);
		b = node_of(s, e, "pino", STORE_PARENT);
		rc = a && b && name ?
		     TRANSITION(s, do_link(s, a, b, name, NULL)) : -EUCLEAN;
		if (a)
			store_node_unref(s, a);
		if (b)
			store_node_unref(s, b);
		return applied(rc);
	}
	if (strcmp(op, "rename") == 0)
		return apply_rename(s, e, 0);
	if (strcmp(op, "exchange") == 0)
		return apply_rename(s, e, STORE_RENAME_EXCHANGE);
	if (strcmp(op, "write") == 0)
		return apply_write(s, e);
	if (strcmp(op, "attr") == 0) {
		a = node_of_kind(s, mt, e);
		if (!a)
			return -EUCLEAN;
		rc = apply_attrs(s, a, e);
		store_node_unref(s, a);
		return rc;
	}
	if (strcmp(op, "ttl") == 0 || strcmp(op, "renew") == 0)
		return apply_lease(s, mt, e, op[0] == 't');
	if (strcmp(op, "child_ttl") == 0)
		return apply_child_ttl(s, e);
	if (strcmp(op, "tomb_age") == 0)
		return apply_tomb_age(s, t, e);
	if (strcmp(op, "drain") == 0) {
		if (!mf(e, "clear")) {
			rc = TRANSITION(s, do_drain_start(s, t, e->ms, NULL));
			return applied(rc);
		}
		drain_clear_tenant(s, t, mf(e, "dead") != NULL);
		if (mf(e, "dead"))
			mt_gone(s, mt);
		return 0;
	}
	if (strcmp(op, "cleanup") == 0) {
		struct tenant *cur;

		/* Unless a later tenant of the name joined already (which
		 * applied this cleanup first). */
		lock(&s->lock, LOCK_STORE);
		HASH_FIND_STR(s->tenants, t->name, cur);
		unlock(&s->lock, LOCK_STORE);
		if (cur == t)
			TRANSITION(s, tenant_cleanup(s, t->name, NULL));
		mt_gone(s, mt);
		return 0;
	}
	return -EPROTO;
}

static int apply_root(struct store *s, const struct mentry *e)
{
	const char *op = e->op;
	uint64_t v;

	if (strcmp(op, "tenant") == 0) {
		if (!mfu(e, "tid", &v))
			return -EPROTO;
		return mirror_tenant_add(s, v, mf(e, "name"));
	}
	if (strcmp(op, "drain") == 0)
		return applied(TRANSITION(s, do_drain_start(s, NULL, e->ms, NULL)));
	if (strcmp(op, "drained") == 0) {
		lock(&s->lock, LOCK_STORE);
		atomic_store(&s->state, STORE_DRAINED);
		unlock(&s->lock, LOCK_STORE);
		return 0;
	}
	if (strcmp(op, "clock") == 0) {
		if (!mfu(e, "clock_ms", &v))
			return -EPROTO;
		atomic_store(&s->mirror->testclock_ms, v);
		return 0;
	}
	return 0; /* cleanup: the tenant's own log says it */
}

int mirror_apply(struct store *s, uint64_t tid, const struct mentry *e)
{
	struct mirror *m = s->mirror;
	struct mtenant *mt = NULL;
	struct apply_ctx ctx = {
		.ns = e->ns, .ms = e->ms, .seq = e->seq,
		.others = strcmp(e->by, m->by) != 0 || !*e->by,
	};
	uint64_t last, n = e->nseq > 1 ? e->nseq : 1;
	int rc;

	if (tid) {
		lock(&m->lock, LOCK_MIRROR);
		mt = mt_find_locked(m, tid);
		last = mt ? mt->seq : 0;
		unlock(&m->lock, LOCK_MIRROR);
		if (!mt)
			return -ENOENT;
	} else {
		last = m->root_seq;
	}
	if (e->seq <= last)
		return 0; /* applied already (a load overlapped the log) */
	if (e->seq != last + 1)
		return -ERANGE;
	/* The embedded store's rule for who caused a line, when the change
	 * is this mount's own. */
	if (!*m->by)
		ctx.others = false;
	applying = &ctx;
	rc = tid ? apply_tenant(s, mt, e) : apply_root(s, e);
	applying = NULL;
	if (rc)
		return rc;
	if (tid) {
		lock(&m->lock, LOCK_MIRROR);
		mt->seq = e->seq + n - 1;
		unlock(&m->lock, LOCK_MIRROR);
	} else {
		m->root_seq = e->seq;
	}
	return 0;
}

/* Loading ----------------------------------------------------------------- */

/* Field @name of a dump's K V array @kv, or NULL. */
static const char *kv(const redisReply *r, const char *name)
{
	if (!r || r->type != REDIS_REPLY_ARRAY)
		return NULL;
	for (size_t i = 0; i + 1 < r->elements; i += 2)
		if (r->element[i]->type == REDIS_REPLY_STRING &&
		    strcmp(r->element[i]->str, name) == 0 &&
		    r->element[i + 1]->type == REDIS_REPLY_STRING)
			return r->element[i + 1]->str;
	return NULL;
}

static bool kvu(const redisReply *r, const char *name, uint64_t *v)
{
	return dec_u64(kv(r, name), v);
}

static bool kv_owner(const redisReply *r, struct store_owner *o)
{
	uint64_t uid, gid, mode;

	if (!kvu(r, "uid", &uid) || !kvu(r, "gid", &gid) || !kvu(r, "mode", &mode))
		return false;
	o->uid = (uid_t)uid;
	o->gid = (gid_t)gid;
	o->mode = (mode_t)mode;
	return true;
}

/* Node @n's owner, mode and times as the dump has them (its lock taken
 * here): what a setgid directory gave it at its making may have been
 * changed since. */
static void load_times(struct store *s, struct store_node *n, struct meta *m,
		       const redisReply *r)
{
	struct store_owner o;
	int64_t a, mt, c;

	if (!dec_i64(kv(r, "atime"), &a) || !dec_i64(kv(r, "mtime"), &mt) ||
	    !dec_i64(kv(r, "ctime"), &c) || !kv_owner(r, &o))
		return;
	node_lock(s, n);
	if (n->kind == STORE_TENANT)
		lock(&as_tenant(n)->acl_lock, LOCK_ACL);
	m->uid = o.uid;
	m->gid = o.gid;
	n->mode = (uint16_t)(o.mode & 07777);
	m->atime = a;
	m->mtime = mt;
	m->ctime = c;
	if (n->kind == STORE_TENANT)
		unlock(&as_tenant(n)->acl_lock, LOCK_ACL);
	node_unlock(s, n);
}

/* @n's lease as the dump has it (ttl and deadline). */
static int load_lease(struct store *s, struct store_node *n, const redisReply *r)
{
	uint64_t ttl = 0, deadline = 0;
	int rc = 0;

	kvu(r, "ttl", &ttl);
	kvu(r, "deadline", &deadline);
	if (!ttl && !deadline && !lease_of(s, n))
		return 0;
	node_lock(s, n);
	if (lease_ensure(s, n)) {
		rc = -ENOMEM;
	} else {
		lease_of(s, n)->ttl_ms = ttl;
		lease_set(s, n, deadline);
	}
	node_unlock(s, n);
	return rc;
}

/* The element of array @r at @i when it is an array (else NULL). */
static const redisReply *arr(const redisReply *r, size_t i)
{
	if (!r || r->type != REDIS_REPLY_ARRAY || i >= r->elements ||
	    r->element[i]->type != REDIS_REPLY_ARRAY)
		return NULL;
	return r->element[i];
}

static const char *str_at(const redisReply *r, size_t i)
{
	if (!r || r->type != REDIS_REPLY_ARRAY || i >= r->elements)
		return NULL;
	if (r->element[i]->type == REDIS_REPLY_STRING ||
	    r->element[i]->type == REDIS_REPLY_STATUS)
		return r->element[i]->str;
	return NULL;
}

static bool u64_at(const redisReply *r, size_t i, uint64_t *v)
{
	if (!r || r->type != REDIS_REPLY_ARRAY || i >= r->elements)
		return false;
	if (r->element[i]->type == REDIS_REPLY_INTEGER) {
		*v = (uint64_t)r->element[i]->integer;
		return r->element[i]->integer >= 0;
	}
	return dec_u64(str_at(r, i), v);
}

/* The state of dump row @srow: the link that made it first, then every
 * other link; its content, version, times and lease.  @pnodes maps the
 * parents just loaded.  Links are "PINO/NAME", newest first. */
static int load_state(struct store *s, const redisReply *srow)
{
	struct mirror *m = s->mirror;
	const redisReply *S = arr(srow, 1);
	const char *links = kv(S, "links"), *data;
	struct store_owner o;
	uint64_t sino, ver;
	char *copy, *tok, *save = NULL, *v[4096];
	size_t nl = 0;
	struct store_node *c = NULL;
	int rc = 0;

	if (!S || !u64_at(srow, 0, &sino) || !links || !kv_owner(S, &o) ||
	    !kvu(S, "version", &ver))
		return -EPROTO;
	copy = st_strdup(links);
	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, " ", &save); tok && nl < 4096;
	     tok = strtok_r(NULL, " ", &save))
		v[nl++] = tok;
	/* Oldest first: each new link goes to the front of the list. */
	for (size_t i = nl; i > 0 && rc == 0; i--) {
		char *slash = strchr(v[i - 1], '/');
		uint64_t pino;
		struct store_node *p;

		if (!slash) {
			rc = -EPROTO;
			break;
		}
		*slash = '\0';
		if (!dec_u64(v[i - 1], &pino)) {
			rc = -EPROTO;
			break;
		}
		p = index_get(m, pino + m->ino_offset);
		if (!p) {
			rc = -EPROTO;
			break;
		}
		if (!c) {
			bool created;

			applying->ino = sino + m->ino_offset;
			rc = TRANSITION(s, do_create(s, p, slash + 1, &o, true,
						     &c, &created, NULL));
		} else {
			rc = TRANSITION(s, do_link(s, c, p, slash + 1, NULL));
		}
		store_node_unref(s, p);
	}
	free(copy);
	if (rc == 0 && c) {
		size_t len = 0;
		struct child *ch = as_child(c);

		data = NULL;
		for (size_t i = 0; i + 1 < S->elements; i += 2)
			if (strcmp(S->element[i]->str, "data") == 0) {
				data = S->element[i + 1]->str;
				len = S->element[i + 1]->len;
			}
		if (len)
			rc = content_publish(s, ch, data, len, NULL);
		if (rc == 0) {
			lock(stripe(s, ch), LOCK_STRIPE);
			ch->version = ver;
			unlock(stripe(s, ch), LOCK_STRIPE);
			load_times(s, c, &ch->meta, S);
			rc = load_lease(s, c, S);
		}
	}
	if (c)
		rc = rc ? (store_node_unref(s, c), rc) : index_put(s, m, c);
	return rc;
}

/* Tenant @t's parents, states and tombstones from @dump. */
static int load_contents(struct store *s, struct tenant *t, const redisReply *dump)
{
	struct mirror *m = s->mirror;
	const redisReply *ps = arr(dump, 5), *ss = arr(dump, 6), *tombs = arr(dump, 7);
	int rc = 0;

	if (!ps || !ss || !tombs)
		return -EPROTO;
	for (size_t i = 0; i < ps->elements && rc == 0; i++) {
		const redisReply *row = arr(ps, i), *P = arr(row, 1);
		struct store_owner o;
		struct store_node *n = NULL;
		uint64_t pino, gen, cttl = 0;
		const char *name = kv(P, "name");

		if (!P || !u64_at(row, 0, &pino) || !name || !kv_owner(P, &o) ||
		    !kvu(P, "gen", &gen))
			return -EPROTO;
		kvu(P, "child_ttl", &cttl);
		applying->ino = pino + m->ino_offset;
		rc = TRANSITION(s, do_mkdir(s, &t->node, name, &o, &n, NULL));
		if (rc)
			break;
		/* Made by this load, seen by no one yet: its generation is
		 * the store's. */
		as_parent(n)->generation = gen;
		as_parent(n)->child_ttl_ms = cttl;
		load_times(s, n, &as_parent(n)->meta, P);
		rc = load_lease(s, n, P);
		if (rc == 0)
			rc = index_put(s, m, n);
		else
			store_node_unref(s, n);
	}
	for (size_t i = 0; i < ss->elements && rc == 0; i++)
		rc = load_state(s, arr(ss, i));
	/* Tombstones by deadline, so the store's queue stays in order. */
	for (size_t i = 0; i + 1 < tombs->elements && rc == 0; i += 2) {
		const char *name = str_at(tombs, i), *gd = str_at(tombs, i + 1);
		unsigned long long g, d;
		struct tomb *tb;

		if (!name || !gd || sscanf(gd, "%llu %llu", &g, &d) != 2)
			return -EPROTO;
		tb = tomb_new(name);
		if (!tb)
			return -ENOMEM;
		world_enter(s);
		lock(&t->lock, LOCK_TENANT);
		tomb_reserve_locked(s, t);
		rc = tomb_insert_locked(s, t, tb, g, d - s->lim.tombstone_ttl_ms);
		unlock(&t->lock, LOCK_TENANT);
		world_exit(s);
		if (rc)
			free(tb);
	}
	return rc;
}

/* Drop tenant @t from the mirror, silently (a reload replaces it). */
static void unload_tenant(struct store *s, struct tenant *t)
{
	struct apply_ctx q = { .quiet = true, .ns = wall_now(),
			       .ms = store_now_ms(s) };
	struct tenant *cur;

	lock(&s->lock, LOCK_STORE);
	HASH_FIND_STR(s->tenants, t->name, cur);
	unlock(&s->lock, LOCK_STORE);
	if (cur != t)
		return;
	applying = &q;
	TRANSITION(s, tenant_cleanup(s, t->name, NULL));
	applying = NULL;
}

int mirror_load_tenant(struct store *s, uint64_t tid, const redisReply *dump,
		       char *lastid, size_t idlen)
{
	struct mirror *m = s->mirror;
	const redisReply *T = arr(dump, 4);
	const char *code = str_at(dump, 0), *name = kv(T, "name"), *id;
	const char *state = kv(T, "state");
	struct apply_ctx ctx = { .quiet = true };
	struct store_owner o;
	struct store_node *n = NULL;
	struct mtenant *mt;
	struct tenant *old;
	uint64_t seq, ino, dd = 0;
	int64_t ns = 0;
	int rc;

	if (!code || strcmp(code, "OK") != 0 || !T || !name ||
	    !u64_at(dump, 2, &seq) || !(id = str_at(dump, 3)) ||
	    !kvu(T, "ino", &ino) || !kv_owner(T, &o))
		return -EPROTO;
	if (mirror_tenant_add(s, tid, name))
		return -ENOMEM;
	lock(&m->lock, LOCK_MIRROR);
	mt = mt_find_locked(m, tid);
	old = mt->t;
	mt->t = NULL;
	unlock(&m->lock, LOCK_MIRROR);
	if (old) {
		/* Readers of the tenant lose what was in between. */
		emit_overflow(s, old);
		event_hook_run(s);
		unload_tenant(s, old);
		store_node_unref(s, &old->node);
	}
	dec_i64(kv(T, "ctime"), &ns);
	ctx.ns = ns;
	/* Nothing is past its deadline while it is loaded: the deadlines
	 * are the dump's, set after each node is made. */
	ctx.ms = 0;
	ctx.ino = ino + m->ino_offset;
	applying = &ctx;
	rc = TRANSITION(s, do_mkdir(s, &s->root, name, &o, &n, NULL));
	if (rc == 0) {
		struct tenant *t = as_tenant(n);

		load_times(s, n, &t->meta, T);
		kvu(T, "drain_deadline", &dd);
		if (state && strcmp(state, "ready") != 0) {
			lock(&t->lock, LOCK_TENANT);
			atomic_store(&t->drain_deadline, dd);
			if (strcmp(state, "draining") == 0) {
				atomic_store(&t->drain_state, STORE_DRAINING);
				atomic_fetch_add(&s->tenants_draining, 1);
			} else {
				atomic_store(&t->drain_state, STORE_DRAINED);
			}
			unlock(&t->lock, LOCK_TENANT);
		}
		rc = load_contents(s, t, dump);
	}
	applying = NULL;
	if (rc) {
		if (n) {
			unload_tenant(s, as_tenant(n));
			store_node_unref(s, n);
		}
		return rc;
	}
	store_node_ref(n);
	lock(&m->lock, LOCK_MIRROR);
	mt->t = as_tenant(n);
	mt->seq = seq;
	mt->gone = false;
	unlock(&m->lock, LOCK_MIRROR);
	if (lastid)
		snprintf(lastid, idlen, "%s", id);
	return index_put(s, m, n);
}
