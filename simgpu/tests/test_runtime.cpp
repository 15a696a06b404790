/*
 * test_runtime.cpp — a runtime-API program: libcudart.so.13 reaches
 * libcuda.so.1 through dlopen + cuGetProcAddress, as static cudart does.
 * Run twice by CTest: plain (simgpu/runtime) and behind interpose_count.so
 * (simgpu/runtime_interposed), where the interposer's counts of launches
 * and syncs must match what the program did and what the simulator saw.
 */
#include <dlfcn.h>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime_api.h>

#include "test_util.h"
#include "kernels.h"

/* launches accepted, launch calls made (rejected ones too), syncs made */
static unsigned long launches_made, launch_calls, syncs_made;

#define RT_OK(call) assert_int_equal((int)(call), (int)cudaSuccess)

static void test_vector_add_through_the_runtime(void **)
{
    int n = 0;
    RT_OK(cudaGetDeviceCount(&n));
    assert_int_equal(n, 1);
    RT_OK(cudaSetDevice(0));
    int dev = -1;
    RT_OK(cudaGetDevice(&dev));
    assert_int_equal(dev, 0);
    const int N = 5000;
    std::vector<float> a(N), b(N), c(N);
    for (int i = 0; i < N; i++) {
        a[i] = (float)i;
        b[i] = 2.0f;
    }
    float *da, *db, *dc;
    RT_OK(cudaMalloc((void **)&da, N * 4));
    RT_OK(cudaMalloc((void **)&db, N * 4));
    RT_OK(cudaMalloc((void **)&dc, N * 4));
    RT_OK(cudaMemcpy(da, a.data(), N * 4, cudaMemcpyHostToDevice));
    RT_OK(cudaMemcpy(db, b.data(), N * 4, cudaMemcpyHostToDevice));
    RT_OK(cudaMemset(dc, 0, N * 4));
    int nn = N;
    void *args[] = { &da, &db, &dc, &nn };
    RT_OK(cudaLaunchKernel((const void *)vec_add, dim3((N + 127) / 128), dim3(128), args, 0, 0));
    launches_made++;
    launch_calls++;
    RT_OK(cudaDeviceSynchronize());
    syncs_made++;
    RT_OK(cudaMemcpy(c.data(), dc, N * 4, cudaMemcpyDeviceToHost));
    for (int i = 0; i < N; i++)
        assert_true(c[i] == (float)i + 2.0f);
    /* the <<<>>> stand-in */
    RT_OK(SIMGPU_LAUNCH(add_one, dim3(1), dim3(64), 0, 0)((int *)dc, 64));
    launches_made++;
    launch_calls++;
    RT_OK(cudaMemcpy(c.data(), dc, 64 * 4, cudaMemcpyDefault));
    int first;
    std::memcpy(&first, c.data(), 4);
    float f0 = 2.0f;
    int i0;
    std::memcpy(&i0, &f0, 4);
    assert_int_equal(first, i0 + 1);
    RT_OK(cudaFree(da));
    RT_OK(cudaFree(db));
    RT_OK(cudaFree(dc));
}

