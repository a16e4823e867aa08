/*
 * unit.h - what every C unit test of statefs includes: cmocka (which needs
 * its system headers first), the store's test interface
 * (store/store_test.h) and a manual clock for driving the store.
 */
#ifndef STATEFS_UNIT_H
#define STATEFS_UNIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "store/store_test.h"

/* A manual monotonic clock: tests move it with fake_clock_advance(). */
struct fake_clock {
	uint64_t now_ms;
};

static inline uint64_t fake_clock_now(void *arg)
{
	return ((struct fake_clock *)arg)->now_ms;
}

static inline void fake_clock_advance(struct fake_clock *c, uint64_t ms)
{
	c->now_ms += ms;
}

#endif /* STATEFS_UNIT_H */
