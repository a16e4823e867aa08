/*
 * stress_replay.c - the event stream of a workload of every transition,
 * read while it runs, replays to the store it left.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "fs/inode.h"
#include "redis/mirror.h"
#include "store/store.h"
#include "tests/unit/unit.h"
#include "tests/unit/stress/stress.h"

/* The event stream replays to the store ------------------------------------- */

/*
 * RW threads run every kind of transition on a few names of one tenant
 * (admissions, publications, truncations, unlinks, links, renames,
 * NOREPLACE renames and exchanges, leaves, departs, rejoins, parent and
 * child leases, tenant cleanups) while one thread reaps and one reads the
 * event log.  Publications look their child up first, so they race the
 * leave, depart, expiry or cleanup that takes it away.  Afterwards the
 * lines are replayed on a model of the tree: every line must apply (a
 * child line names a live parent of its generation, a write or a removal
 * a present child, a create, link or rename a free destination, a link's
 * or rename's source a present child, versions follow the state's
 * publications), and the model must end as the store: the same names,
 * the same generations, the names that share a state in the model share
 * one in the store, with its version.
 */
#define RW 4
#define RPN 4
#define RCN 5
#define RSTATES (1 << 20)

static const char *const RPAR[RPN] = { "P0", "P1", "P2", "P3" };
static const char *const RCHI[RCN] = { "c0", "c1", "c2", "c3", "c4" };

struct rrun {
	struct store *s;
	uint64_t clk;
	int iters;
	int stop_reaper, stop_reader;    /* atomics */
	struct store_event_reader *r;    /* the reader thread's */
	char *ev;                        /* what it read */
	size_t evlen, evcap;
	long ops[8];                     /* successful calls, by kind */
};

struct rworker {
	struct rrun *r;
	unsigned seed;
};

static void rrc(const char *what, int rc, int ok1, int ok2, int ok3, int ok4)
{
	if (rc != 0 && rc != -ok1 && rc != -ok2 && rc != -ok3 && rc != -ok4)
		failf("replay worker: %s returned %d (%s)", what, rc,
		      strerror(-rc));
}

/* The node at @depth (1 tenant, 2 parent, 3 child) of the path, or NULL. */
static struct store_node *rlookup(struct rrun *r, int depth, int pi, int ci)
{
	struct store_node *t = NULL, *p = NULL, *c = NULL;

	if (store_lookup(r->s, store_root(r->s), "rt", &t) != 0)
		return NULL;
	if (depth == 1)
		return t;
	if (store_lookup(r->s, t, RPAR[pi], &p) != 0) {
		store_node_unref(r->s, t);
		return NULL;
	}
	store_node_unref(r->s, t);
	if (depth == 2)
		return p;
	if (store_lookup(r->s, p, RCHI[ci], &c) != 0)
		c = NULL;
	store_node_unref(r->s, p);
	return c;
}

