/* test_util.h — shared bits of the simgpu tests (CMocka). */
#ifndef SIMGPU_TEST_UTIL_H
#define SIMGPU_TEST_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <time.h>
#ifdef __cplusplus
extern "C" {
#endif
#include <cmocka.h>
#ifdef __cplusplus
}
#endif
#include <cuda.h>

#define CU_OK(call) assert_int_equal((int)(call), (int)CUDA_SUCCESS)
#define CU_IS(call, want) assert_int_equal((int)(call), (int)(want))

static inline double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* cuInit + primary context of device 0 made current (group setup). */
static inline int sim_test_setup(void **state)
{
    (void)state;
    CUcontext ctx;
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return -1;
    return 0;
}

#endif
