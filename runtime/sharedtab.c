/* The cross-process version table: layout checks and the lock-free
 * publish/changes protocol (see sharedtab.h for the contracts).
 *
 * The protocol. Shared state: version[p], one stamp per group of 64 pages,
 * and a global epoch E. All of them only ever grow (versions modulo wrap).
 *
 *   publish(p):  version[p] += 1                                     (1)
 *                e = E
 *                loop: s = e + 1
 *                      stamp[group(p)] = max(stamp[group(p)], s)     (2)
 *                      CAS E: e -> s; on failure e = E, again        (3)
 *
 *   changes(cur): A = E (acquire)                                    (4)
 *                 if A == cur.seen: return (nothing)
 *                 for each group g of the range with stamp[g] > cur.seen:
 *                     report version[p] of its pages
 *                 cur.seen = A
 *
 * Claim: when changes(cur) returns with cur.seen = A, every publish whose
 * CAS (3) succeeded with s <= A has been reported by this call or an
 * earlier one on cur, with its version or a newer one.
 *
 * Proof, by induction over the calls on cur. Let P be a publish of page p
 * with version v that succeeded at s <= A, and S the cursor at the call's
 * start. If s <= S, an earlier call reported P (induction). Otherwise
 * S < s <= A. Every store to E is a read-modify-write, so the release CAS
 * of P heads a release sequence that contains every later store to E;
 * the acquire load (4) read one of them (A >= s, and E only grows), hence
 * P's CAS synchronises with (4), and P's steps (1) and (2) happen before the
 * reader's loads of stamp and version. By coherence the reader sees stamp
 * >= s > S (later stores to a stamp only raise it), so it scans P's group,
 * and sees version[p] == v or a later value. The call's own early return
 * (A == S) is the case where no s lies in (S, A].
 *
 * Why the CAS, and not simply E += 1: a publish must not be able to finish
 * with a stamp that some reader's cursor has already passed. With the CAS,
 * P succeeds only while E == s - 1, so any reader that loaded E before P's
 * CAS has a cursor <= s - 1 < s and will scan P's group next time, and any
 * reader that loaded E after it sees P's stamp (above). With E += 1 before
 * or after the stamp, a reader can load the new E, scan P's group before
 * the stamp lands and move its cursor past it: the change is lost until the
 * group is published again. The scheme "next_gen/done_gen, advance only when
 * no publish is in flight" is also correct, but a reader under a steady
 * stream of writes, or after a writer died between its two counters, never
 * advances and rescans ever more groups; this one always advances, and a
 * dead publisher leaves nothing half-held.
 *
 * Publishes that overlap a call: one whose CAS comes after the call's load
 * (4) gets s > A = the new cursor (E only grows), so the next call scans
 * its group. A stamp seen before its CAS, or a stamp of a failed try, only
 * causes an extra report.
 *
 * Versions never go backwards for a reader: every load of version[p] is
 * coherence-ordered after the previous one by the same reader thread.
 *
 * Progress: a CAS fails only because another publish succeeded, so the
 * system always progresses (lock-free); a failed try costs one more stamp
 * raise, usually a plain load since the stamp is already high enough.
 */
#include "sharedtab.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#define HDR(mem) ((struct sharedtab_header *)(mem))

static uint64_t group_count(uint64_t capacity_pages)
{
	return (capacity_pages + SHAREDTAB_GROUP_PAGES - 1) / SHAREDTAB_GROUP_PAGES;
}

static uint64_t *stamps(const void *mem)
{
	return (uint64_t *)((char *)(uintptr_t)mem + SHAREDTAB_HEADER_BYTES);
}

static uint32_t *versions(const void *mem, uint64_t capacity_pages)
{
	return (uint32_t *)(stamps(mem) + group_count(capacity_pages));
}

