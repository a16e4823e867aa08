/*
 * fixture.h - the store fixture the store unit tests share (one file per
 * mechanism of store/, test_<file>.c for store/<file>.c): a struct ctx
 * holding a store on a fake clock, cmocka setup/teardown, small wrappers
 * around store.h that fail the test when a call that must succeed does
 * not, and the helpers more than one of those files uses.
 *
 * Include it after tests/unit/unit.h.  Every test gets a fresh store from
 * setup() (or setup_hooked(), which also counts the store's event hook
 * calls in c->hooks / c->hooks_internal), and teardown() asserts
 * store_check_all() == 0 before freeing it.  Every node pointer the store
 * hands out carries a reference.  The fixture holds those mk(), cr(),
 * lk() and mk_as() hand out, and any the test gives it with keep(), and
 * teardown() (or reopen()) releases them, the latest first: a test
 * releases no node by hand, and one that fails leaks none.  drop()
 * releases one of them now, for a test about what a release does; put()
 * releases a reference the test has from a store call of its own.
 */
#ifndef STATEFS_UNIT_FIXTURE_H
#define STATEFS_UNIT_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "store/store.h"
#include "tests/unit/unit.h"

struct ctx {
	struct store *s;
	struct fake_clock clk;
	struct store_limits lim;
	bool count_hooks;             /* setup_hooked(): install hook_count */
	unsigned long hooks;          /* event hook calls on this store */
	unsigned long hooks_internal; /* ... with internal = true */
	struct store_node **held;     /* references the fixture holds */
	size_t nheld, held_cap;
	/* The event readers the test opened (ev_open, rd_open): teardown
	 * closes them. */
	struct store_event_reader *readers[32];
	int nreaders;
};

static const struct store_owner DOWN = { 1000, 1000, 0755 }; /* dirs */
static const struct store_owner FOWN = { 1000, 1000, 0644 }; /* files */

/* One expected event line without its sequence number. */
#define EV(op, t, p, c, g, v) op "\t" t "\t" p "\t" c "\t" g "\t" v "\n"
/* A link, rename or exchange line: with its source parent and child. */
#define EVF(op, t, p, c, g, v, fp, fc) \
	op "\t" t "\t" p "\t" c "\t" g "\t" v "\t" fp "\t" fc "\n"

/* Nodes the fixture holds ---------------------------------------------- */

/*
 * The fixture takes over the reference @n carries, until teardown() or
 * reopen(); returns @n.
 */
static inline struct store_node *keep(struct ctx *c, struct store_node *n)
{
	if (c->nheld == c->held_cap) {
		size_t cap = c->held_cap ? 2 * c->held_cap : 64;
		struct store_node **h = realloc(c->held, cap * sizeof(*h));

		if (!h)
			fail_msg("keep: out of memory");
		c->held = h;
		c->held_cap = cap;
	}
	c->held[c->nheld++] = n;
	return n;
}

/*
 * Release now a reference the fixture holds on @n (the latest it took),
 * for a test about what a release does; fails the test if it holds none.
 */
static inline void drop(struct ctx *c, struct store_node *n)
{
	for (size_t i = c->nheld; i-- > 0;) {
		if (c->held[i] == n) {
			memmove(&c->held[i], &c->held[i + 1],
				(c->nheld - i - 1) * sizeof(*c->held));
			c->nheld--;
			store_node_unref(c->s, n);
			return;
		}
	}
	fail_msg("drop: the fixture holds no reference to this node");
}

/*
 * Release a reference the test has from a store call of its own, not one
 * the fixture holds (the same node may be both: a lookup of a node made
 * with mk() gives one more reference to it).
 */
static inline void put(struct ctx *c, struct store_node *n)
{
	store_node_unref(c->s, n);
}

/* Release every reference the fixture holds, the latest first. */
static inline void release_held(struct ctx *c)
{
	while (c->nheld > 0)
		store_node_unref(c->s, c->held[--c->nheld]);
}

