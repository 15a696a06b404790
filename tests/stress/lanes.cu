/* Stress under the shim, bounded in time (STRESS_SECONDS, default 8):
 * many threads and two processes on one mapped file, every byte owned by
 * one writer (a "lane": byte i belongs to lane i % 8), invariants checked
 * all the time:
 *   lanes 0-3  CPU threads storing through the mapping, each into random
 *              pages (so threads fault and write the same pages at once),
 *              msync now and then; each checks its bytes still hold what
 *              it stored last (a device's merge must never undo them)
 *   lane 4     a thread writing with pwrite and reading back with pread
 *   lane 5     another process under the shim (its own mapping of the
 *              file), the same check; both processes' versions of every
 *              page never go backwards (gaia_mversion, shared table)
 *   lane 6     none: must stay zero
 *   lane 7     a thread launching kernels on the simulated GPU that write
 *              lane 7 of every page, then syncing: after the sync the CPU
 *              sees all of them (DESIGN §1 promises 2 and 3)
 * plus a thread mapping, writing, msync'ing, unmapping and remapping a
 * second file and checking it, and a thread reading the whole first file
 * with read() and checking lane 6.
 * A watchdog turns a hang into a failure: when no worker made progress for
 * STRESS_WATCHDOG_S seconds (default 30) it prints every thread's stack
 * (gdb when present, else backtrace() in each thread) and exits 1.
 * The watchdog stays until the process ends: a worker that does not return
 * once told to stop, a peer process that does not exit, exit work that does
 * not end, are hangs too (STRESS_WATCHDOG_S after the stop).
 * STRESS_HANG=1 makes one worker hang, STRESS_HANG=at_stop one that does not
 * return when told to stop, to show the watchdog works.
 *
 *   lanes             the test (parent; starts the peer process)
 *   lanes peer FILE SECONDS
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "simgpu_kernel.h"

#include "../common/harness.h"

#define PAGE 4096
#define PAGES 128
#define BYTES ((size_t)PAGES * PAGE)
#define LANES 8
#define CPU_LANES 4
#define IO_LANE 4
#define PEER_LANE 5
#define ZERO_LANE 6
#define GPU_LANE 7

__global__ void write_lane(unsigned char *p, unsigned long long n, unsigned lane, unsigned char v)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (i = i * LANES + lane; i < n; i += (unsigned long long)gridDim.x * blockDim.x * LANES)
		p[i] = v;
}
SIMGPU_KERNEL(write_lane);

static int (*mversion)(const void *, size_t, uint32_t *);
static unsigned char *map;
static int data_fd;
static char data_path[256], other_path[256], dirname_of_data[256];
static int stop_flag;
static int failed_flag;
#define stop __atomic_load_n(&stop_flag, __ATOMIC_RELAXED)
#define set_stop() __atomic_store_n(&stop_flag, 1, __ATOMIC_RELAXED)
static unsigned long progress[16];
static const char *worker_name[16];
static int workers;
static double deadline;
static pid_t peer_pid;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "stress: FAIL: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	__atomic_store_n(&failed_flag, 1, __ATOMIC_RELAXED);
	set_stop();
}

static void tick(int id)
{
	__atomic_add_fetch(&progress[id], 1, __ATOMIC_RELAXED);
}

/* --- lane writers (CPU stores, and the peer process) --- */

struct lane_arg {
	int id;
	unsigned lane;
	unsigned char *base;
};

static void *lane_writer(void *p)
{
	struct lane_arg *a = (struct lane_arg *)p;
	unsigned char shadow[PAGES] = {0}; /* value of this lane per page */
	uint64_t s = 0x9e3779b97f4a7c15ull * (a->lane + 1);
	const char *hang = getenv("STRESS_HANG");
	bool hang_at_stop = hang && !strcmp(hang, "at_stop");
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	if (hang && !hang_at_stop && a->lane == 0) { /* a worker that hangs */
		pthread_mutex_lock(&m);
		pthread_mutex_lock(&m);
	}
	for (unsigned long it = 1; !stop; it++) {
		unsigned page = (unsigned)(rnd(&s) % PAGES);
		unsigned char v = (unsigned char)(1 + it % 250);
		unsigned char *pg = a->base + (size_t)page * PAGE;
		for (size_t i = a->lane; i < PAGE; i += LANES)
			pg[i] = v;
		shadow[page] = v;
		if (it % 64 == 0 && msync(pg, PAGE, MS_SYNC))
			fail("lane %u: msync: %s", a->lane, strerror(errno));
		/* Every so often, all of this lane, everywhere. */
		if (it % 16 == 0)
			for (unsigned q = 0; q < PAGES; q++)
				for (size_t i = a->lane; i < PAGE; i += LANES)
					if (a->base[(size_t)q * PAGE + i] != shadow[q]) {
						fail("lane %u, page %u, byte %zu: %u, last stored %u", a->lane, q, i,
						     a->base[(size_t)q * PAGE + i], shadow[q]);
						return NULL;
					}
		tick(a->id);
	}
	if (hang_at_stop && a->lane == 0) { /* one that does not return when told to stop */
		pthread_mutex_lock(&m);
		pthread_mutex_lock(&m);
	}
	return NULL;
}

