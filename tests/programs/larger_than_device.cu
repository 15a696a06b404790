/* larger_than_device — a mapped file three times the device's memory,
 * written by a kernel: the launch runs (the region's replica is managed
 * memory paged on demand, with its base copies on the host: README,
 * "Regions larger than the device"), every word the kernel incremented
 * reaches the file, and the CPU's word written before the launch is in
 * it. Then a kernel on a file that fits. Run with a 32 MiB simulated
 * device; on a larger one it skips itself.
 *
 * Each block increments its own contiguous slice: the simulated device
 * runs a couple of blocks at a time, and a grid-stride loop would have
 * every block sweep the whole file, evicting what the others brought
 * (on a GPU, too, oversubscribed managed memory wants locality).
 */
#include "programs.h"

#define BIG (96u << 20)
#define SMALL (64u << 10)

__global__ void add_one(unsigned *w, unsigned long long n)
{
	unsigned long long per = (n + gridDim.x - 1) / gridDim.x;
	unsigned long long from = per * blockIdx.x, to = from + per < n ? from + per : n;
	for (unsigned long long i = from + threadIdx.x; i < to; i += blockDim.x)
		w[i] += 1;
}
SIMGPU_KERNEL(add_one);

int main(void)
{
	watchdog(100);
	size_t free_bytes = 0, total = 0;
	CUDA_OK(cudaMemGetInfo(&free_bytes, &total));
	if (total >= BIG) {
		printf("skip: the device has %zu MiB, more than the %u MiB file (run with a 32 MiB simulated "
		       "device)\n", total >> 20, BIG >> 20);
		return 77;
	}
	int big_fd = make_file(BIG, NULL);
	unsigned *big = (unsigned *)map_file(big_fd, BIG);
	big[12345] = 7;
	step = "launch on the file three times the device";
	SIMGPU_LAUNCH(add_one, 64, 128, 0, 0)(big, (unsigned long long)(BIG / 4));
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	step = "checking the file";
	for (size_t i = 0; i < BIG / 4; i++)
		CHECK(big[i] == (i == 12345 ? 8u : 1u), "word %zu is %u after the kernel added one", i, big[i]);
	step = "a second launch";
	big[BIG / 4 - 1] = 100;
	SIMGPU_LAUNCH(add_one, 64, 128, 0, 0)(big, (unsigned long long)(BIG / 4));
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	CHECK(big[0] == 2 && big[12345] == 9 && big[BIG / 4 - 1] == 101,
	      "after the second kernel: words %u %u %u, not 2 9 101", big[0], big[12345], big[BIG / 4 - 1]);
	munmap(big, BIG);
	unsigned w[2];
	CHECK(pread(big_fd, w, sizeof(w), 12345 * 4) == (ssize_t)sizeof(w) && w[0] == 9 && w[1] == 2,
	      "the file has %u %u at word 12345, not 9 2", w[0], w[1]);

	step = "launch on a file that fits";
	int small_fd = make_file(SMALL, NULL);
	unsigned *small = (unsigned *)map_file(small_fd, SMALL);
	small[3] = 41;
	SIMGPU_LAUNCH(add_one, 4, 128, 0, 0)(small, (unsigned long long)(SMALL / 4));
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	CHECK(small[3] == 42, "the kernel on the small file left %u, not 42", small[3]);
	munmap(small, SMALL);
	printf("ok larger_than_device\n");
	return 0;
}
