/* What the CUDA interception layer's files share (cuda_hooks.c: the dlsym
 * hook, the resolvers, launches, syncs and the table; cuda_copy_hooks.c:
 * copies; cuda_mem_hooks.c: memsets, hints, peer copies;
 * cuda_runtime_hooks.c: the runtime-API wrappers): the table of rows and
 * the calls between them. Included first, after _GNU_SOURCE. */
#ifndef GAIA_CUDA_HOOKS_H
#define GAIA_CUDA_HOOKS_H

/* cuda.h then declares every ABI name (_v2, _ptsz, _ptds, the 4-argument
 * cuGetProcAddress) as the driver's own build sees them, so each wrapper
 * is checked against the header's prototype. */
#define __CUDA_API_VERSION_INTERNAL 1

#include <stdbool.h>
#include <stdint.h>

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include "gpu.h"

#define GAIA_EXPORT __attribute__((visibility("default")))

enum hook_lib { DRV, RT };

/* The hook table: (base name, cudaVersion, per-thread, ABI name, library,
 * the ABI's function type in cudaTypedefs.h, which the wrapper must have;
 * runtime rows have no versions).
 * cuGetProcAddress picks, among the driver rows of a base name, the one
 * with the highest version <= the caller's cudaVersion, per-thread rows
 * for flag 2 (falling back to the legacy rows, for names that have no
 * per-thread form). Versions are those of cudaTypedefs.h's PFN_* types.
 *
 * Deliberately absent: the 2000-version copies (32-bit device pointers,
 * passed through), cuMemcpyDtoD (no host-side synchronization, per the
 * driver's sync-behavior notes) and the deprecated
 * cuLaunchCooperativeKernelMultiDevice. */
#define CUDA_CORE_HOOK_TABLE(X)                                                                                                                \
	/* resolvers; the 4-argument ABI (11030) answers any older query */                                                                 \
	X(cuGetProcAddress,                 0,     0, cuGetProcAddress,                      DRV, PFN_cuGetProcAddress_v11030)              \
	X(cuGetProcAddress,                 12000, 0, cuGetProcAddress_v2,                   DRV, PFN_cuGetProcAddress_v12000)              \
	X(cuInit,                           2000,  0, cuInit,                                DRV, PFN_cuInit_v2000)                         \
	/* launches */                                                                                                                      \
	X(cuLaunchKernel,                   4000,  0, cuLaunchKernel,                        DRV, PFN_cuLaunchKernel_v4000)                 \
	X(cuLaunchKernel,                   7000,  1, cuLaunchKernel_ptsz,                   DRV, PFN_cuLaunchKernel_v7000_ptsz)            \
	X(cuLaunchKernelEx,                 11060, 0, cuLaunchKernelEx,                      DRV, PFN_cuLaunchKernelEx_v11060)              \
	X(cuLaunchKernelEx,                 11060, 1, cuLaunchKernelEx_ptsz,                 DRV, PFN_cuLaunchKernelEx_v11060_ptsz)         \
	X(cuLaunchCooperativeKernel,        9000,  0, cuLaunchCooperativeKernel,             DRV, PFN_cuLaunchCooperativeKernel_v9000)      \
	X(cuLaunchCooperativeKernel,        9000,  1, cuLaunchCooperativeKernel_ptsz,        DRV, PFN_cuLaunchCooperativeKernel_v9000_ptsz) \
	X(cuGraphLaunch,                    10000, 0, cuGraphLaunch,                         DRV, PFN_cuGraphLaunch_v10000)                 \
	X(cuGraphLaunch,                    10000, 1, cuGraphLaunch_ptsz,                    DRV, PFN_cuGraphLaunch_v10000_ptsz)            \
	/* host synchronizations */                                                                                                         \
	X(cuCtxSynchronize,                 2000,  0, cuCtxSynchronize,                      DRV, PFN_cuCtxSynchronize_v2000)               \
	X(cuCtxSynchronize,                 13000, 0, cuCtxSynchronize_v2,                   DRV, PFN_cuCtxSynchronize_v13000)              \
	X(cuStreamSynchronize,              2000,  0, cuStreamSynchronize,                   DRV, PFN_cuStreamSynchronize_v2000)            \
	X(cuStreamSynchronize,              7000,  1, cuStreamSynchronize_ptsz,              DRV, PFN_cuStreamSynchronize_v7000_ptsz)       \
	X(cuEventSynchronize,               2000,  0, cuEventSynchronize,                    DRV, PFN_cuEventSynchronize_v2000)             \
	X(cuStreamQuery,                    2000,  0, cuStreamQuery,                         DRV, PFN_cuStreamQuery_v2000)                  \
	X(cuStreamQuery,                    7000,  1, cuStreamQuery_ptsz,                    DRV, PFN_cuStreamQuery_v7000_ptsz)             \
	X(cuEventQuery,                     2000,  0, cuEventQuery,                          DRV, PFN_cuEventQuery_v2000)                   \
	X(cuStreamDestroy,                  4000,  0, cuStreamDestroy_v2,                    DRV, PFN_cuStreamDestroy_v4000)                \
	/* the runtime API, for programs linked with a shared libcudart */                                                                  \
	X(cudaLaunchKernel,                 0,     0, cudaLaunchKernel,                      RT,  none)                                     \
	X(cudaLaunchKernel,                 0,     1, cudaLaunchKernel_ptsz,                 RT,  none)                                     \
	X(cudaDeviceSynchronize,            0,     0, cudaDeviceSynchronize,                 RT,  none)                                     \
	X(cudaStreamSynchronize,            0,     0, cudaStreamSynchronize,                 RT,  none)                                     \
	X(cudaStreamSynchronize,            0,     1, cudaStreamSynchronize_ptsz,            RT,  none)                                     \
	X(cudaEventSynchronize,             0,     0, cudaEventSynchronize,                  RT,  none)                                     \
	X(cudaStreamQuery,                  0,     0, cudaStreamQuery,                       RT,  none)                                     \
	X(cudaStreamQuery,                  0,     1, cudaStreamQuery_ptsz,                  RT,  none)                                     \
	X(cudaEventQuery,                   0,     0, cudaEventQuery,                        RT,  none)                                     \
	X(cudaMemcpy,                       0,     0, cudaMemcpy,                            RT,  none)                                     \
	X(cudaMemcpy,                       0,     1, cudaMemcpy_ptds,                       RT,  none)                                     \
	X(cudaGetDriverEntryPoint,          0,     0, cudaGetDriverEntryPoint,               RT,  none)                                     \
	X(cudaGetDriverEntryPoint,          0,     1, cudaGetDriverEntryPoint_ptsz,          RT,  none)                                     \
	X(cudaGetDriverEntryPointByVersion, 0,     0, cudaGetDriverEntryPointByVersion,      RT,  none)                                     \
	X(cudaGetDriverEntryPointByVersion, 0,     1, cudaGetDriverEntryPointByVersion_ptsz, RT,  none)

