/*
 * conn.c - the transport of a shared store: connections to the current
 * Redis primary, bounded in time, that survive restarts and failovers:
 * the pool, dedicated connections, a call's deadline and its retries.
 *
 * What it owns
 * ------------
 * A pool (struct rconn_pool): a copy of the store options (address or
 * Sentinels, user, password, store_timeout), a fixed array of connections
 * for the threads that serve requests and a free list of them, the
 * "connected" flag .stats reads, and the latest failure's text.  Dedicated
 * connections (rconn_open) belong to one reader thread each and borrow
 * the pool's options and its TLS settings (struct link_tls: read once,
 * when the pool opens).  A connection (struct rconn) owns one link
 * (redis/link.c: a socket, TLS on it for rediss:// and sentinels://,
 * hiredis's formatting and reader) at most; NULL until it first
 * connects and after it failed.
 *
 * Threads and locks
 * -----------------
 * No thread of its own: everything runs on the caller's thread.
 *   pool->lock  guards the free list and pool->why.  Held for a few
 *               instructions; waiting for a free connection sleeps on
 *               pool->freed, which releases it.
 *   conn->lock  guards the swap of conn->link against rconn_interrupt
 *               (which shuts the socket down from another thread).  The
 *               owning thread writes link only under it and reads it
 *               without (no other thread writes it).
 * Both are leaves, never held together and never across a network call:
 * a new link is dialled, authenticated and checked before it is
 * swapped in, and commands run with no lock held (the connection is the
 * caller's alone while it is off the free list).  In the store's lock
 * order they come after everything, and no store lock may be held while
 * calling in here at all (every call may wait on the network), so they
 * are never held while a store lock is taken.  Both take their levels
 * (LOCK_ENGINE_POOL, LOCK_ENGINE_CONN) from the store's lock order
 * (store/engine.h), which test builds check: taking either while any
 * store lock is held is reported there.
 *
 * Finding the primary
 * -------------------
 * redis/discover.c finds, dials and greets it (Sentinels, AUTH, ROLE
 * or HELLO, the maxmemory-policy); this file calls it for every new
 * link.  The files of the transport call one way, library.c ->
 * conn.c -> discover.c -> link.c -> wire.c (redis/wire.h).
 *
 * Time and failure
 * ----------------
 * Every call has a deadline (its budget from now, on CLOCK_MONOTONIC).
 * Connecting takes at most store_timeout per attempt (the connect and
 * the TLS handshake, then the link's timeout for AUTH and ROLE); a
 * command waits at most the connection's timeout for its reply (the
 * socket's SO_RCVTIMEO via link_set_timeout), never past the deadline.  Failures fall in three
 * classes:
 *  - the connection is gone or stuck (no reply: refused, reset, EOF,
 *    timeout, a TLS handshake refused) or the server is not the primary
 *    or not ready (READONLY, LOADING, MASTERDOWN, BUSY, NOAUTH): drop
 *    the link, reconnect
 *    (re-discovering the primary) and send again, pausing 10 ms doubling
 *    to 500 ms between failed attempts to connect, while the deadline
 *    allows; then -EIO.  The command may have run before its reply was
 *    lost, so the caller makes a repeat harmless (operation ids);
 *  - any other reply, errors included, is the caller's to judge;
 *  - out of memory: -ENOMEM at once.
 * A cluster
 * ---------
 * On a Redis Cluster (cluster://, or a redis:// node whose INFO cluster
 * says cluster_enabled:1) the pool is a pool of nodes (redis/route.c):
 * the slot map of CLUSTER SLOTS, one struct rnode per primary with
 * @size connections of its own, so that calls waiting on a primary that
 * fails never take the connections other shards' calls need.  A call
 * (cluster_call) goes to the primary of its first key's slot
 * (route_slot_of), each attempt once through call_until, and judges:
 *  - MOVED: the slot recorded, the map read again (once per change, not
 *    per call: route_refresh's generation), sent again at once;
 *  - ASK: a key read (XRANGE, XREAD, HGET, HMGET, TYPE, EXISTS, GET) goes
 *    once to that node after ASKING; a function does not (on the
 *    importing node it would read keys not moved yet as absent,
 *    docs/design.md): it waits and goes to the owner again, until MOVED
 *    or its budget ends;
 *  - TRYAGAIN, CLUSTERDOWN, a function's "non local key", a connection
 *    lost or refused, READONLY and the first class above: pause, read
 *    the map again, send again while the budget lasts, then -EIO.
 * A primary the map names for the first time runs the Functions library
 * (pool->ensure_node, set by redis/library.c) before its first call.
 *
 * At start (rconn_pool_open) refused credentials are final (-EACCES),
 * as are an evicting policy (-EPERM), a TLS file that cannot be used
 * (-EINVAL) and a TLS refusal (-EPROTO): retrying cannot fix them.  Later they count as the first class, so a
 * password changed on the server ends in -EIO within the budget.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "store/engine.h"
#include "redis/conn.h"
#include "redis/wire.h"

/* Pause between failed attempts to connect: first and longest. */
#define PAUSE_FIRST_MS 10
#define PAUSE_MAX_MS 500

