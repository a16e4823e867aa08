/*
 * node.c - nodes and their attributes: what every tenant, parent, state
 * and special file is, how long it lives, and what stat(2) shows of it.
 *
 * What it owns
 * ------------
 * A node's identity (its inode number and kind, immutable), its reference
 * count and its "dead" flag (set by the transition that takes it out of
 * the hierarchy, in the same critical section), and the attributes a
 * directory or a state shows (struct meta and node->mode).  A node is
 * freed by its last reference (store_node_unref): the hierarchy's, a
 * caller's (the adapter's for what the kernel knows), the lease heap's;
 * so a node
 * removed while something still points at it stays readable, dead, and
 * every operation through it answers -ESTALE.  A special file is a slot
 * inside its directory's record and counts on its directory.
 *
 * Locks
 * -----
 * A directory's or a state's attributes are guarded by its own lock
 * (node_lock: the store lock for the root, LOCK_STORE; the tenant's,
 * LOCK_TENANT; the bucket's, LOCK_PARENT; the state's stripe,
 * LOCK_STRIPE); a tenant's owner, group and mode are written under its
 * acl_lock too (LOCK_ACL, a leaf), so a line appended from a transition
 * that holds only a bucket or a stripe can read them.  attr_locked()
 * expects the node's lock held, or the node not reachable yet.
 * store_setattr() is a transition (the world lock shared, then the
 * node's lock).  store_node_unref() may free a node, which gives its
 * lease record back under the heap lock (a leaf): it is never called
 * with a leaf held.  store_node_names() calls its callback under the
 * state's stripe.
 */
#include "store/internal.h"

#include <errno.h>
#include <sys/stat.h>

/* Making a node ----------------------------------------------------------- */

void node_init(struct store_node *n, uint64_t ino, enum store_kind k)
{
	memset(n, 0, sizeof(*n));
	n->ino = ino;
	n->kind = (uint8_t)k;
	atomic_init(&n->refs, 1);
	atomic_init(&n->dead, false);
	atomic_init(&n->lease, 0);
}

uint64_t store_special_ino(uint64_t dir_ino, int slot)
{
	return dir_ino + 1 + (uint64_t)slot;
}

void specials_init(struct special *sp, struct store_node *owner)
{
	for (int i = 0; i < STORE_NSPECIAL; i++) {
		node_init(&sp[i].node, store_special_ino(owner->ino, i),
			  STORE_SPECIAL);
		sp[i].slot = i;
		sp[i].owner = owner;
	}
}

/* Node @n with attributes @m starts owned as @o says, stamped now. */
void meta_init(struct store_node *n, struct meta *m,
	       const struct store_owner *o, struct given *g)
{
	m->uid = o->uid;
	m->gid = o->gid;
	n->mode = o->mode & 07777;
	m->atime = m->mtime = m->ctime = wall_now(g);
}

/*
 * A node @n made in directory @dir (whose lock the caller holds) takes
 * @dir's group when @dir is setgid, and a new directory (@is_dir) takes
 * the setgid bit too, as on Linux.  (The kernel has already cleared the
 * bit from a new file's mode when the caller is not in the group.)
 */
void meta_inherit(struct store_node *n, struct meta *m,
		  const struct store_node *dir, const struct meta *dm,
		  bool is_dir)
{
	if (!(dir->mode & S_ISGID))
		return;
	m->gid = dm->gid;
	if (is_dir)
		n->mode |= S_ISGID;
}

/* Contract in engine.h. */
void root_inherit_owner(struct store *s, struct store_owner *o)
{
	lock(&s->lock, LOCK_STORE);
	if (s->root.mode & S_ISGID) {
		o->gid = s->root_meta.gid;
		o->mode |= S_ISGID;
	}
	unlock(&s->lock, LOCK_STORE);
}

/* The engine's views of a node (contracts in engine.h). */
struct tenant *node_tenant(struct store_node *n)
{
	return as_tenant(n);
}

