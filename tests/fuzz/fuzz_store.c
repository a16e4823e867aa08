/*
 * fuzz_store.c - differential libFuzzer target for store/.
 *
 * The input is a sequence of operations on a small name space: tenants
 * t0 t1, parents p0 p1 p2, children c0 c1 c2 c3 (one name more than
 * parent_quota, or a full parent could never be asked for a new name).
 * Each operation is applied to the real store, on a fake clock, and to a
 * deliberately simple reference model written below from statefs(8) and
 * store.h (arrays and linear scans: clarity over speed).  After every
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

#define NT 2           /* tenants t0 t1 */
#define NP 3           /* parents p0 p1 p2 */
#define NC 4           /* children c0 c1 c2 c3 */
#define NSLOT 16       /* model state slots (> max_children) */
#define NSTAGE 2
#define NHANDLE 2
#define MAX_OPS 256
#define MAX_INOS 2048

#define MAX_PARENTS 4
#define MAX_CHILDREN 6
#define MAX_TOMBS 2
#define PARENT_QUOTA 3
#define MAX_PAYLOAD 8
#define MAX_BYTES 16
#define TOMB_TTL 1000
#define DRAIN_WINDOW 500
#define CLOCK_START 1000000
#define EVENT_LOG 64

static const char *const TN[NT] = { "t0", "t1" };
static const char *const PN[NP] = { "p0", "p1", "p2" };
static const char *const CN[NC] = { "c0", "c1", "c2", "c3" };

static const uint64_t TTLS[8] = { 0, 1, 100, 250, 500, 700, 1000, 2000 };
static const uint64_t ADVANCES[8] = { 1, 50, 99, 100, 250, 500, 1000, 3000 };
static const uint64_t OFFSETS[8] = { 0, 0, 1, 2, 4, 7, 9, UINT64_MAX - 1 };

static const struct store_owner OWNER = { 1000, 1000, 0755 };

/* Outcomes as bits, so a step can allow more than one. ------------------- */

static unsigned code(int rc)
{
	switch (-rc) {
	case 0: return 0;
	case ENOENT: return 1;
	case EEXIST: return 2;
	case ESTALE: return 3;
	case EAGAIN: return 4;
	case ENOSPC: return 5;
	case EDQUOT: return 6;
	case EFBIG: return 7;
	case EINVAL: return 8;
	case EROFS: return 9;
	case EXDEV: return 10;
	case EBADF: return 11;
	case EPERM: return 12;
	case ENOTDIR: return 13;
	case EISDIR: return 14;
	default: return 31;
	}
}

#define OK (1u << 0)
#define M(e) (1u << code(-(e)))

/* The reference model ------------------------------------------------------ */

struct mstate {
	bool live;
	uint64_t inc;                  /* incarnation: unique per state */
	int tenant;
	uint8_t data[MAX_PAYLOAD];
	size_t len;
	uint64_t version;
	unsigned nlink;
	uint64_t ttl, deadline;        /* deadline 0: no lease */
	uint64_t ino;                  /* learned from the store; 0 unknown */
};

struct mparent {
	bool live;
	uint64_t inc;
	uint64_t gen;
	uint64_t ttl, deadline, child_ttl;
	int link[NC];                  /* state slot, -1: no such child */
	uint64_t ino;
};

struct mtomb {
	bool live;
	uint64_t gen, deadline;
};

struct mtenant {
	bool live;
	uint64_t inc;
	enum store_state drain;
	uint64_t drain_deadline;
	struct mparent p[NP];
	struct mtomb tomb[NP];
	uint64_t ino;
};

struct model {
	struct store_limits lim;
	uint64_t now;
	enum store_state state;        /* the store's drain */
	uint64_t drain_deadline;
	struct mtenant t[NT];
	struct mstate st[NSLOT];
	uint64_t next_inc;
	/* The open stages (fz's and op_publish's): what they stage
	 * counts beside the content in max_bytes and the tenant shares. */
	const struct mstage *stages[NSTAGE + 1];
};

/* An open stage: the model's view, and the store's objects. */
struct mstage {
	bool open;
	int sid;
	int tenant;                    /* its state's, where its bytes count */
	uint64_t tinc;                 /* that tenant's incarnation */
	uint64_t inc;
	enum store_stage_mode mode;
	uint8_t pin[MAX_PAYLOAD];      /* what it opened on (or re-pinned) */
	size_t pinlen;
	uint64_t base;                 /* CAS base version */
	uint8_t buf[MAX_PAYLOAD];      /* staged bytes */
	size_t len;
	bool staged, dirty;
	bool written;                  /* bytes or a size were staged */
	int failed;                    /* a refused write: sticky errno */
	struct store_stage *st;
	struct store_node *child;
};

/* A parent node kept across steps (an open directory). */
struct mhandle {
	bool used;
	int ti, pi;
	uint64_t inc;
	struct store_node *node;
};

struct fuzz_clock {
	uint64_t now;
};

struct fz {
	struct store *s;
	struct fuzz_clock clk;
	struct model m;
	struct mstage stage[NSTAGE];
	struct mhandle h[NHANDLE];
	const uint8_t *in;
	size_t len, pos;
	uint64_t inos[MAX_INOS];       /* every inode number seen */
	size_t ninos;
	char trace[MAX_OPS * 8][96];
	size_t ntrace;
	bool live_trace;
	bool verifying;                /* outcomes are not traced */
	bool peeking;                  /* verify before the reaper ran */
	bool in_snapshot;              /* OP_SNAPSHOT is taking one */
	uint8_t snap_mask;             /* its steps that run an operation */
};

static uint64_t fuzz_now(void *arg)
{
	return ((struct fuzz_clock *)arg)->now;
}

/* Failing -------------------------------------------------------------------- */

/* With FUZZ_STORE_TRACE, print the last step with its outcomes. */
static void note_flush(struct fz *f)
{
	size_t cap = sizeof(f->trace) / sizeof(f->trace[0]);

	if (f->live_trace && f->ntrace)
		fprintf(stderr, "  %s\n", f->trace[(f->ntrace - 1) % cap]);
}

static void note(struct fz *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void note(struct fz *f, const char *fmt, ...)
{
	va_list ap;
	char *line = f->trace[f->ntrace % (sizeof(f->trace) / sizeof(f->trace[0]))];

	note_flush(f);
	va_start(ap, fmt);
	vsnprintf(line, sizeof(f->trace[0]), fmt, ap);
	va_end(ap);
	f->ntrace++;
}

static void die(struct fz *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));

static void die(struct fz *f, const char *fmt, ...)
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

static void expect(struct fz *f, const char *what, int rc, unsigned allowed)
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

/* Model helpers ------------------------------------------------------------ */

static bool m_draining(const struct model *m, int ti)
{
	return m->state != STORE_READY || m->t[ti].drain != STORE_READY;
}

static unsigned m_parent_links(const struct mparent *p)
{
	unsigned n = 0;

	for (int c = 0; c < NC; c++)
		n += p->link[c] >= 0;
	return n;
}

static unsigned m_tenant_links(const struct mtenant *t)
{
	unsigned n = 0;

	for (int p = 0; p < NP; p++)
		if (t->p[p].live)
			n += m_parent_links(&t->p[p]);
	return n;
}

static unsigned m_count_parents(const struct model *m, int only)
{
	unsigned n = 0;

	for (int t = 0; t < NT; t++)
		if (m->t[t].live && (only < 0 || only == t))
			for (int p = 0; p < NP; p++)
				n += m->t[t].p[p].live;
	return n;
}

static unsigned m_count_states(const struct model *m, int only)
{
	unsigned n = 0;

	for (int i = 0; i < NSLOT; i++)
		if (m->st[i].live && (only < 0 || only == m->st[i].tenant))
			n++;
	return n;
}

static uint64_t m_count_bytes(const struct model *m, int only)
{
	uint64_t n = 0;

	for (int i = 0; i < NSLOT; i++)
		if (m->st[i].live && (only < 0 || only == m->st[i].tenant))
			n += m->st[i].len;
	return n;
}

/* What the open stages hold in incarnation @inc of tenant @only (or all
 * for -1), but @except's. */
static uint64_t m_count_staged_in(const struct model *m, int only,
				  uint64_t inc, const struct mstage *except)
{
	uint64_t n = 0;

	for (int i = 0; i < NSTAGE + 1; i++) {
		const struct mstage *g = m->stages[i];

		if (g && g != except && g->open && g->staged &&
		    (only < 0 || (only == g->tenant && inc == g->tinc)))
			n += g->len;
	}
	return n;
}

/* The same in tenant @only as it is now. */
static uint64_t m_count_staged(const struct model *m, int only,
			       const struct mstage *except)
{
	return m_count_staged_in(m, only, only < 0 ? 0 : m->t[only].inc,
				 except);
}

static bool m_stage_live(const struct model *m, const struct mstage *g);

static unsigned m_count_tombs(const struct model *m, int only)
{
	unsigned n = 0;

	for (int t = 0; t < NT; t++)
		if (m->t[t].live && (only < 0 || only == t))
			for (int p = 0; p < NP; p++)
				n += m->t[t].tomb[p].live;
	return n;
}

/* A tenant's share of @ceiling (statefs(8) OPTIONS): @v, or half the
 * ceiling rounded up for the default; 0 is no share. */
static uint64_t m_share(uint64_t v, uint64_t ceiling)
{
	return v == STORE_SHARE_AUTO ? (ceiling + 1) / 2 : v;
}

/* Would one more of what tenant @ti holds @have of pass share @v of
 * @ceiling? */
static bool m_share_full(uint64_t have, uint64_t more, uint64_t v,
			 uint64_t ceiling)
{
	uint64_t share = m_share(v, ceiling);

	return share && have + more > share;
}

static unsigned m_count_tenants(const struct model *m)
{
	unsigned n = 0;

	for (int t = 0; t < NT; t++)
		n += m->t[t].live;
	return n;
}

/* Link @sid loses one link; the state ends with its last. */
static void m_state_unref(struct model *m, int sid)
{
	struct mstate *st = &m->st[sid];

	if (--st->nlink == 0) {
		st->live = false;
		st->len = 0;
		st->deadline = 0;
	}
}

static void m_link_drop(struct model *m, struct mparent *p, int c)
{
	int sid = p->link[c];

	p->link[c] = -1;
	m_state_unref(m, sid);
}

