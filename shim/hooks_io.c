/* Interposed file writes: write, pwrite, writev, pwritev, pwritev2,
 * ftruncate and truncate. The kernel writes these into the page cache without touching
 * the mapping's page tables, so write tracking cannot see them (research:
 * pagecache_wp.md): the shim records them as CPU writes of the pages of
 * every managed mapping of that file. With no managed mapping in the
 * process they cost one load; on a descriptor of an unmanaged file, one
 * lock-free lookup (fdident.c). Reads need nothing: the page cache already
 * holds the newest CPU-side bytes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "shim.h"

#define GAIA_EXPORT __attribute__((visibility("default")))

#ifndef RWF_APPEND
#define RWF_APPEND 0x10
#endif

/* A write to a managed file, as the hooks see it: which file, and, for a
 * write whose offset the kernel picks (write, writev, O_APPEND, RWF_APPEND),
 * where the descriptor stood before it (the file's size for an append).
 * Unmanaged descriptors cost one lock-free lookup and no system call
 * (fdident.c). */
struct placed {
	bool managed;
	bool append;
	dev_t dev;
	ino_t ino;
	off_t before; /* -1: unknown */
};

static struct placed place(int fd, bool kernel_offset, bool rwf_append)
{
	struct placed w = {.before = -1};
	if (gaia_in_shim || !fd_ident_managed(fd, &w.dev, &w.ino, &w.append) || !gaia_state_is_ours())
		return w;
	w.managed = true;
	w.append |= rwf_append;
	if (!kernel_offset && !w.append)
		return w;
	int saved = errno;
	if (w.append) {
		struct stat st;
		w.before = fstat(fd, &st) == 0 ? st.st_size : -1;
	} else {
		w.before = lseek(fd, 0, SEEK_CUR);
	}
	errno = saved;
	return w;
}

/* Records n bytes just written: at `offset` when the caller named it and
 * the kernel honoured it, else between where the descriptor stood before
 * and where it stands now. Other threads moving a shared offset forward
 * (or appending) in between only widen that span; one that moves it back
 * may hide the write here, and then the file's change time and the page
 * checksums find it at the next acquire (checksum.c). */
static void record_write(int fd, const struct placed *w, off_t offset, ssize_t n)
{
	if (n <= 0 || !w->managed)
		return;
	int saved = errno;
	gaia_in_shim++;
	off_t lo = offset, hi = offset + n;
	if (offset < 0 || w->append) {
		off_t after = -1;
		if (w->append) {
			struct stat st;
			after = fstat(fd, &st) == 0 ? st.st_size : -1;
		} else {
			after = lseek(fd, 0, SEEK_CUR);
		}
		lo = w->before >= 0 && w->before < after - n ? w->before : after - n;
		hi = w->before >= 0 && w->before + n > after ? w->before + n : after;
	}
	if (lo >= 0 && hi > lo)
		mapping_file_written(w->dev, w->ino, lo, (size_t)(hi - lo));
	gaia_in_shim--;
	errno = saved;
}

/* The hooks' first test sends every call of a process with no managed
 * mapping straight to libc (a tail call); the rest come here. */
static __attribute__((noinline)) ssize_t write_managing(int fd, const void *buf, size_t count)
{
	struct placed w = place(fd, true, false);
	ssize_t n = IO_GATED(buf, count, REAL(write)(fd, buf, count));
	record_write(fd, &w, -1, n);
	return n;
}

/* pwrite on a descriptor open O_APPEND appends, whatever the offset says
 * (pwrite(2), BUGS). */
static __attribute__((noinline)) ssize_t pwrite_managing(int fd, const void *buf, size_t count, off_t offset)
{
	struct placed w = place(fd, false, false);
	ssize_t n = IO_GATED(buf, count, REAL(pwrite64)(fd, buf, count, offset));
	record_write(fd, &w, offset, n);
	return n;
}

GAIA_EXPORT ssize_t write(int fd, const void *buf, size_t count)
{
	if (!fd_ident_any_managed())
		return REAL(write)(fd, buf, count);
	return write_managing(fd, buf, count);
}

GAIA_EXPORT ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset)
{
	if (!fd_ident_any_managed())
		return REAL(pwrite64)(fd, buf, count, offset);
	return pwrite_managing(fd, buf, count, offset);
}

GAIA_EXPORT ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset)
	__attribute__((alias("pwrite64")));

GAIA_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	const void *s;
	size_t len = iov_span(iov, iovcnt, &s);
	struct placed w = place(fd, true, false);
	ssize_t n = IO_GATED(s, len, REAL(writev)(fd, iov, iovcnt));
	record_write(fd, &w, -1, n);
	return n;
}

GAIA_EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int iovcnt, off_t offset)
{
	const void *s;
	size_t len = iov_span(iov, iovcnt, &s);
	struct placed w = place(fd, false, false);
	ssize_t n = IO_GATED(s, len, REAL(pwritev)(fd, iov, iovcnt, offset));
	record_write(fd, &w, offset, n);
	return n;
}

