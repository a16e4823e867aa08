/*
 * test_layout_options.c - unit tests of layout/layout.c's mount options:
 * each option's parsing and range, the documented defaults, the
 * whole-limits check, --help and the man page's option list, and the
 * source argument.
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
#include "tests/unit/layout/stats_text.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
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
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
