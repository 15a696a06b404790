/* Interposed file reads: read, pread, readv, preadv, preadv2.
 *
 * The page cache holds the newest CPU-side bytes of a managed file (device
 * results are merged into it at the sync), so reads need nothing for
 * coherence. What the shim adds is peer caching (DESIGN §3.4): when a
 * read's pages are no longer in the page cache and a device holds their
 * current bytes, they come from the device instead of storage. Which
 * pages the page cache holds is asked with mincore on the program's
 * mapping of the file, not with preadv2(RWF_NOWAIT): that flag still
 * starts readahead before it answers "not cached", and the readahead
 * fetches the very pages a device could have served. Processes with no
 * device replica pay one load per read, descriptors of unmanaged files one
 * lock-free lookup (fdident.c). Vector reads are the kernel's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "shim.h"
#include "stats.h"

#define GAIA_EXPORT __attribute__((visibility("default")))

bool gaia_peer_reads;

/* A read that a device might serve: of a managed file (one lock-free
 * lookup decides; every other descriptor, /proc and /sys files, pipes and
 * sockets included, goes straight to the kernel), in a process with a
 * device replica. */
static bool peer_candidate(int fd, struct stat *st)
{
	dev_t dev;
	ino_t ino;
	bool append;
	if (!fd_ident_any_managed() || gaia_in_shim || !__atomic_load_n(&gaia_peer_reads, __ATOMIC_RELAXED) ||
	    !fd_ident_managed(fd, &dev, &ino, &append) || !gaia_process_is_ours())
		return false;
	int saved = errno;
	bool ok = fstat(fd, st) == 0 && st->st_dev == dev && st->st_ino == ino;
	errno = saved;
	return ok;
}

/* A read of len bytes at offset of a regular file, page run by page run:
 * what the page cache holds, or no device holds current, from the kernel;
 * the rest from a device. Returns as pread would. */
static ssize_t peer_pread(int fd, const struct stat *st, char *buf, size_t len, off_t offset)
{
	size_t done = 0;
	while (done < len && offset + (off_t)done < st->st_size) {
		/* Never past the end of the file, where a device's page holds
		 * zeros the kernel would not return. */
		size_t left = (size_t)(st->st_size - (offset + (off_t)done));
		size_t ask = len - done < left ? len - done : left;
		size_t kernel_bytes = ask;
		gaia_in_shim++;
		size_t served = gpu_peer_read(st, buf + done, ask, offset + (off_t)done, &kernel_bytes);
		gaia_in_shim--;
		if (served) {
			stats_add(GAIA_STAT_peer_read_bytes, served);
			done += served;
			continue;
		}
		ssize_t got = IO_GATED(buf + done, kernel_bytes,
				       REAL(pread64)(fd, buf + done, kernel_bytes, offset + (off_t)done));
		if (got < 0)
			return done ? (ssize_t)done : -1;
		done += (size_t)got;
		if ((size_t)got < kernel_bytes)
			break; /* end of file */
	}
	return (ssize_t)done;
}

/* The hooks' first test sends straight to libc (a tail call) every call
 * of a process with no managed mapping, and every call of one with no
 * device replica whose buffer lies outside the managed span; the rest
 * come here. */
static __attribute__((noinline)) ssize_t pread_managing(int fd, void *buf, size_t count, off_t offset)
{
	struct stat st;
	if (!count || !peer_candidate(fd, &st))
		return IO_GATED(buf, count, REAL(pread64)(fd, buf, count, offset));
	int saved = errno;
	ssize_t n = peer_pread(fd, &st, buf, count, offset);
	if (n >= 0)
		errno = saved;
	return n;
}

GAIA_EXPORT ssize_t pread64(int fd, void *buf, size_t count, off_t offset)
{
	if (!fd_ident_any_managed() || (!__atomic_load_n(&gaia_peer_reads, __ATOMIC_RELAXED) &&
					 !io_gate_may_cover(buf, count)))
		return REAL(pread64)(fd, buf, count, offset);
	return pread_managing(fd, buf, count, offset);
}

