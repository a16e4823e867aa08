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
 * fuzz_store.c), so that refusals happen.  Operations (enum op):
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

#define NT 2
#define NP 3
#define NC 4
#define NSTAGE 2
#define NHANDLE 2
#define MAX_OPS 128
#define MAX_PAYLOAD 8
#define TEXT_MAX 16384
#define MAX_PAIRS 1024

static const char *const TN[NT] = { "t0", "t1" };
static const char *const PN[NP] = { "p0", "p1", "p2" };
static const char *const CN[NC] = { "c0", "c1", "c2", "c3" };

static const uint64_t TTLS[8] = { 0, 1, 100, 250, 500, 700, 1000, 2000 };
static const uint64_t ADVANCES[8] = { 1, 50, 99, 100, 250, 500, 1000, 3000 };
static const uint64_t OFFSETS[8] = { 0, 0, 1, 2, 4, 7, 9, 1u << 20 };
static const mode_t MODES[8] = { 0755, 0700, 0777, 01777, 0500, 0311, 0644, 0 };

static const struct store_owner OWNERS[2] = {
	{ 1000, 1000, 0755 },
	{ 2000, 2000, 01777 },
};
/* Who removes: nobody checked, the first owner, another user. */
static const struct store_cred CREDS[3] = {
	{ 0, 0, NULL, 0 }, { 1000, 1000, NULL, 0 }, { 2000, 2000, NULL, 0 },
};

#define EMB 0
#define SHR 1
static const char *const SIDE[2] = { "embedded", "shared" };

/* One authority and what the input keeps open on it. */
struct side {
	struct store *s;
	struct store_stage *stage[NSTAGE];
	struct store_node *handle[NHANDLE];
};

static struct {
	/* the redis-server of this process */
	struct redis_fixture redis;
	/* the current input */
	struct side d[2];
	uint64_t clock;                /* the embedded store's clock */
	const uint8_t *in;
	size_t len, pos;
	char trace[MAX_OPS * 2][128];
	size_t ntrace;
	bool live_trace;
	char text[2][TEXT_MAX];        /* what verify() compares */
	/* Inode identity: pair[k] = { embedded ino, shared ino } */
	uint64_t pair[MAX_PAIRS][2];
	size_t npair;
} F;

/* Redis ------------------------------------------------------------------- */

/* At exit, and before a mismatch aborts. */
static void redis_stop(void)
{
	redis_fixture_stop(&F.redis);
}

