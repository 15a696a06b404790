/*
 * stats_at_exit.c — with SIMGPU_STATS=1 the simulator prints each device's
 * accounting at exit.  CTest (simgpu/stats_at_exit) matches the line for
 * exactly one 1000-byte host-to-device copy and one 10-byte copy back.
 */
#include <cuda.h>
#include <stdio.h>

int main(void)
{
    CUcontext ctx;
    CUdeviceptr d;
    static char buf[1000];
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx) || cuMemAlloc(&d, sizeof(buf)) ||
        cuMemcpyHtoD(d, buf, sizeof(buf)) || cuMemcpyDtoH(buf, d, 10)) {
        fprintf(stderr, "setup failed\n");
        return 1;
    }
    return 0;
}
