#include "lrc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int lrc_region_init(struct lrc_region *r, uint64_t npages, unsigned flags)
{
	memset(r, 0, sizeof(*r));
	r->flags = flags;
	int rc = tsvt_init(&r->tsvt, npages);
	if (!rc && (rc = range_set_add(&r->live, 0, npages)))
		tsvt_destroy(&r->tsvt);
	return rc;
}

void lrc_region_destroy(struct lrc_region *r)
{
	tsvt_destroy(&r->tsvt);
	range_set_free(&r->live);
	for (int d = 0; d < TSVT_MAX_DEVICES; d++)
		page_list_free(&r->protected_pages[d]);
	page_list_free(&r->scratch);
}

void lrc_plan_reset(struct lrc_plan *plan)
{
	plan->count = 0;
}

void lrc_plan_free(struct lrc_plan *plan)
{
	free(plan->items);
	memset(plan, 0, sizeof(*plan));
}

const char *lrc_action_name(enum lrc_action_kind kind)
{
	static const char *const names[] = {
		[LRC_PUBLISH] = "publish",	   [LRC_PROTECT_REFRESH] = "protect-refresh",
		[LRC_UPLOAD] = "upload",	   [LRC_REBASE] = "rebase",
		[LRC_DIFF] = "diff",		   [LRC_MERGE_TO_CPU] = "merge-to-cpu",
		[LRC_PROTECT_SAVE] = "protect-save", [LRC_COMMIT] = "commit",
		[LRC_DROP_PROTECT] = "drop-protect", [LRC_FREE] = "free",
	};
	return (unsigned)kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "?";
}

/* Appends pages [first, first+n) to the plan, extending the last action
 * when it is the same action on the pages just before. */
static int plan_emit(struct lrc_plan *plan, enum lrc_action_kind kind, int dev, int other,
		     uint64_t first, uint64_t n)
{
	if (!n)
		return 0;
	if (plan->count) {
		struct lrc_action *last = &plan->items[plan->count - 1];
		if (last->kind == kind && last->dev == dev && last->other == other &&
		    last->first + last->npages == first) {
			last->npages += n;
			return 0;
		}
	}
	if (plan->count == plan->capacity) {
		size_t cap = plan->capacity ? plan->capacity * 2 : 16;
		struct lrc_action *items = realloc(plan->items, cap * sizeof(*items));
		if (!items)
			return -ENOMEM;
		plan->items = items;
		plan->capacity = cap;
	}
	plan->items[plan->count++] = (struct lrc_action){
		.kind = (uint8_t)kind, .dev = (uint8_t)dev, .other = (uint8_t)other,
		.first = first, .npages = n};
	return 0;
}

static int emit_list(struct lrc_plan *plan, enum lrc_action_kind kind, int dev, int other,
		     const struct page_list *pages)
{
	for (size_t i = 0; i < pages->count; i++) {
		int rc = plan_emit(plan, kind, dev, other, pages->pages[i], 1);
		if (rc)
			return rc;
	}
	return 0;
}

static bool device_open_on(const struct lrc_region *r, int d, uint64_t p)
{
	return r->epoch_open[d] && tsvt_holds(&r->tsvt, d, p);
}

/* The CPU (or the file, through it) changed the pages in `pages`: every
 * open device with a protect record there must re-check it against the
 * CPU bytes. One pass per device keeps each device's ranges coalesced. */
static int emit_protect_refresh(struct lrc_region *r, const struct page_list *pages,
				struct lrc_plan *plan)
{
	for (int d = 0; d < TSVT_MAX_DEVICES; d++) {
		if (!r->epoch_open[d] || !r->protected_pages[d].count)
			continue;
		for (size_t i = 0; i < pages->count; i++) {
			uint64_t p = pages->pages[i];
			if (tsvt_has_protect(&r->tsvt, d, p)) {
				int rc = plan_emit(plan, LRC_PROTECT_REFRESH, d, 0, p, 1);
				if (rc)
					return rc;
			}
		}
	}
	return 0;
}

