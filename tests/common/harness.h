/* What the kill -9 and stress programs (tests/kill9, tests/crash,
 * tests/stress) share: seeded randomness, time, starting a
 * writer and killing it after a delay, and every thread's stack when a
 * watchdog fires. Header-only: each program is one CUDA source file,
 * compiled by nvcc or, for the simulator, as C++. */
#ifndef GAIA_TESTS_HARNESS_H
#define GAIA_TESTS_HARNESS_H

#include <dirent.h>
#include <execinfo.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HARNESS_UNUSED __attribute__((unused))

/* splitmix64: a seed's n-th value, the same in the writer and the checker. */
static HARNESS_UNUSED uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* xorshift64: a thread's own stream of numbers (*s must not be 0). */
static HARNESS_UNUSED uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static HARNESS_UNUSED double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static HARNESS_UNUSED void sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
	nanosleep(&ts, NULL);
}

/* Runs argv[0] with argv (fork + exec, so the child starts as the program
 * itself would), lets it run delay_us, kills it with SIGKILL and reaps it.
 * Returns its wait status, or -1 when it could not be started. */
static HARNESS_UNUSED int run_and_kill(char *const argv[], long delay_us)
{
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		execv(argv[0], argv);
		_exit(127);
	}
	sleep_us(delay_us);
	kill(pid, SIGKILL);
	int status;
	if (waitpid(pid, &status, 0) != pid)
		return -1;
	return status;
}

static HARNESS_UNUSED void dump_own_stack(int sig)
{
	void *frames[64];
	int n = backtrace(frames, 64);
	char head[64];
	int len = snprintf(head, sizeof(head), "--- thread %ld\n", (long)syscall(SYS_gettid));
	(void)sig;
	(void)!write(2, head, (size_t)len);
	backtrace_symbols_fd(frames, n, 2);
}

/* Every thread's stack of process pid, on stderr: gdb when there is one,
 * else (this process only) each thread prints its own from a signal
 * handler. gdb is started with posix_spawn (a fork would run the shim's
 * fork handling, which a hung shim could block) through a shell that
 * bounds it to 60 s and then continues pid (a gdb killed while attached
 * can leave it stopped), without the shim in its environment. The
 * process must allow the tracing (prctl PR_SET_PTRACER). */
extern char **environ;

static HARNESS_UNUSED void dump_stacks(pid_t pid)
{
	if (access("/usr/bin/gdb", X_OK) == 0) {
		char script[256];
		snprintf(script, sizeof(script),
			 "timeout -s KILL 60 /usr/bin/gdb -batch -nx -p %d -ex 'thread apply all bt 30' 1>&2; "
			 "rc=$?; kill -CONT %d; exit $rc", (int)pid, (int)pid);
		char *args[] = {(char *)"sh", (char *)"-c", script, NULL};
		char *env[256];
		int n = 0;
		for (char **e = environ; *e && n < 255; e++)
			if (strncmp(*e, "LD_PRELOAD=", 11) != 0)
				env[n++] = *e;
		env[n] = NULL;
		pid_t c;
		int status;
		if (posix_spawn(&c, "/bin/sh", NULL, NULL, args, env) == 0 && waitpid(c, &status, 0) == c &&
		    WIFEXITED(status) && WEXITSTATUS(status) == 0)
			return;
	}
	if (pid != getpid())
		return;
	signal(SIGURG, dump_own_stack);
	DIR *d = opendir("/proc/self/task");
	for (struct dirent *e; d && (e = readdir(d));) {
		long tid = atol(e->d_name);
		if (tid > 0) {
			syscall(SYS_tgkill, getpid(), tid, SIGURG);
			usleep(100000);
		}
	}
	if (d)
		closedir(d);
}

#endif
