/* The protocol's launch and sync sequences (lrc_proto.h). */
#include "lrc_proto.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>

/* The first look of a launch on a busy device, lock held: learns every
 * region dev holds (what the CPU and other processes changed is what the
 * launch will move) and says whether any of its moves must wait for the
 * kernels running there; *name: the first such region. A rebase on the
 * device while kernels run happens at most once per launch (one upload
 * and one kernel on the host's stream: a second one's upload would wait
 * for the first kernel, which may find no room next to the running ones).
 * *rebased: the first region rebased while they run, if none waits. */
static bool must_wait(const struct lrc_host *h, int dev, const char **name, const char **rebased)
{
	uint64_t runs = 0;
	bool wait = false;
	*name = *rebased = NULL;
	for (void *r = h->next(h->ctx, NULL); r; r = h->next(h->ctx, r)) {
		if (!h->holds(r, dev))
			continue; /* a new replica: no kernel reads it yet */
		h->learn(r);
		struct lrc_rebase_extent rebase;
		unsigned kinds = lrc_launch_moves(h->engine(r), dev, &rebase);
		runs += rebase.runs;
		if ((kinds & LRC_MOVES_REBASE) && !*rebased)
			*rebased = h->name(r);
		if (!h->needs_idle(r, dev, kinds, rebase.pages) && !((kinds & LRC_MOVES_REBASE) && runs > 1))
			continue;
		if (!wait)
			*name = h->name(r);
		wait = true;
	}
	if (wait)
		*rebased = NULL;
	return wait;
}

/* A region's name, copied while the lock is held: the region may be gone
 * once it is dropped. */
struct name_copy {
	char s[512];
};

static const char *copy_name(struct name_copy *c, const char *name)
{
	snprintf(c->s, sizeof(c->s), "%s", name ? name : "");
	return c->s;
}

/* Drops the lock, waits for dev, takes the lock again: dev is idle. */
static void wait_unlocked(const struct lrc_host *h, struct lrc_devices *ds, int dev, const char *name,
			  enum lrc_wait why)
{
	struct name_copy c;
	copy_name(&c, name);
	h->unlock(h->ctx);
	h->wait_device(h->ctx, dev, c.s, why);
	h->lock(h->ctx);
	ds->busy[dev] = false;
	ds->waits[dev]++;
}

int lrc_proto_launch(const struct lrc_host *h, struct lrc_devices *ds, int dev)
{
	if (dev < 0 || dev >= TSVT_MAX_DEVICES)
		return -ENODEV;
	int failed = 0;
	const char *rebased = NULL;
	struct name_copy rebased_copy;
	h->lock(h->ctx);
	uint64_t seq = ++ds->launches[dev];
	/* Learned by the first look, with the lock held since: stands. */
	bool learned = false;
	if (ds->busy[dev]) {
		const char *name;
		if (must_wait(h, dev, &name, &rebased))
			wait_unlocked(h, ds, dev, name, LRC_WAIT_CHANGE);
		else
			learned = true;
	}
again:
	for (void *r = h->next(h->ctx, NULL); r; r = h->next(h->ctx, r)) {
		bool existed = h->holds(r, dev);
		enum lrc_want want = h->wants(h->ctx, r);
		if (!existed && want == LRC_WANT_NOT)
			continue;
		if (!existed && ds->busy[dev] && h->creating_needs_idle && h->creating_needs_idle(r, dev)) {
			/* Making it would wait for the running kernels with the
			 * lock held: they are waited for without it first. */
			wait_unlocked(h, ds, dev, h->name(r), LRC_WAIT_CREATE);
			rebased = NULL;
			learned = false;
			h->restart(h->ctx);
			goto again;
		}
		if (!(learned && existed))
			h->learn(r);
		int made = h->ensure_replica(r, dev);
		if (made == LRC_IN_PLACE) {
			/* The kernels read the region where it is: the CPU's
			 * release above is all a launch does for it. */
			h->launched(h->ctx, r, dev, 0);
			continue;
		}
		if (made) {
			/* Its pointers would reach no device memory: the launch is
			 * refused, with the cause. */
			if (want == LRC_WANT_NEEDED && !failed)
				failed = made;
			continue;
		}
		struct lrc_region *e = h->engine(r);
		struct lrc_plan *plan = h->plan(r);
		/* A replica the first look did not see is new: no kernel reads
		 * it. For the others the plan is what that look saw, unless the
		 * host's view moved; should it move more than the look allowed,
		 * the launch waits now (lock dropped), and starts over: the
		 * regions already done acquire again, which moves only what
		 * changed since. */
		if (existed && ds->busy[dev]) {
			struct lrc_rebase_extent rebase;
			unsigned kinds = lrc_launch_moves(e, dev, &rebase);
			if (h->needs_idle(r, dev, kinds, rebase.pages)) {
				wait_unlocked(h, ds, dev, h->name(r), LRC_WAIT_CHANGE);
				rebased = NULL;
				learned = false;
				h->restart(h->ctx); /* a refused launch stays refused */
				goto again;
			}
		}
		/* Open before this launch (not by its first pass, should it
		 * have started over). */
		bool had_epoch = e->epoch_open[dev] && e->opened_by[dev] != seq;
		/* An engine that could not plan it all (no memory) has still
		 * planned what it says it did: carried out, and refused. */
		int rc = lrc_launch(e, dev, plan);
		if (!had_epoch && e->epoch_open[dev])
			e->opened_by[dev] = seq;
		int moved = h->run_plan(r, dev, LRC_RUN_LAUNCH);
		if (rc && !moved)
			moved = rc;
		if (moved) {
			/* The device's copy is not what the kernel must see: the
			 * launch is refused. With no unreleased kernel writes on
			 * it, the device forgets the region and uploads it whole
			 * next time; with some, their pages stay. */
			if (!had_epoch)
				lrc_proto_forget(h, r, dev);
			if (!failed)
				failed = moved;
		}
		h->launched(h->ctx, r, dev, moved);
	}
	ds->busy[dev] = true;
	ds->planned[dev]++;
	if (rebased)
		rebased = copy_name(&rebased_copy, rebased);
	h->unlock(h->ctx);
	if (rebased && h->settle(h->ctx, dev, rebased) && !failed)
		failed = -EIO;
	return failed;
}

