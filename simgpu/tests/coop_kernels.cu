/* coop_kernels.cu — kernels whose threads cooperate: __shared__ memory
 * (static and dynamic), __syncthreads and its reductions, warp shuffles and
 * votes, atomics on shared memory.  Compiled by g++ for the simulator and by
 * nvcc (simgpu/nvcc_kernels) to keep them real CUDA. */
#include "coop_kernels.h"

/* Per-block sum through a shared-memory tree `s` (blockDim.x a power of
 * two, at most 256), written by thread 0 to out[blockIdx.x]. */
__device__ void block_tree_sum(int *s, const int *in, int *out, int n)
{
    unsigned t = threadIdx.x;
    int i = blockIdx.x * blockDim.x + t;
    s[t] = i < n ? in[i] : 0;
    __syncthreads();
    for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
        if (t < half)
            s[t] += s[t + half];
        __syncthreads();
    }
    if (t == 0)
        out[blockIdx.x] = s[0];
}

__global__ void coop_block_sum(const int *in, int *out, int n)
{
    __shared__ int s[256];
    block_tree_sum(s, in, out, n);
}
SIMGPU_KERNEL(coop_block_sum);

/* The same with the launch's dynamic shared memory (blockDim.x ints). */
__global__ void coop_dynamic_sum(const int *in, int *out, int n)
{
    SIMGPU_DYNAMIC_SHARED(int, s);
    block_tree_sum(s, in, out, n);
}
SIMGPU_KERNEL(coop_dynamic_sum);

/* Warp shuffles: per element, out[4*i + k] =
 *   k=0: the warp's sum (__shfl_xor_sync butterfly: every lane has it)
 *   k=1: inclusive prefix sum within the warp (__shfl_up_sync)
 *   k=2: lane 3's value (__shfl_sync broadcast)
 *   k=3: the value of lane + 1 within groups of 8 (__shfl_down_sync, width 8;
 *        the last lane of a group keeps its own)
 * blockDim.x a multiple of 32; in has blockDim.x * gridDim.x elements. */
__global__ void coop_warp_shuffles(const int *in, int *out)
{
    const unsigned full = 0xffffffffu;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned lane = threadIdx.x % 32;
    int v = in[i];
    int sum = v;
    for (int m = 16; m > 0; m /= 2)
        sum += __shfl_xor_sync(full, sum, m);
    int scan = v;
    for (int d = 1; d < 32; d *= 2) {
        int o = __shfl_up_sync(full, scan, d);
        if (lane >= (unsigned)d)
            scan += o;
    }
    int b = __shfl_sync(full, v, 3);
    int nx = __shfl_down_sync(full, v, 1, 8);
    out[4 * i + 0] = sum;
    out[4 * i + 1] = scan;
    out[4 * i + 2] = b;
    out[4 * i + 3] = nx;
}
SIMGPU_KERNEL(coop_warp_shuffles);

/* Votes: per warp w, out[4*w + ...] = ballot of odd values, any odd, all odd,
 * and (after __syncwarp) the warp's reduction through __shfl_down_sync. */
__global__ void coop_warp_votes(const int *in, unsigned *out)
{
    const unsigned full = 0xffffffffu;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned w = (unsigned)i / 32, lane = threadIdx.x % 32;
    int odd = in[i] & 1;
    unsigned ballot = __ballot_sync(full, odd);
    int any = __any_sync(full, odd);
    int all = __all_sync(full, odd);
    __syncwarp();
    unsigned v = (unsigned)in[i];
    for (int off = 16; off > 0; off /= 2)
        v += __shfl_down_sync(full, v, off);
    if (lane == 0) {
        out[4 * w + 0] = ballot;
        out[4 * w + 1] = (unsigned)any;
        out[4 * w + 2] = (unsigned)all;
        out[4 * w + 3] = v;
    }
}
SIMGPU_KERNEL(coop_warp_votes);

/* __syncthreads_count/_and/_or of (in[i] > limit), per block. */
__global__ void coop_barrier_reductions(const int *in, int limit, int *out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int p = in[i] > limit;
    int c = __syncthreads_count(p);
    int a = __syncthreads_and(p);
    int o = __syncthreads_or(p);
    if (threadIdx.x == 0) {
        out[3 * blockIdx.x + 0] = c;
        out[3 * blockIdx.x + 1] = a != 0;
        out[3 * blockIdx.x + 2] = o != 0;
    }
}
SIMGPU_KERNEL(coop_barrier_reductions);

/* A 16-bin histogram per block in shared memory (atomics there), added to
 * the global one; a 3-D block so thread numbering is x fastest. */
__global__ void coop_shared_histogram(const unsigned *in, int n, unsigned *hist)
{
    __shared__ unsigned h[16];
    unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned per_block = blockDim.x * blockDim.y * blockDim.z;
    if (t < 16)
        h[t] = 0;
    __syncthreads();
    int i = blockIdx.x * per_block + t;
    if (i < n)
        atomicAdd(&h[in[i] % 16], 1u);
    __syncthreads();
    if (t < 16)
        atomicAdd(&hist[t], h[t]);
}
SIMGPU_KERNEL(coop_shared_histogram);

/* Threads that return early do not hold a barrier up: the rest of the
 * block still meets at it (thread t < keep stays). */
__global__ void coop_early_exit(int keep, int *out)
{
    __shared__ int s[64];
    unsigned t = threadIdx.x;
    if ((int)t >= keep)
        return;
    s[t] = (int)t + 1;
    __syncthreads();
    out[blockIdx.x * 64 + t] = s[(t + 1) % (unsigned)keep];
}
SIMGPU_KERNEL(coop_early_exit);

/* Lane 0 waits for lane 1 at __syncwarp while lane 1 waits for the block:
 * a deadlock on hardware.  The simulator fails the launch instead. */
__global__ void coop_mismatched_barriers(int *out)
{
    if (threadIdx.x == 0)
        __syncwarp(0x3u);
    else
        __syncthreads();
    out[threadIdx.x] = 1;
}
SIMGPU_KERNEL(coop_mismatched_barriers);
