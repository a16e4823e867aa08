/*
 * test_statefs_lua.c - the shared store's Redis Functions library as the
 * program carries it (redis/statefs_lua.h, made by the Makefile from the
 * .lua parts of redis/lua/, in the order of LUA_SRC): every part once and
 * nothing else, the same bytes as build/gen/statefs.lua (the text the
 * bats suites load), loadable as is, and in step with the embedded
 * store's numbers (limit defaults, special inode slots).  What the
 * functions do is tested against a real redis-server by
 * tests/bats/redis_functions.bats.
 *
 * Run from the project root (make test does): the parts are read from
 * redis/lua/, the library as built from build/gen/statefs.lua.
 */
#include "tests/unit/unit.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis/statefs_lua.h"
#include "store/store.h"

#define PARTS "redis/lua"
#define BUILT "build/gen/statefs.lua"
#define MAX_PARTS 64

/* The whole of @path, NUL-terminated, its length in *@len; NULL if it
 * cannot be read. */
static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, n = 0, got;

	if (!f)
		return NULL;
	do {
		if (n + 4096 + 1 > cap) {
			char *nb = realloc(buf, cap = (cap ? cap * 2 : 65536));

			if (!nb) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = nb;
		}
		got = fread(buf + n, 1, 4096, f);
		n += got;
	} while (got > 0);
	fclose(f);
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* The number after "@key" at the start of a line of the library, or -1. */
static long long lua_number(const char *key)
{
	const char *p = strstr(store_statefs_lua, key);

	if (!p || (p != store_statefs_lua && p[-1] != '\n'))
		return -1;
	return strtoll(p + strlen(key), NULL, 10);
}

static void test_text_is_loadable(void **state)
{
	static const char first[] = "#!lua name=statefs\n";

	(void)state;
	/* FUNCTION LOAD wants the shebang line first and takes the text up to
	 * its length: no NUL inside, one after. */
	assert_true(store_statefs_lua_len > sizeof(first));
	assert_memory_equal(store_statefs_lua, first, sizeof(first) - 1);
	assert_int_equal(strlen(store_statefs_lua), store_statefs_lua_len);
	assert_int_equal(store_statefs_lua[store_statefs_lua_len - 1], '\n');
}

struct part {
	char name[256];
	size_t at, len;
};

static int part_cmp(const void *a, const void *b)
{
	const struct part *x = a, *y = b;

	return x->at < y->at ? -1 : x->at > y->at;
}

/*
 * The library is the parts of redis/lua/ one after the other, each once,
 * nothing left out (a part the Makefile's LUA_SRC does not list) and
 * nothing else: each part is found in it at the start of a line, and the
 * parts, by where they are found, tile it from its first byte to its
 * last.  contract.lua, with the #!lua line, comes first.
 */
static void test_made_of_the_parts(void **state)
{
	struct part parts[MAX_PARTS];
	size_t n = 0, end = 0;
	DIR *d = opendir(PARTS);
	struct dirent *e;

	(void)state;
	if (!d)
		fail_msg("cannot read %s (run from the project root)", PARTS);
	while ((e = readdir(d))) {
		size_t nl = strlen(e->d_name), len = 0;
		char path[512];
		char *src;
		const char *at;

		if (nl < 5 || strcmp(e->d_name + nl - 4, ".lua") != 0)
			continue;
		if (n == MAX_PARTS || nl >= sizeof(parts[n].name))
			fail_msg("too many parts, or too long a name: %s", e->d_name);
		snprintf(path, sizeof(path), "%s/%s", PARTS, e->d_name);
		src = slurp(path, &len);
		if (!src)
			fail_msg("cannot read %s", path);
		at = strstr(store_statefs_lua, src);
		while (at && at != store_statefs_lua && at[-1] != '\n')
			at = strstr(at + 1, src);
		if (!len || !at)
			fail_msg("%s is not in the library (is it in LUA_SRC?)", path);
		memcpy(parts[n].name, e->d_name, nl + 1);
		parts[n].at = (size_t)(at - store_statefs_lua);
		parts[n].len = len;
		n++;
		free(src);
	}
	closedir(d);
	qsort(parts, n, sizeof(parts[0]), part_cmp);
	assert_true(n > 0);
	assert_string_equal(parts[0].name, "contract.lua");
	for (size_t i = 0; i < n; i++) {
		if (parts[i].at != end)
			fail_msg("%s starts at byte %zu, not %zu where the part before"
				 " it ends", parts[i].name, parts[i].at, end);
		end += parts[i].len;
	}
	assert_int_equal(end, store_statefs_lua_len);
}

