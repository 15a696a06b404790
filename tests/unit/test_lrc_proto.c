/* The protocol's launch and sync sequences (lrc_proto.c), driven against a
 * host of plain buffers: each region is the byte harness of the engine's
 * tests, its plans carried out by the shim's executor (device_exec). The
 * host checks what the sequences promise it: no wait for the device with
 * its lock held, a wait before bytes running kernels may use are replaced,
 * refused launches, forgotten copies, and device bytes equal to the CPU's
 * after every launch. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>

#include "lrc_harness.h"
#include "lrc_proto.h"

#define NREG 3

struct fake_region {
	struct harness *h;
	char *name; /* on the heap: freed when the region goes */
	bool present;
	bool holds[NDEV];
	int replica_err;      /* ensure_replica's answer for a new replica */
	bool in_place;        /* the devices read it in place (LRC_IN_PLACE) */
	enum lrc_want want;
	int fail_launch_runs; /* this many launch plans fail (-EIO) */
	unsigned launch_runs, fail_run_no; /* launch plans carried out; the one (1-based) that fails */
	unsigned launched, released, learned;
	unsigned diff_starts, diff_runs_started; /* LRC_RUN_DIFF_START, _STARTED runs */
	uint64_t uploaded; /* pages of UPLOAD actions carried out or failed */
};

struct fake {
	struct fake_region r[NREG];
	bool locked;
	unsigned waits, settles, settles_rebased, restarts;
	char waited_for[64];
	int lie;             /* needs_idle answers "no" this many times first */
	bool rebase_on_device; /* needs_idle: a rebase keeps running kernels' stores */
	int unmap_during_wait; /* region index removed while the launch waits, or -1 */
	int unmap_during_diffs; /* region index removed while a sync awaits its diffs, or -1 */
	unsigned awaits;       /* await_diffs calls */
	/* A kernel still running stores this byte (at kernel_at, in region 0
	 * on device 0) while the sync awaits its comparisons: 0, none. */
	uint8_t kernel_byte;
	uint32_t kernel_at;
	bool creating_waits;   /* making a replica would wait for the device */
	enum lrc_wait last_why;
	bool created_busy;     /* a replica was made while the device was busy */
	struct lrc_devices *devs;
};

static void f_lock(void *ctx)
{
	struct fake *f = ctx;
	assert_false(f->locked);
	f->locked = true;
}

static void f_unlock(void *ctx)
{
	struct fake *f = ctx;
	assert_true(f->locked);
	f->locked = false;
}

static struct fake *fake_of; /* the callbacks without ctx find it here */

static void *f_next(void *ctx, void *prev)
{
	struct fake *f = ctx;
	assert_true(f->locked);
	int i = prev ? (int)((struct fake_region *)prev - f->r) + 1 : 0;
	for (; i < NREG; i++)
		if (f->r[i].present)
			return &f->r[i];
	return NULL;
}

static struct lrc_region *f_engine(void *region)
{
	return &((struct fake_region *)region)->h->region;
}

static struct lrc_plan *f_plan(void *region)
{
	return &((struct fake_region *)region)->h->plan;
}

static const char *f_name(void *region)
{
	return ((struct fake_region *)region)->name;
}

static bool f_holds(void *region, int dev)
{
	return ((struct fake_region *)region)->holds[dev];
}

static enum lrc_want f_wants(void *ctx, void *region)
{
	(void)ctx;
	return ((struct fake_region *)region)->want;
}

static void f_learn(void *region)
{
	assert_true(fake_of->locked);
	((struct fake_region *)region)->learned++;
}

static int f_ensure_replica(void *region, int dev)
{
	struct fake_region *r = region;
	assert_true(fake_of->locked);
	if (r->holds[dev])
		return 0;
	if (r->in_place)
		return LRC_IN_PLACE;
	if (r->replica_err)
		return r->replica_err;
	if (fake_of->creating_waits && fake_of->devs->busy[dev])
		fake_of->created_busy = true;
	r->holds[dev] = true;
	return 0;
}

