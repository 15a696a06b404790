/* track_exact: the CPU's writes to a managed mapping are found exactly
 * (DESIGN §3.1, §3.4; gaia.h: "a page whose version moved was written in
 * between").
 *
 * Under the shim only (exit 77 without it). Rounds, seeded: write a random
 * set of pages -- stores through the mapping, stores that span two pages,
 * stores of the value a byte already holds (still writes), pwrite, pwrite
 * of the bytes already there, lseek+write -- and, interleaved, read other
 * pages (loads, pread, lseek+read); then gaia_mrelease(GAIA_CPU) and
 * gaia_mversion. The pages whose version moved must be exactly the pages
 * written: a written page that did not move fails at once (a lost write);
 * a page that moved though it was only read, or untouched, is counted and
 * fails the test at the end.
 *
 * Variants:
 *   shared        one MAP_SHARED mapping of a 4 MiB file, all write kinds
 *   two_mappings  writes through one MAP_SHARED mapping (and to the file);
 *                 a second MAP_SHARED mapping of file bytes [1, 3) MiB is
 *                 only read; after both are released and it is acquired,
 *                 it must report the same pages (DESIGN §1.1: a kernel
 *                 handed either address must see the write)
 *   private       a MAP_PRIVATE mapping: stores are tracked the same way;
 *                 afterwards the file must still hold its original bytes
 *
 * TRACK_SEED=S replays a run; the seed is printed first.
 * Exit: 0 pass, 1 fail, 77 skip.
 */
#include "itest.h"

#include <stdarg.h>
#include <sys/mman.h>

#define FILE_BYTES (4ul << 20)
#define FILE_PAGES (FILE_BYTES / ITEST_PAGE)
#define MAX_WRITES 40
#define MAX_READS 40
#define MAX_FALSE_POSITIVES_SHOWN 10

enum action {
	/* writes */
	W_STORE,       /* one byte stored through the mapping */
	W_STORE_SPAN,  /* memset across the boundary into the next page */
	W_STORE_SAME,  /* a byte stored with the value it holds */
	W_PWRITE,      /* pwrite inside the page */
	W_PWRITE_SPAN, /* pwrite across the boundary into the next page */
	W_PWRITE_SAME, /* pwrite of the bytes already there */
	W_WRITE,       /* lseek + write */
	/* reads */
	R_LOAD,       /* loads of the whole page through the written mapping */
	R_LOAD_OTHER, /* loads through the other mapping (two_mappings) */
	R_PREAD,
	R_READ, /* lseek + read */
	ACTION_KINDS
};

static const char *const action_names[ACTION_KINDS] = {
	"store",  "store spanning two pages", "store of the same value", "pwrite", "pwrite spanning two pages",
	"pwrite of the same bytes", "lseek+write", "load", "load through the other mapping", "pread",
	"lseek+read",
};

struct variant {
	const char *name;
	int fd;
	unsigned char *map; /* written through; maps the whole file */
	bool shared;
	unsigned char *other; /* a second mapping, only read (or NULL) */
	size_t other_first, other_pages; /* the file pages it maps */
	unsigned write_kinds, read_kinds; /* bit masks of enum action */
	int rounds;
};

struct step {
	enum action kind;
	size_t page;
};

static struct itest_gaia gaia;
static uint64_t seed;
static unsigned short rng[3];

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "track_exact: FAIL seed=%" PRIu64 ": ", seed);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (replay: TRACK_SEED=%" PRIu64 ")\n", seed);
	return ITEST_FAIL;
}

static enum action pick_kind(unsigned mask)
{
	enum action kinds[ACTION_KINDS];
	unsigned n = 0;

	for (unsigned k = 0; k < ACTION_KINDS; k++)
		if (mask & (1u << k))
			kinds[n++] = (enum action)k;
	return kinds[itest_rnd(rng, n)];
}

static bool spans(enum action kind)
{
	return kind == W_STORE_SPAN || kind == W_PWRITE_SPAN;
}

