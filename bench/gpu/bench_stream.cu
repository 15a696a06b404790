/* bench_stream: a streaming read (the GAIA paper's Fig. 6a) on the
 * simulated GPU, side by side in one run (make bench-stream).
 *
 *   bench_stream --lib build/libgaia.so [--device-mb N] [--out DIR]
 *
 * A kernel that computes nothing reads a whole file (one 8-byte word of
 * every 256 bytes, so every page and every 64 KiB block is touched) and
 * sums what it read. The file is 0.5x and 4x the simulated device's
 * memory (SIMGPU_MEM_MB = N), in the page cache. Each row runs in a child
 * process (this program again, with --child), timed from the open to the
 * kernel's end:
 *   copy     read() into a malloc'ed buffer, cudaMemcpy to cudaMalloc'ed
 *            memory, the kernel (only where the file fits)
 *   managed  read() into cudaMallocManaged memory, the kernel (its pages
 *            migrate on demand; 4x: evicted as they go)
 *   gaia     mmap under the shim, the kernel on the mapping (GAIA_BACKING
 *            auto: a read-only region larger than half the device's free
 *            memory is read in place, a smaller one gets a replica)
 *   gaia-M   (4x) the same with GAIA_BACKING=paged: a replica paged on
 *            demand, as a writable region that large gets
 *   gaia-H   (4x) the same on a device with HMM (SIMGPU_HMM=1) and
 *            GAIA_BACKING=host: the kernel reads the mapping through HMM
 *   gaia-R   the same with GAIA_BACKING=vmm (a replica, uploaded in chunks
 *            of GAIA_GPU_READAHEAD_KB through pinned staging), swept over
 *            that knob, where the file fits
 * Every row's sum must equal the CPU's. Times are the simulator's bus
 * (SIMGPU_BUS_GBPS, SIMGPU_BUS_LATENCY_US, SIMGPU_UVM_FAULT_US) and this
 * machine's memory, not a GPU's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "simgpu_kernel.h"
#ifndef __CUDACC__
#include "simgpu.h"
#endif

#define BENCH_NAME "bench_stream"
#include "bench_common.h"

#define STRIDE_WORDS 32 /* one word of every 256 bytes */

__global__ void stream_sum(const unsigned long long *p, unsigned long long nwords, unsigned long long *out)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	unsigned long long s = 0;
	for (; i * STRIDE_WORDS < nwords; i += (unsigned long long)gridDim.x * blockDim.x)
		s += p[i * STRIDE_WORDS];
	atomicAdd(out, s);
}
SIMGPU_KERNEL(stream_sum);

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static unsigned long long cpu_sum(const unsigned long long *p, unsigned long long nwords)
{
	unsigned long long s = 0;
	for (unsigned long long i = 0; i * STRIDE_WORDS < nwords; i++)
		s += p[i * STRIDE_WORDS];
	return s;
}

static void read_all(int fd, unsigned char *dst, uint64_t bytes)
{
	for (uint64_t done = 0; done < bytes;) {
		ssize_t n = pread(fd, dst + done, bytes - done, (off_t)done);
		if (n <= 0)
			DIE("pread: %s", n ? strerror(errno) : "end of file");
		done += (uint64_t)n;
	}
}

/* Bytes that crossed the bus to device 0, every kind (the simulated
 * device counts them; 0 elsewhere). */
static unsigned long long bus_bytes(void)
{
	unsigned long long n = 0;
#ifndef __CUDACC__
	struct simgpu_stats st;
	if (simgpu_stats_get(0, &st))
		return 0;
	for (int k = 0; k < 4; k++)
		n += st.bus_bytes[SIMGPU_BUS_HTOD][k];
#endif
	return n;
}

/* --- one row, in a child --- */

static int child(const char *path, uint64_t bytes, const char *mode)
{
	unsigned long long nwords = bytes / 8, *sum, got = 0, want = 0;
	CUDA_OK(cudaFree(0)); /* the device up before the clock starts */
	CUDA_OK(cudaMalloc((void **)&sum, sizeof(*sum)));
	CUDA_OK(cudaMemset(sum, 0, sizeof(*sum)));
	unsigned long long bus0 = bus_bytes();
	double t0 = now_s();
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		DIE("open %s: %s", path, strerror(errno));
	void *host = NULL, *dev = NULL;
	const unsigned long long *kernel_p;
	if (!strcmp(mode, "copy")) {
		host = malloc(bytes);
		if (!host)
			DIE("malloc %llu", (unsigned long long)bytes);
		read_all(fd, (unsigned char *)host, bytes);
		CUDA_OK(cudaMalloc(&dev, bytes));
		CUDA_OK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
		kernel_p = (const unsigned long long *)dev;
	} else if (!strcmp(mode, "managed")) {
		CUDA_OK(cudaMallocManaged(&dev, bytes, cudaMemAttachGlobal));
		read_all(fd, (unsigned char *)dev, bytes);
		kernel_p = (const unsigned long long *)dev;
	} else {
		host = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
		if (host == MAP_FAILED)
			DIE("mmap: %s", strerror(errno));
		kernel_p = (const unsigned long long *)host;
	}
	SIMGPU_LAUNCH(stream_sum, 64, 128, 0, 0)(kernel_p, nwords, sum);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	double t = now_s() - t0;
	unsigned long long bus = bus_bytes() - bus0;
	CUDA_OK(cudaMemcpy(&got, sum, sizeof(got), cudaMemcpyDeviceToHost));
	want = cpu_sum(!strcmp(mode, "copy") ? (const unsigned long long *)host : kernel_p, nwords);
	printf("result ms=%.3f bus=%llu sum=%llu want=%llu\n", t * 1e3, bus, got, want);
	if (!strcmp(mode, "copy")) {
		free(host);
		CUDA_OK(cudaFree(dev));
	} else if (!strcmp(mode, "managed")) {
		CUDA_OK(cudaFree(dev));
	} else {
		munmap(host, bytes);
	}
	close(fd);
	return got == want ? 0 : 1;
}

