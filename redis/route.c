/*
 * route.c - the map and the nodes of a shared store on a Redis Cluster:
 * which primary serves each slot (a struct cluster_map, redis/cluster.c),
 * one struct rnode per primary with connections of its own, and the map
 * read again (CLUSTER SLOTS) when a call learns it changed.  The calls
 * themselves are redis/conn.c's (rconn_pool_call routes with these).
 *
 * What it owns
 * ------------
 * pool->map, pool->map_node[] (map->nodes[i]'s rnode), pool->nodes[] (every
 * node ever made: never freed while the pool lives, so that a call may
 * keep a pointer to one without the lock), pool->map_gen (maps
 * installed), pool->refreshing and pool->refreshed (one CLUSTER SLOTS
 * under way at a time: a change is read once, not once per call).
 *
 * Threads and locks
 * -----------------
 * All of it under pool->lock (LOCK_ENGINE_POOL, a leaf), held for a few
 * instructions and an allocation at most; never across the network: a
 * refresh copies the addresses out, asks with the lock released, and
 * installs what it read under the lock again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "store/engine.h"
#include "redis/wire.h"

/* Nodes -------------------------------------------------------------------- */

static struct rnode *node_find_locked(struct rconn_pool *p, const char *host,
				      uint16_t port)
{
	for (unsigned i = 0; i < p->nnodes; i++)
		if (p->nodes[i]->addr.port == port &&
		    strcmp(p->nodes[i]->addr.host, host) == 0)
			return p->nodes[i];
	return NULL;
}

/* The node at @host:@port, made when new (an allocation under the leaf
 * lock, no network).  NULL when out of room or memory. */
static struct rnode *node_get_locked(struct rconn_pool *p, const char *host,
				     uint16_t port)
{
	struct rnode *n = node_find_locked(p, host, port);
	pthread_condattr_t attr;
	unsigned i = 0;

	if (n || p->nnodes == ROUTE_NODES_MAX)
		return n;
	n = st_calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->conns = st_calloc(p->size, sizeof(*n->conns));
	if (!n->conns)
		goto fail;
	snprintf(n->addr.host, sizeof(n->addr.host), "%s", host);
	n->addr.port = port;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	if (pthread_cond_init(&n->freed, &attr) != 0) {
		pthread_condattr_destroy(&attr);
		goto fail;
	}
	pthread_condattr_destroy(&attr);
	for (; i < p->size; i++) {
		if (conn_init(&n->conns[i], p, n, p->remote.timeout_ms) < 0)
			goto fail_conns;
		n->conns[i].slot = -2; /* a pool connection: its node is fixed */
		n->conns[i].next_free = n->free;
		n->free = &n->conns[i];
	}
	p->nodes[p->nnodes++] = n;
	return n;
fail_conns:
	while (i > 0)
		conn_fini(&n->conns[--i]);
	pthread_cond_destroy(&n->freed);
fail:
	free(n->conns);
	free(n);
	return NULL;
}

/* Bind every node of the map to its rnode. */
static void bind_locked(struct rconn_pool *p)
{
	for (unsigned i = 0; i < p->map->nnodes && i < ROUTE_NODES_MAX; i++)
		p->map_node[i] = node_get_locked(p, p->map->nodes[i].host,
						 p->map->nodes[i].port);
}

static void install_locked(struct rconn_pool *p, struct cluster_map *m)
{
	cluster_map_free(p->map);
	p->map = m;
	memset(p->map_node, 0, sizeof(p->map_node));
	bind_locked(p);
	p->map_gen++;
}

/* The map ------------------------------------------------------------------ */

/* Ask @a for the map: 0 with *@out, or an errno with @why. */
static int ask_map(struct rconn_pool *p, const struct store_remote_addr *a,
		   uint64_t deadline, struct cluster_map **out, char *why)
{
	struct link *ln = NULL;
	int rc = discover_node(p, a, deadline, false, &ln, why);

	if (rc < 0)
		return rc;
	rc = discover_slots(ln, a->host, out, why);
	link_close(ln);
	return rc;
}

/* A map from the first of @addrs (@n) that gives one covering every
 * slot; an incomplete one only when none does.  0 with *@out (complete
 * or not), or the last errno. */
static int read_map(struct rconn_pool *p, const struct store_remote_addr *addrs,
		    unsigned n, uint64_t deadline, struct cluster_map **out,
		    char *why)
{
	struct cluster_map *partial = NULL;
	int rc = -EIO;

	*out = NULL;
	for (unsigned i = 0; i < n && wire_left_ms(deadline) > 0; i++) {
		struct cluster_map *m = NULL;

		rc = ask_map(p, &addrs[i], deadline, &m, why);
		if (rc == -ENOMEM)
			break;
		if (rc < 0)
			continue;
		if (cluster_map_complete(m)) {
			cluster_map_free(partial);
			*out = m;
			return 0;
		}
		cluster_map_free(partial);
		partial = m;
	}
	if (partial) {
		wire_why(why, "the cluster is down: CLUSTER SLOTS leaves slots "
			 "without a primary");
		*out = partial;
		return 0;
	}
	return rc;
}

