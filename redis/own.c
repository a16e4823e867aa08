/*
 * own.c - a call's own entries, applied by the mount that made the call.
 * A mutation's successful outcome ends with the entries the call
 * appended to its tenant's log (redis/lua/call.lua, finish): the
 * caller's thread applies them to the mirror at once, each when it is
 * the next one (mirror_apply_next), so that the transition answers
 * without waiting for the follower to learn of them, read the log and
 * wake it.  An entry that is not the next (another mount's change came
 * between, the mirror lags, the tenant is a shell) is left to the
 * follower, and the caller waits for it as before (redis/call.c).
 *
 * The follower is told where each log stands (own_catch_up): the news
 * of an entry applied so is no reason to read its log
 * (redis/subscribe.c), and the next read of that log starts past it.
 *
 * What it owns
 * ------------
 * The hints for the follower (struct remote's own[], under its lock):
 * tenant, seq and entry id of the last own entry applied per tenant,
 * OWN_HINTS at most (a hint lost costs a log read, nothing else).
 *
 * Threads and locks
 * -----------------
 * A caller's thread, after its reply came (no lock held on the
 * network): mirror_apply_next takes the mirror's apply lock
 * (LOCK_ENGINE_APPLY) around the embedded transitions; the hint is
 * written under remote->lock (LOCK_ENGINE_STATE, alone) after.  The
 * follower takes the hints under the same lock at the start of a round.
 */
#include "store/engine.h"
#include "redis/mirror.h"
#include "redis/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>

/* The tenant id of tenant key @key (P:{P.tTID}:t), 0 when not one. */
static uint64_t key_tid(const char *key)
{
	const char *end = strchr(key, '}'), *t;
	uint64_t tid = 0;

	if (!end)
		return 0;
	for (t = end; t > key + 1 && !(t[-2] == '.' && t[-1] == 't'); t--)
		;
	if (t <= key + 1)
		return 0;
	while (t < end && *t >= '0' && *t <= '9')
		tid = tid * 10 + (uint64_t)(*t++ - '0');
	return t == end ? tid : 0;
}

redisReply *own_detach(redisReply *rep)
{
	redisReply *last;

	if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements < 4)
		return NULL;
	last = rep->element[rep->elements - 1];
	if (last->type != REDIS_REPLY_ARRAY || last->elements < 3 ||
	    last->element[0]->type != REDIS_REPLY_STRING ||
	    strcmp(last->element[0]->str, "sfs.entries") != 0)
		return NULL;
	rep->element[--rep->elements] = NULL;
	return last;
}

/* Is @id a stream id (MS-SEQ, decimals)? */
static bool stream_id(const char *id)
{
	size_t a = strspn(id, "0123456789"), b;

	if (!a || id[a] != '-')
		return false;
	b = strspn(id + a + 1, "0123456789");
	return b && !id[a + 1 + b];
}

/* Stream ids @a and @b ("MS-SEQ"): is @a past @b? */
static bool id_past(const char *a, const char *b)
{
	uint64_t am = 0, as = 0, bm = 0, bs = 0;

	if (sscanf(a, "%" SCNu64 "-%" SCNu64, &am, &as) != 2)
		return false;
	if (sscanf(b, "%" SCNu64 "-%" SCNu64, &bm, &bs) != 2)
		return true;
	return am > bm || (am == bm && as > bs);
}

/* Tell the follower that tenant @tid's log is applied up to @seq, entry
 * @id. */
static void hint(struct remote *r, uint64_t tid, uint64_t seq, const char *id)
{
	size_t i;

	lock(&r->lock, LOCK_ENGINE_STATE);
	for (i = 0; i < r->nown && r->own[i].tid != tid; i++)
		;
	if (i < OWN_HINTS && strlen(id) < sizeof(r->own[i].id)) {
		if (i == r->nown)
			r->nown++;
		r->own[i].tid = tid;
		r->own[i].seq = seq;
		snprintf(r->own[i].id, sizeof(r->own[i].id), "%s", id);
	}
	unlock(&r->lock, LOCK_ENGINE_STATE);
}

bool own_begin(struct store *s, const char *tkey, uint64_t *tid)
{
	struct remote *r = remote_of(s);
	bool made = true;
	size_t i;

	*tid = key_tid(tkey);
	if (!*tid)
		return false;
	lock(&r->lock, LOCK_ENGINE_STATE);
	for (i = 0; i < r->nflying && r->flying[i].tid != *tid; i++)
		;
	if (i < r->nflying) {
		r->flying[i].n++;
	} else if (i < OWN_HINTS) {
		r->flying[r->nflying].tid = *tid;
		r->flying[r->nflying].last = 0;
		r->flying[r->nflying++].n = 1;
	} else {
		made = false;
	}
	unlock(&r->lock, LOCK_ENGINE_STATE);
	return made;
}

