/*
 * procaddr.c — cuGetProcAddress: one table of entry points, selected by
 * (base name, cudaVersion, flags) as the real driver does.
 *
 * Each row names the ABI function and the cudaTypedefs.h PFN type of that
 * (name, version[, _ptsz]) pair; a static assertion per row checks that
 * the function has exactly that type.  For a base name, the row with the
 * highest version <= cudaVersion wins; with the per-thread-default-stream
 * flag, _ptsz/_ptds rows are preferred and legacy rows are the fallback
 * (cuda.h, cuGetProcAddress documentation).
 */
#include <string.h>
#include <cudaTypedefs.h>

#include "sim.h"

#define PT 1   /* row is a per-thread (_ptsz/_ptds) variant */

#define SIM_ENTRY_POINTS(X)                                                                 \
    X(cuInit, 2000, 0, cuInit, PFN_cuInit_v2000)                                            \
    X(cuDriverGetVersion, 2020, 0, cuDriverGetVersion, PFN_cuDriverGetVersion_v2020)        \
    X(cuDeviceGet, 2000, 0, cuDeviceGet, PFN_cuDeviceGet_v2000)                             \
    X(cuDeviceGetCount, 2000, 0, cuDeviceGetCount, PFN_cuDeviceGetCount_v2000)              \
    X(cuDeviceGetName, 2000, 0, cuDeviceGetName, PFN_cuDeviceGetName_v2000)                 \
    X(cuDeviceGetAttribute, 2000, 0, cuDeviceGetAttribute, PFN_cuDeviceGetAttribute_v2000)  \
    X(cuDeviceTotalMem, 3020, 0, cuDeviceTotalMem_v2, PFN_cuDeviceTotalMem_v3020)           \
    X(cuDeviceGetUuid, 9020, 0, cuDeviceGetUuid, PFN_cuDeviceGetUuid_v9020)                 \
    X(cuDeviceGetUuid, 11040, 0, cuDeviceGetUuid_v2, PFN_cuDeviceGetUuid_v11040)            \
    X(cuDevicePrimaryCtxRetain, 7000, 0, cuDevicePrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain_v7000) \
    X(cuDevicePrimaryCtxRelease, 7000, 0, cuDevicePrimaryCtxRelease, PFN_cuDevicePrimaryCtxRelease_v7000) \
    X(cuDevicePrimaryCtxRelease, 11000, 0, cuDevicePrimaryCtxRelease_v2, PFN_cuDevicePrimaryCtxRelease_v11000) \
    X(cuDevicePrimaryCtxSetFlags, 7000, 0, cuDevicePrimaryCtxSetFlags, PFN_cuDevicePrimaryCtxSetFlags_v7000) \
    X(cuDevicePrimaryCtxSetFlags, 11000, 0, cuDevicePrimaryCtxSetFlags_v2, PFN_cuDevicePrimaryCtxSetFlags_v11000) \
    X(cuDevicePrimaryCtxGetState, 7000, 0, cuDevicePrimaryCtxGetState, PFN_cuDevicePrimaryCtxGetState_v7000) \
    X(cuDevicePrimaryCtxReset, 7000, 0, cuDevicePrimaryCtxReset, PFN_cuDevicePrimaryCtxReset_v7000) \
    X(cuDevicePrimaryCtxReset, 11000, 0, cuDevicePrimaryCtxReset_v2, PFN_cuDevicePrimaryCtxReset_v11000) \
    X(cuCtxPushCurrent, 4000, 0, cuCtxPushCurrent_v2, PFN_cuCtxPushCurrent_v4000)            \
    X(cuCtxPopCurrent, 4000, 0, cuCtxPopCurrent_v2, PFN_cuCtxPopCurrent_v4000)               \
    X(cuCtxGetCurrent, 4000, 0, cuCtxGetCurrent, PFN_cuCtxGetCurrent_v4000)                 \
    X(cuCtxSetCurrent, 4000, 0, cuCtxSetCurrent, PFN_cuCtxSetCurrent_v4000)                 \
    X(cuCtxGetDevice, 2000, 0, cuCtxGetDevice, PFN_cuCtxGetDevice_v2000)                    \
    X(cuCtxGetDevice, 13000, 0, cuCtxGetDevice_v2, PFN_cuCtxGetDevice_v13000)               \
    X(cuCtxSynchronize, 2000, 0, cuCtxSynchronize, PFN_cuCtxSynchronize_v2000)              \
    X(cuCtxSynchronize, 13000, 0, cuCtxSynchronize_v2, PFN_cuCtxSynchronize_v13000)         \
    X(cuMemAlloc, 3020, 0, cuMemAlloc_v2, PFN_cuMemAlloc_v3020)                             \
    X(cuMemAllocManaged, 6000, 0, cuMemAllocManaged, PFN_cuMemAllocManaged_v6000)           \
    X(cuMemFree, 3020, 0, cuMemFree_v2, PFN_cuMemFree_v3020)                                \
    X(cuMemAllocPitch, 3020, 0, cuMemAllocPitch_v2, PFN_cuMemAllocPitch_v3020)              \
    X(cuArrayCreate, 3020, 0, cuArrayCreate_v2, PFN_cuArrayCreate_v3020)                    \
    X(cuArray3DCreate, 3020, 0, cuArray3DCreate_v2, PFN_cuArray3DCreate_v3020)              \
    X(cuArrayDestroy, 2000, 0, cuArrayDestroy, PFN_cuArrayDestroy_v2000)                    \
    X(cuArrayGetDescriptor, 3020, 0, cuArrayGetDescriptor_v2, PFN_cuArrayGetDescriptor_v3020) \
    X(cuArray3DGetDescriptor, 3020, 0, cuArray3DGetDescriptor_v2, PFN_cuArray3DGetDescriptor_v3020) \
    X(cuMipmappedArrayCreate, 5000, 0, cuMipmappedArrayCreate, PFN_cuMipmappedArrayCreate_v5000) \
    X(cuMipmappedArrayGetLevel, 5000, 0, cuMipmappedArrayGetLevel, PFN_cuMipmappedArrayGetLevel_v5000) \
    X(cuMipmappedArrayDestroy, 5000, 0, cuMipmappedArrayDestroy, PFN_cuMipmappedArrayDestroy_v5000) \
    X(cuMemAllocAsync, 11020, 0, cuMemAllocAsync, PFN_cuMemAllocAsync_v11020)               \
    X(cuMemAllocAsync, 11020, PT, cuMemAllocAsync_ptsz, PFN_cuMemAllocAsync_v11020_ptsz)    \
    X(cuMemFreeAsync, 11020, 0, cuMemFreeAsync, PFN_cuMemFreeAsync_v11020)                  \
    X(cuMemAllocFromPoolAsync, 11020, 0, cuMemAllocFromPoolAsync, PFN_cuMemAllocFromPoolAsync_v11020) \
    X(cuMemAllocFromPoolAsync, 11020, PT, cuMemAllocFromPoolAsync_ptsz, PFN_cuMemAllocFromPoolAsync_v11020_ptsz) \
    X(cuMemPoolCreate, 11020, 0, cuMemPoolCreate, PFN_cuMemPoolCreate_v11020)               \
    X(cuMemPoolDestroy, 11020, 0, cuMemPoolDestroy, PFN_cuMemPoolDestroy_v11020)            \
    X(cuMemPoolSetAttribute, 11020, 0, cuMemPoolSetAttribute, PFN_cuMemPoolSetAttribute_v11020) \
    X(cuMemPoolGetAttribute, 11020, 0, cuMemPoolGetAttribute, PFN_cuMemPoolGetAttribute_v11020) \
    X(cuMemPoolTrimTo, 11020, 0, cuMemPoolTrimTo, PFN_cuMemPoolTrimTo_v11020)               \
    X(cuDeviceGetDefaultMemPool, 11020, 0, cuDeviceGetDefaultMemPool, PFN_cuDeviceGetDefaultMemPool_v11020) \
    X(cuDeviceGetMemPool, 11020, 0, cuDeviceGetMemPool, PFN_cuDeviceGetMemPool_v11020)      \
    X(cuDeviceSetMemPool, 11020, 0, cuDeviceSetMemPool, PFN_cuDeviceSetMemPool_v11020)      \
    X(cuMemFreeAsync, 11020, PT, cuMemFreeAsync_ptsz, PFN_cuMemFreeAsync_v11020_ptsz)       \
    X(cuMemGetInfo, 3020, 0, cuMemGetInfo_v2, PFN_cuMemGetInfo_v3020)                       \
    X(cuMemGetAllocationGranularity, 10020, 0, cuMemGetAllocationGranularity, PFN_cuMemGetAllocationGranularity_v10020) \
    X(cuMemAddressReserve, 10020, 0, cuMemAddressReserve, PFN_cuMemAddressReserve_v10020)   \
    X(cuMemAddressFree, 10020, 0, cuMemAddressFree, PFN_cuMemAddressFree_v10020)            \
    X(cuMemCreate, 10020, 0, cuMemCreate, PFN_cuMemCreate_v10020)                           \
    X(cuMemRelease, 10020, 0, cuMemRelease, PFN_cuMemRelease_v10020)                        \
    X(cuMemMap, 10020, 0, cuMemMap, PFN_cuMemMap_v10020)                                    \
    X(cuMemUnmap, 10020, 0, cuMemUnmap, PFN_cuMemUnmap_v10020)                              \
    X(cuMemSetAccess, 10020, 0, cuMemSetAccess, PFN_cuMemSetAccess_v10020)                  \
    X(cuMemcpyHtoD, 3020, 0, cuMemcpyHtoD_v2, PFN_cuMemcpyHtoD_v3020)                       \
    X(cuMemcpyHtoD, 7000, PT, cuMemcpyHtoD_v2_ptds, PFN_cuMemcpyHtoD_v7000_ptds)            \
    X(cuMemcpyDtoH, 3020, 0, cuMemcpyDtoH_v2, PFN_cuMemcpyDtoH_v3020)                       \
    X(cuMemcpyDtoH, 7000, PT, cuMemcpyDtoH_v2_ptds, PFN_cuMemcpyDtoH_v7000_ptds)            \
    X(cuMemcpyDtoD, 3020, 0, cuMemcpyDtoD_v2, PFN_cuMemcpyDtoD_v3020)                       \
    X(cuMemcpyDtoD, 7000, PT, cuMemcpyDtoD_v2_ptds, PFN_cuMemcpyDtoD_v7000_ptds)            \
    X(cuMemcpyHtoDAsync, 3020, 0, cuMemcpyHtoDAsync_v2, PFN_cuMemcpyHtoDAsync_v3020)        \
    X(cuMemcpyHtoDAsync, 7000, PT, cuMemcpyHtoDAsync_v2_ptsz, PFN_cuMemcpyHtoDAsync_v7000_ptsz) \
    X(cuMemcpyDtoHAsync, 3020, 0, cuMemcpyDtoHAsync_v2, PFN_cuMemcpyDtoHAsync_v3020)        \
    X(cuMemcpyDtoHAsync, 7000, PT, cuMemcpyDtoHAsync_v2_ptsz, PFN_cuMemcpyDtoHAsync_v7000_ptsz) \
    X(cuMemcpyDtoDAsync, 3020, 0, cuMemcpyDtoDAsync_v2, PFN_cuMemcpyDtoDAsync_v3020)        \
    X(cuMemcpyDtoDAsync, 7000, PT, cuMemcpyDtoDAsync_v2_ptsz, PFN_cuMemcpyDtoDAsync_v7000_ptsz) \
    X(cuMemcpy, 4000, 0, cuMemcpy, PFN_cuMemcpy_v4000)                                      \
    X(cuMemcpy, 7000, PT, cuMemcpy_ptds, PFN_cuMemcpy_v7000_ptds)                           \
    X(cuMemcpyAsync, 4000, 0, cuMemcpyAsync, PFN_cuMemcpyAsync_v4000)                       \
    X(cuMemcpyAsync, 7000, PT, cuMemcpyAsync_ptsz, PFN_cuMemcpyAsync_v7000_ptsz)            \
    X(cuMemcpyBatchAsync, 12080, 0, cuMemcpyBatchAsync, PFN_cuMemcpyBatchAsync_v12080)      \
    X(cuMemcpyBatchAsync, 12080, PT, cuMemcpyBatchAsync_ptsz, PFN_cuMemcpyBatchAsync_v12080_ptsz) \
    X(cuMemcpyBatchAsync, 13000, 0, cuMemcpyBatchAsync_v2, PFN_cuMemcpyBatchAsync_v13000)   \
    X(cuMemcpyBatchAsync, 13000, PT, cuMemcpyBatchAsync_v2_ptsz, PFN_cuMemcpyBatchAsync_v13000_ptsz) \
    X(cuMemcpy2D, 3020, 0, cuMemcpy2D_v2, PFN_cuMemcpy2D_v3020)                             \
    X(cuMemcpy2D, 7000, PT, cuMemcpy2D_v2_ptds, PFN_cuMemcpy2D_v7000_ptds)                  \
    X(cuMemcpy2DUnaligned, 3020, 0, cuMemcpy2DUnaligned_v2, PFN_cuMemcpy2DUnaligned_v3020)  \
    X(cuMemcpy2DUnaligned, 7000, PT, cuMemcpy2DUnaligned_v2_ptds, PFN_cuMemcpy2DUnaligned_v7000_ptds) \
    X(cuMemcpy2DAsync, 3020, 0, cuMemcpy2DAsync_v2, PFN_cuMemcpy2DAsync_v3020)              \
    X(cuMemcpy2DAsync, 7000, PT, cuMemcpy2DAsync_v2_ptsz, PFN_cuMemcpy2DAsync_v7000_ptsz)   \
    X(cuMemcpy3D, 3020, 0, cuMemcpy3D_v2, PFN_cuMemcpy3D_v3020)                             \
    X(cuMemcpy3D, 7000, PT, cuMemcpy3D_v2_ptds, PFN_cuMemcpy3D_v7000_ptds)                  \
    X(cuMemcpy3DAsync, 3020, 0, cuMemcpy3DAsync_v2, PFN_cuMemcpy3DAsync_v3020)              \
    X(cuMemcpy3DAsync, 7000, PT, cuMemcpy3DAsync_v2_ptsz, PFN_cuMemcpy3DAsync_v7000_ptsz)   \
    X(cuMemcpy3DPeer, 4000, 0, cuMemcpy3DPeer, PFN_cuMemcpy3DPeer_v4000)                    \
    X(cuMemcpy3DPeer, 7000, PT, cuMemcpy3DPeer_ptds, PFN_cuMemcpy3DPeer_v7000_ptds)         \
    X(cuMemcpy3DPeerAsync, 4000, 0, cuMemcpy3DPeerAsync, PFN_cuMemcpy3DPeerAsync_v4000)     \
    X(cuMemcpy3DPeerAsync, 7000, PT, cuMemcpy3DPeerAsync_ptsz, PFN_cuMemcpy3DPeerAsync_v7000_ptsz) \
    X(cuMemcpy3DBatchAsync, 12080, 0, cuMemcpy3DBatchAsync, PFN_cuMemcpy3DBatchAsync_v12080) \
    X(cuMemcpy3DBatchAsync, 12080, PT, cuMemcpy3DBatchAsync_ptsz, PFN_cuMemcpy3DBatchAsync_v12080_ptsz) \
    X(cuMemcpy3DBatchAsync, 13000, 0, cuMemcpy3DBatchAsync_v2, PFN_cuMemcpy3DBatchAsync_v13000) \
    X(cuMemcpy3DBatchAsync, 13000, PT, cuMemcpy3DBatchAsync_v2_ptsz, PFN_cuMemcpy3DBatchAsync_v13000_ptsz) \
    X(cuMemsetD8, 3020, 0, cuMemsetD8_v2, PFN_cuMemsetD8_v3020)                             \
    X(cuMemsetD8, 7000, PT, cuMemsetD8_v2_ptds, PFN_cuMemsetD8_v7000_ptds)                  \
    X(cuMemsetD32, 3020, 0, cuMemsetD32_v2, PFN_cuMemsetD32_v3020)                          \
    X(cuMemsetD32, 7000, PT, cuMemsetD32_v2_ptds, PFN_cuMemsetD32_v7000_ptds)               \
    X(cuMemsetD8Async, 3020, 0, cuMemsetD8Async, PFN_cuMemsetD8Async_v3020)                 \
    X(cuMemsetD8Async, 7000, PT, cuMemsetD8Async_ptsz, PFN_cuMemsetD8Async_v7000_ptsz)      \
    X(cuMemsetD32Async, 3020, 0, cuMemsetD32Async, PFN_cuMemsetD32Async_v3020)              \
    X(cuMemsetD32Async, 7000, PT, cuMemsetD32Async_ptsz, PFN_cuMemsetD32Async_v7000_ptsz)   \
    X(cuMemcpyPeer, 4000, 0, cuMemcpyPeer, PFN_cuMemcpyPeer_v4000) \
    X(cuMemcpyPeer, 7000, PT, cuMemcpyPeer_ptds, PFN_cuMemcpyPeer_v7000_ptds) \
    X(cuMemcpyPeerAsync, 4000, 0, cuMemcpyPeerAsync, PFN_cuMemcpyPeerAsync_v4000) \
    X(cuMemcpyPeerAsync, 7000, PT, cuMemcpyPeerAsync_ptsz, PFN_cuMemcpyPeerAsync_v7000_ptsz) \
    X(cuMemsetD16, 3020, 0, cuMemsetD16_v2, PFN_cuMemsetD16_v3020) \
    X(cuMemsetD16, 7000, PT, cuMemsetD16_v2_ptds, PFN_cuMemsetD16_v7000_ptds) \
    X(cuMemsetD16Async, 3020, 0, cuMemsetD16Async, PFN_cuMemsetD16Async_v3020) \
    X(cuMemsetD16Async, 7000, PT, cuMemsetD16Async_ptsz, PFN_cuMemsetD16Async_v7000_ptsz) \
    X(cuMemsetD2D8, 3020, 0, cuMemsetD2D8_v2, PFN_cuMemsetD2D8_v3020) \
    X(cuMemsetD2D8, 7000, PT, cuMemsetD2D8_v2_ptds, PFN_cuMemsetD2D8_v7000_ptds) \
    X(cuMemsetD2D16, 3020, 0, cuMemsetD2D16_v2, PFN_cuMemsetD2D16_v3020) \
    X(cuMemsetD2D16, 7000, PT, cuMemsetD2D16_v2_ptds, PFN_cuMemsetD2D16_v7000_ptds) \
    X(cuMemsetD2D32, 3020, 0, cuMemsetD2D32_v2, PFN_cuMemsetD2D32_v3020) \
    X(cuMemsetD2D32, 7000, PT, cuMemsetD2D32_v2_ptds, PFN_cuMemsetD2D32_v7000_ptds) \
    X(cuMemsetD2D8Async, 3020, 0, cuMemsetD2D8Async, PFN_cuMemsetD2D8Async_v3020) \
    X(cuMemsetD2D8Async, 7000, PT, cuMemsetD2D8Async_ptsz, PFN_cuMemsetD2D8Async_v7000_ptsz) \
    X(cuMemsetD2D16Async, 3020, 0, cuMemsetD2D16Async, PFN_cuMemsetD2D16Async_v3020) \
    X(cuMemsetD2D16Async, 7000, PT, cuMemsetD2D16Async_ptsz, PFN_cuMemsetD2D16Async_v7000_ptsz) \
    X(cuMemsetD2D32Async, 3020, 0, cuMemsetD2D32Async, PFN_cuMemsetD2D32Async_v3020) \
    X(cuMemsetD2D32Async, 7000, PT, cuMemsetD2D32Async_ptsz, PFN_cuMemsetD2D32Async_v7000_ptsz) \
    X(cuPointerGetAttribute, 4000, 0, cuPointerGetAttribute, PFN_cuPointerGetAttribute_v4000) \
    X(cuPointerGetAttributes, 7000, 0, cuPointerGetAttributes, PFN_cuPointerGetAttributes_v7000) \
    X(cuMemAllocHost, 2000, 0, cuMemAllocHost, PFN_cuMemAllocHost_v2000)                   \
    X(cuMemAllocHost, 3020, 0, cuMemAllocHost_v2, PFN_cuMemAllocHost_v3020)                \
    X(cuMemFreeHost, 2000, 0, cuMemFreeHost, PFN_cuMemFreeHost_v2000)                      \
    X(cuMemHostAlloc, 2020, 0, cuMemHostAlloc, PFN_cuMemHostAlloc_v2020)                   \
    X(cuMemHostGetDevicePointer, 2020, 0, cuMemHostGetDevicePointer, PFN_cuMemHostGetDevicePointer_v2020) \
    X(cuMemHostGetDevicePointer, 3020, 0, cuMemHostGetDevicePointer_v2, PFN_cuMemHostGetDevicePointer_v3020) \
    X(cuMemHostGetFlags, 2030, 0, cuMemHostGetFlags, PFN_cuMemHostGetFlags_v2030)          \
    X(cuMemHostRegister, 4000, 0, cuMemHostRegister, PFN_cuMemHostRegister_v4000)          \
    X(cuMemHostRegister, 6050, 0, cuMemHostRegister_v2, PFN_cuMemHostRegister_v6050)       \
    X(cuMemHostUnregister, 4000, 0, cuMemHostUnregister, PFN_cuMemHostUnregister_v4000)    \
    X(cuStreamBeginCapture, 10000, 0, cuStreamBeginCapture, PFN_cuStreamBeginCapture_v10000) \
    X(cuStreamBeginCapture, 10000, PT, cuStreamBeginCapture_ptsz, PFN_cuStreamBeginCapture_v10000_ptsz) \
    X(cuStreamBeginCapture, 10010, 0, cuStreamBeginCapture_v2, PFN_cuStreamBeginCapture_v10010) \
    X(cuStreamBeginCapture, 10010, PT, cuStreamBeginCapture_v2_ptsz, PFN_cuStreamBeginCapture_v10010_ptsz) \
    X(cuStreamEndCapture, 10000, 0, cuStreamEndCapture, PFN_cuStreamEndCapture_v10000)       \
    X(cuStreamEndCapture, 10000, PT, cuStreamEndCapture_ptsz, PFN_cuStreamEndCapture_v10000_ptsz) \
    X(cuStreamIsCapturing, 10000, 0, cuStreamIsCapturing, PFN_cuStreamIsCapturing_v10000)    \
    X(cuStreamIsCapturing, 10000, PT, cuStreamIsCapturing_ptsz, PFN_cuStreamIsCapturing_v10000_ptsz) \
    X(cuThreadExchangeStreamCaptureMode, 10010, 0, cuThreadExchangeStreamCaptureMode, PFN_cuThreadExchangeStreamCaptureMode_v10010) \
    X(cuGraphInstantiate, 11000, 0, cuGraphInstantiate_v2, PFN_cuGraphInstantiate_v11000)    \
    X(cuGraphInstantiate, 12000, 0, cuGraphInstantiateWithFlags, PFN_cuGraphInstantiateWithFlags_v11040) \
    X(cuGraphInstantiateWithFlags, 11040, 0, cuGraphInstantiateWithFlags, PFN_cuGraphInstantiateWithFlags_v11040) \
    X(cuGraphLaunch, 10000, 0, cuGraphLaunch, PFN_cuGraphLaunch_v10000)                      \
    X(cuGraphLaunch, 10000, PT, cuGraphLaunch_ptsz, PFN_cuGraphLaunch_v10000_ptsz)           \
    X(cuGraphExecDestroy, 10000, 0, cuGraphExecDestroy, PFN_cuGraphExecDestroy_v10000)       \
    X(cuGraphDestroy, 10000, 0, cuGraphDestroy, PFN_cuGraphDestroy_v10000)                   \
    X(cuGraphGetNodes, 10000, 0, cuGraphGetNodes, PFN_cuGraphGetNodes_v10000)                \
    X(cuLaunchHostFunc, 10000, 0, cuLaunchHostFunc, PFN_cuLaunchHostFunc_v10000)             \
    X(cuLaunchHostFunc, 10000, PT, cuLaunchHostFunc_ptsz, PFN_cuLaunchHostFunc_v10000_ptsz)  \
    X(cuModuleLoadData, 2000, 0, cuModuleLoadData, PFN_cuModuleLoadData_v2000)             \
    X(cuModuleLoadDataEx, 2010, 0, cuModuleLoadDataEx, PFN_cuModuleLoadDataEx_v2010)       \
    X(cuModuleUnload, 2000, 0, cuModuleUnload, PFN_cuModuleUnload_v2000)                   \
    X(cuModuleGetFunction, 2000, 0, cuModuleGetFunction, PFN_cuModuleGetFunction_v2000)    \
    X(cuModuleGetGlobal, 2000, 0, cuModuleGetGlobal, PFN_cuModuleGetGlobal_v2000)          \
    X(cuModuleGetGlobal, 3020, 0, cuModuleGetGlobal_v2, PFN_cuModuleGetGlobal_v3020)       \
    X(cuMemAdvise, 8000, 0, cuMemAdvise, PFN_cuMemAdvise_v8000)                             \
    X(cuMemAdvise, 12020, 0, cuMemAdvise_v2, PFN_cuMemAdvise_v12020)                        \
    X(cuMemPrefetchAsync, 8000, 0, cuMemPrefetchAsync, PFN_cuMemPrefetchAsync_v8000)        \
    X(cuMemPrefetchAsync, 8000, PT, cuMemPrefetchAsync_ptsz, PFN_cuMemPrefetchAsync_v8000_ptsz) \
    X(cuMemPrefetchAsync, 12020, 0, cuMemPrefetchAsync_v2, PFN_cuMemPrefetchAsync_v12020)   \
    X(cuMemPrefetchAsync, 12020, PT, cuMemPrefetchAsync_v2_ptsz, PFN_cuMemPrefetchAsync_v12020_ptsz) \
    X(cuStreamCreate, 2000, 0, cuStreamCreate, PFN_cuStreamCreate_v2000)                    \
    X(cuStreamCreateWithPriority, 5050, 0, cuStreamCreateWithPriority, PFN_cuStreamCreateWithPriority_v5050) \
    X(cuStreamDestroy, 2000, 0, cuStreamDestroy, PFN_cuStreamDestroy_v2000)                 \
    X(cuStreamDestroy, 4000, 0, cuStreamDestroy_v2, PFN_cuStreamDestroy_v4000)              \
    X(cuStreamSynchronize, 2000, 0, cuStreamSynchronize, PFN_cuStreamSynchronize_v2000)     \
    X(cuStreamSynchronize, 7000, PT, cuStreamSynchronize_ptsz, PFN_cuStreamSynchronize_v7000_ptsz) \
    X(cuStreamQuery, 2000, 0, cuStreamQuery, PFN_cuStreamQuery_v2000)                       \
    X(cuStreamQuery, 7000, PT, cuStreamQuery_ptsz, PFN_cuStreamQuery_v7000_ptsz)            \
    X(cuStreamWaitEvent, 3020, 0, cuStreamWaitEvent, PFN_cuStreamWaitEvent_v3020)           \
    X(cuStreamWaitEvent, 7000, PT, cuStreamWaitEvent_ptsz, PFN_cuStreamWaitEvent_v7000_ptsz) \
    X(cuStreamGetFlags, 5050, 0, cuStreamGetFlags, PFN_cuStreamGetFlags_v5050)              \
    X(cuStreamGetFlags, 7000, PT, cuStreamGetFlags_ptsz, PFN_cuStreamGetFlags_v7000_ptsz)   \
    X(cuEventCreate, 2000, 0, cuEventCreate, PFN_cuEventCreate_v2000)                       \
    X(cuEventRecord, 2000, 0, cuEventRecord, PFN_cuEventRecord_v2000)                       \
    X(cuEventRecord, 7000, PT, cuEventRecord_ptsz, PFN_cuEventRecord_v7000_ptsz)            \
    X(cuEventSynchronize, 2000, 0, cuEventSynchronize, PFN_cuEventSynchronize_v2000)        \
    X(cuEventQuery, 2000, 0, cuEventQuery, PFN_cuEventQuery_v2000)                          \
    X(cuEventElapsedTime, 2000, 0, cuEventElapsedTime, PFN_cuEventElapsedTime_v2000)        \
    X(cuEventElapsedTime, 12080, 0, cuEventElapsedTime_v2, PFN_cuEventElapsedTime_v12080)   \
    X(cuEventDestroy, 2000, 0, cuEventDestroy, PFN_cuEventDestroy_v2000)                    \
    X(cuEventDestroy, 4000, 0, cuEventDestroy_v2, PFN_cuEventDestroy_v4000)                 \
    X(cuGetErrorName, 6000, 0, cuGetErrorName, PFN_cuGetErrorName_v6000)                    \
    X(cuGetErrorString, 6000, 0, cuGetErrorString, PFN_cuGetErrorString_v6000)              \
    X(cuGetProcAddress, 11030, 0, cuGetProcAddress, PFN_cuGetProcAddress_v11030)            \
    X(cuGetProcAddress, 12000, 0, cuGetProcAddress_v2, PFN_cuGetProcAddress_v12000)         \
    X(cuLaunchKernel, 4000, 0, cuLaunchKernel, PFN_cuLaunchKernel_v4000)                    \
    X(cuLaunchKernel, 7000, PT, cuLaunchKernel_ptsz, PFN_cuLaunchKernel_v7000_ptsz)         \
    X(cuLaunchKernelEx, 11060, 0, cuLaunchKernelEx, PFN_cuLaunchKernelEx_v11060)            \
    X(cuLaunchKernelEx, 11060, PT, cuLaunchKernelEx_ptsz, PFN_cuLaunchKernelEx_v11060_ptsz) \
    X(cuFuncGetParamInfo, 12040, 0, cuFuncGetParamInfo, PFN_cuFuncGetParamInfo_v12040)      \
    X(cuFuncGetName, 12030, 0, cuFuncGetName, PFN_cuFuncGetName_v12030)                    \
    X(cuFuncLoad, 12040, 0, cuFuncLoad, PFN_cuFuncLoad_v12040)                              \
    X(cuKernelGetParamInfo, 12040, 0, cuKernelGetParamInfo, PFN_cuKernelGetParamInfo_v12040) \
    X(cuKernelGetFunction, 12000, 0, cuKernelGetFunction, PFN_cuKernelGetFunction_v12000)

