/*
 * test_reaper.c - unit tests of expiry (store/reaper.c) and the deadline
 * heap it reads (store/lease.c).
 *
 * What CONTRACT.md (s.4 Leases), seed 001 ("Time and cleanup") and
 * store.h promise: the reaper (store_expire) removes due nodes oldest
 * deadline first, within its budget; store_next_deadline says when it
 * should run next and forgets removed leases; and a random sequence of
 * operations agrees with a model of leases and their expiry.
 *
 *
 * The fixture (fixture.h) gives each test a fresh store on a manual
 * clock and holds the nodes the test is handed; its teardown releases
 * them and recounts the store (store_check_all).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/store.h"
#include "tests/unit/unit.h"
#include "tests/unit/store/fixture.h"

/* Expiry order and the reaper's budget ---------------------------------- */

static void test_expire_deadline_order(void **state)
{
	struct ctx *c = *state;
	static const uint64_t ttl[5] = { 500, 100, 400, 200, 300 };
	static const char *const name[5] = { "c0", "c1", "c2", "c3", "c4" };
	static const int order[4] = { 3, 4, 2, 0 }; /* after c1 */
	struct store_node *t, *p, *n[5];
	struct store_event_reader *re;
	struct store_event ev;
	struct rd d;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	for (int i = 0; i < 5; i++) {
		n[i] = cr(c, p, name[i]);
		set_ttl(c, n[i], ttl[i]);
	}
	rd_open(c, &d, NULL);
	re = ev_open(c, NULL);
	assert_int_equal(store_expire(c->s, 10), 0);

	/* Only c1 is due. */
	advance(c, 150);
	assert_int_equal(store_expire(c->s, 10), 1);
	next_op(c, re, STORE_OP_EXPIRE, &ev);
	assert_string_equal(ev.child, "c1");
	assert_int_equal(ev.ino, store_node_ino(n[1]));
	store_event_free(&ev);
	assert_list(c, p, "c0,c2,c3,c4");

	/* All due: one at a time, oldest deadline first. */
	advance(c, 1000);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(store_expire(c->s, 1), 1);
		next_op(c, re, STORE_OP_EXPIRE, &ev);
		if (strcmp(ev.child, name[order[i]]) != 0)
			fail_msg("expiry %d: %s, expected %s", i + 2, ev.child,
				 name[order[i]]);
		assert_int_equal(ev.ino, store_node_ino(n[order[i]]));
		assert_int_equal(ev.kind, STORE_CHILD);
		store_event_free(&ev);
	}
	assert_int_equal(store_expire(c->s, 1), 0);
	assert_int_equal(store_events_next(c->s, re, &ev), 0);
	expect_events(c, &d,
		      EV("expire", "t", "p", "c1", "1", "0")
		      EV("expire", "t", "p", "c3", "1", "0")
		      EV("expire", "t", "p", "c4", "1", "0")
		      EV("expire", "t", "p", "c2", "1", "0")
		      EV("expire", "t", "p", "c0", "1", "0"));
	assert_int_equal(stats(c, NULL).expiries, 5);
	assert_int_equal(stats(c, NULL).children, 0);
	assert_list(c, p, "");
	for (int i = 0; i < 5; i++)
		assert_int_equal(getattr_rc(c, n[i]), -ESTALE);
	check_ok(c);
}

/*
 * A parent and a child of it due at the same instant: the parent goes
 * first (its leave removes the child: a removal, not an expiry), as the
 * shared store orders them, whichever lease was set first.
 */
static void test_expire_tie_parent_first(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	set_ttl(c, a, 1000);
	set_ttl(c, p, 1000);
	advance(c, 1000);
	(void)store_expire(c->s, 10);
	assert_int_equal(stats(c, NULL).expiries, 1);
	assert_int_equal(stats(c, NULL).removals, 1);
	assert_int_equal(stats(c, NULL).children, 0);
	check_ok(c);
}