/* Carries out one step on file page `page`; 0 or -1 (message printed). */
static int do_step(const struct variant *v, const struct step *st)
{
	unsigned char buf[2 * ITEST_PAGE];
	unsigned char *page = v->map + st->page * ITEST_PAGE;
	off_t page_off = (off_t)(st->page * ITEST_PAGE);
	size_t at = itest_rnd(rng, ITEST_PAGE);
	size_t n = 1 + itest_rnd(rng, (uint32_t)(ITEST_PAGE - at)); /* stays in the page */
	size_t cross = 1 + itest_rnd(rng, ITEST_PAGE);		     /* bytes into the next page */
	volatile unsigned char *vp = page;
	unsigned sum = 0;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)itest_rnd(rng, 256);
	switch (st->kind) {
	case W_STORE:
		vp[at] = buf[0];
		break;
	case W_STORE_SPAN:
		memset(page + ITEST_PAGE - n, buf[0], n + cross);
		break;
	case W_STORE_SAME:
		vp[at] = vp[at];
		break;
	case W_PWRITE:
		if (pwrite(v->fd, buf, n, page_off + (off_t)at) != (ssize_t)n)
			return fail("%s: pwrite: %s", v->name, strerror(errno)), -1;
		break;
	case W_PWRITE_SPAN:
		if (pwrite(v->fd, buf, n + cross, page_off + (off_t)(ITEST_PAGE - n)) != (ssize_t)(n + cross))
			return fail("%s: pwrite: %s", v->name, strerror(errno)), -1;
		break;
	case W_PWRITE_SAME:
		if (pread(v->fd, buf, n, page_off + (off_t)at) != (ssize_t)n ||
		    pwrite(v->fd, buf, n, page_off + (off_t)at) != (ssize_t)n)
			return fail("%s: pread+pwrite: %s", v->name, strerror(errno)), -1;
		break;
	case W_WRITE:
		if (lseek(v->fd, page_off + (off_t)at, SEEK_SET) < 0 || write(v->fd, buf, n) != (ssize_t)n)
			return fail("%s: lseek+write: %s", v->name, strerror(errno)), -1;
		break;
	case R_LOAD:
		for (size_t i = 0; i < ITEST_PAGE; i += 64)
			sum += vp[i];
		break;
	case R_LOAD_OTHER: {
		volatile unsigned char *op = v->other + (st->page - v->other_first) * ITEST_PAGE;
		for (size_t i = 0; i < ITEST_PAGE; i += 64)
			sum += op[i];
		break;
	}
	case R_PREAD:
		if (pread(v->fd, buf, n, page_off + (off_t)at) != (ssize_t)n)
			return fail("%s: pread: %s", v->name, strerror(errno)), -1;
		break;
	case R_READ:
		if (lseek(v->fd, page_off + (off_t)at, SEEK_SET) < 0 || read(v->fd, buf, n) != (ssize_t)n)
			return fail("%s: lseek+read: %s", v->name, strerror(errno)), -1;
		break;
	default:
		break;
	}
	(void)sum;
	return 0;
}

/* Releases every mapping of the variant and reads the versions of each. */
static int release_and_read(const struct variant *v, uint32_t *ver, uint32_t *ver_other, const char *when)
{
	if (gaia.mrelease(v->map, FILE_BYTES, GAIA_CPU))
		return fail("%s: gaia_mrelease (%s): %s", v->name, when, strerror(errno));
	if (v->other && gaia.mrelease(v->other, v->other_pages * ITEST_PAGE, GAIA_CPU))
		return fail("%s: gaia_mrelease of the other mapping (%s): %s", v->name, when, strerror(errno));
	/* The other mapping's replica learns what went through the first one at
	 * its acquire at the latest (gaia.h: acquire makes it current). */
	if (v->other && gaia.macquire && gaia.macquire(v->other, v->other_pages * ITEST_PAGE, GAIA_CPU))
		return fail("%s: gaia_macquire of the other mapping (%s): %s", v->name, when, strerror(errno));
	if (gaia.mversion(v->map, FILE_BYTES, ver))
		return fail("%s: gaia_mversion (%s): %s", v->name, when, strerror(errno));
	if (v->other && gaia.mversion(v->other, v->other_pages * ITEST_PAGE, ver_other))
		return fail("%s: gaia_mversion of the other mapping (%s): %s", v->name, when, strerror(errno));
	return 0;
}

