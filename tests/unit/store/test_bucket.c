/*
 * test_bucket.c - unit tests of a bucket's links and the states they reach
 * (store/bucket.c).
 *
 * Links in two buckets reach one state: a publication through one is
 * seen through the other, the state counts its links, and it ends with
 * its last link, whether that goes by unlink or by the leave of its
 * bucket, not before.
 *
 * The fixture (fixture.h) gives each test a fresh store on a manual
 * clock and holds the nodes the test is handed; its teardown releases
 * them and recounts the store (store_check_all).
 */
#include <errno.h>

#include "store/store.h"
#include "tests/unit/unit.h"
#include "tests/unit/store/fixture.h"

static void test_link_shares_state(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *u, *p, *q, *r, *a, *qa;
	struct store_stats s0, s1;

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	r = mk(c, u, "r");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "shared");

	s0 = stats(c, NULL);
	assert_int_equal(store_link(c->s, a, q, "c"), 0);
	s1 = stats(c, NULL);
	assert_int_equal(s1.admissions, s0.admissions + 1);
	assert_int_equal(nlink(c, a), 2);
	assert_gauges(c, t, 1, 2, 1, 2, 0, 6);
	qa = lk(c, q, "c");
	assert_int_equal(store_node_ino(qa), store_node_ino(a));
	assert_int_equal(nlink(c, qa), 2);
	assert_content(c, qa, "shared");

	/* One state: a publication through one link is seen by the other. */
	publish(c, qa, STORE_STAGE_REPLACE, "new");
	assert_content(c, a, "new");
	assert_int_equal(version(c, a), version(c, qa));
	assert_gauges(c, t, 1, 2, 1, 2, 0, 3);

	/* Existing name, other tenant. */
	s0 = stats(c, NULL);
	assert_int_equal(store_link(c->s, a, q, "c"), -EEXIST);
	assert_int_equal(store_link(c->s, a, r, "a"), -EXDEV);
	s1 = stats(c, NULL);
	assert_gauges_eq(&s0, &s1);
	assert_list(c, r, "");
	assert_int_equal(nlink(c, a), 2);

	/* The state ends with its last link, not before. */
	assert_int_equal(store_unlink(c->s, p, "a"), 0);
	assert_true(store_node_live(a));
	assert_int_equal(nlink(c, a), 1);
	assert_content(c, a, "new");
	assert_gauges(c, t, 1, 2, 1, 1, 0, 3);
	/* A stage keeps working through the remaining link. */
	publish(c, a, STORE_STAGE_APPEND, "er");
	assert_content(c, qa, "newer");
	check_ok(c);

	assert_int_equal(store_unlink(c->s, q, "c"), 0);
	assert_false(store_node_live(a));
	{
		struct store_attr at;

		assert_int_equal(store_getattr(c->s, a, &at), -ESTALE);
	}
	assert_gauges(c, t, 1, 2, 0, 0, 0, 0);
	assert_gauges(c, NULL, 2, 3, 0, 0, 0, 0);
	check_ok(c);
}

static void test_link_survives_leave_of_other_parent(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *a;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "keep");
	assert_int_equal(store_link(c->s, a, q, "a2"), 0);

	assert_int_equal(store_rmdir(c->s, t, "p", NULL), 0);
	assert_true(store_node_live(a));
	assert_int_equal(nlink(c, a), 1);
	assert_content(c, a, "keep");
	assert_int_equal(ino_of(c, q, "a2"), store_node_ino(a));
	assert_gauges(c, t, 1, 1, 1, 1, 1, 4);
	check_ok(c);

	/* And the leave of the last parent ends it. */
	assert_int_equal(store_rmdir(c->s, t, "q", NULL), 0);
	assert_false(store_node_live(a));
	assert_gauges(c, t, 1, 0, 0, 0, 2, 0);
	check_ok(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_link_shares_state),
		TEST(test_link_survives_leave_of_other_parent),
	};

	return run_store_tests("bucket", tests);
}
