/* The shim's own device code (gpu_kernels.c). */
#ifndef GAIA_GPU_KERNELS_H
#define GAIA_GPU_KERNELS_H

#include "shim.h"

#define GPU_DIFF_KERNEL "gaia_diff_pages"
#define GPU_GATHER_KERNEL "gaia_gather_changes"
#define GPU_REBASE_KERNEL "gaia_rebase_pages"

/* The diff kernel's PTX text, or NULL when the build had no nvcc (syncs
 * then diff on the host). */
GAIA_HIDDEN const char *gpu_diff_ptx(void);
/* Before the real cuInit: makes the kernel known to a driver that runs
 * registered kernels instead of PTX (the simulated GPU). */
GAIA_HIDDEN void gpu_kernels_register(void);

#endif