static void replay_op(struct rworker *w)
{
	struct rrun *r = w->r;
	struct store *s = r->s;
	unsigned op = (unsigned)rand_r(&w->seed) % 1000;
	int pi = rand_r(&w->seed) % RPN, qi = rand_r(&w->seed) % RPN;
	int ci = rand_r(&w->seed) % RCN, di = rand_r(&w->seed) % RCN;
	struct store_node *n, *m;
	int rc;

	if (op < 300) {                                 /* publication */
		struct store_stage *st = NULL;
		bool app = rand_r(&w->seed) % 2;

		n = rlookup(r, 3, pi, ci);
		if (!n)
			return;
		sched_yield(); /* let a cascade start meanwhile */
		rc = store_stage_open(s, n, app ? STORE_STAGE_APPEND :
						  STORE_STAGE_REPLACE, &st);
		rrc("stage_open", rc, ESTALE, 0, 0, 0);
		if (rc == 0) {
			ssize_t k = store_stage_write(st, "abcd", 4, 0);

			rc = k < 0 ? (int)k : store_stage_publish(st);
			rrc("publish", rc, ESTALE, EFBIG, 0, 0);
			store_stage_close(st);
		}
		store_node_unref(s, n);
	} else if (op < 330) {                          /* truncation */
		struct store_attr in = { .size = 2 }, out;

		n = rlookup(r, 3, pi, ci);
		if (!n)
			return;
		rc = store_setattr(s, n, STORE_SET_SIZE, &in, &out);
		rrc("truncate", rc, ESTALE, 0, 0, 0);
		store_node_unref(s, n);
	} else if (op < 480) {                          /* admission */
		bool created = false;

		n = rlookup(r, 2, pi, 0);
		if (!n)
			return;
		rc = store_create(s, n, RCHI[ci], &FOWN, true, &m, &created);
		rrc("create", rc, EEXIST, ESTALE, 0, 0);
		if (rc == 0)
			store_node_unref(s, m);
		store_node_unref(s, n);
	} else if (op < 540) {                          /* unlink */
		n = rlookup(r, 2, pi, 0);
		if (!n)
			return;
		rc = store_unlink(s, n, RCHI[ci]);
		rrc("unlink", rc, ENOENT, ESTALE, 0, 0);
		store_node_unref(s, n);
	} else if (op < 640) {                          /* link */
		n = rlookup(r, 3, pi, ci);
		m = n ? rlookup(r, 2, qi, 0) : NULL;
		if (m) {
			rc = store_link(s, n, m, RCHI[di]);
			rrc("link", rc, EEXIST, ESTALE, 0, 0);
			store_node_unref(s, m);
		}
		if (n)
			store_node_unref(s, n);
	} else if (op < 760) {                          /* rename */
		static const unsigned flags[] = {
			0, 0, STORE_RENAME_NOREPLACE, STORE_RENAME_EXCHANGE
		};

		n = rlookup(r, 2, pi, 0);
		m = n ? rlookup(r, 2, qi, 0) : NULL;
		if (m) {
			rc = store_rename(s, n, RCHI[ci], m, RCHI[di],
					  flags[rand_r(&w->seed) % 4]);
			rrc("rename", rc, ENOENT, EEXIST, ESTALE, 0);
			store_node_unref(s, m);
		}
		if (n)
			store_node_unref(s, n);
	} else if (op < 840) {                          /* join */
		n = rlookup(r, 1, 0, 0);
		if (!n)
			return;
		rc = store_mkdir(s, n, RPAR[pi], &DOWN, &m);
		rrc("mkdir", rc, EEXIST, ESTALE, 0, 0);
		if (rc == 0)
			store_node_unref(s, m);
		store_node_unref(s, n);
	} else if (op < 860) {                          /* leave */
		n = rlookup(r, 1, 0, 0);
		if (!n)
			return;
		rc = store_rmdir(s, n, RPAR[pi], NULL);
		rrc("rmdir", rc, ENOENT, ESTALE, 0, 0);
		store_node_unref(s, n);
	} else if (op < 875) {                          /* depart */
		n = rlookup(r, 1, 0, 0);
		if (!n)
			return;
		rc = store_depart(s, n, RPAR[pi], NULL);
		rrc("depart", rc, ESTALE, 0, 0, 0);
		store_node_unref(s, n);
	} else if (op < 900) {                          /* leases */
		bool parent = rand_r(&w->seed) % 4 == 0;

		n = rlookup(r, parent ? 2 : 3, pi, ci);
		if (!n)
			return;
		rc = store_set_ttl(s, n, 1 + (unsigned)rand_r(&w->seed) % 20);
		rrc("set_ttl", rc, ESTALE, 0, 0, 0);
		store_node_unref(s, n);
	} else if (op < 995) {
		atomic_clock_advance(&r->clk, 1);
	} else if (op < 996) {                          /* tenant cleanup */
		rc = store_rmdir(s, store_root(s), "rt", NULL);
		rrc("cleanup", rc, ENOENT, 0, 0, 0);
	} else {                                        /* tenant again */
		rc = store_mkdir(s, store_root(s), "rt", &DOWN, &m);
		rrc("tenant mkdir", rc, EEXIST, 0, 0, 0);
		if (rc == 0)
			store_node_unref(s, m);
	}
}

