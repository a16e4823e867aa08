/*
 * ops.c - the FUSE low-level operations of statefs.
 *
 * Each handler resolves the kernel's inode numbers to store nodes (each
 * lookup takes a reference, dropped before the handler returns), applies
 * the layout/ rules (depth, names, special files), calls one store/
 * transition and replies exactly once.  No store lock is ever held here,
 * so no lock is held across a reply.
 *
 * Caching: the kernel may keep names and attributes for -o cache_timeout
 * (default an hour), but never past a deadline that could end the node
 * (fs_cache_timeout: its own lease, its parents'; under -o testclock
 * nothing leased is cached), so an expiry is seen at once without any
 * notification.  What the store changes behind the kernel's back
 * otherwise is invalidated by the inval thread (fs/watch.c) before the
 * handler that caused it replies: a .depart, a drain's clear, a lease
 * given to a cached node; a publication drops the cached attributes
 * before its flush replies.  Every reply that gives the kernel an entry
 * or attributes to cache is bracketed by fs_reply_begin/fs_reply_end, so
 * an invalidation that overtakes it is sent again after it (fs/watch.c,
 * "Replies in flight").  Child content is read and written with
 * direct I/O: the page cache never holds unpublished bytes or an
 * outdated state.
 *
 * Files: a child's open file is a store stage (writes staged, published
 * on flush/fsync/release); a special file's open file holds its text
 * (.stats, formatted at open) or takes control input (.depart).
 * Directories: opendir/readdir serve a listing taken in one critical
 * section of the directory; offsets are indexes into that listing, so an
 * entry that exists throughout is listed exactly once.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "fs/fs.h"
#include "layout/layout.h"

#define XATTR_GENERATION "user.statefs.generation"
#define XATTR_VERSION "user.statefs.version"
#define XATTR_TTL "user.statefs.ttl"
#define XATTR_CHILD_TTL "user.statefs.child_ttl"

/* An open directory (fi->fh): its listing, taken at offset 0. */
struct fs_dir {
	struct store_node *node;    /* counted */
	struct store_dirlist list;  /* store entries */
	const struct layout_special *special[STORE_NSPECIAL];
	size_t nspecial;            /* special files listed before them */
};

static struct fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static void reply_err(fuse_req_t req, int rc)
{
	fuse_reply_err(req, rc < 0 ? -rc : rc);
}

/* The node behind kernel inode @ino, with a reference; NULL = stale. */
static struct store_node *node_get(fuse_req_t req, fuse_ino_t ino)
{
	return store_ino_get(fs_of(req)->store, ino);
}

/* Drop a node reference.  Takes @fs, not the request: a request is gone
 * once it has been replied to. */
static void node_put(struct fs *fs, struct store_node *n)
{
	if (n)
		store_node_unref(fs->store, n);
}

static void stat_from(struct stat *st, const struct store_attr *a)
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
static int node_stat(struct fs *fs, struct store_node *n, struct stat *st)
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
	stat_from(st, &a);
	return 0;
}

/* Tell the kernel about @n in an entry reply: attributes, one lookup. */
static int entry_fill(struct fs *fs, struct store_node *n,
		      struct fuse_entry_param *e)
{
	int rc;

	memset(e, 0, sizeof(*e));
	rc = node_stat(fs, n, &e->attr);
	if (rc)
		return rc;
	rc = store_ino_remember(fs->store, n);
	if (rc)
		return rc;
	e->ino = store_node_ino(n);
	e->generation = 1;
	e->attr_timeout = e->entry_timeout = fs_cache_timeout(fs, n);
	return 0;
}

/* The entry of @n whose attributes @a a transition reported
 * (store_*_entry: the kernel's lookup is counted already).  Cannot fail. */
static void entry_made(struct fs *fs, struct store_node *n,
		       const struct store_attr *a, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	stat_from(&e->attr, a);
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

/* Does this mount have special file @sp?  (.clock: only a test clock.) */
static bool special_here(struct fs *fs, const struct layout_special *sp)
{
	return sp && (sp->slot != LAYOUT_SLOT_CLOCK || fs->testclock);
}

/* A special file named @name in directory @dir, or NULL. */
static const struct layout_special *special_in(struct fs *fs,
					       struct store_node *dir,
					       const char *name)
{
	enum store_kind k = store_node_kind(dir);
	const struct layout_special *sp;

	if (k != STORE_ROOT && k != STORE_TENANT)
		return NULL;
	sp = layout_special_find(name, store_node_depth(dir));
	return special_here(fs, sp) ? sp : NULL;
}

/* Lookup ----------------------------------------------------------------- */

static void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_of(req);
	unsigned tok = fs_reply_begin(fs);
	struct store_node *dir = node_get(req, parent), *n = NULL;
	const struct layout_special *sp;
	struct fuse_entry_param e;
	int rc = -ESTALE;

	if (dir) {
		sp = special_in(fs, dir, name);
		if (sp)
			rc = store_special(fs->store, dir, sp->slot, &n);
		else if (strlen(name) > store_limits(fs->store)->max_name)
			/* stat, rm, chmod answer as a create would. */
			rc = -ENAMETOOLONG;
		else
			rc = store_lookup(fs->store, dir, name, &n);
	}
	if (rc == 0)
		rc = entry_fill(fs, n, &e);
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

static void fs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	store_ino_forget(fs_of(req)->store, ino, nlookup);
	fuse_reply_none(req);
}

