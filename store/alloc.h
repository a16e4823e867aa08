/*
 * alloc.h - every allocation of store/ goes through these names.
 *
 * In the daemon they are the C library's.  Built with -DSTORE_FAULTS (the
 * unit tests), the Nth allocation from the moment a test arms the hook
 * fails, so a test can fail every allocation along a transition in turn
 * and check that the caller gets -ENOMEM and the store is exactly as
 * before (tests/unit/store/test_faults.c).
 */
#ifndef STATEFS_STORE_ALLOC_H
#define STATEFS_STORE_ALLOC_H

#include <stdlib.h>
#include <string.h>

#ifdef STORE_FAULTS
#include "store/store_test.h" /* store_fault_malloc() and the rest */
#define st_malloc store_fault_malloc
#define st_calloc store_fault_calloc
#define st_realloc store_fault_realloc
#define st_strdup store_fault_strdup
#else
#define st_malloc malloc
#define st_calloc calloc
#define st_realloc realloc
#define st_strdup strdup
#endif

#endif /* STATEFS_STORE_ALLOC_H */
