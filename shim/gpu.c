/* The protocol at launches and syncs (DESIGN §3.3). Placeholder: counts
 * what the hooks report; device replicas come next. */
#define _GNU_SOURCE
#include "gpu.h"
#include "stats.h"

__thread int gpu_hook_depth __attribute__((tls_model("initial-exec")));

void gpu_launch_prepare(struct gpu_launch *launch)
{
	launch->fwd_params = launch->params;
	launch->fwd_extra = launch->extra;
	launch->scratch = NULL;
	launch->device = -1;
}

void gpu_launch_done(struct gpu_launch *launch, CUresult rc)
{
	(void)launch;
	if (rc == CUDA_SUCCESS)
		stats_add(GAIA_STAT_kernel_launches, 1);
}

void gpu_after_sync(enum gpu_sync_kind kind, CUresult rc)
{
	(void)kind;
	if (rc == CUDA_SUCCESS)
		stats_add(GAIA_STAT_host_syncs, 1);
}

void gpu_before_driver_init(void)
{
}