static void fs_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		store_ino_forget(fs_of(req)->store, forgets[i].ino,
				 forgets[i].nlookup);
	fuse_reply_none(req);
}

/* Attributes -------------------------------------------------------------- */

static void fs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	unsigned tok = fs_reply_begin(fs);
	struct store_node *n = node_get(req, ino);
	struct stat st;
	int rc = n ? node_stat(fs, n, &st) : -ESTALE;

	if (rc)
		reply_err(req, rc);
	else
		fuse_reply_attr(req, &st, fs_cache_timeout(fs, n));
	fs_reply_end(fs, tok);
	node_put(fs, n);
}

/*
 * The special files of the root or a tenant show its owner: after a
 * chown or chmod of @dir, the kernel must not check them against the
 * attributes it cached before.
 */
static void specials_changed(struct fs *fs, struct store_node *dir)
{
	enum store_kind k = store_node_kind(dir);

	if (k != STORE_ROOT && k != STORE_TENANT)
		return;
	for (int slot = 0; slot < STORE_NSPECIAL; slot++) {
		struct store_node *sp = NULL;

		if (store_special(fs->store, dir, slot, &sp) == 0) {
			fs_inval_attr(fs, store_node_ino(sp));
			node_put(fs, sp);
		}
	}
}

static void fs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct store_node *n = node_get(req, ino);
	struct fs_file *f = fi ? (struct fs_file *)(uintptr_t)fi->fh : NULL;
	struct store_attr in = { 0 }, out;
	unsigned mask = 0, tok;
	struct stat st;
	int rc = 0;

	if (!n) {
		reply_err(req, ESTALE);
		return;
	}
	if (to_set & FUSE_SET_ATTR_MODE) {
		mask |= STORE_SET_MODE;
		in.mode = attr->st_mode;
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		mask |= STORE_SET_UID;
		in.uid = attr->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		mask |= STORE_SET_GID;
		in.gid = attr->st_gid;
	}
	if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW)) {
		mask |= STORE_SET_ATIME;
		in.atime = attr->st_atim;
		if (to_set & FUSE_SET_ATTR_ATIME_NOW)
			clock_gettime(CLOCK_REALTIME, &in.atime);
	}
	if (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW)) {
		mask |= STORE_SET_MTIME;
		in.mtime = attr->st_mtim;
		if (to_set & FUSE_SET_ATTR_MTIME_NOW)
			clock_gettime(CLOCK_REALTIME, &in.mtime);
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (attr->st_size < 0)
			rc = -EINVAL;
		else if (f && f->kind == FS_STAGE)
			/* ftruncate on an open file: part of its stage, made
			 * after the transition below; what could refuse it is
			 * taken first. */
			rc = store_stage_truncate_reserve(
				f->stage, (uint64_t)attr->st_size);
		else if (store_node_kind(n) == STORE_SPECIAL)
			rc = 0; /* O_TRUNC of a control file: nothing to cut */
		else {
			mask |= STORE_SET_SIZE;
			in.size = (uint64_t)attr->st_size;
		}
	}
	/* touch renews a lease: deadline = now + ttl, in the same
	 * transition as the times, with one outcome. */
	if ((mask & (STORE_SET_ATIME | STORE_SET_MTIME)) &&
	    (store_node_kind(n) == STORE_CHILD ||
	     store_node_kind(n) == STORE_PARENT))
		mask |= STORE_SET_RENEW;
	/* The reply is computed from here on: from what the transition
	 * reports, or, with none, from the store after it. */
	tok = fs_reply_begin(fs);
	if (rc == 0 && store_node_kind(n) == STORE_SPECIAL)
		rc = (mask & ~(unsigned)STORE_SET_SIZE) ? -EPERM : 0;
	else if (rc == 0 && mask)
		rc = store_setattr(fs->store, n, mask, &in, &out);
	if (rc == 0 && f && f->kind == FS_STAGE &&
	    (to_set & FUSE_SET_ATTR_SIZE))
		rc = store_stage_truncate(f->stage, (uint64_t)attr->st_size);
	if (rc == 0 && (mask & (STORE_SET_MODE | STORE_SET_UID | STORE_SET_GID)))
		specials_changed(fs, n);
	if (rc == 0 && mask && store_node_kind(n) != STORE_SPECIAL)
		stat_from(&st, &out);
	else if (rc == 0)
		rc = node_stat(fs, n, &st);
	if (rc)
		reply_err(req, rc);
	else
		fuse_reply_attr(req, &st, fs_cache_timeout(fs, n));
	fs_reply_end(fs, tok);
	node_put(fs, n);
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

	*dir = node_get(req, ino);
	if (!*dir)
		return -ESTALE;
	if (special_in(fs, *dir, name))
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

static void fs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	struct fs *fs = fs_of(req);
	unsigned tok = fs_reply_begin(fs);
	struct store_node *dir, *n = NULL;
	struct store_owner o;
	struct store_attr a;
	int rc = dir_and_name(req, parent, name, &dir);

	/* A directory inside a parent is meaningless at that depth. */
	if (dir && store_node_kind(dir) == STORE_PARENT)
		rc = -EPERM;
	if (rc == 0) {
		owner_of(req, mode, &o);
		rc = store_mkdir_entry(fs->store, dir, name, &o, &n, &a);
	}
	reply_new_entry(req, n, &a, rc, tok);
	node_put(fs, n);
	node_put(fs, dir);
}

