#include "tsvt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint64_t *summary_alloc(const struct tsvt *t)
{
	return calloc(t->summary_words ? t->summary_words : 1, sizeof(uint64_t));
}

static inline void summary_set(uint64_t *sum, uint64_t p)
{
	uint64_t g = p / TSVT_GROUP_PAGES;
	sum[g / 64] |= 1ull << (g % 64);
}

int tsvt_init(struct tsvt *t, uint64_t npages)
{
	memset(t, 0, sizeof(*t));
	t->npages = npages;
	t->ngroups = (npages + TSVT_GROUP_PAGES - 1) / TSVT_GROUP_PAGES;
	t->summary_words = (t->ngroups + 63) / 64;
	t->inline_owner = -1;
	/* Every page starts at version 1 on the file and the CPU: the CPU
	 * replica is the file mapping, current by construction. */
	t->pages = malloc((npages ? npages : 1) * sizeof(*t->pages));
	t->cpu_dirty_summary = summary_alloc(t);
	if (!t->pages || !t->cpu_dirty_summary) {
		tsvt_destroy(t);
		return -ENOMEM;
	}
	for (uint64_t p = 0; p < npages; p++)
		t->pages[p] = (struct tsvt_page){.file = 0, .cpu = 1, .dev = 0};
	return 0;
}

void tsvt_destroy(struct tsvt *t)
{
	free(t->pages);
	free(t->cpu_dirty_summary);
	for (int d = 0; d < TSVT_MAX_DEVICES; d++) {
		free(t->dev[d].dirty_summary);
		free(t->dev[d].stale_summary);
		range_set_free(&t->dev[d].held);
	}
	for (int s = 0; s < TSVT_MAX_DEVICES - 1; s++) {
		if (!t->chunks[s])
			continue;
		for (uint64_t c = 0; c < (t->npages + TSVT_CHUNK_PAGES - 1) / TSVT_CHUNK_PAGES; c++)
			free(t->chunks[s][c]);
		free(t->chunks[s]);
	}
	memset(t, 0, sizeof(*t));
	t->inline_owner = -1;
}

int tsvt_attach_device(struct tsvt *t, int d)
{
	if (d < 0 || d >= TSVT_MAX_DEVICES)
		return -EINVAL;
	struct tsvt_device *dev = &t->dev[d];
	if (dev->attached)
		return 0;
	dev->dirty_summary = summary_alloc(t);
	dev->stale_summary = summary_alloc(t);
	if (!dev->dirty_summary || !dev->stale_summary)
		goto nomem;
	if (t->inline_owner < 0) {
		t->inline_owner = d;
		dev->slot = 0;
	} else {
		int s = t->extra_slots_used;
		uint64_t nchunks = (t->npages + TSVT_CHUNK_PAGES - 1) / TSVT_CHUNK_PAGES;
		t->chunks[s] = calloc(nchunks ? nchunks : 1, sizeof(uint32_t *));
		if (!t->chunks[s])
			goto nomem;
		t->extra_slots_used++;
		dev->slot = s + 1;
	}
	dev->attached = true;
	t->attached[t->nattached++] = (uint8_t)d;
	return 0;
nomem:
	free(dev->dirty_summary);
	free(dev->stale_summary);
	dev->dirty_summary = dev->stale_summary = NULL;
	return -ENOMEM;
}

/* The version word of device d for page p, or NULL when the device has no
 * storage there (then it holds nothing there). */
static inline uint32_t *dev_word(const struct tsvt *t, int d, uint64_t p)
{
	const struct tsvt_device *dev = &t->dev[d];
	if (!dev->attached)
		return NULL;
	if (dev->slot == 0)
		return &t->pages[p].dev;
	uint32_t *chunk = t->chunks[dev->slot - 1][p / TSVT_CHUNK_PAGES];
	return chunk ? &chunk[p % TSVT_CHUNK_PAGES] : NULL;
}

static inline uint32_t *replica_word(const struct tsvt *t, int r, uint64_t p)
{
	return r == TSVT_CPU ? &t->pages[p].cpu : dev_word(t, r - 1, p);
}

/* The version word of replica r for page p and the distance, in words, to
 * the next page's, valid within one chunk (a summary group never crosses
 * one). NULL where a device has no storage. */
static inline uint32_t *replica_words(const struct tsvt *t, int r, uint64_t p, size_t *stride)
{
	const size_t record = sizeof(struct tsvt_page) / sizeof(uint32_t);
	if (r == TSVT_CPU || t->dev[r - 1].slot == 0) {
		*stride = record;
		return replica_word(t, r, p);
	}
	*stride = 1;
	return dev_word(t, r - 1, p);
}

uint32_t tsvt_version(const struct tsvt *t, int r, uint64_t p)
{
	const uint32_t *w = replica_word(t, r, p);
	return w ? (*w & TSVT_VERSION_MASK) : 0;
}

