/*
 * echo.c - the echo thread: what the kernel did not see, done again
 * through the mount so that inotify watchers see it.
 *
 * The echo thread follows the store's internal event lines: the
 * removals the store made by itself (an expiry, a .depart, a drain's
 * clear) and, on a shared store, every transition another mount made.
 * It replays each through the mount: the kernel then raises the inotify
 * events a watcher of the directory expects (FUSE notifications raise
 * none in the parent directory on this kernel) and updates its cache.
 * The echo's requests are recognised by the thread id and answered from
 * the echo record without a store transition (fs/echo_answer.c), so an
 * echo never changes the store.  What each line becomes:
 *
 *   expire, depart, drain, cleanup,   unlink or rmdir: DELETE,
 *   another mount's unlink, leave     DELETE,ISDIR
 *   another mount's join              mkdir: CREATE,ISDIR
 *   its create                        open(O_CREAT|O_EXCL|O_RDONLY),
 *                                     close: CREATE, OPEN, CLOSE_NOWRITE
 *   its publication (write line)      open(O_WRONLY), one write that is
 *                                     answered and dropped, close:
 *                                     OPEN, MODIFY, CLOSE_WRITE
 *   its link                          link: CREATE
 *   its rename, exchange              rename(2), renameat2(EXCHANGE):
 *                                     MOVED_FROM and MOVED_TO
 *   its chmod, chown, times, lease    chmod(2) to the mode it has: ATTRIB
 *   (no line: the store's touch hook)
 *
 * A removal removes a name only while the kernel holds that inode
 * number under it and no live node owns the name (judged under the
 * kernel's lock of the directory, which every new incarnation of a name
 * is made under).  So a watcher sees the old node's DELETE before a new
 * one's CREATE, or, when a rejoin or re-create got there first, no
 * DELETE for the old one at all; never a DELETE after the new CREATE.
 * An appearing echo shows the node the line made only while it still
 * owns the name (else a later line speaks for the name), and only when
 * the kernel does not show it already (a process on this mount looked
 * it up first: it has seen the node, the watcher gets no CREATE).
 *
 * The system calls on the mount are made by the echo's own process
 * (fs/echo_call.c), never by a thread of the daemon: a daemon killed
 * while one of its threads waited on its own mount could never finish
 * dying, and would take the mount with it.
 *
 * This file is the thread: it arms the echo record (fs->echo_*), makes
 * the call, and disarms it; it also keeps the nodes the store's touch
 * hook queues for an ATTRIB (fs_echo_touched).  The answers to the
 * calls, which read the record, are fs/echo_answer.c's.
 *
 * Locks: fs->echo_lock, a leaf, guards the echo record (one echo at a
 * time); fs->watch_lock guards echo_seq, how far the thread has got, and
 * the touched nodes.  The echo's calls are made holding neither.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/fs.h"

void fs_echo_touched(void *arg, struct store_node *n)
{
	struct fs *fs = arg;
	unsigned i;

	pthread_mutex_lock(&fs->watch_lock);
	for (i = 0; i < fs->echo_ntouched && fs->echo_touched[i] != n; i++)
		;
	if (!fs->stopping && i == fs->echo_ntouched &&
	    i < FS_ECHO_TOUCHED) {
		store_node_ref(n);
		fs->echo_touched[fs->echo_ntouched++] = n;
		pthread_cond_signal(&fs->echo_cond);
	}
	pthread_mutex_unlock(&fs->watch_lock);
}

void fs_echo_untouch(struct fs *fs)
{
	struct store_node *list[FS_ECHO_TOUCHED];
	unsigned n;

	pthread_mutex_lock(&fs->watch_lock);
	n = fs->echo_ntouched;
	memcpy(list, fs->echo_touched, n * sizeof(*list));
	fs->echo_ntouched = 0;
	pthread_mutex_unlock(&fs->watch_lock);
	for (unsigned i = 0; i < n; i++)
		store_node_unref(fs->store, list[i]);
}

/*
 * The live node at the first @depth of @names, with a reference, and its
 * directory's inode number in @dir_ino; NULL when it is not there.
 */
