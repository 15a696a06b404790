/* The 3-way page merge (runtime/merge.h), as a spec.
 *
 * Every behavioural test runs once per implementation the CPU supports
 * (scalar, AVX2, AVX-512BW) and checks against the byte-by-byte reference
 * below, which is the rule of DESIGN §1 promise 3 written as a loop. The
 * store-pattern contract of merge_page_into (a byte the device did not
 * change is never stored to) is proven with read-only pages: a stray store,
 * even of a byte's own value, faults. The batch merge_pages3 is checked
 * against merge_page3 page by page, on both sides of its streaming
 * threshold.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "merge.h"

#define PAGE MERGE_PAGE_BYTES
/* Room to place a page at any offset 0..63 from a 64-byte boundary. */
#define SLACK 64

static const enum merge_isa all_isas[] = { MERGE_ISA_SCALAR, MERGE_ISA_AVX2, MERGE_ISA_AVX512 };
#define ISA_COUNT (sizeof(all_isas) / sizeof(all_isas[0]))

/* ---- the spec as a loop ------------------------------------------------ */

static size_t ref_page3(uint8_t *out, const uint8_t *base, const uint8_t *lo, const uint8_t *hi)
{
	size_t conflicts = 0;

	for (size_t i = 0; i < PAGE; i++) {
		uint8_t b = base[i], l = lo[i], h = hi[i];

		if (l != b && h != b && l != h)
			conflicts++;
		out[i] = h != b ? h : l;
	}
	return conflicts;
}

static size_t ref_into(uint8_t *dst, const uint8_t *base, const uint8_t *src)
{
	size_t changed = 0;

	for (size_t i = 0; i < PAGE; i++) {
		if (src[i] != base[i]) {
			dst[i] = src[i];
			changed++;
		}
	}
	return changed;
}

/* ---- helpers ------------------------------------------------------------ */

/* splitmix64: small, and replays exactly from a printed seed. */
static uint64_t rng_state;

static uint64_t rng_next(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static unsigned rng_below(unsigned n)
{
	return (unsigned)(rng_next() % n);
}

static void fill_random(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)rng_next();
}

/* A value that differs from v. */
static uint8_t other_than(uint8_t v)
{
	return (uint8_t)(v ^ (1 + rng_below(255)));
}

/* Change about percent% of the bytes of `page` relative to `base`. */
static void change_bytes(uint8_t *page, const uint8_t *base, unsigned percent)
{
	memcpy(page, base, PAGE);
	for (size_t i = 0; i < PAGE; i++)
		if (rng_below(100) < percent)
			page[i] = other_than(base[i]);
}

/* The statement after it runs once per ISA the CPU supports, with that ISA
 * forced; ISAs the CPU lacks are skipped (merge_set_isa refuses them). */
