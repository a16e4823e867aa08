/*
 * watch.c - what statefs does when nobody calls in.
 *
 * Four threads, none of them a request handler, none holding a store
 * lock when they call into the kernel:
 *
 *  - the reaper sleeps until the store's next deadline (at most
 *    REAP_TICK_MS) and runs store_expire() in bounded passes, so leases
 *    end on time with nobody touching the mount.  Under -o testclock the
 *    clock only moves through .clock, which runs the expiries itself.
 *
 *  - the events thread answers parked .events reads and polls.  A read
 *    with nothing pending is parked (no worker thread waits for it); the
 *    store's event hook kicks this thread after each transition, and it
 *    replies from here.  An interrupted read is answered EINTR.
 *
 *  - the echo thread follows the store's event log and, for each removal
 *    the store made by itself (an expiry, a .depart), removes the same
 *    name through the mount.  The kernel then raises the inotify events a
 *    watcher of the directory expects (FUSE notifications raise none in
 *    the parent directory on this kernel) and drops its cached entry.
 *    The echo's requests are recognised by the thread id and answered
 *    from the echo record without touching the store, so an echo can never
 *    remove anything from the store.  Nor from the kernel's view, unless
 *    it is the incarnation that went: an echo removes a name only while
 *    the kernel holds that inode number under it and no live node owns
 *    the name (judged under the kernel's lock of the directory, which
 *    every new incarnation of a name is made under).  So a watcher sees
 *    the old node's DELETE before a new one's CREATE, or, when a rejoin
 *    or re-create got there first, no DELETE for the old one at all;
 *    never a DELETE after the new CREATE.
 *
 *  - the inval thread keeps the kernel's caches honest.  The kernel may
 *    keep names and attributes for -o cache_timeout, never past a lease
 *    (fs_cache_timeout), so an expiry needs no help; what the store
 *    changes otherwise behind the kernel's back (a .depart, a drain's
 *    clear, a lease given to a node the kernel already holds) is dropped
 *    from the kernel's caches here.  It follows the event log (.depart
 *    and drain lines) and a queue filled by handlers, and .events lines
 *    are handed out only once it has passed them, so whoever learns of
 *    a change from the stream finds the caches already dropped.
 *    Handlers that make such a change wait for it (fs_inval_sync), with
 *    a bound: they hold a kernel lock that it may need in turn.
 *
 * The echo and inval threads read the log's internal lines only
 * (internal_only readers): the others never make them fall behind, so
 * they sleep until there is work (no timeout: every wake-up they wait for
 * is signalled under watch_lock after what it announces), and the inval
 * thread drops every name (inval_everything) only when an internal line
 * left the log before it read it.
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
 * Lock order: watch_lock, echo_lock and an open file's text_lock (fs.h)
 * are never held across a reply or a call into the store that may wait
 * long, and never taken under a store lock (the store calls fs/ only
 * through its hooks, with no lock held).  echo_lock and text_lock are
 * leaves; watch_lock is not: the .events readers and the inval thread
 * read the event log under it (store_events_*), so it comes before the
 * log's own mutex, under which the store takes nothing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "fs/fs.h"

#define FUSE_SUPER_MAGIC 0x65735546
#define REAP_TICK_MS 250
#define REAP_BUDGET 512
#define EVENTS_CHUNK 65536
#define INVAL_WAIT_MS 200
/* Events the inval thread handles before it says how far it got: an
 * .events reader's end (fs_events_read) then moves in steps well inside
 * its window, so a lagging inval thread that catches up never pushes a
 * reader out of its window by itself. */
#define INVAL_BATCH 256
/* Out of memory in the inval or echo thread: wait this long before
 * trying again, doubling each time it fails again. */
#define BACKOFF_MIN_MS 1
#define BACKOFF_MAX_MS 250
/* How often the inval thread looks at the replies it waits for, should a
 * wake-up from fs_reply_end be missed. */
#define GRACE_POLL_MS 10
#define RESEND_GATHER_MS 1
#define QUIESCE_MS 5000
/* The kernel rounds a timeout up to its tick and starts it when the
 * reply arrives: stop caching a little before a deadline. */
#define CACHE_MARGIN_MS 20

