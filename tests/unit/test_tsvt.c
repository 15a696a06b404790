/* The version table and page sets, tested as their headers specify. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "tsvt.h"

static void test_new_table_has_file_content_on_cpu_only(void **state)
{
	(void)state;
	struct tsvt t;
	assert_int_equal(tsvt_init(&t, 100), 0);
	for (uint64_t p = 0; p < 100; p++) {
		assert_int_equal(tsvt_version(&t, TSVT_CPU, p), 1);
		assert_int_equal(tsvt_newest(&t, p), 1);
		assert_false(tsvt_is_dirty(&t, TSVT_CPU, p));
	}
	assert_int_equal(tsvt_attach_device(&t, 0), 0);
	assert_int_equal(tsvt_version(&t, TSVT_DEV(0), 5), 0); /* not held */
	assert_false(tsvt_holds(&t, 0, 5));
	tsvt_destroy(&t);
}

static void test_hold_takes_newest_version(void **state)
{
	(void)state;
	struct tsvt t;
	assert_int_equal(tsvt_init(&t, 10), 0);
	tsvt_bump(&t, TSVT_CPU, 3);
	assert_int_equal(tsvt_hold(&t, 1, 0, 10), 0);
	assert_int_equal(tsvt_version(&t, TSVT_DEV(1), 3), 2);
	assert_int_equal(tsvt_version(&t, TSVT_DEV(1), 4), 1);
	assert_true(tsvt_holds(&t, 1, 9));
	assert_int_equal(tsvt_unhold(&t, 1, 2, 3), 0);
	assert_false(tsvt_holds(&t, 1, 3));
	assert_int_equal(tsvt_version(&t, TSVT_DEV(1), 3), 0);
	assert_true(tsvt_holds(&t, 1, 5));
	tsvt_destroy(&t);
}

static void test_bump_makes_other_holders_stale(void **state)
{
	(void)state;
	struct tsvt t;
	struct page_list stale = {0};
	assert_int_equal(tsvt_init(&t, 1000), 0);
	assert_int_equal(tsvt_hold(&t, 0, 0, 1000), 0);
	assert_int_equal(tsvt_hold(&t, 2, 0, 500), 0);
	tsvt_bump(&t, TSVT_CPU, 7);
	tsvt_bump(&t, TSVT_CPU, 700);
	uint32_t v = tsvt_bump(&t, TSVT_DEV(0), 300); /* device 0 released 300 */
	assert_int_equal(tsvt_version(&t, TSVT_DEV(0), 300), v);

	assert_int_equal(tsvt_take_stale(&t, 0, 0, 1000, &stale), 0);
	assert_int_equal(stale.count, 2);
	assert_int_equal(stale.pages[0], 7);
	assert_int_equal(stale.pages[1], 700);

	page_list_clear(&stale);
	assert_int_equal(tsvt_take_stale(&t, 2, 0, 1000, &stale), 0);
	assert_int_equal(stale.count, 2); /* 700 is not held by device 2 */
	assert_int_equal(stale.pages[0], 7);
	assert_int_equal(stale.pages[1], 300);
	page_list_free(&stale);
	tsvt_destroy(&t);
}

static void test_take_stale_of_a_range_keeps_the_rest(void **state)
{
	(void)state;
	struct tsvt t;
	struct page_list stale = {0};
	assert_int_equal(tsvt_init(&t, 256), 0);
	assert_int_equal(tsvt_hold(&t, 0, 0, 256), 0);
	tsvt_bump(&t, TSVT_CPU, 10);
	tsvt_bump(&t, TSVT_CPU, 20); /* same summary group as 10 */
	assert_int_equal(tsvt_take_stale(&t, 0, 0, 15, &stale), 0);
	assert_int_equal(stale.count, 1);
	assert_int_equal(stale.pages[0], 10);
	/* taken pages are current now; 20, outside the range, is still stale */
	assert_false(tsvt_is_stale(&t, 0, 10));
	assert_true(tsvt_is_stale(&t, 0, 20));
	assert_int_equal(tsvt_version(&t, TSVT_DEV(0), 10), tsvt_newest(&t, 10));
	page_list_clear(&stale);
	assert_int_equal(tsvt_take_stale(&t, 0, 0, 256, &stale), 0);
	assert_int_equal(stale.count, 1);
	assert_int_equal(stale.pages[0], 20);
	page_list_free(&stale);
	tsvt_destroy(&t);
}

