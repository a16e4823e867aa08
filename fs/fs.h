/*
 * fs.h - the libfuse3 low-level adapter of statefs: its shared state and
 * what its files call of each other, file by file.
 *
 * fs/ talks to the store only through store/store.h (the authority's
 * interface: opaque handles, readers and stages, and the plain value
 * structs it fills) and to the names and formats only through
 * layout/layout.h.  What the kernel holds is fs/'s own bookkeeping: the
 * inode table (fs/inode.c) and, per request, the counted handles it
 * gives out.
 *
 *   ops.c      the operations table (fs_ops) and the session's init
 *   reply.c    what every handler answers with: stat, entries, the
 *              special files a directory has, a caller's credentials
 *   entry.c    lookup, forget, mkdir, mknod, create, link, rename,
 *              unlink, rmdir
 *   attr.c     getattr, setattr, the extended attributes, statfs
 *   open.c     open: the open file a node's kind makes
 *   file.c     open files: struct fs_file's life, and read, write,
 *              flush, fsync, release, fallocate, poll through its
 *              struct fs_file_ops
 *   stage.c    a child's open file: its stage's operations, the
 *              set-ID bits a write clears
 *   special.c  the special files' open and their operations
 *   dir.c      opendir, readdir, readdirplus, releasedir
 *   lock.c     flock, getlk, setlk on a shared store, and the locks a
 *              close ends
 *   inode.c    the kernel's inode table
 *   clock.c    deadlines, backoff, the manual clock of -o testclock
 *   watch.c    the threads that act when nobody calls in: start, stop,
 *              the store's hook
 *   events.c   .events open files (their operations) and the events
 *              thread
 *   inval.c    the kernel's caches: timeouts, the inval thread, replies
 *              in flight, the wait for the inval and echo threads
 *   echo.c     the echo thread
 *   echo_answer.c  the answers to the echo thread's own requests
 *   echo_call.c    the echo's system calls, made by a process of its own
 *   main.c     options, the store, signals, the session and its
 *              /dev/fuse I/O (the INIT flag that allows a shared mmap)
 *
 * Calls between these files go one way, downwards: the handlers
 * (entry.c, attr.c, open.c, dir.c; file.c's only through f->ops) call
 * the kinds of open file (stage.c, special.c, events.c, echo_answer.c),
 * which call file.c and the helpers below them (reply.c, inval.c,
 * clock.c, inode.c); watch.c starts the threads (events.c, echo.c,
 * inval.c) and none of them calls it back.
 *
 * Threads: the session's workers run the handlers; fs_watch_start()
 * starts the events, echo and inval threads and the store's reaper.
 * fs_watch_stop() stops the reaper and joins the events thread, while
 * the session can still carry replies; the inval thread is joined by
 * fs_inval_join() (after a drain, fs_watch_quiesce() ends it first,
 * while workers still answer), the echo thread by fs_watch_join(), after
 * the session is gone (it may be in a syscall on the mount until then).
 *
 * Locks, and their order, are in fs/watch.c's opening comment.  Nothing
 * here holds a store lock, and no fs/ lock is held across a reply or a
 * notification.
 */
#ifndef STATEFS_FS_H
#define STATEFS_FS_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "fs/inode.h"
#include "store/store.h"

struct layout_special;

/* A caller's credentials (store_cred) and the groups they point to. */
struct fs_cred {
	struct store_cred c;
	gid_t *groups;                  /* owned */
};

/* What the echo in flight replays (fs/echo.c). */
enum fs_echo_kind {
	FS_ECHO_REMOVE,  /* a removal: unlink or rmdir of the name */
	FS_ECHO_APPEAR,  /* a join, create or link: the name appears */
	FS_ECHO_MOVE,    /* a rename or exchange */
	FS_ECHO_PUBLISH, /* a publication: open, write, close */
	FS_ECHO_ATTRIB,  /* another mount's chmod, chown, times or lease */
};

#define FS_ECHO_TOUCHED 64

