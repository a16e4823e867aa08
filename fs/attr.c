/*
 * attr.c - what stat(2), chmod, chown, utimensat, truncate, the
 * extended attributes and statfs(2) see and change.
 *
 * getattr shows the store's attributes (a special file's mode from
 * layout/); setattr is one store transition (store_setattr), with a
 * touch's lease renewal in it (STORE_SET_RENEW) and an ftruncate's cut
 * of its open stage taken first and applied after; a chmod or chown of
 * a directory with special files drops their cached attributes, which
 * show the directory's owner.  The extended attributes are the store's
 * facts (generation, version, ttl, child_ttl) by name; statfs shows the
 * store's ceilings.
 *
 * Owns no state and takes no lock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "fs/fs.h"
#include "layout/layout.h"

#define XATTR_GENERATION "user.statefs.generation"
#define XATTR_VERSION "user.statefs.version"
#define XATTR_TTL "user.statefs.ttl"
#define XATTR_CHILD_TTL "user.statefs.child_ttl"

void fs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	unsigned tok = fs_reply_begin(fs);
	int rc;
	struct store_node *n = node_get(req, ino, &rc);
	struct stat st;

	if (n)
		rc = fs_node_stat(fs, n, &st);

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

void fs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		int to_set, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct store_node *n;
	struct fs_file *f = fi ? (struct fs_file *)(uintptr_t)fi->fh : NULL;
	struct store_attr in = { 0 }, out;
	unsigned mask = 0, tok;
	struct stat st;
	int rc = 0;

	if (fs_echo_setattr(req, fs, ino))
		return;
	n = node_get(req, ino, &rc);
	if (!n) {
		reply_err(req, rc);
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
		else if (f && f->stage)
			/* ftruncate on an open file (a child's: only it has
			 * a stage): part of its stage, made after the
			 * transition below; what could refuse it is taken
			 * first. */
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
	if (rc == 0 && f && f->stage &&
	    (to_set & FUSE_SET_ATTR_SIZE))
		rc = store_stage_truncate(f->stage, (uint64_t)attr->st_size);
	if (rc == 0 && (mask & (STORE_SET_MODE | STORE_SET_UID | STORE_SET_GID)))
		specials_changed(fs, n);
	if (rc == 0 && mask && store_node_kind(n) != STORE_SPECIAL)
		fs_stat_from(&st, &out);
	else if (rc == 0)
		rc = fs_node_stat(fs, n, &st);
	if (rc)
		reply_err(req, rc);
	else
		fuse_reply_attr(req, &st, fs_cache_timeout(fs, n));
	fs_reply_end(fs, tok);
	node_put(fs, n);
}

/* Extended attributes ----------------------------------------------------- */

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

void fs_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		 size_t size)
{
	struct fs *fs = fs_of(req);
	int err, rc = -ENODATA;
	struct store_node *n = node_get(req, ino, &err);
	struct store_lease lease;
	char val[32];
	uint64_t v;
	bool seconds = false;

	if (!n)
		rc = err;
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

void fs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	static const char both[] = XATTR_TTL "\0" XATTR_CHILD_TTL;
	struct fs *fs = fs_of(req);
	int rc;
	struct store_node *n = node_get(req, ino, &rc);
	struct store_lease lease = { 0 };
	const char *names = both;
	size_t len = 0;

	if (!n || !store_node_live(n)) {
		reply_err(req, n ? ESTALE : rc);
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

void fs_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		 const char *value, size_t size, int flags)
{
	struct fs *fs = fs_of(req);
	int rc;
	struct store_node *n = node_get(req, ino, &rc);
	bool ttl = strcmp(name, XATTR_TTL) == 0;
	bool child_ttl = strcmp(name, XATTR_CHILD_TTL) == 0;
	uint64_t ms;

	(void)flags;
	if (!n)
		; /* node_get's answer */
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
void fs_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct fs *fs = fs_of(req);
	int rc;
	struct store_node *n = node_get(req, ino, &rc);

	if (!n)
		; /* node_get's answer */
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

/* The filesystem ---------------------------------------------------------- */

void fs_statfs(fuse_req_t req, fuse_ino_t ino)
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
