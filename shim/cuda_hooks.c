/* The CUDA interception layer (DESIGN §3.5): every way a program reaches
 * a kernel launch or a host synchronization ends in one of the wrappers
 * below, which tell the protocol (gpu.h) and forward to the real driver.
 *
 * A program reaches the driver in three ways, and each is covered:
 *  - static cudart (nvcc's default), cuBLAS and the like dlopen
 *    libcuda.so.1 and dlsym "cuGetProcAddress_v2" (or plain driver names)
 *    from its handle: the dlsym hook (dlsym_entry.S, gaia_dlsym_handle)
 *    hands back a wrapper for every wrapped name that comes from libcuda;
 *  - everything else is looked up through cuGetProcAddress by base name,
 *    cudaVersion and flags, and cudart 13 makes those lookups through the
 *    pointer it got for "cuGetProcAddress" itself: both resolver ABIs are
 *    wrapped, substitute for what they resolve, and substitute themselves
 *    for that self-lookup (research/cuda_interpose.md §1.2);
 *  - a program linked with -lcuda calls the ABI names, which the shim
 *    exports; one linked with a shared libcudart calls the runtime names,
 *    also exported, and forwarded with RTLD_NEXT (cuda_runtime_hooks.c).
 *
 * Everything is keyed by one table of rows (base name, cudaVersion,
 * per-thread, ABI name, wrapper, real pointer). A wrapper's real pointer is
 * the one the driver handed out when it was substituted, or else the ABI
 * name looked up in the real libcuda.so.1.
 *
 * Nesting: gpu_hook_depth is raised while a wrapper acts, so the driver
 * wrappers that a runtime-API hook's cudart reaches, and any driver call
 * the protocol makes, forward without acting: one launch is reported once.
 */
#define _GNU_SOURCE
#include "cuda_hooks.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

/* Code reachable from dlsym, which a sanitizer runtime preloaded ahead of
 * the shim calls before it has initialised itself. */
#define GAIA_NO_SANITIZE __attribute__((no_sanitize("address", "thread", "undefined")))

struct hook {
	const char *base;
	int version;
	bool per_thread;
	enum hook_lib lib;
	const char *abi;
	void *wrapper;
	void *real; /* atomic: the real entry point, once known */
};

/* Defined at the end of the file, after the wrappers it points to. */
static struct hook hooks[HOOK_COUNT];

/* ------------------------------------------------------------------ */
/* The dlsym hook proper                                              */

/* Called from dlsym_entry.S for a real handle. */
GAIA_HIDDEN void *gaia_dlsym_handle(void *handle, const char *name);

/* The driver row whose ABI name is `name`, or -1. */
static GAIA_NO_SANITIZE int hook_by_abi(const char *name)
{
	if (name[0] != 'c' || name[1] != 'u' || name[2] < 'A' || name[2] > 'Z')
		return -1;
	for (int i = 0; i < HOOK_COUNT; i++)
		if (hooks[i].lib == DRV && strcmp(hooks[i].abi, name) == 0)
			return i;
	return -1;
}

/* Whether `addr` lies in a libcuda.so* (the real driver, whatever its
 * path), rather than in the shim or any other object. */
static GAIA_NO_SANITIZE bool in_libcuda(const void *addr)
{
	Dl_info info;
	const char *base;

	if (!dladdr(addr, &info) || !info.dli_fname)
		return false;
	base = strrchr(info.dli_fname, '/');
	base = base ? base + 1 : info.dli_fname;
	return strncmp(base, "libcuda.so", 10) == 0;
}

static void hook_remember(int id, void *real)
{
	__atomic_store_n(&hooks[id].real, real, __ATOMIC_RELEASE);
}

/* dlsym(handle, name) for a real handle (dlsym_entry.S sends the
 * pseudo-handles straight to the real dlsym). The answer is the real one
 * except for a wrapped driver name that resolved into libcuda: then the
 * wrapper, which remembers what it stands in front of. */
GAIA_HIDDEN GAIA_NO_SANITIZE void *gaia_dlsym_handle(void *handle, const char *name)
{
	void *p = cuda_loader_dlsym(handle, name);
	int id;

	if (!p || !name)
		return p;
	id = hook_by_abi(name);
	if (id < 0 || !in_libcuda(p))
		return p;
	hook_remember(id, p);
	return hooks[id].wrapper;
}

/* ------------------------------------------------------------------ */
/* Real entry points by ABI name                                      */

/* The real function behind row `id`: what was substituted, else looked
 * up by its ABI name. NULL when the library is not loaded. */
