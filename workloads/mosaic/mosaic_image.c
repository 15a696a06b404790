/*
 * mosaic_image.c — PNG through libpng's simplified API (png_image_*), which
 * converts any PNG to the format asked for; binary PPM read directly (a
 * text header and raw bytes: nothing a library would add).
 */
#include "mosaic_image.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>

#include "mosaic_util.h"

/* Largest side accepted: keeps width*height*4 far from overflow. */
#define MOSAIC_IMAGE_MAX_SIDE 65536u

static int load_png(const char *path, struct mosaic_image *img)
{
	png_image pi;
	memset(&pi, 0, sizeof(pi));
	pi.version = PNG_IMAGE_VERSION;
	if (!png_image_begin_read_from_file(&pi, path)) {
		mosaic_err("%s: not a readable PNG: %s", path, pi.message);
		return -1;
	}
	if (pi.width == 0 || pi.height == 0 || pi.width > MOSAIC_IMAGE_MAX_SIDE ||
	    pi.height > MOSAIC_IMAGE_MAX_SIDE) {
		mosaic_err("%s: image size %ux%u is out of range (1..%u per side)", path, pi.width,
			   pi.height, MOSAIC_IMAGE_MAX_SIDE);
		png_image_free(&pi);
		return -1;
	}
	pi.format = PNG_FORMAT_RGBA;
	uint32_t *px = malloc((size_t)pi.width * pi.height * 4);
	if (px == NULL) {
		mosaic_err("%s: out of memory for %ux%u pixels", path, pi.width, pi.height);
		png_image_free(&pi);
		return -1;
	}
	if (!png_image_finish_read(&pi, NULL, px, 0, NULL)) {
		mosaic_err("%s: PNG decoding failed: %s", path, pi.message);
		free(px);
		png_image_free(&pi);
		return -1;
	}
	img->width = pi.width;
	img->height = pi.height;
	img->rgba = px;
	return 0;
}

/* Reads one unsigned decimal field of a PPM header, skipping whitespace
 * and '#' comments.  -1 when there is none. */
static long ppm_field(FILE *f)
{
	int c;
	for (;;) {
		c = fgetc(f);
		if (c == '#') {
			while (c != '\n' && c != EOF)
				c = fgetc(f);
		} else if (!isspace(c)) {
			break;
		}
	}
	if (c == EOF || !isdigit(c))
		return -1;
	long v = 0;
	while (c != EOF && isdigit(c)) {
		v = v * 10 + (c - '0');
		if (v > 1000000)
			return -1;
		c = fgetc(f);
	}
	/* exactly one whitespace character follows the last header field */
	if (c != EOF && !isspace(c))
		return -1;
	return v;
}

static int load_ppm(const char *path, FILE *f, struct mosaic_image *img)
{
	long w = ppm_field(f), h = ppm_field(f), maxval = ppm_field(f);
	if (w <= 0 || h <= 0 || maxval < 0) {
		mosaic_err("%s: malformed PPM header", path);
		return -1;
	}
	if (maxval != 255) {
		mosaic_err("%s: PPM maxval %ld is not supported (only 255)", path, maxval);
		return -1;
	}
	if ((unsigned long)w > MOSAIC_IMAGE_MAX_SIDE || (unsigned long)h > MOSAIC_IMAGE_MAX_SIDE) {
		mosaic_err("%s: image size %ldx%ld is out of range (1..%u per side)", path, w, h,
			   MOSAIC_IMAGE_MAX_SIDE);
		return -1;
	}
	size_t n = (size_t)w * (size_t)h;
	unsigned char *rgb = malloc(n * 3);
	uint32_t *px = malloc(n * 4);
	if (rgb == NULL || px == NULL) {
		mosaic_err("%s: out of memory for %ldx%ld pixels", path, w, h);
		free(rgb);
		free(px);
		return -1;
	}
	size_t got = fread(rgb, 1, n * 3, f);
	if (got != n * 3) {
		mosaic_err("%s: PPM pixel data truncated: %zu of %zu bytes", path, got, n * 3);
		free(rgb);
		free(px);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		px[i] = mosaic_rgba(rgb[3 * i], rgb[3 * i + 1], rgb[3 * i + 2], 255);
	free(rgb);
	img->width = (uint32_t)w;
	img->height = (uint32_t)h;
	img->rgba = px;
	return 0;
}

int mosaic_image_load(const char *path, struct mosaic_image *img)
{
	memset(img, 0, sizeof(*img));
	FILE *f = fopen(path, "rb");
	if (f == NULL) {
		mosaic_err("%s: %s", path, strerror(errno));
		return -1;
	}
	unsigned char magic[8] = { 0 };
	size_t n = fread(magic, 1, sizeof(magic), f);
	int rc;
	if (n == sizeof(magic) && png_sig_cmp(magic, 0, sizeof(magic)) == 0) {
		fclose(f);
		return load_png(path, img);
	}
	if (n >= 2 && magic[0] == 'P' && magic[1] == '6') {
		rc = fseek(f, 2, SEEK_SET) == 0 ? load_ppm(path, f, img) : -1;
	} else {
		mosaic_err("%s: neither a PNG nor a binary PPM (P6) image", path);
		rc = -1;
	}
	fclose(f);
	return rc;
}

/* stride: row stride in components (bytes here), as png_image wants it */
static int save_png(const char *path, const void *px, uint32_t width, uint32_t height,
		    uint32_t format, long stride)
{
	png_image pi;
	memset(&pi, 0, sizeof(pi));
	pi.version = PNG_IMAGE_VERSION;
	pi.width = width;
	pi.height = height;
	pi.format = format;
	if (!png_image_write_to_file(&pi, path, 0, px, (png_int_32)stride, NULL)) {
		mosaic_err("%s: writing PNG failed: %s", path, pi.message);
		return -1;
	}
	return 0;
}

int mosaic_image_save_png(const char *path, const struct mosaic_image *img)
{
	return save_png(path, img->rgba, img->width, img->height, PNG_FORMAT_RGBA, (long)img->width * 4);
}

int mosaic_gray_save_png(const char *path, const uint8_t *px, uint32_t width, uint32_t height,
			 uint64_t stride)
{
	return save_png(path, px, width, height, PNG_FORMAT_GRAY, (long)stride);
}

void mosaic_image_free(struct mosaic_image *img)
{
	free(img->rgba);
	img->rgba = NULL;
	img->width = img->height = 0;
}
