/*
 * library.c - statefs's Functions library on the shared store:
 * rconn_library_ensure (contract in redis/conn.h), made of commands
 * through the pool (redis/conn.c), so it owns nothing and takes no lock
 * of its own; every call may wait on the network, no store lock held.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/engine.h"
#include "redis/mirror.h"
#include "redis/internal.h"
#include "redis/statefs_lua.h"
#include "redis/conn.h"
#include "redis/wire.h"

/* Rounds of rconn_library_ensure before concurrent loaders count as
 * never settling. */
#define LIBRARY_ROUNDS 5

/* The Functions library -------------------------------------------------------- */

/* One command through the pool for rconn_library_ensure: 0 with a reply
 * that is not an error, or the errno with a message in @err. */
static int library_call(struct rconn_pool *p, struct rnode *n, int argc,
			const char **argv, const size_t *argvlen,
			redisReply **rep, char *err, size_t errlen)
{
	int rc = n ? conn_node_call(p, n, 0, argc, argv, argvlen, rep)
		   : rconn_pool_call(p, 0, argc, argv, argvlen, rep);
	char why[WHY_MAX];

	if (rc == -EIO) {
		rconn_pool_last_error(p, why, sizeof(why));
		snprintf(err, errlen, "statefs: -o store=%s: %s: %s", rconn_pool_where(p),
			 argv[0], why);
	} else if (rc < 0) {
		snprintf(err, errlen, "statefs: -o store=%s: %s: %s", rconn_pool_where(p),
			 argv[0], strerror(-rc));
	}
	return rc;
}

/* Is library @name loaded?  0 with *@present, or an errno and @err. */
static int library_present(struct rconn_pool *p, struct rnode *n,
			   const char *name, bool *present, char *err,
			   size_t errlen)
{
	const char *argv[] = { "FUNCTION", "LIST", "LIBRARYNAME", name };
	redisReply *rep;
	int rc = library_call(p, n, 4, argv, NULL, &rep, err, errlen);

	if (rc < 0)
		return rc;
	*present = false;
	if (rep->type != REDIS_REPLY_ARRAY) {
		snprintf(err, errlen, "statefs: -o store=%s: FUNCTION LIST: %s",
			 rconn_pool_where(p), rep->type == REDIS_REPLY_ERROR ? rep->str :
			 "an unexpected reply");
		freeReplyObject(rep);
		return -EPROTO;
	}
	/* LIBRARYNAME is a pattern: look for the name itself. */
	for (size_t i = 0; i < rep->elements; i++) {
		const redisReply *lib = rep->element[i];

		if (lib->type != REDIS_REPLY_ARRAY)
			continue;
		for (size_t k = 0; k + 1 < lib->elements; k += 2)
			if (wire_str_is(lib->element[k], "library_name") &&
			    wire_str_is(lib->element[k + 1], name))
				*present = true;
	}
	freeReplyObject(rep);
	return 0;
}

/* The version the loaded library reports.  0, or -EPROTO (no usable
 * sfs_version) or another errno, with @err. */
static int library_version(struct rconn_pool *p, struct rnode *n,
			   const char *name, uint64_t *version, char *err,
			   size_t errlen)
{
	const char *argv[] = { "FCALL_RO", "sfs_version", "0" };
	redisReply *rep;
	int rc = library_call(p, n, 3, argv, NULL, &rep, err, errlen);
	char *end = NULL;

	if (rc < 0)
		return rc;
	if (rep->type == REDIS_REPLY_INTEGER && rep->integer >= 0) {
		*version = (uint64_t)rep->integer;
	} else if (rep->type == REDIS_REPLY_STRING && rep->len > 0 &&
		   rep->str[0] >= '0' && rep->str[0] <= '9' &&
		   (*version = strtoull(rep->str, &end, 10), *end == '\0')) {
		/* a decimal string */
	} else {
		snprintf(err, errlen, "statefs: -o store=%s: the Functions "
			 "library '%s' in the store has no usable sfs_version: "
			 "%s", rconn_pool_where(p), name,
			 rep->type == REDIS_REPLY_ERROR ? rep->str :
			 "not a version number");
		rc = -EPROTO;
	}
	freeReplyObject(rep);
	return rc;
}

/* rconn_library_ensure on one server: the pool's (@n NULL) or the
 * cluster's primary @n. */
