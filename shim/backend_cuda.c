/* Device replicas over the CUDA driver API (DESIGN §3.2), the backend of
 * runtime/device.h.
 *
 * Every entry point is the real driver's, resolved at run time from the
 * libcuda.so.1 the program loaded (cuda_calls.h): the shim never links a
 * driver, and its own calls never pass through its hooks.
 *
 * Two backings of a region's device replica:
 *  - vmm: device memory mapped at the region's own address with the
 *    virtual memory API, the CPU replica (the kernel's file mapping) laid
 *    back over the host side — one address, two copies. Kernels use the
 *    program's pointers unchanged.
 *  - managed: the replica in managed memory somewhere else; the launch
 *    translates pointer arguments that point into the region.
 * Base copies (writable regions) live in ordinary device memory.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cudaTypedefs.h>

#include "backend_cuda.h"
#include "gpu_kernels.h"
#include "kernels/diff_pages.h"
#include "stats.h"


#include "backend_cuda_internal.h"

bool cuda_backend_ready(void)
{
	return cuda_calls_core();
}

const char *cuda_error_name(CUresult rc)
{
	const char *name = NULL;
	if (drv.error_name && drv.error_name(rc, &name) == CUDA_SUCCESS && name)
		return name;
	return "CUDA error";
}

/* The one table between the driver's results and the errnos the shim
 * passes around, both ways: a failure keeps its cause to the program
 * (a replica that cannot be made for want of memory is OUT_OF_MEMORY, one
 * the driver cannot make is NOT_SUPPORTED, ...). Anything else is EIO one
 * way and CUDA_ERROR_UNKNOWN the other. */
static const struct {
	CUresult cu;
	int err;
	cudaError_t rt; /* the runtime's name for it */
} error_table[] = {
	{CUDA_ERROR_OUT_OF_MEMORY, ENOMEM, cudaErrorMemoryAllocation},
	{CUDA_ERROR_NOT_SUPPORTED, ENOTSUP, cudaErrorNotSupported},
	{CUDA_ERROR_INVALID_VALUE, EINVAL, cudaErrorInvalidValue},
	{CUDA_ERROR_NO_DEVICE, ENODEV, cudaErrorNoDevice},
	{CUDA_ERROR_NOT_READY, EAGAIN, cudaErrorNotReady},
	{CUDA_ERROR_ALREADY_MAPPED, EEXIST, cudaErrorAlreadyMapped},
	{CUDA_ERROR_NOT_PERMITTED, EPERM, cudaErrorNotPermitted},
};

int cuda_errno_of(CUresult rc)
{
	if (rc == CUDA_SUCCESS)
		return 0;
	for (size_t i = 0; i < sizeof(error_table) / sizeof(error_table[0]); i++)
		if (error_table[i].cu == rc)
			return -error_table[i].err;
	return -EIO;
}

CUresult cuda_result_of(int rc)
{
	if (rc == 0)
		return CUDA_SUCCESS;
	for (size_t i = 0; i < sizeof(error_table) / sizeof(error_table[0]); i++)
		if (error_table[i].err == -rc)
			return error_table[i].cu;
	return CUDA_ERROR_UNKNOWN;
}

cudaError_t cuda_runtime_error_of(CUresult rc)
{
	if (rc == CUDA_SUCCESS)
		return cudaSuccess;
	for (size_t i = 0; i < sizeof(error_table) / sizeof(error_table[0]); i++)
		if (error_table[i].cu == rc)
			return error_table[i].rt;
	return cudaErrorUnknown;
}

int gpu_capture_relax(void)
{
	if (!cuda_backend_ready() || !drv.exchange_capture_mode)
		return -1;
	CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
	if (CU_CHECK(drv.exchange_capture_mode(&mode),
		     "cuThreadExchangeStreamCaptureMode (the shim's own work in relaxed capture mode)"))
		return -1; /* in the program's mode: during a capture it may be refused */
	return (int)mode;
}

void gpu_capture_restore(int mode)
{
	if (mode < 0)
		return;
	CUstreamCaptureMode m = (CUstreamCaptureMode)mode;
	(void)CU_CHECK(drv.exchange_capture_mode(&m),
		       "cuThreadExchangeStreamCaptureMode (the program's capture mode given back)");
}

int cuda_current_device(void)
{
	CUdevice dev;
	if (!cuda_backend_ready())
		return -1;
	/* No context is not an error, nor is a driver not initialised yet (a
	 * program whose first CUDA call is a launch: the runtime initialises
	 * inside it); another failure is tried once more: a launch or sync
	 * that cannot name its device cannot move its pages. */
	CUresult rc = drv.ctx_get_device(&dev);
	if (rc == CUDA_ERROR_INVALID_CONTEXT || rc == CUDA_ERROR_NOT_INITIALIZED)
		return -1;
	if (rc != CUDA_SUCCESS) {
		(void)CU_CHECK(rc, "cuCtxGetDevice");
		if (CU_CHECK(drv.ctx_get_device(&dev), "cuCtxGetDevice (tried again)"))
			return -1;
	}
	return (int)dev;
}

int cuda_synchronize(void)
{
	return CU_CHECK(drv.ctx_synchronize(), "cuCtxSynchronize");
}

/* --- the shim's own stream ---
 *
 * The shim's transfers and kernels go to a stream of its own in each
 * context, created non-blocking: the legacy stream would wait for every
 * kernel of the program's blocking streams, and a release at a sync of
 * one stream must not wait for a kernel on another one that may wait for
 * the host (README, "What a sync shows"). Copies to and from the host
 * return when done, as the synchronous calls did; what stays queued (base
 * copies, commits, the diff's launch before its answer comes down) is
 * counted, and waited for before a launch of the program on any stream
 * (a non-blocking stream is ordered after no other). Without a context or
 * a stream, the legacy stream's synchronous calls are used. */
#define SHIM_STREAMS 16
static struct {
	CUcontext ctx;
	CUstream stream;
	/* The diff stream: a sync's comparisons queued ahead (diff_start),
	 * after the shim's stream by `order`. Apart, so that the shim's
	 * copies, which other threads make under the mapping lock, never
	 * queue behind a comparison that waits for room on the device. */
	CUstream diff;
	CUevent order;
	bool diff_queued; /* since the last cuda_diffs_wait */
	/* Uploads' pinned staging (upload_staged): two buffers of
	 * stage_bytes, each with the event of its last copy; or none (the
	 * uploads then go straight from the pages, in the same chunks). */
	uint8_t *stage[2];
	CUevent stage_done[2];
	size_t stage_bytes;
	bool stage_tried;
	/* cuCtxGetId of the context that made them (0: not known): another
	 * context with the same handle (a reset) has none of them */
	unsigned long long stage_ctx_id;
} shim_streams[SHIM_STREAMS];
static unsigned nshim_streams;
static pthread_mutex_t shim_streams_lock = PTHREAD_MUTEX_INITIALIZER;

