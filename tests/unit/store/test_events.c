/*
 * test_events.c - unit tests of the store's event stream (store/events.c):
 * its lines and their scopes.  The watcher view, the hook and
 * publications during a cascade are tested in test_events_watch.c.
 *
 * What CONTRACT.md (s.6 Watching) and store.h promise: one line per
 * transition, in the documented format, with strictly increasing sequence
 * numbers; a reader's tenant scope and credentials decide what it sees;
 * a reader that falls behind gets one "overflow" line.
 *
 * The fixture (fixture.h) gives each test a fresh store on a manual
 * clock and holds the nodes the test is handed; its teardown releases
 * them and recounts the store (store_check_all).
 */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/store.h"
#include "tests/unit/unit.h"
#include "tests/unit/store/fixture.h"

/* Events: the lines ------------------------------------------------------- */

static void test_events_lines(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *a, *n = NULL;
	struct store_stage *st = NULL;
	struct store_attr in, out;
	struct rd d;
	bool created = true;

	rd_open(c, &d, NULL);
	assert_false(store_events_pending(c->s, d.r));
	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	a = cr(c, p, "a");
	expect_events(c, &d,
		      EV("join", "t", "-", "-", "-", "-")
		      EV("join", "t", "p", "-", "1", "-")
		      EV("join", "t", "q", "-", "1", "-")
		      EV("create", "t", "p", "a", "1", "0"));

	/* Failed operations, and opening an existing child: no line. */
	assert_int_equal(create_rc(c, p, "a", true), -EEXIST);
	assert_int_equal(store_create(c->s, p, "a", &FOWN, false, &n,
				      &created), 0);
	assert_false(created);
	put(c, n);
	assert_int_equal(mkdir_rc(c, t, "p"), -EEXIST);
	assert_int_equal(mkdir_rc(c, root(c), "t"), -EEXIST);
	assert_int_equal(store_unlink(c->s, p, "zz"), -ENOENT);
	assert_int_equal(store_rmdir(c->s, t, "zz", NULL), -ENOENT);
	assert_int_equal(store_rmdir(c->s, root(c), "zz", NULL), -ENOENT);
	assert_int_equal(store_link(c->s, a, p, "a"), -EEXIST);
	assert_int_equal(store_rename(c->s, p, "zz", q, "zz", 0), -ENOENT);
	assert_false(store_events_pending(c->s, d.r));
	expect_events(c, &d, "");

	/* Publications. */
	publish(c, a, STORE_STAGE_REPLACE, "xy");
	publish(c, a, STORE_STAGE_APPEND, "z");
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_CAS, &st), 0);
	publish(c, a, STORE_STAGE_REPLACE, "w");
	assert_int_equal(store_stage_write(st, "Q", 1, 0), 1);
	assert_int_equal(store_stage_publish(st), -EAGAIN); /* no line */
	store_stage_close(st);
	st = NULL;
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_APPEND, &st),
			 0);
	store_stage_close(st);                              /* no line */
	memset(&in, 0, sizeof in);
	in.size = 1;
	assert_int_equal(store_setattr(c->s, a, STORE_SET_SIZE, &in, &out), 0);
	expect_events(c, &d,
		      EV("write", "t", "p", "a", "1", "1")
		      EV("write", "t", "p", "a", "1", "2")
		      EV("write", "t", "p", "a", "1", "3")
		      EV("write", "t", "p", "a", "1", "4"));

	/* Links and renames name their destination, then their source. */
	assert_int_equal(store_link(c->s, a, q, "a2"), 0);
	cr(c, p, "k");
	assert_int_equal(store_rename(c->s, p, "k", q, "k2", 0), 0);
	assert_int_equal(store_unlink(c->s, q, "a2"), 0);
	expect_events(c, &d,
		      EVF("link", "t", "q", "a2", "1", "4", "p", "a")
		      EV("create", "t", "p", "k", "1", "0")
		      EVF("rename", "t", "q", "k2", "1", "0", "p", "k")
		      EV("unlink", "t", "q", "a2", "1", "4"));

	/* Leave (with a child: one line), rejoin, departs. */
	assert_int_equal(store_rmdir(c->s, t, "q", NULL), 0);
	q = mk(c, t, "q");
	assert_int_equal(store_depart(c->s, t, "ghost", NULL), 0);
	assert_int_equal(store_depart(c->s, t, "q", NULL), 0);
	mk(c, t, "ghost");
	assert_int_equal(store_unlink(c->s, p, "a"), 0);
	expect_events(c, &d,
		      EV("leave", "t", "q", "-", "1", "-")
		      EV("join", "t", "q", "-", "2", "-")
		      EV("depart", "t", "ghost", "-", "0", "-")
		      EV("depart", "t", "q", "-", "2", "-")
		      EV("join", "t", "ghost", "-", "1", "-")
		      EV("unlink", "t", "p", "a", "1", "4"));

	/* Tenant cleanup: one line for everything. */
	assert_int_equal(store_rmdir(c->s, root(c), "t", NULL), 0);
	expect_events(c, &d, EV("cleanup", "t", "-", "-", "-", "-"));
	assert_false(store_events_pending(c->s, d.r));
	check_ok(c);
}

