/*
 * cred.h - who asks, and the permission rules statefs applies by itself.
 *
 * A caller's credentials and the pure predicates on them (store/cred.c),
 * decided as the kernel decides for everything else under -o
 * default_permissions.  Part of the store's interface (store.h includes
 * it) but no authority's mechanism: functions of their arguments only,
 * the same whichever authority answers, and layout/ or fs/ may call
 * them holding anything.
 */
#ifndef STATEFS_STORE_CRED_H
#define STATEFS_STORE_CRED_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * Who asks: a caller's uid, gid and supplementary groups, as the kernel
 * judges permissions (fs/ fills it from the FUSE request).  The store
 * never keeps one beyond the call it is passed to (an event reader keeps
 * a copy of its own).
 */
struct store_cred {
	uid_t uid;
	gid_t gid;
	const gid_t *groups;   /* may be NULL when ngroups is 0 */
	size_t ngroups;
};

#define STORE_MAY_READ  4u
#define STORE_MAY_WRITE 2u
#define STORE_MAY_EXEC  1u

/*
 * Does @c have every permission in @want (STORE_MAY_* bits) on a
 * directory owned by @uid:@gid with permission bits @mode?  The class is
 * the one Linux picks: owner when the uid matches, else group when the
 * gid or a supplementary group matches, else other.  uid 0 may do
 * anything to a directory.  Pure: no lock, no state (store/cred.c).
 */
bool store_cred_may(const struct store_cred *c, uid_t uid, gid_t gid,
		    mode_t mode, unsigned want);

/*
 * May @c list such a directory (read and search permission, as ls
 * needs)?  The rule of the .snapshot and .events filters.
 */
bool store_cred_may_list(const struct store_cred *c, uid_t uid, gid_t gid,
			 mode_t mode);

/*
 * May @c remove an entry owned by @uid from a directory owned by
 * @dir_uid with permission bits @dir_mode, as far as the sticky bit goes?
 * True unless the directory is sticky and @c is neither the entry's
 * owner, the directory's owner nor uid 0.
 */
bool store_cred_sticky_ok(const struct store_cred *c, uid_t dir_uid,
			  mode_t dir_mode, uid_t uid);

/*
 * The set-user-ID and set-group-ID bits a write or a truncation by @c
 * clears from a regular file of group @gid with mode @mode, as Linux
 * clears them for a caller without CAP_FSETID (@fsetid false; with it,
 * none): set-user-ID always, set-group-ID when the file is
 * group-executable or @c is not in its group (without group execute it
 * marks mandatory locking, not a privilege, for the group's members).
 * Returns the bits to clear (STORE_SET_KILL_SUID/SGID of store.h, for
 * store_setattr), 0 for none.
 */
unsigned store_cred_kill_suidgid(const struct store_cred *c, bool fsetid,
				 gid_t gid, mode_t mode);

#endif /* STATEFS_STORE_CRED_H */
