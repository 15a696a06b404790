/* full_device — a sync that releases while kernels fill the device must not
 * hold up another thread's mmap, munmap or read.
 *
 *   stream b: `work` writes bytes of an mmap'ed file;
 *   stream a: `fill` (after b's work, by an event) occupies every thread
 *             slot of the device (SM count x threads per SM, in blocks of
 *             256) and spins until the host sets a flag, then writes a
 *             marker into the file;
 *   the main thread syncs b alone: a snapshot release, whose comparison
 *             of the device's pages is a kernel that finds no room until
 *             fill ends;
 *   another thread, meanwhile, maps and unmaps a second file and reads the
 *             first with pread(), then sets the flag.
 * That thread must be done in well under a second: nothing it does needs
 * the device. A third thread sets the flag after 3 s whatever happened,
 * so a thread held up fails the test instead of hanging it. The main
 * thread must then see work's bytes (mapping and pread), and after
 * syncing a the marker.
 *
 * `full_device note`: the helper leaves the flag alone and fill runs for
 * NOTE_MS; the shim must say on stderr, after 5 s, what the sync waits
 * for (the helper is still done at once).
 */
#include <pthread.h>
#include <time.h>

#include "programs.h"

#define NB (8 * PAGE)
#define MARK_BYTES 64
#define WORK_FROM PAGE
#define WORK_TO (3 * PAGE)
#define FILL_BLOCK 256
#define HELD_UP_MS 3000
#define BOUND_MS 1000
#define NOTE_MS 6500

__global__ void work(unsigned char *m, unsigned long long from, unsigned long long to)
{
	unsigned long long i = from + (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < to; i += (unsigned long long)gridDim.x * blockDim.x)
		m[i] = (unsigned char)(i * 7 + 3);
}
SIMGPU_KERNEL(work);

/* Every thread spins, so the whole block stays resident. Block 0 writes the
 * marker once the flag is set. */
__global__ void fill(volatile int *flag, volatile int *arrived, unsigned char *mark, long long give_up_ns)
{
	if (threadIdx.x == 0)
		arrived[blockIdx.x] = 1;
	long long t0 = device_ns();
	while (*flag != 1)
		if (device_ns() - t0 > give_up_ns)
			return;
	if (blockIdx.x == 0 && threadIdx.x == 0)
		for (int i = 0; i < MARK_BYTES; i++)
			mark[i] = (unsigned char)(0xc0 + i);
}
SIMGPU_KERNEL(fill);

static unsigned char initial(size_t i)
{
	return (unsigned char)(i % 251);
}

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static volatile int *flag;
static int file_fd;
static volatile int syncing, helper_done, held_up;
static int note_mode; /* `note`: fill runs NOTE_MS whatever the helper does */
static const char *held_at;
static double helper_ms;
static const char *helper_step = "not started"; /* atomic: the other threads read it */

static void helper_at(const char *what)
{
	__atomic_store_n(&helper_step, what, __ATOMIC_RELEASE);
}

/* The flag fill spins on, set from either of two threads. */
static void set_flag(void)
{
	__atomic_store_n((int *)flag, 1, __ATOMIC_RELEASE);
}

/* What another thread of the program does while the main thread syncs. */
static void *helper(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&syncing, __ATOMIC_ACQUIRE))
		usleep(1000);
	usleep(300 * 1000); /* the main thread is inside the sync by now */
	double t0 = now_ms();
	helper_at("mapping a second file");
	int fd2 = make_file(2 * PAGE, initial);
	unsigned char *m2 = (unsigned char *)map_file(fd2, 2 * PAGE);
	helper_at("writing the second file's mapping");
	m2[5] = 0x42;
	helper_at("unmapping the second file");
	CHECK(munmap(m2, 2 * PAGE) == 0, "munmap: %s", strerror(errno));
	close(fd2);
	helper_at("pread() of the first file");
	unsigned char buf[PAGE];
	pread_all(file_fd, buf, PAGE, 0);
	helper_ms = now_ms() - t0;
	helper_at("done");
	__atomic_store_n(&helper_done, 1, __ATOMIC_RELEASE);
	if (!note_mode)
		set_flag();
	return NULL;
}

