/*
 * api_context.c — cuInit, the driver version, devices and the primary
 * contexts.  Only primary contexts exist; the calling thread's current
 * context lives in a thread-local pointer.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sim.h"

struct sim_global sim;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* The calling thread's context stack; the current context is its top. */
#define CTX_STACK_DEPTH 16
static __thread struct sim_context *ctx_stack[CTX_STACK_DEPTH];
static __thread int ctx_depth;
#define current_ctx (ctx_depth ? ctx_stack[ctx_depth - 1] : NULL)

static void init_once_body(void)
{
    sim_vmm_note_init_layout();
    int rc = sim_devices_start();
    sim.init_result = rc == 0 ? CUDA_SUCCESS : rc == -ENOMEM ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_NO_DEVICE;
    __atomic_store_n(&sim.initialized, true, __ATOMIC_RELEASE);
}

CUresult CUDAAPI cuInit(unsigned int Flags)
{
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_once(&init_once, init_once_body);
    return (CUresult)sim.init_result;
}

CUresult sim_check_init(void)
{
    if (!__atomic_load_n(&sim.initialized, __ATOMIC_ACQUIRE))
        return CUDA_ERROR_NOT_INITIALIZED;
    return (CUresult)sim.init_result;
}

CUresult sim_errno_to_cu(int err)
{
    switch (err) {
    case 0: return CUDA_SUCCESS;
    case -ENOMEM: return CUDA_ERROR_OUT_OF_MEMORY;
    case -ENOSPC: return CUDA_ERROR_OUT_OF_MEMORY;
    case -EINVAL: return CUDA_ERROR_INVALID_VALUE;
    case -EPIPE: return CUDA_ERROR_LAUNCH_FAILED;
    case -EIO: return CUDA_ERROR_LAUNCH_FAILED;
    default: return CUDA_ERROR_UNKNOWN;
    }
}

CUresult sim_current_device(struct sim_device **d)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!current_ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    *d = &sim.dev[current_ctx->ordinal];
    if ((*d)->sh->sticky_error)
        return (CUresult)(*d)->sh->sticky_error;
    return CUDA_SUCCESS;
}

CUresult sim_check_device(CUdevice dev)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    return dev >= 0 && dev < sim.ndevices ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult CUDAAPI cuDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = CUDA_VERSION;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= sim.ndevices)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int *count)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = sim.ndevices;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CUresult r = sim_check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "simgpu discrete GPU %d (simulated)", dev);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CUresult r = sim_check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = sim.dev[dev].mem_bytes;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    CUresult r = sim_check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    memset(uuid, 0, sizeof(*uuid));
    memcpy(uuid->bytes, "simgpu-dev", 10);
    uuid->bytes[15] = (char)dev;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    return cuDeviceGetUuid_v2(uuid, dev);
}

/* One table of the attributes a discrete GPU of this kind reports (an
 * H100-like shape; compute resources are what the simulator has). */
static const struct { CUdevice_attribute attr; int value; } attributes[] = {
    { CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024 },
    { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 1024 },
    { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, 1024 },
    { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64 },
    { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 2147483647 },
    { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 65535 },
    { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, 65535 },
    { CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 49152 },
    { CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, 65536 },
    { CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32 },
    { CU_DEVICE_ATTRIBUTE_MAX_PITCH, 2147483647 },
    { CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, 65536 },
    { CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 1755000 },
    { CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, 512 },
    { CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0 },    /* filled: workers */
    { CU_DEVICE_ATTRIBUTE_INTEGRATED, 0 },
    { CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 1 },
    { CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, CU_COMPUTEMODE_DEFAULT },
    { CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, 1 },
    { CU_DEVICE_ATTRIBUTE_ECC_ENABLED, 0 },
    { CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 0 },              /* filled: ordinal + 1 */
    { CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, 0 },
    { CU_DEVICE_ATTRIBUTE_TCC_DRIVER, 0 },
    { CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, 2619000 },
    { CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, 5120 },
    { CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 52428800 },
    { CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 2048 },
    { CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, 2 },
    { CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1 },
    { CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9 },
    { CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0 },
    { CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 1 },
    { CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 1 },
    { CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, 0 },
    { CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, 1 },
    { CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, 1 },
    { CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED, 1 },
    { CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 49152 },
    { CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0 },
    { CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1 },
};

CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    CUresult r = sim_check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pi || (int)attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    *pi = 0;
    for (size_t i = 0; i < sizeof(attributes) / sizeof(attributes[0]); i++) {
        if (attributes[i].attr != attrib)
            continue;
        *pi = attributes[i].value;
        if (attrib == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            *pi = (int)sim.env.workers;
        else if (attrib == CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)
            *pi = dev + 1;
        else if (attrib == CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS)
            *pi = sim.env.hmm;
    }
    return CUDA_SUCCESS;
}

/* ---- primary contexts ---- */

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CUresult r = sim_check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    __atomic_fetch_add(&sim.dev[dev].ctx.refcount, 1, __ATOMIC_RELAXED);
    *pctx = (CUcontext)&sim.dev[dev].ctx;
    return CUDA_SUCCESS;
}

/* The device (memory, process) lives until the process exits, so releasing
 * the last reference only drops the count. */
CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CUresult r = sim_check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    int *rc = &sim.dev[dev].ctx.refcount;
    int old = __atomic_load_n(rc, __ATOMIC_RELAXED);
    while (old > 0 && !__atomic_compare_exchange_n(rc, &old, old - 1, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
    return old > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev)
{
    return cuDevicePrimaryCtxRelease_v2(dev);
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    CUresult r = sim_check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (flags & ~(unsigned)(CU_CTX_SCHED_MASK | CU_CTX_LMEM_RESIZE_TO_MAX | CU_CTX_MAP_HOST))
        return CUDA_ERROR_INVALID_VALUE;
    sim.dev[dev].ctx.flags = flags;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
    return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

/* Resources live with the process: a reset drains the device. */
CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    CUresult r = sim_check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    return sim_errno_to_cu(sim_device_sync(&sim.dev[dev]));
}

CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev)
{
    return cuDevicePrimaryCtxReset_v2(dev);
}

CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    CUresult r = sim_check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    *flags = sim.dev[dev].ctx.flags;
    *active = __atomic_load_n(&sim.dev[dev].ctx.refcount, __ATOMIC_RELAXED) > 0;
    return CUDA_SUCCESS;
}

static struct sim_context *ctx_from_handle(CUcontext c)
{
    struct sim_context *x = (struct sim_context *)c;
    for (int i = 0; i < sim.ndevices; i++)
        if (x == &sim.dev[i].ctx)
            return x;
    return NULL;
}

/* Replaces the top of the stack; NULL pops it (cuda.h). */
CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (ctx == NULL) {
        if (ctx_depth)
            ctx_depth--;
        return CUDA_SUCCESS;
    }
    struct sim_context *x = ctx_from_handle(ctx);
    if (!x)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth == 0)
        ctx_depth = 1;
    ctx_stack[ctx_depth - 1] = x;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_context *x = ctx_from_handle(ctx);
    if (!x)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth == CTX_STACK_DEPTH)
        return CUDA_ERROR_OUT_OF_MEMORY;
    ctx_stack[ctx_depth++] = x;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext *pctx)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (ctx_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    ctx_depth--;
    if (pctx)
        *pctx = (CUcontext)ctx_stack[ctx_depth];
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = (CUcontext)current_ctx;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice *device)
{
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!current_ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    *device = current_ctx->ordinal;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    if (ctx == NULL)
        return cuCtxGetDevice(device);
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_context *x = ctx_from_handle(ctx);
    if (!x)
        return CUDA_ERROR_INVALID_CONTEXT;
    *device = x->ordinal;
    return CUDA_SUCCESS;
}

static CUresult sync_device(struct sim_device *d)
{
    int rc = sim_device_sync(d);
    if (d->sh->sticky_error)
        return (CUresult)d->sh->sticky_error;
    return sim_errno_to_cu(rc);
}

CUresult CUDAAPI cuCtxSynchronize(void)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!current_ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    if ((r = sim_capture_unsafe_call()) != CUDA_SUCCESS)
        return r;
    return sync_device(&sim.dev[current_ctx->ordinal]);
}

CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx)
{
    if (ctx == NULL)
        return cuCtxSynchronize();
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_context *x = ctx_from_handle(ctx);
    if (!x)
        return CUDA_ERROR_INVALID_CONTEXT;
    return sync_device(&sim.dev[x->ordinal]);
}
