/*
 * stitch — tiles of a microscope scan composed into one row-major canvas
 * file by the CPU and the GPU at once (NIST MIST's write pattern, research
 * anchors §2c): the CPU composes the left tile columns with host threads
 * while a kernel composes the right ones, so the canvas pages along the
 * seam are written by both sides between the same two syncs.
 *
 *   stitch gen TILES [--rows R] [--cols C] [--tile-w W] [--tile-h H]
 *                    [--overlap O] [--seed S]
 *   stitch run --tiles TILES --out CANVAS.pgm --mode gaia|managed|cpu
 *              [--radius R] [--gpu-cols N] [--threads T] [--verify] [--png P.png]
 *
 * Modes of `run`, all ordinary CUDA:
 *   gaia     mmap the tiles and the canvas file; both sides write the
 *            mapped canvas, then the program syncs (needs a system where
 *            the GPU can use file mappings and merges what both wrote)
 *   managed  tiles and canvas in managed memory, shared by both sides; the
 *            canvas is written to the file at the end
 *   cpu      everything on the CPU (the reference)
 *
 * `run` prints one line of key=value results; --verify also composes the
 * canvas on the CPU alone and exits 1 unless the file is identical to it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "mosaic_image.h"
#include "mosaic_util.h"
#include "stitch_grid.h"
#include "stitch_kernels.h"

enum stitch_mode { MODE_GAIA, MODE_MANAGED, MODE_CPU };
static const char *const mode_name[] = { "gaia", "managed", "cpu" };

static void usage(FILE *f)
{
	fprintf(f,
		"usage: stitch gen TILES [--rows R] [--cols C] [--tile-w W] [--tile-h H] [--overlap O] [--seed S]\n"
		"       stitch run --tiles TILES --out CANVAS.pgm --mode gaia|managed|cpu\n"
		"                  [--radius R] [--gpu-cols N] [--threads T] [--verify] [--png PREVIEW.png]\n");
}

static int parse_u32(const char *s, const char *what, uint32_t *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 0);
	if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v > UINT32_MAX) {
		mosaic_err("%s: '%s' is not a 32-bit non-negative integer", what, s);
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

static int cmd_gen(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "rows", required_argument, NULL, 'r' },
		{ "cols", required_argument, NULL, 'c' },
		{ "tile-w", required_argument, NULL, 'W' },
		{ "tile-h", required_argument, NULL, 'H' },
		{ "overlap", required_argument, NULL, 'o' },
		{ "seed", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	/* 4x8 tiles of 1592x512 with 64 pixels of overlap: a canvas of 12288 x
	 * 1856, rows of exactly three pages, so the GPU's half starts mid-page
	 * and each row has one page written by both sides */
	uint32_t rows = 4, cols = 8, tw = 1592, th = 512, overlap = 64, seed = 1;
	int c;
	while ((c = getopt_long(argc, argv, "r:c:W:H:o:s:h", opts, NULL)) != -1) {
		uint32_t *dst = c == 'r' ? &rows : c == 'c' ? &cols : c == 'W' ? &tw : c == 'H' ? &th :
				c == 'o' ? &overlap : c == 's' ? &seed : NULL;
		const char *what = c == 'r' ? "--rows" : c == 'c' ? "--cols" : c == 'W' ? "--tile-w" :
				   c == 'H' ? "--tile-h" : c == 'o' ? "--overlap" : "--seed";
		if (dst != NULL && parse_u32(optarg, what, dst) == 0)
			continue;
		usage(c == 'h' ? stdout : stderr);
		return c == 'h' ? 0 : 2;
	}
	if (optind + 1 != argc) {
		usage(stderr);
		return 2;
	}
	return stitch_tiles_generate(argv[optind], rows, cols, tw, th, overlap, seed) == 0 ? 0 : 1;
}

struct run_opts {
	const char *tiles, *out, *png;
	enum stitch_mode mode;
	uint32_t radius, gpu_cols, threads;
	int have_gpu_cols, verify;
};

struct run_result {
	double time_s;
	struct mosaic_bus bus;
};

