/*
 * test_node.c - unit tests of nodes and their attributes (store/node.c).
 *
 * A node's identity: inode numbers strictly increase in creation order and
 * are never reused; the special files of the root and of a tenant are
 * nodes of their own, with their own numbers, and are not listed; a node
 * made in a setgid directory takes the directory's group (and a directory
 * the bit), elsewhere the caller's.
 *
 * The fixture (fixture.h) gives each test a fresh store on a manual
 * clock and holds the nodes the test is handed; its teardown releases
 * them and recounts the store (store_check_all).
 */
#include <errno.h>
#include <string.h>

#include "store/store.h"
#include "tests/unit/unit.h"
#include "tests/unit/store/fixture.h"

static void test_inode_numbers_monotone(void **state)
{
	struct ctx *c = *state;
	uint64_t seen[64];
	size_t n = 0;
	struct store_node *t, *p, *x;

	seen[n++] = STORE_ROOT_INO;
	t = mk(c, root(c), "t");
	seen[n++] = store_node_ino(t);
	p = mk(c, t, "p");
	seen[n++] = store_node_ino(p);
	for (int round = 0; round < 4; round++) {
		x = cr(c, p, "c");
		seen[n++] = store_node_ino(x);
		drop(c, x);
		assert_int_equal(store_unlink(c->s, p, "c"), 0);
		x = mk(c, t, "q");
		seen[n++] = store_node_ino(x);
		drop(c, x);
		assert_int_equal(store_rmdir(c->s, t, "q", NULL), 0);
	}
	assert_int_equal(store_rmdir(c->s, root(c), "t", NULL), 0);
	drop(c, p);
	drop(c, t);
	t = mk(c, root(c), "t");
	seen[n++] = store_node_ino(t);
	drop(c, t);

	/* Strictly increasing in creation order, hence never reused. */
	for (size_t i = 1; i < n; i++)
		if (seen[i] <= seen[i - 1])
			fail_msg("ino #%zu = %llu not > #%zu = %llu", i,
				 (unsigned long long)seen[i], i - 1,
				 (unsigned long long)seen[i - 1]);
	check_ok(c);
}

static void test_special_nodes(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *s0 = NULL, *s1 = NULL, *s0b = NULL,
			       *ts = NULL, *n = NULL;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	assert_int_equal(store_special(c->s, root(c), 0, &s0), 0);
	keep(c, s0);
	assert_int_equal(store_node_kind(s0), STORE_SPECIAL);
	assert_int_equal(store_node_slot(s0), 0);
	assert_int_equal(store_node_depth(s0), 1);
	assert_null(store_node_tenant(s0));
	assert_int_equal(store_special(c->s, root(c), 1, &s1), 0);
	keep(c, s1);
	assert_int_equal(store_special(c->s, root(c), 0, &s0b), 0);
	keep(c, s0b);
	assert_int_equal(store_node_ino(s0), store_node_ino(s0b));
	assert_true(store_node_ino(s0) != store_node_ino(s1));
	assert_true(store_node_ino(s0) != STORE_ROOT_INO);

	assert_int_equal(store_special(c->s, t, 0, &ts), 0);
	keep(c, ts);
	assert_int_equal(store_node_depth(ts), 2);
	assert_true(store_node_tenant(ts) == t);
	assert_true(store_node_ino(ts) != store_node_ino(s0));
	assert_true(store_node_ino(ts) != store_node_ino(t));
	assert_true(store_node_ino(ts) != store_node_ino(p));

	assert_int_equal(store_special(c->s, p, 0, &n), -ENOTDIR);
	assert_int_equal(store_special(c->s, t, STORE_NSPECIAL, &n), -EINVAL);
	assert_int_equal(store_special(c->s, t, -1, &n), -EINVAL);
	/* Special files are not listed by the store. */
	assert_list(c, root(c), "t");
	assert_list(c, t, "p");

	assert_int_equal(store_rmdir(c->s, root(c), "t", NULL), 0);
	assert_int_equal(store_special(c->s, t, 0, &n), -ESTALE);
	check_ok(c);
}

/* Owner and group of @n as stat shows them, and its mode bits. */
static void assert_owner(struct ctx *c, struct store_node *n, uid_t uid,
			 gid_t gid, mode_t mode)
{
	struct store_attr a;

	assert_int_equal(store_getattr(c->s, n, &a), 0);
	assert_int_equal(a.uid, uid);
	assert_int_equal(a.gid, gid);
	assert_int_equal(a.mode & 07777, mode);
}

static void chmod_chgrp(struct ctx *c, struct store_node *n, gid_t gid,
			mode_t mode)
{
	struct store_attr in;

	memset(&in, 0, sizeof in);
	in.gid = gid;
	in.mode = mode;
	assert_int_equal(store_setattr(c->s, n, STORE_SET_GID | STORE_SET_MODE,
				       &in, NULL), 0);
}

/*
 * A node made in a setgid directory takes the directory's group; a new
 * directory there is setgid too; elsewhere nodes take the caller's.
 */
static void test_setgid_directories(void **state)
{
	struct ctx *c = *state;
	const struct store_owner u2d = { 1002, 1002, 0755 };
	const struct store_owner u2f = { 1002, 1002, 0640 };
	struct store_node *t, *p, *q, *ch, *plain;
	bool created;

	/* Without the bit: the caller's group. */
	plain = mk_as(c, root(c), "plain", 1002, 0755);
	assert_owner(c, plain, 1002, 1002, 0755);

	/* The root is setgid: a new tenant takes its group and the bit. */
	chmod_chgrp(c, root(c), 3000, 02755);
	assert_int_equal(store_mkdir(c->s, root(c), "t", &u2d, &t), 0);
	keep(c, t);
	assert_owner(c, t, 1002, 3000, 02755);
	/* So its parents, then their children (files: no bit added). */
	assert_int_equal(store_mkdir(c->s, t, "p", &u2d, &p), 0);
	keep(c, p);
	assert_owner(c, p, 1002, 3000, 02755);
	assert_int_equal(store_create(c->s, p, "c", &u2f, true, &ch, &created),
			 0);
	assert_owner(c, ch, 1002, 3000, 0640);
	put(c, ch);
	/* The group the directory has now is what counts. */
	chmod_chgrp(c, p, 2000, 02770);
	assert_int_equal(store_create(c->s, p, "d", &u2f, true, &ch, &created),
			 0);
	assert_owner(c, ch, 1002, 2000, 0640);
	put(c, ch);
	/* The bit removed: the caller's group again. */
	chmod_chgrp(c, t, 3000, 0755);
	assert_int_equal(store_mkdir(c->s, t, "q", &u2d, &q), 0);
	keep(c, q);
	assert_owner(c, q, 1002, 1002, 0755);
	assert_int_equal(store_create(c->s, q, "c", &u2f, true, &ch, &created),
			 0);
	assert_owner(c, ch, 1002, 1002, 0640);
	put(c, ch);
	/* Existing nodes keep theirs. */
	assert_owner(c, plain, 1002, 1002, 0755);

	check_ok(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_inode_numbers_monotone),
		TEST(test_special_nodes),
		TEST(test_setgid_directories),
	};

	return run_store_tests("node", tests);
}
