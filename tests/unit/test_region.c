/* Unit tests for runtime/region.c: the table of managed mappings. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "region.h"

#define PG ((uintptr_t)REGION_PAGE_SIZE)
#define BASE ((uintptr_t)0x10000000) /* fake addresses: nothing is mapped */

static struct region make_region(uintptr_t start_page, uintptr_t npages, uint64_t file_offset,
				 void *owner, uint64_t owner_page)
{
	return (struct region){
		.start = BASE + start_page * PG,
		.end = BASE + (start_page + npages) * PG,
		.file_offset = file_offset,
		.st_dev = 8,
		.st_ino = 1234,
		.prot = 3,
		.flags = 1,
		.owner = owner,
		.owner_page = owner_page,
	};
}

static int setup_table(void **state)
{
	struct region_table *t = malloc(sizeof(*t));

	if (!t || region_table_init(t) != 0)
		return -1;
	*state = t;
	return 0;
}

static int teardown_table(void **state)
{
	region_table_destroy(*state);
	free(*state);
	return 0;
}

/* What the removed callback saw. */
struct removed_log {
	struct region pieces[16];
	int n;
};

static void log_removed(const struct region *piece, void *arg)
{
	struct removed_log *log = arg;

	if (log->n < (int)(sizeof(log->pieces) / sizeof(log->pieces[0])))
		log->pieces[log->n] = *piece;
	log->n++;
}

static void assert_region_at(struct region_table *t, uintptr_t start_page, uintptr_t npages,
			     uint64_t file_offset, void *owner, uint64_t owner_page)
{
	struct region r;

	assert_int_equal(region_find(t, BASE + start_page * PG, &r), 0);
	assert_true(r.start == BASE + start_page * PG);
	assert_true(r.end == BASE + (start_page + npages) * PG);
	assert_true(r.file_offset == file_offset);
	assert_ptr_equal(r.owner, owner);
	assert_true(r.owner_page == owner_page);
	assert_int_equal(r.st_ino, 1234);
	assert_int_equal(r.prot, 3);
}

static void test_insert_then_find_returns_copy(void **state)
{
	struct region_table *t = *state;
	struct region r = make_region(10, 4, 8192, &r, 7), got;

	assert_int_equal(region_insert(t, &r), 0);
	assert_int_equal(region_count(t), 1);
	memset(&got, 0, sizeof(got));
	assert_int_equal(region_find(t, r.start + 5000, &got), 0);
	assert_memory_equal(&got, &r, sizeof(r));
	assert_int_equal(region_find(t, BASE, &got), -ENOENT);
}

static void test_insert_overlapping_is_rejected(void **state)
{
	struct region_table *t = *state;
	struct region r = make_region(10, 10, 0, NULL, 0);
	struct region overlaps[] = {
		make_region(10, 10, 0, NULL, 0), /* identical */
		make_region(5, 6, 0, NULL, 0),   /* covers the first page */
		make_region(19, 5, 0, NULL, 0),  /* covers the last page */
		make_region(12, 2, 0, NULL, 0),  /* inside */
		make_region(0, 40, 0, NULL, 0),  /* around */
	};

	assert_int_equal(region_insert(t, &r), 0);
	for (size_t i = 0; i < sizeof(overlaps) / sizeof(overlaps[0]); i++)
		assert_int_equal(region_insert(t, &overlaps[i]), -EEXIST);
	assert_int_equal(region_count(t), 1);

	/* Touching on either side is not overlapping. */
	r = make_region(5, 5, 0, NULL, 0);
	assert_int_equal(region_insert(t, &r), 0);
	r = make_region(20, 5, 0, NULL, 0);
	assert_int_equal(region_insert(t, &r), 0);
	assert_int_equal(region_count(t), 3);
}

