/* A program that closes descriptors it did not open (daemons close
 * everything above stderr: a close() loop, closefrom(), close_range())
 * must not take the shim's own descriptors with them: the next open would
 * reuse their numbers, and the shim would scan, read or map the program's
 * new file instead of its own (README "Security"; shim/fdguard.c).
 *
 * After each way of closing everything, the program opens new files (they
 * get the lowest numbers, those the shim's would have had) and checks that
 * the shim still tracks its mapping exactly: a store moves exactly that
 * page's version, a change by a writer not under the shim (a raw pwrite
 * syscall) is found exactly at the next acquire, and the new files are
 * untouched. A child started with stdin closed checks that the shim never
 * takes descriptors 0-2. Without the shim the same program runs the
 * kernel-defined parts (closing, reopening, data). */
#include "itest.h"

#include <sys/mman.h>
#include <sys/wait.h>

#define PAGES 16
#define PG ITEST_PAGE

static struct itest_gaia g;
static char dir[PATH_MAX];

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			printf("close_all: FAIL line %d: ", __LINE__);       \
			printf(__VA_ARGS__);                                 \
			printf("\n");                                        \
			return ITEST_FAIL;                                   \
		}                                                            \
	} while (0)

static int moved(const uint32_t *a, const uint32_t *b, int *which)
{
	int n = 0;
	for (int p = 0; p < PAGES; p++)
		if (a[p] != b[p]) {
			n++;
			*which = p;
		}
	return n;
}

static int fill_file(const char *name, char c, char *path, size_t size)
{
	char page[PG];
	snprintf(path, size, "%s/%s", dir, name);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	memset(page, c, sizeof(page));
	for (int p = 0; fd >= 0 && p < PAGES; p++)
		if (pwrite(fd, page, sizeof(page), (off_t)p * PG) != (ssize_t)sizeof(page))
			return -1;
	return fd;
}

static bool file_is(const char *path, char c)
{
	char buf[PAGES * PG];
	int fd = open(path, O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf));
	if (fd >= 0)
		close(fd);
	if (n != (ssize_t)sizeof(buf))
		return false;
	for (size_t i = 0; i < sizeof(buf); i++)
		if (buf[i] != c)
			return false;
	return true;
}

static void close_everything(int how)
{
	switch (how) {
	case 0:
		for (int fd = 3; fd < 1024; fd++)
			close(fd);
		break;
	case 1:
		closefrom(3);
		break;
	default:
		close_range(3, ~0u, 0);
		break;
	}
}

static const char *const ways[] = {"close() loop", "closefrom(3)", "close_range(3, ~0)"};