/* Time and failures ------------------------------------------------------ */

static void sleep_ms(uint64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* A connection failed: remember why and say disconnected. */
static void note_failure(struct rconn_pool *p, const char *why)
{
	atomic_store(&p->connected, false);
	lock(&p->lock, LOCK_ENGINE_POOL);
	snprintf(p->why, sizeof(p->why), "%s", why);
	unlock(&p->lock, LOCK_ENGINE_POOL);
}

/* Errors that say "not here, or not now": another connection, later,
 * may succeed, and the command did not run. */
static bool is_transient(const redisReply *rep)
{
	return wire_is_error(rep, "READONLY") || wire_is_error(rep, "LOADING") ||
	       wire_is_error(rep, "MASTERDOWN") || wire_is_error(rep, "BUSY") ||
	       wire_is_error(rep, "NOAUTH");
}

/* Connections -------------------------------------------------------------- */

/* Contract in redis/wire.h. */
int conn_init(struct rconn *c, struct rconn_pool *p, struct rnode *n,
	      uint64_t timeout_ms)
{
	c->pool = p;
	c->node = n;
	c->slot = -1;
	c->timeout_ms = timeout_ms ? timeout_ms : p->remote.timeout_ms;
	c->link = NULL;
	atomic_init(&c->interrupted, false);
	c->checked = 0;
	c->next_free = NULL;
	return -pthread_mutex_init(&c->lock, NULL);
}

/* Swap @ln in as @c's link (the owner only). */
static void conn_set(struct rconn *c, struct link *ln)
{
	lock(&c->lock, LOCK_ENGINE_CONN);
	c->link = ln;
	unlock(&c->lock, LOCK_ENGINE_CONN);
}

/* Drop @c's link, if any (the owner only). */
static void conn_drop(struct rconn *c)
{
	struct link *ln;

	lock(&c->lock, LOCK_ENGINE_CONN);
	ln = c->link;
	c->link = NULL;
	unlock(&c->lock, LOCK_ENGINE_CONN);
	link_close(ln);
}

/* Contract in redis/wire.h. */
void conn_fini(struct rconn *c)
{
	conn_drop(c);
	pthread_mutex_destroy(&c->lock);
}

/* A new link for @c: to its node on a cluster (a dedicated connection's
 * node taken from the map for its slot first), else to the primary. */
static int conn_dial(struct rconn *c, uint64_t deadline, struct link **ln,
		     char *why)
{
	struct rconn_pool *p = c->pool;

	if (!p->cluster)
		return discover_primary(p, deadline, ln, why);
	if (c->slot >= -1 && c->node == NULL) {
		uint64_t gen;

		c->node = route_pick(p, c->slot, &gen);
		if (!c->node) {
			wire_why(why, "the cluster is down: no primary "
				 "serves slot %d", c->slot);
			route_refresh(p, gen, deadline, NULL);
			return -EAGAIN;
		}
	}
	return discover_node(p, &c->node->addr, deadline, true, ln, why);
}

/*
 * The command loop of rconn_call and rconn_pool_call: send on @c,
 * reconnecting after a failure, until a reply or @deadline.  Contract of
 * rconn_pool_call.  @once: return -EAGAIN with @why after the first
 * failure instead (a cluster's call, which routes again).
 */
static int call_until(struct rconn *c, uint64_t deadline, int argc,
		      const char **argv, const size_t *argvlen,
		      redisReply **reply, bool once, char *why)
{
	struct rconn_pool *p = c->pool;
	uint64_t pause = 0;

	*reply = NULL;
	if (argc < 1 || !argv)
		return -EINVAL;
	for (;;) {
		uint64_t left = wire_left_ms(deadline);
		redisReply *rep;
		int rc;

		if (atomic_load(&c->interrupted))
			return -ECANCELED;
		if (left == 0) {
			if (!why[0])
				wire_why(why, "no reply within the time budget");
			note_failure(p, why);
			return -EIO;
		}
		/* Another connection found the policy evicting since this
		 * one was checked: check it again before it serves. */
		if (c->link && c->checked != atomic_load(&p->evictions))
			conn_drop(c);
		if (!c->link) {
			struct link *ln = NULL;
			unsigned ev = atomic_load(&p->evictions);

			rc = conn_dial(c, deadline, &ln, why);
			if (rc == -ENOMEM)
				return rc;
			/* Said once, when it starts: every call fails until
			 * the policy is noeviction again. */
			if (rc == -EPERM && !atomic_exchange(&p->evicting, true))
				fprintf(stderr, "statefs: -o store=%s: %s; calls "
					"fail with EIO until it is\n", p->where,
					why);
			if (rc < 0) {
				note_failure(p, why);
				if (once)
					return -EAGAIN;
				/* A dedicated connection on a cluster: its
				 * slot's primary may have changed. */
				if (p->cluster && c->slot >= -1) {
					uint64_t gen;

					(void)route_pick(p, c->slot, &gen);
					route_refresh(p, gen, deadline, c->node);
					c->node = NULL;
				}
				pause = pause ? min_u64(pause * 2, PAUSE_MAX_MS)
					      : PAUSE_FIRST_MS;
				sleep_ms(min_u64(pause, wire_left_ms(deadline)));
				continue;
			}
			conn_set(c, ln);
			c->checked = ev;
			atomic_store(&p->evicting, false);
			/* An interrupt may have come while dialling. */
			continue;
		}
		if (link_set_timeout(c->link, min_u64(left, c->timeout_ms)) < 0) {
			wire_why(why, "cannot set the socket timeout");
			conn_drop(c);
			continue;
		}
		rep = link_exchange(c->link, argc, argv, argvlen, why);
		if (!rep) {
			bool oom = link_failure(c->link) == LINK_OOM;

			/* The reply may still come: this link is done. */
			conn_drop(c);
			if (oom)
				return -ENOMEM;
			note_failure(p, why);
			if (once)
				return -EAGAIN;
			continue;
		}
		if (is_transient(rep)) {
			wire_why(why, "%s", rep->str);
			freeReplyObject(rep);
			conn_drop(c);
			note_failure(p, why);
			if (once)
				return -EAGAIN;
			pause = pause ? min_u64(pause * 2, PAUSE_MAX_MS)
				      : PAUSE_FIRST_MS;
			sleep_ms(min_u64(pause, wire_left_ms(deadline)));
			continue;
		}
		atomic_store(&p->connected, true);
		*reply = rep;
		return 0;
	}
}

/* The pool ---------------------------------------------------------------- */

/* Take a free connection of @p, waiting until @deadline.  NULL when none
 * came free in time. */
static struct rconn *take(struct rconn_pool *p, struct rnode *n,
			  uint64_t deadline)
{
	struct timespec ts = { (time_t)(deadline / 1000),
			       (long)(deadline % 1000) * 1000000 };
	struct rconn **free_ = n ? &n->free : &p->free;
	pthread_cond_t *freed = n ? &n->freed : &p->freed;
	struct rconn *c;

	lock(&p->lock, LOCK_ENGINE_POOL);
	while (!*free_)
		if (pthread_cond_timedwait(freed, &p->lock, &ts) == ETIMEDOUT &&
		    !*free_)
			break;
	c = *free_;
	if (c)
		*free_ = c->next_free;
	unlock(&p->lock, LOCK_ENGINE_POOL);
	return c;
}

static void give_back(struct rconn_pool *p, struct rconn *c)
{
	struct rconn **free_ = c->node ? &c->node->free : &p->free;

	lock(&p->lock, LOCK_ENGINE_POOL);
	c->next_free = *free_;
	*free_ = c;
	pthread_cond_signal(c->node ? &c->node->freed : &p->freed);
	unlock(&p->lock, LOCK_ENGINE_POOL);
}

/* A cluster ----------------------------------------------------------------- */

static void pause_for(uint64_t *pause, uint64_t deadline)
{
	*pause = *pause ? min_u64(*pause * 2, PAUSE_MAX_MS) : PAUSE_FIRST_MS;
	sleep_ms(min_u64(*pause, wire_left_ms(deadline)));
}

/* A key read that may follow an ASK once (design doc: a function may
 * not, it would decide on the importing node on keys not moved yet). */
static bool ask_follows(const char *cmd)
{
	static const char *const reads[] = { "XRANGE", "XREVRANGE", "XREAD",
					     "HGET", "HMGET", "HGETALL",
					     "TYPE", "EXISTS", "GET" };

	for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++)
		if (strcasecmp(cmd, reads[i]) == 0)
			return true;
	return false;
}

