/* The shim's resolvers (research/cuda_interpose.md §1.3-§1.6): what
 * cuGetProcAddress and dlsym hand out under the shim.
 *  - a resolved wrapped symbol comes back as the shim's wrapper for its
 *    (name, version, flags) row, with symbolStatus NULL as well;
 *  - an unresolvable symbol, or a version too old, stays NULL;
 *  - names the shim does not wrap come back from libcuda untouched;
 *  - "cuGetProcAddress" resolves to the shim's own resolvers;
 *  - dlsym(RTLD_NEXT) still answers relative to its caller;
 *  - a wrapper whose real function the driver lacks fails cleanly. */
#include "itest.h"

#include <cuda.h>
#include <cudaTypedefs.h>

#define PROG "cuda_procaddr_hooks"

static int failures;

#define EXPECT(cond, ...)                                                                          \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, PROG ": FAIL (line %d): ", __LINE__);                      \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

/* The object that defines fn: "shim", "driver" or "other". */
static const char *owner(const void *fn)
{
	Dl_info info;

	if (!fn || !dladdr(fn, &info) || !info.dli_fname)
		return "none";
	if (strstr(info.dli_fname, "libgaia"))
		return "shim";
	if (strstr(info.dli_fname, "libcuda.so"))
		return "driver";
	return "other";
}

/* What the shim exports under an ABI name: its wrapper. */
static void *shim_wrapper(const char *abi)
{
	void *p = dlsym(RTLD_DEFAULT, abi);

	return p && strcmp(owner(p), "shim") == 0 ? p : NULL;
}

static void expect_lookup(const char *symbol, int version, cuuint64_t flags, const char *want_abi)
{
	void *pfn = NULL;
	CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	CUresult rc = cuGetProcAddress(symbol, &pfn, version, flags, &status);
	void *want = shim_wrapper(want_abi);

	EXPECT(want, "the shim exports no %s", want_abi);
	EXPECT(rc == CUDA_SUCCESS && status == CU_GET_PROC_ADDRESS_SUCCESS, "%s@%d/%llu: rc %d status %d", symbol,
	       version, (unsigned long long)flags, (int)rc, (int)status);
	EXPECT(pfn == want, "%s@%d/%llu: got %p (%s), want the shim's %s %p", symbol, version,
	       (unsigned long long)flags, pfn, owner(pfn), want_abi, want);
	/* the same with symbolStatus NULL */
	pfn = NULL;
	rc = cuGetProcAddress(symbol, &pfn, version, flags, NULL);
	EXPECT(rc == CUDA_SUCCESS && pfn == want, "%s@%d/%llu with NULL symbolStatus: rc %d, %p", symbol, version,
	       (unsigned long long)flags, (int)rc, pfn);
}

