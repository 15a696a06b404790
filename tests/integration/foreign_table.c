/* A shared version table the shim did not make is never trusted (DESIGN
 * §3.3; README "Security"): before a file is mapped, its table's name in
 * /dev/shm is taken by an object that is
 *   garbage     the right size, wrong magic
 *   truncated   too small to hold a header
 *   other_file  a real table, but of another file (copied)
 *   other_user  a real-looking table owned by another user (needs root)
 *   open_mode   mode 0666: others could write it (needs root: umask aside)
 *   symlink     a symbolic link to a file of ours
 * and in each case the mapping is still managed with private versions
 * that move exactly, one warning line names the table, the check and the
 * errno, and the foreign object is left exactly as it was (same bytes,
 * owner and mode, not removed).
 *
 * The parent runs each case in a child (a fresh shim), stderr captured. */
#include "itest.h"

#include <sys/mman.h>
#include <sys/wait.h>

#define PAGES 32

struct tcase {
	const char *name;
	const char *check; /* expected in the warning */
	int err;
	bool needs_root;
};

static const struct tcase cases[] = {
	{"garbage", "header check", EBADMSG, false},
	{"truncated", "size check (truncated)", EBADMSG, false},
	{"other_file", "header check", EBADMSG, false},
	{"other_user", "owner check (another user's table)", EPERM, true},
	{"open_mode", "permission check (others may open it)", EACCES, false},
	{"symlink", "shm_open", ELOOP, false},
};

static void table_path(char *out, size_t size, const struct stat *st)
{
	snprintf(out, size, "/dev/shm/gaia-v1-%u-%llx-%llx", (unsigned)geteuid(), (unsigned long long)st->st_dev,
		 (unsigned long long)st->st_ino);
}

static int make_data(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	return fd < 0 || ftruncate(fd, PAGES * ITEST_PAGE) ? -1 : fd;
}

static int write_object(const char *path, const void *bytes, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, mode);
	if (fd < 0)
		return -1;
	int rc = (write(fd, bytes, len) == (ssize_t)len && fchmod(fd, mode) == 0) ? 0 : -1;
	close(fd);
	return rc;
}

/* The child: plants the foreign object, maps the file, checks private
 * versions, checks the object was not touched. Prints nothing on success
 * but "ok"; failures on stdout. */