/* Setup, teardown, reopen ---------------------------------------------- */

static inline void check_ok(struct ctx *c)
{
	char why[256] = "";
	int rc = store_check_all(c->s, why, sizeof why);

	if (rc != 0)
		fail_msg("store_check_all: %d (%s)", rc, why);
}

static inline void hook_count(void *arg, bool internal)
{
	struct ctx *c = arg;

	c->hooks++;
	c->hooks_internal += internal;
}

/*
 * A new store from @l on the test's clock; with c->count_hooks its event
 * hook counts into c->hooks (both counters start again at 0).
 */
static inline int open_store(struct ctx *c, const struct store_limits *l)
{
	struct store_clock clock = { fake_clock_now, &c->clk };
	int rc;

	c->lim = *l;
	c->hooks = c->hooks_internal = 0;
	rc = store_new(&c->lim, &clock, &c->s);
	if (rc == 0 && c->count_hooks)
		store_set_event_hook(c->s, hook_count, c);
	return rc;
}

static inline int setup_with(void **state, bool count_hooks)
{
	struct ctx *c = calloc(1, sizeof *c);
	struct store_limits l;

	if (!c)
		return -1;
	c->clk.now_ms = 1000000; /* not 0: a store must not treat 0 specially */
	c->count_hooks = count_hooks;
	store_limits_default(&l);
	if (open_store(c, &l) != 0) {
		free(c);
		return -1;
	}
	*state = c;
	return 0;
}

/* A fresh store with default limits and no event hook. */
static inline int setup(void **state)
{
	return setup_with(state, false);
}

/* A fresh store with default limits whose event hook calls are counted. */
static inline int setup_hooked(void **state)
{
	return setup_with(state, true);
}

static inline int teardown(void **state)
{
	struct ctx *c = *state;
	char why[256] = "";
	int rc = 0;

	if (c->s) {
		release_held(c);
		rc = store_check_all(c->s, why, sizeof why);
		if (rc != 0)
			print_error("teardown: store_check_all: %d (%s)\n", rc,
				    why);
		store_free(c->s);
	}
	for (int i = 0; i < c->nreaders; i++)
		store_events_close(c->readers[i]);
	free(c->held);
	free(c);
	return rc == 0 ? 0 : -1;
}

/* A test on a fresh store (setup), or on one whose event hook calls are
 * counted (setup_hooked). */
#define TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
#define TEST_HOOKED(f) \
	cmocka_unit_test_setup_teardown(f, setup_hooked, teardown)

/* TEST_FILTER / TEST_SKIP: glob patterns of test names to run / skip. */
static inline void test_filters_from_env(void)
{
	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	if (getenv("TEST_SKIP"))
		cmocka_set_skip_filter(getenv("TEST_SKIP"));
}

/* Run the array @tests as the group @name, filtered as the environment
 * says. */
#define run_store_tests(name, tests) \
	(test_filters_from_env(), \
	 cmocka_run_group_tests_name(name, tests, NULL, NULL))

/* Replace the test's store with one made from @l (after releasing what
 * the fixture holds of it, and checking it). */
static inline void reopen(struct ctx *c, const struct store_limits *l)
{
	release_held(c);
	check_ok(c);
	store_free(c->s);
	c->s = NULL;
	assert_int_equal(open_store(c, l), 0);
}

static inline uint64_t now(struct ctx *c)
{
	return c->clk.now_ms;
}

static inline void advance(struct ctx *c, uint64_t ms)
{
	fake_clock_advance(&c->clk, ms);
}

/* Nodes ------------------------------------------------------------------ */

static inline struct store_node *root(struct ctx *c)
{
	return store_root(c->s);
}

/* A new directory @name in @dir (held by the fixture). */
static inline struct store_node *mk(struct ctx *c, struct store_node *dir,
				    const char *name)
{
	struct store_node *n = NULL;
	int rc = store_mkdir(c->s, dir, name, &DOWN, &n);

	if (rc != 0)
		fail_msg("store_mkdir(%s): %d", name, rc);
	assert_non_null(n);
	return keep(c, n);
}

