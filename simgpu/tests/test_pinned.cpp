/*
 * test_pinned.cpp — page-locked host memory: cuMemAllocHost/HostAlloc/
 * FreeHost, cuMemHostRegister/Unregister and their errors, pointer
 * attributes, and copies: Async copies from/to pinned memory return before
 * the stream reaches them and still run in stream order; pageable ones
 * keep returning after the bytes moved.
 */
#include <cstdlib>
#include <cstring>

#include <unistd.h>

#include "test_util.h"
#include "kernels.h"

static CUfunction fn(const void *k) { return (CUfunction)k; }

static const long long SPIN_NS = 400LL * 1000 * 1000;   /* the slow kernel: 400 ms */

static unsigned memory_type(const void *p)
{
    unsigned t = 0;
    CU_OK(cuPointerGetAttribute(&t, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)p));
    return t;
}

static void test_alloc_host_is_pinned_page_aligned_host_memory(void **)
{
    void *p = NULL;
    CU_OK(cuMemAllocHost(&p, 100000));
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % (uintptr_t)sysconf(_SC_PAGESIZE), 0);
    memset(p, 0x5a, 100000);    /* ordinary host memory */
    assert_int_equal(memory_type(p), CU_MEMORYTYPE_HOST);
    assert_int_equal(memory_type((char *)p + 99999), CU_MEMORYTYPE_HOST);
    CUdeviceptr dp = 0;
    CU_OK(cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, (CUdeviceptr)(uintptr_t)p));
    assert_int_equal(dp, (CUdeviceptr)(uintptr_t)p);
    void *hp = NULL;
    CU_OK(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, (CUdeviceptr)(uintptr_t)p + 8));
    assert_ptr_equal(hp, (char *)p + 8);
    int managed = 1;
    CU_OK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, (CUdeviceptr)(uintptr_t)p));
    assert_int_equal(managed, 0);
    unsigned flags = 99;
    CU_OK(cuMemHostGetFlags(&flags, p));
    assert_int_equal(flags, 0);
    CU_OK(cuMemHostGetDevicePointer(&dp, (char *)p + 4096, 0));
    assert_int_equal(dp, (CUdeviceptr)(uintptr_t)p + 4096);
    CU_IS(cuMemFreeHost((char *)p + 4096), CUDA_ERROR_INVALID_VALUE);   /* not the base */
    CU_OK(cuMemFreeHost(p));
    unsigned t;
    CU_IS(cuPointerGetAttribute(&t, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)p),
          CUDA_ERROR_INVALID_VALUE);     /* no longer known */
    CU_IS(cuMemFreeHost(p), CUDA_ERROR_INVALID_VALUE);

    CU_OK(cuMemHostAlloc(&p, 4096, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
    CU_OK(cuMemHostGetFlags(&flags, p));
    assert_int_equal(flags, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
    CU_OK(cuMemFreeHost(p));

    CU_IS(cuMemAllocHost(&p, 0), CUDA_ERROR_INVALID_VALUE);
    CU_IS(cuMemAllocHost(NULL, 64), CUDA_ERROR_INVALID_VALUE);
    CU_IS(cuMemHostAlloc(&p, 64, 0x80), CUDA_ERROR_INVALID_VALUE);
    CU_IS(cuMemFreeHost(NULL), CUDA_ERROR_INVALID_VALUE);
    /* plain malloc'd memory is unknown to the driver */
    char *plain = (char *)malloc(64);
    CU_IS(cuPointerGetAttribute(&t, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)plain),
          CUDA_ERROR_INVALID_VALUE);
    CU_IS(cuMemHostGetDevicePointer(&dp, plain, 0), CUDA_ERROR_INVALID_VALUE);
    free(plain);
}

static void test_host_register_and_its_errors(void **)
{
    const size_t len = 64 * 1024;
    char *buf = (char *)aligned_alloc(4096, len);
    assert_non_null(buf);
    unsigned t;
    CU_IS(cuPointerGetAttribute(&t, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)buf),
          CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuMemHostRegister(buf, len / 2, CU_MEMHOSTREGISTER_DEVICEMAP));
    assert_int_equal(memory_type(buf + 100), CU_MEMORYTYPE_HOST);
    CU_IS(cuPointerGetAttribute(&t, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)(buf + len / 2)),
          CUDA_ERROR_INVALID_VALUE);   /* past the registration */
    CUdeviceptr dp;
    CU_OK(cuMemHostGetDevicePointer(&dp, buf + 16, 0));
    assert_int_equal(dp, (CUdeviceptr)(uintptr_t)(buf + 16));
    CU_IS(cuMemHostGetDevicePointer(&dp, buf, 1), CUDA_ERROR_INVALID_VALUE);   /* flags must be 0 */

    /* overlapping registrations, however they overlap */
    CU_IS(cuMemHostRegister(buf, len / 2, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    CU_IS(cuMemHostRegister(buf + 4096, 4096, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    CU_IS(cuMemHostRegister(buf + len / 2 - 1, 4096, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    /* the adjacent half is free */
    CU_OK(cuMemHostRegister(buf + len / 2, len / 2, 0));
    CU_OK(cuMemHostUnregister(buf + len / 2));

    /* unregistering what is not a registration */
    CU_IS(cuMemHostUnregister(buf + 4096), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    CU_IS(cuMemHostUnregister(buf + len / 2), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    void *pinned;
    CU_OK(cuMemAllocHost(&pinned, 4096));
    CU_IS(cuMemHostUnregister(pinned), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    CU_IS(cuMemHostRegister(pinned, 4096, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    CU_IS(cuMemFreeHost(buf), CUDA_ERROR_INVALID_VALUE);     /* registered, not allocated */
    CU_OK(cuMemFreeHost(pinned));

    /* NULL, zero size, bad flags */
    CU_IS(cuMemHostRegister(NULL, 4096, 0), CUDA_ERROR_INVALID_VALUE);
    CU_IS(cuMemHostRegister(buf + len / 2, 0, 0), CUDA_ERROR_INVALID_VALUE);
    CU_IS(cuMemHostRegister(buf + len / 2, 4096, 0x100), CUDA_ERROR_INVALID_VALUE);
    CU_IS(cuMemHostUnregister(NULL), CUDA_ERROR_INVALID_VALUE);

    CU_OK(cuMemHostUnregister(buf));
    CU_IS(cuMemHostUnregister(buf), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    CU_IS(cuPointerGetAttribute(&t, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)buf),
          CUDA_ERROR_INVALID_VALUE);
    free(buf);
}

/* Registered memory works with the synchronous copies and cuMemcpy's
 * unified-address classification in both directions. */
static void test_copies_with_registered_memory(void **)
{
    const size_t n = 1 << 16;
    unsigned char *h = (unsigned char *)malloc(n), *back = (unsigned char *)malloc(n);
    for (size_t i = 0; i < n; i++)
        h[i] = (unsigned char)(i * 7);
    CU_OK(cuMemHostRegister(h, n, 0));
    CU_OK(cuMemHostRegister(back, n, 0));
    CUdeviceptr d;
    CU_OK(cuMemAlloc(&d, n));
    CU_OK(cuMemcpy(d, (CUdeviceptr)(uintptr_t)h, n));
    memset(back, 0, n);
    CU_OK(cuMemcpy((CUdeviceptr)(uintptr_t)back, d, n));
    assert_memory_equal(back, h, n);
    memset(back, 0, n);
    CU_OK(cuMemcpyDtoH(back, d, n));
    assert_memory_equal(back, h, n);
    CU_OK(cuMemFree(d));
    CU_OK(cuMemHostUnregister(h));
    CU_OK(cuMemHostUnregister(back));
    free(h);
    free(back);
}

/* A slow kernel, then a kernel writing 1 to *dst, then an async H2D of 2
 * from pinned memory into *dst and an async D2H of *dst2 into pinned
 * memory: both copy calls return while the slow kernel still runs (the
 * event recorded right after them is not reached), and after the stream
 * drains *dst holds 2 (the copy ran after the kernel's store) and the D2H
 * saw what the kernel before it wrote. */
static void test_async_copies_with_pinned_memory_return_early_and_keep_order(void **)
{
    CUstream s;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUevent after_copies;
    CU_OK(cuEventCreate(&after_copies, 0));
    CUdeviceptr done, dst, dst2;
    CU_OK(cuMemAlloc(&done, sizeof(int)));
    CU_OK(cuMemAlloc(&dst, sizeof(int)));
    CU_OK(cuMemAlloc(&dst2, sizeof(int)));
    CU_OK(cuMemsetD32(done, 0, 1));
    CU_OK(cuMemsetD32(dst2, 0, 1));
    int *in, *out;
    CU_OK(cuMemAllocHost((void **)&in, sizeof(int)));
    CU_OK(cuMemHostAlloc((void **)&out, sizeof(int), 0));
    *in = 2;
    *out = -1;
    CU_OK(cuCtxSynchronize());

    double t0 = now_ms();
    long long ns = SPIN_NS;
    void *spin_args[] = { &ns, &done };
    CU_OK(cuLaunchKernel(fn((const void *)spin_ns), 1, 1, 1, 1, 1, 1, 0, s, spin_args, NULL));
    int one = 1, three = 3;
    void *store1[] = { &dst, &one };
    CU_OK(cuLaunchKernel(fn((const void *)store_int), 1, 1, 1, 1, 1, 1, 0, s, store1, NULL));
    CU_OK(cuMemcpyHtoDAsync(dst, in, sizeof(int), s));
    void *store3[] = { &dst2, &three };
    CU_OK(cuLaunchKernel(fn((const void *)store_int), 1, 1, 1, 1, 1, 1, 0, s, store3, NULL));
    CU_OK(cuMemcpyDtoHAsync(out, dst2, sizeof(int), s));
    CU_OK(cuEventRecord(after_copies, s));
    double returned_ms = now_ms() - t0;
    int seen = *out;            /* nothing has reached the copy yet */
    CU_IS(cuEventQuery(after_copies), CUDA_ERROR_NOT_READY);
    CU_IS(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    assert_int_equal(seen, -1);
    assert_true(returned_ms < SPIN_NS / 1e6 / 2);

    CU_OK(cuStreamSynchronize(s));
    assert_true(now_ms() - t0 >= SPIN_NS / 1e6 * 0.9);
    CU_OK(cuEventQuery(after_copies));
    assert_int_equal(*out, 3);
    int got = 0;
    CU_OK(cuMemcpyDtoH(&got, dst, sizeof(int)));
    assert_int_equal(got, 2);
    CU_OK(cuMemcpyDtoH(&got, done, sizeof(int)));
    assert_int_equal(got, 1);

    /* cuMemcpyAsync classifies pinned memory too (unified addressing) */
    *in = 7;
    CU_OK(cuLaunchKernel(fn((const void *)spin_ns), 1, 1, 1, 1, 1, 1, 0, s, spin_args, NULL));
    t0 = now_ms();
    CU_OK(cuMemcpyAsync(dst, (CUdeviceptr)(uintptr_t)in, sizeof(int), s));
    assert_true(now_ms() - t0 < SPIN_NS / 1e6 / 2);
    CU_IS(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    CU_OK(cuStreamSynchronize(s));
    CU_OK(cuMemcpyDtoH(&got, dst, sizeof(int)));
    assert_int_equal(got, 7);

    CU_OK(cuMemFreeHost(in));
    CU_OK(cuMemFreeHost(out));
    CU_OK(cuMemFree(done));
    CU_OK(cuMemFree(dst));
    CU_OK(cuMemFree(dst2));
    CU_OK(cuEventDestroy(after_copies));
    CU_OK(cuStreamDestroy(s));
}

/* The contrast: from pageable memory the Async form returns only once the
 * bytes moved, so the slow kernel queued before it has finished. */
static void test_async_copy_from_pageable_memory_stays_synchronous(void **)
{
    CUstream s;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUevent before_copy;
    CU_OK(cuEventCreate(&before_copy, 0));
    CUdeviceptr done, dst;
    CU_OK(cuMemAlloc(&done, sizeof(int)));
    CU_OK(cuMemAlloc(&dst, sizeof(int)));
    int *pageable = (int *)malloc(sizeof(int));
    *pageable = 5;
    double t0 = now_ms();
    long long ns = SPIN_NS / 2;
    void *spin_args[] = { &ns, &done };
    CU_OK(cuLaunchKernel(fn((const void *)spin_ns), 1, 1, 1, 1, 1, 1, 0, s, spin_args, NULL));
    CU_OK(cuEventRecord(before_copy, s));
    CU_OK(cuMemcpyHtoDAsync(dst, pageable, sizeof(int), s));
    assert_true(now_ms() - t0 >= SPIN_NS / 2 / 1e6 * 0.9);
    CU_OK(cuEventQuery(before_copy));
    free(pageable);
    CU_OK(cuStreamSynchronize(s));
    int got = 0;
    CU_OK(cuMemcpyDtoH(&got, dst, sizeof(int)));
    assert_int_equal(got, 5);
    CU_OK(cuMemFree(done));
    CU_OK(cuMemFree(dst));
    CU_OK(cuEventDestroy(before_copy));
    CU_OK(cuStreamDestroy(s));
}

/* Many queued pinned copies on two streams (more than there are gates)
 * all arrive, in order, and are counted. */
static void test_many_async_pinned_copies_arrive_and_are_counted(void **)
{
    const int copies = 200;
    int *h;
    CU_OK(cuMemAllocHost((void **)&h, copies * sizeof(int)));
    for (int i = 0; i < copies; i++)
        h[i] = i * 3 + 1;
    CUdeviceptr d;
    CU_OK(cuMemAlloc(&d, copies * sizeof(int)));
    struct simgpu_stats before, after;
    assert_int_equal(simgpu_stats_get(0, &before), 0);
    CUstream s[2];
    CU_OK(cuStreamCreate(&s[0], 0));
    CU_OK(cuStreamCreate(&s[1], 0));
    for (int i = 0; i < copies; i++)
        CU_OK(cuMemcpyHtoDAsync(d + (CUdeviceptr)i * sizeof(int), h + i, sizeof(int), s[i % 2]));
    int *back;
    CU_OK(cuMemAllocHost((void **)&back, copies * sizeof(int)));
    memset(back, 0, copies * sizeof(int));
    CU_OK(cuMemcpyDtoHAsync(back, d, copies * sizeof(int), NULL));   /* legacy: after both */
    CU_OK(cuCtxSynchronize());
    assert_memory_equal(back, h, copies * sizeof(int));
    assert_int_equal(simgpu_stats_get(0, &after), 0);
    assert_int_equal(after.htod_transfers - before.htod_transfers, (uint64_t)copies);
    assert_int_equal(after.htod_bytes - before.htod_bytes, (uint64_t)copies * sizeof(int));
    assert_int_equal(after.dtoh_transfers - before.dtoh_transfers, 1);
    CU_OK(cuStreamDestroy(s[0]));
    CU_OK(cuStreamDestroy(s[1]));
    CU_OK(cuMemFree(d));
    CU_OK(cuMemFreeHost(h));
    CU_OK(cuMemFreeHost(back));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_host_is_pinned_page_aligned_host_memory),
        cmocka_unit_test(test_host_register_and_its_errors),
        cmocka_unit_test(test_copies_with_registered_memory),
        cmocka_unit_test(test_async_copies_with_pinned_memory_return_early_and_keep_order),
        cmocka_unit_test(test_async_copy_from_pageable_memory_stays_synchronous),
        cmocka_unit_test(test_many_async_pinned_copies_arrive_and_are_counted),
    };
    return cmocka_run_group_tests_name("pinned", tests, sim_test_setup, NULL);
}
