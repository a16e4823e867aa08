/*
 * inode.c - the kernel's inode table (see inode.h): inode number ->
 * {counted store handle, lookup count}, for every node the kernel knows.
 *
 * What it owns
 * ------------
 * One open-addressed table (linear probing over a power-of-two array,
 * removal by shifting the rest of the run back, so probes never lengthen
 * with churn), each slot the entry itself: the inode number, the handle
 * and the kernel's count, 24 bytes and no allocation per entry.  (The
 * store's pointer table, store/ptab.h, keeps pointers only: an entry
 * there would need a record of its own.)  The table holds one reference
 * to each node it lists, taken when the kernel first learns the node and
 * dropped when the kernel forgets it, so a removed node stays readable,
 * dead, answering ESTALE through every operation, until then.
 *
 * As a secondary index of the store's nodes:
 *  1. Authority: the store's hierarchy; the table holds no fact of the
 *     store's, only what the kernel was told and the handle it names.
 *  2. The adapter updates it: a remember just before each reply that
 *     gives the kernel an entry (lookup, mkdir, mknod, create, link, each
 *     readdirplus entry), a forget on each FUSE forget, and an update
 *     before each lookup's reply when the store now answers the number
 *     with another handle (a shared store's mirror reloaded a tenant: its
 *     nodes made anew, the old ones dead; fs_inode_update).  No
 *     transition of the store writes it.
 *  3. A stale entry (a node the store removed while the kernel knows it)
 *     is told by the node itself: every store call through it answers
 *     -ESTALE.
 *  4. It is not rebuilt: it mirrors what the kernel holds, and the kernel
 *     reports every change (entry replies, forgets).
 *  5. Tests: tests/unit/fs/test_inode.c (remember and forget of removed
 *     nodes, numbers never handed out), tests/unit/fs/test_entry.c (a
 *     failed call leaving no trace) and the store stress test, which
 *     races remembers and forgets with removals.
 *
 * No failed call changes anything: growing the table is its only step
 * that can fail, so a handler that makes a node (mkdir, create, link)
 * reserves room before the transition (fs_inode_reserve) and remembers
 * after it (fs_inode_remember_reserved), which cannot fail.  In test
 * builds that growth goes through the store's allocation-failure hook,
 * so the tests that fail each allocation of a call in turn reach it.
 *
 * The use signal.  A shared store's mirror copies only the tenants its
 * mount uses (docs/shared-store.md), so the table tells the store what
 * the kernel does: every handler's node (fs_inode_use, through
 * node_get) is a use of its tenant (store_use: a tenant the mirror does
 * not hold is loaded before the handler reads it; a load that cannot
 * reach the store is the handler's EIO), the root's a use of the root
 * (what it shows of the tenants not followed is read again), and every entry the
 * kernel holds holds its tenant (store_hold when the entry is made, its
 * token kept in the entry, store_release when the kernel forgets it):
 * a tenant the kernel holds an inode of (a cwd, an open file, an
 * inotify watch, a cached name) stays followed.  A root .events or
 * .snapshot is a use and a hold of the whole store.  The embedded store
 * ignores both.
 *
 * Locks
 * -----
 * t->lock, a leaf: held for one probe, insert or removal.  Under it only
 * store_node_ref() is called (an atomic increment); the reference a
 * forget drops is dropped after it is let go (freeing a node takes store
 * locks).  One lock for the whole table, not shards: a reservation must
 * be made before the node, and so its inode number, exists.
 */
#include <errno.h>
#include <stdlib.h>

#include "fs/inode.h"
#include "layout/layout.h"

#ifdef STORE_FAULTS
#include "store/store_test.h" /* store_fault_calloc(): see the top */
#define inode_calloc store_fault_calloc
#else
#define inode_calloc calloc
#endif

#define INODES_MIN 64

struct fs_inode {
	uint64_t ino;             /* 0: an empty slot */
	struct store_node *node;  /* counted */
	uint64_t nlookup;         /* the kernel's lookups */
	uint64_t held;            /* store_hold's token, released at forget */
};

/* What the store is told @n stands for: its tenant, or NULL for a root
 * .events or .snapshot (the whole store). */
static struct store_node *used(struct store_node *n)
{
	int slot = store_node_kind(n) == STORE_SPECIAL ? store_node_slot(n) : -1;

