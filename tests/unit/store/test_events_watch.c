/*
 * test_events_watch.c - unit tests of the store's event stream
 * (store/events.c) as the watch machinery reads it: the watcher view
 * (store_events_next) with its internal lines and overflow, the event
 * hook, and a publication that lands while a cascade takes its parent's
 * links out, ordered by the stream.
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

/* Events for the watcher machinery ---------------------------------------- */

static void test_events_next_internal(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *r, *a, *b;
	struct store_event_reader *re;
	struct store_event ev;
	struct rd d;
	uint64_t seq;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	r = mk(c, t, "r");
	re = ev_open(c, NULL);
	rd_open(c, &d, NULL);

	a = cr(c, p, "a");
	next_ev(c, re, &ev);
	assert_int_equal(ev.op, STORE_OP_CREATE);
	assert_false(ev.internal);
	assert_string_equal(ev.tenant, "t");
	assert_string_equal(ev.parent, "p");
	assert_string_equal(ev.child, "a");
	seq = ev.seq;
	store_event_free(&ev);
	free(rd_take(c, &d));
	assert_int_equal(d.last, seq);        /* the same numbers */

	assert_int_equal(store_unlink(c->s, p, "a"), 0);
	next_ev(c, re, &ev);
	assert_int_equal(ev.op, STORE_OP_UNLINK);
	assert_false(ev.internal);
	assert_int_equal(ev.kind, STORE_CHILD);
	assert_int_equal(ev.ino, store_node_ino(a));
	assert_string_equal(ev.parent, "p");
	assert_string_equal(ev.child, "a");
	assert_true(ev.seq > seq);
	seq = ev.seq;
	store_event_free(&ev);

	b = cr(c, p, "b");
	set_ttl(c, b, 100);
	set_ttl(c, q, 200);
	advance(c, 200);
	assert_int_equal(store_expire(c->s, 10), 2);
	next_op(c, re, STORE_OP_EXPIRE, &ev);
	assert_true(ev.internal);
	assert_int_equal(ev.kind, STORE_CHILD);
	assert_int_equal(ev.ino, store_node_ino(b));
	assert_string_equal(ev.tenant, "t");
	assert_string_equal(ev.parent, "p");
	assert_string_equal(ev.child, "b");
	assert_true(ev.seq > seq);
	seq = ev.seq;
	store_event_free(&ev);
	next_ev(c, re, &ev);
	assert_int_equal(ev.op, STORE_OP_EXPIRE);
	assert_true(ev.internal);
	assert_int_equal(ev.kind, STORE_PARENT);
	assert_int_equal(ev.ino, store_node_ino(q));
	assert_string_equal(ev.parent, "q");
	assert_string_equal(ev.child, "");
	assert_true(ev.seq > seq);
	seq = ev.seq;
	store_event_free(&ev);

	assert_int_equal(store_depart(c->s, t, "r", NULL), 0);
	next_ev(c, re, &ev);
	assert_int_equal(ev.op, STORE_OP_DEPART);
	assert_true(ev.internal);
	assert_int_equal(ev.kind, STORE_PARENT);
	assert_int_equal(ev.ino, store_node_ino(r));
	assert_string_equal(ev.parent, "r");
	assert_string_equal(ev.child, "");
	store_event_free(&ev);

	assert_int_equal(store_depart(c->s, t, "ghost", NULL), 0);
	next_ev(c, re, &ev);
	assert_int_equal(ev.op, STORE_OP_DEPART);
	assert_true(ev.internal);
	assert_string_equal(ev.parent, "ghost");
	store_event_free(&ev);

	/* rmdir of P is a request on P's own path. */
	assert_int_equal(store_rmdir(c->s, t, "p", NULL), 0);
	next_ev(c, re, &ev);
	assert_int_equal(ev.op, STORE_OP_LEAVE);
	assert_false(ev.internal);
	assert_int_equal(ev.kind, STORE_PARENT);
	assert_int_equal(ev.ino, store_node_ino(p));
	store_event_free(&ev);

	assert_int_equal(store_events_next(c->s, re, &ev), 0);
	check_ok(c);
}

