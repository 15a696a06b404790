/* bench_gpu: the GPU side of the shim on the simulated GPU, side by side
 * in one run (make bench-gpu).
 *
 *   bench_gpu --lib build/libgaia.so [--size-mb N]
 *
 * Each measurement runs in a child process (this program again, with
 * --child), under the shim or not, so the rows compare like with like:
 *   false sharing   a kernel and a CPU thread write the two halves of the
 *                   same pages, launch/sync in a loop: an mmap'ed file
 *                   under the shim vs a cudaMallocManaged buffer;
 *   launch+sync     the added cost of a launch and sync of an empty kernel
 *                   with a large mapping held by the device and nothing
 *                   written (read-write and read-only mappings);
 *   h2d/changed     bytes uploaded per byte of pages the CPU changed;
 *   upload size     mean transfer size of a sequential first launch.
 * Byte and transfer counts come from the simulator's accounting; times
 * are CPU times of the simulator, not of a GPU.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "simgpu_kernel.h"
#ifndef __CUDACC__
#include "simgpu.h"
#endif

#define BENCH_NAME "bench_gpu"
#include "bench_common.h"

/* --- kernels --- */

__global__ void write_first_halves(unsigned char *p, unsigned long long npages, unsigned char value,
				   int reps)
{
	unsigned long long page = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (page >= npages)
		return;
	for (int r = 0; r < reps; r++)
		for (unsigned i = 0; i < PAGE / 2; i++)
			p[page * PAGE + i] = (unsigned char)(value + (r == reps - 1 ? 0 : 1));
}
SIMGPU_KERNEL(write_first_halves);

__global__ void read_pages(const unsigned char *p, unsigned long long npages, unsigned long long *sum)
{
	unsigned long long page = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (page < npages)
		atomicAdd(sum, (unsigned long long)p[page * PAGE]);
}
SIMGPU_KERNEL(read_pages);

__global__ void empty_kernel(const unsigned char *p)
{
	(void)p;
}
SIMGPU_KERNEL(empty_kernel);

/* --- helpers --- */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void stats(uint64_t *htod_bytes, uint64_t *htod_transfers)
{
#ifndef __CUDACC__
	struct simgpu_stats st;
	if (simgpu_stats_get(0, &st))
		DIE("simgpu_stats_get failed");
	*htod_bytes = st.htod_bytes;
	*htod_transfers = st.htod_transfers;
#else
	*htod_bytes = *htod_transfers = 0;
#endif
}