GAIA_EXPORT ssize_t pread(int fd, void *buf, size_t count, off_t offset)
	__attribute__((alias("pread64")));

static __attribute__((noinline)) ssize_t read_managing(int fd, void *buf, size_t count)
{
	struct stat st;
	if (!count || !peer_candidate(fd, &st))
		return IO_GATED(buf, count, REAL(read)(fd, buf, count));
	/* At the descriptor's position, which then moves past what was read
	 * (not atomic against another thread reading the same descriptor). */
	off_t pos = lseek(fd, 0, SEEK_CUR);
	if (pos < 0)
		return IO_GATED(buf, count, REAL(read)(fd, buf, count));
	int saved = errno;
	ssize_t n = peer_pread(fd, &st, buf, count, pos);
	if (n > 0)
		lseek(fd, pos + n, SEEK_SET);
	if (n >= 0)
		errno = saved;
	return n;
}

GAIA_EXPORT ssize_t read(int fd, void *buf, size_t count)
{
	if (!fd_ident_any_managed() || (!__atomic_load_n(&gaia_peer_reads, __ATOMIC_RELAXED) &&
					 !io_gate_may_cover(buf, count)))
		return REAL(read)(fd, buf, count);
	return read_managing(fd, buf, count);
}

/* _FORTIFY_SOURCE's checked forms. Where the compiler knows the size of
 * the buffer, glibc's headers compile read() and pread() into these
 * (Ubuntu's and Fedora's compilers fortify optimised code by default), and
 * the plain hooks above never see the call. Each checks as glibc does
 * (__chk_fail, which aborts, when the count exceeds the buffer) and goes on
 * as the plain call. */
extern void __chk_fail(void) __attribute__((noreturn));
GAIA_EXPORT ssize_t __read_chk(int fd, void *buf, size_t nbytes, size_t buflen);
GAIA_EXPORT ssize_t __pread64_chk(int fd, void *buf, size_t nbytes, off_t offset, size_t buflen);
GAIA_EXPORT ssize_t __pread_chk(int fd, void *buf, size_t nbytes, off_t offset, size_t buflen);

GAIA_EXPORT ssize_t __read_chk(int fd, void *buf, size_t nbytes, size_t buflen)
{
	if (nbytes > buflen)
		__chk_fail();
	return read(fd, buf, nbytes);
}

GAIA_EXPORT ssize_t __pread64_chk(int fd, void *buf, size_t nbytes, off_t offset, size_t buflen)
{
	if (nbytes > buflen)
		__chk_fail();
	return pread64(fd, buf, nbytes, offset);
}

GAIA_EXPORT ssize_t __pread_chk(int fd, void *buf, size_t nbytes, off_t offset, size_t buflen)
	__attribute__((alias("__pread64_chk")));

GAIA_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	const void *s;
	size_t len = iov_span(iov, iovcnt, &s);
	return IO_GATED(s, len, REAL(readv)(fd, iov, iovcnt));
}

GAIA_EXPORT ssize_t preadv(int fd, const struct iovec *iov, int iovcnt, off_t offset)
{
	const void *s;
	size_t len = iov_span(iov, iovcnt, &s);
	return IO_GATED(s, len, REAL(preadv)(fd, iov, iovcnt, offset));
}

GAIA_EXPORT ssize_t preadv64(int fd, const struct iovec *iov, int iovcnt, off_t offset)
	__attribute__((alias("preadv")));

GAIA_EXPORT ssize_t preadv2(int fd, const struct iovec *iov, int iovcnt, off_t offset, int flags)
{
	const void *s;
	size_t len = iov_span(iov, iovcnt, &s);
	return IO_GATED(s, len, REAL(preadv2)(fd, iov, iovcnt, offset, flags));
}

GAIA_EXPORT ssize_t preadv64v2(int fd, const struct iovec *iov, int iovcnt, off_t offset,
			       int flags) __attribute__((alias("preadv2")));