size_t sharedtab_bytes(uint64_t capacity_pages)
{
	if (capacity_pages > SHAREDTAB_MAX_PAGES)
		return 0;
	/* at most 128 + 2^37 + 2^42 bytes: fits size_t on 64-bit targets */
	uint64_t bytes = SHAREDTAB_HEADER_BYTES + group_count(capacity_pages) * sizeof(uint64_t) +
			 capacity_pages * sizeof(uint32_t);
	if (bytes > SIZE_MAX)
		return 0;
	return (size_t)bytes;
}

static bool aligned(const void *mem)
{
	return ((uintptr_t)mem & 7) == 0;
}

int sharedtab_format(void *mem, size_t size, uint64_t dev, uint64_t ino, uint64_t birth,
		     uint32_t uid, uint64_t capacity_pages)
{
	if (!mem || !aligned(mem) || capacity_pages > SHAREDTAB_MAX_PAGES)
		return -EINVAL;
	size_t need = sharedtab_bytes(capacity_pages);
	if (need == 0)
		return -EINVAL;
	if (size < need)
		return -ENOSPC;

	struct sharedtab_header *h = HDR(mem);
	uint64_t magic;
	memcpy(&magic, SHAREDTAB_MAGIC, sizeof(magic));
	if (__atomic_load_n((uint64_t *)h->magic, __ATOMIC_ACQUIRE) == magic)
		return -EEXIST;

	h->layout_version = SHAREDTAB_LAYOUT_VERSION;
	h->header_bytes = SHAREDTAB_HEADER_BYTES;
	h->dev = dev;
	h->ino = ino;
	h->birth = birth;
	h->owner_uid = uid;
	h->group_pages = SHAREDTAB_GROUP_PAGES;
	h->capacity_pages = capacity_pages;
	__atomic_store_n(&h->epoch, 0, __ATOMIC_RELAXED);
	/* the magic last: whoever reads it (acquire) sees the fields above */
	__atomic_store_n((uint64_t *)h->magic, magic, __ATOMIC_RELEASE);
	return 0;
}

/* Whether an aligned block of size bytes starts with a formatted header
 * (read with acquire: the fields format stored before the magic are seen). */
static bool has_magic(const void *mem, size_t size)
{
	if (size < SHAREDTAB_HEADER_BYTES)
		return false;
	uint64_t magic;
	memcpy(&magic, SHAREDTAB_MAGIC, sizeof(magic));
	return __atomic_load_n((const uint64_t *)HDR(mem)->magic, __ATOMIC_ACQUIRE) == magic;
}

int sharedtab_identity(const void *mem, size_t size, uint64_t *dev, uint64_t *ino)
{
	if (!mem || !aligned(mem) || !has_magic(mem, size))
		return -EBADMSG;
	const struct sharedtab_header *h = HDR(mem);
	*dev = h->dev;
	*ino = h->ino;
	return 0;
}

/* Every check reads only the header, and only after size covers it; the
 * arrays are then known to fit because sharedtab_bytes(capacity) <= size. */
int sharedtab_validate(const void *mem, size_t size, uint64_t dev, uint64_t ino, uint64_t birth,
		       uint32_t uid)
{
	if (!mem || !aligned(mem))
		return -EINVAL;
	if (!has_magic(mem, size))
		return -EBADMSG;

	const struct sharedtab_header *h = HDR(mem);
	if (h->layout_version != SHAREDTAB_LAYOUT_VERSION ||
	    h->header_bytes != SHAREDTAB_HEADER_BYTES || h->group_pages != SHAREDTAB_GROUP_PAGES)
		return -EBADMSG;
	for (size_t i = 0; i < sizeof(h->reserved0) / sizeof(h->reserved0[0]); i++)
		if (h->reserved0[i])
			return -EBADMSG;
	for (size_t i = 0; i < sizeof(h->reserved1) / sizeof(h->reserved1[0]); i++)
		if (h->reserved1[i])
			return -EBADMSG;
	uint64_t capacity = h->capacity_pages;
	size_t need = sharedtab_bytes(capacity);
	if (need == 0 || need > size)
		return -EBADMSG;
	if (h->dev != dev || h->ino != ino || h->birth != birth)
		return -ESTALE;
	if (h->owner_uid != uid)
		return -EPERM;
	return 0;
}

