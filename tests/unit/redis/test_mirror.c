/*
 * test_mirror.c - a mirror (redis/apply.c, redis/entry.c,
 * redis/index.c, redis/load.c, redis/dump.c, redis/diff.c) against the
 * embedded store: the same operations made
 * by the embedded store (store.h) and by the shared store's Functions
 * library on a real redis-server (FCALL), whose log entries a mirror
 * applies; the mirror's snapshot must equal the embedded store's
 * (every tenant, parent, child, tombstone; generations, versions,
 * sizes, link counts, leases, inode numbers), and so must a mirror
 * loaded from sfs_dump.  The seed of the differential test of the two
 * authorities.
 *
 * Each test starts its own redis-server on a unix socket in a temporary
 * directory (no TCP, no persistence; tests/unit/redis/redis_fixture.h); the
 * teardown kills it, and it dies with this process (PR_SET_PDEATHSIG).  Both stores run on a manual
 * clock (testclock), moved together, so deadlines are exact.
 */
#define _GNU_SOURCE
#include "tests/unit/unit.h"
#include "tests/unit/redis/redis_fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <malloc.h>

#include "redis/mirror.h"
#include "redis/statefs_lua.h"
#include "store/store.h"

#define META "statefs:{statefs}:meta"
#define INST "0123456789abcdef"

struct world {
	struct redis_fixture redis; /* its server, the test's connection */
	struct fake_clock clock;   /* the embedded store's and the mirror's */
	struct store *emb;         /* the embedded store */
	struct store *mir;         /* a mirror of the shared store */
	unsigned opn;
};

static int setup(void **state)
{
	struct world *w = calloc(1, sizeof(*w));
	redisReply *r;

	if (!w)
		return -1;
	if (redis_fixture_start(&w->redis, "mirror") != 0) {
		free(w);
		return -1;
	}
	r = redisCommand(w->redis.rc, "FUNCTION LOAD REPLACE %b", store_statefs_lua,
			 store_statefs_lua_len);
	if (!r || r->type == REDIS_REPLY_ERROR) {
		redis_fixture_stop(&w->redis);
		free(w);
		return -1;
	}
	freeReplyObject(r);
	*state = w;
	return 0;
}

static int teardown(void **state)
{
	struct world *w = *state;

	store_free(w->emb);
	store_free(w->mir);
	redis_fixture_stop(&w->redis);
	free(w);
	return 0;
}

/* Redis ------------------------------------------------------------------ */

/* FCALL @fn with @nkeys keys then the common arguments (instance, a new
 * op id of mount "m", no deadline) and @args (NULL-terminated): the reply,
 * whose first element must be @want. */
static redisReply *fcall(struct world *w, const char *want, const char *fn,
			 int nkeys, ...)
{
	const char *argv[64];
	char nk[8], opid[32];
	int argc = 0;
	va_list ap;
	redisReply *r;

	snprintf(nk, sizeof(nk), "%d", nkeys);
	snprintf(opid, sizeof(opid), "m:%u", ++w->opn);
	argv[argc++] = "FCALL";
	argv[argc++] = fn;
	argv[argc++] = nk;
	va_start(ap, nkeys);
	for (int i = 0; i < nkeys; i++)
		argv[argc++] = va_arg(ap, const char *);
	argv[argc++] = INST;
	argv[argc++] = opid;
	argv[argc++] = "";
	for (const char *a; (a = va_arg(ap, const char *)) != NULL;)
		argv[argc++] = a;
	va_end(ap);
	r = redisCommandArgv(w->redis.rc, argc, argv, NULL);
	assert_non_null(r);
	if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
	    strcmp(r->element[0]->str, want) != 0)
		fail_msg("%s: %s, not %s", fn,
			 r->type == REDIS_REPLY_ERROR ? r->str :
			 r->type == REDIS_REPLY_ARRAY ? r->element[0]->str : "?",
			 want);
	return r;
}

static void fok(struct world *w, redisReply *r)
{
	(void)w;
	freeReplyObject(r);
}

static const char *tk(int tid)
{
	static char buf[4][64];
	static int n;

	n = (n + 1) % 4;
	snprintf(buf[n], sizeof(buf[n]), "statefs:{statefs.t%d}:t", tid);
	return buf[n];
}

/* Every entry of tenant @tid's log (0: the root log) from after seq
 * @from, applied to @s in order; returns the last seq applied. */
static uint64_t follow(struct world *w, struct store *s, int tid)
{
	char key[64];
	redisReply *r;
	uint64_t last = 0;

	if (tid)
		snprintf(key, sizeof(key), "statefs:{statefs.t%d}:log", tid);
	else
		snprintf(key, sizeof(key), "statefs:{statefs}:log");
	r = redisCommand(w->redis.rc, "XRANGE %s - +", key);
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_ARRAY);
	for (size_t i = 0; i < r->elements; i++) {
		struct entry e;
		int rc;

		assert_int_equal(entry_parse(r->element[i]->element[1], &e), 0);
		rc = mirror_apply(s, (uint64_t)tid, &e);
		if (rc)
			fail_msg("tenant %d: entry seq %llu op %s: %d", tid,
				 (unsigned long long)e.seq, e.op, rc);
		last = e.seq;
	}
	freeReplyObject(r);
	return last;
}

/* Stores --------------------------------------------------------------------- */

static void limits(struct store_limits *l)
{
	store_limits_default(l);
	l->testclock = true;
	l->tombstone_ttl_ms = 60000;
}

static void init(struct world *w)
{
	struct store_limits l;
	struct store_clock c = { fake_clock_now, &w->clock };

	limits(&l);
	assert_int_equal(store_new(&l, &c, &w->emb), 0);
	fok(w, fcall(w, "OK", "sfs_init", 1, META, "2", INST, "0", "testclock",
		     "1", "tombstone_ttl_ms", "60000", NULL));
}

static struct store *new_mirror(struct world *w)
{
	struct store_limits l;
	struct store_clock c = { fake_clock_now, &w->clock };
	struct store *s;