struct parent *node_parent(struct store_node *n)
{
	return as_parent(n);
}

struct child *node_child(struct store_node *n)
{
	return as_child(n);
}

struct store_node *tenant_node(struct tenant *t)
{
	return &t->node;
}

uint64_t tenant_engine_id(const struct tenant *t)
{
	return t->engine_id;
}

void tenant_set_engine_id(struct tenant *t, uint64_t id)
{
	t->engine_id = id;
}

uint64_t tenant_set_shell_parents(struct tenant *t, int64_t nparents)
{
	return atomic_exchange(&t->shell_nlink,
			       nparents < 0 ? 0 : 2 + (uint64_t)nparents);
}

size_t tenant_nparents(struct store *s, struct tenant *t)
{
	size_t n;

	(void)s;
	lock(&t->lock, LOCK_TENANT);
	n = HASH_COUNT(t->parents);
	unlock(&t->lock, LOCK_TENANT);
	return n;
}

uint64_t node_deadline(const struct store *s, const struct store_node *n)
{
	return deadline_of(s, n);
}

uint64_t parent_generation(const struct parent *p)
{
	return p->generation;
}

uint64_t state_version(struct store *s, struct child *c)
{
	uint64_t v;

	lock(stripe(s, c), LOCK_STRIPE);
	v = c->version;
	unlock(stripe(s, c), LOCK_STRIPE);
	return v;
}

/* The meta of directory or state @n. */
static struct meta *meta_of(struct store *s, struct store_node *n)
{
	switch (n->kind) {
	case STORE_ROOT: return &s->root_meta;
	case STORE_TENANT: return &as_tenant(n)->meta;
	case STORE_PARENT: return &as_parent(n)->meta;
	case STORE_CHILD: return &as_child(n)->meta;
	default: abort(); /* a special file has no meta of its own */
	}
}

void state_set_version(struct store *s, struct child *c, uint64_t version)
{
	lock(stripe(s, c), LOCK_STRIPE);
	c->version = version;
	unlock(stripe(s, c), LOCK_STRIPE);
}

void parent_set_generation(struct parent *p, uint64_t generation)
{
	p->generation = generation;
}

uint32_t state_nlink(struct store *s, struct child *c)
{
	uint32_t n;

	lock(stripe(s, c), LOCK_STRIPE);
	n = c->node.nlink;
	unlock(stripe(s, c), LOCK_STRIPE);
	return n;
}

void node_seen(struct store *s, struct store_node *n, struct node_seen *out)
{
	const struct meta *m = meta_of(s, n);

	node_lock(s, n);
	out->uid = m->uid;
	out->gid = m->gid;
	out->mode = n->mode;
	out->ttl = ttl_of(s, n);
	out->child_ttl = n->kind == STORE_PARENT ? as_parent(n)->child_ttl_ms : 0;
	node_unlock(s, n);
	out->deadline = deadline_of(s, n);
}

void state_set_mtime(struct store *s, struct child *c, int64_t mtime)
{
	lock(stripe(s, c), LOCK_STRIPE);
	c->meta.mtime = mtime;
	unlock(stripe(s, c), LOCK_STRIPE);
}

void node_set_meta(struct store *s, struct store_node *n,
		   const struct store_owner *o, int64_t atime, int64_t mtime,
		   int64_t ctime)
{
	struct meta *m = meta_of(s, n);

	node_lock(s, n);
	if (n->kind == STORE_TENANT)
		lock(&as_tenant(n)->acl_lock, LOCK_ACL);
	m->uid = o->uid;
	m->gid = o->gid;
	n->mode = (uint16_t)(o->mode & 07777);
	m->atime = atime;
	m->mtime = mtime;
	m->ctime = ctime;
	if (n->kind == STORE_TENANT)
		unlock(&as_tenant(n)->acl_lock, LOCK_ACL);
	node_unlock(s, n);
}

bool node_dead(const struct store_node *n)
{
	return is_dead(n);
}

