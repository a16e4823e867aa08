/*
 * events.c - the store's side of its event log: each transition's line,
 * appended inside the transition, and the hooks that wake whoever reads
 * the log once the transition's locks are released.
 *
 * What it owns
 * ------------
 * The log itself (s->events, store/evlog.c: a bounded ring with its own
 * leaf mutex) and, per thread, what the transition running on the thread
 * has appended (event_appended, event_internal) and which states' size,
 * times or link count changed behind the kernel's back (altered), both
 * handed to the adapter's hooks by event_hook_run() after the transition
 * let go of its locks.
 *
 * Event order
 * -----------
 * A transition appends its line inside the critical section that makes
 * the change, under the lock that orders it with the changes a replay of
 * the stream must see before or after it:
 *  - a state's lines (write, unlink, expire of a child, link, rename,
 *    exchange) under the state's stripe, in the section that changes its
 *    content or its set of links, so they follow its publications in the
 *    order they happened, and the names a line gives (a link's or a
 *    rename's source) reach the state at that point of the stream;
 *  - a bucket's lines (join, create) under the locks that admit into it,
 *    and a removal's line under the lock that frees the name (t->lock
 *    for a parent, store->lock for a tenant), so a new incarnation's
 *    join follows it;
 *  - a cascade (leave, depart, a parent's expiry, a tenant cleanup, a
 *    drain's clear) takes each link out of the departing bucket under
 *    that state's stripe and appends the parent's (or tenant's) line
 *    only after the last one, still holding the tenant's lock.  A
 *    publication that took a stripe first is reported before that line;
 *    one that comes after finds the link gone: its lines do not name the
 *    departed parent, and a state left with no link refuses it (-ESTALE).
 * So no line of a child ever follows the removal line of its parent's
 * generation.
 *
 * Locks
 * -----
 * emit() and emit_from_locked() run inside the transition's critical
 * section, with whatever it holds (emit_from_locked(): the state's stripe,
 * LOCK_STRIPE); they take the tenant's acl_lock (LOCK_ACL) to stamp the
 * line with who may read it, then the log's mutex (LOCK_EVLOG), one after
 * the other: both are leaves.  The readers (store_events_*) take only the
 * log's mutex; the adapter calls them with a lock of its own held
 * (fs/'s watch_lock), which is outside the store's order: the log's
 * mutex is the innermost of the two.  store_events_start() calls the
 * engine's events_history with no lock held (it waits on the network).
 * event_hook_run() runs with no store lock held, and so do the hooks it
 * calls.
 *
 * A reader started at a number
 * ----------------------------
 * On a store whose lines show an engine's numbers (a mirror's, per
 * tenant), each line of a tenant carries the tenant's number before it
 * (prev: its line before, or where the tenant was loaded from), so a
 * tenant's reader started at N knows whether the log held N (its first
 * line at N or past it follows a number below N) without counting on
 * numbers being consecutive: an attribute's change takes a number and
 * shows no line.  When the log does not hold N, the engine may give the
 * lines (its events_history), which the reader reads first.  Where the
 * engine's authority has one order of all tenants (store_root_order),
 * each line also carries that order's number (gshown) and the newest one
 * before it (gprev: s->gseq_shown, which a load moves too), and a root
 * reader reads, starts and checks by those the same way.
 */
#include "store/internal.h"

#include <errno.h>

/* Appending --------------------------------------------------------------- */

/* Set when this thread appended an event; the transition wrapper calls
 * the hook once its locks are released. */
static __thread bool event_appended, event_internal;