#define CUDA_HOOK_TABLE(X) CUDA_CORE_HOOK_TABLE(X) CUDA_COPY_HOOK_TABLE(X) CUDA_MEM_HOOK_TABLE(X)

/* Copies, batches of copies, host registration and pointer queries
 * (cuda_copy_hooks.c): driver rows whose wrappers live in their own file. */
#define CUDA_COPY_HOOK_TABLE(X)                                                                                                                \
	/* copies that return after the device caught up */                                                                                 \
	X(cuMemcpy,                         4000,  0, cuMemcpy,                              DRV, PFN_cuMemcpy_v4000)                       \
	X(cuMemcpy,                         7000,  1, cuMemcpy_ptds,                         DRV, PFN_cuMemcpy_v7000_ptds)                  \
	X(cuMemcpyDtoH,                     3020,  0, cuMemcpyDtoH_v2,                       DRV, PFN_cuMemcpyDtoH_v3020)                   \
	X(cuMemcpyDtoH,                     7000,  1, cuMemcpyDtoH_v2_ptds,                  DRV, PFN_cuMemcpyDtoH_v7000_ptds)              \
	X(cuMemcpyHtoD,                     3020,  0, cuMemcpyHtoD_v2,                       DRV, PFN_cuMemcpyHtoD_v3020)                   \
	X(cuMemcpyHtoD,                     7000,  1, cuMemcpyHtoD_v2_ptds,                  DRV, PFN_cuMemcpyHtoD_v7000_ptds)              \
	X(cuMemcpyDtoHAsync,                3020,  0, cuMemcpyDtoHAsync_v2,                  DRV, PFN_cuMemcpyDtoHAsync_v3020)              \
	X(cuMemcpyDtoHAsync,                7000,  1, cuMemcpyDtoHAsync_v2_ptsz,             DRV, PFN_cuMemcpyDtoHAsync_v7000_ptsz)         \
	X(cuMemcpyAsync,                    4000,  0, cuMemcpyAsync,                         DRV, PFN_cuMemcpyAsync_v4000)                  \
	X(cuMemcpyAsync,                    7000,  1, cuMemcpyAsync_ptsz,                    DRV, PFN_cuMemcpyAsync_v7000_ptsz)             \
	X(cuMemcpyHtoDAsync,                3020,  0, cuMemcpyHtoDAsync_v2,                  DRV, PFN_cuMemcpyHtoDAsync_v3020)              \
	X(cuMemcpyHtoDAsync,                7000,  1, cuMemcpyHtoDAsync_v2_ptsz,             DRV, PFN_cuMemcpyHtoDAsync_v7000_ptsz)         \
	/* batches of 1-D copies: one by one when an operand is a mapping */                                                              \
	X(cuMemcpyBatchAsync,               12080, 0, cuMemcpyBatchAsync,                    DRV, PFN_cuMemcpyBatchAsync_v12080)            \
	X(cuMemcpyBatchAsync,               12080, 1, cuMemcpyBatchAsync_ptsz,               DRV, PFN_cuMemcpyBatchAsync_v12080_ptsz)       \
	X(cuMemcpyBatchAsync,               13000, 0, cuMemcpyBatchAsync_v2,                 DRV, PFN_cuMemcpyBatchAsync_v13000)            \
	X(cuMemcpyBatchAsync,               13000, 1, cuMemcpyBatchAsync_v2_ptsz,            DRV, PFN_cuMemcpyBatchAsync_v13000_ptsz)       \
	/* pitched copies: row by row when a host side is a mapping */                                                                        \
	X(cuMemcpy2D,                       3020,  0, cuMemcpy2D_v2,                         DRV, PFN_cuMemcpy2D_v3020)                     \
	X(cuMemcpy2D,                       7000,  1, cuMemcpy2D_v2_ptds,                    DRV, PFN_cuMemcpy2D_v7000_ptds)                \
	X(cuMemcpy2DUnaligned,              3020,  0, cuMemcpy2DUnaligned_v2,                DRV, PFN_cuMemcpy2DUnaligned_v3020)            \
	X(cuMemcpy2DUnaligned,              7000,  1, cuMemcpy2DUnaligned_v2_ptds,           DRV, PFN_cuMemcpy2DUnaligned_v7000_ptds)       \
	X(cuMemcpy2DAsync,                  3020,  0, cuMemcpy2DAsync_v2,                    DRV, PFN_cuMemcpy2DAsync_v3020)                \
	X(cuMemcpy2DAsync,                  7000,  1, cuMemcpy2DAsync_v2_ptsz,               DRV, PFN_cuMemcpy2DAsync_v7000_ptsz)           \
	X(cuMemcpy3D,                       3020,  0, cuMemcpy3D_v2,                         DRV, PFN_cuMemcpy3D_v3020)                     \
	X(cuMemcpy3D,                       7000,  1, cuMemcpy3D_v2_ptds,                    DRV, PFN_cuMemcpy3D_v7000_ptds)                \
	X(cuMemcpy3DAsync,                  3020,  0, cuMemcpy3DAsync_v2,                    DRV, PFN_cuMemcpy3DAsync_v3020)                \
	X(cuMemcpy3DAsync,                  7000,  1, cuMemcpy3DAsync_v2_ptsz,               DRV, PFN_cuMemcpy3DAsync_v7000_ptsz)           \
	X(cuMemcpy3DPeer,                   4000,  0, cuMemcpy3DPeer,                        DRV, PFN_cuMemcpy3DPeer_v4000)                 \
	X(cuMemcpy3DPeer,                   7000,  1, cuMemcpy3DPeer_ptds,                   DRV, PFN_cuMemcpy3DPeer_v7000_ptds)            \
	X(cuMemcpy3DPeerAsync,              4000,  0, cuMemcpy3DPeerAsync,                   DRV, PFN_cuMemcpy3DPeerAsync_v4000)            \
	X(cuMemcpy3DPeerAsync,              7000,  1, cuMemcpy3DPeerAsync_ptsz,              DRV, PFN_cuMemcpy3DPeerAsync_v7000_ptsz)       \
	/* batches of 3-D copies: one by one when an operand is a mapping */                                                              \
	X(cuMemcpy3DBatchAsync,             12080, 0, cuMemcpy3DBatchAsync,                  DRV, PFN_cuMemcpy3DBatchAsync_v12080)          \
	X(cuMemcpy3DBatchAsync,             12080, 1, cuMemcpy3DBatchAsync_ptsz,             DRV, PFN_cuMemcpy3DBatchAsync_v12080_ptsz)     \
	X(cuMemcpy3DBatchAsync,             13000, 0, cuMemcpy3DBatchAsync_v2,               DRV, PFN_cuMemcpy3DBatchAsync_v13000)          \
	X(cuMemcpy3DBatchAsync,             13000, 1, cuMemcpy3DBatchAsync_v2_ptsz,          DRV, PFN_cuMemcpy3DBatchAsync_v13000_ptsz)     \
	/* host memory that is a mapping: registration and pointer queries */                                                              \
	X(cuMemHostRegister,                4000,  0, cuMemHostRegister,                     DRV, PFN_cuMemHostRegister_v4000)              \
	X(cuMemHostRegister,                6050,  0, cuMemHostRegister_v2,                  DRV, PFN_cuMemHostRegister_v6050)              \
	X(cuMemHostUnregister,              4000,  0, cuMemHostUnregister,                   DRV, PFN_cuMemHostUnregister_v4000)            \
	X(cuMemHostGetDevicePointer,        3020,  0, cuMemHostGetDevicePointer_v2,          DRV, PFN_cuMemHostGetDevicePointer_v3020)      \
	X(cuPointerGetAttribute,            4000,  0, cuPointerGetAttribute,                 DRV, PFN_cuPointerGetAttribute_v4000)          \
	X(cuPointerGetAttributes,           7000,  0, cuPointerGetAttributes,                DRV, PFN_cuPointerGetAttributes_v7000)

