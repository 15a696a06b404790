/* The executor of device actions (runtime/device.h) over an in-memory
 * backend: the bytes each replica ends with, what crosses the "bus", and
 * pages past the end of the file. */
#include <errno.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "device.h"
#include "queued_diffs.h"

#define PG 4096

/* The page test_device_rebase_keeps_stores_of_a_running_kernel rebases,
 * and the store its "kernel" makes right after the rebase reads a word. */
static struct {
	_Alignas(8) uint8_t dev[PG];
	_Alignas(8) uint8_t base[PG];
	_Alignas(8) uint8_t cpu[PG];
	bool stored[PG / 8];
} race;

static void store_after_load(unsigned long long *w)
{
	uint8_t *word = (uint8_t *)w;
	size_t i = (size_t)(word - race.dev) / 8;
	if (word < race.dev || word >= race.dev + PG || i % 3 != 1 || race.stored[i])
		return;
	race.stored[i] = true;
	__atomic_store_n(&word[5], (uint8_t)0x33, __ATOMIC_RELAXED);
}
#define GAIA_AFTER_WORD_LOAD(w) store_after_load(w)
#include "../../shim/kernels/diff_pages.h"

#define NPAGES 8

/* Injected failures: how many of the next calls of each kind fail. */
static int fail_download, fail_diff, fail_fetch;

static bool fail_now(int *remaining)
{
	if (*remaining <= 0)
		return false;
	(*remaining)--;
	return true;
}

struct fake_replica {
	uint8_t dev[NPAGES * PG], base[NPAGES * PG];
	uint64_t uploaded_pages, downloaded_pages, diffed_pages, fetches;
	struct queued_diffs queued; /* diff_start's answers */
};

static int fake_upload(void *rep, unsigned to, uint64_t first, uint64_t n, const void *src)
{
	struct fake_replica *r = rep;
	if (to & DEVICE_REPLICA)
		memcpy(r->dev + first * PG, src, n * PG);
	if (to & DEVICE_BASE)
		memcpy(r->base + first * PG, src, n * PG);
	r->uploaded_pages += n;
	return 0;
}

static int fake_download(void *rep, unsigned from, uint64_t first, uint64_t n, void *dst)
{
	struct fake_replica *r = rep;
	if (fail_now(&fail_download))
		return -EIO;
	memcpy(dst, (from == DEVICE_BASE ? r->base : r->dev) + first * PG, n * PG);
	r->downloaded_pages += n;
	return 0;
}

static int fake_commit(void *rep, uint64_t first, uint64_t n)
{
	struct fake_replica *r = rep;
	memcpy(r->base + first * PG, r->dev + first * PG, n * PG);
	return 0;
}

static int fake_diff(void *rep, uint64_t first, uint64_t n,
		     void (*changed)(uint64_t, uint64_t, void *), void *arg)
{
	struct fake_replica *r = rep;
	if (fail_now(&fail_diff))
		return -EIO;
	if (queued_diff_take(&r->queued, first, n, changed, arg))
		return 0;
	r->diffed_pages += n;
	for (uint64_t p = first; p < first + n; p++)
		if (memcmp(r->dev + p * PG, r->base + p * PG, PG))
			changed(p, 1, arg);
	return 0;
}

static int fake_diff_start(void *rep, uint64_t first, uint64_t n)
{
	struct fake_replica *r = rep;
	return queued_diff_start(&r->queued, r->dev, r->base, PG, first, n);
}

static void fake_diff_drop(void *rep)
{
	((struct fake_replica *)rep)->queued.nstarted = 0;
}

static int fake_fetch_changes(void *rep, const uint64_t *pages, uint64_t n, void *dev_out,
			      uint8_t *mask_out)
{
	struct fake_replica *r = rep;
	if (fail_now(&fail_fetch))
		return -EIO;
	r->fetches++;
	for (uint64_t i = 0; i < n; i++) {
		const uint8_t *d = r->dev + pages[i] * PG, *b = r->base + pages[i] * PG;
		memcpy((uint8_t *)dev_out + i * PG, d, PG);
		uint8_t *m = mask_out + i * (PG / 8);
		memset(m, 0, PG / 8);
		for (unsigned k = 0; k < PG; k++)
			if (d[k] != b[k])
				m[k / 8] |= (uint8_t)(1u << (k % 8));
	}
	r->downloaded_pages += n;
	return 0;
}

