/* copies_3d — the driver's 3-D copies with an mmap'ed file `m` on one side,
 * as a program that moves boxes of a volume file between host and device
 * writes them:
 *   cuMemcpy3D from m (host memory type) after CPU stores, into m
 *   (unified type), and cuMemcpy3DAsync from m on a stream right after a
 *   kernel on that stream wrote m (stream order: the kernel's bytes);
 *   cuMemcpy3DPeer / cuMemcpy3DPeerAsync both ways;
 *   cuMemcpy3DBatchAsync (the CUDA 13 form, from cuda.h) with operations
 *   from m, into m and between device buffers, after a kernel's writes in
 *   stream order; batches cuda.h refuses (legacy stream, flags, a zero
 *   extent) copy nothing;
 *   the CUDA 12.8 forms of cuMemcpyBatchAsync and cuMemcpy3DBatchAsync
 *   (through cuGetProcAddress with version 12080, as a program built
 *   against 12.8 gets them) with a failing operation in the middle: failIdx
 *   names it, and the mapping, pread() and a kernel agree on what m holds.
 *   Stream order without a host sync between a kernel and a copy: copies
 *   from m after a kernel that wrote it, copies into m after one (the
 *   copy's bytes win), the legacy stream's implicit order both ways
 *   (argument "stream_order": only these).
 * After each step the mapping, pread() and a kernel reading m must show the
 * model of the file.
 */
#include <dlfcn.h>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "patterns.h"

#define NB (32 * PAGE)	/* the file, and each device buffer */

#define CU_OK(call)                                                                          \
	do {                                                                                 \
		CUresult r_ = (call);                                                        \
		CHECK(r_ == CUDA_SUCCESS, "%s returned %d", #call, (int)r_);                 \
	} while (0)

/* The simulated GPU offers every entry point used here: none may be
 * skipped there. */
static int on_simulator(void)
{
	return dlsym(RTLD_DEFAULT, "simgpu_stats_get") != NULL;
}

static int fd;
static unsigned char *m;	/* the mapped file */
static unsigned char *d, *d2;	/* device buffers */
static unsigned char *h;	/* malloc'ed host buffer */
static unsigned char *model;	/* what the file must hold */
static unsigned char *want;	/* what a device buffer must hold */

/* The box every step copies: W bytes by H rows by D planes. In m: pitch
 * 1000, 12 rows a plane, starting at byte 100 of row 1 of plane 1. In a
 * device buffer: pitch 512, 16 rows a plane, from byte 0. */
#define W 300
#define H 10
#define D 3
#define MPITCH 1000
#define MROWS 12
#define MX 100
#define MY 1
#define MZ 1
#define DPITCH 512
#define DROWS 16

static size_t m_at(size_t x, size_t y, size_t z)
{
	return MX + x + (MY + y) * MPITCH + (MZ + z) * MPITCH * MROWS;
}

static size_t d_at(size_t x, size_t y, size_t z)
{
	return x + y * DPITCH + z * DPITCH * DROWS;
}

static void file_is_model(const char *what)
{
	char msg[300];
	snprintf(msg, sizeof(msg), "%s: through the mapping", what);
	same(msg, m, model, NB);
	unsigned char *buf = (unsigned char *)malloc(NB);
	pread_all(fd, buf, NB, 0);
	snprintf(msg, sizeof(msg), "%s: read with pread()", what);
	same(msg, buf, model, NB);
	SIMGPU_LAUNCH(copy_bytes, 16, 256, 0, 0)(m, d2, (unsigned long long)NB);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaMemcpy(buf, d2, NB, cudaMemcpyDeviceToHost));
	snprintf(msg, sizeof(msg), "%s: what a kernel reading the mapping saw", what);
	same(msg, buf, model, NB);
	free(buf);
}

static void device_is(const char *what, const unsigned char *dev)
{
	unsigned char *buf = (unsigned char *)malloc(NB);
	CUDA_OK(cudaMemcpy(buf, dev, NB, cudaMemcpyDeviceToHost));
	same(what, buf, want, NB);
	free(buf);
}

static void device_fill(unsigned char *dev, int k)
{
	fill(h, 0, NB, k);
	CUDA_OK(cudaMemcpy(dev, h, NB, cudaMemcpyHostToDevice));
}

