/*
 * mosaic_image.h — 8-bit RGBA images in memory, read from PNG (libpng) or
 * binary PPM (P6), written as PNG.
 */
#ifndef MOSAIC_IMAGE_H
#define MOSAIC_IMAGE_H

#include <stdint.h>

struct mosaic_image {
	uint32_t width, height;
	uint32_t *rgba;         /* width*height pixels, row-major; byte order R,G,B,A */
};

/* Pixel from channels (memory order R,G,B,A on every host this runs on:
 * little-endian, as CUDA requires). */
static inline uint32_t mosaic_rgba(uint32_t r, uint32_t g, uint32_t b, uint32_t a)
{
	return r | (g << 8) | (b << 16) | (a << 24);
}

/* Loads a PNG (any bit depth or colour type, converted to 8-bit RGBA) or a
 * binary PPM (P6, maxval 255, alpha set to 255).  0 or -1 with the reason
 * reported on stderr, naming the file. */
int mosaic_image_load(const char *path, struct mosaic_image *img);

/* Writes an 8-bit RGBA PNG.  0 or -1 (reported). */
int mosaic_image_save_png(const char *path, const struct mosaic_image *img);

/* Writes an 8-bit greyscale PNG of `width` x `height` bytes with row
 * stride `stride`.  0 or -1 (reported). */
int mosaic_gray_save_png(const char *path, const uint8_t *px, uint32_t width, uint32_t height,
			 uint64_t stride);

void mosaic_image_free(struct mosaic_image *img);

#endif /* MOSAIC_IMAGE_H */
