/*
 * reply.c - what every handler of fs/ uses to answer: attributes as
 * stat(2) shows them, an entry for the kernel, the special files a
 * directory has, and a caller's credentials.
 *
 * An entry (fs_entry_fill) counts one lookup in the kernel's inode table
 * (fs/inode.c) and carries the time the kernel may keep it
 * (fs_cache_timeout, fs/inval.c): whoever fills one replies with it, or
 * must not tell the kernel at all.  A special file takes its mode from
 * layout/'s table, not from the store.  A caller's credentials are read
 * from the request (fuse_req_ctx, fuse_req_getgroups) and owned by the
 * struct fs_cred they are read into.
 *
 * It keeps no state and takes no lock of its own (the inode table takes
 * its own, a leaf).
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
