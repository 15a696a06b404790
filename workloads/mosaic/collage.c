/*
 * collage — a photo collage from a database of tiny images (the GPUfs /
 * ActivePointers mosaic, research anchors §2b): each 32x32 tile of the
 * input picture is replaced by the database image whose colour histogram
 * is nearest among the candidates that LSH of its mean colour proposes.
 * The candidates' histogram records are read from the database on demand:
 * data-dependent, random 4 KiB reads that touch a fraction of it.
 *
 *   collage gendb PREFIX [--images N] [--seed S]
 *   collage genimage OUT.png [--width W] [--height H] [--seed S]
 *   collage run --db PREFIX --input IMAGE --mode MODE [--out OUT.png] [--verify]
 *
 * Modes of `run`, all ordinary CUDA:
 *   gaia     mmap the database files and hand the mapped pointers to the
 *            kernels (needs a system where the GPU can use file mappings)
 *   managed  read the database whole into managed memory first
 *   copy     read it whole and cudaMemcpy it into device memory
 *   cpu      no GPU: the reference, reading records with pread
 *
 * `run` prints one line of key=value results; --verify also computes the
 * CPU reference and exits 1 unless the output is identical to it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cuda_runtime_api.h>

#include "collage_db.h"
#include "collage_kernels.h"
#include "collage_ref.h"
#include "mosaic_image.h"
#include "mosaic_util.h"

enum collage_mode { MODE_GAIA, MODE_MANAGED, MODE_COPY, MODE_CPU };
static const char *const mode_name[] = { "gaia", "managed", "copy", "cpu" };

/* Host staging for copy mode: the file goes up in pieces of this size. */
#define COPY_CHUNK (16u << 20)

static void usage(FILE *f)
{
	fprintf(f,
		"usage: collage gendb PREFIX [--images N] [--seed S]\n"
		"       collage genimage OUT.png [--width W] [--height H] [--seed S]\n"
		"       collage run --db PREFIX --input IMAGE --mode gaia|managed|copy|cpu\n"
		"                   [--out OUT.png] [--verify]\n"
		"Images are PNG or binary PPM; their sides must be multiples of 32.\n");
}

static int parse_u64(const char *s, const char *what, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno != 0 || end == s || *end != '\0' || s[0] == '-') {
		mosaic_err("%s: '%s' is not a non-negative integer", what, s);
		return -1;
	}
	*out = v;
	return 0;
}

static int cmd_gendb(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "images", required_argument, NULL, 'n' },
		{ "seed", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t images = 32768, seed = 1;
	int c;
	while ((c = getopt_long(argc, argv, "n:s:h", opts, NULL)) != -1) {
		if (c == 'n' && parse_u64(optarg, "--images", &images) == 0)
			continue;
		if (c == 's' && parse_u64(optarg, "--seed", &seed) == 0)
			continue;
		usage(c == 'h' ? stdout : stderr);
		return c == 'h' ? 0 : 2;
	}
	if (optind + 1 != argc) {
		usage(stderr);
		return 2;
	}
	return collage_db_generate(argv[optind], images, seed) == 0 ? 0 : 1;
}

static int cmd_genimage(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "width", required_argument, NULL, 'W' },
		{ "height", required_argument, NULL, 'H' },
		{ "seed", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t w = 1024, h = 768, seed = 1;
	int c;
	while ((c = getopt_long(argc, argv, "W:H:s:h", opts, NULL)) != -1) {
		if (c == 'W' && parse_u64(optarg, "--width", &w) == 0)
			continue;
		if (c == 'H' && parse_u64(optarg, "--height", &h) == 0)
			continue;
		if (c == 's' && parse_u64(optarg, "--seed", &seed) == 0)
			continue;
		usage(c == 'h' ? stdout : stderr);
		return c == 'h' ? 0 : 2;
	}
	if (optind + 1 != argc || w > 16384 || h > 16384) {
		usage(stderr);
		return 2;
	}
	struct mosaic_image img;
	if (collage_input_generate(&img, (uint32_t)w, (uint32_t)h, seed) != 0)
		return 1;
	int rc = mosaic_image_save_png(argv[optind], &img);
	mosaic_image_free(&img);
	return rc == 0 ? 0 : 1;
}

/* What a run measured. */
struct run_result {
	double time_s;
	uint64_t file_read_bytes;       /* read by the program itself (pread) */
	uint64_t touched_bytes;         /* distinct database records the kernels read */
	uint64_t explicit_htod_bytes;   /* copies the program made that are not the database */
	struct mosaic_bus bus;
};

