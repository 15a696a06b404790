/*
 * api_memory.c — allocation, copies and memsets.
 *
 * Copies that touch host memory are done by the host through its private
 * view of device memory, in stream order (queue.c, sim_gated_host_copy);
 * they return once the copy is done, which is what real CUDA does for
 * pageable host memory.  The Async forms with pinned host memory
 * (pinned.c) return once the copy is queued; the host copy engine thread
 * moves the bytes when the stream reaches it.  Device-to-device copies and
 * memsets run in the device process, asynchronously, as real CUDA does.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static CUdeviceptr window_ptr(struct sim_device *d, uint64_t off)
{
    return (CUdeviceptr)(uintptr_t)(d->window + off);
}

/* Takes `bytes` from one of d's areas (device memory, or the managed area
 * that starts `base` bytes into the window). */
static CUresult alloc_in(struct sim_device *d, struct sim_alloc *area, uint64_t base, size_t bytes,
                         CUdeviceptr *dptr)
{
    uint64_t off;
    pthread_mutex_lock(&d->alloc_lock);
    int rc = sim_alloc_get(area, bytes, &off);
    pthread_mutex_unlock(&d->alloc_lock);
    if (rc)
        return rc == -ENOMEM ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE;
    *dptr = window_ptr(d, base + off);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    struct sim_device *d;
    CUresult r = sim_current_device(&d);
    if (r != CUDA_SUCCESS)
        return r;
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = sim_capture_unsafe_call()) != CUDA_SUCCESS)
        return r;
    return alloc_in(d, &d->device_mem, 0, bytesize, dptr);
}

/* One device's share of simgpu_profiler_reserve. */
static int profiler_reserve_on(struct sim_device *d, size_t bytes)
{
    CUdeviceptr p;
    if (bytes == 0 || alloc_in(d, &d->device_mem, 0, bytes, &p) == CUDA_SUCCESS)
        return 0;
    __atomic_store_n(&d->sh->uvm_lost, 1, __ATOMIC_RELEASE);
    return -ENOMEM;
}

__attribute__((visibility("default")))
int simgpu_profiler_reserve(size_t bytes)
{
    struct sim_device *d;
    if (sim_current_device(&d) == CUDA_SUCCESS)
        return profiler_reserve_on(d, bytes);
    /* No current context on this thread: the devices whose primary
     * context another thread made. */
    int rc = -ENODEV;
    for (int i = 0; __atomic_load_n(&sim.initialized, __ATOMIC_ACQUIRE) && i < sim.ndevices; i++) {
        if (__atomic_load_n(&sim.dev[i].ctx.refcount, __ATOMIC_RELAXED) == 0)
            continue;
        if ((rc = profiler_reserve_on(&sim.dev[i], bytes)) != 0)
            break;
    }
    return rc;
}

CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    struct sim_device *d;
    CUresult r = sim_current_device(&d);
    if (r != CUDA_SUCCESS)
        return r;
    if (!dptr || bytesize == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = sim_capture_unsafe_call()) != CUDA_SUCCESS)
        return r;
    return alloc_in(d, &d->managed_mem, d->mem_bytes, bytesize, dptr);   /* up to host memory */
}

/* Height rows of WidthInBytes each, a pitch apart: the width rounded up
 * to 512 bytes, the alignment drivers give (cudaMallocPitch). */
CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                    unsigned int ElementSizeBytes)
{
    if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0 ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t pitch = (WidthInBytes + 511) & ~(size_t)511;
    if (Height > SIZE_MAX / pitch)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = cuMemAlloc_v2(dptr, pitch * Height);
    if (r == CUDA_SUCCESS)
        *pPitch = pitch;
    return r;
}

/* Stream-ordered allocation: the memory is taken at once, from the current
 * device's memory (its pools, below, keep nothing back), and
 * cuMemFreeAsync frees it once the device is idle, which covers the
 * stream's earlier work. */
CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    (void)hStream;
    return cuMemAlloc_v2(dptr, bytesize);
}

CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return cuMemAllocAsync(dptr, bytesize, hStream);
}

/* Memory pools: a pool names the device its allocations come from, and
 * holds the attributes a program sets. Nothing is kept back: a free gives
 * the memory to the device at once, so the release threshold and the
 * reuse policies change nothing, cuMemPoolTrimTo has nothing to trim, and
 * maxSize is not enforced. The usage counters (RESERVED_MEM_*, USED_MEM_*)
 * are not kept: CUDA_ERROR_NOT_SUPPORTED. No IPC handle types. Each device
 * has a default pool, its current one until cuDeviceSetMemPool. */
#define SIM_POOL_MAGIC 0x4c4f4f50u /* "POOL" */
struct sim_pool {
    uint32_t magic;
    int ordinal;
    bool is_default;
    cuuint64_t release_threshold;
    int reuse[3];   /* FOLLOW_EVENT_DEPENDENCIES, ALLOW_OPPORTUNISTIC, ALLOW_INTERNAL_DEPENDENCIES */
    struct sim_pool *next_destroyed;
};
static struct sim_pool *destroyed_pools;   /* kept, so that their handles read as destroyed */
static struct sim_pool default_pools[SIM_MAX_DEVICES];
static struct sim_pool *current_pools[SIM_MAX_DEVICES];   /* NULL: the default */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

static struct sim_pool *default_pool(int ordinal)
{
    struct sim_pool *p = &default_pools[ordinal];
    pthread_mutex_lock(&pool_lock);
    if (p->magic != SIM_POOL_MAGIC)
        *p = (struct sim_pool){ .magic = SIM_POOL_MAGIC, .ordinal = ordinal, .is_default = true,
                                .reuse = { 1, 1, 1 } };
    pthread_mutex_unlock(&pool_lock);
    return p;
}

/* The pool behind a handle, or NULL (never created, or destroyed). */
static struct sim_pool *pool_of(CUmemoryPool h)
{
    struct sim_pool *p = (struct sim_pool *)h;
    return p && __atomic_load_n(&p->magic, __ATOMIC_ACQUIRE) == SIM_POOL_MAGIC ? p : NULL;
}

CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pool || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        props->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (props->location.id < 0 || props->location.id >= sim.ndevices)
        return CUDA_ERROR_INVALID_DEVICE;
    if (props->handleTypes != CU_MEM_HANDLE_TYPE_NONE)
        return CUDA_ERROR_NOT_SUPPORTED;
    struct sim_pool *p = calloc(1, sizeof(*p));
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *p = (struct sim_pool){ .magic = SIM_POOL_MAGIC, .ordinal = props->location.id, .reuse = { 1, 1, 1 } };
    *pool = (CUmemoryPool)p;
    return CUDA_SUCCESS;
}

/* The device's current pool becomes its default again if it was this one.
 * The struct is kept (destroyed_pools): a stale handle must read as
 * destroyed, not as whatever was allocated there next. */
CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool)
{
    struct sim_pool *p = pool_of(pool);
    if (!p || p->is_default)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pool_lock);
    if (p->magic != SIM_POOL_MAGIC) { /* another thread destroyed it first */
        pthread_mutex_unlock(&pool_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (current_pools[p->ordinal] == p)
        current_pools[p->ordinal] = NULL;
    __atomic_store_n(&p->magic, 0, __ATOMIC_RELEASE);
    p->next_destroyed = destroyed_pools;
    destroyed_pools = p;
    pthread_mutex_unlock(&pool_lock);
    return CUDA_SUCCESS;
}

/* dev's default pool, or its current one. */
static CUresult device_pool(CUmemoryPool *pool, CUdevice dev, bool current)
{
    CUresult r = sim_check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_pool *p = NULL;
    if (current) {
        pthread_mutex_lock(&pool_lock);
        p = current_pools[dev];
        pthread_mutex_unlock(&pool_lock);
    }
    *pool = (CUmemoryPool)(p ? p : default_pool(dev));
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
    return device_pool(pool, dev, false);
}

CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    return device_pool(pool, dev, true);
}

CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    CUresult r = sim_check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_pool *p = pool_of(pool);
    if (!p || p->ordinal != dev)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pool_lock);
    if (p->magic != SIM_POOL_MAGIC) { /* destroyed meanwhile */
        pthread_mutex_unlock(&pool_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    current_pools[dev] = p->is_default ? NULL : p;
    pthread_mutex_unlock(&pool_lock);
    return CUDA_SUCCESS;
}

static CUresult pool_attribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value, bool set)
{
    struct sim_pool *p = pool_of(pool);
    if (!p || !value)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: {
        int *slot = &p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES];
        if (set)
            *slot = *(const int *)value != 0;
        else
            *(int *)value = *slot;
        return CUDA_SUCCESS;
    }
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        if (set)
            p->release_threshold = *(const cuuint64_t *)value;
        else
            *(cuuint64_t *)value = p->release_threshold;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        return CUDA_ERROR_NOT_SUPPORTED;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    return pool_attribute(pool, attr, value, true);
}

CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    return pool_attribute(pool, attr, value, false);
}

CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    (void)minBytesToKeep;
    return pool_of(pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* From the pool's device, whichever device is current. */
static CUresult alloc_from_pool(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream s, bool ptds)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_pool *p = pool_of(pool);
    if (!dptr || !p || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_device *sd;
    uint32_t slot;
    if ((r = sim_stream_resolve(s, ptds, &sd, &slot)) != CUDA_SUCCESS)
        return r;
    if ((r = sim_capture_unsafe_call()) != CUDA_SUCCESS)
        return r;
    struct sim_device *d = &sim.dev[p->ordinal];
    return alloc_in(d, &d->device_mem, 0, bytesize, dptr);
}

CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
    return alloc_from_pool(dptr, bytesize, pool, hStream, false);
}

CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                              CUstream hStream)
{
    return alloc_from_pool(dptr, bytesize, pool, hStream, true);
}

CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    (void)hStream;
    return cuMemFree_v2(dptr);
}

CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    return cuMemFreeAsync(dptr, hStream);
}

/* cuMemFree may synchronize (cuda.h); this one always does, on the owning
 * device, so no queued op still uses the memory.  Freed pages go back to
 * the system (a later allocation reads zeros, not old data). */
CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (dptr == 0)
        return CUDA_SUCCESS;
    if ((r = sim_capture_unsafe_call()) != CUDA_SUCCESS)
        return r;
    struct sim_device *d = NULL;
    for (int i = 0; i < sim.ndevices; i++) {
        uint64_t base = (uint64_t)(uintptr_t)sim.dev[i].window;
        if (dptr >= base && dptr < base + sim.dev[i].window_bytes)
            d = &sim.dev[i];
    }
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    if (d->sh->sticky_error)
        return (CUresult)d->sh->sticky_error;
    int rc = sim_device_sync(d);
    if (rc)
        return sim_errno_to_cu(rc);
    uint64_t off = dptr - (uint64_t)(uintptr_t)d->window;
    bool managed = off >= d->mem_bytes;
    if (managed) {
        /* freed managed blocks go back to their initial state: on the host */
        struct sim_device *md;
        if (sim_ptr_classify(dptr, 1, &md, NULL) != SIM_PTR_MANAGED)
            return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&d->alloc_lock);
        const struct sim_extent *me = sim_alloc_find(&d->managed_mem, off - d->mem_bytes, 1);
        uint64_t msize = me ? me->size : 0;
        pthread_mutex_unlock(&d->alloc_lock);
        struct sim_op op = { .kind = SIM_OP_PREFETCH, .stream = SIM_STREAM_LEGACY_SLOT };
        op.u.prefetch.addr = dptr;
        op.u.prefetch.bytes = msize;
        op.u.prefetch.to_device = SIM_PREFETCH_DISCARD;  /* home, but nothing crosses the bus */
        if ((rc = sim_submit(d, &op, NULL)) || (rc = sim_device_sync(d)))
            return sim_errno_to_cu(rc);
    }
    struct sim_alloc *a = managed ? &d->managed_mem : &d->device_mem;
    uint64_t aoff = managed ? off - d->mem_bytes : off;
    pthread_mutex_lock(&d->alloc_lock);
    const struct sim_extent *e = sim_alloc_find(a, aoff, 1);
    uint64_t size = e && e->off == aoff ? e->size : 0;
    if (size)
        sim_alloc_put(a, aoff);
    pthread_mutex_unlock(&d->alloc_lock);
    if (!size)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t lo = (off + 4095) & ~4095ull, hi = (off + size) & ~4095ull;
    if (hi > lo)
        fallocate(d->memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)lo, (off_t)(hi - lo));
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    struct sim_device *d;
    CUresult r = sim_current_device(&d);
    if (r != CUDA_SUCCESS)
        return r;
    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&d->alloc_lock);
    *total = d->mem_bytes;
    *free_bytes = d->mem_bytes - d->device_mem.used_bytes;
    pthread_mutex_unlock(&d->alloc_lock);
    return CUDA_SUCCESS;
}

