/*
 * test_evlog.c - unit tests of the event log itself (store/evlog.c): how
 * a reader whose end is r->until falls behind.  The daemon's .events
 * readers read only what its inval thread has passed (fs/events.c gates
 * them at the inval thread's progress), so the log may run far ahead of
 * what such a reader may read.  Only what it could have read and lost
 * makes it fall behind: entries overwritten before it got to them, or
 * more than its window of entries before its end.  And where a reader
 * started at a number begins (evlog_start).
 */
#include "tests/unit/unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/evlog.h"

/* Append @n create lines for children c<first>.. of tenant t, parent p. */
static void append_n(struct evlog *l, int first, int n)
{
	for (int i = first; i < first + n; i++) {
		char name[16];
		struct evlog_entry e = {
			.op = STORE_OP_CREATE, .kind = STORE_CHILD,
			.ino = 100 + (uint64_t)i, .tenant_ino = 2,
			.tenant = "t", .parent = "p", .child = name,
			.generation = 1, .version = 0,
		};

		snprintf(name, sizeof(name), "c%d", i);
		assert_int_not_equal(evlog_append(l, &e), 0);
	}
}

/* What @r reads now: the lines in one string (caller frees). */
static char *take(struct evlog *l, struct store_event_reader *r)
{
	size_t cap = 1 << 16;
	char *buf = malloc(cap + 1);
	size_t n;

	assert_non_null(buf);
	n = evlog_read(l, r, buf, cap);
	buf[n] = '\0';
	return buf;
}

static int count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/*
 * Check that @got holds exactly the lines with sequence numbers
 * [@from, @to), in order, and no overflow line.
 */
static void assert_seqs(const char *got, uint64_t from, uint64_t to)
{
	const char *s = got;

	for (uint64_t seq = from; seq < to; seq++) {
		char want[32];
		int n = snprintf(want, sizeof(want), "%llu\tcreate\t",
				 (unsigned long long)seq);

		if (strncmp(s, want, (size_t)n) != 0)
			fail_msg("expected line %llu, got: %.40s",
				 (unsigned long long)seq, s);
		s = strchr(s, '\n');
		assert_non_null(s);
		s++;
	}
	if (*s)
		fail_msg("unexpected lines after %llu: %.40s",
			 (unsigned long long)to - 1, s);
}

static struct store_event_reader reader_at(uint64_t next, uint64_t window)
{
	struct store_event_reader r = { 0 };

	r.next = next;
	r.window = window;
	return r;
}

/*
 * A reader that has read everything up to its end is never behind, however
 * far the log runs ahead of that end (here 40 entries with a window of
 * 8): it gets no overflow line, and then every line once, in order, as
 * its end moves on in steps within its window.
 */
static void test_until_lag_is_not_overflow(void **state)
{
	struct evlog *l = evlog_new(64);
	struct store_event_reader r = reader_at(1, 8);
	uint64_t end;
	char *got;

	(void)state;
	assert_non_null(l);
	append_n(l, 1, 5);
	r.until = 6;
	got = take(l, &r);
	assert_seqs(got, 1, 6);
	free(got);

	/* The log moves 40 entries past the reader's end, which stays. */
	append_n(l, 6, 40);
	assert_int_equal(evlog_next_seq(l), 46);
	assert_false(evlog_pending(l, &r));
	got = take(l, &r);
	assert_string_equal(got, "");
	free(got);

	/* Its end catches up four entries at a time. */
	for (end = 10; end <= 46; end += 4) {
		r.until = end;
		assert_true(evlog_pending(l, &r));
		got = take(l, &r);
		assert_seqs(got, end - 4, end);
		free(got);
	}
	assert_false(evlog_pending(l, &r));
	evlog_free(l);
}

/*
 * A reader more than its window behind its end did fall behind: one
 * overflow line, then the last window of entries before its end, never
 * past it.
 */
