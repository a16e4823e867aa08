/*
 * inval.c - the kernel's caches: how long it may keep names and
 * attributes, the inval thread that drops what the store changed behind
 * them, and the replies an invalidation may have overtaken.
 *
 * The kernel may keep names and attributes for -o cache_timeout, never
 * past a lease (fs_cache_timeout), so an expiry needs no help; what the
 * store changes otherwise behind the kernel's back (a .depart, a drain's
 * clear, a lease given to a node the kernel already holds) is dropped
 * from the kernel's caches by the inval thread, and so, on a shared
 * store, is what another mount changed (inval_remote).  It follows the
 * event log (.depart and drain lines; on a shared store, the lines of
 * other mounts' changes) and a queue filled by handlers, and
 * .events lines are handed out only once it has passed them, so whoever
 * learns of a change from the stream finds the caches already dropped.
 * Handlers that make such a change wait for it (fs_inval_sync), with a
 * bound: they hold a kernel lock that it may need in turn.  The same wait
 * (fs_inval_caught_up) can wait for the echo thread too, which reports
 * its progress on the same condition (fs_watch_quiesce, before a drain
 * ends the session).
 *
 * Replies in flight.  A reply the kernel caches (an entry: lookup,
 * mkdir, mknod, link, create, each readdirplus entry; attributes:
 * getattr, setattr) is computed from the store and written to /dev/fuse
 * a moment later.  If the store changes in between and its invalidation
 * reaches the kernel first, the reply that follows puts the old entry or
 * attributes back, for up to cache_timeout.  The kernel keeps some of
 * these apart by itself (a lookup or a listing holds its directory's
 * lock, which an entry invalidation takes too; the attributes of a
 * getattr or lookup reply are dropped when an invalidation came after the
 * request was sent), but not all: the attributes in a setattr, link,
 * mkdir or create reply are taken as they come, and the directory lock is
 * how this kernel works, not what the protocol promises.  So statefs
 * does not rely on it:
 *
 *  - Every such reply is counted while in flight: fs_reply_begin() before
 *    it is computed, fs_reply_end() once fuse_reply_* has returned.  It
 *    counts in replies[epoch & 1]: it reads the epoch, increments that
 *    counter and reads the epoch again; if the epoch moved meanwhile it
 *    counts again in the new one.  So a reply counted in replies[e & 1]
 *    was counted there while the epoch was still e.
 *
 *  - Whoever sends an invalidation (the inval thread, or any thread
 *    through fs_inval_attr) reads both counters just before sending.
 *    When one is not 0 it pushes a copy on the resend stack after the
 *    send.  When both are 0, a reply that begins later reads the store
 *    after the change that was invalidated (the change came before the
 *    read), so it cannot bring the old state back.  (Read after the
 *    send, the counters would miss a reply written between the send and
 *    the read: in flight across the send, yet no longer counted.)
 *
 *  - The inval thread lets copies gather for RESEND_GATHER_MS, then
 *    takes the whole stack, moves the epoch from e to
 *    e + 1 and waits until replies[e & 1] is 0 (the last fs_reply_end
 *    wakes it), then sends the stack again, this time without keeping
 *    copies.  Every reply in flight when one of those invalidations was
 *    sent began in epoch e or earlier, and the replies of an earlier
 *    epoch ended before the earlier wait for that epoch did, so all of
 *    them have been written by then.  Replies that begin during the wait
 *    count in the other counter and do not hold it up: under a steady
 *    load the wait still ends as soon as the replies in flight at its
 *    start are written.
 *
 *  - inval_seq moves on only after that, so an .events reader is handed
 *    a line only once every reply that could have overtaken its
 *    invalidation has been corrected.
 *
 *  The replies pay an atomic increment and two loads to begin, a
 *  decrement and a load to end; the senders and the inval thread pay the
 *  rest, and only while replies are in flight.  A copy that cannot be
 *  allocated makes the next wait end with inval_everything() instead.
 *
 * Locks: fs->watch_lock guards the queue, inval_seq and the counts of
 * what was asked and done; the resend stack and the reply counters are
 * atomics.  Invalidations are sent with no lock held.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs/fs.h"

#define INVAL_WAIT_MS 200
/* Events the inval thread handles before it says how far it got: an
 * .events reader's end (fs/events.c) then moves in steps well inside
 * its window, so a lagging inval thread that catches up never pushes a
 * reader out of its window by itself. */
