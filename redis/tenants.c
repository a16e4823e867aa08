/*
 * tenants.c - the tenant layout's calls that the root layout makes as
 * one: a store of the tenant layout (meta layout tenant, -o
 * store_layout=tenant when the store is made) keeps each tenant's facts
 * in a meta of its own, P:{P.tTID}:meta, in the tenant's slot, so that
 * every tenant transition is one call on one slot (redis/lua/contract.lua,
 * docs/design.md "The shared store on a Redis Cluster").  What touched
 * the root and a tenant, or several tenants, in one call is here made
 * of one call per slot, rolling forward: the second step of a tenant's
 * mkdir (sfs_tenant_make) and of its rmdir (sfs_tenant_unlist), the
 * store's drain and test clock fanned out to each tenant
 * (sfs_drain_store, sfs_clock_set), and the root .stats summed.
 *
 * What it owns
 * ------------
 * Nothing that lasts: it reads struct remote (redis/internal.h).
 *
 * Threads and locks
 * -----------------
 * Any caller's thread, no store lock held: each call waits on the
 * network as redis/call.c says; remote->lock only to copy the limits.
 */
#include "store/engine.h"
#include "redis/mirror.h"
#include "redis/internal.h"
#include "redis/entry.h"

#include <errno.h>
#include <inttypes.h>

int remote_tenant_make2(struct store *s, const char *name, uint64_t tid,
			const struct store_owner *o, uint64_t clock_ms,
			uint64_t created_ms, uint64_t *seq)
{
	struct remote *r = remote_of(s);
	const char *av[8 + 48];
	char num[7][24], key[160], lims[48][24];
	redisReply *rep = NULL;
	int n = 0, rc;

	remote_tenant_key(s, tid, key, sizeof(key));
	av[n++] = name;
	snprintf(num[0], sizeof(num[0]), "%" PRIu64, tid);
	snprintf(num[1], sizeof(num[1]), "%u", (unsigned)o->uid);
	snprintf(num[2], sizeof(num[2]), "%u", (unsigned)o->gid);
	snprintf(num[3], sizeof(num[3]), "%u", (unsigned)(o->mode & 07777));
	snprintf(num[4], sizeof(num[4]), "%" PRIu64, clock_ms);
	snprintf(num[5], sizeof(num[5]), "%" PRIu64, created_ms);
	for (int i = 0; i < 6; i++)
		av[n++] = num[i];
	/* The store's limits, as copies (they never change within an
	 * instance). */
	lock(&r->lock, LOCK_ENGINE_STATE);
	for (unsigned i = 0; i < r->nlim_kv && i < 48; i++) {
		memcpy(lims[i], r->lim_kv[i], sizeof(lims[i]));
		av[n++] = lims[i];
	}
	unlock(&r->lock, LOCK_ENGINE_STATE);
	rc = remote_fcall(s, "sfs_tenant_make", true, 1,
			  (const char *[]){ key }, n, av, NULL, &rep);
	if (rc == 0)
		*seq = out_u64(rep, 2);
	if (rep)
		freeReplyObject(rep);
	return rc;
}


/* What tenant @tid's slot holds: TS_MADE (its hash), TS_GONE (its meta
 * marked gone: removed, the name maybe still listed), TS_UNMADE
 * (nothing: step 2 of its mkdir never ran); or -errno. */
enum { TS_MADE, TS_GONE, TS_UNMADE };

static int tenant_slot_state(struct store *s, uint64_t tid)
{
	char key[160], meta[170];
	const char *hv[] = { "EXISTS", key };
	const char *mv[] = { "HMGET", meta, "instance", "gone" };
	redisReply *rep = NULL;
	int rc;

	remote_tenant_key(s, tid, key, sizeof(key));
	snprintf(meta, sizeof(meta), "%.*s:meta", (int)strlen(key) - 2, key);
	rc = rconn_pool_call(remote_of(s)->pool, 0, 2, hv, NULL, &rep);
	if (rc)
		return rc;
	rc = rep->type != REDIS_REPLY_INTEGER ? -EPROTO :
	     rep->integer > 0 ? TS_MADE : -ENOENT;
	freeReplyObject(rep);
	if (rc != -ENOENT)
		return rc;
	rc = rconn_pool_call(remote_of(s)->pool, 0, 4, mv, NULL, &rep);
	if (rc)
		return rc;
	rc = rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ? -EPROTO :
	     !out_str(rep, 0) ? TS_UNMADE :
	     out_str(rep, 1) ? TS_GONE : TS_MADE;
	freeReplyObject(rep);
	return rc;
}

