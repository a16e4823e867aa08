/*
 * stress_store.c - concurrency tests of store/, built twice: under
 * ASan+UBSan and under TSan (`make build/unit/stress_store{,.tsan}`),
 * one binary of the files tests/unit/stress/stress_*.c (stress.h says
 * which mechanism each holds).  This one runs their tests as one group,
 * in the order below, and records the worker threads' failures.
 *
 * Two kinds of test:
 *
 *  - Races with one expected outcome, run in lock-step rounds (every
 *    thread waits at a barrier, then all hit the same key at once):
 *    exclusive create has one winner, unlink has one winner, a leave
 *    racing admissions through the old handle leaves no child behind, a
 *    shared state removed from one bucket while a link or rename adds it
 *    elsewhere lives exactly as long as a link reaches it, concurrent
 *    registrations in one parent are never lost (each is an entry of
 *    its own, never a shared list read, changed and written back).
 *
 *  - A mixed random workload: N threads for a bounded number of
 *    operations doing admissions, unlinks, links, renames, leaves,
 *    rejoins, departs, tenant cleanups, stage publications (REPLACE,
 *    APPEND, CAS), truncations, reads, listings, the kernel's inode
 *    table's traffic (fs/inode.c, as the adapter drives it) and
 *    clock ticks, on a few overlapping names in two tenants with small
 *    ceilings and quotas, so that links and renames collide and refusals
 *    happen.  Every return code is checked against the set the operation
 *    may return; content is written in uniform 8-byte blocks so a reader
 *    that saw a mix of two publications is caught.  After the threads
 *    join, store_check_all() must pass and the stats gauges must equal a
 *    recount through store_list() of every tenant and parent.
 *
 * Last, store_check_all() runs concurrently with the workload: it takes
 * every lock in order, so it must see a consistent store; and the event
 * stream of a workload of every transition replays to the store it left.
 * And a mirror of the shared store (redis/apply.c): what it applied of
 * the root log is read by transitions waiting for their outcome while
 * the follower applies more.
 *
 * Knobs: STRESS_ITERS (operations per thread, default 40000: ~3 s for
 * the whole binary under TSan on 2 cores), STRESS_SEED, and cmocka's
 * TEST_FILTER / TEST_SKIP globs.
 *
 * Worker threads never call cmocka's assertions (they longjmp to the
 * main thread's frame): they record failures, and the main thread
 * asserts after joining.  The clock is a manual atomic one so that
 * tombstones (and, in one run, child leases) age out while threads run.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "fs/inode.h"
#include "redis/mirror.h"
#include "store/store.h"
#include "tests/unit/unit.h"
#include "tests/unit/stress/stress.h"

/* Failure recording (worker threads) ---------------------------------- */

struct failures {
	pthread_mutex_t mu;
	long n;
	char first[512];
};

static struct failures g_fail = { PTHREAD_MUTEX_INITIALIZER, 0, "" };

void failf(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&g_fail.mu);
	if (g_fail.n++ == 0) {
		va_start(ap, fmt);
		vsnprintf(g_fail.first, sizeof g_fail.first, fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&g_fail.mu);
}

void failures_reset(void)
{
	pthread_mutex_lock(&g_fail.mu);
	g_fail.n = 0;
	g_fail.first[0] = '\0';
	pthread_mutex_unlock(&g_fail.mu);
}

void assert_no_failures(void)
{
	long n;

	pthread_mutex_lock(&g_fail.mu);
	n = g_fail.n;
	pthread_mutex_unlock(&g_fail.mu);
	if (n)
		fail_msg("%ld failure(s) in worker threads; first: %s", n,
			 g_fail.first);
}

int main(void)
{
	/* The parts' tests, in this order. */
	const struct {
		const struct CMUnitTest *tests;
		size_t n;
	} parts[] = {
		{ stress_race_tests, stress_race_ntests },
		{ stress_mixed_tests, stress_mixed_ntests },
		{ stress_lease_tests, stress_lease_ntests },
		{ stress_replay_tests, stress_replay_ntests },
		{ stress_mirror_tests, stress_mirror_ntests },
	};
	struct CMUnitTest tests[32];
	size_t n = 0;

	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		for (size_t k = 0; k < parts[i].n; k++) {
			assert_true(n < sizeof(tests) / sizeof(tests[0]));
			tests[n++] = parts[i].tests[k];
		}
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* TEST_FILTER / TEST_SKIP: glob patterns of test names to run / skip. */
	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	if (getenv("TEST_SKIP"))
		cmocka_set_skip_filter(getenv("TEST_SKIP"));
	return _cmocka_run_group_tests("stress_store", tests, n, NULL, NULL);
}