	if (store_node_depth(n) == 1 &&
	    (slot == LAYOUT_SLOT_EVENTS || slot == LAYOUT_SLOT_SNAPSHOT))
		return NULL;
	return n;
}

/* The slot a probe for @ino starts at (a 64-bit finalizer: inode
 * numbers are consecutive). */
static uint32_t home(const struct fs_inodes *t, uint64_t ino)
{
	ino ^= ino >> 33;
	ino *= 0xff51afd7ed558ccdULL;
	ino ^= ino >> 33;
	ino *= 0xc4ceb9fe1a85ec53ULL;
	ino ^= ino >> 33;
	return (uint32_t)ino & (t->cap - 1);
}

static uint32_t next(const struct fs_inodes *t, uint32_t i)
{
	return (i + 1) & (t->cap - 1);
}

static struct fs_inode *find_locked(struct fs_inodes *t, uint64_t ino)
{
	if (!t->cap)
		return NULL;
	for (uint32_t i = home(t, ino); t->slot[i].ino; i = next(t, i))
		if (t->slot[i].ino == ino)
			return &t->slot[i];
	return NULL;
}

/* Insert an entry whose room is made (t->lock held). */
static void insert_locked(struct fs_inodes *t, const struct fs_inode *e)
{
	uint32_t i = home(t, e->ino);

	while (t->slot[i].ino)
		i = next(t, i);
	t->slot[i] = *e;
	t->n++;
}

/* Take entry @e out and shift the rest of its run back (t->lock held). */
static void remove_locked(struct fs_inodes *t, struct fs_inode *e)
{
	uint32_t hole = (uint32_t)(e - t->slot);

	t->slot[hole].ino = 0;
	t->n--;
	for (uint32_t j = next(t, hole); t->slot[j].ino; j = next(t, j)) {
		uint32_t h = home(t, t->slot[j].ino);

		/* It may move back to the hole when the hole lies between
		 * its home and where it is. */
		if (((hole - h) & (t->cap - 1)) < ((j - h) & (t->cap - 1))) {
			t->slot[hole] = t->slot[j];
			t->slot[j].ino = 0;
			hole = j;
		}
	}
}

/* Room for every entry present and promised, and one more, at most 3/4
 * full (t->lock held).  0 or -ENOMEM, the table unchanged. */
static int room_locked(struct fs_inodes *t)
{
	uint64_t want = (uint64_t)t->n + t->reserved + 1;
	uint32_t cap = t->cap ? t->cap : INODES_MIN, oldcap = t->cap;
	struct fs_inode *old = t->slot, *slot;

	while (want * 4 > (uint64_t)cap * 3) {
		if (cap > UINT32_MAX / 2)
			return -ENOMEM;
		cap *= 2;
	}
	if (cap == t->cap)
		return 0;
	slot = inode_calloc(cap, sizeof(*slot));
	if (!slot)
		return -ENOMEM;
	t->slot = slot;
	t->cap = cap;
	t->n = 0;
	for (uint32_t i = 0; i < oldcap; i++)
		if (old[i].ino)
			insert_locked(t, &old[i]);
	free(old);
	return 0;
}

void fs_inodes_init(struct fs_inodes *t)
{
	pthread_mutex_init(&t->lock, NULL);
	t->store = NULL;
	t->slot = NULL;
	t->cap = t->n = t->reserved = 0;
}

void fs_inodes_clear(struct fs_inodes *t, struct store *s)
{
	for (uint32_t i = 0; i < t->cap; i++)
		if (t->slot[i].ino)
			store_node_unref(s, t->slot[i].node);
	free(t->slot);
	t->slot = NULL;
	t->cap = t->n = t->reserved = 0;
	pthread_mutex_destroy(&t->lock);
}

struct store_node *fs_inode_get(struct fs_inodes *t, struct store *s,
				uint64_t ino)
{
	struct store_node *n = NULL;
	struct fs_inode *e;

	atomic_store(&t->store, s);
	if (ino == STORE_ROOT_INO) {
		n = store_root(s);
		store_node_ref(n);
		return n;
	}
	pthread_mutex_lock(&t->lock);
	e = find_locked(t, ino);
	if (e) {
		n = e->node;
		store_node_ref(n);
	}
	pthread_mutex_unlock(&t->lock);
	return n;
}