struct store_node *state_tenant(struct store *s, struct child *c)
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

void node_attr_any(struct store *s, struct store_node *n,
		   struct store_attr *a)
{
	node_lock(s, n);
	attr_locked(s, n, a);
	node_unlock(s, n);
}

/* Reading a node --------------------------------------------------------- */

enum store_kind store_node_kind(const struct store_node *n)
{
	return n->kind;
}

uint64_t store_node_ino(const struct store_node *n)
{
	return n->ino;
}

int store_node_slot(const struct store_node *n)
{
	return n->kind == STORE_SPECIAL ? as_special(n)->slot : -1;
}

int store_node_depth(const struct store_node *n)
{
	switch (n->kind) {
	case STORE_ROOT: return 0;
	case STORE_TENANT: return 1;
	case STORE_PARENT: return 2;
	case STORE_CHILD: return 3;
	case STORE_SPECIAL: return store_node_depth(as_special(n)->owner) + 1;
	}
	return -1;
}

struct store_node *store_node_tenant(struct store_node *n)
{
	n = counted(n);
	switch (n->kind) {
	case STORE_TENANT: return n;
	case STORE_PARENT: return &as_parent(n)->tenant->node;
	default: return NULL; /* a state's tenant is its parents' */
	}
}

const char *store_node_name(const struct store_node *n)
{
	if (n->kind == STORE_TENANT)
		return ((const struct tenant *)n)->name;
	if (n->kind == STORE_PARENT)
		return ((const struct parent *)n)->name;
	return "";
}

bool store_node_live(const struct store_node *n)
{
	return !is_dead(n);
}

struct store_node *store_root(struct store *s)
{
	return &s->root;
}

int store_special(struct store *s, struct store_node *dir, int slot,
		  struct store_node **out)
{
	struct store_node *sp;

	if (slot < 0 || slot >= STORE_NSPECIAL)
		return -EINVAL;
	if (dir->kind == STORE_ROOT)
		sp = &s->root_special[slot].node;
	else if (dir->kind == STORE_TENANT)
		sp = &as_tenant(dir)->special[slot].node;
	else
		return -ENOTDIR;
	if (is_dead(dir))
		return -ESTALE;
	store_node_ref(sp);
	*out = sp;
	return 0;
}

/* Attributes -------------------------------------------------------------- */

static struct timespec timespec_of(int64_t ns)
{
	struct timespec ts = { ns / NS_PER_S, ns % NS_PER_S };

	if (ts.tv_nsec < 0) { /* before 1970 */
		ts.tv_sec--;
		ts.tv_nsec += NS_PER_S;
	}
	return ts;
}

static void attr_from_meta(struct store_attr *a, const struct meta *m)
{
	a->uid = m->uid;
	a->gid = m->gid;
	a->atime = timespec_of(m->atime);
	a->mtime = timespec_of(m->mtime);
	a->ctime = timespec_of(m->ctime);
}

/*
 * The attributes of directory or state @n, its own lock held (the store's
 * for the root, the tenant's, the bucket's, the state's stripe): so a
 * transition reports them as of itself.
 */
void attr_locked(struct store *s, struct store_node *n,
		 struct store_attr *a)
{
	struct tenant *t;
	struct parent *p;
	struct child *c;

	memset(a, 0, sizeof(*a));
	a->ino = n->ino;
	switch (n->kind) {
	case STORE_ROOT:
		attr_from_meta(a, &s->root_meta);
		a->mode = S_IFDIR | s->root.mode;
		a->nlink = 2 + HASH_COUNT(s->tenants);
		break;
	case STORE_TENANT:
		t = as_tenant(n);
		attr_from_meta(a, &t->meta);
		a->mode = S_IFDIR | t->node.mode;
		a->nlink = atomic_load(&t->shell_nlink);
		if (!a->nlink)
			a->nlink = 2 + HASH_COUNT(t->parents);
		break;
	case STORE_PARENT:
		p = as_parent(n);
		attr_from_meta(a, &p->meta);
		a->mode = S_IFDIR | p->node.mode;
		a->nlink = 2;
		a->size = p->nlinks;
		break;
	case STORE_CHILD:
		c = as_child(n);
		attr_from_meta(a, &c->meta);
		a->mode = S_IFREG | c->node.mode;
		a->nlink = c->node.nlink;
		a->size = blob_len(c->content);
		break;
	default:
		break;
	}
}

