/*
 * cred.c - permission predicates on a caller's credentials
 * (store/cred.h).
 *
 * Pure functions of their arguments: no lock, no store.  They decide as
 * the kernel's generic_permission() and sticky check do for a directory,
 * so that what statefs filters or refuses by itself (the root's
 * .snapshot and .events, a cascading rmdir) follows the same rule the
 * kernel applies to everything else under -o default_permissions; and
 * which privilege bits a write clears, as the kernel's
 * setattr_should_drop_suidgid() does.
 */
#include <stdbool.h>
#include <sys/stat.h>

#include "store/store.h"

static bool in_group(const struct store_cred *c, gid_t gid)
{
	if (c->gid == gid)
		return true;
	for (size_t i = 0; i < c->ngroups; i++)
		if (c->groups[i] == gid)
			return true;
	return false;
}

bool store_cred_may(const struct store_cred *c, uid_t uid, gid_t gid,
		    mode_t mode, unsigned want)
{
	unsigned bits;

	if (c->uid == 0)
		return true;
	if (c->uid == uid)
		bits = (mode >> 6) & 7;
	else if (in_group(c, gid))
		bits = (mode >> 3) & 7;
	else
		bits = mode & 7;
	return (bits & want) == want;
}

bool store_cred_may_list(const struct store_cred *c, uid_t uid, gid_t gid,
			 mode_t mode)
{
	return store_cred_may(c, uid, gid, mode, STORE_MAY_READ | STORE_MAY_EXEC);
}

bool store_cred_sticky_ok(const struct store_cred *c, uid_t dir_uid,
			  mode_t dir_mode, uid_t uid)
{
	return !(dir_mode & S_ISVTX) || c->uid == 0 || c->uid == uid ||
	       c->uid == dir_uid;
}

/* The rule of the kernel's setattr_should_drop_suidgid(). */
unsigned store_cred_kill_suidgid(const struct store_cred *c, bool fsetid,
				 gid_t gid, mode_t mode)
{
	unsigned kill = 0;

	if (fsetid)
		return 0;
	if (mode & S_ISUID)
		kill |= STORE_SET_KILL_SUID;
	if ((mode & S_ISGID) && ((mode & S_IXGRP) || !in_group(c, gid)))
		kill |= STORE_SET_KILL_SGID;
	return kill;
}
