/*
 * load.c - a mirror's tenant loaded from the shared store's dump
 * (sfs_dump): at start, after a gap or an entry the mirror could not
 * apply, and for a new store instance (redis/follow.c); and every
 * tenant loaded, the root's dump first (remote_load_all: at start, and
 * for a new instance), each tenant's log then followed from its dump's
 * last id.
 *
 * What it owns
 * ------------
 * Nothing that lasts.  A load makes the tenant, its parents, its states
 * and its tombstones with the embedded transitions, silently (an apply
 * context with quiet set: no .events line), each node with the shared
 * store's inode number; sets what the dump says of each (owner, mode,
 * times, lease, generation, version, content); and puts each in the
 * index (redis/index.c).  A tenant the mirror holds already
 * gives its readers one "overflow" line (the lines of the gap are not
 * known); when the dump is of the same incarnation of it, the copy is
 * made the dump by the difference (redis/diff.c: the nodes that
 * live on are kept, and the watchers see what changed); else, or when
 * that fails, it is replaced whole and every node of the old copy dies.
 * Shells (redis/use.c): a tenant's node alone, made from its hash
 * (mirror_shell_tenant: at start and for a new tenant, with
 * follow_idle; its link count from the hash's parent gauge, kept as the
 * store's by remote_shells_refresh), loaded into when used (its contents made silently: no
 * one here knew them, the kernel holds none) and emptied again when
 * idle (mirror_unload_tenant: its parents leave and its tombstones go,
 * silently, its owner and times kept), and removed when the root log
 * says it went (mirror_shell_gone).
 * A load that fails leaves the tenant unloaded and its seq where it
 * was, so the follower's next entry of it reloads it.  The dump's
 * readers (dump_*) serve redis/diff.c too.
 *
 * Threads and locks
 * -----------------
 * The applying thread only.  No lock of its own: the transitions take
 * theirs in the store's order, what the dump sets afterwards is set by
 * the core's functions for it (store/engine.h), under the node's own
 * locks, and the mirror's lock is
 * taken only to put a node in the index and to change the tenant's
 * entry in the table.
 */
#include "store/engine.h"
#include "redis/mirror.h"
#include "redis/internal.h"

#include <errno.h>

/* Loading ----------------------------------------------------------------- */

/* The state of dump row @srow: the link that made it first, then every
 * other link; its content, version, times and lease.  @pnodes maps the
 * parents just loaded.  Links are "PINO/NAME", newest first. */
static int load_state(struct store *s, struct given *g,
		      const struct dump_val *srow)
{
	struct mirror *m = mirror_of(s);
	const struct dump_val *S = dump_arr(srow, 1);
	const char *links = dump_kv(S, "links"), *data;
	struct store_owner o;
	uint64_t sino, ver;
	char *copy, *tok, *save = NULL, *v[4096];
	size_t nl = 0, len = 0;
	struct store_node *c = NULL;
	int rc = 0;

	if (!S || !dump_u64(srow, 0, &sino) || !links || !dump_owner(S, &o) ||
	    !dump_kvu(S, "version", &ver))
		return -EPROTO;
	data = dump_kv_len(S, "data", &len);
	if (data && len > store_limits(s)->max_payload)
		return -EPROTO;
	copy = st_strdup(links);
	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, " ", &save); tok;
	     tok = strtok_r(NULL, " ", &save)) {
		if (nl == sizeof(v) / sizeof(v[0])) {
			free(copy);
			return -EPROTO;
		}
		v[nl++] = tok;
	}
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
		if (!dec_u64(v[i - 1], &pino) || !dump_name_ok(s, slash + 1)) {
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

			g->ino = sino + m->ino_offset;
			rc = ENGINE_TRANSITION(s, child_create(s, g, p, slash + 1, &o, true,
						     &c, &created, NULL));
		} else {
			rc = ENGINE_TRANSITION(s, child_link(s, g, c, p, slash + 1, NULL));
		}
		store_node_unref(s, p);
	}
	free(copy);
	if (rc == 0 && c) {
		struct child *ch = node_child(c);

		if (data && len)
			rc = content_publish(s, g, ch, data, len, NULL);
		if (rc == 0) {
			state_set_version(s, ch, ver);
			dump_times(s, c, S);
			rc = dump_lease(s, c, S);
		}
	}
	if (c)
		rc = rc ? (store_node_unref(s, c), rc) : index_put(s, m, c);
	return rc;
}

