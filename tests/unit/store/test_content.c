/*
 * test_content.c - unit tests of staged writes and their publication
 * (store/content.c).  What stages may hold, and what a refused write
 * leaves, is tested in test_content_limits.c.
 *
 * A stage publishes whole (store_stage_publish, or a flush after a
 * write): replace, append and compare-and-swap (based on the version it
 * opened on); readers keep the content they opened on or read on;
 * truncation and a setattr of the size are publications.
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

static void test_stage_replace_publishes(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_stage *st = NULL, *rd = NULL;
	char buf[64];
	uint64_t v0;
	struct store_attr at;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "old");
	v0 = version(c, a);

	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_write(st, "new!", 4, 0), 4);
	/* The stage reads its own staged bytes... */
	assert_int_equal(stage_slurp(st, buf, sizeof buf), 4);
	assert_string_equal(buf, "new!");
	/* ...while everyone else still sees the old state. */
	assert_content(c, a, "old");
	assert_int_equal(version(c, a), v0);
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_READ, &rd), 0);

	assert_int_equal(store_stage_publish(st), 0);
	assert_int_equal(version(c, a), v0 + 1);
	assert_content(c, a, "new!");
	assert_int_equal(store_getattr(c->s, a, &at), 0);
	assert_int_equal(at.size, 4);
	assert_gauges(c, t, 1, 1, 1, 1, 0, 4);
	/* A clean stage publishes nothing. */
	assert_int_equal(store_stage_publish(st), 0);
	assert_int_equal(version(c, a), v0 + 1);
	store_stage_close(st);

	/* A read stage never publishes and refuses writes. */
	assert_int_equal(store_stage_write(rd, "x", 1, 0), -EBADF);
	assert_int_equal(store_stage_publish(rd), 0);
	assert_int_equal(version(c, a), v0 + 1);
	store_stage_close(rd);

	/* A stage closed without publishing changes nothing. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_write(st, "zzz", 3, 0), 3);
	store_stage_close(st);
	assert_content(c, a, "new!");
	assert_int_equal(version(c, a), v0 + 1);
	check_ok(c);
}

static void test_stage_replace_dirty_at_open(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_stage *st = NULL;
	struct store_attr at;
	uint64_t v0;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "abc");
	v0 = version(c, a);

	/* echo -n > f: O_TRUNC with no write still publishes (empty). */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_publish(st), 0);
	store_stage_close(st);
	assert_int_equal(version(c, a), v0 + 1);
	assert_content(c, a, "");
	assert_int_equal(store_getattr(c->s, a, &at), 0);
	assert_int_equal(at.size, 0);
	assert_gauges(c, t, 1, 1, 1, 1, 0, 0);
	check_ok(c);
}

static void test_stage_flush(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_stage *st = NULL;
	uint64_t v0;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "abc");
	v0 = version(c, a);

	/* A flush before any write of an O_TRUNC stage publishes nothing... */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_flush(st), 0);
	assert_int_equal(version(c, a), v0);
	assert_content(c, a, "abc");
	/* ...after a write it publishes... */
	assert_int_equal(store_stage_write(st, "xy", 2, 0), 2);
	assert_int_equal(store_stage_flush(st), 0);
	assert_int_equal(version(c, a), v0 + 1);
	assert_content(c, a, "xy");
	/* ...and the release has nothing left to publish. */
	assert_int_equal(store_stage_publish(st), 0);
	assert_int_equal(version(c, a), v0 + 1);
	store_stage_close(st);

	/* An O_TRUNC stage never written still publishes (empty) at release. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_flush(st), 0);
	assert_int_equal(store_stage_publish(st), 0);
	store_stage_close(st);
	assert_int_equal(version(c, a), v0 + 2);
	assert_content(c, a, "");

	/* A truncation counts as a write for flush. */
	publish(c, a, STORE_STAGE_REPLACE, "hello");
	v0 = version(c, a);
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_CAS, &st), 0);
	assert_int_equal(store_stage_truncate(st, 2), 0);
	assert_int_equal(store_stage_flush(st), 0);
	assert_int_equal(version(c, a), v0 + 1);
	assert_content(c, a, "he");
	store_stage_close(st);
	check_ok(c);
}