/* Compares one mapping's versions against what the round did. `first` is
 * the file page at index 0. Lost writes fail at once; false positives are
 * counted into *false_pos. */
static int check_versions(const struct variant *v, const char *mapping, int round, size_t first, size_t pages,
			  const uint32_t *prev, const uint32_t *cur, const signed char *wrote,
			  const signed char *read_by, unsigned *false_pos)
{
	for (size_t i = 0; i < pages; i++) {
		size_t fp = first + i;
		bool moved = cur[i] != prev[i];

		if (moved && cur[i] < prev[i])
			return fail("%s: %s: round %d: page %zu (file offset %zu): version went back from %u to %u",
				    v->name, mapping, round, fp, fp * ITEST_PAGE, prev[i], cur[i]);
		if (wrote[fp] >= 0 && !moved)
			return fail("%s: %s: round %d: page %zu (file offset %zu) was written (%s) but its version "
				    "stayed %u: a lost write",
				    v->name, mapping, round, fp, fp * ITEST_PAGE, action_names[wrote[fp]], cur[i]);
		if (wrote[fp] < 0 && moved) {
			if (++*false_pos <= MAX_FALSE_POSITIVES_SHOWN)
				fprintf(stderr,
					"track_exact: seed=%" PRIu64 " %s: %s: round %d: page %zu (file offset %zu) "
					"reported written (version %u -> %u) though it was %s%s\n",
					seed, v->name, mapping, round, fp, fp * ITEST_PAGE, prev[i], cur[i],
					read_by[fp] >= 0 ? "only read: " : "untouched",
					read_by[fp] >= 0 ? action_names[read_by[fp]] : "");
		}
	}
	return 0;
}

