/* The shim's own long-lived descriptors (a duplicate of each managed
 * file's descriptor, userfaultfd, /proc/self/pagemap, the version tables),
 * kept from a program that closes descriptors it did not open: daemons
 * and servers close everything above stderr (close in a loop, closefrom,
 * close_range). Were one of ours closed, the next open would reuse its
 * number and the shim would read, map or merge into the program's new
 * file. So close() of one of ours succeeds without closing it, and
 * close_range()/closefrom() close everything around them.
 *
 * Ours are also kept high, away from the numbers a program counts on: the
 * lowest free ones, which its open() returns (a daemon that closed
 * everything expects 3 next), the small fixed ones it dup2()s onto, and
 * 0, 1 and 2 above all (a program started with stdin closed would get one
 * of ours there). They start at half the descriptor limit, or at 1024 when
 * the limit is higher than 2048. A bit per descriptor below GUARD_FDS, set
 * and read atomically, so the close hook is async-signal-safe (a child
 * between fork and exec closes descriptors too). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim.h"

#define GAIA_EXPORT __attribute__((visibility("default")))
#define GUARD_FDS 65536

static uint64_t guarded[GUARD_FDS / 64];

static bool fd_guarded(int fd)
{
	return fd >= 0 && fd < GUARD_FDS &&
	       (__atomic_load_n(&guarded[fd / 64], __ATOMIC_ACQUIRE) >> (fd % 64) & 1);
}

static int high_base(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 2048)
		return 1024;
	return rl.rlim_cur / 2 > STDERR_FILENO ? (int)(rl.rlim_cur / 2) : STDERR_FILENO + 1;
}

int gaia_fd_keep(int fd)
{
	if (fd < 0)
		return fd;
	int base = high_base();
	if (fd < base) {
		/* Where the table is full up there, anywhere above stderr. */
		int high = fcntl(fd, F_DUPFD_CLOEXEC, base);
		if (high < 0 && fd <= STDERR_FILENO)
			high = fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
		if (high >= 0 || fd <= STDERR_FILENO) {
			REAL(close)(fd);
			if (high < 0)
				return -1;
			fd = high;
		}
	}
	if (fd < GUARD_FDS)
		__atomic_fetch_or(&guarded[fd / 64], 1ull << (fd % 64), __ATOMIC_RELEASE);
	return fd;
}

void gaia_fd_release(int fd)
{
	if (fd < 0)
		return;
	if (fd < GUARD_FDS)
		__atomic_fetch_and(&guarded[fd / 64], ~(1ull << (fd % 64)), __ATOMIC_RELEASE);
	REAL(close)(fd);
}

GAIA_EXPORT int close(int fd)
{
	/* A process cloned from ours without fork (a simulated device) runs
	 * none of the shim: its closes are real. */
	if (fd_guarded(fd) && gaia_process_is_ours())
		return 0; /* as if closed; the number stays ours */
	int rc = REAL(close)(fd);
	fd_ident_forget(fd); /* closed even when close fails with EINTR */
	return rc;
}

/* Closes [first, last] with the kernel's close_range, around ours. */
static int close_span(unsigned first, unsigned last, unsigned flags)
{
	long rc = syscall(SYS_close_range, first, last, flags);
	if (rc < 0 && errno == ENOSYS && !(flags & CLOSE_RANGE_CLOEXEC)) {
		/* Before Linux 5.9: one by one, up to the table's size. */
		long max = sysconf(_SC_OPEN_MAX);
		for (long fd = first; fd <= (long)last && fd < (max > 0 ? max : 1024); fd++)
			REAL(close)((int)fd);
		return 0;
	}
	return (int)rc;
}

GAIA_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
	/* Marking close-on-exec closes nothing; ours have it already. */
	if (flags & CLOSE_RANGE_CLOEXEC)
		return (int)syscall(SYS_close_range, first, last, flags);
	if (first > last) {
		errno = EINVAL;
		return -1;
	}
	fd_ident_forget_range(first, last);
	if (!gaia_process_is_ours())
		return (int)syscall(SYS_close_range, first, last, flags);
	if ((flags & CLOSE_RANGE_UNSHARE) && unshare(CLONE_FILES))
		return -1;
	flags &= ~CLOSE_RANGE_UNSHARE;
	unsigned from = first;
	for (unsigned fd = first; fd <= last && fd < GUARD_FDS; fd++) {
		if (fd % 64 == 0 && !__atomic_load_n(&guarded[fd / 64], __ATOMIC_ACQUIRE)) {
			fd += 63; /* none of ours in this word */
			continue;
		}
		if (!fd_guarded((int)fd))
			continue;
		if (fd > from && close_span(from, fd - 1, (unsigned)flags) < 0)
			return -1;
		from = fd + 1;
	}
	return from <= last ? close_span(from, last, (unsigned)flags) : 0;
}

GAIA_EXPORT void closefrom(int lowfd)
{
	close_range(lowfd < 0 ? 0 : (unsigned)lowfd, UINT_MAX, 0);
}
