/*
 * events.c - .events: the open files that stream the event log, and the
 * events thread that answers the reads they park.
 *
 * Each open .events holds a store reader (store_events_open) with its
 * opener's eyes: it sees only the lines of tenants the opener may list,
 * each judged as the tenant was when the line was appended.  A read with
 * nothing pending is parked (no worker thread waits for it); the store's
 * event hook kicks the events thread after each transition, and it
 * replies from there.  An interrupted read is answered EINTR.  A line is
 * handed out only once the inval thread has passed it (the reader is
 * gated at inval_seq), so whoever learns of a change from the stream
 * finds the kernel's caches already dropped.
 *
 * The file is seekable for one purpose: the offset of its first read
 * (lseek(fd, N, SEEK_SET) before it; dd's skip=N iflag=skip_bytes) is the
 * sequence number its reader starts at (store_events_start): its first
 * line is the first numbered N or more, after one "overflow" line when
 * the log no longer holds N; a number not reached yet waits.  When the
 * store's own log does not hold N but its engine may (a shared store's
 * log in Redis), the first read asks it, with no lock held; meanwhile the file is starting: no other read or poll takes
 * from its reader, and the events thread passes it by.  Offset 0
 * (no seek) is the present, as the open left it.  The kernel keeps the
 * offset and moves it by the bytes read, so a later read's offset is no
 * number: a seek back into the last reply's bytes (bash's read takes a
 * chunk and seeks back past the line it used) gets those bytes again;
 * any other seek after the first read changes nothing.
 *
 * A tenant's .events whose tenant went with its store instance (a shared
 * store that lost its data) is a handle of the old instance: once its
 * reader has read every line before the end, each read (a parked one
 * too: it is woken) fails with ESTALE, and poll reports it readable, so
 * no reader waits for ever on a tenant that cannot come back.
 *
 * An open .events has operations of its own (events_ops: read, poll,
 * release; fs/file.c calls them), set by fs_events_open, which
 * fs/special.c calls when a .events is opened.
 *
 * Locks: fs->watch_lock guards the open .events files (fs->watchers),
 * each one's reader, parked read, poll handle, unread rest and starting
 * flag; the store reader is called under it, but for its start
 * (store_events_start), which may wait on the network and is called
 * with no lock held.  Replies and poll notifications go out with
 * no lock held.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs.h"

#define EVENTS_CHUNK 65536

static const struct fs_file_ops events_ops;

int fs_events_open(struct fs *fs, struct store_node *dir,
		   const struct store_cred *cred, struct fs_file *f)
{
	bool tenant = store_node_kind(dir) == STORE_TENANT;
	int rc;

	f->ops = &events_ops;
	pthread_mutex_lock(&fs->watch_lock);
	/* Each line is judged by the tenant's owner and mode when it was
	 * appended, so a tenant closed after the open stops showing. */
	rc = store_events_open(fs->store, tenant ? dir : NULL, cred, 0,
			       &f->reader);
	if (rc) {
		pthread_mutex_unlock(&fs->watch_lock);
		return rc;
	}
	f->wnext = fs->watchers;
	f->wprev = NULL;
	if (fs->watchers)
		fs->watchers->wprev = f;
	fs->watchers = f;
	atomic_fetch_add(&fs->nwatchers, 1);
	pthread_mutex_unlock(&fs->watch_lock);
	return 0;
}

/* Has @f something to read (watch_lock held)?  Only what the inval
 * thread has passed: see the file comment. */
static bool events_ready(struct fs *fs, struct fs_file *f)
{
	if (f->starting)
		return false;
	store_events_gate(f->reader, fs->cache_s > 0 ? fs->inval_seq : 0);
	return f->len > 0 || store_events_pending(fs->store, f->reader);
}

/*
 * Move up to @size bytes @f may read now into a new buffer (watch_lock
 * held).  Lines come from the store whole; what a small read (bash's
 * `read` takes one byte at a time) leaves of them waits in f->text.
 * Returns the bytes, or -ESTALE when the reader's tenant is gone.
 */
