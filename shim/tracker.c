/* Which pages the CPU wrote: userfaultfd write-protect in asynchronous mode
 * plus PAGEMAP_SCAN (Linux 6.7+), or soft-dirty bits where those are
 * missing (DESIGN §3.1; research: pagecache_wp.md, uffd.md).
 *
 * With UFFD_FEATURE_WP_ASYNC the kernel resolves a store to a protected
 * page itself (~0.75 us, no message), so no thread serves faults; one
 * PAGEMAP_SCAN with PM_SCAN_WP_MATCHING returns the written pages and
 * protects them again. Reads, write-back and eviction never mark a page
 * (pagecache_wp.md), so collection is exact. write()/pwrite() by the kernel
 * are invisible to it: the write hooks record those.
 *
 * Soft-dirty bits are per process: clear_refs clears them for every range
 * at once, so callers collect every registered range and then rearm.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim.h"
#include "uffd_abi.h"

#define SCAN_VEC_LEN 256
#define PAGEMAP_SOFT_DIRTY (1ull << 55)
#define PAGEMAP_CHUNK 512

static struct {
	pthread_mutex_t lock;
	bool initialised;
	enum tracker_mode mode;
	int uffd, pagemap_fd, clear_refs_fd;
	struct page_region vec[SCAN_VEC_LEN];
	uint64_t entries[PAGEMAP_CHUNK];
	char why_not_uffd[160]; /* the failed call, for the warning */
} tr = {.lock = PTHREAD_MUTEX_INITIALIZER, .uffd = -1, .pagemap_fd = -1, .clear_refs_fd = -1};

enum tracker_mode tracker_mode(void)
{
	return tr.mode;
}

const char *tracker_mode_name(enum tracker_mode mode)
{
	switch (mode) {
	case TRACKER_UFFD_WP:
		return "userfaultfd write-protect (async) + PAGEMAP_SCAN";
	case TRACKER_SOFT_DIRTY:
		return "soft-dirty bits";
	default:
		return "none";
	}
}

static int open_userfaultfd(void)
{
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (fd >= 0 || errno != EPERM)
		return fd >= 0 ? fd : -errno;
	/* Unprivileged with vm.unprivileged_userfaultfd=0: user-mode faults
	 * only, which is all asynchronous write-protection needs. */
	fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (fd >= 0)
		return fd;
	int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
	if (dev < 0)
		return -EPERM;
	fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
	int err = errno;
	close(dev);
	return fd >= 0 ? fd : -err;
}

static int uffd_wp_register(void *addr, size_t len)
{
	struct uffdio_register reg = {
		.range = {.start = (uintptr_t)addr, .len = len},
		.mode = UFFDIO_REGISTER_MODE_WP,
	};
	if (ioctl(tr.uffd, UFFDIO_REGISTER, &reg))
		return -errno;
	/* Protect everything once: until then every page counts as written.
	 * WP_UNPOPULATED leaves markers on pages not yet faulted in. */
	struct pm_scan_arg arg = {
		.size = sizeof(arg),
		.flags = PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC,
		.start = (uintptr_t)addr,
		.end = (uintptr_t)addr + len,
		.category_mask = PAGE_IS_WRITTEN,
	};
	if (ioctl(tr.pagemap_fd, PAGEMAP_SCAN, &arg) < 0) {
		struct uffdio_writeprotect wp = {
			.range = {.start = (uintptr_t)addr, .len = len},
			.mode = UFFDIO_WRITEPROTECT_MODE_WP,
		};
		if (ioctl(tr.uffd, UFFDIO_WRITEPROTECT, &wp))
			return -errno;
	}
	return 0;
}

/* Written runs of [start, end), protected again as they are reported. */
static int uffd_wp_collect(uintptr_t start, uintptr_t end,
			   void (*fn)(uintptr_t, uintptr_t, void *), void *arg, bool report)
{
	while (start < end) {
		struct pm_scan_arg scan = {
			.size = sizeof(scan),
			.flags = PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC,
			.start = start,
			.end = end,
			.vec = (uintptr_t)tr.vec,
			.vec_len = SCAN_VEC_LEN,
			.category_mask = PAGE_IS_WRITTEN,
			.return_mask = PAGE_IS_WRITTEN,
		};
		long n = ioctl(tr.pagemap_fd, PAGEMAP_SCAN, &scan);
		if (n < 0) {
			/* The caller counts the whole range as written; protect it
			 * again so that the next collect reports only later writes. */
			int err = errno;
			struct uffdio_writeprotect wp = {
				.range = {.start = start, .len = end - start},
				.mode = UFFDIO_WRITEPROTECT_MODE_WP,
			};
			(void)ioctl(tr.uffd, UFFDIO_WRITEPROTECT, &wp);
			return -err;
		}
		for (long i = 0; report && i < n; i++)
			fn(tr.vec[i].start, tr.vec[i].end, arg);
		/* A full vector may have stopped early; a short one never did
		 * (walk_end is not reliable as a completion test: uffd.md). */
		if (n < SCAN_VEC_LEN || scan.walk_end <= start)
			break;
		start = scan.walk_end;
	}
	return 0;
}

