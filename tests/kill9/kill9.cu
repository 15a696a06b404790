/* kill -9 at random points (DESIGN §1 promise 5: files stay files). A
 * writer under the shim changes a mapped file with a seeded sequence of
 * steps and, after each one completes, appends its number to a log
 * (write(2) with O_APPEND, after the step):
 *   store+msync  memset through the MAP_SHARED mapping, msync(MS_SYNC)
 *   pwrite       pwrite of a buffer
 *   store        memset through the mapping, no msync
 *   kernel       a kernel fills the range through the mapping's address,
 *                cudaDeviceSynchronize, msync(MS_SYNC) (simulated GPU)
 * The checker kills it with SIGKILL after a random delay, regenerates the
 * same steps from the seed and checks every byte of the file: it must
 * hold what the last completed step that wrote it left, except in the
 * range of the step in flight at the kill (old or new value, per byte).
 * A byte an msync'ed, pwritten or synced step wrote and the file lacks is
 * lost data (failure). A byte a plain store wrote and the file lacks is
 * something the kernel would have kept and the shim did not: counted and
 * reported (the CPU side is the kernel's own mapping, so it should be 0).
 * Afterwards no process of the writer (the simulated device's included)
 * may be left, and the file's shared version table is gone once the next
 * user under the shim stops using it.
 *
 *   kill9 [TRIALS]        the checker (KILL9_SEED replays a run)
 *   kill9 writer FILE LOG SEED GPU   (run by the checker)
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "simgpu_kernel.h"

#include "../common/harness.h"

#define PAGE 4096
#define PAGES 64
#define MAX_STEPS 100000
#define DEFAULT_TRIALS 200
#define MAX_DELAY_US 30000

__global__ void fill(unsigned char *p, unsigned long long n, unsigned char v)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < n; i += (unsigned long long)gridDim.x * blockDim.x)
		p[i] = v;
}
SIMGPU_KERNEL(fill);

enum kind { STORE_MSYNC, PWRITE, STORE, KERNEL, KINDS };
static const char *const kind_name[KINDS] = {"store+msync", "pwrite", "store", "kernel"};

struct step {
	enum kind kind;
	unsigned page, npages;
	unsigned char value;
};

/* Step n (from 1) of the writer seeded `seed`; the checker calls it too. */
static struct step step_of(uint64_t seed, unsigned n, bool gpu)
{
	uint64_t r = mix(seed * 1000003u + n);
	struct step s;
	unsigned k = (unsigned)(r % 100);
	s.kind = k < 35 ? STORE_MSYNC : k < 65 ? PWRITE : k < 85 ? STORE : KERNEL;
	if (s.kind == KERNEL && !gpu)
		s.kind = STORE_MSYNC;
	s.npages = 1 + (unsigned)((r >> 8) % 4);
	s.page = (unsigned)((r >> 16) % (PAGES - s.npages + 1));
	s.value = (unsigned char)(1 + n % 251);
	return s;
}

