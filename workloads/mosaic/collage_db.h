/*
 * collage_db.h — the tiny-image database of the collage, three files that
 * share one prefix:
 *
 *   PREFIX.tiles  header page, then one 4 KiB record per image: 32x32 RGBA
 *   PREFIX.hist   header page, then one 4 KiB record per image: its
 *                 cumulative histogram, uint32 cdf[3][256] (3 KiB), zero pad
 *   PREFIX.lsh    header page (with the LSH parameters), then per table the
 *                 bucket starts uint32 start[buckets + 1], then per table the
 *                 image ids uint32 ids[images] grouped by bucket
 *
 * Records are page-aligned, so reading one image's record touches exactly
 * one page of its file (the access pattern of the GPUfs mosaic, research
 * anchors §2b).  Generation is deterministic: the same images and seed give
 * the same bytes.
 */
#ifndef COLLAGE_DB_H
#define COLLAGE_DB_H

#include <stdint.h>

#include "collage_math.h"
#include "mosaic_image.h"

#define COLLAGE_MAGIC "MOSAICDB"
#define COLLAGE_VERSION 1u

enum collage_file_kind { COLLAGE_TILES = 1, COLLAGE_HIST = 2, COLLAGE_LSH = 3 };
#define COLLAGE_NFILES 3

/* The first bytes of every file's header page (the rest is zero). */
struct collage_header {
	char magic[8];
	uint32_t kind;          /* enum collage_file_kind */
	uint32_t version;
	uint64_t images;
	uint64_t seed;
	uint32_t record_bytes;  /* 4096 (tiles, hist); 0 (lsh) */
	uint32_t side;          /* 32 */
	struct collage_lsh lsh; /* lsh file only */
};

/* An open database, validated. */
struct collage_db {
	char path[COLLAGE_NFILES][4096];
	int fd[COLLAGE_NFILES];
	uint64_t file_bytes[COLLAGE_NFILES];
	uint64_t images, seed;
	struct collage_lsh lsh;
	uint64_t bytes_read;    /* by collage_db_open's checks */
};

/* Index of a file kind in the arrays above. */
static inline int collage_file_index(enum collage_file_kind k)
{
	return (int)k - 1;
}

/* Expected size of a database file. */
uint64_t collage_file_bytes(enum collage_file_kind k, uint64_t images, const struct collage_lsh *lsh);

/* The LSH parameters a database of this seed uses. */
void collage_lsh_params(uint64_t seed, struct collage_lsh *lsh);

/* Writes PREFIX.tiles/.hist/.lsh.  0 or -1 (reported). */
int collage_db_generate(const char *prefix, uint64_t images, uint64_t seed);

/* Opens and checks all three files: headers, agreement between them, sizes
 * (a truncated file is an error naming it), and the index (every bucket
 * range and id in bounds, so kernels can trust it).  0 or -1 (reported). */
int collage_db_open(const char *prefix, struct collage_db *db);
void collage_db_close(struct collage_db *db);

/* Image `id` of a database generated with `seed`: 1024 RGBA pixels. */
void collage_tiny_image(uint64_t seed, uint64_t id, uint32_t *px);

/* The generated input picture: a landscape of width x height (multiples of
 * 32 are what the collage accepts). */
int collage_input_generate(struct mosaic_image *img, uint32_t width, uint32_t height, uint64_t seed);

#endif /* COLLAGE_DB_H */