static void test_streams_events_and_errors(void **)
{
    cudaStream_t s;
    RT_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    RT_OK(cudaEventCreate(&e0));
    RT_OK(cudaEventCreate(&e1));
    int *done;
    RT_OK(cudaMalloc((void **)&done, 4));
    long long ns = 60ll * 1000 * 1000;
    void *args[] = { &ns, &done };
    double t0 = now_ms();
    RT_OK(cudaEventRecord(e0, s));
    RT_OK(cudaLaunchKernel((const void *)spin_ns, dim3(1), dim3(1), args, 0, s));
    launches_made++;
    launch_calls++;
    RT_OK(cudaEventRecord(e1, s));
    cudaError_t q = cudaStreamQuery(s);
    if (now_ms() - t0 < 50)                 /* not descheduled past the spin */
        assert_int_equal(q, cudaErrorNotReady);
    else
        assert_true(q == cudaErrorNotReady || q == cudaSuccess);
    assert_int_equal(cudaGetLastError(), cudaSuccess);   /* not-ready is not an error */
    RT_OK(cudaStreamSynchronize(s));
    syncs_made++;
    float ms = 0;
    RT_OK(cudaEventElapsedTime(&ms, e0, e1));
    assert_true(ms >= 55.0f);
    RT_OK(cudaEventDestroy(e0));
    RT_OK(cudaEventDestroy(e1));
    RT_OK(cudaStreamDestroy(s));

    void *p;
    assert_int_equal(cudaMalloc(&p, (size_t)1 << 40), cudaErrorMemoryAllocation);
    assert_int_equal(cudaGetLastError(), cudaErrorMemoryAllocation);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    assert_int_equal(cudaLaunchKernel((const void *)spin_ns, dim3(1), dim3(4096), args, 0, 0),
                     cudaErrorInvalidConfiguration);
    launch_calls++;
    int x;
    assert_int_equal(cudaLaunchKernel((const void *)&x, dim3(1), dim3(1), args, 0, 0), cudaErrorInvalidDeviceFunction);
    launch_calls++;
    assert_int_equal(cudaFree((void *)&x), cudaErrorInvalidDevicePointer);
    assert_string_equal(cudaGetErrorName(cudaErrorMemoryAllocation), "cudaErrorMemoryAllocation");
    assert_non_null(strstr(cudaGetErrorString(cudaErrorInvalidConfiguration), "launch"));
    size_t off, size;
    RT_OK(cudaFuncGetParamInfo((const void *)spin_ns, 1, &off, &size));
    assert_int_equal(off, 8);
    assert_int_equal(size, 8);
    assert_int_equal(cudaFuncGetParamInfo((const void *)spin_ns, 2, &off, &size), cudaErrorInvalidValue);
    cudaGetLastError();
    RT_OK(cudaFree(done));
}

static void test_managed_memory_is_accepted(void **)
{
    int *m;
    RT_OK(cudaMallocManaged((void **)&m, 256 * sizeof(int), cudaMemAttachGlobal));
    for (int i = 0; i < 256; i++)
        m[i] = i;
    cudaMemLocation dev = { cudaMemLocationTypeDevice, 0 }, host = { cudaMemLocationTypeHost, 0 };
    RT_OK(cudaMemAdvise(m, 256 * sizeof(int), cudaMemAdviseSetPreferredLocation, dev));
    RT_OK(cudaMemPrefetchAsync(m, 256 * sizeof(int), dev, 0, 0));
    int n = 256;
    void *args[] = { &m, &n };
    RT_OK(cudaLaunchKernel((const void *)add_one, dim3(2), dim3(128), args, 0, 0));
    launches_made++;
    launch_calls++;
    RT_OK(cudaMemPrefetchAsync(m, 256 * sizeof(int), host, 0, 0));
    RT_OK(cudaDeviceSynchronize());
    syncs_made++;
    for (int i = 0; i < 256; i++)
        assert_int_equal(m[i], i + 1);
    RT_OK(cudaFree(m));
}

/* Pinned memory through the runtime: cudaMallocHost/HostAlloc/FreeHost,
 * cudaHostRegister/Unregister and their errors, and an async round trip. */