/* Parent leaves: every link goes, the bucket is gone. */
static void m_parent_remove(struct model *m, struct mparent *p)
{
	for (int c = 0; c < NC; c++)
		if (p->link[c] >= 0)
			m_link_drop(m, p, c);
	p->live = false;
	p->ttl = p->deadline = p->child_ttl = 0;
}

static void m_tomb_put(struct model *m, struct mtenant *t, int pi, uint64_t gen)
{
	t->tomb[pi].live = true;
	t->tomb[pi].gen = gen;
	t->tomb[pi].deadline = m->now + TOMB_TTL;
}

/* Everything in tenant @t goes: parents, their children, tombstones. */
static void m_tenant_clear(struct model *m, struct mtenant *t)
{
	for (int p = 0; p < NP; p++) {
		if (t->p[p].live)
			m_parent_remove(m, &t->p[p]);
		t->tomb[p].live = false;
	}
}

static void m_tenant_remove(struct model *m, int ti)
{
	m_tenant_clear(m, &m->t[ti]);
	m->t[ti].live = false;
	m->t[ti].drain = STORE_READY;
}

static int m_state_new(struct model *m, int ti)
{
	for (int i = 0; i < NSLOT; i++) {
		if (!m->st[i].live) {
			struct mstate *st = &m->st[i];

			memset(st, 0, sizeof(*st));
			st->live = true;
			st->inc = ++m->next_inc;
			st->tenant = ti;
			return i;
		}
	}
	abort(); /* NSLOT > max_children */
}

/* Drains whose window ran out or whose scope has no child left are
 * cleared; repeated until nothing changes. */
static void m_settle(struct model *m)
{
	bool again = true;

	while (again) {
		again = false;
		if (m->state == STORE_DRAINING &&
		    (m->now >= m->drain_deadline || m_count_states(m, -1) == 0)) {
			for (int t = 0; t < NT; t++)
				if (m->t[t].live)
					m_tenant_remove(m, t);
			m->state = STORE_DRAINED;
			again = true;
		}
		for (int t = 0; t < NT; t++) {
			struct mtenant *mt = &m->t[t];

			if (mt->live && mt->drain == STORE_DRAINING &&
			    (m->now >= mt->drain_deadline ||
			     m_count_states(m, t) == 0)) {
				m_tenant_clear(m, mt);
				mt->drain = STORE_DRAINED;
				again = true;
			}
		}
	}
}

/* Everything due at m->now ends: leases (a parent leaves with a
 * tombstone even over the pool's bound, a state loses every link) and
 * tombstones age out. */
static void m_expire(struct model *m)
{
	for (int t = 0; t < NT; t++) {
		struct mtenant *mt = &m->t[t];

		if (!mt->live)
			continue;
		for (int p = 0; p < NP; p++) {
			struct mparent *mp = &mt->p[p];

			if (mp->live && mp->deadline && mp->deadline <= m->now) {
				m_tomb_put(m, mt, p, mp->gen);
				m_parent_remove(m, mp);
			}
		}
	}
	for (int i = 0; i < NSLOT; i++) {
		struct mstate *st = &m->st[i];

		if (!st->live || !st->deadline || st->deadline > m->now)
			continue;
		for (int p = 0; p < NP && st->live; p++)
			for (int c = 0; c < NC && st->live; c++)
				if (m->t[st->tenant].p[p].live &&
				    m->t[st->tenant].p[p].link[c] == i)
					m_link_drop(m, &m->t[st->tenant].p[p], c);
	}
	for (int t = 0; t < NT; t++)
		for (int p = 0; p < NP; p++)
			if (m->t[t].live && m->t[t].tomb[p].live &&
			    m->t[t].tomb[p].deadline <= m->now)
				m->t[t].tomb[p].live = false;
}

static uint64_t m_next_deadline(const struct model *m)
{
	uint64_t next = UINT64_MAX;

#define CONSIDER(d) do { if ((d) && (d) < next) next = (d); } while (0)
	for (int t = 0; t < NT; t++) {
		const struct mtenant *mt = &m->t[t];

		if (!mt->live)
			continue;
		for (int p = 0; p < NP; p++) {
			if (mt->p[p].live)
				CONSIDER(mt->p[p].deadline);
			if (mt->tomb[p].live)
				CONSIDER(mt->tomb[p].deadline);
		}
		if (mt->drain == STORE_DRAINING)
			CONSIDER(mt->drain_deadline);
	}
	for (int i = 0; i < NSLOT; i++)
		if (m->st[i].live)
			CONSIDER(m->st[i].deadline);
	if (m->state == STORE_DRAINING)
		CONSIDER(m->drain_deadline);
#undef CONSIDER
	return next;
}

/* What a path resolves to in the model: ENOENT when a component is
 * missing. */
static bool m_has_parent(const struct model *m, int ti, int pi)
{
	return m->t[ti].live && m->t[ti].p[pi].live;
}

static int m_child(const struct model *m, int ti, int pi, int ci)
{
	return m_has_parent(m, ti, pi) ? m->t[ti].p[pi].link[ci] : -1;
}

/* A parent handle is usable while its incarnation is the live one. */
static bool handle_valid(const struct model *m, const struct mhandle *h)
{
	return m_has_parent(m, h->ti, h->pi) &&
	       m->t[h->ti].p[h->pi].inc == h->inc;
}

/* Model transitions.  Each gets the store's return code @rc, returns
 * the outcomes the contract allows, and changes the model when the
 * step succeeded. ---------------------------------------------------------- */

static unsigned m_mkdir_tenant(struct model *m, int ti, int rc)
{
	struct mtenant *t = &m->t[ti];

	if (t->live)
		return M(EEXIST) | (m->state != STORE_READY ? M(EROFS) : 0);
	if (m->state != STORE_READY)
		return M(EROFS);
	if (m_count_tenants(m) >= m->lim.max_tenants)
		return M(ENOSPC);
	if (rc == 0) {
		memset(t, 0, sizeof(*t));
		t->live = true;
		t->inc = ++m->next_inc;
		for (int p = 0; p < NP; p++)
			for (int c = 0; c < NC; c++)
				t->p[p].link[c] = -1;
	}
	return OK;
}

static unsigned m_rmdir_tenant(struct model *m, int ti, int rc)
{
	if (!m->t[ti].live)
		return M(ENOENT);
	if (rc == 0)
		m_tenant_remove(m, ti);
	return OK;
}

static unsigned m_join(struct model *m, int ti, int pi, int rc)
{
	struct mtenant *t = &m->t[ti];
	struct mparent *p = &t->p[pi];

	if (!t->live)
		return M(ENOENT);
	if (p->live)
		return M(EEXIST) | (m_draining(m, ti) ? M(EROFS) : 0);
	if (m_draining(m, ti))
		return M(EROFS);
	if (m_count_parents(m, -1) >= MAX_PARENTS)
		return M(ENOSPC);
	if (m_share_full(m_count_parents(m, ti), 1, m->lim.tenant_max_parents,
			 MAX_PARENTS))
		return M(EDQUOT);
	if (rc == 0) {
		/* generation 1, or the tombstone's + 1 (which goes) */
		memset(p, 0, sizeof(*p));
		p->live = true;
		p->inc = ++m->next_inc;
		p->gen = t->tomb[pi].live ? t->tomb[pi].gen + 1 : 1;
		for (int c = 0; c < NC; c++)
			p->link[c] = -1;
		t->tomb[pi].live = false;
	}
	return OK;
}

/* rmdir (@must_exist) or .depart of parent @pi. */
static unsigned m_leave(struct model *m, int ti, int pi, bool must_exist,
			int rc)
{
	struct mtenant *t = &m->t[ti];
	struct mparent *p = &t->p[pi];

	if (!t->live)
		return M(ENOENT);
	if (!p->live && must_exist)
		return M(ENOENT);
	if (!p->live && t->tomb[pi].live) {
		/* departed again before a rejoin: the tombstone's age
		 * starts over, its generation stays */
		if (rc == 0)
			t->tomb[pi].deadline = m->now + TOMB_TTL;
		return OK;
	}
	if (m_count_tombs(m, -1) >= MAX_TOMBS)
		return M(ENOSPC);
	if (m_share_full(m_count_tombs(m, ti), 1, m->lim.tenant_max_tombstones,
			 MAX_TOMBS))
		return M(EDQUOT);
	if (rc == 0) {
		m_tomb_put(m, t, pi, p->live ? p->gen : 0);
		if (p->live)
			m_parent_remove(m, p);
	}
	return OK;
}

/* The admission of a new entry into parent (@ti, @pi): draining, then
 * ceilings, then quotas (statefs(8), CHILDREN). */
static unsigned m_admit(const struct model *m, int ti, int pi, bool new_state)
{
	if (m_draining(m, ti))
		return M(EROFS);
	if (new_state && m_count_states(m, -1) >= MAX_CHILDREN)
		return M(ENOSPC);
	if (m_parent_links(&m->t[ti].p[pi]) >= PARENT_QUOTA ||
	    (m->lim.tenant_quota &&
	     m_tenant_links(&m->t[ti]) >= m->lim.tenant_quota) ||
	    (new_state && m_share_full(m_count_states(m, ti), 1,
				       m->lim.tenant_max_children,
				       MAX_CHILDREN)))
		return M(EDQUOT);
	return OK;
}

static unsigned m_create(struct model *m, int ti, int pi, int ci, bool excl,
			 int rc)
{
	struct mparent *p = &m->t[ti].p[pi];
	unsigned a;

	if (!m_has_parent(m, ti, pi))
		return M(ENOENT);
	if (p->link[ci] >= 0) /* the name is the idempotency key */
		return excl ? M(EEXIST) | (m_draining(m, ti) ? M(EROFS) : 0) :
			      OK;
	a = m_admit(m, ti, pi, true);
	if (a == OK && rc == 0) {
		int sid = m_state_new(m, ti);
		struct mstate *st = &m->st[sid];

		st->nlink = 1;
		st->ttl = p->child_ttl ? p->child_ttl : m->lim.default_ttl_ms;
		st->deadline = st->ttl ? m->now + st->ttl : 0;
		p->link[ci] = sid;
	}
	return a;
}

