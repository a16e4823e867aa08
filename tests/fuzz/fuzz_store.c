/*
 * fuzz_store.c - differential libFuzzer target for store/.
 *
 * The input is a sequence of operations on a small name space: tenants
 * t0 t1, parents p0 p1 p2, children c0 c1 c2 c3 (one name more than
 * parent_quota, or a full parent could never be asked for a new name).
 * Each operation is applied to the real store, on a fake clock, and to a
 * deliberately simple reference model written from statefs(8) and
 * store.h in tests/fuzz/store/model.c (arrays and linear scans: clarity
 * over speed; fuzz_store.h says what each part holds).  After every
 * step the harness compares:
 *
 *   - each store call's return code: 0 or an errno the model allows.
 *     Where the contract names no order between two applicable errors
 *     (say EEXIST and EROFS for an exclusive create in a draining
 *     tenant) any applicable one is accepted; where it does (admission:
 *     draining, liveness, ceilings, then quotas) only the first;
 *   - the whole tree: store_list of the root, every tenant and parent;
 *     every parent's generation and lease; every child's version, size,
 *     nlink, lease and content (through a read stage); which links share
 *     one state (same inode); that no inode is ever reused;
 *   - the gauges of store_stats (store-wide and per tenant), the rows of
 *     store_snapshot_take (tombstones with generation and age included),
 *     store_next_deadline, store_drain_state (state and time left), and
 *     store_check_all.
 *
 * Operations (enum op): tenant mkdir/rmdir; parent mkdir (join), rmdir
 * (leave) and depart; create (excl or not); one-shot publications
 * (REPLACE, APPEND, CAS) and truncate; unlink; link; rename (0,
 * NOREPLACE, EXCHANGE, both = EINVAL); set_ttl and renew of parents and
 * children; child_ttl; advancing the clock; drain of the store or of a
 * tenant; two open stages (open in any mode, write at any offset,
 * ftruncate, flush, publish, read, close, and link/renew/set_ttl
 * through the stage's node: stale handles and lost compare-and-swaps);
 * two parent handles kept across steps (create, unlink, renew and list
 * through an earlier incarnation: ESTALE); operations meaningless at
 * their depth (EPERM, ENOTDIR, EISDIR, EINVAL); a snapshot of the store
 * or a tenant taken while the following operations of the input run at
 * its steps (store_snapshot_step_hook: after its instant is fixed and
 * after each tenant or bucket it copies), whose rows must be the model's
 * listing at the instant it began.
 *
 * Time.  The clock moves only in OP_ADVANCE and OP_LAZY_ADVANCE.
 * OP_ADVANCE goes from deadline to deadline (the model's next one) and
 * runs store_expire at each: a punctual reaper, so a lease ends exactly
 * at its deadline and its tombstone ages from then.  OP_LAZY_ADVANCE
 * jumps, checks that nothing past its deadline is visible although no
 * reaper has run (peek_verify), then runs the reaper once, late.  After
 * every operation the harness runs one reaper pass and reads the drain
 * state, as the daemon's reaper and a reader of .drain would, so a drain
 * ends as soon as no child is left in its scope.
 *
 * Not covered: transitions made while a node is past its deadline and
 * unreaped (the store reaps what they touch on the way; ceilings still
 * count the rest until the reaper runs), concurrency, allocation
 * failures, setattr other than size, events.
 *
 * Ceilings are small so that capacity errors happen: max_children 6,
 * max_parents 4, max_tombstones 2, parent_quota 3, max_payload 8,
 * max_bytes 16, tombstone_ttl 1 s, drain_window 0.5 s; the first input
 * byte picks max_tenants (bit 2: 1, else 2), tenant_quota (bit 1: 5),
 * default_ttl (bit 0: 700 ms) and the tenant shares (bit 3: none, else
 * the default, half of each ceiling: 2 parents, 3 children, 8 bytes, 1
 * tombstone per tenant, refused with EDQUOT after the ceiling's
 * ENOSPC).
 *
 * A mismatch prints the steps so far, each with the return codes of its
 * store calls, and aborts, so libFuzzer keeps the input; run
 * `FUZZ_STORE_TRACE=1 build/fuzz/fuzz_store FILE` to see them as they
 * run.  tests/fuzz/seeds.sh documents the encoding.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "store/store_test.h"

#include "tests/fuzz/fuzz_store.h"

/* Failing -------------------------------------------------------------------- */