uint32_t tsvt_newest(const struct tsvt *t, uint64_t p)
{
	uint32_t v = t->pages[p].cpu & TSVT_VERSION_MASK;
	for (int i = 0; i < t->nattached; i++) {
		const uint32_t *w = dev_word(t, t->attached[i], p);
		if (w && (*w & TSVT_VERSION_MASK) > v)
			v = *w & TSVT_VERSION_MASK;
	}
	return v;
}

bool tsvt_is_dirty(const struct tsvt *t, int r, uint64_t p)
{
	const uint32_t *w = replica_word(t, r, p);
	return w && (*w & TSVT_DIRTY);
}

bool tsvt_has_protect(const struct tsvt *t, int d, uint64_t p)
{
	const uint32_t *w = dev_word(t, d, p);
	return w && (*w & TSVT_PROTECT);
}

bool tsvt_is_stale(const struct tsvt *t, int d, uint64_t p)
{
	const uint32_t *w = dev_word(t, d, p);
	return w && (*w & TSVT_STALE);
}

void tsvt_set_version(struct tsvt *t, int r, uint64_t p, uint32_t v)
{
	uint32_t *w = replica_word(t, r, p);
	if (w)
		*w = (*w & ~TSVT_VERSION_MASK) | (v & TSVT_VERSION_MASK);
}

void tsvt_set_current(struct tsvt *t, int d, uint64_t p)
{
	uint32_t *w = dev_word(t, d, p);
	if (w)
		*w = (*w & ~(TSVT_VERSION_MASK | TSVT_STALE)) | tsvt_newest(t, p);
}

void tsvt_set_protect(struct tsvt *t, int d, uint64_t p, bool on)
{
	uint32_t *w = dev_word(t, d, p);
	if (w)
		*w = on ? (*w | TSVT_PROTECT) : (*w & ~TSVT_PROTECT);
}

uint32_t tsvt_file_version(const struct tsvt *t, uint64_t p)
{
	return t->pages[p].file;
}

void tsvt_set_file_version(struct tsvt *t, uint64_t p, uint32_t v)
{
	t->pages[p].file = v;
}

void tsvt_mark_dirty(struct tsvt *t, int r, uint64_t first, uint64_t n)
{
	uint64_t *sum = r == TSVT_CPU ? t->cpu_dirty_summary : t->dev[r - 1].dirty_summary;
	if (!sum)
		return;
	for (uint64_t p = first; p < first + n && p < t->npages; p++) {
		uint32_t *w = replica_word(t, r, p);
		if (!w || (r != TSVT_CPU && !(*w & TSVT_VERSION_MASK)))
			continue; /* a device marks only pages it holds */
		*w |= TSVT_DIRTY;
		summary_set(sum, p);
	}
}

/* Versions are 30 bits. Only "holds the newest" versus "holds an older one"
 * matters between local replicas, so a page about to wrap is renumbered:
 * holders of the newest get 2, holders of older versions 1. */
static uint32_t renumber_page(struct tsvt *t, uint64_t p)
{
	uint32_t newest = tsvt_newest(t, p);
	for (int r = 0; r <= TSVT_MAX_DEVICES; r++) {
		uint32_t *w = replica_word(t, r, p);
		uint32_t v = w ? (*w & TSVT_VERSION_MASK) : 0;
		if (v)
			*w = (*w & ~TSVT_VERSION_MASK) | (v == newest ? 2u : 1u);
	}
	return 2;
}

uint32_t tsvt_bump(struct tsvt *t, int r, uint64_t p)
{
	uint32_t newest = tsvt_newest(t, p);
	if (newest >= TSVT_VERSION_MASK)
		newest = renumber_page(t, p);
	uint32_t v = newest + 1;
	uint32_t *own = replica_word(t, r, p);
	if (own)
		*own = (*own & ~(TSVT_VERSION_MASK | TSVT_STALE)) | v;
	for (int i = 0; i < t->nattached; i++) {
		int d = t->attached[i];
		uint32_t *w = TSVT_DEV(d) == r ? NULL : dev_word(t, d, p);
		if (w && (*w & TSVT_VERSION_MASK)) {
			*w |= TSVT_STALE;
			summary_set(t->dev[d].stale_summary, p);
		}
	}
	return v;
}

/* Finds the first group >= *g whose bit is set in `sum`; false when none. */
static bool next_flagged_group(const struct tsvt *t, const uint64_t *sum, uint64_t *g)
{
	uint64_t w = *g / 64;
	if (w >= t->summary_words)
		return false;
	uint64_t bits = sum[w] & (~0ull << (*g % 64));
	while (!bits) {
		if (++w >= t->summary_words)
			return false;
		bits = sum[w];
	}
	*g = w * 64 + (uint64_t)__builtin_ctzll(bits);
	return *g < t->ngroups;
}

static inline void group_clear(uint64_t *sum, uint64_t g)
{
	sum[g / 64] &= ~(1ull << (g % 64));
}

