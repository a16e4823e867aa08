/*
 * model.c - fuzz_store's reference model (tests/fuzz/fuzz_store.c says what
 * the target checks): tenants, parents, states, tombstones and stages as
 * plain arrays with linear scans, clarity over speed, written from
 * statefs(8) and store.h.  Each m_OP applies an operation the store
 * returned rc for and says, as bits (OK, M(errno)), which outcomes the
 * contract allows.
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

unsigned m_tenant_links(const struct mtenant *t)
{
	unsigned n = 0;

	for (int p = 0; p < NP; p++)
		if (t->p[p].live)
			n += m_parent_links(&t->p[p]);
	return n;
}

unsigned m_count_parents(const struct model *m, int only)
{
	unsigned n = 0;

	for (int t = 0; t < NT; t++)
		if (m->t[t].live && (only < 0 || only == t))
			for (int p = 0; p < NP; p++)
				n += m->t[t].p[p].live;
	return n;
}

unsigned m_count_states(const struct model *m, int only)
{
	unsigned n = 0;

	for (int i = 0; i < NSLOT; i++)
		if (m->st[i].live && (only < 0 || only == m->st[i].tenant))
			n++;
	return n;
}

uint64_t m_count_bytes(const struct model *m, int only)
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
uint64_t m_count_staged(const struct model *m, int only,
			const struct mstage *except)
{
	return m_count_staged_in(m, only, only < 0 ? 0 : m->t[only].inc,
				 except);
}

unsigned m_count_tombs(const struct model *m, int only)
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

unsigned m_count_tenants(const struct model *m)
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
void m_settle(struct model *m)
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
void m_expire(struct model *m)
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

uint64_t m_next_deadline(const struct model *m)
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
bool m_has_parent(const struct model *m, int ti, int pi)
{
	return m->t[ti].live && m->t[ti].p[pi].live;
}

int m_child(const struct model *m, int ti, int pi, int ci)
{
	return m_has_parent(m, ti, pi) ? m->t[ti].p[pi].link[ci] : -1;
}

/* A parent handle is usable while its incarnation is the live one. */
bool handle_valid(const struct model *m, const struct mhandle *h)
{
	return m_has_parent(m, h->ti, h->pi) &&
	       m->t[h->ti].p[h->pi].inc == h->inc;
}

/* Model transitions.  Each gets the store's return code @rc, returns
 * the outcomes the contract allows, and changes the model when the
 * step succeeded. ---------------------------------------------------------- */

unsigned m_mkdir_tenant(struct model *m, int ti, int rc)
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

unsigned m_rmdir_tenant(struct model *m, int ti, int rc)
{
	if (!m->t[ti].live)
		return M(ENOENT);
	if (rc == 0)
		m_tenant_remove(m, ti);
	return OK;
}

unsigned m_join(struct model *m, int ti, int pi, int rc)
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
unsigned m_leave(struct model *m, int ti, int pi, bool must_exist,
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

unsigned m_create(struct model *m, int ti, int pi, int ci, bool excl,
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

unsigned m_unlink(struct model *m, int ti, int pi, int ci, int rc)
{
	if (m_child(m, ti, pi, ci) < 0)
		return M(ENOENT);
	if (rc == 0)
		m_link_drop(m, &m->t[ti].p[pi], ci);
	return OK;
}

/* Link state @sid (of tenant @sti) as (@ti, @pi, @ci). */
unsigned m_link(struct model *m, int sid, int sti, int ti, int pi,
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

unsigned m_rename(struct model *m, int ti, int pi, int ci, int dti,
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

unsigned m_set_ttl(struct model *m, int ti, uint64_t *ttl,
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

unsigned m_renew(struct model *m, int ti, uint64_t ttl,
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
 * every published and staged byte, less what it replaces when
 * @replaces (not an append's write; a truncation always, as it makes an
 * APPEND stage a replacement). */
static unsigned m_stage_fits(const struct model *m, const struct mstage *g,
			     uint64_t n, bool replaces)
{
	uint64_t held = g->staged ? g->len : 0, freed = 0, all, in_t;

	if (n <= held)
		return OK;
	if (replaces && m_stage_live(m, g))
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

unsigned m_truncate(struct model *m, int sid, uint64_t size, int rc)
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

bool m_stage_live(const struct model *m, const struct mstage *g)
{
	return m->st[g->sid].live && m->st[g->sid].inc == g->inc;
}

void m_stage_open(struct model *m, struct mstage *g, int sid,
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
unsigned m_stage_write(struct model *m, struct mstage *g,
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
		    m_stage_fits(m, g, (uint64_t)newlen, false);
		off = g->len;
	} else {
		size_t base = g->staged ? g->len : g->pinlen;

		end = (unsigned __int128)off + n;
		newlen = end > base ? end : base;
		projected = newlen;
		a = projected > MAX_PAYLOAD ? M(EFBIG) :
		    m_stage_fits(m, g, (uint64_t)newlen, true);
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
 * since.  The staged size counts as a replacing write's does, without
 * the content it replaces (a refusal changes nothing); liveness is
 * checked by the publication.
 */
unsigned m_stage_truncate(struct model *m, struct mstage *g,
			  uint64_t size, int rc)
{
	unsigned a;

	if (g->mode == STORE_STAGE_READ)
		return M(EBADF);
	if (size > MAX_PAYLOAD)
		return M(EFBIG);
	a = m_stage_fits(m, g, size, true);
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

unsigned m_stage_publish(struct model *m, struct mstage *g, int rc)
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
unsigned m_stage_flush(struct model *m, struct mstage *g, int rc)
{
	if (g->failed)
		return 1u << code(g->failed);
	return g->written ? m_stage_publish(m, g, rc) : OK;
}