/* Tenant @t's parents, states and tombstones from @dump. */
static int load_contents(struct store *s, struct given *g, struct tenant *t,
			 const struct dump_val *dump)
{
	struct mirror *m = mirror_of(s);
	const struct dump_val *ps = dump_arr(dump, 5), *ss = dump_arr(dump, 6), *tombs = dump_arr(dump, 7);
	int rc = 0;

	if (!ps || !ss || !tombs)
		return -EPROTO;
	for (size_t i = 0; i < dump_len(ps) && rc == 0; i++) {
		const struct dump_val *row = dump_arr(ps, i), *P = dump_arr(row, 1);
		struct store_owner o;
		struct store_node *n = NULL;
		uint64_t pino, gen, cttl = 0;
		const char *name = dump_kv(P, "name");

		if (!P || !dump_u64(row, 0, &pino) || !dump_name_ok(s, name) ||
		    !dump_owner(P, &o) || !dump_kvu(P, "gen", &gen) || gen == 0)
			return -EPROTO;
		dump_kvu(P, "child_ttl", &cttl);
		g->ino = pino + m->ino_offset;
		rc = ENGINE_TRANSITION(s, parent_join(s, g, t, name, &o, &n, NULL));
		if (rc)
			break;
		/* Made by this load, seen by no one yet: its generation is
		 * the store's. */
		parent_set_generation(node_parent(n), gen);
		parent_set_child_ttl(node_parent(n), cttl);
		dump_times(s, n, P);
		rc = dump_lease(s, n, P);
		if (rc == 0)
			rc = index_put(s, m, n);
		else
			store_node_unref(s, n);
	}
	for (size_t i = 0; i < dump_len(ss) && rc == 0; i++)
		rc = load_state(s, g, dump_arr(ss, i));
	if (rc == 0)
		rc = dump_tombs(s, t, tombs);
	return rc;
}

/* Drop tenant @t from the mirror, silently (a reload replaces it). */
static void unload_tenant(struct store *s, struct tenant *t)
{
	struct given q = { .quiet = true, .ns = wall_now(NULL),
			   .ms = store_now_ms(s) };
	const char *name = store_node_name(tenant_node(t));
	struct store_node *cur = tenant_find(s, name);
	bool same = cur == tenant_node(t);

	if (cur)
		store_node_unref(s, cur);
	if (!same)
		return;
	ENGINE_TRANSITION(s, tenant_cleanup(s, &q, name, NULL));
}

static int load_shell(struct store *s, struct tenant *t,
		      const struct dump_val *dump);