static int getattr_dir(struct store *s, struct store_node *n,
		       struct store_attr *a)
{
	switch (n->kind) {
	case STORE_ROOT: case STORE_TENANT: case STORE_PARENT: break;
	default: return -EINVAL;
	}
	node_lock(s, n);
	attr_locked(s, n, a);
	node_unlock(s, n);
	return 0;
}

int store_getattr(struct store *s, struct store_node *n, struct store_attr *a)
{
	struct child *c;
	int rc;

	memset(a, 0, sizeof(*a));
	if (gone(s, n, store_now_ms(s)))
		return -ESTALE;
	a->ino = n->ino;
	switch (n->kind) {
	case STORE_CHILD:
		c = as_child(n);
		lock(stripe(s, c), LOCK_STRIPE);
		attr_locked(s, n, a);
		unlock(stripe(s, c), LOCK_STRIPE);
		/* Removed between the check and the lock: still stale. */
		return a->nlink ? 0 : -ESTALE;
	case STORE_SPECIAL:
		/* Special files show their directory's owner; layout/ gives
		 * the mode. */
		rc = getattr_dir(s, as_special(n)->owner, a);
		a->ino = n->ino;
		a->mode = S_IFREG | 0444;
		a->nlink = 1;
		a->size = 0;
		return rc;
	default:
		return getattr_dir(s, n, a);
	}
}

int store_parent_generation(struct store *s, struct store_node *n, uint64_t *gen)
{
	struct parent *p = as_parent(n);

	if (!p)
		return -EINVAL;
	if (gone(s, n, store_now_ms(s)))
		return -ESTALE;
	*gen = p->generation;
	return 0;
}

int store_child_version(struct store *s, struct store_node *n, uint64_t *version)
{
	struct child *c = as_child(n);
	int rc = 0;

	if (!c)
		return -EINVAL;
	lock(stripe(s, c), LOCK_STRIPE);
	if (c->node.nlink == 0 || is_expired(s, n, store_now_ms(s)))
		rc = -ESTALE;
	*version = c->version;
	unlock(stripe(s, c), LOCK_STRIPE);
	return rc;
}

/* What the kernel may keep ------------------------------------------------ */

static uint64_t earlier(uint64_t a, uint64_t b)
{
	return !a ? b : !b ? a : a < b ? a : b;
}

uint64_t store_node_horizon(struct store *s, struct store_node *n)
{
	uint64_t h = deadline_of(s, n);
	struct child *c = as_child(n);
	struct link *l;

	if (!c)
		return h;
	lock(stripe(s, c), LOCK_STRIPE);
	LL_FOREACH2(c->slinks, l, snext)
		h = earlier(h, deadline_of(s, &l->parent->node));
	unlock(stripe(s, c), LOCK_STRIPE);
	return h;
}

void store_node_names(struct store *s, struct store_node *n,
		      void (*fn)(void *arg, uint64_t dir_ino, const char *name),
		      void *arg)
{
	struct child *c = as_child(n);
	struct parent *p = as_parent(n);
	struct tenant *t = as_tenant(n);
	struct link *l;

	if (c) {
		lock(stripe(s, c), LOCK_STRIPE);
		LL_FOREACH2(c->slinks, l, snext)
			fn(arg, l->parent->node.ino, l->name);
		unlock(stripe(s, c), LOCK_STRIPE);
	} else if (p) {
		fn(arg, p->tenant->node.ino, p->name);
	} else if (t) {
		fn(arg, STORE_ROOT_INO, t->name);
	}
}
