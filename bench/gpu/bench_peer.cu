/* bench_peer: peer caching (README "Peer caching"; the GAIA paper's Fig. 5)
 * on the simulated GPU, side by side in one run (make bench-peer).
 *
 *   bench_peer --lib build/libgaia.so [--size-mb N] [--reads N] [--out DIR]
 *
 * A file of N MiB is written and dropped from the page cache
 * (MADV_PAGEOUT, posix_fadvise DONTNEED); then 4 KiB preads, at random
 * pages or in file order, are timed. Under the shim ("gaia") the first
 * F% of the file was mapped and read whole by a kernel first, so a device
 * holds those pages current: the shim serves them from it, and reads the
 * rest from storage. Without the shim ("kernel") every read goes to
 * storage. Rows: F = 0, 25, 50, 75, 100 for both patterns, and a sweep of
 * GAIA_READAHEAD_KB for the sequential pattern at F = 100. Each row runs
 * in a child process (this program again, with --child). Times are those
 * of this machine's storage against the simulator's bus
 * (SIMGPU_BUS_GBPS, SIMGPU_BUS_LATENCY_US), not of a GPU.
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

#define BENCH_NAME "bench_peer"
#include "bench_common.h"

/* Sums one byte of every page (the device reads them all). */
__global__ void touch_pages(const unsigned char *p, unsigned long long npages, unsigned long long *out)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	unsigned long long s = 0;
	for (; i < npages; i += (unsigned long long)gridDim.x * blockDim.x)
		s += p[i * PAGE];
	atomicAdd(out, s);
}
SIMGPU_KERNEL(touch_pages);

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* --- one row, in a child --- */

static int child(const char *path, uint64_t bytes, int percent, int sequential, unsigned reads, int gpu)
{
	uint64_t npages = bytes / PAGE;
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		DIE("open %s: %s", path, strerror(errno));
	unsigned char *buf = (unsigned char *)malloc(1 << 20);
	for (uint64_t off = 0; off < bytes; off += 1 << 20) {
		for (unsigned i = 0; i < 1 << 20; i++)
			buf[i] = (unsigned char)((off + i) * 131 >> 12);
		if (pwrite(fd, buf, 1 << 20, (off_t)off) != 1 << 20)
			DIE("pwrite: %s", strerror(errno));
	}
	if (fsync(fd))
		DIE("fsync: %s", strerror(errno));
	uint64_t held = npages * (uint64_t)percent / 100;
	unsigned char *m = NULL;
	if (gpu && held) {
		m = (unsigned char *)mmap(NULL, held * PAGE, PROT_READ, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED)
			DIE("mmap: %s", strerror(errno));
		unsigned long long *sum;
		CUDA_OK(cudaMalloc((void **)&sum, sizeof(*sum)));
		CUDA_OK(cudaMemset(sum, 0, sizeof(*sum)));
		SIMGPU_LAUNCH(touch_pages, 64, 128, 0, 0)(m, (unsigned long long)held, sum);
		CUDA_OK(cudaGetLastError());
		CUDA_OK(cudaDeviceSynchronize());
		CUDA_OK(cudaFree(sum));
		if (madvise(m, held * PAGE, MADV_PAGEOUT))
			DIE("madvise(MADV_PAGEOUT): %s", strerror(errno));
	}
	if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED))
		DIE("posix_fadvise: %s", strerror(errno));
	/* What stayed in the page cache: the whole file, seen through a
	 * mapping of the shim's own size (mincore reads nothing). */
	unsigned long long resident = 0;
	void *look = mmap(NULL, bytes, PROT_NONE, MAP_SHARED, fd, 0);
	unsigned char *vec = (unsigned char *)malloc(npages);
	if (look != MAP_FAILED && vec && !mincore(look, bytes, vec))
		for (uint64_t i = 0; i < npages; i++)
			resident += vec[i] & 1;
	if (look != MAP_FAILED)
		munmap(look, bytes);
	free(vec);
	unsigned char page[PAGE];
	uint64_t x = 0x2545f4914f6cdd1dull, checksum = 0;
	unsigned n = sequential ? (unsigned)npages : reads;
	double t0 = now_s();
	for (unsigned i = 0; i < n; i++) {
		uint64_t p = i;
		if (!sequential) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			p = x % npages;
		}
		if (pread(fd, page, PAGE, (off_t)(p * PAGE)) != (ssize_t)PAGE)
			DIE("pread: %s", strerror(errno));
		if (page[17] != (unsigned char)((p * PAGE + 17) * 131 >> 12))
			DIE("page %llu byte 17 reads %u", (unsigned long long)p, page[17]);
		checksum += page[0];
	}
	double t = now_s() - t0;
	printf("result us_per_read=%.3f mb_per_s=%.1f reads=%u resident=%llu checksum=%llu\n", t / n * 1e6,
	       (double)n * PAGE / t / 1e6, n, resident, (unsigned long long)checksum);
	if (m)
		munmap(m, held * PAGE);
	close(fd);
	unlink(path);
	return 0;
}