static void test_insert_unaligned_or_empty_is_rejected(void **state)
{
	struct region_table *t = *state;
	struct region r = make_region(1, 1, 0, NULL, 0);

	r.start += 1;
	assert_int_equal(region_insert(t, &r), -EINVAL);
	r = make_region(1, 1, 0, NULL, 0);
	r.end -= 1;
	assert_int_equal(region_insert(t, &r), -EINVAL);
	r = make_region(1, 0, 0, NULL, 0);
	assert_int_equal(region_insert(t, &r), -EINVAL);
	r = make_region(2, 0, 0, NULL, 0);
	r.end = r.start - PG;
	assert_int_equal(region_insert(t, &r), -EINVAL);
	assert_int_equal(region_count(t), 0);
}

static void test_find_at_first_byte_last_byte_and_one_past_end(void **state)
{
	struct region_table *t = *state;
	struct region a = make_region(10, 3, 0, &a, 0), b = make_region(13, 2, 0, &b, 0), got;

	assert_int_equal(region_insert(t, &b), 0);
	assert_int_equal(region_insert(t, &a), 0);

	assert_int_equal(region_find(t, a.start - 1, &got), -ENOENT);
	assert_int_equal(region_find(t, a.start, &got), 0);
	assert_ptr_equal(got.owner, &a);
	assert_int_equal(region_find(t, a.end - 1, &got), 0);
	assert_ptr_equal(got.owner, &a);
	/* One past a's end is b's first byte (adjacent regions). */
	assert_int_equal(region_find(t, a.end, &got), 0);
	assert_ptr_equal(got.owner, &b);
	assert_int_equal(region_find(t, b.end - 1, &got), 0);
	assert_ptr_equal(got.owner, &b);
	assert_int_equal(region_find(t, b.end, &got), -ENOENT);
	assert_int_equal(region_find(t, 0, &got), -ENOENT);
	assert_int_equal(region_find(t, UINTPTR_MAX, &got), -ENOENT);
}

static void test_partial_unmap_of_head_trims_region(void **state)
{
	struct region_table *t = *state;
	int owner;
	struct region r = make_region(10, 8, 40960, &owner, 100);
	struct removed_log log = {0};

	assert_int_equal(region_insert(t, &r), 0);
	assert_int_equal(region_remove_range(t, BASE + 10 * PG, 3 * PG, log_removed, &log), 1);
	assert_int_equal(log.n, 1);
	assert_true(log.pieces[0].start == BASE + 10 * PG && log.pieces[0].end == BASE + 13 * PG);
	assert_true(log.pieces[0].file_offset == 40960);
	assert_true(log.pieces[0].owner_page == 100);
	assert_ptr_equal(log.pieces[0].owner, &owner);

	assert_int_equal(region_count(t), 1);
	assert_region_at(t, 13, 5, 40960 + 3 * PG, &owner, 103);
	assert_int_equal(region_find(t, BASE + 12 * PG, &r), -ENOENT);
}

static void test_partial_unmap_of_tail_trims_region(void **state)
{
	struct region_table *t = *state;
	int owner;
	struct region r = make_region(10, 8, 40960, &owner, 100);
	struct removed_log log = {0};

	assert_int_equal(region_insert(t, &r), 0);
	assert_int_equal(region_remove_range(t, BASE + 15 * PG, 3 * PG, log_removed, &log), 1);
	assert_int_equal(log.n, 1);
	assert_true(log.pieces[0].start == BASE + 15 * PG && log.pieces[0].end == BASE + 18 * PG);
	assert_true(log.pieces[0].file_offset == 40960 + 5 * PG);
	assert_true(log.pieces[0].owner_page == 105);

	assert_int_equal(region_count(t), 1);
	assert_region_at(t, 10, 5, 40960, &owner, 100);
	assert_int_equal(region_find(t, BASE + 15 * PG, &r), -ENOENT);
}