/*
 * Links, renames and exchanges name both sides, so a replay of the lines
 * rebuilds the tree: the destination in the usual fields (with its
 * parent's generation and the version of the state it now reaches), the
 * source in two more.  A replaced destination is unlinked first, on its
 * own line.  Refused and no-op renames append nothing.
 */
static void test_events_rename_lines(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *a, *b, *x, *y, *z;
	struct rd d;

	t = mk(c, root(c), "t");
	a = mk(c, t, "A");
	mk(c, t, "B");
	assert_int_equal(store_rmdir(c->s, t, "B", NULL), 0);
	b = mk(c, t, "B");                           /* generation 2 */
	x = cr(c, a, "x");
	y = cr(c, a, "y");
	z = cr(c, b, "z");
	publish(c, x, STORE_STAGE_REPLACE, "x1");
	publish(c, x, STORE_STAGE_REPLACE, "x2");    /* version 2 */
	publish(c, y, STORE_STAGE_REPLACE, "y1");    /* version 1 */
	publish(c, z, STORE_STAGE_REPLACE, "z1");
	rd_open_strict(c, &d, NULL);

	assert_int_equal(store_rename(c->s, a, "x", b, "x2", 0), 0);
	assert_int_equal(store_rename(c->s, a, "y", b, "z", 0), 0);
	expect_events(c, &d,
		      EVF("rename", "t", "B", "x2", "2", "2", "A", "x")
		      EV("unlink", "t", "B", "z", "2", "1")
		      EVF("rename", "t", "B", "z", "2", "1", "A", "y"));

	assert_int_equal(store_link(c->s, x, a, "lnk"), 0);
	assert_int_equal(store_rename(c->s, a, "lnk", b, "z",
				      STORE_RENAME_EXCHANGE), 0);
	expect_events(c, &d,
		      EVF("link", "t", "A", "lnk", "1", "2", "B", "x2")
		      EVF("exchange", "t", "B", "z", "2", "2", "A", "lnk"));
	assert_int_equal(ino_of(c, b, "z"), store_node_ino(x));
	assert_int_equal(ino_of(c, a, "lnk"), store_node_ino(y));

	/* Refused, and between two names of one state: nothing. */
	assert_int_equal(store_rename(c->s, b, "x2", a, "lnk",
				      STORE_RENAME_NOREPLACE), -EEXIST);
	assert_int_equal(store_rename(c->s, b, "x2", b, "z", 0), 0);
	assert_int_equal(store_rename(c->s, a, "none", b, "z",
				      STORE_RENAME_EXCHANGE), -ENOENT);
	assert_false(store_events_pending(c->s, d.r));
	expect_events(c, &d, "");

	/* Two names of one state trade it: the line, and nothing moves. */
	assert_int_equal(store_rename(c->s, b, "x2", b, "z",
				      STORE_RENAME_EXCHANGE), 0);
	expect_events(c, &d,
		      EVF("exchange", "t", "B", "z", "2", "2", "B", "x2"));
	assert_int_equal(ino_of(c, b, "z"), store_node_ino(x));
	assert_int_equal(ino_of(c, b, "x2"), store_node_ino(x));
	check_ok(c);
}

