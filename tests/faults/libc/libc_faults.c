/* libc faults under the shim (DESIGN §1 promises 5 and 6, §6): each case
 * fails one libc call the shim or the program makes, through
 * libfault_libc.so preloaded after libgaia.so, and checks that
 *   - no data is lost: every byte the program stored or wrote successfully
 *     is in the mapping and in the file;
 *   - an error the kernel would give the program reaches it unchanged
 *     (same return value, same errno);
 *   - a failure inside the shim ends in one line on stderr naming the
 *     call, the file and the errno, and a fallback (private versions,
 *     unmanaged, every page counted as written), never a crash.
 *
 *   libc_faults <case>        under the shim with libfault_libc.so
 *   libc_faults sigbus        also without the shim: the kernel's
 *                             behaviour is the oracle
 *
 * Stderr is captured to a file during the case and replayed at the end, so
 * the checks can read the shim's messages. */
#include "itest.h"

#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define PAGES 16
#define PATHBUF (PATH_MAX + 32)

static char dir[PATH_MAX];
static char log_path[PATH_MAX + 16];
static int saved_stderr = -1;
static struct itest_gaia g;
static int (*arm_fn)(const char *);

#define CHECK(cond, ...)                                                      \
	do {                                                                  \
		if (!(cond)) {                                                \
			dprintf(saved_stderr, "libc_faults: FAIL line %d: ", __LINE__); \
			dprintf(saved_stderr, __VA_ARGS__);                   \
			dprintf(saved_stderr, "\n");                          \
			return ITEST_FAIL;                                    \
		}                                                             \
	} while (0)

static void arm(const char *spec)
{
	if (arm_fn)
		arm_fn(spec);
}

