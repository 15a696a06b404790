/*
 * test_memory.c — device memory is separate memory: allocation, copies,
 * memsets, the host's view of device addresses, accounting.
 * Runs with SIMGPU_MEM_MB=64 (see CMakeLists.txt).
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cudaTypedefs.h>
#include <stdbool.h>

#include "simgpu.h"
#include "test_util.h"

#define MEM_BYTES (64ull << 20)

static void test_before_init_calls_fail_not_initialized(void **state)
{
    (void)state;
    /* runs first, in a child, so this process's cuInit is not disturbed */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int n;
        CUdeviceptr p;
        _exit(cuDeviceGetCount(&n) == CUDA_ERROR_NOT_INITIALIZED && cuMemAlloc(&p, 16) == CUDA_ERROR_NOT_INITIALIZED
                  ? 0 : 1);
    }
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void test_device_queries(void **state)
{
    (void)state;
    int n = 0, v = 0;
    CU_OK(cuDeviceGetCount(&n));
    assert_int_equal(n, 1);
    CU_OK(cuDriverGetVersion(&v));
    assert_int_equal(v, 13000);
    char name[128];
    CU_OK(cuDeviceGetName(name, sizeof(name), 0));
    assert_non_null(strstr(name, "simgpu"));
    size_t total;
    CU_OK(cuDeviceTotalMem(&total, 0));
    assert_int_equal(total, MEM_BYTES);
    CU_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 0));
    assert_int_equal(v, 1024);
    CU_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 0));
    assert_int_equal(v, 1);
    CU_IS(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
    CUdevice d;
    CU_IS(cuDeviceGet(&d, 1), CUDA_ERROR_INVALID_DEVICE);
    CU_OK(cuCtxGetDevice(&d));
    assert_int_equal(d, 0);
}

static void test_copy_round_trip_and_device_keeps_its_copy(void **state)
{
    (void)state;
    enum { N = 1 << 16 };
    unsigned char *host = malloc(N), *back = malloc(N);
    for (int i = 0; i < N; i++)
        host[i] = (unsigned char)(i * 7 + 3);
    CUdeviceptr d;
    CU_OK(cuMemAlloc(&d, N));
    CU_OK(cuMemcpyHtoD(d, host, N));
    memset(host, 0xee, N);                 /* the host changes its buffer ... */
    CU_OK(cuMemcpyDtoH(back, d, N));
    for (int i = 0; i < N; i++)            /* ... the device kept its own copy */
        assert_int_equal(back[i], (unsigned char)(i * 7 + 3));
    CU_OK(cuMemFree(d));
    free(host);
    free(back);
}

static void test_host_dereference_of_device_memory_faults(void **state)
{
    (void)state;
    CUdeviceptr d;
    CU_OK(cuMemAlloc(&d, 4096));
    int one = 1;
    CU_OK(cuMemcpyHtoD(d, &one, sizeof(one)));
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);          /* CMocka catches it otherwise */
        volatile int *p = (volatile int *)(uintptr_t)d;
        int v = *p;                        /* must fault: PROT_NONE in the host */
        _exit(v == 1 ? 3 : 4);
    }
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGSEGV);
    CU_OK(cuMemFree(d));
}

static void test_memset_d8_d32_and_dtod(void **state)
{
    (void)state;
    enum { N = 1000 };
    CUdeviceptr a, b;
    CU_OK(cuMemAlloc(&a, N * 4));
    CU_OK(cuMemAlloc(&b, N * 4));
    CU_OK(cuMemsetD32(a, 0xdeadbeefu, N));
    CU_OK(cuMemsetD8(b, 0x5a, N * 4));
    CU_OK(cuMemcpyDtoD(b + 400, a + 400, 40));
    uint32_t out[N];
    CU_OK(cuMemcpyDtoH(out, b, sizeof(out)));   /* legacy stream: after the memsets and the copy */
    for (int i = 0; i < N; i++)
        assert_int_equal(out[i], i >= 100 && i < 110 ? 0xdeadbeefu : 0x5a5a5a5au);
    CU_IS(cuMemsetD32(a + 1, 0, 4), CUDA_ERROR_INVALID_VALUE);   /* misaligned */
    CU_OK(cuMemFree(a));
    CU_OK(cuMemFree(b));
}