static void redis_start(void)
{
	if (redis_fixture_start(&F.redis, "fuzz") != 0) {
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
	return 0;
}

/* Failing and tracing -------------------------------------------------------- */

#define TRACE_CAP (sizeof(F.trace) / sizeof(F.trace[0]))

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void note(const char *fmt, ...)
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

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
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
static void same(const char *what, long a, long b)
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
static void pair_ino(const char *what, uint64_t a, uint64_t b, bool traced)
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
static int64_t ino_as(int i, int64_t ino)
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

static unsigned next_byte(void)
{
	return F.pos < F.len ? F.in[F.pos++] : 0;
}

/* A path byte: tenant bit 0, parent bits 1-2, child bits 3-4, extra 5-7. */
struct path {
	int t, p, c, x;
};

static struct path next_path(void)
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
static bool find(const struct path *p, int depth, struct store_node *n[2])
{
	int a = find_one(EMB, p, depth, &n[0]);
	int b = find_one(SHR, p, depth, &n[1]);

	same("lookup", a, b);
	return a == 0;
}

static void unref2(struct store_node *n[2])
{
	for (int i = 0; i < 2; i++)
		if (n[i])
			store_node_unref(F.d[i].s, n[i]);
}

/* Operations ------------------------------------------------------------------- */

enum op {
	OP_MKDIR_T = 0, OP_RMDIR_T, OP_JOIN, OP_LEAVE, OP_DEPART, OP_CREATE,
	OP_PUBLISH, OP_TRUNCATE, OP_UNLINK, OP_LINK, OP_RENAME, OP_SET_TTL,
	OP_RENEW, OP_CHILD_TTL, OP_ADVANCE, OP_DRAIN, OP_STAGE_OPEN,
	OP_STAGE_WRITE, OP_STAGE_PUBLISH, OP_STAGE_READ, OP_STAGE_CLOSE,
	OP_STAGE_TRUNCATE, OP_STAGE_FLUSH, OP_HANDLE, OP_HANDLE_CREATE,
	OP_HANDLE_LIST, OP_CHMOD, OP_WRONG_DEPTH, NOPS
};

static const char *const OPNAME[NOPS] = {
	"mkdir-tenant", "rmdir-tenant", "join", "leave", "depart", "create",
	"publish", "truncate", "unlink", "link", "rename", "set-ttl", "renew",
	"child-ttl", "advance", "drain", "stage-open", "stage-write",
	"stage-publish", "stage-read", "stage-close", "stage-truncate",
	"stage-flush", "handle", "handle-create", "handle-list", "chmod",
	"wrong-depth",
};

static const struct store_cred *cred_of(int x)
{
	return x % 3 ? &CREDS[x % 3] : NULL;
}

/* Attributes that two authorities must agree on (not the times). */
static void same_attr(const char *what, const struct store_attr *a,
		      const struct store_attr *b)
{
	char w[64];

	snprintf(w, sizeof(w), "%s.ino", what);
	pair_ino(w, a->ino, b->ino, true);
	snprintf(w, sizeof(w), "%s.mode", what);
	same(w, (long)a->mode, (long)b->mode);
	snprintf(w, sizeof(w), "%s.uid", what);
	same(w, (long)a->uid, (long)b->uid);
	snprintf(w, sizeof(w), "%s.gid", what);
	same(w, (long)a->gid, (long)b->gid);
	snprintf(w, sizeof(w), "%s.nlink", what);
	same(w, (long)a->nlink, (long)b->nlink);
	snprintf(w, sizeof(w), "%s.size", what);
	same(w, (long)a->size, (long)b->size);
}

static void op_mkdir(const struct path *p, int depth)
{
	struct store_node *dir[2], *out[2] = { NULL, NULL };
	struct store_attr at[2];
	int rc[2];

	if (!find(p, depth - 1, dir))
		return;
	for (int i = 0; i < 2; i++)
		rc[i] = store_mkdir_entry(F.d[i].s, dir[i],
					  depth == 1 ? TN[p->t] : PN[p->p],
					  &OWNERS[p->x & 1], &out[i], &at[i]);
	same("mkdir", rc[0], rc[1]);
	if (rc[0] == 0)
		same_attr("attr", &at[0], &at[1]);
	unref2(out);
	unref2(dir);
}

static void op_remove(int op, const struct path *p)
{
	struct store_node *dir[2];
	int rc[2];

	if (!find(p, op == OP_RMDIR_T ? 0 : 1, dir))
		return;
	for (int i = 0; i < 2; i++) {
		struct store *s = F.d[i].s;

		if (op == OP_DEPART)
			rc[i] = store_depart(s, dir[i], PN[p->p], cred_of(p->x));
		else
			rc[i] = store_rmdir(s, dir[i], op == OP_RMDIR_T ?
					    TN[p->t] : PN[p->p], cred_of(p->x));
	}
	same(OPNAME[op], rc[0], rc[1]);
	unref2(dir);
}

static void op_create(const struct path *p)
{
	struct store_node *dir[2], *out[2] = { NULL, NULL };
	struct store_attr at[2];
	bool created[2] = { false, false };
	int rc[2];

	if (!find(p, 2, dir))
		return;
	for (int i = 0; i < 2; i++)
		rc[i] = store_create_entry(F.d[i].s, dir[i], CN[p->c],
					   &OWNERS[(p->x >> 1) & 1], p->x & 1,
					   &out[i], &created[i], &at[i]);
	same("create", rc[0], rc[1]);
	if (rc[0] == 0) {
		same("created", created[0], created[1]);
		same_attr("attr", &at[0], &at[1]);
	}
	unref2(out);
	unref2(dir);
}

/* Open a stage on both, write @len bytes of the input at @off, publish,
 * close: one open-write-close. */
static void op_publish(const struct path *p)
{
	static const enum store_stage_mode modes[4] = {
		STORE_STAGE_REPLACE, STORE_STAGE_APPEND, STORE_STAGE_CAS,
		STORE_STAGE_CAS,
	};
	enum store_stage_mode mode = modes[p->x & 3];
	uint64_t off = mode == STORE_STAGE_CAS ? OFFSETS[p->x & 7] : 0;
	size_t len = next_byte() % (MAX_PAYLOAD + 2);
	uint8_t buf[MAX_PAYLOAD + 2];
	struct store_node *n[2];
	struct store_stage *st[2] = { NULL, NULL };
	int rc[2];

	for (size_t k = 0; k < len; k++)
		buf[k] = (uint8_t)next_byte();
	if (!find(p, 3, n))
		return;
	for (int i = 0; i < 2; i++)
		rc[i] = store_stage_open(F.d[i].s, n[i], mode, &st[i]);
	same("open", rc[0], rc[1]);
	if (rc[0] == 0) {
		for (int i = 0; i < 2; i++)
			rc[i] = (int)store_stage_write(st[i], buf, len, off);
		same("write", rc[0], rc[1]);
		for (int i = 0; i < 2; i++)
			rc[i] = store_stage_publish(st[i]);
		same("publish", rc[0], rc[1]);
	}
	for (int i = 0; i < 2; i++)
		if (st[i])
			store_stage_close(st[i]);
	unref2(n);
}

static void op_setattr(int op, const struct path *p)
{
	struct store_node *n[2];
	struct store_attr in, out[2];
	int depth = op == OP_TRUNCATE ? 3 : 1 + (p->x & 3) % 3;
	unsigned mask;
	int rc[2];

	memset(&in, 0, sizeof(in));
	if (op == OP_TRUNCATE) {
		mask = STORE_SET_SIZE;
		in.size = next_byte() % (MAX_PAYLOAD + 4);
	} else {
		mask = STORE_SET_MODE;
		in.mode = MODES[next_byte() & 7];
	}
	if (!find(p, depth, n))
		return;
	for (int i = 0; i < 2; i++)
		rc[i] = store_setattr(F.d[i].s, n[i], mask, &in, &out[i]);
	same(OPNAME[op], rc[0], rc[1]);
	if (rc[0] == 0)
		same_attr("attr", &out[0], &out[1]);
	unref2(n);
}

static void op_unlink(const struct path *p)
{
	struct store_node *dir[2];
	int rc[2];

	if (!find(p, 2, dir))
		return;
	for (int i = 0; i < 2; i++)
		rc[i] = store_unlink(F.d[i].s, dir[i], CN[p->c]);
	same("unlink", rc[0], rc[1]);
	unref2(dir);
}

static void op_link(const struct path *p)
{
	struct path q = next_path();
	struct store_node *c[2], *dir[2];
	struct store_attr at[2];
	int rc[2];

	if (!find(p, 3, c))
		return;
	if (find(&q, 2, dir)) {
		for (int i = 0; i < 2; i++)
			rc[i] = store_link_entry(F.d[i].s, c[i], dir[i],
						 CN[q.c], &at[i]);
		same("link", rc[0], rc[1]);
		if (rc[0] == 0)
			same_attr("attr", &at[0], &at[1]);
		unref2(dir);
	}
	unref2(c);
}

static void op_rename(const struct path *p)
{
	struct path q = next_path();
	struct store_node *from[2], *to[2];
	int rc[2];

	if (!find(p, 2, from))
		return;
	if (find(&q, 2, to)) {
		for (int i = 0; i < 2; i++)
			rc[i] = store_rename(F.d[i].s, from[i], CN[p->c],
					     to[i], CN[q.c],
					     (unsigned)p->x & 3);
		same("rename", rc[0], rc[1]);
		unref2(to);
	}
	unref2(from);
}

/* set_ttl, renew, child_ttl: of a parent (x bit 0 clear) or a child. */
static void op_lease(int op, const struct path *p)
{
	struct store_node *n[2];
	uint64_t ttl = TTLS[next_byte() & 7];
	int rc[2];

	if (!find(p, op == OP_CHILD_TTL ? 2 : 2 + (p->x & 1), n))
		return;
	for (int i = 0; i < 2; i++) {
		struct store *s = F.d[i].s;

		if (op == OP_SET_TTL)
			rc[i] = store_set_ttl(s, n[i], ttl);
		else if (op == OP_RENEW)
			rc[i] = store_renew(s, n[i]);
		else
			rc[i] = store_set_child_ttl(s, n[i], ttl);
	}
	same(OPNAME[op], rc[0], rc[1]);
	unref2(n);
}

static void op_advance(const struct path *p)
{
	uint64_t ms = ADVANCES[p->x];
	int rc;

	F.clock += ms;
	store_reap_due(F.d[EMB].s);
	rc = store_clock_advance(F.d[SHR].s, ms);
	same("advance", 0, rc);
}

/* A drain of the store (x 7) or of tenant t; x 6: drain_now. */
static void op_drain(const struct path *p)
{
	struct store_node *t[2] = { NULL, NULL };
	int rc[2];

	if (p->x < 6 && !find(p, 1, t))
		return;
	for (int i = 0; i < 2; i++)
		rc[i] = p->x == 6 ? store_drain_now(F.d[i].s, NULL) :
			store_drain_as(F.d[i].s, t[i], cred_of(p->x));
	same("drain", rc[0], rc[1]);
	unref2(t);
}

/* Stages kept across steps --------------------------------------------------- */

static void stage_close2(int k)
{
	for (int i = 0; i < 2; i++) {
		if (F.d[i].stage[k])
			store_stage_close(F.d[i].stage[k]);
		F.d[i].stage[k] = NULL;
	}
}

static void op_stage_open(const struct path *p)
{
	int k = p->x & 1;
	enum store_stage_mode mode = (enum store_stage_mode)(p->x >> 1 & 3);
	struct store_node *n[2];
	int rc[2];

	stage_close2(k);
	if (!find(p, 3, n))
		return;
	for (int i = 0; i < 2; i++)
		rc[i] = store_stage_open(F.d[i].s, n[i], mode,
					 &F.d[i].stage[k]);
	same("open", rc[0], rc[1]);
	unref2(n);
}

static void op_stage(int op, const struct path *p)
{
	int k = p->t;
	uint64_t off = OFFSETS[p->x];
	uint8_t buf[2][MAX_PAYLOAD + 4];
	size_t len = 0;
	long rc[2];

	if (op == OP_STAGE_WRITE) {
		len = next_byte() % (MAX_PAYLOAD + 2);
		for (size_t j = 0; j < len; j++)
			buf[0][j] = (uint8_t)next_byte();
	}
	if (!F.d[EMB].stage[k])
		return;
	if (op == OP_STAGE_CLOSE) {
		stage_close2(k);
		return;
	}
	for (int i = 0; i < 2; i++) {
		struct store_stage *st = F.d[i].stage[k];

		switch (op) {
		case OP_STAGE_WRITE:
			rc[i] = store_stage_write(st, buf[0], len, off);
			break;
		case OP_STAGE_PUBLISH:
			rc[i] = store_stage_publish(st);
			break;
		case OP_STAGE_FLUSH:
			rc[i] = store_stage_flush(st);
			break;
		case OP_STAGE_TRUNCATE:
			rc[i] = store_stage_truncate(st, (uint64_t)p->x * 2);
			break;
		default: /* OP_STAGE_READ */
			memset(buf[i], 0, sizeof(buf[i]));
			rc[i] = store_stage_read(st, buf[i], sizeof(buf[i]),
						 off > MAX_PAYLOAD ? 0 : off);
			break;
		}
	}
	same(OPNAME[op], rc[0], rc[1]);
	if (op == OP_STAGE_READ && rc[0] > 0 &&
	    memcmp(buf[0], buf[1], (size_t)rc[0]) != 0)
		die("stage %d reads different bytes", k);
}

/* Parent handles kept across steps ----------------------------------------------- */

static void op_handle(int op, const struct path *p)
{
	int k = p->x & 1;
	struct store_node *out[2] = { NULL, NULL };
	int rc[2];

	if (op == OP_HANDLE) {
		for (int i = 0; i < 2; i++) {
			if (F.d[i].handle[k])
				store_node_unref(F.d[i].s, F.d[i].handle[k]);
			F.d[i].handle[k] = NULL;
		}
		if (find(p, 2, out))
			for (int i = 0; i < 2; i++)
				F.d[i].handle[k] = out[i];
		return;
	}
	if (!F.d[EMB].handle[k])
		return;
	for (int i = 0; i < 2; i++) {
		struct store_node *h = F.d[i].handle[k];
		struct store_dirlist l;
		bool created;

		if (op == OP_HANDLE_CREATE) {
			rc[i] = store_create(F.d[i].s, h, CN[p->c],
					     &OWNERS[0], false, &out[i],
					     &created);
		} else {
			rc[i] = store_list(F.d[i].s, h, &l);
			if (rc[i] == 0) {
				rc[i] = (int)l.n;
				store_dirlist_free(&l);
			}
		}
	}
	same(OPNAME[op], rc[0], rc[1]);
	unref2(out);
}

/*
 * Operations meaningless at their depth: x picks one.  0 mkdir in a
 * parent, 1 create in a tenant, 2 rmdir of a child's name, 3 unlink of
 * a parent's name, 4 link into a tenant, 5 rename between tenants'
 * names, 6 set_ttl of a tenant, 7 a stage on a parent.
 */
static void op_wrong(const struct path *p)
{
	int depth = p->x == 0 || p->x == 2 || p->x == 7 ? 2 : 1;
	struct store_node *n[2], *c[2] = { NULL, NULL }, *out[2] = { NULL, NULL };
	struct store_stage *st[2] = { NULL, NULL };
	int rc[2];
	bool created;

	if (!find(p, depth, n))
		return;
	if (p->x == 4 && !find(p, 3, c)) {
		unref2(n);
		return;
	}
	for (int i = 0; i < 2; i++) {
		struct store *s = F.d[i].s;

		switch (p->x) {
		case 0: rc[i] = store_mkdir(s, n[i], CN[p->c], &OWNERS[0], &out[i]); break;
		case 1: rc[i] = store_create(s, n[i], CN[p->c], &OWNERS[0], false, &out[i], &created); break;
		case 2: rc[i] = store_rmdir(s, n[i], CN[p->c], NULL); break;
		case 3: rc[i] = store_unlink(s, n[i], PN[p->p]); break;
		case 4: rc[i] = store_link(s, c[i], n[i], CN[p->c]); break;
		case 5: rc[i] = store_rename(s, n[i], PN[p->p], n[i], PN[(p->p + 1) % NP], 0); break;
		case 6: rc[i] = store_set_ttl(s, n[i], 100); break;
		default: rc[i] = store_stage_open(s, n[i], STORE_STAGE_REPLACE, &st[i]); break;
		}
	}
	same("wrong-depth", rc[0], rc[1]);
	for (int i = 0; i < 2; i++)
		if (st[i])
			store_stage_close(st[i]);
	unref2(out);
	unref2(c);
	unref2(n);
}

static void run_op(void)
{
	unsigned op = next_byte() % NOPS;
	struct path p = next_path();

	note("%s t%d p%d c%d x%d", OPNAME[op], p.t, p.p, p.c, p.x);
	switch (op) {
	case OP_MKDIR_T: op_mkdir(&p, 1); break;
	case OP_JOIN: op_mkdir(&p, 2); break;
	case OP_RMDIR_T: case OP_LEAVE: case OP_DEPART: op_remove((int)op, &p); break;
	case OP_CREATE: op_create(&p); break;
	case OP_PUBLISH: op_publish(&p); break;
	case OP_TRUNCATE: case OP_CHMOD: op_setattr((int)op, &p); break;
	case OP_UNLINK: op_unlink(&p); break;
	case OP_LINK: op_link(&p); break;
	case OP_RENAME: op_rename(&p); break;
	case OP_SET_TTL: case OP_RENEW: case OP_CHILD_TTL: op_lease((int)op, &p); break;
	case OP_ADVANCE: op_advance(&p); break;
	case OP_DRAIN: op_drain(&p); break;
	case OP_STAGE_OPEN: op_stage_open(&p); break;
	case OP_HANDLE: case OP_HANDLE_CREATE: case OP_HANDLE_LIST: op_handle((int)op, &p); break;
	case OP_WRONG_DEPTH: op_wrong(&p); break;
	default: op_stage((int)op, &p); break;
	}
}

/* What both sides must show ------------------------------------------------------- */

static void put(int i, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(int i, const char *fmt, ...)
{
	size_t used = strlen(F.text[i]);
	va_list ap;

	if (used + 1 >= TEXT_MAX)
		die("%s: the description is too long", SIDE[i]);
	va_start(ap, fmt);
	vsnprintf(F.text[i] + used, TEXT_MAX - used, fmt, ap);
	va_end(ap);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_dirent(const void *a, const void *b)
{
	return strcmp(((const struct store_dirent *)a)->name,
		      ((const struct store_dirent *)b)->name);
}

/* @n lines of @lines, sorted (two stores need not share table order). */
static void put_sorted(int i, char **lines, size_t n)
{
	qsort(lines, n, sizeof(*lines), cmp_str);
	for (size_t k = 0; k < n; k++) {
		put(i, "%s", lines[k]);
		free(lines[k]);
	}
	free(lines);
}

static void put_snapshot(int i)
{
	struct store_snapshot snap;
	char **lines;
	int rc = store_snapshot_take(F.d[i].s, NULL, &snap);

	if (rc != 0) {
		put(i, "snapshot %d\n", rc);
		return;
	}
	lines = calloc(snap.n + 1, sizeof(*lines));
	for (size_t k = 0; lines && k < snap.n; k++) {
		const struct store_snap_row *r = &snap.rows[k];

		if (asprintf(&lines[k], "row %d %s/%s/%s gen %" PRId64 " ver %"
			     PRId64 " size %" PRId64 " nlink %" PRId64 " ttl %"
			     PRId64 " ino %" PRId64 " owner %u:%u %o\n",
			     (int)r->kind, r->tenant, r->parent, r->child,
			     r->generation, r->version, r->size, r->nlink,
			     r->ttl_ms_left, ino_as(i, r->ino),
			     (unsigned)r->tenant_uid,
			     (unsigned)r->tenant_gid,
			     (unsigned)r->tenant_mode) < 0)
			lines[k] = NULL;
		if (!lines[k])
			die("out of memory");
	}
	if (!lines)
		die("out of memory");
	put_sorted(i, lines, snap.n);
	store_snapshot_free(&snap);
}

static void put_stats(int i, struct store_node *t)
{
	struct store_stats st;
	int rc = store_stats(F.d[i].s, t, &st);

	if (rc != 0) {
		put(i, " stats %d\n", rc);
		return;
	}
	put(i, " stats tenants %" PRIu64 " parents %" PRIu64 " children %"
	    PRIu64 " links %" PRIu64 " tombstones %" PRIu64 " bytes %" PRIu64
	    "\n", st.tenants, st.parents, st.children, st.links,
	    st.tombstones, st.bytes);
	if (t)
		return;
	put(i, " counters admissions %" PRIu64 " removals %" PRIu64
	    " expiries %" PRIu64 " joins %" PRIu64 " leaves %" PRIu64
	    " refused", st.admissions, st.removals, st.expiries, st.joins,
	    st.leaves);
	for (int k = 0; k < STORE_NREFUSAL; k++)
		put(i, " %" PRIu64, st.refused[k]);
	put(i, "\n");
}

static void put_drain(int i, struct store_node *t)
{
	uint64_t left = 0;
	enum store_state st = store_drain_state(F.d[i].s, t, &left);

	put(i, " drain %d left %" PRIu64 "\n", (int)st, left);
}

/* A node: its attributes, lease, generation or version, content. */
static void put_node(int i, struct store_node *n)
{
	struct store *s = F.d[i].s;
	enum store_kind kind = store_node_kind(n);
	struct store_attr a;
	struct store_lease l;
	uint64_t v = 0;
	int rc = store_getattr(s, n, &a);

	if (rc == 0)
		put(i, " attr ino %" PRId64 " mode %o uid %u gid %u nlink %u"
		    " size %" PRIu64 "\n", ino_as(i, (int64_t)a.ino),
		    (unsigned)a.mode,
		    (unsigned)a.uid, (unsigned)a.gid, a.nlink, a.size);
	else
		put(i, " attr %d\n", rc);
	if (kind == STORE_PARENT || kind == STORE_CHILD) {
		rc = store_lease_get(s, n, &l);
		put(i, " lease %d ttl %" PRIu64 " deadline %" PRIu64
		    " child_ttl %" PRIu64 "\n", rc, rc ? 0 : l.ttl_ms,
		    rc ? 0 : l.deadline_ms, rc ? 0 : l.child_ttl_ms);
	}
	if (kind == STORE_PARENT) {
		rc = store_parent_generation(s, n, &v);
		put(i, " generation %d %" PRIu64 "\n", rc, v);
	}
	if (kind == STORE_CHILD) {
		struct store_stage *st;
		uint8_t buf[MAX_PAYLOAD + 8];
		ssize_t got = -1;

		rc = store_child_version(s, n, &v);
		put(i, " version %d %" PRIu64 "\n content", rc, v);
		rc = store_stage_open(s, n, STORE_STAGE_READ, &st);
		if (rc == 0) {
			got = store_stage_read(st, buf, sizeof(buf), 0);
			store_stage_close(st);
		}
		for (ssize_t k = 0; k < got; k++)
			put(i, " %02x", buf[k]);
		put(i, " (%d %zd)\n", rc, got);
	}
}

/* Directory @dir (named @path) and, depth first, what it holds. */
static void put_dir(int i, struct store_node *dir, const char *path)
{
	struct store *s = F.d[i].s;
	struct store_dirlist l;
	char **lines;
	int rc = store_list(s, dir, &l);

	put(i, "%s:\n", path);
	if (rc != 0) {
		put(i, " list %d\n", rc);
		return;
	}
	lines = calloc(l.n + 1, sizeof(*lines));
	if (!lines)
		die("out of memory");
	for (size_t k = 0; k < l.n; k++)
		if (asprintf(&lines[k], " entry %s ino %" PRId64 " kind %d\n",
			     l.e[k].name, ino_as(i, (int64_t)l.e[k].ino),
			     (int)l.e[k].kind) < 0)
			die("out of memory");
	put_sorted(i, lines, l.n);
	/* Then each entry, in name order. */
	if (l.n)
		qsort(l.e, l.n, sizeof(*l.e), cmp_dirent);
	for (size_t k = 0; k < l.n; k++) {
		struct store_node *n;
		char sub[64];

		snprintf(sub, sizeof(sub), "%s/%s", path, l.e[k].name);
		rc = store_lookup(s, dir, l.e[k].name, &n);
		if (rc != 0) {
			put(i, "%s: lookup %d\n", sub, rc);
			continue;
		}
		if (store_node_kind(n) == STORE_CHILD) {
			put(i, "%s:\n", sub);
			put_node(i, n);
		} else {
			put_dir(i, n, sub);
		}
		store_node_unref(s, n);
	}
	store_dirlist_free(&l);
	if (store_node_kind(dir) != STORE_ROOT)
		put_node(i, dir);
	if (store_node_kind(dir) == STORE_TENANT) {
		put_stats(i, dir);
		put_drain(i, dir);
	}
}

static void describe(int i)
{
	struct store *s = F.d[i].s;

	F.text[i][0] = '\0';
	put(i, "store state %d next_deadline %" PRIu64 " now %" PRIu64 "\n",
	    (int)store_state(s), store_next_deadline(s), store_now_ms(s));
	put_drain(i, NULL);
	put_stats(i, NULL);
	put_snapshot(i);
	put_dir(i, store_root(s), "");
}

/*
 * After each step: one reaper pass and a read of each drain state, as
 * the daemon's reaper and a reader of .drain would (a drain with no child
 * left ends then).
 */
static void settle(void)
{
	for (int i = 0; i < 2; i++) {
		struct store *s = F.d[i].s;

		store_expire(s, 4096);
		store_drain_state(s, NULL, NULL);
		for (int t = 0; t < NT; t++) {
			struct store_node *n;

			if (store_lookup(s, store_root(s), TN[t], &n) == 0) {
				store_drain_state(s, n, NULL);
				store_node_unref(s, n);
			}
		}
	}
}

/* Pair the inode numbers of the nodes both sides show under one path
 * (directory @dir of each side, and what it holds). */
static void pair_tree(struct store_node *dir[2], const char *path)
{
	struct store_dirlist l;
	struct store_attr at[2];

	if (store_getattr(F.d[EMB].s, dir[0], &at[0]) == 0 &&
	    store_getattr(F.d[SHR].s, dir[1], &at[1]) == 0)
		pair_ino(path[0] ? path : "/", at[0].ino, at[1].ino, false);
	if (store_node_kind(dir[0]) == STORE_CHILD ||
	    store_list(F.d[EMB].s, dir[0], &l) != 0)
		return;
	for (size_t k = 0; k < l.n; k++) {
		struct store_node *n[2] = { NULL, NULL };
		char sub[64];

		snprintf(sub, sizeof(sub), "%s/%s", path, l.e[k].name);
		for (int i = 0; i < 2; i++)
			if (store_lookup(F.d[i].s, dir[i], l.e[k].name, &n[i]))
				n[i] = NULL;
		if (n[0] && n[1])
			pair_tree(n, sub);
		unref2(n);
	}
	store_dirlist_free(&l);
}

static void verify(void)
{
	struct store_node *root[2] = { store_root(F.d[EMB].s),
				       store_root(F.d[SHR].s) };
	const char *a, *b;

	pair_tree(root, "");
	describe(EMB);
	describe(SHR);
	if (strcmp(F.text[0], F.text[1]) == 0)
		return;
	a = F.text[0];
	b = F.text[1];
	/* the first line that differs */
	for (;;) {
		size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");

		if (la != lb || memcmp(a, b, la) != 0) {
			fprintf(stderr, "embedded:\n%s\nshared:\n%s\n",
				F.text[0], F.text[1]);
			die("the stores differ: embedded \"%.*s\", shared \"%.*s\"",
			    (int)la, a, (int)lb, b);
		}
		a += la + (a[la] != '\0');
		b += lb + (b[lb] != '\0');
	}
}

/* One input ------------------------------------------------------------------------ */

static uint64_t clock_now(void *arg)
{
	return *(uint64_t *)arg;
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
	F.clock = 0;
	rc = store_new(&l, &clock, &F.d[EMB].s);
	if (rc != 0)
		die("store_new: %d", rc);
	store_remote_default(&r);
	r.kind = STORE_REMOTE_UNIX;
	snprintf(r.path, sizeof(r.path), "%s", F.redis.sock);
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
	/* The next input finds an empty store (the library stays). */
	rep = redisCommand(F.redis.rc, "FLUSHALL SYNC");
	if (!rep || rep->type == REDIS_REPLY_ERROR)
		die("FLUSHALL: %s", rep ? rep->str : F.redis.rc->errstr);
	freeReplyObject(rep);
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
		settle();
		verify();
	}
	teardown();
	return 0;
}
