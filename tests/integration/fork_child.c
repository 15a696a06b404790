/* fork_child: managed mappings across fork (DESIGN §1.5, §3.1).
 *
 * MAP_SHARED: the parent maps a file, writes, forks. The child writes pages
 * through the inherited mapping (and one pwrite); under the shim its
 * gaia_mrelease succeeds and gaia_mversion shows exactly its writes (the
 * shim re-registers the child's mappings after the fork). The parent waits,
 * sees the child's bytes, in its mapping and in the file, and its own
 * tracking keeps working: over several rounds after the fork, exactly the
 * pages it writes are reported.
 *
 * MAP_PRIVATE: the same, but the child's stores stay in the child: the
 * parent's mapping keeps its own private bytes and the file's bytes
 * elsewhere, and the file never sees either side's stores.
 *
 * Without the shim only the data checks run (the kernel's behaviour, the
 * oracle for the shim run); with it, the tracking checks too.
 * FORK_SEED=S replays a run; the seed is printed first.
 * Exit: 0 pass, 1 fail, 77 skip.
 */
#include "itest.h"

#include <stdarg.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define FILE_PAGES 256
#define FILE_BYTES (FILE_PAGES * ITEST_PAGE)
#define CHILD_WRITES 24
#define PARENT_ROUNDS 20

/* One planned write: a byte value at an offset, through the mapping or
 * with pwrite. Planned before the fork, so both sides know them. */
struct write_plan {
	size_t off;
	unsigned char value;
	bool with_pwrite;
};

static struct itest_gaia gaia;
static bool tracking; /* under the shim: check the versions too */
static uint64_t seed;
static unsigned short rng[3];
static const char *who = "parent";

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fork_child: FAIL seed=%" PRIu64 " (%s): ", seed, who);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (replay: FORK_SEED=%" PRIu64 ")\n", seed);
	return ITEST_FAIL;
}

static int snapshot(unsigned char *map, uint32_t *ver, const char *when)
{
	if (gaia.mrelease(map, FILE_BYTES, GAIA_CPU))
		return fail("gaia_mrelease (%s): %s", when, strerror(errno));
	if (gaia.mversion(map, FILE_BYTES, ver))
		return fail("gaia_mversion (%s): %s", when, strerror(errno));
	return 0;
}

/* Releases and checks that the versions that moved since `prev` are
 * exactly the pages in `wrote`; then prev = the new versions. */
static int check_exact(unsigned char *map, uint32_t *prev, const bool *wrote, const char *when)
{
	uint32_t cur[FILE_PAGES];
	int lost = 0, extra = 0;

	if (snapshot(map, cur, when))
		return ITEST_FAIL;
	for (size_t p = 0; p < FILE_PAGES; p++) {
		bool moved = cur[p] != prev[p];

		if (moved == wrote[p])
			continue;
		fprintf(stderr, "fork_child: seed=%" PRIu64 " (%s) %s: page %zu (file offset %zu) %s (version %u -> %u)\n",
			seed, who, when, p, p * ITEST_PAGE,
			wrote[p] ? "was written but not reported" : "was reported but not written", prev[p], cur[p]);
		lost += wrote[p];
		extra += !wrote[p];
	}
	memcpy(prev, cur, sizeof(cur));
	if (lost || extra)
		return fail("%s: %d written page(s) not reported, %d unwritten page(s) reported", when, lost, extra);
	return 0;
}

static int apply(int fd, unsigned char *map, const struct write_plan *w, size_t n, unsigned char *model,
		 bool *wrote)
{
	for (size_t i = 0; i < n; i++) {
		if (w[i].with_pwrite) {
			if (pwrite(fd, &w[i].value, 1, (off_t)w[i].off) != 1)
				return fail("pwrite at file offset %zu: %s", w[i].off, strerror(errno));
		} else {
			map[w[i].off] = w[i].value;
		}
		if (model)
			model[w[i].off] = w[i].value;
		if (wrote)
			wrote[w[i].off / ITEST_PAGE] = true;
	}
	return 0;
}

