/*
 * snapshot.c - a consistent point-in-time listing of the store or of one
 * tenant, taken without holding the store still, and the memory the
 * open snapshots' texts hold.
 *
 * A snapshot is the store as it was at one instant E between two
 * transitions, copied without holding the store still while it is copied.
 *
 *  1. At E, under the exclusive world lock (no transition half done):
 *     read the clock and the number of the last line of the event log
 *     it includes (the tenant's last line, tenant->seq_shown, for a
 *     tenant; for the root of an engine with one order of all tenants,
 *     s->gseq_shown once the engine settled it, store_root_order, which
 *     the engine's root_settle waited for before, with no lock held),
 *     number the snapshot (its epoch), pin the tenants in
 *     scope and publish the run in s->snap.  O(tenants in scope).
 *  2. With the world open again, the taker copies one unit at a time, each
 *     under its own lock: a tenant (its row and its tombstones' rows,
 *     tenant->lock) or a bucket (the parent's row and its child rows,
 *     parent->lock).
 *  3. Copy before write: a transition about to change a unit that is not
 *     copied for this epoch copies it first (snap_*_cow(), called with the
 *     unit's lock held), so whoever copies a unit, the taker or a
 *     transition, copies it as it was at E; each unit is copied once.
 *     Units made after E start with the epoch and are never copied.  A
 *     state's version, size, nlink and deadline belong to all its links
 *     (in several buckets) and change under its stripe, so a state about
 *     to change is frozen instead: its values at E go to a side table that
 *     bucket copies read.
 *  4. When every unit is copied, the run is withdrawn under the exclusive
 *     world lock (no transition can be inside a hook then), and the rows
 *     are sorted by name outside every lock (snap_order): the order is
 *     the store's at E, not that of its tables, so it is the same on
 *     every mount of a shared store and after a table grows or shrinks.
 *
 * So a transition waits for the two short exclusive sections and, the
 * first time it touches a unit, for the copy of that one unit (bounded by
 * the bucket's size), never for the whole scope.  Snapshots are taken
 * one at a time (s->snap_taker).
 *
 * What it owns
 * ------------
 * The run being taken (struct snap_run, published in s->snap while it
 * runs): its rows, the states it froze; each tenant's and bucket's
 * snap_epoch and each state's epoch say which run copied or froze it.
 * And the memory open snapshots hold (s->held, s->holds per uid).
 *
 * Locks
 * -----
 * The taker holds s->snap_taker (LOCK_SNAP_TAKER) throughout, the world
 * lock exclusive for steps 1 and 4 (and the store lock, LOCK_STORE, to
 * pin the tenants in step 1), and for each unit it copies the world lock
 * shared and the unit's own lock (LOCK_TENANT or LOCK_PARENT), then the
 * stripe of each state it reads (LOCK_STRIPE) and the frozen states'
 * lock (LOCK_FROZEN, a leaf).  A transition's copy (snap_tenant_cow,
 * snap_parent_cow) runs with the unit's lock held and takes the run's
 * row lock (LOCK_SNAP_ROWS) for its copy; snap_state_cow() runs with the
 * state's stripe held and takes only LOCK_FROZEN.  The memory held takes
 * s->hold_lock alone (LOCK_SNAP_HOLD, a leaf).
 */
#define _GNU_SOURCE /* qsort_r */
#include "store/internal.h"

#include <errno.h>
#include <stdlib.h>

/* A state's fields at E, kept when it changes before its links are copied. */
struct snap_state {
	UT_hash_handle hh;
	uint64_t ino;                  /* key */
	int64_t version, size, nlink;
	uint64_t deadline;
};

/* Rows and their names (offset 0 is ""), as one copier fills them. */
struct snap_buf {
	struct store_snap_row *rows;
	size_t n, rcap;
	char *names;
	size_t nlen, ncap;
};

struct snap_run {
	uint64_t epoch;                /* immutable while published */
	uint64_t now;                  /* E, on the store clock */
	struct tenant *only;           /* the scope; NULL: the whole store */
	atomic_int rc;                 /* the first failure (-ENOMEM) */
	/* The taker's copies, touched by its thread only, and the copies
	 * made by transitions, under a lock of their own: the taker never
	 * holds a lock that a transition waits for longer than one unit. */
	struct snap_buf taken;
	pthread_mutex_t lock;
	struct snap_buf hooked;        /* lock */
	pthread_mutex_t frozen_lock;   /* a leaf */
	struct snap_state *frozen;
};

