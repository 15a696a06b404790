/* mem_ops — the memory calls other than copies, on an mmap'ed file `m`:
 *   cudaMemset into m before any kernel touched it, and after a kernel
 *   wrote m with no sync between (the memset comes later in stream order:
 *   its bytes win where both wrote);
 *   cudaMemsetAsync on a created stream after a kernel on that stream;
 *   cuMemsetD16/D32 (+Async) and cudaMemset2D/cuMemsetD2D32 with a pitch;
 *   a memset on a host-registered mapping;
 *   cudaMemcpyPeer/cudaMemcpyPeerAsync with m on either side;
 *   a memset into a read-only mapping, and one running past a mapping's
 *   end: refused with cudaErrorInvalidValue, nothing stored (the driver's
 *   answer for host memory it cannot write);
 *   cudaMemPrefetchAsync to the device and to the CPU, and cudaMemAdvise,
 *   with CPU stores before them: each returns success and a kernel then
 *   reads the CPU's bytes.
 * After each step the mapping, pread() and a kernel reading m must all
 * show what the program wrote, in program order.
 */
#include <cuda.h>

#include "patterns.h"

#define NB (16 * PAGE)

static int fd;
static unsigned char *m;     /* the mapped file */
static unsigned char *d2;    /* device buffer a kernel copies m into */
static unsigned char *model; /* what the file must hold */

/* The mapping, pread() and a kernel reading m must all show `model`. */
static void everyone_sees_model(void)
{
	char msg[300];
	snprintf(msg, sizeof(msg), "%s: through the mapping", step);
	same(msg, m, model, NB);
	unsigned char *buf = (unsigned char *)malloc(NB);
	pread_all(fd, buf, NB, 0);
	snprintf(msg, sizeof(msg), "%s: read with pread()", step);
	same(msg, buf, model, NB);
	SIMGPU_LAUNCH(copy_bytes, 16, 256, 0, 0)(m, d2, (unsigned long long)NB);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaMemcpy(buf, d2, NB, cudaMemcpyDeviceToHost));
	snprintf(msg, sizeof(msg), "%s: what a kernel reading the mapping saw", step);
	same(msg, buf, model, NB);
	free(buf);
}

static void model_set(size_t off, const void *value, size_t elem, size_t count)
{
	for (size_t i = 0; i < count; i++)
		memcpy(model + off + i * elem, value, elem);
}

static void memsets_runtime(cudaStream_t s)
{
	step = "cudaMemset into m after CPU stores, before any kernel";
	fill(m, 0, NB, 1);
	fill(model, 0, NB, 1);
	CUDA_OK(cudaMemset(m + 100, 0xab, 3 * PAGE + 7));
	memset(model + 100, 0xab, 3 * PAGE + 7);
	everyone_sees_model();

	step = "cudaMemset after a kernel wrote m, no sync between";
	SIMGPU_LAUNCH(fill_pat, 16, 256, 0, 0)(m, 0ull, (unsigned long long)NB, 2);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaMemset(m + PAGE / 2, 0x11, PAGE));
	CUDA_OK(cudaDeviceSynchronize());
	fill(model, 0, NB, 2);
	memset(model + PAGE / 2, 0x11, PAGE);
	everyone_sees_model();

	step = "cudaMemsetAsync on a stream after a kernel on that stream";
	SIMGPU_LAUNCH(fill_pat, 16, 256, 0, s)(m, (unsigned long long)(4 * PAGE), (unsigned long long)(8 * PAGE), 3);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaMemsetAsync(m + 5 * PAGE, 0x22, 2 * PAGE, s));
	CUDA_OK(cudaStreamSynchronize(s));
	fill(model, 4 * PAGE, 8 * PAGE, 3);
	memset(model + 5 * PAGE, 0x22, 2 * PAGE);
	everyone_sees_model();

	step = "cudaMemset2D into m (pitch one page, 100 bytes x 5 rows)";
	CUDA_OK(cudaMemset2D(m + 9 * PAGE + 10, PAGE, 0x33, 100, 5));
	for (size_t y = 0; y < 5; y++)
		memset(model + 9 * PAGE + 10 + y * PAGE, 0x33, 100);
	everyone_sees_model();
}

