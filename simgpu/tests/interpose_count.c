/*
 * interpose_count.c — a test interposer in front of the driver, built the
 * way real ones are (research/cuda_interpose.md §1.4, §1.6): it exports
 * dlsym, substitutes its own cuGetProcAddress_v2, substitutes itself again
 * for the "cuGetProcAddress" self-lookup, and wraps the launch and sync
 * entry points it is handed, counting calls.  LD_PRELOADed by the
 * simgpu/runtime_interposed test, which compares its counts with the
 * simulator's own.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <string.h>

#include <cudaTypedefs.h>

unsigned long interpose_dlsym_gpa, interpose_lookups, interpose_launches, interpose_syncs;

static void *(*real_dlsym)(void *, const char *);
static PFN_cuGetProcAddress_v12000 real_gpa;
static PFN_cuLaunchKernel_v4000 real_launch;
static PFN_cuLaunchKernel_v7000_ptsz real_launch_ptsz;
static PFN_cuCtxSynchronize_v2000 real_ctx_sync;
static PFN_cuCtxSynchronize_v13000 real_ctx_sync_v2;
static PFN_cuStreamSynchronize_v2000 real_stream_sync;
static PFN_cuStreamSynchronize_v7000_ptsz real_stream_sync_ptsz;

void *dlsym(void *handle, const char *name);

static CUresult CUDAAPI launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned smem, CUstream s, void **p, void **e)
{
    __atomic_fetch_add(&interpose_launches, 1, __ATOMIC_RELAXED);
    return real_launch(f, gx, gy, gz, bx, by, bz, smem, s, p, e);
}
static CUresult CUDAAPI launch_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                    unsigned bz, unsigned smem, CUstream s, void **p, void **e)
{
    __atomic_fetch_add(&interpose_launches, 1, __ATOMIC_RELAXED);
    return real_launch_ptsz(f, gx, gy, gz, bx, by, bz, smem, s, p, e);
}
static CUresult CUDAAPI ctx_sync(void)
{
    __atomic_fetch_add(&interpose_syncs, 1, __ATOMIC_RELAXED);
    return real_ctx_sync();
}
static CUresult CUDAAPI ctx_sync_v2(CUcontext c)
{
    __atomic_fetch_add(&interpose_syncs, 1, __ATOMIC_RELAXED);
    return real_ctx_sync_v2(c);
}
static CUresult CUDAAPI stream_sync(CUstream s)
{
    __atomic_fetch_add(&interpose_syncs, 1, __ATOMIC_RELAXED);
    return real_stream_sync(s);
}
static CUresult CUDAAPI stream_sync_ptsz(CUstream s)
{
    __atomic_fetch_add(&interpose_syncs, 1, __ATOMIC_RELAXED);
    return real_stream_sync_ptsz(s);
}

static CUresult CUDAAPI gpa(const char *symbol, void **pfn, int ver, cuuint64_t flags,
                            CUdriverProcAddressQueryResult *status)
{
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = real_gpa(symbol, pfn, ver, flags, &st);
    if (status)
        *status = st;
    __atomic_fetch_add(&interpose_lookups, 1, __ATOMIC_RELAXED);
    if (r != CUDA_SUCCESS || !*pfn || st != CU_GET_PROC_ADDRESS_SUCCESS)
        return r;
    bool pt = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    if (!strcmp(symbol, "cuGetProcAddress") && ver >= 12000) {
        *pfn = (void *)gpa;                       /* the self-lookup */
    } else if (!strcmp(symbol, "cuLaunchKernel")) {
        if (pt && ver >= 7000) {
            real_launch_ptsz = (PFN_cuLaunchKernel_v7000_ptsz)*pfn;
            *pfn = (void *)launch_ptsz;
        } else {
            real_launch = (PFN_cuLaunchKernel_v4000)*pfn;
            *pfn = (void *)launch;
        }
    } else if (!strcmp(symbol, "cuCtxSynchronize")) {
        if (ver >= 13000) {
            real_ctx_sync_v2 = (PFN_cuCtxSynchronize_v13000)*pfn;
            *pfn = (void *)ctx_sync_v2;
        } else {
            real_ctx_sync = (PFN_cuCtxSynchronize_v2000)*pfn;
            *pfn = (void *)ctx_sync;
        }
    } else if (!strcmp(symbol, "cuStreamSynchronize")) {
        if (pt && ver >= 7000) {
            real_stream_sync_ptsz = (PFN_cuStreamSynchronize_v7000_ptsz)*pfn;
            *pfn = (void *)stream_sync_ptsz;
        } else {
            real_stream_sync = (PFN_cuStreamSynchronize_v2000)*pfn;
            *pfn = (void *)stream_sync;
        }
    }
    return r;
}

void *dlsym(void *handle, const char *name)
{
    if (!real_dlsym) {
        real_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!real_dlsym)
            real_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    }
    void *p = real_dlsym(handle, name);
    if (p && !strcmp(name, "cuGetProcAddress_v2")) {
        __atomic_fetch_add(&interpose_dlsym_gpa, 1, __ATOMIC_RELAXED);
        real_gpa = (PFN_cuGetProcAddress_v12000)p;
        return (void *)gpa;
    }
    return p;
}
