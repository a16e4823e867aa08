/*
 * mirror_diff.c - a tenant the mirror holds, reloaded from the shared
 * store's dump (sfs_dump) as the difference between its copy and the
 * dump: derive, diff, act.
 *
 * What it owns
 * ------------
 * Nothing that lasts.  A mount whose position fell off a tenant's log
 * (redis/follow.c) has lost the entries of a gap, and with them what
 * each said; the dump says what the tenant is now.  A node is one
 * incarnation of a name for as long as it lives, and the shared store
 * never gives its inode number to another: so a node of the copy whose
 * number is in the dump is the same node, and is kept (its local inode
 * number, the kernel's handles of it, its working directories), and the
 * difference is applied to the copy with the embedded transitions, as
 * another mount's changes are:
 *   1. the dump parsed and checked whole first (mirror_diff_tenant
 *      changes nothing when it is malformed): parents by number, states
 *      by number, links by (parent, name);
 *   2. parents of the dump the copy lacks, whose name is free: join;
 *   3. links: a link of the copy the dump does not have goes (unlink),
 *      but the last link of a state that lives on, which moves instead
 *      (rename to a name the dump gives it, or, for names that chase
 *      each other, exchange); a link of the dump the copy lacks comes
 *      (create for a new state, link for a kept one);
 *   4. parents of the copy the dump does not have: leave (the cascade
 *      takes what links are left in them); then the joins a leave made
 *      room for (a rejoin), and step 3 again for their links, where a
 *      link that can still not move goes and its state is made anew;
 *   5. each state's content and version (a publication when its version
 *      differs), times, owner, mode and lease; each parent's and the
 *      tenant's attributes, lease and child_ttl; the drain state; the
 *      tombstones, dropped and loaded again (no one watches them).
 * Every line those transitions append is internal (another mount's
 * change) and hidden (evlog.h): the echo (fs/echo.c) replays it through
 * the mount, so inotify watchers see the difference, as DELETE, CREATE,
 * MOVED_FROM/MOVED_TO, MODIFY/CLOSE_WRITE; and the inval thread drops
 * what it changed from the kernel's caches; a changed owner, mode or
 * lease reaches the echo by the touch hook (ATTRIB).  A .events reader
 * sees none of them: the lines of the gap are not known, and it gets
 * the reload's one "overflow" line instead (mirror_load_tenant).  The
 * difference is not the history: a child rewritten twice in the gap is
 * one MODIFY, one created and removed in it is nothing.
 *
 * A step that fails (out of memory, a transition that refuses: the copy
 * is not what it should be) returns its error, and the caller replaces
 * the tenant whole (mirror_load_tenant).
 *
 * Threads and locks
 * -----------------
 * The applying thread only (the follower, or a test), which is the only
 * thread that changes a mirror's structures: so what it reads of the
 * copy between two transitions stays true.  The transitions take their
 * own locks; the copy is read under the tenant's lock and each bucket's
 * (LOCK_TENANT, then LOCK_PARENT), a state's links under its stripe; the
 * mirror's lock only inside index_get and index_put.
 */
#include "store/engine.h"
#include "redis/mirror.h"

#include <errno.h>
#include <limits.h>

/* The dump, parsed --------------------------------------------------------- */

struct dparent {
	UT_hash_handle hh;             /* diff.parents, by ino */
	uint64_t ino;                  /* local */
	const char *name;              /* the dump's */
	uint64_t gen, cttl;
	struct store_owner o;
	const struct dump_val *row;
	bool made;                     /* joined by this diff */
};

struct dstate {
	UT_hash_handle hh;             /* diff.states, by ino */
	uint64_t ino;                  /* local */
	const struct dump_val *row;
	struct store_owner o;
	uint64_t ver;
	const char *data;
	size_t len;
	bool made;                     /* created by this diff */
};

struct dlink {
	UT_hash_handle hh;             /* diff.links, by key */
	struct dstate *st;
	uint64_t pino;                 /* local */
	const char *name;              /* in key */
	char key[];                    /* "PINO/NAME" */
};

struct diff {
	struct store *s;
	struct tenant *t;
	const struct dump_val *T, *tombs;
	struct dparent *pv, *parents;  /* array, hash */
	size_t np;
	struct dstate *sv, *states;
	size_t ns;
	struct dlink **lv, *links;     /* each state's oldest first; hash */
	size_t nl, capl;
	/* What each transition applying the difference is given: the time
	 * of the reload, a store clock of 0 (nothing is past its deadline
	 * until the dump's are set), hidden lines of another's change. */
	struct given g;
};