/* A new child @name in @parent (held by the fixture). */
static inline struct store_node *cr(struct ctx *c, struct store_node *parent,
				    const char *name)
{
	struct store_node *n = NULL;
	bool created = false;
	int rc = store_create(c->s, parent, name, &FOWN, true, &n, &created);

	if (rc != 0)
		fail_msg("store_create(%s): %d", name, rc);
	assert_non_null(n);
	assert_true(created);
	return keep(c, n);
}

/* The node @name in @dir (held by the fixture), failing the test if
 * absent. */
static inline struct store_node *lk(struct ctx *c, struct store_node *dir,
				    const char *name)
{
	struct store_node *n = NULL;
	int rc = store_lookup(c->s, dir, name, &n);

	if (rc != 0)
		fail_msg("store_lookup(%s): %d", name, rc);
	assert_non_null(n);
	return keep(c, n);
}

/* @rc, after dropping @n when @rc is 0 (when the call gave a node). */
static inline int put_if_ok(struct ctx *c, int rc, struct store_node *n)
{
	if (rc == 0) {
		assert_non_null(n);
		store_node_unref(c->s, n);
	}
	return rc;
}

/* store_lookup's return code, dropping the node when found. */
static inline int lookup_rc(struct ctx *c, struct store_node *dir,
			    const char *name)
{
	struct store_node *n = NULL;
	int rc = store_lookup(c->s, dir, name, &n);

	return put_if_ok(c, rc, n);
}

/* The inode number of @name in @dir, which must exist. */
static inline uint64_t ino_of(struct ctx *c, struct store_node *dir,
			      const char *name)
{
	struct store_node *n = lk(c, dir, name);
	uint64_t ino = store_node_ino(n);

	drop(c, n);
	return ino;
}

/* store_create's return code, dropping the node when made or found. */
static inline int create_rc(struct ctx *c, struct store_node *parent,
			    const char *name, bool excl)
{
	struct store_node *n = NULL;
	bool created = false;
	int rc = store_create(c->s, parent, name, &FOWN, excl, &n, &created);

	return put_if_ok(c, rc, n);
}

/* store_mkdir's return code, dropping the node when made. */
static inline int mkdir_rc(struct ctx *c, struct store_node *dir,
			   const char *name)
{
	struct store_node *n = NULL;
	int rc = store_mkdir(c->s, dir, name, &DOWN, &n);

	return put_if_ok(c, rc, n);
}

static inline int getattr_rc(struct ctx *c, struct store_node *n)
{
	struct store_attr a;

	return store_getattr(c->s, n, &a);
}

/* Content, generations, versions, stats, leases -------------------------- */

/* Publish @data on @child through a fresh stage of @mode; its result. */
static inline int publish_rc(struct ctx *c, struct store_node *child,
			     enum store_stage_mode mode, const char *data)
{
	struct store_stage *st = NULL;
	size_t len = strlen(data);
	int rc = store_stage_open(c->s, child, mode, &st);

	if (rc != 0)
		return rc;
	if (len) {
		ssize_t w = store_stage_write(st, data, len, 0);

		if (w < 0) {
			store_stage_close(st);
			return (int)w;
		}
		assert_int_equal(w, (ssize_t)len);
	}
	rc = store_stage_publish(st);
	store_stage_close(st);
	return rc;
}

/* Publish @data on @child through a fresh stage of @mode, which must work. */
static inline void publish(struct ctx *c, struct store_node *child,
			   enum store_stage_mode mode, const char *data)
{
	assert_int_equal(publish_rc(c, child, mode, data), 0);
}