static int ensure_on(struct rconn_pool *p, struct rnode *n, const char *name,
		     const char *code, uint64_t version, char *err,
		     size_t errlen)
{
	char scratch[8];
	uint64_t have = 0;
	int rc = 0;

	if (errlen == 0) {
		err = scratch;
		errlen = sizeof(scratch);
	}
	err[0] = '\0';
	for (int round = 0; round < LIBRARY_ROUNDS; round++) {
		const char *load[] = { "FUNCTION", "LOAD", "REPLACE", code };
		bool present = false;
		redisReply *rep;

		rc = library_present(p, n, name, &present, err, errlen);
		if (rc < 0)
			goto out;
		if (present) {
			rc = library_version(p, n, name, &have, err, errlen);
			if (rc < 0)
				goto out;
			if (have == version)
				goto out;
			if (have > version) {
				snprintf(err, errlen, "statefs: -o store=%s: the "
					 "store holds statefs library version "
					 "%llu, newer than this statefs's "
					 "version %llu", rconn_pool_where(p),
					 (unsigned long long)have,
					 (unsigned long long)version);
				rc = -EPROTO;
				goto out;
			}
			/* FUNCTION LOAD REPLACE code */
			rc = library_call(p, n, 4, load, NULL, &rep, err, errlen);
		} else {
			/* FUNCTION LOAD code */
			load[2] = code;
			rc = library_call(p, n, 3, load, NULL, &rep, err, errlen);
		}
		if (rc < 0)
			goto out;
		if (rep->type == REDIS_REPLY_ERROR) {
			bool raced = !present && strstr(rep->str, "already exists");

			if (!raced)
				snprintf(err, errlen, "statefs: -o store=%s: "
					 "cannot load the Functions library "
					 "'%s' version %llu: %s", rconn_pool_where(p), name,
					 (unsigned long long)version, rep->str);
			freeReplyObject(rep);
			if (raced)
				continue; /* another mount loaded it: look again */
			rc = -EPROTO;
			goto out;
		}
		freeReplyObject(rep);
		/* Another mount may have replaced it meanwhile: the next
		 * round settles on the newer of the two. */
		rc = library_version(p, n, name, &have, err, errlen);
		if (rc < 0 || have == version)
			goto out;
	}
	snprintf(err, errlen, "statefs: -o store=%s: the Functions library '%s' "
		 "does not settle at version %llu (the store reports %llu)",
		 rconn_pool_where(p), name, (unsigned long long)version,
		 (unsigned long long)have);
	rc = -EPROTO;
out:
	for (char *ch = err; *ch; ch++)
		if ((unsigned char)*ch < ' ' || *ch == 0x7f)
			*ch = '?';
	if (rc == 0)
		err[0] = '\0';
	return rc;
}

/* The pool's hook: the library on a primary named for the first time. */
static int ensure_node(struct rconn_pool *p, struct rnode *n, char *err,
		       size_t errlen)
{
	return ensure_on(p, n, p->lib_name, p->lib_code, p->lib_version, err,
			 errlen);
}

/* Contract in redis/conn.h. */
int rconn_library_ensure(struct rconn_pool *p, const char *name,
			 const char *code, uint64_t version, char *err,
			 size_t errlen)
{
	struct rnode *nodes[ROUTE_NODES_MAX];
	unsigned nn;

	if (!p->cluster)
		return ensure_on(p, NULL, name, code, version, err, errlen);
	nn = route_primaries(p, nodes, ROUTE_NODES_MAX);
	for (unsigned i = 0; i < nn; i++) {
		int rc = ensure_on(p, nodes[i], name, code, version, err, errlen);

		if (rc < 0)
			return rc;
		lock(&p->lock, LOCK_ENGINE_POOL);
		nodes[i]->lib_ok = true;
		unlock(&p->lock, LOCK_ENGINE_POOL);
	}
	/* The first library ensured is every new primary's (the pool's
	 * lock: calls read it when they meet a node). */
	lock(&p->lock, LOCK_ENGINE_POOL);
	if (!p->ensure_node) {
		p->lib_name = name;
		p->lib_code = code;
		p->lib_version = version;
		p->ensure_node = ensure_node;
	}
	unlock(&p->lock, LOCK_ENGINE_POOL);
	return 0;
}

/* This mount's library ------------------------------------------------------ */

int remote_library_ensure(struct store *s)
{
	char err[512];
	int rc = rconn_library_ensure(remote_of(s)->pool, "statefs",
				      store_statefs_lua, LIBVERSION, err,
				      sizeof(err));

	if (rc)
		fprintf(stderr, "%s\n", err);
	return rc;
}
