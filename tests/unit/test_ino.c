/*
 * test_ino.c - unit tests of the kernel's inode table (store/ino.c).
 *
 * A remembered node stays reachable by its number, dead once removed,
 * until the kernel forgets it as often as it was remembered; a number the
 * store never handed out names nothing.
 *
 * The fixture (fixture.h) gives each test a fresh store on a manual
 * clock and holds the nodes the test is handed; its teardown releases
 * them and recounts the store (store_check_all).
 */
#include <errno.h>

#include "store/store.h"
#include "tests/unit/unit.h"
#include "tests/unit/fixture.h"

static void test_ino_table_remember_forget(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a, *b, *n;
	struct store_attr at;
	uint64_t ia, ib, ip;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	b = cr(c, p, "b");
	ia = store_node_ino(a);
	ib = store_node_ino(b);
	ip = store_node_ino(p);

	/* The root is always known. */
	n = store_ino_get(c->s, STORE_ROOT_INO);
	assert_non_null(n);
	assert_int_equal(store_node_kind(n), STORE_ROOT);
	put(c, n);

	/* A remembered live node. */
	assert_int_equal(store_ino_remember(c->s, b), 0);
	n = store_ino_get(c->s, ib);
	assert_non_null(n);
	assert_int_equal(store_node_ino(n), ib);
	assert_true(store_node_live(n));
	assert_int_equal(store_getattr(c->s, n, &at), 0);
	put(c, n);

	/* Remembered twice, then removed: reachable, dead, until forgotten. */
	assert_int_equal(store_ino_remember(c->s, a), 0);
	assert_int_equal(store_ino_remember(c->s, a), 0);
	assert_int_equal(store_unlink(c->s, p, "a"), 0);
	drop(c, a);
	a = NULL;
	n = store_ino_get(c->s, ia);
	assert_non_null(n);
	assert_int_equal(store_node_kind(n), STORE_CHILD);
	assert_false(store_node_live(n));
	assert_int_equal(store_getattr(c->s, n, &at), -ESTALE);
	put(c, n);
	store_ino_forget(c->s, ia, 1);
	n = store_ino_get(c->s, ia);
	assert_non_null(n);
	assert_false(store_node_live(n));
	put(c, n);
	store_ino_forget(c->s, ia, 1);
	assert_null(store_ino_get(c->s, ia));

	/* A removed parent the kernel remembers. */
	assert_int_equal(store_ino_remember(c->s, p), 0);
	assert_int_equal(store_rmdir(c->s, t, "p", NULL), 0);
	drop(c, p);
	n = store_ino_get(c->s, ip);
	assert_non_null(n);
	assert_int_equal(store_node_kind(n), STORE_PARENT);
	assert_false(store_node_live(n));
	assert_int_equal(create_rc(c, n, "x", true), -ESTALE);
	put(c, n);
	store_ino_forget(c->s, ip, 1);
	assert_null(store_ino_get(c->s, ip));

	/* b went with p's leave; the kernel still knows it. */
	n = store_ino_get(c->s, ib);
	assert_non_null(n);
	assert_false(store_node_live(n));
	put(c, n);
	store_ino_forget(c->s, ib, 1);
	assert_null(store_ino_get(c->s, ib));
	drop(c, b);

	/* Numbers never handed out, and forgetting unknown numbers. */
	assert_null(store_ino_get(c->s, 1u << 30));
	store_ino_forget(c->s, 1u << 30, 1);

	check_ok(c);
}

/* No inode number the store never handed out names a node, whatever
 * its value (FUSE inode numbers are 64-bit). */
static void test_ino_get_unknown_numbers(void **state)
{
	struct ctx *c = *state;
	const uint64_t probes[] = { 0, 2, 1000, 1ull << 32, 1ull << 62,
				    1ull << 63, (1ull << 63) | 1,
				    (1ull << 63) | 63, UINT64_MAX };

	for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
		struct store_node *n = store_ino_get(c->s, probes[i]);

		if (n) {
			put(c, n);
			fail_msg("store_ino_get(%#llx) gave a node the kernel "
				 "never learned", (unsigned long long)probes[i]);
		}
	}
	check_ok(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_ino_table_remember_forget),
		TEST(test_ino_get_unknown_numbers),
	};

	return run_store_tests("ino", tests);
}
