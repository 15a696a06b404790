/* Which descriptors name a managed file, answered without a system call
 * or a lock on the I/O hooks' path (DESIGN promise 6: what the shim does
 * not manage goes straight to libc).
 *
 * Two lock-free tables:
 * - the managed files: a count per hash bucket of (st_dev, st_ino), raised
 *   when a mapping of a file becomes managed and lowered when it goes. A
 *   bucket at zero means no managed mapping of any file hashing there; a
 *   bucket above zero may be a collision, so the caller's slow path
 *   compares the exact identity under its lock.
 * - the descriptors: per descriptor number, the (st_dev, st_ino) of what it
 *   names, or "not a regular file", taken with one fstat the first time the
 *   number is met while some mapping is managed, and forgotten when the
 *   number is closed or replaced through the shim (close, close_range,
 *   closefrom, dup2, dup3). Entries are seqlocked: a reader that meets a
 *   writer mid-update asks fstat instead.
 *
 * An entry can go stale when a descriptor number is closed and reused
 * where the shim cannot see it (glibc's own close inside fclose, a raw
 * system call). Stale in the safe direction (the entry says a managed file,
 * the descriptor is something else) costs the slow path a lookup that finds
 * nothing, or marks pages of a managed file as written that were not
 * (extra work, never wrong bytes). Stale in the other direction (the entry
 * says unmanaged, the descriptor now names a managed file) loses the
 * record of a write() through it; that write is still found at the next
 * acquire by the file's change time and the per-page checksums (checksum.c),
 * which catch every writer the shim does not see, and its reads were the
 * kernel's anyway (the page cache holds the CPU's newest bytes).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shim.h"

#define GAIA_EXPORT __attribute__((visibility("default")))

/* --- managed files --- */

#define FILE_BUCKETS 4096
static uint32_t file_buckets[FILE_BUCKETS];
uint32_t fd_ident_files_managed; /* sum of the buckets */

static unsigned file_bucket(dev_t dev, ino_t ino)
{
	uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ull ^ (uint64_t)dev * 0xc2b2ae3d27d4eb4full;
	return (unsigned)(h >> 52) % FILE_BUCKETS;
}

void fd_ident_file_managed(dev_t dev, ino_t ino)
{
	__atomic_add_fetch(&file_buckets[file_bucket(dev, ino)], 1, __ATOMIC_RELEASE);
	__atomic_add_fetch(&fd_ident_files_managed, 1, __ATOMIC_RELEASE);
}

void fd_ident_file_unmanaged(dev_t dev, ino_t ino)
{
	__atomic_sub_fetch(&file_buckets[file_bucket(dev, ino)], 1, __ATOMIC_RELEASE);
	__atomic_sub_fetch(&fd_ident_files_managed, 1, __ATOMIC_RELEASE);
}

bool fd_ident_file_listed(dev_t dev, ino_t ino)
{
	return __atomic_load_n(&file_buckets[file_bucket(dev, ino)], __ATOMIC_ACQUIRE) != 0;
}

/* --- descriptors --- */

enum { KIND_UNKNOWN = 0, KIND_OTHER = 1, KIND_REGULAR = 2, KIND_APPEND = 4 /* with REGULAR */ };

struct fd_entry {
	uint32_t seq; /* even: stable; odd: being written */
	uint32_t kind;
	uint64_t dev, ino;
};

#define CHUNK_FDS 4096
#define CHUNKS 256 /* descriptors below 2^20 are cached; others ask fstat */
static struct fd_entry *chunks[CHUNKS];

