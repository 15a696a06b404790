/* Unit tests for runtime/readahead.c: the populate/upload window policy. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "readahead.h"

#define TOTAL (1u << 20) /* pages in a long stream */

/* One access; checks the invariants every window must satisfy and returns
 * its length. */
static uint32_t access_page(struct readahead *ra, uint64_t page, uint64_t total)
{
	uint64_t first = UINT64_MAX;
	uint32_t n = readahead_on_access(ra, page, total, &first);

	assert_true(first == page);
	assert_true(n >= 1);
	assert_true(first + n <= total);
	assert_true(n <= ra->max_pages);
	return n;
}

static void test_kb_rounds_down_to_whole_pages_at_least_one(void **state)
{
	struct readahead ra;

	readahead_init(&ra, 1, 3);
	assert_int_equal(ra.initial_pages, 1);
	assert_int_equal(ra.max_pages, 1);
	readahead_init(&ra, 0, 0);
	assert_int_equal(ra.initial_pages, 1);
	assert_int_equal(ra.max_pages, 1);
	readahead_init(&ra, 7, 9);
	assert_int_equal(ra.initial_pages, 1);
	assert_int_equal(ra.max_pages, 2);
	readahead_init(&ra, 512, 2048);
	assert_int_equal(ra.initial_pages, 128);
	assert_int_equal(ra.max_pages, 512);
	assert_int_equal(ra.min_pages, 1);
	assert_int_equal(ra.window_pages, 128);
	/* The initial window never exceeds the maximum. */
	readahead_init(&ra, 64, 16);
	assert_int_equal(ra.initial_pages, 4);
	assert_int_equal(ra.max_pages, 4);
}

static void test_first_access_gets_initial_window(void **state)
{
	struct readahead ra;

	readahead_init(&ra, 16, 128);
	assert_int_equal(access_page(&ra, 1000, TOTAL), 4);
	assert_int_equal(ra.sequential_hits, 0);
	assert_int_equal(ra.random_misses, 0);
}

static void test_sequential_stream_doubles_window_up_to_max(void **state)
{
	struct readahead ra;
	uint32_t expect[] = {4, 8, 16, 32, 32, 32};
	uint64_t page = 0;

	readahead_init(&ra, 16, 128); /* 4 pages, up to 32 */
	for (size_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++) {
		uint32_t n = access_page(&ra, page, TOTAL);

		assert_int_equal(n, expect[i]);
		page += n; /* the next fault is the first page past the window */
	}
	assert_int_equal(ra.sequential_hits, 5);
	assert_int_equal(ra.random_misses, 0);
	assert_int_equal(ra.window_pages, 32);
}

static void test_access_just_past_window_counts_as_sequential(void **state)
{
	struct readahead ra;

	readahead_init(&ra, 16, 128);
	assert_int_equal(access_page(&ra, 0, TOTAL), 4); /* [0, 4) */
	/* A stream skipping a few pages is still a stream. */
	assert_int_equal(access_page(&ra, 6, TOTAL), 8); /* [6, 14) */
	assert_int_equal(ra.sequential_hits, 1);
	/* One window or more past the end is not. */
	assert_int_equal(access_page(&ra, 14 + 8, TOTAL), 4);
	assert_int_equal(ra.random_misses, 1);
}

static void test_random_access_halves_window_down_to_min(void **state)
{
	struct readahead ra;
	uint32_t expect[] = {16, 8, 4, 2, 1, 1};
	uint64_t page = 0;

	readahead_init(&ra, 128, 128); /* 32 pages */
	assert_int_equal(access_page(&ra, 0, TOTAL), 32);
	for (size_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++) {
		page += 100000; /* far away each time */
		assert_int_equal(access_page(&ra, page, TOTAL), expect[i]);
	}
	assert_int_equal(ra.random_misses, 6);
	assert_int_equal(ra.sequential_hits, 0);

	/* A raised minimum holds. */
	readahead_init(&ra, 128, 128);
	ra.min_pages = 8;
	access_page(&ra, 0, TOTAL);
	for (int i = 1; i < 10; i++)
		assert_int_equal(access_page(&ra, (uint64_t)i * 100000, TOTAL), i == 1 ? 16 : 8);
}

static void test_backward_access_is_random(void **state)
{
	struct readahead ra;

	readahead_init(&ra, 16, 128);
	access_page(&ra, 100, TOTAL);                     /* [100, 104) */
	assert_int_equal(access_page(&ra, 99, TOTAL), 2); /* just before: random */
	assert_int_equal(ra.random_misses, 1);
}

static void test_reaccess_inside_last_window_does_not_shrink(void **state)
{
	struct readahead ra;

	readahead_init(&ra, 16, 128);
	access_page(&ra, 0, TOTAL);                      /* [0, 4) */
	assert_int_equal(access_page(&ra, 4, TOTAL), 8); /* [4, 12) */
	/* Pages of the same burst touched again (another thread, or dropped). */
	assert_int_equal(access_page(&ra, 4, TOTAL), 8);
	assert_int_equal(access_page(&ra, 11, TOTAL), 8); /* [11, 19) */
	assert_int_equal(ra.window_pages, 8);
	assert_int_equal(ra.sequential_hits, 3);
	assert_int_equal(ra.random_misses, 0);
	/* The stream goes on from the end of the last window and grows again. */
	assert_int_equal(access_page(&ra, 19, TOTAL), 16);
	assert_int_equal(ra.sequential_hits, 4);
}