static void plan(struct write_plan *w, size_t n, bool allow_pwrite)
{
	for (size_t i = 0; i < n; i++) {
		w[i].off = itest_rnd(rng, FILE_BYTES);
		w[i].value = (unsigned char)itest_rnd(rng, 256);
		w[i].with_pwrite = allow_pwrite && itest_rnd(rng, 4) == 0;
	}
}

static int compare(const unsigned char *got, const unsigned char *want, const char *what)
{
	for (size_t b = 0; b < FILE_BYTES; b++)
		if (got[b] != want[b])
			return fail("%s: byte at file offset %zu (page %zu) is 0x%02x, expected 0x%02x", what, b,
				    b / ITEST_PAGE, got[b], want[b]);
	return 0;
}

static int compare_file(int fd, const unsigned char *want, const char *what)
{
	static unsigned char now[FILE_BYTES];

	if (pread(fd, now, FILE_BYTES, 0) != (ssize_t)FILE_BYTES)
		return fail("%s: pread: %s", what, strerror(errno));
	return compare(now, want, what);
}

/* The child's part; returns its exit status. `model` is the child's view
 * of its mapping; `file_model` of the file (they differ for MAP_PRIVATE). */
static int child_part(int fd, unsigned char *map, bool shared, const struct write_plan *w, size_t n,
		      unsigned char *model, unsigned char *file_model)
{
	uint32_t ver[FILE_PAGES];
	bool wrote[FILE_PAGES] = { false };

	who = "child";
	if (compare(map, model, "the inherited mapping before the child writes"))
		return ITEST_FAIL;
	if (tracking && snapshot(map, ver, "in the child, right after fork"))
		return ITEST_FAIL;
	if (apply(fd, map, w, n, model, wrote))
		return ITEST_FAIL;
	if (shared)
		for (size_t i = 0; i < n; i++)
			file_model[w[i].off] = w[i].value;
	if (compare(map, model, "the child's mapping after its writes"))
		return ITEST_FAIL;
	if (compare_file(fd, file_model, "the file after the child's writes"))
		return ITEST_FAIL;
	if (tracking && check_exact(map, ver, wrote, "the child's writes"))
		return ITEST_FAIL;
	return ITEST_PASS;
}

