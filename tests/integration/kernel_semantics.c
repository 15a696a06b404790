/* The kernel's own behaviour survives under the shim (DESIGN §1 promise 5):
 * SIGBUS past the end of the file (also after a truncate while mapped),
 * SIGSEGV on a store to a PROT_READ mapping, stores again after mprotect
 * back, madvise(MADV_DONTNEED) keeping MAP_SHARED data, and mremap moving a
 * mapping whose writes are still tracked exactly afterwards. Runs with and
 * without the shim; the tracking checks run only under it.
 */
#include "itest.h"

#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>

static sigjmp_buf jump;
static volatile sig_atomic_t last_signal;

static void on_fault(int sig)
{
	last_signal = sig;
	siglongjmp(jump, 1);
}

/* The signal a load (store when `store`) at p raises, or 0. */
static int access_signal(volatile char *p, bool store)
{
	last_signal = 0;
	if (sigsetjmp(jump, 1) == 0) {
		if (store)
			*p = 1;
		else
			(void)*p;
	}
	return last_signal;
}

static int failures;

#define CHECK(cond, ...)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			printf("kernel_semantics: " __VA_ARGS__);                          \
			printf("\n");                                                      \
			failures++;                                                        \
		}                                                                          \
	} while (0)

/* Versions of n pages; false when not under the shim. */
static bool versions(struct itest_gaia *g, void *addr, size_t n, uint32_t *out)
{
	return g->mversion && g->mversion(addr, n * ITEST_PAGE, out) == 0;
}

int main(void)
{
	struct itest_gaia g = itest_gaia_lookup();
	struct sigaction sa = {.sa_handler = on_fault};
	sigaction(SIGBUS, &sa, NULL);
	sigaction(SIGSEGV, &sa, NULL);
	char dir[PATH_MAX], path[PATH_MAX + 16];
	if (itest_tempdir(dir, "kernel_semantics"))
		return ITEST_FAIL;
	snprintf(path, sizeof(path), "%s/data", dir);
	unsigned short rng[3];
	itest_rng_seed(rng, 7);
	if (itest_random_file(path, 3 * ITEST_PAGE, rng))
		return ITEST_FAIL;
	int fd = open(path, O_RDWR);

	/* SIGBUS past the end of the file. */
	char *m = mmap(NULL, 8 * ITEST_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED, "mmap: %s", strerror(errno));
	CHECK(access_signal(m + 2 * ITEST_PAGE, true) == 0, "a store inside the file faulted");
	CHECK(access_signal(m + 5 * ITEST_PAGE, false) == SIGBUS, "a load past the end: no SIGBUS");
	CHECK(ftruncate(fd, ITEST_PAGE) == 0, "ftruncate");
	CHECK(access_signal(m + 2 * ITEST_PAGE, false) == SIGBUS,
	      "a load past the end after truncating: no SIGBUS");
	CHECK(ftruncate(fd, 8 * ITEST_PAGE) == 0, "ftruncate back");
	CHECK(access_signal(m + 6 * ITEST_PAGE, true) == 0, "a store after growing the file faulted");

	/* mprotect: PROT_READ refuses stores, and back to PROT_WRITE they count. */
	uint32_t before[8], after[8];
	bool managed = g.mrelease && g.mrelease(m, 8 * ITEST_PAGE, GAIA_CPU) == 0 &&
		       versions(&g, m, 8, before);
	CHECK(mprotect(m, 8 * ITEST_PAGE, PROT_READ) == 0, "mprotect PROT_READ");
	CHECK(access_signal(m + ITEST_PAGE, true) == SIGSEGV, "a store to PROT_READ: no SIGSEGV");
	CHECK(mprotect(m, 8 * ITEST_PAGE, PROT_READ | PROT_WRITE) == 0, "mprotect back");
	CHECK(access_signal(m + 3 * ITEST_PAGE, true) == 0, "a store after mprotect back faulted");
	if (managed) {
		g.mrelease(m, 8 * ITEST_PAGE, GAIA_CPU);
		versions(&g, m, 8, after);
		for (int p = 0; p < 8; p++)
			CHECK((after[p] != before[p]) == (p == 3),
			      "after mprotect: page %d %s", p, p == 3 ? "written, not reported" : "reported");
	}

	/* MADV_DONTNEED on MAP_SHARED drops page-table entries, not data, and
	 * is no write itself. */
	m[4 * ITEST_PAGE + 1] = 0x33;
	if (managed)
		g.mrelease(m, 8 * ITEST_PAGE, GAIA_CPU);
	CHECK(madvise(m, 8 * ITEST_PAGE, MADV_DONTNEED) == 0, "madvise");
	CHECK(m[4 * ITEST_PAGE + 1] == 0x33, "MADV_DONTNEED lost a MAP_SHARED store");
	if (managed) {
		versions(&g, m, 8, before);
		m[7 * ITEST_PAGE] = 1;
		g.mrelease(m, 8 * ITEST_PAGE, GAIA_CPU);
		versions(&g, m, 8, after);
		for (int p = 0; p < 8; p++)
			CHECK((after[p] != before[p]) == (p == 7),
			      "after madvise: page %d %s", p, p == 7 ? "written, not reported" : "reported");
	}

	/* mremap moves the mapping: data and tracking follow. */
	char *target = mmap(NULL, 8 * ITEST_PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *moved = mremap(m, 8 * ITEST_PAGE, 8 * ITEST_PAGE, MREMAP_MAYMOVE | MREMAP_FIXED,
			     target);
	CHECK(moved != MAP_FAILED, "mremap: %s", strerror(errno));
	CHECK(moved[4 * ITEST_PAGE + 1] == 0x33, "mremap lost data");
	if (managed && moved != MAP_FAILED) {
		CHECK(versions(&g, moved, 8, before), "the moved mapping is not managed");
		moved[2 * ITEST_PAGE + 9] = 7;
		moved[5 * ITEST_PAGE] = 7;
		g.mrelease(moved, 8 * ITEST_PAGE, GAIA_CPU);
		versions(&g, moved, 8, after);
		for (int p = 0; p < 8; p++)
			CHECK((after[p] != before[p]) == (p == 2 || p == 5), "after mremap: page %d %s", p,
			      (p == 2 || p == 5) ? "written, not reported" : "reported");
	}
	munmap(moved, 8 * ITEST_PAGE);
	close(fd);
	itest_remove_tree(dir);
	if (failures)
		return ITEST_FAIL;
	printf("kernel_semantics: SIGBUS, mprotect, madvise, mremap as the kernel does%s\n",
	       managed ? "; tracking exact throughout" : " (not under the shim)");
	return ITEST_PASS;
}
