/*
 * fuzz_shared.c - differential libFuzzer target: the embedded store
 * against the shared store (docs/shared-store.md, "one contract, two
 * authorities").
 *
 * Each input is one sequence of operations, applied in turn to an
 * embedded store (store_new) and to a mount of a shared store
 * (redis_store_new, on a redis-server this target starts itself), both
 * with the same limits and a manual clock (testclock) that starts at 0
 * on both and moves only in OP_ADVANCE (the embedded store's by hand
 * plus store_reap_due, as fs/ does; the shared store's with
 * store_clock_advance), so every deadline is exact.  The two must agree:
 *
 *   - every call's outcome, as an errno, the lookups that find the
 *     nodes an operation names included, and what it returns beside it
 *     (created or not, the attributes of a setattr, the bytes a read
 *     gives);
 *   - after every step (each side then runs one reaper pass and reads
 *     the drain state of the store and of each tenant, as the daemon's
 *     reaper and a reader of .drain would): the sorted rows of
 *     store_snapshot_take (every tenant, parent, child link and
 *     tombstone, with generations, versions, sizes, link counts, time
 *     left, inode numbers (which must pair up one to one: pair_ino)
 *     and the tenants' owners), store_list of the
 *     root, each tenant and each parent, the attributes (but the
 *     times, wall-clock stamps), lease, generation, version and
 *     content of every node, the counters and gauges of store_stats
 *     (store-wide and per tenant), store_state, store_drain_state
 *     (state and time left) and store_next_deadline.
 *
 * The name space is small so that names collide: tenants t0 t1, parents
 * p0 p1 p2, children c0 c1 c2 c3; the ceilings too (those of
 * fuzz_store.h), so that refusals happen.  Operations (enum op):
 * tenant mkdir/rmdir, join, leave, depart (the removals with no
 * credentials or as another user, so the permission rules of the
 * cascades run), create (excl or not, as one of two owners), one-shot
 * publications (replace, append, compare-and-swap), truncate, chmod,
 * unlink, link, rename (0, NOREPLACE, EXCHANGE, both), set_ttl and
 * renew of parents and children, child_ttl, the clock, drain and
 * drain_now of the store or a tenant, two stages kept across steps
 * (open in any mode, write, truncate, flush, publish, read, close: lost
 * compare-and-swaps, stages of removed children), two parent handles
 * kept across steps (create and list through an earlier incarnation:
 * ESTALE), and operations meaningless at their depth.
 *
 * The shared store.  LLVMFuzzerInitialize starts redis-server (no TCP,
 * no persistence) on a unix socket in a mkdtemp directory
 * (tests/unit/redis/redis_fixture.h); it dies with
 * this process (PR_SET_PDEATHSIG) and is killed, and the directory
 * removed, at exit or before a mismatch aborts (a sanitizer's report or
 * a libFuzzer timeout ends the process without either: the server still
 * dies with it, its empty directory /tmp/statefs-fuzz.* stays).  Each input mounts a
 * fresh store and, once it is unmounted, FLUSHALL empties Redis for the
 * next (the Functions library stays; the next mount finds it).
 *
 * FUZZ_SHARED_CLUSTER=1: the same check on a Redis Cluster of
 * CLUSTER_PRIMARIES primaries instead (tests/unit/redis/
 * cluster_fixture.h: free loopback ports, a directory of its own,
 * redis-cli --cluster create, cluster_state:ok), the shared store a
 * cluster store_remote with them as seeds, in the tenant layout;
 * FLUSHALL on every primary after each input; its nodes stopped as the
 * server is, and a watchdog process (watchdog_start) removes their
 * directory when this one dies without stopping them.  A store-wide
 * ceiling there bounds each tenant alone (docs/design.md, "Ceilings on a
 * cluster"): with two tenants setup() lets the tenant shares bind
 * instead (share_binds).  FUZZ_SHARED_LAYOUT=tenant: the tenant layout
 * on the one server.  FUZZ_SHARED_SKIP=store-drain: no store drain with
 * a window (tests/fuzz/README.md, "Cluster mode", says why).
 *
 * Not covered: more than one mount (the other mounts' changes arrive
 * through the log: test_mirror.c, test_remote_ops.c), Redis failures
 * and timeouts, events, snapshots taken during transitions, setattr of
 * times and owners, allocation failures.
 *
 * A mismatch prints the steps so far, each with the outcomes of both
 * sides ("embedded/shared"), says what differs and aborts, so libFuzzer
 * keeps the input; FUZZ_SHARED_TRACE=1 prints the steps as they run.
 * tests/fuzz/seeds.sh documents the encoding.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "redis/redis.h"
#include "tests/unit/redis/redis_fixture.h"
#include "store/store.h"

#include "tests/fuzz/fuzz_shared.h"

struct fuzz_shared F;

/* Redis ------------------------------------------------------------------- */

