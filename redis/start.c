/*
 * remote_start.c - a mount's start on a shared store, and its stop: the
 * pool opened and the Functions library loaded, sfs_init (this mount's
 * limits recorded, or compared with the store's), the mirror made and
 * loaded from the dumps, the follower started; the same init and load
 * for a new store instance; and what .stats shows of the shared store
 * (its connection, its counters).
 *
 * What it owns
 * ------------
 * The making and freeing of struct remote (redis/internal.h), and the
 * library version this mount speaks.
 *
 * Threads and locks
 * -----------------
 * redis_store_new() runs before the store has any other thread;
 * remote_reinit() and remote_load_all() run on the follower's thread (a
 * new instance), remote->lock (LOCK_ENGINE_STATE, held alone) taken only to
 * set the instance; remote_free() stops the follower first.  .stats is
 * asked on any thread, no store lock held across the call.
 */
#include "store/internal.h"
#include "redis/mirror.h"
#include "redis/internal.h"
#include "redis/statefs_lua.h"

#include <errno.h>
#include <inttypes.h>
#include <sys/random.h>
#include <unistd.h>

/* The library version this mount speaks (redis/statefs.lua). */
#define LIBVERSION 4
#define POOL_SIZE 8

/* Start and stop ------------------------------------------------------------- */

/* Random hex of @n digits into @buf. */
static void random_hex(char *buf, size_t n)
{
	uint8_t b[16];

	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
		uint64_t x = (uint64_t)wall_now(NULL) ^ ((uint64_t)getpid() << 32);

		memcpy(b, &x, 8);
		memcpy(b + 8, &x, 8);
	}
	for (size_t i = 0; i < n; i++)
		buf[i] = "0123456789abcdef"[(b[i / 2] >> (i % 2 ? 0 : 4)) & 15];
	buf[n] = '\0';
}

/* The limits a mount sends to sfs_init: the Lua name, the field, whether
 * it is a duration (the mount option then says seconds, no _ms). */
static const struct {
	const char *name;
	size_t off;
	bool ms;
} lims[] = {
#define L(n) { #n, offsetof(struct store_limits, n), false }
	L(max_tenants), L(max_parents), L(max_children), L(max_bytes),
	L(max_payload), L(max_name), L(max_tombstones),
	{ "tombstone_ttl_ms", offsetof(struct store_limits, tombstone_ttl_ms), true },
	L(parent_quota), L(tenant_quota), L(tenant_max_parents),
	L(tenant_max_children), L(tenant_max_bytes), L(tenant_max_tombstones),
	{ "default_ttl_ms", offsetof(struct store_limits, default_ttl_ms), true },
	{ "drain_window_ms", offsetof(struct store_limits, drain_window_ms), true },
#undef L
};

static uint64_t *lim_field(struct store_limits *l, size_t i)
{
	return (uint64_t *)((char *)l + lims[i].off);
}

/*
 * sfs_init: record this mount's limits, or compare them with the store's
 * (adopt them with store_limits=adopt).  Fills @l with what the store
 * has, and @instance.  0, or -EINVAL / -EPROTO / -EIO with a one-line
 * message in @err.
 */