static unsigned m_unlink(struct model *m, int ti, int pi, int ci, int rc)
{
	if (m_child(m, ti, pi, ci) < 0)
		return M(ENOENT);
	if (rc == 0)
		m_link_drop(m, &m->t[ti].p[pi], ci);
	return OK;
}

/* Link state @sid (of tenant @sti) as (@ti, @pi, @ci). */
static unsigned m_link(struct model *m, int sid, int sti, int ti, int pi,
		       int ci, int rc)
{
	struct mparent *p = &m->t[ti].p[pi];
	unsigned a;

	if (sti != ti)
		return M(EXDEV) | (p->link[ci] >= 0 ? M(EEXIST) : 0) |
		       (m_draining(m, ti) || m_draining(m, sti) ? M(EROFS) : 0);
	if (p->link[ci] >= 0)
		return M(EEXIST) | (m_draining(m, ti) ? M(EROFS) : 0);
	a = m_admit(m, ti, pi, false);
	if (a == OK && rc == 0) {
		p->link[ci] = sid;
		m->st[sid].nlink++;
	}
	return a;
}

static unsigned m_rename(struct model *m, int ti, int pi, int ci, int dti,
			 int dpi, int dci, unsigned flags, int rc)
{
	struct mparent *a = &m->t[ti].p[pi], *b = &m->t[dti].p[dpi];
	bool exch = flags & STORE_RENAME_EXCHANGE;
	bool norep = flags & STORE_RENAME_NOREPLACE;
	bool rofs = m_draining(m, ti) || m_draining(m, dti);
	int src = a->link[ci], dst = b->link[dci];
	unsigned faults = 0;

	if (ti != dti)
		faults |= M(EXDEV);
	if (exch && norep)
		faults |= M(EINVAL);
	if (src < 0 || (exch && dst < 0))
		faults |= M(ENOENT);
	if (norep && dst >= 0)
		faults |= M(EEXIST);
	if (faults)
		return faults | (rofs ? M(EROFS) : 0);
	if (dst == src) /* one state under both names: nothing to do */
		return OK | (rofs ? M(EROFS) : 0);
	if (rofs)
		return M(EROFS);
	if (dst < 0 && a != b && m_parent_links(b) >= PARENT_QUOTA)
		return M(EDQUOT);
	if (rc == 0) {
		if (exch) {
			a->link[ci] = dst;
			b->link[dci] = src;
		} else {
			/* a replaced destination is a terminal removal */
			b->link[dci] = src;
			a->link[ci] = -1;
			if (dst >= 0)
				m_state_unref(m, dst);
		}
	}
	return OK;
}

static unsigned m_set_ttl(struct model *m, int ti, uint64_t *ttl,
			  uint64_t *deadline, uint64_t v, int rc)
{
	if (m_draining(m, ti))
		return M(EROFS);
	if (rc == 0) {
		*ttl = v;
		*deadline = v ? m->now + v : 0;
	}
	return OK;
}

static unsigned m_renew(struct model *m, int ti, uint64_t ttl,
			uint64_t *deadline, int rc)
{
	if (ttl == 0)
		return OK; /* no lease: a plain touch */
	if (m_draining(m, ti))
		return M(EROFS);
	if (rc == 0)
		*deadline = m->now + ttl;
	return OK;
}

/* A content change of @sid to @n bytes: size and byte ceilings, beside
 * what the stages hold unless it is a stage's own publication (@staged
 * false: its writes were checked with them). */
static unsigned m_fits(const struct model *m, int sid, unsigned __int128 n,
		       bool staged)
{
	uint64_t cur = m->st[sid].len;
	int ti = m->st[sid].tenant;
	uint64_t s_all = staged ? m_count_staged(m, -1, NULL) : 0;
	uint64_t s_t = staged ? m_count_staged(m, ti, NULL) : 0;

	if (n > MAX_PAYLOAD)
		return M(EFBIG);
	if (n > cur && m_count_bytes(m, -1) + s_all + (n - cur) > MAX_BYTES)
		return M(ENOSPC);
	if (n > cur && m_share_full(m_count_bytes(m, ti) + s_t,
				    (uint64_t)(n - cur), m->lim.tenant_max_bytes,
				    MAX_BYTES))
		return M(EDQUOT);
	return OK;
}

/* Stage @g growing to @n staged bytes (its write or truncation): what
 * would be held once it is published, the other stages still open:
 * every published and staged byte, less what it replaces (not for an
 * append). */
static unsigned m_stage_fits(const struct model *m, const struct mstage *g,
			     uint64_t n)
{
	uint64_t held = g->staged ? g->len : 0, freed = 0, all, in_t;

	if (n <= held)
		return OK;
	if (g->mode != STORE_STAGE_APPEND && m_stage_live(m, g))
		freed = m->st[g->sid].len;
	all = m_count_bytes(m, -1) + m_count_staged(m, -1, g);
	/* A stage counts in the tenant it opened in, even gone. */
	in_t = (m->t[g->tenant].inc == g->tinc ? m_count_bytes(m, g->tenant) : 0) +
	       m_count_staged_in(m, g->tenant, g->tinc, g);
	all = all > freed ? all - freed : 0;
	in_t = in_t > freed ? in_t - freed : 0;
	if (all + n > MAX_BYTES)
		return M(ENOSPC);
	if (m_share_full(in_t, n, m->lim.tenant_max_bytes, MAX_BYTES))
		return M(EDQUOT);
	return OK;
}

static void m_publish_content(struct model *m, int sid, const uint8_t *b,
			      size_t n)
{
	struct mstate *st = &m->st[sid];

	memcpy(st->data, b, n);
	st->len = n;
	st->version++;
}

static unsigned m_truncate(struct model *m, int sid, uint64_t size, int rc)
{
	struct mstate *st = &m->st[sid];
	unsigned a = m_fits(m, sid, size, true);

	if (a == OK && rc == 0) {
		uint8_t b[MAX_PAYLOAD] = { 0 };

		memcpy(b, st->data, st->len < size ? st->len : size);
		m_publish_content(m, sid, b, size);
	}
	return a;
}

/* Stages ----------------------------------------------------------------------- */

static bool m_stage_live(const struct model *m, const struct mstage *g)
{
	return m->st[g->sid].live && m->st[g->sid].inc == g->inc;
}

static void m_stage_open(struct model *m, struct mstage *g, int sid,
			 enum store_stage_mode mode)
{
	struct mstate *st = &m->st[sid];

	g->open = true;
	g->sid = sid;
	g->tenant = st->tenant;
	g->tinc = m->t[st->tenant].inc;
	g->inc = st->inc;
	g->mode = mode;
	memcpy(g->pin, st->data, st->len);
	g->pinlen = st->len;
	g->base = st->version;
	g->len = 0;
	g->failed = 0;
	g->written = false;
	/* O_TRUNC: an empty image, published even without a write */
	g->staged = g->dirty = mode == STORE_STAGE_REPLACE;
}

static void m_stage_reset(struct mstage *g)
{
	g->len = 0;
	g->staged = g->dirty = g->written = false;
}

/* A write of @n bytes at @off.  Limits are checked against what the
 * publication would make of it: a write that would pass a limit is
 * refused there, not at close; a refused write abandons the stage. */
static unsigned m_stage_write(struct model *m, struct mstage *g,
			      const uint8_t *b, size_t n, uint64_t off, int rc)
{
	unsigned __int128 end, newlen, projected;
	unsigned a;

	if (g->mode == STORE_STAGE_READ)
		return M(EBADF);
	if (g->failed)
		return 1u << code(g->failed);
	if (!m_stage_live(m, g)) {
		a = M(ESTALE);
	} else if (g->mode == STORE_STAGE_APPEND) {
		newlen = (unsigned __int128)g->len + n;
		projected = m->st[g->sid].len + newlen;
		a = projected > MAX_PAYLOAD ? M(EFBIG) :
		    m_stage_fits(m, g, (uint64_t)newlen);
		off = g->len;
	} else {
		size_t base = g->staged ? g->len : g->pinlen;

		end = (unsigned __int128)off + n;
		newlen = end > base ? end : base;
		projected = newlen;
		a = projected > MAX_PAYLOAD ? M(EFBIG) :
		    m_stage_fits(m, g, (uint64_t)newlen);
	}
	if (a != OK) {
		if (rc < 0) {
			m_stage_reset(g);
			g->failed = rc;
		}
		return a;
	}
	if (rc == 0 || rc == (int)n) {
		if (g->mode != STORE_STAGE_APPEND && !g->staged) {
			memcpy(g->buf, g->pin, g->pinlen);
			g->len = g->pinlen;
		}
		if (off > g->len)
			memset(g->buf + g->len, 0, off - g->len);
		memcpy(g->buf + off, b, n);
		if (off + n > g->len)
			g->len = off + n;
		g->staged = g->dirty = g->written = true;
	}
	return OK;
}

/*
 * ftruncate on an open file: the staged image takes the new size,
 * zero-extended, and is published at close.  An APPEND stage becomes a
 * replacement first: its image is the state it is pinned to (the one it
 * opened on, or its own last publication) followed by what it appended
 * since.  The staged size counts as a write's does (a refusal changes
 * nothing); liveness is checked by the publication.
 */
static unsigned m_stage_truncate(struct model *m, struct mstage *g,
				 uint64_t size, int rc)
{
	unsigned a;

	if (g->mode == STORE_STAGE_READ)
		return M(EBADF);
	if (size > MAX_PAYLOAD)
		return M(EFBIG);
	a = m_stage_fits(m, g, size);
	if (a != OK)
		return a;
	if (rc == 0 && g->mode == STORE_STAGE_APPEND) {
		uint8_t img[2 * MAX_PAYLOAD];
		size_t tail = g->staged ? g->len : 0;
		size_t n = g->pinlen + tail;

		memcpy(img, g->pin, g->pinlen);
		memcpy(img + g->pinlen, g->buf, tail);
		if (n > size)
			n = size;
		memcpy(g->buf, img, n);
		g->len = n;
		g->staged = true;
		g->mode = STORE_STAGE_REPLACE;
	}
	if (rc == 0) {
		if (!g->staged) {
			memcpy(g->buf, g->pin, g->pinlen);
			g->len = g->pinlen;
		}
		if (size > g->len)
			memset(g->buf + g->len, 0, size - g->len);
		g->len = size;
		g->staged = g->dirty = g->written = true;
	}
	return OK | (m_stage_live(m, g) ? 0 : M(ESTALE));
}

