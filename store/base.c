/*
 * base.c - the ground floor of the core: what every mechanism of store/
 * uses and which calls none of them.
 *
 * What it owns
 * ------------
 * The refusals counted for .stats (refuse), the store's clock
 * (store_now_ms), a node's references and its freeing (store_node_ref,
 * store_node_unref, node_free: a node's lease record goes back to the
 * free list with it, lease_release), and the reaper's wake-up
 * (reaper_note).  The mechanisms (bucket.c, child.c, parent.c, tenant.c,
 * lease.c, reaper.c, ...) sit above it and call down to it, never the
 * other way, as SQLite's btree.c calls pager.c and pager.c calls os.c:
 * so no two files of the core call each other in a circle.
 *
 * Locks
 * -----
 * Only leaves: the heap lock to give a lease record back (LOCK_HEAP), the
 * reaper's lock to wake it (LOCK_REAPER).  store_node_unref() may free a
 * node and so takes the heap lock: it is never called with a leaf held.
 */
#include "store/internal.h"

#include <errno.h>

/* Refusals --------------------------------------------------------------- */

/* Count refusal @rc by its kind for .stats, and return it. */
int refuse(struct store *s, int rc)
{
	int r = -1;

	switch (rc) {
	case -ENOSPC: r = STORE_REFUSED_CAPACITY; break;
	case -EDQUOT: r = STORE_REFUSED_QUOTA; break;
	case -EFBIG: r = STORE_REFUSED_PAYLOAD; break;
	case -EROFS: r = STORE_REFUSED_DRAINING; break;
	case -EEXIST: r = STORE_REFUSED_EXISTS; break;
	case -ESTALE: r = STORE_REFUSED_STALE; break;
	case -EAGAIN: r = STORE_REFUSED_CONFLICT; break;
	case -ENOENT: r = STORE_REFUSED_GONE; break;
	}
	if (r >= 0)
		atomic_fetch_add(&s->refused[r], 1);
	return rc;
}

/* The clock ---------------------------------------------------------------- */

uint64_t store_now_ms(const struct store *s)
{
	return s->clock.now_ms(s->clock.arg);
}

/* The store clock a transition given @g reads (NULL: the store's). */
uint64_t now_of(const struct store *s, const struct given *g)
{
	return g ? g->ms : store_now_ms(s);
}

/* Node lifetime ----------------------------------------------------------- */

/* @n is being freed: its record goes back to the free list. */
void lease_release(struct store *s, struct store_node *n)
{
	uint32_t i = atomic_load(&n->lease);

	if (!i)
		return;
	lock(&s->heap_lock, LOCK_HEAP);
	lease_at(s, i)->next_free = s->lease_free;
	s->lease_free = i;
	unlock(&s->heap_lock, LOCK_HEAP);
}

void store_node_ref(struct store_node *n)
{
	n = counted(n);
	atomic_fetch_add(&n->refs, 1);
}

static void node_free(struct store *s, struct store_node *n)
{
	struct tenant *t;
	struct parent *p;
	struct child *c;

	switch (n->kind) {
	case STORE_TENANT:
		t = as_tenant(n);
		pthread_mutex_destroy(&t->lock);
		pthread_mutex_destroy(&t->acl_lock);
		free(t->name);
		free(t);
		break;
	case STORE_PARENT:
		p = as_parent(n);
		lease_release(s, n);
		pthread_mutex_destroy(&p->lock);
		free(p->name);
		store_node_unref(s, &p->tenant->node);
		free(p);
		break;
	case STORE_CHILD:
		c = as_child(n);
		lease_release(s, n);
		blob_unref(c->content);
		free(c);
		break;
	default:
		/* The root and special files live inside the store/tenant. */
		break;
	}
}

void store_node_unref(struct store *s, struct store_node *n)
{
	n = counted(n);
	unsigned old = atomic_fetch_sub(&n->refs, 1);

	if (old == 0) {
		fprintf(stderr, "statefs: node %llu reference underflow\n",
			(unsigned long long)n->ino);
		abort();
	}
	if (old == 1)
		node_free(s, n);
}

/* The reaper's wake-up ------------------------------------------------------ */

void reaper_note(struct store *s, uint64_t deadline)
{
	if (!deadline || deadline >= atomic_load(&s->reap_at))
		return;
	lock(&s->reap_lock, LOCK_REAPER);
	s->reap_kicked = true;
	pthread_cond_signal(&s->reap_cond);
	unlock(&s->reap_lock, LOCK_REAPER);
}