/* Both ways of bringing a sync's changes down: replica and base pages, or
 * (scattered pages) gathered with their masks. */
static const struct device_ops fake_ops = {
	.upload = fake_upload,
	.download = fake_download,
	.commit = fake_commit,
	.diff = fake_diff,
	.diff_start = fake_diff_start,
	.diff_drop = fake_diff_drop,
};
static const struct device_ops fake_ops_gather = {
	.upload = fake_upload,
	.download = fake_download,
	.commit = fake_commit,
	.diff = fake_diff,
	.fetch_changes = fake_fetch_changes,
	.diff_start = fake_diff_start,
	.diff_drop = fake_diff_drop,
};
static bool gather;

struct world {
	struct lrc_region engine;
	struct lrc_plan plan;
	struct device_exec x;
	uint8_t cpu[NPAGES * PG];
	struct fake_replica rep[2];
	uint64_t published;
};

static void count_publish(void *arg, uint64_t first, uint64_t n)
{
	(void)first;
	((struct world *)arg)->published += n;
}

static struct world *world_new(void)
{
	struct world *w = calloc(1, sizeof(*w));
	assert_non_null(w);
	assert_int_equal(lrc_region_init(&w->engine, NPAGES, LRC_WRITABLE | LRC_SHARED), 0);
	w->x.ops = gather ? &fake_ops_gather : &fake_ops;
	w->x.cpu = w->cpu;
	w->x.cpu_store = w->cpu;
	w->x.writable = true;
	w->x.valid_pages = NPAGES;
	w->x.publish = count_publish;
	w->x.arg = w;
	w->x.replica[0] = &w->rep[0];
	w->x.replica[1] = &w->rep[1];
	memset(w->rep, 0xa5, sizeof(w->rep)); /* device memory starts as garbage */
	for (int d = 0; d < 2; d++) {
		w->rep[d].uploaded_pages = w->rep[d].downloaded_pages = w->rep[d].diffed_pages = 0;
		w->rep[d].fetches = 0;
		w->rep[d].queued.nstarted = w->rep[d].queued.taken = 0;
	}
	return w;
}

static void world_free(struct world *w)
{
	device_exec_destroy(&w->x);
	lrc_plan_free(&w->plan);
	lrc_region_destroy(&w->engine);
	free(w);
}

static void launch(struct world *w, int d)
{
	assert_int_equal(lrc_launch(&w->engine, d, &w->plan), 0);
	assert_int_equal(device_exec_run(&w->x, &w->engine, &w->plan), 0);
}

static void sync_dev(struct world *w, int d)
{
	assert_int_equal(lrc_sync_diff(&w->engine, d, &w->plan), 0);
	assert_int_equal(device_exec_run(&w->x, &w->engine, &w->plan), 0);
	assert_int_equal(lrc_sync(&w->engine, d, &w->plan), 0);
	assert_int_equal(device_exec_run(&w->x, &w->engine, &w->plan), 0);
}

static void cpu_store(struct world *w, size_t at, uint8_t v)
{
	w->cpu[at] = v;
	lrc_cpu_wrote(&w->engine, at / PG, 1);
}

static void test_launch_uploads_the_cpu_bytes_and_a_base(void **state)
{
	(void)state;
	struct world *w = world_new();
	for (size_t i = 0; i < sizeof(w->cpu); i++)
		w->cpu[i] = (uint8_t)(i * 13);
	launch(w, 0);
	assert_memory_equal(w->rep[0].dev, w->cpu, sizeof(w->cpu));
	assert_memory_equal(w->rep[0].base, w->cpu, sizeof(w->cpu));
	assert_int_equal(w->rep[0].uploaded_pages, NPAGES);
	world_free(w);
}