#define FOR_EACH_ISA(isa)                                                          \
	for (size_t isa##_i = 0; isa##_i < ISA_COUNT; isa##_i++)                   \
		for (enum merge_isa isa = all_isas[isa##_i]; merge_set_isa(isa) == 0; \
		     isa = (enum merge_isa)-1)

static enum merge_isa isa_at_start;

static int remember_isa(void **state)
{
	(void)state;
	isa_at_start = merge_get_isa();
	return 0;
}

static int restore_isa(void **state)
{
	(void)state;
	return merge_set_isa(isa_at_start);
}

/* ---- selection ------------------------------------------------------------ */

static void test_scalar_is_always_available(void **state)
{
	(void)state;
	assert_int_equal(merge_set_isa(MERGE_ISA_SCALAR), 0);
	assert_int_equal(merge_get_isa(), MERGE_ISA_SCALAR);
	assert_string_equal(merge_isa_name(MERGE_ISA_SCALAR), "scalar");
}

static void test_set_isa_refuses_what_the_cpu_lacks(void **state)
{
	(void)state;
	__builtin_cpu_init();
	int has_avx2 = __builtin_cpu_supports("avx2");
	int has_avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");

	assert_int_equal(merge_set_isa(MERGE_ISA_AVX2), has_avx2 ? 0 : -ENOTSUP);
	assert_int_equal(merge_set_isa(MERGE_ISA_AVX512), has_avx512 ? 0 : -ENOTSUP);
	assert_int_equal(merge_set_isa((enum merge_isa)42), -EINVAL);
	assert_string_equal(merge_isa_name(MERGE_ISA_AVX2), "avx2");
	assert_string_equal(merge_isa_name(MERGE_ISA_AVX512), "avx512bw");
	print_message("cpu: avx2=%d avx512bw=%d\n", has_avx2, has_avx512);
}

/* ---- merge_page3 ------------------------------------------------------------ */

static uint8_t buf_base[PAGE + SLACK] __attribute__((aligned(64)));
static uint8_t buf_lo[PAGE + SLACK] __attribute__((aligned(64)));
static uint8_t buf_hi[PAGE + SLACK] __attribute__((aligned(64)));
static uint8_t buf_out[PAGE + SLACK] __attribute__((aligned(64)));
static uint8_t buf_ref[PAGE + SLACK] __attribute__((aligned(64)));
static uint8_t buf_dst[PAGE + SLACK] __attribute__((aligned(64)));

static void test_merge_keeps_both_writers(void **state)
{
	(void)state;
	FOR_EACH_ISA(isa)
	{
		memset(buf_base, 'b', PAGE);
		memcpy(buf_lo, buf_base, PAGE);
		memcpy(buf_hi, buf_base, PAGE);
		buf_lo[10] = 'L';   /* the CPU wrote one byte */
		buf_hi[11] = 'H';   /* the device wrote its neighbour */
		buf_hi[4095] = 'h'; /* and the last byte */
		buf_lo[0] = 'l';    /* the CPU the first */
		memset(buf_out, 0, PAGE);

		assert_int_equal(merge_page3(buf_out, buf_base, buf_lo, buf_hi), 0);
		assert_int_equal(buf_out[10], 'L');
		assert_int_equal(buf_out[11], 'H');
		assert_int_equal(buf_out[4095], 'h');
		assert_int_equal(buf_out[0], 'l');
		for (size_t i = 1; i < PAGE - 1; i++)
			if (i != 10 && i != 11)
				assert_int_equal(buf_out[i], 'b');
	}
}

static void test_same_byte_higher_owner_wins(void **state)
{
	(void)state;
	FOR_EACH_ISA(isa)
	{
		memset(buf_base, 0, PAGE);
		memcpy(buf_lo, buf_base, PAGE);
		memcpy(buf_hi, buf_base, PAGE);
		buf_lo[100] = 1;
		buf_hi[100] = 2;
		assert_int_equal(merge_page3(buf_out, buf_base, buf_lo, buf_hi), 1);
		assert_int_equal(buf_out[100], 2);
	}
}

static void test_same_value_from_both_is_no_conflict(void **state)
{
	(void)state;
	FOR_EACH_ISA(isa)
	{
		memset(buf_base, 0, PAGE);
		memcpy(buf_lo, buf_base, PAGE);
		memcpy(buf_hi, buf_base, PAGE);
		buf_lo[7] = buf_hi[7] = 9;
		assert_int_equal(merge_page3(buf_out, buf_base, buf_lo, buf_hi), 0);
		assert_int_equal(buf_out[7], 9);
	}
}

static void test_untouched_page_merges_to_base(void **state)
{
	(void)state;
	rng_state = 1;
	fill_random(buf_base, PAGE);
	memcpy(buf_lo, buf_base, PAGE);
	memcpy(buf_hi, buf_base, PAGE);
	FOR_EACH_ISA(isa)
	{
		memset(buf_out, 0xee, PAGE);
		assert_int_equal(merge_page3(buf_out, buf_base, buf_lo, buf_hi), 0);
		assert_memory_equal(buf_out, buf_base, PAGE);
	}
}

/* Every byte in one of four states, cycling: untouched, lo only, hi only,
 * both to different values. So a quarter of the page (1024 bytes) are
 * conflicts, and each 32- and 64-byte step holds all four states. */
static void test_page3_counts_conflicting_bytes(void **state)
{
	(void)state;
	FOR_EACH_ISA(isa)
	{
		memset(buf_base, 0x55, PAGE);
		memcpy(buf_lo, buf_base, PAGE);
		memcpy(buf_hi, buf_base, PAGE);
		for (size_t i = 0; i < PAGE; i++) {
			if (i % 4 == 1 || i % 4 == 3)
				buf_lo[i] = 0x11;
			if (i % 4 == 2 || i % 4 == 3)
				buf_hi[i] = 0x22;
		}
		static const uint8_t merged[4] = { 0x55, 0x11, 0x22, 0x22 };

		assert_int_equal(merge_page3(buf_out, buf_base, buf_lo, buf_hi), PAGE / 4);
		for (size_t i = 0; i < PAGE; i++)
			assert_int_equal(buf_out[i], merged[i % 4]);
	}
}

static void test_page3_everything_conflicts(void **state)
{
	(void)state;
	FOR_EACH_ISA(isa)
	{
		memset(buf_base, 0, PAGE);
		memset(buf_lo, 1, PAGE);
		memset(buf_hi, 2, PAGE);
		assert_int_equal(merge_page3(buf_out, buf_base, buf_lo, buf_hi), PAGE);
		for (size_t i = 0; i < PAGE; i++)
			assert_int_equal(buf_out[i], 2);
	}
}

/* out == lo and out == hi: in-place merges into either replica. */
static void test_page3_out_may_alias_lo_or_hi(void **state)
{
	(void)state;
	rng_state = 2;
	FOR_EACH_ISA(isa)
	{
		fill_random(buf_base, PAGE);
		change_bytes(buf_lo, buf_base, 30);
		change_bytes(buf_hi, buf_base, 30);
		size_t want = ref_page3(buf_ref, buf_base, buf_lo, buf_hi);
		uint8_t saved_hi[PAGE];

		memcpy(saved_hi, buf_hi, PAGE);
		assert_int_equal(merge_page3(buf_lo, buf_base, buf_lo, buf_hi), want);
		assert_memory_equal(buf_lo, buf_ref, PAGE);

		change_bytes(buf_lo, buf_base, 30);
		memcpy(buf_hi, saved_hi, PAGE);
		want = ref_page3(buf_ref, buf_base, buf_lo, buf_hi);
		assert_int_equal(merge_page3(buf_hi, buf_base, buf_lo, buf_hi), want);
		assert_memory_equal(buf_hi, buf_ref, PAGE);
	}
}

/* ---- merge_page_into ------------------------------------------------------------ */

static void test_into_keeps_cpu_bytes_and_applies_device_bytes(void **state)
{
	(void)state;
	FOR_EACH_ISA(isa)
	{
		memset(buf_base, 'b', PAGE);
		memcpy(buf_dst, buf_base, PAGE); /* the CPU's live page */
		memcpy(buf_hi, buf_base, PAGE);  /* the device's page */
		buf_dst[5] = 'C';
		buf_dst[4000] = 'C';
		buf_hi[6] = 'D';
		buf_hi[4001] = 'D';
		buf_hi[64] = 'D';

		assert_int_equal(merge_page_into(buf_dst, buf_base, buf_hi), 3);
		assert_int_equal(buf_dst[5], 'C');
		assert_int_equal(buf_dst[4000], 'C');
		assert_int_equal(buf_dst[6], 'D');
		assert_int_equal(buf_dst[4001], 'D');
		assert_int_equal(buf_dst[64], 'D');
	}
}

/* The device wins a byte both wrote (it is the higher owner). */
static void test_into_device_wins_a_byte_both_wrote(void **state)
{
	(void)state;
	FOR_EACH_ISA(isa)
	{
		memset(buf_base, 0, PAGE);
		memcpy(buf_dst, buf_base, PAGE);
		memcpy(buf_hi, buf_base, PAGE);
		buf_dst[300] = 1;
		buf_hi[300] = 2;
		assert_int_equal(merge_page_into(buf_dst, buf_base, buf_hi), 1);
		assert_int_equal(buf_dst[300], 2);
	}
}

/* The count is of bytes the device changed, whatever dst held already. */
static void test_into_counts_every_byte_the_device_changed(void **state)
{
	(void)state;
	FOR_EACH_ISA(isa)
	{
		memset(buf_base, 0, PAGE);
		memset(buf_hi, 7, PAGE);
		memset(buf_dst, 7, PAGE);
		assert_int_equal(merge_page_into(buf_dst, buf_base, buf_hi), PAGE);
		memset(buf_hi, 0, PAGE);
		for (size_t i = 0; i < PAGE; i += 3)
			buf_hi[i] = 1;
		assert_int_equal(merge_page_into(buf_dst, buf_base, buf_hi), (PAGE + 2) / 3);
	}
}

/* ---- the store pattern: read-only pages fault on any stray store -------------- */

static sigjmp_buf fault_jmp;
static volatile sig_atomic_t fault_armed;

static void on_fault(int sig)
{
	(void)sig;
	if (fault_armed)
		siglongjmp(fault_jmp, 1);
	signal(SIGSEGV, SIG_DFL);
	raise(SIGSEGV);
}

/* merge_page_into with SIGSEGV turned into a return of -1. */
static long into_or_fault(uint8_t *dst, const uint8_t *base, const uint8_t *src)
{
	struct sigaction sa = { .sa_handler = on_fault }, old;
	volatile long ret = -1;

	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGSEGV, &sa, &old), 0);
	if (sigsetjmp(fault_jmp, 1) == 0) {
		fault_armed = 1;
		ret = (long)merge_page_into(dst, base, src);
	}
	fault_armed = 0;
	assert_int_equal(sigaction(SIGSEGV, &old, NULL), 0);
	return ret;
}

