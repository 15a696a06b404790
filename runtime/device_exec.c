/* Carrying out the engine's plans on device replicas (device.h).
 *
 * Which bytes move where is lrc_page.h's; this file only decides how many
 * pages travel per transfer. Uploads and commits go straight to the
 * backend as whole ranges (one transfer per coalesced range). Actions
 * whose rule needs the device's bytes on the host (merge, rebase, protect
 * save) fetch the replica and base pages in batches of
 * DEVICE_STAGING_PAGES: a sync downloads only the pages the diff found
 * changed.
 */
#include "device.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PG MERGE_PAGE_BYTES

/* Below both, a sync's merges fetch replica and base per run. */
#define GATHER_MIN_RUNS 2
#define GATHER_MIN_PAGES 256

/* --- protect records --- */

static size_t protect_find(const struct protect_map *m, uint64_t page, bool *found)
{
	size_t lo = 0, hi = m->count;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->items[mid].page < page)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = lo < m->count && m->items[lo].page == page;
	return lo;
}

static struct lrc_protect *protect_get(const struct protect_map *m, uint64_t page)
{
	bool found;
	size_t i = protect_find(m, page, &found);
	return found ? m->items[i].rec : NULL;
}

static struct lrc_protect *protect_get_or_add(struct protect_map *m, uint64_t page)
{
	bool found;
	size_t i = protect_find(m, page, &found);
	if (found)
		return m->items[i].rec;
	if (m->count == m->capacity) {
		size_t cap = m->capacity ? m->capacity * 2 : 16;
		struct protect_entry *items = realloc(m->items, cap * sizeof(*items));
		if (!items)
			return NULL;
		m->items = items;
		m->capacity = cap;
	}
	struct lrc_protect *rec = calloc(1, sizeof(*rec));
	if (!rec)
		return NULL;
	memmove(&m->items[i + 1], &m->items[i], (m->count - i) * sizeof(m->items[0]));
	m->items[i] = (struct protect_entry){page, rec};
	m->count++;
	return rec;
}

static void protect_drop(struct protect_map *m, uint64_t first, uint64_t n)
{
	if (!m->count)
		return;
	bool found;
	size_t i = protect_find(m, first, &found), j = i;
	while (j < m->count && m->items[j].page < first + n)
		free(m->items[j++].rec);
	memmove(&m->items[i], &m->items[j], (m->count - j) * sizeof(m->items[0]));
	m->count -= j - i;
}

void device_exec_forget(struct device_exec *x, int d)
{
	protect_drop(&x->prot[d], 0, UINT64_MAX);
}

void device_exec_destroy(struct device_exec *x)
{
	for (int d = 0; d < TSVT_MAX_DEVICES; d++) {
		device_exec_forget(x, d);
		free(x->prot[d].items);
		x->prot[d] = (struct protect_map){0};
	}
	free(x->staging);
	free(x->masks);
	free(x->page_list);
	x->staging = NULL;
	x->masks = NULL;
	x->page_list = NULL;
}

/* --- actions --- */

static int staging(struct device_exec *x)
{
	if (!x->staging)
		x->staging = malloc(2ul * DEVICE_STAGING_PAGES * PG);
	return x->staging ? 0 : -ENOMEM;
}

/* Fetches replica and base of [first, first+n) (n <= staging) into the
 * two halves of the staging area. */
static int fetch_pair(struct device_exec *x, void *rep, uint64_t first, uint64_t n)
{
	uint8_t *dev = x->staging, *base = x->staging + (size_t)DEVICE_STAGING_PAGES * PG;
	int rc = x->ops->download(rep, DEVICE_REPLICA, first, n, dev);
	if (!rc)
		rc = x->ops->download(rep, DEVICE_BASE, first, n, base);
	if (!rc)
		x->downloaded_pages += 2 * n;
	return rc;
}

/* Whether a merge may store into CPU page p (device.h: valid_pages,
 * no_store). */
static bool may_store(const struct device_exec *x, uint64_t p)
{
	if (p >= x->valid_pages)
		return false;
	return !x->no_store || p >= x->no_store_pages || !(x->no_store[p / 64] >> (p % 64) & 1);
}