/*
 * The event hook: once after each transition that appended lines (not
 * for a failed one, nor for one that appended nothing), telling whether
 * one of them was internal.
 */
static void test_event_hook(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *a, *b;
	struct rd d;
	unsigned long h0, i0;

	rd_open(c, &d, NULL);
	assert_int_equal(c->hooks, 0);
	t = mk(c, root(c), "t");
	assert_int_equal(c->hooks, 1);
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	a = cr(c, p, "a");
	assert_int_equal(c->hooks, 4);
	publish(c, a, STORE_STAGE_REPLACE, "x");
	assert_int_equal(c->hooks, 5);
	assert_int_equal(c->hooks_internal, 0);
	/* When the hook has run, the line is there to read. */
	expect_events(c, &d,
		      EV("join", "t", "-", "-", "-", "-")
		      EV("join", "t", "p", "-", "1", "-")
		      EV("join", "t", "q", "-", "1", "-")
		      EV("create", "t", "p", "a", "1", "0")
		      EV("write", "t", "p", "a", "1", "1"));

	/* Failed transitions and ones without a line: no call. */
	h0 = c->hooks;
	assert_int_equal(create_rc(c, p, "a", true), -EEXIST);
	assert_int_equal(store_unlink(c->s, p, "zz"), -ENOENT);
	assert_int_equal(mkdir_rc(c, t, "p"), -EEXIST);
	assert_int_equal(store_rmdir(c->s, t, "zz", NULL), -ENOENT);
	set_ttl(c, a, 10);
	assert_int_equal(store_renew(c->s, a), 0);
	assert_int_equal(store_expire(c->s, 10), 0);
	assert_int_equal(c->hooks, h0);
	assert_false(store_events_pending(c->s, d.r));

	/* One call for a transition of several lines: a's state, linked
	 * twice, and b expire in one reaper run (three lines). */
	assert_int_equal(store_link(c->s, a, q, "a2"), 0);
	assert_int_equal(c->hooks, h0 + 1);
	b = cr(c, q, "b");
	set_ttl(c, b, 10);
	h0 = c->hooks;
	i0 = c->hooks_internal;
	advance(c, 10);
	assert_int_equal(store_expire(c->s, 10), 2);
	assert_int_equal(c->hooks, h0 + 1);
	assert_int_equal(c->hooks_internal, i0 + 1);
	free(rd_take(c, &d));

	/* depart is internal, unlink is not. */
	h0 = c->hooks;
	assert_int_equal(store_depart(c->s, t, "ghost", NULL), 0);
	assert_int_equal(c->hooks, h0 + 1);
	assert_int_equal(c->hooks_internal, i0 + 2);
	assert_int_equal(create_rc(c, q, "b", true), 0);
	assert_int_equal(store_unlink(c->s, q, "b"), 0);
	assert_int_equal(c->hooks, h0 + 3);
	assert_int_equal(c->hooks_internal, i0 + 2);
	assert_int_equal(store_rmdir(c->s, root(c), "t", NULL), 0);
	assert_int_equal(c->hooks, h0 + 4);
	{
		char *ev = rd_take(c, &d);

		assert_int_equal(count_lines(ev), 4); /* depart, create,
							 unlink, cleanup */
		free(ev);
	}
	check_ok(c);
}

/* Publications in the middle of a cascade ------------------------------------ */

/*
 * A publication that lands while a cascade (leave, .depart, a parent's
 * expiry, a tenant cleanup) is taking the departing parent's links out is
 * ordered by the stream: its lines come before the parent's removal line,
 * or it is refused (the state is gone: -ESTALE) or does not name the
 * departed parent (the state lives on in another bucket).  Replaying the
 * stream never puts a child back into a departed parent.  The cascade
 * hook runs a publication on every state, on another thread, before each
 * link goes; during a cleanup another thread also makes a new tenant of
 * the same name, whose join must come after the cleanup's line.  (A
 * drain's clear holds every transition off: nothing can land inside it.)
 */