static int load_tenant(struct store *s, uint64_t tid,
		       const struct dump_val *dump, char *lastid, size_t idlen)
{
	struct mirror *m = mirror_of(s);
	const struct dump_val *T = dump_arr(dump, 4);
	const char *code = dump_str(dump, 0), *name = dump_kv(T, "name"), *id;
	struct given ctx = { .quiet = true };
	struct store_owner o;
	struct store_node *n = NULL;
	struct mtenant *mt;
	struct tenant *old;
	uint64_t seq, ino, g;
	int64_t ns = 0;
	int rc;

	if (!code || strcmp(code, "OK") != 0 || !T || !dump_name_ok(s, name) ||
	    !dump_u64(dump, 2, &seq) || !(id = dump_str(dump, 3)) ||
	    !dump_kvu(T, "ino", &ino) || !dump_owner(T, &o))
		return -EPROTO;
	if (mirror_tenant_add(s, tid, name))
		return -ENOMEM;
	/* The tenant as of the store's number @g (the dump's last
	 * element, where the store has one order of all tenants): the
	 * others are not applied as far yet. */
	if (dump_u64(dump, 8, &g) && atomic_load(&m->gorder))
		store_root_order(s, g, false);
	lock(&m->lock, LOCK_ENGINE_INDEX);
	mt = mt_find_locked(m, tid);
	old = mt->t;
	if (old)
		store_node_ref(tenant_node(old));
	unlock(&m->lock, LOCK_ENGINE_INDEX);
	if (old && mt->shell && !node_dead(tenant_node(old)) &&
	    store_node_ino(tenant_node(old)) == ino + m->ino_offset) {
		/* A shell (redis/use.c): its copy loaded into it, silently:
		 * nothing of it was known to anyone here. */
		rc = load_shell(s, old, dump);
		if (rc == 0)
			store_tenant_seq_set(tenant_node(old), seq);
		/* Its lines before @g were never in the root's log. */
		if (rc == 0 && atomic_load(&m->gorder) && dump_u64(dump, 8, &g))
			store_root_floor(s, g);
		store_node_unref(s, tenant_node(old));
		if (rc)
			return rc;
		lock(&m->lock, LOCK_ENGINE_INDEX);
		mt->seq = seq;
		mt->gone = false;
		mt->shell = false;
		/* Its link count is its parents' again. */
		tenant_set_shell_parents(old, -1);
		unlock(&m->lock, LOCK_ENGINE_INDEX);
		if (lastid)
			snprintf(lastid, idlen, "%s", id);
		return 0;
	}
	if (old) {
		/* Readers of the tenant lose what was in between. */
		emit_overflow(s, old);
		event_hook_run(s);
	}
	/* The same incarnation of the tenant: its copy becomes the dump
	 * by the difference (redis/diff.c), keeping every node that
	 * lives on; when that fails, it is replaced whole. */
	if (old && !node_dead(tenant_node(old)) &&
	    store_node_ino(tenant_node(old)) == ino + m->ino_offset &&
	    mirror_diff_tenant(s, old, dump) == 0) {
		store_tenant_seq_set(tenant_node(old), seq);
		store_node_unref(s, tenant_node(old));
		lock(&m->lock, LOCK_ENGINE_INDEX);
		mt->seq = seq;
		mt->gone = false;
		unlock(&m->lock, LOCK_ENGINE_INDEX);
		if (lastid)
			snprintf(lastid, idlen, "%s", id);
		return 0;
	}
	if (old)
		store_node_unref(s, tenant_node(old));
	lock(&m->lock, LOCK_ENGINE_INDEX);
	old = mt->t;
	mt_set_locked(m, mt, NULL);
	unlock(&m->lock, LOCK_ENGINE_INDEX);
	if (old) {
		unload_tenant(s, old);
		store_node_unref(s, tenant_node(old));
	}
	dec_i64(dump_kv(T, "ctime"), &ns);
	ctx.ns = ns;
	/* Nothing is past its deadline while it is loaded: the deadlines
	 * are the dump's, set after each node is made. */
	ctx.ms = 0;
	ctx.ino = ino + m->ino_offset;
	rc = ENGINE_TRANSITION(s, tenant_create(s, &ctx, name, &o, &n, NULL));
	if (rc == 0) {
		struct tenant *t = node_tenant(n);

		dump_times(s, n, T);
		dump_drain(s, t, T);
		rc = load_contents(s, &ctx, t, dump);
	}
	if (rc) {
		if (n) {
			unload_tenant(s, node_tenant(n));
			store_node_unref(s, n);
		}
		return rc;
	}
	store_tenant_seq_set(n, seq);
	store_node_ref(n);
	lock(&m->lock, LOCK_ENGINE_INDEX);
	mt_set_locked(m, mt, node_tenant(n));
	mt->seq = seq;
	mt->gone = false;
	mt->shell = false;
	unlock(&m->lock, LOCK_ENGINE_INDEX);
	if (lastid)
		snprintf(lastid, idlen, "%s", id);
	return index_put(s, m, n);
}

int mirror_load_tenant(struct store *s, uint64_t tid,
		       const struct dump_val *dump, char *lastid, size_t idlen)
{
	struct mirror *m = mirror_of(s);
	int rc;

	lock(&m->apply, LOCK_ENGINE_APPLY);
	rc = load_tenant(s, tid, dump, lastid, idlen);
	unlock(&m->apply, LOCK_ENGINE_APPLY);
	return rc;
}