/* A file of PAGES pages, page p filled with byte 'a' + p. */
static int make_file(const char *name, char *path, size_t size)
{
	char page[ITEST_PAGE];
	int fd;

	snprintf(path, size, "%s/%s", dir, name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -1;
	for (int p = 0; p < PAGES; p++) {
		memset(page, 'a' + p, sizeof(page));
		if (pwrite(fd, page, sizeof(page), (off_t)p * ITEST_PAGE) != (ssize_t)sizeof(page))
			return -1;
	}
	return fd;
}

static char *map_file(int fd)
{
	char *m = mmap(NULL, PAGES * ITEST_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	return m == MAP_FAILED ? NULL : m;
}

static bool managed(const char *map)
{
	uint32_t v[PAGES];
	return g.mversion && g.mversion(map, PAGES * ITEST_PAGE, v) == 0 && v[0] != 0;
}

static void versions(const char *map, uint32_t *v)
{
	memset(v, 0, PAGES * sizeof(*v));
	if (g.mversion)
		g.mversion(map, PAGES * ITEST_PAGE, v);
}

/* Page p of the file (through a read) and of the mapping are all `c`. */
static bool page_is(int fd, const char *map, int p, char c)
{
	char buf[ITEST_PAGE];

	if (pread(fd, buf, sizeof(buf), (off_t)p * ITEST_PAGE) != (ssize_t)sizeof(buf))
		return false;
	for (size_t i = 0; i < sizeof(buf); i++)
		if (buf[i] != c || (map && map[(size_t)p * ITEST_PAGE + i] != c))
			return false;
	return true;
}

/* The captured stderr so far contains every string of the NULL-ended
 * list. */
static bool log_has(const char *first, ...)
{
	char text[65536];
	int fd = open(log_path, O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, text, sizeof(text) - 1);
	va_list ap;
	bool all = n > 0;

	if (fd >= 0)
		close(fd);
	text[n > 0 ? n : 0] = 0;
	va_start(ap, first);
	for (const char *s = first; s && all; s = va_arg(ap, const char *))
		if (!strstr(text, s)) {
			dprintf(saved_stderr, "libc_faults: the log lacks \"%s\"\n", s);
			all = false;
		}
	va_end(ap);
	return all;
}

/* --- the cases ---------------------------------------------------- */

/* No userfaultfd at all (ENOSYS from the syscall and /dev/userfaultfd):
 * one warning naming userfaultfd and the errno; the mapping passes
 * through and behaves as the kernel's. */
static int case_uffd_unavailable(void)
{
	char path[PATHBUF];
	int fd = make_file("data", path, sizeof(path));
	CHECK(fd >= 0, "make_file: %s", strerror(errno));
	arm("call=userfaultfd,errno=ENOSYS,times=0");
	char *map = map_file(fd);
	CHECK(map, "mmap: %s", strerror(errno));
	CHECK(!managed(map), "managed although userfaultfd is unavailable");
	memset(map + 3 * ITEST_PAGE, 'X', ITEST_PAGE);
	CHECK(msync(map, PAGES * ITEST_PAGE, MS_SYNC) == 0, "msync: %s", strerror(errno));
	CHECK(page_is(fd, map, 3, 'X') && page_is(fd, map, 4, 'e'), "data differs");
	CHECK(log_has("userfaultfd", strerror(ENOSYS), "unmanaged", NULL), "no clear message");
	return ITEST_PASS;
}

/* UFFDIO_REGISTER fails for the second file (userfaultfd gone mid-run):
 * that mapping passes through, with a line naming the call, the file and
 * the errno; the first stays managed and exact. */
static int case_uffd_register(void)
{
	char p1[PATHBUF], p2[PATHBUF];
	int fd1 = make_file("first", p1, sizeof(p1)), fd2 = make_file("second", p2, sizeof(p2));
	CHECK(fd1 >= 0 && fd2 >= 0, "make_file: %s", strerror(errno));
	char *m1 = map_file(fd1);
	CHECK(m1 && managed(m1), "the first mapping is not managed");
	arm("call=ioctl,req=uffd_register,errno=ENOMEM");
	char *m2 = map_file(fd2);
	CHECK(m2, "mmap: %s", strerror(errno));
	CHECK(!managed(m2), "managed although UFFDIO_REGISTER failed");
	CHECK(log_has("UFFDIO_REGISTER", p2, strerror(ENOMEM), NULL), "no clear message");

	uint32_t before[PAGES], after[PAGES];
	versions(m1, before);
	m1[5 * ITEST_PAGE] = 'Y';
	memset(m2 + 6 * ITEST_PAGE, 'Z', ITEST_PAGE);
	CHECK(g.mrelease(m1, PAGES * ITEST_PAGE, GAIA_CPU) == 0, "release: %s", strerror(errno));
	versions(m1, after);
	for (int p = 0; p < PAGES; p++)
		CHECK((after[p] != before[p]) == (p == 5), "page %d of the first file: version %u -> %u", p,
		      before[p], after[p]);
	CHECK(page_is(fd2, m2, 6, 'Z') && page_is(fd2, m2, 7, 'h'), "second file's data differs");
	return ITEST_PASS;
}

/* PAGEMAP_SCAN fails at a release: the shim cannot tell which pages were
 * written, so it counts every page as written (never fewer), says so
 * naming the call, the file and the errno, and the next release is exact
 * again. */
static int case_pagemap_scan(void)
{
	char path[PATHBUF];
	int fd = make_file("data", path, sizeof(path));
	CHECK(fd >= 0, "make_file: %s", strerror(errno));
	char *map = map_file(fd);
	CHECK(map && managed(map), "not managed");
	uint32_t v0[PAGES], v1[PAGES], v2[PAGES];
	versions(map, v0);
	map[3 * ITEST_PAGE + 10] = 'W';
	arm("call=ioctl,req=pagemap_scan,errno=EIO");
	CHECK(g.mrelease(map, PAGES * ITEST_PAGE, GAIA_CPU) == 0, "release: %s", strerror(errno));
	versions(map, v1);
	for (int p = 0; p < PAGES; p++)
		CHECK(v1[p] != v0[p], "page %d kept its version after a failed scan", p);
	CHECK(log_has("PAGEMAP_SCAN", path, strerror(EIO), "whole mapping", NULL), "no clear message");
	CHECK(map[3 * ITEST_PAGE + 10] == 'W', "the store was lost");
	map[9 * ITEST_PAGE] = 'V';
	CHECK(g.mrelease(map, PAGES * ITEST_PAGE, GAIA_CPU) == 0, "release: %s", strerror(errno));
	versions(map, v2);
	for (int p = 0; p < PAGES; p++)
		CHECK((v2[p] != v1[p]) == (p == 9), "after recovery, page %d: version %u -> %u", p, v1[p], v2[p]);
	CHECK(msync(map, PAGES * ITEST_PAGE, MS_SYNC) == 0, "msync: %s", strerror(errno));
	char buf[ITEST_PAGE];
	CHECK(pread(fd, buf, sizeof(buf), 3 * ITEST_PAGE) == (ssize_t)sizeof(buf) && buf[10] == 'W' && buf[11] == 'd',
	      "file differs");
	return ITEST_PASS;
}

/* pwrite/write failing with ENOSPC or EIO, or writing short: the program
 * gets exactly what the kernel returned; what was written is in the
 * mapping and bumps versions, what was not is not; a retry lands. */
static int case_write_errors(void)
{
	char path[PATHBUF], spec[PATHBUF + 64], buf[2 * ITEST_PAGE];
	int fd = make_file("data", path, sizeof(path));
	CHECK(fd >= 0, "make_file: %s", strerror(errno));
	char *map = map_file(fd);
	CHECK(map && managed(map), "not managed");
	uint32_t v0[PAGES], v1[PAGES];

	versions(map, v0);
	memset(buf, 'P', sizeof(buf));
	snprintf(spec, sizeof(spec), "call=pwrite64,errno=ENOSPC,path=%s", path);
	arm(spec);
	errno = 0;
	CHECK(pwrite(fd, buf, ITEST_PAGE, 2 * ITEST_PAGE) == -1 && errno == ENOSPC,
	      "a failed pwrite did not return -1/ENOSPC (errno %d)", errno);
	CHECK(page_is(fd, map, 2, 'c'), "a failed pwrite changed page 2");
	CHECK(pwrite(fd, buf, ITEST_PAGE, 2 * ITEST_PAGE) == ITEST_PAGE, "retry: %s", strerror(errno));
	CHECK(page_is(fd, map, 2, 'P'), "the retried pwrite is not in the mapping");
	CHECK(g.mrelease(map, PAGES * ITEST_PAGE, GAIA_CPU) == 0, "release: %s", strerror(errno));
	versions(map, v1);
	CHECK(v1[2] != v0[2], "the retried pwrite did not move page 2's version");

	snprintf(spec, sizeof(spec), "call=pwrite64,short=1,path=%s", path);
	arm(spec);
	memset(buf, 'Q', sizeof(buf));
	CHECK(pwrite(fd, buf, 2 * ITEST_PAGE, 4 * ITEST_PAGE) == ITEST_PAGE, "short pwrite: not one page");
	CHECK(page_is(fd, map, 4, 'Q') && page_is(fd, map, 5, 'f'), "short pwrite: data differs");
	CHECK(g.mrelease(map, PAGES * ITEST_PAGE, GAIA_CPU) == 0, "release: %s", strerror(errno));
	versions(map, v0);
	CHECK(v0[4] != v1[4], "short pwrite: page 4's version did not move");

	snprintf(spec, sizeof(spec), "call=write,errno=EIO,path=%s", path);
	arm(spec);
	CHECK(lseek(fd, 7 * ITEST_PAGE, SEEK_SET) == 7 * ITEST_PAGE, "lseek");
	errno = 0;
	CHECK(write(fd, buf, ITEST_PAGE) == -1 && errno == EIO, "a failed write did not return -1/EIO");
	CHECK(lseek(fd, 0, SEEK_CUR) == 7 * ITEST_PAGE, "a failed write moved the offset");
	CHECK(write(fd, buf, ITEST_PAGE) == ITEST_PAGE, "retry: %s", strerror(errno));
	CHECK(page_is(fd, map, 7, 'Q'), "the retried write is not in the mapping");
	CHECK(log_has("fault_libc: pwrite64", "fault_libc: write", NULL), "faults were not injected");
	return ITEST_PASS;
}

/* msync and fsync failing: the program gets the error (as it gets the
 * kernel's write-back errors there); the data stays in the page cache and
 * the next msync writes it. */
static int case_sync_errors(void)
{
	char path[PATHBUF], spec[PATHBUF + 64];
	int fd = make_file("data", path, sizeof(path));
	CHECK(fd >= 0, "make_file: %s", strerror(errno));
	char *map = map_file(fd);
	CHECK(map && managed(map), "not managed");
	memset(map + ITEST_PAGE, 'M', ITEST_PAGE);
	arm("call=msync,errno=EIO");
	errno = 0;
	CHECK(msync(map, PAGES * ITEST_PAGE, MS_SYNC) == -1 && errno == EIO, "msync did not return -1/EIO");
	snprintf(spec, sizeof(spec), "call=fsync,errno=ENOSPC,path=%s", path);
	arm(spec);
	errno = 0;
	CHECK(fsync(fd) == -1 && errno == ENOSPC, "fsync did not return -1/ENOSPC");
	CHECK(msync(map, PAGES * ITEST_PAGE, MS_SYNC) == 0, "msync: %s", strerror(errno));
	CHECK(fsync(fd) == 0, "fsync: %s", strerror(errno));
	CHECK(page_is(fd, map, 1, 'M') && page_is(fd, map, 0, 'a'), "data differs");
	return ITEST_PASS;
}

/* The shared version table cannot be had (shm_open EACCES, or its mmap
 * ENOMEM): one line naming the call, the table and the errno; versions
 * stay private and still move exactly. */
static int shared_table_case(const char *spec, const char *call, int err)
{
	char path[PATHBUF];
	int fd = make_file("data", path, sizeof(path));
	CHECK(fd >= 0, "make_file: %s", strerror(errno));
	arm(spec);
	char *map = map_file(fd);
	CHECK(map && managed(map), "not managed");
	arm(NULL);
	CHECK(log_has("shared version table", "/gaia-v1-", call, strerror(err), "private", NULL),
	      "no clear message");
	uint32_t v0[PAGES], v1[PAGES];
	versions(map, v0);
	map[11 * ITEST_PAGE] = 'S';
	CHECK(g.mrelease(map, PAGES * ITEST_PAGE, GAIA_CPU) == 0, "release: %s", strerror(errno));
	versions(map, v1);
	for (int p = 0; p < PAGES; p++)
		CHECK((v1[p] != v0[p]) == (p == 11), "page %d: version %u -> %u", p, v0[p], v1[p]);
	CHECK(msync(map, PAGES * ITEST_PAGE, MS_SYNC) == 0 && page_is(fd, map, 12, 'm'), "data differs");
	return ITEST_PASS;
}

static int case_shm_open(void)
{
	return shared_table_case("call=shm_open,errno=EACCES,times=0", "shm_open", EACCES);
}

static int case_shm_mmap(void)
{
	return shared_table_case("call=mmap,path=/dev/shm/gaia-v1-,errno=ENOMEM,times=0", "mmap", ENOMEM);
}

/* The program's own mmap failing with ENOMEM: MAP_FAILED and ENOMEM, as
 * from the kernel; the next mmap works and is managed. Then the shim's
 * own placement reservation failing: the program's mmap still works. */
static int case_mmap_enomem(void)
{
	char path[PATHBUF], spec[PATHBUF + 64];
	int fd = make_file("data", path, sizeof(path));
	CHECK(fd >= 0, "make_file: %s", strerror(errno));
	snprintf(spec, sizeof(spec), "call=mmap,errno=ENOMEM,path=%s", path);
	arm(spec);
	errno = 0;
	void *p = mmap(NULL, PAGES * ITEST_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(p == MAP_FAILED && errno == ENOMEM, "mmap gave %p, errno %d (%s), not MAP_FAILED/ENOMEM", p, errno,
	      strerror(errno));
	char *map = map_file(fd);
	CHECK(map && managed(map), "the next mmap is not managed");
	CHECK(page_is(fd, map, 6, 'g'), "data differs");

	arm("call=mmap,errno=ENOMEM,path=anon,times=0");
	char *again = map_file(fd);
	arm(NULL);
	CHECK(again, "mmap with the shim's reservation failing: %s", strerror(errno));
	memset(again + 8 * ITEST_PAGE, 'R', ITEST_PAGE);
	CHECK(msync(again, PAGES * ITEST_PAGE, MS_SYNC) == 0, "msync: %s", strerror(errno));
	CHECK(page_is(fd, map, 8, 'R'), "data differs");
	return ITEST_PASS;
}

/* The shim's populate-ahead (MADV_POPULATE_READ) failing: the faults are
 * the kernel's, so the data is all there and the mapping managed. */
static int case_populate(void)
{
	char path[PATHBUF], spec[64];
	int fd = make_file("data", path, sizeof(path));
	CHECK(fd >= 0, "make_file: %s", strerror(errno));
	snprintf(spec, sizeof(spec), "call=madvise,arg=%d,errno=EIO,times=0", MADV_POPULATE_READ);
	arm(spec);
	char *map = map_file(fd);
	CHECK(map && managed(map), "not managed");
	for (int p = 0; p < PAGES; p++)
		CHECK(page_is(fd, map, p, (char)('a' + p)), "page %d differs", p);
	return ITEST_PASS;
}

/* pread failing or reading short: the program gets exactly that. */
static int case_read_errors(void)
{
	char path[PATHBUF], spec[PATHBUF + 64], buf[2 * ITEST_PAGE];
	int fd = make_file("data", path, sizeof(path));
	CHECK(fd >= 0, "make_file: %s", strerror(errno));
	char *map = map_file(fd);
	CHECK(map && managed(map), "not managed");
	snprintf(spec, sizeof(spec), "call=pread64,errno=EIO,path=%s", path);
	arm(spec);
	errno = 0;
	CHECK(pread(fd, buf, ITEST_PAGE, 0) == -1 && errno == EIO, "pread did not return -1/EIO");
	snprintf(spec, sizeof(spec), "call=pread64,short=1,path=%s", path);
	arm(spec);
	CHECK(pread(fd, buf, sizeof(buf), 2 * ITEST_PAGE) == ITEST_PAGE && buf[0] == 'c' && buf[ITEST_PAGE - 1] == 'c',
	      "short pread differs");
	return ITEST_PASS;
}

/* A file truncated while mapped: touching a page past the new end gives
 * SIGBUS at the faulting address (the kernel's behaviour for an I/O error
 * or a hole past EOF on a fault), pages before it work, and growing the
 * file back gives zeros. Run with and without the shim. */
static sigjmp_buf bus_jump;
static void *volatile bus_addr;
static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
	(void)sig, (void)ctx;
	bus_addr = si->si_addr;
	siglongjmp(bus_jump, 1);
}

static int case_sigbus(void)
{
	char path[PATHBUF];
	int fd = make_file("data", path, sizeof(path));
	CHECK(fd >= 0, "make_file: %s", strerror(errno));
	char *map = map_file(fd);
	CHECK(map, "mmap: %s", strerror(errno));
	map[ITEST_PAGE] = 'T';
	CHECK(ftruncate(fd, 2 * ITEST_PAGE) == 0, "ftruncate: %s", strerror(errno));

	struct sigaction sa = {.sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO};
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(SIGBUS, &sa, NULL) == 0, "sigaction");
	char *volatile target = map + 5 * ITEST_PAGE + 123;
	bus_addr = NULL;
	if (!sigsetjmp(bus_jump, 1)) {
		volatile char c = *target;
		(void)c;
		CHECK(0, "reading past the end did not raise SIGBUS");
	}
	CHECK(bus_addr == target, "SIGBUS at %p, not at the faulting address %p", bus_addr, (void *)target);
	target = map + 9 * ITEST_PAGE;
	bus_addr = NULL;
	if (!sigsetjmp(bus_jump, 1)) {
		*target = 1;
		CHECK(0, "writing past the end did not raise SIGBUS");
	}
	CHECK(bus_addr == target, "SIGBUS at %p, not at %p", bus_addr, (void *)target);
	if (g.mrelease)
		CHECK(g.mrelease(map, PAGES * ITEST_PAGE, GAIA_CPU) == 0, "release: %s", strerror(errno));
	CHECK(map[ITEST_PAGE] == 'T' && map[0] == 'a', "pages before the end differ");
	CHECK(ftruncate(fd, PAGES * ITEST_PAGE) == 0, "ftruncate: %s", strerror(errno));
	CHECK(map[5 * ITEST_PAGE] == 0 && map[9 * ITEST_PAGE] == 0, "grown pages are not zero");
	map[9 * ITEST_PAGE] = 'G';
	CHECK(msync(map, PAGES * ITEST_PAGE, MS_SYNC) == 0, "msync: %s", strerror(errno));
	char c = 0;
	CHECK(pread(fd, &c, 1, 9 * ITEST_PAGE) == 1 && c == 'G', "the store after growing is not in the file");
	return ITEST_PASS;
}

/* Another writer, not under the shim, changes the file (the pwrite
 * syscall instruction itself, which no hook sees); the shim learns it from the file's times
 * and page checksums at the next acquire. When those reads fail, every
 * page counts as changed (never fewer), with a line naming the call, the
 * file and the errno, and the next acquire reads everything again; short
 * reads are read on, not taken for the end of the file. */
static void outside_write(int fd, int page, char c)
{
	char buf[ITEST_PAGE];
	struct timespec pause = {0, 20 * 1000 * 1000};

	nanosleep(&pause, NULL); /* a new file time, even where times are coarse */
	memset(buf, c, sizeof(buf));
	(void)!itest_unseen_pwrite(fd, buf, sizeof(buf), (off_t)page * ITEST_PAGE);
}

static int moved_pages(const uint32_t *a, const uint32_t *b, char *out, size_t size)
{
	int n = 0;
	out[0] = 0;
	for (int p = 0; p < PAGES; p++)
		if (a[p] != b[p]) {
			n++;
			snprintf(out + strlen(out), size - strlen(out), " %d", p);
		}
	return n;
}

static int case_checksum_errors(void)
{
	char path[PATHBUF], spec[PATHBUF + 64], moved[128];
	int fd = make_file("data", path, sizeof(path));
	CHECK(fd >= 0, "make_file: %s", strerror(errno));
	char *map = map_file(fd);
	CHECK(map && managed(map), "not managed");
	uint32_t v0[PAGES], v1[PAGES];
	CHECK(g.macquire(map, PAGES * ITEST_PAGE, GAIA_CPU) == 0, "acquire: %s", strerror(errno));

	outside_write(fd, 5, 'O');
	versions(map, v0);
	snprintf(spec, sizeof(spec), "call=pread64,errno=EIO,path=%s", path);
	arm(spec);
	CHECK(g.macquire(map, PAGES * ITEST_PAGE, GAIA_CPU) == 0, "acquire: %s", strerror(errno));
	arm(NULL);
	versions(map, v1);
	CHECK(moved_pages(v0, v1, moved, sizeof(moved)) == PAGES, "a failed checksum pass moved only:%s", moved);
	CHECK(log_has("checksumming", path, "pread", strerror(EIO), "every page", NULL), "no clear message");

	outside_write(fd, 9, 'N');
	CHECK(g.macquire(map, PAGES * ITEST_PAGE, GAIA_CPU) == 0, "acquire: %s", strerror(errno));
	versions(map, v0);
	moved_pages(v1, v0, moved, sizeof(moved));
	CHECK(v0[9] != v1[9], "the next acquire missed page 9 (moved:%s)", moved);
	for (int p = 0; p < PAGES; p++)
		CHECK(p == 5 || p == 9 || v0[p] == v1[p], "after recovery, page %d moved (moved:%s)", p, moved);

	snprintf(spec, sizeof(spec), "call=pread64,short=1,times=0,path=%s", path);
	arm(spec);
	outside_write(fd, 12, 'H');
	CHECK(g.macquire(map, PAGES * ITEST_PAGE, GAIA_CPU) == 0, "acquire: %s", strerror(errno));
	arm(NULL);
	versions(map, v1);
	CHECK(moved_pages(v0, v1, moved, sizeof(moved)) == 1 && v1[12] != v0[12],
	      "with short reads, moved:%s (want 12 only)", moved);
	CHECK(page_is(fd, map, 12, 'H') && page_is(fd, map, 9, 'N'), "data differs");
	return ITEST_PASS;
}

/* A process killed while it creates a file's version table (here: while
 * it maps the new table, held there by a delay) must not leave a table
 * that others cannot use: the next process under the shim shares versions
 * through a valid table, without a warning, and nothing half-made stays
 * in /dev/shm. */
static int case_killed_creating_table(void)
{
	char path[PATHBUF];
	int fd = make_file("data", path, sizeof(path));
	CHECK(fd >= 0, "make_file: %s", strerror(errno));
	pid_t pid = fork();
	if (pid == 0) {
		arm("call=mmap,path=/dev/shm/gaia-v1-,delay_ms=10000");
		map_file(fd);
		_exit(0);
	}
	struct timespec pause = {0, 300 * 1000 * 1000};
	nanosleep(&pause, NULL);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	CHECK(log_has("delayed", NULL), "the child was not held while creating the table");

	char *map = map_file(fd);
	CHECK(map && managed(map), "not managed");
	struct stat st;
	char table[128];
	fstat(fd, &st);
	snprintf(table, sizeof(table), "/dev/shm/gaia-v1-%u-%llx-%llx", (unsigned)geteuid(),
		 (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	CHECK(access(table, F_OK) == 0, "no table %s", table);
	CHECK(!log_has("not used", NULL), "the table was not usable after the kill");
	DIR *d = opendir("/dev/shm");
	int half_made = 0;
	for (struct dirent *e; d && (e = readdir(d));)
		half_made += strstr(e->d_name, ".new-") != NULL && strncmp(e->d_name, table + 9, strlen(table + 9)) == 0;
	if (d)
		closedir(d);
	CHECK(half_made == 0, "%d half-made tables left in /dev/shm", half_made);
	return ITEST_PASS;
}

static const struct {
	const char *name;
	int (*run)(void);
	bool needs_shim;
} cases[] = {
	{"uffd_unavailable", case_uffd_unavailable, true},
	{"uffd_register", case_uffd_register, true},
	{"pagemap_scan", case_pagemap_scan, true},
	{"write_errors", case_write_errors, true},
	{"sync_errors", case_sync_errors, true},
	{"shm_open", case_shm_open, true},
	{"shm_mmap", case_shm_mmap, true},
	{"mmap_enomem", case_mmap_enomem, true},
	{"populate", case_populate, true},
	{"read_errors", case_read_errors, true},
	{"checksum_errors", case_checksum_errors, true},
	{"killed_creating_table", case_killed_creating_table, true},
	{"sigbus", case_sigbus, false},
};

int main(int argc, char **argv)
{
	const char *prog = "libc_faults";
	int rc = ITEST_FAIL;

	if (argc != 2) {
		fprintf(stderr, "usage: %s <case>\n", prog);
		return ITEST_FAIL;
	}
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (strcmp(argv[1], cases[i].name) != 0)
			continue;
		g = itest_gaia_lookup();
		arm_fn = (int (*)(const char *))dlsym(RTLD_DEFAULT, "fault_libc_arm");
		if (cases[i].needs_shim && (!g.mversion || !arm_fn)) {
			printf("%s %s: SKIP: needs libgaia.so and libfault_libc.so preloaded\n", prog, argv[1]);
			return ITEST_SKIP;
		}
		if (itest_tempdir(dir, prog)) {
			perror("tempdir");
			return ITEST_FAIL;
		}
		snprintf(log_path, sizeof(log_path), "%s/stderr", dir);
		int log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
		saved_stderr = dup(2);
		if (log_fd < 0 || saved_stderr < 0 || dup2(log_fd, 2) < 0) {
			perror("capture stderr");
			return ITEST_FAIL;
		}
		rc = cases[i].run();
		arm(NULL);
		/* Replay what was captured, then the verdict. */
		dup2(saved_stderr, 2);
		char text[65536];
		int in = open(log_path, O_RDONLY);
		ssize_t n = in < 0 ? 0 : read(in, text, sizeof(text));
		if (n > 0)
			(void)!write(2, text, (size_t)n);
		printf("%s %s: %s\n", prog, argv[1], rc == ITEST_PASS ? "ok" : "FAILED");
		itest_remove_tree(dir);
		return rc;
	}
	fprintf(stderr, "%s: no case '%s'\n", prog, argv[1]);
	return ITEST_FAIL;
}
