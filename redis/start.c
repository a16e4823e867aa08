/*
 * start.c - a mount's start on a shared store, and its stop: the pool
 * opened and the Functions library loaded (redis/library.c), sfs_init
 * (redis/instance.c), the mirror made and loaded from the dumps
 * (redis/load.c), the follower started (redis/follow.c); and what
 * .stats shows of the shared store (its connection, its counters).
 *
 * What it owns
 * ------------
 * The making and freeing of struct remote (redis/internal.h).  It is
 * the engine's top: it calls the other files, none calls it.
 *
 * Threads and locks
 * -----------------
 * store_new_remote() runs before the store has any other thread;
 * remote_free() stops the follower first.  .stats is asked on any
 * thread, no store lock held across the call.
 */
#include "store/internal.h"
#include "redis/mirror.h"
#include "redis/internal.h"
#include "redis/statefs_lua.h"

#include <errno.h>

/* The pool's connections, for the threads that serve requests. */
#define POOL_SIZE 8

int store_new_remote(const struct store_limits *limits,
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
	explicit_bzero(r->cfg.password, sizeof(r->cfg.password));
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->applied, NULL);
	instance_random_hex(r->mount, 16);
	snprintf(r->meta, sizeof(r->meta), "%s:{%s}:meta", cfg->prefix, cfg->prefix);
	snprintf(r->rootlog, sizeof(r->rootlog), "%s:{%s}:log", cfg->prefix,
		 cfg->prefix);
	rc = rconn_pool_open(cfg, POOL_SIZE, &r->pool, err, errlen);
	if (rc == 0)
		rc = rconn_library_ensure(r->pool, "statefs", store_statefs_lua,
					  LIBVERSION, err, errlen);
	/* The shares as the store keeps them (store_new's rule). */
	if (rc == 0) {
		struct store *tmp;

		rc = store_new(&l, NULL, &tmp);
		if (rc == 0) {
			l = tmp->shown;
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
		s->remote = r;
		memcpy(r->instance, inst, sizeof(inst));
		r->instance_id = strtoull(inst, NULL, 16);
		s->instance = r->instance_id;
		rc = remote_load_all(s);
		/* The clock is the store's from here on. */
		s->born_ms = store_now_ms(s);
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

void remote_free(struct store *s)
{
	struct remote *r = s->remote;

	if (!r)
		return;
	follow_stop(s);
	rconn_pool_close(r->pool);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->applied);
	follow_pos_clear(r);
	free(r->pos);
	free(r);
	s->remote = NULL;
}

bool store_is_shared(const struct store *s)
{
	return s->remote != NULL;
}

enum store_link store_connection(const struct store *s)
{
	if (!s->remote)
		return STORE_LINK_EMBEDDED;
	return rconn_pool_connected(s->remote->pool) ? STORE_LINK_CONNECTED :
						       STORE_LINK_DISCONNECTED;
}

int remote_stats(struct store *s, struct store_node *tenant,
		 struct store_stats *o)
{
	static const char *const refused[STORE_NREFUSAL] = {
		"refused_capacity", "refused_quota", "refused_payload",
		"refused_draining", "refused_exists", "refused_stale",
		"refused_conflict", "refused_gone",
	};
	struct {
		const char *name;
		uint64_t *v;
	} f[] = {
		{ "tenants", &o->tenants }, { "parents", &o->parents },
		{ "children", &o->children }, { "links", &o->links },
		{ "tombstones", &o->tombstones }, { "bytes", &o->bytes },
		{ "admissions", &o->admissions }, { "removals", &o->removals },
		{ "expiries", &o->expiries }, { "joins", &o->joins },
		{ "leaves", &o->leaves },
	};
	char key[160];
	redisReply *rep = NULL;
	uint64_t tid;
	int rc;

	memset(o, 0, sizeof(*o));
	if (tenant && !tkey(s, tenant, &tid, key, sizeof(key)))
		return -ESTALE;
	rc = remote_fcall(s, "sfs_stats", false, tenant ? 1 : 0,
			  (const char *[]){ key }, 0, NULL, NULL, &rep);
	if (rc == 0) {
		for (size_t i = 3; i + 1 < rep->elements; i += 2) {
			const char *k = out_str(rep, i);
			uint64_t v = out_u64(rep, i + 1);

			if (!k)
				continue;
			for (size_t j = 0; j < sizeof(f) / sizeof(f[0]); j++)
				if (strcmp(k, f[j].name) == 0)
					*f[j].v = v;
			for (int j = 0; j < STORE_NREFUSAL; j++)
				if (strcmp(k, refused[j]) == 0)
					o->refused[j] = v;
		}
	}
	if (rep)
		freeReplyObject(rep);
	o->damaged = remote_damaged(s);
	return rc;
}

uint64_t remote_damaged(struct store *s)
{
	return atomic_load(&s->remote->damaged);
}

