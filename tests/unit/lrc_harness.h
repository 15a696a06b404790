/* The engine driven on plain byte buffers: the file (the page cache, the
 * CPU replica of a MAP_SHARED region), and per device its replica, its base
 * copies and its protect records, moved exactly as the engine's plans say
 * (lrc_page.h gives each action's byte-level meaning). Shared by the unit
 * tests of lrc and the model test; header-only, every function static. */
#ifndef GAIA_TEST_LRC_HARNESS_H
#define GAIA_TEST_LRC_HARNESS_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../shim/kernels/diff_pages.h"
#include "device.h"
#include "lrc.h"
#include "lrc_page.h"
#include "queued_diffs.h"

#define PG MERGE_PAGE_BYTES
#define MAX_PAGES 8
#define NDEV 3
#define MAX_BYTES (MAX_PAGES * PG)


struct harness {
	struct lrc_region region;
	bool region_live;
	unsigned flags;
	uint32_t npages;       /* file pages; the region maps [0, npages) */
	bool mapped[MAX_PAGES]; /* pages still mapped after partial munmaps */
	uint32_t nmapped;
	_Alignas(8) uint8_t file[MAX_BYTES]; /* the page cache: the CPU replica */
	_Alignas(8) uint8_t dev[NDEV][MAX_BYTES];
	_Alignas(8) uint8_t base[NDEV][MAX_BYTES];
	struct lrc_protect *prot[NDEV][MAX_PAGES];
	bool external[MAX_PAGES]; /* changed by another process, not yet learned */
	uint32_t published[MAX_PAGES];
	int epoch_age[NDEV];  /* ops since the launch that opened the epoch; -1 closed */
	struct lrc_plan plan;
	uint64_t stats_merged_bytes, stats_uploaded_pages;
	/* HARNESS_EXEC_*: plans carried out by the shim's executor
	 * (device_exec_run) on devices whose memory is dev[] and base[], its
	 * own protect records, and (GATHER) diffs brought down as masks and
	 * rebases without protect records by the shim's kernel body. */
	int exec_mode;
	struct device_exec x;
	struct harness_dev {
		struct harness *h;
		int d;
		struct queued_diffs queued; /* diff_start's answers */
	} xdev[NDEV];
};

enum { HARNESS_BYTES = 0, HARNESS_EXEC = 1, HARNESS_EXEC_GATHER = 2 };

static inline struct lrc_protect *prot_get(struct harness *h, int d, uint64_t p)
{
	if (!h->prot[d][p]) {
		h->prot[d][p] = calloc(1, sizeof(struct lrc_protect));
		assert_non_null(h->prot[d][p]);
	}
	return h->prot[d][p];
}

static inline void prot_drop(struct harness *h, int d, uint64_t p)
{
	free(h->prot[d][p]);
	h->prot[d][p] = NULL;
}

/* The executor's device operations on the harness's buffers. */
static int hx_upload(void *rep, unsigned to, uint64_t first, uint64_t n, const void *src)
{
	struct harness_dev *v = rep;
	if (to & DEVICE_REPLICA)
		memcpy(v->h->dev[v->d] + first * PG, src, n * PG);
	if (to & DEVICE_BASE)
		memcpy(v->h->base[v->d] + first * PG, src, n * PG);
	if (to & DEVICE_REPLICA)
		v->h->stats_uploaded_pages += n;
	return 0;
}

static int hx_download(void *rep, unsigned from, uint64_t first, uint64_t n, void *dst)
{
	struct harness_dev *v = rep;
	memcpy(dst, (from == DEVICE_BASE ? v->h->base[v->d] : v->h->dev[v->d]) + first * PG, n * PG);
	return 0;
}

static int hx_commit(void *rep, uint64_t first, uint64_t n)
{
	struct harness_dev *v = rep;
	memcpy(v->h->base[v->d] + first * PG, v->h->dev[v->d] + first * PG, n * PG);
	return 0;
}

static int hx_diff(void *rep, uint64_t first, uint64_t n, void (*changed)(uint64_t, uint64_t, void *),
		   void *arg)
{
	struct harness_dev *v = rep;
	if (queued_diff_take(&v->queued, first, n, changed, arg))
		return 0;
	for (uint64_t p = first; p < first + n; p++)
		if (merge_page_differs(v->h->dev[v->d] + p * PG, v->h->base[v->d] + p * PG))
			changed(p, 1, arg);
	return 0;
}

static int hx_fetch_changes(void *rep, const uint64_t *pages, uint64_t n, void *dev_out,
			    uint8_t *mask_out)
{
	struct harness_dev *v = rep;
	for (uint64_t i = 0; i < n; i++) {
		const uint8_t *d = v->h->dev[v->d] + pages[i] * PG, *b = v->h->base[v->d] + pages[i] * PG;
		memcpy((uint8_t *)dev_out + i * PG, d, PG);
		uint8_t *m = mask_out + i * (PG / 8);
		memset(m, 0, PG / 8);
		for (unsigned k = 0; k < PG; k++)
			if (d[k] != b[k])
				m[k / 8] |= (uint8_t)(1u << (k % 8));
	}
	return 0;
}

/* The shim's rebase kernel body (shim/kernels/diff_pages.h), word by word. */
static int hx_rebase(void *rep, uint64_t first, uint64_t n, const void *cpu)
{
	struct harness_dev *v = rep;
	for (uint64_t w = 0; w < n * GAIA_DIFF_WORDS_PER_PAGE; w++)
		gaia_rebase_word_at((unsigned long long *)v->h->dev[v->d],
				    (unsigned long long *)v->h->base[v->d], first,
				    (const unsigned long long *)cpu, w);
	return 0;
}