/* One system call of the echo's, made by its process (fs/echo_call.c). */
enum fs_echo_call {
	FS_ECALL_UNLINK,   /* path, if the kernel holds ino there */
	FS_ECALL_RMDIR,    /* the same, a directory */
	FS_ECALL_MKDIR,    /* path, if the kernel holds nothing there */
	FS_ECALL_CREATE,   /* the same: open(O_CREAT|O_EXCL|O_RDONLY), close */
	FS_ECALL_LINK,     /* the same: link(from, path) */
	FS_ECALL_RENAME,   /* rename(from, path) */
	FS_ECALL_EXCHANGE, /* renameat2(from, path, RENAME_EXCHANGE) */
	FS_ECALL_PUBLISH,  /* open(path, O_WRONLY), one byte written, close */
	FS_ECALL_CHMOD,    /* chmod(path, mode), if the kernel holds ino there */
};

struct fs_echo_req {
	int op;                          /* enum fs_echo_call */
	mode_t mode;
	uint64_t ino;
	char path[3 * (NAME_MAX + 1)];   /* from the mount's root */
	char from[3 * (NAME_MAX + 1)];
};

struct fs;
struct fs_file;

/*
 * What an open file does, by its kind, as the kernel's file->f_op and
 * kernfs's struct kernfs_ops: each kind's file defines its table
 * (fs/stage.c a child's stage; fs/special.c .stats, .snapshot, .depart,
 * .drain, .clock; fs/events.c .events; fs/echo_answer.c the echo's), its
 * open sets f->ops, which never changes after, and fs/file.c's handlers
 * call through it.  A NULL slot has fs/file.c's answer, the same for
 * every kind (given beside it).
 */
struct fs_file_ops {
	/* Reply to a read of @size bytes at @off, exactly once (perhaps
	 * later: a read may be parked).  NULL: EBADF. */
	void (*read)(fuse_req_t req, struct fs *fs, struct fs_file *f,
		     size_t size, off_t off, struct fuse_file_info *fi);
	/* A write of @size bytes at @off: the bytes taken, or -errno (the
	 * caller replies).  NULL: -EBADF. */
	ssize_t (*write)(fuse_req_t req, struct fs *fs, struct fs_file *f,
			 const char *buf, size_t size, off_t off);
	/* flush (a close(2) of the open file), fsync: 0 or -errno.
	 * NULL: 0. */
	int (*flush)(struct fs *fs, struct fs_file *f);
	int (*fsync)(struct fs *fs, struct fs_file *f);
	/* The last close, before fs_file_free(): nobody is told how it
	 * went.  NULL: nothing but the free. */
	void (*release)(struct fs *fs, struct fs_file *f);
	/* Reply to a poll, exactly once, keeping or destroying @ph.
	 * NULL: always ready, as a regular file is. */
	void (*poll)(fuse_req_t req, struct fs *fs, struct fs_file *f,
		     struct fuse_pollhandle *ph);
	/* fallocate(2) @mode of @len bytes at @off: 0 or -errno (the caller
	 * replies).  NULL: -EOPNOTSUPP. */
	int (*fallocate)(fuse_req_t req, struct fs *fs, struct fs_file *f,
			 int mode, off_t off, off_t len);
};

/*
 * An open file (fi->fh).  Threads that share a descriptor send requests
 * for one open file at once, so every field a request changes is guarded:
 * ops and node are set at open and never change; a stage has its own
 * lock; text and len are, by kind:
 *   .stats, .snapshot, .clock  made at open, never changed after (no
 *                      lock);
 *   .drain             text_lock: a read at offset 0 rewrites them in
 *                      place (text is allocated once, at open);
 *   .events            fs->watch_lock: the unread rest of its last lines.
 * fs_file_free() lets go of every field a kind may have set.
 */
