/* daemon_fork — what a program expects: after it used CUDA on a mapped
 * file, daemon() and fork() give a child that sees the file's bytes as the
 * parent left them, whose writes through the mapping reach the file
 * (msync, munmap, pread, mmap again), that ends when it exits, and that
 * prints nothing it did not print itself; and a parent whose child exits
 * at once keeps working with the GPU.
 *
 * The first process is a watcher that never uses CUDA. For each variant it
 * forks a worker (stderr to a file, a pipe for the verdict) and waits for
 * the verdict and for the pipe's end of file (every process holding it has
 * ended), with a deadline. The worker: CUDA init, maps a file, a kernel
 * writes it, cudaDeviceSynchronize, the CPU checks; then
 *   daemon     daemon(1, 1) (glibc forks internally, not through fork());
 *              the daemonised grandchild does the child steps below;
 *   fork       fork(); the child does the child steps, the worker waits
 *              for it and returns from main;
 *   fork_exit  fork(); the child _exit(0)s at once; the worker launches
 *              20 more kernels on the mapping, checking each (mapping and
 *              pread()), and returns from main;
 *   vfork      vfork(); the child opens the file, pwrite()s new values into
 *              its first 16 KiB and _exit(0)s, as a spawning library's
 *              child may before exec; the worker sees them in its mapping,
 *              and a kernel launched then sees them too.
 * Child steps: the kernel's values must be in the mapping; write new ones
 * through it, msync(MS_SYNC), munmap; open the file again and pread(): the
 * new values; mmap it again: the new values; report, exit(0).
 * Any output on the worker's stderr (its children's included) fails.
 */
#include <poll.h>
#include <stdarg.h>

#include "isolation.h"

#define WORDS (256u << 10) /* 1 MiB */
#define BYTES (WORDS * 4)

__global__ void set_words(unsigned *w, unsigned long long n, unsigned mul, unsigned add)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < n; i += (unsigned long long)gridDim.x * blockDim.x)
		w[i] = (unsigned)i * mul + add;
}
SIMGPU_KERNEL(set_words);

__global__ void add_words(unsigned *w, unsigned long long n, unsigned v)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < n; i += (unsigned long long)gridDim.x * blockDim.x)
		w[i] += v;
}
SIMGPU_KERNEL(add_words);

static int verdict_fd;
static char path[256];

static void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	(void)!write(verdict_fd, line, (size_t)n);
}

static unsigned kernel_value(size_t i) { return (unsigned)i * 3 + 1; }
static unsigned child_value(size_t i) { return (unsigned)i ^ 0x5a5a5a5au; }

static void check_words(const char *what, const unsigned *w, unsigned (*want)(size_t), unsigned plus)
{
	for (size_t i = 0; i < WORDS; i++)
		if (w[i] != want(i) + plus) {
			report("FAIL %s: word %zu is %#x, want %#x", what, i, w[i], want(i) + plus);
			exit(1);
		}
}

