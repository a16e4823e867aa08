/*
 * test_lock.c - unit tests of fs/lock.c, with the kernel replaced by a
 * recorder (tests/unit/fs/fixture.h): on the embedded store the kernel
 * keeps the locks.
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_embedded_locks_stay_the_kernels),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
