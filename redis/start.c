/*
 * start.c - a mount's start on a shared store: the pool opened and the
 * Functions library loaded (redis/library.c), sfs_init
 * (redis/instance.c), the mirror made and loaded from the dumps
 * (redis/load.c), the follower started (redis/follow.c), and the store
 * given the engine's table (redis_ops, redis/ops.c).  Its stop is
 * redis/stop.c's, what .stats shows of it redis/stats.c's.
 *
 * What it owns
 * ------------
 * The making of struct remote (redis/internal.h).  It is the engine's
 * top: it calls the other files, none calls it (the table's slots,
 * close included, are below it).
 *
 * Threads and locks
 * -----------------
 * redis_store_new() runs before the store has any other thread.
 */
#include "store/engine.h"
#include "redis/mirror.h"
#include "redis/internal.h"
#include "redis/statefs_lua.h"

#include <errno.h>

/* The pool's connections, for the threads that serve requests. */
#define POOL_SIZE 8

int redis_store_new(const struct store_limits *limits,
		     const struct store_remote *cfg, struct store **out,
		     char *err, size_t errlen)
{
	struct store_limits l = *limits;
	struct store_clock clock;
	struct remote *r;
	struct store *s = NULL;
	char inst[17];
	int rc;

	err[0] = '\0';
	if (!cfg || cfg->kind == STORE_REMOTE_NONE)
		return -EINVAL;
	r = st_calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->cfg = *cfg;
	r->idle_ms = cfg->follow_idle_ms;
	r->gather_ms = cfg->follow_gather_ms;
	explicit_bzero(r->cfg.password, sizeof(r->cfg.password));
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->applied, NULL);
	instance_random_hex(r->mount, 16);
	snprintf(r->meta, sizeof(r->meta), "%s:{%s}:meta", cfg->prefix, cfg->prefix);
	snprintf(r->rootlog, sizeof(r->rootlog), "%s:{%s}:log", cfg->prefix,
		 cfg->prefix);
	snprintf(r->rootnews, sizeof(r->rootnews), "%s:{%s}:news",
		 cfg->prefix, cfg->prefix);
	r->wake[0] = r->wake[1] = -1;
	rc = rconn_pool_open(cfg, POOL_SIZE, &r->pool, err, errlen);
	if (rc == 0)
		rc = rconn_library_ensure(r->pool, "statefs", store_statefs_lua,
					  LIBVERSION, err, errlen);
	/* The shares as the store keeps them (store_new's rule). */
	if (rc == 0) {
		struct store *tmp;

		rc = store_new(&l, NULL, &tmp);
		if (rc == 0) {
			l = *store_limits(tmp);
			store_free(tmp);
		}
	}
	if (rc == 0)
		rc = instance_init(r, &l, inst, err, errlen);
	if (rc == 0) {
		r->testclock = l.testclock;
		clock.now_ms = remote_clock;
		clock.arg = r;
		rc = store_new(&l, &clock, &s);
	}
	if (rc == 0)
		rc = mirror_attach(s, r->mount, 0);
	if (rc == 0) {
		r->s = s;
		mirror_of(s)->remote = r;
		store_set_engine(s, &redis_ops, mirror_of(s));
		memcpy(r->instance, inst, sizeof(inst));
		r->instance_id = strtoull(inst, NULL, 16);
		store_set_instance(s, r->instance_id);
		rc = remote_load_all(s);
		/* The clock is the store's from here on. */
		store_restart_uptime(s);
		if (rc && !err[0])
			snprintf(err, errlen, "statefs: cannot load the shared "
				 "store (%s)", strerror(-rc));
	}
	if (rc == 0) {
		rc = follow_start(s);
		if (rc && !err[0])
			snprintf(err, errlen, "statefs: cannot follow the shared "
				 "store (%s)", strerror(-rc));
	}
	if (rc) {
		if (s) {
			store_free(s); /* frees r through remote_free */
		} else {
			rconn_pool_close(r->pool);
			pthread_mutex_destroy(&r->lock);
			pthread_cond_destroy(&r->applied);
			free(r);
		}
		if (!err[0])
			snprintf(err, errlen, "statefs: cannot open the shared "
				 "store (%s)", strerror(-rc));
		return rc;
	}
	*out = s;
	return 0;
}