/* The database as the device sees it in one mode. */
struct db_view {
	enum collage_mode mode;
	void *file[COLLAGE_NFILES];
	uint64_t bytes[COLLAGE_NFILES];
};

static void db_view_release(struct db_view *v)
{
	for (int i = 0; i < COLLAGE_NFILES; i++) {
		if (v->file[i] == NULL)
			continue;
		if (v->mode == MODE_GAIA)
			munmap(v->file[i], v->bytes[i]);
		else
			cudaFree(v->file[i]);
		v->file[i] = NULL;
	}
}

static int db_view_make(struct db_view *v, const struct collage_db *db, struct run_result *r)
{
	unsigned char *stage = NULL;
	for (int i = 0; i < COLLAGE_NFILES; i++) {
		uint64_t n = db->file_bytes[i];
		v->bytes[i] = n;
		if (v->mode == MODE_GAIA) {
			void *p = mmap(NULL, n, PROT_READ, MAP_SHARED, db->fd[i], 0);
			if (p == MAP_FAILED) {
				mosaic_err("%s: mmap: %s", db->path[i], strerror(errno));
				return -1;
			}
			v->file[i] = p;
		} else if (v->mode == MODE_MANAGED) {
			if (MOSAIC_CUDA(cudaMallocManaged(&v->file[i], n, cudaMemAttachGlobal)) != 0)
				return -1;
			if (mosaic_pread_all(db->fd[i], db->path[i], v->file[i], n, 0) != 0)
				return -1;
			r->file_read_bytes += n;
		} else {
			if (MOSAIC_CUDA(cudaMalloc(&v->file[i], n)) != 0)
				return -1;
			if (stage == NULL && (stage = malloc(COPY_CHUNK)) == NULL) {
				mosaic_err("out of memory for a copy buffer");
				return -1;
			}
			for (uint64_t off = 0; off < n; off += COPY_CHUNK) {
				size_t len = n - off < COPY_CHUNK ? (size_t)(n - off) : COPY_CHUNK;
				if (mosaic_pread_all(db->fd[i], db->path[i], stage, len, off) != 0 ||
				    MOSAIC_CUDA(cudaMemcpy((unsigned char *)v->file[i] + off, stage, len,
							   cudaMemcpyHostToDevice)) != 0) {
					free(stage);
					return -1;
				}
			}
			r->file_read_bytes += n;
		}
	}
	free(stage);
	return 0;
}

static uint64_t popcount_words(const uint32_t *w, size_t n)
{
	uint64_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += (uint64_t)__builtin_popcount(w[i]);
	return k;
}

/* Device buffers of one run. */
struct dev_bufs {
	void *p[9];
};

static int gpu_collage(const struct collage_db *db, const struct mosaic_image *in, enum collage_mode mode,
		       struct mosaic_image *out, unsigned long long *best, struct run_result *r)
{
	uint32_t tiles_x = in->width / COLLAGE_SIDE, tiles_y = in->height / COLLAGE_SIDE;
	uint32_t tiles = tiles_x * tiles_y;
	size_t pixels_bytes = (size_t)in->width * in->height * 4;
	size_t bitmap_words = (size_t)(db->images + 31) / 32;
	struct db_view view = { .mode = mode };
	struct dev_bufs d;
	uint32_t *bitmaps = NULL;
	int rc = -1;
	memset(&d, 0, sizeof(d));
	memset(out, 0, sizeof(*out));

