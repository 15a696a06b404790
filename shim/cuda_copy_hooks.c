/* The CUDA copy wrappers (DESIGN §3.5, §3.6): every copy a program can ask
 * the driver for — 1-D, pitched 2-D and 3-D, peer, batches of each — with
 * a managed mapping on a host side is made by the shim (gpu_copy.c) so
 * that it reads and writes the page cache's current bytes; the others go
 * to the driver, and those that wait for the host are host syncs. Host
 * registration of a mapping, and pointer queries about it, are the
 * shim's too. Rows: CUDA_COPY_HOOK_TABLE (cuda_hooks.h). */
#define _GNU_SOURCE
#include "cuda_hooks.h"

#include <stdlib.h>
#include <string.h>

/* Host memory the driver does not know (neither pinned, registered nor
 * device/managed memory): pageable. Asked of the real driver. */
static bool is_pageable(const void *p)
{
	PFN_cuPointerGetAttribute_v4000 get = cuda_calls()->pointer_attribute;
	unsigned int type = 0;

	return !get || get(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS;
}

static bool is_device(const void *p)
{
	PFN_cuPointerGetAttribute_v4000 get = cuda_calls()->pointer_attribute;
	unsigned int type = 0;

	return get && get(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)p) == CUDA_SUCCESS &&
	       (type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_ARRAY);
}

/* Which copies are host syncs follows the driver's "API synchronization
 * behavior" notes. Synchronous copies: host to device waits for the
 * stream before it starts, device to host returns when done, host to host
 * is fully synchronous; only device to device leaves the host running.
 * Async copies: only device to pageable host memory returns after the
 * copy (so after the work before it); to pinned memory it is truly
 * asynchronous. */
bool memcpy_sync_is_host_sync(CUdeviceptr dst, CUdeviceptr src)
{
	return !(is_device((const void *)(uintptr_t)dst) && is_device((const void *)(uintptr_t)src));
}

static bool memcpy_async_is_host_sync(CUdeviceptr dst, CUdeviceptr src)
{
	return is_pageable((const void *)(uintptr_t)dst) && !is_pageable((const void *)(uintptr_t)src);
}

/* A copy whose host side is a mapping is made by gpu_copy_1d (gpu.h),
 * whatever the nesting: the driver must never see the mapping's address
 * as a host pointer (it may be device memory to it). */
#define COPY_1D(dst, src, n, dside, sside, stream)                                                \
	do {                                                                                     \
		CUresult crc_;                                                                   \
		if (gpu_copy_1d((void *)(uintptr_t)(dst), (const void *)(uintptr_t)(src), (n), \
				(dside), (sside), (stream), false, &crc_))                       \
			return crc_;                                                             \
	} while (0)

GAIA_EXPORT CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
	__typeof__(&cuMemcpy) real = REAL_OF(cuMemcpy);

	COPY_1D(dst, src, ByteCount, GPU_COPY_UNIFIED, GPU_COPY_UNIFIED, NULL);

	SYNC(real, real(dst, src, ByteCount), GPU_SYNC_COPY,
	     rc_ == CUDA_SUCCESS && memcpy_sync_is_host_sync(dst, src));
}

GAIA_EXPORT CUresult CUDAAPI cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
	__typeof__(&cuMemcpy_ptds) real = REAL_OF(cuMemcpy_ptds);

	COPY_1D(dst, src, ByteCount, GPU_COPY_UNIFIED, GPU_COPY_UNIFIED, CU_STREAM_PER_THREAD);

	SYNC(real, real(dst, src, ByteCount), GPU_SYNC_COPY,
	     rc_ == CUDA_SUCCESS && memcpy_sync_is_host_sync(dst, src));
}

GAIA_EXPORT CUresult CUDAAPI cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
	__typeof__(&cuMemcpyDtoH_v2) real = REAL_OF(cuMemcpyDtoH_v2);

	COPY_1D(dstHost, srcDevice, ByteCount, GPU_COPY_HOST, GPU_COPY_DEVICE, NULL);

	SYNC(real, real(dstHost, srcDevice, ByteCount), GPU_SYNC_COPY, true);
}

GAIA_EXPORT CUresult CUDAAPI cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
	__typeof__(&cuMemcpyDtoH_v2_ptds) real = REAL_OF(cuMemcpyDtoH_v2_ptds);

	COPY_1D(dstHost, srcDevice, ByteCount, GPU_COPY_HOST, GPU_COPY_DEVICE, CU_STREAM_PER_THREAD);

	SYNC(real, real(dstHost, srcDevice, ByteCount), GPU_SYNC_COPY, true);
}

GAIA_EXPORT CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
	__typeof__(&cuMemcpyHtoD_v2) real = REAL_OF(cuMemcpyHtoD_v2);

	COPY_1D(dstDevice, srcHost, ByteCount, GPU_COPY_DEVICE, GPU_COPY_HOST, NULL);

	SYNC(real, real(dstDevice, srcHost, ByteCount), GPU_SYNC_COPY, true);
}

GAIA_EXPORT CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
	__typeof__(&cuMemcpyHtoD_v2_ptds) real = REAL_OF(cuMemcpyHtoD_v2_ptds);

	COPY_1D(dstDevice, srcHost, ByteCount, GPU_COPY_DEVICE, GPU_COPY_HOST, CU_STREAM_PER_THREAD);

	SYNC(real, real(dstDevice, srcHost, ByteCount), GPU_SYNC_COPY, true);
}

GAIA_EXPORT CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
						   CUstream hStream)
{
	__typeof__(&cuMemcpyDtoHAsync_v2) real = REAL_OF(cuMemcpyDtoHAsync_v2);

	COPY_1D(dstHost, srcDevice, ByteCount, GPU_COPY_HOST, GPU_COPY_DEVICE, hStream);

	SYNC(real, real(dstHost, srcDevice, ByteCount, hStream), GPU_SYNC_COPY,
	     rc_ == CUDA_SUCCESS && is_pageable(dstHost));
}