/* Cluster mode: the write end of the watchdog's pipe (-1: none). */
static int watchdog_fd = -1;

/* At exit, and before a mismatch aborts. */
static void redis_stop(void)
{
	if (!F.on_cluster) {
		redis_fixture_stop(&F.redis);
		return;
	}
	cluster_fixture_stop(&F.cluster);
	if (watchdog_fd >= 0) {
		/* stopped already: the watchdog has nothing to do */
		if (write(watchdog_fd, "x", 1) != 1)
			perror("fuzz_shared: watchdog");
		close(watchdog_fd);
		watchdog_fd = -1;
	}
}

/*
 * The nodes die with this process (PR_SET_PDEATHSIG), but their
 * directory holds their nodes-PORT.conf: a process of its own, which
 * waits on a pipe, removes it (and kills what is left) when this one
 * ends without stopping the cluster (a sanitizer's report, a libFuzzer
 * timeout or crash, a signal), as libFuzzer's own handlers end the
 * process without running atexit.
 */
static void watchdog_start(void)
{
	int fds[2];
	pid_t pid;

	if (pipe(fds) != 0)
		return;
	pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return;
	}
	if (pid == 0) {
		char c;
		ssize_t n;

		/* a terminal's ^C reaches the whole group: outlive it */
		signal(SIGINT, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		close(fds[1]);
		do
			n = read(fds[0], &c, 1);
		while (n < 0 && errno == EINTR);
		if (n == 0) {
			/* not this process's children: kill, let them go */
			for (unsigned i = 0; i < F.cluster.n; i++)
				if (F.cluster.pid[i] > 0)
					kill(F.cluster.pid[i], SIGKILL);
			nap(200);
			for (unsigned i = 0; i < F.cluster.n; i++)
				F.cluster.pid[i] = 0;
			cluster_fixture_stop(&F.cluster);
		}
		_exit(0);
	}
	close(fds[0]);
	watchdog_fd = fds[1];
	fcntl(watchdog_fd, F_SETFD, FD_CLOEXEC);
}

static void redis_start(void)
{
	F.on_cluster = getenv("FUZZ_SHARED_CLUSTER") &&
		       strcmp(getenv("FUZZ_SHARED_CLUSTER"), "0") != 0;
	if (F.on_cluster) {
		if (cluster_fixture_start(&F.cluster, "fuzz-cluster",
					  CLUSTER_PRIMARIES) != 0) {
			fprintf(stderr, "fuzz_shared: the Redis Cluster did "
				"not start\n");
			exit(1);
		}
		watchdog_start();
	} else if (redis_fixture_start(&F.redis, "fuzz") != 0) {
		fprintf(stderr, "fuzz_shared: redis-server did not start\n");
		exit(1);
	}
	atexit(redis_stop);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	redis_start();
	F.live_trace = getenv("FUZZ_SHARED_TRACE") != NULL;
	F.skip_store_drain = getenv("FUZZ_SHARED_SKIP") &&
			     !strcmp(getenv("FUZZ_SHARED_SKIP"), "store-drain");
	return 0;
}

/* Failing and tracing -------------------------------------------------------- */

#define TRACE_CAP (sizeof(F.trace) / sizeof(F.trace[0]))

void note(const char *fmt, ...)
{
	va_list ap;
	char *line;

	if (F.live_trace && F.ntrace)
		fprintf(stderr, "  %s\n", F.trace[(F.ntrace - 1) % TRACE_CAP]);
	line = F.trace[F.ntrace++ % TRACE_CAP];
	va_start(ap, fmt);
	vsnprintf(line, sizeof(F.trace[0]), fmt, ap);
	va_end(ap);
}

/* Add " what=A/B" to the step's trace line. */
static void note_add(const char *what, long a, long b)
{
	char *line = F.trace[(F.ntrace + TRACE_CAP - 1) % TRACE_CAP];
	size_t used = strlen(line);

	if (F.ntrace && used < sizeof(F.trace[0]))
		snprintf(line + used, sizeof(F.trace[0]) - used, " %s=%ld/%ld",
			 what, a, b);
}

/* An operation FUZZ_SHARED_SKIP leaves out: said in its trace line. */
void note_skip(void)
{
	note_add("skipped", 1, 1);
}

