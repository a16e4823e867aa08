/*
 * floorfs.c - the FUSE floor for `make bench`: a deliberately minimal
 * in-memory filesystem on the libfuse3 low-level API.
 *
 * It is what any FUSE filesystem pays for the round trip and nothing
 * more: one table of entries (parent inode, name) -> node under one
 * mutex, content in a malloc'd buffer written in place, no admission, no
 * staging, no identity checks, no events.  Like statefs it runs the
 * multi-threaded session loop and gives the kernel zero entry and
 * attribute timeouts unless -o timeout=SECONDS says otherwise, so every
 * path walk and stat reaches the daemon.  Not a product: no permissions
 * beyond the kernel's, no xattrs, no hard links.
 *
 *   floorfs [-o timeout=S] [FUSE options] MOUNTPOINT   (foreground)
 */
#define FUSE_USE_VERSION 312
#define _GNU_SOURCE
#include <errno.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#include <uthash.h>
#include <utlist.h>

struct node {
	fuse_ino_t ino;
	mode_t mode;
	uint64_t nlookup;
	bool unlinked;
	char *data;
	size_t size, cap;
	struct timespec mtime, ctime;
	struct entry *children;  /* directories: their entries, in order */
	size_t nchildren;
	UT_hash_handle hh;       /* nodes by ino */
};

struct ekey {
	fuse_ino_t parent;
	char name[256];
};

struct entry {
	struct ekey key;          /* the one table */
	struct node *node;
	struct entry *prev, *next; /* the parent's list, for readdir */
	UT_hash_handle hh;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct node *nodes;
static struct entry *table;
static fuse_ino_t next_ino = 2;
static double timeout;

static struct node *node_new(mode_t mode)
{
	struct node *n = calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	n->ino = next_ino++;
	n->mode = mode;
	clock_gettime(CLOCK_REALTIME, &n->mtime);
	n->ctime = n->mtime;
	HASH_ADD(hh, nodes, ino, sizeof(n->ino), n);
	return n;
}

static struct node *node_get(fuse_ino_t ino)
{
	struct node *n;

	HASH_FIND(hh, nodes, &ino, sizeof(ino), n);
	return n;
}

static void node_maybe_free(struct node *n)
{
	if (n->unlinked && n->nlookup == 0 && n->ino != FUSE_ROOT_ID) {
		HASH_DEL(nodes, n);
		free(n->data);
		free(n);
	}
}

static struct entry *entry_find(fuse_ino_t parent, const char *name)
{
	struct ekey k = { .parent = parent };
	struct entry *e;

	if (strlen(name) >= sizeof(k.name))
		return NULL;
	strcpy(k.name, name);
	HASH_FIND(hh, table, &k, sizeof(k), e);
	return e;
}

static int entry_add(struct node *dir, const char *name, struct node *n)
{
	struct entry *e = calloc(1, sizeof(*e));

	if (!e)
		return ENOMEM;
	if (strlen(name) >= sizeof(e->key.name)) {
		free(e);
		return ENAMETOOLONG;
	}
	e->key.parent = dir->ino;
	strcpy(e->key.name, name);
	e->node = n;
	HASH_ADD(hh, table, key, sizeof(e->key), e);
	DL_APPEND(dir->children, e);
	dir->nchildren++;
	return 0;
}

static void entry_del(struct node *dir, struct entry *e)
{
	HASH_DEL(table, e);
	DL_DELETE(dir->children, e);
	dir->nchildren--;
	free(e);
}

/*
 * Make @n's content at least @len bytes, zero-filled past its size
 * (mu held); the size itself is the caller's to set.  0 or ENOMEM.
 */
static int node_extend(struct node *n, size_t len)
{
	if (len > n->cap) {
		char *d = realloc(n->data, len);

		if (!d)
			return ENOMEM;
		n->data = d;
		n->cap = len;
	}
	if (len > n->size)
		memset(n->data + n->size, 0, len - n->size);
	return 0;
}

static void fill_attr(const struct node *n, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = n->ino;
	st->st_mode = n->mode;
	st->st_nlink = S_ISDIR(n->mode) ? 2 : 1;
	st->st_size = (off_t)n->size;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_mtim = n->mtime;
	st->st_ctim = n->ctime;
	st->st_atim = n->mtime;
}

/*
 * Reply with an entry for @n (mu held, released here): the kernel now
 * knows it once more.  With @fi, the entry of a create and its open file.
 */
static void reply_entry(fuse_req_t req, struct node *n, struct fuse_file_info *fi)
{
	struct fuse_entry_param e = { .ino = n->ino,
				      .attr_timeout = timeout,
				      .entry_timeout = timeout };

	fill_attr(n, &e.attr);
	n->nlookup++;
	pthread_mutex_unlock(&mu);
	if (fi)
		fuse_reply_create(req, &e, fi);
	else
		fuse_reply_entry(req, &e);
}

static void fl_init(void *ud, struct fuse_conn_info *conn)
{
	struct node *root;

	(void)ud;
	conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;
	pthread_mutex_lock(&mu);
	next_ino = FUSE_ROOT_ID;
	root = node_new(S_IFDIR | 0777);
	root->nlookup = 1;
	pthread_mutex_unlock(&mu);
}

static void fl_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct entry *e;