/* Errors of a cluster that pass: wait, read the map again, send again. */
static bool cluster_transient(const redisReply *rep)
{
	return wire_is_error(rep, "TRYAGAIN") ||
	       wire_is_error(rep, "CLUSTERDOWN") ||
	       (rep->type == REDIS_REPLY_ERROR &&
		strstr(rep->str, "non local key") != NULL);
}

/* Make @n run the pool's library before its first call (a primary the
 * map names for the first time).  0, or -EIO. */
static int node_ready(struct rconn_pool *p, struct rnode *n, char *why)
{
	char err[WHY_MAX];
	bool ok;
	int rc;

	int (*ensure)(struct rconn_pool *, struct rnode *, char *, size_t);

	lock(&p->lock, LOCK_ENGINE_POOL);
	ok = n->lib_ok;
	ensure = p->ensure_node;
	unlock(&p->lock, LOCK_ENGINE_POOL);
	if (ok || !ensure)
		return 0;
	rc = ensure(p, n, err, sizeof(err));
	if (rc == 0) {
		lock(&p->lock, LOCK_ENGINE_POOL);
		n->lib_ok = true;
		unlock(&p->lock, LOCK_ENGINE_POOL);
		return 0;
	}
	wire_why(why, "%s", err);
	return rc == -ENOMEM ? rc : -EIO;
}

