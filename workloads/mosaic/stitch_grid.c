/*
 * stitch_grid.c — see stitch_grid.h.
 */
#define _GNU_SOURCE
#include "stitch_grid.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mosaic_util.h"

#define STITCH_MAX_SIDE 8192u
#define STITCH_MAX_GRID 256u
#define STITCH_MAX_RADIUS 64u
#define STITCH_MAX_THREADS 64u

static int grid_ok(uint32_t rows, uint32_t cols, uint32_t tile_w, uint32_t tile_h, uint32_t overlap)
{
	if (rows < 1 || cols < 1 || rows > STITCH_MAX_GRID || cols > STITCH_MAX_GRID) {
		mosaic_err("grid %ux%u out of range (1..%u tiles per side)", rows, cols, STITCH_MAX_GRID);
		return 0;
	}
	if (tile_w < 8 || tile_h < 8 || tile_w > STITCH_MAX_SIDE || tile_h > STITCH_MAX_SIDE) {
		mosaic_err("tile size %ux%u out of range (8..%u per side)", tile_w, tile_h, STITCH_MAX_SIDE);
		return 0;
	}
	if (2 * overlap >= tile_w || 2 * overlap >= tile_h) {
		mosaic_err("overlap %u must be less than half the tile (%ux%u)", overlap, tile_w, tile_h);
		return 0;
	}
	return 1;
}

int stitch_geom_make(struct stitch_geom *g, uint32_t rows, uint32_t cols, uint32_t tile_w, uint32_t tile_h,
		     uint32_t overlap, uint32_t radius, uint32_t gpu_cols)
{
	memset(g, 0, sizeof(*g));
	if (!grid_ok(rows, cols, tile_w, tile_h, overlap))
		return -1;
	if (radius > STITCH_MAX_RADIUS) {
		mosaic_err("radius %u out of range (0..%u)", radius, STITCH_MAX_RADIUS);
		return -1;
	}
	if (gpu_cols > cols) {
		mosaic_err("%u GPU tile columns requested, the grid has %u", gpu_cols, cols);
		return -1;
	}
	g->rows = rows;
	g->cols = cols;
	g->tile_w = tile_w;
	g->tile_h = tile_h;
	g->overlap = overlap;
	g->step_x = tile_w - overlap;
	g->step_y = tile_h - overlap;
	g->canvas_w = (cols - 1) * g->step_x + tile_w;
	g->canvas_h = (rows - 1) * g->step_y + tile_h;
	g->radius = radius;
	g->split_x = gpu_cols == 0 ? g->canvas_w : stitch_bound(cols - gpu_cols, g->step_x, overlap);
	return 0;
}

uint64_t stitch_tiles_file_bytes(const struct stitch_header *h)
{
	return STITCH_HEADER_BYTES + (uint64_t)h->rows * h->cols * h->tile_w * h->tile_h;
}

uint64_t stitch_canvas_file_bytes(const struct stitch_geom *g)
{
	return STITCH_HEADER_BYTES + (uint64_t)g->canvas_w * g->canvas_h;
}

/* The specimen at canvas coordinates: a slowly varying background and one
 * round cell per 64x64 cell of a hashed lattice (looked up in the 3x3
 * neighbourhood, so cells cross lattice lines). */
static double specimen(double x, double y, uint64_t seed)
{
	double v = 50 + 18 * sin(x / 310.0) * cos(y / 270.0);
	long cx = (long)floor(x / 64), cy = (long)floor(y / 64);
	for (long j = cy - 1; j <= cy + 1; j++)
		for (long i = cx - 1; i <= cx + 1; i++) {
			struct mosaic_rng r = { seed ^ ((uint64_t)i * 0x9e3779b97f4a7c15ull) ^
						((uint64_t)j * 0xc2b2ae3d27d4eb4full) };
			mosaic_rng_next(&r);
			if (mosaic_rng_below(&r, 3) == 0)
				continue;       /* empty lattice cell */
			double px = (double)i * 64 + mosaic_rng_below(&r, 64);
			double py = (double)j * 64 + mosaic_rng_below(&r, 64);
			double rad = 10 + mosaic_rng_below(&r, 30), bright = 60 + mosaic_rng_below(&r, 120);
			double d2 = ((x - px) * (x - px) + (y - py) * (y - py)) / (rad * rad);
			if (d2 < 1)
				v += bright * (1 - d2) * (d2 > 0.6 ? 1.3 : 1.0);   /* brighter membrane */
		}
	return v;
}

