/*
 * file.c - open files: a child's open, read, write, flush, fsync,
 * release and fallocate, and what every open file shares (struct
 * fs_file, fs.h).
 *
 * A child's open file is a store stage: writes (and fallocate's zeros)
 * are staged, and published as one transition on flush (each close(2)
 * that wrote), fsync or, when no close reached statefs, release.  A write or an O_TRUNC open clears
 * the set-user-ID and set-group-ID bits as Linux does.  A special file's
 * open file (fs/special.c) is dispatched there from open, read and write;
 * poll answers for .events (fs/events.c), every other file is always
 * ready.
 *
 * Locks: a stage has its own (the store's); an open file's text_lock is
 * fs/special.c's.  Nothing here is held across a reply.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/stat.h>

#include "fs/fs.h"

/* The stage mode open(2) flags ask for. */
enum store_stage_mode fs_stage_mode(int flags)
{
	if ((flags & O_ACCMODE) == O_RDONLY)
		return STORE_STAGE_READ;
	if (flags & O_TRUNC)
		return STORE_STAGE_REPLACE;
	if (flags & O_APPEND)
		return STORE_STAGE_APPEND;
	return STORE_STAGE_CAS;
}

/* A new open file, empty; free it with fs_file_free(). */
struct fs_file *fs_file_new(void)
{
	struct fs_file *f = calloc(1, sizeof(*f));

	if (f)
		pthread_mutex_init(&f->text_lock, NULL);
	return f;
}

/* Make @f, whose stage is open on child @n, the open file of @fi.
 * Cannot fail. */
void fs_file_init_child(struct fs_file *f, struct store_node *n,
			int flags, struct fuse_file_info *fi)
{
	f->kind = FS_STAGE;
	f->node = n;
	store_node_ref(n);
	fi->fh = (uintptr_t)f;
	/* Every read and write reaches the stage: content sits in the
	 * page cache only for a mapping's pages (fs/main.c, the INIT flag
	 * that allows a shared mmap of a direct-I/O file). */
	fi->direct_io = 1;
	fi->keep_cache = 0;
	/* A reading open publishes nothing: its close needs no flush. */
	fi->noflush = (flags & O_ACCMODE) == O_RDONLY;
}

static int file_open_child(struct fs *fs, struct store_node *n, int flags,
			   struct fuse_file_info *fi)
{
	struct fs_file *f = fs_file_new();
	int rc;

	if (!f)
		return -ENOMEM;
	rc = store_stage_open(fs->store, n, fs_stage_mode(flags), &f->stage);
	if (rc) {
		pthread_mutex_destroy(&f->text_lock);
		free(f);
		return rc;
	}
	fs_file_init_child(f, n, flags, fi);
	return 0;
}

void fs_file_free(struct fs *fs, struct fs_file *f)
{
	if (!f)
		return;
	store_stage_close(f->stage);
	if (f->held)
		store_snapshot_release(fs->store, f->held_uid, f->held);
	free(f->text);
	store_events_close(f->reader);
	if (f->node)
		store_node_unref(fs->store, f->node);
	pthread_mutex_destroy(&f->text_lock);
	free(f);
}

/*
 * Does the caller of @req hold CAP_FSETID, which keeps the set-user-ID
 * and set-group-ID bits of a file it writes?  Read from its thread's
 * effective capabilities; when they cannot be read, uid 0 counts as
 * holding it, as elsewhere in statefs.
 */
static bool caller_fsetid(fuse_req_t req)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	unsigned long long caps;
	bool has = ctx->uid == 0;
	char path[64], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%lu/status", (unsigned long)ctx->pid);
	f = fopen(path, "re");
	if (!f)
		return has;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &caps) == 1) {
			has = (caps >> CAP_FSETID) & 1;
			break;
		}
	fclose(f);
	return has;
}

/*
 * A write to child @n, or an O_TRUNC open of it, by the caller of @req:
 * clear the set-user-ID and set-group-ID bits as Linux does
 * (store_cred_kill_suidgid).  statefs must do it itself: with direct I/O
 * the kernel sends no setattr for a write nor for an O_TRUNC open, and
 * libfuse 3.14 does not pass FUSE_WRITE_KILL_SUIDGID on.  The cheap
 * test comes first: most files have neither bit.  Best effort: a write
 * is not refused because its caller's credentials could not be read.
 */
void fs_kill_suidgid(fuse_req_t req, struct fs *fs, struct store_node *n)
{
	struct store_attr a, in = { 0 };
	struct fs_cred fc;
	unsigned kill = 0;

	if (store_getattr(fs->store, n, &a) != 0 ||
	    !(a.mode & (S_ISUID | S_ISGID)))
		return;
	if (fs_cred_get(req, &fc) == 0)
		kill = store_cred_kill_suidgid(&fc.c, caller_fsetid(req), a.gid,
					       a.mode);
	fs_cred_free(&fc);
	/* The kernel keeps the mode it was told last: drop it. */
	if (kill && store_setattr(fs->store, n, kill, &in, NULL) == 0)
		fs_inval_attr(fs, store_node_ino(n));
}

