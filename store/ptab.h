/*
 * ptab.h - an open-addressed table of pointers.
 *
 * The store's index of a bucket's links (name -> link) keeps one pointer
 * per entry and nothing else: 8 bytes a slot, the table at most 3/4
 * full, where a chained hash costs a 56-byte handle in every entry plus
 * its buckets.  With a million children that difference is most of a
 * child's overhead.  Not private to the store: it includes nothing of
 * it (its one allocation goes through store/alloc.h's names), so any
 * part of statefs may use it.  (fs/inode.c keeps its entries in the
 * slots instead: an inode number, a handle and a count, more than a
 * pointer.)
 *
 * Linear probing over a power-of-two array.  The caller supplies each
 * entry's 32-bit hash, well mixed, and a function that gives it back for
 * an entry (the table keeps none of its own: growth and deletion ask).
 * Deletion shifts the rest of the run back instead of leaving
 * tombstones, so probes never lengthen with churn.  The table never
 * shrinks, as the chained hash it replaces never did.
 *
 * Not thread-safe: the lock of whatever owns the table guards it.
 * Growth is the only step that allocates; ptab_reserve() makes room
 * first, so a transition can take every failure before it changes
 * anything, then ptab_insert() cannot fail.
 */
#ifndef STATEFS_STORE_PTAB_H
#define STATEFS_STORE_PTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ptab {
	void **slot;   /* cap slots; NULL: empty */
	uint32_t cap;  /* 0 or a power of two */
	uint32_t n;    /* entries */
};

typedef uint32_t (*ptab_hash_fn)(const void *entry);

/* The slot a probe for hash @h starts at, and the one after @i. */
static inline uint32_t ptab_home(const struct ptab *t, uint32_t h)
{
	return h & (t->cap - 1);
}

static inline uint32_t ptab_next(const struct ptab *t, uint32_t i)
{
	return (i + 1) & (t->cap - 1);
}

/* Every entry of @t, in slot order: ptab_for_each(t, i, e) { ... } with
 * uint32_t i; break leaves it. */
#define ptab_for_each(t, i, e)                                              \
	for ((i) = 0; (i) < (t)->cap; (i)++)                                \
		if (((e) = (t)->slot[(i)]) != NULL)

/*
 * Every entry whose hash is @h is met by:
 *
 *	if (t->cap)
 *		for (i = ptab_home(t, h); t->slot[i]; i = ptab_next(t, i))
 *			...
 *
 * (entries with other hashes are met too; the caller compares keys).
 */

/* Room for one more entry, growing the table if it must: 0 or -ENOMEM
 * (the table unchanged). */
int ptab_reserve(struct ptab *t, ptab_hash_fn hash);

/* Insert @e, hashed @h, after ptab_reserve() succeeded.  Never fails. */
void ptab_insert(struct ptab *t, void *e, uint32_t h);

/* ptab_reserve() then ptab_insert(). */
int ptab_add(struct ptab *t, void *e, uint32_t h, ptab_hash_fn hash);

/* Remove entry @e (hashed @h), which must be in the table. */
void ptab_remove(struct ptab *t, const void *e, uint32_t h, ptab_hash_fn hash);

/* Release the slots; the entries are the caller's. */
void ptab_free(struct ptab *t);

/* Hashes: a 64-bit finalizer, and a name's hash. */
static inline uint64_t ptab_mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

uint32_t ptab_hash_name(const char *name);

#endif /* STATEFS_STORE_PTAB_H */