static void test_behind_its_end_is_overflow(void **state)
{
	struct evlog *l = evlog_new(64);
	struct store_event_reader r = reader_at(1, 8);
	char *got;

	(void)state;
	assert_non_null(l);
	append_n(l, 1, 45);
	r.until = 31;
	assert_true(evlog_pending(l, &r));
	got = take(l, &r);
	assert_true(strncmp(got, "overflow\n", 9) == 0);
	assert_seqs(got + 9, 23, 31);
	free(got);
	assert_int_equal(r.next, 31);
	assert_false(evlog_pending(l, &r));

	/* Its end moves on within its window: it continues where it
	 * stood. */
	r.until = 39;
	got = take(l, &r);
	assert_seqs(got, 31, 39);
	free(got);
	evlog_free(l);
}

/*
 * Entries a reader had not got to and that left the ring are lost to it,
 * also when they were past its end: one overflow line, and it goes on
 * from the oldest entry the ring still holds once its end gets there.
 */
static void test_overwritten_is_overflow(void **state)
{
	struct evlog *l = evlog_new(16);
	struct store_event_reader r = reader_at(1, 16);
	char *got;

	(void)state;
	assert_non_null(l);
	append_n(l, 1, 5);
	r.until = 6;
	got = take(l, &r);
	assert_seqs(got, 1, 6);
	free(got);

	append_n(l, 6, 25); /* next 31: the ring holds 15..30 */
	assert_true(evlog_pending(l, &r));
	got = take(l, &r);
	assert_string_equal(got, "overflow\n");
	free(got);
	assert_int_equal(r.next, 15);
	r.until = 31;
	got = take(l, &r);
	assert_seqs(got, 15, 31);
	free(got);
	evlog_free(l);
}

/* The end of the store instance, as redis/follow.c appends it. */
static void append_end(struct evlog *l)
{
	struct evlog_entry e = {
		.op = STORE_OP_CLEANUP, .internal = true, .kind = STORE_TENANT,
		.generation = -1, .version = -1, .overflow = true, .end = true,
	};

	assert_int_not_equal(evlog_append(l, &e), 0);
}

/*
 * At the end of the store instance a tenant's reader gets the lines
 * before it, then nothing more (evlog_gone: its owner says ESTALE), also
 * when it fell behind and the end left the ring before it got there; the
 * root's reader gets "overflow" there and goes on; a tenant's reader
 * opened after the end is not gone.
 */
static void test_end_of_instance_ends_tenant_readers(void **state)
{
	struct evlog *l = evlog_new(16);
	struct store_event_reader t = { .tenant_ino = 2 };
	struct store_event_reader late = { .tenant_ino = 2 };
	struct store_event_reader root = { 0 };
	struct store_event_reader behind = { .tenant_ino = 2 };
	char *got;

	(void)state;
	assert_non_null(l);
	evlog_open(l, &t);
	evlog_open(l, &root);
	evlog_open(l, &behind);
	append_n(l, 1, 3);
	append_end(l);
	append_n(l, 5, 2);
	assert_false(evlog_gone(&t));
	got = take(l, &t);
	assert_seqs(got, 1, 4);
	free(got);
	assert_true(evlog_gone(&t));
	assert_true(evlog_pending(l, &t));
	got = take(l, &t);
	assert_string_equal(got, "");
	free(got);
	got = take(l, &root);
	assert_non_null(strstr(got, "\t0\noverflow\n5\tcreate\t"));
	assert_int_equal(count_lines(got), 6);
	free(got);
	assert_false(evlog_gone(&root));

	evlog_open(l, &late);
	append_n(l, 7, 30); /* the end (4) left the ring */
	got = take(l, &behind);
	assert_string_equal(got, "overflow\n");
	free(got);
	assert_true(evlog_gone(&behind));
	got = take(l, &behind);
	assert_string_equal(got, "");
	free(got);
	assert_false(evlog_gone(&late));
	assert_true(evlog_pending(l, &late));
	evlog_free(l);
}

/* Without an end of its own, a reader's window counts from the log's end,
 * as before. */
static void test_no_until_counts_from_the_log_end(void **state)
{
	struct evlog *l = evlog_new(64);
	struct store_event_reader r = reader_at(1, 8);
	char *got;

	(void)state;
	assert_non_null(l);
	append_n(l, 1, 20);
	got = take(l, &r);
	assert_true(strncmp(got, "overflow\n", 9) == 0);
	assert_seqs(got + 9, 13, 21);
	assert_int_equal(count_lines(got), 9);
	free(got);
	evlog_free(l);
}