static void test_uva_memcpy_and_async_copies(void **state)
{
    (void)state;
    CUstream s;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    int src[64], dst[64];
    for (int i = 0; i < 64; i++)
        src[i] = i * i;
    CUdeviceptr d, e;
    CU_OK(cuMemAlloc(&d, sizeof(src)));
    CU_OK(cuMemAlloc(&e, sizeof(src)));
    CU_OK(cuMemcpy(d, (CUdeviceptr)(uintptr_t)src, sizeof(src)));        /* H -> D */
    CU_OK(cuMemcpyDtoDAsync(e, d, sizeof(src), s));
    CU_OK(cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, e, sizeof(src), s)); /* D -> H, in stream order */
    CU_OK(cuStreamSynchronize(s));
    assert_memory_equal(src, dst, sizeof(src));
    memset(dst, 0, sizeof(dst));
    CU_OK(cuMemcpyHtoDAsync(d, dst, sizeof(dst), s));
    CU_OK(cuMemcpyDtoHAsync(src, d, sizeof(src), s));
    CU_OK(cuStreamSynchronize(s));
    for (int i = 0; i < 64; i++)
        assert_int_equal(src[i], 0);
    CU_OK(cuMemFree(d));
    CU_OK(cuMemFree(e));
    CU_OK(cuStreamDestroy(s));
}

/* 3-D copies lay out a box: WIDTH bytes of HEIGHT rows of DEPTH planes,
 * each side with its own pitch and rows a plane; the peer form takes the
 * same box and needs both contexts; a 3-D batch copies pointer operands
 * (0 row length / layer height: tightly packed), refuses what cuda.h
 * names before copying anything, and its 12.8 form sets failIdx. */
