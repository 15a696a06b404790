/* driver_launch — a program that launches through the driver API, as
 * static cudart does under every <<<>>> and as frameworks do: the kernel
 * handle is a CUkernel (cudaGetKernel), or the CUfunction behind it
 * (cuKernelGetFunction); the launch is cuLaunchKernel or cuLaunchKernelEx.
 * The parameter is a struct by value holding pointers into an mmap'ed
 * file, so the shim must learn the parameter layout from the driver with
 * whatever handle it was given (cuFuncGetParamInfo refuses CUkernels).
 * Each case uses a file of its own and checks the kernel's result through
 * the mapping and with pread() after cuCtxSynchronize.
 */
#include "programs.h"

#include <cuda.h>

#define N 2048
#define ARR (N * sizeof(int))

struct Pair {
	const int *in;
	int *out;
};

__global__ void twice(struct Pair p, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		p.out[i] = 2 * p.in[i] + 1;
}
SIMGPU_KERNEL(twice);

static unsigned char zero(size_t i)
{
	(void)i;
	return 0;
}

enum how { KERNEL_LAUNCH, KERNEL_LAUNCH_EX, FUNCTION_LAUNCH, FUNCTION_LAUNCH_EX };
static const char *const how_name[] = { "cuLaunchKernel with a CUkernel", "cuLaunchKernelEx with a CUkernel",
					"cuLaunchKernel with the CUfunction", "cuLaunchKernelEx with the CUfunction" };

#define CU_OK(call)                                                                          \
	do {                                                                                 \
		CUresult r_ = (call);                                                        \
		const char *n_ = NULL;                                                       \
		cuGetErrorName(r_, &n_);                                                     \
		CHECK(r_ == CUDA_SUCCESS, "%s returned %s", #call, n_ ? n_ : "an unknown code"); \
	} while (0)

static void one_case(enum how how)
{
	static char where[200];
	snprintf(where, sizeof(where), "%s", how_name[how]);
	step = where;
	int fd = make_file(2 * ARR, zero);
	int *m = (int *)map_file(fd, 2 * ARR);
	for (int i = 0; i < N; i++)
		m[i] = i * 3 - 100;
	struct Pair p = { m, m + N };
	int n = N;
	void *params[] = { &p, &n };

	cudaKernel_t k;
	CUDA_OK(cudaGetKernel(&k, (const void *)twice));
	CUfunction f = (CUfunction)k;
	if (how == FUNCTION_LAUNCH || how == FUNCTION_LAUNCH_EX)
		CU_OK(cuKernelGetFunction(&f, (CUkernel)k));
	if (how == KERNEL_LAUNCH || how == FUNCTION_LAUNCH) {
		CU_OK(cuLaunchKernel(f, N / 256, 1, 1, 256, 1, 1, 0, NULL, params, NULL));
	} else {
		CUlaunchConfig cfg;
		memset(&cfg, 0, sizeof(cfg));
		cfg.gridDimX = N / 256, cfg.gridDimY = 1, cfg.gridDimZ = 1;
		cfg.blockDimX = 256, cfg.blockDimY = 1, cfg.blockDimZ = 1;
		CU_OK(cuLaunchKernelEx(&cfg, f, params, NULL));
	}
	CU_OK(cuCtxSynchronize());
	int *back = (int *)malloc(ARR);
	pread_all(fd, back, ARR, ARR);
	for (int i = 0; i < N; i++) {
		int want = 2 * (i * 3 - 100) + 1;
		CHECK(m[N + i] == want, "%s: out[%d] through the mapping is %d, want %d", where, i, m[N + i], want);
		CHECK(back[i] == want, "%s: out[%d] read with pread() is %d, want %d", where, i, back[i], want);
	}
	free(back);
	munmap(m, 2 * ARR);
	close(fd);
}

int main(void)
{
	watchdog(60);
	CUDA_OK(cudaSetDevice(0));
	CUDA_OK(cudaFree(0));
	for (int how = KERNEL_LAUNCH; how <= FUNCTION_LAUNCH_EX; how++)
		one_case((enum how)how);
	printf("ok driver_launch\n");
	return 0;
}
