/*
 * reaper.c - when things end on their own: the reaper thread, and the
 * passes it runs.
 *
 * What it owns
 * ------------
 * The policy of expiry: the store removes a node past its deadline (a
 * child as by unlink, a parent as by rmdir), ages out its tombstones and
 * ends a drain whose window is over without anybody calling in, so they
 * happen on time.  A node past its deadline is gone whether or not the
 * reaper has run (gone(), internal.h): its pace is never seen, only what
 * the kernel, .events and .stats are told.
 *
 *  - store_expire() is one pass: at most a budget of removals, oldest
 *    deadline first, taken from the lease heap (lease.c) and the
 *    tombstone queue (tomb.c), then the drains that are due.
 *  - store_reap_due() runs passes until nothing due is left: the reaper
 *    thread's work, and what a manual clock (-o testclock, which never
 *    starts the thread) runs when it is moved.
 *  - The thread (store_reaper_start) sleeps until the earliest deadline
 *    (store_next_deadline: leases, tombstones, drains).  A transition
 *    that sets an earlier one wakes it (reaper_note, from lease_set(),
 *    the tombstone queue and a drain's start), so with nothing due it
 *    never wakes at all.
 *
 * The wake-up cannot be lost: the thread publishes the deadline it will
 * sleep until (s->reap_at) and then reads the earliest deadline again; a
 * setter files its deadline and then reads s->reap_at (both sequentially
 * consistent).  So either the setter sees the thread's deadline and wakes
 * it, or the thread's second look finds the setter's deadline.  While the
 * thread runs a pass, s->reap_at is 0 and nobody needs to wake it.
 *
 * Locks
 * -----
 * s->reap_lock (LOCK_REAPER, a leaf) guards the thread's wake-ups; the
 * thread holds it only to wait, setters only to signal (with their own
 * transition's locks held, no leaf among them).  store_expire() holds the
 * world lock shared and expires each due node with the locks its removal
 * takes (parent_expire: tenant, then bucket; child_expire: the buckets
 * that link the state, then its stripe); store_next_deadline() takes the
 * heap lock, the tombstone queue's and the store lock one after the
 * other, never two at once.  The thread calls both with no lock held.
 */
#define _GNU_SOURCE
#include "store/internal.h"

#include <errno.h>

/* Removals per pass: between passes other transitions get the locks. */
#define REAP_BUDGET 512
/* A pass that left something due (an entry it could not take yet): look
 * again after this long, rather than at once. */
#define REAP_RETRY_MS 250

/* One pass ----------------------------------------------------------------- */

/* Expire one due node (a reference held by the caller). */
static int expire_one(struct store *s, struct store_node *n, uint64_t now)
{
	if (n->kind == STORE_PARENT)
		return parent_expire(s, NULL, as_parent(n), now);
	return child_expire(s, NULL, as_child(n), now);
}

/* The embedded store's pass (struct store_ops's expire; store_expire). */
unsigned reaper_expire(struct store *s, unsigned budget)
{
	uint64_t now = store_now_ms(s);
	unsigned done = 0;

	world_enter(s);
	for (uint64_t tries = 0; done < budget && tries < 2 * (uint64_t)budget;
	     tries++) {
		struct store_node *n = NULL;

		lock(&s->heap_lock, LOCK_HEAP);
		if (s->heap_n && deadline_of(s, s->heap[0]) <= now) {
			n = s->heap[0];
			store_node_ref(n);
		}
		unlock(&s->heap_lock, LOCK_HEAP);
		if (!n)
			break;
		done += (unsigned)expire_one(s, n, now);
		store_node_unref(s, n);
	}
	tombs_reap(s, now, budget);
	world_exit(s);
	event_hook_run(s);
	drains_settle_all(s);
	return done;
}