static int round_after(int how, char *map, const char *path_a)
{
	char path_b[PATH_MAX + 16], name[16];
	uint32_t v0[PAGES], v1[PAGES];
	int which = -1;

	close_everything(how);
	/* New files take the lowest free numbers, 3 and up, as without the
	 * shim: its own descriptors are not among them. */
	snprintf(name, sizeof(name), "new%d", how);
	int fds[6];
	for (int i = 0; i < 6; i++)
		fds[i] = fill_file(name, (char)('K' + how), path_b, sizeof(path_b));
	CHECK(fds[5] >= 0, "%s: cannot open new files: %s", ways[how], strerror(errno));
	for (int i = 0; i < 6; i++)
		CHECK(fds[i] == 3 + i, "after %s, the new file %d got descriptor %d, not %d", ways[how], i,
		      fds[i], 3 + i);
	/* A daemon then places descriptors at fixed small numbers. */
	for (int n = 9; n < 64; n++)
		CHECK(dup2(fds[0], n) == n, "dup2 onto %d: %s", n, strerror(errno));

	if (g.mversion) {
		g.mversion(map, PAGES * PG, v0);
		map[(size_t)(7 + how) * PG] = 'S';
		CHECK(g.mrelease(map, PAGES * PG, GAIA_CPU) == 0, "release: %s", strerror(errno));
		g.mversion(map, PAGES * PG, v1);
		CHECK(moved(v0, v1, &which) == 1 && which == 7 + how,
		      "after %s, a store to page %d moved %d versions (last %d)", ways[how], 7 + how,
		      moved(v0, v1, &which), which);

		/* Another writer, not under the shim: the syscall instruction itself. */
		int afd = open(path_a, O_RDWR);
		char page[PG];
		struct timespec pause = {0, 20 * 1000 * 1000};
		memset(page, 'O', sizeof(page));
		nanosleep(&pause, NULL);
		CHECK(itest_unseen_pwrite(afd, page, sizeof(page), (off_t)(2 + how) * PG) == PG, "pwrite");
		close(afd);
		CHECK(g.macquire(map, PAGES * PG, GAIA_CPU) == 0, "acquire: %s", strerror(errno));
		g.mversion(map, PAGES * PG, v0);
		CHECK(moved(v1, v0, &which) == 1 && which == 2 + how,
		      "after %s, another writer's page %d: %d versions moved (last %d)", ways[how], 2 + how,
		      moved(v1, v0, &which), which);
	} else {
		map[(size_t)(7 + how) * PG] = 'S';
	}
	CHECK(map[(size_t)(2 + how) * PG] == 'O' || !g.mversion, "the mapping misses the other writer's page");
	CHECK(msync(map, PAGES * PG, MS_SYNC) == 0, "msync: %s", strerror(errno));
	CHECK(file_is(path_b, (char)('K' + how)), "after %s, the program's new file was changed", ways[how]);
	for (int i = 0; i < 6; i++)
		close(fds[i]);
	for (int n = 9; n < 64; n++)
		close(n);
	return ITEST_PASS;
}

/* Started with stdin closed: the shim's descriptors stay above 2. */
static int child_without_stdin(const char *path)
{
	int fd = open(path, O_RDWR);
	if (fd < 0)
		return ITEST_FAIL;
	if (fd == 0) { /* it took stdin's place; move it */
		int high = fcntl(fd, F_DUPFD, 10);
		close(fd);
		fd = high;
	}
	char *m = mmap(NULL, PAGES * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return ITEST_FAIL;
	m[0] = 'x';
	msync(m, PAGES * PG, MS_SYNC);
	if (fcntl(0, F_GETFD) != -1) {
		printf("close_all: FAIL: descriptor 0 was taken while the program had it closed\n");
		return ITEST_FAIL;
	}
	return ITEST_PASS;
}

int main(int argc, char **argv)
{
	char path_a[PATH_MAX + 16];

	if (argc == 3 && !strcmp(argv[1], "child"))
		return child_without_stdin(argv[2]);
	g = itest_gaia_lookup();
	if (itest_tempdir(dir, "close_all"))
		return ITEST_FAIL;
	int fd = fill_file("a", 'a', path_a, sizeof(path_a));
	char *map = fd < 0 ? MAP_FAILED : mmap(NULL, PAGES * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(map != MAP_FAILED, "mmap: %s", strerror(errno));
	uint32_t v[PAGES];
	CHECK(!g.mversion || (g.mversion(map, PAGES * PG, v) == 0 && v[0]), "not managed under the shim");
	if (g.macquire)
		CHECK(g.macquire(map, PAGES * PG, GAIA_CPU) == 0, "acquire: %s", strerror(errno));
	for (int how = 0; how < 3; how++) {
		int rc = round_after(how, map, path_a);
		if (rc != ITEST_PASS)
			return rc;
		printf("close_all: %s: the shim kept its descriptors\n", ways[how]);
	}

	pid_t pid = fork();
	if (pid == 0) {
		close(0);
		execl(argv[0], argv[0], "child", path_a, (char *)NULL);
		_exit(127);
	}
	int status;
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child without stdin failed");
	itest_remove_tree(dir);
	printf("close_all: ok\n");
	return ITEST_PASS;
}
