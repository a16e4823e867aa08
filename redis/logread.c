/*
 * logread.c - the follower's reads of the logs (redis/follow.c): a
 * tenant's log key, one log past a position, whether a log holds more,
 * the store's gseq, and, on one Redis, a round's reads of every log
 * with that gseq in one pipeline.
 *
 * What it owns
 * ------------
 * Nothing: it reads the follower's positions (struct remote, which only
 * the follower's thread writes) and clears the due flags of the logs a
 * pipeline read.
 *
 * Threads and locks
 * -----------------
 * The follower's thread, no lock held: every read waits on the network
 * (redis/conn.c bounds it by store_timeout, or READ_SICK_MS for a log
 * read on a cluster).
 */
#include "store/engine.h"
#include "redis/mirror.h"
#include "redis/internal.h"

#include <errno.h>
#include <inttypes.h>

/* On a cluster, a log read that gets no reply in READ_SICK_MS makes its
 * primary sick (redis/follow.c) instead of holding the round. */
#define READ_SICK_MS 250
/* A round reads its logs in one pipeline while the mount follows at
 * most this many (the root's and its tenants'): an XRANGE of a log
 * that did not grow costs Redis a few microseconds inside the one
 * request, less than the barrier's requests (subs_barrier) that would
 * have spared it, up to a few dozen logs (make bench-mounts: four
 * mounts following 17 tenants cost 1.19x one mount with 32 here, 1.45x
 * with 8, a transition against a busy tenant). */
#define PIPED_LOGS_MAX 32

/* The log key of tenant @tid into @buf (P:{P.tN}:t -> P:{P.tN}:log). */
void follow_log_key(struct store *s, uint64_t tid, char *buf, size_t len)
{
	remote_tenant_key(s, tid, buf, len);
	buf[strlen(buf) - 1] = '\0';
	strncat(buf, "log", len - strlen(buf) - 1);
}

/* Does tenant @tid's log hold an entry after @id?  1, 0, or -errno. */
int follow_log_has_more(struct store *s, uint64_t tid, const char *id)
{
	char key[160], from[64];
	const char *av[] = { "XRANGE", key, from, "+", "COUNT", "1" };
	redisReply *rep = NULL;
	int rc;

	follow_log_key(s, tid, key, sizeof(key));
	snprintf(from, sizeof(from), "(%s", id);
	rc = rconn_pool_call(remote_of(s)->pool, 0, 6, av, NULL, &rep);
	if (rc)
		return rc;
	rc = rep->type != REDIS_REPLY_ARRAY ? -EPROTO : rep->elements > 0;
	freeReplyObject(rep);
	return rc;
}

/* Read log @key past @id: its XRANGE reply (an array) into *@out.  0,
 * -EIO (no reply: the round ends), -EPROTO (refused: a key of another
 * type; its damage is checked). */
int follow_read_log(struct store *s, const char *key, const char *id,
		    redisReply **out)
{
	char from[64], count[16];
	const char *av[] = { "XRANGE", key, from, "+", "COUNT", count };
	redisReply *rep = NULL;
	int rc;

	snprintf(from, sizeof(from), "(%s", id);
	snprintf(count, sizeof(count), "%d", FOLLOW_BATCH);
	*out = NULL;
	/* On a cluster a primary that does not answer soon is sick for
	 * SICK_MS (its logs read again after), not a wait of store_timeout
	 * the other primaries' tenants would spend waiting for the mirror. */
	rc = rconn_pool_call(remote_of(s)->pool,
			     rconn_pool_is_cluster(remote_of(s)->pool) ? READ_SICK_MS : 0,
			     6, av, NULL, &rep);
	if (rc)
		return rc;
	if (rep->type != REDIS_REPLY_ARRAY) {
		if (rep->type == REDIS_REPLY_ERROR)
			fprintf(stderr, "statefs: shared store: XRANGE %s: %s\n",
				key, rep->str);
		freeReplyObject(rep);
		return -EPROTO;
	}
	*out = rep;
	return 0;
}

/* The store's gseq now (the last number of its order of all tenants
 * taken), or UINT64_MAX when it has none or it could not be read. */