static void test_expire_budget(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p;
	char name[16];
	uint64_t t0;
	struct store_stats s;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	t0 = now(c);
	for (int i = 0; i < 12; i++) {
		struct store_node *n;

		snprintf(name, sizeof name, "c%02d", i);
		n = cr(c, p, name);
		set_ttl(c, n, i < 10 ? 100 + (uint64_t)i : 100000);
	}
	advance(c, 200);
	/* Ten due, two not: the budget bounds the work of each call. */
	assert_int_equal(store_expire(c->s, 0), 0);
	assert_int_equal(store_expire(c->s, 3), 3);
	assert_int_equal(store_expire(c->s, 3), 3);
	assert_int_equal(store_expire(c->s, 3), 3);
	assert_int_equal(store_expire(c->s, 3), 1);
	assert_int_equal(store_expire(c->s, 3), 0);
	s = stats(c, NULL);
	assert_int_equal(s.expiries, 10);
	assert_int_equal(s.children, 2);
	assert_int_equal(s.links, 2);
	assert_list(c, p, "c10,c11");
	assert_int_equal(store_next_deadline(c->s), t0 + 100000);
	check_ok(c);
}

/* store_next_deadline ----------------------------------------------------- */

static void test_next_deadline(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *a, *b;
	uint64_t t0, tomb;

	assert_int_equal(store_next_deadline(c->s), UINT64_MAX);
	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	a = cr(c, p, "a");
	b = cr(c, p, "b");
	/* Nodes without leases: nothing pending. */
	assert_int_equal(store_next_deadline(c->s), UINT64_MAX);

	t0 = now(c);
	set_ttl(c, a, 500);
	assert_int_equal(store_next_deadline(c->s), t0 + 500);
	set_ttl(c, b, 300);
	assert_int_equal(store_next_deadline(c->s), t0 + 300);
	set_ttl(c, q, 200);                 /* a parent's lease counts */
	assert_int_equal(store_next_deadline(c->s), t0 + 200);
	assert_int_equal(mkdir_rc(c, t, "r"), 0);
	assert_int_equal(store_rmdir(c->s, t, "r", NULL), 0); /* a tombstone */
	tomb = t0 + c->lim.tombstone_ttl_ms;
	assert_int_equal(store_next_deadline(c->s), t0 + 200);

	/* Renewal moves the deadline. */
	advance(c, 50);
	assert_int_equal(store_renew(c->s, q), 0);
	assert_int_equal(store_next_deadline(c->s), t0 + 250);

	/* Due nodes are reaped at their deadline, so that q's tombstone
	 * is dated the same whichever time the store takes for it. */
	advance(c, 200);                    /* t0 + 250 */
	assert_int_equal(store_next_deadline(c->s), t0 + 250);
	assert_int_equal(store_expire(c->s, 1), 1); /* q */
	assert_int_equal(store_next_deadline(c->s), t0 + 300);
	advance(c, 50);                     /* t0 + 300 */
	assert_int_equal(store_next_deadline(c->s), t0 + 300);
	assert_int_equal(store_expire(c->s, 1), 1); /* b */
	assert_int_equal(store_next_deadline(c->s), t0 + 500);
	assert_int_equal(store_expire(c->s, 10), 0);

	/* A due node stays pending until the reaper has run. */
	advance(c, 250);                    /* t0 + 550 */
	assert_int_equal(store_next_deadline(c->s), t0 + 500);
	assert_int_equal(store_expire(c->s, 10), 1); /* a */
	/* Only tombstones left (r's, and q's from its expiry). */
	assert_int_equal(store_next_deadline(c->s), tomb);
	advance(c, tomb - now(c));
	assert_int_equal(store_next_deadline(c->s), tomb);
	store_expire(c->s, 10);
	assert_int_equal(store_next_deadline(c->s),
			 t0 + 250 + c->lim.tombstone_ttl_ms);
	advance(c, 250);
	assert_int_equal(store_next_deadline(c->s), now(c));
	store_expire(c->s, 10);
	assert_int_equal(store_next_deadline(c->s), UINT64_MAX);
	assert_int_equal(stats(c, NULL).tombstones, 0);
	check_ok(c);
}

