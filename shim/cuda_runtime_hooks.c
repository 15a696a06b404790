/* Runtime-API wrappers, for programs that load a shared libcudart
 * (cudaLaunchKernel, the syncs, cudaMemcpy, the driver entry-point
 * lookups): the same protocol as the driver wrappers (cuda_hooks.c), with
 * the runtime's errors. */
#define _GNU_SOURCE
#include "cuda_hooks.h"
#include "backend_cuda.h"

#include <string.h>

/* ------------------------------------------------------------------ */
/* Runtime-API hooks (a shared libcudart)                             */

/* The runtime function behind a hook, as its caller (the object the
 * exported wrapper returns to) reaches it without the shim: a plugin may
 * carry a runtime of its own (cuda_calls.h). Evaluated in the exported
 * wrapper itself, so that the return address is the caller's. */
#define RT_REAL_OF(abi) ((__typeof__(&abi))runtime_real(HOOK_##abi, __builtin_return_address(0), #abi))

/* One atomic load when the global scope has a runtime (the usual case). */
static inline void *runtime_real(enum hook_id id, const void *caller, const char *name)
{
	void *p = hook_real(id);
	return p ? p : cuda_runtime_real_for(caller, name);
}

/* The protocol speaks CUresult; it only tells success from failure. */
static CUresult runtime_rc(cudaError_t e)
{
	return e == cudaSuccess ? CUDA_SUCCESS : e == cudaErrorNotReady ? CUDA_ERROR_NOT_READY : CUDA_ERROR_UNKNOWN;
}

/* While a runtime hook runs, the driver wrappers its cudart reaches
 * forward without acting (gpu_hook_depth). A libcudart that cannot be
 * found answers as the runtime does without a driver. */
static cudaError_t runtime_launch(__typeof__(&cudaLaunchKernel) real, bool pt, const void *func, dim3 grid,
				  dim3 block, void **args, size_t smem, cudaStream_t stream)
{
	struct gpu_launch l;
	cudaError_t e;

	if (!real)
		return cudaErrorInitializationError;
	if (gpu_hook_depth)
		return real(func, grid, block, args, smem, stream);
	l = launch_info(GPU_FUNC_RUNTIME, func, (CUstream)stream, pt, args, NULL);
	gpu_hook_depth++;
	int mode = gpu_capture_relax(); /* the shim's own work only (gpu.h) */
	gpu_launch_prepare(&l);
	gpu_capture_restore(mode);
	if (l.error) {
		/* Refused (the region could not be brought to the device). The
		 * runtime must record an error for cudaGetLastError, and has no
		 * call that sets one: an empty grid makes it record
		 * cudaErrorInvalidConfiguration, and launches nothing. */
		dim3 none = {0, 0, 0};
		(void)real(func, none, block, l.fwd_params, smem, stream);
		e = cuda_runtime_error_of(l.error); /* the call itself returns the cause */
	} else {
		e = real(func, grid, block, l.fwd_params, smem, stream);
	}
	mode = gpu_capture_relax();
	gpu_launch_done(&l, runtime_rc(e));
	gpu_capture_restore(mode);
	gpu_hook_depth--;
	return e;
}

GAIA_EXPORT cudaError_t CUDARTAPI cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
						    size_t sharedMem, cudaStream_t stream)
{
	return runtime_launch(RT_REAL_OF(cudaLaunchKernel), false, func, gridDim, blockDim, args, sharedMem, stream);
}

GAIA_EXPORT cudaError_t CUDARTAPI cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
							 size_t sharedMem, cudaStream_t stream)
{
	return runtime_launch(RT_REAL_OF(cudaLaunchKernel_ptsz), true, func, gridDim, blockDim, args, sharedMem,
			      stream);
}

