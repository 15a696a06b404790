/*
 * collage_kernels.h — the collage on the GPU, callable from C.
 *
 * The database pointers are whatever the program hands the device: device
 * memory (copy mode), managed memory (managed mode) or the file mappings
 * themselves (gaia mode).  Each points at the start of its file, header
 * page included.
 */
#ifndef COLLAGE_KERNELS_H
#define COLLAGE_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "collage_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The database, as files: records start one page in.  The kernels that
 * read it take these pointers as arguments of their own. */
struct collage_files {
	const unsigned char *tiles_file, *hist_file, *lsh_file;
};

/* Everything else the kernels touch, passed by value to each of them. */
struct collage_args {
	uint32_t images;
	struct collage_lsh lsh;
	/* the input picture and its tiles */
	const uint32_t *input;          /* width x height RGBA, device memory */
	uint32_t width, height, tiles_x, tiles_y;
	/* per tile, device memory */
	uint32_t *hist;                 /* 768 counts (zeroed by the launch) */
	uint32_t *cdf;                  /* 768 */
	uint32_t *mean;                 /* 3 */
	uint32_t *keys;                 /* COLLAGE_MAX_TABLES */
	unsigned long long *best;       /* collage_pack(distance, id) */
	/* output picture and the records read (1 bit per image), device memory */
	uint32_t *output;
	uint32_t *touched_hist, *touched_tiles;     /* (images + 31) / 32 words, zeroed by the launch */
};

/* Enqueues the whole collage on `stream`: tile histograms, features and
 * keys, candidate matching against the database, composition.  Returns the
 * first launch error (cudaSuccess when all were queued). */
cudaError_t collage_gpu_launch(const struct collage_args *a, const struct collage_files *db, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* COLLAGE_KERNELS_H */
