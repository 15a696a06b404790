/* Process events: fork (pthread_atfork), and exit (the last release and
 * the counters); and the shim's own threads. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"
#include "stats.h"

#define GAIA_EXPORT __attribute__((visibility("default")))

/* The process this library was loaded into, or a fork() child of it. A
 * process cloned without fork() (a simulated device's process, for one)
 * runs the same code on a copy of state it does not own: there every hook
 * passes straight through. */
static pid_t our_pid;

bool gaia_process_is_ours(void)
{
	pid_t p = __atomic_load_n(&our_pid, __ATOMIC_RELAXED);
	return p == 0 || getpid() == p;
}

/* A page the kernel empties in every child that does not share this
 * process's memory (MADV_WIPEONFORK, Linux 4.14), a fork or a raw clone
 * alike: 1 here, 0 there. NULL where the kernel refuses. A child that
 * shares the memory (vfork, clone with CLONE_VM) reads 1: its writes are
 * then recorded in the parent's state, which is the state that memory
 * holds. An emulator that accepts the advice and ignores it (qemu-user)
 * would make a raw clone look like this process. */
static volatile unsigned char *fork_canary;

bool gaia_state_is_ours(void)
{
	const volatile unsigned char *c = __atomic_load_n(&fork_canary, __ATOMIC_RELAXED);
	if (c && *c)
		return true;
	return gaia_process_is_ours();
}

static void arm_fork_canary(void)
{
	if (fork_canary) {
		*fork_canary = 1;
		return;
	}
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	gaia_in_shim++; /* the shim's own anonymous page */
	void *p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p != MAP_FAILED && madvise(p, page, MADV_WIPEONFORK)) {
		munmap(p, page);
		p = MAP_FAILED;
	}
	gaia_in_shim--;
	if (p == MAP_FAILED)
		return;
	*(volatile unsigned char *)p = 1;
	__atomic_store_n(&fork_canary, (volatile unsigned char *)p, __ATOMIC_RELEASE);
}

/* fork: the child gets the mappings (the kernel copies them) with
 * everything the parent wrote already released; registration for write
 * tracking does not follow a fork, so the child registers its managed
 * ranges again, and forgets the parent's devices. Through pthread_atfork,
 * so every fork glibc makes runs it (daemon(), and a program's own), not
 * only calls of the fork symbol. The handlers of one fork run in one
 * thread under glibc's fork lock, so one flag carries the decision. */
static bool fork_managed, fork_gated;

static void before_fork(void)
{
	/* The release thread's pass first: it takes the mapping lock inside. */
	fork_gated = !gaia_in_shim;
	if (fork_gated)
		release_timer_before_fork();
	fork_managed = !gaia_in_shim && mapping_any();
	if (fork_managed)
		mapping_before_fork();
	if (fork_gated && gpu_front_before_fork)
		gpu_front_before_fork();
}

static void after_fork_parent(void)
{
	if (fork_gated && gpu_front_after_fork)
		gpu_front_after_fork(false);
	if (fork_managed) {
		int saved = errno;
		mapping_after_fork(false);
		errno = saved;
	}
	if (fork_gated)
		release_timer_after_fork_parent();
}

static void after_fork_child(void)
{
	if (fork_gated)
		release_timer_after_fork_parent(); /* the forking thread's, in the child too */
	__atomic_store_n(&our_pid, getpid(), __ATOMIC_RELAXED);
	arm_fork_canary();
	if (gpu_wait_note_after_fork_child)
		gpu_wait_note_after_fork_child();
	if (gpu_front_after_fork)
		gpu_front_after_fork(true);
	if (fork_managed) {
		int saved = errno;
		mapping_after_fork(true);
		errno = saved;
	}
}

__attribute__((constructor)) static void gaia_at_start(void)
{
	our_pid = getpid();
	arm_fork_canary();
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

static void print_stats(void)
{
	const char *dest = gaia_config()->stats;
	if (!dest || !*dest || strcmp(dest, "0") == 0)
		return;
	int fd = 2;
	if (strcmp(dest, "1") != 0) {
		/* A set-user-ID program (secure execution) never writes a file
		 * named by its caller's environment. */
		if (getauxval(AT_SECURE)) {
			gaia_error("GAIA_STATS=%s: ignored in a set-user-ID or set-group-ID "
				   "program; counters not written", dest);
			return;
		}
		fd = open(dest, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0) {
			gaia_error("GAIA_STATS=%s: cannot open: %s; counters not written", dest,
				   strerror(errno));
			return;
		}
	}
	int rc = stats_print(fd);
	if (rc)
		gaia_error("GAIA_STATS=%s: writing the counters failed: %s", dest, strerror(-rc));
	if (fd != 2)
		close(fd);
}

/* Exit is a release point: what the CPU wrote is published before the
 * process goes (the bytes themselves are the kernel's and stay). */
__attribute__((destructor)) static void gaia_at_exit(void)
{
	if (!gaia_process_is_ours())
		return;
	gaia_in_shim++;
	if (mapping_any())
		mapping_at_exit();
	print_stats();
	gaia_in_shim--;
}

/* A new thread of the shim's reports here once it runs its function:
 * until then it is inside the thread library (and, under a sanitizer,
 * inside its allocator), and a fork or an exit of the program at that
 * moment would find locks held by a thread that is not there (a child
 * that forks right after its first mmap, then exits). */
struct thread_start {
	void *(*fn)(void *);
	void *arg;
	int running;
};

static void *thread_begin(void *p)
{
	struct thread_start *start = p;
	void *(*fn)(void *) = start->fn;
	void *arg = start->arg;
	__atomic_store_n(&start->running, 1, __ATOMIC_RELEASE); /* start is gone after this */
	return fn(arg);
}

static int create(struct thread_start *start)
{
	/* The thread takes no signal meant for the application. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_t thread;
	int rc = pthread_create(&thread, &attr, thread_begin, start);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

int gaia_thread_start(void *(*fn)(void *), void *arg)
{
	struct thread_start start = {fn, arg, 0};
	int rc = create(&start);
	while (rc == 0 && !__atomic_load_n(&start.running, __ATOMIC_ACQUIRE))
		sched_yield();
	return rc;
}

int gaia_thread_start_in_child(void *(*fn)(void *), void *arg)
{
	static struct thread_start start;
	start = (struct thread_start){fn, arg, 0};
	int rc = create(&start);
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (rc == 0 && !__atomic_load_n(&start.running, __ATOMIC_ACQUIRE)) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000000000LL + (t.tv_nsec - t0.tv_nsec) > 100000000LL)
			return EAGAIN; /* stopped inside the thread library or a sanitizer: go on without it */
		sched_yield();
	}
	return rc;
}
