/* layout_collide — what a program expects: launching many distinct kernels
 * many times does what each launch says and costs no memory per launch.
 *
 * 640 kernels, k<0> .. k<639>, instances of one template (each writes N
 * into p[2N] and counts its launches in p[2N+1]), run round-robin on a
 * mapped file: 1,000,000 asynchronous launches on one stream, a
 * cudaStreamSynchronize every 250. Every launch must have run (the counts,
 * through the mapping and with pread()), and the process's RSS after the
 * second 500,000 launches may exceed what it was after the first 500,000
 * by at most 2 MiB (peak RSS from getrusage, and resident pages from
 * /proc/self/statm). Without a shim it grows by about 100 KiB; a million
 * launches (seconds on the simulator) make a leak of a few bytes per
 * launch stand out from that. ISOLATION_LAUNCHES sets another count (the
 * ThreadSanitizer build runs 300,000: a million took 90 s there alone,
 * and more than the watchdog's 120 beside another test).
 */
#include <sys/resource.h>

#include <utility>

#include "isolation.h"

#define NK 640
#define DEFAULT_LAUNCHES 1000000
#define SYNC_EVERY 250
#define FILE_BYTES (64u << 10)
#define MAX_GROWTH_KB 2048

template <int N> __global__ void k(int *p)
{
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		p[2 * N] = N;
		p[2 * N + 1] += 1;
	}
}

typedef void (*kernel_fn)(int *);
static kernel_fn kernels[NK];

#ifndef __CUDACC__
/* SIMGPU_KERNEL names one kernel; a template's instances are registered
 * the same way, one descriptor each, from a static constructor. */
static char kernel_names[NK][16];
template <std::size_t... I> static int register_all(std::index_sequence<I...>)
{
	((snprintf(kernel_names[I], sizeof(kernel_names[I]), "k<%d>", (int)I),
	  simgpu_register_kernel(::simgpu::kernel<decltype(&k<(int)I>), &k<(int)I>>::describe(kernel_names[I])),
	  kernels[I] = &k<(int)I>),
	 ...);
	return 0;
}
static const int registered = register_all(std::make_index_sequence<NK>{});
#else
template <std::size_t... I> static int fill_all(std::index_sequence<I...>)
{
	((kernels[I] = &k<(int)I>), ...);
	return 0;
}
static const int registered = fill_all(std::make_index_sequence<NK>{});
#endif

struct rss {
	long max_kb;		/* getrusage ru_maxrss */
	long resident_kb;	/* /proc/self/statm, -1 when unreadable */
};

static struct rss rss_now(void)
{
	struct rss r;
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	r.max_kb = ru.ru_maxrss;
	r.resident_kb = -1;
	FILE *f = fopen("/proc/self/statm", "r");
	long size, resident;
	if (f && fscanf(f, "%ld %ld", &size, &resident) == 2)
		r.resident_kb = resident * (sysconf(_SC_PAGESIZE) / 1024);
	if (f)
		fclose(f);
	return r;
}

static void launches(int *p, cudaStream_t s, int from, int to)
{
	for (int i = from; i < to; i++) {
		void *args[] = { &p };
		cudaError_t e = cudaLaunchKernel((const void *)kernels[i % NK], dim3(1), dim3(1), args, 0, s);
		CHECK(e == cudaSuccess, "launch %d (k<%d>) returned %s", i, i % NK, cudaGetErrorName(e));
		if ((i + 1) % SYNC_EVERY == 0)
			CUDA_OK(cudaStreamSynchronize(s));
	}
	CUDA_OK(cudaStreamSynchronize(s));
}

static void check_counts(int fd, const int *p, int done)
{
	int *buf = (int *)malloc(FILE_BYTES);
	pread_all(fd, buf, FILE_BYTES, 0);
	for (int n = 0; n < NK; n++) {
		int want = done / NK + (n < done % NK ? 1 : 0);
		CHECK(p[2 * n] == n && p[2 * n + 1] == want,
		      "after %d launches, k<%d>'s words through the mapping are %d, %d; want %d, %d", done, n,
		      p[2 * n], p[2 * n + 1], n, want);
		CHECK(buf[2 * n] == n && buf[2 * n + 1] == want,
		      "after %d launches, k<%d>'s words read with pread() are %d, %d; want %d, %d", done, n,
		      buf[2 * n], buf[2 * n + 1], n, want);
	}
	free(buf);
}

int main(void)
{
	watchdog(120);
	(void)registered;
	const char *env = getenv("ISOLATION_LAUNCHES");
	const int LAUNCHES = env && atoi(env) >= 2 * NK ? atoi(env) : DEFAULT_LAUNCHES;
	int fd = make_file(FILE_BYTES, NULL);
	int *p = (int *)map_file(fd, FILE_BYTES);
	for (int n = 0; n < NK; n++)
		p[2 * n] = -1;
	CUDA_OK(cudaSetDevice(0));
	cudaStream_t s;
	CUDA_OK(cudaStreamCreate(&s));

	double t0 = now_s();
	step = "first half of the launches";
	launches(p, s, 0, LAUNCHES / 2);
	check_counts(fd, p, LAUNCHES / 2);
	struct rss half = rss_now();
	double t1 = now_s();
	step = "second half of the launches";
	launches(p, s, LAUNCHES / 2, LAUNCHES);
	check_counts(fd, p, LAUNCHES);
	struct rss end = rss_now();
	double t2 = now_s();

	printf("%d kernels, %d launches: %.1f s + %.1f s; peak RSS %ld KiB after the first half, %ld KiB after "
	       "the second; resident %ld KiB, %ld KiB\n",
	       NK, LAUNCHES, t1 - t0, t2 - t1, half.max_kb, end.max_kb, half.resident_kb, end.resident_kb);
	fflush(stdout);
	step = "memory";
	CHECK(end.max_kb - half.max_kb <= MAX_GROWTH_KB,
	      "peak RSS grew by %ld KiB over the second %d launches (bound %d KiB)", end.max_kb - half.max_kb,
	      LAUNCHES / 2, MAX_GROWTH_KB);
	CHECK(half.resident_kb < 0 || end.resident_kb - half.resident_kb <= MAX_GROWTH_KB,
	      "resident memory grew by %ld KiB over the second %d launches (bound %d KiB)",
	      end.resident_kb - half.resident_kb, LAUNCHES / 2, MAX_GROWTH_KB);
	CUDA_OK(cudaStreamDestroy(s));
	munmap(p, FILE_BYTES);
	close(fd);
	printf("ok layout_collide\n");
	return 0;
}