static int run(const char *dir, bool shared)
{
	static unsigned char model[FILE_BYTES], file_model[FILE_BYTES], child_model[FILE_BYTES];
	char path[PATH_MAX + 32];
	struct write_plan before[CHILD_WRITES], in_child[CHILD_WRITES], after[CHILD_WRITES];
	uint32_t ver[FILE_PAGES];
	unsigned char *map;
	int fd, status, rc = ITEST_FAIL;
	pid_t pid;
	const char *kind = shared ? "MAP_SHARED" : "MAP_PRIVATE";

	snprintf(path, sizeof(path), "%s/%s", dir, shared ? "shared" : "private");
	if (itest_random_file(path, FILE_BYTES, rng) || (fd = open(path, O_RDWR | O_CLOEXEC)) < 0)
		return fail("creating %s: %s", path, strerror(errno));
	if (pread(fd, file_model, FILE_BYTES, 0) != (ssize_t)FILE_BYTES)
		return fail("reading %s: %s", path, strerror(errno));
	memcpy(model, file_model, FILE_BYTES);
	map = mmap(NULL, FILE_BYTES, PROT_READ | PROT_WRITE, shared ? MAP_SHARED : MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED)
		return fail("mmap %s: %s", kind, strerror(errno));

	/* The parent writes before the fork (stores only: a pwrite would show
	 * through a MAP_PRIVATE mapping's unwritten pages). */
	plan(before, CHILD_WRITES, false);
	if (apply(fd, map, before, CHILD_WRITES, model, NULL))
		goto out;
	if (shared)
		memcpy(file_model, model, FILE_BYTES);
	if (tracking) {
		if (gaia.mrelease(map, FILE_BYTES, GAIA_CPU) && errno == ENOENT) {
			rc = itest_unmanaged_verdict("fork_child", "a 1 MiB mapping of a regular file");
			goto out;
		}
		if (snapshot(map, ver, "before the fork"))
			goto out;
	}

	plan(in_child, CHILD_WRITES, shared);
	memcpy(child_model, model, FILE_BYTES);
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		fail("fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		static unsigned char child_file_model[FILE_BYTES];

		memcpy(child_file_model, file_model, FILE_BYTES);
		_exit(child_part(fd, map, shared, in_child, CHILD_WRITES, child_model, child_file_model));
	}
	if (waitpid(pid, &status, 0) != pid) {
		fail("waitpid: %s", strerror(errno));
		goto out;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != ITEST_PASS) {
		if (WIFSIGNALED(status))
			fail("%s: the child was killed by signal %d (%s)", kind, WTERMSIG(status),
			     strsignal(WTERMSIG(status)));
		else
			fail("%s: the child failed (exit status %d)", kind, WEXITSTATUS(status));
		goto out;
	}

	/* What the child did: visible here for MAP_SHARED, invisible for MAP_PRIVATE. */
	if (shared) {
		for (size_t i = 0; i < CHILD_WRITES; i++)
			model[in_child[i].off] = file_model[in_child[i].off] = in_child[i].value;
	}
	if (compare(map, model, shared ? "the parent's mapping after the child's writes (MAP_SHARED: must show them)"
				       : "the parent's mapping after the child's stores (MAP_PRIVATE: must not show them)"))
		goto out;
	if (compare_file(fd, file_model, shared ? "the file after the child's writes"
						: "the file after private stores (must hold none of them)"))
		goto out;

	/* The parent's tracking after the fork: exact, round after round. */
	if (tracking) {
		/* Learn whatever the child published, then start from here. */
		if (gaia.macquire(map, FILE_BYTES, GAIA_CPU) && errno != ENOENT) {
			fail("gaia_macquire after the child: %s", strerror(errno));
			goto out;
		}
		if (snapshot(map, ver, "after the child exited"))
			goto out;
	}
	for (int round = 0; round < PARENT_ROUNDS; round++) {
		bool wrote[FILE_PAGES] = { false };
		char when[64];
		size_t n = itest_rnd(rng, CHILD_WRITES + 1);

		plan(after, n, shared);
		if (apply(fd, map, after, n, model, wrote))
			goto out;
		for (size_t i = 0; i < n; i++)
			if (shared || after[i].with_pwrite)
				file_model[after[i].off] = after[i].value;
		snprintf(when, sizeof(when), "%s parent round %d after the fork", kind, round);
		if (tracking && check_exact(map, ver, wrote, when))
			goto out;
	}
	if (compare(map, model, "the parent's mapping at the end") ||
	    compare_file(fd, file_model, "the file at the end"))
		goto out;
	printf("fork_child: %s: the child's writes %s, %s%d parent rounds after the fork\n", kind,
	       shared ? "reached the parent and the file" : "stayed in the child",
	       tracking ? "tracked exactly in the child and in " : "(tracking not checked) ", PARENT_ROUNDS);
	rc = ITEST_PASS;
out:
	munmap(map, FILE_BYTES);
	close(fd);
	return rc;
}

int main(void)
{
	char dir[PATH_MAX];
	int rc;

	gaia = itest_gaia_lookup();
	tracking = gaia.mrelease && gaia.macquire && gaia.mversion;
	seed = itest_seed("FORK_SEED");
	itest_rng_seed(rng, seed);
	printf("fork_child: seed=%" PRIu64 " (FORK_SEED=%" PRIu64 " replays)%s\n", seed, seed,
	       tracking ? "" : "; no shim: data checks only");
	if (itest_tempdir(dir, "fork_child"))
		return fail("mkdtemp: %s", strerror(errno));
	rc = run(dir, true);
	if (rc == ITEST_PASS)
		rc = run(dir, false);
	itest_remove_tree(dir);
	if (rc == ITEST_PASS)
		printf("fork_child: PASS seed=%" PRIu64 "\n", seed);
	return rc;
}
