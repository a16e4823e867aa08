/*
 * fixture.h - the filesystem the fs/ unit tests share: the FUSE adapter
 * (every file of fs/ but main.c) with the kernel replaced by a recorder.
 *
 * The recorder is tests/unit/fs/fuse_stub.c, the stand-in for every libfuse
 * function the adapter calls (the binaries are not linked with libfuse):
 * replies and notifications go, in the order the kernel would receive
 * them, to one log, and a reply can be held at the point where libfuse
 * would write it to /dev/fuse, so a test can put a store change and its
 * invalidation between the moment a reply was computed and the moment
 * the kernel gets it.  The watch threads run as in the daemon
 * (fs_watch_start), on a real store; the stand-in's strdup() can make
 * them run out of memory, there and only there.
 *
 * Each test gets its own filesystem (fs_up, or fs_bare for the handlers
 * alone) and takes it down again (fs_down, fs_bare_down); the log of what
 * was sent is kept across tests, so each test looks only at what was
 * sent after a mark it took.  Include it after tests/unit/unit.h (each
 * test_*.c of tests/unit/fs/ is one binary, test_NAME for fs/NAME.c).
 */
#ifndef STATEFS_UNIT_FS_FIXTURE_H
#define STATEFS_UNIT_FS_FIXTURE_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "fs/fs.h"
#include "layout/layout.h"
#include "store/store.h"
#include "tests/unit/fs/fuse_stub.h"
#include "tests/unit/unit.h"

/* The fixture --------------------------------------------------------------- */

static char fake_session;

/* A mounted filesystem as fs/main.c makes it, minus the kernel: caching
 * on (the default cache_timeout), the watch threads running. */
static inline struct fs *fs_up(const struct store_limits *l)
{
	struct fs *fs = calloc(1, sizeof(*fs));
	struct store_limits def;
	struct layout_mount m;

	assert_non_null(fs);
	if (!l) {
		store_limits_default(&def);
		l = &def;
	}
	assert_int_equal(store_new(l, NULL, &fs->store), 0);
	fs_inodes_init(&fs->inodes);
	fs_watch_init(fs);
	layout_mount_default(&m);
	fs->cache_s = (double)m.cache_timeout_ms / 1000.0;
	/* The echo thread finds no mount here and echoes nothing. */
	fs->mountpoint = strdup("/nonexistent/statefs-test_fs");
	fs->se = (struct fuse_session *)&fake_session;
	assert_int_equal(fs_watch_start(fs), 0);
	assert_true(fs->cache_s > 0);
	return fs;
}

static inline void fs_down(struct fs *fs)
{
	atomic_store(&starve, false);
	fs_watch_stop(fs);
	fs_watch_join(fs);
	watched = NULL;
	fs_inodes_clear(&fs->inodes, fs->store);
	store_free(fs->store);
	free(fs->mountpoint);
	free(fs);
}

static const struct store_owner DIR_OWNER = { 0, 0, 0755 };

static inline struct store_node *mk(struct fs *fs, struct store_node *dir,
			     const char *name)
{
	struct store_node *n = NULL;

	assert_int_equal(store_mkdir(fs->store, dir, name, &DIR_OWNER, &n), 0);
	return n;
}

static inline long thread_cpu_ms(pthread_t th)
{
	clockid_t cid;
	struct timespec ts;

	assert_int_equal(pthread_getcpuclockid(th, &cid), 0);
	assert_int_equal(clock_gettime(cid, &ts), 0);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static inline void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Has the inval thread passed every event so far? */
static inline bool inval_caught_up(struct fs *fs)
{
	uint64_t head = store_events_end(fs->store);
	bool done;

	pthread_mutex_lock(&fs->watch_lock);
	done = fs->inval_seq == head;
	pthread_mutex_unlock(&fs->watch_lock);
	return done;
}

/* Look @name up in @dir as the kernel does (so that it knows the inode
 * from then on); its inode number. */
static inline uint64_t kernel_lookup(struct fs *fs, uint64_t dir, const char *name)
{
	struct fuse_req req;
	size_t mark = sent_mark();
	long at;
	uint64_t ino;

	req_init(&req, fs);
	fs_ops.lookup(&req, dir, name);
	at = sent_find(mark, SENT_ENTRY, 0, 0, NULL);
	assert_true(at >= 0);
	ino = sent_ino(at);
	return ino;
}

/* The handlers alone, as in the daemon but with no watch threads (which
 * allocate through the store too): so the Nth allocation a test makes
 * fail is the handler's. */
static atomic_uint_fast64_t bare_now = 1000; /* the bare stores' clock, ms */

static inline uint64_t bare_clock(void *arg)
{
	(void)arg;
	return atomic_load(&bare_now);
}

static inline struct fs *fs_bare(void)
{
	struct fs *fs = calloc(1, sizeof(*fs));
	struct store_clock clock = { bare_clock, NULL };
	struct store_limits l;

	assert_non_null(fs);
	store_limits_default(&l);
	l.max_payload = 16;
	assert_int_equal(store_new(&l, &clock, &fs->store), 0);
	fs_inodes_init(&fs->inodes);
	fs_watch_init(fs);
	fs->se = (struct fuse_session *)&fake_session;
	return fs;
}

static inline void fs_bare_down(struct fs *fs)
{
	fs_inodes_clear(&fs->inodes, fs->store);
	store_free(fs->store);
	free(fs);
}

#endif /* STATEFS_UNIT_FS_FIXTURE_H */