	limits(&l);
	assert_int_equal(store_new(&l, &c, &s), 0);
	assert_int_equal(mirror_attach(s, "", 0), 0);
	return s;
}

/* One snapshot row as text. */
static void row_text(char *buf, size_t len, const struct store_snap_row *r)
{
	snprintf(buf, len, "%d %s/%s/%s gen %lld ver %lld size %lld nlink %lld "
		 "ttl %lld ino %lld owner %u:%u %o\n", (int)r->kind, r->tenant,
		 r->parent, r->child, (long long)r->generation,
		 (long long)r->version, (long long)r->size, (long long)r->nlink,
		 (long long)r->ttl_ms_left, (long long)r->ino,
		 (unsigned)r->tenant_uid, (unsigned)r->tenant_gid,
		 (unsigned)r->tenant_mode);
}

static int row_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The store's snapshot as sorted lines (row order within a tenant
 * follows table order, which two stores need not share). */
static char *snap_text(struct store *s)
{
	struct store_snapshot snap;
	char **lines, *out;
	size_t total = 1;

	assert_int_equal(store_snapshot_take(s, NULL, &snap), 0);
	lines = calloc(snap.n + 1, sizeof(*lines));
	assert_non_null(lines);
	for (size_t i = 0; i < snap.n; i++) {
		char buf[1024];

		row_text(buf, sizeof(buf), &snap.rows[i]);
		lines[i] = strdup(buf);
		total += strlen(buf);
	}
	qsort(lines, snap.n, sizeof(*lines), row_cmp);
	out = calloc(1, total);
	for (size_t i = 0; i < snap.n; i++) {
		strcat(out, lines[i]);
		free(lines[i]);
	}
	free(lines);
	store_snapshot_free(&snap);
	return out;
}

static void same_snapshot(struct store *a, struct store *b)
{
	char *x = snap_text(a), *y = snap_text(b);

	if (strcmp(x, y) != 0) {
		print_error("embedded:\n%s\nmirror:\n%s\n", x, y);
		free(x);
		free(y);
		fail_msg("the snapshots differ");
	}
	free(x);
	free(y);
}

static struct store_node *look(struct store *s, struct store_node *dir,
			       const char *name)
{
	struct store_node *n;

	assert_int_equal(store_lookup(s, dir, name, &n), 0);
	return n;
}

static void emb_publish(struct store *s, struct store_node *c,
			enum store_stage_mode mode, const char *data)
{
	struct store_stage *st;

	assert_int_equal(store_stage_open(s, c, mode, &st), 0);
	assert_int_equal(store_stage_write(st, data, strlen(data), 0),
			 (ssize_t)strlen(data));
	assert_int_equal(store_stage_publish(st), 0);
	store_stage_close(st);
}

/*
 * One run of operations on both authorities: tenants, parents, children,
 * links, renames and an exchange, publications, attributes, leases that
 * expire, a departure, a leave with its cascade, a rejoin, a child_ttl,
 * a truncation, a tenant drain and a tenant cleanup.
 */