struct fs_file {
	const struct fs_file_ops *ops;  /* its kind's */
	struct store_node *node;        /* counted */
	struct store_stage *stage;      /* a child's open file's alone */
	char *text;
	size_t len;
	/* A leaf lock: nothing else is taken while it is held, and it is
	 * never held across a reply or a call into the store. */
	pthread_mutex_t text_lock;
	/* A .snapshot's text: the bytes store_snapshot_hold() counts for
	 * held_uid until the file is released (0: none). */
	uint64_t held;
	uid_t held_uid;
	/* .events; guarded by fs->watch_lock. */
	struct store_event_reader *reader; /* with its opener's eyes */
	fuse_req_t waiting;             /* a parked read, or NULL */
	fuse_req_t interrupted;         /* interrupted before it was parked */
	size_t want;                    /* its size */
	bool read_once;                 /* its first read came (its offset
					 * is where the reader starts) */
	bool starting;                  /* its start is being asked of the
					 * store's engine: nothing to read */
	/* The kernel's offset after the bytes handed out (pos), and the
	 * last reply's bytes from last_off: a read that seeks back into
	 * them (bash's read, head) gets them again (fs/events.c). */
	uint64_t pos, last_off;
	char *last;
	size_t last_len;
	struct fuse_pollhandle *ph;     /* a poll waiting for data */
	struct fs_file *wprev, *wnext;  /* fs->watchers */
};

/* The filesystem's state: one per mount, the session's userdata. */
struct fs {
	struct store *store;
	struct fs_inodes inodes;        /* what the kernel knows (inode.c) */
	uid_t mount_uid;
	bool testclock;
	/* -o default_permissions: the kernel checks permissions, and
	 * statefs checks what the kernel cannot see (a cascading rmdir,
	 * a .depart).  Without it nothing is checked. */
	bool default_permissions;
	atomic_uint_fast64_t clock_ms;  /* -o testclock: the manual clock */
	struct fuse_session *se;
	char *mountpoint;               /* absolute */

	/* The watch threads (fs/watch.c, events.c, echo.c). */
	pthread_mutex_t watch_lock;
	pthread_cond_t watch_cond;      /* kicks the events thread */
	pthread_cond_t echo_cond;       /* kicks the echo thread */
	atomic_int nwatchers;           /* open .events files */
	bool kicked;                    /* watch_lock: events appended */
	bool stopping;                  /* watch_lock */
	struct fs_file *watchers;       /* watch_lock: open .events files */
	pthread_t events_thread, echo_thread;
	bool threads;

	/*
	 * Kernel cache invalidation (fs/inval.c): the inval thread follows
	 * the event log and a queue of names and inodes, and tells the
	 * kernel to drop what it may have cached about them.  inval_seq is
	 * the event it reads next; inval_asked/inval_done count queued
	 * requests.  All under watch_lock.
	 */
	double cache_s;                 /* -o cache_timeout, in seconds: set
					 * by whoever makes the fs, before
					 * fs_watch_start() */
	pthread_t inval_thread;
	bool inval_started;
	pthread_cond_t inval_cond;      /* kicks the inval thread */
	pthread_cond_t inval_progress;  /* the inval thread moved on */
	uint64_t inval_seq;
	uint64_t echo_seq;              /* watch_lock: the echo reads next */
	/* The inval and echo threads' readers of the log, each the
	 * thread's own (opened at start, at one position, closed after the
	 * thread is joined). */
	struct store_event_reader *inval_reader, *echo_reader;
	uint64_t inval_asked, inval_done;
	struct fs_inval *inval_queue;
	bool inval_quit;                /* watch_lock: the inval thread ends
					 * (fs_watch_quiesce) */

	/*
	 * Entry and attribute replies in flight, and the invalidations
	 * they may have overtaken (fs/inval.c, "Replies in flight").  No
	 * lock: replies[e & 1] counts the replies that began in epoch e;
	 * the inval thread alone moves reply_epoch on.  resend is a stack
	 * of invalidations sent while replies were in flight (pushed by any
	 * thread, taken whole by the inval thread); resend_all says one could
	 * not be kept.  grace_waiter is 1 + the counter the inval thread
	 * waits to see empty, or 0.
	 */
	atomic_uint_fast64_t reply_epoch;
	struct {
		atomic_long n;
		char pad[64 - sizeof(atomic_long)]; /* a cache line each */
	} replies[2];
	atomic_int grace_waiter;
	struct fs_inval *_Atomic resend;
	atomic_bool resend_all;

