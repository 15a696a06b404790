/* Acquire/release (lrc.c), scenario by scenario, as DESIGN §1 and §3.3
 * state them; bytes move through the same harness as the model test. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>

#include "lrc_harness.h"

static struct harness *new_harness(uint32_t npages, unsigned flags)
{
	struct harness *h = calloc(1, sizeof(*h));
	assert_non_null(h);
	h->npages = npages;
	h->flags = flags;
	for (uint32_t b = 0; b < npages * PG; b++)
		h->file[b] = (uint8_t)(b * 7 + 3);
	harness_open(h);
	return h;
}

static void free_harness(struct harness *h)
{
	harness_close(h);
	lrc_plan_free(&h->plan);
	free(h);
}

static void cpu_store(struct harness *h, uint32_t byte, uint8_t v)
{
	h->file[byte] = v;
	lrc_cpu_wrote(&h->region, byte / PG, 1);
}

static void launch(struct harness *h, int d)
{
	assert_int_equal(lrc_launch(&h->region, d, &h->plan), 0);
	run_plan(h);
}

static void sync_dev(struct harness *h, int d)
{
	assert_int_equal(lrc_sync_diff(&h->region, d, &h->plan), 0);
	run_plan(h);
	assert_int_equal(lrc_sync(&h->region, d, &h->plan), 0);
	run_plan(h);
}

/* Counts the pages of each action kind in the plan (without running it). */
static uint64_t planned(const struct harness *h, enum lrc_action_kind kind)
{
	uint64_t n = 0;
	for (size_t i = 0; i < h->plan.count; i++)
		if (h->plan.items[i].kind == kind)
			n += h->plan.items[i].npages;
	return n;
}

static void test_first_launch_uploads_every_page_in_one_range(void **state)
{
	(void)state;
	struct harness *h = new_harness(8, LRC_SHARED | LRC_WRITABLE);
	assert_int_equal(lrc_launch(&h->region, 0, &h->plan), 0);
	assert_int_equal(h->plan.count, 1);
	assert_int_equal(h->plan.items[0].kind, LRC_UPLOAD);
	assert_int_equal(h->plan.items[0].npages, 8);
	run_plan(h);
	assert_memory_equal(h->dev[0], h->file, 8 * PG);
	assert_memory_equal(h->base[0], h->file, 8 * PG);
	free_harness(h);
}

static void test_launch_sees_cpu_stores_and_uploads_only_their_pages(void **state)
{
	(void)state;
	struct harness *h = new_harness(8, LRC_SHARED | LRC_WRITABLE);
	launch(h, 0);
	sync_dev(h, 0);
	cpu_store(h, 2 * PG + 5, 0xee);
	cpu_store(h, 3 * PG + 1, 0xdd);
	cpu_store(h, 6 * PG, 0xcc);
	assert_int_equal(lrc_launch(&h->region, 0, &h->plan), 0);
	assert_int_equal(planned(h, LRC_UPLOAD), 3);
	assert_int_equal(planned(h, LRC_PUBLISH), 3);
	run_plan(h);
	assert_int_equal(h->dev[0][2 * PG + 5], 0xee);
	assert_int_equal(h->dev[0][3 * PG + 1], 0xdd);
	assert_int_equal(h->dev[0][6 * PG], 0xcc);
	free_harness(h);
}

/* A page the devices forget (its copy there is not the CPU's bytes) comes
 * up afresh at the next launch, and no CPU write is reported for it. */
static void test_forgotten_page_is_uploaded_again_without_a_cpu_version(void **state)
{
	(void)state;
	struct harness *h = new_harness(8, LRC_SHARED | LRC_WRITABLE);
	launch(h, 0);
	sync_dev(h, 0);
	h->dev[0][5 * PG + 3] ^= 0xff; /* the device's copy differs from the CPU's */
	h->base[0][5 * PG + 3] ^= 0xff;
	uint32_t before = tsvt_version(&h->region.tsvt, TSVT_CPU, 5);
	assert_int_equal(lrc_devices_forget_pages(&h->region, 5, 1, &h->plan), 0);
	run_plan(h);
	assert_int_equal(lrc_launch(&h->region, 0, &h->plan), 0);
	assert_int_equal(planned(h, LRC_UPLOAD), 1);
	assert_int_equal(planned(h, LRC_PUBLISH), 0);
	run_plan(h);
	assert_memory_equal(h->dev[0], h->file, 8 * PG);
	assert_int_equal(tsvt_version(&h->region.tsvt, TSVT_CPU, 5), before);
	free_harness(h);
}