static int child(const struct tcase *c, const char *dir)
{
	struct itest_gaia g = itest_gaia_lookup();
	char data[PATH_MAX + 16], other[PATH_MAX + 16], table[128], other_table[128], target[PATH_MAX + 16];
	static char bytes[1 << 20];
	struct stat st, ost;
	size_t len = 0;

	snprintf(data, sizeof(data), "%s/data", dir);
	int fd = make_data(data);
	if (fd < 0 || fstat(fd, &st))
		return ITEST_FAIL;
	table_path(table, sizeof(table), &st);
	unlink(table);

	if (!strcmp(c->name, "garbage") || !strcmp(c->name, "open_mode") || !strcmp(c->name, "other_user")) {
		len = sizeof(bytes);
		for (size_t i = 0; i < len; i++)
			bytes[i] = (char)(i * 131 + 7);
		if (!strcmp(c->name, "other_user")) /* looks right, apart from its owner */
			memcpy(bytes, "GAIAVTAB", 8);
	} else if (!strcmp(c->name, "truncated")) {
		len = 64;
		memcpy(bytes, "GAIAVTAB", 8);
	} else if (!strcmp(c->name, "other_file")) {
		/* A genuine table, made by this shim for another file. */
		snprintf(other, sizeof(other), "%s/other", dir);
		int ofd = make_data(other);
		char *om = ofd < 0 ? MAP_FAILED
				   : mmap(NULL, PAGES * ITEST_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, ofd, 0);
		if (om == MAP_FAILED || fstat(ofd, &ost))
			return ITEST_FAIL;
		table_path(other_table, sizeof(other_table), &ost);
		int tfd = open(other_table, O_RDONLY);
		ssize_t n = tfd < 0 ? -1 : read(tfd, bytes, sizeof(bytes));
		if (n <= 0) {
			printf("cannot read %s: %s\n", other_table, strerror(errno));
			return ITEST_FAIL;
		}
		len = (size_t)n;
		close(tfd);
	}
	if (!strcmp(c->name, "symlink")) {
		snprintf(target, sizeof(target), "%s/target", dir);
		if (write_object(target, "not a table", 11, 0600) || symlink(target, table)) {
			printf("cannot plant the link: %s\n", strerror(errno));
			return ITEST_FAIL;
		}
	} else if (write_object(table, bytes, len, !strcmp(c->name, "open_mode") ? 0666 : 0600)) {
		printf("cannot plant %s: %s\n", table, strerror(errno));
		return ITEST_FAIL;
	}
	if (!strcmp(c->name, "other_user") && chown(table, 65534, 65534)) {
		printf("chown: %s\n", strerror(errno));
		return ITEST_FAIL;
	}
	struct stat before;
	if (lstat(table, &before))
		return ITEST_FAIL;

	char *map = mmap(NULL, PAGES * ITEST_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	uint32_t v0[PAGES], v1[PAGES];
	if (map == MAP_FAILED || !g.mversion || g.mversion(map, PAGES * ITEST_PAGE, v0) || !v0[0]) {
		printf("not managed\n");
		return ITEST_FAIL;
	}
	map[7 * ITEST_PAGE] = 1;
	if (g.mrelease(map, PAGES * ITEST_PAGE, GAIA_CPU) || g.mversion(map, PAGES * ITEST_PAGE, v1)) {
		printf("release: %s\n", strerror(errno));
		return ITEST_FAIL;
	}
	for (int p = 0; p < PAGES; p++)
		if ((v1[p] != v0[p]) != (p == 7)) {
			printf("page %d: version %u -> %u\n", p, v0[p], v1[p]);
			return ITEST_FAIL;
		}
	munmap(map, PAGES * ITEST_PAGE);

	/* Untouched: same object, bytes, owner, mode. */
	struct stat after;
	if (lstat(table, &after) || after.st_ino != before.st_ino || after.st_uid != before.st_uid ||
	    after.st_mode != before.st_mode || after.st_size != before.st_size ||
	    after.st_mtim.tv_sec != before.st_mtim.tv_sec || after.st_mtim.tv_nsec != before.st_mtim.tv_nsec) {
		printf("the foreign object was changed or removed\n");
		return ITEST_FAIL;
	}
	if (len && !S_ISLNK(after.st_mode)) {
		static char now[1 << 20];
		int tfd = open(table, O_RDONLY);
		ssize_t n = tfd < 0 ? -1 : read(tfd, now, sizeof(now));
		if (tfd >= 0)
			close(tfd);
		if (n != (ssize_t)len || memcmp(now, bytes, len) != 0) {
			printf("the foreign object's bytes changed\n");
			return ITEST_FAIL;
		}
	}
	unlink(table);
	printf("ok\n");
	return ITEST_PASS;
}

int main(int argc, char **argv)
{
	char dir[PATH_MAX];
	int failures = 0;

	if (argc == 4 && !strcmp(argv[1], "child")) {
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
			if (!strcmp(cases[i].name, argv[2]))
				return child(&cases[i], argv[3]);
		return ITEST_FAIL;
	}
	if (!dlsym(RTLD_DEFAULT, "gaia_mversion")) {
		printf("foreign_table: SKIP: not running under libgaia.so\n");
		return ITEST_SKIP;
	}
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct tcase *c = &cases[i];
		if (c->needs_root && geteuid() != 0) {
			printf("foreign_table %s: skipped (needs root)\n", c->name);
			continue;
		}
		if (itest_tempdir(dir, "foreign_table"))
			return ITEST_FAIL;
		int out[2], err[2];
		if (pipe(out) || pipe(err))
			return ITEST_FAIL;
		pid_t pid = fork();
		if (pid == 0) {
			dup2(out[1], 1), dup2(err[1], 2);
			close(out[0]), close(err[0]), close(out[1]), close(err[1]);
			execl(argv[0], argv[0], "child", c->name, dir, (char *)NULL);
			_exit(127);
		}
		close(out[1]), close(err[1]);
		char o[4096] = "", e[8192] = "";
		size_t no = 0, ne = 0;
		ssize_t n;
		while ((n = read(out[0], o + no, sizeof(o) - 1 - no)) > 0)
			no += (size_t)n;
		while ((n = read(err[0], e + ne, sizeof(e) - 1 - ne)) > 0)
			ne += (size_t)n;
		close(out[0]), close(err[0]);
		int status;
		waitpid(pid, &status, 0);
		char want[256];
		snprintf(want, sizeof(want), ": %s: %s; versions of this file", c->check, strerror(c->err));
		int lines = 0;
		for (size_t j = 0; j < ne; j++)
			lines += e[j] == '\n';
		bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && lines == 1 &&
			  strstr(e, "shared version table /dev/shm/gaia-v1-") && strstr(e, want);
		printf("foreign_table %s: %s\n", c->name, ok ? "ok" : "FAILED");
		if (!ok) {
			printf("  expected one line containing \"%s\"\n  child stdout: %s  child stderr: %s\n", want, o,
			       e);
			failures++;
		}
		itest_remove_tree(dir);
	}
	return failures ? ITEST_FAIL : ITEST_PASS;
}
