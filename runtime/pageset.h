/* Sets of pages as the engine hands them around: sorted disjoint ranges
 * (what a device holds, what to transfer) and plain lists of page indices
 * (the dirty or stale pages a walk found, in page order). */
#ifndef GAIA_PAGESET_H
#define GAIA_PAGESET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A half-open range of pages [first, end). */
struct page_range {
	uint64_t first, end;
};

/* Sorted, disjoint, non-adjacent ranges. */
struct range_set {
	struct page_range *items;
	size_t count, capacity;
};

struct page_list {
	uint64_t *pages;
	size_t count, capacity;
};

/* Adds [first, end), merging with overlapping or adjacent ranges. 0 or -ENOMEM. */
int range_set_add(struct range_set *s, uint64_t first, uint64_t end);
/* Removes [first, end), splitting a range if needed. 0 or -ENOMEM. */
int range_set_remove(struct range_set *s, uint64_t first, uint64_t end);
bool range_set_contains(const struct range_set *s, uint64_t p);
/* Appends to out the parts of [first, end) not in s. 0 or -ENOMEM. */
int range_set_complement(const struct range_set *s, uint64_t first, uint64_t end,
			 struct range_set *out);
void range_set_clear(struct range_set *s);
void range_set_free(struct range_set *s);

int page_list_push(struct page_list *l, uint64_t p);
void page_list_clear(struct page_list *l);
void page_list_free(struct page_list *l);

#endif
