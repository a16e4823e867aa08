/*
 * use.c - what a mount follows: the tenants it uses.  A mount of a
 * shared store follows the log of each tenant it has used (looked up,
 * listed, opened, watched, changed: the kernel acted on one of its
 * inodes, or a transition waits for its log) and stops following one it
 * has not used for follow_idle, once the kernel holds none of its
 * inodes; so its Redis traffic and its memory grow with what it uses,
 * not with the store (docs/shared-store.md).
 *
 * What it owns
 * ------------
 * The signals, as fs/ gives them through store.h (fs/inode.c, the
 * kernel's inode table): a use (store_use: the kernel is about to act on
 * a node; the node's tenant stamped with the store's clock, and loaded
 * first when the mirror holds only its shell) and the kernel's holds
 * (store_hold when the kernel learns a node, store_release when it
 * forgets it: the count of the tenant's inodes the kernel holds, a cwd,
 * an open file, an inotify watch, a cached name).  A root .events or
 * .snapshot is a use and a hold of every tenant (its readers see every
 * tenant's lines, its copy every tenant's nodes).
 * A shell is a tenant's node alone (its name, inode number, owner,
 * times and link count: the root listing stays complete and shows what
 * a followed tenant would), its copy dropped and its log not read.  Its
 * link count is 2 + its parents in Redis (the tenant hash's gauge, read
 * when the shell is made, the count of the copy when it is unloaded,
 * and again for each shell whose log's seq moved: at a fsync of any
 * directory, and by the follower within BLOCK_MS of a use of the root,
 * remote_shells_refresh; a count that changed is dropped from the
 * kernel's caches).  The tenant is loaded again, as a reload is, from sfs_dump
 * (mirror_load_tenant: the inode numbers are Redis's, the same as
 * before), by the follower, which alone applies; a caller that needs a
 * tenant followed puts its id on remote->wanted, wakes the follower
 * (a byte on its pipe, redis/subscribe.c) and waits on remote->applied,
 * as a transition waits for its outcome (wait_seq).
 * The follower's side (redis/follow.c): it loads what is wanted, makes a
 * shell of each tenant the root log names that nobody here waits for,
 * and, every BLOCK_MS, asks the kernel to forget each followed tenant
 * idle for follow_idle (the forget hook: fs/ drops its name from the
 * kernel's caches) and unloads each whose holds are 0.
 *
 * Invariants
 * ----------
 *  1. A tenant with a hold is never unloaded: the nodes the kernel knows
 *     stay the mirror's (a handle never goes stale by an unload).
 *  2. A use stamps used_ms before it reads whether the tenant is a shell,
 *     under the mirror's lock, and the follower rechecks used_ms and the
 *     holds under it when it marks an unload: a use that saw the tenant
 *     loaded is never followed by an unload within follow_idle.
 *  3. follow_idle=0: every tenant is followed, as always.
 *  4. A use that cannot load its tenant (Redis not reached within
 *     store_timeout) is -EIO and changes nothing: the shell stays, and
 *     the next use tries again.  Only a dump that says the tenant is
 *     gone ends the shell (its node dies: ESTALE).
 *
 * Threads and locks
 * -----------------
 * Any thread.  mirror->lock (LOCK_ENGINE_INDEX) for the tenant's fields;
 * remote->lock (LOCK_ENGINE_STATE, alone) for the wanted list and the
 * wait.  No store lock is held while a caller waits (store_use is
 * called with none).
 */
#include "store/engine.h"
#include "redis/mirror.h"
#include "redis/internal.h"

#include <errno.h>

/* The store instance's generation, as a hold's token carries it. */
static uint64_t generation(struct remote *r)
{
	uint64_t g;

	lock(&r->lock, LOCK_ENGINE_STATE);
	g = r->generation;
	unlock(&r->lock, LOCK_ENGINE_STATE);
	return g & 0xffff;
}

/* The tenant node of @n (borrowed, or with a reference in *@ref), or
 * NULL: the root, its special files, a state with no link. */
static struct store_node *tenant_of(struct store *s, struct store_node *n,
				    struct store_node **ref)
{
	*ref = NULL;
	if (store_node_kind(n) == STORE_CHILD)
		return *ref = state_tenant(s, node_child(n));
	return store_node_tenant(n);
}

/* Is tenant @tid followed (or gone, or the mirror follows everything)?
 * Stamps its use. */
static bool followed(struct store *s, uint64_t tid)
{
	struct mirror *m = mirror_of(s);
	struct mtenant *mt;
	bool yes;

	lock(&m->lock, LOCK_ENGINE_INDEX);
	mt = mt_find_locked(m, tid);
	if (mt) {
		mt->used_ms = store_now_ms(s);
		/* Followed: loaded, or read from its log's start (its
		 * first entry makes its node). */
		yes = !mt->shell && !mt->unloading;
	} else {
		yes = tid <= m->max_tid; /* gone */
	}
	unlock(&m->lock, LOCK_ENGINE_INDEX);
	return yes;
}

/* Put @tids on the wanted list (0 or -ENOMEM). */
static int want(struct remote *r, const uint64_t *tids, size_t n)
{
	int rc = 0;

	lock(&r->lock, LOCK_ENGINE_STATE);
	if (r->nwanted + n > r->capwanted) {
		size_t cap = (r->nwanted + n) * 2 + 16;
		uint64_t *w = st_realloc(r->wanted, cap * sizeof(*w));

		if (!w)
			rc = -ENOMEM;
		else
			r->wanted = w, r->capwanted = cap;
	}
	if (rc == 0) {
		memcpy(r->wanted + r->nwanted, tids, n * sizeof(*tids));
		r->nwanted += n;
	}
	unlock(&r->lock, LOCK_ENGINE_STATE);
	return rc;
}

