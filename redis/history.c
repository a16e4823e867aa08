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
 * The root's lines, where the store has one order of all tenants (each
 * entry's gseq, redis/lua/contract.lua): the root log, read whole from
 * its first entry, names every tenant made; every tenant's log that may
 * hold a line numbered N or more must hold its first entry (a tenant
 * cleaned up before N may have lost its log), and the logs, read in
 * chunks from their starts up to the store's number when the call
 * began (meta gseq: every entry up to it was in the logs before any was
 * read), are applied merged by that number (the smallest next entry of
 * all the logs, a scan of them: the merge costs the entries times the
 * tenants) to one store made for the call, read by a root reader from
 * N with the reader's credentials (root_history).  The mount's log then
 * goes on from that number + 1.
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

/* The root's lines ----------------------------------------------------------- */

/* One log read in chunks for the merge: its next entry (rep->element[k],
 * when at), that entry's number in the store's order (g), or pre: it has
 * none (a library before the order wrote it: before every numbered one). */
struct cursor {
	char key[STORE_REMOTE_PREFIX_MAX * 2 + 48];
	uint64_t tid;                  /* 0: the root log */
	bool cleaned;                  /* the root log's cleanup of it came, */
	uint64_t cleanup;              /* numbered so (0: before the order) */
	redisReply *rep;
	size_t k;
	char last[48];                 /* the last id read ("-": none) */
	uint64_t g;
	bool at, pre;
};

/* Move @c to its next entry, when it has one before the order or one
 * numbered up to @end (else at is false).  0, -EIO, -EPROTO. */
static int cursor_next(struct remote *rem, struct cursor *c, uint64_t end)
{
	char from[56], count[16];
	const char *av[] = { "XRANGE", c->key, from, "+", "COUNT", count };
	const redisReply *el;
	uint64_t g;
	int rc;

	c->g = 0;
	c->at = c->pre = false;
	if (c->rep && c->k + 1 < c->rep->elements) {
		c->k++;
	} else {
		if (c->rep && c->rep->elements < HISTORY_CHUNK) {
			freeReplyObject(c->rep);
			c->rep = NULL;
			return 0;
		}
		if (c->rep)
			freeReplyObject(c->rep);
		c->rep = NULL;
		snprintf(from, sizeof(from), "%s%s", strcmp(c->last, "-") ? "(" : "",
			 c->last);
		snprintf(count, sizeof(count), "%d", HISTORY_CHUNK);
		rc = rconn_pool_call(rem->pool, 0, 6, av, NULL, &c->rep);
		if (rc)
			return rc;
		if (c->rep->type != REDIS_REPLY_ARRAY)
			return -EPROTO;
		if (c->rep->elements == 0)
			return 0;
		c->k = 0;
	}
	el = c->rep->element[c->k];
	if (el->type != REDIS_REPLY_ARRAY || el->elements != 2 ||
	    el->element[0]->type != REDIS_REPLY_STRING ||
	    el->element[1]->type != REDIS_REPLY_ARRAY)
		return -EPROTO;
	snprintf(c->last, sizeof(c->last), "%s", el->element[0]->str);
	g = 0;
	for (size_t i = 0; i + 1 < el->element[1]->elements; i += 2) {
		const redisReply *f = el->element[1]->element[i];

		if (f->type == REDIS_REPLY_STRING && strcmp(f->str, "gseq") == 0 &&
		    !dec_u64(el->element[1]->element[i + 1]->str, &g))
			return -EPROTO;
	}
	if (!g)
		c->at = c->pre = true;
	else if (g <= end)
		c->g = g, c->at = true;
	return 0;
}

/* The store's number now (meta gseq): 0 or -errno. */
static int store_gseq(struct remote *rem, uint64_t *g)
{
	const char *av[] = { "HGET", rem->meta, "gseq" };
	redisReply *rep = NULL;
	int rc = rconn_pool_call(rem->pool, 0, 3, av, NULL, &rep);

	if (rc)
		return rc;
	rc = rep->type == REDIS_REPLY_STRING && dec_u64(rep->str, g) ? 0 : -ENODATA;
	freeReplyObject(rep);
	return rc;
}

