/*
 * api_launch.c — kernel launches and kernel introspection.
 *
 * A CUfunction is the kernel's host address (what cudaLaunchKernel gets as
 * `func`), looked up in the registry.  The launch packs the arguments into
 * one buffer with the registered layout and sends trampoline + dims +
 * buffer to the device process, which runs it in stream order.  The
 * trampoline's code is at the same address there because the device
 * process is a fork of this image.
 */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static CUresult check_dims(const struct simgpu_launch_dims *d, unsigned smem)
{
    for (int i = 0; i < 3; i++)
        if (d->grid[i] == 0 || d->block[i] == 0)
            return CUDA_ERROR_INVALID_VALUE;
    if (d->block[0] > 1024 || d->block[1] > 1024 || d->block[2] > 64 ||
        (uint64_t)d->block[0] * d->block[1] * d->block[2] > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    if (d->grid[0] > 2147483647u || d->grid[1] > 65535 || d->grid[2] > 65535)
        return CUDA_ERROR_INVALID_VALUE;
    if (smem > 49152)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* Fill op->args from kernelParams (one pointer per parameter) or from the
 * `extra` packed buffer; exactly one of the two forms must be given when
 * the kernel has parameters. */
static CUresult pack_args(const struct simgpu_kernel_desc *k, void **kernelParams, void **extra, struct sim_op *op)
{
    op->u.kernel.args_bytes = k->args_bytes;
    memset(op->args, 0, k->args_bytes);
    if (kernelParams && extra)
        return CUDA_ERROR_INVALID_VALUE;
    if (kernelParams) {
        for (unsigned i = 0; i < k->nparams; i++) {
            if (!kernelParams[i])
                return CUDA_ERROR_INVALID_VALUE;
            memcpy(op->args + k->param_offset[i], kernelParams[i], k->param_size[i]);
        }
        return CUDA_SUCCESS;
    }
    if (extra) {
        const void *buf = NULL;
        size_t size = 0;
        bool have_size = false;
        for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
            if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
                buf = extra[i + 1];
            else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
                size = *(const size_t *)extra[i + 1];
                have_size = true;
            } else
                return CUDA_ERROR_INVALID_VALUE;
        }
        if (!buf || !have_size || size < k->args_bytes)
            return CUDA_ERROR_INVALID_VALUE;
        memcpy(op->args, buf, k->args_bytes);
        return CUDA_SUCCESS;
    }
    return k->nparams == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult launch(CUfunction f, const struct simgpu_launch_dims *dims, unsigned smem, CUstream s,
                       void **kernelParams, void **extra, bool ptds)
{
    struct sim_device *d;
    uint32_t slot;
    CUresult r = sim_stream_resolve(s, ptds, &d, &slot);
    if (r != CUDA_SUCCESS)
        return r;
    /* A CUfunction (the host stub) or a CUkernel: launches take both. */
    const struct simgpu_kernel_desc *k = sim_kernel_find((const void *)f);
    if (!k)
        k = sim_kernel_of_handle((const void *)f);
    if (!k)
        return CUDA_ERROR_INVALID_HANDLE;
    if ((r = check_dims(dims, smem)) != CUDA_SUCCESS)
        return r;
    static __thread struct sim_op op;    /* 4 KiB of arguments: not on the stack */
    memset(&op, 0, offsetof(struct sim_op, args));
    op.kind = SIM_OP_KERNEL;
    op.stream = slot;
    op.u.kernel.trampoline = k->trampoline;
    op.u.kernel.thread = k->thread;
    op.u.kernel.name = k->name;
    op.u.kernel.dims = *dims;
    if ((r = pack_args(k, kernelParams, extra, &op)) != CUDA_SUCCESS)
        return r;
    struct sim_gnode node = { .kind = SIM_GNODE_KERNEL, .func = f, .dims = *dims, .smem = smem,
                              .args_bytes = op.u.kernel.args_bytes };
    if (sim_capture_active()) {
        if (!(node.args = malloc(node.args_bytes ? node.args_bytes : 1)))
            return CUDA_ERROR_OUT_OF_MEMORY;
        memcpy(node.args, op.args, node.args_bytes);
    }
    bool captured = false;
    r = sim_capture_op(s, ptds, false, &node, &captured);
    free(node.args);    /* NULL when the graph took it */
    if (r != CUDA_SUCCESS || captured)
        return r;
    int rc = sim_submit(d, &op, NULL);
    if (rc)
        return d->sh->sticky_error ? (CUresult)d->sh->sticky_error : sim_errno_to_cu(rc);
    sim_stats_add(d, &d->sh->stats.kernels_launched, 1);
    return CUDA_SUCCESS;
}

static CUresult launch_kernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                              unsigned bz, unsigned smem, CUstream s, void **kernelParams, void **extra, bool ptds)
{
    struct simgpu_launch_dims dims = { { gx, gy, gz }, { bx, by, bz } };
    return launch(f, &dims, smem, s, kernelParams, extra, ptds);
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)
{
    return launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
                         kernelParams, extra, false);
}

CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                     void **kernelParams, void **extra)
{
    return launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
                         kernelParams, extra, true);
}

/* Launch attributes are accepted and ignored (cluster shapes, priorities,
 * programmatic serialization have no meaning here). */
static CUresult launch_ex(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra, bool ptds)
{
    if (!config || (config->numAttrs && !config->attrs))
        return CUDA_ERROR_INVALID_VALUE;
    return launch_kernel(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                         config->blockDimY, config->blockDimZ, config->sharedMemBytes, config->hStream,
                         kernelParams, extra, ptds);
}

CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{
    return launch_ex(config, f, kernelParams, extra, false);
}

CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{
    return launch_ex(config, f, kernelParams, extra, true);
}

/* A parameter of the kernel a handle names, found by `find` (a CUfunction
 * is the host stub, a CUkernel the descriptor): INVALID_HANDLE for the
 * other kind, INVALID_VALUE past the last parameter (both as seen on an
 * H200, driver 580). */
static CUresult param_info(const void *handle, const struct simgpu_kernel_desc *(*find)(const void *),
                           size_t paramIndex, size_t *paramOffset, size_t *paramSize)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    const struct simgpu_kernel_desc *k = find(handle);
    if (!k)
        return CUDA_ERROR_INVALID_HANDLE;
    if (paramIndex >= k->nparams)
        return CUDA_ERROR_INVALID_VALUE;
    if (paramOffset)
        *paramOffset = k->param_offset[paramIndex];
    if (paramSize)
        *paramSize = k->param_size[paramIndex];
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset, size_t *paramSize)
{
    return param_info((const void *)func, sim_kernel_find, paramIndex, paramOffset, paramSize);
}

CUresult CUDAAPI cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset, size_t *paramSize)
{
    return param_info((const void *)kernel, sim_kernel_of_handle, paramIndex, paramOffset, paramSize);
}

CUresult CUDAAPI cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pFunc)
        return CUDA_ERROR_INVALID_VALUE;
    const struct simgpu_kernel_desc *k = sim_kernel_of_handle((const void *)kernel);
    if (!k)
        return CUDA_ERROR_INVALID_HANDLE;
    *pFunc = (CUfunction)(uintptr_t)k->func;
    return CUDA_SUCCESS;
}

/* Kernels are loaded when registered: nothing is left to load. */
CUresult CUDAAPI cuFuncLoad(CUfunction hfunc)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    return sim_kernel_find((const void *)hfunc) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult CUDAAPI cuFuncGetName(const char **name, CUfunction hfunc)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    const struct simgpu_kernel_desc *k = sim_kernel_find((const void *)hfunc);
    if (!k)
        return CUDA_ERROR_INVALID_HANDLE;
    *name = k->name;
    return CUDA_SUCCESS;
}
