/*
 * stage.c - a child's open file: a store stage, with its fs_file_ops
 * (read, write, flush, fsync, release, fallocate), and the set-user-ID
 * and set-group-ID bits a write clears.
 *
 * Writes (and fallocate's zeros) are staged, and published as one
 * transition on flush (each close(2) that wrote), fsync or, when no
 * close reached statefs, release.  The stage's mode follows the open's
 * flags (fs_stage_mode): a reading open, a replacing one (O_TRUNC), an
 * appending one, else a compare-and-set.  Every read and write reaches
 * the stage (direct I/O): the page cache never holds unpublished bytes.
 * A write, an fallocate or an O_TRUNC open clears the set-user-ID and
 * set-group-ID bits as Linux does (fs_kill_suidgid).
 *
 * A child's open file is made by open (fs_stage_open, from fs/open.c)
 * or by create (fs/entry.c, through fs_file_init_child); ftruncate on it
 * is part of its stage (fs/attr.c).
 *
 * Locks: a stage has its own (the store's); nothing of fs/ is taken
 * here, and nothing is held across a reply.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <linux/capability.h>
#include <sys/stat.h>

#include "fs/fs.h"

static const struct fs_file_ops stage_ops;

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

/* Make @f, whose stage is open on child @n, the open file of @fi.
 * Cannot fail. */
void fs_file_init_child(struct fs_file *f, struct store_node *n,
			int flags, struct fuse_file_info *fi)
{
	f->ops = &stage_ops;
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

/* open(2) of child @n with @fi's flags: a stage on it, the open file of
 * @fi.  0 or the store's -errno (nothing made). */
int fs_stage_open(fuse_req_t req, struct fs *fs, struct store_node *n,
		  struct fuse_file_info *fi)
{
	int flags = fi->flags;
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
	fs_lock_open(fs, n, fi);
	/* An O_TRUNC open truncates, as a write does. */
	if (fs_stage_mode(flags) == STORE_STAGE_REPLACE)
		fs_kill_suidgid(req, fs, n);
	return 0;
}

/* The stage's operations --------------------------------------------------- */

static void stage_read(fuse_req_t req, struct fs *fs, struct fs_file *f,
		       size_t size, off_t off, struct fuse_file_info *fi)
{
	char *buf = malloc(size ? size : 1);
	ssize_t n;

	(void)fs;
	(void)fi;
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

static ssize_t stage_write(fuse_req_t req, struct fs *fs, struct fs_file *f,
			   const char *buf, size_t size, off_t off)
{
	ssize_t n = store_stage_write(f->stage, buf, size, (uint64_t)off);

	if (n >= 0)
		fs_kill_suidgid(req, fs, f->node);
	return n;
}

/* flush (every close(2) of a writing open): publish what it wrote. */
static int stage_flush(struct fs *fs, struct fs_file *f)
{
	(void)fs;
	return store_stage_flush(f->stage);
}

/* fsync: publish whatever is owed, an O_TRUNC with no write included. */
static int stage_fsync(struct fs *fs, struct fs_file *f)
{
	(void)fs;
	return store_stage_publish(f->stage);
}

/* A stage still dirty here was never flushed (no close(2) reached us):
 * publish now; nobody can be told if it fails. */
static void stage_release(struct fs *fs, struct fs_file *f)
{
	(void)fs;
	(void)store_stage_publish(f->stage);
}

/*
 * fallocate: mode 0 (posix_fallocate, fallocate -l) makes the content
 * the open file sees at least @off + @len bytes long, as a write of zeros
 * past its end would, published with it.  A state has no blocks to keep
 * or free: every other mode (KEEP_SIZE, PUNCH_HOLE, ZERO_RANGE, ...) is
 * EOPNOTSUPP, as is any file but a child's (fs/file.c).
 */
static int stage_fallocate(fuse_req_t req, struct fs *fs, struct fs_file *f,
			   int mode, off_t off, off_t len)
{
	int rc;

	if (mode != 0)
		rc = -EOPNOTSUPP;
	else if (off < 0 || len <= 0)
		rc = -EINVAL;
	else
		rc = store_stage_allocate(f->stage, (uint64_t)off, (uint64_t)len);
	if (rc == 0)
		fs_kill_suidgid(req, fs, f->node);
	return rc;
}

static const struct fs_file_ops stage_ops = {
	.read = stage_read,
	.write = stage_write,
	.flush = stage_flush,
	.fsync = stage_fsync,
	.release = stage_release,
	.fallocate = stage_fallocate,
};
