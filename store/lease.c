/*
 * lease.c - leases and the deadline heap: when a parent or a state ends
 * on its own (the reaper that ends it is store/reaper.c).
 *
 * What it owns
 * ------------
 * Each parent's and state's lease record (struct lease: its ttl and
 * deadline, its place in the heap), in chunks that never move
 * (s->lease_dir, handed out and taken back under s->heap_lock), and the
 * heap itself: a binary min-heap of nodes by deadline, each entry a
 * counted reference, its capacity the ceilings (max_parents +
 * max_children), allocated once, so an insert never fails.
 *
 * The heap is a secondary index of the deadlines:
 *  1. Authority: a node's deadline is its own (its lease record, written
 *     under its owner's lock: the bucket for a parent, the stripe for a
 *     state).  A reader holding only the node reads it (atomic).
 *  2. The owner updates the heap in the same critical section
 *     (lease_set, under the owner's lock and then the heap lock), so a
 *     deadline and its heap entry never disagree once the owner's lock
 *     is released.
 *  3. A node leaving the hierarchy leaves the heap with it (lease_clear
 *     in the transition that unhooks it); the reaper (reaper.c)
 *     re-checks every entry it takes under the owner's locks
 *     (parent_expire, child_expire), so one renewed or removed meanwhile
 *     is left alone.
 *  4. It is not rebuilt: it changes only with the deadlines.
 *  5. Tests: tests/unit/store/test_lease.c (renewals),
 *     tests/unit/store/test_reaper.c (deadline order, budgets, removed
 *     nodes leaving the heap, a random model against the reaper) and
 *     tests/bats/leases.bats, lease_stress.bats.
 * A node past its deadline is gone whether or not the reaper has run
 * (is_expired, gone: internal.h), so the reaper's pace is never seen.
 *
 * Locks
 * -----
 * Takes s->heap_lock (LOCK_HEAP, a leaf) for the heap and the records.
 * lease_ensure(), lease_set() and lease_clear() expect the node's owner
 * lock held (LOCK_PARENT or LOCK_STRIPE); lease_set() wakes the reaper
 * after it let go of the heap lock, when the deadline it set is earlier
 * than the one the reaper sleeps until (reaper_note: LOCK_REAPER, a
 * leaf).  store_lease_get() and store_set_child_ttl() take the owner
 * lock; store_set_ttl() and store_renew() take it inside a transition
 * (the world lock shared).
 */
#include "store/internal.h"

#include <errno.h>

/*
 * Give @n a lease record unless it has one (its owner's lock held): the
 * only step of a lease that can fail, so a transition takes it before
 * it changes anything.  0 or -ENOMEM.
 */
int lease_ensure(struct store *s, struct store_node *n)
{
	struct lease *l;
	uint32_t i;
	int rc = 0;

	if (atomic_load(&n->lease))
		return 0;
	lock(&s->heap_lock, LOCK_HEAP);
	i = s->lease_free;
	if (i) {
		s->lease_free = lease_at(s, i)->next_free;
	} else if (s->lease_top == UINT32_MAX) {
		rc = -ENOMEM;
	} else {
		i = s->lease_top + 1;
		if (!s->lease_dir[i >> LEASE_CHUNK_BITS]) {
			s->lease_dir[i >> LEASE_CHUNK_BITS] =
				st_calloc(LEASE_CHUNK, sizeof(struct lease));
			if (!s->lease_dir[i >> LEASE_CHUNK_BITS])
				rc = -ENOMEM;
		}
		if (rc == 0)
			s->lease_top = i;
	}
	if (rc == 0) {
		l = lease_at(s, i);
		atomic_init(&l->deadline, 0);
		l->ttl_ms = 0;
		l->heap_idx = NOT_IN_HEAP;
		l->next_free = 0;
		atomic_store_explicit(&n->lease, i, memory_order_release);
	}
	unlock(&s->heap_lock, LOCK_HEAP);
	return rc;
}

/* The lease heap (heap_lock held) ----------------------------------------- */

