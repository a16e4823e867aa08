/*
 * ops.c - the FUSE low-level operations table of statefs (fs_ops), and
 * the session's init, which says what the kernel may send it.
 *
 * Each handler (fs/entry.c, attr.c, open.c, dir.c, and file.c with the
 * open files' operations it calls; they answer with fs/reply.c's
 * helpers) resolves the kernel's inode numbers to store handles through
 * the kernel's inode table (fs/inode.c; each handle counted, dropped
 * before the handler returns), applies the layout/ rules (depth, names,
 * special files), calls the store and replies exactly once.  Most make
 * one store call; a few make more, each an operation of its own that
 * checks what it needs (create opens the stage it admitted into, a
 * setattr of a special file's directory drops the specials' cached
 * attributes, a write clears set-user-ID bits).  No store lock is ever
 * held here, so no lock is held across a reply.
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
 * What this file owns: the table (fs_ops) and the session's init; the
 * helpers every handler uses are fs/reply.c's.  It keeps no state and
 * takes no lock.
 */
#define _GNU_SOURCE
#include "fs/fs.h"

void fs_init(void *userdata, struct fuse_conn_info *conn)
{
	struct fs *fs = userdata;

	/* Locks: a shared store's are the store's (fs/lock.c); the
	 * embedded store's stay the kernel's, as without the handlers. */
	if (!store_is_shared(fs->store))
		conn->want &= ~(unsigned)(FUSE_CAP_POSIX_LOCKS |
					  FUSE_CAP_FLOCK_LOCKS);
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
	.flock = fs_flock,                /* fs/lock.c */
	.getlk = fs_getlk,
	.setlk = fs_setlk,
};
