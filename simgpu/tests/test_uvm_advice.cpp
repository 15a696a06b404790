/*
 * test_uvm_advice.cpp — cuMemAdvise as UVM honours it:
 *   ACCESSED_BY the device, and PREFERRED_LOCATION host: a kernel reaches
 *   host-resident blocks remotely (no migration, no residency; every page
 *   it touches charged on the bus), the host keeps using them without
 *   faults, stores land where the host sees them;
 *   PREFERRED_LOCATION device: under oversubscription its chunks are
 *   evicted last.
 * A plain program (exit 0 pass, 1 fail): host faults on managed memory go
 * through the simulator's SIGSEGV handler.  Run with SIMGPU_MEM_MB=16.
 */
#include <cstdio>

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

static CUresult run(const void *k, int *p, int n, unsigned long long *sum)
{
    void *two[] = { &p, &n };
    void *three[] = { &p, &n, &sum };
    CUresult r = cuLaunchKernel((CUfunction)k, (unsigned)(n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL,
                                sum ? three : two, NULL);
    return r != CUDA_SUCCESS ? r : cuCtxSynchronize();
}

static uint64_t access(const simgpu_stats &s, int dir) { return s.bus_bytes[dir][SIMGPU_BUS_HOST_ACCESS]; }

int main()
{
    CUcontext ctx;
    CU(cuInit(0));
    CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU(cuCtxSetCurrent(ctx));
    const size_t MB = 1u << 20;
    unsigned long long *sum;
    CU(cuMemAllocHost((void **)&sum, sizeof(*sum)));

    /* errors */
    CUmemLocation dev0 = {}, dev5 = {};
    dev0.type = dev5.type = CU_MEM_LOCATION_TYPE_DEVICE;
    dev5.id = 5;
    CUdeviceptr m;
    CU(cuMemAllocManaged(&m, MB, CU_MEM_ATTACH_GLOBAL));
    CHECK(cuMemAdvise(m, MB, CU_MEM_ADVISE_SET_ACCESSED_BY, dev5) == CUDA_ERROR_INVALID_DEVICE);
    CHECK(cuMemAdvise(m, MB, (CUmem_advise)99, dev0) == CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr plain;
    CU(cuMemAlloc(&plain, MB));
    CHECK(cuMemAdvise(plain, MB, CU_MEM_ADVISE_SET_ACCESSED_BY, dev0) == CUDA_ERROR_INVALID_VALUE);
    CU(cuMemFree(plain));

    /* 1. accessed-by the device: reads reach the host's copy, nothing moves */
    int *p = (int *)(uintptr_t)m;
    const int n = (int)(MB / sizeof(int));
    unsigned long long want = 0;
    for (int i = 0; i < n; i++) {
        p[i] = i % 100;
        want += (unsigned long long)(i % 100);
    }
    CU(cuMemAdvise(m, MB, CU_MEM_ADVISE_SET_ACCESSED_BY, dev0));
    simgpu_stats s0 = stats();
    *sum = 0;
    CU(run((const void *)sum_ints, p, n, sum));
    simgpu_stats s1 = stats();
    CHECK(*sum == want);
    CHECK(s1.uvm_migrated_bytes == s0.uvm_migrated_bytes);
    CHECK(s1.uvm_device_resident_bytes == 0);
    CHECK(s1.uvm_remote_bytes - s0.uvm_remote_bytes == MB);
    CHECK(access(s1, SIMGPU_BUS_HTOD) - access(s0, SIMGPU_BUS_HTOD) == MB);
    /* the host writes without a fault: the blocks never left */
    for (int i = 0; i < n; i++)
        p[i] = 1;
    CHECK(stats().uvm_faults == s1.uvm_faults);
    *sum = 0;
    CU(run((const void *)sum_ints, p, n, sum));
    CHECK(*sum == (unsigned long long)n);
    CU(cuMemAdvise(m, MB, CU_MEM_ADVISE_UNSET_ACCESSED_BY, dev0));

    /* 2. preferred location host: stores too stay on the host */
    CUmemLocation host = {};
    host.type = CU_MEM_LOCATION_TYPE_HOST;
    CU(cuMemAdvise(m, MB, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, host));
    simgpu_stats s2 = stats();
    CU(run((const void *)add_one, p, n, NULL));
    simgpu_stats s3 = stats();
    CHECK(s3.uvm_migrated_bytes == s2.uvm_migrated_bytes);
    CHECK(access(s3, SIMGPU_BUS_DTOH) - access(s2, SIMGPU_BUS_DTOH) == MB);
    for (int i = 0; i < n; i++)
        CHECK(p[i] == 2);
    CHECK(stats().uvm_faults == s3.uvm_faults);
    /* unset: the next kernel migrates again */
    CU(cuMemAdvise(m, MB, CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, host));
    CU(run((const void *)add_one, p, n, NULL));
    simgpu_stats s4 = stats();
    CHECK(s4.uvm_migrated_bytes - s3.uvm_migrated_bytes == MB);
    CHECK(s4.uvm_device_resident_bytes == MB);
    CU(cuMemFree(m));

    /* 3. preferred location device: evicted last */
    CUdeviceptr a, b;
    CU(cuMemAllocManaged(&a, 8 * MB, CU_MEM_ATTACH_GLOBAL));
    CU(cuMemAllocManaged(&b, 24 * MB, CU_MEM_ATTACH_GLOBAL));
    CU(cuMemAdvise(a, 8 * MB, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, dev0));
    int *pa = (int *)(uintptr_t)a, *pb = (int *)(uintptr_t)b;
    CU(run((const void *)add_one, pa, (int)(8 * MB / sizeof(int)), NULL));
    CU(run((const void *)add_one, pb, (int)(24 * MB / sizeof(int)), NULL));
    simgpu_stats s5 = stats();
    CHECK(s5.uvm_evictions > 0);
    CU(run((const void *)add_one, pa, (int)(8 * MB / sizeof(int)), NULL));
    simgpu_stats s6 = stats();
    std::printf("# a (preferred on the device) touched again: %llu faults\n",
                (unsigned long long)(s6.uvm_faults - s5.uvm_faults));
    CHECK(s6.uvm_faults == s5.uvm_faults);     /* a never left */
    CHECK(pa[12345] == 2 && pb[54321] == 1);
    CU(cuMemFree(a));
    CU(cuMemFree(b));
    CU(cuMemFreeHost(sum));
    std::printf("ok\n");
    return 0;
}
