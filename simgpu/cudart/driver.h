/*
 * driver.h — the driver entry points libcudart uses, resolved the way
 * static cudart 13 resolves them (driver.c).
 */
#ifndef SIMGPU_CUDART_DRIVER_H
#define SIMGPU_CUDART_DRIVER_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

struct cudart_driver {
    PFN_cuInit_v2000 Init;
    PFN_cuDriverGetVersion_v2020 DriverGetVersion;
    PFN_cuDeviceGet_v2000 DeviceGet;
    PFN_cuDeviceGetCount_v2000 DeviceGetCount;
    PFN_cuDeviceGetAttribute_v2000 DeviceGetAttribute;
    PFN_cuDevicePrimaryCtxRetain_v7000 DevicePrimaryCtxRetain;
    PFN_cuCtxSetCurrent_v4000 CtxSetCurrent;
    PFN_cuCtxGetCurrent_v4000 CtxGetCurrent;
    PFN_cuCtxSynchronize_v13000 CtxSynchronize;
    PFN_cuMemAlloc_v3020 MemAlloc;
    PFN_cuMemAllocManaged_v6000 MemAllocManaged;
    PFN_cuMemFree_v3020 MemFree;
    PFN_cuMemAllocPitch_v3020 MemAllocPitch;
    PFN_cuArray3DCreate_v3020 Array3DCreate;
    PFN_cuArrayDestroy_v2000 ArrayDestroy;
    PFN_cuMipmappedArrayCreate_v5000 MipmappedArrayCreate;
    PFN_cuMipmappedArrayGetLevel_v5000 MipmappedArrayGetLevel;
    PFN_cuMipmappedArrayDestroy_v5000 MipmappedArrayDestroy;
    PFN_cuMemAllocAsync_v11020 MemAllocAsync;
    PFN_cuMemFreeAsync_v11020 MemFreeAsync;
    PFN_cuMemAllocFromPoolAsync_v11020 MemAllocFromPoolAsync;
    PFN_cuMemAllocFromPoolAsync_v11020_ptsz MemAllocFromPoolAsync_ptsz;
    PFN_cuMemPoolCreate_v11020 MemPoolCreate;
    PFN_cuMemPoolDestroy_v11020 MemPoolDestroy;
    PFN_cuMemPoolSetAttribute_v11020 MemPoolSetAttribute;
    PFN_cuMemPoolGetAttribute_v11020 MemPoolGetAttribute;
    PFN_cuMemPoolTrimTo_v11020 MemPoolTrimTo;
    PFN_cuDeviceGetDefaultMemPool_v11020 DeviceGetDefaultMemPool;
    PFN_cuDeviceGetMemPool_v11020 DeviceGetMemPool;
    PFN_cuDeviceSetMemPool_v11020 DeviceSetMemPool;
    PFN_cuMemGetInfo_v3020 MemGetInfo;
    PFN_cuMemcpyHtoD_v3020 MemcpyHtoD;
    PFN_cuMemcpyDtoH_v3020 MemcpyDtoH;
    PFN_cuMemcpyDtoD_v3020 MemcpyDtoD;
    PFN_cuMemcpy_v4000 Memcpy;
    PFN_cuMemcpyAsync_v4000 MemcpyAsync;
    PFN_cuMemsetD8_v3020 MemsetD8;
    PFN_cuMemsetD8Async_v3020 MemsetD8Async;
    PFN_cuMemcpyPeer_v4000 MemcpyPeer;
    PFN_cuMemcpyPeerAsync_v4000 MemcpyPeerAsync;
    PFN_cuMemsetD2D8_v3020 MemsetD2D8;
    PFN_cuMemsetD2D8Async_v3020 MemsetD2D8Async;
    PFN_cuStreamCreateWithPriority_v5050 StreamCreateWithPriority;
    PFN_cuStreamDestroy_v4000 StreamDestroy;
    PFN_cuStreamSynchronize_v2000 StreamSynchronize;
    PFN_cuStreamQuery_v2000 StreamQuery;
    PFN_cuStreamWaitEvent_v3020 StreamWaitEvent;
    PFN_cuEventCreate_v2000 EventCreate;
    PFN_cuEventRecord_v2000 EventRecord;
    PFN_cuEventSynchronize_v2000 EventSynchronize;
    PFN_cuEventQuery_v2000 EventQuery;
    PFN_cuEventElapsedTime_v12080 EventElapsedTime;
    PFN_cuEventDestroy_v4000 EventDestroy;
    PFN_cuLaunchKernel_v4000 LaunchKernel;
    PFN_cuFuncGetParamInfo_v12040 FuncGetParamInfo;
    PFN_cuMemPrefetchAsync_v12020 MemPrefetchAsync;
    PFN_cuMemAdvise_v12020 MemAdvise;
    PFN_cuMemHostAlloc_v2020 MemHostAlloc;
    PFN_cuMemFreeHost_v2000 MemFreeHost;
    PFN_cuMemHostRegister_v6050 MemHostRegister;
    PFN_cuMemHostUnregister_v4000 MemHostUnregister;
    PFN_cuMemHostGetDevicePointer_v3020 MemHostGetDevicePointer;
    PFN_cuMemHostGetFlags_v2030 MemHostGetFlags;
    PFN_cuStreamBeginCapture_v10010 StreamBeginCapture;
    PFN_cuStreamEndCapture_v10000 StreamEndCapture;
    PFN_cuStreamIsCapturing_v10000 StreamIsCapturing;
    PFN_cuThreadExchangeStreamCaptureMode_v10010 ThreadExchangeStreamCaptureMode;
    PFN_cuGraphInstantiateWithFlags_v11040 GraphInstantiateWithFlags;
    PFN_cuGraphLaunch_v10000 GraphLaunch;
    PFN_cuGraphExecDestroy_v10000 GraphExecDestroy;
    PFN_cuGraphDestroy_v10000 GraphDestroy;
    PFN_cuLaunchHostFunc_v10000 LaunchHostFunc;
    /* per-thread default stream variants (queried with flags = 2) */
    PFN_cuMemcpyHtoD_v7000_ptds MemcpyHtoD_ptds;
    PFN_cuMemcpyDtoH_v7000_ptds MemcpyDtoH_ptds;
    PFN_cuMemcpyDtoD_v7000_ptds MemcpyDtoD_ptds;
    PFN_cuMemcpy_v7000_ptds Memcpy_ptds;
    PFN_cuMemcpyAsync_v7000_ptsz MemcpyAsync_ptsz;
    PFN_cuMemcpy2DUnaligned_v3020 Memcpy2DUnaligned;
    PFN_cuMemcpy2DUnaligned_v7000_ptds Memcpy2DUnaligned_ptds;
    PFN_cuMemcpy2DAsync_v3020 Memcpy2DAsync;
    PFN_cuMemcpy2DAsync_v7000_ptsz Memcpy2DAsync_ptsz;
    PFN_cuMemsetD8_v7000_ptds MemsetD8_ptds;
    PFN_cuMemsetD8Async_v7000_ptsz MemsetD8Async_ptsz;
    PFN_cuStreamSynchronize_v7000_ptsz StreamSynchronize_ptsz;
    PFN_cuStreamQuery_v7000_ptsz StreamQuery_ptsz;
    PFN_cuStreamWaitEvent_v7000_ptsz StreamWaitEvent_ptsz;
    PFN_cuEventRecord_v7000_ptsz EventRecord_ptsz;
    PFN_cuLaunchKernel_v7000_ptsz LaunchKernel_ptsz;
    PFN_cuMemPrefetchAsync_v12020_ptsz MemPrefetchAsync_ptsz;
};

extern struct cudart_driver drv;

/* The simulator's libcuda names a kernel's CUkernel (simgpu.h); the real
 * cudart gets it from cuLibraryGetKernel. NULL: launch with the stub. */
extern void *(*cudart_kernel_handle)(const void *stub);

/* Load libcuda.so.1, resolve every entry point, cuInit(0).  Once; returns
 * the cudaError_t of that one attempt. */
cudaError_t cudart_driver_load(void);

#endif
