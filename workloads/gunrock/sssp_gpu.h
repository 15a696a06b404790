/* sssp_gpu.h — the SSSP kernels' launchers, callable from C. The kernels
 * (sssp_kernels.cu) are one source for nvcc and for the simulated GPU. */
#ifndef GUNROCK_SSSP_GPU_H
#define GUNROCK_SSSP_GPU_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SSSP_BLOCK 256

/* dist[v] = SSSP_INF and visited[v] = 0 for every vertex, then
 * dist[source] = 0 and frontier[0] = source. A grid-stride loop. */
cudaError_t sssp_launch_init(unsigned grid, cudaStream_t s, uint32_t *dist, uint32_t *visited,
                             uint64_t vertices, uint32_t source, uint32_t *frontier);

/* Advance: one thread per frontier vertex u relaxes each edge u -> v with
 * atomicMin(&dist[v], dist[u] + w); every v whose distance it lowered is
 * appended to candidates (counters[0] counts them; duplicates allowed). */
cudaError_t sssp_launch_relax(cudaStream_t s, const uint64_t *row_offsets, const uint32_t *col_indices,
                              const uint32_t *weights, uint32_t *dist, const uint32_t *frontier,
                              uint32_t frontier_len, uint32_t *candidates, uint32_t *counters);

/* Filter: keeps the first copy of each candidate of this level
 * (visited[v] == level marks it) in next (counters[1] counts them). The
 * candidate count is read on the device, so the host does not wait. */
cudaError_t sssp_launch_filter(unsigned grid, cudaStream_t s, const uint32_t *candidates, uint32_t *counters,
                               uint32_t level, uint32_t *visited, uint32_t *next);

#ifdef __cplusplus
}
#endif

#endif