/* ---- copies ---- */

enum dir { HTOD, DTOH };

/* `async`: an Async API form.  From or to pinned host memory it returns
 * once the copy is queued (the copy engine moves the bytes in stream
 * order); with pageable memory, and for the synchronous forms, it returns
 * once the bytes moved. */
/* The capture check of a copy (dst, src unified addresses). */
static CUresult capture_copy(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s, bool ptds, bool async,
                             bool *captured)
{
    struct sim_gnode node = { .kind = SIM_GNODE_COPY, .dst = dst, .src = src, .bytes = n };
    return sim_capture_op(s, ptds, !async, &node, captured);
}

static CUresult host_copy(enum dir dir, CUdeviceptr dev, void *host, size_t n, CUstream s, bool ptds, bool async)
{
    struct sim_device *sd, *d;
    uint32_t slot;
    CUresult r = sim_stream_resolve(s, ptds, &sd, &slot);
    if (r != CUDA_SUCCESS)
        return r;
    bool captured;
    CUdeviceptr h = (CUdeviceptr)(uintptr_t)host;
    if ((r = capture_copy(dir == HTOD ? dev : h, dir == HTOD ? h : dev, n, s, ptds, async, &captured)) !=
            CUDA_SUCCESS ||
        captured)
        return r;
    if (n == 0)
        return CUDA_SUCCESS;
    if (!host)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned char *view;
    int kind = sim_ptr_classify(dev, n, &d, &view);
    if (kind <= SIM_PTR_HOST || d != sd)
        return CUDA_ERROR_INVALID_VALUE;
    /* the host side may be host or managed memory (the host touches the
     * latter through its own window, faulting blocks home), never device */
    struct sim_device *hd;
    int hk = sim_ptr_classify((uint64_t)(uintptr_t)host, n, &hd, NULL);
    if (hk < 0 || hk == SIM_PTR_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    bool pinned = hk == SIM_PTR_HOST && sim_pinned_find((uint64_t)(uintptr_t)host, n, NULL);
    enum simgpu_bus_dir bus = dir == HTOD ? SIMGPU_BUS_HTOD : SIMGPU_BUS_DTOH;
    void *to = dir == HTOD ? (void *)view : host;
    const void *from = dir == HTOD ? (const void *)host : view;
    /* with managed memory on either side, what crosses the bus is the
     * migrations the copy's faults cause: the copy itself is not charged */
    enum sim_copy_charge charge = kind == SIM_PTR_MANAGED || hk == SIM_PTR_MANAGED ? SIM_CHARGE_NONE
                                : pinned                                         ? SIM_CHARGE_PINNED
                                                                                 : SIM_CHARGE_PAGEABLE;
    int rc = pinned && async ? sim_async_host_copy(d, slot, to, from, n, bus, charge)
                             : sim_gated_host_copy(d, slot, to, from, n, bus, charge);
    if (d->sh->sticky_error)
        return (CUresult)d->sh->sticky_error;
    if (rc)
        return sim_errno_to_cu(rc);
    struct simgpu_stats *st = &d->sh->stats;
    sim_stats_add(d, dir == HTOD ? &st->htod_bytes : &st->dtoh_bytes, n);
    sim_stats_add(d, dir == HTOD ? &st->htod_transfers : &st->dtoh_transfers, 1);
    return CUDA_SUCCESS;
}

static CUresult dtod_copy(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s, bool ptds, bool async)
{
    struct sim_device *sd, *dd, *srcd;
    uint32_t slot;
    CUresult r = sim_stream_resolve(s, ptds, &sd, &slot);
    if (r != CUDA_SUCCESS)
        return r;
    bool captured;
    if ((r = capture_copy(dst, src, n, s, ptds, async, &captured)) != CUDA_SUCCESS || captured)
        return r;
    if (n == 0)
        return CUDA_SUCCESS;
    unsigned char *dview, *sview;
    if (sim_ptr_classify(dst, n, &dd, &dview) <= SIM_PTR_HOST ||
        sim_ptr_classify(src, n, &srcd, &sview) <= SIM_PTR_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    if (dd != srcd) {
        /* between devices: through the host's views, after both drained */
        int rc = sim_device_sync(dd);
        if (!rc)
            rc = sim_device_sync(srcd);
        if (rc)
            return sim_errno_to_cu(rc);
        memmove(dview, sview, n);
        sim_stats_add(srcd, &srcd->sh->stats.dtod_bytes, n);
        sim_stats_add(srcd, &srcd->sh->stats.dtod_transfers, 1);
        return CUDA_SUCCESS;
    }
    if (dd != sd)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_op op = { .kind = SIM_OP_DTOD, .stream = slot };
    op.u.copy.dst = dst;
    op.u.copy.src = src;
    op.u.copy.bytes = n;
    return sim_errno_to_cu(sim_submit(sd, &op, NULL));
}

/* cuMemcpy with unified addressing: the kinds of both pointers decide. */
static CUresult uva_copy(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s, bool ptds, bool async)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_device *d;
    int dk = sim_ptr_classify(dst, n, &d, NULL), sk = sim_ptr_classify(src, n, &d, NULL);
    if (dk < 0 || sk < 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (dk == SIM_PTR_HOST && sk == SIM_PTR_HOST) {
        struct sim_device *sd;
        uint32_t slot;
        bool captured;
        if ((r = capture_copy(dst, src, n, s, ptds, async, &captured)) != CUDA_SUCCESS || captured)
            return r;
        r = sim_stream_resolve(s, ptds, &sd, &slot);
        if (r == CUDA_SUCCESS)
            r = sim_errno_to_cu(sim_stream_sync(sd, slot));
        if (r == CUDA_SUCCESS && n)
            memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
        return r;
    }
    if (sk == SIM_PTR_HOST)
        return host_copy(HTOD, dst, (void *)(uintptr_t)src, n, s, ptds, async);
    if (dk == SIM_PTR_HOST)
        return host_copy(DTOH, src, (void *)(uintptr_t)dst, n, s, ptds, async);
    return dtod_copy(dst, src, n, s, ptds, async);
}

CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{ return host_copy(HTOD, dst, (void *)src, n, NULL, false, false); }
CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n)
{ return host_copy(HTOD, dst, (void *)src, n, NULL, true, false); }
CUresult CUDAAPI cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{ return host_copy(DTOH, src, dst, n, NULL, false, false); }
CUresult CUDAAPI cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n)
{ return host_copy(DTOH, src, dst, n, NULL, true, false); }
CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{ return dtod_copy(dst, src, n, NULL, false, false); }
CUresult CUDAAPI cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{ return dtod_copy(dst, src, n, NULL, true, false); }
CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{ return host_copy(HTOD, dst, (void *)src, n, s, false, true); }
CUresult CUDAAPI cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{ return host_copy(HTOD, dst, (void *)src, n, s, true, true); }
CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s)
{ return host_copy(DTOH, src, dst, n, s, false, true); }
CUresult CUDAAPI cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, CUstream s)
{ return host_copy(DTOH, src, dst, n, s, true, true); }
CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{ return dtod_copy(dst, src, n, s, false, true); }
CUresult CUDAAPI cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{ return dtod_copy(dst, src, n, s, true, true); }
CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{ return uva_copy(dst, src, n, NULL, false, false); }
CUresult CUDAAPI cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{ return uva_copy(dst, src, n, NULL, true, false); }
CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{ return uva_copy(dst, src, n, s, false, true); }
CUresult CUDAAPI cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{ return uva_copy(dst, src, n, s, true, true); }

