/*
 * api.c - store.h's transitions: the checks every authority makes
 * identically and first, once, then the store's method table.
 *
 * What it owns
 * ------------
 * The front of each transition, in the shape of the kernel's vfs_mkdir
 * (fs/namei.c): what the kind of node decides (a mkdir or rmdir in the
 * root is a tenant's, in a tenant a parent's; a child has no entries:
 * ENOTDIR; a tenant or parent cannot be created, linked or renamed as a
 * child: EPERM), the bounds of a duration, then the call of the slot of
 * s->ops (engine.h) that makes the transition.  Every order of checks
 * past these, the ones the contract fixes (a drain's EROFS against a dead
 * handle's ESTALE, a quota against a name that exists), is the
 * authority's own: the core's for the embedded store (embedded.c and the
 * mechanism files), the engine's for another.  A slot an engine leaves
 * NULL is the embedded store's (OP below), so an engine writes only what
 * it does differently.
 *
 * Nothing here takes a lock or changes a fact: each slot is a whole
 * transition of its authority.
 */
#include "store/internal.h"

#include <errno.h>
#include <fcntl.h>



/* Tree transitions ----------------------------------------------------------- */

int store_mkdir(struct store *s, struct store_node *dir, const char *name,
		const struct store_owner *owner, struct store_node **out)
{
	return store_mkdir_entry(s, dir, name, owner, out, NULL);
}

int store_mkdir_entry(struct store *s, struct store_node *dir, const char *name,
		      const struct store_owner *owner, struct store_node **out,
		      struct store_attr *attr)
{
	switch (dir->kind) {
	case STORE_ROOT:
		return OP(s, tenant_make)(s, name, owner, out, attr);
	case STORE_TENANT:
		return OP(s, join)(s, dir, name, owner, out, attr);
	case STORE_PARENT:
		return -EPERM;
	default:
		return -ENOTDIR;
	}
}

int store_rmdir(struct store *s, struct store_node *dir, const char *name,
		const struct store_cred *cred)
{
	struct store_node *n;
	int rc;

	switch (dir->kind) {
	case STORE_ROOT:
		return OP(s, tenant_remove)(s, name, cred);
	case STORE_TENANT:
		return OP(s, leave)(s, dir, name, cred);
	case STORE_PARENT:
		/* A child: rmdir(2) answers ENOTDIR, nothing: ENOENT. */
		rc = store_lookup(s, dir, name, &n);
		if (rc)
			return rc;
		store_node_unref(s, n);
		return -ENOTDIR;
	default:
		return -ENOTDIR;
	}
}

int store_depart(struct store *s, struct store_node *tenant, const char *name,
		 const struct store_cred *cred)
{
	if (tenant->kind != STORE_TENANT)
		return -EPERM;
	return OP(s, depart)(s, tenant, name, cred);
}

/* Only a parent holds children: a child is no directory, the rest are
 * directories of something else. */
static int not_parent(const struct store_node *n)
{
	return n->kind == STORE_CHILD ? -ENOTDIR : -EPERM;
}

int store_create(struct store *s, struct store_node *parent, const char *name,
		 const struct store_owner *owner, bool excl,
		 struct store_node **out, bool *created)
{
	return store_create_entry(s, parent, name, owner, excl, out, created,
				  NULL);
}

int store_create_entry(struct store *s, struct store_node *parent,
		       const char *name, const struct store_owner *owner,
		       bool excl, struct store_node **out, bool *created,
		       struct store_attr *attr)
{
	if (parent->kind != STORE_PARENT)
		return not_parent(parent);
	return OP(s, create)(s, parent, name, owner, excl, out, created, attr);
}

int store_unlink(struct store *s, struct store_node *parent, const char *name)
{
	if (parent->kind != STORE_PARENT)
		return not_parent(parent);
	return OP(s, unlink)(s, parent, name);
}

int store_link(struct store *s, struct store_node *child,
	       struct store_node *parent, const char *name)
{
	return store_link_entry(s, child, parent, name, NULL);
}

int store_link_entry(struct store *s, struct store_node *child,
		     struct store_node *parent, const char *name,
		     struct store_attr *attr)
{
	if (child->kind != STORE_CHILD || parent->kind != STORE_PARENT)
		return -EPERM;
	return OP(s, link)(s, child, parent, name, attr);
}

int store_rename(struct store *s, struct store_node *from, const char *name,
		 struct store_node *to, const char *to_name, unsigned flags)
{
	/* Tenants and parents cannot be renamed. */
	if (from->kind != STORE_PARENT || to->kind != STORE_PARENT)
		return -EPERM;
	return OP(s, rename)(s, from, name, to, to_name, flags);
}

/* Attributes and content ----------------------------------------------------- */

int store_setattr(struct store *s, struct store_node *n, unsigned mask,
		  const struct store_attr *in, struct store_attr *out)
{
	return OP(s, setattr)(s, n, mask, in, out);
}

