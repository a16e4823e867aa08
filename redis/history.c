/*
 * history.c - a tenant's .events lines from before what the mount's own
 * log holds, told by the shared store's log of the tenant in Redis
 * (store_events_start, through the engine's events_history slot): so that a
 * reader started at a number (lseek before its first read) resumes after
 * a remount of its mount, or on another host, for as long as Redis's log
 * holds it.
 *
 * A log entry does not carry its .events lines whole: a write's line
 * names each parent's generation, a link's the state's newest link
 * before it, and who may read a line is the tenant's owner and mode
 * when it was appended.  Those are what the mirror knows when it applies
 * the entry.  So the lines are made the way the mirror makes them: the
 * tenant's log, from its first entry (the tenant made, seq 1), is
 * applied in order to a mirror of its own, a store made for the call
 * (on a clock at 0: nothing in it expires but by an entry), and read
 * from that store's log from the number asked, with the reader's
 * credentials, line for line what the mount's own log showed.  A log
 * that no longer starts at the tenant's first entry (trimmed past
 * lim_log_max entries) cannot be told so: -ENODATA, and the reader gets
 * "overflow", then the oldest line the mount has.
 *
 * The log is read with XRANGE, in chunks, up to its last entry when the
 * call began, on the pool's connections (a read: no operation id; each
 * command within store_timeout, rconn_pool_call), between two reads of
 * the store's instance, which must be the one the mount follows before
 * and after (a tenant id of another instance is another tenant).  The store made is
 * read after each chunk, so its log of STORE_HISTORY_RING lines is
 * enough whatever the tenant's length; a chunk that would overrun it
 * shows "overflow" there, and is -ENODATA.
 *
 * Threads and locks: the reader's thread (fs/'s, in its first read),
 * with no lock of the mount's store held, as the slot requires: it
 * waits on the network.  remote->lock (LOCK_ENGINE_STATE), alone, only
 * to copy the instance.  The store it makes is its own, used by no
 * other thread, and freed before it returns.
 */
#include "store/engine.h"
#include "redis/mirror.h"
#include "redis/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Entries read with one XRANGE, and the lines the store made for the
 * call keeps between two reads of it (an entry with more lines than a
 * chunk of them leaves room for is -ENODATA). */
#define HISTORY_CHUNK 256
#define STORE_HISTORY_RING 65536

/* The clock of the store made for a call: 0, so that nothing in it
 * passes a deadline but by the log's own expire entries. */
static uint64_t clock_zero(void *arg)
{
	(void)arg;
	return 0;
}

/* The lines made so far, and the reader of the store made for them. */
struct hist {
	struct store *s;
	struct store_event_reader *r;
	char *text;
	size_t len, cap;
};

/* Move what @h's reader may read of its store into @h->text.  0, or
 * -ENODATA when its log overran (an "overflow" line), -ENOMEM. */
static int hist_drain(struct hist *h)
{
	static const char overflow[] = "overflow\n";

	for (;;) {
		ssize_t n;

		if (h->cap - h->len < 65536) {
			size_t ncap = h->cap ? h->cap * 2 : 131072;
			char *nt = realloc(h->text, ncap);

			if (!nt)
				return -ENOMEM;
			h->text = nt;
			h->cap = ncap;
		}
		n = store_events_read(h->s, h->r, h->text + h->len,
				      h->cap - h->len);
		if (n < 0)
			return -ENODATA;
		if (n == 0)
			return 0;
		/* Only a ring overrun makes this reader's "overflow", at the
		 * start of a read. */
		if ((size_t)n >= sizeof(overflow) - 1 &&
		    memcmp(h->text + h->len, overflow, sizeof(overflow) - 1) == 0)
			return -ENODATA;
		h->len += (size_t)n;
	}
}

/* Is the store still the instance this mount follows?  A tenant id of
 * another instance names another tenant.  1, 0, or -EIO. */
static int same_instance(struct remote *rem)
{
	const char *av[] = { "HGET", rem->meta, "instance" };
	redisReply *rep = NULL;
	char inst[sizeof(rem->instance)];
	int rc = rconn_pool_call(rem->pool, 0, 3, av, NULL, &rep);

	if (rc)
		return rc;
	lock(&rem->lock, LOCK_ENGINE_STATE);
	memcpy(inst, rem->instance, sizeof(inst));
	unlock(&rem->lock, LOCK_ENGINE_STATE);
	rc = rep->type == REDIS_REPLY_STRING && strcmp(rep->str, inst) == 0;
	freeReplyObject(rep);
	return rc;
}

/* The id of the last entry of log @key now into @id ("" for none).  0 or
 * -EIO, -EPROTO. */
static int last_id(struct remote *rem, const char *key, char *id, size_t len)
{
	const char *av[] = { "XREVRANGE", key, "+", "-", "COUNT", "1" };
	redisReply *rep = NULL;
	int rc = rconn_pool_call(rem->pool, 0, 6, av, NULL, &rep);

	if (rc)
		return rc;
	id[0] = '\0';
	if (rep->type != REDIS_REPLY_ARRAY)
		rc = -EPROTO;
	else if (rep->elements > 0 &&
		 (rep->element[0]->type != REDIS_REPLY_ARRAY ||
		  rep->element[0]->elements != 2 ||
		  rep->element[0]->element[0]->type != REDIS_REPLY_STRING))
		rc = -EPROTO;
	else if (rep->elements > 0)
		snprintf(id, len, "%s", rep->element[0]->element[0]->str);
	freeReplyObject(rep);
	return rc;
}

