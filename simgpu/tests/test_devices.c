/*
 * test_devices.c — SIMGPU_DEVICES=2: two devices, each with its own memory
 * window, device process, streams and counters.
 */
#include <string.h>

#include "simgpu.h"
#include "test_util.h"

static CUcontext ctx[2];

static int setup(void **state)
{
    (void)state;
    if (cuInit(0) != CUDA_SUCCESS)
        return -1;
    for (int i = 0; i < 2; i++)
        if (cuDevicePrimaryCtxRetain(&ctx[i], i) != CUDA_SUCCESS)
            return -1;
    return 0;
}

static void test_two_devices_have_separate_memory(void **state)
{
    (void)state;
    int n;
    CU_OK(cuDeviceGetCount(&n));
    assert_int_equal(n, 2);
    assert_ptr_not_equal(ctx[0], ctx[1]);
    CUdeviceptr p0, p1;
    CU_OK(cuCtxSetCurrent(ctx[0]));
    CU_OK(cuMemAlloc(&p0, 4096));
    CU_OK(cuMemsetD8(p0, 0x11, 4096));
    CU_OK(cuCtxSetCurrent(ctx[1]));
    CU_OK(cuMemAlloc(&p1, 4096));
    CU_OK(cuMemsetD8(p1, 0x22, 4096));
    assert_true(p0 != p1);
    int ord = -1;
    CU_OK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p0));
    assert_int_equal(ord, 0);
    CU_OK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p1));
    assert_int_equal(ord, 1);
    /* a copy on device 1's stream cannot target device 0's memory ... */
    unsigned char buf[4096];
    CU_IS(cuMemcpyDtoH(buf, p0, 16), CUDA_ERROR_INVALID_VALUE);
    /* ... but cuMemcpy with unified addressing moves bytes between devices */
    CU_OK(cuCtxSynchronize());
    CU_OK(cuMemcpy(p1, p0, 1024));
    CU_OK(cuMemcpyDtoH(buf, p1, sizeof(buf)));
    assert_int_equal(buf[0], 0x11);
    assert_int_equal(buf[1023], 0x11);
    assert_int_equal(buf[1024], 0x22);
    CU_OK(cuCtxSetCurrent(ctx[0]));
    CU_OK(cuMemcpyDtoH(buf, p0, sizeof(buf)));
    assert_int_equal(buf[4095], 0x11);
    struct simgpu_stats s0, s1;
    assert_int_equal(simgpu_stats_get(0, &s0), 0);
    assert_int_equal(simgpu_stats_get(1, &s1), 0);
    assert_int_equal(s0.dtoh_bytes, 4096);
    assert_int_equal(s1.dtoh_bytes, 4096);
    assert_int_equal(s0.memset_bytes, 4096);
    assert_int_equal(s1.memset_bytes, 4096);
    CU_OK(cuMemFree(p0));
    CU_OK(cuMemFree(p1));
}

static void test_context_stack(void **state)
{
    (void)state;
    CUcontext c;
    CUdevice dev;
    CU_OK(cuCtxSetCurrent(ctx[0]));
    CU_OK(cuCtxPushCurrent(ctx[1]));
    CU_OK(cuCtxGetDevice(&dev));
    assert_int_equal(dev, 1);
    CU_OK(cuCtxPopCurrent(&c));
    assert_ptr_equal(c, ctx[1]);
    CU_OK(cuCtxGetCurrent(&c));
    assert_ptr_equal(c, ctx[0]);
    CU_OK(cuCtxSetCurrent(NULL));                 /* pops */
    CU_OK(cuCtxGetCurrent(&c));
    assert_null(c);
    CU_IS(cuCtxPopCurrent(&c), CUDA_ERROR_INVALID_CONTEXT);
    CUdeviceptr p;
    CU_IS(cuMemAlloc(&p, 16), CUDA_ERROR_INVALID_CONTEXT);
    CU_OK(cuCtxSetCurrent(ctx[0]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_devices_have_separate_memory),
        cmocka_unit_test(test_context_stack),
    };
    return cmocka_run_group_tests_name("devices", tests, setup, NULL);
}
