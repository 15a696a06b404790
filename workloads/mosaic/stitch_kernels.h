/*
 * stitch_kernels.h — the GPU side of the stitch, callable from C.
 */
#ifndef STITCH_KERNELS_H
#define STITCH_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "stitch_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueues the composition of canvas columns [g->split_x, canvas_w), all
 * rows, on `stream`.  tiles_file and canvas_file point at the start of their
 * files (header page included): device or managed memory, or the files'
 * mappings.  Returns the launch error. */
cudaError_t stitch_gpu_launch(const struct stitch_geom *g, const uint8_t *tiles_file, uint8_t *canvas_file,
			      cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* STITCH_KERNELS_H */