/*
 * Apply the entries of @rep (an XRANGE reply) of tenant @tid to @h's
 * store; the first entry of the log must be the tenant's first (@first:
 * none applied yet), which makes the store and its reader, from @seq.
 * The last id applied into @id, the last number into *@upto.  0, or
 * -ENODATA (not the tenant's whole log, an entry the store cannot
 * apply), -EPROTO, -ENOMEM.
 */
static int hist_apply(struct hist *h, const struct store *real,
		      const struct store_cred *cred, uint64_t tid, uint64_t seq,
		      const redisReply *rep, char *id, size_t idlen,
		      uint64_t *upto)
{
	for (size_t i = 0; i < rep->elements; i++) {
		const redisReply *el = rep->element[i];
		struct entry e;
		int rc;

		if (el->type != REDIS_REPLY_ARRAY || el->elements != 2 ||
		    el->element[0]->type != REDIS_REPLY_STRING ||
		    entry_parse(el->element[1], &e) != 0)
			return -EPROTO;
		if (!h->s) {
			struct store_limits l = *store_limits(real);
			struct store_clock c = { clock_zero, NULL };
			const char *kind = entry_str(&e, "kind");
			const char *name = entry_str(&e, "name");

			/* The tenant's own first entry, or the log was
			 * trimmed: not its whole history. */
			if (e.seq != 1 || strcmp(e.op, "join") != 0 || !kind ||
			    strcmp(kind, "tenant") != 0 || !name)
				return -ENODATA;
			l.event_log = STORE_HISTORY_RING;
			rc = store_new(&l, &c, &h->s);
			if (rc)
				return rc;
			rc = mirror_attach(h->s, "", 0);
			if (!rc)
				rc = mirror_tenant_add(h->s, tid, name);
			if (!rc)
				rc = store_events_open(h->s, NULL, cred,
						       STORE_EVENTS_WHOLE_LOG,
						       &h->r);
			if (rc)
				return rc;
			store_events_start(h->s, h->r, NULL, seq);
		}
		rc = mirror_apply(h->s, tid, &e);
		if (rc)
			return rc == -ENOMEM ? rc : -ENODATA;
		snprintf(id, idlen, "%s", el->element[0]->str);
		*upto = e.seq + e.nseq - 1;
	}
	return hist_drain(h);
}

int remote_events_history(struct store *s, struct store_node *tenant,
			  const struct store_cred *cred, uint64_t seq,
			  char **text, size_t *len, uint64_t *upto)
{
	struct remote *rem = remote_of(s);
	struct hist h = { 0 };
	char key[STORE_REMOTE_PREFIX_MAX * 2 + 48], end[48], id[48] = "-";
	char from[56], count[16];
	uint64_t tid;
	int rc;

	*text = NULL;
	*len = 0;
	*upto = 0;
	if (!rem || !tkey(s, tenant, &tid, key, sizeof(key)))
		return -ENODATA;
	key[strlen(key) - 1] = '\0'; /* "...:t" -> "...:log" */
	strncat(key, "log", sizeof(key) - strlen(key) - 1);
	rc = same_instance(rem);
	if (rc != 1)
		return rc ? rc : -ENODATA;
	rc = last_id(rem, key, end, sizeof(end));
	if (rc)
		return rc;
	if (!end[0])
		return -ENODATA;
	snprintf(count, sizeof(count), "%d", HISTORY_CHUNK);
	for (;;) {
		const char *av[] = { "XRANGE", key, from, end, "COUNT", count };
		redisReply *rep = NULL;
		size_t n;

		snprintf(from, sizeof(from), "%s%s", strcmp(id, "-") ? "(" : "",
			 id);
		rc = rconn_pool_call(rem->pool, 0, 6, av, NULL, &rep);
		if (rc)
			break;
		if (rep->type != REDIS_REPLY_ARRAY) {
			freeReplyObject(rep);
			rc = -EPROTO;
			break;
		}
		n = rep->elements;
		rc = n ? hist_apply(&h, s, cred, tid, seq, rep, id, sizeof(id),
				    upto) :
			 h.s ? 0 : -ENODATA;
		freeReplyObject(rep);
		if (rc || n < HISTORY_CHUNK || strcmp(id, end) == 0)
			break;
	}
	/* Read from one instance, the one the mirror follows, start to end
	 * (an instance's id is never used again). */
	if (!rc) {
		rc = same_instance(rem);
		rc = rc == 1 ? 0 : rc ? rc : -ENODATA;
	}
	store_events_close(h.r);
	if (h.s)
		store_free(h.s);
	if (rc) {
		free(h.text);
		*upto = 0;
		return rc == -ENOMEM ? rc : rc == -EIO ? rc : -ENODATA;
	}
	*text = h.text;
	*len = h.len;
	return 0;
}
