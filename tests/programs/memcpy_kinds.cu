/* memcpy_kinds — cudaMemcpy in every direction with an mmap'ed file `m` on
 * the host side, mixed with kernels that read and write `m` directly:
 *   H2D from m after CPU stores (the copy carries the CPU's bytes);
 *   D2H into m (the mapping, pread() and a later kernel see the bytes);
 *   cudaMemcpyDefault both ways; cudaMemcpyAsync both ways on a created
 *   stream + cudaStreamSynchronize; HostToHost between malloc memory and m;
 *   a partial, unaligned range (offset 123, 5000 bytes);
 *   a D2H copy into m after a kernel wrote other bytes of the same page
 *   (both survive); an H2D copy from m after a kernel wrote m and a sync
 *   (the copy carries the kernel's bytes); cudaMemcpy2D between a pitched
 *   device buffer and m (where the runtime has cudaMemcpy2D); a batch
 *   (cuMemcpyBatchAsync) of copies from m, into m and between device
 *   buffers, after CPU stores and a kernel's writes in stream order, with
 *   the stream's source order and "during the call"; batches cuda.h
 *   refuses.
 * The first steps run before any kernel touched m, the later ones after.
 */
#include <dlfcn.h>

#include <cuda.h>

#include "patterns.h"

#define NB (16 * PAGE)	/* the file, and each device buffer */

static int fd;
static unsigned char *m;	/* the mapped file */
static unsigned char *d, *d2;	/* device buffers */
static unsigned char *h;	/* malloc'ed host buffer */
static unsigned char *model;	/* what the file must hold */

/* The mapping and pread() must show `model`. */
static void file_is_model(const char *what)
{
	char msg[300];
	snprintf(msg, sizeof(msg), "%s: through the mapping", what);
	same(msg, m, model, NB);
	unsigned char *buf = (unsigned char *)malloc(NB);
	pread_all(fd, buf, NB, 0);
	snprintf(msg, sizeof(msg), "%s: read with pread()", what);
	same(msg, buf, model, NB);
	free(buf);
}

/* Device buffer dev must hold want[0, NB). */
static void device_is(const char *what, const unsigned char *dev, const unsigned char *want)
{
	unsigned char *buf = (unsigned char *)malloc(NB);
	CUDA_OK(cudaMemcpy(buf, dev, NB, cudaMemcpyDeviceToHost));
	same(what, buf, want, NB);
	free(buf);
}

/* A kernel reading m must see `model`. */
static void kernel_sees_model(const char *what)
{
	SIMGPU_LAUNCH(copy_bytes, 16, 256, 0, 0)(m, d2, (unsigned long long)NB);
	CUDA_OK(cudaGetLastError());
	char msg[300];
	snprintf(msg, sizeof(msg), "%s: what a kernel reading the mapping saw", what);
	device_is(msg, d2, model);
}

/* Device buffer dev := pattern k (from malloc memory). */
static void device_fill(unsigned char *dev, int k)
{
	fill(h, 0, NB, k);
	CUDA_OK(cudaMemcpy(dev, h, NB, cudaMemcpyHostToDevice));
}

static void h2d_after_cpu_stores(cudaMemcpyKind kind, int k, const char *what)
{
	step = what;
	fill(m, 0, NB, k);
	fill(model, 0, NB, k);
	CUDA_OK(cudaMemcpy(d, m, NB, kind));
	device_is(what, d, model);
}

static void d2h_into_m(cudaMemcpyKind kind, int k, const char *what)
{
	step = what;
	device_fill(d, k);
	CUDA_OK(cudaMemcpy(m, d, NB, kind));
	fill(model, 0, NB, k);
	file_is_model(what);
	kernel_sees_model(what);
}

static void async_both_ways(cudaStream_t s)
{
	step = "cudaMemcpyAsync H2D from m";
	fill(m, 0, NB, 5);
	fill(model, 0, NB, 5);
	CUDA_OK(cudaMemcpyAsync(d, m, NB, cudaMemcpyHostToDevice, s));
	CUDA_OK(cudaStreamSynchronize(s));
	device_is(step, d, model);

	step = "cudaMemcpyAsync D2H into m";
	device_fill(d, 6);
	CUDA_OK(cudaMemcpyAsync(m, d, NB, cudaMemcpyDeviceToHost, s));
	CUDA_OK(cudaStreamSynchronize(s));
	fill(model, 0, NB, 6);
	file_is_model(step);
	kernel_sees_model(step);
}