/* Whether the CPU side of page p may be read (device.h: no_load). */
static bool may_load(const struct device_exec *x, uint64_t p)
{
	return !x->no_load || p >= x->no_load_pages || !(x->no_load[p / 64] >> (p % 64) & 1);
}

/* A snapshot release's merge: base := the device bytes just merged (the
 * device may have changed them since). The protect records stay, for the
 * rest of the epoch. */
static int commit_merged(struct device_exec *x, int d, uint64_t first, uint64_t npages,
			 const uint8_t *dev)
{
	return x->ops->upload(x->replica[d], DEVICE_BASE, first, npages, dev);
}

static int merge_to_cpu(struct device_exec *x, int d, uint64_t first, uint64_t npages, bool commit)
{
	uint8_t *dev = x->staging, *base = x->staging + (size_t)DEVICE_STAGING_PAGES * PG;
	for (uint64_t done = 0; done < npages;) {
		uint64_t n = npages - done < DEVICE_STAGING_PAGES ? npages - done : DEVICE_STAGING_PAGES;
		int rc = fetch_pair(x, x->replica[d], first + done, n);
		if (rc)
			return rc;
		if (x->storing && first + done < x->valid_pages)
			x->storing(x->arg, first + done,
				   first + done + n <= x->valid_pages ? n : x->valid_pages - first - done);
		for (uint64_t i = 0; i < n; i++) {
			uint64_t p = first + done + i;
			if (p >= x->valid_pages)
				break;
			if (!may_store(x, p))
				continue;
			const struct lrc_protect *prot = protect_get(&x->prot[d], p);
			x->conflict_bytes += lrc_page_conflicts(x->cpu_store + p * PG, dev + i * PG,
								base + i * PG, prot);
			uint64_t bytes = lrc_page_merge_to_cpu(x->cpu_store + p * PG, dev + i * PG,
							       base + i * PG, prot);
			x->merged_bytes += bytes;
			x->merged_pages += bytes != 0;
		}
		if (x->stored && first + done < x->valid_pages)
			x->stored(x->arg, first + done,
				  first + done + n <= x->valid_pages ? n : x->valid_pages - first - done);
		if (commit && (rc = commit_merged(x, d, first + done, n, dev)))
			return rc;
		done += n;
	}
	return 0;
}

static int protect_save(struct device_exec *x, int d, int other, uint64_t first, uint64_t npages)
{
	uint8_t *dev = x->staging, *base = x->staging + (size_t)DEVICE_STAGING_PAGES * PG;
	for (uint64_t done = 0; done < npages;) {
		uint64_t n = npages - done < DEVICE_STAGING_PAGES ? npages - done : DEVICE_STAGING_PAGES;
		int rc = fetch_pair(x, x->replica[d], first + done, n);
		if (rc)
			return rc;
		for (uint64_t i = 0; i < n && first + done + i < x->valid_pages; i++) {
			uint64_t p = first + done + i;
			if (!may_load(x, p))
				continue; /* (its writes are dropped: nothing to protect) */
			struct lrc_protect *rec = protect_get_or_add(&x->prot[other], p);
			if (!rec)
				return -ENOMEM;
			lrc_page_protect_save(rec, dev + i * PG, base + i * PG, x->cpu + p * PG);
		}
		done += n;
	}
	return 0;
}

static bool any_protect(const struct protect_map *m, uint64_t first, uint64_t n)
{
	bool found;
	size_t i = protect_find(m, first, &found);
	return i < m->count && m->items[i].page < first + n;
}

static int rebase_loadable(struct device_exec *x, int d, uint64_t first, uint64_t npages);

/* The rebase rule needs the device's bytes and the CPU's together. Without
 * protect records the backend applies it where the bytes are (ops->rebase);
 * else fetch, apply on the host, put both copies back. Only a launch that
 * follows another launch with no sync, where the CPU wrote meanwhile. */
