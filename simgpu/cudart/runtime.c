/*
 * runtime.c — the runtime API subset, on top of the driver entry points
 * in driver.c.  Each thread has a current device (default 0) and a last
 * error; each device's primary context is retained once and made current
 * on the calling thread before any work.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"

static __thread int current_device;
static __thread CUcontext thread_ctx;
static __thread cudaError_t last_error;
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext primary[64];

static const struct { cudaError_t code; const char *name, *text; } errors[] = {
#include "errors.inc"
};

static cudaError_t record(cudaError_t e)
{
    if (e != cudaSuccess)
        last_error = e;
    return e;
}

/* Driver codes and runtime codes share their numbers for everything the
 * simulator returns; the launch-specific meanings are mapped by callers. */
static cudaError_t from_cu(CUresult r)
{
    if (r == CUDA_ERROR_NOT_INITIALIZED)
        return cudaErrorInitializationError;
    if (r == CUDA_ERROR_INVALID_CONTEXT)
        return cudaErrorDeviceUninitialized;
    return (cudaError_t)r;
}

/* Make the primary context of the thread's current device current. */
static cudaError_t ready(void)
{
    cudaError_t e = cudart_driver_load();
    if (e != cudaSuccess)
        return record(e);
    int n = 0;
    drv.DeviceGetCount(&n);
    if (current_device < 0 || current_device >= n || current_device >= 64)
        return record(cudaErrorInvalidDevice);
    pthread_mutex_lock(&ctx_lock);
    CUcontext c = primary[current_device];
    CUresult r = CUDA_SUCCESS;
    if (!c) {
        r = drv.DevicePrimaryCtxRetain(&c, current_device);
        if (r == CUDA_SUCCESS)
            primary[current_device] = c;
    }
    pthread_mutex_unlock(&ctx_lock);
    if (r != CUDA_SUCCESS)
        return record(from_cu(r));
    if (thread_ctx != c) {
        if ((r = drv.CtxSetCurrent(c)) != CUDA_SUCCESS)
            return record(from_cu(r));
        thread_ctx = c;
    }
    return cudaSuccess;
}

#define READY()                         \
    do {                                \
        cudaError_t e_ = ready();       \
        if (e_ != cudaSuccess)          \
            return e_;                  \
    } while (0)

static cudaError_t ret(CUresult r) { return record(from_cu(r)); }

/* ---- errors ---- */

cudaError_t CUDARTAPI cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t CUDARTAPI cudaPeekAtLastError(void) { return last_error; }

static int find_error(cudaError_t e)
{
    for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
        if (errors[i].code == e)
            return (int)i;
    return -1;
}

const char *CUDARTAPI cudaGetErrorString(cudaError_t error)
{
    int i = find_error(error);
    return i < 0 ? "unrecognized error code" : errors[i].text;
}

const char *CUDARTAPI cudaGetErrorName(cudaError_t error)
{
    int i = find_error(error);
    return i < 0 ? "cudaErrorUnknown" : errors[i].name;
}

/* ---- devices ---- */

cudaError_t CUDARTAPI cudaGetDeviceCount(int *count)
{
    cudaError_t e = cudart_driver_load();
    if (e != cudaSuccess)
        return record(e);
    if (!count)
        return record(cudaErrorInvalidValue);
    return ret(drv.DeviceGetCount(count));
}

cudaError_t CUDARTAPI cudaSetDevice(int device)
{
    cudaError_t e = cudart_driver_load();
    if (e != cudaSuccess)
        return record(e);
    int n = 0;
    drv.DeviceGetCount(&n);
    if (device < 0 || device >= n)
        return record(cudaErrorInvalidDevice);
    current_device = device;
    return ready();
}

cudaError_t CUDARTAPI cudaGetDevice(int *device)
{
    if (!device)
        return record(cudaErrorInvalidValue);
    *device = current_device;
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    cudaError_t e = cudart_driver_load();
    if (e != cudaSuccess)
        return record(e);
    return ret(drv.DeviceGetAttribute(value, (CUdevice_attribute)attr, device));
}

cudaError_t CUDARTAPI cudaDeviceSynchronize(void)
{
    READY();
    return ret(drv.CtxSynchronize(NULL));
}

/* Resources stay with the process; reset only drains the device. */
cudaError_t CUDARTAPI cudaDeviceReset(void)
{
    READY();
    return ret(drv.CtxSynchronize(NULL));
}

cudaError_t CUDARTAPI cudaDriverGetVersion(int *driverVersion)
{
    cudaError_t e = cudart_driver_load();
    if (e != cudaSuccess)
        return record(e);
    return ret(drv.DriverGetVersion(driverVersion));
}

cudaError_t CUDARTAPI cudaRuntimeGetVersion(int *runtimeVersion)
{
    if (!runtimeVersion)
        return record(cudaErrorInvalidValue);
    *runtimeVersion = CUDART_VERSION;
    return cudaSuccess;
}