static void *replay_worker(void *arg)
{
	struct rworker *w = arg;

	for (int i = 0; i < w->r->iters; i++)
		replay_op(w);
	return NULL;
}

static void *replay_reaper(void *arg)
{
	struct rrun *r = arg;

	while (!__atomic_load_n(&r->stop_reaper, __ATOMIC_ACQUIRE))
		if (!store_expire(r->s, 4))
			sched_yield();
	return NULL;
}

/* Read whatever is pending into r->ev; returns the bytes read. */
static size_t replay_read(struct rrun *r)
{
	return read_pending(r->s, r->r, &r->ev, &r->evlen, &r->evcap);
}

static void *replay_reader(void *arg)
{
	struct rrun *r = arg;

	while (!__atomic_load_n(&r->stop_reader, __ATOMIC_ACQUIRE))
		if (!replay_read(r))
			sched_yield();
	return NULL;
}

/* The tree the lines describe: state ids (0: no child) and versions. */
struct rmodel {
	bool tenant;
	bool parent[RPN];
	long gen[RPN];
	uint32_t state[RPN][RCN];
	int64_t *version;              /* by state id */
	uint32_t nstates;
	long lines;
	long by_op[16];                /* lines, by enum store_op */
};

static const char *const ROPS[] = {
	"join", "leave", "depart", "create", "write", "unlink", "link",
	"rename", "expire", "drain", "cleanup", "exchange",
};
#define RNOPS (int)(sizeof ROPS / sizeof ROPS[0])

static int rname_index(const char *const *names, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return i;
	return -1;
}

static void rparent_clear(struct rmodel *md, int pi)
{
	md->parent[pi] = false;
	memset(md->state[pi], 0, sizeof md->state[pi]);
}