static int rebase(struct device_exec *x, int d, uint64_t first, uint64_t npages)
{
	uint64_t inside = first >= x->valid_pages ? 0
			  : (first + npages <= x->valid_pages ? npages : x->valid_pages - first);
	/* Pages the CPU side cannot read keep the device's bytes: the runs
	 * between them are rebased one by one. */
	if (x->no_load) {
		bool split = false;
		for (uint64_t p = first; p < first + inside && !split; p++)
			split = !may_load(x, p);
		for (uint64_t p = first; split && p < first + inside;) {
			while (p < first + inside && !may_load(x, p))
				p++;
			uint64_t end = p;
			while (end < first + inside && may_load(x, end))
				end++;
			int rc = end > p ? rebase_loadable(x, d, p, end - p) : 0;
			if (rc)
				return rc;
			p = end;
		}
		if (split)
			return 0;
	}
	return rebase_loadable(x, d, first, inside);
}

/* rebase() of pages the CPU side may all be read (inside the file). */
static int rebase_loadable(struct device_exec *x, int d, uint64_t first, uint64_t npages)
{
	uint64_t inside = npages;
	if (x->ops->rebase && !any_protect(&x->prot[d], first, npages)) {
		/* Pages past the end of the file keep their bytes, as below. */
		int rc = inside ? x->ops->rebase(x->replica[d], first, inside, x->cpu + first * PG) : 0;
		if (rc != -ENOTSUP) {
			if (!rc && inside) {
				x->uploaded_pages += inside;
				x->upload_transfers++;
			}
			return rc;
		}
	}
	int rc = staging(x);
	if (rc)
		return rc;
	uint8_t *dev = x->staging, *base = x->staging + (size_t)DEVICE_STAGING_PAGES * PG;
	for (uint64_t done = 0; done < npages;) {
		uint64_t n = npages - done < DEVICE_STAGING_PAGES ? npages - done : DEVICE_STAGING_PAGES;
		uint64_t at = first + done;
		rc = fetch_pair(x, x->replica[d], at, n);
		if (rc)
			return rc;
		for (uint64_t i = 0; i < n && at + i < x->valid_pages; i++)
			lrc_page_rebase(dev + i * PG, base + i * PG, x->cpu + (at + i) * PG,
					protect_get(&x->prot[d], at + i));
		rc = x->ops->upload(x->replica[d], DEVICE_REPLICA, at, n, dev);
		if (!rc)
			rc = x->ops->upload(x->replica[d], DEVICE_BASE, at, n, base);
		if (rc)
			return rc;
		x->uploaded_pages += 2 * n;
		x->upload_transfers += 2;
		protect_drop(&x->prot[d], at, n);
		done += n;
	}
	return 0;
}

static int upload(struct device_exec *x, void *rep, uint64_t first, uint64_t npages)
{
	unsigned to = DEVICE_REPLICA | (x->writable ? DEVICE_BASE : 0);
	uint64_t inside = first >= x->valid_pages ? 0
			  : (first + npages <= x->valid_pages ? npages : x->valid_pages - first);
	int rc = 0;
	/* Pages the CPU side cannot read split the range: zeros there. */
	bool split = false;
	for (uint64_t p = first; x->no_load && p < first + inside && !split; p++)
		split = !may_load(x, p);
	for (uint64_t p = first; split && p < first + inside && !rc;) {
		uint64_t end = p;
		bool loadable = may_load(x, p);
		while (end < first + inside && may_load(x, end) == loadable)
			end++;
		if (loadable) {
			rc = x->ops->upload(rep, to, p, end - p, x->cpu + p * PG);
			if (!rc) {
				x->uploaded_pages += end - p;
				x->upload_transfers++;
			}
		} else if (!(rc = staging(x))) {
			for (uint64_t at = p; at < end && !rc;) {
				uint64_t n = end - at < DEVICE_STAGING_PAGES ? end - at : DEVICE_STAGING_PAGES;
				memset(x->staging, 0, n * PG);
				rc = x->ops->upload(rep, to, at, n, x->staging);
				at += n;
			}
		}
		p = end;
	}
	if (!split && inside) {
		rc = x->ops->upload(rep, to, first, inside, x->cpu + first * PG);
		if (!rc) {
			x->uploaded_pages += inside;
			x->upload_transfers++;
		}
	}
	/* Past the end of the file the CPU side would fault: zeros. */
	for (uint64_t done = inside; !rc && done < npages;) {
		if ((rc = staging(x)))
			break;
		uint64_t n = npages - done < DEVICE_STAGING_PAGES ? npages - done : DEVICE_STAGING_PAGES;
		memset(x->staging, 0, n * PG);
		rc = x->ops->upload(rep, to, first + done, n, x->staging);
		done += n;
	}
	return rc;
}