/* ---- memory ---- */

/* cudaMalloc, and cudaMallocAsync on `stream` when `ordered`. */
static cudaError_t device_alloc(void **devPtr, size_t size, bool ordered, cudaStream_t stream)
{
    if (!devPtr)
        return record(cudaErrorInvalidValue);
    if (size == 0) {
        *devPtr = NULL;
        return cudaSuccess;
    }
    CUdeviceptr p = 0;
    CUresult r = ordered ? drv.MemAllocAsync(&p, size, (CUstream)stream) : drv.MemAlloc(&p, size);
    *devPtr = (void *)(uintptr_t)p;
    return r == CUDA_ERROR_OUT_OF_MEMORY ? record(cudaErrorMemoryAllocation) : ret(r);
}

cudaError_t CUDARTAPI cudaMalloc(void **devPtr, size_t size)
{
    READY();
    return device_alloc(devPtr, size, false, NULL);
}

cudaError_t CUDARTAPI cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    READY();
    if (!devPtr)
        return record(cudaErrorInvalidValue);
    CUdeviceptr p = 0;
    CUresult r = drv.MemAllocManaged(&p, size, flags);
    *devPtr = (void *)(uintptr_t)p;
    return r == CUDA_ERROR_OUT_OF_MEMORY ? record(cudaErrorMemoryAllocation) : ret(r);
}

cudaError_t CUDARTAPI cudaFree(void *devPtr)
{
    READY();
    CUresult r = drv.MemFree((CUdeviceptr)(uintptr_t)devPtr);
    return r == CUDA_ERROR_INVALID_VALUE ? record(cudaErrorInvalidDevicePointer) : ret(r);
}

cudaError_t CUDARTAPI cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
    READY();
    if (!devPtr || !pitch)
        return record(cudaErrorInvalidValue);
    if (width == 0 || height == 0) {
        *devPtr = NULL;
        *pitch = width;
        return cudaSuccess;
    }
    CUdeviceptr p = 0;
    CUresult r = drv.MemAllocPitch(&p, pitch, width, height, 16);
    *devPtr = (void *)(uintptr_t)p;
    return r == CUDA_ERROR_OUT_OF_MEMORY ? record(cudaErrorMemoryAllocation) : ret(r);
}

cudaError_t CUDARTAPI cudaMallocAsync(void **devPtr, size_t size, cudaStream_t stream)
{
    READY();
    return device_alloc(devPtr, size, true, stream);
}

cudaError_t CUDARTAPI cudaFreeAsync(void *devPtr, cudaStream_t stream)
{
    READY();
    if (!devPtr)
        return cudaSuccess;
    CUresult r = drv.MemFreeAsync((CUdeviceptr)(uintptr_t)devPtr, (CUstream)stream);
    return r == CUDA_ERROR_INVALID_VALUE ? record(cudaErrorInvalidDevicePointer) : ret(r);
}

/* Memory pools: the driver's (cudaMemPool_t is a CUmemoryPool, and
 * cudaMemPoolProps, cudaMemPoolAttr have the driver's layout and values). */
cudaError_t CUDARTAPI cudaMemPoolCreate(cudaMemPool_t *memPool, const struct cudaMemPoolProps *poolProps)
{
    READY();
    return ret(drv.MemPoolCreate((CUmemoryPool *)memPool, (const CUmemPoolProps *)poolProps));
}

cudaError_t CUDARTAPI cudaMemPoolDestroy(cudaMemPool_t memPool)
{
    READY();
    return ret(drv.MemPoolDestroy((CUmemoryPool)memPool));
}

cudaError_t CUDARTAPI cudaMemPoolSetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value)
{
    READY();
    return ret(drv.MemPoolSetAttribute((CUmemoryPool)memPool, (CUmemPool_attribute)attr, value));
}

cudaError_t CUDARTAPI cudaMemPoolGetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value)
{
    READY();
    return ret(drv.MemPoolGetAttribute((CUmemoryPool)memPool, (CUmemPool_attribute)attr, value));
}

cudaError_t CUDARTAPI cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep)
{
    READY();
    return ret(drv.MemPoolTrimTo((CUmemoryPool)memPool, minBytesToKeep));
}

cudaError_t CUDARTAPI cudaDeviceGetDefaultMemPool(cudaMemPool_t *memPool, int device)
{
    READY();
    return ret(drv.DeviceGetDefaultMemPool((CUmemoryPool *)memPool, device));
}

cudaError_t CUDARTAPI cudaDeviceGetMemPool(cudaMemPool_t *memPool, int device)
{
    READY();
    return ret(drv.DeviceGetMemPool((CUmemoryPool *)memPool, device));
}

cudaError_t CUDARTAPI cudaDeviceSetMemPool(int device, cudaMemPool_t memPool)
{
    READY();
    return ret(drv.DeviceSetMemPool(device, (CUmemoryPool)memPool));
}

