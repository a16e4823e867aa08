/*
 * test_child.c - unit tests of children (store/child.c).
 *
 * Admission (O_EXCL, or idempotent), incarnations (a handle of a removed
 * child is stale), renames between parents, with and without
 * replacement, exchange, and the refusals of renames across tenants; a
 * state past its deadline is gone from every bucket that links it, reaped
 * or not, and its names are free for every kind of admission.
 *
 * The fixture (fixture.h) gives each test a fresh store on a manual
 * clock and holds the nodes the test is handed; its teardown releases
 * them and recounts the store (store_check_all).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store/store.h"
#include "tests/unit/unit.h"
#include "tests/unit/store/fixture.h"

/* Admission and incarnations ---------------------------------------------- */

static void test_child_create_excl_idempotent(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a, *n = NULL;
	struct store_stats s0, s1;
	struct store_attr at;
	bool created = true;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	s0 = stats(c, NULL);
	a = cr(c, p, "a");
	assert_int_equal(store_node_kind(a), STORE_CHILD);
	assert_int_equal(store_node_depth(a), 3);
	assert_true(store_node_live(a));
	assert_null(store_node_tenant(a)); /* its parents' */
	assert_int_equal(store_getattr(c->s, a, &at), 0);
	assert_true(S_ISREG(at.mode));
	assert_int_equal(at.mode & 07777, 0644);
	assert_int_equal(at.uid, 1000);
	assert_int_equal(at.nlink, 1);
	assert_int_equal(at.size, 0);
	assert_int_equal(at.ino, store_node_ino(a));

	/* O_EXCL on an existing child. */
	assert_int_equal(store_create(c->s, p, "a", &FOWN, true, &n, &created),
			 -EEXIST);
	s1 = stats(c, NULL);
	assert_int_equal(s1.refused[STORE_REFUSED_EXISTS],
			 s0.refused[STORE_REFUSED_EXISTS] + 1);

	/* Plain O_CREAT opens the existing child. */
	n = NULL;
	created = true;
	assert_int_equal(store_create(c->s, p, "a", &FOWN, false, &n, &created),
			 0);
	assert_non_null(n);
	assert_false(created);
	assert_int_equal(store_node_ino(n), store_node_ino(a));
	put(c, n);

	n = NULL;
	created = false;
	assert_int_equal(store_create(c->s, p, "b", &FOWN, false, &n, &created),
			 0);
	assert_true(created);
	assert_true(store_node_ino(n) > store_node_ino(a));
	put(c, n);

	s1 = stats(c, NULL);
	assert_int_equal(s1.admissions, s0.admissions + 2);
	assert_gauges(c, t, 1, 1, 2, 2, 0, 0);
	assert_list(c, p, "a,b");

	/* Terminal removal: exactly one winner. */
	s0 = stats(c, NULL);
	assert_int_equal(store_unlink(c->s, p, "a"), 0);
	assert_int_equal(store_unlink(c->s, p, "a"), -ENOENT);
	s1 = stats(c, NULL);
	assert_int_equal(s1.removals, s0.removals + 1);
	assert_false(store_node_live(a));
	assert_int_equal(lookup_rc(c, p, "a"), -ENOENT);
	assert_gauges(c, t, 1, 1, 1, 1, 0, 0);

	/* unlink of a name that is not a child. */
	{
		int rc = store_unlink(c->s, t, "p");

		assert_true(rc == -EISDIR || rc == -EPERM);
		assert_true(store_node_live(p));
	}
	/* A child is not a directory. */
	n = lk(c, p, "b");
	assert_int_equal(lookup_rc(c, n, "x"), -ENOTDIR);
	check_ok(c);
}

static void test_child_old_incarnation_stale(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *old, *neu;
	struct store_stage *st = NULL;
	struct store_attr at;
	uint64_t v;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	old = cr(c, p, "a");
	publish(c, old, STORE_STAGE_REPLACE, "one");
	assert_int_equal(store_unlink(c->s, p, "a"), 0);
	neu = cr(c, p, "a");
	assert_true(store_node_ino(neu) != store_node_ino(old));
	assert_true(store_node_ino(neu) > store_node_ino(old));
	assert_int_equal(ino_of(c, p, "a"), store_node_ino(neu));
	v = version(c, neu);

	assert_false(store_node_live(old));
	assert_int_equal(store_getattr(c->s, old, &at), -ESTALE);
	assert_int_equal(store_stage_open(c->s, old, STORE_STAGE_READ, &st),
			 -ESTALE);
	assert_int_equal(store_stage_open(c->s, old, STORE_STAGE_REPLACE, &st),
			 -ESTALE);
	assert_int_equal(store_link(c->s, old, q, "a"), -ESTALE);
	at.mode = 0600;
	assert_int_equal(store_setattr(c->s, old, STORE_SET_MODE, &at, &at),
			 -ESTALE);

	/* The new incarnation is untouched. */
	assert_true(store_node_live(neu));
	assert_int_equal(store_getattr(c->s, neu, &at), 0);
	assert_int_equal(at.size, 0);
	assert_int_equal(at.mode & 07777, 0644);
	assert_int_equal(version(c, neu), v);
	assert_content(c, neu, "");
	assert_list(c, q, "");
	assert_gauges(c, t, 1, 2, 1, 1, 0, 0);
	check_ok(c);
}

