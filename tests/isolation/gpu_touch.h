/* gpu_touch.h — the CUDA work the signal programs do before their signal:
 * enough that whatever SIGSEGV handler CUDA (or a shim) installs is in
 * place, and, for a mapped file, that the file's pages have been to the
 * device and back.
 *
 * gpu_touch(0): CUDA init, a mapped file written by the CPU, a kernel on
 *   it, cudaDeviceSynchronize, the CPU checks the kernel's bytes.
 * gpu_touch(1): the same with cudaMallocManaged memory instead of the file
 *   (the simulator's managed-memory fault handler is then installed, and
 *   the CPU's check migrates the memory back by a fault).
 */
#ifndef GAIA_TEST_GPU_TOUCH_H
#define GAIA_TEST_GPU_TOUCH_H

#include "isolation.h"

#define TOUCH_BYTES (1u << 20)

__global__ void touch_add(unsigned *w, unsigned long long n, unsigned v)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < n; i += (unsigned long long)gridDim.x * blockDim.x)
		w[i] += v;
}
SIMGPU_KERNEL(touch_add);

/* Returns the memory the kernel wrote (it stays mapped / allocated). */
static inline unsigned *gpu_touch(int managed)
{
	const char *was = step;
	step = managed ? "CUDA work on managed memory" : "CUDA work on a mapped file";
	unsigned *w;
	CUDA_OK(cudaSetDevice(0));
	if (managed) {
		CUDA_OK(cudaMallocManaged((void **)&w, TOUCH_BYTES, cudaMemAttachGlobal));
	} else {
		int fd = make_file(TOUCH_BYTES, NULL);
		w = (unsigned *)map_file(fd, TOUCH_BYTES);
		close(fd);
	}
	for (size_t i = 0; i < TOUCH_BYTES / 4; i++)
		w[i] = (unsigned)i;
	SIMGPU_LAUNCH(touch_add, 16, 128, 0, 0)(w, (unsigned long long)(TOUCH_BYTES / 4), 5u);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	for (size_t i = 0; i < TOUCH_BYTES / 4; i += 997)
		CHECK(w[i] == (unsigned)i + 5, "after the kernel word %zu is %u, want %zu", i, w[i], i + 5);
	step = was;
	return w;
}

#endif