#define RUNTIME_SYNC(real, call, kind, is_sync)                              \
	do {                                                                 \
		cudaError_t e_;                                              \
		if (!(real))                                                 \
			return cudaErrorInitializationError;                 \
		if (gpu_hook_depth)                                          \
			return (call);                                       \
		gpu_hook_depth++;                                            \
		e_ = (call);                                                 \
		int mode_ = gpu_capture_relax();                             \
		if (is_sync && e_ == cudaSuccess)                            \
			e_ = cuda_runtime_error_of(                          \
				gpu_after_sync((kind), runtime_rc(e_)));     \
		else if (is_sync)                                            \
			(void)gpu_after_sync((kind), runtime_rc(e_));        \
		gpu_capture_restore(mode_);                                  \
		gpu_hook_depth--;                                            \
		return e_;                                                   \
	} while (0)

GAIA_EXPORT cudaError_t CUDARTAPI cudaDeviceSynchronize(void)
{
	__typeof__(&cudaDeviceSynchronize) real = RT_REAL_OF(cudaDeviceSynchronize);

	RUNTIME_SYNC(real, real(), GPU_SYNC_CONTEXT, true);
}

GAIA_EXPORT cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t stream)
{
	__typeof__(&cudaStreamSynchronize) real = RT_REAL_OF(cudaStreamSynchronize);

	RUNTIME_SYNC(real, real(stream), GPU_SYNC_STREAM, true);
}

GAIA_EXPORT cudaError_t CUDARTAPI cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
	__typeof__(&cudaStreamSynchronize_ptsz) real = RT_REAL_OF(cudaStreamSynchronize_ptsz);

	RUNTIME_SYNC(real, real(stream), GPU_SYNC_STREAM, true);
}

GAIA_EXPORT cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t event)
{
	__typeof__(&cudaEventSynchronize) real = RT_REAL_OF(cudaEventSynchronize);

	RUNTIME_SYNC(real, real(event), GPU_SYNC_EVENT, true);
}

GAIA_EXPORT cudaError_t CUDARTAPI cudaStreamQuery(cudaStream_t stream)
{
	__typeof__(&cudaStreamQuery) real = RT_REAL_OF(cudaStreamQuery);

	RUNTIME_SYNC(real, real(stream), GPU_SYNC_STREAM, e_ == cudaSuccess);
}

GAIA_EXPORT cudaError_t CUDARTAPI cudaStreamQuery_ptsz(cudaStream_t stream)
{
	__typeof__(&cudaStreamQuery_ptsz) real = RT_REAL_OF(cudaStreamQuery_ptsz);

	RUNTIME_SYNC(real, real(stream), GPU_SYNC_STREAM, e_ == cudaSuccess);
}

GAIA_EXPORT cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t event)
{
	__typeof__(&cudaEventQuery) real = RT_REAL_OF(cudaEventQuery);

	RUNTIME_SYNC(real, real(event), GPU_SYNC_EVENT, e_ == cudaSuccess);
}

/* cudaMemcpy: the same rule as the driver's synchronous copies; the kind
 * says the direction, except cudaMemcpyDefault (unified addressing). */
static bool runtime_memcpy_is_host_sync(void *dst, const void *src, enum cudaMemcpyKind kind)
{
	if (kind == cudaMemcpyDeviceToDevice)
		return false;
	if (kind == cudaMemcpyDefault)
		return memcpy_sync_is_host_sync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src);
	return true;
}

GAIA_EXPORT cudaError_t CUDARTAPI cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	__typeof__(&cudaMemcpy) real = RT_REAL_OF(cudaMemcpy);

	RUNTIME_SYNC(real, real(dst, src, count, kind), GPU_SYNC_COPY,
		     e_ == cudaSuccess && runtime_memcpy_is_host_sync(dst, src, kind));
}

GAIA_EXPORT cudaError_t CUDARTAPI cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	__typeof__(&cudaMemcpy_ptds) real = RT_REAL_OF(cudaMemcpy_ptds);

	RUNTIME_SYNC(real, real(dst, src, count, kind), GPU_SYNC_COPY,
		     e_ == cudaSuccess && runtime_memcpy_is_host_sync(dst, src, kind));
}