enum cascade_kind { CASCADE_LEAVE, CASCADE_DEPART, CASCADE_EXPIRE,
		    CASCADE_CLEANUP, NCASCADE };

#define MIDSTEPS 8

struct midcascade {
	struct store *s;
	struct store_node *n[3];
	unsigned steps;
	int rc[MIDSTEPS][3];
	/* A cleanup: a thread makes a tenant of the same name meanwhile. */
	bool remake;
	pthread_t remake_th;
	bool remake_started, remake_joined;
	struct store_node *remade;
	int remake_rc;
};

static void *midcascade_remake(void *arg)
{
	struct midcascade *m = arg;

	m->remake_rc = store_mkdir(m->s, store_root(m->s), "t", &DOWN,
				   &m->remade);
	return NULL;
}

static void *midcascade_publish(void *arg)
{
	struct midcascade *m = arg;

	for (int i = 0; i < 3; i++) {
		struct store_stage *st = NULL;
		int rc = store_stage_open(m->s, m->n[i], STORE_STAGE_REPLACE,
					  &st);

		if (rc == 0) {
			ssize_t w = store_stage_write(st, "mid", 3, 0);

			rc = w < 0 ? (int)w : store_stage_publish(st);
			store_stage_close(st);
		}
		m->rc[m->steps][i] = rc;
	}
	return NULL;
}

static void midcascade_step(void *arg)
{
	struct midcascade *m = arg;
	pthread_t th;

	if (m->steps >= MIDSTEPS)
		return;
	if (pthread_create(&th, NULL, midcascade_publish, m) != 0)
		abort();
	pthread_join(th, NULL);
	m->steps++;
	if (m->remake && !m->remake_started) {
		struct timespec dl;

		/* The name is taken until the cleanup's line: the mkdir
		 * waits for it.  Give it time to show that it does not. */
		if (pthread_create(&m->remake_th, NULL, midcascade_remake, m))
			abort();
		m->remake_started = true;
		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_nsec += 300 * 1000000L;
		dl.tv_sec += dl.tv_nsec / 1000000000L;
		dl.tv_nsec %= 1000000000L;
		m->remake_joined =
			pthread_timedjoin_np(m->remake_th, NULL, &dl) == 0;
	}
}

/*
 * @lines (no sequence numbers): the removal line of parent "p" (or of
 * tenant "t" for a cleanup) comes last but for lines of other buckets,
 * and no line of a child of p follows it.
 */
static void assert_no_child_line_after(const char *lines, const char *removal,
				       bool whole_tenant)
{
	const char *line = lines;
	bool removed = false;
	int removals = 0;

	while (*line) {
		const char *nl = strchr(line, '\n');
		char op[16], t[16], p[16], ch[16];

		assert_non_null(nl);
		if (sscanf(line, "%15[^\t]\t%15[^\t]\t%15[^\t]\t%15[^\t]", op, t,
			   p, ch) != 4)
			fail_msg("bad event line: %.*s", (int)(nl - line), line);
		if (strncmp(line, removal, strlen(removal)) == 0) {
			removed = true;
			removals++;
		} else if (removed && strcmp(t, "t") == 0 &&
			   strcmp(ch, "-") != 0 &&
			   (whole_tenant || strcmp(p, "p") == 0)) {
			print_error("events:\n%s", lines);
			fail_msg("a child line after %.*s: %.*s",
				 (int)strlen(removal) - 1, removal,
				 (int)(nl - line), line);
		}
		line = nl + 1;
	}
	if (removals != 1) {
		print_error("events:\n%s", lines);
		fail_msg("%d removal lines %s", removals, removal);
	}
}

