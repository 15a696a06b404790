#include "readahead.h"

#include <string.h>

#define READAHEAD_PAGE_KB 4u

static uint32_t kb_to_pages(uint32_t kb)
{
	uint32_t pages = kb / READAHEAD_PAGE_KB;

	return pages ? pages : 1;
}

void readahead_init(struct readahead *ra, uint32_t initial_kb, uint32_t max_kb)
{
	memset(ra, 0, sizeof(*ra));
	ra->max_pages = kb_to_pages(max_kb);
	ra->initial_pages = kb_to_pages(initial_kb);
	if (ra->initial_pages > ra->max_pages)
		ra->initial_pages = ra->max_pages;
	ra->min_pages = 1;
	ra->window_pages = ra->initial_pages;
}

/* Classifies the access against the last window handed out, resizes the
 * window, and hands out [page, page + window) clipped at total_pages. The
 * window only moves forward on a re-access (page >= window_first and the
 * window is at least as long as the last one), so a stream that is being
 * served out of order by several threads keeps its size. */
uint32_t readahead_on_access(struct readahead *ra, uint64_t page, uint64_t total_pages,
			     uint64_t *first)
{
	uint64_t len;

	*first = page;
	if (page >= total_pages)
		return 0;

	if (ra->next_page == ra->window_first) {
		ra->window_pages = ra->initial_pages;
	} else if (page >= ra->next_page && page - ra->next_page < ra->window_pages) {
		ra->sequential_hits++;
		ra->window_pages = ra->window_pages > ra->max_pages / 2 ? ra->max_pages
									: ra->window_pages * 2;
	} else if (page >= ra->window_first && page < ra->next_page) {
		ra->sequential_hits++;
	} else {
		ra->random_misses++;
		ra->window_pages = ra->window_pages / 2 < ra->min_pages ? ra->min_pages
									: ra->window_pages / 2;
	}

	len = total_pages - page;
	if (len > ra->window_pages)
		len = ra->window_pages;
	ra->window_first = page;
	ra->next_page = page + len;
	return (uint32_t)len;
}

uint32_t readahead_adapt(uint32_t window, uint64_t used, bool runs_on, uint32_t min_pages, uint32_t max_pages)
{
	if (min_pages < 1)
		min_pages = 1;
	if (max_pages < min_pages)
		max_pages = min_pages;
	uint64_t next = window;
	if (used >= window && runs_on)
		next = (uint64_t)window * 2;
	else if (used * 2 < window || (used < window && !runs_on))
		next = window / 2;
	if (next < min_pages)
		next = min_pages;
	if (next > max_pages)
		next = max_pages;
	return (uint32_t)next;
}
