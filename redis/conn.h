/*
 * conn.h - connections to the Redis primary of a shared store: the
 * transport's face.  Private to redis/: the engine's calls and its
 * follower use it; fs/ and layout/ never see Redis.
 *
 * A pool of connections for the threads that serve requests, dedicated
 * connections for blocking readers (XREAD BLOCK) (redis/conn.c; the
 * primary found by redis/discover.c), and the loading of statefs's
 * Functions library (redis/library.c).  Every call is bounded by a time
 * budget and reconnects (re-discovering the primary through the
 * Sentinels) while the budget lasts.  The design, the locks and the
 * failure classes are at the top of redis/conn.c.
 *
 * Errors follow store/'s convention: 0 or -errno.  A reply handed out is
 * the caller's, freed with freeReplyObject().  The process must ignore
 * SIGPIPE (statefs's main does): a write to a connection the server
 * closed must fail, not kill the daemon.  No caller may hold a store lock
 * while calling in here: every call may wait on the network.
 */
#ifndef STATEFS_REDIS_CONN_H
#define STATEFS_REDIS_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "redis/redis.h"

struct rconn;
struct rconn_pool;

/*
 * Open a pool of @size connections to the primary of the shared store
 * @r (copied, password included; @r->kind must not be STORE_REMOTE_NONE).
 * One connection is made now, within @r->timeout_ms, so that what can
 * only be learned by connecting is reported at start: returns 0 with
 * *@out, -EINVAL (no store, @size 0, a TLS file that cannot be used),
 * -ENOMEM, -EACCES (the server refused the credentials, or wants some
 * and none were given), -EPERM (its maxmemory-policy is not noeviction,
 * or INFO is refused), -EPROTO (TLS refused: the server's certificate
 * untrusted, not for its name or invalid, this mount's certificate
 * refused or missing, a server that does not speak TLS), or -EIO (no
 * primary could be reached and checked within the timeout), with a
 * one-line message starting "statefs: " in @err saying which.  The other connections
 * are made when first needed.
 */
int rconn_pool_open(const struct store_remote *r, unsigned size,
		    struct rconn_pool **out, char *err, size_t errlen);

/*
 * Close every connection of @p and free it, wiping its copy of the
 * password.  No call may be in flight and every dedicated connection of
 * @p must be closed first.  NULL is a no-op.
 */
void rconn_pool_close(struct rconn_pool *p);

/*
 * Whether the latest exchange with Redis, through any connection of @p,
 * succeeded: true after a reply, false after a connection attempt or a
 * connection failed.  Lock-free (an atomic), for .stats's
 * "store connected|disconnected".
 */
bool rconn_pool_connected(const struct rconn_pool *p);

/* Where @p connects, as the store option says it, for messages (never
 * the user or the password).  Immutable. */
const char *rconn_pool_where(const struct rconn_pool *p);

/*
 * Copy why the latest connection attempt or connection of @p failed
 * ("" when none has) into @buf, NUL-terminated.  Takes the pool's lock
 * briefly; for log lines.
 */
void rconn_pool_last_error(struct rconn_pool *p, char *buf, size_t cap);

/*
 * Run one command (@argc words @argv of @argvlen bytes each: binary-safe)
 * on a connection of @p and return its reply in *@reply.
 * On a cluster it goes to the primary of the slot of its first key (for
 * FCALL, FCALL_RO, EVAL the first after numkeys; for XREAD the first
 * after STREAMS; else argv[1]; a command without a key, or FCALL with no
 * key, to any primary) and follows MOVED, ASK (a key read only),
 * TRYAGAIN and CLUSTERDOWN (redis/conn.c, "A cluster"); each primary
 * has its own connections, so a failing one stops only its own slots.
 * Waits for a free connection, then sends; when the connection fails (or
 * the server answers READONLY, LOADING, MASTERDOWN, BUSY or NOAUTH: not
 * the primary, or not ready) it reconnects, re-discovering the primary,
 * and sends again, until @budget_ms (0: store_timeout) has passed.  A
 * command may therefore run more than once: the caller makes that safe
 * (a mutation carries its operation id).  Returns 0 with a reply
 * (possibly of type REDIS_REPLY_ERROR: a script's or the command's own
 * error, for the caller to judge), -EINVAL (no command), -ENOMEM, or
 * -EIO when the budget ran out without a reply.  Holds no lock while it
 * waits on the network.  Thread-safe.
 */
int rconn_pool_call(struct rconn_pool *p, uint64_t budget_ms, int argc,
		    const char **argv, const size_t *argvlen,
		    redisReply **reply);

