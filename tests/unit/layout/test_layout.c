/*
 * test_layout.c - unit tests of layout/layout.c's names and control
 * values: names, special files, .depart and the control files' numbers.
 * Its options, limits, --help and source are in test_layout_options.c,
 * the text of .stats, .snapshot rows and .drain in test_layout_format.c;
 * the numbers and durations of layout/parse.c in test_parse.c.
 *
 * layout/ is pure, so every test calls it directly; the only store
 * function used is store_limits_default(), for the documented defaults.
 */
#include "tests/unit/unit.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "layout/layout.h"

/* A name of @len bytes of 'a' in @buf (capacity >= len + 1). */
static const char *name_of(char *buf, size_t len)
{
	memset(buf, 'a', len);
	buf[len] = '\0';
	return buf;
}

/* Names ------------------------------------------------------------------ */

static int depart(const char *text, char *name);

/*
 * layout_name_check's answer for @name at every depth (a tenant's, a
 * parent's and a child's name), where the rules are the same; INT_MIN
 * (no answer it gives) when the depths disagree.
 */
static int name_rc(const char *name, size_t max_name)
{
	int rc = layout_name_check(name, max_name, LAYOUT_TENANT);

	if (layout_name_check(name, max_name, LAYOUT_PARENT) != rc ||
	    layout_name_check(name, max_name, LAYOUT_CHILD) != rc)
		return INT_MIN;
	return rc;
}

static void test_name_valid(void **state)
{
	(void)state;
	assert_int_equal(name_rc("a", 255), 0);
	assert_int_equal(name_rc("worker-1", 255), 0);
	assert_int_equal(name_rc("a.b", 255), 0);
	assert_int_equal(name_rc("a.", 255), 0);
	assert_int_equal(name_rc("A_Z~0:9@x,y=z+", 255), 0);
	/* UTF-8 multibyte names: every byte >= 0x80 is allowed. */
	assert_int_equal(name_rc("caf\xc3\xa9", 255), 0);
	assert_int_equal(name_rc("\xe5\x90\x8d\xe5\x89\x8d", 255), 0);
	assert_int_equal(name_rc("\x80\xff", 255), 0);
}

static void test_name_empty(void **state)
{
	(void)state;
	assert_int_equal(name_rc("", 255), -EINVAL);
}

static void test_name_length(void **state)
{
	char buf[300];

	(void)state;
	assert_int_equal(name_rc(name_of(buf, 255), 255), 0);
	assert_int_equal(name_rc(name_of(buf, 256), 255), -ENAMETOOLONG);
	assert_int_equal(name_rc(name_of(buf, 299), 255), -ENAMETOOLONG);
	/* A smaller max_name is the bound, whatever NAME_MAX is. */
	assert_int_equal(name_rc(name_of(buf, 8), 8), 0);
	assert_int_equal(name_rc(name_of(buf, 9), 8), -ENAMETOOLONG);
	assert_int_equal(name_rc(name_of(buf, 1), 1), 0);
	assert_int_equal(name_rc(name_of(buf, 2), 1), -ENAMETOOLONG);
	/* Multibyte characters count in bytes: 2 chars, 4 bytes. */
	assert_int_equal(name_rc("\xc3\xa9\xc3\xa9", 3), -ENAMETOOLONG);
	assert_int_equal(name_rc("\xc3\xa9\xc3\xa9", 4), 0);
}