/*
 * The credentials a cascade (rmdir of a tenant or parent, .depart) is
 * checked with: the caller's under default_permissions, else none
 * (*@use NULL).  Free with fs_cred_free().
 */
static int cascade_cred(fuse_req_t req, struct fs *fs, struct fs_cred *fc,
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
 * rmdir (@dir true) and unlink: the echo thread's removals are answered
 * from the echo record; a special file is never removed.
 */
static void remove_entry(fuse_req_t req, fuse_ino_t parent, const char *name,
			 bool dir)
{
	struct fs *fs = fs_of(req);
	struct store_node *d = node_get(req, parent);
	const struct store_cred *cred = NULL;
	struct fs_cred fc = { 0 };
	int rc;

	if (fs_echo_remove(req, fs, parent, name, dir))
		rc = 1;
	else if (!d)
		rc = -ESTALE;
	else if (special_in(fs, d, name))
		rc = dir ? -ENOTDIR : -EPERM;
	else if (!dir)
		rc = store_unlink(fs->store, d, name);
	else if ((rc = cascade_cred(req, fs, &fc, &cred)) == 0)
		rc = store_rmdir(fs->store, d, name, cred);
	if (rc <= 0)
		reply_err(req, rc);
	fs_cred_free(&fc);
	node_put(fs, d);
}

static void fs_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_entry(req, parent, name, true);
}

static void fs_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_entry(req, parent, name, false);
}

/* The stage mode open(2) flags ask for. */
static enum store_stage_mode stage_mode(int flags)
{
	if ((flags & O_ACCMODE) == O_RDONLY)
		return STORE_STAGE_READ;
	if (flags & O_TRUNC)
		return STORE_STAGE_REPLACE;
	if (flags & O_APPEND)
		return STORE_STAGE_APPEND;
	return STORE_STAGE_CAS;
}

/* A new open file, empty; free it with file_free(). */
static struct fs_file *file_new(void)
{
	struct fs_file *f = calloc(1, sizeof(*f));

	if (f)
		pthread_mutex_init(&f->text_lock, NULL);
	return f;
}

/* Make @f, whose stage is open on child @n, the open file of @fi.
 * Cannot fail. */
static void file_init_child(struct fs_file *f, struct store_node *n,
			    int flags, struct fuse_file_info *fi)
{
	f->kind = FS_STAGE;
	f->node = n;
	store_node_ref(n);
	fi->fh = (uintptr_t)f;
	/* Content never sits in the page cache: see the file comment. */
	fi->direct_io = 1;
	fi->keep_cache = 0;
	/* A reading open publishes nothing: its close needs no flush. */
	fi->noflush = (flags & O_ACCMODE) == O_RDONLY;
}

static int file_open_child(struct fs *fs, struct store_node *n, int flags,
			   struct fuse_file_info *fi)
{
	struct fs_file *f = file_new();
	int rc;

	if (!f)
		return -ENOMEM;
	rc = store_stage_open(fs->store, n, stage_mode(flags), &f->stage);
	if (rc) {
		pthread_mutex_destroy(&f->text_lock);
		free(f);
		return rc;
	}
	file_init_child(f, n, flags, fi);
	return 0;
}

static void file_free(struct fs *fs, struct fs_file *f)
{
	if (!f)
		return;
	store_stage_close(f->stage);
	if (f->held)
		store_snapshot_release(fs->store, f->held_uid, f->held);
	free(f->text);
	fs_cred_free(&f->cred);
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
static void kill_suidgid(fuse_req_t req, struct fs *fs, struct store_node *n)
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

/*
 * create: admission and open in one.  What the open needs is allocated
 * before the admission, so once the child is admitted nothing can fail:
 * a failed create leaves no trace, in the store or in .events.
 */
static void fs_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	unsigned tok = fs_reply_begin(fs);
	struct store_node *dir, *n = NULL;
	struct fuse_entry_param e;
	struct store_owner o;
	struct store_attr a;
	struct fs_file *f = NULL;
	bool created;
	int rc = dir_and_name(req, parent, name, &dir);

	if (dir && store_node_kind(dir) != STORE_PARENT)
		rc = -EPERM; /* regular files live inside parents only */
	if (rc == 0) {
		f = file_new();
		rc = f ? store_stage_new(fs->store, stage_mode(fi->flags),
					 &f->stage) : -ENOMEM;
	}
	if (rc == 0) {
		owner_of(req, mode, &o);
		rc = store_create_entry(fs->store, dir, name, &o,
					(fi->flags & O_EXCL) != 0, &n, &created,
					&a);
	}
	if (rc) {
		file_free(fs, f);
		reply_err(req, rc);
	} else {
		/* Admitted (or found): from here on nothing fails.  A child
		 * removed since answers ESTALE through this open file. */
		store_stage_attach(f->stage, n);
		file_init_child(f, n, fi->flags, fi);
		if (!created && stage_mode(fi->flags) == STORE_STAGE_REPLACE)
			kill_suidgid(req, fs, n);
		entry_made(fs, n, &a, &e);
		fuse_reply_create(req, &e, fi);
	}
	fs_reply_end(fs, tok);
	node_put(fs, n);
	node_put(fs, dir);
}