/* The run a unit of tenant @t takes part in, or NULL. */
static struct snap_run *snap_run_for(struct store *s, struct tenant *t)
{
	struct snap_run *r = atomic_load_explicit(&s->snap, memory_order_acquire);

	return r && (!r->only || r->only == t) ? r : NULL;
}

/* Make room for @need elements of @size in *@buf (capacity *@cap). */
static bool snap_grow(struct snap_run *r, void *bufp, size_t *cap, size_t need,
		      size_t size)
{
	void **buf = bufp;
	size_t ncap = *cap ? *cap : 256;
	void *nb;

	if (need <= *cap)
		return true;
	while (ncap < need)
		ncap *= 2;
	nb = st_realloc(*buf, ncap * size);
	if (!nb) {
		atomic_store(&r->rc, -ENOMEM);
		return false;
	}
	*buf = nb;
	*cap = ncap;
	return true;
}

/* Copy @name into @b's names; returns its offset. */
static size_t snap_name(struct snap_run *r, struct snap_buf *b, const char *name)
{
	size_t len = strlen(name) + 1, start = b->nlen ? 0 : 1;

	if (len == 1 || atomic_load(&r->rc) ||
	    !snap_grow(r, &b->names, &b->ncap, b->nlen + start + len, 1))
		return 0;
	if (start)
		b->names[b->nlen++] = '\0';
	memcpy(b->names + b->nlen, name, len);
	b->nlen += len;
	return b->nlen - len;
}

/* A new row, numbers -1 and names "" until set. */
static struct store_snap_row *snap_row(struct snap_run *r, struct snap_buf *b,
				       enum store_snap_kind kind, size_t tenant,
				       size_t parent, size_t child)
{
	struct store_snap_row *row;

	if (atomic_load(&r->rc) ||
	    !snap_grow(r, &b->rows, &b->rcap, b->n + 1, sizeof(*row)))
		return NULL;
	row = &b->rows[b->n++];
	*row = (struct store_snap_row){
		.kind = kind,
		.tenant = (const char *)(uintptr_t)tenant,
		.parent = (const char *)(uintptr_t)parent,
		.child = (const char *)(uintptr_t)child,
		.generation = -1, .version = -1, .size = -1, .nlink = -1,
		.ttl_ms_left = -1, .ino = -1,
	};
	return row;
}

static int64_t ttl_left(uint64_t deadline, uint64_t now)
{
	return deadline ? (int64_t)(deadline - now) : -1;
}

/* Tenant @t's own row and its tombstones' rows (t->lock held). */
static void snap_copy_tenant(struct snap_run *r, struct snap_buf *b,
			     struct tenant *t)
{
	struct store_snap_row *row;
	struct tomb *tb;
	size_t name = snap_name(r, b, t->name);

	row = snap_row(r, b, STORE_SNAP_TENANT, name, 0, 0);
	if (row) {
		row->ino = (int64_t)t->node.ino;
		row->tenant_uid = t->meta.uid;
		row->tenant_gid = t->meta.gid;
		row->tenant_mode = t->node.mode;
	}
	for (tb = t->tombs; tb; tb = tb->hh.next) {
		if (tb->deadline_ms <= r->now)
			continue;
		row = snap_row(r, b, STORE_SNAP_TOMBSTONE, name,
			       snap_name(r, b, tb->name), 0);
		if (row) {
			row->generation = (int64_t)tb->generation;
			row->ttl_ms_left = (int64_t)(tb->deadline_ms - r->now);
		}
	}
}

/*
 * The links of state @c (its stripe held) a snapshot at @now shows: those
 * in parents not past their deadline at @now, whose buckets it leaves
 * out, reaped or not.  So a row's nlink is the number of rows of its
 * state.  Whether a parent that links @c was past its deadline at @now
 * cannot change later (an expired node is never renewed, and a leaving
 * parent keeps its deadline until its links are gone), so a state frozen
 * after the instant counts as one read at it.
 */
