/* fork_slow_thread: a process with a mapped file forks, and in the child
 * a new thread does not get to run its function: what happens under ASan
 * when another thread of the parent held the sanitizer allocator's lock at
 * the fork (the child's new thread waits for it for ever). Seen as a hang
 * of stress/lanes_paged under ASan: the shim's fork handler started the
 * GAIA_RELEASE_MS thread in the child and waited for it to run, so the
 * child never reached its exec.
 *
 * The program stands in for the sanitizer: it defines pthread_create, so
 * every thread created in a child process (the shim's included) first
 * sleeps for ever. The child writes a byte through the mapping and exits
 * at once, another child execs /bin/true at once; each must end within
 * LIMIT_S, and the first one's byte must be in the file. Runs with and
 * without the shim. Exit: 0 pass, 1 fail.
 */
#include "itest.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define LIMIT_S 20

static pid_t parent;

static void *never_runs(void *p)
{
	(void)p;
	for (;;)
		pause();
	return NULL;
}

int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "pthread_create");
	if (!real)
		return EAGAIN;
	if (parent && getpid() != parent)
		return real(t, attr, never_runs, NULL); /* fn is never called */
	return real(t, attr, fn, arg);
}

int main(void)
{
	parent = getpid();
	char dir[PATH_MAX], path[PATH_MAX + 16];
	if (itest_tempdir(dir, "fork_slow_thread")) {
		perror("fork_slow_thread: temporary directory");
		return ITEST_FAIL;
	}
	snprintf(path, sizeof(path), "%s/data", dir);
	unsigned short rng[3] = {4, 5, 6};
	if (itest_random_file(path, 4 * ITEST_PAGE, rng)) {
		perror("fork_slow_thread: creating the file");
		return ITEST_FAIL;
	}
	int fd = open(path, O_RDWR);
	unsigned char *map = mmap(NULL, 4 * ITEST_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (fd < 0 || map == MAP_FAILED) {
		perror("fork_slow_thread: mapping the file");
		return ITEST_FAIL;
	}
	map[100] = 1; /* the shim's release thread runs by now */
	int failures = 0;
	for (int kind = 0; kind < 2; kind++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork_slow_thread: fork");
			return ITEST_FAIL;
		}
		if (pid == 0) {
			if (kind == 0) {
				map[ITEST_PAGE + 7] = 0x5a;
				exit(0);
			}
			execl("/bin/true", "true", (char *)NULL);
			_exit(127);
		}
		int status = 0;
		const char *what = kind == 0 ? "a child that writes and exits" : "a child that execs /bin/true";
		if (itest_wait_limited(pid, &status, LIMIT_S, false)) {
			printf("fork_slow_thread: %s did not end within %d s once a thread it started could not "
			       "run\n", what, LIMIT_S);
			failures++;
		} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			printf("fork_slow_thread: %s ended with status %d\n", what, status);
			failures++;
		}
	}
	unsigned char seen = 0;
	if (pread(fd, &seen, 1, ITEST_PAGE + 7) != 1 || seen != 0x5a || map[ITEST_PAGE + 7] != 0x5a) {
		printf("fork_slow_thread: the child's byte: %u in the file, %u in the mapping, it wrote 0x5a\n", seen,
		       map[ITEST_PAGE + 7]);
		failures++;
	}
	munmap(map, 4 * ITEST_PAGE);
	close(fd);
	itest_remove_tree(dir);
	printf("fork_slow_thread: %s\n", failures ? "FAIL" : "ok");
	return failures ? ITEST_FAIL : ITEST_PASS;
}