GAIA_EXPORT ssize_t pwritev64(int fd, const struct iovec *iov, int iovcnt, off_t offset)
	__attribute__((alias("pwritev")));

/* pwritev2 with offset -1 writes at the descriptor's position. */
GAIA_EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int iovcnt, off_t offset, int flags)
{
	const void *s;
	size_t len = iov_span(iov, iovcnt, &s);
	struct placed w = place(fd, offset == -1, (flags & RWF_APPEND) != 0);
	ssize_t n = IO_GATED(s, len, REAL(pwritev2)(fd, iov, iovcnt, offset, flags));
	record_write(fd, &w, offset, n);
	return n;
}

GAIA_EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int iovcnt, off_t offset,
				int flags) __attribute__((alias("pwritev2")));

/* A size change of a managed file: under the mapping lock (see
 * mapping_file_resize_begin), between the size before and after (every
 * page from the new size on when the size before is not known). */
static int resize_managed(dev_t dev, ino_t ino, int fd, const char *path, off_t length)
{
	int saved = errno;
	gaia_in_shim++;
	bool locked = mapping_file_resize_begin();
	struct stat st;
	bool known = (fd >= 0 ? fstat(fd, &st) : stat(path, &st)) == 0;
	int rc = fd >= 0 ? REAL(ftruncate64)(fd, length) : REAL(truncate64)(path, length);
	int err = rc ? errno : saved;
	if (rc == 0)
		mapping_file_resize_end(locked, dev, ino, known ? st.st_size : INT64_MAX, length);
	else
		mapping_file_resize_end(locked, dev, ino, 0, 0);
	gaia_in_shim--;
	errno = err;
	return rc;
}

GAIA_EXPORT int ftruncate64(int fd, off_t length)
{
	if (!fd_ident_any_managed())
		return REAL(ftruncate64)(fd, length);
	struct placed w = place(fd, false, false);
	if (!w.managed)
		return REAL(ftruncate64)(fd, length);
	return resize_managed(w.dev, w.ino, fd, NULL, length);
}

GAIA_EXPORT int ftruncate(int fd, off_t length) __attribute__((alias("ftruncate64")));

/* Whether path (from dirfd) names a managed file of this process's; st
 * gets its stat. errno is kept. */
static bool managed_at(int dirfd, const char *path, struct stat *st)
{
	int saved = errno;
	bool listed = fstatat(dirfd, path, st, 0) == 0 && S_ISREG(st->st_mode) &&
		      fd_ident_file_listed(st->st_dev, st->st_ino) && gaia_state_is_ours();
	errno = saved;
	return listed;
}

GAIA_EXPORT int truncate64(const char *path, off_t length)
{
	struct stat st;
	if (!fd_ident_any_managed() || gaia_in_shim || !managed_at(AT_FDCWD, path, &st))
		return REAL(truncate64)(path, length);
	return resize_managed(st.st_dev, st.st_ino, -1, path, length);
}

GAIA_EXPORT int truncate(const char *path, off_t length) __attribute__((alias("truncate64")));

/* --- opening that empties the file --- */

/* open(O_TRUNC), creat and fopen("w") empty the file they open: a managed
 * file's pages then go from under the shim's copies as with ftruncate, so
 * they are emptied under the mapping lock too (mapping_file_resize_begin)
 * and the pages that went count as written. Every other open, and every
 * open in a process without a managed file, goes straight to libc. */
struct emptying {
	bool listed, locked;
	struct stat before;
};

static void emptying_begin(struct emptying *e, int dirfd, const char *path)
{
	gaia_in_shim++;
	e->listed = managed_at(dirfd, path, &e->before);
	e->locked = e->listed && mapping_file_resize_begin();
}

/* now: the file the call left behind (NULL when it failed). */
static void emptying_end(struct emptying *e, const struct stat *now)
{
	int saved = errno;
	if (e->listed) {
		/* The name may have led elsewhere by the call: then nothing of
		 * the file stat'ed changed (the other file's changes are found
		 * by the checksum pass). */
		bool same = now && now->st_dev == e->before.st_dev && now->st_ino == e->before.st_ino;
		mapping_file_resize_end(e->locked, e->before.st_dev, e->before.st_ino,
					same ? e->before.st_size : 0, same ? now->st_size : 0);
	}
	gaia_in_shim--;
	errno = saved;
}

/* The descriptor an open returned: what the shim knew of its number (a
 * descriptor libc closed itself, as fclose does) is forgotten, and an
 * emptying open ends. */
static int opened(struct emptying *e, int fd)
{
	if (fd >= 0)
		fd_ident_forget(fd);
	if (e) {
		struct stat now;
		int saved = errno;
		bool known = fd >= 0 && fstat(fd, &now) == 0;
		errno = saved;
		emptying_end(e, known ? &now : NULL);
	}
	return fd;
}

static bool empties(int flags)
{
	return (flags & O_TRUNC) && fd_ident_any_managed() && !gaia_in_shim;
}

static mode_t open_mode(int flags, va_list ap)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(ap, mode_t) : 0;
}