/* Batches of 1-D copies (CUDA 12.8; CUDA 13 dropped failIdx): the checks
 * cuda.h names, then the copies in stream order, one after another; the
 * attributes' hints change nothing here (pageable copies are made when
 * the stream reaches them, as every pageable copy here is). */
static CUresult batch_copy(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                           CUmemcpyAttributes *attrs, size_t *attrs_idxs, size_t num_attrs, size_t *fail_idx,
                           CUstream s, bool ptds)
{
    if (fail_idx)
        *fail_idx = SIZE_MAX;
    if (!count || !dsts || !srcs || !sizes || !attrs || !attrs_idxs || !num_attrs || num_attrs > count ||
        attrs_idxs[0] != 0 || s == CU_STREAM_LEGACY || (!ptds && !s))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t a = 0; a < num_attrs; a++) {
        if ((a && attrs_idxs[a] <= attrs_idxs[a - 1]) || attrs_idxs[a] >= count)
            return CUDA_ERROR_INVALID_VALUE;
        if (attrs[a].srcAccessOrder != CU_MEMCPY_SRC_ACCESS_ORDER_STREAM &&
            attrs[a].srcAccessOrder != CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL &&
            attrs[a].srcAccessOrder != CU_MEMCPY_SRC_ACCESS_ORDER_ANY)
            return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; i < count; i++) {
        CUresult r = uva_copy(dsts[i], srcs[i], sizes[i], s, ptds, true);
        if (r != CUDA_SUCCESS) {
            if (fail_idx)
                *fail_idx = i;
            return r;
        }
    }
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                       CUmemcpyAttributes *attrs, size_t *attrs_idxs, size_t num_attrs, CUstream s)
{ return batch_copy(dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, NULL, s, false); }
CUresult CUDAAPI cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                            CUmemcpyAttributes *attrs, size_t *attrs_idxs, size_t num_attrs,
                                            CUstream s)
{ return batch_copy(dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, NULL, s, true); }

/* Peer copies: both sides device (or managed) memory; with unified
 * addressing the pointers name their devices, the contexts are checked
 * only for being given. Host memory is refused, as by the driver. */
static CUresult peer_copy(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n, CUstream s,
                          bool ptds, bool async)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_device *d;
    if (!dctx || !sctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (sim_ptr_classify(dst, n, &d, NULL) <= SIM_PTR_HOST || sim_ptr_classify(src, n, &d, NULL) <= SIM_PTR_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    return dtod_copy(dst, src, n, s, ptds, async);
}

CUresult CUDAAPI cuMemcpyPeer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n)
{ return peer_copy(dst, dctx, src, sctx, n, NULL, false, false); }
CUresult CUDAAPI cuMemcpyPeer_ptds(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n)
{ return peer_copy(dst, dctx, src, sctx, n, NULL, true, false); }
CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n,
                                   CUstream s)
{ return peer_copy(dst, dctx, src, sctx, n, s, false, true); }
CUresult CUDAAPI cuMemcpyPeerAsync_ptsz(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n,
                                        CUstream s)
{ return peer_copy(dst, dctx, src, sctx, n, s, true, true); }

/* ---- pitched copies: row by row, each row a unified copy ---- */

/* One side of a pitched copy: where its rows start (x bytes into row y of
 * plane z) and how they are laid out (pitch bytes a row, height rows a
 * plane). */
struct pitched_side {
    CUmemorytype type;
    const void *host;
    CUdeviceptr dev;
    size_t x, y, z, pitch, height;
};

static CUresult row_address(const struct pitched_side *p, size_t y, size_t z, CUdeviceptr *out)
{
    size_t off = p->x + (p->y + y) * p->pitch + (p->z + z) * p->pitch * p->height;
    switch (p->type) {
    case CU_MEMORYTYPE_HOST:
        *out = (CUdeviceptr)(uintptr_t)p->host + off;
        return CUDA_SUCCESS;
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED:
        *out = p->dev + off;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE; /* arrays were made device sides (array_side) */
    }
}

/* A side that names an array (CU_MEMORYTYPE_ARRAY) becomes the device
 * memory its elements are in; the copy must stay inside the array. */
