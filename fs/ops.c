/*
 * ops.c - the FUSE low-level operations table of statefs, and the
 * helpers its handlers share.
 *
 * Each handler (fs/entry.c, attr.c, file.c, special.c, dir.c) resolves
 * the kernel's inode numbers to store handles through the kernel's inode
 * table (fs/inode.c; each handle counted, dropped before the handler
 * returns), applies the layout/ rules (depth, names, special files),
 * calls the store and replies exactly once.  Most make one store call; a
 * few make more, each an operation of its own that checks what it needs
 * (create opens the stage it admitted into, a setattr of a special
 * file's directory drops the specials' cached attributes, a write clears
 * set-user-ID bits).  No store lock is ever held here, so no lock is
 * held across a reply.
 *
 * Caching: the kernel may keep names and attributes for -o cache_timeout
 * (default an hour), but never past a deadline that could end the node
 * (fs_cache_timeout: its own lease, its parents'; under -o testclock
 * nothing leased is cached), so an expiry is seen at once without any
 * notification.  What the store changes behind the kernel's back
 * otherwise is invalidated by the inval thread (fs/inval.c) before the
 * handler that caused it replies: a .depart, a drain's clear, a lease
 * given to a cached node; a publication drops the cached attributes
 * before its flush replies.  Every reply that gives the kernel an entry
 * or attributes to cache is bracketed by fs_reply_begin/fs_reply_end, so
 * an invalidation that overtakes it is sent again after it (fs/inval.c,
 * "Replies in flight").  Child content is read and written with
 * direct I/O: the page cache never holds unpublished bytes or an
 * outdated state.
 *
 * What this file owns: the table (fs_ops), the session's init, and the
 * helpers every handler uses: attributes as stat(2) shows them, an entry
 * for the kernel, the special files of a directory, a caller's
 * credentials.  It keeps no state and takes no lock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/fs.h"
#include "layout/layout.h"

void fs_stat_from(struct stat *st, const struct store_attr *a)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = a->ino;
	st->st_mode = a->mode;
	st->st_nlink = a->nlink;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_size = (off_t)a->size;
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)((a->size + 511) / 512);
	st->st_atim = a->atime;
	st->st_mtim = a->mtime;
	st->st_ctim = a->ctime;
}

/* Attributes of @n as stat(2) shows them (special files take their mode
 * from the layout). */
int fs_node_stat(struct fs *fs, struct store_node *n, struct stat *st)
{
	struct store_attr a;
	const struct layout_special *sp;
	int rc = store_getattr(fs->store, n, &a);

	if (rc)
		return rc;
	if (store_node_kind(n) == STORE_SPECIAL) {
		sp = layout_special_slot(store_node_slot(n));
		if (sp)
			a.mode = sp->mode;
	}
	fs_stat_from(st, &a);
	return 0;
}

/* Tell the kernel about @n in an entry reply: attributes, one lookup. */
int fs_entry_fill(struct fs *fs, struct store_node *n,
		  struct fuse_entry_param *e)
{
	int rc;

	memset(e, 0, sizeof(*e));
	rc = fs_node_stat(fs, n, &e->attr);
	if (rc)
		return rc;
	fs_inode_update(&fs->inodes, fs->store, n);
	rc = fs_inode_remember(&fs->inodes, n);
	if (rc)
		return rc;
	e->ino = store_node_ino(n);
	e->generation = 1;
	e->attr_timeout = e->entry_timeout = fs_cache_timeout(fs, n);
	return 0;
}

/* Does this mount have special file @sp?  (.clock: only a test clock.) */
bool fs_special_here(struct fs *fs, const struct layout_special *sp)
{
	return sp && (sp->slot != LAYOUT_SLOT_CLOCK || fs->testclock);
}

/* A special file named @name in directory @dir, or NULL. */
const struct layout_special *fs_special_in(struct fs *fs,
					   struct store_node *dir,
					   const char *name)
{
	enum store_kind k = store_node_kind(dir);
	const struct layout_special *sp;

	if (k != STORE_ROOT && k != STORE_TENANT)
		return NULL;
	sp = layout_special_find(name, store_node_depth(dir));
	return fs_special_here(fs, sp) ? sp : NULL;
}

