/*
 * drain.c - draining the store or one tenant: refuse what is new, let what
 * is there finish or expire for drain_window, then clear the scope in one
 * transition.
 *
 * What it owns
 * ------------
 * The store's state (s->state: ready, draining, drained) and its drain's
 * deadline, each tenant's own drain state and deadline, and the count of
 * tenants whose drain runs (s->tenants_draining), so the reaper looks for
 * due tenant drains only while there are some.  A drain in scope makes
 * every admission refuse with -EROFS (draining(), internal.h).
 *
 * Locks
 * -----
 * Starting a drain is a transition (the world lock shared): the store's
 * under the store lock (LOCK_STORE); a tenant's under its lock
 * (LOCK_TENANT), having locked, for a caller other than root, every
 * bucket of the tenant by ascending inode (LOCK_PARENT) to judge its
 * right to the clear, and let them go; either wakes the reaper for the
 * deadline it set (reaper_note: LOCK_REAPER, a leaf).  The clear holds the world lock
 * exclusive (drain_settle, so no transition is half done), then the
 * store lock, each tenant's lock in turn and, through
 * tenant_clear_locked(), each bucket's and each state's stripe.  drains_settle_all() takes the store lock only to find a due
 * tenant, and lets go before it settles it.
 */
#include "store/internal.h"

#include <errno.h>

int drain_start(struct store *s, struct given *g, struct tenant *t, uint64_t now,
			  const struct store_cred *cred)
{
	int rc = 0;

	if (t) {
		lock(&t->lock, LOCK_TENANT);
		if (is_dead(&t->node))
			rc = -ESTALE;
		else if (atomic_load(&t->drain_state) != STORE_READY)
			cred = NULL; /* running already: nothing starts */
		/* The clear will remove what a cleanup of the tenant would:
		 * it starts only for who could do that by hand.  The buckets
		 * are locked for the check only. */
		if (rc == 0 && cred && cred->uid != 0) {
			rc = tenant_lock_for_cascade(s, g, t, cred);
			for (struct parent *p = t->parents; p && rc == 0;
			     p = p->hh.next)
				bucket_unlock(p);
		}
		if (rc == 0 && atomic_load(&t->drain_state) == STORE_READY) {
			atomic_store(&t->drain_deadline, now + s->lim.drain_window_ms);
			atomic_store(&t->drain_state, STORE_DRAINING);
			atomic_fetch_add(&s->tenants_draining, 1);
			reaper_note(s, now + s->lim.drain_window_ms);
			emit(s, g, STORE_OP_DRAIN, false, NULL, t, NULL, NULL, -1, -1);
		}
		unlock(&t->lock, LOCK_TENANT);
	} else {
		lock(&s->lock, LOCK_STORE);
		if (atomic_load(&s->state) == STORE_READY) {
			atomic_store(&s->drain_deadline, now + s->lim.drain_window_ms);
			atomic_store(&s->state, STORE_DRAINING);
			reaper_note(s, now + s->lim.drain_window_ms);
			emit(s, g, STORE_OP_DRAIN, false, NULL, NULL, NULL, NULL, -1, -1);
		}
		unlock(&s->lock, LOCK_STORE);
	}
	return rc;
}

/*
 * Clear a drain's scope in one transition (the world lock held
 * exclusively, so no other transition is half done): every parent with
 * its children, every tombstone and, for the whole store, every tenant.
 * Each removed parent is reported as an internal drain event, each
 * removed tenant (a drain of the whole store) as an internal cleanup.
 */
/*
 * Clear tenant @t for a drain (the world lock exclusive, the store lock
 * held); with @dead (a drain of the whole store) the tenant goes too.
 * Returns the table's reference on a tenant that went, for the caller to
 * drop once it has let go of the locks (else NULL).
 */
static struct tenant *drain_clear_one_locked(struct store *s, struct given *g, struct tenant *t,
					     bool dead)
{
	store_assert_held(LOCK_STORE);
	lock(&t->lock, LOCK_TENANT);
	tenant_clear_locked(s, g, t, STORE_OP_DRAIN, false);
	if (atomic_load(&t->drain_state) == STORE_DRAINING)
		atomic_fetch_sub(&s->tenants_draining, 1);
	atomic_store(&t->drain_state, STORE_DRAINED);
	if (dead) {
		atomic_store(&t->node.dead, true);
		HASH_DEL(s->tenants, t);
		gauge_sub(&s->tenants_n, 1, "tenants");
		touch_dir(&s->root_meta, g);
		/* The tenant goes: a cleanup, not a drain starting. */
		emit(s, g, STORE_OP_CLEANUP, true, &t->node, t, NULL, NULL, -1, -1);
	}
	unlock(&t->lock, LOCK_TENANT);
	return dead ? t : NULL;
}

static void drain_clear(struct store *s, struct given *g, struct tenant *only)
{
	struct tenant *t, *tt, *gone;

	lock(&s->lock, LOCK_STORE);
	HASH_ITER(hh, s->tenants, t, tt) {
		if (only && t != only)
			continue;
		gone = drain_clear_one_locked(s, g, t, !only);
		if (gone)
			store_node_unref(s, &gone->node);
	}
	if (!only)
		atomic_store(&s->state, STORE_DRAINED);
	unlock(&s->lock, LOCK_STORE);
}

void drain_clear_tenant(struct store *s, struct given *g, struct tenant *t, bool dead)
{
	struct tenant *gone = NULL;

	scan_begin(s);
	lock(&s->lock, LOCK_STORE);
	if (!is_dead(&t->node))
		gone = drain_clear_one_locked(s, g, t, dead);
	unlock(&s->lock, LOCK_STORE);
	scan_end(s);
	event_hook_run(s);
	if (gone)
		store_node_unref(s, &gone->node);
}

