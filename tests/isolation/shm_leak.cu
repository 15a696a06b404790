/* shm_leak — what a program expects: using a file leaves nothing behind in
 * /dev/shm once the last process that used it has exited normally, however
 * earlier users ended; and a new file is read as itself even when it gets
 * the inode number of a deleted one.
 *
 * This program is a driver; it is not run under the shim itself
 * (ISOLATION_PRELOAD names what to preload into the processes it starts,
 * which are this program again):
 *   user PATH END READY GO  maps PATH (shared, writable), writes its first
 *                           page, launches a kernel on it, synchronizes,
 *                           checks, says so on READY, waits for a byte on
 *                           GO, then ends: exit0 (_exit(0)), abort, kill
 *                           (waits for the driver's kill -9) or normal
 *                           (munmap, close, return from main);
 *   verify PATH SEED READY GO  maps PATH, whose words are word(SEED, i):
 *                           the CPU (mapping and pread()) and a kernel must
 *                           see exactly those words; says so on READY,
 *                           waits on GO, exits normally.
 * Cases, each in a fresh temp dir:
 *   exit0, abort, kill9     a first user ends that way; a second user ends
 *                           normally; then no gaia-v1-* object that either
 *                           held (found in its /proc/PID/maps or fd while it
 *                           waited on GO: they belong to the one file it
 *                           uses) may remain in /dev/shm;
 *   inode_reuse             a first user is killed (kill -9); the file is
 *                           deleted and new files are created in the same
 *                           directory until one gets the same inode number
 *                           (skip, 77, if none does); filled with other
 *                           words of the same size, given the old file's
 *                           times (as tar, rsync or cp -p would), "verify"
 *                           must see its words, and nothing may remain in
 *                           /dev/shm after it.
 * With no gaia-v1-* object held by the first user there is nothing to
 * check: skip (77). An object the first user holds that was there before
 * it started is a leftover of an earlier process (whose file had the same
 * inode number): it is reported, and must be gone at the end like any.
 */
#include <dirent.h>
#include <poll.h>

#include <set>
#include <string>

#include "isolation.h"

#define FILE_BYTES (64u << 10)
#define WORDS (FILE_BYTES / 4)

__global__ void add_one(unsigned *w, unsigned long long n)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < n; i += (unsigned long long)gridDim.x * blockDim.x)
		w[i] += 1;
}
SIMGPU_KERNEL(add_one);

/* out[i] = in[i] * 2 + 1 for the first half; out is the second half. */
__global__ void double_half(unsigned *w, unsigned long long half)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < half; i += (unsigned long long)gridDim.x * blockDim.x)
		w[half + i] = w[i] * 2 + 1;
}
SIMGPU_KERNEL(double_half);

static unsigned word(unsigned seed, size_t i)
{
	return (unsigned)(i * 2654435761u) ^ (seed * 0x9e3779b9u);
}

static void write_words(const char *path, unsigned seed, int create)
{
	int fd = open(path, O_RDWR | (create ? O_CREAT | O_TRUNC : 0), 0600);
	CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
	unsigned *buf = (unsigned *)malloc(FILE_BYTES);
	for (size_t i = 0; i < WORDS; i++)
		buf[i] = word(seed, i);
	CHECK(pwrite(fd, buf, FILE_BYTES, 0) == (ssize_t)FILE_BYTES, "pwrite %s: %s", path, strerror(errno));
	free(buf);
	close(fd);
}

/* ---- the processes under the shim */

static int user(const char *path, const char *end, int ready, int go)
{
	watchdog(30);
	step = "user: map, write, launch";
	CUDA_OK(cudaSetDevice(0));
	int fd = open(path, O_RDWR);
	CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
	unsigned *m = (unsigned *)map_file(fd, FILE_BYTES);
	for (size_t i = 0; i < PAGE / 4; i++)
		m[i] = 1000 + (unsigned)i;
	SIMGPU_LAUNCH(add_one, 8, 128, 0, 0)(m, (unsigned long long)WORDS);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	CHECK(m[5] == 1006, "user: word 5 after the kernel is %u, want 1006", m[5]);
	CHECK(write(ready, "R", 1) == 1, "write to the driver: %s", strerror(errno));
	char c;
	step = "user: waiting for the driver";
	(void)!read(go, &c, 1);
	if (strcmp(end, "exit0") == 0)
		_exit(0);
	if (strcmp(end, "abort") == 0)
		abort();
	if (strcmp(end, "kill") == 0)
		for (;;)
			pause();
	munmap(m, FILE_BYTES);
	close(fd);
	return 0;
}

