/*
 * clock.c - what ends with a mirror's clock: the test clock moved
 * through Redis, and expiry, which only Redis does.  The estimate of
 * the store's clock itself is redis/estimate.c's.
 *
 * What it owns
 * ------------
 * Nothing that lasts.  A mirror expires nothing by itself: when its
 * deadline heap says something is due (or a drain runs), store_expire()
 * asks Redis (sfs_expire of each tenant that has a lease due or a drain
 * running, as the mirror shows them, never of every tenant; then of the
 * store's scope: tombstones and the store's drain), and the entries that
 * come back remove what went.
 *
 * Threads and locks
 * -----------------
 * Expiry runs on the store's reaper thread (store/reaper.c) and after a
 * .clock write; each call and each wait as redis/call.c says, no store
 * lock held.
 */
#include "store/engine.h"
#include "redis/mirror.h"
#include "redis/internal.h"

#include <errno.h>

/* Due tenants ----------------------------------------------------------------- */

/* How many of the due leases one pass looks at to find their tenants:
 * a pass removes at most its budget anyway. */
#define DUE_MAX 4096

/* The tenant node of node @n (a parent or a state), with a reference,
 * or NULL. */
static struct store_node *tenant_of(struct store *s, struct store_node *n)
{
	struct store_node *t = NULL;

