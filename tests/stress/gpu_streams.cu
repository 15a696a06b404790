/* Stress of the GPU side under the shim, bounded in time (STRESS_SECONDS,
 * default 8): several threads launching on their own streams against one
 * mapped file while CPU threads store, write(), msync, madvise and remap
 * it, and a second process with its own device replica writes it too.
 * Every byte has one writer (its "lane": byte i belongs to lane i % 8) and
 * each writer checks, all the time, that what it wrote is there:
 *   lane 0  a thread launching on a non-blocking stream, then
 *           cudaStreamSynchronize: its lane, everywhere, holds the value
 *           through the mapping and through pread (DESIGN §1 promise 2)
 *   lane 1  the same on a blocking stream, synced with an event
 *   lane 2  a thread launching on the legacy stream a kernel that writes
 *           lane 2 and checks on the device that lane 3 holds at least
 *           what the CPU had stored before the launch (promise 1)
 *   lane 3  a CPU thread storing a counter into lane 3 of every page,
 *           msync and madvise(MADV_PAGEOUT) now and then, publishing the
 *           counter after each round
 *   lane 4  a thread writing single bytes with lseek+write and checking
 *           them through the mapping and pread
 *   lane 5  a thread mapping the file again, launching a kernel through
 *           the new mapping on a non-blocking stream, syncing, checking
 *           through both mappings, and unmapping it (replicas come and go
 *           while the others launch)
 *   lane 6  another process under the shim with its own mapping and GPU:
 *           launch, sync, msync, check; and the versions of its pages
 *           (gaia_mversion, from the shared table) never go backwards
 *   lane 7  a CPU thread storing into random pages (faulting the pages
 *           the others write) and checking all of its lane
 * plus a thread checking this process's versions never go backwards.
 * A watchdog turns a hang into a failure: when a worker (the other
 * process's included) made no progress for STRESS_WATCHDOG_S seconds
 * (default 30) it prints every thread's stack of both processes (gdb when
 * present, else backtrace() from each thread of this one) and exits 1.
 * STRESS_HANG=1 makes the lane 7 worker hang, to show the watchdog works.
 *
 *   gpu_streams              the test (starts the other process)
 *   gpu_streams peer FILE    (run by the test)
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
#define PAGES 64
#define BYTES ((size_t)PAGES * PAGE)
#define LANES 8
#define MAX_WORKERS 16

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

__global__ void write_lane(unsigned char *p, unsigned long long n, unsigned lane, unsigned char v)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (i = i * LANES + lane; i < n; i += (unsigned long long)gridDim.x * blockDim.x * LANES)
		p[i] = v;
}
SIMGPU_KERNEL(write_lane);

/* Writes lane `lane`, and records how far past `floor` (8-bit counters,
 * modulo 256) the bytes of lane `watch` are: the largest distance, and
 * where. */
__global__ void write_and_watch(unsigned char *p, unsigned long long n, unsigned lane, unsigned char v,
				unsigned watch, unsigned char floor, unsigned *ahead)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	unsigned long long step = (unsigned long long)gridDim.x * blockDim.x * LANES;
	for (unsigned long long k = i * LANES; k < n; k += step) {
		p[k + lane] = v;
		unsigned d = (unsigned char)(p[k + watch] - floor);
		if (atomicMax(&ahead[0], d) < d)
			ahead[1] = (unsigned)(k + watch);
	}
}
SIMGPU_KERNEL(write_and_watch);

/* Shared with the other process (an anonymous shared mapping made before
 * the fork). */
struct shared_state {
	int stop, failed, finished;
	unsigned long progress[MAX_WORKERS];
};
static struct shared_state *sh;
static const char *worker_name[MAX_WORKERS];
static bool worker_gpu[MAX_WORKERS]; /* its rounds use the GPU */
static int nworkers;
static unsigned char *map;
static int data_fd;
static char data_path[256], dir_path[256];
static pid_t peer_pid; /* set after the watchdog starts: atomics */
static unsigned long published3; /* lane 3's last completed round */