static int init_store(struct remote *r, struct store_limits *l,
		      char *instance, char *err, size_t errlen)
{
	const char *av[64];
	char num[40][24], cand[17], ver[8];
	int n = 0, rc;
	redisReply *rep = NULL;
	char share_name[64];

	random_hex(cand, 16);
	snprintf(ver, sizeof(ver), "%d", LIBVERSION);
	av[n++] = "FCALL";
	av[n++] = "sfs_init";
	av[n++] = "1";
	av[n++] = r->meta;
	av[n++] = "";
	av[n++] = "";
	av[n++] = "";
	av[n++] = ver;
	av[n++] = cand;
	av[n++] = r->cfg.adopt_limits ? "1" : "0";
	for (size_t i = 0; i < sizeof(lims) / sizeof(lims[0]); i++) {
		av[n++] = lims[i].name;
		snprintf(num[i], sizeof(num[i]), "%" PRIu64, *lim_field(l, i));
		av[n++] = num[i];
	}
	av[n++] = "testclock";
	av[n++] = l->testclock ? "1" : "0";
	rc = rconn_pool_call(r->pool, 0, n, av, NULL, &rep);
	if (rc) {
		snprintf(err, errlen, "statefs: the shared store did not answer "
			 "within store_timeout");
		return -EIO;
	}
	/* Every element read below is checked for its type first: a reply
	 * of another shape is a typed refusal, never a crash. */
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 3 ||
	    !out_str(rep, 0) ||
	    (strcmp(rep->element[0]->str, "OK") == 0 && !out_str(rep, 3))) {
		snprintf(err, errlen, "statefs: sfs_init: %s",
			 rep->type == REDIS_REPLY_ERROR ? rep->str : "a bad reply");
		freeReplyObject(rep);
		return -EPROTO;
	}
	if (strcmp(rep->element[0]->str, "ELIMITS") == 0 && out_str(rep, 3)) {
		const char *name = rep->element[3]->str;
		uint64_t have = out_u64(rep, 4), want = out_u64(rep, 5);
		bool ms = strstr(name, "_ms") != NULL;

		snprintf(share_name, sizeof(share_name), "%.*s",
			 ms ? (int)(strlen(name) - 3) : (int)strlen(name), name);
		if (ms)
			snprintf(err, errlen, "statefs: -o %s: the shared store "
				 "has %s=%" PRIu64 ".%03" PRIu64 ", this mount %"
				 PRIu64 ".%03" PRIu64 " (give the store's, or -o "
				 "store_limits=adopt)", share_name, share_name,
				 have / 1000, have % 1000, want / 1000, want % 1000);
		else
			snprintf(err, errlen, "statefs: -o %s: the shared store "
				 "has %s=%" PRIu64 ", this mount %" PRIu64
				 " (give the store's, or -o store_limits=adopt)",
				 share_name, share_name, have, want);
		freeReplyObject(rep);
		return -EINVAL;
	}
	if (strcmp(rep->element[0]->str, "OK") != 0) {
		snprintf(err, errlen, "statefs: the shared store refused this "
			 "mount: %s%s%s", rep->element[0]->str,
			 out_str(rep, 3) ? " " : "",
			 out_str(rep, 3) ? out_str(rep, 3) : "");
		freeReplyObject(rep);
		return -EINVAL;
	}
	snprintf(instance, 17, "%s", rep->element[3]->str);
	for (size_t i = 5; i + 1 < rep->elements; i += 2) {
		const char *k = out_str(rep, i);

		for (size_t j = 0; k && j < sizeof(lims) / sizeof(lims[0]); j++)
			if (strcmp(k, lims[j].name) == 0)
				*lim_field(l, j) = out_u64(rep, i + 1);
		if (k && strcmp(k, "testclock") == 0)
			l->testclock = out_u64(rep, i + 1) == 1;
	}
	freeReplyObject(rep);
	return 0;
}

int remote_library_ensure(struct store *s)
{
	char err[512];
	int rc = rconn_library_ensure(remote_of(s)->pool, "statefs",
				      store_statefs_lua, LIBVERSION, err,
				      sizeof(err));

	if (rc)
		fprintf(stderr, "%s\n", err);
	return rc;
}

int remote_reinit(struct store *s)
{
	struct remote *r = remote_of(s);
	struct store_limits l = s->shown;
	char inst[17], err[512];
	int rc;

	/* The store may have lost its functions with its data. */
	rc = remote_library_ensure(s);
	if (rc)
		return rc;
	rc = init_store(r, &l, inst, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "%s\n", err);
		return rc;
	}
	lock(&r->lock, LOCK_ENGINE_STATE);
	memcpy(r->instance, inst, sizeof(inst));
	r->instance_id = strtoull(inst, NULL, 16);
	s->instance = r->instance_id;
	r->generation++;
	unlock(&r->lock, LOCK_ENGINE_STATE);
	return 0;
}