GAIA_EXPORT CUresult CUDAAPI cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
							CUstream hStream)
{
	__typeof__(&cuMemcpyDtoHAsync_v2_ptsz) real = REAL_OF(cuMemcpyDtoHAsync_v2_ptsz);

	COPY_1D(dstHost, srcDevice, ByteCount, GPU_COPY_HOST, GPU_COPY_DEVICE, hStream ? hStream : CU_STREAM_PER_THREAD);

	SYNC(real, real(dstHost, srcDevice, ByteCount, hStream), GPU_SYNC_COPY,
	     rc_ == CUDA_SUCCESS && is_pageable(dstHost));
}

GAIA_EXPORT CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
	__typeof__(&cuMemcpyAsync) real = REAL_OF(cuMemcpyAsync);

	COPY_1D(dst, src, ByteCount, GPU_COPY_UNIFIED, GPU_COPY_UNIFIED, hStream);

	SYNC(real, real(dst, src, ByteCount, hStream), GPU_SYNC_COPY,
	     rc_ == CUDA_SUCCESS && memcpy_async_is_host_sync(dst, src));
}

GAIA_EXPORT CUresult CUDAAPI cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
	__typeof__(&cuMemcpyAsync_ptsz) real = REAL_OF(cuMemcpyAsync_ptsz);

	COPY_1D(dst, src, ByteCount, GPU_COPY_UNIFIED, GPU_COPY_UNIFIED, hStream ? hStream : CU_STREAM_PER_THREAD);

	SYNC(real, real(dst, src, ByteCount, hStream), GPU_SYNC_COPY,
	     rc_ == CUDA_SUCCESS && memcpy_async_is_host_sync(dst, src));
}

/* A batch of 1-D copies (cuMemcpyBatchAsync; CUDA 13 dropped failIdx).
 * Without a mapping among its operands it goes to the driver as it is.
 * With one, the driver would take the mapping's address for the device
 * replica's (vmm) or read pages the CPU changed since the last launch:
 * the copies go one by one through cuMemcpyAsync above (the driver may run
 * a batch's copies in any order, so one by one is one of the orders it may
 * pick), after the checks cuda.h names (not the legacy stream, a valid
 * source order, attribute indices from 0 upwards) so that a refused batch
 * copies nothing. A source in a mapping is read as cuMemcpyAsync reads
 * one: after the stream's earlier work, and the release of what its
 * kernels wrote (every source order allows that). The attributes'
 * location hints and flags only tune speed. */
static bool batch_touches_mapping(const CUdeviceptr *dsts, const CUdeviceptr *srcs, const size_t *sizes,
				  size_t count)
{
	if (!dsts || !srcs || !sizes || !mapping_any())
		return false;
	for (size_t i = 0; i < count; i++)
		if (gpu_is_mapped_host((const void *)(uintptr_t)dsts[i], sizes[i]) ||
		    gpu_is_mapped_host((const void *)(uintptr_t)srcs[i], sizes[i]))
			return true;
	return false;
}

static CUresult batch_one_by_one(const CUdeviceptr *dsts, const CUdeviceptr *srcs, const size_t *sizes,
				 size_t count, const CUmemcpyAttributes *attrs, const size_t *idxs, size_t nattrs,
				 size_t *fail_idx, CUstream stream, bool per_thread)
{
	if (fail_idx)
		*fail_idx = SIZE_MAX;
	if (!count || !attrs || !idxs || !nattrs || nattrs > count || idxs[0] != 0 ||
	    stream == CU_STREAM_LEGACY || (!per_thread && !stream))
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t a = 0; a < nattrs; a++) {
		if ((a && idxs[a] <= idxs[a - 1]) || idxs[a] >= count)
			return CUDA_ERROR_INVALID_VALUE;
		if (attrs[a].srcAccessOrder != CU_MEMCPY_SRC_ACCESS_ORDER_STREAM &&
		    attrs[a].srcAccessOrder != CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL &&
		    attrs[a].srcAccessOrder != CU_MEMCPY_SRC_ACCESS_ORDER_ANY)
			return CUDA_ERROR_INVALID_VALUE;
	}
	for (size_t i = 0; i < count; i++) {
		CUresult rc = per_thread ? cuMemcpyAsync_ptsz(dsts[i], srcs[i], sizes[i], stream)
					 : cuMemcpyAsync(dsts[i], srcs[i], sizes[i], stream);
		if (rc != CUDA_SUCCESS) {
			if (fail_idx)
				*fail_idx = i;
			return rc;
		}
	}
	return CUDA_SUCCESS;
}

