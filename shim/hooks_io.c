/* Interposed file writes: write, pwrite, writev, pwritev, pwritev2 and
 * ftruncate. The kernel writes these into the page cache without touching
 * the mapping's page tables, so write tracking cannot see them (research:
 * pagecache_wp.md): the shim records them as CPU writes of the pages of
 * every managed mapping of that file. With no managed mapping in the
 * process they cost one load. Reads need nothing: the page cache already
 * holds the newest CPU-side bytes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "shim.h"

#define GAIA_EXPORT __attribute__((visibility("default")))

#ifndef RWF_APPEND
#define RWF_APPEND 0x10
#endif

/* Records n bytes just written at `offset`, or, when offset is -1, ending
 * at the descriptor's position now (write, writev, O_APPEND). */
static void record_write(int fd, off_t offset, ssize_t n)
{
	if (n <= 0 || gaia_in_shim || !mapping_any())
		return;
	int saved = errno;
	gaia_in_shim++;
	if (offset < 0) {
		off_t end = lseek(fd, 0, SEEK_CUR);
		offset = end >= n ? end - n : -1;
	}
	if (offset >= 0)
		mapping_file_written(fd, offset, (size_t)n);
	gaia_in_shim--;
	errno = saved;
}

GAIA_EXPORT ssize_t write(int fd, const void *buf, size_t count)
{
	ssize_t n = IO_GATED(buf, count, REAL(write)(fd, buf, count));
	record_write(fd, -1, n);
	return n;
}

GAIA_EXPORT ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset)
{
	ssize_t n = IO_GATED(buf, count, REAL(pwrite64)(fd, buf, count, offset));
	record_write(fd, offset, n);
	return n;
}

GAIA_EXPORT ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset)
	__attribute__((alias("pwrite64")));

GAIA_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	const void *s;
	size_t len = iov_span(iov, iovcnt, &s);
	ssize_t n = IO_GATED(s, len, REAL(writev)(fd, iov, iovcnt));
	record_write(fd, -1, n);
	return n;
}

GAIA_EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int iovcnt, off_t offset)
{
	const void *s;
	size_t len = iov_span(iov, iovcnt, &s);
	ssize_t n = IO_GATED(s, len, REAL(pwritev)(fd, iov, iovcnt, offset));
	record_write(fd, offset, n);
	return n;
}

GAIA_EXPORT ssize_t pwritev64(int fd, const struct iovec *iov, int iovcnt, off_t offset)
	__attribute__((alias("pwritev")));

GAIA_EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int iovcnt, off_t offset, int flags)
{
	const void *s;
	size_t len = iov_span(iov, iovcnt, &s);
	ssize_t n = IO_GATED(s, len, REAL(pwritev2)(fd, iov, iovcnt, offset, flags));
	if (n > 0 && (flags & RWF_APPEND) && !gaia_in_shim && mapping_any()) {
		/* Appended at the end, whatever the offset says. */
		struct stat st;
		if (fstat(fd, &st) == 0)
			offset = st.st_size - n;
	}
	record_write(fd, offset, n);
	return n;
}

GAIA_EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int iovcnt, off_t offset,
				int flags) __attribute__((alias("pwritev2")));

GAIA_EXPORT int ftruncate64(int fd, off_t length)
{
	struct stat st;
	bool track = !gaia_in_shim && mapping_any() && fstat(fd, &st) == 0;
	int rc = REAL(ftruncate64)(fd, length);
	if (rc == 0 && track) {
		int saved = errno;
		gaia_in_shim++;
		mapping_file_truncated(fd, st.st_size, length);
		gaia_in_shim--;
		errno = saved;
	}
	return rc;
}

GAIA_EXPORT int ftruncate(int fd, off_t length) __attribute__((alias("ftruncate64")));
