/*
 * test_layout.c - unit tests of layout/: names, special files, .depart,
 * numbers and durations, mount options, limits, and the text of .stats,
 * of .snapshot rows and of .drain.
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

/* Numbers ---------------------------------------------------------------- */

static void test_u64_valid(void **state)
{
	uint64_t v;

	(void)state;
	assert_int_equal(layout_parse_u64("0", &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(layout_parse_u64("42", &v), 0);
	assert_int_equal(v, 42);
	assert_int_equal(layout_parse_u64("007", &v), 0);
	assert_int_equal(v, 7);
	assert_int_equal(layout_parse_u64("18446744073709551615", &v), 0);
	assert_true(v == UINT64_MAX);
}

static void test_u64_refused(void **state)
{
	static const char *const bad[] = {
		"", "-1", "+1", "-0", " 1", "1 ", "1\n", "1x", "x1", "0x10",
		"1.5", "1e3", "1,000", "1_000",
		"18446744073709551616", "99999999999999999999",
		"184467440737095516150",
	};
	uint64_t v = 12345;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (layout_parse_u64(bad[i], &v) != -EINVAL)
			fail_msg("'%s' should be refused", bad[i]);
	}
	assert_int_equal(v, 12345);
}

static void test_seconds_valid(void **state)
{
	static const struct {
		const char *s;
		uint64_t ms;
	} good[] = {
		{ "0", 0 },        { "30", 30000 },  { "1.5", 1500 },
		{ "0.001", 1 },    { "1.05", 1050 }, { "1.500", 1500 },
		{ "0.0", 0 },      { "00.250", 250 }, { "600", 600000 },
		/* The longest duration statefs takes (store.h). */
		{ "1000000000", STORE_DURATION_MAX_MS },
		{ "1000000000.000", STORE_DURATION_MAX_MS },
		{ "999999999.999", STORE_DURATION_MAX_MS - 1 },
	};
	uint64_t ms;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		if (layout_parse_seconds(good[i].s, &ms) != 0)
			fail_msg("'%s' should parse", good[i].s);
		if (ms != good[i].ms)
			fail_msg("'%s' gave %" PRIu64 " ms", good[i].s, ms);
	}
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

static void test_seconds_refused(void **state)
{
	static const char *const bad[] = {
		/* Finer than a millisecond is refused, never rounded. */
		"0.0015", "1.2345", "1.0000",
		"", "1.", ".5", ".", "-1", "+1", "-0.5", "1e3", "1s", " 1",
		"1 ", "1\n", "1,5", "1..5", "1.5.", "0x1", "inf", "nan",
		/* Overflow of the milliseconds. */
		"18446744073709551.616", "18446744073709552",
		"18446744073709551616",
		/* Longer than any duration statefs takes: now + it could
		 * wrap a deadline. */
		"1000000000.001", "1000000001", "18446744073709551.615",
		"18446744073709551", "9223372036854775.808",
	};
	uint64_t ms = 777;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (layout_parse_seconds(bad[i], &ms) != -EINVAL)
			fail_msg("'%s' should be refused", bad[i]);
	}
	assert_int_equal(ms, 777);
}

/* Options ---------------------------------------------------------------- */

static bool limits_equal(const struct store_limits *a,
			 const struct store_limits *b)
{
	return a->max_tenants == b->max_tenants &&
	       a->max_parents == b->max_parents &&
	       a->max_children == b->max_children &&
	       a->max_bytes == b->max_bytes &&
	       a->max_payload == b->max_payload &&
	       a->max_name == b->max_name &&
	       a->max_tombstones == b->max_tombstones &&
	       a->tombstone_ttl_ms == b->tombstone_ttl_ms &&
	       a->parent_quota == b->parent_quota &&
	       a->tenant_quota == b->tenant_quota &&
	       a->tenant_max_parents == b->tenant_max_parents &&
	       a->tenant_max_children == b->tenant_max_children &&
	       a->tenant_max_bytes == b->tenant_max_bytes &&
	       a->tenant_max_tombstones == b->tenant_max_tombstones &&
	       a->max_snapshot_bytes == b->max_snapshot_bytes &&
	       a->user_max_snapshot_bytes == b->user_max_snapshot_bytes &&
	       a->default_ttl_ms == b->default_ttl_ms &&
	       a->drain_window_ms == b->drain_window_ms &&
	       a->testclock == b->testclock;
}

/* The field of @l an option sets, through the .stats text of the root:
 * also checks that every option shows up in .stats. */
static uint64_t stats_value(const struct store_limits *l, const char *key);

static void test_defaults(void **state)
{
	struct store_limits l;
	char err[200];

	(void)state;
	store_limits_default(&l);
	assert_int_equal(l.max_tenants, 1024);
	assert_int_equal(l.max_parents, 65536);
	assert_int_equal(l.max_children, 1048576);
	assert_int_equal(l.max_bytes, 1073741824);
	assert_int_equal(l.max_payload, 65536);
	assert_int_equal(l.max_name, 255);
	assert_int_equal(l.max_tombstones, 65536);
	assert_int_equal(l.tombstone_ttl_ms, 600000);
	assert_int_equal(l.parent_quota, 0);
	assert_int_equal(l.tenant_quota, 0);
	/* Each share is left to the store: half its ceiling. */
	assert_true(l.tenant_max_parents == STORE_SHARE_AUTO);
	assert_true(l.tenant_max_children == STORE_SHARE_AUTO);
	assert_true(l.tenant_max_bytes == STORE_SHARE_AUTO);
	assert_true(l.tenant_max_tombstones == STORE_SHARE_AUTO);
	assert_int_equal(l.max_snapshot_bytes, 536870912);
	assert_true(l.user_max_snapshot_bytes == STORE_SHARE_AUTO);
	assert_int_equal(l.default_ttl_ms, 0);
	assert_int_equal(l.drain_window_ms, 30000);
	assert_false(l.testclock);
	assert_int_equal(layout_limits_check(&l, err, sizeof(err)), 0);
}