static void test_partial_unmap_in_middle_splits_region(void **state)
{
	struct region_table *t = *state;
	int owner;
	struct region r = make_region(10, 10, 4 * PG, &owner, 50);
	struct removed_log log = {0};

	assert_int_equal(region_insert(t, &r), 0);
	/* Punch pages 13..15 out of 10..19. */
	assert_int_equal(region_remove_range(t, BASE + 13 * PG, 3 * PG, log_removed, &log), 1);
	assert_int_equal(log.n, 1);
	assert_true(log.pieces[0].start == BASE + 13 * PG && log.pieces[0].end == BASE + 16 * PG);
	assert_true(log.pieces[0].file_offset == 7 * PG);
	assert_true(log.pieces[0].owner_page == 53);
	assert_ptr_equal(log.pieces[0].owner, &owner);

	assert_int_equal(region_count(t), 2);
	assert_region_at(t, 10, 3, 4 * PG, &owner, 50);
	assert_region_at(t, 16, 4, 10 * PG, &owner, 56);
	for (uintptr_t p = 13; p < 16; p++)
		assert_int_equal(region_find(t, BASE + p * PG, &r), -ENOENT);

	/* Splitting a piece again keeps counting from the original mapping. */
	log.n = 0;
	assert_int_equal(region_remove_range(t, BASE + 17 * PG, PG, log_removed, &log), 1);
	assert_true(log.pieces[0].owner_page == 57 && log.pieces[0].file_offset == 11 * PG);
	assert_int_equal(region_count(t), 3);
	assert_region_at(t, 16, 1, 10 * PG, &owner, 56);
	assert_region_at(t, 18, 2, 12 * PG, &owner, 58);
}

static void test_unaligned_unmap_rounds_start_down_and_end_up(void **state)
{
	struct region_table *t = *state;
	struct region r = make_region(10, 10, 0, NULL, 0);
	struct removed_log log = {0};

	assert_int_equal(region_insert(t, &r), 0);
	/* [12*PG + 100, 14*PG + 1) covers pages 12, 13 and 14. */
	assert_int_equal(region_remove_range(t, BASE + 12 * PG + 100, 2 * PG - 99, log_removed, &log),
			 1);
	assert_true(log.pieces[0].start == BASE + 12 * PG && log.pieces[0].end == BASE + 15 * PG);
	assert_region_at(t, 10, 2, 0, NULL, 0);
	assert_region_at(t, 15, 5, 5 * PG, NULL, 5);

	/* A single byte removes its whole page. */
	log.n = 0;
	assert_int_equal(region_remove_range(t, BASE + 19 * PG + PG - 1, 1, log_removed, &log), 1);
	assert_true(log.pieces[0].start == BASE + 19 * PG && log.pieces[0].end == BASE + 20 * PG);
	assert_region_at(t, 15, 4, 5 * PG, NULL, 5);
}

static void test_unmap_spanning_regions_and_gaps(void **state)
{
	struct region_table *t = *state;
	int oa, ob, oc, od;
	struct region a = make_region(0, 4, 0, &oa, 0), b = make_region(6, 2, 0, &ob, 0),
		      c = make_region(8, 4, 100 * PG, &oc, 10), d = make_region(20, 2, 0, &od, 0);
	struct removed_log log = {0};

	assert_int_equal(region_insert(t, &a), 0);
	assert_int_equal(region_insert(t, &b), 0);
	assert_int_equal(region_insert(t, &c), 0);
	assert_int_equal(region_insert(t, &d), 0);

	/* Pages 2..9: a's tail, the gap 4..5, all of b, c's head. */
	assert_int_equal(region_remove_range(t, BASE + 2 * PG, 8 * PG, log_removed, &log), 3);
	assert_int_equal(log.n, 3);
	assert_ptr_equal(log.pieces[0].owner, &oa);
	assert_true(log.pieces[0].start == BASE + 2 * PG && log.pieces[0].end == BASE + 4 * PG);
	assert_true(log.pieces[0].owner_page == 2);
	assert_ptr_equal(log.pieces[1].owner, &ob);
	assert_true(log.pieces[1].start == b.start && log.pieces[1].end == b.end);
	assert_true(log.pieces[1].owner_page == 0 && log.pieces[1].file_offset == 0);
	assert_ptr_equal(log.pieces[2].owner, &oc);
	assert_true(log.pieces[2].start == BASE + 8 * PG && log.pieces[2].end == BASE + 10 * PG);
	assert_true(log.pieces[2].file_offset == 100 * PG && log.pieces[2].owner_page == 10);

	assert_int_equal(region_count(t), 3);
	assert_region_at(t, 0, 2, 0, &oa, 0);
	assert_region_at(t, 10, 2, 102 * PG, &oc, 12);
	assert_region_at(t, 20, 2, 0, &od, 0);

	/* Everything at once, with a NULL callback. */
	assert_int_equal(region_remove_range(t, BASE, 100 * PG, NULL, NULL), 3);
	assert_int_equal(region_count(t), 0);
}

