/*
 * test_parse.c - unit tests of layout/parse.c: whole numbers
 * (layout_parse_u64) and seconds with up to three decimals
 * (layout_parse_seconds), the numbers every option and control value of
 * layout/ reads.
 *
 * layout/ is pure, so every test calls it directly.
 */
#include "tests/unit/unit.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "layout/layout.h"

/* Numbers ---------------------------------------------------------------- */

static void test_u64_valid(void **state)
{
	uint64_t v;

	(void)state;
	assert_int_equal(layout_parse_u64("0", &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(layout_parse_u64("42", &v), 0);
	assert_int_equal(v, 42);
	assert_int_equal(layout_parse_u64("007", &v), 0);
	assert_int_equal(v, 7);
	assert_int_equal(layout_parse_u64("18446744073709551615", &v), 0);
	assert_true(v == UINT64_MAX);
}

static void test_u64_refused(void **state)
{
	static const char *const bad[] = {
		"", "-1", "+1", "-0", " 1", "1 ", "1\n", "1x", "x1", "0x10",
		"1.5", "1e3", "1,000", "1_000",
		"18446744073709551616", "99999999999999999999",
		"184467440737095516150",
	};
	uint64_t v = 12345;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (layout_parse_u64(bad[i], &v) != -EINVAL)
			fail_msg("'%s' should be refused", bad[i]);
	}
	assert_int_equal(v, 12345);
}

static void test_seconds_valid(void **state)
{
	static const struct {
		const char *s;
		uint64_t ms;
	} good[] = {
		{ "0", 0 },        { "30", 30000 },  { "1.5", 1500 },
		{ "0.001", 1 },    { "1.05", 1050 }, { "1.500", 1500 },
		{ "0.0", 0 },      { "00.250", 250 }, { "600", 600000 },
		/* The longest duration statefs takes (store.h). */
		{ "1000000000", STORE_DURATION_MAX_MS },
		{ "1000000000.000", STORE_DURATION_MAX_MS },
		{ "999999999.999", STORE_DURATION_MAX_MS - 1 },
	};
	uint64_t ms;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		if (layout_parse_seconds(good[i].s, &ms) != 0)
			fail_msg("'%s' should parse", good[i].s);
		if (ms != good[i].ms)
			fail_msg("'%s' gave %" PRIu64 " ms", good[i].s, ms);
	}
}

static void test_seconds_refused(void **state)
{
	static const char *const bad[] = {
		/* Finer than a millisecond is refused, never rounded. */
		"0.0015", "1.2345", "1.0000",
		"", "1.", ".5", ".", "-1", "+1", "-0.5", "1e3", "1s", " 1",
		"1 ", "1\n", "1,5", "1..5", "1.5.", "0x1", "inf", "nan",
		/* Overflow of the milliseconds. */
		"18446744073709551.616", "18446744073709552",
		"18446744073709551616",
		/* Longer than any duration statefs takes: now + it could
		 * wrap a deadline. */
		"1000000000.001", "1000000001", "18446744073709551.615",
		"18446744073709551", "9223372036854775.808",
	};
	uint64_t ms = 777;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (layout_parse_seconds(bad[i], &ms) != -EINVAL)
			fail_msg("'%s' should be refused", bad[i]);
	}
	assert_int_equal(ms, 777);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_u64_valid),
		cmocka_unit_test(test_u64_refused),
		cmocka_unit_test(test_seconds_valid),
		cmocka_unit_test(test_seconds_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