/* Append one internal line: a .depart of parent @name. */
static void append_depart(struct evlog *l, const char *name)
{
	struct evlog_entry e = {
		.op = STORE_OP_DEPART, .internal = true, .kind = STORE_PARENT,
		.ino = 7, .tenant_ino = 2, .tenant = "t", .parent = name,
		.generation = 1, .version = -1,
	};

	assert_int_not_equal(evlog_append(l, &e), 0);
}

/* A reader of internal lines only, opened at the end of @l. */
static struct store_event_reader internal_reader(struct evlog *l)
{
	struct store_event_reader r = { 0 };

	evlog_open(l, &r);
	r.internal_only = true;
	r.window = STORE_EVENT_LOG;
	return r;
}

/* An internal_only reader gets the internal lines and skips the rest. */
static void test_internal_only_reads_internal_lines(void **state)
{
	struct evlog *l = evlog_new(16);
	struct store_event_reader r;
	struct store_event ev;

	(void)state;
	assert_non_null(l);
	append_n(l, 1, 2);
	r = internal_reader(l);
	append_n(l, 3, 3);
	append_depart(l, "q");
	append_n(l, 6, 2);
	assert_true(evlog_pending(l, &r));
	assert_int_equal(evlog_next(l, &r, &ev), 1);
	assert_int_equal(ev.seq, 6);
	assert_string_equal(ev.parent, "q");
	store_event_free(&ev);
	assert_false(evlog_pending(l, &r));
	assert_int_equal(evlog_next(l, &r, &ev), 0);
	assert_int_equal(r.next, 9);
	evlog_free(l);
}

/*
 * An internal_only reader asleep while the log wraps many times over
 * lines it would not see has lost nothing: the internal line that comes
 * next is read without an overflow.
 */
static void test_internal_only_is_not_behind_over_other_lines(void **state)
{
	struct evlog *l = evlog_new(16);
	struct store_event_reader r;
	struct store_event ev;

	(void)state;
	assert_non_null(l);
	append_depart(l, "old"); /* internal, before the reader */
	r = internal_reader(l);
	append_n(l, 2, 100);
	assert_false(evlog_pending(l, &r));
	assert_int_equal(r.next, 102);
	append_n(l, 102, 100);
	append_depart(l, "q"); /* seq 202 */
	assert_int_equal(evlog_next(l, &r, &ev), 1);
	assert_int_equal(ev.seq, 202);
	store_event_free(&ev);
	evlog_free(l);
}

/* An internal line overwritten before the reader got to it is lost: the
 * reader falls behind. */
static void test_internal_only_is_behind_when_one_went(void **state)
{
	struct evlog *l = evlog_new(16);
	struct store_event_reader r;
	struct store_event ev;

	(void)state;
	assert_non_null(l);
	r = internal_reader(l);
	append_n(l, 1, 3);
	append_depart(l, "q"); /* seq 4 */
	append_n(l, 5, 30);    /* next 35: the ring holds 19..34 */
	assert_true(evlog_pending(l, &r));
	assert_int_equal(evlog_next(l, &r, &ev), -EOVERFLOW);
	assert_int_equal(r.next, 19);
	assert_int_equal(evlog_next(l, &r, &ev), 0);
	evlog_free(l);
}

/*
 * The watch machinery gets a rename's, an exchange's and a link's other
 * name (a mount drops it from the kernel's caches when another mount
 * moved it); every other line has none.
 */
