/*
 * test_fs.c - unit tests of the FUSE adapter (every file of fs/ but main.c) with the
 * kernel replaced by a recorder.
 *
 * The recorder is tests/unit/fs/fuse_stub.c, the stand-in for every libfuse
 * function the adapter calls (the binary is not linked with libfuse):
 * replies and notifications go, in the order the kernel would receive
 * them, to one log, and a reply can be held at the point where libfuse
 * would write it to /dev/fuse, so a test can put a store change and its
 * invalidation between the moment a reply was computed and the moment
 * the kernel gets it.  The watch threads run as in the daemon
 * (fs_watch_start), on a real store; the stand-in's strdup() can make
 * them run out of memory, there and only there.
 *
 * Each test gets its own filesystem (fs_up) and takes it down again
 * (fs_down); the log of what was sent is kept across tests, so each test
 * looks only at what was sent after a mark it took.
 */
#define _GNU_SOURCE
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
static struct fs *fs_up(const struct store_limits *l)
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

static void fs_down(struct fs *fs)
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

static struct store_node *mk(struct fs *fs, struct store_node *dir,
			     const char *name)
{
	struct store_node *n = NULL;

	assert_int_equal(store_mkdir(fs->store, dir, name, &DIR_OWNER, &n), 0);
	return n;
}

