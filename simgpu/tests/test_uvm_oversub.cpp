/*
 * test_uvm_oversub.cpp — managed memory larger than the device, as with
 * UVM: an allocation 4x device memory succeeds (managed memory is limited
 * by host memory), kernels touching all of it run with the device's share
 * bounded by device memory less explicit allocations (least recently used
 * 2 MiB chunks evicted to the host, counted, charged on the bus), device
 * faults are serviced in batches, a prefetch of the whole range keeps the
 * bound, and the data stays intact through every migration.
 * A plain program (exit 0 pass, 1 fail): host faults on managed memory go
 * through the simulator's SIGSEGV handler.  Run with SIMGPU_MEM_MB=16.
 */
#include <cstdio>
#include <cstring>

#include <unistd.h>

#include "kernels.h"
#include "simgpu.h"
#include <cuda.h>

#include "plain_check.h"

static simgpu_stats stats()
{
    simgpu_stats s;
    simgpu_stats_get(0, &s);
    return s;
}

static CUresult add_one_all(int *p, int n)
{
    void *args[] = { &p, &n };
    CUresult r = cuLaunchKernel((CUfunction)(const void *)add_one, (unsigned)(n + 255) / 256, 1, 1, 256, 1, 1, 0,
                                NULL, args, NULL);
    return r != CUDA_SUCCESS ? r : cuCtxSynchronize();
}

int main()
{
    CUcontext ctx;
    CU(cuInit(0));
    CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU(cuCtxSetCurrent(ctx));
    size_t dev_free, dev_total;
    CU(cuMemGetInfo(&dev_free, &dev_total));
    CHECK(dev_total == 16u << 20);

    /* 1. four times device memory: allowed */
    const size_t bytes = 4 * dev_total;
    const int n = (int)(bytes / sizeof(int));
    CUdeviceptr m;
    CU(cuMemAllocManaged(&m, bytes, CU_MEM_ATTACH_GLOBAL));
    int *p = (int *)(uintptr_t)m;
    for (int i = 0; i < n; i++)
        p[i] = i;

    /* 2. a kernel over all of it: the device keeps at most its memory */
    simgpu_stats s0 = stats();
    CU(add_one_all(p, n));
    simgpu_stats s1 = stats();
    uint64_t evicted = s1.uvm_evictions - s0.uvm_evictions;
    uint64_t faults = s1.uvm_faults - s0.uvm_faults, batches = s1.uvm_fault_batches - s0.uvm_fault_batches;
    std::printf("# 64 MiB on a 16 MiB device: %llu faults in %llu batches, %llu chunks evicted (%llu B), "
                "%llu B resident after\n",
                (unsigned long long)faults, (unsigned long long)batches, (unsigned long long)evicted,
                (unsigned long long)(s1.uvm_evicted_bytes - s0.uvm_evicted_bytes),
                (unsigned long long)s1.uvm_device_resident_bytes);
    CHECK(faults >= bytes / (64 * 1024));
    CHECK(batches >= 1 && batches <= faults);
    CHECK(evicted >= (bytes - dev_total) / (2u << 20));
    CHECK(s1.uvm_evicted_bytes - s0.uvm_evicted_bytes == evicted * (2u << 20));
    CHECK(s1.bus_bytes[SIMGPU_BUS_DTOH][SIMGPU_BUS_EVICTION] - s0.bus_bytes[SIMGPU_BUS_DTOH][SIMGPU_BUS_EVICTION] ==
          s1.uvm_evicted_bytes - s0.uvm_evicted_bytes);
    CHECK(s1.uvm_device_resident_bytes <= dev_total);
    CHECK(s1.uvm_device_resident_bytes >= dev_total / 2);

    /* 3. explicit allocations shrink the managed share */
    CUdeviceptr d;
    CU(cuMemAlloc(&d, dev_total / 2));
    CU(add_one_all(p, n));
    simgpu_stats s2 = stats();
    std::printf("# with 8 MiB allocated: %llu B resident\n", (unsigned long long)s2.uvm_device_resident_bytes);
    CHECK(s2.uvm_device_resident_bytes <= dev_total / 2);
    CU(cuMemFree(d));

    /* 4. a prefetch of the whole range keeps the bound too */
    CUmemLocation dev = {}, host = {};
    dev.type = CU_MEM_LOCATION_TYPE_DEVICE;
    host.type = CU_MEM_LOCATION_TYPE_HOST;
    CU(cuMemPrefetchAsync(m, bytes, dev, 0, NULL));
    CU(cuCtxSynchronize());
    simgpu_stats s3 = stats();
    CHECK(s3.uvm_device_resident_bytes <= dev_total);
    CHECK(s3.uvm_evictions > s2.uvm_evictions);

    /* 5. every byte made it through: back on the host, two increments */
    CU(cuMemPrefetchAsync(m, bytes, host, 0, NULL));
    CU(cuCtxSynchronize());
    CHECK(stats().uvm_device_resident_bytes == 0);
    for (int i = 0; i < n; i++)
        if (p[i] != i + 2) {
            std::fprintf(stderr, "FAIL: p[%d] = %d, want %d\n", i, p[i], i + 2);
            return 1;
        }
    CU(cuMemFree(m));
    CHECK(stats().uvm_device_resident_bytes == 0);

    /* 6. but not beyond host memory */
    long pages = sysconf(_SC_PHYS_PAGES), pg = sysconf(_SC_PAGESIZE);
    CUdeviceptr big;
    CHECK(cuMemAllocManaged(&big, (size_t)pages * (size_t)pg + (64u << 20), CU_MEM_ATTACH_GLOBAL) ==
          CUDA_ERROR_OUT_OF_MEMORY);
    std::printf("ok\n");
    return 0;
}
