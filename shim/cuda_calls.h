/* Every CUDA entry point the shim itself calls, in one table, and the one
 * loader that finds them (cuda_loader.c).
 *
 * What the shim *hooks* is the other table (cuda_hooks.h): the rows a
 * program's calls reach. This one is what the shim calls on its own
 * account: its replicas, copies, waits and queries, from the libcuda.so.1
 * the program loaded. Columns: the field, the ABI name, its type, and its
 * role:
 *   CORE  the shim moves no page to a device without it (cuda_backend_ready);
 *   VMM   the vmm backing needs it (without it, replicas go to managed memory);
 *   OPT   a feature that works, less well, without it (named where used).
 * Driver rows are looked up once the driver is loaded. The runtime's
 * functions (a runtime-API launch names a host stub whose parameters only
 * the runtime that registered it knows) are looked up per calling object:
 * cuda_runtime_real_for. */
#ifndef GAIA_CUDA_CALLS_H
#define GAIA_CUDA_CALLS_H

#include <stdbool.h>

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include "shim.h"

typedef cudaError_t (*gaia_rt_func_param_info_fn)(const void *, size_t, size_t *, size_t *);
typedef cudaError_t (*gaia_rt_error_fn)(void);
typedef cudaError_t (*gaia_rt_free_fn)(void *);
typedef CUresult(CUDAAPI *gaia_array3d_descriptor_fn)(CUDA_ARRAY3D_DESCRIPTOR *, CUarray);