static unsigned m_stage_publish(struct model *m, struct mstage *g, int rc)
{
	struct mstate *st = &m->st[g->sid];
	uint8_t img[2 * MAX_PAYLOAD];
	size_t n;
	unsigned a;

	if (g->failed)
		return 1u << code(g->failed); /* refused at write already */
	if (!g->dirty)
		return OK;
	if (!m_stage_live(m, g))
		a = M(ESTALE);
	else if (g->mode == STORE_STAGE_CAS && st->version != g->base)
		a = M(EAGAIN);
	else {
		if (g->mode == STORE_STAGE_APPEND) {
			memcpy(img, st->data, st->len);
			memcpy(img + st->len, g->buf, g->len);
			n = st->len + g->len;
		} else {
			memcpy(img, g->buf, g->len);
			n = g->len;
		}
		a = m_fits(m, g->sid, n, false);
		if (a == OK && rc == 0) {
			m_publish_content(m, g->sid, img, n);
			g->base = st->version;
			memcpy(g->pin, img, n);
			g->pinlen = n;
		}
	}
	/* published or refused, the staged bytes are spent */
	m_stage_reset(g);
	return a;
}

/* close(2) of one descriptor: publishes only what was written or
 * truncated, so an O_TRUNC open that has not written yet stays
 * unpublished until release; after a refused write it reports the
 * refusal. */
static unsigned m_stage_flush(struct model *m, struct mstage *g, int rc)
{
	if (g->failed)
		return 1u << code(g->failed);
	return g->written ? m_stage_publish(m, g, rc) : OK;
}

/* The store side: names, lookups ------------------------------------------------ */

static uint8_t take(struct fz *f)
{
	return f->pos < f->len ? f->in[f->pos++] : 0;
}

static int lookup_tenant(struct fz *f, int ti, struct store_node **out)
{
	return store_lookup(f->s, store_root(f->s), TN[ti], out);
}

static int lookup_parent(struct fz *f, int ti, int pi, struct store_node **out)
{
	struct store_node *t;
	int rc = lookup_tenant(f, ti, &t);

	if (rc)
		return rc;
	rc = store_lookup(f->s, t, PN[pi], out);
	store_node_unref(f->s, t);
	return rc;
}

static int lookup_child(struct fz *f, int ti, int pi, int ci,
			struct store_node **out)
{
	struct store_node *p;
	int rc = lookup_parent(f, ti, pi, &p);

	if (rc)
		return rc;
	rc = store_lookup(f->s, p, CN[ci], out);
	store_node_unref(f->s, p);
	return rc;
}

/* A lookup the model says fails must fail with ENOENT, and one it says
 * succeeds must succeed. */
static void expect_found(struct fz *f, const char *what, int rc, bool found)
{
	expect(f, what, rc, found ? OK : M(ENOENT));
}

/* Inode @ino belongs to model object *@known (0: first sight): it must
 * stay the same for the object's life and never have been seen before. */
static void ino_claim(struct fz *f, uint64_t *known, uint64_t ino,
		      const char *what)
{
	if (*known) {
		if (*known != ino)
			die(f, "%s changed inode %" PRIu64 " -> %" PRIu64, what,
			    *known, ino);
		return;
	}
	for (size_t i = 0; i < f->ninos; i++)
		if (f->inos[i] == ino)
			die(f, "%s reuses inode %" PRIu64, what, ino);
	if (f->ninos < MAX_INOS)
		f->inos[f->ninos++] = ino;
	*known = ino;
}

/* Full comparison ------------------------------------------------------------------ */

static int name_index(const char *const *names, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return i;
	return -1;
}

/* A listing of @dir must hold exactly the names in @want (a bitmask
 * over @names). */
static void compare_list(struct fz *f, struct store_node *dir,
			 const char *const *names, int n, unsigned want,
			 const char *what)
{
	struct store_dirlist dl;
	unsigned got = 0;
	int rc = store_list(f->s, dir, &dl);

	expect(f, what, rc, OK);
	for (size_t i = 0; i < dl.n; i++) {
		int k = name_index(names, n, dl.e[i].name);

		if (k < 0 || (got & (1u << k)))
			die(f, "%s lists '%s' (unknown or twice)", what,
			    dl.e[i].name);
		got |= 1u << k;
	}
	store_dirlist_free(&dl);
	if (got != want)
		die(f, "%s lists set 0x%x, the model has 0x%x", what, got, want);
}

static void compare_content(struct fz *f, struct store_node *c,
			    const struct mstate *st, const char *what)
{
	struct store_stage *g;
	uint8_t buf[64];
	ssize_t n;
	int rc = store_stage_open(f->s, c, STORE_STAGE_READ, &g);

	expect(f, what, rc, OK);
	n = store_stage_read(g, buf, sizeof(buf), 0);
	store_stage_close(g);
	if (n != (ssize_t)st->len || memcmp(buf, st->data, st->len) != 0)
		die(f, "%s content: store has %zd bytes, model %zu", what, n,
		    st->len);
}

static void compare_child(struct fz *f, struct store_node *p, int ti, int pi,
			  int ci)
{
	struct model *m = &f->m;
	int sid = m->t[ti].p[pi].link[ci];
	struct mstate *st = &m->st[sid];
	struct store_node *c;
	struct store_attr a;
	struct store_lease l;
	uint64_t v = 0;
	char what[32];
	int rc;

	snprintf(what, sizeof(what), "%s/%s/%s", TN[ti], PN[pi], CN[ci]);
	rc = store_lookup(f->s, p, CN[ci], &c);
	expect_found(f, what, rc, true);
	ino_claim(f, &st->ino, store_node_ino(c), what);
	expect(f, what, store_child_version(f->s, c, &v), OK);
	if (v != st->version)
		die(f, "%s version %" PRIu64 ", model %" PRIu64, what, v,
		    st->version);
	expect(f, what, store_getattr(f->s, c, &a), OK);
	if ((a.nlink != st->nlink && !f->peeking) || a.size != st->len)
		die(f, "%s nlink %u size %" PRIu64 ", model nlink %u size %zu",
		    what, a.nlink, a.size, st->nlink, st->len);
	expect(f, what, store_lease_get(f->s, c, &l), OK);
	if (l.ttl_ms != st->ttl || l.deadline_ms != st->deadline)
		die(f, "%s lease ttl %" PRIu64 " deadline +%" PRId64
		    ", model ttl %" PRIu64 " deadline +%" PRId64, what,
		    l.ttl_ms, (int64_t)(l.deadline_ms - m->now), st->ttl,
		    (int64_t)(st->deadline - m->now));
	compare_content(f, c, st, what);
	store_node_unref(f->s, c);
}

static void compare_parent(struct fz *f, struct store_node *t, int ti, int pi)
{
	struct model *m = &f->m;
	struct mparent *mp = &m->t[ti].p[pi];
	struct store_node *p, *c;
	struct store_lease l;
	uint64_t g = 0;
	unsigned want = 0;
	char what[32];
	int rc;

	snprintf(what, sizeof(what), "%s/%s", TN[ti], PN[pi]);
	rc = store_lookup(f->s, t, PN[pi], &p);
	expect_found(f, what, rc, mp->live);
	if (rc)
		return;
	ino_claim(f, &mp->ino, store_node_ino(p), what);
	expect(f, what, store_parent_generation(f->s, p, &g), OK);
	if (g != mp->gen)
		die(f, "%s generation %" PRIu64 ", model %" PRIu64, what, g,
		    mp->gen);
	expect(f, what, store_lease_get(f->s, p, &l), OK);
	if (l.ttl_ms != mp->ttl || l.deadline_ms != mp->deadline ||
	    l.child_ttl_ms != mp->child_ttl)
		die(f, "%s lease ttl %" PRIu64 " child_ttl %" PRIu64
		    " deadline +%" PRId64 ", model %" PRIu64 " %" PRIu64
		    " +%" PRId64, what, l.ttl_ms, l.child_ttl_ms,
		    (int64_t)(l.deadline_ms - m->now), mp->ttl, mp->child_ttl,
		    (int64_t)(mp->deadline - m->now));
	for (int ci = 0; ci < NC; ci++)
		if (mp->link[ci] >= 0)
			want |= 1u << ci;
	compare_list(f, p, CN, NC, want, what);
	for (int ci = 0; ci < NC; ci++) {
		if (mp->link[ci] >= 0) {
			compare_child(f, p, ti, pi, ci);
		} else {
			rc = store_lookup(f->s, p, CN[ci], &c);
			expect_found(f, "lookup of a child the model lacks", rc,
				     false);
		}
	}
	store_node_unref(f->s, p);
}

/*
 * The rows of @snap must be the listing of model @m (the tenant @only, or
 * the whole store when @only < 0): every tenant, parent, child link and
 * tombstone once, with its generation, version, size, nlink, time left
 * and inode (where the model knows it), in name order (statefs(8),
 * .snapshot: tenants by name, each with its own row first, then its
 * buckets by parent name, each a parent's row and its children's by
 * name, then its tombstones by name; byte order).  @peeking: the
 * reaper has not run (tombstones and nlink are not settled yet).
 */