static void run_both(struct world *w)
{
	struct store *e = w->emb;
	struct store_owner own = { 1000, 100, 0755 }, fown = { 1000, 100, 0644 };
	struct store_node *a, *b, *p, *q, *r, *n, *c, *d, *x, *f;
	struct store_attr in = { 0 };
	bool created;
	char ino[32], ino2[32];
	redisReply *rep;

	/* Tenants acme (tid 1) and beta (tid 2). */
	assert_int_equal(store_mkdir(e, store_root(e), "acme", &own, &a), 0);
	assert_int_equal(store_mkdir(e, store_root(e), "beta", &own, &b), 0);
	fok(w, fcall(w, "OK", "sfs_mkdir_tenant", 1, META, "acme", "1000", "100",
		     "493", NULL));
	fok(w, fcall(w, "OK", "sfs_mkdir_tenant", 1, META, "beta", "1000", "100",
		     "493", NULL));
	/* Parents p, q (acme), r (beta). */
	assert_int_equal(store_mkdir(e, a, "p", &own, &p), 0);
	assert_int_equal(store_mkdir(e, a, "q", &own, &q), 0);
	assert_int_equal(store_mkdir(e, b, "r", &own, &r), 0);
	fok(w, fcall(w, "OK", "sfs_join", 2, META, tk(1), "p", "1000", "100", "493", NULL));
	fok(w, fcall(w, "OK", "sfs_join", 2, META, tk(1), "q", "1000", "100", "493", NULL));
	fok(w, fcall(w, "OK", "sfs_join", 2, META, tk(2), "r", "1000", "100", "493", NULL));
	/* p: 28, q: 29, r: 30; children c 31, d 32 in p; x 33 in q. */
	assert_int_equal(store_create(e, p, "c", &fown, true, &c, &created), 0);
	assert_int_equal(store_create(e, p, "d", &fown, true, &d, &created), 0);
	assert_int_equal(store_create(e, q, "x", &fown, true, &x, &created), 0);
	assert_int_equal(store_node_ino(x), 33);
	fok(w, fcall(w, "OK", "sfs_create", 2, META, tk(1), "28", "c", "1000", "100", "420", "1", NULL));
	fok(w, fcall(w, "OK", "sfs_create", 2, META, tk(1), "28", "d", "1000", "100", "420", "1", NULL));
	fok(w, fcall(w, "OK", "sfs_create", 2, META, tk(1), "29", "x", "1000", "100", "420", "1", NULL));
	/* Publications: replace, append, a compare-and-swap. */
	emb_publish(e, c, STORE_STAGE_REPLACE, "hello");
	emb_publish(e, d, STORE_STAGE_REPLACE, "x");
	emb_publish(e, d, STORE_STAGE_APPEND, "yz");
	emb_publish(e, x, STORE_STAGE_CAS, "cas");
	fok(w, fcall(w, "OK", "sfs_publish", 2, META, tk(1), "31", "replace", "", "hello", NULL));
	fok(w, fcall(w, "OK", "sfs_publish", 2, META, tk(1), "32", "replace", "", "x", NULL));
	fok(w, fcall(w, "OK", "sfs_publish", 2, META, tk(1), "32", "append", "", "yz", NULL));
	fok(w, fcall(w, "OK", "sfs_publish", 2, META, tk(1), "33", "cas", "0", "cas", NULL));
	/* A second link, a move, an exchange. */
	assert_int_equal(store_link(e, c, q, "c2"), 0);
	fok(w, fcall(w, "OK", "sfs_link", 3, META, tk(1), tk(1), "31", "29", "c2", NULL));
	assert_int_equal(store_rename(e, p, "d", q, "d2", 0), 0);
	fok(w, fcall(w, "OK", "sfs_rename", 3, META, tk(1), tk(1), "28", "d", "29", "d2", "0", NULL));
	assert_int_equal(store_rename(e, p, "c", q, "x", STORE_RENAME_EXCHANGE), 0);
	fok(w, fcall(w, "OK", "sfs_rename", 3, META, tk(1), tk(1), "28", "c", "29", "x", "2", NULL));
	/* A rename over an existing name replaces it. */
	assert_int_equal(store_rename(e, q, "d2", q, "c2", 0), 0);
	fok(w, fcall(w, "OK", "sfs_rename", 3, META, tk(1), tk(1), "29", "d2", "29", "c2", "0", NULL));
	/* Attributes. */
	in.mode = 0600;
	assert_int_equal(store_setattr(e, x, STORE_SET_MODE, &in, NULL), 0);
	fok(w, fcall(w, "OK", "sfs_setattr", 2, META, tk(1), "child", "33", "384", "", "", "", "", "", NULL));
	in.uid = 7;
	assert_int_equal(store_setattr(e, q, STORE_SET_UID, &in, NULL), 0);
	fok(w, fcall(w, "OK", "sfs_setattr", 2, META, tk(1), "parent", "29", "", "7", "", "", "", "", NULL));
	/* A truncation is a publication. */
	in.size = 2;
	assert_int_equal(store_setattr(e, c, STORE_SET_SIZE, &in, NULL), 0);
	fok(w, fcall(w, "OK", "sfs_setattr", 2, META, tk(1), "child", "31", "", "", "", "", "", "2", NULL));
	/* Leases: a child and a parent that expire, one that is renewed. */
	assert_int_equal(store_set_ttl(e, d, 5000), 0);
	assert_int_equal(store_set_ttl(e, r, 3000), 0);
	assert_int_equal(store_set_ttl(e, x, 2000), 0);
	fok(w, fcall(w, "OK", "sfs_set_ttl", 2, META, tk(1), "child", "32", "5000", NULL));
	fok(w, fcall(w, "OK", "sfs_set_ttl", 2, META, tk(2), "parent", "30", "3000", NULL));
	fok(w, fcall(w, "OK", "sfs_set_ttl", 2, META, tk(1), "child", "33", "2000", NULL));
	fake_clock_advance(&w->clock, 1500);
	fok(w, fcall(w, "OK", "sfs_clock_advance", 1, META, "1500", NULL));
	assert_int_equal(store_renew(e, x), 0);
	fok(w, fcall(w, "OK", "sfs_renew", 2, META, tk(1), "child", "33", NULL));
	fake_clock_advance(&w->clock, 1500);
	fok(w, fcall(w, "OK", "sfs_clock_advance", 1, META, "1500", NULL));
	store_expire(e, 100);
	fok(w, fcall(w, "OK", "sfs_expire", 2, META, tk(1), "100", NULL));
	fok(w, fcall(w, "OK", "sfs_expire", 2, META, tk(2), "100", NULL));
	/* A departure of a name that never joined; a leave with its
	 * cascade; a rejoin (generation 2). */
	assert_int_equal(store_depart(e, a, "ghost", NULL), 0);
	fok(w, fcall(w, "OK", "sfs_depart", 2, META, tk(1), "ghost", "", "", "", NULL));
	assert_int_equal(store_mkdir(e, a, "z", &own, &n), 0);
	fok(w, fcall(w, "OK", "sfs_join", 2, META, tk(1), "z", "1000", "100", "493", NULL));
	snprintf(ino, sizeof(ino), "%llu", (unsigned long long)store_node_ino(n));
	assert_int_equal(store_link(e, x, n, "zx"), 0);
	fok(w, fcall(w, "OK", "sfs_link", 3, META, tk(1), tk(1), "33", ino, "zx", NULL));
	assert_int_equal(store_create(e, n, "zz", &fown, true, &f, &created), 0);
	fok(w, fcall(w, "OK", "sfs_create", 2, META, tk(1), ino, "zz", "1000", "100", "420", "1", NULL));
	store_node_unref(e, f);
	store_node_unref(e, n);
	assert_int_equal(store_rmdir(e, a, "z", NULL), 0);
	fok(w, fcall(w, "OK", "sfs_leave", 2, META, tk(1), "z", "", "", "", NULL));
	store_node_unref(e, q);
	assert_int_equal(store_mkdir(e, a, "z", &own, &q), 0);
	rep = fcall(w, "OK", "sfs_join", 2, META, tk(1), "z", "1000", "100", "493", NULL);
	assert_int_equal(rep->element[4]->integer, 2); /* generation */
	snprintf(ino, sizeof(ino), "%lld", rep->element[3]->integer);
	assert_int_equal(store_node_ino(q), (uint64_t)rep->element[3]->integer);
	freeReplyObject(rep);
	/* A child_ttl: the next child starts with that lease. */
	assert_int_equal(store_set_child_ttl(e, q, 9000), 0);
	fok(w, fcall(w, "OK", "sfs_set_child_ttl", 2, META, tk(1), ino, "9000", NULL));
	assert_int_equal(store_create(e, q, "f", &fown, true, &f, &created), 0);
	rep = fcall(w, "OK", "sfs_create", 2, META, tk(1), ino, "f", "1000", "100", "420", "1", NULL);
	snprintf(ino2, sizeof(ino2), "%lld", rep->element[3]->integer);
	assert_int_equal(store_node_ino(f), (uint64_t)rep->element[3]->integer);
	freeReplyObject(rep);
	/* An unlink. */
	assert_int_equal(store_unlink(e, q, "f"), 0);
	fok(w, fcall(w, "OK", "sfs_unlink", 2, META, tk(1), ino, "f", NULL));
	/* beta: a drain, cleared at once (no child); then its cleanup. */
	assert_int_equal(store_drain(e, b), 0);
	fok(w, fcall(w, "OK", "sfs_drain", 2, META, tk(2), "", "", "", NULL));
	n = look(e, store_root(e), "acme");
	store_node_unref(e, n);

	store_node_unref(e, a);
	store_node_unref(e, b);
	store_node_unref(e, p);
	store_node_unref(e, q);
	store_node_unref(e, r);
	store_node_unref(e, c);
	store_node_unref(e, d);
	store_node_unref(e, x);
	store_node_unref(e, f);
}

