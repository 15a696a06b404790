/*
 * stitch_math.h — the arithmetic of the stitch, shared by the CPU side
 * (C) and the kernel (CUDA C, nvcc or g++ for the simulated GPU).
 *
 * Tiles of a grid overlap their neighbours by `overlap` pixels.  Every
 * canvas pixel belongs to exactly one tile: the overlap is cut in the
 * middle, so tile (r, c) owns canvas columns [bx(c), bx(c+1)) and rows
 * [by(r), by(r+1)) (research anchors §2c: each tile writes row segments at
 * its global offset; with overlap, neighbours write into the same pages).
 * A pixel's value is the owning tile's pixel, sharpened by an unsharp mask
 * over a (2*radius+1)^2 box clamped to the tile: the cost knob.
 */
#ifndef STITCH_MATH_H
#define STITCH_MATH_H

#include <stdint.h>

#if defined(__CUDACC__)
#define STITCH_HD __host__ __device__ __forceinline__
#else
#define STITCH_HD static inline
#endif

#define STITCH_HEADER_BYTES 4096u       /* tiles and canvas files: pixels start one page in */

struct stitch_geom {
	uint32_t rows, cols;            /* tile grid */
	uint32_t tile_w, tile_h;        /* pixels (8-bit grey) */
	uint32_t overlap;               /* pixels shared with each neighbour */
	uint32_t step_x, step_y;        /* tile_w - overlap, tile_h - overlap */
	uint32_t canvas_w, canvas_h;
	uint32_t radius;                /* sharpening box radius */
	uint32_t split_x;               /* canvas columns < split_x: CPU side; the rest: GPU side */
};

/* Column (or row) of tiles owning canvas coordinate v. */
STITCH_HD uint32_t stitch_owner(uint32_t v, uint32_t step, uint32_t overlap, uint32_t n)
{
	uint32_t half = overlap / 2;
	if (v < half)
		return 0;
	uint32_t k = (v - half) / step;
	return k < n - 1 ? k : n - 1;
}

/* First canvas column (or row) owned by tile column (or row) k. */
STITCH_HD uint32_t stitch_bound(uint32_t k, uint32_t step, uint32_t overlap)
{
	return k == 0 ? 0 : k * step + overlap / 2;
}

/* The canvas pixel (x, y), from the tiles' pixel data (tile-major, each
 * tile row-major). */
STITCH_HD uint8_t stitch_pixel(const struct stitch_geom *g, const uint8_t *tiles, uint32_t x, uint32_t y)
{
	uint32_t c = stitch_owner(x, g->step_x, g->overlap, g->cols);
	uint32_t r = stitch_owner(y, g->step_y, g->overlap, g->rows);
	const uint8_t *t = tiles + ((uint64_t)r * g->cols + c) * g->tile_w * g->tile_h;
	int lx = (int)(x - c * g->step_x), ly = (int)(y - r * g->step_y);
	int rad = (int)g->radius, w = (int)g->tile_w, h = (int)g->tile_h;
	uint32_t sum = 0, n = 0;
	for (int dy = -rad; dy <= rad; dy++) {
		int yy = ly + dy;
		yy = yy < 0 ? 0 : yy >= h ? h - 1 : yy;
		for (int dx = -rad; dx <= rad; dx++) {
			int xx = lx + dx;
			xx = xx < 0 ? 0 : xx >= w ? w - 1 : xx;
			sum += t[yy * w + xx];
			n++;
		}
	}
	int v = 2 * (int)t[ly * w + lx] - (int)((sum + n / 2) / n);
	return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

#endif /* STITCH_MATH_H */