/*
 * rconn_pool_call on a cluster: to the primary of the slot of the first
 * key (@slot; -1: any primary; @fixed: that node, no routing), following
 * MOVED (the slot recorded, the map read again once, sent again there),
 * ASK (a key read: once to that node after ASKING; anything else waits
 * and goes to the owner again), and treating TRYAGAIN, CLUSTERDOWN, a
 * function's non local key and a connection lost as today's first
 * class: pause, read the map again, send again while the budget lasts.
 */
static int cluster_call(struct rconn_pool *p, int slot, struct rnode *fixed,
			uint64_t deadline, int argc, const char **argv,
			const size_t *argvlen, redisReply **reply)
{
	struct store_remote_addr ask = { "", 0 };
	char why[WHY_MAX] = "";
	uint64_t pause = 0;
	bool relib = false;

	for (;;) {
		struct rnode *n = fixed;
		uint64_t gen = 0;
		redisReply *rep = NULL;
		struct cluster_redirect rd;
		struct rconn *c;
		int rc;

		if (wire_left_ms(deadline) == 0) {
			if (!why[0])
				wire_why(why, "no reply within the time budget");
			note_failure(p, why);
			return -EIO;
		}
		if (ask.port) {
			n = route_node(p, &ask);
		} else if (!n) {
			n = route_pick(p, slot, &gen);
			if (!n) {
				wire_why(why, "the cluster is down: no primary "
					 "serves slot %d", slot);
				note_failure(p, why);
				pause_for(&pause, deadline);
				route_refresh(p, gen, deadline, NULL);
				continue;
			}
		}
		if (!n)
			return -ENOMEM;
		if (!fixed && (rc = node_ready(p, n, why)) < 0) {
			if (rc == -ENOMEM)
				return rc;
			note_failure(p, why);
			pause_for(&pause, deadline);
			route_refresh(p, gen, deadline, n);
			continue;
		}
		c = take(p, n, deadline);
		if (!c) {
			wire_why(why, "every connection to %s:%u stayed busy",
				 n->addr.host, (unsigned)n->addr.port);
			continue;
		}
		if (ask.port) {
			const char *av[] = { "ASKING" };

			rc = call_until(c, deadline, 1, av, NULL, &rep, true, why);
			if (rc == 0) {
				freeReplyObject(rep);
				rep = NULL;
			}
			ask.port = 0;
		} else {
			rc = 0;
		}
		if (rc == 0)
			rc = call_until(c, deadline, argc, argv, argvlen, &rep,
					true, why);
		give_back(p, c);
		if (rc == -ENOMEM || rc == -EINVAL)
			return rc;
		if (rc < 0) {
			/* Lost, refused, a replica now: the map may have
			 * changed (a failover). */
			if (!fixed)
				route_refresh(p, gen, deadline, n);
			pause_for(&pause, deadline);
			continue;
		}
		rc = cluster_redirect_parse(rep, &rd);
		if (rc == CLUSTER_REDIRECT_MOVED || rc == CLUSTER_REDIRECT_ASK) {
			if (!rd.addr.host[0])
				snprintf(rd.addr.host, sizeof(rd.addr.host),
					 "%s", n->addr.host);
			wire_why(why, "%s", rep->str);
			freeReplyObject(rep);
			if (fixed) {
				/* A command that names its node has no slot. */
				pause_for(&pause, deadline);
				continue;
			}
			if (rc == CLUSTER_REDIRECT_MOVED) {
				route_moved(p, &rd);
				route_refresh(p, gen, deadline, NULL);
				/* The newest word is the MOVED's. */
				route_moved(p, &rd);
			} else if (ask_follows(argv[0])) {
				ask = rd.addr;
			} else {
				pause_for(&pause, deadline);
			}
			continue;
		}
		if (cluster_transient(rep)) {
			wire_why(why, "%s", rep->str);
			freeReplyObject(rep);
			note_failure(p, why);
			pause_for(&pause, deadline);
			route_refresh(p, gen, deadline, NULL);
			continue;
		}
		/* A node that lost its data lost the library too: load it
		 * there again, once, and send again. */
		if (!fixed && !relib && rep->type == REDIS_REPLY_ERROR &&
		    strstr(rep->str, "Function not found")) {
			bool hook;

			lock(&p->lock, LOCK_ENGINE_POOL);
			hook = p->ensure_node != NULL;
			if (hook)
				n->lib_ok = false;
			unlock(&p->lock, LOCK_ENGINE_POOL);
			if (hook) {
				relib = true;
				freeReplyObject(rep);
				continue;
			}
		}
		*reply = rep;
		return 0;
	}
}