int stitch_tiles_generate(const char *path, uint32_t rows, uint32_t cols, uint32_t tile_w, uint32_t tile_h,
			  uint32_t overlap, uint64_t seed)
{
	if (!grid_ok(rows, cols, tile_w, tile_h, overlap))
		return -1;
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		mosaic_err("%s: %s", path, strerror(errno));
		return -1;
	}
	unsigned char page[STITCH_HEADER_BYTES];
	struct stitch_header h = { .version = STITCH_VERSION, .rows = rows, .cols = cols, .tile_w = tile_w,
				   .tile_h = tile_h, .overlap = overlap, .seed = seed };
	memcpy(h.magic, STITCH_MAGIC, 8);
	memset(page, 0, sizeof(page));
	memcpy(page, &h, sizeof(h));
	size_t tile_bytes = (size_t)tile_w * tile_h;
	uint8_t *tile = malloc(tile_bytes);
	int rc = tile == NULL ? -1 : mosaic_pwrite_all(fd, path, page, sizeof(page), 0);
	if (tile == NULL)
		mosaic_err("out of memory for a %ux%u tile", tile_w, tile_h);
	for (uint32_t r = 0; rc == 0 && r < rows; r++)
		for (uint32_t c = 0; rc == 0 && c < cols; c++) {
			struct mosaic_rng noise = { seed ^ (((uint64_t)r << 32) | c) ^ 0x6e6f697365ull };
			double x0 = (double)c * (tile_w - overlap), y0 = (double)r * (tile_h - overlap);
			double gain = 0.9 + 0.2 * (double)mosaic_rng_below(&noise, 1000) / 1000.0;
			for (uint32_t y = 0; y < tile_h; y++)
				for (uint32_t x = 0; x < tile_w; x++) {
					double u = (x + 0.5) / tile_w - 0.5, v = (y + 0.5) / tile_h - 0.5;
					double vignette = 1 - 0.5 * (u * u + v * v);
					double p = specimen(x0 + x, y0 + y, seed) * gain * vignette +
						   (double)mosaic_rng_below(&noise, 7) - 3;
					tile[(size_t)y * tile_w + x] = (uint8_t)(p < 0 ? 0 : p > 255 ? 255 : lround(p));
				}
			rc = mosaic_pwrite_all(fd, path, tile, tile_bytes,
					       STITCH_HEADER_BYTES + ((uint64_t)r * cols + c) * tile_bytes);
		}
	free(tile);
	if (close(fd) != 0 && rc == 0) {
		mosaic_err("%s: close: %s", path, strerror(errno));
		rc = -1;
	}
	return rc == 0 ? 0 : -1;
}

int stitch_tiles_open(const char *path, struct stitch_header *h, int *fd, uint64_t *file_bytes)
{
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0) {
		mosaic_err("%s: %s", path, strerror(errno));
		return -1;
	}
	int64_t size = mosaic_file_size(*fd, path);
	if (size < 0)
		goto fail;
	if (size < (int64_t)sizeof(*h)) {
		mosaic_err("%s: truncated: %lld bytes, shorter than its header", path, (long long)size);
		goto fail;
	}
	if (mosaic_pread_all(*fd, path, h, sizeof(*h), 0) != 0)
		goto fail;
	if (memcmp(h->magic, STITCH_MAGIC, 8) != 0 || h->version != STITCH_VERSION) {
		mosaic_err("%s: not a stitch tiles file (bad magic or version)", path);
		goto fail;
	}
	if (!grid_ok(h->rows, h->cols, h->tile_w, h->tile_h, h->overlap)) {
		mosaic_err("%s: the grid in its header is invalid", path);
		goto fail;
	}
	uint64_t want = stitch_tiles_file_bytes(h);
	if ((uint64_t)size != want) {
		mosaic_err("%s: %s: %lld bytes, expected %llu for %ux%u tiles of %ux%u", path,
			   (uint64_t)size < want ? "truncated" : "wrong size", (long long)size,
			   (unsigned long long)want, h->rows, h->cols, h->tile_w, h->tile_h);
		goto fail;
	}
	*file_bytes = want;
	return 0;
fail:
	close(*fd);
	*fd = -1;
	return -1;
}