static void test_name_leading_dot(void **state)
{
	static const int dirs[] = { LAYOUT_TENANT, LAYOUT_PARENT };

	(void)state;
	assert_int_equal(name_rc(".", 255), -EINVAL);
	assert_int_equal(name_rc("..", 255), -EINVAL);
	/* The root and the tenants hold the special files: a tenant's or
	 * a parent's name never begins with a dot. */
	for (size_t d = 0; d < 2; d++) {
		assert_int_equal(layout_name_check(".stats", 255, dirs[d]),
				 -EINVAL);
		assert_int_equal(layout_name_check(".hidden", 255, dirs[d]),
				 -EINVAL);
		assert_int_equal(layout_name_check("...", 255, dirs[d]),
				 -EINVAL);
	}
	/* A parent has none: a child's may (rsync's ".f.XXXXXX", vim's
	 * ".f.swp"), the other rules unchanged. */
	assert_int_equal(layout_name_check(".hidden", 255, LAYOUT_CHILD), 0);
	assert_int_equal(layout_name_check(".stats", 255, LAYOUT_CHILD), 0);
	assert_int_equal(layout_name_check(".events", 255, LAYOUT_CHILD), 0);
	assert_int_equal(layout_name_check("...", 255, LAYOUT_CHILD), 0);
	assert_int_equal(layout_name_check(".f.swp", 255, LAYOUT_CHILD), 0);
	assert_int_equal(layout_name_check(".a b", 255, LAYOUT_CHILD), -EINVAL);
	assert_int_equal(layout_name_check(".\t", 255, LAYOUT_CHILD), -EINVAL);
	assert_int_equal(layout_name_check(".x/", 255, LAYOUT_CHILD), -EINVAL);
	assert_int_equal(layout_name_check(".abc", 3, LAYOUT_CHILD),
			 -ENAMETOOLONG);
}

static void test_name_bad_bytes(void **state)
{
	static const char *const bad[] = {
		"a\x01", "\x01", "a\x1f" "b", "a\x7f", "\x7f",
		"a b", " a", "a ", "a\tb", "a\nb", "a\n", "a\rb",
		"a\x0b" "b", "a\x0c" "b", "a/b", "/",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (name_rc(bad[i], 255) != -EINVAL)
			fail_msg("name %zu should be refused", i);
	}
	/* The bytes around the refused ranges pass. */
	assert_int_equal(name_rc("a\x21" "b", 255), 0);
	assert_int_equal(name_rc("a\x7e" "b", 255), 0);
	assert_int_equal(name_rc("a\x80" "b", 255), 0);
}

/* "-" is what .events and .snapshot write in a field that does not apply
 * (a tenant's row has "-" for its parent and child): no node has it, at
 * any depth, nor a .depart; a name that only begins or ends with '-' is
 * a name like any other. */
static void test_name_dash(void **state)
{
	char name[256];

	(void)state;
	assert_int_equal(name_rc("-", 255), -EINVAL);
	assert_int_equal(name_rc("-", 1), -EINVAL);
	assert_int_equal(depart("-", name), -EINVAL);
	assert_int_equal(depart("-\n", name), -EINVAL);
	assert_int_equal(name_rc("--", 255), 0);
	assert_int_equal(name_rc("-a", 255), 0);
	assert_int_equal(name_rc("a-", 255), 0);
	assert_int_equal(depart("-a\n", name), 0);
	assert_string_equal(name, "-a");
}

/* Special files ---------------------------------------------------------- */

static void test_special_root(void **state)
{
	const struct layout_special *sp;

	(void)state;
	sp = layout_special_find(".stats", LAYOUT_ROOT);
	assert_non_null(sp);
	assert_string_equal(sp->name, ".stats");
	assert_int_equal(sp->slot, LAYOUT_SLOT_STATS);
	assert_int_equal(sp->mode, S_IFREG | 0444);
	assert_true(sp->scope & LAYOUT_SCOPE_ROOT);
	assert_null(layout_special_find(".depart", LAYOUT_ROOT));
}

static void test_special_tenant(void **state)
{
	const struct layout_special *sp;

	(void)state;
	sp = layout_special_find(".stats", LAYOUT_TENANT);
	assert_non_null(sp);
	assert_int_equal(sp->slot, LAYOUT_SLOT_STATS);
	assert_int_equal(sp->mode, S_IFREG | 0444);
	assert_true(sp->scope & LAYOUT_SCOPE_TENANT);

	sp = layout_special_find(".depart", LAYOUT_TENANT);
	assert_non_null(sp);
	assert_string_equal(sp->name, ".depart");
	assert_int_equal(sp->slot, LAYOUT_SLOT_DEPART);
	assert_int_equal(sp->mode, S_IFREG | 0200);
	assert_true(sp->scope & LAYOUT_SCOPE_TENANT);
}

static void test_special_none_deeper(void **state)
{
	static const int depths[] = { LAYOUT_PARENT, LAYOUT_CHILD, -1, 4 };

	(void)state;
	for (size_t i = 0; i < sizeof(depths) / sizeof(depths[0]); i++) {
		assert_null(layout_special_find(".stats", depths[i]));
		assert_null(layout_special_find(".depart", depths[i]));
		assert_null(layout_special_nth(depths[i], 0));
	}
}

