/*
 * inode.h - the kernel's inode table: the nodes the kernel knows, by
 * inode number, and how many lookups it holds of each.
 *
 * FUSE names a node by its inode number and counts the lookups it holds
 * (every entry reply is one, a forget gives some back); the node must
 * stay readable, answering ESTALE once removed, until the count is 0.
 * This table is that bookkeeping, the adapter's own, as libfuse's
 * passthrough_ll.c keeps struct lo_inode and its refcount beside the
 * filesystem it serves: each entry holds a counted handle of the store's
 * (store_node_ref), and the store knows nothing of the kernel.
 *
 * It needs no libfuse, so the store's tests can drive it alone.  See
 * fs/inode.c for how it is built and why a failed call leaves no trace.
 */
#ifndef STATEFS_FS_INODE_H
#define STATEFS_FS_INODE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "store/store.h"

struct fs_inode; /* one slot: inode number, handle, lookup count */

/*
 * The table.  lock is a leaf of fs/: held for one probe, insert or
 * removal, never across a call into the store (but store_node_ref(), an
 * atomic increment) nor a reply.
 */
struct fs_inodes {
	pthread_mutex_t lock;
	/* The store its nodes are of (set by the calls that name it),
	 * told of the kernel's holds (fs/inode.c's use signal). */
	_Atomic(struct store *) store;
	struct fs_inode *slot;  /* lock: cap slots, open addressing */
	uint32_t cap;           /* lock: 0 or a power of two */
	uint32_t n;             /* lock: entries */
	uint32_t reserved;      /* lock: room promised (fs_inode_reserve) */
};

/* An empty table. */
void fs_inodes_init(struct fs_inodes *t);

/* Drop every handle the table holds (the kernel is gone: unmounted) and
 * free it.  Call before store_free(); no other thread may use it. */
void fs_inodes_clear(struct fs_inodes *t, struct store *s);

/*
 * The node the kernel knows as @ino, with a new reference, or NULL when
 * it knows no such number (never told, or forgotten).  The root
 * (STORE_ROOT_INO) is always known.  The node may be dead (removed):
 * operations on it give -ESTALE.
 */
struct store_node *fs_inode_get(struct fs_inodes *t, struct store *s,
				uint64_t ino);

/*
 * fs_inode_get() of a handler that is about to act on the node: its
 * tenant used (store_use: loaded first when the store does not hold
 * it).  NULL when the kernel's inode is stale (*@err -ESTALE) or its
 * tenant could not be loaded (*@err what store_use said: -EIO when the
 * shared store could not be reached, nothing changed).
 */
struct store_node *fs_inode_use(struct fs_inodes *t, struct store *s,
				uint64_t ino, int *err);

/*
 * Make room for the kernel to learn one more node, before the transition
 * that makes it: 0, or -ENOMEM (nothing reserved, and the caller changes
 * nothing).  Each reservation is used by fs_inode_remember_reserved() or
 * given back by fs_inode_unreserve().
 */
int fs_inode_reserve(struct fs_inodes *t);
void fs_inode_unreserve(struct fs_inodes *t);

/*
 * The kernel learns @n (an entry reply is about to be sent): count one
 * lookup, using a reservation, so it cannot fail.  Call before replying.
 */
void fs_inode_remember_reserved(struct fs_inodes *t, struct store_node *n);

/* fs_inode_reserve() and fs_inode_remember_reserved() in one: 0 or
 * -ENOMEM (then the kernel must not be told about @n). */
int fs_inode_remember(struct fs_inodes *t, struct store_node *n);

/*
 * The store answered a lookup with @n: when the kernel knows its inode
 * number through another handle (a shared store's mirror reloaded a
 * tenant, making its nodes anew with the same numbers, and the old
 * handle died), the table holds @n from now on, so that the kernel's
 * inode, which a lookup does not replace, names the live node.  Takes
 * t->lock; the old handle's reference is dropped after it.
 */
void fs_inode_update(struct fs_inodes *t, struct store *s,
		     struct store_node *n);

/* The kernel forgot @nlookup lookups of @ino (FUSE forget): at 0 the
 * entry goes, and with it the table's reference. */
void fs_inode_forget(struct fs_inodes *t, struct store *s, uint64_t ino,
		     uint64_t nlookup);

#endif /* STATEFS_FS_INODE_H */
