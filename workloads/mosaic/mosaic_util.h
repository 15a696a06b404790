/*
 * mosaic_util.h — small helpers shared by the mosaic workloads (collage,
 * stitch): a seeded random stream, a clock, whole-file I/O with errors that
 * name the file, CUDA error reporting and the simulator's byte counters.
 *
 * The workloads are ordinary CUDA programs: nothing here knows of GAIA.
 */
#ifndef MOSAIC_UTIL_H
#define MOSAIC_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

/* File records and mappings are laid out in 4 KiB pages. */
#define MOSAIC_PAGE 4096u

/* splitmix64: a deterministic stream from one 64-bit seed. */
struct mosaic_rng {
	uint64_t state;
};

static inline uint64_t mosaic_rng_next(struct mosaic_rng *r)
{
	uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [0, n), n > 0 (the modulo bias is irrelevant here). */
static inline uint32_t mosaic_rng_below(struct mosaic_rng *r, uint32_t n)
{
	return (uint32_t)(mosaic_rng_next(r) % n);
}

double mosaic_now_s(void);

/* Reports "<prog>: <message>" on stderr. */
void mosaic_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void mosaic_set_prog(const char *prog);

/* Reads exactly `len` bytes at `off`; 0, or -EIO for a short file (errno
 * set), or -errno.  Errors are reported with the path. */
int mosaic_pread_all(int fd, const char *path, void *buf, size_t len, uint64_t off);
int mosaic_pwrite_all(int fd, const char *path, const void *buf, size_t len, uint64_t off);

/* Size of an open file, or -errno. */
int64_t mosaic_file_size(int fd, const char *path);

/* A CUDA runtime call that failed: reports the call and the error, and
 * returns -1; 0 on success. */
int mosaic_cuda_check(cudaError_t e, const char *what);
#define MOSAIC_CUDA(call) mosaic_cuda_check((call), #call)

/* Host<->device byte counters of device 0, when the CUDA library behind the
 * program offers them (the simulated GPU does; a real driver does not). */
struct mosaic_bus {
	int valid;                  /* 0: counters not available */
	uint64_t htod_bytes, dtoh_bytes;
	uint64_t uvm_faults, uvm_migrated_bytes;
	uint64_t host_read_bytes; /* kernels' loads from host memory (pinned, registered) */
};
void mosaic_bus_read(struct mosaic_bus *out);
/* after - before, field by field (valid when both are). */
struct mosaic_bus mosaic_bus_delta(const struct mosaic_bus *before, const struct mosaic_bus *after);

/* Prints a number of bytes, or "n/a" when the counters are absent, into
 * buf (at least 24 bytes). */
const char *mosaic_fmt_u64(char *buf, int valid, uint64_t v);

#endif /* MOSAIC_UTIL_H */