static void test_events_expire_lines(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *r, *a, *b;
	struct rd d;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	assert_int_equal(store_rmdir(c->s, t, "p", NULL), 0);
	p = mk(c, t, "p");                   /* generation 2 */
	q = mk(c, t, "q");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "x");
	set_ttl(c, a, 100);
	set_ttl(c, q, 150);

	/* Through the reaper. */
	rd_open(c, &d, NULL);
	advance(c, 150);
	assert_int_equal(store_expire(c->s, 10), 2);
	expect_events(c, &d,
		      EV("expire", "t", "p", "a", "2", "1")
		      EV("expire", "t", "q", "-", "1", "-"));

	/* Without the reaper: a new admission of the name first ends the
	 * expired node, in that order. */
	b = cr(c, p, "b");
	set_ttl(c, b, 100);
	r = mk(c, t, "r");
	set_ttl(c, r, 100);
	expect_events(c, &d,
		      EV("create", "t", "p", "b", "2", "0")
		      EV("join", "t", "r", "-", "1", "-"));
	advance(c, 100);
	assert_int_equal(create_rc(c, p, "b", true), 0);
	assert_int_equal(mkdir_rc(c, t, "r"), 0);
	expect_events(c, &d,
		      EV("expire", "t", "p", "b", "2", "0")
		      EV("create", "t", "p", "b", "2", "0")
		      EV("expire", "t", "r", "-", "1", "-")
		      EV("join", "t", "r", "-", "2", "-"));
	/* Each expiry has exactly one line. */
	assert_int_equal(store_expire(c->s, 10), 0);
	expect_events(c, &d, "");
	assert_int_equal(stats(c, NULL).expiries, 4);
	check_ok(c);
}

/* A tenant's reader sees its tenant's lines, with the store's numbers. */
static void test_events_tenant_scope(void **state)
{
	struct ctx *c = *state;
	struct store_node *t1, *t2, *p1, *p2, *a1, *a2;
	struct rd all, r1, r2;
	char *raw_all, *raw_1, *want, *line, *w;

	t1 = mk(c, root(c), "t1");
	t2 = mk(c, root(c), "t2");
	rd_open(c, &all, NULL);
	rd_open(c, &r1, t1);
	rd_open(c, &r2, t2);
	p1 = mk(c, t1, "p");
	p2 = mk(c, t2, "p");
	a1 = cr(c, p1, "a");
	a2 = cr(c, p2, "a");
	publish(c, a2, STORE_STAGE_REPLACE, "2");
	publish(c, a1, STORE_STAGE_REPLACE, "1");
	assert_int_equal(store_unlink(c->s, p2, "a"), 0);
	assert_int_equal(store_depart(c->s, t2, "x", NULL), 0);
	assert_int_equal(store_rmdir(c->s, root(c), "t2", NULL), 0);
	assert_int_equal(mkdir_rc(c, root(c), "t3"), 0);
	assert_int_equal(store_rmdir(c->s, t1, "p", NULL), 0);

	raw_all = rd_raw(c, &all, NULL);
	raw_1 = rd_raw(c, &r1, NULL);
	/* r1 = the lines of all whose tenant is t1, same numbers. */
	want = malloc(strlen(raw_all) + 1);
	assert_non_null(want);
	w = want;
	for (line = raw_all; *line;) {
		char *nl = strchr(line, '\n');
		char *tab = strchr(line, '\t');

		assert_non_null(nl);
		assert_non_null(tab);
		tab = strchr(tab + 1, '\t');
		assert_non_null(tab);
		if (strncmp(tab, "\tt1\t", 4) == 0) {
			memcpy(w, line, (size_t)(nl + 1 - line));
			w += nl + 1 - line;
		}
		line = nl + 1;
	}
	*w = '\0';
	assert_int_equal(count_lines(raw_all), 11);
	assert_string_equal(raw_1, want);
	free(raw_all);
	free(raw_1);
	free(want);

	expect_events(c, &r2,
		      EV("join", "t2", "p", "-", "1", "-")
		      EV("create", "t2", "p", "a", "1", "0")
		      EV("write", "t2", "p", "a", "1", "1")
		      EV("unlink", "t2", "p", "a", "1", "1")
		      EV("depart", "t2", "x", "-", "0", "-")
		      EV("cleanup", "t2", "-", "-", "-", "-"));
	assert_int_equal(store_rmdir(c->s, root(c), "t1", NULL), 0);
	expect_events(c, &r1, EV("cleanup", "t1", "-", "-", "-", "-"));
	expect_events(c, &r2, "");
	check_ok(c);
}