/* Append entry @e of tenant @t (NULL: of no tenant). */
static void emit_entry(struct store *s, struct given *g, struct tenant *t, struct evlog_entry *e)
{
	uint64_t seq;

	/* A line of a change an engine decided shows the engine's number,
	 * and another mount's change is internal here (struct given). */
	if (g) {
		if (g->quiet)
			return;
		e->shown = g->seq++;
		e->gshown = g->gseq ? g->gseq++ : 0;
		e->internal = e->internal || g->others;
		e->hidden = g->hidden;
	}
	/* Who may read the line: the tenant's owner and mode now. */
	if (t) {
		lock(&t->acl_lock, LOCK_ACL);
		e->tenant_uid = t->meta.uid;
		e->tenant_gid = t->meta.gid;
		e->tenant_mode = t->node.mode;
		unlock(&t->acl_lock, LOCK_ACL);
	}
	/* The tenant's number before this line: an engine's lines of one
	 * tenant are emitted one at a time, in order. */
	if (t && e->shown && !e->overflow && !e->hidden)
		e->prev = atomic_load(&t->seq_shown);
	/* And the number before it in the order of all tenants: one
	 * applying thread, so a plain maximum. */
	if (e->gshown && !e->overflow && !e->hidden)
		e->gprev = atomic_load(&s->gseq_shown);
	lock_call_begin(LOCK_EVLOG);
	seq = evlog_append(s->events, e);
	lock_call_end(LOCK_EVLOG);
	if (seq && e->gshown && !e->overflow && !e->hidden &&
	    e->gshown > e->gprev)
		atomic_store(&s->gseq_shown, e->gshown);
	/* What the tenant's .snapshot ends at: the engine's numbers only
	 * for an engine's lines, never a reload's marks. */
	if (seq && t && !e->overflow && !e->hidden)
		atomic_store(&t->seq_shown, e->shown ? e->shown : seq);
	if (seq) {
		event_appended = true;
		event_internal |= e->internal;
	}
}

/*
 * Append one event line (inside the transition's critical section, so
 * sequence numbers follow the order of the transitions).
 */
void emit(struct store *s, struct given *g, enum store_op op, bool internal,
	  struct store_node *n, struct tenant *t, const char *parent,
	  const char *child, int64_t gen, int64_t version)
{
	struct evlog_entry e = {
		.op = op,
		.internal = internal,
		.kind = n ? n->kind : child ? STORE_CHILD :
			parent ? STORE_PARENT : STORE_TENANT,
		.ino = n ? n->ino : 0,
		.tenant_ino = t ? t->node.ino : 0,
		.tenant = t ? t->name : NULL,
		.parent = parent,
		.child = child,
		.generation = gen,
		.version = version,
	};

	emit_entry(s, g, t, &e);
}

void emit_overflow(struct store *s, struct tenant *t)
{
	struct evlog_entry e = {
		.op = STORE_OP_CLEANUP,
		.internal = true,
		.kind = STORE_TENANT,
		.ino = t ? t->node.ino : 0,
		.tenant_ino = t ? t->node.ino : 0,
		.tenant = t ? t->name : NULL,
		.generation = -1,
		.version = -1,
		.overflow = true,
		.end = t == NULL,
	};

	/* No number of the engine's: it stands for lost ones. */
	emit_entry(s, NULL, t, &e);
}

/*
 * Report (@op link, rename or exchange) that link @to reaches state @c,
 * which link @from reaches (or reached, for a rename), with @c's stripe
 * held: inside the section that changed @c's links, so the line is
 * ordered with @c's publications and @from names the state at that point
 * of the stream.
 */
void emit_from_locked(struct store *s, struct given *g, enum store_op op,
		      struct child *c, const struct link *to,
		      const struct link *from)
{
	struct parent *p = to->parent;
	struct evlog_entry e = {
		.op = op,
		.kind = STORE_CHILD,
		.ino = c->node.ino,
		.tenant_ino = p->tenant->node.ino,
		.tenant = p->tenant->name,
		.parent = p->name,
		.child = to->name,
		.generation = (int64_t)p->generation,
		.version = (int64_t)c->version,
		.from_parent = from->parent->name,
		.from_child = from->name,
	};

	store_assert_held(LOCK_STRIPE);
	emit_entry(s, g, p->tenant, &e);
}

/*
 * States whose attributes changed in a way the kernel cannot have seen:
 * a publication (size and times, published at close, after the writes
 * the kernel saw) and a link lost to a cascade (a leave, a .depart, an
 * expiry or a drain of a parent) by a state that lives on through other
 * links.  The adapter is told after the transition, before its events
 * are handed out (store_set_attr_hook).  Per thread, like the event
 * flags.  A hint: if the list cannot grow, the hint is lost and the
 * transition stands.
 */
static __thread struct {
	uint64_t *ino;
	size_t n, cap;
} altered;

