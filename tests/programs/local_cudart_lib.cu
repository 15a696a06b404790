/* local_cudart_lib — a plugin: a shared library linked with libcudart,
 * opened by local_cudart with dlopen(RTLD_LOCAL), as a program loads a
 * CUDA plugin (libcudart then sits in a local scope, out of the reach of
 * RTLD_DEFAULT and RTLD_NEXT). Its kernels get pointers into a mapped
 * file as plain arguments and through a struct; run_local() checks what
 * they read and wrote through the mapping and with pread(). */
#include "programs.h"

#define N 8192 /* ints per array */
#define ARR (N * sizeof(int))

struct pair {
	const int *in;
	int *out;
};

__global__ void add_one(const int *in, int *out, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		out[i] = in[i] + 1;
}
SIMGPU_KERNEL(add_one);

__global__ void times_three(struct pair p, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		p.out[i] = p.in[i] * 3;
}
SIMGPU_KERNEL(times_three);

static unsigned char zero(size_t i)
{
	(void)i;
	return 0;
}

extern "C" __attribute__((visibility("default"))) int run_local(void)
{
	int fd = make_file(2 * ARR, zero);
	int *m = (int *)map_file(fd, 2 * ARR);
	int *in = m, *out = m + N;
	for (int i = 0; i < N; i++)
		in[i] = 5 * i;

	step = "add_one(in, out) on mapped pointers";
	SIMGPU_LAUNCH(add_one, N / 256, 256, 0, 0)(in, out, N);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	for (int i = 0; i < N; i++)
		CHECK(out[i] == 5 * i + 1, "out[%d] is %d through the mapping, want %d", i, out[i], 5 * i + 1);
	int *back = (int *)malloc(ARR);
	CHECK(back != NULL, "malloc");
	pread_all(fd, back, ARR, ARR);
	for (int i = 0; i < N; i++)
		CHECK(back[i] == 5 * i + 1, "out[%d] is %d by pread, want %d", i, back[i], 5 * i + 1);

	step = "times_three({in, out}) through a struct";
	for (int i = 0; i < N; i++)
		in[i] = 7 + i;
	struct pair p = {in, out};
	SIMGPU_LAUNCH(times_three, N / 256, 256, 0, 0)(p, N);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	pread_all(fd, back, ARR, ARR);
	for (int i = 0; i < N; i++)
		CHECK(back[i] == 3 * (7 + i), "out[%d] is %d by pread, want %d", i, back[i], 3 * (7 + i));
	free(back);
	munmap(m, 2 * ARR);
	close(fd);
	return 0;
}
