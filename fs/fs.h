/*
 * fs.h - the libfuse3 low-level adapter of statefs.
 *
 * fs/ops.c translates each FUSE request into store/ calls through the
 * layout/ rules and replies exactly once; fs/watch.c runs the four
 * threads that act when nobody calls in (the lease reaper, the .events
 * replies, the inotify echoes, the kernel cache invalidations);
 * fs/main.c parses options, makes the store and runs the session.  Nothing here holds a store lock, and no fs/ lock is held
 * across a reply or a notification.
 */
#ifndef STATEFS_FS_H
#define STATEFS_FS_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>

#include "fs/inode.h"
#include "store/store.h"

/* A caller's credentials (store_cred) and the groups they point to. */
struct fs_cred {
	struct store_cred c;
	gid_t *groups;                  /* owned */
};

enum fs_file_kind { FS_STAGE, FS_TEXT, FS_DEPART, FS_EVENTS, FS_CLOCK, FS_DRAIN };

/*
 * An open file (fi->fh).  Threads that share a descriptor send requests
 * for one open file at once, so every field a request changes is guarded:
 * kind and node are set at open and never change; a stage has its own
 * lock; text and len are, by kind:
 *   FS_TEXT, FS_CLOCK  made at open, never changed after (no lock);
 *   FS_DRAIN           text_lock: a read at offset 0 rewrites them in
 *                      place (text is allocated once, at open);
 *   FS_EVENTS          fs->watch_lock: the unread rest of its last lines.
 */
struct fs_file {
	enum fs_file_kind kind;
	struct store_node *node;        /* counted */
	struct store_stage *stage;      /* FS_STAGE */
	char *text;
	size_t len;
	/* A leaf lock: nothing else is taken while it is held, and it is
	 * never held across a reply or a call into the store. */
	pthread_mutex_t text_lock;
	/* A .snapshot's text: the bytes store_snapshot_hold() counts for
	 * held_uid until the file is released (0: none). */
	uint64_t held;
	uid_t held_uid;
	/* FS_EVENTS; guarded by fs->watch_lock. */
	struct store_event_reader *reader; /* with its opener's eyes */
	fuse_req_t waiting;             /* a parked read, or NULL */
	fuse_req_t interrupted;         /* interrupted before it was parked */
	size_t want;                    /* its size */
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

	/* The watch threads (fs/watch.c). */
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
	 * Kernel cache invalidation (fs/watch.c): the inval thread follows
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
	 * they may have overtaken (fs/watch.c, "Replies in flight").  No
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
	 * internal removal at a time through the mount. */
	pthread_mutex_t echo_lock;
	_Atomic pid_t echo_tid;
	char echo_name[NAME_MAX + 1];
	uint64_t echo_ino;
	uint64_t echo_dir_ino;           /* the directory it went from; 0:
					  * not known (a child's parent) */
	char echo_tenant[NAME_MAX + 1];  /* the path's first step, which */
	uint64_t echo_tenant_ino;        /* may be gone from the store too */
	bool echo_dir;
	bool echo_armed;
};

/* Fill @fc from the caller of @req (fs/ops.c).  0 or -ENOMEM. */
int fs_cred_get(fuse_req_t req, struct fs_cred *fc);
void fs_cred_free(struct fs_cred *fc);

/* The low-level operations table. */
extern const struct fuse_lowlevel_ops fs_ops;

/* fs/watch.c ----------------------------------------------------------- */

/* Initialise fs's watch state (before the session exists). */
void fs_watch_init(struct fs *fs);
/* Start the events, echo and inval threads and the store's reaper (the
 * mount is up). */
int fs_watch_start(struct fs *fs);
/* Stop the threads; stop the store's reaper and join the events thread
 * (the echo thread may be in a syscall on the mount until the session is
 * closed: fs_watch_join; the inval thread: fs_inval_join). */
void fs_watch_stop(struct fs *fs);
/* Join the echo thread, after fuse_session_destroy(). */
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
/* After the unmount, before the session goes: end the inval thread. */
void fs_inval_join(struct fs *fs);

/* The manual clock of -o testclock (store_clock callback). */
uint64_t fs_manual_clock(void *arg);

/* How long the kernel may keep @n's entry and attributes (seconds). */
double fs_cache_timeout(struct fs *fs, struct store_node *n);
/* Ask the inval thread to drop every cached name of @n and its
 * attributes; fs_inval_sync() waits for it. */
void fs_inval_names(struct fs *fs, struct store_node *n);
/*
 * Wait until the inval thread has handled every event so far and every
 * queued request.  Bounded: a handler that waits holds a kernel lock the
 * inval thread might need, so after INVAL_WAIT_MS it goes on (and the
 * invalidation lands a little later).
 */
void fs_inval_sync(struct fs *fs);
/* Drop @ino's cached attributes now (safe in any handler, not under
 * watch_lock). */
void fs_inval_attr(struct fs *fs, uint64_t ino);

/*
 * Bracket every reply that gives the kernel an entry or attributes it
 * may cache: fs_reply_begin() before the reply is computed from the
 * store, fs_reply_end() with its token once fuse_reply_* has returned.
 * An invalidation sent in between is sent again after the reply (see
 * "Replies in flight" in fs/watch.c).  Cheap: an atomic increment and
 * two loads to begin, a decrement and a load to end, no lock (the end
 * takes watch_lock only to wake an inval thread waiting for it).  A
 * handler in between must not wait for the inval thread (fs_inval_sync):
 * the inval thread may be waiting for it.
 */
unsigned fs_reply_begin(struct fs *fs);
void fs_reply_end(struct fs *fs, unsigned token);
/* .clock written: advance by @ms and run every due expiry.  0, or
 * -EINVAL when that would take the clock past STORE_CLOCK_MAX_MS (or @ms
 * is over STORE_DURATION_MAX_MS): the clock does not move. */
int fs_clock_advance(struct fs *fs, uint64_t ms);

/* .events open files.  @cred is who opened it (fs_cred_get): the reader
 * sees only the lines of tenants it may list, each judged as the tenant
 * was when the line was appended.  0 or -ENOMEM. */
int fs_events_open(struct fs *fs, struct store_node *dir,
		   const struct store_cred *cred, struct fs_file *f);
void fs_events_read(fuse_req_t req, struct fs *fs, struct fs_file *f,
		    size_t size, bool nonblock);
void fs_events_poll(fuse_req_t req, struct fs *fs, struct fs_file *f,
		    struct fuse_pollhandle *ph);
void fs_events_release(struct fs *fs, struct fs_file *f);

/*
 * Echoes: the echo thread removes, through the mount, a node the store
 * already removed by itself, so the kernel raises the inotify events.
 * fs_echo_lookup() answers a lookup of that name in directory @dir from
 * the echo thread when the store has no node of that name there (true:
 * replied).  fs_echo_remove() answers every unlink/rmdir of the echo
 * thread (true: replied; false: not the echo thread's) without touching
 * the store: it succeeds only when no live node owns the name, so an
 * echo never takes a new incarnation from the kernel's view.
 */
bool fs_echo_lookup(fuse_req_t req, struct fs *fs, fuse_ino_t dir,
		    const char *name);
bool fs_echo_remove(fuse_req_t req, struct fs *fs, fuse_ino_t dir,
		    const char *name, bool isdir);

#endif /* STATEFS_FS_H */
