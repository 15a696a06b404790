/*
 * collage_math.h — the arithmetic of the collage, shared word for word by
 * the CPU reference (C), the database generator (C) and the kernels (CUDA
 * C, compiled by nvcc or by g++ for the simulated GPU).  Integers only, so
 * every build computes the same bits.
 *
 * An image (a database entry or a 32x32 tile of the input) is described by
 *   - its cumulative histogram: cdf[c][v] = pixels whose channel c is <= v,
 *     3 x 256 uint32 (3 KiB; the database stores it in a 4 KiB record);
 *   - its mean colour, rounded.
 * Two images are compared by the L1 distance of their cumulative histograms
 * (per channel, the 1-D earth mover's distance), so near colours are near.
 * Candidates come from locality-sensitive hashing of the mean colour: table
 * t quantises the colour cube into cells of `cell` levels, shifted by a
 * per-table offset, so colours that fall into one cell in any table meet.
 */
#ifndef COLLAGE_MATH_H
#define COLLAGE_MATH_H

#include <stdint.h>

#if defined(__CUDACC__)
#define MOSAIC_HD __host__ __device__ __forceinline__
#else
#define MOSAIC_HD static inline
#endif

#define MOSAIC_PAGE_BYTES 4096u                 /* file records and header pages */
#define COLLAGE_SIDE 32u                        /* tile and tiny-image side */
#define COLLAGE_PIXELS (COLLAGE_SIDE * COLLAGE_SIDE)
#define COLLAGE_HIST_WORDS (3u * 256u)          /* cdf[3][256] */
#define COLLAGE_RECORD_WORDS 1024u              /* 4 KiB records, in uint32 */
#define COLLAGE_MAX_TABLES 8u
#define COLLAGE_CAND_PER_TABLE 32u              /* candidates read per table */
#define COLLAGE_NO_MATCH 0xffffffffffffffffull  /* packed best before any candidate */

/* LSH parameters: stored in the index file's header, passed to kernels by
 * value. */
struct collage_lsh {
	uint32_t tables;        /* 1..COLLAGE_MAX_TABLES */
	uint32_t cell;          /* quantisation step, levels */
	uint32_t q;             /* cells per channel: 255 / cell + 2 */
	uint32_t buckets;       /* q^3 */
	uint8_t off[COLLAGE_MAX_TABLES][3];     /* per-table shift, < cell */
};

MOSAIC_HD uint32_t collage_channel(uint32_t px, uint32_t c)
{
	return (px >> (8u * c)) & 0xffu;
}

/* hist: 768 per-value counts -> cdf (768) and the rounded mean colour. */
MOSAIC_HD void collage_features(const uint32_t *hist, uint32_t *cdf, uint32_t *mean)
{
	for (uint32_t c = 0; c < 3; c++) {
		uint32_t run = 0, sum = 0, n = 0;
		for (uint32_t v = 0; v < 256; v++) {
			uint32_t h = hist[c * 256 + v];
			run += h;
			sum += h * v;
			cdf[c * 256 + v] = run;
		}
		n = run ? run : 1;
		mean[c] = (sum + n / 2) / n;
	}
}

MOSAIC_HD uint32_t collage_key(const struct collage_lsh *p, uint32_t t, const uint32_t *mean)
{
	uint32_t k = 0;
	for (uint32_t c = 3; c-- > 0;)
		k = k * p->q + (mean[c] + p->off[t][c]) / p->cell;
	return k;
}

MOSAIC_HD uint32_t collage_distance(const uint32_t *a, const uint32_t *b)
{
	uint32_t d = 0;
	for (uint32_t i = 0; i < COLLAGE_HIST_WORDS; i++)
		d += a[i] > b[i] ? a[i] - b[i] : b[i] - a[i];
	return d;
}

/* Smaller is better: distance first, then the lower image id. */
MOSAIC_HD uint64_t collage_pack(uint32_t distance, uint32_t id)
{
	return ((uint64_t)distance << 32) | id;
}

/* The pixel a tile gets where no candidate was found: its mean colour. */
MOSAIC_HD uint32_t collage_flat_pixel(const uint32_t *mean)
{
	return mean[0] | (mean[1] << 8) | (mean[2] << 16) | (0xffu << 24);
}

#endif /* COLLAGE_MATH_H */