#define BATCH_HOOK(abi, per_thread, with_fail, ...)                                                         \
	GAIA_EXPORT CUresult CUDAAPI abi(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,  \
					 CUmemcpyAttributes *attrs, size_t *idxs, size_t nattrs,              \
					 __VA_ARGS__)                                                         \
	{                                                                                                    \
		if (batch_touches_mapping(dsts, srcs, sizes, count))                                         \
			return batch_one_by_one(dsts, srcs, sizes, count, attrs, idxs, nattrs,               \
						BATCH_FAIL_##with_fail, hStream, per_thread);                \
		__typeof__(&abi) real = REAL_OF(abi);                                                        \
		if (!real)                                                                                   \
			return CUDA_ERROR_NOT_SUPPORTED;                                                     \
		return real(dsts, srcs, sizes, count, attrs, idxs, nattrs, BATCH_ARGS_##with_fail);         \
	}
#define BATCH_FAIL_1 failIdx
#define BATCH_FAIL_0 NULL
#define BATCH_ARGS_1 failIdx, hStream
#define BATCH_ARGS_0 hStream
BATCH_HOOK(cuMemcpyBatchAsync, false, 1, size_t *failIdx, CUstream hStream)
BATCH_HOOK(cuMemcpyBatchAsync_ptsz, true, 1, size_t *failIdx, CUstream hStream)
BATCH_HOOK(cuMemcpyBatchAsync_v2, false, 0, CUstream hStream)
BATCH_HOOK(cuMemcpyBatchAsync_v2_ptsz, true, 0, CUstream hStream)

/* Host to device, asynchronous: not a host sync (pageable memory is
 * staged at the call; one from a mapping waits for the stream, in
 * gpu_copy_1d). */
GAIA_EXPORT CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
						   CUstream hStream)
{
	__typeof__(&cuMemcpyHtoDAsync_v2) real = REAL_OF(cuMemcpyHtoDAsync_v2);

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	COPY_1D(dstDevice, srcHost, ByteCount, GPU_COPY_DEVICE, GPU_COPY_HOST, hStream);
	return real(dstDevice, srcHost, ByteCount, hStream);
}

GAIA_EXPORT CUresult CUDAAPI cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost,
							size_t ByteCount, CUstream hStream)
{
	__typeof__(&cuMemcpyHtoDAsync_v2_ptsz) real = REAL_OF(cuMemcpyHtoDAsync_v2_ptsz);

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	COPY_1D(dstDevice, srcHost, ByteCount, GPU_COPY_DEVICE, GPU_COPY_HOST,
		hStream ? hStream : CU_STREAM_PER_THREAD);
	return real(dstDevice, srcHost, ByteCount, hStream);
}

/* A pitched copy's host side, when it is one: [start, start + bytes). */
static bool pitched_host_side(CUmemorytype type, const void *host, CUdeviceptr unified, size_t x, size_t y,
			      size_t z, size_t pitch, size_t height, size_t width, size_t rows, size_t depth)
{
	const uint8_t *base = type == CU_MEMORYTYPE_HOST      ? host
			      : type == CU_MEMORYTYPE_UNIFIED ? (const uint8_t *)(uintptr_t)unified
							      : NULL;
	if (!base || !width || !rows || !depth)
		return false;
	size_t plane = pitch * height; /* cuda.h: start = base + (z * height + y) * pitch + x */
	const uint8_t *start = base + x + y * pitch + z * plane;
	size_t bytes = (depth - 1) * plane + (rows - 1) * pitch + width;
	return gpu_is_mapped_host(start, bytes);
}

/* One side of a pitched copy. */
struct pitched_side {
	CUmemorytype type;
	uintptr_t base; /* host pointer or device address */
	size_t x, y, z, pitch, height;
	CUarray array; /* type CU_MEMORYTYPE_ARRAY */
};

static enum gpu_copy_side side_of(CUmemorytype type)
{
	return type == CU_MEMORYTYPE_HOST ? GPU_COPY_HOST
	       : type == CU_MEMORYTYPE_DEVICE ? GPU_COPY_DEVICE
					      : GPU_COPY_UNIFIED;
}

static uintptr_t row_of(const struct pitched_side *p, size_t y, size_t z)
{
	size_t plane = p->pitch * p->height;
	return p->base + p->x + (p->y + y) * p->pitch + (p->z + z) * plane;
}

/* One row of a pitched copy between host memory (or a mapping) and
 * anything a unified address names: the shim's when it touches a mapping
 * (gpu_copy_1d: acquired, bounced, released as cudaMemcpy's are), the
 * driver's otherwise, in the same stream order. */
static CUresult copy_row(uintptr_t to, enum gpu_copy_side to_side, uintptr_t from, enum gpu_copy_side from_side,
			 size_t width, CUstream order, CUstream stream, bool async, bool per_thread)
{
	__typeof__(&cuMemcpy) copy = per_thread ? REAL_OF(cuMemcpy_ptds) : REAL_OF(cuMemcpy);
	__typeof__(&cuMemcpyAsync) copy_async = per_thread ? REAL_OF(cuMemcpyAsync_ptsz) : REAL_OF(cuMemcpyAsync);
	CUresult rc;
	if (gpu_copy_1d((void *)to, (const void *)from, width, to_side, from_side, order, true, &rc))
		return rc;
	if (!copy || !copy_async)
		return CUDA_ERROR_NOT_INITIALIZED;
	gpu_hook_depth++;
	rc = async ? copy_async((CUdeviceptr)to, (CUdeviceptr)from, width, stream)
		   : copy((CUdeviceptr)to, (CUdeviceptr)from, width);
	gpu_hook_depth--;
	return rc;
}

/* A pitched copy between a CUDA array and host rows some of which are a
 * mapping's (an array has no address a row could be copied to): bounced
 * through a host buffer of the copy's bytes, after the work before it on
 * its stream. Into the array, the rows are read as a copy from the mapping
 * reads them (the device's writes released first), then the driver copies
 * the buffer into the array; out of it, the driver copies the array into
 * the buffer, then the rows are stored into the mapping as the CPU's own
 * writes. Complete when the call returns, Async forms too (as a copy from
 * pageable memory may be). */