/* Allocations, memsets, managed-memory hints and peer copies (cuda_mem_hooks.c): driver rows whose
 * wrappers live in their own file. */
#define CUDA_MEM_HOOK_TABLE(X)                                                                                                              \
	/* a program's allocation that finds no room: replicas make room */                                                                \
	X(cuMemAlloc,                        3020,  0, cuMemAlloc_v2,                        DRV, PFN_cuMemAlloc_v3020)                      \
	X(cuMemCreate,                       10020, 0, cuMemCreate,                          DRV, PFN_cuMemCreate_v10020)                    \
	X(cuMemAllocPitch,                   3020,  0, cuMemAllocPitch_v2,                   DRV, PFN_cuMemAllocPitch_v3020)                 \
	X(cuMemAllocAsync,                   11020, 0, cuMemAllocAsync,                      DRV, PFN_cuMemAllocAsync_v11020)                \
	X(cuMemAllocAsync,                   11020, 1, cuMemAllocAsync_ptsz,                 DRV, PFN_cuMemAllocAsync_v11020_ptsz)           \
	X(cuMemAllocFromPoolAsync,           11020, 0, cuMemAllocFromPoolAsync,              DRV, PFN_cuMemAllocFromPoolAsync_v11020)        \
	X(cuMemAllocFromPoolAsync,           11020, 1, cuMemAllocFromPoolAsync_ptsz,         DRV, PFN_cuMemAllocFromPoolAsync_v11020_ptsz)   \
	/* pools: which device each allocates from */                                                                                         \
	X(cuMemPoolCreate,                   11020, 0, cuMemPoolCreate,                      DRV, PFN_cuMemPoolCreate_v11020)                \
	X(cuMemPoolDestroy,                  11020, 0, cuMemPoolDestroy,                     DRV, PFN_cuMemPoolDestroy_v11020)               \
	X(cuDeviceGetDefaultMemPool,         11020, 0, cuDeviceGetDefaultMemPool,            DRV, PFN_cuDeviceGetDefaultMemPool_v11020)      \
	X(cuDeviceGetMemPool,                11020, 0, cuDeviceGetMemPool,                   DRV, PFN_cuDeviceGetMemPool_v11020)             \
	X(cuArrayCreate,                     3020,  0, cuArrayCreate_v2,                     DRV, PFN_cuArrayCreate_v3020)                   \
	X(cuArray3DCreate,                   3020,  0, cuArray3DCreate_v2,                   DRV, PFN_cuArray3DCreate_v3020)                 \
	X(cuMipmappedArrayCreate,            5000,  0, cuMipmappedArrayCreate,               DRV, PFN_cuMipmappedArrayCreate_v5000)          \
	X(cuMemsetD8,                        3020,  0, cuMemsetD8_v2,                        DRV, PFN_cuMemsetD8_v3020)                      \
	X(cuMemsetD8,                        7000,  1, cuMemsetD8_v2_ptds,                   DRV, PFN_cuMemsetD8_v7000_ptds)                 \
	X(cuMemsetD8Async,                   3020,  0, cuMemsetD8Async,                      DRV, PFN_cuMemsetD8Async_v3020)                 \
	X(cuMemsetD8Async,                   7000,  1, cuMemsetD8Async_ptsz,                 DRV, PFN_cuMemsetD8Async_v7000_ptsz)            \
	X(cuMemsetD2D8,                      3020,  0, cuMemsetD2D8_v2,                      DRV, PFN_cuMemsetD2D8_v3020)                    \
	X(cuMemsetD2D8,                      7000,  1, cuMemsetD2D8_v2_ptds,                 DRV, PFN_cuMemsetD2D8_v7000_ptds)               \
	X(cuMemsetD2D8Async,                 3020,  0, cuMemsetD2D8Async,                    DRV, PFN_cuMemsetD2D8Async_v3020)               \
	X(cuMemsetD2D8Async,                 7000,  1, cuMemsetD2D8Async_ptsz,               DRV, PFN_cuMemsetD2D8Async_v7000_ptsz)          \
	X(cuMemsetD16,                       3020,  0, cuMemsetD16_v2,                       DRV, PFN_cuMemsetD16_v3020)                     \
	X(cuMemsetD16,                       7000,  1, cuMemsetD16_v2_ptds,                  DRV, PFN_cuMemsetD16_v7000_ptds)                \
	X(cuMemsetD16Async,                  3020,  0, cuMemsetD16Async,                     DRV, PFN_cuMemsetD16Async_v3020)                \
	X(cuMemsetD16Async,                  7000,  1, cuMemsetD16Async_ptsz,                DRV, PFN_cuMemsetD16Async_v7000_ptsz)           \
	X(cuMemsetD2D16,                     3020,  0, cuMemsetD2D16_v2,                     DRV, PFN_cuMemsetD2D16_v3020)                   \
	X(cuMemsetD2D16,                     7000,  1, cuMemsetD2D16_v2_ptds,                DRV, PFN_cuMemsetD2D16_v7000_ptds)              \
	X(cuMemsetD2D16Async,                3020,  0, cuMemsetD2D16Async,                   DRV, PFN_cuMemsetD2D16Async_v3020)              \
	X(cuMemsetD2D16Async,                7000,  1, cuMemsetD2D16Async_ptsz,              DRV, PFN_cuMemsetD2D16Async_v7000_ptsz)         \
	X(cuMemsetD32,                       3020,  0, cuMemsetD32_v2,                       DRV, PFN_cuMemsetD32_v3020)                     \
	X(cuMemsetD32,                       7000,  1, cuMemsetD32_v2_ptds,                  DRV, PFN_cuMemsetD32_v7000_ptds)                \
	X(cuMemsetD32Async,                  3020,  0, cuMemsetD32Async,                     DRV, PFN_cuMemsetD32Async_v3020)                \
	X(cuMemsetD32Async,                  7000,  1, cuMemsetD32Async_ptsz,                DRV, PFN_cuMemsetD32Async_v7000_ptsz)           \
	X(cuMemsetD2D32,                     3020,  0, cuMemsetD2D32_v2,                     DRV, PFN_cuMemsetD2D32_v3020)                   \
	X(cuMemsetD2D32,                     7000,  1, cuMemsetD2D32_v2_ptds,                DRV, PFN_cuMemsetD2D32_v7000_ptds)              \
	X(cuMemsetD2D32Async,                3020,  0, cuMemsetD2D32Async,                   DRV, PFN_cuMemsetD2D32Async_v3020)              \
	X(cuMemsetD2D32Async,                7000,  1, cuMemsetD2D32Async_ptsz,              DRV, PFN_cuMemsetD2D32Async_v7000_ptsz)         \
	X(cuMemPrefetchAsync,                8000,  0, cuMemPrefetchAsync,                   DRV, PFN_cuMemPrefetchAsync_v8000)              \
	X(cuMemPrefetchAsync,                8000,  1, cuMemPrefetchAsync_ptsz,              DRV, PFN_cuMemPrefetchAsync_v8000_ptsz)         \
	X(cuMemPrefetchAsync,                12020, 0, cuMemPrefetchAsync_v2,                DRV, PFN_cuMemPrefetchAsync_v12020)             \
	X(cuMemPrefetchAsync,                12020, 1, cuMemPrefetchAsync_v2_ptsz,           DRV, PFN_cuMemPrefetchAsync_v12020_ptsz)        \
	X(cuMemAdvise,                       8000,  0, cuMemAdvise,                          DRV, PFN_cuMemAdvise_v8000)                     \
	X(cuMemAdvise,                       12020, 0, cuMemAdvise_v2,                       DRV, PFN_cuMemAdvise_v12020)                    \
	X(cuMemcpyPeer,                      4000,  0, cuMemcpyPeer,                         DRV, PFN_cuMemcpyPeer_v4000)                    \
	X(cuMemcpyPeer,                      7000,  1, cuMemcpyPeer_ptds,                    DRV, PFN_cuMemcpyPeer_v7000_ptds)               \
	X(cuMemcpyPeerAsync,                 4000,  0, cuMemcpyPeerAsync,                    DRV, PFN_cuMemcpyPeerAsync_v4000)               \
	X(cuMemcpyPeerAsync,                 7000,  1, cuMemcpyPeerAsync_ptsz,               DRV, PFN_cuMemcpyPeerAsync_v7000_ptsz)

