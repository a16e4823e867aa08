/*
 * evlog.c - the store's event log (see evlog.h).
 *
 * Entry k lives in slot k % cap.  The log holds entries [first, next);
 * first = max(1, next - cap).  A reader sees the entries in its scope
 * and, when it has credentials, of the tenants they may list (judged by
 * the owner and mode each entry carries); a hidden entry (a mirror's
 * reload, evlog.h) only an internal_only reader sees.  It is moved past
 * the entries it does not see before anything else, so they never make
 * it fall behind while they are still in the ring.
 *
 * A reader may read up to its end: the end of the log, or r->until when
 * that is set and earlier (the daemon's .events readers wait there for
 * its inval thread).  It fell behind when it lost something it could
 * have read: its next visible entry was overwritten (older than first),
 * or it is more than its window behind its end.  Entries past its end are
 * not yet its to read and never count, however far the log has moved on:
 * a reader that has read everything up to its end is never behind.  A
 * reader that fell behind gets one "overflow" line and jumps to the
 * oldest entry it may still read, max(first, end - window).  Each entry
 * keeps its formatted line (without the sequence number) and its names
 * for the watcher path.
 *
 * Each entry also records how many internal entries came before it, and
 * a reader how many came before its next entry (internal_seen), so an
 * internal_only reader whose next entry was overwritten can tell whether
 * an internal one went with it: if none did, it lost nothing it would
 * have seen, and it moves on to the oldest entry without falling behind.
 *
 * A reader may start at a number instead of the present (evlog_start):
 * by places in the log, it starts there (an overwritten place makes it
 * fall behind, so it gets "overflow" and the oldest entry); by an
 * engine's numbers (a mirror's lines, numbered per tenant), it starts at
 * the oldest entry with the lines below its number made invisible, and
 * for a tenant's reader its tenant's first line at that number or past
 * it says whether the log held the number: when that line's prev (the
 * tenant's number before it) is the number or more, the lines in between
 * are not in the log, and the reader's next line comes after "overflow"
 * (a line it may not see counts too: it tells, it is not shown).  Lines
 * an engine gave for the numbers the log lacks (evlog_resume) come
 * first, whole.  Its window is the whole log.  A root reader of an
 * engine with one order of all tenants (gorder) does the same by the
 * lines' numbers in that order (gshown, gprev) over every tenant's lines.
 *
 * The end of the store instance (an entry with end) is counted the same
 * way (ends_before, ends_seen).  A tenant's reader that got past one, by
 * reading up to it or by jumping over it when it fell behind, lost its
 * tenant for good: the tenant of that name in the new instance is
 * another node.  It reads nothing more (evlog_gone); its owner answers
 * ESTALE from then on.
 */
#include "store/evlog.h"
#include "store/alloc.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const op_names[] = {
	[STORE_OP_JOIN] = "join",     [STORE_OP_LEAVE] = "leave",
	[STORE_OP_DEPART] = "depart", [STORE_OP_CREATE] = "create",
	[STORE_OP_WRITE] = "write",   [STORE_OP_UNLINK] = "unlink",
	[STORE_OP_LINK] = "link",     [STORE_OP_RENAME] = "rename",
	[STORE_OP_EXPIRE] = "expire", [STORE_OP_DRAIN] = "drain",
	[STORE_OP_CLEANUP] = "cleanup", [STORE_OP_EXCHANGE] = "exchange",
};

struct slot {
	uint64_t seq;          /* 0: empty */
	uint64_t internal_before; /* internal entries appended before it */
	uint64_t ends_before;  /* ends of the store instance before it */
	struct evlog_entry e;  /* names point into text */
	char *text;            /* "op\tT\tP\tC\tG\tV\n" (or with "\tFP\tFC"
				* before the newline) then the five names */
	size_t len;            /* of the line part */
};

struct evlog {
	pthread_mutex_t lock;
	size_t cap;
	uint64_t next;         /* lock: the next sequence number */
	uint64_t internal;     /* lock: internal entries appended so far */
	uint64_t ends;         /* lock: ends of the store instance so far */
	struct slot *ring;     /* lock */
};

struct evlog *evlog_new(size_t cap)
{
	struct evlog *l = st_calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->ring = st_calloc(cap, sizeof(*l->ring));
	if (!l->ring) {
		free(l);
		return NULL;
	}
	l->cap = cap;
	l->next = 1;
	pthread_mutex_init(&l->lock, NULL);
	return l;
}

