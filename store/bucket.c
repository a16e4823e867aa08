/*
 * bucket.c - a bucket's links: the names in a parent, each reaching a
 * state, and the state's side of the same relation.
 *
 * What it owns
 * ------------
 * A parent's bucket (parent->links: name -> struct link, an open-addressed
 * table, store/ptab.h, with parent->nlinks) under the bucket's lock, and
 * each state's list of the links that reach it (child->slinks,
 * node.nlink) under the state's stripe.  A link changes state only under
 * both, so a state with links can always find them, and a state counts
 * exactly the links that reach it.  A state ends with its last link
 * (state_end_locked): it is dead, its lease and its content go, and the
 * gauges drop, in the critical section that took the link.  The cascade
 * of a departing bucket (bucket_clear_locked) takes every link out of it
 * in one critical section of the bucket.
 *
 * Locks
 * -----
 * The bucket's lock (LOCK_PARENT) guards its table; buckets held together
 * are taken by ascending inode number (parent_cmp, lock_pair).  The
 * state's stripe (LOCK_STRIPE) guards its list and is taken inside the
 * bucket's.  bucket_find(), link_insert_locked(), link_remove_locked(),
 * state_unlink_locked() and bucket_clear_locked() expect the bucket's
 * lock held (the recount calls bucket_find() under the exclusive world
 * lock instead); link_attach_locked() and state_end_locked() expect the
 * stripe held.  links_free() and
 * link_free() run after the locks are released: a link holds a reference
 * on its state, and the last one frees it.
 */
#include "store/internal.h"

/* Names ------------------------------------------------------------------- */

uint32_t link_hash(const void *l)
{
	return ((const struct link *)l)->hash;
}

/* The entry named @name in bucket @p (p->lock held), expired or not. */
struct link *bucket_find(const struct parent *p, const char *name)
{
	const struct ptab *t = &p->links;
	uint32_t h;
	struct link *l;

	if (!t->cap)
		return NULL;
	h = ptab_hash_name(name);
	for (uint32_t i = ptab_home(t, h); (l = t->slot[i]); i = ptab_next(t, i))
		if (l->hash == h && strcmp(l->name, name) == 0)
			return l;
	return NULL;
}

int bucket_add(struct parent *p, struct link *l)
{
	return ptab_add(&p->links, l, l->hash, link_hash);
}

void bucket_del(struct parent *p, struct link *l)
{
	ptab_remove(&p->links, l, l->hash, link_hash);
}

struct link *link_new(const char *name, struct child *c)
{
	size_t len = strlen(name);
	struct link *l = st_calloc(1, offsetof(struct link, name) + len + 1);

	if (l) {
		memcpy(l->name, name, len + 1);
		l->child = c;
		l->hash = ptab_hash_name(name);
	}
	return l;
}

void link_free(struct store *s, struct link *l)
{
	if (l) {
		store_node_unref(s, &l->child->node);
		free(l);
	}
}

/* Free detached links (no lock held): each drops its state reference.
 * The detached table is private now, so it is walked and freed whole. */
void links_free(struct store *s, struct ptab *links)
{
	struct link *l;
	uint32_t i;

	ptab_for_each(links, i, l) {
		store_node_unref(s, &l->child->node);
		free(l);
	}
	ptab_free(links);
}

/* Bucket lock order ------------------------------------------------------- */

/* Buckets sort by inode number: the canonical lock order. */
int parent_cmp(const void *a, const void *b)
{
	const struct parent *x = *(struct parent *const *)a;
	const struct parent *y = *(struct parent *const *)b;

	return x->node.ino < y->node.ino ? -1 : x->node.ino > y->node.ino;
}

/* Lock two buckets in the canonical order (ascending inode number). */
void lock_pair(struct parent *a, struct parent *b)
{
	if (a == b) {
		bucket_lock(a);
	} else if (a->node.ino < b->node.ino) {
		bucket_lock(a);
		bucket_lock(b);
	} else {
		bucket_lock(b);
		bucket_lock(a);
	}
}

void unlock_pair(struct parent *a, struct parent *b)
{
	bucket_unlock(a);
	if (a != b)
		bucket_unlock(b);
}

/* Links in and out of a bucket -------------------------------------------- */

/*
 * Link @l of @p joins its state (the state's stripe held): in one
 * critical section the state counts it and can find it, so a state with
 * links always has them in child->slinks.
 */
void link_attach_locked(struct parent *p, struct link *l)
{
	store_assert_held(LOCK_STRIPE);
	l->parent = p;
	LL_PREPEND2(l->child->slinks, l, snext);
	l->child->node.nlink++;
}

/* Insert link @l, attached to its state, into @p after
 * link_reserve_locked() (p->lock held).  Cannot fail. */
void link_insert_locked(struct store *s, struct given *g, struct parent *p, struct link *l,
			bool new_state)
{
	store_assert_held(LOCK_PARENT);
	(void)new_state; /* its state was counted by admit_locked() */
	ptab_insert(&p->links, l, l->hash);
	p->nlinks++;
	gauge_add(&s->links_n, 1);
	touch_dir(&p->meta, g);
}

