/*
 * stitch_kernels.cu — one thread per canvas pixel of the GPU's side, in
 * 16x16 blocks; compiled by nvcc for a real GPU and by g++ with
 * simgpu_kernel.h for the simulated one.
 */
#include <simgpu_kernel.h>

#include "stitch_kernels.h"

#define STITCH_BLOCK 16u

__global__ void stitch_compose(struct stitch_geom g, const uint8_t *tiles_file, uint8_t *canvas_file)
{
	uint32_t x = g.split_x + blockIdx.x * STITCH_BLOCK + threadIdx.x;
	uint32_t y = blockIdx.y * STITCH_BLOCK + threadIdx.y;
	if (x >= g.canvas_w || y >= g.canvas_h)
		return;
	canvas_file[STITCH_HEADER_BYTES + (size_t)y * g.canvas_w + x] =
		stitch_pixel(&g, tiles_file + STITCH_HEADER_BYTES, x, y);
}
SIMGPU_KERNEL(stitch_compose);

extern "C" cudaError_t stitch_gpu_launch(const struct stitch_geom *g, const uint8_t *tiles_file,
					 uint8_t *canvas_file, cudaStream_t stream)
{
	if (g->split_x >= g->canvas_w)
		return cudaSuccess;
	dim3 grid((g->canvas_w - g->split_x + STITCH_BLOCK - 1) / STITCH_BLOCK,
		  (g->canvas_h + STITCH_BLOCK - 1) / STITCH_BLOCK);
	SIMGPU_LAUNCH(stitch_compose, grid, dim3(STITCH_BLOCK, STITCH_BLOCK), 0, stream)(*g, tiles_file, canvas_file);
	return cudaGetLastError();
}