static void host_to_host(void)
{
	step = "cudaMemcpy HostToHost malloc -> m";
	fill(h, 0, NB, 7);
	CUDA_OK(cudaMemcpy(m, h, NB, cudaMemcpyHostToHost));
	fill(model, 0, NB, 7);
	file_is_model(step);
	kernel_sees_model(step);

	step = "cudaMemcpy HostToHost m -> malloc, after a kernel wrote m and a sync";
	SIMGPU_LAUNCH(fill_pat, 16, 256, 0, 0)(m, 0ull, (unsigned long long)NB, 8);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	fill(model, 0, NB, 8);
	memset(h, 0, NB);
	CUDA_OK(cudaMemcpy(h, m, NB, cudaMemcpyHostToHost));
	same(step, h, model, NB);
}

static void partial_unaligned(void)
{
	const size_t off = 123, len = 5000, doff = 7;
	step = "partial D2H into m (offset 123, 5000 bytes)";
	device_fill(d, 10);
	CUDA_OK(cudaMemcpy(m + off, d + doff, len, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < len; i++)
		model[off + i] = pat(10, doff + i);
	file_is_model(step);
	kernel_sees_model(step);

	step = "partial H2D from m (offset 123, 5000 bytes)";
	fill(m, 0, NB, 11);
	fill(model, 0, NB, 11);
	device_fill(d, 12);
	CUDA_OK(cudaMemcpy(d + doff, m + off, len, cudaMemcpyHostToDevice));
	unsigned char *want = (unsigned char *)malloc(NB);
	fill(want, 0, NB, 12);
	memcpy(want + doff, model + off, len);
	device_is(step, d, want);
	free(want);
}

static void kernels_between_copies(void)
{
	/* The kernel writes the first half of page 3, the copy the second half. */
	step = "D2H into m after a kernel wrote other bytes of the same page";
	const size_t p3 = 3 * PAGE, half = PAGE / 2;
	fill(m, 0, NB, 13);
	fill(model, 0, NB, 13);
	device_fill(d, 14);
	SIMGPU_LAUNCH(fill_pat, 4, 128, 0, 0)(m, (unsigned long long)p3, (unsigned long long)(p3 + half), 15);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaMemcpy(m + p3 + half, d + p3 + half, half, cudaMemcpyDeviceToHost));
	fill(model, p3, p3 + half, 15);
	fill(model, p3 + half, p3 + PAGE, 14);
	file_is_model(step);
	kernel_sees_model(step);

	step = "H2D from m after a kernel wrote m and a sync";
	SIMGPU_LAUNCH(fill_pat, 16, 256, 0, 0)(m, (unsigned long long)PAGE, (unsigned long long)(NB - PAGE), 16);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	fill(model, PAGE, NB - PAGE, 16);
	CUDA_OK(cudaMemcpy(d, m, NB, cudaMemcpyHostToDevice));
	device_is(step, d, model);
	file_is_model(step);
}

/* cudaMemcpy2D: rows of `width` bytes between a device buffer with pitch
 * 512 and m with pitch 1000 starting at byte 100. */