static void test_release_bumps_only_dirty_pages(void **state)
{
	(void)state;
	struct harness *h = new_harness(8, LRC_SHARED | LRC_WRITABLE);
	cpu_store(h, 4 * PG, 1);
	assert_int_equal(lrc_cpu_release(&h->region, &h->plan), 0);
	run_plan(h);
	for (uint64_t p = 0; p < 8; p++)
		assert_int_equal(tsvt_version(&h->region.tsvt, TSVT_CPU, p), p == 4 ? 2 : 1);
	assert_int_equal(h->published[4], 1);
	assert_int_equal(h->published[3], 0);
	free_harness(h);
}

static void test_clean_launch_and_sync_do_nothing(void **state)
{
	(void)state;
	struct harness *h = new_harness(8, LRC_SHARED | LRC_WRITABLE);
	launch(h, 0);
	sync_dev(h, 0);
	assert_int_equal(lrc_launch(&h->region, 0, &h->plan), 0);
	assert_int_equal(h->plan.count, 0);
	assert_int_equal(lrc_sync_diff(&h->region, 0, &h->plan), 0);
	assert_int_equal(planned(h, LRC_DIFF), 8); /* the device compares; nothing moves */
	lrc_plan_reset(&h->plan);
	assert_int_equal(lrc_sync(&h->region, 0, &h->plan), 0);
	assert_int_equal(h->plan.count, 0);
	free_harness(h);
}

static void test_sync_shows_kernel_writes_and_keeps_concurrent_cpu_bytes(void **state)
{
	(void)state; /* the paper's false-sharing case: halves of the same page */
	struct harness *h = new_harness(2, LRC_SHARED | LRC_WRITABLE);
	launch(h, 0);
	for (uint32_t i = 0; i < PG / 2; i++)
		h->dev[0][i] = 0x11; /* the kernel writes the first half */
	for (uint32_t i = PG / 2; i < PG; i++)
		cpu_store(h, i, 0x22); /* the CPU the second, meanwhile */
	sync_dev(h, 0);
	for (uint32_t i = 0; i < PG; i++)
		assert_int_equal(h->file[i], i < PG / 2 ? 0x11 : 0x22);
	/* the device did not see the CPU half: it is stale there now */
	assert_int_equal(lrc_launch(&h->region, 0, &h->plan), 0);
	assert_int_equal(planned(h, LRC_UPLOAD), 1);
	run_plan(h);
	assert_memory_equal(h->dev[0], h->file, PG);
	free_harness(h);
}

static void test_same_byte_device_beats_cpu(void **state)
{
	(void)state;
	struct harness *h = new_harness(1, LRC_SHARED | LRC_WRITABLE);
	launch(h, 0);
	h->dev[0][100] = 0xaa;
	cpu_store(h, 100, 0xbb);
	assert_int_equal(h->file[100], 0xbb); /* the CPU's value until the sync */
	sync_dev(h, 0);
	assert_int_equal(h->file[100], 0xaa); /* the kernel's after */
	free_harness(h);
}

static void test_cpu_stores_during_a_kernel_are_invisible_to_it(void **state)
{
	(void)state;
	struct harness *h = new_harness(1, LRC_SHARED | LRC_WRITABLE);
	uint8_t before = h->file[7];
	launch(h, 0);
	cpu_store(h, 7, (uint8_t)(before + 1));
	assert_int_equal(lrc_cpu_release(&h->region, &h->plan), 0); /* even an msync */
	run_plan(h);
	assert_int_equal(h->dev[0][7], before);
	free_harness(h);
}

/* Two devices write the same byte between the same syncs: device 1 (owner
 * 2) beats device 0 (owner 1) whichever syncs first. */