static int verify(const char *path, unsigned seed, int ready, int go)
{
	watchdog(30);
	step = "verify: the new file's own words";
	CUDA_OK(cudaSetDevice(0));
	int fd = open(path, O_RDWR);
	CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
	unsigned *m = (unsigned *)map_file(fd, FILE_BYTES);
	unsigned *buf = (unsigned *)malloc(FILE_BYTES);
	pread_all(fd, buf, FILE_BYTES, 0);
	for (size_t i = 0; i < WORDS; i++) {
		CHECK(m[i] == word(seed, i), "the new file's word %zu through the mapping is %#x, want %#x (its own)",
		      i, m[i], word(seed, i));
		CHECK(buf[i] == word(seed, i), "the new file's word %zu read with pread() is %#x, want %#x (its own)",
		      i, buf[i], word(seed, i));
	}
	step = "verify: a kernel reads the new file";
	SIMGPU_LAUNCH(double_half, 8, 128, 0, 0)(m, (unsigned long long)(WORDS / 2));
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	pread_all(fd, buf, FILE_BYTES, 0);
	for (size_t i = 0; i < WORDS / 2; i++) {
		unsigned want = word(seed, i) * 2 + 1;
		CHECK(m[WORDS / 2 + i] == want, "the kernel read word %zu of the new file as something else: it "
						"wrote %#x, want %#x (2 * %#x + 1)", i, m[WORDS / 2 + i], want,
		      word(seed, i));
		CHECK(buf[WORDS / 2 + i] == want, "the kernel's result for word %zu read with pread() is %#x, want %#x",
		      i, buf[WORDS / 2 + i], want);
	}
	free(buf);
	printf("verify: the new file reads as its own words, on the CPU and in a kernel\n");
	fflush(stdout);
	CHECK(write(ready, "R", 1) == 1, "write to the driver: %s", strerror(errno));
	char c;
	step = "verify: waiting for the driver";
	(void)!read(go, &c, 1);
	munmap(m, FILE_BYTES);
	close(fd);
	return 0;
}

/* ---- the driver */

typedef std::set<std::string> names;

static names shm_objects(void)
{
	names s;
	DIR *d = opendir("/dev/shm");
	CHECK(d != NULL, "opendir /dev/shm: %s", strerror(errno));
	while (struct dirent *e = readdir(d))
		if (strncmp(e->d_name, "gaia-v1-", 8) == 0)
			s.insert(e->d_name);
	closedir(d);
	return s;
}