/* In the forked or daemonised child. */
static void child_steps(const char *who, unsigned *m)
{
	/* A backstop only: the watcher's 40 s deadline (it kills what is left)
	 * is what turns a hang here, or in exit, into a failure. */
	alarm(100);
	report("PID %d", (int)getpid());
	char what[200];
	snprintf(what, sizeof(what), "%s: the kernel's values read through the inherited mapping", who);
	check_words(what, m, kernel_value, 0);
	for (size_t i = 0; i < WORDS; i++)
		m[i] = child_value(i);
	if (msync(m, BYTES, MS_SYNC) != 0) {
		report("FAIL %s: msync: %s", who, strerror(errno));
		exit(1);
	}
	if (munmap(m, BYTES) != 0) {
		report("FAIL %s: munmap: %s", who, strerror(errno));
		exit(1);
	}
	int fd = open(path, O_RDWR);
	if (fd < 0) {
		report("FAIL %s: open %s again: %s", who, path, strerror(errno));
		exit(1);
	}
	unsigned *buf = (unsigned *)malloc(BYTES);
	ssize_t r = pread(fd, buf, BYTES, 0);
	if (r != (ssize_t)BYTES) {
		report("FAIL %s: pread of %u bytes returned %zd (%s)", who, BYTES, r, r < 0 ? strerror(errno) : "short");
		exit(1);
	}
	snprintf(what, sizeof(what), "%s: the child's writes (through the mapping, msync, munmap) read with pread()", who);
	check_words(what, buf, child_value, 0);
	free(buf);
	unsigned *again = (unsigned *)mmap(NULL, BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (again == MAP_FAILED) {
		report("FAIL %s: mmap again: %s", who, strerror(errno));
		exit(1);
	}
	snprintf(what, sizeof(what), "%s: the child's writes read through a new mapping", who);
	check_words(what, again, child_value, 0);
	munmap(again, BYTES);
	close(fd);
	report("OK %s", who);
	exit(0);
}

#define VFORK_WORDS 4096u /* 16 KiB */

static int vfork_steps(unsigned *m)
{
	static unsigned words[VFORK_WORDS];
	for (size_t i = 0; i < VFORK_WORDS; i++)
		words[i] = child_value(i);
	/* In the child only what the parent's memory can take: it shares it. */
	volatile int child_failed = 0;
	pid_t pid = vfork();
	CHECK(pid >= 0, "vfork: %s", strerror(errno));
	if (pid == 0) {
		int wfd = open(path, O_RDWR);
		if (wfd < 0 || pwrite(wfd, words, sizeof(words), 0) != (ssize_t)sizeof(words))
			child_failed = 1;
		if (wfd >= 0)
			close(wfd);
		_exit(0);
	}
	int status = wait_child(pid, 25, "the vfork child");
	char d[100];
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || child_failed) {
		report("FAIL worker: the vfork child %s%s", describe_status(status, d, sizeof(d)),
		       child_failed ? ", its open or pwrite failed" : "");
		return 1;
	}
	for (size_t i = 0; i < WORDS; i++) {
		unsigned want = i < VFORK_WORDS ? child_value(i) : kernel_value(i);
		if (m[i] != want) {
			report("FAIL worker: after the vfork child's pwrite, word %zu of the mapping is %#x, want %#x",
			       i, m[i], want);
			return 1;
		}
	}
	SIMGPU_LAUNCH(add_words, 16, 128, 0, 0)(m, (unsigned long long)WORDS, 1u);
	cudaError_t e = cudaDeviceSynchronize();
	if (e != cudaSuccess) {
		report("FAIL worker: the launch after the vfork child: cudaDeviceSynchronize returned %s",
		       cudaGetErrorName(e));
		return 1;
	}
	for (size_t i = 0; i < WORDS; i++) {
		unsigned want = (i < VFORK_WORDS ? child_value(i) : kernel_value(i)) + 1;
		if (m[i] != want) {
			report("FAIL worker: the kernel after the vfork child's pwrite left word %zu %#x, want %#x "
			       "(it did not see the child's bytes)", i, m[i], want);
			return 1;
		}
	}
	report("OK worker after a vfork child's pwrite");
	return 0;
}

static int worker(const char *variant)
{
	alarm(30);
	report("PID %d", (int)getpid());
	CUDA_OK(cudaSetDevice(0));
	int fd = open(path, O_RDWR);
	CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
	unsigned *m = (unsigned *)map_file(fd, BYTES);
	close(fd);
	for (size_t i = 0; i < WORDS; i++)
		m[i] = 7;
	SIMGPU_LAUNCH(set_words, 16, 128, 0, 0)(m, (unsigned long long)WORDS, 3u, 1u);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	check_words("worker: the kernel's values after cudaDeviceSynchronize", m, kernel_value, 0);
	fflush(NULL);

	if (strcmp(variant, "daemon") == 0) {
		CHECK(daemon(1, 1) == 0, "daemon: %s", strerror(errno));
		child_steps("daemonised grandchild", m);
	}
	if (strcmp(variant, "vfork") == 0)
		return vfork_steps(m);
	pid_t pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		if (strcmp(variant, "fork_exit") == 0)
			_exit(0);
		child_steps("forked child", m);
	}
	int status = wait_child(pid, 25, "the forked child");
	char d[100];
	if (strcmp(variant, "fork") == 0) {
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			report("FAIL worker: the forked child %s", describe_status(status, d, sizeof(d)));
		return 0;
	}
	/* fork_exit: the worker goes on with the GPU. */
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		report("FAIL worker: the child that called _exit(0) %s", describe_status(status, d, sizeof(d)));
	unsigned *buf = (unsigned *)malloc(BYTES);
	for (unsigned k = 1; k <= 20; k++) {
		SIMGPU_LAUNCH(add_words, 16, 128, 0, 0)(m, (unsigned long long)WORDS, 1u);
		cudaError_t e = cudaDeviceSynchronize();
		if (e != cudaSuccess) {
			report("FAIL worker: launch %u after the child's _exit: cudaDeviceSynchronize returned %s", k,
			       cudaGetErrorName(e));
			return 1;
		}
		char what[160];
		snprintf(what, sizeof(what), "worker: launch %u after the child's _exit, through the mapping", k);
		check_words(what, m, kernel_value, k);
		int rfd = open(path, O_RDONLY);
		CHECK(rfd >= 0, "open %s: %s", path, strerror(errno));
		pread_all(rfd, buf, BYTES, 0);
		close(rfd);
		snprintf(what, sizeof(what), "worker: launch %u after the child's _exit, read with pread()", k);
		check_words(what, buf, kernel_value, k);
	}
	free(buf);
	report("OK worker after fork and _exit");
	return 0;
}