uint64_t sharedtab_capacity(const void *mem)
{
	return HDR(mem)->capacity_pages;
}

uint32_t sharedtab_version(const void *mem, uint64_t page)
{
	uint64_t capacity = sharedtab_capacity(mem);
	if (page >= capacity)
		return 0;
	return __atomic_load_n(&versions(mem, capacity)[page], __ATOMIC_ACQUIRE);
}

/* Raises a group stamp to at least s. Relaxed: the release CAS on the epoch
 * that follows orders it for readers (see the proof above). */
static void stamp_raise(uint64_t *stamp, uint64_t s)
{
	uint64_t old = __atomic_load_n(stamp, __ATOMIC_RELAXED);
	while (old < s &&
	       !__atomic_compare_exchange_n(stamp, &old, s, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

uint32_t sharedtab_publish(void *mem, uint64_t page)
{
	struct sharedtab_header *h = HDR(mem);
	uint64_t capacity = h->capacity_pages;
	if (page >= capacity)
		return 0;

	/* (1): the new version, skipping 0, which means "never published" */
	uint32_t *version = &versions(mem, capacity)[page];
	uint32_t old = __atomic_load_n(version, __ATOMIC_RELAXED), v;
	do {
		v = old + 1 ? old + 1 : 1;
	} while (!__atomic_compare_exchange_n(version, &old, v, true, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));

	/* (2) and (3): stamp the group with e + 1, then move the epoch from
	 * exactly e to e + 1; if another publish moved it first, stamp again
	 * above the epoch it reached. */
	uint64_t *stamp = &stamps(mem)[page / SHAREDTAB_GROUP_PAGES];
	uint64_t e = __atomic_load_n(&h->epoch, __ATOMIC_RELAXED);
	for (;;) {
		stamp_raise(stamp, e + 1);
		if (__atomic_compare_exchange_n(&h->epoch, &e, e + 1, false, __ATOMIC_RELEASE,
						__ATOMIC_RELAXED))
			return v;
	}
}

int64_t sharedtab_changes(const void *mem, struct sharedtab_cursor *cur, uint64_t first_page,
			  uint64_t npages, sharedtab_change_fn fn, void *arg)
{
	if (!mem || !cur)
		return -EINVAL;
	const struct sharedtab_header *h = HDR(mem);

	/* (4): the only load when nothing changed */
	uint64_t now = __atomic_load_n(&h->epoch, __ATOMIC_ACQUIRE);
	if (now == cur->seen)
		return 0;
	uint64_t seen = now < cur->seen ? 0 : cur->seen; /* a recreated table: start over */

	uint64_t capacity = h->capacity_pages;
	uint64_t end = first_page < capacity && npages < capacity - first_page
			       ? first_page + npages
			       : capacity;
	const uint64_t *stamp = stamps(mem);
	const uint32_t *version = versions(mem, capacity);
	int64_t calls = 0;

	for (uint64_t p = first_page; p < end;) {
		uint64_t g = p / SHAREDTAB_GROUP_PAGES;
		uint64_t group_end = (g + 1) * SHAREDTAB_GROUP_PAGES;
		if (group_end > end)
			group_end = end;
		if (__atomic_load_n(&stamp[g], __ATOMIC_RELAXED) > seen) {
			for (; p < group_end; p++) {
				uint32_t v = __atomic_load_n(&version[p], __ATOMIC_RELAXED);
				if (v == 0)
					continue;
				if (fn)
					fn(p, v, arg);
				calls++;
			}
		}
		p = group_end;
	}
	cur->seen = now;
	return calls;
}
