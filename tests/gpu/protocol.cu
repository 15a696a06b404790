/* The promises of DESIGN §1 between the CPU and kernels, one case each: an
 * ordinary CUDA program (runtime API, kernels dereferencing an mmap'ed
 * file), run under libgaia.so on the simulated GPU. CTest runs every case
 * with GAIA_BACKING=vmm and with GAIA_BACKING=managed.
 *
 *   protocol CASE        exit 0 when the case holds, 1 with a message if not
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <linux/openat2.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "simgpu_kernel.h"
#include "../common/unseen_syscall.h"
#ifndef __CUDACC__
#include "simgpu.h"
#endif

#define PAGE 4096
#define CHECK(cond, ...)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);    \
			fprintf(stderr, __VA_ARGS__);                                      \
			fprintf(stderr, "\n");                                             \
			exit(1);                                                           \
		}                                                                          \
	} while (0)
#define CUDA_OK(call)                                                                      \
	do {                                                                               \
		cudaError_t e_ = (call);                                                   \
		CHECK(e_ == cudaSuccess, "%s", cudaGetErrorName(e_));                      \
	} while (0)

/* --- kernels --- */

__global__ void copy_bytes(const unsigned char *src, unsigned char *dst, unsigned long long n)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < n; i += (unsigned long long)gridDim.x * blockDim.x)
		dst[i] = src[i];
}
SIMGPU_KERNEL(copy_bytes);

/* dst[i] = value for i in [from, to) with i % stride == phase. */
__global__ void write_bytes(unsigned char *dst, unsigned long long from, unsigned long long to,
			    unsigned stride, unsigned phase, unsigned char value)
{
	unsigned long long i = from + (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < to; i += (unsigned long long)gridDim.x * blockDim.x)
		if (i % stride == phase)
			dst[i] = value;
}
SIMGPU_KERNEL(write_bytes);

/* Waits ns of device time, then copies. */
__global__ void spin_then_copy(const unsigned char *src, unsigned char *dst, unsigned long long n,
			       long long ns)
{
	if (blockIdx.x != 0 || threadIdx.x != 0)
		return;
	long long t0 = clock64();
	while (clock64() - t0 < ns)
		;
	for (unsigned long long i = 0; i < n; i++)
		dst[i] = src[i];
}
SIMGPU_KERNEL(spin_then_copy);

/* dst[i] = src[at[i]] for i < n: reads at data-dependent places. */
__global__ void gather_bytes(const unsigned char *src, const unsigned long long *at, unsigned char *dst,
			     unsigned n)
{
	unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		dst[i] = src[at[i]];
}
SIMGPU_KERNEL(gather_bytes);

/* src[at[i] + 1] = base + i for even i < n: writes at data-dependent
 * places. */
__global__ void scatter_bytes(unsigned char *dst, const unsigned long long *at, unsigned n, unsigned char base)
{
	unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n && i % 2 == 0)
		dst[at[i] + 1] = (unsigned char)(base + i);
}
SIMGPU_KERNEL(scatter_bytes);

/* out[b] = the sum of one byte in each page of 64 KiB unit b, read in
 * order, then about ns asleep: a kernel whose fault front moves through
 * the region a unit per block. */
__global__ void read_units(const unsigned char *src, unsigned long long *out, long long ns)
{
	if (threadIdx.x != 0)
		return;
	unsigned long long b = blockIdx.x, sum = 0;
	for (unsigned k = 0; k < 16; k++)
		sum += src[b * 65536 + k * 4096 + b % 4096];
	out[b] = sum;
	for (long long t = 0; t < ns; t += 100000)
		__nanosleep(100000);
}
SIMGPU_KERNEL(read_units);

/* --- helpers --- */

static char path[256];
static unsigned char *last_map;

static int make_file(size_t bytes, unsigned char fill)
{
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(path, sizeof(path), "%s/gaia-gpu-protocol-XXXXXX", dir);
	int fd = mkstemp(path);
	CHECK(fd >= 0, "mkstemp %s: %s", path, strerror(errno));
	unlink(path);
	unsigned char *buf = (unsigned char *)malloc(bytes);
	memset(buf, fill, bytes);
	CHECK(pwrite(fd, buf, bytes, 0) == (ssize_t)bytes, "pwrite: %s", strerror(errno));
	free(buf);
	return fd;
}

static unsigned char *map_file_prot(int fd, size_t bytes, int prot, int flags)
{
	void *p = mmap(NULL, bytes, prot, flags, fd, 0);
	CHECK(p != MAP_FAILED, "mmap: %s", strerror(errno));
	last_map = (unsigned char *)p;
	return (unsigned char *)p;
}

static unsigned char *map_file(int fd, size_t bytes, int flags)
{
	return map_file_prot(fd, bytes, PROT_READ | PROT_WRITE, flags);
}

static void launch_copy(const unsigned char *src, unsigned char *dst, size_t n)
{
	SIMGPU_LAUNCH(copy_bytes, 64, 128, 0, 0)(src, dst, (unsigned long long)n);
	CUDA_OK(cudaGetLastError());
}

static void launch_write(unsigned char *dst, size_t from, size_t to, unsigned stride,
			 unsigned phase, unsigned char value)
{
	SIMGPU_LAUNCH(write_bytes, 64, 128, 0, 0)(dst, (unsigned long long)from,
						  (unsigned long long)to, stride, phase, value);
	CUDA_OK(cudaGetLastError());
}

/* Device 0's copies to it so far: bytes, or transfers (the simulated
 * device counts them; 0 on a GPU). */
static uint64_t htod_count(bool transfers)
{
#ifndef __CUDACC__
	struct simgpu_stats st;
	CHECK(simgpu_stats_get(0, &st) == 0, "simgpu_stats_get");
	return transfers ? st.htod_transfers : st.htod_bytes;
#else
	(void)transfers;
	return 0;
#endif
}

static uint64_t htod_bytes(void)
{
	return htod_count(false);
}

static uint64_t htod_transfers(void)
{
	return htod_count(true);
}

/* Bytes moved are counted by the simulated device; a real one does not
 * say. There the checks on them are left out, with a note. */
static bool bytes_counted(const char *what)
{
#ifndef __CUDACC__
	(void)what;
	return true;
#else
	printf("note: %s not checked (bytes moved are counted by the simulated device only)\n", what);
	return false;
#endif
}

/* GAIA_BACKING=paged: replicas paged on demand, which the CPU writes
 * (no copies: what the shim wrote into them is GAIA_STATS's
 * paged_fill_bytes, which the tests' registrations match). */
static bool paged_backing(void)
{
	const char *b = getenv("GAIA_BACKING");
	return b && !strcmp(b, "paged");
}

/* --- cases --- */