/* With FUZZ_STORE_TRACE, print the last step with its outcomes. */
static void note_flush(struct fz *f)
{
	size_t cap = sizeof(f->trace) / sizeof(f->trace[0]);

	if (f->live_trace && f->ntrace)
		fprintf(stderr, "  %s\n", f->trace[(f->ntrace - 1) % cap]);
}

void note(struct fz *f, const char *fmt, ...)
{
	va_list ap;
	char *line = f->trace[f->ntrace % (sizeof(f->trace) / sizeof(f->trace[0]))];

	note_flush(f);
	va_start(ap, fmt);
	vsnprintf(line, sizeof(f->trace[0]), fmt, ap);
	va_end(ap);
	f->ntrace++;
}

void die(struct fz *f, const char *fmt, ...)
{
	size_t cap = sizeof(f->trace) / sizeof(f->trace[0]);
	size_t from = f->ntrace > cap ? f->ntrace - cap : 0;
	va_list ap;

	fprintf(stderr, "fuzz_store: mismatch after these steps (clock +%" PRIu64
		" ms):\n", f->clk.now - CLOCK_START);
	for (size_t i = from; i < f->ntrace; i++)
		fprintf(stderr, "  %s\n", f->trace[i % cap]);
	fprintf(stderr, "fuzz_store: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	abort();
}

void expect(struct fz *f, const char *what, int rc, unsigned allowed)
{
	size_t cap = sizeof(f->trace) / sizeof(f->trace[0]);
	char *line = f->trace[(f->ntrace + cap - 1) % cap];
	size_t used = strlen(line);

	if (!(allowed & (1u << code(rc))))
		die(f, "%s returned %d (%s); the model allows mask 0x%x", what,
		    rc, rc ? strerror(-rc) : "ok", allowed);
	/* the step's outcomes, on its trace line */
	if (!f->verifying && f->ntrace && used + 12 < sizeof(f->trace[0]))
		snprintf(line + used, sizeof(f->trace[0]) - used, " = %d", rc);
}

static void fz_setup(struct fz *f, uint8_t cfg)
{
	struct store_limits *l = &f->m.lim;
	struct store_clock clock = { fuzz_now, &f->clk };
	const char *tr = getenv("FUZZ_STORE_TRACE");

	store_limits_default(l);
	l->max_tenants = (cfg & 4) ? 1 : NT;
	l->max_parents = MAX_PARENTS;
	l->max_children = MAX_CHILDREN;
	l->max_bytes = MAX_BYTES;
	l->max_payload = MAX_PAYLOAD;
	l->max_tombstones = MAX_TOMBS;
	l->tombstone_ttl_ms = TOMB_TTL;
	l->parent_quota = PARENT_QUOTA;
	l->tenant_quota = (cfg & 2) ? 5 : 0;
	l->default_ttl_ms = (cfg & 1) ? 700 : 0;
	if (cfg & 8)
		l->tenant_max_parents = l->tenant_max_children =
			l->tenant_max_bytes = l->tenant_max_tombstones = 0;
	l->drain_window_ms = DRAIN_WINDOW;
	l->testclock = true;
	/* Nothing here reads events: a small log keeps store_new and
	 * store_free cheap (the default ring has 65,536 slots). */
	l->event_log = EVENT_LOG;
	f->clk.now = f->m.now = CLOCK_START;
	f->m.state = STORE_READY;
	for (int i = 0; i < NSTAGE; i++)
		f->m.stages[i] = &f->stage[i];
	f->live_trace = tr && *tr && strcmp(tr, "0") != 0;
	if (store_new(l, &clock, &f->s) != 0)
		abort();
	if (f->live_trace)
		fprintf(stderr, "fuzz_store: config 0x%x\n", cfg);
}

static void fz_teardown(struct fz *f)
{
	note_flush(f);
	for (int i = 0; i < NSTAGE; i++)
		stage_drop(f, &f->stage[i]);
	for (int i = 0; i < NHANDLE; i++)
		handle_drop(f, &f->h[i]);
	store_free(f->s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fz f;

	if (size < 1)
		return 0;
	memset(&f, 0, sizeof(f));
	f.in = data;
	f.len = size;
	f.pos = 1;
	fz_setup(&f, data[0]);
	verify(&f);
	for (int i = 0; i < MAX_OPS && f.pos < f.len; i++) {
		run_op(&f);
		fz_settle(&f);
		verify(&f);
	}
	fz_teardown(&f);
	return 0;
}