static void test_unmap_of_nothing_or_bad_range(void **state)
{
	struct region_table *t = *state;
	struct region r = make_region(10, 2, 0, NULL, 0);
	struct removed_log log = {0};

	assert_int_equal(region_insert(t, &r), 0);
	assert_int_equal(region_remove_range(t, BASE, 10 * PG, log_removed, &log), 0);
	assert_int_equal(region_remove_range(t, BASE + 12 * PG, 10 * PG, log_removed, &log), 0);
	assert_int_equal(region_remove_range(t, BASE + 10 * PG, 0, log_removed, &log), -EINVAL);
	assert_int_equal(region_remove_range(t, UINTPTR_MAX - PG, 2 * PG, log_removed, &log), -EINVAL);
	assert_int_equal(log.n, 0);
	assert_int_equal(region_count(t), 1);
}

struct walk {
	uintptr_t starts[8];
	int n, stop_at;
};

static int record_walk(const struct region *r, void *arg)
{
	struct walk *w = arg;

	w->starts[w->n++] = r->start;
	return w->n == w->stop_at ? 42 : 0;
}

static void test_for_each_visits_overlapping_regions_in_order(void **state)
{
	struct region_table *t = *state;
	struct walk w = {0};

	for (uintptr_t p = 0; p < 5; p++) {
		struct region r = make_region(40 - 10 * p, 2, 0, NULL, 0); /* inserted backwards */
		assert_int_equal(region_insert(t, &r), 0);
	}
	/* [11*PG, 31*PG + 1) overlaps the regions at 10, 20 and 30 (and not 0 or 40). */
	assert_int_equal(region_for_each(t, BASE + 11 * PG, 20 * PG + 1, record_walk, &w), 0);
	assert_int_equal(w.n, 3);
	assert_true(w.starts[0] == BASE + 10 * PG);
	assert_true(w.starts[1] == BASE + 20 * PG);
	assert_true(w.starts[2] == BASE + 30 * PG);

	w = (struct walk){.stop_at = 2};
	assert_int_equal(region_for_each(t, 0, SIZE_MAX, record_walk, &w), 42);
	assert_int_equal(w.n, 2);
	assert_true(w.starts[0] == BASE);

	w = (struct walk){0};
	assert_int_equal(region_for_each(t, BASE + 12 * PG, 8 * PG, record_walk, &w), 0);
	assert_int_equal(w.n, 0);
}

/* ---- randomised: the table against a page-by-page reference ---- */

#define REF_PAGES (1u << 17)
#define REF_REGIONS 10000

struct ref_page {
	uint32_t id; /* 0: unmapped; else the insert that mapped it */
	uint64_t file_offset, owner_page;
};

static uint64_t test_seed(const char *test)
{
	const char *env = getenv("GAIA_TEST_SEED");
	uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)clock();

	printf("%s: seed %" PRIu64 " (replay with GAIA_TEST_SEED=%" PRIu64 ")\n", test, seed, seed);
	fflush(stdout);
	return seed;
}