/* A lease that ends early (ttl 0, unlink, leave) is no longer pending. */
static void test_next_deadline_forgets_removed_leases(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *a, *b;
	uint64_t t0;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	a = cr(c, p, "a");
	b = cr(c, p, "b");
	t0 = now(c);
	set_ttl(c, a, 500);
	set_ttl(c, b, 300);
	set_ttl(c, q, 200);
	assert_int_equal(store_next_deadline(c->s), t0 + 200);
	set_ttl(c, q, 0);
	assert_int_equal(store_next_deadline(c->s), t0 + 300);
	assert_int_equal(store_unlink(c->s, p, "b"), 0);
	assert_int_equal(store_next_deadline(c->s), t0 + 500);
	/* Tenant cleanup takes a's lease with it. */
	assert_int_equal(store_rmdir(c->s, root(c), "t", NULL), 0);
	assert_int_equal(store_next_deadline(c->s), UINT64_MAX);
	advance(c, 1000);
	assert_int_equal(store_expire(c->s, 10), 0);
	assert_int_equal(stats(c, NULL).expiries, 0);
	check_ok(c);
}

/* Edge cases -------------------------------------------------------------- */

/* Any budget is a bound, however large. */
static void test_expire_large_budgets(void **state)
{
	struct ctx *c = *state;
	static const unsigned budgets[] = { 1u << 31, (1u << 31) + 1,
					    UINT32_MAX - 1, UINT32_MAX };
	struct store_node *t, *p;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	for (size_t i = 0; i < sizeof budgets / sizeof budgets[0]; i++) {
		char name[16];
		struct store_node *n;

		snprintf(name, sizeof name, "c%zu", i);
		n = cr(c, p, name);
		set_ttl(c, n, 10);
		advance(c, 10);
		if (store_expire(c->s, budgets[i]) != 1)
			fail_msg("store_expire(budget %u) with one due node "
				 "did not expire it", budgets[i]);
		assert_int_equal(getattr_rc(c, n), -ESTALE);
	}
	assert_int_equal(stats(c, NULL).expiries, 4);
	check_ok(c);
}

/* Leases of nodes removed otherwise leave nothing pending behind. */
static void test_removed_parent_leases_not_pending(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *u, *q, *r, *w;
	uint64_t t0, tomb;

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	q = mk(c, t, "q");
	r = mk(c, t, "r");
	w = mk(c, u, "w");
	t0 = now(c);
	set_ttl(c, q, 100);
	set_ttl(c, r, 200);
	set_ttl(c, w, 300);
	tomb = t0 + c->lim.tombstone_ttl_ms;
	assert_int_equal(store_rmdir(c->s, t, "q", NULL), 0);
	assert_int_equal(store_next_deadline(c->s), t0 + 200);
	assert_int_equal(store_depart(c->s, t, "r", NULL), 0);
	assert_int_equal(store_next_deadline(c->s), t0 + 300);
	assert_int_equal(store_rmdir(c->s, root(c), "u", NULL), 0);
	assert_int_equal(store_next_deadline(c->s), tomb);
	advance(c, 1000);
	assert_int_equal(store_expire(c->s, 16), 0);
	assert_int_equal(stats(c, NULL).expiries, 0);
	assert_int_equal(stats(c, NULL).leaves, 3);
	check_ok(c);
}

/* A random sequence against a model ---------------------------------------- */

