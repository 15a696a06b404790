/* Degradation (issue: CPU side, item 8; DESIGN §1 promise 6): when the shim
 * cannot or must not track writes it says so once and passes through, and
 * the program behaves as without it.
 *
 * Each case re-executes this program (so the shim reads its configuration
 * afresh) with one setting changed and checks what the child reports:
 *   disable     GAIA_DISABLE=1: nothing managed, no message;
 *   softdirty   GAIA_DIRTY_TRACKING=softdirty: managed with exact tracking
 *               where the kernel has soft-dirty bits, else exactly one
 *               warning line and nothing managed;
 *   uffd        GAIA_DIRTY_TRACKING=uffd: managed, exact;
 *   nobody      run as an unprivileged user (when started as root): managed
 *               through UFFD_USER_MODE_ONLY, exact.
 * The child maps a file, writes a few pages, reads them back through
 * read(), and, when managed, checks that exactly those pages' versions move.
 */
#include "itest.h"

#include <grp.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define PAGES 64

/* Exit codes of the child. */
enum { CHILD_MANAGED = 10, CHILD_UNMANAGED = 11, CHILD_WRONG = 12 };

static int child(const char *path)
{
	struct itest_gaia g = itest_gaia_lookup();
	int fd = open(path, O_RDWR);
	char *map = mmap(NULL, PAGES * ITEST_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (fd < 0 || map == MAP_FAILED) {
		perror("degrade child: map");
		return CHILD_WRONG;
	}
	uint32_t before[PAGES], after[PAGES];
	bool managed = g.mversion && g.mversion(map, PAGES * ITEST_PAGE, before) == 0;
	static const int written[] = {3, 17, 40};
	for (size_t i = 0; i < sizeof(written) / sizeof(written[0]); i++)
		map[written[i] * ITEST_PAGE + 5] = (char)(0x40 + i);
	char byte;
	for (size_t i = 0; i < sizeof(written) / sizeof(written[0]); i++) {
		if (pread(fd, &byte, 1, (off_t)(written[i] * ITEST_PAGE + 5)) != 1 ||
		    byte != (char)(0x40 + i)) {
			fprintf(stderr, "degrade child: read() does not see a store\n");
			return CHILD_WRONG;
		}
	}
	if (!managed)
		return CHILD_UNMANAGED;
	if (g.mrelease(map, PAGES * ITEST_PAGE, GAIA_CPU) || g.mversion(map, PAGES * ITEST_PAGE, after))
		return CHILD_WRONG;
	for (int p = 0; p < PAGES; p++) {
		bool was_written = p == 3 || p == 17 || p == 40;
		if ((after[p] != before[p]) != was_written) {
			fprintf(stderr, "degrade child: page %d %s\n", p,
				was_written ? "written but not reported" : "reported but not written");
			return CHILD_WRONG;
		}
	}
	return CHILD_MANAGED;
}

struct outcome {
	int code;
	int warning_lines;
	char stderr_text[4096];
};

/* Runs this program as a child in `mode`, with `name`=`value` set (name may
 * be NULL), as user `uid` (or unchanged when -1). */
static int run_case(const char *self, const char *path, const char *name, const char *value,
		    uid_t uid, struct outcome *out)
{
	int err[2];
	if (pipe(err))
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(err[1], 2);
		close(err[0]);
		close(err[1]);
		if (name)
			setenv(name, value, 1);
		if (uid != (uid_t)-1 && (setgroups(0, NULL) || setgid(uid) || setuid(uid)))
			_exit(CHILD_WRONG);
		execl(self, self, "--child", path, (char *)NULL);
		_exit(CHILD_WRONG);
	}
	close(err[1]);
	size_t len = 0;
	ssize_t n;
	while ((n = read(err[0], out->stderr_text + len, sizeof(out->stderr_text) - 1 - len)) > 0)
		len += (size_t)n;
	out->stderr_text[len] = 0;
	close(err[0]);
	int status;
	waitpid(pid, &status, 0);
	out->code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	out->warning_lines = 0;
	for (const char *p = out->stderr_text; (p = strstr(p, "warning:")); p++)
		out->warning_lines++;
	return 0;
}