static int run_variant(struct variant *v)
{
	uint32_t *prev = calloc(FILE_PAGES, sizeof(uint32_t)), *cur = calloc(FILE_PAGES, sizeof(uint32_t));
	uint32_t *prev_o = calloc(FILE_PAGES, sizeof(uint32_t)), *cur_o = calloc(FILE_PAGES, sizeof(uint32_t));
	uint32_t *sub = calloc(FILE_PAGES, sizeof(uint32_t));
	signed char wrote[FILE_PAGES], read_by[FILE_PAGES];
	struct step steps[2 * MAX_WRITES + MAX_READS];
	unsigned false_pos = 0, n_writes = 0, n_reads = 0;
	int rc = ITEST_FAIL;

	if (!prev || !cur || !prev_o || !cur_o || !sub) {
		fail("out of memory");
		goto out;
	}
	/* Start from a clean slate: whatever the set-up wrote is published. */
	if (gaia.mrelease(v->map, FILE_BYTES, GAIA_CPU)) {
		if (errno == ENOENT) {
			rc = itest_unmanaged_verdict("track_exact", "a 4 MiB mapping of a regular file");
		} else {
			fail("%s: first gaia_mrelease: %s", v->name, strerror(errno));
		}
		goto out;
	}
	if (release_and_read(v, prev, prev_o, "before round 0"))
		goto out;

	for (int round = 0; round < v->rounds; round++) {
		size_t nsteps = 0;
		size_t writes = itest_rnd(rng, 10) == 0 ? 0 : 1 + itest_rnd(rng, MAX_WRITES);
		size_t reads = itest_rnd(rng, MAX_READS + 1);

		memset(wrote, -1, sizeof(wrote));
		memset(read_by, -1, sizeof(read_by));
		for (size_t k = 0; k < writes; k++) {
			enum action kind = pick_kind(v->write_kinds);
			size_t page = itest_rnd(rng, FILE_PAGES - (spans(kind) ? 1 : 0));

			steps[nsteps++] = (struct step){ kind, page };
			wrote[page] = (signed char)kind;
			if (spans(kind))
				wrote[page + 1] = (signed char)kind;
		}
		for (size_t k = 0; k < reads; k++) {
			enum action kind = pick_kind(v->read_kinds);
			size_t page = kind == R_LOAD_OTHER ? v->other_first + itest_rnd(rng, (uint32_t)v->other_pages)
							   : itest_rnd(rng, FILE_PAGES);

			if (wrote[page] >= 0)
				continue; /* reading a written page tests nothing */
			steps[nsteps++] = (struct step){ kind, page };
			read_by[page] = (signed char)kind;
		}
		for (size_t k = nsteps; k > 1; k--) { /* interleave reads and writes */
			size_t j = itest_rnd(rng, (uint32_t)k);
			struct step t = steps[k - 1];
			steps[k - 1] = steps[j];
			steps[j] = t;
		}
		for (size_t k = 0; k < nsteps; k++) {
			if (do_step(v, &steps[k]))
				goto out;
			if (steps[k].kind < R_LOAD)
				n_writes++;
			else
				n_reads++;
		}

		if (release_and_read(v, cur, cur_o, "after a round"))
			goto out;
		if (check_versions(v, "the written mapping", round, 0, FILE_PAGES, prev, cur, wrote, read_by,
				   &false_pos))
			goto out;
		if (v->other && check_versions(v, "the other mapping", round, v->other_first, v->other_pages, prev_o,
					       cur_o, wrote, read_by, &false_pos))
			goto out;

		/* A sub-range asks for the same entries. */
		{
			size_t a = itest_rnd(rng, FILE_PAGES), b = a + 1 + itest_rnd(rng, (uint32_t)(FILE_PAGES - a));
			if (gaia.mversion(v->map + a * ITEST_PAGE, (b - a) * ITEST_PAGE, sub)) {
				fail("%s: gaia_mversion of pages [%zu, %zu): %s", v->name, a, b, strerror(errno));
				goto out;
			}
			for (size_t i = a; i < b; i++)
				if (sub[i - a] != cur[i]) {
					fail("%s: round %d: gaia_mversion of pages [%zu, %zu) says %u for page %zu, "
					     "of the whole mapping %u",
					     v->name, round, a, b, sub[i - a], i, cur[i]);
					goto out;
				}
		}
		memcpy(prev, cur, FILE_PAGES * sizeof(uint32_t));
		memcpy(prev_o, cur_o, FILE_PAGES * sizeof(uint32_t));
	}
	if (false_pos) {
		fail("%s: %u page(s) reported written that were only read or untouched (first %d shown above)",
		     v->name, false_pos, MAX_FALSE_POSITIVES_SHOWN);
		goto out;
	}
	printf("track_exact: %s: %d rounds, %u page writes, %u page reads, exact\n", v->name, v->rounds, n_writes,
	       n_reads);
	rc = ITEST_PASS;
out:
	free(prev);
	free(cur);
	free(prev_o);
	free(cur_o);
	free(sub);
	return rc;
}

#define BIT(k) (1u << (k))
#define ALL_WRITES                                                                                      \
	(BIT(W_STORE) | BIT(W_STORE_SPAN) | BIT(W_STORE_SAME) | BIT(W_PWRITE) | BIT(W_PWRITE_SPAN) |    \
	 BIT(W_PWRITE_SAME) | BIT(W_WRITE))
#define STORES (BIT(W_STORE) | BIT(W_STORE_SPAN) | BIT(W_STORE_SAME))
#define FILE_READS (BIT(R_PREAD) | BIT(R_READ))