static void compare_snapshot_rows(struct fz *f, const struct store_snapshot *snap,
				  const struct model *m, int only, bool peeking,
				  const char *what)
{
	unsigned rows[4] = { 0 }, want[4] = { 0 };
	bool seen_t[NT] = { false }, seen_p[NT][NP] = { { false } };
	bool seen_c[NT][NP][NC] = { { { false } } }, seen_tb[NT][NP] = { { false } };
	const char *last_t = NULL, *last_p = NULL, *last_c = NULL;
	int cur_t = -1, cur_p = -1, phase = 0; /* 1 buckets, 2 tombstones */

	for (size_t i = 0; i < snap->n; i++) {
		const struct store_snap_row *r = &snap->rows[i];
		int ti = name_index(TN, NT, r->tenant);
		int pi = r->kind == STORE_SNAP_TENANT ? 0 :
			 name_index(PN, NP, r->parent);
		int ci = r->kind == STORE_SNAP_CHILD ?
			 name_index(CN, NC, r->child) : 0;
		bool dup;

		if (ti < 0 || pi < 0 || ci < 0 || !m->t[ti].live ||
		    (only >= 0 && ti != only))
			die(f, "%s: row of unknown %s/%s/%s", what, r->tenant,
			    r->parent, r->child);
		if (r->kind > STORE_SNAP_TOMBSTONE)
			die(f, "%s: row of kind %d", what, (int)r->kind);
		rows[r->kind]++;
		/* Scope order. */
		if (r->kind == STORE_SNAP_TENANT) {
			if (last_t && strcmp(r->tenant, last_t) <= 0)
				die(f, "%s: tenant %s out of order", what, r->tenant);
			last_t = r->tenant;
			last_p = NULL;
			cur_t = ti;
			cur_p = -1;
			phase = 1;
		} else if (ti != cur_t) {
			die(f, "%s: row of %s/%s/%s outside its tenant's", what,
			    r->tenant, r->parent, r->child);
		} else if (r->kind == STORE_SNAP_PARENT) {
			if (phase != 1 || (last_p && strcmp(r->parent, last_p) <= 0))
				die(f, "%s: parent %s/%s out of order", what,
				    r->tenant, r->parent);
			last_p = r->parent;
			last_c = NULL;
			cur_p = pi;
		} else if (r->kind == STORE_SNAP_CHILD) {
			if (phase != 1 || pi != cur_p)
				die(f, "%s: child %s/%s/%s not after its parent",
				    what, r->tenant, r->parent, r->child);
			if (last_c && strcmp(r->child, last_c) <= 0)
				die(f, "%s: child %s/%s/%s out of order", what,
				    r->tenant, r->parent, r->child);
			last_c = r->child;
		} else {
			if (phase == 2 && strcmp(r->parent, last_p) <= 0)
				die(f, "%s: tombstone %s/%s out of order", what,
				    r->tenant, r->parent);
			phase = 2;
			last_p = r->parent;
		}
		dup = r->kind == STORE_SNAP_TENANT ? seen_t[ti] :
		      r->kind == STORE_SNAP_PARENT ? seen_p[ti][pi] :
		      r->kind == STORE_SNAP_CHILD ? seen_c[ti][pi][ci] :
		      seen_tb[ti][pi];
		if (dup)
			die(f, "%s: %s/%s/%s (kind %d) listed twice", what,
			    r->tenant, r->parent, r->child, (int)r->kind);
		if (r->kind == STORE_SNAP_TENANT) {
			seen_t[ti] = true;
			if (m->t[ti].ino && r->ino != (int64_t)m->t[ti].ino)
				die(f, "%s: tenant %s inode %" PRId64, what,
				    r->tenant, r->ino);
		} else if (r->kind == STORE_SNAP_TOMBSTONE && peeking) {
			seen_tb[ti][pi] = true;
			continue; /* an unreaped parent has none yet */
		} else if (r->kind == STORE_SNAP_TOMBSTONE) {
			const struct mtomb *tb = &m->t[ti].tomb[pi];

			seen_tb[ti][pi] = true;
			if (!tb->live || r->generation != (int64_t)tb->gen ||
			    r->ttl_ms_left != (int64_t)(tb->deadline - m->now))
				die(f, "%s: tombstone %s/%s gen %" PRId64
				    " ttl_left %" PRId64 "; model %s gen %"
				    PRIu64 " ttl_left %" PRId64, what, r->tenant,
				    r->parent, r->generation, r->ttl_ms_left,
				    tb->live ? "has" : "lacks", tb->gen,
				    (int64_t)(tb->deadline - m->now));
		} else if (r->kind == STORE_SNAP_PARENT) {
			const struct mparent *p = &m->t[ti].p[pi];
			int64_t ttl = p->deadline ?
				(int64_t)(p->deadline - m->now) : -1;

			seen_p[ti][pi] = true;
			if (!p->live || r->generation != (int64_t)p->gen ||
			    r->ttl_ms_left != ttl ||
			    (p->ino && r->ino != (int64_t)p->ino))
				die(f, "%s: parent row %s/%s gen %" PRId64
				    " ttl_left %" PRId64 " inode %" PRId64, what,
				    r->tenant, r->parent, r->generation,
				    r->ttl_ms_left, r->ino);
		} else {
			int sid = m_child(m, ti, pi, ci);
			const struct mstate *st = &m->st[sid < 0 ? 0 : sid];
			int64_t ttl = st->deadline ?
				(int64_t)(st->deadline - m->now) : -1;

			seen_c[ti][pi][ci] = true;
			if (sid < 0 || r->version != (int64_t)st->version ||
			    r->size != (int64_t)st->len ||
			    (r->nlink != (int64_t)st->nlink && !peeking) ||
			    r->ttl_ms_left != ttl ||
			    r->generation != (int64_t)m->t[ti].p[pi].gen ||
			    (st->ino && r->ino != (int64_t)st->ino))
				die(f, "%s: child row %s/%s/%s version %" PRId64
				    " size %" PRId64 " nlink %" PRId64
				    " ttl_left %" PRId64 " gen %" PRId64, what,
				    r->tenant, r->parent, r->child, r->version,
				    r->size, r->nlink, r->ttl_ms_left,
				    r->generation);
		}
	}
	for (int t = 0; t < NT; t++) {
		if (!m->t[t].live || (only >= 0 && t != only))
			continue;
		want[STORE_SNAP_TENANT]++;
		want[STORE_SNAP_PARENT] += m_count_parents(m, t);
		want[STORE_SNAP_TOMBSTONE] += m_count_tombs(m, t);
		want[STORE_SNAP_CHILD] += m_tenant_links(&m->t[t]);
	}
	for (int k = 0; k < 4; k++)
		if (rows[k] != want[k] &&
		    !(peeking && k == STORE_SNAP_TOMBSTONE))
			die(f, "%s has %u rows of kind %d, model %u", what,
			    rows[k], k, want[k]);
}

/* A snapshot of the whole store now, against the model. */
static void compare_snapshot(struct fz *f)
{
	struct store_snapshot snap;
	int rc = store_snapshot_take(f->s, NULL, &snap);

	expect(f, "store_snapshot_take", rc, OK);
	compare_snapshot_rows(f, &snap, &f->m, -1, f->peeking, "snapshot");
	store_snapshot_free(&snap);
}

static void compare_gauges(struct fz *f, struct store_node *tnode, int ti)
{
	struct model *m = &f->m;
	struct store_stats st;
	uint64_t links = 0;

	expect(f, "store_stats", store_stats(f->s, tnode, &st), OK);
	for (int t = 0; t < NT; t++)
		if (m->t[t].live && (ti < 0 || ti == t))
			links += m_tenant_links(&m->t[t]);
	if (st.tenants != (ti < 0 ? m_count_tenants(m) : 1) ||
	    st.parents != m_count_parents(m, ti) ||
	    st.children != m_count_states(m, ti) || st.links != links ||
	    st.tombstones != m_count_tombs(m, ti) ||
	    st.bytes != m_count_bytes(m, ti) ||
	    st.staged_bytes != m_count_staged(m, ti, NULL))
		die(f, "stats of %s: tenants %" PRIu64 " parents %" PRIu64
		    " children %" PRIu64 " links %" PRIu64 " tombstones %"
		    PRIu64 " bytes %" PRIu64 " staged %" PRIu64 "; model %u %u %u %"
		    PRIu64 " %u %" PRIu64 " %" PRIu64,
		    ti < 0 ? "the store" : TN[ti], st.tenants,
		    st.parents, st.children, st.links, st.tombstones, st.bytes,
		    st.staged_bytes,
		    ti < 0 ? m_count_tenants(m) : 1, m_count_parents(m, ti),
		    m_count_states(m, ti), links, m_count_tombs(m, ti),
		    m_count_bytes(m, ti), m_count_staged(m, ti, NULL));
}

/* What .drain of the store (@ti < 0) or of a tenant reads. */
static void compare_drain(struct fz *f, struct store_node *tnode, int ti)
{
	struct model *m = &f->m;
	enum store_state want = m->state, got;
	uint64_t dl = m->drain_deadline, left = 0, want_left;

	if (ti >= 0) {
		const struct mtenant *t = &m->t[ti];

		/* a tenant is as far as the further of its drain and the
		 * store's; two running drains end at the earlier */
		if (t->drain > want ||
		    (t->drain == STORE_DRAINING && want == STORE_DRAINING &&
		     t->drain_deadline < dl)) {
			want = t->drain;
			dl = t->drain_deadline;
		}
	}
	want_left = want == STORE_DRAINING && dl > m->now ? dl - m->now : 0;
	got = store_drain_state(f->s, tnode, &left);
	if (got != want || left != want_left)
		die(f, "drain state of %s: %d (%" PRIu64 " ms left), model %d (%"
		    PRIu64 ")", ti < 0 ? "the store" : TN[ti], got, left, want,
		    want_left);
}

/* Links that share a state in the model share an inode in the store
 * (checked by ino_claim per state); distinct states have distinct
 * inodes (ino_claim never hands one out twice). */
static void verify(struct fz *f)
{
	struct model *m = &f->m;
	struct store_node *root = store_root(f->s), *t;
	unsigned want = 0;
	uint64_t next;
	char why[256] = "";

	f->verifying = true;
	for (int ti = 0; ti < NT; ti++)
		if (m->t[ti].live)
			want |= 1u << ti;
	compare_list(f, root, TN, NT, want, "the root");
	if (!f->peeking) {
		compare_gauges(f, NULL, -1);
		compare_drain(f, NULL, -1);
	}
	for (int ti = 0; ti < NT; ti++) {
		int rc = lookup_tenant(f, ti, &t);

		expect_found(f, TN[ti], rc, m->t[ti].live);
		if (rc)
			continue;
		ino_claim(f, &m->t[ti].ino, store_node_ino(t), TN[ti]);
		want = 0;
		for (int pi = 0; pi < NP; pi++)
			if (m->t[ti].p[pi].live)
				want |= 1u << pi;
		compare_list(f, t, PN, NP, want, TN[ti]);
		for (int pi = 0; pi < NP; pi++)
			compare_parent(f, t, ti, pi);
		if (!f->peeking) {
			compare_gauges(f, t, ti);
			compare_drain(f, t, ti);
		}
		store_node_unref(f->s, t);
	}
	/* Inside OP_SNAPSHOT the one snapshot at a time is being taken. */
	if (!f->in_snapshot)
		compare_snapshot(f);
	next = store_next_deadline(f->s);
	if (!f->peeking && next != m_next_deadline(m))
		die(f, "next deadline +%" PRId64 ", model +%" PRId64,
		    (int64_t)(next - m->now),
		    (int64_t)(m_next_deadline(m) - m->now));
	if (store_check_all(f->s, why, sizeof(why)) != 0)
		die(f, "store_check_all: %s", why);
	f->verifying = false;
}

