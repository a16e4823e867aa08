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

static int conn_init(struct rconn *c, struct rconn_pool *p, uint64_t timeout_ms)
{
	c->pool = p;
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

/*
 * The command loop of rconn_call and rconn_pool_call: send on @c,
 * reconnecting after a failure, until a reply or @deadline.  Contract of
 * rconn_pool_call.
 */
static int call_until(struct rconn *c, uint64_t deadline, int argc,
		      const char **argv, const size_t *argvlen,
		      redisReply **reply)
{
	struct rconn_pool *p = c->pool;
	char why[WHY_MAX] = "";
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

			rc = discover_primary(p, deadline, &ln, why);
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
			continue;
		}
		if (is_transient(rep)) {
			wire_why(why, "%s", rep->str);
			freeReplyObject(rep);
			conn_drop(c);
			note_failure(p, why);
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
static struct rconn *take(struct rconn_pool *p, uint64_t deadline)
{
	struct timespec ts = { (time_t)(deadline / 1000),
			       (long)(deadline % 1000) * 1000000 };
	struct rconn *c;

	lock(&p->lock, LOCK_ENGINE_POOL);
	while (!p->free)
		if (pthread_cond_timedwait(&p->freed, &p->lock, &ts) ==
			    ETIMEDOUT &&
		    !p->free)
			break;
	c = p->free;
	if (c)
		p->free = c->next_free;
	unlock(&p->lock, LOCK_ENGINE_POOL);
	return c;
}

static void give_back(struct rconn_pool *p, struct rconn *c)
{
	lock(&p->lock, LOCK_ENGINE_POOL);
	c->next_free = p->free;
	p->free = c;
	pthread_cond_signal(&p->freed);
	unlock(&p->lock, LOCK_ENGINE_POOL);
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
		rc = conn_init(&p->conns[inited], p, r->timeout_ms);
		if (rc < 0)
			goto fail_conns;
		p->conns[inited].next_free = p->free;
		p->free = &p->conns[inited];
	}

	/* Connect one now: what only connecting tells is told at start.
	 * It is the one on top of the free list, the first to be used. */
	deadline = wire_now_ms() + r->timeout_ms;
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
	if (rc != -ENOMEM && rc != -EACCES && rc != -EPERM && rc != -EPROTO)
		rc = -EIO;
fail_conns:
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
				 p->where, rc == -EIO ?
				 "no primary reached in store_timeout: " : "",
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

	*reply = NULL;
	if (argc < 1 || !argv)
		return -EINVAL;
	c = take(p, deadline);
	if (!c) {
		note_failure(p, "every connection stayed busy for the budget");
		return -EIO;
	}
	rc = call_until(c, deadline, argc, argv, argvlen, reply);
	give_back(p, c);
	return rc;
}

/* Dedicated connections ------------------------------------------------------ */

/* Contract in redis/conn.h. */
int rconn_open(struct rconn_pool *p, uint64_t timeout_ms, struct rconn **out)
{
	struct rconn *c = st_calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return -ENOMEM;
	rc = conn_init(c, p, timeout_ms);
	if (rc < 0) {
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* Contract in redis/conn.h. */
int rconn_call(struct rconn *c, uint64_t budget_ms, int argc,
	       const char **argv, const size_t *argvlen, redisReply **reply)
{
	return call_until(c, wire_now_ms() + (budget_ms ? budget_ms : c->timeout_ms),
			  argc, argv, argvlen, reply);
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
	conn_drop(c);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