static void test_option_valid(void **state)
{
	static const struct {
		const char *opt;
		const char *stats_key;
		uint64_t value;
	} good[] = {
		{ "max_tenants=1", "max_tenants", 1 },
		{ "max_tenants=5000", "max_tenants", 5000 },
		{ "max_parents=7", "max_parents", 7 },
		{ "max_children=18446744073709551615", "max_children",
		  UINT64_MAX },
		{ "max_bytes=4096", "max_bytes", 4096 },
		{ "max_payload=1", "max_payload", 1 },
		{ "max_payload=16777216", "max_payload", 16777216 },
		{ "max_name=1", "max_name", 1 },
		{ "max_name=255", "max_name", 255 },
		{ "max_tombstones=3", "max_tombstones", 3 },
		{ "tombstone_ttl=1.5", "tombstone_ttl_ms", 1500 },
		{ "tombstone_ttl=0.001", "tombstone_ttl_ms", 1 },
		{ "parent_quota=0", "parent_quota", 0 },
		{ "parent_quota=10", "parent_quota", 10 },
		{ "tenant_quota=0", "tenant_quota", 0 },
		{ "tenant_quota=100", "tenant_quota", 100 },
		{ "tenant_max_parents=0", "tenant_max_parents", 0 },
		{ "tenant_max_parents=7", "tenant_max_parents", 7 },
		{ "tenant_max_children=0", "tenant_max_children", 0 },
		{ "tenant_max_children=1000", "tenant_max_children", 1000 },
		{ "tenant_max_bytes=0", "tenant_max_bytes", 0 },
		{ "tenant_max_bytes=4096", "tenant_max_bytes", 4096 },
		{ "tenant_max_tombstones=0", "tenant_max_tombstones", 0 },
		{ "tenant_max_tombstones=3", "tenant_max_tombstones", 3 },
		{ "max_snapshot_bytes=1", "max_snapshot_bytes", 1 },
		{ "max_snapshot_bytes=18446744073709551615",
		  "max_snapshot_bytes", UINT64_MAX },
		{ "user_max_snapshot_bytes=0", "user_max_snapshot_bytes", 0 },
		{ "user_max_snapshot_bytes=4096", "user_max_snapshot_bytes",
		  4096 },
		{ "default_ttl=0", "default_ttl_ms", 0 },
		{ "default_ttl=2.25", "default_ttl_ms", 2250 },
		{ "drain_window=0", "drain_window_ms", 0 },
		{ "drain_window=45", "drain_window_ms", 45000 },
		{ "default_ttl=1000000000", "default_ttl_ms",
		  STORE_DURATION_MAX_MS },
		{ "tombstone_ttl=1000000000", "tombstone_ttl_ms",
		  STORE_DURATION_MAX_MS },
		{ "drain_window=1000000000", "drain_window_ms",
		  STORE_DURATION_MAX_MS },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		struct store_limits l;
		char err[200] = "";

		store_limits_default(&l);
		if (layout_option(&l, good[i].opt, err, sizeof(err)) != 1)
			fail_msg("%s refused: %s", good[i].opt, err);
		if (stats_value(&l, good[i].stats_key) != good[i].value)
			fail_msg("%s not applied", good[i].opt);
		assert_string_equal(err, "");
	}
}

static void test_option_testclock(void **state)
{
	struct store_limits l, before;
	char err[200];

	(void)state;
	store_limits_default(&l);
	assert_int_equal(layout_option(&l, "testclock", err, sizeof(err)), 1);
	assert_true(l.testclock);

	/* The flag takes no value: "testclock=1" is refused, not guessed. */
	store_limits_default(&l);
	before = l;
	assert_int_equal(layout_option(&l, "testclock=1", err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "-o testclock"));
	assert_true(limits_equal(&l, &before));
	assert_int_equal(layout_option(&l, "testclock=", err, sizeof(err)),
			 -EINVAL);
	assert_true(limits_equal(&l, &before));
}

/* A refusal: -EINVAL, limits unchanged, one line that names the option. */
static void check_refused(const char *opt)
{
	struct store_limits l, before;
	char err[300], prefix[64];
	size_t klen = strcspn(opt, "=");

	store_limits_default(&l);
	l.parent_quota = 3; /* not a default, to see it survive */
	before = l;
	err[0] = '\0';
	if (layout_option(&l, opt, err, sizeof(err)) != -EINVAL)
		fail_msg("'%s' should be refused", opt);
	if (!limits_equal(&l, &before))
		fail_msg("'%s' changed the limits", opt);
	if (strchr(err, '\n') || strlen(err) == 0)
		fail_msg("'%s': message not one line: '%s'", opt, err);
	snprintf(prefix, sizeof(prefix), "statefs: ");
	assert_memory_equal(err, prefix, strlen(prefix));
	snprintf(prefix, sizeof(prefix), "-o %.*s", (int)klen, opt);
	if (!strstr(err, prefix))
		fail_msg("'%s': message does not name it: '%s'", opt, err);
}

