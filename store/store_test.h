/*
 * store_test.h - the embedded store's test interface: what the tests,
 * the fuzz targets and the stress runs use to look inside the store or
 * steer it, and nothing the adapter needs.
 *
 * store.h is the authority's interface, the one a second authority
 * implements too; this header is the embedded store's own mechanics
 * made reachable for tests: the recount (store/check.c) and, in test
 * builds (-DSTORE_FAULTS), the allocation-failure hook (store/alloc.h,
 * store/fault.c) and the hooks that stop a snapshot or a cascade half
 * way.  Nothing here is called by the daemon, except that fs/ routes
 * the one allocation its inode table makes through the same failure
 * hook in test builds, so that the tests that fail each allocation of a
 * call in turn reach it too.
 */
#ifndef STATEFS_STORE_TEST_H
#define STATEFS_STORE_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/*
 * Test and diagnostic full scan (O(everything), holding the world lock
 * exclusive: no transition runs until it ends): recount every gauge and
 * compare with the counters, check that no child sits in a departed
 * bucket, that every state's link count equals the links that reach it,
 * and that every tenant's and parent's quota counters are exact.
 * Returns 0, or -EUCLEAN with a one-line reason in @why.
 */
int store_check_all(struct store *s, char *why, size_t whylen);

#ifdef STORE_FAULTS
/*
 * Test builds only (alloc.h): make the @n-th allocation from now fail
 * (n >= 1; 0 disarms), and tell whether that allocation is still ahead.
 */
void store_fault_fail_nth(unsigned long n);
bool store_fault_armed(void);

/*
 * The allocator the hook counts: the C library's, except that the armed
 * allocation returns NULL.  Every allocation of store/ goes through
 * these (store/alloc.h names them st_malloc and so on).
 */
void *store_fault_malloc(size_t n);
void *store_fault_calloc(size_t k, size_t n);
void *store_fault_realloc(void *p, size_t n);
char *store_fault_strdup(const char *s);

/*
 * Test builds only: the snapshot taker calls @fn(@arg, step) once after it
 * has fixed the snapshot's point in time (step 0) and once after each unit
 * it copies (steps 1, 2, ...), holding no lock, so a test can run
 * transitions in the middle of a snapshot.  @fn NULL removes it.
 */
void store_snapshot_step_hook(struct store *s,
			      void (*fn)(void *arg, unsigned step), void *arg);

/*
 * Test builds only: a cascade (a leave, a .depart, a parent's expiry, a
 * tenant cleanup, a drain's clear) calls @fn(@arg) before it takes each
 * link out of the departing bucket, holding that bucket's lock, its
 * tenant's and the world lock (exclusively for a drain's clear), but no
 * state's stripe: a test can make another thread publish on a state in
 * the middle of a cascade and wait for it.  @fn NULL removes it.
 */
void store_cascade_step_hook(struct store *s, void (*fn)(void *arg),
			     void *arg);

/* Test builds only: the snapshots taken so far, as if @epochs had been
 * (so a test can reach the epoch's 32-bit wrap). */
void store_snapshot_epochs(struct store *s, uint64_t epochs);
#endif

#endif /* STATEFS_STORE_TEST_H */