void *hook_real(enum hook_id id)
{
	void *p = __atomic_load_n(&hooks[id].real, __ATOMIC_ACQUIRE);

	if (p)
		return p;
	/* A runtime row: the global scope after the shim only; a runtime in
	 * a caller's own scope is the caller's (cuda_runtime_real_for). */
	p = hooks[id].lib == DRV ? cuda_real(hooks[id].abi) : dlsym(RTLD_NEXT, hooks[id].abi);
	if (p)
		hook_remember(id, p);
	return p;
}

/* ------------------------------------------------------------------ */
/* cuGetProcAddress                                                    */

/* The row that stands for (symbol, cudaVersion, flags), or -1. */
static int hook_for_lookup(const char *symbol, int version, cuuint64_t flags)
{
	bool want_pt = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
	int best[2] = {-1, -1}; /* [0] legacy, [1] per-thread */

	for (int i = 0; i < HOOK_COUNT; i++) {
		const struct hook *h = &hooks[i];
		int *b = &best[h->per_thread];

		if (h->lib != DRV || h->version > version || strcmp(h->base, symbol) != 0)
			continue;
		if (*b < 0 || hooks[*b].version < h->version)
			*b = i;
	}
	return want_pt && best[1] >= 0 ? best[1] : best[0];
}

/* After a resolver answered (symbol, version, flags) with *pfn: put the
 * wrapper in its place when the row is known. Only ever for a resolved
 * symbol: a NULL *pfn means "absent" and must stay NULL. */
void procaddr_substitute(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
	int id;

	if (!symbol || !pfn || !*pfn)
		return;
	id = hook_for_lookup(symbol, version, flags);
	if (id < 0)
		return;
	hook_remember(id, *pfn);
	*pfn = hooks[id].wrapper;
}

GAIA_EXPORT CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
						  CUdriverProcAddressQueryResult *symbolStatus)
{
	__typeof__(&cuGetProcAddress_v2) real = REAL_OF(cuGetProcAddress_v2);
	CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	CUresult rc;

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	rc = real(symbol, pfn, cudaVersion, flags, &status);
	if (symbolStatus)
		*symbolStatus = status;
	if (rc == CUDA_SUCCESS && status == CU_GET_PROC_ADDRESS_SUCCESS)
		procaddr_substitute(symbol, pfn, cudaVersion, flags);
	return rc;
}

GAIA_EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	__typeof__(&cuGetProcAddress) real = REAL_OF(cuGetProcAddress);
	CUresult rc;

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	rc = real(symbol, pfn, cudaVersion, flags);
	if (rc == CUDA_SUCCESS)
		procaddr_substitute(symbol, pfn, cudaVersion, flags);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Driver wrappers                                                    */

static pthread_once_t driver_init_once = PTHREAD_ONCE_INIT;

static void before_driver_init(void)
{
	gpu_hook_depth++;
	gpu_before_driver_init();
	gpu_hook_depth--;
}

GAIA_EXPORT CUresult CUDAAPI cuInit(unsigned int Flags)
{
	__typeof__(&cuInit) real = REAL_OF(cuInit);

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	pthread_once(&driver_init_once, before_driver_init);
	return real(Flags);
}

/* Whether the program uses CUDA before it has called it: a CUDA library
 * loaded, or device code in the executable (static cudart loads libcuda
 * only at the first CUDA call). */
static bool exe_has_device_code(void)
{
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool found = false;
	Elf64_Ehdr eh;
	if (pread(fd, &eh, sizeof(eh), 0) == (ssize_t)sizeof(eh) && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
	    eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_shentsize == sizeof(Elf64_Shdr) && eh.e_shnum &&
	    eh.e_shnum < 4096 && eh.e_shstrndx < eh.e_shnum) {
		Elf64_Shdr *sh = malloc((size_t)eh.e_shnum * sizeof(*sh));
		size_t shbytes = (size_t)eh.e_shnum * sizeof(*sh);
		if (sh && pread(fd, sh, shbytes, (off_t)eh.e_shoff) == (ssize_t)shbytes) {
			const Elf64_Shdr *names = &sh[eh.e_shstrndx];
			size_t nlen = names->sh_size < (1u << 20) ? names->sh_size : 0;
			char *strs = nlen ? malloc(nlen + 1) : NULL;
			if (strs && pread(fd, strs, nlen, (off_t)names->sh_offset) == (ssize_t)nlen) {
				strs[nlen] = 0;
				for (unsigned k = 0; k < eh.e_shnum && !found; k++)
					found = sh[k].sh_name < nlen && strcmp(strs + sh[k].sh_name, ".nv_fatbin") == 0;
			}
			free(strs);
		}
		free(sh);
	}
	close(fd);
	return found;
}