static cudaError_t from_pool(void **ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream, bool ptds)
{
    READY();
    if (!ptr)
        return record(cudaErrorInvalidValue);
    CUdeviceptr p = 0;
    CUresult r = ptds ? drv.MemAllocFromPoolAsync_ptsz(&p, size, (CUmemoryPool)pool, (CUstream)stream)
                      : drv.MemAllocFromPoolAsync(&p, size, (CUmemoryPool)pool, (CUstream)stream);
    *ptr = (void *)(uintptr_t)p;
    return r == CUDA_ERROR_OUT_OF_MEMORY ? record(cudaErrorMemoryAllocation) : ret(r);
}

cudaError_t CUDARTAPI cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream)
{
    return from_pool(ptr, size, memPool, stream, false);
}

cudaError_t CUDARTAPI cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool,
                                                   cudaStream_t stream)
{
    return from_pool(ptr, size, memPool, stream, true);
}

/* ---- pinned host memory ---- */

/* cudaHostAlloc* and cudaHostRegister* flags have the driver's values. */
cudaError_t CUDARTAPI cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    READY();
    if (!pHost)
        return record(cudaErrorInvalidValue);
    CUresult r = drv.MemHostAlloc(pHost, size, flags);
    return r == CUDA_ERROR_OUT_OF_MEMORY ? record(cudaErrorMemoryAllocation) : ret(r);
}

cudaError_t CUDARTAPI cudaMallocHost(void **ptr, size_t size)
{
    return cudaHostAlloc(ptr, size, cudaHostAllocDefault);
}

cudaError_t CUDARTAPI cudaFreeHost(void *ptr)
{
    READY();
    if (!ptr)
        return cudaSuccess;     /* as free(NULL) */
    return ret(drv.MemFreeHost(ptr));
}

cudaError_t CUDARTAPI cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    READY();
    return ret(drv.MemHostRegister(ptr, size, flags));
}

cudaError_t CUDARTAPI cudaHostUnregister(void *ptr)
{
    READY();
    return ret(drv.MemHostUnregister(ptr));
}

cudaError_t CUDARTAPI cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags)
{
    READY();
    if (!pDevice)
        return record(cudaErrorInvalidValue);
    CUdeviceptr d = 0;
    CUresult r = drv.MemHostGetDevicePointer(&d, pHost, flags);
    *pDevice = (void *)(uintptr_t)d;
    return ret(r);
}

cudaError_t CUDARTAPI cudaHostGetFlags(unsigned int *pFlags, void *pHost)
{
    READY();
    return ret(drv.MemHostGetFlags(pFlags, pHost));
}

cudaError_t CUDARTAPI cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    READY();
    return ret(drv.MemGetInfo(free_bytes, total));
}

/* A pitched copy as the runtime hands it to the driver: the kind names
 * the memory types (Default: the driver classifies both pointers). */
static bool pitched_types(enum cudaMemcpyKind kind, CUmemorytype *src, CUmemorytype *dst)
{
    switch (kind) {
    case cudaMemcpyHostToHost: *src = CU_MEMORYTYPE_HOST, *dst = CU_MEMORYTYPE_HOST; return true;
    case cudaMemcpyHostToDevice: *src = CU_MEMORYTYPE_HOST, *dst = CU_MEMORYTYPE_DEVICE; return true;
    case cudaMemcpyDeviceToHost: *src = CU_MEMORYTYPE_DEVICE, *dst = CU_MEMORYTYPE_HOST; return true;
    case cudaMemcpyDeviceToDevice: *src = CU_MEMORYTYPE_DEVICE, *dst = CU_MEMORYTYPE_DEVICE; return true;
    case cudaMemcpyDefault: *src = CU_MEMORYTYPE_UNIFIED, *dst = CU_MEMORYTYPE_UNIFIED; return true;
    default: return false;
    }
}

static void pitched_side(CUmemorytype type, const void *p, CUmemorytype *t, const void **host, CUdeviceptr *dev)
{
    *t = type;
    if (type == CU_MEMORYTYPE_HOST)
        *host = p;
    else
        *dev = (CUdeviceptr)(uintptr_t)p;
}

static cudaError_t memcpy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                            enum cudaMemcpyKind kind, cudaStream_t stream, bool ptds, bool async)
{
    READY();
    CUDA_MEMCPY2D c;
    memset(&c, 0, sizeof(c));
    CUmemorytype st, dt;
    if (!pitched_types(kind, &st, &dt))
        return record(cudaErrorInvalidMemcpyDirection);
    if (height > 1 && (dpitch < width || spitch < width))
        return record(cudaErrorInvalidPitchValue);
    pitched_side(st, src, &c.srcMemoryType, &c.srcHost, &c.srcDevice);
    pitched_side(dt, dst, &c.dstMemoryType, (const void **)&c.dstHost, &c.dstDevice);
    c.srcPitch = spitch;
    c.dstPitch = dpitch;
    c.WidthInBytes = width;
    c.Height = height;
    if (async)
        return ret(ptds ? drv.Memcpy2DAsync_ptsz(&c, stream) : drv.Memcpy2DAsync(&c, stream));
    return ret(ptds ? drv.Memcpy2DUnaligned_ptds(&c) : drv.Memcpy2DUnaligned(&c));
}

