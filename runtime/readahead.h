/* Readahead window policy (DESIGN §3.1, §3.2): how many pages to populate
 * (CPU: MADV_POPULATE_READ) or upload (GPU) around an access.
 *
 * One state per stream of accesses (per region and per side). The CPU and
 * GPU each have their own state, initialised from GAIA_READAHEAD_KB and
 * GAIA_GPU_READAHEAD_KB. Each access is one of:
 *   - the first of the stream: the window is initial_pages;
 *   - sequential, at or just past the end of the previous window (page in
 *     [next_page, next_page + window_pages)): the window doubles, up to
 *     max_pages, and sequential_hits counts it;
 *   - a re-access inside the previous window [window_first, next_page)
 *     (another thread touching a page of the same burst, or a page the
 *     kernel dropped): also counted in sequential_hits, but the window keeps
 *     its size (it neither shrinks nor grows);
 *   - anything else is random: the window halves, down to min_pages, and
 *     random_misses counts it.
 * The window handed out always starts at the accessed page (readahead goes
 * forward; pages skipped over are not populated) and is clipped at the end
 * of the stream. Not thread-safe: the caller serialises one stream.
 */
#ifndef GAIA_READAHEAD_H
#define GAIA_READAHEAD_H

#include <stdbool.h>
#include <stdint.h>

struct readahead {
	uint64_t window_first;  /* first page of the last window handed out */
	uint64_t next_page;     /* first page past the last window handed out;
				   == window_first before the first access */
	uint32_t window_pages;  /* current window */
	uint32_t min_pages, max_pages, initial_pages;
	uint64_t sequential_hits, random_misses;
};

/* initial_kb/max_kb are rounded down to whole pages (at least 1 page);
 * initial is clipped to max. min_pages is 1 page (a random access fetches
 * just what it touched once the window has shrunk); callers may raise it
 * (up to initial_pages) after init. */
void readahead_init(struct readahead *ra, uint32_t initial_kb, uint32_t max_kb);

/* An access at `page` of a stream of `total_pages` pages. Returns the
 * window to populate as [*first, *first + return value), which contains
 * `page` and never extends past total_pages; *first is always `page`.
 * A page at or past total_pages returns 0 and leaves the state alone. */
uint32_t readahead_on_access(struct readahead *ra, uint64_t page, uint64_t total_pages,
			     uint64_t *first);

/* A device's prefetch window over a learned set (a region paged on demand:
 * the pages kernels faulted on): after a window of `window` pages of which
 * `used` were in the set, the next window. Doubled when every page was and
 * the set runs on past the window (`runs_on`: sequential); halved when
 * fewer than half were, or when some were not and the set ends inside the
 * window (either way the rest was fetched for nothing); kept otherwise (a
 * full window over an isolated hot spot, a run with a gap); always within
 * [min_pages, max_pages] (min_pages >= 1). */
uint32_t readahead_adapt(uint32_t window, uint64_t used, bool runs_on, uint32_t min_pages, uint32_t max_pages);

#endif
