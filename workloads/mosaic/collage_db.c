/*
 * collage_db.c — generating, opening and checking the collage database.
 */
#define _GNU_SOURCE
#include "collage_db.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mosaic_util.h"

/* Images generated and written per batch. */
#define GEN_BATCH 4096u

static const char *const file_suffix[COLLAGE_NFILES] = { ".tiles", ".hist", ".lsh" };

void collage_lsh_params(uint64_t seed, struct collage_lsh *lsh)
{
	memset(lsh, 0, sizeof(*lsh));
	lsh->tables = COLLAGE_MAX_TABLES;
	lsh->cell = 32;
	lsh->q = 255 / lsh->cell + 2;
	lsh->buckets = lsh->q * lsh->q * lsh->q;
	struct mosaic_rng r = { seed ^ 0x6c73682d6f666673ull };
	for (uint32_t t = 0; t < lsh->tables; t++)
		for (uint32_t c = 0; c < 3; c++)
			lsh->off[t][c] = (uint8_t)(t == 0 ? 0 : mosaic_rng_below(&r, lsh->cell));
}

uint64_t collage_file_bytes(enum collage_file_kind k, uint64_t images, const struct collage_lsh *lsh)
{
	if (k == COLLAGE_LSH)
		return MOSAIC_PAGE + 4ull * lsh->tables * (lsh->buckets + 1ull) + 4ull * lsh->tables * images;
	return MOSAIC_PAGE + images * MOSAIC_PAGE;
}

static uint32_t clamp255(int v)
{
	return v < 0 ? 0u : v > 255 ? 255u : (uint32_t)v;
}

/* A tiny image: one of six patterns between two colours, plus noise.  The
 * second colour is near the first for most images, so the database holds
 * plenty of nearly uniform images of every colour (what a collage needs)
 * and some busy ones. */
void collage_tiny_image(uint64_t seed, uint64_t id, uint32_t *px)
{
	struct mosaic_rng r = { seed * 0x2545f4914f6cdd1dull + id * 0x9e3779b97f4a7c15ull + 1 };
	mosaic_rng_next(&r);
	int a[3], b[3];
	int spread = mosaic_rng_below(&r, 4) == 0 ? 255 : 48;
	for (int c = 0; c < 3; c++) {
		a[c] = (int)mosaic_rng_below(&r, 256);
		b[c] = (int)clamp255(a[c] + (int)mosaic_rng_below(&r, 2 * spread + 1) - spread);
	}
	uint32_t pattern = mosaic_rng_below(&r, 6);
	uint32_t period = 2 + mosaic_rng_below(&r, 7);
	int noise = (int)mosaic_rng_below(&r, 24);
	for (uint32_t y = 0; y < COLLAGE_SIDE; y++) {
		for (uint32_t x = 0; x < COLLAGE_SIDE; x++) {
			int w; /* weight of colour b, 0..31 */
			switch (pattern) {
			case 0: w = 0; break;
			case 1: w = (int)x; break;
			case 2: w = (int)y; break;
			case 3: {
				int dx = (int)x - 16, dy = (int)y - 16;
				w = (dx * dx + dy * dy) / 16;
				w = w > 31 ? 31 : w;
				break;
			}
			case 4: w = ((x / period + y / period) & 1) ? 31 : 0; break;
			default: w = x + y < COLLAGE_SIDE ? 0 : 31; break;
			}
			uint32_t ch[3];
			for (int c = 0; c < 3; c++) {
				int n = noise ? (int)mosaic_rng_below(&r, 2u * (uint32_t)noise + 1) - noise : 0;
				ch[c] = clamp255((a[c] * (31 - w) + b[c] * w) / 31 + n);
			}
			px[y * COLLAGE_SIDE + x] = mosaic_rgba(ch[0], ch[1], ch[2], 255);
		}
	}
}

static void tiny_features(const uint32_t *px, uint32_t *cdf, uint32_t *mean)
{
	uint32_t hist[COLLAGE_HIST_WORDS];
	memset(hist, 0, sizeof(hist));
	for (uint32_t i = 0; i < COLLAGE_PIXELS; i++)
		for (uint32_t c = 0; c < 3; c++)
			hist[c * 256 + collage_channel(px[i], c)]++;
	collage_features(hist, cdf, mean);
}

