/*
 * wire.h - the transport's own header, private to redis/conn.c,
 * redis/discover.c, redis/wire.c and redis/library.c: a pool's and a
 * connection's structs (each field with what guards it), and the
 * functions of those files the others call, grouped by the file that
 * defines them.  The engine's other files see redis/conn.h only.
 *
 * The files of the transport call one way: library.c -> conn.c ->
 * route.c -> discover.c -> link.c -> wire.c (route.c sets up a node's
 * connections with conn_init; library.c is called back through
 * pool->ensure_node; conn.c calls link.c and wire.c too;
 * link.c is one connection to one server, plain or TLS: redis/link.h).  The design,
 * the locks and the failure classes are told at the top of redis/conn.c.
 */
#ifndef STATEFS_REDIS_WIRE_H
#define STATEFS_REDIS_WIRE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>

#include "redis/cluster.h"
#include "redis/link.h"
#include "redis/redis.h"

/* The most primaries a cluster pool keeps (nodes are never freed while
 * the pool lives: a call holds a pointer to one without the lock). */
#define ROUTE_NODES_MAX 64

struct rnode;

struct rconn {
	struct rconn_pool *pool;  /* immutable */
	/* The primary this connection dials on a cluster (NULL: the pool's
	 * one server).  Immutable for a pool connection; a dedicated one's
	 * is written by its owner, from the map, before each dial. */
	struct rnode *node;
	int slot;                 /* immutable: a dedicated connection's key's slot, or -1 */
	uint64_t timeout_ms;      /* immutable: longest wait for one reply */
	pthread_mutex_t lock;     /* leaf: the swap of link */
	struct link *link;        /* written by the owner under lock */
	atomic_bool interrupted;  /* rconn_interrupt was called */
	unsigned checked;         /* owner: pool->evictions when link was checked */
	struct rconn *next_free;  /* pool->lock; pool connections only */
};

/* One primary of a cluster and its own connections (redis/route.c). */
struct rnode {
	struct store_remote_addr addr; /* immutable */
	struct rconn *conns;           /* immutable array of pool->size */
	struct rconn *free;            /* pool->lock */
	pthread_cond_t freed;          /* a connection went back on free */
	bool lib_ok;                   /* pool->lock: the library checked there */
};

struct rconn_pool {
	struct store_remote remote;   /* immutable copy; wiped at close */
	bool cluster;                 /* immutable after open: a Redis Cluster */
	char where[256];              /* immutable: remote, for messages */
	struct link_tls *tls;         /* immutable: NULL for a plain store */
	atomic_bool connected;        /* the latest exchange succeeded */
	atomic_uint sentinel_next;    /* the Sentinel to ask first */
	atomic_uint evictions;        /* connections refused for the policy */
	atomic_bool evicting;         /* the latest check found it evicting */
	pthread_mutex_t lock;         /* leaf: free, why */
	pthread_cond_t freed;         /* a connection went back on free */
	struct rconn *free;           /* lock */
	char why[WHY_MAX];            /* lock: the latest failure */
	unsigned size;                /* immutable */
	struct rconn *conns;          /* immutable array of @size (one Redis) */
	/* A cluster (redis/route.c): the map and the nodes, all under lock. */
	struct cluster_map *map;      /* lock; NULL on one Redis */
	struct rnode *map_node[ROUTE_NODES_MAX]; /* lock: map->nodes[i]'s */
	struct rnode *nodes[ROUTE_NODES_MAX];    /* lock: every node made */
	unsigned nnodes;              /* lock */
	uint64_t map_gen;             /* lock: maps installed */
	bool refreshing;              /* lock: a CLUSTER SLOTS under way */
	pthread_cond_t refreshed;     /* a refresh ended */
	/* The library each primary must run (redis/library.c), set once by
	 * the first rconn_library_ensure that succeeded; NULL: none. */
	int (*ensure_node)(struct rconn_pool *p, struct rnode *n, char *err,
			   size_t errlen);                 /* lock */
	const char *lib_name, *lib_code; /* lock: written with ensure_node,
					  * then immutable */
	uint64_t lib_version;            /* likewise */
};

static inline uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* redis/wire.c */

/* Local CLOCK_MONOTONIC in ms, which every deadline of the transport
 * is on. */
uint64_t wire_now_ms(void);

