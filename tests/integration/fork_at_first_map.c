/* fork_at_first_map: a process maps a file for the first time, forks at
 * once, and its child writes a byte and exits at once: a shell-like
 * program, a test harness, a worker pool started after loading a file.
 *
 * Under the shim the first managed mapping starts a thread of the shim's
 * (GAIA_RELEASE_MS is 20 here). A fork or an exit while that thread is
 * still starting up (inside the thread library, or a sanitizer's
 * allocator) leaves locks held by a thread that is not there: the child,
 * or its exit, then waits forever. Each round is a new process, so each
 * round has a first mapping; WORKERS of them run side by side, which
 * keeps the machine busy and the race window wide.
 *
 * Checks: every child and grandchild ends within ROUND_LIMIT_S, and the
 * grandchild's byte is in the file. Runs with and without the shim (the
 * kernel's behaviour is the oracle). FORK_MAP_ROUNDS=N changes the round
 * count. Exit: 0 pass, 1 fail.
 */
#include "itest.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define FILE_PAGES 16
#define WORKERS 4
#define ROUND_LIMIT_S 20

/* One round, in a new process: map, fork, the grandchild writes and
 * exits, the round checks the byte. Exit 0 when the byte is there. */
static void round_process(const char *path, int round)
{
	int fd = open(path, O_RDWR);
	if (fd < 0)
		_exit(2);
	unsigned char *map = mmap(NULL, FILE_PAGES * ITEST_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		_exit(3);
	size_t at = (size_t)round % (FILE_PAGES * ITEST_PAGE);
	unsigned char value = (unsigned char)(round * 7 + 1);
	pid_t pid = fork();
	if (pid < 0)
		_exit(4);
	if (pid == 0) {
		map[at] = value;
		exit(0); /* a normal exit: handlers run, the shim publishes */
	}
	int status;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		_exit(5);
	unsigned char seen;
	if (pread(fd, &seen, 1, (off_t)at) != 1 || seen != value || map[at] != value)
		_exit(6);
	exit(0);
}

int main(void)
{
	int rounds = 300;
	const char *env = getenv("FORK_MAP_ROUNDS");
	if (env && atoi(env) > 0)
		rounds = atoi(env);
	char dir[PATH_MAX], path[PATH_MAX + 16];
	if (itest_tempdir(dir, "fork_at_first_map")) {
		perror("fork_at_first_map: temporary directory");
		return ITEST_FAIL;
	}
	snprintf(path, sizeof(path), "%s/data", dir);
	unsigned short rng[3] = {1, 2, 3};
	if (itest_random_file(path, FILE_PAGES * ITEST_PAGE, rng)) {
		perror("fork_at_first_map: creating the file");
		return ITEST_FAIL;
	}
	int failures = 0;
	for (int base = 0; base < rounds && !failures; base += WORKERS) {
		pid_t pids[WORKERS];
		int started = 0;
		for (int w = 0; w < WORKERS && base + w < rounds; w++) {
			pid_t pid = fork();
			if (pid == 0) {
				setpgid(0, 0); /* the round and its child: one group to kill */
				round_process(path, base + w);
			}
			if (pid < 0) {
				perror("fork_at_first_map: fork");
				return ITEST_FAIL;
			}
			pids[started++] = pid;
		}
		for (int w = 0; w < started; w++) {
			int status = 0;
			if (itest_wait_limited(pids[w], &status, ROUND_LIMIT_S, true)) {
				printf("fork_at_first_map: round %d did not end within %d s: a process "
				       "forked or exited right after its first mapping hangs\n",
				       base + w, ROUND_LIMIT_S);
				failures++;
			} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
				printf("fork_at_first_map: round %d failed (%s %d): 2 open, 3 mmap, 4 fork, "
				       "5 the child failed, 6 its byte is missing\n",
				       base + w, WIFEXITED(status) ? "exit" : "signal",
				       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
				failures++;
			}
		}
	}
	itest_remove_tree(dir);
	if (failures)
		return ITEST_FAIL;
	printf("fork_at_first_map: %d rounds, %d at a time: every fork right after a first "
	       "mapping ended, every byte arrived\n", rounds, WORKERS);
	return ITEST_PASS;
}