static CUresult array_bounce(const struct pitched_side *src, const struct pitched_side *dst, size_t width,
			     size_t rows, size_t depth, CUstream order, CUstream stream, bool async, bool per_thread)
{
	__typeof__(&cuMemcpy3DAsync_v2) copy3d =
		per_thread ? REAL_OF(cuMemcpy3DAsync_v2_ptsz) : REAL_OF(cuMemcpy3DAsync_v2);
	PFN_cuStreamSynchronize_v2000 sync = cuda_calls()->stream_synchronize;
	if (!copy3d || !sync)
		return CUDA_ERROR_NOT_INITIALIZED;
	bool from_array = src->type == CU_MEMORYTYPE_ARRAY;
	const struct pitched_side *arr = from_array ? src : dst, *host = from_array ? dst : src;
	if (host->type == CU_MEMORYTYPE_ARRAY || !arr->array)
		return CUDA_ERROR_INVALID_VALUE;
	size_t plane, bytes;
	if (__builtin_mul_overflow(width, rows, &plane) || __builtin_mul_overflow(plane, depth, &bytes))
		return CUDA_ERROR_INVALID_VALUE;
	uint8_t *buf = malloc(bytes ? bytes : 1);
	if (!buf)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUDA_MEMCPY3D c = {.WidthInBytes = width, .Height = rows, .Depth = depth};
	if (from_array) {
		c.srcMemoryType = CU_MEMORYTYPE_ARRAY, c.srcArray = arr->array;
		c.srcXInBytes = arr->x, c.srcY = arr->y, c.srcZ = arr->z;
		c.dstMemoryType = CU_MEMORYTYPE_HOST, c.dstHost = buf, c.dstPitch = width, c.dstHeight = rows;
	} else {
		c.dstMemoryType = CU_MEMORYTYPE_ARRAY, c.dstArray = arr->array;
		c.dstXInBytes = arr->x, c.dstY = arr->y, c.dstZ = arr->z;
		c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = buf, c.srcPitch = width, c.srcHeight = rows;
	}
	enum gpu_copy_side host_side = side_of(host->type);
	CUresult rc = CUDA_SUCCESS;
	for (size_t z = 0; !from_array && rc == CUDA_SUCCESS && z < depth; z++)
		for (size_t y = 0; rc == CUDA_SUCCESS && y < rows; y++)
			rc = copy_row((uintptr_t)(buf + z * plane + y * width), GPU_COPY_HOST, row_of(host, y, z),
				      host_side, width, order, stream, false, per_thread);
	if (rc == CUDA_SUCCESS) {
		gpu_hook_depth++;
		rc = copy3d(&c, order);
		if (rc == CUDA_SUCCESS)
			rc = sync(order);
		gpu_hook_depth--;
	}
	for (size_t z = 0; from_array && rc == CUDA_SUCCESS && z < depth; z++)
		for (size_t y = 0; rc == CUDA_SUCCESS && y < rows; y++)
			rc = copy_row(row_of(host, y, z), host_side, (uintptr_t)(buf + z * plane + y * width),
				      GPU_COPY_HOST, width, order, stream, false, per_thread);
	free(buf);
	return rc;
}

/* A pitched copy with a mapping on a host side, row by row (copy_row);
 * one with a CUDA array on the other side through a buffer (array_bounce).
 * `stream`: the stream the copy is ordered on (CU_STREAM_PER_THREAD for
 * the per-thread forms' default), `async`: an Async form. */
static CUresult pitched_rows(const struct pitched_side *src, const struct pitched_side *dst, size_t width,
			     size_t rows, size_t depth, CUstream stream, bool async, bool per_thread)
{
	/* What cuda.h asks of a pitched copy: a pitch, if given, holds the
	 * row from its x; rows a plane, if given, hold the rows from y; a copy
	 * of more than one plane gives them (as the simulator asks). An
	 * array's extent is the driver's to check. */
	const struct pitched_side *sides[2] = {src, dst};
	for (int k = 0; k < 2; k++) {
		const struct pitched_side *p = sides[k];
		if (p->type != CU_MEMORYTYPE_ARRAY &&
		    ((p->pitch && p->pitch < width + p->x) || (p->height && p->height < rows + p->y) ||
		     (depth > 1 && !p->height)))
			return CUDA_ERROR_INVALID_VALUE;
	}
	CUstream order = per_thread && !stream ? CU_STREAM_PER_THREAD : stream;
	/* The work before the copy on its stream, once for all rows (each
	 * row the shim makes would wait for it). */
	CUresult settled = gpu_copy_settle(order);
	if (settled != CUDA_SUCCESS)
		return settled;
	if (src->type == CU_MEMORYTYPE_ARRAY || dst->type == CU_MEMORYTYPE_ARRAY)
		return array_bounce(src, dst, width, rows, depth, order, stream, async, per_thread);
	for (size_t z = 0; z < depth; z++) {
		for (size_t y = 0; y < rows; y++) {
			CUresult rc = copy_row(row_of(dst, y, z), side_of(dst->type), row_of(src, y, z),
					       side_of(src->type), width, order, stream, async, per_thread);
			if (rc != CUDA_SUCCESS)
				return rc;
		}
	}
	return CUDA_SUCCESS;
}

static struct pitched_side side2d(CUmemorytype type, const void *host, CUdeviceptr dev, CUarray array, size_t x,
				  size_t y, size_t pitch)
{
	return (struct pitched_side){type, type == CU_MEMORYTYPE_HOST ? (uintptr_t)host : (uintptr_t)dev,
				     x, y, 0, pitch, 0, array};
}

static CUresult copy2d_rows(const CUDA_MEMCPY2D *c, CUstream stream, bool async, bool per_thread)
{
	struct pitched_side src = side2d(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcXInBytes,
					 c->srcY, c->srcPitch);
	struct pitched_side dst = side2d(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstXInBytes,
					 c->dstY, c->dstPitch);
	return pitched_rows(&src, &dst, c->WidthInBytes, c->Height, 1, stream, async, per_thread);
}

static CUresult copy3d_rows(const CUDA_MEMCPY3D *c, CUstream stream, bool async, bool per_thread)
{
	if (c->srcLOD || c->dstLOD || c->reserved0 || c->reserved1)
		return CUDA_ERROR_INVALID_VALUE; /* cuda.h: must be 0 / NULL */
	struct pitched_side src = {c->srcMemoryType,
				   c->srcMemoryType == CU_MEMORYTYPE_HOST ? (uintptr_t)c->srcHost
									 : (uintptr_t)c->srcDevice,
				   c->srcXInBytes, c->srcY, c->srcZ, c->srcPitch, c->srcHeight, c->srcArray};
	struct pitched_side dst = {c->dstMemoryType,
				   c->dstMemoryType == CU_MEMORYTYPE_HOST ? (uintptr_t)c->dstHost
									 : (uintptr_t)c->dstDevice,
				   c->dstXInBytes, c->dstY, c->dstZ, c->dstPitch, c->dstHeight, c->dstArray};
	return pitched_rows(&src, &dst, c->WidthInBytes, c->Height, c->Depth, stream, async, per_thread);
}