/* Read everything a stage sees from offset 0 into @buf (NUL-terminated). */
static inline size_t stage_slurp(struct store_stage *st, char *buf,
				 size_t cap)
{
	size_t got = 0;

	for (;;) {
		ssize_t r = store_stage_read(st, buf + got, cap - 1 - got, got);

		assert_true(r >= 0);
		if (r == 0)
			break;
		got += (size_t)r;
		assert_true(got < cap - 1);
	}
	buf[got] = '\0';
	return got;
}

/* The current content of @child, as a new read stage sees it. */
static inline size_t content(struct ctx *c, struct store_node *child,
			     char *buf, size_t cap)
{
	struct store_stage *st = NULL;
	size_t n;

	assert_int_equal(store_stage_open(c->s, child, STORE_STAGE_READ, &st),
			 0);
	n = stage_slurp(st, buf, cap);
	store_stage_close(st);
	return n;
}

static inline void assert_content(struct ctx *c, struct store_node *child,
				  const char *want)
{
	char buf[4096];
	size_t n = content(c, child, buf, sizeof buf);

	assert_int_equal(n, strlen(want));
	assert_memory_equal(buf, want, n);
}

static inline uint64_t gen(struct ctx *c, struct store_node *parent)
{
	uint64_t g = 0;

	assert_int_equal(store_parent_generation(c->s, parent, &g), 0);
	return g;
}

static inline uint64_t version(struct ctx *c, struct store_node *child)
{
	uint64_t v = 0;

	assert_int_equal(store_child_version(c->s, child, &v), 0);
	return v;
}

static inline struct store_stats stats(struct ctx *c,
				       struct store_node *tenant)
{
	struct store_stats st;

	memset(&st, 0xa5, sizeof st);
	assert_int_equal(store_stats(c->s, tenant, &st), 0);
	return st;
}

static inline void assert_gauges_eq(const struct store_stats *a,
				    const struct store_stats *b)
{
	assert_int_equal(a->tenants, b->tenants);
	assert_int_equal(a->parents, b->parents);
	assert_int_equal(a->children, b->children);
	assert_int_equal(a->links, b->links);
	assert_int_equal(a->tombstones, b->tombstones);
	assert_int_equal(a->bytes, b->bytes);
	assert_int_equal(a->staged_bytes, b->staged_bytes);
}

static inline void assert_gauges(struct ctx *c, struct store_node *tenant,
				 uint64_t tenants, uint64_t parents,
				 uint64_t children, uint64_t links,
				 uint64_t tombstones, uint64_t bytes)
{
	struct store_stats st = stats(c, tenant);

	assert_int_equal(st.tenants, tenants);
	assert_int_equal(st.parents, parents);
	assert_int_equal(st.children, children);
	assert_int_equal(st.links, links);
	assert_int_equal(st.tombstones, tombstones);
	assert_int_equal(st.bytes, bytes);
}

static inline uint32_t nlink(struct ctx *c, struct store_node *n)
{
	struct store_attr a;

	assert_int_equal(store_getattr(c->s, n, &a), 0);
	return a.nlink;
}

static inline struct store_lease lease(struct ctx *c, struct store_node *n)
{
	struct store_lease l;

	memset(&l, 0xa5, sizeof l);
	assert_int_equal(store_lease_get(c->s, n, &l), 0);
	return l;
}

static inline void assert_lease(struct ctx *c, struct store_node *n,
				uint64_t ttl, uint64_t deadline)
{
	struct store_lease l = lease(c, n);

	assert_int_equal(l.ttl_ms, ttl);
	assert_int_equal(l.deadline_ms, deadline);
}

static inline void set_ttl(struct ctx *c, struct store_node *n, uint64_t ttl)
{
	assert_int_equal(store_set_ttl(c->s, n, ttl), 0);
}

/* Listings --------------------------------------------------------------- */

/* Names of @dir's entries joined with ',' ("" when empty). */
static inline int dirent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct store_dirent *)a)->name,
		      ((const struct store_dirent *)b)->name);
}

/* @dir's names, sorted (a listing is a set: it has no order), joined by
 * commas into @buf. */