static void test_3d_copies_and_batches(void **state)
{
    (void)state;
    enum { W = 5, H = 3, D = 2, HP = 8, HR = 4, DP = 16, DR = 3 };
    unsigned char host[HP * HR * (D + 1)], back[HP * HR * (D + 1)];
    for (size_t i = 0; i < sizeof(host); i++)
        host[i] = (unsigned char)(i * 7 + 1);
    CUdeviceptr dev;
    CU_OK(cuMemAlloc(&dev, DP * DR * D));
    CU_OK(cuMemsetD8(dev, 0, DP * DR * D));
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof(c));
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = host;
    c.srcXInBytes = 2;
    c.srcY = 1;
    c.srcZ = 1;
    c.srcPitch = HP;
    c.srcHeight = HR;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = dev;
    c.dstPitch = DP;
    c.dstHeight = DR;
    c.WidthInBytes = W;
    c.Height = H;
    c.Depth = D;
    CU_OK(cuMemcpy3D(&c));
    unsigned char got[DP * DR * D];
    CU_OK(cuMemcpyDtoH(got, dev, sizeof(got)));
    for (size_t z = 0; z < D; z++)
        for (size_t y = 0; y < DR; y++)
            for (size_t x = 0; x < DP; x++) {
                unsigned char want = x < W && y < H ? host[2 + x + (1 + y) * HP + (1 + z) * HP * HR] : 0;
                assert_int_equal(got[x + y * DP + z * DP * DR], want);
            }
    c.srcHeight = 2; /* fewer rows a plane than the copy's height */
    CU_IS(cuMemcpy3D(&c), CUDA_ERROR_INVALID_VALUE);

    /* back through the peer form, into a zeroed host box */
    CUcontext ctx;
    CU_OK(cuCtxGetCurrent(&ctx));
    CUDA_MEMCPY3D_PEER p;
    memset(&p, 0, sizeof(p));
    p.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    p.srcDevice = dev;
    p.srcPitch = DP;
    p.srcHeight = DR;
    p.srcContext = ctx;
    p.dstMemoryType = CU_MEMORYTYPE_HOST;
    p.dstHost = back;
    p.dstXInBytes = 2;
    p.dstY = 1;
    p.dstZ = 1;
    p.dstPitch = HP;
    p.dstHeight = HR;
    p.WidthInBytes = W;
    p.Height = H;
    p.Depth = D;
    CU_IS(cuMemcpy3DPeer(&p), CUDA_ERROR_INVALID_CONTEXT);
    p.dstContext = ctx;
    memset(back, 0, sizeof(back));
    CU_OK(cuMemcpy3DPeer(&p));
    for (size_t z = 0; z < D + 1; z++)
        for (size_t y = 0; y < HR; y++)
            for (size_t x = 0; x < HP; x++) {
                size_t i = x + y * HP + z * HP * HR;
                bool in = x >= 2 && x < 2 + W && y >= 1 && y < 1 + H && z >= 1 && z < 1 + D;
                assert_int_equal(back[i], in ? host[i] : 0);
            }

    /* a batch: the host box to a second buffer, tightly packed */
    CUstream s;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr packed;
    CU_OK(cuMemAlloc(&packed, W * H * D));
    CUDA_MEMCPY3D_BATCH_OP op[2];
    memset(op, 0, sizeof(op));
    op[0].src.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
    op[0].src.op.ptr.ptr = (CUdeviceptr)(uintptr_t)(host + 2 + HP + HP * HR);
    op[0].src.op.ptr.rowLength = HP;
    op[0].src.op.ptr.layerHeight = HR;
    op[0].dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
    op[0].dst.op.ptr.ptr = packed;
    op[0].extent = (CUextent3D){ W, H, D };
    op[0].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    op[1] = op[0];
    op[1].src.op.ptr.ptr = dev + DP * DR * D - 2; /* past the end of dev */
    op[1].src.op.ptr.rowLength = 0;
    op[1].src.op.ptr.layerHeight = 0;
    CU_IS(cuMemcpy3DBatchAsync(1, op, 0, CU_STREAM_LEGACY), CUDA_ERROR_INVALID_VALUE);
    CU_IS(cuMemcpy3DBatchAsync(1, op, 1, s), CUDA_ERROR_INVALID_VALUE);
    op[0].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_INVALID;
    CU_IS(cuMemcpy3DBatchAsync(1, op, 0, s), CUDA_ERROR_INVALID_VALUE);
    op[0].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    op[0].src.op.ptr.rowLength = W - 1; /* shorter than the extent */
    CU_IS(cuMemcpy3DBatchAsync(1, op, 0, s), CUDA_ERROR_INVALID_VALUE);
    op[0].src.op.ptr.rowLength = HP;
    CU_OK(cuMemcpy3DBatchAsync(1, op, 0, s));
    CU_OK(cuStreamSynchronize(s));
    unsigned char flat[W * H * D];
    CU_OK(cuMemcpyDtoH(flat, packed, sizeof(flat)));
    for (size_t z = 0; z < D; z++)
        for (size_t y = 0; y < H; y++)
            for (size_t x = 0; x < W; x++)
                assert_int_equal(flat[x + y * W + z * W * H], host[2 + x + (1 + y) * HP + (1 + z) * HP * HR]);

    /* the 12.8 form through cuGetProcAddress: failIdx names operation 1 */
    PFN_cuMemcpy3DBatchAsync_v12080 batch128 = NULL;
    CU_OK(cuGetProcAddress("cuMemcpy3DBatchAsync", (void **)&batch128, 12080, CU_GET_PROC_ADDRESS_DEFAULT, NULL));
    size_t fail = 77;
    CU_IS(batch128(2, op, &fail, 0, s), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(fail, 1);
    fail = 77;
    CU_OK(batch128(1, op, &fail, 0, s));
    assert_int_equal(fail, SIZE_MAX);
    CU_OK(cuStreamSynchronize(s));
    CU_OK(cuStreamDestroy(s));
    CU_OK(cuMemFree(packed));
    CU_OK(cuMemFree(dev));
}

static void test_out_of_memory_and_get_info(void **state)
{
    (void)state;
    size_t free0, total;
    CU_OK(cuMemGetInfo(&free0, &total));
    assert_int_equal(total, MEM_BYTES);
    CUdeviceptr big, p;
    CU_IS(cuMemAlloc(&p, MEM_BYTES + 1), CUDA_ERROR_OUT_OF_MEMORY);
    CU_OK(cuMemAlloc(&big, 48ull << 20));
    size_t free1;
    CU_OK(cuMemGetInfo(&free1, &total));
    assert_int_equal(free0 - free1, 48ull << 20);
    CU_IS(cuMemAlloc(&p, 32ull << 20), CUDA_ERROR_OUT_OF_MEMORY);
    CU_OK(cuMemFree(big));
    CU_OK(cuMemAlloc(&p, 32ull << 20));       /* the space came back */
    CU_OK(cuMemFree(p));
    CU_OK(cuMemGetInfo(&free1, &total));
    assert_int_equal(free1, free0);
}

