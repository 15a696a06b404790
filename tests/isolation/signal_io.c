/* signal_io — a program whose signal handler writes to a mapped file.
 * write, pwrite and ftruncate are async-signal-safe (signal-safety(7)), so
 * a handler may call them whatever the interrupted code was doing: here a
 * 50 us SIGALRM timer interrupts a loop that maps and unmaps anonymous
 * memory, asks gaia_mversion (when the shim is there) and writes to the
 * file itself, and the handler pwrites a page of the mapped file and
 * ftruncates it to its own size. Exit 0 when the loop ends and every
 * byte the handler wrote is in the mapping; a handler that waits for a
 * lock its own thread holds hangs instead (the watchdog then says so).
 * ISOLATION_ROUNDS: loop rounds (40000). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>

#define PAGES 256
#define PAGE 4096
#define ROUNDS 40000
#define WATCHDOG_S 60

static int fd;
static unsigned char *map;
static volatile sig_atomic_t handled, failed;

static void on_alarm(int sig)
{
	(void)sig;
	int saved = errno;
	unsigned char v = (unsigned char)(handled % 250 + 1);
	off_t at = (off_t)(handled % PAGES) * PAGE + 7;
	if (pwrite(fd, &v, 1, at) != 1 || ftruncate(fd, (off_t)PAGES * PAGE) != 0)
		failed = 1;
	else if (map[at] != v)
		failed = 2;
	handled++;
	errno = saved;
}

static void *watchdog(void *arg)
{
	(void)arg;
	sleep(WATCHDOG_S);
	static const char msg[] = "FAIL signal_io: still running after the watchdog's time (a handler waits)\n";
	(void)!write(2, msg, sizeof(msg) - 1);
	_exit(1);
}

static int fail(const char *what)
{
	fprintf(stderr, "FAIL signal_io: %s: %s\n", what, strerror(errno));
	return 1;
}

int main(void)
{
	char path[] = "/tmp/gaia-signal-io-XXXXXX";
	fd = mkstemp(path);
	if (fd < 0)
		return fail("mkstemp");
	unlink(path);
	if (ftruncate(fd, (off_t)PAGES * PAGE))
		return fail("ftruncate");
	map = mmap(NULL, (size_t)PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return fail("mmap");
	map[0] = 1;
	int (*mversion)(const void *, size_t, uint32_t *) = NULL;
	void *sym = dlsym(RTLD_DEFAULT, "gaia_mversion");
	memcpy(&mversion, &sym, sizeof(sym));
	static uint32_t versions[PAGES];

	sigset_t alarm_only, old;
	sigemptyset(&alarm_only);
	sigaddset(&alarm_only, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &alarm_only, &old);
	pthread_t w;
	if (pthread_create(&w, NULL, watchdog, NULL))
		return fail("pthread_create");
	pthread_sigmask(SIG_SETMASK, &old, NULL);

	struct sigaction sa = {0};
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, NULL))
		return fail("sigaction");
	struct itimerval it = {{0, 50}, {0, 50}};
	if (setitimer(ITIMER_REAL, &it, NULL))
		return fail("setitimer");
	const char *r = getenv("ISOLATION_ROUNDS");
	const int rounds = r && atoi(r) > 0 ? atoi(r) : ROUNDS;
	for (int i = 0; i < rounds && !failed; i++) {
		void *a = mmap(NULL, 64 << 10, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (a == MAP_FAILED)
			return fail("mmap anonymous");
		munmap(a, 64 << 10);
		if (mversion && mversion(map, (size_t)PAGES * PAGE, versions))
			return fail("gaia_mversion");
		unsigned char v = (unsigned char)i;
		if (pwrite(fd, &v, 1, (off_t)(i % PAGES) * PAGE + 100) != 1)
			return fail("pwrite");
		map[(i % PAGES) * PAGE + 200] = v;
	}
	struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &off, NULL);
	if (failed) {
		fprintf(stderr, "FAIL signal_io: the handler's %s\n",
			failed == 1 ? "pwrite or ftruncate failed" : "byte is not in the mapping");
		return 1;
	}
	if (handled == 0) {
		fprintf(stderr, "FAIL signal_io: no signal arrived\n");
		return 1;
	}
	printf("ok signal_io: %ld handler calls\n", (long)handled);
	return 0;
}
