/*
 * test_inval.c - unit tests of fs/inval.c, with the kernel replaced by a
 * recorder (tests/unit/fs/fixture.h): the replies an invalidation
 * overtook (a lookup, a readdirplus, a getattr held between their
 * computation and the kernel while a .depart or a publication is
 * invalidated: the invalidation is sent again after the reply), and an
 * idle inval thread that does not fall behind.
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_idle_inval_thread_does_not_fall_behind),
		cmocka_unit_test(test_lookup_overtaken_by_depart),
		cmocka_unit_test(test_readdirplus_overtaken_by_depart),
		cmocka_unit_test(test_getattr_overtaken_by_publication),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
