/*
 * test_mosaic_files.c — the mosaic workloads' files and CPU-side pieces:
 * database and image round trips, refusal of bad files, the stitch
 * geometry.  Needs no GPU.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "collage_db.h"
#include "mosaic_image.h"
#include "mosaic_util.h"
#include "stitch_grid.h"

static char dir[] = "/tmp/mosaic-unit.XXXXXX";

static void path_in(char *buf, size_t n, const char *name)
{
	snprintf(buf, n, "%s/%s", dir, name);
}

static unsigned char *slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	unsigned char *buf = malloc((size_t)st.st_size + 1);
	assert_non_null(buf);
	assert_int_equal(mosaic_pread_all(fd, path, buf, (size_t)st.st_size, 0), 0);
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

static int files_equal(const char *a, const char *b)
{
	size_t la, lb;
	unsigned char *x = slurp(a, &la), *y = slurp(b, &lb);
	int eq = la == lb && memcmp(x, y, la) == 0;
	free(x);
	free(y);
	return eq;
}

static void copy_file(const char *from, const char *to, long delta)
{
	size_t n;
	unsigned char *buf = slurp(from, &n);
	int fd = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(mosaic_pwrite_all(fd, to, buf, (size_t)((long)n + delta), 0), 0);
	close(fd);
	free(buf);
}

static void make_db(const char *name, uint64_t images, uint64_t seed, char *prefix, size_t n)
{
	path_in(prefix, n, name);
	assert_int_equal(collage_db_generate(prefix, images, seed), 0);
}

static void test_db_generation_is_deterministic(void **state)
{
	char a[512], b[512], c[512], pa[600], pb[600];
	make_db("det_a", 4100, 11, a, sizeof(a));   /* more than one generation batch */
	make_db("det_b", 4100, 11, b, sizeof(b));
	make_db("det_c", 4100, 12, c, sizeof(c));
	static const char *const sfx[] = { ".tiles", ".hist", ".lsh" };
	for (int i = 0; i < 3; i++) {
		snprintf(pa, sizeof(pa), "%s%s", a, sfx[i]);
		snprintf(pb, sizeof(pb), "%s%s", b, sfx[i]);
		assert_true(files_equal(pa, pb));
		snprintf(pb, sizeof(pb), "%s%s", c, sfx[i]);
		assert_false(files_equal(pa, pb));
	}
}

static void test_db_round_trip(void **state)
{
	char prefix[512];
	const uint64_t images = 1500, seed = 5;
	make_db("rt", images, seed, prefix, sizeof(prefix));
	struct collage_db db;
	assert_int_equal(collage_db_open(prefix, &db), 0);
	assert_int_equal(db.images, images);
	assert_int_equal(db.seed, seed);
	struct collage_lsh want;
	collage_lsh_params(seed, &want);
	assert_memory_equal(&db.lsh, &want, sizeof(want));

	uint32_t px[COLLAGE_PIXELS], rec[COLLAGE_RECORD_WORDS], cdf[COLLAGE_HIST_WORDS], mean[3];
	uint32_t keys[COLLAGE_MAX_TABLES];
	const uint64_t ids[] = { 0, 1, 777, images - 1 };
	for (size_t k = 0; k < sizeof(ids) / sizeof(ids[0]); k++) {
		uint64_t id = ids[k];
		collage_tiny_image(seed, id, px);
		assert_int_equal(mosaic_pread_all(db.fd[0], db.path[0], rec, MOSAIC_PAGE, MOSAIC_PAGE * (1 + id)), 0);
		assert_memory_equal(rec, px, sizeof(px));
		/* the histogram record is the image's cumulative histogram */
		uint32_t hist[COLLAGE_HIST_WORDS] = { 0 };
		for (uint32_t i = 0; i < COLLAGE_PIXELS; i++)
			for (uint32_t c = 0; c < 3; c++)
				hist[c * 256 + collage_channel(px[i], c)]++;
		collage_features(hist, cdf, mean);
		assert_int_equal(mosaic_pread_all(db.fd[1], db.path[1], rec, MOSAIC_PAGE, MOSAIC_PAGE * (1 + id)), 0);
		assert_memory_equal(rec, cdf, sizeof(cdf));
		for (uint32_t i = COLLAGE_HIST_WORDS; i < COLLAGE_RECORD_WORDS; i++)
			assert_int_equal(rec[i], 0);
		assert_int_equal(cdf[255], COLLAGE_PIXELS);
		for (uint32_t t = 0; t < db.lsh.tables; t++)
			keys[t] = collage_key(&db.lsh, t, mean);
		/* and it sits in the bucket of its key in every table, once */
		size_t nstart = (size_t)db.lsh.tables * (db.lsh.buckets + 1);
		uint32_t *index = malloc((nstart + db.lsh.tables * images) * 4);
		assert_non_null(index);
		assert_int_equal(mosaic_pread_all(db.fd[2], db.path[2], index,
						  (nstart + db.lsh.tables * images) * 4, MOSAIC_PAGE), 0);
		for (uint32_t t = 0; t < db.lsh.tables; t++) {
			const uint32_t *st = index + (size_t)t * (db.lsh.buckets + 1);
			const uint32_t *in = index + nstart + (size_t)t * images;
			int seen = 0;
			for (uint64_t j = 0; j < images; j++)
				if (in[j] == id) {
					seen++;
					assert_true(j >= st[keys[t]] && j < st[keys[t] + 1]);
				}
			assert_int_equal(seen, 1);
		}
		free(index);
	}
	collage_db_close(&db);
}