static void test_events_open_at_present_and_pending(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *u, *p;
	struct rd d, dt;
	char buf[256];

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	p = mk(c, t, "p");
	/* A reader starts at the present: nothing of the past. */
	rd_open(c, &d, NULL);
	assert_false(store_events_pending(c->s, d.r));
	assert_int_equal(store_events_read(c->s, d.r, buf, sizeof buf), 0);
	assert_int_equal(create_rc(c, p, "a", true), 0);
	assert_true(store_events_pending(c->s, d.r));
	expect_events(c, &d, EV("create", "t", "p", "a", "1", "0"));
	assert_false(store_events_pending(c->s, d.r));
	assert_int_equal(store_events_read(c->s, d.r, buf, sizeof buf), 0);

	/* Two readers are independent. */
	rd_open(c, &dt, t);
	assert_int_equal(store_unlink(c->s, p, "a"), 0);
	assert_true(store_events_pending(c->s, d.r));
	assert_true(store_events_pending(c->s, dt.r));
	expect_events(c, &dt, EV("unlink", "t", "p", "a", "1", "0"));
	assert_true(store_events_pending(c->s, d.r));
	expect_events(c, &d, EV("unlink", "t", "p", "a", "1", "0"));

	/* A tenant's reader has nothing to read after another tenant's
	 * transition. */
	assert_int_equal(mkdir_rc(c, u, "q"), 0);
	assert_true(store_events_pending(c->s, d.r));
	assert_false(store_events_pending(c->s, dt.r));
	assert_int_equal(store_events_read(c->s, dt.r, buf, sizeof buf), 0);
	expect_events(c, &d, EV("join", "u", "q", "-", "1", "-"));
	check_ok(c);
}

/* Reads copy whole lines only, and a short buffer loses nothing. */
static void test_events_read_whole_lines(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p;
	struct rd d;
	char small[40], *rest, all[512] = "";
	size_t got;

	rd_open(c, &d, NULL);
	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	assert_int_equal(create_rc(c, p, "abc", true), 0);
	for (int i = 0; i < 2; i++) {
		got = store_events_read(c->s, d.r, small, sizeof small - 1);
		assert_true(got <= sizeof small - 1);
		assert_true(got > 0);
		assert_int_equal(small[got - 1], '\n');
		small[got] = '\0';
		strcat(all, small);
	}
	/* 5 bytes hold no line: nothing copied, nothing lost. */
	got = store_events_read(c->s, d.r, small, 5);
	if (got) {
		assert_true(got <= 5);
		assert_int_equal(small[got - 1], '\n');
		small[got] = '\0';
		strcat(all, small);
	}
	rest = rd_raw(c, &d, NULL);
	strcat(all, rest);
	free(rest);
	assert_int_equal(count_lines(all), 3);
	assert_non_null(strstr(all, "\tjoin\tt\t-\t-\t-\t-\n"));
	assert_non_null(strstr(all, "\tjoin\tt\tp\t-\t1\t-\n"));
	assert_non_null(strstr(all, "\tcreate\tt\tp\tabc\t1\t0\n"));
	check_ok(c);
}

/*
 * A reader that falls more than STORE_EVENT_WINDOW lines behind gets one
 * "overflow" line and then later lines: a contiguous run ending at the
 * newest, as a reader that kept up saw them, then every new line.
 */