#define INVAL_BATCH 256
/* How often the inval thread looks at the replies it waits for, should a
 * wake-up from fs_reply_end be missed. */
#define GRACE_POLL_MS 10
#define RESEND_GATHER_MS 1
/* The kernel rounds a timeout up to its tick and starts it when the
 * reply arrives: stop caching a little before a deadline. */
#define CACHE_MARGIN_MS 20

/* A queued invalidation: a name in a directory, or an inode's attributes. */
struct fs_inval {
	struct fs_inval *next;
	uint64_t dir_ino;               /* 0: the attributes of ino */
	uint64_t ino;
	char name[];
};

double fs_cache_timeout(struct fs *fs, struct store_node *n)
{
	uint64_t h, now;
	double t;

	if (fs->cache_s <= 0)
		return 0;
	h = store_node_horizon(fs->store, n);
	if (!h)
		return fs->cache_s;
	/* A test clock jumps: nothing under a lease is cached at all. */
	if (fs->testclock)
		return 0;
	now = store_now_ms(fs->store);
	if (h <= now + CACHE_MARGIN_MS)
		return 0;
	t = (double)(h - now - CACHE_MARGIN_MS) / 1000.0;
	return t < fs->cache_s ? t : fs->cache_s;
}

static struct fs_inval *inval_new(uint64_t dir, uint64_t ino, const char *name)
{
	size_t len = strlen(name) + 1;
	struct fs_inval *q = malloc(sizeof(*q) + len);

	if (q) {
		q->next = NULL;
		q->dir_ino = dir;
		q->ino = ino;
		memcpy(q->name, name, len);
	}
	return q;
}

/* Replies in flight (see the file comment) -------------------------------- */

/* The token of a reply that is not counted: nothing is cached. */
#define REPLY_UNCOUNTED 2u

unsigned fs_reply_begin(struct fs *fs)
{
	if (fs->cache_s <= 0)
		return REPLY_UNCOUNTED;
	for (;;) {
		uint64_t e = atomic_load(&fs->reply_epoch);
		unsigned c = (unsigned)(e & 1);

		atomic_fetch_add(&fs->replies[c].n, 1);
		/* Counted while the epoch was still e: the inval thread's
		 * wait for epoch e sees it.  Else count again, in the new
		 * epoch. */
		if (atomic_load(&fs->reply_epoch) == e)
			return c;
		fs_reply_end(fs, c);
	}
}

void fs_reply_end(struct fs *fs, unsigned token)
{
	if (token == REPLY_UNCOUNTED)
		return;
	/* The last reply of the counter the inval thread waits for: wake
	 * it.  It sets grace_waiter before it reads the counter, this reads
	 * grace_waiter after the decrement: one of the two sees the other. */
	if (atomic_fetch_sub(&fs->replies[token].n, 1) == 1 &&
	    atomic_load(&fs->grace_waiter) == (int)token + 1) {
		pthread_mutex_lock(&fs->watch_lock);
		pthread_cond_signal(&fs->inval_cond);
		pthread_mutex_unlock(&fs->watch_lock);
	}
}

/* Is any reply in flight?  Read before the invalidation is sent. */
static bool replies_in_flight(struct fs *fs)
{
	return atomic_load(&fs->replies[0].n) + atomic_load(&fs->replies[1].n) > 0;
}

/* Keep a copy of an invalidation just sent, to send again once the
 * replies now in flight are written (any thread, no lock held). */
static void resend_push(struct fs *fs, uint64_t dir, uint64_t ino,
			const char *name)
{
	struct fs_inval *q = inval_new(dir, ino, name);
	struct fs_inval *head;

	if (!q) {
		atomic_store(&fs->resend_all, true);
		head = NULL;
	} else {
		head = atomic_load(&fs->resend);
		do
			q->next = head;
		while (!atomic_compare_exchange_weak(&fs->resend, &head, q));
	}
	/* The first on the stack wakes the inval thread. */
	if (!head) {
		pthread_mutex_lock(&fs->watch_lock);
		pthread_cond_signal(&fs->inval_cond);
		pthread_mutex_unlock(&fs->watch_lock);
	}
}

