/* Lazy release consistency for one region (DESIGN §1, §3.3).
 *
 * The CPU replica is the home: every device release is merged into it at
 * once (GAIA's eager pairing: a device's release at a sync is followed by
 * the CPU's acquire, and a device's acquire at a launch is preceded by the
 * CPU's release), so after every complete operation the CPU holds the
 * newest bytes of every page. Devices hold copies; a device that may write
 * a page keeps a base copy of it, so that at the sync its changes are the
 * bytes where its page differs from the base, and only those bytes are
 * stored into the CPU's page (the in-place 3-way merge: the CPU's
 * concurrent stores to other bytes survive).
 *
 * The engine moves no bytes. Each call appends to a plan what the caller
 * must do, as coalesced page ranges, in the order it must be done; the
 * byte-level meaning of every action is below, and lrc_page.h implements
 * it for one page on plain buffers (the model test and the host-side code
 * use it; a device backend may run the same rules on the device).
 *
 * Same-byte conflicts between devices are resolved by owner id, never by
 * timing: when device e releases a page while a lower device f holds it in
 * an open epoch, the bytes e changed are recorded in f's *protect record*
 * for that page (mask + the value e left in the CPU page); at f's release a
 * protected byte whose CPU value is still the recorded one keeps it. A CPU
 * store after e's release that changes such a byte is ordered after e's
 * write and concurrent with f's, so f wins there: the record is refreshed
 * at every CPU release (and checked at f's merge) by comparing values.
 *
 * What the byte-level diff cannot see: a store that leaves a byte as it was
 * at the writer's last acquire or release point (writing the same value, or
 * A->B->A between two such points) is no change, as in GAIA's own merge.
 * The model test writes a fresh value every time to stay inside that rule.
 */
#ifndef GAIA_LRC_H
#define GAIA_LRC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tsvt.h"

enum lrc_action_kind {
	/* The CPU page's version changed (a CPU release, or a device's changes
	 * merged into it): publish the pages to the cross-process version
	 * table. Only for MAP_SHARED regions. */
	LRC_PUBLISH,
	/* dev: in its protect record of each page, unprotect every byte whose
	 * CPU value differs from the recorded value (the CPU wrote it). */
	LRC_PROTECT_REFRESH,
	/* dev: device page := CPU page; in a writable region also base := the
	 * same bytes (the base copy is taken). */
	LRC_UPLOAD,
	/* dev, in an open epoch (its kernels may have written the page): per
	 * byte, if protected and CPU == recorded value: dev = base = CPU;
	 * else if dev != base: keep (the device's own write wins over the
	 * concurrent CPU one); else dev = base = CPU. Then drop the record. */
	LRC_REBASE,
	/* dev: compare each device page with its base and report the pages
	 * that differ with lrc_device_wrote(). (From lrc_sync_diff.) */
	LRC_DIFF,
	/* dev: in place, CPU[i] = dev[i] for every byte with dev[i] != base[i],
	 * except protected bytes whose CPU value equals the recorded one;
	 * no other CPU byte is stored to. With other == LRC_MERGE_COMMITS
	 * (a snapshot release): then base := the device bytes the merge read,
	 * in place of a COMMIT, which would read the page again while kernels
	 * may still write it. dev's protect record stays: its epoch goes on,
	 * and a higher device's concurrent write still wins over its next
	 * ones. */
	LRC_MERGE_TO_CPU,
	/* dev -> other (a lower device with the page in an open epoch): for
	 * every byte dev changed whose value won (dev[i] != base[i] and, after
	 * LRC_MERGE_TO_CPU, CPU[i] == dev[i]): other's record protects i with
	 * that value. */
	LRC_PROTECT_SAVE,
	/* dev: base := device page; drop dev's protect record of the page. */
	LRC_COMMIT,
	/* dev: drop its protect records of these pages. */
	LRC_DROP_PROTECT,
	/* dev: forget these pages (device page, base copy, protect record). */
	LRC_FREE,
};

struct lrc_action {
	uint8_t kind;  /* enum lrc_action_kind */
	uint8_t dev;   /* device index */
	uint8_t other; /* LRC_PROTECT_SAVE: the device whose record is updated */
	uint64_t first, npages;
};

/* A caller-owned list of actions, reused across calls (lrc_plan_reset). */
struct lrc_plan {
	struct lrc_action *items;
	size_t count, capacity;
};

#define LRC_WRITABLE 1u /* the region may be written (devices keep base copies) */
#define LRC_SHARED 2u   /* MAP_SHARED: the CPU page is the file's page */

struct lrc_region {
	struct tsvt tsvt;
	unsigned flags;
	struct range_set live; /* pages still mapped (a partial munmap drops some) */
	bool epoch_open[TSVT_MAX_DEVICES]; /* launched since its last sync */
	struct page_list protected_pages[TSVT_MAX_DEVICES];
	struct page_list scratch;
	/* lrc_proto.c: which launch on the device (its count there) opened
	 * the device's epoch, so that a launch that starts over knows what
	 * was open before it. */
	uint64_t opened_by[TSVT_MAX_DEVICES];
};