static void test_db_refuses_truncated_and_mismatched_files(void **state)
{
	char prefix[512], other[512], from[600], to[600], bad[512];
	make_db("good", 700, 3, prefix, sizeof(prefix));
	make_db("other", 600, 3, other, sizeof(other));
	path_in(bad, sizeof(bad), "bad");
	static const char *const sfx[] = { ".tiles", ".hist", ".lsh" };
	struct collage_db db;
	for (int victim = 0; victim < 3; victim++) {
		for (int i = 0; i < 3; i++) {
			snprintf(from, sizeof(from), "%s%s", prefix, sfx[i]);
			snprintf(to, sizeof(to), "%s%s", bad, sfx[i]);
			copy_file(from, to, i == victim ? -1 : 0);
		}
		assert_int_equal(collage_db_open(bad, &db), -1);
		/* a file of another database */
		snprintf(from, sizeof(from), "%s%s", other, sfx[victim]);
		snprintf(to, sizeof(to), "%s%s", bad, sfx[victim]);
		copy_file(from, to, 0);
		assert_int_equal(collage_db_open(bad, &db), -1);
	}
	/* whole again: opens */
	for (int i = 0; i < 3; i++) {
		snprintf(from, sizeof(from), "%s%s", prefix, sfx[i]);
		snprintf(to, sizeof(to), "%s%s", bad, sfx[i]);
		copy_file(from, to, 0);
	}
	assert_int_equal(collage_db_open(bad, &db), 0);
	collage_db_close(&db);
	/* an id out of range in the index */
	snprintf(to, sizeof(to), "%s.lsh", bad);
	int fd = open(to, O_WRONLY);
	uint32_t huge = 0xffffff;
	struct collage_lsh l;
	collage_lsh_params(3, &l);
	uint64_t sixth_id = MOSAIC_PAGE + 4ull * l.tables * (l.buckets + 1) + 4 * 5;
	assert_int_equal(mosaic_pwrite_all(fd, to, &huge, 4, sixth_id), 0);
	close(fd);
	assert_int_equal(collage_db_open(bad, &db), -1);
}

static void test_png_round_trip(void **state)
{
	struct mosaic_image img = { 37, 21, malloc(37 * 21 * 4) }, back;
	struct mosaic_rng r = { 99 };
	for (size_t i = 0; i < 37 * 21; i++)
		img.rgba[i] = (uint32_t)mosaic_rng_next(&r);
	char path[512];
	path_in(path, sizeof(path), "rt.png");
	assert_int_equal(mosaic_image_save_png(path, &img), 0);
	assert_int_equal(mosaic_image_load(path, &back), 0);
	assert_int_equal(back.width, 37);
	assert_int_equal(back.height, 21);
	assert_memory_equal(back.rgba, img.rgba, 37 * 21 * 4);
	mosaic_image_free(&back);
	mosaic_image_free(&img);
}

static void write_bytes(const char *path, const void *buf, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(mosaic_pwrite_all(fd, path, buf, n, 0), 0);
	close(fd);
}

static void test_ppm_is_read_and_bad_images_are_refused(void **state)
{
	char path[512];
	unsigned char ppm[64];
	int n = snprintf((char *)ppm, sizeof(ppm), "P6\n# two by one\n2 1\n255\n");
	memcpy(ppm + n, "\x01\x02\x03\xfa\xfb\xfc", 6);
	path_in(path, sizeof(path), "a.ppm");
	write_bytes(path, ppm, (size_t)n + 6);
	struct mosaic_image img;
	assert_int_equal(mosaic_image_load(path, &img), 0);
	assert_int_equal(img.width, 2);
	assert_int_equal(img.height, 1);
	assert_int_equal(img.rgba[0], mosaic_rgba(1, 2, 3, 255));
	assert_int_equal(img.rgba[1], mosaic_rgba(0xfa, 0xfb, 0xfc, 255));
	mosaic_image_free(&img);
	write_bytes(path, ppm, (size_t)n + 5);                  /* pixels cut short */
	assert_int_equal(mosaic_image_load(path, &img), -1);
	write_bytes(path, "P6\n2 1\n65535\n", 13);              /* 16-bit PPM */
	assert_int_equal(mosaic_image_load(path, &img), -1);
	write_bytes(path, "GIF89a....", 10);
	assert_int_equal(mosaic_image_load(path, &img), -1);
	path_in(path, sizeof(path), "missing.png");
	assert_int_equal(mosaic_image_load(path, &img), -1);
}