void fs_watch_init(struct fs *fs)
{
	pthread_condattr_t ca;

	pthread_mutex_init(&fs->watch_lock, NULL);
	pthread_mutex_init(&fs->echo_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&fs->watch_cond, &ca);
	pthread_cond_init(&fs->reap_cond, &ca);
	pthread_cond_init(&fs->echo_cond, &ca);
	pthread_cond_init(&fs->inval_cond, &ca);
	pthread_cond_init(&fs->inval_progress, &ca);
	pthread_condattr_destroy(&ca);
}

uint64_t fs_manual_clock(void *arg)
{
	return atomic_load(&((struct fs *)arg)->clock_ms);
}

/* CLOCK_MONOTONIC @ms from now (the clock of every condition here). */
static struct timespec deadline_in(unsigned ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

static bool deadline_passed(const struct timespec *dl)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > dl->tv_sec ||
	       (now.tv_sec == dl->tv_sec && now.tv_nsec >= dl->tv_nsec);
}

/* The wait after one more failure to allocate, after waiting @ms. */
static unsigned backoff_next(unsigned ms)
{
	if (!ms)
		return BACKOFF_MIN_MS;
	return ms * 2 < BACKOFF_MAX_MS ? ms * 2 : BACKOFF_MAX_MS;
}

void fs_watch_hook(void *arg, bool internal)
{
	struct fs *fs = arg;

	/* Cheap when nobody watches: a transition pays one atomic load. */
	if (!internal && atomic_load(&fs->nwatchers) == 0)
		return;
	pthread_mutex_lock(&fs->watch_lock);
	fs->kicked = true;
	pthread_cond_signal(&fs->watch_cond);
	pthread_cond_signal(&fs->inval_cond);
	if (internal)
		pthread_cond_signal(&fs->echo_cond);
	pthread_mutex_unlock(&fs->watch_lock);
}

/* Reaper ---------------------------------------------------------------- */

static void reap_all(struct fs *fs)
{
	while (store_expire(fs->store, REAP_BUDGET) == REAP_BUDGET)
		;
}

int fs_clock_advance(struct fs *fs, uint64_t ms)
{
	uint_fast64_t now = atomic_load(&fs->clock_ms);

	/* A shared store's clock is the store's: every mount's moves. */
	if (store_is_shared(fs->store))
		return store_clock_advance(fs->store, ms);
	/* Bounded, so now + any duration stays a valid deadline (store.h);
	 * writers racing each other each see the clock they move. */
	do {
		if (ms > STORE_DURATION_MAX_MS || now > STORE_CLOCK_MAX_MS - ms)
			return -EINVAL;
	} while (!atomic_compare_exchange_weak(&fs->clock_ms, &now, now + ms));
	reap_all(fs);
	return 0;
}

static void *reaper_main(void *arg)
{
	struct fs *fs = arg;

	pthread_setname_np(pthread_self(), "statefs-reaper");
	pthread_mutex_lock(&fs->watch_lock);
	while (!fs->stopping) {
		struct timespec ts;
		uint64_t now, next, wait_ms = REAP_TICK_MS;

		pthread_mutex_unlock(&fs->watch_lock);
		if (!fs->testclock) {
			reap_all(fs);
			now = store_now_ms(fs->store);
			next = store_next_deadline(fs->store);
			if (next > now && next - now < wait_ms)
				wait_ms = next - now;
		}
		pthread_mutex_lock(&fs->watch_lock);
		if (fs->stopping)
			break;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += (time_t)(wait_ms / 1000);
		ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&fs->reap_cond, &fs->watch_lock, &ts);
	}
	pthread_mutex_unlock(&fs->watch_lock);
	return NULL;
}

/* .events ----------------------------------------------------------------- */

void fs_events_open(struct fs *fs, struct store_node *dir, struct fs_file *f)
{
	bool tenant = store_node_kind(dir) == STORE_TENANT;

	f->kind = FS_EVENTS;
	pthread_mutex_lock(&fs->watch_lock);
	store_events_open(fs->store, tenant ? dir : NULL, &f->reader);
	/* Each line is judged by the tenant's owner and mode when it was
	 * appended, so a tenant closed after the open stops showing; root
	 * sees every line: no filter to run. */
	if (f->cred.c.uid != 0)
		f->reader.cred = &f->cred.c;
	f->wnext = fs->watchers;
	f->wprev = NULL;
	if (fs->watchers)
		fs->watchers->wprev = f;
	fs->watchers = f;
	atomic_fetch_add(&fs->nwatchers, 1);
	pthread_mutex_unlock(&fs->watch_lock);
}

