#include "region.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_MASK ((uintptr_t)REGION_PAGE_SIZE - 1)

/* Writer preference: every fault and I/O hook takes the read lock, so with
 * glibc's default (reader preference) a steady stream of lookups could keep
 * munmap/mmap waiting forever. The price is that a read lock must never be
 * taken twice by one thread (a writer queued between the two would
 * deadlock it), hence callbacks may not call back into the table. */
static int lock_init(struct region_table *t)
{
	pthread_rwlockattr_t attr;
	int err = pthread_rwlockattr_init(&attr);
	if (err)
		return -err;
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	err = pthread_rwlock_init(&t->lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	return -err;
}

int region_table_init(struct region_table *t)
{
	memset(t, 0, sizeof(*t));
	return lock_init(t);
}

int region_table_after_fork(struct region_table *t)
{
	return lock_init(t);
}

void region_table_destroy(struct region_table *t)
{
	pthread_rwlock_destroy(&t->lock);
	free(t->items);
	t->items = NULL;
	t->count = t->capacity = 0;
}

/* Index of the first region whose end is past addr: the region containing
 * addr if there is one, else the first region after addr (or count). Since
 * regions are sorted and disjoint, their ends are sorted too. */
static size_t first_ending_after(const struct region_table *t, uintptr_t addr)
{
	size_t lo = 0, hi = t->count;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->items[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Makes room for `extra` more items, doubling. Called under the write lock
 * before anything is changed, so a failure leaves the table as it was. */
static int reserve(struct region_table *t, size_t extra)
{
	size_t want = t->count + extra, cap = t->capacity ? t->capacity : 16;
	struct region *items;

	if (want <= t->capacity)
		return 0;
	while (cap < want) {
		if (cap > SIZE_MAX / 2 / sizeof(*items))
			return -ENOMEM;
		cap *= 2;
	}
	items = realloc(t->items, cap * sizeof(*items));
	if (!items)
		return -ENOMEM;
	t->items = items;
	t->capacity = cap;
	return 0;
}

int region_insert(struct region_table *t, const struct region *r)
{
	size_t i;
	int err;

	if (r->start >= r->end || (r->start & PAGE_MASK) || (r->end & PAGE_MASK))
		return -EINVAL;
	pthread_rwlock_wrlock(&t->lock);
	i = first_ending_after(t, r->start);
	if (i < t->count && t->items[i].start < r->end) {
		err = -EEXIST;
		goto out;
	}
	err = reserve(t, 1);
	if (err)
		goto out;
	memmove(&t->items[i + 1], &t->items[i], (t->count - i) * sizeof(*t->items));
	t->items[i] = *r;
	t->count++;
out:
	pthread_rwlock_unlock(&t->lock);
	return err;
}

int region_find(struct region_table *t, uintptr_t addr, struct region *out)
{
	size_t i;
	int err = -ENOENT;

	pthread_rwlock_rdlock(&t->lock);
	i = first_ending_after(t, addr);
	if (i < t->count && t->items[i].start <= addr) {
		*out = t->items[i];
		err = 0;
	}
	pthread_rwlock_unlock(&t->lock);
	return err;
}

/* The part of r that starts at `from` (from within [r->start, r->end]):
 * the file offset and owner page move with the start, the owner stays. */
static struct region region_tail_from(const struct region *r, uintptr_t from)
{
	struct region piece = *r;
	uintptr_t skip = from - r->start;

	piece.start = from;
	piece.file_offset += skip;
	piece.owner_page += skip / REGION_PAGE_SIZE;
	return piece;
}

/* Like munmap, [start, start+len) is widened to whole pages: start rounded
 * down, the end rounded up; len 0 or a range wrapping the address space is
 * -EINVAL (munmap(2)). Only regions [i, k) overlap the range; of those only
 * the first can keep a left part and only the last a right part, so the
 * whole change is "replace items[i, k) by at most two pieces": the only
 * case that needs a new slot is a hole punched in the middle of one
 * region, reserved before anything is touched. */
int region_remove_range(struct region_table *t, uintptr_t start, size_t len,
			void (*removed)(const struct region *piece, void *arg), void *arg)
{
	uintptr_t s, e;
	struct region keep[2];
	size_t i, k, nkeep = 0;
	int err = 0;

	if (len == 0 || start > UINTPTR_MAX - len || start + len > UINTPTR_MAX - PAGE_MASK)
		return -EINVAL;
	s = start & ~PAGE_MASK;
	e = (start + len + PAGE_MASK) & ~PAGE_MASK;

	pthread_rwlock_wrlock(&t->lock);
	i = first_ending_after(t, s);
	for (k = i; k < t->count && t->items[k].start < e; k++)
		;
	if (k == i)
		goto out;

	if (t->items[i].start < s) {
		keep[nkeep] = t->items[i];
		keep[nkeep].end = s;
		nkeep++;
	}
	if (t->items[k - 1].end > e)
		keep[nkeep++] = region_tail_from(&t->items[k - 1], e);
	if (nkeep > k - i) {
		err = reserve(t, nkeep - (k - i));
		if (err)
			goto out;
	}

	for (size_t j = i; j < k; j++) {
		const struct region *r = &t->items[j];
		struct region piece = region_tail_from(r, r->start > s ? r->start : s);

		if (piece.end > e)
			piece.end = e;
		if (removed)
			removed(&piece, arg);
	}
	err = (int)(k - i);

	memmove(&t->items[i + nkeep], &t->items[k], (t->count - k) * sizeof(*t->items));
	memcpy(&t->items[i], keep, nkeep * sizeof(*keep));
	t->count = t->count - (k - i) + nkeep;
out:
	pthread_rwlock_unlock(&t->lock);
	return err;
}

int region_for_each(struct region_table *t, uintptr_t start, size_t len,
		    int (*fn)(const struct region *r, void *arg), void *arg)
{
	uintptr_t end = len > UINTPTR_MAX - start ? UINTPTR_MAX : start + len;
	int ret = 0;

	if (len == 0)
		return 0;
	pthread_rwlock_rdlock(&t->lock);
	for (size_t i = first_ending_after(t, start); i < t->count && t->items[i].start < end; i++) {
		ret = fn(&t->items[i], arg);
		if (ret)
			break;
	}
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

size_t region_count(struct region_table *t)
{
	size_t n;

	pthread_rwlock_rdlock(&t->lock);
	n = t->count;
	pthread_rwlock_unlock(&t->lock);
	return n;
}
