/*
 * test_graph.cpp — stream capture, graph launch, host functions, and what
 * CUDA refuses during a capture.
 */
#include <cstring>
#include <vector>

#include <cuda_runtime_api.h>

#include "test_util.h"
#include "kernels.h"

static CUfunction fn(const void *k) { return (CUfunction)k; }

struct log_t {
    int n;
    int v[8];
    const int *src;
};

static void CUDA_CB log_value(void *arg)
{
    log_t *l = (log_t *)arg;
    l->v[l->n++] = *l->src;
}

static void test_capture_instantiate_launch_twice(void **)
{
    const int n = 1000;
    CUstream s;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d;
    CU_OK(cuMemAlloc(&d, n * sizeof(int)));
    CU_OK(cuMemsetD32(d, 7, n));
    std::vector<int> h(n, -1);
    log_t log = {};
    log.src = &h[n - 1];

    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUstreamCaptureStatus st;
    CU_OK(cuStreamIsCapturing(s, &st));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    int nn = n;
    void *args[] = { &d, &nn };
    CU_OK(cuMemsetD32Async(d, 0, n, s));
    CU_OK(cuLaunchKernel(fn((const void *)add_one), (n + 127) / 128, 1, 1, 128, 1, 1, 0, s, args, NULL));
    CU_OK(cuLaunchKernel(fn((const void *)add_one), (n + 127) / 128, 1, 1, 128, 1, 1, 0, s, args, NULL));
    CU_OK(cuMemcpyDtoHAsync(h.data(), d, n * sizeof(int), s));
    CU_OK(cuLaunchHostFunc(s, log_value, &log));
    CUgraph g;
    CU_OK(cuStreamEndCapture(s, &g));
    CU_OK(cuStreamIsCapturing(s, &st));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);
    size_t nodes = 0;
    CU_OK(cuGraphGetNodes(g, NULL, &nodes));
    assert_int_equal(nodes, 5);

    /* nothing ran during the capture */
    CU_OK(cuStreamSynchronize(s));
    std::vector<int> now(n);
    CU_OK(cuMemcpyDtoH(now.data(), d, n * sizeof(int)));
    assert_int_equal(now[0], 7);
    assert_int_equal(h[0], -1);
    assert_int_equal(log.n, 0);

    CUgraphExec e;
    CU_OK(cuGraphInstantiate(&e, g, 0));
    CU_OK(cuGraphDestroy(g));      /* the executable graph keeps its own copy */
    for (int round = 0; round < 2; round++) {
        std::fill(h.begin(), h.end(), -1);
        CU_OK(cuGraphLaunch(e, s));
        CU_OK(cuStreamSynchronize(s));
        for (int i = 0; i < n; i++)
            assert_int_equal(h[i], 2);
        assert_int_equal(log.n, round + 1);
        assert_int_equal(log.v[round], 2);    /* the host function ran after the copy */
    }
    CU_OK(cuGraphExecDestroy(e));
    CU_IS(cuGraphExecDestroy(e), CUDA_ERROR_INVALID_HANDLE);
    cuMemFree(d);
    CU_OK(cuStreamDestroy(s));
}