static CUresult array_side(struct pitched_side *p, CUarray a, size_t width, size_t height, size_t depth)
{
    if (p->type != CU_MEMORYTYPE_ARRAY)
        return CUDA_SUCCESS;
    struct sim_array_layout l;
    CUresult r = sim_array_side(a, &l);
    if (r != CUDA_SUCCESS)
        return r;
    if (p->x > l.row_bytes || width > l.row_bytes - p->x || p->y > l.rows || height > l.rows - p->y ||
        p->z > l.planes || depth > l.planes - p->z)
        return CUDA_ERROR_INVALID_VALUE;
    p->type = CU_MEMORYTYPE_DEVICE;
    p->dev = l.base;
    p->pitch = l.pitch;
    p->height = l.rows;
    return CUDA_SUCCESS;
}

static CUresult pitched_copy(const struct pitched_side *src, const struct pitched_side *dst, size_t width,
                             size_t height, size_t depth, CUstream s, bool ptds, bool async)
{
    /* cuda.h: a pitch, if given, holds the row from x; rows a plane, if
     * given, hold the rows from y; more than one plane needs them */
    const struct pitched_side *sides[2] = { src, dst };
    for (int k = 0; k < 2; k++) {
        const struct pitched_side *p = sides[k];
        if ((p->pitch && p->pitch < width + p->x) || (p->height && p->height < height + p->y) ||
            (depth > 1 && !p->height))
            return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t z = 0; z < depth; z++)
        for (size_t y = 0; y < height; y++) {
            CUdeviceptr from, to;
            CUresult r = row_address(src, y, z, &from);
            if (r == CUDA_SUCCESS)
                r = row_address(dst, y, z, &to);
            if (r == CUDA_SUCCESS)
                r = uva_copy(to, from, width, s, ptds, async);
            if (r != CUDA_SUCCESS)
                return r;
        }
    return CUDA_SUCCESS;
}

static CUresult copy2d(const CUDA_MEMCPY2D *c, CUstream s, bool ptds, bool async)
{
    if (!c)
        return CUDA_ERROR_INVALID_VALUE;
    struct pitched_side src = { c->srcMemoryType, c->srcHost, c->srcDevice, c->srcXInBytes, c->srcY, 0,
                                c->srcPitch, 0 };
    struct pitched_side dst = { c->dstMemoryType, c->dstHost, c->dstDevice, c->dstXInBytes, c->dstY, 0,
                                c->dstPitch, 0 };
    CUresult r = array_side(&src, c->srcArray, c->WidthInBytes, c->Height, 1);
    if (r == CUDA_SUCCESS)
        r = array_side(&dst, c->dstArray, c->WidthInBytes, c->Height, 1);
    return r != CUDA_SUCCESS ? r : pitched_copy(&src, &dst, c->WidthInBytes, c->Height, 1, s, ptds, async);
}

CUresult CUDAAPI cuMemcpy2D_v2(const CUDA_MEMCPY2D *c)
{ return copy2d(c, NULL, false, false); }
CUresult CUDAAPI cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *c)
{ return copy2d(c, NULL, true, false); }
CUresult CUDAAPI cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *c)
{ return copy2d(c, NULL, false, false); }
CUresult CUDAAPI cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *c)
{ return copy2d(c, NULL, true, false); }
CUresult CUDAAPI cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *c, CUstream s)
{ return copy2d(c, s, false, true); }
CUresult CUDAAPI cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *c, CUstream s)
{ return copy2d(c, s, true, true); }

/* 3-D copies: the 2-D ones plane by plane (srcHeight/dstHeight rows a
 * plane); the LOD fields and the reserved ones must be 0. */
static CUresult copy3d(const CUDA_MEMCPY3D *c, CUstream s, bool ptds, bool async)
{
    if (!c || c->srcLOD || c->dstLOD || c->reserved0 || c->reserved1)
        return CUDA_ERROR_INVALID_VALUE;
    struct pitched_side src = { c->srcMemoryType, c->srcHost, c->srcDevice, c->srcXInBytes, c->srcY, c->srcZ,
                                c->srcPitch, c->srcHeight };
    struct pitched_side dst = { c->dstMemoryType, c->dstHost, c->dstDevice, c->dstXInBytes, c->dstY, c->dstZ,
                                c->dstPitch, c->dstHeight };
    CUresult r = array_side(&src, c->srcArray, c->WidthInBytes, c->Height, c->Depth);
    if (r == CUDA_SUCCESS)
        r = array_side(&dst, c->dstArray, c->WidthInBytes, c->Height, c->Depth);
    return r != CUDA_SUCCESS ? r : pitched_copy(&src, &dst, c->WidthInBytes, c->Height, c->Depth, s, ptds, async);
}

CUresult CUDAAPI cuMemcpy3D_v2(const CUDA_MEMCPY3D *c)
{ return copy3d(c, NULL, false, false); }
CUresult CUDAAPI cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *c)
{ return copy3d(c, NULL, true, false); }
CUresult CUDAAPI cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *c, CUstream s)
{ return copy3d(c, s, false, true); }
CUresult CUDAAPI cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *c, CUstream s)
{ return copy3d(c, s, true, true); }

/* 3-D peer copies: a 3-D copy whose contexts must be given; with unified
 * addressing the pointers name their devices. */
static CUresult copy3d_peer(const CUDA_MEMCPY3D_PEER *c, CUstream s, bool ptds, bool async)
{
    if (!c || c->srcLOD || c->dstLOD)
        return CUDA_ERROR_INVALID_VALUE;
    if (!c->srcContext || !c->dstContext)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct pitched_side src = { c->srcMemoryType, c->srcHost, c->srcDevice, c->srcXInBytes, c->srcY, c->srcZ,
                                c->srcPitch, c->srcHeight };
    struct pitched_side dst = { c->dstMemoryType, c->dstHost, c->dstDevice, c->dstXInBytes, c->dstY, c->dstZ,
                                c->dstPitch, c->dstHeight };
    CUresult r = array_side(&src, c->srcArray, c->WidthInBytes, c->Height, c->Depth);
    if (r == CUDA_SUCCESS)
        r = array_side(&dst, c->dstArray, c->WidthInBytes, c->Height, c->Depth);
    return r != CUDA_SUCCESS ? r : pitched_copy(&src, &dst, c->WidthInBytes, c->Height, c->Depth, s, ptds, async);
}

CUresult CUDAAPI cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *c)
{ return copy3d_peer(c, NULL, false, false); }
CUresult CUDAAPI cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *c)
{ return copy3d_peer(c, NULL, true, false); }
CUresult CUDAAPI cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *c, CUstream s)
{ return copy3d_peer(c, s, false, true); }
CUresult CUDAAPI cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *c, CUstream s)
{ return copy3d_peer(c, s, true, true); }