uint64_t store_next_deadline(struct store *s)
{
	uint64_t next = UINT64_MAX;

	lock(&s->heap_lock, LOCK_HEAP);
	if (s->heap_n)
		next = deadline_of(s, s->heap[0]);
	unlock(&s->heap_lock, LOCK_HEAP);
	lock(&s->tomb_lock, LOCK_TOMBQ);
	if (s->tomb_fifo && s->tomb_fifo->deadline_ms < next)
		next = s->tomb_fifo->deadline_ms;
	unlock(&s->tomb_lock, LOCK_TOMBQ);
	if (atomic_load(&s->state) == STORE_DRAINING &&
	    atomic_load(&s->drain_deadline) < next)
		next = atomic_load(&s->drain_deadline);
	if (atomic_load(&s->tenants_draining) > 0) {
		lock(&s->lock, LOCK_STORE);
		for (struct tenant *t = s->tenants; t; t = t->hh.next)
			if (atomic_load(&t->drain_state) == STORE_DRAINING &&
			    atomic_load(&t->drain_deadline) < next)
				next = atomic_load(&t->drain_deadline);
		unlock(&s->lock, LOCK_STORE);
	}
	return next;
}

unsigned store_reap_due(struct store *s)
{
	unsigned total = 0, n;

	do {
		n = store_expire(s, REAP_BUDGET);
		total += n;
	} while (n == REAP_BUDGET);
	return total;
}

/* The embedded store's settling before a drain's state is read (struct
 * store_ops's expire_due): leases past their deadline go first (an
 * expired child no longer keeps a drain running), then the drains due. */
void drain_expire_due(struct store *s, struct store_node *tenant, uint64_t now)
{
	struct tenant *t = tenant ? as_tenant(tenant) : NULL;

	if (store_next_deadline(s) <= now)
		store_expire(s, 4096);
	if (drain_due(s, NULL, now))
		drain_settle(s, NULL, false);
	if (t && drain_due(s, t, now))
		drain_settle(s, t, false);
}

/* The thread -------------------------------------------------------------- */

static void *reaper_main(void *arg)
{
	struct store *s = arg;

	pthread_setname_np(pthread_self(), "statefs-reaper");
	lock(&s->reap_lock, LOCK_REAPER);
	while (!s->reap_stop) {
		uint64_t next, now;

		s->reap_kicked = false;
		atomic_store(&s->reap_at, 0);
		unlock(&s->reap_lock, LOCK_REAPER);
		store_reap_due(s);
		next = store_next_deadline(s);
		atomic_store(&s->reap_at, next);
		/* Set while reap_at was 0: nobody woke us for it. */
		if (store_next_deadline(s) < next)
			next = 0;
		now = store_now_ms(s);
		lock(&s->reap_lock, LOCK_REAPER);
		if (s->reap_stop || s->reap_kicked || next == 0)
			continue;
		if (next == UINT64_MAX) {
			pthread_cond_wait(&s->reap_cond, &s->reap_lock);
		} else {
			uint64_t ms = next > now ? next - now : REAP_RETRY_MS;
			struct timespec ts;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec += (time_t)(ms / 1000);
			ts.tv_nsec += (long)(ms % 1000) * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&s->reap_cond, &s->reap_lock,
					       &ts);
		}
	}
	unlock(&s->reap_lock, LOCK_REAPER);
	return NULL;
}

int store_reaper_start(struct store *s)
{
	if (s->reap_started || s->lim.testclock)
		return 0;
	s->reap_stop = false;
	if (pthread_create(&s->reap_thread, NULL, reaper_main, s) != 0)
		return -EAGAIN;
	s->reap_started = true;
	return 0;
}

void store_reaper_stop(struct store *s)
{
	if (!s->reap_started)
		return;
	lock(&s->reap_lock, LOCK_REAPER);
	s->reap_stop = true;
	pthread_cond_signal(&s->reap_cond);
	unlock(&s->reap_lock, LOCK_REAPER);
	pthread_join(s->reap_thread, NULL);
	s->reap_started = false;
	atomic_store(&s->reap_at, 0);
}
