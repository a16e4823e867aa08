/*
 * rconn.c - the transport of a shared store: connections to the current
 * Redis primary, bounded in time, that survive restarts and failovers.
 *
 * What it owns
 * ------------
 * A pool (struct rconn_pool): a copy of the store options (address or
 * Sentinels, user, password, store_timeout), a fixed array of connections
 * for the threads that serve requests and a free list of them, the
 * "connected" flag .stats reads, and the latest failure's text.  Dedicated
 * connections (rconn_open) belong to one reader thread each and borrow
 * the pool's options.  A connection (struct rconn) owns one hiredis
 * context at most; NULL until it first connects and after it failed.
 *
 * Threads and locks
 * -----------------
 * No thread of its own: everything runs on the caller's thread.
 *   pool->lock  guards the free list and pool->why.  Held for a few
 *               instructions; waiting for a free connection sleeps on
 *               pool->freed, which releases it.
 *   conn->lock  guards the swap of conn->ctx against rconn_interrupt
 *               (which shuts the socket down from another thread).  The
 *               owning thread writes ctx only under it and reads it
 *               without (no other thread writes it).
 * Both are leaves, never held together and never across a network call:
 * a new context is dialled, authenticated and checked before it is
 * swapped in, and commands run with no lock held (the connection is the
 * caller's alone while it is off the free list).  In the store's lock
 * order they come after everything, and no store lock may be held while
 * calling in here at all (every call may wait on the network), so they
 * are never held while a store lock is taken.  Both take their levels
 * (LOCK_ENGINE_POOL, LOCK_ENGINE_CONN) from the store's lock order
 * (store/internal.h), which test builds check: taking either while any
 * store lock is held is reported there.
 *
 * Finding the primary
 * -------------------
 * redis:// and unix: name it.  sentinel:// asks each Sentinel in turn
 * (SENTINEL get-master-addr-by-name), starting with the one that answered
 * last, without credentials.  Either way a new connection authenticates
 * (AUTH [user] password) and must then say it is the primary: ROLE
 * answers "master", or, for an ACL user not allowed ROLE (an @admin
 * command), HELLO 2's "role" field.  A replica is refused: during a
 * failover the Sentinels may still name the old primary, so the next
 * attempt asks the next Sentinel.  Then INFO memory must say
 * maxmemory_policy noeviction (check_policy): at start anything else is
 * final (-EPERM); later it fails the connection like an unreachable
 * primary (calls end in -EIO, "disconnected"), is logged once, and makes
 * every other connection of the pool check again before its next
 * command (pool->evictions against conn->checked).
 *
 * Time and failure
 * ----------------
 * Every call has a deadline (its budget from now, on CLOCK_MONOTONIC).
 * Connecting takes at most store_timeout per attempt (hiredis's connect
 * timeout, then its socket timeout for AUTH and ROLE); a command waits at
 * most the connection's timeout for its reply (the socket's SO_RCVTIMEO
 * via redisSetTimeout), never past the deadline.  Failures fall in three
 * classes:
 *  - the connection is gone or stuck (no reply: refused, reset, EOF,
 *    timeout) or the server is not the primary or not ready (READONLY,
 *    LOADING, MASTERDOWN, BUSY, NOAUTH): drop the context, reconnect
 *    (re-discovering the primary) and send again, pausing 10 ms doubling
 *    to 500 ms between failed attempts to connect, while the deadline
 *    allows; then -EIO.  The command may have run before its reply was
 *    lost, so the caller makes a repeat harmless (operation ids);
 *  - any other reply, errors included, is the caller's to judge;
 *  - out of memory: -ENOMEM at once.
 * At start (rconn_pool_open) refused credentials are final (-EACCES),
 * as is an evicting policy (-EPERM): retrying cannot fix them.  Later they count as the first class, so a
 * password changed on the server ends in -EIO within the budget.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "store/internal.h"
#include "redis/conn.h"

/* Longest text of a failure kept for messages. */
#define WHY_MAX 256
/* Pause between failed attempts to connect: first and longest. */
#define PAUSE_FIRST_MS 10
#define PAUSE_MAX_MS 500