static void check_higher_device_wins(bool lower_syncs_first)
{
	struct harness *h = new_harness(1, LRC_SHARED | LRC_WRITABLE);
	launch(h, 0);
	launch(h, 1);
	h->dev[0][9] = 0x10;
	h->dev[1][9] = 0x20;
	h->dev[0][10] = 0x30; /* a byte only device 0 wrote */
	sync_dev(h, lower_syncs_first ? 0 : 1);
	sync_dev(h, lower_syncs_first ? 1 : 0);
	assert_int_equal(h->file[9], 0x20);
	assert_int_equal(h->file[10], 0x30);
	free_harness(h);
}

static void test_higher_device_wins_when_lower_syncs_first(void **state)
{
	(void)state;
	check_higher_device_wins(true);
}

static void test_higher_device_wins_when_higher_syncs_first(void **state)
{
	(void)state;
	check_higher_device_wins(false);
}

/* Device 1 releases byte i; the CPU then changes it (ordered after device
 * 1's write), and in a later CPU epoch changes it back to device 1's value.
 * The CPU's last write is concurrent with device 0's, so device 0 wins.
 * Values alone cannot tell: the record must be refreshed at the release. */
static void test_cpu_rewrite_after_higher_release_lets_lower_device_win(void **state)
{
	(void)state;
	struct harness *h = new_harness(1, LRC_SHARED | LRC_WRITABLE);
	launch(h, 0);
	launch(h, 1);
	h->dev[1][5] = 0x77;
	sync_dev(h, 1);
	assert_int_equal(h->file[5], 0x77);
	cpu_store(h, 5, 0x01);
	assert_int_equal(lrc_cpu_release(&h->region, &h->plan), 0);
	assert_int_equal(planned(h, LRC_PROTECT_REFRESH), 1);
	run_plan(h);
	cpu_store(h, 5, 0x77);
	h->dev[0][5] = 0x55;
	sync_dev(h, 0);
	assert_int_equal(h->file[5], 0x55);
	free_harness(h);
}

static void test_second_launch_merges_cpu_bytes_into_unsynced_device_page(void **state)
{
	(void)state;
	struct harness *h = new_harness(1, LRC_SHARED | LRC_WRITABLE);
	launch(h, 0);
	h->dev[0][1] = 0x91;                   /* kernel 1, not synced */
	cpu_store(h, 2, 0x92);                 /* CPU, different byte */
	cpu_store(h, 1, 0x93);                 /* CPU, same byte: loses to kernel 1 */
	assert_int_equal(lrc_launch(&h->region, 0, &h->plan), 0); /* kernel 2 */
	assert_int_equal(planned(h, LRC_REBASE), 1);
	assert_int_equal(planned(h, LRC_UPLOAD), 0); /* never copied over it */
	run_plan(h);
	assert_int_equal(h->dev[0][1], 0x91);
	assert_int_equal(h->dev[0][2], 0x92);
	sync_dev(h, 0);
	assert_int_equal(h->file[1], 0x91);
	assert_int_equal(h->file[2], 0x92);
	free_harness(h);
}

static void test_read_only_region_keeps_no_base_and_diffs_nothing(void **state)
{
	(void)state;
	struct harness *h = new_harness(4, LRC_SHARED);
	launch(h, 0);
	assert_false(h->region.epoch_open[0]);
	assert_int_equal(lrc_sync_diff(&h->region, 0, &h->plan), 0);
	assert_int_equal(h->plan.count, 0);
	free_harness(h);
}

static void test_private_region_publishes_nothing(void **state)
{
	(void)state;
	struct harness *h = new_harness(2, LRC_WRITABLE);
	cpu_store(h, 3, 1);
	launch(h, 0);
	h->dev[0][4] = 2;
	sync_dev(h, 0);
	assert_int_equal(h->published[0], 0);
	assert_int_equal(h->file[4], 2); /* the process's own replica has it */
	free_harness(h);
}