/* Contract in redis/wire.h. */
int conn_node_call(struct rconn_pool *p, struct rnode *n, uint64_t budget_ms,
		   int argc, const char **argv, const size_t *argvlen,
		   redisReply **reply)
{
	uint64_t deadline = wire_now_ms() + (budget_ms ? budget_ms
						  : p->remote.timeout_ms);

	*reply = NULL;
	if (argc < 1 || !argv)
		return -EINVAL;
	return cluster_call(p, -1, n, deadline, argc, argv, argvlen, reply);
}

/*
 * Is @p's store a Redis Cluster?  cluster:// says so; a redis:// or
 * rediss:// node says so in INFO cluster (asked on a link of its own,
 * retried until @deadline while it cannot be reached); other kinds are
 * not.  0 with p->cluster set, or -EACCES, -EPERM, -EPROTO, -ENOMEM, -EIO.
 */
static int cluster_or_not(struct rconn_pool *p, uint64_t deadline, char *why)
{
	uint64_t pause = 0;

	p->cluster = p->remote.kind == STORE_REMOTE_CLUSTER;
	if (p->remote.kind != STORE_REMOTE_TCP)
		return 0;
	for (;;) {
		struct link *ln = NULL;
		bool on = false;
		int rc = discover_node(p, &p->remote.addr, deadline, false, &ln,
				       why);

		if (rc == 0) {
			rc = discover_cluster_enabled(ln, &on, why);
			link_close(ln);
			if (rc == 0)
				p->cluster = on;
		}
		/* INFO refused: the policy check says so, as it did. */
		if (rc == 0 || rc == -EPERM)
			return 0;
		if (rc == -ENOMEM || rc == -EACCES || rc == -EPROTO ||
		    wire_left_ms(deadline) == 0)
			return rc;
		pause_for(&pause, deadline);
	}
}

/*
 * Connect one connection of each primary of the map now, so that what
 * only connecting tells (credentials, the policy, TLS) is told at start:
 * those refusals are final; a primary that cannot be reached is not (its
 * calls retry, its slots wait).  0 or the final errno with @why.
 */