static void test_stage_append(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_stage *ap = NULL, *ap2 = NULL;
	uint64_t v0;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "a");

	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_APPEND, &ap), 0);
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_APPEND, &ap2), 0);
	/* Another publication happens after the append stage opened. */
	publish(c, a, STORE_STAGE_REPLACE, "XY");
	v0 = version(c, a);
	assert_int_equal(store_stage_write(ap, "b", 1, 0), 1);
	assert_int_equal(store_stage_write(ap, "c", 1, 12345), 1);
	assert_int_equal(store_stage_write(ap2, "d", 1, 0), 1);
	assert_content(c, a, "XY");
	assert_int_equal(store_stage_publish(ap), 0);
	assert_int_equal(version(c, a), v0 + 1);
	assert_content(c, a, "XYbc");
	assert_int_equal(store_stage_publish(ap2), 0);
	assert_int_equal(version(c, a), v0 + 2);
	assert_content(c, a, "XYbcd");
	store_stage_close(ap2);
	store_stage_close(ap);
	assert_gauges(c, t, 1, 1, 1, 1, 0, 5);

	/* An append stage with nothing written does not publish. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_APPEND, &ap), 0);
	assert_int_equal(store_stage_publish(ap), 0);
	store_stage_close(ap);
	assert_int_equal(version(c, a), v0 + 2);
	check_ok(c);
}

static void test_stage_cas(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_stage *cas = NULL;
	struct store_stats s0, s1;
	uint64_t v0;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "hello");
	v0 = version(c, a);

	/* An in-place edit: the untouched bytes stay. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_CAS, &cas), 0);
	assert_int_equal(store_stage_write(cas, "J", 1, 0), 1);
	assert_int_equal(store_stage_publish(cas), 0);
	store_stage_close(cas);
	assert_int_equal(version(c, a), v0 + 1);
	assert_content(c, a, "Jello");

	/* An open/close with no write does not publish. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_CAS, &cas), 0);
	assert_int_equal(store_stage_publish(cas), 0);
	store_stage_close(cas);
	assert_int_equal(version(c, a), v0 + 1);

	/* The CAS loses against a publication since its open. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_CAS, &cas), 0);
	publish(c, a, STORE_STAGE_REPLACE, "other");
	v0 = version(c, a);
	assert_int_equal(store_stage_write(cas, "ZZ", 2, 0), 2);
	s0 = stats(c, NULL);
	assert_int_equal(store_stage_publish(cas), -EAGAIN);
	s1 = stats(c, NULL);
	/* The stage held "ZZher"; the refusal gives it back. */
	assert_int_equal(s0.staged_bytes, 5);
	assert_int_equal(s1.staged_bytes, 0);
	s0.staged_bytes = 0;
	assert_gauges_eq(&s0, &s1);
	assert_int_equal(s1.refused[STORE_REFUSED_CONFLICT],
			 s0.refused[STORE_REFUSED_CONFLICT] + 1);
	assert_int_equal(version(c, a), v0);
	assert_content(c, a, "other");
	/* The failed stage is clean: nothing is retried on release. */
	assert_int_equal(store_stage_publish(cas), 0);
	store_stage_close(cas);
	assert_int_equal(version(c, a), v0);
	assert_content(c, a, "other");
	check_ok(c);
}

/*
 * CAS compares against the version current at open (CONTRACT.md s.3,
 * store.h: "in-place edit against the open version"), even when the
 * stage read the newer state before writing: a read pass re-pins what
 * the stage reads, not what its publication is conditional on.
 */