/* Step 2 of tenant @tid's mkdir, made from the root log's tenant entry
 * (among its last 1000: a mkdir that stopped between its steps is a
 * moment old), and waited for.  0 or -errno. */
static int make_from_root_log(struct store *s, uint64_t tid)
{
	struct remote *r = remote_of(s);
	const char *av[] = { "XREVRANGE", r->rootlog, "+", "-", "COUNT", "1000" };
	const char *cv[] = { "HGET", r->meta, "created_ms" };
	redisReply *rep = NULL, *cr = NULL;
	uint64_t created = 0, seq;
	int rc;

	rc = rconn_pool_call(r->pool, 0, 6, av, NULL, &rep);
	if (rc == 0)
		rc = rconn_pool_call(r->pool, 0, 3, cv, NULL, &cr);
	if (rc == 0 && cr->type == REDIS_REPLY_STRING)
		created = strtoull(cr->str, NULL, 10);
	rc = rc ? rc : -ENOENT;
	for (size_t i = 0; rep && rep->type == REDIS_REPLY_ARRAY &&
	     i < rep->elements && rc == -ENOENT; i++) {
		const redisReply *ent = rep->element[i];
		struct store_owner o = { 0, 0, 0 };
		struct entry e;
		uint64_t etid, uid, gid, mode;
		const char *name;

		if (ent->type != REDIS_REPLY_ARRAY || ent->elements != 2 ||
		    entry_parse(ent->element[1], &e) != 0 ||
		    strcmp(e.op, "tenant") != 0 ||
		    !entry_u64(&e, "tid", &etid) || etid != tid)
			continue;
		name = entry_str(&e, "name");
		if (!name || !entry_u64(&e, "uid", &uid) ||
		    !entry_u64(&e, "gid", &gid) || !entry_u64(&e, "mode", &mode)) {
			rc = -EPROTO;
			break;
		}
		o.uid = (uid_t)uid;
		o.gid = (gid_t)gid;
		o.mode = (mode_t)mode;
		rc = remote_tenant_make2(s, name, tid, &o, e.ms, created, &seq);
		if (rc == 0)
			rc = wait_seq(s, tid, seq);
	}
	if (rep)
		freeReplyObject(rep);
	if (cr)
		freeReplyObject(cr);
	return rc;
}

int remote_tenant_roll_forward(struct store *s, const char *name)
{
	struct remote *r = remote_of(s);
	char key[STORE_REMOTE_PREFIX_MAX * 2 + 24];
	const char *av[] = { "HGET", key, name };
	redisReply *rep = NULL;
	uint64_t tid = 0;
	int rc;

	snprintf(key, sizeof(key), "%s:{%s}:tenants", r->cfg.prefix,
		 r->cfg.prefix);
	rc = rconn_pool_call(r->pool, 0, 3, av, NULL, &rep);
	if (rc)
		return rc;
	if (rep->type != REDIS_REPLY_STRING || !dec_u64(rep->str, &tid))
		tid = 0;
	freeReplyObject(rep);
	if (!tid)
		return 0; /* not listed (any more) */
	rc = tenant_slot_state(s, tid);
	if (rc == TS_UNMADE)
		return make_from_root_log(s, tid);
	if (rc == TS_GONE) {
		rc = remote_tenant_unlist(s, name, tid);
		return rc ? rc : 1;
	}
	return rc < 0 ? rc : 0;
}

/* The counters a gone tenant's meta keeps, in the order
 * sfs_tenant_unlist adds them to the root's (drain.lua, UNLIST_COUNTERS). */
