/* The protocol's launch and sync sequences over every region a process
 * manages (DESIGN §3.3), in one place.
 *
 * lrc.h is one region's engine: what a launch or a sync means for its
 * pages, as a plan. This file is the order in which a process runs those
 * engines around a kernel launch and a host sync, and the per-device
 * state that order needs:
 *
 *   launch on d: when kernels launched earlier may still run on d, look
 *     first (learn what the CPU and other processes changed, ask each
 *     region whether the launch would change bytes those kernels may
 *     use); if one would, wait for d without the lock, then go on. Then,
 *     per region d holds or the launch reaches: learn, make the replica
 *     (once d is idle, waited for without the lock, should making it wait),
 *     plan (CPU release + d's acquire), carry the plan out; a region whose
 *     plan could not be carried out refuses the launch, and d forgets it
 *     when it held no unreleased writes there. d is busy after.
 *   sync on d: per region with d's epoch open: the diff plan, queued on
 *     the device; then, waited for without the lock, per region with d's
 *     epoch open still: the diff plan, carried out with the queued
 *     answers; d's release (full, or a snapshot while kernels still run),
 *     carried out. A full sync leaves d idle.
 *
 * The caller serializes launches and syncs (no kernel starts while one
 * runs); the host's lock guards every region's engine, plan and replica,
 * and is never held across a wait for the device: a wait happens with the
 * lock dropped, and what was decided under it is looked at again after.
 *
 * The host adapts: it owns the regions, moves the bytes (its run_plan is
 * the executor, runtime/device.h), talks to the driver, keeps statistics
 * and logs. Every callback but wait_device, settle and await_diffs is
 * called with the lock held. */
#ifndef GAIA_LRC_PROTO_H
#define GAIA_LRC_PROTO_H

#include <stdbool.h>
#include <stdint.h>

#include "lrc.h"

/* What a launch wants of a region. */
enum lrc_want {
	LRC_WANT_NOT,     /* not reached (unless the device holds it already) */
	LRC_WANT_ACQUIRE, /* acquired if it can have a replica */
	LRC_WANT_NEEDED,  /* an argument points into it: no replica refuses the launch */
};

/* ensure_replica's answer for a region the device reads in place. */
#define LRC_IN_PLACE 1

/* Why a launch waits for the kernels running on its device. */
enum lrc_wait {
	LRC_WAIT_CHANGE, /* it would change bytes they may use */
	LRC_WAIT_CREATE, /* making a replica would wait for them, lock held */
};

/* Why a plan is carried out. */
enum lrc_run {
	LRC_RUN_LAUNCH,  /* a launch's CPU release + device acquire */
	LRC_RUN_DIFF,    /* the first half of a device release */
	/* A sync's comparisons, queued (device_exec_start_diffs) before the
	 * lock is dropped to wait for them (await_diffs)... */
	LRC_RUN_DIFF_START,
	/* ...and the first half of that sync's release, which takes their
	 * answers (device_exec_run_diffs). */
	LRC_RUN_DIFF_STARTED,
	LRC_RUN_RELEASE, /* the second half */
	LRC_RUN_FORGET,  /* the device forgets the region */
};