static void test_next_gives_the_other_name(void **state)
{
	struct evlog *l = evlog_new(16);
	struct store_event_reader r;
	struct store_event ev;
	struct evlog_entry e = {
		.op = STORE_OP_RENAME, .internal = true, .kind = STORE_CHILD,
		.ino = 7, .tenant_ino = 2, .tenant = "t", .parent = "b",
		.child = "new", .generation = 1, .version = 3,
		.from_parent = "a", .from_child = "old",
	};

	(void)state;
	assert_non_null(l);
	r = internal_reader(l);
	assert_int_not_equal(evlog_append(l, &e), 0);
	append_depart(l, "q");
	assert_int_equal(evlog_next(l, &r, &ev), 1);
	assert_int_equal(ev.op, STORE_OP_RENAME);
	assert_string_equal(ev.parent, "b");
	assert_string_equal(ev.child, "new");
	assert_string_equal(ev.from_parent, "a");
	assert_string_equal(ev.from_child, "old");
	store_event_free(&ev);
	assert_int_equal(evlog_next(l, &r, &ev), 1);
	assert_string_equal(ev.parent, "q");
	assert_string_equal(ev.from_parent, "");
	assert_string_equal(ev.from_child, "");
	store_event_free(&ev);
	evlog_free(l);
}

/*
 * A reader started at a place in the log (evlog_start): its first line is
 * that place's, then every later one once; a place not reached yet waits
 * for its line (the lines before it are not the reader's).
 */
static void test_start_at_a_place(void **state)
{
	struct evlog *l = evlog_new(64);
	struct store_event_reader r = { 0 };
	char *got;

	(void)state;
	assert_non_null(l);
	append_n(l, 1, 10);
	evlog_open(l, &r);
	evlog_start(l, &r, 4, false, 0);
	assert_true(evlog_pending(l, &r));
	got = take(l, &r);
	assert_seqs(got, 4, 11);
	free(got);
	append_n(l, 11, 2);
	got = take(l, &r);
	assert_seqs(got, 11, 13);
	free(got);

	/* In the future: nothing until its number comes, then from it. */
	evlog_open(l, &r);
	evlog_start(l, &r, 15, false, 0);
	append_n(l, 13, 2); /* 13 and 14 */
	assert_false(evlog_pending(l, &r));
	got = take(l, &r);
	assert_string_equal(got, "");
	free(got);
	append_n(l, 15, 2);
	got = take(l, &r);
	assert_seqs(got, 15, 17);
	free(got);

	/* Past the last line: exactly the next one. */
	evlog_open(l, &r);
	evlog_start(l, &r, evlog_next_seq(l), false, 0);
	append_n(l, 17, 1);
	got = take(l, &r);
	assert_seqs(got, 17, 18);
	free(got);
	evlog_free(l);
}

/*
 * A place the ring no longer holds: one overflow line, then the oldest
 * entry it has and every one after it (the whole ring: no window).
 */
static void test_start_before_the_oldest_is_overflow(void **state)
{
	struct evlog *l = evlog_new(16);
	struct store_event_reader r = { 0 };
	char *got;

	(void)state;
	assert_non_null(l);
	append_n(l, 1, 40); /* holds 25..40 */
	evlog_open(l, &r);
	r.window = 4; /* a started reader's window is the whole ring */
	evlog_start(l, &r, 3, false, 0);
	got = take(l, &r);
	assert_memory_equal(got, "overflow\n", 9);
	assert_seqs(got + 9, 25, 41);
	free(got);
	evlog_free(l);
}

/* Append @n lines of tenant @tino showing engine numbers @shown.., the
 * first after number @prev (the ones after it each after the one
 * before). */
static void append_shown(struct evlog *l, uint64_t tino, uint64_t shown, int n,
			 uint64_t prev)
{
	for (int i = 0; i < n; i++) {
		struct evlog_entry e = {
			.op = STORE_OP_CREATE, .kind = STORE_CHILD,
			.ino = 100, .tenant_ino = tino,
			.tenant = "t", .parent = "p", .child = "c",
			.generation = 1, .version = 0,
			.shown = shown + (uint64_t)i,
			.prev = i ? shown + (uint64_t)i - 1 : prev,
		};

		assert_int_not_equal(evlog_append(l, &e), 0);
	}
}

