/*
 * file.c - open files: what every open file shares (struct fs_file,
 * fs.h: made by fs_file_new, freed by fs_file_free) and the handlers
 * that reach one (read, write, flush, fsync, release, fallocate, poll),
 * each of which calls the open file's own operations (f->ops, struct
 * fs_file_ops), as the kernel's VFS calls file->f_op.
 *
 * Each kind of open file has its table, set when it is opened: a
 * child's stage (fs/stage.c), the special files' (fs/special.c),
 * .events (fs/events.c), the echo's (fs/echo_answer.c); fs/open.c picks
 * the kind at open, and create makes a child's (fs/entry.c).  A slot a
 * kind leaves NULL has one answer for every kind: a read or a write is
 * EBADF, flush and fsync succeed, fallocate is EOPNOTSUPP, poll is
 * always ready (as a regular file is), and release only frees.  This
 * file calls no other file of fs/: the kinds call it.
 *
 * Locks: none of its own (each kind's are in its file); nothing is held
 * across a reply.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdlib.h>

#include "fs/fs.h"

/* A new open file, empty; free it with fs_file_free(). */
struct fs_file *fs_file_new(void)
{
	struct fs_file *f = calloc(1, sizeof(*f));

	if (f)
		pthread_mutex_init(&f->text_lock, NULL);
	return f;
}

void fs_file_free(struct fs *fs, struct fs_file *f)
{
	if (!f)
		return;
	store_stage_close(f->stage);
	if (f->held)
		store_snapshot_release(fs->store, f->held_uid, f->held);
	free(f->text);
	free(f->last);
	store_events_close(f->reader);
	if (f->node)
		store_node_unref(fs->store, f->node);
	pthread_mutex_destroy(&f->text_lock);
	free(f);
}

void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
	     struct fuse_file_info *fi)
{
	struct fs_file *f = file_of(fi);

	(void)ino;
	if (f->ops->read)
		f->ops->read(req, fs_of(req), f, size, off, fi);
	else
		reply_err(req, EBADF);
}

void fs_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
	      size_t size, off_t off, struct fuse_file_info *fi)
{
	struct fs_file *f = file_of(fi);
	ssize_t n;

	(void)ino;
	n = f->ops->write ? f->ops->write(req, fs_of(req), f, buf, size, off) :
			    -EBADF;
	if (n < 0)
		reply_err(req, (int)n);
	else
		fuse_reply_write(req, (size_t)n);
}

/* flush: every close(2) of a writing open. */
void fs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_file *f = file_of(fi);

	(void)ino;
	fs_lock_close(fs_of(req), f, fi, false);
	reply_err(req, f->ops->flush ? f->ops->flush(fs_of(req), f) : 0);
}

void fs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
	      struct fuse_file_info *fi)
{
	struct fs_file *f = file_of(fi);

	(void)ino;
	(void)datasync;
	reply_err(req, f->ops->fsync ? f->ops->fsync(fs_of(req), f) : 0);
}

void fs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct fs_file *f = file_of(fi);

	(void)ino;
	fs_lock_close(fs, f, fi, true);
	if (f->ops->release)
		f->ops->release(fs, f);
	fs_file_free(fs, f);
	reply_err(req, 0);
}

void fs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off,
		  off_t len, struct fuse_file_info *fi)
{
	struct fs_file *f = file_of(fi);

	(void)ino;
	reply_err(req, f->ops->fallocate ?
		       f->ops->fallocate(req, fs_of(req), f, mode, off, len) :
		       -EOPNOTSUPP);
}

void fs_poll(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
	     struct fuse_pollhandle *ph)
{
	struct fs_file *f = file_of(fi);

	(void)ino;
	if (f->ops->poll) {
		f->ops->poll(req, fs_of(req), f, ph);
		return;
	}
	/* Always ready, as a regular file is. */
	if (ph)
		fuse_pollhandle_destroy(ph);
	fuse_reply_poll(req, POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM);
}