#define CHECK_TYPE(name, ver, pt, fn, pfn) \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&fn), pfn), #fn " does not match " #pfn);
SIM_ENTRY_POINTS(CHECK_TYPE)

struct entry_point {
    const char *name;
    int version;
    int per_thread;
    void *fn;
};

#define ROW(name, ver, pt, fn, pfn) { #name, ver, pt, (void *)fn },
static const struct entry_point entry_points[] = { SIM_ENTRY_POINTS(ROW) };

static const char *const known_names[] = {
#include "procaddr_known.inc"
};

/* What every known-but-unimplemented entry point resolves to.  Callers
 * pass it their real arguments; on x86-64 SysV a function that ignores its
 * arguments is safe to call with any. */
static CUresult CUDAAPI not_supported(void)
{
    return CUDA_ERROR_NOT_SUPPORTED;
}

static bool is_known(const char *symbol)
{
    size_t lo = 0, hi = sizeof(known_names) / sizeof(known_names[0]);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(known_names[mid], symbol);
        if (c == 0)
            return true;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

static CUresult lookup(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                       CUdriverProcAddressQueryResult *status)
{
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
        return CUDA_ERROR_INVALID_VALUE;
    if (cudaVersion > CUDA_VERSION)
        return CUDA_ERROR_INVALID_VALUE;
    bool want_pt = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    const struct entry_point *best = NULL, *best_pt = NULL;
    bool name_seen = false;
    for (size_t i = 0; i < sizeof(entry_points) / sizeof(entry_points[0]); i++) {
        const struct entry_point *e = &entry_points[i];
        if (strcmp(e->name, symbol) != 0)
            continue;
        name_seen = true;
        if (e->version > cudaVersion)
            continue;
        const struct entry_point **slot = e->per_thread ? &best_pt : &best;
        if (!*slot || e->version > (*slot)->version)
            *slot = e;
    }
    if (want_pt && best_pt)
        best = best_pt;
    CUdriverProcAddressQueryResult st;
    if (best) {
        *pfn = best->fn;
        st = CU_GET_PROC_ADDRESS_SUCCESS;
    } else if (name_seen) {
        *pfn = NULL;
        st = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    } else if (*symbol && is_known(symbol)) {
        *pfn = (void *)not_supported;
        st = CU_GET_PROC_ADDRESS_SUCCESS;
    } else {
        *pfn = NULL;
        st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    }
    if (status)
        *status = st;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                     CUdriverProcAddressQueryResult *symbolStatus)
{
    return lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}

CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return lookup(symbol, pfn, cudaVersion, flags, NULL);
}

/* Private tables of the real driver: none here. */
CUresult CUDAAPI cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
    (void)pExportTableId;
    if (ppExportTable)
        *ppExportTable = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}
