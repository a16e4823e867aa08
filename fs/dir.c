/*
 * dir.c - directory listings: opendir, readdir, readdirplus, releasedir.
 *
 * An open directory serves a listing taken in one critical section of
 * the directory (store_list) at offset 0: ".", "..", the special files
 * this mount has there, then the store's entries.  Offsets are indexes
 * into that listing, so an entry that exists throughout a pass is listed
 * exactly once.  readdirplus hands the kernel each entry to cache: it
 * looks each up again, so the kernel learns live nodes only, and counts
 * the reply in flight (fs_reply_begin).
 *
 * Owns the open directory (struct fs_dir, fi->fh), used by one request
 * at a time (the kernel's FUSE client sends one read of an open
 * directory at a time); no lock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "fs/fs.h"
#include "layout/layout.h"

/* An open directory (fi->fh): its listing, taken at offset 0. */
struct fs_dir {
	struct store_node *node;    /* counted */
	struct store_dirlist list;  /* store entries */
	const struct layout_special *special[STORE_NSPECIAL];
	size_t nspecial;            /* special files listed before them */
};

void fs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	int err;
	struct store_node *n = node_get(req, ino, &err);
	struct fs_dir *d;
	enum store_kind k;

	if (!n) {
		reply_err(req, err);
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
			if (fs_special_here(fs, sp) && d->nspecial < STORE_NSPECIAL)
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
		*ino = store_special_ino(store_node_ino(d->node), sp->slot);
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
				rc = fs_entry_fill(fs, n, &e);
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

void fs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi)
{
	(void)ino;
	dir_readdir(req, size, off, fi, false);
}

void fs_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
		    off_t off, struct fuse_file_info *fi)
{
	(void)ino;
	dir_readdir(req, size, off, fi, true);
}

void fs_releasedir(fuse_req_t req, fuse_ino_t ino,
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

/*
 * fsync of a directory: the mount's view becomes as fresh as the store
 * was at the call (store_sync: every transition a shared store committed
 * before it is applied here; the embedded store has nothing to wait for),
 * and what those transitions changed behind the kernel's back is dropped
 * from its caches (fs_inval_sync: bounded, as the kernel holds this
 * directory's lock, which an invalidation of a name in it waits for).
 */
void fs_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
		 struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	int rc;

	(void)ino;
	(void)datasync;
	(void)fi;
	rc = store_sync(fs->store, NULL);
	if (rc == 0 && store_is_shared(fs->store))
		fs_inval_sync(fs);
	reply_err(req, rc);
}
