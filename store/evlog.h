/*
 * evlog.h - the store's event log: a bounded ring of transition lines.
 *
 * Internal to store/: store/events.c appends one entry per transition
 * inside the transition's critical section; readers (store_events_* in
 * store.h) copy lines out with their own cursor.  The ring keeps the newest
 * limits.event_log entries; an append overwrites the oldest and never
 * waits for a reader.  One mutex (a leaf lock) guards the ring.
 */
#ifndef STATEFS_STORE_EVLOG_H
#define STATEFS_STORE_EVLOG_H

#include "store/store.h"

struct evlog;

/*
 * A reader (opaque in store.h; store_events_open makes one): its
 * position in the log, its scope and whose eyes it reads with.  Moved
 * only by the evlog_* calls, which its owner serializes.
 */
struct store_event_reader {
	uint64_t next;         /* sequence number it reads next */
	uint64_t tenant_ino;   /* 0: the whole store; else one tenant */
	uint64_t window;       /* how far it may fall behind */
	uint64_t until;        /* 0, or: read and report as pending only
				* lines before this sequence number */
	const struct store_cred *cred; /* NULL: every line in scope; else
					* the reader's own (&own) */
	bool internal_only;    /* sees internal lines only */
	uint64_t internal_seen; /* the log's: internal lines before next */
	/* The log's count of ends of the store instance before next, and
	 * at open: a tenant's reader that got past one has lost its tenant
	 * (evlog_gone). */
	uint64_t ends_seen, ends_open;
	struct store_cred own; /* the copy of the opener's credentials */
	/* Started at a number (evlog_start): lines showing less are not
	 * its own.  from_check: a tenant's reader by an engine's numbers,
	 * not yet past its tenant's first line numbered from or more, whose
	 * prev tells whether the log held from (from_lost: it did not; the
	 * next read begins with "overflow"). */
	uint64_t from;
	bool from_check, from_lost;
	/* A root reader of a store whose lines carry numbers of one order
	 * of all tenants (gshown): it reads and starts by those. */
	bool gorder;
	/* Lines an engine gave for the numbers before from (evlog_resume),
	 * whole lines, read before the log: hist_off of hist_len read. */
	char *hist;
	size_t hist_len, hist_off;
};

/* Make an empty log of @cap entries.  NULL when out of memory. */
struct evlog *evlog_new(size_t cap);
void evlog_free(struct evlog *l);

/* The entry an append records; names are copied. */
struct evlog_entry {
	enum store_op op;
	bool internal;
	enum store_kind kind;
	uint64_t ino;
	uint64_t tenant_ino;
	const char *tenant, *parent, *child; /* NULL or "" print as "-" */
	int64_t generation, version;         /* < 0 prints as "-" */
	/* A link's, rename's or exchange's other name, printed as two more
	 * fields; NULL for every other line (seven fields). */
	const char *from_parent, *from_child;
	/* The tenant's owner, group and permission bits when the line was
	 * appended: who may read it from the root's .events. */
	uid_t tenant_uid;
	gid_t tenant_gid;
	mode_t tenant_mode;
	/* The number the line shows; 0: its place in the log.  A mirror's
	 * lines show the shared store's numbers (per tenant), and prev is
	 * the number of the tenant's line before it (or where the tenant
	 * was loaded from), as the log saw it: a line whose prev is N or
	 * more follows numbers from N on that this log never held whole. */
	uint64_t shown, prev;
	/* The same in the authority's order of all tenants, for the
	 * root's readers (0: none, they read shown): gprev is the newest
	 * such number shown or loaded before it. */
	uint64_t gshown, gprev;
	/* Not a line: readers in its scope get "overflow" there (a mirror
	 * reloaded the tenant and lost its lines in between); the watch
	 * machinery gets -EOVERFLOW. */
	bool overflow;
	/* With overflow and no tenant: the store instance ended (a shared
	 * store lost its data).  The root's readers get "overflow" there;
	 * a tenant's reader, whatever its tenant, reads nothing past it:
	 * its tenant was the old instance's (evlog_gone). */
	bool end;
	/* Seen by STORE_EVENTS_INTERNAL readers only (the watch machinery),
	 * never by a .events reader: a mirror's reload applies what
	 * changed in the gap as lines for the echo and the inval thread,
	 * while .events readers get the reload's one "overflow" line. */
	bool hidden;
};

/*
 * Append @e with the next sequence number.  Returns the number, or 0 when
 * out of memory (the line is lost; the sequence does not advance).
 */
uint64_t evlog_append(struct evlog *l, const struct evlog_entry *e);

/* The sequence number the next append will get. */
uint64_t evlog_next_seq(struct evlog *l);

/* Start @r at the end of the log (its position and internal count). */
void evlog_open(struct evlog *l, struct store_event_reader *r);

/*
 * Start @r at number @seq (store_events_start).  @shown: the lines show
 * an engine's numbers (a mirror's), not their places in the log, so the
 * reader starts at the oldest entry and skips the lines below @seq; a
 * tenant's reader gets "overflow" before its first line when the log did
 * not hold @seq (that line's prev is @seq or more).  @known: the newest
 * number the tenant's lines have reached (its last line's, or where it
 * was loaded from).  Returns false when the log does not hold @seq now
 * for a tenant's reader by an engine's numbers (its tenant's first line
 * at @seq or past it follows a loss, or there is none and @known is
 * @seq or more), so that an engine may give the lines (evlog_resume);
 * true otherwise (held, or yet to come, or by places).
 */
bool evlog_start(struct evlog *l, struct store_event_reader *r, uint64_t seq,
		 bool shown, uint64_t known);

/*
 * Give @r, started at a number (evlog_start), the lines @text (@len
 * bytes, whole lines; ownership passes, NULL: none) an engine had for
 * its numbers up to @upto: it reads them first, then the log's from
 * @upto + 1 on, with the same check that the log held that number.
 */
void evlog_resume(struct evlog *l, struct store_event_reader *r, char *text,
		  size_t len, uint64_t upto);

/* See store_events_read / store_events_pending / store_events_next. */
size_t evlog_read(struct evlog *l, struct store_event_reader *r, char *buf,
		  size_t len);
bool evlog_pending(struct evlog *l, struct store_event_reader *r);

/* Has tenant reader @r read every line before an end of the store
 * instance (an evlog_entry with end), and so lost its tenant?  Then
 * evlog_read gives it nothing more and evlog_pending says true. */
bool evlog_gone(const struct store_event_reader *r);
int evlog_next(struct evlog *l, struct store_event_reader *r,
	       struct store_event *ev);

#endif /* STATEFS_STORE_EVLOG_H */
