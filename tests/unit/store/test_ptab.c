/*
 * test_ptab.c - unit tests of the open-addressed pointer table
 * (store/ptab.c): random inserts and removals checked against a plain
 * array, with hashes that collide on purpose so runs wrap around the end
 * of the array and deletion has to shift entries back; growth that
 * cannot allocate leaves the table as it was.
 */
#include "tests/unit/unit.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "store/ptab.h"
#include "store/store_test.h" /* store_fault_fail_nth() */

#define N 4000

struct item {
	uint32_t key;
	uint32_t hash;
	bool in;
};

static struct item items[N];

static uint32_t item_hash(const void *e)
{
	return ((const struct item *)e)->hash;
}

static struct item *find(const struct ptab *t, uint32_t key, uint32_t hash)
{
	struct item *it;

	if (!t->cap)
		return NULL;
	for (uint32_t i = ptab_home(t, hash); (it = t->slot[i]);
	     i = ptab_next(t, i))
		if (it->key == key)
			return it;
	return NULL;
}

/* Every item is found exactly when it is in; the count agrees. */
static void check(const struct ptab *t)
{
	uint32_t n = 0, seen = 0, k;
	const struct item *e;

	for (int i = 0; i < N; i++) {
		struct item *f = find(t, items[i].key, items[i].hash);

		assert_ptr_equal(f, items[i].in ? &items[i] : NULL);
		n += items[i].in;
	}
	ptab_for_each(t, k, e)
		seen++;
	assert_int_equal(t->n, n);
	assert_int_equal(seen, n);
	assert_true((uint64_t)t->n * 4 <= (uint64_t)t->cap * 3);
}

/* Random churn with hashes from @spread values (1: all collide). */
static void churn(uint32_t spread, unsigned seed)
{
	struct ptab t = { 0 };

	srand(seed);
	for (int i = 0; i < N; i++) {
		items[i].key = (uint32_t)i;
		/* High bits too, so the home is a low-bit mask of them. */
		items[i].hash = (uint32_t)(rand() % spread) * 0x9e3779b1u;
		items[i].in = false;
	}
	for (int round = 0; round < 6 * N; round++) {
		struct item *it = &items[rand() % N];

		if (it->in) {
			ptab_remove(&t, it, it->hash, item_hash);
			it->in = false;
		} else {
			assert_int_equal(ptab_add(&t, it, it->hash, item_hash), 0);
			it->in = true;
		}
		if (round % 997 == 0)
			check(&t);
	}
	check(&t);
	/* Empty it completely: nothing is left behind. */
	for (int i = 0; i < N; i++)
		if (items[i].in) {
			ptab_remove(&t, &items[i], items[i].hash, item_hash);
			items[i].in = false;
		}
	check(&t);
	assert_int_equal(t.n, 0);
	ptab_free(&t);
}

static void test_churn_spread(void **state)
{
	(void)state;
	churn(UINT32_MAX, 1);
}

static void test_churn_collisions(void **state)
{
	(void)state;
	churn(7, 2);   /* long runs that wrap around the array's end */
	churn(1, 3);   /* one run: every entry shares a home */
}

static void test_growth_without_memory(void **state)
{
	struct ptab t = { 0 };
	void **slots;
	uint32_t cap;
	int i = 0;

	(void)state;
	for (int k = 0; k < N; k++) {
		items[k].key = (uint32_t)k;
		items[k].hash = (uint32_t)k * 0x9e3779b1u;
		items[k].in = false;
	}
	/* Fill up to the point where the next add must grow. */
	do {
		assert_int_equal(ptab_add(&t, &items[i], items[i].hash, item_hash), 0);
		items[i++].in = true;
	} while ((uint64_t)(t.n + 1) * 4 <= (uint64_t)t.cap * 3);
	slots = t.slot;
	cap = t.cap;
	store_fault_fail_nth(1);
	assert_int_equal(ptab_add(&t, &items[i], items[i].hash, item_hash), -ENOMEM);
	store_fault_fail_nth(0);
	assert_ptr_equal(t.slot, slots);
	assert_int_equal(t.cap, cap);
	check(&t);
	assert_int_equal(ptab_add(&t, &items[i], items[i].hash, item_hash), 0);
	items[i].in = true;
	assert_int_equal(t.cap, cap * 2);
	check(&t);
	ptab_free(&t);
}

static void test_name_hash(void **state)
{
	(void)state;
	/* One process, one key: a name always hashes the same. */
	assert_int_equal(ptab_hash_name("f0000001"), ptab_hash_name("f0000001"));
	assert_int_not_equal(ptab_hash_name("f0000001"), ptab_hash_name("f0000002"));
	assert_int_not_equal(ptab_hash_name(""), ptab_hash_name("a"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_churn_spread),
		cmocka_unit_test(test_churn_collisions),
		cmocka_unit_test(test_growth_without_memory),
		cmocka_unit_test(test_name_hash),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