void lrc_cpu_wrote(struct lrc_region *r, uint64_t first, uint64_t n)
{
	tsvt_mark_dirty(&r->tsvt, TSVT_CPU, first, n);
}

int lrc_cpu_release(struct lrc_region *r, struct lrc_plan *plan)
{
	struct page_list *dirty = &r->scratch;
	page_list_clear(dirty);
	int rc = tsvt_take_dirty(&r->tsvt, TSVT_CPU, dirty);
	if (rc)
		return rc;
	for (size_t i = 0; i < dirty->count; i++)
		tsvt_bump(&r->tsvt, TSVT_CPU, dirty->pages[i]);
	if ((r->flags & LRC_SHARED) && (rc = emit_list(plan, LRC_PUBLISH, 0, 0, dirty)))
		return rc;
	return emit_protect_refresh(r, dirty, plan);
}

int lrc_file_changed(struct lrc_region *r, uint64_t first, uint64_t n, struct lrc_plan *plan)
{
	struct page_list *changed = &r->scratch;
	page_list_clear(changed);
	for (uint64_t p = first; p < first + n && p < r->tsvt.npages; p++) {
		tsvt_bump(&r->tsvt, TSVT_CPU, p);
		int rc = page_list_push(changed, p);
		if (rc)
			return rc;
	}
	return emit_protect_refresh(r, changed, plan);
}

/* Device d acquires [first, end). `refresh` is how stale pages it holds
 * are brought up to date: LRC_UPLOAD, or LRC_REBASE while its kernels may
 * have unsynced writes there (decided once per acquire, before it opens
 * the epoch). */
static int acquire_range(struct lrc_region *r, int d, uint64_t first, uint64_t end,
			 enum lrc_action_kind refresh, struct lrc_plan *plan)
{
	struct tsvt *t = &r->tsvt;
	struct page_list *stale = &r->scratch;
	page_list_clear(stale);
	int rc = tsvt_take_stale(t, d, first, end - first, stale);
	if (rc)
		return rc;
	for (size_t i = 0; i < stale->count; i++) {
		uint64_t p = stale->pages[i];
		tsvt_set_protect(t, d, p, false);
		if ((rc = plan_emit(plan, refresh, d, 0, p, 1)))
			return rc;
	}

	/* Pages it does not hold yet. */
	struct range_set missing = {0};
	rc = range_set_complement(&t->dev[d].held, first, end, &missing);
	for (size_t i = 0; !rc && i < missing.count; i++) {
		const struct page_range *m = &missing.items[i];
		rc = tsvt_hold(t, d, m->first, m->end - m->first);
		if (!rc)
			rc = plan_emit(plan, LRC_UPLOAD, d, 0, m->first, m->end - m->first);
	}
	range_set_free(&missing);
	return rc;
}

static enum lrc_action_kind refresh_kind(const struct lrc_region *r, int d)
{
	return r->epoch_open[d] && (r->flags & LRC_WRITABLE) ? LRC_REBASE : LRC_UPLOAD;
}

static void open_epoch(struct lrc_region *r, int d)
{
	if (r->flags & LRC_WRITABLE)
		r->epoch_open[d] = true;
}

int lrc_device_acquire(struct lrc_region *r, int d, uint64_t first, uint64_t n,
		       struct lrc_plan *plan)
{
	uint64_t end = first + n > r->tsvt.npages ? r->tsvt.npages : first + n;
	int rc = tsvt_attach_device(&r->tsvt, d);
	if (!rc && first < end)
		rc = acquire_range(r, d, first, end, refresh_kind(r, d), plan);
	if (!rc)
		open_epoch(r, d);
	return rc;
}

int lrc_launch(struct lrc_region *r, int d, struct lrc_plan *plan)
{
	int rc = lrc_cpu_release(r, plan);
	if (!rc)
		rc = tsvt_attach_device(&r->tsvt, d);
	enum lrc_action_kind refresh = refresh_kind(r, d);
	for (size_t i = 0; !rc && i < r->live.count; i++)
		rc = acquire_range(r, d, r->live.items[i].first, r->live.items[i].end, refresh, plan);
	if (!rc)
		open_epoch(r, d);
	return rc;
}

