/*
 * test_coop.cpp — threads of a block that cooperate: __shared__ (static and
 * dynamic), __syncthreads and its reductions, warp shuffles and votes,
 * shared-memory atomics; a barrier mismatch fails the launch, never hangs.
 * Every result is compared with the same computation on the host.
 */
#include <cstring>
#include <vector>

#include "test_util.h"
#include "coop_kernels.h"

static CUfunction fn(const void *k) { return (CUfunction)k; }

template <typename T> static CUdeviceptr upload(const std::vector<T> &v)
{
    CUdeviceptr d;
    CU_OK(cuMemAlloc(&d, v.size() * sizeof(T)));
    CU_OK(cuMemcpyHtoD(d, v.data(), v.size() * sizeof(T)));
    return d;
}

template <typename T> static std::vector<T> download(CUdeviceptr d, size_t n)
{
    std::vector<T> v(n);
    CU_OK(cuMemcpyDtoH(v.data(), d, n * sizeof(T)));
    return v;
}

static std::vector<int> pattern(size_t n, unsigned seed)
{
    std::vector<int> v(n);
    unsigned x = seed;
    for (auto &e : v) {
        x = x * 1103515245u + 12345u;
        e = (int)((x >> 8) % 1000) - 300;
    }
    return v;
}

static void block_sums(bool dynamic)
{
    const int n = 256 * 97 + 45, threads = 256, blocks = (n + threads - 1) / threads;
    std::vector<int> in = pattern((size_t)n, 7);
    CUdeviceptr din = upload(in), dout;
    CU_OK(cuMemAlloc(&dout, blocks * sizeof(int)));
    int nn = n;
    void *args[] = { &din, &dout, &nn };
    CU_OK(cuLaunchKernel(fn(dynamic ? (const void *)coop_dynamic_sum : (const void *)coop_block_sum), blocks, 1, 1,
                         threads, 1, 1, dynamic ? threads * sizeof(int) : 0, NULL, args, NULL));
    std::vector<int> out = download<int>(dout, blocks);
    for (int b = 0; b < blocks; b++) {
        int want = 0;
        for (int i = b * threads; i < n && i < (b + 1) * threads; i++)
            want += in[i];
        assert_int_equal(out[b], want);
    }
    cuMemFree(din);
    cuMemFree(dout);
}

static void test_block_sum_static_shared(void **) { block_sums(false); }
static void test_block_sum_dynamic_shared(void **) { block_sums(true); }

static void test_dynamic_shared_over_the_limit_is_refused(void **)
{
    CUdeviceptr d;
    CU_OK(cuMemAlloc(&d, 1024));
    int n = 1;
    void *args[] = { &d, &d, &n };
    CU_IS(cuLaunchKernel(fn((const void *)coop_dynamic_sum), 1, 1, 1, 32, 1, 1, 49153, NULL, args, NULL),
          CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuCtxSynchronize());
    cuMemFree(d);
}

static void test_warp_shuffles(void **)
{
    const int threads = 128, blocks = 9, n = threads * blocks;
    std::vector<int> in = pattern((size_t)n, 11);
    CUdeviceptr din = upload(in), dout;
    CU_OK(cuMemAlloc(&dout, 4 * n * sizeof(int)));
    void *args[] = { &din, &dout };
    CU_OK(cuLaunchKernel(fn((const void *)coop_warp_shuffles), blocks, 1, 1, threads, 1, 1, 0, NULL, args, NULL));
    std::vector<int> out = download<int>(dout, 4 * (size_t)n);
    for (int i = 0; i < n; i++) {
        int w0 = i / 32 * 32, lane = i % 32;
        int sum = 0, scan = 0;
        for (int l = 0; l < 32; l++)
            sum += in[w0 + l];
        for (int l = 0; l <= lane; l++)
            scan += in[w0 + l];
        int nx = lane % 8 == 7 ? in[i] : in[i + 1];
        assert_int_equal(out[4 * i + 0], sum);
        assert_int_equal(out[4 * i + 1], scan);
        assert_int_equal(out[4 * i + 2], in[w0 + 3]);
        assert_int_equal(out[4 * i + 3], nx);
    }
    cuMemFree(din);
    cuMemFree(dout);
}

static void test_warp_votes(void **)
{
    const int threads = 96, blocks = 5, n = threads * blocks, warps = n / 32;
    std::vector<int> in = pattern((size_t)n, 23);
    for (int l = 0; l < 32; l++) {
        in[l] = 2 * l;          /* warp 0: no odd value */
        in[32 + l] = 2 * l + 1; /* warp 1: all odd */
    }
    CUdeviceptr din = upload(in), dout;
    CU_OK(cuMemAlloc(&dout, 4 * warps * sizeof(unsigned)));
    void *args[] = { &din, &dout };
    CU_OK(cuLaunchKernel(fn((const void *)coop_warp_votes), blocks, 1, 1, threads, 1, 1, 0, NULL, args, NULL));
    std::vector<unsigned> out = download<unsigned>(dout, 4 * (size_t)warps);
    for (int w = 0; w < warps; w++) {
        unsigned ballot = 0, sum = 0;
        for (int l = 0; l < 32; l++) {
            ballot |= (unsigned)(in[32 * w + l] & 1) << l;
            sum += (unsigned)in[32 * w + l];
        }
        assert_int_equal(out[4 * w + 0], ballot);
        assert_int_equal(out[4 * w + 1], ballot != 0);
        assert_int_equal(out[4 * w + 2], ballot == 0xffffffffu);
        assert_int_equal(out[4 * w + 3], sum);
    }
    assert_int_equal(out[1], 0);
    assert_int_equal(out[4 + 2], 1);
    cuMemFree(din);
    cuMemFree(dout);
}