static int open_canvas(const char *path, const struct stitch_geom *g)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		mosaic_err("%s: %s", path, strerror(errno));
		return -1;
	}
	if (ftruncate(fd, (off_t)stitch_canvas_file_bytes(g)) != 0) {
		mosaic_err("%s: ftruncate: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* Both sides write the mapped canvas file; the sync ends the GPU's part. */
static int run_gaia(const struct run_opts *o, const struct stitch_geom *g, int tiles_fd, uint64_t tiles_bytes)
{
	uint64_t canvas_bytes = stitch_canvas_file_bytes(g);
	unsigned char header[STITCH_HEADER_BYTES];
	int rc = -1;
	void *tiles = MAP_FAILED, *canvas = MAP_FAILED;
	int fd = open_canvas(o->out, g);
	if (fd < 0)
		return -1;
	stitch_canvas_header(g, header);
	if (mosaic_pwrite_all(fd, o->out, header, sizeof(header), 0) != 0)
		goto out;
	tiles = mmap(NULL, tiles_bytes, PROT_READ, MAP_SHARED, tiles_fd, 0);
	canvas = mmap(NULL, canvas_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (tiles == MAP_FAILED || canvas == MAP_FAILED) {
		mosaic_err("mmap of %s or %s: %s", o->tiles, o->out, strerror(errno));
		goto out;
	}
	if (MOSAIC_CUDA(stitch_gpu_launch(g, tiles, canvas, 0)) != 0)
		goto out;
	int cpu_rc = stitch_compose_threads(g, (const uint8_t *)tiles + STITCH_HEADER_BYTES,
					    (uint8_t *)canvas + STITCH_HEADER_BYTES, 0, g->split_x, o->threads);
	if (MOSAIC_CUDA(cudaDeviceSynchronize()) != 0 || cpu_rc != 0)
		goto out;
	rc = 0;
out:
	if (canvas != MAP_FAILED)
		munmap(canvas, canvas_bytes);
	if (tiles != MAP_FAILED)
		munmap(tiles, tiles_bytes);
	if (close(fd) != 0 && rc == 0) {
		mosaic_err("%s: close: %s", o->out, strerror(errno));
		rc = -1;
	}
	return rc;
}

/* Both sides write one managed canvas; the file is written at the end. */
static int run_managed(const struct run_opts *o, const struct stitch_geom *g, int tiles_fd, uint64_t tiles_bytes)
{
	uint64_t canvas_bytes = stitch_canvas_file_bytes(g);
	void *tiles = NULL, *canvas = NULL;
	int rc = -1;
	int fd = open_canvas(o->out, g);
	if (fd < 0)
		return -1;
	if (MOSAIC_CUDA(cudaMallocManaged(&tiles, tiles_bytes, cudaMemAttachGlobal)) != 0 ||
	    MOSAIC_CUDA(cudaMallocManaged(&canvas, canvas_bytes, cudaMemAttachGlobal)) != 0)
		goto out;
	if (mosaic_pread_all(tiles_fd, o->tiles, tiles, tiles_bytes, 0) != 0)
		goto out;
	/* both sides read the tiles: let each keep a copy */
	struct cudaMemLocation dev0 = { .type = cudaMemLocationTypeDevice, .id = 0 };
	if (MOSAIC_CUDA(cudaMemAdvise(tiles, tiles_bytes, cudaMemAdviseSetReadMostly, dev0)) != 0)
		goto out;
	stitch_canvas_header(g, canvas);
	if (MOSAIC_CUDA(stitch_gpu_launch(g, tiles, canvas, 0)) != 0)
		goto out;
	int cpu_rc = stitch_compose_threads(g, (const uint8_t *)tiles + STITCH_HEADER_BYTES,
					    (uint8_t *)canvas + STITCH_HEADER_BYTES, 0, g->split_x, o->threads);
	if (MOSAIC_CUDA(cudaDeviceSynchronize()) != 0 || cpu_rc != 0)
		goto out;
	/* bring the canvas home before the kernel (write) reads it */
	struct cudaMemLocation host = { .type = cudaMemLocationTypeHost, .id = 0 };
	if (MOSAIC_CUDA(cudaMemPrefetchAsync(canvas, canvas_bytes, host, 0, 0)) != 0 ||
	    MOSAIC_CUDA(cudaDeviceSynchronize()) != 0)
		goto out;
	if (mosaic_pwrite_all(fd, o->out, canvas, canvas_bytes, 0) != 0)
		goto out;
	rc = 0;
out:
	if (canvas != NULL)
		cudaFree(canvas);
	if (tiles != NULL)
		cudaFree(tiles);
	if (close(fd) != 0 && rc == 0) {
		mosaic_err("%s: close: %s", o->out, strerror(errno));
		rc = -1;
	}
	return rc;
}

/* The whole canvas on the CPU, in memory: header page and pixels. */
static unsigned char *compose_reference(const struct run_opts *o, const struct stitch_geom *g, int tiles_fd,
					uint64_t tiles_bytes)
{
	unsigned char *tiles = malloc(tiles_bytes);
	unsigned char *canvas = malloc(stitch_canvas_file_bytes(g));
	if (tiles == NULL || canvas == NULL) {
		mosaic_err("out of memory for the reference canvas");
		goto fail;
	}
	if (mosaic_pread_all(tiles_fd, o->tiles, tiles, tiles_bytes, 0) != 0)
		goto fail;
	stitch_canvas_header(g, canvas);
	if (stitch_compose_threads(g, tiles + STITCH_HEADER_BYTES, canvas + STITCH_HEADER_BYTES, 0, g->canvas_w,
				   o->threads) != 0)
		goto fail;
	free(tiles);
	return canvas;
fail:
	free(tiles);
	free(canvas);
	return NULL;
}

static int run_cpu(const struct run_opts *o, const struct stitch_geom *g, int tiles_fd, uint64_t tiles_bytes)
{
	unsigned char *canvas = compose_reference(o, g, tiles_fd, tiles_bytes);
	if (canvas == NULL)
		return -1;
	int fd = open_canvas(o->out, g);
	int rc = fd < 0 ? -1 : mosaic_pwrite_all(fd, o->out, canvas, stitch_canvas_file_bytes(g), 0);
	if (fd >= 0 && close(fd) != 0 && rc == 0) {
		mosaic_err("%s: close: %s", o->out, strerror(errno));
		rc = -1;
	}
	free(canvas);
	return rc == 0 ? 0 : -1;
}

/* 1 when the canvas file holds exactly the reference, 0 when not, -1 on
 * error.  Optionally writes the file's pixels as a PNG preview. */
static int check_output(const struct run_opts *o, const struct stitch_geom *g, int tiles_fd, uint64_t tiles_bytes)
{
	uint64_t n = stitch_canvas_file_bytes(g);
	unsigned char *got = malloc(n), *want = NULL;
	int rc = -1;
	int fd = open(o->out, O_RDONLY | O_CLOEXEC);
	if (got == NULL || fd < 0) {
		mosaic_err("%s: %s", o->out, got == NULL ? "out of memory" : strerror(errno));
		goto out;
	}
	if (mosaic_pread_all(fd, o->out, got, n, 0) != 0)
		goto out;
	uint32_t w, h;
	if (stitch_canvas_parse(got, &w, &h) != 0 || w != g->canvas_w || h != g->canvas_h) {
		mosaic_err("%s: canvas header is not a %ux%u page-sized PGM header", o->out, g->canvas_w,
			   g->canvas_h);
		rc = 0;
		goto out;
	}
	if (o->png != NULL &&
	    mosaic_gray_save_png(o->png, got + STITCH_HEADER_BYTES, g->canvas_w, g->canvas_h, g->canvas_w) != 0)
		goto out;
	if (!o->verify) {
		rc = 1;
		goto out;
	}
	want = compose_reference(o, g, tiles_fd, tiles_bytes);
	if (want == NULL)
		goto out;
	uint64_t bad = 0, first = 0;
	for (uint64_t i = n; i-- > 0;)
		if (got[i] != want[i]) {
			bad++;
			first = i;
		}
	if (bad != 0) {
		uint64_t px = first - STITCH_HEADER_BYTES;
		mosaic_err("mode %s: %llu bytes of %s differ from the CPU reference, first at pixel (%llu, %llu)",
			   mode_name[o->mode], (unsigned long long)bad, o->out,
			   (unsigned long long)(px % g->canvas_w), (unsigned long long)(px / g->canvas_w));
	}
	rc = bad == 0;
out:
	if (fd >= 0)
		close(fd);
	free(got);
	free(want);
	return rc;
}

static int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "tiles", required_argument, NULL, 't' },
		{ "out", required_argument, NULL, 'o' },
		{ "mode", required_argument, NULL, 'm' },
		{ "radius", required_argument, NULL, 'r' },
		{ "gpu-cols", required_argument, NULL, 'g' },
		{ "threads", required_argument, NULL, 'j' },
		{ "verify", no_argument, NULL, 'v' },
		{ "png", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct run_opts o = { .mode = MODE_CPU, .radius = 3, .threads = 2 };
	int have_mode = 0, c;
	while ((c = getopt_long(argc, argv, "t:o:m:r:g:j:vp:h", opts, NULL)) != -1) {
		switch (c) {
		case 't': o.tiles = optarg; break;
		case 'o': o.out = optarg; break;
		case 'p': o.png = optarg; break;
		case 'v': o.verify = 1; break;
		case 'r': if (parse_u32(optarg, "--radius", &o.radius) != 0) return 2; break;
		case 'j': if (parse_u32(optarg, "--threads", &o.threads) != 0) return 2; break;
		case 'g':
			if (parse_u32(optarg, "--gpu-cols", &o.gpu_cols) != 0)
				return 2;
			o.have_gpu_cols = 1;
			break;
		case 'm':
			have_mode = 0;
			for (int i = 0; i <= MODE_CPU; i++)
				if (strcmp(optarg, mode_name[i]) == 0) {
					o.mode = (enum stitch_mode)i;
					have_mode = 1;
				}
			if (!have_mode) {
				mosaic_err("--mode: '%s' is not one of gaia, managed, cpu", optarg);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (o.tiles == NULL || o.out == NULL || !have_mode || optind != argc) {
		usage(stderr);
		return 2;
	}
	struct stitch_header h;
	int tiles_fd;
	uint64_t tiles_bytes;
	if (stitch_tiles_open(o.tiles, &h, &tiles_fd, &tiles_bytes) != 0)
		return 1;
	struct stitch_geom g;
	uint32_t gpu_cols = o.mode == MODE_CPU ? 0 : o.have_gpu_cols ? o.gpu_cols : h.cols / 2;
	if (stitch_geom_make(&g, h.rows, h.cols, h.tile_w, h.tile_h, h.overlap, o.radius, gpu_cols) != 0) {
		close(tiles_fd);
		return 1;
	}
	struct run_result r;
	memset(&r, 0, sizeof(r));
	int rc;
	if (o.mode == MODE_CPU) {
		double t0 = mosaic_now_s();
		rc = run_cpu(&o, &g, tiles_fd, tiles_bytes);
		r.time_s = mosaic_now_s() - t0;
	} else {
		rc = MOSAIC_CUDA(cudaFree(NULL));      /* start the device outside the timing */
		struct mosaic_bus before, after;
		mosaic_bus_read(&before);
		double t0 = mosaic_now_s();
		if (rc == 0)
			rc = o.mode == MODE_GAIA ? run_gaia(&o, &g, tiles_fd, tiles_bytes)
						 : run_managed(&o, &g, tiles_fd, tiles_bytes);
		r.time_s = mosaic_now_s() - t0;
		mosaic_bus_read(&after);
		r.bus = mosaic_bus_delta(&before, &after);
	}
	if (rc != 0) {
		printf("stitch: mode=%s status=failed\n", mode_name[o.mode]);
		close(tiles_fd);
		return 1;
	}
	int identical = check_output(&o, &g, tiles_fd, tiles_bytes);
	close(tiles_fd);
	if (identical < 0)
		return 1;
	char b1[24], b2[24], b3[24], b4[24];
	printf("stitch: mode=%s status=ok canvas=%ux%u tiles=%u gpu_cols=%u radius=%u threads=%u time_s=%.4f "
	       "shared_pages=%llu h2d_bytes=%s d2h_bytes=%s uvm_faults=%s uvm_migrated_bytes=%s identical=%d\n",
	       mode_name[o.mode], g.canvas_w, g.canvas_h, g.rows * g.cols, gpu_cols, g.radius, o.threads, r.time_s,
	       (unsigned long long)stitch_shared_pages(&g), mosaic_fmt_u64(b1, r.bus.valid, r.bus.htod_bytes),
	       mosaic_fmt_u64(b2, r.bus.valid, r.bus.dtoh_bytes), mosaic_fmt_u64(b3, r.bus.valid, r.bus.uvm_faults),
	       mosaic_fmt_u64(b4, r.bus.valid, r.bus.uvm_migrated_bytes), o.verify ? identical : -1);
	return identical == 1 ? 0 : 1;
}

int main(int argc, char **argv)
{
	mosaic_set_prog("stitch");
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
	if (strcmp(cmd, "gen") == 0)
		return cmd_gen(argc, argv);
	if (strcmp(cmd, "run") == 0)
		return cmd_run(argc, argv);
	mosaic_err("unknown command '%s'", cmd);
	usage(stderr);
	return 2;
}