uint64_t mirror_own_count(struct store *s, uint64_t tid)
{
	struct mirror *m = mirror_of(s);
	struct mtenant *mt;
	uint64_t n;

	lock(&m->lock, LOCK_ENGINE_INDEX);
	mt = mt_find_locked(m, tid);
	n = mt ? mt->own_n : 0;
	unlock(&m->lock, LOCK_ENGINE_INDEX);
	return n;
}

int mirror_reload_tenant(struct store *s, uint64_t tid,
			 const struct dump_val *dump, char *lastid,
			 size_t idlen, uint64_t own_before)
{
	struct mirror *m = mirror_of(s);
	int rc;

	lock(&m->apply, LOCK_ENGINE_APPLY);
	/* A caller applied its own entries meanwhile, maybe past the dump
	 * (read before its call ran): the mirror is not taken back over
	 * them.  A dump behind the mirror for another reason (a failover
	 * lost entries) is loaded. */
	rc = mirror_own_count(s, tid) != own_before ? -EBUSY :
	     load_tenant(s, tid, dump, lastid, idlen);
	unlock(&m->apply, LOCK_ENGINE_APPLY);
	return rc;
}

/* Shells ------------------------------------------------------------------------ */

struct names {
	char **v;
	size_t n, cap;
	bool oom;
};

static int collect_parent(void *arg, struct store_node *p)
{
	struct names *nm = arg;

	if (nm->n == nm->cap) {
		size_t cap = nm->cap ? nm->cap * 2 : 16;
		char **v = st_realloc(nm->v, cap * sizeof(*v));

		if (!v)
			return nm->oom = true, 1;
		nm->v = v;
		nm->cap = cap;
	}
	if (!(nm->v[nm->n] = st_strdup(store_node_name(p))))
		return nm->oom = true, 1;
	nm->n++;
	return 0;
}

/* Drop tenant @t's parents (their states with them) and tombstones,
 * silently, keeping its node as it was (owner, times). */
static void unload_contents(struct store *s, struct tenant *t)
{
	struct store_node *tn = tenant_node(t);
	struct given q = { .quiet = true, .ns = wall_now(NULL),
			   .ms = store_now_ms(s) };
	struct names nm = { 0 };
	struct store_attr a;
	struct store_owner o;

	node_attr_any(s, tn, &a);
	tenant_each_parent(s, t, collect_parent, &nm);
	for (size_t i = 0; i < nm.n; i++) {
		ENGINE_TRANSITION(s, parent_leave(s, &q, t, nm.v[i], false, NULL));
		free(nm.v[i]);
	}
	free(nm.v);
	tombs_drop_all(s, t);
	o.uid = a.uid;
	o.gid = a.gid;
	o.mode = a.mode;
	node_set_meta(s, tn, &o,
		      (int64_t)a.atime.tv_sec * 1000000000 + a.atime.tv_nsec,
		      (int64_t)a.mtime.tv_sec * 1000000000 + a.mtime.tv_nsec,
		      (int64_t)a.ctime.tv_sec * 1000000000 + a.ctime.tv_nsec);
}

/* Shell @t's copy from @dump: its node's times and drain, its contents;
 * a shell again when that fails. */
static int load_shell(struct store *s, struct tenant *t,
		      const struct dump_val *dump)
{
	const struct dump_val *T = dump_arr(dump, 4);
	struct given ctx = { .quiet = true };
	int64_t ns = 0;
	int rc;

	dec_i64(dump_kv(T, "ctime"), &ns);
	ctx.ns = ns;
	rc = load_contents(s, &ctx, t, dump);
	if (rc) {
		unload_contents(s, t);
		return rc;
	}
	dump_times(s, tenant_node(t), T);
	dump_drain(s, t, T);
	return 0;
}