struct rconn {
	struct rconn_pool *pool;  /* immutable */
	uint64_t timeout_ms;      /* immutable: longest wait for one reply */
	pthread_mutex_t lock;     /* leaf: the swap of ctx */
	redisContext *ctx;        /* written by the owner under lock */
	atomic_bool interrupted;  /* rconn_interrupt was called */
	unsigned checked;         /* owner: pool->evictions when ctx was checked */
	struct rconn *next_free;  /* pool->lock; pool connections only */
};

struct rconn_pool {
	struct store_remote remote;   /* immutable copy; wiped at close */
	char where[256];              /* immutable: remote, for messages */
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

/* Time ------------------------------------------------------------------- */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Milliseconds until @deadline, 0 once it has passed. */
static uint64_t left_ms(uint64_t deadline)
{
	uint64_t now = now_ms();

	return deadline > now ? deadline - now : 0;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* @ms (>= 1: a zero timeval means "no timeout" to the socket) */
static struct timeval tv_of(uint64_t ms)
{
	struct timeval tv;

	if (ms == 0)
		ms = 1;
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	return tv;
}

static void sleep_ms(uint64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Messages ------------------------------------------------------------- */

static void why_set(char *why, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Format a failure into @why (WHY_MAX), on one line. */
static void why_set(char *why, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, WHY_MAX, fmt, ap);
	va_end(ap);
	for (char *c = why; *c; c++)
		if ((unsigned char)*c < ' ' || *c == 0x7f)
			*c = '?';
}

/* HOST:PORT of @a, an IPv6 address in brackets. */
static void addr_text(char *buf, size_t cap, const struct store_remote_addr *a)
{
	snprintf(buf, cap, strchr(a->host, ':') ? "[%s]:%u" : "%s:%u", a->host,
		 (unsigned)a->port);
}

/* A connection failed: remember why and say disconnected. */
static void note_failure(struct rconn_pool *p, const char *why)
{
	atomic_store(&p->connected, false);
	lock(&p->lock, LOCK_ENGINE_POOL);
	snprintf(p->why, sizeof(p->why), "%s", why);
	unlock(&p->lock, LOCK_ENGINE_POOL);
}

/* Replies -------------------------------------------------------------- */

/* Run one command on @ctx: the reply, or NULL with the failure in @why. */
static redisReply *exchange(redisContext *ctx, int argc, const char **argv,
			    const size_t *argvlen, char *why)
{
	redisReply *rep = redisCommandArgv(ctx, argc, argv, argvlen);

	/* A socket timeout reads as EAGAIN's text: say what it means. */
	if (!rep && ctx->err == REDIS_ERR_IO &&
	    strcmp(ctx->errstr, strerror(EAGAIN)) == 0)
		why_set(why, "no reply within the timeout");
	else if (!rep)
		why_set(why, "%s", ctx->err ? ctx->errstr : "no reply");
	return rep;
}

static bool is_error(const redisReply *rep, const char *code)
{
	size_t n = strlen(code);

	return rep->type == REDIS_REPLY_ERROR && rep->len >= n &&
	       memcmp(rep->str, code, n) == 0 &&
	       (rep->len == n || rep->str[n] == ' ');
}

/* Errors that say "not here, or not now": another connection, later,
 * may succeed, and the command did not run. */
static bool is_transient(const redisReply *rep)
{
	return is_error(rep, "READONLY") || is_error(rep, "LOADING") ||
	       is_error(rep, "MASTERDOWN") || is_error(rep, "BUSY") ||
	       is_error(rep, "NOAUTH");
}

static bool str_is(const redisReply *rep, const char *s)
{
	return (rep->type == REDIS_REPLY_STRING ||
		rep->type == REDIS_REPLY_STATUS) &&
	       rep->len == strlen(s) && memcmp(rep->str, s, rep->len) == 0;
}

/* Dialling --------------------------------------------------------------- */

/* AUTH [user] password on @ctx when a password is set.  0, -EIO (no
 * reply) or -EACCES (refused). */
static int authenticate(redisContext *ctx, const struct store_remote *r,
			char *why)
{
	const char *argv[3] = { "AUTH" };
	size_t len[3] = { 4 };
	int argc = 1, rc = 0;
	redisReply *rep;

	if (!r->password[0])
		return 0;
	if (r->user[0]) {
		argv[argc] = r->user;
		len[argc++] = strlen(r->user);
	}
	argv[argc] = r->password;
	len[argc++] = strlen(r->password);
	rep = exchange(ctx, argc, argv, len, why);
	if (!rep)
		return -EIO;
	if (rep->type == REDIS_REPLY_ERROR) {
		why_set(why, "AUTH%s%s refused: %s", r->user[0] ? " as " : "",
			r->user, rep->str);
		rc = -EACCES;
	}
	freeReplyObject(rep);
	return rc;
}

/* The "role" of a HELLO 2 reply (a flat array of names and values). */
static int role_from_hello(redisContext *ctx, char *why, bool *master)
{
	const char *argv[] = { "HELLO", "2" };
	redisReply *rep = exchange(ctx, 2, argv, NULL, why);
	int rc = -EIO;

	if (!rep)
		return -EIO;
	if (rep->type == REDIS_REPLY_ARRAY) {
		for (size_t i = 0; i + 1 < rep->elements; i += 2)
			if (str_is(rep->element[i], "role")) {
				*master = str_is(rep->element[i + 1], "master");
				rc = 0;
			}
	}
	if (rc < 0)
		why_set(why, "HELLO: %s", rep->type == REDIS_REPLY_ERROR ?
			rep->str : "no role in the reply");
	freeReplyObject(rep);
	return rc;
}

/* Is @ctx's server the primary?  0 (yes), -EAGAIN (a replica), -EIO, or
 * -EACCES (it wants credentials statefs was not given). */
static int check_primary(redisContext *ctx, char *why)
{
	const char *argv[] = { "ROLE" };
	redisReply *rep = exchange(ctx, 1, argv, NULL, why);
	bool master = false;
	int rc = 0;

	if (!rep)
		return -EIO;
	if (is_error(rep, "NOPERM")) {
		/* An ACL user without +role: HELLO is for everyone. */
		rc = role_from_hello(ctx, why, &master);
	} else if (is_error(rep, "NOAUTH")) {
		why_set(why, "the server wants a password "
			"(-o store_password_file): %s", rep->str);
		rc = -EACCES;
	} else if (rep->type == REDIS_REPLY_ARRAY && rep->elements > 0) {
		master = str_is(rep->element[0], "master");
	} else {
		why_set(why, "ROLE: %s", rep->type == REDIS_REPLY_ERROR ?
			rep->str : "an unexpected reply");
		rc = -EIO;
	}
	freeReplyObject(rep);
	if (rc == 0 && !master) {
		why_set(why, "the server is a replica, not the primary");
		rc = -EAGAIN;
	}
	return rc;
}

/*
 * Does @ctx's server keep every key?  statefs's keys are its state, and
 * some carry a TTL (op records, a removed tenant's log), so every
 * maxmemory-policy but noeviction may drop them: allkeys-* any key,
 * volatile-* those with a TTL (an op record gone lets a retry apply a
 * mutation twice).  Whatever maxmemory is now: it may be set later
 * without a new connection.  Read from INFO memory (CONFIG GET is an
 * @admin command an ACL user is rarely given).  0, -EPERM (evicting, or
 * INFO refused: the policy cannot be known), -EIO (no reply).
 */
static int check_policy(redisContext *ctx, char *why)
{
	const char *argv[] = { "INFO", "memory" };
	redisReply *rep = exchange(ctx, 2, argv, NULL, why);
	const char *f;
	char policy[64] = "";
	int rc = 0;

	if (!rep)
		return -EIO;
	if (rep->type == REDIS_REPLY_ERROR) {
		why_set(why, "INFO memory refused, so maxmemory-policy cannot "
			"be checked (allow the user +info): %s", rep->str);
		rc = -EPERM;
	} else if (rep->type != REDIS_REPLY_STRING) {
		why_set(why, "INFO memory: an unexpected reply");
		rc = -EIO;
	} else if (!(f = strstr(rep->str, "maxmemory_policy:")) ||
		   sscanf(f + 17, "%63[^\r\n]", policy) != 1) {
		why_set(why, "INFO memory gives no maxmemory_policy");
		rc = -EPERM;
	} else if (strcmp(policy, "noeviction") != 0) {
		why_set(why, "maxmemory-policy is %s: Redis may evict statefs's "
			"keys (set maxmemory-policy noeviction)", policy);
		rc = -EPERM;
	}
	freeReplyObject(rep);
	return rc;
}

/* Set @ctx's socket timeout to what is left before @deadline, at most
 * @ms: 0, or -EIO once the deadline has passed. */
static int time_left(redisContext *ctx, uint64_t deadline, uint64_t ms,
		     char *why)
{
	uint64_t left = left_ms(deadline);

	if (left == 0) {
		why_set(why, "no reply within the time budget");
		return -EIO;
	}
	if (redisSetTimeout(ctx, tv_of(min_u64(left, ms))) != REDIS_OK) {
		why_set(why, "cannot set the socket timeout");
		return -EIO;
	}
	return 0;
}

/* A context to @a or @path within @ms, with the socket timeout @ms.
 * NULL only when out of memory; else check ctx->err. */
static redisContext *dial(const struct store_remote_addr *a, const char *path,
			  uint64_t ms)
{
	redisContext *ctx = path ? redisConnectUnixWithTimeout(path, tv_of(ms))
				 : redisConnectWithTimeout(a->host, a->port,
							   tv_of(ms));

	if (ctx && !ctx->err && redisSetTimeout(ctx, tv_of(ms)) != REDIS_OK &&
	    !ctx->err)
		ctx->err = REDIS_ERR_IO;
	return ctx;
}

/*
 * Ask the Sentinels, in turn, where the primary of the master name is.
 * 0 with @out, or -EIO (none answered with an address before @deadline)
 * or -ENOMEM, with the last failure in @why.
 */
static int discover(struct rconn_pool *p, uint64_t deadline,
		    struct store_remote_addr *out, char *why)
{
	const struct store_remote *r = &p->remote;
	const char *argv[] = { "SENTINEL", "get-master-addr-by-name", r->master };
	unsigned start = atomic_load(&p->sentinel_next);

	for (unsigned i = 0; i < r->nsentinels; i++) {
		unsigned k = (start + i) % r->nsentinels;
		uint64_t left = left_ms(deadline);
		char at[STORE_REMOTE_HOST_MAX + 16];
		redisContext *ctx;
		redisReply *rep;
		bool found = false;

		if (left == 0)
			break;
		addr_text(at, sizeof(at), &r->sentinels[k]);
		ctx = dial(&r->sentinels[k], NULL,
			   min_u64(left, r->timeout_ms));
		if (!ctx)
			return -ENOMEM;
		if (ctx->err) {
			why_set(why, "Sentinel %s: %s", at, ctx->errstr);
			redisFree(ctx);
			continue;
		}
		rep = exchange(ctx, 3, argv, NULL, why);
		if (!rep) {
			why_set(why, "Sentinel %s: %s", at, ctx->errstr);
		} else if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
			   rep->element[0]->type == REDIS_REPLY_STRING &&
			   rep->element[1]->type == REDIS_REPLY_STRING &&
			   rep->element[0]->len > 0 &&
			   rep->element[0]->len <= STORE_REMOTE_HOST_MAX) {
			long port = strtol(rep->element[1]->str, NULL, 10);

			if (port > 0 && port <= 65535) {
				memcpy(out->host, rep->element[0]->str,
				       rep->element[0]->len);
				out->host[rep->element[0]->len] = '\0';
				out->port = (uint16_t)port;
				found = true;
			} else {
				why_set(why, "Sentinel %s: bad port '%s'", at,
					rep->element[1]->str);
			}
		} else if (rep->type == REDIS_REPLY_NIL) {
			why_set(why, "Sentinel %s knows no master '%s'", at,
				r->master);
		} else {
			why_set(why, "Sentinel %s: %s", at,
				rep->type == REDIS_REPLY_ERROR ? rep->str :
				"an unexpected reply");
		}
		if (rep)
			freeReplyObject(rep);
		redisFree(ctx);
		if (found) {
			atomic_store(&p->sentinel_next, k);
			return 0;
		}
	}
	if (!why[0])
		why_set(why, "no time left to ask the Sentinels");
	return -EIO;
}

/*
 * A new context to the primary, authenticated and checked, each step
 * within store_timeout and before @deadline; its socket timeout is then
 * set by the caller per command.  0 with *@out; -EIO or -EAGAIN
 * (unreachable, or not the primary: worth another attempt), -EACCES
 * (credentials refused or missing), -ENOMEM; the failure in @why.
 */
static int connect_primary(struct rconn_pool *p, uint64_t deadline,
			   redisContext **out, char *why)
{
	const struct store_remote *r = &p->remote;
	struct store_remote_addr found;
	const struct store_remote_addr *a = &r->addr;
	char at[STORE_REMOTE_HOST_MAX + 24];
	redisContext *ctx;
	uint64_t left = left_ms(deadline);
	int rc;

	if (left == 0) {
		if (!why[0])
			why_set(why, "no time left to connect");
		return -EIO;
	}
	if (r->kind == STORE_REMOTE_SENTINEL) {
		rc = discover(p, deadline, &found, why);
		if (rc < 0)
			return rc;
		a = &found;
		left = left_ms(deadline);
		if (left == 0)
			return -EIO;
	}
	ctx = dial(a, r->kind == STORE_REMOTE_UNIX ? r->path : NULL,
		   min_u64(left, r->timeout_ms));
	if (!ctx)
		return -ENOMEM;
	/* Messages name the server when the Sentinels chose it; otherwise
	 * the store option already does. */
	at[0] = '\0';
	if (r->kind == STORE_REMOTE_SENTINEL) {
		memcpy(at, "primary ", 8);
		addr_text(at + 8, sizeof(at) - 10, a);
		strcat(at, ": ");
	}
	if (ctx->err) {
		why_set(why, "%s%s", at, ctx->errstr);
		rc = ctx->err == REDIS_ERR_OOM ? -ENOMEM : -EIO;
		goto fail;
	}
	/* Each step of the greeting waits at most what is left of the
	 * deadline, so that together they take no longer than one. */
	rc = authenticate(ctx, r, why);
	if (rc == 0)
		rc = time_left(ctx, deadline, r->timeout_ms, why);
	if (rc == 0)
		rc = check_primary(ctx, why);
	if (rc == 0)
		rc = time_left(ctx, deadline, r->timeout_ms, why);
	if (rc == 0)
		rc = check_policy(ctx, why);
	if (rc == -EPERM)
		atomic_fetch_add(&p->evictions, 1);
	if (rc < 0) {
		char inner[WHY_MAX];

		snprintf(inner, sizeof(inner), "%s", why);
		why_set(why, "%s%s", at, inner);
		/* A replica: the Sentinel asked was behind; ask the next. */
		if (rc == -EAGAIN && r->kind == STORE_REMOTE_SENTINEL)
			atomic_fetch_add(&p->sentinel_next, 1);
		goto fail;
	}
	*out = ctx;
	return 0;
fail:
	redisFree(ctx);
	return rc;
}

/* Connections -------------------------------------------------------------- */

static int conn_init(struct rconn *c, struct rconn_pool *p, uint64_t timeout_ms)
{
	c->pool = p;
	c->timeout_ms = timeout_ms ? timeout_ms : p->remote.timeout_ms;
	c->ctx = NULL;
	atomic_init(&c->interrupted, false);
	c->checked = 0;
	c->next_free = NULL;
	return -pthread_mutex_init(&c->lock, NULL);
}

/* Swap @ctx in as @c's context (the owner only). */
static void conn_set(struct rconn *c, redisContext *ctx)
{
	lock(&c->lock, LOCK_ENGINE_CONN);
	c->ctx = ctx;
	unlock(&c->lock, LOCK_ENGINE_CONN);
}

/* Drop @c's context, if any (the owner only). */
static void conn_drop(struct rconn *c)
{
	redisContext *ctx;

	lock(&c->lock, LOCK_ENGINE_CONN);
	ctx = c->ctx;
	c->ctx = NULL;
	unlock(&c->lock, LOCK_ENGINE_CONN);
	if (ctx)
		redisFree(ctx);
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
		uint64_t left = left_ms(deadline);
		redisReply *rep;
		int rc;

		if (atomic_load(&c->interrupted))
			return -ECANCELED;
		if (left == 0) {
			if (!why[0])
				why_set(why, "no reply within the time budget");
			note_failure(p, why);
			return -EIO;
		}
		/* Another connection found the policy evicting since this
		 * one was checked: check it again before it serves. */
		if (c->ctx && c->checked != atomic_load(&p->evictions))
			conn_drop(c);
		if (!c->ctx) {
			redisContext *ctx = NULL;
			unsigned ev = atomic_load(&p->evictions);

			rc = connect_primary(p, deadline, &ctx, why);
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
				sleep_ms(min_u64(pause, left_ms(deadline)));
				continue;
			}
			conn_set(c, ctx);
			c->checked = ev;
			atomic_store(&p->evicting, false);
			/* An interrupt may have come while dialling. */
			continue;
		}
		if (redisSetTimeout(c->ctx, tv_of(min_u64(left, c->timeout_ms))) !=
		    REDIS_OK) {
			why_set(why, "cannot set the socket timeout");
			conn_drop(c);
			continue;
		}
		rep = exchange(c->ctx, argc, argv, argvlen, why);
		if (!rep) {
			bool oom = c->ctx->err == REDIS_ERR_OOM;

			/* The reply may still come: this context is done. */
			conn_drop(c);
			if (oom)
				return -ENOMEM;
			note_failure(p, why);
			continue;
		}
		if (is_transient(rep)) {
			why_set(why, "%s", rep->str);
			freeReplyObject(rep);
			conn_drop(c);
			note_failure(p, why);
			pause = pause ? min_u64(pause * 2, PAUSE_MAX_MS)
				      : PAUSE_FIRST_MS;
			sleep_ms(min_u64(pause, left_ms(deadline)));
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

/* Contract in rconn.h. */
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
		why_set(why, "no shared store given");
		goto fail;
	}
	rc = -ENOMEM;
	p = st_calloc(1, sizeof(*p));
	if (!p || !(p->conns = st_calloc(size, sizeof(*p->conns)))) {
		why_set(why, "out of memory");
		goto fail;
	}
	p->remote = *r;
	p->size = size;
	store_remote_describe(p->where, sizeof(p->where), r);
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
	deadline = now_ms() + r->timeout_ms;
	for (;;) {
		redisContext *ctx = NULL;

		rc = connect_primary(p, deadline, &ctx, why);
		if (rc == 0) {
			conn_set(p->free, ctx);
			atomic_store(&p->connected, true);
			*out = p;
			return 0;
		}
		if (rc == -ENOMEM || rc == -EACCES || rc == -EPERM ||
		    left_ms(deadline) == 0)
			break;
		pause = pause ? min_u64(pause * 2, PAUSE_MAX_MS) : PAUSE_FIRST_MS;
		sleep_ms(min_u64(pause, left_ms(deadline)));
	}
	if (rc != -ENOMEM && rc != -EACCES && rc != -EPERM)
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

/* Contract in rconn.h. */
int rconn_pool_call(struct rconn_pool *p, uint64_t budget_ms, int argc,
		    const char **argv, const size_t *argvlen,
		    redisReply **reply)
{
	uint64_t deadline = now_ms() + (budget_ms ? budget_ms
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

/* Contract in rconn.h. */
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

/* Contract in rconn.h. */
int rconn_call(struct rconn *c, uint64_t budget_ms, int argc,
	       const char **argv, const size_t *argvlen, redisReply **reply)
{
	return call_until(c, now_ms() + (budget_ms ? budget_ms : c->timeout_ms),
			  argc, argv, argvlen, reply);
}

/* Contract in rconn.h. */
void rconn_interrupt(struct rconn *c)
{
	atomic_store(&c->interrupted, true);
	/* Under the lock the context cannot be freed, so its descriptor is
	 * still this connection's. */
	lock(&c->lock, LOCK_ENGINE_CONN);
	if (c->ctx)
		shutdown(c->ctx->fd, SHUT_RDWR);
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