static struct dlink *dlink_find(struct diff *d, uint64_t pino, const char *name)
{
	char key[32 + NAME_MAX + 2];
	struct dlink *dl;

	snprintf(key, sizeof(key), "%llu/%s", (unsigned long long)pino, name);
	HASH_FIND_STR(d->links, key, dl);
	return dl;
}

static struct dstate *dstate_find(struct diff *d, uint64_t ino)
{
	struct dstate *ds;

	HASH_FIND(hh, d->states, &ino, sizeof(ino), ds);
	return ds;
}

static struct dparent *dparent_find(struct diff *d, uint64_t ino)
{
	struct dparent *dp;

	HASH_FIND(hh, d->parents, &ino, sizeof(ino), dp);
	return dp;
}

/* Link @name of parent @pino (the store's number) to state @ds. */
static int add_dlink(struct diff *d, struct dstate *ds, uint64_t pino,
		     const char *name)
{
	uint64_t local = pino + mirror_of(d->s)->ino_offset;
	size_t klen = 24 + strlen(name) + 2;
	struct dlink *dl;

	if (!dump_name_ok(d->s, name) || !dparent_find(d, local) ||
	    dlink_find(d, local, name))
		return -EPROTO;
	if (d->nl == d->capl) {
		size_t cap = d->capl ? d->capl * 2 : 64;
		struct dlink **v = st_realloc(d->lv, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		d->lv = v;
		d->capl = cap;
	}
	dl = st_calloc(1, sizeof(*dl) + klen);
	if (!dl)
		return -ENOMEM;
	dl->st = ds;
	dl->pino = local;
	snprintf(dl->key, klen, "%llu/%s", (unsigned long long)local, name);
	dl->name = strchr(dl->key, '/') + 1;
	hash_oom = 0;
	HASH_ADD_STR(d->links, key, dl);
	if (hash_oom) {
		free(dl);
		return -ENOMEM;
	}
	d->lv[d->nl++] = dl;
	return 0;
}

/* State row @srow: its fields and its links, "PINO/NAME" newest first. */
static int parse_state(struct diff *d, const struct dump_val *srow)
{
	const struct dump_val *S = dump_arr(srow, 1);
	const char *links = dump_kv(S, "links");
	struct dstate *ds = &d->sv[d->ns];
	char *copy, *tok, *save = NULL, **v;
	size_t nv = 0, cap = 16;
	uint64_t sino;
	int rc = 0;

	if (!S || !dump_u64(srow, 0, &sino) || !links || !dump_owner(S, &ds->o) ||
	    !dump_kvu(S, "version", &ds->ver))
		return -EPROTO;
	ds->data = dump_kv_len(S, "data", &ds->len);
	if (ds->data && ds->len > store_limits(d->s)->max_payload)
		return -EPROTO;
	ds->ino = sino + mirror_of(d->s)->ino_offset;
	ds->row = S;
	if (dstate_find(d, ds->ino))
		return -EPROTO;
	copy = st_strdup(links);
	v = st_calloc(cap, sizeof(*v));
	if (!copy || !v) {
		free(copy);
		free(v);
		return -ENOMEM;
	}
	for (tok = strtok_r(copy, " ", &save); tok && rc == 0;
	     tok = strtok_r(NULL, " ", &save)) {
		if (nv == cap) {
			char **nv2 = st_realloc(v, 2 * cap * sizeof(*v));

			if (!nv2) {
				rc = -ENOMEM;
				break;
			}
			v = nv2;
			cap *= 2;
		}
		v[nv++] = tok;
	}
	if (rc == 0 && nv) {
		hash_oom = 0;
		HASH_ADD(hh, d->states, ino, sizeof(ds->ino), ds);
		rc = hash_oom ? -ENOMEM : 0;
		if (rc == 0)
			d->ns++;
	}
	/* Oldest first: the link that made the state comes first. */
	for (size_t i = nv; i > 0 && rc == 0; i--) {
		char *slash = strchr(v[i - 1], '/');
		uint64_t pino;

		if (!slash) {
			rc = -EPROTO;
			break;
		}
		*slash = '\0';
		rc = dec_u64(v[i - 1], &pino) ? add_dlink(d, ds, pino, slash + 1) :
		     -EPROTO;
	}
	free(v);
	free(copy);
	return rc;
}

/* Step 1: the dump, checked as mirror_load_tenant checks it. */
static int parse(struct diff *d, const struct dump_val *dump)
{
	const struct dump_val *ps = dump_arr(dump, 5), *ss = dump_arr(dump, 6);
	int rc = 0;

	d->tombs = dump_arr(dump, 7);
	if (!ps || !ss || !d->tombs)
		return -EPROTO;
	d->pv = st_calloc(dump_len(ps) + 1, sizeof(*d->pv));
	d->sv = st_calloc(dump_len(ss) + 1, sizeof(*d->sv));
	if (!d->pv || !d->sv)
		return -ENOMEM;
	for (size_t i = 0; i < dump_len(ps); i++) {
		const struct dump_val *row = dump_arr(ps, i), *P = dump_arr(row, 1);
		struct dparent *dp = &d->pv[d->np];
		uint64_t pino;

		dp->name = dump_kv(P, "name");
		if (!P || !dump_u64(row, 0, &pino) || !dump_name_ok(d->s, dp->name) ||
		    !dump_owner(P, &dp->o) || !dump_kvu(P, "gen", &dp->gen) ||
		    dp->gen == 0)
			return -EPROTO;
		dump_kvu(P, "child_ttl", &dp->cttl);
		dp->ino = pino + mirror_of(d->s)->ino_offset;
		dp->row = P;
		if (dparent_find(d, dp->ino))
			return -EPROTO;
		hash_oom = 0;
		HASH_ADD(hh, d->parents, ino, sizeof(dp->ino), dp);
		if (hash_oom)
			return -ENOMEM;
		d->np++;
	}
	for (size_t i = 0; i < dump_len(ss) && rc == 0; i++)
		rc = parse_state(d, dump_arr(ss, i));
	/* The tombstones are checked as they are loaded (step 5). */
	return rc;
}

static void diff_free(struct diff *d)
{
	struct dlink *dl, *tmp;

	HASH_ITER(hh, d->links, dl, tmp) {
		HASH_DEL(d->links, dl);
		free(dl);
	}
	HASH_CLEAR(hh, d->parents);
	HASH_CLEAR(hh, d->states);
	free(d->lv);
	free(d->pv);
	free(d->sv);
}

/* The copy ----------------------------------------------------------------- */

/* Any refusal of a transition here means the copy is not what it was
 * read to be: the tenant is replaced whole. */
static int done(int rc)
{
	return rc < 0 ? -EUCLEAN : 0;
}

/* One link of the copy. */
struct clink {
	struct store_node *p;          /* counted */
	uint64_t ino;                  /* its state's */
	char *name;
};

static void clinks_free(struct diff *d, struct clink *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		store_node_unref(d->s, v[i].p);
		free(v[i].name);
	}
	free(v);
}