static void test_window_stops_at_total_pages(void **state)
{
	struct readahead ra;
	uint64_t first;

	readahead_init(&ra, 64, 256); /* 16 pages */
	assert_int_equal(access_page(&ra, 10, 20), 10);  /* [10, 20) */
	assert_int_equal(access_page(&ra, 19, 20), 1);   /* last page */
	assert_int_equal(access_page(&ra, 0, 1), 1);     /* one-page stream */
	/* Past the end: nothing, and the state does not move. */
	struct readahead before = ra;
	assert_int_equal(readahead_on_access(&ra, 20, 20, &first), 0);
	assert_true(first == 20);
	assert_memory_equal(&before, &ra, sizeof(ra));
}

/* Random mixes of streams and jumps: every window contains its page, stays
 * inside the stream and inside [min, max]. */
static void test_random_accesses_keep_window_invariants(void **state)
{
	const char *env = getenv("GAIA_TEST_SEED");
	uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
	unsigned short rng[3] = {(unsigned short)seed, (unsigned short)(seed >> 16),
				 (unsigned short)(seed >> 32)};
	struct readahead ra;
	uint64_t total = 5000, page = 0, calls = 0;

	printf("%s: seed %" PRIu64 " (replay with GAIA_TEST_SEED=%" PRIu64 ")\n", __func__, seed, seed);
	readahead_init(&ra, 32, 1024);
	access_page(&ra, 0, total);
	for (int i = 0; i < 100000; i++) {
		uint32_t before = ra.window_pages, n;

		switch (nrand48(rng) % 3) {
		case 0: /* jump */
			page = (uint64_t)nrand48(rng) % total;
			break;
		case 1: /* continue the stream */
			page = ra.next_page < total ? ra.next_page : 0;
			break;
		default: /* somewhere in the last window */
			page = ra.window_first + (uint64_t)nrand48(rng) % (ra.next_page - ra.window_first);
			break;
		}
		n = access_page(&ra, page, total);
		calls++;
		assert_true(ra.window_pages >= ra.min_pages && ra.window_pages <= ra.max_pages);
		assert_true(n <= ra.window_pages);
		/* Every step changes the window by at most a factor of two. */
		assert_true(ra.window_pages <= 2 * before && 2 * ra.window_pages >= before);
	}
	/* Every access after the first is counted exactly once. */
	assert_true(ra.sequential_hits + ra.random_misses == calls);
}

/* The device window over a learned set: doubles when the set filled it and
 * runs on past it, halves when it filled less than half or ended inside
 * it, keeps its size otherwise (a full window the set does not run past, a
 * run with a gap), and never leaves [min, max]. */
static void test_adapt_follows_how_much_of_the_window_was_used(void **state)
{
	(void)state;
	assert_int_equal(readahead_adapt(16, 16, true, 16, 16384), 32);
	assert_int_equal(readahead_adapt(16, 16, false, 16, 16384), 16); /* an isolated spot */
	assert_int_equal(readahead_adapt(16, 40, true, 16, 16384), 32);  /* more than asked: still full */
	assert_int_equal(readahead_adapt(64, 63, true, 16, 16384), 64);  /* a page short: kept */
	assert_int_equal(readahead_adapt(64, 32, true, 16, 16384), 64);  /* exactly half: kept */
	assert_int_equal(readahead_adapt(64, 31, true, 16, 16384), 32);
	assert_int_equal(readahead_adapt(64, 0, false, 16, 16384), 32);
	assert_int_equal(readahead_adapt(64, 32, false, 16, 16384), 32); /* the set ended inside */
	assert_int_equal(readahead_adapt(64, 63, false, 16, 16384), 32);
	assert_int_equal(readahead_adapt(16, 0, false, 16, 16384), 16);  /* floor */
	assert_int_equal(readahead_adapt(16384, 16384, true, 16, 16384), 16384); /* ceiling */
	assert_int_equal(readahead_adapt(100, 100, true, 16, 150), 150);
	assert_int_equal(readahead_adapt(4, 0, false, 0, 0), 1);         /* min raised to one page */
	uint32_t w = 16;
	for (int i = 0; i < 20; i++)
		w = readahead_adapt(w, w, true, 16, 16384);
	assert_int_equal(w, 16384);
	for (int i = 0; i < 20; i++)
		w = readahead_adapt(w, 1, true, 16, 16384);
	assert_int_equal(w, 16);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kb_rounds_down_to_whole_pages_at_least_one),
		cmocka_unit_test(test_first_access_gets_initial_window),
		cmocka_unit_test(test_sequential_stream_doubles_window_up_to_max),
		cmocka_unit_test(test_access_just_past_window_counts_as_sequential),
		cmocka_unit_test(test_random_access_halves_window_down_to_min),
		cmocka_unit_test(test_backward_access_is_random),
		cmocka_unit_test(test_reaccess_inside_last_window_does_not_shrink),
		cmocka_unit_test(test_window_stops_at_total_pages),
		cmocka_unit_test(test_random_accesses_keep_window_invariants),
		cmocka_unit_test(test_adapt_follows_how_much_of_the_window_was_used),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