static void test_file_change_by_another_process_makes_devices_stale(void **state)
{
	(void)state;
	struct harness *h = new_harness(4, LRC_SHARED | LRC_WRITABLE);
	launch(h, 0);
	sync_dev(h, 0);
	h->file[2 * PG + 8] = 0x42; /* written by another process */
	assert_int_equal(lrc_file_changed(&h->region, 2, 1, &h->plan), 0);
	run_plan(h);
	assert_int_equal(lrc_launch(&h->region, 0, &h->plan), 0);
	assert_int_equal(planned(h, LRC_UPLOAD), 1);
	run_plan(h);
	assert_int_equal(h->dev[0][2 * PG + 8], 0x42);
	free_harness(h);
}

static void test_partial_unmap_frees_device_pages_and_stops_acquiring_them(void **state)
{
	(void)state;
	struct harness *h = new_harness(8, LRC_SHARED | LRC_WRITABLE);
	launch(h, 0);
	launch(h, 2);
	sync_dev(h, 0);
	sync_dev(h, 2);
	assert_int_equal(lrc_drop(&h->region, 2, 3, &h->plan), 0);
	assert_int_equal(planned(h, LRC_FREE), 6);
	run_plan(h);
	assert_false(tsvt_holds(&h->region.tsvt, 0, 3));
	cpu_store(h, 3 * PG, 9); /* a write() to the now unmapped part */
	cpu_store(h, 6 * PG, 9);
	assert_int_equal(lrc_launch(&h->region, 0, &h->plan), 0);
	assert_int_equal(planned(h, LRC_UPLOAD), 1); /* page 6 only */
	free_harness(h);
}

/* Cost follows the work: a 1 GiB region with nothing dirty plans nothing
 * at a launch, and a few dirty pages plan just those. */
static void test_launch_plan_follows_dirty_pages_not_region_size(void **state)
{
	(void)state;
	struct lrc_region r;
	struct lrc_plan plan = {0};
	uint64_t npages = 1u << 18;
	assert_int_equal(lrc_region_init(&r, npages, LRC_SHARED | LRC_WRITABLE), 0);
	assert_int_equal(lrc_launch(&r, 0, &plan), 0);
	assert_int_equal(plan.count, 1); /* the first upload, one range */
	lrc_plan_reset(&plan);
	assert_int_equal(lrc_sync_diff(&r, 0, &plan), 0);
	assert_int_equal(plan.count, 1);
	lrc_plan_reset(&plan);
	assert_int_equal(lrc_sync(&r, 0, &plan), 0);
	assert_int_equal(lrc_launch(&r, 0, &plan), 0);
	assert_int_equal(plan.count, 0);
	lrc_cpu_wrote(&r, 1000, 4);
	lrc_cpu_wrote(&r, 200000, 1);
	assert_int_equal(lrc_launch(&r, 0, &plan), 0);
	/* publish 1000..1003, 200000; upload the same */
	assert_int_equal(plan.count, 4);
	lrc_plan_free(&plan);
	lrc_region_destroy(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_launch_uploads_every_page_in_one_range),
		cmocka_unit_test(test_launch_sees_cpu_stores_and_uploads_only_their_pages),
		cmocka_unit_test(test_forgotten_page_is_uploaded_again_without_a_cpu_version),
		cmocka_unit_test(test_release_bumps_only_dirty_pages),
		cmocka_unit_test(test_clean_launch_and_sync_do_nothing),
		cmocka_unit_test(test_sync_shows_kernel_writes_and_keeps_concurrent_cpu_bytes),
		cmocka_unit_test(test_same_byte_device_beats_cpu),
		cmocka_unit_test(test_cpu_stores_during_a_kernel_are_invisible_to_it),
		cmocka_unit_test(test_higher_device_wins_when_lower_syncs_first),
		cmocka_unit_test(test_higher_device_wins_when_higher_syncs_first),
		cmocka_unit_test(test_cpu_rewrite_after_higher_release_lets_lower_device_win),
		cmocka_unit_test(test_second_launch_merges_cpu_bytes_into_unsynced_device_page),
		cmocka_unit_test(test_read_only_region_keeps_no_base_and_diffs_nothing),
		cmocka_unit_test(test_private_region_publishes_nothing),
		cmocka_unit_test(test_file_change_by_another_process_makes_devices_stale),
		cmocka_unit_test(test_partial_unmap_frees_device_pages_and_stops_acquiring_them),
		cmocka_unit_test(test_launch_plan_follows_dirty_pages_not_region_size),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
