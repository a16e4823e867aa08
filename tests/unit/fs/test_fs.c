/*
 * test_fs.c - unit tests of the FUSE adapter's threads as a whole (fs/watch.c
 * and the threads it starts), with the kernel replaced by a recorder
 * (tests/unit/fs/fixture.h): out of memory in the watch threads, threads
 * sharing one open file, and the shutdown of a drain.  The other files of
 * tests/unit/fs/ each test one file of fs/: test_inval.c, test_echo.c,
 * test_entry.c, test_attr.c, test_lock.c, test_inode.c.
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
#include "tests/unit/fs/fixture.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_memory_backs_off),
		cmocka_unit_test(test_no_memory_then_overflow_drops_everything),
		cmocka_unit_test(test_drain_read_shared),
		cmocka_unit_test(test_drain_shutdown_does_not_wait_for_a_late_lookup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