static void test_events_overflow(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct rd slow, fast;
	char *truth = NULL, *got, *after, *chunk;
	size_t tlen = 0, glen, alen, nafter;
	const int n = STORE_EVENT_WINDOW + 500;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	rd_open(c, &slow, NULL);
	rd_open(c, &fast, NULL);
	truth = calloc(1, 1);
	assert_non_null(truth);
	for (int i = 0; i < n; i++) {
		publish(c, a, STORE_STAGE_REPLACE, "x");
		if (i % 256 == 255 || i == n - 1) {
			size_t l;

			chunk = rd_raw(c, &fast, &l);
			assert_false(fast.overflows);
			truth = realloc(truth, tlen + l + 1);
			assert_non_null(truth);
			memcpy(truth + tlen, chunk, l + 1);
			tlen += l;
			free(chunk);
		}
	}
	assert_int_equal(count_lines(truth), n);
	assert_true(store_events_pending(c->s, slow.r));

	got = rd_raw(c, &slow, &glen);
	if (strncmp(got, "overflow\n", 9) != 0)
		fail_msg("a reader %d lines behind got no overflow line first: "
			 "%.60s", n, got);
	after = got + 9;
	alen = glen - 9;
	assert_null(strstr(after, "overflow\n"));
	nafter = count_lines(after);
	print_message("# overflow: %zu lines after the overflow line\n",
		      nafter);
	assert_true(nafter >= 1);
	assert_true(nafter <= STORE_EVENT_WINDOW);
	/* A suffix of what the reader that kept up saw. */
	assert_true(alen <= tlen);
	assert_int_equal(tlen == alen || truth[tlen - alen - 1] == '\n', 1);
	assert_memory_equal(truth + tlen - alen, after, alen);
	free(got);

	/* Then it continues with every new line, once. */
	publish(c, a, STORE_STAGE_APPEND, "y");
	chunk = rd_raw(c, &fast, NULL);
	got = rd_raw(c, &slow, NULL);
	assert_string_equal(got, chunk);
	assert_int_equal(count_lines(got), 1);
	free(got);
	free(chunk);
	assert_false(store_events_pending(c->s, slow.r));

	free(truth);
	check_ok(c);
}

/* The watcher view falls behind too: -EOVERFLOW, then it continues. */
static void test_events_next_overflow(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_event_reader *re;
	struct store_event ev;
	struct rd fast;
	uint64_t newest = 0, prev = 0;
	int rc, n = 0;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	re = ev_open(c, NULL);
	rd_open(c, &fast, NULL);
	for (int i = 0; i < STORE_EVENT_LOG + 100; i++) {
		publish(c, a, STORE_STAGE_REPLACE, "x");
		if (i % 1024 == 1023)
			free(rd_take(c, &fast));
	}
	free(rd_take(c, &fast));
	newest = fast.last;

	memset(&ev, 0, sizeof ev);
	assert_int_equal(store_events_next(c->s, re, &ev), -EOVERFLOW);
	while ((rc = store_events_next(c->s, re, &ev)) == 1) {
		assert_true(ev.seq > prev);
		assert_int_equal(ev.op, STORE_OP_WRITE);
		prev = ev.seq;
		n++;
		store_event_free(&ev);
		memset(&ev, 0, sizeof ev);
	}
	assert_int_equal(rc, 0);
	assert_true(n >= 1);
	assert_int_equal(prev, newest);
	publish(c, a, STORE_STAGE_REPLACE, "y");
	next_ev(c, re, &ev);
	assert_true(ev.seq > newest);
	store_event_free(&ev);
	check_ok(c);
}

/* A tenant made by @o (uid, gid, mode). */
static struct store_node *mk_owned(struct ctx *c, const char *name,
				   const struct store_owner *o)
{
	struct store_node *n = NULL;

	assert_int_equal(store_mkdir(c->s, root(c), name, o, &n), 0);
	return keep(c, n);
}

static void chmod_node(struct ctx *c, struct store_node *n, mode_t mode)
{
	struct store_attr in;

	memset(&in, 0, sizeof in);
	in.mode = mode;
	assert_int_equal(store_setattr(c->s, n, STORE_SET_MODE, &in, NULL), 0);
}

/* The sequence numbers of @raw's lines, as one string "n n n ". */
static void seqs_of(const char *raw, char *out, size_t cap)
{
	out[0] = '\0';
	for (const char *l = raw; *l;) {
		const char *nl = strchr(l, '\n');
		size_t used = strlen(out);

		snprintf(out + used, cap - used, "%llu ", strtoull(l, NULL, 10));
		l = nl + 1;
	}
}