static long thread_cpu_ms(pthread_t th)
{
	clockid_t cid;
	struct timespec ts;

	assert_int_equal(pthread_getcpuclockid(th, &cid), 0);
	assert_int_equal(clock_gettime(cid, &ts), 0);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Has the inval thread passed every event so far? */
static bool inval_caught_up(struct fs *fs)
{
	uint64_t head = store_events_end(fs->store);
	bool done;

	pthread_mutex_lock(&fs->watch_lock);
	done = fs->inval_seq == head;
	pthread_mutex_unlock(&fs->watch_lock);
	return done;
}

/* Out of memory in the watch threads ----------------------------------------- */

#define STARVE_MS 400

/*
 * The inval and echo threads cannot copy an event (strdup fails): they
 * wait and try again, using next to no CPU, and once memory is back the
 * .depart is invalidated as if nothing had happened.
 */
static void test_no_memory_backs_off(void **state)
{
	struct fs *fs = fs_up(NULL);
	struct store_node *t, *p;
	long inval0, echo0, inval_ms, echo_ms;
	size_t mark;

	(void)state;
	t = mk(fs, store_root(fs->store), "t");
	p = mk(fs, t, "p");
	fs_inval_sync(fs);
	watched = fs;
	inval0 = thread_cpu_ms(fs->inval_thread);
	echo0 = thread_cpu_ms(fs->echo_thread);
	atomic_store(&starve, true);
	mark = sent_mark();
	assert_int_equal(store_depart(fs->store, t, "p", NULL), 0);
	sleep_ms(STARVE_MS);
	inval_ms = thread_cpu_ms(fs->inval_thread) - inval0;
	echo_ms = thread_cpu_ms(fs->echo_thread) - echo0;
	print_message("# %d ms without memory: inval thread %ld ms CPU, echo "
		      "thread %ld ms\n", STARVE_MS, inval_ms, echo_ms);
	assert_true(sent_find(mark, SENT_INVAL_ENTRY, store_node_ino(t), 0,
			      "p") < 0);
	atomic_store(&starve, false);
	if (inval_ms > STARVE_MS / 4 || echo_ms > STARVE_MS / 4)
		fail_msg("a watch thread spun without memory: inval %ld ms, "
			 "echo %ld ms of CPU in %d ms", inval_ms, echo_ms,
			 STARVE_MS);
	assert_true(sent_wait(mark, SENT_INVAL_ENTRY, store_node_ino(t), 0, "p",
			      2000) >= 0);
	for (int i = 0; i < 100 && !inval_caught_up(fs); i++)
		sleep_ms(20);
	assert_true(inval_caught_up(fs));
	store_node_unref(fs->store, p);
	store_node_unref(fs->store, t);
	fs_down(fs);
}

/*
 * Out of memory for longer than the log holds: the event it could not
 * copy is gone when memory is back, so it drops every name it may have
 * missed (every tenant and parent), and only then says it has passed it.
 */
static void test_no_memory_then_overflow_drops_everything(void **state)
{
	struct store_limits l;
	struct fs *fs;
	struct store_node *t, *p, *q[12];
	size_t mark;

	(void)state;
	store_limits_default(&l);
	l.event_log = 8;
	fs = fs_up(&l);
	t = mk(fs, store_root(fs->store), "t");
	p = mk(fs, t, "p");
	fs_inval_sync(fs);
	watched = fs;
	atomic_store(&starve, true);
	mark = sent_mark();
	assert_int_equal(store_depart(fs->store, t, "p", NULL), 0);
	for (int i = 0; i < 12; i++) {
		char name[16];

		snprintf(name, sizeof(name), "q%d", i);
		q[i] = mk(fs, t, name);
	}
	sleep_ms(100);
	assert_false(inval_caught_up(fs));
	atomic_store(&starve, false);
	assert_true(sent_wait(mark, SENT_INVAL_ENTRY, STORE_ROOT_INO, 0, "t",
			      2000) >= 0);
	assert_true(sent_wait(mark, SENT_INVAL_ENTRY, store_node_ino(t), 0,
			      "q0", 2000) >= 0);
	assert_true(sent_wait(mark, SENT_INVAL_ENTRY, store_node_ino(t), 0,
			      "q11", 2000) >= 0);
	for (int i = 0; i < 100 && !inval_caught_up(fs); i++)
		sleep_ms(20);
	assert_true(inval_caught_up(fs));
	for (int i = 0; i < 12; i++)
		store_node_unref(fs->store, q[i]);
	store_node_unref(fs->store, p);
	store_node_unref(fs->store, t);
	fs_down(fs);
}

/* Replies in flight ------------------------------------------------------------ */

/* One request the kernel sends, run on its own thread, its reply held. */
struct call {
	enum { CALL_LOOKUP, CALL_GETATTR, CALL_READDIRPLUS } op;
	fuse_ino_t ino;             /* the directory, or the node */
	const char *name;           /* CALL_LOOKUP */
	struct fuse_file_info fi;   /* CALL_READDIRPLUS: from opendir */
	struct fuse_req req;
	pthread_t th;
};

static void *call_main(void *arg)
{
	struct call *c = arg;

	switch (c->op) {
	case CALL_LOOKUP:
		fs_ops.lookup(&c->req, c->ino, c->name);
		break;
	case CALL_GETATTR:
		fs_ops.getattr(&c->req, c->ino, NULL);
		break;
	case CALL_READDIRPLUS:
		fs_ops.readdirplus(&c->req, c->ino, 4096, 0, &c->fi);
		break;
	}
	return NULL;
}

/* Start @c; return once its reply is computed and waits to be written. */
static void call_held(struct fs *fs, struct call *c)
{
	req_init(&c->req, fs);
	c->req.hold = true;
	c->req.dir = c->ino;
	assert_int_equal(pthread_create(&c->th, NULL, call_main, c), 0);
	req_wait_held(&c->req);
}

/* Let @c's reply reach the kernel; the handler returns. */
static void call_finish(struct call *c)
{
	req_release(&c->req);
	assert_int_equal(pthread_join(c->th, NULL), 0);
}

/* Look @name up in @dir as the kernel does (so that it knows the inode
 * from then on); its inode number. */
static uint64_t kernel_lookup(struct fs *fs, uint64_t dir, const char *name)
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

/*
 * Check the order the kernel got things in from @mark: the invalidation
 * (@kind, @dir, @ino, @name) first, then the reply (@reply_kind about
 * @reply_ino), and then the invalidation again.
 */
static void assert_sent_again_after(size_t mark, enum sent_kind kind,
				    uint64_t dir, uint64_t ino, const char *name,
				    enum sent_kind reply_kind, uint64_t reply_ino)
{
	long first = sent_find(mark, kind, dir, ino, name);
	long reply = sent_find(mark, reply_kind, 0, reply_ino, NULL);
	long again;

	assert_true(first >= 0);
	assert_true(reply > first);
	again = sent_wait((size_t)reply + 1, kind, dir, ino, name, 2000);
	if (again < 0)
		fail_msg("the invalidation sent before the stale reply was not "
			 "sent again after it");
}

/*
 * A lookup of p computed before a .depart of p, and written to the kernel
 * after the inval thread dropped p: the kernel would cache the departed
 * parent again.  The invalidation is sent again once the reply is written.
 */
static void test_lookup_overtaken_by_depart(void **state)
{
	struct fs *fs = fs_up(NULL);
	struct store_node *t, *p;
	struct call c = { .op = CALL_LOOKUP, .name = "p" };
	uint64_t t_ino;
	size_t mark;

	(void)state;
	t = mk(fs, store_root(fs->store), "t");
	p = mk(fs, t, "p");
	t_ino = kernel_lookup(fs, STORE_ROOT_INO, "t");
	fs_inval_sync(fs);
	c.ino = t_ino;
	call_held(fs, &c);
	mark = sent_mark();
	assert_int_equal(store_depart(fs->store, t, "p", NULL), 0);
	assert_true(sent_wait(mark, SENT_INVAL_ENTRY, t_ino, 0, "p", 2000) >= 0);
	call_finish(&c);
	assert_sent_again_after(mark, SENT_INVAL_ENTRY, t_ino, 0, "p",
				SENT_ENTRY, store_node_ino(p));
	store_node_unref(fs->store, p);
	store_node_unref(fs->store, t);
	fs_down(fs);
}

/* The same for the entries of a readdirplus listing (ls -l). */
static void test_readdirplus_overtaken_by_depart(void **state)
{
	struct fs *fs = fs_up(NULL);
	struct store_node *t, *p;
	struct call c = { .op = CALL_READDIRPLUS };
	struct fuse_req req;
	uint64_t t_ino;
	size_t mark;

	(void)state;
	t = mk(fs, store_root(fs->store), "t");
	p = mk(fs, t, "p");
	t_ino = kernel_lookup(fs, STORE_ROOT_INO, "t");
	req_init(&req, fs);
	fs_ops.opendir(&req, t_ino, &c.fi);
	assert_int_equal(req.err, 0);
	fs_inval_sync(fs);
	c.ino = t_ino;
	call_held(fs, &c);
	mark = sent_mark();
	assert_int_equal(store_depart(fs->store, t, "p", NULL), 0);
	assert_true(sent_wait(mark, SENT_INVAL_ENTRY, t_ino, 0, "p", 2000) >= 0);
	call_finish(&c);
	assert_sent_again_after(mark, SENT_INVAL_ENTRY, t_ino, 0, "p",
				SENT_DIRENT, store_node_ino(p));
	req_init(&req, fs);
	fs_ops.releasedir(&req, t_ino, &c.fi);
	store_node_unref(fs->store, p);
	store_node_unref(fs->store, t);
	fs_down(fs);
}

/*
 * A getattr of c computed before a publication changed its size, written
 * after the publication dropped c's attributes: sent again after it.
 */
static void test_getattr_overtaken_by_publication(void **state)
{
	const struct store_owner fown = { 0, 0, 0644 };
	struct fs *fs = fs_up(NULL);
	struct store_node *t, *p, *ch = NULL;
	struct store_stage *st = NULL;
	struct call c = { .op = CALL_GETATTR };
	uint64_t t_ino, p_ino, c_ino;
	bool created;
	size_t mark;

	(void)state;
	t = mk(fs, store_root(fs->store), "t");
	p = mk(fs, t, "p");
	assert_int_equal(store_create(fs->store, p, "c", &fown, true, &ch,
				      &created), 0);
	t_ino = kernel_lookup(fs, STORE_ROOT_INO, "t");
	p_ino = kernel_lookup(fs, t_ino, "p");
	c_ino = kernel_lookup(fs, p_ino, "c");
	fs_inval_sync(fs);
	c.ino = c_ino;
	call_held(fs, &c);
	mark = sent_mark();
	assert_int_equal(store_stage_open(fs->store, ch, STORE_STAGE_REPLACE,
					  &st), 0);
	assert_int_equal(store_stage_write(st, "hello", 5, 0), 5);
	assert_int_equal(store_stage_publish(st), 0);
	store_stage_close(st);
	assert_true(sent_find(mark, SENT_INVAL_INODE, 0, c_ino, NULL) >= 0);
	call_finish(&c);
	assert_sent_again_after(mark, SENT_INVAL_INODE, 0, c_ino, NULL,
				SENT_ATTR, c_ino);
	store_node_unref(fs->store, ch);
	store_node_unref(fs->store, p);
	store_node_unref(fs->store, t);
	fs_down(fs);
}

/* Threads sharing one open file ------------------------------------------------ */

/* Is @s (@n bytes) a whole .drain text? */
static bool drain_text_ok(const char *s, size_t n)
{
	size_t i = 9;

	if ((n == 6 && memcmp(s, "ready\n", 6) == 0) ||
	    (n == 8 && memcmp(s, "drained\n", 8) == 0))
		return true;
	if (n < 11 || memcmp(s, "draining ", 9) != 0 || s[n - 1] != '\n')
		return false;
	for (; i < n - 1; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

struct shared_reader {
	struct fs *fs;
	uint64_t ino;
	struct fuse_file_info *fi;
	off_t off;
	int reads;
	int bad;                    /* replies that were not whole texts */
	char first_bad[64];
};

static void *shared_reader_main(void *arg)
{
	struct shared_reader *r = arg;

	for (int i = 0; i < r->reads; i++) {
		struct fuse_req req;

		req_init(&req, r->fs);
		fs_ops.read(&req, r->ino, 64, r->off, r->fi);
		if (req.err != 0 ||
		    (r->off == 0 && !drain_text_ok(req.data, req.datalen)) ||
		    (r->off != 0 && req.datalen > 0 &&
		     req.data[req.datalen - 1] != '\n')) {
			if (r->bad++ == 0)
				snprintf(r->first_bad, sizeof(r->first_bad),
					 "err %d, %zu bytes '%.*s'", req.err,
					 req.datalen, (int)req.datalen, req.data);
		}
	}
	return NULL;
}

/*
 * Threads sharing one descriptor of .drain read it at once, at offset 0
 * (each such read takes the state anew) and further on, while a drain
 * starts: every read at offset 0 gets one whole text, every other read a
 * piece of one ending where it ends.  Under ASan a read that freed or
 * reused the open file's text under another reader fails here.
 */
static void test_drain_read_shared(void **state)
{
	const struct store_owner fown = { 0, 0, 0644 };
	struct fs *fs = fs_up(NULL);
	struct store_node *t, *p, *ch = NULL;
	struct shared_reader r[6];
	pthread_t th[6];
	struct fuse_file_info fi = { .flags = O_RDONLY };
	struct fuse_req req;
	uint64_t ino;
	bool created;

	(void)state;
	/* A child keeps the drain going for its window. */
	t = mk(fs, store_root(fs->store), "t");
	p = mk(fs, t, "p");
	assert_int_equal(store_create(fs->store, p, "c", &fown, true, &ch,
				      &created), 0);
	ino = kernel_lookup(fs, STORE_ROOT_INO, ".drain");
	req_init(&req, fs);
	fs_ops.open(&req, ino, &fi);
	assert_int_equal(req.err, 0);
	for (int i = 0; i < 6; i++) {
		r[i] = (struct shared_reader){ .fs = fs, .ino = ino, .fi = &fi,
					       .off = i < 4 ? 0 : i - 2,
					       .reads = 3000 };
		assert_int_equal(pthread_create(&th[i], NULL,
						shared_reader_main, &r[i]), 0);
	}
	sleep_ms(20);
	assert_int_equal(store_drain(fs->store, NULL), 0);
	for (int i = 0; i < 6; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		if (r[i].bad)
			fail_msg("reader %d (offset %ld): %d bad replies, first: %s",
				 i, (long)r[i].off, r[i].bad, r[i].first_bad);
	}
	req_init(&req, fs);
	fs_ops.read(&req, ino, 64, 0, &fi);
	assert_true(req.datalen > 9 &&
		    memcmp(req.data, "draining ", 9) == 0);
	req_init(&req, fs);
	fs_ops.release(&req, ino, &fi);
	store_node_unref(fs->store, ch);
	store_node_unref(fs->store, p);
	store_node_unref(fs->store, t);
	fs_down(fs);
}

/* An idle inval thread ------------------------------------------------------------ */

/*
 * With nobody reading .events the inval thread sleeps until an internal
 * transition, however far the log moves on meanwhile (here it wraps
 * several times over creates).  The .depart that wakes it is handled on
 * its own: no overflow, so no dropping of every name in the store
 * (which would show as an invalidation of tenant u).
 */
static void test_idle_inval_thread_does_not_fall_behind(void **state)
{
	const struct store_owner fown = { 0, 0, 0644 };
	struct store_limits l;
	struct fs *fs;
	struct store_node *t, *u, *p, *c;
	uint64_t t_ino;
	size_t mark;
	bool created;

	(void)state;
	store_limits_default(&l);
	l.event_log = 16;
	fs = fs_up(&l);
	t = mk(fs, store_root(fs->store), "t");
	u = mk(fs, store_root(fs->store), "u");
	p = mk(fs, t, "p");
	t_ino = kernel_lookup(fs, STORE_ROOT_INO, "t");
	fs_inval_sync(fs);
	mark = sent_mark();
	for (int i = 0; i < 200; i++) {
		char name[16];

		snprintf(name, sizeof(name), "c%d", i);
		assert_int_equal(store_create(fs->store, p, name, &fown, true, &c,
					      &created), 0);
		store_node_unref(fs->store, c);
	}
	assert_int_equal(store_depart(fs->store, t, "p", NULL), 0);
	assert_true(sent_wait(mark, SENT_INVAL_ENTRY, t_ino, 0, "p", 2000) >= 0);
	for (int i = 0; i < 100 && !inval_caught_up(fs); i++)
		sleep_ms(20);
	assert_true(inval_caught_up(fs));
	if (sent_find(mark, SENT_INVAL_ENTRY, STORE_ROOT_INO, 0, "u") >= 0)
		fail_msg("the inval thread fell behind the log while it slept "
			 "and dropped every name");
	store_node_unref(fs->store, p);
	store_node_unref(fs->store, u);
	store_node_unref(fs->store, t);
	fs_down(fs);
}

/* Echoes ------------------------------------------------------------------------ */

/* The echo thread's id, once it runs (its requests carry it). */
static pid_t echo_pid(struct fs *fs)
{
	for (int i = 0; i < 200 && !atomic_load(&fs->echo_tid); i++)
		sleep_ms(10);
	assert_true(atomic_load(&fs->echo_tid) != 0);
	return atomic_load(&fs->echo_tid);
}

/* What the echo thread sets up before it replays a parent's departure
 * through the mount (echo.c, echo_one). */
static void echo_arm_parent(struct fs *fs, uint64_t t_ino, const char *name,
			    uint64_t ino)
{
	pthread_mutex_lock(&fs->echo_lock);
	snprintf(fs->echo_name, sizeof(fs->echo_name), "%s", name);
	snprintf(fs->echo_tenant, sizeof(fs->echo_tenant), "t");
	fs->echo_tenant_ino = t_ino;
	fs->echo_ino = ino;
	fs->echo_dir_ino = t_ino;
	fs->echo_dir = true;
	fs->echo_armed = true;
	pthread_mutex_unlock(&fs->echo_lock);
}

/* rmdir @name in @dir as the echo thread: the errno it gets. */
static int echo_rmdir(struct fs *fs, uint64_t dir, const char *name)
{
	struct fuse_req req;

	req_init(&req, fs);
	req.ctx.pid = echo_pid(fs);
	fs_ops.rmdir(&req, dir, name);
	assert_true(req.replied);
	return req.err;
}

/*
 * p departs and rejoins before the echo of its departure runs: the echo's
 * lookup finds the new p, and its rmdir is refused, so the kernel keeps
 * the new p (and a watcher never sees it go).  Once the new p is gone
 * too, the echo removes the name.  Neither reaches the store.
 */
static void test_echo_spares_a_new_incarnation(void **state)
{
	struct fs *fs = fs_up(NULL);
	struct store_node *t, *p, *p2, *n = NULL;
	struct fuse_req req;
	uint64_t t_ino, old_ino;
	size_t mark;

	(void)state;
	t = mk(fs, store_root(fs->store), "t");
	p = mk(fs, t, "p");
	t_ino = kernel_lookup(fs, STORE_ROOT_INO, "t");
	old_ino = store_node_ino(p);
	assert_int_equal(store_depart(fs->store, t, "p", NULL), 0);
	p2 = mk(fs, t, "p");
	echo_arm_parent(fs, t_ino, "p", old_ino);

	/* The echo's lookup: the live p, never the old inode. */
	mark = sent_mark();
	req_init(&req, fs);
	req.ctx.pid = echo_pid(fs);
	fs_ops.lookup(&req, t_ino, "p");
	assert_true(sent_find(mark, SENT_ENTRY, 0, store_node_ino(p2), NULL) >= 0);
	assert_true(sent_find(mark, SENT_ENTRY, 0, old_ino, NULL) < 0);

	assert_int_equal(echo_rmdir(fs, t_ino, "p"), ENOENT);
	assert_int_equal(store_lookup(fs->store, t, "p", &n), 0);
	assert_ptr_equal(n, p2);
	store_node_unref(fs->store, n);

	/* The new p departs as well: now the name is the echo's to remove,
	 * and the store is not asked (p2 stays departed, no leave). */
	assert_int_equal(store_depart(fs->store, t, "p", NULL), 0);
	assert_int_equal(echo_rmdir(fs, t_ino, "p"), 0);
	/* Disarmed by that removal: a second one is refused. */
	assert_int_equal(echo_rmdir(fs, t_ino, "p"), ENOENT);
	store_node_unref(fs->store, p2);
	store_node_unref(fs->store, p);
	store_node_unref(fs->store, t);
	fs_down(fs);
}

/* The echo thread's requests never reach the store, even for a name it
 * did not arm: a live node is never removed by an echo. */
static void test_echo_never_removes_from_the_store(void **state)
{
	struct fs *fs = fs_up(NULL);
	struct store_node *t, *p, *n = NULL;
	uint64_t t_ino;

	(void)state;
	t = mk(fs, store_root(fs->store), "t");
	p = mk(fs, t, "p");
	t_ino = kernel_lookup(fs, STORE_ROOT_INO, "t");
	assert_int_equal(echo_rmdir(fs, t_ino, "p"), ENOENT);
	echo_arm_parent(fs, t_ino, "q", store_node_ino(p) + 1000);
	assert_int_equal(echo_rmdir(fs, t_ino, "p"), ENOENT);
	assert_int_equal(store_lookup(fs->store, t, "p", &n), 0);
	store_node_unref(fs->store, n);
	store_node_unref(fs->store, p);
	store_node_unref(fs->store, t);
	fs_down(fs);
}

/* A failed call changes nothing ----------------------------------------------- */

/* The handlers alone, as in the daemon but with no watch threads (which
 * allocate through the store too): so the Nth allocation a test makes
 * fail is the handler's. */
static atomic_uint_fast64_t bare_now = 1000; /* the bare stores' clock, ms */

static uint64_t bare_clock(void *arg)
{
	(void)arg;
	return atomic_load(&bare_now);
}

static struct fs *fs_bare(void)
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

static void fs_bare_down(struct fs *fs)
{
	fs_inodes_clear(&fs->inodes, fs->store);
	store_free(fs->store);
	free(fs);
}

enum made_by { BY_MKDIR_TENANT, BY_MKDIR_PARENT, BY_CREATE, BY_OPEN_CREAT,
	       BY_MKNOD, BY_LINK };

static const char *const made_by_name[] = {
	"mkdir of a tenant", "mkdir of a parent", "create (O_EXCL)",
	"create of an existing child", "mknod", "link",
};

/* Run one handler that gives the kernel a new entry; its errno. */
static int make_entry(struct fs *fs, enum made_by by, uint64_t t_ino,
		      uint64_t p_ino, uint64_t a_ino)
{
	struct fuse_file_info fi = { 0 };
	struct fuse_req req;

	req_init(&req, fs);
	switch (by) {
	case BY_MKDIR_TENANT:
		fs_ops.mkdir(&req, STORE_ROOT_INO, "n", 0755);
		break;
	case BY_MKDIR_PARENT:
		fs_ops.mkdir(&req, t_ino, "q", 0755);
		break;
	case BY_CREATE:
	case BY_OPEN_CREAT:
		fi.flags = O_CREAT | O_WRONLY | (by == BY_CREATE ? O_EXCL : 0);
		fs_ops.create(&req, p_ino, by == BY_CREATE ? "x" : "a", 0644, &fi);
		break;
	case BY_MKNOD:
		fs_ops.mknod(&req, p_ino, "x", S_IFREG | 0644, 0);
		break;
	case BY_LINK:
		fs_ops.link(&req, a_ino, p_ino, "a2");
		break;
	}
	assert_true(req.replied);
	if (req.err == 0 && fi.fh) {
		struct fuse_req rel;

		req_init(&rel, fs);
		fs_ops.release(&rel, 0, &fi);
	}
	return req.err;
}

/*
 * Make the kernel know more children of @p until the inode table is full
 * to the point where one more entry needs it to grow: a handler's
 * reservation is then an allocation of its own, which the failure hook
 * can fail like the store's.  Found by trying: a reservation that
 * allocates nothing leaves the hook armed.
 */
static void inode_table_at_edge(struct fs *fs, struct store_node *p)
{
	const struct store_owner fown = { 0, 0, 0644 };

	for (int i = 0;; i++) {
		struct store_node *c = NULL;
		char name[16];
		bool created, edge;

		/* Armed, a reservation that must grow the table fails. */
		store_fault_fail_nth(1);
		edge = fs_inode_reserve(&fs->inodes) != 0;
		store_fault_fail_nth(0);
		if (edge)
			return;
		fs_inode_unreserve(&fs->inodes);
		snprintf(name, sizeof(name), "e%d", i);
		assert_int_equal(store_create(fs->store, p, name, &fown, true,
					      &c, &created), 0);
		assert_int_equal(fs_inode_remember(&fs->inodes, c), 0);
		store_node_unref(fs->store, c);
	}
}

/* What a failed call must not have changed: the gauges and counters. */
static void counters(struct fs *fs, struct store_stats *st)
{
	assert_int_equal(store_stats(fs->store, NULL, st), 0);
}

/*
 * Every allocation of mkdir, create, mknod and link fails in turn (the
 * store's, and the growth of the kernel's inode table, which the fault
 * hook counts; the table is made to need one): a call that fails has
 * changed nothing, in the store, its counters or its event log.  What
 * can fail is taken before the transition (the room in the inode table,
 * the open file), so a call never fails with the join or admission
 * standing, nor takes it back with an unlink line.
 */
static void test_failed_entry_calls_change_nothing(void **state)
{
	(void)state;
	for (int by = BY_MKDIR_TENANT; by <= BY_LINK; by++) {
		unsigned long n, failed = 0;

		for (n = 1; n < 1000; n++) {
			struct fs *fs = fs_bare();
			struct store_node *t, *p, *a = NULL;
			struct store_stats before, after;
			struct store_event_reader *r;
			const struct store_owner fown = { 0, 0, 0644 };
			uint64_t t_ino, p_ino, a_ino;
			bool created, reached;
			int err;

			t = mk(fs, store_root(fs->store), "t");
			p = mk(fs, t, "p");
			assert_int_equal(store_create(fs->store, p, "a", &fown,
						      true, &a, &created), 0);
			t_ino = kernel_lookup(fs, STORE_ROOT_INO, "t");
			p_ino = kernel_lookup(fs, t_ino, "p");
			a_ino = kernel_lookup(fs, p_ino, "a");
			inode_table_at_edge(fs, p);
			counters(fs, &before);
			assert_int_equal(store_events_open(fs->store, NULL,
							   NULL, 0, &r), 0);
			store_fault_fail_nth(n);
			err = make_entry(fs, (enum made_by)by, t_ino, p_ino, a_ino);
			reached = !store_fault_armed();
			store_fault_fail_nth(0);
			if (err) {
				failed++;
				if (err != ENOMEM)
					fail_msg("%s, allocation %lu failing: "
						 "errno %d", made_by_name[by], n,
						 err);
				counters(fs, &after);
				if (memcmp(&before, &after, sizeof(before)) != 0)
					fail_msg("%s failed (allocation %lu) and "
						 "the store's counters changed",
						 made_by_name[by], n);
				if (store_events_pending(fs->store, r))
					fail_msg("%s failed (allocation %lu) and "
						 "left a line in .events",
						 made_by_name[by], n);
			}
			store_events_close(r);
			store_node_unref(fs->store, a);
			store_node_unref(fs->store, p);
			store_node_unref(fs->store, t);
			fs_bare_down(fs);
			if (!reached)
				break;
		}
		print_message("# %s: %lu allocations, %lu failed calls, each "
			      "without a trace\n", made_by_name[by], n - 1,
			      failed);
		assert_true(failed > 0);
	}
}

/*
 * A setattr that sets the times renews the lease (touch) in the same
 * transition as the rest: refused (here a size over max_payload), it
 * renews nothing; accepted, the reply carries what the transition made.
 */
static void test_refused_setattr_renews_nothing(void **state)
{
	struct fs *fs = fs_bare();
	const struct store_owner fown = { 0, 0, 0644 };
	struct store_node *t, *p, *a = NULL;
	struct store_lease lease;
	struct stat st = { 0 };
	struct fuse_req req;
	uint64_t t_ino, p_ino, a_ino;
	bool created;

	(void)state;
	t = mk(fs, store_root(fs->store), "t");
	p = mk(fs, t, "p");
	assert_int_equal(store_create(fs->store, p, "a", &fown, true, &a,
				      &created), 0);
	t_ino = kernel_lookup(fs, STORE_ROOT_INO, "t");
	p_ino = kernel_lookup(fs, t_ino, "p");
	a_ino = kernel_lookup(fs, p_ino, "a");
	atomic_store(&bare_now, 1000);
	assert_int_equal(store_set_ttl(fs->store, a, 60000), 0);
	atomic_store(&bare_now, 2000);

	st.st_size = 17;
	req_init(&req, fs);
	fs_ops.setattr(&req, a_ino, &st,
		       FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_MTIME_NOW |
		       FUSE_SET_ATTR_MTIME, NULL);
	assert_int_equal(req.err, EFBIG);
	assert_int_equal(store_lease_get(fs->store, a, &lease), 0);
	assert_int_equal(lease.deadline_ms, 61000);

	st.st_size = 3;
	req_init(&req, fs);
	fs_ops.setattr(&req, a_ino, &st,
		       FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_MTIME_NOW |
		       FUSE_SET_ATTR_MTIME, NULL);
	assert_int_equal(req.err, 0);
	assert_int_equal(store_lease_get(fs->store, a, &lease), 0);
	assert_int_equal(lease.deadline_ms, 62000);

	store_node_unref(fs->store, a);
	store_node_unref(fs->store, p);
	store_node_unref(fs->store, t);
	fs_bare_down(fs);
}

/* Shutdown ----------------------------------------------------------------------- */

struct shutdown_run {
	struct fs *fs;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool done;
};

/* What fs/main.c does once the session loop has ended. */
static void *shutdown_main(void *arg)
{
	struct shutdown_run *run = arg;

	fs_watch_stop(run->fs);
	fs_inval_join(run->fs);
	pthread_mutex_lock(&run->mu);
	run->done = true;
	pthread_cond_broadcast(&run->cond);
	pthread_mutex_unlock(&run->mu);
	return NULL;
}

/*
 * A shutdown ended by a drain: the signal thread quiesces the watch
 * threads and ends the session loop.  A lookup that comes after that
 * holds its directory's lock and is never answered; an entry
 * invalidation the inval thread sends in that directory would wait for
 * it for ever, and joining the inval thread would hang.  The inval
 * thread must be gone before the loop ends.
 */
static void test_drain_shutdown_does_not_wait_for_a_late_lookup(void **state)
{
	struct fs *fs = fs_up(NULL);
	struct store_node *t, *p;
	struct shutdown_run run = { .fs = fs, .mu = PTHREAD_MUTEX_INITIALIZER,
				    .cond = PTHREAD_COND_INITIALIZER };
	struct timespec dl;
	pthread_t th;
	uint64_t t_ino;
	bool done;

	(void)state;
	t = mk(fs, store_root(fs->store), "t");
	p = mk(fs, t, "p");
	t_ino = kernel_lookup(fs, STORE_ROOT_INO, "t");
	fs_inval_sync(fs);

	/* The signal thread, after the drain: */
	fs_watch_quiesce(fs);
	/* ... ends the loop (fuse_session_exit).  Then a lookup in t comes,
	 * which no worker will answer, and a change the inval thread would
	 * drop from t's entries. */
	dirlock_hold(t_ino);
	assert_int_equal(store_depart(fs->store, t, "p", NULL), 0);

	assert_int_equal(pthread_create(&th, NULL, shutdown_main, &run), 0);
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 20; /* a hang, not a slow machine */
	pthread_mutex_lock(&run.mu);
	while (!run.done &&
	       pthread_cond_timedwait(&run.cond, &run.mu, &dl) != ETIMEDOUT)
		;
	done = run.done;
	pthread_mutex_unlock(&run.mu);
	/* Let a stuck thread go, so the test can end either way. */
	dirlock_release();
	assert_int_equal(pthread_join(th, NULL), 0);
	if (!done)
		fail_msg("the shutdown waited for the inval thread, itself waiting "
			 "for a lookup no worker would answer (waited: %d)",
			 dirlock_waited);
	fs_watch_join(fs);
	watched = NULL;
	store_node_unref(fs->store, p);
	store_node_unref(fs->store, t);
	fs_inodes_clear(&fs->inodes, fs->store);
	store_free(fs->store);
	free(fs->mountpoint);
	free(fs);
}

/* The kernel's inode table --------------------------------------------------------- */

/* The node the table gives for @ino, its reference dropped: a pointer to
 * compare, or NULL. */
static struct store_node *known(struct fs *fs, uint64_t ino)
{
	struct store_node *n = fs_inode_get(&fs->inodes, fs->store, ino);

	if (n)
		store_node_unref(fs->store, n);
	return n;
}

/*
 * The embedded store keeps the kernel's locks: the session's init takes
 * back the lock capabilities libfuse asks for when the handlers are
 * there, so the kernel locks locally and never sends flock, getlk or
 * setlk; sent anyway, each is refused ENOLCK, and a close asks nothing.
 */
static void test_embedded_locks_stay_the_kernels(void **state)
{
	struct fs *fs = fs_bare();
	struct fuse_conn_info conn = { 0 };
	struct fuse_file_info fi = { 0 };
	struct flock l = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	const struct store_owner fown = { 0, 0, 0644 };
	struct store_node *t, *p, *c = NULL;
	struct fuse_req req;
	uint64_t c_ino;
	bool created;

	(void)state;
	conn.capable = FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS;
	conn.want = FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS;
	fs_init(fs, &conn);
	assert_int_equal(conn.want & (FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS),
			 0);
	t = mk(fs, store_root(fs->store), "t");
	p = mk(fs, t, "p");
	assert_int_equal(store_create(fs->store, p, "c", &fown, true, &c,
				      &created), 0);
	c_ino = kernel_lookup(fs, kernel_lookup(fs, kernel_lookup(fs,
			      STORE_ROOT_INO, "t"), "p"), "c");
	req_init(&req, fs);
	fs_flock(&req, c_ino, &fi, LOCK_EX | LOCK_NB);
	assert_int_equal(req.err, ENOLCK);
	req_init(&req, fs);
	fs_setlk(&req, c_ino, &fi, &l, 0);
	assert_int_equal(req.err, ENOLCK);
	req_init(&req, fs);
	fs_getlk(&req, c_ino, &fi, &l);
	assert_int_equal(req.err, ENOLCK);
	store_node_unref(fs->store, c);
	store_node_unref(fs->store, p);
	store_node_unref(fs->store, t);
	fs_bare_down(fs);
}

/*
 * The table keeps a node the kernel knows, removed or not, readable until
 * the kernel has forgotten every lookup of it; then the number names
 * nothing.
 */
static void test_inode_table_remember_forget(void **state)
{
	const struct store_owner fown = { 0, 0, 0644 };
	struct fs *fs = fs_bare();
	struct fs_inodes *t = &fs->inodes;
	struct store_node *tn, *p, *a = NULL, *b = NULL, *n;
	struct store_attr at;
	uint64_t ia, ib, ip;
	bool created;

	(void)state;
	tn = mk(fs, store_root(fs->store), "t");
	p = mk(fs, tn, "p");
	assert_int_equal(store_create(fs->store, p, "a", &fown, true, &a,
				      &created), 0);
	assert_int_equal(store_create(fs->store, p, "b", &fown, true, &b,
				      &created), 0);
	ia = store_node_ino(a);
	ib = store_node_ino(b);
	ip = store_node_ino(p);

	/* The root is always known, and never forgotten. */
	n = fs_inode_get(t, fs->store, STORE_ROOT_INO);
	assert_non_null(n);
	assert_int_equal(store_node_kind(n), STORE_ROOT);
	store_node_unref(fs->store, n);
	fs_inode_forget(t, fs->store, STORE_ROOT_INO, 1);
	assert_ptr_equal(known(fs, STORE_ROOT_INO), store_root(fs->store));

	/* A remembered live node. */
	assert_int_equal(fs_inode_remember(t, b), 0);
	n = fs_inode_get(t, fs->store, ib);
	assert_ptr_equal(n, b);
	assert_true(store_node_live(n));
	assert_int_equal(store_getattr(fs->store, n, &at), 0);
	store_node_unref(fs->store, n);

	/* Remembered twice, then removed: reachable, dead, until forgotten
	 * twice. */
	assert_int_equal(fs_inode_remember(t, a), 0);
	assert_int_equal(fs_inode_remember(t, a), 0);
	assert_int_equal(store_unlink(fs->store, p, "a"), 0);
	store_node_unref(fs->store, a);
	n = fs_inode_get(t, fs->store, ia);
	assert_non_null(n);
	assert_int_equal(store_node_kind(n), STORE_CHILD);
	assert_false(store_node_live(n));
	assert_int_equal(store_getattr(fs->store, n, &at), -ESTALE);
	store_node_unref(fs->store, n);
	fs_inode_forget(t, fs->store, ia, 1);
	assert_non_null(known(fs, ia));
	fs_inode_forget(t, fs->store, ia, 1);
	assert_null(known(fs, ia));

	/* A removed parent the kernel remembers. */
	assert_int_equal(fs_inode_remember(t, p), 0);
	assert_int_equal(store_rmdir(fs->store, tn, "p", NULL), 0);
	store_node_unref(fs->store, p);
	n = fs_inode_get(t, fs->store, ip);
	assert_non_null(n);
	assert_int_equal(store_node_kind(n), STORE_PARENT);
	assert_false(store_node_live(n));
	assert_int_equal(store_create(fs->store, n, "x", &fown, true, &a,
				      &created), -ESTALE);
	store_node_unref(fs->store, n);
	/* A forget of more lookups than it holds forgets it. */
	fs_inode_forget(t, fs->store, ip, 7);
	assert_null(known(fs, ip));

	/* b went with p's leave; the kernel still knows it. */
	n = fs_inode_get(t, fs->store, ib);
	assert_ptr_equal(n, b);
	assert_false(store_node_live(n));
	store_node_unref(fs->store, n);
	fs_inode_forget(t, fs->store, ib, 1);
	assert_null(known(fs, ib));
	store_node_unref(fs->store, b);

	/* Forgetting numbers it does not know changes nothing. */
	fs_inode_forget(t, fs->store, 1u << 30, 1);
	store_node_unref(fs->store, tn);
	fs_bare_down(fs);
}

/* No inode number the kernel was never told names a node, whatever its
 * value (FUSE inode numbers are 64-bit), however full the table. */
static void test_inode_table_unknown_numbers(void **state)
{
	const uint64_t probes[] = { 0, 2, 1000, 1ull << 32, 1ull << 62,
				    1ull << 63, (1ull << 63) | 1,
				    (1ull << 63) | 63, UINT64_MAX };
	struct fs *fs = fs_bare();
	struct store_node *tn;

	(void)state;
	tn = mk(fs, store_root(fs->store), "t");
	for (int round = 0; round < 2; round++) {
		for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++)
			if (known(fs, probes[i]))
				fail_msg("%#llx names a node the kernel never "
					 "learned",
					 (unsigned long long)probes[i]);
		assert_int_equal(fs_inode_remember(&fs->inodes, tn), 0);
	}
	fs_inode_forget(&fs->inodes, fs->store, store_node_ino(tn), 2);
	store_node_unref(fs->store, tn);
	fs_bare_down(fs);
}

/*
 * Many nodes, remembered and forgotten in an order unlike the one they
 * were made in (the table grows, and removals shift runs back): every
 * node the kernel still knows is found under its number, every other
 * number names nothing, and clearing the table drops what is left.
 */
static void test_inode_table_churn(void **state)
{
	enum { N = 5000 };
	const struct store_owner fown = { 0, 0, 0644 };
	struct fs *fs = fs_bare();
	struct store_node *tn, *p, **c = calloc(N, sizeof(*c));
	unsigned seed = 12345;
	uint64_t *held = calloc(N, sizeof(*held));
	bool created;

	(void)state;
	assert_non_null(c);
	assert_non_null(held);
	tn = mk(fs, store_root(fs->store), "t");
	p = mk(fs, tn, "p");
	for (int i = 0; i < N; i++) {
		char name[16];

		snprintf(name, sizeof(name), "c%d", i);
		assert_int_equal(store_create(fs->store, p, name, &fown, true,
					      &c[i], &created), 0);
	}
	for (int round = 0; round < 4; round++) {
		for (int k = 0; k < N; k++) {
			int i = rand_r(&seed) % N;

			if (held[i] && rand_r(&seed) % 2) {
				uint64_t give = 1 + (uint64_t)rand_r(&seed) %
						    held[i];

				fs_inode_forget(&fs->inodes, fs->store,
						store_node_ino(c[i]), give);
				held[i] -= give;
			} else {
				assert_int_equal(fs_inode_remember(&fs->inodes,
								   c[i]), 0);
				held[i]++;
			}
		}
		for (int i = 0; i < N; i++) {
			struct store_node *n = known(fs, store_node_ino(c[i]));

			if (held[i] ? n != c[i] : n != NULL)
				fail_msg("round %d: c%d (%llu lookups) is %s", round,
					 i, (unsigned long long)held[i],
					 n ? "known" : "unknown");
		}
		assert_null(known(fs, store_node_ino(c[N - 1]) + 1000));
	}
	/* What the kernel still holds outlives the store's own reference,
	 * until the table is cleared (ASan: no leak, no use after free). */
	assert_int_equal(store_rmdir(fs->store, tn, "p", NULL), 0);
	for (int i = 0; i < N; i++)
		store_node_unref(fs->store, c[i]);
	store_node_unref(fs->store, p);
	store_node_unref(fs->store, tn);
	fs_bare_down(fs);
	free(c);
	free(held);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_memory_backs_off),
		cmocka_unit_test(test_no_memory_then_overflow_drops_everything),
		cmocka_unit_test(test_idle_inval_thread_does_not_fall_behind),
		cmocka_unit_test(test_lookup_overtaken_by_depart),
		cmocka_unit_test(test_readdirplus_overtaken_by_depart),
		cmocka_unit_test(test_getattr_overtaken_by_publication),
		cmocka_unit_test(test_drain_read_shared),
		cmocka_unit_test(test_echo_spares_a_new_incarnation),
		cmocka_unit_test(test_echo_never_removes_from_the_store),
		cmocka_unit_test(test_failed_entry_calls_change_nothing),
		cmocka_unit_test(test_refused_setattr_renews_nothing),
		cmocka_unit_test(test_drain_shutdown_does_not_wait_for_a_late_lookup),
		cmocka_unit_test(test_embedded_locks_stay_the_kernels),
		cmocka_unit_test(test_inode_table_remember_forget),
		cmocka_unit_test(test_inode_table_unknown_numbers),
		cmocka_unit_test(test_inode_table_churn),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