static bool program_uses_cuda(void)
{
	static const char *const libs[] = {"libcuda.so.1", "libcudart.so.13", "libcudart.so.12", "libcudart.so"};
	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
		void *h = dlopen(libs[i], RTLD_NOW | RTLD_NOLOAD);
		if (h) {
			dlclose(h);
			return true;
		}
	}
	return exe_has_device_code();
}

static pthread_once_t before_placing_once = PTHREAD_ONCE_INIT;

static void init_driver_early(void)
{
	/* managed memory goes anywhere: the driver may initialise when the
	 * program first calls it, as it would without the shim. */
	int knob = gaia_config()->backing;
	if (knob == GAIA_BACKING_MANAGED || knob == GAIA_BACKING_PAGED || !program_uses_cuda())
		return;
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		gaia_debug("no libcuda.so.1 to initialise before placing mappings: %s", dlerror());
		return;
	}
	CUresult rc = cuInit(0);
	if (rc != CUDA_SUCCESS) {
		const char *name = NULL;
		__typeof__(&cuGetErrorName) err_name = cuda_calls()->error_name;
		if (!err_name || err_name(rc, &name) != CUDA_SUCCESS)
			name = NULL;
		gaia_warn("cuInit (the shim's, before placing the first managed mapping) failed: %s (%d); "
			  "device copies of regions mapped before the program's own first CUDA call may "
			  "have to go to managed memory", name ? name : "unknown error", (int)rc);
	} else {
		gaia_debug("the driver initialised before the first managed mapping was placed");
	}
}

void gpu_before_placing(void)
{
	pthread_once(&before_placing_once, init_driver_early);
}

/* What a launch hands the protocol. `per_thread`: the call was a _ptsz
 * one, whose NULL stream is the calling thread's default stream; the
 * protocol is told so explicitly (CU_STREAM_PER_THREAD), since the driver
 * calls it makes itself are the legacy-stream ones. */
struct gpu_launch launch_info(enum gpu_func_kind kind, const void *func, CUstream stream, bool per_thread,
			      void **params, void **extra)
{
	struct gpu_launch l = {
		.kind = kind,
		.func = func,
		.stream = per_thread && !stream ? CU_STREAM_PER_THREAD : stream,
		.params = params,
		.extra = extra,
	};
	return l;
}

/* The body every driver launch wrapper shares: `call` is the real launch
 * written with l.fwd_params / l.fwd_extra. */
/* The protocol runs with the thread's capture mode relaxed (gpu.h); the
 * program's own call runs in the program's mode. */
#define LAUNCH(real, info, call)                                             \
	do {                                                                 \
		struct gpu_launch l = (info);                                \
		CUresult rc_;                                                \
		if (!(real))                                                 \
			return CUDA_ERROR_NOT_INITIALIZED;                   \
		gpu_hook_depth++;                                            \
		int mode_ = gpu_capture_relax();                             \
		gpu_launch_prepare(&l);                                      \
		gpu_capture_restore(mode_);                                  \
		rc_ = l.error ? l.error : (call);                            \
		mode_ = gpu_capture_relax();                                 \
		gpu_launch_done(&l, rc_);                                    \
		gpu_capture_restore(mode_);                                  \
		gpu_hook_depth--;                                            \
		return rc_;                                                  \
	} while (0)

static CUresult launch_kernel(PFN_cuLaunchKernel_v4000 real, bool pt, CUfunction f, unsigned int gx, unsigned int gy,
			      unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int smem,
			      CUstream s, void **params, void **extra)
{
	if (real && gpu_hook_depth)
		return real(f, gx, gy, gz, bx, by, bz, smem, s, params, extra);
	LAUNCH(real, launch_info(GPU_FUNC_DRIVER, f, s, pt, params, extra),
	       real(f, gx, gy, gz, bx, by, bz, smem, s, l.fwd_params, l.fwd_extra));
}

GAIA_EXPORT CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
					     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
					     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
					     void **kernelParams, void **extra)
{
	return launch_kernel(REAL_OF(cuLaunchKernel), false, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
			     blockDimZ, sharedMemBytes, hStream, kernelParams, extra);
}

GAIA_EXPORT CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
						  unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
						  unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
						  void **kernelParams, void **extra)
{
	return launch_kernel(REAL_OF(cuLaunchKernel_ptsz), true, f, gridDimX, gridDimY, gridDimZ, blockDimX,
			     blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams, extra);
}