/* Renames ------------------------------------------------------------- */

static void test_rename_between_parents(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *a;
	struct store_stats s0, s1;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "A");

	s0 = stats(c, NULL);
	assert_int_equal(store_rename(c->s, p, "a", q, "b", 0), 0);
	s1 = stats(c, NULL);
	assert_gauges_eq(&s0, &s1);
	assert_int_equal(lookup_rc(c, p, "a"), -ENOENT);
	assert_int_equal(ino_of(c, q, "b"), store_node_ino(a));
	assert_true(store_node_live(a));
	assert_int_equal(nlink(c, a), 1);
	assert_content(c, a, "A");
	assert_list(c, p, "");
	assert_list(c, q, "b");

	/* Within one parent. */
	assert_int_equal(store_rename(c->s, q, "b", q, "c", 0), 0);
	assert_list(c, q, "c");
	assert_int_equal(ino_of(c, q, "c"), store_node_ino(a));

	/* Missing source. */
	assert_int_equal(store_rename(c->s, p, "zz", q, "zz", 0), -ENOENT);
	assert_int_equal(store_rename(c->s, p, "zz", q, "zz",
				      STORE_RENAME_NOREPLACE), -ENOENT);
	/* NOREPLACE onto a free name works. */
	assert_int_equal(store_rename(c->s, q, "c", p, "a",
				      STORE_RENAME_NOREPLACE), 0);
	assert_list(c, p, "a");
	assert_list(c, q, "");
	assert_gauges(c, t, 1, 2, 1, 1, 0, 1);
	check_ok(c);
}

static void test_rename_noreplace_and_replace(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *r, *a, *b, *d;
	struct store_stats s0, s1;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	r = mk(c, t, "r");
	a = cr(c, p, "a");
	b = cr(c, q, "b");
	d = cr(c, q, "d");
	publish(c, a, STORE_STAGE_REPLACE, "A");
	publish(c, b, STORE_STAGE_REPLACE, "BB");
	publish(c, d, STORE_STAGE_REPLACE, "DDD");
	assert_int_equal(store_link(c->s, d, r, "d"), 0);

	s0 = stats(c, NULL);
	assert_int_equal(store_rename(c->s, p, "a", q, "b",
				      STORE_RENAME_NOREPLACE), -EEXIST);
	s1 = stats(c, NULL);
	assert_gauges_eq(&s0, &s1);
	assert_int_equal(ino_of(c, p, "a"), store_node_ino(a));
	assert_int_equal(ino_of(c, q, "b"), store_node_ino(b));
	assert_content(c, b, "BB");

	/* A replaced destination is a terminal removal. */
	s0 = stats(c, NULL);
	assert_int_equal(store_rename(c->s, p, "a", q, "b", 0), 0);
	s1 = stats(c, NULL);
	assert_int_equal(s1.removals, s0.removals + 1);
	assert_false(store_node_live(b));
	assert_int_equal(ino_of(c, q, "b"), store_node_ino(a));
	assert_content(c, a, "A");
	assert_list(c, p, "");
	assert_gauges(c, t, 1, 3, 2, 3, 0, 4);
	check_ok(c);

	/* A replaced destination that is linked elsewhere only loses a link. */
	assert_int_equal(store_rename(c->s, q, "b", q, "d", 0), 0);
	assert_true(store_node_live(d));
	assert_int_equal(nlink(c, d), 1);
	assert_int_equal(ino_of(c, q, "d"), store_node_ino(a));
	assert_int_equal(ino_of(c, r, "d"), store_node_ino(d));
	assert_list(c, q, "d");
	assert_gauges(c, t, 1, 3, 2, 2, 0, 4);
	check_ok(c);
}

