/* Where kernels faulted on a region, learned from fault records at syncs
 * (gpu_faults.c), and the windows that bring it back ahead of the next
 * launch: a replica paged on demand prefetches them to its device (mode
 * M), a region read through HMM reads them ahead into the page cache (mode
 * H).
 * The set is per 64 KiB unit, the learning round of the unit's latest
 * fault (a round is one full release at which kernels had faulted). Not
 * locked: the caller holds the mapping lock. */
#ifndef GAIA_GPU_LEARNED_H
#define GAIA_GPU_LEARNED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shim.h"

/* What a fault record names: the unit of a learned set. */
#define CUDA_FAULT_UNIT (64u << 10)
/* A set is the units faulted on in its last CUDA_LEARNED_ROUNDS rounds: a
 * working set that stops faulting (being brought ahead) stays, one the
 * kernels left ages out as they fault elsewhere. */
#define CUDA_LEARNED_ROUNDS 4u

struct learned_set {
	uint32_t *round_of; /* per unit: the round of its latest fault (0: never); NULL: nothing learned */
	size_t units;
	/* learned since its windows were last brought (or, for a replica,
	 * some of it may have left the device since: the host wrote or
	 * compared it) */
	bool due;
	/* the next window, whole units (GAIA_GPU_READAHEAD_KB to start,
	 * readahead_adapt after); 0: not started */
	uint32_t window_pages;
};

/* The faults among addrs[0..n) (ascending) in [lo, lo + len), learned in
 * `round`; returns how many units are new to the set. Any makes it due. */
GAIA_HIDDEN size_t learned_set_learn(struct learned_set *s, uint64_t lo, uint64_t len, const uint64_t *addrs,
				     size_t n, uint32_t round);
/* Whether unit u is in the set as of `round`. */
GAIA_HIDDEN bool learned_set_has(const struct learned_set *s, uint64_t u, uint32_t round);
/* The set's windows over a region of total_pages, the latest round's
 * units first, at most budget_pages (LEARNED_NO_CAP: no cap; less than a
 * unit: none): each starts at a unit
 * and spans the window (first_window_bytes, GAIA_GPU_READAHEAD_KB, the
 * first time; whole units; the region's end cuts the last), a whole one
 * adapting the window (readahead_adapt: doubled where the set
 * runs on past it, halved where it used less than half). bring(arg, first
 * page, pages) brings one, 0 or -errno (the first error ends it). Adds
 * what was brought to *pages and *windows; clears `due`. */
#define LEARNED_NO_CAP UINT64_MAX
GAIA_HIDDEN int learned_set_windows(struct learned_set *s, uint64_t total_pages, uint64_t budget_pages, uint32_t round,
				    uint64_t first_window_bytes, int (*bring)(void *arg, uint64_t first, uint64_t npages),
				    void *arg, uint64_t *pages, uint64_t *windows);
GAIA_HIDDEN void learned_set_free(struct learned_set *s);

#endif