cudaError_t CUDARTAPI cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                   size_t height, enum cudaMemcpyKind kind)
{ return memcpy2d(dst, dpitch, src, spitch, width, height, kind, NULL, false, false); }
cudaError_t CUDARTAPI cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                        size_t height, enum cudaMemcpyKind kind)
{ return memcpy2d(dst, dpitch, src, spitch, width, height, kind, NULL, true, false); }
cudaError_t CUDARTAPI cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                        size_t height, enum cudaMemcpyKind kind, cudaStream_t stream)
{ return memcpy2d(dst, dpitch, src, spitch, width, height, kind, stream, false, true); }
cudaError_t CUDARTAPI cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src, size_t spitch,
                                             size_t width, size_t height, enum cudaMemcpyKind kind,
                                             cudaStream_t stream)
{ return memcpy2d(dst, dpitch, src, spitch, width, height, kind, stream, true, true); }

/* ---- arrays (the driver's: cudaArray_t is a CUarray) ---- */

/* A channel description as the driver's array format and channel count:
 * 1, 2 or 4 channels of one size, signed, unsigned or float. */
static bool array_format(const struct cudaChannelFormatDesc *d, CUarray_format *f, unsigned *channels)
{
    if (!d)
        return false;
    int bits[4] = { d->x, d->y, d->z, d->w };
    unsigned n = 0;
    while (n < 4 && bits[n])
        n++;
    for (unsigned i = n; i < 4; i++)
        if (bits[i])
            return false;
    for (unsigned i = 1; i < n; i++)
        if (bits[i] != bits[0])
            return false;
    if (n != 1 && n != 2 && n != 4)
        return false;
    *channels = n;
    switch (d->f) {
    case cudaChannelFormatKindSigned:
        *f = bits[0] == 8 ? CU_AD_FORMAT_SIGNED_INT8 : bits[0] == 16 ? CU_AD_FORMAT_SIGNED_INT16
           : CU_AD_FORMAT_SIGNED_INT32;
        return bits[0] == 8 || bits[0] == 16 || bits[0] == 32;
    case cudaChannelFormatKindUnsigned:
        *f = bits[0] == 8 ? CU_AD_FORMAT_UNSIGNED_INT8 : bits[0] == 16 ? CU_AD_FORMAT_UNSIGNED_INT16
           : CU_AD_FORMAT_UNSIGNED_INT32;
        return bits[0] == 8 || bits[0] == 16 || bits[0] == 32;
    case cudaChannelFormatKindFloat:
        *f = bits[0] == 16 ? CU_AD_FORMAT_HALF : CU_AD_FORMAT_FLOAT;
        return bits[0] == 16 || bits[0] == 32;
    default:
        return false;
    }
}

struct cudaChannelFormatDesc CUDARTAPI cudaCreateChannelDesc(int x, int y, int z, int w, enum cudaChannelFormatKind f)
{
    return (struct cudaChannelFormatDesc){ .x = x, .y = y, .z = z, .w = w, .f = f };
}

static cudaError_t alloc_error(CUresult r)
{
    return r == CUDA_ERROR_OUT_OF_MEMORY ? record(cudaErrorMemoryAllocation) : ret(r);
}

/* The driver's descriptor of an array of `extent` elements of desc. */
static bool array_descriptor(const struct cudaChannelFormatDesc *desc, struct cudaExtent extent, unsigned flags,
                             CUDA_ARRAY3D_DESCRIPTOR *d)
{
    *d = (CUDA_ARRAY3D_DESCRIPTOR){ .Width = extent.width, .Height = extent.height, .Depth = extent.depth,
                                    .Flags = flags };
    return array_format(desc, &d->Format, &d->NumChannels);
}

cudaError_t CUDARTAPI cudaMalloc3DArray(cudaArray_t *array, const struct cudaChannelFormatDesc *desc,
                                        struct cudaExtent extent, unsigned int flags)
{
    READY();
    CUDA_ARRAY3D_DESCRIPTOR d;
    if (!array || !array_descriptor(desc, extent, flags, &d))
        return record(cudaErrorInvalidValue);
    CUarray a = NULL;
    CUresult r = drv.Array3DCreate(&a, &d);
    *array = (cudaArray_t)a;
    return alloc_error(r);
}

cudaError_t CUDARTAPI cudaMallocArray(cudaArray_t *array, const struct cudaChannelFormatDesc *desc, size_t width,
                                      size_t height, unsigned int flags)
{
    struct cudaExtent e = { .width = width, .height = height, .depth = 0 };
    return cudaMalloc3DArray(array, desc, e, flags);
}

