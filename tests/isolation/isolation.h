/* isolation.h — what the isolation programs share, on top of
 * tests/programs/programs.h (CHECK, CUDA_OK, the watchdog, temp files):
 * running a copy of the program itself as a child, waiting for a child
 * with a deadline, and saying how a child ended.
 *
 * The isolation programs check that a program under libgaia.so still gets
 * from Linux what Linux gives it without the shim: /proc reads, write()
 * latency, signal disposition, fork/daemon, memory, /dev/shm, stderr.
 * Each one is an ordinary program; none knows about the shim.
 */
#ifndef GAIA_TEST_ISOLATION_H
#define GAIA_TEST_ISOLATION_H

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "programs.h"

static inline double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline const char *temp_dir(void)
{
	const char *d = getenv("TMPDIR");
	return d && *d ? d : "/tmp";
}

/* "exited 3", "killed by signal 11 (Segmentation fault)", ... */
static inline const char *describe_status(int status, char *buf, size_t len)
{
	if (WIFEXITED(status))
		snprintf(buf, len, "exited %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "status %#x", status);
	return buf;
}

/* waitpid with a deadline: a child that has not ended after `seconds` is
 * killed (SIGKILL) and the test fails, naming `what`. Returns the status. */
static inline int wait_child(pid_t pid, double seconds, const char *what)
{
	double end = now_s() + seconds;
	for (;;) {
		int status;
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			return status;
		CHECK(r == 0, "waitpid(%d) for %s: %s", (int)pid, what, strerror(errno));
		if (now_s() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			CHECK(0, "%s (pid %d) did not end within %.0f s: hung (killed it)", what, (int)pid, seconds);
		}
		usleep(2000);
	}
}

/* Runs this program again (/proc/self/exe) as a child with the given
 * arguments (argv[1] on, NULL-terminated); returns its pid. */
static inline pid_t run_self(const char *const *args)
{
	char exe[4096];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	CHECK(len > 0, "readlink /proc/self/exe: %s", strerror(errno));
	exe[len] = 0;
	const char *argv[16];
	int n = 0;
	argv[n++] = exe;
	for (; args[n - 1] && n < 15; n++)
		argv[n] = args[n - 1];
	argv[n] = NULL;
	fflush(NULL);
	pid_t pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		execv(exe, (char *const *)argv);
		fprintf(stderr, "execv %s: %s\n", exe, strerror(errno));
		_exit(127);
	}
	return pid;
}

/* No core files from children that are meant to die by a signal. */
static inline void no_core_dumps(void)
{
	struct rlimit rl = { 0, 0 };
	setrlimit(RLIMIT_CORE, &rl);
}

/* The worst latency of a call made over and over by one thread. A call
 * during which the thread was preempted (its involuntary context switches
 * grew) measures the scheduler of a loaded machine, not the call: those are
 * counted and kept apart. Use: latency_begin, the call, latency_end. */
struct latency {
	double worst_s, worst_at_s; /* worst call not preempted, and when it began */
	double worst_preempted_s;
	unsigned long calls, preempted;
	double t0;
	long iv0;
};

static inline long involuntary_switches(void)
{
	struct rusage ru;
	getrusage(RUSAGE_THREAD, &ru);
	return ru.ru_nivcsw;
}

static inline void latency_begin(struct latency *l)
{
	l->iv0 = involuntary_switches();
	l->t0 = now_s();
}

static inline void latency_end(struct latency *l)
{
	double dt = now_s() - l->t0;
	long iv1 = involuntary_switches();
	l->calls++;
	if (iv1 != l->iv0) {
		l->preempted++;
		if (dt > l->worst_preempted_s)
			l->worst_preempted_s = dt;
	} else if (dt > l->worst_s) {
		l->worst_s = dt;
		l->worst_at_s = l->t0;
	}
}

/* The bound on one write's latency: ISOLATION_MAX_WRITE_MS, else `ms`. */
static inline double max_write_ms(double ms)
{
	const char *e = getenv("ISOLATION_MAX_WRITE_MS");
	return e && *e ? atof(e) : ms;
}

/* A thread that pwrite()s 4 KiB pages, one after another, into a mapped
 * file until told to stop, checking that the mapping shows each, and
 * keeping the worst latency (as struct latency does). Start it with
 * pthread_create(..., page_writer_run, &w) on a filled-in struct. */
struct page_writer {
	int fd;
	const unsigned char *map; /* the file's mapping */
	size_t bytes;             /* of the file: its pages are written in turn */
	unsigned pause_us;        /* between two writes (0: 200) */
	int stop;                 /* atomic: set to end the thread */
	struct latency lat;
};

static inline void *page_writer_run(void *arg)
{
	struct page_writer *w = (struct page_writer *)arg;
	static unsigned char page[PAGE];
	while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
		unsigned long n = w->lat.calls, k = n % (w->bytes / PAGE);
		memset(page, (int)(n & 0xff), sizeof(page));
		latency_begin(&w->lat);
		ssize_t r = pwrite(w->fd, page, PAGE, (off_t)(k * PAGE));
		latency_end(&w->lat);
		CHECK(r == PAGE, "pwrite of a page into a mapped file returned %zd (%s)", r,
		      r < 0 ? strerror(errno) : "short count");
		CHECK(w->map[k * PAGE + 100] == (unsigned char)(n & 0xff),
		      "the file's mapping does not show pwrite %lu", n);
		usleep(w->pause_us ? w->pause_us : 200);
	}
	return NULL;
}

#endif