enum hook_id {
#define HOOK_ENUM(base, ver, pt, abi, lib, pfn) HOOK_##abi,
	CUDA_HOOK_TABLE(HOOK_ENUM)
#undef HOOK_ENUM
	HOOK_COUNT
};

/* The real function behind row `id`: what was substituted, else looked
 * up by its ABI name. NULL when the library is not loaded. */
GAIA_HIDDEN void *hook_real(enum hook_id id);
#define REAL_OF(abi) ((__typeof__(&abi))hook_real(HOOK_##abi))

/* After a resolver answered (symbol, version, flags) with *pfn: put the
 * wrapper in its place when the row is known. */
GAIA_HIDDEN void procaddr_substitute(const char *symbol, void **pfn, int version, cuuint64_t flags);
/* The same for an answer whose version the shim does not know: the row
 * whose real entry is exactly *funcPtr. */
GAIA_HIDDEN void hook_substitute_by_identity(const char *symbol, void **funcPtr);

/* What a launch hands the protocol (gpu.h). */
GAIA_HIDDEN struct gpu_launch launch_info(enum gpu_func_kind kind, const void *func, CUstream stream,
					  bool per_thread, void **params, void **extra);
/* Whether a synchronous copy between these addresses waits for the host
 * (every direction but device to device). */