/*
 * Children in two parents (child_ttl 20 and the default 50) under random
 * creates, unlinks, renewals, new TTLs, publications, lookups, listings,
 * clock steps and reaper runs with small budgets.  The model is driven by
 * the event lines, so it checks them too: a create only of an absent
 * name, an unlink or write only of a visible one, an expire only of a due
 * one, and each reaper run expires min(budget, due) nodes, the oldest
 * deadlines first.  After every step store_next_deadline() is the model's
 * earliest deadline.
 */
#define MP 2

#define MN 12

struct mslot {
	struct store_node *h;  /* last incarnation's handle (maybe dead) */
	bool present;          /* in the store, maybe expired, unreaped */
	bool live;             /* h is the present incarnation */
	uint64_t ttl, deadline;
};

struct model {
	struct ctx *c;
	struct store_node *p[MP];
	struct mslot m[MP][MN];
	uint64_t ptl[MP];      /* the TTL new children start with */
	struct rd d;
	uint64_t expiries;
	uint64_t exp_deadline[64]; /* deadlines expired by the last lines */
	int nexp;
};

static const char *const MPN[MP] = { "p0", "p1" };

static bool m_visible(struct model *m, struct mslot *x)
{
	return x->present && (!x->deadline || x->deadline > now(m->c));
}

static struct mslot *m_slot(struct model *m, const char *pn, const char *cn)
{
	for (int i = 0; i < MP; i++)
		if (strcmp(pn, MPN[i]) == 0) {
			int k = atoi(cn + 1);

			if (cn[0] == 'c' && k >= 0 && k < MN)
				return &m->m[i][k];
		}
	fail_msg("event for an unknown slot %s/%s", pn, cn);
	return NULL;
}

/* Apply the pending event lines to the model, checking each. */
static void m_events(struct model *m)
{
	char *ev = rd_take(m->c, &m->d), *line = ev;

	m->nexp = 0;
	while (*line) {
		char f[7][64];
		char *nl = strchr(line, '\n');
		struct mslot *x;
		int nf = 0;
		char *q = line;

		assert_non_null(nl);
		*nl = '\0';
		while (nf < 7) {
			char *tab = strchr(q, '\t');
			size_t n = tab ? (size_t)(tab - q) : strlen(q);

			assert_true(n < sizeof f[0]);
			memcpy(f[nf], q, n);
			f[nf++][n] = '\0';
			if (!tab)
				break;
			q = tab + 1;
		}
		if (nf != 6 || strcmp(f[1], "t") != 0)
			fail_msg("unexpected event line: %s", line);
		x = m_slot(m, f[2], f[3]);
		if (strcmp(f[0], "create") == 0) {
			if (x->present)
				fail_msg("create of a present name: %s", line);
			x->present = true;
		} else if (strcmp(f[0], "unlink") == 0) {
			if (!m_visible(m, x))
				fail_msg("unlink of an invisible name: %s",
					 line);
			x->present = false;
			x->live = false;
		} else if (strcmp(f[0], "write") == 0) {
			if (!m_visible(m, x))
				fail_msg("write of an invisible name: %s",
					 line);
		} else if (strcmp(f[0], "expire") == 0) {
			if (!x->present || !x->deadline ||
			    x->deadline > now(m->c))
				fail_msg("expire of a node not due (present %d "
					 "deadline %llu now %llu): %s",
					 x->present,
					 (unsigned long long)x->deadline,
					 (unsigned long long)now(m->c), line);
			x->present = false;
			x->live = false;
			m->expiries++;
			if (m->nexp < 64)
				m->exp_deadline[m->nexp++] = x->deadline;
		} else {
			fail_msg("unexpected event line: %s", line);
		}
		line = nl + 1;
	}
	free(ev);
}

static uint64_t m_next_deadline(struct model *m)
{
	uint64_t next = UINT64_MAX;

	for (int i = 0; i < MP; i++)
		for (int k = 0; k < MN; k++)
			if (m->m[i][k].present && m->m[i][k].deadline &&
			    m->m[i][k].deadline < next)
				next = m->m[i][k].deadline;
	return next;
}

