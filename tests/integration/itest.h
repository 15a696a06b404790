/* Helpers shared by the integration test programs (header only: each
 * integration test program is its own executable and links nothing of ours).
 *
 * The shim's calls are looked up with dlsym(RTLD_DEFAULT, ...) so that the
 * same binary runs with and without LD_PRELOAD=libgaia.so. */
#ifndef GAIA_ITEST_H
#define GAIA_ITEST_H

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/userfaultfd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gaia.h>

#include "../common/unseen_syscall.h"

#define ITEST_PASS 0
#define ITEST_FAIL 1
#define ITEST_SKIP 77
#define ITEST_PAGE 4096ul

struct itest_gaia {
	int (*mrelease)(void *, size_t, int);
	int (*macquire)(void *, size_t, int);
	int (*mversion)(const void *, size_t, uint32_t *);
};

/* The shim's calls; all NULL when the program runs without it. */
static inline struct itest_gaia itest_gaia_lookup(void)
{
	struct itest_gaia g;

	g.mrelease = (int (*)(void *, size_t, int))dlsym(RTLD_DEFAULT, "gaia_mrelease");
	g.macquire = (int (*)(void *, size_t, int))dlsym(RTLD_DEFAULT, "gaia_macquire");
	g.mversion = (int (*)(const void *, size_t, uint32_t *))dlsym(RTLD_DEFAULT, "gaia_mversion");
	return g;
}

/* The seed from the environment variable `name` (replay), or a fresh one. */
static inline uint64_t itest_seed(const char *name)
{
	const char *v = getenv(name);
	struct timespec ts;

	if (v && *v)
		return strtoull(v, NULL, 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	return ((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid()) % 1000000007ull;
}

static inline void itest_rng_seed(unsigned short rng[3], uint64_t seed)
{
	rng[0] = (unsigned short)(seed ^ 0x330e);
	rng[1] = (unsigned short)(seed >> 16);
	rng[2] = (unsigned short)((seed >> 32) ^ 0x5eed);
}

/* Uniform in [0, n); 0 when n is 0. */
static inline uint32_t itest_rnd(unsigned short rng[3], uint32_t n)
{
	return n ? (uint32_t)jrand48(rng) % n : 0;
}

/* A fresh directory under $TMPDIR or /tmp (path has PATH_MAX bytes). */
static inline int itest_tempdir(char *path, const char *name)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(path, PATH_MAX, "%s/%s.XXXXXX", tmp && *tmp ? tmp : "/tmp", name);
	return mkdtemp(path) ? 0 : -1;
}

static inline int itest_remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	return remove(path);
}

static inline void itest_remove_tree(const char *path)
{
	nftw(path, itest_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Creates (or replaces) `path` with `size` random bytes from rng (size a
 * multiple of ITEST_PAGE). 0, or -1 with errno set. */
static inline int itest_random_file(const char *path, size_t size, unsigned short rng[3])
{
	unsigned char buf[ITEST_PAGE];
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int err;

	if (fd < 0)
		return -1;
	for (size_t off = 0; off < size; off += sizeof(buf)) {
		for (size_t i = 0; i < sizeof(buf); i += 4) {
			uint32_t v = (uint32_t)jrand48(rng);
			memcpy(buf + i, &v, 4);
		}
		if (pwrite(fd, buf, sizeof(buf), (off_t)off) != (ssize_t)sizeof(buf)) {
			err = errno ? errno : EIO;
			close(fd);
			errno = err;
			return -1;
		}
	}
	return close(fd);
}

/* Waits for child pid at most limit_s seconds; after that kills it (its
 * process group too when group is true: it made pid its group) and
 * returns -1. 0 once it ended (*status set), -1 if it is not a child. */
static inline int itest_wait_limited(pid_t pid, int *status, int limit_s, bool group)
{
	for (int waited_ms = 0; waited_ms < limit_s * 1000; waited_ms += 5) {
		pid_t got = waitpid(pid, status, WNOHANG);
		if (got == pid)
			return 0;
		if (got < 0)
			return -1;
		struct timespec nap = {0, 5 * 1000 * 1000};
		nanosleep(&nap, NULL);
	}
	kill(group ? -pid : pid, SIGKILL);
	waitpid(pid, status, 0);
	return -1;
}

/* Whether this kernel gives this process what the shim's exact tracking
 * needs (userfaultfd with asynchronous write-protect, DESIGN §3.1). When it
 * does not, a shim that declines to manage a mapping is degrading as
 * promised (DESIGN §1.6), and tests of tracking skip. */
/* A system call no hook sees (unseen_syscall.h). */
static inline long itest_unseen_syscall(long nr, long a, long b, long c, long d, long e, long f)
{
	return unseen_syscall(nr, a, b, c, d, e, f);
}

static inline ssize_t itest_unseen_pwrite(int fd, const void *buf, size_t n, off_t off)
{
	return itest_unseen_syscall(SYS_pwrite64, fd, (long)buf, (long)n, (long)off, 0, 0);
}

static inline bool itest_uffd_wp_async_available(void)
{
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
	const uint64_t wp_unpopulated = 1ull << 13, wp_async = 1ull << 15; /* Linux 6.4, 6.7 */
	struct uffdio_api api = { .api = UFFD_API, .features = wp_unpopulated | wp_async };
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	bool ok;

	if (fd < 0)
		fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return false;
	ok = ioctl(fd, UFFDIO_API, &api) == 0;
	close(fd);
	return ok;
}

/* Decides what a test of tracking does when gaia_mrelease said ENOENT for a
 * mapping the shim should manage: skip when the shim may be degrading or
 * was told to manage nothing, fail otherwise. */
static inline int itest_unmanaged_verdict(const char *prog, const char *what)
{
	const char *disable = getenv("GAIA_DISABLE");
	const char *paths = getenv("GAIA_PATHS");

	if ((disable && *disable && strcmp(disable, "0")) || (paths && *paths)) {
		printf("%s: SKIP: %s is not managed (GAIA_DISABLE or GAIA_PATHS is set)\n", prog, what);
		return ITEST_SKIP;
	}
	if (!itest_uffd_wp_async_available()) {
		printf("%s: SKIP: %s is not managed and this kernel offers no userfaultfd WP_ASYNC\n", prog, what);
		return ITEST_SKIP;
	}
	fprintf(stderr, "%s: FAIL: %s is not managed (gaia_mrelease: ENOENT) though userfaultfd WP_ASYNC is available\n",
		prog, what);
	return ITEST_FAIL;
}

#endif