static int soft_dirty_collect(uintptr_t start, uintptr_t end,
			      void (*fn)(uintptr_t, uintptr_t, void *), void *arg)
{
	uintptr_t run = 0;
	bool in_run = false;
	for (uintptr_t a = start; a < end;) {
		size_t n = (end - a) / GAIA_PAGE;
		if (n > PAGEMAP_CHUNK)
			n = PAGEMAP_CHUNK;
		ssize_t got = pread(tr.pagemap_fd, tr.entries, n * sizeof(uint64_t),
				    (off_t)(a / GAIA_PAGE * sizeof(uint64_t)));
		if (got < (ssize_t)(n * sizeof(uint64_t)))
			return got < 0 ? -errno : -EIO;
		for (size_t i = 0; i < n; i++, a += GAIA_PAGE) {
			bool dirty = tr.entries[i] & PAGEMAP_SOFT_DIRTY;
			if (dirty && !in_run) {
				run = a;
				in_run = true;
			} else if (!dirty && in_run) {
				fn(run, a, arg);
				in_run = false;
			}
		}
	}
	if (in_run)
		fn(run, end, arg);
	return 0;
}

static int soft_dirty_clear(void)
{
	return pwrite(tr.clear_refs_fd, "4", 1, 0) == 1 ? 0 : -errno;
}

static void count_page(uintptr_t start, uintptr_t end, void *arg)
{
	*(size_t *)arg += (end - start) / GAIA_PAGE;
}

/* Checks the mechanism end to end on a private anonymous page: protect,
 * store, collect exactly that page. */
static bool probe(enum tracker_mode mode)
{
	void *page = REAL(mmap)(NULL, 2 * GAIA_PAGE, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		return false;
	memset(page, 1, 2 * GAIA_PAGE);
	bool ok = false;
	size_t written = 0;
	enum tracker_mode saved = tr.mode;
	tr.mode = mode;
	if (mode == TRACKER_UFFD_WP) {
		if (uffd_wp_register(page, 2 * GAIA_PAGE) == 0) {
			((volatile char *)page)[GAIA_PAGE] = 2;
			ok = uffd_wp_collect((uintptr_t)page, (uintptr_t)page + 2 * GAIA_PAGE,
					     count_page, &written, true) == 0 && written == 1;
		}
	} else if (soft_dirty_clear() == 0) {
		((volatile char *)page)[0] = 2;
		ok = soft_dirty_collect((uintptr_t)page, (uintptr_t)page + 2 * GAIA_PAGE, count_page,
					&written) == 0 && written == 1;
	}
	tr.mode = saved;
	REAL(munmap)(page, 2 * GAIA_PAGE);
	return ok;
}

static bool setup_uffd(void)
{
	int fd = open_userfaultfd();
	if (fd >= 0 && (fd = gaia_fd_keep(fd)) < 0)
		fd = -errno;
	if (fd < 0) {
		snprintf(tr.why_not_uffd, sizeof(tr.why_not_uffd),
			 "userfaultfd(2) and /dev/userfaultfd: %s", strerror(-fd));
		gaia_info("userfaultfd unavailable: %s", strerror(-fd));
		return false;
	}
	struct uffdio_api api = {.api = UFFD_API,
				 .features = UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED};
	if (ioctl(fd, UFFDIO_API, &api)) {
		snprintf(tr.why_not_uffd, sizeof(tr.why_not_uffd),
			 "userfaultfd ioctl UFFDIO_API (asynchronous write-protect): %s", strerror(errno));
		gaia_info("userfaultfd: no asynchronous write-protect (UFFDIO_API: %s)", strerror(errno));
		gaia_fd_release(fd);
		return false;
	}
	tr.uffd = fd;
	if (!probe(TRACKER_UFFD_WP)) {
		snprintf(tr.why_not_uffd, sizeof(tr.why_not_uffd),
			 "userfaultfd write-protect or ioctl PAGEMAP_SCAN failed its probe");
		gaia_info("userfaultfd write-protect or PAGEMAP_SCAN failed its probe");
		gaia_fd_release(fd);
		tr.uffd = -1;
		return false;
	}
	return true;
}

static bool setup_soft_dirty(void)
{
	tr.clear_refs_fd = gaia_fd_keep(open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC));
	if (tr.clear_refs_fd < 0) {
		gaia_info("soft-dirty unavailable: /proc/self/clear_refs: %s", strerror(errno));
		return false;
	}
	if (!probe(TRACKER_SOFT_DIRTY)) {
		gaia_info("soft-dirty bits failed their probe");
		gaia_fd_release(tr.clear_refs_fd);
		tr.clear_refs_fd = -1;
		return false;
	}
	return true;
}