static void fill_header(struct collage_header *h, enum collage_file_kind k, uint64_t images,
			uint64_t seed, const struct collage_lsh *lsh)
{
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, COLLAGE_MAGIC, 8);
	h->kind = (uint32_t)k;
	h->version = COLLAGE_VERSION;
	h->images = images;
	h->seed = seed;
	h->record_bytes = k == COLLAGE_LSH ? 0 : MOSAIC_PAGE;
	h->side = COLLAGE_SIDE;
	if (k == COLLAGE_LSH)
		h->lsh = *lsh;
}

static int create_file(const char *prefix, enum collage_file_kind k, char *path, size_t path_len)
{
	snprintf(path, path_len, "%s%s", prefix, file_suffix[collage_file_index(k)]);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		mosaic_err("%s: %s", path, strerror(errno));
	return fd;
}

/* Bucket lists: counting sort of the ids by key, then each bucket shuffled
 * (seeded) so that the first candidates of a bucket are a fair sample and
 * not always the lowest ids. */
static int write_index(int fd, const char *path, const uint32_t *keys, uint64_t images,
		       uint64_t seed, const struct collage_lsh *lsh)
{
	uint32_t nb = lsh->buckets;
	uint32_t *start = calloc((size_t)lsh->tables * (nb + 1), 4);
	uint32_t *ids = malloc((size_t)lsh->tables * images * 4);
	uint32_t *fill = malloc((size_t)nb * 4);
	if (start == NULL || ids == NULL || fill == NULL) {
		mosaic_err("%s: out of memory building the index", path);
		free(start);
		free(ids);
		free(fill);
		return -1;
	}
	struct mosaic_rng r = { seed ^ 0x62756b6574732121ull };
	for (uint32_t t = 0; t < lsh->tables; t++) {
		uint32_t *st = start + (size_t)t * (nb + 1);
		uint32_t *id = ids + (size_t)t * images;
		for (uint64_t i = 0; i < images; i++)
			st[keys[i * lsh->tables + t] + 1]++;
		for (uint32_t b = 0; b < nb; b++)
			st[b + 1] += st[b];
		memcpy(fill, st, (size_t)nb * 4);
		for (uint64_t i = 0; i < images; i++)
			id[fill[keys[i * lsh->tables + t]]++] = (uint32_t)i;
		for (uint32_t b = 0; b < nb; b++) {
			uint32_t n = st[b + 1] - st[b];
			for (uint32_t j = n; j > 1; j--) {
				uint32_t k = mosaic_rng_below(&r, j);
				uint32_t tmp = id[st[b] + j - 1];
				id[st[b] + j - 1] = id[st[b] + k];
				id[st[b] + k] = tmp;
			}
		}
	}
	int rc = mosaic_pwrite_all(fd, path, start, (size_t)lsh->tables * (nb + 1) * 4, MOSAIC_PAGE);
	if (rc == 0)
		rc = mosaic_pwrite_all(fd, path, ids, (size_t)lsh->tables * images * 4,
				       MOSAIC_PAGE + 4ull * lsh->tables * (nb + 1));
	free(start);
	free(ids);
	free(fill);
	return rc == 0 ? 0 : -1;
}

