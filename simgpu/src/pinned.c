/*
 * pinned.c — page-locked ("pinned") host memory: cuMemAllocHost,
 * cuMemHostAlloc, cuMemFreeHost, cuMemHostRegister, cuMemHostUnregister,
 * cuMemHostGetDevicePointer, cuMemHostGetFlags.
 *
 * Pinned memory is ordinary host memory the simulator knows about, kept in
 * one table of non-overlapping ranges; allocations are page aligned and
 * mlock'ed where RLIMIT_MEMLOCK allows (best effort).  What the table changes:
 *   - cuPointerGetAttribute reports CU_MEMORYTYPE_HOST for it (api_memory.c);
 *   - cuMemcpy{HtoD,DtoH}Async and cuMemcpyAsync from/to it are
 *     asynchronous to the host (queue.c's copy engine), as DMA from pinned
 *     memory is on hardware; pageable copies stay synchronous.
 * With unified addressing the device pointer of pinned memory is its host
 * address, and kernels dereference it there: hostmem.c makes allocations
 * and registered ranges shared memory the device processes map at the same
 * address.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sim.h"

static pthread_mutex_t pinned_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_pinned *ranges;    /* sorted by base, non-overlapping */
static size_t nranges, capranges;

/* Index of the first range whose end is above p (the only candidate to
 * contain or follow p). */
static size_t first_ending_after(uint64_t p)
{
    size_t lo = 0, hi = nranges;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ranges[mid].base + ranges[mid].bytes <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Insert [base, base+bytes); -EEXIST if it overlaps a pinned range. */
static int pinned_insert(const struct sim_pinned *r)
{
    int rc = 0;
    pthread_mutex_lock(&pinned_lock);
    size_t i = first_ending_after(r->base);
    if (i < nranges && ranges[i].base < r->base + r->bytes) {
        rc = -EEXIST;
        goto out;
    }
    if (nranges == capranges) {
        size_t cap = capranges ? capranges * 2 : 16;
        struct sim_pinned *v = realloc(ranges, cap * sizeof(*v));
        if (!v) {
            rc = -ENOMEM;
            goto out;
        }
        ranges = v;
        capranges = cap;
    }
    memmove(&ranges[i + 1], &ranges[i], (nranges - i) * sizeof(*ranges));
    ranges[i] = *r;
    nranges++;
out:
    pthread_mutex_unlock(&pinned_lock);
    return rc;
}

/* Remove the range starting exactly at base and made the way `allocated`
 * says; -ENOENT if there is none. */
static int pinned_remove(uint64_t base, bool allocated, struct sim_pinned *out)
{
    int rc = -ENOENT;
    pthread_mutex_lock(&pinned_lock);
    size_t i = first_ending_after(base);
    if (i < nranges && ranges[i].base == base && ranges[i].allocated == allocated) {
        *out = ranges[i];
        memmove(&ranges[i], &ranges[i + 1], (nranges - i - 1) * sizeof(*ranges));
        nranges--;
        rc = 0;
    }
    pthread_mutex_unlock(&pinned_lock);
    return rc;
}

static void pinned_set_reachable(uint64_t base)
{
    pthread_mutex_lock(&pinned_lock);
    size_t i = first_ending_after(base);
    if (i < nranges && ranges[i].base == base)
        ranges[i].reachable = true;
    pthread_mutex_unlock(&pinned_lock);
}

bool sim_pinned_find(uint64_t p, uint64_t len, struct sim_pinned *out)
{
    bool found = false;
    pthread_mutex_lock(&pinned_lock);
    size_t i = first_ending_after(p);
    if (i < nranges && ranges[i].base <= p && len <= ranges[i].base + ranges[i].bytes - p) {
        found = true;
        if (out)
            *out = ranges[i];
    }
    pthread_mutex_unlock(&pinned_lock);
    return found;
}

/* Queued asynchronous copies may still read or write the range: drain
 * every device before it stops being pinned (cuMemFreeHost and
 * cuMemHostUnregister synchronize on hardware too). */
static CUresult drain_devices(void)
{
    for (int i = 0; i < sim.ndevices; i++) {
        int rc = sim_device_sync(&sim.dev[i]);
        if (rc)
            return sim_errno_to_cu(rc);
    }
    return CUDA_SUCCESS;
}

static size_t page_bytes(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

static CUresult host_alloc(void **pp, size_t bytesize, unsigned flags)
{
    struct sim_device *d;
    CUresult r = sim_current_device(&d);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pp || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED))
        return CUDA_ERROR_INVALID_VALUE;
    size_t pg = page_bytes();
    if (bytesize > SIZE_MAX - pg)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t len = (bytesize + pg - 1) & ~(pg - 1);
    void *p;
    int rc = sim_hostmem_alloc(len, &p);
    if (rc) {
        if (rc != -ENOMEM)
            sim_log("cuMemHostAlloc(%zu): the devices cannot map it (%s)", bytesize, strerror(-rc));
        return rc == -EPIPE ? CUDA_ERROR_LAUNCH_FAILED : CUDA_ERROR_OUT_OF_MEMORY;
    }
    (void)mlock(p, len);        /* best effort: RLIMIT_MEMLOCK may refuse */
    struct sim_pinned e = { (uint64_t)(uintptr_t)p, len, flags, true, true };
    if (pinned_insert(&e)) {
        sim_hostmem_free(p, len);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pp = p;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t bytesize)
{ return host_alloc(pp, bytesize, 0); }
CUresult CUDAAPI cuMemAllocHost(void **pp, unsigned int bytesize)
{ return host_alloc(pp, bytesize, 0); }
CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{ return host_alloc(pp, bytesize, Flags); }

CUresult CUDAAPI cuMemFreeHost(void *p)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_pinned e;
    if (!sim_pinned_find((uint64_t)(uintptr_t)p, 1, &e) || !e.allocated || e.base != (uint64_t)(uintptr_t)p)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = drain_devices()) != CUDA_SUCCESS)
        return r;
    if (pinned_remove(e.base, true, &e))
        return CUDA_ERROR_INVALID_VALUE;   /* freed by another thread meanwhile */
    munlock(p, e.bytes);
    sim_hostmem_free(p, e.bytes);
    return CUDA_SUCCESS;
}

