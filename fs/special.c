/*
 * special.c - the special files of the root and the tenants: their open,
 * and the operations (struct fs_file_ops) of the open files it makes (a
 * special file is a row of layout/'s table, with a case here for what
 * its open file does).
 *
 * .stats and .snapshot are texts made at open and served from the open
 * file; a .snapshot's text counts against the bound on snapshot memory
 * until it is released (store_snapshot_hold).  .drain reads its state
 * anew at each read from offset 0 and starts a drain when written;
 * .depart takes one name per write; .clock (-o testclock) shows the
 * manual clock and moves it; .events is a stream (fs/events.c, which
 * has its own operations).  Reading a tenant's .snapshot or .events asks
 * for the right to list the tenant.  Each kind is one table: text_ops
 * (.stats, .snapshot), depart_ops, drain_ops, clock_ops.
 *
 * Locks: an open .drain's text_lock (fs.h), a leaf, guards the text that
 * reads at offset 0 rewrite in place; the reply goes out from a copy,
 * with no lock held.  Everything else is made at open and never changed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "fs/fs.h"
#include "layout/layout.h"

static const struct fs_file_ops text_ops, depart_ops, drain_ops, clock_ops;

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
	v.pid = (uint64_t)getpid();
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

/* May @fc list the tenant of @row (the root's .snapshot shows only those:
 * the rows are read as the store gave them, never changed)? */
