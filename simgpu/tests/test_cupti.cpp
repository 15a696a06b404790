/*
 * test_cupti.cpp — the simulator's libcupti reports each device fault on
 * managed memory as a GPU_PAGE_FAULT unified-memory record, as CUPTI does
 * on a real GPU: the faulting block's address, only while enabled, none for
 * blocks a prefetch brought, and the API's errors where it is misused.
 * Its start-up takes 12 MiB of the device, as on an H200; `full`: with
 * less free it fails there as it did on the H200: a kernel on device
 * memory still runs, one that faults on managed memory ends in
 * CUDA_ERROR_ILLEGAL_ADDRESS.
 * A plain program (exit 0 pass, 1 fail).
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include "kernels.h"
#include <cuda.h>
#include <cupti.h>

#include "plain_check.h"

static const unsigned BLOCK = 64 * 1024, NB = 16;

static std::set<uint64_t> seen;
static unsigned records, bad_kind;

static void CUPTIAPI want(uint8_t **buf, size_t *size, size_t *max)
{
    *size = 8 * sizeof(CUpti_ActivityUnifiedMemoryCounter3);   /* small: several buffers per flush */
    *buf = (uint8_t *)aligned_alloc(8, *size);
    *max = 0;
}

static void CUPTIAPI done(CUcontext, uint32_t, uint8_t *buf, size_t, size_t valid)
{
    CUpti_Activity *r = NULL;
    while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
        CUpti_ActivityUnifiedMemoryCounter3 *u = (CUpti_ActivityUnifiedMemoryCounter3 *)r;
        records++;
        if (u->kind != CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER ||
            u->counterKind != CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT ||
            (u->flags != CUPTI_ACTIVITY_UNIFIED_MEMORY_ACCESS_TYPE_READ &&
             u->flags != CUPTI_ACTIVITY_UNIFIED_MEMORY_ACCESS_TYPE_WRITE) || u->end < u->start)
            bad_kind++;
        seen.insert(u->address);
    }
    free(buf);
}

static CUresult touch(CUdeviceptr m, unsigned block)
{
    CUdeviceptr p = m + (CUdeviceptr)block * BLOCK;
    int n = (int)(BLOCK / 4);
    void *args[] = { &p, &n };
    return cuLaunchKernel((CUfunction)(const void *)add_one, n / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL);
}

/* The device filled but for 4 MiB: CUPTI cannot start, and managed
 * memory's faults are no longer served. */
