/*
 * test_content_limits.c - unit tests of what staged writes may hold
 * (store/content.c): a write past max_payload or max_bytes is refused
 * and changes nothing; a stage of a removed child is stale; what stages
 * hold counts in max_bytes and the tenants' shares beside what is
 * published, until it is published, refused or closed.
 *
 * The fixture (fixture.h) gives each test a fresh store on a manual
 * clock and holds the nodes the test is handed; its teardown releases
 * them and recounts the store (store_check_all).
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "store/store.h"
#include "tests/unit/unit.h"
#include "tests/unit/store/fixture.h"

static void test_stage_payload_limit(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t, *p, *a;
	struct store_stage *st = NULL;
	struct store_stats s0, s1;
	char big[32];
	struct store_attr in, out;

	store_limits_default(&l);
	l.max_payload = 16;
	reopen(c, &l);
	memset(big, 'x', sizeof big);

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	/* Each refused write abandons its stage (see
	 * test_stage_refused_write_changes_nothing): one stage per case. */
	s0 = stats(c, NULL);
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_write(st, big, 17, 0), -EFBIG);
	store_stage_close(st);
	s1 = stats(c, NULL);
	assert_int_equal(s1.refused[STORE_REFUSED_PAYLOAD],
			 s0.refused[STORE_REFUSED_PAYLOAD] + 1);
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_write(st, big, 10, 10), -EFBIG);
	store_stage_close(st);
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_write(st, big, 10, 0), 10);
	assert_int_equal(store_stage_write(st, big, 6, 10), 6); /* exactly 16 */
	assert_int_equal(store_stage_publish(st), 0);
	store_stage_close(st);
	assert_gauges(c, t, 1, 1, 1, 1, 0, 16);
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_CAS, &st), 0);
	assert_int_equal(store_stage_write(st, big, 1, 16), -EFBIG);
	store_stage_close(st);

	/* Appending to a full child fails at write time. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_APPEND, &st), 0);
	assert_int_equal(store_stage_write(st, "y", 1, 0), -EFBIG);
	store_stage_close(st);

	/* A size change over max_payload. */
	in.size = 17;
	assert_int_equal(store_setattr(c->s, a, STORE_SET_SIZE, &in, &out),
			 -EFBIG);
	assert_gauges(c, t, 1, 1, 1, 1, 0, 16);
	check_ok(c);
}