/* Unhook link @l from bucket @p (p->lock held); the caller frees it. */
void link_remove_locked(struct store *s, struct given *g, struct parent *p, struct link *l)
{
	store_assert_held(LOCK_PARENT);
	bucket_del(p, l);
	p->nlinks--;
	gauge_sub(&s->links_n, 1, "links");
	gauge_sub(&p->tenant->links_n, 1, "tenant links");
	touch_dir(&p->meta, g);
	state_unlink_locked(s, g, l, STORE_OP_UNLINK);
}

/* A state's links --------------------------------------------------------- */

/*
 * State @c ends (stripe held): its last link went.  Accounts the removal
 * (@expired: as an expiry) and releases its content.
 */
static void state_end_locked(struct store *s, struct tenant *t,
			     struct child *c, bool expired)
{
	size_t bytes = blob_len(c->content);

	store_assert_held(LOCK_STRIPE);
	atomic_store(&c->node.dead, true);
	lease_clear(s, &c->node);
	blob_unref(c->content);
	c->content = NULL;
	gauge_sub(&s->bytes_n, bytes, "bytes");
	gauge_sub(&t->bytes_n, bytes, "tenant bytes");
	gauge_sub(&s->children_n, 1, "children");
	gauge_sub(&t->children_n, 1, "tenant children");
	atomic_fetch_add(expired ? &s->expiries : &s->removals, 1);
}

/*
 * Drop link @l from its state's set (the bucket lock held): the state
 * loses one link and ends when it was the last.  Returns true then.
 * Event @op (unlink, expire) is appended under the state's stripe, so it
 * is ordered with the state's publications.
 */
bool state_unlink_locked(struct store *s, struct given *g, struct link *l, enum store_op op)
{
	struct child *c = l->child;
	bool expired = op == STORE_OP_EXPIRE;
	bool ended;

	store_assert_held(LOCK_PARENT);
	lock(stripe(s, c), LOCK_STRIPE);
	snap_state_cow(s, c);
	if (op != NO_EVENT)
		emit(s, g, op, expired, &c->node, l->parent->tenant, l->parent->name,
		     l->name, (int64_t)l->parent->generation,
		     (int64_t)c->version);
	LL_DELETE2(c->slinks, l, snext);
	ended = --c->node.nlink == 0;
	if (ended)
		state_end_locked(s, l->parent->tenant, c, expired);
	c->meta.ctime = wall_now(g);
	unlock(stripe(s, c), LOCK_STRIPE);
	return ended;
}

/* The cascade ------------------------------------------------------------- */

#ifdef STORE_FAULTS
void store_cascade_step_hook(struct store *s, void (*fn)(void *arg), void *arg)
{
	s->cascade_step_fn = fn;
	s->cascade_step_arg = arg;
}

static void cascade_step(struct store *s)
{
	if (s->cascade_step_fn)
		s->cascade_step_fn(s->cascade_step_arg);
}
#else
#define cascade_step(s) ((void)(s))
#endif

/*
 * Take every link out of bucket @p (p->lock held): the state of each link
 * loses one link, and ends when it was the last.  Returns the detached
 * links for links_free() after the lock is dropped.
 */
struct ptab bucket_clear_locked(struct store *s, struct given *g, struct parent *p)
{
	struct ptab links = p->links;
	struct tenant *t = p->tenant;
	struct link *l;
	uint32_t i;

	store_assert_held(LOCK_PARENT);
	ptab_for_each(&links, i, l) {
		cascade_step(s);
		if (!state_unlink_locked(s, g, l, NO_EVENT))
			note_attrs_changed(l->child->node.ino);
	}
	gauge_sub(&s->links_n, p->nlinks, "links");
	gauge_sub(&t->links_n, p->nlinks, "tenant links");
	memset(&p->links, 0, sizeof(p->links));
	p->nlinks = 0;
	return links;
}

/* Contract in engine.h. */
int tenant_each_link(struct store *s, struct tenant *t,
		     int (*fn)(void *arg, struct store_node *parent,
			       const char *name, uint64_t ino),
		     void *arg)
{
	struct parent *p;
	int rc = 0;

	(void)s;
	lock(&t->lock, LOCK_TENANT);
	for (p = t->parents; p && rc == 0; p = p->hh.next) {
		struct link *l;
		uint32_t i;

		bucket_lock(p);
		ptab_for_each(&p->links, i, l) {
			rc = fn(arg, &p->node, l->name, l->child->node.ino);
			if (rc)
				break;
		}
		bucket_unlock(p);
	}
	unlock(&t->lock, LOCK_TENANT);
	return rc;
}

/* Contract in engine.h. */
bool state_each_link(struct store *s, struct child *c,
		     bool (*fn)(void *arg, struct store_node *parent,
				const char *name),
		     void *arg)
{
	struct link *l;
	bool stop = false;

	lock(stripe(s, c), LOCK_STRIPE);
	LL_FOREACH2(c->slinks, l, snext) {
		if (fn(arg, &l->parent->node, l->name)) {
			stop = true;
			break;
		}
	}
	unlock(stripe(s, c), LOCK_STRIPE);
	return stop;
}