static inline void list_names(struct ctx *c, struct store_node *dir,
			      char *buf, size_t cap)
{
	struct store_dirlist l = { 0, NULL };

	assert_int_equal(store_list(c->s, dir, &l), 0);
	if (l.n)
		qsort(l.e, l.n, sizeof(*l.e), dirent_cmp);
	buf[0] = '\0';
	for (size_t i = 0; i < l.n; i++) {
		if (i)
			strncat(buf, ",", cap - strlen(buf) - 1);
		strncat(buf, l.e[i].name, cap - strlen(buf) - 1);
	}
	store_dirlist_free(&l);
}

static inline void assert_list(struct ctx *c, struct store_node *dir,
			       const char *want)
{
	char buf[1024];

	list_names(c, dir, buf, sizeof buf);
	assert_string_equal(buf, want);
}

/* Other callers -------------------------------------------------------- */

static const struct store_cred U1 = { 1001, 1001, NULL, 0 };
static const struct store_cred U2 = { 1002, 1002, NULL, 0 };
static const struct store_cred U3 = { 1003, 1003, NULL, 0 };
static const struct store_cred ROOTC = { 0, 0, NULL, 0 };

/* A directory of @uid with @mode in @dir (held by the fixture). */
static inline struct store_node *mk_as(struct ctx *c,
				       struct store_node *dir,
				       const char *name, uid_t uid,
				       mode_t mode)
{
	const struct store_owner o = { uid, uid, mode };
	struct store_node *n = NULL;

	assert_int_equal(store_mkdir(c->s, dir, name, &o, &n), 0);
	return keep(c, n);
}

static inline void cr_as(struct ctx *c, struct store_node *p,
			 const char *name, uid_t uid)
{
	const struct store_owner o = { uid, uid, 0644 };
	struct store_node *n = NULL;
	bool created = false;

	assert_int_equal(store_create(c->s, p, name, &o, true, &n, &created), 0);
	put(c, n);
}

/* The gauges of the whole store, for "nothing changed". */
static inline void assert_same_gauges(struct ctx *c,
				      const struct store_stats *was)
{
	struct store_stats now = stats(c, NULL);

	assert_int_equal(now.tenants, was->tenants);
	assert_int_equal(now.parents, was->parents);
	assert_int_equal(now.children, was->children);
	assert_int_equal(now.links, was->links);
	assert_int_equal(now.tombstones, was->tombstones);
}

/* Event readers ---------------------------------------------------------- */

/* A reader of @tenant's events (NULL: all) as @cred (NULL: every line),
 * with @flags (STORE_EVENTS_*), closed by teardown. */
static inline struct store_event_reader *
ev_open_as(struct ctx *c, struct store_node *tenant,
	   const struct store_cred *cred, unsigned flags)
{
	struct store_event_reader *r = NULL;

	if (c->nreaders == (int)(sizeof c->readers / sizeof c->readers[0]))
		fail_msg("more event readers than the fixture keeps");
	assert_int_equal(store_events_open(c->s, tenant, cred, flags, &r), 0);
	c->readers[c->nreaders++] = r;
	return r;
}

static inline struct store_event_reader *ev_open(struct ctx *c,
						 struct store_node *tenant)
{
	return ev_open_as(c, tenant, NULL, 0);
}

struct rd {
	struct store_event_reader *r;
	uint64_t last;   /* last sequence number seen, 0 for none */
	int overflows;   /* "overflow" lines seen */
	bool strict;     /* an "overflow" line fails the test */
};

/* A reader of @tenant's events (NULL: all) as @cred (NULL: every line);
 * "overflow" lines are counted. */
static inline void rd_open_as(struct ctx *c, struct rd *d,
			      struct store_node *tenant,
			      const struct store_cred *cred)
{
	memset(d, 0, sizeof *d);
	d->r = ev_open_as(c, tenant, cred, 0);
}

static inline void rd_open(struct ctx *c, struct rd *d,
			   struct store_node *tenant)
{
	rd_open_as(c, d, tenant, NULL);
}