struct diff_report {
	struct lrc_region *engine;
	int d;
};

static void report_changed(uint64_t first, uint64_t n, void *arg)
{
	struct diff_report *r = arg;
	lrc_device_wrote(r->engine, r->d, first, n);
}

static int run_action(struct device_exec *x, struct lrc_region *engine, const struct lrc_action *a)
{
	int d = a->dev;
	void *rep = x->replica[d];
	switch ((enum lrc_action_kind)a->kind) {
	case LRC_PUBLISH:
		if (x->publish)
			x->publish(x->arg, a->first, a->npages);
		return 0;
	case LRC_PROTECT_REFRESH:
		for (uint64_t p = a->first; p < a->first + a->npages; p++) {
			struct lrc_protect *rec = protect_get(&x->prot[d], p);
			if (rec && p < x->valid_pages && may_load(x, p))
				lrc_page_protect_refresh(rec, x->cpu + p * PG);
		}
		return 0;
	case LRC_DROP_PROTECT:
		protect_drop(&x->prot[d], a->first, a->npages);
		return 0;
	case LRC_FREE:
		/* The replica's memory stays until the replica goes: the pages
		 * are simply never read again. */
		protect_drop(&x->prot[d], a->first, a->npages);
		return 0;
	default:
		break;
	}
	if (!rep)
		return -ENODEV;
	switch ((enum lrc_action_kind)a->kind) {
	case LRC_UPLOAD:
		return upload(x, rep, a->first, a->npages);
	case LRC_REBASE:
		return rebase(x, d, a->first, a->npages);
	case LRC_DIFF: {
		struct diff_report r = {engine, d};
		return x->ops->diff(rep, a->first, a->npages, report_changed, &r);
	}
	case LRC_MERGE_TO_CPU:
		return staging(x) ?: merge_to_cpu(x, d, a->first, a->npages, a->other == LRC_MERGE_COMMITS);
	case LRC_PROTECT_SAVE:
		return staging(x) ?: protect_save(x, d, a->other, a->first, a->npages);
	case LRC_COMMIT:
		protect_drop(&x->prot[d], a->first, a->npages);
		return x->ops->commit(rep, a->first, a->npages);
	default:
		return -EINVAL;
	}
}


/* The merges of a sync, gathered: every page of the consecutive
 * MERGE_TO_CPU actions [from, to) of one device (and one `other`) comes down in batches of
 * DEVICE_STAGING_PAGES with its byte mask, in one download each however
 * scattered the pages are. The mask stands for the base: a base equal to
 * the device's page except, flipped, in the changed bytes gives the merge
 * rule exactly those bytes. -ENOTSUP: the backend cannot. Never a
 * snapshot release's merges (device_exec_run). */