static int shell_tenant(struct store *s, uint64_t tid, const struct dump_val *T)
{
	struct mirror *m = mirror_of(s);
	const char *name = dump_kv(T, "name");
	struct given ctx = { .quiet = true };
	struct store_owner o;
	struct store_node *n = NULL, *old;
	struct mtenant *mt;
	uint64_t ino, np = 0, seq = 0;
	int64_t ns = 0;
	bool have;
	int rc;

	if (!dump_name_ok(s, name) || !dump_kvu(T, "ino", &ino) ||
	    !dump_owner(T, &o))
		return -EPROTO;
	/* Its link count, as a followed tenant's counts its parents. */
	dump_kvu(T, "parents", &np);
	dump_kvu(T, "seq", &seq);
	if (mirror_tenant_add(s, tid, name))
		return -ENOMEM;
	lock(&m->lock, LOCK_ENGINE_INDEX);
	mt = mt_find_locked(m, tid);
	have = mt->t != NULL;
	/* Not followed from here on: a caller that needs it loads it. */
	if (!have)
		mt->shell = true;
	unlock(&m->lock, LOCK_ENGINE_INDEX);
	if (have)
		return 0;
	/* An earlier tenant of the name, whose cleanup this mount did not
	 * read (it did not follow it): gone now. */
	old = tenant_find(s, name);
	if (old) {
		struct given q = { .quiet = true, .ns = wall_now(NULL) };

		ENGINE_TRANSITION(s, tenant_cleanup(s, &q, name, NULL));
		store_node_unref(s, old);
	}
	dec_i64(dump_kv(T, "ctime"), &ns);
	ctx.ns = ns;
	ctx.ino = ino + m->ino_offset;
	rc = ENGINE_TRANSITION(s, tenant_create(s, &ctx, name, &o, &n, NULL));
	if (rc)
		return rc == -ENOMEM ? rc : -EPROTO;
	dump_times(s, n, T);
	dump_drain(s, node_tenant(n), T);
	tenant_set_shell_parents(node_tenant(n), (int64_t)np);
	store_node_ref(n);
	lock(&m->lock, LOCK_ENGINE_INDEX);
	mt_set_locked(m, mt, node_tenant(n));
	mt->shell = true;
	mt->shell_seq = seq;
	unlock(&m->lock, LOCK_ENGINE_INDEX);
	return index_put(s, m, n);
}

int mirror_shell_tenant(struct store *s, uint64_t tid, const struct dump_val *T)
{
	struct mirror *m = mirror_of(s);
	int rc;

	lock(&m->apply, LOCK_ENGINE_APPLY);
	rc = shell_tenant(s, tid, T);
	unlock(&m->apply, LOCK_ENGINE_APPLY);
	return rc;
}

void mirror_shell_parents(struct store *s, uint64_t tid, uint64_t nparents,
			  uint64_t seq)
{
	struct mirror *m = mirror_of(s);
	struct store_node *tn = NULL;
	struct mtenant *mt;

	lock(&m->lock, LOCK_ENGINE_INDEX);
	mt = mt_find_locked(m, tid);
	/* Not older than what it shows (a count read before an unload
	 * that took a newer one from the copy). */
	if (mt && mt->shell && mt->t && seq >= mt->shell_seq) {
		mt->shell_seq = seq;
		if (tenant_set_shell_parents(mt->t, (int64_t)nparents) !=
		    2 + nparents) {
			tn = tenant_node(mt->t);
			store_node_ref(tn);
		}
	}
	unlock(&m->lock, LOCK_ENGINE_INDEX);
	if (tn) {
		/* The kernel keeps a tenant's attributes (cache_timeout):
		 * it forgets the old link count. */
		node_forget_ask(s, tn);
		store_node_unref(s, tn);
	}
}

static void unload_locked(struct store *s, uint64_t tid)
{
	struct mirror *m = mirror_of(s);
	struct mtenant *mt;
	struct tenant *t = NULL;
	uint64_t seq = 0;

	lock(&m->lock, LOCK_ENGINE_INDEX);
	mt = mt_find_locked(m, tid);
	if (mt && mt->t && !mt->shell) {
		t = mt->t;
		seq = mt->seq;
		store_node_ref(tenant_node(t));
	}
	unlock(&m->lock, LOCK_ENGINE_INDEX);
	if (!t)
		return;
	/* Its link count stays what it is (its parents as of the seq
	 * applied: only this thread applies) while they go. */
	tenant_set_shell_parents(t, (int64_t)tenant_nparents(s, t));
	unload_contents(s, t);
	store_node_unref(s, tenant_node(t));
	lock(&m->lock, LOCK_ENGINE_INDEX);
	mt->shell = true;
	mt->shell_seq = seq;
	mt->unloading = false;
	unlock(&m->lock, LOCK_ENGINE_INDEX);
}