/*
 * A reader with credentials sees the lines of the tenants they may list
 * (read and search), judged by the tenant's mode when each line was
 * appended, with the store's sequence numbers; root and the owner see all.
 */
static void test_events_filtered_by_reader(void **state)
{
	static const gid_t g2000[] = { 2000 };
	const struct store_owner closed_o = { 1001, 1001, 0700 };
	const struct store_owner group_o = { 1001, 2000, 0750 };
	const struct store_owner open_o = { 1001, 1001, 0755 };
	const struct store_cred owner = { 1001, 1001, NULL, 0 };
	const struct store_cred member = { 1002, 1002, g2000, 1 };
	const struct store_cred other = { 1003, 1003, NULL, 0 };
	const struct store_cred rootc = { 0, 0, NULL, 0 };
	struct ctx *c = *state;
	struct store_node *closed, *group, *open, *p, *r;
	struct rd all, ro, rm, rx, rr;
	char *raw, seq_all[256], seq_x[256], want[256];

	rd_open(c, &all, NULL);
	rd_open_as(c, &ro, NULL, &owner);
	rd_open_as(c, &rm, NULL, &member);
	rd_open_as(c, &rx, NULL, &other);
	rd_open_as(c, &rr, NULL, &rootc);

	closed = mk_owned(c, "closed", &closed_o);
	group = mk_owned(c, "group", &group_o);
	open = mk_owned(c, "open", &open_o);
	p = mk(c, closed, "p");
	assert_int_equal(create_rc(c, p, "a", true), 0);
	assert_int_equal(mkdir_rc(c, group, "p"), 0);
	assert_int_equal(mkdir_rc(c, open, "p"), 0);
	/* Opened up: from now on others see it; and closed again. */
	chmod_node(c, closed, 0755);
	assert_int_equal(mkdir_rc(c, closed, "q"), 0);
	chmod_node(c, closed, 0700);
	assert_int_equal(mkdir_rc(c, closed, "r"), 0);

	expect_events(c, &rx,
		      EV("join", "open", "-", "-", "-", "-")
		      EV("join", "open", "p", "-", "1", "-")
		      EV("join", "closed", "q", "-", "1", "-"));
	expect_events(c, &rm,
		      EV("join", "group", "-", "-", "-", "-")
		      EV("join", "open", "-", "-", "-", "-")
		      EV("join", "group", "p", "-", "1", "-")
		      EV("join", "open", "p", "-", "1", "-")
		      EV("join", "closed", "q", "-", "1", "-"));
	/* The owner, root and a reader without credentials see all 9. */
	raw = rd_raw(c, &all, NULL);
	assert_int_equal(count_lines(raw), 9);
	seqs_of(raw, seq_all, sizeof seq_all);
	free(raw);
	raw = rd_raw(c, &ro, NULL);
	seqs_of(raw, want, sizeof want);
	assert_string_equal(want, seq_all);
	free(raw);
	raw = rd_raw(c, &rr, NULL);
	seqs_of(raw, want, sizeof want);
	assert_string_equal(want, seq_all);
	free(raw);

	/* The filtered reader's numbers are the store's: a gap, not a
	 * renumbering. */
	rd_open_as(c, &rx, NULL, &other);
	rd_open(c, &all, NULL);
	r = lk(c, closed, "r");
	assert_int_equal(create_rc(c, r, "x", true), 0);
	assert_int_equal(mkdir_rc(c, open, "z"), 0);
	raw = rd_raw(c, &all, NULL);
	seqs_of(raw, seq_all, sizeof seq_all);
	free(raw);
	raw = rd_raw(c, &rx, NULL);
	seqs_of(raw, seq_x, sizeof seq_x);
	assert_int_equal(count_lines(raw), 1);
	free(raw);
	assert_non_null(strstr(seq_all, seq_x));
	assert_string_not_equal(seq_all, seq_x);

	/* A line of no tenant is everyone's. */
	assert_int_equal(store_drain(c->s, NULL), 0);
	expect_events(c, &rx, EV("drain", "-", "-", "-", "-", "-"));
	check_ok(c);
}