/* As rd_open(), but every line must carry a sequence number. */
static inline void rd_open_strict(struct ctx *c, struct rd *d,
				  struct store_node *tenant)
{
	rd_open(c, d, tenant);
	d->strict = true;
}

/*
 * Everything pending for @d, as the raw bytes store_events_read() gives
 * (malloc'd, NUL-terminated).  Checks that every read returns whole lines.
 */
static inline char *rd_raw(struct ctx *c, struct rd *d, size_t *lenp)
{
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);

	assert_non_null(buf);
	for (int guard = 0;; guard++) {
		size_t got;

		if (cap - len < 8192) {
			cap *= 2;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
		got = store_events_read(c->s, d->r, buf + len, cap - len - 1);
		assert_true(got <= cap - len - 1);
		if (got == 0)
			break;
		if (buf[len + got - 1] != '\n')
			fail_msg("store_events_read returned a partial line");
		len += got;
		if (guard > 1000000)
			fail_msg("store_events_read never runs dry");
	}
	buf[len] = '\0';
	if (lenp)
		*lenp = len;
	return buf;
}

/*
 * Everything pending for @d with the sequence numbers stripped (malloc'd).
 * Checks that sequence numbers are decimal and strictly increasing across
 * calls; "overflow" lines are kept as they are and counted (a strict
 * reader fails on them instead).
 */
static inline char *rd_take(struct ctx *c, struct rd *d)
{
	char *raw = rd_raw(c, d, NULL);
	char *out = malloc(strlen(raw) + 1), *o = out;
	char *line = raw;

	assert_non_null(out);
	while (*line) {
		char *nl = strchr(line, '\n');
		char *end;
		unsigned long long seq;
		size_t n;

		assert_non_null(nl);
		if (!d->strict &&
		    (size_t)(nl - line) == strlen("overflow") &&
		    strncmp(line, "overflow", 8) == 0) {
			d->overflows++;
			memcpy(o, "overflow\n", 9);
			o += 9;
			line = nl + 1;
			continue;
		}
		if (*line < '0' || *line > '9')
			fail_msg("event line without a sequence number: %.*s",
				 (int)(nl - line), line);
		seq = strtoull(line, &end, 10);
		if (*end != '\t')
			fail_msg("bad sequence field: %.*s", (int)(nl - line),
				 line);
		if (seq <= d->last)
			fail_msg("sequence %llu after %llu: %.*s", seq,
				 (unsigned long long)d->last, (int)(nl - line),
				 line);
		d->last = seq;
		n = (size_t)(nl + 1 - (end + 1));
		memcpy(o, end + 1, n);
		o += n;
		line = nl + 1;
	}
	*o = '\0';
	free(raw);
	return out;
}

/* The pending lines of @d are exactly @want, in order. */
static inline void expect_events(struct ctx *c, struct rd *d,
				 const char *want)
{
	char *got = rd_take(c, d);

	if (strcmp(got, want) != 0) {
		print_error("events expected:\n%sgot:\n%s", want, got);
		free(got);
		fail_msg("event lines differ");
	}
	free(got);
}

/* The next event for @r through store_events_next(), which must exist. */
static inline void next_ev(struct ctx *c, struct store_event_reader *r,
			   struct store_event *ev)
{
	memset(ev, 0, sizeof *ev);
	assert_int_equal(store_events_next(c->s, r, ev), 1);
	assert_non_null(ev->tenant);
	assert_non_null(ev->parent);
	assert_non_null(ev->child);
}

static inline size_t count_lines(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* Skip events until one of @op; fails if there is none. */
static inline void next_op(struct ctx *c, struct store_event_reader *r,
			   enum store_op op, struct store_event *ev)
{
	for (;;) {
		next_ev(c, r, ev);
		if (ev->op == op)
			return;
		store_event_free(ev);
	}
}

#endif /* STATEFS_UNIT_FIXTURE_H */
