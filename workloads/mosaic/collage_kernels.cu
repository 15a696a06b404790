/*
 * collage_kernels.cu — the collage as four kernels in one stream (a kernel
 * boundary stands where a block barrier would: the simulated GPU runs a
 * block's threads one after another and has no __syncthreads).
 *
 *   tile_hist      one 32x32 block per input tile, one thread per pixel:
 *                  per-value channel counts (atomics)
 *   tile_features  one thread per tile: cumulative histogram, mean, LSH keys
 *   match          one block per tile, one thread per candidate slot
 *                  (table, rank): reads the candidate's 3 KiB histogram
 *                  record straight from the database — a data-dependent,
 *                  random 4 KiB page — and keeps the best (distance, id)
 *   compose        one 32x32 block per tile: copies the winner's pixels
 *                  from the tiles file into the output picture
 *
 * Compiled by nvcc for a real GPU and by g++ with simgpu_kernel.h for the
 * simulated one.
 */
#include <simgpu_kernel.h>

#include "collage_kernels.h"

__global__ void collage_tile_hist(struct collage_args a)
{
	uint32_t tile = blockIdx.y * a.tiles_x + blockIdx.x;
	uint32_t x = blockIdx.x * COLLAGE_SIDE + threadIdx.x, y = blockIdx.y * COLLAGE_SIDE + threadIdx.y;
	uint32_t px = a.input[(size_t)y * a.width + x];
	uint32_t *h = a.hist + (size_t)tile * COLLAGE_HIST_WORDS;
	for (uint32_t c = 0; c < 3; c++)
		atomicAdd(&h[c * 256 + collage_channel(px, c)], 1u);
}
SIMGPU_KERNEL(collage_tile_hist);

__global__ void collage_tile_features(struct collage_args a)
{
	uint32_t tile = blockIdx.x * blockDim.x + threadIdx.x;
	if (tile >= a.tiles_x * a.tiles_y)
		return;
	uint32_t *mean = a.mean + (size_t)tile * 3;
	collage_features(a.hist + (size_t)tile * COLLAGE_HIST_WORDS, a.cdf + (size_t)tile * COLLAGE_HIST_WORDS,
			 mean);
	for (uint32_t t = 0; t < a.lsh.tables; t++)
		a.keys[(size_t)tile * COLLAGE_MAX_TABLES + t] = collage_key(&a.lsh, t, mean);
	a.best[tile] = COLLAGE_NO_MATCH;
}
SIMGPU_KERNEL(collage_tile_features);

__global__ void collage_match(struct collage_args a, const unsigned char *hist_file, const unsigned char *lsh_file)
{
	uint32_t tile = blockIdx.x;
	uint32_t t = threadIdx.x / COLLAGE_CAND_PER_TABLE, rank = threadIdx.x % COLLAGE_CAND_PER_TABLE;
	if (t >= a.lsh.tables)
		return;
	const uint32_t *start = (const uint32_t *)(lsh_file + MOSAIC_PAGE_BYTES) + (size_t)t * (a.lsh.buckets + 1);
	const uint32_t *ids = (const uint32_t *)(lsh_file + MOSAIC_PAGE_BYTES) +
			      (size_t)a.lsh.tables * (a.lsh.buckets + 1) + (size_t)t * a.images;
	uint32_t key = a.keys[(size_t)tile * COLLAGE_MAX_TABLES + t];
	uint32_t first = start[key], count = start[key + 1] - first;
	if (rank >= count)
		return;
	uint32_t id = ids[first + rank];
	const uint32_t *rec = (const uint32_t *)(hist_file + MOSAIC_PAGE_BYTES + (size_t)id * MOSAIC_PAGE_BYTES);
	uint32_t d = collage_distance(a.cdf + (size_t)tile * COLLAGE_HIST_WORDS, rec);
	atomicMin(&a.best[tile], (unsigned long long)collage_pack(d, id));
	atomicOr(&a.touched_hist[id / 32], 1u << (id % 32));
}
SIMGPU_KERNEL(collage_match);

__global__ void collage_compose(struct collage_args a, const unsigned char *tiles_file)
{
	uint32_t tile = blockIdx.y * a.tiles_x + blockIdx.x;
	uint32_t x = blockIdx.x * COLLAGE_SIDE + threadIdx.x, y = blockIdx.y * COLLAGE_SIDE + threadIdx.y;
	unsigned long long b = a.best[tile];
	uint32_t px;
	if (b == COLLAGE_NO_MATCH) {
		px = collage_flat_pixel(a.mean + (size_t)tile * 3);
	} else {
		uint32_t id = (uint32_t)b;
		const uint32_t *rec =
			(const uint32_t *)(tiles_file + MOSAIC_PAGE_BYTES + (size_t)id * MOSAIC_PAGE_BYTES);
		px = rec[threadIdx.y * COLLAGE_SIDE + threadIdx.x];
		if (threadIdx.x == 0 && threadIdx.y == 0)
			atomicOr(&a.touched_tiles[id / 32], 1u << (id % 32));
	}
	a.output[(size_t)y * a.width + x] = px;
}
SIMGPU_KERNEL(collage_compose);

extern "C" cudaError_t collage_gpu_launch(const struct collage_args *a, const struct collage_files *db,
					  cudaStream_t stream)
{
	uint32_t tiles = a->tiles_x * a->tiles_y;
	size_t bitmap_bytes = (size_t)(a->images + 31) / 32 * 4;
	cudaError_t e;
	if ((e = cudaMemsetAsync(a->hist, 0, (size_t)tiles * COLLAGE_HIST_WORDS * 4, stream)) != cudaSuccess ||
	    (e = cudaMemsetAsync(a->touched_hist, 0, bitmap_bytes, stream)) != cudaSuccess ||
	    (e = cudaMemsetAsync(a->touched_tiles, 0, bitmap_bytes, stream)) != cudaSuccess)
		return e;
	dim3 grid(a->tiles_x, a->tiles_y), tile_block(COLLAGE_SIDE, COLLAGE_SIDE);
	SIMGPU_LAUNCH(collage_tile_hist, grid, tile_block, 0, stream)(*a);
	if ((e = cudaGetLastError()) != cudaSuccess)
		return e;
	SIMGPU_LAUNCH(collage_tile_features, dim3((tiles + 63) / 64), dim3(64), 0, stream)(*a);
	if ((e = cudaGetLastError()) != cudaSuccess)
		return e;
	SIMGPU_LAUNCH(collage_match, dim3(tiles), dim3(COLLAGE_MAX_TABLES * COLLAGE_CAND_PER_TABLE), 0,
		      stream)(*a, db->hist_file, db->lsh_file);
	if ((e = cudaGetLastError()) != cudaSuccess)
		return e;
	SIMGPU_LAUNCH(collage_compose, grid, tile_block, 0, stream)(*a, db->tiles_file);
	return cudaGetLastError();
}