/* --- pwrite/pread lane --- */

static void *io_writer(void *p)
{
	int id = *(int *)p;
	unsigned char buf[PAGE];
	uint64_t s = 12345;
	for (unsigned long it = 1; !stop; it++) {
		unsigned page = (unsigned)(rnd(&s) % PAGES);
		unsigned char v = (unsigned char)(1 + it % 250);
		/* The lane's bytes of one page, one pwrite each for 16 of them. */
		unsigned first = (unsigned)(rnd(&s) % (PAGE / LANES - 16));
		for (unsigned k = first; k < first + 16; k++)
			if (pwrite(data_fd, &v, 1, (off_t)page * PAGE + k * LANES + IO_LANE) != 1)
				fail("pwrite: %s", strerror(errno));
		if (pread(data_fd, buf, PAGE, (off_t)page * PAGE) != PAGE) {
			fail("pread: %s", strerror(errno));
			break;
		}
		for (unsigned k = first; k < first + 16; k++)
			if (buf[k * LANES + IO_LANE] != v || map[(size_t)page * PAGE + k * LANES + IO_LANE] != v)
				fail("io lane, page %u: pread %u, mapping %u, wrote %u", page, buf[k * LANES + IO_LANE],
				     map[(size_t)page * PAGE + k * LANES + IO_LANE], v);
		tick(id);
	}
	return NULL;
}

/* --- GPU lane --- */

static void *gpu_worker(void *p)
{
	int id = *(int *)p;
	if (cudaSetDevice(0) != cudaSuccess) {
		fail("cudaSetDevice");
		return NULL;
	}
	for (unsigned long it = 1; !stop; it++) {
		unsigned char v = (unsigned char)(1 + it % 250);
		SIMGPU_LAUNCH(write_lane, 32, 128, 0, 0)(map, (unsigned long long)BYTES, GPU_LANE, v);
		cudaError_t e = cudaDeviceSynchronize();
		if (e != cudaSuccess) {
			fail("gpu: %s", cudaGetErrorName(e));
			break;
		}
		for (size_t i = GPU_LANE; i < BYTES; i += LANES)
			if (map[i] != v) {
				fail("gpu lane, byte %zu: %u after the sync, kernel wrote %u", i, map[i], v);
				return NULL;
			}
		tick(id);
	}
	return NULL;
}

/* --- read() of the whole file, and the zero lane --- */

static void *reader(void *p)
{
	int id = *(int *)p;
	static unsigned char buf[BYTES];
	int fd = open(data_path, O_RDONLY);
	while (!stop) {
		if (pread(fd, buf, BYTES, 0) != (ssize_t)BYTES) {
			fail("read: %s", strerror(errno));
			break;
		}
		for (size_t i = ZERO_LANE; i < BYTES; i += LANES)
			if (buf[i] || map[i])
				fail("zero lane, byte %zu: read %u, mapping %u", i, buf[i], map[i]);
		tick(id);
	}
	close(fd);
	return NULL;
}

/* --- map, write, msync, unmap, remap a second file --- */

static void *remapper(void *p)
{
	int id = *(int *)p;
	int fd = open(other_path, O_RDWR);
	for (unsigned long it = 1; !stop; it++) {
		size_t len = (size_t)(1 + it % 16) * PAGE;
		unsigned char *m = (unsigned char *)mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED) {
			fail("remap: mmap: %s", strerror(errno));
			break;
		}
		unsigned char v = (unsigned char)it;
		if (it > 1 && m[0] != (unsigned char)(it - 1))
			fail("remap: page 0 holds %u, the last mapping stored %u", m[0], (unsigned char)(it - 1));
		memset(m, v, len);
		if (msync(m, len, MS_SYNC) || munmap(m, len))
			fail("remap: msync/munmap: %s", strerror(errno));
		tick(id);
	}
	close(fd);
	return NULL;
}

/* --- versions never go backwards --- */