int main(void)
{
	CUdevice dev;
	CUcontext ctx;
	void *pfn, *libcuda;
	CUdriverProcAddressQueryResult status;
	CUresult rc;

	if (!dlsym(RTLD_DEFAULT, "gaia_mrelease")) {
		printf(PROG ": SKIP: not running under libgaia.so\n");
		return ITEST_SKIP;
	}
	if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
	    cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
		printf(PROG ": SKIP: no (simulated) device\n");
		return ITEST_SKIP;
	}
	EXPECT(strcmp(owner((void *)cuInit), "shim") == 0, "cuInit binds to %s, not the shim", owner((void *)cuInit));

	/* rows by (name, version, flags) */
	expect_lookup("cuLaunchKernel", 4000, 0, "cuLaunchKernel");
	expect_lookup("cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuLaunchKernel_ptsz");
	expect_lookup("cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, "cuLaunchKernel");
	expect_lookup("cuCtxSynchronize", 2000, 0, "cuCtxSynchronize");
	expect_lookup("cuCtxSynchronize", 13000, 0, "cuCtxSynchronize_v2");
	expect_lookup("cuStreamSynchronize", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
		      "cuStreamSynchronize_ptsz");
	/* no per-thread form: the legacy row */
	expect_lookup("cuEventSynchronize", 2000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuEventSynchronize");
	expect_lookup("cuMemcpyDtoH", 3020, 0, "cuMemcpyDtoH_v2");
	expect_lookup("cuMemcpyDtoH", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemcpyDtoH_v2_ptds");
	/* the self-lookup */
	expect_lookup("cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2");
	expect_lookup("cuGetProcAddress", 11030, 0, "cuGetProcAddress");

	/* the 4-argument resolver substitutes too */
	{
		PFN_cuGetProcAddress_v11030 gpa_v1 = NULL;

		rc = cuGetProcAddress("cuGetProcAddress", (void **)&gpa_v1, 11030, 0, NULL);
		EXPECT(rc == CUDA_SUCCESS && gpa_v1, "cuGetProcAddress@11030: rc %d", (int)rc);
		if (gpa_v1) {
			pfn = NULL;
			rc = gpa_v1("cuStreamQuery", &pfn, 2000, 0);
			EXPECT(rc == CUDA_SUCCESS && pfn == shim_wrapper("cuStreamQuery"),
			       "4-argument cuGetProcAddress(cuStreamQuery): rc %d, %p (%s)", (int)rc, pfn, owner(pfn));
			pfn = (void *)1;
			rc = gpa_v1("cuNoSuchEntryPoint", &pfn, 13000, 0);
			EXPECT(rc == CUDA_SUCCESS && !pfn, "4-argument lookup of a missing name: rc %d, %p", (int)rc, pfn);
		}
	}

	/* unresolvable: nothing substituted, status as the driver says */
	pfn = (void *)1;
	status = CU_GET_PROC_ADDRESS_SUCCESS;
	rc = cuGetProcAddress("cuNoSuchEntryPoint", &pfn, 13000, 0, &status);
	EXPECT(rc == CUDA_SUCCESS && !pfn && status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
	       "missing name: rc %d, %p, status %d", (int)rc, pfn, (int)status);
	pfn = (void *)1;
	rc = cuGetProcAddress("cuNoSuchEntryPoint", &pfn, 13000, 0, NULL);
	EXPECT(rc == CUDA_SUCCESS && !pfn, "missing name, NULL symbolStatus: rc %d, %p", (int)rc, pfn);
	/* a wrapped name asked for at a version before it existed */
	pfn = (void *)1;
	status = CU_GET_PROC_ADDRESS_SUCCESS;
	rc = cuGetProcAddress("cuLaunchKernelEx", &pfn, 11000, 0, &status);
	EXPECT(!pfn && status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT,
	       "cuLaunchKernelEx@11000: rc %d, %p (%s), status %d", (int)rc, pfn, owner(pfn), (int)status);

	/* names the shim does not wrap come from the driver */
	pfn = NULL;
	rc = cuGetProcAddress("cuMemFree", &pfn, 3020, 0, NULL);
	EXPECT(rc == CUDA_SUCCESS && strcmp(owner(pfn), "driver") == 0, "cuMemFree@3020: rc %d, from %s", (int)rc,
	       owner(pfn));

	/* a substituted wrapper works */
	pfn = NULL;
	rc = cuGetProcAddress("cuCtxSynchronize", &pfn, 13000, 0, NULL);
	if (pfn)
		EXPECT(((PFN_cuCtxSynchronize_v13000)pfn)(ctx) == CUDA_SUCCESS, "the cuCtxSynchronize_v2 wrapper failed");

	/* dlsym in the driver's handle: wrapped names are substituted, the
	 * rest are the driver's */
	libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	EXPECT(libcuda, "libcuda.so.1 is not loaded");
	if (libcuda) {
		pfn = dlsym(libcuda, "cuGetProcAddress_v2");
		EXPECT(pfn == shim_wrapper("cuGetProcAddress_v2"), "dlsym(libcuda, cuGetProcAddress_v2) is %s's",
		       owner(pfn));
		pfn = dlsym(libcuda, "cuLaunchKernel_ptsz");
		EXPECT(pfn == shim_wrapper("cuLaunchKernel_ptsz"), "dlsym(libcuda, cuLaunchKernel_ptsz) is %s's",
		       owner(pfn));
		pfn = dlsym(libcuda, "cuMemFree_v2");
		EXPECT(strcmp(owner(pfn), "driver") == 0, "dlsym(libcuda, cuMemFree_v2) is %s's", owner(pfn));
		EXPECT(!dlsym(libcuda, "cuNoSuchEntryPoint"), "dlsym(libcuda, a missing name) is not NULL");
	}

	/* RTLD_NEXT stays relative to the caller: after this program comes
	 * the shim (preloaded), whose own definitions must be found. */
	pfn = dlsym(RTLD_NEXT, "cuInit");
	EXPECT(strcmp(owner(pfn), "shim") == 0, "dlsym(RTLD_NEXT, cuInit) from the program is %s's", owner(pfn));
	pfn = dlsym(RTLD_DEFAULT, "cuMemFree_v2");
	EXPECT(strcmp(owner(pfn), "driver") == 0, "dlsym(RTLD_DEFAULT, cuMemFree_v2) is %s's", owner(pfn));

	/* the simulator has no graphs: the shim's cuGraphLaunch has no real
	 * function behind it and says so */
	{
		CUresult (*graph_launch)(CUgraphExec, CUstream) = shim_wrapper("cuGraphLaunch");

		EXPECT(graph_launch, "the shim exports no cuGraphLaunch");
		if (graph_launch && !dlsym(libcuda, "cuGraphLaunch"))
			EXPECT(graph_launch(NULL, NULL) == CUDA_ERROR_NOT_INITIALIZED,
			       "cuGraphLaunch without a real one did not answer CUDA_ERROR_NOT_INITIALIZED");
	}

	if (failures)
		return ITEST_FAIL;
	printf(PROG ": ok\n");
	return ITEST_PASS;
}
