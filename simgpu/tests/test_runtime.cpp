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

#include <cuda.h>
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

/* CUDA arrays: 2-D, 3-D and mipmapped ones take device memory (free
 * memory drops by at least their elements' bytes, and comes back when
 * they go), 2-D and 3-D copies reach their elements at offsets, and
 * what is refused is refused with the runtime's errors. */
static struct cudaExtent make_cudaExtent(size_t w, size_t h, size_t d)
{
    struct cudaExtent e = { w, h, d };
    return e;
}

static void test_arrays_through_the_runtime(void **)
{
    size_t free0 = 0, total = 0, free1 = 0;
    RT_OK(cudaMemGetInfo(&free0, &total));
    struct cudaChannelFormatDesc f4 = cudaCreateChannelDesc(32, 32, 32, 32, cudaChannelFormatKindFloat);
    const size_t W = 300, H = 70, row = W * 16; /* float4 elements: 4800 bytes a row */
    cudaArray_t a = NULL;
    RT_OK(cudaMallocArray(&a, &f4, W, H, 0));
    assert_non_null(a);
    RT_OK(cudaMemGetInfo(&free1, &total));
    assert_true(free0 - free1 >= row * H);
    std::vector<unsigned char> src(row * H), back(row * H, 0);
    for (size_t i = 0; i < src.size(); i++)
        src[i] = (unsigned char)(i * 13 + i / 4800);
    RT_OK(cudaMemcpy2DToArray(a, 0, 0, src.data(), row, row, H, cudaMemcpyHostToDevice));
    RT_OK(cudaMemcpy2DFromArray(back.data(), row, a, 0, 0, row, H, cudaMemcpyDeviceToHost));
    assert_memory_equal(back.data(), src.data(), src.size());
    /* 32 bytes of rows 5..9 at byte 160: an offset window */
    std::vector<unsigned char> win(32 * 5);
    RT_OK(cudaMemcpy2DFromArray(win.data(), 32, a, 160, 5, 32, 5, cudaMemcpyDeviceToHost));
    for (size_t y = 0; y < 5; y++)
        assert_memory_equal(&win[y * 32], &src[(5 + y) * row + 160], 32);
    /* past the last row, or past a row's elements: refused */
    assert_int_equal((int)cudaMemcpy2DFromArray(win.data(), 32, a, 0, H - 2, 32, 5, cudaMemcpyDeviceToHost),
                     (int)cudaErrorInvalidValue);
    assert_int_equal((int)cudaMemcpy2DToArray(a, row - 16, 0, src.data(), 32, 32, 1, cudaMemcpyHostToDevice),
                     (int)cudaErrorInvalidValue);
    cudaGetLastError();
    RT_OK(cudaFreeArray(a));
    RT_OK(cudaMemGetInfo(&free1, &total));
    assert_int_equal(free1, free0);
    assert_int_equal((int)cudaFreeArray(a), (int)cudaErrorInvalidResourceHandle);
    RT_OK(cudaFreeArray(NULL));
    cudaGetLastError();

    /* three channels, and a format mixing sizes: not an array's */
    struct cudaChannelFormatDesc f3 = cudaCreateChannelDesc(8, 8, 8, 0, cudaChannelFormatKindUnsigned);
    struct cudaChannelFormatDesc mixed = cudaCreateChannelDesc(8, 16, 0, 0, cudaChannelFormatKindUnsigned);
    assert_int_equal((int)cudaMallocArray(&a, &f3, W, H, 0), (int)cudaErrorInvalidValue);
    assert_int_equal((int)cudaMallocArray(&a, &mixed, W, H, 0), (int)cudaErrorInvalidValue);
    /* more than the device holds */
    struct cudaChannelFormatDesc u1 = cudaCreateChannelDesc(8, 0, 0, 0, cudaChannelFormatKindUnsigned);
    assert_int_equal((int)cudaMalloc3DArray(&a, &u1, make_cudaExtent(16384, 16384, (total >> 28) + 1), 0),
                     (int)cudaErrorMemoryAllocation);
    /* past a 3-D array's extents (16384), or a 2-D one's (131072 x 65536) */
    assert_int_equal((int)cudaMalloc3DArray(&a, &u1, make_cudaExtent(16385, 2, 2), 0), (int)cudaErrorInvalidValue);
    assert_int_equal((int)cudaMallocArray(&a, &u1, 2, 65537, 0), (int)cudaErrorInvalidValue);
    /* layered with no layers */
    assert_int_equal((int)cudaMalloc3DArray(&a, &u1, make_cudaExtent(16, 16, 0), cudaArrayLayered),
                     (int)cudaErrorInvalidValue);
    cudaGetLastError();

    /* 3-D: a plane's rows follow the array's own layout */
    const size_t D = 3, W3 = 64, H3 = 10;
    RT_OK(cudaMalloc3DArray(&a, &u1, make_cudaExtent(W3, H3, D), 0));
    std::vector<unsigned char> cube(W3 * H3 * D), cube_back(W3 * H3 * D, 0);
    for (size_t i = 0; i < cube.size(); i++)
        cube[i] = (unsigned char)(i * 7 + 1);
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof(c));
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = cube.data();
    c.srcPitch = W3;
    c.srcHeight = H3;
    c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    c.dstArray = (CUarray)a;
    c.WidthInBytes = W3;
    c.Height = H3;
    c.Depth = D;
    assert_int_equal((int)cuMemcpy3D(&c), (int)CUDA_SUCCESS);
    CUDA_MEMCPY3D b = c;
    b.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    b.srcArray = (CUarray)a;
    b.srcHost = NULL;
    b.dstMemoryType = CU_MEMORYTYPE_HOST;
    b.dstArray = NULL;
    b.dstHost = cube_back.data();
    b.dstPitch = W3;
    b.dstHeight = H3;
    assert_int_equal((int)cuMemcpy3D(&b), (int)CUDA_SUCCESS);
    assert_memory_equal(cube_back.data(), cube.data(), cube.size());
    b.srcZ = 1; /* planes 1..3 of 3 */
    assert_int_equal((int)cuMemcpy3D(&b), (int)CUDA_ERROR_INVALID_VALUE);
    RT_OK(cudaFreeArray(a));

    /* mipmapped: each level its own array, halved */
    cudaMipmappedArray_t mm = NULL;
    RT_OK(cudaMallocMipmappedArray(&mm, &f4, make_cudaExtent(256, 256, 0), 4, 0));
    cudaArray_t level = NULL;
    RT_OK(cudaGetMipmappedArrayLevel(&level, mm, 3));
    /* level 3 of 256x256: 32 rows of 32 float4 (512 bytes) */
    std::vector<unsigned char> l3(32 * 512), l3_back(32 * 512, 0), l0(256 * 16, 0);
    for (size_t i = 0; i < l3.size(); i++)
        l3[i] = (unsigned char)(i * 11 + i / 512);
    RT_OK(cudaMemcpy2DToArray(level, 0, 0, l3.data(), 512, 512, 32, cudaMemcpyHostToDevice));
    RT_OK(cudaMemcpy2DFromArray(l3_back.data(), 512, level, 0, 0, 512, 32, cudaMemcpyDeviceToHost));
    assert_memory_equal(l3_back.data(), l3.data(), l3.size());
    std::vector<unsigned char> big_src(33 * 512, 0);
    assert_int_equal((int)cudaMemcpy2DToArray(level, 0, 0, big_src.data(), 512, 512, 33, cudaMemcpyHostToDevice),
                     (int)cudaErrorInvalidValue);
    cudaGetLastError();
    /* level 0 is its own memory: its first row still reads zeros */
    cudaArray_t level0 = NULL;
    RT_OK(cudaGetMipmappedArrayLevel(&level0, mm, 0));
    RT_OK(cudaMemcpy2DFromArray(l0.data(), l0.size(), level0, 0, 0, l0.size(), 1, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < l0.size(); i++)
        assert_int_equal(l0[i], 0);
    /* levels past 1 + log2(256) are clamped away (cuda.h) */
    cudaMipmappedArray_t mm2 = NULL;
    RT_OK(cudaMallocMipmappedArray(&mm2, &f4, make_cudaExtent(256, 256, 0), 20, 0));
    RT_OK(cudaGetMipmappedArrayLevel(&level, mm2, 8));
    assert_int_equal((int)cudaGetMipmappedArrayLevel(&level, mm2, 9), (int)cudaErrorInvalidValue);
    cudaGetLastError();
    RT_OK(cudaFreeMipmappedArray(mm2));
    cudaArray_t none = NULL;
    assert_int_equal((int)cudaGetMipmappedArrayLevel(&none, mm, 4), (int)cudaErrorInvalidValue);
    assert_null(none);
    assert_int_equal((int)cudaFreeArray(level), (int)cudaErrorInvalidResourceHandle); /* the mipmap's */
    cudaGetLastError();
    RT_OK(cudaFreeMipmappedArray(mm));
    RT_OK(cudaMemGetInfo(&free1, &total));
    assert_int_equal(free1, free0);
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
        cmocka_unit_test(test_arrays_through_the_runtime),
        cmocka_unit_test(test_interposer_saw_every_launch_and_sync),
    };
    return cmocka_run_group_tests_name("runtime", tests, NULL, NULL);
}