/*
 * Send one invalidation: a name in directory @dir, or, @dir 0, the
 * attributes of @ino.  With @remember, a copy is kept to be sent again if
 * a reply is in flight that may have been computed before it.
 */
static void inval_send(struct fs *fs, uint64_t dir, uint64_t ino,
		       const char *name, bool remember)
{
	bool in_flight;

	if (fs->cache_s <= 0 || !fs->se || (dir && !*name))
		return;
	in_flight = remember && replies_in_flight(fs);
	if (dir)
		(void)fuse_lowlevel_notify_inval_entry(fs->se, dir, name,
						       strlen(name));
	else
		(void)fuse_lowlevel_notify_inval_inode(fs->se, ino, -1, 0);
	if (in_flight)
		resend_push(fs, dir, ino, dir ? name : "");
}

void fs_inval_attr(struct fs *fs, uint64_t ino)
{
	inval_send(fs, 0, ino, "", true);
}

/* The store's attribute hook: states published, or a cascade took a link from. */
void fs_inval_attrs_changed(void *arg, const uint64_t *ino, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fs_inval_attr(arg, ino[i]);
}

static void inval_name(struct fs *fs, uint64_t dir, const char *name)
{
	inval_send(fs, dir, 0, name, true);
}

struct names {
	struct fs_inval *list;
	uint64_t n;
};

static void collect_name(void *arg, uint64_t dir, const char *name)
{
	struct names *nm = arg;
	struct fs_inval *q = inval_new(dir, 0, name);

	if (q) {
		q->next = nm->list;
		nm->list = q;
		nm->n++;
	}
}

void fs_inval_names(struct fs *fs, struct store_node *n)
{
	struct names nm = { 0 };
	struct fs_inval *last;

	if (fs->cache_s <= 0)
		return;
	/* The attributes item first: the list's tail, as names go in front. */
	nm.list = last = inval_new(0, store_node_ino(n), "");
	nm.n = last ? 1 : 0;
	store_node_names(fs->store, n, collect_name, &nm);
	if (!last)
		for (last = nm.list; last && last->next; last = last->next)
			;
	pthread_mutex_lock(&fs->watch_lock);
	if (last) {
		last->next = fs->inval_queue;
		fs->inval_queue = nm.list;
		fs->inval_asked += nm.n;
	}
	pthread_cond_signal(&fs->inval_cond);
	pthread_mutex_unlock(&fs->watch_lock);
}

void fs_inval_entry(struct fs *fs, uint64_t dir, const char *name)
{
	struct fs_inval *q;

	if (fs->cache_s <= 0 || !(q = inval_new(dir, 0, name)))
		return;
	pthread_mutex_lock(&fs->watch_lock);
	q->next = fs->inval_queue;
	fs->inval_queue = q;
	fs->inval_asked++;
	pthread_cond_signal(&fs->inval_cond);
	pthread_mutex_unlock(&fs->watch_lock);
}

/*
 * Wait at most @ms until the inval thread (when caching is on) and, with
 * @echo, the echo thread have handled every event logged so far and
 * every invalidation queued so far.  Both threads say how far they got
 * on fs->inval_progress.
 */
void fs_inval_caught_up(struct fs *fs, long ms, bool echo)
{
	struct timespec dl;
	uint64_t asked, head;
	bool inval = fs->cache_s > 0;

	if (!fs->threads)
		return;
	head = store_events_end(fs->store);
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_nsec += ms * 1000000L;
	dl.tv_sec += dl.tv_nsec / 1000000000L;
	dl.tv_nsec %= 1000000000L;
	pthread_mutex_lock(&fs->watch_lock);
	asked = fs->inval_asked;
	pthread_cond_signal(&fs->inval_cond);
	if (echo)
		pthread_cond_signal(&fs->echo_cond);
	while (!fs->stopping &&
	       ((inval && !fs->inval_quit &&
		 (fs->inval_seq < head || fs->inval_done < asked)) ||
		(echo && fs->echo_seq < head)))
		if (pthread_cond_timedwait(&fs->inval_progress, &fs->watch_lock,
					   &dl) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&fs->watch_lock);
}