/* Milliseconds until @deadline, 0 once it has passed. */
uint64_t wire_left_ms(uint64_t deadline);

/* Format a failure into @why (WHY_MAX bytes), on one line. */
void wire_why(char *why, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Is @rep the error @code (its first word)? */
bool wire_is_error(const redisReply *rep, const char *code);

/* Is @rep the string or status @s? */
bool wire_str_is(const redisReply *rep, const char *s);

/* redis/discover.c */

/*
 * A new link to the primary of @p, found (through the Sentinels, for
 * sentinel://), authenticated and checked (ROLE or HELLO, then the
 * maxmemory-policy), each step within store_timeout and before
 * @deadline; its timeout is then set by the caller per command.
 * 0 with *@out; -EIO or -EAGAIN (unreachable, or not the primary: worth
 * another attempt), -EACCES (credentials refused or missing), -EPERM
 * (an evicting policy: p->evictions counts it), -EPROTO (TLS refused:
 * a certificate, the name, a server without TLS), -ENOMEM; the failure
 * in @why.  Lock-free: only the pool's atomics are touched.
 */
int discover_primary(struct rconn_pool *p, uint64_t deadline,
		     struct link **out, char *why);

/*
 * A new link to the node @a, authenticated; when @primary, checked as
 * discover_primary checks (the primary, its policy).  Same returns.
 */
int discover_node(struct rconn_pool *p, const struct store_remote_addr *a,
		  uint64_t deadline, bool primary, struct link **out, char *why);

/* Does @ln's server say cluster_enabled:1 in INFO cluster?  0 with
 * *@on, -EIO (no reply), -EPERM (INFO refused), -ENOMEM. */
int discover_cluster_enabled(struct link *ln, bool *on, char *why);

/* The map of CLUSTER SLOTS asked on @ln (whose server is at @host).
 * 0 with *@out, -EIO, -EPROTO (not a map), -ENOMEM; @why. */
int discover_slots(struct link *ln, const char *host, struct cluster_map **out,
		   char *why);

/* redis/route.c: the map and the nodes of a cluster pool. */

/* Init @p's cluster part and read the first map from the seeds (or the
 * one redis:// node) before @deadline: 0, or -EIO (no seed answered with
 * a map covering every slot), -EACCES, -EPROTO, -ENOMEM with @why. */
int route_open(struct rconn_pool *p, uint64_t deadline, char *why);

/* Free @p's nodes and map (no call in flight). */
void route_close(struct rconn_pool *p);

/* The slot of the first key of a command, or -1 for one without a key. */
int route_slot_of(int argc, const char **argv, const size_t *argvlen);

/* The primary that serves @slot (-1: any primary), and the map's
 * generation in *@gen; NULL when no node serves it (cluster down). */
struct rnode *route_pick(struct rconn_pool *p, int slot, uint64_t *gen);

/* The node at @a, made when new; NULL when out of room or memory. */
struct rnode *route_node(struct rconn_pool *p, const struct store_remote_addr *a);

/* Record a MOVED's slot -> node in the map. */
void route_moved(struct rconn_pool *p, const struct cluster_redirect *rd);

/* Read a new map (CLUSTER SLOTS of any node known, @failed last: the
 * node whose failure asks, or NULL) unless one was installed since
 * generation @gen, or wait for the one under way; at most until
 * @deadline.  No lock held across the network. */
void route_refresh(struct rconn_pool *p, uint64_t gen, uint64_t deadline,
		   const struct rnode *failed);

/* Copy the primaries of the current map into @out (at most @cap). */
unsigned route_primaries(struct rconn_pool *p, struct rnode **out, unsigned cap);

/* redis/conn.c, for route.c and library.c. */

/* Init @c as a connection of @p (to @n on a cluster, else NULL). */
int conn_init(struct rconn *c, struct rconn_pool *p, struct rnode *n,
	      uint64_t timeout_ms);

/* Drop @c's link (its owner only) and destroy it. */
void conn_fini(struct rconn *c);

/* rconn_pool_call on the primary @n of a cluster pool, no routing: for
 * commands that name their node (FUNCTION, TIME). */
int conn_node_call(struct rconn_pool *p, struct rnode *n, uint64_t budget_ms,
		   int argc, const char **argv, const size_t *argvlen,
		   redisReply **reply);

#endif /* STATEFS_REDIS_WIRE_H */