static void fs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	struct fs *fs = fs_of(req);
	unsigned tok = fs_reply_begin(fs);
	struct store_node *dir, *n = NULL;
	struct store_owner o;
	struct store_attr a;
	bool created;
	int rc = dir_and_name(req, parent, name, &dir);

	(void)rdev;
	if (rc == 0 && (!S_ISREG(mode) || store_node_kind(dir) != STORE_PARENT))
		rc = -EPERM; /* devices, FIFOs, sockets; files outside parents */
	if (rc == 0) {
		owner_of(req, mode, &o);
		rc = store_create_entry(fs->store, dir, name, &o, true, &n,
					&created, &a);
	}
	reply_new_entry(req, n, &a, rc, tok);
	node_put(fs, n);
	node_put(fs, dir);
}

static void fs_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	(void)link;
	(void)parent;
	(void)name;
	reply_err(req, EPERM);
}

static void fs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	struct fs *fs = fs_of(req);
	unsigned tok = fs_reply_begin(fs);
	struct store_node *dir, *n = node_get(req, ino);
	struct store_attr a;
	int rc = dir_and_name(req, newparent, newname, &dir);

	if (!n)
		rc = -ESTALE;
	else if (rc == 0)
		rc = store_link_entry(fs->store, n, dir, newname, &a);
	reply_new_entry(req, n, &a, rc, tok);
	node_put(fs, n);
	node_put(fs, dir);
}

static void fs_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	struct fs *fs = fs_of(req);
	struct store_node *from = node_get(req, parent), *to = NULL;
	unsigned sflags = 0;
	int rc;

	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE))
		rc = -EINVAL;
	else if (!from)
		rc = -ESTALE;
	else if (special_in(fs, from, name))
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

/* Files --------------------------------------------------------------------- */