void evlog_free(struct evlog *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->cap; i++)
		free(l->ring[i].text);
	pthread_mutex_destroy(&l->lock);
	free(l->ring);
	free(l);
}

static const char *field(const char *s)
{
	return s && *s ? s : "-";
}

static void num(char *buf, size_t len, int64_t v)
{
	if (v < 0)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%" PRId64, v);
}

uint64_t evlog_append(struct evlog *l, const struct evlog_entry *e)
{
	char g[24], v[24], *text;
	const char *t = e->tenant ? e->tenant : "";
	const char *p = e->parent ? e->parent : "";
	const char *c = e->child ? e->child : "";
	const char *fp = e->from_parent ? e->from_parent : "";
	const char *fc = e->from_child ? e->from_child : "";
	size_t tl = strlen(t), pl = strlen(p), cl = strlen(c);
	size_t fpl = strlen(fp), fcl = strlen(fc);
	bool from = e->from_parent || e->from_child;
	int n;
	struct slot *sl;
	uint64_t seq;

	num(g, sizeof(g), e->generation);
	num(v, sizeof(v), e->version);
	/* Formatted before the lock: the critical section only links it. */
	n = snprintf(NULL, 0, "%s\t%s\t%s\t%s\t%s\t%s%s%s%s%s\n",
		     op_names[e->op], field(t), field(p), field(c), g, v,
		     from ? "\t" : "", from ? field(e->from_parent) : "",
		     from ? "\t" : "", from ? field(e->from_child) : "");
	text = st_malloc((size_t)n + 1 + tl + 1 + pl + 1 + cl + 1 + fpl + 1 +
			 fcl + 1);
	if (!text) {
		/* Out of memory: the transition stands, its line cannot be
		 * kept.  The slot still takes its number, and readers get a
		 * "lost" line there instead of a silent gap. */
		pthread_mutex_lock(&l->lock);
		seq = l->next++;
		sl = &l->ring[seq % l->cap];
		free(sl->text);
		memset(sl, 0, sizeof(*sl));
		sl->seq = seq;
		sl->internal_before = l->internal;
		l->internal += e->internal;
		sl->ends_before = l->ends;
		l->ends += e->end;
		sl->e = *e; /* scope and owner: who is told of the loss */
		sl->e.tenant = sl->e.parent = sl->e.child = NULL;
		sl->e.from_parent = sl->e.from_child = NULL;
		pthread_mutex_unlock(&l->lock);
		return seq;
	}
	snprintf(text, (size_t)n + 1, "%s\t%s\t%s\t%s\t%s\t%s%s%s%s%s\n",
		 op_names[e->op], field(t), field(p), field(c), g, v,
		 from ? "\t" : "", from ? field(e->from_parent) : "",
		 from ? "\t" : "", from ? field(e->from_child) : "");
	memcpy(text + n + 1, t, tl + 1);
	memcpy(text + n + 1 + tl + 1, p, pl + 1);
	memcpy(text + n + 1 + tl + 1 + pl + 1, c, cl + 1);
	memcpy(text + n + 1 + tl + 1 + pl + 1 + cl + 1, fp, fpl + 1);
	memcpy(text + n + 1 + tl + 1 + pl + 1 + cl + 1 + fpl + 1, fc, fcl + 1);

	pthread_mutex_lock(&l->lock);
	seq = l->next++;
	sl = &l->ring[seq % l->cap];
	free(sl->text);
	sl->seq = seq;
	sl->internal_before = l->internal;
	l->internal += e->internal;
	sl->ends_before = l->ends;
	l->ends += e->end;
	sl->e = *e;
	sl->text = text;
	sl->len = (size_t)n;
	sl->e.tenant = text + n + 1;
	sl->e.parent = text + n + 1 + tl + 1;
	sl->e.child = text + n + 1 + tl + 1 + pl + 1;
	sl->e.from_parent = sl->e.child + cl + 1;
	sl->e.from_child = sl->e.from_parent + fpl + 1;
	pthread_mutex_unlock(&l->lock);
	return seq;
}

uint64_t evlog_next_seq(struct evlog *l)
{
	uint64_t n;

	pthread_mutex_lock(&l->lock);
	n = l->next;
	pthread_mutex_unlock(&l->lock);
	return n;
}

