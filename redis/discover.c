/*
 * discover.c - the primary of a shared store found and greeted: a new
 * link dialled to it (redis/link.c: plain, or TLS for rediss:// and
 * sentinels://, verified), authenticated and checked, for the pool's
 * connections (redis/conn.c), each step within store_timeout and before
 * the call's deadline.
 *
 * Finding the primary
 * -------------------
 * redis://, rediss:// and unix: name it.  sentinel:// (sentinels:// over
 * TLS, to the Sentinels as to the primary) asks each Sentinel in turn
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
 * command (pool->evictions against conn->checked).  A TLS refusal (a
 * certificate, a name, a server without TLS: redis/link.c) is -EPROTO,
 * final at start like an evicting policy, and later a connection that
 * failed.
 *
 * Threads and locks
 * -----------------
 * None of its own: it runs on the caller's thread with no lock held,
 * touching only the pool's atomics (the Sentinel to ask first, the
 * count of evicting checks) and the context it dials, which is the
 * caller's until it is swapped into a connection.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis/wire.h"

/* HOST:PORT of @a, an IPv6 address in brackets. */
static void addr_text(char *buf, size_t cap, const struct store_remote_addr *a)
{
	snprintf(buf, cap, strchr(a->host, ':') ? "[%s]:%u" : "%s:%u", a->host,
		 (unsigned)a->port);
}

/* Dialling --------------------------------------------------------------- */

/* What a failed exchange on @ln means: -EPROTO (TLS refused), -ENOMEM,
 * or -EIO (no reply). */
static int lost(const struct link *ln)
{
	switch (link_failure(ln)) {
	case LINK_REFUSED:
		return -EPROTO;
	case LINK_OOM:
		return -ENOMEM;
	default:
		return -EIO;
	}
}

/* AUTH [user] password on @ln when a password is set.  0, -EIO (no
 * reply) or -EACCES (refused). */
static int authenticate(struct link *ln, const struct store_remote *r,
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
	rep = link_exchange(ln, argc, argv, len, why);
	if (!rep)
		return lost(ln);
	if (rep->type == REDIS_REPLY_ERROR) {
		wire_why(why, "AUTH%s%s refused: %s", r->user[0] ? " as " : "",
			r->user, rep->str);
		rc = -EACCES;
	}
	freeReplyObject(rep);
	return rc;
}

/* The "role" of a HELLO 2 reply (a flat array of names and values). */
static int role_from_hello(struct link *ln, char *why, bool *master)
{
	const char *argv[] = { "HELLO", "2" };
	redisReply *rep = link_exchange(ln, 2, argv, NULL, why);
	int rc = -EIO;

	if (!rep)
		return lost(ln);
	if (rep->type == REDIS_REPLY_ARRAY) {
		for (size_t i = 0; i + 1 < rep->elements; i += 2)
			if (wire_str_is(rep->element[i], "role")) {
				*master = wire_str_is(rep->element[i + 1], "master");
				rc = 0;
			}
	}
	if (rc < 0)
		wire_why(why, "HELLO: %s", rep->type == REDIS_REPLY_ERROR ?
			rep->str : "no role in the reply");
	freeReplyObject(rep);
	return rc;
}

/* Is @ln's server the primary?  0 (yes), -EAGAIN (a replica), -EIO, or
 * -EACCES (it wants credentials statefs was not given). */
static int check_primary(struct link *ln, char *why)
{
	const char *argv[] = { "ROLE" };
	redisReply *rep = link_exchange(ln, 1, argv, NULL, why);
	bool master = false;
	int rc = 0;

	if (!rep)
		return lost(ln);
	if (wire_is_error(rep, "NOPERM")) {
		/* An ACL user without +role: HELLO is for everyone. */
		rc = role_from_hello(ln, why, &master);
	} else if (wire_is_error(rep, "NOAUTH")) {
		wire_why(why, "the server wants a password "
			"(-o store_password_file): %s", rep->str);
		rc = -EACCES;
	} else if (rep->type == REDIS_REPLY_ARRAY && rep->elements > 0) {
		master = wire_str_is(rep->element[0], "master");
	} else {
		wire_why(why, "ROLE: %s", rep->type == REDIS_REPLY_ERROR ?
			rep->str : "an unexpected reply");
		rc = -EIO;
	}
	freeReplyObject(rep);
	if (rc == 0 && !master) {
		wire_why(why, "the server is a replica, not the primary");
		rc = -EAGAIN;
	}
	return rc;
}

/*
 * Does @ln's server keep every key?  statefs's keys are its state, and
 * some carry a TTL (op records, a removed tenant's log), so every
 * maxmemory-policy but noeviction may drop them: allkeys-* any key,
 * volatile-* those with a TTL (an op record gone lets a retry apply a
 * mutation twice).  Whatever maxmemory is now: it may be set later
 * without a new connection.  Read from INFO memory (CONFIG GET is an
 * @admin command an ACL user is rarely given).  0, -EPERM (evicting, or
 * INFO refused: the policy cannot be known), -EIO (no reply).
 */