void mirror_unload_tenant(struct store *s, uint64_t tid)
{
	struct mirror *m = mirror_of(s);

	lock(&m->apply, LOCK_ENGINE_APPLY);
	unload_locked(s, tid);
	unlock(&m->apply, LOCK_ENGINE_APPLY);
}

static void shell_gone_locked(struct store *s, uint64_t tid)
{
	struct mirror *m = mirror_of(s);
	struct given q = { .others = true, .hidden = true, .ns = wall_now(NULL),
			   .ms = store_now_ms(s) };
	struct mtenant *mt;
	struct tenant *t = NULL;

	lock(&m->lock, LOCK_ENGINE_INDEX);
	mt = mt_find_locked(m, tid);
	if (mt && mt->shell) {
		t = mt->t;
		mt_set_locked(m, mt, NULL);
		HASH_DEL(m->tenants, mt);
		free(mt);
	}
	unlock(&m->lock, LOCK_ENGINE_INDEX);
	if (!t)
		return;
	{
		const char *name = store_node_name(tenant_node(t));
		struct store_node *cur = tenant_find(s, name);

		if (cur == tenant_node(t))
			ENGINE_TRANSITION(s, tenant_cleanup(s, &q, name, NULL));
		if (cur)
			store_node_unref(s, cur);
	}
	store_node_unref(s, tenant_node(t));
}

void mirror_shell_gone(struct store *s, uint64_t tid)
{
	struct mirror *m = mirror_of(s);

	lock(&m->apply, LOCK_ENGINE_APPLY);
	shell_gone_locked(s, tid);
	unlock(&m->apply, LOCK_ENGINE_APPLY);
}

/* Every tenant ------------------------------------------------------------------ */

int remote_shell(struct store *s, uint64_t tid, const char *key)
{
	const char *av[] = { "HGETALL", key };
	redisReply *rep = NULL;
	int rc;

	rc = rconn_pool_call(remote_of(s)->pool, 0, 2, av, NULL, &rep);
	if (rc)
		return rc;
	if (rep->type != REDIS_REPLY_ARRAY)
		rc = remote_damaged_key(remote_of(s), "shell", key);
	else if (rep->elements > 0)
		rc = mirror_shell_tenant(s, tid, dump_of(rep));
	else if (remote_tenant_layout(s))
		/* Listed and not made yet (its second step, in its own
		 * slot, comes after the root's): followed, its log appears
		 * with its first entry. */
		rc = -ENOENT;
	/* else gone since the root named it */
	freeReplyObject(rep);
	return rc;
}

int remote_shells_refresh(struct store *s)
{
	struct remote *r = remote_of(s);
	size_t n = mirror_tenants(s, NULL, 0, true), k;
	uint64_t *ids = n ? st_calloc(n, sizeof(*ids)) : NULL;
	int rc = 0;

	if (n == 0)
		return 0;
	if (!ids)
		return -ENOMEM;
	k = mirror_tenants(s, ids, n, true);
	n = k < n ? k : n;
	/* Each shell's log seq (one call per tenant: its own slot on a
	 * cluster): its count is read again only when that moved (every
	 * change of its parents is an entry of its log). */
	for (size_t i = 0; rc == 0 && i < n; i++) {
		char key[160];
		const char *kp[] = { key };
		const char *av[] = { "HMGET", key, "parents", "seq" };
		struct mirror *m = mirror_of(s);
		struct mtenant *mt;
		redisReply *rep = NULL, *h = NULL;
		uint64_t np, seq;
		int64_t at = -1;
		bool moved;

		remote_tenant_key(s, ids[i], key, sizeof(key));
		rc = remote_fcall(s, "sfs_sync", false, 1, kp, 0, NULL, NULL, &rep);
		if (rc == 0 && rep->elements > 3 &&
		    rep->element[3]->type == REDIS_REPLY_INTEGER)
			at = rep->element[3]->integer;
		if (rep)
			freeReplyObject(rep);
		if (rc || at < 0)
			continue; /* gone: the root log says so */
		lock(&m->lock, LOCK_ENGINE_INDEX);
		mt = mt_find_locked(m, ids[i]);
		moved = mt && mt->shell && mt->shell_seq != (uint64_t)at;
		unlock(&m->lock, LOCK_ENGINE_INDEX);
		if (!moved)
			continue;
		rc = rconn_pool_call(r->pool, 0, 4, av, NULL, &h);
		if (rc)
			break;
		if (h->type == REDIS_REPLY_ARRAY && h->elements == 2 &&
		    dec_u64(out_str(h, 0), &np) && dec_u64(out_str(h, 1), &seq))
			mirror_shell_parents(s, ids[i], np, seq);
		freeReplyObject(h);
	}
	free(ids);
	return rc;
}