static void test_stitch_tiles_round_trip_and_truncation(void **state)
{
	char path[512], cut[512];
	path_in(path, sizeof(path), "tiles");
	path_in(cut, sizeof(cut), "tiles_cut");
	assert_int_equal(stitch_tiles_generate(path, 2, 3, 40, 30, 6, 9), 0);
	struct stitch_header h;
	int fd;
	uint64_t bytes;
	assert_int_equal(stitch_tiles_open(path, &h, &fd, &bytes), 0);
	close(fd);
	assert_int_equal(h.rows, 2);
	assert_int_equal(h.cols, 3);
	assert_int_equal(h.tile_w, 40);
	assert_int_equal(h.tile_h, 30);
	assert_int_equal(h.overlap, 6);
	assert_int_equal(bytes, STITCH_HEADER_BYTES + 6 * 40 * 30);
	assert_int_equal(stitch_tiles_generate(cut, 2, 3, 40, 30, 6, 9), 0);
	assert_true(files_equal(path, cut));
	copy_file(path, cut, -1);
	assert_int_equal(stitch_tiles_open(cut, &h, &fd, &bytes), -1);
	assert_int_equal(stitch_tiles_generate(cut, 2, 3, 40, 30, 20, 9), -1);   /* overlap too big */
}

/* Every canvas pixel belongs to one tile that covers it, and composing the
 * two sides apart gives the whole canvas. */
static void test_stitch_owners_cover_the_canvas(void **state)
{
	struct stitch_geom g;
	assert_int_equal(stitch_geom_make(&g, 3, 5, 50, 40, 9, 2, 2), 0);
	assert_int_equal(g.canvas_w, 4 * 41 + 50);
	assert_int_equal(g.canvas_h, 2 * 31 + 40);
	for (uint32_t x = 0; x < g.canvas_w; x++) {
		uint32_t c = stitch_owner(x, g.step_x, g.overlap, g.cols);
		assert_true(x >= c * g.step_x && x - c * g.step_x < g.tile_w);
		assert_true(x >= stitch_bound(c, g.step_x, g.overlap));
		assert_true(c + 1 == g.cols || x < stitch_bound(c + 1, g.step_x, g.overlap));
	}
	assert_int_equal(g.split_x, stitch_bound(3, g.step_x, g.overlap));
	size_t tiles_bytes = (size_t)15 * 50 * 40;
	uint8_t *tiles = malloc(tiles_bytes), *whole = malloc((size_t)g.canvas_w * g.canvas_h),
		*parts = malloc((size_t)g.canvas_w * g.canvas_h);
	struct mosaic_rng r = { 4 };
	for (size_t i = 0; i < tiles_bytes; i++)
		tiles[i] = (uint8_t)mosaic_rng_next(&r);
	stitch_compose_cpu(&g, tiles, whole, 0, g.canvas_w, 0, g.canvas_h);
	memset(parts, 0, (size_t)g.canvas_w * g.canvas_h);
	assert_int_equal(stitch_compose_threads(&g, tiles, parts, g.split_x, g.canvas_w, 3), 0);
	assert_int_equal(stitch_compose_threads(&g, tiles, parts, 0, g.split_x, 2), 0);
	assert_memory_equal(whole, parts, (size_t)g.canvas_w * g.canvas_h);
	/* a pixel well inside tile (1, 1) away from any overlap: sharpened from its own tile */
	assert_int_equal(whole[(size_t)55 * g.canvas_w + 65], stitch_pixel(&g, tiles, 65, 55));
	free(tiles);
	free(whole);
	free(parts);
}

static void test_canvas_header_is_one_page_of_pgm(void **state)
{
	struct stitch_geom g;
	assert_int_equal(stitch_geom_make(&g, 4, 8, 1592, 512, 64, 3, 4), 0);
	assert_int_equal(g.canvas_w, 12288);
	unsigned char page[STITCH_HEADER_BYTES];
	stitch_canvas_header(&g, page);
	uint32_t w, h;
	assert_int_equal(stitch_canvas_parse(page, &w, &h), 0);
	assert_int_equal(w, g.canvas_w);
	assert_int_equal(h, g.canvas_h);
	assert_int_equal(page[STITCH_HEADER_BYTES - 1], '\n');
	/* rows of three pages, the GPU's half starting mid-page: one shared page a row */
	assert_int_equal(stitch_shared_pages(&g), g.canvas_h);
	page[1] = '6';
	assert_int_equal(stitch_canvas_parse(page, &w, &h), -1);
	assert_int_equal(stitch_geom_make(&g, 4, 8, 1592, 512, 64, 3, 0), 0);
	assert_int_equal(stitch_shared_pages(&g), 0);
}

static int setup(void **state)
{
	return mkdtemp(dir) == NULL ? -1 : 0;
}

static int teardown(void **state)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_db_generation_is_deterministic),
		cmocka_unit_test(test_db_round_trip),
		cmocka_unit_test(test_db_refuses_truncated_and_mismatched_files),
		cmocka_unit_test(test_png_round_trip),
		cmocka_unit_test(test_ppm_is_read_and_bad_images_are_refused),
		cmocka_unit_test(test_stitch_tiles_round_trip_and_truncation),
		cmocka_unit_test(test_stitch_owners_cover_the_canvas),
		cmocka_unit_test(test_canvas_header_is_one_page_of_pgm),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
