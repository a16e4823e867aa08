/*
 * entry.c - the requests that find, make, move and remove names: lookup,
 * forget, mkdir, mknod, create, symlink (refused), link, rename, unlink
 * and rmdir.
 *
 * Each checks the name against the layout/ rules for its depth (special
 * names are not the store's: a lookup finds them through
 * store_special(), a new entry may not take them) and makes one store
 * transition.  The handlers that give the kernel a new entry (mkdir,
 * mknod, create, link) make room for the kernel's lookup in the inode
 * table (fs/inode.c) and take what the open file of a create needs
 * before the transition, and the transition reports the new node's
 * attributes itself (store_*_entry): once the store has changed, the
 * reply has nothing left that can fail, so a failed call changes
 * nothing, in the store or in .events.  The echo thread's requests are
 * answered from the echo record (fs/echo_answer.c), never by a
 * transition.
 *
 * Owns no state and takes no lock of its own (the inode table's, for
 * one probe).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/fs.h"
#include "layout/layout.h"

/*
 * The entry of @n whose attributes @a a transition reported
 * (store_*_entry), counting the kernel's lookup in the room reserved
 * before that transition (fs_inode_reserve).  Cannot fail.
 */
static void entry_made(struct fs *fs, struct store_node *n,
		       const struct store_attr *a, struct fuse_entry_param *e)
{
	fs_inode_remember_reserved(&fs->inodes, n);
	memset(e, 0, sizeof(*e));
	fs_stat_from(&e->attr, a);
	e->ino = store_node_ino(n);
	e->generation = 1;
	e->attr_timeout = e->entry_timeout = fs_cache_timeout(fs, n);
}

static void owner_of(fuse_req_t req, mode_t mode, struct store_owner *o)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	o->uid = ctx->uid;
	o->gid = ctx->gid;
	o->mode = mode & 07777;
}

/* Lookup ----------------------------------------------------------------- */

void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_of(req);
	unsigned tok;
	struct store_node *dir, *n = NULL;
	const struct layout_special *sp;
	struct fuse_entry_param e;
	int rc = -ESTALE;

	if (fs_echo_lookup_first(req, fs, parent, name))
		return;
	tok = fs_reply_begin(fs);
	dir = node_get(req, parent, &rc);
	if (dir) {
		sp = fs_special_in(fs, dir, name);
		if (sp)
			rc = store_special(fs->store, dir, sp->slot, &n);
		else if (strlen(name) > store_limits(fs->store)->max_name)
			/* stat, rm, chmod answer as a create would. */
			rc = -ENAMETOOLONG;
		else
			rc = store_lookup(fs->store, dir, name, &n);
	}
	if (rc == 0)
		rc = fs_entry_fill(fs, n, &e);
	/* The echo thread walks to names the store removed already (their
	 * directory may be gone as well); a name the store has is never
	 * the echo's. */
	if ((rc == -ENOENT || (rc == -ESTALE && !n)) &&
	    fs_echo_lookup(req, fs, parent, name))
		rc = 1;
	if (rc < 0)
		reply_err(req, rc);
	else if (rc == 0)
		fuse_reply_entry(req, &e);
	fs_reply_end(fs, tok);
	node_put(fs, n);
	node_put(fs, dir);
}

void fs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct fs *fs = fs_of(req);

	fs_inode_forget(&fs->inodes, fs->store, ino, nlookup);
	fuse_reply_none(req);
}

void fs_forget_multi(fuse_req_t req, size_t count,
		     struct fuse_forget_data *forgets)
{
	struct fs *fs = fs_of(req);

	for (size_t i = 0; i < count; i++)
		fs_inode_forget(&fs->inodes, fs->store, forgets[i].ino,
				forgets[i].nlookup);
	fuse_reply_none(req);
}

/* Tree transitions -------------------------------------------------------- */

/*
 * Resolve a directory inode and check a new name in it: the common start
 * of mkdir, create, mknod, link and rename.  Refuses special names
 * (EEXIST: they exist), then bad names for that depth (EINVAL/
 * ENAMETOOLONG).
 */
static int dir_and_name(fuse_req_t req, fuse_ino_t ino, const char *name,
			struct store_node **dir)
{
	struct fs *fs = fs_of(req);
	int err;