/* Format a .stats file for directory @dir (root or tenant). */
static int stats_text(struct fs *fs, struct store_node *dir, struct fs_file *f)
{
	struct layout_stats_view v = { 0 };
	bool tenant = store_node_kind(dir) == STORE_TENANT;
	size_t need;
	int rc;

	rc = store_stats(fs->store, tenant ? dir : NULL, &v.stats);
	if (rc)
		return rc;
	v.instance = store_instance_id(fs->store);
	v.state = store_drain_state(fs->store, tenant ? dir : NULL, NULL);
	fs_inval_sync(fs); /* a drain that ended just now is cleared */
	v.uptime_ms = store_uptime_ms(fs->store);
	v.tenant = tenant ? store_node_name(dir) : NULL;
	v.limits = store_limits(fs->store);
	v.link = store_connection(fs->store);
	need = layout_format_stats(NULL, 0, &v);
	f->text = malloc(need + 1);
	if (!f->text)
		return -ENOMEM;
	f->len = layout_format_stats(f->text, need + 1, &v);
	return 0;
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

/*
 * May @fc list tenant @dir (read and search permission, as ls needs)?
 * A tenant's .snapshot and .events name everything in it, and the
 * kernel lets anyone with search permission alone (a 0711 tenant) open
 * them: 0, or -EACCES.
 */
static int tenant_may_list(struct fs *fs, struct store_node *dir,
			   const struct fs_cred *fc)
{
	struct store_attr a;
	int rc = store_getattr(fs->store, dir, &a);

	if (rc)
		return rc;
	return store_cred_may_list(&fc->c, a.uid, a.gid, a.mode) ? 0 : -EACCES;
}

/*
 * Format a .snapshot of @dir (root or tenant) into @f: the store copies
 * the scope as of one instant (store_snapshot_take, which holds the other
 * transitions off only for moments); the text is made here, with no lock
 * held, and served from the open file.  The text counts against the
 * bound on snapshot memory, store-wide and the opener's uid's share,
 * until the file is released (store_snapshot_hold: -ENFILE, -EMFILE).
 */
static int snapshot_text(fuse_req_t req, struct fs *fs, struct store_node *dir,
			 struct fs_file *f)
{
	bool tenant = store_node_kind(dir) == STORE_TENANT;
	struct store_snapshot snap;
	size_t hlen = strlen(layout_snapshot_header), need = hlen, used;
	struct fs_cred fc;
	int rc = fs_cred_get(req, &fc);
	uid_t uid = fc.c.uid;

	/* A tenant's snapshot is its reader's only if it may list the
	 * tenant; the root's lists only the tenants the reader could list
	 * with ls. */
	if (rc == 0 && tenant)
		rc = tenant_may_list(fs, dir, &fc);
	if (rc == 0)
		rc = store_snapshot_take(fs->store, tenant ? dir : NULL, &snap);
	if (rc) {
		fs_cred_free(&fc);
		return rc;
	}
	if (!tenant) {
		size_t k = 0;

		for (size_t i = 0; i < snap.n; i++)
			if (store_cred_may_list(&fc.c, snap.rows[i].tenant_uid,
						snap.rows[i].tenant_gid,
						snap.rows[i].tenant_mode))
				snap.rows[k++] = snap.rows[i];
		snap.n = k;
	}
	fs_cred_free(&fc);
	for (size_t i = 0; i < snap.n; i++)
		need += layout_format_snapshot_row(NULL, 0, &snap.rows[i]);
	rc = store_snapshot_hold(fs->store, uid, need + 1);
	if (rc) {
		store_snapshot_free(&snap);
		return rc;
	}
	f->text = malloc(need + 1);
	if (!f->text) {
		store_snapshot_release(fs->store, uid, need + 1);
		store_snapshot_free(&snap);
		return -ENOMEM;
	}
	f->held = need + 1;
	f->held_uid = uid;
	memcpy(f->text, layout_snapshot_header, hlen + 1);
	used = hlen;
	for (size_t i = 0; i < snap.n; i++)
		used += layout_format_snapshot_row(f->text + used, need + 1 - used,
						   &snap.rows[i]);
	f->len = used;
	store_snapshot_free(&snap);
	return 0;
}

/* Room for what .drain reads: "draining " and a 64-bit number. */
#define DRAIN_TEXT_MAX 64

/* What .drain of @dir (root or tenant) reads now, into @buf (capacity
 * DRAIN_TEXT_MAX); its length. */
static size_t drain_text(struct fs *fs, struct store_node *dir, char *buf)
{
	bool tenant = store_node_kind(dir) == STORE_TENANT;
	uint64_t left;
	enum store_state st = store_drain_state(fs->store, tenant ? dir : NULL,
						&left);
	size_t len;

	fs_inval_sync(fs); /* a drain that ended just now is cleared */
	len = layout_format_drain(buf, DRAIN_TEXT_MAX, st, left);
	return len < DRAIN_TEXT_MAX ? len : DRAIN_TEXT_MAX - 1;
}

/*
 * Read .drain.  A read at offset 0 takes the state anew, so a new pass
 * sees the newest state; a read further on serves the text that pass
 * took, so a reader that reads in pieces never gets two states mixed.
 * Threads sharing the descriptor read at once: the text is rewritten in
 * place and copied out under f->text_lock (never freed before release),
 * and the reply goes out from the copy with no lock held.
 */
static void drain_read(fuse_req_t req, struct fs *fs, struct fs_file *f,
		       size_t size, off_t off)
{
	struct store_node *dir = store_node_tenant(f->node);
	char now[DRAIN_TEXT_MAX], out[DRAIN_TEXT_MAX];
	size_t nowlen = 0, n = 0;

	if (off == 0)
		nowlen = drain_text(fs, dir ? dir : store_root(fs->store), now);
	pthread_mutex_lock(&f->text_lock);
	if (off == 0) {
		memcpy(f->text, now, nowlen);
		f->len = nowlen;
	}
	if ((uint64_t)off < f->len) {
		n = f->len - (size_t)off;
		if (n > size)
			n = size;
		memcpy(out, f->text + off, n);
	}
	pthread_mutex_unlock(&f->text_lock);
	fuse_reply_buf(req, out, n);
}

static int file_open_special(fuse_req_t req, struct fs *fs, struct store_node *n,
			     int flags, struct fuse_file_info *fi)
{
	const struct layout_special *sp = layout_special_slot(store_node_slot(n));
	struct store_node *dir = store_node_tenant(n);
	bool wr = (flags & O_ACCMODE) != O_RDONLY;
	bool rd = (flags & O_ACCMODE) != O_WRONLY;
	struct fs_file *f;
	int rc = 0;

	if (!sp)
		return -ENOENT;
	if ((wr && !(sp->mode & 0222)) || (rd && !(sp->mode & 0444)))
		return -EACCES;
	f = file_new();
	if (!f)
		return -ENOMEM;
	if (!dir)
		dir = store_root(fs->store);
	switch (sp->slot) {
	case LAYOUT_SLOT_STATS:
		f->kind = FS_TEXT;
		rc = stats_text(fs, dir, f);
		break;
	case LAYOUT_SLOT_DEPART:
		f->kind = FS_DEPART;
		break;
	case LAYOUT_SLOT_EVENTS:
		/* A stream shows the reader only the lines of tenants it may
		 * list, with the credentials it opened the file with; a
		 * tenant's is not opened at all by who may not list it. */
		rc = fs_cred_get(req, &f->cred);
		if (rc == 0 && store_node_kind(dir) == STORE_TENANT)
			rc = tenant_may_list(fs, dir, &f->cred);
		if (rc == 0)
			fs_events_open(fs, dir, f);
		break;
	case LAYOUT_SLOT_SNAPSHOT:
		f->kind = FS_TEXT;
		rc = snapshot_text(req, fs, dir, f);
		break;
	case LAYOUT_SLOT_DRAIN:
		f->kind = FS_DRAIN;
		/* Made once: reads rewrite it in place (drain_read). */
		f->text = malloc(DRAIN_TEXT_MAX);
		if (!f->text)
			rc = -ENOMEM;
		else
			f->len = drain_text(fs, dir, f->text);
		break;
	case LAYOUT_SLOT_CLOCK:
		f->kind = FS_CLOCK;
		rc = asprintf(&f->text, "%" PRIu64 "\n",
			      store_now_ms(fs->store)) < 0 ? -ENOMEM : 0;
		if (rc)
			f->text = NULL;
		else
			f->len = strlen(f->text);
		break;
	default:
		rc = -ENOENT;
	}
	if (rc) {
		file_free(fs, f);
		return rc;
	}
	f->node = n;
	store_node_ref(n);
	fi->fh = (uintptr_t)f;
	fi->direct_io = 1;
	fi->nonseekable = sp->slot == LAYOUT_SLOT_DEPART ||
			  sp->slot == LAYOUT_SLOT_EVENTS;
	return 0;
}

static void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct store_node *n = node_get(req, ino);
	int rc;

	if (!n)
		rc = -ESTALE;
	else if (store_node_kind(n) == STORE_SPECIAL)
		rc = file_open_special(req, fs, n, fi->flags, fi);
	else if (store_node_kind(n) == STORE_CHILD)
		rc = file_open_child(fs, n, fi->flags, fi);
	else
		rc = -EISDIR;
	/* An O_TRUNC open truncates, as a write does. */
	if (rc == 0 && store_node_kind(n) == STORE_CHILD &&
	    stage_mode(fi->flags) == STORE_STAGE_REPLACE)
		kill_suidgid(req, fs, n);
	if (rc)
		reply_err(req, rc);
	else
		fuse_reply_open(req, fi);
	node_put(fs, n);
}