static bool row_listed(const struct fs_cred *fc,
		       const struct store_snap_row *row)
{
	return store_cred_may_list(&fc->c, row->tenant_uid, row->tenant_gid,
				   row->tenant_mode);
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
	need += layout_format_snapshot_seq(NULL, 0, snap.seq);
	for (size_t i = 0; i < snap.n; i++)
		if (tenant || row_listed(&fc, &snap.rows[i]))
			need += layout_format_snapshot_row(NULL, 0, &snap.rows[i]);
	rc = store_snapshot_hold(fs->store, uid, need + 1);
	if (rc)
		goto out;
	f->text = malloc(need + 1);
	if (!f->text) {
		store_snapshot_release(fs->store, uid, need + 1);
		rc = -ENOMEM;
		goto out;
	}
	f->held = need + 1;
	f->held_uid = uid;
	memcpy(f->text, layout_snapshot_header, hlen + 1);
	used = hlen;
	used += layout_format_snapshot_seq(f->text + used, need + 1 - used,
					   snap.seq);
	for (size_t i = 0; i < snap.n; i++)
		if (tenant || row_listed(&fc, &snap.rows[i]))
			used += layout_format_snapshot_row(f->text + used,
							   need + 1 - used,
							   &snap.rows[i]);
	f->len = used;
out:
	store_snapshot_free(&snap);
	fs_cred_free(&fc);
	return rc;
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
		       size_t size, off_t off, struct fuse_file_info *fi)
{
	struct store_node *dir = store_node_tenant(f->node);
	char now[DRAIN_TEXT_MAX], out[DRAIN_TEXT_MAX];
	size_t nowlen = 0, n = 0;

	(void)fi;
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

int fs_special_open(fuse_req_t req, struct fs *fs, struct store_node *n,
		    int flags, struct fuse_file_info *fi)
{
	const struct layout_special *sp = layout_special_slot(store_node_slot(n));
	struct store_node *dir = store_node_tenant(n);
	bool wr = (flags & O_ACCMODE) != O_RDONLY;
	bool rd = (flags & O_ACCMODE) != O_WRONLY;
	struct fs_file *f;
	struct fs_cred fc = { 0 };
	int rc = 0;

	if (!sp)
		return -ENOENT;
	if ((wr && !(sp->mode & 0222)) || (rd && !(sp->mode & 0444)))
		return -EACCES;
	f = fs_file_new();
	if (!f)
		return -ENOMEM;
	if (!dir)
		dir = store_root(fs->store);
	switch (sp->slot) {
	case LAYOUT_SLOT_STATS:
		f->ops = &text_ops;
		rc = stats_text(fs, dir, f);
		break;
	case LAYOUT_SLOT_DEPART:
		f->ops = &depart_ops;
		break;
	case LAYOUT_SLOT_EVENTS:
		/* A stream shows the reader only the lines of tenants it may
		 * list, with the credentials it opened the file with; a
		 * tenant's is not opened at all by who may not list it. */
		rc = fs_cred_get(req, &fc);
		if (rc == 0 && store_node_kind(dir) == STORE_TENANT)
			rc = tenant_may_list(fs, dir, &fc);
		if (rc == 0)
			rc = fs_events_open(fs, dir, &fc.c, f);
		fs_cred_free(&fc);
		break;
	case LAYOUT_SLOT_SNAPSHOT:
		f->ops = &text_ops;
		rc = snapshot_text(req, fs, dir, f);
		break;
	case LAYOUT_SLOT_DRAIN:
		f->ops = &drain_ops;
		/* Made once: reads rewrite it in place (drain_read). */
		f->text = malloc(DRAIN_TEXT_MAX);
		if (!f->text)
			rc = -ENOMEM;
		else
			f->len = drain_text(fs, dir, f->text);
		break;
	case LAYOUT_SLOT_CLOCK:
		f->ops = &clock_ops;
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
		fs_file_free(fs, f);
		return rc;
	}
	f->node = n;
	store_node_ref(n);
	fi->fh = (uintptr_t)f;
	fi->direct_io = 1;
	/* .events is seekable: the offset of its first read is where it
	 * starts (fs/events.c). */
	fi->nonseekable = sp->slot == LAYOUT_SLOT_DEPART;
	return 0;
}

/* A text made at open (.stats, .snapshot, .clock), never changed after:
 * read with no lock (fs.h). */
static void text_read(fuse_req_t req, struct fs *fs, struct fs_file *f,
		      size_t size, off_t off, struct fuse_file_info *fi)
{
	ssize_t n = 0;

	(void)fs;
	(void)fi;
	if ((size_t)off < f->len)
		n = (ssize_t)(f->len - (size_t)off < size ?
			      f->len - (size_t)off : size);
	fuse_reply_buf(req, f->text + (n ? off : 0), (size_t)n);
}

/* .depart: one name a write, departed (store_depart), a cascade judged
 * as rmdir's. */
static ssize_t depart_write(fuse_req_t req, struct fs *fs, struct fs_file *f,
			    const char *buf, size_t size, off_t off)
{
	const struct store_cred *cred = NULL;
	struct fs_cred fc = { 0 };
	char name[NAME_MAX + 1];
	int rc;

	(void)off;
	rc = layout_parse_depart(buf, size, store_limits(fs->store)->max_name,
				 name, sizeof(name));
	if (rc == 0)
		rc = fs_cascade_cred(req, fs, &fc, &cred);
	if (rc == 0)
		rc = store_depart(fs->store, store_node_tenant(f->node), name,
				  cred);
	fs_cred_free(&fc);
	fs_inval_sync(fs);
	return rc ? rc : (ssize_t)size;
}

/* .drain: any write starts the drain; later writes change nothing.  A
 * tenant's clear is a cascade: judged as rmdir's. */
static ssize_t drain_write(fuse_req_t req, struct fs *fs, struct fs_file *f,
			   const char *buf, size_t size, off_t off)
{
	const struct store_cred *cred = NULL;
	struct fs_cred fc = { 0 };
	int rc;

	(void)buf;
	(void)off;
	rc = fs_cascade_cred(req, fs, &fc, &cred);
	if (rc == 0)
		rc = store_drain_as(fs->store, store_node_tenant(f->node), cred);
	fs_cred_free(&fc);
	fs_inval_sync(fs);
	return rc ? rc : (ssize_t)size;
}

/* .clock (-o testclock): a write moves the manual clock on. */
static ssize_t clock_write(fuse_req_t req, struct fs *fs, struct fs_file *f,
			   const char *buf, size_t size, off_t off)
{
	uint64_t ms;
	int rc;

	(void)req;
	(void)f;
	(void)off;
	rc = layout_parse_control_ms(buf, size, &ms);
	if (rc == 0)
		rc = fs_clock_advance(fs, ms);
	fs_inval_sync(fs);
	return rc ? rc : (ssize_t)size;
}

/* The special files' operations: a read of .depart, and a write of a
 * text, are EBADF (fs/file.c); flush, fsync and release have nothing to
 * do. */
static const struct fs_file_ops text_ops = {
	.read = text_read,
};

static const struct fs_file_ops depart_ops = {
	.write = depart_write,
};

static const struct fs_file_ops drain_ops = {
	.read = drain_read,
	.write = drain_write,
};

static const struct fs_file_ops clock_ops = {
	.read = text_read,
	.write = clock_write,
};