static const char *const unlist_counters[] = {
	"admissions", "removals", "expiries", "joins", "leaves",
	"refused_capacity", "refused_quota", "refused_payload",
	"refused_draining", "refused_exists", "refused_stale",
	"refused_conflict", "refused_gone",
};
#define NUNLIST (sizeof(unlist_counters) / sizeof(unlist_counters[0]))

/* Tenant @tid's counters (its meta, gone by step 1 but kept) as
 * arguments of its unlist: the root's .stats sums the listed tenants
 * only, so what a tenant counted stays the store's once it is unlisted
 * (as the embedded store's counters do).  0 or the read's error. */
static int unlist_counts(struct store *s, uint64_t tid, struct args *a)
{
	struct remote *r = remote_of(s);
	char key[200];
	const char *av[2 + NUNLIST] = { "HMGET", key };
	redisReply *rep = NULL;
	int rc;

	remote_tenant_key(s, tid, key, sizeof(key));
	/* P:{P.tTID}:t -> P:{P.tTID}:meta */
	if (strlen(key) >= 2 && strlen(key) + 3 < sizeof(key))
		strcpy(key + strlen(key) - 1, "meta");
	for (size_t i = 0; i < NUNLIST; i++)
		av[2 + i] = unlist_counters[i];
	rc = rconn_pool_call(r->pool, 0, (int)(2 + NUNLIST), av, NULL, &rep);
	if (rc)
		return rc;
	for (size_t i = 0; i < NUNLIST; i++) {
		uint64_t v = 0;

		if (rep->type == REDIS_REPLY_ARRAY && i < rep->elements &&
		    rep->element[i]->type == REDIS_REPLY_STRING &&
		    !dec_u64(rep->element[i]->str, &v))
			v = 0;
		a_u64(a, v);
	}
	freeReplyObject(rep);
	return 0;
}

int remote_tenant_unlist(struct store *s, const char *name, uint64_t tid)
{
	struct args a = { .n = 0 };
	redisReply *rep = NULL;
	int rc;

	a_str(&a, name);
	a_u64(&a, tid);
	rc = unlist_counts(s, tid, &a);
	if (rc)
		return rc;
	rc = remote_fcall(s, "sfs_tenant_unlist", true, 0, NULL, a.n, a.v,
			  NULL, &rep);
	if (rc == 0)
		rc = wait_seq(s, 0, out_u64(rep, 2));
	if (rep)
		freeReplyObject(rep);
	return rc;
}

/* Every tenant the store lists (its root's tenants map, followed by
 * this mount or not), their ids in a new array, their number in *@n;
 * NULL with -errno in *@rc. */
static uint64_t *listed_tenants(struct store *s, size_t *n, int *rc)
{
	struct remote *r = remote_of(s);
	char key[STORE_REMOTE_PREFIX_MAX * 2 + 24];
	const char *av[] = { "HVALS", key };
	redisReply *rep = NULL;
	uint64_t *ids = NULL;

	*n = 0;
	snprintf(key, sizeof(key), "%s:{%s}:tenants", r->cfg.prefix,
		 r->cfg.prefix);
	*rc = rconn_pool_call(r->pool, 0, 2, av, NULL, &rep);
	if (*rc)
		return NULL;
	*rc = -EPROTO;
	if (rep->type == REDIS_REPLY_ARRAY) {
		ids = st_calloc(rep->elements + 1, sizeof(*ids));
		*rc = ids ? 0 : -ENOMEM;
		for (size_t i = 0; ids && i < rep->elements; i++)
			if (out_str(rep, i) && dec_u64(out_str(rep, i), &ids[*n]))
				(*n)++;
	}
	freeReplyObject(rep);
	return ids;
}

/* The store's drain as the root meta has it: its state and deadline. */
static int root_drain(struct store *s, char *state, size_t len,
		      uint64_t *deadline)
{
	struct remote *r = remote_of(s);
	const char *av[] = { "HMGET", r->meta, "state", "drain_deadline" };
	redisReply *rep = NULL;
	int rc = rconn_pool_call(r->pool, 0, 4, av, NULL, &rep);

	if (rc)
		return rc;
	rc = -EPROTO;
	if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
	    out_str(rep, 0) && out_str(rep, 1)) {
		snprintf(state, len, "%s", out_str(rep, 0));
		*deadline = strtoull(out_str(rep, 1), NULL, 10);
		rc = 0;
	}
	freeReplyObject(rep);
	return rc;
}