/* want := pattern k, then the box from model into it (m -> device). */
static void want_box_from_model(int k)
{
	fill(want, 0, NB, k);
	for (size_t z = 0; z < D; z++)
		for (size_t y = 0; y < H; y++)
			for (size_t x = 0; x < W; x++)
				want[d_at(x, y, z)] = model[m_at(x, y, z)];
}

/* model := the box of device pattern k (device -> m). */
static void model_box_from_device(int k)
{
	for (size_t z = 0; z < D; z++)
		for (size_t y = 0; y < H; y++)
			for (size_t x = 0; x < W; x++)
				model[m_at(x, y, z)] = pat(k, d_at(x, y, z));
}

static CUDA_MEMCPY3D box_from_m(CUmemorytype mtype)
{
	CUDA_MEMCPY3D c;
	memset(&c, 0, sizeof(c));
	c.srcMemoryType = mtype;
	if (mtype == CU_MEMORYTYPE_HOST)
		c.srcHost = m;
	else
		c.srcDevice = (CUdeviceptr)m;
	c.srcXInBytes = MX;
	c.srcY = MY;
	c.srcZ = MZ;
	c.srcPitch = MPITCH;
	c.srcHeight = MROWS;
	c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	c.dstDevice = (CUdeviceptr)d;
	c.dstPitch = DPITCH;
	c.dstHeight = DROWS;
	c.WidthInBytes = W;
	c.Height = H;
	c.Depth = D;
	return c;
}

static CUDA_MEMCPY3D box_into_m(CUmemorytype mtype)
{
	CUDA_MEMCPY3D c;
	memset(&c, 0, sizeof(c));
	c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	c.srcDevice = (CUdeviceptr)d;
	c.srcPitch = DPITCH;
	c.srcHeight = DROWS;
	c.dstMemoryType = mtype;
	if (mtype == CU_MEMORYTYPE_HOST)
		c.dstHost = m;
	else
		c.dstDevice = (CUdeviceptr)m;
	c.dstXInBytes = MX;
	c.dstY = MY;
	c.dstZ = MZ;
	c.dstPitch = MPITCH;
	c.dstHeight = MROWS;
	c.WidthInBytes = W;
	c.Height = H;
	c.Depth = D;
	return c;
}

static void copies_3d(cudaStream_t s)
{
	step = "cuMemcpy3D from m (host type) after CPU stores, no kernel yet";
	fill(m, 0, NB, 1);
	fill(model, 0, NB, 1);
	device_fill(d, 2);
	CUDA_MEMCPY3D c = box_from_m(CU_MEMORYTYPE_HOST);
	CU_OK(cuMemcpy3D(&c));
	want_box_from_model(2);
	device_is(step, d);

	step = "cuMemcpy3D into m (unified type)";
	device_fill(d, 3);
	c = box_into_m(CU_MEMORYTYPE_UNIFIED);
	CU_OK(cuMemcpy3D(&c));
	model_box_from_device(3);
	file_is_model(step);

	step = "cuMemcpy3DAsync from m (unified type) right after a kernel on the stream wrote m";
	device_fill(d, 5);
	SIMGPU_LAUNCH(fill_pat, 16, 256, 0, s)(m, 0ull, (unsigned long long)NB, 4);
	CUDA_OK(cudaGetLastError());
	fill(model, 0, NB, 4);
	c = box_from_m(CU_MEMORYTYPE_UNIFIED);
	CU_OK(cuMemcpy3DAsync(&c, (CUstream)s));
	CUDA_OK(cudaStreamSynchronize(s));
	want_box_from_model(5);
	device_is(step, d);
	file_is_model(step);

	step = "cuMemcpy3DAsync into m (host type), then cudaStreamSynchronize";
	device_fill(d, 6);
	c = box_into_m(CU_MEMORYTYPE_HOST);
	CU_OK(cuMemcpy3DAsync(&c, (CUstream)s));
	CUDA_OK(cudaStreamSynchronize(s));
	model_box_from_device(6);
	file_is_model(step);
}

