/*
 * lock.c - the kernel's lock requests on a shared store: flock, getlk
 * and setlk (FUSE_SETLK, FUSE_SETLKW, FUSE_GETLK; flock(2) arrives as a
 * record lock with FUSE_LK_FLOCK, which libfuse makes the flock
 * handler), and what a close ends (flush: a POSIX owner's close; release:
 * the last close of an open file, which ends its flock and OFD locks).
 *
 * The store decides (store_lock, store.h): every mount of a shared store
 * excludes every other.  The embedded store keeps the kernel's own locks:
 * fs_init (fs/ops.c) clears FUSE_CAP_POSIX_LOCKS and FUSE_CAP_FLOCK_LOCKS
 * for it, so the kernel never sends these requests and locks locally,
 * as it does for any filesystem without them.
 *
 * A request that waits (F_SETLKW, flock without LOCK_NB) does not hold
 * its worker thread: the store queues it and answers it later, from its
 * own thread, through lock_done(), which replies.  Its interrupt (the
 * kernel's INTERRUPT request, sent when a signal reaches the waiting
 * process) sets the wait's cancel flag and kicks the store, which takes
 * the request out of the queue and answers -EINTR through lock_done().
 * libfuse calls the interrupt callback under the request's own lock, and
 * lock_done() unregisters it first (fuse_req_interrupt_func with NULL,
 * which takes that lock), so the callback never runs on a freed wait.
 *
 * Locks: none of its own; no store lock is held across a reply.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/file.h>

#include "fs/fs.h"

/* A request that waits: its reply is lock_done()'s. */
struct fs_lock_wait {
	fuse_req_t req;
	struct fs *fs;
	atomic_bool cancel;    /* set by the interrupt */
};

/* The kernel's word for a lock the store could not keep for want of
 * memory: ENOLCK. */
static int lock_errno(int rc)
{
	return rc == -ENOMEM ? -ENOLCK : rc;
}

static void lock_done(void *arg, int rc)
{
	struct fs_lock_wait *w = arg;

	fuse_req_interrupt_func(w->req, NULL, NULL);
	reply_err(w->req, lock_errno(rc));
	free(w);
}

static void lock_interrupted(fuse_req_t req, void *arg)
{
	struct fs_lock_wait *w = arg;

	(void)req;
	atomic_store(&w->cancel, true);
	store_lock_kick(w->fs->store);
}

/* Ask the store for @r on @ino's node, waiting when @wait; replies. */
static void lock_ask(fuse_req_t req, fuse_ino_t ino,
		     struct store_lock_req *r, bool wait)
{
	struct fs *fs = fs_of(req);
	int rc;
	struct store_node *n = node_get(req, ino, &rc);
	struct fs_lock_wait *w = NULL;

	if (!n) {
		reply_err(req, rc);
		return;
	}
	if (wait) {
		w = calloc(1, sizeof(*w));
		if (!w) {
			node_put(fs, n);
			reply_err(req, ENOLCK);
			return;
		}
		w->req = req;
		w->fs = fs;
		atomic_init(&w->cancel, false);
		r->done = lock_done;
		r->arg = w;
		r->cancel = &w->cancel;
		/* An interrupt that came already sets the flag at once. */
		fuse_req_interrupt_func(req, lock_interrupted, w);
	}
	rc = store_lock(fs->store, n, r);
	node_put(fs, n);
	if (rc == 1)
		return; /* lock_done() replies, perhaps already did */
	if (w) {
		fuse_req_interrupt_func(req, NULL, NULL);
		free(w);
	}
	reply_err(req, lock_errno(rc));
}

/* The record lock @l (l_start, l_len 0: to the end) as the store's. */
static void lock_range(const struct flock *l, struct store_lock_req *r)
{
	r->start = l->l_start < 0 ? 0 : (uint64_t)l->l_start;
	r->end = l->l_len <= 0 ? INT64_MAX :
				 r->start + (uint64_t)l->l_len - 1;
	if (r->end > INT64_MAX || r->end < r->start)
		r->end = INT64_MAX;
}