/* cuLaunchKernelEx: the stream is in the config. */
static CUresult launch_kernel_ex(PFN_cuLaunchKernelEx_v11060 real, bool pt, const CUlaunchConfig *config,
				 CUfunction f, void **params, void **extra)
{
	if (real && gpu_hook_depth)
		return real(config, f, params, extra);
	LAUNCH(real, launch_info(GPU_FUNC_DRIVER, f, config ? config->hStream : NULL, pt, params, extra),
	       real(config, f, l.fwd_params, l.fwd_extra));
}

GAIA_EXPORT CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
					       void **extra)
{
	return launch_kernel_ex(REAL_OF(cuLaunchKernelEx), false, config, f, kernelParams, extra);
}

GAIA_EXPORT CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
						    void **extra)
{
	return launch_kernel_ex(REAL_OF(cuLaunchKernelEx_ptsz), true, config, f, kernelParams, extra);
}

/* Cooperative launches take no extra array. */
static CUresult launch_cooperative(PFN_cuLaunchCooperativeKernel_v9000 real, bool pt, CUfunction f, unsigned int gx,
				   unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz,
				   unsigned int smem, CUstream s, void **params)
{
	if (real && gpu_hook_depth)
		return real(f, gx, gy, gz, bx, by, bz, smem, s, params);
	LAUNCH(real, launch_info(GPU_FUNC_DRIVER, f, s, pt, params, NULL),
	       real(f, gx, gy, gz, bx, by, bz, smem, s, l.fwd_params));
}

GAIA_EXPORT CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
							unsigned int gridDimZ, unsigned int blockDimX,
							unsigned int blockDimY, unsigned int blockDimZ,
							unsigned int sharedMemBytes, CUstream hStream,
							void **kernelParams)
{
	return launch_cooperative(REAL_OF(cuLaunchCooperativeKernel), false, f, gridDimX, gridDimY, gridDimZ,
				  blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams);
}

GAIA_EXPORT CUresult CUDAAPI cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
							     unsigned int gridDimY, unsigned int gridDimZ,
							     unsigned int blockDimX, unsigned int blockDimY,
							     unsigned int blockDimZ, unsigned int sharedMemBytes,
							     CUstream hStream, void **kernelParams)
{
	return launch_cooperative(REAL_OF(cuLaunchCooperativeKernel_ptsz), true, f, gridDimX, gridDimY, gridDimZ,
				  blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams);
}

/* A graph launch: the kernels inside are not visible one by one, so the
 * protocol gets a launch without a function (every managed region). */
static CUresult graph_launch(PFN_cuGraphLaunch_v10000 real, bool pt, CUgraphExec g, CUstream s)
{
	if (real && gpu_hook_depth)
		return real(g, s);
	LAUNCH(real, launch_info(GPU_FUNC_NONE, NULL, s, pt, NULL, NULL), real(g, s));
}

GAIA_EXPORT CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	return graph_launch(REAL_OF(cuGraphLaunch), false, hGraphExec, hStream);
}

GAIA_EXPORT CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
	return graph_launch(REAL_OF(cuGraphLaunch_ptsz), true, hGraphExec, hStream);
}

GAIA_EXPORT CUresult CUDAAPI cuCtxSynchronize(void)
{
	__typeof__(&cuCtxSynchronize) real = REAL_OF(cuCtxSynchronize);

	SYNC(real, real(), GPU_SYNC_CONTEXT, true);
}

GAIA_EXPORT CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx)
{
	__typeof__(&cuCtxSynchronize_v2) real = REAL_OF(cuCtxSynchronize_v2);

	SYNC(real, real(ctx), GPU_SYNC_CONTEXT, true);
}

GAIA_EXPORT CUresult CUDAAPI cuStreamSynchronize(CUstream hStream)
{
	__typeof__(&cuStreamSynchronize) real = REAL_OF(cuStreamSynchronize);

	SYNC(real, real(hStream), GPU_SYNC_STREAM, true);
}

GAIA_EXPORT CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream)
{
	__typeof__(&cuStreamSynchronize_ptsz) real = REAL_OF(cuStreamSynchronize_ptsz);

	SYNC(real, real(hStream), GPU_SYNC_STREAM, true);
}

GAIA_EXPORT CUresult CUDAAPI cuEventSynchronize(CUevent hEvent)
{
	__typeof__(&cuEventSynchronize) real = REAL_OF(cuEventSynchronize);

	SYNC(real, real(hEvent), GPU_SYNC_EVENT, true);
}

/* The shim keeps the streams that launched kernels since the last
 * release: a destroyed one is forgotten first. */