/*
 * Lines a reader does not see never make it overflow while they are in
 * the log: a reader 5000 hidden lines behind reads the next visible line
 * as if nothing had happened.  A reader that is moved along (pending, as
 * the daemon's event thread asks after each transition) never overflows
 * on hidden lines at all; one left alone longer than the log holds gets
 * an overflow line, as it cannot tell what it missed.
 */
static void test_events_filtered_no_overflow(void **state)
{
	const struct store_owner closed_o = { 1001, 1001, 0700 };
	const struct store_cred other = { 1003, 1003, NULL, 0 };
	struct ctx *c = *state;
	struct store_node *closed, *open, *p, *a;
	struct rd idle, polled, wrapped, all;
	const int n = STORE_EVENT_WINDOW + 904;

	closed = mk_owned(c, "closed", &closed_o);
	open = mk(c, root(c), "open");
	p = mk(c, closed, "p");
	a = cr(c, p, "a");
	rd_open_as(c, &idle, NULL, &other);
	rd_open(c, &all, NULL);
	for (int i = 0; i < n; i++)
		publish(c, a, STORE_STAGE_REPLACE, "x");
	assert_false(store_events_pending(c->s, idle.r));
	assert_int_equal(mkdir_rc(c, open, "q"), 0);
	assert_true(store_events_pending(c->s, idle.r));
	expect_events(c, &idle, EV("join", "open", "q", "-", "1", "-"));
	assert_int_equal(idle.overflows, 0);
	/* The same distance in lines it sees is an overflow, as before. */
	free(rd_take(c, &all));
	assert_int_equal(all.overflows, 1);

	rd_open_as(c, &polled, NULL, &other);
	rd_open_as(c, &wrapped, NULL, &other);
	for (int i = 0; i < STORE_EVENT_LOG + 100; i++) {
		publish(c, a, STORE_STAGE_REPLACE, "x");
		if (i % 1000 == 999)
			assert_false(store_events_pending(c->s, polled.r));
	}
	assert_int_equal(mkdir_rc(c, open, "r"), 0);
	expect_events(c, &polled, EV("join", "open", "r", "-", "1", "-"));
	assert_int_equal(polled.overflows, 0);
	expect_events(c, &wrapped,
		      "overflow\n" EV("join", "open", "r", "-", "1", "-"));
	check_ok(c);
}

/* A store made with a smaller event log keeps that many lines, and a
 * reader that falls behind all of them overflows. */
static void test_events_small_log(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t, *p, *a;
	struct store *bad = NULL;
	struct rd d;
	char *got;

	store_limits_default(&l);
	assert_int_equal(l.event_log, STORE_EVENT_LOG);
	l.event_log = 0;
	assert_int_equal(store_new(&l, NULL, &bad), -EINVAL);
	assert_null(bad);
	l.event_log = 8;
	reopen(c, &l);
	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	rd_open(c, &d, NULL);
	for (int i = 0; i < 20; i++)
		publish(c, a, STORE_STAGE_REPLACE, "x");
	got = rd_take(c, &d);
	assert_int_equal(d.overflows, 1);
	assert_int_equal(count_lines(got), 1 + 8);
	free(got);
	publish(c, a, STORE_STAGE_REPLACE, "y");
	expect_events(c, &d, EV("write", "t", "p", "a", "1", "21"));
	check_ok(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST_HOOKED(test_events_lines),
		TEST_HOOKED(test_events_rename_lines),
		TEST_HOOKED(test_events_expire_lines),
		TEST_HOOKED(test_events_tenant_scope),
		TEST_HOOKED(test_events_open_at_present_and_pending),
		TEST_HOOKED(test_events_read_whole_lines),
		TEST_HOOKED(test_events_overflow),
		TEST_HOOKED(test_events_next_overflow),
		TEST_HOOKED(test_events_filtered_by_reader),
		TEST_HOOKED(test_events_filtered_no_overflow),
		TEST_HOOKED(test_events_small_log),
	};

	return run_store_tests("events", tests);
}
