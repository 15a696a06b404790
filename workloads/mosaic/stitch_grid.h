/*
 * stitch_grid.h — the stitch's files and its CPU side.
 *
 *   tiles file   header page ("MOSAICST", the grid), then the tiles, each
 *                tile_w x tile_h 8-bit grey, row-major, tiles in row-major
 *                grid order
 *   canvas file  a binary PGM whose header is padded (with a comment) to
 *                exactly one page, then canvas_h rows of canvas_w bytes:
 *                one row-major canvas, readable by any image viewer
 */
#ifndef STITCH_GRID_H
#define STITCH_GRID_H

#include <stddef.h>
#include <stdint.h>

#include "stitch_math.h"

#define STITCH_MAGIC "MOSAICST"
#define STITCH_VERSION 1u

struct stitch_header {
	char magic[8];
	uint32_t version;
	uint32_t rows, cols, tile_w, tile_h, overlap;
	uint64_t seed;
};

/* Fills g from a grid description; radius and split are set from the
 * arguments (gpu_cols: tile columns given to the GPU, from the right).
 * 0 or -1 (reported) for a grid that makes no sense. */
int stitch_geom_make(struct stitch_geom *g, uint32_t rows, uint32_t cols, uint32_t tile_w, uint32_t tile_h,
		     uint32_t overlap, uint32_t radius, uint32_t gpu_cols);

/* Writes a tiles file: tiles cut from one synthetic specimen (smooth
 * background, cells), each with its own illumination falloff and noise so
 * overlaps differ a little, as a microscope's do.  0 or -1 (reported). */
int stitch_tiles_generate(const char *path, uint32_t rows, uint32_t cols, uint32_t tile_w, uint32_t tile_h,
			  uint32_t overlap, uint64_t seed);

/* Opens and checks a tiles file (header, sizes: a truncated file is an
 * error naming it).  0 or -1 (reported); *fd is open on success. */
int stitch_tiles_open(const char *path, struct stitch_header *h, int *fd, uint64_t *file_bytes);

uint64_t stitch_tiles_file_bytes(const struct stitch_header *h);
uint64_t stitch_canvas_file_bytes(const struct stitch_geom *g);

/* The canvas file's header page (PGM "P5" padded to STITCH_HEADER_BYTES). */
void stitch_canvas_header(const struct stitch_geom *g, unsigned char *page);

/* Parses a canvas file's header page: 0 and the size, or -1. */
int stitch_canvas_parse(const unsigned char *page, uint32_t *w, uint32_t *h);

/* Composes canvas columns [x0, x1) of rows [y0, y1) on the CPU, from the
 * tiles' pixel data into the canvas's pixel data (row stride canvas_w). */
void stitch_compose_cpu(const struct stitch_geom *g, const uint8_t *tiles, uint8_t *canvas, uint32_t x0,
			uint32_t x1, uint32_t y0, uint32_t y1);

/* Composes [x0, x1) x all rows with `threads` host threads.  0 or -1. */
int stitch_compose_threads(const struct stitch_geom *g, const uint8_t *tiles, uint8_t *canvas, uint32_t x0,
			   uint32_t x1, unsigned threads);

/* Canvas file pages that hold pixels of both sides (written by both). */
uint64_t stitch_shared_pages(const struct stitch_geom *g);

#endif /* STITCH_GRID_H */