static void test_sync_keeps_cpu_and_device_bytes_of_one_page(void **state)
{
	(void)state;
	struct world *w = world_new();
	launch(w, 0);
	w->rep[0].dev[3 * PG + 10] = 0x77; /* the kernel */
	cpu_store(w, 3 * PG + 11, 0x66);    /* the CPU, same page, meanwhile */
	sync_dev(w, 0);
	assert_int_equal(w->cpu[3 * PG + 10], 0x77);
	assert_int_equal(w->cpu[3 * PG + 11], 0x66);
	/* Only the changed page travelled (replica and base of it, or the
	 * page with its mask). */
	assert_int_equal(w->rep[0].downloaded_pages, 2);
	assert_int_equal(w->x.merged_pages, 1);
	assert_int_equal(w->published, 1);
	world_free(w);
}

static void test_next_launch_uploads_only_what_the_cpu_wrote(void **state)
{
	(void)state;
	struct world *w = world_new();
	launch(w, 0);
	sync_dev(w, 0);
	uint64_t before = w->rep[0].uploaded_pages;
	cpu_store(w, 5 * PG, 1);
	cpu_store(w, 6 * PG + 9, 2);
	assert_int_equal(lrc_cpu_release(&w->engine, &w->plan), 0);
	assert_int_equal(device_exec_run(&w->x, &w->engine, &w->plan), 0);
	launch(w, 0);
	assert_int_equal(w->rep[0].uploaded_pages - before, 2);
	assert_int_equal(w->rep[0].dev[6 * PG + 9], 2);
	world_free(w);
}

static void test_same_byte_device_wins(void **state)
{
	(void)state;
	struct world *w = world_new();
	launch(w, 0);
	w->rep[0].dev[100] = 'G';
	cpu_store(w, 100, 'C');
	sync_dev(w, 0);
	assert_int_equal(w->cpu[100], 'G');
	world_free(w);
}

/* The device changed bytes of every other page, the CPU one byte of
 * page 2; returns the world after the launch and the device's writes. */
static struct world *scattered_changes(void)
{
	struct world *w = world_new();
	launch(w, 0);
	for (int p = 0; p < NPAGES; p += 2)
		w->rep[0].dev[p * PG + 7] = (uint8_t)(p + 1);
	cpu_store(w, 2 * PG + 8, 0x99);
	return w;
}

static void assert_scattered_changes_merged(struct world *w)
{
	for (int p = 0; p < NPAGES; p += 2)
		assert_int_equal(w->cpu[p * PG + 7], p + 1);
	assert_int_equal(w->cpu[2 * PG + 8], 0x99);
}

/* Scattered changes come down gathered: each page once, with its mask. */
static void test_scattered_changes_each_cross_once(void **state)
{
	(void)state;
	struct world *w = scattered_changes();
	sync_dev(w, 0);
	assert_scattered_changes_merged(w);
	assert_int_equal(w->rep[0].downloaded_pages, gather ? NPAGES / 2 : NPAGES);
	assert_int_equal(w->x.merged_pages, NPAGES / 2);
	world_free(w);
}

static void test_higher_device_wins_in_either_sync_order(void **state)
{
	(void)state;
	for (int order = 0; order < 2; order++) {
		struct world *w = world_new();
		launch(w, 0);
		launch(w, 1);
		w->rep[0].dev[PG + 5] = 'A';
		w->rep[1].dev[PG + 5] = 'B';
		w->rep[0].dev[PG + 6] = 'a'; /* only device 0 */
		sync_dev(w, order ? 1 : 0);
		sync_dev(w, order ? 0 : 1);
		assert_int_equal(w->cpu[PG + 5], 'B');
		assert_int_equal(w->cpu[PG + 6], 'a');
		world_free(w);
	}
}