/* --- the parent --- */

struct row {
	double ms;
	unsigned long long bus, sum;
	int ok;
	const char *how; /* gaia: how the kernel reached the file (GAIA_STATS) */
};

static struct row run_row(const char *self, const char *lib, const char *file, uint64_t bytes, unsigned device_mb,
			  const char *mode, const char *backing, int gpu_kb)
{
	char cmd[4096], env[2048];
	int n = snprintf(env, sizeof(env), "SIMGPU_MEM_MB=%u ", device_mb);
	char stats[1400];
	snprintf(stats, sizeof(stats), "%s.stats", file);
	unlink(stats);
	if (!strncmp(mode, "gaia", 4))
		n += snprintf(env + n, sizeof(env) - (size_t)n, "LD_PRELOAD=%s GAIA_BACKING=%s GAIA_STATS=%s %s", lib,
			      backing, stats, strcmp(backing, "host") ? "" : "SIMGPU_HMM=1 ");
	if (gpu_kb)
		snprintf(env + n, sizeof(env) - (size_t)n, "GAIA_GPU_READAHEAD_KB=%d ", gpu_kb);
	snprintf(cmd, sizeof(cmd), "%s%s --child %s %llu %s", env, self, file, (unsigned long long)bytes,
		 strncmp(mode, "gaia", 4) ? mode : "gaia");
	struct row r = {0, 0, 0, 0, ""};
	FILE *f = popen(cmd, "r");
	if (!f)
		return r;
	char line[512];
	unsigned long long want = 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "result ms=%lf bus=%llu sum=%llu want=%llu", &r.ms, &r.bus, &r.sum, &want) == 4)
			r.ok = r.sum == want;
	if (pclose(f) != 0)
		r.ok = 0;
	FILE *st = fopen(stats, "r");
	unsigned long long pinned = 0, paged = 0, replicas = 0, host = 0;
	while (st && fgets(line, sizeof(line), st)) {
		(void)sscanf(line, "gaia: pinned_regions %llu", &pinned);
		(void)sscanf(line, "gaia: host_regions %llu", &host);
		(void)sscanf(line, "gaia: paged_replicas %llu", &paged);
		(void)sscanf(line, "gaia: device_replicas %llu", &replicas);
	}
	if (st) {
		fclose(st);
		r.how = pinned ? "Z" : host ? "H" : paged ? "M" : replicas ? "R" : "?";
	}
	unlink(stats);
	return r;
}

/* One row of the table and the CSV; whether its sum is the first of
 * its size's (*sum_of, set by the first good row). */
static int print_row(FILE *c, const char *size, const char *mode, const struct row *r, int gpu_kb, uint64_t bytes,
		     unsigned long long *sum_of)
{
	if (r->ok && !*sum_of)
		*sum_of = r->sum;
	int same = r->ok && r->sum == *sum_of;
	double gbs = r->ms > 0 ? (double)bytes / (r->ms * 1e-3) / 1e9 : 0;
	char kb[16] = "default";
	if (gpu_kb)
		snprintf(kb, sizeof(kb), "%d", gpu_kb);
	printf("%-6s %-8s %4s %12s %10.2f %8.2f %10.1f %6s\n", size, mode, r->how, kb, r->ms, gbs, r->bus / 1048576.0,
	       same ? "ok" : "WRONG");
	fprintf(c, "%s,%s,%s,%s,%.3f,%.3f,%llu,%d\n", size, mode, r->how, kb, r->ms, gbs, r->bus, same);
	return same;
}