/* Every log applied in order gives the embedded store's snapshot. */
static void test_apply_equals_embedded(void **state)
{
	struct world *w = *state;
	char why[256];

	init(w);
	run_both(w);
	w->mir = new_mirror(w);
	follow(w, w->mir, 0);
	follow(w, w->mir, 1);
	follow(w, w->mir, 2);
	same_snapshot(w->emb, w->mir);
	assert_int_equal(store_check_all(w->mir, why, sizeof(why)), 0);
	/* Then a cleanup of beta, on both. */
	assert_int_equal(store_rmdir(w->emb, store_root(w->emb), "beta", NULL), 0);
	fok(w, fcall(w, "OK", "sfs_rmdir_tenant", 1, META, "beta", "", "", "", NULL));
	follow(w, w->mir, 2);
	same_snapshot(w->emb, w->mir);
	assert_int_equal(store_check_all(w->mir, why, sizeof(why)), 0);
}

/* A mirror loaded from sfs_dump is the same as one that applied every
 * entry; entries it has already (at or below the dump's seq) are
 * skipped, a gap is refused. */
static void test_load_equals_embedded(void **state)
{
	struct world *w = *state;
	redisReply *r;
	char id[64], why[256];
	struct entry e;
	uint64_t seq;
	bool gone;

	init(w);
	run_both(w);
	w->mir = new_mirror(w);
	for (int tid = 1; tid <= 2; tid++) {
		r = redisCommand(w->redis.rc, "FCALL_RO sfs_dump 2 %s %s %s %s %s", META,
				 tk(tid), INST, "", "");
		assert_non_null(r);
		assert_int_equal(mirror_load_tenant(w->mir, (uint64_t)tid, dump_of(r), id,
						    sizeof(id)), 0);
		assert_true(strchr(id, '-') != NULL);
		freeReplyObject(r);
	}
	same_snapshot(w->emb, w->mir);
	assert_int_equal(store_check_all(w->mir, why, sizeof(why)), 0);
	/* The whole log again: every entry is at or below the dump. */
	follow(w, w->mir, 1);
	same_snapshot(w->emb, w->mir);
	/* An entry past a gap is refused. */
	assert_int_equal(mirror_applied(w->mir, 1, &seq, &gone), 0);
	assert_false(gone);
	r = redisCommand(w->redis.rc, "XRANGE statefs:{statefs.t1}:log - + COUNT 1");
	assert_int_equal(entry_parse(r->element[0]->element[1], &e), 0);
	e.seq = seq + 2;
	assert_int_equal(mirror_apply(w->mir, 1, &e), -ERANGE);
	freeReplyObject(r);
	same_snapshot(w->emb, w->mir);
}

/* The lines a mirror's .events shows: the shared store's seq numbers,
 * per tenant, and the embedded store's lines. */
static void test_events_carry_the_store_seq(void **state)
{
	struct world *w = *state;
	struct store_event_reader *rd = NULL;
	struct store_node *t;
	char buf[8192];
	size_t n;

	init(w);
	w->mir = new_mirror(w);
	fok(w, fcall(w, "OK", "sfs_mkdir_tenant", 1, META, "acme", "0", "0", "493", NULL));
	follow(w, w->mir, 0);
	follow(w, w->mir, 1);
	t = look(w->mir, store_root(w->mir), "acme");
	assert_int_equal(store_events_open(w->mir, t, NULL, 0, &rd), 0);
	fok(w, fcall(w, "OK", "sfs_join", 2, META, tk(1), "p", "0", "0", "493", NULL));
	fok(w, fcall(w, "OK", "sfs_create", 2, META, tk(1), "19", "c", "0", "0", "420", "1", NULL));
	fok(w, fcall(w, "OK", "sfs_set_ttl", 2, META, tk(1), "child", "20", "100", NULL));
	fok(w, fcall(w, "OK", "sfs_unlink", 2, META, tk(1), "19", "c", NULL));
	follow(w, w->mir, 1);
	n = store_events_read(w->mir, rd, buf, sizeof(buf) - 1);
	buf[n] = '\0';
	/* seq 1 is the tenant's join; the lease took seq 4 and has no
	 * line: a reader sees the gap. */
	assert_string_equal(buf, "2\tjoin\tacme\tp\t-\t1\t-\n"
				 "3\tcreate\tacme\tp\tc\t1\t0\n"
				 "5\tunlink\tacme\tp\tc\t1\t0\n");
	store_events_close(rd);
	store_node_unref(w->mir, t);
}

/* A tenant whose reload failed has no copy in the mirror: its next
 * entry, a parent's join, does not apply (-EUCLEAN: the follower reloads
 * the tenant), and a reload then gives the store's state. */