unsigned lrc_launch_moves(const struct lrc_region *r, int d, struct lrc_rebase_extent *rebase)
{
	const struct tsvt *t = &r->tsvt;
	struct lrc_rebase_extent e = {0, 0};
	unsigned moves = 0;
	if (d >= 0 && d < TSVT_MAX_DEVICES) {
		unsigned refresh = refresh_kind(r, d) == LRC_REBASE ? LRC_MOVES_REBASE : LRC_MOVES_UPLOAD;
		for (size_t i = 0; i < r->live.count; i++) {
			bool in_run = false;
			for (uint64_t p = r->live.items[i].first; p < r->live.items[i].end; p++) {
				bool rebased = false;
				if (!tsvt_holds(t, d, p)) {
					moves |= LRC_MOVES_UPLOAD;
				} else if (tsvt_is_stale(t, d, p) || tsvt_is_dirty(t, TSVT_CPU, p)) {
					moves |= refresh;
					rebased = refresh == LRC_MOVES_REBASE;
				}
				e.pages += rebased;
				e.runs += rebased && !in_run;
				in_run = rebased;
			}
		}
	}
	if (rebase)
		*rebase = e;
	return moves;
}

int lrc_sync_diff(struct lrc_region *r, int d, struct lrc_plan *plan)
{
	if (d < 0 || d >= TSVT_MAX_DEVICES)
		return -EINVAL;
	if (!r->epoch_open[d])
		return 0;
	const struct range_set *held = &r->tsvt.dev[d].held;
	for (size_t i = 0; i < held->count; i++) {
		int rc = plan_emit(plan, LRC_DIFF, d, 0, held->items[i].first,
				   held->items[i].end - held->items[i].first);
		if (rc)
			return rc;
	}
	return 0;
}

void lrc_device_wrote(struct lrc_region *r, int d, uint64_t first, uint64_t n)
{
	if (d >= 0 && d < TSVT_MAX_DEVICES && r->epoch_open[d])
		tsvt_mark_dirty(&r->tsvt, TSVT_DEV(d), first, n);
}

bool lrc_snapshot_possible(const struct lrc_region *r, int d)
{
	for (int f = 0; f < d && f < TSVT_MAX_DEVICES; f++)
		if (r->epoch_open[f])
			return false;
	return true;
}

static int release_device(struct lrc_region *r, int d, bool snapshot, struct lrc_plan *plan)
{
	struct tsvt *t = &r->tsvt;
	if (d < 0 || d >= TSVT_MAX_DEVICES)
		return -EINVAL;
	if (!r->epoch_open[d])
		return 0;
	if (snapshot && !lrc_snapshot_possible(r, d))
		return -EAGAIN;
	struct page_list *dirty = &r->scratch;
	page_list_clear(dirty);
	int rc = tsvt_take_dirty(t, TSVT_DEV(d), dirty);
	if (rc)
		return rc;

	/* Order matters: merge into the CPU (reads d's base and protect
	 * records), then record d's bytes for lower devices (reads the merged
	 * CPU bytes and d's base), then commit (overwrites d's base). */
	if ((rc = emit_list(plan, LRC_MERGE_TO_CPU, d, snapshot ? LRC_MERGE_COMMITS : 0, dirty)))
		return rc;
	for (int f = 0; !snapshot && f < d; f++) {
		if (!r->epoch_open[f])
			continue;
		for (size_t i = 0; i < dirty->count; i++) {
			uint64_t p = dirty->pages[i];
			if (!device_open_on(r, f, p))
				continue;
			if (!tsvt_has_protect(t, f, p)) {
				if ((rc = page_list_push(&r->protected_pages[f], p)))
					return rc;
				tsvt_set_protect(t, f, p, true);
			}
			if ((rc = plan_emit(plan, LRC_PROTECT_SAVE, d, f, p, 1)))
				return rc;
		}
	}
	if (!snapshot && (rc = emit_list(plan, LRC_COMMIT, d, 0, dirty)))
		return rc;

	/* Versions: the CPU acquires every page d released. d stays current
	 * only where nobody else released the page during its epoch. */
	for (size_t i = 0; i < dirty->count; i++) {
		uint64_t p = dirty->pages[i];
		bool was_current = !tsvt_is_stale(t, d, p);
		tsvt_bump(t, TSVT_CPU, p);
		if (was_current)
			tsvt_set_current(t, d, p);
		if (!snapshot)
			tsvt_set_protect(t, d, p, false);
	}
	if ((r->flags & LRC_SHARED) && (rc = emit_list(plan, LRC_PUBLISH, d, 0, dirty)))
		return rc;
	if (snapshot)
		return 0; /* the epoch goes on, and with it the records of the rest */

	/* Protect records of pages d did not write are no longer needed. */
	struct page_list *records = &r->protected_pages[d];
	for (size_t i = 0; i < records->count; i++) {
		uint64_t p = records->pages[i];
		if (!tsvt_has_protect(t, d, p))
			continue; /* already dropped by a rebase or a commit */
		tsvt_set_protect(t, d, p, false);
		if ((rc = plan_emit(plan, LRC_DROP_PROTECT, d, 0, p, 1)))
			return rc;
	}
	page_list_clear(records);
	r->epoch_open[d] = false;
	return 0;
}