struct lrc_host {
	void *ctx;
	void (*lock)(void *ctx);
	void (*unlock)(void *ctx);
	/* The regions, in a stable order: the first (prev NULL), the next. */
	void *(*next)(void *ctx, void *prev);
	struct lrc_region *(*engine)(void *region);
	struct lrc_plan *(*plan)(void *region);
	const char *(*name)(void *region);
	/* Whether region has a replica on dev. */
	bool (*holds)(void *region, int dev);
	enum lrc_want (*wants)(void *ctx, void *region);
	/* The CPU's writes and other processes' changes reach the engine. */
	void (*learn)(void *region);
	/* 0 (dev has a replica), LRC_IN_PLACE (dev's kernels reach the
	 * region's own pages, nothing to move: no replica, no epoch), or
	 * -errno: why dev can have no replica of region. */
	int (*ensure_replica)(void *region, int dev);
	/* Whether actions of these kinds (LRC_MOVES_*) on region's replica on
	 * dev must wait for the kernels launched earlier there. */
	bool (*needs_idle)(void *region, int dev, unsigned kinds, uint64_t rebase_pages);
	/* Whether making region's first replica on dev would wait for the
	 * kernels running there (the driver synchronizes): it is then made
	 * with the device idle, waited for without the lock. NULL: never. */
	bool (*creating_needs_idle)(void *region, int dev);
	/* Carries out region's plan (and empties it): 0, or -errno when an
	 * action failed. */
	int (*run_plan)(void *region, int dev, enum lrc_run why);
	/* Waits, without the lock, until every kernel launched on dev has
	 * finished; region_name names what the launch would change (why:
	 * LRC_WAIT_CHANGE) or the replica it would make (LRC_WAIT_CREATE). */
	void (*wait_device)(void *ctx, int dev, const char *region_name, enum lrc_wait why);
	/* A launch starts over after a wait: what launched() was told before
	 * is told again. */
	void (*restart)(void *ctx);
	/* After a region's launch plan ran (moved: 0 or its -errno). */
	void (*launched)(void *ctx, void *region, int dev, int moved);
	/* After a region's release ran (rc: the engine's, moved: the plan's). */
	void (*released)(void *ctx, void *region, int dev, int rc, int moved);
	/* Without the lock, after a launch that rebased regions while kernels
	 * ran (rebased_name: the first) or a sync that released some: waits
	 * for the host's own queued work. 0 or -errno. */
	int (*settle)(void *ctx, int dev, const char *rebased_name);
	/* Optional. Without the lock: waits for the comparisons the sync's
	 * LRC_RUN_DIFF_START runs queued on dev. They are kernels of the
	 * host's, which the program's kernels still running may leave no
	 * room for until they end; waiting under the lock would hold up
	 * every thread that maps, unmaps or reads a managed file. NULL: a
	 * sync compares with the lock held. */
	void (*await_diffs)(void *ctx, int dev);
};

/* Per device: whether kernels may still run there (launched since the last
 * full sync). */
struct lrc_devices {
	bool busy[TSVT_MAX_DEVICES];
	uint64_t waits[TSVT_MAX_DEVICES];    /* waits for earlier kernels, per device */
	uint64_t launches[TSVT_MAX_DEVICES]; /* lrc_proto_launch calls, per device */
	/* Launches past their waits and plans (their kernels are queued
	 * next, or refused), per device: counted before the lock is dropped. */
	uint64_t planned[TSVT_MAX_DEVICES];
};

/* A launch on dev. 0, or the first -errno of a region the launch needs
 * (LRC_WANT_NEEDED without a replica, or a plan that failed): the launch
 * must not run. */
int lrc_proto_launch(const struct lrc_host *h, struct lrc_devices *ds, int dev);

/* A host sync on dev: either every kernel launched there since its last
 * release has finished (the caller made sure), or, snapshot, some may
 * still run. The comparisons of d's pages with their bases are queued
 * first and waited for without the lock (await_diffs); the regions are
 * then looked at again: one unmapped meanwhile is not released, and a
 * release whose pages changed takes no queued answer but compares anew. 0; -EAGAIN when a snapshot was refused for some region (the
 * caller waits for the kernels, then syncs in full); or the first -errno
 * of a region whose changes could not reach the CPU. */
int lrc_proto_sync(const struct lrc_host *h, struct lrc_devices *ds, int dev, bool snapshot);

/* One region's release by dev (lock held): what lrc_proto_sync does per
 * region, for a host that must release one on its own (before freeing a
 * replica). Returns as lrc_proto_sync. */
int lrc_proto_release(const struct lrc_host *h, void *region, int dev, bool snapshot);

/* dev forgets region's copy (lock held; its replica is gone). */
void lrc_proto_forget(const struct lrc_host *h, void *region, int dev);

#endif