/* Batches of 3-D copies (CUDA 12.8; CUDA 13 dropped failIdx): every
 * operation checked as cuda.h says (a valid source order, no zero extent,
 * row length and layer height 0 or at least the extent's, flags 0, not the
 * legacy stream), then the copies in stream order, one after another.
 * Pointer operands only: arrays are refused as in the pitched copies. */
static struct pitched_side batch_side(const CUmemcpy3DOperand *o, const CUextent3D *e)
{
    size_t row = o->op.ptr.rowLength ? o->op.ptr.rowLength : e->width;
    size_t layer = o->op.ptr.layerHeight ? o->op.ptr.layerHeight : e->height;
    return (struct pitched_side){ CU_MEMORYTYPE_UNIFIED, NULL, o->op.ptr.ptr, 0, 0, 0, row, layer };
}

static CUresult batch3d_copy(size_t count, const CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail_idx,
                             unsigned long long flags, CUstream s, bool ptds)
{
    if (fail_idx)
        *fail_idx = SIZE_MAX;
    if (!count || !ops || flags || s == CU_STREAM_LEGACY || (!ptds && !s))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        const CUDA_MEMCPY3D_BATCH_OP *o = &ops[i];
        const CUmemcpy3DOperand *side[2] = { &o->src, &o->dst };
        if (!o->extent.width || !o->extent.height || !o->extent.depth ||
            (o->srcAccessOrder != CU_MEMCPY_SRC_ACCESS_ORDER_STREAM &&
             o->srcAccessOrder != CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL &&
             o->srcAccessOrder != CU_MEMCPY_SRC_ACCESS_ORDER_ANY))
            return CUDA_ERROR_INVALID_VALUE;
        for (int k = 0; k < 2; k++) {
            if (side[k]->type == CU_MEMCPY_OPERAND_TYPE_ARRAY)
                return CUDA_ERROR_NOT_SUPPORTED; /* arrays: none here */
            if (side[k]->type != CU_MEMCPY_OPERAND_TYPE_POINTER ||
                (side[k]->op.ptr.rowLength && side[k]->op.ptr.rowLength < o->extent.width) ||
                (side[k]->op.ptr.layerHeight && side[k]->op.ptr.layerHeight < o->extent.height))
                return CUDA_ERROR_INVALID_VALUE;
        }
    }
    for (size_t i = 0; i < count; i++) {
        struct pitched_side src = batch_side(&ops[i].src, &ops[i].extent);
        struct pitched_side dst = batch_side(&ops[i].dst, &ops[i].extent);
        CUresult r = pitched_copy(&src, &dst, ops[i].extent.width, ops[i].extent.height, ops[i].extent.depth, s,
                                  ptds, true);
        if (r != CUDA_SUCCESS) {
            if (fail_idx)
                *fail_idx = i;
            return r;
        }
    }
    return CUDA_SUCCESS;
}

/* The 12.8 forms, with failIdx. */
CUresult CUDAAPI cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                    CUmemcpyAttributes *attrs, size_t *attrs_idxs, size_t num_attrs,
                                    size_t *fail_idx, CUstream s)
{ return batch_copy(dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, fail_idx, s, false); }
CUresult CUDAAPI cuMemcpyBatchAsync_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                         CUmemcpyAttributes *attrs, size_t *attrs_idxs, size_t num_attrs,
                                         size_t *fail_idx, CUstream s)
{ return batch_copy(dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, fail_idx, s, true); }
CUresult CUDAAPI cuMemcpy3DBatchAsync(size_t count, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail_idx,
                                      unsigned long long flags, CUstream s)
{ return batch3d_copy(count, ops, fail_idx, flags, s, false); }
CUresult CUDAAPI cuMemcpy3DBatchAsync_ptsz(size_t count, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail_idx,
                                           unsigned long long flags, CUstream s)
{ return batch3d_copy(count, ops, fail_idx, flags, s, true); }
CUresult CUDAAPI cuMemcpy3DBatchAsync_v2(size_t count, CUDA_MEMCPY3D_BATCH_OP *ops, unsigned long long flags,
                                         CUstream s)
{ return batch3d_copy(count, ops, NULL, flags, s, false); }
CUresult CUDAAPI cuMemcpy3DBatchAsync_v2_ptsz(size_t count, CUDA_MEMCPY3D_BATCH_OP *ops,
                                              unsigned long long flags, CUstream s)
{ return batch3d_copy(count, ops, NULL, flags, s, true); }

/* ---- memsets (asynchronous to the host, as on hardware) ---- */

static CUresult memset_op(CUdeviceptr dst, uint32_t value, uint32_t elem, size_t count, CUstream s, bool ptds,
                          bool async)
{
    struct sim_device *sd, *d;
    uint32_t slot;
    CUresult r = sim_stream_resolve(s, ptds, &sd, &slot);
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_gnode node = { .kind = SIM_GNODE_MEMSET, .dst = dst, .value = value, .elem = elem, .count = count };
    bool captured;
    if ((r = sim_capture_op(s, ptds, !async, &node, &captured)) != CUDA_SUCCESS || captured)
        return r;
    if (count == 0)
        return CUDA_SUCCESS;
    if ((dst & (elem - 1)) || count > SIZE_MAX / elem)
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_ptr_classify(dst, count * elem, &d, NULL) <= SIM_PTR_HOST || d != sd)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_op op = { .kind = SIM_OP_MEMSET, .stream = slot };
    op.u.memset.dst = dst;
    op.u.memset.value = value;
    op.u.memset.elem_bytes = elem;
    op.u.memset.count = count;
    return sim_errno_to_cu(sim_submit(sd, &op, NULL));
}

CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr dst, unsigned char uc, size_t n)
{ return memset_op(dst, uc, 1, n, NULL, false, false); }
CUresult CUDAAPI cuMemsetD8_v2_ptds(CUdeviceptr dst, unsigned char uc, size_t n)
{ return memset_op(dst, uc, 1, n, NULL, true, false); }
CUresult CUDAAPI cuMemsetD32_v2(CUdeviceptr dst, unsigned int ui, size_t n)
{ return memset_op(dst, ui, 4, n, NULL, false, false); }
CUresult CUDAAPI cuMemsetD32_v2_ptds(CUdeviceptr dst, unsigned int ui, size_t n)
{ return memset_op(dst, ui, 4, n, NULL, true, false); }
CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dst, unsigned char uc, size_t n, CUstream s)
{ return memset_op(dst, uc, 1, n, s, false, true); }
CUresult CUDAAPI cuMemsetD8Async_ptsz(CUdeviceptr dst, unsigned char uc, size_t n, CUstream s)
{ return memset_op(dst, uc, 1, n, s, true, true); }
CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dst, unsigned int ui, size_t n, CUstream s)
{ return memset_op(dst, ui, 4, n, s, false, true); }
CUresult CUDAAPI cuMemsetD32Async_ptsz(CUdeviceptr dst, unsigned int ui, size_t n, CUstream s)
{ return memset_op(dst, ui, 4, n, s, true, true); }

CUresult CUDAAPI cuMemsetD16_v2(CUdeviceptr dst, unsigned short us, size_t n)
{ return memset_op(dst, us, 2, n, NULL, false, false); }
CUresult CUDAAPI cuMemsetD16_v2_ptds(CUdeviceptr dst, unsigned short us, size_t n)
{ return memset_op(dst, us, 2, n, NULL, true, false); }
CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr dst, unsigned short us, size_t n, CUstream s)
{ return memset_op(dst, us, 2, n, s, false, true); }
CUresult CUDAAPI cuMemsetD16Async_ptsz(CUdeviceptr dst, unsigned short us, size_t n, CUstream s)
{ return memset_op(dst, us, 2, n, s, true, true); }

/* 2-D: one memset per row, in stream order. */
static CUresult memset_2d(CUdeviceptr dst, size_t pitch, uint32_t value, uint32_t elem, size_t width,
                          size_t height, CUstream s, bool ptds, bool async)
{
    if (height > 1 && pitch < width * elem)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t y = 0; y < height; y++) {
        CUresult r = memset_op(dst + y * pitch, value, elem, width, s, ptds, async);
        if (r != CUDA_SUCCESS)
            return r;
    }
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemsetD2D8_v2(CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h)
{ return memset_2d(d, p, v, 1, w, h, NULL, false, false); }
CUresult CUDAAPI cuMemsetD2D8_v2_ptds(CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h)
{ return memset_2d(d, p, v, 1, w, h, NULL, true, false); }
CUresult CUDAAPI cuMemsetD2D16_v2(CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h)
{ return memset_2d(d, p, v, 2, w, h, NULL, false, false); }
CUresult CUDAAPI cuMemsetD2D16_v2_ptds(CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h)
{ return memset_2d(d, p, v, 2, w, h, NULL, true, false); }
CUresult CUDAAPI cuMemsetD2D32_v2(CUdeviceptr d, size_t p, unsigned int v, size_t w, size_t h)
{ return memset_2d(d, p, v, 4, w, h, NULL, false, false); }
CUresult CUDAAPI cuMemsetD2D32_v2_ptds(CUdeviceptr d, size_t p, unsigned int v, size_t w, size_t h)
{ return memset_2d(d, p, v, 4, w, h, NULL, true, false); }
CUresult CUDAAPI cuMemsetD2D8Async(CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h, CUstream s)
{ return memset_2d(d, p, v, 1, w, h, s, false, true); }
CUresult CUDAAPI cuMemsetD2D8Async_ptsz(CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h, CUstream s)
{ return memset_2d(d, p, v, 1, w, h, s, true, true); }
CUresult CUDAAPI cuMemsetD2D16Async(CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h, CUstream s)
{ return memset_2d(d, p, v, 2, w, h, s, false, true); }
CUresult CUDAAPI cuMemsetD2D16Async_ptsz(CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h, CUstream s)
{ return memset_2d(d, p, v, 2, w, h, s, true, true); }
CUresult CUDAAPI cuMemsetD2D32Async(CUdeviceptr d, size_t p, unsigned int v, size_t w, size_t h, CUstream s)
{ return memset_2d(d, p, v, 4, w, h, s, false, true); }
CUresult CUDAAPI cuMemsetD2D32Async_ptsz(CUdeviceptr d, size_t p, unsigned int v, size_t w, size_t h, CUstream s)
{ return memset_2d(d, p, v, 4, w, h, s, true, true); }

/* ---- pointer attributes and managed-memory hints ---- */

/* Pinned host memory: host memory type; with unified addressing its device
 * pointer is its host address; it belongs to the current context. */
static CUresult pinned_attribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    struct sim_device *d;
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = CU_MEMORYTYPE_HOST;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = ptr;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        *(void **)data = (void *)(uintptr_t)ptr;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(int *)data = 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
    case CU_POINTER_ATTRIBUTE_CONTEXT: {
        CUresult r = sim_current_device(&d);
        if (r != CUDA_SUCCESS)
            return r;
        if (attribute == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
            *(int *)data = d->ordinal;
        else
            *(CUcontext *)data = (CUcontext)&d->ctx;
        return CUDA_SUCCESS;
    }
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_device *d;
    int kind = sim_ptr_classify(ptr, 1, &d, NULL);
    if (kind == SIM_PTR_HOST && sim_pinned_find(ptr, 1, NULL))
        return pinned_attribute(data, attribute, ptr);
    if (kind <= SIM_PTR_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = CU_MEMORYTYPE_DEVICE;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = ptr;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(int *)data = kind == SIM_PTR_MANAGED;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = d->ordinal;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = (CUcontext)&d->ctx;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

static size_t attribute_bytes(CUpointer_attribute attribute)
{
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        return sizeof(unsigned int);
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        return sizeof(void *);
    default:
        return 0;
    }
}

/* As cuPointerGetAttribute for each attribute, except that a pointer the
 * driver does not know is no error: its attributes read as zero (the CUDA
 * driver API's documented behaviour). */
CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
                                        void **data, CUdeviceptr ptr)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!numAttributes || !attributes || !data)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned int i = 0; i < numAttributes; i++) {
        if (!data[i])
            return CUDA_ERROR_INVALID_VALUE;
        r = cuPointerGetAttribute(data[i], attributes[i], ptr);
        if (r == CUDA_ERROR_INVALID_VALUE && attribute_bytes(attributes[i]))
            memset(data[i], 0, attribute_bytes(attributes[i]));
        else if (r != CUDA_SUCCESS)
            return r;
    }
    return CUDA_SUCCESS;
}