void fs_inval_sync(struct fs *fs)
{
	if (fs->cache_s > 0)
		fs_inval_caught_up(fs, INVAL_WAIT_MS, false);
}

/* The inval thread -------------------------------------------------------- */

/*
 * Drop child name @child of parent @parent of tenant @tenant (names as
 * the event gave them), and the parent's attributes, when the parent is
 * live: a parent that is gone took its names with it (its own name was
 * dropped by the event that removed it; what the kernel still holds below
 * it is reached only through old handles, which get ESTALE).
 */
static void inval_child_name(struct fs *fs, const char *tenant,
			     const char *parent, const char *child)
{
	struct store_node *t = NULL, *p = NULL;

	if (*tenant && *parent && *child &&
	    store_lookup(fs->store, store_root(fs->store), tenant, &t) == 0 &&
	    store_lookup(fs->store, t, parent, &p) == 0) {
		inval_name(fs, store_node_ino(p), child);
		fs_inval_attr(fs, store_node_ino(p));
	}
	if (p)
		store_node_unref(fs->store, p);
	if (t)
		store_node_unref(fs->store, t);
}

/*
 * Another mount's change on a shared store (an internal line of an
 * operation the store never makes by itself): the kernel here has not
 * seen it, so drop what it changed, as its own request would have: the
 * name of what left or was removed, a rename's or exchange's two names,
 * and the attributes of the state (its nlink when a link came or went).
 * A new name needs nothing (no negative entries are cached); a
 * publication's attributes come from the store's attribute hook.
 */
static void inval_remote(struct fs *fs, const struct store_event *ev)
{
	switch (ev->op) {
	case STORE_OP_LEAVE:
		inval_name(fs, ev->tenant_ino, ev->parent);
		fs_inval_attr(fs, ev->tenant_ino);
		break;
	case STORE_OP_UNLINK:
		inval_child_name(fs, ev->tenant, ev->parent, ev->child);
		break;
	case STORE_OP_RENAME:
	case STORE_OP_EXCHANGE:
		inval_child_name(fs, ev->tenant, ev->from_parent,
				 ev->from_child);
		inval_child_name(fs, ev->tenant, ev->parent, ev->child);
		break;
	case STORE_OP_LINK:
		break;
	default:
		return;
	}
	if (ev->ino)
		fs_inval_attr(fs, ev->ino);
}

/*
 * An internal removal no deadline announced (a .depart, a drain's
 * clear): drop the name and the attributes of what went and of the
 * directory it went from.  On a shared store, another mount's change
 * (inval_remote).
 */
static void inval_event(struct fs *fs, const struct store_event *ev)
{
	if (!ev->internal)
		return;
	if (ev->op != STORE_OP_DEPART && ev->op != STORE_OP_DRAIN &&
	    ev->op != STORE_OP_CLEANUP) {
		inval_remote(fs, ev);
		return;
	}
	if (ev->kind == STORE_TENANT) {
		inval_name(fs, STORE_ROOT_INO, ev->tenant);
		fs_inval_attr(fs, STORE_ROOT_INO);
	} else if (ev->kind == STORE_PARENT) {
		inval_name(fs, ev->tenant_ino, ev->parent);
		fs_inval_attr(fs, ev->tenant_ino);
	}
	if (ev->ino)
		fs_inval_attr(fs, ev->ino);
}

/*
 * Lost track of the log (it overflowed, or a line could not be kept):
 * drop every tenant's and every parent's name; the next walk asks the
 * store again.  0, or -ENOMEM when a listing could not be made (what it
 * could list is dropped all the same; the caller tries again later).
 */