/*
 * By an engine's numbers (a mirror's, per tenant): the reader of one
 * tenant starts at the first of its lines numbered @seq or more; the
 * other tenant's lines, numbered apart, never count.  Whether the log
 * held the number is its first line's prev: numbers with no line in
 * between are no loss; a line after a number the log never had (before
 * its load, or overwritten) comes after one overflow line, and the
 * start says so (false: an engine may give them).  One to come waits,
 * unless the tenant was loaded past it.
 */
static void test_start_by_shown_numbers(void **state)
{
	struct evlog *l = evlog_new(64);
	struct store_event_reader r = { .tenant_ino = 2 };
	char *got;

	(void)state;
	assert_non_null(l);
	append_shown(l, 2, 50, 3, 49); /* t: 50 51 52, loaded at 49 */
	append_shown(l, 3, 1, 3, 0);   /* another tenant: 1 2 3 */
	append_shown(l, 2, 53, 2, 52); /* t: 53 54 */
	evlog_open(l, &r);
	assert_true(evlog_start(l, &r, 52, true, 54));
	got = take(l, &r);
	assert_non_null(strstr(got, "52\tcreate"));
	assert_null(strstr(got, "overflow"));
	assert_null(strstr(got, "51\t"));
	assert_int_equal(count_lines(got), 3);
	free(got);

	/* 40 is before the tenant was loaded (49). */
	evlog_open(l, &r);
	assert_false(evlog_start(l, &r, 40, true, 54));
	got = take(l, &r);
	assert_memory_equal(got, "overflow\n50\tcreate", 18);
	assert_int_equal(count_lines(got), 6);
	free(got);

	/* 55 and 56 have no line (an attribute's numbers): 57 follows 54,
	 * so a start at 55 lost nothing. */
	append_shown(l, 2, 57, 1, 54);
	evlog_open(l, &r);
	assert_true(evlog_start(l, &r, 55, true, 57));
	got = take(l, &r);
	assert_string_equal(got, "57\tcreate\tt\tp\tc\t1\t0\n");
	free(got);

	/* 60 is yet to come: 58 is not its own; 61 after 58 lost nothing. */
	evlog_open(l, &r);
	assert_true(evlog_start(l, &r, 60, true, 57));
	assert_false(evlog_pending(l, &r));
	append_shown(l, 2, 58, 1, 57);
	assert_false(evlog_pending(l, &r));
	append_shown(l, 2, 61, 1, 58);
	got = take(l, &r);
	assert_string_equal(got, "61\tcreate\tt\tp\tc\t1\t0\n");
	free(got);

	/* Loaded at 70 with no line since: 65 is not held. */
	evlog_open(l, &r);
	assert_false(evlog_start(l, &r, 65, true, 70));
	append_shown(l, 2, 71, 1, 70);
	got = take(l, &r);
	assert_string_equal(got, "overflow\n71\tcreate\tt\tp\tc\t1\t0\n");
	free(got);
	evlog_free(l);
}

/* Append a line of tenant @tino showing its tenant's number @shown and,
 * in the order of all tenants, @g after @gprev. */
static void append_g(struct evlog *l, uint64_t tino, uint64_t shown,
		     uint64_t g, uint64_t gprev)
{
	struct evlog_entry e = {
		.op = STORE_OP_CREATE, .kind = STORE_CHILD,
		.ino = 100, .tenant_ino = tino,
		.tenant = "t", .parent = "p", .child = "c",
		.generation = 1, .version = 0,
		.shown = shown, .prev = shown - 1,
		.gshown = g, .gprev = gprev,
	};

	assert_int_not_equal(evlog_append(l, &e), 0);
}

/*
 * A root reader by one order of all tenants (a mirror of one Redis)
 * reads every tenant's lines by that order's numbers and starts by
 * them: the first line numbered @seq or more of any tenant, whose gprev
 * says whether the log held the number.
 */