static int writer(const char *file, const char *log, uint64_t seed, bool gpu)
{
	int fd = open(file, O_RDWR);
	int lfd = open(log, O_WRONLY | O_APPEND);
	unsigned char *m = (unsigned char *)mmap(NULL, PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	static unsigned char buf[4 * PAGE];
	if (fd < 0 || lfd < 0 || m == MAP_FAILED) {
		perror("kill9 writer: setup");
		return 1;
	}
	if (gpu && cudaSetDevice(0) != cudaSuccess)
		return 1;
	uint32_t ready = 0;
	if (write(lfd, &ready, sizeof(ready)) != sizeof(ready))
		return 1;
	for (unsigned n = 1; n <= MAX_STEPS; n++) {
		struct step s = step_of(seed, n, gpu);
		unsigned char *at = m + (size_t)s.page * PAGE;
		size_t len = (size_t)s.npages * PAGE;
		switch (s.kind) {
		case STORE_MSYNC:
			memset(at, s.value, len);
			if (msync(at, len, MS_SYNC))
				return 1;
			break;
		case PWRITE:
			memset(buf, s.value, len);
			if (pwrite(fd, buf, len, (off_t)s.page * PAGE) != (ssize_t)len)
				return 1;
			break;
		case STORE:
			memset(at, s.value, len);
			break;
		case KERNEL:
			SIMGPU_LAUNCH(fill, 8, 128, 0, 0)(at, (unsigned long long)len, s.value);
			if (cudaDeviceSynchronize() != cudaSuccess || msync(at, len, MS_SYNC))
				return 1;
			break;
		default:
			return 1;
		}
		uint32_t done = n;
		if (write(lfd, &done, sizeof(done)) != sizeof(done))
			return 1;
	}
	return 0;
}

/* --- the checker --- */

struct totals {
	unsigned long trials, startup_kills, steps, in_flight[KINDS], bytes_checked;
	unsigned long lost_synced, lost_unsynced, unsynced_bytes;
};

/* Processes running this program other than `self` (the writers and
 * their simulated devices, once all are gone: 0). */
static int others_alive(pid_t self)
{
	char exe[4096], mine[4096], link[64];
	ssize_t n = readlink("/proc/self/exe", mine, sizeof(mine) - 1);
	int count = 0;
	if (n <= 0)
		return 0;
	mine[n] = 0;
	DIR *d = opendir("/proc");
	for (struct dirent *e; d && (e = readdir(d));) {
		pid_t pid = (pid_t)atoi(e->d_name);
		if (pid <= 0 || pid == self)
			continue;
		snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
		ssize_t k = readlink(link, exe, sizeof(exe) - 1);
		if (k > 0 && (exe[k] = 0, strcmp(exe, mine) == 0)) {
			char stat[64];
			snprintf(stat, sizeof(stat), "/proc/%d/stat", (int)pid);
			FILE *f = fopen(stat, "r");
			char state = 0;
			if (f && fscanf(f, "%*d %*s %c", &state) == 1 && state != 'Z')
				count++;
			if (f)
				fclose(f);
		}
	}
	if (d)
		closedir(d);
	return count;
}

static unsigned long current_trial;

static int trial(const char *self, const char *file, const char *log, uint64_t seed, bool gpu, long delay_us,
		 struct totals *t)
{
	static unsigned char want[PAGES * PAGE], got[PAGES * PAGE];
	static signed char source[PAGES * PAGE]; /* kind of the step that wrote each byte, -1 none */
	static bool either[PAGES * PAGE];
	static unsigned char alt[PAGES * PAGE];
	int fd = open(file, O_RDWR), lfd = open(log, O_RDWR | O_TRUNC);
	if (fd < 0 || lfd < 0 || ftruncate(fd, 0) || ftruncate(fd, PAGES * PAGE)) {
		perror("kill9: reset");
		return -1;
	}
	close(lfd);
	char seed_arg[32];
	snprintf(seed_arg, sizeof(seed_arg), "%" PRIu64, seed);
	char *writer[] = {(char *)self, (char *)"writer", (char *)file, (char *)log, seed_arg,
			  (char *)(gpu ? "1" : "0"), NULL};
	int status = run_and_kill(writer, delay_us);
	if (status == -1 || !WIFSIGNALED(status)) {
		printf("kill9: FAIL: the writer exited (status %d) before the kill\n", status);
		return -1;
	}

	/* What completed. */
	lfd = open(log, O_RDONLY);
	static uint32_t rec[MAX_STEPS + 1];
	ssize_t n = read(lfd, rec, sizeof(rec));
	close(lfd);
	size_t nrec = n > 0 ? (size_t)n / sizeof(uint32_t) : 0;
	for (size_t i = 0; i < nrec; i++)
		if (rec[i] != i) {
			printf("kill9: FAIL: log record %zu is %u\n", i, rec[i]);
			return -1;
		}
	unsigned done = nrec ? (unsigned)nrec - 1 : 0;
	memset(want, 0, sizeof(want));
	memset(source, -1, sizeof(source));
	memset(either, 0, sizeof(either));
	for (unsigned k = 1; k <= done; k++) {
		struct step s = step_of(seed, k, gpu);
		memset(want + (size_t)s.page * PAGE, s.value, (size_t)s.npages * PAGE);
		memset(source + (size_t)s.page * PAGE, (int)s.kind, (size_t)s.npages * PAGE);
	}
	if (nrec) { /* the step in flight: old or new, byte by byte */
		struct step s = step_of(seed, done + 1, gpu);
		memset(either + (size_t)s.page * PAGE, 1, (size_t)s.npages * PAGE);
		memset(alt + (size_t)s.page * PAGE, s.value, (size_t)s.npages * PAGE);
		t->in_flight[s.kind]++;
	} else {
		t->startup_kills++;
	}
	if (pread(fd, got, sizeof(got), 0) != (ssize_t)sizeof(got)) {
		perror("kill9: pread");
		return -1;
	}
	close(fd);
	unsigned long lost = 0;
	for (size_t i = 0; i < sizeof(got); i++) {
		if (source[i] == STORE)
			t->unsynced_bytes++;
		if (got[i] == want[i] || (either[i] && got[i] == alt[i]))
			continue;
		if (source[i] == STORE) {
			t->lost_unsynced++;
		} else {
			if (!lost)
				printf("kill9: FAIL: trial %lu: byte %zu is %u, want %u (written by a %s step), "
				       "after %u steps\n", current_trial, i, got[i], want[i],
				       source[i] >= 0 ? kind_name[source[i]] : "no", done);
			t->lost_synced++;
			lost++;
		}
	}
	t->trials++;
	t->steps += done;
	t->bytes_checked += sizeof(got);
	return lost ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 6 && !strcmp(argv[1], "writer"))
		return writer(argv[2], argv[3], strtoull(argv[4], NULL, 10), argv[5][0] == '1');
	unsigned long trials = argc > 1 ? strtoul(argv[1], NULL, 10) : DEFAULT_TRIALS;
	if (getenv("KILL9_TRIALS"))
		trials = strtoul(getenv("KILL9_TRIALS"), NULL, 10);
	uint64_t seed = getenv("KILL9_SEED") ? strtoull(getenv("KILL9_SEED"), NULL, 0)
					     : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
	printf("kill9: seed %" PRIu64 " (KILL9_SEED replays), %lu trials\n", seed, trials);
	fflush(stdout);

	char dir[] = "/tmp/kill9.XXXXXX", file[64], log[64];
	if (!mkdtemp(dir))
		return 1;
	snprintf(file, sizeof(file), "%s/data", dir);
	snprintf(log, sizeof(log), "%s/log", dir);
	close(open(file, O_RDWR | O_CREAT, 0644));
	close(open(log, O_RDWR | O_CREAT, 0644));

	struct totals t = {};
	int failed = 0;
	for (unsigned long i = 0; i < trials && !failed; i++) {
		uint64_t s = mix(seed + i);
		current_trial = i;
		bool gpu = (s >> 7) % 2;
		/* A tenth of the kills land in the first millisecond: start-up. */
		long delay = (s >> 9) % 10 == 0 ? (long)((s >> 13) % 1000) : (long)((s >> 13) % MAX_DELAY_US);
		int rc = trial(argv[0], file, log, s, gpu, delay, &t);
		if (rc < 0)
			return 1;
		failed |= rc;
	}

	/* Nothing of the writers may stay behind. */
	int alive = 0;
	for (int w = 0; w < 100 && (alive = others_alive(getpid())); w++)
		sleep_us(10000);

	/* The table the killed writers left goes when the next user stops. */
	struct stat st;
	char table[128];
	stat(file, &st);
	snprintf(table, sizeof(table), "/dev/shm/gaia-v1-%u-%llx-%llx", (unsigned)geteuid(),
		 (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	bool table_left = false;
	/* Processes finish exiting (and drop their locks on the table) a
	 * moment after they are reaped: a few tries. */
	for (int tries = 0; tries < 40 && getenv("LD_PRELOAD") && strstr(getenv("LD_PRELOAD"), "libgaia"); tries++) {
		int fd = open(file, O_RDWR);
		void *m = mmap(NULL, PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m != MAP_FAILED)
			munmap(m, PAGES * PAGE);
		close(fd);
		table_left = access(table, F_OK) == 0;
		if (!table_left)
			break;
		sleep_us(50000);
	}
	if (table_left) { /* what is there, for the report */
		struct stat ts;
		unsigned char head[128] = {0};
		int tfd = open(table, O_RDONLY);
		if (tfd >= 0 && fstat(tfd, &ts) == 0 && pread(tfd, head, sizeof(head), 0) >= 0) {
			printf("kill9: %s: %lld bytes, mode %o, owner %u; header:", table, (long long)ts.st_size,
			       (unsigned)ts.st_mode & 07777, (unsigned)ts.st_uid);
			for (size_t i = 0; i < 64; i++)
				printf("%s%02x", i % 16 ? " " : "\n  ", head[i]);
			printf("\n");
		}
		if (tfd >= 0)
			close(tfd);
	}
	unlink(file);
	unlink(log);
	rmdir(dir);

	printf("kill9: %lu trials, %lu steps completed, %lu kills during start-up; in flight at the kill:", t.trials,
	       t.steps, t.startup_kills);
	for (int k = 0; k < KINDS; k++)
		printf(" %s %lu", kind_name[k], t.in_flight[k]);
	printf("\nkill9: %lu bytes checked; lost: %lu synced or written bytes, %lu of %lu bytes of plain "
	       "stores (what the kernel keeps and the shim did not)\n",
	       t.bytes_checked, t.lost_synced, t.lost_unsynced, t.unsynced_bytes);
	printf("kill9: %d writer processes left, shared version table %s\n", alive,
	       table_left ? "LEFT BEHIND" : "removed");
	bool ok = !failed && !t.lost_synced && !t.lost_unsynced && !alive && !table_left;
	printf("kill9: %s\n", ok ? "ok" : "FAILED");
	return ok ? 0 : 1;
}
