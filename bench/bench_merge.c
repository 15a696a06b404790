/* Benchmark of the 3-way page merge (runtime/merge.h).
 *
 * 1. One 4 KiB page, inputs in cache: ns/page of merge_page3 and
 *    merge_page_into for every ISA the CPU supports, at 0, 1, 10, 50 and
 *    100% of bytes changed on each side (random positions, fixed seed);
 *    the median of several runs of many calls each.
 * 2. 256 MiB of pages streamed from memory (base, lo, hi and out separate,
 *    pre-faulted, 10% changed): page throughput against memcpy of the same
 *    256 MiB in the same run, repetitions interleaved, the best of each
 *    (medians printed too). The headline is merge_pages3, one call over all
 *    pages, which streams out with non-temporal stores: ~4 cache lines
 *    moved per line written (3 reads, 1 write), against memcpy's ~3 (glibc's
 *    memcpy of 256 MiB on the machine this was written on ran no faster
 *    than a loop of ordinary stores), so the memory-bound ratio is ~0.75.
 *    Also shown: merge_page3 page by page, which adds out's read-for-
 *    ownership (~5 lines, ratio ~0.6), and the in-place merge (out == hi),
 *    which needs no read-for-ownership either.
 *
 * Prints a table and `BENCH <name> <value> <unit>` lines for scripts.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "merge.h"

#define PAGE MERGE_PAGE_BYTES
#define RUNS 15             /* runs per cell, median taken */
#define RUN_TARGET_NS 1500000.0 /* about 1.5 ms per run */
#define STREAM_BYTES (256ull << 20)
#define STREAM_PAGES (STREAM_BYTES / PAGE)
#define STREAM_REPS 7
#define SEED 0x6a1a2019ull

static const unsigned densities[] = { 0, 1, 10, 50, 100 };
#define DENSITY_COUNT (sizeof(densities) / sizeof(densities[0]))
#define HEADLINE_DENSITY 2 /* 10% */

#define ISA_COUNT 3 /* enum merge_isa runs 0 .. ISA_COUNT - 1 */

static volatile size_t sink;

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static uint64_t rng_state;

static uint64_t rng_next(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void fill_random(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i += 8) {
		uint64_t v = rng_next();

		memcpy(p + i, &v, 8);
	}
}

/* page = base with about percent% of its bytes changed, at random
 * positions, each to a value other than base's. n is a multiple of 4. */
