/*
 * test_procaddr.c — cuGetProcAddress picks entry points by base name,
 * cudaVersion and flags, as the real driver does (cuda.h documentation and
 * research/cuda_interpose.md §1.2–1.3).
 */
#include <dlfcn.h>
#include <string.h>

#include <cudaTypedefs.h>

#include "test_util.h"

static void *handle;

static void *abi(const char *name)
{
    void *p = dlsym(handle, name);
    assert_non_null(p);
    return p;
}

static void *get(const char *name, int version, cuuint64_t flags, CUdriverProcAddressQueryResult want)
{
    void *p = (void *)1;
    CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)99;
    CU_OK(cuGetProcAddress(name, &p, version, flags, &st));
    assert_int_equal(st, want);
    if (want != CU_GET_PROC_ADDRESS_SUCCESS)
        assert_null(p);
    return p;
}

static void test_versions_select_the_abi(void **state)
{
    (void)state;
    assert_ptr_equal(get("cuMemAlloc", 3020, 0, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuMemAlloc_v2"));
    assert_ptr_equal(get("cuMemAlloc", 13000, 0, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuMemAlloc_v2"));
    /* the 32-bit cuMemAlloc of CUDA 2.0 is not offered */
    get("cuMemAlloc", 2000, 0, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    assert_ptr_equal(get("cuCtxSynchronize", 2000, 0, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuCtxSynchronize"));
    assert_ptr_equal(get("cuCtxSynchronize", 12090, 0, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuCtxSynchronize"));
    assert_ptr_equal(get("cuCtxSynchronize", 13000, 0, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuCtxSynchronize_v2"));
    assert_ptr_equal(get("cuEventElapsedTime", 12080, 0, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuEventElapsedTime_v2"));
    assert_ptr_equal(get("cuMemAdvise", 8000, 0, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuMemAdvise"));
    assert_ptr_equal(get("cuMemAdvise", 12020, 0, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuMemAdvise_v2"));
    get("cuFuncGetParamInfo", 12030, 0, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    /* pinned host memory and modules: legacy and _v2 ABIs */
    assert_ptr_equal(get("cuMemAllocHost", 2000, 0, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuMemAllocHost"));
    assert_ptr_equal(get("cuMemAllocHost", 13000, 0, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuMemAllocHost_v2"));
    assert_ptr_equal(get("cuMemHostRegister", 4000, 0, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuMemHostRegister"));
    assert_ptr_equal(get("cuMemHostRegister", 6050, 0, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuMemHostRegister_v2"));
    get("cuMemHostRegister", 3020, 0, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    assert_ptr_equal(get("cuMemHostGetDevicePointer", 13000, 0, CU_GET_PROC_ADDRESS_SUCCESS),
                     abi("cuMemHostGetDevicePointer_v2"));
    assert_ptr_equal(get("cuMemHostUnregister", 13000, 0, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuMemHostUnregister"));
    assert_ptr_equal(get("cuMemHostGetFlags", 13000, 0, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuMemHostGetFlags"));
    assert_ptr_equal(get("cuMemFreeHost", 13000, 0, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuMemFreeHost"));
    assert_ptr_equal(get("cuMemHostAlloc", 13000, 0, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuMemHostAlloc"));
    assert_ptr_equal(get("cuModuleLoadData", 13000, 0, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuModuleLoadData"));
    assert_ptr_equal(get("cuModuleLoadDataEx", 13000, 0, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuModuleLoadDataEx"));
    assert_ptr_equal(get("cuModuleGetFunction", 13000, 0, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuModuleGetFunction"));
    assert_ptr_equal(get("cuModuleUnload", 13000, 0, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuModuleUnload"));
    assert_ptr_equal(get("cuModuleGetGlobal", 13000, 0, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuModuleGetGlobal_v2"));
}

static void test_per_thread_flag_selects_ptsz_and_ptds(void **state)
{
    (void)state;
    const cuuint64_t PT = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    assert_ptr_equal(get("cuLaunchKernel", 4000, 0, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuLaunchKernel"));
    assert_ptr_equal(get("cuLaunchKernel", 7000, PT, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuLaunchKernel_ptsz"));
    /* legacy-stream lookups use flags 0 (as cudart does) or 1 */
    assert_ptr_equal(get("cuLaunchKernel", 7000, 0, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuLaunchKernel"));
    assert_ptr_equal(get("cuLaunchKernel", 7000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, CU_GET_PROC_ADDRESS_SUCCESS),
                     abi("cuLaunchKernel"));
    assert_ptr_equal(get("cuMemcpyHtoD", 7000, PT, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuMemcpyHtoD_v2_ptds"));
    assert_ptr_equal(get("cuMemcpyHtoDAsync", 7000, PT, CU_GET_PROC_ADDRESS_SUCCESS),
                     abi("cuMemcpyHtoDAsync_v2_ptsz"));
    assert_ptr_equal(get("cuStreamSynchronize", 7000, PT, CU_GET_PROC_ADDRESS_SUCCESS),
                     abi("cuStreamSynchronize_ptsz"));
    assert_ptr_equal(get("cuLaunchKernelEx", 11060, PT, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuLaunchKernelEx_ptsz"));
    /* no per-thread variant: the legacy one is returned */
    assert_ptr_equal(get("cuInit", 2000, PT, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuInit"));
    /* per-thread variants exist only from 7000 on */
    assert_ptr_equal(get("cuStreamSynchronize", 2000, PT, CU_GET_PROC_ADDRESS_SUCCESS), abi("cuStreamSynchronize"));
}

static void test_unknown_names_and_null_status(void **state)
{
    (void)state;
    get("cuNoSuchFunction", 13000, 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    get("", 0, 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    get("cuMemAlloc_v2", 13000, 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);   /* ABI names are not base names */
    void *p = (void *)1;
    CU_OK(cuGetProcAddress("cuNoSuchFunction", &p, 13000, 0, NULL));        /* symbolStatus may be NULL */
    assert_null(p);
    CU_OK(cuGetProcAddress("cuInit", &p, 13000, 0, NULL));
    assert_ptr_equal(p, abi("cuInit"));
    CU_IS(cuGetProcAddress("cuInit", &p, 13000, 4, NULL), CUDA_ERROR_INVALID_VALUE);    /* bad flags */
    CU_IS(cuGetProcAddress("cuInit", &p, 99000, 0, NULL), CUDA_ERROR_INVALID_VALUE);    /* newer than the driver */
    CU_IS(cuGetProcAddress("cuInit", NULL, 13000, 0, NULL), CUDA_ERROR_INVALID_VALUE);
}

static void test_known_but_unsupported_entry_points_return_not_supported(void **state)
{
    (void)state;
    PFN_cuGraphAddEmptyNode_v10000 add = get("cuGraphAddEmptyNode", 10000, 0, CU_GET_PROC_ADDRESS_SUCCESS);
    assert_non_null(add);
    CUgraphNode node;
    CU_IS(add(&node, NULL, NULL, 0), CUDA_ERROR_NOT_SUPPORTED);     /* graph editing: not modelled */
    PFN_cuGraphLaunch_v10000 launch = get("cuGraphLaunch", 10000, 0, CU_GET_PROC_ADDRESS_SUCCESS);
    CU_IS(launch(NULL, NULL), CUDA_ERROR_INVALID_HANDLE);          /* implemented (graph.c) */
    PFN_cuMemPoolExportPointer_v11020 export_ptr = get("cuMemPoolExportPointer", 11020, 0,
                                                        CU_GET_PROC_ADDRESS_SUCCESS);
    CUmemPoolPtrExportData data;
    CU_IS(export_ptr(&data, 0), CUDA_ERROR_NOT_SUPPORTED); /* pools: no IPC */
    PFN_cuGetExportTable_v3000 et = get("cuGetExportTable", 3000, 0, CU_GET_PROC_ADDRESS_SUCCESS);
    const void *table = (void *)1;
    CUuuid id = { { 0 } };
    CU_IS(et(&table, &id), CUDA_ERROR_NOT_SUPPORTED);
}

/* The v1 ABI (CUDA 11.3-11.8) and the self-lookup static cudart makes. */
static void test_v1_abi_and_self_lookup(void **state)
{
    (void)state;
    PFN_cuGetProcAddress_v11030 v1 = abi("cuGetProcAddress");
    void *p = NULL;
    CU_OK(v1("cuMemFree", &p, 11030, 0));
    assert_ptr_equal(p, abi("cuMemFree_v2"));
    PFN_cuGetProcAddress_v12000 self = get("cuGetProcAddress", 12000, 0, CU_GET_PROC_ADDRESS_SUCCESS);
    assert_ptr_equal(self, abi("cuGetProcAddress_v2"));
    assert_ptr_equal(get("cuGetProcAddress", 11030, 0, CU_GET_PROC_ADDRESS_SUCCESS), (void *)v1);
    CUdriverProcAddressQueryResult st;
    CU_OK(self("cuStreamQuery", &p, 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    assert_ptr_equal(p, abi("cuStreamQuery_ptsz"));
}

int main(void)
{
    handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!handle)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_versions_select_the_abi),
        cmocka_unit_test(test_per_thread_flag_selects_ptsz_and_ptds),
        cmocka_unit_test(test_unknown_names_and_null_status),
        cmocka_unit_test(test_known_but_unsupported_entry_points_return_not_supported),
        cmocka_unit_test(test_v1_abi_and_self_lookup),
    };
    return cmocka_run_group_tests_name("procaddr", tests, NULL, NULL);
}