	*dir = node_get(req, ino, &err);
	if (!*dir)
		return err;
	if (fs_special_in(fs, *dir, name))
		return -EEXIST;
	return layout_name_check(name, store_limits(fs->store)->max_name,
				 store_node_depth(*dir) + 1);
}

/* Reply to mkdir, mknod or link with @n's entry as the transition
 * reported it (@a), and end the reply begun (@tok) before that
 * transition.  Nothing here can fail once the store has changed. */
static void reply_new_entry(fuse_req_t req, struct store_node *n,
			    const struct store_attr *a, int rc, unsigned tok)
{
	struct fs *fs = fs_of(req);
	struct fuse_entry_param e;

	if (rc) {
		reply_err(req, rc);
	} else {
		entry_made(fs, n, a, &e);
		fuse_reply_entry(req, &e);
	}
	fs_reply_end(fs, tok);
}

void fs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
	      mode_t mode)
{
	struct fs *fs = fs_of(req);
	unsigned tok;
	struct store_node *dir, *n = NULL;
	struct store_owner o;
	struct store_attr a;
	int rc;

	if (fs_echo_appear(req, fs, parent, name, NULL))
		return;
	tok = fs_reply_begin(fs);
	rc = dir_and_name(req, parent, name, &dir);

	/* A directory inside a parent is meaningless at that depth. */
	if (dir && store_node_kind(dir) == STORE_PARENT)
		rc = -EPERM;
	/* Room for the kernel's lookup first: nothing fails after the
	 * transition. */
	if (rc == 0)
		rc = fs_inode_reserve(&fs->inodes);
	if (rc == 0) {
		owner_of(req, mode, &o);
		rc = store_mkdir_entry(fs->store, dir, name, &o, &n, &a);
		if (rc)
			fs_inode_unreserve(&fs->inodes);
	}
	reply_new_entry(req, n, &a, rc, tok);
	node_put(fs, n);
	node_put(fs, dir);
}

/*
 * rmdir (@dir true) and unlink: the echo thread's removals are answered
 * from the echo record; a special file is never removed.
 */
static void remove_entry(fuse_req_t req, fuse_ino_t parent, const char *name,
			 bool dir)
{
	struct fs *fs = fs_of(req);
	int rc, err;
	struct store_node *d = node_get(req, parent, &err);
	const struct store_cred *cred = NULL;
	struct fs_cred fc = { 0 };

	if (fs_echo_remove(req, fs, parent, name, dir))
		rc = 1;
	else if (!d)
		rc = err;
	else if (fs_special_in(fs, d, name))
		rc = dir ? -ENOTDIR : -EPERM;
	else if (!dir)
		rc = store_unlink(fs->store, d, name);
	else if ((rc = fs_cascade_cred(req, fs, &fc, &cred)) == 0)
		rc = store_rmdir(fs->store, d, name, cred);
	if (rc <= 0)
		reply_err(req, rc);
	fs_cred_free(&fc);
	node_put(fs, d);
}

void fs_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_entry(req, parent, name, true);
}

void fs_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_entry(req, parent, name, false);
}

/*
 * create: admission and open in one.  What the open needs is allocated
 * before the admission, so once the child is admitted nothing can fail:
 * a failed create leaves no trace, in the store or in .events.
 */