/* Is a drain of the store (@t NULL) or of @t due to be cleared? */
bool drain_due(struct store *s, struct tenant *t, uint64_t now)
{
	if (!t)
		return atomic_load(&s->state) == STORE_DRAINING &&
		       (now >= atomic_load(&s->drain_deadline) ||
			atomic_load(&s->children_n) == 0);
	return atomic_load(&t->drain_state) == STORE_DRAINING &&
	       (now >= atomic_load(&t->drain_deadline) ||
		atomic_load(&t->children_n) == 0);
}

/*
 * Clear the store's or @t's drain if it is due (or @now_forced), as one
 * transition under the exclusive world lock.  Returns true when it did.
 */
bool drain_settle(struct store *s, struct tenant *t, bool force)
{
	bool done = false;
	uint64_t now;

	scan_begin(s);
	now = store_now_ms(s);
	if (t && is_dead(&t->node)) {
		scan_end(s);
		return false;
	}
	if (force || drain_due(s, t, now)) {
		drain_clear(s, NULL, t);
		done = true;
	}
	scan_end(s);
	event_hook_run(s);
	return done;
}

/*
 * The reaper's part: settle every drain that is due.  Tenants are
 * visited only while some tenant drain runs (a scan bounded by
 * max_tenants, on the drain path only).
 */
void drains_settle_all(struct store *s)
{
	uint64_t now = store_now_ms(s);

	if (drain_due(s, NULL, now))
		drain_settle(s, NULL, false);
	while (atomic_load(&s->tenants_draining) > 0) {
		struct tenant *t, *due_t = NULL;

		lock(&s->lock, LOCK_STORE);
		for (t = s->tenants; t && !due_t; t = t->hh.next)
			if (drain_due(s, t, now)) {
				due_t = t;
				store_node_ref(&t->node);
			}
		unlock(&s->lock, LOCK_STORE);
		if (!due_t)
			break;
		drain_settle(s, due_t, false);
		store_node_unref(s, &due_t->node);
	}
}

/* The embedded store's drain (struct store_ops's drain): start it as one
 * transition; a drain with nothing left to wait for, or one ended @now,
 * is cleared at once. */
int drain_run(struct store *s, struct store_node *tenant,
	      const struct store_cred *cred, bool now)
{
	struct tenant *t = tenant ? as_tenant(tenant) : NULL;
	int rc;

	rc = TRANSITION(s, drain_start(s, NULL, t, store_now_ms(s), cred));
	if (rc == 0 && !now)
		drain_settle(s, t, false); /* nothing to wait for: ends now */
	else if (rc == 0 && store_drain_state(s, tenant, NULL) != STORE_DRAINED)
		drain_settle(s, t, true);
	return rc;
}

enum store_state store_drain_state(struct store *s, struct store_node *tenant,
				   uint64_t *ms_left)
{
	struct tenant *t = tenant ? as_tenant(tenant) : NULL;
	enum store_state st;
	uint64_t now = store_now_ms(s), deadline;

	/* What is due is settled first, by the authority (an engine may
	 * ask its own to: it settles nothing itself). */
	OP(s, expire_due)(s, tenant, now);
	st = (enum store_state)atomic_load(&s->state);
	deadline = atomic_load(&s->drain_deadline);
	if (t) {
		/* A tenant is as far as the further of its own drain and
		 * the store's; two running drains end at the earlier. */
		enum store_state ts = (enum store_state)atomic_load(&t->drain_state);
		uint64_t td = atomic_load(&t->drain_deadline);

		if (ts > st || (ts == STORE_DRAINING && st == STORE_DRAINING &&
				td < deadline)) {
			st = ts;
			deadline = td;
		}
	}
	if (ms_left)
		*ms_left = st == STORE_DRAINING && deadline > now ? deadline - now : 0;
	return st;
}

/* Contract in engine.h. */
bool drains_running(struct store *s)
{
	return atomic_load(&s->tenants_draining) > 0;
}

/* Contract in engine.h. */
size_t drains_tenants(struct store *s, struct store_node **out, size_t max)
{
	size_t n = 0;

	if (!drains_running(s))
		return 0;
	lock(&s->lock, LOCK_STORE);
	for (struct tenant *t = s->tenants; t && n < max; t = t->hh.next)
		if (atomic_load(&t->drain_state) == STORE_DRAINING) {
			out[n] = &t->node;
			store_node_ref(out[n++]);
		}
	unlock(&s->lock, LOCK_STORE);
	return n;
}

/* Contract in engine.h. */
void store_set_drained(struct store *s)
{
	lock(&s->lock, LOCK_STORE);
	atomic_store(&s->state, STORE_DRAINED);
	unlock(&s->lock, LOCK_STORE);
}

/* Contract in engine.h. */
void tenant_set_drain(struct store *s, struct tenant *t, enum store_state want,
		      uint64_t deadline)
{
	int was;

	lock(&t->lock, LOCK_TENANT);
	was = atomic_load(&t->drain_state);
	if (want != STORE_READY || was != STORE_READY)
		atomic_store(&t->drain_deadline, deadline);
	atomic_store(&t->drain_state, want);
	if (want == STORE_DRAINING && was != STORE_DRAINING)
		atomic_fetch_add(&s->tenants_draining, 1);
	else if (want != STORE_DRAINING && was == STORE_DRAINING)
		atomic_fetch_sub(&s->tenants_draining, 1);
	unlock(&t->lock, LOCK_TENANT);
}

/* Contract in engine.h. */
void store_load_state(struct store *s, enum store_state state)
{
	atomic_store(&s->state, state);
}

/* Contract in engine.h. */
void store_load_drain_deadline(struct store *s, uint64_t deadline)
{
	atomic_store(&s->drain_deadline, deadline);
}
