/*
 * stats.c - what a mount shows of the shared store: its counters for
 * .stats (sfs_stats, store-wide or a tenant's, with the refusals this
 * mount made alone; its own gauges when Redis does not answer), the
 * calls refused as damaged, and the link state (connected or not): the
 * table's stats and connection slots (redis_ops, redis/ops.c).
 *
 * Threads and locks
 * -----------------
 * Any thread, no store lock held across a call (sfs_stats waits on the
 * network, redis/call.c); the link state and the damaged count are
 * atomics.
 */
#include "store/engine.h"
#include "redis/mirror.h"
#include "redis/internal.h"

#include <errno.h>

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
	/* The tenant layout: the root's gauges and counters are the sums
	 * of the tenants' (one call each), plus the root's own refusals. */
	if (rc == 0 && !tenant && remote_tenant_layout(s))
		rc = remote_stats_sum(s, rep);
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