static void test_stage_cas_base_is_open_version(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_stage *cas = NULL;
	char buf[16];
	uint64_t v;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "one");

	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_CAS, &cas), 0);
	publish(c, a, STORE_STAGE_REPLACE, "two");
	v = version(c, a);
	/* Whether this read shows the open state or the newer one, the
	 * publication stays conditional on the version at open. */
	assert_int_equal(store_stage_read(cas, buf, sizeof buf, 0), 3);
	assert_true(memcmp(buf, "one", 3) == 0 || memcmp(buf, "two", 3) == 0);
	assert_int_equal(store_stage_write(cas, "T", 1, 0), 1);
	assert_int_equal(store_stage_publish(cas), -EAGAIN);
	store_stage_close(cas);
	assert_int_equal(version(c, a), v);
	assert_content(c, a, "two");
	check_ok(c);
}

static void test_stage_reader_pinned(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_stage *rd = NULL, *rd2 = NULL;
	char buf[64];

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "v1");

	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_READ, &rd), 0);
	assert_int_equal(store_stage_read(rd, buf, 2, 0), 2);
	assert_memory_equal(buf, "v1", 2);
	publish(c, a, STORE_STAGE_REPLACE, "second");
	/* Still the old state past offset 0: never a mix. */
	assert_int_equal(store_stage_read(rd, buf, sizeof buf, 1), 1);
	assert_memory_equal(buf, "1", 1);
	assert_int_equal(store_stage_read(rd, buf, sizeof buf, 2), 0);
	/* A new pass from offset 0 sees the newest publication. */
	assert_int_equal(store_stage_read(rd, buf, sizeof buf, 0), 6);
	assert_memory_equal(buf, "second", 6);

	/* Pinned at open, before any read. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_READ, &rd2), 0);
	publish(c, a, STORE_STAGE_REPLACE, "third!!!");
	assert_int_equal(store_stage_read(rd2, buf, sizeof buf, 3), 3);
	assert_memory_equal(buf, "ond", 3);
	assert_int_equal(store_stage_read(rd, buf, sizeof buf, 3), 3);
	assert_memory_equal(buf, "ond", 3);
	assert_int_equal(store_stage_read(rd2, buf, sizeof buf, 0), 8);
	assert_memory_equal(buf, "third!!!", 8);
	store_stage_close(rd2);
	store_stage_close(rd);
	check_ok(c);
}

static void test_stage_reader_reads_on(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_stage *rd = NULL, *empty = NULL;
	char buf[64];

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_READ, &empty), 0);
	publish(c, a, STORE_STAGE_REPLACE, "one\n");

	/* tail -f: everything read, then an append: the read at the end
	 * goes on with the appended bytes. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_READ, &rd), 0);
	assert_int_equal(store_stage_read(rd, buf, sizeof buf, 0), 4);
	assert_int_equal(store_stage_read(rd, buf, sizeof buf, 4), 0);
	publish(c, a, STORE_STAGE_APPEND, "two\n");
	assert_int_equal(store_stage_read(rd, buf, sizeof buf, 4), 4);
	assert_memory_equal(buf, "two\n", 4);
	publish(c, a, STORE_STAGE_APPEND, "three\n");
	publish(c, a, STORE_STAGE_APPEND, "four\n");
	assert_int_equal(store_stage_read(rd, buf, sizeof buf, 8), 11);
	assert_memory_equal(buf, "three\nfour\n", 11);
	/* A reader that opened on the empty state has seen a prefix of
	 * every state. */
	assert_int_equal(store_stage_read(empty, buf, sizeof buf, 4), 15);
	assert_memory_equal(buf, "two\nthree\nfour\n", 15);

	/* A replacement is no continuation of what was read: the reader
	 * stays at its end, never a mix, until it starts a new pass. */
	publish(c, a, STORE_STAGE_REPLACE, "something else entirely\n");
	assert_int_equal(store_stage_read(rd, buf, sizeof buf, 19), 0);
	assert_int_equal(store_stage_read(rd, buf, sizeof buf, 0), 24);
	assert_memory_equal(buf, "something else entirely\n", 24);
	/* A reader in the middle keeps its state: no jump into a newer one. */
	assert_int_equal(store_stage_read(rd, buf, 4, 0), 4);
	publish(c, a, STORE_STAGE_APPEND, "more\n");
	assert_int_equal(store_stage_read(rd, buf, sizeof buf, 20), 4);
	assert_memory_equal(buf, "ely\n", 4);
	assert_int_equal(store_stage_read(rd, buf, sizeof buf, 24), 5);
	assert_memory_equal(buf, "more\n", 5);
	store_stage_close(empty);
	store_stage_close(rd);
	check_ok(c);
}