static int full_device(void)
{
    CUcontext ctx;
    CU(cuInit(0));
    CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU(cuCtxSetCurrent(ctx));
    CUdeviceptr m, big;
    CU(cuMemAllocManaged(&m, NB * BLOCK, CU_MEM_ATTACH_GLOBAL));
    size_t free_bytes = 0, total = 0;
    CU(cuMemGetInfo(&free_bytes, &total));
    CU(cuMemAlloc(&big, free_bytes - (4u << 20)));
    CUpti_ActivityUnifiedMemoryCounterConfig cfg = {};
    cfg.scope = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_ALL_DEVICES;
    cfg.kind = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT;
    cfg.enable = 1;
    CHECK(cuptiActivityConfigureUnifiedMemoryCounter(&cfg, 1) == CUPTI_ERROR_NOT_INITIALIZED);
    CHECK(cuptiActivityRegisterCallbacks(want, done) == CUPTI_ERROR_NOT_INITIALIZED);
    CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER) == CUPTI_ERROR_NOT_INITIALIZED);
    size_t after = 0;
    CU(cuMemGetInfo(&after, &total));
    CHECK(after == 4u << 20); /* nothing taken */
    CU(touch(big, 0));        /* device memory: runs */
    CU(cuCtxSynchronize());
    CU(touch(m, 0));          /* the launch is accepted ... */
    CUresult r = cuCtxSynchronize();
    std::fprintf(stderr, "the kernel after CUPTI's failed start: %d\n", (int)r);
    CHECK(r == CUDA_ERROR_ILLEGAL_ADDRESS);
    std::printf("cupti full: ok\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "full"))
        return full_device();
    /* misuse first: flushing with no callbacks, kinds not offered */
    CHECK(cuptiActivityFlushAll(0) == CUPTI_ERROR_INVALID_OPERATION);
    CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_KERNEL) == CUPTI_ERROR_NOT_SUPPORTED);
    CHECK(cuptiActivityRegisterCallbacks(NULL, done) == CUPTI_ERROR_INVALID_PARAMETER);

    CUcontext ctx;
    CU(cuInit(0));
    CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU(cuCtxSetCurrent(ctx));
    CUdeviceptr m;
    CU(cuMemAllocManaged(&m, NB * BLOCK, CU_MEM_ATTACH_GLOBAL));
    memset((void *)(uintptr_t)m, 0, NB * BLOCK);

    CUpti_ActivityUnifiedMemoryCounterConfig cfg = {};
    cfg.scope = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_ALL_DEVICES;
    cfg.kind = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD;
    cfg.enable = 1;
    CHECK(cuptiActivityConfigureUnifiedMemoryCounter(&cfg, 1) == CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED);
    cfg.kind = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT;
    size_t before = 0, after = 0, total = 0;
    CU(cuMemGetInfo(&before, &total));
    CHECK(cuptiActivityConfigureUnifiedMemoryCounter(&cfg, 1) == CUPTI_SUCCESS);
    CHECK(cuptiActivityRegisterCallbacks(want, done) == CUPTI_SUCCESS);
    CU(cuMemGetInfo(&after, &total));
    std::fprintf(stderr, "CUPTI's start-up took %zu MiB of the device\n", (before - after) >> 20);
    CHECK(before - after == 12u << 20);

    /* not enabled yet: a fault leaves no record */
    CU(touch(m, 1));
    CU(cuCtxSynchronize());
    CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS);
    CHECK(records == 0);

    CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER) == CUPTI_SUCCESS);
    /* blocks 3, 9 and 10 fault; block 1 is already on the device */
    CU(touch(m, 3));
    CU(touch(m, 9));
    CU(touch(m, 10));
    CU(touch(m, 1));
    CU(cuCtxSynchronize());
    CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS);
    std::fprintf(stderr, "%u records, %zu blocks\n", records, seen.size());
    CHECK(bad_kind == 0);
    CHECK(records == 3);
    CHECK(seen == (std::set<uint64_t>{ m + 3 * BLOCK, m + 9 * BLOCK, m + 10 * BLOCK }));

    /* a flush with nothing new delivers nothing; a prefetched block does
     * not fault */
    CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS);
    CHECK(records == 3);
    CUmemLocation dev = {};
    dev.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CU(cuMemPrefetchAsync(m + 12 * BLOCK, BLOCK, dev, 0, NULL));
    CU(touch(m, 12));
    CU(cuCtxSynchronize());
    CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS);
    CHECK(records == 3);

    /* more faults than one buffer holds: every one arrives */
    CU(touch(m, 0));
    for (unsigned b = 2; b < NB; b++)
        if (b != 3 && b != 9 && b != 10 && b != 12)
            CU(touch(m, b));
    CU(cuCtxSynchronize());
    CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS);
    CHECK(records == 3 + 11);
    CHECK(seen.size() == 14);
    size_t dropped = 1;
    CHECK(cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) == CUPTI_SUCCESS && dropped == 0);

    /* disabled: no more records */
    CHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER) == CUPTI_SUCCESS);
    CUmemLocation host = {};
    host.type = CU_MEM_LOCATION_TYPE_HOST;
    CU(cuMemPrefetchAsync(m, NB * BLOCK, host, 0, NULL));
    CU(cuCtxSynchronize());
    CU(touch(m, 5));
    CU(cuCtxSynchronize());
    CHECK(cuptiActivityFlushAll(0) == CUPTI_SUCCESS);
    CHECK(records == 14);
    const char *s = NULL;
    CHECK(cuptiGetResultString(CUPTI_ERROR_NOT_SUPPORTED, &s) == CUPTI_SUCCESS && strstr(s, "NOT_SUPPORTED"));
    std::printf("cupti: ok\n");
    return 0;
}
