/* CUDA calls that take host pointers, when the host memory is a managed
 * mapping (DESIGN §3.2: "CUDA calls that take host pointers treat a
 * mapping as the host memory it is").
 *
 * Without the shim a mapped file is pageable host memory. With it, the
 * vmm backing gives the region's own address to the driver as device
 * memory, so the driver would take a copy from the mapping for a copy
 * from the stale device replica, and one into it for a store the CPU
 * never sees. Whatever the backing, a copy is also a CPU access of the
 * region and must follow the protocol:
 *  - a copy *from* a region reads the CPU's bytes. Synchronous or not,
 *    it first waits for the work before it on its stream and releases the
 *    device (the kernels before it in stream order wrote the region:
 *    their bytes are what a copy after them reads), as the driver may
 *    wait for the stream before it stages pageable memory.
 *  - a copy *into* a region is a CPU write: the bytes come down into a
 *    bounce buffer, the device releases what its kernels wrote (they ran
 *    before the copy in stream order, so the copy's bytes must win), and
 *    the CPU stores them through the program's mapping, where the write
 *    tracking records them.
 * The shim's own transfers never come here (they call the driver
 * directly). Host registration of a mapping is remembered, not passed on
 * (its address may be device memory to the driver): pointer queries then
 * answer as for registered host memory, and copies are bounced as above.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cudaTypedefs.h>

#include "backend_cuda.h"
#include "gpu.h"

#define BOUNCE_BYTES (16u << 20)

static bool is_device_memory(const void *p)
{
	PFN_cuPointerGetAttribute_v4000 get = cuda_calls()->pointer_attribute;
	unsigned int type = 0;
	return get && get(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)p) == CUDA_SUCCESS &&
	       (type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_ARRAY);
}

bool gpu_is_mapped_host(const void *p, size_t n)
{
	return p && mapping_any() && mapping_overlaps(p, n ? n : 1);
}

/* The work before this point on `stream` is done and the device has
 * released: what a copy that reads or writes a region after that work
 * must see first. An event recorded on the stream is an operation of it,
 * so it also follows what the stream's rules put before it (on the legacy
 * stream, the blocking streams' earlier work; on a blocking stream, the
 * legacy stream's), where a stream sync would wait only for the stream's
 * own queue. */
CUresult gpu_copy_settle(CUstream stream)
{
	PFN_cuEventCreate_v2000 create = cuda_calls()->event_create;
	PFN_cuEventRecord_v2000 record = cuda_calls()->event_record;
	PFN_cuEventSynchronize_v2000 sync = cuda_calls()->event_synchronize;
	PFN_cuEventDestroy_v4000 destroy = cuda_calls()->event_destroy;
	if (!create || !record || !sync || !destroy)
		return CUDA_ERROR_NOT_INITIALIZED;
	/* A capturing stream runs nothing now: the copy is refused there
	 * (refused_by_capture), nothing to wait for. */
	PFN_cuStreamIsCapturing_v10000 capturing = cuda_calls()->stream_is_capturing;
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	if (capturing && (capturing(stream, &st) != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE))
		return CUDA_SUCCESS;
	CUevent done;
	CUresult rc = create(&done, CU_EVENT_DISABLE_TIMING);
	if (rc != CUDA_SUCCESS)
		return rc;
	rc = record(done, stream);
	if (rc == CUDA_SUCCESS)
		rc = sync(done);
	destroy(done);
	if (rc != CUDA_SUCCESS)
		return rc;
	return gpu_after_sync(GPU_SYNC_STREAM, CUDA_SUCCESS);
}