/* Is a mutation of this mount about tenant @tid on its way?  If so, the
 * news of seq @last is noted for when the last such ends (own_done). */
static bool flying(struct remote *r, uint64_t tid, uint64_t last)
{
	bool yes = false;

	lock(&r->lock, LOCK_ENGINE_STATE);
	for (size_t i = 0; i < r->nflying && !yes; i++)
		if (r->flying[i].tid == tid) {
			yes = true;
			if (r->flying[i].last < last)
				r->flying[i].last = last;
		}
	unlock(&r->lock, LOCK_ENGINE_STATE);
	return yes;
}

/* Apply own entries @own of tenant @tid, each while it is the next; the
 * follower told, the waiters woken. */
static void apply(struct store *s, uint64_t tid, const redisReply *own)
{
	struct remote *r = remote_of(s);
	uint64_t seq = 0;
	const char *id = NULL;
	struct entry e;

	for (size_t i = 1; i + 1 < own->elements; i += 2) {
		if (own->element[i]->type != REDIS_REPLY_STRING ||
		    entry_parse(own->element[i + 1], &e) != 0 ||
		    mirror_apply_next(s, tid, &e) != 0)
			break;
		seq = e.seq + (e.nseq > 1 ? e.nseq : 1) - 1;
		id = own->element[i]->str;
	}
	if (id) {
		hint(r, tid, seq, id);
		applied_wake(r);
	}
}

void own_done(struct store *s, uint64_t tid, bool made,
	      const redisReply *rep, redisReply *own)
{
	struct remote *r = remote_of(s);
	uint64_t seq = 0, at = 0, last = 0;
	bool gone = false, read;
	size_t i;

	if (own && tid && rep && strcmp(rep->element[0]->str, "OK") == 0)
		apply(s, tid, own);
	if (own)
		freeReplyObject(own);
	if (!made)
		return;
	/* Whatever the outcome (a refusal may follow an expiry it wrote),
	 * the follower reads what the mirror lacks of it, and of the news
	 * left to this mount's calls about the tenant (another of them
	 * may have written its log) once the last of them ends. */
	if (rep)
		seq = out_u64(rep, 2);
	lock(&r->lock, LOCK_ENGINE_STATE);
	for (i = 0; i < r->nflying && r->flying[i].tid != tid; i++)
		;
	if (i < r->nflying && --r->flying[i].n == 0) {
		last = r->flying[i].last;
		r->flying[i] = r->flying[--r->nflying];
	}
	unlock(&r->lock, LOCK_ENGINE_STATE);
	if (last > seq)
		seq = last;
	read = !seq || mirror_applied(s, tid, &at, &gone) != 0 ||
	       (!gone && at < seq);
	lock(&r->lock, LOCK_ENGINE_STATE);
	if (read) {
		for (i = 0; i < r->nkick && r->kick[i] != tid; i++)
			;
		if (i == r->nkick && i < OWN_HINTS)
			r->kick[r->nkick++] = tid;
		else if (i == r->nkick)
			r->kick_all = true;
	}
	unlock(&r->lock, LOCK_ENGINE_STATE);
	if (read)
		follow_wake(s);
}

bool own_news(struct store *s, uint64_t tid, const char *msg)
{
	const char *me = mirror_of(s)->by, *by, *g;
	struct mirror *m = mirror_of(s);
	uint64_t last, seq = 0, first;
	size_t n = strlen(me), hl;
	char *end, payload[160];
	bool gone = false;

	if (!msg)
		return false;
	/* Its first line: SEQ BY [GSEQ] (the entries follow it). */
	hl = strcspn(msg, "\n");
	if (hl >= sizeof(payload))
		return false;
	memcpy(payload, msg, hl);
	payload[hl] = '\0';
	errno = 0;
	last = strtoull(payload, &end, 10);
	if (errno || end == payload || (*end && *end != ' '))
		return false;
	by = *end ? end + 1 : end;
	g = strchr(by, ' ');
	/* This mount's call on its way: its caller applies the entries,
	 * unless the store's order says one came between (then the
	 * follower reads at once, as for another mount's news). */
	if (n && strncmp(by, me, n) == 0 && (by[n] == ' ' || !by[n]) &&
	    flying(remote_of(s), tid, last) &&
	    !(g && atomic_load(&m->gorder) && dec_u64(g + 1, &first) &&
	      first != atomic_load(&m->gseq_applied) + 1))
		return true;
	return mirror_applied(s, tid, &seq, &gone) == 0 && !gone && seq >= last;
}