/* Apply one line (fields split); fails the test when it cannot apply. */
static void replay_line(struct rmodel *md, char **f, int nf, const char *line)
{
	const char *op = f[1];
	int pi = rname_index(RPAR, RPN, f[3]), ci = rname_index(RCHI, RCN, f[4]);
	long g = strcmp(f[5], "-") ? atol(f[5]) : -1;
	int64_t v = strcmp(f[6], "-") ? atoll(f[6]) : -1;
	bool from = !strcmp(op, "link") || !strcmp(op, "rename") ||
		    !strcmp(op, "exchange");
	int fpi = from ? rname_index(RPAR, RPN, f[7]) : -1;
	int fci = from ? rname_index(RCHI, RCN, f[8]) : -1;
	uint32_t *x, *y;

	if (nf != (from ? 9 : 7) || strcmp(f[2], "rt") != 0 ||
	    rname_index(ROPS, RNOPS, op) < 0)
		fail_msg("bad line: %s", line);
	md->lines++;
	md->by_op[rname_index(ROPS, RNOPS, op)]++;
	if (!strcmp(op, "cleanup")) {
		if (!md->tenant)
			fail_msg("cleanup of an absent tenant: %s", line);
		md->tenant = false;
		for (int i = 0; i < RPN; i++)
			rparent_clear(md, i);
		return;
	}
	if (!strcmp(op, "join") && !strcmp(f[3], "-")) {
		if (md->tenant)
			fail_msg("join of a present tenant: %s", line);
		md->tenant = true;
		return;
	}
	if (!md->tenant || pi < 0)
		fail_msg("a line of an absent tenant or unknown parent: %s",
			 line);
	if (ci < 0) { /* a parent's line */
		if (strcmp(f[4], "-"))
			fail_msg("unknown child: %s", line);
		if (!strcmp(op, "join")) {
			if (md->parent[pi] || g < 1)
				fail_msg("join of a present parent: %s", line);
			md->parent[pi] = true;
			md->gen[pi] = g;
		} else if (!strcmp(op, "leave") || !strcmp(op, "expire") ||
			   !strcmp(op, "depart")) {
			if (md->parent[pi] && md->gen[pi] != g)
				fail_msg("removal of another generation: %s",
					 line);
			if (!md->parent[pi] && op[0] != 'd')
				fail_msg("%s of an absent parent: %s", op,
					 line);
			rparent_clear(md, pi);
		} else {
			fail_msg("unexpected line: %s", line);
		}
		return;
	}
	/* A child's line: its parent is present, of that generation. */
	if (!md->parent[pi] || md->gen[pi] != g)
		fail_msg("a child line of an absent parent (or of another "
			 "generation): %s", line);
	x = &md->state[pi][ci];
	if (from && (fpi < 0 || fci < 0 || !md->parent[fpi]))
		fail_msg("a source in an absent parent: %s", line);
	y = from ? &md->state[fpi][fci] : NULL;
	if (!strcmp(op, "create")) {
		if (*x || v != 0)
			fail_msg("create of a present child: %s", line);
		if (md->nstates + 1 >= RSTATES)
			fail_msg("too many states");
		*x = ++md->nstates;
		md->version[*x] = 0;
	} else if (!strcmp(op, "write")) {
		if (!*x)
			fail_msg("write of an absent child: %s", line);
		/* One line per name of the state, all with its new version. */
		if (v != md->version[*x] + 1 && v != md->version[*x])
			fail_msg("write of version %lld after %lld: %s",
				 (long long)v, (long long)md->version[*x],
				 line);
		md->version[*x] = v;
	} else if (!strcmp(op, "unlink") || !strcmp(op, "expire")) {
		if (!*x || md->version[*x] != v)
			fail_msg("%s of an absent child (or another version): "
				 "%s", op, line);
		*x = 0;
	} else if (!strcmp(op, "link") || !strcmp(op, "rename")) {
		if (*x || !*y || md->version[*y] != v)
			fail_msg("%s onto a present child, from an absent "
				 "one, or of another version: %s", op, line);
		*x = *y;
		if (op[0] == 'r')
			*y = 0;
	} else if (!strcmp(op, "exchange")) {
		uint32_t tmp;

		if (!*x || !*y)
			fail_msg("exchange with an absent child: %s", line);
		tmp = *x;
		*x = *y;
		*y = tmp;
		if (md->version[*x] != v)
			fail_msg("exchange: version %lld, model %lld: %s",
				 (long long)v, (long long)md->version[*x],
				 line);
	} else {
		fail_msg("unexpected line: %s", line);
	}
}

static void replay_lines(struct rmodel *md, char *text)
{
	char *line = text;

	while (*line) {
		char *nl = strchr(line, '\n'), *f[10], *save = NULL, *tok;
		char copy[256];
		int nf = 0;

		assert_non_null(nl);
		*nl = '\0';
		if (strcmp(line, "overflow") == 0 || !strncmp(line, "lost", 4))
			fail_msg("the event reader lost lines: %s", line);
		snprintf(copy, sizeof copy, "%s", line);
		for (tok = strtok_r(line, "\t", &save); tok && nf < 10;
		     tok = strtok_r(NULL, "\t", &save))
			f[nf++] = tok;
		if (nf < 7)
			fail_msg("bad line: %s", copy);
		replay_line(md, f, nf, copy);
		line = nl + 1;
	}
}

