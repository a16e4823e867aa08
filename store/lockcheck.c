/*
 * lockcheck.c - the lock order, checked (builds with -DSTORE_LOCKCHECK).
 *
 * What it owns: one record per thread of the lock levels it holds (a
 * count per level, and for the two levels whose locks may be held
 * together, the highest key held).  No lock of its own: the record is the
 * thread's.
 *
 * Every lock wrapper (engine.h, internal.h) reports here before it
 * waits and after it lets go.  A thread may take a lock of level L only when
 *  - it holds no leaf (LOCK_FIRST_LEAF and above) and no lock held alone;
 *  - L is held alone (LOCK_FIRST_ALONE and above) only if it holds no
 *    lock at all;
 *  - every level it holds is below L, or equal to L for a keyed level
 *    (LOCK_PARENT, LOCK_STRIPE) whose held keys are all below the new
 *    one: buckets in ascending inode order, stripes in ascending address
 *    order.
 * The highest key held is kept while any lock of the level is, so a
 * thread that lets go of its highest bucket first and then takes one
 * between is reported too: no path of the store does that.
 *
 * A violation prints where the lock was taken and what was held, then
 * aborts: a test that takes a path out of order fails at once, whether or
 * not the race that would deadlock on it happened.
 */
#ifdef STORE_LOCKCHECK
#include "store/internal.h"

static const char *const level_names[LOCK_NLEVELS] = {
	[LOCK_NONE] = "none",
	[LOCK_ENGINE_APPLY] = "engine apply",
	[LOCK_SNAP_TAKER] = "snapshot taker",
	[LOCK_WORLD] = "world",
	[LOCK_STORE] = "store",
	[LOCK_TENANT] = "tenant",
	[LOCK_PARENT] = "parent bucket",
	[LOCK_SNAP_ROWS] = "snapshot rows",
	[LOCK_STAGE] = "stage",
	[LOCK_STRIPE] = "state stripe",
	[LOCK_FROZEN] = "snapshot frozen states",
	[LOCK_HEAP] = "lease heap",
	[LOCK_ACL] = "tenant acl",
	[LOCK_EVLOG] = "event log",
	[LOCK_TOMBQ] = "tombstone queue",
	[LOCK_SNAP_HOLD] = "snapshot holds",
	[LOCK_REAPER] = "reaper",
	[LOCK_ENGINE_INDEX] = "engine index",
	[LOCK_ENGINE_POOL] = "engine pool",
	[LOCK_ENGINE_CONN] = "engine connection",
	[LOCK_ENGINE_STATE] = "engine state",
	[LOCK_ENGINE_LOCKS] = "engine locks",
};

static __thread struct {
	uint32_t n[LOCK_NLEVELS];      /* locks held, per level */
	uint64_t key[LOCK_NLEVELS];    /* keyed levels: the highest held */
} held;

static bool keyed(enum store_lock_level level)
{
	return level == LOCK_PARENT || level == LOCK_STRIPE;
}

static void level_check(enum store_lock_level level, const char *file,
			int line)
{
	if (level <= LOCK_NONE || level >= LOCK_NLEVELS) {
		fprintf(stderr, "statefs: lock level %d at %s:%d\n", (int)level,
			file, line);
		abort();
	}
}

static void violation(const char *file, int line, enum store_lock_level level,
		      enum store_lock_level h, const char *why)
{
	fprintf(stderr, "statefs: lock order violated at %s:%d: taking %d (%s) "
		"while holding %d (%s): %s\n", file, line, (int)level,
		level_names[level], (int)h, level_names[h], why);
	abort();
}

void store_lockcheck_take(enum store_lock_level level, uint64_t key,
			  const char *file, int line)
{
	level_check(level, file, line);
	for (int h = LOCK_NONE + 1; h < LOCK_NLEVELS; h++) {
		if (!held.n[h])
			continue;
		if (h >= LOCK_FIRST_ALONE)
			violation(file, line, level, h, "held alone");
		if (level >= LOCK_FIRST_ALONE)
			violation(file, line, level, h,
				  "taken with no store lock held");
		if (h >= LOCK_FIRST_LEAF)
			violation(file, line, level, h, "a leaf is held");
		if (h > (int)level)
			violation(file, line, level, h,
				  "an outer lock after an inner one");
		if (h == (int)level && !keyed(level))
			violation(file, line, level, h,
				  "two locks of one level");
		if (h == (int)level && key <= held.key[h])
			violation(file, line, level, h,
				  "not in ascending order of its level");
	}
	held.n[level]++;
	if (keyed(level) && key > held.key[level])
		held.key[level] = key;
}

void store_lockcheck_drop(enum store_lock_level level, const char *file,
			  int line)
{
	level_check(level, file, line);
	if (!held.n[level]) {
		fprintf(stderr, "statefs: releasing %s at %s:%d, not held\n",
			level_names[level], file, line);
		abort();
	}
	if (--held.n[level] == 0)
		held.key[level] = 0;
}

void store_lockcheck_held(enum store_lock_level level, const char *file,
			  int line)
{
	level_check(level, file, line);
	if (!held.n[level]) {
		fprintf(stderr, "statefs: %s:%d expects the %s lock held\n",
			file, line, level_names[level]);
		abort();
	}
}
#else
/* ISO C wants a translation unit to declare something. */
typedef int store_lockcheck_unused;
#endif