void fs_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
	      int op)
{
	struct store_lock_req r = {
		.flock = true,
		.start = 0,
		.end = INT64_MAX,
		.owner = fi->lock_owner,
		.fh = fi->fh,
		.pid = (uint32_t)fuse_req_ctx(req)->pid,
	};

	switch (op & ~LOCK_NB) {
	case LOCK_SH:
		r.type = F_RDLCK;
		break;
	case LOCK_EX:
		r.type = F_WRLCK;
		break;
	case LOCK_UN:
		r.type = F_UNLCK;
		break;
	default:
		reply_err(req, EINVAL);
		return;
	}
	lock_ask(req, ino, &r, !(op & LOCK_NB) && r.type != F_UNLCK);
}

/* The children this mount has set a record lock on, as bits by inode
 * number (a bit shared by two children only costs the other a flush). */
static _Atomic uint64_t record_locked[64];

static void record_mark(fuse_ino_t ino)
{
	uint64_t bit = (uint64_t)ino % (64 * 64);

	atomic_fetch_or(&record_locked[bit / 64], UINT64_C(1) << (bit % 64));
}

static bool record_marked(fuse_ino_t ino)
{
	uint64_t bit = (uint64_t)ino % (64 * 64);

	return atomic_load(&record_locked[bit / 64]) & (UINT64_C(1) << (bit % 64));
}

void fs_setlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
	      struct flock *lock, int sleep)
{
	struct store_lock_req r = {
		.type = lock->l_type,
		.owner = fi->lock_owner,
		.fh = fi->fh,
		.pid = (uint32_t)lock->l_pid,
	};

	lock_range(lock, &r);
	if (r.type != F_UNLCK)
		record_mark(ino);
	lock_ask(req, ino, &r, sleep && r.type != F_UNLCK);
}

void fs_getlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
	      struct flock *lock)
{
	struct fs *fs = fs_of(req);
	int rc;
	struct store_node *n = node_get(req, ino, &rc);
	struct store_lock_req r = {
		.type = lock->l_type,
		.owner = fi->lock_owner,
		.fh = fi->fh,
		.pid = (uint32_t)lock->l_pid,
	};
	struct flock out = { .l_type = F_UNLCK, .l_whence = SEEK_SET };

	if (!n) {
		reply_err(req, rc);
		return;
	}
	lock_range(lock, &r);
	rc = store_lock_test(fs->store, n, &r);
	node_put(fs, n);
	if (rc) {
		reply_err(req, lock_errno(rc));
		return;
	}
	if (r.type != F_UNLCK) {
		out.l_type = (short)r.type;
		out.l_start = (off_t)r.start;
		out.l_len = r.end >= INT64_MAX ? 0 : (off_t)(r.end - r.start + 1);
		out.l_pid = (pid_t)r.pid;
	}
	fuse_reply_lock(req, &out);
}

void fs_lock_open(struct fs *fs, struct store_node *n,
		  struct fuse_file_info *fi)
{
	/* A writing open is flushed at every close (a close by a POSIX
	 * owner ends its record locks), and so is a reading one of a
	 * child this mount has set a record lock on.  Any other reading
	 * open stays unflushed: a flush at every close would make each
	 * process that inherited it wait for the daemon at its exit (a
	 * stopped daemon would hang them all). */
	if (store_is_shared(fs->store) &&
	    ((fi->flags & O_ACCMODE) != O_RDONLY ||
	     record_marked(store_node_ino(n))))
		fi->noflush = 0;
}

void fs_lock_close(struct fs *fs, struct fs_file *f,
		   const struct fuse_file_info *fi, bool last)
{
	if (!f->node || !store_is_shared(fs->store))
		return;
	if (last)
		store_lock_drop(fs->store, f->node, false, fi->fh);
	else
		store_lock_drop(fs->store, f->node, true, fi->lock_owner);
}
