/*
 * tomb.c - departed tombstones: the generation a parent's name had when
 * it left, kept for tombstone_ttl so a rejoin takes the next one.
 *
 * What it owns
 * ------------
 * Each tenant's tombstones (tenant->tombs, name -> struct tomb, under the
 * tenant's lock) and one store-wide queue of them, oldest deadline first
 * (s->tomb_fifo, under s->tomb_lock): every tombstone has the same TTL,
 * so the order they are filed in is the order they age out, and the
 * reaper takes them from the head, never scanning a table.  Tombstones
 * count in max_tombstones and in the tenant's share of it (s->tombs_n,
 * tenant->tombs_n), reserved before one is filed (tomb_reserve_locked)
 * except for an expiry, which cannot be refused.
 *
 * Locks
 * -----
 * Every function but tombs_reap() and tombs_free() expects its tenant's
 * lock held (LOCK_TENANT), and takes the queue's lock (LOCK_TOMBQ, a
 * leaf) only to link or unlink; filing one wakes the reaper, after the
 * queue's lock is let go, if it is the earliest deadline (reaper_note:
 * LOCK_REAPER, a leaf); one that changes the tenant's table copies
 * the tenant for a snapshot being taken first (snap_tenant_cow, which
 * takes LOCK_SNAP_ROWS).  tombs_reap() runs inside a transition (the
 * world lock shared) holding nothing else: it peeks at the queue's head
 * under the queue's lock, then takes that tombstone's tenant lock and the
 * queue's again to remove it if it is still the head and due.
 * tombs_free() runs in store_free(), with no other thread left.
 */
#include "store/internal.h"

#include <errno.h>

/* Queue @tb as the newest tombstone (its tenant's lock held). */
static void tomb_enqueue_locked(struct store *s, struct tomb *tb, uint64_t now)
{
	store_assert_held(LOCK_TENANT);
	tb->deadline_ms = now + s->lim.tombstone_ttl_ms;
	lock(&s->tomb_lock, LOCK_TOMBQ);
	DL_APPEND(s->tomb_fifo, tb);
	unlock(&s->tomb_lock, LOCK_TOMBQ);
	reaper_note(s, tb->deadline_ms);
}

/* A departed-again parent's tombstone starts its age over. */
void tomb_refresh_locked(struct store *s, struct tomb *tb, uint64_t now)
{
	store_assert_held(LOCK_TENANT);
	snap_tenant_cow(s, tb->tenant);
	lock(&s->tomb_lock, LOCK_TOMBQ);
	DL_DELETE(s->tomb_fifo, tb);
	unlock(&s->tomb_lock, LOCK_TOMBQ);
	tomb_enqueue_locked(s, tb, now);
}

/* Remove and free tombstone @tb of tenant @t (t->lock held). */
void tomb_drop_locked(struct store *s, struct tenant *t, struct tomb *tb)
{
	store_assert_held(LOCK_TENANT);
	snap_tenant_cow(s, t);
	HASH_DEL(t->tombs, tb);
	lock(&s->tomb_lock, LOCK_TOMBQ);
	DL_DELETE(s->tomb_fifo, tb);
	unlock(&s->tomb_lock, LOCK_TOMBQ);
	gauge_sub(&t->tombs_n, 1, "tenant tombstones");
	gauge_sub(&s->tombs_n, 1, "tombstones");
	free(tb);
}

/* The live tombstone of @name in @t, aging it out if due (t->lock held). */
struct tomb *tomb_find_locked(struct store *s, struct tenant *t,
			      const char *name, uint64_t now)
{
	struct tomb *tb;

	store_assert_held(LOCK_TENANT);
	HASH_FIND_STR(t->tombs, name, tb);
	if (tb && tb->deadline_ms <= now) {
		tomb_drop_locked(s, t, tb);
		tb = NULL;
	}
	return tb;
}

/* Drop every tombstone of @t (tenant cleanup; t->lock held). */
void tombs_drop_all_locked(struct store *s, struct tenant *t)
{
	struct tomb *tb, *tmp;

	store_assert_held(LOCK_TENANT);
	HASH_ITER(hh, t->tombs, tb, tmp)
		tomb_drop_locked(s, t, tb);
}

/* Free a dead tenant's tombstones without accounting (store_free). */
void tombs_free(struct tenant *t)
{
	struct tomb *tb, *tmp;

	HASH_ITER(hh, t->tombs, tb, tmp) {
		HASH_DEL(t->tombs, tb);
		free(tb);
	}
}