static void test_cascade_orders_publications(void **state)
{
	static const char *const removal[NCASCADE] = {
		[CASCADE_LEAVE] = EV("leave", "t", "p", "-", "1", "-"),
		[CASCADE_DEPART] = EV("depart", "t", "p", "-", "1", "-"),
		[CASCADE_EXPIRE] = EV("expire", "t", "p", "-", "1", "-"),
		[CASCADE_CLEANUP] = EV("cleanup", "t", "-", "-", "-", "-"),
	};
	struct ctx *c = *state;

	for (int k = 0; k < NCASCADE; k++) {
		struct midcascade m = { 0 };
		struct store_limits l;
		struct store_node *t, *p, *q;
		struct rd d;
		char *lines;
		int published[3] = { 0 };

		store_limits_default(&l);
		reopen(c, &l);
		t = mk(c, root(c), "t");
		p = mk(c, t, "p");
		q = mk(c, t, "q");
		m.s = c->s;
		m.remake = k == CASCADE_CLEANUP;
		m.n[0] = cr(c, p, "a");            /* only in p */
		m.n[1] = cr(c, p, "sh");           /* also in q */
		m.n[2] = cr(c, p, "b");            /* only in p */
		assert_int_equal(store_link(c->s, m.n[1], q, "sh2"), 0);
		if (k == CASCADE_EXPIRE)
			set_ttl(c, p, 100);
		rd_open_strict(c, &d, NULL);
		store_cascade_step_hook(c->s, midcascade_step, &m);
		switch (k) {
		case CASCADE_LEAVE:
			assert_int_equal(store_rmdir(c->s, t, "p", NULL), 0);
			break;
		case CASCADE_DEPART:
			assert_int_equal(store_depart(c->s, t, "p", NULL), 0);
			break;
		case CASCADE_EXPIRE:
			advance(c, 100);
			assert_int_equal(store_expire(c->s, 10), 1);
			break;
		case CASCADE_CLEANUP:
			assert_int_equal(store_rmdir(c->s, root(c), "t", NULL),
					 0);
			break;
		}
		store_cascade_step_hook(c->s, NULL, NULL);
		if (m.remake_started && !m.remake_joined)
			pthread_join(m.remake_th, NULL);

		/* One step per link of p (a cleanup: of p and of q). */
		assert_int_equal(m.steps, k == CASCADE_CLEANUP ? 4 : 3);
		for (unsigned st = 0; st < m.steps; st++)
			for (int i = 0; i < 3; i++) {
				int rc = m.rc[st][i];

				if (rc != 0 && rc != -ESTALE)
					fail_msg("cascade %d step %u state %d: "
						 "%d", k, st, i, rc);
				published[i] += rc == 0;
			}
		/* Before the first link went, every state took it. */
		for (int i = 0; i < 3; i++)
			assert_int_equal(m.rc[0][i], 0);
		lines = rd_take(c, &d);
		assert_no_child_line_after(lines, removal[k],
					   k == CASCADE_CLEANUP);
		if (m.remake) {
			/* The new tenant joined after the old one went. */
			const char *gone = strstr(lines, removal[k]);
			const char *join = strstr(lines, EV("join", "t", "-",
							    "-", "-", "-"));

			assert_true(m.remake_started);
			assert_int_equal(m.remake_rc, 0);
			put(c, m.remade);
			if (!gone || !join || join < gone) {
				print_error("events:\n%s", lines);
				fail_msg("the new tenant's join is not after "
					 "the cleanup");
			}
		}
		free(lines);

		/* What was published stands on what lives on. */
		assert_false(store_node_live(m.n[0]));
		assert_false(store_node_live(m.n[2]));
		if (k == CASCADE_CLEANUP) {
			assert_false(store_node_live(m.n[1]));
		} else {
			assert_int_equal(version(c, m.n[1]),
					 (uint64_t)published[1]);
			assert_list(c, q, "sh2");
		}
		check_ok(c);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST_HOOKED(test_events_next_internal),
		TEST_HOOKED(test_event_hook),
		TEST_HOOKED(test_cascade_orders_publications),
	};

	return run_store_tests("events_watch", tests);
}
