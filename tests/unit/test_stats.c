/* Unit tests for runtime/stats.c: the GAIA_STATS counters. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "stats.h"

static int reset_stats(void **state)
{
	stats_reset();
	return 0;
}

static void test_add_get_and_reset(void **state)
{
	for (int s = 0; s < GAIA_STAT_COUNT; s++)
		assert_true(stats_get((enum gaia_stat)s) == 0);

	stats_add(GAIA_STAT_kernel_launches, 1);
	stats_add(GAIA_STAT_kernel_launches, 2);
	stats_add(GAIA_STAT_h2d_bytes, 1ull << 40);
	assert_true(stats_get(GAIA_STAT_kernel_launches) == 3);
	assert_true(stats_get(GAIA_STAT_h2d_bytes) == 1ull << 40);
	assert_true(stats_get(GAIA_STAT_d2h_bytes) == 0);

	stats_reset();
	for (int s = 0; s < GAIA_STAT_COUNT; s++)
		assert_true(stats_get((enum gaia_stat)s) == 0);
}

static void test_names_and_units_match_the_table(void **state)
{
#define CHECK_STAT(name, unit, doc)                                   \
	assert_string_equal(stats_name(GAIA_STAT_##name), #name); \
	assert_string_equal(stats_unit(GAIA_STAT_##name), unit);
	GAIA_STATS_TABLE(CHECK_STAT)
#undef CHECK_STAT
	for (int s = 0; s < GAIA_STAT_COUNT; s++) {
		assert_non_null(stats_name((enum gaia_stat)s));
		assert_non_null(stats_unit((enum gaia_stat)s));
	}
	assert_null(stats_name(GAIA_STAT_COUNT));
	assert_null(stats_unit(GAIA_STAT_COUNT));
}

static void test_out_of_range_counter_is_ignored(void **state)
{
	stats_add(GAIA_STAT_COUNT, 5);
	stats_add((enum gaia_stat)-1, 5);
	assert_true(stats_get(GAIA_STAT_COUNT) == 0);
	for (int s = 0; s < GAIA_STAT_COUNT; s++)
		assert_true(stats_get((enum gaia_stat)s) == 0);
}

static uint64_t value_for(int s)
{
	/* Distinct values, with the extremes at both ends of the table. */
	if (s == 0)
		return UINT64_MAX;
	if (s == GAIA_STAT_COUNT - 1)
		return 0;
	return (uint64_t)s * 1000003u + 7;
}

static void test_print_writes_every_counter_with_its_value(void **state)
{
	int fds[2], seen[GAIA_STAT_COUNT] = {0}, lines = 0;
	char buf[8192], *line, *save;
	size_t len = 0;
	ssize_t n;

	for (int s = 0; s < GAIA_STAT_COUNT; s++)
		stats_add((enum gaia_stat)s, value_for(s));
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(stats_print(fds[1]), 0);
	close(fds[1]);
	while ((n = read(fds[0], buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	close(fds[0]);
	assert_true(n == 0);
	buf[len] = '\0';
	assert_true(len > 0 && buf[len - 1] == '\n');

	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char name[64], unit[32];
		uint64_t value;
		int s, consumed = 0;

		assert_int_equal(sscanf(line, "gaia: %63s %" SCNu64 " %31s%n", name, &value, unit, &consumed),
				 3);
		assert_int_equal(consumed, (int)strlen(line)); /* nothing after the unit */
		for (s = 0; s < GAIA_STAT_COUNT; s++)
			if (strcmp(name, stats_name((enum gaia_stat)s)) == 0)
				break;
		assert_in_range(s, 0, GAIA_STAT_COUNT - 1);
		assert_int_equal(seen[s], 0);
		seen[s] = 1;
		assert_true(value == value_for(s));
		assert_string_equal(unit, stats_unit((enum gaia_stat)s));
		lines++;
	}
	assert_int_equal(lines, GAIA_STAT_COUNT);
}

static void test_print_to_bad_fd_returns_errno(void **state)
{
	assert_int_equal(stats_print(-1), -EBADF);
}

#define ADD_THREADS 8
#define ADDS_PER_THREAD 200000

static void *add_many(void *arg)
{
	uint64_t k = (uint64_t)(uintptr_t)arg;

	for (int i = 0; i < ADDS_PER_THREAD; i++) {
		stats_add(GAIA_STAT_kernel_launches, 1);
		stats_add(GAIA_STAT_h2d_bytes, k);
		stats_add((enum gaia_stat)(i % GAIA_STAT_COUNT), 1);
	}
	return NULL;
}

static void test_concurrent_adds_sum_exactly(void **state)
{
	pthread_t threads[ADD_THREADS];
	uint64_t k_sum = 0;

	for (int i = 0; i < ADD_THREADS; i++) {
		assert_int_equal(pthread_create(&threads[i], NULL, add_many, (void *)(uintptr_t)(i + 1)), 0);
		k_sum += (uint64_t)i + 1;
	}
	for (int i = 0; i < ADD_THREADS; i++)
		assert_int_equal(pthread_join(threads[i], NULL), 0);

	/* The round-robin adds: ADDS_PER_THREAD spread over the table. */
	for (int s = 0; s < GAIA_STAT_COUNT; s++) {
		uint64_t rr = (uint64_t)ADD_THREADS *
			      (ADDS_PER_THREAD / GAIA_STAT_COUNT + (s < ADDS_PER_THREAD % GAIA_STAT_COUNT));
		uint64_t extra = s == GAIA_STAT_kernel_launches ? (uint64_t)ADD_THREADS * ADDS_PER_THREAD
				 : s == GAIA_STAT_h2d_bytes ? k_sum * ADDS_PER_THREAD
							    : 0;

		assert_true(stats_get((enum gaia_stat)s) == rr + extra);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_add_get_and_reset, reset_stats),
		cmocka_unit_test_setup(test_names_and_units_match_the_table, reset_stats),
		cmocka_unit_test_setup(test_out_of_range_counter_is_ignored, reset_stats),
		cmocka_unit_test_setup(test_print_writes_every_counter_with_its_value, reset_stats),
		cmocka_unit_test_setup(test_print_to_bad_fd_returns_errno, reset_stats),
		cmocka_unit_test_setup(test_concurrent_adds_sum_exactly, reset_stats),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
