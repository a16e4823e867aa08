/*
 * test_echo.c - unit tests of fs/echo.c, with the kernel replaced by a
 * recorder (tests/unit/fs/fixture.h): the echo thread spares a new
 * incarnation and never removes anything from the store.
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
	/* The echo thread replays the departure itself first (its call
	 * on the mount fails: there is none) and disarms when done; the
	 * test arms only once it has. */
	fs_inval_caught_up(fs, 30000, true);
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
	fs_inval_caught_up(fs, 30000, true);
	echo_arm_parent(fs, t_ino, "p", old_ino);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_echo_spares_a_new_incarnation),
		cmocka_unit_test(test_echo_never_removes_from_the_store),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
