/*
 * remote_clock.c - a mirror's clock and what ends with it: the estimate
 * of the shared store's clock that the mirror runs on, the test clock
 * moved through Redis, and expiry, which only Redis does.
 *
 * What it owns
 * ------------
 * The estimate (remote->offset_ms and remote->floor_ms, atomics): local
 * CLOCK_MONOTONIC plus the largest offset a reply's now_ms gave (the
 * smallest delay seen), never going backwards; under testclock, the
 * store's clock_ms as the root log and the replies tell it.  A mirror
 * expires nothing by itself: when its deadline heap says something is
 * due (or a drain runs), store_expire() asks Redis (sfs_expire of each
 * tenant, then of the store's scope), and the entries that come back
 * remove what went.
 *
 * Threads and locks
 * -----------------
 * The clock is read on any thread, without a lock.  Expiry runs on the
 * store's reaper thread (store/reaper.c) and after a .clock write; each
 * call and each wait as store/remote_call.c says, no store lock held.
 */
#include "store/internal.h"
#include "store/mirror.h"
#include "store/shared.h"

#include <errno.h>

/* The clock ------------------------------------------------------------------ */

uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The mirror's store clock: the estimate of the store's. */
uint64_t remote_clock(void *arg)
{
	struct remote *r = arg;
	uint64_t est, floor = atomic_load(&r->floor_ms);

	if (r->testclock) {
		est = r->s && r->s->mirror ? mirror_testclock(r->s) : 0;
	} else {
		est = (uint64_t)((int64_t)mono_ms() + atomic_load(&r->offset_ms));
	}
	while (est > floor &&
	       !atomic_compare_exchange_weak(&r->floor_ms, &floor, est))
		;
	return est > floor ? est : floor;
}

void remote_saw_now(struct store *s, uint64_t now_ms)
{
	struct remote *r = s->remote;
	int_fast64_t off = (int64_t)now_ms - (int64_t)mono_ms();
	int_fast64_t cur = atomic_load(&r->offset_ms);
	uint64_t floor = atomic_load(&r->floor_ms);

	if (!r->testclock) {
		/* The smallest delay seen is the best estimate: a reply
		 * that travelled longer says the store is earlier than it
		 * is.  The offset only grows. */
		while (off > cur &&
		       !atomic_compare_exchange_weak(&r->offset_ms, &cur, off))
			;
	}
	while (now_ms > floor &&
	       !atomic_compare_exchange_weak(&r->floor_ms, &floor, now_ms))
		;
}

unsigned remote_expire(struct store *s, unsigned budget)
{
	size_t n;
	uint64_t *ids = remote_tenants(s, &n);
	struct args a = { .n = 0 };
	redisReply *rep;
	unsigned done = 0;
	uint64_t aged = 0;
	bool draining;

	a_u64(&a, budget ? budget : 1);
	/* At most @budget removals in all: each tenant may take what the
	 * ones before it left. */
	for (size_t i = 0; i < n && done < budget; i++) {
		struct args left = { .n = 0 };
		char key[160];
		int rc;

		a_u64(&left, budget - done);
		remote_tenant_key(s, ids[i], key, sizeof(key));
		rep = NULL;
		rc = remote_fcall(s, "sfs_expire", true, 1,
				  (const char *[]){ key }, left.n, left.v, NULL,
				  &rep);
		if (rc == 0) {
			done += (unsigned)out_u64(rep, 3);
			aged += out_u64(rep, 4);
		}
		settle(s, ids[i], rc, rep);
		if (rep)
			freeReplyObject(rep);
	}
	/* The store's scope: tombstones store-wide and a drain of the
	 * store.  Tombstones aged by any of these calls, and the clear of
	 * a drain of the store, are entries in the logs of other tenants
	 * than the one called: those logs are waited for too, as after
	 * store_drain, so what went is gone from the mirror on return. */
	draining = atomic_load(&s->state) == STORE_DRAINING;
	rep = NULL;
	if (remote_fcall(s, "sfs_expire", true, 0, NULL, a.n, a.v, NULL,
			 &rep) == 0 &&
	    wait_seq(s, 0, out_u64(rep, 2)) == 0 &&
	    (draining || aged + out_u64(rep, 4) > 0) && ids)
		remote_wait_tenants(s, ids, n);
	if (rep)
		freeReplyObject(rep);
	free(ids);
	return done;
}

unsigned remote_expire_due(struct store *s, unsigned budget)
{
	if (store_next_deadline(s) > store_now_ms(s) &&
	    atomic_load(&s->state) != STORE_DRAINING &&
	    atomic_load(&s->tenants_draining) == 0)
		return 0;
	return remote_expire(s, budget);
}

int remote_clock_advance(struct store *s, uint64_t ms)
{
	struct args a = { .n = 0 };
	redisReply *rep = NULL;
	int rc;

	a_u64(&a, ms);
	rc = remote_fcall(s, "sfs_clock_advance", true, 0, NULL, a.n, a.v,
			  NULL, &rep);
	if (rc == 0) {
		rc = wait_seq(s, 0, out_u64(rep, 2));
		remote_saw_now(s, out_u64(rep, 3));
	}
	if (rep)
		freeReplyObject(rep);
	return rc;
}

int store_clock_advance(struct store *s, uint64_t ms)
{
	int rc;

	if (!s->remote)
		return -ENOTSUP;
	rc = remote_clock_advance(s, ms);
	/* Then what is due goes, as the embedded store's reaper does when
	 * the manual clock moves. */
	if (rc == 0)
		remote_expire(s, 4096);
	return rc;
}