static void memsets_driver(CUstream s)
{
	step = "cuMemsetD16 and cuMemsetD32 into m";
	unsigned short v16 = 0xbeef;
	unsigned int v32 = 0x01020304;
	CHECK(cuMemsetD16((CUdeviceptr)(uintptr_t)(m + 2 * PAGE + 2), v16, 301) == CUDA_SUCCESS, "cuMemsetD16");
	CHECK(cuMemsetD32((CUdeviceptr)(uintptr_t)(m + 12 * PAGE), v32, 1000) == CUDA_SUCCESS, "cuMemsetD32");
	model_set(2 * PAGE + 2, &v16, 2, 301);
	model_set(12 * PAGE, &v32, 4, 1000);
	everyone_sees_model();

	step = "cuMemsetD32Async and cuMemsetD2D32Async on a stream after a kernel there";
	SIMGPU_LAUNCH(fill_pat, 16, 256, 0, (cudaStream_t)s)(m, 0ull, (unsigned long long)NB, 4);
	CUDA_OK(cudaGetLastError());
	v32 = 0xa1b2c3d4;
	CHECK(cuMemsetD32Async((CUdeviceptr)(uintptr_t)(m + 3 * PAGE + 8), v32, 77, s) == CUDA_SUCCESS,
	      "cuMemsetD32Async");
	CHECK(cuMemsetD2D32Async((CUdeviceptr)(uintptr_t)(m + 10 * PAGE), PAGE, v32 ^ 0xffffffffu, 10, 3, s) ==
		      CUDA_SUCCESS,
	      "cuMemsetD2D32Async");
	CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS, "cuStreamSynchronize");
	fill(model, 0, NB, 4);
	model_set(3 * PAGE + 8, &v32, 4, 77);
	v32 ^= 0xffffffffu;
	for (size_t y = 0; y < 3; y++)
		model_set(10 * PAGE + y * PAGE, &v32, 4, 10);
	everyone_sees_model();
}

static void registered_memset(void)
{
	step = "cudaMemset on a host-registered mapping";
	CUDA_OK(cudaHostRegister(m, NB, cudaHostRegisterDefault));
	CUDA_OK(cudaMemset(m + 7 * PAGE, 0x44, PAGE + 3));
	memset(model + 7 * PAGE, 0x44, PAGE + 3);
	everyone_sees_model();
	CUDA_OK(cudaHostUnregister(m));
}

static void refused_memsets(void)
{
	step = "cudaMemset into a read-only mapping";
	unsigned char *ro = (unsigned char *)mmap(NULL, NB, PROT_READ, MAP_SHARED, fd, 0);
	CHECK(ro != MAP_FAILED, "mmap read-only: %s", strerror(errno));
	cudaError_t e = cudaMemset(ro + PAGE, 0x55, 100);
	CHECK(e == cudaErrorInvalidValue, "returned %s", cudaGetErrorName(e));
	(void)cudaGetLastError();
	CHECK(munmap(ro, NB) == 0, "munmap: %s", strerror(errno));
	everyone_sees_model();

	step = "cudaMemset running past the end of a mapping";
	e = cudaMemset(m + NB - PAGE, 0x66, 2 * PAGE);
	CHECK(e == cudaErrorInvalidValue, "returned %s", cudaGetErrorName(e));
	(void)cudaGetLastError();
	everyone_sees_model();

	step = "cudaMemcpy into a read-only mapping";
	ro = (unsigned char *)mmap(NULL, NB, PROT_READ, MAP_SHARED, fd, 0);
	CHECK(ro != MAP_FAILED, "mmap read-only: %s", strerror(errno));
	e = cudaMemcpy(ro, d2, PAGE, cudaMemcpyDeviceToHost);
	CHECK(e == cudaErrorInvalidValue, "returned %s", cudaGetErrorName(e));
	(void)cudaGetLastError();
	CHECK(munmap(ro, NB) == 0, "munmap: %s", strerror(errno));
	everyone_sees_model();
}