/* Registration pins [p, p+bytesize) as given; overlapping an already
 * pinned range (registered or allocated) is CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
 * as with the real driver.  I/O memory cannot be registered here.  The
 * range becomes reachable by kernels (hostmem.c: what it refuses, and
 * why).  The pages are not mlock'ed: they belong to the application (often
 * to its heap, where a lock would outlive the registration and the free),
 * and locking changes nothing the simulator models. */
static CUresult host_register(void *p, size_t bytesize, unsigned flags)
{
    struct sim_device *d;
    CUresult r = sim_current_device(&d);
    if (r != CUDA_SUCCESS)
        return r;
    if (!p || bytesize == 0 || (uint64_t)(uintptr_t)p > UINT64_MAX - bytesize)
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & ~(unsigned)(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                            CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY))
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & CU_MEMHOSTREGISTER_IOMEMORY)
        return CUDA_ERROR_NOT_SUPPORTED;
    /* inserted first (refused if it overlaps), then made reachable, then
     * marked so */
    struct sim_pinned e = { (uint64_t)(uintptr_t)p, bytesize, flags, false, false };
    int rc = pinned_insert(&e);
    if (rc == -EEXIST)
        return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    if (rc)
        return CUDA_ERROR_OUT_OF_MEMORY;
    bool reachable;
    if ((r = sim_hostmem_register(p, bytesize, flags, &reachable)) != CUDA_SUCCESS)
        pinned_remove(e.base, false, &e);
    else if (reachable)
        pinned_set_reachable(e.base);
    return r;
}

CUresult CUDAAPI cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{ return host_register(p, bytesize, Flags); }
CUresult CUDAAPI cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{ return host_register(p, bytesize, Flags); }

CUresult CUDAAPI cuMemHostUnregister(void *p)
{
    struct sim_device *d;
    CUresult r = sim_current_device(&d);
    if (r != CUDA_SUCCESS)
        return r;
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_pinned e;
    if (!sim_pinned_find((uint64_t)(uintptr_t)p, 1, &e) || e.allocated || e.base != (uint64_t)(uintptr_t)p)
        return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    if ((r = drain_devices()) != CUDA_SUCCESS)
        return r;
    if (pinned_remove(e.base, false, &e))
        return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    if (e.reachable)
        sim_hostmem_unregister(p, e.bytes);
    return CUDA_SUCCESS;
}

/* Unified addressing: the device pointer of pinned memory is its host
 * address (cuda.h, "Unified Addressing"). */
static CUresult device_pointer(uint64_t *out, void *p, unsigned flags)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!out || !p || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_pinned_find((uint64_t)(uintptr_t)p, 1, NULL))
        return CUDA_ERROR_INVALID_VALUE;
    *out = (uint64_t)(uintptr_t)p;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    uint64_t v = 0;
    CUresult r = device_pointer(&v, p, Flags);
    if (r == CUDA_SUCCESS && pdptr)
        *pdptr = v;
    return pdptr ? r : CUDA_ERROR_INVALID_VALUE;
}

/* The 32-bit legacy form: a host address above 4 GiB has no such pointer. */
CUresult CUDAAPI cuMemHostGetDevicePointer(CUdeviceptr_v1 *pdptr, void *p, unsigned int Flags)
{
    uint64_t v = 0;
    if (!pdptr)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = device_pointer(&v, p, Flags);
    if (r != CUDA_SUCCESS)
        return r;
    if (v > UINT32_MAX)
        return CUDA_ERROR_NOT_SUPPORTED;
    *pdptr = (CUdeviceptr_v1)v;
    return CUDA_SUCCESS;
}

/* The flags given to cuMemHostAlloc (0 for cuMemAllocHost); registered
 * memory has no allocation flags (cuda.h: "allocated by cuMemHostAlloc"). */
CUresult CUDAAPI cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pFlags || !p)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_pinned e;
    if (!sim_pinned_find((uint64_t)(uintptr_t)p, 1, &e) || !e.allocated)
        return CUDA_ERROR_INVALID_VALUE;
    *pFlags = e.flags;
    return CUDA_SUCCESS;
}