static void test_option_invalid(void **state)
{
	static const char *const bad[] = {
		"max_tenants=abc", "max_tenants=0", "max_tenants=", "max_tenants",
		"max_tenants=-1", "max_tenants=1.5", "max_tenants= 1",
		"max_tenants=18446744073709551616",
		"max_parents=0", "max_parents=x",
		"max_children=0", "max_children=1k",
		"max_bytes=0", "max_bytes=1G",
		"max_payload=0", "max_payload=16777217",
		"max_payload=99999999999999999999",
		"max_name=0", "max_name=256", "max_name=1000",
		"max_tombstones=0", "max_tombstones=+5",
		"tombstone_ttl=0", "tombstone_ttl=0.000", "tombstone_ttl=0.0005",
		"tombstone_ttl=10m", "tombstone_ttl=-1",
		"parent_quota=-1", "parent_quota=ten",
		"tenant_quota=1.0", "tenant_quota=",
		/* The largest number stands for "half the ceiling": it is
		 * not one to give. */
		"tenant_max_parents=18446744073709551615",
		"tenant_max_parents=-1", "tenant_max_parents=half",
		"tenant_max_children=", "tenant_max_children=1.5",
		"tenant_max_bytes=1G", "tenant_max_bytes=18446744073709551616",
		"tenant_max_tombstones=x", "tenant_max_tombstones",
		"max_snapshot_bytes=0", "max_snapshot_bytes=1M",
		"user_max_snapshot_bytes=18446744073709551615",
		"user_max_snapshot_bytes=",
		"default_ttl=0.0001", "default_ttl=1.", "default_ttl=abc",
		"drain_window=", "drain_window=-30", "drain_window=1e2",
		"testclock=1", "testclock=0",
		/* Over the longest duration (store.h). */
		"default_ttl=1000000000.001", "default_ttl=18446744073709551.615",
		"tombstone_ttl=1000000001", "drain_window=18446744073709551",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		check_refused(bad[i]);
}

static void test_option_message_format(void **state)
{
	struct store_limits l;
	char err[200];

	(void)state;
	store_limits_default(&l);
	assert_int_equal(layout_option(&l, "max_tenants=abc", err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "statefs: bad value for -o max_tenants: "
				 "'abc' (a whole number >= 1)");

	/* A value with a newline still gives one line. */
	assert_int_equal(layout_option(&l, "max_name=1\n2", err, sizeof(err)),
			 -EINVAL);
	assert_null(strchr(err, '\n'));
	assert_non_null(strstr(err, "-o max_name"));
}

static void test_option_message_truncated(void **state)
{
	struct store_limits l, before;
	char err[16];

	(void)state;
	store_limits_default(&l);
	before = l;
	memset(err, 'x', sizeof(err));
	assert_int_equal(layout_option(&l, "max_name=0", err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(strlen(err), sizeof(err) - 1);
	/* No room for a message at all is fine too. */
	assert_int_equal(layout_option(&l, "max_name=0", NULL, 0), -EINVAL);
	assert_int_equal(layout_option(&l, "max_name", NULL, 0), -EINVAL);
	assert_true(limits_equal(&l, &before));
}

static void test_option_unknown(void **state)
{
	static const char *const other[] = {
		"allow_other", "default_permissions", "fsname=statefs",
		"max_read=131072", "max_tenant=3", "max_tenantsx=3",
		"Max_tenants=3", "max_tenantS=3", "testclocK", "testclockx",
		"xtestclock", "", "=5", " max_tenants=3",
	};
	struct store_limits l, before;
	char err[200];

	(void)state;
	store_limits_default(&l);
	before = l;
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
		strcpy(err, "untouched");
		if (layout_option(&l, other[i], err, sizeof(err)) != 0)
			fail_msg("'%s' is not a statefs option", other[i]);
		assert_true(limits_equal(&l, &before));
		assert_string_equal(err, "untouched");
	}
}

/*
 * cache_timeout is the adapter's, not the store's: layout_mount_option
 * takes it (and nothing of the store's), layout_option leaves it to the
 * caller; a refusal names it and changes nothing.
 */
static void test_option_mount(void **state)
{
	static const char *const bad[] = {
		"cache_timeout=9223372036854775.808", "cache_timeout=-1",
		"cache_timeout=abc", "cache_timeout=", "cache_timeout",
		"cache_timeout=1000000000.001",
	};
	struct layout_mount m, before;
	struct store_limits l, lbefore;
	char err[200];

	(void)state;
	layout_mount_default(&m);
	assert_int_equal(m.cache_timeout_ms, 3600 * 1000);
	assert_int_equal(layout_mount_option(&m, "cache_timeout=1.5", err,
					     sizeof(err)), 1);
	assert_int_equal(m.cache_timeout_ms, 1500);
	assert_int_equal(layout_mount_option(&m, "cache_timeout=0", err,
					     sizeof(err)), 1);
	assert_int_equal(m.cache_timeout_ms, 0);
	before = m;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		if (layout_mount_option(&m, bad[i], err, sizeof(err)) != -EINVAL)
			fail_msg("'%s' should be refused", bad[i]);
		assert_memory_equal(&m, &before, sizeof(m));
		assert_memory_equal(err, "statefs: ", 9);
		assert_non_null(strstr(err, "-o cache_timeout"));
		assert_null(strchr(err, '\n'));
	}
	/* Each takes only its own. */
	assert_int_equal(layout_mount_option(&m, "max_tenants=3", err,
					     sizeof(err)), 0);
	assert_int_equal(layout_mount_option(&m, "testclock", err,
					     sizeof(err)), 0);
	assert_memory_equal(&m, &before, sizeof(m));
	store_limits_default(&l);
	lbefore = l;
	assert_int_equal(layout_option(&l, "cache_timeout=5", err,
				       sizeof(err)), 0);
	assert_true(limits_equal(&l, &lbefore));
}

static void test_option_last_wins(void **state)
{
	struct store_limits l;
	char err[200];

	(void)state;
	store_limits_default(&l);
	assert_int_equal(layout_option(&l, "max_name=10", err, sizeof(err)), 1);
	assert_int_equal(layout_option(&l, "max_name=20", err, sizeof(err)), 1);
	assert_int_equal(l.max_name, 20);
	/* A refused one after a good one keeps the good one. */
	assert_int_equal(layout_option(&l, "max_name=0", err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(l.max_name, 20);
}

/* Limits ----------------------------------------------------------------- */

static void check_limits_refused(const struct store_limits *l,
				 const char *key)
{
	char err[300], want[64];

	err[0] = '\0';
	assert_int_equal(layout_limits_check(l, err, sizeof(err)), -EINVAL);
	snprintf(want, sizeof(want), "-o %s:", key);
	if (!strstr(err, want))
		fail_msg("message does not name %s: '%s'", key, err);
	assert_null(strchr(err, '\n'));
	assert_memory_equal(err, "statefs: ", 9);
}

static void test_limits_payload_vs_bytes(void **state)
{
	struct store_limits l;
	char err[200];

	(void)state;
	store_limits_default(&l);
	l.max_bytes = 4096;
	l.max_payload = 4096;
	assert_int_equal(layout_limits_check(&l, err, sizeof(err)), 0);
	l.max_payload = 4097;
	check_limits_refused(&l, "max_payload");
	layout_limits_check(&l, err, sizeof(err));
	assert_non_null(strstr(err, "max_bytes, 4096"));

	/* Through options, as a mount would: each alone is fine. */
	store_limits_default(&l);
	assert_int_equal(layout_option(&l, "max_bytes=1000", err, sizeof(err)),
			 1);
	check_limits_refused(&l, "max_payload");
	assert_int_equal(layout_option(&l, "max_payload=1000", err,
				       sizeof(err)), 1);
	assert_int_equal(layout_limits_check(&l, err, sizeof(err)), 0);
}

static void test_limits_ranges(void **state)
{
	struct store_limits l;

	(void)state;
#define REFUSE(field, v, key)                 \
	do {                                  \
		store_limits_default(&l);     \
		l.field = (v);                \
		check_limits_refused(&l, key); \
	} while (0)
	REFUSE(max_tenants, 0, "max_tenants");
	REFUSE(max_parents, 0, "max_parents");
	REFUSE(max_children, 0, "max_children");
	REFUSE(max_bytes, 0, "max_bytes");
	REFUSE(max_payload, 0, "max_payload");
	REFUSE(max_payload, 16777217, "max_payload");
	REFUSE(max_name, 0, "max_name");
	REFUSE(max_name, 256, "max_name");
	REFUSE(max_tombstones, 0, "max_tombstones");
	REFUSE(tombstone_ttl_ms, 0, "tombstone_ttl");
	REFUSE(tombstone_ttl_ms, STORE_DURATION_MAX_MS + 1, "tombstone_ttl");
	REFUSE(default_ttl_ms, UINT64_MAX, "default_ttl");
	REFUSE(drain_window_ms, STORE_DURATION_MAX_MS + 1, "drain_window");
	/* A share above its ceiling is a mistake, not a wish. */
	REFUSE(tenant_max_parents, 65537, "tenant_max_parents");
	REFUSE(tenant_max_children, 1048577, "tenant_max_children");
	REFUSE(tenant_max_bytes, 1073741825, "tenant_max_bytes");
	REFUSE(tenant_max_tombstones, 65537, "tenant_max_tombstones");
	REFUSE(max_snapshot_bytes, 0, "max_snapshot_bytes");
	REFUSE(user_max_snapshot_bytes, 536870913, "user_max_snapshot_bytes");
#undef REFUSE
}

/* A share is checked against its ceiling as finally set, in any order;
 * 0, its ceiling itself and the default (half of it) pass. */
static void test_limits_shares(void **state)
{
	struct store_limits l;
	char err[200];

	(void)state;
	store_limits_default(&l);
	assert_int_equal(layout_option(&l, "tenant_max_parents=100", err,
				       sizeof(err)), 1);
	assert_int_equal(layout_limits_check(&l, err, sizeof(err)), 0);
	assert_int_equal(layout_option(&l, "max_parents=50", err, sizeof(err)),
			 1);
	check_limits_refused(&l, "tenant_max_parents");
	layout_limits_check(&l, err, sizeof(err));
	assert_non_null(strstr(err, "'100' (at most max_parents, 50)"));
	assert_int_equal(layout_option(&l, "tenant_max_parents=50", err,
				       sizeof(err)), 1);
	assert_int_equal(layout_limits_check(&l, err, sizeof(err)), 0);
	assert_int_equal(layout_option(&l, "tenant_max_parents=0", err,
				       sizeof(err)), 1);
	assert_int_equal(layout_limits_check(&l, err, sizeof(err)), 0);
	/* Left to the store, a share follows its ceiling, even 1. */
	store_limits_default(&l);
	l.max_parents = l.max_children = l.max_bytes = l.max_tombstones = 1;
	l.max_payload = 1;
	assert_int_equal(layout_limits_check(&l, err, sizeof(err)), 0);
}

static void test_limits_message_uses_seconds(void **state)
{
	struct store_limits l;
	char err[200];

	(void)state;
	store_limits_default(&l);
	l.tombstone_ttl_ms = 0;
	assert_int_equal(layout_limits_check(&l, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "-o tombstone_ttl: '0'"));
	assert_int_equal(layout_limits_check(&l, NULL, 0), -EINVAL);
}

/* Help ------------------------------------------------------------------- */

static char *help_text(void)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	assert_non_null(f);
	layout_help(f);
	assert_int_equal(fclose(f), 0);
	return text;
}

static void test_help(void **state)
{
	static const struct {
		const char *spec;
		const char *def;
	} want[] = {
		{ "max_tenants=N", "1024" },
		{ "max_parents=N", "65536" },
		{ "max_children=N", "1048576" },
		{ "max_bytes=N", "1073741824" },
		{ "max_payload=N", "65536" },
		{ "max_name=N", "255" },
		{ "max_tombstones=N", "65536" },
		{ "tombstone_ttl=SECONDS", "600" },
		{ "parent_quota=N", "0" },
		{ "tenant_quota=N", "0" },
		{ "tenant_max_parents=N", "half of max_parents" },
		{ "tenant_max_children=N", "half of max_children" },
		{ "tenant_max_bytes=N", "half of max_bytes" },
		{ "tenant_max_tombstones=N", "half of max_tombstones" },
		{ "max_snapshot_bytes=N", "536870912" },
		{ "user_max_snapshot_bytes=N", "half of max_snapshot_bytes" },
		{ "default_ttl=SECONDS", "0" },
		{ "drain_window=SECONDS", "30" },
		{ "cache_timeout=SECONDS", "3600" },
		{ "testclock", "off" },
	};
	char *text = help_text(), *line, *save = NULL;
	size_t n = 0;
	long column = -1;

	(void)state;
	line = strtok_r(text, "\n", &save);
	assert_non_null(line);
	assert_null(strstr(line, "-o ")); /* a header first */
	while ((line = strtok_r(NULL, "\n", &save))) {
		char prefix[64], def[64];
		const char *meaning;

		/* After the options, what SECONDS may be. */
		if (n == sizeof(want) / sizeof(want[0])) {
			assert_non_null(strstr(line, "SECONDS"));
			assert_non_null(strstr(line, "at most 1000000000 "));
			break;
		}
		snprintf(prefix, sizeof(prefix), "    -o %s ", want[n].spec);
		if (strncmp(line, prefix, strlen(prefix)) != 0)
			fail_msg("help line %zu: '%s'", n, line);
		snprintf(def, sizeof(def), " (default: %s)", want[n].def);
		assert_true(strlen(line) > strlen(def));
		assert_string_equal(line + strlen(line) - strlen(def), def);

		/* The meanings line up in one column. */
		meaning = line + strlen(prefix);
		meaning += strspn(meaning, " ");
		assert_true(*meaning != '(');
		if (column < 0)
			column = meaning - line;
		assert_int_equal(meaning - line, column);
		n++;
	}
	assert_int_equal(n, sizeof(want) / sizeof(want[0]));
	free(text);
}

/*
 * The man page's option list (layout_help_scdoc) has every --help row,
 * in the same order, with the same meaning and default: for each "-o
 * SPEC  MEANING (default: D)" line of --help, the scdoc text has the
 * entry "*-o KEY=*_PLACEHOLDER_" (or "*-o FLAG*") followed by a tab and
 * MEANING (default: D), with scdoc's markup characters escaped.
 */
static void test_help_scdoc(void **state)
{
	char *help = help_text(), *doc = NULL, *line, *save = NULL;
	const char *at;
	size_t len = 0, n = 0;
	FILE *f = open_memstream(&doc, &len);

	(void)state;
	assert_non_null(f);
	layout_help_scdoc(f);
	assert_int_equal(fclose(f), 0);
	at = doc;
	line = strtok_r(help, "\n", &save); /* the header */
	while ((line = strtok_r(NULL, "\n", &save))) {
		char spec[64], key[64], want[512], meaning[256];
		const char *eq, *m, *def;
		size_t o = 0;

		if (strncmp(line, "    -o ", 7) != 0)
			break;
		m = line + 7 + strcspn(line + 7, " ");
		snprintf(spec, sizeof(spec), "%.*s", (int)(m - line - 7), line + 7);
		m += strspn(m, " ");
		def = strstr(m, " (default: ");
		assert_non_null(def);
		/* The meaning and default with '_' and '*' escaped, as scdoc
		 * needs. */
		for (const char *c = m; *c && o + 2 < sizeof(meaning); c++) {
			if (*c == '_' || *c == '*' || *c == '\\')
				meaning[o++] = '\\';
			meaning[o++] = *c;
		}
		meaning[o] = '\0';
		eq = strchr(spec, '=');
		o = 0;
		for (const char *c = spec; c < (eq ? eq + 1 : spec + strlen(spec));
		     c++) {
			if (*c == '_')
				key[o++] = '\\';
			key[o++] = *c;
		}
		key[o] = '\0';
		if (eq)
			snprintf(want, sizeof(want), "*-o %s*_%s_\n\t%s\n\n", key,
				 eq + 1, meaning);
		else
			snprintf(want, sizeof(want), "*-o %s*\n\t%s\n\n", key,
				 meaning);
		at = strstr(at, want);
		if (!at)
			fail_msg("no man page entry for '%s': '%s'", line, want);
		at += strlen(want);
		n++;
	}
	assert_true(n >= 14); /* every option there was when this was written */
	/* Then what SECONDS may be, as --help says it. */
	assert_non_null(strstr(at, "SECONDS: up to 3 decimals, at most 1000000000 "));
	free(doc);
	free(help);
}

/* The source argument ---------------------------------------------------- */

static void test_source(void **state)
{
	static const char *good[] = {
		"none", "statefs", "state", "A_Z~0@x,y=z+", "caf\xc3\xa9", "a.b", "-",
	};
	static const char *bad[] = {
		"", ".", "..", ".hidden", "a b", "a\tb", "a\nb", "a/b", "/dev/sda",
		"redis://h:1 x", "unix:\t",
	};
	static const char *address[] = {
		"redis://127.0.0.1:6379", "unix:/run/redis.sock",
		"sentinel://h1:1,h2:2/m", "a:b",
	};
	char name[300], opt[64], err[200];

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_int_equal(layout_source(good[i], opt, sizeof(opt), err,
					       sizeof(err)), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(layout_source(bad[i], opt, sizeof(opt), err,
					       sizeof(err)), -EINVAL);
		/* One line that says what was refused. */
		assert_non_null(strstr(err, "statefs: "));
		assert_non_null(strstr(err, "source"));
		assert_null(strchr(err, '\n'));
		assert_null(strchr(err, '\t'));
		assert_int_equal(layout_source(bad[i], opt, sizeof(opt), NULL, 0),
				 -EINVAL);
	}
	/* An address is the shared store's: -o store=ADDRESS checks it. */
	for (size_t i = 0; i < sizeof(address) / sizeof(address[0]); i++) {
		char want[64];

		assert_int_equal(layout_source(address[i], opt, sizeof(opt),
					       err, sizeof(err)), 1);
		snprintf(want, sizeof(want), "store=%s", address[i]);
		assert_string_equal(opt, want);
	}
	assert_int_equal(layout_source("redis://h:1", opt, 10, err,
				       sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "'redis://h:1'"));
	/* As long as a name may be, and no longer. */
	memset(name, 'n', 255);
	name[255] = '\0';
	assert_int_equal(layout_source(name, opt, sizeof(opt), err, sizeof(err)),
			 0);
	memset(name, 'n', 256);
	name[256] = '\0';
	assert_int_equal(layout_source(name, opt, sizeof(opt), err, sizeof(err)),
			 -EINVAL);
}

/* .stats ------------------------------------------------------------------ */

struct kv {
	char key[64];
	char value[300];
};

/* Parse "key value\n" lines; returns how many, fails on a malformed one. */
static size_t parse_stats(const char *text, struct kv *kv, size_t max)
{
	size_t n = 0;

	while (*text) {
		const char *nl = strchr(text, '\n');
		const char *sp = strchr(text, ' ');

		assert_non_null(nl); /* every line ends with "\n" */
		assert_non_null(sp);
		assert_true(sp < nl);
		assert_true(sp > text);
		assert_true(n < max);
		assert_null(memchr(sp + 1, ' ', (size_t)(nl - sp - 1)));
		snprintf(kv[n].key, sizeof(kv[n].key), "%.*s",
			 (int)(sp - text), text);
		snprintf(kv[n].value, sizeof(kv[n].value), "%.*s",
			 (int)(nl - sp - 1), sp + 1);
		n++;
		text = nl + 1;
	}
	return n;
}

static const char *const root_keys[] = {
	"instance", "pid", "state", "store", "store_damaged", "locks_held",
	"lock_waiters", "uptime_ms", "tenants", "parents", "children", "links", "tombstones", "bytes",
	"staged_bytes", "snapshot_bytes",
	"max_tenants", "max_parents", "max_children", "max_bytes",
	"max_payload", "max_name", "max_tombstones", "tombstone_ttl_ms",
	"parent_quota", "tenant_quota", "tenant_max_parents",
	"tenant_max_children", "tenant_max_bytes", "tenant_max_tombstones",
	"max_snapshot_bytes", "user_max_snapshot_bytes",
	"default_ttl_ms", "drain_window_ms",
	"admissions", "removals", "expiries", "joins", "leaves",
	"refused_capacity", "refused_quota", "refused_payload",
	"refused_draining", "refused_exists", "refused_stale",
	"refused_conflict", "refused_gone",
};

static const char *const tenant_keys[] = {
	"instance", "state", "store", "store_damaged", "locks_held",
	"lock_waiters", "uptime_ms", "tenant", "tenants", "parents", "children", "links", "tombstones", "bytes",
	"staged_bytes",
	"parent_quota", "tenant_quota", "tenant_max_parents",
	"tenant_max_children", "tenant_max_bytes", "tenant_max_tombstones",
	"max_payload", "max_name",
	"admissions", "removals", "expiries", "joins", "leaves",
	"refused_capacity", "refused_quota", "refused_payload",
	"refused_draining", "refused_exists", "refused_stale",
	"refused_conflict", "refused_gone",
};

#define NKEYS(a) (sizeof(a) / sizeof(a[0]))

/* A view where every number is distinct, so a swapped key shows. */
static void sample_view(struct layout_stats_view *v, struct store_limits *l)
{
	store_limits_default(l);
	l->parent_quota = 12;
	l->tenant_quota = 13;
	l->tenant_max_parents = 14;
	l->tenant_max_children = 15;
	l->tenant_max_bytes = 16;
	l->tenant_max_tombstones = 17;
	l->max_snapshot_bytes = 18;
	l->user_max_snapshot_bytes = 19;
	l->default_ttl_ms = 1500;
	memset(v, 0, sizeof(*v));
	v->instance = 0xabcdef0123ULL;
	v->pid = 4242;
	v->state = STORE_DRAINING;
	v->uptime_ms = 98765;
	v->link = STORE_LINK_DISCONNECTED;
	v->stats.tenants = 101;
	v->stats.parents = 102;
	v->stats.children = 103;
	v->stats.links = 104;
	v->stats.tombstones = 105;
	v->stats.bytes = 106;
	v->stats.snapshot_bytes = 107;
	v->stats.staged_bytes = 108;
	v->stats.admissions = 201;
	v->stats.removals = 202;
	v->stats.expiries = 203;
	v->stats.joins = 204;
	v->stats.leaves = 205;
	v->stats.damaged = 77;
	v->stats.locks_held = 78;
	v->stats.lock_waiters = 79;
	for (int r = 0; r < STORE_NREFUSAL; r++)
		v->stats.refused[r] = 300 + (uint64_t)r;
	v->limits = l;
}

static char *format(const struct layout_stats_view *v)
{
	size_t need = layout_format_stats(NULL, 0, v);
	char *buf = malloc(need + 1);

	assert_non_null(buf);
	assert_int_equal(layout_format_stats(buf, need + 1, v), need);
	assert_int_equal(strlen(buf), need);
	return buf;
}

static const char *value_of(const struct kv *kv, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(kv[i].key, key) == 0)
			return kv[i].value;
	fail_msg("no key %s", key);
	return NULL;
}

static uint64_t u64_of(const struct kv *kv, size_t n, const char *key)
{
	uint64_t v = 0;

	if (layout_parse_u64(value_of(kv, n, key), &v) != 0)
		fail_msg("%s: not a number: '%s'", key, value_of(kv, n, key));
	return v;
}

static void check_common(const struct kv *kv, size_t n)
{
	static const char *const events[] = {
		"admissions", "removals", "expiries", "joins", "leaves",
	};
	static const char *const refusals[] = {
		"refused_capacity", "refused_quota", "refused_payload",
		"refused_draining", "refused_exists", "refused_stale",
		"refused_conflict", "refused_gone",
	};
	static const char *const gauges[] = {
		"tenants", "parents", "children", "links", "tombstones",
		"bytes",
	};

	assert_string_equal(value_of(kv, n, "instance"), "000000abcdef0123");
	assert_string_equal(value_of(kv, n, "state"), "draining");
	assert_string_equal(value_of(kv, n, "store"), "disconnected");
	assert_int_equal(u64_of(kv, n, "store_damaged"), 77);
	assert_int_equal(u64_of(kv, n, "locks_held"), 78);
	assert_int_equal(u64_of(kv, n, "lock_waiters"), 79);
	assert_int_equal(u64_of(kv, n, "uptime_ms"), 98765);
	for (size_t i = 0; i < NKEYS(gauges); i++)
		assert_int_equal(u64_of(kv, n, gauges[i]), 101 + i);
	assert_int_equal(u64_of(kv, n, "staged_bytes"), 108);
	for (size_t i = 0; i < NKEYS(events); i++)
		assert_int_equal(u64_of(kv, n, events[i]), 201 + i);
	_Static_assert(NKEYS(refusals) == STORE_NREFUSAL, "refusal keys");
	for (size_t i = 0; i < NKEYS(refusals); i++)
		assert_int_equal(u64_of(kv, n, refusals[i]), 300 + i);
}

static void test_stats_root(void **state)
{
	struct layout_stats_view v;
	struct store_limits l;
	struct kv kv[64];
	char *text;
	size_t n;

	(void)state;
	sample_view(&v, &l);
	text = format(&v);
	n = parse_stats(text, kv, 64);
	assert_int_equal(n, NKEYS(root_keys));
	for (size_t i = 0; i < n; i++)
		assert_string_equal(kv[i].key, root_keys[i]);
	check_common(kv, n);
	assert_int_equal(u64_of(kv, n, "pid"), 4242);
	assert_int_equal(u64_of(kv, n, "max_tenants"), 1024);
	assert_int_equal(u64_of(kv, n, "max_parents"), 65536);
	assert_int_equal(u64_of(kv, n, "max_children"), 1048576);
	assert_int_equal(u64_of(kv, n, "max_bytes"), 1073741824);
	assert_int_equal(u64_of(kv, n, "max_payload"), 65536);
	assert_int_equal(u64_of(kv, n, "max_name"), 255);
	assert_int_equal(u64_of(kv, n, "max_tombstones"), 65536);
	assert_int_equal(u64_of(kv, n, "tombstone_ttl_ms"), 600000);
	assert_int_equal(u64_of(kv, n, "parent_quota"), 12);
	assert_int_equal(u64_of(kv, n, "tenant_quota"), 13);
	assert_int_equal(u64_of(kv, n, "tenant_max_parents"), 14);
	assert_int_equal(u64_of(kv, n, "tenant_max_children"), 15);
	assert_int_equal(u64_of(kv, n, "tenant_max_bytes"), 16);
	assert_int_equal(u64_of(kv, n, "tenant_max_tombstones"), 17);
	assert_int_equal(u64_of(kv, n, "max_snapshot_bytes"), 18);
	assert_int_equal(u64_of(kv, n, "user_max_snapshot_bytes"), 19);
	assert_int_equal(u64_of(kv, n, "snapshot_bytes"), 107);
	assert_int_equal(u64_of(kv, n, "default_ttl_ms"), 1500);
	assert_int_equal(u64_of(kv, n, "drain_window_ms"), 30000);
	free(text);
	/* The embedded store has no Redis to be damaged. */
	v.link = STORE_LINK_EMBEDDED;
	text = format(&v);
	assert_non_null(strstr(text, "\nstore embedded\nuptime_ms "));
	assert_null(strstr(text, "store_damaged"));
	assert_null(strstr(text, "locks_held"));
	assert_null(strstr(text, "lock_waiters"));
	free(text);
}

static void test_stats_tenant(void **state)
{
	struct layout_stats_view v;
	struct store_limits l;
	struct kv kv[64];
	char *text;
	size_t n;

	(void)state;
	sample_view(&v, &l);
	v.tenant = "acme";
	text = format(&v);
	n = parse_stats(text, kv, 64);
	assert_int_equal(n, NKEYS(tenant_keys));
	for (size_t i = 0; i < n; i++)
		assert_string_equal(kv[i].key, tenant_keys[i]);
	check_common(kv, n);
	assert_string_equal(value_of(kv, n, "tenant"), "acme");
	assert_int_equal(u64_of(kv, n, "parent_quota"), 12);
	assert_int_equal(u64_of(kv, n, "tenant_quota"), 13);
	assert_int_equal(u64_of(kv, n, "tenant_max_parents"), 14);
	assert_int_equal(u64_of(kv, n, "tenant_max_children"), 15);
	assert_int_equal(u64_of(kv, n, "tenant_max_bytes"), 16);
	assert_int_equal(u64_of(kv, n, "tenant_max_tombstones"), 17);
	assert_int_equal(u64_of(kv, n, "max_payload"), 65536);
	assert_int_equal(u64_of(kv, n, "max_name"), 255);
	free(text);
}

static void test_stats_states(void **state)
{
	static const struct {
		enum store_state st;
		const char *word;
	} states[] = {
		{ STORE_READY, "ready" },
		{ STORE_DRAINING, "draining" },
		{ STORE_DRAINED, "drained" },
	};
	struct layout_stats_view v;
	struct store_limits l;
	struct kv kv[64];

	(void)state;
	for (size_t i = 0; i < NKEYS(states); i++) {
		char *text;
		size_t n;

		assert_string_equal(layout_state_name(states[i].st),
				    states[i].word);
		sample_view(&v, &l);
		v.state = states[i].st;
		text = format(&v);
		n = parse_stats(text, kv, 64);
		assert_string_equal(value_of(kv, n, "state"), states[i].word);
		free(text);
	}
}

static void test_stats_extremes(void **state)
{
	struct layout_stats_view v;
	struct store_limits l;
	struct kv kv[64];
	char *text;
	size_t n;

	(void)state;
	sample_view(&v, &l);
	v.instance = UINT64_MAX;
	v.stats.bytes = UINT64_MAX;
	v.stats.tenants = 0;
	l.max_children = UINT64_MAX;
	text = format(&v);
	n = parse_stats(text, kv, 64);
	assert_string_equal(value_of(kv, n, "instance"), "ffffffffffffffff");
	assert_true(u64_of(kv, n, "bytes") == UINT64_MAX);
	assert_int_equal(u64_of(kv, n, "tenants"), 0);
	assert_true(u64_of(kv, n, "max_children") == UINT64_MAX);
	free(text);
}

static void test_stats_truncation(void **state)
{
	struct layout_stats_view v;
	struct store_limits l;
	char *full, small[40];
	size_t need;

	(void)state;
	sample_view(&v, &l);
	full = format(&v);
	need = strlen(full);

	/* Like snprintf: the return is the whole length, the buffer holds a
	 * NUL-terminated prefix. */
	memset(small, 'x', sizeof(small));
	assert_int_equal(layout_format_stats(small, sizeof(small), &v), need);
	assert_int_equal(strlen(small), sizeof(small) - 1);
	assert_memory_equal(small, full, sizeof(small) - 1);

	small[0] = 'x';
	assert_int_equal(layout_format_stats(small, 1, &v), need);
	assert_int_equal(small[0], '\0');

	/* Exactly the length leaves no room for the NUL: one byte short. */
	{
		char *exact = malloc(need);

		assert_non_null(exact);
		assert_int_equal(layout_format_stats(exact, need, &v), need);
		assert_int_equal(strlen(exact), need - 1);
		assert_memory_equal(exact, full, need - 1);
		free(exact);
	}
	free(full);
}

/* Options reach .stats: the value a mount option set is what .stats
 * shows (in ms for durations). */
static uint64_t stats_value(const struct store_limits *l, const char *key)
{
	struct layout_stats_view v;
	struct kv kv[64];
	char *text;
	size_t n;
	uint64_t value;

	memset(&v, 0, sizeof(v));
	v.limits = l;
	text = format(&v);
	n = parse_stats(text, kv, 64);
	value = u64_of(kv, n, key);
	free(text);
	return value;
}

/* .snapshot and .drain ---------------------------------------------------- */

static void test_layout_snapshot_header(void **state)
{
	(void)state;
	assert_string_equal(layout_snapshot_header,
			    "kind\ttenant\tparent\tchild\tgeneration\tversion"
			    "\tsize\tnlink\tttl_ms_left\tinode\n");
}

/* layout_format_snapshot_row(@r) is @want, and snprintf-like. */
static void assert_row_format(const struct store_snap_row *r,
			      const char *want)
{
	char buf[512], small[64];
	size_t need = layout_format_snapshot_row(NULL, 0, r);
	size_t wl = strlen(want);

	assert_int_equal(need, wl);
	memset(buf, 'Z', sizeof buf);
	assert_int_equal(layout_format_snapshot_row(buf, sizeof buf, r), wl);
	assert_string_equal(buf, want);

	/* Exactly big enough, and one byte short. */
	memset(buf, 'Z', sizeof buf);
	assert_int_equal(layout_format_snapshot_row(buf, wl + 1, r), wl);
	assert_string_equal(buf, want);
	assert_int_equal(buf[wl + 1], 'Z');
	memset(buf, 'Z', sizeof buf);
	assert_int_equal(layout_format_snapshot_row(buf, wl, r), wl);
	assert_int_equal(buf[wl - 1], '\0');
	assert_memory_equal(buf, want, wl - 1);
	assert_int_equal(buf[wl], 'Z');

	/* Small capacities: never past @cap, always terminated. */
	for (size_t cap = 1; cap < sizeof small && cap <= wl; cap++) {
		memset(small, 'Z', sizeof small);
		assert_int_equal(layout_format_snapshot_row(small, cap, r), wl);
		assert_int_equal(small[cap - 1], '\0');
		assert_memory_equal(small, want, cap - 1);
		if (cap < sizeof small)
			assert_int_equal(small[cap], 'Z');
	}
	/* cap 0 writes nothing. */
	memset(small, 'Z', sizeof small);
	assert_int_equal(layout_format_snapshot_row(small, 0, r), wl);
	assert_int_equal(small[0], 'Z');
}

static void test_layout_snapshot_rows(void **state)
{
	const struct store_snap_row tenant = {
		STORE_SNAP_TENANT, "acme", "", "", -1, -1, -1, -1, -1, 17, 0, 0, 0
	};
	const struct store_snap_row parent = {
		STORE_SNAP_PARENT, "acme", "w1", "", 3, -1, -1, -1, 4500, 42, 0, 0, 0
	};
	const struct store_snap_row parent_nolease = {
		STORE_SNAP_PARENT, "acme", "w1", "", 1, -1, -1, -1, -1, 43, 0, 0, 0
	};
	const struct store_snap_row child = {
		STORE_SNAP_CHILD, "acme", "w1", "job-7", 3, 12, 65536, 2, 0,
		99, 0, 0, 0
	};
	const struct store_snap_row child_nolease = {
		STORE_SNAP_CHILD, "acme", "w1", "j", 1, 0, 0, 1, -1, 100, 0, 0, 0
	};
	const struct store_snap_row tomb = {
		STORE_SNAP_TOMBSTONE, "acme", "w2", "", 0, -1, -1, -1, 599900,
		-1, 0, 0, 0
	};
	const struct store_snap_row big = {
		STORE_SNAP_CHILD, "t", "p", "c", INT64_MAX, INT64_MAX,
		INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, 0, 0, 0
	};
	const struct store_snap_row utf8 = {
		STORE_SNAP_CHILD, "caf\xc3\xa9", "p", "\xe5\x90\x8d", 1, 1, 1,
		1, -1, 5, 0, 0, 0
	};

	(void)state;
	assert_row_format(&tenant,
			  "tenant\tacme\t-\t-\t-\t-\t-\t-\t-\t17\n");
	assert_row_format(&parent,
			  "parent\tacme\tw1\t-\t3\t-\t-\t-\t4500\t42\n");
	assert_row_format(&parent_nolease,
			  "parent\tacme\tw1\t-\t1\t-\t-\t-\t-\t43\n");
	assert_row_format(&child,
			  "child\tacme\tw1\tjob-7\t3\t12\t65536\t2\t0\t99\n");
	assert_row_format(&child_nolease,
			  "child\tacme\tw1\tj\t1\t0\t0\t1\t-\t100\n");
	assert_row_format(&tomb,
			  "tombstone\tacme\tw2\t-\t0\t-\t-\t-\t599900\t-\n");
	assert_row_format(&big,
			  "child\tt\tp\tc\t9223372036854775807"
			  "\t9223372036854775807\t9223372036854775807"
			  "\t9223372036854775807\t9223372036854775807"
			  "\t9223372036854775807\n");
	assert_row_format(&utf8,
			  "child\tcaf\xc3\xa9\tp\t\xe5\x90\x8d\t1\t1\t1\t1\t-\t5\n");
}

static void assert_drain_format(enum store_state st, uint64_t ms,
				const char *want)
{
	char buf[64], small[32];
	size_t wl = strlen(want);

	assert_int_equal(layout_format_drain(NULL, 0, st, ms), wl);
	memset(buf, 'Z', sizeof buf);
	assert_int_equal(layout_format_drain(buf, sizeof buf, st, ms), wl);
	assert_string_equal(buf, want);
	for (size_t cap = 1; cap <= wl; cap++) {
		memset(small, 'Z', sizeof small);
		assert_int_equal(layout_format_drain(small, cap, st, ms), wl);
		assert_int_equal(small[cap - 1], '\0');
		assert_memory_equal(small, want, cap - 1);
		assert_int_equal(small[cap], 'Z');
	}
	memset(small, 'Z', sizeof small);
	assert_int_equal(layout_format_drain(small, 0, st, ms), wl);
	assert_int_equal(small[0], 'Z');
}

static void test_layout_drain(void **state)
{
	(void)state;
	assert_drain_format(STORE_READY, 0, "ready\n");
	assert_drain_format(STORE_READY, 1234, "ready\n");
	assert_drain_format(STORE_DRAINING, 1234, "draining 1234\n");
	assert_drain_format(STORE_DRAINING, 30000, "draining 30000\n");
	assert_drain_format(STORE_DRAINING, 0, "draining 0\n");
	assert_drain_format(STORE_DRAINING, UINT64_MAX,
			    "draining 18446744073709551615\n");
	assert_drain_format(STORE_DRAINED, 0, "drained\n");
	assert_drain_format(STORE_DRAINED, 77, "drained\n");
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
		cmocka_unit_test(test_u64_valid),
		cmocka_unit_test(test_u64_refused),
		cmocka_unit_test(test_seconds_valid),
		cmocka_unit_test(test_seconds_refused),
		cmocka_unit_test(test_control_ms),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_option_valid),
		cmocka_unit_test(test_option_testclock),
		cmocka_unit_test(test_option_invalid),
		cmocka_unit_test(test_option_message_format),
		cmocka_unit_test(test_option_message_truncated),
		cmocka_unit_test(test_option_unknown),
		cmocka_unit_test(test_option_mount),
		cmocka_unit_test(test_option_last_wins),
		cmocka_unit_test(test_limits_payload_vs_bytes),
		cmocka_unit_test(test_limits_ranges),
		cmocka_unit_test(test_limits_shares),
		cmocka_unit_test(test_limits_message_uses_seconds),
		cmocka_unit_test(test_help),
		cmocka_unit_test(test_help_scdoc),
		cmocka_unit_test(test_source),
		cmocka_unit_test(test_stats_root),
		cmocka_unit_test(test_stats_tenant),
		cmocka_unit_test(test_stats_states),
		cmocka_unit_test(test_stats_extremes),
		cmocka_unit_test(test_stats_truncation),
		cmocka_unit_test(test_layout_snapshot_header),
		cmocka_unit_test(test_layout_snapshot_rows),
		cmocka_unit_test(test_layout_drain),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
