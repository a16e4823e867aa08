/*
 * stats_text.h - reading the text of .stats in the layout/ unit tests:
 * a view formatted by layout_format_stats(), its "key value" lines
 * parsed, a key's value as a number.  test_layout_format.c checks that
 * text; test_layout_options.c reads an option's field back through it.
 *
 * Include it after tests/unit/unit.h and layout/layout.h.
 */
#ifndef STATEFS_UNIT_STATS_TEXT_H
#define STATEFS_UNIT_STATS_TEXT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout/layout.h"
#include "tests/unit/unit.h"

struct kv {
	char key[64];
	char value[300];
};

/* Parse "key value\n" lines; returns how many, fails on a malformed one. */
static inline size_t parse_stats(const char *text, struct kv *kv, size_t max)
{
	size_t n = 0;

	while (*text) {
		const char *nl = strchr(text, '\n');
		const char *sp = strchr(text, ' ');

		assert_non_null(nl); /* every line ends with "\n" */
		assert_non_null(sp);
		assert_true(sp < nl);
		assert_true(sp > text);
		assert_true(n < max);
		assert_null(memchr(sp + 1, ' ', (size_t)(nl - sp - 1)));
		snprintf(kv[n].key, sizeof(kv[n].key), "%.*s",
			 (int)(sp - text), text);
		snprintf(kv[n].value, sizeof(kv[n].value), "%.*s",
			 (int)(nl - sp - 1), sp + 1);
		n++;
		text = nl + 1;
	}
	return n;
}

static inline char *format(const struct layout_stats_view *v)
{
	size_t need = layout_format_stats(NULL, 0, v);
	char *buf = malloc(need + 1);

	assert_non_null(buf);
	assert_int_equal(layout_format_stats(buf, need + 1, v), need);
	assert_int_equal(strlen(buf), need);
	return buf;
}

static const char *value_of(const struct kv *kv, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(kv[i].key, key) == 0)
			return kv[i].value;
	fail_msg("no key %s", key);
	return NULL;
}

static inline uint64_t u64_of(const struct kv *kv, size_t n, const char *key)
{
	uint64_t v = 0;

	if (layout_parse_u64(value_of(kv, n, key), &v) != 0)
		fail_msg("%s: not a number: '%s'", key, value_of(kv, n, key));
	return v;
}

/* The field of @l an option sets, through the .stats text of the root:
 * also checks that every option shows up in .stats. */
static inline uint64_t stats_value(const struct store_limits *l, const char *key)
{
	struct layout_stats_view v;
	struct kv kv[64];
	char *text;
	size_t n;
	uint64_t value;

	memset(&v, 0, sizeof(v));
	v.limits = l;
	text = format(&v);
	n = parse_stats(text, kv, 64);
	value = u64_of(kv, n, key);
	free(text);
	return value;
}

#endif /* STATEFS_UNIT_STATS_TEXT_H */