/* Lets fill end after HELD_UP_MS, should the helper be held up. */
static void *release_anyway(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&syncing, __ATOMIC_ACQUIRE))
		usleep(1000);
	double t0 = now_ms();
	if (note_mode) {
		while (now_ms() - t0 < NOTE_MS)
			usleep(1000);
		held_at = __atomic_load_n(&helper_step, __ATOMIC_ACQUIRE);
		held_up = !__atomic_load_n(&helper_done, __ATOMIC_ACQUIRE);
		set_flag();
		return NULL;
	}
	while (!__atomic_load_n(&helper_done, __ATOMIC_ACQUIRE) && now_ms() - t0 < HELD_UP_MS)
		usleep(1000);
	if (!__atomic_load_n(&helper_done, __ATOMIC_ACQUIRE)) {
		held_at = __atomic_load_n(&helper_step, __ATOMIC_ACQUIRE);
		held_up = 1;
		set_flag();
	}
	return NULL;
}

static void check_bytes(const char *when, const unsigned char *m, int marked)
{
	unsigned char *buf = (unsigned char *)malloc(NB);
	pread_all(file_fd, buf, NB, 0);
	for (size_t i = 0; i < NB; i++) {
		unsigned char want = initial(i);
		if (i < MARK_BYTES && marked)
			want = (unsigned char)(0xc0 + i);
		else if (i >= WORK_FROM && i < WORK_TO)
			want = (unsigned char)(i * 7 + 3);
		CHECK(m[i] == want, "%s: byte %zu through the mapping is %#x, want %#x", when, i, m[i], want);
		CHECK(buf[i] == want, "%s: byte %zu read with pread() is %#x, want %#x", when, i, buf[i], want);
	}
	free(buf);
}

/* In `note` mode stderr is a file: at exit, what it holds (a failed
 * check's message too) goes to the real stderr. */
static char log_path[] = "/tmp/full_device_stderr_XXXXXX";
static int real_stderr = -1;

static void show_log(void)
{
	int fd = open(log_path, O_RDONLY);
	char buf[4096];
	ssize_t n;
	while (fd >= 0 && (n = read(fd, buf, sizeof(buf))) > 0)
		(void)!write(real_stderr, buf, (size_t)n);
	if (fd >= 0)
		close(fd);
	unlink(log_path);
}