static int check_policy(struct link *ln, char *why)
{
	const char *argv[] = { "INFO", "memory" };
	redisReply *rep = link_exchange(ln, 2, argv, NULL, why);
	const char *f;
	char policy[64] = "";
	int rc = 0;

	if (!rep)
		return lost(ln);
	if (rep->type == REDIS_REPLY_ERROR) {
		wire_why(why, "INFO memory refused, so maxmemory-policy cannot "
			"be checked (allow the user +info): %s", rep->str);
		rc = -EPERM;
	} else if (rep->type != REDIS_REPLY_STRING) {
		wire_why(why, "INFO memory: an unexpected reply");
		rc = -EIO;
	} else if (!(f = strstr(rep->str, "maxmemory_policy:")) ||
		   sscanf(f + 17, "%63[^\r\n]", policy) != 1) {
		wire_why(why, "INFO memory gives no maxmemory_policy");
		rc = -EPERM;
	} else if (strcmp(policy, "noeviction") != 0) {
		wire_why(why, "maxmemory-policy is %s: Redis may evict statefs's "
			"keys (set maxmemory-policy noeviction)", policy);
		rc = -EPERM;
	}
	freeReplyObject(rep);
	return rc;
}

/* Set @ln's socket timeout to what is left before @deadline, at most
 * @ms: 0, or -EIO once the deadline has passed. */
static int time_left(struct link *ln, uint64_t deadline, uint64_t ms,
		     char *why)
{
	uint64_t left = wire_left_ms(deadline);

	if (left == 0) {
		wire_why(why, "no reply within the time budget");
		return -EIO;
	}
	if (link_set_timeout(ln, min_u64(left, ms)) < 0) {
		wire_why(why, "cannot set the socket timeout");
		return -EIO;
	}
	return 0;
}

/* A link of @p to @a or @path within @ms, with the timeout @ms: 0 with
 * *@out, or link_open's -EIO, -EPROTO or -ENOMEM with @why. */
static int dial(struct rconn_pool *p, const struct store_remote_addr *a,
		const char *path, uint64_t ms, struct link **out, char *why)
{
	return link_open(path ? NULL : a->host, path ? 0 : a->port, path,
			 p->tls, ms, out, why);
}

/*
 * Ask the Sentinels, in turn, where the primary of the master name is.
 * 0 with @out, or -EIO (none answered with an address before @deadline),
 * -EPROTO (none answered, and one refused TLS) or -ENOMEM, with the last
 * failure in @why.
 */
static int discover(struct rconn_pool *p, uint64_t deadline,
		    struct store_remote_addr *out, char *why)
{
	const struct store_remote *r = &p->remote;
	const char *argv[] = { "SENTINEL", "get-master-addr-by-name", r->master };
	unsigned start = atomic_load(&p->sentinel_next);
	bool refused = false;

	for (unsigned i = 0; i < r->nsentinels; i++) {
		unsigned k = (start + i) % r->nsentinels;
		uint64_t left = wire_left_ms(deadline);
		char at[STORE_REMOTE_HOST_MAX + 16];
		struct link *ln;
		redisReply *rep;
		char inner[WHY_MAX];
		bool found = false;
		int rc;

		if (left == 0)
			break;
		addr_text(at, sizeof(at), &r->sentinels[k]);
		rc = dial(p, &r->sentinels[k], NULL,
			  min_u64(left, r->timeout_ms), &ln, inner);
		if (rc == -ENOMEM)
			return rc;
		if (rc < 0) {
			refused |= rc == -EPROTO;
			wire_why(why, "Sentinel %s: %s", at, inner);
			continue;
		}
		rep = link_exchange(ln, 3, argv, NULL, why);
		if (!rep) {
			refused |= link_failure(ln) == LINK_REFUSED;
			wire_why(why, "Sentinel %s: %s", at, link_why(ln));
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
				wire_why(why, "Sentinel %s: bad port '%s'", at,
					rep->element[1]->str);
			}
		} else if (rep->type == REDIS_REPLY_NIL) {
			wire_why(why, "Sentinel %s knows no master '%s'", at,
				r->master);
		} else {
			wire_why(why, "Sentinel %s: %s", at,
				rep->type == REDIS_REPLY_ERROR ? rep->str :
				"an unexpected reply");
		}
		if (rep)
			freeReplyObject(rep);
		link_close(ln);
		if (found) {
			atomic_store(&p->sentinel_next, k);
			return 0;
		}
	}
	if (!why[0])
		wire_why(why, "no time left to ask the Sentinels");
	return refused ? -EPROTO : -EIO;
}