static CUDA_MEMCPY3D_PEER as_peer(const CUDA_MEMCPY3D *c, CUcontext ctx)
{
	CUDA_MEMCPY3D_PEER p;
	memset(&p, 0, sizeof(p));
	p.srcXInBytes = c->srcXInBytes;
	p.srcY = c->srcY;
	p.srcZ = c->srcZ;
	p.srcMemoryType = c->srcMemoryType;
	p.srcHost = c->srcHost;
	p.srcDevice = c->srcDevice;
	p.srcContext = ctx;
	p.srcPitch = c->srcPitch;
	p.srcHeight = c->srcHeight;
	p.dstXInBytes = c->dstXInBytes;
	p.dstY = c->dstY;
	p.dstZ = c->dstZ;
	p.dstMemoryType = c->dstMemoryType;
	p.dstHost = c->dstHost;
	p.dstDevice = c->dstDevice;
	p.dstContext = ctx;
	p.dstPitch = c->dstPitch;
	p.dstHeight = c->dstHeight;
	p.WidthInBytes = c->WidthInBytes;
	p.Height = c->Height;
	p.Depth = c->Depth;
	return p;
}

static void peer_copies_3d(cudaStream_t s)
{
	CUcontext ctx;
	CU_OK(cuCtxGetCurrent(&ctx));

	step = "cuMemcpy3DPeer from m after CPU stores";
	fill(m, 0, NB, 7);
	fill(model, 0, NB, 7);
	device_fill(d, 8);
	CUDA_MEMCPY3D c = box_from_m(CU_MEMORYTYPE_HOST);
	CUDA_MEMCPY3D_PEER p = as_peer(&c, ctx);
	CU_OK(cuMemcpy3DPeer(&p));
	want_box_from_model(8);
	device_is(step, d);

	step = "cuMemcpy3DPeer into m";
	device_fill(d, 9);
	c = box_into_m(CU_MEMORYTYPE_HOST);
	p = as_peer(&c, ctx);
	CU_OK(cuMemcpy3DPeer(&p));
	model_box_from_device(9);
	file_is_model(step);

	step = "cuMemcpy3DPeerAsync from m right after a kernel on the stream wrote m";
	device_fill(d, 11);
	SIMGPU_LAUNCH(fill_pat, 16, 256, 0, s)(m, 0ull, (unsigned long long)NB, 10);
	CUDA_OK(cudaGetLastError());
	fill(model, 0, NB, 10);
	c = box_from_m(CU_MEMORYTYPE_UNIFIED);
	p = as_peer(&c, ctx);
	CU_OK(cuMemcpy3DPeerAsync(&p, (CUstream)s));
	CUDA_OK(cudaStreamSynchronize(s));
	want_box_from_model(11);
	device_is(step, d);

	step = "cuMemcpy3DPeerAsync into m";
	device_fill(d, 12);
	c = box_into_m(CU_MEMORYTYPE_UNIFIED);
	p = as_peer(&c, ctx);
	CU_OK(cuMemcpy3DPeerAsync(&p, (CUstream)s));
	CUDA_OK(cudaStreamSynchronize(s));
	model_box_from_device(12);
	file_is_model(step);
}

/* A pointer operand: `ptr`, rows of `row` bytes, `layer` rows a plane. */
static CUmemcpy3DOperand operand(const void *ptr, size_t row, size_t layer)
{
	CUmemcpy3DOperand o;
	memset(&o, 0, sizeof(o));
	o.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
	o.op.ptr.ptr = (CUdeviceptr)ptr;
	o.op.ptr.rowLength = row;
	o.op.ptr.layerHeight = layer;
	o.op.ptr.locHint.type = CU_MEM_LOCATION_TYPE_HOST;
	return o;
}

static CUDA_MEMCPY3D_BATCH_OP op3d(CUmemcpy3DOperand src, CUmemcpy3DOperand dst, size_t w, size_t hh, size_t dd,
				   CUmemcpySrcAccessOrder order)
{
	CUDA_MEMCPY3D_BATCH_OP o;
	memset(&o, 0, sizeof(o));
	o.src = src;
	o.dst = dst;
	o.extent.width = w;
	o.extent.height = hh;
	o.extent.depth = dd;
	o.srcAccessOrder = order;
	return o;
}

/* Three operations, none reading what another writes: the box of m to d;
 * d2's first W*H*D bytes, tightly packed, into the second half of m (rows
 * of 400 bytes, 10 a plane); 8 pages of m past that to d's second half.
 * Before it, a kernel on s writes m's first half and, while it may still
 * run, the CPU stores into the last part of m (no sync between). */
