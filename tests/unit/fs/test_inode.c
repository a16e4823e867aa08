/*
 * test_inode.c - unit tests of fs/inode.c, the kernel's inode table:
 * remember and forget, unknown numbers, churn (the handlers alone,
 * tests/unit/fs/fixture.h's fs_bare).
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
		cmocka_unit_test(test_inode_table_remember_forget),
		cmocka_unit_test(test_inode_table_unknown_numbers),
		cmocka_unit_test(test_inode_table_churn),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