static unsigned char *map_new_file(size_t bytes, int prot, int *fd_out)
{
	const char *dir = getenv("BENCH_GPU_DIR") ? getenv("BENCH_GPU_DIR") : "/tmp";
	char path[512];
	snprintf(path, sizeof(path), "%s/bench-gpu-XXXXXX", dir);
	int fd = mkstemp(path);
	if (fd < 0)
		DIE("mkstemp %s: %s", path, strerror(errno));
	unlink(path);
	if (ftruncate(fd, (off_t)bytes))
		DIE("ftruncate %s to %zu bytes: %s", path, bytes, strerror(errno));
	void *p = mmap(NULL, bytes, prot, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		DIE("mmap %s: %s", path, strerror(errno));
	if (fd_out)
		*fd_out = fd;
	return (unsigned char *)p;
}

static unsigned blocks_for(unsigned long long n)
{
	return (unsigned)((n + 127) / 128);
}

/* --- children: each prints "RESULT key value" lines --- */

static void child_false_sharing(const char *mode)
{
	const unsigned long long npages = 64;
	const int rounds = 100;
	size_t bytes = npages * PAGE;
	unsigned char *p;
	if (!strcmp(mode, "gaia")) {
		p = map_new_file(bytes, PROT_READ | PROT_WRITE, NULL);
	} else {
		CUDA_OK(cudaMallocManaged((void **)&p, bytes, cudaMemAttachGlobal));
		memset(p, 0, bytes);
	}
	double t0 = now_s();
	for (int r = 0; r < rounds; r++) {
		unsigned char v = (unsigned char)(r * 2 + 1);
		SIMGPU_LAUNCH(write_first_halves, blocks_for(npages), 128, 0, 0)(p, npages, v, 4);
		CUDA_OK(cudaGetLastError());
		for (unsigned long long pg = 0; pg < npages; pg++)
			memset(p + pg * PAGE + PAGE / 2, v + 1, PAGE / 2);
		CUDA_OK(cudaDeviceSynchronize());
	}
	double t = now_s() - t0;
	unsigned char last = (unsigned char)((rounds - 1) * 2 + 1);
	for (unsigned long long pg = 0; pg < npages; pg++)
		if (p[pg * PAGE] != last || p[pg * PAGE + PAGE - 1] != (unsigned char)(last + 1))
			DIE("false sharing (%s): page %llu lost a writer's bytes (%u, %u)", mode, pg,
			    p[pg * PAGE], p[pg * PAGE + PAGE - 1]);
	printf("RESULT round_us %.1f\n", t / rounds * 1e6);
}

static double launch_sync_loop(const unsigned char *arg, int n)
{
	double t0 = now_s();
	for (int i = 0; i < n; i++) {
		SIMGPU_LAUNCH(empty_kernel, 1, 1, 0, 0)(arg);
		CUDA_OK(cudaGetLastError());
		CUDA_OK(cudaDeviceSynchronize());
	}
	return (now_s() - t0) / n;
}

static void child_overhead(size_t bytes, int prot)
{
	unsigned char *d;
	CUDA_OK(cudaMalloc((void **)&d, 4096));
	const int n = 20;
	launch_sync_loop(d, 5);
	double base = launch_sync_loop(d, n);
	unsigned char *m = map_new_file(bytes, prot, NULL);
	double t0 = now_s();
	launch_sync_loop(m, 1); /* the first acquire uploads the mapping */
	double first = now_s() - t0;
	double with = launch_sync_loop(m, n);
	printf("RESULT base_us %.1f\nRESULT with_us %.1f\nRESULT added_us %.1f\nRESULT first_ms %.1f\n",
	       base * 1e6, with * 1e6, (with - base) * 1e6, first * 1e3);
}

/* Every managed region is acquired at every launch (README): the cost of
 * n mapped regions that the kernel never touches and the CPU never
 * writes, per launch+sync of an empty kernel on device memory. */
static void child_untouched(int n)
{
	unsigned char *d;
	CUDA_OK(cudaMalloc((void **)&d, 4096));
	const int loops = 20;
	launch_sync_loop(d, 5);
	double base = launch_sync_loop(d, loops);
	for (int i = 0; i < n; i++) {
		unsigned char *m = map_new_file(1 << 20, PROT_READ | PROT_WRITE, NULL);
		m[0] = 1;
	}
	launch_sync_loop(d, 1); /* the first launch uploads them all */
	double with = launch_sync_loop(d, loops);
	printf("RESULT untouched_base_us %.1f\nRESULT untouched_with_us %.1f\n", base * 1e6, with * 1e6);
}

/* A new read-write mapping of `bytes`, read whole by a kernel and synced
 * (its first upload done); the kernel's sum goes to *sum. */
static unsigned char *map_and_upload(size_t bytes, unsigned long long **sum)
{
	unsigned long long npages = bytes / PAGE;
	unsigned char *m = map_new_file(bytes, PROT_READ | PROT_WRITE, NULL);
	CUDA_OK(cudaMalloc((void **)sum, 8));
	SIMGPU_LAUNCH(read_pages, blocks_for(npages), 128, 0, 0)(m, npages, *sum);
	CUDA_OK(cudaDeviceSynchronize());
	return m;
}

static void child_h2d(size_t bytes)
{
	unsigned long long npages = bytes / PAGE;
	unsigned long long *sum;
	unsigned char *m = map_and_upload(bytes, &sum);
	unsigned seed = 12345;
	double worst = 0;
	const double percents[] = {1, 10, 50};
	for (int k = 0; k < 3; k++) {
		unsigned long long want = (unsigned long long)(npages * percents[k] / 100);
		unsigned char *touched = (unsigned char *)calloc(npages, 1);
		unsigned long long changed = 0;
		while (changed < want) {
			seed = seed * 1103515245u + 12345u;
			unsigned long long pg = ((unsigned long long)seed << 16 ^ seed) % npages;
			m[pg * PAGE + (seed % PAGE)] = (unsigned char)(seed >> 8 | 1);
			changed += !touched[pg];
			touched[pg] = 1;
		}
		free(touched);
		uint64_t b0, t0, b1, t1;
		stats(&b0, &t0);
		SIMGPU_LAUNCH(read_pages, blocks_for(npages), 128, 0, 0)(m, npages, sum);
		CUDA_OK(cudaDeviceSynchronize());
		stats(&b1, &t1);
		double ratio = (double)(b1 - b0) / (double)(changed * PAGE);
		printf("RESULT h2d_ratio_%g %.3f\n", percents[k], ratio);
		if (ratio > worst)
			worst = ratio;
	}
	printf("RESULT h2d_ratio_worst %.3f\n", worst);
}

/* A launch after a launch with no sync between, where the CPU changed 10%
 * of the pages meanwhile (a rebase: the device keeps what its kernels
 * wrote): bytes over the bus, both ways, per byte of the pages changed. */
static void child_rebase(size_t bytes)
{
	unsigned long long npages = bytes / PAGE;
	unsigned long long *sum;
	unsigned char *m = map_and_upload(bytes, &sum);
	uint64_t b0 = 0, b1 = 0, d0 = 0, d1 = 0;
#ifndef __CUDACC__
	struct simgpu_stats st;
	if (simgpu_stats_get(0, &st))
		DIE("simgpu_stats_get failed");
	b0 = st.htod_bytes;
	d0 = st.dtoh_bytes;
#endif
	/* (No sync before the third launch: a sync would close the epoch.) */
	SIMGPU_LAUNCH(read_pages, blocks_for(npages), 128, 0, 0)(m, npages, sum);
	unsigned long long changed = 0;
	for (unsigned long long pg = 0; pg < npages; pg += 10, changed++)
		m[pg * PAGE + 17] = (unsigned char)(pg | 1);
	SIMGPU_LAUNCH(read_pages, blocks_for(npages), 128, 0, 0)(m, npages, sum);
#ifndef __CUDACC__
	if (simgpu_stats_get(0, &st))
		DIE("simgpu_stats_get failed");
	b1 = st.htod_bytes;
	d1 = st.dtoh_bytes;
#endif
	CUDA_OK(cudaDeviceSynchronize());
	printf("RESULT rebase_h2d_ratio %.3f\n", (double)(b1 - b0) / (double)(changed * PAGE));
	printf("RESULT rebase_d2h_ratio %.3f\n", (double)(d1 - d0) / (double)(changed * PAGE));
}

static void child_upload_size(size_t bytes)
{
	unsigned long long npages = bytes / PAGE;
	int fd;
	unsigned char *m = map_new_file(bytes, PROT_READ | PROT_WRITE, &fd);
	/* Contents, so the pages exist in the page cache. */
	for (unsigned long long pg = 0; pg < npages; pg++)
		m[pg * PAGE] = (unsigned char)pg;
	msync(m, bytes, MS_SYNC);
	unsigned long long *sum;
	CUDA_OK(cudaMalloc((void **)&sum, 8));
	uint64_t b0, t0, b1, t1;
	stats(&b0, &t0);
	double s0 = now_s();
	SIMGPU_LAUNCH(read_pages, blocks_for(npages), 128, 0, 0)(m, npages, sum);
	CUDA_OK(cudaDeviceSynchronize());
	double s = now_s() - s0;
	stats(&b1, &t1);
	printf("RESULT upload_bytes %llu\nRESULT upload_transfers %llu\nRESULT upload_mean_mib %.2f\n"
	       "RESULT upload_gib_s %.2f\n",
	       (unsigned long long)(b1 - b0), (unsigned long long)(t1 - t0),
	       t1 > t0 ? (double)(b1 - b0) / (double)(t1 - t0) / (1 << 20) : 0.0,
	       (double)(b1 - b0) / s / (1 << 30));
}

/* --- the parent --- */

struct result {
	char key[64];
	double value;
};

/* Runs this program with --child ARGS (under the shim when lib is set);
 * collects its RESULT lines. */
static int run_child(const char *self, const char *lib, const char *const *args, struct result *out,
		     int max, const char *mem_mb)
{
	int pipefd[2];
	if (pipe(pipefd))
		DIE("pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid == 0) {
		dup2(pipefd[1], 1);
		close(pipefd[0]);
		if (lib)
			setenv("LD_PRELOAD", lib, 1);
		else
			unsetenv("LD_PRELOAD");
		setenv("GAIA_MIN_MAP_KB", "4", 1);
		setenv("SIMGPU_MEM_MB", mem_mb, 1);
		const char *argv[8] = {self, "--child"};
		int n = 2;
		for (int i = 0; args[i] && n < 7; i++)
			argv[n++] = args[i];
		argv[n] = NULL;
		execv(self, (char *const *)argv);
		_exit(127);
	}
	close(pipefd[1]);
	FILE *f = fdopen(pipefd[0], "r");
	char line[256];
	int n = 0;
	while (fgets(line, sizeof(line), f)) {
		if (n < max && sscanf(line, "RESULT %63s %lf", out[n].key, &out[n].value) == 2)
			n++;
	}
	fclose(f);
	int status;
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		DIE("child %s %s failed", args[0], args[1] ? args[1] : "");
	return n;
}

static double median3(const double *v)
{
	double a = v[0], b = v[1], c = v[2];
	if (a > b) { double t = a; a = b; b = t; }
	if (b > c) { double t = b; b = c; c = t; }
	return a > b ? a : b;
}

static double get(const struct result *r, int n, const char *key)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(r[i].key, key))
			return r[i].value;
	DIE("no result %s", key);
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "--child")) {
		CUDA_OK(cudaSetDevice(0));
		const char *what = argv[2];
		size_t mb = argc >= 5 ? strtoull(argv[4], NULL, 10) : 64;
		if (!strcmp(what, "false_sharing"))
			child_false_sharing(argv[3]);
		else if (!strcmp(what, "overhead_rw"))
			child_overhead(mb << 20, PROT_READ | PROT_WRITE);
		else if (!strcmp(what, "overhead_ro"))
			child_overhead(mb << 20, PROT_READ);
		else if (!strcmp(what, "h2d"))
			child_h2d(mb << 20);
		else if (!strcmp(what, "untouched"))
			child_untouched(atoi(argv[3]));
		else if (!strcmp(what, "upload_size"))
			child_upload_size(mb << 20);
		else if (!strcmp(what, "rebase"))
			child_rebase(mb << 20);
		else
			DIE("unknown child %s", what);
		return 0;
	}
	const char *lib = NULL, *size_mb = "1024";
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--lib") && i + 1 < argc)
			lib = argv[++i];
		else if (!strcmp(argv[i], "--size-mb") && i + 1 < argc)
			size_mb = argv[++i];
		else
			DIE("usage: bench_gpu --lib PATH/libgaia.so [--size-mb N]");
	}
	if (!lib)
		DIE("usage: bench_gpu --lib PATH/libgaia.so [--size-mb N]");
	char self[4096];
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len <= 0)
		DIE("cannot find myself: %s", strerror(errno));
	self[len] = 0;
	char mem[32];
	snprintf(mem, sizeof(mem), "%llu", 3ull * strtoull(size_mb, NULL, 10) + 512);

	struct result g[16], m[16], rw[16], ro[16], h[16], u[16];
	printf("GPU side on the simulated GPU (times are the simulator's CPU times)\n\n");
	const char *fs_gaia[] = {"false_sharing", "gaia", NULL};
	const char *fs_managed[] = {"false_sharing", "managed", NULL};
	/* Interleaved runs, the median of each: the machine is shared. */
	double fs_gs[3], fs_ms[3];
	for (int r = 0; r < 3; r++) {
		int ng = run_child(self, lib, fs_gaia, g, 16, "512");
		fs_gs[r] = get(g, ng, "round_us");
		int nm = run_child(self, NULL, fs_managed, m, 16, "512");
		fs_ms[r] = get(m, nm, "round_us");
	}
	double fs_g = median3(fs_gs), fs_m = median3(fs_ms);
	printf("%-52s %12s %12s\n", "false sharing, 64 pages, 100 launch/sync rounds", "gaia", "managed");
	printf("%-52s %12.1f %12.1f\n", "  time per round, median of 3 runs (us)", fs_g, fs_m);
	printf("%-52s %5.0f %5.0f %5.0f %5.0f %5.0f %5.0f\n", "  the runs (us)", fs_gs[0], fs_gs[1],
	       fs_gs[2], fs_ms[0], fs_ms[1], fs_ms[2]);

	const char *ov_rw[] = {"overhead_rw", "x", size_mb, NULL};
	const char *ov_ro[] = {"overhead_ro", "x", size_mb, NULL};
	int nrw = run_child(self, lib, ov_rw, rw, 16, mem);
	int nro = run_child(self, lib, ov_ro, ro, 16, mem);
	printf("\n%-52s %12s %12s\n", "launch+sync of an empty kernel, mapping held", "read-write",
	       "read-only");
	printf("  %-50s %12.1f %12.1f\n", "without the mapping (us)", get(rw, nrw, "base_us"),
	       get(ro, nro, "base_us"));
	char label[96];
	snprintf(label, sizeof(label), "with a %s MiB mapping, nothing written (us)", size_mb);
	printf("  %-50s %12.1f %12.1f\n", label, get(rw, nrw, "with_us"), get(ro, nro, "with_us"));
	printf("  %-50s %12.1f %12.1f\n", "added (us)", get(rw, nrw, "added_us"), get(ro, nro, "added_us"));
	printf("  %-50s %12.1f %12.1f\n", "first launch+sync, uploading it (ms)", get(rw, nrw, "first_ms"),
	       get(ro, nro, "first_ms"));

	const char *h2d[] = {"h2d", "x", "64", NULL};
	int nh = run_child(self, lib, h2d, h, 16, "512");
	printf("\n%-52s %12s\n", "bytes uploaded / bytes of pages changed (64 MiB)", "ratio");
	printf("  %-50s %12.3f\n", "1% of the pages changed", get(h, nh, "h2d_ratio_1"));
	printf("  %-50s %12.3f\n", "10% of the pages changed", get(h, nh, "h2d_ratio_10"));
	printf("  %-50s %12.3f\n", "50% of the pages changed", get(h, nh, "h2d_ratio_50"));

	const char *rb[] = {"rebase", "x", "64", NULL};
	struct result rbr[16];
	int nrb = run_child(self, lib, rb, rbr, 16, "512");
	printf("\n%-52s %12s %12s\n", "launch after launch, 10% of 64 MiB changed between",
	       "h2d ratio", "d2h ratio");
	printf("  %-50s %12.3f %12.3f\n", "bus bytes / bytes of pages changed (a rebase)",
	       get(rbr, nrb, "rebase_h2d_ratio"), get(rbr, nrb, "rebase_d2h_ratio"));

	const char *up[] = {"upload_size", "x", "256", NULL};
	int nu = run_child(self, lib, up, u, 16, "1024");
	printf("\n%-52s\n", "sequential first launch of a 256 MiB mapping");
	printf("  %-50s %12.0f\n", "uploads", get(u, nu, "upload_transfers"));
	printf("  %-50s %12.2f\n", "mean upload (MiB)", get(u, nu, "upload_mean_mib"));
	printf("  %-50s %12.2f\n", "upload rate (GiB/s, simulator memcpy)", get(u, nu, "upload_gib_s"));

	const int untouched_n[] = {1, 16, 64};
	double untouched_added[3];
	printf("\n%-52s %12s %12s\n", "launch+sync of an empty kernel, N 1 MiB regions", "base (us)",
	       "added (us)");
	for (int k = 0; k < 3; k++) {
		char nbuf[16];
		snprintf(nbuf, sizeof(nbuf), "%d", untouched_n[k]);
		const char *ua[] = {"untouched", nbuf, NULL};
		struct result ur[16];
		int nur = run_child(self, lib, ua, ur, 16, mem);
		untouched_added[k] = get(ur, nur, "untouched_with_us") - get(ur, nur, "untouched_base_us");
		printf("  %-50s %12.1f %12.1f\n", nbuf, get(ur, nur, "untouched_base_us"), untouched_added[k]);
	}
	double first_ms_per_gib = get(rw, nrw, "first_ms") / (strtod(size_mb, NULL) / 1024.0);

	printf("\nBENCH false_sharing_speedup_vs_managed %.2f\n", fs_m / fs_g);
	printf("BENCH first_launch_ms_per_gib %.1f\n", first_ms_per_gib);
	printf("BENCH launch_sync_added_us_per_untouched_region %.2f\n", untouched_added[2] / untouched_n[2]);
	printf("BENCH launch_sync_overhead_clean_us %.1f\n", get(rw, nrw, "added_us"));
	printf("BENCH launch_sync_overhead_clean_readonly_us %.1f\n", get(ro, nro, "added_us"));
	printf("BENCH h2d_bytes_over_changed %.3f\n", get(h, nh, "h2d_ratio_worst"));
	printf("BENCH upload_mean_transfer_mib %.2f\n", get(u, nu, "upload_mean_mib"));
	printf("BENCH rebase_bus_bytes_over_changed %.3f\n",
	       get(rbr, nrb, "rebase_h2d_ratio") + get(rbr, nrb, "rebase_d2h_ratio"));
	return 0;
}