static bool copy2d_mapped(const CUDA_MEMCPY2D *c)
{
	return c && (pitched_host_side(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcXInBytes, c->srcY, 0,
				       c->srcPitch, 0, c->WidthInBytes, c->Height, 1) ||
		     pitched_host_side(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstXInBytes, c->dstY, 0,
				       c->dstPitch, 0, c->WidthInBytes, c->Height, 1));
}

static bool copy3d_mapped(const CUDA_MEMCPY3D *c)
{
	return c && (pitched_host_side(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcXInBytes, c->srcY,
				       c->srcZ, c->srcPitch, c->srcHeight, c->WidthInBytes, c->Height,
				       c->Depth) ||
		     pitched_host_side(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstXInBytes, c->dstY,
				       c->dstZ, c->dstPitch, c->dstHeight, c->WidthInBytes, c->Height,
				       c->Depth));
}

/* Synchronous pitched copies are host syncs unless device to device. */
static bool pitched_is_host_sync(CUmemorytype src, CUmemorytype dst)
{
	return !(src == CU_MEMORYTYPE_DEVICE || src == CU_MEMORYTYPE_ARRAY) ||
	       !(dst == CU_MEMORYTYPE_DEVICE || dst == CU_MEMORYTYPE_ARRAY);
}

/* The synchronous forms are a sync when a host side is involved; a copy
 * with a mapping on a host side is the shim's, row by row, also under a
 * runtime hook (cudaMemcpy raises gpu_hook_depth and its runtime makes a
 * host-to-host copy a pitched one): as for the 1-D copies, only the shim's
 * own copies never have a mapped host side. */
#define PITCHED_SYNC_HOOK(name, type, mapped, rows_of, per_thread)                             \
	GAIA_EXPORT CUresult CUDAAPI name(const type *pCopy)                                       \
	{                                                                                          \
		__typeof__(&name) real = REAL_OF(name);                                            \
		if (!real)                                                                         \
			return CUDA_ERROR_NOT_INITIALIZED;                                         \
		if (mapped(pCopy))                                                                 \
			return rows_of(pCopy, NULL, false, per_thread);                            \
		SYNC(real, real(pCopy), GPU_SYNC_COPY,                                             \
		     rc_ == CUDA_SUCCESS &&                                                        \
			     pitched_is_host_sync(pCopy->srcMemoryType, pCopy->dstMemoryType));    \
	}
#define PITCHED_ASYNC_HOOK(name, type, mapped, rows_of, per_thread)                            \
	GAIA_EXPORT CUresult CUDAAPI name(const type *pCopy, CUstream hStream)                     \
	{                                                                                          \
		__typeof__(&name) real = REAL_OF(name);                                            \
		if (!real)                                                                         \
			return CUDA_ERROR_NOT_INITIALIZED;                                         \
		if (mapped(pCopy))                                                                 \
			return rows_of(pCopy, hStream, true, per_thread);                          \
		SYNC(real, real(pCopy, hStream), GPU_SYNC_COPY, false);                            \
	}

PITCHED_SYNC_HOOK(cuMemcpy2D_v2, CUDA_MEMCPY2D, copy2d_mapped, copy2d_rows, false)
PITCHED_SYNC_HOOK(cuMemcpy2D_v2_ptds, CUDA_MEMCPY2D, copy2d_mapped, copy2d_rows, true)
PITCHED_SYNC_HOOK(cuMemcpy2DUnaligned_v2, CUDA_MEMCPY2D, copy2d_mapped, copy2d_rows, false)
PITCHED_SYNC_HOOK(cuMemcpy2DUnaligned_v2_ptds, CUDA_MEMCPY2D, copy2d_mapped, copy2d_rows, true)
PITCHED_ASYNC_HOOK(cuMemcpy2DAsync_v2, CUDA_MEMCPY2D, copy2d_mapped, copy2d_rows, false)
PITCHED_ASYNC_HOOK(cuMemcpy2DAsync_v2_ptsz, CUDA_MEMCPY2D, copy2d_mapped, copy2d_rows, true)
PITCHED_SYNC_HOOK(cuMemcpy3D_v2, CUDA_MEMCPY3D, copy3d_mapped, copy3d_rows, false)
PITCHED_SYNC_HOOK(cuMemcpy3D_v2_ptds, CUDA_MEMCPY3D, copy3d_mapped, copy3d_rows, true)
PITCHED_ASYNC_HOOK(cuMemcpy3DAsync_v2, CUDA_MEMCPY3D, copy3d_mapped, copy3d_rows, false)
PITCHED_ASYNC_HOOK(cuMemcpy3DAsync_v2_ptsz, CUDA_MEMCPY3D, copy3d_mapped, copy3d_rows, true)

/* 3-D peer copies: a 3-D copy with a context on each side. With a mapping
 * on a host side it is made as cuMemcpy3D above (the device side's
 * address names its device under unified addressing); otherwise it goes
 * to the driver. */
static CUDA_MEMCPY3D peer_as_3d(const CUDA_MEMCPY3D_PEER *p)
{
	return (CUDA_MEMCPY3D){
		.srcXInBytes = p->srcXInBytes, .srcY = p->srcY, .srcZ = p->srcZ, .srcLOD = p->srcLOD,
		.srcMemoryType = p->srcMemoryType, .srcHost = p->srcHost, .srcDevice = p->srcDevice,
		.srcArray = p->srcArray, .srcPitch = p->srcPitch, .srcHeight = p->srcHeight,
		.dstXInBytes = p->dstXInBytes, .dstY = p->dstY, .dstZ = p->dstZ, .dstLOD = p->dstLOD,
		.dstMemoryType = p->dstMemoryType, .dstHost = p->dstHost, .dstDevice = p->dstDevice,
		.dstArray = p->dstArray, .dstPitch = p->dstPitch, .dstHeight = p->dstHeight,
		.WidthInBytes = p->WidthInBytes, .Height = p->Height, .Depth = p->Depth,
	};
}