static void test_special_exact_names(void **state)
{
	static const char *const near[] = {
		"stats", ".Stats", ".stats2", ".stat", ".stats\n", "", ".",
		"..", ".depart ", "depart",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(near) / sizeof(near[0]); i++) {
		assert_null(layout_special_find(near[i], LAYOUT_ROOT));
		assert_null(layout_special_find(near[i], LAYOUT_TENANT));
	}
}

static void test_special_slot(void **state)
{
	(void)state;
	assert_string_equal(layout_special_slot(LAYOUT_SLOT_STATS)->name,
			    ".stats");
	assert_string_equal(layout_special_slot(LAYOUT_SLOT_DEPART)->name,
			    ".depart");
	assert_null(layout_special_slot(-1));
	assert_null(layout_special_slot(STORE_NSPECIAL));
	for (int s = 0; s < STORE_NSPECIAL; s++) {
		const struct layout_special *sp = layout_special_slot(s);

		if (sp)
			assert_int_equal(sp->slot, s);
	}
}

static void test_special_nth(void **state)
{
	(void)state;
	assert_string_equal(layout_special_nth(LAYOUT_ROOT, 0)->name, ".stats");
	assert_string_equal(layout_special_nth(LAYOUT_ROOT, 1)->name, ".events");
	assert_string_equal(layout_special_nth(LAYOUT_ROOT, 2)->name, ".clock");
	assert_string_equal(layout_special_nth(LAYOUT_ROOT, 3)->name, ".snapshot");
	assert_string_equal(layout_special_nth(LAYOUT_ROOT, 4)->name, ".drain");
	assert_null(layout_special_nth(LAYOUT_ROOT, 5));
	assert_string_equal(layout_special_nth(LAYOUT_TENANT, 0)->name,
			    ".stats");
	assert_string_equal(layout_special_nth(LAYOUT_TENANT, 1)->name,
			    ".depart");
	assert_string_equal(layout_special_nth(LAYOUT_TENANT, 2)->name,
			    ".events");
	assert_string_equal(layout_special_nth(LAYOUT_TENANT, 3)->name,
			    ".snapshot");
	assert_string_equal(layout_special_nth(LAYOUT_TENANT, 4)->name,
			    ".drain");
	assert_null(layout_special_nth(LAYOUT_TENANT, 5));
	assert_null(layout_special_nth(LAYOUT_TENANT, (size_t)-1));
}

/* Whatever the table grows into: every listed file is found by name and
 * slot, lives in a store slot, and its name is reserved (leading '.'). */
static void test_special_table_consistent(void **state)
{
	static const int dirs[] = { LAYOUT_ROOT, LAYOUT_TENANT };

	(void)state;
	for (size_t d = 0; d < 2; d++) {
		bool seen[STORE_NSPECIAL] = { false };
		const struct layout_special *sp;

		for (size_t i = 0; (sp = layout_special_nth(dirs[d], i)); i++) {
			assert_in_range(sp->slot, 0, STORE_NSPECIAL - 1);
			assert_false(seen[sp->slot]);
			seen[sp->slot] = true;
			assert_ptr_equal(layout_special_find(sp->name, dirs[d]),
					 sp);
			assert_ptr_equal(layout_special_slot(sp->slot), sp);
			assert_int_equal(sp->name[0], '.');
			assert_int_equal(name_rc(sp->name + 1, 255), 0);
			assert_true(S_ISREG(sp->mode));
		}
	}
}

/* .depart ---------------------------------------------------------------- */

static int depart(const char *text, char *name)
{
	return layout_parse_depart(text, strlen(text), 255, name, 256);
}

static void test_depart_valid(void **state)
{
	char name[256];

	(void)state;
	assert_int_equal(depart("worker-1", name), 0);
	assert_string_equal(name, "worker-1");
	assert_int_equal(depart("worker-2\n", name), 0);
	assert_string_equal(name, "worker-2");
	assert_int_equal(depart("caf\xc3\xa9\n", name), 0);
	assert_string_equal(name, "caf\xc3\xa9");
}