static inline uint64_t group_end(const struct tsvt *t, uint64_t g)
{
	uint64_t end = (g + 1) * TSVT_GROUP_PAGES;
	return end > t->npages ? t->npages : end;
}

int tsvt_take_dirty(struct tsvt *t, int r, struct page_list *out)
{
	uint64_t *sum = r == TSVT_CPU ? t->cpu_dirty_summary : t->dev[r - 1].dirty_summary;
	if (!sum)
		return 0;
	for (uint64_t g = 0; next_flagged_group(t, sum, &g); g++) {
		size_t stride;
		uint32_t *w = replica_words(t, r, g * TSVT_GROUP_PAGES, &stride);
		for (uint64_t p = g * TSVT_GROUP_PAGES; w && p < group_end(t, g); p++, w += stride) {
			if (*w & TSVT_DIRTY) {
				if (page_list_push(out, p))
					return -ENOMEM;
				*w &= ~TSVT_DIRTY;
			}
		}
		group_clear(sum, g);
	}
	return 0;
}

int tsvt_take_stale(struct tsvt *t, int d, uint64_t first, uint64_t n, struct page_list *out)
{
	uint64_t *sum = t->dev[d].stale_summary;
	if (!sum)
		return 0;
	uint64_t end = first + n > t->npages ? t->npages : first + n;
	for (uint64_t g = first / TSVT_GROUP_PAGES;
	     next_flagged_group(t, sum, &g) && g * TSVT_GROUP_PAGES < end; g++) {
		bool keep = false; /* stale pages outside [first, end) stay flagged */
		size_t stride;
		uint32_t *w = replica_words(t, TSVT_DEV(d), g * TSVT_GROUP_PAGES, &stride);
		for (uint64_t p = g * TSVT_GROUP_PAGES; w && p < group_end(t, g); p++, w += stride) {
			if (!(*w & TSVT_STALE))
				continue;
			if (p < first || p >= end) {
				keep = true;
				continue;
			}
			if (page_list_push(out, p))
				return -ENOMEM;
			*w = (*w & ~(TSVT_VERSION_MASK | TSVT_STALE)) | tsvt_newest(t, p);
		}
		if (!keep)
			group_clear(sum, g);
	}
	return 0;
}

static int ensure_chunks(struct tsvt *t, int d, uint64_t first, uint64_t end)
{
	struct tsvt_device *dev = &t->dev[d];
	if (dev->slot == 0)
		return 0;
	uint32_t **chunks = t->chunks[dev->slot - 1];
	for (uint64_t c = first / TSVT_CHUNK_PAGES; c * TSVT_CHUNK_PAGES < end; c++) {
		if (!chunks[c] && !(chunks[c] = calloc(TSVT_CHUNK_PAGES, sizeof(uint32_t))))
			return -ENOMEM;
	}
	return 0;
}

int tsvt_hold(struct tsvt *t, int d, uint64_t first, uint64_t n)
{
	uint64_t end = first + n > t->npages ? t->npages : first + n;
	int rc = tsvt_attach_device(t, d);
	if (rc || first >= end)
		return rc;
	if ((rc = ensure_chunks(t, d, first, end)) ||
	    (rc = range_set_add(&t->dev[d].held, first, end)))
		return rc;
	for (uint64_t p = first; p < end; p++)
		*dev_word(t, d, p) = tsvt_newest(t, p);
	return 0;
}

int tsvt_unhold(struct tsvt *t, int d, uint64_t first, uint64_t n)
{
	uint64_t end = first + n > t->npages ? t->npages : first + n;
	if (!t->dev[d].attached || first >= end)
		return 0;
	int rc = range_set_remove(&t->dev[d].held, first, end);
	if (rc)
		return rc;
	for (uint64_t p = first; p < end; p++) {
		uint32_t *w = dev_word(t, d, p);
		if (w)
			*w = 0;
	}
	return 0;
}

bool tsvt_holds(const struct tsvt *t, int d, uint64_t p)
{
	return t->dev[d].attached && range_set_contains(&t->dev[d].held, p);
}

size_t tsvt_metadata_bytes(const struct tsvt *t)
{
	size_t summary = t->summary_words * sizeof(uint64_t);
	size_t bytes = sizeof(*t) + t->npages * sizeof(struct tsvt_page) + summary;
	uint64_t nchunks = (t->npages + TSVT_CHUNK_PAGES - 1) / TSVT_CHUNK_PAGES;
	for (int d = 0; d < TSVT_MAX_DEVICES; d++) {
		if (!t->dev[d].attached)
			continue;
		bytes += 2 * summary + t->dev[d].held.capacity * sizeof(struct page_range);
	}
	for (int s = 0; s < t->extra_slots_used; s++) {
		bytes += nchunks * sizeof(uint32_t *);
		for (uint64_t c = 0; c < nchunks; c++)
			if (t->chunks[s][c])
				bytes += TSVT_CHUNK_PAGES * sizeof(uint32_t);
	}
	return bytes;
}