static CUresult managed_hint(CUdeviceptr p, size_t count)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_device *d;
    return sim_ptr_classify(p, count ? count : 1, &d, NULL) == SIM_PTR_MANAGED ? CUDA_SUCCESS
                                                                             : CUDA_ERROR_INVALID_VALUE;
}

/* Advice (uvm.c): read-mostly duplicates on read faults; a preferred
 * location on the device makes its chunks the last evicted; a preferred
 * location on the host, or accessed-by the device, lets kernels reach
 * host-resident blocks remotely instead of migrating them.  `on_device`:
 * the location is the device that owns the memory (false: the host). */
static CUresult advise(CUdeviceptr p, size_t count, CUmem_advise advice, bool on_device)
{
    CUresult r = managed_hint(p, count);
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_device *d;
    sim_ptr_classify(p, count ? count : 1, &d, NULL);
    switch (advice) {
    case CU_MEM_ADVISE_SET_READ_MOSTLY:
    case CU_MEM_ADVISE_UNSET_READ_MOSTLY:
        sim_uvm_set_advice(d, p, count, SIM_ADVISE_READ_MOSTLY, advice == CU_MEM_ADVISE_SET_READ_MOSTLY);
        return CUDA_SUCCESS;
    case CU_MEM_ADVISE_SET_PREFERRED_LOCATION:
        sim_uvm_set_advice(d, p, count, on_device ? SIM_ADVISE_PREFER_HOST : SIM_ADVISE_PREFER_DEVICE, false);
        sim_uvm_set_advice(d, p, count, on_device ? SIM_ADVISE_PREFER_DEVICE : SIM_ADVISE_PREFER_HOST, true);
        return CUDA_SUCCESS;
    case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
        sim_uvm_set_advice(d, p, count, SIM_ADVISE_PREFER_HOST | SIM_ADVISE_PREFER_DEVICE, false);
        return CUDA_SUCCESS;
    case CU_MEM_ADVISE_SET_ACCESSED_BY:
    case CU_MEM_ADVISE_UNSET_ACCESSED_BY:
        /* the host maps managed memory wherever it is: nothing to record */
        if (on_device)
            sim_uvm_set_advice(d, p, count, SIM_ADVISE_ACCESSED_BY, advice == CU_MEM_ADVISE_SET_ACCESSED_BY);
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* The device of managed memory p, or -1. */
static int owner_of(CUdeviceptr p)
{
    struct sim_device *d;
    return sim_ptr_classify(p, 1, &d, NULL) == SIM_PTR_MANAGED ? d->ordinal : -1;
}

CUresult CUDAAPI cuMemAdvise(CUdeviceptr p, size_t count, CUmem_advise advice, CUdevice device)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (device != CU_DEVICE_CPU && (device < 0 || device >= sim.ndevices))
        return CUDA_ERROR_INVALID_DEVICE;
    int owner = owner_of(p);
    if (device != CU_DEVICE_CPU && owner >= 0 && device != owner)
        return CUDA_ERROR_NOT_SUPPORTED;    /* peer mappings are not modelled */
    return advise(p, count, advice, device != CU_DEVICE_CPU);
}

CUresult CUDAAPI cuMemAdvise_v2(CUdeviceptr p, size_t count, CUmem_advise advice, CUmemLocation location)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    bool dev = location.type == CU_MEM_LOCATION_TYPE_DEVICE;
    if (dev && (location.id < 0 || location.id >= sim.ndevices))
        return CUDA_ERROR_INVALID_DEVICE;
    if (!dev && location.type != CU_MEM_LOCATION_TYPE_HOST && location.type != CU_MEM_LOCATION_TYPE_HOST_NUMA &&
        location.type != CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT)
        return CUDA_ERROR_INVALID_VALUE;
    int owner = owner_of(p);
    if (dev && owner >= 0 && location.id != owner)
        return CUDA_ERROR_NOT_SUPPORTED;
    return advise(p, count, advice, dev);
}

/* Bulk migration in stream order, without per-fault cost. */
static CUresult prefetch(CUdeviceptr p, size_t count, bool to_device, int device, CUstream s, bool ptds)
{
    struct sim_device *sd, *d;
    uint32_t slot;
    CUresult r = sim_stream_resolve(s, ptds, &sd, &slot);
    if (r != CUDA_SUCCESS)
        return r;
    if (count == 0 || sim_ptr_classify(p, count, &d, NULL) != SIM_PTR_MANAGED || d != sd)
        return CUDA_ERROR_INVALID_VALUE;
    if (to_device && device != d->ordinal)
        return CUDA_ERROR_INVALID_DEVICE;
    struct sim_op op = { .kind = SIM_OP_PREFETCH, .stream = slot };
    op.u.prefetch.addr = p;
    op.u.prefetch.bytes = count;
    op.u.prefetch.to_device = to_device;
    return sim_errno_to_cu(sim_submit(d, &op, NULL));
}

static bool location_is_device(CUmemLocation l)
{
    return l.type == CU_MEM_LOCATION_TYPE_DEVICE;
}

CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr p, size_t count, CUdevice dst, CUstream s)
{ return prefetch(p, count, dst != CU_DEVICE_CPU, dst, s, false); }
CUresult CUDAAPI cuMemPrefetchAsync_ptsz(CUdeviceptr p, size_t count, CUdevice dst, CUstream s)
{ return prefetch(p, count, dst != CU_DEVICE_CPU, dst, s, true); }
CUresult CUDAAPI cuMemPrefetchAsync_v2(CUdeviceptr p, size_t count, CUmemLocation loc, unsigned int flags, CUstream s)
{ (void)flags; return prefetch(p, count, location_is_device(loc), loc.id, s, false); }
CUresult CUDAAPI cuMemPrefetchAsync_v2_ptsz(CUdeviceptr p, size_t count, CUmemLocation loc, unsigned int flags, CUstream s)
{ (void)flags; return prefetch(p, count, location_is_device(loc), loc.id, s, true); }