static void m_step(struct model *m, unsigned *seed)
{
	struct ctx *c = m->c;
	int pi = rand_r(seed) % MP, ki = rand_r(seed) % MN;
	struct mslot *x = &m->m[pi][ki];
	struct store_node *p = m->p[pi];
	char name[8];
	unsigned op = (unsigned)rand_r(seed) % 100;
	int rc;

	snprintf(name, sizeof name, "c%d", ki);
	if (op < 20) {                               /* create */
		struct store_node *n = NULL;
		bool created = false, vis = m_visible(m, x);

		rc = store_create(c->s, p, name, &FOWN, true, &n, &created);
		assert_int_equal(rc, vis ? -EEXIST : 0);
		m_events(m);
		if (rc == 0) {
			assert_true(x->present);
			if (x->h)
				drop(c, x->h);
			x->h = keep(c, n);
			x->live = true;
			x->ttl = m->ptl[pi];
			x->deadline = x->ttl ? now(c) + x->ttl : 0;
			assert_lease(c, n, x->ttl, x->deadline);
		}
	} else if (op < 30) {                        /* unlink */
		bool vis = m_visible(m, x);

		rc = store_unlink(c->s, p, name);
		assert_int_equal(rc, vis ? 0 : -ENOENT);
		m_events(m);
		if (vis)
			assert_false(x->present);
	} else if (op < 45 && x->h) {                /* renew */
		bool ok = x->live && m_visible(m, x);

		rc = store_renew(c->s, x->h);
		assert_int_equal(rc, ok ? 0 : -ESTALE);
		if (ok && x->ttl)
			x->deadline = now(c) + x->ttl;
		if (ok)
			assert_lease(c, x->h, x->ttl, x->deadline);
		m_events(m);
	} else if (op < 55 && x->h) {                /* set_ttl */
		bool ok = x->live && m_visible(m, x);
		uint64_t ttl = rand_r(seed) % 10 == 0 ? 0 :
			       1 + (uint64_t)(rand_r(seed) % 120);

		rc = store_set_ttl(c->s, x->h, ttl);
		assert_int_equal(rc, ok ? 0 : -ESTALE);
		if (ok) {
			x->ttl = ttl;
			x->deadline = ttl ? now(c) + ttl : 0;
			assert_lease(c, x->h, x->ttl, x->deadline);
		}
		m_events(m);
	} else if (op < 70) {                        /* the clock */
		advance(c, (uint64_t)(rand_r(seed) % 26));
	} else if (op < 80) {                        /* the reaper */
		unsigned budget = (unsigned)rand_r(seed) % 5, got, ndue = 0;

		for (int i = 0; i < MP; i++)
			for (int k = 0; k < MN; k++) {
				struct mslot *y = &m->m[i][k];

				if (y->present && y->deadline &&
				    y->deadline <= now(c))
					ndue++;
			}
		got = store_expire(c->s, budget);
		m_events(m);
		assert_int_equal(got, (unsigned)m->nexp);
		assert_int_equal(got, budget < ndue ? budget : ndue);
		/* Oldest first: nothing left due is older than what went. */
		for (int e = 1; e < m->nexp; e++)
			assert_true(m->exp_deadline[e - 1] <=
				    m->exp_deadline[e]);
		if (m->nexp) {
			uint64_t newest = m->exp_deadline[m->nexp - 1];

			for (int i = 0; i < MP; i++)
				for (int k = 0; k < MN; k++) {
					struct mslot *y = &m->m[i][k];

					if (y->present && y->deadline &&
					    y->deadline <= now(c))
						assert_true(y->deadline >=
							    newest);
				}
		}
	} else if (op < 88) {                        /* lookup */
		struct store_node *n = NULL;

		rc = store_lookup(c->s, p, name, &n);
		m_events(m);
		assert_int_equal(rc, m_visible(m, x) ? 0 : -ENOENT);
		if (rc == 0) {
			assert_true(x->live);
			assert_int_equal(store_node_ino(n),
					 store_node_ino(x->h));
			put(c, n);
		}
	} else if (op < 93) {                        /* listing */
		struct store_dirlist dl = { 0, NULL };
		bool seen[MN] = { false };

		assert_int_equal(store_list(c->s, p, &dl), 0);
		m_events(m);
		for (size_t e = 0; e < dl.n; e++) {
			int k = atoi(dl.e[e].name + 1);

			assert_true(k >= 0 && k < MN);
			assert_false(seen[k]);
			seen[k] = true;
		}
		store_dirlist_free(&dl);
		for (int k = 0; k < MN; k++)
			if (seen[k] != m_visible(m, &m->m[pi][k]))
				fail_msg("listing of %s: %s %s, model says "
					 "%s", MPN[pi], MPN[pi] + 0,
					 seen[k] ? "listed" : "not listed",
					 m_visible(m, &m->m[pi][k]) ?
						 "visible" : "invisible");
	} else if (x->h) {                           /* publication */
		struct store_stage *st = NULL;
		bool ok = x->live && m_visible(m, x);

		rc = store_stage_open(c->s, x->h, STORE_STAGE_REPLACE, &st);
		if (rc == 0) {
			ssize_t w = store_stage_write(st, "abc", 3, 0);

			rc = w < 0 ? (int)w : store_stage_publish(st);
			store_stage_close(st);
		}
		assert_int_equal(rc, ok ? 0 : -ESTALE);
		m_events(m);
	}
	assert_int_equal(store_next_deadline(c->s), m_next_deadline(m));
}