static int inval_everything(struct fs *fs, bool remember)
{
	struct store_dirlist tl = { 0 }, pl;
	int rc = 0;

	if (store_list(fs->store, store_root(fs->store), &tl) != 0)
		return -ENOMEM;
	for (size_t i = 0; i < tl.n; i++) {
		struct store_node *t = NULL;
		int lrc;

		inval_send(fs, STORE_ROOT_INO, 0, tl.e[i].name, remember);
		if (store_lookup(fs->store, store_root(fs->store), tl.e[i].name,
				 &t) != 0)
			continue; /* gone since the listing */
		memset(&pl, 0, sizeof(pl));
		lrc = store_list(fs->store, t, &pl);
		if (lrc == 0) {
			for (size_t k = 0; k < pl.n; k++)
				inval_send(fs, store_node_ino(t), 0,
					   pl.e[k].name, remember);
			store_dirlist_free(&pl);
		} else if (lrc == -ENOMEM) {
			rc = -ENOMEM;
		}
		store_node_unref(fs->store, t);
	}
	store_dirlist_free(&tl);
	return rc;
}

/* Is the inval thread to end (watch_lock held)? */
static bool inval_ending(struct fs *fs)
{
	return fs->stopping || fs->inval_quit;
}

/*
 * The inval thread's part of "Replies in flight": take the invalidations
 * remembered so far, start a new epoch, wait until every reply counted in
 * the old one has been written, and send them again.
 */
static void resend_after_grace(struct fs *fs)
{
	struct fs_inval *q;
	bool all;
	unsigned old;
	bool stopping;

	/* Let copies gather for a moment: one grace period serves them all
	 * (under a steady load of publications, a wake-up and a wait per
	 * close would otherwise fall on the CPUs the callers need). */
	pthread_mutex_lock(&fs->watch_lock);
	if (!inval_ending(fs) && !fs->inval_queue) {
		struct timespec ts = fs_deadline_in(RESEND_GATHER_MS);

		pthread_cond_timedwait(&fs->inval_cond, &fs->watch_lock, &ts);
	}
	pthread_mutex_unlock(&fs->watch_lock);
	q = atomic_exchange(&fs->resend, NULL);
	all = atomic_exchange(&fs->resend_all, false);
	old = (unsigned)(atomic_fetch_add(&fs->reply_epoch, 1) & 1);

	pthread_mutex_lock(&fs->watch_lock);
	atomic_store(&fs->grace_waiter, (int)old + 1);
	while (!inval_ending(fs) && atomic_load(&fs->replies[old].n) != 0) {
		/* Woken by the last of them (fs_reply_end); the timeout
		 * is only a safety net. */
		struct timespec ts = fs_deadline_in(GRACE_POLL_MS);

		pthread_cond_timedwait(&fs->inval_cond, &fs->watch_lock, &ts);
	}
	atomic_store(&fs->grace_waiter, 0);
	stopping = inval_ending(fs);
	pthread_mutex_unlock(&fs->watch_lock);
	while (q) {
		struct fs_inval *next = q->next;

		/* No reply in flight now is older than the change: nothing
		 * to remember again. */
		if (!stopping)
			inval_send(fs, q->dir_ino, q->ino, q->name, false);
		free(q);
		q = next;
	}
	if (all && !stopping)
		(void)inval_everything(fs, false);
}

/*
 * Out of memory (store_events_next cannot copy an event's names, or
 * inval_everything cannot list): the thread does not spin on it.  It
 * leaves the event where it is, waits BACKOFF_MIN_MS and then twice as
 * long each time it fails again (at most BACKOFF_MAX_MS), serving the
 * queue meanwhile, and tries again.  Nothing is skipped: if the log moves
 * on past the event in the meantime, the overflow that follows drops
 * every name (inval_everything), as does a line the store could not keep
 * (-ENODATA).  Until a failed inval_everything has been done, the thread
 * says it has passed nothing more, so no .events reader is handed a line
 * whose caches may still be held.
 */