uint64_t follow_store_gseq(struct store *s)
{
	struct remote *r = remote_of(s);
	const char *av[] = { "HGET", r->meta, "gseq" };
	redisReply *rep = NULL;
	uint64_t g = UINT64_MAX;

	if (rconn_pool_call(r->pool, 0, 3, av, NULL, &rep) != 0)
		return g;
	if (!dec_u64(rep->type == REDIS_REPLY_STRING ? rep->str : NULL, &g))
		g = UINT64_MAX;
	freeReplyObject(rep);
	return g;
}

/* Contract in redis/internal.h. */
bool follow_logs_piped(struct store *s)
{
	struct remote *r = remote_of(s);

	return atomic_load(&mirror_of(s)->gorder) &&
	       !rconn_pool_is_cluster(r->pool) && r->npos + 1 <= PIPED_LOGS_MAX;
}

/* Contract in redis/internal.h. */
int follow_read_piped(struct store *s, struct lread *l, size_t *nl,
		      uint64_t *upto, bool *damaged)
{
	struct remote *r = remote_of(s);
	size_t nlog = r->npos + 1, n = 0;
	int argc[PIPED_LOGS_MAX + 1];
	const char **argv[PIPED_LOGS_MAX + 1];
	const char *av[PIPED_LOGS_MAX + 1][6];
	char keys[PIPED_LOGS_MAX][160], from[PIPED_LOGS_MAX][64], count[16];
	redisReply *rep[PIPED_LOGS_MAX + 1];
	uint64_t tid[PIPED_LOGS_MAX];
	size_t idx[PIPED_LOGS_MAX];
	bool *due[PIPED_LOGS_MAX];
	int rc;

	*nl = 0;
	*upto = UINT64_MAX;
	*damaged = false;
	if (nlog > PIPED_LOGS_MAX)
		return -EINVAL;
	snprintf(count, sizeof(count), "%d", FOLLOW_BATCH);
	av[0][0] = "HGET";
	av[0][1] = r->meta;
	av[0][2] = "gseq";
	argc[0] = 3;
	argv[0] = av[0];
	/* The root's log first: it names new tenants. */
	for (size_t i = 0; i < nlog; i++) {
		const char *at = i ? r->pos[i - 1].id : r->root_id;

		if (i ? r->pos[i - 1].damaged : r->root_damaged)
			continue;
		tid[n] = i ? r->pos[i - 1].tid : 0;
		idx[n] = i ? i - 1 : 0;
		due[n] = i ? &r->pos[i - 1].due : &r->root_due;
		if (i)
			follow_log_key(s, tid[n], keys[n], sizeof(keys[n]));
		else
			snprintf(keys[n], sizeof(keys[n]), "%s", r->rootlog);
		snprintf(from[n], sizeof(from[n]), "(%s", at);
		av[n + 1][0] = "XRANGE";
		av[n + 1][1] = keys[n];
		av[n + 1][2] = from[n];
		av[n + 1][3] = "+";
		av[n + 1][4] = "COUNT";
		av[n + 1][5] = count;
		argc[n + 1] = 6;
		argv[n + 1] = av[n + 1];
		n++;
	}
	rc = rconn_pool_pipeline(r->pool, 0, n + 1, argc, argv, rep);
	if (rc)
		return rc;
	if (rep[0]->type != REDIS_REPLY_STRING || !dec_u64(rep[0]->str, upto))
		*upto = UINT64_MAX;
	freeReplyObject(rep[0]);
	for (size_t k = 0; k < n; k++) {
		if (rep[k + 1]->type != REDIS_REPLY_ARRAY) {
			if (rep[k + 1]->type == REDIS_REPLY_ERROR)
				fprintf(stderr, "statefs: shared store: XRANGE %s: %s\n",
					keys[k], rep[k + 1]->str);
			freeReplyObject(rep[k + 1]);
			*damaged = true;
			continue;
		}
		*due[k] = false;
		if (tid[k])
			r->pos[idx[k]].own_due = false;
		l[*nl].tid = tid[k];
		l[(*nl)++].rep = rep[k + 1];
	}
	return 0;
}