cudaError_t CUDARTAPI cudaFreeArray(cudaArray_t array)
{
    READY();
    return array ? ret(drv.ArrayDestroy((CUarray)array)) : cudaSuccess;
}

cudaError_t CUDARTAPI cudaMallocMipmappedArray(cudaMipmappedArray_t *mipmappedArray,
                                               const struct cudaChannelFormatDesc *desc, struct cudaExtent extent,
                                               unsigned int numLevels, unsigned int flags)
{
    READY();
    CUDA_ARRAY3D_DESCRIPTOR d;
    if (!mipmappedArray || !array_descriptor(desc, extent, flags, &d))
        return record(cudaErrorInvalidValue);
    CUmipmappedArray m = NULL;
    CUresult r = drv.MipmappedArrayCreate(&m, &d, numLevels);
    *mipmappedArray = (cudaMipmappedArray_t)m;
    return alloc_error(r);
}

cudaError_t CUDARTAPI cudaGetMipmappedArrayLevel(cudaArray_t *levelArray, cudaMipmappedArray_const_t mipmappedArray,
                                                 unsigned int level)
{
    READY();
    CUarray a = NULL;
    if (!levelArray)
        return record(cudaErrorInvalidValue);
    CUresult r = drv.MipmappedArrayGetLevel(&a, (CUmipmappedArray)(uintptr_t)mipmappedArray, level);
    if (r == CUDA_SUCCESS)
        *levelArray = (cudaArray_t)a;
    return ret(r);
}

cudaError_t CUDARTAPI cudaFreeMipmappedArray(cudaMipmappedArray_t mipmappedArray)
{
    READY();
    return mipmappedArray ? ret(drv.MipmappedArrayDestroy((CUmipmappedArray)mipmappedArray)) : cudaSuccess;
}

/* A 2-D copy with an array on one side (the other as kind says). */
static cudaError_t memcpy2d_array(cudaArray_const_t array, bool to_array, size_t w_offset, size_t h_offset, void *p,
                                  size_t pitch, size_t width, size_t height, enum cudaMemcpyKind kind)
{
    READY();
    CUDA_MEMCPY2D c;
    memset(&c, 0, sizeof(c));
    CUmemorytype st, dt;
    if (!pitched_types(kind, &st, &dt))
        return record(cudaErrorInvalidMemcpyDirection);
    if (height > 1 && pitch < width)
        return record(cudaErrorInvalidPitchValue);
    if (to_array) {
        pitched_side(st, p, &c.srcMemoryType, &c.srcHost, &c.srcDevice);
        c.srcPitch = pitch;
        c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
        c.dstArray = (CUarray)(uintptr_t)array;
        c.dstXInBytes = w_offset;
        c.dstY = h_offset;
    } else {
        pitched_side(dt, p, &c.dstMemoryType, (const void **)&c.dstHost, &c.dstDevice);
        c.dstPitch = pitch;
        c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
        c.srcArray = (CUarray)(uintptr_t)array;
        c.srcXInBytes = w_offset;
        c.srcY = h_offset;
    }
    c.WidthInBytes = width;
    c.Height = height;
    return ret(drv.Memcpy2DUnaligned(&c));
}

cudaError_t CUDARTAPI cudaMemcpy2DToArray(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src,
                                          size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind)
{ return memcpy2d_array(dst, true, wOffset, hOffset, (void *)(uintptr_t)src, spitch, width, height, kind); }

cudaError_t CUDARTAPI cudaMemcpy2DFromArray(void *dst, size_t dpitch, cudaArray_const_t src, size_t wOffset,
                                            size_t hOffset, size_t width, size_t height, enum cudaMemcpyKind kind)
{ return memcpy2d_array(src, false, wOffset, hOffset, dst, dpitch, width, height, kind); }

static cudaError_t memcpy_sync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, bool ptds)
{
    READY();
    CUdeviceptr d = (CUdeviceptr)(uintptr_t)dst, s = (CUdeviceptr)(uintptr_t)src;
    switch (kind) {
    case cudaMemcpyHostToDevice:
        return ret(ptds ? drv.MemcpyHtoD_ptds(d, src, count) : drv.MemcpyHtoD(d, src, count));
    case cudaMemcpyDeviceToHost:
        return ret(ptds ? drv.MemcpyDtoH_ptds(dst, s, count) : drv.MemcpyDtoH(dst, s, count));
    case cudaMemcpyDeviceToDevice:
        return ret(ptds ? drv.MemcpyDtoD_ptds(d, s, count) : drv.MemcpyDtoD(d, s, count));
    case cudaMemcpyHostToHost:
        /* One row of a pitched copy between host memory types, as static
         * cudart 13 does it (cuMemcpy2DUnaligned, seen on an H200). */
        return memcpy2d(dst, count, src, count, count, 1, kind, NULL, ptds, false);
    case cudaMemcpyDefault:
        return ret(ptds ? drv.Memcpy_ptds(d, s, count) : drv.Memcpy(d, s, count));
    default:
        return record(cudaErrorInvalidMemcpyDirection);
    }
}