	/* The echo in flight (echo_lock): the echo thread replays one
	 * internal transition at a time through the mount (fs/echo.c). */
	pthread_mutex_t echo_lock;
	_Atomic pid_t echo_tid;
	enum fs_echo_kind echo_kind;
	char echo_name[NAME_MAX + 1];
	uint64_t echo_ino;
	uint64_t echo_dir_ino;           /* the directory it went from; 0:
					  * not known (a child's parent) */
	char echo_tenant[NAME_MAX + 1];  /* the path's first step, which */
	uint64_t echo_tenant_ino;        /* may be gone from the store too */
	/* An appearing echo: the live node it shows (counted, the echo
	 * thread's), an exchange's other one, and a move's source name. */
	struct store_node *echo_node, *echo_other;
	char echo_from[NAME_MAX + 1];
	uint64_t echo_from_dir_ino;
	bool echo_dir;
	bool echo_armed;
	/* The echo's process (fs/echo_call.c) and the echo thread's socket
	 * to it (-1: none). */
	pid_t echo_pid;
	int echo_sock;
	/* The nodes whose attributes another mount changed, counted, for
	 * the echo thread's ATTRIB (watch_lock; a full list drops more). */
	struct store_node *echo_touched[FS_ECHO_TOUCHED];
	unsigned echo_ntouched;
};

/* The handlers' shorthands ------------------------------------------------ */

static inline struct fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static inline void reply_err(fuse_req_t req, int rc)
{
	fuse_reply_err(req, rc < 0 ? -rc : rc);
}

/* The node behind kernel inode @ino, with a reference; NULL with *@err
 * the handler's answer: -ESTALE (the kernel's inode is stale), or -EIO
 * (its tenant could not be loaded from the shared store: fs_inode_use). */
static inline struct store_node *node_get(fuse_req_t req, fuse_ino_t ino,
					  int *err)
{
	struct fs *fs = fs_of(req);

	return fs_inode_use(&fs->inodes, fs->store, ino, err);
}

/* Drop a node reference.  Takes @fs, not the request: a request is gone
 * once it has been replied to. */
static inline void node_put(struct fs *fs, struct store_node *n)
{
	if (n)
		store_node_unref(fs->store, n);
}

static inline struct fs_file *file_of(struct fuse_file_info *fi)
{
	return (struct fs_file *)(uintptr_t)fi->fh;
}

/* fs/ops.c ---------------------------------------------------------------- */

/* The low-level operations table, and the session's init. */
extern const struct fuse_lowlevel_ops fs_ops;
void fs_init(void *userdata, struct fuse_conn_info *conn);

/* fs/lock.c --------------------------------------------------------------- */

/* The lock requests, on a shared store only (fs_init). */
void fs_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
	      int op);
void fs_getlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
	      struct flock *lock);
void fs_setlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
	      struct flock *lock, int sleep);
/* Child @n's open file @fi on a shared store: every close of a writing
 * open, or of any open of a child this mount set a record lock on, is
 * flushed (a close by a POSIX owner ends its locks). */
void fs_lock_open(struct fs *fs, struct store_node *n,
		  struct fuse_file_info *fi);
/* A close of @f ends the locks the kernel says it ends: a flush's
 * (@last false) those of its POSIX owner, a release's (@last) those
 * taken through the open file (flock and OFD).  Nothing on the embedded
 * store, nor when this mount holds none there. */
void fs_lock_close(struct fs *fs, struct fs_file *f,
		   const struct fuse_file_info *fi, bool last);

/* fs/reply.c -------------------------------------------------------------- */

/* @a as stat(2) shows it. */
void fs_stat_from(struct stat *st, const struct store_attr *a);
/* Attributes of @n as stat(2) shows them (special files take their mode
 * from the layout).  0 or the store's -ESTALE. */
int fs_node_stat(struct fs *fs, struct store_node *n, struct stat *st);
/* Tell the kernel about @n in an entry reply: attributes, one lookup
 * counted in the inode table.  0, -ESTALE or -ENOMEM (the kernel must not
 * be told). */
int fs_entry_fill(struct fs *fs, struct store_node *n,
		  struct fuse_entry_param *e);
