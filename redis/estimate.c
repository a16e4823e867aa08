/*
 * estimate.c - the engine's estimate of the shared store's clock, the
 * ground of redis/: the clock a mirror runs on, learned from every
 * outcome's now_ms, and a lower bound of the server's real time, which
 * mutations' deadlines are on.
 *
 * What it owns
 * ------------
 * The estimate (remote->offset_ms and remote->floor_ms, atomics): local
 * CLOCK_MONOTONIC plus the largest offset a reply's now_ms gave (the
 * smallest delay seen), never going backwards; under testclock, the
 * store's clock_ms as the root log and the replies tell it.  Beside it,
 * whatever the store's clock, a lower bound of the server's real time
 * (remote->real_off_ms, real_at_ms: from the replies off testclock, from
 * TIME when the latest is stale), which mutations' deadlines are on
 * (redis/call.c).  It calls only the index (the test clock the root log
 * told) and the transport (TIME): every other file of redis/ may call
 * it.
 *
 * Threads and locks
 * -----------------
 * The clock is read on any thread, without a lock; the real time's
 * sample under remote->lock (LOCK_ENGINE_STATE, held alone), never across
 * the network.
 */
#include "store/engine.h"
#include "redis/mirror.h"
#include "redis/internal.h"

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
		est = r->s && mirror_of(r->s) ? mirror_testclock(r->s) : 0;
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
	struct remote *r = remote_of(s);
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
	/* Off testclock the store's clock is TIME itself. */
	if (!r->testclock)
		remote_saw_real(r, now_ms, mono_ms());
}

/* The server's real time ------------------------------------------------------ */

/*
 * A sample (TIME R received at local time A) bounds the server's real
 * time from below at any later local time M: R + (M - A), for R was read
 * before the reply left and both clocks run at one rate (within
 * REAL_ERROR_MS, see redis/internal.h).  Of two samples the one with the larger
 * offset R - A is the tighter bound (it travelled faster); a newer one
 * replaces it anyway once it is a second old, so that the rates' error
 * grows from a recent start.
 */
void remote_saw_real(struct remote *r, uint64_t real_ms, uint64_t at_ms)
{
	int64_t off = (int64_t)real_ms - (int64_t)at_ms;

	lock(&r->lock, LOCK_ENGINE_STATE);
	if (r->real_at_ms == 0 || off >= r->real_off_ms ||
	    at_ms > r->real_at_ms + 1000) {
		r->real_off_ms = off;
		r->real_at_ms = at_ms ? at_ms : 1;
	}
	unlock(&r->lock, LOCK_ENGINE_STATE);
}

int remote_real_ms(struct store *s, uint64_t *real_ms)
{
	struct remote *r = remote_of(s);
	const char *av[] = { "TIME" };
	redisReply *rep = NULL;
	uint64_t now = mono_ms();
	bool fresh;
	int rc;

	lock(&r->lock, LOCK_ENGINE_STATE);
	fresh = r->real_at_ms != 0 && now - r->real_at_ms <= REAL_SAMPLE_MAX_MS;
	*real_ms = (uint64_t)(r->real_off_ms + (int64_t)now);
	unlock(&r->lock, LOCK_ENGINE_STATE);
	if (fresh)
		return 0;
	/* Under testclock no outcome tells the server's real time: ask. */
	rc = rconn_pool_call(r->pool, 0, 1, av, NULL, &rep);
	if (rc)
		return rc == -ENOMEM ? rc : -EIO;
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
	    rep->element[0]->type != REDIS_REPLY_STRING ||
	    rep->element[1]->type != REDIS_REPLY_STRING) {
		if (rep->type == REDIS_REPLY_ERROR)
			fprintf(stderr, "statefs: TIME: %s\n", rep->str);
		freeReplyObject(rep);
		return -EIO;
	}
	remote_saw_real(r, strtoull(rep->element[0]->str, NULL, 10) * 1000 +
			strtoull(rep->element[1]->str, NULL, 10) / 1000,
			mono_ms());
	freeReplyObject(rep);
	now = mono_ms();
	lock(&r->lock, LOCK_ENGINE_STATE);
	*real_ms = (uint64_t)(r->real_off_ms + (int64_t)now);
	unlock(&r->lock, LOCK_ENGINE_STATE);
	return 0;
}