/* Has @f something to read (watch_lock held)?  Only what the inval
 * thread has passed: see the file comment. */
static bool events_ready(struct fs *fs, struct fs_file *f)
{
	f->reader.until = fs->cache_s > 0 ? fs->inval_seq : 0;
	return f->len > 0 || store_events_pending(fs->store, &f->reader);
}

/*
 * Move up to @size bytes @f may read now into a new buffer (watch_lock
 * held).  Lines come from the store whole; what a small read (bash's
 * `read` takes one byte at a time) leaves of them waits in f->text.
 */
static size_t events_take(struct fs *fs, struct fs_file *f, size_t size,
			  char **out)
{
	size_t n;

	*out = NULL;
	if (f->len == 0 && events_ready(fs, f)) {
		if (!f->text)
			f->text = malloc(EVENTS_CHUNK);
		if (f->text)
			f->len = store_events_read(fs->store, &f->reader,
						   f->text, EVENTS_CHUNK);
	}
	if (f->len == 0 || size == 0)
		return 0;
	n = f->len < size ? f->len : size;
	*out = malloc(n);
	if (!*out)
		return 0;
	memcpy(*out, f->text, n);
	memmove(f->text, f->text + n, f->len - n);
	f->len -= n;
	return n;
}

/* A parked read was interrupted (the reader got a signal). */
static void events_interrupted(fuse_req_t req, void *data)
{
	struct fs_file *f = data;
	struct fs *fs = fuse_req_userdata(req);
	bool mine = false;

	pthread_mutex_lock(&fs->watch_lock);
	if (f->waiting == req) {
		f->waiting = NULL;
		mine = true;
	} else {
		f->interrupted = req; /* not parked yet: it will not be */
	}
	pthread_mutex_unlock(&fs->watch_lock);
	if (mine)
		fuse_reply_err(req, EINTR);
}

void fs_events_read(fuse_req_t req, struct fs *fs, struct fs_file *f,
		    size_t size, bool nonblock)
{
	char *buf;
	size_t n;

	/* A line this reader may see has passed the inval thread before the
	 * caller's last transition returned: wait for it (bounded). */
	if (nonblock)
		fs_inval_sync(fs);
	pthread_mutex_lock(&fs->watch_lock);
	n = events_take(fs, f, size, &buf);
	if (n == 0 && !nonblock && !f->waiting) {
		pthread_mutex_unlock(&fs->watch_lock);
		/* Before it is parked: once parked, the events thread may
		 * answer (and free) it at any moment. */
		fuse_req_interrupt_func(req, events_interrupted, f);
		if (fuse_req_interrupted(req)) {
			fuse_reply_err(req, EINTR);
			return;
		}
		pthread_mutex_lock(&fs->watch_lock);
		n = events_take(fs, f, size, &buf);
		if (n == 0 && f->interrupted == req) {
			f->interrupted = NULL;
			pthread_mutex_unlock(&fs->watch_lock);
			fuse_reply_err(req, EINTR);
			return;
		}
		if (n == 0 && !f->waiting) {
			/* Park it: the events thread replies when a line
			 * comes. */
			f->waiting = req;
			f->want = size;
			pthread_mutex_unlock(&fs->watch_lock);
			return;
		}
	}
	pthread_mutex_unlock(&fs->watch_lock);
	if (n)
		fuse_reply_buf(req, buf, n);
	else
		fuse_reply_err(req, nonblock ? EAGAIN : EBUSY);
	free(buf);
}

void fs_events_poll(fuse_req_t req, struct fs *fs, struct fs_file *f,
		    struct fuse_pollhandle *ph)
{
	struct fuse_pollhandle *drop = ph;
	unsigned revents = 0;