static void test_host_function_runs_in_stream_order(void **)
{
    CUstream s;
    CU_OK(cuStreamCreate(&s, 0));
    CUdeviceptr flag;
    CU_OK(cuMemAlloc(&flag, sizeof(int)));
    CU_OK(cuMemsetD32(flag, 0, 1));
    int host_flag = 0;
    log_t log = {};
    log.src = &host_flag;
    long long ns = 100 * 1000 * 1000;
    void *args[] = { &ns, &flag };
    CU_OK(cuLaunchKernel(fn((const void *)spin_ns), 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    CU_OK(cuLaunchHostFunc(s, log_value, &log));
    assert_int_equal(__atomic_load_n(&log.n, __ATOMIC_ACQUIRE), 0);    /* the kernel still spins */
    CU_IS(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    CU_OK(cuStreamSynchronize(s));
    assert_int_equal(log.n, 1);
    cuMemFree(flag);
    CU_OK(cuStreamDestroy(s));
}

static void test_refused_during_capture(void **)
{
    CUstream s, b;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU_OK(cuStreamCreate(&b, 0));   /* a blocking stream */
    CUgraph g;

    /* a device-wide sync is unsafe under a GLOBAL capture: the capture ends invalid */
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_IS(cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CUstreamCaptureStatus st;
    CU_OK(cuStreamIsCapturing(s, &st));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    CU_IS(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

    /* syncing or querying the capturing stream */
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_IS(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CU_IS(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_IS(cuStreamQuery(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CU_IS(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

    /* the legacy stream while a blocking stream captures would join it */
    CUdeviceptr d;
    CU_OK(cuMemAlloc(&d, 4096));
    CU_OK(cuStreamBeginCapture(b, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_IS(cuMemsetD32Async(d, 1, 16, NULL), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    CU_IS(cuStreamEndCapture(b, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

    /* unsafe calls: refused under GLOBAL, allowed under RELAXED */
    CUdeviceptr x;
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_IS(cuMemAlloc(&x, 4096), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CU_IS(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CU_OK(cuMemAlloc(&x, 4096));
    CU_OK(cuMemsetD32Async(x, 3, 16, s));
    CU_OK(cuStreamEndCapture(s, &g));
    CUgraphExec e;
    CU_OK(cuGraphInstantiate(&e, g, 0));
    CU_OK(cuGraphLaunch(e, s));
    CU_OK(cuStreamSynchronize(s));
    int v[16];
    CU_OK(cuMemcpyDtoH(v, x, sizeof(v)));
    assert_int_equal(v[15], 3);
    CU_OK(cuGraphExecDestroy(e));
    CU_OK(cuGraphDestroy(g));

    /* the default streams cannot be captured here */
    CU_IS(cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    /* ending a capture that never began */
    CU_IS(cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);
    cuMemFree(d);
    cuMemFree(x);
    CU_OK(cuStreamDestroy(s));
    CU_OK(cuStreamDestroy(b));
}

static void CUDART_CB count_callback(cudaStream_t, cudaError_t status, void *arg)
{
    if (status == cudaSuccess)
        __atomic_fetch_add((int *)arg, 1, __ATOMIC_RELEASE);
}

static void test_runtime_graph_and_callbacks(void **)
{
    cudaStream_t s;
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    int *d;
    assert_int_equal(cudaMalloc((void **)&d, 256 * sizeof(int)), cudaSuccess);
    /* on s: a non-blocking stream is not ordered after the legacy stream */
    assert_int_equal(cudaMemsetAsync(d, 0, 256 * sizeof(int), s), cudaSuccess);
    int calls = 0;
    int n = 256;
    void *args[] = { &d, &n };
    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    assert_int_equal(cudaLaunchKernel((const void *)add_one, dim3(2), dim3(128), args, 0, s), cudaSuccess);
    assert_int_equal(cudaStreamAddCallback(s, count_callback, &calls, 0), cudaErrorStreamCaptureUnsupported);
    cudaGraph_t g;
    assert_int_equal(cudaStreamEndCapture(s, &g), cudaSuccess);
    cudaGraphExec_t e;
    assert_int_equal(cudaGraphInstantiate(&e, g, 0), cudaSuccess);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(cudaGraphLaunch(e, s), cudaSuccess);
        assert_int_equal(cudaStreamAddCallback(s, count_callback, &calls, 0), cudaSuccess);
    }
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(calls, 3);
    int h[256];
    assert_int_equal(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost), cudaSuccess);
    for (int i = 0; i < 256; i++)
        assert_int_equal(h[i], 3);
    assert_int_equal(cudaGraphExecDestroy(e), cudaSuccess);
    assert_int_equal(cudaGraphDestroy(g), cudaSuccess);
    assert_int_equal(cudaFree(d), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
}

static void test_through_get_proc_address(void **)
{
    void *p = NULL;
    CUdriverProcAddressQueryResult st;
    const char *names[] = { "cuStreamBeginCapture", "cuStreamEndCapture", "cuStreamIsCapturing",
                            "cuGraphInstantiate",   "cuGraphLaunch",      "cuGraphExecDestroy",
                            "cuGraphDestroy",       "cuLaunchHostFunc",   "cuThreadExchangeStreamCaptureMode" };
    for (const char *name : names) {
        CU_OK(cuGetProcAddress(name, &p, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
        assert_int_equal(st, CU_GET_PROC_ADDRESS_SUCCESS);
        assert_non_null(p);
        CU_OK(cuGetProcAddress(name, &p, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
        assert_non_null(p);
    }
    CU_OK(cuGetProcAddress("cuGraphInstantiate", &p, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
    assert_ptr_equal(p, (void *)cuGraphInstantiateWithFlags);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capture_instantiate_launch_twice),
        cmocka_unit_test(test_host_function_runs_in_stream_order),
        cmocka_unit_test(test_refused_during_capture),
        cmocka_unit_test(test_runtime_graph_and_callbacks),
        cmocka_unit_test(test_through_get_proc_address),
    };
    return cmocka_run_group_tests(tests, sim_test_setup, NULL);
}