int store_stage_publish(struct store_stage *st)
{
	struct store *s = stage_store(st);

	return OP(s, publish)(st);
}

int store_stage_flush(struct store_stage *st)
{
	int rc = stage_flush_due(st);

	/* A racing write between here and the publication is published
	 * with it: both belong to this open file. */
	return rc > 0 ? store_stage_publish(st) : rc;
}

/* Leases ----------------------------------------------------------------------- */

int store_set_ttl(struct store *s, struct store_node *n, uint64_t ttl_ms)
{
	if (n->kind != STORE_PARENT && n->kind != STORE_CHILD)
		return -EINVAL;
	/* A deadline must not wrap: see STORE_DURATION_MAX_MS. */
	if (ttl_ms > STORE_DURATION_MAX_MS)
		return -EINVAL;
	return OP(s, set_ttl)(s, n, ttl_ms);
}

int store_renew(struct store *s, struct store_node *n)
{
	if (n->kind != STORE_PARENT && n->kind != STORE_CHILD)
		return -EINVAL;
	return OP(s, renew)(s, n);
}

int store_set_child_ttl(struct store *s, struct store_node *n, uint64_t ttl_ms)
{
	if (n->kind != STORE_PARENT || ttl_ms > STORE_DURATION_MAX_MS)
		return -EINVAL;
	return OP(s, set_child_ttl)(s, n, ttl_ms);
}

unsigned store_expire(struct store *s, unsigned budget)
{
	return OP(s, expire)(s, budget);
}

int store_clock_advance(struct store *s, uint64_t ms)
{
	if (!s->ops->clock_advance)
		return -ENOTSUP; /* the embedded store's clock is fs/'s */
	return s->ops->clock_advance(s, ms);
}

/* Drains ------------------------------------------------------------------------ */

int store_drain(struct store *s, struct store_node *tenant)
{
	return store_drain_as(s, tenant, NULL);
}

int store_drain_as(struct store *s, struct store_node *tenant,
		   const struct store_cred *cred)
{
	if (tenant && tenant->kind != STORE_TENANT)
		return -EINVAL;
	return OP(s, drain)(s, tenant, cred, false);
}

int store_drain_now(struct store *s, struct store_node *tenant)
{
	if (tenant && tenant->kind != STORE_TENANT)
		return -EINVAL;
	return OP(s, drain)(s, tenant, NULL, true);
}

/* Locks ---------------------------------------------------------------------- */

/* Only a child is locked; a store without the slots keeps no locks (the
 * kernel keeps the embedded store's). */
int store_lock(struct store *s, struct store_node *n,
	       const struct store_lock_req *r)
{
	if (!s->ops->lock_set || n->kind != STORE_CHILD)
		return -ENOLCK;
	if (r->type != F_RDLCK && r->type != F_WRLCK && r->type != F_UNLCK)
		return -EINVAL;
	if (r->start > r->end || (r->done && (r->type == F_UNLCK || !r->cancel)))
		return -EINVAL;
	return s->ops->lock_set(s, n, r);
}

void store_lock_kick(struct store *s)
{
	if (s->ops->lock_kick)
		s->ops->lock_kick(s);
}

int store_lock_test(struct store *s, struct store_node *n,
		    struct store_lock_req *r)
{
	if (!s->ops->lock_test || n->kind != STORE_CHILD)
		return -ENOLCK;
	if ((r->type != F_RDLCK && r->type != F_WRLCK) || r->start > r->end)
		return -EINVAL;
	return s->ops->lock_test(s, n, r);
}

void store_lock_drop(struct store *s, struct store_node *n, bool by_owner,
		     uint64_t id)
{
	if (s->ops->lock_drop && n->kind == STORE_CHILD)
		s->ops->lock_drop(s, n, by_owner, id);
}

/* The link to the authority --------------------------------------------------- */

int store_stats(struct store *s, struct store_node *tenant, struct store_stats *o)
{
	int rc = OP(s, stats)(s, tenant, o);

	if (rc == 0 && s->ops->lock_stats)
		s->ops->lock_stats(s, tenant, o);
	return rc;
}

int store_sync(struct store *s, struct store_node *n)
{
	return s->ops->sync ? s->ops->sync(s, n) : 0;
}

int store_use(struct store *s, struct store_node *n)
{
	return s->ops->use ? s->ops->use(s, n) : 0;
}

uint64_t store_hold(struct store *s, struct store_node *n)
{
	return s->ops->hold ? s->ops->hold(s, n) : 0;
}

void store_release(struct store *s, uint64_t token)
{
	if (token && s->ops->release)
		s->ops->release(s, token);
}

bool store_is_shared(const struct store *s)
{
	return s->ops->connection != NULL;
}

enum store_link store_connection(const struct store *s)
{
	return s->ops->connection ? s->ops->connection(s) : STORE_LINK_EMBEDDED;
}
