/* Unit tests for shim/gpu_learned.c: the units kernels faulted on, and the
 * windows that bring them ahead of a launch (modes M and H). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_learned.h"

#define UNIT CUDA_FAULT_UNIT
#define PER_UNIT (UNIT / GAIA_PAGE)
#define LO 0x7f0000000000ull

struct brought {
	unsigned n;
	uint64_t first[64], npages[64];
	int fail_at; /* the call that fails (-EIO), or -1 */
};

static int bring(void *arg, uint64_t first, uint64_t npages)
{
	struct brought *b = arg;
	if ((int)b->n == b->fail_at)
		return -EIO;
	assert_true(b->n < 64);
	b->first[b->n] = first;
	b->npages[b->n++] = npages;
	return 0;
}

/* Faults at the starts of `units`, learned in `round`. */
static size_t learn_units(struct learned_set *s, uint64_t len, const unsigned *units, size_t n, uint32_t round)
{
	uint64_t addrs[64];
	for (size_t i = 0; i < n; i++)
		addrs[i] = LO + (uint64_t)units[i] * UNIT + 100;
	return learned_set_learn(s, LO, len, addrs, n, round);
}

static void learns_units_in_range_only(void **state)
{
	(void)state;
	struct learned_set s = {0};
	uint64_t addrs[] = {LO - 1, LO, LO + 5, LO + UNIT, LO + 3 * UNIT + 7, LO + 16 * UNIT};
	/* 16 units: the last address is past the region, the first before it */
	assert_int_equal(learned_set_learn(&s, LO, 16 * UNIT, addrs, 6, 1), 3);
	assert_true(s.due);
	assert_int_equal(s.units, 16);
	assert_true(learned_set_has(&s, 0, 1) && learned_set_has(&s, 1, 1) && learned_set_has(&s, 3, 1));
	assert_false(learned_set_has(&s, 2, 1) || learned_set_has(&s, 15, 1) || learned_set_has(&s, 16, 1));
	/* the same units again are not new; nothing in range learns nothing */
	s.due = false;
	assert_int_equal(learned_set_learn(&s, LO, 16 * UNIT, addrs, 6, 2), 0);
	assert_true(s.due);
	uint64_t outside[] = {LO + 40 * UNIT};
	s.due = false;
	assert_int_equal(learned_set_learn(&s, LO, 16 * UNIT, outside, 1, 3), 0);
	assert_false(s.due);
	/* a unit ages out after CUDA_LEARNED_ROUNDS rounds */
	assert_true(learned_set_has(&s, 3, 2 + CUDA_LEARNED_ROUNDS - 1));
	assert_false(learned_set_has(&s, 3, 2 + CUDA_LEARNED_ROUNDS));
	learned_set_free(&s);
	assert_null(s.round_of);
}

/* A run of 8 units from unit 0 and one unit at 100, windows from one
 * unit: 1, 2, 4 doubling while the run fills them and goes on, then 8
 * over the run's end (used 1 of 8: halved to 4 for the next). */
static void windows_double_along_a_run(void **state)
{
	(void)state;
	struct learned_set s = {0};
	unsigned units[] = {0, 1, 2, 3, 4, 5, 6, 7, 100};
	learn_units(&s, 256 * UNIT, units, 9, 1);
	struct brought b = {.fail_at = -1};
	uint64_t pages = 0, windows = 0;
	assert_int_equal(learned_set_windows(&s, 256 * PER_UNIT, LEARNED_NO_CAP, 1, UNIT, bring, &b, &pages,
					     &windows), 0);
	assert_int_equal(b.n, 5);
	const uint64_t first[] = {0, 1, 3, 7, 100}, units_of[] = {1, 2, 4, 8, 4};
	for (unsigned i = 0; i < 5; i++) {
		assert_int_equal(b.first[i], first[i] * PER_UNIT);
		assert_int_equal(b.npages[i], units_of[i] * PER_UNIT);
	}
	assert_int_equal(windows, 5);
	assert_int_equal(pages, (1 + 2 + 4 + 8 + 4) * PER_UNIT);
	assert_false(s.due);
	learned_set_free(&s);
}