int remote_load_all(struct store *s)
{
	struct remote *r = remote_of(s);
	redisReply *rep = NULL, *tl;
	uint64_t clock_ms = 0, gseq = 0;
	bool gorder = false;
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
		 out_str(rep, 3) ? out_str(rep, 3) : "0-0");
	/* The store's drain and clock, from its meta. */
	for (size_t i = 0; i + 1 < rep->element[4]->elements; i += 2) {
		const char *k = out_str(rep->element[4], i);
		const char *v = out_str(rep->element[4], i + 1);

		if (!k || !v)
			continue;
		if (strcmp(k, "state") == 0)
			state = v, store_load_state(s,
				strcmp(state, "draining") == 0 ? STORE_DRAINING :
				strcmp(state, "drained") == 0 ? STORE_DRAINED :
				STORE_READY);
		else if (strcmp(k, "drain_deadline") == 0)
			store_load_drain_deadline(s, strtoull(v, NULL, 10));
		else if (strcmp(k, "clock_ms") == 0)
			clock_ms = strtoull(v, NULL, 10);
		else if (strcmp(k, "gseq") == 0 && dec_u64(v, &gseq))
			gorder = true;
	}
	/* One order of all tenants (meta gseq): the root numbered by it
	 * from the number the root's dump was at. */
	lock(&mirror_of(s)->apply, LOCK_ENGINE_APPLY);
	atomic_store(&mirror_of(s)->gorder, gorder);
	mirror_of(s)->gseq_applied = gorder ? gseq : 0;
	if (gorder)
		store_root_order_reset(s, gseq);
	unlock(&mirror_of(s)->apply, LOCK_ENGINE_APPLY);
	if (r->testclock)
		remote_saw_now(s, clock_ms);
	tl = rep->element[5];
	follow_pos_clear(r);
	for (size_t i = 0; i + 1 < tl->elements && rc == 0; i += 2) {
		uint64_t tid = 0;
		char key[160], id[48];
		redisReply *d = NULL;
		bool gone = false;

		if (!dec_u64(out_str(tl, i + 1), &tid) || tid == 0) {
			rc = -EPROTO;
			break;
		}
		remote_tenant_key(s, tid, key, sizeof(key));
		if (r->idle_ms) {
			/* Followed when used (redis/use.c): a shell now. */
			rc = remote_shell(s, tid, key);
			continue;
		}
		rc = remote_fcall(s, "sfs_dump", false, 1, (const char *[]){ key },
				  0, NULL, NULL, &d);
		if (rc == -ESTALE && d && strcmp(d->element[0]->str, "ESTALE") == 0)
			rc = 0, gone = true; /* gone since the root's dump */
		else if (rc == 0)
			rc = mirror_load_tenant(s, tid, dump_of(d), id, sizeof(id));
		if (d)
			freeReplyObject(d);
		/* A tenant gone has no log to follow (and no id was read). */
		if (rc == 0 && !gone)
			rc = follow_pos_add(r, tid, id);
	}
	freeReplyObject(rep);
	return rc;
}