static void batch_3d(cudaStream_t s)
{
	step = "cuMemcpy3DBatchAsync with m on both sides after a kernel and the CPU wrote m";
	const size_t half = NB / 2, tail = half + 8 * PAGE;
	fill(m, 0, NB, 23);
	fill(model, 0, NB, 23);
	SIMGPU_LAUNCH(fill_pat, 16, 256, 0, s)(m, 0ull, (unsigned long long)half, 13);
	CUDA_OK(cudaGetLastError());
	fill(m, tail, NB, 24);
	fill(model, 0, half, 13);
	fill(model, tail, NB, 24);
	device_fill(d, 14);
	device_fill(d2, 15);
	CUDA_MEMCPY3D_BATCH_OP ops[3];
	ops[0] = op3d(operand(m + m_at(0, 0, 0), MPITCH, MROWS), operand(d, DPITCH, DROWS), W, H, D,
		      CU_MEMCPY_SRC_ACCESS_ORDER_STREAM);
	ops[1] = op3d(operand(d2, 0, 0), operand(m + half, 400, 10), W, H, D, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM);
	ops[2] = op3d(operand(m + tail, 0, 0), operand(d + half, 0, 0), 8 * PAGE, 1, 1,
		      CU_MEMCPY_SRC_ACCESS_ORDER_STREAM);
	CUresult rc = cuMemcpy3DBatchAsync(3, ops, 0, (CUstream)s);
	if (rc == CUDA_ERROR_NOT_SUPPORTED && !on_simulator()) {
		printf("(cuMemcpy3DBatchAsync not supported by this driver: skipped)\n");
		CUDA_OK(cudaStreamSynchronize(s));
		return;
	}
	CHECK(rc == CUDA_SUCCESS, "%s returned %d", step, (int)rc);
	CUDA_OK(cudaStreamSynchronize(s));
	want_box_from_model(14);
	memcpy(want + half, model + tail, 8 * PAGE);
	for (size_t z = 0; z < D; z++)
		for (size_t y = 0; y < H; y++)
			for (size_t x = 0; x < W; x++)
				model[half + x + y * 400 + z * 400 * 10] = pat(15, x + y * W + z * W * H);
	device_is(step, d);
	file_is_model(step);

	step = "cuMemcpy3DBatchAsync with a mapping, refused";
	device_fill(d2, 16);
	CUresult legacy = cuMemcpy3DBatchAsync(3, ops, 0, (CUstream)0);
	CUresult flagged = cuMemcpy3DBatchAsync(3, ops, 1, (CUstream)s);
	ops[2].extent.depth = 0;
	CUresult empty = cuMemcpy3DBatchAsync(3, ops, 0, (CUstream)s);
	CHECK(legacy == CUDA_ERROR_INVALID_VALUE && flagged == CUDA_ERROR_INVALID_VALUE &&
		      empty == CUDA_ERROR_INVALID_VALUE,
	      "the legacy stream returned %d, flags 1 %d, a zero extent %d; want %d (cuda.h)", (int)legacy,
	      (int)flagged, (int)empty, (int)CUDA_ERROR_INVALID_VALUE);
	CUDA_OK(cudaStreamSynchronize(s));
	device_is(step, d);
	file_is_model(step);
}

/* The CUDA 12.8 forms, with failIdx, as cuGetProcAddress hands them to a
 * program built against 12.8. Operation 1 reads past the end of d2 and
 * fails; failIdx must name it. Operation 0 (d2 into m) may or may not be
 * done by then (the driver may run a batch's copies in any order), but
 * the mapping, pread() and a kernel must agree on it. */