static bool f_creating_needs_idle(void *region, int dev)
{
	struct fake_region *r = region;
	assert_true(fake_of->locked);
	return fake_of->creating_waits && !r->holds[dev] && !r->replica_err;
}

/* The shim's rule for GAIA_RUNNING_KERNELS=shared: an upload into a
 * writable region waits; a rebase waits unless the device does it in
 * place. */
static bool f_needs_idle(void *region, int dev, unsigned kinds, uint64_t pages)
{
	struct fake_region *r = region;
	(void)dev;
	(void)pages;
	assert_true(fake_of->locked);
	if (fake_of->lie > 0) {
		fake_of->lie--;
		return false;
	}
	if ((kinds & LRC_MOVES_UPLOAD) && (r->h->flags & LRC_WRITABLE))
		return true;
	return (kinds & LRC_MOVES_REBASE) && !fake_of->rebase_on_device;
}

static int f_run_plan(void *region, int dev, enum lrc_run why)
{
	struct fake_region *r = region;
	assert_true(fake_of->locked);
	for (size_t i = 0; i < r->h->plan.count; i++)
		if (r->h->plan.items[i].kind == LRC_UPLOAD)
			r->uploaded += r->h->plan.items[i].npages;
	if (why == LRC_RUN_LAUNCH)
		r->launch_runs++;
	if (why == LRC_RUN_DIFF_START) {
		r->diff_starts++;
		if (r->h->exec_mode != HARNESS_BYTES)
			device_exec_start_diffs(&r->h->x, dev, &r->h->plan);
		lrc_plan_reset(&r->h->plan);
		return 0;
	}
	if (why == LRC_RUN_DIFF_STARTED) {
		r->diff_runs_started++;
		run_plan_as(r->h, dev);
		return 0;
	}
	if (why == LRC_RUN_LAUNCH && (r->fail_launch_runs > 0 || r->launch_runs == r->fail_run_no)) {
		if (r->fail_launch_runs > 0)
			r->fail_launch_runs--;
		lrc_plan_reset(&r->h->plan);
		return -EIO;
	}
	run_plan(r->h);
	return 0;
}

static void f_wait_device(void *ctx, int dev, const char *name, enum lrc_wait why)
{
	struct fake *f = ctx;
	(void)dev;
	assert_false(f->locked); /* the point: never with the lock held */
	f->waits++;
	f->last_why = why;
	snprintf(f->waited_for, sizeof(f->waited_for), "%s", name);
	if (f->unmap_during_wait >= 0) {
		/* munmap on another thread, while the lock is free */
		struct fake_region *r = &f->r[f->unmap_during_wait];
		r->present = false;
		free(r->name);
		r->name = NULL;
		f->unmap_during_wait = -1;
	}
}

static void f_restart(void *ctx)
{
	struct fake *f = ctx;
	assert_true(f->locked);
	f->restarts++;
}

static void f_launched(void *ctx, void *region, int dev, int moved)
{
	struct fake_region *r = region;
	(void)ctx;
	assert_true(fake_of->locked);
	assert_true(r->holds[dev] || r->in_place);
	assert_true(moved == 0 || !r->in_place);
	r->launched++;
}

static void f_released(void *ctx, void *region, int dev, int rc, int moved)
{
	(void)ctx;
	(void)dev;
	(void)rc;
	(void)moved;
	assert_true(fake_of->locked);
	((struct fake_region *)region)->released++;
}

static int f_settle(void *ctx, int dev, const char *rebased)
{
	struct fake *f = ctx;
	(void)dev;
	assert_false(f->locked);
	f->settles++;
	f->settles_rebased += rebased != NULL;
	return 0;
}

static void f_await_diffs(void *ctx, int dev)
{
	struct fake *f = ctx;
	assert_false(f->locked); /* the point: never with the lock held */
	f->awaits++;
	if (f->kernel_byte)
		f->r[0].h->dev[dev][f->kernel_at] = f->kernel_byte;
	if (f->unmap_during_diffs >= 0) {
		struct fake_region *r = &f->r[f->unmap_during_diffs];
		r->present = false;
		free(r->name);
		r->name = NULL;
		f->unmap_during_diffs = -1;
	}
}