static void test_take_dirty_returns_pages_in_order_once(void **state)
{
	(void)state;
	struct tsvt t;
	struct page_list dirty = {0};
	assert_int_equal(tsvt_init(&t, 5000), 0);
	tsvt_mark_dirty(&t, TSVT_CPU, 4000, 3);
	tsvt_mark_dirty(&t, TSVT_CPU, 5, 1);
	tsvt_mark_dirty(&t, TSVT_CPU, 4001, 1);
	assert_true(tsvt_is_dirty(&t, TSVT_CPU, 4002));
	assert_int_equal(tsvt_take_dirty(&t, TSVT_CPU, &dirty), 0);
	assert_int_equal(dirty.count, 4);
	assert_int_equal(dirty.pages[0], 5);
	assert_int_equal(dirty.pages[1], 4000);
	assert_int_equal(dirty.pages[3], 4002);
	assert_false(tsvt_is_dirty(&t, TSVT_CPU, 4000));
	page_list_clear(&dirty);
	assert_int_equal(tsvt_take_dirty(&t, TSVT_CPU, &dirty), 0);
	assert_int_equal(dirty.count, 0);
	page_list_free(&dirty);
	tsvt_destroy(&t);
}

static void test_device_marks_dirty_only_pages_it_holds(void **state)
{
	(void)state;
	struct tsvt t;
	struct page_list dirty = {0};
	assert_int_equal(tsvt_init(&t, 100), 0);
	assert_int_equal(tsvt_hold(&t, 0, 0, 50), 0);
	tsvt_mark_dirty(&t, TSVT_DEV(0), 40, 20);
	assert_int_equal(tsvt_take_dirty(&t, TSVT_DEV(0), &dirty), 0);
	assert_int_equal(dirty.count, 10);
	assert_int_equal(dirty.pages[9], 49);
	page_list_free(&dirty);
	tsvt_destroy(&t);
}

static void test_extra_devices_store_only_where_they_hold(void **state)
{
	(void)state;
	struct tsvt t;
	uint64_t npages = 1u << 18; /* 1 GiB of 4 KiB pages */
	assert_int_equal(tsvt_init(&t, npages), 0);
	assert_int_equal(tsvt_hold(&t, 0, 0, npages), 0); /* the inline slot */
	size_t one_device = tsvt_metadata_bytes(&t);
	assert_true((double)one_device / (double)npages <= 16.0);
	assert_int_equal(tsvt_hold(&t, 1, 1000, 10), 0); /* one chunk */
	size_t two_devices = tsvt_metadata_bytes(&t);
	size_t growth = two_devices - one_device;
	assert_true(growth < TSVT_CHUNK_PAGES * 4 + npages / TSVT_CHUNK_PAGES * 8 + 2 * 8192 + 4096);
	assert_int_equal(tsvt_version(&t, TSVT_DEV(1), 1005), 1);
	assert_int_equal(tsvt_version(&t, TSVT_DEV(1), 5000), 0);
	uint32_t v = tsvt_bump(&t, TSVT_DEV(1), 1005);
	assert_int_equal(tsvt_newest(&t, 1005), v);
	assert_int_equal(tsvt_version(&t, TSVT_DEV(0), 1005), 1);
	tsvt_destroy(&t);
}

