/* oom_launch — a mapped file bigger than the device's memory, handed to a
 * kernel: the launch cannot bring it to the device, so it is refused, and
 * the program learns why from the launch's own return value:
 * cudaErrorMemoryAllocation, as for a cudaMalloc that does not fit (not a
 * generic error). The CPU's bytes stay as they were, and a kernel on a
 * file that fits still runs. Run with a 32 MiB simulated device.
 */
#include "programs.h"

#define BIG (96u << 20)
#define SMALL (64u << 10)

__global__ void add_one(unsigned *w, unsigned long long n)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < n; i += (unsigned long long)gridDim.x * blockDim.x)
		w[i] += 1;
}
SIMGPU_KERNEL(add_one);

int main(void)
{
	watchdog(60);
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
	step = "launch on the file bigger than the device";
	SIMGPU_LAUNCH(add_one, 64, 128, 0, 0)(big, (unsigned long long)(BIG / 4));
	cudaError_t e = cudaGetLastError();
	cudaError_t returned = cudaDeviceSynchronize();
	CHECK(e != cudaSuccess || returned != cudaSuccess,
	      "a kernel on a %u MiB file ran on a %s MiB device", BIG >> 20, getenv("SIMGPU_MEM_MB"));
	CHECK(big[12345] == 7, "the CPU's word is %u after the refused launch, not 7", big[12345]);

	/* The launch call itself, through the runtime's launch entry. */
	void *args[2];
	unsigned long long n = BIG / 4;
	args[0] = &big;
	args[1] = &n;
	returned = cudaLaunchKernel((const void *)add_one, dim3(64), dim3(128), args, 0, 0);
	CHECK(returned == cudaErrorMemoryAllocation,
	      "cudaLaunchKernel on a file that cannot fit returned %s, not cudaErrorMemoryAllocation",
	      cudaGetErrorName(returned));
	(void)cudaGetLastError();

	step = "launch on a file that fits";
	int small_fd = make_file(SMALL, NULL);
	unsigned *small = (unsigned *)map_file(small_fd, SMALL);
	small[3] = 41;
	SIMGPU_LAUNCH(add_one, 4, 128, 0, 0)(small, (unsigned long long)(SMALL / 4));
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	CHECK(small[3] == 42, "the kernel on the small file left %u, not 42", small[3]);
	munmap(big, BIG);
	munmap(small, SMALL);
	printf("ok oom_launch\n");
	return 0;
}
