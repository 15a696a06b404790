/*
 * test_uvm.cpp — managed memory behaves like UVM: each 64 KiB block is
 * resident on one side, a touch from the other side faults and migrates it
 * (counted), prefetch migrates in bulk without faults, and a CPU thread and
 * a kernel writing alternate halves of the same blocks ping-pong them.
 * A plain program (exit 0 pass, 1 fail): a test framework's own SIGSEGV
 * handler would take the host's UVM faults for crashes.
 */
#include <cstdio>
#include <cstring>
#include <thread>

#include "kernels.h"
#include <cuda.h>

#include "plain_check.h"

static const unsigned BLOCK = 64 * 1024, NB = 16, INTS = NB * BLOCK / 4;

static simgpu_stats stats()
{
    simgpu_stats s;
    simgpu_stats_get(0, &s);
    return s;
}

static long long now_ns()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

int main()
{
    CUcontext ctx;
    CU(cuInit(0));
    CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU(cuCtxSetCurrent(ctx));
    CUdeviceptr m;
    CU(cuMemAllocManaged(&m, NB * BLOCK, CU_MEM_ATTACH_GLOBAL));
    CHECK(m % BLOCK == 0);
    int *p = (int *)(uintptr_t)m;

    /* 1. fresh managed memory is on the host: writing it costs nothing */
    simgpu_stats s0 = stats();
    for (unsigned i = 0; i < INTS; i++)
        p[i] = (int)i;
    simgpu_stats s1 = stats();
    CHECK(s1.uvm_faults == s0.uvm_faults);

    /* 2. a kernel touching every block: one device fault per block */
    int n = (int)INTS;
    void *args[] = { &m, &n };
    CU(cuLaunchKernel((CUfunction)(const void *)add_one, INTS / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    CU(cuCtxSynchronize());
    simgpu_stats s2 = stats();
    std::fprintf(stderr, "kernel pass: %llu faults, %llu bytes migrated\n",
                 (unsigned long long)(s2.uvm_faults - s1.uvm_faults),
                 (unsigned long long)(s2.uvm_migrated_bytes - s1.uvm_migrated_bytes));
    CHECK(s2.uvm_faults - s1.uvm_faults == NB);
    CHECK(s2.uvm_device_faults - s1.uvm_device_faults == NB);
    CHECK(s2.uvm_migrated_bytes - s1.uvm_migrated_bytes == (uint64_t)NB * BLOCK);

    /* 3. the host reads them back: one host fault per block */
    for (unsigned i = 0; i < INTS; i++)
        CHECK(p[i] == (int)i + 1);
    simgpu_stats s3 = stats();
    CHECK(s3.uvm_faults - s2.uvm_faults == NB);
    CHECK(s3.uvm_device_faults == s2.uvm_device_faults);    /* the host's faults are not the device's */
    CHECK(s3.uvm_migrated_bytes - s2.uvm_migrated_bytes == (uint64_t)NB * BLOCK);

    /* 4. prefetch moves blocks in bulk, without faults */
    CUmemLocation dev = {}, host = {};
    dev.type = CU_MEM_LOCATION_TYPE_DEVICE;
    dev.id = 0;
    host.type = CU_MEM_LOCATION_TYPE_HOST;
    CU(cuMemPrefetchAsync(m, NB * BLOCK, dev, 0, NULL));
    CU(cuLaunchKernel((CUfunction)(const void *)add_one, INTS / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    CU(cuMemPrefetchAsync(m, NB * BLOCK, host, 0, NULL));
    CU(cuCtxSynchronize());
    for (unsigned i = 0; i < INTS; i++)
        CHECK(p[i] == (int)i + 2);
    simgpu_stats s4 = stats();
    CHECK(s4.uvm_faults == s3.uvm_faults);
    CHECK(s4.uvm_migrated_bytes - s3.uvm_migrated_bytes == 2ull * NB * BLOCK);

    /* 5. device memory copies into and out of managed memory work too */
    CUdeviceptr d;
    CU(cuMemAlloc(&d, BLOCK));
    CU(cuMemsetD32(d, 77, BLOCK / 4));
    CU(cuMemcpy(m, d, BLOCK));                      /* block 0 migrates to the device */
    CU(cuCtxSynchronize());
    CHECK(p[BLOCK / 4 - 1] == 77);                  /* and back on this read */
    CU(cuMemFree(d));

    /* 6. ping-pong: a CPU thread and a kernel write alternate halves of the
     * same 4 blocks at the same time; each touch from the side that does
     * not hold a block migrates it (GAIA §3.1) */
    const unsigned PB = 4;
    const long long ns = 200ll * 1000 * 1000;
    CUdeviceptr rounds;
    CU(cuMemAlloc(&rounds, 4));
    simgpu_stats s5 = stats();
    unsigned pb = PB;
    long long kns = ns;
    void *pargs[] = { &m, &pb, &kns, &rounds };
    long long t0 = now_ns();
    CU(cuLaunchKernel((CUfunction)(const void *)write_second_halves, 1, 1, 1, 1, 1, 1, 0, NULL, pargs, NULL));
    unsigned host_rounds = 0;
    std::thread cpu([&] {
        unsigned k = 0;
        while (now_ns() - t0 < ns) {
            for (unsigned b = 0; b < PB; b++)
                p[b * 16384 + k % 8192] = -(int)k;
            k++;
        }
        host_rounds = k;
    });
    cpu.join();
    CU(cuCtxSynchronize());
    unsigned dev_rounds = 0;
    CU(cuMemcpyDtoH(&dev_rounds, rounds, 4));
    simgpu_stats s6 = stats();
    unsigned long long faults = s6.uvm_faults - s5.uvm_faults;
    std::fprintf(stderr, "ping-pong: %llu faults, %llu bytes migrated, %u host rounds, %u device rounds\n", faults,
                 (unsigned long long)(s6.uvm_migrated_bytes - s5.uvm_migrated_bytes), host_rounds, dev_rounds);
    CHECK(faults >= 20);
    CHECK(s6.uvm_migrated_bytes - s5.uvm_migrated_bytes == faults * BLOCK);
    /* both sides' last writes landed */
    CHECK(host_rounds > 0 && dev_rounds > 0);
    for (unsigned b = 0; b < PB; b++) {
        CHECK(p[b * 16384 + (host_rounds - 1) % 8192] == -(int)(host_rounds - 1));
        CHECK(p[b * 16384 + 8192 + (dev_rounds - 1) % 8192] == (int)(dev_rounds - 1));
    }
    CU(cuMemFree(rounds));

    /* 7. read-mostly: a read from the other side duplicates the block (one
     * fault each), later reads on both sides are free, a write invalidates
     * the other copy (one fault, no copy) */
    const unsigned RB = 4;
    CU(cuMemPrefetchAsync(m, NB * BLOCK, host, 0, NULL));
    CU(cuCtxSynchronize());
    for (unsigned i = 0; i < RB * BLOCK / 4; i++)
        p[i] = 1;
    CU(cuMemAdvise(m, RB * BLOCK, CU_MEM_ADVISE_SET_READ_MOSTLY, dev));
    CUdeviceptr sum;
    CU(cuMemAlloc(&sum, 8));
    int rn = (int)(RB * BLOCK / 4);
    void *sargs[] = { &m, &rn, &sum };
    unsigned long long total = 0;
    simgpu_stats r0 = stats();
    CU(cuMemsetD8(sum, 0, 8));
    CU(cuLaunchKernel((CUfunction)(const void *)sum_ints, (unsigned)rn / 256, 1, 1, 256, 1, 1, 0, NULL, sargs, NULL));
    CU(cuMemcpyDtoH(&total, sum, 8));
    CHECK(total == (unsigned long long)rn);
    simgpu_stats r1 = stats();
    if (r1.uvm_faults - r0.uvm_faults != RB)
        std::fprintf(stderr, "read-mostly pass: %llu faults, %llu bytes migrated (expected %u, %u)\n",
                     (unsigned long long)(r1.uvm_faults - r0.uvm_faults),
                     (unsigned long long)(r1.uvm_migrated_bytes - r0.uvm_migrated_bytes), RB,
                     (unsigned)(RB * BLOCK));
    CHECK(r1.uvm_faults - r0.uvm_faults == RB);                        /* duplicated */
    CHECK(r1.uvm_migrated_bytes - r0.uvm_migrated_bytes == (uint64_t)RB * BLOCK);
    long long host_sum = 0;
    for (unsigned i = 0; i < RB * BLOCK / 4; i++)
        host_sum += p[i];                                               /* host copy still readable */
    CHECK(host_sum == rn);
    CU(cuMemsetD8(sum, 0, 8));
    CU(cuLaunchKernel((CUfunction)(const void *)sum_ints, (unsigned)rn / 256, 1, 1, 256, 1, 1, 0, NULL, sargs, NULL));
    CU(cuCtxSynchronize());
    simgpu_stats r2 = stats();
    CHECK(r2.uvm_faults == r1.uvm_faults);                             /* both sides read for free */
    for (unsigned b = 0; b < RB; b++)
        p[b * BLOCK / 4] = 2;                                           /* a write invalidates the device copy */
    simgpu_stats r3 = stats();
    CHECK(r3.uvm_faults - r2.uvm_faults == RB);
    CHECK(r3.uvm_migrated_bytes == r2.uvm_migrated_bytes);
    CU(cuMemsetD8(sum, 0, 8));
    CU(cuLaunchKernel((CUfunction)(const void *)sum_ints, (unsigned)rn / 256, 1, 1, 256, 1, 1, 0, NULL, sargs, NULL));
    CU(cuMemcpyDtoH(&total, sum, 8));
    CHECK(total == (unsigned long long)rn + RB);                        /* the device sees the write */
    std::fprintf(stderr, "read-mostly: %llu faults to duplicate, %llu to invalidate\n",
                 (unsigned long long)(r1.uvm_faults - r0.uvm_faults), (unsigned long long)(r3.uvm_faults - r2.uvm_faults));
    CU(cuMemFree(sum));
    CU(cuMemFree(m));
    std::puts("ok");
    return 0;
}
