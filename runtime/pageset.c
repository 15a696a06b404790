#include "pageset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int range_set_reserve(struct range_set *s, size_t need)
{
	if (need <= s->capacity)
		return 0;
	size_t cap = s->capacity ? s->capacity * 2 : 4;
	while (cap < need)
		cap *= 2;
	struct page_range *items = realloc(s->items, cap * sizeof(*items));
	if (!items)
		return -ENOMEM;
	s->items = items;
	s->capacity = cap;
	return 0;
}

/* Index of the first range whose end is >= p (ranges touching p included). */
static size_t range_set_lower(const struct range_set *s, uint64_t p)
{
	size_t lo = 0, hi = s->count;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->items[mid].end < p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int range_set_add(struct range_set *s, uint64_t first, uint64_t end)
{
	if (first >= end)
		return 0;
	size_t i = range_set_lower(s, first);
	size_t j = i;
	/* ranges i..j-1 overlap or touch [first, end) */
	while (j < s->count && s->items[j].first <= end) {
		if (s->items[j].first < first)
			first = s->items[j].first;
		if (s->items[j].end > end)
			end = s->items[j].end;
		j++;
	}
	if (i == j) {
		int rc = range_set_reserve(s, s->count + 1);
		if (rc)
			return rc;
		memmove(&s->items[i + 1], &s->items[i], (s->count - i) * sizeof(s->items[0]));
		s->count++;
	} else if (j - i > 1) {
		memmove(&s->items[i + 1], &s->items[j], (s->count - j) * sizeof(s->items[0]));
		s->count -= j - i - 1;
	}
	s->items[i] = (struct page_range){first, end};
	return 0;
}

int range_set_remove(struct range_set *s, uint64_t first, uint64_t end)
{
	if (first >= end)
		return 0;
	size_t i = range_set_lower(s, first + 1);
	while (i < s->count && s->items[i].first < end) {
		struct page_range *r = &s->items[i];
		if (r->first < first && r->end > end) { /* split in two */
			int rc = range_set_reserve(s, s->count + 1);
			if (rc)
				return rc;
			r = &s->items[i];
			memmove(&s->items[i + 1], &s->items[i], (s->count - i) * sizeof(s->items[0]));
			s->count++;
			s->items[i].end = first;
			s->items[i + 1].first = end;
			return 0;
		}
		if (r->first < first) {
			r->end = first;
			i++;
		} else if (r->end > end) {
			r->first = end;
			return 0;
		} else {
			memmove(&s->items[i], &s->items[i + 1], (s->count - i - 1) * sizeof(s->items[0]));
			s->count--;
		}
	}
	return 0;
}

bool range_set_contains(const struct range_set *s, uint64_t p)
{
	size_t i = range_set_lower(s, p + 1);
	return i < s->count && s->items[i].first <= p && p < s->items[i].end;
}

int range_set_complement(const struct range_set *s, uint64_t first, uint64_t end,
			 struct range_set *out)
{
	uint64_t cursor = first;
	for (size_t i = range_set_lower(s, first + 1); i < s->count && cursor < end; i++) {
		const struct page_range *r = &s->items[i];
		if (r->first >= end)
			break;
		if (r->first > cursor) {
			int rc = range_set_add(out, cursor, r->first);
			if (rc)
				return rc;
		}
		if (r->end > cursor)
			cursor = r->end;
	}
	if (cursor < end)
		return range_set_add(out, cursor, end);
	return 0;
}

void range_set_clear(struct range_set *s)
{
	s->count = 0;
}

void range_set_free(struct range_set *s)
{
	free(s->items);
	memset(s, 0, sizeof(*s));
}

int page_list_push(struct page_list *l, uint64_t p)
{
	if (l->count == l->capacity) {
		size_t cap = l->capacity ? l->capacity * 2 : 64;
		uint64_t *pages = realloc(l->pages, cap * sizeof(*pages));
		if (!pages)
			return -ENOMEM;
		l->pages = pages;
		l->capacity = cap;
	}
	l->pages[l->count++] = p;
	return 0;
}

void page_list_clear(struct page_list *l)
{
	l->count = 0;
}

void page_list_free(struct page_list *l)
{
	free(l->pages);
	memset(l, 0, sizeof(*l));
}