struct store_node *fs_inode_use(struct fs_inodes *t, struct store *s,
				uint64_t ino, int *err)
{
	struct store_node *n = fs_inode_get(t, s, ino);
	int rc = n ? 0 : -ESTALE;

	if (n && (rc = store_use(s, used(n))) != 0) {
		store_node_unref(s, n);
		n = NULL;
	}
	*err = rc;
	return n;
}

/* The token of @n's hold (outside t->lock: the store takes its own). */
static uint64_t hold(struct fs_inodes *t, struct store_node *n)
{
	struct store *s = atomic_load(&t->store);

	return s ? store_hold(s, used(n)) : 0;
}

static void release(struct fs_inodes *t, uint64_t token)
{
	struct store *s = atomic_load(&t->store);

	if (s && token)
		store_release(s, token);
}

int fs_inode_reserve(struct fs_inodes *t)
{
	int rc;

	pthread_mutex_lock(&t->lock);
	rc = room_locked(t);
	if (rc == 0)
		t->reserved++;
	pthread_mutex_unlock(&t->lock);
	return rc;
}

void fs_inode_unreserve(struct fs_inodes *t)
{
	pthread_mutex_lock(&t->lock);
	t->reserved--;
	pthread_mutex_unlock(&t->lock);
}

/* Count one lookup of @n, whose room is made (t->lock held), with
 * @token its hold when it is new; returns the token unused (the kernel
 * knew @n already), for the caller to release. */
static uint64_t remember_locked(struct fs_inodes *t, struct store_node *n,
				struct fs_inode *e, uint64_t token)
{
	if (e) {
		e->nlookup++;
		return token;
	} else {
		struct fs_inode ne = { store_node_ino(n), n, 1, token };

		store_node_ref(n); /* the kernel's */
		insert_locked(t, &ne);
		return 0;
	}
}

void fs_inode_remember_reserved(struct fs_inodes *t, struct store_node *n)
{
	uint64_t ino = store_node_ino(n);
	/* Held before it is known, so the store never sees a forget
	 * before the hold it ends. */
	uint64_t token = ino != STORE_ROOT_INO ? hold(t, n) : 0;

	pthread_mutex_lock(&t->lock);
	t->reserved--;
	/* The root is known for good: it is never forgotten. */
	if (ino != STORE_ROOT_INO)
		token = remember_locked(t, n, find_locked(t, ino), token);
	pthread_mutex_unlock(&t->lock);
	release(t, token);
}

int fs_inode_remember(struct fs_inodes *t, struct store_node *n)
{
	uint64_t ino = store_node_ino(n);
	struct fs_inode *e;
	uint64_t token;
	int rc = 0;

	if (ino == STORE_ROOT_INO)
		return 0;
	token = hold(t, n);
	/* One critical section: a node the kernel knows already (the
	 * common lookup) needs no room. */
	pthread_mutex_lock(&t->lock);
	e = find_locked(t, ino);
	if (!e)
		rc = room_locked(t);
	if (rc == 0)
		token = remember_locked(t, n, e, token);
	pthread_mutex_unlock(&t->lock);
	release(t, token);
	return rc;
}

void fs_inode_update(struct fs_inodes *t, struct store *s,
		     struct store_node *n)
{
	uint64_t ino = store_node_ino(n);
	struct store_node *drop = NULL;
	struct fs_inode *e;

	if (ino == STORE_ROOT_INO)
		return;
	pthread_mutex_lock(&t->lock);
	e = find_locked(t, ino);
	if (e && e->node != n) {
		store_node_ref(n); /* the kernel's, in place of the old one */
		drop = e->node;
		e->node = n;
	}
	pthread_mutex_unlock(&t->lock);
	if (drop)
		store_node_unref(s, drop);
}

void fs_inode_forget(struct fs_inodes *t, struct store *s, uint64_t ino,
		     uint64_t nlookup)
{
	struct store_node *drop = NULL;
	struct fs_inode *e;
	uint64_t token = 0;

	pthread_mutex_lock(&t->lock);
	e = find_locked(t, ino);
	if (e) {
		e->nlookup = nlookup >= e->nlookup ? 0 : e->nlookup - nlookup;
		if (e->nlookup == 0) {
			drop = e->node;
			token = e->held;
			remove_locked(t, e);
		}
	}
	pthread_mutex_unlock(&t->lock);
	if (token)
		store_release(s, token);
	if (drop)
		store_node_unref(s, drop);
}
