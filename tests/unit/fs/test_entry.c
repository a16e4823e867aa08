/*
 * test_entry.c - unit tests of fs/entry.c, with the kernel replaced by a
 * recorder (tests/unit/fs/fixture.h): a failed mkdir, create, mknod or
 * link changes nothing.  Every allocation along each handler fails in
 * turn, the kernel's inode table made to need growing so its one
 * allocation fails too: the counters and .events stay as they were.
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

/* A failed call changes nothing ----------------------------------------------- */

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_failed_entry_calls_change_nothing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
