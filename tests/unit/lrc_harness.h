/* The engine driven on plain byte buffers: the file (the page cache, the
 * CPU replica of a MAP_SHARED region), and per device its replica, its base
 * copies and its protect records, moved exactly as the engine's plans say
 * (lrc_page.h gives each action's byte-level meaning). Shared by the unit
 * tests of lrc and the model test; header-only, every function static. */
#ifndef GAIA_TEST_LRC_HARNESS_H
#define GAIA_TEST_LRC_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lrc.h"
#include "lrc_page.h"

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
	uint8_t file[MAX_BYTES]; /* the page cache: the CPU replica */
	uint8_t dev[NDEV][MAX_BYTES];
	uint8_t base[NDEV][MAX_BYTES];
	struct lrc_protect *prot[NDEV][MAX_PAGES];
	bool external[MAX_PAGES]; /* changed by another process, not yet learned */
	uint32_t published[MAX_PAGES];
	int epoch_age[NDEV];  /* ops since the launch that opened the epoch; -1 closed */
	struct lrc_plan plan;
	uint64_t stats_merged_bytes, stats_uploaded_pages;
};

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

/* Moves the bytes exactly as the plan says. */
static inline void run_plan(struct harness *h)
{
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
}

static inline void harness_close(struct harness *h)
{
	for (int d = 0; d < NDEV; d++)
		for (int p = 0; p < MAX_PAGES; p++)
			prot_drop(h, d, (uint64_t)p);
	lrc_region_destroy(&h->region);
	h->region_live = false;
}

#endif