	pthread_mutex_lock(&mu);
	e = entry_find(parent, name);
	if (!e) {
		pthread_mutex_unlock(&mu);
		fuse_reply_err(req, ENOENT);
		return;
	}
	reply_entry(req, e->node, NULL);
}

static void fl_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct node *n;

	pthread_mutex_lock(&mu);
	n = node_get(ino);
	if (n) {
		n->nlookup -= nlookup < n->nlookup ? nlookup : n->nlookup;
		node_maybe_free(n);
	}
	pthread_mutex_unlock(&mu);
	fuse_reply_none(req);
}

static void fl_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct node *n;
	struct stat st;

	(void)fi;
	pthread_mutex_lock(&mu);
	n = node_get(ino);
	if (n)
		fill_attr(n, &st);
	pthread_mutex_unlock(&mu);
	if (n)
		fuse_reply_attr(req, &st, timeout);
	else
		fuse_reply_err(req, ENOENT);
}

static void fl_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct node *n;
	struct stat st;
	int err = 0;

	(void)fi;
	pthread_mutex_lock(&mu);
	n = node_get(ino);
	if (!n) {
		err = ENOENT;
	} else {
		if (to_set & FUSE_SET_ATTR_MODE)
			n->mode = (n->mode & S_IFMT) | (attr->st_mode & 07777);
		if (to_set & FUSE_SET_ATTR_SIZE) {
			err = node_extend(n, (size_t)attr->st_size);
			if (!err)
				n->size = (size_t)attr->st_size;
		}
		clock_gettime(CLOCK_REALTIME, &n->ctime);
		if (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW))
			n->mtime = n->ctime;
		fill_attr(n, &st);
	}
	pthread_mutex_unlock(&mu);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_attr(req, &st, timeout);
}

/* Make a node of @mode called @name in @parent; replies. */
static void make(fuse_req_t req, fuse_ino_t parent, const char *name,
		 mode_t mode, struct fuse_file_info *fi)
{
	struct node *dir, *n;
	int err = 0;

	pthread_mutex_lock(&mu);
	dir = node_get(parent);
	if (!dir)
		err = ENOENT;
	else if (entry_find(parent, name))
		err = EEXIST;
	else if (!(n = node_new(mode)))
		err = ENOMEM;
	else if ((err = entry_add(dir, name, n)) != 0) {
		n->unlinked = true;
		node_maybe_free(n);
	}
	if (err) {
		pthread_mutex_unlock(&mu);
		fuse_reply_err(req, err);
		return;
	}
	reply_entry(req, n, fi);
}

static void fl_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	make(req, parent, name, S_IFDIR | (mode & 07777), NULL);
}

static void fl_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	make(req, parent, name, S_IFREG | (mode & 07777), fi);
}

/* Remove @name from @parent: a directory only when empty (@dir). */
static void drop(fuse_req_t req, fuse_ino_t parent, const char *name, bool dir)
{
	struct node *d;
	struct entry *e;
	int err = 0;

	pthread_mutex_lock(&mu);
	d = node_get(parent);
	e = d ? entry_find(parent, name) : NULL;
	if (!e)
		err = ENOENT;
	else if (dir && !S_ISDIR(e->node->mode))
		err = ENOTDIR;
	else if (!dir && S_ISDIR(e->node->mode))
		err = EISDIR;
	else if (dir && e->node->nchildren)
		err = ENOTEMPTY;
	if (!err) {
		struct node *n = e->node;

		entry_del(d, e);
		n->unlinked = true;
		node_maybe_free(n);
	}
	pthread_mutex_unlock(&mu);
	fuse_reply_err(req, err);
}

static void fl_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	drop(req, parent, name, false);
}

static void fl_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	drop(req, parent, name, true);
}

static void fl_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	struct node *from, *to, *n;
	struct entry *e, *old;
	int err = 0;

	if (flags) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	pthread_mutex_lock(&mu);
	from = node_get(parent);
	to = node_get(newparent);
	e = from ? entry_find(parent, name) : NULL;
	if (!e || !to) {
		err = ENOENT;
	} else {
		n = e->node;
		old = entry_find(newparent, newname);
		if (old && old->node == n)
			goto out;
		if (old && S_ISDIR(old->node->mode) && old->node->nchildren) {
			err = ENOTEMPTY;
			goto out;
		}
		err = entry_add(to, newname, n) ? ENOMEM : 0;
		if (err)
			goto out;
		if (old) {
			/* entry_add appended a twin key: drop the older one. */
			struct node *gone = old->node;

			entry_del(to, old);
			gone->unlinked = true;
			node_maybe_free(gone);
		}
		entry_del(from, e);
	}