static int64_t snap_nlink_locked(const struct store *s, const struct child *c,
				 uint64_t now)
{
	const struct link *l;
	int64_t n = 0;

	store_assert_held(LOCK_STRIPE);
	if (c->node.nlink <= 1)
		return c->node.nlink; /* shown only if its parent is */
	LL_FOREACH2(c->slinks, l, snext)
		n += !is_expired(s, &l->parent->node, now);
	return n;
}

/* State @c's fields as they were at E (takes its stripe): frozen if it
 * changed since, else as they are. */
static void snap_state_at(struct store *s, struct snap_run *r,
			  struct child *c, struct snap_state *v)
{
	lock(stripe(s, c), LOCK_STRIPE);
	if (c->node.epoch == (uint32_t)r->epoch) {
		struct snap_state *f;

		lock(&r->frozen_lock, LOCK_FROZEN);
		HASH_FIND(hh, r->frozen, &c->node.ino, sizeof(uint64_t), f);
		if (f)
			*v = *f;
		unlock(&r->frozen_lock, LOCK_FROZEN);
		if (!f && !atomic_load(&r->rc)) {
			/* Linked from a bucket not yet copied, so it was
			 * there at E: it must have been frozen. */
			fprintf(stderr, "statefs: snapshot lost state %llu\n",
				(unsigned long long)c->node.ino);
			abort();
		}
	} else {
		v->version = (int64_t)c->version;
		v->size = (int64_t)blob_len(c->content);
		v->nlink = snap_nlink_locked(s, c, r->now);
		v->deadline = deadline_of(s, &c->node);
	}
	unlock(stripe(s, c), LOCK_STRIPE);
}

/* Parent @p's row and its child rows (p->lock held). */
static void snap_copy_parent(struct store *s, struct snap_run *r,
			     struct snap_buf *b, struct parent *p)
{
	uint64_t deadline = deadline_of(s, &p->node);
	struct store_snap_row *row;
	size_t tname, pname;
	struct link *l;
	uint32_t i;

	if (deadline && deadline <= r->now)
		return; /* expired at E: not there */
	tname = snap_name(r, b, p->tenant->name);
	pname = snap_name(r, b, p->name);
	row = snap_row(r, b, STORE_SNAP_PARENT, tname, pname, 0);
	if (row) {
		row->generation = (int64_t)p->generation;
		row->ttl_ms_left = ttl_left(deadline, r->now);
		row->ino = (int64_t)p->node.ino;
	}
	ptab_for_each(&p->links, i, l) {
		struct snap_state v = { 0 };

		if (atomic_load(&r->rc))
			break;

		snap_state_at(s, r, l->child, &v);
		if (v.deadline && v.deadline <= r->now)
			continue;
		row = snap_row(r, b, STORE_SNAP_CHILD, tname, pname,
			       snap_name(r, b, l->name));
		if (row) {
			row->generation = (int64_t)p->generation;
			row->version = v.version;
			row->size = v.size;
			row->nlink = v.nlink;
			row->ttl_ms_left = ttl_left(v.deadline, r->now);
			row->ino = (int64_t)l->child->node.ino;
		}
	}
}

/*
 * t->lock held: copy @t's own rows unless already copied, by the taker
 * (@taker) or by a transition about to change them.  No transition
 * reaches this for a tenant removed before the snapshot's instant (those
 * that could check for it first, and a removed tenant has no tombstones
 * left), and one removed after it stays pinned by the taker.
 */
static void snap_tenant_unit(struct store *s, struct tenant *t, bool taker)
{
	struct snap_run *r = snap_run_for(s, t);

	if (!r || t->snap_epoch == r->epoch)
		return;
	t->snap_epoch = r->epoch;
	if (taker) {
		snap_copy_tenant(r, &r->taken, t);
	} else {
		lock(&r->lock, LOCK_SNAP_ROWS);
		snap_copy_tenant(r, &r->hooked, t);
		unlock(&r->lock, LOCK_SNAP_ROWS);
	}
}

void snap_tenant_cow(struct store *s, struct tenant *t)
{
	store_assert_held(LOCK_TENANT);
	snap_tenant_unit(s, t, false);
}

/*
 * p->lock held: copy bucket @p unless already copied.  A departed bucket
 * (reached through an old handle) is skipped: one that left after the
 * snapshot's instant was copied as it left (parent_remove_locked), one
 * that left before is not in the snapshot.
 */