static int release_region(const struct lrc_host *h, void *region, int dev, bool snapshot, enum lrc_run diff_run)
{
	struct lrc_region *e = h->engine(region);
	struct lrc_plan *plan = h->plan(region);
	if (snapshot && !lrc_snapshot_possible(e, dev))
		return -EAGAIN;
	/* The executor takes a page it could not compare as written. */
	int rc = lrc_sync_diff(e, dev, plan);
	(void)h->run_plan(region, dev, diff_run);
	if (!rc)
		rc = snapshot ? lrc_sync_snapshot(e, dev, plan) : lrc_sync(e, dev, plan);
	int moved = h->run_plan(region, dev, LRC_RUN_RELEASE);
	h->released(h->ctx, region, dev, rc, moved);
	return rc ? rc : moved;
}

int lrc_proto_release(const struct lrc_host *h, void *region, int dev, bool snapshot)
{
	return release_region(h, region, dev, snapshot, LRC_RUN_DIFF);
}

/* Whether the sync releases region on dev (lock held). */
static bool releases(const struct lrc_host *h, void *region, int dev)
{
	return h->holds(region, dev) && h->engine(region)->epoch_open[dev];
}

/* The sync's comparisons, queued (lock held): true when any region has
 * some to wait for. */
static bool start_diffs(const struct lrc_host *h, int dev, bool snapshot)
{
	bool any = false;
	for (void *r = h->next(h->ctx, NULL); r; r = h->next(h->ctx, r)) {
		struct lrc_region *e = h->engine(r);
		if (!releases(h, r, dev) || (snapshot && !lrc_snapshot_possible(e, dev)))
			continue;
		struct lrc_plan *plan = h->plan(r);
		(void)lrc_sync_diff(e, dev, plan); /* a diff not queued compares later */
		any |= plan->count != 0;
		(void)h->run_plan(r, dev, LRC_RUN_DIFF_START);
	}
	return any;
}

int lrc_proto_sync(const struct lrc_host *h, struct lrc_devices *ds, int dev, bool snapshot)
{
	if (dev < 0 || dev >= TSVT_MAX_DEVICES)
		return -ENODEV;
	int first = 0;
	bool refused = false, released = false;
	enum lrc_run diff_run = LRC_RUN_DIFF;
	h->lock(h->ctx);
	if (h->await_diffs && start_diffs(h, dev, snapshot)) {
		h->unlock(h->ctx);
		h->await_diffs(h->ctx, dev);
		h->lock(h->ctx);
		diff_run = LRC_RUN_DIFF_STARTED;
	}
	for (void *r = h->next(h->ctx, NULL); r; r = h->next(h->ctx, r)) {
		if (!releases(h, r, dev))
			continue;
		int rc = release_region(h, r, dev, snapshot, diff_run);
		released |= rc != -EAGAIN;
		if (rc == -EAGAIN && snapshot) {
			refused = true;
			continue;
		}
		if (rc && !first)
			first = rc;
	}
	if (!snapshot)
		ds->busy[dev] = false;
	h->unlock(h->ctx);
	/* The commits queued on the host's stream complete before the sync
	 * returns (the next diff compares with them). */
	if (released && h->settle(h->ctx, dev, NULL) && !first)
		first = -EIO;
	return first ? first : refused ? -EAGAIN : 0;
}

void lrc_proto_forget(const struct lrc_host *h, void *region, int dev)
{
	lrc_device_forget(h->engine(region), dev, h->plan(region));
	(void)h->run_plan(region, dev, LRC_RUN_FORGET);
}