	if (MOSAIC_CUDA(cudaFree(NULL)) != 0)     /* start the device outside the timing */
		return -1;
	struct mosaic_bus before, after;
	mosaic_bus_read(&before);
	double t0 = mosaic_now_s();
	if (db_view_make(&view, db, r) != 0)
		goto out;
	size_t sizes[9] = {
		pixels_bytes,                                   /* input */
		(size_t)tiles * COLLAGE_HIST_WORDS * 4,         /* hist */
		(size_t)tiles * COLLAGE_HIST_WORDS * 4,         /* cdf */
		(size_t)tiles * 3 * 4,                          /* mean */
		(size_t)tiles * COLLAGE_MAX_TABLES * 4,         /* keys */
		(size_t)tiles * 8,                              /* best */
		pixels_bytes,                                   /* output */
		bitmap_words * 4, bitmap_words * 4,             /* touched */
	};
	for (int i = 0; i < 9; i++)
		if (MOSAIC_CUDA(cudaMalloc(&d.p[i], sizes[i])) != 0)
			goto out;
	if (MOSAIC_CUDA(cudaMemcpy(d.p[0], in->rgba, pixels_bytes, cudaMemcpyHostToDevice)) != 0)
		goto out;
	r->explicit_htod_bytes += pixels_bytes;
	struct collage_files files = { view.file[0], view.file[1], view.file[2] };
	struct collage_args a = {
		.images = (uint32_t)db->images, .lsh = db->lsh,
		.input = d.p[0], .width = in->width, .height = in->height,
		.tiles_x = tiles_x, .tiles_y = tiles_y,
		.hist = d.p[1], .cdf = d.p[2], .mean = d.p[3], .keys = d.p[4], .best = d.p[5],
		.output = d.p[6], .touched_hist = d.p[7], .touched_tiles = d.p[8],
	};
	if (MOSAIC_CUDA(collage_gpu_launch(&a, &files, 0)) != 0 || MOSAIC_CUDA(cudaDeviceSynchronize()) != 0)
		goto out;
	out->width = in->width;
	out->height = in->height;
	out->rgba = malloc(pixels_bytes);
	bitmaps = malloc(bitmap_words * 4 * 2);
	if (out->rgba == NULL || bitmaps == NULL) {
		mosaic_err("out of memory for the output");
		goto out;
	}
	if (MOSAIC_CUDA(cudaMemcpy(out->rgba, d.p[6], pixels_bytes, cudaMemcpyDeviceToHost)) != 0 ||
	    MOSAIC_CUDA(cudaMemcpy(best, d.p[5], (size_t)tiles * 8, cudaMemcpyDeviceToHost)) != 0 ||
	    MOSAIC_CUDA(cudaMemcpy(bitmaps, d.p[7], bitmap_words * 4, cudaMemcpyDeviceToHost)) != 0 ||
	    MOSAIC_CUDA(cudaMemcpy(bitmaps + bitmap_words, d.p[8], bitmap_words * 4,
				   cudaMemcpyDeviceToHost)) != 0)
		goto out;
	r->time_s = mosaic_now_s() - t0;
	mosaic_bus_read(&after);
	r->bus = mosaic_bus_delta(&before, &after);
	r->touched_bytes = popcount_words(bitmaps, bitmap_words * 2) * MOSAIC_PAGE;
	rc = 0;
out:
	free(bitmaps);
	for (int i = 0; i < 9; i++)
		if (d.p[i] != NULL)
			cudaFree(d.p[i]);
	db_view_release(&view);
	if (rc != 0)
		mosaic_image_free(out);
	return rc;
}

static int parse_mode(const char *s, enum collage_mode *m)
{
	for (int i = 0; i <= MODE_CPU; i++)
		if (strcmp(s, mode_name[i]) == 0) {
			*m = (enum collage_mode)i;
			return 0;
		}
	mosaic_err("--mode: '%s' is not one of gaia, managed, copy, cpu", s);
	return -1;
}

