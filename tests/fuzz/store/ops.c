/*
 * ops.c - fuzz_store's operations (tests/fuzz/fuzz_store.c says what the
 * target checks): each takes its arguments from the input, runs on the
 * store and on the model, and checks the store's return code against
 * what the model allows; snapshots taken while the following operations
 * run at their steps.
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

void stage_drop(struct fz *f, struct mstage *g)
{
	if (!g->open)
		return;
	store_stage_close(g->st);
	store_node_unref(f->s, g->child);
	memset(g, 0, sizeof(*g));
}

void handle_drop(struct fz *f, struct mhandle *h)
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
	fz_settle(f);
	verify(f);
}

void run_op(struct fz *f)
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
			fz_settle(f);
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