/* cudaGetDriverEntryPointByVersion is cuGetProcAddress behind the runtime:
 * the same substitution. cudaEnablePerThreadDefaultStream is the driver's
 * flag 2; the _ptsz forms default to it. */
static cuuint64_t entry_point_flags(unsigned long long flags, bool pt)
{
	if (pt && !(flags & (cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream)))
		flags |= cudaEnablePerThreadDefaultStream;
	return flags & cudaEnablePerThreadDefaultStream ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0;
}

static cudaError_t entry_point_by_version(__typeof__(&cudaGetDriverEntryPointByVersion) real, bool pt,
					  const char *symbol, void **funcPtr, unsigned int cudaVersion,
					  unsigned long long flags, enum cudaDriverEntryPointQueryResult *status)
{
	enum cudaDriverEntryPointQueryResult st = cudaDriverEntryPointSymbolNotFound;
	cudaError_t e;

	if (!real)
		return cudaErrorInitializationError;
	e = real(symbol, funcPtr, cudaVersion, flags, &st);
	if (status)
		*status = st;
	if (e == cudaSuccess && st == cudaDriverEntryPointSuccess)
		procaddr_substitute(symbol, funcPtr, (int)cudaVersion, entry_point_flags(flags, pt));
	return e;
}

GAIA_EXPORT cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr,
								    unsigned int cudaVersion, unsigned long long flags,
								    enum cudaDriverEntryPointQueryResult *driverStatus)
{
	return entry_point_by_version(RT_REAL_OF(cudaGetDriverEntryPointByVersion), false, symbol, funcPtr, cudaVersion,
				      flags, driverStatus);
}

GAIA_EXPORT cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **funcPtr,
									 unsigned int cudaVersion,
									 unsigned long long flags,
									 enum cudaDriverEntryPointQueryResult *driverStatus)
{
	return entry_point_by_version(RT_REAL_OF(cudaGetDriverEntryPointByVersion_ptsz), true, symbol, funcPtr,
				      cudaVersion, flags, driverStatus);
}

/* The shim stands in for cudaGetDriverEntryPoint[_ptsz], deprecated in
 * CUDA 12.5 but still exported and used; naming it is no use of it. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static cudaError_t entry_point(__typeof__(&cudaGetDriverEntryPoint) real, const char *symbol, void **funcPtr,
			       unsigned long long flags, enum cudaDriverEntryPointQueryResult *status)
{
	enum cudaDriverEntryPointQueryResult st = cudaDriverEntryPointSymbolNotFound;
	cudaError_t e;

	if (!real)
		return cudaErrorInitializationError;
	e = real(symbol, funcPtr, flags, &st);
	if (status)
		*status = st;
	if (e == cudaSuccess && st == cudaDriverEntryPointSuccess)
		hook_substitute_by_identity(symbol, funcPtr);
	return e;
}

GAIA_EXPORT cudaError_t CUDARTAPI cudaGetDriverEntryPoint(const char *symbol, void **funcPtr, unsigned long long flags,
							   enum cudaDriverEntryPointQueryResult *driverStatus)
{
	return entry_point(RT_REAL_OF(cudaGetDriverEntryPoint), symbol, funcPtr, flags, driverStatus);
}

GAIA_EXPORT cudaError_t CUDARTAPI cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr,
								unsigned long long flags,
								enum cudaDriverEntryPointQueryResult *driverStatus)
{
	return entry_point(RT_REAL_OF(cudaGetDriverEntryPoint_ptsz), symbol, funcPtr, flags, driverStatus);
}

/* The table's hidden aliases of the runtime wrappers. */
#define HOOK_ALIAS(base, ver, pt, abi, lib, pfn) HOOK_ALIAS_##lib(abi)
#define HOOK_ALIAS_RT(abi) HOOK_ALIAS_DEFINE(abi)
#define HOOK_ALIAS_DRV(abi)
CUDA_HOOK_TABLE(HOOK_ALIAS)
#undef HOOK_ALIAS_DRV
#undef HOOK_ALIAS_RT
#undef HOOK_ALIAS

#pragma GCC diagnostic pop