static int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "db", required_argument, NULL, 'd' },
		{ "input", required_argument, NULL, 'i' },
		{ "mode", required_argument, NULL, 'm' },
		{ "out", required_argument, NULL, 'o' },
		{ "verify", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *prefix = NULL, *input = NULL, *outpath = NULL;
	enum collage_mode mode = MODE_CPU;
	int have_mode = 0, verify = 0, c;
	while ((c = getopt_long(argc, argv, "d:i:m:o:vh", opts, NULL)) != -1) {
		switch (c) {
		case 'd': prefix = optarg; break;
		case 'i': input = optarg; break;
		case 'o': outpath = optarg; break;
		case 'v': verify = 1; break;
		case 'm':
			if (parse_mode(optarg, &mode) != 0)
				return 2;
			have_mode = 1;
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (prefix == NULL || input == NULL || !have_mode || optind != argc) {
		usage(stderr);
		return 2;
	}
	struct collage_db db;
	if (collage_db_open(prefix, &db) != 0)
		return 1;
	struct mosaic_image in, out = { 0 }, ref = { 0 };
	unsigned long long *best = NULL, *ref_best = NULL;
	int rc = 1, identical = -1;
	if (mosaic_image_load(input, &in) != 0) {
		collage_db_close(&db);
		return 1;
	}
	if (in.width % COLLAGE_SIDE != 0 || in.height % COLLAGE_SIDE != 0) {
		mosaic_err("%s: wrong image size %ux%u: both sides must be multiples of the %u-pixel tile",
			   input, in.width, in.height, COLLAGE_SIDE);
		goto out;
	}
	uint32_t tiles = (in.width / COLLAGE_SIDE) * (in.height / COLLAGE_SIDE);
	best = malloc((size_t)tiles * 8);
	ref_best = malloc((size_t)tiles * 8);
	if (best == NULL || ref_best == NULL) {
		mosaic_err("out of memory");
		goto out;
	}
	struct run_result r;
	memset(&r, 0, sizeof(r));
	r.file_read_bytes = db.bytes_read;
	if (mode == MODE_CPU) {
		double t0 = mosaic_now_s();
		uint64_t bytes = 0;
		if (collage_reference(&db, &in, &out, best, &bytes) != 0)
			goto out;
		r.time_s = mosaic_now_s() - t0;
		r.file_read_bytes += bytes;
	} else if (gpu_collage(&db, &in, mode, &out, best, &r) != 0) {
		printf("collage: mode=%s status=failed\n", mode_name[mode]);
		goto out;
	}
	if (verify) {
		uint64_t bytes;
		if (collage_reference(&db, &in, &ref, ref_best, &bytes) != 0)
			goto out;
		identical = memcmp(ref.rgba, out.rgba, (size_t)in.width * in.height * 4) == 0 &&
			    memcmp(ref_best, best, (size_t)tiles * 8) == 0;
		if (!identical) {
			uint32_t bad = 0;
			for (uint32_t t = 0; t < tiles; t++)
				bad += ref_best[t] != best[t];
			mosaic_err("mode %s differs from the CPU reference (%u of %u tiles chose another image)",
				   mode_name[mode], bad, tiles);
		}
	}
	if (outpath != NULL && mosaic_image_save_png(outpath, &out) != 0)
		goto out;
	uint64_t db_bytes = db.file_bytes[0] + db.file_bytes[1] + db.file_bytes[2];
	uint64_t to_gpu = 0;
	if (r.bus.valid)
		to_gpu = r.bus.htod_bytes - r.explicit_htod_bytes + r.bus.uvm_migrated_bytes + r.bus.host_read_bytes;
	char b1[24], b2[24], b3[24], b4[24], b5[24], b6[24];
	printf("collage: mode=%s status=ok images=%llu tiles=%u db_bytes=%llu time_s=%.4f file_read_bytes=%llu "
	       "touched_bytes=%llu db_to_gpu_bytes=%s h2d_bytes=%s d2h_bytes=%s uvm_faults=%s "
	       "uvm_migrated_bytes=%s host_read_bytes=%s identical=%d\n",
	       mode_name[mode], (unsigned long long)db.images, tiles, (unsigned long long)db_bytes, r.time_s,
	       (unsigned long long)r.file_read_bytes,
	       (unsigned long long)(mode == MODE_CPU ? 0 : r.touched_bytes),
	       mosaic_fmt_u64(b1, r.bus.valid, to_gpu), mosaic_fmt_u64(b2, r.bus.valid, r.bus.htod_bytes),
	       mosaic_fmt_u64(b3, r.bus.valid, r.bus.dtoh_bytes), mosaic_fmt_u64(b4, r.bus.valid, r.bus.uvm_faults),
	       mosaic_fmt_u64(b5, r.bus.valid, r.bus.uvm_migrated_bytes),
	       mosaic_fmt_u64(b6, r.bus.valid, r.bus.host_read_bytes), identical);
	rc = identical == 0 ? 1 : 0;
out:
	free(best);
	free(ref_best);
	mosaic_image_free(&in);
	mosaic_image_free(&out);
	mosaic_image_free(&ref);
	collage_db_close(&db);
	return rc;
}

int main(int argc, char **argv)
{
	mosaic_set_prog("collage");
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0) {
		usage(stdout);
		return 0;
	}
	argc--;
	argv++;
	if (strcmp(cmd, "gendb") == 0)
		return cmd_gendb(argc, argv);
	if (strcmp(cmd, "genimage") == 0)
		return cmd_genimage(argc, argv);
	if (strcmp(cmd, "run") == 0)
		return cmd_run(argc, argv);
	mosaic_err("unknown command '%s'", cmd);
	usage(stderr);
	return 2;
}