/*
 * Dial @a (or @path), authenticate, and when @primary check the server is
 * the primary with a policy that keeps every key.  @named: messages name
 * the server (it was not the store option's).  Contract of
 * discover_primary.
 */
static int greet(struct rconn_pool *p, const struct store_remote_addr *a,
		 const char *path, bool named, bool primary, uint64_t deadline,
		 struct link **out, char *why)
{
	const struct store_remote *r = &p->remote;
	char at[STORE_REMOTE_HOST_MAX + 24];
	struct link *ln;
	uint64_t left = wire_left_ms(deadline);
	int rc;

	if (left == 0)
		return -EIO;
	rc = dial(p, a, path, min_u64(left, r->timeout_ms), &ln, why);
	at[0] = '\0';
	if (named) {
		memcpy(at, "primary ", 8);
		addr_text(at + 8, sizeof(at) - 10, a);
		strcat(at, ": ");
	}
	if (rc < 0) {
		char inner[WHY_MAX];

		snprintf(inner, sizeof(inner), "%s", why);
		wire_why(why, "%s%s", at, inner);
		return rc;
	}
	/* Each step of the greeting waits at most what is left of the
	 * deadline, so that together they take no longer than one. */
	rc = authenticate(ln, r, why);
	if (rc == 0)
		rc = time_left(ln, deadline, r->timeout_ms, why);
	if (rc == 0 && primary)
		rc = check_primary(ln, why);
	if (rc == 0 && primary)
		rc = time_left(ln, deadline, r->timeout_ms, why);
	if (rc == 0 && primary)
		rc = check_policy(ln, why);
	if (rc == -EPERM)
		atomic_fetch_add(&p->evictions, 1);
	if (rc < 0) {
		char inner[WHY_MAX];

		snprintf(inner, sizeof(inner), "%s", why);
		wire_why(why, "%s%s", at, inner);
		link_close(ln);
		return rc;
	}
	*out = ln;
	return 0;
}

/* Contract in redis/wire.h. */
int discover_primary(struct rconn_pool *p, uint64_t deadline,
		     struct link **out, char *why)
{
	const struct store_remote *r = &p->remote;
	struct store_remote_addr found;
	const struct store_remote_addr *a = &r->addr;
	int rc;

	if (wire_left_ms(deadline) == 0) {
		if (!why[0])
			wire_why(why, "no time left to connect");
		return -EIO;
	}
	if (r->kind == STORE_REMOTE_SENTINEL) {
		rc = discover(p, deadline, &found, why);
		if (rc < 0)
			return rc;
		a = &found;
	}
	rc = greet(p, a, r->kind == STORE_REMOTE_UNIX ? r->path : NULL,
		   r->kind == STORE_REMOTE_SENTINEL, true, deadline, out, why);
	/* A replica: the Sentinel asked was behind; ask the next. */
	if (rc == -EAGAIN && r->kind == STORE_REMOTE_SENTINEL)
		atomic_fetch_add(&p->sentinel_next, 1);
	return rc;
}

/* Contract in redis/wire.h. */
int discover_node(struct rconn_pool *p, const struct store_remote_addr *a,
		  uint64_t deadline, bool primary, struct link **out, char *why)
{
	if (wire_left_ms(deadline) == 0) {
		if (!why[0])
			wire_why(why, "no time left to connect");
		return -EIO;
	}
	return greet(p, a, NULL, true, primary, deadline, out, why);
}

/* Contract in redis/wire.h. */
int discover_cluster_enabled(struct link *ln, bool *on, char *why)
{
	const char *argv[] = { "INFO", "cluster" };
	redisReply *rep = link_exchange(ln, 2, argv, NULL, why);
	int rc = 0;

	*on = false;
	if (!rep)
		return lost(ln);
	if (rep->type == REDIS_REPLY_ERROR) {
		wire_why(why, "INFO cluster refused (allow the user +info): %s",
			 rep->str);
		rc = -EPERM;
	} else if (rep->type == REDIS_REPLY_STRING) {
		*on = strstr(rep->str, "cluster_enabled:1") != NULL;
	} else {
		wire_why(why, "INFO cluster: an unexpected reply");
		rc = -EIO;
	}
	freeReplyObject(rep);
	return rc;
}

/* Contract in redis/wire.h. */
int discover_slots(struct link *ln, const char *host, struct cluster_map **out,
		   char *why)
{
	const char *argv[] = { "CLUSTER", "SLOTS" };
	redisReply *rep = link_exchange(ln, 2, argv, NULL, why);
	int rc;

	if (!rep)
		return lost(ln);
	rc = cluster_map_parse(rep, host, out, why);
	freeReplyObject(rep);
	return rc;
}