	if (store_node_kind(n) == STORE_PARENT) {
		t = store_node_tenant(n);
		store_node_ref(t);
	} else if (store_node_kind(n) == STORE_CHILD) {
		t = state_tenant(s, node_child(n));
	}
	return t;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The tenants a pass of expiry must ask Redis about, as the mirror shows
 * them: those of the leases due by now (the top of the deadline heap:
 * the entries due form a subtree at its root, walked without taking
 * anything out), and every tenant that drains (a drain also ends when
 * its last child goes, which no deadline says).  While the store itself
 * drains, every tenant.  Their ids in a new array (sorted, each once),
 * their number in *@n; NULL when memory ran out.
 */
static uint64_t *due_tenants(struct store *s, size_t *n)
{
	struct store_node **due;
	uint64_t now = store_now_ms(s), *ids;
	size_t nd, cap, k = 0;

	/* The tenant layout: each tenant's tombstones and its share of
	 * the store's drain are its own, aged by its own call. */
	if (store_state(s) == STORE_DRAINING || remote_tenant_layout(s))
		return remote_tenants(s, n);
	due = st_calloc(DUE_MAX, sizeof(*due));
	if (!due)
		return NULL;
	nd = lease_due(s, now, due, DUE_MAX);
	nd += drains_tenants(s, due + nd, DUE_MAX - nd);
	cap = nd ? nd : 1;
	ids = st_calloc(cap, sizeof(*ids));
	for (size_t i = 0; i < nd; i++) {
		struct store_node *t = store_node_kind(due[i]) == STORE_TENANT ?
			(store_node_ref(due[i]), due[i]) : tenant_of(s, due[i]);

		if (t && ids) {
			uint64_t tid = mirror_tid_of(s, t);

			if (tid)
				ids[k++] = tid;
		}
		if (t)
			store_node_unref(s, t);
		store_node_unref(s, due[i]);
	}
	free(due);
	if (!ids)
		return NULL;
	qsort(ids, k, sizeof(*ids), cmp_u64);
	*n = 0;
	for (size_t i = 0; i < k; i++)
		if (*n == 0 || ids[*n - 1] != ids[i])
			ids[(*n)++] = ids[i];
	return ids;
}

/* Expiry ------------------------------------------------------------------------- */

unsigned remote_expire(struct store *s, unsigned budget)
{
	size_t n = 0;
	uint64_t *ids = due_tenants(s, &n);
	struct args a = { .n = 0 };
	redisReply *rep;
	unsigned done = 0;
	uint64_t aged = 0;
	bool draining;

	a_u64(&a, budget ? budget : 1);
	/* The tenant layout: the store's drain, as this mount's mirror has
	 * it from the root log, made every tenant's (idempotent), so that
	 * a drain whose mount died during its fan-out still reaches all. */
	if (remote_tenant_layout(s) && store_state(s) != STORE_READY)
		(void)remote_drain_fanout(s, false);
	/* At most @budget removals in all: each tenant may take what the
	 * ones before it left. */
	for (size_t i = 0; i < n && done < budget; i++) {
		struct args left = { .n = 0 };
		char key[160];
		int rc;

		a_u64(&left, budget - done);
		remote_tenant_key(s, ids[i], key, sizeof(key));
		rep = NULL;
		rc = remote_fcall(s, "sfs_expire", true, 1,
				  (const char *[]){ key }, left.n, left.v, NULL,
				  &rep);
		if (rc == 0) {
			done += (unsigned)out_u64(rep, 3);
			aged += out_u64(rep, 4);
		}
		settle(s, ids[i], rc, rep);
		if (rc == 0)
			remote_expired_tenant(s, ids[i], rep);
		if (rep)
			freeReplyObject(rep);
	}
	/* The store's scope: tombstones store-wide and a drain of the
	 * store.  Tombstones aged by any of these calls, and the clear of
	 * a drain of the store, are entries in the logs of other tenants
	 * than the one called, and of tenants with no lease due (not in
	 * @ids): every tenant's log is waited for then, as after
	 * store_drain, so what went is gone from the mirror on return. */
	draining = store_state(s) == STORE_DRAINING;
	rep = NULL;
	if (remote_fcall(s, "sfs_expire", true, 0, NULL, a.n, a.v, NULL,
			 &rep) == 0 &&
	    wait_seq(s, 0, out_u64(rep, 2)) == 0 &&
	    (draining || aged + out_u64(rep, 4) > 0)) {
		size_t na = 0;
		uint64_t *all = remote_tenants(s, &na);

		if (all)
			remote_wait_tenants(s, all, na);
		free(all);
	}
	if (rep)
		freeReplyObject(rep);
	free(ids);
	return done;
}

unsigned remote_expire_due(struct store *s, unsigned budget)
{
	if (store_next_deadline(s) > store_now_ms(s) &&
	    store_state(s) != STORE_DRAINING &&
	    !drains_running(s))
		return 0;
	return remote_expire(s, budget);
}

int remote_clock_advance(struct store *s, uint64_t ms)
{
	struct args a = { .n = 0 };
	redisReply *rep = NULL;
	int rc;

	a_u64(&a, ms);
	rc = remote_fcall(s, "sfs_clock_advance", true, 0, NULL, a.n, a.v,
			  NULL, &rep);
	if (rc == 0) {
		rc = wait_seq(s, 0, out_u64(rep, 2));
		remote_saw_now(s, out_u64(rep, 3));
		/* The tenant layout: each tenant's meta keeps the clock its
		 * calls read; after this returns every tenant is at it. */
		if (remote_tenant_layout(s))
			remote_clock_fanout(s, out_u64(rep, 3));
	}
	if (rep)
		freeReplyObject(rep);
	return rc;
}

/* What is due in the tenants this mount does not follow (shells,
 * redis/use.c): asked of Redis, their entries not waited for. */
static void expire_shells(struct store *s, unsigned budget)
{
	size_t n = mirror_tenants(s, NULL, 0, true), k;
	uint64_t *ids = n ? st_calloc(n, sizeof(*ids)) : NULL;
	struct args a = { .n = 0 };

	if (!ids)
		return;
	k = mirror_tenants(s, ids, n, true);
	a_u64(&a, budget);
	for (size_t i = 0; i < n && i < k; i++) {
		char key[160];
		redisReply *rep = NULL;

		remote_tenant_key(s, ids[i], key, sizeof(key));
		if (remote_fcall(s, "sfs_expire", true, 1, (const char *[]){ key },
				 a.n, a.v, NULL, &rep) == 0)
			remote_expired_tenant(s, ids[i], rep);
		if (rep)
			freeReplyObject(rep);
	}
	free(ids);
}

int remote_clock_move(struct store *s, uint64_t ms)
{
	int rc;

	rc = remote_clock_advance(s, ms);
	/* Then what is due goes, as the embedded store's reaper does when
	 * the manual clock moves: in every tenant, followed or not. */
	if (rc == 0) {
		remote_expire(s, 4096);
		expire_shells(s, 4096);
	}
	return rc;
}