static void change_bytes(uint8_t *page, const uint8_t *base, size_t n, unsigned percent)
{
	uint32_t threshold = (uint32_t)(percent * 65536u / 100u);

	memcpy(page, base, n);
	if (percent == 0)
		return;
	for (size_t i = 0; i < n; i += 4) {
		uint64_t r = rng_next();

		for (unsigned j = 0; j < 4; j++) {
			if (percent == 100 || ((r >> (16 * j)) & 0xffff) < threshold)
				page[i + j] = (uint8_t)(base[i + j] ^ (1 + rng_next() % 255));
		}
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- 1. one page in cache ---------------------------------------------- */

static uint8_t c_base[PAGE] __attribute__((aligned(64)));
static uint8_t c_lo[PAGE] __attribute__((aligned(64)));
static uint8_t c_hi[PAGE] __attribute__((aligned(64)));
static uint8_t c_out[PAGE] __attribute__((aligned(64)));
static uint8_t c_dst[PAGE] __attribute__((aligned(64)));

enum bench_fn { FN_PAGE3, FN_INTO };

static double time_calls(enum bench_fn fn, size_t reps)
{
	size_t acc = 0;
	double t0 = now_ns();

	if (fn == FN_PAGE3)
		for (size_t r = 0; r < reps; r++)
			acc += merge_page3(c_out, c_base, c_lo, c_hi);
	else
		for (size_t r = 0; r < reps; r++)
			acc += merge_page_into(c_dst, c_base, c_hi);
	sink += acc;
	return now_ns() - t0;
}

/* ns per call, median of RUNS runs of about RUN_TARGET_NS each. */
static double ns_per_page(enum bench_fn fn)
{
	double runs[RUNS];
	double probe = time_calls(fn, 200) / 200; /* also warms the caches */
	size_t reps = (size_t)(RUN_TARGET_NS / (probe > 1 ? probe : 1));

	if (reps < 100)
		reps = 100;
	for (int r = 0; r < RUNS; r++)
		runs[r] = time_calls(fn, reps) / (double)reps;
	return median(runs, RUNS);
}

/* ---- 2. streamed from memory ---------------------------------------------- */

static uint8_t *map_stream_buffer(void)
{
	uint8_t *p = mmap(NULL, STREAM_BYTES, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	if (p == MAP_FAILED) {
		fprintf(stderr, "bench_merge: mmap of %llu MiB: %s\n", STREAM_BYTES >> 20,
			strerror(errno));
		exit(1);
	}
	return p;
}

static double time_stream_merge(uint8_t *out, const uint8_t *base, const uint8_t *lo,
				const uint8_t *hi)
{
	size_t acc = 0;
	double t0 = now_ns();

	for (size_t p = 0; p < STREAM_PAGES; p++) {
		size_t off = p * PAGE;

		acc += merge_page3(out + off, base + off, lo + off, hi + off);
	}
	sink += acc;
	return now_ns() - t0;
}

static double time_stream_batch(uint8_t *out, const uint8_t *base, const uint8_t *lo,
				const uint8_t *hi)
{
	double t0 = now_ns();

	sink += merge_pages3(out, base, lo, hi, STREAM_PAGES);
	return now_ns() - t0;
}

static double time_stream_memcpy(uint8_t *dst, const uint8_t *src)
{
	double t0 = now_ns();

	memcpy(dst, src, STREAM_BYTES);
	__asm__ volatile("" : : "r"(dst) : "memory");
	return now_ns() - t0;
}

static double gbps(double bytes, double ns)
{
	return bytes / ns; /* bytes per ns = GB/s */
}

int main(void)
{
	enum merge_isa best = merge_get_isa();
	double table[2][ISA_COUNT][DENSITY_COUNT];
	int have[ISA_COUNT];

	printf("merge benchmark: best ISA on this CPU: %s\n\n", merge_isa_name(best));

	/* 1. cache-resident */
	rng_state = SEED;
	fill_random(c_base, PAGE);
	for (size_t d = 0; d < DENSITY_COUNT; d++) {
		change_bytes(c_lo, c_base, PAGE, densities[d]);
		change_bytes(c_hi, c_base, PAGE, densities[d]);
		memcpy(c_dst, c_base, PAGE);
		for (size_t i = 0; i < ISA_COUNT; i++) {
			have[i] = merge_set_isa((enum merge_isa)i) == 0;
			if (!have[i])
				continue;
			table[FN_PAGE3][i][d] = ns_per_page(FN_PAGE3);
			table[FN_INTO][i][d] = ns_per_page(FN_INTO);
		}
	}

	printf("one 4 KiB page, inputs in cache: ns/page, median of %d runs\n", RUNS);
	printf("(x%% = share of bytes changed on each side, random positions)\n");
	printf("%-16s %-9s", "function", "isa");
	for (size_t d = 0; d < DENSITY_COUNT; d++)
		printf(" %7u%%", densities[d]);
	printf("\n");
	for (int fn = FN_PAGE3; fn <= FN_INTO; fn++) {
		for (size_t i = 0; i < ISA_COUNT; i++) {
			if (!have[i])
				continue;
			printf("%-16s %-9s", fn == FN_PAGE3 ? "merge_page3" : "merge_page_into",
			       merge_isa_name((enum merge_isa)i));
			for (size_t d = 0; d < DENSITY_COUNT; d++)
				printf(" %8.1f", table[fn][i][d]);
			printf("\n");
		}
	}
	printf("\n");

	/* 2. streamed: merge_pages3 in one call and merge_page3 page by page,
	 * against one memcpy */
	merge_set_isa(best);
	uint8_t *base = map_stream_buffer(), *lo = map_stream_buffer();
	uint8_t *hi = map_stream_buffer(), *out = map_stream_buffer();
	uint8_t *inplace = map_stream_buffer();

	rng_state = SEED + 1;
	fill_random(base, STREAM_BYTES);
	change_bytes(lo, base, STREAM_BYTES, 10);
	change_bytes(hi, base, STREAM_BYTES, 10);
	memset(out, 0, STREAM_BYTES);
	memcpy(inplace, hi, STREAM_BYTES); /* stays a valid hi: the merge is idempotent */

	double t_batch[STREAM_REPS], t_merge[STREAM_REPS], t_copy[STREAM_REPS];
	double t_inplace[STREAM_REPS];
	for (int r = 0; r < STREAM_REPS; r++) {
		t_batch[r] = time_stream_batch(out, base, lo, hi);
		t_merge[r] = time_stream_merge(out, base, lo, hi);
		t_copy[r] = time_stream_memcpy(out, base);
		t_inplace[r] = time_stream_merge(inplace, base, lo, inplace);
	}
	double batch_med = median(t_batch, STREAM_REPS), merge_med = median(t_merge, STREAM_REPS);
	double copy_med = median(t_copy, STREAM_REPS), inplace_med = median(t_inplace, STREAM_REPS);
	/* median() sorted them: [0] is the best run */
	double batch_best = t_batch[0], merge_best = t_merge[0], copy_best = t_copy[0];
	double inplace_best = t_inplace[0];
	double ratio = copy_best / batch_best; /* (pages/s merged) / (pages/s copied) */

	printf("256 MiB of pages streamed from memory, 10%% changed, %s, %d interleaved runs\n",
	       merge_isa_name(best), STREAM_REPS);
	printf("(traffic: lines moved per line out: merge_pages3 4 = 3 reads + a non-temporal\n"
	       " write; merge_page3 5 = 3 reads + read-for-ownership + write-back; memcpy 3;\n"
	       " merge in place 4 as out's line was just read)\n");
	printf("%-30s %9s %9s %12s %12s\n", "", "best ms", "median ms", "pages GB/s",
	       "traffic GB/s");
	printf("%-30s %9.2f %9.2f %12.2f %12.2f\n", "merge_pages3 (one call)", batch_best / 1e6,
	       batch_med / 1e6, gbps((double)STREAM_BYTES, batch_best),
	       gbps(4.0 * (double)STREAM_BYTES, batch_best));
	printf("%-30s %9.2f %9.2f %12.2f %12.2f\n", "merge_page3 (page by page)",
	       merge_best / 1e6, merge_med / 1e6, gbps((double)STREAM_BYTES, merge_best),
	       gbps(5.0 * (double)STREAM_BYTES, merge_best));
	printf("%-30s %9.2f %9.2f %12.2f %12.2f\n", "memcpy", copy_best / 1e6, copy_med / 1e6,
	       gbps((double)STREAM_BYTES, copy_best), gbps(3.0 * (double)STREAM_BYTES, copy_best));
	printf("%-30s %9.2f %9.2f %12.2f %12.2f\n", "merge_page3 (out == hi)",
	       inplace_best / 1e6, inplace_med / 1e6, gbps((double)STREAM_BYTES, inplace_best),
	       gbps(4.0 * (double)STREAM_BYTES, inplace_best));
	printf("merge/memcpy page rate: merge_pages3 %.3f best, %.3f median; "
	       "merge_page3 %.3f best, %.3f median; in place %.3f best\n\n",
	       ratio, copy_med / batch_med, copy_best / merge_best, copy_med / merge_med,
	       copy_best / inplace_best);

	printf("BENCH merge_ns_per_page %.1f ns\n", table[FN_PAGE3][best][HEADLINE_DENSITY]);
	printf("BENCH merge_into_ns_per_page %.1f ns\n", table[FN_INTO][best][HEADLINE_DENSITY]);
	printf("BENCH merge_stream_vs_memcpy %.3f x\n", ratio);

	munmap(base, STREAM_BYTES);
	munmap(lo, STREAM_BYTES);
	munmap(hi, STREAM_BYTES);
	munmap(out, STREAM_BYTES);
	munmap(inplace, STREAM_BYTES);
	return 0;
}