static struct store_node *find_live(struct fs *fs, const char *const *names,
				    int depth, uint64_t *dir_ino)
{
	struct store_node *d = NULL, *n = NULL;

	*dir_ino = STORE_ROOT_INO;
	for (int i = 0; i < depth; i++) {
		if (d)
			store_node_unref(fs->store, d);
		d = n;
		n = NULL;
		if (!*names[i] || strlen(names[i]) > NAME_MAX ||
		    store_lookup(fs->store, d ? d : store_root(fs->store),
				 names[i], &n) != 0)
			break;
	}
	if (d && n)
		*dir_ino = store_node_ino(d);
	if (d)
		store_node_unref(fs->store, d);
	return n;
}

static void path_of(char *buf, size_t len, const char *const *names, int depth)
{
	if (depth == 1)
		snprintf(buf, len, "%s", names[0]);
	else if (depth == 2)
		snprintf(buf, len, "%s/%s", names[0], names[1]);
	else
		snprintf(buf, len, "%s/%s/%s", names[0], names[1], names[2]);
}

/* Replay one internal removal through the mount. */
static void echo_remove(struct fs *fs, const struct store_event *ev)
{
	int depth = ev->kind == STORE_TENANT ? 1 : ev->kind == STORE_PARENT ? 2 : 3;
	bool dir = depth < 3;
	const char *names[3] = { ev->tenant, ev->parent, ev->child };
	const char *name = names[depth - 1];
	struct fs_echo_req rq = { .op = dir ? FS_ECALL_RMDIR : FS_ECALL_UNLINK,
				  .ino = ev->ino };
	struct store_node *live;
	uint64_t unused;

	if (!ev->internal || ev->ino == 0 || !*name || strlen(name) > NAME_MAX)
		return;
	live = find_live(fs, names, depth, &unused);
	if (live) {
		store_node_unref(fs->store, live);
		return; /* a newer incarnation owns the name: no echo */
	}
	path_of(rq.path, sizeof(rq.path), names, depth);
	pthread_mutex_lock(&fs->echo_lock);
	snprintf(fs->echo_name, sizeof(fs->echo_name), "%s", name);
	fs->echo_kind = FS_ECHO_REMOVE;
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
	(void)fs_echo_proc_call(fs, &rq);
	pthread_mutex_lock(&fs->echo_lock);
	fs->echo_armed = false;
	pthread_mutex_unlock(&fs->echo_lock);
}

/* The kind of echo another mount's line @op asks for; false: none. */
static bool appear_kind(enum store_op op, int depth, enum fs_echo_kind *kind)
{
	switch (op) {
	case STORE_OP_JOIN:
		*kind = FS_ECHO_APPEAR;
		return depth < 3;
	case STORE_OP_CREATE:
	case STORE_OP_LINK:
		*kind = FS_ECHO_APPEAR;
		return depth == 3;
	case STORE_OP_RENAME:
	case STORE_OP_EXCHANGE:
		*kind = FS_ECHO_MOVE;
		return depth == 3;
	case STORE_OP_WRITE:
		*kind = FS_ECHO_PUBLISH;
		return depth == 3;
	default:
		return false;
	}
}

/* The call that replays the armed echo of line @ev, through the echo's
 * process (fs/echo_call.c).  A name the kernel shows already cannot
 * appear again; one it does not show is looked up, answered absent
 * (fs_echo_lookup_first), and made. */
static void appear_call(struct fs *fs, const struct store_event *ev,
			const char *path, const char *from)
{
	struct fs_echo_req rq = { 0 };

	switch (ev->op) {
	case STORE_OP_RENAME:
		rq.op = FS_ECALL_RENAME;
		break;
	case STORE_OP_EXCHANGE:
		rq.op = FS_ECALL_EXCHANGE;
		break;
	case STORE_OP_WRITE:
		rq.op = FS_ECALL_PUBLISH;
		break;
	case STORE_OP_JOIN:
		rq.op = FS_ECALL_MKDIR;
		break;
	case STORE_OP_CREATE:
		rq.op = FS_ECALL_CREATE;
		break;
	default:
		rq.op = FS_ECALL_LINK;
		break;
	}
	snprintf(rq.path, sizeof(rq.path), "%s", path);
	snprintf(rq.from, sizeof(rq.from), "%s", from);
	(void)fs_echo_proc_call(fs, &rq);
}