int lrc_sync(struct lrc_region *r, int d, struct lrc_plan *plan)
{
	return release_device(r, d, false, plan);
}

int lrc_sync_snapshot(struct lrc_region *r, int d, struct lrc_plan *plan)
{
	return release_device(r, d, true, plan);
}

int lrc_drop(struct lrc_region *r, uint64_t first, uint64_t n, struct lrc_plan *plan)
{
	struct tsvt *t = &r->tsvt;
	uint64_t end = first + n > t->npages ? t->npages : first + n;
	if (first >= end)
		return 0;
	int rc = range_set_remove(&r->live, first, end);
	if (rc)
		return rc;
	for (int d = 0; d < TSVT_MAX_DEVICES; d++) {
		if (!t->dev[d].attached)
			continue;
		const struct range_set *held = &t->dev[d].held;
		for (size_t i = 0; i < held->count; i++) {
			uint64_t a = held->items[i].first > first ? held->items[i].first : first;
			uint64_t b = held->items[i].end < end ? held->items[i].end : end;
			if (a < b && (rc = plan_emit(plan, LRC_FREE, d, 0, a, b - a)))
				return rc;
		}
		rc = tsvt_unhold(t, d, first, end - first);
		if (rc)
			return rc;
	}
	/* Dropped pages keep no dirty mark; protect list entries for them are
	 * skipped at the sync since their flag is gone with the version word. */
	for (uint64_t p = first; p < end; p++)
		t->pages[p].cpu &= ~TSVT_DIRTY;
	return 0;
}

int lrc_devices_forget_pages(struct lrc_region *r, uint64_t first, uint64_t n, struct lrc_plan *plan)
{
	struct tsvt *t = &r->tsvt;
	uint64_t end = first + n > t->npages ? t->npages : first + n;
	int rc = 0;
	for (int d = 0; d < TSVT_MAX_DEVICES && !rc && first < end; d++) {
		if (!t->dev[d].attached)
			continue;
		rc = plan_emit(plan, LRC_FREE, d, 0, first, end - first);
		if (!rc)
			rc = tsvt_unhold(t, d, first, end - first);
	}
	return rc;
}

int lrc_device_forget(struct lrc_region *r, int d, struct lrc_plan *plan)
{
	struct tsvt *t = &r->tsvt;
	if (d < 0 || d >= TSVT_MAX_DEVICES)
		return -EINVAL;
	if (!t->dev[d].attached)
		return 0;
	const struct range_set *held = &t->dev[d].held;
	int rc = 0;
	for (size_t i = 0; i < held->count && !rc; i++)
		rc = plan_emit(plan, LRC_FREE, d, 0, held->items[i].first,
			       held->items[i].end - held->items[i].first);
	if (!rc)
		rc = tsvt_unhold(t, d, 0, t->npages);
	page_list_clear(&r->protected_pages[d]);
	r->epoch_open[d] = false;
	return rc;
}