/* The gaia-v1-* objects process `pid` maps or holds open. */
static names held_by(pid_t pid)
{
	names s;
	char p[64], line[4096];
	snprintf(p, sizeof(p), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(p, "r");
	CHECK(f != NULL, "fopen %s: %s", p, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		const char *n = strstr(line, "/dev/shm/gaia-v1-");
		if (n)
			s.insert(std::string(n + 9, strcspn(n + 9, " \n")));
	}
	fclose(f);
	snprintf(p, sizeof(p), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(p);
	CHECK(d != NULL, "opendir %s: %s", p, strerror(errno));
	while (struct dirent *e = readdir(d)) {
		char link[512], target[512];
		snprintf(link, sizeof(link), "%s/%s", p, e->d_name);
		ssize_t l = readlink(link, target, sizeof(target) - 1);
		if (l <= 0)
			continue;
		target[l] = 0;
		if (strncmp(target, "/dev/shm/gaia-v1-", 17) == 0)
			s.insert(std::string(target + 9, strcspn(target + 9, " ")));
	}
	closedir(d);
	return s;
}

static std::string join(const names &s)
{
	std::string r;
	for (const std::string &n : s)
		r += (r.empty() ? "" : " ") + n;
	return r.empty() ? "(none)" : r;
}

/* Starts this program as "MODE PATH ARG READY GO"; returns once it said
 * it is ready, with the gaia-v1-* objects it holds then. */
struct running {
	pid_t pid;
	int go;
	names held;
};

static running start(const char *mode, const char *path, const char *arg)
{
	int ready[2], go[2];
	CHECK(pipe2(ready, O_CLOEXEC) == 0 && pipe2(go, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
	fcntl(ready[1], F_SETFD, 0); /* the child's ends survive exec */
	fcntl(go[0], F_SETFD, 0);
	char rs[16], gs[16];
	snprintf(rs, sizeof(rs), "%d", ready[1]);
	snprintf(gs, sizeof(gs), "%d", go[0]);
	const char *args[] = { mode, path, arg, rs, gs, NULL };
	running r;
	r.pid = run_self(args);
	close(ready[1]);
	close(go[0]);
	r.go = go[1];
	struct pollfd p = { ready[0], POLLIN, 0 };
	char c = 0;
	int ok = poll(&p, 1, 30000) == 1 && read(ready[0], &c, 1) == 1 && c == 'R';
	close(ready[0]);
	r.held = ok ? held_by(r.pid) : names();
	if (!ok) {
		close(r.go);
		r.go = -1;
	}
	return r;
}

static running start_user(const char *path, const char *end)
{
	running r = start("user", path, end);
	if (r.go < 0) {
		char d[100];
		int status = wait_child(r.pid, 5, "a user that did not get ready");
		CHECK(0, "the user of %s (end: %s) did not map, launch and check: %s", path, end,
		      describe_status(status, d, sizeof(d)));
	}
	return r;
}

static int finish_user(running &r, const char *end)
{
	if (strcmp(end, "kill") == 0)
		kill(r.pid, SIGKILL);
	else
		(void)!write(r.go, "G", 1);
	close(r.go);
	return wait_child(r.pid, 30, "a user of the file");
}

static void expect_end(int status, const char *end)
{
	char d[100];
	describe_status(status, d, sizeof(d));
	if (strcmp(end, "exit0") == 0 || strcmp(end, "normal") == 0)
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a user meant to exit 0 %s", d);
	else if (strcmp(end, "abort") == 0)
		CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "a user meant to abort() %s", d);
	else
		CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "a user killed with -9 %s", d);
}

static names remaining(const names &held)
{
	names now = shm_objects(), left;
	for (const std::string &n : held)
		if (now.count(n))
			left.insert(n);
	return left;
}

static char current_dir[256];

/* The driver's temp dir goes however the driver ends. */
static void remove_current_dir(void)
{
	if (!current_dir[0])
		return;
	DIR *d = opendir(current_dir);
	while (struct dirent *e = d ? readdir(d) : NULL) {
		char p[600];
		snprintf(p, sizeof(p), "%s/%s", current_dir, e->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(current_dir);
	current_dir[0] = 0;
}

static void make_dir(char *dir, size_t len)
{
	remove_current_dir();
	snprintf(dir, len, "%s/gaia-shm-leak-XXXXXX", temp_dir());
	CHECK(mkdtemp(dir) != NULL, "mkdtemp %s: %s", dir, strerror(errno));
	snprintf(current_dir, sizeof(current_dir), "%s", dir);
}

static int failures;

static void leak_case(const char *end)
{
	char dir[256], path[300];
	make_dir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/data", dir);
	write_words(path, 1, 1);
	step = "first user";
	names before = shm_objects();
	running first = start_user(path, end);
	names held = first.held, stale;
	for (const std::string &n : held)
		if (before.count(n))
			stale.insert(n);
	if (!stale.empty())
		printf("%s: %s existed before the first user of the new file %s (left by an earlier process)\n", end,
		       join(stale).c_str(), path);
	if (held.empty()) {
		finish_user(first, "kill");
		printf("SKIP: the first user of %s holds no gaia-v1-* object in /dev/shm: nothing to check\n", path);
		exit(77);
	}
	expect_end(finish_user(first, end), end);
	names after_first = remaining(held);
	step = "second user";
	running second = start_user(path, "normal");
	held.insert(second.held.begin(), second.held.end());
	expect_end(finish_user(second, "normal"), "normal");
	names left = remaining(held);
	unlink(path);
	rmdir(dir);
	printf("%s: the users held %s; after the first ended %s remained; after the second: %s\n", end,
	       join(held).c_str(), join(after_first).c_str(), join(left).c_str());
	if (!left.empty()) {
		fprintf(stderr, "FAIL %s: after a first user ended by %s and a second exited normally, %s still in "
				"/dev/shm\n", end, end, join(left).c_str());
		failures++;
	}
	fflush(stdout);
}

static void inode_case(void)
{
	char dir[256], path[300];
	make_dir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/data", dir);
	write_words(path, 1, 1);
	struct stat st;
	CHECK(stat(path, &st) == 0, "stat: %s", strerror(errno));
	step = "a user killed with -9";
	running first = start_user(path, "kill");
	names held = first.held;
	expect_end(finish_user(first, "kill"), "kill");
	struct stat old;
	CHECK(stat(path, &old) == 0, "stat: %s", strerror(errno));
	CHECK(unlink(path) == 0, "unlink: %s", strerror(errno));

	step = "a new file with the same inode number";
	char newpath[300] = "";
	int tries = 0;
	for (; tries < 500; tries++) {
		char p[300];
		snprintf(p, sizeof(p), "%s/new%d", dir, tries);
		int fd = open(p, O_RDWR | O_CREAT | O_EXCL, 0600);
		CHECK(fd >= 0, "create %s: %s", p, strerror(errno));
		struct stat ns;
		CHECK(fstat(fd, &ns) == 0, "fstat: %s", strerror(errno));
		close(fd);
		if (ns.st_ino == st.st_ino && ns.st_dev == st.st_dev) {
			snprintf(newpath, sizeof(newpath), "%s", p);
			break;
		}
	}
	if (!newpath[0]) {
		printf("SKIP: %d new files in %s never got inode %llu again\n", tries, dir,
		       (unsigned long long)st.st_ino);
		exit(77);
	}
	write_words(newpath, 2, 0);
	/* As tar, rsync or cp -p leave a replaced file: the old one's size
	 * and times. */
	struct timespec times[2] = { old.st_atim, old.st_mtim };
	CHECK(utimensat(AT_FDCWD, newpath, times, 0) == 0, "utimensat: %s", strerror(errno));
	step = "verify the new file";
	running v = start("verify", newpath, "2");
	held.insert(v.held.begin(), v.held.end());
	if (v.go >= 0) {
		(void)!write(v.go, "G", 1);
		close(v.go);
	}
	int status = wait_child(v.pid, 30, "verify");
	char d[100];
	if (v.go < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "FAIL inode_reuse: a new file with the inode number (%llu) of one whose user was "
				"killed: its reader %s\n", (unsigned long long)st.st_ino,
			describe_status(status, d, sizeof(d)));
		failures++;
	}
	names left = remaining(held);
	printf("inode_reuse: inode %llu again after %d files; the killed user held %s; after the new file's "
	       "reader: %s\n", (unsigned long long)st.st_ino, tries + 1, join(held).c_str(), join(left).c_str());
	if (!left.empty()) {
		fprintf(stderr, "FAIL inode_reuse: after the new file's user exited normally, %s still in /dev/shm\n",
			join(left).c_str());
		failures++;
	}
	for (int i = 0; i <= tries; i++) {
		char p[300];
		snprintf(p, sizeof(p), "%s/new%d", dir, i);
		unlink(p);
	}
	rmdir(dir);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc > 5 && strcmp(argv[1], "user") == 0)
		return user(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]));
	if (argc > 5 && strcmp(argv[1], "verify") == 0)
		return verify(argv[2], (unsigned)atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));

	watchdog(150);
	atexit(remove_current_dir);
	const char *preload = getenv("ISOLATION_PRELOAD");
	if (preload && *preload)
		setenv("LD_PRELOAD", preload, 1);
	static const char *const ends[] = { "exit0", "abort", "kill" };
	for (const char *e : ends)
		leak_case(e);
	inode_case();
	CHECK(failures == 0, "%d of 4 cases left objects in /dev/shm or read stale data", failures);
	printf("ok shm_leak\n");
	return 0;
}
