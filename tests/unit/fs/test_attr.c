/*
 * test_attr.c - unit tests of fs/attr.c, with the kernel replaced by a
 * recorder (tests/unit/fs/fixture.h): a refused setattr renews no lease.
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refused_setattr_renews_nothing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