static void copy_2d(void)
{
	const size_t dpitch = 512, hpitch = 1000, hoff = 100, width = 300, height = 20;
	step = "cudaMemcpy2D pitched device buffer -> m";
	device_fill(d, 17);
	CUDA_OK(cudaMemcpy2D(m + hoff, hpitch, d, dpitch, width, height, cudaMemcpyDeviceToHost));
	for (size_t r = 0; r < height; r++)
		for (size_t c = 0; c < width; c++)
			model[hoff + r * hpitch + c] = pat(17, r * dpitch + c);
	file_is_model(step);
	kernel_sees_model(step);

	step = "cudaMemcpy2D m -> pitched device buffer";
	fill(m, 0, NB, 18);
	fill(model, 0, NB, 18);
	device_fill(d, 19);
	CUDA_OK(cudaMemcpy2D(d, dpitch, m + hoff, hpitch, width, height, cudaMemcpyHostToDevice));
	unsigned char *want = (unsigned char *)malloc(NB);
	fill(want, 0, NB, 19);
	for (size_t r = 0; r < height; r++)
		for (size_t c = 0; c < width; c++)
			want[r * dpitch + c] = pat(18, hoff + r * hpitch + c);
	device_is(step, d, want);

	step = "cudaMemcpy2DAsync pitched device buffer -> m, then cudaStreamSynchronize";
	cudaStream_t s;
	CUDA_OK(cudaStreamCreate(&s));
	device_fill(d, 22);
	CUDA_OK(cudaMemcpy2DAsync(m + hoff, hpitch, d, dpitch, width, height, cudaMemcpyDeviceToHost, s));
	CUDA_OK(cudaStreamSynchronize(s));
	for (size_t r = 0; r < height; r++)
		for (size_t c = 0; c < width; c++)
			model[hoff + r * hpitch + c] = pat(22, r * dpitch + c);
	file_is_model(step);
	kernel_sees_model(step);

	step = "cudaMemcpy2DAsync m -> pitched device buffer, after CPU stores";
	fill(m, 0, NB, 23);
	fill(model, 0, NB, 23);
	device_fill(d, 24);
	CUDA_OK(cudaMemcpy2DAsync(d, dpitch, m + hoff, hpitch, width, height, cudaMemcpyHostToDevice, s));
	CUDA_OK(cudaStreamSynchronize(s));
	fill(want, 0, NB, 24);
	for (size_t r = 0; r < height; r++)
		for (size_t c = 0; c < width; c++)
			want[r * dpitch + c] = pat(23, hoff + r * hpitch + c);
	device_is(step, d, want);

	step = "cudaMemcpy2D HostToHost m -> malloc with pitches";
	memset(h, 0, NB);
	CUDA_OK(cudaMemcpy2D(h, dpitch, m + hoff, hpitch, width, height, cudaMemcpyHostToHost));
	memset(want, 0, NB);
	for (size_t r = 0; r < height; r++)
		for (size_t c = 0; c < width; c++)
			want[r * dpitch + c] = pat(23, hoff + r * hpitch + c);
	same(step, h, want, NB);
	CUDA_OK(cudaStreamDestroy(s));
	free(want);
}

/* cuMemcpyBatchAsync on a created stream s, three copies: the first half
 * of m to d, d2's first half into the second half of m, d2's second half
 * to d's second half (no copy reads what another writes). Before it, the
 * CPU stores into m's first half and then a kernel on s writes it
 * (pattern 30, in stream order before the batch, with no sync between):
 * with the stream's source order the batch must read the kernel's bytes.
 * With "during the call" the kernel is synced first (the source is read
 * at the call). Then the checks cuda.h names: a batch on the legacy
 * stream, or with source order 0, is refused and copies nothing. */