/* Does this mount have special file @sp?  (.clock: only a test clock.) */
bool fs_special_here(struct fs *fs, const struct layout_special *sp);
/* A special file named @name in directory @dir, or NULL. */
const struct layout_special *fs_special_in(struct fs *fs,
					   struct store_node *dir,
					   const char *name);
/* Fill @fc from the caller of @req.  0 or -ENOMEM. */
int fs_cred_get(fuse_req_t req, struct fs_cred *fc);
void fs_cred_free(struct fs_cred *fc);
/* The credentials a cascade (rmdir of a tenant or parent, .depart, a
 * tenant's .drain) is checked with: the caller's under
 * default_permissions, else none (*@use NULL).  Free with
 * fs_cred_free().  0 or -ENOMEM. */
int fs_cascade_cred(fuse_req_t req, struct fs *fs, struct fs_cred *fc,
		    const struct store_cred **use);

/* fs/entry.c -------------------------------------------------------------- */

void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void fs_forget_multi(fuse_req_t req, size_t count,
		     struct fuse_forget_data *forgets);
void fs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
	      mode_t mode);
void fs_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_create(fuse_req_t req, fuse_ino_t parent, const char *name,
	       mode_t mode, struct fuse_file_info *fi);
void fs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
	      mode_t mode, dev_t rdev);
void fs_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		const char *name);
void fs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
	     const char *newname);
void fs_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
	       fuse_ino_t newparent, const char *newname, unsigned int flags);

/* fs/attr.c --------------------------------------------------------------- */

void fs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		int to_set, struct fuse_file_info *fi);
void fs_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		 size_t size);
void fs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void fs_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		 const char *value, size_t size, int flags);
void fs_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);
void fs_statfs(fuse_req_t req, fuse_ino_t ino);

/* fs/file.c --------------------------------------------------------------- */

/* A new open file, empty, no ops yet (its open sets them before it is
 * given to the kernel); free it with fs_file_free().  NULL: no memory. */
struct fs_file *fs_file_new(void);
/* Let go of everything @f holds (its stage, its text and held snapshot
 * bytes, its reader, its node) and free it.  NULL: nothing. */
void fs_file_free(struct fs *fs, struct fs_file *f);
/* The handlers: each calls @fi's open file's ops. */
void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
	     struct fuse_file_info *fi);
void fs_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
	      size_t size, off_t off, struct fuse_file_info *fi);
void fs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
	      struct fuse_file_info *fi);
void fs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off,
		  off_t len, struct fuse_file_info *fi);
void fs_poll(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
	     struct fuse_pollhandle *ph);

/* fs/stage.c -------------------------------------------------------------- */

/* The stage mode open(2) flags ask for. */
enum store_stage_mode fs_stage_mode(int flags);
/* Make @f, whose stage is open on child @n, the open file of @fi (with
 * the stage's ops).  Cannot fail. */
void fs_file_init_child(struct fs_file *f, struct store_node *n,
			int flags, struct fuse_file_info *fi);
/* Open child @n for the caller of @req with @fi's flags: a stage, made
 * the open file of @fi (an O_TRUNC open clears the set-ID bits).  0 or
 * the store's -errno. */
int fs_stage_open(fuse_req_t req, struct fs *fs, struct store_node *n,
		  struct fuse_file_info *fi);
/* A write to child @n, or an O_TRUNC open of it, by the caller of @req:
 * clear the set-user-ID and set-group-ID bits as Linux does. */
void fs_kill_suidgid(fuse_req_t req, struct fs *fs, struct store_node *n);

/* fs/open.c --------------------------------------------------------------- */

void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);

/* fs/special.c ------------------------------------------------------------ */

/* Open special file @n with open(2) @flags into @fi, with the ops of its
 * kind.  0 or -errno. */
int fs_special_open(fuse_req_t req, struct fs *fs, struct store_node *n,
		    int flags, struct fuse_file_info *fi);

/* fs/dir.c ---------------------------------------------------------------- */

void fs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi);
void fs_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
		    off_t off, struct fuse_file_info *fi);
void fs_releasedir(fuse_req_t req, fuse_ino_t ino,
		   struct fuse_file_info *fi);
