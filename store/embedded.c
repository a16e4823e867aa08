/*
 * embedded.c - the embedded authority: one method table (engine.h), each
 * slot a core transition run under the world lock shared (TRANSITION,
 * internal.h), and the store made with it.
 *
 * What it owns
 * ------------
 * embedded_ops, and nothing else: the mechanisms are the core's files
 * (child.c, parent.c, tenant.c, lease.c, drain.c, ...), which decide
 * everything themselves (struct given NULL: their own clock, wall time,
 * inode numbers and line numbers).  store.h's transitions reach a slot
 * through api.c once its common checks passed; an engine's table may
 * leave any slot NULL to have this one.  A new embedded transition is a
 * slot here and its function in the file of its mechanism.  An engine
 * that applies its authority's entries with the core's transitions runs
 * each in the same wrapper, as functions (transition_begin,
 * transition_end: engine.h's ENGINE_TRANSITION), since the world lock is
 * a field of the core's.
 *
 * Locks
 * -----
 * Each wrapper takes the world lock shared around its transition (the
 * transition takes the rest, in the order of engine.h) and runs the
 * event hook once it let go.  set_child_ttl, the drains and the reaper's
 * pass take their own (lease.c, drain.c, reaper.c).
 */
#include "store/internal.h"

#include <errno.h>

static int tenant_make(struct store *s, const char *name,
		       const struct store_owner *owner,
		       struct store_node **out, struct store_attr *attr)
{
	return TRANSITION(s, tenant_create(s, NULL, name, owner, out, attr));
}

static int tenant_remove(struct store *s, const char *name,
			 const struct store_cred *cred)
{
	return TRANSITION(s, tenant_cleanup(s, NULL, name, cred));
}

static int join(struct store *s, struct store_node *tenant, const char *name,
		const struct store_owner *owner, struct store_node **out,
		struct store_attr *attr)
{
	return TRANSITION(s, parent_join(s, NULL, as_tenant(tenant), name,
					 owner, out, attr));
}

static int leave(struct store *s, struct store_node *tenant, const char *name,
		 const struct store_cred *cred)
{
	if (is_dead(tenant))
		return refuse(s, -ESTALE);
	return TRANSITION(s, parent_leave(s, NULL, as_tenant(tenant), name,
					  true, cred));
}

static int depart(struct store *s, struct store_node *tenant, const char *name,
		  const struct store_cred *cred)
{
	return TRANSITION(s, parent_leave(s, NULL, as_tenant(tenant), name,
					  false, cred));
}

static int create(struct store *s, struct store_node *parent, const char *name,
		  const struct store_owner *owner, bool excl,
		  struct store_node **out, bool *created,
		  struct store_attr *attr)
{
	return TRANSITION(s, child_create(s, NULL, parent, name, owner, excl,
					  out, created, attr));
}

static int unlink_child(struct store *s, struct store_node *parent,
			const char *name)
{
	return TRANSITION(s, child_unlink(s, NULL, parent, name));
}

static int link_child(struct store *s, struct store_node *child,
		      struct store_node *parent, const char *name,
		      struct store_attr *attr)
{
	return TRANSITION(s, child_link(s, NULL, child, parent, name, attr));
}

static int rename_child(struct store *s, struct store_node *from,
			const char *name, struct store_node *to,
			const char *to_name, unsigned flags)
{
	return TRANSITION(s, child_rename(s, NULL, from, name, to, to_name,
					  flags));
}

static int setattr(struct store *s, struct store_node *n, unsigned mask,
		   const struct store_attr *in, struct store_attr *out)
{
	return TRANSITION(s, node_setattr(s, NULL, n, mask, in, out));
}

static int publish(struct store_stage *st)
{
	return TRANSITION(stage_store(st), stage_publish(st));
}

static int set_ttl(struct store *s, struct store_node *n, uint64_t ttl_ms)
{
	return TRANSITION(s, lease_change(s, NULL, n, true, ttl_ms));
}

static int renew(struct store *s, struct store_node *n)
{
	return TRANSITION(s, lease_change(s, NULL, n, false, 0));
}

const struct store_ops embedded_ops = {
	.tenant_make = tenant_make,
	.tenant_remove = tenant_remove,
	.join = join,
	.leave = leave,
	.depart = depart,
	.create = create,
	.unlink = unlink_child,
	.link = link_child,
	.rename = rename_child,
	.setattr = setattr,
	.publish = publish,
	.set_ttl = set_ttl,
	.renew = renew,
	.set_child_ttl = lease_child_ttl,   /* lease.c */
	.expire = reaper_expire,            /* reaper.c */
	.expire_due = drain_expire_due,     /* reaper.c */
	.drain = drain_run,                 /* drain.c */
	.stats = stats_embedded,            /* store.c */
	/* clock_advance, sync, connection, close: none (api.c answers). */
};

/* Contract in engine.h. */
void transition_begin(struct store *s)
{
	world_enter(s);
}

/* Contract in engine.h. */
void transition_end(struct store *s)
{
	world_exit(s);
	event_hook_run(s);
}