/* Contract in redis/wire.h. */
int route_open(struct rconn_pool *p, uint64_t deadline, char *why)
{
	const struct store_remote *r = &p->remote;
	const struct store_remote_addr *seeds =
		r->kind == STORE_REMOTE_CLUSTER ? r->sentinels : &r->addr;
	unsigned nseeds = r->kind == STORE_REMOTE_CLUSTER ? r->nsentinels : 1;
	pthread_condattr_t attr;
	uint64_t pause = 10;
	int rc;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	rc = -pthread_cond_init(&p->refreshed, &attr);
	pthread_condattr_destroy(&attr);
	if (rc < 0)
		return rc;
	for (;;) {
		struct cluster_map *m = NULL;

		rc = read_map(p, seeds, nseeds, deadline, &m, why);
		if (rc == 0 && cluster_map_complete(m)) {
			lock(&p->lock, LOCK_ENGINE_POOL);
			install_locked(p, m);
			rc = p->nnodes == m->nnodes ? 0 : -ENOMEM;
			unlock(&p->lock, LOCK_ENGINE_POOL);
			if (rc < 0)
				wire_why(why, "out of memory (or more than %u "
					 "primaries)", ROUTE_NODES_MAX);
			return rc;
		}
		cluster_map_free(m);
		if (rc == -ENOMEM || rc == -EACCES || rc == -EPROTO)
			return rc;
		if (wire_left_ms(deadline) == 0)
			return -EIO;
		{
			uint64_t ms = min_u64(pause, wire_left_ms(deadline));
			struct timespec ts = { (time_t)(ms / 1000),
					       (long)(ms % 1000) * 1000000 };

			nanosleep(&ts, NULL);
		}
		pause = min_u64(pause * 2, 500);
	}
}

/* Contract in redis/wire.h. */
void route_close(struct rconn_pool *p)
{
	for (unsigned i = 0; i < p->nnodes; i++) {
		struct rnode *n = p->nodes[i];

		for (unsigned k = 0; k < p->size; k++)
			conn_fini(&n->conns[k]);
		pthread_cond_destroy(&n->freed);
		free(n->conns);
		free(n);
	}
	p->nnodes = 0;
	cluster_map_free(p->map);
	p->map = NULL;
	pthread_cond_destroy(&p->refreshed);
}

/* Contract in redis/wire.h. */
void route_refresh(struct rconn_pool *p, uint64_t gen, uint64_t deadline,
		   const struct rnode *failed)
{
	struct store_remote_addr addrs[ROUTE_NODES_MAX + STORE_REMOTE_SENTINELS_MAX];
	struct timespec ts = { (time_t)(deadline / 1000),
			       (long)(deadline % 1000) * 1000000 };
	struct cluster_map *m = NULL;
	const struct store_remote *r = &p->remote;
	char why[WHY_MAX] = "";
	unsigned n = 0;

	lock(&p->lock, LOCK_ENGINE_POOL);
	while (p->refreshing && p->map_gen == gen)
		if (pthread_cond_timedwait(&p->refreshed, &p->lock, &ts) ==
		    ETIMEDOUT)
			break;
	if (p->map_gen != gen || p->refreshing) {
		unlock(&p->lock, LOCK_ENGINE_POOL);
		return;
	}
	p->refreshing = true;
	/* The primaries of the map first, then every node made, the seeds;
	 * the node that just failed last (a stuck one would take the whole
	 * budget). */
	for (unsigned i = 0; p->map && i < p->map->nnodes && n < ROUTE_NODES_MAX; i++)
		if (p->map_node[i] && p->map_node[i] != failed)
			addrs[n++] = p->map_node[i]->addr;
	for (unsigned i = 0; i < p->nnodes && n < ROUTE_NODES_MAX; i++)
		if (p->nodes[i] != failed)
			addrs[n++] = p->nodes[i]->addr;
	unlock(&p->lock, LOCK_ENGINE_POOL);
	if (r->kind == STORE_REMOTE_CLUSTER)
		for (unsigned i = 0; i < r->nsentinels; i++)
			addrs[n++] = r->sentinels[i];
	else
		addrs[n++] = r->addr;
	if (failed)
		addrs[n++] = failed->addr;

	if (read_map(p, addrs, n, deadline, &m, why) < 0)
		m = NULL;
	lock(&p->lock, LOCK_ENGINE_POOL);
	if (m)
		install_locked(p, m);
	else
		snprintf(p->why, sizeof(p->why), "%s", why);
	p->refreshing = false;
	pthread_cond_broadcast(&p->refreshed);
	unlock(&p->lock, LOCK_ENGINE_POOL);
}