static int init_locked(void)
{
	if (tr.initialised)
		return tr.mode == TRACKER_NONE ? -ENOTSUP : 0;
	tr.initialised = true;
	tr.mode = TRACKER_NONE;
	int want = gaia_config()->dirty_tracking;
	tr.pagemap_fd = gaia_fd_keep(open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC));
	if (tr.pagemap_fd < 0) {
		gaia_warn("cannot open /proc/self/pagemap: %s; CPU writes cannot be tracked, "
			  "file mappings pass through unmanaged", strerror(errno));
		return -ENOTSUP;
	}
	if (want != GAIA_DIRTY_TRACKING_SOFTDIRTY && setup_uffd())
		tr.mode = TRACKER_UFFD_WP;
	else if (want != GAIA_DIRTY_TRACKING_UFFD && setup_soft_dirty())
		tr.mode = TRACKER_SOFT_DIRTY;
	if (tr.mode == TRACKER_NONE) {
		gaia_warn("no way to track CPU writes (GAIA_DIRTY_TRACKING=%s): %s; file mappings "
			  "pass through unmanaged",
			  gaia_env_enum_word(GAIA_KNOB_DIRTY_TRACKING, want),
			  want == GAIA_DIRTY_TRACKING_SOFTDIRTY ? "soft-dirty bits unavailable"
			  : tr.why_not_uffd[0] ? tr.why_not_uffd : "userfaultfd unavailable");
		return -ENOTSUP;
	}
	gaia_info("CPU writes tracked with %s", tracker_mode_name(tr.mode));
	return 0;
}

int tracker_init(void)
{
	pthread_mutex_lock(&tr.lock);
	int rc = init_locked();
	pthread_mutex_unlock(&tr.lock);
	return rc;
}

int tracker_register(void *addr, size_t len)
{
	pthread_mutex_lock(&tr.lock);
	int rc = init_locked();
	if (!rc && tr.mode == TRACKER_UFFD_WP)
		rc = uffd_wp_register(addr, len);
	else if (!rc && tr.mode == TRACKER_SOFT_DIRTY)
		rc = 0; /* pages written before the next rearm count: conservative */
	pthread_mutex_unlock(&tr.lock);
	return rc;
}

int tracker_unregister(void *addr, size_t len)
{
	pthread_mutex_lock(&tr.lock);
	int rc = 0;
	if (tr.mode == TRACKER_UFFD_WP) {
		struct uffdio_range range = {.start = (uintptr_t)addr, .len = len};
		if (ioctl(tr.uffd, UFFDIO_UNREGISTER, &range))
			rc = -errno;
	}
	pthread_mutex_unlock(&tr.lock);
	return rc;
}

int tracker_collect(void *addr, size_t len, void (*fn)(uintptr_t, uintptr_t, void *), void *arg)
{
	pthread_mutex_lock(&tr.lock);
	int rc = -ENOTSUP;
	if (tr.mode == TRACKER_UFFD_WP)
		rc = uffd_wp_collect((uintptr_t)addr, (uintptr_t)addr + len, fn, arg, true);
	else if (tr.mode == TRACKER_SOFT_DIRTY)
		rc = soft_dirty_collect((uintptr_t)addr, (uintptr_t)addr + len, fn, arg);
	pthread_mutex_unlock(&tr.lock);
	return rc;
}

int tracker_rearm(void)
{
	pthread_mutex_lock(&tr.lock);
	int rc = tr.mode == TRACKER_SOFT_DIRTY ? soft_dirty_clear() : 0;
	pthread_mutex_unlock(&tr.lock);
	return rc;
}

int tracker_forget(void *addr, size_t len)
{
	pthread_mutex_lock(&tr.lock);
	int rc = 0;
	if (tr.mode == TRACKER_UFFD_WP)
		rc = uffd_wp_collect((uintptr_t)addr, (uintptr_t)addr + len, NULL, NULL, false);
	pthread_mutex_unlock(&tr.lock);
	return rc;
}

int tracker_reinit_after_fork(void)
{
	/* The child inherited the descriptors but not the registration
	 * (no UFFD_FEATURE_EVENT_FORK: it needs CAP_SYS_PTRACE). Start over
	 * with a context of its own; the caller registers its ranges again. */
	pthread_mutex_init(&tr.lock, NULL);
	if (tr.mode == TRACKER_NONE)
		return 0;
	/* /proc/self resolved to the parent when these were opened. */
	gaia_fd_release(tr.pagemap_fd);
	tr.pagemap_fd = gaia_fd_keep(open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC));
	if (tr.clear_refs_fd >= 0) {
		gaia_fd_release(tr.clear_refs_fd);
		tr.clear_refs_fd = gaia_fd_keep(open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC));
	}
	if (tr.pagemap_fd < 0 || (tr.mode == TRACKER_SOFT_DIRTY && tr.clear_refs_fd < 0)) {
		gaia_warn("after fork: cannot reopen /proc/self/pagemap or clear_refs: %s; this "
			  "process's file mappings pass through unmanaged", strerror(errno));
		tr.mode = TRACKER_NONE;
		return -ENOTSUP;
	}
	if (tr.mode != TRACKER_UFFD_WP)
		return soft_dirty_clear();
	gaia_fd_release(tr.uffd);
	tr.uffd = -1;
	if (!setup_uffd()) {
		gaia_warn("after fork: userfaultfd unavailable; this process's file mappings "
			  "pass through unmanaged");
		tr.mode = TRACKER_NONE;
		return -ENOTSUP;
	}
	return 0;
}