static void snap_parent_unit(struct store *s, struct parent *p, bool taker)
{
	struct snap_run *r = snap_run_for(s, p->tenant);

	if (!r || is_dead(&p->node) || atomic_load(&p->snap_epoch) == r->epoch)
		return;
	atomic_store(&p->snap_epoch, r->epoch);
	if (taker) {
		snap_copy_parent(s, r, &r->taken, p);
	} else {
		lock(&r->lock, LOCK_SNAP_ROWS);
		snap_copy_parent(s, r, &r->hooked, p);
		unlock(&r->lock, LOCK_SNAP_ROWS);
	}
}

void snap_parent_cow(struct store *s, struct parent *p)
{
	store_assert_held(LOCK_PARENT);
	snap_parent_unit(s, p, false);
}

/* c's stripe held, before its version, size, nlink or deadline change:
 * keep their values at E unless already kept. */
void snap_state_cow(struct store *s, struct child *c)
{
	struct snap_run *r = c->node.nlink ?
		snap_run_for(s, child_tenant(c)) : NULL;
	struct snap_state *f;

	store_assert_held(LOCK_STRIPE);
	if (!r || c->node.epoch == (uint32_t)r->epoch)
		return;
	c->node.epoch = (uint32_t)r->epoch;
	f = st_malloc(sizeof(*f));
	if (!f) {
		atomic_store(&r->rc, -ENOMEM);
		return;
	}
	f->ino = c->node.ino;
	f->version = (int64_t)c->version;
	f->size = (int64_t)blob_len(c->content);
	f->nlink = snap_nlink_locked(s, c, r->now);
	f->deadline = deadline_of(s, &c->node);
	lock(&r->frozen_lock, LOCK_FROZEN);
	hash_oom = 0;
	HASH_ADD(hh, r->frozen, ino, sizeof(uint64_t), f);
	unlock(&r->frozen_lock, LOCK_FROZEN);
	if (hash_oom) {
		atomic_store(&r->rc, -ENOMEM); /* the snapshot fails, not this */
		free(f);
	}
}

#ifdef STORE_FAULTS
void store_snapshot_step_hook(struct store *s,
			      void (*fn)(void *arg, unsigned step), void *arg)
{
	s->snap_step_fn = fn;
	s->snap_step_arg = arg;
}

void store_snapshot_epochs(struct store *s, uint64_t epochs)
{
	lock(&s->snap_taker, LOCK_SNAP_TAKER);
	scan_begin(s);
	s->snap_epochs = epochs;
	scan_end(s);
	unlock(&s->snap_taker, LOCK_SNAP_TAKER);
}

static void snap_step(struct store *s, unsigned *step)
{
	if (s->snap_step_fn)
		s->snap_step_fn(s->snap_step_arg, (*step)++);
}
#else
#define snap_step(s, step) ((void)(step))
#endif

#define SNAP_BATCH 64

/*
 * Copy every bucket of @t not copied yet, SNAP_BATCH at a time: the
 * tenant lock is held only to pick a batch (counted, so none is freed
 * under us), a bucket's lock only for its own copy.  The tenant's table
 * keeps its order (joins append, leaves unlink), so the walk goes on
 * after the last bucket of the batch still in it; if all of them left,
 * it starts over and skips what is copied.
 */
static void snap_walk_buckets(struct store *s, struct snap_run *r,
			      struct tenant *t, unsigned *step)
{
	struct parent *batch[SNAP_BATCH], *next[SNAP_BATCH];
	size_t n = 0, m;

	for (bool first = true;; first = false) {
		struct parent *p;

		world_enter(s);
		lock(&t->lock, LOCK_TENANT);
		p = t->parents;
		for (size_t i = n; !first && i-- > 0;)
			if (!is_dead(&batch[i]->node)) {
				p = batch[i]->hh.next;
				break;
			}
		for (m = 0; p && m < SNAP_BATCH; p = p->hh.next)
			if (atomic_load(&p->snap_epoch) != r->epoch) {
				store_node_ref(&p->node);
				next[m++] = p;
			}
		unlock(&t->lock, LOCK_TENANT);
		world_exit(s);
		for (size_t i = 0; i < n; i++)
			store_node_unref(s, &batch[i]->node);
		memcpy(batch, next, m * sizeof(*next));
		n = m;
		if (!n)
			break;
		for (size_t i = 0; i < n && !atomic_load(&r->rc); i++) {
			world_enter(s);
			bucket_lock(batch[i]);
			snap_parent_unit(s, batch[i], true);
			bucket_unlock(batch[i]);
			world_exit(s);
			snap_step(s, step);
		}
	}
}

