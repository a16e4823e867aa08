/*
 * test_layout_format.c - unit tests of layout/layout.c's formatters: the
 * text of .stats at the root and in a tenant, of .snapshot rows and of
 * .drain, each snprintf-like.
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

/* .stats ------------------------------------------------------------------ */

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