/*
 * Replay another mount's join, create, link, rename, exchange or
 * publication through the mount, while the node the line made still
 * owns its name (else a later line speaks for the name).
 */
static void echo_appear(struct fs *fs, const struct store_event *ev)
{
	int depth = ev->kind == STORE_TENANT ? 1 : ev->kind == STORE_PARENT ? 2 : 3;
	const char *names[3] = { ev->tenant, ev->parent, ev->child };
	const char *from[3] = { ev->tenant, ev->from_parent, ev->from_child };
	bool two = ev->op == STORE_OP_LINK || ev->op == STORE_OP_RENAME ||
		   ev->op == STORE_OP_EXCHANGE;
	struct store_node *n, *other = NULL, *fp = NULL;
	char path[3 * (NAME_MAX + 1)], fpath[3 * (NAME_MAX + 1)] = "";
	enum fs_echo_kind kind;
	uint64_t dir_ino, from_dir_ino = 0, unused;

	if (!appear_kind(ev->op, depth, &kind))
		return;
	n = find_live(fs, names, depth, &dir_ino);
	if (!n)
		return;
	if (store_node_ino(n) != ev->ino)
		goto out;
	if (two) {
		if (!*ev->from_parent || !*ev->from_child ||
		    strlen(ev->from_child) > NAME_MAX)
			goto out;
		fp = find_live(fs, from, 2, &unused);
		if (!fp)
			goto out; /* the source's parent is gone too */
		from_dir_ino = store_node_ino(fp);
		store_node_unref(fs->store, fp);
		if (ev->op == STORE_OP_EXCHANGE) {
			other = find_live(fs, from, 3, &unused);
			if (!other)
				goto out;
		}
		path_of(fpath, sizeof(fpath), from, 3);
	}
	path_of(path, sizeof(path), names, depth);
	pthread_mutex_lock(&fs->echo_lock);
	fs->echo_kind = kind;
	snprintf(fs->echo_name, sizeof(fs->echo_name), "%s", names[depth - 1]);
	snprintf(fs->echo_from, sizeof(fs->echo_from), "%s",
		 two ? ev->from_child : "");
	fs->echo_tenant[0] = '\0';
	fs->echo_ino = ev->ino;
	fs->echo_dir_ino = dir_ino;
	fs->echo_from_dir_ino = from_dir_ino;
	fs->echo_dir = depth < 3;
	fs->echo_node = n;
	fs->echo_other = other;
	fs->echo_armed = true;
	pthread_mutex_unlock(&fs->echo_lock);
	appear_call(fs, ev, path, fpath);
	pthread_mutex_lock(&fs->echo_lock);
	fs->echo_armed = false;
	fs->echo_node = fs->echo_other = NULL;
	fs->echo_from_dir_ino = 0;
	fs->echo_from[0] = '\0';
	pthread_mutex_unlock(&fs->echo_lock);
out:
	if (other)
		store_node_unref(fs->store, other);
	store_node_unref(fs->store, n);
}

struct first_name {
	uint64_t dir;
	char name[NAME_MAX + 1];
	bool found;
};

static void first_name(void *arg, uint64_t dir, const char *name)
{
	struct first_name *fn = arg;

	if (fn->found || strlen(name) > NAME_MAX)
		return;
	fn->dir = dir;
	snprintf(fn->name, sizeof(fn->name), "%s", name);
	fn->found = true;
}

/*
 * A path of @n from the mount's root (for a child, one of its names),
 * through directories the kernel knows: a watcher's directory is one.
 * False when there is none.
 */