/* The first window is the one asked for (GAIA_GPU_READAHEAD_KB): 16
 * units from unit 0 cover the run; the region's end cuts a window. */
static void first_window_is_the_knob(void **state)
{
	(void)state;
	struct learned_set s = {0};
	unsigned units[] = {0, 1, 2, 3, 4, 5, 6, 7, 20};
	learn_units(&s, 24 * UNIT, units, 9, 1);
	struct brought b = {.fail_at = -1};
	uint64_t pages = 0, windows = 0;
	assert_int_equal(learned_set_windows(&s, 24 * PER_UNIT, LEARNED_NO_CAP, 1, 16 * UNIT, bring, &b, &pages,
					     &windows), 0);
	assert_int_equal(b.n, 2);
	assert_int_equal(b.first[0], 0);
	assert_int_equal(b.npages[0], 16 * PER_UNIT);
	assert_int_equal(b.first[1], 20 * PER_UNIT);
	assert_int_equal(b.npages[1], 4 * PER_UNIT); /* to the region's end */
	learned_set_free(&s);
}

/* A budget caps what is brought, in whole units, the latest round first;
 * no room for a unit brings nothing (a device with no free memory). */
static void budget_caps_and_none_is_none(void **state)
{
	(void)state;
	struct learned_set s = {0};
	unsigned old_units[] = {0, 1}, new_units[] = {50, 51, 52, 53};
	learn_units(&s, 64 * UNIT, old_units, 2, 1);
	learn_units(&s, 64 * UNIT, new_units, 4, 2);
	struct brought b = {.fail_at = -1};
	uint64_t pages = 0, windows = 0;
	assert_int_equal(learned_set_windows(&s, 64 * PER_UNIT, 3 * PER_UNIT, 2, UNIT, bring, &b, &pages, &windows),
			 0);
	assert_int_equal(pages, 3 * PER_UNIT);
	assert_int_equal(b.first[0], 50 * PER_UNIT); /* the latest round's first */
	for (unsigned i = 0; i < b.n; i++)
		assert_true(b.first[i] >= 50 * PER_UNIT);

	s.due = true;
	memset(&b, 0, sizeof(b));
	b.fail_at = -1;
	pages = windows = 0;
	assert_int_equal(learned_set_windows(&s, 64 * PER_UNIT, 0, 2, UNIT, bring, &b, &pages, &windows), 0);
	assert_int_equal(b.n, 0);
	assert_int_equal(pages, 0);
	assert_false(s.due);
	s.due = true;
	assert_int_equal(learned_set_windows(&s, 64 * PER_UNIT, PER_UNIT - 1, 2, UNIT, bring, &b, &pages, &windows),
			 0);
	assert_int_equal(b.n, 0);
	learned_set_free(&s);
}

/* A window that cannot be brought ends the pass with its error; what came
 * before it counts. */
static void an_error_ends_the_pass(void **state)
{
	(void)state;
	struct learned_set s = {0};
	unsigned units[] = {0, 10, 20};
	learn_units(&s, 32 * UNIT, units, 3, 1);
	struct brought b = {.fail_at = 1};
	uint64_t pages = 0, windows = 0;
	assert_int_equal(learned_set_windows(&s, 32 * PER_UNIT, LEARNED_NO_CAP, 1, UNIT, bring, &b, &pages, &windows),
			 -EIO);
	assert_int_equal(b.n, 1);
	assert_int_equal(windows, 1);
	assert_int_equal(pages, PER_UNIT);
	learned_set_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(learns_units_in_range_only),
		cmocka_unit_test(windows_double_along_a_run),
		cmocka_unit_test(first_window_is_the_knob),
		cmocka_unit_test(budget_caps_and_none_is_none),
		cmocka_unit_test(an_error_ends_the_pass),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