static void test_join_after_failed_load(void **state)
{
	struct world *w = *state;
	struct store_owner own = { 0, 0, 0755 };
	struct store_node *a, *p;
	redisReply *dump, *r;
	struct entry e;
	char id[64], why[256];

	init(w);
	w->mir = new_mirror(w);
	assert_int_equal(store_mkdir(w->emb, store_root(w->emb), "acme", &own, &a), 0);
	fok(w, fcall(w, "OK", "sfs_mkdir_tenant", 1, META, "acme", "0", "0", "493", NULL));
	follow(w, w->mir, 0);
	dump = redisCommand(w->redis.rc, "FCALL_RO sfs_dump 2 %s %s %s %s %s", META,
			    tk(1), INST, "", "");
	assert_non_null(dump);
	assert_int_equal(mirror_load_tenant(w->mir, 1, dump_of(dump), id, sizeof(id)), 0);
	/* The same dump with its parents unreadable: the reload fails
	 * once the old copy went. */
	assert_int_equal(dump->element[5]->type, REDIS_REPLY_ARRAY);
	dump->element[5]->type = REDIS_REPLY_NIL;
	assert_int_equal(mirror_load_tenant(w->mir, 1, dump_of(dump), id, sizeof(id)),
			 -EPROTO);
	dump->element[5]->type = REDIS_REPLY_ARRAY;
	/* The tenant's next entry: a join. */
	assert_int_equal(store_mkdir(w->emb, a, "p", &own, &p), 0);
	fok(w, fcall(w, "OK", "sfs_join", 2, META, tk(1), "p", "0", "0", "493", NULL));
	r = redisCommand(w->redis.rc, "XRANGE statefs:{statefs.t1}:log - +");
	assert_non_null(r);
	assert_int_equal(r->elements, 2);
	assert_int_equal(entry_parse(r->element[1]->element[1], &e), 0);
	assert_int_equal(e.seq, 2);
	assert_int_equal(mirror_apply(w->mir, 1, &e), -EUCLEAN);
	freeReplyObject(r);
	freeReplyObject(dump);
	/* The reload the follower makes then. */
	dump = redisCommand(w->redis.rc, "FCALL_RO sfs_dump 2 %s %s %s %s %s", META,
			    tk(1), INST, "", "");
	assert_non_null(dump);
	assert_int_equal(mirror_load_tenant(w->mir, 1, dump_of(dump), id, sizeof(id)), 0);
	freeReplyObject(dump);
	same_snapshot(w->emb, w->mir);
	assert_int_equal(store_check_all(w->mir, why, sizeof(why)), 0);
	store_node_unref(w->emb, p);
	store_node_unref(w->emb, a);
}

/* Every element of reply @r, depth first, into @out (at most @cap);
 * returns how many there are. */
static size_t reply_nodes(redisReply *r, redisReply **out, size_t n,
			  size_t cap)
{
	if (r->type != REDIS_REPLY_ARRAY)
		return n;
	for (size_t i = 0; i < r->elements; i++) {
		if (n < cap)
			out[n] = r->element[i];
		n = reply_nodes(r->element[i], out, n + 1, cap);
	}
	return n;
}

/* Load @dump of tenant 1 into @s: 0 or -EPROTO, never a crash or a
 * read out of bounds (ASan), and the mirror stays consistent. */
static void load_must_not_break(struct store *s, redisReply *dump, size_t at,
				const char *as)
{
	char id[64], why[256];
	int rc = mirror_load_tenant(s, 1, dump_of(dump), id, sizeof(id));

	if (rc != 0 && rc != -EPROTO)
		fail_msg("element %zu made %s: load %d", at, as, rc);
	if (store_check_all(s, why, sizeof(why)) != 0)
		fail_msg("element %zu made %s: %s", at, as, why);
}

/* A dump of an unexpected shape: each element in turn made a nil, an
 * integer, an empty array and a string of its own.  Every load gives 0
 * (an optional field) or -EPROTO, never a crash; the good dump then
 * loads as before. */
static void test_load_malformed_dump(void **state)
{
	struct world *w = *state;
	static redisReply *nodes[4096];
	redisReply *dump;
	size_t n;
	char id[64];

	init(w);
	run_both(w);
	w->mir = new_mirror(w);
	follow(w, w->mir, 0);
	dump = redisCommand(w->redis.rc, "FCALL_RO sfs_dump 2 %s %s %s %s %s", META,
			    tk(1), INST, "", "");
	assert_non_null(dump);
	n = reply_nodes(dump, nodes, 0, sizeof(nodes) / sizeof(nodes[0]));
	assert_true(n > 50 && n <= sizeof(nodes) / sizeof(nodes[0]));
	for (size_t i = 0; i < n; i++) {
		redisReply *e = nodes[i], keep = *e;
		static char x[] = "x";

		*e = (redisReply){ .type = REDIS_REPLY_NIL };
		load_must_not_break(w->mir, dump, i, "a nil");
		*e = (redisReply){ .type = REDIS_REPLY_INTEGER, .integer = -1 };
		load_must_not_break(w->mir, dump, i, "an integer");
		*e = (redisReply){ .type = REDIS_REPLY_ARRAY };
		load_must_not_break(w->mir, dump, i, "an empty array");
		*e = (redisReply){ .type = REDIS_REPLY_STRING, .str = x,
				   .len = 1 };
		load_must_not_break(w->mir, dump, i, "a string");
		*e = keep;
	}
	/* Fewer elements than a dump has. */
	for (size_t k = 0; k < dump->elements; k++) {
		size_t all = dump->elements;

		dump->elements = k;
		load_must_not_break(w->mir, dump, k, "the end");
		dump->elements = all;
	}
	assert_int_equal(mirror_load_tenant(w->mir, 1, dump_of(dump), id, sizeof(id)), 0);
	freeReplyObject(dump);
	follow(w, w->mir, 2);
	same_snapshot(w->emb, w->mir);
}

/* A dump is checked against the mount's limits as a request is: a
 * state's content past max_payload, a name past max_name, and names no
 * path can give are refused (-EPROTO), and the tenant is not loaded. */