GAIA_HIDDEN bool memcpy_sync_is_host_sync(CUdeviceptr dst, CUdeviceptr src);
/* Bytes an element of a CUDA array of format f with `channels` channels
 * (at most 4 counted) takes; 0 for a format not listed (normalized,
 * block-compressed, YUV: cuda_mem_hooks.c). */
GAIA_HIDDEN size_t cuda_array_element_bytes(CUarray_format f, unsigned channels);

/* The wrappers are exported (interposable) names; the table points at
 * them through hidden aliases hook_<abi>, so the pointer handed out is
 * always the shim's own, whatever else in the process defines the same
 * name. An alias is defined where its wrapper is, per library. */
#define HOOK_ALIAS_DEFINE(abi) \
	extern __typeof__(abi) hook_##abi __attribute__((alias(#abi), visibility("hidden")));
#define HOOK_ALIAS_DECLARE(abi) extern __typeof__(abi) hook_##abi __attribute__((visibility("hidden")));

/* The body every sync wrapper shares: the real call, then (when `is_sync`,
 * evaluated after it returned with rc_ in scope) the protocol. */
#define SYNC(real, call, kind, is_sync)                                      \
	do {                                                                 \
		CUresult rc_;                                                \
		if (!(real))                                                 \
			return CUDA_ERROR_NOT_INITIALIZED;                   \
		if (gpu_hook_depth)                                          \
			return (call);                                       \
		gpu_hook_depth++;                                            \
		rc_ = (call);                                                \
		if (is_sync) {                                               \
			int mode_ = gpu_capture_relax();                     \
			CUresult g_ = gpu_after_sync((kind), rc_);           \
			gpu_capture_restore(mode_);                          \
			if (rc_ == CUDA_SUCCESS)                             \
				rc_ = g_;                                    \
		}                                                            \
		gpu_hook_depth--;                                            \
		return rc_;                                                  \
	} while (0)

#endif