#define stopping() __atomic_load_n(&sh->stop, __ATOMIC_RELAXED)

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "gpu_streams: FAIL: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	__atomic_store_n(&sh->failed, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELAXED);
}

static void tick(int id)
{
	__atomic_add_fetch(&sh->progress[id], 1, __ATOMIC_RELAXED);
}

/* Lane `lane` of every page of m holds v (through the mapping), and of a
 * few pages through pread too. */
static bool lane_holds(const unsigned char *m, unsigned lane, unsigned char v, const char *who, uint64_t *seed)
{
	for (size_t i = lane; i < BYTES; i += LANES)
		if (m[i] != v) {
			fail("%s: byte %zu (page %zu) is %u through the mapping after the sync, wrote %u", who, i,
			     i / PAGE, m[i], v);
			return false;
		}
	unsigned char buf[PAGE];
	unsigned page = (unsigned)(rnd(seed) % PAGES);
	if (pread(data_fd, buf, PAGE, (off_t)page * PAGE) != PAGE) {
		fail("%s: pread: %s", who, strerror(errno));
		return false;
	}
	for (size_t i = lane; i < PAGE; i += LANES)
		if (buf[i] != v) {
			fail("%s: page %u byte %zu is %u through pread after the sync, wrote %u", who, page, i,
			     buf[i], v);
			return false;
		}
	return true;
}

/* --- lanes 0 and 1: kernels on a stream of their own --- */

struct gpu_arg {
	int id;
	unsigned lane;
	bool use_event; /* blocking stream, event sync; else non-blocking, stream sync */
};

static void *stream_worker(void *p)
{
	struct gpu_arg *a = (struct gpu_arg *)p;
	char who[32];
	snprintf(who, sizeof(who), "lane %u", a->lane);
	cudaStream_t s;
	cudaEvent_t done;
	uint64_t seed = 77 + a->lane;
	if (cudaSetDevice(0) != cudaSuccess ||
	    (a->use_event ? cudaStreamCreate(&s) : cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) ||
	    cudaEventCreateWithFlags(&done, cudaEventDisableTiming)) {
		fail("%s: stream set-up", who);
		return NULL;
	}
	for (unsigned long it = 1; !stopping(); it++) {
		unsigned char v = (unsigned char)(1 + it % 250);
		SIMGPU_LAUNCH(write_lane, 8, 64, 0, s)(map, (unsigned long long)BYTES, a->lane, v);
		cudaError_t e = a->use_event ? cudaEventRecord(done, s) : cudaSuccess;
		if (e == cudaSuccess)
			e = a->use_event ? cudaEventSynchronize(done) : cudaStreamSynchronize(s);
		if (e != cudaSuccess) {
			fail("%s: %s", who, cudaGetErrorName(e));
			break;
		}
		if (!lane_holds(map, a->lane, v, who, &seed))
			break;
		tick(a->id);
	}
	cudaEventDestroy(done);
	cudaStreamDestroy(s);
	return NULL;
}

/* --- lane 2: the legacy stream, and what the device sees of lane 3 --- */

static void *legacy_worker(void *p)
{
	int id = *(int *)p;
	unsigned *ahead = NULL, seen[2] = {0, 0};
	uint64_t seed = 5;
	if (cudaSetDevice(0) != cudaSuccess || cudaMalloc((void **)&ahead, sizeof(seen))) {
		fail("lane 2: set-up");
		return NULL;
	}
	for (unsigned long it = 1; !stopping(); it++) {
		unsigned char v = (unsigned char)(1 + it % 250);
		/* Every byte of lane 3 holds a round from `floor` (stored
		 * before the launch) to `last` (stored by the sync). */
		unsigned long floor = __atomic_load_n(&published3, __ATOMIC_ACQUIRE);
		cudaError_t e = cudaMemset(ahead, 0, sizeof(seen));
		if (e == cudaSuccess) {
			SIMGPU_LAUNCH(write_and_watch, 8, 64, 0, 0)(map, (unsigned long long)BYTES, 2, v, 3,
								  (unsigned char)floor, ahead);
			e = cudaDeviceSynchronize();
		}
		if (e == cudaSuccess)
			e = cudaMemcpy(seen, ahead, sizeof(seen), cudaMemcpyDeviceToHost);
		if (e != cudaSuccess) {
			fail("lane 2: %s", cudaGetErrorName(e));
			break;
		}
		unsigned long last = __atomic_load_n(&published3, __ATOMIC_ACQUIRE) + 1;
		/* More than 255 rounds apart the 8-bit values say nothing. */
		if (last - floor < 255 && seen[0] > last - floor) {
			fail("lane 2: the kernel saw byte %u of lane 3 at round floor%+d (floor %lu = %u), the CPU "
			     "had stored rounds %lu to %lu", seen[1], (int)(signed char)seen[0], floor,
			     (unsigned char)floor, floor, last);
			break;
		}
		if (!lane_holds(map, 2, v, "lane 2", &seed))
			break;
		tick(id);
	}
	cudaFree(ahead);
	return NULL;
}

