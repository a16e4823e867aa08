/*
 * ptab.c - an open-addressed table of pointers (see ptab.h).
 */
#include "store/ptab.h"
#include "store/alloc.h"

#include <errno.h>
#include <pthread.h>
#include <sys/random.h>

#define PTAB_MIN 8

/* Keep at most 3/4 of the slots full. */
static bool ptab_full(const struct ptab *t)
{
	return (uint64_t)(t->n + 1) * 4 > (uint64_t)t->cap * 3;
}

int ptab_reserve(struct ptab *t, ptab_hash_fn hash)
{
	struct ptab g;

	if (!ptab_full(t))
		return 0;
	if (t->cap > UINT32_MAX / 2)
		return -ENOMEM;
	g.cap = t->cap ? t->cap * 2 : PTAB_MIN;
	g.n = 0;
	g.slot = st_calloc(g.cap, sizeof(*g.slot));
	if (!g.slot)
		return -ENOMEM;
	for (uint32_t i = 0; i < t->cap; i++)
		if (t->slot[i])
			ptab_insert(&g, t->slot[i], hash(t->slot[i]));
	free(t->slot);
	*t = g;
	return 0;
}

void ptab_insert(struct ptab *t, void *e, uint32_t h)
{
	uint32_t i = ptab_home(t, h);

	while (t->slot[i])
		i = ptab_next(t, i);
	t->slot[i] = e;
	t->n++;
}

int ptab_add(struct ptab *t, void *e, uint32_t h, ptab_hash_fn hash)
{
	int rc = ptab_reserve(t, hash);

	if (rc == 0)
		ptab_insert(t, e, h);
	return rc;
}

/*
 * Take @e out, then walk the rest of its run: an entry whose home lies
 * cyclically outside (hole, entry] could no longer be found past the
 * hole, so it moves into the hole, which moves to where it was.
 */
void ptab_remove(struct ptab *t, const void *e, uint32_t h, ptab_hash_fn hash)
{
	uint32_t hole = ptab_home(t, h), i, home;

	while (t->slot[hole] != e)
		hole = ptab_next(t, hole);
	t->slot[hole] = NULL;
	t->n--;
	for (i = ptab_next(t, hole); t->slot[i]; i = ptab_next(t, i)) {
		home = ptab_home(t, hash(t->slot[i]));
		if (((i - home) & (t->cap - 1)) >= ((i - hole) & (t->cap - 1))) {
			t->slot[hole] = t->slot[i];
			t->slot[i] = NULL;
			hole = i;
		}
	}
}

void ptab_free(struct ptab *t)
{
	free(t->slot);
	t->slot = NULL;
	t->cap = t->n = 0;
}

/*
 * Names come from users, so their hash is keyed per process: FNV-1a
 * from a random basis, then mixed.  Which slot a name lands in cannot
 * be chosen from outside to build one long probe run.
 */
static uint64_t name_key;
static pthread_once_t name_key_once = PTHREAD_ONCE_INIT;

static void name_key_init(void)
{
	uint64_t k = 0;

	if (getrandom(&k, sizeof(k), GRND_NONBLOCK) != sizeof(k))
		k = (uint64_t)(uintptr_t)&k; /* address-space randomness */
	name_key = k;
}

uint32_t ptab_hash_name(const char *name)
{
	uint64_t h;

	pthread_once(&name_key_once, name_key_init);
	h = 0xcbf29ce484222325ULL ^ name_key;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
		h ^= *p;
		h *= 0x100000001b3ULL;
	}
	return (uint32_t)(ptab_mix64(h) >> 32);
}