/* What clinks() gathers: the links so far. */
struct clinks {
	struct clink *v;
	size_t n, cap;
};

static int clink_add(void *arg, struct store_node *p, const char *name,
		     uint64_t ino)
{
	struct clinks *cl = arg;

	if (cl->n == cl->cap) {
		size_t nc = cl->cap ? cl->cap * 2 : 64;
		struct clink *nv = st_realloc(cl->v, nc * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		cl->v = nv;
		cl->cap = nc;
	}
	cl->v[cl->n].name = st_strdup(name);
	if (!cl->v[cl->n].name)
		return -ENOMEM;
	cl->v[cl->n].p = p;
	store_node_ref(p);
	cl->v[cl->n].ino = ino;
	cl->n++;
	return 0;
}

/* Every link of the copy, into *@out (*@n of them). */
static int clinks(struct diff *d, struct clink **out, size_t *n)
{
	struct clinks cl = { .v = NULL };
	int rc = tenant_each_link(d->s, d->t, clink_add, &cl);

	*n = cl.n;
	if (rc) {
		clinks_free(d, cl.v, *n);
		cl.v = NULL;
		*n = 0;
	}
	*out = cl.v;
	return rc;
}

/* The live node the mirror numbers @ino, of @kind, with a reference. */
static struct store_node *live(struct diff *d, uint64_t ino,
			       enum store_kind kind)
{
	struct store_node *n = index_get(mirror_of(d->s), ino);

	if (n && (store_node_kind(n) != kind ||
		  (kind == STORE_PARENT &&
		   store_node_tenant(n) != tenant_node(d->t)))) {
		store_node_unref(d->s, n);
		n = NULL;
	}
	return n;
}

/*
 * A link of state @n that the dump does not give it (the one it moves
 * by): its parent, counted, in *@p and its name in @name; false when
 * every link of @n is the dump's.
 */
struct anchor {
	struct diff *d;
	uint64_t ino;                  /* the state's */
	struct store_node **p;
	char *name;
};

static bool anchor_at(void *arg, struct store_node *p, const char *name)
{
	struct anchor *an = arg;
	struct dlink *dl = dlink_find(an->d, store_node_ino(p), name);

	if (dl && dl->st->ino == an->ino)
		return false;
	*an->p = p;
	store_node_ref(p);
	snprintf(an->name, NAME_MAX + 1, "%s", name);
	return true;
}

static bool anchor_of(struct diff *d, struct store_node *n,
		      struct store_node **p, char *name)
{
	struct anchor an = { .d = d, .ino = store_node_ino(n), .p = p,
			     .name = name };

	return state_each_link(d->s, node_child(n), anchor_at, &an);
}

/* Step 3's removals: each link of the copy the dump does not have, but
 * (unless @all) the last link of a state that lives on. */
static int drop_links(struct diff *d, bool all)
{
	struct clink *v;
	size_t n;
	int rc = clinks(d, &v, &n);

	for (size_t i = 0; i < n && rc == 0; i++) {
		struct dlink *dl = dlink_find(d, store_node_ino(v[i].p), v[i].name);
		struct store_node *c;
		uint32_t links = 0;

		if (dl && dl->st->ino == v[i].ino)
			continue; /* the dump's */
		if (!all && dstate_find(d, v[i].ino) &&
		    (c = live(d, v[i].ino, STORE_CHILD)) != NULL) {
			links = state_nlink(d->s, node_child(c));
			store_node_unref(d->s, c);
			if (links <= 1)
				continue; /* it moves (add_links) */
		}
		rc = done(ENGINE_TRANSITION(d->s, child_unlink(d->s, &d->g, v[i].p, v[i].name)));
	}
	clinks_free(d, v, n);
	return rc;
}

/* State @ds's node, made at @p/@name (its first link the copy shows). */
static int make_state(struct diff *d, struct dstate *ds, struct store_node *p,
		      const char *name)
{
	struct store_node *c = NULL;
	bool created = false;
	int rc;

	d->g.ino = ds->ino;
	rc = ENGINE_TRANSITION(d->s, child_create(d->s, &d->g, p, name, &ds->o, true, &c,
					 &created, NULL));
	d->g.ino = 0;
	if (rc)
		return done(rc);
	ds->made = true;
	/* Its lease at once: one its parent's child_ttl gave it here ran
	 * on this diff's clock, not the store's. */
	rc = dump_lease(d->s, c, ds->row);
	if (rc) {
		store_node_unref(d->s, c);
		return rc;
	}
	return index_put(d->s, mirror_of(d->s), c);
}

/* Step 3's additions: each link of the dump the copy lacks, in a parent
 * it has, at a name that is free.  Returns how many were added. */
static int add_links(struct diff *d)
{
	int added = 0, rc = 0;

	for (size_t i = 0; i < d->nl && rc == 0; i++) {
		struct dlink *dl = d->lv[i];
		struct store_node *p = live(d, dl->pino, STORE_PARENT), *at = NULL;
		struct store_node *n, *ap = NULL;
		char aname[NAME_MAX + 1];

		if (!p)
			continue;
		if (node_lookup(d->s, &d->g, p, dl->name, &at) == 0) {
			store_node_unref(d->s, at);
			store_node_unref(d->s, p);
			continue; /* there, or taken for now */
		}
		n = live(d, dl->st->ino, STORE_CHILD);
		if (!n)
			rc = make_state(d, dl->st, p, dl->name);
		else if (anchor_of(d, n, &ap, aname))
			rc = done(ENGINE_TRANSITION(d->s, child_rename(d->s, &d->g, ap, aname, p,
							     dl->name, 0)));
		else
			rc = done(ENGINE_TRANSITION(d->s, child_link(d->s, &d->g, n, p, dl->name,
							   NULL)));
		if (ap)
			store_node_unref(d->s, ap);
		if (n)
			store_node_unref(d->s, n);
		store_node_unref(d->s, p);
		added++;
	}
	return rc ? rc : added;
}

/*
 * A link of the dump whose name another state holds by its last link,
 * which cannot move first (its own names are taken too): the two trade
 * names when the dump's state has a link to trade (exchange), else, when
 * @kill, the holder's link goes (and its state, made anew later).
 * 1 when something changed, 0 when nothing was blocked.
 */
static int unblock(struct diff *d, bool kill)
{
	int rc = 0;

	for (size_t i = 0; i < d->nl && rc == 0; i++) {
		struct dlink *dl = d->lv[i];
		struct store_node *p = live(d, dl->pino, STORE_PARENT), *at = NULL;
		struct store_node *n, *ap = NULL;
		char aname[NAME_MAX + 1];

		if (!p)
			continue;
		if (node_lookup(d->s, &d->g, p, dl->name, &at) != 0 ||
		    store_node_ino(at) == dl->st->ino) {
			if (at)
				store_node_unref(d->s, at);
			store_node_unref(d->s, p);
			continue;
		}
		store_node_unref(d->s, at);
		n = live(d, dl->st->ino, STORE_CHILD);
		if (n && anchor_of(d, n, &ap, aname)) {
			rc = done(ENGINE_TRANSITION(d->s, child_rename(d->s, &d->g, ap, aname, p,
					     dl->name, STORE_RENAME_EXCHANGE)));
			rc = rc ? rc : 1;
		} else if (kill) {
			rc = done(ENGINE_TRANSITION(d->s, child_unlink(d->s, &d->g, p, dl->name)));
			rc = rc ? rc : 1;
		}
		if (ap)
			store_node_unref(d->s, ap);
		if (n)
			store_node_unref(d->s, n);
		store_node_unref(d->s, p);
		if (rc)
			return rc;
	}
	return 0;
}

/* Step 3: the copy's links made the dump's, as far as its parents allow
 * (@last: for good, once every parent is there). */
static int converge(struct diff *d, bool last)
{
	int rc = drop_links(d, false);

	while (rc == 0) {
		while ((rc = add_links(d)) > 0)
			;
		if (rc == 0)
			rc = unblock(d, last);
		if (rc == 0)
			break;
		rc = rc > 0 ? 0 : rc;
	}
	if (rc == 0 && last) {
		rc = drop_links(d, true);
		while (rc == 0 && (rc = add_links(d)) > 0)
			;
	}
	return rc < 0 ? rc : 0;
}

/* Step 2 (and 4): join each parent of the dump the copy lacks, whose
 * name is free (@all: whose name must be free by now). */
static int join_parents(struct diff *d, bool all)
{
	for (size_t i = 0; i < d->np; i++) {
		struct dparent *dp = &d->pv[i];
		struct store_node *n = live(d, dp->ino, STORE_PARENT);
		int rc;

		if (n) {
			store_node_unref(d->s, n);
			continue;
		}
		if (node_lookup(d->s, &d->g, tenant_node(d->t), dp->name, &n) == 0) {
			store_node_unref(d->s, n);
			if (all)
				return -EUCLEAN;
			continue; /* its name leaves first */
		}
		d->g.ino = dp->ino;
		rc = ENGINE_TRANSITION(d->s, parent_join(d->s, &d->g, d->t, dp->name,
					       &dp->o, &n, NULL));
		d->g.ino = 0;
		if (rc)
			return done(rc);
		/* Made here, for the dump: its generation is the store's. */
		parent_set_generation(node_parent(n), dp->gen);
		dp->made = true;
		rc = index_put(d->s, mirror_of(d->s), n);
		if (rc)
			return rc;
	}
	return 0;
}

/* What leave_parents() gathers: the names of the parents that leave. */
struct pnames {
	struct diff *d;
	char **v;
	size_t n, cap;
};

static int pname_add(void *arg, struct store_node *p)
{
	struct pnames *pn = arg;

	if (dparent_find(pn->d, store_node_ino(p)))
		return 0;
	if (pn->n == pn->cap) {
		size_t nc = pn->cap ? pn->cap * 2 : 16;
		char **nv = st_realloc(pn->v, nc * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		pn->v = nv;
		pn->cap = nc;
	}
	pn->v[pn->n] = st_strdup(store_node_name(p));
	if (!pn->v[pn->n])
		return -ENOMEM;
	pn->n++;
	return 0;
}

/* Step 4: each parent of the copy the dump does not have leaves. */
static int leave_parents(struct diff *d)
{
	struct pnames pn = { .d = d };
	int rc = tenant_each_parent(d->s, d->t, pname_add, &pn);
	char **names = pn.v;
	size_t n = pn.n;

	for (size_t i = 0; i < n; i++) {
		if (rc == 0)
			rc = done(ENGINE_TRANSITION(d->s, parent_leave(d->s, &d->g, d->t,
						names[i], true, NULL)));
		free(names[i]);
	}
	free(names);
	return rc;
}

/* Step 5 ------------------------------------------------------------------- */

/* Another mount changed @n's attributes, as far as the dump tells
 * (@was what a watcher saw before): the echo raises ATTRIB for it. */
static void attrs_changed(struct store *s, struct store_node *n,
			  const struct node_seen *was)
{
	struct node_seen now;

	node_seen(s, n, &now);
	if (was->uid != now.uid || was->gid != now.gid ||
	    was->mode != now.mode || was->ttl != now.ttl ||
	    was->deadline != now.deadline || was->child_ttl != now.child_ttl)
		node_touched(s, n);
}

static int state_attrs(struct diff *d, struct dstate *ds)
{
	struct store_node *n = live(d, ds->ino, STORE_CHILD);
	struct child *c = node_child(n);
	struct node_seen was;
	uint64_t ver;
	int rc = 0;

	if (!n)
		return -EUCLEAN;
	node_seen(d->s, n, &was);
	ver = state_version(d->s, c);
	if (ver != ds->ver) {
		/* A publication: its write line is the echo's MODIFY. */
		rc = ENGINE_TRANSITION(d->s, content_publish(d->s, &d->g, c,
						ds->data ? ds->data : "",
						ds->len, NULL));
		state_set_version(d->s, c, ds->ver);
	}
	if (rc == 0) {
		dump_times(d->s, n, ds->row);
		rc = dump_lease(d->s, n, ds->row);
	}
	if (rc == 0 && !ds->made)
		attrs_changed(d->s, n, &was);
	store_node_unref(d->s, n);
	return done(rc);
}

static int parent_attrs(struct diff *d, struct dparent *dp)
{
	struct store_node *n = live(d, dp->ino, STORE_PARENT);
	struct node_seen was;
	int rc;

	if (!n)
		return -EUCLEAN;
	node_seen(d->s, n, &was);
	parent_set_child_ttl(node_parent(n), dp->cttl);
	dump_times(d->s, n, dp->row);
	rc = dump_lease(d->s, n, dp->row);
	if (rc == 0 && !dp->made)
		attrs_changed(d->s, n, &was);
	store_node_unref(d->s, n);
	return rc;
}

/* The tenant's attributes, drain state and tombstones. */
static int tenant_attrs(struct diff *d)
{
	struct tenant *t = d->t;
	struct node_seen was;
	int rc;

	node_seen(d->s, tenant_node(t), &was);
	dump_times(d->s, tenant_node(t), d->T);
	attrs_changed(d->s, tenant_node(t), &was);
	dump_drain(d->s, t, d->T);
	tombs_drop_all(d->s, t);
	rc = dump_tombs(d->s, t, d->tombs);
	return rc;
}

int mirror_diff_tenant(struct store *s, struct tenant *t,
		       const struct dump_val *dump)
{
	struct diff d = { .s = s, .t = t, .T = dump_arr(dump, 4),
			  .g = { .others = true, .hidden = true } };
	struct timespec now;
	int rc;

	rc = parse(&d, dump);
	if (rc)
		goto out;
	clock_gettime(CLOCK_REALTIME, &now);
	d.g.ns = ns_of(now);
	/* Nothing is past its deadline while the difference is applied:
	 * the deadlines are the dump's, set at the end (step 5). */
	d.g.ms = 0;
	rc = join_parents(&d, false);
	if (rc == 0)
		rc = converge(&d, false);
	if (rc == 0)
		rc = leave_parents(&d);
	if (rc == 0)
		rc = join_parents(&d, true);
	if (rc == 0)
		rc = converge(&d, true);
	for (size_t i = 0; i < d.ns && rc == 0; i++)
		rc = state_attrs(&d, &d.sv[i]);
	for (size_t i = 0; i < d.np && rc == 0; i++)
		rc = parent_attrs(&d, &d.pv[i]);
	if (rc == 0)
		rc = tenant_attrs(&d);
out:
	diff_free(&d);
	return rc;
}