/* Set @child's mtime to @sec seconds since the epoch (utimensat). */
static void set_mtime(struct ctx *c, struct store_node *child, time_t sec)
{
	struct store_attr in = { .mtime = { .tv_sec = sec } };

	assert_int_equal(store_setattr(c->s, child, STORE_SET_MTIME, &in, NULL),
			 0);
}

static time_t mtime_of(struct ctx *c, struct store_node *n)
{
	struct store_attr a;

	assert_int_equal(store_getattr(c->s, n, &a), 0);
	return a.mtime.tv_sec;
}

static void test_stage_keeps_mtime_set_before_close(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_stage *st = NULL;
	const time_t then = 981173106; /* 2001-02-03 */

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");

	/* cp -p: write, set the source's mtime on the open file, close. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_CAS, &st), 0);
	assert_int_equal(store_stage_write(st, "abc", 3, 0), 3);
	set_mtime(c, a, then);
	assert_int_equal(store_stage_publish(st), 0);
	assert_int_equal(mtime_of(c, a), then);
	assert_int_equal(version(c, a), 1);
	store_stage_close(st);

	/* O_TRUNC with no write, then the time: kept as well. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &st), 0);
	set_mtime(c, a, then + 1);
	assert_int_equal(store_stage_publish(st), 0);
	assert_int_equal(mtime_of(c, a), then + 1);
	store_stage_close(st);

	/* A write after the time stamps the content anew. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_APPEND, &st), 0);
	set_mtime(c, a, then);
	assert_int_equal(store_stage_write(st, "d", 1, 0), 1);
	assert_int_equal(store_stage_publish(st), 0);
	assert_true(mtime_of(c, a) > then + 1);
	store_stage_close(st);

	/* So does an ftruncate after it. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_CAS, &st), 0);
	set_mtime(c, a, then);
	assert_int_equal(store_stage_truncate(st, 1), 0);
	assert_int_equal(store_stage_publish(st), 0);
	assert_true(mtime_of(c, a) > then + 1);
	store_stage_close(st);

	/* Another publication after this stage's last write: the time set
	 * since belonged to that state, not to this one. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_APPEND, &st), 0);
	assert_int_equal(store_stage_write(st, "e", 1, 0), 1);
	publish(c, a, STORE_STAGE_APPEND, "f");
	set_mtime(c, a, then);
	assert_int_equal(store_stage_publish(st), 0);
	assert_true(mtime_of(c, a) > then + 1);
	assert_content(c, a, "dfe");
	store_stage_close(st);
	check_ok(c);
}

static void test_setattr_size_is_publication(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_attr in, out;
	uint64_t v0;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "hello");
	v0 = version(c, a);

	memset(&in, 0, sizeof in);
	in.size = 2;
	assert_int_equal(store_setattr(c->s, a, STORE_SET_SIZE, &in, &out), 0);
	assert_int_equal(out.size, 2);
	assert_int_equal(version(c, a), v0 + 1);
	assert_content(c, a, "he");
	assert_gauges(c, t, 1, 1, 1, 1, 0, 2);

	in.size = 4;
	assert_int_equal(store_setattr(c->s, a, STORE_SET_SIZE, &in, &out), 0);
	assert_int_equal(out.size, 4);
	assert_int_equal(version(c, a), v0 + 2);
	{
		char buf[16];

		assert_int_equal(content(c, a, buf, sizeof buf), 4);
		assert_memory_equal(buf, "he\0\0", 4);
	}
	assert_gauges(c, t, 1, 1, 1, 1, 0, 4);

	/* chmod/chown work. */
	in.mode = 0600;
	in.uid = 42;
	assert_int_equal(store_setattr(c->s, a, STORE_SET_MODE | STORE_SET_UID,
				       &in, &out), 0);
	assert_int_equal(out.mode & 07777, 0600);
	assert_true(S_ISREG(out.mode));
	assert_int_equal(out.uid, 42);
	assert_int_equal(store_getattr(c->s, a, &out), 0);
	assert_int_equal(out.mode & 07777, 0600);
	assert_int_equal(out.uid, 42);
	assert_int_equal(out.size, 4);

	/* The KILL bits clear their privilege bit and nothing else. */
	in.mode = 06751;
	assert_int_equal(store_setattr(c->s, a, STORE_SET_MODE, &in, &out), 0);
	assert_int_equal(store_setattr(c->s, a, STORE_SET_KILL_SUID, &in, &out),
			 0);
	assert_int_equal(out.mode & 07777, 02751);
	assert_int_equal(store_setattr(c->s, a, STORE_SET_KILL_SUID |
				       STORE_SET_KILL_SGID, &in, &out), 0);
	assert_int_equal(out.mode & 07777, 0751);
	assert_int_equal(out.uid, 42);
	assert_int_equal(version(c, a), v0 + 2);

	/* A directory has no size to set. */
	in.size = 0;
	assert_int_equal(store_setattr(c->s, p, STORE_SET_SIZE, &in, &out),
			 -EISDIR);
	in.mode = 0700;
	assert_int_equal(store_setattr(c->s, p, STORE_SET_MODE, &in, &out), 0);
	assert_int_equal(out.mode & 07777, 0700);
	assert_true(S_ISDIR(out.mode));
	check_ok(c);
}