int collage_db_generate(const char *prefix, uint64_t images, uint64_t seed)
{
	if (images == 0 || images > (1ull << 28)) {
		mosaic_err("database size %llu is out of range (1..%llu images)",
			   (unsigned long long)images, 1ull << 28);
		return -1;
	}
	struct collage_lsh lsh;
	collage_lsh_params(seed, &lsh);
	char path[COLLAGE_NFILES][4096];
	int fd[COLLAGE_NFILES] = { -1, -1, -1 };
	int rc = -1;
	uint32_t *tiles = malloc((size_t)GEN_BATCH * MOSAIC_PAGE);
	uint32_t *hist = calloc((size_t)GEN_BATCH, MOSAIC_PAGE);
	uint32_t *keys = malloc((size_t)images * lsh.tables * 4);
	if (tiles == NULL || hist == NULL || keys == NULL) {
		mosaic_err("out of memory generating %llu images", (unsigned long long)images);
		goto out;
	}
	for (int k = COLLAGE_TILES; k <= COLLAGE_LSH; k++) {
		int i = collage_file_index((enum collage_file_kind)k);
		fd[i] = create_file(prefix, (enum collage_file_kind)k, path[i], sizeof(path[i]));
		if (fd[i] < 0)
			goto out;
		unsigned char page[MOSAIC_PAGE];
		struct collage_header h;
		fill_header(&h, (enum collage_file_kind)k, images, seed, &lsh);
		memset(page, 0, sizeof(page));
		memcpy(page, &h, sizeof(h));
		if (mosaic_pwrite_all(fd[i], path[i], page, sizeof(page), 0) != 0)
			goto out;
	}
	for (uint64_t first = 0; first < images; first += GEN_BATCH) {
		uint32_t n = (uint32_t)(images - first < GEN_BATCH ? images - first : GEN_BATCH);
		for (uint32_t j = 0; j < n; j++) {
			uint32_t *px = tiles + (size_t)j * COLLAGE_RECORD_WORDS;
			uint32_t *cdf = hist + (size_t)j * COLLAGE_RECORD_WORDS;
			uint32_t mean[3];
			collage_tiny_image(seed, first + j, px);
			tiny_features(px, cdf, mean);
			for (uint32_t t = 0; t < lsh.tables; t++)
				keys[(first + j) * lsh.tables + t] = collage_key(&lsh, t, mean);
		}
		uint64_t off = MOSAIC_PAGE + first * MOSAIC_PAGE;
		if (mosaic_pwrite_all(fd[0], path[0], tiles, (size_t)n * MOSAIC_PAGE, off) != 0 ||
		    mosaic_pwrite_all(fd[1], path[1], hist, (size_t)n * MOSAIC_PAGE, off) != 0)
			goto out;
	}
	rc = write_index(fd[2], path[2], keys, images, seed, &lsh);
out:
	for (int i = 0; i < COLLAGE_NFILES; i++)
		if (fd[i] >= 0 && close(fd[i]) != 0 && rc == 0) {
			mosaic_err("%s: close: %s", path[i], strerror(errno));
			rc = -1;
		}
	free(tiles);
	free(hist);
	free(keys);
	return rc;
}

static int check_header(const struct collage_header *h, const char *path, enum collage_file_kind k)
{
	if (memcmp(h->magic, COLLAGE_MAGIC, 8) != 0) {
		mosaic_err("%s: not a collage database file (bad magic)", path);
		return -1;
	}
	if (h->version != COLLAGE_VERSION || h->kind != (uint32_t)k) {
		mosaic_err("%s: version %u kind %u, expected version %u kind %u", path, h->version,
			   h->kind, COLLAGE_VERSION, (unsigned)k);
		return -1;
	}
	if (h->side != COLLAGE_SIDE || h->record_bytes != (k == COLLAGE_LSH ? 0u : MOSAIC_PAGE)) {
		mosaic_err("%s: images of side %u in %u-byte records; this program needs %ux%u in %u-byte records",
			   path, h->side, h->record_bytes, COLLAGE_SIDE, COLLAGE_SIDE, MOSAIC_PAGE);
		return -1;
	}
	if (h->images == 0 || h->images > (1ull << 28)) {
		mosaic_err("%s: image count %llu out of range", path, (unsigned long long)h->images);
		return -1;
	}
	return 0;
}

static int check_lsh(const struct collage_lsh *l, const char *path)
{
	if (l->tables < 1 || l->tables > COLLAGE_MAX_TABLES || l->cell < 1 || l->cell > 256 ||
	    l->q != 255 / l->cell + 2 || l->buckets != l->q * l->q * l->q) {
		mosaic_err("%s: inconsistent LSH parameters (tables %u cell %u q %u buckets %u)", path,
			   l->tables, l->cell, l->q, l->buckets);
		return -1;
	}
	for (uint32_t t = 0; t < l->tables; t++)
		for (int c = 0; c < 3; c++)
			if (l->off[t][c] >= l->cell) {
				mosaic_err("%s: LSH offset %u of table %u is not below the cell size %u",
					   path, l->off[t][c], t, l->cell);
				return -1;
			}
	return 0;
}