static void test_stage_bytes_ceiling(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t, *p, *a, *b;
	struct store_stage *st = NULL;
	struct store_stats s0, s1;
	struct store_attr in, out;
	char big[32];

	store_limits_default(&l);
	l.max_bytes = 20;
	l.tenant_max_bytes = 0; /* the ceiling alone */
	reopen(c, &l);
	memset(big, 'x', sizeof big);

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	b = cr(c, p, "b");
	publish(c, a, STORE_STAGE_REPLACE, "123456789012345"); /* 15 */

	s0 = stats(c, NULL);
	assert_int_equal(store_stage_open(c->s, b, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_write(st, big, 6, 0), -ENOSPC);
	assert_int_equal(store_stage_flush(st), -ENOSPC);
	store_stage_close(st);
	s1 = stats(c, NULL);
	assert_gauges_eq(&s0, &s1);
	assert_int_equal(s1.refused[STORE_REFUSED_CAPACITY],
			 s0.refused[STORE_REFUSED_CAPACITY] + 1);
	assert_int_equal(store_stage_open(c->s, b, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_write(st, big, 5, 0), 5);
	assert_int_equal(store_stage_publish(st), 0);
	store_stage_close(st);
	assert_gauges(c, t, 1, 1, 2, 2, 0, 20);

	in.size = 6;
	assert_int_equal(store_setattr(c->s, b, STORE_SET_SIZE, &in, &out),
			 -ENOSPC);
	assert_gauges(c, t, 1, 1, 2, 2, 0, 20);

	/* Replacing content frees what it replaces: 15 -> 15 fits. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_write(st, big, 15, 0), 15);
	assert_int_equal(store_stage_publish(st), 0);
	store_stage_close(st);
	assert_gauges(c, t, 1, 1, 2, 2, 0, 20);
	check_ok(c);
}

/* What the stages of @c's store hold, store-wide and in tenant @t. */
static void assert_staged(struct ctx *c, struct store_node *t, uint64_t all,
			  uint64_t in_t)
{
	assert_int_equal(stats(c, NULL).staged_bytes, all);
	assert_int_equal(stats(c, t).staged_bytes, in_t);
}

/*
 * Staged bytes count against max_bytes and the tenant's share beside the
 * published ones, from the write that stages them to the publication,
 * refusal or close that ends them (open files that never publish held
 * memory past every ceiling): the write that would pass a ceiling once
 * its stage is published, the others still open, is refused (ENOSPC,
 * EDQUOT) and abandons its stage; a replacement counts without the
 * content it replaces; .stats shows them as staged_bytes, and every end
 * of a stage gives them back.
 */
static void test_stage_staged_bytes_count(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t, *u, *p, *q, *a, *b, *d, *e;
	struct store_stage *s1 = NULL, *s2 = NULL, *s3 = NULL, *s4 = NULL;
	struct store_stats before, after;
	char big[32];

	store_limits_default(&l);
	l.max_bytes = 20;
	l.tenant_max_bytes = 14;
	reopen(c, &l);
	memset(big, 'x', sizeof big);
	t = mk(c, root(c), "t");
	u = mk(c, root(c), "u");
	p = mk(c, t, "p");
	q = mk(c, u, "q");
	a = cr(c, p, "a");
	b = cr(c, p, "b");
	d = cr(c, q, "d");
	e = cr(c, q, "e");

	/* Two new stages in t: 6 + 6 fit its 14, 3 more bytes do not, and
	 * the refused write gives back its own stage's 6. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &s1), 0);
	assert_int_equal(store_stage_open(c->s, b, STORE_STAGE_REPLACE, &s2), 0);
	assert_int_equal(store_stage_write(s1, big, 6, 0), 6);
	assert_int_equal(store_stage_write(s2, big, 6, 0), 6);
	assert_staged(c, t, 12, 12);
	assert_gauges(c, t, 1, 1, 2, 2, 0, 0);
	before = stats(c, NULL);
	assert_int_equal(store_stage_write(s2, big, 3, 6), -EDQUOT);
	after = stats(c, NULL);
	assert_int_equal(after.refused[STORE_REFUSED_QUOTA],
			 before.refused[STORE_REFUSED_QUOTA] + 1);
	assert_staged(c, t, 6, 6);
	assert_int_equal(store_stage_flush(s2), -EDQUOT);
	store_stage_close(s2);
	assert_staged(c, t, 6, 6);

	/* In u: 8 + 7 would fit its share, but not the store's 20 beside
	 * t's 6. */
	assert_int_equal(store_stage_open(c->s, d, STORE_STAGE_APPEND, &s3), 0);
	assert_int_equal(store_stage_write(s3, big, 8, 0), 8);
	assert_staged(c, u, 14, 8);
	before = stats(c, NULL);
	assert_int_equal(store_stage_open(c->s, e, STORE_STAGE_REPLACE, &s4), 0);
	assert_int_equal(store_stage_write(s4, big, 7, 0), -ENOSPC);
	after = stats(c, NULL);
	assert_gauges_eq(&before, &after);
	assert_int_equal(after.refused[STORE_REFUSED_CAPACITY],
			 before.refused[STORE_REFUSED_CAPACITY] + 1);
	store_stage_close(s4);

	/* A publication turns its stage's bytes into published ones: an
	 * append its 8, a replacement its 6. */
	assert_int_equal(store_stage_publish(s3), 0);
	store_stage_close(s3);
	assert_staged(c, u, 6, 0);
	assert_gauges(c, u, 1, 1, 2, 2, 0, 8);
	assert_int_equal(store_stage_publish(s1), 0);
	store_stage_close(s1);
	assert_staged(c, t, 0, 0);
	assert_gauges(c, NULL, 2, 2, 4, 4, 0, 14);

	/* An in-place edit stages the whole state it edits. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_CAS, &s2), 0);
	assert_int_equal(store_stage_write(s2, "y", 1, 0), 1);
	assert_staged(c, t, 6, 6);
	store_stage_close(s2);
	assert_staged(c, t, 0, 0);
	/* A replacement counts without what it replaces: 12 over d's 8
	 * fits beside the 14 published; no other stage fits beside it. */
	assert_int_equal(store_stage_open(c->s, d, STORE_STAGE_REPLACE, &s2), 0);
	assert_int_equal(store_stage_write(s2, big, 12, 0), 12);
	assert_staged(c, u, 12, 12);
	assert_int_equal(store_stage_open(c->s, e, STORE_STAGE_REPLACE, &s4), 0);
	assert_int_equal(store_stage_write(s4, big, 3, 0), -ENOSPC);
	store_stage_close(s4);
	/* A truncation of the stage stages its size, or is refused... */
	assert_int_equal(store_stage_truncate(s2, 15), -ENOSPC);
	assert_int_equal(store_stage_truncate_reserve(s2, 15), -ENOSPC);
	assert_staged(c, u, 12, 12);
	assert_int_equal(store_stage_truncate(s2, 1), 0);
	assert_staged(c, u, 1, 1);
	assert_int_equal(store_stage_truncate_reserve(s2, 4), 0);
	assert_staged(c, u, 4, 4);
	assert_int_equal(store_stage_truncate(s2, 3), 0);
	assert_staged(c, u, 3, 3);
	/* ...and a lost compare-and-swap, or the end of the state, gives
	 * them back as well. */
	assert_int_equal(store_stage_open(c->s, e, STORE_STAGE_CAS, &s4), 0);
	assert_int_equal(store_stage_write(s4, "z", 1, 0), 1);
	assert_staged(c, u, 4, 4);
	publish(c, e, STORE_STAGE_REPLACE, "w");
	assert_int_equal(store_stage_publish(s4), -EAGAIN);
	store_stage_close(s4);
	assert_staged(c, u, 3, 3);
	assert_int_equal(store_unlink(c->s, q, "d"), 0);
	assert_staged(c, u, 3, 3);
	assert_int_equal(store_stage_write(s2, "z", 1, 0), -ESTALE);
	assert_staged(c, u, 0, 0);
	store_stage_close(s2);
	assert_int_equal(store_stage_open(c->s, e, STORE_STAGE_APPEND, &s4), 0);
	assert_int_equal(store_stage_write(s4, "zz", 2, 0), 2);
	assert_staged(c, u, 2, 2);
	assert_int_equal(store_unlink(c->s, q, "e"), 0);
	store_stage_close(s4);
	assert_staged(c, u, 0, 0);
	/* A tenant that went, its stage still open, counts until then. */
	assert_int_equal(store_stage_open(c->s, b, STORE_STAGE_REPLACE, &s4), 0);
	assert_int_equal(store_stage_write(s4, "zz", 2, 0), 2);
	assert_int_equal(store_rmdir(c->s, root(c), "t", NULL), 0);
	assert_int_equal(stats(c, NULL).staged_bytes, 2);
	store_stage_close(s4);
	assert_int_equal(stats(c, NULL).staged_bytes, 0);
	check_ok(c);
}

/*
 * No failed operation changes anything: `echo too-long > f` (O_TRUNC,
 * whose write is refused, and whose close error bash ignores) leaves f
 * as it was, instead of publishing the empty image an O_TRUNC stage
 * starts with.  The refused stage is abandoned: later writes, flush and
 * release publish nothing, and every flush (close) and publication
 * (fsync) reports the refusal, so no close says success for it.
 */
static void test_stage_refused_write_changes_nothing(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t, *p, *a;
	struct store_stage *st = NULL;
	struct store_stats s0, s1;
	char big[32];
	uint64_t v;
	int rc;

	store_limits_default(&l);
	l.max_payload = 16;
	reopen(c, &l);
	memset(big, 'x', sizeof big);

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "keep");
	v = version(c, a);

	for (int mode = STORE_STAGE_REPLACE; mode <= STORE_STAGE_CAS; mode++) {
		s0 = stats(c, NULL);
		assert_int_equal(store_stage_open(c->s, a, mode, &st), 0);
		assert_int_equal(store_stage_write(st, big, 17, 0), -EFBIG);
		/* A later write that would fit does not revive the stage. */
		rc = store_stage_write(st, "ok", 2, 0);
		assert_true(rc == -EFBIG);
		assert_int_equal(store_stage_flush(st), -EFBIG);
		assert_int_equal(version(c, a), v);
		rc = store_stage_publish(st);
		assert_int_equal(rc, -EFBIG);
		/* A second close (a dup) says the same. */
		assert_int_equal(store_stage_flush(st), -EFBIG);
		store_stage_close(st);
		assert_int_equal(version(c, a), v);
		assert_content(c, a, "keep");
		s1 = stats(c, NULL);
		assert_gauges_eq(&s0, &s1);
		/* Counted once, at the write that was refused. */
		assert_int_equal(s1.refused[STORE_REFUSED_PAYLOAD],
				 s0.refused[STORE_REFUSED_PAYLOAD] + 1);
	}
	check_ok(c);
}

static void test_stage_on_removed_child_stale(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a, *a2;
	struct store_stage *st = NULL, *st2 = NULL, *rd = NULL;
	char buf[16];
	uint64_t v;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "orig");

	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_APPEND, &st2), 0);
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_READ, &rd), 0);
	assert_int_equal(store_stage_write(st2, "zz", 2, 0), 2);
	assert_int_equal(store_unlink(c->s, p, "a"), 0);
	a2 = cr(c, p, "a");
	v = version(c, a2);

	assert_int_equal(store_stage_write(st, "late", 4, 0), -ESTALE);
	assert_int_equal(store_stage_publish(st), -ESTALE);
	assert_int_equal(store_stage_publish(st2), -ESTALE);
	assert_int_equal(store_stage_read(rd, buf, sizeof buf, 0), -ESTALE);
	store_stage_close(rd);
	store_stage_close(st2);
	store_stage_close(st);
	/* The new incarnation is untouched. */
	assert_int_equal(version(c, a2), v);
	assert_content(c, a2, "");
	assert_gauges(c, t, 1, 1, 1, 1, 0, 0);

	/* The same through a leave of the parent. */
	assert_int_equal(store_stage_open(c->s, a2, STORE_STAGE_REPLACE, &st),
			 0);
	assert_int_equal(store_stage_write(st, "x", 1, 0), 1);
	assert_int_equal(store_rmdir(c->s, t, "p", NULL), 0);
	assert_int_equal(store_stage_write(st, "y", 1, 1), -ESTALE);
	assert_int_equal(store_stage_publish(st), -ESTALE);
	store_stage_close(st);
	assert_gauges(c, t, 1, 0, 0, 0, 1, 0);
	check_ok(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_stage_payload_limit),
		TEST(test_stage_bytes_ceiling),
		TEST(test_stage_staged_bytes_count),
		TEST(test_stage_refused_write_changes_nothing),
		TEST(test_stage_on_removed_child_stale),
	};

	return run_store_tests("content_limits", tests);
}