static bool soft_dirty_in_kernel(void)
{
	FILE *f = fopen("/proc/self/clear_refs", "w");
	if (!f)
		return false;
	fclose(f);
	char *page = mmap(NULL, ITEST_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	page[0] = 1;
	int cr = open("/proc/self/clear_refs", O_WRONLY), pm = open("/proc/self/pagemap", O_RDONLY);
	uint64_t entry = 0;
	bool ok = cr >= 0 && pm >= 0 && write(cr, "4", 1) == 1;
	page[0] = 2;
	ok = ok && pread(pm, &entry, 8, (off_t)((uintptr_t)page / ITEST_PAGE * 8)) == 8 &&
	     (entry >> 55 & 1);
	close(cr);
	close(pm);
	munmap(page, ITEST_PAGE);
	return ok;
}

/* Whether user uid can run this program under the shim: a build in a
 * directory only root can enter (a clone in a mktemp -d) cannot. */
static bool reachable_as(uid_t uid, const char *self)
{
	pid_t pid = fork();
	if (pid == 0) {
		const char *preload = getenv("LD_PRELOAD");
		if (setgroups(0, NULL) || setgid(uid) || setuid(uid))
			_exit(1);
		_exit(access(self, X_OK) == 0 && (!preload || access(preload, R_OK) == 0) ? 0 : 1);
	}
	int status;
	return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--child") == 0)
		return child(argv[2]);
	if (!itest_gaia_lookup().mversion) {
		printf("degrade: not under the shim; skipped\n");
		return ITEST_SKIP;
	}
	char dir[PATH_MAX], path[PATH_MAX + 16], self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0 || itest_tempdir(dir, "degrade"))
		return ITEST_FAIL;
	self[n] = 0;
	snprintf(path, sizeof(path), "%s/data", dir);
	unsigned short rng[3];
	itest_rng_seed(rng, 1);
	if (itest_random_file(path, PAGES * ITEST_PAGE, rng))
		return ITEST_FAIL;
	chmod(dir, 0777);
	chmod(path, 0666);
	int failures = 0;
	struct outcome o;

#define EXPECT(cond, what)                                                                  \
	do {                                                                                \
		if (!(cond)) {                                                              \
			printf("degrade: %s (child exit %d, stderr:\n%s)\n", what, o.code,   \
			       o.stderr_text);                                              \
			failures++;                                                         \
		}                                                                           \
	} while (0)

	run_case(self, path, "GAIA_DISABLE", "1", (uid_t)-1, &o);
	EXPECT(o.code == CHILD_UNMANAGED && o.warning_lines == 0,
	       "GAIA_DISABLE=1 must pass through silently");

	run_case(self, path, "GAIA_DIRTY_TRACKING", "uffd", (uid_t)-1, &o);
	EXPECT(o.code == CHILD_MANAGED && o.warning_lines == 0,
	       "GAIA_DIRTY_TRACKING=uffd must manage the mapping with exact tracking");

	run_case(self, path, "GAIA_DIRTY_TRACKING", "softdirty", (uid_t)-1, &o);
	if (soft_dirty_in_kernel())
		EXPECT(o.code == CHILD_MANAGED, "soft-dirty tracking must be exact");
	else
		EXPECT(o.code == CHILD_UNMANAGED && o.warning_lines == 1 &&
			       strstr(o.stderr_text, "GAIA_DIRTY_TRACKING=softdirty"),
		       "without soft-dirty bits: one warning naming the setting, then pass-through");

	run_case(self, path, "GAIA_DIRTY_TRACKING", "bogus", (uid_t)-1, &o);
	EXPECT(o.code == CHILD_MANAGED && o.warning_lines == 0 &&
		       strstr(o.stderr_text, "GAIA_DIRTY_TRACKING=\"bogus\""),
	       "a bad value is reported once and the default used");

	bool unprivileged = geteuid() == 0 && reachable_as(65534, self);
	if (geteuid() == 0 && !unprivileged)
		printf("degrade: unprivileged case skipped: user 65534 cannot reach %s or the preloaded "
		       "library (a build directory only root can enter)\n", self);
	if (unprivileged) {
		run_case(self, path, NULL, NULL, 65534, &o);
		EXPECT(o.code == CHILD_MANAGED,
		       "an unprivileged user must be managed (UFFD_USER_MODE_ONLY)");
	}
	itest_remove_tree(dir);
	if (failures)
		return ITEST_FAIL;
	printf("degrade: disable, uffd, softdirty (%s), bad value%s: as specified\n",
	       soft_dirty_in_kernel() ? "in the kernel" : "not in this kernel: pass-through",
	       unprivileged ? ", unprivileged user" : "");
	return ITEST_PASS;
}
