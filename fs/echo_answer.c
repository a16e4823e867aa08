/*
 * echo_answer.c - the answers to the echo thread's own requests (fs/echo.c):
 * each handler that the echo's calls reach asks here first, and what is
 * the echo's is answered from the echo record, never by a store
 * transition, so an echo never changes the store.
 *
 * A request is the echo's when it comes from the echo's process
 * (fs->echo_tid, fs/echo_call.c); every other request gets false and goes
 * on to the store.  What the armed record (fs->echo_*) says decides the
 * answer:
 *
 *   lookup    the names an appearing or moving echo must show as they
 *             were, before the store is asked (the new name absent, a
 *             move's source still there: fs_echo_lookup_first); a removed
 *             name, with its old inode number, when the store has none
 *             there (fs_echo_lookup)
 *   unlink,   succeeds only when no live node owns the name, judged under
 *   rmdir     the kernel's lock of the directory (fs_echo_remove): so an
 *             echo never takes a new incarnation from the kernel's view
 *   mkdir,    the live node the line made (fs_echo_appear; create makes
 *   create,   an open file of the echo's: nothing staged)
 *   link
 *   rename    allowed while the record shows that move (fs_echo_move)
 *   open      of the published child: an open file of the echo's, whose
 *             writes are counted and dropped (fs_echo_open)
 *   chmod     the attributes another mount gave the node (fs_echo_setattr)
 *
 * An open file of the echo's has its own fs_file_ops: reads are empty,
 * writes are answered and never staged, nothing is published.
 *
 * Locks: fs->echo_lock, a leaf, guards the record; it is never held
 * across a reply or a store call that may wait.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/fs.h"

static bool from_echo(fuse_req_t req, struct fs *fs)
{
	return fuse_req_ctx(req)->pid == atomic_load(&fs->echo_tid);
}

/* The live node the armed echo shows at @dir/@name before it is
 * replayed, with a reference (NULL: none; *hide: the name is absent). */
static struct store_node *shown_before(struct fs *fs, fuse_ino_t dir,
				       const char *name, bool *hide)
{
	struct store_node *n = NULL;
	bool at_new, at_from;

	*hide = false;
	pthread_mutex_lock(&fs->echo_lock);
	at_new = fs->echo_dir_ino == dir && strcmp(fs->echo_name, name) == 0;
	at_from = fs->echo_from_dir_ino == dir &&
		  strcmp(fs->echo_from, name) == 0;
	if (!fs->echo_armed || fs->echo_kind == FS_ECHO_REMOVE ||
	    fs->echo_kind == FS_ECHO_PUBLISH) {
		/* removals and publications show the store as it is */
	} else if (at_from && fs->echo_node) {
		n = fs->echo_node;          /* a move's source */
	} else if (at_new && fs->echo_other) {
		n = fs->echo_other;         /* an exchange's other name */
	} else if (at_new) {
		*hide = true;               /* a new name: not there yet */
	}
	if (n)
		store_node_ref(n);
	pthread_mutex_unlock(&fs->echo_lock);
	return n;
}

/* An open file of the echo's: its reads find nothing, its writes are
 * counted and dropped, never staged; flush, fsync and release have
 * nothing to publish (fs/file.c). */
static void echo_read(fuse_req_t req, struct fs *fs, struct fs_file *f,
		      size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)fs;
	(void)f;
	(void)size;
	(void)off;
	(void)fi;
	fuse_reply_buf(req, NULL, 0);
}

static ssize_t echo_write(fuse_req_t req, struct fs *fs, struct fs_file *f,
			  const char *buf, size_t size, off_t off)
{
	(void)req;
	(void)fs;
	(void)f;
	(void)buf;
	(void)off;
	return (ssize_t)size;
}

static const struct fs_file_ops echo_file_ops = {
	.read = echo_read,
	.write = echo_write,
};

/* An open file of the echo thread: nothing staged, nothing published. */
static int echo_file(struct fs *fs, struct store_node *n,
		     struct fuse_file_info *fi)
{
	struct fs_file *f = fs_file_new();

	if (!f)
		return -ENOMEM;
	f->ops = &echo_file_ops;
	f->node = n;
	store_node_ref(n);
	fi->fh = (uintptr_t)f;
	fi->direct_io = 1;
	return 0;
}

/*
 * Answer the echo's request with @n's entry (@rc 0) or @rc, and end the
 * reply begun with @tok; with @fi, an open file made for it by
 * echo_file(), as a create's reply (freed when the entry cannot be
 * made).  Lets go of @n.
 */
static void reply_shown(fuse_req_t req, struct fs *fs, struct store_node *n,
			int rc, struct fuse_file_info *fi, unsigned tok)
{
	struct fuse_entry_param e;

	if (rc == 0) {
		rc = fs_entry_fill(fs, n, &e);
		if (rc && fi)
			fs_file_free(fs, (struct fs_file *)(uintptr_t)fi->fh);
	}
	if (rc)
		reply_err(req, rc);
	else if (fi)
		fuse_reply_create(req, &e, fi);
	else
		fuse_reply_entry(req, &e);
	fs_reply_end(fs, tok);
	if (n)
		store_node_unref(fs->store, n);
}

