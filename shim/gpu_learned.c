/* Learned sets of fault units and their windows (gpu_learned.h). */
#include <errno.h>
#include <stdlib.h>

#include "gpu_learned.h"
#include "readahead.h"

#define PG GAIA_PAGE

size_t learned_set_learn(struct learned_set *s, uint64_t lo, uint64_t len, const uint64_t *addrs, size_t n,
			 uint32_t round)
{
	if (!n || !round || !len)
		return 0;
	uint64_t hi = lo + len;
	size_t units = (len + CUDA_FAULT_UNIT - 1) / CUDA_FAULT_UNIT, fresh = 0;
	/* the first address at or past lo */
	size_t a = 0, b = n;
	while (a < b) {
		size_t mid = a + (b - a) / 2;
		if (addrs[mid] < lo)
			a = mid + 1;
		else
			b = mid;
	}
	if (a == n || addrs[a] >= hi)
		return 0;
	if (!s->round_of) {
		s->round_of = calloc(units, sizeof(*s->round_of));
		if (!s->round_of)
			return 0; /* learns nothing: pages on faults alone */
		s->units = units;
	}
	for (size_t i = a; i < n && addrs[i] < hi; i++) {
		size_t u = (size_t)((addrs[i] - lo) / CUDA_FAULT_UNIT);
		if (u >= s->units)
			break;
		fresh += !s->round_of[u];
		s->round_of[u] = round;
	}
	s->due = true;
	return fresh;
}

bool learned_set_has(const struct learned_set *s, uint64_t u, uint32_t round)
{
	return u < s->units && s->round_of[u] && round - s->round_of[u] < CUDA_LEARNED_ROUNDS;
}

/* The pages of [first, first + n) (a window) in the set. */
static uint64_t set_pages_in(const struct learned_set *s, uint64_t first, uint64_t n, uint32_t round)
{
	const uint64_t per_unit = CUDA_FAULT_UNIT / PG;
	uint64_t used = 0;
	for (uint64_t u = first / per_unit; u < s->units && u * per_unit < first + n; u++)
		if (learned_set_has(s, u, round)) {
			uint64_t a = u * per_unit > first ? u * per_unit : first;
			uint64_t b = (u + 1) * per_unit < first + n ? (u + 1) * per_unit : first + n;
			used += b - a;
		}
	return used;
}

int learned_set_windows(struct learned_set *s, uint64_t total_pages, uint64_t budget_pages, uint32_t round,
			uint64_t first_window_bytes, int (*bring)(void *arg, uint64_t first, uint64_t npages), void *arg,
			uint64_t *pages, uint64_t *windows)
{
	if (!s->round_of)
		return 0;
	const uint64_t per_unit = CUDA_FAULT_UNIT / PG;
	const uint32_t min_pages = (uint32_t)per_unit, max_pages = (64u << 20) / PG;
	if (budget_pages < per_unit) {
		s->due = false; /* no room for a window: the next learning asks again */
		return 0;
	}
	uint8_t *done = calloc(s->units, 1); /* units a window covered */
	if (!done)
		return -ENOMEM;
	if (!s->window_pages) {
		uint64_t w = first_window_bytes / PG;
		s->window_pages = w < min_pages ? min_pages : w > max_pages ? max_pages : (uint32_t)w;
	}
	uint64_t brought = 0;
	int rc = 0;
	/* The latest round's units first: the budget goes to what kernels
	 * touched last. */
	for (uint32_t age = 0; age < CUDA_LEARNED_ROUNDS && age < round && !rc; age++) {
		for (uint64_t u = 0; u < s->units && !rc && brought < budget_pages; u++) {
			uint64_t first = u * per_unit;
			if (done[u] || !s->round_of[u] || round - s->round_of[u] != age || first >= total_pages)
				continue;
			uint64_t w = s->window_pages / per_unit * per_unit, n = w;
			if (n > total_pages - first)
				n = total_pages - first;
			if (n > budget_pages - brought)
				n = (budget_pages - brought) / per_unit * per_unit;
			if (!n)
				break;
			rc = bring(arg, first, n);
			if (rc)
				break;
			for (uint64_t v = u; v * per_unit < first + n && v < s->units; v++)
				done[v] = 1;
			brought += n;
			(*windows)++;
			if (n == w) { /* a whole window: adapt (one cut short says nothing) */
				bool runs_on = learned_set_has(s, (first + n) / per_unit, round);
				uint32_t next = readahead_adapt((uint32_t)w, set_pages_in(s, first, n, round), runs_on,
								min_pages, max_pages);
				s->window_pages = next / (uint32_t)per_unit * (uint32_t)per_unit;
			}
		}
	}
	free(done);
	*pages += brought;
	s->due = false; /* a window that failed is not asked again and again */
	return rc;
}

void learned_set_free(struct learned_set *s)
{
	free(s->round_of);
	*s = (struct learned_set){0};
}