static void write_file(const char *path, uint64_t bytes)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		DIE("open %s: %s", path, strerror(errno));
	enum { CHUNK = 1 << 20 };
	unsigned long long *buf = (unsigned long long *)malloc(CHUNK);
	for (uint64_t off = 0; off < bytes; off += CHUNK) {
		for (unsigned i = 0; i < CHUNK / 8; i++)
			buf[i] = (off / 8 + i) * 0x9e3779b97f4a7c15ull;
		if (pwrite(fd, buf, CHUNK, (off_t)off) != CHUNK)
			DIE("pwrite: %s", strerror(errno));
	}
	free(buf);
	close(fd);
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "--child"))
		return child(argv[2], strtoull(argv[3], NULL, 10), argv[4]);
	const char *lib = NULL, *out = ".";
	unsigned device_mb = 64;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--lib") && i + 1 < argc)
			lib = argv[++i];
		else if (!strcmp(argv[i], "--device-mb") && i + 1 < argc)
			device_mb = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--out") && i + 1 < argc)
			out = argv[++i];
		else
			DIE("usage: bench_stream --lib libgaia.so [--device-mb N] [--out DIR]");
	}
	if (!lib || access(lib, R_OK))
		DIE("--lib: %s is not readable", lib ? lib : "(none)");
	if (device_mb < 8)
		DIE("--device-mb: at least 8");
	char self[1024];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		DIE("readlink /proc/self/exe: %s", strerror(errno));
	self[n] = 0;
	char csv[1200], file[1200];
	snprintf(csv, sizeof(csv), "%s/stream.csv", out);
	snprintf(file, sizeof(file), "%s/bench_stream.dat", out);
	FILE *c = fopen(csv, "w");
	if (!c)
		DIE("%s: %s", csv, strerror(errno));
	fprintf(c, "size,mode,how,gpu_readahead_kb,ms,gb_per_s,bus_bytes,sum_ok\n");
	printf("streaming read: a kernel reads a whole file in the page cache (every 256th word), device %u MiB\n",
	       device_mb);
	printf("%-6s %-8s %4s %12s %10s %8s %10s %6s\n", "size", "mode", "how", "gpu_ra_kb", "ms", "GB/s", "bus_MiB",
	       "sum");
	static const struct {
		const char *name;
		unsigned num, den;
	} sizes[] = {{"0.5x", 1, 2}, {"4x", 4, 1}};
	double fit_copy = 0, fit_gaia = 0, big_managed = 0, big_gaia = 0;
	unsigned long long sum_of[2] = {0, 0};
	int all_ok = 1;
	for (unsigned s = 0; s < 2; s++) {
		uint64_t bytes = ((uint64_t)device_mb << 20) * sizes[s].num / sizes[s].den;
		write_file(file, bytes);
		static const char *const modes[] = {"copy", "managed", "gaia"};
		for (unsigned m = 0; m < 3; m++) {
			if (s == 1 && m == 0)
				continue; /* does not fit */
			struct row r = run_row(self, lib, file, bytes, device_mb, modes[m], "auto", 0);
			all_ok &= print_row(c, sizes[s].name, modes[m], &r, 0, bytes, &sum_of[s]);
			double *slot = s == 0 ? (m == 0 ? &fit_copy : m == 2 ? &fit_gaia : NULL)
					      : (m == 1 ? &big_managed : m == 2 ? &big_gaia : NULL);
			if (slot)
				*slot = r.ok ? r.ms : 0;
		}
		if (s == 1) {
			/* The same file paged on demand instead (mode M, as a
			 * writable region would be). */
			struct row r = run_row(self, lib, file, bytes, device_mb, "gaia-M", "paged", 0);
			all_ok &= print_row(c, sizes[s].name, "gaia-M", &r, 0, bytes, &sum_of[s]);
			/* And read through HMM, on a device that has it. */
			r = run_row(self, lib, file, bytes, device_mb, "gaia-H", "host", 0);
			all_ok &= print_row(c, sizes[s].name, "gaia-H", &r, 0, bytes, &sum_of[s]);
		}
		if (s == 0) {
			static const int sweep[] = {64, 256, 1024, 2048, 8192, 32768};
			for (unsigned i = 0; i < sizeof(sweep) / sizeof(sweep[0]); i++) {
				struct row r = run_row(self, lib, file, bytes, device_mb, "gaia-R", "vmm", sweep[i]);
				all_ok &= print_row(c, sizes[s].name, "gaia-R", &r, sweep[i], bytes, &sum_of[s]);
			}
		}
	}
	unlink(file);
	fclose(c);
	printf("\nBENCH stream_fit_gaia_vs_copy %.3f x (file 0.5x device memory: copy ms over gaia ms)\n",
	       fit_copy > 0 && fit_gaia > 0 ? fit_copy / fit_gaia : 0);
	printf("BENCH stream_4x_gaia_vs_managed %.3f x (file 4x device memory: managed ms over gaia ms)\n",
	       big_managed > 0 && big_gaia > 0 ? big_managed / big_gaia : 0);
	printf("how: gaia's mode for the file (R replica, Z read in place, H through HMM, M paged on demand; "
	       "GAIA_STATS)\n");
	printf("bus_MiB: bytes that crossed the simulated bus to the device (copies, migrations, host access)\n");
	printf("csv: %s\n", csv);
	return all_ok ? 0 : 1;
}
