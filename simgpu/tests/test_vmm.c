/*
 * test_vmm.c — the virtual memory management API: a reservation honours a
 * free fixed-address hint, physical memory mapped there is device memory
 * (reachable by copies and device work, a fault for the host), and
 * unmap/release/free give everything back.  Runs with SIMGPU_MEM_MB=64.
 */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

#define MB (1ull << 20)

static CUmemAllocationProp device_prop(void)
{
    CUmemAllocationProp p;
    memset(&p, 0, sizeof(p));
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = 0;
    return p;
}

static void test_granularity(void **state)
{
    (void)state;
    CUmemAllocationProp p = device_prop();
    size_t g = 0;
    CU_OK(cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    assert_int_equal(g, 2 * MB);
    p.type = CU_MEM_ALLOCATION_TYPE_INVALID;
    CU_IS(cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_ERROR_INVALID_VALUE);
}

static void test_fixed_address_hint(void **state)
{
    (void)state;
    CUdeviceptr a, b;
    CU_OK(cuMemAddressReserve(&a, 8 * MB, 0, 0, 0));
    assert_int_equal(a % (2 * MB), 0);
    CU_OK(cuMemAddressFree(a, 8 * MB));
    /* the range is free again: the hint is honoured */
    CU_OK(cuMemAddressReserve(&b, 8 * MB, 0, a, 0));
    assert_int_equal(b, a);
    /* a hint on a taken range is only a hint */
    CUdeviceptr c;
    CU_OK(cuMemAddressReserve(&c, 4 * MB, 0, a, 0));
    assert_true(c != a);
    CU_OK(cuMemAddressFree(c, 4 * MB));
    /* a free hint outside the simulator's own address arena, as the real
     * driver takes it (H200, driver 580): 16 MiB or less is never placed
     * there; more is, at a 32 MiB boundary, and not one 2 MiB past it */
    void *host = mmap(NULL, 128 * MB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(host != MAP_FAILED);
    CUdeviceptr hint = ((CUdeviceptr)(uintptr_t)host + 32 * MB - 1) & ~(CUdeviceptr)(32 * MB - 1);
    munmap(host, 128 * MB);
    CU_OK(cuMemAddressReserve(&c, 16 * MB, 0, hint, 0));
    assert_true(c != hint);
    CU_OK(cuMemAddressFree(c, 16 * MB));
    CU_OK(cuMemAddressReserve(&c, 32 * MB, 0, hint + 2 * MB, 0));
    assert_true(c != hint + 2 * MB);
    CU_OK(cuMemAddressFree(c, 32 * MB));
    CU_OK(cuMemAddressReserve(&c, 32 * MB, 0, hint, 0));
    assert_int_equal(c, hint);
    CU_OK(cuMemAddressFree(c, 32 * MB));
    /* alignment beyond the granule */
    CU_OK(cuMemAddressReserve(&c, 2 * MB, 64 * MB, 0, 0));
    assert_int_equal(c % (64 * MB), 0);
    CU_OK(cuMemAddressFree(c, 2 * MB));
    CU_OK(cuMemAddressFree(b, 8 * MB));
    CU_IS(cuMemAddressFree(b, 8 * MB), CUDA_ERROR_INVALID_VALUE);
    CU_IS(cuMemAddressReserve(&c, 3 * MB, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);   /* not a granule multiple */
}

static void test_map_use_unmap(void **state)
{
    (void)state;
    size_t free0, total;
    CU_OK(cuMemGetInfo(&free0, &total));
    CUmemAllocationProp p = device_prop();
    CUmemGenericAllocationHandle h;
    CU_OK(cuMemCreate(&h, 4 * MB, &p, 0));
    size_t free1;
    CU_OK(cuMemGetInfo(&free1, &total));
    assert_int_equal(free0 - free1, 4 * MB);
    CUdeviceptr va;
    CU_OK(cuMemAddressReserve(&va, 8 * MB, 0, 0, 0));
    CU_IS(cuMemMap(va, 8 * MB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);    /* larger than the allocation */
    CU_OK(cuMemMap(va + 2 * MB, 4 * MB, 0, h, 0));
    CU_IS(cuMemMap(va + 2 * MB, 2 * MB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);   /* already mapped */
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof(acc));
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = 0;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU_IS(cuMemSetAccess(va, 8 * MB, &acc, 1), CUDA_ERROR_INVALID_VALUE);      /* not all mapped */
    CU_OK(cuMemSetAccess(va + 2 * MB, 4 * MB, &acc, 1));

    /* device work (a memset runs in the device process) and copies */
    CU_OK(cuMemsetD32(va + 2 * MB, 0xabcd1234u, MB));
    uint32_t word = 0;
    CU_OK(cuMemcpyDtoH(&word, va + 6 * MB - 4, 4));
    assert_int_equal(word, 0xabcd1234u);
    uint32_t in[4] = { 1, 2, 3, 4 }, out[4];
    CU_OK(cuMemcpyHtoD(va + 3 * MB, in, sizeof(in)));
    CU_OK(cuMemcpyDtoD(va + 4 * MB, va + 3 * MB, sizeof(in)));
    CU_OK(cuMemcpyDtoH(out, va + 4 * MB, sizeof(out)));
    assert_memory_equal(in, out, sizeof(in));
    CU_IS(cuMemcpyDtoH(out, va, 4), CUDA_ERROR_INVALID_VALUE);         /* reserved, not mapped */
    unsigned type = 0;
    CU_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va + 2 * MB));
    assert_int_equal(type, CU_MEMORYTYPE_DEVICE);

    /* the host cannot touch it */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        volatile uint32_t *q = (volatile uint32_t *)(uintptr_t)(va + 2 * MB);
        _exit(*q == 0xabcd1234u ? 3 : 4);
    }
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);

    /* release while mapped: the memory stays until the unmap */
    CU_OK(cuMemRelease(h));
    CU_OK(cuMemcpyDtoH(&word, va + 2 * MB, 4));
    assert_int_equal(word, 0xabcd1234u);
    CU_IS(cuMemAddressFree(va, 8 * MB), CUDA_ERROR_INVALID_VALUE);     /* still mapped */
    CU_OK(cuMemUnmap(va + 2 * MB, 4 * MB));
    CU_IS(cuMemcpyDtoH(&word, va + 2 * MB, 4), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuMemAddressFree(va, 8 * MB));
    CU_OK(cuMemGetInfo(&free1, &total));
    assert_int_equal(free1, free0);
    CU_IS(cuMemRelease(h), CUDA_ERROR_INVALID_HANDLE);
}