int remote_load_all(struct store *s)
{
	struct remote *r = remote_of(s);
	redisReply *rep = NULL, *tl;
	uint64_t clock_ms = 0;
	const char *state;
	int rc;

	rc = remote_fcall(s, "sfs_dump", false, 0, NULL, 0, NULL, NULL, &rep);
	if (rc) {
		if (rep)
			freeReplyObject(rep);
		return rc;
	}
	if (rep->elements < 6 || rep->element[4]->type != REDIS_REPLY_ARRAY ||
	    rep->element[5]->type != REDIS_REPLY_ARRAY) {
		freeReplyObject(rep);
		return -EPROTO;
	}
	mirror_root_at(s, out_u64(rep, 2));
	snprintf(r->root_id, sizeof(r->root_id), "%s",
		 out_str(rep, 3) ? out_str(rep, 3) : "0-0");
	/* The store's drain and clock, from its meta. */
	for (size_t i = 0; i + 1 < rep->element[4]->elements; i += 2) {
		const char *k = out_str(rep->element[4], i);
		const char *v = out_str(rep->element[4], i + 1);

		if (!k || !v)
			continue;
		if (strcmp(k, "state") == 0)
			state = v, atomic_store(&s->state,
				strcmp(state, "draining") == 0 ? STORE_DRAINING :
				strcmp(state, "drained") == 0 ? STORE_DRAINED :
				STORE_READY);
		else if (strcmp(k, "drain_deadline") == 0)
			atomic_store(&s->drain_deadline, strtoull(v, NULL, 10));
		else if (strcmp(k, "clock_ms") == 0)
			clock_ms = strtoull(v, NULL, 10);
	}
	if (r->testclock)
		remote_saw_now(s, clock_ms);
	tl = rep->element[5];
	follow_pos_clear(r);
	for (size_t i = 0; i + 1 < tl->elements && rc == 0; i += 2) {
		uint64_t tid = 0;
		char key[160], id[48];
		redisReply *d = NULL;
		bool gone = false;

		if (!dec_u64(out_str(tl, i + 1), &tid) || tid == 0) {
			rc = -EPROTO;
			break;
		}
		remote_tenant_key(s, tid, key, sizeof(key));
		rc = remote_fcall(s, "sfs_dump", false, 1, (const char *[]){ key },
				  0, NULL, NULL, &d);
		if (rc == -ESTALE && d && strcmp(d->element[0]->str, "ESTALE") == 0)
			rc = 0, gone = true; /* gone since the root's dump */
		else if (rc == 0)
			rc = mirror_load_tenant(s, tid, d, id, sizeof(id));
		if (d)
			freeReplyObject(d);
		/* A tenant gone has no log to follow (and no id was read). */
		if (rc == 0 && !gone)
			rc = follow_pos_add(r, tid, id);
	}
	freeReplyObject(rep);
	return rc;
}

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
	explicit_bzero(r->cfg.password, sizeof(r->cfg.password));
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->applied, NULL);
	random_hex(r->mount, 16);
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
		rc = init_store(r, &l, inst, err, errlen);
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
	struct remote *r = remote_of(s);

	if (!r)
		return;
	follow_stop(s);
	rconn_pool_close(r->pool);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->applied);
	follow_pos_clear(r);
	free(r->pos);
	free(r);
	mirror_of(s)->remote = NULL;
}

void remote_close(struct store *s)
{
	remote_free(s);
	mirror_free(s);
}

enum store_link remote_connection(const struct store *s)
{
	return rconn_pool_connected(remote_of(s)->pool) ? STORE_LINK_CONNECTED :
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

int remote_stats_all(struct store *s, struct store_node *tenant,
		     struct store_stats *o)
{
	int rc;

	/* A mirror's counters are the shared store's, plus the refusals
	 * this mount made alone (a stage's write over a limit never reaches
	 * Redis); its own gauges when Redis does not answer.  What open
	 * snapshots and stages hold is this mount's. */
	if (remote_stats(s, tenant, o) == 0) {
		stats_add_local(s, tenant, o);
		return 0;
	}
	rc = stats_gauges(s, tenant, o);
	if (rc == 0)
		o->damaged = remote_damaged(s);
	return rc;
}

uint64_t remote_damaged(struct store *s)
{
	return atomic_load(&remote_of(s)->damaged);
}