static struct fs_file *file_of(struct fuse_file_info *fi)
{
	return (struct fs_file *)(uintptr_t)fi->fh;
}

static void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fs_file *f = file_of(fi);
	char *buf = NULL;
	ssize_t n = 0;

	(void)ino;
	if (f->kind == FS_DEPART) {
		reply_err(req, EBADF);
		return;
	}
	if (f->kind == FS_EVENTS) {
		fs_events_read(req, fs_of(req), f, size,
			       (fi->flags & O_NONBLOCK) != 0);
		return;
	}
	if (f->kind == FS_DRAIN) {
		drain_read(req, fs_of(req), f, size, off);
		return;
	}
	/* Made at open and never changed: no lock (fs.h). */
	if (f->kind == FS_TEXT || f->kind == FS_CLOCK) {
		if ((size_t)off < f->len)
			n = (ssize_t)(f->len - (size_t)off < size ?
				      f->len - (size_t)off : size);
		fuse_reply_buf(req, f->text + (n ? off : 0), (size_t)n);
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

static void fs_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct fs_file *f = file_of(fi);
	const struct store_cred *cred = NULL;
	struct fs_cred fc = { 0 };
	char name[NAME_MAX + 1];
	uint64_t ms;
	ssize_t n;
	int rc;

	(void)ino;
	switch (f->kind) {
	case FS_STAGE:
		n = store_stage_write(f->stage, buf, size, (uint64_t)off);
		if (n >= 0)
			kill_suidgid(req, fs, f->node);
		break;
	case FS_DEPART:
		rc = layout_parse_depart(buf, size,
					 store_limits(fs->store)->max_name,
					 name, sizeof(name));
		if (rc == 0)
			rc = cascade_cred(req, fs, &fc, &cred);
		if (rc == 0)
			rc = store_depart(fs->store, store_node_tenant(f->node),
					  name, cred);
		fs_cred_free(&fc);
		fs_inval_sync(fs);
		n = rc ? rc : (ssize_t)size;
		break;
	case FS_DRAIN:
		/* Any write starts the drain; later writes change nothing.
		 * A tenant's clear is a cascade: judged as rmdir's. */
		rc = cascade_cred(req, fs, &fc, &cred);
		if (rc == 0)
			rc = store_drain_as(fs->store, store_node_tenant(f->node),
					    cred);
		fs_cred_free(&fc);
		fs_inval_sync(fs);
		n = rc ? rc : (ssize_t)size;
		break;
	case FS_CLOCK:
		rc = layout_parse_control_ms(buf, size, &ms);
		if (rc == 0)
			rc = fs_clock_advance(fs, ms);
		fs_inval_sync(fs);
		n = rc ? rc : (ssize_t)size;
		break;
	default:
		n = -EBADF;
	}
	if (n < 0)
		reply_err(req, (int)n);
	else
		fuse_reply_write(req, (size_t)n);
}

/* flush (every close(2) of a writing open): publish what it wrote. */
static void fs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_file *f = file_of(fi);

	(void)ino;
	reply_err(req, f->kind == FS_STAGE ? store_stage_flush(f->stage) : 0);
}

/* fsync: publish whatever is owed, an O_TRUNC with no write included. */
static void fs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	struct fs_file *f = file_of(fi);

	(void)ino;
	(void)datasync;
	reply_err(req, f->kind == FS_STAGE ? store_stage_publish(f->stage) : 0);
}

/*
 * fsync of a directory: the mount's view becomes as fresh as the store
 * was at the call (store_sync: every transition a shared store committed
 * before it is applied here; the embedded store has nothing to wait for).
 */
static void fs_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	reply_err(req, store_sync(fs_of(req)->store, NULL));
}

static void fs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
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
	file_free(fs, f);
	reply_err(req, 0);
}

/* Directories ------------------------------------------------------------------- */

static void fs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct store_node *n = node_get(req, ino);
	struct fs_dir *d;
	enum store_kind k;

	if (!n) {
		reply_err(req, ESTALE);
		return;
	}
	k = store_node_kind(n);
	if (k == STORE_CHILD || k == STORE_SPECIAL) {
		reply_err(req, ENOTDIR);
		node_put(fs, n);
		return;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		reply_err(req, ENOMEM);
		node_put(fs, n);
		return;
	}
	d->node = n; /* keeps node_get's reference */
	if (k == STORE_ROOT || k == STORE_TENANT) {
		const struct layout_special *sp;

		for (size_t i = 0; (sp = layout_special_nth(store_node_depth(n), i)); i++)
			if (special_here(fs, sp) && d->nspecial < STORE_NSPECIAL)
				d->special[d->nspecial++] = sp;
	}
	fi->fh = (uintptr_t)d;
	fuse_reply_open(req, fi);
}