void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct store_node *n;
	int rc;

	if (fs_echo_open(req, fs, ino, fi))
		return;
	n = node_get(req, ino);
	if (!n)
		rc = -ESTALE;
	else if (store_node_kind(n) == STORE_SPECIAL)
		rc = fs_special_open(req, fs, n, fi->flags, fi);
	else if (store_node_kind(n) == STORE_CHILD)
		rc = file_open_child(fs, n, fi->flags, fi);
	else
		rc = -EISDIR;
	/* An O_TRUNC open truncates, as a write does. */
	if (rc == 0 && store_node_kind(n) == STORE_CHILD &&
	    fs_stage_mode(fi->flags) == STORE_STAGE_REPLACE)
		fs_kill_suidgid(req, fs, n);
	if (rc)
		reply_err(req, rc);
	else
		fuse_reply_open(req, fi);
	node_put(fs, n);
}

void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
	     struct fuse_file_info *fi)
{
	struct fs_file *f = file_of(fi);
	char *buf = NULL;
	ssize_t n = 0;

	(void)ino;
	if (f->kind == FS_ECHO) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (f->kind != FS_STAGE) {
		fs_special_read(req, fs_of(req), f, size, off, fi);
		return;
	}
	buf = malloc(size ? size : 1);
	if (!buf) {
		reply_err(req, ENOMEM);
		return;
	}
	n = store_stage_read(f->stage, buf, size, (uint64_t)off);
	if (n < 0)
		reply_err(req, (int)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

void fs_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
	      size_t size, off_t off, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct fs_file *f = file_of(fi);
	ssize_t n;

	(void)ino;
	if (f->kind == FS_STAGE) {
		n = store_stage_write(f->stage, buf, size, (uint64_t)off);
		if (n >= 0)
			fs_kill_suidgid(req, fs, f->node);
	} else if (f->kind == FS_ECHO) {
		n = (ssize_t)size; /* an echo's: counted, never staged */
	} else {
		n = fs_special_write(req, fs, f, buf, size);
	}
	if (n < 0)
		reply_err(req, (int)n);
	else
		fuse_reply_write(req, (size_t)n);
}

/* flush (every close(2) of a writing open): publish what it wrote. */
void fs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_file *f = file_of(fi);

	(void)ino;
	reply_err(req, f->kind == FS_STAGE ? store_stage_flush(f->stage) : 0);
}

/* fsync: publish whatever is owed, an O_TRUNC with no write included. */
void fs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
	      struct fuse_file_info *fi)
{
	struct fs_file *f = file_of(fi);

	(void)ino;
	(void)datasync;
	reply_err(req, f->kind == FS_STAGE ? store_stage_publish(f->stage) : 0);
}

void fs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct fs_file *f = file_of(fi);

	(void)ino;
	/* A stage still dirty here was never flushed (no close(2) reached
	 * us): publish now; nobody can be told if it fails. */
	if (f->kind == FS_STAGE)
		(void)store_stage_publish(f->stage);
	if (f->kind == FS_EVENTS)
		fs_events_release(fs, f);
	fs_file_free(fs, f);
	reply_err(req, 0);
}

/*
 * fallocate: mode 0 (posix_fallocate, fallocate -l) makes the content
 * the open file sees at least @off + @len bytes long, as a write of zeros
 * past its end would, published with it.  A state has no blocks to keep
 * or free: every other mode (KEEP_SIZE, PUNCH_HOLE, ZERO_RANGE, ...) and
 * any file but a child's is EOPNOTSUPP.
 */
void fs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off,
		  off_t len, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct fs_file *f = file_of(fi);
	int rc;

	(void)ino;
	if (mode != 0 || f->kind != FS_STAGE)
		rc = -EOPNOTSUPP;
	else if (off < 0 || len <= 0)
		rc = -EINVAL;
	else
		rc = store_stage_allocate(f->stage, (uint64_t)off, (uint64_t)len);
	if (rc == 0)
		fs_kill_suidgid(req, fs, f->node);
	reply_err(req, rc);
}

void fs_poll(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
	     struct fuse_pollhandle *ph)
{
	struct fs_file *f = file_of(fi);

	(void)ino;
	if (f->kind == FS_EVENTS) {
		fs_events_poll(req, fs_of(req), f, ph);
		return;
	}
	/* Everything else is always ready, as a regular file is. */
	if (ph)
		fuse_pollhandle_destroy(ph);
	fuse_reply_poll(req, POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM);
}