static void test_rebase_merges_cpu_bytes_into_an_open_epoch(void **state)
{
	(void)state;
	struct world *w = world_new();
	launch(w, 0);
	w->rep[0].dev[2 * PG] = 0x11; /* first kernel, not synced */
	cpu_store(w, 2 * PG + 1, 0x22);
	launch(w, 0); /* second launch: rebase, never a plain copy */
	assert_int_equal(w->rep[0].dev[2 * PG], 0x11);
	assert_int_equal(w->rep[0].dev[2 * PG + 1], 0x22);
	sync_dev(w, 0);
	assert_int_equal(w->cpu[2 * PG], 0x11);
	assert_int_equal(w->cpu[2 * PG + 1], 0x22);
	world_free(w);
}

static void test_pages_past_the_file_are_never_touched_on_the_cpu(void **state)
{
	(void)state;
	struct world *w = world_new();
	w->x.valid_pages = 6;
	memset(w->cpu + 6 * PG, 0xcc, 2 * PG); /* stands for memory that would fault */
	launch(w, 0);
	assert_int_equal(w->rep[0].dev[6 * PG], 0); /* zeros, not the CPU's bytes */
	w->rep[0].dev[7 * PG] = 9;
	w->rep[0].dev[5 * PG] = 8;
	sync_dev(w, 0);
	assert_int_equal(w->cpu[5 * PG], 8);
	assert_int_equal(w->cpu[7 * PG], 0xcc);
	world_free(w);
}

static void test_a_transient_failure_costs_a_retry_not_data(void **state)
{
	(void)state;
	struct world *w = scattered_changes();
	fail_download = fail_fetch = fail_diff = 1;
	sync_dev(w, 0);
	assert_scattered_changes_merged(w);
	world_free(w);
}

static void test_a_diff_that_keeps_failing_compares_every_page(void **state)
{
	(void)state;
	struct world *w = scattered_changes();
	fail_diff = 1000;
	sync_dev(w, 0);
	fail_diff = 0;
	assert_scattered_changes_merged(w);
	world_free(w);
}

/* Merges that fail at one sync (the error is reported) leave the device's
 * changes uncommitted: the next sync brings them down. (A page the CPU
 * changes in between is uploaded whole at the next launch, and the
 * device's unmerged bytes of that page are lost: README, limits.) */
static void test_a_failed_merge_comes_down_at_the_next_sync(void **state)
{
	(void)state;
	struct world *w = world_new();
	launch(w, 0);
	for (int p = 0; p < NPAGES; p += 2)
		w->rep[0].dev[p * PG + 7] = (uint8_t)(p + 1);
	assert_int_equal(lrc_sync_diff(&w->engine, 0, &w->plan), 0);
	assert_int_equal(device_exec_run(&w->x, &w->engine, &w->plan), 0);
	assert_int_equal(lrc_sync(&w->engine, 0, &w->plan), 0);
	fail_download = fail_fetch = 1000;
	assert_int_equal(device_exec_run(&w->x, &w->engine, &w->plan), -EIO);
	fail_download = fail_fetch = 0;
	assert_int_equal(w->cpu[4 * PG + 7], 0); /* not there yet */
	cpu_store(w, 3 * PG + 8, 0x99);
	launch(w, 0);
	sync_dev(w, 0);
	for (int p = 0; p < NPAGES; p += 2)
		assert_int_equal(w->cpu[p * PG + 7], p + 1);
	assert_int_equal(w->cpu[3 * PG + 8], 0x99);
	world_free(w);
}

/* The shim's rebase kernel body (shim/kernels/diff_pages.h) runs while a
 * kernel of the program may still store into the page: a store that lands
 * between the rebase's read of a word and its replacement must survive,
 * and stay a change against the base (the next sync's diff finds it). The
 * body's word load is made to store a byte right after reading, as such a
 * kernel would, on every third word. */
#define RACE_OLD 0x11
#define RACE_CPU 0x22
#define RACE_KERNEL 0x33

static bool stored_by_kernel(unsigned byte)
{
	return (byte / 8) % 3 == 1 && byte % 8 == 5;
}

