/* The in-memory backends' side of device_ops.diff_start/diff_drop, as the
 * CUDA backend behaves: a queued comparison's answer is the pages as they
 * were when it was queued, and the next diff of exactly the same pages
 * takes it. Header-only, for the unit tests' fake devices. */
#ifndef GAIA_TEST_QUEUED_DIFFS_H
#define GAIA_TEST_QUEUED_DIFFS_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define QUEUED_DIFFS_PAGES 64

struct queued_diffs {
	struct {
		uint64_t first, n;
		bool changed[QUEUED_DIFFS_PAGES];
	} started[QUEUED_DIFFS_PAGES];
	unsigned nstarted, taken;
};

/* Queues the comparison of pages [first, first+n) of dev with base (page
 * size pg). */
static inline int queued_diff_start(struct queued_diffs *q, const uint8_t *dev, const uint8_t *base, size_t pg,
				    uint64_t first, uint64_t n)
{
	if (q->nstarted == QUEUED_DIFFS_PAGES || first + n > QUEUED_DIFFS_PAGES)
		return -ENOSPC;
	q->started[q->nstarted].first = first;
	q->started[q->nstarted].n = n;
	for (uint64_t p = first; p < first + n; p++)
		q->started[q->nstarted].changed[p] = memcmp(dev + p * pg, base + p * pg, pg) != 0;
	q->nstarted++;
	return 0;
}

/* Whether an answer for exactly these pages was queued: it is then
 * reported (changed per page) and no longer queued. */
static inline bool queued_diff_take(struct queued_diffs *q, uint64_t first, uint64_t n,
				    void (*changed)(uint64_t, uint64_t, void *), void *arg)
{
	for (unsigned i = 0; i < q->nstarted; i++) {
		if (q->started[i].first != first || q->started[i].n != n)
			continue;
		for (uint64_t p = first; p < first + n; p++)
			if (q->started[i].changed[p])
				changed(p, 1, arg);
		q->started[i] = q->started[--q->nstarted];
		q->taken++;
		return true;
	}
	return false;
}

#endif