static void test_load_dump_past_limits(void **state)
{
	struct world *w = *state;
	struct store_limits l;
	struct store_clock c = { fake_clock_now, &w->clock };
	struct store_node *t = NULL;
	redisReply *dump;
	char id[64];
	struct {
		uint64_t max_payload, max_name;
	} small[] = { { 4, 255 }, { 65536, 3 } };

	init(w);
	fok(w, fcall(w, "OK", "sfs_mkdir_tenant", 1, META, "acme", "0", "0", "493", NULL));
	fok(w, fcall(w, "OK", "sfs_join", 2, META, tk(1), "p", "0", "0", "493", NULL));
	fok(w, fcall(w, "OK", "sfs_create", 2, META, tk(1), "19", "c", "0", "0", "420", "1", NULL));
	fok(w, fcall(w, "OK", "sfs_publish", 2, META, tk(1), "20", "replace", "",
		     "hello world", "0", "0", NULL));
	dump = redisCommand(w->redis.rc, "FCALL_RO sfs_dump 2 %s %s %s %s %s", META,
			    tk(1), INST, "", "");
	assert_non_null(dump);
	for (size_t i = 0; i < sizeof(small) / sizeof(small[0]); i++) {
		struct store *s;

		limits(&l);
		l.max_payload = small[i].max_payload;
		l.max_name = small[i].max_name;
		assert_int_equal(store_new(&l, &c, &s), 0);
		assert_int_equal(mirror_attach(s, "", 0), 0);
		assert_int_equal(mirror_load_tenant(s, 1, dump_of(dump), id, sizeof(id)),
				 -EPROTO);
		assert_int_equal(store_lookup(s, store_root(s), "acme", &t),
				 -ENOENT);
		store_free(s);
	}
	/* Within them it loads. */
	w->mir = new_mirror(w);
	assert_int_equal(mirror_load_tenant(w->mir, 1, dump_of(dump), id, sizeof(id)), 0);
	/* A parent's name with a '/', a leading '.': refused. */
	for (size_t i = 0; i < 2; i++) {
		redisReply *P = dump->element[5]->element[0]->element[1];

		for (size_t k = 0; k + 1 < P->elements; k += 2)
			if (strcmp(P->element[k]->str, "name") == 0) {
				char *keep = P->element[k + 1]->str;
				size_t len = P->element[k + 1]->len;
				static char slash[] = "a/b", dot[] = ".p";

				P->element[k + 1]->str = i ? dot : slash;
				P->element[k + 1]->len = strlen(P->element[k + 1]->str);
				assert_int_equal(mirror_load_tenant(w->mir, 1, dump_of(dump),
								    id, sizeof(id)),
						 -EPROTO);
				P->element[k + 1]->str = keep;
				P->element[k + 1]->len = len;
			}
	}
	assert_int_equal(mirror_load_tenant(w->mir, 1, dump_of(dump), id, sizeof(id)), 0);
	freeReplyObject(dump);
}

/* The bytes allocated now: ASan's count when built with it (the unit
 * tests are), else the C library's. */
size_t __sanitizer_get_current_allocated_bytes(void) __attribute__((weak));

static size_t allocated(void)
{
	if (__sanitizer_get_current_allocated_bytes)
		return __sanitizer_get_current_allocated_bytes();
	return mallinfo2().uordblks;
}

/* @count tenants made and removed by the store (ids @first on), their
 * logs and the root's applied to the mirror. */
static void churn(struct world *w, int first, int count)
{
	char name[32];

	for (int i = first; i < first + count; i++) {
		snprintf(name, sizeof(name), "t%d", i);
		fok(w, fcall(w, "OK", "sfs_mkdir_tenant", 1, META, name, "0", "0",
			     "493", NULL));
		fok(w, fcall(w, "OK", "sfs_rmdir_tenant", 1, META, name, "", "",
			     "", NULL));
	}
	follow(w, w->mir, 0);
	for (int i = first; i < first + count; i++)
		follow(w, w->mir, i);
}

/* A mirror does not grow with every tenant it ever saw: once a
 * tenant's log has ended (its cleanup), the mirror keeps nothing of it,
 * and still answers that it went. */
static void test_gone_tenants_are_freed(void **state)
{
	struct world *w = *state;
	size_t before, after;
	uint64_t seq;
	bool gone;

	init(w);
	w->mir = new_mirror(w);
	/* Past the index's first sweeps (at 1,024 entries added). */
	churn(w, 1, 2000);
	before = allocated();
	churn(w, 2001, 6000);
	after = allocated();
	/* Kept, each would be a tenant node and its entry (over 800
	 * bytes); what the index holds of dead nodes until its next sweep
	 * (at most about 2,048 of them) is not kept. */
	if (after > before && after - before > 6000 * 400)
		fail_msg("6,000 tenants gone: %zu bytes more", after - before);
	assert_int_equal(mirror_tenants(w->mir, NULL, 0, false), 0);
	assert_int_equal(mirror_applied(w->mir, 42, &seq, &gone), 0);
	assert_true(gone);
	assert_int_equal(mirror_applied(w->mir, 8001, &seq, &gone), -ENOENT);
}

/* A join's or a create's reply: the inode number it gave, as text. */
static void ino_text(redisReply *r, char *buf)
{
	snprintf(buf, 32, "%lld", r->element[3]->integer);
	freeReplyObject(r);
}

/*
 * A reload of a tenant the mirror holds (its log lost a gap) keeps every
 * node that lives on, the same node under the same local number (so
 * handles of it stay good), ends those that went, makes the new ones,
 * and tells the watch machinery the difference in internal lines that a
 * .events reader never sees (it gets one "overflow").
 */