static int cluster_greet(struct rconn_pool *p, uint64_t deadline, char *why)
{
	struct rnode *nodes[ROUTE_NODES_MAX];
	unsigned n = route_primaries(p, nodes, ROUTE_NODES_MAX);

	for (unsigned i = 0; i < n; i++) {
		struct link *ln = NULL;
		int rc = discover_node(p, &nodes[i]->addr, deadline, true, &ln,
				       why);

		if (rc == -ENOMEM || rc == -EACCES || rc == -EPERM ||
		    rc == -EPROTO)
			return rc;
		if (rc == 0)
			conn_set(nodes[i]->free, ln);
		why[0] = '\0';
	}
	return 0;
}

/* Contract in redis/conn.h. */
int rconn_pool_open(const struct store_remote *r, unsigned size,
		    struct rconn_pool **out, char *err, size_t errlen)
{
	struct rconn_pool *p = NULL;
	pthread_condattr_t attr;
	char why[WHY_MAX] = "";
	uint64_t deadline, pause = 0;
	unsigned inited = 0;
	int rc = -EINVAL;

	if (errlen > 0)
		err[0] = '\0';
	if (r->kind == STORE_REMOTE_NONE || size == 0 || r->timeout_ms == 0) {
		wire_why(why, "no shared store given");
		goto fail;
	}
	rc = -ENOMEM;
	p = st_calloc(1, sizeof(*p));
	if (!p || !(p->conns = st_calloc(size, sizeof(*p->conns)))) {
		wire_why(why, "out of memory");
		goto fail;
	}
	p->remote = *r;
	p->size = size;
	store_remote_describe(p->where, sizeof(p->where), r);
	/* The TLS files are read once, now: a bad one is final. */
	rc = link_tls_new(r, &p->tls, why);
	if (rc < 0)
		goto fail;
	rc = -ENOMEM;
	atomic_init(&p->connected, false);
	atomic_init(&p->sentinel_next, 0);
	atomic_init(&p->evictions, 0);
	atomic_init(&p->evicting, false);
	if (pthread_mutex_init(&p->lock, NULL) != 0)
		goto fail_nolock;
	/* Waits for a free connection end at a CLOCK_MONOTONIC deadline. */
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	rc = -pthread_cond_init(&p->freed, &attr);
	pthread_condattr_destroy(&attr);
	if (rc < 0)
		goto fail_lock;
	for (; inited < size; inited++) {
		rc = conn_init(&p->conns[inited], p, NULL, r->timeout_ms);
		if (rc < 0)
			goto fail_conns;
		p->conns[inited].next_free = p->free;
		p->free = &p->conns[inited];
	}

	/* Connect one now: what only connecting tells is told at start.
	 * It is the one on top of the free list, the first to be used. */
	deadline = wire_now_ms() + r->timeout_ms;
	rc = cluster_or_not(p, deadline, why);
	if (rc == 0 && p->cluster) {
		rc = route_open(p, deadline, why);
		if (rc == 0)
			rc = cluster_greet(p, deadline, why);
		if (rc == 0) {
			atomic_store(&p->connected, true);
			*out = p;
			return 0;
		}
		route_close(p);
		goto fail_conns;
	}
	if (rc < 0)
		goto fail_conns;
	for (;;) {
		struct link *ln = NULL;

		rc = discover_primary(p, deadline, &ln, why);
		if (rc == 0) {
			conn_set(p->free, ln);
			atomic_store(&p->connected, true);
			*out = p;
			return 0;
		}
		if (rc == -ENOMEM || rc == -EACCES || rc == -EPERM ||
		    rc == -EPROTO || wire_left_ms(deadline) == 0)
			break;
		pause = pause ? min_u64(pause * 2, PAUSE_MAX_MS) : PAUSE_FIRST_MS;
		sleep_ms(min_u64(pause, wire_left_ms(deadline)));
	}
fail_conns:
	if (rc != -ENOMEM && rc != -EACCES && rc != -EPERM && rc != -EPROTO &&
	    rc != -EINVAL)
		rc = -EIO;
	while (inited > 0)
		pthread_mutex_destroy(&p->conns[--inited].lock);
	pthread_cond_destroy(&p->freed);
fail_lock:
	pthread_mutex_destroy(&p->lock);
fail_nolock:
fail:
	if (errlen > 0) {
		if (p && p->where[0])
			snprintf(err, errlen, "statefs: -o store=%s: %s%s",
				 p->where, rc == -EIO ? (p->cluster ?
				 "no map of the cluster in store_timeout: " :
				 "no primary reached in store_timeout: ") : "",
				 why);
		else
			snprintf(err, errlen, "statefs: shared store: %s", why);
		for (char *ch = err; *ch; ch++)
			if ((unsigned char)*ch < ' ' || *ch == 0x7f)
				*ch = '?';
	}
	if (p) {
		link_tls_free(p->tls);
		explicit_bzero(&p->remote, sizeof(p->remote));
		free(p->conns);
		free(p);
	}
	return rc;
}