/* --- the parent --- */

enum { PAIRS = 3 }; /* headline pairs run after the table's */

/* The median of n values (sorted in place; n even: the mean of the two
 * middle ones). */
static double median(double *v, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
			double t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct row {
	double us, mbs;
	unsigned long long resident, from_device; /* pages left cached; bytes a device served */
	int ok;
};

static struct row run_row(const char *self, const char *lib, const char *dir, uint64_t mb, int percent,
			  int sequential, unsigned reads, int gpu, int readahead_kb)
{
	char cmd[4096], env[2400] = "", stats[1200];
	snprintf(stats, sizeof(stats), "%s/bench_peer.stats", dir);
	unlink(stats);
	if (gpu)
		snprintf(env, sizeof(env), "LD_PRELOAD=%s GAIA_STATS=%s ", lib, stats);
	if (readahead_kb)
		snprintf(env + strlen(env), sizeof(env) - strlen(env), "GAIA_READAHEAD_KB=%d ", readahead_kb);
	snprintf(cmd, sizeof(cmd), "%s%s --child %s/bench_peer.dat %llu %d %d %u %d", env, self, dir,
		 (unsigned long long)mb, percent, sequential, reads, gpu);
	struct row r = {0, 0, 0, 0, 0};
	FILE *f = popen(cmd, "r");
	if (!f)
		return r;
	char line[512];
	unsigned reads_done;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "result us_per_read=%lf mb_per_s=%lf reads=%u resident=%llu", &r.us, &r.mbs,
			   &reads_done, &r.resident) == 4)
			r.ok = 1;
	if (pclose(f) != 0)
		r.ok = 0;
	FILE *st = gpu ? fopen(stats, "r") : NULL;
	while (st && fgets(line, sizeof(line), st))
		(void)sscanf(line, "gaia: peer_read_bytes %llu", &r.from_device);
	if (st)
		fclose(st);
	return r;
}