static void batch(int during_call)
{
	step = during_call ? "cuMemcpyBatchAsync, source order: during the call"
			   : "cuMemcpyBatchAsync, source order: the stream's";
	cudaStream_t s;
	CUDA_OK(cudaStreamCreate(&s));
	size_t half = NB / 2;
	fill(m, 0, half, 31 + during_call);
	fill(h, 0, NB, 30);
	CUDA_OK(cudaMemcpy(d2, h, NB, cudaMemcpyHostToDevice));
	SIMGPU_LAUNCH(copy_bytes, 16, 256, 0, s)(d2, m, (unsigned long long)half);
	CUDA_OK(cudaGetLastError());
	if (during_call)
		CUDA_OK(cudaStreamSynchronize(s));
	device_fill(d2, 33);
	CUDA_OK(cudaMemset(d, 0, NB));
	unsigned char *want_d = (unsigned char *)malloc(NB);
	fill(want_d, 0, NB, 33);
	fill(want_d, 0, half, 30);	/* m's first half: the kernel's bytes */
	fill(model, 0, half, 30);
	{
		unsigned char *first = (unsigned char *)malloc(half);
		fill(first, 0, half, 33);	/* d2's first half, copied into m's second half */
		memcpy(model + half, first, half);
		free(first);
	}
	CUdeviceptr dsts[3] = {(CUdeviceptr)d, (CUdeviceptr)(m + half), (CUdeviceptr)(d + half)};
	CUdeviceptr srcs[3] = {(CUdeviceptr)m, (CUdeviceptr)d2, (CUdeviceptr)(d2 + half)};
	size_t sizes[3] = {half, half, half};
	CUmemcpyAttributes attr;
	memset(&attr, 0, sizeof(attr));
	attr.srcAccessOrder = during_call ? CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL
					  : CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
	attr.srcLocHint.type = CU_MEM_LOCATION_TYPE_HOST;
	attr.dstLocHint.type = CU_MEM_LOCATION_TYPE_DEVICE;
	size_t idx = 0;
	CUresult rc = cuMemcpyBatchAsync(dsts, srcs, sizes, 3, &attr, &idx, 1, (CUstream)s);
	if (rc == CUDA_ERROR_NOT_SUPPORTED) {
		printf("(cuMemcpyBatchAsync not supported by this driver: skipped)\n");
		CUDA_OK(cudaStreamSynchronize(s));
		CUDA_OK(cudaStreamDestroy(s));
		free(want_d);
		return;
	}
	CHECK(rc == CUDA_SUCCESS, "%s returned %d", step, (int)rc);
	CUDA_OK(cudaStreamSynchronize(s));
	char msg[300];
	snprintf(msg, sizeof(msg), "%s: d after the batch", step);
	device_is(msg, d, want_d);
	snprintf(msg, sizeof(msg), "%s: m after the batch", step);
	file_is_model(msg);
	kernel_sees_model(msg);

	/* Refused: the legacy stream, a source order of 0. */
	step = "cuMemcpyBatchAsync with a mapping, refused";
	CUresult legacy = cuMemcpyBatchAsync(dsts, srcs, sizes, 3, &attr, &idx, 1, (CUstream)0);
	attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_INVALID;
	CUresult bad_order = cuMemcpyBatchAsync(dsts, srcs, sizes, 3, &attr, &idx, 1, (CUstream)s);
	CHECK(legacy == CUDA_ERROR_INVALID_VALUE && bad_order == CUDA_ERROR_INVALID_VALUE,
	      "a batch on the legacy stream returned %d, one with source order 0 %d; want %d (cuda.h)",
	      (int)legacy, (int)bad_order, (int)CUDA_ERROR_INVALID_VALUE);
	CUDA_OK(cudaStreamSynchronize(s));
	file_is_model("after the refused batches: m");
	free(want_d);
	CUDA_OK(cudaStreamDestroy(s));
}

int main(void)
{
	watchdog(60);
	CUDA_OK(cudaSetDevice(0));
	fd = make_file(NB, NULL);
	m = (unsigned char *)map_file(fd, NB);
	CUDA_OK(cudaMalloc((void **)&d, NB));
	CUDA_OK(cudaMalloc((void **)&d2, NB));
	h = (unsigned char *)malloc(NB);
	model = (unsigned char *)calloc(1, NB);

	/* Before any kernel used m, then with kernels in between. */
	h2d_after_cpu_stores(cudaMemcpyHostToDevice, 1, "cudaMemcpy H2D from m after CPU stores, no kernel yet");
	d2h_into_m(cudaMemcpyDeviceToHost, 2, "cudaMemcpy D2H into m, first kernel after it");
	h2d_after_cpu_stores(cudaMemcpyHostToDevice, 20, "cudaMemcpy H2D from m after CPU stores");
	d2h_into_m(cudaMemcpyDeviceToHost, 21, "cudaMemcpy D2H into m");
	h2d_after_cpu_stores(cudaMemcpyDefault, 3, "cudaMemcpyDefault m -> device");
	d2h_into_m(cudaMemcpyDefault, 4, "cudaMemcpyDefault device -> m");
	cudaStream_t s;
	CUDA_OK(cudaStreamCreate(&s));
	async_both_ways(s);
	CUDA_OK(cudaStreamDestroy(s));
	host_to_host();
	partial_unaligned();
	kernels_between_copies();
	copy_2d();
	batch(0);
	batch(1);

	CUDA_OK(cudaFree(d));
	CUDA_OK(cudaFree(d2));
	printf("ok memcpy_kinds\n");
	return 0;
}