GAIA_EXPORT int open64(const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = open_mode(flags, ap);
	va_end(ap);
	if (!empties(flags))
		return opened(NULL, REAL(open64)(path, flags, mode));
	struct emptying e;
	emptying_begin(&e, AT_FDCWD, path);
	return opened(&e, REAL(open64)(path, flags, mode));
}

GAIA_EXPORT int open(const char *path, int flags, ...) __attribute__((alias("open64")));

GAIA_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = open_mode(flags, ap);
	va_end(ap);
	if (!empties(flags))
		return opened(NULL, REAL(openat64)(dirfd, path, flags, mode));
	struct emptying e;
	emptying_begin(&e, dirfd, path);
	return opened(&e, REAL(openat64)(dirfd, path, flags, mode));
}

GAIA_EXPORT int openat(int dirfd, const char *path, int flags, ...) __attribute__((alias("openat64")));

/* _FORTIFY_SOURCE's forms (flags not known at compile time); glibc
 * declares them only to its own headers' inline functions. */
int __open64_2(const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);

GAIA_EXPORT int __open64_2(const char *path, int flags)
{
	if (!empties(flags))
		return opened(NULL, REAL(__open64_2)(path, flags));
	struct emptying e;
	emptying_begin(&e, AT_FDCWD, path);
	return opened(&e, REAL(__open64_2)(path, flags));
}

GAIA_EXPORT int __open_2(const char *path, int flags) __attribute__((alias("__open64_2")));

GAIA_EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
	if (!empties(flags))
		return opened(NULL, REAL(__openat64_2)(dirfd, path, flags));
	struct emptying e;
	emptying_begin(&e, dirfd, path);
	return opened(&e, REAL(__openat64_2)(dirfd, path, flags));
}

GAIA_EXPORT int __openat_2(int dirfd, const char *path, int flags) __attribute__((alias("__openat64_2")));

/* syscall(SYS_openat2, dirfd, path, how, size) has no libc function: the
 * syscall hook hands it here with the call that makes it. The flags are
 * read only in a process with a managed file (the kernel answers a bad
 * `how` with EFAULT; the shim reads it first only where it must). */
long gaia_openat2(const long *a, long (*call)(const long *a))
{
	const struct open_how *how = (const struct open_how *)a[2];
	if (!fd_ident_any_managed() || gaia_in_shim || !how || (size_t)a[3] < sizeof(how->flags) ||
	    !empties((int)how->flags))
		return opened(NULL, (int)call(a));
	struct emptying e;
	emptying_begin(&e, (int)a[0], (const char *)a[1]);
	return opened(&e, (int)call(a));
}

GAIA_EXPORT int creat64(const char *path, mode_t mode)
{
	return open64(path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

GAIA_EXPORT int creat(const char *path, mode_t mode) __attribute__((alias("creat64")));

/* stdio opens with libc's own open, which no hook sees: "w" and "w+"
 * empty the file. The shim empties a managed one first, by name, under
 * the mapping lock (as truncate does); the stdio call then runs outside
 * the lock (it may flush, allocate, take stdio's locks) and finds the
 * file empty. "x" creates a file that does not exist: nothing to empty. */
static bool mode_empties(const char *mode)
{
	return mode && mode[0] == 'w' && !strchr(mode, 'x') && fd_ident_any_managed() && !gaia_in_shim;
}

static void empty_first(const char *path)
{
	struct emptying e;
	emptying_begin(&e, AT_FDCWD, path);
	if (!e.listed) {
		emptying_end(&e, NULL);
		return;
	}
	struct stat now;
	int saved = errno;
	bool emptied = REAL(truncate64)(path, 0) == 0 && stat(path, &now) == 0;
	errno = saved;
	emptying_end(&e, emptied ? &now : NULL);
}

static FILE *stdio_opened(FILE *f)
{
	if (f)
		fd_ident_forget(fileno(f));
	return f;
}

GAIA_EXPORT FILE *fopen64(const char *path, const char *mode)
{
	if (mode_empties(mode))
		empty_first(path);
	return stdio_opened(REAL(fopen64)(path, mode));
}

GAIA_EXPORT FILE *fopen(const char *path, const char *mode) __attribute__((alias("fopen64")));

GAIA_EXPORT FILE *freopen64(const char *path, const char *mode, FILE *stream)
{
	if (mode_empties(mode)) {
		/* freopen flushes the stream first: its bytes must not land
		 * after the emptying. Without a path the stream's own file is
		 * opened again, by its name under /proc. */
		fflush(stream);
		char name[40];
		if (!path && fileno(stream) >= 0)
			snprintf(name, sizeof(name), "/proc/self/fd/%d", fileno(stream));
		if (path || fileno(stream) >= 0)
			empty_first(path ? path : name);
	}
	return stdio_opened(REAL(freopen64)(path, mode, stream));
}

GAIA_EXPORT FILE *freopen(const char *path, const char *mode, FILE *stream) __attribute__((alias("freopen64")));
