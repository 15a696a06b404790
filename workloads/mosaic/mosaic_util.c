/*
 * mosaic_util.c — see mosaic_util.h.
 */
#define _GNU_SOURCE
#include "mosaic_util.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "simgpu.h"     /* struct simgpu_stats: the simulator's counters */

static const char *prog_name = "mosaic";

void mosaic_set_prog(const char *prog)
{
	prog_name = prog;
}

void mosaic_err(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: %s\n", prog_name, line);
}

double mosaic_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int mosaic_pread_all(int fd, const char *path, void *buf, size_t len, uint64_t off)
{
	unsigned char *p = buf;
	while (len > 0) {
		ssize_t n = pread(fd, p, len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			mosaic_err("%s: read at offset %llu: %s", path, (unsigned long long)off, strerror(e));
			return -e;
		}
		if (n == 0) {
			mosaic_err("%s: file ends at offset %llu, %zu bytes short", path,
				   (unsigned long long)off, len);
			return -EIO;
		}
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

int mosaic_pwrite_all(int fd, const char *path, const void *buf, size_t len, uint64_t off)
{
	const unsigned char *p = buf;
	while (len > 0) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			mosaic_err("%s: write at offset %llu: %s", path, (unsigned long long)off, strerror(e));
			return -e;
		}
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

int64_t mosaic_file_size(int fd, const char *path)
{
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int e = errno;
		mosaic_err("%s: stat: %s", path, strerror(e));
		return -e;
	}
	return (int64_t)st.st_size;
}

int mosaic_cuda_check(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	mosaic_err("%s failed: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
	return -1;
}

/* simgpu_stats_get exists only in the simulated driver: looked up at run
 * time, so the same source runs on a real GPU (counters reported n/a). */
void mosaic_bus_read(struct mosaic_bus *out)
{
	typedef int (*stats_fn)(int, struct simgpu_stats *);
	memset(out, 0, sizeof(*out));
	stats_fn get = (stats_fn)dlsym(RTLD_DEFAULT, "simgpu_stats_get");
	struct simgpu_stats s;
	if (get == NULL || get(0, &s) != 0)
		return;
	out->valid = 1;
	out->htod_bytes = s.htod_bytes;
	out->dtoh_bytes = s.dtoh_bytes;
	out->uvm_faults = s.uvm_faults;
	out->uvm_migrated_bytes = s.uvm_migrated_bytes;
	out->host_read_bytes = s.bus_bytes[SIMGPU_BUS_HTOD][SIMGPU_BUS_HOST_ACCESS];
}

struct mosaic_bus mosaic_bus_delta(const struct mosaic_bus *before, const struct mosaic_bus *after)
{
	struct mosaic_bus d;
	memset(&d, 0, sizeof(d));
	if (!before->valid || !after->valid)
		return d;
	d.valid = 1;
	d.htod_bytes = after->htod_bytes - before->htod_bytes;
	d.dtoh_bytes = after->dtoh_bytes - before->dtoh_bytes;
	d.uvm_faults = after->uvm_faults - before->uvm_faults;
	d.uvm_migrated_bytes = after->uvm_migrated_bytes - before->uvm_migrated_bytes;
	d.host_read_bytes = after->host_read_bytes - before->host_read_bytes;
	return d;
}

const char *mosaic_fmt_u64(char *buf, int valid, uint64_t v)
{
	if (!valid)
		snprintf(buf, 24, "n/a");
	else
		snprintf(buf, 24, "%llu", (unsigned long long)v);
	return buf;
}