/* --- lane 3: CPU rounds over every page --- */

static void *round_writer(void *p)
{
	int id = *(int *)p;
	uint64_t seed = 99;
	for (unsigned long it = 1; !stopping(); it++) {
		unsigned char v = (unsigned char)it;
		for (size_t i = 3; i < BYTES; i += LANES)
			map[i] = v;
		if (it % 8 == 0 && msync(map, BYTES, MS_SYNC))
			fail("lane 3: msync: %s", strerror(errno));
		if (it % 16 == 0) { /* pages leave the page tables; data stays */
			unsigned first = (unsigned)(rnd(&seed) % PAGES), n = 1 + (unsigned)(rnd(&seed) % 8);
			if (first + n > PAGES)
				n = PAGES - first;
			madvise(map + (size_t)first * PAGE, (size_t)n * PAGE, MADV_PAGEOUT);
		}
		__atomic_store_n(&published3, it, __ATOMIC_RELEASE);
		for (size_t i = 3; i < BYTES; i += LANES)
			if (map[i] != v) {
				fail("lane 3: byte %zu is %u, stored %u", i, map[i], v);
				return NULL;
			}
		tick(id);
		usleep(200);
	}
	return NULL;
}

/* --- lane 4: write() through a descriptor of its own --- */

static void *write_worker(void *p)
{
	int id = *(int *)p;
	int fd = open(data_path, O_RDWR);
	uint64_t seed = 4242;
	unsigned char buf[PAGE];
	for (unsigned long it = 1; fd >= 0 && !stopping(); it++) {
		unsigned char v = (unsigned char)(1 + it % 250);
		unsigned page = (unsigned)(rnd(&seed) % PAGES), first = (unsigned)(rnd(&seed) % (PAGE / LANES - 8));
		for (unsigned k = first; k < first + 8; k++) {
			off_t off = (off_t)page * PAGE + k * LANES + 4;
			if (lseek(fd, off, SEEK_SET) != off || write(fd, &v, 1) != 1)
				fail("lane 4: write: %s", strerror(errno));
		}
		if (pread(fd, buf, PAGE, (off_t)page * PAGE) != PAGE)
			fail("lane 4: pread: %s", strerror(errno));
		for (unsigned k = first; k < first + 8 && !stopping(); k++)
			if (buf[k * LANES + 4] != v || map[(size_t)page * PAGE + k * LANES + 4] != v)
				fail("lane 4: page %u byte %u: pread %u, mapping %u, wrote %u", page, k * LANES + 4,
				     buf[k * LANES + 4], map[(size_t)page * PAGE + k * LANES + 4], v);
		tick(id);
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

/* --- lane 5: a second mapping of the file, made and unmade --- */

static void *remap_worker(void *p)
{
	int id = *(int *)p;
	cudaStream_t s;
	uint64_t seed = 555;
	if (cudaSetDevice(0) != cudaSuccess || cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) {
		fail("lane 5: set-up");
		return NULL;
	}
	for (unsigned long it = 1; !stopping(); it++) {
		unsigned char v = (unsigned char)(1 + it % 250);
		unsigned char *m2 = (unsigned char *)mmap(NULL, BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, data_fd, 0);
		if (m2 == MAP_FAILED) {
			fail("lane 5: mmap: %s", strerror(errno));
			break;
		}
		SIMGPU_LAUNCH(write_lane, 8, 64, 0, s)(m2, (unsigned long long)BYTES, 5, v);
		cudaError_t e = cudaStreamSynchronize(s);
		if (e != cudaSuccess)
			fail("lane 5: %s", cudaGetErrorName(e));
		bool ok = e == cudaSuccess && lane_holds(m2, 5, v, "lane 5 (second mapping)", &seed) &&
			  lane_holds(map, 5, v, "lane 5 (first mapping)", &seed);
		if (munmap(m2, BYTES))
			fail("lane 5: munmap: %s", strerror(errno));
		if (!ok)
			break;
		tick(id);
	}
	cudaStreamDestroy(s);
	return NULL;
}

/* --- lane 7: CPU stores into random pages --- */

static void *page_writer(void *p)
{
	int id = *(int *)p;
	unsigned char shadow[PAGES] = {0};
	uint64_t seed = 0x777;
	if (getenv("STRESS_HANG")) { /* a worker that hangs */
		pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
		pthread_mutex_lock(&m);
		pthread_mutex_lock(&m);
	}
	for (unsigned long it = 1; !stopping(); it++) {
		unsigned page = (unsigned)(rnd(&seed) % PAGES);
		unsigned char v = (unsigned char)(1 + it % 250);
		for (size_t i = 7; i < PAGE; i += LANES)
			map[(size_t)page * PAGE + i] = v;
		shadow[page] = v;
		if (it % 32 == 0 && msync(map + (size_t)page * PAGE, PAGE, MS_SYNC))
			fail("lane 7: msync: %s", strerror(errno));
		if (it % 8 == 0)
			for (unsigned q = 0; q < PAGES; q++)
				for (size_t i = 7; i < PAGE; i += LANES)
					if (map[(size_t)q * PAGE + i] != shadow[q]) {
						fail("lane 7: page %u byte %zu is %u, stored %u", q, i,
						     map[(size_t)q * PAGE + i], shadow[q]);
						return NULL;
					}
		tick(id);
	}
	return NULL;
}

/* --- versions never go backwards --- */

typedef int (*mversion_fn)(const void *, size_t, uint32_t *);

static bool versions_forward(mversion_fn ver, const unsigned char *m, uint32_t *last, const char *who)
{
	uint32_t now[PAGES];
	if (!ver)
		return true;
	if (ver(m, BYTES, now)) {
		fail("%s: gaia_mversion: %s", who, strerror(errno));
		return false;
	}
	for (int q = 0; q < PAGES; q++) {
		if ((int32_t)(now[q] - last[q]) < 0 && !stopping()) {
			fail("%s: page %d: version %u after %u", who, q, now[q], last[q]);
			return false;
		}
		last[q] = now[q];
	}
	return true;
}

static void *version_watcher(void *p)
{
	int id = *(int *)p;
	mversion_fn ver = (mversion_fn)dlsym(RTLD_DEFAULT, "gaia_mversion");
	uint32_t last[PAGES] = {0};
	while (!stopping() && versions_forward(ver, map, last, "versions")) {
		tick(id);
		usleep(1000);
	}
	return NULL;
}

/* --- lane 6: the other process --- */

static int peer(const char *path, int id)
{
	int fd = open(path, O_RDWR);
	unsigned char *m = (unsigned char *)mmap(NULL, BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	mversion_fn ver = (mversion_fn)dlsym(RTLD_DEFAULT, "gaia_mversion");
	uint32_t last[PAGES] = {0};
	if (fd < 0 || m == MAP_FAILED || cudaSetDevice(0) != cudaSuccess) {
		fail("peer: set-up");
		return 1;
	}
	for (unsigned long it = 1; !stopping(); it++) {
		unsigned char v = (unsigned char)(1 + it % 250);
		SIMGPU_LAUNCH(write_lane, 8, 64, 0, 0)(m, (unsigned long long)BYTES, 6, v);
		cudaError_t e = cudaDeviceSynchronize();
		if (e != cudaSuccess) {
			fail("peer: %s", cudaGetErrorName(e));
			break;
		}
		if (it % 4 == 0 && msync(m, BYTES, MS_SYNC))
			fail("peer: msync: %s", strerror(errno));
		for (size_t i = 6; i < BYTES; i += LANES)
			if (m[i] != v) {
				fail("peer: lane 6, byte %zu is %u after the sync, wrote %u", i, m[i], v);
				break;
			}
		if (!versions_forward(ver, m, last, "peer"))
			break;
		tick(id);
	}
	munmap(m, BYTES);
	close(fd);
	return __atomic_load_n(&sh->failed, __ATOMIC_RELAXED);
}

/* --- the watchdog --- */

struct watch_arg {
	double limit, deadline;
};

static void *watchdog(void *p)
{
	struct watch_arg *w = (struct watch_arg *)p;
	unsigned long seen[MAX_WORKERS] = {0};
	double last_move[MAX_WORKERS];
	double start = now_s();
	for (int i = 0; i < MAX_WORKERS; i++)
		last_move[i] = start;
	while (!__atomic_load_n(&sh->finished, __ATOMIC_ACQUIRE)) {
		usleep(200000);
		double t = now_s();
		int stuck = -1;
		for (int i = 0; i < nworkers && !stopping(); i++) {
			unsigned long v = __atomic_load_n(&sh->progress[i], __ATOMIC_RELAXED);
			if (v != seen[i]) {
				seen[i] = v;
				last_move[i] = t;
			}
			/* A GPU worker's first round starts a device process: a
			 * minute for that, on a loaded machine. */
			double allowed = seen[i] || !worker_gpu[i] ? w->limit : (w->limit > 60 ? w->limit : 60);
			if (t - last_move[i] > allowed && stuck < 0)
				stuck = i;
		}
		if (stuck < 0 && t < w->deadline + (w->limit > 60 ? w->limit : 60))
			continue;
		fprintf(stderr, "gpu_streams: watchdog: no progress for %.0f s by %s; workers:",
			stuck >= 0 ? t - last_move[stuck] : t - w->deadline, stuck >= 0 ? worker_name[stuck] : "the end");
		for (int i = 0; i < nworkers; i++)
			fprintf(stderr, " %s=%lu", worker_name[i], seen[i]);
		fprintf(stderr, "\ngpu_streams: every thread's stack:\n");
		dump_stacks(getpid());
		pid_t peer_now = __atomic_load_n(&peer_pid, __ATOMIC_ACQUIRE);
		if (peer_now > 0 && kill(peer_now, 0) == 0 && waitpid(peer_now, NULL, WNOHANG) == 0) {
			fprintf(stderr, "gpu_streams: the other process's threads:\n");
			dump_stacks(peer_now);
		}
		fprintf(stderr, "gpu_streams: FAIL: hang\n");
		/* Leave nothing behind (SIGALRM ends this if the shim hangs too). */
		alarm(10);
		if (peer_now > 0) {
			kill(peer_now, SIGKILL);
			waitpid(peer_now, NULL, 0);
		}
		__atomic_store_n(&sh->stop, 1, __ATOMIC_RELAXED);
		/* Anonymous memory over the file's mapping: the shim lets the
		 * file go, threads still storing there do not fault. */
		mmap(map, BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		unlink(data_path);
		rmdir(dir_path);
		/* Straight out: a sanitizer's exit can wait for ever on the hung
		 * threads. */
		syscall(SYS_exit_group, 1);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "peer")) {
		/* The shared state comes as the descriptor named in argv[3]. */
		sh = (struct shared_state *)mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED,
						 atoi(argv[3]), 0);
		if (sh == MAP_FAILED)
			return 1;
		return peer(argv[2], atoi(argv[4]));
	}
	double seconds = getenv("STRESS_SECONDS") ? atof(getenv("STRESS_SECONDS")) : 8;
	struct watch_arg wa = {getenv("STRESS_WATCHDOG_S") ? atof(getenv("STRESS_WATCHDOG_S")) : 30, 0};
	prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0); /* gdb, for the watchdog */

	/* The state both processes share: a memfd, inherited by the other
	 * process across its exec. */
	int sfd = memfd_create("gpu_streams-state", 0);
	if (sfd < 0 || ftruncate(sfd, sizeof(*sh)))
		return 1;
	sh = (struct shared_state *)mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED, sfd, 0);
	if (sh == MAP_FAILED)
		return 1;

	char dir[] = "/tmp/gpu_streams.XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	snprintf(dir_path, sizeof(dir_path), "%s", dir);
	snprintf(data_path, sizeof(data_path), "%s/data", dir);
	data_fd = open(data_path, O_RDWR | O_CREAT, 0644);
	if (data_fd < 0 || ftruncate(data_fd, BYTES))
		return 1;
	map = (unsigned char *)mmap(NULL, BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, data_fd, 0);
	if (map == MAP_FAILED)
		return 1;

	static const struct {
		const char *name;
		void *(*fn)(void *);
		bool gpu;
	} kinds[] = {{"lane0_stream", stream_worker, true}, {"lane1_event", stream_worker, true},
		     {"lane2_legacy", legacy_worker, true}, {"lane3_rounds", round_writer, false},
		     {"lane4_write", write_worker, false},  {"lane5_remap", remap_worker, true},
		     {"lane7_pages", page_writer, false},   {"versions", version_watcher, false}};
	const int NKINDS = (int)(sizeof(kinds) / sizeof(kinds[0]));
	int peer_id = NKINDS;
	for (int i = 0; i < NKINDS; i++) {
		worker_name[i] = kinds[i].name;
		worker_gpu[i] = kinds[i].gpu;
	}
	worker_name[peer_id] = "peer_lane6";
	worker_gpu[peer_id] = true;
	nworkers = NKINDS + 1;

	wa.deadline = now_s() + seconds;
	pthread_t dog;
	pthread_create(&dog, NULL, watchdog, &wa);
	printf("gpu_streams: %.0f s, watchdog %.0f s: kernels on a non-blocking stream, a blocking stream "
	       "(event sync), the legacy stream and a remapped second mapping; CPU rounds with msync and "
	       "madvise; write(); random-page stores; a second process with its own GPU replica\n",
	       seconds, wa.limit);
	fflush(stdout);

	pid_t child = fork();
	if (child == 0) {
		char a[16], b[16];
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		snprintf(a, sizeof(a), "%d", sfd);
		snprintf(b, sizeof(b), "%d", peer_id);
		execl(argv[0], argv[0], "peer", data_path, a, b, (char *)NULL);
		_exit(127);
	}
	__atomic_store_n(&peer_pid, child, __ATOMIC_RELEASE);

	pthread_t th[NKINDS];
	int ids[NKINDS];
	struct gpu_arg g[2] = {{0, 0, false}, {1, 1, true}};
	for (int i = 0; i < NKINDS; i++) {
		ids[i] = i;
		pthread_create(&th[i], NULL, kinds[i].fn, i < 2 ? (void *)&g[i] : (void *)&ids[i]);
	}
	while (!stopping() && now_s() < wa.deadline)
		usleep(50000);
	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < NKINDS; i++)
		pthread_join(th[i], NULL);
	int status;
	waitpid(child, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail("the other process ended with status %#x", status);
	__atomic_store_n(&sh->finished, 1, __ATOMIC_RELEASE);
	pthread_join(dog, NULL);

	printf("gpu_streams: rounds:");
	for (int i = 0; i < nworkers; i++)
		printf(" %s=%lu", worker_name[i], sh->progress[i]);
	printf("\n");
	bool idle = false;
	for (int i = 0; i < nworkers; i++)
		idle |= sh->progress[i] == 0;
	if (idle && !sh->failed)
		fail("a worker never completed a round");
	munmap(map, BYTES);
	close(data_fd);
	unlink(data_path);
	rmdir(dir);
	int failed = __atomic_load_n(&sh->failed, __ATOMIC_RELAXED);
	printf("gpu_streams: %s\n", failed ? "FAILED" : "ok");
	return failed;
}