void note_attrs_changed(uint64_t ino)
{
	if (altered.n == altered.cap) {
		size_t ncap = altered.cap ? altered.cap * 2 : 64;
		uint64_t *v = st_realloc(altered.ino, ncap * sizeof(*v));

		if (!v)
			return;
		altered.ino = v;
		altered.cap = ncap;
	}
	altered.ino[altered.n++] = ino;
}

void event_hook_run(struct store *s)
{
	/* Attributes first: whoever reacts to an event must find them. */
	if (altered.cap) {
		if (altered.n && s->attr_hook)
			s->attr_hook(s->attr_arg, altered.ino, altered.n);
		/* Freed each time: a thread that ends keeps nothing. */
		free(altered.ino);
		altered.ino = NULL;
		altered.n = altered.cap = 0;
	}
	if (event_appended) {
		bool internal = event_internal;

		event_appended = event_internal = false;
		if (s->event_hook)
			s->event_hook(s->event_arg, internal);
	}
}

void store_set_touch_hook(struct store *s,
			  void (*hook)(void *arg, struct store_node *n),
			  void *arg)
{
	s->touch_hook = hook;
	s->touch_arg = arg;
}

void store_set_attr_hook(struct store *s,
			  void (*hook)(void *arg, const uint64_t *ino, size_t n),
			  void *arg)
{
	s->attr_hook = hook;
	s->attr_arg = arg;
}

/* Reading the log ---------------------------------------------------------- */

/* Does a reader of @tenant (NULL: the root) read by the numbers of one
 * order of all tenants?  A root reader of an engine whose authority has
 * one (store_root_order); asked again when it starts, since a load may
 * have brought the order since it was opened. */
static bool by_root_order(struct store *s, const struct store_node *tenant)
{
	return !tenant && s->ops != &embedded_ops &&
	       atomic_load(&s->root_order);
}

int store_events_open(struct store *s, struct store_node *tenant,
		      const struct store_cred *cred, unsigned flags,
		      struct store_event_reader **out)
{
	struct store_event_reader *r = st_calloc(1, sizeof(*r));
	gid_t *groups = NULL;

	*out = NULL;
	if (!r)
		return -ENOMEM;
	/* Root sees every line: no filter to run. */
	if (cred && cred->uid != 0) {
		if (cred->ngroups) {
			groups = st_calloc(cred->ngroups, sizeof(*groups));
			if (!groups) {
				free(r);
				return -ENOMEM;
			}
			memcpy(groups, cred->groups,
			       cred->ngroups * sizeof(*groups));
		}
		r->own = *cred;
		r->own.groups = groups;
		r->cred = &r->own;
	}
	r->tenant_ino = tenant ? tenant->ino : 0;
	/* The log caps a window at its length. */
	r->window = flags & STORE_EVENTS_WHOLE_LOG ? UINT64_MAX :
		    STORE_EVENT_WINDOW;
	r->internal_only = (flags & STORE_EVENTS_INTERNAL) != 0;
	r->gorder = by_root_order(s, tenant);
	lock_call_begin(LOCK_EVLOG);
	evlog_open(s->events, r);
	lock_call_end(LOCK_EVLOG);
	/* A tenant that is gone would never show a line: a cleanup (or the
	 * end of the instance, appended after its tenants died) came
	 * before this open. */
	if (tenant && atomic_load(&tenant->dead)) {
		store_events_close(r);
		return -ESTALE;
	}
	*out = r;
	return 0;
}

void store_events_close(struct store_event_reader *r)
{
	if (!r)
		return;
	free(r->hist);
	free((gid_t *)r->own.groups);
	free(r);
}

void store_events_gate(struct store_event_reader *r, uint64_t until)
{
	r->until = until;
}

void store_events_start(struct store *s, struct store_event_reader *r,
			struct store_node *tenant, uint64_t seq)
{
	/* Lines show an engine's numbers wherever an engine applies them
	 * (a mirror), not places in this log. */
	bool shown = s->ops != &embedded_ops;
	bool ours = tenant && tenant->kind == STORE_TENANT;
	bool all = by_root_order(s, tenant);
	uint64_t known = ours ? atomic_load(&as_tenant(tenant)->seq_shown) :
			 all ? atomic_load(&s->gseq_shown) : 0;
	uint64_t upto = 0;
	char *text = NULL;
	size_t len = 0;
	bool held;