static void test_versions_renumber_before_wrapping(void **state)
{
	(void)state;
	struct tsvt t;
	struct page_list stale = {0};
	assert_int_equal(tsvt_init(&t, 1), 0);
	assert_int_equal(tsvt_hold(&t, 0, 0, 1), 0);
	tsvt_set_version(&t, TSVT_CPU, 0, TSVT_VERSION_MASK);
	tsvt_set_version(&t, TSVT_DEV(0), 0, TSVT_VERSION_MASK - 1);
	tsvt_mark_dirty(&t, TSVT_CPU, 0, 1);
	uint32_t v = tsvt_bump(&t, TSVT_CPU, 0);
	assert_true(v > 0 && v < 16);
	assert_int_equal(tsvt_newest(&t, 0), v);
	assert_true(tsvt_is_dirty(&t, TSVT_CPU, 0)); /* flags survive renumbering */
	assert_true(tsvt_version(&t, TSVT_DEV(0), 0) < v);
	assert_true(tsvt_version(&t, TSVT_DEV(0), 0) > 0);
	assert_int_equal(tsvt_take_stale(&t, 0, 0, 1, &stale), 0);
	assert_int_equal(stale.count, 1);
	page_list_free(&stale);
	tsvt_destroy(&t);
}

static void test_range_set_merges_splits_and_complements(void **state)
{
	(void)state;
	struct range_set s = {0}, gaps = {0};
	assert_int_equal(range_set_add(&s, 10, 20), 0);
	assert_int_equal(range_set_add(&s, 30, 40), 0);
	assert_int_equal(range_set_add(&s, 20, 25), 0); /* adjacent: merges */
	assert_int_equal(s.count, 2);
	assert_int_equal(s.items[0].end, 25);
	assert_int_equal(range_set_add(&s, 0, 100), 0); /* covers all */
	assert_int_equal(s.count, 1);
	assert_int_equal(range_set_remove(&s, 40, 50), 0); /* split */
	assert_int_equal(s.count, 2);
	assert_false(range_set_contains(&s, 45));
	assert_true(range_set_contains(&s, 39));
	assert_true(range_set_contains(&s, 50));
	assert_false(range_set_contains(&s, 100));
	assert_int_equal(range_set_complement(&s, 30, 120, &gaps), 0);
	assert_int_equal(gaps.count, 2);
	assert_int_equal(gaps.items[0].first, 40);
	assert_int_equal(gaps.items[0].end, 50);
	assert_int_equal(gaps.items[1].first, 100);
	assert_int_equal(gaps.items[1].end, 120);
	range_set_free(&s);
	range_set_free(&gaps);
}

/* Random adds and removes against a bitmap reference. */
static void test_range_set_matches_a_bitmap(void **state)
{
	(void)state;
	unsigned seed = getenv("TSVT_TEST_SEED") ? (unsigned)atoi(getenv("TSVT_TEST_SEED")) : 12345u;
	printf("range set seed %u\n", seed);
	srand(seed);
	enum { N = 300 };
	bool ref[N] = {0};
	struct range_set s = {0};
	for (int step = 0; step < 20000; step++) {
		uint64_t a = (uint64_t)(rand() % N), b = a + (uint64_t)(rand() % 20);
		if (b > N)
			b = N;
		bool add = rand() % 2;
		assert_int_equal(add ? range_set_add(&s, a, b) : range_set_remove(&s, a, b), 0);
		for (uint64_t p = a; p < b; p++)
			ref[p] = add;
		if (step % 97 == 0) {
			for (uint64_t p = 0; p < N; p++)
				assert_int_equal(range_set_contains(&s, p), ref[p]);
			for (size_t i = 1; i < s.count; i++)
				assert_true(s.items[i - 1].end < s.items[i].first); /* disjoint, not adjacent */
		}
	}
	range_set_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_new_table_has_file_content_on_cpu_only),
		cmocka_unit_test(test_hold_takes_newest_version),
		cmocka_unit_test(test_bump_makes_other_holders_stale),
		cmocka_unit_test(test_take_stale_of_a_range_keeps_the_rest),
		cmocka_unit_test(test_take_dirty_returns_pages_in_order_once),
		cmocka_unit_test(test_device_marks_dirty_only_pages_it_holds),
		cmocka_unit_test(test_extra_devices_store_only_where_they_hold),
		cmocka_unit_test(test_versions_renumber_before_wrapping),
		cmocka_unit_test(test_range_set_merges_splits_and_complements),
		cmocka_unit_test(test_range_set_matches_a_bitmap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