/*
 * The clock has passed deadlines and no reaper has run (lazy expiry):
 * what the store shows must already be what it will be once the reaper
 * runs at this time (@after), as far as visibility goes: listings,
 * lookups, generations, versions, content, leases, snapshot rows and
 * handles of an expired parent (ESTALE).  Left out, because only the
 * reaper settles them: tombstones of expired parents, gauges, drains,
 * the deadline heap, and nlink (a state still counts the links of an
 * expired parent).  Nothing called here reaps.
 */
static void peek_verify(struct fz *f, const struct model *after)
{
	struct model saved = f->m;
	struct store_dirlist dl;

	f->m = *after;
	f->peeking = true;
	verify(f);
	f->verifying = true;
	for (int i = 0; i < NHANDLE; i++) {
		struct mhandle *h = &f->h[i];
		int rc;

		if (!h->used)
			continue;
		rc = store_list(f->s, h->node, &dl);
		if (rc == 0)
			store_dirlist_free(&dl);
		expect(f, "list through a handle before the reaper", rc,
		       handle_valid(&f->m, h) ? OK : M(ESTALE));
	}
	f->verifying = f->peeking = false;
	/* keep the inodes learned meanwhile */
	for (int t = 0; t < NT; t++) {
		if (saved.t[t].inc == f->m.t[t].inc)
			saved.t[t].ino = f->m.t[t].ino;
		for (int p = 0; p < NP; p++)
			if (saved.t[t].p[p].inc == f->m.t[t].p[p].inc)
				saved.t[t].p[p].ino = f->m.t[t].p[p].ino;
	}
	for (int i = 0; i < NSLOT; i++)
		if (saved.st[i].inc == f->m.st[i].inc)
			saved.st[i].ino = f->m.st[i].ino;
	f->m = saved;
}

/* One reaper pass and a read of .drain, on both sides. */
static void settle(struct fz *f)
{
	store_expire(f->s, 1u << 16);
	store_drain_state(f->s, NULL, NULL);
	m_settle(&f->m);
}

/* Operations --------------------------------------------------------------------- */

enum op {
	OP_MKDIR_T,
	OP_RMDIR_T,
	OP_JOIN,
	OP_LEAVE,
	OP_DEPART,
	OP_CREATE,
	OP_PUBLISH,
	OP_TRUNCATE,
	OP_UNLINK,
	OP_LINK,
	OP_RENAME,
	OP_SET_TTL,
	OP_RENEW,
	OP_CHILD_TTL,
	OP_ADVANCE,
	OP_DRAIN,
	OP_ST_OPEN,
	OP_ST_WRITE,
	OP_ST_PUBLISH,
	OP_ST_READ,
	OP_ST_CLOSE,
	OP_ST_LINK,
	OP_ST_LEASE,
	OP_H_GRAB,
	OP_H_CREATE,
	OP_H_UNLINK,
	OP_H_RENEW,
	OP_H_LIST,
	OP_ST_TRUNCATE,
	OP_ST_FLUSH,
	OP_LAZY_ADVANCE,
	OP_WRONG_DEPTH,
	OP_SNAPSHOT,
	OP_COUNT
};

static const char *const MODES[4] = { "read", "replace", "append", "cas" };

/* A path byte: tenant, parent, child and three spare bits. */
struct path {
	int t, p, c;
	unsigned extra;
};

static struct path take_path(struct fz *f)
{
	uint8_t b = take(f);
	struct path p = { b & 1, ((b >> 1) & 3) % NP, (b >> 3) & 3, b >> 5 };

	return p;
}

static void stage_drop(struct fz *f, struct mstage *g)
{
	if (!g->open)
		return;
	store_stage_close(g->st);
	store_node_unref(f->s, g->child);
	memset(g, 0, sizeof(*g));
}

static void handle_drop(struct fz *f, struct mhandle *h)
{
	if (!h->used)
		return;
	store_node_unref(f->s, h->node);
	memset(h, 0, sizeof(*h));
}

/* Small data for a write: 1..4 bytes from the input. */
static size_t take_data(struct fz *f, uint8_t *b)
{
	size_t n = 1 + (take(f) & 3);

	for (size_t i = 0; i < n; i++)
		b[i] = take(f);
	return n;
}

/* The store side of a publication through a fresh stage (open, one
 * write unless @n is 0, publish, close), and the model's. */
static void op_publish(struct fz *f, struct path pa, enum store_stage_mode mode)
{
	struct model *m = &f->m;
	uint8_t data[4];
	size_t n = take_data(f, data);
	uint64_t off = mode == STORE_STAGE_CAS ? OFFSETS[pa.extra] : 0;
	struct mstage g;
	struct store_stage *st;
	struct store_node *c;
	int sid = m_child(m, pa.t, pa.p, pa.c);
	int rc;
	ssize_t w;

	note(f, "publish %s %s/%s/%s %zu bytes at %" PRIu64, MODES[mode],
	     TN[pa.t], PN[pa.p], CN[pa.c], n, off);
	rc = lookup_child(f, pa.t, pa.p, pa.c, &c);
	expect_found(f, "publish lookup", rc, sid >= 0);
	if (rc)
		return;
	memset(&g, 0, sizeof(g));
	expect(f, "store_stage_open", store_stage_open(f->s, c, mode, &st), OK);
	m_stage_open(m, &g, sid, mode);
	m->stages[NSTAGE] = &g;
	w = store_stage_write(st, data, n, off);
	rc = w < 0 ? (int)w : 0;
	if (w >= 0 && w != (ssize_t)n)
		die(f, "store_stage_write wrote %zd of %zu", w, n);
	expect(f, "store_stage_write", rc, m_stage_write(m, &g, data, n, off, rc));
	rc = store_stage_publish(st);
	expect(f, "store_stage_publish", rc, m_stage_publish(m, &g, rc));
	store_stage_close(st);
	m->stages[NSTAGE] = NULL;
	store_node_unref(f->s, c);
}

static void run_op(struct fz *f);

/*
 * OP_SNAPSHOT's step hook: the taker calls it once the snapshot's instant
 * is fixed (step 0) and after each tenant or bucket it copies.  When the
 * mask says so, the next operation of the input runs there, then a
 * reaper pass and a full verification (but for the snapshot), as after
 * any step.
 */
static void snap_step_run(void *arg, unsigned step)
{
	struct fz *f = arg;

	if (step >= 8 || !(f->snap_mask & (1u << step)) || f->pos >= f->len)
		return;
	note(f, "(snapshot step %u)", step);
	run_op(f);
	settle(f);
	verify(f);
}