static void test_root_reader_by_the_order_of_all_tenants(void **state)
{
	struct evlog *l = evlog_new(64);
	struct store_event_reader r = { .tenant_ino = 0, .gorder = true };
	char *got;

	(void)state;
	assert_non_null(l);
	/* Loaded at 10; 14 has no line (an attribute's number). */
	append_g(l, 2, 5, 11, 10);
	append_g(l, 3, 2, 12, 11);
	append_g(l, 2, 6, 13, 12);
	append_g(l, 3, 3, 15, 13);
	evlog_open(l, &r);
	assert_true(evlog_start(l, &r, 12, true, 15));
	got = take(l, &r);
	assert_string_equal(got, "12\tcreate\tt\tp\tc\t1\t0\n"
				 "13\tcreate\tt\tp\tc\t1\t0\n"
				 "15\tcreate\tt\tp\tc\t1\t0\n");
	free(got);
	evlog_open(l, &r);
	assert_true(evlog_start(l, &r, 14, true, 15));
	got = take(l, &r);
	assert_string_equal(got, "15\tcreate\tt\tp\tc\t1\t0\n");
	free(got);
	/* 5 is before the load: not held. */
	evlog_open(l, &r);
	assert_false(evlog_start(l, &r, 5, true, 15));
	got = take(l, &r);
	assert_memory_equal(got, "overflow\n11\tcreate", 18);
	assert_int_equal(count_lines(got), 5);
	free(got);
	/* 16 is yet to come. */
	evlog_open(l, &r);
	assert_true(evlog_start(l, &r, 16, true, 15));
	assert_false(evlog_pending(l, &r));
	append_g(l, 2, 7, 16, 15);
	got = take(l, &r);
	assert_string_equal(got, "16\tcreate\tt\tp\tc\t1\t0\n");
	free(got);
	/* Read from the present, it shows the same numbers. */
	evlog_open(l, &r);
	r.from = 0;
	r.from_check = r.from_lost = false;
	append_g(l, 3, 4, 17, 16);
	got = take(l, &r);
	assert_string_equal(got, "17\tcreate\tt\tp\tc\t1\t0\n");
	free(got);
	evlog_free(l);
}

/*
 * Lines an engine gave (evlog_resume) are read first, whole lines as
 * the buffer takes them, then the log's from the number after them on.
 */
static void test_resume_reads_the_engine_lines_first(void **state)
{
	struct evlog *l = evlog_new(64);
	struct store_event_reader r = { .tenant_ino = 2 };
	const char lines[] = "8\tjoin\tt\tp\t-\t1\t-\n9\tjoin\tt\tq\t-\t1\t-\n";
	char buf[64];
	char *got;
	size_t n;

	(void)state;
	assert_non_null(l);
	append_shown(l, 2, 9, 3, 8); /* loaded at 8: 9 10 11 */
	evlog_open(l, &r);
	assert_false(evlog_start(l, &r, 8, true, 11));
	evlog_resume(l, &r, strdup(lines), strlen(lines), 9);
	assert_true(evlog_pending(l, &r));
	/* Room for one line only: the first, whole. */
	n = evlog_read(l, &r, buf, 20);
	assert_int_equal(n, 17);
	assert_memory_equal(buf, lines, 17);
	got = take(l, &r);
	assert_memory_equal(got, lines + 17, 17);
	assert_string_equal(got + 17, "10\tcreate\tt\tp\tc\t1\t0\n"
				      "11\tcreate\tt\tp\tc\t1\t0\n");
	free(got);
	free(r.hist);
	evlog_free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_until_lag_is_not_overflow),
		cmocka_unit_test(test_behind_its_end_is_overflow),
		cmocka_unit_test(test_overwritten_is_overflow),
		cmocka_unit_test(test_no_until_counts_from_the_log_end),
		cmocka_unit_test(test_internal_only_reads_internal_lines),
		cmocka_unit_test(test_internal_only_is_not_behind_over_other_lines),
		cmocka_unit_test(test_internal_only_is_behind_when_one_went),
		cmocka_unit_test(test_next_gives_the_other_name),
		cmocka_unit_test(test_end_of_instance_ends_tenant_readers),
		cmocka_unit_test(test_start_at_a_place),
		cmocka_unit_test(test_start_before_the_oldest_is_overflow),
		cmocka_unit_test(test_start_by_shown_numbers),
		cmocka_unit_test(test_root_reader_by_the_order_of_all_tenants),
		cmocka_unit_test(test_resume_reads_the_engine_lines_first),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