void fs_create(fuse_req_t req, fuse_ino_t parent, const char *name,
	       mode_t mode, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	unsigned tok;
	struct store_node *dir, *n = NULL;
	struct fuse_entry_param e;
	struct store_owner o;
	struct store_attr a;
	struct fs_file *f = NULL;
	bool created;
	int rc;

	if (fs_echo_appear(req, fs, parent, name, fi))
		return;
	tok = fs_reply_begin(fs);
	rc = dir_and_name(req, parent, name, &dir);

	if (dir && store_node_kind(dir) != STORE_PARENT)
		rc = -EPERM; /* regular files live inside parents only */
	if (rc == 0) {
		f = fs_file_new();
		rc = f ? store_stage_new(fs->store, fs_stage_mode(fi->flags),
					 &f->stage) : -ENOMEM;
	}
	if (rc == 0)
		rc = fs_inode_reserve(&fs->inodes);
	if (rc == 0) {
		owner_of(req, mode, &o);
		rc = store_create_entry(fs->store, dir, name, &o,
					(fi->flags & O_EXCL) != 0, &n, &created,
					&a);
		if (rc)
			fs_inode_unreserve(&fs->inodes);
	}
	if (rc) {
		fs_file_free(fs, f);
		reply_err(req, rc);
	} else {
		/* Admitted (or found): from here on nothing fails.  A child
		 * removed since answers ESTALE through this open file. */
		store_stage_attach(f->stage, n);
		fs_file_init_child(f, n, fi->flags, fi);
		fs_lock_open(fs, n, fi);
		if (!created && fs_stage_mode(fi->flags) == STORE_STAGE_REPLACE)
			fs_kill_suidgid(req, fs, n);
		entry_made(fs, n, &a, &e);
		fuse_reply_create(req, &e, fi);
	}
	fs_reply_end(fs, tok);
	node_put(fs, n);
	node_put(fs, dir);
}

void fs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
	      mode_t mode, dev_t rdev)
{
	struct fs *fs = fs_of(req);
	unsigned tok;
	struct store_node *dir, *n = NULL;
	struct store_owner o;
	struct store_attr a;
	bool created;
	int rc;

	(void)rdev;
	if (fs_echo_appear(req, fs, parent, name, NULL))
		return;
	tok = fs_reply_begin(fs);
	rc = dir_and_name(req, parent, name, &dir);
	if (rc == 0 && (!S_ISREG(mode) || store_node_kind(dir) != STORE_PARENT))
		rc = -EPERM; /* devices, FIFOs, sockets; files outside parents */
	if (rc == 0)
		rc = fs_inode_reserve(&fs->inodes);
	if (rc == 0) {
		owner_of(req, mode, &o);
		rc = store_create_entry(fs->store, dir, name, &o, true, &n,
					&created, &a);
		if (rc)
			fs_inode_unreserve(&fs->inodes);
	}
	reply_new_entry(req, n, &a, rc, tok);
	node_put(fs, n);
	node_put(fs, dir);
}

void fs_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		const char *name)
{
	(void)link;
	(void)parent;
	(void)name;
	reply_err(req, EPERM);
}

void fs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
	     const char *newname)
{
	struct fs *fs = fs_of(req);
	unsigned tok;
	struct store_node *dir, *n;
	struct store_attr a;
	int rc, err;

	if (fs_echo_appear(req, fs, newparent, newname, NULL))
		return;
	tok = fs_reply_begin(fs);
	n = node_get(req, ino, &err);
	rc = dir_and_name(req, newparent, newname, &dir);

	if (!n)
		rc = err;
	else if (rc == 0)
		rc = fs_inode_reserve(&fs->inodes);
	if (n && rc == 0) {
		rc = store_link_entry(fs->store, n, dir, newname, &a);
		if (rc)
			fs_inode_unreserve(&fs->inodes);
	}
	reply_new_entry(req, n, &a, rc, tok);
	node_put(fs, n);
	node_put(fs, dir);
}

void fs_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
	       fuse_ino_t newparent, const char *newname,
	       unsigned int flags)
{
	struct fs *fs = fs_of(req);
	struct store_node *from, *to = NULL;
	unsigned sflags = 0;
	int rc, err;

	if (fs_echo_move(req, fs, newparent, newname))
		return;
	from = node_get(req, parent, &err);
	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE))
		rc = -EINVAL;
	else if (!from)
		rc = err;
	else if (fs_special_in(fs, from, name))
		rc = -EPERM;
	else
		rc = dir_and_name(req, newparent, newname, &to);
	if (rc == -EEXIST)
		rc = -EPERM; /* a special file is never replaced */
	if (flags & RENAME_NOREPLACE)
		sflags |= STORE_RENAME_NOREPLACE;
	if (flags & RENAME_EXCHANGE)
		sflags |= STORE_RENAME_EXCHANGE;
	if (rc == 0)
		rc = store_rename(fs->store, from, name, to, newname, sflags);
	reply_err(req, rc);
	node_put(fs, to);
	node_put(fs, from);
}