/* A page whose bytes the device did not change may be read-only: nothing
 * is stored, not even the same value. */
static void test_into_unchanged_page_is_never_stored(void **state)
{
	(void)state;
	long psz = sysconf(_SC_PAGESIZE);
	uint8_t *dst = mmap(NULL, (size_t)psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			    -1, 0);

	assert_true(dst != MAP_FAILED);
	rng_state = 3;
	fill_random(buf_base, PAGE);
	memcpy(buf_hi, buf_base, PAGE);
	memcpy(dst, buf_base, PAGE);
	assert_int_equal(mprotect(dst, (size_t)psz, PROT_READ), 0);
	FOR_EACH_ISA(isa)
	{
		long ret = into_or_fault(dst, buf_base, buf_hi);

		if (ret < 0)
			fail_msg("%s stored to a page with no changed byte", merge_isa_name(isa));
		assert_int_equal(ret, 0);
	}
	munmap(dst, (size_t)psz);
}

/* dst straddles a page boundary at byte k of the merged page, with one side
 * read-only and all the device's changes on the other side, including the
 * byte right next to the boundary. A store to any byte the device did not
 * change near the boundary (a whole-vector or whole-word store of a
 * partly changed block) faults. Every k from 1 to 4095, both ways round. */
static void test_into_stores_only_changed_bytes(void **state)
{
	(void)state;
	size_t psz = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *area;

	assert_true(psz >= PAGE);
	area = mmap(NULL, 2 * psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(area != MAP_FAILED);
	rng_state = 4;
	fill_random(buf_base, PAGE);

	FOR_EACH_ISA(isa)
	{
		for (unsigned k = 1; k < PAGE; k++) {
			for (int writable_first = 0; writable_first <= 1; writable_first++) {
				uint8_t *dst = area + psz - k;
				size_t from = writable_first ? 0 : k, to = writable_first ? k : PAGE;

				/* changes: about half the bytes on the writable side, and
				 * always the one next to the boundary */
				memcpy(buf_hi, buf_base, PAGE);
				for (size_t i = from; i < to; i++)
					if (rng_below(2))
						buf_hi[i] = other_than(buf_base[i]);
				size_t edge = writable_first ? k - 1 : k;
				buf_hi[edge] = other_than(buf_base[edge]);

				assert_int_equal(mprotect(area, 2 * psz, PROT_READ | PROT_WRITE), 0);
				fill_random(dst, PAGE);
				memcpy(buf_ref, dst, PAGE);
				size_t want = ref_into(buf_ref, buf_base, buf_hi);
				assert_int_equal(mprotect(writable_first ? area + psz : area, psz,
							  PROT_READ),
						 0);

				long ret = into_or_fault(dst, buf_base, buf_hi);
				if (ret < 0)
					fail_msg("%s stored to an unchanged byte: boundary at %u, "
						 "changes %s it",
						 merge_isa_name(isa), k,
						 writable_first ? "before" : "after");
				assert_int_equal(ret, (long)want);
				assert_memory_equal(dst, buf_ref, PAGE);
			}
		}
	}
	munmap(area, 2 * psz);
}

/* ---- all implementations agree with the spec and with each other -------------- */

static uint64_t test_seed(void)
{
	const char *env = getenv("MERGE_TEST_SEED");
	uint64_t seed;

	if (env && *env)
		seed = strtoull(env, NULL, 0);
	else
		seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	print_message("merge test seed %" PRIu64 " (replay: MERGE_TEST_SEED=%" PRIu64 ")\n",
		      seed, seed);
	return seed;
}

/* Inputs of one random case, at random offsets from 64-byte alignment. */
struct random_case {
	uint8_t *base, *lo, *hi, *dst;
};

static struct random_case make_case(unsigned percent)
{
	struct random_case c = {
		.base = buf_base + rng_below(SLACK),
		.lo = buf_lo + rng_below(SLACK),
		.hi = buf_hi + rng_below(SLACK),
		.dst = buf_dst + rng_below(SLACK),
	};

	fill_random(c.base, PAGE);
	change_bytes(c.lo, c.base, percent);
	change_bytes(c.hi, c.base, percent);
	/* some bytes changed by both to the same value: not conflicts */
	for (size_t i = 0; i < PAGE; i++)
		if (c.lo[i] != c.base[i] && c.hi[i] != c.base[i] && rng_below(4) == 0)
			c.hi[i] = c.lo[i];
	return c;
}

static void test_all_isas_identical(void **state)
{
	(void)state;
	static const unsigned densities[] = { 0, 1, 10, 50, 100 };
	static uint8_t want[PAGE], got[PAGE + SLACK], dst0[PAGE], want_dst[PAGE];
	unsigned isas_run = 0;

	rng_state = test_seed();
	FOR_EACH_ISA(isa) isas_run++;
	print_message("implementations compared: %u\n", isas_run);

	for (size_t d = 0; d < sizeof(densities) / sizeof(densities[0]); d++) {
		for (int round = 0; round < 200; round++) {
			struct random_case c = make_case(densities[d]);
			uint8_t *out = got + rng_below(SLACK);
			size_t want_conflicts = ref_page3(want, c.base, c.lo, c.hi);

			fill_random(c.dst, PAGE);
			memcpy(dst0, c.dst, PAGE);
			memcpy(want_dst, c.dst, PAGE);
			size_t want_changed = ref_into(want_dst, c.base, c.hi);

			FOR_EACH_ISA(isa)
			{
				size_t n = merge_page3(out, c.base, c.lo, c.hi);

				if (n != want_conflicts || memcmp(out, want, PAGE) != 0)
					fail_msg("merge_page3 %s differs from the spec: density %u%%, "
						 "round %d, conflicts %zu want %zu",
						 merge_isa_name(isa), densities[d], round, n,
						 want_conflicts);

				memcpy(c.dst, dst0, PAGE);
				n = merge_page_into(c.dst, c.base, c.hi);
				if (n != want_changed || memcmp(c.dst, want_dst, PAGE) != 0)
					fail_msg("merge_page_into %s differs from the spec: density "
						 "%u%%, round %d, changed %zu want %zu",
						 merge_isa_name(isa), densities[d], round, n,
						 want_changed);
			}
		}
	}
}

/* Every misalignment of each pointer on its own, the others aligned. */
static void test_unaligned_pointers(void **state)
{
	(void)state;
	static uint8_t want[PAGE], want_dst[PAGE], dst0[PAGE];

	rng_state = 5;
	FOR_EACH_ISA(isa)
	{
		for (unsigned which = 0; which < 4; which++) {
			for (unsigned off = 1; off < SLACK; off++) {
				uint8_t *base = buf_base + (which == 0 ? off : 0);
				uint8_t *lo = buf_lo + (which == 1 ? off : 0);
				uint8_t *hi = buf_hi + (which == 2 ? off : 0);
				uint8_t *out = buf_out + (which == 3 ? off : 0);

				fill_random(base, PAGE);
				change_bytes(lo, base, 10);
				change_bytes(hi, base, 10);
				size_t n = ref_page3(want, base, lo, hi);
				assert_int_equal(merge_page3(out, base, lo, hi), n);
				assert_memory_equal(out, want, PAGE);

				fill_random(dst0, PAGE);
				memcpy(want_dst, dst0, PAGE);
				n = ref_into(want_dst, base, hi);
				memcpy(out, dst0, PAGE);
				assert_int_equal(merge_page_into(out, base, hi), n);
				assert_memory_equal(out, want_dst, PAGE);
			}
		}
	}
}

/* ---- merge_pages3: the batch form ------------------------------------------ */

/* The smallest batch that merge_pages3 may stream (non-temporal stores). */
#define STREAM_PAGES (MERGE_STREAM_MIN_BYTES / PAGE)

static uint8_t *map_batch(size_t bytes)
{
	uint8_t *p = mmap(NULL, bytes + SLACK, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	assert_true(p != MAP_FAILED);
	return p;
}

enum batch_out { OUT_SEPARATE, OUT_IS_LO, OUT_IS_HI };

/* merge_pages3 over npages contiguous pages against merge_page3 page by
 * page, for every ISA the CPU supports: same bytes, same conflict total.
 * OUT_SEPARATE puts out at out_off bytes past a 64-byte boundary (0: the
 * streaming case once the batch is large enough); OUT_IS_LO / OUT_IS_HI
 * merge in place into a copy of that replica. */
static void check_batch(size_t npages, size_t out_off, enum batch_out where)
{
	size_t bytes = npages * PAGE;
	uint8_t *base = map_batch(bytes), *lo = map_batch(bytes), *hi = map_batch(bytes);
	uint8_t *out_area = map_batch(bytes), *want = map_batch(bytes);

	fill_random(base, bytes);
	for (size_t off = 0; off < bytes; off += PAGE) {
		change_bytes(lo + off, base + off, 20);
		change_bytes(hi + off, base + off, 20);
	}
	FOR_EACH_ISA(isa)
	{
		size_t want_conflicts = 0, got;
		uint8_t *out = out_area + out_off;

		for (size_t off = 0; off < bytes; off += PAGE)
			want_conflicts += merge_page3(want + off, base + off, lo + off, hi + off);
		assert_true(want_conflicts > 0);

		switch (where) {
		case OUT_SEPARATE:
			memset(out, 0xee, bytes);
			got = merge_pages3(out, base, lo, hi, npages);
			break;
		case OUT_IS_LO:
			memcpy(out, lo, bytes);
			got = merge_pages3(out, base, out, hi, npages);
			break;
		case OUT_IS_HI:
		default:
			memcpy(out, hi, bytes);
			got = merge_pages3(out, base, lo, out, npages);
			break;
		}
		if (got != want_conflicts || memcmp(out, want, bytes) != 0)
			fail_msg("merge_pages3 %s, %zu pages, out %s at +%zu: conflicts %zu want "
				 "%zu, bytes %s",
				 merge_isa_name(isa), npages,
				 where == OUT_SEPARATE ? "separate" : where == OUT_IS_LO ? "== lo"
											  : "== hi",
				 out_off, got, want_conflicts,
				 memcmp(out, want, bytes) ? "differ" : "equal");
	}
	munmap(base, bytes + SLACK);
	munmap(lo, bytes + SLACK);
	munmap(hi, bytes + SLACK);
	munmap(out_area, bytes + SLACK);
	munmap(want, bytes + SLACK);
}

static void test_pages3_small_batch_equals_page_by_page(void **state)
{
	(void)state;
	static const size_t counts[] = { 1, 2, 7 };
	static const size_t offsets[] = { 0, 1, 32, 63 };

	rng_state = 7;
	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
		for (size_t o = 0; o < sizeof(offsets) / sizeof(offsets[0]); o++)
			check_batch(counts[c], offsets[o], OUT_SEPARATE);
}

/* At and above the streaming threshold, with out aligned (streamed) and
 * not (ordinary stores); and just below it. */
static void test_pages3_large_batch_equals_page_by_page(void **state)
{
	(void)state;
	rng_state = 8;
	check_batch(STREAM_PAGES, 0, OUT_SEPARATE);
	check_batch(STREAM_PAGES + 3, 0, OUT_SEPARATE);
	check_batch(STREAM_PAGES, 1, OUT_SEPARATE);
	check_batch(STREAM_PAGES, 32, OUT_SEPARATE);
	check_batch(STREAM_PAGES - 1, 0, OUT_SEPARATE);
}

static void test_pages3_out_may_alias_lo_or_hi(void **state)
{
	(void)state;
	rng_state = 9;
	check_batch(3, 0, OUT_IS_LO);
	check_batch(3, 0, OUT_IS_HI);
	check_batch(STREAM_PAGES, 0, OUT_IS_LO);
	check_batch(STREAM_PAGES, 0, OUT_IS_HI);
}

static void test_pages3_empty_batch_stores_nothing(void **state)
{
	(void)state;
	FOR_EACH_ISA(isa)
	{
		memset(buf_out, 0xee, PAGE);
		assert_int_equal(merge_pages3(buf_out, buf_base, buf_lo, buf_hi, 0), 0);
		for (size_t i = 0; i < PAGE; i++)
			assert_int_equal(buf_out[i], 0xee);
	}
}

/* ---- merge_page_differs ------------------------------------------------------------ */

static void test_differs_finds_any_single_byte(void **state)
{
	(void)state;
	rng_state = 6;
	fill_random(buf_base, PAGE);
	memcpy(buf_lo + 1, buf_base, PAGE);
	assert_false(merge_page_differs(buf_base, buf_lo + 1));
	for (size_t i = 0; i < PAGE; i += 97) {
		buf_lo[1 + i] ^= 0x80;
		assert_true(merge_page_differs(buf_base, buf_lo + 1));
		buf_lo[1 + i] ^= 0x80;
	}
	buf_lo[PAGE] ^= 1; /* the last byte */
	assert_true(merge_page_differs(buf_base, buf_lo + 1));
}

/* merge_page_masked stores exactly the masked bytes, whatever the mask's
 * shape: empty, full, whole words, single bits, random. */
static void test_masked_stores_exactly_the_masked_bytes(void **state)
{
	(void)state;
	static uint8_t dst[PAGE], want[PAGE], src[PAGE], mask[PAGE / 8];
	for (int round = 0; round < 400; round++) {
		for (unsigned i = 0; i < PAGE; i++) {
			dst[i] = (uint8_t)rng_next();
			src[i] = (uint8_t)rng_next();
		}
		for (unsigned w = 0; w < PAGE / 8; w++) {
			unsigned shape = round % 4 == 3 ? rng_below(4) : (unsigned)round % 4;
			mask[w] = shape == 0 ? 0 : shape == 1 ? 0xff : shape == 2 ? (uint8_t)(1u << rng_below(8))
										 : (uint8_t)rng_next();
			if (round % 8 == 5 && w / 8 % 2)
				mask[w] = 0xff; /* runs of eight full words */
		}
		memcpy(want, dst, PAGE);
		size_t want_n = 0;
		for (unsigned i = 0; i < PAGE; i++) {
			if (mask[i / 8] >> (i % 8) & 1) {
				want[i] = src[i];
				want_n++;
			}
		}
		assert_int_equal(merge_page_masked(dst, src, mask), want_n);
		assert_memory_equal(dst, want, PAGE);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scalar_is_always_available),
		cmocka_unit_test(test_set_isa_refuses_what_the_cpu_lacks),
		cmocka_unit_test(test_merge_keeps_both_writers),
		cmocka_unit_test(test_same_byte_higher_owner_wins),
		cmocka_unit_test(test_same_value_from_both_is_no_conflict),
		cmocka_unit_test(test_untouched_page_merges_to_base),
		cmocka_unit_test(test_page3_counts_conflicting_bytes),
		cmocka_unit_test(test_page3_everything_conflicts),
		cmocka_unit_test(test_page3_out_may_alias_lo_or_hi),
		cmocka_unit_test(test_into_keeps_cpu_bytes_and_applies_device_bytes),
		cmocka_unit_test(test_into_device_wins_a_byte_both_wrote),
		cmocka_unit_test(test_into_counts_every_byte_the_device_changed),
		cmocka_unit_test(test_into_unchanged_page_is_never_stored),
		cmocka_unit_test(test_into_stores_only_changed_bytes),
		cmocka_unit_test(test_all_isas_identical),
		cmocka_unit_test(test_unaligned_pointers),
		cmocka_unit_test(test_pages3_small_batch_equals_page_by_page),
		cmocka_unit_test(test_pages3_large_batch_equals_page_by_page),
		cmocka_unit_test(test_pages3_out_may_alias_lo_or_hi),
		cmocka_unit_test(test_pages3_empty_batch_stores_nothing),
		cmocka_unit_test(test_differs_finds_any_single_byte),
		cmocka_unit_test(test_masked_stores_exactly_the_masked_bytes),
	};

	return cmocka_run_group_tests(tests, remember_isa, restore_isa);
}