void evlog_open(struct evlog *l, struct store_event_reader *r)
{
	pthread_mutex_lock(&l->lock);
	r->next = l->next;
	r->internal_seen = l->internal;
	r->ends_seen = r->ends_open = l->ends;
	pthread_mutex_unlock(&l->lock);
}

/* Move reader @r to @seq, an entry still in the ring or l->next (lock
 * held), with its count of the internal entries before it. */
static void reader_to(struct evlog *l, struct store_event_reader *r,
		      uint64_t seq)
{
	r->next = seq;
	r->internal_seen = seq < l->next ?
			   l->ring[seq % l->cap].internal_before : l->internal;
	r->ends_seen = seq < l->next ?
		       l->ring[seq % l->cap].ends_before : l->ends;
}

bool evlog_gone(const struct store_event_reader *r)
{
	/* Past, not at: a reader started before an end (evlog_start) reads
	 * up to it first. */
	return r->tenant_ino && r->ends_seen > r->ends_open;
}

/* The number entry @sl shows: an engine's, or its place in the log. */
static uint64_t shown_of(const struct slot *sl)
{
	return sl->e.shown ? sl->e.shown : sl->seq;
}

/* The number @sl shows reader @r: a root reader by one order of all
 * tenants reads that order's, when the line has one. */
static uint64_t shown_for(const struct slot *sl, const struct store_event_reader *r)
{
	return r->gorder && sl->e.gshown ? sl->e.gshown : shown_of(sl);
}

/* The number before @sl's, as @r counts (prev or gprev). */
static uint64_t prev_for(const struct slot *sl, const struct store_event_reader *r)
{
	return r->gorder ? sl->e.gprev : sl->e.prev;
}

/* Is @sl in reader @r's scope, whoever may read it (a tenant's reader,
 * or a root reader by one order: a line that carries its number)? */
static bool in_scope(const struct slot *sl, const struct store_event_reader *r)
{
	if (sl->e.overflow || sl->e.end || sl->e.hidden)
		return false;
	return r->gorder ? sl->e.gshown != 0 : sl->e.tenant_ino == r->tenant_ino;
}

bool evlog_start(struct evlog *l, struct store_event_reader *r, uint64_t seq,
		 bool shown, uint64_t known)
{
	uint64_t first;
	bool held = true;

	pthread_mutex_lock(&l->lock);
	first = l->next > l->cap ? l->next - l->cap : 1;
	/* "As far as the log holds it": the whole ring, not a window. */
	r->window = UINT64_MAX;
	r->from = seq;
	/* Without one order of all tenants the whole store's lines are
	 * numbered per tenant: no one number says what a root reader
	 * missed. */
	r->from_check = shown && (r->tenant_ino || r->gorder);
	r->from_lost = false;
	if (shown) {
		reader_to(l, r, first);
		if (r->from_check) {
			uint64_t i = first;

			while (i < l->next && !(in_scope(&l->ring[i % l->cap], r) &&
						shown_for(&l->ring[i % l->cap], r) >= seq))
				i++;
			held = i < l->next ? prev_for(&l->ring[i % l->cap], r) < seq :
					     known < seq;
		}
	} else if (seq >= l->next) {
		reader_to(l, r, l->next); /* the future: lines below wait */
	} else if (seq >= first) {
		reader_to(l, r, seq);
	} else {
		r->next = seq; /* overwritten: catch_up_locked says so */
	}
	pthread_mutex_unlock(&l->lock);
	return held;
}

void evlog_resume(struct evlog *l, struct store_event_reader *r, char *text,
		  size_t len, uint64_t upto)
{
	pthread_mutex_lock(&l->lock);
	free(r->hist);
	r->hist = text;
	r->hist_len = text ? len : 0;
	r->hist_off = 0;
	if (text) {
		r->from = upto + 1;
		r->from_check = true;
		r->from_lost = false;
		reader_to(l, r, l->next > l->cap ? l->next - l->cap : 1);
	}
	pthread_mutex_unlock(&l->lock);
}

/* Where reader @r stops for now: the end of the log, or r->until. */
static uint64_t end_locked(struct evlog *l, const struct store_event_reader *r)
{
	return r->until && r->until < l->next ? r->until : l->next;
}

/*
 * The oldest sequence number reader @r may still read (lock held): the
 * oldest entry in the ring, or its window before its end, whichever is
 * newer.  Measured from its end, not the log's: entries it may not read
 * yet do not push it out of its window.
 */