static const struct lrc_host host_template = {
	.lock = f_lock,
	.unlock = f_unlock,
	.next = f_next,
	.engine = f_engine,
	.plan = f_plan,
	.name = f_name,
	.holds = f_holds,
	.wants = f_wants,
	.learn = f_learn,
	.ensure_replica = f_ensure_replica,
	.needs_idle = f_needs_idle,
	.creating_needs_idle = f_creating_needs_idle,
	.run_plan = f_run_plan,
	.wait_device = f_wait_device,
	.restart = f_restart,
	.launched = f_launched,
	.released = f_released,
	.settle = f_settle,
	.await_diffs = f_await_diffs,
};

struct world {
	struct fake f;
	struct lrc_host host;
	struct lrc_devices devs;
};

/* Region i: 4 pages of file bytes, present, wanted by every launch. */
static void region_open(struct world *w, int i, unsigned flags)
{
	struct fake_region *r = &w->f.r[i];
	r->h = calloc(1, sizeof(*r->h));
	assert_non_null(r->h);
	r->h->npages = 4;
	r->h->flags = flags;
	r->h->exec_mode = HARNESS_EXEC;
	for (uint32_t b = 0; b < r->h->npages * PG; b++)
		r->h->file[b] = (uint8_t)(b * 13 + i);
	harness_open(r->h);
	r->name = malloc(32);
	assert_non_null(r->name);
	snprintf(r->name, 32, "region-%d", i);
	r->present = true;
	r->want = LRC_WANT_NEEDED;
}

/* The first n regions' epochs on dev closed, as a sync would. */
static void close_epochs(struct world *w, int n, int dev)
{
	for (int i = 0; i < n; i++) {
		assert_int_equal(lrc_sync(&w->f.r[i].h->region, dev, &w->f.r[i].h->plan), 0);
		lrc_plan_reset(&w->f.r[i].h->plan);
	}
}

static struct world *world_new(int nregions, unsigned flags)
{
	struct world *w = calloc(1, sizeof(*w));
	assert_non_null(w);
	w->host = host_template;
	w->host.ctx = &w->f;
	w->f.unmap_during_wait = -1;
	w->f.unmap_during_diffs = -1;
	w->f.devs = &w->devs;
	fake_of = &w->f;
	for (int i = 0; i < nregions; i++)
		region_open(w, i, flags);
	return w;
}

static void world_free(struct world *w)
{
	for (int i = 0; i < NREG; i++) {
		struct fake_region *r = &w->f.r[i];
		if (!r->h)
			continue;
		harness_close(r->h);
		lrc_plan_free(&r->h->plan);
		free(r->h);
		free(r->name);
	}
	free(w);
}

static void cpu_store(struct fake_region *r, uint32_t byte, uint8_t v)
{
	r->h->file[byte] = v;
	lrc_cpu_wrote(&r->h->region, byte / PG, 1);
}

/* Device dev's copy of every region it holds is the CPU's bytes. */
static void assert_device_current(struct world *w, int dev)
{
	for (int i = 0; i < NREG; i++) {
		struct fake_region *r = &w->f.r[i];
		if (!r->present || !r->holds[dev])
			continue;
		assert_memory_equal(r->h->dev[dev], r->h->file, r->h->npages * PG);
	}
}