static void seed_rng(unsigned short xsubi[3], uint64_t seed)
{
	xsubi[0] = (unsigned short)seed;
	xsubi[1] = (unsigned short)(seed >> 16);
	xsubi[2] = (unsigned short)(seed >> 32);
}

static uint64_t rng_below(unsigned short xsubi[3], uint64_t n)
{
	uint64_t v = ((uint64_t)nrand48(xsubi) << 31) | (uint64_t)nrand48(xsubi);

	return v % n;
}

static uintptr_t page_of(uintptr_t addr)
{
	return (addr - BASE) / PG;
}

/* Checks a region copied out of the table against the reference: every
 * page it covers belongs to the same insert, at the matching offsets. */
static void assert_matches_reference(const struct region *r, const struct ref_page *ref)
{
	uintptr_t first = page_of(r->start);

	assert_true(r->start < r->end);
	for (uintptr_t p = first; p < page_of(r->end); p++) {
		assert_int_equal(ref[p].id, (uint32_t)(uintptr_t)r->owner);
		assert_true(ref[p].file_offset == r->file_offset + (p - first) * PG);
		assert_true(ref[p].owner_page == r->owner_page + (p - first));
	}
}

struct random_removal {
	struct ref_page *ref;
	int pieces;
};

static void check_and_clear_piece(const struct region *piece, void *arg)
{
	struct random_removal *rm = arg;

	assert_matches_reference(piece, rm->ref);
	for (uintptr_t p = page_of(piece->start); p < page_of(piece->end); p++)
		rm->ref[p].id = 0;
	rm->pieces++;
}

static void test_many_regions_match_brute_force_reference(void **state)
{
	struct region_table *t = *state;
	struct ref_page *ref = calloc(REF_PAGES, sizeof(*ref));
	unsigned short rng[3];
	uint32_t next_id = 1, inserted = 0;
	size_t expected_count = 0;

	assert_non_null(ref);
	seed_rng(rng, test_seed(__func__));

	/* Insert until REF_REGIONS went in; every refusal must be an overlap. */
	while (inserted < REF_REGIONS) {
		uintptr_t n = 1 + rng_below(rng, 16), p = rng_below(rng, REF_PAGES - n);
		uint64_t file_page = rng_below(rng, 1u << 20), owner_page = rng_below(rng, 1u << 20);
		uint32_t id = next_id++;
		struct region r = make_region(p, n, file_page * PG, (void *)(uintptr_t)id, owner_page);
		int overlap = 0;

		for (uintptr_t q = p; q < p + n; q++)
			overlap |= ref[q].id != 0;
		assert_int_equal(region_insert(t, &r), overlap ? -EEXIST : 0);
		if (overlap)
			continue;
		for (uintptr_t q = p; q < p + n; q++)
			ref[q] = (struct ref_page){id, r.file_offset + (q - p) * PG,
						   r.owner_page + (q - p)};
		inserted++;
	}
	assert_int_equal(region_count(t), REF_REGIONS);

	/* Random unmaps, some unaligned, some spanning many regions. */
	for (int i = 0; i < 2000; i++) {
		uintptr_t start = BASE + rng_below(rng, REF_PAGES - 64) * PG;
		size_t len = (1 + rng_below(rng, 48)) * PG;
		struct random_removal rm = {.ref = ref};

		if (i % 3 == 0) {
			start += rng_below(rng, PG);
			len -= rng_below(rng, PG);
		}
		int removed = region_remove_range(t, start, len, check_and_clear_piece, &rm);

		assert_int_equal(removed, rm.pieces);
		for (uintptr_t p = page_of(start); p < page_of(start + len - 1) + 1; p++)
			assert_int_equal(ref[p].id, 0);
	}

	/* The table holds one region per run of pages from one insert. */
	for (uintptr_t p = 0; p < REF_PAGES; p++)
		expected_count += ref[p].id && (p == 0 || ref[p - 1].id != ref[p].id);
	assert_int_equal(region_count(t), expected_count);

	for (int i = 0; i < 200000; i++) {
		uintptr_t addr = BASE + rng_below(rng, REF_PAGES * PG);
		struct region r;
		int err = region_find(t, addr, &r);

		if (!ref[page_of(addr)].id) {
			assert_int_equal(err, -ENOENT);
			continue;
		}
		assert_int_equal(err, 0);
		assert_true(r.start <= addr && addr < r.end);
		assert_matches_reference(&r, ref);
		/* The region is maximal: its neighbours belong to other inserts. */
		uint32_t id = ref[page_of(addr)].id;
		assert_true(page_of(r.start) == 0 || ref[page_of(r.start) - 1].id != id);
		assert_true(page_of(r.end) == REF_PAGES || ref[page_of(r.end)].id != id);
	}
	free(ref);
}