void rconn_pool_close(struct rconn_pool *p)
{
	if (!p)
		return;
	if (p->cluster)
		route_close(p);
	for (unsigned i = 0; i < p->size; i++) {
		conn_drop(&p->conns[i]);
		pthread_mutex_destroy(&p->conns[i].lock);
	}
	pthread_cond_destroy(&p->freed);
	pthread_mutex_destroy(&p->lock);
	link_tls_free(p->tls);
	explicit_bzero(&p->remote, sizeof(p->remote));
	free(p->conns);
	free(p);
}

bool rconn_pool_is_cluster(const struct rconn_pool *p)
{
	return p->cluster;
}

bool rconn_pool_connected(const struct rconn_pool *p)
{
	return atomic_load(&p->connected);
}

const char *rconn_pool_where(const struct rconn_pool *p)
{
	return p->where;
}

void rconn_pool_last_error(struct rconn_pool *p, char *buf, size_t cap)
{
	if (cap == 0)
		return;
	lock(&p->lock, LOCK_ENGINE_POOL);
	snprintf(buf, cap, "%s", p->why);
	unlock(&p->lock, LOCK_ENGINE_POOL);
}

/* Contract in redis/conn.h. */
int rconn_pool_call(struct rconn_pool *p, uint64_t budget_ms, int argc,
		    const char **argv, const size_t *argvlen,
		    redisReply **reply)
{
	uint64_t deadline = wire_now_ms() + (budget_ms ? budget_ms
						  : p->remote.timeout_ms);
	struct rconn *c;
	int rc;

	char why[WHY_MAX] = "";

	*reply = NULL;
	if (argc < 1 || !argv)
		return -EINVAL;
	if (p->cluster)
		return cluster_call(p, route_slot_of(argc, argv, argvlen), NULL,
				    deadline, argc, argv, argvlen, reply);
	c = take(p, NULL, deadline);
	if (!c) {
		note_failure(p, "every connection stayed busy for the budget");
		return -EIO;
	}
	rc = call_until(c, deadline, argc, argv, argvlen, reply, false, why);
	give_back(p, c);
	return rc;
}

/* Commands @first..@n of one pipeline on @c (it has a link), written at
 * once, their replies read in order.  0, or -ENOMEM, -EIO, -ECANCELED:
 * the link dropped, every reply freed (those before @first too). */
static int pipe_on(struct rconn *c, uint64_t deadline, size_t first,
		   size_t n, const int *argc, const char **const *argv,
		   redisReply **reply, char *why)
{
	size_t got = first;
	int rc = 0;

	if (atomic_load(&c->interrupted)) {
		wire_why(why, "stopped");
		rc = -ECANCELED;
	}
	for (size_t i = first; rc == 0 && i < n; i++)
		if (link_queue(c->link, argc[i], argv[i], NULL) < 0)
			rc = -ENOMEM;
	for (; rc == 0 && got < n; got++) {
		uint64_t left = wire_left_ms(deadline);

		if (left == 0 || link_set_timeout(c->link, min_u64(left, c->timeout_ms)) < 0) {
			wire_why(why, "no reply within the time budget");
			rc = -EIO;
			break;
		}
		rc = link_read(c->link, &reply[got]);
		if (rc) {
			wire_why(why, "%s", link_why(c->link));
			rc = rc == -ENOMEM ? -ENOMEM : -EIO;
		} else if (is_transient(reply[got])) {
			wire_why(why, "%s", reply[got]->str);
			rc = -EIO;
		}
	}
	if (rc == 0) {
		atomic_store(&c->pool->connected, true);
		return 0;
	}
	for (size_t i = 0; i < got; i++) {
		freeReplyObject(reply[i]);
		reply[i] = NULL;
	}
	conn_drop(c);
	note_failure(c->pool, why);
	return rc;
}

