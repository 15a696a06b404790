/* coop_kernels.h — kernels of coop_kernels.cu, for the simgpu tests. */
#ifndef SIMGPU_COOP_KERNELS_H
#define SIMGPU_COOP_KERNELS_H
#include <simgpu_kernel.h>

__global__ void coop_block_sum(const int *in, int *out, int n);
__global__ void coop_dynamic_sum(const int *in, int *out, int n);
__global__ void coop_warp_shuffles(const int *in, int *out);
__global__ void coop_warp_votes(const int *in, unsigned *out);
__global__ void coop_barrier_reductions(const int *in, int limit, int *out);
__global__ void coop_shared_histogram(const unsigned *in, int n, unsigned *hist);
__global__ void coop_early_exit(int keep, int *out);
__global__ void coop_mismatched_barriers(int *out);
#endif
