/* Unit tests for shim/checksum.c: how a mapping learns of writers that
 * publish nothing (the file's times, then a checksum per page). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

#define PAGES 4

struct seen {
	unsigned n;
	uint64_t pages[PAGES];
};

static void note(uint64_t page, void *arg)
{
	struct seen *s = arg;
	if (s->n < PAGES)
		s->pages[s->n] = page;
	s->n++;
}

static int temp_file(void)
{
	char path[] = "/tmp/gaia-test-checksum-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	static unsigned char buf[PAGES * GAIA_PAGE];
	memset(buf, 7, sizeof(buf));
	assert_int_equal(pwrite(fd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	return fd;
}

/* Sets the modification time to t (the change time becomes now). */
static void set_mtime(int fd, struct timespec t)
{
	struct timespec ts[2] = {t, t};
	assert_int_equal(futimens(fd, ts), 0);
}

static void overwrite_page(int fd, uint64_t page, unsigned char v)
{
	static unsigned char buf[GAIA_PAGE];
	memset(buf, v, sizeof(buf));
	assert_int_equal(pwrite(fd, buf, sizeof(buf), (off_t)(page * GAIA_PAGE)), (ssize_t)sizeof(buf));
}

/* A look right after a write cannot trust the times it recorded: another
 * write in the same tick of the file clock would leave them unchanged.
 * The file counts as unchanged only once the clock has passed them, and
 * until then the next look reads the pages again. */
static void test_times_of_the_running_tick_are_not_trusted(void **state)
{
	(void)state;
	int fd = temp_file();
	struct page_sums *s = page_sums_new(PAGES);
	assert_non_null(s);
	struct seen seen = {0};
	overwrite_page(fd, 3, 1);
	assert_int_equal(page_sums_refresh(s, fd, 0, NULL, note, &seen), 0); /* records */
	assert_false(page_sums_current(s, fd));
	usleep(50000); /* the coarse clock passes the change time */
	assert_int_equal(page_sums_refresh(s, fd, 0, NULL, note, &seen), 0);
	assert_true(page_sums_current(s, fd));
	page_sums_free(s);
	close(fd);
}

/* A modification time in the future (a copied file, touch -d) does not
 * make every look read the file again: the change time decides. */
static void test_a_future_modification_time_is_trusted(void **state)
{
	(void)state;
	int fd = temp_file();
	struct page_sums *s = page_sums_new(PAGES);
	struct timespec future;
	clock_gettime(CLOCK_REALTIME, &future);
	future.tv_sec += 3600;
	set_mtime(fd, future);
	usleep(50000);
	struct seen seen = {0};
	assert_int_equal(page_sums_refresh(s, fd, 0, NULL, note, &seen), 0);
	assert_true(page_sums_current(s, fd));
	page_sums_free(s);
	close(fd);
}

/* Times well behind the clock: the next look trusts them, and a change
 * that moves them is found. */
static void test_times_behind_the_clock_are_trusted(void **state)
{
	(void)state;
	int fd = temp_file();
	struct page_sums *s = page_sums_new(PAGES);
	struct timespec past;
	clock_gettime(CLOCK_REALTIME, &past);
	past.tv_sec -= 3600;
	set_mtime(fd, past);
	/* ctime is now: wait until the coarse clock passed it. */
	usleep(50000);
	struct seen seen = {0};
	assert_int_equal(page_sums_refresh(s, fd, 0, NULL, note, &seen), 0);
	assert_true(page_sums_current(s, fd));
	assert_int_equal(page_sums_refresh(s, fd, 0, NULL, note, &seen), 0);
	overwrite_page(fd, 1, 3);
	assert_int_equal(page_sums_refresh(s, fd, 0, NULL, note, &seen), 1);
	assert_int_equal(seen.pages[0], 1);
	page_sums_free(s);
	close(fd);
}

/* The shim's own stores set the checksums of the pages stored: they are
 * not reported, and another writer's change after them is. */
static void test_own_stores_set_the_sums_and_a_later_change_still_shows(void **state)
{
	(void)state;
	int fd = temp_file();
	struct page_sums *s = page_sums_new(PAGES);
	struct seen seen = {0};
	assert_int_equal(page_sums_refresh(s, fd, 0, NULL, note, &seen), 0);
	/* The shim stores page 0 (through the file here). */
	static unsigned char mine[GAIA_PAGE];
	memset(mine, 0x42, sizeof(mine));
	assert_int_equal(pwrite(fd, mine, sizeof(mine), 0), (ssize_t)sizeof(mine));
	page_sums_set(s, 0, 1, mine);
	usleep(20000);
	assert_int_equal(page_sums_refresh(s, fd, 0, NULL, note, &seen), 0);
	/* Another writer, after the store. */
	usleep(20000);
	overwrite_page(fd, 0, 0x43);
	assert_int_equal(page_sums_refresh(s, fd, 0, NULL, note, &seen), 1);
	assert_int_equal(seen.pages[0], 0);
	page_sums_free(s);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_times_of_the_running_tick_are_not_trusted),
		cmocka_unit_test(test_a_future_modification_time_is_trusted),
		cmocka_unit_test(test_times_behind_the_clock_are_trusted),
		cmocka_unit_test(test_own_stores_set_the_sums_and_a_later_change_still_shows),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