/* Append the transitions' copies to the taker's (no lock held). */
static int snap_merge(struct snap_run *r)
{
	struct snap_buf *a = &r->taken, *h = &r->hooked;

	if (!h->n)
		return 0;
	if (!snap_grow(r, &a->rows, &a->rcap, a->n + h->n, sizeof(*a->rows)) ||
	    !snap_grow(r, &a->names, &a->ncap, a->nlen + h->nlen, 1))
		return -ENOMEM;
	memcpy(a->names + a->nlen, h->names, h->nlen);
	for (size_t i = 0; i < h->n; i++) {
		struct store_snap_row *row = &a->rows[a->n + i];

		*row = h->rows[i];
		/* Offset 0 ("") stays: every non-empty names starts "". */
		if ((uintptr_t)row->tenant)
			row->tenant += a->nlen;
		if ((uintptr_t)row->parent)
			row->parent += a->nlen;
		if ((uintptr_t)row->child)
			row->child += a->nlen;
	}
	a->n += h->n;
	a->nlen += h->nlen;
	return 0;
}

/* A row's place among a tenant's rows: its own row, then its buckets
 * (a parent's row, then its children), then its tombstones. */
static int snap_rank(const struct store_snap_row *row)
{
	return row->kind == STORE_SNAP_TENANT ? 0 :
	       row->kind == STORE_SNAP_TOMBSTONE ? 2 : 1;
}

/*
 * Rows @a and @b (indices into the rows of snap_buf @arg, names still
 * offsets) in snapshot order: by tenant name, rank, parent (or
 * tombstone) name, child name, each in byte order (strcmp compares
 * unsigned bytes, as LC_ALL=C sort does); a parent's row has no child
 * name ("") and so comes before its children.  Names are unique at one
 * instant, so no two rows compare equal but the inodes break a tie.
 */
static int snap_row_cmp(const void *a, const void *b, void *arg)
{
	const struct snap_buf *buf = arg;
	const struct store_snap_row *x = &buf->rows[*(const size_t *)a],
				    *y = &buf->rows[*(const size_t *)b];
	const char *n = buf->names;
	int c;

	if (!n)
		return 0; /* no names: only empty rows, none to order */
	c = strcmp(n + (uintptr_t)x->tenant, n + (uintptr_t)y->tenant);
	if (c == 0)
		c = snap_rank(x) - snap_rank(y);
	if (c == 0)
		c = strcmp(n + (uintptr_t)x->parent, n + (uintptr_t)y->parent);
	if (c == 0)
		c = strcmp(n + (uintptr_t)x->child, n + (uintptr_t)y->child);
	if (c == 0)
		c = x->ino < y->ino ? -1 : x->ino > y->ino;
	return c;
}

/*
 * Put the rows in snapshot order (snap_row_cmp), whoever copied them and
 * in whatever order their tables held them: sort their indices, then
 * permute the rows in place, cycle by cycle; give every row its tenant's
 * owner and mode; turn name offsets into pointers.  O(rows log rows)
 * string comparisons and one index per row, no lock held.
 */
static int snap_order(struct snap_run *r)
{
	struct snap_buf *b = &r->taken;
	const struct store_snap_row *owner = NULL;
	size_t *order, *dest;

	order = st_malloc((b->n + 1) * sizeof(*order));
	dest = st_malloc((b->n + 1) * sizeof(*dest));
	if (!order || !dest) {
		free(order);
		free(dest);
		return -ENOMEM;
	}
	for (size_t i = 0; i < b->n; i++)
		order[i] = i;
	qsort_r(order, b->n, sizeof(*order), snap_row_cmp, b);
	for (size_t k = 0; k < b->n; k++)
		dest[order[k]] = k;
	free(order);
	for (size_t i = 0; i < b->n; i++) {
		while (dest[i] != i) {
			size_t d = dest[i], k = dest[d];
			struct store_snap_row tmp = b->rows[d];

			b->rows[d] = b->rows[i];
			b->rows[i] = tmp;
			dest[d] = d;
			dest[i] = k;
		}
	}
	free(dest);
	for (size_t i = 0; i < b->n; i++) {
		struct store_snap_row *row = &b->rows[i];

		row->tenant = b->names + (uintptr_t)row->tenant;
		row->parent = b->names + (uintptr_t)row->parent;
		row->child = b->names + (uintptr_t)row->child;
		if (row->kind == STORE_SNAP_TENANT)
			owner = row;
		if (!owner || strcmp(owner->tenant, row->tenant) != 0) {
			fprintf(stderr, "statefs: snapshot rows without a tenant\n");
			abort();
		}
		row->tenant_uid = owner->tenant_uid;
		row->tenant_gid = owner->tenant_gid;
		row->tenant_mode = owner->tenant_mode;
	}
	return 0;
}

