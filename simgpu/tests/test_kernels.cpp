/*
 * test_kernels.cpp — launches, asynchrony, stream order, events, errors.
 */
#include <cstdio>
#include <unistd.h>
#include <cstring>
#include <vector>

#include <cudaTypedefs.h>

#include "test_util.h"
#include "kernels.h"

static CUfunction fn(const void *k) { return (CUfunction)k; }

static void test_launch_with_kernel_params(void **)
{
    const int n = 1000;
    std::vector<float> a(n), b(n), c(n);
    for (int i = 0; i < n; i++) {
        a[i] = (float)i;
        b[i] = 0.5f * (float)i;
    }
    CUdeviceptr da, db, dc;
    CU_OK(cuMemAlloc(&da, n * 4));
    CU_OK(cuMemAlloc(&db, n * 4));
    CU_OK(cuMemAlloc(&dc, n * 4));
    CU_OK(cuMemcpyHtoD(da, a.data(), n * 4));
    CU_OK(cuMemcpyHtoD(db, b.data(), n * 4));
    int nn = n;
    void *args[] = { &da, &db, &dc, &nn };
    CU_OK(cuLaunchKernel(fn((const void *)vec_add), (n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    CU_OK(cuMemcpyDtoH(c.data(), dc, n * 4));
    for (int i = 0; i < n; i++)
        assert_true(c[i] == 1.5f * (float)i);
    cuMemFree(da);
    cuMemFree(db);
    cuMemFree(dc);
}

static void test_launch_with_extra_buffer_and_ex(void **)
{
    CUdeviceptr d;
    CU_OK(cuMemAlloc(&d, 64 * sizeof(int)));
    CU_OK(cuMemsetD32(d, 10, 64));
    struct { CUdeviceptr x; int n; } packed = { d, 64 };
    size_t size = sizeof(packed);
    void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                      CU_LAUNCH_PARAM_END };
    CU_OK(cuLaunchKernel(fn((const void *)add_one), 2, 1, 1, 32, 1, 1, 0, NULL, NULL, extra));
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 64;
    cfg.blockDimY = cfg.blockDimZ = 1;
    int n = 64;
    void *args[] = { &d, &n };
    CU_OK(cuLaunchKernelEx(&cfg, fn((const void *)add_one), args, NULL));
    PFN_cuLaunchKernel_v7000_ptsz launch_ptsz;
    CU_OK(cuGetProcAddress("cuLaunchKernel", (void **)&launch_ptsz, 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                           NULL));
    CU_OK(launch_ptsz(fn((const void *)add_one), 1, 1, 1, 64, 1, 1, 0, NULL, args, NULL));
    int out[64];
    CU_OK(cuCtxSynchronize());
    CU_OK(cuMemcpyDtoH(out, d, sizeof(out)));
    for (int i = 0; i < 64; i++)
        assert_int_equal(out[i], 13);
    CU_IS(cuLaunchKernel(fn((const void *)add_one), 1, 1, 1, 1, 1, 1, 0, NULL, args, extra), CUDA_ERROR_INVALID_VALUE);
    CU_IS(cuLaunchKernel(fn((const void *)add_one), 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuLaunchKernel(fn((const void *)no_params), 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    cuMemFree(d);
}

static void test_param_info_and_name(void **)
{
    size_t off, size;
    const size_t want_off[] = { 0, 8, 16, 20, 24, 32 }, want_size[] = { 1, 8, 4, 2, 8, 8 };
    for (size_t i = 0; i < 6; i++) {
        CU_OK(cuFuncGetParamInfo(fn((const void *)mixed_params), i, &off, &size));
        assert_int_equal(off, want_off[i]);
        assert_int_equal(size, want_size[i]);
    }
    CU_IS(cuFuncGetParamInfo(fn((const void *)mixed_params), 6, &off, &size), CUDA_ERROR_INVALID_VALUE);
    const char *name;
    CU_OK(cuFuncGetName(&name, fn((const void *)mixed_params)));
    assert_string_equal(name, "mixed_params");
    int not_a_kernel;
    CU_IS(cuFuncGetName(&name, fn(&not_a_kernel)), CUDA_ERROR_INVALID_HANDLE);

    /* the arguments arrive at those offsets */
    CUdeviceptr out;
    CU_OK(cuMemAlloc(&out, 5 * 8));
    char c = 'A';
    double d = 2.5;
    int i = -7;
    short s = 300;
    void *p = (void *)0x1234;
    void *args[] = { &c, &d, &i, &s, &p, &out };
    CU_OK(cuLaunchKernel(fn((const void *)mixed_params), 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    unsigned long long r[5];
    CU_OK(cuMemcpyDtoH(r, out, sizeof(r)));
    assert_int_equal(r[0], 'A');
    assert_int_equal(r[1], 10);
    assert_int_equal((long long)r[2], -7);
    assert_int_equal(r[3], 300);
    assert_int_equal(r[4], 0x1234);
    cuMemFree(out);
}

static void test_bad_launch_configuration(void **)
{
    CUdeviceptr d;
    CU_OK(cuMemAlloc(&d, 4));
    int n = 1;
    void *args[] = { &d, &n };
    CUfunction f = fn((const void *)add_one);
    CU_IS(cuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_VALUE);
    CU_IS(cuLaunchKernel(f, 1, 1, 1, 32, 32, 2, 0, NULL, args, NULL), CUDA_ERROR_INVALID_VALUE);
    CU_IS(cuLaunchKernel(f, 0, 1, 1, 32, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_VALUE);
    CU_IS(cuLaunchKernel(f, 1, 70000, 1, 32, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_VALUE);
    CU_IS(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 1 << 20, NULL, args, NULL), CUDA_ERROR_INVALID_VALUE);
    int not_a_kernel;
    CU_IS(cuLaunchKernel(fn(&not_a_kernel), 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_HANDLE);
    CU_IS(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, (CUstream)&n, args, NULL), CUDA_ERROR_INVALID_HANDLE);
    cuMemFree(d);
}

static void test_grid_and_block_indices(void **)
{
    const unsigned gx = 3, gy = 2, gz = 2, bx = 4, by = 3, bz = 2;
    const unsigned total = gx * gy * gz * bx * by * bz;
    CUdeviceptr d;
    CU_OK(cuMemAlloc(&d, total * 4));
    CU_OK(cuMemsetD32(d, 0, total));
    void *args[] = { &d };
    CU_OK(cuLaunchKernel(fn((const void *)grid_ids), gx, gy, gz, bx, by, bz, 0, NULL, args, NULL));
    std::vector<unsigned> out(total);
    CU_OK(cuMemcpyDtoH(out.data(), d, total * 4));
    for (unsigned i = 0; i < total; i++)
        assert_int_equal(out[i], i + 1);
    cuMemFree(d);
}

static void test_atomics(void **)
{
    CUdeviceptr di, du, dull, df;
    CU_OK(cuMemAlloc(&di, 5 * 4));
    CU_OK(cuMemAlloc(&du, 3 * 4));
    CU_OK(cuMemAlloc(&dull, 2 * 8));
    CU_OK(cuMemAlloc(&df, 4));
    int i0[5] = { 0, 0, 0, 0, 0 };
    unsigned u0[3] = { 0, 0, 0xffffffffu };
    unsigned long long l0[2] = { 0, 0 };
    float f0 = 0;
    CU_OK(cuMemcpyHtoD(di, i0, sizeof(i0)));
    CU_OK(cuMemcpyHtoD(du, u0, sizeof(u0)));
    CU_OK(cuMemcpyHtoD(dull, l0, sizeof(l0)));
    CU_OK(cuMemcpyHtoD(df, &f0, sizeof(f0)));
    void *args[] = { &di, &du, &dull, &df };
    CU_OK(cuLaunchKernel(fn((const void *)atomics), 4, 1, 1, 64, 1, 1, 0, NULL, args, NULL));
    CU_OK(cuMemcpyDtoH(i0, di, sizeof(i0)));
    CU_OK(cuMemcpyDtoH(u0, du, sizeof(u0)));
    CU_OK(cuMemcpyDtoH(l0, dull, sizeof(l0)));
    CU_OK(cuMemcpyDtoH(&f0, df, sizeof(f0)));
    assert_int_equal(i0[0], 256);
    assert_int_equal(i0[1], -255);
    assert_int_equal(i0[2], 255);
    assert_true(i0[3] >= 1 && i0[3] <= 256);
    assert_int_equal(i0[4], 7);
    assert_int_equal(u0[0], 512);
    assert_int_equal(u0[1], 255);
    assert_int_equal(u0[2], 0);
    assert_int_equal(l0[0], 256ull << 33);
    assert_int_equal(l0[1], 5);
    assert_true(f0 == 128.0f);
    cuMemFree(di);
    cuMemFree(du);
    cuMemFree(dull);
    cuMemFree(df);
}

/* The host runs on while a kernel spins; synchronization waits for it. */
static void test_launch_is_asynchronous(void **)
{
    CUdeviceptr done;
    CU_OK(cuMemAlloc(&done, 4));
    CU_OK(cuMemsetD32(done, 0, 1));
    CUstream s;
    CU_OK(cuStreamCreate(&s, 0));
    long long ns = 300ll * 1000 * 1000;
    void *args[] = { &ns, &done };
    double t0 = now_ms();
    CU_OK(cuLaunchKernel(fn((const void *)spin_ns), 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    double t_launch = now_ms() - t0;
    assert_true(t_launch < 100);
    CUresult q = cuStreamQuery(s);
    if (now_ms() - t0 < 250)                /* not descheduled past the spin: still running */
        CU_IS(q, CUDA_ERROR_NOT_READY);
    CU_OK(cuStreamSynchronize(s));
    double t_sync = now_ms() - t0;
    assert_true(t_sync >= 290);
    CU_OK(cuStreamQuery(s));
    int v = 0;
    CU_OK(cuMemcpyDtoH(&v, done, 4));
    assert_int_equal(v, 1);
    CU_OK(cuStreamDestroy(s));
    cuMemFree(done);
}

static void read_log(CUdeviceptr log, unsigned n, std::vector<unsigned> &out)
{
    out.resize(n);
    CU_OK(cuMemcpyDtoH(out.data(), log, n * 4));
}

/* One stream: ops run in submission order even when the first is slow. */
static void test_stream_order(void **)
{
    CUdeviceptr log, count, done;
    CU_OK(cuMemAlloc(&log, 64 * 4));
    CU_OK(cuMemAlloc(&count, 4));
    CU_OK(cuMemAlloc(&done, 4));
    CU_OK(cuMemsetD32(count, 0, 1));
    CUstream s;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    long long ns = 50ll * 1000 * 1000;
    void *spin_args[] = { &ns, &done };
    CU_OK(cuLaunchKernel(fn((const void *)spin_ns), 1, 1, 1, 1, 1, 1, 0, s, spin_args, NULL));
    for (unsigned t = 1; t <= 20; t++) {
        void *args[] = { &log, &count, &t };
        CU_OK(cuLaunchKernel(fn((const void *)append_tag), 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    }
    CU_OK(cuStreamSynchronize(s));
    std::vector<unsigned> out;
    read_log(log, 20, out);
    for (unsigned t = 0; t < 20; t++)
        assert_int_equal(out[t], t + 1);
    CU_OK(cuStreamDestroy(s));
    cuMemFree(log);
    cuMemFree(count);
    cuMemFree(done);
}

/* Legacy default stream: a blocking stream's op waits for earlier legacy
 * work, and a legacy op waits for earlier blocking-stream work; a
 * non-blocking stream does not wait. */
static void test_legacy_stream_semantics(void **)
{
    CUdeviceptr log, count, done;
    CU_OK(cuMemAlloc(&log, 64 * 4));
    CU_OK(cuMemAlloc(&count, 4));
    CU_OK(cuMemAlloc(&done, 4));
    CU_OK(cuMemsetD32(count, 0, 1));
    CU_OK(cuCtxSynchronize());
    CUstream blocking, nonblocking;
    CU_OK(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
    CU_OK(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
    long long ns = 200ll * 1000 * 1000;
    void *spin_args[] = { &ns, &done };
    unsigned t1 = 1, t2 = 2, t3 = 3, t4 = 4;
    double t0 = now_ms();
    void *a1[] = { &log, &count, &t1 }, *a2[] = { &log, &count, &t2 }, *a3[] = { &log, &count, &t3 },
         *a4[] = { &log, &count, &t4 };
    CUfunction spin = fn((const void *)spin_ns), tag = fn((const void *)append_tag);
    CU_OK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, blocking, spin_args, NULL));
    CU_OK(cuLaunchKernel(tag, 1, 1, 1, 1, 1, 1, 0, blocking, a1, NULL));      /* after the spin */
    CU_OK(cuLaunchKernel(tag, 1, 1, 1, 1, 1, 1, 0, NULL, a2, NULL));          /* legacy: after tag 1 */
    CU_OK(cuLaunchKernel(tag, 1, 1, 1, 1, 1, 1, 0, blocking, a3, NULL));      /* after legacy tag 2 */
    CU_OK(cuLaunchKernel(tag, 1, 1, 1, 1, 1, 1, 0, nonblocking, a4, NULL));   /* overtakes all */
    bool quick = now_ms() - t0 < 150;       /* submitted well before the spin ended */
    CU_OK(cuCtxSynchronize());
    std::vector<unsigned> out;
    read_log(log, 4, out);
    if (quick)
        assert_int_equal(out[0], 4);
    std::vector<unsigned> rest;
    for (unsigned i = 0; i < 4; i++)
        if (out[i] != 4)
            rest.push_back(out[i]);
    assert_int_equal(rest.size(), 3);
    assert_int_equal(rest[0], 1);           /* the blocking/legacy chain is ordered regardless */
    assert_int_equal(rest[1], 2);
    assert_int_equal(rest[2], 3);
    CU_OK(cuStreamDestroy(blocking));
    CU_OK(cuStreamDestroy(nonblocking));
    cuMemFree(log);
    cuMemFree(count);
    cuMemFree(done);
}

static void test_events_time_and_order_streams(void **)
{
    CUdeviceptr log, count, done;
    CU_OK(cuMemAlloc(&log, 64 * 4));
    CU_OK(cuMemAlloc(&count, 4));
    CU_OK(cuMemAlloc(&done, 4));
    CU_OK(cuMemsetD32(count, 0, 1));
    CUstream s1, s2;
    CU_OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CU_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CUevent start, stop, never;
    CU_OK(cuEventCreate(&start, CU_EVENT_DEFAULT));
    CU_OK(cuEventCreate(&stop, CU_EVENT_DEFAULT));
    CU_OK(cuEventCreate(&never, CU_EVENT_DEFAULT));
    CU_OK(cuEventQuery(never));                         /* never recorded: complete */
    long long ns = 120ll * 1000 * 1000;
    void *spin_args[] = { &ns, &done };
    unsigned t1 = 1, t2 = 2;
    void *a1[] = { &log, &count, &t1 }, *a2[] = { &log, &count, &t2 };
    CU_OK(cuCtxSynchronize());
    double t0 = now_ms();
    CU_OK(cuEventRecord(start, s1));
    CU_OK(cuLaunchKernel(fn((const void *)spin_ns), 1, 1, 1, 1, 1, 1, 0, s1, spin_args, NULL));
    CU_OK(cuLaunchKernel(fn((const void *)append_tag), 1, 1, 1, 1, 1, 1, 0, s1, a1, NULL));
    CU_OK(cuEventRecord(stop, s1));
    float ms;
    CUresult q1 = cuEventQuery(stop), q2 = cuEventElapsedTime(&ms, start, stop);
    if (now_ms() - t0 < 100) {              /* not descheduled past the spin */
        CU_IS(q1, CUDA_ERROR_NOT_READY);
        CU_IS(q2, CUDA_ERROR_NOT_READY);
    }
    CU_IS(cuEventElapsedTime(&ms, start, never), CUDA_ERROR_INVALID_HANDLE);
    /* s2 waits for s1's stop event, so tag 2 lands after tag 1 */
    CU_OK(cuStreamWaitEvent(s2, stop, 0));
    CU_OK(cuLaunchKernel(fn((const void *)append_tag), 1, 1, 1, 1, 1, 1, 0, s2, a2, NULL));
    CU_OK(cuEventSynchronize(stop));
    CU_OK(cuEventQuery(stop));
    CU_OK(cuEventElapsedTime(&ms, start, stop));
    assert_true(ms >= 115.0f && ms < 5000.0f);
    CU_OK(cuStreamSynchronize(s2));
    std::vector<unsigned> out;
    read_log(log, 2, out);
    assert_int_equal(out[0], 1);
    assert_int_equal(out[1], 2);
    CUevent notiming;
    CU_OK(cuEventCreate(&notiming, CU_EVENT_DISABLE_TIMING));
    CU_OK(cuEventRecord(notiming, s1));
    CU_OK(cuEventSynchronize(notiming));
    CU_IS(cuEventElapsedTime(&ms, start, notiming), CUDA_ERROR_INVALID_HANDLE);
    CU_OK(cuEventDestroy(start));
    CU_OK(cuEventDestroy(stop));
    CU_OK(cuEventDestroy(never));
    CU_OK(cuEventDestroy(notiming));
    CU_OK(cuStreamDestroy(s1));
    CU_OK(cuStreamDestroy(s2));
    cuMemFree(log);
    cuMemFree(count);
    cuMemFree(done);
}

/* A kernel works on memory mapped through the VMM API. */
static void test_kernel_on_vmm_memory(void **)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    const size_t size = 2u << 20;
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    CU_OK(cuMemCreate(&h, size, &prop, 0));
    CU_OK(cuMemAddressReserve(&va, size, 0, 0, 0));
    CU_OK(cuMemMap(va, size, 0, h, 0));
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof(acc));
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU_OK(cuMemSetAccess(va, size, &acc, 1));
    int n = (int)(size / 4);
    CU_OK(cuMemsetD32(va, 41, (size_t)n));
    void *args[] = { &va, &n };
    CU_OK(cuLaunchKernel(fn((const void *)add_one), (unsigned)n / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    std::vector<int> out((size_t)n);
    CU_OK(cuMemcpyDtoH(out.data(), va, size));
    for (int i = 0; i < n; i++)
        assert_int_equal(out[(size_t)i], 42);
    CU_OK(cuMemUnmap(va, size));
    CU_OK(cuMemRelease(h));
    CU_OK(cuMemAddressFree(va, size));
}

static void test_kernel_counts(void **)
{
    struct simgpu_stats a, b;
    assert_int_equal(simgpu_stats_get(0, &a), 0);
    for (int i = 0; i < 5; i++)
        CU_OK(cuLaunchKernel(fn((const void *)no_params), 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    CU_OK(cuCtxSynchronize());
    assert_int_equal(simgpu_stats_get(0, &b), 0);
    assert_int_equal(b.kernels_launched - a.kernels_launched, 5);
    assert_int_equal(b.kernels_completed - a.kernels_completed, 5);
}

/* A GPU runs an op of another stream beside a kernel that fills it (a
 * memset, a copy, a prefetch uses its own engines): the op must not wait
 * for the kernel's last blocks. 128 blocks of 5 ms on SIMGPU_WORKERS
 * workers; a memset on another stream submitted once they all run it. */
static void test_an_op_of_another_stream_runs_beside_a_kernel_that_fills_every_worker(void **)
{
    CUstream ks, os;
    CU_OK(cuStreamCreate(&ks, CU_STREAM_NON_BLOCKING));
    CU_OK(cuStreamCreate(&os, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d;
    CU_OK(cuMemAlloc(&d, 4096));
    long long ns = 5ll * 1000 * 1000;
    void *args[] = { &ns };
    double t0 = now_ms();
    CU_OK(cuLaunchKernel(fn((const void *)spin_every_block), 128, 1, 1, 1, 1, 1, 0, ks, args, NULL));
    usleep(30 * 1000);  /* every worker has taken a part of the kernel */
    double t1 = now_ms();
    CU_OK(cuMemsetD8Async(d, 0x5a, 4096, os));
    CU_OK(cuStreamSynchronize(os));
    double op_ms = now_ms() - t1;
    CUresult q = cuStreamQuery(ks);
    CU_OK(cuStreamSynchronize(ks));
    double kernel_ms = now_ms() - t0;
    printf("# memset on another stream submitted 30 ms into the kernel, done after %.1f ms; the kernel ended "
           "after %.1f ms (%s when the memset was done)\n", op_ms, kernel_ms, q == CUDA_ERROR_NOT_READY ? "running" : "done");
    CU_IS(q, CUDA_ERROR_NOT_READY);
    assert_true(op_ms < 0.5 * kernel_ms);
    unsigned char back[4096];
    CU_OK(cuMemcpyDtoH(back, d, sizeof(back)));
    for (size_t i = 0; i < sizeof(back); i++)
        assert_int_equal(back[i], 0x5a);
    CU_OK(cuMemFree(d));
    CU_OK(cuStreamDestroy(ks));
    CU_OK(cuStreamDestroy(os));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_launch_with_kernel_params),
        cmocka_unit_test(test_launch_with_extra_buffer_and_ex),
        cmocka_unit_test(test_param_info_and_name),
        cmocka_unit_test(test_bad_launch_configuration),
        cmocka_unit_test(test_grid_and_block_indices),
        cmocka_unit_test(test_atomics),
        cmocka_unit_test(test_launch_is_asynchronous),
        cmocka_unit_test(test_stream_order),
        cmocka_unit_test(test_legacy_stream_semantics),
        cmocka_unit_test(test_events_time_and_order_streams),
        cmocka_unit_test(test_kernel_on_vmm_memory),
        cmocka_unit_test(test_kernel_counts),
        cmocka_unit_test(test_an_op_of_another_stream_runs_beside_a_kernel_that_fills_every_worker),
    };
    return cmocka_run_group_tests_name("kernels", tests, sim_test_setup, NULL);
}