void fs_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
		 struct fuse_file_info *fi);

/* fs/watch.c -------------------------------------------------------------- */

/* Initialise fs's watch state (before the session exists). */
void fs_watch_init(struct fs *fs);
/* Start the events, echo and inval threads and the store's reaper (the
 * mount is up).  0, -ENOMEM or -EAGAIN (nothing left running). */
int fs_watch_start(struct fs *fs);
/* Stop the threads: stop the store's reaper and join the events thread
 * (the echo and inval threads are joined apart: fs_watch_join,
 * fs_inval_join). */
void fs_watch_stop(struct fs *fs);
/* Join the echo thread, after fuse_session_destroy(); then the inval
 * thread, if still there. */
void fs_watch_join(struct fs *fs);
/* The store's event hook: wakes the events thread (and the echo thread
 * after an internal transition). */
void fs_watch_hook(void *arg, bool internal);
/*
 * The session is about to end on its own (a drain), the workers still
 * answering: let the echo and inval threads finish what the log holds
 * (bounded), then end the inval thread, while its notifications can still
 * complete.  Call before fuse_session_exit().
 */
void fs_watch_quiesce(struct fs *fs);

/* fs/clock.c -------------------------------------------------------------- */

/* CLOCK_MONOTONIC @ms from now (the clock of every condition of fs/), and
 * whether it has passed. */
struct timespec fs_deadline_in(unsigned ms);
bool fs_deadline_passed(const struct timespec *dl);
/* The wait after one more failure to allocate, after waiting @ms. */
unsigned fs_backoff_next(unsigned ms);
/* The manual clock of -o testclock (store_clock callback). */
uint64_t fs_manual_clock(void *arg);
/* .clock written: advance by @ms and run every due expiry.  0, or
 * -EINVAL when that would take the clock past STORE_CLOCK_MAX_MS (or @ms
 * is over STORE_DURATION_MAX_MS): the clock does not move. */
int fs_clock_advance(struct fs *fs, uint64_t ms);

/* fs/inval.c -------------------------------------------------------------- */

/* How long the kernel may keep @n's entry and attributes (seconds). */
double fs_cache_timeout(struct fs *fs, struct store_node *n);
/* Ask the inval thread to drop every cached name of @n and its
 * attributes; fs_inval_sync() waits for it. */
void fs_inval_names(struct fs *fs, struct store_node *n);
/* Ask it to drop name @name of directory @dir. */
void fs_inval_entry(struct fs *fs, uint64_t dir, const char *name);
/*
 * Wait until the inval thread has handled every event so far and every
 * queued request.  Bounded: a handler that waits holds a kernel lock the
 * inval thread might need, so after INVAL_WAIT_MS it goes on (and the
 * invalidation lands a little later).
 */
void fs_inval_sync(struct fs *fs);
/*
 * Wait at most @ms until the inval thread (when caching is on) and, with
 * @echo, the echo thread have handled every event logged so far and
 * every invalidation queued so far.  Takes watch_lock.
 */
void fs_inval_caught_up(struct fs *fs, long ms, bool echo);
/* Drop @ino's cached attributes now (safe in any handler, not under
 * watch_lock). */
void fs_inval_attr(struct fs *fs, uint64_t ino);
/* The store's attribute hook: states whose attributes changed behind the
 * kernel's back (a publication, a link lost to a cascade). */
void fs_inval_attrs_changed(void *arg, const uint64_t *ino, size_t n);
/*
 * Bracket every reply that gives the kernel an entry or attributes it
 * may cache: fs_reply_begin() before the reply is computed from the
 * store, fs_reply_end() with its token once fuse_reply_* has returned.
 * An invalidation sent in between is sent again after the reply (see
 * "Replies in flight" in fs/inval.c).  Cheap: an atomic increment and
 * two loads to begin, a decrement and a load to end, no lock (the end
 * takes watch_lock only to wake an inval thread waiting for it).  A
 * handler in between must not wait for the inval thread (fs_inval_sync):
 * the inval thread may be waiting for it.
 */