/* Pitched rows (the width rounded up to 512 bytes) and stream-ordered
 * allocations take device memory like cuMemAlloc, run out of it the same
 * way, and give it back when freed (cuMemFreeAsync after the stream's
 * earlier work: a memset queued before it lands). */
static void test_pitched_and_stream_ordered_allocations(void **state)
{
    (void)state;
    size_t free0, free1, total, pitch = 0;
    CU_OK(cuMemGetInfo(&free0, &total));
    CUdeviceptr p, q;
    CU_OK(cuMemAllocPitch(&p, &pitch, 1000, 64, 4));
    assert_int_equal(pitch, 1024);
    CU_OK(cuMemGetInfo(&free1, &total));
    assert_true(free0 - free1 >= 1024 * 64);
    CU_IS(cuMemAllocPitch(&q, &pitch, 1000, 64, 3), CUDA_ERROR_INVALID_VALUE);
    CU_IS(cuMemAllocPitch(&q, &pitch, 1u << 20, MEM_BYTES >> 19, 4), CUDA_ERROR_OUT_OF_MEMORY);
    CU_OK(cuMemFree(p));
    CUstream s;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU_IS(cuMemAllocAsync(&q, MEM_BYTES + 1, s), CUDA_ERROR_OUT_OF_MEMORY);
    CU_OK(cuMemAllocAsync(&q, 16ull << 20, s));
    CU_OK(cuMemsetD8Async(q, 0x5a, 16ull << 20, s));
    unsigned char b = 0;
    CU_OK(cuMemcpyDtoHAsync(&b, q + (16ull << 20) - 1, 1, s));
    CU_OK(cuMemFreeAsync(q, s));
    CU_OK(cuStreamSynchronize(s));
    assert_int_equal(b, 0x5a);
    CU_OK(cuMemGetInfo(&free1, &total));
    assert_int_equal(free1, free0);
    CU_OK(cuStreamDestroy(s));
}

static void test_bad_pointers_are_rejected(void **state)
{
    (void)state;
    CUdeviceptr d;
    CU_OK(cuMemAlloc(&d, 256));
    char buf[512];
    CU_IS(cuMemFree(d + 8), CUDA_ERROR_INVALID_VALUE);              /* not the start */
    CU_IS(cuMemFree((CUdeviceptr)(uintptr_t)buf), CUDA_ERROR_INVALID_VALUE);   /* host memory */
    CU_IS(cuMemcpyHtoD(d, buf, 512), CUDA_ERROR_INVALID_VALUE);     /* past the allocation */
    CU_IS(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)buf, buf, 8), CUDA_ERROR_INVALID_VALUE);  /* host dst */
    CU_IS(cuMemcpyDtoH(buf, d + 1024, 8), CUDA_ERROR_INVALID_VALUE);
    CU_IS(cuMemsetD8(d, 0, 257), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuMemFree(d));
    CU_IS(cuMemcpyDtoH(buf, d, 8), CUDA_ERROR_INVALID_VALUE);       /* freed */
    CU_OK(cuMemFree(0));
}

static void test_pointer_attributes(void **state)
{
    (void)state;
    CUdeviceptr d;
    CU_OK(cuMemAlloc(&d, 1024));
    unsigned type = 0;
    int ordinal = -1, managed = -1;
    CU_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d + 10));
    assert_int_equal(type, CU_MEMORYTYPE_DEVICE);
    CU_OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, d));
    assert_int_equal(ordinal, 0);
    CU_OK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, d));
    assert_int_equal(managed, 0);
    int x;
    CU_IS(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)&x),
          CUDA_ERROR_INVALID_VALUE);

    /* Several at once; an unknown pointer reads as zeros, no error. */
    CUpointer_attribute attrs[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                    CU_POINTER_ATTRIBUTE_DEVICE_POINTER};
    CUdeviceptr devptr = 0;
    void *data[3] = {&type, &ordinal, &devptr};
    type = 0;
    ordinal = -1;
    CU_OK(cuPointerGetAttributes(3, attrs, data, d + 8));
    assert_int_equal(type, CU_MEMORYTYPE_DEVICE);
    assert_int_equal(ordinal, 0);
    assert_true(devptr == d + 8);
    CU_OK(cuPointerGetAttributes(3, attrs, data, (CUdeviceptr)(uintptr_t)&x));
    assert_int_equal(type, 0);
    assert_true(devptr == 0);
    CU_IS(cuPointerGetAttributes(0, attrs, data, d), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuMemFree(d));
}