static void test_depart_not_nul_terminated(void **state)
{
	char name[256];

	(void)state;
	/* Only @len bytes count: what follows in memory is not the name. */
	assert_int_equal(layout_parse_depart("pqr", 1, 255, name, 256), 0);
	assert_string_equal(name, "p");
	assert_int_equal(layout_parse_depart("p\nqr", 2, 255, name, 256), 0);
	assert_string_equal(name, "p");
}

static void test_depart_refused(void **state)
{
	static const char *const bad[] = {
		"", "\n", "\n\n", "a\n\n", "a\nb", "a\nb\n", "a b", "a b\n",
		" a\n", "a\t\n", "a\r\n", ".a\n", ".\n", "a/b\n", "\x01\n",
	};
	char name[256];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		strcpy(name, "untouched");
		if (depart(bad[i], name) != -EINVAL)
			fail_msg(".depart text %zu should be refused", i);
		assert_string_equal(name, "untouched");
	}
	/* An embedded NUL is a control byte, not the end of the name. */
	assert_int_equal(layout_parse_depart("a\0b", 3, 255, name, 256),
			 -EINVAL);
	assert_int_equal(layout_parse_depart("a\0", 2, 255, name, 256),
			 -EINVAL);
}

static void test_depart_length(void **state)
{
	char text[300], name[256];

	(void)state;
	name_of(text, 255);
	assert_int_equal(depart(text, name), 0);
	assert_int_equal(strlen(name), 255);
	strcat(text, "\n");
	assert_int_equal(depart(text, name), 0);
	assert_int_equal(strlen(name), 255);

	strcpy(name, "untouched");
	name_of(text, 256);
	assert_int_equal(depart(text, name), -ENAMETOOLONG);
	strcat(text, "\n");
	assert_int_equal(depart(text, name), -ENAMETOOLONG);
	assert_string_equal(name, "untouched");

	/* max_name bounds it, and so does the caller's buffer. */
	assert_int_equal(layout_parse_depart("abcd\n", 5, 3, name, 256),
			 -ENAMETOOLONG);
	assert_int_equal(layout_parse_depart("abcd\n", 5, 255, name, 4),
			 -ENAMETOOLONG);
	assert_string_equal(name, "untouched");
	assert_int_equal(layout_parse_depart("abcd\n", 5, 255, name, 5), 0);
	assert_string_equal(name, "abcd");
}

/* .clock: a number of ms, at most STORE_DURATION_MAX_MS. */
static void test_control_ms(void **state)
{
	static const char *const bad[] = {
		"", "\n", "-1", "1.5", "1 ", "1\n\n", "1000000000001",
		"18446744073709550615", "18446744073709551615",
		"18446744073709551616",
	};
	uint64_t ms = 777;

	(void)state;
	assert_int_equal(layout_parse_control_ms("5\n", 2, &ms), 0);
	assert_int_equal(ms, 5);
	assert_int_equal(layout_parse_control_ms("1000000000000", 13, &ms), 0);
	assert_true(ms == STORE_DURATION_MAX_MS);
	ms = 777;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (layout_parse_control_ms(bad[i], strlen(bad[i]), &ms) != -EINVAL)
			fail_msg("'%s' should be refused", bad[i]);
	}
	assert_int_equal(ms, 777);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_name_valid),
		cmocka_unit_test(test_name_empty),
		cmocka_unit_test(test_name_length),
		cmocka_unit_test(test_name_leading_dot),
		cmocka_unit_test(test_name_bad_bytes),
		cmocka_unit_test(test_name_dash),
		cmocka_unit_test(test_special_root),
		cmocka_unit_test(test_special_tenant),
		cmocka_unit_test(test_special_none_deeper),
		cmocka_unit_test(test_special_exact_names),
		cmocka_unit_test(test_special_slot),
		cmocka_unit_test(test_special_nth),
		cmocka_unit_test(test_special_table_consistent),
		cmocka_unit_test(test_depart_valid),
		cmocka_unit_test(test_depart_not_nul_terminated),
		cmocka_unit_test(test_depart_refused),
		cmocka_unit_test(test_depart_length),
		cmocka_unit_test(test_control_ms),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
