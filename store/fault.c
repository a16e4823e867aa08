/*
 * fault.c - the allocation-failure hook of test builds (see alloc.h).
 *
 * store_fault_fail_nth(n) arms it: counting from then, the nth
 * allocation through st_malloc/st_calloc/st_realloc/st_strdup fails
 * (returns NULL) and the hook disarms.  Only in -DSTORE_FAULTS builds.
 */
#ifdef STORE_FAULTS
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "store/alloc.h"
#include "store/store_test.h"

static atomic_ulong countdown; /* 0: disarmed */

void store_fault_fail_nth(unsigned long n)
{
	atomic_store(&countdown, n);
}

bool store_fault_armed(void)
{
	return atomic_load(&countdown) != 0;
}

/* True when this allocation is the one to fail. */
static bool fail_now(void)
{
	unsigned long c = atomic_load(&countdown);

	while (c) {
		if (atomic_compare_exchange_weak(&countdown, &c, c - 1))
			return c == 1;
	}
	return false;
}

void *store_fault_malloc(size_t n)
{
	return fail_now() ? NULL : malloc(n);
}

void *store_fault_calloc(size_t k, size_t n)
{
	return fail_now() ? NULL : calloc(k, n);
}

void *store_fault_realloc(void *p, size_t n)
{
	return fail_now() ? NULL : realloc(p, n);
}

char *store_fault_strdup(const char *s)
{
	return fail_now() ? NULL : strdup(s);
}
#else
/* ISO C wants a translation unit to declare something. */
typedef int store_fault_unused;
#endif