static void test_lease_model_random(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t;
	struct model *m = calloc(1, sizeof *m);
	unsigned seed = 0x1ea5e, seed0;
	int steps = 30000;

	assert_non_null(m);
	if (getenv("LEASE_SEED"))
		seed = (unsigned)strtoul(getenv("LEASE_SEED"), NULL, 0);
	seed0 = seed;
	store_limits_default(&l);
	l.default_ttl_ms = 50;
	reopen(c, &l);
	m->c = c;
	t = mk(c, root(c), "t");
	for (int i = 0; i < MP; i++)
		m->p[i] = mk(c, t, MPN[i]);
	assert_int_equal(store_set_child_ttl(c->s, m->p[0], 20), 0);
	m->ptl[0] = 20;
	m->ptl[1] = 50;
	rd_open(c, &m->d, NULL);

	for (int i = 0; i < steps; i++) {
		m_step(m, &seed);
		if (i % 1000 == 999) {
			assert_int_equal(stats(c, NULL).expiries, m->expiries);
			check_ok(c);
		}
	}
	/* Drain: everything due goes, and the counters agree. */
	advance(c, 1000);
	while (store_expire(c->s, 7))
		;
	m_events(m);
	assert_int_equal(stats(c, NULL).expiries, m->expiries);
	assert_int_equal(store_next_deadline(c->s), m_next_deadline(m));
	{
		uint64_t present = 0;

		for (int i = 0; i < MP; i++)
			for (int k = 0; k < MN; k++)
				present += m->m[i][k].present;
		assert_int_equal(stats(c, NULL).children, present);
	}
	print_message("# model: %d steps, %llu expiries (seed %#x)\n", steps,
		      (unsigned long long)m->expiries, seed0);
	free(m);
	check_ok(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST_HOOKED(test_expire_deadline_order),
		TEST_HOOKED(test_expire_tie_parent_first),
		TEST_HOOKED(test_expire_budget),
		TEST_HOOKED(test_next_deadline),
		TEST_HOOKED(test_next_deadline_forgets_removed_leases),
		TEST_HOOKED(test_expire_large_budgets),
		TEST_HOOKED(test_removed_parent_leases_not_pending),
		TEST_HOOKED(test_lease_model_random),
	};

	return run_store_tests("reaper", tests);
}