static void *version_checker(void *p)
{
	int id = *(int *)p;
	static uint32_t last[PAGES], now[PAGES];
	while (!stop) {
		if (mversion && mversion(map, BYTES, now) != 0)
			fail("gaia_mversion: %s", strerror(errno));
		for (int q = 0; q < PAGES; q++) {
			if ((int32_t)(now[q] - last[q]) < 0 && !stop)
				fail("page %d: version %u after %u", q, now[q], last[q]);
			last[q] = now[q];
		}
		tick(id);
		usleep(1000);
	}
	return NULL;
}

/* --- the watchdog --- */

/* The stacks of pid and of its child processes (the simulated device's). */
static void dump_tree(pid_t pid)
{
	fprintf(stderr, "stress: process %d:\n", (int)pid);
	dump_stacks(pid);
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	for (struct dirent *e; d && (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		char cpath[320];
		snprintf(cpath, sizeof(cpath), "/proc/%d/task/%s/children", (int)pid, e->d_name);
		FILE *f = fopen(cpath, "r");
		for (int c; f && fscanf(f, "%d", &c) == 1;)
			if (c != peer_pid) {
				fprintf(stderr, "stress: child %d of %d:\n", c, (int)pid);
				dump_stacks(c);
			}
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
}

static void *watchdog(void *p)
{
	double limit = *(double *)p;
	unsigned long seen[16] = {0};
	double last_progress = now_s(), stopped_at = 0;
	/* Until the process ends: a worker that does not return once told to
	 * stop, a peer process that does not exit and exit work that does not
	 * finish are hangs as well. */
	for (;;) {
		usleep(200000);
		if (stop && stopped_at == 0)
			stopped_at = now_s();
		bool moved = false;
		int n = __atomic_load_n(&workers, __ATOMIC_ACQUIRE);
		for (int i = 0; i < n; i++) {
			unsigned long v = __atomic_load_n(&progress[i], __ATOMIC_RELAXED);
			if (v != seen[i]) {
				moved = true;
				seen[i] = v;
			}
		}
		/* Every worker must move; one stuck is a hang too. */
		bool all = true;
		for (int i = 0; i < n; i++)
			all &= seen[i] != 0;
		double t = now_s();
		if (moved && all)
			last_progress = t;
		/* Before the workers start (the device starting up) the limit is
		 * a minute at least. */
		double allowed = n ? limit : (limit > 60 ? limit : 60);
		if ((!stopped_at && t - last_progress > allowed) || (stopped_at && t > stopped_at + allowed) ||
		    (deadline > 0 && t > deadline + allowed)) {
			fprintf(stderr, "stress: watchdog: no progress for %.0f s; workers:", t - last_progress);
			for (int i = 0; i < n; i++)
				fprintf(stderr, " %s=%lu", worker_name[i], seen[i]);
			fprintf(stderr, "\nstress: %s; every thread's stack, of this process, the peer process "
				"and their children (device processes):\n", stopped_at ? "told to stop and not done" : "running");
			dump_tree(getpid());
			if (peer_pid > 0)
				dump_tree(peer_pid);
			fprintf(stderr, "stress: FAIL: hang\n");
			/* Leave nothing behind if the shim still answers (SIGALRM
			 * ends the process if it does not). */
			alarm(10);
			if (peer_pid > 0) {
				kill(peer_pid, SIGKILL);
				waitpid(peer_pid, NULL, 0);
			}
			set_stop();
			/* Anonymous memory over the file's mapping: the shim lets
			 * the file go (and its version table), threads that still
			 * store there do not fault. */
			mmap(map, BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
			unlink(data_path);
			unlink(other_path);
			rmdir(dirname_of_data);
			/* Straight out: a sanitizer's exit work can wait for ever on
			 * the hung threads. */
			syscall(SYS_exit_group, 1);
		}
	}
	return NULL;
}

/* --- the peer process: lane 5 through its own mapping --- */

static int peer(const char *path, double seconds)
{
	int fd = open(path, O_RDWR);
	unsigned char *m = (unsigned char *)mmap(NULL, BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	int (*acquire)(void *, size_t, int) = (int (*)(void *, size_t, int))dlsym(RTLD_DEFAULT, "gaia_macquire");
	int (*ver)(const void *, size_t, uint32_t *) =
		(int (*)(const void *, size_t, uint32_t *))dlsym(RTLD_DEFAULT, "gaia_mversion");
	static uint32_t last[PAGES], now[PAGES];
	if (m == MAP_FAILED)
		return 1;
	struct lane_arg a = {0, PEER_LANE, m};
	pthread_t t;
	double end = now_s() + seconds;
	pthread_create(&t, NULL, lane_writer, &a);
	unsigned long rounds = 0;
	while (!stop && now_s() < end) {
		if (acquire && acquire(m, BYTES, -1))
			fail("peer: acquire: %s", strerror(errno));
		if (ver && ver(m, BYTES, now) == 0)
			for (int q = 0; q < PAGES; q++) {
				if ((int32_t)(now[q] - last[q]) < 0)
					fail("peer: page %d: version %u after %u", q, now[q], last[q]);
				last[q] = now[q];
			}
		rounds++;
		usleep(2000);
	}
	set_stop();
	pthread_join(t, NULL);
	printf("stress: peer: %lu acquires, %lu lane-5 rounds\n", rounds, progress[0]);
	return __atomic_load_n(&failed_flag, __ATOMIC_RELAXED);
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "peer")) {
		prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0); /* gdb, for the parent's watchdog */
		return peer(argv[2], atof(argv[3]));
	}
	double seconds = getenv("STRESS_SECONDS") ? atof(getenv("STRESS_SECONDS")) : 8;
	double watchdog_s = getenv("STRESS_WATCHDOG_S") ? atof(getenv("STRESS_WATCHDOG_S")) : 30;
	prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0); /* gdb, for the watchdog */
	mversion = (int (*)(const void *, size_t, uint32_t *))dlsym(RTLD_DEFAULT, "gaia_mversion");

	char dir[] = "/tmp/stress.XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	snprintf(dirname_of_data, sizeof(dirname_of_data), "%s", dir);
	snprintf(data_path, sizeof(data_path), "%s/data", dir);
	snprintf(other_path, sizeof(other_path), "%s/other", dir);
	data_fd = open(data_path, O_RDWR | O_CREAT, 0644);
	int ofd = open(other_path, O_RDWR | O_CREAT, 0644);
	if (data_fd < 0 || ofd < 0 || ftruncate(data_fd, BYTES) || ftruncate(ofd, 16 * PAGE))
		return 1;
	close(ofd);
	map = (unsigned char *)mmap(NULL, BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, data_fd, 0);
	if (map == MAP_FAILED)
		return 1;
	deadline = now_s() + seconds;
	pthread_t dog;
	pthread_create(&dog, NULL, watchdog, &watchdog_s);
	if (cudaSetDevice(0) != cudaSuccess) {
		fprintf(stderr, "stress: no (simulated) GPU\n");
		return 1;
	}
	printf("stress: %.0f s, watchdog %.0f s, %d CPU lanes + pwrite + peer process + GPU + reader + remapper + "
	       "version checker\n", seconds, watchdog_s, CPU_LANES);
	fflush(stdout);

	peer_pid = fork();
	if (peer_pid == 0) {
		char s[32];
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		snprintf(s, sizeof(s), "%f", seconds);
		execl(argv[0], argv[0], "peer", data_path, s, (char *)NULL);
		_exit(127);
	}

	pthread_t threads[16];
	int nworkers = 0;
	struct lane_arg lanes[CPU_LANES];
	int ids[16];
	for (int i = 0; i < CPU_LANES; i++) {
		lanes[i] = (struct lane_arg){nworkers, (unsigned)i, map};
		worker_name[nworkers] = "cpu_lane";
		pthread_create(&threads[nworkers], NULL, lane_writer, &lanes[i]);
		nworkers++;
	}
	static const struct {
		const char *name;
		void *(*fn)(void *);
	} others[] = {{"pwrite", io_writer}, {"gpu", gpu_worker}, {"reader", reader},
		      {"remap", remapper}, {"versions", version_checker}};
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		ids[nworkers] = nworkers;
		worker_name[nworkers] = others[i].name;
		pthread_create(&threads[nworkers], NULL, others[i].fn, &ids[nworkers]);
		nworkers++;
	}
	__atomic_store_n(&workers, nworkers, __ATOMIC_RELEASE);
	while (!stop && now_s() < deadline)
		usleep(50000);
	set_stop();
	for (int i = 0; i < nworkers; i++)
		pthread_join(threads[i], NULL);
	int status;
	waitpid(peer_pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail("the peer process failed (status %d)", status);
	/* the watchdog stays: the rest of the exit may hang too */

	printf("stress: progress:");
	for (int i = 0; i < nworkers; i++)
		printf(" %s=%lu", worker_name[i], progress[i]);
	printf("\n");
	munmap(map, BYTES);
	close(data_fd);
	unlink(data_path);
	unlink(other_path);
	rmdir(dir);
	int failed = __atomic_load_n(&failed_flag, __ATOMIC_RELAXED);
	printf("stress: %s\n", failed ? "FAILED" : "ok");
	return failed;
}