bool fs_echo_lookup_first(fuse_req_t req, struct fs *fs, fuse_ino_t dir,
			  const char *name)
{
	struct store_node *n;
	unsigned tok;
	bool hide;

	if (!from_echo(req, fs))
		return false;
	tok = fs_reply_begin(fs);
	n = shown_before(fs, dir, name, &hide);
	if (!n && !hide) {
		fs_reply_end(fs, tok);
		return false;
	}
	reply_shown(req, fs, n, n ? 0 : -ENOENT, NULL, tok);
	return true;
}

bool fs_echo_lookup(fuse_req_t req, struct fs *fs, fuse_ino_t dir,
		    const char *name)
{
	struct fuse_entry_param e = { 0 };
	bool mine;

	if (!from_echo(req, fs))
		return false;
	pthread_mutex_lock(&fs->echo_lock);
	mine = fs->echo_armed && fs->echo_kind == FS_ECHO_REMOVE &&
	       strcmp(fs->echo_name, name) == 0 &&
	       (!fs->echo_dir_ino || fs->echo_dir_ino == dir);
	if (mine) {
		/* The node is gone from the store: the kernel gets an entry
		 * for the old inode number only so it can remove it.  It
		 * never reaches the store: any use answers ESTALE. */
		e.ino = fs->echo_ino;
		e.attr.st_mode = fs->echo_dir ? S_IFDIR | 0755 : S_IFREG | 0644;
	} else if (fs->echo_armed && fs->echo_kind == FS_ECHO_REMOVE &&
		   dir == STORE_ROOT_INO &&
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
	struct store_node *d = fs_inode_get(&fs->inodes, fs->store, dir);
	struct store_node *n = NULL;
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
	mine = fs->echo_armed && fs->echo_kind == FS_ECHO_REMOVE &&
	       fs->echo_dir == isdir && strcmp(fs->echo_name, name) == 0 &&
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

/* The armed echo's node if the echo is of @kind at @dir/@name (any
 * name when @name is NULL), with a reference; else NULL. */
static struct store_node *echo_target(struct fs *fs, enum fs_echo_kind kind,
				      fuse_ino_t dir, const char *name)
{
	struct store_node *n = NULL;

	pthread_mutex_lock(&fs->echo_lock);
	if (fs->echo_armed && fs->echo_kind == kind && fs->echo_node &&
	    (!name || (fs->echo_dir_ino == dir &&
		       strcmp(fs->echo_name, name) == 0))) {
		n = fs->echo_node;
		store_node_ref(n);
	}
	pthread_mutex_unlock(&fs->echo_lock);
	return n;
}

bool fs_echo_appear(fuse_req_t req, struct fs *fs, fuse_ino_t dir,
		    const char *name, struct fuse_file_info *fi)
{
	struct store_node *n;
	unsigned tok;
	int rc;

	if (!from_echo(req, fs))
		return false;
	tok = fs_reply_begin(fs);
	n = echo_target(fs, FS_ECHO_APPEAR, dir, name);
	rc = n ? 0 : -EEXIST;
	if (rc == 0 && fi)
		rc = echo_file(fs, n, fi);
	reply_shown(req, fs, n, rc, rc == 0 ? fi : NULL, tok);
	return true;
}

bool fs_echo_move(fuse_req_t req, struct fs *fs, fuse_ino_t dir,
		  const char *name)
{
	struct store_node *n;

	if (!from_echo(req, fs))
		return false;
	n = echo_target(fs, FS_ECHO_MOVE, dir, name);
	reply_err(req, n ? 0 : -EPERM);
	if (n)
		store_node_unref(fs->store, n);
	return true;
}

bool fs_echo_open(fuse_req_t req, struct fs *fs, fuse_ino_t ino,
		  struct fuse_file_info *fi)
{
	struct store_node *n;
	int rc = -EACCES;

	if (!from_echo(req, fs))
		return false;
	n = echo_target(fs, FS_ECHO_PUBLISH, 0, NULL);
	if (n && store_node_ino(n) == ino)
		rc = echo_file(fs, n, fi);
	if (rc)
		reply_err(req, rc);
	else
		fuse_reply_open(req, fi);
	if (n)
		store_node_unref(fs->store, n);
	return true;
}

bool fs_echo_setattr(fuse_req_t req, struct fs *fs, fuse_ino_t ino)
{
	struct store_node *n;
	struct stat st;
	unsigned tok;
	int rc = -EPERM;

	if (!from_echo(req, fs))
		return false;
	tok = fs_reply_begin(fs);
	n = echo_target(fs, FS_ECHO_ATTRIB, 0, NULL);
	if (n && store_node_ino(n) == ino)
		rc = fs_node_stat(fs, n, &st);
	if (rc)
		reply_err(req, rc);
	else
		fuse_reply_attr(req, &st, fs_cache_timeout(fs, n));
	fs_reply_end(fs, tok);
	if (n)
		store_node_unref(fs->store, n);
	return true;
}
