/* Interposed memory calls: mmap, munmap, mremap, mprotect, msync, madvise.
 * Each forwards to libc; around it, the managed-mapping bookkeeping
 * (mapping.c). Calls on memory the shim does not manage cost one check. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>

#include "shim.h"

#define GAIA_EXPORT __attribute__((visibility("default")))

static uintptr_t steer_start; /* atomics */
static size_t steer_len;
static bool steer_taken;

void mapping_steer_begin(uintptr_t start, size_t len)
{
	__atomic_store_n(&steer_taken, false, __ATOMIC_RELAXED);
	__atomic_store_n(&steer_len, len, __ATOMIC_RELAXED);
	__atomic_store_n(&steer_start, start, __ATOMIC_RELEASE);
}

bool mapping_steer_end(void)
{
	__atomic_store_n(&steer_start, 0, __ATOMIC_RELEASE);
	return __atomic_load_n(&steer_taken, __ATOMIC_ACQUIRE);
}

static __thread uintptr_t hold_start __attribute__((tls_model("initial-exec")));
static __thread uintptr_t hold_end __attribute__((tls_model("initial-exec")));
static __thread uintptr_t held_lo __attribute__((tls_model("initial-exec")));
static __thread uintptr_t held_hi __attribute__((tls_model("initial-exec")));

void mapping_hold_begin(uintptr_t start, size_t len)
{
	held_lo = held_hi = 0;
	hold_start = start;
	hold_end = start + len;
}

bool mapping_hold_end(uintptr_t *lo, uintptr_t *hi)
{
	hold_start = hold_end = 0;
	*lo = held_lo;
	*hi = held_hi;
	return held_hi > held_lo;
}

/* munmap of a range overlapping the calling thread's hold: a placeholder
 * where it overlaps, the rest unmapped. */
static int munmap_holding(void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr, b = a + ((len + GAIA_PAGE - 1) & ~(uintptr_t)(GAIA_PAGE - 1));
	uintptr_t lo = a > hold_start ? a : hold_start, hi = b < hold_end ? b : hold_end;
	if (REAL(mmap)((void *)lo, hi - lo, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
		       0) == MAP_FAILED)
		return -1;
	if (!(held_hi > held_lo) || lo < held_lo)
		held_lo = lo;
	if (hi > held_hi)
		held_hi = hi;
	if (lo > a && REAL(munmap)(addr, lo - a) != 0)
		return -1;
	if (b > hi && REAL(munmap)((void *)hi, b - hi) != 0)
		return -1;
	return 0;
}

GAIA_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t offset)
{
	uintptr_t steer = __atomic_load_n(&steer_start, __ATOMIC_ACQUIRE);
	if (steer && (uintptr_t)addr == steer && len == __atomic_load_n(&steer_len, __ATOMIC_RELAXED) &&
	    (flags & MAP_ANONYMOUS) && !(flags & MAP_FIXED)) {
		void *p = REAL(mmap)(addr, len, prot, (flags & ~MAP_FIXED_NOREPLACE) | MAP_FIXED, fd, offset);
		if (p == addr)
			__atomic_store_n(&steer_taken, true, __ATOMIC_RELEASE);
		return p;
	}
	if (gaia_in_shim)
		return REAL(mmap)(addr, len, prot, flags, fd, offset);
	char path[PATH_MAX];
	bool wanted = mapping_wanted(__builtin_return_address(0), len, prot, flags, fd, path,
				     sizeof(path));
	/* MAP_FIXED replaces whatever was there: a release point for it. The
	 * driver calls that tearing down a device replica makes (which may
	 * map memory themselves) must not come back here. */
	if ((flags & MAP_FIXED) && mapping_overlaps(addr, len)) {
		gaia_in_shim++;
		mapping_forget_range(addr, len);
		gaia_in_shim--;
	}
	/* Only a fixed address takes the shim's padding back: a hint that
	 * lands on it is a hint the kernel does not follow, as it would not
	 * for any other mapping there (libcuda reserves its chunks with
	 * hints, and a chunk inside a region's padding would cost the region
	 * its device copy at its own address). */
	if (addr && (flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) && mapping_any()) {
		gaia_in_shim++;
		mapping_release_padding(addr, len);
		gaia_in_shim--;
	}
	struct placement place = {0};
	if (wanted && !addr && !(flags & (MAP_FIXED | MAP_FIXED_NOREPLACE))) {
		if (gpu_before_placing) {
			gaia_in_shim++;
			gpu_before_placing();
			gaia_in_shim--;
		}
		mapping_place(len, &place);
	}
	void *p = place.addr ? REAL(mmap)(place.addr, len, prot, flags | MAP_FIXED, fd, offset)
			     : REAL(mmap)(addr, len, prot, flags, fd, offset);
	if (place.addr)
		mapping_place_done(&place, p);
	if (p != MAP_FAILED && wanted) {
		int saved = errno;
		gaia_in_shim++;
		mapping_adopt(p, len, prot, flags, fd, offset, path, __builtin_return_address(0));
		if (place.pad_len)
			mapping_take_padding(p, place.pad_start, place.pad_len);
		gaia_in_shim--;
		errno = saved;
	}
	return p;
}

GAIA_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t offset)
	__attribute__((alias("mmap")));

GAIA_EXPORT int munmap(void *addr, size_t len)
{
	if (hold_end && (uintptr_t)addr < hold_end && (uintptr_t)addr + len > hold_start && !((uintptr_t)addr & (GAIA_PAGE - 1)))
		return munmap_holding(addr, len);
	if (!gaia_in_shim && mapping_overlaps(addr, len)) {
		gaia_in_shim++;
		mapping_forget_range(addr, len);
		gaia_in_shim--;
	}
	if (!gaia_in_shim && mapping_any())
		mapping_release_padding(addr, len);
	return IO_GATED(addr, len, REAL(munmap)(addr, len));
}