static bool node_path(struct fs *fs, struct store_node *n, char *buf,
		      size_t len)
{
	char names[3][NAME_MAX + 1];
	struct store_node *cur = n;
	int k = 0;

	store_node_ref(cur);
	for (;;) {
		struct first_name fn = { 0 };

		store_node_names(fs->store, cur, first_name, &fn);
		store_node_unref(fs->store, cur);
		if (!fn.found || k == 3)
			return false;
		memcpy(names[k++], fn.name, sizeof(fn.name));
		if (fn.dir == STORE_ROOT_INO)
			break;
		cur = fs_inode_get(&fs->inodes, fs->store, fn.dir);
		if (!cur)
			return false;
	}
	if (k == 1)
		snprintf(buf, len, "%s", names[0]);
	else if (k == 2)
		snprintf(buf, len, "%s/%s", names[1], names[0]);
	else
		snprintf(buf, len, "%s/%s/%s", names[2], names[1], names[0]);
	return true;
}

/*
 * Another mount changed @n's attributes: chmod it, through the mount,
 * to the mode it has (answered by fs_echo_setattr): the kernel raises
 * ATTRIB and takes the attributes the store has.
 */
static void echo_attrib(struct fs *fs, struct store_node *n)
{
	struct fs_echo_req rq = { .op = FS_ECALL_CHMOD };
	struct stat st;

	if (fs_node_stat(fs, n, &st) != 0 ||
	    !node_path(fs, n, rq.path, sizeof(rq.path)))
		return;
	/* Only a node the kernel shows under that name. */
	rq.ino = store_node_ino(n);
	rq.mode = st.st_mode & 07777;
	pthread_mutex_lock(&fs->echo_lock);
	fs->echo_kind = FS_ECHO_ATTRIB;
	fs->echo_ino = store_node_ino(n);
	fs->echo_node = n;
	fs->echo_armed = true;
	pthread_mutex_unlock(&fs->echo_lock);
	(void)fs_echo_proc_call(fs, &rq);
	pthread_mutex_lock(&fs->echo_lock);
	fs->echo_armed = false;
	fs->echo_node = NULL;
	pthread_mutex_unlock(&fs->echo_lock);
}

/* Replay one internal line through the mount. */
static void echo_one(struct fs *fs, const struct store_event *ev)
{
	switch (ev->op) {
	case STORE_OP_EXPIRE:
	case STORE_OP_DEPART:
	case STORE_OP_DRAIN:
	case STORE_OP_CLEANUP:
	case STORE_OP_UNLINK:
	case STORE_OP_LEAVE:
		echo_remove(fs, ev);
		break;
	default:
		echo_appear(fs, ev);
		break;
	}
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

	pthread_setname_np(pthread_self(), "statefs-echo");
	/* Its system calls on the mount are its process's, which dies
	 * with this thread.  Without one nothing is echoed (the calls fail). */
	if (fs_echo_proc_start(fs) != 0)
		fprintf(stderr, "statefs: cannot start the echo's process: "
			"inotify will not see the store's own removals\n");
	for (;;) {
		struct store_event ev;
		int rc;

		/* Kicked by the hook after an internal transition, by a wait
		 * for it (fs_inval_caught_up) and the stop: no timeout needed.
		 * Looking moves the reader past other lines: progress to
		 * report. */
		pthread_mutex_lock(&fs->watch_lock);
		for (;;) {
			bool ready = backoff ? fs_deadline_passed(&retry) :
				     store_events_pending(fs->store, r) ||
				     store_events_position(r) != fs->echo_seq ||
				     fs->echo_ntouched;

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
		/* The lines first: an ATTRIB after the CREATE it follows. */
		if (fs->echo_ntouched && !store_events_pending(fs->store, r)) {
			struct store_node *list[FS_ECHO_TOUCHED];
			unsigned n = fs->echo_ntouched;

			memcpy(list, fs->echo_touched, n * sizeof(*list));
			fs->echo_ntouched = 0;
			pthread_mutex_unlock(&fs->watch_lock);
			for (unsigned i = 0; i < n; i++) {
				echo_attrib(fs, list[i]);
				store_node_unref(fs->store, list[i]);
			}
			continue;
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
		if (ev.internal && ev.ino)
			echo_one(fs, &ev);
		store_event_free(&ev);
		echo_passed(fs, store_events_position(r));
	}
	return NULL;
}