static void batches_12080(cudaStream_t s)
{
	PFN_cuMemcpyBatchAsync_v12080 batch1d = NULL;
	PFN_cuMemcpy3DBatchAsync_v12080 batch3d = NULL;
	CUdriverProcAddressQueryResult found;
	CUresult r1 = cuGetProcAddress("cuMemcpyBatchAsync", (void **)&batch1d, 12080, CU_GET_PROC_ADDRESS_DEFAULT,
				       &found);
	CUresult r3 = cuGetProcAddress("cuMemcpy3DBatchAsync", (void **)&batch3d, 12080,
				       CU_GET_PROC_ADDRESS_DEFAULT, &found);
	if ((r1 != CUDA_SUCCESS || r3 != CUDA_SUCCESS || !batch1d || !batch3d) && !on_simulator()) {
		printf("(the 12.8 batch forms are not offered by this driver: skipped)\n");
		return;
	}
	CHECK(r1 == CUDA_SUCCESS && r3 == CUDA_SUCCESS && batch1d && batch3d,
	      "cuGetProcAddress(12080) of the batch forms returned %d and %d", (int)r1, (int)r3);
	const size_t half = NB / 2;

	step = "cuMemcpyBatchAsync (12.8) into m, an operation that fails, from m";
	fill(m, 0, NB, 17);
	fill(model, 0, NB, 17);
	device_fill(d, 18);
	device_fill(d2, 19);
	CUdeviceptr dsts[3] = {(CUdeviceptr)(m + PAGE), (CUdeviceptr)d, (CUdeviceptr)(d + half)};
	CUdeviceptr srcs[3] = {(CUdeviceptr)d2, (CUdeviceptr)(d2 + NB - 100), (CUdeviceptr)(m + 8 * PAGE)};
	size_t sizes[3] = {3 * PAGE, PAGE, PAGE};
	CUmemcpyAttributes attr;
	memset(&attr, 0, sizeof(attr));
	attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
	size_t idx = 0, fail = 77;
	CUresult rc = batch1d(dsts, srcs, sizes, 3, &attr, &idx, 1, &fail, (CUstream)s);
	CHECK(rc == CUDA_ERROR_INVALID_VALUE && fail == 1,
	      "a batch whose operation 1 reads past a device buffer returned %d, failIdx %zu; want %d, 1", (int)rc,
	      fail, (int)CUDA_ERROR_INVALID_VALUE);
	CUDA_OK(cudaStreamSynchronize(s));
	unsigned char *now = (unsigned char *)malloc(NB);
	memcpy(now, m, NB);
	int done = 1;
	for (size_t i = 0; i < 3 * PAGE; i++)
		done &= now[PAGE + i] == pat(19, i);
	if (done)
		for (size_t i = 0; i < 3 * PAGE; i++)
			model[PAGE + i] = pat(19, i);
	printf("(cuMemcpyBatchAsync 12.8: operation 0 %s when operation 1 failed)\n", done ? "made" : "not made");
	file_is_model(done ? "operation 0 made before the failure" : "operation 0 not made before the failure");
	free(now);

	step = "cuMemcpy3DBatchAsync (12.8) from m, an operation that fails";
	device_fill(d, 20);
	CUDA_MEMCPY3D_BATCH_OP ops[2];
	ops[0] = op3d(operand(m + m_at(0, 0, 0), MPITCH, MROWS), operand(d, DPITCH, DROWS), W, H, D,
		      CU_MEMCPY_SRC_ACCESS_ORDER_STREAM);
	ops[1] = op3d(operand(d2 + NB - 100, 0, 0), operand(d + half, 0, 0), PAGE, 1, 1,
		      CU_MEMCPY_SRC_ACCESS_ORDER_STREAM);
	fail = 77;
	rc = batch3d(2, ops, &fail, 0, (CUstream)s);
	CHECK(rc == CUDA_ERROR_INVALID_VALUE && fail == 1,
	      "a 3-D batch whose operation 1 reads past a device buffer returned %d, failIdx %zu; want %d, 1",
	      (int)rc, fail, (int)CUDA_ERROR_INVALID_VALUE);
	CUDA_OK(cudaStreamSynchronize(s));
	file_is_model(step);

	step = "cuMemcpy3DBatchAsync (12.8) from m";
	fill(m, 0, NB, 21);
	fill(model, 0, NB, 21);
	ops[1] = op3d(operand(d2 + half, 0, 0), operand(d + half, 0, 0), half, 1, 1,
		      CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL);
	device_fill(d, 20);
	device_fill(d2, 22);
	fail = 77;
	CU_OK(batch3d(2, ops, &fail, 0, (CUstream)s));
	CUDA_OK(cudaStreamSynchronize(s));
	want_box_from_model(20);
	fill(want, half, NB, 22);
	device_is(step, d);
}

/* Stream order, with no host sync between the kernel and the copy: a
 * copy from m after a kernel that wrote m carries the kernel's bytes, and
 * a copy into m lands after them, whatever the form; the legacy stream's
 * rules order a synchronous copy after a blocking stream's kernel, and a
 * blocking stream's batch after a legacy-stream kernel. */