/* ---- concurrency: lookups during inserts and splits ---- */

#define CONC_SLOTS 64
#define CONC_SLOT_PAGES 8
#define CONC_READERS 4
#define CONC_WRITER_OPS 100000

/* Every region the writer makes satisfies, for its key k (the owner):
 * owner_page == page(start) + k and file_offset == start + k pages; splits
 * and trims advance both sides together, so a reader seeing a region whose
 * fields do not agree has seen a torn or stale copy. */
static int region_is_consistent(const struct region *r, uintptr_t addr)
{
	uintptr_t k = (uintptr_t)r->owner;

	return r->start <= addr && addr < r->end && r->end - r->start <= CONC_SLOT_PAGES * PG &&
	       !(r->start % PG) && !(r->end % PG) && r->owner_page == page_of(r->start) + k &&
	       r->file_offset == r->start - BASE + k * PG;
}

struct conc {
	struct region_table *t;
	pthread_barrier_t start;
	int writer_done;
	uint64_t seed;
	uint64_t lookups, found, bad; /* lookups and hits made while the writer ran */
};

static int count_walk(const struct region *r, void *arg)
{
	(*(size_t *)arg)++;
	return !region_is_consistent(r, r->start);
}

/* Looks up random addresses until the writer is done; only what it saw
 * while the writer was still running counts as concurrent. */
static void *conc_reader(void *arg)
{
	struct conc *c = arg;
	unsigned short rng[3];
	uint64_t lookups = 0, found = 0, bad = 0;

	seed_rng(rng, c->seed ^ (uint64_t)(uintptr_t)&rng);
	pthread_barrier_wait(&c->start);
	while (!__atomic_load_n(&c->writer_done, __ATOMIC_ACQUIRE)) {
		uintptr_t addr = BASE + rng_below(rng, CONC_SLOTS * CONC_SLOT_PAGES * PG);
		struct region r;
		int err = region_find(c->t, addr, &r);

		lookups++;
		if (err == 0) {
			found++;
			bad += !region_is_consistent(&r, addr);
		} else if (err != -ENOENT) {
			bad++;
		}
		if (lookups % 64 == 0) {
			size_t n = 0;

			bad += region_for_each(c->t, BASE, CONC_SLOTS * CONC_SLOT_PAGES * PG, count_walk,
					       &n) != 0;
		}
	}
	__atomic_fetch_add(&c->lookups, lookups, __ATOMIC_RELAXED);
	__atomic_fetch_add(&c->found, found, __ATOMIC_RELAXED);
	__atomic_fetch_add(&c->bad, bad, __ATOMIC_RELAXED);
	return NULL;
}

/* Fills whole slots and punches random holes (heads, tails, middles) into
 * them. */