static void test_device_rebase_keeps_stores_of_a_running_kernel(void **state)
{
	(void)state;
	memset(race.dev, RACE_OLD, PG);
	memset(race.base, RACE_OLD, PG);
	memset(race.cpu, RACE_CPU, PG);
	memset(race.stored, 0, sizeof(race.stored));
	for (unsigned w = 0; w < GAIA_DIFF_WORDS_PER_PAGE; w++)
		gaia_rebase_word_at((unsigned long long *)race.dev, (unsigned long long *)race.base, 0,
				    (const unsigned long long *)race.cpu, w);
	unsigned lost = 0, hidden = 0;
	for (unsigned k = 0; k < PG; k++) {
		if (stored_by_kernel(k)) {
			lost += race.dev[k] != RACE_KERNEL;
			hidden += race.base[k] == race.dev[k];
		} else {
			assert_int_equal(race.dev[k], RACE_CPU);
			assert_int_equal(race.base[k], RACE_CPU);
		}
	}
	if (lost || hidden)
		fail_msg("%u stores of a running kernel lost, %u equal to their base (a diff would miss them)",
			 lost, hidden);
}

/* A sync queues its comparisons, waits without the lock, then releases
 * (lrc_proto_sync): the release takes the answers, the pages as they were
 * when the comparison ran. In a snapshot release, what a running kernel
 * writes after that stays a change against the base: the next sync finds
 * it. The merge comes down by copies, never gathered (a kernel, which the
 * running ones may leave no room for). */
static void test_a_snapshot_takes_the_queued_comparison(void **state)
{
	(void)state;
	struct world *w = world_new();
	launch(w, 0);
	for (int p = 0; p < NPAGES; p += 2) /* scattered: a full sync would gather them */
		w->rep[0].dev[p * PG + 3] = (uint8_t)(0x10 * p + 1);
	assert_int_equal(lrc_sync_diff(&w->engine, 0, &w->plan), 0);
	device_exec_start_diffs(&w->x, 0, &w->plan);
	assert_int_equal(w->plan.count, 0);
	assert_int_equal(w->rep[0].queued.nstarted, 1);
	w->rep[0].dev[5 * PG + 3] = 0x51; /* a running kernel, after the comparison */
	assert_int_equal(lrc_sync_diff(&w->engine, 0, &w->plan), 0);
	assert_int_equal(device_exec_run_diffs(&w->x, 0, &w->engine, &w->plan), 0);
	assert_int_equal(w->rep[0].queued.taken, 1);
	assert_int_equal(w->rep[0].diffed_pages, 0);
	assert_int_equal(lrc_sync_snapshot(&w->engine, 0, &w->plan), 0);
	assert_int_equal(device_exec_run(&w->x, &w->engine, &w->plan), 0);
	assert_int_equal(w->rep[0].fetches, 0);
	for (int p = 0; p < NPAGES; p += 2)
		assert_int_equal(w->cpu[p * PG + 3], 0x10 * p + 1);
	assert_int_equal(w->cpu[5 * PG + 3], 0); /* not compared yet */
	sync_dev(w, 0);
	assert_int_equal(w->cpu[5 * PG + 3], 0x51);
	for (int p = 0; p < NPAGES; p += 2)
		assert_int_equal(w->cpu[p * PG + 3], 0x10 * p + 1);
	world_free(w);
}

/* Answers queued for one sync never serve another release (a munmap's
 * own, device_exec_run): that one compares anew, and sees what the
 * kernels wrote since. */