int lrc_region_init(struct lrc_region *r, uint64_t npages, unsigned flags);
void lrc_region_destroy(struct lrc_region *r);

void lrc_plan_reset(struct lrc_plan *plan);
void lrc_plan_free(struct lrc_plan *plan);
const char *lrc_action_name(enum lrc_action_kind kind);

/* The CPU wrote pages [first, first+n) (found by the write-protect scan, or
 * a write()/pwrite() on the file). Versions move at the next release. */
void lrc_cpu_wrote(struct lrc_region *r, uint64_t first, uint64_t n);

/* CPU release (msync, munmap, every launch, a timer): bumps the versions of
 * the pages the CPU wrote. Emits PUBLISH and PROTECT_REFRESH. */
int lrc_cpu_release(struct lrc_region *r, struct lrc_plan *plan);

/* The file's pages [first, first+n) changed outside this process (learned
 * from the shared version table or checksums). The CPU replica already
 * holds the new bytes (for MAP_PRIVATE, conservatively assumed); devices
 * become stale. Emits PROTECT_REFRESH. */
int lrc_file_changed(struct lrc_region *r, uint64_t first, uint64_t n, struct lrc_plan *plan);

/* Device d acquires [first, first+n): stale pages it holds are uploaded (or
 * rebased in an open epoch), pages it does not hold are uploaded and held;
 * opens d's epoch in a writable region. Emits UPLOAD and REBASE. */
int lrc_device_acquire(struct lrc_region *r, int d, uint64_t first, uint64_t n,
		       struct lrc_plan *plan);

/* A kernel launch on device d: the CPU's release, then d's acquire of every
 * page still mapped. */
int lrc_launch(struct lrc_region *r, int d, struct lrc_plan *plan);

/* Which actions lrc_launch(r, d) now would emit that change device d's
 * bytes: LRC_MOVES_UPLOAD for a page it does not hold, or one stale there
 * or written by the CPU since its release while d's epoch is closed (or
 * the region is read-only); LRC_MOVES_REBASE for such a page d holds in
 * an open epoch of a writable region. 0: none. Changes nothing: the
 * caller decides, without its lock, whether to wait for kernels still
 * running on d (an upload replaces what they may be writing; a rebase on
 * the device keeps it). rebase (may be NULL): how many pages would be
 * rebased, in how many runs (the plan's REBASE actions). */
enum { LRC_MOVES_UPLOAD = 1, LRC_MOVES_REBASE = 2 };
struct lrc_rebase_extent {
	uint64_t pages, runs; /* pages to rebase, in this many runs of consecutive pages */
};
unsigned lrc_launch_moves(const struct lrc_region *r, int d, struct lrc_rebase_extent *rebase);

/* First half of a host sync on device d: the pages to diff (DIFF), i.e.
 * every page d holds in an open epoch of a writable region. The caller
 * reports the pages that differ with lrc_device_wrote(), then calls
 * lrc_sync(). */
int lrc_sync_diff(struct lrc_region *r, int d, struct lrc_plan *plan);
void lrc_device_wrote(struct lrc_region *r, int d, uint64_t first, uint64_t n);

/* Second half: d's release, then the CPU's acquire. Emits MERGE_TO_CPU,
 * PROTECT_SAVE, COMMIT, PUBLISH, DROP_PROTECT; closes d's epoch. */
int lrc_sync(struct lrc_region *r, int d, struct lrc_plan *plan);

/* The same release while d's kernels may still run (a sync of one stream
 * with kernels on others): what d wrote so far reaches the CPU, each
 * merged page's base becomes the bytes merged, and d's epoch stays open,
 * so the next release finds what those kernels write after. Emits
 * MERGE_TO_CPU (other = LRC_MERGE_COMMITS) and PUBLISH. -EAGAIN, with
 * nothing emitted, when a lower device has an open epoch (its protect
 * records need the device page and base of d as they were at the merge):
 * the caller waits for d's kernels and calls lrc_sync. */
#define LRC_MERGE_COMMITS 1
/* Whether lrc_sync_snapshot would accept d now (no lower device has an
 * open epoch): asked before the diff, to spare it. */
bool lrc_snapshot_possible(const struct lrc_region *r, int d);
int lrc_sync_snapshot(struct lrc_region *r, int d, struct lrc_plan *plan);

/* Pages [first, first+n) leave the region (munmap of part): devices forget
 * them. The caller releases the CPU first (munmap is a release point).
 * Emits FREE. */
int lrc_drop(struct lrc_region *r, uint64_t first, uint64_t n, struct lrc_plan *plan);

/* Every device forgets pages [first, first+n) without their losing the
 * CPU's version: its copy there is not the CPU's bytes (the CPU could not
 * be read there, or the device's writes there were dropped), and its next
 * acquire uploads them afresh. Emits FREE. */
int lrc_devices_forget_pages(struct lrc_region *r, uint64_t first, uint64_t n, struct lrc_plan *plan);

/* Device d loses its copy of the whole region (its replica is freed):
 * what it had not released is gone, and a later acquire uploads every
 * page afresh. Emits FREE. */
int lrc_device_forget(struct lrc_region *r, int d, struct lrc_plan *plan);

#endif
