/*
 * link.h - one connection to one Redis server, plain (TCP or a unix
 * socket) or TLS, under the transport of redis/conn.c and
 * redis/discover.c.  Private to redis/: the engine's other files see
 * redis/conn.h only.
 *
 * A link is a socket, an OpenSSL session on it for TLS, the commands
 * formatted by hiredis (redisFormatCommandArgv) waiting to be written and
 * a hiredis reader (redisReader) for the replies: statefs writes no
 * protocol code of its own, and hiredis 0.14 (Debian 12's, which has no
 * TLS) is used only for what it does on bytes.  The design and its
 * failure classes are told at the top of redis/link.c.
 *
 * A link belongs to one thread, but link_wake may be called from any
 * other.  Replies handed out are the caller's, freed with
 * freeReplyObject().  Errors: 0 or -errno; the failure's text in @why
 * (WHY_MAX bytes, one line).
 */
#ifndef STATEFS_REDIS_LINK_H
#define STATEFS_REDIS_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "redis/redis.h"

/* Longest text of a failure kept for messages. */
#define WHY_MAX 256

struct link;
struct link_tls;

/* Why a link failed; LINK_OK while it has not. */
enum link_fail {
	LINK_OK = 0,
	LINK_IO,       /* refused, reset, closed by the server, a write failed */
	LINK_TIMEOUT,  /* no reply within the link's timeout */
	LINK_PROTOCOL, /* bytes that are no Redis reply */
	LINK_OOM,      /* out of memory */
	LINK_REFUSED,  /* TLS: a certificate or the handshake refused */
};

/*
 * The TLS settings of @r, shared by every link of a pool: TLS 1.2 or
 * newer, the servers verified against @r->tls_ca (or the system's trust
 * store) and the name each is dialled for, this mount's certificate
 * @r->tls_cert with its key @r->tls_key when given (their files are read
 * now, once).  0 with *@out (NULL when @r->tls is false: plain links),
 * -EINVAL with which file could not be used and why in @why, -ENOMEM.
 */
int link_tls_new(const struct store_remote *r, struct link_tls **out,
		 char *why);

/* Free @t once no link uses it.  NULL is a no-op. */
void link_tls_free(struct link_tls *t);

/*
 * Connect to @host:@port (or to the unix socket @path when not NULL:
 * never TLS) within @ms, then, when @tls, do the TLS handshake within
 * what is left of @ms and verify the server: its certificate must chain
 * to a trusted CA and carry the name in @tls (store_tls_name) or else
 * @host.  The link's timeout is then @ms (link_set_timeout).  0 with
 * *@out; -ENOMEM; -EIO (unreachable, or no handshake in time); -EPROTO
 * (a refusal: the server's certificate untrusted, not for the name,
 * invalid, this mount's certificate refused, or a server that answers
 * without TLS), the refusal named in @why.
 */
int link_open(const char *host, uint16_t port, const char *path,
	      const struct link_tls *tls, uint64_t ms, struct link **out,
	      char *why);

/* Wait at most @ms (at least 1) for each write and each read of @l from
 * now on.  0 or -EIO. */
int link_set_timeout(struct link *l, uint64_t ms);

/*
 * Queue one command (@argc words @argv of @argvlen bytes each, or
 * strlen's when @argvlen is NULL: binary-safe) on @l, formatted by
 * hiredis; it is written by the next link_read.  Several queued before
 * one read make a pipeline.  0, or -ENOMEM (@l failed with LINK_OOM).
 */
int link_queue(struct link *l, int argc, const char **argv,
	       const size_t *argvlen);

/*
 * Write what is queued on @l, then read one reply into *@out, each wait
 * bounded by @l's timeout.  0, or with @l failed (link_failure says how;
 * a failed link stays failed: close it) -EIO, -ENOMEM, or -EPROTO (TLS:
 * the server refused this mount's certificate after the handshake).
 */
int link_read(struct link *l, redisReply **out);

/* Run one command on @l (link_queue, then link_read): the reply, or NULL
 * with the failure in @why. */
redisReply *link_exchange(struct link *l, int argc, const char **argv,
			  const size_t *argvlen, char *why);

/* How @l failed (LINK_OK while it has not), and why, on one line ("" while
 * it has not). */
enum link_fail link_failure(const struct link *l);
const char *link_why(const struct link *l);

/*
 * End a read or write of @l blocked in another thread, and every later
 * one, at once (the socket is shut down; nothing is freed, so it may
 * race the owner's calls).  For waking a reader that is being stopped.
 */
void link_wake(struct link *l);

/* The socket of @l, for poll(2) by a reader that waits for what the
 * server sends unasked (a subscribed link). */
int link_fd(const struct link *l);

/*
 * A reply @l has received, without waiting for one: one the reader holds
 * whole, else, when the socket (or TLS) has bytes ready, what one read of
 * them makes whole.  0 with *@out (NULL: none whole yet), or -EIO,
 * -ENOMEM, -EPROTO with @l failed (the server closed it: LINK_IO).
 */
int link_take(struct link *l, redisReply **out);

/* Close @l and free it.  NULL is a no-op. */
void link_close(struct link *l);

#endif /* STATEFS_REDIS_LINK_H */