static void test_same_bytes_as_built(void **state)
{
	size_t len = 0;
	char *src = slurp(BUILT, &len);

	(void)state;
	if (!src)
		fail_msg("cannot read %s (run from the project root)", BUILT);
	assert_int_equal(len, store_statefs_lua_len);
	assert_memory_equal(src, store_statefs_lua, len);
	free(src);
}

static void test_version(void **state)
{
	(void)state;
	assert_true(lua_number("local LIBVERSION = ") >= 1);
}

static void test_every_function_registered(void **state)
{
	static const char *const fns[] = {
		"sfs_version", "sfs_init", "sfs_mkdir_tenant", "sfs_rmdir_tenant",
		"sfs_join", "sfs_leave", "sfs_depart", "sfs_create", "sfs_unlink",
		"sfs_link", "sfs_rename", "sfs_publish", "sfs_setattr",
		"sfs_set_ttl", "sfs_set_child_ttl", "sfs_renew", "sfs_expire",
		"sfs_drain", "sfs_drain_now", "sfs_clock_advance", "sfs_dump",
		"sfs_stats", "sfs_sync",
		/* The tenant layout's second steps and fan-outs. */
		"sfs_tenant_make", "sfs_tenant_unlist", "sfs_drain_store",
		"sfs_clock_set",
	};
	char pat[64];

	(void)state;
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
		snprintf(pat, sizeof(pat), "\nreg('%s', ", fns[i]);
		if (!strstr(store_statefs_lua, pat))
			fail_msg("%s is not registered", fns[i]);
	}
}

/*
 * The limits a shared store records (LIMITS in the library) start from
 * the embedded store's defaults, so a mount with no options agrees with
 * the store whichever backend made it.
 */