out:
	pthread_mutex_unlock(&mu);
	fuse_reply_err(req, err);
}

static void fl_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	if (fi->flags & O_TRUNC) {
		struct node *n;

		pthread_mutex_lock(&mu);
		n = node_get(ino);
		if (n)
			n->size = 0;
		pthread_mutex_unlock(&mu);
	}
	fuse_reply_open(req, fi);
}

static void fl_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct node *n;
	char *buf = NULL;
	size_t len = 0;

	(void)fi;
	pthread_mutex_lock(&mu);
	n = node_get(ino);
	if (n && (size_t)off < n->size) {
		len = n->size - (size_t)off < size ? n->size - (size_t)off : size;
		buf = malloc(len);
		if (buf)
			memcpy(buf, n->data + off, len);
		else
			len = 0;
	}
	pthread_mutex_unlock(&mu);
	fuse_reply_buf(req, buf, len);
	free(buf);
}

static void fl_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	struct node *n;
	size_t end = (size_t)off + size;
	int err = 0;

	(void)fi;
	pthread_mutex_lock(&mu);
	n = node_get(ino);
	/* Zeros from the old end up to @off, then the bytes. */
	err = n ? node_extend(n, end) : ENOENT;
	if (!err) {
		memcpy(n->data + off, buf, size);
		if (end > n->size)
			n->size = end;
		clock_gettime(CLOCK_REALTIME, &n->mtime);
		n->ctime = n->mtime;
	}
	pthread_mutex_unlock(&mu);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_write(req, size);
}

static void fl_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct node *d;
	struct entry *e;
	char *buf = malloc(size);
	size_t used = 0;
	off_t i = 0;

	(void)fi;
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&mu);
	d = node_get(ino);
	/* Offsets are positions in the entry list: a plain floor, not
	 * stable under concurrent change. */
	for (e = d ? d->children : NULL; e; e = e->next, i++) {
		struct stat st = { .st_ino = e->node->ino,
				   .st_mode = e->node->mode };
		size_t need;

		if (i < off)
			continue;
		need = fuse_add_direntry(req, buf + used, size - used,
					 e->key.name, &st, i + 1);
		if (need > size - used)
			break;
		used += need;
	}
	pthread_mutex_unlock(&mu);
	fuse_reply_buf(req, buf, used);
	free(buf);
}

/* Room for any benchmark: tools like fs_mark check free space first. */
static void fl_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv = { .f_bsize = 4096, .f_frsize = 4096,
			      .f_blocks = 1ull << 32, .f_bfree = 1ull << 32,
			      .f_bavail = 1ull << 32, .f_files = 1ull << 32,
			      .f_ffree = 1ull << 32, .f_favail = 1ull << 32,
			      .f_namemax = 255 };

	(void)ino;
	fuse_reply_statfs(req, &sv);
}

static const struct fuse_lowlevel_ops ops = {
	.statfs = fl_statfs,
	.init = fl_init,
	.lookup = fl_lookup,
	.forget = fl_forget,
	.getattr = fl_getattr,
	.setattr = fl_setattr,
	.mkdir = fl_mkdir,
	.create = fl_create,
	.unlink = fl_unlink,
	.rmdir = fl_rmdir,
	.rename = fl_rename,
	.open = fl_open,
	.read = fl_read,
	.write = fl_write,
	.readdir = fl_readdir,
};

static const struct fuse_opt opts[] = {
	{ "timeout=%lf", 0, 0 },
	FUSE_OPT_END
};

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts co;
	struct fuse_loop_config *loop;
	struct fuse_session *se;
	int rc = 1;

	if (fuse_opt_parse(&args, &timeout, opts, NULL) != 0 ||
	    fuse_parse_cmdline(&args, &co) != 0 || !co.mountpoint) {
		fprintf(stderr, "usage: floorfs [-o timeout=S] MOUNTPOINT\n");
		return 1;
	}
	se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	if (se && fuse_session_mount(se, co.mountpoint) == 0) {
		loop = fuse_loop_cfg_create();
		if (loop) {
			fuse_loop_cfg_set_clone_fd(loop, co.clone_fd);
			rc = fuse_session_loop_mt(se, loop) ? 1 : 0;
			fuse_loop_cfg_destroy(loop);
		}
		fuse_session_unmount(se);
	}
	if (se)
		fuse_session_destroy(se);
	free(co.mountpoint);
	fuse_opt_free_args(&args);
	return rc;
}