cudaError_t CUDARTAPI cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{ return memcpy_sync(dst, src, count, kind, false); }
cudaError_t CUDARTAPI cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{ return memcpy_sync(dst, src, count, kind, true); }

/* The driver classifies both pointers (unified addressing), so every kind
 * goes through cuMemcpyAsync; the kind is checked for range only. */
static cudaError_t memcpy_async(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                cudaStream_t stream, bool ptds)
{
    READY();
    if ((int)kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
        return record(cudaErrorInvalidMemcpyDirection);
    CUdeviceptr d = (CUdeviceptr)(uintptr_t)dst, s = (CUdeviceptr)(uintptr_t)src;
    return ret(ptds ? drv.MemcpyAsync_ptsz(d, s, count, stream) : drv.MemcpyAsync(d, s, count, stream));
}

cudaError_t CUDARTAPI cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                      cudaStream_t stream)
{ return memcpy_async(dst, src, count, kind, stream, false); }
cudaError_t CUDARTAPI cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                           cudaStream_t stream)
{ return memcpy_async(dst, src, count, kind, stream, true); }

/* Peer copies name devices; the driver takes their primary contexts. */
static cudaError_t peer_contexts(int dst_dev, int src_dev, CUcontext *dctx, CUcontext *sctx)
{
    int n = 0;
    drv.DeviceGetCount(&n);
    if (dst_dev < 0 || dst_dev >= n || src_dev < 0 || src_dev >= n || n > 64)
        return record(cudaErrorInvalidDevice);
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&ctx_lock);
    for (int i = 0; i < 2 && r == CUDA_SUCCESS; i++) {
        int d = i ? src_dev : dst_dev;
        if (!primary[d] && (r = drv.DevicePrimaryCtxRetain(&primary[d], d)) != CUDA_SUCCESS)
            primary[d] = NULL;
    }
    *dctx = primary[dst_dev];
    *sctx = primary[src_dev];
    pthread_mutex_unlock(&ctx_lock);
    return r == CUDA_SUCCESS ? cudaSuccess : record(from_cu(r));
}

cudaError_t CUDARTAPI cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice, size_t count)
{
    READY();
    CUcontext dctx, sctx;
    cudaError_t e = peer_contexts(dstDevice, srcDevice, &dctx, &sctx);
    if (e != cudaSuccess)
        return e;
    return ret(drv.MemcpyPeer((CUdeviceptr)(uintptr_t)dst, dctx, (CUdeviceptr)(uintptr_t)src, sctx, count));
}
cudaError_t CUDARTAPI cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice, size_t count,
                                          cudaStream_t stream)
{
    READY();
    CUcontext dctx, sctx;
    cudaError_t e = peer_contexts(dstDevice, srcDevice, &dctx, &sctx);
    if (e != cudaSuccess)
        return e;
    return ret(drv.MemcpyPeerAsync((CUdeviceptr)(uintptr_t)dst, dctx, (CUdeviceptr)(uintptr_t)src, sctx, count,
                                   stream));
}

cudaError_t CUDARTAPI cudaMemset(void *devPtr, int value, size_t count)
{
    READY();
    return ret(drv.MemsetD8((CUdeviceptr)(uintptr_t)devPtr, (unsigned char)value, count));
}
cudaError_t CUDARTAPI cudaMemset_ptds(void *devPtr, int value, size_t count)
{
    READY();
    return ret(drv.MemsetD8_ptds((CUdeviceptr)(uintptr_t)devPtr, (unsigned char)value, count));
}
cudaError_t CUDARTAPI cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    READY();
    return ret(drv.MemsetD8Async((CUdeviceptr)(uintptr_t)devPtr, (unsigned char)value, count, stream));
}
cudaError_t CUDARTAPI cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    READY();
    return ret(drv.MemsetD8Async_ptsz((CUdeviceptr)(uintptr_t)devPtr, (unsigned char)value, count, stream));
}

cudaError_t CUDARTAPI cudaMemset2D(void *devPtr, size_t pitch, int value, size_t width, size_t height)
{
    READY();
    return ret(drv.MemsetD2D8((CUdeviceptr)(uintptr_t)devPtr, pitch, (unsigned char)value, width, height));
}
cudaError_t CUDARTAPI cudaMemset2DAsync(void *devPtr, size_t pitch, int value, size_t width, size_t height,
                                        cudaStream_t stream)
{
    READY();
    return ret(drv.MemsetD2D8Async((CUdeviceptr)(uintptr_t)devPtr, pitch, (unsigned char)value, width, height,
                                   stream));
}

static CUmemLocation to_cu_location(struct cudaMemLocation l)
{
    CUmemLocation c;
    memset(&c, 0, sizeof(c));
    c.type = (CUmemLocationType)l.type;
    c.id = l.id;
    return c;
}

