/* odd_sizes — files whose sizes are not multiples of 2 MiB (and one that
 * is), each mmap'ed and handed to a kernel for the first time: 4 KiB,
 * 1 MiB + 4 KiB, 3 MiB + 12 KiB, 5 MiB - 4 KiB, 2 MiB. The kernel adds
 * the byte's index to every byte; after cudaDeviceSynchronize the mapping
 * and pread() must show it, all files still mapped at once.
 *
 * Prints "file PATH SIZE" for each file; odd_sizes_repeat.sh runs it many
 * times and checks in the shim's log (GAIA_LOG=info) which backing each
 * file got.
 */
#include "programs.h"

#define NFILES 5
static const size_t sizes[NFILES] = {
	4 << 10, (1 << 20) + (4 << 10), (3 << 20) + (12 << 10), (5 << 20) - (4 << 10), 2 << 20,
};

__global__ void add_index(unsigned char *m, unsigned long long n)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < n; i += (unsigned long long)gridDim.x * blockDim.x)
		m[i] = (unsigned char)(m[i] + (unsigned char)(i % 253));
}
SIMGPU_KERNEL(add_index);

static unsigned char initial(size_t i)
{
	return (unsigned char)(i * 31 + (i >> 12));
}

int main(void)
{
	watchdog(60);
	CUDA_OK(cudaSetDevice(0));
	char paths[NFILES][256];
	int fds[NFILES];
	unsigned char *maps[NFILES];
	for (int f = 0; f < NFILES; f++) {
		fds[f] = make_file_with(sizes[f], initial, paths[f]);
		maps[f] = (unsigned char *)map_file(fds[f], sizes[f]);
		printf("file %s %zu\n", paths[f], sizes[f]);
	}
	fflush(stdout);
	for (int f = 0; f < NFILES; f++) {
		/* A CPU store through the mapping before the first launch. */
		maps[f][sizes[f] - 1] = 0x77;
		step = paths[f];
		SIMGPU_LAUNCH(add_index, 64, 256, 0, 0)(maps[f], (unsigned long long)sizes[f]);
		CUDA_OK(cudaGetLastError());
		CUDA_OK(cudaDeviceSynchronize());
	}
	for (int f = 0; f < NFILES; f++) {
		unsigned char *buf = (unsigned char *)malloc(sizes[f]);
		pread_all(fds[f], buf, sizes[f], 0);
		for (size_t i = 0; i < sizes[f]; i++) {
			unsigned char was = i == sizes[f] - 1 ? 0x77 : initial(i);
			unsigned char want = (unsigned char)(was + (unsigned char)(i % 253));
			CHECK(maps[f][i] == want, "file of %zu bytes: byte %zu through the mapping is %#x, want %#x",
			      sizes[f], i, maps[f][i], want);
			CHECK(buf[i] == want, "file of %zu bytes: byte %zu read with pread() is %#x, want %#x", sizes[f],
			      i, buf[i], want);
		}
		free(buf);
	}
	for (int f = 0; f < NFILES; f++) {
		munmap(maps[f], sizes[f]);
		close(fds[f]);
		unlink(paths[f]);
	}
	printf("ok odd_sizes\n");
	return 0;
}