static void snap_buf_free(struct snap_buf *b)
{
	free(b->rows);
	free(b->names);
}

static uint64_t usec_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* Step 1 (the world held exclusively): pin the tenants in scope. */
static int snap_pin_tenants(struct store *s, struct tenant *only,
			    struct tenant ***out, size_t *n)
{
	struct tenant *t, **ts;
	int rc = 0;

	*n = 0;
	lock(&s->lock, LOCK_STORE);
	ts = st_malloc((only ? 1 : HASH_COUNT(s->tenants) + 1) * sizeof(*ts));
	if (!ts)
		rc = -ENOMEM;
	else if (only && is_dead(&only->node))
		rc = -ESTALE;
	else if (only)
		ts[(*n)++] = only;
	else
		for (t = s->tenants; t; t = t->hh.next)
			ts[(*n)++] = t;
	for (size_t i = 0; i < *n; i++)
		store_node_ref(&ts[i]->node);
	unlock(&s->lock, LOCK_STORE);
	*out = ts;
	return rc;
}

/*
 * Every state reachable now forgets which snapshot froze it (the world
 * lock exclusive): states keep the epoch's low 32 bits, so before those
 * wrap to a value a state may hold, all go back to 0, which no run uses.
 * Unreachable states are never frozen again.
 */
static void states_epoch_reset(struct store *s)
{
	struct tenant *t;
	struct parent *p;
	struct link *l;
	uint32_t i;

	for (t = s->tenants; t; t = t->hh.next)
		for (p = t->parents; p; p = p->hh.next)
			ptab_for_each(&p->links, i, l)
				l->child->node.epoch = 0;
}

int store_snapshot_take(struct store *s, struct store_node *tenant,
			struct store_snapshot *out)
{
	struct snap_run r = { .only = tenant ? as_tenant(tenant) : NULL };
	struct snap_state *f, *ftmp;
	struct tenant **ts = NULL;
	uint64_t t0, pause;
	size_t nt = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	if (tenant && !r.only)
		return -EINVAL;
	pthread_mutex_init(&r.lock, NULL);
	pthread_mutex_init(&r.frozen_lock, NULL);

	/* The root's number, where the engine settles it: waited for with
	 * no lock held. */
	if (!tenant && s->ops->root_settle)
		s->ops->root_settle(s);
	lock(&s->snap_taker, LOCK_SNAP_TAKER);
	t0 = usec_now();
	scan_begin(s);
	r.now = store_now_ms(s);
	/* The last line it includes: no transition is half done.  A
	 * shared store numbers per tenant, and its whole has one number
	 * only where its authority has one order of all tenants, once the
	 * mirror holds a prefix of it (store_root_order). */
	if (r.only)
		out->seq = (int64_t)atomic_load(&r.only->seq_shown);
	else if (!store_is_shared(s))
		out->seq = (int64_t)store_events_end(s) - 1;
	else {
		int64_t g = (int64_t)atomic_load(&s->gseq_shown);

		out->seq = store_root_settled(s) ? g : -1;
	}
	rc = snap_pin_tenants(s, r.only, &ts, &nt);
	if (rc == 0) {
		r.epoch = ++s->snap_epochs;
		if ((uint32_t)r.epoch == 0) {
			/* Once in 2^32 snapshots: a state frozen 2^32 runs ago
			 * would look frozen for this one. */
			r.epoch = ++s->snap_epochs;
			states_epoch_reset(s);
		}
		atomic_store_explicit(&s->snap, &r, memory_order_release);
	}
	scan_end(s);
	pause = usec_now() - t0;
	if (rc == 0) {
		unsigned step = 0;

		snap_step(s, &step);
		for (size_t i = 0; i < nt && !atomic_load(&r.rc); i++) {
			world_enter(s);
			lock(&ts[i]->lock, LOCK_TENANT);
			snap_tenant_unit(s, ts[i], true);
			unlock(&ts[i]->lock, LOCK_TENANT);
			world_exit(s);
			snap_step(s, &step);
			snap_walk_buckets(s, &r, ts[i], &step);
		}
		t0 = usec_now();
		scan_begin(s);
		atomic_store_explicit(&s->snap, NULL, memory_order_release);
		scan_end(s);
		pause += usec_now() - t0;
		rc = atomic_load(&r.rc);
	}
	unlock(&s->snap_taker, LOCK_SNAP_TAKER);

