/* programs.h — what every program in tests/programs shares: checks that
 * exit 1 with a message, a watchdog that turns a hang into a failure, and
 * a file in the temp dir to map.
 *
 * These are ordinary CUDA programs (runtime API, kernels compiled by g++
 * through simgpu_kernel.h) that hand pointers from mmap of a regular file
 * to the GPU; CTest runs them under libgaia.so. Exit 0: pass; 1: fail, with
 * a message saying what differed; 77: skip.
 */
#ifndef GAIA_TEST_PROGRAMS_H
#define GAIA_TEST_PROGRAMS_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "simgpu_kernel.h"

#define PAGE 4096

/* Nanoseconds on the device, for kernels that wait a given time: the
 * global timer on a GPU (clock64 counts cycles there), clock64 on the
 * simulated one (nanoseconds). */
#if defined(__CUDACC__)
__device__ static inline long long device_ns(void)
{
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return (long long)t;
}
#else
static inline long long device_ns(void)
{
	return clock64();
}
#endif

/* The step the program is in, named by failed checks and the watchdog. */
static const char *volatile step = "start";

#define CHECK(cond, ...)                                                                \
	do {                                                                            \
		if (!(cond)) {                                                          \
			fprintf(stderr, "FAIL %s:%d [%s]: %s: ", __FILE__, __LINE__,    \
				(const char *)step, #cond);                             \
			fprintf(stderr, __VA_ARGS__);                                   \
			fprintf(stderr, "\n");                                          \
			exit(1);                                                        \
		}                                                                       \
	} while (0)

#define CUDA_OK(call)                                                                   \
	do {                                                                            \
		cudaError_t e_ = (call);                                                \
		CHECK(e_ == cudaSuccess, "%s returned %s", #call, cudaGetErrorName(e_)); \
	} while (0)

static void on_alarm(int sig)
{
	(void)sig;
	const char *s = step;
	char msg[256];
	int n = snprintf(msg, sizeof(msg), "FAIL: watchdog: no progress for the time allowed, hung in: %s\n", s);
	if (n > 0)
		(void)!write(2, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
	_exit(1);
}

/* alarm(seconds): a hang fails instead of blocking the test run. */
static inline void watchdog(unsigned seconds)
{
	signal(SIGALRM, on_alarm);
	alarm(seconds);
}

/* A new file of `bytes` bytes in $TMPDIR (or /tmp), filled with fill(i);
 * its name is left in path (when not NULL, at least 256 bytes). */
static inline int make_file_with(size_t bytes, unsigned char (*fill)(size_t), char *path)
{
	char tmp[256];
	char *p = path ? path : tmp;
	const char *dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(p, 256, "%s/gaia-programs-XXXXXX", dir);
	int fd = mkstemp(p);
	CHECK(fd >= 0, "mkstemp %s: %s", p, strerror(errno));
	unsigned char *buf = (unsigned char *)malloc(bytes ? bytes : 1);
	CHECK(buf != NULL, "malloc %zu", bytes);
	for (size_t i = 0; i < bytes; i++)
		buf[i] = fill ? fill(i) : 0;
	CHECK(pwrite(fd, buf, bytes, 0) == (ssize_t)bytes, "pwrite %s: %s", p, strerror(errno));
	free(buf);
	if (!path)
		unlink(p);
	return fd;
}

static inline int make_file(size_t bytes, unsigned char (*fill)(size_t))
{
	return make_file_with(bytes, fill, NULL);
}

static inline void *map_file(int fd, size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(p != MAP_FAILED, "mmap %zu bytes: %s", bytes, strerror(errno));
	return p;
}

/* pread the whole range, short counts retried; a failure fails the test. */
static inline void pread_all(int fd, void *buf, size_t bytes, off_t off)
{
	size_t done = 0;
	while (done < bytes) {
		ssize_t r = pread(fd, (char *)buf + done, bytes - done, off + (off_t)done);
		CHECK(r > 0, "pread %zu bytes at %lld: %s", bytes - done, (long long)(off + (off_t)done),
		      r < 0 ? strerror(errno) : "end of file");
		done += (size_t)r;
	}
}

#endif
