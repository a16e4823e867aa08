/*
 * test_remote_clock.c - the clock and expiry of a mount on a shared store
 * (redis/clock.c), a real mount (redis_store_new) on a real
 * redis-server: a move of the store's clock removes what is due in
 * every tenant, however many the store has; a pass of the reaper
 * removes at most its budget.
 *
 * Each test starts its own redis-server on a unix socket in a temporary
 * directory (no TCP, no persistence; tests/unit/redis/redis_fixture.h); the
 * teardown unmounts, kills it, and it dies with this process
 * (PR_SET_PDEATHSIG).  What the test makes in bulk it makes through a
 * connection of its own (another mount, as far as the store can tell);
 * the mount under test runs on the store's manual clock (testclock), so
 * deadlines are exact.  Waits are bounded by store_timeout, set
 * generously for a loaded machine.
 */
#define _GNU_SOURCE
#include "tests/unit/unit.h"
#include "tests/unit/redis/redis_fixture.h"
#include "tests/unit/redis/redis_world.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "redis/redis.h"
#include "store/store.h"

static int setup(void **state)
{
	return world_setup(state, "rclock");
}

/* Tenant @name with one parent "p" whose lease is @ttl ms. */
static void tenant_with_leased_parent(struct world *w, const char *name,
				      const char *ttl)
{
	char key[64], ino[24];
	redisReply *r;

	r = fcall(w, "sfs_mkdir_tenant", 0, name, "0", "0", "493", NULL);
	snprintf(key, sizeof(key), "statefs:{statefs.t%lld}:t",
		 r->element[3]->integer);
	freeReplyObject(r);
	r = fcall(w, "sfs_join", 1, key, "p", "0", "0", "493", NULL);
	snprintf(ino, sizeof(ino), "%lld", r->element[3]->integer);
	freeReplyObject(r);
	freeReplyObject(fcall(w, "sfs_set_ttl", 1, key, "parent", ino, ttl, NULL));
}

static uint64_t parents(struct world *w)
{
	struct store_stats st;

	assert_int_equal(store_stats(w->s, NULL, &st), 0);
	return st.parents;
}

/* More tenants than a thousand: a move of the clock past every lease
 * removes every leased parent, in every tenant. */
static void test_clock_advance_expires_every_tenant(void **state)
{
	struct world *w = *state;
	const int ntenants = 1100;

	mount(w, 2048);
	for (int i = 0; i < ntenants; i++) {
		char name[16];

		snprintf(name, sizeof(name), "t%04d", i);
		tenant_with_leased_parent(w, name, "1000");
	}
	assert_int_equal(store_sync(w->s, NULL), 0);
	assert_int_equal(parents(w), ntenants);
	assert_int_equal(store_clock_advance(w->s, 1000), 0);
	assert_int_equal(parents(w), 0);
}

/* A pass of the reaper removes at most its budget, whichever tenants
 * what is due is in (store_expire's contract). */
static void test_expire_keeps_to_its_budget(void **state)
{
	struct world *w = *state;

	mount(w, 1024);
	tenant_with_leased_parent(w, "acme", "1000");
	tenant_with_leased_parent(w, "beta", "1000");
	/* The store's clock moves (another mount's .clock): nothing has
	 * been expired yet. */
	freeReplyObject(fcall(w, "sfs_clock_advance", 0, "1000", NULL));
	assert_int_equal(store_sync(w->s, NULL), 0);
	assert_int_equal(parents(w), 2);
	assert_int_equal(store_expire(w->s, 1), 1);
	assert_int_equal(parents(w), 1);
	assert_int_equal(store_expire(w->s, 1), 1);
	assert_int_equal(parents(w), 0);
	assert_int_equal(store_expire(w->s, 1), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_clock_advance_expires_every_tenant, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_expire_keeps_to_its_budget, setup, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