/* Every bucket range ordered and inside the id array, every id an image. */
static int check_index(struct collage_db *db)
{
	const char *path = db->path[2];
	const struct collage_lsh *l = &db->lsh;
	size_t starts = (size_t)l->tables * (l->buckets + 1), nids = (size_t)l->tables * db->images;
	uint32_t *buf = malloc((starts + nids) * 4);
	if (buf == NULL) {
		mosaic_err("%s: out of memory checking the index", path);
		return -1;
	}
	int rc = mosaic_pread_all(db->fd[2], path, buf, (starts + nids) * 4, MOSAIC_PAGE);
	db->bytes_read += (starts + nids) * 4;
	for (uint32_t t = 0; rc == 0 && t < l->tables; t++) {
		const uint32_t *st = buf + (size_t)t * (l->buckets + 1);
		if (st[0] != 0 || st[l->buckets] != db->images)
			rc = -1;
		for (uint32_t b = 0; rc == 0 && b < l->buckets; b++)
			if (st[b] > st[b + 1])
				rc = -1;
	}
	for (size_t i = 0; rc == 0 && i < nids; i++)
		if (buf[starts + i] >= db->images)
			rc = -1;
	if (rc != 0)
		mosaic_err("%s: corrupt index (bucket ranges or ids out of bounds)", path);
	free(buf);
	return rc == 0 ? 0 : -1;
}

int collage_db_open(const char *prefix, struct collage_db *db)
{
	memset(db, 0, sizeof(*db));
	for (int i = 0; i < COLLAGE_NFILES; i++)
		db->fd[i] = -1;
	struct collage_header h[COLLAGE_NFILES];
	for (int i = 0; i < COLLAGE_NFILES; i++) {
		enum collage_file_kind k = (enum collage_file_kind)(i + 1);
		snprintf(db->path[i], sizeof(db->path[i]), "%s%s", prefix, file_suffix[i]);
		db->fd[i] = open(db->path[i], O_RDONLY | O_CLOEXEC);
		if (db->fd[i] < 0) {
			mosaic_err("%s: %s", db->path[i], strerror(errno));
			goto fail;
		}
		int64_t size = mosaic_file_size(db->fd[i], db->path[i]);
		if (size < 0)
			goto fail;
		db->file_bytes[i] = (uint64_t)size;
		if (size < (int64_t)sizeof(h[i])) {
			mosaic_err("%s: truncated: %lld bytes, shorter than its header", db->path[i],
				   (long long)size);
			goto fail;
		}
		if (mosaic_pread_all(db->fd[i], db->path[i], &h[i], sizeof(h[i]), 0) != 0)
			goto fail;
		db->bytes_read += sizeof(h[i]);
		if (check_header(&h[i], db->path[i], k) != 0)
			goto fail;
		if (h[i].images != h[0].images || h[i].seed != h[0].seed) {
			mosaic_err("%s: describes %llu images (seed %llu) but %s describes %llu (seed %llu)",
				   db->path[i], (unsigned long long)h[i].images,
				   (unsigned long long)h[i].seed, db->path[0],
				   (unsigned long long)h[0].images, (unsigned long long)h[0].seed);
			goto fail;
		}
	}
	db->images = h[0].images;
	db->seed = h[0].seed;
	db->lsh = h[2].lsh;
	if (check_lsh(&db->lsh, db->path[2]) != 0)
		goto fail;
	for (int i = 0; i < COLLAGE_NFILES; i++) {
		uint64_t want = collage_file_bytes((enum collage_file_kind)(i + 1), db->images, &db->lsh);
		if (db->file_bytes[i] != want) {
			mosaic_err("%s: %s: %llu bytes, expected %llu for %llu images", db->path[i],
				   db->file_bytes[i] < want ? "truncated" : "wrong size",
				   (unsigned long long)db->file_bytes[i], (unsigned long long)want,
				   (unsigned long long)db->images);
			goto fail;
		}
	}
	if (check_index(db) != 0)
		goto fail;
	return 0;
fail:
	collage_db_close(db);
	return -1;
}