static void test_managed_memory_is_host_accessible(void **state)
{
    (void)state;
    CUdeviceptr m;
    CU_OK(cuMemAllocManaged(&m, 1 << 20, CU_MEM_ATTACH_GLOBAL));
    int *p = (int *)(uintptr_t)m;
    p[0] = 41;                               /* the host may touch managed memory */
    CU_OK(cuMemsetD8(m + 4, 1, 4));      /* the block migrates to the device */
    /* bring it back before the host reads: CMocka's SIGSEGV handler, active
     * during a test, would take the host's UVM fault for a crash */
    CUmemLocation host = { .type = CU_MEM_LOCATION_TYPE_HOST, .id = 0 };
    CU_OK(cuMemPrefetchAsync(m, 1 << 20, host, 0, NULL));
    CU_OK(cuCtxSynchronize());
    assert_int_equal(p[0], 41);
    assert_int_equal(p[1], 0x01010101);
    int managed = 0;
    CU_OK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m));
    assert_int_equal(managed, 1);
    CUmemLocation loc = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 };
    CU_OK(cuMemPrefetchAsync(m, 1 << 20, loc, 0, NULL));
    CU_OK(cuMemAdvise(m, 1 << 20, CU_MEM_ADVISE_SET_READ_MOSTLY, loc));
    CUdeviceptr d;
    CU_OK(cuMemAlloc(&d, 64));
    CU_IS(cuMemAdvise(d, 64, CU_MEM_ADVISE_SET_READ_MOSTLY, loc), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuMemFree(d));
    CU_OK(cuMemFree(m));
}

static void test_accounting_counts_bytes_each_way(void **state)
{
    (void)state;
    struct simgpu_stats a, b;
    assert_int_equal(simgpu_stats_get(0, &a), 0);
    assert_int_equal(simgpu_stats_get(1, &b), -22 /* -EINVAL */);
    CUdeviceptr d;
    CU_OK(cuMemAlloc(&d, 10000));
    static char buf[10000];
    CU_OK(cuMemcpyHtoD(d, buf, 10000));
    CU_OK(cuMemcpyHtoD(d, buf, 3000));
    CU_OK(cuMemcpyDtoH(buf, d, 777));
    CU_OK(cuMemcpyDtoD(d + 5000, d, 100));
    CU_OK(cuMemsetD8(d, 0, 10000));
    CU_OK(cuCtxSynchronize());
    assert_int_equal(simgpu_stats_get(0, &b), 0);
    assert_int_equal(b.htod_bytes - a.htod_bytes, 13000);
    assert_int_equal(b.htod_transfers - a.htod_transfers, 2);
    assert_int_equal(b.dtoh_bytes - a.dtoh_bytes, 777);
    assert_int_equal(b.dtoh_transfers - a.dtoh_transfers, 1);
    assert_int_equal(b.dtod_bytes - a.dtod_bytes, 100);
    assert_int_equal(b.dtod_transfers - a.dtod_transfers, 1);
    assert_int_equal(b.memset_bytes - a.memset_bytes, 10000);
    CU_OK(cuMemFree(d));
}

static void test_error_names(void **state)
{
    (void)state;
    const char *s;
    CU_OK(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s));
    assert_string_equal(s, "CUDA_ERROR_OUT_OF_MEMORY");
    CU_OK(cuGetErrorString(CUDA_ERROR_ILLEGAL_ADDRESS, &s));
    assert_non_null(strstr(s, "invalid memory address"));
    CU_IS(cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
}

/* Memory pools: a created pool's allocations are device memory of its
 * device (a round trip through them), attributes set read back, the
 * device's current pool is its default until set and again after the set
 * one is destroyed, a destroyed or default pool cannot be destroyed (or
 * allocated from, once destroyed), and a pool of another device, an IPC
 * handle type or a host location is refused. */