void own_catch_up(struct store *s)
{
	struct remote *r = remote_of(s);
	struct { uint64_t tid, seq; char id[48]; } h[OWN_HINTS];
	uint64_t kick[OWN_HINTS];
	size_t n, nk;
	bool all;

	lock(&r->lock, LOCK_ENGINE_STATE);
	n = r->nown;
	for (size_t i = 0; i < n; i++) {
		h[i].tid = r->own[i].tid;
		h[i].seq = r->own[i].seq;
		memcpy(h[i].id, r->own[i].id, sizeof(h[i].id));
	}
	r->nown = 0;
	nk = r->nkick;
	memcpy(kick, r->kick, nk * sizeof(kick[0]));
	r->nkick = 0;
	all = r->kick_all;
	r->kick_all = false;
	unlock(&r->lock, LOCK_ENGINE_STATE);
	if (all)
		subs_all_due(r);
	for (size_t i = 0; i < nk; i++) {
		struct follow_ix *x = follow_pos_find(r, kick[i]);

		if (x)
			r->pos[x->i].due = true;
	}
	for (size_t i = 0; i < n; i++) {
		struct follow_ix *x = follow_pos_find(r, h[i].tid);
		uint64_t seq = 0;
		bool gone = false;

		/* Only while the mirror still holds what the hint says (a
		 * reload since may have taken it to an earlier dump). */
		if (x && mirror_applied(s, h[i].tid, &seq, &gone) == 0 && !gone &&
		    seq >= h[i].seq && id_past(h[i].id, r->pos[x->i].id))
			snprintf(r->pos[x->i].id, sizeof(r->pos[x->i].id), "%s",
				 h[i].id);
	}
}

/* The next LEN:BYTES item of a message at *@p (before @end) into @buf
 * (NUL-terminated; @buf's room is the message's): its start, or NULL;
 * its length in *@ilen. */
static char *item(const char **p, const char *end, char **buf, size_t *ilen)
{
	const char *q = *p;
	char *out = *buf;
	size_t len = 0;

	while (q < end && *q >= '0' && *q <= '9' && len < 1u << 20)
		len = len * 10 + (size_t)(*q++ - '0');
	if (q == *p || q >= end || *q != ':' || (size_t)(end - q - 1) < len)
		return NULL;
	memcpy(out, q + 1, len);
	out[len] = '\0';
	*p = q + 1 + len;
	*buf = out + len + 1;
	*ilen = len;
	return out;
}

/* A line of a message at *@p, up to its newline, into @buf as item()
 * does. */
static char *line(const char **p, const char *end, char **buf)
{
	const char *nl = memchr(*p, '\n', (size_t)(end - *p));
	char *out = *buf;

	if (!nl)
		return NULL;
	memcpy(out, *p, (size_t)(nl - *p));
	out[nl - *p] = '\0';
	*buf = out + (nl - *p) + 1;
	*p = nl + 1;
	return out;
}

bool news_apply(struct store *s, uint64_t tid, const char *msg, size_t len)
{
	struct remote *r = remote_of(s);
	const char *p = memchr(msg, '\n', len), *end = msg + len;
	struct follow_ix *x = follow_pos_find(r, tid);
	char *buf, *at, *id, *count;
	struct entry *e;
	bool all = false;
	uint64_t n;

	if (!p || !x || !tid)
		return false;
	p++;
	buf = st_malloc(len * 2 + 16);
	e = st_malloc(sizeof(*e));
	if (!buf || !e) {
		free(buf);
		free(e);
		return false;
	}
	while (p < end) {
		at = buf;
		all = false;
		if (!(id = line(&p, end, &at)) || !(count = line(&p, end, &at)) ||
		    !dec_u64(count, &n) || n % 2 || n / 2 > ENTRY_FIELDS_MAX ||
		    strlen(id) >= sizeof(r->pos[0].id) || !stream_id(id))
			break;
		memset(e, 0, offsetof(struct entry, f));
		for (uint64_t i = 0; i < n; i += 2) {
			size_t kl, vl = 0;
			char *k = item(&p, end, &at, &kl);
			char *v = k ? item(&p, end, &at, &vl) : NULL;

			if (!v)
				break;
			e->f[e->n].name = k;
			e->f[e->n].value = v;
			e->f[e->n++].len = vl;
		}
		if (e->n * 2 != n || entry_finish(e) != 0 ||
		    mirror_apply_next(s, tid, e) != 0)
			break;
		/* The follower's own position: this thread's. */
		snprintf(r->pos[x->i].id, sizeof(r->pos[x->i].id), "%s", id);
		all = true;
	}
	free(buf);
	free(e);
	return all;
}
