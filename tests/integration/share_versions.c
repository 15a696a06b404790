/* Versions across processes (DESIGN §3.3): a producer process under the
 * shim changes pages of a file (stores through its mapping, pwrite); the
 * consumer, which maps the same file, learns at its next acquire exactly
 * which pages changed: their versions move, and no other page's does.
 *
 * Rounds: the producer publishes at msync (round A), at munmap (round B),
 * at exit (round C) and, without any of them, through GAIA_RELEASE_MS while
 * it is still running (round D). Producers are forked children, so they run
 * under the same shim. In round E the producer bypasses the shim entirely
 * (raw system calls: a mapping the shim never sees, and pwrite), as a
 * writer not under the shim would: the consumer learns its pages from the
 * file's change time and per-page checksums.
 */
#include "itest.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#define FILE_PAGES 512
#define ROUNDS_PER_MODE 6

enum publish_via { VIA_MSYNC, VIA_MUNMAP, VIA_EXIT, VIA_TIMER, VIA_FOREIGN, VIA_COUNT };

static const char *const via_name[] = {"msync", "munmap", "exit", "GAIA_RELEASE_MS",
				       "nothing (a writer not under the shim)"};

/* Writes like a process without the shim: system calls the shim cannot
 * see (the instruction itself). Every write changes its byte, so checksums can see it. */