static void test_reload_keeps_nodes(void **state)
{
	struct world *w = *state;
	struct store_node *t, *p, *q, *old, *keep, *rw, *mv, *gone, *a, *b, *n;
	struct store_node *x, *y, *z, *oc;
	struct store_event_reader *rd, *ir;
	char pi[32], qi[32], ri[32], mi[32], fi[32], oi[32], junk[32], id[64];
	char why[256];
	char buf[4096], seen[512] = "";
	struct store_attr at;
	struct store_event ev;
	struct store *fresh;
	redisReply *dump;
	uint64_t ver;
	int rc;

	init(w);
	w->mir = new_mirror(w);
	fok(w, fcall(w, "OK", "sfs_mkdir_tenant", 1, META, "acme", "0", "0", "493", NULL));
	ino_text(fcall(w, "OK", "sfs_join", 2, META, tk(1), "p", "0", "0", "493", NULL), pi);
	ino_text(fcall(w, "OK", "sfs_join", 2, META, tk(1), "q", "0", "0", "493", NULL), qi);
	ino_text(fcall(w, "OK", "sfs_join", 2, META, tk(1), "old", "0", "0", "493", NULL), oi);
	ino_text(fcall(w, "OK", "sfs_create", 2, META, tk(1), oi, "oc", "0", "0", "420", "1", NULL), junk);
	ino_text(fcall(w, "OK", "sfs_create", 2, META, tk(1), pi, "x", "0", "0", "420", "1", NULL), junk);
	ino_text(fcall(w, "OK", "sfs_create", 2, META, tk(1), pi, "y", "0", "0", "420", "1", NULL), junk);
	ino_text(fcall(w, "OK", "sfs_create", 2, META, tk(1), pi, "z", "0", "0", "420", "1", NULL), junk);
	ino_text(fcall(w, "OK", "sfs_create", 2, META, tk(1), pi, "keep", "0", "0", "420", "1", NULL), junk);
	ino_text(fcall(w, "OK", "sfs_create", 2, META, tk(1), pi, "rw", "0", "0", "420", "1", NULL), ri);
	ino_text(fcall(w, "OK", "sfs_create", 2, META, tk(1), pi, "mv", "0", "0", "420", "1", NULL), mi);
	ino_text(fcall(w, "OK", "sfs_create", 2, META, tk(1), pi, "gone", "0", "0", "420", "1", NULL), junk);
	ino_text(fcall(w, "OK", "sfs_create", 2, META, tk(1), pi, "a", "0", "0", "420", "1", NULL), junk);
	ino_text(fcall(w, "OK", "sfs_create", 2, META, tk(1), pi, "b", "0", "0", "420", "1", NULL), junk);
	fok(w, fcall(w, "OK", "sfs_publish", 2, META, tk(1), ri, "replace", "", "one", NULL));
	follow(w, w->mir, 0);
	follow(w, w->mir, 1);
	t = look(w->mir, store_root(w->mir), "acme");
	p = look(w->mir, t, "p");
	q = look(w->mir, t, "q");
	old = look(w->mir, t, "old");
	keep = look(w->mir, p, "keep");
	rw = look(w->mir, p, "rw");
	mv = look(w->mir, p, "mv");
	gone = look(w->mir, p, "gone");
	a = look(w->mir, p, "a");
	b = look(w->mir, p, "b");
	x = look(w->mir, p, "x");
	y = look(w->mir, p, "y");
	z = look(w->mir, p, "z");
	oc = look(w->mir, old, "oc");
	assert_int_equal(store_events_open(w->mir, t, NULL, 0, &rd), 0);
	assert_int_equal(store_events_open(w->mir, NULL, NULL, STORE_EVENTS_INTERNAL |
					   STORE_EVENTS_WHOLE_LOG, &ir), 0);
	/* The gap: changes this mirror never applies. */
	fok(w, fcall(w, "OK", "sfs_unlink", 2, META, tk(1), pi, "gone", NULL));
	fok(w, fcall(w, "OK", "sfs_publish", 2, META, tk(1), ri, "replace", "", "two", NULL));
	fok(w, fcall(w, "OK", "sfs_rename", 3, META, tk(1), tk(1), pi, "mv", qi, "mv2", "0", NULL));
	fok(w, fcall(w, "OK", "sfs_rename", 3, META, tk(1), tk(1), pi, "a", pi, "b", "2", NULL));
	ino_text(fcall(w, "OK", "sfs_create", 2, META, tk(1), qi, "fresh", "0", "0", "420", "1", NULL), fi);
	/* Names that chase each other: x, y, z rotated through a fourth. */
	fok(w, fcall(w, "OK", "sfs_rename", 3, META, tk(1), tk(1), pi, "x", pi, "tmp", "0", NULL));
	fok(w, fcall(w, "OK", "sfs_rename", 3, META, tk(1), tk(1), pi, "y", pi, "x", "0", NULL));
	fok(w, fcall(w, "OK", "sfs_rename", 3, META, tk(1), tk(1), pi, "z", pi, "y", "0", NULL));
	fok(w, fcall(w, "OK", "sfs_rename", 3, META, tk(1), tk(1), pi, "tmp", pi, "z", "0", NULL));
	/* A child that leaves with its parent's leave by moving first;
	 * the parent's name joins again (a new incarnation). */
	fok(w, fcall(w, "OK", "sfs_rename", 3, META, tk(1), tk(1), oi, "oc", pi, "oc", "0", NULL));
	fok(w, fcall(w, "OK", "sfs_leave", 2, META, tk(1), "old", "", "", "", NULL));
	fok(w, fcall(w, "OK", "sfs_join", 2, META, tk(1), "old", "0", "0", "493", NULL));
	dump = redisCommand(w->redis.rc, "FCALL_RO sfs_dump 2 %s %s %s %s %s", META,
			    tk(1), INST, "", "");
	assert_non_null(dump);
	assert_int_equal(mirror_load_tenant(w->mir, 1, dump_of(dump), id, sizeof(id)), 0);
	/* Kept: the same nodes, under their names of now. */
	assert_true(store_node_live(t) && store_node_live(p) && store_node_live(q));
	assert_true(store_node_live(keep) && store_node_live(rw) &&
		    store_node_live(mv) && store_node_live(a) && store_node_live(b));
	assert_false(store_node_live(gone));
	assert_false(store_node_live(old));
	assert_ptr_equal(n = look(w->mir, store_root(w->mir), "acme"), t);
	store_node_unref(w->mir, n);
	assert_ptr_equal(n = look(w->mir, p, "keep"), keep);
	store_node_unref(w->mir, n);
	assert_ptr_equal(n = look(w->mir, q, "mv2"), mv);
	store_node_unref(w->mir, n);
	assert_ptr_equal(n = look(w->mir, p, "a"), b);
	store_node_unref(w->mir, n);
	assert_ptr_equal(n = look(w->mir, p, "b"), a);
	store_node_unref(w->mir, n);
	assert_int_equal(store_lookup(w->mir, p, "mv", &n), -ENOENT);
	assert_int_equal(store_lookup(w->mir, p, "gone", &n), -ENOENT);
	assert_ptr_equal(n = look(w->mir, p, "x"), y);
	store_node_unref(w->mir, n);
	assert_ptr_equal(n = look(w->mir, p, "y"), z);
	store_node_unref(w->mir, n);
	assert_ptr_equal(n = look(w->mir, p, "z"), x);
	store_node_unref(w->mir, n);
	assert_ptr_equal(n = look(w->mir, p, "oc"), oc);
	store_node_unref(w->mir, n);
	assert_true(store_node_live(oc));
	n = look(w->mir, t, "old");
	assert_true(n != old);
	assert_int_equal(store_parent_generation(w->mir, n, &ver), 0);
	assert_int_equal(ver, 2);
	store_node_unref(w->mir, n);
	assert_int_equal(store_child_version(w->mir, rw, &ver), 0);
	assert_int_equal(ver, 2);
	assert_int_equal(store_getattr(w->mir, rw, &at), 0);
	assert_int_equal(at.size, 3);
	n = look(w->mir, q, "fresh");
	assert_int_equal(store_node_ino(n), strtoull(fi, NULL, 10));
	store_node_unref(w->mir, n);
	assert_int_equal(store_node_ino(mv), strtoull(mi, NULL, 10));
	/* The same tree as a mirror that loads the dump afresh. */
	fresh = new_mirror(w);
	assert_int_equal(mirror_load_tenant(fresh, 1, dump_of(dump), id, sizeof(id)), 0);
	same_snapshot(fresh, w->mir);
	store_free(fresh);
	assert_int_equal(store_check_all(w->mir, why, sizeof(why)), 0);
	freeReplyObject(dump);
	/* .events: the gap's lines are not known. */
	buf[store_events_read(w->mir, rd, buf, sizeof(buf) - 1)] = '\0';
	assert_string_equal(buf, "overflow\n");
	/* The watch machinery: the difference, as another mount's lines. */
	while ((rc = store_events_next(w->mir, ir, &ev)) != 0) {
		if (rc != 1)
			continue;
		assert_true(ev.internal);
		snprintf(seen + strlen(seen), sizeof(seen) - strlen(seen),
			 "%d:%s/%s ", (int)ev.op, ev.parent, ev.child);
		store_event_free(&ev);
	}
	print_message("lines: %s\n", seen);
	snprintf(buf, sizeof(buf), "%d:p/gone ", (int)STORE_OP_UNLINK);
	assert_non_null(strstr(seen, buf));
	snprintf(buf, sizeof(buf), "%d:p/rw ", (int)STORE_OP_WRITE);
	assert_non_null(strstr(seen, buf));
	snprintf(buf, sizeof(buf), "%d:q/mv2 ", (int)STORE_OP_RENAME);
	assert_non_null(strstr(seen, buf));
	snprintf(buf, sizeof(buf), "%d:q/fresh ", (int)STORE_OP_CREATE);
	assert_non_null(strstr(seen, buf));
	snprintf(buf, sizeof(buf), "%d:old/ ", (int)STORE_OP_LEAVE);
	assert_non_null(strstr(seen, buf));
	snprintf(buf, sizeof(buf), "%d:p/keep ", (int)STORE_OP_WRITE);
	assert_null(strstr(seen, buf));
	store_events_close(rd);
	store_events_close(ir);
	for (struct store_node **v = (struct store_node *[]){ t, p, q, old,
	     keep, rw, mv, gone, a, b, x, y, z, oc, NULL }; *v; v++)
		store_node_unref(w->mir, *v);
}

