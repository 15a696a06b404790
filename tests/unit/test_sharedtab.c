/* The cross-process version table, tested as sharedtab.h specifies.
 *
 * Randomised tests print their seed; SHAREDTAB_SEED=s replays the random
 * choices (page picks, fuzzed headers; thread timing is not replayable).
 * SHAREDTAB_STRESS_MS sets how long each stress test runs (default 1000).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sharedtab.h"

#define DEV 0x803u
#define INO 123456u
#define UID 1000u
#define BIRTH 0x17a2b3c4d5e6f708ull

/* ---- helpers ------------------------------------------------------------------ */

/* splitmix64: small, and replays exactly from a printed seed. */
static uint64_t rng_step(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t rng_below(uint64_t *state, uint64_t n)
{
	return n ? rng_step(state) % n : 0;
}

static uint64_t test_seed(const char *what)
{
	const char *env = getenv("SHAREDTAB_SEED");
	uint64_t seed;

	if (env && *env)
		seed = strtoull(env, NULL, 0);
	else
		seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)what;
	print_message("%s: seed %" PRIu64 " (replay: SHAREDTAB_SEED=%" PRIu64 ")\n", what, seed,
		      seed);
	return seed;
}

static long stress_ms(void)
{
	const char *env = getenv("SHAREDTAB_STRESS_MS");
	long ms = env && *env ? strtol(env, NULL, 0) : 1000;
	return ms > 0 ? ms : 1000;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A zeroed, page-aligned table block; shared between processes if asked. */
static void *map_zeroed(size_t bytes, bool shared)
{
	void *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
			 (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS, -1, 0);
	assert_true(mem != MAP_FAILED);
	return mem;
}

static void *new_table(uint64_t capacity, size_t *bytes, bool shared)
{
	*bytes = sharedtab_bytes(capacity);
	void *mem = map_zeroed(*bytes, shared);
	assert_int_equal(sharedtab_format(mem, *bytes, DEV, INO, BIRTH, UID, capacity), 0);
	return mem;
}

/* The layout sharedtab.h documents, for tests that poke the arrays. */
static uint64_t *table_stamps(void *mem)
{
	return (uint64_t *)((char *)mem + SHAREDTAB_HEADER_BYTES);
}

static uint32_t *table_versions(void *mem)
{
	uint64_t groups = (sharedtab_capacity(mem) + SHAREDTAB_GROUP_PAGES - 1) / SHAREDTAB_GROUP_PAGES;
	return (uint32_t *)(table_stamps(mem) + groups);
}

/* fn for sharedtab_changes: records what it was told. */
struct report_log {
	size_t count;
	uint64_t pages[512];
	uint32_t versions[512];
};

static void record_change(uint64_t page, uint32_t version, void *arg)
{
	struct report_log *log = arg;
	if (log->count < 512) {
		log->pages[log->count] = page;
		log->versions[log->count] = version;
	}
	log->count++;
}

static void fail_if_called(uint64_t page, uint32_t version, void *arg)
{
	(void)arg;
	fail_msg("unexpected report of page %" PRIu64 " version %u", page, version);
}

/* ---- layout, format, validate ------------------------------------------------- */

static void test_bytes_cover_header_group_stamps_and_versions(void **state)
{
	(void)state;
	assert_int_equal(sharedtab_bytes(0), 128);
	assert_int_equal(sharedtab_bytes(1), 128 + 8 + 4);
	assert_int_equal(sharedtab_bytes(64), 128 + 8 + 64 * 4);
	assert_int_equal(sharedtab_bytes(65), 128 + 16 + 65 * 4);
	assert_int_equal(sharedtab_bytes(SHAREDTAB_MAX_PAGES),
			 128 + SHAREDTAB_MAX_PAGES / 64 * 8 + SHAREDTAB_MAX_PAGES * 4);
	assert_int_equal(sharedtab_bytes(SHAREDTAB_MAX_PAGES + 1), 0);
	assert_int_equal(sharedtab_bytes(UINT64_MAX), 0);
}

static void test_format_then_validate_round_trip(void **state)
{
	(void)state;
	size_t bytes;
	void *mem = new_table(1000, &bytes, false);

	assert_int_equal(sharedtab_validate(mem, bytes, DEV, INO, BIRTH, UID), 0);
	assert_int_equal(sharedtab_validate(mem, bytes + 4096, DEV, INO, BIRTH, UID), 0); /* rounded up object */
	assert_int_equal(sharedtab_capacity(mem), 1000);
	const struct sharedtab_header *h = mem;
	assert_memory_equal(h->magic, "GAIAVTAB", 8);
	assert_int_equal(h->layout_version, SHAREDTAB_LAYOUT_VERSION);
	assert_int_equal(h->header_bytes, SHAREDTAB_HEADER_BYTES);
	assert_int_equal(h->dev, DEV);
	assert_int_equal(h->ino, INO);
	assert_int_equal(h->owner_uid, UID);
	for (uint64_t p = 0; p < 1000; p++)
		assert_int_equal(sharedtab_version(mem, p), 0);
	/* a live table is never formatted over */
	assert_int_equal(sharedtab_format(mem, bytes, DEV, INO + 1, BIRTH, UID, 10), -EEXIST);
	assert_int_equal(sharedtab_validate(mem, bytes, DEV, INO, BIRTH, UID), 0);
	munmap(mem, bytes);
}

static void test_format_rejects_bad_arguments(void **state)
{
	(void)state;
	size_t bytes = sharedtab_bytes(100);
	char *mem = map_zeroed(bytes + 64, false);

	assert_int_equal(sharedtab_format(NULL, bytes, DEV, INO, BIRTH, UID, 100), -EINVAL);
	assert_int_equal(sharedtab_format(mem + 4, bytes, DEV, INO, BIRTH, UID, 100), -EINVAL);
	assert_int_equal(sharedtab_format(mem, bytes, DEV, INO, BIRTH, UID, SHAREDTAB_MAX_PAGES + 1), -EINVAL);
	assert_int_equal(sharedtab_format(mem, bytes - 1, DEV, INO, BIRTH, UID, 100), -ENOSPC);
	assert_int_equal(sharedtab_format(mem, 16, DEV, INO, BIRTH, UID, 0), -ENOSPC);
	assert_int_equal(sharedtab_validate(mem, bytes, DEV, INO, BIRTH, UID), -EBADMSG); /* untouched */
	assert_int_equal(sharedtab_format(mem, bytes, DEV, INO, BIRTH, UID, 0), 0);       /* empty file */
	assert_int_equal(sharedtab_validate(mem, 128, DEV, INO, BIRTH, UID), 0);
	munmap(mem, bytes + 64);
}

static void test_validate_rejects_each_broken_field(void **state)
{
	(void)state;
	size_t bytes;
	void *mem = new_table(1000, &bytes, false);
	struct sharedtab_header *h = mem;
	struct sharedtab_header good = *h;

	assert_int_equal(sharedtab_validate(NULL, bytes, DEV, INO, BIRTH, UID), -EINVAL);
	assert_int_equal(sharedtab_validate((char *)mem + 1, bytes - 1, DEV, INO, BIRTH, UID), -EINVAL);

	h->magic[7] = 'C';
	assert_int_equal(sharedtab_validate(mem, bytes, DEV, INO, BIRTH, UID), -EBADMSG);
	*h = good;
	h->layout_version = SHAREDTAB_LAYOUT_VERSION + 1;
	assert_int_equal(sharedtab_validate(mem, bytes, DEV, INO, BIRTH, UID), -EBADMSG);
	*h = good;
	h->header_bytes = 256;
	assert_int_equal(sharedtab_validate(mem, bytes, DEV, INO, BIRTH, UID), -EBADMSG);
	*h = good;
	h->group_pages = 128;
	assert_int_equal(sharedtab_validate(mem, bytes, DEV, INO, BIRTH, UID), -EBADMSG);
	*h = good;
	h->reserved1[3] = 1;
	assert_int_equal(sharedtab_validate(mem, bytes, DEV, INO, BIRTH, UID), -EBADMSG);
	*h = good;

	/* truncated: smaller than the header, or than the arrays */
	assert_int_equal(sharedtab_validate(mem, 0, DEV, INO, BIRTH, UID), -EBADMSG);
	assert_int_equal(sharedtab_validate(mem, 127, DEV, INO, BIRTH, UID), -EBADMSG);
	assert_int_equal(sharedtab_validate(mem, bytes - 1, DEV, INO, BIRTH, UID), -EBADMSG);
	/* a capacity the size cannot hold, or absurd */
	h->capacity_pages = 1001;
	assert_int_equal(sharedtab_validate(mem, bytes, DEV, INO, BIRTH, UID), -EBADMSG);
	h->capacity_pages = SHAREDTAB_MAX_PAGES + 1;
	assert_int_equal(sharedtab_validate(mem, SIZE_MAX, DEV, INO, BIRTH, UID), -EBADMSG);
	h->capacity_pages = UINT64_MAX;
	assert_int_equal(sharedtab_validate(mem, SIZE_MAX, DEV, INO, BIRTH, UID), -EBADMSG);
	*h = good;

	/* another file, another owner */
	assert_int_equal(sharedtab_validate(mem, bytes, DEV + 1, INO, BIRTH, UID), -ESTALE);
	assert_int_equal(sharedtab_validate(mem, bytes, DEV, INO + 1, BIRTH, UID), -ESTALE);
	/* the same (dev, ino) reused by a file born later */
	assert_int_equal(sharedtab_validate(mem, bytes, DEV, INO, BIRTH + 1, UID), -ESTALE);
	assert_int_equal(sharedtab_validate(mem, bytes, DEV, INO, 0, UID), -ESTALE);
	assert_int_equal(sharedtab_validate(mem, bytes, DEV, INO, BIRTH, UID + 1), -EPERM);
	/* format errors win over identity errors */
	h->layout_version = 0;
	assert_int_equal(sharedtab_validate(mem, bytes, DEV + 1, INO, BIRTH, UID + 1), -EBADMSG);
	*h = good;
	assert_int_equal(sharedtab_validate(mem, bytes, DEV, INO, BIRTH, UID), 0);
	munmap(mem, bytes);
}

/* Every header byte but the capacity (a smaller one still fits the block,
 * which may be larger than needed) and the epoch (any value is valid) is
 * checked: flipping any bit of it is rejected. */
static void test_validate_detects_any_flipped_header_bit(void **state)
{
	(void)state;
	size_t bytes;
	void *mem = new_table(1000, &bytes, false);
	unsigned char *b = mem;
	size_t cap_at = offsetof(struct sharedtab_header, capacity_pages);
	size_t epoch_at = offsetof(struct sharedtab_header, epoch);

	for (size_t i = 0; i < SHAREDTAB_HEADER_BYTES; i++) {
		if ((i >= cap_at && i < cap_at + 8) || (i >= epoch_at && i < epoch_at + 8))
			continue;
		for (int bit = 0; bit < 8; bit++) {
			b[i] ^= (unsigned char)(1u << bit);
			int rc = sharedtab_validate(mem, bytes, DEV, INO, BIRTH, UID);
			if (rc == 0)
				fail_msg("flipping bit %d of header byte %zu went unnoticed", bit, i);
			b[i] ^= (unsigned char)(1u << bit);
		}
	}
	assert_int_equal(sharedtab_validate(mem, bytes, DEV, INO, BIRTH, UID), 0);
	munmap(mem, bytes);
}

static void count_change(uint64_t page, uint32_t version, void *arg)
{
	(void)page;
	(void)version;
	++*(uint64_t *)arg;
}

/* Random headers and tables placed so that their last byte is the last
 * readable byte before a PROT_NONE page: validate never crashes, and when it
 * accepts a block, every other call on it stays inside it. */
static void test_fuzzed_tables_never_read_past_their_size(void **state)
{
	(void)state;
	uint64_t rng = test_seed("fuzzed tables");
	long psz = sysconf(_SC_PAGESIZE);
	size_t area_bytes = 4 * (size_t)psz;
	char *area = mmap(NULL, area_bytes + (size_t)psz, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(area != MAP_FAILED);
	char *guard = area + area_bytes;
	assert_int_equal(mprotect(guard, (size_t)psz, PROT_NONE), 0);
	unsigned accepted = 0, rejected = 0;

	for (int round = 0; round < 20000; round++) {
		size_t size = (size_t)rng_below(&rng, area_bytes + 1);
		if (rng_below(&rng, 4))
			size &= ~(size_t)7; /* mostly aligned blocks */
		char *mem = guard - size;
		memset(area, 0, area_bytes);

		/* a valid table to start from, or none */
		if (size >= 128 && rng_below(&rng, 4)) {
			uint64_t fit = (size - 128) / 4; /* an upper bound of what fits */
			uint64_t cap = rng_below(&rng, fit + 100);
			(void)sharedtab_format(mem, size, DEV, INO, BIRTH, UID, cap);
		} else if (size >= 8 && ((uintptr_t)mem & 7) == 0) {
			memcpy(mem, "GAIAVTAB", 8);
		}
		/* then damage: a few header bytes, or the whole header */
		size_t hdr = size < 128 ? size : 128;
		switch (rng_below(&rng, 4)) {
		case 0:
			break;
		case 1:
			for (int k = 0; k < 3 && hdr > 8; k++)
				mem[8 + rng_below(&rng, hdr - 8)] = (char)rng_step(&rng);
			break;
		case 2:
			for (size_t k = 8; k < hdr; k++)
				mem[k] = (char)rng_step(&rng);
			break;
		default:
			for (size_t k = 0; k < hdr; k++)
				mem[k] = (char)rng_step(&rng);
			break;
		}
		/* and garbage in the arrays: stamps and versions of any value */
		for (size_t k = hdr; k < size; k++)
			mem[k] = (char)rng_step(&rng);

		int rc = sharedtab_validate(mem, size, DEV, INO, BIRTH, UID);
		if (rc != 0) {
			assert_true(rc == -EINVAL || rc == -EBADMSG || rc == -ESTALE || rc == -EPERM);
			rejected++;
			continue;
		}
		accepted++;
		uint64_t cap = sharedtab_capacity(mem);
		assert_true(sharedtab_bytes(cap) <= size);
		for (int k = 0; k < 8; k++) {
			uint64_t p = rng_below(&rng, cap + 70);
			(void)sharedtab_version(mem, p);
			uint32_t v = sharedtab_publish(mem, p);
			assert_true(p < cap ? v != 0 : v == 0);
		}
		struct sharedtab_cursor cur = {.seen = rng_below(&rng, 3) ? 0 : rng_step(&rng)};
		uint64_t calls = 0;
		assert_true(sharedtab_changes(mem, &cur, 0, UINT64_MAX, count_change, &calls) >= 0);
		uint64_t first = rng_below(&rng, cap + 70);
		assert_true(sharedtab_changes(mem, &cur, first, rng_step(&rng), count_change, &calls) >= 0);
		assert_true(sharedtab_changes(mem, &cur, first, rng_below(&rng, 200), count_change, &calls) >=
			    0);
	}
	print_message("fuzzed tables: %u accepted, %u rejected\n", accepted, rejected);
	assert_true(accepted > 100);
	assert_true(rejected > 100);
	munmap(area, area_bytes + (size_t)psz);
}

/* ---- publish, version, changes ------------------------------------------------ */

static void test_publish_bumps_the_version_and_returns_it(void **state)
{
	(void)state;
	size_t bytes;
	void *mem = new_table(100, &bytes, false);

	assert_int_equal(sharedtab_publish(mem, 5), 1);
	assert_int_equal(sharedtab_publish(mem, 5), 2);
	assert_int_equal(sharedtab_publish(mem, 99), 1);
	assert_int_equal(sharedtab_version(mem, 5), 2);
	assert_int_equal(sharedtab_version(mem, 99), 1);
	assert_int_equal(sharedtab_version(mem, 6), 0);
	/* outside the table: nothing happens */
	assert_int_equal(sharedtab_publish(mem, 100), 0);
	assert_int_equal(sharedtab_publish(mem, UINT64_MAX), 0);
	assert_int_equal(sharedtab_version(mem, 100), 0);
	assert_int_equal(sharedtab_version(mem, UINT64_MAX), 0);
	struct sharedtab_cursor cur = {0};
	assert_int_equal(sharedtab_changes(mem, &cur, 0, 100, NULL, NULL), 2);
	assert_int_equal(sharedtab_publish(mem, 100), 0);
	assert_int_equal(sharedtab_changes(mem, &cur, 0, 100, fail_if_called, NULL), 0);
	munmap(mem, bytes);
}

static void test_versions_wrap_past_zero(void **state)
{
	(void)state;
	size_t bytes;
	void *mem = new_table(100, &bytes, false);

	table_versions(mem)[7] = UINT32_MAX - 1;
	assert_int_equal(sharedtab_publish(mem, 7), UINT32_MAX);
	assert_int_equal(sharedtab_publish(mem, 7), 1); /* 0 means "never published" */
	assert_int_equal(sharedtab_publish(mem, 7), 2);
	munmap(mem, bytes);
}

static void test_changes_reports_changed_groups_only(void **state)
{
	(void)state;
	size_t bytes;
	void *mem = new_table(1000, &bytes, false);
	struct sharedtab_cursor cur = {0};
	struct report_log log = {0};

	/* nothing published: nothing to report */
	assert_int_equal(sharedtab_changes(mem, &cur, 0, 1000, fail_if_called, NULL), 0);

	sharedtab_publish(mem, 5);
	sharedtab_publish(mem, 100);
	sharedtab_publish(mem, 999);
	sharedtab_publish(mem, 999);
	assert_int_equal(sharedtab_changes(mem, &cur, 0, 1000, record_change, &log), 3);
	assert_int_equal(log.count, 3);
	assert_int_equal(log.pages[0], 5);
	assert_int_equal(log.versions[0], 1);
	assert_int_equal(log.pages[1], 100);
	assert_int_equal(log.pages[2], 999);
	assert_int_equal(log.versions[2], 2);

	/* seen: nothing again */
	assert_int_equal(sharedtab_changes(mem, &cur, 0, 1000, fail_if_called, NULL), 0);

	/* page 6 shares group 0 with page 5, which comes again (unchanged, the
	 * caller filters it); groups 1 and 15 are not scanned */
	sharedtab_publish(mem, 6);
	log.count = 0;
	assert_int_equal(sharedtab_changes(mem, &cur, 0, 1000, record_change, &log), 2);
	assert_int_equal(log.pages[0], 5);
	assert_int_equal(log.versions[0], 1);
	assert_int_equal(log.pages[1], 6);
	assert_int_equal(log.versions[1], 1);

	/* another reader that has seen nothing gets every published page */
	struct sharedtab_cursor fresh = {0};
	assert_int_equal(sharedtab_changes(mem, &fresh, 0, 1000, NULL, NULL), 4);
	munmap(mem, bytes);
}

static void test_changes_in_a_range_reports_only_that_range(void **state)
{
	(void)state;
	size_t bytes;
	void *mem = new_table(1000, &bytes, false);
	struct report_log log = {0};

	sharedtab_publish(mem, 10);
	sharedtab_publish(mem, 63);
	sharedtab_publish(mem, 70);
	sharedtab_publish(mem, 130);
	sharedtab_publish(mem, 700);

	/* starts and ends inside groups */
	struct sharedtab_cursor a = {0};
	assert_int_equal(sharedtab_changes(mem, &a, 40, 100, record_change, &log), 3);
	assert_int_equal(log.pages[0], 63);
	assert_int_equal(log.pages[1], 70);
	assert_int_equal(log.pages[2], 130);

	/* ranges past the end are clipped to the capacity */
	struct sharedtab_cursor b = {0};
	log.count = 0;
	assert_int_equal(sharedtab_changes(mem, &b, 500, UINT64_MAX, record_change, &log), 1);
	assert_int_equal(log.pages[0], 700);
	struct sharedtab_cursor c = {0};
	assert_int_equal(sharedtab_changes(mem, &c, 1000, 10, fail_if_called, NULL), 0);
	assert_int_equal(sharedtab_changes(mem, &c, UINT64_MAX, UINT64_MAX, fail_if_called, NULL), 0);
	struct sharedtab_cursor d = {0};
	assert_int_equal(sharedtab_changes(mem, &d, 11, 0, fail_if_called, NULL), 0);

	/* a change outside the range is not this cursor's business */
	sharedtab_publish(mem, 300);
	assert_int_equal(sharedtab_changes(mem, &a, 40, 100, fail_if_called, NULL), 0);
	munmap(mem, bytes);
}

/* With nothing published since the cursor, changes reads the epoch and
 * nothing else: garbage planted in every group stamp and version is not
 * looked at. One publish later, the scan sees all of it. */
static void test_changes_with_nothing_new_reads_only_the_epoch(void **state)
{
	(void)state;
	size_t bytes;
	void *mem = new_table(640, &bytes, false);
	struct sharedtab_cursor cur = {0};

	sharedtab_publish(mem, 1);
	assert_int_equal(sharedtab_changes(mem, &cur, 0, 640, NULL, NULL), 1);
	for (uint64_t g = 0; g < 10; g++)
		table_stamps(mem)[g] = UINT64_MAX;
	for (uint64_t p = 0; p < 640; p++)
		table_versions(mem)[p] = 77;
	for (int i = 0; i < 1000; i++)
		assert_int_equal(sharedtab_changes(mem, &cur, 0, 640, fail_if_called, NULL), 0);
	sharedtab_publish(mem, 2);
	assert_int_equal(sharedtab_changes(mem, &cur, 0, 640, NULL, NULL), 640);
	munmap(mem, bytes);
}

static void test_cursor_ahead_of_the_table_starts_over(void **state)
{
	(void)state;
	size_t bytes;
	void *mem = new_table(200, &bytes, false);
	struct sharedtab_cursor cur = {.seen = 1000}; /* from an older table */

	sharedtab_publish(mem, 3);
	sharedtab_publish(mem, 150);
	assert_int_equal(sharedtab_changes(mem, &cur, 0, 200, NULL, NULL), 2);
	assert_int_equal(cur.seen, 2);
	assert_int_equal(sharedtab_changes(mem, NULL, 0, 200, NULL, NULL), -EINVAL);
	assert_int_equal(sharedtab_changes(NULL, &cur, 0, 200, NULL, NULL), -EINVAL);
	munmap(mem, bytes);
}

/* ---- concurrency: writers publish while readers read -------------------------- */

/* Each writer appends (page, version) to its own ring log after each publish
 * returns, then advances its count with release order (it waits while the
 * slowest reader is a whole ring behind). A reader takes the entries it can
 * see *before* a changes call: those publishes completed before the call
 * began, so after the call it must have seen each page at that version or
 * newer. It also checks that no page's reported version ever goes
 * backwards. Each writer also keeps, per page, the highest version it
 * published; at the end, after the writers are gone, one last call must
 * bring every page to the table's version, which must be the highest any
 * writer logged. Versions cannot wrap here (far fewer than 2^32 publishes). */

#define STRESS_PAGES (1u << 18)       /* 4096 groups */
#define STRESS_RING (1u << 18)        /* log entries per writer */
#define STRESS_MAX_WRITERS 4
#define STRESS_MAX_READERS 2

struct log_entry {
	uint32_t page, version;
};

struct writer_log {
	uint64_t count;     /* atomic: entries [0, count) are complete (mod ring) */
	uint64_t publishes; /* written when the writer is done */
	uint32_t highest[STRESS_PAGES];
	struct log_entry ring[STRESS_RING];
};

struct stress {
	void *table;
	int nwriters, nreaders;
	int stop;           /* atomic */
	uint64_t seed;
	uint64_t taken[STRESS_MAX_READERS][STRESS_MAX_WRITERS]; /* atomic: what each reader consumed */
	struct writer_log *logs[STRESS_MAX_WRITERS];
};

static void spin(uint64_t n)
{
	for (volatile uint64_t i = 0; i < n; i++)
		;
}

static bool ring_full(struct stress *s, int w, uint64_t n)
{
	for (int i = 0; i < s->nreaders; i++)
		if (n - __atomic_load_n(&s->taken[i][w], __ATOMIC_ACQUIRE) >= STRESS_RING)
			return true;
	return false;
}

/* Bursts of publishes, to random pages or within one hot group (writers
 * racing on one stamp), one in eight back to back, the others separated by
 * random pauses: readers then find both quiet and busy moments, and groups
 * that stay quiet long enough for a missed stamp to show. */
static void stress_writer(struct stress *s, int w)
{
	struct writer_log *log = s->logs[w];
	uint64_t rng = s->seed * 0x2545f4914f6cdd1dull + (uint64_t)w + 1;
	uint64_t n = 0;

	while (!__atomic_load_n(&s->stop, __ATOMIC_RELAXED)) {
		uint64_t burst = 1 + rng_below(&rng, 32);
		bool hot = rng_below(&rng, 4) == 0;
		uint64_t base = rng_below(&rng, STRESS_PAGES / SHAREDTAB_GROUP_PAGES) * SHAREDTAB_GROUP_PAGES;
		for (uint64_t i = 0; i < burst; i++, n++) {
			while (ring_full(s, w, n)) {
				if (__atomic_load_n(&s->stop, __ATOMIC_RELAXED))
					goto out;
				sched_yield();
			}
			uint64_t p = hot ? base + rng_below(&rng, SHAREDTAB_GROUP_PAGES)
					 : rng_below(&rng, STRESS_PAGES);
			uint32_t v = sharedtab_publish(s->table, p);
			log->ring[n % STRESS_RING] = (struct log_entry){(uint32_t)p, v};
			log->highest[p] = v; /* this writer's versions of p only grow */
			__atomic_store_n(&log->count, n + 1, __ATOMIC_RELEASE);
		}
		spin(rng_below(&rng, 8) ? rng_below(&rng, 20000) : 0);
	}
out:
	log->publishes = n;
}

struct reader {
	struct stress *s;
	int id;
	struct sharedtab_cursor cur;
	uint32_t *seen;       /* per page: newest version reported */
	uint64_t calls, reports, checked, empty_calls;
	char failure[256];
};

static void reader_saw(uint64_t page, uint32_t version, void *arg)
{
	struct reader *r = arg;

	r->reports++;
	if (version < r->seen[page] && !r->failure[0])
		snprintf(r->failure, sizeof(r->failure),
			 "page %" PRIu64 " went back from version %u to %u", page, r->seen[page],
			 version);
	if (version > r->seen[page])
		r->seen[page] = version;
}

/* One round: note the completed publishes, read the changes, check them. */
static void reader_round(struct reader *r)
{
	struct stress *s = r->s;
	uint64_t upto[STRESS_MAX_WRITERS];

	for (int w = 0; w < s->nwriters; w++)
		upto[w] = __atomic_load_n(&s->logs[w]->count, __ATOMIC_ACQUIRE);
	int64_t n = sharedtab_changes(s->table, &r->cur, 0, STRESS_PAGES, reader_saw, r);
	r->calls++;
	r->empty_calls += n == 0;
	for (int w = 0; w < s->nwriters; w++) {
		uint64_t from = __atomic_load_n(&s->taken[r->id][w], __ATOMIC_RELAXED);
		for (uint64_t i = from; i < upto[w]; i++) {
			struct log_entry e = s->logs[w]->ring[i % STRESS_RING];
			r->checked++;
			if (r->seen[e.page] < e.version && !r->failure[0])
				snprintf(r->failure, sizeof(r->failure),
					 "missed a change: writer %d published page %u version %u "
					 "before changes call %" PRIu64 ", which left it at %u",
					 w, e.page, e.version, r->calls, r->seen[e.page]);
		}
		__atomic_store_n(&s->taken[r->id][w], upto[w], __ATOMIC_RELEASE);
	}
}

static void reader_init(struct reader *r, struct stress *s, int id)
{
	memset(r, 0, sizeof(*r));
	r->s = s;
	r->id = id;
	r->seen = calloc(STRESS_PAGES, sizeof(uint32_t));
	assert_non_null(r->seen);
}

static void reader_run(struct reader *r, double seconds)
{
	double end = now_s() + seconds;
	while (now_s() < end && !r->failure[0])
		reader_round(r);
}

/* After the writers are gone: one last call brings every page to the
 * table's version, which is the newest version any writer logged for it;
 * and no publish was lost (the versions add up to the publishes). */
static void reader_finish(struct reader *r, const char *what)
{
	struct stress *s = r->s;
	uint64_t publishes = 0, version_sum = 0;

	if (!r->failure[0])
		reader_round(r);
	for (int w = 0; w < s->nwriters; w++) {
		assert_int_equal(s->logs[w]->count, s->logs[w]->publishes);
		publishes += s->logs[w]->publishes;
	}
	for (uint64_t p = 0; p < STRESS_PAGES && !r->failure[0]; p++) {
		uint32_t v = sharedtab_version(s->table, p), newest = 0;
		for (int w = 0; w < s->nwriters; w++)
			if (s->logs[w]->highest[p] > newest)
				newest = s->logs[w]->highest[p];
		version_sum += v;
		if (r->seen[p] != v || newest != v)
			snprintf(r->failure, sizeof(r->failure),
				 "page %" PRIu64 ": table version %u, reader saw %u, writers logged %u", p,
				 v, r->seen[p], newest);
	}
	print_message("%s: %" PRIu64 " publishes, %" PRIu64 " changes calls (%" PRIu64
		      " empty), %" PRIu64 " reports, %" PRIu64 " completed publishes checked\n",
		      what, publishes, r->calls, r->empty_calls, r->reports, r->checked);
	if (r->failure[0])
		fail_msg("%s (seed %" PRIu64 ")", r->failure, s->seed);
	assert_int_equal(version_sum, publishes);
}

static struct stress *stress_new(int nwriters, int nreaders, const char *what)
{
	size_t bytes = sizeof(struct stress);
	struct stress *s = map_zeroed(bytes, true);

	s->nwriters = nwriters;
	s->nreaders = nreaders;
	s->seed = test_seed(what);
	s->table = map_zeroed(sharedtab_bytes(STRESS_PAGES), true);
	assert_int_equal(sharedtab_format(s->table, sharedtab_bytes(STRESS_PAGES), DEV, INO, BIRTH, UID,
					  STRESS_PAGES),
			 0);
	for (int w = 0; w < nwriters; w++)
		s->logs[w] = map_zeroed(sizeof(struct writer_log), true);
	return s;
}

static void stress_free(struct stress *s)
{
	for (int w = 0; w < s->nwriters; w++)
		munmap(s->logs[w], sizeof(struct writer_log));
	munmap(s->table, sharedtab_bytes(STRESS_PAGES));
	munmap(s, sizeof(*s));
}

static void test_writer_processes_and_a_reader_never_miss_a_change(void **state)
{
	(void)state;
	struct stress *s = stress_new(2, 1, "process stress");
	static struct reader r;
	pid_t pids[2];

	reader_init(&r, s, 0);
	for (int w = 0; w < 2; w++) {
		pids[w] = fork();
		assert_true(pids[w] >= 0);
		if (pids[w] == 0) {
			stress_writer(s, w);
			_exit(0);
		}
	}
	reader_run(&r, (double)stress_ms() / 1000.0);
	__atomic_store_n(&s->stop, 1, __ATOMIC_RELAXED);
	for (int w = 0; w < 2; w++) {
		int status;
		assert_int_equal(waitpid(pids[w], &status, 0), pids[w]);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	reader_finish(&r, "process stress");
	free(r.seen);
	stress_free(s);
}

struct writer_thread {
	struct stress *s;
	int w;
};

static void *writer_thread_main(void *arg)
{
	struct writer_thread *t = arg;
	stress_writer(t->s, t->w);
	return NULL;
}

static void *reader_thread_main(void *arg)
{
	reader_run(arg, (double)stress_ms() / 1000.0);
	return NULL;
}

/* Threads: more writers, two readers with their own cursors (and, under
 * TSan, a check of the memory orders). */
static void test_writer_threads_and_readers_never_miss_a_change(void **state)
{
	(void)state;
	enum { WRITERS = 3, READERS = 2 };
	struct stress *s = stress_new(WRITERS, READERS, "thread stress");
	static struct reader readers[READERS];
	struct writer_thread wt[WRITERS];
	pthread_t writers[WRITERS], reader_threads[READERS];

	for (int i = 0; i < READERS; i++)
		reader_init(&readers[i], s, i);
	for (int w = 0; w < WRITERS; w++) {
		wt[w] = (struct writer_thread){s, w};
		assert_int_equal(pthread_create(&writers[w], NULL, writer_thread_main, &wt[w]), 0);
	}
	for (int i = 0; i < READERS; i++)
		assert_int_equal(pthread_create(&reader_threads[i], NULL, reader_thread_main, &readers[i]), 0);
	for (int i = 0; i < READERS; i++)
		assert_int_equal(pthread_join(reader_threads[i], NULL), 0);
	__atomic_store_n(&s->stop, 1, __ATOMIC_RELAXED);
	for (int w = 0; w < WRITERS; w++)
		assert_int_equal(pthread_join(writers[w], NULL), 0);
	for (int i = 0; i < READERS; i++) {
		reader_finish(&readers[i], i ? "thread stress, reader 1" : "thread stress, reader 0");
		free(readers[i].seen);
	}
	stress_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bytes_cover_header_group_stamps_and_versions),
		cmocka_unit_test(test_format_then_validate_round_trip),
		cmocka_unit_test(test_format_rejects_bad_arguments),
		cmocka_unit_test(test_validate_rejects_each_broken_field),
		cmocka_unit_test(test_validate_detects_any_flipped_header_bit),
		cmocka_unit_test(test_fuzzed_tables_never_read_past_their_size),
		cmocka_unit_test(test_publish_bumps_the_version_and_returns_it),
		cmocka_unit_test(test_versions_wrap_past_zero),
		cmocka_unit_test(test_changes_reports_changed_groups_only),
		cmocka_unit_test(test_changes_in_a_range_reports_only_that_range),
		cmocka_unit_test(test_changes_with_nothing_new_reads_only_the_epoch),
		cmocka_unit_test(test_cursor_ahead_of_the_table_starts_over),
		cmocka_unit_test(test_writer_processes_and_a_reader_never_miss_a_change),
		cmocka_unit_test(test_writer_threads_and_readers_never_miss_a_change),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