static void test_a_queued_answer_never_serves_another_release(void **state)
{
	(void)state;
	struct world *w = world_new();
	launch(w, 0);
	w->rep[0].dev[1 * PG] = 0x11;
	assert_int_equal(lrc_sync_diff(&w->engine, 0, &w->plan), 0);
	device_exec_start_diffs(&w->x, 0, &w->plan);
	w->rep[0].dev[4 * PG] = 0x44;
	sync_dev(w, 0);
	assert_int_equal(w->rep[0].queued.taken, 0);
	assert_int_equal(w->rep[0].queued.nstarted, 0);
	assert_int_equal(w->cpu[1 * PG], 0x11);
	assert_int_equal(w->cpu[4 * PG], 0x44);
	/* A sync of device 1 leaves device 0's answers alone; device 0's
	 * release drops the ones it did not take, even with no diff at all. */
	launch(w, 0);
	assert_int_equal(lrc_sync_diff(&w->engine, 0, &w->plan), 0);
	device_exec_start_diffs(&w->x, 0, &w->plan);
	assert_int_equal(w->rep[0].queued.nstarted, 1);
	assert_int_equal(lrc_sync_diff(&w->engine, 1, &w->plan), 0); /* device 1: nothing open */
	assert_int_equal(device_exec_run_diffs(&w->x, 1, &w->engine, &w->plan), 0);
	assert_int_equal(w->rep[0].queued.nstarted, 1);
	assert_int_equal(device_exec_run_diffs(&w->x, 0, &w->engine, &w->plan), 0);
	assert_int_equal(w->rep[0].queued.taken, 0);
	assert_int_equal(w->rep[0].queued.nstarted, 0);
	world_free(w);
}

/* A sync whose release never took its answers (the region's epoch was
 * closed meanwhile) leaves none for the next sync: that one queues its
 * own, as the pages are now. */
static void test_a_later_sync_never_takes_an_earlier_ones_answer(void **state)
{
	(void)state;
	struct world *w = world_new();
	launch(w, 0);
	w->rep[0].dev[3 * PG] = 0x31;
	assert_int_equal(lrc_sync_diff(&w->engine, 0, &w->plan), 0);
	device_exec_start_diffs(&w->x, 0, &w->plan);
	w->rep[0].dev[6 * PG] = 0x61; /* after the first sync's comparison */
	assert_int_equal(lrc_sync_diff(&w->engine, 0, &w->plan), 0);
	device_exec_start_diffs(&w->x, 0, &w->plan);
	assert_int_equal(w->rep[0].queued.nstarted, 1);
	assert_int_equal(lrc_sync_diff(&w->engine, 0, &w->plan), 0);
	assert_int_equal(device_exec_run_diffs(&w->x, 0, &w->engine, &w->plan), 0);
	assert_int_equal(w->rep[0].queued.taken, 1);
	assert_int_equal(lrc_sync(&w->engine, 0, &w->plan), 0);
	assert_int_equal(device_exec_run(&w->x, &w->engine, &w->plan), 0);
	assert_int_equal(w->cpu[3 * PG], 0x31);
	assert_int_equal(w->cpu[6 * PG], 0x61);
	world_free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_launch_uploads_the_cpu_bytes_and_a_base),
		cmocka_unit_test(test_sync_keeps_cpu_and_device_bytes_of_one_page),
		cmocka_unit_test(test_next_launch_uploads_only_what_the_cpu_wrote),
		cmocka_unit_test(test_same_byte_device_wins),
		cmocka_unit_test(test_scattered_changes_each_cross_once),
		cmocka_unit_test(test_higher_device_wins_in_either_sync_order),
		cmocka_unit_test(test_rebase_merges_cpu_bytes_into_an_open_epoch),
		cmocka_unit_test(test_pages_past_the_file_are_never_touched_on_the_cpu),
		cmocka_unit_test(test_a_transient_failure_costs_a_retry_not_data),
		cmocka_unit_test(test_a_diff_that_keeps_failing_compares_every_page),
		cmocka_unit_test(test_a_failed_merge_comes_down_at_the_next_sync),
		cmocka_unit_test(test_device_rebase_keeps_stores_of_a_running_kernel),
		cmocka_unit_test(test_a_snapshot_takes_the_queued_comparison),
		cmocka_unit_test(test_a_queued_answer_never_serves_another_release),
		cmocka_unit_test(test_a_later_sync_never_takes_an_earlier_ones_answer),
	};
	int failed = cmocka_run_group_tests_name("replica and base downloaded", tests, NULL, NULL);
	gather = true;
	failed += cmocka_run_group_tests_name("changes gathered with masks", tests, NULL, NULL);
	return failed;
}