	lock_call_begin(LOCK_EVLOG);
	r->gorder = all;
	held = evlog_start(s->events, r, seq, shown, known);
	lock_call_end(LOCK_EVLOG);
	/* Lines the log never had (store_root_floor): from the engine. */
	if (all && seq <= atomic_load(&s->gseq_floor))
		held = false;
	if (held || !(ours || all) || !s->ops->events_history)
		return;
	/* No lock held: the engine may wait on the network.  Without its
	 * lines, the reader goes on as evlog_start left it. */
	if (s->ops->events_history(s, tenant, r->cred, seq, &text, &len,
				   &upto) != 0) {
		free(text);
		return;
	}
	lock_call_begin(LOCK_EVLOG);
	evlog_resume(s->events, r, text, len, upto);
	lock_call_end(LOCK_EVLOG);
}

void store_tenant_seq_set(struct store_node *tenant, uint64_t seq)
{
	atomic_store(&as_tenant(tenant)->seq_shown, seq);
}

/* Unsettled before the number moves, the number before settled: a
 * snapshot reads the number, then whether it is settled (snapshot.c). */
void store_root_order(struct store *s, uint64_t seq, bool settled)
{
	atomic_store(&s->root_order, true);
	if (!settled)
		atomic_store(&s->root_settled, false);
	if (seq > atomic_load(&s->gseq_shown))
		atomic_store(&s->gseq_shown, seq);
	if (settled)
		atomic_store(&s->root_settled, true);
}

void store_root_floor(struct store *s, uint64_t seq)
{
	uint64_t f = atomic_load(&s->gseq_floor);

	while (seq > f && !atomic_compare_exchange_weak(&s->gseq_floor, &f, seq))
		;
}

void store_root_order_reset(struct store *s, uint64_t seq)
{
	atomic_store(&s->root_order, true);
	atomic_store(&s->root_settled, false);
	atomic_store(&s->gseq_shown, seq);
}

bool store_root_settled(struct store *s)
{
	return atomic_load(&s->root_order) && atomic_load(&s->root_settled);
}

uint64_t store_events_position(const struct store_event_reader *r)
{
	return r->next;
}

uint64_t store_events_end(struct store *s)
{
	uint64_t seq;

	lock_call_begin(LOCK_EVLOG);
	seq = evlog_next_seq(s->events);
	lock_call_end(LOCK_EVLOG);
	return seq;
}

ssize_t store_events_read(struct store *s, struct store_event_reader *r,
			  char *buf, size_t len)
{
	size_t n;

	lock_call_begin(LOCK_EVLOG);
	n = evlog_read(s->events, r, buf, len);
	lock_call_end(LOCK_EVLOG);
	/* Its tenant went with the instance: nothing more will come. */
	if (n == 0 && evlog_gone(r))
		return -ESTALE;
	return (ssize_t)n;
}

bool store_events_pending(struct store *s, struct store_event_reader *r)
{
	bool pending;

	lock_call_begin(LOCK_EVLOG);
	pending = evlog_pending(s->events, r);
	lock_call_end(LOCK_EVLOG);
	return pending;
}

int store_events_next(struct store *s, struct store_event_reader *r,
		      struct store_event *ev)
{
	int rc;

	lock_call_begin(LOCK_EVLOG);
	rc = evlog_next(s->events, r, ev);
	lock_call_end(LOCK_EVLOG);
	return rc;
}

void store_set_event_hook(struct store *s, void (*hook)(void *arg, bool internal),
			  void *arg)
{
	s->event_hook = hook;
	s->event_arg = arg;
}

/* Contract in engine.h. */
void store_set_forget_hook(struct store *s,
			   void (*hook)(void *arg, struct store_node *n),
			   void *arg)
{
	s->forget_hook = hook;
	s->forget_arg = arg;
}

void node_forget_ask(struct store *s, struct store_node *n)
{
	if (s->forget_hook)
		s->forget_hook(s->forget_arg, n);
}

void node_touched(struct store *s, struct store_node *n)
{
	if (s->touch_hook)
		s->touch_hook(s->touch_arg, n);
}