static void stream_order(cudaStream_t s)
{
	const size_t half = NB / 2;

	step = "cudaMemcpyAsync m -> d right after a kernel on the stream wrote m";
	device_fill(d, 25);
	SIMGPU_LAUNCH(fill_pat, 16, 256, 0, s)(m, 0ull, (unsigned long long)NB, 26);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaMemcpyAsync(d, m, NB, cudaMemcpyHostToDevice, s));
	CUDA_OK(cudaStreamSynchronize(s));
	fill(model, 0, NB, 26);
	memcpy(want, model, NB);
	device_is(step, d);

	step = "cudaMemcpyAsync m -> malloc right after a kernel on the stream wrote m";
	memset(h, 0, NB);
	SIMGPU_LAUNCH(fill_pat, 16, 256, 0, s)(m, 0ull, (unsigned long long)NB, 27);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaMemcpyAsync(h, m, NB, cudaMemcpyHostToHost, s));
	CUDA_OK(cudaStreamSynchronize(s));
	fill(model, 0, NB, 27);
	same(step, h, model, NB);

	step = "cudaMemcpyAsync malloc -> m right after a kernel on the stream wrote m (the copy's bytes win)";
	fill(h, 0, NB, 28);
	SIMGPU_LAUNCH(fill_pat, 16, 256, 0, s)(m, 0ull, (unsigned long long)NB, 29);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaMemcpyAsync(m, h, half, cudaMemcpyHostToHost, s));
	CUDA_OK(cudaStreamSynchronize(s));
	fill(model, 0, half, 28);
	fill(model, half, NB, 29);
	file_is_model(step);

	step = "cuMemcpyHtoD (legacy stream) from m right after a kernel on a blocking stream wrote m";
	device_fill(d, 30);
	SIMGPU_LAUNCH(fill_pat, 16, 256, 0, s)(m, 0ull, (unsigned long long)NB, 31);
	CUDA_OK(cudaGetLastError());
	CU_OK(cuMemcpyHtoD((CUdeviceptr)d, m, NB));
	fill(model, 0, NB, 31);
	memcpy(want, model, NB);
	device_is(step, d);

	step = "cuMemcpy3DBatchAsync on a blocking stream from m right after a legacy-stream kernel wrote m";
	device_fill(d, 32);
	SIMGPU_LAUNCH(fill_pat, 16, 256, 0, 0)(m, 0ull, (unsigned long long)NB, 33);
	CUDA_OK(cudaGetLastError());
	CUDA_MEMCPY3D_BATCH_OP op = op3d(operand(m + m_at(0, 0, 0), MPITCH, MROWS), operand(d, DPITCH, DROWS), W,
					 H, D, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM);
	CU_OK(cuMemcpy3DBatchAsync(1, &op, 0, (CUstream)s));
	CUDA_OK(cudaStreamSynchronize(s));
	fill(model, 0, NB, 33);
	want_box_from_model(32);
	device_is(step, d);

	step = "cuMemcpy3DBatchAsync malloc -> m right after a kernel on the stream wrote m (the copy's bytes win)";
	fill(h, 0, NB, 34);
	SIMGPU_LAUNCH(fill_pat, 16, 256, 0, s)(m, 0ull, (unsigned long long)NB, 35);
	CUDA_OK(cudaGetLastError());
	op = op3d(operand(h, 0, 0), operand(m, 0, 0), half, 1, 1, CU_MEMCPY_SRC_ACCESS_ORDER_ANY);
	CU_OK(cuMemcpy3DBatchAsync(1, &op, 0, (CUstream)s));
	CUDA_OK(cudaStreamSynchronize(s));
	fill(model, 0, half, 34);
	fill(model, half, NB, 35);
	file_is_model(step);
}

int main(int argc, char **argv)
{
	watchdog(60);
	CUDA_OK(cudaSetDevice(0));
	CUDA_OK(cudaFree(0));
	fd = make_file(NB, NULL);
	m = (unsigned char *)map_file(fd, NB);
	CUDA_OK(cudaMalloc((void **)&d, NB));
	CUDA_OK(cudaMalloc((void **)&d2, NB));
	h = (unsigned char *)malloc(NB);
	model = (unsigned char *)calloc(1, NB);
	want = (unsigned char *)malloc(NB);
	cudaStream_t s;
	CUDA_OK(cudaStreamCreate(&s));

	if (argc > 1 && strcmp(argv[1], "stream_order") == 0) {
		stream_order(s); /* alone, to see each of its steps fail */
	} else {
		copies_3d(s);
		peer_copies_3d(s);
		batch_3d(s);
		batches_12080(s);
		stream_order(s);
	}

	CUDA_OK(cudaStreamDestroy(s));
	CUDA_OK(cudaFree(d));
	CUDA_OK(cudaFree(d2));
	printf("ok copies_3d\n");
	return 0;
}