static uint64_t oldest_locked(struct evlog *l, const struct store_event_reader *r)
{
	uint64_t first = l->next > l->cap ? l->next - l->cap : 1;
	uint64_t window = r->window && r->window < l->cap ? r->window : l->cap;
	uint64_t end = end_locked(l, r);
	uint64_t win = end > window ? end - window : 1;

	return first > win ? first : win;
}

/*
 * May reader @r see the entry in @sl?  It must be in the reader's scope
 * and, for a reader with credentials, of a tenant they may list; an
 * entry of no tenant (a drain of the whole store) is everyone's.  The end
 * of the store instance is in every reader's scope.
 */
static bool visible(const struct slot *sl, struct store_event_reader *r)
{
	if (r->internal_only ? !sl->e.internal : sl->e.hidden)
		return false;
	/* A reader started at a number: a reload's mark counts once it is
	 * past its tenant's first line at that number (before, that line's
	 * prev tells); a line below its number is not its own. */
	if (r->from && sl->e.overflow && !sl->e.end)
		return !r->from_check;
	if (r->from && !sl->e.end && shown_for(sl, r) < r->from)
		return false;
	/* By the order of all tenants, a line without its number came
	 * before the order began: below any number. */
	if (r->from && r->gorder && !sl->e.end && !sl->e.gshown)
		return false;
	if (r->tenant_ino && sl->e.tenant_ino != r->tenant_ino && !sl->e.end)
		return false;
	/* Its tenant's first line at its number, which it may see or not:
	 * did numbers from there on come before it that the log lacks? */
	if (r->from_check && in_scope(sl, r)) {
		r->from_lost = prev_for(sl, r) >= r->from;
		r->from_check = false;
	}
	return !r->cred || !sl->e.tenant_ino ||
	       store_cred_may_list(r->cred, sl->e.tenant_uid, sl->e.tenant_gid,
				   sl->e.tenant_mode);
}

/* Entries skipped between two takes of the lock. */
#define SKIP_BATCH 4096

/*
 * Move @r past the entries it does not see (lock held; it is dropped and
 * taken again every SKIP_BATCH entries, so appends never wait long).
 * Returns true when @r fell behind: entries it had not got past were
 * overwritten (for an internal_only reader: an internal one among them),
 * or the next entry it sees is more than its window before its end
 * (oldest_locked).  Else r->next is the next entry it sees, or l->next.
 */
static bool catch_up_locked(struct evlog *l, struct store_event_reader *r)
{
	for (;;) {
		uint64_t first = l->next > l->cap ? l->next - l->cap : 1;
		unsigned n = 0;

		if (r->next < first) {
			const struct slot *f = &l->ring[first % l->cap];

			if (!r->internal_only ||
			    f->internal_before != r->internal_seen)
				return true;
			reader_to(l, r, first); /* nothing it would see went */
		}
		while (r->next < l->next && n < SKIP_BATCH &&
		       !visible(&l->ring[r->next % l->cap], r)) {
			reader_to(l, r, r->next + 1);
			n++;
		}
		if (n < SKIP_BATCH)
			return r->next < oldest_locked(l, r);
		pthread_mutex_unlock(&l->lock);
		pthread_mutex_lock(&l->lock);
	}
}

/* Copy the whole lines of @r's engine lines that fit in @len bytes of
 * @buf; returns the bytes. */
static size_t hist_take(struct store_event_reader *r, char *buf, size_t len)
{
	const char *p = r->hist + r->hist_off;
	size_t left = r->hist_len - r->hist_off, n = 0;

	while (n < left) {
		const char *nl = memchr(p + n, '\n', left - n);
		size_t line = nl ? (size_t)(nl - (p + n)) + 1 : left - n;

		if (n + line > len)
			break;
		n += line;
	}
	memcpy(buf, p, n);
	r->hist_off += n;
	if (r->hist_off == r->hist_len) {
		free(r->hist);
		r->hist = NULL;
		r->hist_len = r->hist_off = 0;
	}
	return n;
}