static bool copy3d_peer_mapped(const CUDA_MEMCPY3D_PEER *c)
{
	if (!c)
		return false;
	CUDA_MEMCPY3D d = peer_as_3d(c);
	return copy3d_mapped(&d);
}

/* As for the 1-D peer copies (cuda_mem_hooks.c): the copy runs with the
 * device side's context current, so the stream waited for and the device
 * released are that context's. */
static CUresult copy3d_peer_rows(const CUDA_MEMCPY3D_PEER *c, CUstream stream, bool async, bool per_thread)
{
	if (c->srcLOD || c->dstLOD)
		return CUDA_ERROR_INVALID_VALUE;
	if (!c->srcContext || !c->dstContext)
		return CUDA_ERROR_INVALID_CONTEXT;
	CUDA_MEMCPY3D d = peer_as_3d(c);
	bool src_host = pitched_host_side(d.srcMemoryType, d.srcHost, d.srcDevice, d.srcXInBytes, d.srcY, d.srcZ,
					  d.srcPitch, d.srcHeight, d.WidthInBytes, d.Height, d.Depth);
	CUcontext ctx = src_host ? c->dstContext : c->srcContext, prev = NULL;
	PFN_cuCtxPushCurrent_v4000 push = cuda_calls()->ctx_push;
	PFN_cuCtxPopCurrent_v4000 pop = cuda_calls()->ctx_pop;
	bool pushed = push && pop && push(ctx) == CUDA_SUCCESS;
	CUresult rc = copy3d_rows(&d, stream, async, per_thread);
	if (pushed)
		(void)pop(&prev);
	return rc;
}

PITCHED_SYNC_HOOK(cuMemcpy3DPeer, CUDA_MEMCPY3D_PEER, copy3d_peer_mapped, copy3d_peer_rows, false)
PITCHED_SYNC_HOOK(cuMemcpy3DPeer_ptds, CUDA_MEMCPY3D_PEER, copy3d_peer_mapped, copy3d_peer_rows, true)
PITCHED_ASYNC_HOOK(cuMemcpy3DPeerAsync, CUDA_MEMCPY3D_PEER, copy3d_peer_mapped, copy3d_peer_rows, false)
PITCHED_ASYNC_HOOK(cuMemcpy3DPeerAsync_ptsz, CUDA_MEMCPY3D_PEER, copy3d_peer_mapped, copy3d_peer_rows, true)

/* A batch of 3-D copies (cuMemcpy3DBatchAsync; CUDA 13 dropped failIdx).
 * Without a mapping among its pointer operands it goes to the driver as
 * it is. With one, as for the 1-D batches: the checks cuda.h names first
 * (a refused batch copies nothing), the stream waited for when a mapping
 * is read in stream order, then the operations one by one in order: one
 * with a mapping as a 3-D copy (row by row, or through a buffer when
 * the other side is a CUDA array, as cuMemcpy3DAsync above), every other
 * one handed to the driver as a batch of one. */
typedef CUresult(CUDAAPI *batch3d_fail_fn)(size_t, CUDA_MEMCPY3D_BATCH_OP *, size_t *, unsigned long long,
					    CUstream);
typedef CUresult(CUDAAPI *batch3d_fn)(size_t, CUDA_MEMCPY3D_BATCH_OP *, unsigned long long, CUstream);
/* The driver's entry point of the form called: one of the two is set. */
struct batch3d_real {
	batch3d_fail_fn with_fail; /* 12.8 */
	batch3d_fn without_fail;   /* 13.0 */
};

static CUresult batch3d_real_call(const struct batch3d_real *r, size_t n, CUDA_MEMCPY3D_BATCH_OP *ops,
				  size_t *fail_idx, unsigned long long flags, CUstream stream)
{
	if (r->with_fail)
		return r->with_fail(n, ops, fail_idx, flags, stream);
	if (r->without_fail)
		return r->without_fail(n, ops, flags, stream);
	return CUDA_ERROR_NOT_SUPPORTED;
}

/* Bytes per element of a CUDA array, for the formats whose element is a
 * whole number of bytes the shim knows; 0 for the others (normalized,
 * block-compressed and YUV formats) and when the driver cannot say. */
static size_t array_element_bytes(CUarray array)
{
	gaia_array3d_descriptor_fn get = cuda_calls()->array3d_descriptor;
	CUDA_ARRAY3D_DESCRIPTOR d;
	if (!get || get(&d, array) != CUDA_SUCCESS || !d.NumChannels || d.NumChannels > 4)
		return 0;
	return cuda_array_element_bytes(d.Format, d.NumChannels);
}

/* The element size of `op`'s copy: an array's on either side, else 1
 * (bytes); 0 when an array's is unknown. */
static size_t batch3d_element_bytes(const CUDA_MEMCPY3D_BATCH_OP *op)
{
	if (op->src.type == CU_MEMCPY_OPERAND_TYPE_ARRAY)
		return array_element_bytes(op->src.op.array.array);
	if (op->dst.type == CU_MEMCPY_OPERAND_TYPE_ARRAY)
		return array_element_bytes(op->dst.op.array.array);
	return 1;
}