int main(int argc, char **argv)
{
	if (argc == 8 && !strcmp(argv[1], "--child"))
		return child(argv[2], strtoull(argv[3], NULL, 10) << 20, atoi(argv[4]), atoi(argv[5]),
			     (unsigned)atoi(argv[6]), atoi(argv[7]));
	const char *lib = NULL, *out = ".";
	uint64_t mb = 64;
	unsigned reads = 4000;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--lib") && i + 1 < argc)
			lib = argv[++i];
		else if (!strcmp(argv[i], "--size-mb") && i + 1 < argc)
			mb = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--reads") && i + 1 < argc)
			reads = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--out") && i + 1 < argc)
			out = argv[++i];
		else
			DIE("usage: bench_peer --lib libgaia.so [--size-mb N] [--reads N] [--out DIR]");
	}
	if (!lib || access(lib, R_OK))
		DIE("--lib: %s is not readable", lib ? lib : "(none)");
	char self[1024];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		DIE("readlink /proc/self/exe: %s", strerror(errno));
	self[n] = 0;
	char csv[1200];
	snprintf(csv, sizeof(csv), "%s/peer.csv", out);
	FILE *c = fopen(csv, "w");
	if (!c)
		DIE("%s: %s", csv, strerror(errno));
	fprintf(c, "pattern,percent_on_device,readahead_kb,kernel_us_per_read,gaia_us_per_read,speedup,"
		   "gaia_from_device_bytes,gaia_pages_left_cached\n");
	printf("peer caching: %llu MiB file dropped from the page cache, 4 KiB preads (%u random, or the whole "
	       "file in order)\n", (unsigned long long)mb, reads);
	printf("%-10s %8s %12s %14s %12s %9s %12s %7s\n", "pattern", "on_dev_%", "readahead_kb", "kernel_us/read",
	       "gaia_us/read", "speedup", "from_dev_MiB", "cached");
	double speedup[2] = {0, 0};
	for (int seq = 0; seq < 2; seq++) {
		struct row base = run_row(self, lib, out, mb, 0, seq, reads, 0, 0);
		for (int pct = 0; pct <= 100; pct += 25) {
			struct row g = run_row(self, lib, out, mb, pct, seq, reads, 1, 0);
			double s = base.ok && g.ok ? base.us / g.us : 0;
			if (pct == 100)
				speedup[seq] = s;
			printf("%-10s %8d %12s %14.2f %12.2f %9.2f %12.1f %7llu%s\n", seq ? "sequential" : "random", pct,
			       "default", base.us, g.us, s, g.from_device / 1048576.0, g.resident,
			       base.ok && g.ok ? "" : "  (failed)");
			fprintf(c, "%s,%d,default,%.3f,%.3f,%.3f,%llu,%llu\n", seq ? "sequential" : "random", pct, base.us,
				g.us, s, g.from_device, g.resident);
		}
	}
	struct row base = run_row(self, lib, out, mb, 0, 1, reads, 0, 0);
	static const int sweep[] = {4, 16, 64, 256, 1024, 4096};
	for (unsigned i = 0; i < sizeof(sweep) / sizeof(sweep[0]); i++) {
		struct row g = run_row(self, lib, out, mb, 100, 1, reads, 1, sweep[i]);
		double s = base.ok && g.ok ? base.us / g.us : 0;
		printf("%-10s %8d %12d %14.2f %12.2f %9.2f %12.1f %7llu%s\n", "sequential", 100, sweep[i], base.us, g.us,
		       s, g.from_device / 1048576.0, g.resident, base.ok && g.ok ? "" : "  (failed)");
		fprintf(c, "sequential,100,%d,%.3f,%.3f,%.3f,%llu,%llu\n", sweep[i], base.us, g.us, s, g.from_device,
			g.resident);
	}
	fclose(c);
	/* The headline ratios: the table's row is one run of each side, and
	 * this machine's storage and scheduling move a run by tens of percent.
	 * Three more pairs, kernel and gaia alternating, and the median of
	 * the four ratios. */
	double med[2];
	for (int seq = 0; seq < 2; seq++) {
		double r[PAIRS + 1];
		r[0] = speedup[seq];
		for (int i = 1; i <= PAIRS; i++) {
			struct row k = run_row(self, lib, out, mb, 0, seq, reads, 0, 0);
			struct row g = run_row(self, lib, out, mb, 100, seq, reads, 1, 0);
			r[i] = k.ok && g.ok ? k.us / g.us : 0;
		}
		printf("%s, whole file on the device: kernel/gaia ratios", seq ? "sequential" : "random");
		for (int i = 0; i <= PAIRS; i++)
			printf(" %.2f", r[i]);
		med[seq] = median(r, PAIRS + 1);
		printf(" -> median %.2f\n", med[seq]);
	}
	printf("\nBENCH peer_random_speedup %.3f x (whole file on the device, kernel us/read over gaia us/read, "
	       "median of %d alternating pairs)\n", med[0], PAIRS + 1);
	printf("BENCH peer_seq_speedup %.3f x (the same, reads in file order)\n", med[1]);
	printf("from_dev_MiB: bytes the shim served from the device (GAIA_STATS peer_read_bytes); cached: pages\n"
	       "still in the page cache when the reads began (mincore; 0 means every read left memory)\n");
	printf("csv: %s\n", csv);
	return 0;
}
