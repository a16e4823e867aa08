/*
 * lock.h - the locks a shared store keeps: advisory locks on a child
 * that every mount of the store honours (flock(2), fcntl(2) record
 * locks and open file description locks), decided by the shared store
 * (redis/lua/lock.lua) as the kernel's fs/locks.c decides them for one
 * host.  Part of the store's interface: store.h includes it.
 *
 * The embedded store keeps none: the kernel keeps its locks (fs/ does
 * not ask it for these, fs/lock.c), so each function below answers
 * -ENOLCK for it, or does nothing.
 */
#ifndef STATEFS_STORE_LOCK_H
#define STATEFS_STORE_LOCK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct store;
struct store_node;

/* A lock request, a plain value the caller fills. */
struct store_lock_req {
	bool flock;            /* flock(2): the whole file; else a record lock */
	int type;              /* F_RDLCK, F_WRLCK or F_UNLCK */
	uint64_t start, end;   /* bytes, end inclusive (INT64_MAX: to EOF) */
	uint64_t owner;        /* the kernel's lock owner */
	uint64_t fh;           /* the open file it came through */
	uint32_t pid;          /* the caller's (F_GETLK shows it on this mount) */
	/* A request that waits (F_SETLKW, flock without LOCK_NB): @done is
	 * called once, from another thread, with 0 (granted) or -errno
	 * (-EINTR once *@cancel was set and store_lock_kick() called,
	 * -ESTALE: the child went, -ENOMEM), when store_lock() returned 1.
	 * NULL @done: the request does not wait. */
	void (*done)(void *arg, int rc);
	void *arg;
	atomic_bool *cancel;
};

/*
 * Set, change or (F_UNLCK) release @r's lock on child @n.  0 (granted,
 * or released), 1 (it waits: @r->done will tell), -EAGAIN (another
 * owner's lock, or a waiter queued before it, conflicts; not with
 * @done), -ENOLCK (the store keeps no locks: the embedded store; a node
 * that is no child), -ESTALE (the child went), -EINVAL, -EIO, -ENOMEM.
 * May wait on the network: no store lock held.
 */
int store_lock(struct store *s, struct store_node *n,
	       const struct store_lock_req *r);
/* A waiting request's cancel flag was set: act on it now. */
void store_lock_kick(struct store *s);
/*
 * F_GETLK: the lock that conflicts with @r on @n, into @r (type, start,
 * end and pid: the holder's on this mount, 0 for another mount's), or
 * @r->type F_UNLCK when none does.  0 or as store_lock().
 */
int store_lock_test(struct store *s, struct store_node *n,
		    struct store_lock_req *r);
/*
 * The locks of this mount on @n end: with @by_owner the record locks of
 * owner @id (a close by it), else every lock taken through open file
 * @id (its last close: flock and OFD locks).  Nothing to do when this
 * mount holds none there (no call is made).  Never fails: a store that
 * cannot be reached ends them when this mount's session expires.
 */
void store_lock_drop(struct store *s, struct store_node *n, bool by_owner,
		     uint64_t id);

#endif /* STATEFS_STORE_LOCK_H */