static void produce_foreign(int fd, const bool *pages)
{
	char *map = (char *)itest_unseen_syscall(SYS_mmap, 0, FILE_PAGES * ITEST_PAGE, PROT_READ | PROT_WRITE,
						 MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		_exit(2);
	for (int p = 0; p < FILE_PAGES; p++) {
		if (!pages[p])
			continue;
		if (p % 2) {
			map[p * ITEST_PAGE + 17] ^= 0x5a;
		} else {
			char byte;
			off_t at = (off_t)(p * ITEST_PAGE + 9);
			if (itest_unseen_syscall(SYS_pread64, fd, (long)&byte, 1, at, 0, 0) != 1)
				_exit(3);
			byte = (char)~byte;
			if (itest_unseen_syscall(SYS_pwrite64, fd, (long)&byte, 1, at, 0, 0) != 1)
				_exit(3);
		}
	}
	itest_unseen_syscall(SYS_msync, (long)map, FILE_PAGES * ITEST_PAGE, MS_SYNC, 0, 0, 0);
	_exit(0); /* no exit handlers: nothing is published */
}

/* The producer: writes the chosen pages (half with stores, half with
 * pwrite), publishes as `via` says, and reports through `ready` when the
 * timer round may be checked. */
static void wait_to_quit(int quit_fd)
{
	char c;
	if (read(quit_fd, &c, 1) < 0)
		_exit(5);
	exit(0); /* a normal exit: the shim detaches from the version table */
}

static void produce(const char *path, const bool *pages, enum publish_via via, int ready_fd,
		    int quit_fd)
{
	int fd = open(path, O_RDWR);
	if (via == VIA_FOREIGN)
		produce_foreign(fd, pages);
	char *map = mmap(NULL, FILE_PAGES * ITEST_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (fd < 0 || map == MAP_FAILED)
		_exit(2);
	for (int p = 0; p < FILE_PAGES; p++) {
		if (!pages[p])
			continue;
		if (p % 2)
			map[p * ITEST_PAGE + 17] ^= 0x5a;
		else if (pwrite(fd, "x", 1, (off_t)(p * ITEST_PAGE + 9)) != 1)
			_exit(3);
	}
	switch (via) {
	case VIA_MSYNC:
		msync(map, FILE_PAGES * ITEST_PAGE, MS_SYNC);
		if (write(ready_fd, "r", 1) != 1)
			_exit(4);
		wait_to_quit(quit_fd); /* published; the consumer looks now */
		break;
	case VIA_MUNMAP:
		munmap(map, FILE_PAGES * ITEST_PAGE);
		if (write(ready_fd, "r", 1) != 1)
			_exit(4);
		wait_to_quit(quit_fd);
		break;
	case VIA_EXIT:
		exit(0); /* exit is a release point (not _exit, which skips it) */
	case VIA_TIMER:
		if (write(ready_fd, "r", 1) != 1)
			_exit(4);
		wait_to_quit(quit_fd);
		break;
	default:
		break;
	}
	_exit(0);
}

int main(void)
{
	struct itest_gaia g = itest_gaia_lookup();
	if (!g.macquire || !g.mversion) {
		printf("share_versions: not under the shim; skipped\n");
		return ITEST_SKIP;
	}
	uint64_t seed = itest_seed("SHARE_SEED");
	unsigned short rng[3];
	itest_rng_seed(rng, seed);
	char dir[PATH_MAX], path[PATH_MAX + 16];
	if (itest_tempdir(dir, "share_versions")) {
		perror("share_versions: temporary directory");
		return ITEST_FAIL;
	}
	snprintf(path, sizeof(path), "%s/data", dir);
	if (itest_random_file(path, FILE_PAGES * ITEST_PAGE, rng)) {
		perror("share_versions: creating the file");
		return ITEST_FAIL;
	}
	int fd = open(path, O_RDWR);
	char *map = mmap(NULL, FILE_PAGES * ITEST_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (fd < 0 || map == MAP_FAILED) {
		perror("share_versions: mapping the file");
		return ITEST_FAIL;
	}
	static uint32_t before[FILE_PAGES], after[FILE_PAGES];
	int failures = 0;
	for (int via = 0; via < VIA_COUNT; via++) {
		for (int round = 0; round < ROUNDS_PER_MODE; round++) {
			bool pages[FILE_PAGES] = {0};
			int nchanged = 1 + (int)itest_rnd(rng, 40);
			for (int i = 0; i < nchanged; i++)
				pages[itest_rnd(rng, FILE_PAGES)] = true;
			/* Reads by the consumer meanwhile must not count. */
			volatile char sink = map[itest_rnd(rng, FILE_PAGES) * ITEST_PAGE];
			(void)sink;
			if (g.macquire(map, FILE_PAGES * ITEST_PAGE, GAIA_CPU) ||
			    g.mversion(map, FILE_PAGES * ITEST_PAGE, before)) {
				printf("share_versions: acquire/version failed: %s\n", strerror(errno));
				return ITEST_FAIL;
			}
			int ready[2], quit[2];
			if (pipe(ready) || pipe(quit))
				return ITEST_FAIL;
			pid_t pid = fork();
			if (pid == 0) {
				close(ready[0]);
				close(quit[1]);
				produce(path, pages, (enum publish_via)via, ready[1], quit[0]);
			}
			close(ready[1]);
			close(quit[0]);
			char c;
			if (via == VIA_EXIT || via == VIA_FOREIGN) {
				int status;
				waitpid(pid, &status, 0);
			} else if (read(ready[0], &c, 1) != 1) {
				printf("share_versions: producer died (seed %llu)\n", (unsigned long long)seed);
				return ITEST_FAIL;
			}
			close(ready[0]);
			/* GAIA_RELEASE_MS is 20 in this test: the producer's timer
			 * publishes within a few periods; allow a loaded machine 5 s. */
			for (int waited_ms = 0;; waited_ms += 10) {
				if (g.macquire(map, FILE_PAGES * ITEST_PAGE, GAIA_CPU) ||
				    g.mversion(map, FILE_PAGES * ITEST_PAGE, after))
					return ITEST_FAIL;
				bool all_moved = true;
				for (int p = 0; p < FILE_PAGES; p++)
					all_moved = all_moved && (!pages[p] || after[p] != before[p]);
				if (all_moved || via != VIA_TIMER || waited_ms >= 5000)
					break;
				struct timespec wait = {0, 10 * 1000 * 1000};
				nanosleep(&wait, NULL);
			}
			close(quit[1]); /* the producer exits */
			if (via != VIA_EXIT && via != VIA_FOREIGN)
				waitpid(pid, NULL, 0);
			for (int p = 0; p < FILE_PAGES; p++) {
				bool moved = after[p] != before[p];
				if (moved != pages[p]) {
					printf("share_versions: published at %s, round %d: page %d %s "
					       "(seed %llu; replay SHARE_SEED=%llu)\n",
					       via_name[via], round, p,
					       pages[p] ? "changed but its version did not move"
							: "unchanged but its version moved",
					       (unsigned long long)seed, (unsigned long long)seed);
					failures++;
				}
			}
		}
	}
	munmap(map, FILE_PAGES * ITEST_PAGE);
	close(fd);
	itest_remove_tree(dir);
	if (failures)
		return ITEST_FAIL;
	printf("share_versions: %d rounds, every changed page learned, no other (seed %llu)\n",
	       VIA_COUNT * ROUNDS_PER_MODE, (unsigned long long)seed);
	return ITEST_PASS;
}
