/*
 * instance.c - a mount and the store instance it speaks to: sfs_init,
 * which records this mount's limits in an empty store or compares them
 * with the ones the store has (store_limits=adopt takes the store's),
 * and gives the instance; the same init for a new store instance (Redis
 * lost its data, or failed over to another history); and the random
 * ids a mount and a candidate instance are named by.
 *
 * What it owns
 * ------------
 * The names of the limits sfs_init takes (redis/lua/contract.lua) and their
 * fields in struct store_limits.  It sets remote->instance and counts
 * remote->generation.
 *
 * Threads and locks
 * -----------------
 * instance_init() runs at start, before the store has any other thread;
 * remote_reinit() on the follower's thread (a new instance), with
 * remote->lock (LOCK_ENGINE_STATE, held alone) taken only to set the instance.
 * Each call waits on the network, no store lock held.
 */
#include "store/engine.h"
#include "redis/mirror.h"
#include "redis/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <sys/random.h>
#include <unistd.h>

/* Random hex of @n digits into @buf. */
void instance_random_hex(char *buf, size_t n)
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

/* Does sfs_init's OK reply @rep say the store is of the tenant layout? */
static bool store_says_tenant(const redisReply *rep)
{
	for (size_t i = 5; i + 1 < rep->elements; i += 2) {
		const char *k = out_str(rep, i), *v = out_str(rep, i + 1);

		if (k && v && strcmp(k, "layout") == 0)
			return strcmp(v, "tenant") == 0;
	}
	return false;
}

/* Contract in redis/internal.h. */
int instance_init(struct remote *r, struct store_limits *l,
		      char *instance, char *err, size_t errlen)
{
	const char *av[64];
	char num[40][24], cand[17], ver[8];
	int n = 0, rc;
	redisReply *rep = NULL;
	char share_name[64];
	/* A store made on a Redis Cluster is made in the tenant layout,
	 * whatever the mount asked: the root layout's tenant calls name
	 * two slots. */
	bool on_cluster = rconn_pool_is_cluster(r->pool);
	bool want_tenant = r->cfg.layout_tenant || on_cluster;

	instance_random_hex(cand, 16);
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
	/* Followed only by a store made now; one made already keeps its
	 * own, which the reply tells. */
	av[n++] = "layout";
	av[n++] = want_tenant ? "tenant" : "root";
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
	if (on_cluster && !store_says_tenant(rep)) {
		snprintf(err, errlen, "statefs: the shared store at %s was made "
			 "in the root layout, which spans one Redis only: its "
			 "tenants' keys are in two slots (a store made on a "
			 "cluster is made in the tenant layout)",
			 rconn_pool_where(r->pool));
		freeReplyObject(rep);
		return -EINVAL;
	}
	snprintf(instance, 17, "%s", rep->element[3]->str);
	lock(&r->lock, LOCK_ENGINE_STATE);
	r->nlim_kv = 0;
	for (size_t i = 5; i + 1 < rep->elements; i += 2) {
		const char *k = out_str(rep, i);

		if (k && strcmp(k, "layout") == 0) {
			const char *v = out_str(rep, i + 1);

			atomic_store(&r->tenant_meta, v && strcmp(v, "tenant") == 0);
			continue;
		}
		if (k && r->nlim_kv + 2 <= sizeof(r->lim_kv) / sizeof(r->lim_kv[0])) {
			snprintf(r->lim_kv[r->nlim_kv++], sizeof(r->lim_kv[0]), "%s", k);
			snprintf(r->lim_kv[r->nlim_kv++], sizeof(r->lim_kv[0]),
				 "%" PRIu64, out_u64(rep, i + 1));
		}

		for (size_t j = 0; k && j < sizeof(lims) / sizeof(lims[0]); j++)
			if (strcmp(k, lims[j].name) == 0)
				*lim_field(l, j) = out_u64(rep, i + 1);
		if (k && strcmp(k, "testclock") == 0)
			l->testclock = out_u64(rep, i + 1) == 1;
	}
	unlock(&r->lock, LOCK_ENGINE_STATE);
	freeReplyObject(rep);
	return 0;
}

int remote_reinit(struct store *s)
{
	struct remote *r = remote_of(s);
	struct store_limits l = *store_limits(s);
	char inst[17], err[512];
	int rc;

	/* The store may have lost its functions with its data. */
	rc = remote_library_ensure(s);
	if (rc)
		return rc;
	rc = instance_init(r, &l, inst, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "%s\n", err);
		return rc;
	}
	lock(&r->lock, LOCK_ENGINE_STATE);
	memcpy(r->instance, inst, sizeof(inst));
	r->instance_id = strtoull(inst, NULL, 16);
	store_set_instance(s, r->instance_id);
	r->generation++;
	unlock(&r->lock, LOCK_ENGINE_STATE);
	return 0;
}
