/*
 * redis_world.h - a mount of a shared store under test, for the unit
 * tests of redis/ that drive one store on the test clock beside the
 * test's own connection (test_remote_clock.c, test_remote_ops.c,
 * test_remote_lock.c): the
 * world (its redis-server from redis_fixture.h, the store's instance,
 * the mount), its setup and teardown, mount(), and fcall() as another
 * mount would call the Functions library.  Include it after
 * tests/unit/unit.h and redis_fixture.h.
 */
#ifndef STATEFS_TESTS_REDIS_WORLD_H
#define STATEFS_TESTS_REDIS_WORLD_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "redis/redis.h"
#include "store/store.h"

#define META "statefs:{statefs}:meta"

struct world {
	struct redis_fixture redis; /* its server, the test's connection */
	char inst[24];             /* the store's instance */
	struct store *s;           /* the mount under test */
	unsigned opn;
};

/* cmocka's setup: a world whose redis-server is named after @name. */
static int world_setup(void **state, const char *name)
{
	struct world *w = calloc(1, sizeof(*w));

	if (!w)
		return -1;
	if (redis_fixture_start(&w->redis, name) != 0) {
		free(w);
		return -1;
	}
	*state = w;
	return 0;
}

static int teardown(void **state)
{
	struct world *w = *state;

	store_free(w->s);
	redis_fixture_stop(&w->redis);
	free(w);
	return 0;
}

/* Mount the store: testclock, at most @max_tenants tenants (0: the
 * default), tenants unused for @idle_ms not followed (0: every tenant
 * followed), a store of the tenant layout when @tenant.  Its instance
 * into w->inst. */
static void mount_store(struct world *w, uint64_t max_tenants,
			uint64_t idle_ms, bool tenant)
{
	struct store_limits l;
	struct store_remote cfg;
	char err[512];
	redisReply *r;

	store_limits_default(&l);
	l.testclock = true;
	if (max_tenants)
		l.max_tenants = max_tenants;
	store_remote_default(&cfg);
	cfg.kind = STORE_REMOTE_UNIX;
	snprintf(cfg.path, sizeof(cfg.path), "%s", w->redis.sock);
	cfg.timeout_ms = 60000;
	cfg.follow_idle_ms = idle_ms;
	cfg.layout_tenant = tenant;
	if (redis_store_new(&l, &cfg, &w->s, err, sizeof(err)) != 0)
		fail_msg("cannot mount: %s", err);
	r = redisCommand(w->redis.rc, "HGET %s instance", META);
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	snprintf(w->inst, sizeof(w->inst), "%s", r->str);
	freeReplyObject(r);
}

/* mount_store of the root layout. */
static inline void mount_idle(struct world *w, uint64_t max_tenants,
			      uint64_t idle_ms)
{
	mount_store(w, max_tenants, idle_ms, false);
}

/* mount_idle with every tenant followed: the engine alone, with no
 * kernel to say what it uses (redis/use.c; the bats suites test the
 * rest). */
static inline void mount(struct world *w, uint64_t max_tenants)
{
	mount_idle(w, max_tenants, 0);
}

/* FCALL @fn on the test's connection, as another mount: @nkeys keys
 * after the meta key, then the common arguments, then @args
 * (NULL-terminated).  The outcome must be OK; returns it. */
static redisReply *fcall(struct world *w, const char *fn, int nkeys, ...)
{
	const char *argv[32];
	char nk[16], opid[32];
	int argc = 0;
	va_list ap;
	redisReply *r;

	snprintf(nk, sizeof(nk), "%d", nkeys + 1);
	snprintf(opid, sizeof(opid), "t:%u", ++w->opn);
	argv[argc++] = "FCALL";
	argv[argc++] = fn;
	argv[argc++] = nk;
	argv[argc++] = META;
	va_start(ap, nkeys);
	for (int i = 0; i < nkeys; i++)
		argv[argc++] = va_arg(ap, const char *);
	argv[argc++] = w->inst;
	argv[argc++] = opid;
	argv[argc++] = "";
	for (const char *a; (a = va_arg(ap, const char *)) != NULL;)
		argv[argc++] = a;
	va_end(ap);
	r = redisCommandArgv(w->redis.rc, argc, argv, NULL);
	assert_non_null(r);
	if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
	    strcmp(r->element[0]->str, "OK") != 0)
		fail_msg("%s: %s", fn, r->type == REDIS_REPLY_ERROR ? r->str :
			 r->type == REDIS_REPLY_ARRAY ? r->element[0]->str : "?");
	return r;
}

#endif