void collage_db_close(struct collage_db *db)
{
	for (int i = 0; i < COLLAGE_NFILES; i++) {
		if (db->fd[i] >= 0)
			close(db->fd[i]);
		db->fd[i] = -1;
	}
}

/* ---- the generated input picture ---- */

static uint32_t mix(uint32_t a, uint32_t b, double t)
{
	uint32_t out = 0;
	for (uint32_t c = 0; c < 4; c++) {
		double v = collage_channel(a, c) * (1 - t) + collage_channel(b, c) * t;
		out |= clamp255((int)lround(v)) << (8 * c);
	}
	return out;
}

/* A landscape: sky, sun, two ranges of hills, a lake and a field.  Smooth
 * regions of few colours, as photographs mostly are, so a collage of it
 * reads only part of the database. */
int collage_input_generate(struct mosaic_image *img, uint32_t width, uint32_t height, uint64_t seed)
{
	if (width == 0 || height == 0 || width > 16384 || height > 16384) {
		mosaic_err("input size %ux%u out of range (1..16384 per side)", width, height);
		return -1;
	}
	img->width = width;
	img->height = height;
	img->rgba = malloc((size_t)width * height * 4);
	if (img->rgba == NULL) {
		mosaic_err("out of memory for a %ux%u image", width, height);
		return -1;
	}
	struct mosaic_rng r = { seed ^ 0x6c616e6473636170ull };
	double ph[4];
	for (int i = 0; i < 4; i++)
		ph[i] = (double)mosaic_rng_below(&r, 6283) / 1000.0;
	double sun_x = 0.2 + 0.6 * (double)mosaic_rng_below(&r, 1000) / 1000.0, sun_y = 0.18;
	const uint32_t sky_top = mosaic_rgba(20, 40, 120, 255), sky_low = mosaic_rgba(170, 200, 235, 255);
	const uint32_t sun = mosaic_rgba(255, 226, 120, 255);
	const uint32_t far = mosaic_rgba(110, 100, 140, 255), near = mosaic_rgba(40, 90, 50, 255);
	const uint32_t lake = mosaic_rgba(30, 80, 140, 255), field = mosaic_rgba(120, 160, 50, 255);
	const uint32_t field2 = mosaic_rgba(190, 170, 70, 255);
	for (uint32_t y = 0; y < height; y++) {
		double v = (double)y / height;
		for (uint32_t x = 0; x < width; x++) {
			double u = (double)x / width, aspect = (double)width / height;
			double far_h = 0.45 + 0.06 * sin(7 * u + ph[0]) + 0.03 * sin(19 * u + ph[1]);
			double near_h = 0.58 + 0.05 * sin(5 * u + ph[2]) + 0.02 * sin(23 * u + ph[3]);
			uint32_t p;
			if (v < far_h) {
				p = mix(sky_top, sky_low, v / far_h);
				double dx = (u - sun_x) * aspect, dy = v - sun_y, d = sqrt(dx * dx + dy * dy);
				if (d < 0.07)
					p = sun;
				else if (d < 0.16)
					p = mix(sun, p, (d - 0.07) / 0.09);
			} else if (v < near_h) {
				p = mix(far, near, (v - far_h) / (near_h - far_h) * 0.5);
			} else if (v < 0.75 && u > 0.15 && u < 0.55) {
				p = mix(lake, sky_low, 0.25 + 0.15 * sin(40 * v + 3 * u));
			} else if (v < 0.7) {
				p = near;
			} else {
				p = ((int)(u * 14 + v * 6) & 1) ? field : field2;
				p = mix(p, near, (1 - v) * 0.8);
			}
			img->rgba[(size_t)y * width + x] = p;
		}
	}
	return 0;
}