static void test_launch_waits_unlocked_before_replacing_bytes_running_kernels_use(void **state)
{
	(void)state;
	struct world *w = world_new(2, LRC_WRITABLE | LRC_SHARED);
	w->f.r[1].want = LRC_WANT_NOT;
	assert_int_equal(lrc_proto_launch(&w->host, &w->devs, 0), 0);
	assert_true(w->devs.busy[0]);
	assert_int_equal(w->f.waits, 0);
	assert_false(w->f.r[1].holds[0]); /* not reached, not held */
	assert_device_current(w, 0);
	/* A kernel may still run; the CPU writes; the next launch's upload
	 * would replace what it may be writing: it waits first, unlocked. */
	assert_int_equal(lrc_sync(&w->f.r[0].h->region, 0, &w->f.r[0].h->plan), 0); /* close the epoch */
	lrc_plan_reset(&w->f.r[0].h->plan);
	cpu_store(&w->f.r[0], 5, 0xee);
	assert_int_equal(lrc_proto_launch(&w->host, &w->devs, 0), 0);
	assert_int_equal(w->f.waits, 1);
	assert_string_equal(w->f.waited_for, "region-0");
	assert_int_equal(w->devs.waits[0], 1);
	assert_device_current(w, 0);
	/* Nothing changed since: no wait. */
	assert_int_equal(lrc_proto_launch(&w->host, &w->devs, 0), 0);
	assert_int_equal(w->f.waits, 1);
	assert_false(w->f.locked);
	world_free(w);
}

/* A replica whose making waits for the device (vmm: the driver
 * synchronizes) is made once the device is idle, waited for unlocked. */
static void test_a_replica_that_waits_to_be_made_is_made_after_an_unlocked_wait(void **state)
{
	(void)state;
	struct world *w = world_new(2, LRC_WRITABLE | LRC_SHARED);
	w->f.creating_waits = true;
	w->f.r[1].present = false; /* mapped later */
	assert_int_equal(lrc_proto_launch(&w->host, &w->devs, 0), 0);
	assert_int_equal(w->f.waits, 0); /* idle device: no wait */
	assert_true(w->devs.busy[0]);
	/* A new region, while the first launch's kernels may run. */
	w->f.r[1].present = true;
	assert_int_equal(lrc_proto_launch(&w->host, &w->devs, 0), 0);
	assert_true(w->f.r[1].holds[0]);
	assert_false(w->f.created_busy);
	assert_int_equal(w->f.waits, 1);
	assert_int_equal(w->f.last_why, LRC_WAIT_CREATE);
	assert_string_equal(w->f.waited_for, "region-1");
	assert_int_equal(w->f.restarts, 1);
	assert_device_current(w, 0);
	/* One that cannot have a replica is not waited for. */
	region_open(w, 2, LRC_WRITABLE | LRC_SHARED);
	w->f.r[2].want = LRC_WANT_ACQUIRE;
	w->f.r[2].replica_err = -ENOMEM;
	assert_int_equal(lrc_proto_launch(&w->host, &w->devs, 0), 0);
	assert_int_equal(w->f.waits, 1);
	assert_false(w->f.locked);
	world_free(w);
}

static void test_second_look_that_finds_more_waits_unlocked_and_starts_over(void **state)
{
	(void)state;
	struct world *w = world_new(3, LRC_WRITABLE | LRC_SHARED);
	assert_int_equal(lrc_proto_launch(&w->host, &w->devs, 0), 0);
	close_epochs(w, 3, 0);
	cpu_store(&w->f.r[2], 3 * PG + 1, 0x42);
	/* The first look says the moves may go on while kernels run; the
	 * second (per region, just before planning) says otherwise. */
	w->f.lie = 3;
	assert_int_equal(lrc_proto_launch(&w->host, &w->devs, 0), 0);
	assert_int_equal(w->f.waits, 1);
	assert_string_equal(w->f.waited_for, "region-2");
	assert_false(w->f.locked);
	assert_device_current(w, 0);
	/* Regions 0 and 1 were launched before region 2's look found the
	 * upload, and again after the wait (the start over); region 2 once
	 * per launch. */
	assert_int_equal(w->f.r[0].launched, 3);
	assert_int_equal(w->f.r[1].launched, 3);
	assert_int_equal(w->f.r[2].launched, 2);
	world_free(w);
}

/* A launch refused in its first pass stays refused after it starts over
 * (region 0's launch plan fails while its epoch is open; region 2's second
 * look, a rebase, forces the start over, where region 0's plan runs). */