cudaError_t CUDARTAPI cudaMemPrefetchAsync(const void *devPtr, size_t count, struct cudaMemLocation location,
                                           unsigned int flags, cudaStream_t stream)
{
    READY();
    return ret(drv.MemPrefetchAsync((CUdeviceptr)(uintptr_t)devPtr, count, to_cu_location(location), flags, stream));
}
cudaError_t CUDARTAPI cudaMemPrefetchAsync_ptsz(const void *devPtr, size_t count, struct cudaMemLocation location,
                                                unsigned int flags, cudaStream_t stream)
{
    READY();
    return ret(drv.MemPrefetchAsync_ptsz((CUdeviceptr)(uintptr_t)devPtr, count, to_cu_location(location), flags,
                                         stream));
}

cudaError_t CUDARTAPI cudaMemAdvise(const void *devPtr, size_t count, enum cudaMemoryAdvise advice,
                                    struct cudaMemLocation location)
{
    READY();
    return ret(drv.MemAdvise((CUdeviceptr)(uintptr_t)devPtr, count, (CUmem_advise)advice, to_cu_location(location)));
}

/* ---- launches ---- */

/* What a launch hands the driver: the kernel's CUkernel, as cudart 13
 * does — never the host stub, which the driver knows as a CUfunction. */
static CUfunction launch_handle(const void *func)
{
    void *k = cudart_kernel_handle ? cudart_kernel_handle(func) : NULL;
    return (CUfunction)(k ? k : (void *)(uintptr_t)func);
}

static cudaError_t launch(const void *func, dim3 g, dim3 b, void **args, size_t smem, cudaStream_t stream, bool ptds)
{
    READY();
    CUfunction f = launch_handle(func);
    CUresult r = ptds ? drv.LaunchKernel_ptsz(f, g.x, g.y, g.z, b.x, b.y, b.z, (unsigned)smem,
                                              stream, args, NULL)
                      : drv.LaunchKernel(f, g.x, g.y, g.z, b.x, b.y, b.z, (unsigned)smem, stream,
                                         args, NULL);
    if (r == CUDA_ERROR_INVALID_VALUE)
        return record(cudaErrorInvalidConfiguration);
    if (r == CUDA_ERROR_INVALID_HANDLE)
        return record(cudaErrorInvalidDeviceFunction);
    return ret(r);
}

cudaError_t CUDARTAPI cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                                       cudaStream_t stream)
{ return launch(func, gridDim, blockDim, args, sharedMem, stream, false); }
cudaError_t CUDARTAPI cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                            size_t sharedMem, cudaStream_t stream)
{ return launch(func, gridDim, blockDim, args, sharedMem, stream, true); }

cudaError_t CUDARTAPI cudaGetKernel(cudaKernel_t *kernelPtr, const void *entryFuncAddr)
{
    READY();
    if (!kernelPtr)
        return record(cudaErrorInvalidValue);
    void *k = cudart_kernel_handle ? cudart_kernel_handle(entryFuncAddr) : NULL;
    if (!k)
        return record(cudaErrorInvalidDeviceFunction);
    *kernelPtr = (cudaKernel_t)k;
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaGetFuncBySymbol(cudaFunction_t *functionPtr, const void *symbolPtr)
{
    READY();
    if (!functionPtr)
        return record(cudaErrorInvalidValue);
    if (!cudart_kernel_handle || !cudart_kernel_handle(symbolPtr))
        return record(cudaErrorInvalidDeviceFunction);
    *functionPtr = (cudaFunction_t)(uintptr_t)symbolPtr;
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaFuncGetParamInfo(const void *func, size_t paramIndex, size_t *paramOffset,
                                           size_t *paramSize)
{
    READY();
    CUresult r = drv.FuncGetParamInfo((CUfunction)func, paramIndex, paramOffset, paramSize);
    return r == CUDA_ERROR_INVALID_HANDLE ? record(cudaErrorInvalidDeviceFunction) : ret(r);
}

/* ---- streams ---- */

cudaError_t CUDARTAPI cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority)
{
    READY();
    return ret(drv.StreamCreateWithPriority(pStream, flags, priority));
}
cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{ return cudaStreamCreateWithPriority(pStream, flags, 0); }
cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t *pStream)
{ return cudaStreamCreateWithPriority(pStream, cudaStreamDefault, 0); }

cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t stream)
{
    READY();
    return ret(drv.StreamDestroy(stream));
}
cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t stream)
{
    READY();
    return ret(drv.StreamSynchronize(stream));
}
cudaError_t CUDARTAPI cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
    READY();
    return ret(drv.StreamSynchronize_ptsz(stream));
}
/* NOT_READY is a status, not an error: it does not become the last error. */
cudaError_t CUDARTAPI cudaStreamQuery(cudaStream_t stream)
{
    READY();
    CUresult r = drv.StreamQuery(stream);
    return r == CUDA_ERROR_NOT_READY ? cudaErrorNotReady : ret(r);
}
cudaError_t CUDARTAPI cudaStreamQuery_ptsz(cudaStream_t stream)
{
    READY();
    CUresult r = drv.StreamQuery_ptsz(stream);
    return r == CUDA_ERROR_NOT_READY ? cudaErrorNotReady : ret(r);
}
cudaError_t CUDARTAPI cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    READY();
    return ret(drv.StreamWaitEvent(stream, event, flags));
}
cudaError_t CUDARTAPI cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    READY();
    return ret(drv.StreamWaitEvent_ptsz(stream, event, flags));
}

/* ---- events ---- */

cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    READY();
    return ret(drv.EventCreate(event, flags));
}
cudaError_t CUDARTAPI cudaEventCreate(cudaEvent_t *event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }
cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    READY();
    return ret(drv.EventRecord(event, stream));
}
cudaError_t CUDARTAPI cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream)
{
    READY();
    return ret(drv.EventRecord_ptsz(event, stream));
}
cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t event)
{
    READY();
    return ret(drv.EventSynchronize(event));
}
cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t event)
{
    READY();
    CUresult r = drv.EventQuery(event);
    return r == CUDA_ERROR_NOT_READY ? cudaErrorNotReady : ret(r);
}
cudaError_t CUDARTAPI cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    READY();
    CUresult r = drv.EventElapsedTime(ms, start, end);
    return r == CUDA_ERROR_NOT_READY ? cudaErrorNotReady : ret(r);
}
cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t event)
{
    READY();
    return ret(drv.EventDestroy(event));
}

/* ---- graphs (stream capture) and host functions ---- */

cudaError_t CUDARTAPI cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    READY();
    return ret(drv.StreamBeginCapture(stream, (CUstreamCaptureMode)mode));
}
cudaError_t CUDARTAPI cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
    READY();
    return ret(drv.StreamEndCapture(stream, (CUgraph *)pGraph));
}
cudaError_t CUDARTAPI cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus)
{
    READY();
    return ret(drv.StreamIsCapturing(stream, (CUstreamCaptureStatus *)pCaptureStatus));
}
cudaError_t CUDARTAPI cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    READY();
    return ret(drv.ThreadExchangeStreamCaptureMode((CUstreamCaptureMode *)mode));
}
cudaError_t CUDARTAPI cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags)
{
    READY();
    return ret(drv.GraphInstantiateWithFlags((CUgraphExec *)pGraphExec, (CUgraph)graph, flags));
}
cudaError_t CUDARTAPI cudaGraphInstantiateWithFlags(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                                    unsigned long long flags)
{
    return cudaGraphInstantiate(pGraphExec, graph, flags);
}
cudaError_t CUDARTAPI cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    READY();
    return ret(drv.GraphLaunch((CUgraphExec)graphExec, stream));
}
cudaError_t CUDARTAPI cudaGraphExecDestroy(cudaGraphExec_t graphExec)
{
    READY();
    return ret(drv.GraphExecDestroy((CUgraphExec)graphExec));
}
cudaError_t CUDARTAPI cudaGraphDestroy(cudaGraph_t graph)
{
    READY();
    return ret(drv.GraphDestroy((CUgraph)graph));
}
cudaError_t CUDARTAPI cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    READY();
    return ret(drv.LaunchHostFunc(stream, (CUhostFn)fn, userData));
}

/* cudaStreamAddCallback: a host function that calls back with the stream
 * and cudaSuccess (the stream's earlier work succeeded, or the device's
 * sticky error ends every later call anyway).  Not capturable (CUDA says
 * so: use cudaLaunchHostFunc). */
struct stream_callback {
    cudaStreamCallback_t cb;
    cudaStream_t stream;
    void *data;
};

static void CUDA_CB run_stream_callback(void *arg)
{
    struct stream_callback c = *(struct stream_callback *)arg;
    free(arg);
    c.cb(c.stream, cudaSuccess, c.data);
}

cudaError_t CUDARTAPI cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback, void *userData,
                                            unsigned int flags)
{
    READY();
    if (!callback || flags != 0)
        return ret(CUDA_ERROR_INVALID_VALUE);
    CUstreamCaptureStatus st;
    CUresult r = drv.StreamIsCapturing(stream, &st);
    if (r != CUDA_SUCCESS)
        return ret(r);
    if (st != CU_STREAM_CAPTURE_STATUS_NONE)
        return ret(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    struct stream_callback *c = malloc(sizeof(*c));
    if (!c)
        return ret(CUDA_ERROR_OUT_OF_MEMORY);
    *c = (struct stream_callback){ callback, stream, userData };
    r = drv.LaunchHostFunc(stream, run_stream_callback, c);
    if (r != CUDA_SUCCESS)
        free(c);
    return ret(r);
}