static struct fd_entry *entry_of(int fd, bool create)
{
	if (fd < 0 || fd >= CHUNK_FDS * CHUNKS)
		return NULL;
	struct fd_entry **slot = &chunks[fd / CHUNK_FDS];
	struct fd_entry *c = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (!c && create) {
		/* mmap, not malloc: the hooks run in signal handlers too (write
		 * and ftruncate are async-signal-safe), and malloc is not. */
		void *fresh = REAL(mmap)(NULL, CHUNK_FDS * sizeof(struct fd_entry), PROT_READ | PROT_WRITE,
					 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (fresh == MAP_FAILED)
			return NULL;
		if (__atomic_compare_exchange_n(slot, &c, (struct fd_entry *)fresh, false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			c = fresh;
		else
			REAL(munmap)(fresh, CHUNK_FDS * sizeof(struct fd_entry)); /* another thread's chunk won */
	}
	return c ? &c[fd % CHUNK_FDS] : NULL;
}

/* Writes an entry unless another writer holds it (then it stays as the
 * other writer leaves it, or unknown: both are safe). */
static void entry_store(struct fd_entry *e, uint32_t kind, uint64_t dev, uint64_t ino)
{
	uint32_t s = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);
	if ((s & 1) || !__atomic_compare_exchange_n(&e->seq, &s, s + 1, false, __ATOMIC_ACQUIRE,
						    __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&e->kind, kind, __ATOMIC_RELAXED);
	__atomic_store_n(&e->dev, dev, __ATOMIC_RELAXED);
	__atomic_store_n(&e->ino, ino, __ATOMIC_RELAXED);
	__atomic_store_n(&e->seq, s + 2, __ATOMIC_RELEASE);
}

static uint32_t entry_load(struct fd_entry *e, uint64_t *dev, uint64_t *ino)
{
	uint32_t s = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
	if (s & 1)
		return KIND_UNKNOWN;
	/* Acquire loads: the second look at seq cannot come before them. */
	uint32_t kind = __atomic_load_n(&e->kind, __ATOMIC_ACQUIRE);
	*dev = __atomic_load_n(&e->dev, __ATOMIC_ACQUIRE);
	*ino = __atomic_load_n(&e->ino, __ATOMIC_ACQUIRE);
	return __atomic_load_n(&e->seq, __ATOMIC_RELAXED) == s ? kind : KIND_UNKNOWN;
}

void fd_ident_forget(int fd)
{
	struct fd_entry *e = entry_of(fd, false);
	if (e && __atomic_load_n(&e->kind, __ATOMIC_RELAXED) != KIND_UNKNOWN)
		entry_store(e, KIND_UNKNOWN, 0, 0);
}

void fd_ident_forget_range(unsigned first, unsigned last)
{
	for (unsigned c = first / CHUNK_FDS; c < CHUNKS && c <= last / CHUNK_FDS; c++) {
		if (!__atomic_load_n(&chunks[c], __ATOMIC_ACQUIRE))
			continue;
		unsigned lo = c * CHUNK_FDS > first ? c * CHUNK_FDS : first;
		unsigned hi = (c + 1) * CHUNK_FDS - 1 < last ? (c + 1) * CHUNK_FDS - 1 : last;
		for (unsigned fd = lo; fd <= hi; fd++)
			fd_ident_forget((int)fd);
	}
}

bool fd_ident_managed(int fd, dev_t *dev, ino_t *ino, bool *append)
{
	if (!fd_ident_any_managed())
		return false;
	struct fd_entry *e = entry_of(fd, true);
	uint64_t d = 0, i = 0;
	uint32_t kind = e ? entry_load(e, &d, &i) : KIND_UNKNOWN;
	if (kind == KIND_UNKNOWN) {
		struct stat st;
		int saved = errno;
		if (fstat(fd, &st)) {
			errno = saved;
			return false; /* not open: nothing to cache */
		}
		errno = saved;
		kind = KIND_OTHER;
		if (S_ISREG(st.st_mode)) {
			int fl = fcntl(fd, F_GETFL);
			kind = KIND_REGULAR | (fl >= 0 && (fl & O_APPEND) ? KIND_APPEND : 0);
		}
		errno = saved;
		d = st.st_dev;
		i = st.st_ino;
		if (e)
			entry_store(e, kind, d, i);
	}
	if (!(kind & KIND_REGULAR) ||
	    !__atomic_load_n(&file_buckets[file_bucket((dev_t)d, (ino_t)i)], __ATOMIC_ACQUIRE))
		return false;
	*dev = (dev_t)d;
	*ino = (ino_t)i;
	*append = kind & KIND_APPEND;
	return true;
}

/* dup2/dup3 replace what newfd named. */
GAIA_EXPORT int dup3(int oldfd, int newfd, int flags)
{
	int rc = REAL(dup3)(oldfd, newfd, flags);
	if (rc >= 0)
		fd_ident_forget(rc);
	return rc;
}

GAIA_EXPORT int dup2(int oldfd, int newfd)
{
	int rc = REAL(dup2)(oldfd, newfd);
	if (rc >= 0)
		fd_ident_forget(rc);
	return rc;
}

/* fcntl is variadic; its third argument, when there is one, is an int, a
 * long or a pointer, all passed alike. F_SETFL may change O_APPEND. */
static int fcntl_common(int (*real)(int, int, ...), int fd, int cmd, va_list ap)
{
	void *arg = va_arg(ap, void *);
	int rc = real(fd, cmd, arg);
	if (cmd == F_SETFL && rc == 0)
		fd_ident_forget(fd);
	return rc;
}

GAIA_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	int rc = fcntl_common(REAL(fcntl), fd, cmd, ap);
	va_end(ap);
	return rc;
}

GAIA_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	int rc = fcntl_common(REAL(fcntl64), fd, cmd, ap);
	va_end(ap);
	return rc;
}
