/* The GPU side of the shim: what the CUDA hooks (cuda_hooks.c) tell the
 * protocol (gpu.c), and how the protocol reaches the real driver.
 *
 * The hooks decide *when* (every launch path, every host sync); gpu.c
 * decides *what* (DESIGN §3.3: at a launch the CPU's release then the
 * device's acquire; at a sync the device's release then the CPU's
 * acquire). Neither is compiled against a driver library: every real
 * entry point is resolved at run time from the libcuda.so.1 the program
 * loaded.
 */
#ifndef GAIA_GPU_H
#define GAIA_GPU_H

#include <stdbool.h>
#include <stddef.h>

#include <cuda.h>

#include "cuda_calls.h"
#include "shim.h"

/* --- the real driver and runtime: cuda_calls.h (cuda_loader.c) --- */

/* True while the calling thread is inside one of the shim's CUDA calls or
 * a hook: nested hooks forward without acting (a runtime-API hook whose
 * cudart reaches the wrapped driver, or the shim's own driver calls). */
GAIA_HIDDEN extern __thread int gpu_hook_depth __attribute__((tls_model("initial-exec")));

/* The shim's own CUDA work inside a hook (uploads, replicas, diffs, device
 * waits) runs with the calling thread's stream-capture mode set to
 * RELAXED: a program capturing a graph (in this thread or, under the
 * default GLOBAL mode, in any thread) would otherwise see the shim's
 * allocations and waits refused and its capture invalidated. The shim
 * never touches the legacy stream or a capturing stream there (its work
 * goes to a stream of its own). gpu_capture_relax returns the mode to
 * give back to gpu_capture_restore; both cost nothing without a driver
 * that has cuThreadExchangeStreamCaptureMode. (backend_cuda.c) */
GAIA_HIDDEN int gpu_capture_relax(void);
GAIA_HIDDEN void gpu_capture_restore(int mode);

/* --- what the hooks report (gpu.c) --- */

/* How a launch's parameters are described: a driver CUfunction (or a
 * CUkernel cast to one), or a runtime-API host stub (cudaLaunchKernel's
 * func), whose layout comes from cudaFuncGetParamInfo. */
enum gpu_func_kind { GPU_FUNC_DRIVER, GPU_FUNC_RUNTIME, GPU_FUNC_NONE };

struct gpu_launch {
	/* in */
	enum gpu_func_kind kind;
	const void *func;
	CUstream stream;
	void **params; /* kernelParams as given (may be NULL) */
	void **extra;  /* the extra array as given (may be NULL) */
	/* out: what to forward to the real launch (the inputs, or copies
	 * with pointers into managed-backed regions translated) */
	void **fwd_params;
	void **fwd_extra;
	/* private to gpu.c */
	void *scratch;
	int device;
	bool in_window; /* holds the launch window (gpu.c) */
	bool in_flight; /* planned by gpu_mappings_launch, not yet queued */
	/* out: not CUDA_SUCCESS when the launch must not run (a region could
	 * not be brought to the device); the wrapper returns it instead */
	CUresult error;
};

/* Before the real launch: the CPU's release, then the current context's
 * device acquires every managed region (uploads and rebases done, in
 * stream order). Sets fwd_params/fwd_extra. A region that cannot get a
 * device replica is logged and left out; one whose upload failed sets
 * `error`, and the launch is not made. */
GAIA_HIDDEN void gpu_launch_prepare(struct gpu_launch *launch);
/* After the real launch returned rc: frees what prepare allocated. */
GAIA_HIDDEN void gpu_launch_done(struct gpu_launch *launch, CUresult rc);

/* A host synchronization returned rc (CUDA_SUCCESS or not): when it
 * succeeded, every device of the current context's device that launched
 * since its last release releases (device-dirty pages found by diffing on
 * the device, merged into the CPU replica in place), then the CPU
 * acquires. */
enum gpu_sync_kind { GPU_SYNC_CONTEXT, GPU_SYNC_STREAM, GPU_SYNC_EVENT, GPU_SYNC_COPY };
GAIA_HIDDEN CUresult gpu_after_sync(enum gpu_sync_kind kind, CUresult rc);

/* The program destroyed a stream: kernels it launched there can no longer
 * be asked about (the next release waits for the device). */
GAIA_HIDDEN void gpu_stream_destroyed(CUstream s);

/* The real cuInit is about to run (called once per process, before it):
 * the protocol registers what must exist before the driver starts. */
GAIA_HIDDEN void gpu_before_driver_init(void);

/* --- CUDA calls that take host pointers (gpu_copy.c) --- */

/* Whether [p, p+n) lies in (overlaps) a managed mapping. */
GAIA_HIDDEN bool gpu_is_mapped_host(const void *p, size_t n);
/* How a copy's API names one of its sides: device memory, host memory,
 * or either (unified addressing: cuMemcpy, cudaMemcpyDefault). */
enum gpu_copy_side { GPU_COPY_DEVICE, GPU_COPY_HOST, GPU_COPY_UNIFIED };
/* A 1-D copy whose host side may be a mapping: false when neither side
 * is (the caller forwards it); else it was made, in stream order, and
 * *rc is its result. `settled`: the caller has made gpu_copy_settle(stream)
 * since the work it must follow (a pitched copy, once for all its rows). */
GAIA_HIDDEN bool gpu_copy_1d(void *dst, const void *src, size_t n, enum gpu_copy_side dst_side,
			     enum gpu_copy_side src_side, CUstream stream, bool settled, CUresult *rc);
/* Waits for the work before this point on `stream` (what the stream's
 * rules put before an operation enqueued now) and releases the device. */
GAIA_HIDDEN CUresult gpu_copy_settle(CUstream stream);
/* cuMemsetD* (2-D when height > 1) whose destination is a mapping: false
 * when it is not (the caller forwards it); else the pattern was stored by
 * the CPU after the stream's earlier work, and *rc is the result. */
GAIA_HIDDEN bool gpu_memset_mapped(CUdeviceptr dst, size_t pitch, uint32_t value, unsigned elem, size_t width,
				   size_t height, CUstream stream, CUresult *rc);
/* cuMemPrefetchAsync of a range of mappings to `device`: its copy made
 * current (nothing on a stream that captures a graph). */
GAIA_HIDDEN CUresult gpu_prefetch_mapped(CUdeviceptr ptr, size_t n, int device, CUstream stream);
/* Host registration of a mapped range, kept by the shim. */
GAIA_HIDDEN CUresult gpu_host_register(void *p, size_t len);
GAIA_HIDDEN bool gpu_host_unregister(void *p);
GAIA_HIDDEN bool gpu_host_device_pointer(CUdeviceptr *out, void *p);
/* Pointer queries: the pointer to ask the driver about instead of ptr
 * (a pageable probe when ptr is mapped), and the fix-up of a registered
 * mapping's answer. */
GAIA_HIDDEN CUdeviceptr gpu_pointer_query_target(CUdeviceptr ptr, bool *registered);
GAIA_HIDDEN CUresult gpu_pointer_fixup(CUpointer_attribute attr, void *data, CUdeviceptr ptr,
				       CUresult rc);

#endif
