/* sssp_kernels.cu — frontier-based Bellman-Ford, Gunrock's SSSP shape: an
 * advance that relaxes the frontier's edges with atomicMin, then a filter
 * that drops the vertices already kept in this level.  The advance gathers
 * the block's improved vertices in a shared-memory queue and reserves their
 * place in the candidate list with one atomic per block (a thread whose
 * vertices overflow the queue appends them itself).  The same source runs
 * under nvcc and on the simulated GPU (g++ with simgpu_kernel.h). */
#include <stdint.h>

#include "simgpu_kernel.h"
#include "sssp_gpu.h"

#define INF 0xffffffffu

__global__ void sssp_init(uint32_t *dist, uint32_t *visited, uint64_t vertices, uint32_t source,
                          uint32_t *frontier)
{
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t v = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; v < vertices; v += stride) {
        dist[v] = v == source ? 0 : INF;
        visited[v] = 0;
        if (v == source)
            frontier[0] = source;
    }
}
SIMGPU_KERNEL(sssp_init);

#define SSSP_QUEUE (4 * SSSP_BLOCK)

__global__ void sssp_relax(const uint64_t *row_offsets, const uint32_t *col_indices, const uint32_t *weights,
                           uint32_t *dist, const uint32_t *frontier, uint32_t frontier_len,
                           uint32_t *candidates, uint32_t *counters)
{
    __shared__ uint32_t queue[SSSP_QUEUE];
    __shared__ uint32_t queued, base;
    if (threadIdx.x == 0)
        queued = 0;
    __syncthreads();
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < frontier_len) {
        uint32_t u = frontier[i];
        /* dist[u] may fall while this runs; whoever lowers it appends u again. */
        uint32_t du = dist[u];
        for (uint64_t e = row_offsets[u], end = row_offsets[u + 1]; e < end; e++) {
            uint32_t w = weights[e];
            if (w >= INF - du)
                continue;   /* the path would reach INF: not taken (the CPU oracle agrees) */
            uint32_t v = col_indices[e], nd = du + w;
            if (nd < dist[v] && nd < atomicMin(&dist[v], nd)) {
                uint32_t q = atomicAdd(&queued, 1u);
                if (q < SSSP_QUEUE)
                    queue[q] = v;
                else
                    candidates[atomicAdd(&counters[0], 1u)] = v;
            }
        }
    }
    __syncthreads();
    uint32_t n = queued < SSSP_QUEUE ? queued : SSSP_QUEUE;
    if (threadIdx.x == 0 && n)
        base = atomicAdd(&counters[0], n);
    __syncthreads();
    for (uint32_t k = threadIdx.x; k < n; k += blockDim.x)
        candidates[base + k] = queue[k];
}
SIMGPU_KERNEL(sssp_relax);

__global__ void sssp_filter(const uint32_t *candidates, uint32_t *counters, uint32_t level, uint32_t *visited,
                            uint32_t *next)
{
    uint32_t n = counters[0];
    uint32_t stride = gridDim.x * blockDim.x;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        uint32_t v = candidates[i];
        if (atomicExch(&visited[v], level) != level)
            next[atomicAdd(&counters[1], 1u)] = v;
    }
}
SIMGPU_KERNEL(sssp_filter);

extern "C" cudaError_t sssp_launch_init(unsigned grid, cudaStream_t s, uint32_t *dist, uint32_t *visited,
                                        uint64_t vertices, uint32_t source, uint32_t *frontier)
{
    SIMGPU_LAUNCH(sssp_init, dim3(grid), dim3(SSSP_BLOCK), 0, s)(dist, visited, vertices, source, frontier);
    return cudaGetLastError();
}

extern "C" cudaError_t sssp_launch_relax(cudaStream_t s, const uint64_t *row_offsets, const uint32_t *col_indices,
                                         const uint32_t *weights, uint32_t *dist, const uint32_t *frontier,
                                         uint32_t frontier_len, uint32_t *candidates, uint32_t *counters)
{
    unsigned grid = (frontier_len + SSSP_BLOCK - 1) / SSSP_BLOCK;
    SIMGPU_LAUNCH(sssp_relax, dim3(grid), dim3(SSSP_BLOCK), 0, s)(row_offsets, col_indices, weights, dist, frontier,
                                                                   frontier_len, candidates, counters);
    return cudaGetLastError();
}

extern "C" cudaError_t sssp_launch_filter(unsigned grid, cudaStream_t s, const uint32_t *candidates,
                                          uint32_t *counters, uint32_t level, uint32_t *visited, uint32_t *next)
{
    SIMGPU_LAUNCH(sssp_filter, dim3(grid), dim3(SSSP_BLOCK), 0, s)(candidates, counters, level, visited, next);
    return cudaGetLastError();
}