/*
 * @n commands of one pipeline on one connection of a pool that is not a
 * cluster (command i: @argc[i] words @argv[i], strlen's), so that they
 * run one after the other, in order, for one round trip: into
 * @reply[0..n), each possibly an error reply.  When the connection must
 * be dialled first, the first command goes alone (as rconn_pool_call
 * sends it) and the others after its reply.  0, or -EINVAL (a cluster,
 * no command), -ENOMEM, -ECANCELED, -EIO (the budget, 0: store_timeout,
 * ran out; a reply lost or "not now": nothing is returned, and a
 * command may have run).  Thread-safe.
 */
int rconn_pool_pipeline(struct rconn_pool *p, uint64_t budget_ms, size_t n,
			const int *argc, const char **const *argv,
			redisReply **reply);

/*
 * rconn_pool_call sent to the primary that serves hash slot @slot
 * (0..16383) of a cluster: for a command without a key that must run
 * where a slot's keys are (TIME for a tenant's deadline, a per-shard
 * fan-out).  On one Redis it is rconn_pool_call.  Also -EINVAL for a
 * slot past the last.
 */
int rconn_pool_call_slot(struct rconn_pool *p, unsigned slot, uint64_t budget_ms,
			 int argc, const char **argv, const size_t *argvlen,
			 redisReply **reply);

/* Is @p's store a Redis Cluster (cluster://, or a redis:// node whose
 * INFO cluster says cluster_enabled:1)?  Immutable once open. */
bool rconn_pool_is_cluster(const struct rconn_pool *p);

/*
 * Open a dedicated connection to the primary of @p for one thread that
 * blocks on the server (XREAD BLOCK), with its own command timeout
 * @timeout_ms (0: store_timeout; it must exceed the BLOCK time).
 * Connecting still takes at most store_timeout per attempt.  Connects at
 * its first command.  0 with *@out, or -ENOMEM.
 */
int rconn_open(struct rconn_pool *p, uint64_t timeout_ms, struct rconn **out);

/*
 * rconn_open, to the primary that serves @key's slot on a cluster (a
 * subscriber per shard): each time it connects, it connects to the
 * slot's primary of the map then, and a connection that fails reads the
 * map again, so it follows a failover.  Its replies are not routed: a
 * MOVED or ASK is the caller's (open again for the new owner).  On one
 * Redis it is rconn_open.
 */
int rconn_open_key(struct rconn_pool *p, const char *key, uint64_t timeout_ms,
		   struct rconn **out);

/*
 * Which primary serves @key's slot now, as an identity to compare (a
 * node of the pool lives as long as the pool); NULL on one Redis or
 * for a slot the map has no primary for.  No network.
 */
const void *rconn_pool_node_of(struct rconn_pool *p, const char *key);

/* A MOVED error reply @rep a dedicated connection got (whose replies
 * are not routed): the map learns it, and is read again. */
void rconn_pool_moved(struct rconn_pool *p, const redisReply *rep);

/* The same for dedicated connection @c's key (rconn_open_key): the
 * primary its next dial reaches. */
const void *rconn_node_of(struct rconn *c);

/*
 * rconn_pool_call on the dedicated connection @c: each attempt waits at
 * most @c's timeout for the reply, and attempts go on until @budget_ms
 * (0: @c's timeout) has passed.  One thread at a time per connection.
 * Also -ECANCELED once rconn_interrupt(@c) was called.
 */
int rconn_call(struct rconn *c, uint64_t budget_ms, int argc,
	       const char **argv, const size_t *argvlen, redisReply **reply);

/*
 * End @c's current and every later rconn_call with -ECANCELED, from any
 * thread: a blocked read returns at once (the socket is shut down), an
 * attempt to connect within store_timeout.  For shutting a reader down.
 */
void rconn_interrupt(struct rconn *c);

/* Close and free the dedicated connection @c (no call in flight).  NULL
 * is a no-op. */
void rconn_close(struct rconn *c);

/*
 * Make the store run statefs's Functions library @name at @version:
 * when `FUNCTION LIST LIBRARYNAME @name` finds none, load @code; when
 * `FCALL_RO sfs_version 0` reports an older version, replace it
 * (FUNCTION LOAD REPLACE); the same version is left alone.  @code must
 * declare library @name and an sfs_version function (flag no-writes)
 * returning @version.  Mounts that load concurrently settle on the
 * newest version.  On a cluster: on every primary of the map now, and
 * later on a primary the map names for the first time (after a
 * failover), before the first call routed to it.  Returns 0, -EPROTO with a one-line message in @err
 * when the store holds a newer version (naming both), when its library
 * has no usable sfs_version, when @code is refused by the server or does
 * not report @version once loaded; -EIO (Redis unreachable) or -ENOMEM.
 */
int rconn_library_ensure(struct rconn_pool *p, const char *name,
			 const char *code, uint64_t version, char *err,
			 size_t errlen);

#endif /* STATEFS_REDIS_CONN_H */