/* Whether operand `o` of `op` is a pointer whose extent meets a mapping. */
static bool batch3d_operand_mapped(const CUDA_MEMCPY3D_BATCH_OP *op, const CUmemcpy3DOperand *o)
{
	const CUextent3D *e = &op->extent;
	if (o->type != CU_MEMCPY_OPERAND_TYPE_POINTER || !e->width || !e->height || !e->depth)
		return false;
	size_t elem = batch3d_element_bytes(op);
	if (!elem)
		elem = 16; /* the largest: an unknown one is taken to reach as far */
	size_t row = o->op.ptr.rowLength > e->width ? o->op.ptr.rowLength : e->width;
	size_t layer = o->op.ptr.layerHeight > e->height ? o->op.ptr.layerHeight : e->height;
	size_t pitch, plane, last, bytes;
	if (__builtin_mul_overflow(row, elem, &pitch) || __builtin_mul_overflow(pitch, layer, &plane) ||
	    __builtin_mul_overflow(plane, e->depth - 1, &last) ||
	    __builtin_add_overflow(last, (e->height - 1) * pitch, &last) ||
	    __builtin_add_overflow(last, e->width * elem, &bytes))
		return gpu_is_mapped_host((const void *)(uintptr_t)o->op.ptr.ptr, 1);
	return gpu_is_mapped_host((const void *)(uintptr_t)o->op.ptr.ptr, bytes);
}

static bool batch3d_touches_mapping(size_t count, const CUDA_MEMCPY3D_BATCH_OP *ops)
{
	if (!ops || !mapping_any())
		return false;
	for (size_t i = 0; i < count; i++)
		if (batch3d_operand_mapped(&ops[i], &ops[i].src) || batch3d_operand_mapped(&ops[i], &ops[i].dst))
			return true;
	return false;
}

static bool batch3d_operand_valid(const CUmemcpy3DOperand *o, const CUextent3D *e)
{
	if (o->type == CU_MEMCPY_OPERAND_TYPE_ARRAY)
		return o->op.array.array != NULL;
	return o->type == CU_MEMCPY_OPERAND_TYPE_POINTER &&
	       (!o->op.ptr.rowLength || o->op.ptr.rowLength >= e->width) &&
	       (!o->op.ptr.layerHeight || o->op.ptr.layerHeight >= e->height);
}

/* One side of a batch operation as a 3-D copy's: a pointer with its row
 * and layer lengths, or an array at its offset; `elem`: bytes per
 * element (an array's on either side, else 1). */
static void batch3d_side(const CUmemcpy3DOperand *o, const CUextent3D *e, size_t elem, CUmemorytype *type,
			 CUdeviceptr *ptr, CUarray *array, size_t *x, size_t *y, size_t *z, size_t *pitch,
			 size_t *height)
{
	if (o->type == CU_MEMCPY_OPERAND_TYPE_ARRAY) {
		*type = CU_MEMORYTYPE_ARRAY;
		*array = o->op.array.array;
		*x = o->op.array.offset.x * elem, *y = o->op.array.offset.y, *z = o->op.array.offset.z;
		return;
	}
	*type = CU_MEMORYTYPE_UNIFIED;
	*ptr = o->op.ptr.ptr;
	*pitch = (o->op.ptr.rowLength ? o->op.ptr.rowLength : e->width) * elem;
	*height = o->op.ptr.layerHeight ? o->op.ptr.layerHeight : e->height;
}

/* `o` as a 3-D copy, its elements `elem` bytes (batch3d_sizes_fit). */
static CUDA_MEMCPY3D batch3d_as_3d(const CUDA_MEMCPY3D_BATCH_OP *o, size_t elem)
{
	const CUextent3D *e = &o->extent;
	CUDA_MEMCPY3D c = {.WidthInBytes = e->width * elem, .Height = e->height, .Depth = e->depth};
	batch3d_side(&o->src, e, elem, &c.srcMemoryType, &c.srcDevice, &c.srcArray, &c.srcXInBytes, &c.srcY,
		     &c.srcZ, &c.srcPitch, &c.srcHeight);
	batch3d_side(&o->dst, e, elem, &c.dstMemoryType, &c.dstDevice, &c.dstArray, &c.dstXInBytes, &c.dstY,
		     &c.dstZ, &c.dstPitch, &c.dstHeight);
	return c;
}

/* Whether `o`'s byte extents (width, an array's x offset, pointer rows)
 * fit a size_t with elements of `elem` bytes. */
static bool batch3d_sizes_fit(const CUDA_MEMCPY3D_BATCH_OP *o, size_t elem)
{
	const CUmemcpy3DOperand *sides[2] = {&o->src, &o->dst};
	size_t n;
	if (__builtin_mul_overflow(o->extent.width, elem, &n))
		return false;
	for (int k = 0; k < 2; k++)
		if (sides[k]->type == CU_MEMCPY_OPERAND_TYPE_ARRAY
			    ? __builtin_mul_overflow(sides[k]->op.array.offset.x, elem, &n)
			    : __builtin_mul_overflow(sides[k]->op.ptr.rowLength, elem, &n))
			return false;
	return true;
}

