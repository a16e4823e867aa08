/*
 * test_cred.c - unit tests of the permission predicates (store/cred.c):
 * the class Linux picks (owner, group, other), supplementary groups, uid
 * 0, the listing rule of the root's .snapshot and .events, the sticky
 * bit, and which privilege bits a write clears.  Pure functions: no store.
 */
#include "tests/unit/unit.h"

#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "store/store.h"

static const gid_t GROUPS[] = { 3000, 2000 };

static const struct store_cred ROOT = { 0, 0, NULL, 0 };
static const struct store_cred U1 = { 1001, 1001, GROUPS + 1, 1 }; /* + 2000 */
static const struct store_cred U2 = { 1002, 1002, GROUPS, 2 };     /* + 3000, 2000 */
static const struct store_cred U3 = { 1003, 1003, NULL, 0 };

static void test_list_by_class(void **state)
{
	(void)state;
	/* A 0700 directory of 1001: its owner only (and root). */
	assert_true(store_cred_may_list(&U1, 1001, 1001, 0700));
	assert_false(store_cred_may_list(&U2, 1001, 1001, 0700));
	assert_false(store_cred_may_list(&U3, 1001, 1001, 0700));
	assert_true(store_cred_may_list(&ROOT, 1001, 1001, 0700));
	assert_true(store_cred_may_list(&ROOT, 1001, 1001, 0));
	/* 0755: everyone. */
	assert_true(store_cred_may_list(&U2, 1001, 1001, 0755));
	assert_true(store_cred_may_list(&U3, 1001, 1001, 0755));
	/* 0750, group 2000: members through a supplementary group. */
	assert_true(store_cred_may_list(&U2, 1001, 2000, 0750));
	assert_false(store_cred_may_list(&U3, 1001, 2000, 0750));
	/* ... and through the primary gid. */
	assert_true(store_cred_may_list(&U3, 1001, 1003, 0750));
	/* Read without search (0744) or search without read (0711) is not
	 * enough to list. */
	assert_false(store_cred_may_list(&U3, 1001, 1001, 0744));
	assert_false(store_cred_may_list(&U3, 1001, 1001, 0711));
	assert_true(store_cred_may_list(&U1, 1001, 1001, 0500));
	assert_false(store_cred_may_list(&U1, 1001, 1001, 0300));
}

/* The first class that matches decides, as on Linux: an owner without
 * the bits is refused even when group or other have them. */
static void test_first_class_decides(void **state)
{
	(void)state;
	assert_false(store_cred_may_list(&U1, 1001, 1001, 0077));
	assert_false(store_cred_may_list(&U2, 1001, 2000, 0707));
	assert_true(store_cred_may_list(&U3, 1001, 2000, 0705));
	/* The special bits never count as permissions. */
	assert_false(store_cred_may_list(&U3, 1001, 1001, 07700));
	assert_true(store_cred_may_list(&U3, 1001, 1001, 07705));
}

static void test_may_bits(void **state)
{
	(void)state;
	assert_true(store_cred_may(&U1, 1001, 1001, 0300,
				   STORE_MAY_WRITE | STORE_MAY_EXEC));
	assert_false(store_cred_may(&U1, 1001, 1001, 0500,
				    STORE_MAY_WRITE | STORE_MAY_EXEC));
	assert_false(store_cred_may(&U2, 1001, 2000, 0750,
				    STORE_MAY_WRITE | STORE_MAY_EXEC));
	assert_true(store_cred_may(&U2, 1001, 2000, 0770,
				   STORE_MAY_WRITE | STORE_MAY_EXEC));
	assert_true(store_cred_may(&U3, 1001, 1001, 0777,
				   STORE_MAY_READ | STORE_MAY_WRITE | STORE_MAY_EXEC));
	assert_false(store_cred_may(&U3, 1001, 1001, 0776, STORE_MAY_EXEC));
	assert_true(store_cred_may(&U3, 1001, 1001, 0, 0));
	assert_true(store_cred_may(&ROOT, 1001, 1001, 0,
				   STORE_MAY_READ | STORE_MAY_WRITE | STORE_MAY_EXEC));
}

static void test_sticky(void **state)
{
	(void)state;
	/* Not sticky: the bit decides nothing. */
	assert_true(store_cred_sticky_ok(&U3, 1001, 0777, 1002));
	/* Sticky: the entry's owner, the directory's owner, root. */
	assert_true(store_cred_sticky_ok(&U2, 1001, 01777, 1002));
	assert_true(store_cred_sticky_ok(&U1, 1001, 01777, 1002));
	assert_true(store_cred_sticky_ok(&ROOT, 1001, 01777, 1002));
	assert_false(store_cred_sticky_ok(&U3, 1001, 01777, 1002));
	/* Group membership does not help. */
	assert_false(store_cred_sticky_ok(&U2, 1001, 01770, 1001));
}

static void test_kill_suidgid(void **state)
{
	const unsigned both = STORE_SET_KILL_SUID | STORE_SET_KILL_SGID;

	(void)state;
	/* Without CAP_FSETID: set-user-ID always, owner or not. */
	assert_int_equal(store_cred_kill_suidgid(&U3, false, 1001, 04755),
			 STORE_SET_KILL_SUID);
	assert_int_equal(store_cred_kill_suidgid(&U1, false, 1001, 04755),
			 STORE_SET_KILL_SUID);
	/* Set-group-ID with group execute: always. */
	assert_int_equal(store_cred_kill_suidgid(&U3, false, 1001, 06777), both);
	assert_int_equal(store_cred_kill_suidgid(&U1, false, 1001, 02750),
			 STORE_SET_KILL_SGID);
	/* Without group execute: only for a writer outside the group
	 * (primary or supplementary). */
	assert_int_equal(store_cred_kill_suidgid(&U1, false, 2000, 02766), 0);
	assert_int_equal(store_cred_kill_suidgid(&U3, false, 1003, 02766), 0);
	assert_int_equal(store_cred_kill_suidgid(&U3, false, 2000, 02766),
			 STORE_SET_KILL_SGID);
	/* Nothing to clear, or CAP_FSETID: nothing. */
	assert_int_equal(store_cred_kill_suidgid(&U3, false, 1001, 0777), 0);
	assert_int_equal(store_cred_kill_suidgid(&U3, true, 2000, 06777), 0);
	assert_int_equal(store_cred_kill_suidgid(&ROOT, true, 2000, 06766), 0);
	/* uid 0 without the capability is no exception. */
	assert_int_equal(store_cred_kill_suidgid(&ROOT, false, 2000, 06766),
			 both);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_list_by_class),
		cmocka_unit_test(test_first_class_decides),
		cmocka_unit_test(test_may_bits),
		cmocka_unit_test(test_sticky),
		cmocka_unit_test(test_kill_suidgid),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
