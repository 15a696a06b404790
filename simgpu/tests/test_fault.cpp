/*
 * test_fault.cpp — a kernel that dereferences a bad pointer: the device
 * process survives, the context reports CUDA_ERROR_ILLEGAL_ADDRESS at the
 * next synchronization and from then on (a sticky error, as on hardware).
 * Exit 0 pass, 1 fail.
 */
#include <cstdio>

#include "kernels.h"
#include <cuda.h>

#include "plain_check.h"

int main()
{
    CUcontext ctx;
    CHECK(cuInit(0) == CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
    CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    CUdeviceptr good;
    CHECK(cuMemAlloc(&good, 4) == CUDA_SUCCESS);
    int *bad = (int *)16;                       /* unmapped in the device process */
    int v = 5;
    void *args[] = { &bad, &v };
    CHECK(cuLaunchKernel((CUfunction)(const void *)store_int, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL) == CUDA_SUCCESS);
    CUresult r = cuCtxSynchronize();
    std::fprintf(stderr, "cuCtxSynchronize after the bad store: %d\n", (int)r);
    CHECK(r == CUDA_ERROR_ILLEGAL_ADDRESS);
    CUdeviceptr p;
    CHECK(cuMemAlloc(&p, 4) == CUDA_ERROR_ILLEGAL_ADDRESS);      /* sticky */
    void *args2[] = { &good, &v };
    CHECK(cuLaunchKernel((CUfunction)(const void *)store_int, 1, 1, 1, 1, 1, 1, 0, NULL, args2, NULL) ==
          CUDA_ERROR_ILLEGAL_ADDRESS);
    std::puts("ok");
    return 0;
}
