/* A sanitizer's report under the shim must come out whole. ASan's and
 * TSan's symbolizers map the program's executable and libraries (read-only,
 * private) while holding the runtime's own locks; a shim that took such a
 * mapping on (starting its release thread, taking its locks) hung the
 * report for ever, and with it the test that had found a bug.
 *
 *   sanitizer_report          read-only private mappings of ELF files (the
 *                             program itself, libc) are not managed; the
 *                             same mapping of a data file is, and so is a
 *                             writable one of an ELF file
 *   sanitizer_report race     two threads race on a global: under TSan the
 *                             report must be printed, symbolized, to its end
 *   sanitizer_report use_after_free
 *                             a heap use after free: the same under ASan
 *
 * The modes that make a report are registered only in the sanitizer
 * builds, with a timeout and the report's last lines as the pass pattern. */
#include "itest.h"

#include <link.h>
#include <pthread.h>
#include <sys/mman.h>

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			printf("sanitizer_report: FAIL line %d: ", __LINE__); \
			printf(__VA_ARGS__);                                 \
			printf("\n");                                        \
			return ITEST_FAIL;                                   \
		}                                                            \
	} while (0)

static struct itest_gaia g;

/* Maps the first `len` bytes of path with prot/flags; returns whether the
 * shim manages the mapping (gaia_mversion answers for it). */
static int managed(const char *path, int oflags, int prot, int flags, size_t len)
{
	int fd = open(path, oflags);
	if (fd < 0) {
		printf("sanitizer_report: open %s: %s\n", path, strerror(errno));
		return -1;
	}
	void *p = mmap(NULL, len, prot, flags, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		printf("sanitizer_report: mmap %s: %s\n", path, strerror(errno));
		return -1;
	}
	uint32_t v[1];
	int rc = g.mversion(p, 4096, v);
	munmap(p, len);
	return rc == 0;
}

static int libc_path(struct dl_phdr_info *info, size_t size, void *out)
{
	(void)size;
	if (info->dlpi_name && strstr(info->dlpi_name, "/libc.so")) {
		snprintf(out, PATH_MAX, "%s", info->dlpi_name);
		return 1;
	}
	return 0;
}

static int admission(void)
{
	g = itest_gaia_lookup();
	if (!g.mversion) {
		printf("sanitizer_report: not under the shim\n");
		return ITEST_SKIP;
	}
	char dir[PATH_MAX], data[PATH_MAX + 16], exe[PATH_MAX], libc[PATH_MAX] = "";
	CHECK(itest_tempdir(dir, "sanrep") == 0, "tmpdir");
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	CHECK(n > 0, "readlink /proc/self/exe: %s", strerror(errno));
	exe[n] = 0;
	dl_iterate_phdr(libc_path, libc);
	CHECK(libc[0], "libc not found among the loaded objects");

	/* A data file and a copy of the executable, 64 KiB each. */
	static char buf[8192];
	int in = open(exe, O_RDONLY);
	CHECK(in >= 0 && read(in, buf, sizeof(buf)) == (ssize_t)sizeof(buf), "read %s", exe);
	close(in);
	char copy[PATH_MAX + 16];
	snprintf(copy, sizeof(copy), "%s/exe-copy", dir);
	int fd = open(copy, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0 && write(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf), "write %s", copy);
	close(fd);
	memset(buf, 'd', sizeof(buf));
	snprintf(data, sizeof(data), "%s/data", dir);
	fd = open(data, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0 && write(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf), "write %s", data);
	close(fd);

	CHECK(managed(exe, O_RDONLY, PROT_READ, MAP_PRIVATE, 8192) == 0,
	      "the program's own executable, read-only and private, was managed");
	CHECK(managed("/proc/self/exe", O_RDONLY, PROT_READ, MAP_PRIVATE, 8192) == 0,
	      "/proc/self/exe, read-only and private, was managed");
	CHECK(managed(libc, O_RDONLY, PROT_READ, MAP_PRIVATE, 8192) == 0,
	      "%s, read-only and private, was managed", libc);
	CHECK(managed(data, O_RDONLY, PROT_READ, MAP_PRIVATE, 8192) == 1,
	      "a data file, read-only and private, was not managed");
	CHECK(managed(copy, O_RDWR, PROT_READ | PROT_WRITE, MAP_PRIVATE, 8192) == 1,
	      "an ELF file mapped writable and private was not managed");
	CHECK(managed(copy, O_RDWR, PROT_READ, MAP_SHARED, 8192) == 1,
	      "an ELF file mapped shared was not managed");
	unlink(copy);
	unlink(data);
	rmdir(dir);
	printf("sanitizer_report: ELF files read-only and private pass through, the rest is managed\n");
	return ITEST_PASS;
}

/* Under the shim, with a data mapping managed (so the shim is running,
 * its release thread included) when the report comes. */
static void map_something(void)
{
	char dir[PATH_MAX], data[PATH_MAX + 16];
	static char buf[8192];
	if (itest_tempdir(dir, "sanrep"))
		return;
	snprintf(data, sizeof(data), "%s/data", dir);
	int fd = open(data, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0 && write(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf)) {
		char *p = mmap(NULL, sizeof(buf), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p != MAP_FAILED)
			p[0] = 1;
	}
	if (fd >= 0)
		close(fd);
	unlink(data);
	rmdir(dir);
}

static int shared_counter;

static void *bump(void *arg)
{
	shared_counter++; /* the race the report is about */
	return arg;
}

static int race(void)
{
	map_something();
	pthread_t a, b;
	pthread_create(&a, NULL, bump, NULL);
	pthread_create(&b, NULL, bump, NULL);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	printf("sanitizer_report: counter %d\n", shared_counter);
	return ITEST_PASS;
}

static int use_after_free(void)
{
	map_something();
	/* volatile: the compiler can neither see the use nor drop it */
	volatile char *volatile p = malloc(16);
	free((void *)p);
	p[0] = 1; /* the use after free the report is about */
	return ITEST_PASS;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc > 1 && strcmp(argv[1], "race") == 0)
		return race();
	if (argc > 1 && strcmp(argv[1], "use_after_free") == 0)
		return use_after_free();
	return admission();
}