static CUresult host_to_device(CUdeviceptr dst, const uint8_t *src, size_t n, CUstream stream)
{
	PFN_cuMemcpyHtoDAsync_v3020 copy = cuda_calls()->memcpy_htod_async;
	if (!copy)
		return CUDA_ERROR_NOT_INITIALIZED;
	uint8_t *bounce = malloc(n < BOUNCE_BYTES ? n : BOUNCE_BYTES);
	if (!bounce)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult rc = CUDA_SUCCESS;
	for (size_t done = 0; done < n && rc == CUDA_SUCCESS;) {
		size_t c = n - done < BOUNCE_BYTES ? n - done : BOUNCE_BYTES;
		memcpy(bounce, src + done, c);
		/* Pageable memory: the driver has taken the bytes when it
		 * returns, so the buffer is free again. */
		rc = copy(dst + done, bounce, c, stream);
		done += c;
	}
	free(bounce);
	return rc;
}

static CUresult device_to_host(uint8_t *dst, CUdeviceptr src, size_t n, CUstream stream)
{
	PFN_cuMemcpyDtoHAsync_v3020 copy = cuda_calls()->memcpy_dtoh_async;
	PFN_cuStreamSynchronize_v2000 sync = cuda_calls()->stream_synchronize;
	if (!copy || !sync)
		return CUDA_ERROR_NOT_INITIALIZED;
	uint8_t *bounce = malloc(n < BOUNCE_BYTES ? n : BOUNCE_BYTES);
	if (!bounce)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult rc = CUDA_SUCCESS;
	for (size_t done = 0; done < n && rc == CUDA_SUCCESS;) {
		size_t c = n - done < BOUNCE_BYTES ? n - done : BOUNCE_BYTES;
		rc = copy(bounce, src + done, c, stream);
		if (rc == CUDA_SUCCESS)
			rc = sync(stream); /* the bytes are in the bounce buffer */
		/* Before the first store: the kernels before the copy release
		 * what they wrote, so the copy's bytes land after theirs. */
		if (rc == CUDA_SUCCESS && done == 0)
			rc = gpu_after_sync(GPU_SYNC_COPY, CUDA_SUCCESS);
		if (rc == CUDA_SUCCESS)
			memcpy(dst + done, bounce, c);
		done += c;
	}
	free(bounce);
	return rc;
}

/* A copy the shim makes runs when called: a stream that captures a graph
 * would not hold it, and the graph would replay without it. Refused, with
 * the capture invalidated (a query of a capturing stream does that), so no
 * graph that lacks the copy can be launched. The legacy stream while a
 * blocking stream captures: the driver's own answer. */