/* A moved or resized mapping is forgotten (its writes released) and the
 * new range taken on afresh: userfaultfd registration does not follow a
 * move without UFFD_FEATURE_EVENT_REMAP, and the versions restart. */
GAIA_EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	void *new_addr = NULL;
	if (flags & MREMAP_FIXED) {
		va_list ap;
		va_start(ap, flags);
		new_addr = va_arg(ap, void *);
		va_end(ap);
	}
	/* Paddings at the destination go after the mappings forgotten here
	 * (forgetting a replica may hold its room as a padding again). */
	bool unpad = !gaia_in_shim && (flags & MREMAP_FIXED) && mapping_any();
	if (gaia_in_shim || !mapping_overlaps(old, old_len ? old_len : 1)) {
		/* Moved over a managed mapping: that one goes, as under munmap. */
		if (!gaia_in_shim && (flags & MREMAP_FIXED) && mapping_overlaps(new_addr, new_len)) {
			gaia_in_shim++;
			mapping_forget_range(new_addr, new_len);
			gaia_in_shim--;
		}
		if (unpad)
			mapping_release_padding(new_addr, new_len);
		return IO_GATED(old, old_len, REAL(mremap)(old, old_len, new_len, flags, new_addr));
	}
	gaia_in_shim++;
	struct mapping_origin origin;
	bool known = mapping_origin_at(old, &origin);
	mapping_forget_range(old, old_len);
	if ((flags & MREMAP_FIXED) && mapping_overlaps(new_addr, new_len))
		mapping_forget_range(new_addr, new_len);
	if (unpad)
		mapping_release_padding(new_addr, new_len);
	void *p = IO_GATED(old, old_len, REAL(mremap)(old, old_len, new_len, flags, new_addr));
	int saved = errno;
	if (known && origin.marked) {
		static int once;
		gaia_log_once(&once, GAIA_LOG_WARN,
			      "%s has pages the program made read-only or inaccessible with mprotect; "
			      "after mremap it (and mappings like it) passes through unmanaged",
			      origin.path);
		mapping_origin_free(&origin);
		known = false;
	}
	if (known) {
		if (p != MAP_FAILED)
			mapping_adopt(p, new_len, origin.prot, origin.flags, origin.fd, origin.offset,
				      origin.path, __builtin_return_address(0));
		else
			mapping_adopt(old, old_len, origin.prot, origin.flags, origin.fd,
				      origin.offset, origin.path, __builtin_return_address(0));
		mapping_origin_free(&origin);
	}
	gaia_in_shim--;
	errno = saved;
	return p;
}

/* A mapping made writable: from then on kernels' writes to it count too
 * (devices start keeping base copies; a replica made without them is
 * released and made again at the next launch). Pages made read-only (or
 * inaccessible) take no more kernel writes: a sync drops them. */
GAIA_EXPORT int mprotect(void *addr, size_t len, int prot)
{
	bool managed = !gaia_in_shim && mapping_overlaps(addr, len);
	if (managed && !(prot & PROT_READ)) {
		int saved = errno;
		gaia_in_shim++;
		mapping_before_unreadable(addr, len);
		gaia_in_shim--;
		errno = saved;
	}
	if (managed && !(prot & PROT_WRITE)) {
		gaia_in_shim++;
		int rc = mapping_protect_dropping_write(addr, len, prot);
		gaia_in_shim--;
		return rc;
	}
	if (!managed)
		return IO_GATED(addr, len, REAL(mprotect)(addr, len, prot));
	int saved = errno;
	gaia_in_shim++;
	mapping_before_writable(addr, len);
	gaia_in_shim--;
	errno = saved;
	int rc = IO_GATED(addr, len, REAL(mprotect)(addr, len, prot));
	saved = errno;
	gaia_in_shim++;
	/* ENOMEM: part of the range may have changed before the failure. */
	mapping_writable_end(addr, len, rc == 0 || saved == ENOMEM);
	gaia_in_shim--;
	errno = saved;
	return rc;
}

GAIA_EXPORT int msync(void *addr, size_t len, int flags)
{
	if (!gaia_in_shim && mapping_any()) {
		int saved = errno;
		gaia_in_shim++;
		mapping_release_range(addr, len);
		gaia_in_shim--;
		errno = saved;
	}
	return IO_GATED(addr, len, REAL(msync)(addr, len, flags));
}

static bool advice_discards(int advice)
{
	switch (advice) {
	case MADV_DONTNEED:
	case MADV_REMOVE:
	case MADV_FREE:
#ifdef MADV_PAGEOUT
	case MADV_PAGEOUT:
#endif
#ifdef MADV_COLD
	case MADV_COLD:
#endif
		return true;
	default:
		return false;
	}
}

GAIA_EXPORT int madvise(void *addr, size_t len, int advice)
{
	if (gaia_in_shim || !advice_discards(advice) || !mapping_overlaps(addr, len))
		return IO_GATED(addr, len, REAL(madvise)(addr, len, advice));
	gaia_in_shim++;
	mapping_before_discard(addr, len);
	int rc = IO_GATED(addr, len, REAL(madvise)(addr, len, advice));
	int saved = errno;
	mapping_after_discard(addr, len);
	gaia_in_shim--;
	errno = saved;
	return rc;
}
