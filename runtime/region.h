/* Regions: managed mappings, address range <-> file range.
 *
 * A table of non-overlapping regions sorted by start address; lookup by
 * address in O(log n) under a read lock, so many threads look up at once
 * (every fault, read and write hook does). A partial unmap splits a region:
 * the pieces keep the same `owner` (the engine object of the whole
 * original mapping) and an `owner_page` offset, so the versions of the
 * pages that stay mapped stay where they are.
 */
#ifndef GAIA_REGION_H
#define GAIA_REGION_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define REGION_PAGE_SIZE 4096u

struct region {
	uintptr_t start;      /* page aligned */
	uintptr_t end;        /* exclusive, page aligned */
	uint64_t file_offset; /* file offset of `start` */
	dev_t st_dev;         /* the file: device and inode */
	ino_t st_ino;
	int prot;             /* PROT_* of the mapping */
	int flags;            /* MAP_SHARED or MAP_PRIVATE (plus others as mapped) */
	void *owner;          /* the caller's object for the original mapping */
	uint64_t owner_page;  /* page index of `start` within `owner` */
};

/* Lookups (region_find, region_for_each, region_count) share a read lock;
 * region_insert and region_remove_range take it for writing. The lock
 * prefers writers, so a thread must never hold it twice: callbacks below
 * must not call back into the table. */
struct region_table {
	pthread_rwlock_t lock;
	struct region *items; /* sorted by start */
	size_t count, capacity;
};

int region_table_init(struct region_table *t);
/* In a fork child (one thread, the forking one): the lock as new, with its
 * writer preference; whoever held it in the parent is not here. The
 * regions stay. */
int region_table_after_fork(struct region_table *t);
void region_table_destroy(struct region_table *t);

/* Adds a copy of *r. 0, -EINVAL (unaligned or empty), -EEXIST (overlaps a
 * region already in the table), -ENOMEM. */
int region_insert(struct region_table *t, const struct region *r);

/* Copies the region containing addr into *out. 0 or -ENOENT. O(log n),
 * allocates nothing: safe on the fault path. */
int region_find(struct region_table *t, uintptr_t addr, struct region *out);

/* Removes [start, start+len) from the table: regions inside it go, regions
 * overlapping it are trimmed or split in two (the right piece of a split,
 * like a trimmed head, has file_offset and owner_page advanced by its
 * distance from the old start; the owner stays). As munmap(2) does, the
 * range is widened to whole pages: start rounded down, the end rounded up.
 * Gaps inside the range are fine. For every removed piece, in address
 * order, `removed(piece, arg)` (may be NULL) is called with the piece's own
 * start, end, file_offset and owner_page while the write lock is held; it
 * must not call back into the table. Returns the number of pieces removed
 * (0 if nothing was mapped there), -EINVAL (len 0, or the range wraps the
 * address space) or -ENOMEM (a split needed a slot; the table is then
 * unchanged and no callback was made). */
int region_remove_range(struct region_table *t, uintptr_t start, size_t len,
			void (*removed)(const struct region *piece, void *arg), void *arg);

/* Calls fn for every region (in address order) that overlaps
 * [start, start+len), under the read lock; fn returning non-zero stops the
 * walk and that value is returned (else 0). fn must not call back into the
 * table. A range running past the top of the address space is clipped. */
int region_for_each(struct region_table *t, uintptr_t start, size_t len,
		    int (*fn)(const struct region *r, void *arg), void *arg);

size_t region_count(struct region_table *t);

#endif