/* ftruncate on an O_APPEND file cuts the content, as on any file. */
static void test_stage_truncate_append(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_stage *st;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "hello");
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_APPEND, &st), 0);
	assert_int_equal(store_stage_truncate(st, 2), 0);
	assert_int_equal(store_stage_publish(st), 0);
	store_stage_close(st);
	assert_content(c, a, "he");
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_APPEND, &st), 0);
	assert_int_equal(store_stage_write(st, "llo", 3, 0), 3);
	assert_int_equal(store_stage_truncate(st, 4), 0);
	assert_int_equal(store_stage_publish(st), 0);
	store_stage_close(st);
	assert_content(c, a, "hell");
	check_ok(c);
}

/* The same on an empty child, before anything is staged: the stage
 * starts from nothing and is cut or zero-extended from there. */
static void test_stage_truncate_append_empty(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_stage *st;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_APPEND, &st), 0);
	assert_int_equal(store_stage_truncate(st, 0), 0);
	assert_int_equal(store_stage_publish(st), 0);
	store_stage_close(st);
	assert_content(c, a, "");
	assert_int_equal(version(c, a), 1);
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_APPEND, &st), 0);
	assert_int_equal(store_stage_truncate(st, 2), 0);
	assert_int_equal(store_stage_write(st, "x", 1, 0), 1);
	assert_int_equal(store_stage_publish(st), 0);
	store_stage_close(st);
	{
		char buf[8];
		struct store_stage *rd;
		ssize_t n;

		assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_READ, &rd),
				 0);
		n = store_stage_read(rd, buf, sizeof buf, 0);
		store_stage_close(rd);
		assert_int_equal(n, 2);
		assert_memory_equal(buf, "x\0", 2);
	}
	check_ok(c);
}

/* A write of no bytes stages nothing new: on a fresh replace stage (no
 * buffer yet) it returns 0 and the publication is the empty state; on
 * an append stage the publication appends nothing. */