size_t evlog_read(struct evlog *l, struct store_event_reader *r, char *buf,
		  size_t len)
{
	static const char overflow[] = "overflow\n";
	static const char lost[] = "lost\t-\t-\t-\t-\t-\n";
	size_t used = 0;

	pthread_mutex_lock(&l->lock);
	if (r->hist) {
		used = hist_take(r, buf, len);
		if (r->hist)
			goto out;
	}
	if (evlog_gone(r))
		goto out;
	if (catch_up_locked(l, r)) {
		if (used + sizeof(overflow) - 1 > len)
			goto out;
		memcpy(buf + used, overflow, sizeof(overflow) - 1);
		used += sizeof(overflow) - 1;
		reader_to(l, r, oldest_locked(l, r));
	}
	/* Within the window now: at most window entries to look at.  A
	 * tenant's reader stops for good past an end of the instance. */
	for (; r->next < end_locked(l, r) && !evlog_gone(r);
	     reader_to(l, r, r->next + 1)) {
		struct slot *sl = &l->ring[r->next % l->cap];
		const char *text;
		size_t tlen, skip;
		char seq[24];
		int sn;

		if (!visible(sl, r) || (sl->e.end && r->tenant_ino))
			continue;
		if (sl->e.overflow) {
			if (used + sizeof(overflow) - 1 > len)
				break;
			memcpy(buf + used, overflow, sizeof(overflow) - 1);
			used += sizeof(overflow) - 1;
			continue;
		}
		text = sl->text ? sl->text : lost;
		tlen = sl->text ? sl->len : sizeof(lost) - 1;
		sn = snprintf(seq, sizeof(seq), "%" PRIu64 "\t", shown_for(sl, r));
		/* A reader started at a number the log did not hold: one
		 * "overflow" first. */
		skip = r->from_lost ? sizeof(overflow) - 1 : 0;
		if (used + skip + (size_t)sn + tlen > len)
			break;
		memcpy(buf + used, overflow, skip);
		used += skip;
		r->from_lost = false;
		memcpy(buf + used, seq, (size_t)sn);
		memcpy(buf + used + sn, text, tlen);
		used += (size_t)sn + tlen;
	}
out:
	pthread_mutex_unlock(&l->lock);
	return used;
}

bool evlog_pending(struct evlog *l, struct store_event_reader *r)
{
	bool pending;

	pthread_mutex_lock(&l->lock);
	pending = r->hist || evlog_gone(r) || catch_up_locked(l, r) ||
		  r->next < end_locked(l, r);
	pthread_mutex_unlock(&l->lock);
	return pending;
}

int evlog_next(struct evlog *l, struct store_event_reader *r,
	       struct store_event *ev)
{
	struct slot *sl;
	uint64_t oldest;
	int rc = 0;

	memset(ev, 0, sizeof(*ev));
	pthread_mutex_lock(&l->lock);
	oldest = oldest_locked(l, r);
	/* An internal_only reader skips the rest first; what it skips makes
	 * it fall behind only if an internal entry went unread. */
	if (r->internal_only ? catch_up_locked(l, r) : r->next < oldest) {
		reader_to(l, r, oldest_locked(l, r));
		rc = -EOVERFLOW;
	} else if (r->next < l->next && l->ring[r->next % l->cap].e.overflow) {
		/* A mirror's reload: what the lines said is lost. */
		reader_to(l, r, r->next + 1);
		rc = -EOVERFLOW;
	} else if (r->next < l->next && !l->ring[r->next % l->cap].text) {
		/* A lost line: nothing to act on. */
		reader_to(l, r, r->next + 1);
		rc = -ENODATA;
	} else if (r->next < l->next) {
		sl = &l->ring[r->next % l->cap];
		ev->seq = sl->e.shown ? sl->e.shown : sl->seq;
		ev->op = sl->e.op;
		ev->internal = sl->e.internal;
		ev->kind = sl->e.kind;
		ev->ino = sl->e.ino;
		ev->tenant_ino = sl->e.tenant_ino;
		ev->tenant = st_strdup(sl->e.tenant);
		ev->parent = st_strdup(sl->e.parent);
		ev->child = st_strdup(sl->e.child);
		ev->from_parent = st_strdup(sl->e.from_parent);
		ev->from_child = st_strdup(sl->e.from_child);
		if (!ev->tenant || !ev->parent || !ev->child ||
		    !ev->from_parent || !ev->from_child) {
			store_event_free(ev);
			rc = -ENOMEM;
		} else {
			reader_to(l, r, r->next + 1);
			rc = 1;
		}
	}
	pthread_mutex_unlock(&l->lock);
	return rc;
}

void store_event_free(struct store_event *ev)
{
	free(ev->tenant);
	free(ev->parent);
	free(ev->child);
	free(ev->from_parent);
	free(ev->from_child);
	ev->tenant = ev->parent = ev->child = NULL;
	ev->from_parent = ev->from_child = NULL;
}