static void test_memory_pools(void **state)
{
    (void)state;
    int supported = 0;
    CU_OK(cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0));
    assert_int_equal(supported, 1);
    CUmemoryPool def, cur, pool;
    CU_OK(cuDeviceGetDefaultMemPool(&def, 0));
    CU_OK(cuDeviceGetMemPool(&cur, 0));
    assert_ptr_equal(def, cur);
    CUmemPoolProps props;
    memset(&props, 0, sizeof(props));
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    CU_OK(cuMemPoolCreate(&pool, &props));
    assert_ptr_not_equal(pool, def);

    CUstream s;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr p = 0;
    CU_OK(cuMemAllocFromPoolAsync(&p, 1 << 20, pool, s));
    CUmemorytype type = 0;
    CU_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p));
    assert_int_equal(type, CU_MEMORYTYPE_DEVICE);
    CU_OK(cuMemsetD8Async(p, 0x5c, 1 << 20, s));
    unsigned char back[64];
    CU_OK(cuMemcpyDtoHAsync(back, p + 4096, sizeof(back), s));
    CU_OK(cuStreamSynchronize(s));
    for (size_t i = 0; i < sizeof(back); i++)
        assert_int_equal(back[i], 0x5c);
    CU_OK(cuMemFreeAsync(p, s));

    cuuint64_t threshold = 64u << 20, got = 0;
    CU_OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
    CU_OK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &got));
    assert_int_equal(got, threshold);
    int reuse = 0, r = 1;
    CU_OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &reuse));
    CU_OK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &r));
    assert_int_equal(r, 0);
    CU_IS(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &got), CUDA_ERROR_NOT_SUPPORTED);
    CU_OK(cuMemPoolTrimTo(pool, 0));

    CU_OK(cuDeviceSetMemPool(0, pool));
    CU_OK(cuDeviceGetMemPool(&cur, 0));
    assert_ptr_equal(cur, pool);
    CU_OK(cuMemPoolDestroy(pool));
    CU_OK(cuDeviceGetMemPool(&cur, 0));
    assert_ptr_equal(cur, def);
    CU_IS(cuMemPoolDestroy(pool), CUDA_ERROR_INVALID_VALUE);
    CU_IS(cuMemAllocFromPoolAsync(&p, 4096, pool, s), CUDA_ERROR_INVALID_VALUE);
    CU_IS(cuMemPoolDestroy(def), CUDA_ERROR_INVALID_VALUE);

    /* the default pool allocates too */
    CU_OK(cuMemAllocFromPoolAsync(&p, 4096, def, s));
    CU_OK(cuMemFreeAsync(p, s));

    props.location.id = 7;
    CU_IS(cuMemPoolCreate(&pool, &props), CUDA_ERROR_INVALID_DEVICE);
    props.location.id = 0;
    props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CU_IS(cuMemPoolCreate(&pool, &props), CUDA_ERROR_NOT_SUPPORTED);
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    props.location.type = CU_MEM_LOCATION_TYPE_HOST;
    CU_IS(cuMemPoolCreate(&pool, &props), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuStreamDestroy(s));
}

int main(void)
{
    const struct CMUnitTest before[] = {
        cmocka_unit_test(test_before_init_calls_fail_not_initialized),
    };
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_queries),
        cmocka_unit_test(test_copy_round_trip_and_device_keeps_its_copy),
        cmocka_unit_test(test_host_dereference_of_device_memory_faults),
        cmocka_unit_test(test_memset_d8_d32_and_dtod),
        cmocka_unit_test(test_uva_memcpy_and_async_copies),
        cmocka_unit_test(test_3d_copies_and_batches),
        cmocka_unit_test(test_out_of_memory_and_get_info),
        cmocka_unit_test(test_pitched_and_stream_ordered_allocations),
        cmocka_unit_test(test_bad_pointers_are_rejected),
        cmocka_unit_test(test_pointer_attributes),
        cmocka_unit_test(test_memory_pools),
        cmocka_unit_test(test_managed_memory_is_host_accessible),
        cmocka_unit_test(test_accounting_counts_bytes_each_way),
        cmocka_unit_test(test_error_names),
    };
    int failed = cmocka_run_group_tests_name("before_init", before, NULL, NULL);
    return failed + cmocka_run_group_tests_name("memory", tests, sim_test_setup, NULL);
}
