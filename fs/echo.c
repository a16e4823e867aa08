/*
 * echo.c - the echo thread: what the store removed by itself, removed
 * again through the mount so that inotify watchers see it.
 *
 * The echo thread follows the store's event log and, for each removal
 * the store made by itself (an expiry, a .depart, a drain's clear),
 * removes the same name through the mount.  The kernel then raises the
 * inotify events a watcher of the directory expects (FUSE notifications
 * raise none in the parent directory on this kernel) and drops its
 * cached entry.  The echo's requests are recognised by the thread id and
 * answered from the echo record without touching the store, so an echo
 * can never remove anything from the store.  Nor from the kernel's view,
 * unless it is the incarnation that went: an echo removes a name only
 * while the kernel holds that inode number under it and no live node
 * owns the name (judged under the kernel's lock of the directory, which
 * every new incarnation of a name is made under).  So a watcher sees the
 * old node's DELETE before a new one's CREATE, or, when a rejoin or
 * re-create got there first, no DELETE for the old one at all; never a
 * DELETE after the new CREATE.
 *
 * Locks: fs->echo_lock, a leaf, guards the echo record (one removal at a
 * time); fs->watch_lock guards echo_seq, how far the thread has got.
 * The thread's own syscalls on the mount are made holding neither.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "fs/fs.h"

#define FUSE_SUPER_MAGIC 0x65735546

static bool from_echo(fuse_req_t req, struct fs *fs)
{
	return fuse_req_ctx(req)->pid == atomic_load(&fs->echo_tid);
}

bool fs_echo_lookup(fuse_req_t req, struct fs *fs, fuse_ino_t dir,
		    const char *name)
{
	struct fuse_entry_param e = { 0 };
	bool mine;

	if (!from_echo(req, fs))
		return false;
	pthread_mutex_lock(&fs->echo_lock);
	mine = fs->echo_armed && strcmp(fs->echo_name, name) == 0 &&
	       (!fs->echo_dir_ino || fs->echo_dir_ino == dir);
	if (mine) {
		/* The node is gone from the store: the kernel gets an entry
		 * for the old inode number only so it can remove it.  It
		 * never reaches the store: any use answers ESTALE. */
		e.ino = fs->echo_ino;
		e.attr.st_mode = fs->echo_dir ? S_IFDIR | 0755 : S_IFREG | 0644;
	} else if (fs->echo_armed && dir == STORE_ROOT_INO &&
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
	mine = fs->echo_armed && fs->echo_dir == isdir &&
	       strcmp(fs->echo_name, name) == 0 &&
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

/* Does a live node own the name @ev removed (depth @depth) now? */
static bool name_live(struct fs *fs, const struct store_event *ev, int depth)
{
	struct store_node *t = NULL, *p = NULL, *c = NULL;
	bool live;

	live = store_lookup(fs->store, store_root(fs->store), ev->tenant, &t) == 0 &&
	       (depth < 2 || store_lookup(fs->store, t, ev->parent, &p) == 0) &&
	       (depth < 3 || store_lookup(fs->store, p, ev->child, &c) == 0);
	if (c)
		store_node_unref(fs->store, c);
	if (p)
		store_node_unref(fs->store, p);
	if (t)
		store_node_unref(fs->store, t);
	return live;
}

/* Replay one internal removal through the mount. */
static void echo_one(struct fs *fs, int rootfd, const struct store_event *ev)
{
	int depth = ev->kind == STORE_TENANT ? 1 : ev->kind == STORE_PARENT ? 2 : 3;
	bool dir = depth < 3;
	const char *name = depth == 1 ? ev->tenant : depth == 2 ? ev->parent : ev->child;
	char path[3 * (NAME_MAX + 1)];
	struct statx stx;

	if (!ev->internal || ev->ino == 0 || !*name || strlen(name) > NAME_MAX)
		return;
	if (ev->op != STORE_OP_EXPIRE && ev->op != STORE_OP_DEPART &&
	    ev->op != STORE_OP_DRAIN && ev->op != STORE_OP_CLEANUP)
		return;
	if (name_live(fs, ev, depth))
		return; /* a newer incarnation owns the name: no echo */
	if (depth == 1)
		snprintf(path, sizeof(path), "%s", ev->tenant);
	else if (depth == 2)
		snprintf(path, sizeof(path), "%s/%s", ev->tenant, ev->parent);
	else
		snprintf(path, sizeof(path), "%s/%s/%s", ev->tenant, ev->parent,
			 ev->child);
	pthread_mutex_lock(&fs->echo_lock);
	snprintf(fs->echo_name, sizeof(fs->echo_name), "%s", name);
	snprintf(fs->echo_tenant, sizeof(fs->echo_tenant), "%s",
		 depth > 1 ? ev->tenant : "");
	fs->echo_tenant_ino = ev->tenant_ino;
	fs->echo_ino = ev->ino;
	fs->echo_dir_ino = depth == 1 ? STORE_ROOT_INO :
			   depth == 2 ? ev->tenant_ino : 0;
	fs->echo_dir = dir;
	fs->echo_armed = true;
	pthread_mutex_unlock(&fs->echo_lock);
	/*
	 * Only the incarnation that went is removed: the kernel may hold
	 * another under the name by now (a rejoin that raced this echo), and
	 * removing that would take a live directory from the kernel's view
	 * (it marks a removed directory dead for good) and tell watchers it
	 * went after they saw it come.  The inode the kernel holds is read
	 * without asking the daemon (AT_STATX_DONT_SYNC); a name it does not
	 * hold is looked up and answered from the echo record.  What changes
	 * between this and the removal, fs_echo_remove() judges.  Failure is
	 * fine: the directory may be gone too (a cascade).
	 */
	if (statx(rootfd, path, AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC,
		  STATX_INO, &stx) == 0 && stx.stx_ino == ev->ino)
		(void)unlinkat(rootfd, path, dir ? AT_REMOVEDIR : 0);
	pthread_mutex_lock(&fs->echo_lock);
	fs->echo_armed = false;
	pthread_mutex_unlock(&fs->echo_lock);
}

/*
 * Open the root of this mount, for one echo.  No descriptor is kept
 * between echoes: an open one would make `fusermount3 -u` fail with
 * EBUSY.  After an unmount the path names the directory underneath, so
 * the root must be a FUSE root (inode 1) on the device this thread saw
 * first.
 */
static int mount_root(struct fs *fs, dev_t *dev)
{
	struct statfs sf;
	struct stat st;
	int fd = open(fs->mountpoint, O_PATH | O_DIRECTORY | O_NOFOLLOW);

	if (fd < 0)
		return -1;
	if (fstatfs(fd, &sf) != 0 || sf.f_type != FUSE_SUPER_MAGIC ||
	    fstat(fd, &st) != 0 || st.st_ino != STORE_ROOT_INO ||
	    (*dev && st.st_dev != *dev)) {
		close(fd);
		return -1;
	}
	*dev = st.st_dev;
	return fd;
}

/* The echo thread has replayed every event before @seq. */
static void echo_passed(struct fs *fs, uint64_t seq)
{
	pthread_mutex_lock(&fs->watch_lock);
	fs->echo_seq = seq;
	pthread_cond_broadcast(&fs->inval_progress);
	pthread_mutex_unlock(&fs->watch_lock);
}

/*
 * Out of memory (store_events_next cannot copy an event's names), the
 * echo thread backs off as the inval thread does and tries the same event
 * again: an echo is delayed, never spun on.
 */
void *fs_echo_main(void *arg)
{
	struct fs *fs = arg;
	/* Internal lines only, as the inval thread reads them. */
	struct store_event_reader *r = fs->echo_reader;
	struct timespec retry = { 0 };
	unsigned backoff = 0;   /* ms; 0: memory is fine */
	dev_t dev = 0;

	pthread_setname_np(pthread_self(), "statefs-echo");
	atomic_store(&fs->echo_tid, gettid());
	for (;;) {
		struct store_event ev;
		int rc;

		/* Kicked by the hook after an internal transition, by a wait
		 * for it (fs_watch_caught_up) and the stop: no timeout needed.
		 * Looking moves the reader past other lines: progress to
		 * report. */
		pthread_mutex_lock(&fs->watch_lock);
		for (;;) {
			bool ready = backoff ? fs_deadline_passed(&retry) :
				     store_events_pending(fs->store, r) ||
				     store_events_position(r) != fs->echo_seq;

			if (fs->stopping || ready)
				break;
			if (backoff)
				pthread_cond_timedwait(&fs->echo_cond,
						       &fs->watch_lock, &retry);
			else
				pthread_cond_wait(&fs->echo_cond,
						  &fs->watch_lock);
		}
		if (fs->stopping) {
			pthread_mutex_unlock(&fs->watch_lock);
			break;
		}
		pthread_mutex_unlock(&fs->watch_lock);
		rc = store_events_next(fs->store, r, &ev);
		if (rc == -ENOMEM) {
			backoff = fs_backoff_next(backoff);
			retry = fs_deadline_in(backoff);
			continue;
		}
		backoff = 0;
		if (rc != 1) {
			echo_passed(fs, store_events_position(r));
			continue;
		}
		if (ev.internal && ev.ino) {
			int rootfd = mount_root(fs, &dev);

			if (rootfd >= 0) {
				echo_one(fs, rootfd, &ev);
				close(rootfd);
			}
		}
		store_event_free(&ev);
		echo_passed(fs, store_events_position(r));
	}
	return NULL;
}
