/* Mappings of special files behave as the kernel's (DESIGN §1 promises 5
 * and 6): pipes, /proc files, devices, directories, memfd and /dev/shm
 * objects, O_DIRECT descriptors, deleted files, files truncated while
 * mapped or shorter than the mapping, private mappings of a file written
 * meanwhile, and mappings the descriptor does not allow.
 *
 *   special_files --compare LIBGAIA   runs itself with --trace once without
 *                                     LD_PRELOAD and once with LIBGAIA;
 *                                     exit 0 when the transcripts agree
 *   special_files --trace             one line per case on stdout: what
 *                                     the calls returned (errno names) and
 *                                     a hash of every byte read
 * Under the shim, the trace also checks (on stderr, exit 1) that the
 * regular-file cases were managed: a pass where nothing was managed would
 * prove nothing. */
#include "itest.h"

#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define PAGES 16
#define PG ITEST_PAGE

static char dir[PATH_MAX];
static struct itest_gaia g;
static int unmanaged_failures;

static const char *err_name(int e)
{
	switch (e) {
	case ENODEV: return "ENODEV";
	case EACCES: return "EACCES";
	case EINVAL: return "EINVAL";
	case EPERM: return "EPERM";
	case EIO: return "EIO";
	case EBADF: return "EBADF";
	case ENOENT: return "ENOENT";
	default: return "other";
	}
}

static uint64_t hash(const void *p, size_t n, uint64_t h)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

/* Under the shim, a case on a regular file must be managed. */
static void expect_managed(const char *name, const void *map, size_t len)
{
	uint32_t v[PAGES];
	if (!g.mversion || len > PAGES * PG)
		return;
	if (g.mversion(map, len, v) != 0 || v[0] == 0) {
		fprintf(stderr, "special_files: %s: not managed under the shim\n", name);
		unmanaged_failures++;
	}
}

static sigjmp_buf bus_jump;
static volatile uintptr_t bus_addr;
static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
	(void)sig, (void)ctx;
	bus_addr = (uintptr_t)si->si_addr;
	siglongjmp(bus_jump, 1);
}

/* Reads (or writes) one byte; returns its value, or -1 on SIGBUS at that
 * very address, -2 on SIGBUS elsewhere. */
static int touch(volatile char *p, bool write)
{
	bus_addr = 0;
	if (sigsetjmp(bus_jump, 1))
		return bus_addr == (uintptr_t)p ? -1 : -2;
	if (write)
		*p = 'w';
	return (unsigned char)*p;
}

static void map_result(const char *name, void *m)
{
	if (m == MAP_FAILED)
		printf("%s: mmap failed %s\n", name, err_name(errno));
	else
		printf("%s: mapped\n", name);
}

static int data_file(const char *name, size_t size, char *path, size_t path_size)
{
	char page[PG];
	snprintf(path, path_size, "%s/%s", dir, name);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	for (size_t off = 0; fd >= 0 && off < size; off += PG) {
		memset(page, 'A' + (int)(off / PG) % 26, PG);
		size_t n = size - off < PG ? size - off : PG;
		if (pwrite(fd, page, n, (off_t)off) != (ssize_t)n)
			return -1;
	}
	return fd;
}

/* A data file of `size` bytes mapped `len` bytes read-write with `flags`;
 * the case's first transcript line; NULL when mmap failed. */
static char *mapped_file(const char *name, size_t size, size_t len, int flags, int *fd)
{
	char path[PATH_MAX + 32];
	*fd = data_file(name, size, path, sizeof(path));
	char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, *fd, 0);
	map_result(name, m);
	if (m == MAP_FAILED)
		return NULL;
	expect_managed(name, m, len);
	return m;
}

static void case_pipe(void)
{
	int p[2];
	if (pipe(p))
		return;
	void *m = mmap(NULL, PG, PROT_READ, MAP_SHARED, p[0], 0);
	map_result("pipe", m);
	close(p[0]), close(p[1]);
}