static ssize_t events_take(struct fs *fs, struct fs_file *f, size_t size,
			   char **out)
{
	ssize_t got;
	size_t n;

	*out = NULL;
	if (f->len == 0 && events_ready(fs, f)) {
		if (!f->text)
			f->text = malloc(EVENTS_CHUNK);
		if (f->text) {
			got = store_events_read(fs->store, f->reader,
						f->text, EVENTS_CHUNK);
			if (got < 0)
				return got; /* -ESTALE: its tenant is gone */
			f->len = (size_t)got;
		}
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
	/* Kept, so that a read seeking back into it gets it again. */
	free(f->last);
	f->last = malloc(n);
	f->last_len = f->last ? n : 0;
	if (f->last)
		memcpy(f->last, *out, n);
	f->last_off = f->pos;
	f->pos += n;
	return (ssize_t)n;
}

/*
 * Start @f's reader at number @seq (its first read; no lock held): the
 * store may ask its engine (a shared store's log in Redis), so it is
 * called with no lock held, the file marked starting meanwhile, so that
 * no other read or poll takes from its reader.
 */
static void events_start(struct fs *fs, struct fs_file *f, uint64_t seq)
{
	pthread_mutex_lock(&fs->watch_lock);
	f->starting = true;
	pthread_mutex_unlock(&fs->watch_lock);
	store_events_start(fs->store, f->reader, store_node_tenant(f->node),
			   seq);
	pthread_mutex_lock(&fs->watch_lock);
	f->starting = false;
	/* What came to the log meanwhile is there to answer. */
	fs->kicked = true;
	pthread_cond_signal(&fs->watch_cond);
	pthread_mutex_unlock(&fs->watch_lock);
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

static void events_read(fuse_req_t req, struct fs *fs, struct fs_file *f,
			size_t size, off_t off, struct fuse_file_info *fi)
{
	bool nonblock = (fi->flags & O_NONBLOCK) != 0;
	bool start;
	char *buf;
	ssize_t n;

	/* The first read's offset is the number to start at (0: the
	 * present); the kernel moves the offset by the bytes read, so a
	 * later one means nothing and is ignored. */
	pthread_mutex_lock(&fs->watch_lock);
	start = !f->read_once && off > 0;
	if (!f->read_once)
		f->pos = (uint64_t)off;
	f->read_once = true;
	/* A seek back into the last reply (bash's read takes a chunk and
	 * seeks back past the line it used; head seeks back past what it
	 * did not print): those bytes come again. */
	if ((uint64_t)off < f->pos && (uint64_t)off >= f->last_off &&
	    f->last && f->text &&
	    f->len + (size_t)(f->pos - (uint64_t)off) <= EVENTS_CHUNK) {
		size_t back = (size_t)(f->pos - (uint64_t)off);

		memmove(f->text + back, f->text, f->len);
		memcpy(f->text, f->last + f->last_len - back, back);
		f->len += back;
		f->pos = (uint64_t)off;
		f->last_len -= back;
	} else if ((uint64_t)off != f->pos) {
		/* Any other seek: the stream goes on; the offset is the
		 * kernel's from here. */
		f->pos = f->last_off = (uint64_t)off;
		f->last_len = 0;
	}
	pthread_mutex_unlock(&fs->watch_lock);
	/* A line this reader may see has passed the inval thread before the
	 * caller's last transition returned: wait for it (bounded).  A
	 * reader started in the past waits too: with no .events open, the
	 * inval thread is not woken by every transition. */
	if (nonblock || start)
		fs_inval_sync(fs);
	if (start)
		events_start(fs, f, (uint64_t)off);
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
	if (n > 0)
		fuse_reply_buf(req, buf, (size_t)n);
	else
		fuse_reply_err(req, n < 0 ? (int)-n : nonblock ? EAGAIN : EBUSY);
	free(buf);
}

static void events_poll(fuse_req_t req, struct fs *fs, struct fs_file *f,
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

/* Before the open file is freed (which closes its reader). */
static void events_release(struct fs *fs, struct fs_file *f)
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

/* An open .events: a write is EBADF, flush and fsync have nothing to do
 * (fs/file.c). */
static const struct fs_file_ops events_ops = {
	.read = events_read,
	.poll = events_poll,
	.release = events_release,
};

/* One reply or poll notification the events thread owes. */
struct owed {
	fuse_req_t req;
	char *buf;
	ssize_t len;           /* < 0: an error to answer */
	struct fuse_pollhandle *ph;
};

void *fs_events_main(void *arg)
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
				if (o.len != 0) {
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
			if (owed[i].req && owed[i].len < 0)
				fuse_reply_err(owed[i].req, (int)-owed[i].len);
			else if (owed[i].req)
				fuse_reply_buf(owed[i].req, owed[i].buf,
					       (size_t)owed[i].len);
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