/*
 * One listing entry at index @i: ".", "..", the special files, then the
 * store's entries.  Returns false past the end.
 */
static bool dir_entry(struct fs_dir *d, size_t i, const char **name,
		      uint64_t *ino, mode_t *mode, int *slot)
{
	const struct layout_special *sp;

	*slot = -1;
	if (i < 2) {
		*name = i == 0 ? "." : "..";
		*ino = store_node_ino(d->node);
		*mode = S_IFDIR;
		return true;
	}
	i -= 2;
	if (i < d->nspecial) {
		sp = d->special[i];
		*name = sp->name;
		*ino = store_node_ino(d->node) + 1 + (uint64_t)sp->slot;
		*mode = sp->mode;
		*slot = sp->slot;
		return true;
	}
	i -= d->nspecial;
	if (i >= d->list.n)
		return false;
	*name = d->list.e[i].name;
	*ino = d->list.e[i].ino;
	*mode = d->list.e[i].kind == STORE_CHILD ? S_IFREG : S_IFDIR;
	return true;
}

static void dir_readdir(fuse_req_t req, size_t size, off_t off,
			struct fuse_file_info *fi, bool plus)
{
	struct fs *fs = fs_of(req);
	struct fs_dir *d = (struct fs_dir *)(uintptr_t)fi->fh;
	char *buf;
	size_t used = 0;
	const char *name;
	uint64_t ino;
	mode_t mode;
	unsigned tok;
	int slot, rc = 0;

	if (off == 0) {
		/* A new pass (or rewinddir): a fresh consistent listing. */
		store_dirlist_free(&d->list);
		rc = store_list(fs->store, d->node, &d->list);
		if (rc) {
			reply_err(req, rc);
			return;
		}
	}
	buf = malloc(size);
	if (!buf) {
		reply_err(req, ENOMEM);
		return;
	}
	/* readdirplus hands the kernel entries to cache; a plain readdir
	 * none. */
	tok = plus ? fs_reply_begin(fs) : 0;
	for (size_t i = (size_t)off; dir_entry(d, i, &name, &ino, &mode, &slot); i++) {
		struct fuse_entry_param e = { 0 };
		struct store_node *n = NULL;
		size_t need;

		if (!plus) {
			struct stat st = { .st_ino = ino, .st_mode = mode };

			need = fuse_add_direntry(req, buf + used, size - used, name,
						 &st, (off_t)i + 1);
			if (need > size - used)
				break;
			used += need;
			continue;
		}
		need = fuse_add_direntry_plus(req, NULL, 0, name, NULL, 0);
		if (need > size - used)
			break;
		/* Dots carry no entry; others are resolved now so the
		 * kernel learns live nodes only. */
		if (i >= 2) {
			if (slot >= 0)
				rc = store_special(fs->store, d->node, slot, &n);
			else
				rc = store_lookup(fs->store, d->node, name, &n);
			if (rc == 0)
				rc = entry_fill(fs, n, &e);
			node_put(fs, n);
			if (rc) {
				rc = 0;
				continue; /* gone since the listing: skip it */
			}
		} else {
			e.attr.st_ino = ino;
			e.attr.st_mode = mode;
		}
		used += fuse_add_direntry_plus(req, buf + used, size - used, name,
					       &e, (off_t)i + 1);
	}
	fuse_reply_buf(req, buf, used);
	if (plus)
		fs_reply_end(fs, tok);
	free(buf);
}

static void fs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)ino;
	dir_readdir(req, size, off, fi, false);
}

static void fs_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	(void)ino;
	dir_readdir(req, size, off, fi, true);
}

static void fs_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct fs_dir *d = (struct fs_dir *)(uintptr_t)fi->fh;

	(void)ino;
	store_dirlist_free(&d->list);
	node_put(fs, d->node);
	free(d);
	reply_err(req, 0);
}

/* Extended attributes ------------------------------------------------------------ */

static void reply_xattr_value(fuse_req_t req, const char *val, size_t size)
{
	size_t len = strlen(val);

	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, val, len);
}

/*
 * The extended attributes statefs keeps, by node kind:
 *   parent: generation (read-only), ttl, child_ttl
 *   child:  version (read-only), ttl
 * All are read by name.  listxattr names only ttl and child_ttl, and only
 * while they are set: copying tools (cp -a, cp --preserve=xattr,
 * rsync -X) copy what is listed, and setting a fact the store keeps
 * itself is refused, so the read-only facts stay out of the listing (as
 * CephFS keeps its virtual attributes out of it); a lease set is copied
 * with the node.
 */

/*
 * statefs keeps user.* attributes only. Any other namespace (security.*,
 * system.posix_acl_*, trusted.*) is not supported, the answer a Linux
 * filesystem without labels or ACLs gives: EOPNOTSUPP, which tools such as
 * ls remember per filesystem instead of asking again for every file.
 */
static bool xattr_supported(const char *name)
{
	return strncmp(name, "user.", 5) == 0;
}

static bool is_lease_node(struct store_node *n)
{
	return store_node_kind(n) == STORE_PARENT ||
	       store_node_kind(n) == STORE_CHILD;
}