/* The model ends as the store is. */
static void replay_compare(struct rrun *r, const struct rmodel *md)
{
	uint64_t *ino = calloc(md->nstates + 1, sizeof *ino);
	struct store_node *t = rlookup(r, 1, 0, 0);

	assert_non_null(ino);
	assert_int_equal(t != NULL, md->tenant);
	for (int i = 0; t && i < RPN; i++) {
		struct store_node *p = rlookup(r, 2, i, 0);
		uint64_t g = 0;

		if ((p != NULL) != md->parent[i])
			fail_msg("%s: %s, the events say %s", RPAR[i],
				 p ? "present" : "absent",
				 md->parent[i] ? "present" : "absent");
		if (!p)
			continue;
		assert_int_equal(store_parent_generation(r->s, p, &g), 0);
		assert_int_equal(g, md->gen[i]);
		for (int k = 0; k < RCN; k++) {
			struct store_node *c = rlookup(r, 3, i, k);
			uint32_t id = md->state[i][k];
			uint64_t v = 0;

			if ((c != NULL) != (id != 0))
				fail_msg("%s/%s: %s, the events say %s",
					 RPAR[i], RCHI[k],
					 c ? "present" : "absent",
					 id ? "present" : "absent");
			if (!c)
				continue;
			if (!ino[id])
				ino[id] = store_node_ino(c);
			if (ino[id] != store_node_ino(c))
				fail_msg("%s/%s: not the state the events "
					 "say", RPAR[i], RCHI[k]);
			assert_int_equal(store_child_version(r->s, c, &v), 0);
			assert_int_equal((int64_t)v, md->version[id]);
			store_node_unref(r->s, c);
		}
		store_node_unref(r->s, p);
	}
	/* One inode, one state. */
	for (uint32_t a = 1; a <= md->nstates; a++)
		for (uint32_t b = a + 1; ino[a] && b <= md->nstates; b++)
			if (ino[a] == ino[b])
				fail_msg("states %u and %u are one inode", a,
					 b);
	if (t)
		store_node_unref(r->s, t);
	free(ino);
}

static void test_events_replay(void **state)
{
	struct store_limits l;
	struct rrun r;
	struct rworker w[RW];
	struct rmodel md;
	pthread_t th[RW], reap_th, rd_th;
	struct store_node *t;

	failures_reset();
	store_limits_default(&l);
	l.max_payload = 64;             /* appends are refused: EFBIG */
	memset(&r, 0, sizeof r);
	memset(&md, 0, sizeof md);
	md.version = calloc(RSTATES, sizeof *md.version);
	assert_non_null(md.version);
	r.clk = 5000;
	r.iters = mixed_iters() / 2;
	r.s = new_store(&l, &r.clk);
	/* Read everything, or overflow. */
	assert_int_equal(store_events_open(r.s, NULL, NULL,
					   STORE_EVENTS_WHOLE_LOG, &r.r), 0);
	t = mkdir_or_fail(r.s, store_root(r.s), "rt");
	store_node_unref(r.s, t);

	assert_int_equal(pthread_create(&rd_th, NULL, replay_reader, &r), 0);
	assert_int_equal(pthread_create(&reap_th, NULL, replay_reaper, &r), 0);
	for (int i = 0; i < RW; i++) {
		w[i].r = &r;
		w[i].seed = seed_base() + 15485863u * (unsigned)i;
		assert_int_equal(pthread_create(&th[i], NULL, replay_worker,
						&w[i]), 0);
	}
	for (int i = 0; i < RW; i++)
		pthread_join(th[i], NULL);
	__atomic_store_n(&r.stop_reaper, 1, __ATOMIC_RELEASE);
	pthread_join(reap_th, NULL);
	__atomic_store_n(&r.stop_reader, 1, __ATOMIC_RELEASE);
	pthread_join(rd_th, NULL);
	assert_no_failures();
	check_all_ok(r.s);

	/* The clock stands still: reap what is due, then compare. */
	while (store_expire(r.s, 64))
		;
	replay_read(&r);
	replay_lines(&md, r.ev);
	printf("# replay: %d threads x %d ops, %ld lines, %u states:", RW,
	       r.iters, md.lines, md.nstates);
	for (int i = 0; i < RNOPS; i++)
		printf(" %s %ld", ROPS[i], md.by_op[i]);
	printf("\n");
	replay_compare(&r, &md);
	check_all_ok(r.s);

	free(md.version);
	free(r.ev);
	store_events_close(r.r);
	store_free(r.s);
}

const struct CMUnitTest stress_replay_tests[] = {
	cmocka_unit_test(test_events_replay),
};
const size_t stress_replay_ntests = sizeof(stress_replay_tests) / sizeof(stress_replay_tests[0]);
