/*
 * setattr.c - the setattr transition: a node's attributes changed as one
 * transition with one outcome (store_setattr, store.h).
 *
 * What it owns
 * ------------
 * node_setattr(), the core transition behind the embedded store's
 * setattr slot (embedded.c) and a mirror's attr entries: every refusal
 * (a dead node, a drain refusing a renewal, the room a resize needs)
 * before the first change, then the change of the attributes (node.c's
 * struct meta and node->mode), the size (a publication, content.c) and
 * the lease (lease.c) in one critical section of the node's lock.  It
 * calls down to content, lease and snapshot; nothing of the core calls
 * back.
 *
 * Locks
 * -----
 * The world lock shared (the caller's TRANSITION), then the node's lock
 * (node_lock, internal.h); a tenant's owner, group and mode under its
 * acl_lock too (LOCK_ACL, a leaf); a resize takes what content.c says,
 * a renewal the heap lock (a leaf).
 */
#include "store/internal.h"

#include <errno.h>
#include <sys/stat.h>

static void meta_apply(struct store_node *n, struct meta *m, unsigned mask,
		       const struct store_attr *in, struct given *g)
{
	if (mask & STORE_SET_MODE)
		n->mode = in->mode & 07777;
	if (mask & STORE_SET_KILL_SUID)
		n->mode &= (uint16_t)~S_ISUID;
	if (mask & STORE_SET_KILL_SGID)
		n->mode &= (uint16_t)~S_ISGID;
	if (mask & STORE_SET_UID)
		m->uid = in->uid;
	if (mask & STORE_SET_GID)
		m->gid = in->gid;
	if (mask & STORE_SET_ATIME)
		m->atime = ns_of(in->atime);
	if (mask & STORE_SET_MTIME)
		m->mtime = ns_of(in->mtime);
	m->ctime = wall_now(g);
}

/*
 * The lease renewal of a setattr (STORE_SET_RENEW), the owner's lock held
 * (bucket or stripe, as lease_change takes): renew_check_locked() takes every
 * refusal first, renew_locked() then cannot fail.  *@ttl 0: no lease, a
 * plain touch.
 */
static int renew_check_locked(struct store *s, struct given *g, struct store_node *n,
			      uint64_t *ttl)
{
	struct parent *p = as_parent(n);

	*ttl = ttl_of(s, n);
	if (*ttl == 0)
		return 0;
	if (draining(s, g, p ? p->tenant : child_tenant(as_child(n))))
		return -EROFS;
	return lease_ensure(s, n) ? -ENOMEM : 0;
}

static void renew_locked(struct store *s, struct store_node *n, uint64_t ttl,
			 uint64_t now)
{
	if (!ttl)
		return;
	if (n->kind == STORE_PARENT)
		snap_parent_cow(s, as_parent(n));
	else
		snap_state_cow(s, as_child(n));
	lease_set(s, n, now + ttl);
}

int node_setattr(struct store *s, struct given *g, struct store_node *n, unsigned mask,
		  const struct store_attr *in, struct store_attr *out)
{
	struct child *c;
	struct meta *m;
	uint64_t now = now_of(s, g), ttl = 0;
	bool renew;
	int rc = 0;

	if (gone(s, n, now))
		return -ESTALE;
	switch (n->kind) {
	case STORE_ROOT: m = &s->root_meta; break;
	case STORE_TENANT: m = &as_tenant(n)->meta; break;
	case STORE_PARENT: m = &as_parent(n)->meta; break;
	case STORE_CHILD:
		c = as_child(n);
		m = &c->meta;
		break;
	default:
		return -EPERM; /* special files have fixed attributes */
	}
	if ((mask & STORE_SET_SIZE) && n->kind != STORE_CHILD)
		return -EISDIR;
	renew = (mask & STORE_SET_RENEW) &&
		(n->kind == STORE_PARENT || n->kind == STORE_CHILD);
	node_lock(s, n);
	if (n->kind == STORE_TENANT)
		snap_tenant_cow(s, as_tenant(n)); /* its owner and mode */
	/* Every refusal before the first change: the resize is the last
	 * step that can fail, and it is the first that changes anything. */
	if (gone(s, n, now) ||
	    (n->kind == STORE_CHILD && as_child(n)->node.nlink == 0))
		rc = -ESTALE;
	else if (renew)
		rc = renew_check_locked(s, g, n, &ttl);
	if (rc == 0 && (mask & STORE_SET_SIZE))
		rc = content_resize_locked(s, g, as_child(n), in->size);
	if (rc == 0 && (mask & ~(STORE_SET_SIZE | STORE_SET_RENEW))) {
		if (n->kind == STORE_TENANT)
			lock(&as_tenant(n)->acl_lock, LOCK_ACL);
		meta_apply(n, m, mask, in, g);
		if (n->kind == STORE_TENANT)
			unlock(&as_tenant(n)->acl_lock, LOCK_ACL);
	}
	if (rc == 0 && renew)
		renew_locked(s, n, ttl, now);
	if (rc == 0 && out)
		attr_locked(s, n, out);
	node_unlock(s, n);
	return rc ? refuse(s, rc) : 0;
}