static void test_stage_write_nothing(void **state)
{
	struct ctx *c = *state;
	struct store_node *t, *p, *a;
	struct store_stage *st = NULL;

	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "abc");
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_REPLACE, &st), 0);
	assert_int_equal(store_stage_write(st, "", 0, 0), 0);
	assert_int_equal(store_stage_publish(st), 0);
	store_stage_close(st);
	assert_content(c, a, "");
	/* and on an append stage, appends nothing to what is there */
	publish(c, a, STORE_STAGE_REPLACE, "abc");
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_APPEND, &st), 0);
	assert_int_equal(store_stage_write(st, "", 0, 0), 0);
	assert_int_equal(store_stage_publish(st), 0);
	store_stage_close(st);
	assert_content(c, a, "abc");
	check_ok(c);
}

/* fallocate mode 0: zeros past the end the stage sees, a write's limits,
 * nothing to publish when the content is long enough already. */
static void test_stage_allocate(void **state)
{
	struct ctx *c = *state;
	struct store_limits l;
	struct store_node *t, *p, *a;
	struct store_stage *st = NULL;
	uint64_t v0;
	char buf[32];

	store_limits_default(&l);
	l.max_payload = 16;
	reopen(c, &l);
	t = mk(c, root(c), "t");
	p = mk(c, t, "p");
	a = cr(c, p, "a");
	publish(c, a, STORE_STAGE_REPLACE, "abc");
	v0 = version(c, a);

	/* Inside the content: nothing staged, nothing published. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_CAS, &st), 0);
	assert_int_equal(store_stage_allocate(st, 1, 2), 0);
	assert_int_equal(store_stage_flush(st), 0);
	store_stage_close(st);
	assert_int_equal(version(c, a), v0);

	/* Past it: zeros, read back, published at close. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_CAS, &st), 0);
	assert_int_equal(store_stage_allocate(st, 2, 4), 0);
	assert_int_equal(store_stage_read(st, buf, sizeof(buf), 0), 6);
	assert_memory_equal(buf, "abc\0\0\0", 6);
	assert_int_equal(store_stage_flush(st), 0);
	store_stage_close(st);
	assert_int_equal(version(c, a), v0 + 1);
	assert_gauges(c, t, 1, 1, 1, 1, 0, 6);

	/* An append stage extends what it sees, its base and its tail. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_APPEND, &st), 0);
	assert_int_equal(store_stage_write(st, "d", 1, 0), 1);
	assert_int_equal(store_stage_allocate(st, 0, 9), 0);
	assert_int_equal(store_stage_read(st, buf, sizeof(buf), 0), 9);
	assert_memory_equal(buf, "abc\0\0\0d\0\0", 9);
	assert_int_equal(store_stage_publish(st), 0);
	store_stage_close(st);
	assert_gauges(c, t, 1, 1, 1, 1, 0, 9);

	/* Over max_payload, even by a length that overflows: EFBIG, and
	 * the stage is abandoned as after a refused write. */
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_CAS, &st), 0);
	assert_int_equal(store_stage_allocate(st, 0, 17), -EFBIG);
	assert_int_equal(store_stage_flush(st), -EFBIG);
	store_stage_close(st);
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_CAS, &st), 0);
	assert_int_equal(store_stage_allocate(st, UINT64_MAX - 1, 4), -EFBIG);
	store_stage_close(st);
	assert_int_equal(store_stage_open(c->s, a, STORE_STAGE_READ, &st), 0);
	assert_int_equal(store_stage_allocate(st, 0, 1), -EBADF);
	store_stage_close(st);
	assert_gauges(c, t, 1, 1, 1, 1, 0, 9);
	check_ok(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_stage_replace_publishes),
		TEST(test_stage_replace_dirty_at_open),
		TEST(test_stage_flush),
		TEST(test_stage_append),
		TEST(test_stage_cas),
		TEST(test_stage_cas_base_is_open_version),
		TEST(test_stage_reader_pinned),
		TEST(test_stage_reader_reads_on),
		TEST(test_stage_keeps_mtime_set_before_close),
		TEST(test_setattr_size_is_publication),
		TEST(test_stage_truncate_append),
		TEST(test_stage_truncate_append_empty),
		TEST(test_stage_write_nothing),
		TEST(test_stage_allocate),
	};

	return run_store_tests("content", tests);
}