void *fs_inval_main(void *arg)
{
	struct fs *fs = arg;
	/* Opened where the handlers were told it stands (inval_seq).  It
	 * reads internal lines only, and the others never make it fall
	 * behind: it sleeps until there is work, however far the log moves
	 * on meanwhile. */
	struct store_event_reader *r = fs->inval_reader;
	struct timespec retry = { 0 };
	unsigned backoff = 0;   /* ms; 0: memory is fine */
	bool lost = false;      /* an inval_everything is owed */

	pthread_setname_np(pthread_self(), "statefs-inval");
	pthread_mutex_lock(&fs->watch_lock);
	for (;;) {
		struct fs_inval *q;
		struct store_event ev;
		uint64_t asked;
		unsigned batch = 0;
		bool events;
		int rc = 0;

		/*
		 * Kicked by the hook after an internal transition, or after
		 * any while .events is open; by a queued request, a resend, a
		 * handler waiting for it (fs_inval_caught_up) and the stop.  Each
		 * sets what this checks under watch_lock, so no wake-up is
		 * missed and no timeout is needed.  Looking moves the reader
		 * past lines it does not act on: progress to report too.
		 */
		for (;;) {
			events = backoff ? fs_deadline_passed(&retry) :
				 store_events_pending(fs->store, r);
			if (inval_ending(fs) || fs->inval_queue || events ||
			    (!backoff && !lost &&
			     store_events_position(r) != fs->inval_seq) ||
			    atomic_load(&fs->resend) ||
			    atomic_load(&fs->resend_all))
				break;
			if (backoff)
				pthread_cond_timedwait(&fs->inval_cond,
						       &fs->watch_lock, &retry);
			else
				pthread_cond_wait(&fs->inval_cond,
						  &fs->watch_lock);
		}
		if (inval_ending(fs))
			break;
		q = fs->inval_queue;
		fs->inval_queue = NULL;
		asked = fs->inval_asked;
		pthread_mutex_unlock(&fs->watch_lock);
		while (q) {
			struct fs_inval *next = q->next;

			if (q->dir_ino)
				inval_name(fs, q->dir_ino, q->name);
			else
				fs_inval_attr(fs, q->ino);
			free(q);
			q = next;
		}
		while (events && batch++ < INVAL_BATCH &&
		       (rc = store_events_next(fs->store, r, &ev)) != 0) {
			if (rc == -ENOMEM)
				break;
			if (rc == 1) {
				inval_event(fs, &ev);
				store_event_free(&ev);
			} else {
				lost = true; /* -EOVERFLOW, -ENODATA */
			}
		}
		if (events && lost && rc != -ENOMEM) {
			lost = inval_everything(fs, true) != 0;
			if (lost)
				rc = -ENOMEM;
		}
		if (rc == -ENOMEM) {
			backoff = fs_backoff_next(backoff);
			retry = fs_deadline_in(backoff);
		} else if (events) {
			backoff = 0;
		}
		/* What was sent while replies were in flight is sent again
		 * once they are written, before anyone is told it was sent. */
		if (atomic_load(&fs->resend) || atomic_load(&fs->resend_all))
			resend_after_grace(fs);
		pthread_mutex_lock(&fs->watch_lock);
		fs->inval_done = asked;
		if (!lost)
			fs->inval_seq = store_events_position(r);
		/* The events thread may now hand out what this passed. */
		fs->kicked = true;
		pthread_cond_signal(&fs->watch_cond);
		pthread_cond_broadcast(&fs->inval_progress);
	}
	while (fs->inval_queue) {
		struct fs_inval *next = fs->inval_queue->next;

		free(fs->inval_queue);
		fs->inval_queue = next;
	}
	for (struct fs_inval *q = atomic_exchange(&fs->resend, NULL), *next;
	     q; q = next) {
		next = q->next;
		free(q);
	}
	pthread_cond_broadcast(&fs->inval_progress);
	pthread_mutex_unlock(&fs->watch_lock);
	return NULL;
}

void fs_inval_join(struct fs *fs)
{
	/* It may wait for a kernel lock whose holder waits for a reply:
	 * the unmount ends that wait.  It must be gone before the session
	 * it notifies through. */
	if (fs->inval_started)
		pthread_join(fs->inval_thread, NULL);
	fs->inval_started = false;
	store_events_close(fs->inval_reader);
	fs->inval_reader = NULL;
	/* What was remembered after it stopped will not be sent. */
	for (struct fs_inval *q = atomic_exchange(&fs->resend, NULL), *next;
	     q; q = next) {
		next = q->next;
		free(q);
	}
}