static void heap_place(struct store *s, size_t i, struct store_node *n)
{
	s->heap[i] = n;
	lease_of(s, n)->heap_idx = (uint32_t)i;
}

/*
 * Does @a come before @b in the heap: an earlier deadline or, at the
 * same one, a parent before a state, so that a parent and a child of it
 * due at one instant end as the parent's leave (the child a removal), as
 * the shared store orders them ("p:" before "s:" in its due set).
 */
static bool heap_before(const struct store *s, const struct store_node *a,
			const struct store_node *b)
{
	uint64_t da = deadline_of(s, a), db = deadline_of(s, b);

	return da < db || (da == db && a->kind == STORE_PARENT &&
			   b->kind != STORE_PARENT);
}

static void heap_up(struct store *s, size_t i)
{
	struct store_node *n = s->heap[i];

	while (i > 0) {
		size_t up = (i - 1) / 2;

		if (!heap_before(s, n, s->heap[up]))
			break;
		heap_place(s, i, s->heap[up]);
		i = up;
	}
	heap_place(s, i, n);
}

static void heap_down(struct store *s, size_t i)
{
	struct store_node *n = s->heap[i];

	for (;;) {
		size_t l = 2 * i + 1, m = i;
		struct store_node *best = n;

		if (l < s->heap_n && heap_before(s, s->heap[l], best)) {
			m = l;
			best = s->heap[l];
		}
		if (l + 1 < s->heap_n && heap_before(s, s->heap[l + 1], best))
			m = l + 1;
		if (m == i)
			break;
		heap_place(s, i, s->heap[m]);
		i = m;
	}
	heap_place(s, i, n);
}

/*
 * Set node @n's deadline to @deadline (0: no lease) and keep the heap in
 * step; the caller holds @n's owner lock.  The heap holds a reference
 * while @n is in it; leaving the heap drops it at once, never the last
 * one (the caller's hierarchy or reference still holds @n).
 */
void lease_set(struct store *s, struct store_node *n, uint64_t deadline)
{
	struct lease *le = lease_of(s, n);
	bool drop = false;

	if (!le)
		return; /* never leased: nothing to clear (a deadline needs
			 * lease_ensure() first) */
	lock(&s->heap_lock, LOCK_HEAP);
	atomic_store(&le->deadline, deadline);
	if (deadline && le->heap_idx == NOT_IN_HEAP) {
		if (s->heap_n < s->heap_cap) {
			store_node_ref(n);
			heap_place(s, s->heap_n++, n);
			heap_up(s, le->heap_idx);
		}
	} else if (deadline) {
		heap_up(s, le->heap_idx);
		heap_down(s, le->heap_idx);
	} else if (le->heap_idx != NOT_IN_HEAP) {
		size_t i = le->heap_idx;
		struct store_node *last = s->heap[--s->heap_n];

		le->heap_idx = NOT_IN_HEAP;
		if (last != n) {
			heap_place(s, i, last);
			heap_up(s, i);
			heap_down(s, lease_of(s, last)->heap_idx);
		}
		drop = true;
	}
	unlock(&s->heap_lock, LOCK_HEAP);
	if (drop)
		atomic_fetch_sub(&n->refs, 1);
	reaper_note(s, deadline);
}

/* A node leaving the hierarchy leaves the heap (its owner lock held). */
void lease_clear(struct store *s, struct store_node *n)
{
	lease_set(s, n, 0);
}

/* Reading, setting and renewing a lease ------------------------------------ */

int store_lease_get(struct store *s, struct store_node *n, struct store_lease *out)
{
	struct parent *p = as_parent(n);
	struct child *c = as_child(n);
	int rc;

	memset(out, 0, sizeof(*out));
	if (!p && !c)
		return -EINVAL;
	if (gone(s, n, store_now_ms(s)))
		return -ESTALE;
	node_lock(s, n);
	out->ttl_ms = ttl_of(s, n);
	out->child_ttl_ms = p ? p->child_ttl_ms : 0;
	out->deadline_ms = deadline_of(s, n);
	/* Removed since the check: its lease was cleared with it. */
	rc = is_dead(n) ? -ESTALE : 0;
	node_unlock(s, n);
	if (rc)
		memset(out, 0, sizeof(*out));
	return rc;
}

