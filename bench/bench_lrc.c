/* Engine benchmark: version-table size and the cost of a release+acquire
 * cycle (a launch and a sync) on a 1 GiB region, with nothing, 1% and 100%
 * of its pages dirty. Only the engine runs: the plans are built and not
 * executed, so this is the bookkeeping the shim adds to every launch and
 * sync, not the bytes it moves.
 *
 * Prints a table and lines "BENCH <name> <value> <unit>".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lrc.h"

#define REGION_PAGES (1ull << 18) /* 1 GiB of 4 KiB pages */

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "bench_lrc: %s failed: %s\n", what, strerror(-rc));
	exit(1);
}

struct cycle_cost {
	double median_us, release_us, acquire_us;
	size_t actions;
};

/* Launch (CPU release + device acquire) and sync (device release + CPU
 * acquire) with `dirty` pages written on each side, spread over the region
 * by a fixed stride pattern. */
static struct cycle_cost measure_cycle(uint64_t dirty, int reps)
{
	struct lrc_region r;
	struct lrc_plan plan = {0};
	int rc = lrc_region_init(&r, REGION_PAGES, LRC_SHARED | LRC_WRITABLE);
	if (rc)
		die("lrc_region_init", rc);
	if ((rc = lrc_launch(&r, 0, &plan)) || (rc = lrc_sync(&r, 0, &plan)))
		die("first launch", rc);

	double *total = calloc((size_t)reps, sizeof(double));
	double *rel = calloc((size_t)reps, sizeof(double));
	double *acq = calloc((size_t)reps, sizeof(double));
	uint64_t stride = dirty ? REGION_PAGES / dirty : 0;
	size_t actions = 0;
	for (int i = 0; i < reps; i++) {
		for (uint64_t k = 0; k < dirty; k++)
			lrc_cpu_wrote(&r, (k * stride + (uint64_t)i) % REGION_PAGES, 1);
		lrc_plan_reset(&plan);
		double t0 = now_us();
		if ((rc = lrc_launch(&r, 0, &plan)))
			die("lrc_launch", rc);
		double t1 = now_us();
		actions = plan.count;
		lrc_plan_reset(&plan);
		if ((rc = lrc_sync_diff(&r, 0, &plan)))
			die("lrc_sync_diff", rc);
		for (uint64_t k = 0; k < dirty; k++)
			lrc_device_wrote(&r, 0, (k * stride + (uint64_t)i + 1) % REGION_PAGES, 1);
		lrc_plan_reset(&plan);
		if ((rc = lrc_sync(&r, 0, &plan)))
			die("lrc_sync", rc);
		double t2 = now_us();
		total[i] = t2 - t0;
		acq[i] = t1 - t0;
		rel[i] = t2 - t1;
		actions += plan.count;
	}
	qsort(total, (size_t)reps, sizeof(double), cmp_double);
	qsort(rel, (size_t)reps, sizeof(double), cmp_double);
	qsort(acq, (size_t)reps, sizeof(double), cmp_double);
	struct cycle_cost c = {total[reps / 2], rel[reps / 2], acq[reps / 2], actions};
	free(total);
	free(rel);
	free(acq);
	lrc_plan_free(&plan);
	lrc_region_destroy(&r);
	return c;
}

int main(void)
{
	/* Metadata: file + CPU + one device holding all of a 1 GiB region. */
	struct lrc_region r;
	struct lrc_plan plan = {0};
	int rc = lrc_region_init(&r, REGION_PAGES, LRC_SHARED | LRC_WRITABLE);
	if (rc || (rc = lrc_launch(&r, 0, &plan)))
		die("setup", rc);
	double bytes_one = (double)tsvt_metadata_bytes(&r.tsvt) / (double)REGION_PAGES;
	lrc_plan_reset(&plan);
	if ((rc = lrc_device_acquire(&r, 1, 0, REGION_PAGES / 10, &plan)))
		die("second device", rc);
	double bytes_two = (double)tsvt_metadata_bytes(&r.tsvt) / (double)REGION_PAGES;
	lrc_plan_free(&plan);
	lrc_region_destroy(&r);

	printf("engine benchmark: 1 GiB region (%llu pages of 4 KiB)\n\n",
	       (unsigned long long)REGION_PAGES);
	printf("version table, bytes per page\n");
	printf("  file + CPU + 1 device (holding all)         %8.3f\n", bytes_one);
	printf("  + a 2nd device holding 10%% of the pages      %8.3f\n\n", bytes_two);

	static const struct {
		const char *label, *bench;
		uint64_t dirty;
		int reps;
	} cases[] = {
		{"clean", "release_clean_1g_us", 0, 2001},
		{"1% dirty", "release_1pct_dirty_1g_us", REGION_PAGES / 100, 101},
		{"100% dirty", "release_all_dirty_1g_us", REGION_PAGES, 11},
	};
	struct cycle_cost cost[3];
	printf("launch + sync (CPU release, device acquire, device release, CPU acquire),\n"
	       "pages dirty on each side, median\n");
	printf("  %-12s %12s %14s %14s %10s\n", "case", "cycle us", "launch us", "sync us", "actions");
	for (int i = 0; i < 3; i++) {
		cost[i] = measure_cycle(cases[i].dirty, cases[i].reps);
		printf("  %-12s %12.2f %14.2f %14.2f %10zu\n", cases[i].label, cost[i].median_us,
		       cost[i].acquire_us, cost[i].release_us, cost[i].actions);
	}
	printf("\n");
	printf("BENCH tsvt_bytes_per_page %.3f bytes\n", bytes_one);
	for (int i = 0; i < 3; i++)
		printf("BENCH %s %.2f us\n", cases[i].bench, cost[i].median_us);
	return 0;
}
