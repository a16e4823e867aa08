/*
 * clock.c - the clocks of fs/: the deadlines its threads wait for, the
 * backoff of a thread that ran out of memory, and the manual clock of
 * -o testclock.
 *
 * Every condition variable of fs/ waits on CLOCK_MONOTONIC
 * (fs_watch_init makes them so), and so does every deadline here
 * (fs_deadline_in, fs_deadline_passed): a change of the wall clock never
 * ends a wait early nor makes it last.  The inval and echo threads,
 * when they cannot allocate, wait BACKOFF_MIN_MS before trying again,
 * doubling each time up to BACKOFF_MAX_MS (fs_backoff_next): a failure
 * delays them, it is never spun on.
 *
 * The manual clock is the store's clock under -o testclock
 * (fs_manual_clock, fs->clock_ms); a write to .clock moves it
 * (fs_clock_advance) and runs the expiries it made due before the write
 * returns, since the store starts no reaper on a manual clock.  On a
 * shared store the clock is the store's, and every mount's moves.
 *
 * It keeps no state but fs->clock_ms, an atomic, and takes no lock;
 * nothing here calls another file of fs/.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <time.h>

#include "fs/fs.h"

/* Out of memory in the inval or echo thread: wait this long before
 * trying again, doubling each time it fails again. */
#define BACKOFF_MIN_MS 1
#define BACKOFF_MAX_MS 250

/* Deadlines and backoff ---------------------------------------------------- */

/* CLOCK_MONOTONIC @ms from now (the clock of every condition of fs/). */
struct timespec fs_deadline_in(unsigned ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

bool fs_deadline_passed(const struct timespec *dl)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > dl->tv_sec ||
	       (now.tv_sec == dl->tv_sec && now.tv_nsec >= dl->tv_nsec);
}

/* The wait after one more failure to allocate, after waiting @ms. */
unsigned fs_backoff_next(unsigned ms)
{
	if (!ms)
		return BACKOFF_MIN_MS;
	return ms * 2 < BACKOFF_MAX_MS ? ms * 2 : BACKOFF_MAX_MS;
}

/* The manual clock -------------------------------------------------------- */

uint64_t fs_manual_clock(void *arg)
{
	return atomic_load(&((struct fs *)arg)->clock_ms);
}

int fs_clock_advance(struct fs *fs, uint64_t ms)
{
	uint_fast64_t now = atomic_load(&fs->clock_ms);

	/* A shared store's clock is the store's: every mount's moves. */
	if (store_is_shared(fs->store))
		return store_clock_advance(fs->store, ms);
	/* Bounded, so now + any duration stays a valid deadline (store.h);
	 * writers racing each other each see the clock they move. */
	do {
		if (ms > STORE_DURATION_MAX_MS || now > STORE_CLOCK_MAX_MS - ms)
			return -EINVAL;
	} while (!atomic_compare_exchange_weak(&fs->clock_ms, &now, now + ms));
	/* The store starts no reaper on a manual clock: what the move made
	 * due ends here, before the write returns. */
	store_reap_due(fs->store);
	return 0;
}