/* Contract in redis/wire.h. */
struct rnode *route_pick(struct rconn_pool *p, int slot, uint64_t *gen)
{
	struct rnode *n = NULL;

	lock(&p->lock, LOCK_ENGINE_POOL);
	*gen = p->map_gen;
	if (p->map) {
		if (slot < 0) {
			for (unsigned i = 0; !n && i < p->map->nnodes &&
					     i < ROUTE_NODES_MAX; i++)
				n = p->map_node[i];
		} else {
			uint16_t o = p->map->owner[slot];

			if (o != CLUSTER_NO_NODE && o < ROUTE_NODES_MAX)
				n = p->map_node[o];
		}
	}
	unlock(&p->lock, LOCK_ENGINE_POOL);
	return n;
}

/* Contract in redis/wire.h. */
struct rnode *route_node(struct rconn_pool *p, const struct store_remote_addr *a)
{
	struct rnode *n;

	lock(&p->lock, LOCK_ENGINE_POOL);
	n = node_get_locked(p, a->host, a->port);
	unlock(&p->lock, LOCK_ENGINE_POOL);
	return n;
}

/* Contract in redis/wire.h. */
void route_moved(struct rconn_pool *p, const struct cluster_redirect *rd)
{
	lock(&p->lock, LOCK_ENGINE_POOL);
	if (p->map && cluster_map_move(p->map, rd->slot, rd->addr.host,
				       rd->addr.port) == 0)
		bind_locked(p);
	unlock(&p->lock, LOCK_ENGINE_POOL);
}

/* Contract in redis/wire.h. */
unsigned route_primaries(struct rconn_pool *p, struct rnode **out, unsigned cap)
{
	unsigned n = 0;

	lock(&p->lock, LOCK_ENGINE_POOL);
	for (unsigned i = 0; p->map && i < p->map->nnodes && n < cap &&
			     i < ROUTE_NODES_MAX; i++) {
		bool serves = false;

		for (unsigned s = 0; s < CLUSTER_SLOTS && !serves; s++)
			serves = p->map->owner[s] == i;
		if (serves && p->map_node[i])
			out[n++] = p->map_node[i];
	}
	unlock(&p->lock, LOCK_ENGINE_POOL);
	return n;
}

/* Keys ------------------------------------------------------------------ */

static bool word_is(const char *w, size_t len, const char *s)
{
	return len == strlen(s) && strncasecmp(w, s, len) == 0;
}

/* Contract in redis/wire.h. */
int route_slot_of(int argc, const char **argv, const size_t *argvlen)
{
	static const char *const keyless[] = {
		"TIME", "PING", "INFO", "FUNCTION", "CLUSTER", "ROLE", "HELLO",
		"AUTH", "ACL", "CONFIG", "CLIENT", "SCRIPT", "DBSIZE", "ECHO",
		"FLUSHALL", "FLUSHDB", "COMMAND", "WAIT", "DEBUG", "ASKING",
		"READONLY", "READWRITE", "LASTSAVE", "MEMORY", "SLOWLOG",
	};
#define LEN(i) (argvlen ? argvlen[i] : strlen(argv[i]))
	int k = 1;

	if (argc < 2)
		return -1;
	for (size_t i = 0; i < sizeof(keyless) / sizeof(keyless[0]); i++)
		if (word_is(argv[0], LEN(0), keyless[i]))
			return -1;
	if (word_is(argv[0], LEN(0), "FCALL") ||
	    word_is(argv[0], LEN(0), "FCALL_RO") ||
	    word_is(argv[0], LEN(0), "EVAL") ||
	    word_is(argv[0], LEN(0), "EVALSHA")) {
		size_t nlen = LEN(2);
		bool some = false;

		/* numkeys, read within its length (binary-safe words) */
		for (size_t i = 0; i < nlen; i++) {
			if (argv[2][i] < '0' || argv[2][i] > '9')
				return -1;
			some |= argv[2][i] != '0';
		}
		if (argc < 4 || !some)
			return -1;
		k = 3;
	} else if (word_is(argv[0], LEN(0), "XREAD") ||
		   word_is(argv[0], LEN(0), "XREADGROUP")) {
		k = -1;
		for (int i = 1; i + 1 < argc && k < 0; i++)
			if (word_is(argv[i], LEN(i), "STREAMS"))
				k = i + 1;
		if (k < 0)
			return -1;
	}
	return (int)cluster_key_slot(argv[k], LEN(k));
#undef LEN
}