CUstream cuda_shim_stream(void)
{
	CUcontext ctx = NULL;
	if (!drv.stream_create || !drv.memcpy_htod_async || !drv.memcpy_dtoh_async ||
	    !drv.memcpy_dtod_async || !drv.stream_synchronize ||
	    CU_CHECK(drv.ctx_get_current(&ctx), "cuCtxGetCurrent (the shim's stream)") || !ctx)
		return NULL;
	CUstream s = NULL;
	pthread_mutex_lock(&shim_streams_lock);
	for (unsigned i = 0; i < nshim_streams && !s; i++)
		if (shim_streams[i].ctx == ctx)
			s = shim_streams[i].stream;
	if (!s && nshim_streams < SHIM_STREAMS &&
	    !CU_CHECK(drv.stream_create(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate (the shim's stream)"))
		shim_streams[nshim_streams++] = (typeof(shim_streams[0])){.ctx = ctx, .stream = s};
	pthread_mutex_unlock(&shim_streams_lock);
	return s;
}

/* The current context's entry in shim_streams (its stream made), or -1;
 * with shim_streams_lock held. */
static int ctx_entry_locked(const char *purpose)
{
	CUcontext ctx = NULL;
	char what[96];
	snprintf(what, sizeof(what), "cuCtxGetCurrent (%s)", purpose);
	if (CU_CHECK(drv.ctx_get_current(&ctx), what) || !ctx)
		return -1;
	for (unsigned i = 0; i < nshim_streams; i++)
		if (shim_streams[i].ctx == ctx)
			return (int)i;
	return -1;
}

/* The current context's entry in shim_streams with its diff stream and
 * event made, or -1. */
static int diff_side(void)
{
	if (!cuda_shim_stream() || !drv.event_create || !drv.event_record || !drv.stream_wait_event)
		return -1;
	pthread_mutex_lock(&shim_streams_lock);
	int found = ctx_entry_locked("the diff stream");
	if (found >= 0 && !shim_streams[found].order &&
	    CU_CHECK(drv.event_create(&shim_streams[found].order, CU_EVENT_DISABLE_TIMING),
		     "cuEventCreate (the diff stream)"))
		shim_streams[found].order = NULL;
	if (found >= 0 && shim_streams[found].order && !shim_streams[found].diff &&
	    CU_CHECK(drv.stream_create(&shim_streams[found].diff, CU_STREAM_NON_BLOCKING),
		     "cuStreamCreate (the diff stream)"))
		shim_streams[found].diff = NULL;
	if (found >= 0 && !shim_streams[found].diff)
		found = -1;
	pthread_mutex_unlock(&shim_streams_lock);
	return found;
}

int cuda_diffs_wait(void)
{
	CUstream streams[SHIM_STREAMS];
	unsigned n = 0;
	pthread_mutex_lock(&shim_streams_lock);
	for (unsigned i = 0; i < nshim_streams; i++) {
		if (shim_streams[i].diff_queued)
			streams[n++] = shim_streams[i].diff;
		shim_streams[i].diff_queued = false;
	}
	pthread_mutex_unlock(&shim_streams_lock);
	int rc = 0;
	for (unsigned i = 0; i < n; i++) {
		int r = CU_CHECK(drv.stream_synchronize(streams[i]), "cuStreamSynchronize (the diff stream)");
		rc = rc ? rc : r;
	}
	return rc;
}

/* Work the shim queued and no host wait has covered yet. */
static uint64_t shim_queued, shim_waited;

static void shim_work_queued(void)
{
	__atomic_add_fetch(&shim_queued, 1, __ATOMIC_ACQ_REL);
}

int cuda_shim_settle(void)
{
	uint64_t queued = __atomic_load_n(&shim_queued, __ATOMIC_ACQUIRE);
	if (__atomic_load_n(&shim_waited, __ATOMIC_ACQUIRE) >= queued)
		return 0;
	/* Every context's stream: the work may have been queued in another
	 * context than the caller's (enter_ctx). */
	CUstream streams[SHIM_STREAMS];
	pthread_mutex_lock(&shim_streams_lock);
	unsigned n = nshim_streams;
	for (unsigned i = 0; i < n; i++)
		streams[i] = shim_streams[i].stream;
	pthread_mutex_unlock(&shim_streams_lock);
	int rc = 0;
	for (unsigned i = 0; i < n && !rc; i++)
		rc = CU_CHECK(drv.stream_synchronize(streams[i]), "cuStreamSynchronize (the shim's stream)");
	if (!n)
		rc = CU_CHECK(drv.stream_synchronize(CU_STREAM_LEGACY), "cuStreamSynchronize (legacy stream)");
	if (rc)
		return rc;
	uint64_t seen = __atomic_load_n(&shim_waited, __ATOMIC_RELAXED);
	while (seen < queued &&
	       !__atomic_compare_exchange_n(&shim_waited, &seen, queued, true, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		;
	return 0;
}

/* "cuMemcpyXtoY[Async] (purpose)": the call a failure names. */
static const char *call_name(char *buf, size_t size, const char *call, bool async, const char *purpose)
{
	snprintf(buf, size, "%s%s (%s)", call, async ? "Async" : "", purpose);
	return buf;
}

/* A copy between host and device that returns when done. */
static int copy_host(bool to_device, CUdeviceptr dptr, void *host, size_t bytes, const char *purpose)
{
	CUstream s = cuda_shim_stream();
	char what[96];
	call_name(what, sizeof(what), to_device ? "cuMemcpyHtoD" : "cuMemcpyDtoH", s, purpose);
	CUresult rc;
	if (!s)
		rc = to_device ? drv.memcpy_htod(dptr, host, bytes) : drv.memcpy_dtoh(host, dptr, bytes);
	else
		rc = to_device ? drv.memcpy_htod_async(dptr, host, bytes, s)
			       : drv.memcpy_dtoh_async(host, dptr, bytes, s);
	int err = CU_CHECK(rc, what);
	return err || !s ? err : CU_CHECK(drv.stream_synchronize(s), "cuStreamSynchronize (the shim's stream)");
}

static int copy_htod(CUdeviceptr dst, const void *src, size_t bytes, const char *purpose)
{
	return copy_host(true, dst, (void *)src, bytes, purpose);
}

static int copy_dtoh(void *dst, CUdeviceptr src, size_t bytes, const char *purpose)
{
	return copy_host(false, src, dst, bytes, purpose);
}

/* Queued, not waited for: cuda_shim_settle covers it. */
static int copy_dtod(CUdeviceptr dst, CUdeviceptr src, size_t bytes, const char *purpose)
{
	CUstream s = cuda_shim_stream();
	char what[96];
	call_name(what, sizeof(what), "cuMemcpyDtoD", s, purpose);
	int rc = s ? CU_CHECK(drv.memcpy_dtod_async(dst, src, bytes, s), what)
		   : CU_CHECK(drv.memcpy_dtod(dst, src, bytes), what);
	shim_work_queued(); /* after the queueing: a wait must cover it */
	return rc;
}

/* --- uploads: GAIA_GPU_READAHEAD_KB chunks through pinned staging ---
 *
 * An upload crosses the bus in chunks of the GPU window (DESIGN §3.2):
 * each is copied by the CPU from the pages into one of two pinned staging
 * buffers while the other one's chunk is on its way (cuMemcpyHtoDAsync
 * from page-locked memory: the copy engine reads it directly, where a copy
 * from pageable memory goes through the driver's own staging). One upload
 * at a time uses the staging (staging_lock); it returns when its bytes
 * are on the device, as copy_htod does. */
static pthread_mutex_t staging_lock = PTHREAD_MUTEX_INITIALIZER;

size_t cuda_upload_chunk_bytes(void)
{
	return (size_t)gaia_config()->gpu_readahead_kb * 1024;
}

/* The current context's entry in shim_streams, or -1; with staging_lock
 * held. `check` (once a launch, in cuda_upload_staging_prepare): a
 * staging made for a context whose handle now names another one
 * (destroyed, then another made: cuCtxGetId tells) is forgotten: it went
 * with the first (not freed again: its addresses may be another
 * allocation's now). */
static int staging_entry(bool check)
{
	if (!cuda_shim_stream() || !drv.mem_alloc_host || !drv.mem_free_host || !drv.event_create ||
	    !drv.event_record || !drv.event_synchronize || !drv.event_destroy)
		return -1;
	pthread_mutex_lock(&shim_streams_lock);
	int found = ctx_entry_locked("upload staging");
	pthread_mutex_unlock(&shim_streams_lock);
	if (found < 0)
		return -1;
	typeof(shim_streams[0]) *e = &shim_streams[found];
	unsigned long long id = 0;
	if (check && e->stage_tried && e->stage_ctx_id && drv.ctx_get_id &&
	    !CU_CHECK(drv.ctx_get_id(e->ctx, &id), "cuCtxGetId (the uploads' pinned staging)") &&
	    id != e->stage_ctx_id) {
		gaia_info("the uploads' pinned staging went with its context: made again");
		memset(e->stage, 0, sizeof(e->stage));
		memset(e->stage_done, 0, sizeof(e->stage_done));
		e->stage_bytes = 0;
		e->stage_tried = false;
	}
	return found;
}

/* The current context's entry with its staging (staging_lock held), or
 * -1: none made (yet). */
static int staging_side(void)
{
	int i = staging_entry(false);
	return i >= 0 && shim_streams[i].stage_bytes ? i : -1;
}

/* Makes the staging of the current context once. Outside staging_lock
 * and before the shim's other locks (gpu.c calls it first): allocating
 * pinned memory takes the driver's locks, under which its own mmap calls
 * reach the shim's hooks, which take the mapping lock. */
void cuda_upload_staging_prepare(void)
{
	pthread_mutex_lock(&staging_lock);
	int i = staging_entry(true);
	bool needed = i >= 0 && !shim_streams[i].stage_tried;
	CUcontext ctx = i >= 0 ? shim_streams[i].ctx : NULL;
	pthread_mutex_unlock(&staging_lock);
	if (!needed)
		return;
	size_t chunk = cuda_upload_chunk_bytes();
	uint8_t *stage[2] = {NULL, NULL};
	CUevent done[2] = {NULL, NULL};
	unsigned long long id = 0;
	if (drv.ctx_get_id && CU_CHECK(drv.ctx_get_id(ctx, &id), "cuCtxGetId (the uploads' pinned staging)"))
		id = 0;
	bool ok = true;
	for (int b = 0; b < 2 && ok; b++)
		ok = !CU_CHECK(drv.mem_alloc_host((void **)&stage[b], chunk), "cuMemAllocHost (upload staging)") &&
		     !CU_CHECK(drv.event_create(&done[b], CU_EVENT_DISABLE_TIMING), "cuEventCreate (upload staging)");
	pthread_mutex_lock(&staging_lock);
	i = staging_entry(false);
	bool installed = ok && i >= 0 && !shim_streams[i].stage_tried && shim_streams[i].ctx == ctx;
	if (i >= 0 && shim_streams[i].ctx == ctx && !shim_streams[i].stage_tried) {
		typeof(shim_streams[0]) *e = &shim_streams[i];
		e->stage_tried = true; /* made, or given up on */
		if (installed) {
			memcpy(e->stage, stage, sizeof(stage));
			memcpy(e->stage_done, done, sizeof(done));
			e->stage_bytes = chunk;
			e->stage_ctx_id = id;
		}
	}
	pthread_mutex_unlock(&staging_lock);
	if (installed)
		return;
	if (!ok)
		gaia_info("uploads go straight from the pages, in chunks of %zu KiB: no pinned staging", chunk / 1024);
	for (int b = 0; b < 2; b++) {
		if (stage[b])
			(void)CU_FREE(drv.mem_free_host(stage[b]), "cuMemFreeHost (upload staging)");
		if (done[b])
			(void)CU_CHECK(drv.event_destroy(done[b]), "cuEventDestroy (upload staging)");
	}
}

/* bytes from src to dst in chunks of the GPU window, through the staging
 * when there is one. 0 or -errno. */
static int upload_staged(CUdeviceptr dst, const uint8_t *src, size_t bytes, bool src_is_device)
{
	size_t chunk = cuda_upload_chunk_bytes();
	pthread_mutex_lock(&staging_lock);
	int i = staging_side();
	int rc = 0;
	if (i < 0) {
		pthread_mutex_unlock(&staging_lock);
		/* A host pointer the driver takes for device memory (vmm)
		 * cannot be handed to it: bounced through the heap. */
		size_t room = bytes < chunk ? bytes : chunk;
		uint8_t *bounce = src_is_device ? malloc(room) : NULL;
		if (src_is_device && !bounce)
			return -ENOMEM;
		for (size_t done = 0; done < bytes && !rc; done += chunk) {
			size_t n = bytes - done < chunk ? bytes - done : chunk;
			if (bounce)
				memcpy(bounce, src + done, n);
			rc = copy_htod(dst + done, bounce ? bounce : src + done, n, "upload");
		}
		free(bounce);
		return rc;
	}
	typeof(shim_streams[0]) *e = &shim_streams[i];
	CUstream s = e->stream;
	bool pending[2] = {false, false}, last_queued = false;
	unsigned b = 0;
	for (size_t done = 0; done < bytes && !rc; done += chunk, b ^= 1) {
		size_t n = bytes - done < chunk ? bytes - done : chunk;
		/* The buffer's previous chunk must have left before it is
		 * filled again; the other one's is crossing meanwhile. */
		if (pending[b])
			rc = CU_CHECK(drv.event_synchronize(e->stage_done[b]), "cuEventSynchronize (upload staging)");
		if (rc)
			break;
		memcpy(e->stage[b], src + done, n);
		rc = CU_CHECK(drv.memcpy_htod_async(dst + done, e->stage[b], n, s), "cuMemcpyHtoDAsync (upload)");
		/* The last chunk's buffer is covered by the wait below. */
		bool last = done + n >= bytes;
		if (!rc && !last)
			rc = CU_CHECK(drv.event_record(e->stage_done[b], s), "cuEventRecord (upload staging)");
		pending[b] = !rc && !last;
		last_queued = !rc && last;
	}
	int w = CU_CHECK(drv.stream_synchronize(s), "cuStreamSynchronize (the shim's stream)");
	/* Not known to be done: a copy may still read a buffer. Each is
	 * waited for by its event; where one cannot be (or the last chunk,
	 * which has none), the staging is never filled again (given up, not
	 * freed). */
	bool unsafe = w && last_queued;
	for (unsigned k = 0; w && !unsafe && k < 2; k++)
		unsafe = pending[k] &&
			 CU_CHECK(drv.event_synchronize(e->stage_done[k]), "cuEventSynchronize (upload staging)");
	if (unsafe) {
		gaia_warn("uploads go straight from the pages from now on: a copy from the pinned staging could "
			  "not be waited for");
		e->stage_bytes = 0;
	}
	pthread_mutex_unlock(&staging_lock);
	return rc ? rc : w;
}


struct ctx_switch cuda_enter_ctx(const struct cuda_replica *r)
{
	struct ctx_switch s = {false, NULL};
	if (r->ctx && !CU_CHECK(drv.ctx_get_current(&s.prev), "cuCtxGetCurrent (a replica's context)") &&
	    s.prev != r->ctx)
		s.switched = !CU_CHECK(drv.ctx_set_current(r->ctx), "cuCtxSetCurrent (a replica's context)");
	return s;
}

void cuda_leave_ctx(struct ctx_switch s)
{
	if (s.switched)
		(void)CU_CHECK(drv.ctx_set_current(s.prev), "cuCtxSetCurrent (back from a replica's context)");
}

int cuda_replica_synchronize(const struct cuda_replica *r)
{
	return cuda_ctx_synchronize(r->ctx);
}

int cuda_ctx_synchronize(CUcontext ctx)
{
	struct cuda_replica r = {.ctx = ctx};
	struct ctx_switch c = cuda_enter_ctx(&r);
	int rc = cuda_synchronize();
	cuda_leave_ctx(c);
	return rc;
}

/* --- the diff kernel --- */

/* A module belongs to the context that loaded it: each context a replica
 * lives in gets its own (loaded in that context, current when asked). */
struct diff_kernels {
	CUcontext ctx;
	CUfunction fn;     /* NULL: diff on the host */
	CUfunction gather; /* NULL: a sync's changes come down as replica + base */
	CUfunction rebase; /* NULL: a rebase fetches replica and base (after a wait) */
	/* Loaded with cuFuncLoad: its first launch while the program's kernels
	 * run does not wait for them (lazy loading would). */
	bool rebase_loaded;
};
/* The CPU's bytes of a launch's rebase go up in batches of at most this
 * many pages (1 MiB), into a buffer of the replica allocated with it: a
 * launch that rebases may find the program's kernels running, and an
 * allocation then could have to wait for them. */
#define REBASE_STAGING_PAGES 256u
#define DIFF_CONTEXTS 64
static struct diff_kernels diff_kernels[DIFF_CONTEXTS];
static unsigned n_diff_kernels;
static pthread_mutex_t diff_kernels_lock = PTHREAD_MUTEX_INITIALIZER;
static const struct diff_kernels no_diff_kernels;

static void load_diff_kernels(struct diff_kernels *k)
{
	const char *ptx = gpu_diff_ptx();
	if (!ptx || !drv.module_load_data || !drv.module_get_function || !drv.launch_kernel) {
		static int once;
		gaia_log_once(&once, GAIA_LOG_INFO, "no diff kernel (%s): syncs compare pages on the host",
			      ptx ? "the driver lacks module loading" : "built without nvcc");
		return;
	}
	CUmodule mod;
	if (CU_CHECK(drv.module_load_data(&mod, ptx), "cuModuleLoadData (diff kernel)") ||
	    CU_CHECK(drv.module_get_function(&k->fn, mod, GPU_DIFF_KERNEL),
		     "cuModuleGetFunction " GPU_DIFF_KERNEL)) {
		k->fn = NULL;
		return;
	}
	if (CU_CHECK(drv.module_get_function(&k->gather, mod, GPU_GATHER_KERNEL),
		     "cuModuleGetFunction " GPU_GATHER_KERNEL))
		k->gather = NULL;
	if (CU_CHECK(drv.module_get_function(&k->rebase, mod, GPU_REBASE_KERNEL),
		     "cuModuleGetFunction " GPU_REBASE_KERNEL))
		k->rebase = NULL;
	/* Loaded now, not at their first launch: under CUDA's lazy loading
	 * (the default) a kernel first launched while another one runs
	 * waits for the device, and a program kernel spinning on the host
	 * would never let it (seen on an H200). */
	if (drv.func_load) {
		(void)CU_CHECK(drv.func_load(k->fn), "cuFuncLoad " GPU_DIFF_KERNEL);
		if (k->gather)
			(void)CU_CHECK(drv.func_load(k->gather), "cuFuncLoad " GPU_GATHER_KERNEL);
		if (k->rebase)
			k->rebase_loaded = !CU_CHECK(drv.func_load(k->rebase), "cuFuncLoad " GPU_REBASE_KERNEL);
	}
}

/* The diff kernels of the current context (the replica's), loaded the
 * first time a context asks. */
static const struct diff_kernels *diff_kernels_here(void)
{
	CUcontext ctx = NULL;
	if (!drv.ctx_get_current || drv.ctx_get_current(&ctx) != CUDA_SUCCESS || !ctx)
		return &no_diff_kernels;
	pthread_mutex_lock(&diff_kernels_lock);
	const struct diff_kernels *found = &no_diff_kernels;
	for (unsigned i = 0; i < n_diff_kernels; i++)
		if (diff_kernels[i].ctx == ctx)
			found = &diff_kernels[i];
	if (found == &no_diff_kernels && n_diff_kernels < DIFF_CONTEXTS) {
		struct diff_kernels *k = &diff_kernels[n_diff_kernels++];
		k->ctx = ctx;
		load_diff_kernels(k);
		found = k;
	}
	pthread_mutex_unlock(&diff_kernels_lock);
	return found;
}

/* --- replicas --- */

static CUdeviceptr addr_of(const struct cuda_replica *r, uint64_t page)
{
	return r->dptr + page * PG;
}

/* The region's own address is device memory to the driver (vmm): host
 * bytes read through it are never handed to the driver as a host pointer
 * (upload_staged copies them by the CPU first). */
static int upload_to(struct cuda_replica *r, CUdeviceptr dst, const void *src, size_t bytes)
{
	uintptr_t s = (uintptr_t)src;
	bool in_span = r->span_len && s < r->span_start + r->span_len && s + bytes > r->span_start;
	return upload_staged(dst, src, bytes, in_span);
}

/* A replica paged on demand is written by the CPU, never by a copy into
 * it: its pages reach the device at the kernels' faults and the shim's
 * prefetches (mode M). (A launch's rebase on the device copies the CPU's
 * bytes into a buffer of device memory, and its kernel writes them into
 * the replica.) On an H200 (docs/hardware.md, 2026-11-28) such a replica's
 * first upload, copies from pinned memory into the managed memory with
 * less of the device free than the region, failed with
 * CUDA_ERROR_ILLEGAL_ADDRESS and lost the context, where the same managed
 * buffer written by the CPU and then by a kernel ran with 3 MiB free.
 * (Its downloads and commits stay copies: nothing failed there, and the
 * CPU's reads would bring the device's pages home.)
 *
 * The CPU's bytes go into the replica and/or its base (`to`), after the
 * shim's queued work that reads or writes them (commits, rebases). The
 * replica's pages are brought to the host first in one prefetch (a hint:
 * else the CPU faults on each page it writes). With both, the program's
 * mapping is read once, into the base, and the replica copied from there:
 * threads may store into the mapping between two reads, and a base that
 * differed from the replica where the device wrote nothing would make the
 * sync write the older byte back. */
static int paged_write(struct cuda_replica *r, unsigned to, uint64_t first, const void *src, size_t bytes)
{
	int rc = cuda_shim_settle();
	if (rc)
		return rc;
	if ((to & DEVICE_REPLICA) && drv.prefetch) {
		CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
		CUstream s = cuda_shim_stream();
		if (!CU_CHECK(drv.prefetch(addr_of(r, first), bytes, host, 0, s),
			      "cuMemPrefetchAsync (a paged replica's pages to the host, a hint)"))
			rc = CU_CHECK(drv.stream_synchronize(s), "cuStreamSynchronize (the shim's stream)");
		if (rc)
			return rc;
	}
	if (to & DEVICE_BASE) {
		uint8_t *base = (uint8_t *)(uintptr_t)(r->base + first * PG);
		memcpy(base, src, bytes);
		src = base;
	}
	if (to & DEVICE_REPLICA) {
		memcpy((uint8_t *)(uintptr_t)addr_of(r, first), src, bytes);
		stats_add(GAIA_STAT_paged_fill_bytes, bytes);
		r->dirty_since_prefetch = true;
	}
	return 0;
}

static int replica_upload(void *rep, unsigned to, uint64_t first, uint64_t npages, const void *src)
{
	struct cuda_replica *r = rep;
	r->writes++;
	size_t bytes = npages * PG;
	int rc = 0;
	if (r->paged)
		return paged_write(r, to, first, src, bytes);
	if (to & DEVICE_REPLICA) {
		rc = upload_to(r, addr_of(r, first), src, bytes);
		if (!rc && (to & DEVICE_BASE))
			rc = copy_dtod(r->base + first * PG, addr_of(r, first), bytes, "base copy");
	} else if (to & DEVICE_BASE) {
		rc = upload_to(r, r->base + first * PG, src, bytes);
	}
	if (!rc) {
		size_t chunk = cuda_upload_chunk_bytes();
		stats_add(GAIA_STAT_h2d_bytes, bytes);
		stats_add(GAIA_STAT_h2d_transfers, (bytes + chunk - 1) / chunk);
		r->dirty_since_prefetch = true;
	}
	return rc;
}

static int replica_download(void *rep, unsigned from, uint64_t first, uint64_t npages, void *dst)
{
	struct cuda_replica *r = rep;
	CUdeviceptr src = from == DEVICE_BASE ? r->base + first * PG : addr_of(r, first);
	int rc = copy_dtoh(dst, src, npages * PG, "download");
	if (!rc) {
		stats_add(GAIA_STAT_d2h_bytes, npages * PG);
		stats_add(GAIA_STAT_d2h_transfers, 1);
	}
	return rc;
}

static int replica_commit(void *rep, uint64_t first, uint64_t npages)
{
	struct cuda_replica *r = rep;
	r->writes++;
	return copy_dtod(r->base + first * PG, addr_of(r, first), npages * PG, "commit");
}

static void report_runs(const uint8_t *changed_pages, uint64_t first, uint64_t npages,
			void (*changed)(uint64_t, uint64_t, void *), void *arg)
{
	uint64_t run = 0, run_start = 0;
	for (uint64_t p = 0; p < npages; p++) {
		if (changed_pages[p]) {
			if (!run)
				run_start = p;
			run++;
		} else if (run) {
			changed(first + run_start, run, arg);
			run = 0;
		}
	}
	if (run)
		changed(first + run_start, run, arg);
}

/* Without the kernel: both copies come to the host (twice the bytes of
 * the pages compared). */
static int diff_on_host(struct cuda_replica *r, uint64_t first, uint64_t npages, uint8_t *out)
{
	enum { BATCH = 256 };
	uint8_t *buf = malloc(2 * BATCH * PG);
	if (!buf)
		return -ENOMEM;
	int rc = 0;
	for (uint64_t done = 0; done < npages && !rc; done += BATCH) {
		uint64_t n = npages - done < BATCH ? npages - done : BATCH;
		rc = replica_download(r, DEVICE_REPLICA, first + done, n, buf);
		if (!rc)
			rc = replica_download(r, DEVICE_BASE, first + done, n, buf + BATCH * PG);
		for (uint64_t i = 0; !rc && i < n; i++)
			out[done + i] = memcmp(buf + i * PG, buf + (BATCH + i) * PG, PG) != 0;
	}
	free(buf);
	return rc;
}

/* The diff kernel over pages [first, first+npages) on stream s, its answer
 * at changed + first. */
static int launch_diff(const struct diff_kernels *dk, struct cuda_replica *r, uint64_t first, uint64_t npages,
		       CUstream s)
{
	CUdeviceptr rep_p = addr_of(r, first), base_p = r->base + first * PG, out = r->changed + first;
	unsigned long long n = npages;
	void *params[] = {&rep_p, &base_p, &n, &out};
	unsigned blocks = (unsigned)((npages + GAIA_DIFF_BLOCK - 1) / GAIA_DIFF_BLOCK);
	if (blocks > 65535)
		blocks = 65535;
	return CU_CHECK(drv.launch_kernel(dk->fn, blocks, 1, 1, GAIA_DIFF_BLOCK, 1, 1, 0, s, params, NULL),
			"cuLaunchKernel (diff)");
}

/* The replica's diff stream (its context's; the replica's context is
 * current), or NULL. */
static CUstream replica_diff_stream(void)
{
	int i = diff_side();
	return i < 0 ? NULL : shim_streams[i].diff;
}

void cuda_replica_settle_diffs(struct cuda_replica *r)
{
	r->nstarted = 0;
	if (!r->diff_in_flight)
		return;
	struct ctx_switch c = cuda_enter_ctx(r);
	CUstream s = replica_diff_stream();
	if (s)
		(void)CU_CHECK(drv.stream_synchronize(s), "cuStreamSynchronize (the diff stream)");
	cuda_leave_ctx(c);
	r->diff_in_flight = false;
}

static bool overlap(const struct cuda_started_diff *d, uint64_t first, uint64_t npages)
{
	return d->first < first + npages && first < d->first + d->npages;
}

/* Queued ahead of a sync (device_ops.diff_start): the kernel on the diff
 * stream, after what the shim's stream holds; nothing waits for it here.
 * An earlier answer for pages it covers is forgotten: the new one lands
 * over it, later on the same stream. */
static int replica_diff_start(void *rep, uint64_t first, uint64_t npages)
{
	struct cuda_replica *r = rep;
	const struct diff_kernels *dk = diff_kernels_here();
	if (!dk->fn || !r->base || !r->changed || first + npages > r->changed_pages || r->paged)
		return -ENOTSUP;
	if (r->nstarted == r->started_capacity) {
		unsigned cap = r->started_capacity ? 2 * r->started_capacity : 8;
		struct cuda_started_diff *more = realloc(r->started, cap * sizeof(*more));
		if (!more)
			return -ENOMEM;
		r->started = more;
		r->started_capacity = cap;
	}
	int i = diff_side();
	if (i < 0)
		return -ENOTSUP;
	CUstream s = shim_streams[i].diff;
	if (CU_CHECK(drv.event_record(shim_streams[i].order, cuda_shim_stream()), "cuEventRecord (the diff stream)") ||
	    CU_CHECK(drv.stream_wait_event(s, shim_streams[i].order, 0), "cuStreamWaitEvent (the diff stream)"))
		return -EIO;
	r->diff_in_flight = true; /* from the launch on, even a failed one */
	if (launch_diff(dk, r, first, npages, s))
		return -EIO;
	pthread_mutex_lock(&shim_streams_lock);
	shim_streams[i].diff_queued = true;
	pthread_mutex_unlock(&shim_streams_lock);
	for (unsigned k = 0; k < r->nstarted;) {
		if (overlap(&r->started[k], first, npages))
			r->started[k] = r->started[--r->nstarted];
		else
			k++;
	}
	r->started[r->nstarted++] = (struct cuda_started_diff){first, npages, r->writes};
	return 0;
}

/* Forgets the answers without waiting: a comparison still running writes
 * only `changed`, and whatever else writes there waits for it first
 * (diff_in_flight). */
static void op_diff_drop(void *rep)
{
	((struct cuda_replica *)rep)->nstarted = 0;
}

/* Whether a comparison of exactly these pages was queued with replica and
 * base as they are now: its answer is then taken (and no longer queued).
 * Queued ones over other pages that overlap these are forgotten: the
 * answer about to be computed lands over theirs. */
static bool take_started(struct cuda_replica *r, uint64_t first, uint64_t npages)
{
	bool taken = false;
	for (unsigned i = 0; i < r->nstarted;) {
		const struct cuda_started_diff *d = &r->started[i];
		if (d->first == first && d->npages == npages)
			taken = d->writes == r->writes;
		else if (!overlap(d, first, npages)) {
			i++;
			continue;
		}
		r->started[i] = r->started[--r->nstarted];
	}
	/* Waited for already (cuda_diffs_wait), unless that failed; a
	 * comparison made now must not race one still running. */
	if (r->diff_in_flight) {
		CUstream s = replica_diff_stream();
		if (s && CU_CHECK(drv.stream_synchronize(s), "cuStreamSynchronize (the diff stream)"))
			taken = false;
		r->diff_in_flight = false;
	}
	return taken;
}

static int replica_diff(void *rep, uint64_t first, uint64_t npages,
			void (*changed)(uint64_t, uint64_t, void *), void *arg)
{
	struct cuda_replica *r = rep;
	const struct diff_kernels *dk = diff_kernels_here();
	uint8_t *answer = calloc(npages ? npages : 1, 1);
	if (!answer)
		return -ENOMEM;
	int rc = 0;
	/* A paged replica is compared where its pages are: those no kernel
	 * touched never leave the host (the kernel would bring every page
	 * to the device, evicting as it goes). */
	if (!dk->fn || r->paged) {
		rc = diff_on_host(r, first, npages, answer);
		r->learned.due = true; /* the host's reads may have brought pages back */
	} else {
		bool taken = take_started(r, first, npages);
		if (!taken && first + npages > r->changed_pages) {
			cuda_replica_settle_diffs(r);
			if (r->changed)
				(void)CU_FREE(drv.mem_free(r->changed), "cuMemFree (freeing device memory)");
			r->changed = 0;
			r->changed_pages = 0;
			rc = CU_CHECK(drv.mem_alloc(&r->changed, first + npages), "cuMemAlloc (diff answer)");
			if (rc)
				goto out;
			r->changed_pages = first + npages;
		}
		if (!taken)
			rc = launch_diff(dk, r, first, npages, cuda_shim_stream());
		/* The download on the same stream waits for the kernel. */
		if (!rc)
			rc = copy_dtoh(answer, r->changed + first, npages, "diff");
		if (!rc) {
			stats_add(GAIA_STAT_d2h_bytes, npages);
			stats_add(GAIA_STAT_d2h_transfers, 1);
		}
	}
	if (!rc)
		report_runs(answer, first, npages, changed, arg);
out:
	free(answer);
	return rc;
}

/* A sync's changed pages, gathered on the device into one buffer with
 * their byte masks: two downloads per batch however scattered the pages. */
static int replica_fetch_changes(void *rep, const uint64_t *pages, uint64_t npages, void *dev_out,
				 uint8_t *mask_out)
{
	struct cuda_replica *r = rep;
	const struct diff_kernels *dk = diff_kernels_here();
	if (!dk->gather || !r->base)
		return -ENOTSUP;
	if (npages > r->gather_capacity) {
		if (r->gather_buf)
			(void)CU_FREE(drv.mem_free(r->gather_buf), "cuMemFree (freeing device memory)");
		r->gather_buf = 0;
		r->gather_capacity = 0;
		int rc = CU_CHECK(drv.mem_alloc(&r->gather_buf, npages * (PG + PG / 8 + 8)),
				  "cuMemAlloc (gather buffer)");
		if (rc)
			return rc;
		r->gather_capacity = npages;
	}
	CUdeviceptr out_pages = r->gather_buf, out_masks = out_pages + npages * PG,
		    list = out_masks + npages * (PG / 8);
	int rc = copy_htod(list, pages, npages * 8, "page list");
	if (rc)
		return rc;
	CUdeviceptr rep_p = r->dptr, base_p = r->base;
	unsigned long long n = npages;
	void *params[] = {&rep_p, &base_p, &list, &n, &out_pages, &out_masks};
	unsigned blocks = (unsigned)((npages + GAIA_DIFF_BLOCK - 1) / GAIA_DIFF_BLOCK);
	rc = CU_CHECK(drv.launch_kernel(dk->gather, blocks, 1, 1, GAIA_DIFF_BLOCK, 1, 1, 0,
					cuda_shim_stream(), params, NULL),
		      "cuLaunchKernel (gather)");
	if (!rc)
		rc = copy_dtoh(dev_out, out_pages, npages * PG, "changes");
	if (!rc)
		rc = copy_dtoh(mask_out, out_masks, npages * (PG / 8), "masks");
	if (!rc) {
		stats_add(GAIA_STAT_d2h_bytes, npages * (PG + PG / 8));
		stats_add(GAIA_STAT_d2h_transfers, 2);
	}
	return rc;
}

/* A launch's rebase on the device (device_ops.rebase): the CPU's bytes go
 * up into the replica's staging buffer, and the rebase kernel runs on the
 * shim's stream, which waits for none of the program's kernels; the next
 * batch's upload, on the same stream, waits for the kernel that reads the
 * buffer. */
static int replica_rebase(void *rep, uint64_t first, uint64_t npages, const void *cpu)
{
	struct cuda_replica *r = rep;
	r->writes++;
	const struct diff_kernels *dk = diff_kernels_here();
	CUstream s = cuda_shim_stream();
	if (!dk->rebase || !r->base || !r->rebase_cpu || !s)
		return -ENOTSUP;
	int rc = 0;
	for (uint64_t done = 0; done < npages && !rc;) {
		uint64_t n = npages - done < r->rebase_pages ? npages - done : r->rebase_pages;
		rc = upload_to(r, r->rebase_cpu, (const uint8_t *)cpu + done * PG, n * PG);
		if (rc)
			break;
		stats_add(GAIA_STAT_h2d_bytes, n * PG);
		stats_add(GAIA_STAT_h2d_transfers, 1);
		CUdeviceptr rep_p = r->dptr, base_p = r->base, cpu_p = r->rebase_cpu;
		unsigned long long at = first + done, count = n;
		void *params[] = {&rep_p, &base_p, &at, &count, &cpu_p};
		unsigned long long words = n * GAIA_DIFF_WORDS_PER_PAGE;
		unsigned blocks = (unsigned)((words + GAIA_DIFF_BLOCK - 1) / GAIA_DIFF_BLOCK);
		rc = CU_CHECK(drv.launch_kernel(dk->rebase, blocks, 1, 1, GAIA_DIFF_BLOCK, 1, 1, 0, s, params,
						NULL),
			      "cuLaunchKernel (rebase)");
		shim_work_queued(); /* the program's next launch waits for it */
		done += n;
	}
	/* (The kernel stores on the device: nothing for a managed replica's
	 * prefetch to move.) */
	return rc;
}

bool cuda_replica_rebases_in_place(const struct cuda_replica *r, uint64_t npages)
{
	struct ctx_switch c = cuda_enter_ctx(r);
	const struct diff_kernels *dk = diff_kernels_here();
	bool yes = r->base && r->rebase_cpu && npages <= r->rebase_pages && dk->rebase && dk->rebase_loaded &&
		   cuda_shim_stream();
	cuda_leave_ctx(c);
	return yes;
}

/* The operations, each in the replica's context. */
#define IN_CTX(rep, call)                                   \
	({                                                  \
		struct ctx_switch c_ = cuda_enter_ctx(rep);      \
		int rc_ = (call);                           \
		cuda_leave_ctx(c_);                              \
		rc_;                                        \
	})

static int op_upload(void *rep, unsigned to, uint64_t first, uint64_t npages, const void *src)
{
	return IN_CTX(rep, replica_upload(rep, to, first, npages, src));
}

static int op_download(void *rep, unsigned from, uint64_t first, uint64_t npages, void *dst)
{
	return IN_CTX(rep, replica_download(rep, from, first, npages, dst));
}

static int op_commit(void *rep, uint64_t first, uint64_t npages)
{
	return IN_CTX(rep, replica_commit(rep, first, npages));
}

static int op_diff(void *rep, uint64_t first, uint64_t npages, void (*changed)(uint64_t, uint64_t, void *),
		   void *arg)
{
	return IN_CTX(rep, replica_diff(rep, first, npages, changed, arg));
}

static int op_fetch_changes(void *rep, const uint64_t *pages, uint64_t npages, void *dev_out, uint8_t *mask_out)
{
	return IN_CTX(rep, replica_fetch_changes(rep, pages, npages, dev_out, mask_out));
}

static int op_rebase(void *rep, uint64_t first, uint64_t npages, const void *cpu)
{
	return IN_CTX(rep, replica_rebase(rep, first, npages, cpu));
}

static int op_diff_start(void *rep, uint64_t first, uint64_t npages)
{
	return IN_CTX(rep, replica_diff_start(rep, first, npages));
}

const struct device_ops cuda_device_ops = {
	.upload = op_upload,
	.download = op_download,
	.commit = op_commit,
	.diff = op_diff,
	.fetch_changes = op_fetch_changes,
	.rebase = op_rebase,
	.diff_start = op_diff_start,
	.diff_drop = op_diff_drop,
};

/* --- creating replicas --- */

/* A writable replica's base copies and the diff's answer buffer (a byte a
 * page), allocated with the replica, and the diff kernel loaded: at a sync
 * the program's kernels may still run, and neither a module load nor an
 * allocation may have to wait for them then. */
/* A paged replica's base copies: managed memory that prefers the host
 * and that the device reaches there, so that they take no device memory
 * and never evict the replica's pages. */
static int alloc_host_base(struct cuda_replica *r)
{
	if (!drv.mem_alloc_managed)
		return -ENOTSUP;
	int rc = CU_CHECK(drv.mem_alloc_managed(&r->base, r->len, CU_MEM_ATTACH_GLOBAL),
			  "cuMemAllocManaged (base copies on the host)");
	if (rc)
		return rc;
	if (drv.mem_advise) {
		CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
		CUmemLocation dev = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = r->device};
		/* Hints: without them the base pages the device compares
		 * migrate there like the replica's. */
		(void)CU_CHECK(drv.mem_advise(r->base, r->len, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, host),
			       "cuMemAdvise (base copies prefer the host)");
		(void)CU_CHECK(drv.mem_advise(r->base, r->len, CU_MEM_ADVISE_SET_ACCESSED_BY, dev),
			       "cuMemAdvise (base copies reached from the device)");
	}
	return 0;
}

int cuda_alloc_base(struct cuda_replica *r, bool writable)
{
	if (!writable)
		return 0;
	const struct diff_kernels *dk = diff_kernels_here();
	int rc = r->paged ? alloc_host_base(r) : CU_CHECK(drv.mem_alloc(&r->base, r->len), "cuMemAlloc (base copies)");
	size_t pages = (r->len + PG - 1) / PG;
	/* A paged replica is compared on the host: no answer buffer. */
	if (!rc && dk->fn && !r->paged && !CU_CHECK(drv.mem_alloc(&r->changed, pages), "cuMemAlloc (diff answer)"))
		r->changed_pages = pages;
	/* Without it a launch that rebases waits for the device first. */
	size_t staging = pages < REBASE_STAGING_PAGES ? pages : REBASE_STAGING_PAGES;
	if (!rc && dk->rebase &&
	    !CU_CHECK(drv.mem_alloc(&r->rebase_cpu, staging * PG), "cuMemAlloc (the CPU's bytes of a rebase)"))
		r->rebase_pages = staging;
	return rc;
}

int cuda_func_param(const void *func, enum gpu_func_kind kind, size_t index, size_t *offset,
		    size_t *size)
{
	if (kind == GPU_FUNC_DRIVER) {
		if (!drv.func_param_info)
			return -ENOTSUP;
		/* Past the last parameter the driver answers INVALID_VALUE. The
		 * runtime (cudart 12 and 13) launches with a CUkernel where a
		 * CUfunction goes; cuFuncGetParamInfo refuses those handles
		 * (INVALID_HANDLE, seen on an H200 with driver 580), and
		 * cuKernelGetParamInfo answers for them. */
		CUresult rc = drv.func_param_info((CUfunction)func, index, offset, size);
		if (rc == CUDA_ERROR_INVALID_HANDLE && drv.kernel_param_info)
			rc = drv.kernel_param_info((CUkernel)func, index, offset, size);
		if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_INVALID_VALUE)
			gaia_log(GAIA_LOG_INFO, "cuFuncGetParamInfo and cuKernelGetParamInfo(%p, %zu): %s (%d)",
				 func, index, cuda_error_name(rc), (int)rc);
		return rc == CUDA_SUCCESS ? 0 : rc == CUDA_ERROR_INVALID_VALUE ? -ENOENT : -EIO;
	}
	if (kind == GPU_FUNC_RUNTIME) {
		/* From the libcudart the program loaded, wherever (a runtime-API
		 * launch names a host stub, not a driver function); without a way
		 * to keep the program's last error clean, not asked. */
		gaia_rt_func_param_info_fn info =
			(gaia_rt_func_param_info_fn)cuda_runtime_real_for(func, "cudaFuncGetParamInfo");
		gaia_rt_error_fn peek = (gaia_rt_error_fn)cuda_runtime_real_for(func, "cudaPeekAtLastError");
		gaia_rt_error_fn get = (gaia_rt_error_fn)cuda_runtime_real_for(func, "cudaGetLastError");
		if (!info || !peek || !get)
			return -ENOTSUP;
		/* Asking past the last parameter is an error the runtime records
		 * as the program's last error: clear it, unless the program had
		 * one pending already. */
		bool clean = peek() == cudaSuccess;
		cudaError_t rc = info(func, index, offset, size);
		if (rc == cudaSuccess)
			return 0;
		if (clean)
			get();
		return rc == cudaErrorInvalidValue ? -ENOENT : -EIO;
	}
	return -ENOTSUP;
}