/*
 * Age out due tombstones store-wide, oldest first, at most @budget of
 * them.  Work is proportional to what expires (the queue is in deadline
 * order), never a scan.  The caller holds no lock (a transition).
 * Returns how many were removed.
 */
unsigned tombs_reap(struct store *s, uint64_t now, unsigned budget)
{
	unsigned done = 0;

	for (uint64_t tries = 0; done < budget && tries < 2 * (uint64_t)budget;
	     tries++) {
		struct tomb *tb;
		struct tenant *t;
		bool due;

		lock(&s->tomb_lock, LOCK_TOMBQ);
		tb = s->tomb_fifo;
		if (!tb || tb->deadline_ms > now) {
			unlock(&s->tomb_lock, LOCK_TOMBQ);
			break;
		}
		/* A queued tombstone's tenant is alive: cleanup empties
		 * the queue of its tombstones before it lets go. */
		t = tb->tenant;
		store_node_ref(&t->node);
		unlock(&s->tomb_lock, LOCK_TOMBQ);

		lock(&t->lock, LOCK_TENANT);
		lock(&s->tomb_lock, LOCK_TOMBQ);
		tb = s->tomb_fifo;
		due = tb && tb->tenant == t && tb->deadline_ms <= now;
		unlock(&s->tomb_lock, LOCK_TOMBQ);
		if (due) {
			tomb_drop_locked(s, t, tb);
			done++;
		}
		unlock(&t->lock, LOCK_TENANT);
		store_node_unref(s, &t->node);
	}
	return done;
}

struct tomb *tomb_new(const char *name)
{
	size_t nlen = strlen(name);
	struct tomb *tb = st_calloc(1, sizeof(*tb) + nlen + 1);

	if (tb)
		memcpy(tb->name, name, nlen + 1);
	return tb;
}

/* File tombstone @tb for @t, reserved in the pool and the tenant's
 * share (t->lock held).  -ENOMEM releases the reservations. */
int tomb_insert_locked(struct store *s, struct tenant *t,
		       struct tomb *tb, uint64_t gen, uint64_t now)
{
	store_assert_held(LOCK_TENANT);
	snap_tenant_cow(s, t);
	tb->generation = gen;
	tb->tenant = t;
	hash_oom = 0;
	HASH_ADD_KEYPTR(hh, t->tombs, tb->name, strlen(tb->name), tb);
	if (hash_oom) {
		gauge_sub(&t->tombs_n, 1, "tenant tombstones");
		gauge_sub(&s->tombs_n, 1, "tombstones");
		return -ENOMEM;
	}
	tomb_enqueue_locked(s, tb, now);
	return 0;
}

/* Reserve one tombstone for @t in the pool, then in its share (t->lock
 * held).  0, -ENOSPC or -EDQUOT (nothing reserved). */
int tomb_reserve_locked(struct store *s, struct tenant *t)
{
	store_assert_held(LOCK_TENANT);
	if (!reserve(&s->tombs_n, 1, s->lim.max_tombstones))
		return -ENOSPC;
	if (!reserve(&t->tombs_n, 1, s->lim.tenant_max_tombstones)) {
		gauge_sub(&s->tombs_n, 1, "tombstones");
		return -EDQUOT;
	}
	return 0;
}

/* Contract in engine.h. */
void tomb_age(struct store *s, struct tenant *t, const char *name)
{
	struct tomb *tb;

	world_enter(s);
	lock(&t->lock, LOCK_TENANT);
	HASH_FIND_STR(t->tombs, name, tb);
	if (tb)
		tomb_drop_locked(s, t, tb);
	unlock(&t->lock, LOCK_TENANT);
	world_exit(s);
}

/* Contract in engine.h. */
int tomb_load(struct store *s, struct tenant *t, const char *name,
	      uint64_t gen, uint64_t deadline)
{
	struct tomb *tb;
	int rc;

	if (deadline < s->lim.tombstone_ttl_ms)
		return -EPROTO;
	tb = tomb_new(name);
	if (!tb)
		return -ENOMEM;
	world_enter(s);
	lock(&t->lock, LOCK_TENANT);
	tomb_reserve_locked(s, t);
	rc = tomb_insert_locked(s, t, tb, gen, deadline - s->lim.tombstone_ttl_ms);
	unlock(&t->lock, LOCK_TENANT);
	world_exit(s);
	if (rc)
		free(tb);
	return rc;
}

/* Contract in engine.h. */
void tombs_drop_all(struct store *s, struct tenant *t)
{
	world_enter(s);
	lock(&t->lock, LOCK_TENANT);
	tombs_drop_all_locked(s, t);
	unlock(&t->lock, LOCK_TENANT);
	world_exit(s);
}