/* Physical memory after a small cuMemAlloc: its place in the device's
 * memory must still be aligned for mapping. */
static void test_create_after_small_alloc(void **state)
{
    (void)state;
    CUdeviceptr small, va;
    CU_OK(cuMemAlloc(&small, 8));
    CUmemAllocationProp p = device_prop();
    CUmemGenericAllocationHandle h;
    CU_OK(cuMemCreate(&h, 2 * MB, &p, 0));
    CU_OK(cuMemAddressReserve(&va, 2 * MB, 0, 0, 0));
    CU_OK(cuMemMap(va, 2 * MB, 0, h, 0));
    CU_OK(cuMemUnmap(va, 2 * MB));
    CU_OK(cuMemRelease(h));
    CU_OK(cuMemAddressFree(va, 2 * MB));
    CU_OK(cuMemFree(small));
}

/* A shared file mapping the program had at cuInit, unmapped since: as on
 * an H200 (driver 580), no reservation is placed at its address, however
 * large and aligned; a free range that was not mapped at cuInit is. */
static void *file_map_before_init;

static void test_hint_over_a_mapping_from_before_init(void **state)
{
    (void)state;
    assert_non_null(file_map_before_init);
    CUdeviceptr hint = (CUdeviceptr)(uintptr_t)file_map_before_init, got;
    munmap(file_map_before_init, 32 * MB);
    CU_OK(cuMemAddressReserve(&got, 32 * MB, 0, hint, 0));
    assert_true(got != hint);
    CU_OK(cuMemAddressFree(got, 32 * MB));
}

/* Before cuInit: a shared mapping of a file, 32 MiB at a 32 MiB boundary
 * (where a hint can be honoured). */
static void map_a_file(void)
{
    char path[] = "/tmp/simgpu-vmm-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return;
    unlink(path);
    if (ftruncate(fd, 32 * MB) == 0) {
        char *r = mmap(NULL, 64 * MB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (r != MAP_FAILED) {
            char *a = (char *)(((uintptr_t)r + 32 * MB - 1) & ~(uintptr_t)(32 * MB - 1));
            void *m = mmap(a, 32 * MB, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
            if (a > r)
                munmap(r, (size_t)(a - r));
            munmap(a + 32 * MB, (size_t)(r + 64 * MB - (a + 32 * MB)));
            file_map_before_init = m == MAP_FAILED ? NULL : m;
        }
    }
    close(fd);
}

int main(void)
{
    map_a_file();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_granularity),
        cmocka_unit_test(test_fixed_address_hint),
        cmocka_unit_test(test_map_use_unmap),
        cmocka_unit_test(test_create_after_small_alloc),
        cmocka_unit_test(test_hint_over_a_mapping_from_before_init),
    };
    return cmocka_run_group_tests_name("vmm", tests, sim_test_setup, NULL);
}