static int merge_gathered(struct device_exec *x, const struct lrc_action *acts, size_t count)
{
	int d = acts[0].dev;
	if (!x->ops->fetch_changes || !x->replica[d])
		return -ENOTSUP;
	/* A few runs come down as well in two transfers each, without the
	 * gather's own upload and launch. */
	uint64_t total = 0;
	for (size_t i = 0; i < count; i++)
		total += acts[i].npages;
	if (count <= GATHER_MIN_RUNS && total < GATHER_MIN_PAGES)
		return -ENOTSUP;
	int rc = staging(x);
	if (rc)
		return rc;
	if (!x->masks)
		x->masks = malloc((size_t)DEVICE_STAGING_PAGES * (PG / 8));
	if (!x->page_list)
		x->page_list = malloc(DEVICE_STAGING_PAGES * sizeof(uint64_t));
	if (!x->masks || !x->page_list)
		return -ENOMEM;
	uint8_t *dev = x->staging, *base = x->staging + (size_t)DEVICE_STAGING_PAGES * PG;
	size_t a = 0;
	uint64_t next = acts[0].first;
	while (a < count) {
		uint64_t n = 0;
		while (a < count && n < DEVICE_STAGING_PAGES) {
			if (next >= acts[a].first + acts[a].npages) {
				if (++a < count)
					next = acts[a].first;
				continue;
			}
			if (may_store(x, next))
				x->page_list[n++] = next;
			next++;
		}
		if (!n)
			break;
		rc = x->ops->fetch_changes(x->replica[d], x->page_list, n, dev, x->masks);
		if (rc)
			return rc;
		x->downloaded_pages += n;
		for (uint64_t i = 0, run = 0; x->storing && i < n; i++) {
			if (i + 1 == n || x->page_list[i + 1] != x->page_list[i] + 1) {
				x->storing(x->arg, x->page_list[run], i + 1 - run);
				run = i + 1;
			}
		}
		for (uint64_t i = 0; i < n; i++) {
			uint64_t p = x->page_list[i];
			const uint8_t *m = x->masks + i * (PG / 8);
			uint8_t *dp = dev + i * PG;
			const struct lrc_protect *prot = protect_get(&x->prot[d], p);
			uint64_t bytes;
			if (!prot) {
				bytes = merge_page_masked(x->cpu_store + p * PG, dp, m);
			} else {
				uint8_t *bp = base + i * PG;
				for (unsigned k = 0; k < PG; k++)
					bp[k] = (m[k / 8] >> (k % 8) & 1) ? (uint8_t)~dp[k] : dp[k];
				x->conflict_bytes += lrc_page_conflicts(x->cpu_store + p * PG, dp, bp, prot);
				bytes = lrc_page_merge_to_cpu(x->cpu_store + p * PG, dp, bp, prot);
			}
			x->merged_bytes += bytes;
			x->merged_pages += bytes != 0;
		}
		/* The shim stored into these pages: tell the caller, in runs. */
		for (uint64_t i = 0, run = 0; x->stored && i < n; i++) {
			if (i + 1 == n || x->page_list[i + 1] != x->page_list[i] + 1) {
				x->stored(x->arg, x->page_list[run], i + 1 - run);
				run = i + 1;
			}
		}
	}
	return 0;
}

/* Merges that failed in this run: the commits of their pages are held
 * back, so the device keeps those changes against its base and the next
 * sync's diff finds them again (a commit would make them the base and
 * lose them). */
#define FAILED_MERGES_MAX 16
struct failed_merges {
	size_t count;
	struct {
		int dev;
		uint64_t first, end;
	} r[FAILED_MERGES_MAX];
	bool all[TSVT_MAX_DEVICES]; /* more than fit: every commit of the device waits */
};

static void note_failed_merge(struct failed_merges *f, const struct lrc_action *a)
{
	if (f->count == FAILED_MERGES_MAX) {
		f->all[a->dev] = true;
		return;
	}
	f->r[f->count].dev = a->dev;
	f->r[f->count].first = a->first;
	f->r[f->count].end = a->first + a->npages;
	f->count++;
}

/* Commits the parts of `a` no failed merge covers. */
static int commit_around(struct device_exec *x, struct lrc_region *engine, const struct lrc_action *a,
			 const struct failed_merges *f)
{
	if (f->all[a->dev])
		return 0;
	uint64_t p = a->first, end = a->first + a->npages;
	int first_rc = 0;
	while (p < end) {
		/* The next failed page at or after p, and where its range ends. */
		uint64_t hole = end, hole_end = end;
		for (size_t i = 0; i < f->count; i++)
			if (f->r[i].dev == a->dev && f->r[i].end > p && f->r[i].first < hole) {
				hole = f->r[i].first > p ? f->r[i].first : p;
				hole_end = f->r[i].end < end ? f->r[i].end : end;
			}
		if (hole > p) {
			struct lrc_action part = *a;
			part.first = p;
			part.npages = hole - p;
			int rc = run_action(x, engine, &part);
			if (rc && !first_rc)
				first_rc = rc;
		}
		p = hole_end > hole ? hole_end : hole;
	}
	return first_rc;
}