static bool refused_by_capture(CUstream stream, size_t n, bool to_mapping, CUresult *rc)
{
	PFN_cuStreamIsCapturing_v10000 is = cuda_calls()->stream_is_capturing;
	if (!is)
		return false;
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	CUresult r = is(stream, &st);
	if (r == CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_NONE)
		return false;
	if (r == CUDA_SUCCESS) {
		PFN_cuStreamQuery_v2000 query = cuda_calls()->stream_query;
		if (query)
			(void)query(stream);
		r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	gaia_warn("a copy of %zu bytes %s a mapped file on a stream that is capturing a graph: the shim makes "
		  "such copies itself, when they are called, so a graph cannot hold one; refused (%s) and the "
		  "capture invalidated. Make the copy outside the capture, or read the mapping in a kernel",
		  n, to_mapping ? "into" : "from", r == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
							? "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"
							: "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED");
	*rc = r;
	return true;
}

bool gpu_copy_1d(void *dst, const void *src, size_t n, enum gpu_copy_side dst_side,
		 enum gpu_copy_side src_side, CUstream stream, bool settled, CUresult *rc)
{
	bool src_mapped = src_side != GPU_COPY_DEVICE && gpu_is_mapped_host(src, n);
	bool dst_mapped = dst_side != GPU_COPY_DEVICE && gpu_is_mapped_host(dst, n);
	if (!n || (!src_mapped && !dst_mapped))
		return false;
	/* A range only partly in a mapping, or a destination mapping without
	 * PROT_WRITE: refused, as the driver refuses host memory it cannot
	 * reach (the CPU would fault on it here). */
	if ((src_mapped && !mapping_within_one(src, n, false)) || (dst_mapped && !mapping_within_one(dst, n, true))) {
		*rc = CUDA_ERROR_INVALID_VALUE;
		return true;
	}
	if (refused_by_capture(stream, n, dst_mapped, rc))
		return true;
	gpu_hook_depth++;
	bool src_dev = src_side == GPU_COPY_DEVICE ||
		       (src_side == GPU_COPY_UNIFIED && !src_mapped && is_device_memory(src));
	bool dst_dev = dst_side == GPU_COPY_DEVICE ||
		       (dst_side == GPU_COPY_UNIFIED && !dst_mapped && is_device_memory(dst));
	CUresult r = CUDA_SUCCESS;
	/* A copy from a region, and one between host memory (a CPU store
	 * into a region), reads and writes after the work before it on its
	 * stream: the shim waits for that work, as the driver may for
	 * pageable memory (CUDA's API synchronization behavior notes), and
	 * the device releases first. A copy from the device into a region
	 * is ordered on the stream itself (device_to_host). */
	if (!settled && (src_mapped || (!dst_dev && !src_dev)))
		r = gpu_copy_settle(stream);
	if (r != CUDA_SUCCESS) {
		/* the stream failed: the copy is not made */
	} else if (dst_dev) {
		r = host_to_device((CUdeviceptr)(uintptr_t)dst, src, n, stream);
	} else if (src_dev) {
		r = device_to_host(dst, (CUdeviceptr)(uintptr_t)src, n, stream);
	} else {
		/* Host to host: the CPU copies; stores into a region are the
		 * program's own writes. */
		memmove(dst, src, n);
	}
	gpu_hook_depth--;
	*rc = r;
	return true;
}

/* --- memsets and hints on a mapping --- */

static void store_pattern(uint8_t *dst, uint32_t value, unsigned elem, size_t count)
{
	if (elem == 1) {
		memset(dst, (int)(value & 0xff), count);
		return;
	}
	for (size_t i = 0; i < count; i++) {
		if (elem == 2) {
			uint16_t v = (uint16_t)value;
			memcpy(dst + 2 * i, &v, 2);
		} else {
			memcpy(dst + 4 * i, &value, 4);
		}
	}
}

bool gpu_memset_mapped(CUdeviceptr dst, size_t pitch, uint32_t value, unsigned elem, size_t width,
		       size_t height, CUstream stream, CUresult *rc)
{
	size_t row, rows, span;
	if (!width || !height || __builtin_mul_overflow(width, (size_t)elem, &row) ||
	    __builtin_mul_overflow(height - 1, pitch, &rows) || __builtin_add_overflow(rows, row, &span) ||
	    (height > 1 && pitch < row))
		return false;
	uint8_t *p = (uint8_t *)(uintptr_t)dst;
	if (!gpu_is_mapped_host(p, span))
		return false;
	/* What the driver would refuse for host memory it cannot write: part
	 * of the range outside the mapping, a mapping without PROT_WRITE, a
	 * misaligned element. */
	if (dst % elem || (height > 1 && pitch % elem) || !mapping_within_one(p, span, true)) {
		*rc = CUDA_ERROR_INVALID_VALUE;
		return true;
	}
	if (refused_by_capture(stream, span, true, rc))
		return true;
	/* Host memory a kernel before it in stream order may have written:
	 * those bytes reach the CPU first, then the CPU stores the pattern
	 * through the program's mapping (its own writes, recorded). */
	gpu_hook_depth++;
	CUresult r = gpu_copy_settle(stream);
	for (size_t y = 0; r == CUDA_SUCCESS && y < height; y++)
		store_pattern(p + y * pitch, value, elem, width);
	gpu_hook_depth--;
	*rc = r;
	return true;
}

CUresult gpu_prefetch_mapped(CUdeviceptr ptr, size_t n, int device, CUstream stream)
{
	PFN_cuStreamIsCapturing_v10000 capturing = cuda_calls()->stream_is_capturing;
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	if (capturing && capturing(stream, &st) == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE)
		return CUDA_SUCCESS; /* a hint: a graph's launch acquires when it runs */
	/* The device's copy made current now, as a launch there would (README,
	 * "Copies, registration and pointer queries"). Only a device this
	 * thread's context is on can be served; for another one the launch
	 * there does it. */
	int err = gpu_device_acquire(device, (const void *)(uintptr_t)ptr, n);
	return err && err != -ENODEV ? cuda_result_of(err) : CUDA_SUCCESS;
}

/* --- host registration of a mapping --- */

struct registration {
	uintptr_t start;
	size_t len;
};
static struct registration *registered;
static size_t nregistered, capregistered;
static pthread_mutex_t registered_lock = PTHREAD_MUTEX_INITIALIZER;

static bool registered_at(const void *p, struct registration *out)
{
	uintptr_t a = (uintptr_t)p;
	bool found = false;
	pthread_mutex_lock(&registered_lock);
	for (size_t i = 0; i < nregistered && !found; i++) {
		if (a >= registered[i].start && a < registered[i].start + registered[i].len) {
			*out = registered[i];
			found = true;
		}
	}
	pthread_mutex_unlock(&registered_lock);
	return found;
}

CUresult gpu_host_register(void *p, size_t len)
{
	struct registration r;
	if (!len)
		return CUDA_ERROR_INVALID_VALUE;
	if (registered_at(p, &r) || registered_at((char *)p + len - 1, &r))
		return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
	pthread_mutex_lock(&registered_lock);
	CUresult rc = CUDA_SUCCESS;
	if (nregistered == capregistered) {
		size_t cap = capregistered ? 2 * capregistered : 16;
		struct registration *g = realloc(registered, cap * sizeof(*g));
		if (!g)
			rc = CUDA_ERROR_OUT_OF_MEMORY;
		else {
			registered = g;
			capregistered = cap;
		}
	}
	if (rc == CUDA_SUCCESS)
		registered[nregistered++] = (struct registration){(uintptr_t)p, len};
	pthread_mutex_unlock(&registered_lock);
	if (rc == CUDA_SUCCESS)
		gaia_info("host registration of the mapped range %p+%zu kept by the shim: copies "
			  "to and from it go through the page cache", p, len);
	return rc;
}

bool gpu_host_unregister(void *p)
{
	bool found = false;
	pthread_mutex_lock(&registered_lock);
	for (size_t i = 0; i < nregistered && !found; i++) {
		if (registered[i].start == (uintptr_t)p) {
			registered[i] = registered[--nregistered];
			found = true;
		}
	}
	pthread_mutex_unlock(&registered_lock);
	return found;
}

bool gpu_host_device_pointer(CUdeviceptr *out, void *p)
{
	struct registration r;
	if (!registered_at(p, &r))
		return false;
	*out = (CUdeviceptr)(uintptr_t)p;
	return true;
}

/* Pointer queries: a mapping answers as the host memory it is. The
 * driver is asked about a byte of pageable memory of the shim's own
 * (what an unregistered mapping is without the shim); a registered one
 * then has its memory type and pointers filled in. */
static unsigned char pageable_probe[64];

CUdeviceptr gpu_pointer_query_target(CUdeviceptr ptr, bool *registered_out)
{
	struct registration r;
	*registered_out = false;
	if (!gpu_is_mapped_host((const void *)(uintptr_t)ptr, 1))
		return ptr;
	*registered_out = registered_at((const void *)(uintptr_t)ptr, &r);
	return (CUdeviceptr)(uintptr_t)pageable_probe;
}

CUresult gpu_pointer_fixup(CUpointer_attribute attr, void *data, CUdeviceptr ptr, CUresult rc)
{
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned int *)data = CU_MEMORYTYPE_HOST;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		*(void **)data = (void *)(uintptr_t)ptr;
		return CUDA_SUCCESS;
	default:
		return rc;
	}
}
