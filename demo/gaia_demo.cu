/* gaia_demo: an ordinary CUDA program that hands an mmap'ed file to a
 * kernel. Without GAIA a discrete GPU cannot dereference that pointer;
 * under libgaia.so (make demo) the file's pages reach the device at the
 * launch, the kernel's writes reach the page cache at the sync, the CPU's
 * own stores to the same pages survive, and read()/pwrite() stay coherent.
 *
 *   gaia_demo [FILE] [MiB]
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "simgpu_kernel.h"

#define HEADER_WORDS 16u /* the CPU's part of the first page */

#define CHECK(cond, ...)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "gaia_demo: ");                                    \
			fprintf(stderr, __VA_ARGS__);                                      \
			fprintf(stderr, "\n");                                             \
			exit(1);                                                           \
		}                                                                          \
	} while (0)
#define CUDA_OK(call)                                                                      \
	do {                                                                               \
		cudaError_t e_ = (call);                                                   \
		CHECK(e_ == cudaSuccess, "%s: %s%s", #call, cudaGetErrorName(e_),          \
		      e_ == cudaErrorIllegalAddress                                        \
			      ? " (the kernel cannot reach the mapped file: run under "    \
				"LD_PRELOAD=libgaia.so, e.g. make demo)"                   \
			      : "");                                                       \
	} while (0)

/* Adds `delta` to every word after the header. */
__global__ void add_to_records(unsigned *words, unsigned long long n, unsigned delta)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < n; i += (unsigned long long)gridDim.x * blockDim.x)
		if (i >= HEADER_WORDS)
			words[i] += delta;
}
SIMGPU_KERNEL(add_to_records);

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0); /* the shim's statistics follow the story */
	const char *path = argc > 1 ? argv[1] : "/tmp/gaia-demo.dat";
	size_t mib = argc > 2 ? strtoull(argv[2], NULL, 10) : 16;
	size_t bytes = mib << 20;
	unsigned long long n = bytes / sizeof(unsigned);

	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
	CHECK(ftruncate(fd, (off_t)bytes) == 0, "ftruncate %s: %s", path, strerror(errno));
	unsigned *w = (unsigned *)mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(w != MAP_FAILED, "mmap %s: %s", path, strerror(errno));
	for (unsigned long long i = 0; i < n; i++)
		w[i] = (unsigned)i;
	printf("1. the CPU wrote %zu MiB of records into %s through mmap\n", mib, path);

	SIMGPU_LAUNCH(add_to_records, 256, 128, 0, 0)(w, n, 1000u);
	CUDA_OK(cudaGetLastError());
	/* While the kernel runs, the CPU stamps the header: same page as
	 * records the kernel is writing. */
	for (unsigned i = 0; i < HEADER_WORDS; i++)
		w[i] = 0xC0FFEE00u + i;
	CUDA_OK(cudaDeviceSynchronize());
	for (unsigned long long i = 0; i < n; i++) {
		unsigned want = i < HEADER_WORDS ? 0xC0FFEE00u + (unsigned)i : (unsigned)i + 1000u;
		CHECK(w[i] == want, "word %llu is %#x, want %#x", i, w[i], want);
	}
	printf("2. a kernel added 1000 to every record of the mapped file while the CPU stamped\n"
	       "   the header in the same page: after cudaDeviceSynchronize both are there\n");

	unsigned probe;
	CHECK(pread(fd, &probe, sizeof(probe), (off_t)(n / 2 * sizeof(unsigned))) == sizeof(probe),
	      "pread: %s", strerror(errno));
	CHECK(probe == (unsigned)(n / 2) + 1000u, "read() saw %u", probe);
	printf("3. read() of the file sees the kernel's result (record %llu = %u)\n", n / 2, probe);

	/* A few records change through write(): the next launch sees them. */
	unsigned changed = 0;
	for (unsigned long long i = HEADER_WORDS; i < n; i += n / 64) {
		unsigned v = 7;
		CHECK(pwrite(fd, &v, sizeof(v), (off_t)(i * sizeof(unsigned))) == sizeof(v), "pwrite");
		changed++;
	}
	SIMGPU_LAUNCH(add_to_records, 256, 128, 0, 0)(w, n, 1u);
	CUDA_OK(cudaDeviceSynchronize());
	for (unsigned long long i = HEADER_WORDS; i < n; i += n / 64)
		CHECK(w[i] == 8, "record %llu is %u after pwrite(7) and +1", i, w[i]);
	printf("4. %u records changed with pwrite(); the next kernel saw them (7 + 1 = 8)\n", changed);

	CHECK(msync(w, bytes, MS_SYNC) == 0, "msync: %s", strerror(errno));
	munmap(w, bytes);
	close(fd);
	unlink(path);
	printf("gaia_demo: ok (no cudaMemcpy anywhere in this program)\n");
	return 0;
}