	pthread_mutex_lock(&fs->watch_lock);
	if (events_ready(fs, f)) {
		revents = POLLIN | POLLRDNORM;
	} else if (ph) {
		/* Keep the newest handle: notified when a line comes. */
		drop = f->ph;
		f->ph = ph;
	}
	pthread_mutex_unlock(&fs->watch_lock);
	if (drop)
		fuse_pollhandle_destroy(drop);
	fuse_reply_poll(req, revents);
}

void fs_events_release(struct fs *fs, struct fs_file *f)
{
	struct fuse_pollhandle *ph;

	pthread_mutex_lock(&fs->watch_lock);
	if (f->wprev)
		f->wprev->wnext = f->wnext;
	else
		fs->watchers = f->wnext;
	if (f->wnext)
		f->wnext->wprev = f->wprev;
	ph = f->ph;
	f->ph = NULL;
	atomic_fetch_sub(&fs->nwatchers, 1);
	pthread_mutex_unlock(&fs->watch_lock);
	if (ph)
		fuse_pollhandle_destroy(ph);
}

/* One reply or poll notification the events thread owes. */
struct owed {
	fuse_req_t req;
	char *buf;
	size_t len;
	struct fuse_pollhandle *ph;
};

static void *events_main(void *arg)
{
	struct fs *fs = arg;
	struct owed *owed = NULL;
	size_t cap = 0;

	pthread_setname_np(pthread_self(), "statefs-events");
	pthread_mutex_lock(&fs->watch_lock);
	for (;;) {
		size_t n = 0;

		while (!fs->kicked && !fs->stopping)
			pthread_cond_wait(&fs->watch_cond, &fs->watch_lock);
		if (fs->stopping)
			break;
		fs->kicked = false;
		for (struct fs_file *f = fs->watchers; f; f = f->wnext) {
			struct owed o = { 0 };

			if (f->waiting) {
				o.len = events_take(fs, f, f->want, &o.buf);
				if (o.len) {
					o.req = f->waiting;
					f->waiting = NULL;
				}
			}
			if (f->ph && events_ready(fs, f)) {
				o.ph = f->ph;
				f->ph = NULL;
			}
			if (!o.req && !o.ph)
				continue;
			if (n == cap) {
				size_t ncap = cap ? cap * 2 : 16;
				struct owed *no = realloc(owed, ncap * sizeof(*no));

				if (!no) {
					free(o.buf);
					continue;
				}
				owed = no;
				cap = ncap;
			}
			owed[n++] = o;
		}
		/* Reply with no lock held. */
		pthread_mutex_unlock(&fs->watch_lock);
		for (size_t i = 0; i < n; i++) {
			if (owed[i].req)
				fuse_reply_buf(owed[i].req, owed[i].buf, owed[i].len);
			free(owed[i].buf);
			if (owed[i].ph) {
				fuse_lowlevel_notify_poll(owed[i].ph);
				fuse_pollhandle_destroy(owed[i].ph);
			}
		}
		pthread_mutex_lock(&fs->watch_lock);
	}
	/* Unmounting: answer what is still parked. */
	for (struct fs_file *f = fs->watchers; f; f = f->wnext) {
		if (f->waiting) {
			fuse_reply_err(f->waiting, EINTR);
			f->waiting = NULL;
		}
	}
	pthread_mutex_unlock(&fs->watch_lock);
	free(owed);
	return NULL;
}

/* Kernel cache invalidation ------------------------------------------------- */

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

/* Replies in flight (see the file comment) ---------------------------------- */

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
static void attrs_changed(void *arg, const uint64_t *ino, size_t n)
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

/*
 * Wait at most @ms until the inval thread (when caching is on) and, with
 * @echo, the echo thread have handled every event logged so far and
 * every invalidation queued so far.
 */
static void wait_caught_up(struct fs *fs, long ms, bool echo)
{
	struct store_event_reader head;
	struct timespec dl;
	uint64_t asked;
	bool inval = fs->cache_s > 0;

	if (!fs->threads)
		return;
	store_events_open(fs->store, NULL, &head);
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
		 (fs->inval_seq < head.next || fs->inval_done < asked)) ||
		(echo && fs->echo_seq < head.next)))
		if (pthread_cond_timedwait(&fs->inval_progress, &fs->watch_lock,
					   &dl) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&fs->watch_lock);
}

