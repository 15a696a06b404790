/* A driver-API program linked with -lcuda: its calls bind to the ABI
 * names the shim exports. Every launch (cuLaunchKernel[_ptsz],
 * cuLaunchKernelEx, with kernelParams and with an extra buffer) and every
 * host sync (context, stream, event, queries, copies that wait) reaches
 * the shim exactly once; copies that leave the host running (device to
 * device, async to pinned memory, async from pageable memory) are not
 * syncs. The shim's kernel_launches must equal the simulator's
 * kernels_launched, and its host_syncs the syncs the program made. */
#include "itest_cuda.h"

#include <cuda.h>

#define PROG "cuda_driver_hooks"
#define ROUNDS 3
#define GRID 2
#define BLOCK 4

/* cuda.h declares the per-thread ABI names only for programs built with
 * CUDA_API_PER_THREAD_DEFAULT_STREAM; this one calls both forms. */
CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
				     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
				     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
				     void **kernelParams, void **extra);
CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream);

static unsigned long launches, syncs;

#define CHECK(call)                                                                                \
	do {                                                                                       \
		CUresult r_ = (call);                                                              \
		if (r_ != CUDA_SUCCESS) {                                                          \
			fprintf(stderr, PROG ": FAIL: %s = %d (line %d)\n", #call, (int)r_, __LINE__); \
			exit(ITEST_FAIL);                                                          \
		}                                                                                  \
	} while (0)
#define SYNC(call)                                                                                 \
	do {                                                                                       \
		CHECK(call);                                                                       \
		syncs++;                                                                           \
	} while (0)
#define LAUNCH(call)                                                                               \
	do {                                                                                       \
		CHECK(call);                                                                       \
		launches++;                                                                        \
	} while (0)

__attribute__((constructor)) static void register_kernel(void)
{
	simgpu_register_kernel(&itest_count_desc);
}

static int child(const char *report)
{
	CUfunction f = (CUfunction)ITEST_COUNT_FUNC;
	CUdevice dev;
	CUcontext ctx;
	CUstream s1, s2;
	CUevent ev;
	CUdeviceptr d_counter, d_scratch, d_scratch2;
	struct simgpu_stats st;
	int host[64], *pinned, total = 0, delta = 1;
	void *params[] = {&d_counter, &delta};
	struct itest_count_args packed;
	size_t packed_size = sizeof(packed);
	void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &packed_size,
			 CU_LAUNCH_PARAM_END};
	CUlaunchConfig config = {.gridDimX = GRID, .gridDimY = 1, .gridDimZ = 1,
				 .blockDimX = BLOCK, .blockDimY = 1, .blockDimZ = 1};

	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	CHECK(cuMemAlloc(&d_counter, sizeof(int)));
	CHECK(cuMemAlloc(&d_scratch, sizeof(host)));
	CHECK(cuMemAlloc(&d_scratch2, sizeof(host)));
	CHECK(cuMemsetD32(d_counter, 0, 1));
	/* s2 is non-blocking: it would not wait for the memset */
	SYNC(cuCtxSynchronize());
	CHECK(cuMemAllocHost((void **)&pinned, sizeof(host)));
	CHECK(cuStreamCreate(&s1, CU_STREAM_DEFAULT));
	CHECK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
	CHECK(cuEventCreate(&ev, CU_EVENT_DEFAULT));
	packed.counter = (int *)(uintptr_t)d_counter;
	packed.delta = delta;
	config.hStream = s2;
	memset(host, 0, sizeof(host));

	for (int r = 0; r < ROUNDS; r++) {
		LAUNCH(cuLaunchKernel(f, GRID, 1, 1, BLOCK, 1, 1, 0, NULL, params, NULL));
		LAUNCH(cuLaunchKernel(f, GRID, 1, 1, BLOCK, 1, 1, 0, s1, NULL, extra));
		LAUNCH(cuLaunchKernel_ptsz(f, GRID, 1, 1, BLOCK, 1, 1, 0, NULL, params, NULL));
		LAUNCH(cuLaunchKernelEx(&config, f, params, NULL));
		LAUNCH(cuLaunchKernelEx(&config, f, NULL, extra));
		SYNC(cuStreamSynchronize(s1));
		SYNC(cuStreamSynchronize_ptsz(NULL));
		CHECK(cuEventRecord(ev, s2));
		SYNC(cuEventSynchronize(ev));
		if (cuStreamQuery(s2) == CUDA_SUCCESS)
			syncs++;
		if (cuEventQuery(ev) == CUDA_SUCCESS)
			syncs++;
		SYNC(cuCtxSynchronize());
		SYNC(cuCtxSynchronize_v2(ctx));
		/* synchronous copies wait, except device to device */
		SYNC(cuMemcpyDtoH(&total, d_counter, sizeof(int)));
		SYNC(cuMemcpyHtoD(d_scratch, host, sizeof(host)));
		SYNC(cuMemcpy((CUdeviceptr)(uintptr_t)host, d_scratch, sizeof(host)));
		CHECK(cuMemcpyDtoD(d_scratch2, d_scratch, sizeof(host)));
		CHECK(cuMemcpy(d_scratch2, d_scratch, sizeof(host)));
		/* async copies wait only into pageable host memory */
		SYNC(cuMemcpyDtoHAsync(host, d_scratch, sizeof(host), s1));
		CHECK(cuMemcpyDtoHAsync(pinned, d_scratch, sizeof(host), s1));
		SYNC(cuMemcpyAsync((CUdeviceptr)(uintptr_t)host, d_scratch, sizeof(host), s1));
		CHECK(cuMemcpyAsync(d_scratch2, (CUdeviceptr)(uintptr_t)host, sizeof(host), s1));
		SYNC(cuStreamSynchronize(s1));
	}
	SYNC(cuCtxSynchronize());
	SYNC(cuMemcpyDtoH(&total, d_counter, sizeof(int)));
	if ((unsigned long)total != launches * GRID * BLOCK) {
		fprintf(stderr, PROG ": FAIL: the kernels counted %d, expected %lu\n", total, launches * GRID * BLOCK);
		return ITEST_FAIL;
	}
	CHECK(cuEventDestroy(ev));
	CHECK(cuStreamDestroy(s1));
	CHECK(cuStreamDestroy(s2));
	CHECK(cuMemFreeHost(pinned));
	CHECK(cuMemFree(d_counter));
	CHECK(cuMemFree(d_scratch));
	CHECK(cuMemFree(d_scratch2));
	if (simgpu_stats_get(0, &st)) {
		fprintf(stderr, PROG ": FAIL: simgpu_stats_get\n");
		return ITEST_FAIL;
	}
	struct itest_cuda_report rep = {.launches = launches, .syncs = syncs, .simgpu_launched = st.kernels_launched};
	if (itest_cuda_write_report(report, &rep)) {
		perror(report);
		return ITEST_FAIL;
	}
	return ITEST_PASS;
}

int main(int argc, char **argv)
{
	const char *report = itest_cuda_child_report();

	(void)argc;
	if (report)
		return child(report);
	return itest_cuda_supervise(PROG, argv);
}