int main(int argc, char **argv)
{
	note_mode = argc > 1 && !strcmp(argv[1], "note");
	CHECK(argc == 1 || note_mode, "usage: full_device [note]");
	if (note_mode) {
		/* stderr goes to a file too, to find the shim's note in it. */
		int log = mkstemp(log_path);
		CHECK(log >= 0, "mkstemp: %s", strerror(errno));
		real_stderr = dup(2);
		CHECK(real_stderr >= 0, "dup: %s", strerror(errno));
		CHECK(dup2(log, 2) == 2, "dup2: %s", strerror(errno));
		close(log);
		atexit(show_log);
	}
	watchdog(60);
	CUDA_OK(cudaSetDevice(0));
	int sms = 0, threads_per_sm = 0;
	CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
	CUDA_OK(cudaDeviceGetAttribute(&threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, 0));
	int per_sm = threads_per_sm / FILL_BLOCK;
	CHECK(sms > 0 && per_sm > 0, "device reports %d SMs, %d threads per SM", sms, threads_per_sm);
	unsigned grid = (unsigned)(sms * per_sm);

	int *f;
	volatile int *arrived;
	CUDA_OK(cudaMallocManaged((void **)&f, sizeof(int), cudaMemAttachGlobal));
	CUDA_OK(cudaMallocManaged((void **)&arrived, grid * sizeof(int), cudaMemAttachGlobal));
	flag = f;
	/* Both kernels loaded before fill spins (CUDA's lazy loading would
	 * make a first launch wait for the device). */
	unsigned char *scratch;
	CUDA_OK(cudaMalloc((void **)&scratch, MARK_BYTES));
	*flag = 1;
	SIMGPU_LAUNCH(fill, 1, 1, 0, 0)(flag, arrived, scratch, 0ll);
	SIMGPU_LAUNCH(work, 1, 1, 0, 0)(scratch, 0ull, 0ull);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	CUDA_OK(cudaFree(scratch));
	*flag = 0;
	for (unsigned i = 0; i < grid; i++)
		arrived[i] = 0;

	file_fd = make_file(NB, initial);
	unsigned char *m = (unsigned char *)map_file(file_fd, NB);
	cudaStream_t a, b;
	cudaEvent_t b_done;
	CUDA_OK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
	CUDA_OK(cudaStreamCreate(&b));
	CUDA_OK(cudaEventCreateWithFlags(&b_done, cudaEventDisableTiming));

	step = "launching work on b, then fill on a after it";
	SIMGPU_LAUNCH(work, 8, 128, 0, b)(m, (unsigned long long)WORK_FROM, (unsigned long long)WORK_TO);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaEventRecord(b_done, b));
	CUDA_OK(cudaStreamWaitEvent(a, b_done, 0));
	SIMGPU_LAUNCH(fill, grid, FILL_BLOCK, 0, a)(flag, arrived, m, 30ll * 1000 * 1000 * 1000);
	CUDA_OK(cudaGetLastError());

	/* Every SM runs a block of fill (the simulated device's SMs are its
	 * workers: the blocks past them wait for one). */
	step = "waiting for fill to occupy the device";
	for (;;) {
		unsigned n = 0;
		for (unsigned i = 0; i < grid; i++)
			n += arrived[i] != 0;
		if (n >= (unsigned)sms)
			break;
		usleep(1000);
	}
	usleep(100 * 1000);

	pthread_t h, r;
	CHECK(pthread_create(&h, NULL, helper, NULL) == 0, "pthread_create");
	CHECK(pthread_create(&r, NULL, release_anyway, NULL) == 0, "pthread_create");
	step = "cudaStreamSynchronize(b) while fill occupies the device";
	__atomic_store_n(&syncing, 1, __ATOMIC_RELEASE);
	CUDA_OK(cudaStreamSynchronize(b));
	pthread_join(h, NULL);
	pthread_join(r, NULL);
	CHECK(!held_up, "another thread was held up for %d ms (at: %s) while this one synced stream b and a "
		  "kernel filled the device; nothing it did needs the device", note_mode ? NOTE_MS : HELD_UP_MS,
		  held_at);
	if (note_mode) {
		FILE *log_file = fopen(log_path, "r");
		CHECK(log_file != NULL, "fopen %s: %s", log_path, strerror(errno));
		static char text[1 << 16];
		size_t n = fread(text, 1, sizeof(text) - 1, log_file);
		text[n] = 0;
		fclose(log_file);
		CHECK(strstr(text, "for the shim's comparison") != NULL,
		      "no note on stderr after %d ms of a sync waiting for room on the device; stderr was:\n%s",
		      NOTE_MS, text);
	}
	CHECK(helper_ms < BOUND_MS, "another thread's mmap, munmap and pread took %.0f ms while this one synced "
		  "stream b and a kernel filled the device (bound %d ms)", helper_ms, BOUND_MS);
	printf("another thread's mmap + munmap + pread during the sync: %.1f ms\n", helper_ms);
	/* The marker may be there already: fill may end before the sync
	 * compares the pages. */
	step = "checking work's bytes after cudaStreamSynchronize(b)";
	unsigned char *buf = (unsigned char *)malloc(NB);
	pread_all(file_fd, buf, NB, 0);
	for (size_t i = MARK_BYTES; i < NB; i++) {
		unsigned char want = i >= WORK_FROM && i < WORK_TO ? (unsigned char)(i * 7 + 3) : initial(i);
		CHECK(m[i] == want, "after syncing b: byte %zu through the mapping is %#x, want %#x", i, m[i], want);
		CHECK(buf[i] == want, "after syncing b: byte %zu read with pread() is %#x, want %#x", i, buf[i], want);
	}
	free(buf);

	step = "cudaStreamSynchronize(a)";
	CUDA_OK(cudaStreamSynchronize(a));
	check_bytes("after syncing a", m, 1);

	CUDA_OK(cudaEventDestroy(b_done));
	CUDA_OK(cudaStreamDestroy(a));
	CUDA_OK(cudaStreamDestroy(b));
	munmap(m, NB);
	close(file_fd);
	printf("full_device: ok\n");
	return 0;
}
