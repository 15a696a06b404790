/* map_before_init — a program that maps its files before its first CUDA
 * call (as gaia_demo does, and any program that reads its input first),
 * then hands the kernel a pointer array in device memory pointing into
 * them: only a device copy at the files' own addresses (vmm) serves it.
 * On an H200 the driver never placed a reservation over a range that was
 * mapped when CUDA initialised; the shim must initialise the driver before
 * it places such a mapping. A 16 MiB file and a 40 KiB one.
 */
#include "programs.h"

#define NPTR 2

__global__ void bump(unsigned *const *ptrs, unsigned long long n0, unsigned long long n1)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n0)
		ptrs[0][i] += 3;
	if (i < n1)
		ptrs[1][i] += 5;
}
SIMGPU_KERNEL(bump);

int main(void)
{
	watchdog(60);
	const size_t bytes[NPTR] = { 16u << 20, 40u << 10 };
	int fd[NPTR];
	unsigned *m[NPTR];
	for (int f = 0; f < NPTR; f++) {
		fd[f] = make_file(bytes[f], NULL);
		m[f] = (unsigned *)map_file(fd[f], bytes[f]);
		for (size_t i = 0; i < bytes[f] / 4; i++)
			m[f][i] = (unsigned)(i * 7 + (size_t)f);
	}
	step = "first CUDA call after the files were mapped";
	unsigned **d_ptrs;
	CUDA_OK(cudaMalloc((void **)&d_ptrs, sizeof(m)));
	CUDA_OK(cudaMemcpy(d_ptrs, m, sizeof(m), cudaMemcpyHostToDevice));
	step = "kernel through the pointer array, then cudaDeviceSynchronize";
	unsigned long long n0 = bytes[0] / 4, n1 = bytes[1] / 4;
	SIMGPU_LAUNCH(bump, (unsigned)((n0 + 255) / 256), 256, 0, 0)(d_ptrs, n0, n1);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	for (int f = 0; f < NPTR; f++) {
		unsigned *buf = (unsigned *)malloc(bytes[f]);
		pread_all(fd[f], buf, bytes[f], 0);
		for (size_t i = 0; i < bytes[f] / 4; i++) {
			unsigned want = (unsigned)(i * 7 + (size_t)f) + (f ? 5 : 3);
			CHECK(m[f][i] == want, "file %d word %zu through the mapping: %u, want %u", f, i, m[f][i], want);
			CHECK(buf[i] == want, "file %d word %zu with pread(): %u, want %u", f, i, buf[i], want);
		}
		free(buf);
	}
	CUDA_OK(cudaFree(d_ptrs));
	printf("ok map_before_init\n");
	return 0;
}