int main(void)
{
	char dir[PATH_MAX], path[PATH_MAX + 32];
	struct variant variants[] = {
		{ .name = "shared", .shared = true, .write_kinds = ALL_WRITES,
		  .read_kinds = BIT(R_LOAD) | FILE_READS, .rounds = 200 },
		{ .name = "two_mappings", .shared = true, .write_kinds = ALL_WRITES,
		  .read_kinds = BIT(R_LOAD) | BIT(R_LOAD_OTHER) | FILE_READS, .rounds = 100,
		  .other_first = FILE_PAGES / 4, .other_pages = FILE_PAGES / 2 },
		{ .name = "private", .shared = false, .write_kinds = STORES,
		  .read_kinds = BIT(R_LOAD) | FILE_READS, .rounds = 100 },
	};
	int rc = ITEST_PASS;

	gaia = itest_gaia_lookup();
	if (!gaia.mversion || !gaia.mrelease) {
		printf("track_exact: SKIP: gaia_mversion not found: not running under LD_PRELOAD=libgaia.so\n");
		return ITEST_SKIP;
	}
	seed = itest_seed("TRACK_SEED");
	itest_rng_seed(rng, seed);
	printf("track_exact: seed=%" PRIu64 " (TRACK_SEED=%" PRIu64 " replays)\n", seed, seed);
	fflush(stdout);
	if (itest_tempdir(dir, "track_exact"))
		return fail("mkdtemp: %s", strerror(errno));

	/* Every variant runs, whatever the others found; the worst verdict wins. */
	for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
		struct variant *v = &variants[i];
		unsigned char *original = NULL;
		int vrc; /* set-up failures (rc) end the test */

		snprintf(path, sizeof(path), "%s/%s", dir, v->name);
		if (itest_random_file(path, FILE_BYTES, rng) || (v->fd = open(path, O_RDWR | O_CLOEXEC)) < 0) {
			rc = fail("%s: creating %s: %s", v->name, path, strerror(errno));
			break;
		}
		if (!v->shared) {
			original = malloc(FILE_BYTES);
			if (!original || pread(v->fd, original, FILE_BYTES, 0) != (ssize_t)FILE_BYTES) {
				rc = fail("%s: reading the original contents", v->name);
				break;
			}
		}
		v->map = mmap(NULL, FILE_BYTES, PROT_READ | PROT_WRITE, v->shared ? MAP_SHARED : MAP_PRIVATE, v->fd, 0);
		if (v->map == MAP_FAILED) {
			rc = fail("%s: mmap: %s", v->name, strerror(errno));
			break;
		}
		if (v->other_pages) {
			v->other = mmap(NULL, v->other_pages * ITEST_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd,
					(off_t)(v->other_first * ITEST_PAGE));
			if (v->other == MAP_FAILED) {
				rc = fail("%s: mmap of the other mapping: %s", v->name, strerror(errno));
				break;
			}
		}

		vrc = run_variant(v);

		if (vrc == ITEST_PASS && original) {
			unsigned char *now = malloc(FILE_BYTES);
			if (!now || pread(v->fd, now, FILE_BYTES, 0) != (ssize_t)FILE_BYTES)
				vrc = fail("%s: reading the file back", v->name);
			for (size_t b = 0; vrc == ITEST_PASS && b < FILE_BYTES; b++)
				if (now[b] != original[b])
					vrc = fail("%s: MAP_PRIVATE stores reached the file: byte at offset %zu", v->name, b);
			free(now);
		}
		if (v->other)
			munmap(v->other, v->other_pages * ITEST_PAGE);
		munmap(v->map, FILE_BYTES);
		close(v->fd);
		free(original);
		if (vrc == ITEST_FAIL || (vrc == ITEST_SKIP && rc == ITEST_PASS))
			rc = vrc;
	}
	itest_remove_tree(dir);
	if (rc == ITEST_PASS)
		printf("track_exact: PASS seed=%" PRIu64 "\n", seed);
	return rc;
}