int remote_drain_fanout(struct store *s, bool now)
{
	char state[16];
	uint64_t deadline, *ids;
	size_t n = 0;
	int rc = root_drain(s, state, sizeof(state), &deadline);

	if (rc)
		return rc;
	if (strcmp(state, "ready") == 0)
		return 0;
	ids = listed_tenants(s, &n, &rc);
	if (!ids)
		return rc;
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct args a = { .n = 0 };
		redisReply *rep = NULL;
		char key[160];
		int trc;

		remote_tenant_key(s, ids[i], key, sizeof(key));
		a_str(&a, state);
		a_u64(&a, deadline);
		a_str(&a, now ? "1" : "0");
		trc = remote_fcall(s, "sfs_drain_store", true, 1,
				   (const char *[]){ key }, a.n, a.v, NULL, &rep);
		if (trc == 0) {
			/* Its log is waited for by the caller where this
			 * mount follows it (remote_wait_tenants). */
			if (out_u64(rep, 3) == 1 && out_str(rep, 4))
				rc = remote_tenant_unlist(s, out_str(rep, 4), ids[i]);
		} else if (trc != -ESTALE) {
			rc = trc;
		}
		if (rep)
			freeReplyObject(rep);
	}
	free(ids);
	return rc;
}

void remote_clock_fanout(struct store *s, uint64_t clock_ms)
{
	size_t n = 0;
	int rc;
	uint64_t *ids = listed_tenants(s, &n, &rc);

	for (size_t i = 0; ids && i < n; i++) {
		struct args a = { .n = 0 };
		redisReply *rep = NULL;
		char key[160];

		remote_tenant_key(s, ids[i], key, sizeof(key));
		a_u64(&a, clock_ms);
		remote_fcall(s, "sfs_clock_set", true, 1,
			     (const char *[]){ key }, a.n, a.v, NULL, &rep);
		if (rep)
			freeReplyObject(rep);
	}
	free(ids);
}

void remote_expired_tenant(struct store *s, uint64_t tid,
			   const redisReply *rep)
{
	if (remote_tenant_layout(s) && rep && out_u64(rep, 5) == 1 &&
	    out_str(rep, 6))
		remote_tenant_unlist(s, out_str(rep, 6), tid);
}

/* The gauges and counters .stats sums over the tenants: all of its
 * numbers but the store's own (its instance, state, limits, tenants). */
static bool summed(const char *k)
{
	static const char *const f[] = {
		"parents", "children", "links", "tombstones", "bytes",
		"admissions", "removals", "expiries", "joins", "leaves",
		"refused_capacity", "refused_quota", "refused_payload",
		"refused_draining", "refused_exists", "refused_stale",
		"refused_conflict", "refused_gone",
	};

	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (strcmp(k, f[i]) == 0)
			return true;
	return false;
}

int remote_stats_sum(struct store *s, redisReply *root)
{
	size_t n = 0;
	int rc;
	uint64_t *ids = listed_tenants(s, &n, &rc);

	if (!ids)
		return rc;
	for (size_t i = 0; i < n; i++) {
		redisReply *t = NULL;
		char key[160];

		remote_tenant_key(s, ids[i], key, sizeof(key));
		if (remote_fcall(s, "sfs_stats", false, 1, (const char *[]){ key },
				 0, NULL, NULL, &t) == 0) {
			for (size_t j = 3; j + 1 < t->elements; j += 2) {
				const char *k = out_str(t, j);

				if (!k || !summed(k))
					continue;
				for (size_t m = 3; m + 1 < root->elements; m += 2) {
					redisReply *e = root->element[m + 1];

					if (out_str(root, m) && strcmp(out_str(root, m), k) == 0 &&
					    e->type == REDIS_REPLY_INTEGER)
						e->integer += (long long)out_u64(t, j + 1);
				}
			}
		}
		if (t)
			freeReplyObject(t);
	}
	free(ids);
	return 0;
}