static CUresult batch3d_one_by_one(const struct batch3d_real *real, size_t count, CUDA_MEMCPY3D_BATCH_OP *ops,
				   size_t *fail_idx, unsigned long long flags, CUstream stream, bool per_thread)
{
	if (fail_idx)
		*fail_idx = SIZE_MAX;
	if (!count || flags || stream == CU_STREAM_LEGACY || (!per_thread && !stream))
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < count; i++) {
		const CUDA_MEMCPY3D_BATCH_OP *o = &ops[i];
		if (!o->extent.width || !o->extent.height || !o->extent.depth ||
		    (o->srcAccessOrder != CU_MEMCPY_SRC_ACCESS_ORDER_STREAM &&
		     o->srcAccessOrder != CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL &&
		     o->srcAccessOrder != CU_MEMCPY_SRC_ACCESS_ORDER_ANY) ||
		    !batch3d_operand_valid(&o->src, &o->extent) || !batch3d_operand_valid(&o->dst, &o->extent))
			return CUDA_ERROR_INVALID_VALUE;
		bool mapped = batch3d_operand_mapped(o, &o->src) || batch3d_operand_mapped(o, &o->dst);
		size_t elem = batch3d_element_bytes(o);
		if (mapped && !elem) {
			static int once;
			gaia_log_once(&once, GAIA_LOG_WARN,
				      "cuMemcpy3DBatchAsync: a copy between a mapped file and a CUDA array whose "
				      "element size the shim does not know (a normalized, block-compressed or YUV "
				      "format): refused (CUDA_ERROR_NOT_SUPPORTED); copy it with cuMemcpy3DAsync");
			return CUDA_ERROR_NOT_SUPPORTED;
		}
		if (mapped && !batch3d_sizes_fit(o, elem))
			return CUDA_ERROR_INVALID_VALUE;
		if (!mapped && !real->with_fail && !real->without_fail)
			return CUDA_ERROR_NOT_SUPPORTED; /* before anything is copied */
	}
	for (size_t i = 0; i < count; i++) {
		CUresult rc;
		if (batch3d_operand_mapped(&ops[i], &ops[i].src) || batch3d_operand_mapped(&ops[i], &ops[i].dst)) {
			CUDA_MEMCPY3D c = batch3d_as_3d(&ops[i], batch3d_element_bytes(&ops[i]));
			rc = copy3d_rows(&c, stream, true, per_thread);
		} else {
			size_t one_fail;
			rc = batch3d_real_call(real, 1, &ops[i], &one_fail, 0, stream);
		}
		if (rc != CUDA_SUCCESS) {
			if (fail_idx)
				*fail_idx = i;
			return rc;
		}
	}
	return CUDA_SUCCESS;
}

#define BATCH3D_HOOK(abi, per_thread, with_fail, ...)                                                        \
	GAIA_EXPORT CUresult CUDAAPI abi(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, __VA_ARGS__)           \
	{                                                                                                    \
		struct batch3d_real real = {BATCH3D_REAL_##with_fail(abi)};                                  \
		if (batch3d_touches_mapping(numOps, opList))                                                 \
			return batch3d_one_by_one(&real, numOps, opList, BATCH_FAIL_##with_fail, flags,      \
						  hStream, per_thread);                                      \
		return batch3d_real_call(&real, numOps, opList, BATCH_FAIL_##with_fail, flags, hStream);     \
	}
#define BATCH3D_REAL_1(abi) .with_fail = REAL_OF(abi)
#define BATCH3D_REAL_0(abi) .without_fail = REAL_OF(abi)
BATCH3D_HOOK(cuMemcpy3DBatchAsync, false, 1, size_t *failIdx, unsigned long long flags, CUstream hStream)
BATCH3D_HOOK(cuMemcpy3DBatchAsync_ptsz, true, 1, size_t *failIdx, unsigned long long flags, CUstream hStream)
BATCH3D_HOOK(cuMemcpy3DBatchAsync_v2, false, 0, unsigned long long flags, CUstream hStream)
BATCH3D_HOOK(cuMemcpy3DBatchAsync_v2_ptsz, true, 0, unsigned long long flags, CUstream hStream)

/* Host registration of a mapping is the shim's (gpu_copy.c). */
static CUresult host_register(__typeof__(&cuMemHostRegister_v2) real, void *p, size_t bytesize,
			      unsigned int flags)
{
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (gpu_is_mapped_host(p, bytesize))
		return gpu_host_register(p, bytesize);
	return real(p, bytesize, flags);
}

GAIA_EXPORT CUresult CUDAAPI cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
	return host_register(REAL_OF(cuMemHostRegister_v2), p, bytesize, Flags);
}

GAIA_EXPORT CUresult CUDAAPI cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
	return host_register(REAL_OF(cuMemHostRegister), p, bytesize, Flags);
}

GAIA_EXPORT CUresult CUDAAPI cuMemHostUnregister(void *p)
{
	__typeof__(&cuMemHostUnregister) real = REAL_OF(cuMemHostUnregister);

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (gpu_host_unregister(p))
		return CUDA_SUCCESS;
	return real(p);
}

GAIA_EXPORT CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
	__typeof__(&cuMemHostGetDevicePointer_v2) real = REAL_OF(cuMemHostGetDevicePointer_v2);

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (pdptr && gpu_host_device_pointer(pdptr, p))
		return CUDA_SUCCESS;
	return real(pdptr, p, Flags);
}

GAIA_EXPORT CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
	__typeof__(&cuPointerGetAttribute) real = REAL_OF(cuPointerGetAttribute);
	bool registered;
	CUdeviceptr target;
	CUresult rc;

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	target = gpu_pointer_query_target(ptr, &registered);
	rc = real(data, attribute, target);
	return registered && data ? gpu_pointer_fixup(attribute, data, ptr, rc) : rc;
}

GAIA_EXPORT CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
						     void **data, CUdeviceptr ptr)
{
	__typeof__(&cuPointerGetAttributes) real = REAL_OF(cuPointerGetAttributes);
	bool registered;
	CUdeviceptr target;
	CUresult rc;

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	target = gpu_pointer_query_target(ptr, &registered);
	rc = real(numAttributes, attributes, data, target);
	for (unsigned int i = 0; rc == CUDA_SUCCESS && registered && attributes && data && i < numAttributes; i++)
		if (data[i])
			(void)gpu_pointer_fixup(attributes[i], data[i], ptr, rc);
	return rc;
}

/* The hidden aliases the hook table points at (cuda_hooks.h). */
#define HOOK_ALIAS(base, ver, pt, abi, lib, pfn) HOOK_ALIAS_DEFINE(abi)
CUDA_COPY_HOOK_TABLE(HOOK_ALIAS)
#undef HOOK_ALIAS

/* A row's version must name the ABI its wrapper implements. */
#define HOOK_CHECK(base, ver, pt, abi, lib, pfn) \
	_Static_assert(__builtin_types_compatible_p(__typeof__(&abi), pfn), #abi " is not " #pfn);
CUDA_COPY_HOOK_TABLE(HOOK_CHECK)
#undef HOOK_CHECK