static void *conc_writer(void *arg)
{
	struct conc *c = arg;
	unsigned short rng[3];
	uint64_t bad = 0;

	seed_rng(rng, c->seed);
	pthread_barrier_wait(&c->start);
	for (int i = 0; i < CONC_WRITER_OPS; i++) {
		uintptr_t slot = rng_below(rng, CONC_SLOTS), k = 1 + rng_below(rng, 1000);
		uintptr_t p = slot * CONC_SLOT_PAGES;

		if (rng_below(rng, 3)) {
			/* Clear the slot's leftovers first, so inserts mostly succeed. */
			struct region r = make_region(p, CONC_SLOT_PAGES, p * PG + k * PG,
						      (void *)k, p + k);

			bad += region_remove_range(c->t, r.start, r.end - r.start, NULL, NULL) < 0;
			bad += region_insert(c->t, &r) != 0;
		} else {
			uintptr_t off = rng_below(rng, CONC_SLOT_PAGES);
			uintptr_t n = 1 + rng_below(rng, CONC_SLOT_PAGES - off);

			bad += region_remove_range(c->t, BASE + (p + off) * PG, n * PG, NULL, NULL) < 0;
		}
	}
	__atomic_fetch_add(&c->bad, bad, __ATOMIC_RELAXED);
	__atomic_store_n(&c->writer_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void test_concurrent_lookups_see_consistent_regions(void **state)
{
	struct conc c = {.t = *state, .seed = test_seed(__func__)};
	pthread_t readers[CONC_READERS], writer;
	size_t n = 0;

	assert_int_equal(pthread_barrier_init(&c.start, NULL, CONC_READERS + 1), 0);
	for (int i = 0; i < CONC_READERS; i++)
		assert_int_equal(pthread_create(&readers[i], NULL, conc_reader, &c), 0);
	assert_int_equal(pthread_create(&writer, NULL, conc_writer, &c), 0);
	assert_int_equal(pthread_join(writer, NULL), 0);
	for (int i = 0; i < CONC_READERS; i++)
		assert_int_equal(pthread_join(readers[i], NULL), 0);
	pthread_barrier_destroy(&c.start);

	printf("concurrent: %" PRIu64 " lookups during %d changes, %" PRIu64 " found, %zu regions left\n",
	       c.lookups, CONC_WRITER_OPS, c.found, region_count(c.t));
	fflush(stdout);
	assert_int_equal(c.bad, 0);
	/* The test means something only if readers did hit regions mid-run. */
	assert_true(c.found > 0);

	/* Whatever is left is still sorted, disjoint and consistent. */
	assert_int_equal(region_for_each(c.t, 0, SIZE_MAX, count_walk, &n), 0);
	assert_int_equal(n, region_count(c.t));
}

int main(void)
{
#define TABLE_TEST(fn) cmocka_unit_test_setup_teardown(fn, setup_table, teardown_table)
	const struct CMUnitTest tests[] = {
		TABLE_TEST(test_insert_then_find_returns_copy),
		TABLE_TEST(test_insert_overlapping_is_rejected),
		TABLE_TEST(test_insert_unaligned_or_empty_is_rejected),
		TABLE_TEST(test_find_at_first_byte_last_byte_and_one_past_end),
		TABLE_TEST(test_partial_unmap_of_head_trims_region),
		TABLE_TEST(test_partial_unmap_of_tail_trims_region),
		TABLE_TEST(test_partial_unmap_in_middle_splits_region),
		TABLE_TEST(test_unaligned_unmap_rounds_start_down_and_end_up),
		TABLE_TEST(test_unmap_spanning_regions_and_gaps),
		TABLE_TEST(test_unmap_of_nothing_or_bad_range),
		TABLE_TEST(test_for_each_visits_overlapping_regions_in_order),
		TABLE_TEST(test_many_regions_match_brute_force_reference),
		TABLE_TEST(test_concurrent_lookups_see_consistent_regions),
	};
#undef TABLE_TEST

	return cmocka_run_group_tests(tests, NULL, NULL);
}
