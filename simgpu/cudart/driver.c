/*
 * driver.c — reaching the driver exactly as static cudart 13.0 does
 * (research/cuda_interpose.md §1.2):
 *   1. dlopen("libcuda.so.1", RTLD_NOW)
 *   2. dlsym(handle, "cuGetProcAddress_v2") — the only driver dlsym
 *   3. through it: ("", 0, 0), ("cuInit", 2000, 0),
 *      ("cuGetProcAddress", 11030, 0), ("cuGetProcAddress", 12000, 0)
 *   4. every other entry point through the pointer returned for
 *      "cuGetProcAddress"@12000, by base name + cudaVersion + flags, with
 *      flags 0 for legacy-stream entry points and 2 for per-thread ones.
 * So an interposer on dlsym and cuGetProcAddress sees what it would see
 * in front of the real runtime.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <unistd.h>

#include "driver.h"

struct cudart_driver drv;
void *(*cudart_kernel_handle)(const void *stub);

#define FLAGS_LEGACY 0
#define FLAGS_PTDS CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM

static const struct {
    const char *name;
    int version;
    unsigned flags;
    size_t offset;
} entry_points[] = {
#define E(field, name, ver, flags) { name, ver, flags, offsetof(struct cudart_driver, field) }
    E(Init, "cuInit", 2000, FLAGS_LEGACY),
    E(DriverGetVersion, "cuDriverGetVersion", 2020, FLAGS_LEGACY),
    E(DeviceGet, "cuDeviceGet", 2000, FLAGS_LEGACY),
    E(DeviceGetCount, "cuDeviceGetCount", 2000, FLAGS_LEGACY),
    E(DeviceGetAttribute, "cuDeviceGetAttribute", 2000, FLAGS_LEGACY),
    E(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000, FLAGS_LEGACY),
    E(CtxSetCurrent, "cuCtxSetCurrent", 4000, FLAGS_LEGACY),
    E(CtxGetCurrent, "cuCtxGetCurrent", 4000, FLAGS_LEGACY),
    E(CtxSynchronize, "cuCtxSynchronize", 13000, FLAGS_LEGACY),
    E(MemAlloc, "cuMemAlloc", 3020, FLAGS_LEGACY),
    E(MemAllocManaged, "cuMemAllocManaged", 6000, FLAGS_LEGACY),
    E(MemFree, "cuMemFree", 3020, FLAGS_LEGACY),
    E(MemAllocPitch, "cuMemAllocPitch", 3020, FLAGS_LEGACY),
    E(Array3DCreate, "cuArray3DCreate", 3020, FLAGS_LEGACY),
    E(ArrayDestroy, "cuArrayDestroy", 2000, FLAGS_LEGACY),
    E(MipmappedArrayCreate, "cuMipmappedArrayCreate", 5000, FLAGS_LEGACY),
    E(MipmappedArrayGetLevel, "cuMipmappedArrayGetLevel", 5000, FLAGS_LEGACY),
    E(MipmappedArrayDestroy, "cuMipmappedArrayDestroy", 5000, FLAGS_LEGACY),
    E(MemAllocAsync, "cuMemAllocAsync", 11020, FLAGS_LEGACY),
    E(MemFreeAsync, "cuMemFreeAsync", 11020, FLAGS_LEGACY),
    E(MemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020, FLAGS_LEGACY),
    E(MemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", 11020, FLAGS_PTDS),
    E(MemPoolCreate, "cuMemPoolCreate", 11020, FLAGS_LEGACY),
    E(MemPoolDestroy, "cuMemPoolDestroy", 11020, FLAGS_LEGACY),
    E(MemPoolSetAttribute, "cuMemPoolSetAttribute", 11020, FLAGS_LEGACY),
    E(MemPoolGetAttribute, "cuMemPoolGetAttribute", 11020, FLAGS_LEGACY),
    E(MemPoolTrimTo, "cuMemPoolTrimTo", 11020, FLAGS_LEGACY),
    E(DeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool", 11020, FLAGS_LEGACY),
    E(DeviceGetMemPool, "cuDeviceGetMemPool", 11020, FLAGS_LEGACY),
    E(DeviceSetMemPool, "cuDeviceSetMemPool", 11020, FLAGS_LEGACY),
    E(MemGetInfo, "cuMemGetInfo", 3020, FLAGS_LEGACY),
    E(MemcpyHtoD, "cuMemcpyHtoD", 3020, FLAGS_LEGACY),
    E(MemcpyDtoH, "cuMemcpyDtoH", 3020, FLAGS_LEGACY),
    E(MemcpyDtoD, "cuMemcpyDtoD", 3020, FLAGS_LEGACY),
    E(Memcpy, "cuMemcpy", 4000, FLAGS_LEGACY),
    E(MemcpyAsync, "cuMemcpyAsync", 4000, FLAGS_LEGACY),
    E(MemsetD8, "cuMemsetD8", 3020, FLAGS_LEGACY),
    E(MemsetD8Async, "cuMemsetD8Async", 3020, FLAGS_LEGACY),
    E(MemcpyPeer, "cuMemcpyPeer", 4000, FLAGS_LEGACY),
    E(MemcpyPeerAsync, "cuMemcpyPeerAsync", 4000, FLAGS_LEGACY),
    E(MemsetD2D8, "cuMemsetD2D8", 3020, FLAGS_LEGACY),
    E(MemsetD2D8Async, "cuMemsetD2D8Async", 3020, FLAGS_LEGACY),
    E(StreamCreateWithPriority, "cuStreamCreateWithPriority", 5050, FLAGS_LEGACY),
    E(StreamDestroy, "cuStreamDestroy", 4000, FLAGS_LEGACY),
    E(StreamSynchronize, "cuStreamSynchronize", 2000, FLAGS_LEGACY),
    E(StreamQuery, "cuStreamQuery", 2000, FLAGS_LEGACY),
    E(StreamWaitEvent, "cuStreamWaitEvent", 3020, FLAGS_LEGACY),
    E(EventCreate, "cuEventCreate", 2000, FLAGS_LEGACY),
    E(StreamBeginCapture, "cuStreamBeginCapture", 10010, FLAGS_LEGACY),
    E(StreamEndCapture, "cuStreamEndCapture", 10000, FLAGS_LEGACY),
    E(StreamIsCapturing, "cuStreamIsCapturing", 10000, FLAGS_LEGACY),
    E(ThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode", 10010, FLAGS_LEGACY),
    E(GraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", 11040, FLAGS_LEGACY),
    E(GraphLaunch, "cuGraphLaunch", 10000, FLAGS_LEGACY),
    E(GraphExecDestroy, "cuGraphExecDestroy", 10000, FLAGS_LEGACY),
    E(GraphDestroy, "cuGraphDestroy", 10000, FLAGS_LEGACY),
    E(LaunchHostFunc, "cuLaunchHostFunc", 10000, FLAGS_LEGACY),
    E(EventRecord, "cuEventRecord", 2000, FLAGS_LEGACY),
    E(EventSynchronize, "cuEventSynchronize", 2000, FLAGS_LEGACY),
    E(EventQuery, "cuEventQuery", 2000, FLAGS_LEGACY),
    E(EventElapsedTime, "cuEventElapsedTime", 12080, FLAGS_LEGACY),
    E(EventDestroy, "cuEventDestroy", 4000, FLAGS_LEGACY),
    E(LaunchKernel, "cuLaunchKernel", 4000, FLAGS_LEGACY),
    E(FuncGetParamInfo, "cuFuncGetParamInfo", 12040, FLAGS_LEGACY),
    E(MemPrefetchAsync, "cuMemPrefetchAsync", 12020, FLAGS_LEGACY),
    E(MemAdvise, "cuMemAdvise", 12020, FLAGS_LEGACY),
    E(MemHostAlloc, "cuMemHostAlloc", 2020, FLAGS_LEGACY),
    E(MemFreeHost, "cuMemFreeHost", 2000, FLAGS_LEGACY),
    E(MemHostRegister, "cuMemHostRegister", 6050, FLAGS_LEGACY),
    E(MemHostUnregister, "cuMemHostUnregister", 4000, FLAGS_LEGACY),
    E(MemHostGetDevicePointer, "cuMemHostGetDevicePointer", 3020, FLAGS_LEGACY),
    E(MemHostGetFlags, "cuMemHostGetFlags", 2030, FLAGS_LEGACY),
    E(MemcpyHtoD_ptds, "cuMemcpyHtoD", 7000, FLAGS_PTDS),
    E(MemcpyDtoH_ptds, "cuMemcpyDtoH", 7000, FLAGS_PTDS),
    E(MemcpyDtoD_ptds, "cuMemcpyDtoD", 7000, FLAGS_PTDS),
    E(Memcpy_ptds, "cuMemcpy", 7000, FLAGS_PTDS),
    E(MemcpyAsync_ptsz, "cuMemcpyAsync", 7000, FLAGS_PTDS),
    E(Memcpy2DUnaligned, "cuMemcpy2DUnaligned", 3020, FLAGS_LEGACY),
    E(Memcpy2DUnaligned_ptds, "cuMemcpy2DUnaligned", 7000, FLAGS_PTDS),
    E(Memcpy2DAsync, "cuMemcpy2DAsync", 3020, FLAGS_LEGACY),
    E(Memcpy2DAsync_ptsz, "cuMemcpy2DAsync", 7000, FLAGS_PTDS),
    E(MemsetD8_ptds, "cuMemsetD8", 7000, FLAGS_PTDS),
    E(MemsetD8Async_ptsz, "cuMemsetD8Async", 7000, FLAGS_PTDS),
    E(StreamSynchronize_ptsz, "cuStreamSynchronize", 7000, FLAGS_PTDS),
    E(StreamQuery_ptsz, "cuStreamQuery", 7000, FLAGS_PTDS),
    E(StreamWaitEvent_ptsz, "cuStreamWaitEvent", 7000, FLAGS_PTDS),
    E(EventRecord_ptsz, "cuEventRecord", 7000, FLAGS_PTDS),
    E(LaunchKernel_ptsz, "cuLaunchKernel", 7000, FLAGS_PTDS),
    E(MemPrefetchAsync_ptsz, "cuMemPrefetchAsync", 12020, FLAGS_PTDS),
#undef E
};

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static cudaError_t load_result;

static void say(const char *msg)
{
    char buf[256];
    int n = snprintf(buf, sizeof(buf), "simgpu cudart[%d]: %s\n", (int)getpid(), msg);
    if (n > 0) {
        ssize_t w = write(STDERR_FILENO, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
        (void)w;
    }
}

static void load(void)
{
    load_result = cudaErrorInsufficientDriver;
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) {
        say("cannot load libcuda.so.1");
        return;
    }
    PFN_cuGetProcAddress_v12000 gpa0 = (PFN_cuGetProcAddress_v12000)dlsym(h, "cuGetProcAddress_v2");
    if (!gpa0) {
        say("libcuda.so.1 has no cuGetProcAddress_v2");
        return;
    }
    cudart_kernel_handle = (void *(*)(const void *))dlsym(h, "simgpu_kernel_handle");
    void *p = NULL;
    CUdriverProcAddressQueryResult st;
    gpa0("", &p, 0, 0, &st);
    if (gpa0("cuInit", &p, 2000, 0, &st) != CUDA_SUCCESS || !p)
        return;
    PFN_cuGetProcAddress_v11030 gpa_v1 = NULL;
    gpa0("cuGetProcAddress", (void **)&gpa_v1, 11030, 0, &st);
    PFN_cuGetProcAddress_v12000 gpa = NULL;
    if (gpa0("cuGetProcAddress", (void **)&gpa, 12000, 0, &st) != CUDA_SUCCESS || !gpa) {
        say("the driver does not resolve cuGetProcAddress@12000");
        return;
    }
    for (size_t i = 0; i < sizeof(entry_points) / sizeof(entry_points[0]); i++) {
        void **slot = (void **)((char *)&drv + entry_points[i].offset);
        *slot = NULL;
        if (gpa(entry_points[i].name, slot, entry_points[i].version, entry_points[i].flags, &st) != CUDA_SUCCESS ||
            st != CU_GET_PROC_ADDRESS_SUCCESS || !*slot) {
            char msg[128];
            snprintf(msg, sizeof(msg), "driver lacks %s@%d flags %u", entry_points[i].name,
                     entry_points[i].version, entry_points[i].flags);
            say(msg);
            return;
        }
    }
    CUresult r = drv.Init(0);
    load_result = r == CUDA_SUCCESS ? cudaSuccess : r == CUDA_ERROR_NO_DEVICE ? cudaErrorNoDevice
                                                                              : cudaErrorInitializationError;
}

cudaError_t cudart_driver_load(void)
{
    pthread_once(&load_once, load);
    return load_result;
}
