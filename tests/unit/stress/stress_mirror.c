/*
 * stress_mirror.c - a mirror of the shared store (redis/apply.c): what it
 * applied of the root log is read by transitions waiting for their
 * outcome while the follower applies more.
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

/* A mirror's root log position ----------------------------------------- */

#define ROOT_ENTRIES 20000

/* A root log entry "clock" of seq @seq, as XREAD gives its fields. */
struct root_entry {
	redisReply fields, f[10], *fp[10];
	char v[5][24];
};

static void root_entry_make(struct root_entry *x, uint64_t seq)
{
	static const char *const names[5] = { "seq", "op", "ms", "ns", "clock_ms" };

	memset(x, 0, sizeof(*x));
	snprintf(x->v[0], sizeof(x->v[0]), "%llu", (unsigned long long)seq);
	snprintf(x->v[1], sizeof(x->v[1]), "clock");
	snprintf(x->v[2], sizeof(x->v[2]), "0");
	snprintf(x->v[3], sizeof(x->v[3]), "0");
	snprintf(x->v[4], sizeof(x->v[4]), "%llu", (unsigned long long)seq);
	for (int i = 0; i < 5; i++) {
		x->f[2 * i].type = REDIS_REPLY_STRING;
		x->f[2 * i].str = (char *)names[i];
		x->f[2 * i].len = strlen(names[i]);
		x->f[2 * i + 1].type = REDIS_REPLY_STRING;
		x->f[2 * i + 1].str = x->v[i];
		x->f[2 * i + 1].len = strlen(x->v[i]);
	}
	for (int i = 0; i < 10; i++)
		x->fp[i] = &x->f[i];
	x->fields.type = REDIS_REPLY_ARRAY;
	x->fields.elements = 10;
	x->fields.element = x->fp;
}

struct root_run {
	struct store *s;
	atomic_bool done;
};

/* The follower's part: apply root entries 1..ROOT_ENTRIES in order. */
static void *root_applier(void *arg)
{
	struct root_run *r = arg;

	for (uint64_t seq = 1; seq <= ROOT_ENTRIES; seq++) {
		struct root_entry x;
		struct entry e;

		root_entry_make(&x, seq);
		if (entry_parse(&x.fields, &e) != 0 ||
		    mirror_apply(r->s, 0, &e) != 0) {
			failf("root entry %llu does not apply",
			      (unsigned long long)seq);
			break;
		}
	}
	atomic_store(&r->done, true);
	return NULL;
}

/* A transition's part: what was applied of the root log, read while the
 * follower applies, never goes back and ends at the last entry. */
static void test_mirror_root_position(void **state)
{
	struct store_limits l;
	struct root_run r = { .s = NULL };
	uint64_t seen = 0, at;
	bool gone, done;
	pthread_t th;

	(void)state;
	store_limits_default(&l);
	l.testclock = true;
	assert_int_equal(store_new(&l, NULL, &r.s), 0);
	assert_int_equal(mirror_attach(r.s, "m", 0), 0);
	failures_reset();
	atomic_store(&r.done, false);
	assert_int_equal(pthread_create(&th, NULL, root_applier, &r), 0);
	do {
		done = atomic_load(&r.done);
		assert_int_equal(mirror_applied(r.s, 0, &at, &gone), 0);
		if (at < seen)
			failf("the root position went back from %llu to %llu",
			      (unsigned long long)seen, (unsigned long long)at);
		seen = at;
		sched_yield();
	} while (!done);
	pthread_join(th, NULL);
	assert_no_failures();
	assert_int_equal(seen, ROOT_ENTRIES);
	store_free(r.s);
}

const struct CMUnitTest stress_mirror_tests[] = {
	cmocka_unit_test(test_mirror_root_position),
};
const size_t stress_mirror_ntests = sizeof(stress_mirror_tests) / sizeof(stress_mirror_tests[0]);