unsigned fs_reply_begin(struct fs *fs);
void fs_reply_end(struct fs *fs, unsigned token);
/* The inval thread (started by fs_watch_start). */
void *fs_inval_main(void *arg);
/* After the unmount, before the session goes: end the inval thread, and
 * drop what it would have sent again. */
void fs_inval_join(struct fs *fs);

/* fs/events.c ------------------------------------------------------------- */

/* Make @f an open .events of @dir (root or tenant), with the stream's
 * ops.  @cred is who opened it (fs_cred_get): the reader sees only the
 * lines of tenants it may list, each judged as the tenant was when the
 * line was appended.  0 or -ENOMEM. */
int fs_events_open(struct fs *fs, struct store_node *dir,
		   const struct store_cred *cred, struct fs_file *f);
/* The events thread (started by fs_watch_start). */
void *fs_events_main(void *arg);

/* fs/echo_answer.c -------------------------------------------------------- */

/*
 * The answers to the echo thread's requests (fs/echo.c replays, through
 * the mount, a transition the kernel did not see, so the kernel raises
 * the inotify events).  Each is asked first by the handler the request
 * reaches: true when the request was the echo's and has been replied to,
 * never by a store transition; false for every other request.
 *
 * fs_echo_lookup_first() answers, before the store is asked, the names
 * an appearing or moving echo must show as they were (the new name
 * absent, a move's source still there); fs_echo_lookup() answers a
 * lookup of a removed name in directory @dir when the store has no node
 * of that name there.  fs_echo_remove() answers every unlink/rmdir of
 * the echo thread without touching the store: it succeeds only when no
 * live node owns the name, so an echo never takes a new incarnation
 * from the kernel's view.  fs_echo_appear() answers its mkdir, create
 * (@fi: the open file's, else NULL) and link with the live node,
 * fs_echo_move() its rename, fs_echo_open() its open of a published
 * child (an open file of the echo's: writes are answered, never staged),
 * fs_echo_setattr() its chmod of a node another mount changed, with its
 * attributes.
 */
bool fs_echo_lookup_first(fuse_req_t req, struct fs *fs, fuse_ino_t dir,
			  const char *name);
bool fs_echo_lookup(fuse_req_t req, struct fs *fs, fuse_ino_t dir,
		    const char *name);
bool fs_echo_remove(fuse_req_t req, struct fs *fs, fuse_ino_t dir,
		    const char *name, bool isdir);
bool fs_echo_appear(fuse_req_t req, struct fs *fs, fuse_ino_t dir,
		    const char *name, struct fuse_file_info *fi);
bool fs_echo_move(fuse_req_t req, struct fs *fs, fuse_ino_t dir,
		  const char *name);
bool fs_echo_open(fuse_req_t req, struct fs *fs, fuse_ino_t ino,
		  struct fuse_file_info *fi);
bool fs_echo_setattr(fuse_req_t req, struct fs *fs, fuse_ino_t ino);

/* fs/echo.c --------------------------------------------------------------- */

/*
 * Echoes: the echo thread replays, through the mount, a transition the
 * kernel did not see (a removal the store made by itself; on a shared
 * store, every transition another mount made), so the kernel raises the
 * inotify events; fs/echo_answer.c answers its requests.
 * fs_echo_touched() is the store's touch hook (store_set_touch_hook):
 * it queues a node another mount changed for an ATTRIB; fs_echo_untouch()
 * lets go of what it queued (after the echo thread is joined).
 */
void fs_echo_touched(void *arg, struct store_node *n);
void fs_echo_untouch(struct fs *fs);
/* The echo thread (started by fs_watch_start). */
void *fs_echo_main(void *arg);

/* fs/echo_call.c ---------------------------------------------------------- */

/* Start the echo's process (from the echo thread: it dies with it), make
 * one call through it (0 or -errno; -EPIPE when it is gone), stop it
 * (after the echo thread is joined). */
int fs_echo_proc_start(struct fs *fs);
int fs_echo_proc_call(struct fs *fs, const struct fs_echo_req *rq);
void fs_echo_proc_stop(struct fs *fs);

#endif /* STATEFS_FS_H */
