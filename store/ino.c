/*
 * ino.c - the inode table: the nodes the kernel knows, by inode number.
 *
 * FUSE names nodes by inode number, so the store keeps ino -> node for
 * the nodes the kernel currently knows (64 shards, each an open-addressed
 * table, store/ptab.h, under its own leaf mutex).  A secondary index
 * must say where the authority lives, who updates the index with it, how
 * a stale entry is told, whether and how it is rebuilt, and which tests
 * keep the two in step.  For this one:
 *  1. Authority lives in the hierarchy.  The table holds no state, only a
 *     counted reference and the kernel's lookup count.
 *  2. The adapter updates it: store_ino_remember() before it replies with
 *     an entry, store_ino_forget() on FUSE forget.  The hierarchy never
 *     writes it, so no transition needs a symmetric double write; the
 *     transitions that make an entry for the adapter (store_*_entry)
 *     remember it for the adapter, inside themselves, so a reply never
 *     fails after the store changed (entry_remember).
 *  3. A stale entry (a node removed from the hierarchy while the kernel
 *     still knows it) is detected by node->dead: every operation that
 *     arrives through the table checks it and answers -ESTALE.  The
 *     reference keeps the memory valid until forget.
 *  4. It is not rebuilt: it mirrors what the kernel holds, and the kernel
 *     tells us every change (lookup replies, forgets).
 *  5. Tests: tests/unit/test_ino.c (remember/forget of removed nodes),
 *     test_child.c, test_parent.c and test_tenant.c (stale operations on
 *     old incarnations) and the stale-handle suites in tests/bats.
 * Inode numbers come from one atomic counter and are never reused; a
 * tenant takes a block of 1 + STORE_NSPECIAL numbers (itself and its
 * special files).
 *
 * Locks
 * -----
 * Each shard has its own mutex (LOCK_INO_SHARD, a leaf), held for one
 * probe or one insert or removal; ino_find_locked() expects it held.
 * store_ino_remember() may be called with any store lock held: the
 * transitions that make an entry call it inside their critical section
 * (entry_remember).  store_ino_forget() drops the kernel's reference only
 * after it let go of the shard (freeing a node takes the heap lock).
 */
#include "store/internal.h"

#include <errno.h>

static struct ino_shard *shard(struct store *s, uint64_t ino)
{
	return &s->shards[ino % INO_SHARDS];
}

/* The shard picks by the low bits; the slot comes from the rest. */
static uint32_t ino_hash(uint64_t ino)
{
	return (uint32_t)ptab_mix64(ino / INO_SHARDS);
}

static uint32_t node_ino_hash(const void *n)
{
	return ino_hash(((const struct store_node *)n)->ino);
}

/* The node the kernel knows as @ino (its shard locked), or NULL. */
static struct store_node *ino_find_locked(struct ino_shard *sh, uint64_t ino)
{
	const struct ptab *t = &sh->tab;
	struct store_node *n;

	store_assert_held(LOCK_INO_SHARD);
	if (!t->cap)
		return NULL;
	for (uint32_t i = ptab_home(t, ino_hash(ino)); (n = t->slot[i]);
	     i = ptab_next(t, i))
		if (n->ino == ino)
			return n;
	return NULL;
}

struct store_node *store_ino_get(struct store *s, uint64_t ino)
{
	struct ino_shard *sh;
	struct store_node *n;

	if (ino == STORE_ROOT_INO) {
		store_node_ref(&s->root);
		return &s->root;
	}
	sh = shard(s, ino);
	lock(&sh->lock, LOCK_INO_SHARD);
	n = ino_find_locked(sh, ino);
	if (n)
		store_node_ref(n);
	unlock(&sh->lock, LOCK_INO_SHARD);
	return n;
}

int store_ino_remember(struct store *s, struct store_node *n)
{
	struct ino_shard *sh;
	int rc = 0;

	if (n->kind == STORE_ROOT)
		return 0;
	sh = shard(s, n->ino);
	lock(&sh->lock, LOCK_INO_SHARD);
	if (n->nlookup == 0) {
		rc = ptab_add(&sh->tab, n, ino_hash(n->ino), node_ino_hash);
		if (rc == 0)
			store_node_ref(n); /* the kernel's reference */
	}
	if (rc == 0 && n->nlookup != NLOOKUP_PINNED)
		n->nlookup++;
	unlock(&sh->lock, LOCK_INO_SHARD);
	return rc;
}

void store_ino_forget(struct store *s, uint64_t ino, uint64_t nlookup)
{
	struct ino_shard *sh;
	struct store_node *n;
	bool drop = false;

	if (ino == STORE_ROOT_INO)
		return;
	sh = shard(s, ino);
	lock(&sh->lock, LOCK_INO_SHARD);
	n = ino_find_locked(sh, ino);
	if (n && n->nlookup != NLOOKUP_PINNED) {
		n->nlookup = nlookup >= n->nlookup ? 0 :
			     n->nlookup - (uint32_t)nlookup;
		if (n->nlookup == 0) {
			ptab_remove(&sh->tab, n, ino_hash(ino), node_ino_hash);
			drop = true;
		}
	}
	unlock(&sh->lock, LOCK_INO_SHARD);
	if (drop)
		store_node_unref(s, n);
}

/*
 * Hand @n to the kernel from inside the transition that makes or links
 * it (store_mkdir_entry, store_create_entry, store_link_entry): count the
 * kernel's lookup (store_ino_remember; the ino shard lock is a leaf) and
 * report @n's attributes as of the transition (its own lock held, see
 * attr_locked), so the adapter's reply has nothing left that can fail.
 * The remember is the step that can fail (-ENOMEM): a transition takes it
 * after its other refusals, and undoes it with entry_undo() only if a
 * later step of its own fails.  @attr NULL: not for the kernel, 0.
 */
int entry_remember(struct store *s, struct store_node *n,
		   struct store_attr *attr)
{
	return attr ? store_ino_remember(s, n) : 0;
}

void entry_undo(struct store *s, struct store_node *n,
		struct store_attr *attr)
{
	if (attr)
		store_ino_forget(s, n->ino, 1);
}