void stitch_canvas_header(const struct stitch_geom *g, unsigned char *page)
{
	char tail[64];
	int n = snprintf(tail, sizeof(tail), "\n%u %u\n255\n", g->canvas_w, g->canvas_h);
	memset(page, ' ', STITCH_HEADER_BYTES);
	static const char head[] = "P5\n# stitched canvas; header padded to one page";
	memcpy(page, head, sizeof(head) - 1);
	memcpy(page + STITCH_HEADER_BYTES - n, tail, (size_t)n);
}

int stitch_canvas_parse(const unsigned char *page, uint32_t *w, uint32_t *h)
{
	char buf[STITCH_HEADER_BYTES + 1];
	memcpy(buf, page, STITCH_HEADER_BYTES);
	buf[STITCH_HEADER_BYTES] = '\0';
	if (strncmp(buf, "P5\n#", 4) != 0)
		return -1;
	const char *nl = strchr(buf + 4, '\n');    /* end of the comment */
	unsigned ww, hh, maxval;
	int used = 0;
	if (nl == NULL || sscanf(nl, " %u %u %u%n", &ww, &hh, &maxval, &used) != 3 || maxval != 255 ||
	    (nl - buf) + used != STITCH_HEADER_BYTES - 1)
		return -1;
	*w = ww;
	*h = hh;
	return 0;
}

void stitch_compose_cpu(const struct stitch_geom *g, const uint8_t *tiles, uint8_t *canvas, uint32_t x0,
			uint32_t x1, uint32_t y0, uint32_t y1)
{
	for (uint32_t y = y0; y < y1; y++)
		for (uint32_t x = x0; x < x1; x++)
			canvas[(size_t)y * g->canvas_w + x] = stitch_pixel(g, tiles, x, y);
}

struct band {
	const struct stitch_geom *g;
	const uint8_t *tiles;
	uint8_t *canvas;
	uint32_t x0, x1, y0, y1;
};

static void *band_main(void *arg)
{
	struct band *b = arg;
	stitch_compose_cpu(b->g, b->tiles, b->canvas, b->x0, b->x1, b->y0, b->y1);
	return NULL;
}

int stitch_compose_threads(const struct stitch_geom *g, const uint8_t *tiles, uint8_t *canvas, uint32_t x0,
			   uint32_t x1, unsigned threads)
{
	if (threads < 1 || threads > STITCH_MAX_THREADS) {
		mosaic_err("thread count %u out of range (1..%u)", threads, STITCH_MAX_THREADS);
		return -1;
	}
	struct band b[STITCH_MAX_THREADS];
	pthread_t tid[STITCH_MAX_THREADS];
	unsigned started = 0;
	int rc = 0;
	for (unsigned k = 0; k < threads; k++) {
		b[k] = (struct band){ g, tiles, canvas, x0, x1, (uint32_t)((uint64_t)g->canvas_h * k / threads),
				      (uint32_t)((uint64_t)g->canvas_h * (k + 1) / threads) };
		if (k + 1 == threads)
			break;          /* the calling thread takes the last band */
		int e = pthread_create(&tid[k], NULL, band_main, &b[k]);
		if (e != 0) {
			mosaic_err("pthread_create: %s", strerror(e));
			rc = -1;
			break;
		}
		started++;
	}
	if (rc == 0)
		band_main(&b[threads - 1]);
	for (unsigned k = 0; k < started; k++)
		pthread_join(tid[k], NULL);
	return rc;
}

uint64_t stitch_shared_pages(const struct stitch_geom *g)
{
	if (g->split_x == 0 || g->split_x >= g->canvas_w)
		return 0;
	uint64_t npages = (stitch_canvas_file_bytes(g) + MOSAIC_PAGE - 1) / MOSAIC_PAGE;
	unsigned char *side = calloc(npages, 1);   /* bit 0: CPU bytes, bit 1: GPU bytes */
	if (side == NULL)
		return 0;
	for (uint64_t y = 0; y < g->canvas_h; y++) {
		uint64_t row = STITCH_HEADER_BYTES + y * g->canvas_w;
		for (uint64_t p = row / MOSAIC_PAGE; p <= (row + g->split_x - 1) / MOSAIC_PAGE; p++)
			side[p] |= 1;
		for (uint64_t p = (row + g->split_x) / MOSAIC_PAGE; p <= (row + g->canvas_w - 1) / MOSAIC_PAGE; p++)
			side[p] |= 2;
	}
	uint64_t n = 0;
	for (uint64_t p = 0; p < npages; p++)
		n += side[p] == 3;
	free(side);
	return n;
}
