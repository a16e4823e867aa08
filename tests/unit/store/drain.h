/*
 * drain.h - what the drain tests (test_drain.c, test_drain_tenant.c)
 * share: the documented drain window, a scope's gauges, its drain state,
 * the refusals counted, and event lines compared in any order (a clear
 * removes its parents in no set order).
 *
 * Include it after tests/unit/store/fixture.h.
 */
#ifndef STATEFS_UNIT_DRAIN_H
#define STATEFS_UNIT_DRAIN_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "layout/layout.h"
#include "store/store.h"
#include "tests/unit/unit.h"
#include "tests/unit/store/fixture.h"

#define WINDOW 30000 /* the documented default drain_window, ms */

/* Helpers ------------------------------------------------------------- */

/* The gauges of @tenant (NULL: the store) are all zero. */
static inline void assert_empty_gauges(struct ctx *c, struct store_node *tenant)
{
	struct store_stats st = stats(c, tenant);

	if (!tenant)
		assert_int_equal(st.tenants, 0);
	assert_int_equal(st.parents, 0);
	assert_int_equal(st.children, 0);
	assert_int_equal(st.links, 0);
	assert_int_equal(st.tombstones, 0);
	assert_int_equal(st.bytes, 0);
}

/* The drain state of @tenant (NULL: the store), and its ms_left. */
static inline enum store_state dstate(struct ctx *c, struct store_node *tenant,
			       uint64_t *left)
{
	uint64_t ms = 0xdeadbeef;
	enum store_state st = store_drain_state(c->s, tenant, &ms);

	if (left)
		*left = ms;
	return st;
}

static inline void assert_draining(struct ctx *c, struct store_node *tenant,
			    uint64_t ms_left)
{
	uint64_t left = 0;
	enum store_state st = dstate(c, tenant, &left);

	if (st != STORE_DRAINING)
		fail_msg("drain state %d, expected draining", (int)st);
	assert_int_equal(left, ms_left);
}

static inline void assert_dstate(struct ctx *c, struct store_node *tenant,
			  enum store_state want)
{
	enum store_state st = dstate(c, tenant, NULL);

	if (st != want)
		fail_msg("drain state %d, expected %d", (int)st, (int)want);
}

static inline uint64_t refused_draining(struct ctx *c)
{
	return stats(c, NULL).refused[STORE_REFUSED_DRAINING];
}

/* Event readers ------------------------------------------------------- */

static inline int cmp_strp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* @text's lines sorted (malloc'd): a multiset of lines as one string. */
static inline char *sorted_lines(const char *text)
{
	size_t n = 0, len = strlen(text);
	char *copy = strdup(text), *out = malloc(len + 1), **v, *p;

	assert_non_null(copy);
	assert_non_null(out);
	for (p = copy; *p; p++)
		n += *p == '\n';
	v = calloc(n + 1, sizeof *v);
	assert_non_null(v);
	n = 0;
	for (p = copy; *p;) {
		char *nl = strchr(p, '\n');

		assert_non_null(nl);
		*nl = '\0';
		v[n++] = p;
		p = nl + 1;
	}
	qsort(v, n, sizeof *v, cmp_strp);
	out[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		strcat(out, v[i]);
		strcat(out, "\n");
	}
	free(v);
	free(copy);
	return out;
}

/*
 * The pending lines of @d are @want in any order (the lines of one
 * transition, like a drain's clear, have no promised order).
 */
static inline void expect_events_any_order(struct ctx *c, struct rd *d,
				    const char *want)
{
	char *got = rd_take(c, d);
	char *sg = sorted_lines(got), *sw = sorted_lines(want);

	if (strcmp(sg, sw) != 0) {
		print_error("events expected (any order):\n%sgot:\n%s", want,
			    got);
		free(got);
		free(sg);
		free(sw);
		fail_msg("event lines differ");
	}
	free(got);
	free(sg);
	free(sw);
}

#endif /* STATEFS_UNIT_DRAIN_H */