static void test_a_refused_launch_stays_refused_after_starting_over(void **state)
{
	(void)state;
	struct world *w = world_new(3, LRC_WRITABLE | LRC_SHARED);
	assert_int_equal(lrc_proto_launch(&w->host, &w->devs, 0), 0); /* epochs open */
	cpu_store(&w->f.r[2], 2 * PG, 0x20);
	w->f.r[0].fail_run_no = 2;
	w->f.lie = 4; /* the first look (3 regions) and region 0's second */
	assert_int_equal(lrc_proto_launch(&w->host, &w->devs, 0), -EIO);
	assert_int_equal(w->f.restarts, 1);
	world_free(w);
}

/* A region whose epoch the first pass opened, and whose plan fails after
 * the start over, is forgotten (its device copy holds no kernel write):
 * the next launch uploads it whole, and the device then has the CPU's
 * bytes. */
static void test_an_epoch_opened_by_the_first_pass_is_not_kept_after_a_failure(void **state)
{
	(void)state;
	struct world *w = world_new(3, LRC_WRITABLE | LRC_SHARED);
	assert_int_equal(lrc_proto_launch(&w->host, &w->devs, 0), 0);
	close_epochs(w, 3, 0);
	cpu_store(&w->f.r[0], 3, 0x30);
	cpu_store(&w->f.r[2], 5, 0x50);
	w->f.lie = 4;
	w->f.r[0].fail_run_no = 3; /* launch 1, launch 2's first pass, then this */
	uint64_t before = w->f.r[0].uploaded;
	assert_int_equal(lrc_proto_launch(&w->host, &w->devs, 0), -EIO);
	assert_int_equal(w->f.restarts, 1);
	assert_int_equal(w->f.r[0].uploaded, before + 1); /* page 0, in the first pass */
	assert_int_equal(lrc_proto_launch(&w->host, &w->devs, 0), 0);
	assert_int_equal(w->f.r[0].uploaded, before + 1 + 4);
	assert_device_current(w, 0);
	world_free(w);
}

static void test_region_unmapped_while_the_launch_waits(void **state)
{
	(void)state;
	struct world *w = world_new(2, LRC_WRITABLE | LRC_SHARED);
	assert_int_equal(lrc_proto_launch(&w->host, &w->devs, 0), 0);
	close_epochs(w, 2, 0);
	cpu_store(&w->f.r[0], 7, 1);
	cpu_store(&w->f.r[1], 9, 2);
	/* Region 0 (whose name the wait is given) goes while the lock is
	 * free: its name was copied (ASan would see a use after free). */
	w->f.unmap_during_wait = 0;
	assert_int_equal(lrc_proto_launch(&w->host, &w->devs, 0), 0);
	assert_int_equal(w->f.waits, 1);
	assert_string_equal(w->f.waited_for, "region-0");
	assert_false(w->f.r[0].present);
	assert_device_current(w, 0);
	world_free(w);
}

static void test_a_needed_region_without_replica_refuses_the_launch(void **state)
{
	(void)state;
	struct world *w = world_new(2, LRC_WRITABLE | LRC_SHARED);
	w->f.r[0].replica_err = -ENOMEM;
	w->f.r[0].want = LRC_WANT_ACQUIRE; /* only reached: the launch goes on */
	assert_int_equal(lrc_proto_launch(&w->host, &w->devs, 0), 0);
	assert_false(w->f.r[0].holds[0]);
	assert_true(w->f.r[1].holds[0]);
	w->f.r[0].want = LRC_WANT_NEEDED; /* an argument points into it */
	assert_int_equal(lrc_proto_launch(&w->host, &w->devs, 0), -ENOMEM);
	assert_device_current(w, 0);
	world_free(w);
}

/* A region the device reads in place: the launch learns it (the CPU's
 * release) and reports it launched, plans and moves nothing for it, and
 * no sync releases it; the region next to it is acquired as ever. */
