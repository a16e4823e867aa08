/*
 * test_faults.c - every allocation along every transition fails in turn.
 *
 * For each transition and each N = 1, 2, ...: build a fresh store with a
 * little of everything, record its full state (the root snapshot, the
 * gauges, a recount), make the Nth allocation from now fail, run the
 * transition.  It must either succeed or return -ENOMEM and leave the
 * store exactly as before.  N grows until the transition makes fewer than
 * N allocations, so every allocation point of the path has failed once.
 */
#include "tests/unit/unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout/layout.h"
#include "store/store.h"

struct fx {
	struct fake_clock clk;
	struct store *s;
	struct store_node *t, *p, *p2, *a;
};

/* @call must succeed; then the node it filled in. */
#define must(call, n) (assert_int_equal((call), 0), (n))

static void fx_open(struct fx *f)
{
	struct store_limits l;
	struct store_clock c = { fake_clock_now, &f->clk };
	struct store_owner o = { 0, 0, 0755 };
	struct store_node *n = NULL, *old = NULL;
	struct store_stage *st;
	bool created;

	memset(f, 0, sizeof(*f));
	store_limits_default(&l);
	assert_int_equal(store_new(&l, &c, &f->s), 0);
	f->t = must(store_mkdir(f->s, store_root(f->s), "t", &o, &n), n);
	f->p = must(store_mkdir(f->s, f->t, "p", &o, &n), n);
	f->p2 = must(store_mkdir(f->s, f->t, "p2", &o, &n), n);
	f->a = must(store_create(f->s, f->p, "a", &o, false, &n, &created), n);
	assert_int_equal(store_stage_open(f->s, f->a, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_write(st, "hello", 5, 0), 5);
	assert_int_equal(store_stage_publish(st), 0);
	store_stage_close(st);
	/* A tombstone to rejoin from. */
	old = must(store_mkdir(f->s, f->t, "old", &o, &n), n);
	store_node_unref(f->s, old);
	assert_int_equal(store_rmdir(f->s, f->t, "old", NULL), 0);
}

static void fx_close(struct fx *f)
{
	store_node_unref(f->s, f->a);
	store_node_unref(f->s, f->p2);
	store_node_unref(f->s, f->p);
	store_node_unref(f->s, f->t);
	store_free(f->s);
}

/* Everything a user can observe of the store, as text. */
static char *digest(struct store *s)
{
	struct store_snapshot snap;
	struct store_stats st;
	size_t len = 0, cap = 4096;
	char *out = malloc(cap), why[256];

	assert_non_null(out);
	assert_int_equal(store_snapshot_take(s, NULL, &snap), 0);
	for (size_t i = 0; i < snap.n; i++) {
		size_t need = layout_format_snapshot_row(NULL, 0, &snap.rows[i]);

		while (len + need + 1 > cap) {
			cap *= 2;
			out = realloc(out, cap);
			assert_non_null(out);
		}
		len += layout_format_snapshot_row(out + len, cap - len, &snap.rows[i]);
	}
	store_snapshot_free(&snap);
	store_stats(s, NULL, &st);
	while (len + 200 > cap) {
		cap *= 2;
		out = realloc(out, cap);
		assert_non_null(out);
	}
	snprintf(out + len, cap - len, "gauges %llu %llu %llu %llu %llu %llu\n",
		 (unsigned long long)st.tenants, (unsigned long long)st.parents,
		 (unsigned long long)st.children, (unsigned long long)st.links,
		 (unsigned long long)st.tombstones, (unsigned long long)st.bytes);
	if (store_check_all(s, why, sizeof(why)) != 0)
		fail_msg("recount: %s", why);
	return out;
}

typedef int (*op_fn)(struct fx *f);

/*
 * Fail each allocation of @op in turn.  Returns how many allocation
 * points the path has (the N at which it first ran to the end).
 */
static unsigned long every_allocation(const char *what, op_fn op)
{
	for (unsigned long n = 1; n < 10000; n++) {
		struct fx f;
		char *before, *after;
		int rc;
		bool reached;

		fx_open(&f);
		before = digest(f.s);
		store_fault_fail_nth(n);
		rc = op(&f);
		reached = !store_fault_armed();
		store_fault_fail_nth(0);
		if (rc != 0 && rc != -ENOMEM)
			fail_msg("%s: allocation %lu failed: rc %d, not 0 or -ENOMEM",
				 what, n, rc);
		if (rc == -ENOMEM) {
			after = digest(f.s);
			if (strcmp(before, after) != 0)
				fail_msg("%s: allocation %lu failed with ENOMEM and "
					 "the store changed:\n--- before\n%s--- after\n%s",
					 what, n, before, after);
			free(after);
		}
		free(before);
		fx_close(&f);
		if (!reached)
			return n - 1; /* the path made fewer than n */
	}
	fail_msg("%s: no end to its allocations", what);
	return 0;
}

static const struct store_owner owner = { 0, 0, 0644 };

static int op_tenant(struct fx *f)
{
	struct store_node *n = NULL;
	int rc = store_mkdir(f->s, store_root(f->s), "n", &owner, &n);

	if (rc == 0)
		store_node_unref(f->s, n);
	return rc;
}

static int op_join(struct fx *f)
{
	struct store_node *n = NULL;
	int rc = store_mkdir(f->s, f->t, "q", &owner, &n);

	if (rc == 0)
		store_node_unref(f->s, n);
	return rc;
}

static int op_rejoin(struct fx *f)
{
	struct store_node *n = NULL;
	int rc = store_mkdir(f->s, f->t, "old", &owner, &n);

	if (rc == 0)
		store_node_unref(f->s, n);
	return rc;
}

static int op_create(struct fx *f)
{
	struct store_node *n = NULL;
	bool created;
	int rc = store_create(f->s, f->p, "x", &owner, true, &n, &created);

	if (rc == 0)
		store_node_unref(f->s, n);
	return rc;
}

/* One open-write-close transition of @mode on child a. */
static int publish(struct fx *f, enum store_stage_mode mode)
{
	struct store_stage *st = NULL;
	ssize_t w;
	int rc = store_stage_open(f->s, f->a, mode, &st);

	if (rc)
		return rc;
	w = store_stage_write(st, "world!", 6, 2);
	rc = w < 0 ? (int)w : store_stage_publish(st);
	store_stage_close(st);
	return rc;
}

static int op_replace(struct fx *f)
{
	return publish(f, STORE_STAGE_REPLACE);
}

static int op_append(struct fx *f)
{
	return publish(f, STORE_STAGE_APPEND);
}

static int op_cas(struct fx *f)
{
	return publish(f, STORE_STAGE_CAS);
}

static int op_truncate(struct fx *f)
{
	struct store_attr in = { .size = 2 };

	return store_setattr(f->s, f->a, STORE_SET_SIZE, &in, NULL);
}

static int op_unlink(struct fx *f)
{
	return store_unlink(f->s, f->p, "a");
}

static int op_link(struct fx *f)
{
	return store_link(f->s, f->a, f->p2, "a2");
}

static int op_rename(struct fx *f)
{
	return store_rename(f->s, f->p, "a", f->p2, "b", 0);
}

static int op_depart(struct fx *f)
{
	return store_depart(f->s, f->t, "p", NULL);
}

static int op_depart_absent(struct fx *f)
{
	return store_depart(f->s, f->t, "never", NULL);
}

static int op_leave(struct fx *f)
{
	return store_rmdir(f->s, f->t, "p", NULL);
}

static int op_cleanup(struct fx *f)
{
	return store_rmdir(f->s, store_root(f->s), "t", NULL);
}

static int op_ttl(struct fx *f)
{
	return store_set_ttl(f->s, f->a, 5000);
}

static int op_list(struct fx *f)
{
	struct store_dirlist dl;
	int rc = store_list(f->s, f->p, &dl);

	if (rc == 0)
		store_dirlist_free(&dl);
	return rc;
}

static int op_snapshot(struct fx *f)
{
	struct store_snapshot snap;
	int rc = store_snapshot_take(f->s, NULL, &snap);

	if (rc == 0)
		store_snapshot_free(&snap);
	return rc;
}

static int op_drain(struct fx *f)
{
	return store_drain(f->s, f->t);
}

/*
 * The transitions that give the adapter an entry: on -ENOMEM the store
 * is unchanged (every_allocation); on success the node's attributes came
 * with it.  (The kernel's count of it is the adapter's:
 * tests/unit/fs/test_entry.c.)
 */
static int entry_outcome(struct fx *f, int rc, struct store_node *n,
			 const struct store_attr *a)
{
	if (rc == 0) {
		assert_int_equal(a->ino, store_node_ino(n));
		assert_true(a->nlink >= 1);
		store_node_unref(f->s, n);
	}
	return rc;
}

static int op_tenant_entry(struct fx *f)
{
	struct store_node *n = NULL;
	struct store_attr a;
	int rc = store_mkdir_entry(f->s, store_root(f->s), "n", &owner, &n, &a);

	return entry_outcome(f, rc, n, &a);
}

static int op_join_entry(struct fx *f)
{
	struct store_node *n = NULL;
	struct store_attr a;
	int rc = store_mkdir_entry(f->s, f->t, "old", &owner, &n, &a);

	return entry_outcome(f, rc, n, &a);
}

static int op_create_entry(struct fx *f)
{
	struct store_node *n = NULL;
	struct store_attr a;
	bool created;
	int rc = store_create_entry(f->s, f->p, "x", &owner, true, &n,
				    &created, &a);

	return entry_outcome(f, rc, n, &a);
}

static int op_open_existing_entry(struct fx *f)
{
	struct store_node *n = NULL;
	struct store_attr a;
	bool created;
	int rc = store_create_entry(f->s, f->p, "a", &owner, false, &n,
				    &created, &a);

	if (rc == 0) {
		assert_false(created);
		assert_int_equal(a.size, 5);
	}
	return entry_outcome(f, rc, n, &a);
}

static int op_link_entry(struct fx *f)
{
	struct store_attr a;
	int rc = store_link_entry(f->s, f->a, f->p2, "a2", &a);

	if (rc == 0) {
		assert_int_equal(a.nlink, 2);
		store_node_ref(f->a); /* entry_outcome drops one */
	}
	return entry_outcome(f, rc, f->a, &a);
}

#define FAULT_TEST(name)                                              \
	static void test_##name(void **state)                         \
	{                                                             \
		(void)state;                                          \
		print_message("%s: %lu allocation points\n", #name,   \
			      every_allocation(#name, op_##name));    \
	}

FAULT_TEST(tenant)
FAULT_TEST(join)
FAULT_TEST(rejoin)
FAULT_TEST(create)
FAULT_TEST(replace)
FAULT_TEST(append)
FAULT_TEST(cas)
FAULT_TEST(truncate)
FAULT_TEST(unlink)
FAULT_TEST(link)
FAULT_TEST(rename)
FAULT_TEST(depart)
FAULT_TEST(depart_absent)
FAULT_TEST(leave)
FAULT_TEST(cleanup)
FAULT_TEST(ttl)
FAULT_TEST(list)
FAULT_TEST(snapshot)
FAULT_TEST(drain)
FAULT_TEST(tenant_entry)
FAULT_TEST(join_entry)
FAULT_TEST(create_entry)
FAULT_TEST(open_existing_entry)
FAULT_TEST(link_entry)

/* A transition whose event line cannot be allocated still stands; the
 * stream shows a "lost" line in its place, not a silent gap. */
static void test_lost_event_line(void **state)
{
	struct fx f;
	struct store_event_reader *r;
	char buf[256];
	size_t n;
	unsigned long seq;

	(void)state;
	fx_open(&f);
	assert_int_equal(store_events_open(f.s, NULL, NULL, 0, &r), 0);
	seq = (unsigned long)store_events_position(r);
	store_fault_fail_nth(1); /* unlink allocates only its line */
	assert_int_equal(store_unlink(f.s, f.p, "a"), 0);
	store_fault_fail_nth(0);
	assert_int_equal(store_unlink(f.s, f.p, "a"), -ENOENT);
	n = store_events_read(f.s, r, buf, sizeof(buf) - 1);
	buf[n] = '\0';
	{
		char want[64];

		snprintf(want, sizeof(want), "%lu\tlost\t-\t-\t-\t-\t-\n", seq);
		assert_string_equal(buf, want);
	}
	store_events_close(r);
	fx_close(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tenant),
		cmocka_unit_test(test_join),
		cmocka_unit_test(test_rejoin),
		cmocka_unit_test(test_create),
		cmocka_unit_test(test_replace),
		cmocka_unit_test(test_append),
		cmocka_unit_test(test_cas),
		cmocka_unit_test(test_truncate),
		cmocka_unit_test(test_unlink),
		cmocka_unit_test(test_link),
		cmocka_unit_test(test_rename),
		cmocka_unit_test(test_depart),
		cmocka_unit_test(test_depart_absent),
		cmocka_unit_test(test_leave),
		cmocka_unit_test(test_cleanup),
		cmocka_unit_test(test_ttl),
		cmocka_unit_test(test_list),
		cmocka_unit_test(test_snapshot),
		cmocka_unit_test(test_drain),
		cmocka_unit_test(test_tenant_entry),
		cmocka_unit_test(test_join_entry),
		cmocka_unit_test(test_create_entry),
		cmocka_unit_test(test_open_existing_entry),
		cmocka_unit_test(test_link_entry),
		cmocka_unit_test(test_lost_event_line),
	};

	return cmocka_run_group_tests_name("faults", tests, NULL, NULL);
}