static void fs_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	struct fs *fs = fs_of(req);
	struct store_node *n = node_get(req, ino);
	struct store_lease lease;
	char val[32];
	uint64_t v;
	bool seconds = false;
	int rc = -ENODATA;

	if (!n)
		rc = -ESTALE;
	else if (!store_node_live(n))
		rc = -ESTALE;
	else if (!xattr_supported(name))
		rc = -EOPNOTSUPP;
	else if (strcmp(name, XATTR_GENERATION) == 0 &&
		 store_node_kind(n) == STORE_PARENT)
		rc = store_parent_generation(fs->store, n, &v);
	else if (strcmp(name, XATTR_VERSION) == 0 &&
		 store_node_kind(n) == STORE_CHILD)
		rc = store_child_version(fs->store, n, &v);
	else if (strcmp(name, XATTR_TTL) == 0 && is_lease_node(n)) {
		rc = store_lease_get(fs->store, n, &lease);
		v = lease.ttl_ms;
		seconds = true;
	} else if (strcmp(name, XATTR_CHILD_TTL) == 0 &&
		   store_node_kind(n) == STORE_PARENT) {
		rc = store_lease_get(fs->store, n, &lease);
		v = lease.child_ttl_ms;
		seconds = true;
	}
	if (rc == 0) {
		if (seconds)
			layout_format_seconds(val, sizeof(val), v);
		else
			snprintf(val, sizeof(val), "%" PRIu64, v);
		reply_xattr_value(req, val, size);
	} else {
		reply_err(req, rc);
	}
	node_put(fs, n);
}

static void fs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	static const char both[] = XATTR_TTL "\0" XATTR_CHILD_TTL;
	struct fs *fs = fs_of(req);
	struct store_node *n = node_get(req, ino);
	struct store_lease lease = { 0 };
	const char *names = both;
	size_t len = 0;
	int rc = 0;

	if (!n || !store_node_live(n)) {
		reply_err(req, ESTALE);
		node_put(fs, n);
		return;
	}
	if (is_lease_node(n))
		rc = store_lease_get(fs->store, n, &lease);
	if (rc == 0 && lease.ttl_ms)
		len = sizeof(XATTR_TTL);
	if (rc == 0 && lease.child_ttl_ms) {
		if (!len)
			names += sizeof(XATTR_TTL);
		len += sizeof(XATTR_CHILD_TTL);
	}
	if (rc)
		reply_err(req, rc);
	else if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, names, len);
	node_put(fs, n);
}

static void fs_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	struct fs *fs = fs_of(req);
	struct store_node *n = node_get(req, ino);
	bool ttl = strcmp(name, XATTR_TTL) == 0;
	bool child_ttl = strcmp(name, XATTR_CHILD_TTL) == 0;
	uint64_t ms;
	int rc;

	(void)flags;
	if (!n)
		rc = -ESTALE;
	else if (strcmp(name, XATTR_GENERATION) == 0 ||
		 strcmp(name, XATTR_VERSION) == 0)
		rc = -EPERM; /* the store's facts are read-only */
	else if (!ttl && !child_ttl)
		rc = -ENOTSUP; /* nothing else is kept */
	else if (ttl ? !is_lease_node(n) : store_node_kind(n) != STORE_PARENT)
		rc = -EINVAL; /* leases are for parents and children */
	else
		rc = layout_parse_seconds_value(value, size, &ms);
	if (rc == 0)
		rc = ttl ? store_set_ttl(fs->store, n, ms) :
			   store_set_child_ttl(fs->store, n, ms);
	if (rc == 0 && ttl && ms) {
		/* The kernel may hold @n for longer than its new lease. */
		fs_inval_names(fs, n);
		fs_inval_sync(fs);
	}
	reply_err(req, rc);
	node_put(fs, n);
}

/*
 * Removing ttl removes the lease and removing child_ttl goes back to the
 * default, as setting 0 does (rsync -X removes what the source lacks).
 */
static void fs_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct fs *fs = fs_of(req);
	struct store_node *n = node_get(req, ino);
	int rc;

	if (!n)
		rc = -ESTALE;
	else if (!xattr_supported(name))
		rc = -EOPNOTSUPP;
	else if (strcmp(name, XATTR_GENERATION) == 0 ||
		 strcmp(name, XATTR_VERSION) == 0)
		rc = -EPERM; /* the store's facts are read-only */
	else if (strcmp(name, XATTR_TTL) == 0 && is_lease_node(n))
		rc = store_set_ttl(fs->store, n, 0);
	else if (strcmp(name, XATTR_CHILD_TTL) == 0 &&
		 store_node_kind(n) == STORE_PARENT)
		rc = store_set_child_ttl(fs->store, n, 0);
	else
		rc = -ENODATA; /* nothing else is kept */
	reply_err(req, rc);
	node_put(fs, n);
}

static void fs_poll(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
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

/* The filesystem ------------------------------------------------------------------ */

static void fs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct fs *fs = fs_of(req);
	const struct store_limits *l = store_limits(fs->store);
	struct store_stats st;
	struct statvfs sv = { 0 };

	(void)ino;
	store_stats(fs->store, NULL, &st);
	sv.f_bsize = sv.f_frsize = 4096;
	sv.f_blocks = l->max_bytes / 4096;
	sv.f_bfree = sv.f_bavail = (l->max_bytes - st.bytes) / 4096;
	sv.f_files = l->max_children;
	sv.f_ffree = sv.f_favail = l->max_children - st.children;
	sv.f_namemax = l->max_name;
	fuse_reply_statfs(req, &sv);
}

static void fs_init(void *userdata, struct fuse_conn_info *conn)
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
};