/* Every action is tried twice before it counts as failed (a transient
 * driver error costs a retry, not data). A diff that still fails counts
 * every page of its range as changed, so the merge compares them all; a
 * gather that fails gives way to page-by-page merges; a merge that still
 * fails holds back its pages' commits (failed_merges) and is reported. */
/* The answers diff_start queued for device d: dropped before a run's
 * first diff there unless the run takes them (device_exec_run_diffs,
 * which drops what it left after). */
static void drop_started(struct device_exec *x, int d)
{
	if (x->ops->diff_start && x->ops->diff_drop && x->replica[d])
		x->ops->diff_drop(x->replica[d]);
}

void device_exec_start_diffs(struct device_exec *x, int d, struct lrc_plan *plan)
{
	/* Answers of an earlier sync that its release never took are no
	 * answers for this one. */
	if (d >= 0 && d < TSVT_MAX_DEVICES)
		drop_started(x, d);
	for (size_t i = 0; x->ops->diff_start && i < plan->count; i++) {
		const struct lrc_action *a = &plan->items[i];
		/* One that is not queued compares when the release runs. */
		if (a->kind == LRC_DIFF && a->dev == d && x->replica[d])
			(void)x->ops->diff_start(x->replica[d], a->first, a->npages);
	}
	lrc_plan_reset(plan);
}

int device_exec_run_diffs(struct device_exec *x, int d, struct lrc_region *engine, struct lrc_plan *plan)
{
	x->take_started = true;
	int rc = device_exec_run(x, engine, plan);
	x->take_started = false;
	/* Whatever this sync's release did not take (its plan may have had
	 * no diff at all). */
	if (d >= 0 && d < TSVT_MAX_DEVICES)
		drop_started(x, d);
	return rc;
}

int device_exec_run(struct device_exec *x, struct lrc_region *engine, struct lrc_plan *plan)
{
	int first_rc = 0;
	bool gather_failed = false;
	struct failed_merges failed = {0};
	bool dropped[TSVT_MAX_DEVICES] = {false};
	for (size_t i = 0; i < plan->count; i++) {
		const struct lrc_action *act = &plan->items[i];
		/* Queued answers serve only device_exec_run_diffs (which drops
		 * what it did not take itself). */
		if (act->kind == LRC_DIFF && !x->take_started && act->dev < TSVT_MAX_DEVICES &&
		    !dropped[act->dev]) {
			dropped[act->dev] = true;
			drop_started(x, act->dev);
		}
		/* A snapshot release's merges come down as replica and base, by
		 * copies: the gather is a kernel, and the program's kernels
		 * still running may leave it no room on the device (the host
		 * holds its lock here). */
		if (act->kind == LRC_MERGE_TO_CPU && !gather_failed && act->other != LRC_MERGE_COMMITS) {
			size_t j = i + 1;
			while (j < plan->count && plan->items[j].kind == LRC_MERGE_TO_CPU &&
			       plan->items[j].dev == act->dev && plan->items[j].other == act->other)
				j++;
			int rc = merge_gathered(x, act, j - i);
			if (rc == 0) {
				i = j - 1;
				continue;
			}
			/* Page by page from here (a gather that failed half-way
			 * stored some bytes already: merging again stores the
			 * same ones). */
			gather_failed = rc != -ENOTSUP;
		}
		int rc;
		if (act->kind == LRC_COMMIT && (failed.count || failed.all[act->dev])) {
			rc = commit_around(x, engine, act, &failed);
		} else {
			rc = run_action(x, engine, act);
			if (rc && rc != -ENODEV && rc != -EINVAL)
				rc = run_action(x, engine, act);
		}
		if (rc && act->kind == LRC_DIFF) {
			lrc_device_wrote(engine, act->dev, act->first, act->npages);
			rc = 0;
		}
		if (rc && act->kind == LRC_MERGE_TO_CPU)
			note_failed_merge(&failed, act);
		if (rc && !first_rc)
			first_rc = rc;
	}
	lrc_plan_reset(plan);
	return first_rc;
}