/* Shells (redis/use.c): a tenant's node alone, from its hash; loaded
 * from its dump, what the embedded store holds; unloaded, a shell again
 * (its node kept); loaded again, the same, with the same numbers. */
static void test_shell_load_unload(void **state)
{
	struct world *w = *state;
	struct store_node *t, *t2;
	redisReply *r;
	char id[64], why[256];

	init(w);
	run_both(w);
	w->mir = new_mirror(w);
	for (int tid = 1; tid <= 2; tid++) {
		r = redisCommand(w->redis.rc, "HGETALL %s", tk(tid));
		assert_int_equal(mirror_shell_tenant(w->mir, (uint64_t)tid,
						     dump_of(r)), 0);
		freeReplyObject(r);
	}
	assert_int_equal(mirror_tenants(w->mir, NULL, 0, true), 2);
	assert_int_equal(mirror_tenants(w->mir, NULL, 0, false), 0);
	t = look(w->mir, store_root(w->mir), "acme");
	for (int round = 0; round < 2; round++) {
		for (int tid = 1; tid <= 2; tid++) {
			r = redisCommand(w->redis.rc, "FCALL_RO sfs_dump 2 %s %s %s %s %s",
					 META, tk(tid), INST, "", "");
			assert_int_equal(mirror_load_tenant(w->mir, (uint64_t)tid,
							    dump_of(r), id, sizeof(id)), 0);
			freeReplyObject(r);
		}
		assert_int_equal(mirror_tenants(w->mir, NULL, 0, true), 0);
		same_snapshot(w->emb, w->mir);
		assert_int_equal(store_check_all(w->mir, why, sizeof(why)), 0);
		mirror_unload_tenant(w->mir, 1);
		mirror_unload_tenant(w->mir, 2);
		assert_int_equal(mirror_tenants(w->mir, NULL, 0, true), 2);
		assert_int_equal(store_check_all(w->mir, why, sizeof(why)), 0);
		/* The node stays, alive: the kernel's handle of it too. */
		t2 = look(w->mir, store_root(w->mir), "acme");
		assert_ptr_equal(t, t2);
		store_node_unref(w->mir, t2);
	}
	store_node_unref(w->mir, t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_apply_equals_embedded,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_load_equals_embedded,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_events_carry_the_store_seq,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_join_after_failed_load,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_gone_tenants_are_freed,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_load_malformed_dump,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_load_dump_past_limits,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_reload_keeps_nodes,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_shell_load_unload,
						setup, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
