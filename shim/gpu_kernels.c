/* The shim's own device code, and how each kind of device gets it.
 *
 * On a GPU the diff kernel is PTX text (kernels/diff_pages.cu, compiled by
 * nvcc at build time and embedded), loaded with cuModuleLoadData. The
 * simulated GPU cannot run PTX: its modules resolve entry names against
 * kernels registered in the process before cuInit (simgpu/README.md). So
 * when the driver offers that registry, the same kernel bodies, compiled
 * as C into libgaia-simgpu.so (shim/simkernels/), are registered under the
 * PTX entries' names just before the real cuInit; loading the PTX then
 * finds them. Either way the shim makes the same calls.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "gpu.h"
#include "gpu_kernels.h"
#include "simgpu.h"

#if GAIA_HAVE_PTX
extern const char gaia_diff_pages_ptx[];
#endif

const char *gpu_diff_ptx(void)
{
#if GAIA_HAVE_PTX
	return gaia_diff_pages_ptx;
#else
	return NULL;
#endif
}

/* The simulated GPU's forms of the kernels live in libgaia-simgpu.so, in
 * this library's directory (shim/simkernels/): loaded only when the driver
 * is the simulator. */
#define SIMGPU_KERNELS_LIB "libgaia-simgpu.so"

void gpu_kernels_register(void)
{
	int (*reg)(const struct simgpu_kernel_desc *) =
		(int (*)(const struct simgpu_kernel_desc *))cuda_real("simgpu_register_kernel");
	if (!reg)
		return; /* a real driver: the PTX is all it needs */
	Dl_info self;
	char path[4096];
	const char *why = NULL;
	int rc = 0;
	if (!dladdr((void *)gpu_kernels_register, &self) || !self.dli_fname) {
		why = "the shim cannot tell its own directory";
	} else {
		const char *slash = strrchr(self.dli_fname, '/');
		int dir = slash ? (int)(slash - self.dli_fname) : 1;
		snprintf(path, sizeof(path), "%.*s/%s", dir, slash ? self.dli_fname : ".", SIMGPU_KERNELS_LIB);
		gaia_in_shim++;
		void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		gaia_in_shim--;
		int (*add)(int (*)(const struct simgpu_kernel_desc *)) = NULL;
		if (h)
			*(void **)&add = dlsym(h, "gaia_simgpu_register_kernels");
		if (!add)
			why = h ? "it lacks gaia_simgpu_register_kernels" : dlerror();
		else
			rc = add(reg);
	}
	if (why)
		gaia_warn("the shim's kernels for the simulated GPU (%s) cannot be loaded: %s; syncs "
			  "compare pages on the host and launches that rebase wait for the device",
			  SIMGPU_KERNELS_LIB, why);
	else if (rc)
		gaia_warn("simgpu_register_kernel failed (%d): the shim's kernels are not on the "
			  "simulated GPU, syncs compare pages on the host and launches that rebase wait for the device", rc);
}