static void test_a_region_read_in_place_moves_nothing(void **state)
{
	(void)state;
	struct world *w = world_new(2, LRC_SHARED);
	struct fake_region *z = &w->f.r[0], *r = &w->f.r[1];
	z->in_place = true;
	for (int i = 0; i < 2; i++) {
		assert_int_equal(lrc_proto_launch(&w->host, &w->devs, 0), 0);
		assert_int_equal(lrc_proto_sync(&w->host, &w->devs, 0, false), 0);
	}
	assert_int_equal(z->learned, 2);
	assert_int_equal(z->launched, 2);
	assert_int_equal(z->launch_runs, 0);
	assert_int_equal(z->uploaded, 0);
	assert_int_equal(z->released, 0);
	assert_false(z->h->region.epoch_open[0]);
	assert_false(z->holds[0]);
	assert_int_equal(r->launched, 2);
	assert_int_equal(r->uploaded, 4);
	assert_int_equal(w->devs.busy[0], false);
	world_free(w);
}

static void test_a_failed_upload_refuses_and_the_device_forgets(void **state)
{
	(void)state;
	struct world *w = world_new(1, LRC_WRITABLE | LRC_SHARED);
	struct fake_region *r = &w->f.r[0];
	r->fail_launch_runs = 1;
	assert_int_equal(lrc_proto_launch(&w->host, &w->devs, 0), -EIO);
	assert_int_equal(r->uploaded, 4);
	/* Forgotten: the next launch uploads every page again, and the device
	 * then holds the CPU's bytes. */
	assert_int_equal(lrc_proto_launch(&w->host, &w->devs, 0), 0);
	assert_int_equal(r->uploaded, 8);
	assert_device_current(w, 0);
	world_free(w);
}

static void test_sync_releases_device_writes_and_settles_unlocked(void **state)
{
	(void)state;
	struct world *w = world_new(1, LRC_WRITABLE | LRC_SHARED);
	struct fake_region *r = &w->f.r[0];
	assert_int_equal(lrc_proto_launch(&w->host, &w->devs, 0), 0);
	assert_int_equal(lrc_proto_launch(&w->host, &w->devs, 1), 0);
	r->h->dev[1][PG + 3] = 0x77; /* a kernel on device 1 wrote */
	r->h->dev[0][2 * PG] = 0x66; /* and one on device 0 */
	/* Device 0 has an open epoch: device 1 cannot snapshot. */
	assert_int_equal(lrc_proto_sync(&w->host, &w->devs, 1, true), -EAGAIN);
	assert_true(w->devs.busy[1]);
	assert_int_equal(lrc_proto_sync(&w->host, &w->devs, 1, false), 0);
	assert_false(w->devs.busy[1]);
	assert_int_equal(r->h->file[PG + 3], 0x77);
	assert_int_equal(w->f.settles, 1);
	/* Device 0 may snapshot while its kernels run: the epoch stays open. */
	assert_int_equal(lrc_proto_sync(&w->host, &w->devs, 0, true), 0);
	assert_int_equal(r->h->file[2 * PG], 0x66);
	assert_true(r->h->region.epoch_open[0]);
	assert_true(w->devs.busy[0]);
	assert_int_equal(lrc_proto_sync(&w->host, &w->devs, 0, false), 0);
	assert_false(r->h->region.epoch_open[0]);
	assert_int_equal(w->f.settles, 3);
	assert_false(w->f.locked);
	world_free(w);
}

static void test_rebase_while_kernels_run_settles_after_the_lock(void **state)
{
	(void)state;
	struct world *w = world_new(1, LRC_WRITABLE | LRC_SHARED);
	w->f.rebase_on_device = true;
	assert_int_equal(lrc_proto_launch(&w->host, &w->devs, 0), 0);
	/* The epoch is open (no sync), the CPU writes: a rebase, which the
	 * device does next to the running kernels; no wait, one settle. */
	cpu_store(&w->f.r[0], 11, 0x31);
	assert_int_equal(lrc_proto_launch(&w->host, &w->devs, 0), 0);
	assert_int_equal(w->f.waits, 0);
	assert_int_equal(w->f.settles_rebased, 1);
	assert_device_current(w, 0);
	world_free(w);
}

/* A sync queues its comparisons under the lock and waits for them without
 * it (they may find no room next to the program's kernels); each region
 * is looked at again after: one unmapped meanwhile is not released, the
 * others take their queued answers. A snapshot's later stores of a kernel
 * still running come at the next sync. */