static void peer_copies(cudaStream_t s)
{
	unsigned char *buf = (unsigned char *)malloc(NB), *d3;
	CHECK(buf != NULL, "malloc");
	CUDA_OK(cudaMalloc((void **)&d3, NB));

	step = "cudaMemcpyPeer from m after CPU stores";
	fill(m, 0, NB, 9);
	fill(model, 0, NB, 9);
	CUDA_OK(cudaMemcpyPeer(d3, 0, m, 0, NB));
	CUDA_OK(cudaMemcpy(buf, d3, NB, cudaMemcpyDeviceToHost));
	same(step, buf, model, NB);

	step = "cudaMemcpyPeer into m";
	fill(buf, 0, NB, 10);
	CUDA_OK(cudaMemcpy(d3, buf, NB, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpyPeer(m + 3, 0, d3 + 5, 0, NB - 3 * PAGE));
	memcpy(model + 3, buf + 5, NB - 3 * PAGE);
	everyone_sees_model();

	step = "cudaMemcpyPeerAsync into m after a kernel on that stream wrote m";
	SIMGPU_LAUNCH(fill_pat, 16, 256, 0, s)(m, 0ull, (unsigned long long)NB, 11);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaMemcpyPeerAsync(m + 2 * PAGE, 0, d3, 0, PAGE, s));
	CUDA_OK(cudaStreamSynchronize(s));
	fill(model, 0, NB, 11);
	memcpy(model + 2 * PAGE, buf, PAGE);
	everyone_sees_model();

	step = "cudaMemcpyPeerAsync from m";
	fill(m, 0, NB, 12);
	fill(model, 0, NB, 12);
	CUDA_OK(cudaMemcpyPeerAsync(d3, 0, m, 0, NB, s));
	CUDA_OK(cudaStreamSynchronize(s));
	CUDA_OK(cudaMemcpy(buf, d3, NB, cudaMemcpyDeviceToHost));
	same(step, buf, model, NB);

	CUDA_OK(cudaFree(d3));
	free(buf);
}

static void prefetch_and_advise(cudaStream_t s)
{
	struct cudaMemLocation dev = {cudaMemLocationTypeDevice, 0};
	struct cudaMemLocation host = {cudaMemLocationTypeHost, 0};

	step = "cudaMemPrefetchAsync of m to the device after CPU stores";
	fill(m, 0, NB, 5);
	fill(model, 0, NB, 5);
	CUDA_OK(cudaMemPrefetchAsync(m, NB, dev, 0, s));
	CUDA_OK(cudaStreamSynchronize(s));
	everyone_sees_model();

	step = "CPU stores after a prefetch to the device, then a kernel";
	fill(m, PAGE, 3 * PAGE, 6);
	fill(model, PAGE, 3 * PAGE, 6);
	everyone_sees_model();

	step = "cudaMemPrefetchAsync of m to the CPU after a kernel wrote m";
	SIMGPU_LAUNCH(fill_pat, 16, 256, 0, s)(m, 0ull, (unsigned long long)(2 * PAGE), 7);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaMemPrefetchAsync(m, NB, host, 0, s));
	CUDA_OK(cudaStreamSynchronize(s));
	fill(model, 0, 2 * PAGE, 7);
	everyone_sees_model();

	step = "cudaMemAdvise on m";
	CUDA_OK(cudaMemAdvise(m, NB, cudaMemAdviseSetReadMostly, dev));
	CUDA_OK(cudaMemAdvise(m, NB, cudaMemAdviseSetPreferredLocation, host));
	CUDA_OK(cudaMemAdvise(m, NB, cudaMemAdviseSetAccessedBy, dev));
	CUDA_OK(cudaMemAdvise(m, NB, cudaMemAdviseUnsetReadMostly, dev));
	fill(m, 0, NB, 8);
	fill(model, 0, NB, 8);
	everyone_sees_model();

	step = "cudaMemPrefetchAsync of m to a device that does not exist";
	struct cudaMemLocation bad = {cudaMemLocationTypeDevice, 4242};
	cudaError_t e = cudaMemPrefetchAsync(m, NB, bad, 0, s);
	CHECK(e == cudaErrorInvalidDevice, "returned %s", cudaGetErrorName(e));
	(void)cudaGetLastError();
}

int main(void)
{
	watchdog(100);
	fd = make_file(NB, NULL);
	m = (unsigned char *)map_file(fd, NB);
	model = (unsigned char *)malloc(NB);
	CHECK(model != NULL, "malloc");
	CUDA_OK(cudaMalloc((void **)&d2, NB));
	cudaStream_t s;
	CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

	memsets_runtime(s);
	memsets_driver((CUstream)s);
	registered_memset();
	refused_memsets();
	peer_copies(s);
	prefetch_and_advise(s);

	CUDA_OK(cudaStreamDestroy(s));
	CUDA_OK(cudaFree(d2));
	munmap(m, NB);
	close(fd);
	printf("ok mem_ops\n");
	return 0;
}