#define CUDA_DRIVER_CALLS(X)                                                                                    \
	X(ctx_get_current, "cuCtxGetCurrent", PFN_cuCtxGetCurrent_v4000, CORE)                                  \
	X(ctx_set_current, "cuCtxSetCurrent", PFN_cuCtxSetCurrent_v4000, CORE)                                  \
	X(ctx_get_device, "cuCtxGetDevice", PFN_cuCtxGetDevice_v2000, CORE)                                     \
	X(ctx_get_id, "cuCtxGetId", PFN_cuCtxGetId_v12000, OPT)                                                 \
	X(ctx_synchronize, "cuCtxSynchronize", PFN_cuCtxSynchronize_v2000, CORE)                                \
	X(ctx_push, "cuCtxPushCurrent_v2", PFN_cuCtxPushCurrent_v4000, OPT)                                     \
	X(ctx_pop, "cuCtxPopCurrent_v2", PFN_cuCtxPopCurrent_v4000, OPT)                                        \
	X(device_get, "cuDeviceGet", PFN_cuDeviceGet_v2000, VMM)                                                \
	X(device_get_count, "cuDeviceGetCount", PFN_cuDeviceGetCount_v2000, OPT)                                \
	X(primary_retain, "cuDevicePrimaryCtxRetain", PFN_cuDevicePrimaryCtxRetain_v7000, OPT)                  \
	X(primary_state, "cuDevicePrimaryCtxGetState", PFN_cuDevicePrimaryCtxGetState_v7000, OPT)               \
	X(mem_alloc, "cuMemAlloc_v2", PFN_cuMemAlloc_v3020, CORE)                                               \
	X(mem_free, "cuMemFree_v2", PFN_cuMemFree_v3020, CORE)                                                  \
	X(mem_alloc_managed, "cuMemAllocManaged", PFN_cuMemAllocManaged_v6000, OPT)                             \
	X(memcpy_htod, "cuMemcpyHtoD_v2", PFN_cuMemcpyHtoD_v3020, CORE)                                         \
	X(memcpy_dtoh, "cuMemcpyDtoH_v2", PFN_cuMemcpyDtoH_v3020, CORE)                                         \
	X(memcpy_dtod, "cuMemcpyDtoD_v2", PFN_cuMemcpyDtoD_v3020, CORE)                                         \
	X(memset_d8, "cuMemsetD8_v2", PFN_cuMemsetD8_v3020, CORE)                                               \
	X(prefetch, "cuMemPrefetchAsync_v2", PFN_cuMemPrefetchAsync_v12020, OPT)                                \
	X(mem_advise, "cuMemAdvise_v2", PFN_cuMemAdvise_v12020, OPT)                                            \
	X(mem_alloc_host, "cuMemAllocHost_v2", PFN_cuMemAllocHost_v3020, OPT)                                    \
	X(mem_free_host, "cuMemFreeHost", PFN_cuMemFreeHost_v2000, OPT)                                          \
	X(pointer_attribute, "cuPointerGetAttribute", PFN_cuPointerGetAttribute_v4000, OPT)                     \
	X(array3d_descriptor, "cuArray3DGetDescriptor_v2", gaia_array3d_descriptor_fn, OPT)                     \
	X(stream_synchronize, "cuStreamSynchronize", PFN_cuStreamSynchronize_v2000, OPT)                        \
	X(stream_create, "cuStreamCreate", PFN_cuStreamCreate_v2000, OPT)                                       \
	X(stream_query, "cuStreamQuery", PFN_cuStreamQuery_v2000, OPT)                                          \
	X(stream_is_capturing, "cuStreamIsCapturing", PFN_cuStreamIsCapturing_v10000, OPT)                      \
	X(event_create, "cuEventCreate", PFN_cuEventCreate_v2000, OPT)                                          \
	X(event_record, "cuEventRecord", PFN_cuEventRecord_v2000, OPT)                                          \
	X(event_synchronize, "cuEventSynchronize", PFN_cuEventSynchronize_v2000, OPT)                           \
	X(event_destroy, "cuEventDestroy_v2", PFN_cuEventDestroy_v4000, OPT)                                    \
	X(stream_wait_event, "cuStreamWaitEvent", PFN_cuStreamWaitEvent_v3020, OPT)                             \
	X(memcpy_htod_async, "cuMemcpyHtoDAsync_v2", PFN_cuMemcpyHtoDAsync_v3020, OPT)                          \
	X(memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2", PFN_cuMemcpyDtoHAsync_v3020, OPT)                          \
	X(memcpy_dtod_async, "cuMemcpyDtoDAsync_v2", PFN_cuMemcpyDtoDAsync_v3020, OPT)                          \
	X(granularity, "cuMemGetAllocationGranularity", PFN_cuMemGetAllocationGranularity_v10020, VMM)          \
	X(address_reserve, "cuMemAddressReserve", PFN_cuMemAddressReserve_v10020, VMM)                          \
	X(address_free, "cuMemAddressFree", PFN_cuMemAddressFree_v10020, VMM)                                   \
	X(mem_create, "cuMemCreate", PFN_cuMemCreate_v10020, VMM)                                               \
	X(mem_release, "cuMemRelease", PFN_cuMemRelease_v10020, VMM)                                            \
	X(mem_map, "cuMemMap", PFN_cuMemMap_v10020, VMM)                                                        \
	X(mem_unmap, "cuMemUnmap", PFN_cuMemUnmap_v10020, VMM)                                                  \
	X(set_access, "cuMemSetAccess", PFN_cuMemSetAccess_v10020, VMM)                                         \
	X(module_load_data, "cuModuleLoadData", PFN_cuModuleLoadData_v2000, OPT)                                \
	X(module_get_function, "cuModuleGetFunction", PFN_cuModuleGetFunction_v2000, OPT)                       \
	X(launch_kernel, "cuLaunchKernel", PFN_cuLaunchKernel_v4000, OPT)                                       \
	X(func_param_info, "cuFuncGetParamInfo", PFN_cuFuncGetParamInfo_v12040, OPT)                            \
	X(kernel_param_info, "cuKernelGetParamInfo", PFN_cuKernelGetParamInfo_v12040, OPT)                      \
	X(func_load, "cuFuncLoad", PFN_cuFuncLoad_v12040, OPT)                                                  \
	X(error_name, "cuGetErrorName", PFN_cuGetErrorName_v6000, OPT)                                          \
	X(exchange_capture_mode, "cuThreadExchangeStreamCaptureMode", PFN_cuThreadExchangeStreamCaptureMode_v10010, OPT) \
	X(device_get_attribute, "cuDeviceGetAttribute", PFN_cuDeviceGetAttribute_v2000, OPT)                   \
	X(mem_get_info, "cuMemGetInfo_v2", PFN_cuMemGetInfo_v3020, OPT)                                         \
	X(host_register, "cuMemHostRegister_v2", PFN_cuMemHostRegister_v6050, OPT)                              \
	X(host_unregister, "cuMemHostUnregister", PFN_cuMemHostUnregister_v4000, OPT)                           \
	X(host_device_pointer, "cuMemHostGetDevicePointer_v2", PFN_cuMemHostGetDevicePointer_v3020, OPT)

struct cuda_calls {
#define CUDA_CALL_FIELD(field, name, type, role) type field;
	CUDA_DRIVER_CALLS(CUDA_CALL_FIELD)
#undef CUDA_CALL_FIELD
};

/* The table, its driver rows looked up once the driver is loaded (NULL
 * rows before that, or where the driver lacks the name). Lock-free after
 * the first look. */
GAIA_HIDDEN const struct cuda_calls *cuda_calls(void);

/* Whether every CORE row is there (the driver is loaded and complete
 * enough for device replicas). */
GAIA_HIDDEN bool cuda_calls_core(void);

/* The real libcuda.so.1 entry point with this ABI name, for the hook
 * table's rows (never one of the shim's wrappers); NULL when no driver is
 * loaded or it lacks the name. Cached per name; thread-safe. */
GAIA_HIDDEN void *cuda_real(const char *abi_name);

/* The real runtime-API function with this name: RTLD_NEXT when libcudart
 * is in the global scope, else a libcudart.so* loaded in a local scope. */
GAIA_HIDDEN void *cuda_runtime_real(const char *name);

/* The runtime-API function `name` as code in the object that contains
 * `addr` (a caller's return address, a kernel's host stub) reaches it
 * without the shim: the global scope after the shim, else that object's
 * own scope (a runtime linked into it, or loaded with it in a local scope
 * under any name), else any libcudart.so* loaded. Each object keeps the
 * runtime it was built with: two plugins may carry two. Cached per
 * object and name; thread-safe. NULL when none is found. */
GAIA_HIDDEN void *cuda_runtime_real_for(const void *addr, const char *name);

/* The dlsym after the shim's own (libc's, or the next interposer's). */
GAIA_HIDDEN void *cuda_loader_dlsym(void *handle, const char *name);

#endif