static void test_sync_waits_for_its_comparisons_unlocked(void **state)
{
	(void)state;
	struct world *w = world_new(2, LRC_WRITABLE | LRC_SHARED);
	assert_int_equal(lrc_proto_launch(&w->host, &w->devs, 0), 0);
	w->f.r[0].h->dev[0][PG + 1] = 0x41;
	w->f.r[1].h->dev[0][PG + 2] = 0x42;
	w->f.unmap_during_diffs = 1;
	w->f.kernel_byte = 0x43;
	w->f.kernel_at = 3 * PG + 3;
	uint8_t before = w->f.r[0].h->file[3 * PG + 3];
	assert_int_equal(lrc_proto_sync(&w->host, &w->devs, 0, true), 0);
	assert_int_equal(w->f.awaits, 1);
	assert_false(w->f.locked);
	assert_int_equal(w->f.r[0].diff_starts, 1);
	assert_int_equal(w->f.r[1].diff_starts, 1);
	assert_int_equal(w->f.r[0].diff_runs_started, 1);
	assert_int_equal(w->f.r[0].h->xdev[0].queued.taken, 1);
	assert_int_equal(w->f.r[0].released, 1);
	assert_int_equal(w->f.r[1].released, 0); /* unmapped during the wait */
	assert_int_equal(w->f.r[0].h->file[PG + 1], 0x41);
	assert_int_equal(w->f.r[0].h->file[3 * PG + 3], before); /* stored after the comparison */
	w->f.kernel_byte = 0;
	assert_int_equal(lrc_proto_sync(&w->host, &w->devs, 0, false), 0);
	assert_int_equal(w->f.r[0].h->file[3 * PG + 3], 0x43);
	assert_int_equal(w->f.awaits, 2);
	assert_false(w->f.r[0].h->region.epoch_open[0]);
	/* Nothing to compare: no wait. */
	assert_int_equal(lrc_proto_sync(&w->host, &w->devs, 0, false), 0);
	assert_int_equal(w->f.awaits, 2);
	world_free(w);
}

/* A host without await_diffs compares under the lock, as a region's own
 * release (lrc_proto_release) always does. */
static void test_sync_without_await_diffs_compares_in_the_release(void **state)
{
	(void)state;
	struct world *w = world_new(1, LRC_WRITABLE | LRC_SHARED);
	w->host.await_diffs = NULL;
	assert_int_equal(lrc_proto_launch(&w->host, &w->devs, 0), 0);
	w->f.r[0].h->dev[0][5] = 0x55;
	assert_int_equal(lrc_proto_sync(&w->host, &w->devs, 0, false), 0);
	assert_int_equal(w->f.r[0].diff_starts, 0);
	assert_int_equal(w->f.r[0].diff_runs_started, 0);
	assert_int_equal(w->f.r[0].h->file[5], 0x55);
	world_free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_launch_waits_unlocked_before_replacing_bytes_running_kernels_use),
		cmocka_unit_test(test_a_replica_that_waits_to_be_made_is_made_after_an_unlocked_wait),
		cmocka_unit_test(test_second_look_that_finds_more_waits_unlocked_and_starts_over),
		cmocka_unit_test(test_a_refused_launch_stays_refused_after_starting_over),
		cmocka_unit_test(test_an_epoch_opened_by_the_first_pass_is_not_kept_after_a_failure),
		cmocka_unit_test(test_region_unmapped_while_the_launch_waits),
		cmocka_unit_test(test_a_needed_region_without_replica_refuses_the_launch),
		cmocka_unit_test(test_a_failed_upload_refuses_and_the_device_forgets),
		cmocka_unit_test(test_a_region_read_in_place_moves_nothing),
		cmocka_unit_test(test_sync_releases_device_writes_and_settles_unlocked),
		cmocka_unit_test(test_rebase_while_kernels_run_settles_after_the_lock),
		cmocka_unit_test(test_sync_waits_for_its_comparisons_unlocked),
		cmocka_unit_test(test_sync_without_await_diffs_compares_in_the_release),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