GAIA_EXPORT CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream)
{
	__typeof__(&cuStreamDestroy_v2) real = REAL_OF(cuStreamDestroy_v2);

	if (!real)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (hStream)
		gpu_stream_destroyed(hStream);
	return real(hStream);
}

/* A query that answers CUDA_SUCCESS has seen the work complete: a sync.
 * CUDA_ERROR_NOT_READY is not. */
GAIA_EXPORT CUresult CUDAAPI cuStreamQuery(CUstream hStream)
{
	__typeof__(&cuStreamQuery) real = REAL_OF(cuStreamQuery);

	SYNC(real, real(hStream), GPU_SYNC_STREAM, rc_ == CUDA_SUCCESS);
}

GAIA_EXPORT CUresult CUDAAPI cuStreamQuery_ptsz(CUstream hStream)
{
	__typeof__(&cuStreamQuery_ptsz) real = REAL_OF(cuStreamQuery_ptsz);

	SYNC(real, real(hStream), GPU_SYNC_STREAM, rc_ == CUDA_SUCCESS);
}

GAIA_EXPORT CUresult CUDAAPI cuEventQuery(CUevent hEvent)
{
	__typeof__(&cuEventQuery) real = REAL_OF(cuEventQuery);

	SYNC(real, real(hEvent), GPU_SYNC_EVENT, rc_ == CUDA_SUCCESS);
}

/* cudaGetDriverEntryPoint picks the version itself (that of the runtime
 * in the process, which the shim does not know). The row is therefore the
 * one whose ABI entry in libcuda is exactly the pointer handed out; no
 * such row, no substitution. */
void hook_substitute_by_identity(const char *symbol, void **funcPtr)
{
	if (!symbol || !funcPtr || !*funcPtr)
		return;
	for (int i = 0; i < HOOK_COUNT; i++) {
		if (hooks[i].lib != DRV || strcmp(hooks[i].base, symbol) != 0 || cuda_real(hooks[i].abi) != *funcPtr)
			continue;
		hook_remember(i, *funcPtr);
		*funcPtr = hooks[i].wrapper;
		return;
	}
}

/* ------------------------------------------------------------------ */
/* The table                                                          */

/* The table names cudaGetDriverEntryPoint[_ptsz], deprecated in CUDA
 * 12.5 but still exported and used (cuda_runtime_hooks.c). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

/* The hidden aliases the table points at (cuda_hooks.h): the core driver
 * wrappers' here, the runtime wrappers' in cuda_runtime_hooks.c, the
 * copies' in cuda_copy_hooks.c, the memsets' in cuda_mem_hooks.c. */
#define HOOK_ALIAS(base, ver, pt, abi, lib, pfn) HOOK_ALIAS_##lib(abi)
#define HOOK_ALIAS_DRV(abi) HOOK_ALIAS_DEFINE(abi)
#define HOOK_ALIAS_RT(abi) HOOK_ALIAS_DECLARE(abi)
CUDA_CORE_HOOK_TABLE(HOOK_ALIAS)
#undef HOOK_ALIAS_RT
#undef HOOK_ALIAS_DRV
#undef HOOK_ALIAS
#define HOOK_ALIAS(base, ver, pt, abi, lib, pfn) HOOK_ALIAS_DECLARE(abi)
CUDA_COPY_HOOK_TABLE(HOOK_ALIAS)
CUDA_MEM_HOOK_TABLE(HOOK_ALIAS)
#undef HOOK_ALIAS

/* A row's version must name the ABI its wrapper implements: the
 * wrapper's type (the header's prototype) must be that version's. */
#define HOOK_CHECK(base, ver, pt, abi, lib, pfn) HOOK_CHECK_##lib(abi, pfn)
#define HOOK_CHECK_DRV(abi, pfn) \
	_Static_assert(__builtin_types_compatible_p(__typeof__(&abi), pfn), #abi " is not " #pfn);
#define HOOK_CHECK_RT(abi, pfn)
CUDA_CORE_HOOK_TABLE(HOOK_CHECK)
#undef HOOK_CHECK_RT
#undef HOOK_CHECK_DRV
#undef HOOK_CHECK

static struct hook hooks[HOOK_COUNT] = {
#define HOOK_ROW(base_, ver_, pt_, abi_, lib_, pfn_)                                                       \
	[HOOK_##abi_] = {.base = #base_, .version = ver_, .per_thread = pt_, .lib = lib_, .abi = #abi_, \
			 .wrapper = (void *)hook_##abi_},
	CUDA_HOOK_TABLE(HOOK_ROW)
#undef HOOK_ROW
};

#pragma GCC diagnostic pop