static void test_rename_exchange(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *a, *b;
	struct store_stats s0, s1;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	a = cr(c, p, "a");
	b = cr(c, q, "b");
	publish(c, a, STORE_STAGE_REPLACE, "A");
	publish(c, b, STORE_STAGE_REPLACE, "B");

	s0 = stats(c, NULL);
	assert_int_equal(store_rename(c->s, p, "a", q, "b",
				      STORE_RENAME_EXCHANGE), 0);
	s1 = stats(c, NULL);
	assert_gauges_eq(&s0, &s1);
	assert_int_equal(s1.removals, s0.removals);
	assert_int_equal(ino_of(c, p, "a"), store_node_ino(b));
	assert_int_equal(ino_of(c, q, "b"), store_node_ino(a));
	assert_true(store_node_live(a));
	assert_true(store_node_live(b));
	assert_content(c, a, "A");
	assert_content(c, b, "B");

	/* EXCHANGE needs both ends. */
	assert_int_equal(store_rename(c->s, p, "a", q, "zz",
				      STORE_RENAME_EXCHANGE), -ENOENT);
	assert_int_equal(ino_of(c, p, "a"), store_node_ino(b));
	assert_list(c, q, "b");

	/* A name exchanged with itself, and two names of one state. */
	assert_int_equal(store_rename(c->s, p, "a", p, "a",
				      STORE_RENAME_EXCHANGE), 0);
	assert_int_equal(ino_of(c, p, "a"), store_node_ino(b));
	assert_int_equal(store_link(c->s, b, q, "b2"), 0);
	assert_int_equal(store_rename(c->s, p, "a", q, "b2",
				      STORE_RENAME_EXCHANGE), 0);
	assert_int_equal(ino_of(c, p, "a"), store_node_ino(b));
	assert_int_equal(ino_of(c, q, "b2"), store_node_ino(b));
	check_ok(c);
	check_ok(c);
}

static void test_rename_eperm_exdev(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *u, *p, *r;
	struct store_stats s0, s1;

	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	p = mk(c, t, "p");
	mk(c, t, "q");
	r = mk(c, u, "r");
	assert_int_equal(create_rc(c, p, "a", true), 0);

	s0 = stats(c, NULL);
	/* Tenants and parents cannot be renamed. */
	assert_int_equal(store_rename(c->s, root(c), "t", root(c), "t2", 0),
			 -EPERM);
	assert_int_equal(store_rename(c->s, t, "p", t, "p2", 0), -EPERM);
	{
		int rc = store_rename(c->s, t, "p", u, "p", 0);

		assert_true(rc == -EPERM || rc == -EXDEV);
	}
	/* Across tenants. */
	assert_int_equal(store_rename(c->s, p, "a", r, "a", 0), -EXDEV);
	s1 = stats(c, NULL);
	assert_gauges_eq(&s0, &s1);
	assert_list(c, root(c), "t,u");
	assert_list(c, t, "p,q");
	assert_list(c, p, "a");
	assert_list(c, r, "");
	check_ok(c);
}

/* Expiry: a shared state -------------------------------------------------- */

static void test_shared_state_expiry_ends_all_links(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p1, *p2, *a, *d;
	struct store_stats s;
	struct store_lease la, ld;
	struct rd rd;
	char *ev, *line;
	int nexp = 0;

	t = mk(c, root(c), "t");
	p1 = mk(c, t, "p1");
	p2 = mk(c, t, "p2");
	a = cr(c, p1, "c");
	assert_int_equal(store_link(c->s, a, p2, "d"), 0);
	d = lk(c, p2, "d");
	set_ttl(c, d, 500);                  /* through either link */
	la = lease(c, a);
	ld = lease(c, d);
	assert_int_equal(la.ttl_ms, 500);
	assert_int_equal(la.deadline_ms, ld.deadline_ms);
	rd_open(c, &rd, NULL);

	advance(c, 500);
	assert_int_equal(lookup_rc(c, p1, "c"), -ENOENT);
	assert_int_equal(lookup_rc(c, p2, "d"), -ENOENT);
	assert_list(c, p1, "");
	assert_list(c, p2, "");
	assert_int_equal(getattr_rc(c, a), -ESTALE);
	store_expire(c->s, 16);
	s = stats(c, NULL);
	assert_int_equal(s.children, 0);
	assert_int_equal(s.links, 0);
	assert_int_equal(s.expiries, 1);
	assert_int_equal(store_expire(c->s, 16), 0);

	/* One state expired; its lines name the links it had. */
	ev = rd_take(c, &rd);
	for (line = ev; *line; line = strchr(line, '\n') + 1) {
		if (strncmp(line, EV("expire", "t", "p1", "c", "1", "0"),
			    strlen(EV("expire", "t", "p1", "c", "1", "0"))) &&
		    strncmp(line, EV("expire", "t", "p2", "d", "1", "0"),
			    strlen(EV("expire", "t", "p2", "d", "1", "0"))))
			fail_msg("unexpected line after a shared expiry: %s",
				 line);
		nexp++;
	}
	print_message("# shared state expiry: %d expire line(s)\n", nexp);
	assert_true(nexp >= 1 && nexp <= 2);
	free(ev);

	/* Both names are free. */
	assert_int_equal(create_rc(c, p1, "c", true), 0);
	assert_int_equal(create_rc(c, p2, "d", true), 0);
	check_ok(c);
}