static void case_proc(void)
{
	int fd = open("/proc/self/maps", O_RDONLY);
	void *m = mmap(NULL, PG, PROT_READ, MAP_PRIVATE, fd, 0);
	map_result("proc_maps_private", m);
	m = mmap(NULL, PG, PROT_READ, MAP_SHARED, fd, 0);
	map_result("proc_maps_shared", m);
	close(fd);
}

static void case_devices(void)
{
	int fd = open("/dev/null", O_RDWR);
	void *m = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	map_result("dev_null", m);
	close(fd);
	fd = open("/dev/urandom", O_RDONLY);
	m = mmap(NULL, PG, PROT_READ, MAP_SHARED, fd, 0);
	map_result("dev_urandom", m);
	close(fd);
	fd = open("/dev/zero", O_RDWR);
	char *z = mmap(NULL, PAGES * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	map_result("dev_zero_shared", z);
	if (z != MAP_FAILED) {
		uint64_t h = hash(z, PAGES * PG, 1);
		memset(z + 3 * PG, 'z', PG);
		printf("dev_zero_shared: hash %016" PRIx64 " then %016" PRIx64 "\n", h, hash(z, PAGES * PG, 1));
		munmap(z, PAGES * PG);
	}
	close(fd);
	fd = open(dir, O_RDONLY | O_DIRECTORY);
	m = mmap(NULL, PG, PROT_READ, MAP_SHARED, fd, 0);
	map_result("directory", m);
	close(fd);
}

static void case_memfd_and_shm(void)
{
	char name[64];
	int fds[2];
	fds[0] = memfd_create("special_files", 0);
	snprintf(name, sizeof(name), "/dev/shm/special_files.%d", (int)getpid());
	fds[1] = open(name, O_RDWR | O_CREAT | O_TRUNC, 0600);
	for (int i = 0; i < 2; i++) {
		const char *what = i ? "dev_shm" : "memfd";
		if (fds[i] < 0 || ftruncate(fds[i], PAGES * PG)) {
			printf("%s: setup failed\n", what);
			continue;
		}
		char *m = mmap(NULL, PAGES * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fds[i], 0);
		map_result(what, m);
		if (m == MAP_FAILED)
			continue;
		memset(m + PG, 'm', 100);
		char buf[PAGES * PG];
		ssize_t n = pread(fds[i], buf, sizeof(buf), 0);
		printf("%s: pread %zd hash %016" PRIx64 "\n", what, n, hash(buf, n > 0 ? (size_t)n : 0, 1));
		munmap(m, PAGES * PG);
		close(fds[i]);
	}
	unlink(name);
}

/* O_DIRECT: the mapping is the page cache, the descriptor bypasses it;
 * the kernel keeps the two coherent around direct I/O. */
static void case_odirect(void)
{
	char path[PATH_MAX + 32];
	int fd0 = data_file("odirect", PAGES * PG, path, sizeof(path));
	close(fd0);
	int fd = open(path, O_RDWR | O_DIRECT);
	if (fd < 0) {
		printf("odirect: open failed %s\n", err_name(errno));
		return;
	}
	char *m = mmap(NULL, PAGES * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	map_result("odirect", m);
	if (m == MAP_FAILED)
		return;
	expect_managed("odirect", m, PAGES * PG);
	memset(m + 2 * PG, 'd', PG);
	int rc = msync(m, PAGES * PG, MS_SYNC);
	void *buf = NULL;
	if (posix_memalign(&buf, PG, PG))
		return;
	ssize_t n = pread(fd, buf, PG, 2 * PG);
	printf("odirect: msync %d, direct pread %zd hash %016" PRIx64 "\n", rc, n, hash(buf, n > 0 ? (size_t)n : 0, 1));
	memset(buf, 'D', PG);
	n = pwrite(fd, buf, PG, 5 * PG);
	printf("odirect: direct pwrite %zd, mapping sees hash %016" PRIx64 "\n", n, hash(m + 5 * PG, PG, 1));
	free(buf);
	munmap(m, PAGES * PG);
	close(fd);
}

static void case_deleted(void)
{
	char path[PATH_MAX + 32];
	int fd = data_file("deleted", PAGES * PG, path, sizeof(path));
	unlink(path);
	char *m = mmap(NULL, PAGES * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	map_result("deleted", m);
	if (m == MAP_FAILED)
		return;
	expect_managed("deleted", m, PAGES * PG);
	memset(m + 4 * PG + 10, 'x', 50);
	char buf[PAGES * PG];
	ssize_t n = pread(fd, buf, sizeof(buf), 0);
	struct stat st;
	fstat(fd, &st);
	printf("deleted: nlink %d, pread %zd hash %016" PRIx64 "\n", (int)st.st_nlink, n,
	       hash(buf, n > 0 ? (size_t)n : 0, 1));
	munmap(m, PAGES * PG);
	m = mmap(NULL, PAGES * PG, PROT_READ, MAP_SHARED, fd, 0);
	printf("deleted: mapped again, hash %016" PRIx64 "\n", m == MAP_FAILED ? 0 : hash(m, PAGES * PG, 1));
	if (m != MAP_FAILED)
		munmap(m, PAGES * PG);
	close(fd);
}

static void case_truncated(void)
{
	int fd;
	char *m = mapped_file("truncated", PAGES * PG, PAGES * PG, MAP_SHARED, &fd);
	if (!m)
		return;
	m[PG] = 'T';
	int rc = ftruncate(fd, 3 * PG + 100);
	printf("truncated: ftruncate %d; in the last page past EOF %d; next page %d; write far %d; before %d\n", rc,
	       touch(m + 3 * PG + 200, false), touch(m + 4 * PG, false), touch(m + 9 * PG + 7, true),
	       touch(m + PG, false));
	if (g.mrelease)
		g.mrelease(m, PAGES * PG, GAIA_CPU);
	rc = ftruncate(fd, PAGES * PG);
	printf("truncated: grown %d; page 4 %d, page 9 %d\n", rc, touch(m + 4 * PG, false), touch(m + 9 * PG, false));
	m[9 * PG] = 'G';
	msync(m, PAGES * PG, MS_SYNC);
	char buf[PAGES * PG];
	ssize_t n = pread(fd, buf, sizeof(buf), 0);
	printf("truncated: pread %zd hash %016" PRIx64 "\n", n, hash(buf, n > 0 ? (size_t)n : 0, 1));
	munmap(m, PAGES * PG);
	close(fd);
}

static void case_short_file(void)
{
	int fd;
	char *m = mapped_file("short_file", PG + 10, 4 * PG, MAP_SHARED, &fd);
	if (!m)
		return;
	printf("short_file: byte 4101 %d, byte 4200 %d, page 2 %d, write page 3 %d\n", touch(m + PG + 5, false),
	       touch(m + PG + 104, false), touch(m + 2 * PG, false), touch(m + 3 * PG, true));
	m[PG + 200] = 'q'; /* past EOF inside the last page: never reaches the file */
	msync(m, 4 * PG, MS_SYNC);
	struct stat st;
	fstat(fd, &st);
	char buf[2 * PG];
	ssize_t n = pread(fd, buf, sizeof(buf), 0);
	printf("short_file: size %lld, pread %zd hash %016" PRIx64 "\n", (long long)st.st_size, n,
	       hash(buf, n > 0 ? (size_t)n : 0, 1));
	munmap(m, 4 * PG);
	close(fd);
}

/* MAP_PRIVATE, then the file is written: pages the process never wrote
 * follow the file, the page it wrote keeps its own copy. */
static void case_private_then_pwrite(void)
{
	int fd;
	char *m = mapped_file("private", PAGES * PG, PAGES * PG, MAP_PRIVATE, &fd);
	if (!m)
		return;
	volatile char c = m[0];
	(void)c;
	m[PG + 1] = 'p';
	char page[4 * PG];
	memset(page, 'N', sizeof(page));
	ssize_t n = pwrite(fd, page, sizeof(page), 0);
	printf("private: pwrite %zd; page 0 '%c', page 1 '%c%c', page 2 '%c'\n", n, m[0], m[PG], m[PG + 1], m[2 * PG]);
	msync(m, PAGES * PG, MS_SYNC);
	munmap(m, PAGES * PG);
	char buf[PAGES * PG];
	n = pread(fd, buf, sizeof(buf), 0);
	printf("private: file hash %016" PRIx64 "\n", hash(buf, n > 0 ? (size_t)n : 0, 1));
	close(fd);
}

static void case_permissions(void)
{
	char path[PATH_MAX + 32];
	int fd = data_file("readonly", PAGES * PG, path, sizeof(path));
	close(fd);
	fd = open(path, O_RDONLY);
	void *m = mmap(NULL, PAGES * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	map_result("rdonly_fd_shared_write", m);
	char *r = mmap(NULL, PAGES * PG, PROT_READ, MAP_SHARED, fd, 0);
	map_result("rdonly_fd_shared_read", r);
	if (r != MAP_FAILED) {
		int rc = mprotect(r, PAGES * PG, PROT_READ | PROT_WRITE);
		printf("rdonly_fd_shared_read: mprotect RW %d %s; write %d\n", rc, rc ? err_name(errno) : "-",
		       rc ? 0 : touch(r, true));
		munmap(r, PAGES * PG);
	}
	char *p = mmap(NULL, PAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	map_result("rdonly_fd_private_write", p);
	if (p != MAP_FAILED) {
		p[0] = 'P';
		char c = 0;
		ssize_t n = pread(fd, &c, 1, 0);
		printf("rdonly_fd_private_write: pread %zd '%c', mapping '%c'\n", n, c, p[0]);
		munmap(p, PAGES * PG);
	}
	close(fd);
}

static int trace(void)
{
	struct sigaction sa = {.sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO | SA_NODEFER};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
	sigaction(SIGSEGV, &sa, NULL);
	g = itest_gaia_lookup();
	if (itest_tempdir(dir, "special_files"))
		return ITEST_FAIL;
	setvbuf(stdout, NULL, _IOLBF, 0);
	case_pipe();
	case_proc();
	case_devices();
	case_memfd_and_shm();
	case_odirect();
	case_deleted();
	case_truncated();
	case_short_file();
	case_private_then_pwrite();
	case_permissions();
	itest_remove_tree(dir);
	return unmanaged_failures ? ITEST_FAIL : ITEST_PASS;
}

static int run_trace(const char *self, const char *preload, char *out, size_t size)
{
	int p[2];
	if (pipe(p))
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]), close(p[1]);
		if (preload)
			setenv("LD_PRELOAD", preload, 1);
		else
			unsetenv("LD_PRELOAD");
		execl(self, self, "--trace", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	size_t n = 0;
	ssize_t r;
	while ((r = read(p[0], out + n, size - 1 - n)) > 0)
		n += (size_t)r;
	out[n] = 0;
	close(p[0]);
	int status;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

int main(int argc, char **argv)
{
	static char plain[65536], shim[65536];

	if (argc == 2 && !strcmp(argv[1], "--trace"))
		return trace();
	if (argc != 3 || strcmp(argv[1], "--compare")) {
		fprintf(stderr, "usage: %s --compare LIBGAIA | --trace\n", argv[0]);
		return ITEST_FAIL;
	}
	int rc_plain = run_trace(argv[0], NULL, plain, sizeof(plain));
	int rc_shim = run_trace(argv[0], argv[2], shim, sizeof(shim));
	printf("--- without the shim (exit %d)\n%s--- with the shim (exit %d)\n%s", rc_plain, plain, rc_shim, shim);
	if (rc_plain || rc_shim || strcmp(plain, shim) != 0) {
		printf("special_files: FAIL: the transcripts differ or a run failed\n");
		return ITEST_FAIL;
	}
	printf("special_files: ok (identical transcripts)\n");
	return ITEST_PASS;
}