void die(const char *fmt, ...)
{
	size_t from = F.ntrace > TRACE_CAP ? F.ntrace - TRACE_CAP : 0;
	va_list ap;

	fprintf(stderr, "fuzz_shared: mismatch after these steps (clock %"
		PRIu64 " ms; outcomes embedded/shared):\n", F.clock);
	for (size_t i = from; i < F.ntrace; i++)
		fprintf(stderr, "  %s\n", F.trace[i % TRACE_CAP]);
	fprintf(stderr, "fuzz_shared: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	redis_stop();
	abort();
}

/* Both sides' outcomes of one call: noted, and equal. */
void same(const char *what, long a, long b)
{
	note_add(what, a, b);
	if (a != b)
		die("%s: embedded %ld (%s), shared %ld (%s)", what, a,
		    a < 0 ? strerror((int)-a) : "ok", b,
		    b < 0 ? strerror((int)-b) : "ok");
}

/*
 * Inode numbers.  The two authorities need not number alike (the
 * embedded store may spend a number on an admission it then refuses),
 * but identity must agree: the same node has one number on each side
 * for its whole life, a link shows its state's number, and a new
 * incarnation gets a number never seen before, on both sides or on
 * neither.  So the numbers pair up one to one for the whole input, and
 * the descriptions show a shared-store number as the embedded number it
 * pairs with.
 */
void pair_ino(const char *what, uint64_t a, uint64_t b, bool traced)
{
	if (traced)
		note_add(what, (long)a, (long)b);
	for (size_t k = 0; k < F.npair; k++) {
		if (F.pair[k][0] == a && F.pair[k][1] == b)
			return;
		if (F.pair[k][0] == a || F.pair[k][1] == b)
			die("%s: embedded inode %" PRIu64 " goes with shared %"
			    PRIu64 " now, but embedded %" PRIu64 " went with "
			    "shared %" PRIu64 " before", what, a, b,
			    F.pair[k][0], F.pair[k][1]);
	}
	if (F.npair == MAX_PAIRS)
		die("more than %d inodes", MAX_PAIRS);
	F.pair[F.npair][0] = a;
	F.pair[F.npair][1] = b;
	F.npair++;
}

/* @ino as side @i shows it: the embedded number it pairs with. */
int64_t ino_as(int i, int64_t ino)
{
	if (i == EMB || ino < 0)
		return ino;
	for (size_t k = 0; k < F.npair; k++)
		if (F.pair[k][1] == (uint64_t)ino)
			return (int64_t)F.pair[k][0];
	/* unpaired: shown apart, so it differs */
	return -1000000 - ino;
}

/* Input ----------------------------------------------------------------------- */

unsigned next_byte(void)
{
	return F.pos < F.len ? F.in[F.pos++] : 0;
}

struct path next_path(void)
{
	unsigned b = next_byte();
	struct path p = { (int)(b & 1), (int)((b >> 1) & 3) % NP,
			  (int)((b >> 3) & 3), (int)(b >> 5) };

	return p;
}

/* Nodes ------------------------------------------------------------------------ */

/* Find @depth levels of @p (1 tenant, 2 parent, 3 child) on side @i: 0
 * and a new reference in *@out, or the failing lookup's errno. */
static int find_one(int i, const struct path *p, int depth,
		    struct store_node **out)
{
	struct store *s = F.d[i].s;
	const char *names[3] = { TN[p->t], PN[p->p], CN[p->c] };
	struct store_node *n = store_root(s), *next;
	int rc = 0;

	store_node_ref(n);
	for (int k = 0; k < depth && rc == 0; k++) {
		rc = store_lookup(s, n, names[k], &next);
		store_node_unref(s, n);
		n = rc == 0 ? next : NULL;
	}
	*out = n;
	return rc;
}

/* Find on both sides; false (both NULL) unless both found it. */
bool find(const struct path *p, int depth, struct store_node *n[2])
{
	int a = find_one(EMB, p, depth, &n[0]);
	int b = find_one(SHR, p, depth, &n[1]);

	same("lookup", a, b);
	return a == 0;
}

void unref2(struct store_node *n[2])
{
	for (int i = 0; i < 2; i++)
		if (n[i])
			store_node_unref(F.d[i].s, n[i]);
}

/* One input ------------------------------------------------------------------------ */

static uint64_t clock_now(void *arg)
{
	return *(uint64_t *)arg;
}

/* Ceiling @max with tenant share @share (0: none), for @tenants
 * tenants: the share (at most the ceiling) stays, the ceiling goes past
 * what the tenants can hold together, so it refuses nothing. */
static void share_binds(uint64_t *max, uint64_t *share, uint64_t tenants)
{
	if (*share == 0 || *share > *max)
		*share = *max;
	*max = tenants * *share + 1;
}

/*
 * The configuration byte picks, as fuzz_store.c's does: bit 0 a
 * default_ttl of 700 ms, bit 1 a tenant_quota of 5, bit 2 max_tenants 1
 * (else 2), bit 3 no tenant shares (else half of each ceiling).
 */
static void setup(unsigned config)
{
	static const struct store_clock clock = { clock_now, &F.clock };
	struct store_limits l;
	struct store_remote r;
	char err[512];
	int rc;

	store_limits_default(&l);
	l.max_tenants = config & 4 ? 1 : 2;
	l.max_parents = 4;
	l.max_children = 6;
	l.max_tombstones = 2;
	l.parent_quota = 3;
	l.tenant_quota = config & 2 ? 5 : 0;
	l.max_payload = MAX_PAYLOAD;
	l.max_bytes = 16;
	l.tombstone_ttl_ms = 1000;
	l.drain_window_ms = 500;
	l.default_ttl_ms = config & 1 ? 700 : 0;
	l.testclock = true;
	l.event_log = 64;
	if (config & 8) {
		l.tenant_max_parents = 0;
		l.tenant_max_children = 0;
		l.tenant_max_bytes = 0;
		l.tenant_max_tombstones = 0;
	}
	if (F.on_cluster && l.max_tenants > 1) {
		/* On a cluster a store-wide ceiling bounds each tenant as if
		 * it were the store alone (docs/design.md, "Ceilings on a
		 * cluster"): the share binds instead, on both sides alike. */
		share_binds(&l.max_parents, &l.tenant_max_parents, l.max_tenants);
		share_binds(&l.max_children, &l.tenant_max_children,
			    l.max_tenants);
		share_binds(&l.max_bytes, &l.tenant_max_bytes, l.max_tenants);
		share_binds(&l.max_tombstones, &l.tenant_max_tombstones,
			    l.max_tenants);
	}
	F.clock = 0;
	rc = store_new(&l, &clock, &F.d[EMB].s);
	if (rc != 0)
		die("store_new: %d", rc);
	store_remote_default(&r);
	if (F.on_cluster) {
		/* every primary a seed; a store made there is made in the
		 * tenant layout (each tenant's calls on its slot's primary) */
		r.kind = STORE_REMOTE_CLUSTER;
		for (unsigned k = 0; k < F.cluster.n; k++) {
			snprintf(r.sentinels[k].host,
				 sizeof(r.sentinels[k].host), "127.0.0.1");
			r.sentinels[k].port = F.cluster.port[k];
		}
		r.nsentinels = F.cluster.n;
		r.layout_tenant = true;
	} else {
		r.kind = STORE_REMOTE_UNIX;
		snprintf(r.path, sizeof(r.path), "%s", F.redis.sock);
		/* FUZZ_SHARED_LAYOUT=tenant: the cluster's layout on one
		 * server (which of the two a divergence needs) */
		r.layout_tenant = getenv("FUZZ_SHARED_LAYOUT") &&
				  !strcmp(getenv("FUZZ_SHARED_LAYOUT"), "tenant");
	}
	r.timeout_ms = 60000;
	/* The engine alone, with no kernel to say what it uses (and a test
	 * clock the operations move by hours): every tenant followed, as
	 * the embedded store holds every tenant. */
	r.follow_idle_ms = 0;
	rc = redis_store_new(&l, &r, &F.d[SHR].s, err, sizeof(err));
	if (rc != 0)
		die("redis_store_new: %d: %s", rc, err);
}

static void teardown(void)
{
	redisReply *rep;

	for (int i = 0; i < 2; i++) {
		for (int k = 0; k < NSTAGE; k++)
			if (F.d[i].stage[k])
				store_stage_close(F.d[i].stage[k]);
		for (int k = 0; k < NHANDLE; k++)
			if (F.d[i].handle[k])
				store_node_unref(F.d[i].s, F.d[i].handle[k]);
		store_free(F.d[i].s);
	}
	memset(F.d, 0, sizeof(F.d));
	/* The next input finds an empty store (the library stays): on a
	 * cluster, every primary emptied. */
	for (unsigned k = 0; k < (F.on_cluster ? F.cluster.n : 1); k++) {
		redisContext *c = F.on_cluster ? F.cluster.rc[k] : F.redis.rc;

		rep = redisCommand(c, "FLUSHALL SYNC");
		if (!rep || rep->type == REDIS_REPLY_ERROR)
			die("FLUSHALL: %s", rep ? rep->str : c->errstr);
		freeReplyObject(rep);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	F.in = data;
	F.len = size;
	F.pos = 1;
	F.ntrace = 0;
	F.npair = 0;
	setup(data[0]);
	verify();
	for (int n = 0; n < MAX_OPS && F.pos < F.len; n++) {
		run_op();
		fz_settle();
		verify();
	}
	teardown();
	return 0;
}