/* Visibility before reaping -------------------------------------------- */

static void test_child_invisible_at_deadline_before_reap(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a, *a2;
	struct store_stage *st = NULL, *st2 = NULL;
	struct store_stats s0, s;
	uint64_t t0;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	cr(c, p, "sib");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "old");
	t0 = now(c);
	set_ttl(c, a, 1000);
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &st),
			 0);
	s0 = stats(c, NULL);

	advance(c, 999);
	assert_int_equal(lookup_rc(c, p, "a"), 0);
	assert_list(c, p, "a,sib");
	assert_int_equal(getattr_rc(c, a), 0);

	/* now == deadline: gone, and no store_expire has run. */
	advance(c, 1);
	assert_int_equal(now(c), t0 + 1000);
	assert_int_equal(lookup_rc(c, p, "a"), -ENOENT);
	assert_list(c, p, "sib");
	assert_int_equal(getattr_rc(c, a), -ESTALE);
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_READ, &st2),
			 -ESTALE);
	assert_int_equal(store_stage_write(st, "new", 3, 0), -ESTALE);
	assert_int_equal(store_stage_publish(st), -ESTALE);
	store_stage_close(st);
	assert_int_equal(store_renew(c->s, a), -ESTALE);
	assert_int_equal(store_unlink(c->s, p, "a"), -ENOENT);
	assert_int_equal(lookup_rc(c, p, "sib"), 0);

	/* The name is free. */
	{
		struct store_node *n = NULL;
		bool created = false;

		assert_int_equal(store_create(c->s, p, "a", &FOWN, true, &n,
					      &created), 0);
		assert_true(created);
		a2 = keep(c, n);
	}
	assert_true(store_node_ino(a2) != store_node_ino(a));
	assert_int_equal(getattr_rc(c, a2), 0);
	assert_list(c, p, "a,sib");
	s = stats(c, NULL);
	assert_int_equal(s.expiries, s0.expiries + 1);
	assert_int_equal(s.children, 2);
	assert_int_equal(s.links, 2);
	assert_int_equal(s.bytes, 0);
	/* The old one was dealt with once: the reaper finds nothing. */
	assert_int_equal(store_expire(c->s, 16), 0);
	assert_int_equal(stats(c, NULL).expiries, s0.expiries + 1);
	assert_int_equal(lookup_rc(c, p, "a"), 0);
	check_ok(c);
}

/* An expired name is free for every kind of admission; an expired
 * source is gone. */
static void test_admissions_onto_expired_names(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *q, *a, *x, *y, *z, *n;
	struct store_stats s0, s1;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	q = mk(c, t, "q");
	a = cr(c, p, "a");                   /* no lease */
	x = cr(c, q, "x");
	y = cr(c, q, "y");
	z = cr(c, p, "z");
	set_ttl(c, x, 100);
	set_ttl(c, y, 100);
	set_ttl(c, z, 100);
	advance(c, 100);
	s0 = stats(c, NULL);

	/* link onto an expired name. */
	assert_int_equal(store_link(c->s, a, q, "x"), 0);
	/* rename onto an expired name, even under NOREPLACE. */
	n = cr(c, p, "m");
	assert_int_equal(store_rename(c->s, p, "m", q, "y",
				      STORE_RENAME_NOREPLACE), 0);
	/* An expired source cannot be moved or linked. */
	assert_int_equal(store_rename(c->s, p, "z", q, "z", 0), -ENOENT);
	assert_int_equal(store_link(c->s, z, q, "z2"), -ESTALE);

	s1 = stats(c, NULL);
	assert_int_equal(s1.expiries, s0.expiries + 3);
	assert_int_equal(s1.removals, s0.removals);
	assert_int_equal(s1.children, 2);    /* a, m */
	assert_int_equal(s1.links, 3);       /* p/a, q/x, q/y */
	assert_list(c, p, "a");
	assert_int_equal(ino_of(c, q, "x"), store_node_ino(a));
	assert_int_equal(ino_of(c, q, "y"), store_node_ino(n));
	assert_int_equal(getattr_rc(c, x), -ESTALE);
	assert_int_equal(getattr_rc(c, y), -ESTALE);
	assert_int_equal(getattr_rc(c, z), -ESTALE);
	assert_int_equal(store_expire(c->s, 16), 0);
	check_ok(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_child_create_excl_idempotent),
		TEST(test_child_old_incarnation_stale),
		TEST(test_rename_between_parents),
		TEST(test_rename_noreplace_and_replace),
		TEST(test_rename_exchange),
		TEST(test_rename_eperm_exdev),
		TEST_HOOKED(test_shared_state_expiry_ends_all_links),
		TEST_HOOKED(test_child_invisible_at_deadline_before_reap),
		TEST_HOOKED(test_admissions_onto_expired_names),
	};

	return run_store_tests("child", tests);
}