/* Contract in redis/conn.h. */
int rconn_pool_pipeline(struct rconn_pool *p, uint64_t budget_ms, size_t n,
			const int *argc, const char **const *argv,
			redisReply **reply)
{
	uint64_t deadline = wire_now_ms() + (budget_ms ? budget_ms
						  : p->remote.timeout_ms);
	char why[WHY_MAX] = "";
	struct rconn *c;
	size_t first = 0;
	int rc = 0;

	memset(reply, 0, n * sizeof(*reply));
	if (p->cluster || n == 0 || !argc || !argv)
		return -EINVAL;
	c = take(p, NULL, deadline);
	if (!c) {
		note_failure(p, "every connection stayed busy for the budget");
		return -EIO;
	}
	/* A connection to dial (or check again): the first command alone,
	 * as any call (transient errors waited out), the others after. */
	if (!c->link || c->checked != atomic_load(&p->evictions)) {
		rc = call_until(c, deadline, argc[0], argv[0], NULL, &reply[0],
				false, why);
		first = 1;
	}
	if (rc == 0 && first < n)
		rc = pipe_on(c, deadline, first, n, argc, argv, reply, why);
	give_back(p, c);
	return rc;
}

/* Contract in redis/conn.h. */
int rconn_pool_call_slot(struct rconn_pool *p, unsigned slot, uint64_t budget_ms,
			 int argc, const char **argv, const size_t *argvlen,
			 redisReply **reply)
{
	uint64_t deadline = wire_now_ms() + (budget_ms ? budget_ms
						  : p->remote.timeout_ms);

	*reply = NULL;
	if (!p->cluster)
		return rconn_pool_call(p, budget_ms, argc, argv, argvlen, reply);
	if (argc < 1 || !argv || slot >= CLUSTER_SLOTS)
		return -EINVAL;
	return cluster_call(p, (int)slot, NULL, deadline, argc, argv, argvlen,
			    reply);
}

/* Dedicated connections ------------------------------------------------------ */

/* Contract in redis/conn.h. */
int rconn_open(struct rconn_pool *p, uint64_t timeout_ms, struct rconn **out)
{
	struct rconn *c = st_calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return -ENOMEM;
	rc = conn_init(c, p, NULL, timeout_ms);
	if (rc < 0) {
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* Contract in redis/conn.h. */
int rconn_open_key(struct rconn_pool *p, const char *key, uint64_t timeout_ms,
		   struct rconn **out)
{
	int rc = rconn_open(p, timeout_ms, out);

	if (rc == 0 && p->cluster && key)
		(*out)->slot = (int)cluster_key_slot(key, strlen(key));
	return rc;
}

/* Contract in redis/conn.h. */
const void *rconn_pool_node_of(struct rconn_pool *p, const char *key)
{
	uint64_t gen;

	if (!p->cluster)
		return NULL;
	return route_pick(p, (int)cluster_key_slot(key, strlen(key)), &gen);
}

/* Contract in redis/conn.h. */
void rconn_pool_moved(struct rconn_pool *p, const redisReply *rep)
{
	struct cluster_redirect rd;
	uint64_t gen;

	if (!p->cluster || cluster_redirect_parse(rep, &rd) != CLUSTER_REDIRECT_MOVED)
		return;
	(void)route_pick(p, -1, &gen);
	route_moved(p, &rd);
	route_refresh(p, gen, wire_now_ms() + p->remote.timeout_ms, NULL);
	/* The newest word is the MOVED's. */
	route_moved(p, &rd);
}

/* Contract in redis/conn.h. */
const void *rconn_node_of(struct rconn *c)
{
	uint64_t gen;

	if (!c->pool->cluster || c->slot < 0)
		return NULL;
	return route_pick(c->pool, c->slot, &gen);
}

/* Contract in redis/conn.h. */
int rconn_call(struct rconn *c, uint64_t budget_ms, int argc,
	       const char **argv, const size_t *argvlen, redisReply **reply)
{
	char why[WHY_MAX] = "";

	return call_until(c, wire_now_ms() + (budget_ms ? budget_ms : c->timeout_ms),
			  argc, argv, argvlen, reply, false, why);
}

/* Contract in redis/conn.h. */
void rconn_interrupt(struct rconn *c)
{
	atomic_store(&c->interrupted, true);
	/* Under the lock the link cannot be freed, so its descriptor is
	 * still this connection's. */
	lock(&c->lock, LOCK_ENGINE_CONN);
	if (c->link)
		link_wake(c->link);
	unlock(&c->lock, LOCK_ENGINE_CONN);
}

void rconn_close(struct rconn *c)
{
	if (!c)
		return;
	conn_fini(c);
	free(c);
}