/* Wait until every tenant of @tids[0..n) is followed; 0 or -EIO when
 * none more was within store_timeout and a second. */
static int follow_wait(struct store *s, uint64_t *tids, size_t n)
{
	struct remote *r = remote_of(s);
	uint64_t until = mono_ms() + r->cfg.timeout_ms + 1000, woke = 0;
	int rc = want(r, tids, n);

	while (rc == 0) {
		uint64_t batches;
		size_t left = 0;

		lock(&r->lock, LOCK_ENGINE_STATE);
		batches = r->batches;
		unlock(&r->lock, LOCK_ENGINE_STATE);
		for (size_t i = 0; i < n; i++)
			if (!followed(s, tids[i]))
				tids[left++] = tids[i];
		/* Many at once (the whole store's): the bound is for each. */
		if (left < n)
			until = mono_ms() + r->cfg.timeout_ms + 1000;
		n = left;
		if (n == 0)
			return 0;
		if (mono_ms() >= until)
			return -EIO;
		/* Again now and then: the follower may have been between
		 * two reads when it was woken. */
		if (mono_ms() - woke >= 200) {
			follow_wake(s);
			woke = mono_ms();
		}
		lock(&r->lock, LOCK_ENGINE_STATE);
		if (r->batches == batches)
			applied_wait_locked(r, 20);
		unlock(&r->lock, LOCK_ENGINE_STATE);
	}
	return rc;
}

int follow_ensure(struct store *s, uint64_t tid)
{
	struct remote *r = remote_of(s);

	if (!r || r->idle_ms == 0 || tid == 0 || followed(s, tid))
		return 0;
	/* The follower's own waits (a reload's) never need it. */
	if (r->running && pthread_equal(pthread_self(), r->thread))
		return 0;
	return follow_wait(s, &tid, 1);
}

bool follow_whole(struct store *s)
{
	struct remote *r = remote_of(s);

	/* While every tenant is held, none is unloaded and every new one
	 * is followed (redis/follow.c): the shells the root's use loaded
	 * stay loaded. */
	return r->idle_ms == 0 ||
	       (atomic_load(&r->holds_all) > 0 &&
		mirror_tenants_unfollowed(s, NULL, 0) == 0);
}

int remote_use(struct store *s, struct store_node *n)
{
	struct remote *r = remote_of(s);
	struct store_node *t, *ref;
	uint64_t tid;
	int rc = 0;

	if (!r || r->idle_ms == 0)
		return 0;
	if (!n) {
		/* The whole store: every tenant it holds a shell of. */
		atomic_store(&r->all_used_ms, store_now_ms(s));
		uint64_t *ids;
		size_t cap = mirror_tenants_unfollowed(s, NULL, 0) + 16, k;

		ids = st_calloc(cap, sizeof(*ids));
		if (!ids)
			return -ENOMEM;
		/* Those being unloaded too: loaded again once they are
		 * shells, so that the copy is whole. */
		k = mirror_tenants_unfollowed(s, ids, cap);
		rc = follow_wait(s, ids, k < cap ? k : cap);
		free(ids);
		return rc;
	}
	if (store_node_kind(n) == STORE_ROOT) {
		/* What it shows of the shells (their link counts) is read
		 * again by the follower, within BLOCK_MS. */
		atomic_store(&r->root_used, true);
		return 0;
	}
	t = tenant_of(s, n, &ref);
	tid = t ? mirror_tid_of(s, t) : 0;
	if (ref)
		store_node_unref(s, ref);
	/* A node the mirror does not follow as live: the operation
	 * answers for itself. */
	return tid ? follow_ensure(s, tid) : 0;
}

/* A hold's token: the tenant's id, or HOLD_ALL, with the store
 * instance's generation above it (a hold of an older instance's node is
 * released into nothing). */
#define HOLD_ALL ((uint64_t)1 << 47)
#define HOLD_TID (HOLD_ALL - 1)

uint64_t remote_hold(struct store *s, struct store_node *n)
{
	struct remote *r = remote_of(s);
	struct mirror *m = mirror_of(s);
	struct store_node *t, *ref;
	struct mtenant *mt;
	uint64_t tid, gen;

	if (!r || r->idle_ms == 0)
		return 0;
	gen = generation(r);
	if (!n) {
		atomic_fetch_add(&r->holds_all, 1);
		return HOLD_ALL | gen << 48;
	}
	t = tenant_of(s, n, &ref);
	tid = t ? tenant_engine_id(node_tenant(t)) : 0;
	if (ref)
		store_node_unref(s, ref);
	if (!tid || tid > HOLD_TID)
		return 0;
	lock(&m->lock, LOCK_ENGINE_INDEX);
	mt = mt_find_locked(m, tid);
	if (mt) {
		mt->holds++;
		mt->used_ms = store_now_ms(s);
	}
	unlock(&m->lock, LOCK_ENGINE_INDEX);
	return mt ? tid | gen << 48 : 0;
}

void remote_release(struct store *s, uint64_t token)
{
	struct remote *r = remote_of(s);
	struct mirror *m = mirror_of(s);
	struct mtenant *mt;
	uint64_t tid = token & (HOLD_ALL | HOLD_TID);

	if (!r || token == 0)
		return;
	/* The whole store's hold outlives an instance (nothing resets the
	 * count): released whatever its generation. */
	if (tid == HOLD_ALL) {
		atomic_fetch_sub(&r->holds_all, 1);
		return;
	}
	if ((token >> 48) != generation(r))
		return;
	lock(&m->lock, LOCK_ENGINE_INDEX);
	mt = mt_find_locked(m, tid);
	if (mt && mt->holds > 0)
		mt->holds--;
	unlock(&m->lock, LOCK_ENGINE_INDEX);
}