static void run_op(struct fz *f)
{
	struct model *m = &f->m;
	struct store_node *root = store_root(f->s), *n = NULL, *n2 = NULL;
	uint8_t opb = take(f);
	enum op op = (enum op)(opb % OP_COUNT);
	struct path pa = take_path(f), pb;
	bool created = false;
	int rc, sid;
	unsigned a;

	switch (op) {
	case OP_MKDIR_T:
		note(f, "mkdir %s", TN[pa.t]);
		rc = store_mkdir(f->s, root, TN[pa.t], &OWNER, &n);
		expect(f, "mkdir tenant", rc, m_mkdir_tenant(m, pa.t, rc));
		break;
	case OP_RMDIR_T:
		note(f, "rmdir %s", TN[pa.t]);
		rc = store_rmdir(f->s, root, TN[pa.t], NULL);
		expect(f, "rmdir tenant", rc, m_rmdir_tenant(m, pa.t, rc));
		break;
	case OP_JOIN:
		note(f, "mkdir %s/%s", TN[pa.t], PN[pa.p]);
		rc = lookup_tenant(f, pa.t, &n2);
		if (rc == 0)
			rc = store_mkdir(f->s, n2, PN[pa.p], &OWNER, &n);
		expect(f, "join", rc, m_join(m, pa.t, pa.p, rc));
		break;
	case OP_LEAVE:
	case OP_DEPART:
		note(f, "%s %s/%s", op == OP_LEAVE ? "rmdir" : "depart",
		     TN[pa.t], PN[pa.p]);
		rc = lookup_tenant(f, pa.t, &n2);
		if (rc == 0)
			rc = op == OP_LEAVE ? store_rmdir(f->s, n2, PN[pa.p], NULL) :
			     store_depart(f->s, n2, PN[pa.p], NULL);
		expect(f, op == OP_LEAVE ? "rmdir parent" : "depart", rc,
		       m_leave(m, pa.t, pa.p, op == OP_LEAVE, rc));
		break;
	case OP_CREATE: {
		bool excl = pa.extra & 1;

		note(f, "create%s %s/%s/%s", excl ? " excl" : "", TN[pa.t],
		     PN[pa.p], CN[pa.c]);
		sid = m_child(m, pa.t, pa.p, pa.c);
		rc = lookup_parent(f, pa.t, pa.p, &n2);
		if (rc == 0)
			rc = store_create(f->s, n2, CN[pa.c], &OWNER, excl, &n,
					  &created);
		a = m_create(m, pa.t, pa.p, pa.c, excl, rc);
		expect(f, "create", rc, a);
		if (rc == 0 && created != (sid < 0))
			die(f, "create: created %d, model %d", created, sid < 0);
		if (rc == 0 && sid >= 0 && m->st[sid].ino &&
		    store_node_ino(n) != m->st[sid].ino)
			die(f, "create of an existing child gave another inode");
		break;
	}
	case OP_PUBLISH:
		op_publish(f, pa, (enum store_stage_mode)(1 + pa.extra % 3));
		break;
	case OP_TRUNCATE: {
		struct store_attr in, out;
		uint64_t size = take(f) % (MAX_PAYLOAD + 3);

		note(f, "truncate %s/%s/%s %" PRIu64, TN[pa.t], PN[pa.p],
		     CN[pa.c], size);
		sid = m_child(m, pa.t, pa.p, pa.c);
		rc = lookup_child(f, pa.t, pa.p, pa.c, &n);
		expect_found(f, "truncate lookup", rc, sid >= 0);
		if (rc)
			break;
		memset(&in, 0, sizeof(in));
		in.size = size;
		rc = store_setattr(f->s, n, STORE_SET_SIZE, &in, &out);
		expect(f, "truncate", rc, m_truncate(m, sid, size, rc));
		break;
	}
	case OP_UNLINK:
		note(f, "unlink %s/%s/%s", TN[pa.t], PN[pa.p], CN[pa.c]);
		rc = lookup_parent(f, pa.t, pa.p, &n2);
		if (rc == 0)
			rc = store_unlink(f->s, n2, CN[pa.c]);
		expect(f, "unlink", rc, m_unlink(m, pa.t, pa.p, pa.c, rc));
		break;
	case OP_LINK:
		pb = take_path(f);
		note(f, "link %s/%s/%s %s/%s/%s", TN[pa.t], PN[pa.p], CN[pa.c],
		     TN[pb.t], PN[pb.p], CN[pb.c]);
		sid = m_child(m, pa.t, pa.p, pa.c);
		rc = lookup_child(f, pa.t, pa.p, pa.c, &n);
		expect_found(f, "link source lookup", rc, sid >= 0);
		if (rc)
			break;
		rc = lookup_parent(f, pb.t, pb.p, &n2);
		expect_found(f, "link destination lookup", rc,
			     m_has_parent(m, pb.t, pb.p));
		if (rc)
			break;
		rc = store_link(f->s, n, n2, CN[pb.c]);
		expect(f, "link", rc,
		       m_link(m, sid, pa.t, pb.t, pb.p, pb.c, rc));
		break;
	case OP_RENAME: {
		struct store_node *from = NULL;
		unsigned flags = pa.extra & 3;

		pb = take_path(f);
		note(f, "rename%s%s %s/%s/%s %s/%s/%s",
		     flags & STORE_RENAME_NOREPLACE ? " noreplace" : "",
		     flags & STORE_RENAME_EXCHANGE ? " exchange" : "",
		     TN[pa.t], PN[pa.p], CN[pa.c], TN[pb.t], PN[pb.p], CN[pb.c]);
		rc = lookup_parent(f, pa.t, pa.p, &from);
		expect_found(f, "rename source lookup", rc,
			     m_has_parent(m, pa.t, pa.p));
		if (rc)
			break;
		rc = lookup_parent(f, pb.t, pb.p, &n2);
		expect_found(f, "rename destination lookup", rc,
			     m_has_parent(m, pb.t, pb.p));
		if (rc == 0) {
			rc = store_rename(f->s, from, CN[pa.c], n2, CN[pb.c],
					  flags);
			expect(f, "rename", rc,
			       m_rename(m, pa.t, pa.p, pa.c, pb.t, pb.p, pb.c,
					flags, rc));
		}
		store_node_unref(f->s, from);
		break;
	}
	case OP_SET_TTL:
	case OP_RENEW: {
		/* extra bit 0: the child, else the parent */
		bool child = pa.extra & 1;
		uint64_t v = TTLS[take(f) & 7];
		uint64_t *ttl, *dl;

		if (op == OP_SET_TTL)
			note(f, "set_ttl %s/%s%s%s %" PRIu64, TN[pa.t], PN[pa.p],
			     child ? "/" : "", child ? CN[pa.c] : "", v);
		else
			note(f, "renew %s/%s%s%s", TN[pa.t], PN[pa.p],
			     child ? "/" : "", child ? CN[pa.c] : "");
		if (child) {
			sid = m_child(m, pa.t, pa.p, pa.c);
			rc = lookup_child(f, pa.t, pa.p, pa.c, &n);
			expect_found(f, "lease lookup", rc, sid >= 0);
			if (rc)
				break;
			ttl = &m->st[sid].ttl;
			dl = &m->st[sid].deadline;
		} else {
			rc = lookup_parent(f, pa.t, pa.p, &n);
			expect_found(f, "lease lookup", rc,
				     m_has_parent(m, pa.t, pa.p));
			if (rc)
				break;
			ttl = &m->t[pa.t].p[pa.p].ttl;
			dl = &m->t[pa.t].p[pa.p].deadline;
		}
		if (op == OP_SET_TTL) {
			rc = store_set_ttl(f->s, n, v);
			expect(f, "set_ttl", rc, m_set_ttl(m, pa.t, ttl, dl, v, rc));
		} else {
			rc = store_renew(f->s, n);
			expect(f, "renew", rc, m_renew(m, pa.t, *ttl, dl, rc));
		}
		break;
	}
	case OP_CHILD_TTL: {
		uint64_t v = TTLS[take(f) & 7];

		note(f, "child_ttl %s/%s %" PRIu64, TN[pa.t], PN[pa.p], v);
		rc = lookup_parent(f, pa.t, pa.p, &n);
		expect_found(f, "child_ttl lookup", rc,
			     m_has_parent(m, pa.t, pa.p));
		if (rc)
			break;
		expect(f, "child_ttl", store_set_child_ttl(f->s, n, v), OK);
		m->t[pa.t].p[pa.p].child_ttl = v;
		break;
	}
	case OP_ADVANCE: {
		uint64_t target = m->now + ADVANCES[(pa.extra << 1 | pa.t) & 7];

		note(f, "advance %" PRIu64 " ms", target - m->now);
		/* deadline by deadline: a punctual reaper */
		for (;;) {
			uint64_t next = m_next_deadline(m);

			if (next <= m->now)
				die(f, "model deadline %" PRIu64 " not after now",
				    next);
			if (next > target)
				break;
			f->clk.now = m->now = next;
			m_expire(m);
			settle(f);
			verify(f);
		}
		f->clk.now = m->now = target;
		break;
	}
	case OP_LAZY_ADVANCE: {
		/* the clock jumps; the reaper runs once, late, at the new
		 * time (so a lease's tombstone ages from then) */
		uint64_t target = m->now + ADVANCES[(pa.extra << 1 | pa.t) & 7];
		static struct model after;

		note(f, "advance %" PRIu64 " ms, reaper late", target - m->now);
		f->clk.now = m->now = target;
		after = *m;
		m_expire(&after);
		peek_verify(f, &after);
		m_expire(m);
		break;
	}
	case OP_WRONG_DEPTH: {
		/* operations meaningless at that depth change nothing */
		struct store_node *t = NULL, *p = NULL, *c = NULL;
		struct store_stage *st;
		bool has_c;

		note(f, "wrong depth %u at %s/%s/%s", pa.extra, TN[pa.t],
		     PN[pa.p], CN[pa.c]);
		rc = lookup_tenant(f, pa.t, &t);
		if (rc == 0 && lookup_parent(f, pa.t, pa.p, &p) == 0)
			lookup_child(f, pa.t, pa.p, pa.c, &c);
		has_c = c != NULL;
		if (!t || !p)
			goto wrong_out;
		switch (pa.extra) {
		case 0: /* mkdir inside a parent */
			rc = store_mkdir(f->s, p, CN[pa.c], &OWNER, &n);
			expect(f, "mkdir in a parent", rc, M(EPERM));
			break;
		case 1: /* rmdir of a child */
			rc = store_rmdir(f->s, p, CN[pa.c], NULL);
			expect(f, "rmdir in a parent", rc,
			       has_c ? M(ENOTDIR) : M(ENOENT));
			break;
		case 2: /* a file in a tenant */
			rc = store_create(f->s, t, PN[pa.p], &OWNER, false, &n,
					  &created);
			expect(f, "create in a tenant", rc, M(EPERM));
			break;
		case 3: /* unlink of a parent */
			rc = store_unlink(f->s, t, PN[pa.p]);
			expect(f, "unlink in a tenant", rc, M(EPERM) | M(EISDIR));
			break;
		case 4: /* rename of a parent */
			rc = store_rename(f->s, t, PN[pa.p], t, PN[(pa.p + 1) % NP],
					  0);
			expect(f, "rename of a parent", rc, M(EPERM));
			break;
		case 5: /* a lease on a tenant */
			rc = store_set_ttl(f->s, t, 100);
			expect(f, "set_ttl on a tenant", rc, M(EINVAL));
			break;
		case 6: /* a link into a tenant */
			if (!c)
				break;
			rc = store_link(f->s, c, t, CN[pa.c]);
			expect(f, "link into a tenant", rc, M(EPERM));
			break;
		case 7: /* a directory opened as a file */
			rc = store_stage_open(f->s, p, STORE_STAGE_READ, &st);
			if (rc == 0)
				store_stage_close(st);
			expect(f, "stage on a parent", rc, M(EISDIR));
			break;
		}
wrong_out:
		if (t)
			store_node_unref(f->s, t);
		if (p)
			store_node_unref(f->s, p);
		if (c)
			store_node_unref(f->s, c);
		break;
	}
	case OP_DRAIN:
		if (pa.extra == 7) {
			note(f, "drain the store");
			expect(f, "drain", store_drain(f->s, NULL), OK);
			if (m->state == STORE_READY) {
				m->state = STORE_DRAINING;
				m->drain_deadline = m->now + DRAIN_WINDOW;
			}
			break;
		}
		note(f, "drain %s", TN[pa.t]);
		rc = lookup_tenant(f, pa.t, &n);
		expect_found(f, "drain lookup", rc, m->t[pa.t].live);
		if (rc)
			break;
		expect(f, "drain", store_drain(f->s, n), OK);
		if (m->t[pa.t].drain == STORE_READY) {
			m->t[pa.t].drain = STORE_DRAINING;
			m->t[pa.t].drain_deadline = m->now + DRAIN_WINDOW;
		}
		break;
	case OP_ST_OPEN: {
		struct mstage *g = &f->stage[pa.extra & 1];
		enum store_stage_mode mode = (enum store_stage_mode)(pa.extra >> 1);

		stage_drop(f, g);
		note(f, "stage %d open %s %s/%s/%s", (int)(pa.extra & 1),
		     MODES[mode], TN[pa.t], PN[pa.p], CN[pa.c]);
		sid = m_child(m, pa.t, pa.p, pa.c);
		rc = lookup_child(f, pa.t, pa.p, pa.c, &n);
		expect_found(f, "stage lookup", rc, sid >= 0);
		if (rc)
			break;
		expect(f, "store_stage_open", store_stage_open(f->s, n, mode,
							       &g->st), OK);
		m_stage_open(m, g, sid, mode);
		g->child = n;
		n = NULL;
		break;
	}
	case OP_ST_WRITE: {
		struct mstage *g = &f->stage[pa.t];
		uint8_t data[4];
		size_t len = take_data(f, data);
		uint64_t off = OFFSETS[pa.extra];
		ssize_t w;

		if (!g->open)
			break;
		note(f, "stage %d write %zu bytes at %" PRIu64, pa.t, len, off);
		w = store_stage_write(g->st, data, len, off);
		rc = w < 0 ? (int)w : 0;
		if (w >= 0 && w != (ssize_t)len)
			die(f, "store_stage_write wrote %zd of %zu", w, len);
		expect(f, "stage write", rc,
		       m_stage_write(m, g, data, len, off, rc));
		break;
	}
	case OP_ST_PUBLISH: {
		struct mstage *g = &f->stage[pa.t];

		if (!g->open)
			break;
		note(f, "stage %d publish", pa.t);
		rc = store_stage_publish(g->st);
		expect(f, "stage publish", rc, m_stage_publish(m, g, rc));
		break;
	}
	case OP_ST_READ: {
		struct mstage *g = &f->stage[pa.t];
		uint8_t buf[64], both[2 * MAX_PAYLOAD];
		const uint8_t *want;
		size_t wlen;
		ssize_t r;

		if (!g->open)
			break;
		note(f, "stage %d read", pa.t);
		r = store_stage_read(g->st, buf, sizeof(buf), 0);
		if (!m_stage_live(m, g)) {
			expect(f, "stage read", r < 0 ? (int)r : 0, M(ESTALE));
			break;
		}
		if (g->mode == STORE_STAGE_READ) {
			/* a read from 0 sees the newest publication */
			const struct mstate *st = &m->st[g->sid];

			memcpy(g->pin, st->data, st->len);
			g->pinlen = st->len;
		}
		if (g->staged && g->mode != STORE_STAGE_APPEND) {
			want = g->buf;
			wlen = g->len;
		} else if (g->staged) {
			/* an append stage reads its base, then its tail */
			memcpy(both, g->pin, g->pinlen);
			memcpy(both + g->pinlen, g->buf, g->len);
			want = both;
			wlen = g->pinlen + g->len;
		} else {
			want = g->pin;
			wlen = g->pinlen;
		}
		if (r != (ssize_t)wlen || memcmp(buf, want, wlen) != 0)
			die(f, "stage read: %zd bytes, model %zu", r, wlen);
		break;
	}
	case OP_ST_TRUNCATE: {
		struct mstage *g = &f->stage[pa.t];
		uint64_t size = take(f) % (MAX_PAYLOAD + 3);

		if (!g->open)
			break;
		note(f, "stage %d truncate %" PRIu64, pa.t, size);
		rc = store_stage_truncate(g->st, size);
		expect(f, "stage truncate", rc, m_stage_truncate(m, g, size, rc));
		break;
	}
	case OP_ST_FLUSH: {
		struct mstage *g = &f->stage[pa.t];

		if (!g->open)
			break;
		note(f, "stage %d flush", pa.t);
		rc = store_stage_flush(g->st);
		expect(f, "stage flush", rc, m_stage_flush(m, g, rc));
		break;
	}
	case OP_ST_CLOSE:
		if (!f->stage[pa.t].open)
			break;
		note(f, "stage %d close", pa.t);
		stage_drop(f, &f->stage[pa.t]);
		break;
	case OP_ST_LINK: {
		struct mstage *g = &f->stage[pa.extra & 1];
		int gi = (int)(pa.extra & 1);

		if (!g->open)
			break;
		note(f, "link stage %d's child to %s/%s/%s", gi, TN[pa.t],
		     PN[pa.p], CN[pa.c]);
		rc = lookup_parent(f, pa.t, pa.p, &n2);
		expect_found(f, "link destination lookup", rc,
			     m_has_parent(m, pa.t, pa.p));
		if (rc)
			break;
		rc = store_link(f->s, g->child, n2, CN[pa.c]);
		if (!m_stage_live(m, g))
			a = M(ESTALE);
		else
			a = m_link(m, g->sid, m->st[g->sid].tenant, pa.t, pa.p,
				   pa.c, rc);
		expect(f, "link through an open file", rc, a);
		break;
	}
	case OP_ST_LEASE: {
		struct mstage *g = &f->stage[pa.t];
		bool set = pa.extra & 1;
		uint64_t v = TTLS[pa.extra >> 1 | (pa.p << 2 & 4)];

		if (!g->open)
			break;
		note(f, "%s stage %d's child %" PRIu64, set ? "set_ttl" : "renew",
		     pa.t, v);
		rc = set ? store_set_ttl(f->s, g->child, v) :
			   store_renew(f->s, g->child);
		if (!m_stage_live(m, g)) {
			a = M(ESTALE);
		} else {
			struct mstate *st = &m->st[g->sid];

			a = set ? m_set_ttl(m, st->tenant, &st->ttl,
					    &st->deadline, v, rc) :
				  m_renew(m, st->tenant, st->ttl, &st->deadline,
					  rc);
		}
		expect(f, "lease through an open file", rc, a);
		break;
	}
	case OP_H_GRAB: {
		struct mhandle *h = &f->h[pa.extra & 1];

		handle_drop(f, h);
		note(f, "handle %d = %s/%s", (int)(pa.extra & 1), TN[pa.t],
		     PN[pa.p]);
		rc = lookup_parent(f, pa.t, pa.p, &n);
		expect_found(f, "handle lookup", rc, m_has_parent(m, pa.t, pa.p));
		if (rc)
			break;
		h->used = true;
		h->ti = pa.t;
		h->pi = pa.p;
		h->inc = m->t[pa.t].p[pa.p].inc;
		h->node = n;
		n = NULL;
		break;
	}
	case OP_H_CREATE:
	case OP_H_UNLINK:
	case OP_H_RENEW:
	case OP_H_LIST: {
		struct mhandle *h = &f->h[pa.extra & 1];
		bool valid, excl = pa.extra & 2;

		if (!h->used)
			break;
		valid = handle_valid(m, h);
		note(f, "through handle %d (%s/%s, %s): %s %s",
		     (int)(pa.extra & 1), TN[h->ti], PN[h->pi],
		     valid ? "live" : "old",
		     op == OP_H_CREATE ? (excl ? "create excl" : "create") :
		     op == OP_H_UNLINK ? "unlink" :
		     op == OP_H_RENEW ? "renew" : "list", CN[pa.c]);
		if (op == OP_H_CREATE) {
			sid = valid ? m->t[h->ti].p[h->pi].link[pa.c] : -1;
			rc = store_create(f->s, h->node, CN[pa.c], &OWNER, excl,
					  &n, &created);
			/* an old incarnation admits nothing (ESTALE),
			 * after the draining check of admission */
			a = valid ? m_create(m, h->ti, h->pi, pa.c, excl, rc) :
				    M(ESTALE) | M(EROFS);
			expect(f, "create through a handle", rc, a);
			if (rc == 0 && created != (sid < 0))
				die(f, "create through a handle: created %d",
				    created);
		} else if (op == OP_H_UNLINK) {
			rc = store_unlink(f->s, h->node, CN[pa.c]);
			a = valid ? m_unlink(m, h->ti, h->pi, pa.c, rc) :
				    M(ESTALE);
			expect(f, "unlink through a handle", rc, a);
		} else if (op == OP_H_RENEW) {
			struct mparent *p = &m->t[h->ti].p[h->pi];

			rc = store_renew(f->s, h->node);
			a = valid ? m_renew(m, h->ti, p->ttl, &p->deadline, rc) :
				    M(ESTALE);
			expect(f, "renew through a handle", rc, a);
		} else {
			struct store_dirlist dl;

			if (valid) {
				unsigned want = 0;

				for (int ci = 0; ci < NC; ci++)
					if (m->t[h->ti].p[h->pi].link[ci] >= 0)
						want |= 1u << ci;
				compare_list(f, h->node, CN, NC, want,
					     "list through a handle");
			} else {
				rc = store_list(f->s, h->node, &dl);
				if (rc == 0)
					store_dirlist_free(&dl);
				expect(f, "list through an old handle", rc,
				       M(ESTALE));
			}
		}
		break;
	}
	case OP_SNAPSHOT: {
		/*
		 * A snapshot (extra bit 0: of tenant pa.t, else of the store)
		 * while the following operations run at its steps (the next
		 * byte: bit i runs one at step i): its rows must be the
		 * model's listing at the instant it began.
		 */
		static struct model at_e;
		bool tenant = pa.extra & 1;
		uint8_t mask = take(f);
		struct store_snapshot snap;

		if (f->in_snapshot) {
			note(f, "snapshot (inside a snapshot: not taken)");
			break;
		}
		note(f, "snapshot of %s, operations at steps 0x%x",
		     tenant ? TN[pa.t] : "the store", mask);
		if (tenant) {
			rc = lookup_tenant(f, pa.t, &n);
			expect_found(f, "snapshot lookup", rc, m->t[pa.t].live);
			if (rc)
				break;
		}
		at_e = *m;
		f->in_snapshot = true;
		f->snap_mask = mask;
		store_snapshot_step_hook(f->s, snap_step_run, f);
		rc = store_snapshot_take(f->s, n, &snap);
		store_snapshot_step_hook(f->s, NULL, NULL);
		f->in_snapshot = false;
		note(f, "snapshot of %s taken", tenant ? TN[pa.t] : "the store");
		expect(f, "snapshot with transitions", rc, OK);
		compare_snapshot_rows(f, &snap, &at_e, tenant ? pa.t : -1, false,
				      "snapshot with transitions");
		store_snapshot_free(&snap);
		break;
	}
	case OP_COUNT:
		break;
	}
	if (n)
		store_node_unref(f->s, n);
	if (n2)
		store_node_unref(f->s, n2);
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
		settle(&f);
		verify(&f);
	}
	fz_teardown(&f);
	return 0;
}