static void test_limit_defaults_match_the_store(void **state)
{
	struct store_limits d;
	const struct {
		const char *name;
		uint64_t value;
	} want[] = {
		{ "max_tenants", 0 }, { "max_parents", 0 }, { "max_children", 0 },
		{ "max_bytes", 0 }, { "max_payload", 0 }, { "max_name", 0 },
		{ "max_tombstones", 0 }, { "tombstone_ttl_ms", 0 },
		{ "parent_quota", 0 }, { "tenant_quota", 0 },
		{ "default_ttl_ms", 0 }, { "drain_window_ms", 0 },
		{ "testclock", 0 }, { "log_max", 0 },
		{ "tenant_max_parents", 0 }, { "tenant_max_children", 0 },
		{ "tenant_max_bytes", 0 }, { "tenant_max_tombstones", 0 },
	};
	uint64_t values[sizeof(want) / sizeof(want[0])];
	const char *table, *end;
	size_t n = sizeof(want) / sizeof(want[0]), rows = 0;

	(void)state;
	store_limits_default(&d);
	values[0] = d.max_tenants;
	values[1] = d.max_parents;
	values[2] = d.max_children;
	values[3] = d.max_bytes;
	values[4] = d.max_payload;
	values[5] = d.max_name;
	values[6] = d.max_tombstones;
	values[7] = d.tombstone_ttl_ms;
	values[8] = d.parent_quota;
	values[9] = d.tenant_quota;
	values[10] = d.default_ttl_ms;
	values[11] = d.drain_window_ms;
	values[12] = d.testclock ? 1 : 0;
	values[13] = STORE_EVENT_LOG; /* a log as long as the event log */
	/* The shares are STORE_SHARE_AUTO: half the ceiling, rounded up. */
	assert_true(d.tenant_max_parents == STORE_SHARE_AUTO &&
		    d.tenant_max_children == STORE_SHARE_AUTO &&
		    d.tenant_max_bytes == STORE_SHARE_AUTO &&
		    d.tenant_max_tombstones == STORE_SHARE_AUTO);
	values[14] = d.max_parents / 2 + d.max_parents % 2;
	values[15] = d.max_children / 2 + d.max_children % 2;
	values[16] = d.max_bytes / 2 + d.max_bytes % 2;
	values[17] = d.max_tombstones / 2 + d.max_tombstones % 2;

	table = strstr(store_statefs_lua, "\nlocal LIMITS = {\n");
	assert_non_null(table);
	end = strstr(table, "\n}\n");
	assert_non_null(end);
	for (const char *p = strstr(table, "{ '"); p && p < end;
	     p = strstr(p + 1, "{ '")) {
		char name[64];
		unsigned long long v;
		size_t i;

		if (sscanf(p, "{ '%63[a-z_]', %llu }", name, &v) != 2)
			fail_msg("bad LIMITS row: %.40s", p);
		for (i = 0; i < n && strcmp(want[i].name, name) != 0; i++)
			;
		if (i == n)
			fail_msg("LIMITS has %s, which the store does not know", name);
		if (v != values[i])
			fail_msg("LIMITS %s defaults to %llu, the store to %" PRIu64,
				 name, v, values[i]);
		rows++;
	}
	assert_int_equal(rows, n);
}

static void test_special_slots_match_the_store(void **state)
{
	(void)state;
	assert_int_equal(lua_number("local NSPECIAL = "), STORE_NSPECIAL);
}

/*
 * The tenant layout numbers tenant TID's nodes TID * 10^10 + n, TID up to
 * tid_max: every number, with room for n, stays below 2^53 (exact in
 * Lua's doubles), the bound ino_end_s the checks of a number use.
 */
static void test_tenant_ranges_stay_exact(void **state)
{
	const char *p = strstr(store_statefs_lua, "local TL = { tid_max = ");
	long long tid_max;

	(void)state;
	assert_non_null(p);
	tid_max = strtoll(p + strlen("local TL = { tid_max = "), NULL, 10);
	assert_true(tid_max > 0);
	assert_true((unsigned long long)(tid_max + 1) * 10000000000ULL <=
		    (1ULL << 53));
	assert_non_null(strstr(p, "ino_end_s = '9007199254740992'"));
}

/*
 * Lua allows a chunk at most 200 local variables, and the library is one
 * chunk: count its top-level ones ("local A, B = ..." is two), so that
 * the limit is met here rather than at FUNCTION LOAD.
 */
static void test_top_level_locals_fit(void **state)
{
	unsigned n = 0;

	(void)state;
	for (const char *p = store_statefs_lua; (p = strstr(p, "\nlocal ")); p++) {
		const char *e = p + 7, *stop = strpbrk(e, "=(\n");

		if (strncmp(e, "function ", 9) == 0) {
			n++;
			continue;
		}
		n++;
		for (const char *c = e; stop && c < stop; c++)
			n += *c == ',';
	}
	if (n > 200)
		fail_msg("%u top-level locals: Lua allows 200", n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text_is_loadable),
		cmocka_unit_test(test_made_of_the_parts),
		cmocka_unit_test(test_same_bytes_as_built),
		cmocka_unit_test(test_version),
		cmocka_unit_test(test_every_function_registered),
		cmocka_unit_test(test_limit_defaults_match_the_store),
		cmocka_unit_test(test_special_slots_match_the_store),
		cmocka_unit_test(test_tenant_ranges_stay_exact),
		cmocka_unit_test(test_top_level_locals_fit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
