/*
 * wire.h - the transport's own header, private to redis/conn.c,
 * redis/discover.c, redis/wire.c and redis/library.c: a pool's and a
 * connection's structs (each field with what guards it), and the
 * functions of those files the others call, grouped by the file that
 * defines them.  The engine's other files see redis/conn.h only.
 *
 * The files of the transport call one way: library.c -> conn.c ->
 * discover.c -> link.c -> wire.c (conn.c calls link.c and wire.c too;
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

#include "redis/link.h"
#include "redis/redis.h"

struct rconn {
	struct rconn_pool *pool;  /* immutable */
	uint64_t timeout_ms;      /* immutable: longest wait for one reply */
	pthread_mutex_t lock;     /* leaf: the swap of link */
	struct link *link;        /* written by the owner under lock */
	atomic_bool interrupted;  /* rconn_interrupt was called */
	unsigned checked;         /* owner: pool->evictions when link was checked */
	struct rconn *next_free;  /* pool->lock; pool connections only */
};

struct rconn_pool {
	struct store_remote remote;   /* immutable copy; wiped at close */
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
	struct rconn *conns;          /* immutable array of @size */
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

#endif /* STATEFS_REDIS_WIRE_H */