/*
 * Set (@set) or renew the lease of @n under its owner's lock: deadline =
 * now + ttl.  The node must be live at @now; renewals are refused while
 * draining.
 */
int lease_change(struct store *s, struct given *g, struct store_node *n, bool set,
		    uint64_t ttl_ms)
{
	struct parent *p = as_parent(n);
	struct child *c = as_child(n);
	uint64_t now = now_of(s, g), ttl;
	int rc = 0;

	if (!p && !c)
		return -EINVAL;
	/* A deadline must not wrap: see STORE_DURATION_MAX_MS. */
	if (set && ttl_ms > STORE_DURATION_MAX_MS)
		return -EINVAL;
	node_lock(s, n);
	ttl = set ? ttl_ms : ttl_of(s, n);
	if (gone(s, n, now) || (c && c->node.nlink == 0))
		rc = -ESTALE;
	else if (!set && ttl == 0)
		rc = 0; /* no lease to renew: a plain touch */
	else if (ttl && now > STORE_CLOCK_MAX_MS)
		rc = -EINVAL;
	else if (draining(s, g, p ? p->tenant : child_tenant(c)))
		rc = -EROFS;
	else if (ttl && lease_ensure(s, n))
		rc = -ENOMEM;
	else {
		if (p)
			snap_parent_cow(s, p);
		else
			snap_state_cow(s, c);
		struct lease *le = lease_of(s, n);

		if (set && le)
			le->ttl_ms = ttl;
		lease_set(s, n, ttl ? now + ttl : 0);
	}
	node_unlock(s, n);
	return rc ? refuse(s, rc) : 0;
}

int lease_child_ttl(struct store *s, struct store_node *n, uint64_t ttl_ms)
{
	struct parent *p = as_parent(n);
	int rc = 0;

	bucket_lock(p);
	if (gone(s, n, store_now_ms(s)))
		rc = -ESTALE;
	else
		p->child_ttl_ms = ttl_ms;
	bucket_unlock(p);
	return rc;
}

/* Contract in engine.h. */
size_t lease_due(struct store *s, uint64_t now, struct store_node **due,
		 size_t max)
{
	size_t nd = 0, stack[64], top = 0;

	lock(&s->heap_lock, LOCK_HEAP);
	if (s->heap_n && deadline_of(s, s->heap[0]) <= now)
		stack[top++] = 0;
	/* Depth first; a stack of 64 holds any path of a heap. */
	while (top && nd < max) {
		size_t i = stack[--top];

		due[nd] = s->heap[i];
		store_node_ref(due[nd++]);
		for (size_t c = 2 * i + 1; c <= 2 * i + 2; c++)
			if (c < s->heap_n && deadline_of(s, s->heap[c]) <= now &&
			    top < sizeof(stack) / sizeof(stack[0]))
				stack[top++] = c;
	}
	unlock(&s->heap_lock, LOCK_HEAP);
	return nd;
}

/* Contract in engine.h. */
void parent_set_child_ttl(struct parent *p, uint64_t ttl_ms)
{
	bucket_lock(p);
	p->child_ttl_ms = ttl_ms;
	bucket_unlock(p);
}

/* Contract in engine.h. */
int lease_load(struct store *s, struct store_node *n, uint64_t ttl_ms,
	       uint64_t deadline)
{
	int rc = 0;

	if (!ttl_ms && !deadline && !lease_of(s, n))
		return 0;
	node_lock(s, n);
	if (lease_ensure(s, n)) {
		rc = -ENOMEM;
	} else {
		lease_of(s, n)->ttl_ms = ttl_ms;
		lease_set(s, n, deadline);
	}
	node_unlock(s, n);
	return rc;
}