	for (size_t i = 0; i < nt; i++)
		store_node_unref(s, &ts[i]->node);
	free(ts);
	HASH_ITER(hh, r.frozen, f, ftmp) {
		HASH_DEL(r.frozen, f);
		free(f);
	}
	pthread_mutex_destroy(&r.lock);
	pthread_mutex_destroy(&r.frozen_lock);
	if (rc == 0)
		rc = snap_merge(&r);
	if (rc == 0)
		rc = snap_order(&r);
	snap_buf_free(&r.hooked);
	if (rc) {
		free(r.taken.rows);
		free(r.taken.names);
		return rc;
	}
	out->rows = r.taken.rows;
	out->n = r.taken.n;
	out->arena = r.taken.names;
	out->stall_us = pause;
	out->taken_ms = r.now;
	return 0;
}

void store_snapshot_free(struct store_snapshot *snap)
{
	free(snap->rows);
	free(snap->arena);
	memset(snap, 0, sizeof(*snap));
}

/*
 * Snapshot memory: what the open snapshots' texts hold, store-wide and per
 * uid.  The per-uid entries are few (one per uid with an open snapshot)
 * and go when they hold nothing; the lock is a leaf, held for a hash
 * lookup.
 */
int store_snapshot_hold(struct store *s, uid_t uid, uint64_t bytes)
{
	struct snap_hold *h, *fresh = NULL;
	uint64_t share = uid == 0 ? 0 : s->lim.user_max_snapshot_bytes;
	int rc = 0;

	if (bytes == 0)
		return 0;
	if (share) {
		/* Allocated before the lock: nothing to undo after it. */
		fresh = st_calloc(1, sizeof(*fresh));
		if (!fresh)
			return -ENOMEM;
	}
	lock(&s->hold_lock, LOCK_SNAP_HOLD);
	HASH_FIND(hh, s->holds, &uid, sizeof(uid), h);
	if (bytes > s->lim.max_snapshot_bytes ||
	    s->held > s->lim.max_snapshot_bytes - bytes) {
		rc = -ENFILE;
	} else if (share && (bytes > share ||
			     (h && h->bytes > share - bytes))) {
		rc = -EMFILE;
	} else if (share && !h) {
		fresh->uid = uid;
		hash_oom = 0;
		HASH_ADD(hh, s->holds, uid, sizeof(uid), fresh);
		if (hash_oom) {
			rc = -ENOMEM;
		} else {
			h = fresh;
			fresh = NULL; /* the table's now */
		}
	}
	if (rc == 0) {
		s->held += bytes;
		if (h)
			h->bytes += bytes;
	}
	unlock(&s->hold_lock, LOCK_SNAP_HOLD);
	free(fresh);
	return rc;
}

void store_snapshot_release(struct store *s, uid_t uid, uint64_t bytes)
{
	struct snap_hold *h;

	lock(&s->hold_lock, LOCK_SNAP_HOLD);
	if (s->held < bytes)
		abort(); /* released more than was held: a bug */
	s->held -= bytes;
	HASH_FIND(hh, s->holds, &uid, sizeof(uid), h);
	if (h) {
		if (h->bytes < bytes)
			abort();
		h->bytes -= bytes;
		if (h->bytes == 0) {
			HASH_DEL(s->holds, h);
			free(h);
		}
	}
	unlock(&s->hold_lock, LOCK_SNAP_HOLD);
}
