/*
 * collage_kernels.cu — the collage as four kernels in one stream.
 *
 *   tile_hist      one 32x32 block per input tile, one thread per pixel:
 *                  per-value channel counts in shared memory (shared
 *                  atomics), then written out by the block
 *   tile_features  one thread per tile: cumulative histogram, mean, LSH keys
 *   match          one block per tile, one thread per candidate slot
 *                  (table, rank): the tile's cumulative histogram is loaded
 *                  into shared memory once; each thread compares it with
 *                  its candidate's 3 KiB record read straight from the
 *                  database — a data-dependent, random 4 KiB page — and the
 *                  block reduces the best (distance, id) with warp shuffles
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
	__shared__ uint32_t h[COLLAGE_HIST_WORDS];
	uint32_t tile = blockIdx.y * a.tiles_x + blockIdx.x;
	uint32_t me = threadIdx.y * COLLAGE_SIDE + threadIdx.x;
	uint32_t x = blockIdx.x * COLLAGE_SIDE + threadIdx.x, y = blockIdx.y * COLLAGE_SIDE + threadIdx.y;
	for (uint32_t i = me; i < COLLAGE_HIST_WORDS; i += COLLAGE_PIXELS)
		h[i] = 0;
	__syncthreads();
	uint32_t px = a.input[(size_t)y * a.width + x];
	for (uint32_t c = 0; c < 3; c++)
		atomicAdd(&h[c * 256 + collage_channel(px, c)], 1u);
	__syncthreads();
	uint32_t *out = a.hist + (size_t)tile * COLLAGE_HIST_WORDS;
	for (uint32_t i = me; i < COLLAGE_HIST_WORDS; i += COLLAGE_PIXELS)
		out[i] = h[i];
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
	__shared__ uint32_t cdf[COLLAGE_HIST_WORDS];
	__shared__ unsigned long long warp_best[COLLAGE_MAX_TABLES * COLLAGE_CAND_PER_TABLE / 32];
	uint32_t tile = blockIdx.x;
	uint32_t t = threadIdx.x / COLLAGE_CAND_PER_TABLE, rank = threadIdx.x % COLLAGE_CAND_PER_TABLE;
	const uint32_t *tile_cdf = a.cdf + (size_t)tile * COLLAGE_HIST_WORDS;
	for (uint32_t i = threadIdx.x; i < COLLAGE_HIST_WORDS; i += blockDim.x)
		cdf[i] = tile_cdf[i];
	__syncthreads();
	unsigned long long best = COLLAGE_NO_MATCH;
	if (t < a.lsh.tables) {
		const uint32_t *start =
			(const uint32_t *)(lsh_file + MOSAIC_PAGE_BYTES) + (size_t)t * (a.lsh.buckets + 1);
		const uint32_t *ids = (const uint32_t *)(lsh_file + MOSAIC_PAGE_BYTES) +
				      (size_t)a.lsh.tables * (a.lsh.buckets + 1) + (size_t)t * a.images;
		uint32_t key = a.keys[(size_t)tile * COLLAGE_MAX_TABLES + t];
		uint32_t first = start[key], count = start[key + 1] - first;
		if (rank < count) {
			uint32_t id = ids[first + rank];
			const uint32_t *rec =
				(const uint32_t *)(hist_file + MOSAIC_PAGE_BYTES + (size_t)id * MOSAIC_PAGE_BYTES);
			best = collage_pack(collage_distance(cdf, rec), id);
			atomicOr(&a.touched_hist[id / 32], 1u << (id % 32));
		}
	}
	/* the block's best: within each warp by shuffles, then across warps */
	for (int off = 16; off > 0; off /= 2) {
		unsigned long long o = __shfl_down_sync(0xffffffffu, best, off);
		best = o < best ? o : best;
	}
	if (threadIdx.x % 32 == 0)
		warp_best[threadIdx.x / 32] = best;
	__syncthreads();
	if (threadIdx.x == 0) {
		for (uint32_t w = 1; w < blockDim.x / 32; w++)
			best = warp_best[w] < best ? warp_best[w] : best;
		if (best != COLLAGE_NO_MATCH)
			atomicMin(&a.best[tile], best);
	}
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