/* A launch sees the CPU's stores and write()s made before it. */
static void case_launch_sees_cpu(void)
{
	const size_t bytes = 16 * PAGE;
	int fd = make_file(bytes, 0);
	unsigned char *m = map_file(fd, bytes, MAP_SHARED);
	for (size_t i = 0; i < 4 * PAGE; i++)
		m[i] = (unsigned char)(i * 7 + 1);
	unsigned char line[100];
	memset(line, 0xee, sizeof(line));
	CHECK(pwrite(fd, line, sizeof(line), 5 * PAGE + 10) == (ssize_t)sizeof(line), "pwrite");
	unsigned char *d;
	CUDA_OK(cudaMalloc((void **)&d, bytes));
	launch_copy(m, d, bytes);
	unsigned char *got = (unsigned char *)malloc(bytes);
	CUDA_OK(cudaMemcpy(got, d, bytes, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < bytes; i++) {
		unsigned char want = i < 4 * PAGE ? (unsigned char)(i * 7 + 1)
				     : (i >= 5 * PAGE + 10 && i < 5 * PAGE + 110) ? 0xee : 0;
		CHECK(got[i] == want, "byte %zu: kernel saw %u, CPU had %u", i, got[i], want);
	}
	/* And later CPU stores reach the next launch. */
	m[9 * PAGE + 3] = 0x42;
	launch_copy(m, d, bytes);
	CUDA_OK(cudaMemcpy(got, d, bytes, cudaMemcpyDeviceToHost));
	CHECK(got[9 * PAGE + 3] == 0x42, "second launch saw %u", got[9 * PAGE + 3]);
	free(got);
}

/* After the sync, the mapping, read() and the file see the kernel's writes. */
static void case_sync_publishes(void)
{
	const size_t bytes = 16 * PAGE;
	int fd = make_file(bytes, 1);
	unsigned char *m = map_file(fd, bytes, MAP_SHARED);
	CHECK(m[0] == 1, "initial");
	launch_write(m, 2 * PAGE, 6 * PAGE, 1, 0, 7);
	CUDA_OK(cudaDeviceSynchronize());
	unsigned char buf[PAGE];
	for (size_t p = 0; p < 16; p++) {
		unsigned char want = p >= 2 && p < 6 ? 7 : 1;
		CHECK(m[p * PAGE] == want && m[p * PAGE + PAGE - 1] == want, "mapping page %zu: %u",
		      p, m[p * PAGE]);
		CHECK(pread(fd, buf, PAGE, (off_t)(p * PAGE)) == PAGE, "pread");
		CHECK(buf[0] == want && buf[PAGE - 1] == want, "read() page %zu: %u", p, buf[0]);
	}
	CHECK(msync(m, bytes, MS_SYNC) == 0, "msync");
}

/* CPU and kernel write different bytes of the same pages between one
 * launch and its sync: both survive (the false-sharing case). */
/* Three rounds: the kernel writes the even bytes, the CPU the odd ones. */
static void false_sharing_rounds(unsigned char *m, size_t bytes)
{
	for (int round = 1; round <= 3; round++) {
		launch_write(m, 0, bytes, 2, 0, (unsigned char)(0x10 + round));
		for (size_t i = 1; i < bytes; i += 2)
			m[i] = (unsigned char)(0x80 + round);
		CUDA_OK(cudaDeviceSynchronize());
		for (size_t i = 0; i < bytes; i++) {
			unsigned char want = (unsigned char)(i % 2 ? 0x80 + round : 0x10 + round);
			CHECK(m[i] == want, "round %d byte %zu: %#x, want %#x", round, i, m[i], want);
		}
	}
}

static void case_false_sharing(void)
{
	const size_t bytes = 8 * PAGE;
	int fd = make_file(bytes, 0);
	false_sharing_rounds(map_file(fd, bytes, MAP_SHARED), bytes);
}

/* Both write the same bytes: the device's write wins (DESIGN §1). */
static void case_same_byte(void)
{
	const size_t bytes = 4 * PAGE;
	int fd = make_file(bytes, 0);
	unsigned char *m = map_file(fd, bytes, MAP_SHARED);
	launch_write(m, PAGE, PAGE + 64, 1, 0, 'G');
	for (size_t i = PAGE + 32; i < PAGE + 96; i++)
		m[i] = 'C';
	CUDA_OK(cudaDeviceSynchronize());
	for (size_t i = PAGE; i < PAGE + 96; i++)
		CHECK(m[i] == (i < PAGE + 64 ? 'G' : 'C'), "byte %zu: %c", i - PAGE, m[i]);
}

/* A store made while a kernel runs is not seen by that kernel. */
static void case_cpu_store_invisible(void)
{
	const size_t bytes = 4 * PAGE;
	int fd = make_file(bytes, 1);
	unsigned char *m = map_file(fd, bytes, MAP_SHARED);
	unsigned char *d;
	CUDA_OK(cudaMalloc((void **)&d, bytes));
	SIMGPU_LAUNCH(spin_then_copy, 1, 1, 0, 0)(m, d, (unsigned long long)bytes, 50000000ll);
	CUDA_OK(cudaGetLastError());
	memset(m, 2, bytes);
	CUDA_OK(cudaDeviceSynchronize());
	unsigned char got[4 * PAGE];
	CUDA_OK(cudaMemcpy(got, d, bytes, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < bytes; i++)
		CHECK(got[i] == 1, "kernel saw %u at %zu: a store from after its launch", got[i], i);
	CHECK(m[0] == 2 && m[bytes - 1] == 2, "the CPU's own stores");
}

/* MAP_PRIVATE: the kernel's writes reach the mapping, never the file. */
static void case_private(void)
{
	const size_t bytes = 8 * PAGE;
	int fd = make_file(bytes, 3);
	unsigned char *m = map_file(fd, bytes, MAP_PRIVATE);
	launch_write(m, 0, 2 * PAGE, 1, 0, 9);
	CUDA_OK(cudaDeviceSynchronize());
	CHECK(m[0] == 9 && m[2 * PAGE - 1] == 9 && m[2 * PAGE] == 3, "mapping: %u %u %u", m[0],
	      m[2 * PAGE - 1], m[2 * PAGE]);
	unsigned char buf[PAGE];
	CHECK(pread(fd, buf, PAGE, 0) == PAGE && buf[0] == 3, "the file changed: %u", buf[0]);
	/* The next launch sees the merged bytes. */
	unsigned char *d;
	CUDA_OK(cudaMalloc((void **)&d, bytes));
	launch_copy(m, d, bytes);
	CUDA_OK(cudaMemcpy(buf, d, PAGE, cudaMemcpyDeviceToHost));
	CHECK(buf[0] == 9, "relaunch saw %u", buf[0]);
}

/* Only changed pages cross the bus: after the first launch uploaded the
 * region, a launch uploads exactly the pages the CPU wrote since. */
static void case_bytes_moved(void)
{
	const size_t bytes = 256 * PAGE;
	int fd = make_file(bytes, 0);
	unsigned char *m = map_file(fd, bytes, MAP_SHARED);
	unsigned char *d;
	CUDA_OK(cudaMalloc((void **)&d, bytes));
	uint64_t h0 = htod_bytes();
	launch_copy(m, d, bytes);
	CUDA_OK(cudaDeviceSynchronize());
	uint64_t h1 = htod_bytes();
	bool counted = bytes_counted("bytes uploaded per launch");
	/* paged: the CPU writes the replica, 1 MiB, then 3 pages (in the
	 * test's registration: paged_fill_bytes 1060864) */
	bool paged = paged_backing();
	CHECK(!counted || h1 - h0 == (paged ? 0 : bytes), "first launch copied %llu bytes to the device, the region is %zu%s",
	      (unsigned long long)(h1 - h0), bytes, paged ? " (paged on demand: the CPU writes it)" : "");
	m[3 * PAGE] = 1;
	m[100 * PAGE + 5] = 2;
	m[101 * PAGE + 7] = 3;
	launch_copy(m, d, bytes);
	CUDA_OK(cudaDeviceSynchronize());
	uint64_t h2 = htod_bytes();
	CHECK(!counted || h2 - h1 == (paged ? 0 : 3 * PAGE), "second launch copied %llu bytes for 3 changed pages%s",
	      (unsigned long long)(h2 - h1), paged ? " (paged on demand: the CPU writes them)" : "");
	launch_copy(m, d, bytes);
	CUDA_OK(cudaDeviceSynchronize());
	CHECK(!counted || htod_bytes() == h2, "a clean launch uploaded %llu bytes",
	      (unsigned long long)(htod_bytes() - h2));
}

/* The first launch uploads a 4 MiB region in chunks of the GPU window
 * (GAIA_GPU_READAHEAD_KB, through pinned staging): as many transfers as
 * chunks, and every byte the CPU's, the later chunks too; a launch after
 * the CPU wrote three pages shows them. */
static void case_upload_chunks(void)
{
	const size_t bytes = 4u << 20;
	int fd = make_file(bytes, 0x5a);
	unsigned char *m = map_file(fd, bytes, MAP_SHARED);
	for (size_t p = 0; p < bytes / PAGE; p++)
		m[p * PAGE + 7] = (unsigned char)(p * 7 + 1);
	unsigned char *d, *got = (unsigned char *)malloc(bytes);
	CHECK(got != NULL, "malloc");
	CUDA_OK(cudaMalloc((void **)&d, bytes));
	const char *kb = getenv("GAIA_GPU_READAHEAD_KB");
	size_t window = (kb ? strtoull(kb, NULL, 10) : 2048) * 1024;
	uint64_t t0 = htod_transfers();
	launch_copy(m, d, bytes);
	CUDA_OK(cudaDeviceSynchronize());
	uint64_t chunks = htod_transfers() - t0;
	if (bytes_counted("transfers of an upload") && paged_backing())
		CHECK(chunks == 0, "a replica paged on demand is written by the CPU, but the first launch made %llu "
		      "copies", (unsigned long long)chunks);
	else if (bytes_counted("transfers of an upload"))
		CHECK(chunks == (bytes + window - 1) / window, "the first launch uploaded %zu KiB in %llu transfers; a "
		      "window of %zu KiB makes %zu", bytes / 1024, (unsigned long long)chunks, window / 1024,
		      (bytes + window - 1) / window);
	CUDA_OK(cudaMemcpy(got, d, bytes, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < bytes; i++)
		CHECK(got[i] == m[i], "byte %zu: the kernel saw %u, the CPU has %u", i, got[i], m[i]);
	m[3 * PAGE] = 1;
	m[700 * PAGE + 5] = 2;
	m[701 * PAGE + 7] = 3;
	launch_copy(m, d, bytes);
	CUDA_OK(cudaDeviceSynchronize());
	CUDA_OK(cudaMemcpy(got, d, bytes, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < bytes; i++)
		CHECK(got[i] == m[i], "after the CPU wrote, byte %zu: the kernel saw %u, the CPU has %u", i, got[i], m[i]);
	CUDA_OK(cudaFree(d));
	free(got);
}

/* Two launches with no sync between, the CPU writing in between: the
 * second kernel sees the CPU's bytes and the first kernel's. */
static void case_launch_after_launch(void)
{
	const size_t bytes = 4 * PAGE;
	int fd = make_file(bytes, 0);
	unsigned char *m = map_file(fd, bytes, MAP_SHARED);
	unsigned char *d;
	CUDA_OK(cudaMalloc((void **)&d, bytes));
	launch_write(m, 0, bytes, 2, 0, 0x11);
	for (size_t i = 1; i < bytes; i += 2)
		m[i] = 0x22;
	launch_copy(m, d, bytes);
	CUDA_OK(cudaDeviceSynchronize());
	unsigned char got[4 * PAGE];
	CUDA_OK(cudaMemcpy(got, d, bytes, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < bytes; i++) {
		unsigned char want = i % 2 ? 0x22 : 0x11;
		CHECK(got[i] == want, "second kernel saw %#x at %zu", got[i], i);
		CHECK(m[i] == want, "CPU sees %#x at %zu", m[i], i);
	}
}

/* A program thread keeps storing to and loading from the region while the
 * first launch sets its device replica up (for vmm the CPU replica moves
 * aside meanwhile): it neither crashes nor loses a store. */
static int toucher_stop;
static unsigned toucher_last;

static void *toucher(void *arg)
{
	volatile unsigned *w = (volatile unsigned *)arg;
	unsigned i = 0;
	while (!__atomic_load_n(&toucher_stop, __ATOMIC_ACQUIRE)) {
		w[3 * PAGE / 4] = ++i;
		__atomic_store_n(&toucher_last, i, __ATOMIC_RELEASE);
		(void)w[40 * PAGE / 4];
	}
	return NULL;
}

static void case_touch_during_first_launch(void)
{
	const size_t bytes = 64 * PAGE;
	int fd = make_file(bytes, 0);
	unsigned char *m = map_file(fd, bytes, MAP_SHARED);
	unsigned char *d;
	CUDA_OK(cudaMalloc((void **)&d, bytes));
	pthread_t t;
	CHECK(pthread_create(&t, NULL, toucher, m) == 0, "pthread_create");
	while (!__atomic_load_n(&toucher_last, __ATOMIC_ACQUIRE))
		;
	launch_copy(m, d, bytes);
	CUDA_OK(cudaDeviceSynchronize());
	__atomic_store_n(&toucher_stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	unsigned got;
	memcpy(&got, m + 3 * PAGE, sizeof(got));
	CHECK(got == toucher_last, "the thread's last store was %u, the mapping holds %u", toucher_last,
	      got);
	CHECK(pread(fd, &got, sizeof(got), 3 * PAGE) == sizeof(got) && got == toucher_last,
	      "the file holds %u", got);
}

/* vmm: a thread that faulted on a region while the first launch moved it
 * aside may reach the shim's SIGSEGV handler only after the move ended.
 * That fault is retried, not handed to the program's handler (which would
 * kill the thread or the program); the same fault again is the program's.
 * The late delivery is made here: SIGSEGV with the region's address, sent
 * to this thread with rt_tgsigqueueinfo after the move. */
static volatile sig_atomic_t program_segvs;

static void program_segv(int sig, siginfo_t *info, void *ctx)
{
	(void)sig, (void)info, (void)ctx;
	program_segvs++;
}

static void deliver_segv(void *addr)
{
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	si.si_signo = SIGSEGV;
	si.si_code = SEGV_MAPERR;
	si.si_addr = addr;
	CHECK(syscall(SYS_rt_tgsigqueueinfo, getpid(), (pid_t)syscall(SYS_gettid), SIGSEGV, &si) == 0,
	      "rt_tgsigqueueinfo: %s", strerror(errno));
	usleep(1000); /* a sanitizer may hold the signal until its next call */
}

static void case_late_fault_after_move(void)
{
	const char *backing = getenv("GAIA_BACKING");
	if (!backing || strcmp(backing, "vmm") != 0)
		exit(77); /* only vmm moves regions */
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = program_segv;
	sa.sa_flags = SA_SIGINFO;
	CHECK(sigaction(SIGSEGV, &sa, NULL) == 0, "sigaction: %s", strerror(errno));
	const size_t bytes = 16 * PAGE;
	int fd = make_file(bytes, 3);
	unsigned char *m = map_file(fd, bytes, MAP_SHARED);
	unsigned char *d;
	CUDA_OK(cudaMalloc((void **)&d, bytes));
	launch_copy(m, d, bytes); /* the first launch moves the region */
	CUDA_OK(cudaDeviceSynchronize());
	deliver_segv(m + 5 * PAGE + 8);
	CHECK(program_segvs == 0, "a fault from the ended move reached the program's handler");
	deliver_segv(m + 5 * PAGE + 8);
	CHECK(program_segvs == 1, "the same fault again did not reach the program's handler (%d)",
	      (int)program_segvs);
	static unsigned char elsewhere[PAGE];
	deliver_segv(elsewhere);
	CHECK(program_segvs == 2, "a fault outside the moved region did not reach the program (%d)",
	      (int)program_segvs);
	CHECK(m[5 * PAGE + 8] == 3, "the region's bytes: %u", m[5 * PAGE + 8]);
}

/* A read-only mapping: kernels' writes to it are not merged; made
 * writable with mprotect, they are. */
static void case_mprotect_writable(void)
{
	const size_t bytes = 8 * PAGE;
	int fd = make_file(bytes, 5);
	unsigned char *m = map_file_prot(fd, bytes, PROT_READ, MAP_SHARED);
	launch_write(m, 0, PAGE, 1, 0, 6);
	CUDA_OK(cudaDeviceSynchronize());
	CHECK(m[0] == 5, "a kernel's write reached a read-only mapping: %u", m[0]);
	CHECK(mprotect(m, bytes, PROT_READ | PROT_WRITE) == 0, "mprotect: %s", strerror(errno));
	m[PAGE + 1] = 8;
	launch_write(m, 0, PAGE, 1, 0, 7);
	CUDA_OK(cudaDeviceSynchronize());
	CHECK(m[0] == 7 && m[PAGE - 1] == 7, "after mprotect the kernel's write is missing: %u", m[0]);
	CHECK(m[PAGE + 1] == 8 && m[PAGE] == 5, "the CPU's bytes: %u %u", m[PAGE + 1], m[PAGE]);
}

/* The protection /proc/self/maps shows at a (PROT_* bits), or -1. */
static int protection_of(const void *a)
{
	FILE *f = fopen("/proc/self/maps", "r");
	CHECK(f != NULL, "fopen /proc/self/maps: %s", strerror(errno));
	char line[512];
	int prot = -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[5];
		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) == 3 && (uintptr_t)a >= lo && (uintptr_t)a < hi)
			prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0);
	}
	fclose(f);
	return prot;
}

/* Part of a mapping made read-only before the first launch (a header the
 * program protects): the device copy changes no protection. Page 0
 * read-only, page 2 too; the kernel writes pages 4-5; the CPU then writes
 * pages 1 and 3 (a store into a page the shim made read-only would kill
 * the program). Shared or private. */
static void case_mixed_protections(int flags)
{
	const size_t bytes = 8 * PAGE;
	int fd = make_file(bytes, 5);
	unsigned char *m = map_file(fd, bytes, flags);
	CHECK(mprotect(m, PAGE, PROT_READ) == 0 && mprotect(m + 2 * PAGE, PAGE, PROT_READ) == 0, "mprotect: %s",
	      strerror(errno));
	launch_write(m, 4 * PAGE, 6 * PAGE, 1, 0, 6);
	CUDA_OK(cudaDeviceSynchronize());
	const int want[8] = {PROT_READ, PROT_READ | PROT_WRITE, PROT_READ, PROT_READ | PROT_WRITE,
			     PROT_READ | PROT_WRITE, PROT_READ | PROT_WRITE, PROT_READ | PROT_WRITE,
			     PROT_READ | PROT_WRITE};
	for (int p = 0; p < 8; p++)
		CHECK(protection_of(m + p * PAGE) == want[p], "after the first launch page %d has protection %d, want %d",
		      p, protection_of(m + p * PAGE), want[p]);
	m[PAGE + 1] = 8;
	m[3 * PAGE + 1] = 9;
	CHECK(m[4 * PAGE] == 6 && m[6 * PAGE] == 5, "the kernel's bytes: %u %u", m[4 * PAGE], m[6 * PAGE]);
}

/* A read-only mapping with a device copy, one page then made writable:
 * the copy goes (kernels' writes count from then on), and the page keeps
 * the protection the program just gave it. Shared, or private (the kernel
 * then keeps the writable page apart: it is charged as private memory). */
static void case_mprotect_part_writable(int flags)
{
	const size_t bytes = 8 * PAGE;
	int fd = make_file(bytes, 5);
	unsigned char *m = map_file_prot(fd, bytes, PROT_READ, flags);
	launch_write(m, 0, PAGE, 1, 0, 6);
	CUDA_OK(cudaDeviceSynchronize());
	CHECK(mprotect(m + PAGE, PAGE, PROT_READ | PROT_WRITE) == 0, "mprotect: %s", strerror(errno));
	CHECK(protection_of(m + PAGE) == (PROT_READ | PROT_WRITE), "page 1 has protection %d after mprotect",
	      protection_of(m + PAGE));
	CHECK(protection_of(m) == PROT_READ, "page 0 has protection %d", protection_of(m));
	m[PAGE + 1] = 8;
	/* The kernel writes a byte of the writable page (in a private
	 * mapping only those can take a device's writes). */
	launch_write(m, PAGE + 2, PAGE + 3, 1, 0, 7);
	CUDA_OK(cudaDeviceSynchronize());
	CHECK(m[PAGE + 1] == 8 && m[PAGE] == 5, "the CPU's bytes: %u %u", m[PAGE + 1], m[PAGE]);
	CHECK(m[PAGE + 2] == 7, "the kernel's byte: %u", m[PAGE + 2]);
}

/* A kernel writes pages the program made read-only: a page protected
 * after mapping read-write (`from_read_write`; 2: made inaccessible, then
 * readable again after the sync to look), or every page but one of a
 * read-only mapping made writable in part. The writes to read-only pages
 * are dropped (README, limits): the sync stores nothing there, the pages
 * keep their bytes and their protection, and the program lives; the write
 * to the writable page arrives. Shared or private. */
static void case_kernel_writes_read_only_page(int flags, int from_read_write)
{
	const size_t bytes = 8 * PAGE;
	int fd = make_file(bytes, 5);
	unsigned char *m = map_file_prot(fd, bytes, from_read_write ? PROT_READ | PROT_WRITE : PROT_READ, flags);
	if (from_read_write == 2)
		CHECK(mprotect(m, PAGE, PROT_NONE) == 0, "mprotect page 0 inaccessible: %s", strerror(errno));
	else if (from_read_write)
		CHECK(mprotect(m, PAGE, PROT_READ) == 0, "mprotect page 0 read-only: %s", strerror(errno));
	else
		CHECK(mprotect(m + PAGE, PAGE, PROT_READ | PROT_WRITE) == 0, "mprotect page 1 writable: %s",
		      strerror(errno));
	launch_write(m, 0, 2 * PAGE, 1, 0, 6);
	CUDA_OK(cudaDeviceSynchronize());
	if (from_read_write == 2) {
		CHECK(protection_of(m) == PROT_NONE, "page 0 has protection %d after the sync", protection_of(m));
		CHECK(mprotect(m, PAGE, PROT_READ) == 0, "mprotect page 0 readable: %s", strerror(errno));
	}
	CHECK(protection_of(m) == PROT_READ, "page 0 has protection %d after the sync", protection_of(m));
	CHECK(m[0] == 5 && m[PAGE - 1] == 5, "page 0 (read-only) holds %u %u after the sync, want its own 5 5",
	      m[0], m[PAGE - 1]);
	CHECK(m[PAGE] == 6 && m[2 * PAGE - 1] == 6, "page 1 (writable) holds %u %u, want the kernel's 6 6",
	      m[PAGE], m[2 * PAGE - 1]);
	unsigned char b0;
	CHECK(pread(fd, &b0, 1, 0) == 1 && b0 == 5, "the file's byte 0 is %u, want 5", b0);
	/* Another launch and sync: still nothing stored there. */
	launch_write(m, 0, 2 * PAGE, 1, 0, 7);
	CUDA_OK(cudaDeviceSynchronize());
	CHECK(m[0] == 5 && m[PAGE] == 7, "after a second launch: %u %u, want 5 7", m[0], m[PAGE]);
	if (from_read_write) {
		/* Page 0 writable again: a kernel reading it sees the CPU's
		 * bytes, not zeros (inaccessible) nor the writes dropped. */
		CHECK(mprotect(m, PAGE, PROT_READ | PROT_WRITE) == 0, "mprotect page 0 writable: %s", strerror(errno));
		unsigned char *out;
		CUDA_OK(cudaMalloc((void **)&out, PAGE));
		SIMGPU_LAUNCH(copy_bytes, 4, 128, 0, 0)(m, out, (unsigned long long)PAGE);
		CUDA_OK(cudaGetLastError());
		unsigned char got[PAGE];
		CUDA_OK(cudaMemcpy(got, out, PAGE, cudaMemcpyDeviceToHost));
		CUDA_OK(cudaFree(out));
		for (size_t i = 0; i < PAGE; i++)
			CHECK(got[i] == m[i], "page 0 made writable again: a kernel read byte %zu as %u, the CPU has %u",
			      i, got[i], m[i]);
	}
}

/* The program has used every descriptor when it unmaps half of a file with
 * a device copy (the copy goes): the other half stays mapped, with its
 * bytes, and writable. */
static void case_unmap_without_descriptors(void)
{
	const size_t bytes = 8 * PAGE;
	int fd = make_file(bytes, 5);
	unsigned char *m = map_file(fd, bytes, MAP_SHARED);
	launch_write(m, 4 * PAGE, 5 * PAGE, 1, 0, 6);
	CUDA_OK(cudaDeviceSynchronize());
	struct rlimit was, low;
	CHECK(getrlimit(RLIMIT_NOFILE, &was) == 0, "getrlimit: %s", strerror(errno));
	low = was;
	low.rlim_cur = 256;
	CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0, "setrlimit: %s", strerror(errno));
	int taken[256], n = 0;
	while (n < 256 && (taken[n] = dup(0)) >= 0)
		n++;
	CHECK(n < 256 && errno == EMFILE, "dup stopped after %d descriptors: %s", n, strerror(errno));
	int rc = munmap(m, 4 * PAGE);
	int err = errno;
	for (int i = 0; i < n; i++)
		close(taken[i]);
	CHECK(setrlimit(RLIMIT_NOFILE, &was) == 0, "setrlimit: %s", strerror(errno));
	CHECK(rc == 0, "munmap of half the file with no descriptor left: %s", strerror(err));
	CHECK(protection_of(m + 4 * PAGE) == (PROT_READ | PROT_WRITE), "the other half has protection %d",
	      protection_of(m + 4 * PAGE));
	CHECK(m[4 * PAGE] == 6 && m[5 * PAGE] == 5, "the other half's bytes: %u %u", m[4 * PAGE], m[5 * PAGE]);
	m[5 * PAGE] = 1;
	munmap(m + 4 * PAGE, 4 * PAGE);
	close(fd);
	last_map = NULL; /* no replica left to tell the backing by */
}

static uint64_t dtoh_bytes(void)
{
#ifndef __CUDACC__
	struct simgpu_stats st;
	CHECK(simgpu_stats_get(0, &st) == 0, "simgpu_stats_get");
	return st.dtoh_bytes;
#else
	return 0;
#endif
}

/* Peer caching: pages gone from the page cache while a device holds their
 * current bytes are read from the device (and are right). */
/* A file of `bytes` holding a pattern (byte i = i * mul + add), synced,
 * mapped shared, read whole by a kernel (into *d, allocated here), then
 * let go by the CPU side (MADV_PAGEOUT: its pages are clean). */
static unsigned char *peer_setup(size_t bytes, unsigned mul, unsigned add, int *fd, unsigned char **pattern,
				 unsigned char **d)
{
	*fd = make_file(bytes, 0);
	*pattern = (unsigned char *)malloc(bytes);
	for (size_t i = 0; i < bytes; i++)
		(*pattern)[i] = (unsigned char)(i * mul + add);
	CHECK(pwrite(*fd, *pattern, bytes, 0) == (ssize_t)bytes, "pwrite");
	CHECK(fsync(*fd) == 0, "fsync");
	unsigned char *m = map_file(*fd, bytes, MAP_SHARED);
	CUDA_OK(cudaMalloc((void **)d, bytes));
	launch_copy(m, *d, bytes);
	CUDA_OK(cudaDeviceSynchronize());
	CHECK(madvise(m, bytes, MADV_PAGEOUT) == 0, "madvise(MADV_PAGEOUT): %s", strerror(errno));
	return m;
}

static void case_peer_read(void)
{
	const size_t bytes = 64 * PAGE;
	int fd;
	unsigned char *pattern, *d;
	unsigned char *m = peer_setup(bytes, 31, 7, &fd, &pattern, &d);
	unsigned char vec[64];
	CHECK(mincore(m, bytes, vec) == 0, "mincore");
	size_t resident = 0;
	for (int i = 0; i < 64; i++)
		resident += vec[i] & 1;
	if (resident > 32) {
		printf("skip: the kernel kept %zu of 64 pages resident after MADV_PAGEOUT\n", resident);
		exit(77);
	}
	uint64_t before = dtoh_bytes();
	unsigned char *got = (unsigned char *)malloc(bytes);
	CHECK(pread(fd, got, bytes, 0) == (ssize_t)bytes, "pread: %s", strerror(errno));
	for (size_t i = 0; i < bytes; i++)
		CHECK(got[i] == pattern[i], "byte %zu: %u, want %u", i, got[i], pattern[i]);
	uint64_t from_device = dtoh_bytes() - before;
	CHECK(!bytes_counted("bytes read from the device") || from_device >= (64 - resident) * PAGE,
	      "%zu pages were not resident but only %llu bytes came from the device", 64 - resident,
	      (unsigned long long)from_device);
	/* read() at the descriptor's position too. */
	CHECK(madvise(m, bytes, MADV_PAGEOUT) == 0, "madvise");
	CHECK(lseek(fd, 5 * PAGE + 3, SEEK_SET) == 5 * PAGE + 3, "lseek");
	CHECK(read(fd, got, 100) == 100, "read");
	CHECK(memcmp(got, pattern + 5 * PAGE + 3, 100) == 0, "read() bytes");
	CHECK(lseek(fd, 0, SEEK_CUR) == 5 * PAGE + 103, "the position moved to %lld",
	      (long long)lseek(fd, 0, SEEK_CUR));
	free(got);
	free(pattern);
}

/* Another writer, not under the shim (a raw pwrite64), changes bytes of a
 * file whose pages a device holds, and the page cache lets the page go
 * again: a read must return the new bytes, from storage, not the device's
 * older copy. */
static void case_peer_read_outside_writer(void)
{
	const size_t bytes = 64 * PAGE;
	int fd;
	unsigned char *pattern, *d;
	unsigned char *m = peer_setup(bytes, 29, 3, &fd, &pattern, &d);
	const off_t at = 10 * PAGE + 77;
	unsigned char v[100];
	for (size_t i = 0; i < sizeof(v); i++)
		v[i] = (unsigned char)(pattern[at + i] ^ 0x5a);
	/* the file's times move by at least a tick */
	usleep(20000);
	CHECK(unseen_syscall(SYS_pwrite64, fd, (long)v, sizeof(v), (long)at, 0, 0) == (long)sizeof(v),
	      "pwrite64: %s", strerror(errno));
	CHECK(fsync(fd) == 0, "fsync");
	CHECK(madvise(m, bytes, MADV_PAGEOUT) == 0, "madvise(MADV_PAGEOUT): %s", strerror(errno));
	CHECK(posix_fadvise(fd, 0, bytes, POSIX_FADV_DONTNEED) == 0, "posix_fadvise");
	unsigned char vec[64];
	CHECK(mincore(m, bytes, vec) == 0, "mincore");
	if (vec[10] & 1) {
		printf("skip: the kernel kept page 10 resident after MADV_PAGEOUT and DONTNEED\n");
		exit(77);
	}
	unsigned char got[3 * PAGE];
	CHECK(pread(fd, got, sizeof(got), 9 * PAGE) == (ssize_t)sizeof(got), "pread: %s", strerror(errno));
	for (size_t i = 0; i < sizeof(got); i++) {
		off_t o = 9 * PAGE + (off_t)i;
		unsigned char want = o >= at && o < at + (off_t)sizeof(v) ? v[o - at] : pattern[o];
		CHECK(got[i] == want, "after another writer's pwrite64: pread read byte %lld as %u, the file has %u",
		      (long long)o, got[i], want);
	}
	free(pattern);
}

/* Two devices write overlapping bytes of one page in overlapping epochs:
 * the higher device wins whatever the order of the syncs. */
static void case_two_devices(int order)
{
	int n = 0;
	CUDA_OK(cudaGetDeviceCount(&n));
	CHECK(n >= 2, "needs SIMGPU_DEVICES=2 (have %d)", n);
	const size_t bytes = 4 * PAGE;
	int fd = make_file(bytes, 0);
	unsigned char *m = map_file(fd, bytes, MAP_SHARED);
	CUDA_OK(cudaSetDevice(0));
	launch_write(m, 0, 100, 1, 0, 'A');
	CUDA_OK(cudaSetDevice(1));
	launch_write(m, 50, 150, 1, 0, 'B');
	for (int k = 0; k < 2; k++) {
		CUDA_OK(cudaSetDevice(order ? 1 - k : k));
		CUDA_OK(cudaDeviceSynchronize());
	}
	for (size_t i = 0; i < 200; i++) {
		char want = i < 50 ? 'A' : i < 150 ? 'B' : 0;
		CHECK(m[i] == want, "byte %zu: %c (%d), want %c", i, m[i], m[i], want);
	}
}

/* The file is truncated while a device holds its pages, then kernels write
 * past the new end: as for CPU stores there, nothing past EOF reaches the
 * file, the sync neither crashes nor fails, bytes before EOF do reach it,
 * and when the file grows again the pages read as zeros (the kernel's
 * behaviour), to the CPU and to the next kernel. */
static void case_truncated_while_mapped(void)
{
	const size_t bytes = 16 * PAGE, kept = 4 * PAGE;
	int fd = make_file(bytes, 1);
	unsigned char *m = map_file(fd, bytes, MAP_SHARED);
	launch_write(m, 0, bytes, 1, 0, 7);
	CUDA_OK(cudaDeviceSynchronize());
	CHECK(m[bytes - 1] == 7, "before truncation: %d", m[bytes - 1]);
	CHECK(ftruncate(fd, kept) == 0, "ftruncate: %s", strerror(errno));
	launch_write(m, 0, bytes, 1, 0, 9);
	CUDA_OK(cudaDeviceSynchronize());
	for (size_t i = 0; i < kept; i += 511)
		CHECK(m[i] == 9, "byte %zu before EOF: %d, want 9", i, m[i]);
	CHECK(ftruncate(fd, bytes) == 0, "ftruncate: %s", strerror(errno));
	unsigned char *buf = (unsigned char *)malloc(bytes);
	CHECK(pread(fd, buf, bytes, 0) == (ssize_t)bytes, "pread: %s", strerror(errno));
	for (size_t i = 0; i < bytes; i += 509)
		CHECK(buf[i] == (i < kept ? 9 : 0) && m[i] == buf[i], "byte %zu after growing: file %d, mapping %d", i,
		      buf[i], m[i]);
	unsigned char *d;
	CUDA_OK(cudaMalloc((void **)&d, bytes));
	launch_copy(m, d, bytes);
	CUDA_OK(cudaMemcpy(buf, d, bytes, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < bytes; i += 509)
		CHECK(buf[i] == (i < kept ? 9 : 0), "byte %zu seen by the next kernel: %d", i, buf[i]);
	CUDA_OK(cudaFree(d));
	free(buf);
}

/* A second thread shrinks and grows the mapped file over and over while
 * kernels read its first page (ftruncate, or truncate by path): the pages
 * past the end come and go under
 * the shim's copies, which must neither fault (SIGBUS) nor hand a kernel
 * anything but the file's bytes. */
/* RESIZE_OPEN_OTHER takes turns: openat, creat, syscall(SYS_openat),
 * freopen, syscall(SYS_openat2). */
enum resize_way { RESIZE_FTRUNCATE, RESIZE_TRUNCATE, RESIZE_OPEN_TRUNC, RESIZE_FOPEN_W, RESIZE_OPEN_OTHER };
struct resizer {
	int fd;
	enum resize_way way;
	size_t small, big;
	int stop; /* atomic */
	unsigned rounds;
};

static void *resize_loop(void *arg)
{
	struct resizer *r = (struct resizer *)arg;
	char name[64]; /* the file is unlinked: its name under /proc */
	snprintf(name, sizeof(name), "/proc/self/fd/%d", r->fd);
	while (!__atomic_load_n(&r->stop, __ATOMIC_RELAXED)) {
		if (r->way == RESIZE_TRUNCATE) {
			CHECK(truncate(name, (off_t)r->small) == 0, "truncate: %s", strerror(errno));
			CHECK(truncate(name, (off_t)r->big) == 0, "truncate: %s", strerror(errno));
		} else if (r->way == RESIZE_FTRUNCATE) {
			CHECK(ftruncate(r->fd, (off_t)r->small) == 0, "ftruncate: %s", strerror(errno));
			CHECK(ftruncate(r->fd, (off_t)r->big) == 0, "ftruncate: %s", strerror(errno));
		} else {
			/* Rewritten from the start, as a program rewrites its
			 * output: empty, then the first page and the size back. */
			if (r->way == RESIZE_OPEN_TRUNC) {
				int fd = open(name, O_WRONLY | O_TRUNC);
				CHECK(fd >= 0, "open(O_TRUNC): %s", strerror(errno));
				close(fd);
			} else if (r->way == RESIZE_FOPEN_W) {
				FILE *f = fopen(name, "w");
				CHECK(f, "fopen(\"w\"): %s", strerror(errno));
				fclose(f);
			} else {
				int fd = -1;
				switch (r->rounds % 5) {
				case 0:
					fd = openat(AT_FDCWD, name, O_RDWR | O_TRUNC);
					break;
				case 1:
					fd = creat(name, 0600);
					break;
				case 2:
					fd = (int)syscall(SYS_openat, AT_FDCWD, name, O_WRONLY | O_TRUNC, 0);
					break;
				case 4: {
					struct open_how how;
					memset(&how, 0, sizeof(how));
					how.flags = O_RDWR | O_TRUNC;
					fd = (int)syscall(SYS_openat2, AT_FDCWD, name, &how, sizeof(how));
					break;
				}
				default: {
					FILE *f = fopen(name, "r");
					CHECK(f, "fopen: %s", strerror(errno));
					f = freopen(NULL, "w", f);
					CHECK(f, "freopen(NULL, \"w\"): %s", strerror(errno));
					fd = dup(fileno(f));
					fclose(f);
				}
				}
				CHECK(fd >= 0, "opening to empty (way %u): %s", r->rounds % 5, strerror(errno));
				close(fd);
			}
			unsigned char first[PAGE];
			memset(first, 3, sizeof(first));
			CHECK(pwrite(r->fd, first, PAGE, 0) == PAGE, "pwrite: %s", strerror(errno));
			CHECK(ftruncate(r->fd, (off_t)r->big) == 0, "ftruncate: %s", strerror(errno));
		}
		/* Bytes in the pages that come and go: the next launch uploads them. */
		unsigned char v = (unsigned char)r->rounds;
		CHECK(pwrite(r->fd, &v, 1, (off_t)(r->small + (r->big - r->small) / 2)) == 1, "pwrite: %s",
		      strerror(errno));
		r->rounds++;
	}
	return NULL;
}

static void case_truncated_by_another_thread(enum resize_way way)
{
	const size_t bytes = 16 * PAGE;
	int fd = make_file(bytes, 3);
	unsigned char *m = map_file(fd, bytes, MAP_SHARED);
	unsigned char *d, got[64];
	CUDA_OK(cudaMalloc((void **)&d, PAGE));
	struct resizer r = {fd, way, 8 * PAGE, bytes, 0, 0};
	pthread_t t;
	CHECK(pthread_create(&t, NULL, resize_loop, &r) == 0, "pthread_create");
	for (int i = 0; i < 2000; i++) {
		launch_copy(m, d, sizeof(got));
		CUDA_OK(cudaDeviceSynchronize());
		CUDA_OK(cudaMemcpy(got, d, sizeof(got), cudaMemcpyDeviceToHost));
		/* Rewritten from the start, the page is empty for a moment:
		 * a kernel then may see zeros, never anything else. */
		bool empty_for_a_while = way >= RESIZE_OPEN_TRUNC;
		for (size_t k = 0; k < sizeof(got); k++)
			CHECK(got[k] == 3 || (empty_for_a_while && got[k] == 0),
			      "launch %d: byte %zu is %d, the file holds 3", i, k, got[k]);
	}
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	CHECK(r.rounds > 0, "the file was never resized");
	CUDA_OK(cudaFree(d));
}

/* Every call a program may use to change a mapped file's bytes besides
 * write(): after each one, the next kernel reads the file as read() does.
 * One page per way, changed after a first kernel made the replica. */
enum change_way {
	WAY_PWRITE, WAY_WRITE, WAY_PWRITEV, WAY_STDIO, WAY_COPY_FILE_RANGE, WAY_SENDFILE,
	WAY_SPLICE, WAY_PUNCH_HOLE, WAY_ZERO_RANGE, WAY_RAW_SYSCALL, WAY_COUNT
};
static const char *const change_way_name[] = {
	"pwrite", "write", "pwritev", "fwrite+fflush", "copy_file_range", "sendfile",
	"splice", "fallocate(PUNCH_HOLE)", "fallocate(ZERO_RANGE)", "syscall(SYS_pwrite64)"};

/* Changes page `page` of fd to bytes `value` (0 for the hole punchers). */
static void change_page(int fd, int src_fd, enum change_way way, size_t page, unsigned char value)
{
	unsigned char buf[PAGE];
	memset(buf, value, sizeof(buf));
	off_t at = (off_t)(page * PAGE);
	ssize_t n = -1;
	switch (way) {
	case WAY_PWRITE:
		n = pwrite(fd, buf, PAGE, at);
		break;
	case WAY_WRITE:
		CHECK(lseek(fd, at, SEEK_SET) == at, "lseek: %s", strerror(errno));
		n = write(fd, buf, PAGE);
		break;
	case WAY_PWRITEV: {
		struct iovec iov[2] = {{buf, PAGE / 2}, {buf + PAGE / 2, PAGE / 2}};
		n = pwritev(fd, iov, 2, at);
		break;
	}
	case WAY_STDIO: {
		FILE *f = fdopen(dup(fd), "r+");
		CHECK(f, "fdopen: %s", strerror(errno));
		CHECK(fseek(f, at, SEEK_SET) == 0, "fseek: %s", strerror(errno));
		n = (ssize_t)fwrite(buf, 1, PAGE, f);
		CHECK(fflush(f) == 0 && fclose(f) == 0, "fflush: %s", strerror(errno));
		break;
	}
	case WAY_COPY_FILE_RANGE:
	case WAY_SENDFILE:
	case WAY_SPLICE: {
		CHECK(pwrite(src_fd, buf, PAGE, 0) == PAGE, "pwrite to the source: %s", strerror(errno));
		loff_t in = 0, out = at;
		if (way == WAY_COPY_FILE_RANGE) {
			n = copy_file_range(src_fd, &in, fd, &out, PAGE, 0);
		} else if (way == WAY_SENDFILE) {
			CHECK(lseek(fd, at, SEEK_SET) == at, "lseek: %s", strerror(errno));
			off_t from = 0;
			n = sendfile(fd, src_fd, &from, PAGE);
		} else {
			int p[2];
			CHECK(pipe(p) == 0, "pipe: %s", strerror(errno));
			CHECK(write(p[1], buf, PAGE) == PAGE, "write to the pipe: %s", strerror(errno));
			n = splice(p[0], NULL, fd, &out, PAGE, 0);
			close(p[0]);
			close(p[1]);
		}
		break;
	}
	case WAY_PUNCH_HOLE:
		n = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, at, PAGE) == 0 ? PAGE : -1;
		break;
	case WAY_ZERO_RANGE:
		n = fallocate(fd, FALLOC_FL_ZERO_RANGE, at, PAGE) == 0 ? PAGE : -1;
		break;
	case WAY_RAW_SYSCALL:
		n = syscall(SYS_pwrite64, fd, buf, PAGE, at);
		break;
	default:
		break;
	}
	if (n < 0 && errno == EOPNOTSUPP && (way == WAY_PUNCH_HOLE || way == WAY_ZERO_RANGE)) {
		printf("note: %s not supported by this file system; the page is written with pwrite\n",
		       change_way_name[way]);
		memset(buf, 0, sizeof(buf));
		n = pwrite(fd, buf, PAGE, at);
	}
	CHECK(n == PAGE, "%s of page %zu: %zd (%s)", change_way_name[way], page, n, strerror(errno));
}

static void case_file_changed_every_way(void)
{
	const size_t pages = 2 * WAY_COUNT, bytes = pages * PAGE;
	int fd = make_file(bytes, 0x11);
	int src = make_file(PAGE, 0);
	unsigned char *m = map_file(fd, bytes, MAP_SHARED);
	unsigned char *d, *got = (unsigned char *)malloc(bytes), *file = (unsigned char *)malloc(bytes);
	CUDA_OK(cudaMalloc((void **)&d, bytes));
	launch_copy(m, d, bytes); /* the replica holds every page */
	CUDA_OK(cudaDeviceSynchronize());
	/* Many quick rounds: changes closer together than the file system's
	 * clock tick must be seen too. A hole puncher's page gets bytes back
	 * from pwrite in the round after. */
	for (int round = 0; round < 300; round++) {
		for (int way = 0; way < WAY_COUNT; way++) {
			size_t page = (size_t)(2 * way + round % 2);
			unsigned char value = (unsigned char)(0x20 + way + 16 * round);
			if (way == WAY_PUNCH_HOLE || way == WAY_ZERO_RANGE) {
				change_page(fd, src, WAY_PWRITE, page ^ 1, value);
				value = 0;
			}
			change_page(fd, src, (enum change_way)way, page, value);
		}
		launch_copy(m, d, bytes);
		CUDA_OK(cudaMemcpy(got, d, bytes, cudaMemcpyDeviceToHost));
		CHECK(pread(fd, file, bytes, 0) == (ssize_t)bytes, "pread: %s", strerror(errno));
		for (size_t i = 0; i < bytes; i++) {
			int way = (int)(i / PAGE / 2);
			CHECK(got[i] == file[i], "round %d, byte %zu (page %zu, changed by %s): the kernel "
			      "saw %u, read() gives %u", round, i, i / PAGE, change_way_name[way], got[i], file[i]);
			CHECK(m[i] == file[i], "round %d, byte %zu (%s): the mapping holds %u, read() gives %u",
			      round, i, change_way_name[way], m[i], file[i]);
		}
	}
	CUDA_OK(cudaFree(d));
	free(got);
	free(file);
}

/* A host function (cudaLaunchHostFunc) runs on the driver's thread while
 * the program waits for its stream: one that writes and resizes the
 * mapped file must neither wait for the shim (the program's thread is in
 * the shim, in the sync) nor be lost. Kernels before it write the mapping,
 * so every sync has pages to bring back. */
struct host_fn_ctx {
	int fd;
	size_t bytes;
	unsigned round;
	unsigned calls;
};

static void CUDART_CB host_fn_writes(void *arg)
{
	struct host_fn_ctx *c = (struct host_fn_ctx *)arg;
	unsigned char v = (unsigned char)(c->round + 1);
	CHECK(ftruncate(c->fd, (off_t)(c->bytes / 2)) == 0, "ftruncate in a host function: %s", strerror(errno));
	CHECK(ftruncate(c->fd, (off_t)c->bytes) == 0, "ftruncate in a host function: %s", strerror(errno));
	CHECK(pwrite(c->fd, &v, 1, (off_t)(c->bytes - PAGE)) == 1, "pwrite in a host function: %s",
	      strerror(errno));
	c->calls++;
}

static void case_host_function_resizes(void)
{
	const size_t bytes = 16 * PAGE;
	int fd = make_file(bytes, 5);
	unsigned char *m = map_file(fd, bytes, MAP_SHARED);
	unsigned char *d, got[2];
	CUDA_OK(cudaMalloc((void **)&d, PAGE));
	struct host_fn_ctx ctx = {fd, bytes, 0, 0};
	for (unsigned round = 0; round < 200; round++) {
		ctx.round = round;
		unsigned char k = (unsigned char)(round * 3 + 7);
		launch_write(m, 0, PAGE, 1, 0, k); /* page 0: the kernel's */
		CUDA_OK(cudaLaunchHostFunc(0, host_fn_writes, &ctx));
		if (round % 2)
			CUDA_OK(cudaDeviceSynchronize());
		else
			CUDA_OK(cudaStreamSynchronize(0));
		CHECK(ctx.calls == round + 1, "round %u: the host function ran %u times", round, ctx.calls);
		CHECK(m[0] == k && m[PAGE - 1] == k, "round %u: the kernel's byte is %u, want %u", round, m[0], k);
		CHECK(m[bytes - PAGE] == (unsigned char)(round + 1), "round %u: the host function's byte is %u",
		      round, m[bytes - PAGE]);
		/* The next kernel sees the host function's byte (its pages came
		 * and went with the resize). */
		launch_copy(m + bytes - PAGE, d, 1);
		launch_copy(m, d + 1, 1);
		CUDA_OK(cudaMemcpy(got, d, 2, cudaMemcpyDeviceToHost));
		CHECK(got[0] == (unsigned char)(round + 1) && got[1] == k,
		      "round %u: the next kernel saw %u and %u, want %u and %u", round, got[0], got[1],
		      (unsigned char)(round + 1), k);
	}
	CUDA_OK(cudaFree(d));
}

/* The shim cannot map the file a second time (mmap fails with ENOMEM,
 * injected by libfault_libc.so) when the first launch makes the region's
 * device replica: it says so naming the file and the errno and moves pages
 * through the program's own mapping; false sharing still merges exactly,
 * round after round, and the file holds the result. */
static void case_store_view_unavailable(void)
{
	int (*arm)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "fault_libc_arm");
	if (!arm) {
		printf("SKIP: needs libfault_libc.so preloaded\n");
		exit(77);
	}
	const size_t bytes = 8 * PAGE;
	int fd = make_file(bytes, 0);
	unsigned char *m = map_file(fd, bytes, MAP_SHARED);
	char spec[300];
	snprintf(spec, sizeof(spec), "call=mmap,errno=ENOMEM,times=0,path=%s", path);
	arm(spec);
	false_sharing_rounds(m, bytes);
	arm(NULL);
	unsigned char *buf = (unsigned char *)malloc(bytes);
	CHECK(pread(fd, buf, bytes, 0) == (ssize_t)bytes, "pread: %s", strerror(errno));
	CHECK(memcmp(buf, m, bytes) == 0, "the file differs from the mapping");
	free(buf);
}