static void test_pinned_memory_through_the_runtime(void **)
{
    int *h = NULL, *back = NULL;
    RT_OK(cudaMallocHost((void **)&h, 1024 * sizeof(int)));
    RT_OK(cudaHostAlloc((void **)&back, 1024 * sizeof(int), cudaHostAllocMapped));
    unsigned flags = 99;
    RT_OK(cudaHostGetFlags(&flags, back));
    assert_int_equal(flags, cudaHostAllocMapped);
    void *dp = NULL;
    RT_OK(cudaHostGetDevicePointer(&dp, back, 0));
    assert_ptr_equal(dp, back);
    for (int i = 0; i < 1024; i++)
        h[i] = i * 5;
    memset(back, 0, 1024 * sizeof(int));
    int *d;
    RT_OK(cudaMalloc((void **)&d, 1024 * sizeof(int)));
    cudaStream_t s;
    RT_OK(cudaStreamCreate(&s));
    RT_OK(cudaMemcpyAsync(d, h, 1024 * sizeof(int), cudaMemcpyHostToDevice, s));
    int n = 1024;
    void *args[] = { &d, &n };
    RT_OK(cudaLaunchKernel((const void *)add_one, dim3(8), dim3(128), args, 0, s));
    launches_made++;
    launch_calls++;
    RT_OK(cudaMemcpyAsync(back, d, 1024 * sizeof(int), cudaMemcpyDeviceToHost, s));
    RT_OK(cudaStreamSynchronize(s));
    syncs_made++;
    for (int i = 0; i < 1024; i++)
        assert_int_equal(back[i], i * 5 + 1);

    std::vector<char> buf(8192);
    RT_OK(cudaHostRegister(buf.data(), buf.size(), cudaHostRegisterDefault));
    assert_int_equal((int)cudaHostRegister(buf.data() + 100, 10, 0), (int)cudaErrorHostMemoryAlreadyRegistered);
    RT_OK(cudaHostUnregister(buf.data()));
    assert_int_equal((int)cudaHostUnregister(buf.data()), (int)cudaErrorHostMemoryNotRegistered);
    assert_int_equal((int)cudaGetLastError(), (int)cudaErrorHostMemoryNotRegistered);
    assert_int_equal((int)cudaHostRegister(NULL, 10, 0), (int)cudaErrorInvalidValue);
    assert_int_equal((int)cudaHostRegister(buf.data(), 0, 0), (int)cudaErrorInvalidValue);
    cudaGetLastError();

    RT_OK(cudaStreamDestroy(s));
    RT_OK(cudaFree(d));
    RT_OK(cudaFreeHost(h));
    RT_OK(cudaFreeHost(back));
    RT_OK(cudaFreeHost(NULL));
}

/* Under interpose_count.so: every launch and sync went through the
 * interposer's wrappers, reached by the dlsym + self-lookup path. */
static void test_interposer_saw_every_launch_and_sync(void **)
{
    unsigned long *dlsym_gpa = (unsigned long *)dlsym(RTLD_DEFAULT, "interpose_dlsym_gpa");
    if (!dlsym_gpa) {
        /* the interposed run must have its interposer */
        assert_null(getenv("SIMGPU_TEST_EXPECT_INTERPOSER"));
        skip();
    }
    unsigned long lookups = *(unsigned long *)dlsym(RTLD_DEFAULT, "interpose_lookups");
    unsigned long launches = *(unsigned long *)dlsym(RTLD_DEFAULT, "interpose_launches");
    unsigned long syncs = *(unsigned long *)dlsym(RTLD_DEFAULT, "interpose_syncs");
    struct simgpu_stats st;
    assert_int_equal(simgpu_stats_get(0, &st), 0);
    assert_int_equal(*dlsym_gpa, 1);
    assert_true(lookups > 40);
    assert_int_equal(launches, launch_calls);     /* the driver saw every call */
    assert_int_equal(st.kernels_launched, launches_made);
    assert_int_equal(syncs, syncs_made);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vector_add_through_the_runtime),
        cmocka_unit_test(test_streams_events_and_errors),
        cmocka_unit_test(test_managed_memory_is_accepted),
        cmocka_unit_test(test_pinned_memory_through_the_runtime),
        cmocka_unit_test(test_interposer_saw_every_launch_and_sync),
    };
    return cmocka_run_group_tests_name("runtime", tests, NULL, NULL);
}