/*
 * The credentials a cascade (rmdir of a tenant or parent, .depart) is
 * checked with: the caller's under default_permissions, else none
 * (*@use NULL).  Free with fs_cred_free().
 */
int fs_cascade_cred(fuse_req_t req, struct fs *fs, struct fs_cred *fc,
		    const struct store_cred **use)
{
	int rc = 0;

	memset(fc, 0, sizeof(*fc));
	*use = NULL;
	if (fs->default_permissions) {
		rc = fs_cred_get(req, fc);
		if (rc == 0)
			*use = &fc->c;
	}
	return rc;
}

/*
 * The caller of @req as the store judges permissions: uid, gid and
 * supplementary groups.  libfuse reads the groups from /proc; when that
 * fails the caller counts as having none, which can only narrow what it
 * is allowed.  Root's groups are not read (uid 0 passes every check).
 * Free with fs_cred_free().  0 or -ENOMEM.
 */
int fs_cred_get(fuse_req_t req, struct fs_cred *fc)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	int n = 0;

	memset(fc, 0, sizeof(*fc));
	fc->c.uid = ctx->uid;
	fc->c.gid = ctx->gid;
	if (ctx->uid != 0)
		n = fuse_req_getgroups(req, 0, NULL);
	if (n > 0) {
		int got;

		fc->groups = calloc((size_t)n, sizeof(*fc->groups));
		if (!fc->groups)
			return -ENOMEM;
		/* The count may change between the two reads: keep what
		 * fitted (the return value is the whole count). */
		got = fuse_req_getgroups(req, n, fc->groups);
		fc->c.groups = fc->groups;
		fc->c.ngroups = got < 0 ? 0 : got < n ? (size_t)got : (size_t)n;
	}
	return 0;
}

void fs_cred_free(struct fs_cred *fc)
{
	free(fc->groups);
	memset(fc, 0, sizeof(*fc));
}

/* The filesystem ---------------------------------------------------------- */

void fs_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/* O_TRUNC arrives with open, so truncation is part of the stage
	 * and published on close, not a separate transition. */
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	/* Every listing carries the attributes (ls -l, find), not only the
	 * first chunk as the kernel's adaptive mode would: each entry then
	 * costs no lookup of its own. */
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	conn->want &= ~(unsigned)FUSE_CAP_READDIRPLUS_AUTO;
	/* Directory operations run in parallel; buckets serialize. */
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;
#ifdef FUSE_CAP_DIRECT_IO_ALLOW_MMAP
	/* A shared mmap of a child (direct I/O); fs/main.c sets it for a
	 * libfuse that does not know it. */
	if (conn->capable & FUSE_CAP_DIRECT_IO_ALLOW_MMAP)
		conn->want |= FUSE_CAP_DIRECT_IO_ALLOW_MMAP;
#endif
}

const struct fuse_lowlevel_ops fs_ops = {
	.init = fs_init,
	.lookup = fs_lookup,
	.forget = fs_forget,
	.forget_multi = fs_forget_multi,
	.getattr = fs_getattr,
	.setattr = fs_setattr,
	.mknod = fs_mknod,
	.mkdir = fs_mkdir,
	.unlink = fs_unlink,
	.rmdir = fs_rmdir,
	.symlink = fs_symlink,
	.rename = fs_rename,
	.link = fs_link,
	.open = fs_open,
	.read = fs_read,
	.write = fs_write,
	.flush = fs_flush,
	.release = fs_release,
	.fsync = fs_fsync,
	.opendir = fs_opendir,
	.readdir = fs_readdir,
	.readdirplus = fs_readdirplus,
	.releasedir = fs_releasedir,
	.fsyncdir = fs_fsyncdir,
	.statfs = fs_statfs,
	.setxattr = fs_setxattr,
	.getxattr = fs_getxattr,
	.listxattr = fs_listxattr,
	.removexattr = fs_removexattr,
	.create = fs_create,
	.poll = fs_poll,
	.fallocate = fs_fallocate,
};