/* A MAP_FIXED mapping over a region a device holds replaces it: the
 * device's copy is torn down (driver calls that may map memory of their
 * own) and the kernel's unsynced writes reach the file first. */
static void case_map_fixed_over_replica(void)
{
	const size_t bytes = 8 * PAGE;
	int fd = make_file(bytes, 1);
	unsigned char *m = map_file(fd, bytes, MAP_SHARED);
	launch_write(m, 0, bytes, 1, 0, 0x5a);
	void *p = mmap(m, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	CHECK(p == m, "mmap MAP_FIXED: %s", strerror(errno));
	last_map = NULL;
	unsigned char *buf = (unsigned char *)malloc(bytes);
	CHECK(pread(fd, buf, bytes, 0) == (ssize_t)bytes, "pread: %s", strerror(errno));
	for (size_t i = 0; i < bytes; i += 511)
		CHECK(buf[i] == 0x5a, "byte %zu: %#x, the kernel wrote 0x5a", i, buf[i]);
	free(buf);
	CUDA_OK(cudaDeviceSynchronize());
}

/* gaia_macquire/gaia_mrelease for a device (include/gaia.h), looked up
 * with dlsym as a program that also runs without the shim would: the
 * acquire uploads the CPU's bytes, so the launch after it uploads nothing;
 * the release brings a kernel's writes to the CPU with no CUDA sync in
 * the program; a device that is not the current one is refused. */
static void case_explicit_device_calls(void)
{
	typedef int (*call_fn)(void *, size_t, int);
	call_fn acquire = (call_fn)dlsym(RTLD_DEFAULT, "gaia_macquire");
	call_fn release = (call_fn)dlsym(RTLD_DEFAULT, "gaia_mrelease");
	CHECK(acquire && release, "gaia_macquire/gaia_mrelease not found: not under the shim");
	const size_t bytes = 8 * PAGE;
	int fd = make_file(bytes, 0);
	unsigned char *m = map_file(fd, bytes, MAP_SHARED);
	CUDA_OK(cudaSetDevice(0));
	CUDA_OK(cudaFree(0));
	memset(m, 5, bytes);
	uint64_t before = htod_bytes();
	CHECK(acquire(m, bytes, 0) == 0, "gaia_macquire(device 0): %s", strerror(errno));
	uint64_t acquired = htod_bytes() - before;
	bool counted = bytes_counted("bytes gaia_macquire uploaded");
	/* paged: the CPU writes the replica (in the test's registration:
	 * paged_fill_bytes 32768, so the launch after it wrote nothing) */
	bool paged = paged_backing();
	CHECK(!counted || (paged ? acquired == 0 : acquired >= bytes), "gaia_macquire copied %llu bytes of %zu%s",
	      (unsigned long long)acquired, bytes, paged ? " (paged on demand: the CPU writes them)" : "");
	unsigned char *out;
	CUDA_OK(cudaMalloc((void **)&out, bytes));
	before = htod_bytes();
	SIMGPU_LAUNCH(copy_bytes, 8, 128, 0, 0)(m, out, (unsigned long long)bytes);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	CHECK(!counted || htod_bytes() - before < PAGE, "the launch after gaia_macquire uploaded %llu bytes",
	      (unsigned long long)(htod_bytes() - before));
	static unsigned char seen[8 * PAGE];
	CUDA_OK(cudaMemcpy(seen, out, bytes, cudaMemcpyDeviceToHost));
	CHECK(seen[0] == 5 && seen[bytes - 1] == 5, "the kernel saw %d..%d, not 5", seen[0],
	      seen[bytes - 1]);

	/* A kernel writes; the program releases the device instead of syncing. */
	launch_write(m, PAGE, 3 * PAGE, 1, 0, 9);
	CHECK(release(m, bytes, 0) == 0, "gaia_mrelease(device 0): %s", strerror(errno));
	for (size_t i = 0; i < bytes; i += 97)
		CHECK(m[i] == (i >= PAGE && i < 3 * PAGE ? 9 : 5), "byte %zu after gaia_mrelease: %d", i,
		      m[i]);
	unsigned char b = 0;
	CHECK(pread(fd, &b, 1, 2 * PAGE) == 1 && b == 9, "pread after gaia_mrelease: %d", b);

	errno = 0;
	int rc = acquire(m, bytes, 7);
	CHECK(rc == -1 && errno == ENODEV, "gaia_macquire(device 7): %d, errno %d", rc, errno);
	errno = 0;
	rc = release(m, bytes, 7);
	CHECK(rc == -1 && errno == ENODEV, "gaia_mrelease(device 7): %d, errno %d", rc, errno);
	CUDA_OK(cudaFree(out));
}

/* Peer reads fetch ahead (GAIA_READAHEAD_KB, README "Peer caching"): the
 * first 4 KiB read of a file a device holds, out of the page cache, brings
 * the knob's window in one transfer; the reads of the rest of that window
 * move nothing; the next read past it brings twice as much. A page the CPU
 * then writes is read as written, not as fetched. */
static void case_peer_readahead(void)
{
	const size_t npages = 256, bytes = npages * PAGE;
	int fd;
	unsigned char *pattern, *d, got[PAGE];
	unsigned char *m = peer_setup(bytes, 29, 3, &fd, &pattern, &d);
	unsigned char vec[256];
	CHECK(mincore(m, bytes, vec) == 0, "mincore");
	for (size_t i = 0; i < npages; i++)
		if (vec[i] & 1) {
			printf("skip: the kernel kept page %zu resident after MADV_PAGEOUT\n", i);
			exit(77);
		}
	const char *knob = getenv("GAIA_READAHEAD_KB");
	size_t k = (size_t)(knob ? atoi(knob) : 512) / 4;
	CHECK(k >= 1 && 3 * k <= npages, "GAIA_READAHEAD_KB=%s: the case needs a window of 1 to %zu pages", knob,
	      npages / 3);
	uint64_t before = dtoh_bytes();
	CHECK(pread(fd, got, PAGE, 0) == PAGE && !memcmp(got, pattern, PAGE), "page 0 read wrong");
	uint64_t first = dtoh_bytes() - before;
	if (bytes_counted("bytes fetched ahead"))
		CHECK(first == k * PAGE, "the first 4 KiB read fetched %llu bytes from the device, want the "
		      "GAIA_READAHEAD_KB window of %zu pages", (unsigned long long)first, k);
	before = dtoh_bytes();
	for (size_t p = 1; p < k; p++)
		CHECK(pread(fd, got, PAGE, (off_t)(p * PAGE)) == PAGE && !memcmp(got, pattern + p * PAGE, PAGE),
		      "page %zu read wrong", p);
	if (bytes_counted("bytes fetched ahead"))
		CHECK(dtoh_bytes() == before, "reads inside the window fetched %llu more bytes",
		      (unsigned long long)(dtoh_bytes() - before));
	before = dtoh_bytes();
	CHECK(pread(fd, got, PAGE, (off_t)(k * PAGE)) == PAGE && !memcmp(got, pattern + k * PAGE, PAGE),
	      "page %zu read wrong", k);
	if (bytes_counted("bytes fetched ahead"))
		CHECK(dtoh_bytes() - before == 2 * k * PAGE, "the read past the window fetched %llu bytes, want "
		      "twice the window (%zu pages)", (unsigned long long)(dtoh_bytes() - before), 2 * k);
	/* Page k + 1 is in what was fetched: the CPU writes it, it leaves the
	 * page cache again, and a read sees the CPU's bytes. */
	memset(m + (k + 1) * PAGE, 0xcd, PAGE);
	CHECK(msync(m, bytes, MS_SYNC) == 0, "msync: %s", strerror(errno));
	/* A launch acquires: the store gets a new version, the device its
	 * bytes, and the file's times are trusted again, so that only the
	 * version tells what was fetched from what is current. */
	launch_copy(m, d, bytes);
	CUDA_OK(cudaDeviceSynchronize());
	CHECK(madvise(m, bytes, MADV_PAGEOUT) == 0, "madvise");
	CHECK(mincore(m, bytes, vec) == 0, "mincore");
	if (vec[k + 1] & 1) {
		printf("skip: the kernel kept page %zu resident after MADV_PAGEOUT\n", k + 1);
		exit(77);
	}
	CHECK(pread(fd, got, PAGE, (off_t)((k + 1) * PAGE)) == PAGE, "pread");
	for (size_t i = 0; i < PAGE; i++)
		CHECK(got[i] == 0xcd, "page %zu byte %zu reads %u after the CPU wrote 0xcd", k + 1, i, got[i]);
	free(pattern);
}

/* A file that ends inside a page, its device copy current and the page
 * cache dropped: a read of the last page returns the bytes up to the end
 * of the file, as the kernel does, not the device page's zeros after it. */
static void case_peer_read_tail(void)
{
	const size_t bytes = 10 * PAGE + 2048;
	int fd = make_file(bytes, 0x3c);
	unsigned char *m = map_file(fd, 11 * PAGE, MAP_SHARED);
	unsigned char *d, got[PAGE];
	CUDA_OK(cudaMalloc((void **)&d, bytes));
	launch_copy(m, d, bytes);
	CUDA_OK(cudaDeviceSynchronize());
	CHECK(fsync(fd) == 0, "fsync");
	CHECK(madvise(m, 11 * PAGE, MADV_PAGEOUT) == 0, "madvise(MADV_PAGEOUT): %s", strerror(errno));
	unsigned char vec[11];
	CHECK(mincore(m, 11 * PAGE, vec) == 0, "mincore");
	if (vec[10] & 1) {
		printf("skip: the kernel kept the last page resident after MADV_PAGEOUT\n");
		exit(77);
	}
	ssize_t n = pread(fd, got, PAGE, 10 * PAGE);
	CHECK(n == 2048, "a 4 KiB pread at page 10 of a file of 10.5 pages returned %zd bytes, want 2048", n);
	for (ssize_t i = 0; i < n; i++)
		CHECK(got[i] == 0x3c, "byte %zd of page 10 reads %u", i, got[i]);
}

/* --- regions read in place (GAIA_BACKING=pinned, or auto for a read-only
 * region larger than half the device's free memory) --- */

#define SPARSE_BYTES (256ull << 20) /* 4x the 64 MiB device CTest gives these cases */
#define SPARSE_N 512
static unsigned long long sparse_bytes = SPARSE_BYTES;

/* Bytes that crossed the bus to device 0 so far, every kind. */
static uint64_t bus_htod_bytes(void)
{
#ifndef __CUDACC__
	struct simgpu_stats st;
	CHECK(simgpu_stats_get(0, &st) == 0, "simgpu_stats_get");
	uint64_t n = 0;
	for (int k = 0; k < 4; k++)
		n += st.bus_bytes[SIMGPU_BUS_HTOD][k];
	return n;
#else
	return 0;
#endif
}

/* The sparse files keep their names while the case runs: the simulated
 * device opens a registered file by its name, and cannot reach a deleted
 * one (simgpu/README.md); removed at exit. */
static char sparse_paths[2][256];

static void remove_sparse_files(void)
{
	for (int i = 0; i < 2; i++)
		if (sparse_paths[i][0])
			unlink(sparse_paths[i]);
}

/* A sparse file of SPARSE_BYTES with a byte written at each of SPARSE_N
 * places (at[], on distinct pages), value seed + i. */
static int make_sparse_file(unsigned long long *at, unsigned char seed)
{
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(path, sizeof(path), "%s/gaia-gpu-protocol-XXXXXX", dir);
	int fd = mkstemp(path);
	CHECK(fd >= 0, "mkstemp %s: %s", path, strerror(errno));
	int slot = sparse_paths[0][0] ? 1 : 0;
	if (!sparse_paths[0][0] && !sparse_paths[1][0])
		atexit(remove_sparse_files);
	snprintf(sparse_paths[slot], sizeof(sparse_paths[slot]), "%s", path);
	CHECK(ftruncate(fd, (off_t)sparse_bytes) == 0, "ftruncate: %s", strerror(errno));
	uint64_t x = 0x9e3779b97f4a7c15ull;
	const uint64_t pages = sparse_bytes / PAGE;
	for (unsigned i = 0; i < SPARSE_N; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		/* page i * stride + jitter: distinct pages, in no order */
		uint64_t page = (uint64_t)i * (pages / SPARSE_N) + x % (pages / SPARSE_N);
		at[i] = page * PAGE + (x >> 20) % PAGE;
		unsigned char v = (unsigned char)(seed + i);
		CHECK(pwrite(fd, &v, 1, (off_t)at[i]) == 1, "pwrite: %s", strerror(errno));
	}
	return fd;
}

/* Writes byte base + i at every step-th place of at[] (through the file). */
static void rewrite_places(int fd, const unsigned long long *at, unsigned step, unsigned char base)
{
	for (unsigned i = 0; i < SPARSE_N; i += step) {
		unsigned char v = (unsigned char)(base + i);
		CHECK(pwrite(fd, &v, 1, (off_t)at[i]) == 1, "pwrite: %s", strerror(errno));
	}
}

/* Kernels gather the bytes at at[] from m; each must equal the file's. */
static void gather_and_check(const unsigned char *m, int fd, const unsigned long long *at, const char *when)
{
	unsigned long long *d_at;
	unsigned char *d_out, got[SPARSE_N];
	CUDA_OK(cudaMalloc((void **)&d_at, sizeof(*d_at) * SPARSE_N));
	CUDA_OK(cudaMalloc((void **)&d_out, SPARSE_N));
	CUDA_OK(cudaMemcpy(d_at, at, sizeof(*d_at) * SPARSE_N, cudaMemcpyHostToDevice));
	SIMGPU_LAUNCH(gather_bytes, SPARSE_N / 128, 128, 0, 0)(m, d_at, d_out, SPARSE_N);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	CUDA_OK(cudaMemcpy(got, d_out, SPARSE_N, cudaMemcpyDeviceToHost));
	CUDA_OK(cudaFree(d_at));
	CUDA_OK(cudaFree(d_out));
	for (unsigned i = 0; i < SPARSE_N; i++) {
		unsigned char want;
		CHECK(pread(fd, &want, 1, (off_t)at[i]) == 1, "pread: %s", strerror(errno));
		CHECK(got[i] == want, "%s: a kernel read byte %llu as %u, the file has %u", when, at[i], got[i], want);
	}
}

/* A read-only file 4x device memory, read by kernels at 512 places: the
 * bytes are the file's, only about what was read crosses the bus, and a
 * change written to the file between launches is what the next one reads. */
static void case_in_place_sparse(void)
{
	static unsigned long long at[SPARSE_N];
	int fd = make_sparse_file(at, 1);
	const unsigned char *m = map_file_prot(fd, SPARSE_BYTES, PROT_READ, MAP_SHARED);
	uint64_t before = bus_htod_bytes();
	gather_and_check(m, fd, at, "first launch");
	uint64_t moved = bus_htod_bytes() - before;
	if (bytes_counted("bus bytes of a region read in place"))
		CHECK(moved <= 4ull * SPARSE_N * PAGE, "%llu bytes crossed the bus for %d bytes read at as many "
		      "places of a %llu MiB file; reading in place moves about a page each",
		      (unsigned long long)moved, SPARSE_N, SPARSE_BYTES >> 20);
	rewrite_places(fd, at, 5, 200);
	gather_and_check(m, fd, at, "after pwrite between launches");
}

/* A writable file 4x device memory (mode M: a replica in managed memory
 * paged on demand), read and written by kernels at 512 places while the
 * CPU writes next to each of them, on the same pages, before the sync:
 * after it the file holds both sides' bytes; a pwrite between launches is
 * what the next one reads; and the file never crossed the bus whole. */
static void case_paged_sparse(void)
{
	static unsigned long long at[SPARSE_N];
	int fd = make_sparse_file(at, 21);
	unsigned char *m = map_file_prot(fd, SPARSE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED);
	uint64_t before = bus_htod_bytes();
	gather_and_check(m, fd, at, "first launch");
	unsigned long long *d_at;
	CUDA_OK(cudaMalloc((void **)&d_at, sizeof(*d_at) * SPARSE_N));
	CUDA_OK(cudaMemcpy(d_at, at, sizeof(*d_at) * SPARSE_N, cudaMemcpyHostToDevice));
	SIMGPU_LAUNCH(scatter_bytes, SPARSE_N / 128, 128, 0, 0)(m, d_at, SPARSE_N, 40);
	CUDA_OK(cudaGetLastError());
	for (unsigned i = 0; i < SPARSE_N; i++)
		m[at[i] + 2] = (unsigned char)(90 + i); /* the CPU, on the kernel's pages */
	CUDA_OK(cudaDeviceSynchronize());
	CUDA_OK(cudaFree(d_at));
	for (unsigned i = 0; i < SPARSE_N; i++) {
		unsigned char file[3];
		CHECK(pread(fd, file, 3, (off_t)at[i]) == 3, "pread: %s", strerror(errno));
		unsigned char gpu = i % 2 ? 0 : (unsigned char)(40 + i), cpu = (unsigned char)(90 + i),
			      was = (unsigned char)(21 + i);
		CHECK(m[at[i]] == was && file[0] == was, "byte %llu: %u in memory, %u in the file, was %u", at[i],
		      m[at[i]], file[0], was);
		CHECK(m[at[i] + 1] == gpu && file[1] == gpu, "the kernel's byte %llu: %u in memory, %u in the file, "
		      "it wrote %u", at[i] + 1, m[at[i] + 1], file[1], gpu);
		CHECK(m[at[i] + 2] == cpu && file[2] == cpu, "the CPU's byte %llu: %u in memory, %u in the file, "
		      "it wrote %u", at[i] + 2, m[at[i] + 2], file[2], cpu);
	}
	rewrite_places(fd, at, 3, 150);
	gather_and_check(m, fd, at, "after pwrite between launches");
	uint64_t moved = bus_htod_bytes() - before;
	if (bytes_counted("bus bytes of a region paged on demand"))
		CHECK(moved < SPARSE_BYTES / 2, "%llu bytes crossed the bus for 512 places of a %llu MiB file: it was "
		      "not paged on demand", (unsigned long long)moved, SPARSE_BYTES >> 20);
	CHECK(munmap(m, SPARSE_BYTES) == 0, "munmap: %s", strerror(errno));
	for (unsigned i = 0; i < SPARSE_N; i += 2) {
		unsigned char b;
		CHECK(pread(fd, &b, 1, (off_t)at[i] + 1) == 1 && b == (unsigned char)(40 + i),
		      "after munmap the file has %u at %llu, the kernel wrote %u", b, at[i] + 1, (unsigned char)(40 + i));
	}
	last_map = NULL;
}

/* Device 0's kernels' managed-memory faults, and its prefetch migrations
 * to the device (transfers), so far (the simulated device counts them). */
static void uvm_counts(uint64_t *device_faults, uint64_t *migrations)
{
#ifndef __CUDACC__
	struct simgpu_stats st;
	CHECK(simgpu_stats_get(0, &st) == 0, "simgpu_stats_get");
	*device_faults = st.uvm_device_faults;
	*migrations = st.bus_transfers[SIMGPU_BUS_HTOD][SIMGPU_BUS_MIGRATION];
#else
	*device_faults = *migrations = 0;
#endif
}

/* A region paged on demand (GAIA_BACKING=paged) whose first 4 MiB kernels
 * read, one byte per 64 KiB unit: the first launch faults on each unit;
 * the file then changes in every unit (the shim writes them on the host
 * again); the second launch, with GAIA_GPU_FAULTS on, finds them
 * prefetched (no fault), in windows that start at GAIA_GPU_READAHEAD_KB
 * and double while the learned run fills them; with it off, faults on
 * each unit again. The bytes are the file's either way. */
static void case_paged_learns(void)
{
	enum { UNITS = 64, UNIT = 64 << 10 };
	const size_t bytes = 32u << 20;
	static unsigned long long at[SPARSE_N];
	int fd = make_file(bytes, 0x33);
	for (unsigned i = 0; i < SPARSE_N; i++) {
		at[i] = (unsigned long long)(i % UNITS) * UNIT + 100 + i / UNITS;
		unsigned char v = (unsigned char)(7 + i);
		CHECK(pwrite(fd, &v, 1, (off_t)at[i]) == 1, "pwrite: %s", strerror(errno));
	}
	const unsigned char *m = map_file_prot(fd, bytes, PROT_READ, MAP_SHARED);
	uint64_t f0, t0, f1, t1, f2, t2;
	uvm_counts(&f0, &t0);
	gather_and_check(m, fd, at, "first launch");
	uvm_counts(&f1, &t1);
	rewrite_places(fd, at, 1, 60);
	gather_and_check(m, fd, at, "after the file changed in every unit");
	uvm_counts(&f2, &t2);
	if (!bytes_counted("faults and prefetches of a region paged on demand"))
		return;
	printf("first launch: %llu device faults; second: %llu device faults, %llu migrations\n",
	       (unsigned long long)(f1 - f0), (unsigned long long)(f2 - f1), (unsigned long long)(t2 - t1));
	CHECK(f1 - f0 >= UNITS, "the first launch faulted %llu times on %d units paged on demand",
	      (unsigned long long)(f1 - f0), UNITS);
	const char *on = getenv("GAIA_GPU_FAULTS");
	if (on && !strcmp(on, "off")) {
		CHECK(f2 - f1 >= UNITS, "without learning, the second launch faulted only %llu times on %d units "
		      "the host had written again", (unsigned long long)(f2 - f1), UNITS);
		return;
	}
	CHECK(f2 == f1, "the second launch faulted %llu times on units the first had faulted on: they were not "
	      "prefetched", (unsigned long long)(f2 - f1));
	/* one transfer per window: GAIA_GPU_READAHEAD_KB, doubling while
	 * the learned 4 MiB fill the windows */
	const char *kb = getenv("GAIA_GPU_READAHEAD_KB");
	size_t window = (kb ? strtoull(kb, NULL, 10) : 2048) * 1024, covered = 0;
	unsigned windows = 0;
	while (covered < (size_t)UNITS * UNIT) {
		covered += window;
		window = window * 2 > (64u << 20) ? 64u << 20 : window * 2;
		windows++;
	}
	CHECK(t2 - t1 == windows, "the learned 4 MiB came in %llu transfers; windows from %s KiB doubling make %u",
	      (unsigned long long)(t2 - t1), kb ? kb : "2048", windows);
}

/* A read-only region read through HMM (GAIA_BACKING=host, a device with
 * HMM): what its kernels faulted on comes into the page cache before the
 * next launch (mode H's window). A kernel reads units 0-7, 100, 200, 202
 * and 204 of a 16 MiB file, twice (fault records start after the first
 * launch: the second one's are learned); the file leaves the page cache;
 * a launch whose kernel reads none of it brings every learned unit back,
 * and the first window, from unit 0, is GAIA_GPU_READAHEAD_KB doubling
 * while the learned run fills it: it ends where the policy says. */
/* A named file of `bytes` zeros, as HMM maps it (removed at exit). */
static int make_named_file(size_t bytes)
{
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	int slot = sparse_paths[0][0] ? 1 : 0;
	if (!sparse_paths[0][0] && !sparse_paths[1][0])
		atexit(remove_sparse_files);
	snprintf(sparse_paths[slot], sizeof(sparse_paths[slot]), "%s/gaia-gpu-protocol-XXXXXX", dir);
	int fd = mkstemp(sparse_paths[slot]);
	CHECK(fd >= 0, "mkstemp %s: %s", sparse_paths[slot], strerror(errno));
	CHECK(ftruncate(fd, (off_t)bytes) == 0, "ftruncate: %s", strerror(errno));
	return fd;
}

/* The file's pages out of the page cache (clean: MADV_PAGEOUT and
 * POSIX_FADV_DONTNEED); the case skips if some stay. */
static void page_out_or_skip(const unsigned char *m, int fd, size_t bytes)
{
	CHECK(madvise((void *)m, bytes, MADV_PAGEOUT) == 0, "madvise(MADV_PAGEOUT): %s", strerror(errno));
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	unsigned char vec[256];
	for (size_t at = 0; at < bytes; at += sizeof(vec) * PAGE) {
		size_t n = bytes - at < sizeof(vec) * PAGE ? bytes - at : sizeof(vec) * PAGE;
		CHECK(mincore((void *)(m + at), n, vec) == 0, "mincore: %s", strerror(errno));
		for (size_t i = 0; i < n / PAGE; i++)
			if (vec[i] & 1) {
				printf("skip: page %zu stayed in the page cache after MADV_PAGEOUT\n", at / PAGE + i);
				exit(77);
			}
	}
}

static bool unit_resident(const unsigned char *m, unsigned u)
{
	unsigned char vec[16];
	CHECK(mincore((void *)(m + (size_t)u * (64 << 10)), 64 << 10, vec) == 0, "mincore: %s", strerror(errno));
	for (int i = 0; i < 16; i++)
		if (!(vec[i] & 1))
			return false;
	return true;
}

static void case_hmm_learns(void)
{
	enum { UNITS = 256, UNIT = 64 << 10, N = 12, RUN = 8 };
	const size_t bytes = (size_t)UNITS * UNIT;
	static const unsigned units[N] = {0, 1, 2, 3, 4, 5, 6, 7, 100, 200, 202, 204};
	unsigned long long at[N];
	int fd = make_named_file(bytes);
	for (unsigned i = 0; i < N; i++) {
		at[i] = (unsigned long long)units[i] * UNIT + 300 + i;
		unsigned char v = (unsigned char)(11 + i);
		CHECK(pwrite(fd, &v, 1, (off_t)at[i]) == 1, "pwrite: %s", strerror(errno));
	}
	CHECK(fsync(fd) == 0, "fsync: %s", strerror(errno));
	const unsigned char *m = map_file_prot(fd, bytes, PROT_READ, MAP_SHARED);
	unsigned long long *d_at;
	unsigned char *d_out, got[N];
	CUDA_OK(cudaMalloc((void **)&d_at, sizeof(at)));
	CUDA_OK(cudaMalloc((void **)&d_out, N));
	CUDA_OK(cudaMemcpy(d_at, at, sizeof(at), cudaMemcpyHostToDevice));
	for (int round = 0; round < 2; round++) {
		SIMGPU_LAUNCH(gather_bytes, 1, 32, 0, 0)(m, d_at, d_out, N);
		CUDA_OK(cudaGetLastError());
		CUDA_OK(cudaDeviceSynchronize());
		CUDA_OK(cudaMemcpy(got, d_out, N, cudaMemcpyDeviceToHost));
		for (unsigned i = 0; i < N; i++)
			CHECK(got[i] == (unsigned char)(11 + i), "launch %d: a kernel read byte %llu as %u, the file has %u",
			      round + 1, at[i], got[i], (unsigned char)(11 + i));
	}
	page_out_or_skip(m, fd, bytes);
	/* A launch on the region whose kernel reads nothing of it. */
	SIMGPU_LAUNCH(gather_bytes, 1, 32, 0, 0)(m, d_at, d_out, 0);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	/* Read ahead, not waited for: the reads land soon after. */
	bool all = false;
	for (int tries = 0; tries < 200 && !all; tries++) {
		all = true;
		for (unsigned i = 0; i < N && all; i++)
			all = unit_resident(m, units[i]);
		if (!all)
			usleep(10000);
	}
	for (unsigned i = 0; i < N; i++)
		CHECK(unit_resident(m, units[i]), "unit %u, where kernels faulted, is not in the page cache after the "
		      "next launch", units[i]);
	/* The first window: the knob's units from unit 0, doubling while
	 * the learned run fills a window and goes on past it. */
	const char *kb = getenv("GAIA_GPU_READAHEAD_KB");
	unsigned w = (unsigned)((kb ? strtoull(kb, NULL, 10) : 2048) / 64), s0 = 0;
	if (w < 1)
		w = 1;
	while (s0 + w < RUN) {
		s0 += w;
		w *= 2;
	}
	unsigned end = s0 + w - 1;
	CHECK(unit_resident(m, end), "unit %u, the end of the first window from %s KiB, is not in the page cache",
	      end, kb ? kb : "2048");
	CHECK(!unit_resident(m, end + 1), "unit %u, past the end of the first window from %s KiB, is in the page "
	      "cache", end + 1, kb ? kb : "2048");
	CUDA_OK(cudaFree(d_at));
	CUDA_OK(cudaFree(d_out));
}

/* What read_units summed for units [0, n) of a file holding buf. */
static void check_unit_sums(const unsigned long long *got, const unsigned char *buf, unsigned n)
{
	for (unsigned b = 0; b < n; b++) {
		unsigned long long want = 0;
		for (unsigned k = 0; k < 16; k++)
			want += buf[(size_t)b * (64 << 10) + k * 4096 + b % 4096];
		CHECK(got[b] == want, "unit %u: the kernel summed %llu, the file's bytes make %llu", b, got[b], want);
	}
}

/* A read-only 16 MiB region read through HMM, out of the page cache, read
 * by one kernel a 64 KiB unit per block in order over its first 64 units
 * (1 ms a block): with GAIA_GPU_FAULTS=cupti a thread reads the fault
 * records while it runs and reads the file ahead of them into the page
 * cache, so units past the last one it read are there after it; with
 * learn none is (the mapping is MADV_RANDOM: the page cache reads
 * nothing around the kernel's faults).
 * Every sum is the file's either way. */
static void case_hmm_front(void)
{
	enum { UNITS = 256, UNIT = 64 << 10, READ = 64 };
	const size_t bytes = (size_t)UNITS * UNIT;
	int fd = make_named_file(bytes);
	unsigned char *buf = (unsigned char *)malloc(bytes);
	for (size_t i = 0; i < bytes; i++)
		buf[i] = (unsigned char)(i * 2654435761u >> 13);
	CHECK(pwrite(fd, buf, bytes, 0) == (ssize_t)bytes, "pwrite: %s", strerror(errno));
	CHECK(fsync(fd) == 0, "fsync: %s", strerror(errno));
	const unsigned char *m = map_file_prot(fd, bytes, PROT_READ, MAP_SHARED);
	/* No read-around by the page cache at the kernel's faults (HMM faults
	 * through this mapping): what comes ahead is the shim's. */
	CHECK(madvise((void *)m, bytes, MADV_RANDOM) == 0, "madvise(MADV_RANDOM): %s", strerror(errno));
	unsigned long long *out, got[READ];
	CUDA_OK(cudaMalloc((void **)&out, sizeof(got)));
	/* The first launch reads it through HMM and turns fault records on
	 * for the next. */
	SIMGPU_LAUNCH(read_units, 1, 32, 0, 0)(m, out, 0ll);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	page_out_or_skip(m, fd, bytes);
	SIMGPU_LAUNCH(read_units, READ, 32, 0, 0)(m, out, 1000000ll);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	CUDA_OK(cudaMemcpy(got, out, sizeof(got), cudaMemcpyDeviceToHost));
	check_unit_sums(got, buf, READ);
	CUDA_OK(cudaFree(out));
	free(buf);
	/* Read ahead, not waited for: give the reads time to land. */
	unsigned ahead = 0;
	for (int tries = 0; tries < 100; tries++) {
		ahead = 0;
		for (unsigned u = READ; u < UNITS; u++)
			ahead += unit_resident(m, u);
		if (ahead)
			break;
		usleep(10000);
	}
	printf("units past the kernel's last one in the page cache after it: %u\n", ahead);
	const char *mode = getenv("GAIA_GPU_FAULTS");
	if (mode && (!strcmp(mode, "learn") || !strcmp(mode, "off")))
		CHECK(ahead == 0, "GAIA_GPU_FAULTS=%s: %u units past the kernel's last one were read ahead", mode, ahead);
	else
		CHECK(ahead > 0, "nothing past the kernel's last unit was read ahead of its faults");
}

/* A read-only 32 MiB region paged on demand (GAIA_BACKING=paged; a device
 * of 256 MiB, of which the front may fetch a quarter an epoch), read by
 * one kernel a 64 KiB unit per block, in order, 200 us a block (asleep:
 * a spinning kernel would take the CPUs the simulated driver migrates with): with
 * GAIA_GPU_FAULTS=cupti a thread reads the fault records while it runs
 * and prefetches ahead of them, so most units come before their first
 * touch (fewer than half fault); with learn, every unit faults. Every sum
 * is the file's either way. PROTOCOL_FORK=1: children are forked while
 * the kernel runs (fork_during_front). */
/* Forks while the kernel runs (the fault front's thread at work); each
 * child stores a byte through the mapping's neighbour page of a second,
 * writable file and exits at once, and must end within 20 s: a fork must
 * never copy the front's thread holding a lock or half an allocation. */
static void fork_during_front(void)
{
	const size_t bytes = 4 * PAGE;
	int fd = make_file(bytes, 0);
	unsigned char *w = map_file(fd, bytes, MAP_SHARED);
	for (int k = 0; k < 16; k++) {
		pid_t pid = fork();
		CHECK(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0) {
			w[PAGE + k] = (unsigned char)(k + 1);
			exit(0);
		}
		int status = 0;
		pid_t got = 0;
		for (int ms = 0; ms < 20000 && (got = waitpid(pid, &status, WNOHANG)) == 0; ms++)
			usleep(1000);
		if (got == 0)
			kill(pid, SIGKILL);
		CHECK(got == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "a child forked during the kernel did not end within 20 s (status %d)", status);
		unsigned char b = 0;
		CHECK(pread(fd, &b, 1, PAGE + k) == 1 && b == k + 1, "the child's byte %d: %u in the file", k, b);
	}
	munmap(w, bytes);
	close(fd);
}

static void case_paged_front(void)
{
	enum { UNITS = 512, UNIT = 64 << 10 };
	const size_t bytes = (size_t)UNITS * UNIT;
	int fd = make_file(bytes, 0);
	unsigned char *buf = (unsigned char *)malloc(bytes);
	for (size_t i = 0; i < bytes; i++)
		buf[i] = (unsigned char)(i * 2654435761u >> 13);
	CHECK(pwrite(fd, buf, bytes, 0) == (ssize_t)bytes, "pwrite: %s", strerror(errno));
	const unsigned char *m = map_file_prot(fd, bytes, PROT_READ, MAP_SHARED);
	unsigned long long *out, got[UNITS];
	CUDA_OK(cudaMalloc((void **)&out, sizeof(got)));
	uint64_t f0, t0, f1, t1;
	uvm_counts(&f0, &t0);
	SIMGPU_LAUNCH(read_units, UNITS, 32, 0, 0)(m, out, 200000ll);
	CUDA_OK(cudaGetLastError());
	if (getenv("PROTOCOL_FORK"))
		fork_during_front();
	CUDA_OK(cudaDeviceSynchronize());
	uvm_counts(&f1, &t1);
	CUDA_OK(cudaMemcpy(got, out, sizeof(got), cudaMemcpyDeviceToHost));
	check_unit_sums(got, buf, UNITS);
	CUDA_OK(cudaFree(out));
	free(buf);
	if (!bytes_counted("faults and prefetches of a region paged on demand read in order"))
		return;
	printf("one kernel over %d units: %llu device faults, %llu migrations to the device\n", UNITS,
	       (unsigned long long)(f1 - f0), (unsigned long long)(t1 - t0));
	const char *mode = getenv("GAIA_GPU_FAULTS");
	if (mode && (!strcmp(mode, "learn") || !strcmp(mode, "off"))) {
		CHECK(f1 - f0 >= UNITS, "GAIA_GPU_FAULTS=%s: the kernel faulted only %llu times on %d units", mode,
		      (unsigned long long)(f1 - f0), UNITS);
		return;
	}
	CHECK(f1 - f0 < UNITS / 2, "the kernel faulted %llu times on %d units read in order: nothing came ahead "
	      "of the fault front", (unsigned long long)(f1 - f0), UNITS);
}

/* A read-only region twice the device's 64 MiB paged on demand, read in
 * eight phases of 16 MiB, a sync after each: the kernel moves on, so
 * what it faulted on before must not be prefetched back at each launch
 * (the set ages out): about the file's size crosses the bus, and every
 * byte read is the file's. */
static void case_paged_phases(void)
{
	const size_t bytes = 128u << 20, phase = 16u << 20;
	int fd = make_file(bytes, 0);
	unsigned char *m = (unsigned char *)map_file_prot(fd, bytes, PROT_READ, MAP_SHARED);
	unsigned char *d;
	CUDA_OK(cudaMalloc((void **)&d, phase));
	unsigned char *want = (unsigned char *)malloc(phase), *got = (unsigned char *)malloc(phase);
	CHECK(want && got, "malloc");
	uint64_t f0, t0;
	uvm_counts(&f0, &t0);
	uint64_t before = bus_htod_bytes();
	for (size_t at = 0; at < bytes; at += phase) {
		launch_copy(m + at, d, phase);
		CUDA_OK(cudaDeviceSynchronize());
		CUDA_OK(cudaMemcpy(got, d, phase, cudaMemcpyDeviceToHost));
		CHECK(pread(fd, want, phase, (off_t)at) == (ssize_t)phase, "pread: %s", strerror(errno));
		CHECK(!memcmp(got, want, phase), "phase at %zu MiB: the kernel read other bytes than the file's",
		      at >> 20);
	}
	uint64_t moved = bus_htod_bytes() - before;
	free(want);
	free(got);
	CUDA_OK(cudaFree(d));
	if (!bytes_counted("bus bytes of a region paged on demand read in phases"))
		return;
	printf("%llu MiB crossed the bus for a %zu MiB file read once in phases\n",
	       (unsigned long long)(moved >> 20), bytes >> 20);
	CHECK(moved <= bytes + bytes / 4, "%llu MiB crossed the bus for a %zu MiB file read once: what earlier "
	      "phases faulted on was prefetched again", (unsigned long long)(moved >> 20), bytes >> 20);
}

static size_t vmm_big; /* bytes malloc_over_a_replica mapped with cuMemCreate, or 0 */
static bool freed_async; /* malloc_over_a_replica's allocation is stream-ordered */
static cudaMemPool_t big_pool; /* the pool it came from, destroyed with it, or NULL */
/* malloc_over_a_replica's allocation is a CUDA array (its handle): the
 * runtime's, the driver's, or a mipmapped one */
static enum { NOT_ARRAY, ARRAY, DRIVER_ARRAY, MIPMAP } big_array;
static void *array_pre; /* the program's memory taken ahead of the array */

/* A CUDA array that needs 8 MiB more than is free: the program's own
 * cudaMalloc first takes all but 24 MiB of the free memory, then 32 MiB
 * of float4 in a shape no layout pads (rows of 16384 elements, 256 KiB;
 * 128 rows, or 16 rows by 8 planes; a mipmap has 7 planes and a 3 MiB
 * level), so the replica's 32 MiB cover it on any device. */
static void *array_over(const char *alloc)
{
	size_t free_bytes = 0, total = 0;
	CUDA_OK(cudaMemGetInfo(&free_bytes, &total));
	const size_t keep = 24u << 20, w = 16384;
	if (free_bytes > keep)
		CUDA_OK(cudaMalloc(&array_pre, free_bytes - keep));
	struct cudaChannelFormatDesc f4 = cudaCreateChannelDesc(32, 32, 32, 32, cudaChannelFormatKindFloat);
	struct cudaExtent x = {w, 16, 8};
	cudaError_t e = cudaSuccess;
	void *big = NULL;
	if (!strcmp(alloc, "cuArrayCreate")) {
		CUDA_ARRAY_DESCRIPTOR d;
		memset(&d, 0, sizeof(d));
		d.Width = w;
		d.Height = 128;
		d.Format = CU_AD_FORMAT_FLOAT;
		d.NumChannels = 4;
		CUarray h = NULL;
		CUresult r = cuArrayCreate(&h, &d);
		CHECK(r == CUDA_SUCCESS, "cuArrayCreate of 32 MiB with 24 MiB free and a replica to give up: %d", (int)r);
		big = h;
		big_array = DRIVER_ARRAY;
	} else if (!strcmp(alloc, "cudaMallocArray")) {
		cudaArray_t a = NULL;
		e = cudaMallocArray(&a, &f4, w, 128, 0);
		big = a;
		big_array = ARRAY;
	} else if (!strcmp(alloc, "cudaMallocMipmappedArray")) {
		/* 7 planes: 28 MiB and a 3 MiB level fit where the replica was
		 * (the simulated device's memory has no virtual addresses:
		 * the free 24 MiB and the replica's 32 are not one range) */
		cudaMipmappedArray_t mm = NULL;
		struct cudaExtent x7 = {w, 16, 7};
		e = cudaMallocMipmappedArray(&mm, &f4, x7, 2, 0);
		big = mm;
		big_array = MIPMAP;
	} else {
		cudaArray_t a = NULL;
		e = cudaMalloc3DArray(&a, &f4, x, 0);
		big = a;
		big_array = ARRAY;
	}
	CHECK(e == cudaSuccess, "%s of 32 MiB with 24 MiB free and a replica to give up: %s", alloc,
	      cudaGetErrorName(e));
	/* usable: a row in and out */
	cudaArray_t a = (cudaArray_t)big;
	if (big_array == MIPMAP)
		CUDA_OK(cudaGetMipmappedArrayLevel(&a, (cudaMipmappedArray_t)big, 0));
	const size_t row = w * 16;
	static unsigned char in[16384 * 16], out[16384 * 16];
	for (size_t i = 0; i < row; i++)
		in[i] = (unsigned char)(i * 7 + 3);
	CUDA_OK(cudaMemcpy2DToArray(a, 0, 0, in, row, row, 1, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy2DFromArray(out, row, a, 0, 0, row, 1, cudaMemcpyDeviceToHost));
	CHECK(!memcmp(in, out, row), "a row of the array did not read back");
	return big;
}

/* A writable file of `bytes` mapped shared, a kernel writing byte 0 of
 * every page (a whole replica) and the CPU byte 1 of every third page, not
 * yet synced; then a cudaMalloc of the device's free memory and 8 MiB
 * more, which must succeed (the replica given up for it). PROTOCOL_ALLOC
 * names another way to allocate: cuMemCreate, cudaMallocPitch,
 * cudaMallocAsync, cudaMallocFromPoolAsync (a pool the program created);
 * cudaMallocFromPoolAsync_other: the replica and the pool are on device
 * 1 and device 0 is current when the program allocates (the room must be
 * made on the pool's device; SIMGPU_DEVICES=2). */
static void *malloc_over_a_replica(size_t bytes, int *fd, unsigned char **map, size_t *asked)
{
	const char *alloc = getenv("PROTOCOL_ALLOC");
	bool vmm = alloc && !strcmp(alloc, "cuMemCreate");
	const bool from_pool = alloc && !strncmp(alloc, "cudaMallocFromPoolAsync", 23);
	const int pool_dev = alloc && !strcmp(alloc, "cudaMallocFromPoolAsync_other") ? 1 : 0;
	if (pool_dev)
		CUDA_OK(cudaSetDevice(pool_dev));
	*fd = make_file(bytes, 0);
	unsigned char *m = *map = map_file(*fd, bytes, MAP_SHARED);
	launch_write(m, 0, bytes, PAGE, 0, 0x11);
	for (size_t p = 0; p < bytes / PAGE; p += 3)
		m[p * PAGE + 1] = 0x22; /* the CPU, on the kernel's pages */
	size_t free_bytes = 0, total = 0;
	CUDA_OK(cudaMemGetInfo(&free_bytes, &total));
	size_t want = free_bytes + (8u << 20);
	void *big = NULL;
	if (vmm) {
		/* The driver's virtual memory management instead (a program's
		 * own pool): a physical allocation, mapped and freed by the
		 * case as cudaMalloc's would be. */
		CUmemAllocationProp prop;
		memset(&prop, 0, sizeof(prop));
		prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
		prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		prop.location.id = 0;
		size_t gran = 0;
		CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS && gran,
		      "cuMemGetAllocationGranularity");
		want = (want + gran - 1) / gran * gran;
		CUmemGenericAllocationHandle h;
		CUresult r = cuMemCreate(&h, want, &prop, 0);
		CHECK(r == CUDA_SUCCESS, "cuMemCreate of %zu MiB with %zu MiB free and a %zu MiB replica to give up: %d",
		      want >> 20, free_bytes >> 20, bytes >> 20, (int)r);
		CUdeviceptr va;
		CHECK(cuMemAddressReserve(&va, want, 0, 0, 0) == CUDA_SUCCESS, "cuMemAddressReserve");
		CHECK(cuMemMap(va, want, 0, h, 0) == CUDA_SUCCESS, "cuMemMap");
		CUmemAccessDesc acc;
		memset(&acc, 0, sizeof(acc));
		acc.location = prop.location;
		acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
		CHECK(cuMemSetAccess(va, want, &acc, 1) == CUDA_SUCCESS, "cuMemSetAccess");
		CHECK(cuMemRelease(h) == CUDA_SUCCESS, "cuMemRelease"); /* freed when unmapped */
		big = (void *)(uintptr_t)va;
		vmm_big = want;
	} else if (alloc && strstr(alloc, "Array")) {
		big = array_over(alloc);
	} else if (alloc && !strcmp(alloc, "cudaMallocPitch")) {
		/* Rows of 96 KiB (a multiple of any pitch alignment). */
		const size_t width = 96u << 10, height = (want + width - 1) / width;
		size_t pitch = 0;
		cudaError_t e = cudaMallocPitch(&big, &pitch, width, height);
		CHECK(e == cudaSuccess && pitch >= width, "cudaMallocPitch of %zu rows of %zu KiB with %zu MiB free and "
		      "a %zu MiB replica to give up: %s (pitch %zu)", height, width >> 10, free_bytes >> 20, bytes >> 20,
		      cudaGetErrorName(e), pitch);
	} else if (from_pool) {
		cudaMemPoolProps props;
		memset(&props, 0, sizeof(props));
		props.allocType = cudaMemAllocationTypePinned;
		props.location.type = cudaMemLocationTypeDevice;
		props.location.id = pool_dev;
		CUDA_OK(cudaMemPoolCreate(&big_pool, &props));
		if (pool_dev)
			CUDA_OK(cudaSetDevice(0));
		cudaError_t e = cudaMallocFromPoolAsync(&big, want, big_pool, 0);
		CHECK(e == cudaSuccess, "cudaMallocFromPoolAsync (a pool of device %d, device 0 current) of %zu MiB with "
		      "%zu MiB free and a %zu MiB replica to give up: %s", pool_dev, want >> 20, free_bytes >> 20,
		      bytes >> 20, cudaGetErrorName(e));
		if (pool_dev)
			CUDA_OK(cudaSetDevice(pool_dev));
		freed_async = true;
	} else if (alloc && !strcmp(alloc, "cudaMallocAsync")) {
		cudaError_t e = cudaMallocAsync(&big, want, 0);
		CHECK(e == cudaSuccess, "cudaMallocAsync of %zu MiB with %zu MiB free and a %zu MiB replica to give up: "
		      "%s", want >> 20, free_bytes >> 20, bytes >> 20, cudaGetErrorName(e));
		freed_async = true;
	} else {
		cudaError_t e = cudaMalloc(&big, want);
		CHECK(e == cudaSuccess, "cudaMalloc of %zu MiB with %zu MiB free and a %zu MiB replica to give up: %s",
		      want >> 20, free_bytes >> 20, bytes >> 20, cudaGetErrorName(e));
	}
	if (asked)
		*asked = want;
	return big;
}

/* Frees what malloc_over_a_replica took. */
static void free_big(void *big)
{
	if (big_array) {
		if (big_array == MIPMAP)
			CUDA_OK(cudaFreeMipmappedArray((cudaMipmappedArray_t)big));
		else if (big_array == DRIVER_ARRAY)
			CHECK(cuArrayDestroy((CUarray)big) == CUDA_SUCCESS, "cuArrayDestroy");
		else
			CUDA_OK(cudaFreeArray((cudaArray_t)big));
		big_array = NOT_ARRAY;
		if (array_pre)
			CUDA_OK(cudaFree(array_pre));
		array_pre = NULL;
		return;
	}
	if (freed_async) {
		CUDA_OK(cudaFreeAsync(big, 0));
		freed_async = false;
		if (big_pool)
			CUDA_OK(cudaMemPoolDestroy(big_pool));
		big_pool = NULL;
		return;
	}
	if (!vmm_big) {
		CUDA_OK(cudaFree(big));
		return;
	}
	CUdeviceptr va = (CUdeviceptr)(uintptr_t)big;
	CHECK(cuMemUnmap(va, vmm_big) == CUDA_SUCCESS && cuMemAddressFree(va, vmm_big) == CUDA_SUCCESS,
	      "cuMemUnmap, cuMemAddressFree");
	vmm_big = 0;
}

/* A program's cudaMalloc that finds the device full of a replica (a
 * 16 MiB writable file on a 64 MiB device, kernels' and the CPU's writes
 * on the same pages not yet synced): the replica is given up, what the
 * kernel wrote reaches the mapping, the allocation succeeds, and the next
 * launch pages the region on demand, the same bytes merged again. */
static void case_demote_under_malloc(void)
{
	const size_t bytes = 16u << 20, pages = bytes / PAGE;
	int fd;
	unsigned char *m;
	size_t want;
	void *big = malloc_over_a_replica(bytes, &fd, &m, &want);
	if (!big_array)
		CUDA_OK(cudaMemset(big, 0x5c, want));
	CUDA_OK(cudaDeviceSynchronize());
	for (size_t p = 0; p < pages; p++) {
		CHECK(m[p * PAGE] == 0x11, "page %zu byte 0 is %#x, the kernel wrote 0x11", p, m[p * PAGE]);
		CHECK(m[p * PAGE + 1] == (p % 3 ? 0 : 0x22), "page %zu byte 1 is %#x", p, m[p * PAGE + 1]);
	}
	launch_write(m, 0, bytes, PAGE, 2, 0x33); /* byte 2 of every page */
	for (size_t p = 1; p < pages; p += 3)
		m[p * PAGE + 3] = 0x44;
	CUDA_OK(cudaDeviceSynchronize());
	unsigned char *got = (unsigned char *)malloc(bytes);
	CHECK(got && pread(fd, got, bytes, 0) == (ssize_t)bytes, "pread: %s", strerror(errno));
	for (size_t p = 0; p < pages; p++) {
		const unsigned char *pg = got + p * PAGE;
		CHECK(pg[0] == 0x11 && pg[2] == 0x33, "page %zu in the file: kernel bytes %#x %#x", p, pg[0], pg[2]);
		CHECK(pg[1] == (p % 3 ? 0 : 0x22) && pg[3] == (p % 3 == 1 ? 0x44 : 0), "page %zu in the file: CPU "
		      "bytes %#x %#x", p, pg[1], pg[3]);
		CHECK(pg[4] == 0 && pg[PAGE - 1] == 0, "page %zu in the file: untouched bytes %#x %#x", p, pg[4],
		      pg[PAGE - 1]);
	}
	free(got);
	free_big(big);
	last_map = NULL; /* paged now, whatever the backing asked for */
}

/* A replica given up for the program's cudaMalloc comes back whole once
 * the program frees that memory: the region pages on demand in between,
 * with kernels' and the CPU's writes on the same pages on both sides of
 * each change, and every byte reaches the file. Under vmm the end of
 * main checks that no managed memory is left (the paged replica went). */
static void case_promote_after_free(void)
{
	const size_t bytes = 16u << 20, pages = bytes / PAGE;
	int fd;
	unsigned char *m;
	void *big = malloc_over_a_replica(bytes, &fd, &m, NULL);
	launch_write(m, 0, bytes, PAGE, 2, 0x33); /* paged on demand now */
	for (size_t p = 1; p < pages; p += 3)
		m[p * PAGE + 3] = 0x44;
	/* The program (or a library it loads meanwhile) maps something with
	 * the address right after the region as a hint: the room the replica
	 * had there stays the region's, the kernel places it elsewhere, and
	 * the replica comes back at the region's own address. */
	const size_t other_len = 1u << 20;
	void *other = mmap(m + bytes, other_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(other != MAP_FAILED, "mmap: %s", strerror(errno));
	memset(other, 0x77, other_len);
	free_big(big);
	CUDA_OK(cudaDeviceSynchronize()); /* the room is back: the paged replica goes */
	launch_write(m, 0, bytes, PAGE, 4, 0x55); /* a whole replica again */
	for (size_t p = 2; p < pages; p += 3)
		m[p * PAGE + 5] = 0x66;
	CUDA_OK(cudaDeviceSynchronize());
	unsigned char *got = (unsigned char *)malloc(bytes);
	CHECK(got && pread(fd, got, bytes, 0) == (ssize_t)bytes, "pread: %s", strerror(errno));
	for (size_t p = 0; p < pages; p++) {
		const unsigned char *pg = got + p * PAGE;
		CHECK(pg[0] == 0x11 && pg[2] == 0x33 && pg[4] == 0x55, "page %zu in the file: kernel bytes %#x %#x %#x",
		      p, pg[0], pg[2], pg[4]);
		CHECK(pg[1] == (p % 3 == 0 ? 0x22 : 0) && pg[3] == (p % 3 == 1 ? 0x44 : 0) &&
		      pg[5] == (p % 3 == 2 ? 0x66 : 0), "page %zu in the file: CPU bytes %#x %#x %#x", p, pg[1],
		      pg[3], pg[5]);
		CHECK(pg[6] == 0 && pg[PAGE - 1] == 0, "page %zu in the file: untouched bytes %#x %#x", p, pg[6],
		      pg[PAGE - 1]);
		CHECK(!memcmp(pg, m + p * PAGE, PAGE), "page %zu: the mapping and the file differ", p);
	}
	free(got);
	for (size_t i = 0; i < other_len; i++)
		CHECK(((unsigned char *)other)[i] == 0x77, "the program's own mapping changed at byte %zu", i);
	CHECK(munmap(other, other_len) == 0, "munmap: %s", strerror(errno));
}

/* A read-only region's replica given up for the program's cudaMalloc,
 * then read by a kernel at 512 places before the program frees that
 * memory. PROTOCOL_TOUCH=sparse: the places lie in one 64 KiB unit of
 * every eight, and once the memory is free the region stays paged (what
 * kernels touched is on the device; a whole replica would move the other
 * seven eighths too). Made whole again: dense (every unit), most (160 of
 * its 256 units), aged (every unit, then rounds in which the region,
 * all on the device, faults no more while the program's own managed
 * buffer does), sparse with nothing learned (GAIA_GPU_FAULTS=off), and
 * sparse in a writable mapping (PROTOCOL_WRITABLE=1). Every byte a kernel
 * reads is the file's. PROTOCOL_MB: the region's size (16 MiB): fault
 * records start only with 32 MiB of the device free (CUPTI takes some),
 * so what is learned after the demotion needs a region larger than that. */
static void case_promote_touched(void)
{
	enum { UNIT = 64 << 10 };
	const char *mb = getenv("PROTOCOL_MB");
	const size_t bytes = (size_t)(mb ? atoi(mb) : 16) << 20, units = bytes / UNIT;
	const char *touch = getenv("PROTOCOL_TOUCH"), *faults = getenv("GAIA_GPU_FAULTS");
	const char *wr = getenv("PROTOCOL_WRITABLE");
	const bool learned = !(faults && !strcmp(faults, "off")), writable = wr && !strcmp(wr, "1");
	const bool sparse = !touch || !strcmp(touch, "sparse"), aged = touch && !strcmp(touch, "aged");
	const size_t touched = sparse ? units / 8 : touch && !strcmp(touch, "most") ? units * 5 / 8 : units;
	static unsigned long long at[SPARSE_N];
	int fd = make_file(bytes, 0x5a);
	for (unsigned i = 0; i < SPARSE_N; i++) {
		at[i] = (unsigned long long)((i % touched) * (units / touched)) * UNIT + 64 + (i / touched) * 67;
		unsigned char v = (unsigned char)(i * 7 + 1);
		CHECK(pwrite(fd, &v, 1, (off_t)at[i]) == 1, "pwrite: %s", strerror(errno));
	}
	const unsigned char *m = writable ? map_file(fd, bytes, MAP_SHARED)
					  : map_file_prot(fd, bytes, PROT_READ, MAP_SHARED);
	gather_and_check(m, fd, at, "a whole replica");
	size_t free_bytes = 0, total = 0;
	CUDA_OK(cudaMemGetInfo(&free_bytes, &total));
	void *big = NULL;
	cudaError_t e = cudaMalloc(&big, free_bytes + (8u << 20));
	CHECK(e == cudaSuccess, "cudaMalloc of %zu MiB with %zu MiB free and a %zu MiB replica to give up: %s",
	      (free_bytes >> 20) + 8, free_bytes >> 20, bytes >> 20, cudaGetErrorName(e));
	rewrite_places(fd, at, 1, 90);
	gather_and_check(m, fd, at, "paged on demand");
	if (aged) {
		const size_t own_bytes = 2u << 20;
		unsigned char *own = NULL;
		CUDA_OK(cudaMallocManaged((void **)&own, own_bytes, cudaMemAttachGlobal));
		static unsigned long long own_at[SPARSE_N];
		for (unsigned i = 0; i < SPARSE_N; i++)
			own_at[i] = (unsigned long long)(i % (own_bytes / UNIT)) * UNIT;
		unsigned long long *d_at;
		unsigned char *d_out;
		CUDA_OK(cudaMalloc((void **)&d_at, sizeof(own_at)));
		CUDA_OK(cudaMalloc((void **)&d_out, SPARSE_N));
		CUDA_OK(cudaMemcpy(d_at, own_at, sizeof(own_at), cudaMemcpyHostToDevice));
		for (int round = 0; round < 6; round++) {
			gather_and_check(m, fd, at, "on the device, read again");
			memset(own, round, own_bytes); /* back to the host: the next kernel faults */
			SIMGPU_LAUNCH(gather_bytes, SPARSE_N / 128, 128, 0, 0)(own, d_at, d_out, SPARSE_N);
			CUDA_OK(cudaGetLastError());
			CUDA_OK(cudaDeviceSynchronize());
		}
		CUDA_OK(cudaFree(d_at));
		CUDA_OK(cudaFree(d_out));
		CUDA_OK(cudaFree(own));
	}
	CUDA_OK(cudaFree(big));
	CUDA_OK(cudaDeviceSynchronize()); /* the device has room again */
	uint64_t before = bus_htod_bytes();
	gather_and_check(m, fd, at, "after the program freed its memory");
	uint64_t moved = bus_htod_bytes() - before;
	rewrite_places(fd, at, 3, 150);
	gather_and_check(m, fd, at, "after the file changed again");
	if (!bytes_counted("bus bytes of a region promoted or not"))
		return;
	const bool stays = sparse && learned && !writable;
	printf("%s places (%zu of %zu units), %s, %s: %llu KiB crossed the bus at the launch after the free\n",
	       touch ? touch : "sparse", touched, units, learned ? "faults learned" : "nothing learned",
	       writable ? "writable" : "read-only", (unsigned long long)(moved >> 10));
	if (stays)
		CHECK(moved < bytes / 2, "%llu KiB crossed the bus: the %zu MiB region kernels read in one unit of "
		      "eight was made whole again", (unsigned long long)(moved >> 10), bytes >> 20);
	else
		CHECK(moved >= bytes, "%llu KiB crossed the bus: the %zu MiB region (%zu of %zu units read, %s, %s) "
		      "was not made whole again", (unsigned long long)(moved >> 10), bytes >> 20, touched, units,
		      learned ? "faults learned" : "nothing learned", writable ? "writable" : "read-only");
}

/* A program that filled the device with its own memory (all but 4 MiB)
 * and then launches on a file region paged on demand: the kernel's and
 * the CPU's bytes reach the file, and so do those of a launch after the
 * program frees its memory. CUPTI's start-up takes device memory (12 MiB
 * on an H200, where a start without it lost the context: the next kernel
 * ended in cudaErrorIllegalAddress), so fault records wait for room.
 * PROTOCOL_THREAD=1: the launches and syncs come from a thread of their
 * own, whose first launch finds no current context to measure by. */
static void *paged_full_device_launches(void *arg);
static void case_paged_full_device(void)
{
	size_t free_bytes = 0, total = 0;
	CUDA_OK(cudaFree(0));
	CUDA_OK(cudaMemGetInfo(&free_bytes, &total));
	void *big = NULL;
	cudaError_t e = cudaMalloc(&big, free_bytes - (4u << 20));
	CHECK(e == cudaSuccess, "cudaMalloc of all but 4 MiB of %zu MiB free: %s", free_bytes >> 20,
	      cudaGetErrorName(e));
	const char *th = getenv("PROTOCOL_THREAD");
	if (th && !strcmp(th, "1")) {
		pthread_t t;
		CHECK(pthread_create(&t, NULL, paged_full_device_launches, big) == 0, "pthread_create");
		CHECK(pthread_join(t, NULL) == 0, "pthread_join");
	} else {
		paged_full_device_launches(big);
	}
}

static void *paged_full_device_launches(void *big)
{
	const size_t bytes = 16u << 20, pages = bytes / PAGE;
	int fd = make_file(bytes, 0);
	unsigned char *m = map_file(fd, bytes, MAP_SHARED);
	for (size_t p = 0; p < pages; p += 2)
		m[p * PAGE + 1] = 0x22;
	launch_write(m, 0, bytes, PAGE, 0, 0x11);
	CUDA_OK(cudaDeviceSynchronize());
	CUDA_OK(cudaFree(big));
	launch_write(m, 0, bytes, PAGE, 2, 0x33);
	CUDA_OK(cudaDeviceSynchronize());
	unsigned char *got = (unsigned char *)malloc(bytes);
	CHECK(got && pread(fd, got, bytes, 0) == (ssize_t)bytes, "pread: %s", strerror(errno));
	for (size_t p = 0; p < pages; p++) {
		const unsigned char *pg = got + p * PAGE;
		CHECK(pg[0] == 0x11 && pg[2] == 0x33 && pg[1] == (p % 2 ? 0 : 0x22) && pg[3] == 0,
		      "page %zu in the file: %#x %#x %#x %#x, want 0x11 %#x 0x33 0", p, pg[0], pg[1], pg[2], pg[3],
		      p % 2 ? 0 : 0x22);
	}
	free(got);
	return NULL;
}

/* A CUDA array and a mapped file, as a program loading a texture from a
 * mapped image does: a copy between them is made in stream order with the
 * bytes the mapping holds then (a kernel's unsynchronized writes before
 * it included), and what a copy out of an array stores into the mapping is
 * what the CPU, the file and the next kernel read. 2-D through the runtime
 * and on a stream through the driver, 3-D at offsets into a 3-D array; a
 * copy into a read-only mapping is refused and changes nothing. */
static void expect_bytes(const unsigned char *got, const unsigned char *want, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++)
		CHECK(got[i] == want[i], "%s: byte %zu is %#x, want %#x", what, i, got[i], want[i]);
}

static void case_array_copies(void)
{
	const size_t row = 4096, rows = 8, bytes = row * rows;
	int fd = make_file(bytes, 0x3d);
	unsigned char *m = map_file(fd, bytes, MAP_SHARED);
	unsigned char *want = (unsigned char *)malloc(bytes), *back = (unsigned char *)malloc(bytes);
	unsigned char *own = (unsigned char *)malloc(bytes), *d_copy;
	CHECK(want && back && own, "malloc");
	CUDA_OK(cudaMalloc((void **)&d_copy, bytes));
	struct cudaChannelFormatDesc u1 = cudaCreateChannelDesc(8, 0, 0, 0, cudaChannelFormatKindUnsigned);
	cudaArray_t a = NULL;
	CUDA_OK(cudaMallocArray(&a, &u1, row, rows, 0));

	/* Into the array, right after a kernel wrote the mapping (no sync). */
	launch_write(m, 0, bytes, PAGE, 0, 0x11);
	CUDA_OK(cudaMemcpy2DToArray(a, 0, 0, m, row, row, rows, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy2DFromArray(back, row, a, 0, 0, row, rows, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < bytes; i++)
		want[i] = i % PAGE ? 0x3d : 0x11;
	expect_bytes(back, want, bytes, "the array copied from the mapping after a kernel wrote it");

	/* Out of the array into the mapping. */
	for (size_t i = 0; i < bytes; i++)
		own[i] = (unsigned char)(i * 7 + 3);
	CUDA_OK(cudaMemcpy2DToArray(a, 0, 0, own, row, row, rows, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy2DFromArray(m, row, a, 0, 0, row, rows, cudaMemcpyDeviceToHost));
	expect_bytes(m, own, bytes, "the mapping after a copy from the array");
	CHECK(pread(fd, back, bytes, 0) == (ssize_t)bytes, "pread: %s", strerror(errno));
	expect_bytes(back, own, bytes, "the file after a copy from the array into its mapping");
	SIMGPU_LAUNCH(spin_then_copy, 1, 1, 0, 0)(m, d_copy, bytes, 0);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaMemcpy(back, d_copy, bytes, cudaMemcpyDeviceToHost));
	expect_bytes(back, own, bytes, "a kernel reading the mapping after a copy from the array");

	/* On a stream, through the driver: the kernel before the copy on the
	 * stream writes the first byte of each page. */
	cudaStream_t s;
	CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	SIMGPU_LAUNCH(write_bytes, 64, 128, 0, s)(m, 0ull, (unsigned long long)bytes, (unsigned)PAGE, 0u,
						  (unsigned char)0x22);
	CUDA_OK(cudaGetLastError());
	CUDA_MEMCPY2D c2;
	memset(&c2, 0, sizeof(c2));
	c2.srcMemoryType = CU_MEMORYTYPE_HOST, c2.srcHost = m, c2.srcPitch = row;
	c2.dstMemoryType = CU_MEMORYTYPE_ARRAY, c2.dstArray = (CUarray)a;
	c2.WidthInBytes = row, c2.Height = rows;
	CHECK(cuMemcpy2DAsync(&c2, (CUstream)s) == CUDA_SUCCESS, "cuMemcpy2DAsync from the mapping into the array");
	CUDA_OK(cudaStreamSynchronize(s));
	CUDA_OK(cudaMemcpy2DFromArray(back, row, a, 0, 0, row, rows, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < bytes; i++)
		want[i] = i % PAGE ? own[i] : 0x22;
	expect_bytes(back, want, bytes, "the array copied on a stream after a kernel on it wrote the mapping");
	CUDA_OK(cudaStreamDestroy(s));

	/* 3-D: a box of the mapping (rows of 256 bytes, planes of 4 rows)
	 * into a 3-D array at an offset, and the whole array back. */
	const size_t w = 256, h = 4, d = 4, bw = 128, bh = 2, bd = 2, ax = 64, ay = 1, az = 1;
	cudaArray_t a3 = NULL;
	struct cudaExtent ext;
	ext.width = w, ext.height = h, ext.depth = d;
	CUDA_OK(cudaMalloc3DArray(&a3, &u1, ext, 0));
	memset(back, 0, w * h * d);
	CUDA_MEMCPY3D c3;
	memset(&c3, 0, sizeof(c3));
	c3.srcMemoryType = CU_MEMORYTYPE_HOST, c3.srcHost = back, c3.srcPitch = w, c3.srcHeight = h;
	c3.dstMemoryType = CU_MEMORYTYPE_ARRAY, c3.dstArray = (CUarray)a3;
	c3.WidthInBytes = w, c3.Height = h, c3.Depth = d;
	CHECK(cuMemcpy3D(&c3) == CUDA_SUCCESS, "cuMemcpy3D zeros into the 3-D array");
	memset(&c3, 0, sizeof(c3));
	c3.srcMemoryType = CU_MEMORYTYPE_UNIFIED, c3.srcDevice = (CUdeviceptr)(uintptr_t)m;
	c3.srcXInBytes = 8, c3.srcY = 1, c3.srcZ = 1, c3.srcPitch = w, c3.srcHeight = h;
	c3.dstMemoryType = CU_MEMORYTYPE_ARRAY, c3.dstArray = (CUarray)a3;
	c3.dstXInBytes = ax, c3.dstY = ay, c3.dstZ = az;
	c3.WidthInBytes = bw, c3.Height = bh, c3.Depth = bd;
	CHECK(cuMemcpy3D(&c3) == CUDA_SUCCESS, "cuMemcpy3D of a box of the mapping into the 3-D array");
	memset(&c3, 0, sizeof(c3));
	c3.srcMemoryType = CU_MEMORYTYPE_ARRAY, c3.srcArray = (CUarray)a3;
	c3.dstMemoryType = CU_MEMORYTYPE_HOST, c3.dstHost = back, c3.dstPitch = w, c3.dstHeight = h;
	c3.WidthInBytes = w, c3.Height = h, c3.Depth = d;
	CHECK(cuMemcpy3D(&c3) == CUDA_SUCCESS, "cuMemcpy3D of the 3-D array back");
	for (size_t z = 0; z < d; z++)
		for (size_t y = 0; y < h; y++)
			for (size_t x = 0; x < w; x++) {
				bool in = x >= ax && x < ax + bw && y >= ay && y < ay + bh && z >= az && z < az + bd;
				size_t from = (z - az + 1) * w * h + (y - ay + 1) * w + (x - ax + 8);
				want[(z * h + y) * w + x] = in ? m[from] : 0;
			}
	expect_bytes(back, want, w * h * d, "the 3-D array after a box of the mapping was copied in");
	CUDA_OK(cudaFreeArray(a3));

	/* A batch (cuMemcpy3DBatchAsync): 64 x 3 elements of the mapping
	 * (rows of 512) into the 2-D array at (100, 2), on a stream. */
	CUDA_OK(cudaMemcpy2DToArray(a, 0, 0, own, row, row, rows, cudaMemcpyHostToDevice));
	/* A copy from pageable memory may return before its DMA lands, and
	 * a non-blocking stream is not ordered after the default stream. */
	CUDA_OK(cudaDeviceSynchronize());
	CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CUDA_MEMCPY3D_BATCH_OP op;
	memset(&op, 0, sizeof(op));
	op.src.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
	op.src.op.ptr.ptr = (CUdeviceptr)(uintptr_t)(m + 16);
	op.src.op.ptr.rowLength = 512;
	op.dst.type = CU_MEMCPY_OPERAND_TYPE_ARRAY;
	op.dst.op.array.array = (CUarray)a;
	op.dst.op.array.offset.x = 100, op.dst.op.array.offset.y = 2;
	op.extent.width = 64, op.extent.height = 3, op.extent.depth = 1;
	op.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
	CUresult rc = cuMemcpy3DBatchAsync(1, &op, 0, (CUstream)s);
	if (rc == CUDA_ERROR_NOT_SUPPORTED) {
		printf("(cuMemcpy3DBatchAsync with an array: not supported by this driver)\n");
	} else {
		CHECK(rc == CUDA_SUCCESS, "cuMemcpy3DBatchAsync from the mapping into the array: %d", (int)rc);
		CUDA_OK(cudaStreamSynchronize(s));
		CUDA_OK(cudaMemcpy2DFromArray(back, row, a, 0, 0, row, rows, cudaMemcpyDeviceToHost));
		memcpy(want, own, bytes);
		for (size_t y = 0; y < 3; y++)
			memcpy(want + (2 + y) * row + 100, m + 16 + y * 512, 64);
		expect_bytes(back, want, bytes, "the array after a batch copied a box of the mapping into it");
	}
	CUDA_OK(cudaStreamDestroy(s));

	/* Elements of 4 bytes (a float array, 256 x 4): a box of 16 x 2 of
	 * them at (5, 1) out of the array into the mapping (rows of 40
	 * elements), the rest of the mapping untouched; and an array of a
	 * format the shim cannot size (UNORM_INT8X1) refused, nothing copied. */
	CUarray af = NULL, an = NULL;
	CUDA_ARRAY_DESCRIPTOR ad;
	memset(&ad, 0, sizeof(ad));
	ad.Width = 256, ad.Height = 4, ad.Format = CU_AD_FORMAT_FLOAT, ad.NumChannels = 1;
	CHECK(cuArrayCreate(&af, &ad) == CUDA_SUCCESS, "cuArrayCreate float");
	CUDA_MEMCPY2D f2;
	memset(&f2, 0, sizeof(f2));
	f2.srcMemoryType = CU_MEMORYTYPE_HOST, f2.srcHost = own, f2.srcPitch = 1024;
	f2.dstMemoryType = CU_MEMORYTYPE_ARRAY, f2.dstArray = af, f2.WidthInBytes = 1024, f2.Height = 4;
	CHECK(cuMemcpy2D(&f2) == CUDA_SUCCESS, "cuMemcpy2D into the float array");
	CUDA_OK(cudaDeviceSynchronize()); /* its DMA landed before the non-blocking stream reads the array */
	memcpy(want, m, bytes);
	memset(&op, 0, sizeof(op));
	op.src.type = CU_MEMCPY_OPERAND_TYPE_ARRAY, op.src.op.array.array = af;
	op.src.op.array.offset.x = 5, op.src.op.array.offset.y = 1;
	op.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER, op.dst.op.ptr.ptr = (CUdeviceptr)(uintptr_t)(m + 64);
	op.dst.op.ptr.rowLength = 40;
	op.extent.width = 16, op.extent.height = 2, op.extent.depth = 1;
	op.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
	CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	rc = cuMemcpy3DBatchAsync(1, &op, 0, (CUstream)s);
	if (rc != CUDA_ERROR_NOT_SUPPORTED) {
		CHECK(rc == CUDA_SUCCESS, "cuMemcpy3DBatchAsync from the float array into the mapping: %d", (int)rc);
		CUDA_OK(cudaStreamSynchronize(s));
		for (size_t y = 0; y < 2; y++)
			memcpy(want + 64 + y * 160, own + (1 + y) * 1024 + 5 * 4, 64);
		expect_bytes(m, want, bytes, "the mapping after a batch copied a box of a float array into it");
	}
	ad.Format = CU_AD_FORMAT_UNORM_INT8X1;
	if (cuArrayCreate(&an, &ad) == CUDA_SUCCESS) {
		op.src.op.array.array = an;
		memcpy(want, m, bytes);
		rc = cuMemcpy3DBatchAsync(1, &op, 0, (CUstream)s);
		CUDA_OK(cudaStreamSynchronize(s));
		CHECK(rc == CUDA_ERROR_NOT_SUPPORTED, "cuMemcpy3DBatchAsync from a UNORM_INT8X1 array into the "
		      "mapping: %d, want CUDA_ERROR_NOT_SUPPORTED", (int)rc);
		expect_bytes(m, want, bytes, "the mapping after a batch with a UNORM_INT8X1 array");
		CHECK(cuArrayDestroy(an) == CUDA_SUCCESS, "cuArrayDestroy");
	}
	CHECK(cuArrayDestroy(af) == CUDA_SUCCESS, "cuArrayDestroy");
	CUDA_OK(cudaStreamDestroy(s));

	/* Into a read-only mapping of the file: refused, nothing changed. */
	unsigned char *ro = map_file_prot(fd, bytes, PROT_READ, MAP_SHARED);
	memcpy(want, ro, bytes);
	cudaError_t e = cudaMemcpy2DFromArray(ro, row, a, 0, 0, row, rows, cudaMemcpyDeviceToHost);
	CHECK(e != cudaSuccess, "cudaMemcpy2DFromArray into a read-only mapping succeeded");
	(void)cudaGetLastError();
	expect_bytes(ro, want, bytes, "a read-only mapping after a refused copy into it");
	CUDA_OK(cudaFreeArray(a));
	CUDA_OK(cudaFree(d_copy));
	free(want);
	free(back);
	free(own);
}

/* Bytes this process has read so far (/proc/self/io rchar): read(),
 * pread() and the like, whoever called them. */
static unsigned long long read_chars(void)
{
	FILE *f = fopen("/proc/self/io", "r");
	CHECK(f, "fopen /proc/self/io: %s", strerror(errno));
	char line[128];
	unsigned long long n = 0;
	int found = 0;
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, "rchar: %llu", &n) == 1;
	fclose(f);
	CHECK(found, "no rchar in /proc/self/io");
	return n;
}

/* A region kernels read in place is not read whole by the launches: they
 * read the page cache themselves, and a change another writer makes
 * reaches them without the shim looking for it. What this process read
 * (rchar) stays far below the file's 40 MiB. Once the region has a copy
 * on the device (made writable: a replica), a change by a writer the shim
 * does not see (a pwrite64 system call of its own) reaches the next
 * launch: the shim looked at the file before the copy was made. */
static void case_in_place_no_look(void)
{
	static unsigned long long at[SPARSE_N];
	sparse_bytes = 40ull << 20;
	int fd = make_sparse_file(at, 9);
	unsigned char *m = map_file_prot(fd, sparse_bytes, PROT_READ, MAP_SHARED);
	unsigned long long before = read_chars();
	gather_and_check(m, fd, at, "read in place");
	gather_and_check(m, fd, at, "read in place again");
	unsigned long long read = read_chars() - before;
	CHECK(read < sparse_bytes / 8, "two launches reading a %llu MiB region in place at %d places had this process "
	      "read %llu KiB", sparse_bytes >> 20, SPARSE_N, read / 1024);
	printf("read in place twice: this process read %llu KiB of a %llu MiB file\n", read / 1024, sparse_bytes >> 20);
	CHECK(mprotect(m, sparse_bytes, PROT_READ | PROT_WRITE) == 0, "mprotect: %s", strerror(errno));
	gather_and_check(m, fd, at, "with a replica");
	for (unsigned i = 0; i < SPARSE_N; i += 7) {
		unsigned char v = (unsigned char)(0xa0 + i);
		CHECK(unseen_syscall(SYS_pwrite64, fd, (long)&v, 1, (long)at[i], 0, 0) == 1, "pwrite64: %s",
		      strerror(errno));
	}
	gather_and_check(m, fd, at, "after another writer's pwrite64");
	CHECK(m[at[7]] == 0xa7, "the mapping reads %#x where another writer put 0xa7", m[at[7]]);
}

/* A region read in place made writable: the registration goes (or
 * reading through HMM, and the CPU's writes are tracked again), and
 * kernels' writes from then on reach the file with the CPU's, through a
 * replica. 40 MiB: more than half the free memory of the 64 MiB device
 * (auto reads it in place); its replica is paged on demand. */
static void case_in_place_then_writable(void)
{
	static unsigned long long at[SPARSE_N];
	sparse_bytes = 40ull << 20;
	int fd = make_sparse_file(at, 3);
	unsigned char *m = map_file_prot(fd, sparse_bytes, PROT_READ, MAP_SHARED);
	gather_and_check(m, fd, at, "read-only");
	CHECK(mprotect(m, sparse_bytes, PROT_READ | PROT_WRITE) == 0, "mprotect: %s", strerror(errno));
	const size_t cpu_at = 7 * PAGE + 9, gpu_page = sparse_bytes / PAGE - 3;
	m[cpu_at] = 77;
	launch_write(m, gpu_page * PAGE, (gpu_page + 1) * PAGE, 1, 0, 66);
	CUDA_OK(cudaDeviceSynchronize());
	unsigned char b;
	CHECK(m[gpu_page * PAGE] == 66 && m[gpu_page * PAGE + PAGE - 1] == 66, "the kernel's bytes: %u %u",
	      m[gpu_page * PAGE], m[gpu_page * PAGE + PAGE - 1]);
	CHECK(pread(fd, &b, 1, (off_t)(gpu_page * PAGE)) == 1 && b == 66, "the file has %u where the kernel wrote 66", b);
	CHECK(m[cpu_at] == 77, "the CPU's byte: %u", m[cpu_at]);
	gather_and_check(m, fd, at, "writable");
	/* The CPU's stores through the mapping (tracked again, whatever
	 * reading in place took off) are what the next launch reads. */
	for (unsigned i = 0; i < SPARSE_N; i += 3)
		m[at[i]] = (unsigned char)(170 + i);
	gather_and_check(m, fd, at, "after the CPU stored through the writable mapping");
}

/* The program takes PROT_READ off a region read in place between
 * launches (mprotect PROT_NONE), then gives it back: kernels read the
 * file's bytes all along (HMM follows the CPU's protection: such a region
 * is no longer read through it; a registration or a replica keeps the
 * bytes). */
static void case_in_place_made_unreadable(void)
{
	static unsigned long long at[SPARSE_N];
	int fd = make_sparse_file(at, 17);
	unsigned char *m = map_file_prot(fd, SPARSE_BYTES, PROT_READ, MAP_SHARED);
	gather_and_check(m, fd, at, "readable");
	CHECK(mprotect(m, SPARSE_BYTES, PROT_NONE) == 0, "mprotect PROT_NONE: %s", strerror(errno));
	gather_and_check(m, fd, at, "after mprotect PROT_NONE");
	rewrite_places(fd, at, 4, 120);
	CHECK(mprotect(m, SPARSE_BYTES, PROT_READ) == 0, "mprotect PROT_READ: %s", strerror(errno));
	gather_and_check(m, fd, at, "readable again, after pwrite");
}

/* The program unmaps the second half of a mapping kernels used and puts
 * its own memory there (anonymous, registered with cudaHostRegister), or
 * another file: a kernel given a pointer into that half reaches what the
 * CPU sees there, not the first mapping's replica, and its stores land
 * there. */
static void case_partly_unmapped_reused(void)
{
	const size_t bytes = 1u << 20, half = bytes / 2;
	int fd = make_file(bytes, 0xaa);
	unsigned char *a = map_file(fd, bytes, MAP_SHARED), *d;
	CUDA_OK(cudaMalloc((void **)&d, 4));
	launch_copy(a, d, 1);
	CUDA_OK(cudaDeviceSynchronize());
	CHECK(munmap(a + half, half) == 0, "munmap: %s", strerror(errno));
	unsigned char *q = (unsigned char *)mmap(a + half, half, PROT_READ | PROT_WRITE,
						 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	CHECK(q == a + half, "mmap at the freed half: %s", strerror(errno));
	memset(q, 0xcc, half);
	CUDA_OK(cudaHostRegister(q, half, cudaHostRegisterMapped));
	unsigned char *dq;
	CUDA_OK(cudaHostGetDevicePointer((void **)&dq, q, 0));
	launch_copy(a, d, 1);
	launch_copy(dq + 5, d + 1, 1);
	launch_write(dq, 16, 32, 1, 0, 0x77);
	CUDA_OK(cudaDeviceSynchronize());
	unsigned char got[2];
	CUDA_OK(cudaMemcpy(got, d, 2, cudaMemcpyDeviceToHost));
	CHECK(got[0] == 0xaa && got[1] == 0xcc, "kernels read %#x from the mapping and %#x from the memory put "
	      "where its second half was (want 0xaa 0xcc)", got[0], got[1]);
	CHECK(q[16] == 0x77 && q[31] == 0x77 && q[15] == 0xcc, "a kernel's stores into that memory: %#x %#x %#x",
	      q[15], q[16], q[31]);
	CUDA_OK(cudaHostUnregister(q));
	/* Another file there instead, read-only: kernels read its bytes.
	 * Kept linked until the end (the simulator's HMM finds a file by
	 * its path). */
	char named[256];
	snprintf(named, sizeof(named), "%s/gaia-gpu-protocol-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	int fd2 = mkstemp(named);
	CHECK(fd2 >= 0, "mkstemp: %s", strerror(errno));
	unsigned char *fill = (unsigned char *)malloc(half);
	memset(fill, 0xbb, half);
	CHECK(fill && pwrite(fd2, fill, half, 0) == (ssize_t)half, "pwrite: %s", strerror(errno));
	free(fill);
	void *b = mmap(a + half, half, PROT_READ, MAP_SHARED | MAP_FIXED, fd2, 0);
	CHECK(b == (void *)(a + half), "mmap of another file at the freed half: %s", strerror(errno));
	launch_copy(a + half + 7, d + 2, 1);
	launch_copy(a + 3, d + 3, 1);
	CUDA_OK(cudaDeviceSynchronize());
	unsigned char got2[2];
	CUDA_OK(cudaMemcpy(got2, d + 2, 2, cudaMemcpyDeviceToHost));
	CHECK(got2[0] == 0xbb && got2[1] == 0xaa, "kernels read %#x from the file mapped where the second half was "
	      "and %#x from the first half (want 0xbb 0xaa)", got2[0], got2[1]);
	unlink(named);
	CUDA_OK(cudaFree(d));
	last_map = NULL; /* the first mapping is part of a region now */
}

/* A writable 40 MiB file paged on demand (on the 64 MiB device), written
 * by a kernel at one byte in every two pages, then a read-only 40 MiB file
 * read in place: the device's pages of the first (thousands of them,
 * migrated one by one) do not keep it from reaching the second. */
static void case_paged_then_in_place(void)
{
	const size_t bytes = 40u << 20;
	int fd = make_file(bytes, 0);
	unsigned char *w = map_file(fd, bytes, MAP_SHARED);
	launch_write(w, 0, bytes, 8191, 0, 0x5a);
	CUDA_OK(cudaDeviceSynchronize());
	CHECK(w[0] == 0x5a && w[8191] == 0x5a && w[8190] == 0, "the kernel's bytes: %#x %#x %#x", w[0], w[8191],
	      w[8190]);
	static unsigned long long at[SPARSE_N];
	sparse_bytes = bytes;
	int fd2 = make_sparse_file(at, 23);
	const unsigned char *m = map_file_prot(fd2, bytes, PROT_READ, MAP_SHARED);
	gather_and_check(m, fd2, at, "a file read in place after another paged on demand");
	last_map = NULL; /* a paged replica, whatever the backing */
}

/* A fork child of a process whose kernels used a mapping launches a
 * kernel on it: refused (a CUDA context does not survive fork), with an
 * error naming the mapping and the fork, not run on the parent's copies;
 * the parent goes on. */
static void case_fork_child_launch(void)
{
	const size_t bytes = 64 * 1024;
	int fd = make_file(bytes, 0x42);
	unsigned char *m = map_file(fd, bytes, MAP_SHARED), *d;
	CUDA_OK(cudaMalloc((void **)&d, 1));
	launch_copy(m, d, 1);
	CUDA_OK(cudaDeviceSynchronize());
	fflush(stdout);
	pid_t pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		SIMGPU_LAUNCH(copy_bytes, 1, 1, 0, 0)(m, d, 1ull);
		cudaError_t e = cudaGetLastError();
		fprintf(stderr, "child launch: %s\n", cudaGetErrorName(e));
		_exit(e != cudaSuccess ? 0 : 1);
	}
	int status = 0;
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's launch on the parent's mapping was not "
	      "refused (status %#x)", status);
	launch_write(m, 0, bytes, PAGE, 0, 0x43);
	CUDA_OK(cudaDeviceSynchronize());
	CHECK(m[0] == 0x43 && m[PAGE] == 0x43 && m[1] == 0x42, "the parent's kernel after the fork: %#x %#x %#x", m[0],
	      m[PAGE], m[1]);
	CUDA_OK(cudaFree(d));
}

/* A region read in place is unmapped and another file is mapped at the
 * same address: kernels read the new file, in place again (the first
 * registration went with the mapping). */
static void case_in_place_remapped(void)
{
	static unsigned long long at[SPARSE_N], at2[SPARSE_N];
	int fd = make_sparse_file(at, 5);
	unsigned char *m = map_file_prot(fd, SPARSE_BYTES, PROT_READ, MAP_SHARED);
	gather_and_check(m, fd, at, "first file");
	CHECK(munmap(m, SPARSE_BYTES) == 0, "munmap: %s", strerror(errno));
	int fd2 = make_sparse_file(at2, 9);
	void *p = mmap(m, SPARSE_BYTES, PROT_READ, MAP_SHARED | MAP_FIXED, fd2, 0);
	CHECK(p == (void *)m, "mmap at the same address: %s", strerror(errno));
	last_map = m;
	uint64_t before = bus_htod_bytes();
	gather_and_check(m, fd2, at2, "second file at the same address");
	gather_and_check(m, fd2, at, "second file at the first file's places");
	uint64_t moved = bus_htod_bytes() - before;
	if (bytes_counted("bus bytes of a region read in place"))
		CHECK(moved <= 8ull * SPARSE_N * PAGE, "%llu bytes crossed the bus for the second file: it was "
		      "not read in place", (unsigned long long)moved);
	close(fd);
}

/* The program empties the file of a region read in place and writes it
 * again (ftruncate to 0 and back, new bytes): the page cache has new
 * pages, and the next launch reads them, not the ones pinned before. */
static void case_in_place_truncated(void)
{
	static unsigned long long at[SPARSE_N];
	int fd = make_sparse_file(at, 13);
	const unsigned char *m = map_file_prot(fd, sparse_bytes, PROT_READ, MAP_SHARED);
	gather_and_check(m, fd, at, "before the truncation");
	CHECK(ftruncate(fd, 0) == 0 && ftruncate(fd, (off_t)sparse_bytes) == 0, "ftruncate: %s", strerror(errno));
	rewrite_places(fd, at, 3, 100);
	gather_and_check(m, fd, at, "after the file was emptied and written again");
}

/* Another mapping is moved over the first page of a region read in place
 * (mremap with MREMAP_FIXED): that page is no longer the file's, and a
 * kernel must not read the file's byte there. Without a GPU that reaches
 * host memory it faults; it must never see the page the registration had. */
static void case_in_place_mremap_over(void)
{
	static unsigned long long at[SPARSE_N];
	int fd = make_sparse_file(at, 15);
	const unsigned char mark = 0xa7;
	CHECK(pwrite(fd, &mark, 1, 5) == 1, "pwrite: %s", strerror(errno));
	at[0] = 5;
	unsigned char *m = map_file_prot(fd, sparse_bytes, PROT_READ, MAP_SHARED);
	gather_and_check(m, fd, at, "before the move");
	unsigned char *b = (unsigned char *)mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(b != MAP_FAILED, "mmap: %s", strerror(errno));
	memset(b, 0x5a, PAGE);
	void *p = mremap(b, PAGE, PAGE, MREMAP_MAYMOVE | MREMAP_FIXED, m);
	CHECK(p == (void *)m, "mremap over the region: %s", strerror(errno));
	CHECK(m[5] == 0x5a, "the moved page holds %u at byte 5", m[5]);
	unsigned long long *d_at;
	unsigned char *d_out, got = 0;
	unsigned long long five = 5;
	CUDA_OK(cudaMalloc((void **)&d_at, sizeof(*d_at)));
	CUDA_OK(cudaMalloc((void **)&d_out, 1));
	CUDA_OK(cudaMemcpy(d_at, &five, sizeof(five), cudaMemcpyHostToDevice));
	SIMGPU_LAUNCH(gather_bytes, 1, 32, 0, 0)(m, d_at, d_out, 1);
	cudaError_t e = cudaGetLastError();
	if (e == cudaSuccess)
		e = cudaDeviceSynchronize();
	if (e == cudaSuccess)
		e = cudaMemcpy(&got, d_out, 1, cudaMemcpyDeviceToHost);
	CHECK(e == cudaErrorIllegalAddress || (e == cudaSuccess && got != mark),
	      "after another mapping moved over the region's first page a kernel read %s byte %u there (%s)",
	      got == mark ? "the file's old" : "", got, cudaGetErrorName(e));
	printf("ok in_place_mremap_over\n");
	exit(0); /* the device's error may be sticky */
}

/* A kernel stores into a region it reads in place: the device reports an
 * illegal address (the registration is read-only, as on hardware), and
 * the file keeps its bytes. */
static void case_kernel_writes_in_place(void)
{
	static unsigned long long at[SPARSE_N];
	int fd = make_sparse_file(at, 11);
	unsigned char *m = map_file_prot(fd, SPARSE_BYTES, PROT_READ, MAP_SHARED);
	gather_and_check(m, fd, at, "before the store");
	SIMGPU_LAUNCH(write_bytes, 1, 32, 0, 0)(m, (unsigned long long)at[0], (unsigned long long)at[0] + 1, 1, 0, 0xee);
	cudaError_t e = cudaGetLastError();
	if (e == cudaSuccess)
		e = cudaDeviceSynchronize();
	CHECK(e == cudaErrorIllegalAddress, "a kernel's store into a region read in place returned %s, want "
	      "cudaErrorIllegalAddress", cudaGetErrorName(e));
	unsigned char b;
	CHECK(pread(fd, &b, 1, (off_t)at[0]) == 1 && b == 11, "the file's byte is %u, want 11", b);
	printf("ok kernel_writes_in_place\n");
	exit(0); /* the device's error is sticky: nothing more runs here */
}

/* --- random sequences against a model of the promise (DESIGN §1) ---
 *
 * One device, kernels on one stream. Per byte the model keeps the CPU's
 * view (the file: CPU stores, pwrite) and what kernels wrote since the
 * last sync. A kernel sees the CPU's view at its launch except where an
 * earlier kernel of the epoch wrote (that write is ordered before it; a
 * CPU store made meanwhile is concurrent, and the device, the higher
 * owner, wins); a sync makes the kernels' writes the file's. Checked: what
 * each kernel read (after the next sync), the mapping and the file after
 * every sync, pread at any time (the CPU's view), and the whole file at
 * the end. Read-only (ro): a PROT_READ mapping of a 40 MiB file kernels
 * only read (read in place where the backing says so; the file changes
 * by pwrite between epochs).
 *
 * GAIA_MODEL_SEEDS (3) and GAIA_MODEL_OPS (200) size a run;
 * GAIA_MODEL_SEED=s replays one seed. */
#define MODEL_HOT 48 /* pages the operations land on (and the next one) */
#define MODEL_READS 64 /* bytes one reading kernel gathers */
#define MODEL_PENDING 8

/* A reading kernel's places (pinned host memory the kernel reads: a
 * cudaMemcpy would be a sync) and its results (device memory). */
struct model_read {
	unsigned long long *at;
	unsigned char *d_out;
	unsigned char want[MODEL_READS];
};

static unsigned long long model_rand(unsigned long long *x)
{
	*x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
	return *x;
}

/* A run of up to 3 pages starting on a hot page (or just before one). */
static void model_range(unsigned long long *x, size_t pages, size_t *at, size_t *n)
{
	size_t page = (size_t)(model_rand(x) % MODEL_HOT) * (pages / MODEL_HOT);
	*at = page * PAGE + (size_t)(model_rand(x) % PAGE);
	*n = 1 + (size_t)(model_rand(x) % (3 * PAGE));
	if (*at + *n > pages * PAGE)
		*n = pages * PAGE - *at;
}

static void model_seed(unsigned long long seed, unsigned ops, bool ro)
{
	const size_t bytes = ro ? 40u << 20 : 2u << 20, pages = bytes / PAGE;
	unsigned long long x = seed * 0x9e3779b97f4a7c15ull + 1;
	unsigned char *file = (unsigned char *)calloc(bytes, 1), *pend = (unsigned char *)calloc(bytes, 1);
	unsigned char *pend_set = (unsigned char *)calloc(bytes, 1), *buf = (unsigned char *)malloc(3 * PAGE + 1);
	CHECK(file && pend && pend_set && buf, "out of memory");
	sparse_bytes = bytes;
	static unsigned long long at_unused[SPARSE_N];
	int fd = make_sparse_file(at_unused, 0);
	CHECK(pread(fd, file, bytes, 0) == (ssize_t)bytes, "pread: %s", strerror(errno));
	unsigned char *m = map_file_prot(fd, bytes, ro ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED);
	struct model_read reads[MODEL_PENDING];
	for (unsigned i = 0; i < MODEL_PENDING; i++) {
		CUDA_OK(cudaMallocHost((void **)&reads[i].at, sizeof(*reads[i].at) * MODEL_READS));
		CUDA_OK(cudaMalloc((void **)&reads[i].d_out, MODEL_READS));
	}
	unsigned nreads = 0, writes = 0;
	bool running = false, any_pend = false;
	for (unsigned op = 0; op < ops; op++) {
		unsigned kind = (unsigned)(model_rand(&x) % 6);
		if (ro && running && kind != 3)
			kind = 4; /* nothing changes the file under a kernel reading it in place */
		if (nreads == MODEL_PENDING)
			kind = 4;
		if (ro && (kind == 0 || kind == 2))
			kind = 1;
		size_t at, n;
		model_range(&x, pages, &at, &n);
		unsigned char v = (unsigned char)(writes++ % 255 + 1);
		switch (kind) {
		case 0: /* the CPU stores */
			memset(m + at, v, n);
			memset(file + at, v, n);
			break;
		case 1: /* pwrite */
			memset(buf, v, n);
			CHECK(pwrite(fd, buf, n, (off_t)at) == (ssize_t)n, "pwrite: %s", strerror(errno));
			memset(file + at, v, n);
			break;
		case 2: /* a kernel writes */
			launch_write(m, at, at + n, 1, 0, v);
			memset(pend + at, v, n);
			memset(pend_set + at, 1, n);
			running = any_pend = true;
			break;
		case 3: { /* a kernel reads at places */
			struct model_read *r = &reads[nreads++];
			for (unsigned i = 0; i < MODEL_READS; i++) {
				size_t a, k;
				model_range(&x, pages, &a, &k);
				r->at[i] = a + k - 1;
				r->want[i] = pend_set[r->at[i]] ? pend[r->at[i]] : file[r->at[i]];
			}
			SIMGPU_LAUNCH(gather_bytes, 1, MODEL_READS, 0, 0)(m, r->at, r->d_out, MODEL_READS);
			CUDA_OK(cudaGetLastError());
			running = true;
			break;
		}
		case 4: /* sync, then everything is checked */
			CUDA_OK(cudaDeviceSynchronize());
			running = false;
			for (size_t b = 0; any_pend && b < bytes; b++)
				if (pend_set[b])
					file[b] = pend[b];
			if (any_pend)
				memset(pend_set, 0, bytes);
			any_pend = false;
			for (unsigned i = 0; i < nreads; i++) {
				unsigned char got[MODEL_READS];
				CUDA_OK(cudaMemcpy(got, reads[i].d_out, MODEL_READS, cudaMemcpyDeviceToHost));
				for (unsigned j = 0; j < MODEL_READS; j++)
					CHECK(got[j] == reads[i].want[j], "seed %llu op %u: a kernel read %u where the "
					      "model says %u (read %u of %u since the last sync)", seed, op, got[j],
					      reads[i].want[j], i, nreads);
			}
			nreads = 0;
			for (size_t p = 0; p < MODEL_HOT; p++) {
				size_t first = p * (pages / MODEL_HOT) * PAGE, len = 4 * PAGE;
				if (first + len > bytes)
					len = bytes - first;
				for (size_t b = first; memcmp(m + first, file + first, len) && b < first + len; b++)
					CHECK(m[b] == file[b], "seed %llu op %u: byte %zu is %u in the mapping, the model "
					      "says %u", seed, op, b, m[b], file[b]);
			}
			break;
		default: /* pread: the CPU's view, kernels running or not */
			CHECK(pread(fd, buf, n, (off_t)at) == (ssize_t)n, "pread: %s", strerror(errno));
			for (size_t b = 0; b < n; b++)
				CHECK(buf[b] == file[at + b], "seed %llu op %u: pread of byte %zu gave %u, the model "
				      "says %u", seed, op, at + b, buf[b], file[at + b]);
		}
	}
	CUDA_OK(cudaDeviceSynchronize());
	for (size_t b = 0; any_pend && b < bytes; b++)
		if (pend_set[b])
			file[b] = pend[b];
	for (unsigned i = 0; i < MODEL_PENDING; i++) {
		CUDA_OK(cudaFreeHost(reads[i].at));
		CUDA_OK(cudaFree(reads[i].d_out));
	}
	CHECK(munmap(m, bytes) == 0, "munmap: %s", strerror(errno));
	unsigned char *got = (unsigned char *)malloc(bytes);
	CHECK(got && pread(fd, got, bytes, 0) == (ssize_t)bytes, "pread: %s", strerror(errno));
	for (size_t b = 0; memcmp(got, file, bytes) && b < bytes; b++)
		CHECK(got[b] == file[b], "seed %llu: after munmap the file has %u at %zu, the model says %u", seed,
		      got[b], b, file[b]);
	close(fd);
	free(got);
	free(file);
	free(pend);
	free(pend_set);
	free(buf);
	last_map = NULL;
}

static void case_model(bool ro)
{
	const char *one = getenv("GAIA_MODEL_SEED");
	unsigned seeds = getenv("GAIA_MODEL_SEEDS") ? (unsigned)atoi(getenv("GAIA_MODEL_SEEDS")) : 3;
	unsigned ops = getenv("GAIA_MODEL_OPS") ? (unsigned)atoi(getenv("GAIA_MODEL_OPS")) : 200;
	if (one) {
		model_seed(strtoull(one, NULL, 0), ops, ro);
		return;
	}
	for (unsigned s = 1; s <= seeds; s++)
		model_seed(s, ops, ro);
}

int main(int argc, char **argv)
{
	CHECK(argc == 2, "usage: protocol CASE");
	const char *c = argv[1];
	CUDA_OK(cudaSetDevice(0));
	if (!strcmp(c, "launch_sees_cpu"))
		case_launch_sees_cpu();
	else if (!strcmp(c, "sync_publishes"))
		case_sync_publishes();
	else if (!strcmp(c, "false_sharing"))
		case_false_sharing();
	else if (!strcmp(c, "same_byte"))
		case_same_byte();
	else if (!strcmp(c, "cpu_store_invisible"))
		case_cpu_store_invisible();
	else if (!strcmp(c, "private"))
		case_private();
	else if (!strcmp(c, "bytes_moved"))
		case_bytes_moved();
	else if (!strcmp(c, "launch_after_launch"))
		case_launch_after_launch();
	else if (!strcmp(c, "touch_during_first_launch"))
		case_touch_during_first_launch();
	else if (!strcmp(c, "late_fault_after_move"))
		case_late_fault_after_move();
	else if (!strcmp(c, "mprotect_writable"))
		case_mprotect_writable();
	else if (!strcmp(c, "mixed_protections"))
		case_mixed_protections(MAP_SHARED);
	else if (!strcmp(c, "mixed_protections_private"))
		case_mixed_protections(MAP_PRIVATE);
	else if (!strcmp(c, "mprotect_part_writable"))
		case_mprotect_part_writable(MAP_SHARED);
	else if (!strcmp(c, "mprotect_part_writable_private"))
		case_mprotect_part_writable(MAP_PRIVATE);
	else if (!strcmp(c, "kernel_writes_read_only_page"))
		case_kernel_writes_read_only_page(MAP_SHARED, 1);
	else if (!strcmp(c, "kernel_writes_read_only_page_private"))
		case_kernel_writes_read_only_page(MAP_PRIVATE, 1);
	else if (!strcmp(c, "kernel_writes_inaccessible_page"))
		case_kernel_writes_read_only_page(MAP_SHARED, 2);
	else if (!strcmp(c, "kernel_writes_inaccessible_page_private"))
		case_kernel_writes_read_only_page(MAP_PRIVATE, 2);
	else if (!strcmp(c, "kernel_writes_read_only_part"))
		case_kernel_writes_read_only_page(MAP_SHARED, 0);
	else if (!strcmp(c, "kernel_writes_read_only_part_private"))
		case_kernel_writes_read_only_page(MAP_PRIVATE, 0);
	else if (!strcmp(c, "unmap_without_descriptors"))
		case_unmap_without_descriptors();
	else if (!strcmp(c, "peer_read"))
		case_peer_read();
	else if (!strcmp(c, "store_view_unavailable"))
		case_store_view_unavailable();
	else if (!strcmp(c, "map_fixed_over_replica"))
		case_map_fixed_over_replica();
	else if (!strcmp(c, "truncated_while_mapped"))
		case_truncated_while_mapped();
	else if (!strcmp(c, "truncated_by_another_thread"))
		case_truncated_by_another_thread(RESIZE_FTRUNCATE);
	else if (!strcmp(c, "truncated_by_path_by_another_thread"))
		case_truncated_by_another_thread(RESIZE_TRUNCATE);
	else if (!strcmp(c, "truncated_by_open_by_another_thread"))
		case_truncated_by_another_thread(RESIZE_OPEN_TRUNC);
	else if (!strcmp(c, "truncated_by_fopen_by_another_thread"))
		case_truncated_by_another_thread(RESIZE_FOPEN_W);
	else if (!strcmp(c, "truncated_by_other_opens_by_another_thread"))
		case_truncated_by_another_thread(RESIZE_OPEN_OTHER);
	else if (!strcmp(c, "file_changed_every_way"))
		case_file_changed_every_way();
	else if (!strcmp(c, "host_function_resizes"))
		case_host_function_resizes();
	else if (!strcmp(c, "explicit_device_calls"))
		case_explicit_device_calls();
	else if (!strcmp(c, "peer_read_tail"))
		case_peer_read_tail();
	else if (!strcmp(c, "peer_readahead"))
		case_peer_readahead();
	else if (!strcmp(c, "promote_after_free"))
		case_promote_after_free();
	else if (!strcmp(c, "promote_touched"))
		case_promote_touched();
	else if (!strcmp(c, "array_copies"))
		case_array_copies();
	else if (!strcmp(c, "paged_full_device"))
		case_paged_full_device();
	else if (!strcmp(c, "model"))
		case_model(false);
	else if (!strcmp(c, "model_ro"))
		case_model(true);
	else if (!strcmp(c, "paged_then_in_place"))
		case_paged_then_in_place();
	else if (!strcmp(c, "fork_child_launch"))
		case_fork_child_launch();
	else if (!strcmp(c, "partly_unmapped_reused"))
		case_partly_unmapped_reused();
	else if (!strcmp(c, "in_place_made_unreadable"))
		case_in_place_made_unreadable();
	else if (!strcmp(c, "in_place_sparse"))
		case_in_place_sparse();
	else if (!strcmp(c, "paged_front"))
		case_paged_front();
	else if (!strcmp(c, "peer_read_outside_writer"))
		case_peer_read_outside_writer();
	else if (!strcmp(c, "demote_under_malloc"))
		case_demote_under_malloc();
	else if (!strcmp(c, "upload_chunks"))
		case_upload_chunks();
	else if (!strcmp(c, "paged_sparse"))
		case_paged_sparse();
	else if (!strcmp(c, "hmm_front"))
		case_hmm_front();
	else if (!strcmp(c, "hmm_learns"))
		case_hmm_learns();
	else if (!strcmp(c, "paged_learns"))
		case_paged_learns();
	else if (!strcmp(c, "paged_phases"))
		case_paged_phases();
	else if (!strcmp(c, "in_place_no_look"))
		case_in_place_no_look();
	else if (!strcmp(c, "in_place_then_writable"))
		case_in_place_then_writable();
	else if (!strcmp(c, "in_place_remapped"))
		case_in_place_remapped();
	else if (!strcmp(c, "kernel_writes_in_place"))
		case_kernel_writes_in_place();
	else if (!strcmp(c, "in_place_truncated"))
		case_in_place_truncated();
	else if (!strcmp(c, "in_place_mremap_over"))
		case_in_place_mremap_over();
	else if (!strcmp(c, "two_devices_01"))
		case_two_devices(0);
	else if (!strcmp(c, "two_devices_10"))
		case_two_devices(1);
	else
		CHECK(0, "unknown case %s", c);
	/* The backing asked for is the one used: under managed the replica is
	 * managed memory, under vmm device memory at the mapping's address (the
	 * program, which allocates no managed memory, cannot ask the driver
	 * about that address: the shim answers pointer queries on a mapping
	 * as for the host memory it is). */
	const char *want = getenv("GAIA_BACKING");
#ifndef __CUDACC__
	if (want && last_map) {
		CUDA_OK(cudaSetDevice(0));
		struct simgpu_stats st;
		CHECK(simgpu_stats_get(0, &st) == 0, "simgpu_stats_get");
		bool managed = st.managed_bytes_in_use > 0;
		if (strcmp(want, "pinned") && strcmp(want, "auto") && strcmp(want, "host"))
			CHECK(managed == (!strcmp(want, "managed") || !strcmp(want, "paged")), "GAIA_BACKING=%s but %s managed memory is allocated",
			      want, managed ? "some" : "no");
		unsigned type = 0;
		CUresult r = cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
						   (CUdeviceptr)(uintptr_t)last_map);
		CHECK(r != CUDA_SUCCESS || type == CU_MEMORYTYPE_HOST,
		      "a mapping is host memory to the program, the driver said type %u", type);
	}
#endif
	printf("ok %s\n", c);
	return 0;
}
