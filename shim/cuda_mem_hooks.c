/* Driver calls that allocate, or write or advise on memory without
 * copying it: cuMemAlloc, cuMemsetD8/D16/D32 (1-D and 2-D, sync and async,
 * and their per-thread forms), cuMemPrefetchAsync and cuMemAdvise.
 *
 * A mapping is host memory to the program (DESIGN §3.2). Without the shim
 * the driver would refuse a memset of pageable memory, or (under vmm, where
 * the mapping's address is the device replica's to the driver) store into
 * the replica where the CPU never sees it. Here a memset whose destination
 * is a mapping is made by the CPU in stream order (gpu_memset_mapped), as
 * a system whose GPU reaches pageable memory would make it; a prefetch of
 * a mapping to a device makes that device's copy current (an acquire), one
 * to the CPU and any advice are accepted: the pages are the page cache's.
 * A peer copy with a mapping on either side is a copy between that host
 * memory and the other side (gpu_copy_1d), as cuMemcpy makes one.
 * Everything else goes to the driver unchanged.
 */
#define _GNU_SOURCE
#include "cuda_hooks.h" /* first: it makes cuda.h declare every ABI name */
#include "backend_cuda.h"
#include "gpu_mapping.h"

#include <pthread.h>

#define HOOK_ALIAS(base, ver, pt, abi, lib, pfn) HOOK_ALIAS_DEFINE(abi)
CUDA_MEM_HOOK_TABLE(HOOK_ALIAS)
#undef HOOK_ALIAS
#define HOOK_CHECK(base, ver, pt, abi, lib, pfn) \
	_Static_assert(__builtin_types_compatible_p(__typeof__(&abi), pfn), #abi " is not " #pfn);
CUDA_MEM_HOOK_TABLE(HOOK_CHECK)
#undef HOOK_CHECK

/* The stream a call without one runs on. */
#define SYNC_STREAM(per_thread) ((per_thread) ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY)
/* A per-thread form's NULL stream is the thread's own. */
#define ASYNC_STREAM(s, per_thread) ((per_thread) && !(s) ? CU_STREAM_PER_THREAD : (s))

#define MEMSET_CALL(abi, pitch, value, elem, width, height, stream, ...)                               \
	do {                                                                                            \
		__typeof__(&abi) real_ = REAL_OF(abi);                                                  \
		CUresult rc_;                                                                           \
		if (gpu_memset_mapped(dst, (pitch), (uint32_t)(value), (elem), (width), (height), (stream), \
				      &rc_))                                                            \
			return rc_;                                                                     \
		return real_ ? real_(__VA_ARGS__) : CUDA_ERROR_NOT_INITIALIZED;                         \
	} while (0)

#define MEMSET_1D(abi, vtype, elem, pt)                                                          \
	GAIA_EXPORT CUresult CUDAAPI abi(CUdeviceptr dst, vtype v, size_t n)                     \
	{                                                                                        \
		MEMSET_CALL(abi, 0, v, elem, n, 1, SYNC_STREAM(pt), dst, v, n);                  \
	}
#define MEMSET_1D_ASYNC(abi, vtype, elem, pt)                                                    \
	GAIA_EXPORT CUresult CUDAAPI abi(CUdeviceptr dst, vtype v, size_t n, CUstream s)         \
	{                                                                                        \
		MEMSET_CALL(abi, 0, v, elem, n, 1, ASYNC_STREAM(s, pt), dst, v, n, s);           \
	}
#define MEMSET_2D(abi, vtype, elem, pt)                                                          \
	GAIA_EXPORT CUresult CUDAAPI abi(CUdeviceptr dst, size_t pitch, vtype v, size_t w, size_t h) \
	{                                                                                        \
		MEMSET_CALL(abi, pitch, v, elem, w, h, SYNC_STREAM(pt), dst, pitch, v, w, h);    \
	}
#define MEMSET_2D_ASYNC(abi, vtype, elem, pt)                                                    \
	GAIA_EXPORT CUresult CUDAAPI abi(CUdeviceptr dst, size_t pitch, vtype v, size_t w, size_t h, \
					 CUstream s)                                             \
	{                                                                                        \
		MEMSET_CALL(abi, pitch, v, elem, w, h, ASYNC_STREAM(s, pt), dst, pitch, v, w, h, s); \
	}

#define MEMSET_WIDTH(bits, vtype, elem)                                       \
	MEMSET_1D(cuMemsetD##bits##_v2, vtype, elem, false)                   \
	MEMSET_1D(cuMemsetD##bits##_v2_ptds, vtype, elem, true)               \
	MEMSET_1D_ASYNC(cuMemsetD##bits##Async, vtype, elem, false)           \
	MEMSET_1D_ASYNC(cuMemsetD##bits##Async_ptsz, vtype, elem, true)       \
	MEMSET_2D(cuMemsetD2D##bits##_v2, vtype, elem, false)                 \
	MEMSET_2D(cuMemsetD2D##bits##_v2_ptds, vtype, elem, true)             \
	MEMSET_2D_ASYNC(cuMemsetD2D##bits##Async, vtype, elem, false)         \
	MEMSET_2D_ASYNC(cuMemsetD2D##bits##Async_ptsz, vtype, elem, true)

MEMSET_WIDTH(8, unsigned char, 1)
MEMSET_WIDTH(16, unsigned short, 2)
MEMSET_WIDTH(32, unsigned int, 4)

/* --- allocations ---
 *
 * The program's allocation that fails for want of device memory —
 * cuMemAlloc (cudaMalloc), cuMemAllocPitch (cudaMallocPitch, cudaMalloc3D),
 * cuMemAllocAsync and cuMemAllocFromPoolAsync (cudaMallocAsync, pools),
 * cuMemCreate (the driver's virtual memory management) —: the replicas on
 * its device are given up, the largest first, until as much is free
 * (their regions page on demand from their next launch:
 * gpu_mappings_make_room), and the allocation is tried again. Without the
 * shim the memory would have been free. The stream-ordered ones take the
 * current device's, cuMemAllocFromPoolAsync the pool's (pool_device). So do
 * arrays (cuArrayCreate, cuArray3DCreate, cuMipmappedArrayCreate: cudart's
 * cudaMallocArray family), whose size is estimated from their descriptor;
 * room is made again while the retry still finds none and replicas are
 * left to give up. */
#define CURRENT_DEVICE (-2)
static bool room_made(int dev, size_t n)
{
	if (gpu_hook_depth)
		return false; /* the driver's own allocation, inside a call the shim made */
	if (dev == CURRENT_DEVICE)
		dev = cuda_current_device();
	if (dev < 0)
		return false;
	/* The driver's own mmap calls, tearing replicas down, pass through. */
	gaia_in_shim++;
	size_t freed = gpu_mappings_make_room(dev, n);
	gaia_in_shim--;
	return freed != 0;
}

GAIA_EXPORT CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
	__typeof__(&cuMemAlloc_v2) real = REAL_OF(cuMemAlloc_v2);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	CUresult rc = real(p, n);
	return rc == CUDA_ERROR_OUT_OF_MEMORY && room_made(CURRENT_DEVICE, n) ? real(p, n) : rc;
}

GAIA_EXPORT CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t width, size_t height,
						unsigned int elem)
{
	__typeof__(&cuMemAllocPitch_v2) real = REAL_OF(cuMemAllocPitch_v2);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	CUresult rc = real(p, pitch, width, height, elem);
	/* The pitch the driver would give is not known: rows of 512 bytes'
	 * multiples, as drivers align them, for what to make room for. */
	size_t row = (width + 511) & ~(size_t)511;
	size_t n = height && row > SIZE_MAX / height ? SIZE_MAX : row * height;
	if (rc == CUDA_ERROR_OUT_OF_MEMORY && room_made(CURRENT_DEVICE, n))
		rc = real(p, pitch, width, height, elem);
	return rc;
}

#define ALLOC_ASYNC(abi)                                                                                  \
	GAIA_EXPORT CUresult CUDAAPI abi(CUdeviceptr *p, size_t n, CUstream s)                            \
	{                                                                                                 \
		__typeof__(&abi) real = REAL_OF(abi);                                                     \
		if (!real)                                                                                \
			return CUDA_ERROR_NOT_INITIALIZED;                                                \
		CUresult rc = real(p, n, s);                                                              \
		if (rc == CUDA_ERROR_OUT_OF_MEMORY && room_made(CURRENT_DEVICE, n))                \
			rc = real(p, n, s);                                                               \
		return rc;                                                                                \
	}
ALLOC_ASYNC(cuMemAllocAsync)
ALLOC_ASYNC(cuMemAllocAsync_ptsz)
#undef ALLOC_ASYNC

/* The device each pool allocates from: a pool is tied to one device
 * (CUmemPoolProps.location), which no driver call tells afterwards, so
 * the pools the program creates or is handed (a device's default or
 * current pool) are noted here. One the shim never saw (more than
 * MAX_POOLS alive, or made before the shim loaded) is taken to be the
 * current device's. */
enum { MAX_POOLS = 256 };
static struct {
	CUmemoryPool pool;
	int dev;
} pools[MAX_POOLS];
static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;

/* pool's entry (NULL: a free one), or -1; with pools_lock held. */
static int pool_slot_locked(CUmemoryPool pool)
{
	for (int i = 0; i < MAX_POOLS; i++)
		if (pools[i].pool == pool)
			return i;
	return -1;
}

static void pool_note(CUmemoryPool pool, int dev)
{
	pthread_mutex_lock(&pools_lock);
	int i = pool_slot_locked(pool);
	if (i < 0)
		i = pool_slot_locked(NULL);
	if (i >= 0)
		pools[i].pool = pool, pools[i].dev = dev;
	pthread_mutex_unlock(&pools_lock);
}

static int pool_device(CUmemoryPool pool)
{
	pthread_mutex_lock(&pools_lock);
	int i = pool_slot_locked(pool);
	int dev = i >= 0 ? pools[i].dev : CURRENT_DEVICE;
	pthread_mutex_unlock(&pools_lock);
	return dev;
}

GAIA_EXPORT CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
	__typeof__(&cuMemPoolCreate) real = REAL_OF(cuMemPoolCreate);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	CUresult rc = real(pool, props);
	if (rc == CUDA_SUCCESS && pool && props && props->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
		pool_note(*pool, props->location.id);
	return rc;
}

GAIA_EXPORT CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool)
{
	__typeof__(&cuMemPoolDestroy) real = REAL_OF(cuMemPoolDestroy);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	CUresult rc = real(pool);
	if (rc == CUDA_SUCCESS && pool) {
		pthread_mutex_lock(&pools_lock);
		int i = pool_slot_locked(pool);
		if (i >= 0)
			pools[i].pool = NULL;
		pthread_mutex_unlock(&pools_lock);
	}
	return rc;
}

#define DEVICE_POOL(abi)                                                                          \
	GAIA_EXPORT CUresult CUDAAPI abi(CUmemoryPool *pool, CUdevice dev)                        \
	{                                                                                         \
		__typeof__(&abi) real = REAL_OF(abi);                                             \
		if (!real)                                                                        \
			return CUDA_ERROR_NOT_INITIALIZED;                                        \
		CUresult rc = real(pool, dev);                                                    \
		if (rc == CUDA_SUCCESS && pool)                                                   \
			pool_note(*pool, dev);                                                    \
		return rc;                                                                        \
	}
DEVICE_POOL(cuDeviceGetDefaultMemPool)
DEVICE_POOL(cuDeviceGetMemPool)
#undef DEVICE_POOL

#define ALLOC_FROM_POOL(abi)                                                                              \
	GAIA_EXPORT CUresult CUDAAPI abi(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s)         \
	{                                                                                                 \
		__typeof__(&abi) real = REAL_OF(abi);                                                     \
		if (!real)                                                                                \
			return CUDA_ERROR_NOT_INITIALIZED;                                                \
		CUresult rc = real(p, n, pool, s);                                                        \
		if (rc == CUDA_ERROR_OUT_OF_MEMORY && room_made(pool_device(pool), n))             \
			rc = real(p, n, pool, s);                                                         \
		return rc;                                                                                \
	}
ALLOC_FROM_POOL(cuMemAllocFromPoolAsync)
ALLOC_FROM_POOL(cuMemAllocFromPoolAsync_ptsz)
#undef ALLOC_FROM_POOL

size_t cuda_array_element_bytes(CUarray_format f, unsigned channels)
{
	if (channels > 4)
		channels = 4;
	switch (f) {
	case CU_AD_FORMAT_UNSIGNED_INT8:
	case CU_AD_FORMAT_SIGNED_INT8:
		return channels;
	case CU_AD_FORMAT_UNSIGNED_INT16:
	case CU_AD_FORMAT_SIGNED_INT16:
	case CU_AD_FORMAT_HALF:
		return 2u * channels;
	case CU_AD_FORMAT_UNSIGNED_INT32:
	case CU_AD_FORMAT_SIGNED_INT32:
	case CU_AD_FORMAT_FLOAT:
		return 4u * channels;
	default:
		return 0;
	}
}

/* The bytes an array of d takes, rows rounded up to 512 bytes (as pitched
 * memory is), levels halving each extent (layers and cube faces stay);
 * SIZE_MAX when that overflows. */
static size_t array_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels)
{
	size_t w = d->Width, h = d->Height ? d->Height : 1, z = d->Depth ? d->Depth : 1, total = 0;
	bool keep_z = (d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0;
	size_t e = cuda_array_element_bytes(d->Format, d->NumChannels ? d->NumChannels : 1);
	if (!e)
		e = 16; /* the largest element: an unknown format is not underestimated */
	/* the driver clamps the levels to 1 + log2 of the longest extent:
	 * none past the one where every extent that halves is 1 */
	for (unsigned l = 0; l < (levels ? levels : 1) && l < 64; l++) {
		if (w > (SIZE_MAX - 511) / e)
			return SIZE_MAX;
		size_t row = (w * e + 511) & ~(size_t)511;
		if (h > SIZE_MAX / row || z > SIZE_MAX / (row * h) || row * h * z > SIZE_MAX - total)
			return SIZE_MAX;
		total += row * h * z;
		if (w == 1 && h == 1 && (keep_z || z == 1))
			break;
		w = w > 1 ? w / 2 : 1;
		h = h > 1 ? h / 2 : 1;
		z = keep_z || z == 1 ? z : z / 2;
	}
	return total;
}

/* An array that found no room: replicas are given up for it until the
 * allocation succeeds or none is left. */
#define ARRAY_RETRY(call, bytes)                                                                          \
	do {                                                                                              \
		while (rc == CUDA_ERROR_OUT_OF_MEMORY && room_made(CURRENT_DEVICE, (bytes)))             \
			rc = (call);                                                                      \
	} while (0)

GAIA_EXPORT CUresult CUDAAPI cuArrayCreate_v2(CUarray *handle, const CUDA_ARRAY_DESCRIPTOR *d)
{
	__typeof__(&cuArrayCreate_v2) real = REAL_OF(cuArrayCreate_v2);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	CUresult rc = real(handle, d);
	if (rc == CUDA_ERROR_OUT_OF_MEMORY && d) {
		CUDA_ARRAY3D_DESCRIPTOR d3 = {.Width = d->Width, .Height = d->Height, .Format = d->Format,
					      .NumChannels = d->NumChannels};
		ARRAY_RETRY(real(handle, d), array_bytes(&d3, 1));
	}
	return rc;
}

GAIA_EXPORT CUresult CUDAAPI cuArray3DCreate_v2(CUarray *handle, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	__typeof__(&cuArray3DCreate_v2) real = REAL_OF(cuArray3DCreate_v2);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	CUresult rc = real(handle, d);
	if (rc == CUDA_ERROR_OUT_OF_MEMORY && d)
		ARRAY_RETRY(real(handle, d), array_bytes(d, 1));
	return rc;
}

GAIA_EXPORT CUresult CUDAAPI cuMipmappedArrayCreate(CUmipmappedArray *handle, const CUDA_ARRAY3D_DESCRIPTOR *d,
						    unsigned int levels)
{
	__typeof__(&cuMipmappedArrayCreate) real = REAL_OF(cuMipmappedArrayCreate);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	CUresult rc = real(handle, d, levels);
	if (rc == CUDA_ERROR_OUT_OF_MEMORY && d)
		ARRAY_RETRY(real(handle, d, levels), array_bytes(d, levels));
	return rc;
}
#undef ARRAY_RETRY

/* cuMemCreate: device memory on the device it names. */
GAIA_EXPORT CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
					 const CUmemAllocationProp *prop, unsigned long long flags)
{
	__typeof__(&cuMemCreate) real = REAL_OF(cuMemCreate);
	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	CUresult rc = real(handle, size, prop, flags);
	if (!prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return rc;
	return rc == CUDA_ERROR_OUT_OF_MEMORY && room_made(prop->location.id, size) ? real(handle, size, prop, flags) : rc;
}

/* --- prefetch and advice --- */

static CUresult check_device(int device)
{
	PFN_cuDeviceGetCount_v2000 count = cuda_calls()->device_get_count;
	int n = 0;
	CUresult rc = count ? count(&n) : CUDA_ERROR_NOT_INITIALIZED;
	if (rc != CUDA_SUCCESS)
		return rc;
	return device >= 0 && device < n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

/* Where a location names: a device (its ordinal), the host (-1), or
 * neither (-2). */
static int location_device(CUmemLocation l)
{
	switch (l.type) {
	case CU_MEM_LOCATION_TYPE_DEVICE:
		return l.id;
	case CU_MEM_LOCATION_TYPE_HOST:
	case CU_MEM_LOCATION_TYPE_HOST_NUMA:
	case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
		return -1;
	default:
		return -2;
	}
}

/* A prefetch or advice whose range is a mapping: false when it is not one.
 * `device`: an ordinal, -1 for the host, -2 for an invalid location. */
static bool mapped_hint(CUdeviceptr p, size_t n, int device, bool prefetch, CUstream s, CUresult *rc)
{
	if (!n || !gpu_is_mapped_host((const void *)(uintptr_t)p, n))
		return false;
	*rc = device == -2 ? CUDA_ERROR_INVALID_VALUE : device == -1 ? CUDA_SUCCESS : check_device(device);
	if (*rc != CUDA_SUCCESS || !prefetch || device < 0)
		return true;
	int mode = gpu_capture_relax();
	*rc = gpu_prefetch_mapped(p, n, device, s);
	gpu_capture_restore(mode);
	return true;
}

#define HINT(p, n, device, prefetch, s, real, ...)                                \
	do {                                                                      \
		CUresult rc_;                                                     \
		if (mapped_hint((p), (n), (device), (prefetch), (s), &rc_))       \
			return rc_;                                               \
		return (real) ? (real)(__VA_ARGS__) : CUDA_ERROR_NOT_INITIALIZED; \
	} while (0)

static int device_or_host(CUdevice d)
{
	return d == CU_DEVICE_CPU ? -1 : d < 0 ? -2 : (int)d;
}

GAIA_EXPORT CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr p, size_t n, CUdevice d, CUstream s)
{
	HINT(p, n, device_or_host(d), true, s, REAL_OF(cuMemPrefetchAsync), p, n, d, s);
}

GAIA_EXPORT CUresult CUDAAPI cuMemPrefetchAsync_ptsz(CUdeviceptr p, size_t n, CUdevice d, CUstream s)
{
	HINT(p, n, device_or_host(d), true, ASYNC_STREAM(s, true), REAL_OF(cuMemPrefetchAsync_ptsz), p, n, d, s);
}

GAIA_EXPORT CUresult CUDAAPI cuMemPrefetchAsync_v2(CUdeviceptr p, size_t n, CUmemLocation l, unsigned int flags,
						    CUstream s)
{
	HINT(p, n, location_device(l), true, s, REAL_OF(cuMemPrefetchAsync_v2), p, n, l, flags, s);
}

GAIA_EXPORT CUresult CUDAAPI cuMemPrefetchAsync_v2_ptsz(CUdeviceptr p, size_t n, CUmemLocation l,
							 unsigned int flags, CUstream s)
{
	HINT(p, n, location_device(l), true, ASYNC_STREAM(s, true), REAL_OF(cuMemPrefetchAsync_v2_ptsz), p, n, l, flags, s);
}

GAIA_EXPORT CUresult CUDAAPI cuMemAdvise(CUdeviceptr p, size_t n, CUmem_advise advice, CUdevice d)
{
	HINT(p, n, device_or_host(d), false, NULL, REAL_OF(cuMemAdvise), p, n, advice, d);
}

GAIA_EXPORT CUresult CUDAAPI cuMemAdvise_v2(CUdeviceptr p, size_t n, CUmem_advise advice, CUmemLocation l)
{
	HINT(p, n, location_device(l), false, NULL, REAL_OF(cuMemAdvise_v2), p, n, advice, l);
}

/* --- peer copies --- */

/* The copy runs with the device side's context current, so the stream a
 * synchronous form waits for, and the device released, are that
 * context's (a thread with no context current may make a peer copy). */
static bool peer_copy(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n, CUstream stream,
		      bool async, CUresult *rc)
{
	bool src_mapped = gpu_is_mapped_host((const void *)(uintptr_t)src, n);
	if (!n || (!src_mapped && !gpu_is_mapped_host((const void *)(uintptr_t)dst, n)))
		return false;
	CUcontext ctx = src_mapped ? dctx : sctx, prev = NULL;
	PFN_cuCtxPushCurrent_v4000 push = cuda_calls()->ctx_push;
	PFN_cuCtxPopCurrent_v4000 pop = cuda_calls()->ctx_pop;
	if (!ctx) {
		*rc = CUDA_ERROR_INVALID_CONTEXT;
		return true;
	}
	bool pushed = push && pop && push(ctx) == CUDA_SUCCESS;
	if (!gpu_copy_1d((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n, GPU_COPY_UNIFIED, GPU_COPY_UNIFIED,
			 stream, false, rc))
		*rc = CUDA_ERROR_INVALID_VALUE; /* not reached: one side is a mapping */
	if (pushed)
		(void)pop(&prev);
	return true;
}

#define PEER_COPY(real, stream, async, ...)                                          \
	do {                                                                         \
		CUresult rc_;                                                        \
		if (peer_copy(dst, dctx, src, sctx, n, (stream), (async), &rc_))     \
			return rc_;                                                  \
		return (real) ? (real)(__VA_ARGS__) : CUDA_ERROR_NOT_INITIALIZED;    \
	} while (0)

GAIA_EXPORT CUresult CUDAAPI cuMemcpyPeer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n)
{
	PEER_COPY(REAL_OF(cuMemcpyPeer), SYNC_STREAM(false), false, dst, dctx, src, sctx, n);
}

GAIA_EXPORT CUresult CUDAAPI cuMemcpyPeer_ptds(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
					       size_t n)
{
	PEER_COPY(REAL_OF(cuMemcpyPeer_ptds), SYNC_STREAM(true), false, dst, dctx, src, sctx, n);
}

GAIA_EXPORT CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
					       size_t n, CUstream s)
{
	PEER_COPY(REAL_OF(cuMemcpyPeerAsync), ASYNC_STREAM(s, false), true, dst, dctx, src, sctx, n, s);
}

GAIA_EXPORT CUresult CUDAAPI cuMemcpyPeerAsync_ptsz(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src,
						    CUcontext sctx, size_t n, CUstream s)
{
	PEER_COPY(REAL_OF(cuMemcpyPeerAsync_ptsz), ASYNC_STREAM(s, true), true, dst, dctx, src, sctx, n, s);
}