void fs_inval_sync(struct fs *fs)
{
	if (fs->cache_s > 0)
		wait_caught_up(fs, INVAL_WAIT_MS, false);
}

/*
 * An internal removal no deadline announced (a .depart, a drain's
 * clear): drop the name and the attributes of what went and of the
 * directory it went from.
 */
static void inval_event(struct fs *fs, const struct store_event *ev)
{
	if (!ev->internal ||
	    (ev->op != STORE_OP_DEPART && ev->op != STORE_OP_DRAIN &&
	     ev->op != STORE_OP_CLEANUP))
		return;
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
		struct timespec ts = deadline_in(RESEND_GATHER_MS);

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
		struct timespec ts = deadline_in(GRACE_POLL_MS);

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
static void *inval_main(void *arg)
{
	struct fs *fs = arg;
	struct store_event_reader r;
	struct timespec retry = { 0 };
	unsigned backoff = 0;   /* ms; 0: memory is fine */
	bool lost = false;      /* an inval_everything is owed */

	pthread_setname_np(pthread_self(), "statefs-inval");
	pthread_mutex_lock(&fs->watch_lock);
	/* Where the handlers were told it stands.  It acts on internal lines
	 * only, and the others never make it fall behind: it sleeps until
	 * there is work, however far the log moves on meanwhile. */
	r = fs->watch_from;
	r.internal_only = true;
	r.window = STORE_EVENT_LOG;
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
		 * handler waiting for it (wait_caught_up) and the stop.  Each
		 * sets what this checks under watch_lock, so no wake-up is
		 * missed and no timeout is needed.  Looking moves the reader
		 * past lines it does not act on: progress to report too.
		 */
		for (;;) {
			events = backoff ? deadline_passed(&retry) :
				 store_events_pending(fs->store, &r);
			if (inval_ending(fs) || fs->inval_queue || events ||
			    (!backoff && !lost && r.next != fs->inval_seq) ||
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
		       (rc = store_events_next(fs->store, &r, &ev)) != 0) {
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
			backoff = backoff_next(backoff);
			retry = deadline_in(backoff);
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
			fs->inval_seq = r.next;
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

/* Echoes -------------------------------------------------------------------- */

static bool from_echo(fuse_req_t req, struct fs *fs)
{
	return fuse_req_ctx(req)->pid == atomic_load(&fs->echo_tid);
}

bool fs_echo_lookup(fuse_req_t req, struct fs *fs, fuse_ino_t dir,
		    const char *name)
{
	struct fuse_entry_param e = { 0 };
	bool mine;

	if (!from_echo(req, fs))
		return false;
	pthread_mutex_lock(&fs->echo_lock);
	mine = fs->echo_armed && strcmp(fs->echo_name, name) == 0 &&
	       (!fs->echo_dir_ino || fs->echo_dir_ino == dir);
	if (mine) {
		/* The node is gone from the store: the kernel gets an entry
		 * for the old inode number only so it can remove it.  It
		 * never reaches the store: any use answers ESTALE. */
		e.ino = fs->echo_ino;
		e.attr.st_mode = fs->echo_dir ? S_IFDIR | 0755 : S_IFREG | 0644;
	} else if (fs->echo_armed && dir == STORE_ROOT_INO &&
		   strcmp(fs->echo_tenant, name) == 0) {
		/* The way there: a tenant a drain removed with its parents. */
		mine = true;
		e.ino = fs->echo_tenant_ino;
		e.attr.st_mode = S_IFDIR | 0755;
	}
	if (mine) {
		e.generation = 1;
		e.attr.st_ino = e.ino;
		e.attr.st_nlink = 1;
	}
	pthread_mutex_unlock(&fs->echo_lock);
	if (mine)
		fuse_reply_entry(req, &e);
	return mine;
}

/* Does a live node own @name in kernel directory @dir now? */
static bool live_in(struct fs *fs, fuse_ino_t dir, const char *name)
{
	struct store_node *d = store_ino_get(fs->store, dir), *n = NULL;
	bool live = d && store_lookup(fs->store, d, name, &n) == 0;

	if (n)
		store_node_unref(fs->store, n);
	if (d)
		store_node_unref(fs->store, d);
	return live;
}

bool fs_echo_remove(fuse_req_t req, struct fs *fs, fuse_ino_t dir,
		    const char *name, bool isdir)
{
	bool mine;

	if (!from_echo(req, fs))
		return false;
	/*
	 * The kernel holds @dir locked from its lookup of the name to this
	 * reply, and every new incarnation of a name in @dir (mkdir, create,
	 * link, rename) is made under that lock: so if no live node owns
	 * the name now, the node the kernel is removing is not a live one,
	 * and a mkdir that follows comes after this removal (its CREATE
	 * after this DELETE).  Anything else of the echo thread's, or a
	 * name a live node owns, is refused: the echo never reaches the
	 * store.
	 */
	pthread_mutex_lock(&fs->echo_lock);
	mine = fs->echo_armed && fs->echo_dir == isdir &&
	       strcmp(fs->echo_name, name) == 0 &&
	       (!fs->echo_dir_ino || fs->echo_dir_ino == dir);
	pthread_mutex_unlock(&fs->echo_lock);
	if (mine && live_in(fs, dir, name))
		mine = false;
	if (mine) {
		pthread_mutex_lock(&fs->echo_lock);
		fs->echo_armed = false;
		pthread_mutex_unlock(&fs->echo_lock);
	}
	fuse_reply_err(req, mine ? 0 : ENOENT);
	return true;
}

/* Does a live node own the name @ev removed (depth @depth) now? */
static bool name_live(struct fs *fs, const struct store_event *ev, int depth)
{
	struct store_node *t = NULL, *p = NULL, *c = NULL;
	bool live;

	live = store_lookup(fs->store, store_root(fs->store), ev->tenant, &t) == 0 &&
	       (depth < 2 || store_lookup(fs->store, t, ev->parent, &p) == 0) &&
	       (depth < 3 || store_lookup(fs->store, p, ev->child, &c) == 0);
	if (c)
		store_node_unref(fs->store, c);
	if (p)
		store_node_unref(fs->store, p);
	if (t)
		store_node_unref(fs->store, t);
	return live;
}

/* Replay one internal removal through the mount. */
static void echo_one(struct fs *fs, int rootfd, const struct store_event *ev)
{
	int depth = ev->kind == STORE_TENANT ? 1 : ev->kind == STORE_PARENT ? 2 : 3;
	bool dir = depth < 3;
	const char *name = depth == 1 ? ev->tenant : depth == 2 ? ev->parent : ev->child;
	char path[3 * (NAME_MAX + 1)];
	struct statx stx;

	if (!ev->internal || ev->ino == 0 || !*name || strlen(name) > NAME_MAX)
		return;
	if (ev->op != STORE_OP_EXPIRE && ev->op != STORE_OP_DEPART &&
	    ev->op != STORE_OP_DRAIN && ev->op != STORE_OP_CLEANUP)
		return;
	if (name_live(fs, ev, depth))
		return; /* a newer incarnation owns the name: no echo */
	if (depth == 1)
		snprintf(path, sizeof(path), "%s", ev->tenant);
	else if (depth == 2)
		snprintf(path, sizeof(path), "%s/%s", ev->tenant, ev->parent);
	else
		snprintf(path, sizeof(path), "%s/%s/%s", ev->tenant, ev->parent,
			 ev->child);
	pthread_mutex_lock(&fs->echo_lock);
	snprintf(fs->echo_name, sizeof(fs->echo_name), "%s", name);
	snprintf(fs->echo_tenant, sizeof(fs->echo_tenant), "%s",
		 depth > 1 ? ev->tenant : "");
	fs->echo_tenant_ino = ev->tenant_ino;
	fs->echo_ino = ev->ino;
	fs->echo_dir_ino = depth == 1 ? STORE_ROOT_INO :
			   depth == 2 ? ev->tenant_ino : 0;
	fs->echo_dir = dir;
	fs->echo_armed = true;
	pthread_mutex_unlock(&fs->echo_lock);
	/*
	 * Only the incarnation that went is removed: the kernel may hold
	 * another under the name by now (a rejoin that raced this echo), and
	 * removing that would take a live directory from the kernel's view
	 * (it marks a removed directory dead for good) and tell watchers it
	 * went after they saw it come.  The inode the kernel holds is read
	 * without asking the daemon (AT_STATX_DONT_SYNC); a name it does not
	 * hold is looked up and answered from the echo record.  What changes
	 * between this and the removal, fs_echo_remove() judges.  Failure is
	 * fine: the directory may be gone too (a cascade).
	 */
	if (statx(rootfd, path, AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC,
		  STATX_INO, &stx) == 0 && stx.stx_ino == ev->ino)
		(void)unlinkat(rootfd, path, dir ? AT_REMOVEDIR : 0);
	pthread_mutex_lock(&fs->echo_lock);
	fs->echo_armed = false;
	pthread_mutex_unlock(&fs->echo_lock);
}

/*
 * Open the root of this mount, for one echo.  No descriptor is kept
 * between echoes: an open one would make `fusermount3 -u` fail with
 * EBUSY.  After an unmount the path names the directory underneath, so
 * the root must be a FUSE root (inode 1) on the device this thread saw
 * first.
 */
static int mount_root(struct fs *fs, dev_t *dev)
{
	struct statfs sf;
	struct stat st;
	int fd = open(fs->mountpoint, O_PATH | O_DIRECTORY | O_NOFOLLOW);

	if (fd < 0)
		return -1;
	if (fstatfs(fd, &sf) != 0 || sf.f_type != FUSE_SUPER_MAGIC ||
	    fstat(fd, &st) != 0 || st.st_ino != STORE_ROOT_INO ||
	    (*dev && st.st_dev != *dev)) {
		close(fd);
		return -1;
	}
	*dev = st.st_dev;
	return fd;
}

/* The echo thread has replayed every event before @seq. */
static void echo_passed(struct fs *fs, uint64_t seq)
{
	pthread_mutex_lock(&fs->watch_lock);
	fs->echo_seq = seq;
	pthread_cond_broadcast(&fs->inval_progress);
	pthread_mutex_unlock(&fs->watch_lock);
}

/*
 * Before the session ends on its own (a drain): let the echo and inval
 * threads finish what the log holds while workers still answer them, so
 * neither is left in the kernel waiting for a reply that will not come.
 * Bounded (QUIESCE_MS): an echo that cannot finish is left to the
 * unmount, which ends its syscall.
 *
 * The inval thread cannot be left so: it writes to the session, and an
 * entry invalidation waits in the kernel for the lock of its directory,
 * which a lookup holds until it is answered.  A lookup that comes late,
 * once the loop has ended, is never answered, and neither the unmount nor
 * the end of the session (whose device the waiting write holds open)
 * would free the thread: it could not be joined, and the daemon would
 * hang.  So it ends here, and is joined while workers still answer.
 */
void fs_watch_quiesce(struct fs *fs)
{
	wait_caught_up(fs, QUIESCE_MS, true);
	pthread_mutex_lock(&fs->watch_lock);
	fs->inval_quit = true;
	pthread_cond_broadcast(&fs->inval_cond);
	pthread_cond_broadcast(&fs->inval_progress);
	pthread_mutex_unlock(&fs->watch_lock);
	fs_inval_join(fs);
}

/*
 * Out of memory (store_events_next cannot copy an event's names), the
 * echo thread backs off as the inval thread does and tries the same event
 * again: an echo is delayed, never spun on.
 */
static void *echo_main(void *arg)
{
	struct fs *fs = arg;
	struct store_event_reader r = fs->watch_from;
	struct timespec retry = { 0 };
	unsigned backoff = 0;   /* ms; 0: memory is fine */
	dev_t dev = 0;

	pthread_setname_np(pthread_self(), "statefs-echo");
	/* Internal lines only, as the inval thread reads them. */
	r.internal_only = true;
	r.window = STORE_EVENT_LOG;
	atomic_store(&fs->echo_tid, gettid());
	for (;;) {
		struct store_event ev;
		int rc;

		/* Kicked by the hook after an internal transition, by a wait
		 * for it (wait_caught_up) and the stop: no timeout needed.
		 * Looking moves the reader past other lines: progress to
		 * report. */
		pthread_mutex_lock(&fs->watch_lock);
		for (;;) {
			bool ready = backoff ? deadline_passed(&retry) :
				     store_events_pending(fs->store, &r) ||
				     r.next != fs->echo_seq;

			if (fs->stopping || ready)
				break;
			if (backoff)
				pthread_cond_timedwait(&fs->echo_cond,
						       &fs->watch_lock, &retry);
			else
				pthread_cond_wait(&fs->echo_cond,
						  &fs->watch_lock);
		}
		if (fs->stopping) {
			pthread_mutex_unlock(&fs->watch_lock);
			break;
		}
		pthread_mutex_unlock(&fs->watch_lock);
		rc = store_events_next(fs->store, &r, &ev);
		if (rc == -ENOMEM) {
			backoff = backoff_next(backoff);
			retry = deadline_in(backoff);
			continue;
		}
		backoff = 0;
		if (rc != 1) {
			echo_passed(fs, r.next);
			continue;
		}
		if (ev.internal && ev.ino) {
			int rootfd = mount_root(fs, &dev);

			if (rootfd >= 0) {
				echo_one(fs, rootfd, &ev);
				close(rootfd);
			}
		}
		store_event_free(&ev);
		echo_passed(fs, r.next);
	}
	return NULL;
}

int fs_watch_start(struct fs *fs)
{
	struct store_event_reader head;

	fs->cache_s = (double)store_limits(fs->store)->cache_timeout_ms / 1000.0;
	store_events_open(fs->store, NULL, &head);
	fs->inval_seq = fs->echo_seq = head.next;
	fs->watch_from = head;
	store_set_event_hook(fs->store, fs_watch_hook, fs);
	store_set_attr_hook(fs->store, attrs_changed, fs);
	if (pthread_create(&fs->reaper_thread, NULL, reaper_main, fs))
		return -EAGAIN;
	if (pthread_create(&fs->events_thread, NULL, events_main, fs)) {
		pthread_mutex_lock(&fs->watch_lock);
		fs->stopping = true;
		pthread_cond_broadcast(&fs->reap_cond);
		pthread_mutex_unlock(&fs->watch_lock);
		pthread_join(fs->reaper_thread, NULL);
		return -EAGAIN;
	}
	if (pthread_create(&fs->echo_thread, NULL, echo_main, fs)) {
		fs->threads = true;
		fs_watch_stop(fs);
		fs->threads = false;
		return -EAGAIN;
	}
	if (pthread_create(&fs->inval_thread, NULL, inval_main, fs)) {
		fs->threads = true;
		fs_watch_stop(fs);
		fs_watch_join(fs);
		return -EAGAIN;
	}
	fs->inval_started = true;
	fs->threads = true;
	return 0;
}

void fs_watch_stop(struct fs *fs)
{
	pthread_mutex_lock(&fs->watch_lock);
	fs->stopping = true;
	pthread_cond_broadcast(&fs->watch_cond);
	pthread_cond_broadcast(&fs->reap_cond);
	pthread_cond_broadcast(&fs->echo_cond);
	pthread_cond_broadcast(&fs->inval_cond);
	pthread_mutex_unlock(&fs->watch_lock);
	if (!fs->threads)
		return;
	/* These answer parked reads, so they go while the session can
	 * still carry replies. */
	pthread_join(fs->reaper_thread, NULL);
	pthread_join(fs->events_thread, NULL);
}

void fs_watch_join(struct fs *fs)
{
	/* The echo thread may wait in a syscall on the mount: the caller
	 * has closed the session, which ends that syscall. */
	if (fs->threads)
		pthread_join(fs->echo_thread, NULL);
	fs_inval_join(fs);
	fs->threads = false;
}

void fs_inval_join(struct fs *fs)
{
	/* It may wait for a kernel lock whose holder waits for a reply:
	 * the unmount ends that wait.  It must be gone before the session
	 * it notifies through. */
	if (fs->inval_started)
		pthread_join(fs->inval_thread, NULL);
	fs->inval_started = false;
	/* What was remembered after it stopped will not be sent. */
	for (struct fs_inval *q = atomic_exchange(&fs->resend, NULL), *next;
	     q; q = next) {
		next = q->next;
		free(q);
	}
}