/* Reads the verdict pipe until end of file or the deadline. */
static int read_verdict(int fd, char *out, size_t len, double seconds)
{
	size_t n = 0;
	double end = now_s() + seconds;
	for (;;) {
		int ms = (int)((end - now_s()) * 1000);
		if (ms <= 0)
			break;
		struct pollfd p = { fd, POLLIN, 0 };
		if (poll(&p, 1, ms) <= 0)
			continue;
		ssize_t r = read(fd, out + n, len - 1 - n);
		if (r <= 0) {
			out[n] = 0;
			return r == 0; /* 1: end of file */
		}
		n += (size_t)r;
		if (n >= len - 1)
			break;
	}
	out[n] = 0;
	return 0;
}

static int run_variant(const char *variant)
{
	char errpath[256];
	snprintf(errpath, sizeof(errpath), "%s/gaia-isolation-stderr-XXXXXX", temp_dir());
	int errfd = mkstemp(errpath);
	CHECK(errfd >= 0, "mkstemp: %s", strerror(errno));
	unlink(errpath);
	close(make_file_with(BYTES, NULL, path)); /* the worker maps it; the watcher removes it */
	int p[2];
	CHECK(pipe(p) == 0, "pipe: %s", strerror(errno));
	fflush(NULL);
	pid_t pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		close(p[0]);
		dup2(errfd, 2);
		close(errfd);
		verdict_fd = p[1];
		signal(SIGALRM, SIG_DFL);
		exit(worker(variant));
	}
	close(p[1]);
	char verdict[8192];
	int eof = read_verdict(p[0], verdict, sizeof(verdict), 40);
	close(p[0]);
	int status = wait_child(pid, 5, "the worker");
	unlink(path);

	int failed = 0;
	char d[100];
	const char *ok = strstr(verdict, "OK ");
	if (!ok || strstr(verdict, "FAIL")) {
		fprintf(stderr, "FAIL %s: no OK verdict; what the processes reported:\n%s", variant, verdict);
		failed = 1;
	}
	if (!eof) {
		fprintf(stderr, "FAIL %s: the verdict pipe was still open 40 s after the start: a process that "
				"holds it has not ended:", variant);
		for (const char *l = verdict; (l = strstr(l, "PID ")); l += 4) {
			int q = atoi(l + 4);
			if (q > 0 && kill(q, 0) == 0) {
				fprintf(stderr, " %d (alive, killed now)", q);
				kill(q, SIGKILL);
			}
		}
		fprintf(stderr, "\n");
		failed = 1;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "FAIL %s: the worker %s\n", variant, describe_status(status, d, sizeof(d)));
		failed = 1;
	}
	char err[4096];
	ssize_t en = pread(errfd, err, sizeof(err) - 1, 0);
	close(errfd);
	if (en > 0) {
		err[en] = 0;
		fprintf(stderr, "FAIL %s: the worker and its children printed on stderr:\n%s", variant, err);
		failed = 1;
	}
	if (!failed)
		printf("%s: %s", variant, ok);
	fflush(stdout);
	return failed;
}

int main(int argc, char **argv)
{
	watchdog(150);
	static const char *const all[] = { "daemon", "fork", "fork_exit", "vfork" };
	int failures = 0, runs = 0;
	for (const char *v : all) {
		if (argc > 1 && strcmp(argv[1], v) != 0)
			continue;
		step = v;
		failures += run_variant(v);
		runs++;
	}
	CHECK(runs > 0, "unknown variant %s (daemon, fork, fork_exit, vfork)", argv[1]);
	step = "end";
	CHECK(failures == 0, "%d of %d variants failed", failures, runs);
	printf("ok daemon_fork\n");
	return 0;
}
