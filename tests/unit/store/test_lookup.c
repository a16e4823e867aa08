/*
 * test_lookup.c - unit tests of lookup and listing (store/lookup.c).
 *
 * A listing has every entry once, with its inode number and kind, whatever
 * the order of creation, removal, links and rejoins.
 *
 * The fixture (fixture.h) gives each test a fresh store on a manual
 * clock and holds the nodes the test is handed; its teardown releases
 * them and recounts the store (store_check_all).
 */

#include "store/store.h"
#include "tests/unit/unit.h"
#include "tests/unit/store/fixture.h"

static void test_list_entries(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *z;
	struct store_dirlist l = { 0, NULL };

	t = mk(c, root(c), "t");
	assert_int_equal(mkdir_rc(c, root(c), "b"), 0);
	assert_int_equal(mkdir_rc(c, root(c), "a"), 0);
	assert_list(c, root(c), "a,b,t");

	p = mk(c, t, "zz");
	q = mk(c, t, "aa");
	assert_int_equal(mkdir_rc(c, t, "mm"), 0);
	assert_list(c, t, "aa,mm,zz");

	z = cr(c, p, "z");
	assert_int_equal(create_rc(c, p, "a", true), 0);
	assert_int_equal(create_rc(c, p, "m", true), 0);
	assert_list(c, p, "a,m,z");
	assert_int_equal(store_unlink(c->s, p, "a"), 0);
	assert_int_equal(create_rc(c, p, "a", true), 0);
	assert_list(c, p, "a,m,z");
	assert_int_equal(store_link(c->s, z, q, "k"), 0);
	assert_int_equal(create_rc(c, q, "j", true), 0);
	assert_list(c, q, "j,k");

	/* Entries carry the inode number and the kind. */
	assert_int_equal(store_list(c->s, p, &l), 0);
	assert_int_equal(l.n, 3);
	for (size_t i = 0; i < l.n; i++) {
		assert_int_equal(l.e[i].kind, STORE_CHILD);
		assert_int_equal(l.e[i].ino, ino_of(c, p, l.e[i].name));
	}
	store_dirlist_free(&l);
	assert_int_equal(store_list(c->s, t, &l), 0);
	assert_int_equal(l.n, 3);
	assert_int_equal(l.e[0].kind, STORE_PARENT);
	assert_int_equal(l.e[0].ino, store_node_ino(p));
	store_dirlist_free(&l);
	assert_int_equal(store_list(c->s, root(c), &l), 0);
	assert_int_equal(l.n, 3);
	assert_int_equal(l.e[0].kind, STORE_TENANT);
	assert_int_equal(l.e[0].ino, store_node_ino(t));
	store_dirlist_free(&l);

	/* A leave and a rejoin list the parent once. */
	assert_int_equal(store_rmdir(c->s, t, "zz", NULL), 0);
	assert_int_equal(mkdir_rc(c, t, "zz"), 0);
	assert_list(c, t, "aa,mm,zz");
	check_ok(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_list_entries),
	};

	return run_store_tests("lookup", tests);
}