/*
 * The root's lines from number @seq on, where the store has one order
 * of all tenants: the root log read whole (from its first entry) names
 * every tenant; each tenant's log that may hold a line numbered @seq or
 * more must hold its whole history, and the logs are applied, merged by
 * the order's numbers up to the store's number when the call began, to
 * a store made for the call, read by a root reader from @seq with
 * @cred: line for line what the mount's own log showed.
 */
static int root_history(struct store *s, const struct store_cred *cred,
			uint64_t seq, char **text, size_t *len, uint64_t *upto)
{
	struct remote *rem = remote_of(s);
	struct store_limits l = *store_limits(s);
	struct store_clock clk = { clock_zero, NULL };
	struct hist h = { 0 };
	struct cursor *cs = NULL;
	size_t nc = 0, applied = 0;
	uint64_t end = 0;
	int rc;

	rc = same_instance(rem);
	if (rc != 1)
		return rc ? rc : -ENODATA;
	rc = store_gseq(rem, &end);
	if (rc)
		return rc;
	l.event_log = STORE_HISTORY_RING;
	rc = store_new(&l, &clk, &h.s);
	if (!rc)
		rc = mirror_attach(h.s, "", 0);
	if (rc)
		goto out;
	store_root_order_reset(h.s, 0);
	/* The root log first, whole: the tenants it names. */
	cs = calloc(1, sizeof(*cs));
	if (!cs) {
		rc = -ENOMEM;
		goto out;
	}
	nc = 1;
	snprintf(cs[0].key, sizeof(cs[0].key), "%s", rem->rootlog);
	snprintf(cs[0].last, sizeof(cs[0].last), "-");
	for (bool first = true;; first = false) {
		struct cursor *c = &cs[0];
		struct entry e;
		uint64_t tid, cur;

		rc = cursor_next(rem, c, UINT64_MAX);
		if (rc || !c->at)
			break;
		if (entry_parse(c->rep->element[c->k]->element[1], &e) != 0) {
			rc = -EPROTO;
			break;
		}
		if (first && e.seq != 1) {
			rc = -ENODATA; /* trimmed: tenants may be unknown */
			break;
		}
		if (!entry_u64(&e, "tid", &tid) || !tid)
			continue;
		if (strcmp(e.op, "cleanup") == 0) {
			for (size_t i = 1; i < nc; i++)
				if (cs[i].tid == tid) {
					cs[i].cleaned = true;
					cs[i].cleanup = c->g;
				}
			continue;
		}
		if (strcmp(e.op, "tenant") != 0)
			continue;
		{
			struct cursor *ncs = realloc(cs, (nc + 1) * sizeof(*cs));

			if (!ncs) {
				rc = -ENOMEM;
				break;
			}
			cs = ncs;
		}
		memset(&cs[nc], 0, sizeof(cs[nc]));
		cs[nc].tid = tid;
		snprintf(cs[nc].last, sizeof(cs[nc].last), "-");
		remote_tenant_key(s, tid, cs[nc].key, sizeof(cs[nc].key));
		cur = strlen(cs[nc].key);
		cs[nc].key[cur - 1] = '\0';
		strncat(cs[nc].key, "log", sizeof(cs[nc].key) - cur);
		nc++;
		rc = mirror_tenant_add(h.s, tid, entry_str(&e, "name"));
		if (rc)
			break;
	}
	if (rc)
		goto out;
	/* Then every log from its start, merged by the order's numbers. */
	for (size_t i = 0; i < nc; i++) {
		if (cs[i].rep)
			freeReplyObject(cs[i].rep);
		cs[i].rep = NULL;
		snprintf(cs[i].last, sizeof(cs[i].last), "-");
		rc = cursor_next(rem, &cs[i], end);
		if (rc == 0 && i > 0 && cs[i].at) {
			struct entry e;
			const char *kind;

			if (entry_parse(cs[i].rep->element[cs[i].k]->element[1], &e))
				rc = -EPROTO;
			else if (e.seq != 1 || strcmp(e.op, "join") != 0 ||
				 !(kind = entry_str(&e, "kind")) ||
				 strcmp(kind, "tenant") != 0)
				rc = -ENODATA;
		}
		/* A tenant whose log is gone or trimmed: all right when it
		 * went before @seq (its cleanup's root entry, numbered C, is
		 * at or before it: the tenant's last line is C - 1; or it
		 * came before the order); one with no entry up to the store's
		 * number was made after the call began. */
		if (rc == 0 && i > 0 && !cs[i].at && cs[i].cleaned)
			rc = -ENODATA;
		if (rc == -ENODATA && i > 0 && cs[i].cleaned &&
		    (cs[i].cleanup == 0 || cs[i].cleanup <= seq)) {
			cs[i].at = false;
			rc = 0;
		}
		if (rc)
			goto out;
	}
	rc = store_events_open(h.s, NULL, cred, STORE_EVENTS_WHOLE_LOG, &h.r);
	if (rc)
		goto out;
	store_events_start(h.s, h.r, NULL, seq);
	/* What came before the order (a library without it wrote it, before
	 * the upgrade): each log's in its order, the root's first, each
	 * tenant's whole before the next's (tenants in the order they were
	 * made); it shows no number the reader asks for. */
	for (size_t i = 0; i < nc && !rc; i++)
		while (!rc && cs[i].at && cs[i].pre) {
			struct entry e;

			if (entry_parse(cs[i].rep->element[cs[i].k]->element[1], &e)) {
				rc = -EPROTO;
				break;
			}
			rc = mirror_apply(h.s, cs[i].tid, &e);
			if (rc)
				rc = rc == -ENOMEM ? rc : -ENODATA;
			else if (++applied % HISTORY_CHUNK == 0)
				rc = hist_drain(&h);
			if (!rc)
				rc = cursor_next(rem, &cs[i], end);
		}
	for (; !rc;) {
		struct cursor *c = NULL;
		struct entry e;

		for (size_t i = 0; i < nc; i++)
			if (cs[i].at && cs[i].pre)
				rc = -ENODATA; /* after a numbered one */
			else if (cs[i].at && (!c || cs[i].g < c->g))
				c = &cs[i];
		if (rc || !c)
			break;
		if (entry_parse(c->rep->element[c->k]->element[1], &e) != 0) {
			rc = -EPROTO;
			break;
		}
		rc = mirror_apply(h.s, c->tid, &e);
		if (rc) {
			rc = rc == -ENOMEM ? rc : -ENODATA;
			break;
		}
		if (++applied % HISTORY_CHUNK == 0 && (rc = hist_drain(&h)) != 0)
			break;
		rc = cursor_next(rem, c, end);
		if (rc)
			break;
	}
	if (!rc)
		rc = hist_drain(&h);
	/* Read from one instance, the one the mirror follows. */
	if (!rc) {
		rc = same_instance(rem);
		rc = rc == 1 ? 0 : rc ? rc : -ENODATA;
	}
out:
	for (size_t i = 0; i < nc; i++)
		if (cs[i].rep)
			freeReplyObject(cs[i].rep);
	free(cs);
	store_events_close(h.r);
	if (h.s)
		store_free(h.s);
	if (rc) {
		free(h.text);
		return rc == -ENOMEM ? rc : rc == -EIO ? rc : -ENODATA;
	}
	*text = h.text;
	*len = h.len;
	*upto = end;
	return 0;
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
	if (rem && !tenant)
		return root_history(s, cred, seq, text, len, upto);
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