static int hx_diff_start(void *rep, uint64_t first, uint64_t n)
{
	struct harness_dev *v = rep;
	return queued_diff_start(&v->queued, v->h->dev[v->d], v->h->base[v->d], PG, first, n);
}

static void hx_diff_drop(void *rep)
{
	((struct harness_dev *)rep)->queued.nstarted = 0;
}

static const struct device_ops harness_exec_ops = {
	.upload = hx_upload,
	.download = hx_download,
	.commit = hx_commit,
	.diff = hx_diff,
	.diff_start = hx_diff_start,
	.diff_drop = hx_diff_drop,
};
/* (GATHER: the device does what it can: diffs come down as masks, rebases
 * run there.) */
static const struct device_ops harness_exec_gather_ops = {
	.upload = hx_upload,
	.download = hx_download,
	.commit = hx_commit,
	.diff = hx_diff,
	.fetch_changes = hx_fetch_changes,
	.rebase = hx_rebase,
	.diff_start = hx_diff_start,
	.diff_drop = hx_diff_drop,
};

static void hx_publish(void *arg, uint64_t first, uint64_t n)
{
	struct harness *h = arg;
	for (uint64_t p = first; p < first + n; p++)
		h->published[p]++;
}

/* Moves the bytes exactly as the plan says (take_started_of >= 0: a sync's
 * diff plan on that device, taking the answers queued before its wait). */
static inline void run_plan_as(struct harness *h, int take_started_of)
{
	if (h->exec_mode != HARNESS_BYTES) {
		uint64_t merged = h->x.merged_bytes;
		assert_int_equal(take_started_of >= 0
					 ? device_exec_run_diffs(&h->x, take_started_of, &h->region, &h->plan)
					      : device_exec_run(&h->x, &h->region, &h->plan),
				 0);
		h->stats_merged_bytes += h->x.merged_bytes - merged;
		return;
	}
	for (size_t i = 0; i < h->plan.count; i++) {
		const struct lrc_action *a = &h->plan.items[i];
		int d = a->dev;
		for (uint64_t p = a->first; p < a->first + a->npages; p++) {
			assert_true(p < h->npages);
			uint8_t *cpu = h->file + p * PG, *dev = h->dev[d] + p * PG,
				*base = h->base[d] + p * PG;
			switch ((enum lrc_action_kind)a->kind) {
			case LRC_PUBLISH:
				h->published[p]++;
				break;
			case LRC_PROTECT_REFRESH:
				assert_non_null(h->prot[d][p]);
				lrc_page_protect_refresh(h->prot[d][p], cpu);
				break;
			case LRC_UPLOAD:
				lrc_page_upload(dev, (h->flags & LRC_WRITABLE) ? base : NULL, cpu);
				h->stats_uploaded_pages++;
				break;
			case LRC_REBASE:
				lrc_page_rebase(dev, base, cpu, h->prot[d][p]);
				prot_drop(h, d, p);
				break;
			case LRC_DIFF:
				if (merge_page_differs(dev, base))
					lrc_device_wrote(&h->region, d, p, 1);
				break;
			case LRC_MERGE_TO_CPU:
				h->stats_merged_bytes += lrc_page_merge_to_cpu(cpu, dev, base, h->prot[d][p]);
				if (a->other == LRC_MERGE_COMMITS) /* a snapshot release */
					memcpy(base, dev, PG);
				break;
			case LRC_PROTECT_SAVE:
				lrc_page_protect_save(prot_get(h, a->other, p), dev, base, cpu);
				break;
			case LRC_COMMIT:
				memcpy(base, dev, PG);
				prot_drop(h, d, p);
				break;
			case LRC_DROP_PROTECT:
				prot_drop(h, d, p);
				break;
			case LRC_FREE:
				memset(dev, 0xa5, PG); /* poison: a later read of it must not pass */
				memset(base, 0x5a, PG);
				prot_drop(h, d, p);
				break;
			default:
				fail_msg("unknown action %d", a->kind);
			}
		}
	}
	lrc_plan_reset(&h->plan);
}

static inline void run_plan(struct harness *h)
{
	run_plan_as(h, -1);
}

static inline void harness_open(struct harness *h)
{
	assert_int_equal(lrc_region_init(&h->region, h->npages, h->flags), 0);
	h->region_live = true;
	for (uint32_t p = 0; p < MAX_PAGES; p++)
		h->mapped[p] = p < h->npages;
	h->nmapped = h->npages;
	for (int d = 0; d < NDEV; d++) {
		memset(h->dev[d], 0xa5, sizeof(h->dev[d]));
		memset(h->base[d], 0x5a, sizeof(h->base[d]));
		h->epoch_age[d] = -1;
	}
	if (h->exec_mode != HARNESS_BYTES) {
		memset(&h->x, 0, sizeof(h->x));
		h->x.ops = h->exec_mode == HARNESS_EXEC_GATHER ? &harness_exec_gather_ops : &harness_exec_ops;
		h->x.cpu = h->file;
		h->x.cpu_store = h->file;
		h->x.writable = (h->flags & LRC_WRITABLE) != 0;
		h->x.valid_pages = h->npages;
		h->x.publish = hx_publish;
		h->x.arg = h;
		for (int d = 0; d < NDEV; d++) {
			h->xdev[d] = (struct harness_dev){.h = h, .d = d};
			h->x.replica[d] = &h->xdev[d];
		}
	}
}

static inline void harness_close(struct harness *h)
{
	for (int d = 0; d < NDEV; d++)
		for (int p = 0; p < MAX_PAGES; p++)
			prot_drop(h, d, (uint64_t)p);
	if (h->exec_mode != HARNESS_BYTES)
		device_exec_destroy(&h->x);
	lrc_region_destroy(&h->region);
	h->region_live = false;
}

#endif