static void test_barrier_reductions(void **)
{
    const int threads = 200, blocks = 7, n = threads * blocks, limit = 100;
    std::vector<int> in = pattern((size_t)n, 5);
    for (int t = 0; t < threads; t++) {
        in[t] = limit + 1 + t;      /* block 0: all above */
        in[threads + t] = limit - t; /* block 1: none above */
    }
    CUdeviceptr din = upload(in), dout;
    CU_OK(cuMemAlloc(&dout, 3 * blocks * sizeof(int)));
    int lim = limit;
    void *args[] = { &din, &lim, &dout };
    CU_OK(cuLaunchKernel(fn((const void *)coop_barrier_reductions), blocks, 1, 1, threads, 1, 1, 0, NULL, args,
                         NULL));
    std::vector<int> out = download<int>(dout, 3 * (size_t)blocks);
    for (int b = 0; b < blocks; b++) {
        int c = 0;
        for (int t = 0; t < threads; t++)
            c += in[b * threads + t] > limit;
        assert_int_equal(out[3 * b + 0], c);
        assert_int_equal(out[3 * b + 1], c == threads);
        assert_int_equal(out[3 * b + 2], c > 0);
    }
    assert_int_equal(out[0], threads);
    assert_int_equal(out[3], 0);
    cuMemFree(din);
    cuMemFree(dout);
}

static void test_shared_atomics_3d_blocks(void **)
{
    const int per_block = 8 * 4 * 2, blocks = 300, n = per_block * blocks - 17;
    std::vector<unsigned> in(n);
    for (int i = 0; i < n; i++)
        in[i] = (unsigned)(i * 7 + i / 5);
    CUdeviceptr din = upload(in), dh;
    CU_OK(cuMemAlloc(&dh, 16 * sizeof(unsigned)));
    CU_OK(cuMemsetD32(dh, 0, 16));
    int nn = n;
    void *args[] = { &din, &nn, &dh };
    CU_OK(cuLaunchKernel(fn((const void *)coop_shared_histogram), blocks, 1, 1, 8, 4, 2, 0, NULL, args, NULL));
    std::vector<unsigned> h = download<unsigned>(dh, 16);
    unsigned want[16] = {};
    for (int i = 0; i < n; i++)
        want[in[i] % 16]++;
    for (int b = 0; b < 16; b++)
        assert_int_equal(h[b], want[b]);
    cuMemFree(din);
    cuMemFree(dh);
}

static void test_exited_threads_do_not_hold_a_barrier(void **)
{
    const int keep = 37, blocks = 3;
    CUdeviceptr d;
    CU_OK(cuMemAlloc(&d, blocks * 64 * sizeof(int)));
    CU_OK(cuMemsetD32(d, 0, blocks * 64));
    int k = keep;
    void *args[] = { &k, &d };
    CU_OK(cuLaunchKernel(fn((const void *)coop_early_exit), blocks, 1, 1, 64, 1, 1, 0, NULL, args, NULL));
    std::vector<int> out = download<int>(d, blocks * 64);
    for (int b = 0; b < blocks; b++)
        for (int t = 0; t < 64; t++)
            assert_int_equal(out[b * 64 + t], t < keep ? (t + 1) % keep + 1 : 0);
    cuMemFree(d);
}

/* Last: it leaves the context with a sticky error. */
static void test_mismatched_barriers_fail_the_launch(void **)
{
    CUdeviceptr d;
    CU_OK(cuMemAlloc(&d, 64 * sizeof(int)));
    void *args[] = { &d };
    CU_OK(cuLaunchKernel(fn((const void *)coop_mismatched_barriers), 1, 1, 1, 64, 1, 1, 0, NULL, args, NULL));
    double t0 = now_ms();
    CU_IS(cuCtxSynchronize(), CUDA_ERROR_LAUNCH_FAILED);
    assert_true(now_ms() - t0 < 5000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_sum_static_shared),
        cmocka_unit_test(test_block_sum_dynamic_shared),
        cmocka_unit_test(test_dynamic_shared_over_the_limit_is_refused),
        cmocka_unit_test(test_warp_shuffles),
        cmocka_unit_test(test_warp_votes),
        cmocka_unit_test(test_barrier_reductions),
        cmocka_unit_test(test_shared_atomics_3d_blocks),
        cmocka_unit_test(test_exited_threads_do_not_hold_a_barrier),
        cmocka_unit_test(test_mismatched_barriers_fail_the_launch),
    };
    return cmocka_run_group_tests(tests, sim_test_setup, NULL);
}
