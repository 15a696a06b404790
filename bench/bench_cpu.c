/* CPU-side benchmark of the preloaded shim (issue 4, item 11): what
 * libgaia.so costs a CPU program that maps files, against the kernel alone.
 *
 *   bench_cpu --lib build/libgaia.so
 *
 * Every measurement runs in fresh child processes: bench_cpu re-executes
 * itself in a worker mode (--worker ...), with LD_PRELOAD set to the library
 * for the shim runs and removed for the others, so the shim applies exactly
 * where wanted and each run starts with no mapping of the file. Runs with
 * and without the shim alternate (the machine is shared and noisy) and the
 * medians are compared. The worker times only its own region (mmap included:
 * the shim does its work there) and prints one "RESULT ..." line. The
 * in-process rows compare, within one process under the shim, calls
 * through the shim's hook with calls of libc's own function: what is left
 * between them is the hook's work, without the noise between processes.
 *
 * The data is a 256 MiB file under $TMPDIR (or /tmp), written, fsync'ed
 * (so write-back does not run during the measurements) and read once, so
 * it is clean and resident in the page cache; a sparse 1 GiB file for the
 * release measurement. Both are removed at the end.
 *
 * Prints a table, then lines "BENCH <name> <value> <unit>". Missed goals
 * are not errors; the exit status is non-zero only when something failed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gaia.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

#define PAGE 4096ull
#define FILE_BYTES (256ull << 20)
#define FILE_PAGES (FILE_BYTES / PAGE)
#define BIG_BYTES (1ull << 30)
#define BIG_PAGES (BIG_BYTES / PAGE)
#define TOUCH_REPS 11     /* child processes per touch cell, interleaved */
#define PWRITE_REPS 7     /* child processes per pwrite cell, interleaved */
#define PWRITE_COUNT 65536
#define PREAD_COUNT 131072
#define RELEASE_CLEAN_REPS 101
#define RELEASE_1PCT_REPS 31
#define RELEASE_FULL_REPS 5
#define FIO_REPS 3
#define WORKER_ALARM_S 120
#define SEED 0x6a1a2019ull
#define MAX_RESULTS 16

static const char *prog = "bench_cpu";
static char self_exe[PATH_MAX];
static char lib_path[PATH_MAX];
static char data_path[PATH_MAX];
static char big_path[PATH_MAX];
static int failures;

/* --- small helpers --- */

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Sorts v in place. */
static double median(double *v, size_t n)
{
	if (!n)
		return 0.0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

static _Noreturn void die(const char *what)
{
	fprintf(stderr, "%s: %s: %s\n", prog, what, strerror(errno));
	exit(1);
}

static uint64_t rng_state;

static uint64_t rng_next(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A fixed permutation of 0 .. n-1 (Fisher-Yates from a fixed seed). */
static uint32_t *fixed_permutation(size_t n)
{
	uint32_t *perm = malloc(n * sizeof(*perm));
	if (!perm)
		die("malloc");
	for (size_t i = 0; i < n; i++)
		perm[i] = (uint32_t)i;
	rng_state = SEED;
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = (size_t)(rng_next() % (i + 1));
		uint32_t t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	return perm;
}

/* The library's explicit calls, present only under the shim. */
static int (*find_gaia_call(const char *name))(void *, size_t, int)
{
	void *sym = dlsym(RTLD_DEFAULT, name);
	int (*fn)(void *, size_t, int);
	memcpy(&fn, &sym, sizeof(fn));
	return fn;
}

/* 1 when [addr, addr+len) is managed by a preloaded shim, else 0. */
static int is_managed(void *addr, size_t len)
{
	int (*acquire)(void *, size_t, int) = find_gaia_call("gaia_macquire");
	return acquire && acquire(addr, len, GAIA_CPU) == 0;
}

/* KiB of [addr, ...) mapped with PMDs (2 MiB file folios), from smaps;
 * -1 when it cannot be read. */
static double file_pmd_mapped_kb(const void *addr)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	if (!f)
		return -1.0;
	char line[512], head[32];
	snprintf(head, sizeof(head), "%lx-", (unsigned long)(uintptr_t)addr);
	bool inside = false;
	double kb = -1.0;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, head, strlen(head)))
			inside = true;
		else if (inside && !strncmp(line, "FilePmdMapped:", 14)) {
			kb = strtod(line + 14, NULL);
			break;
		}
	}
	fclose(f);
	return kb;
}

static void print_result(const double *v, size_t n)
{
	printf("RESULT");
	for (size_t i = 0; i < n; i++)
		printf(" %.3f", v[i]);
	printf("\n");
	fflush(stdout);
}

/* --- worker modes: run in a child, print one RESULT line --- */

static volatile uint64_t sink;

/* mmap + read-touch of every page (in `order`, or sequential when NULL),
 * then munmap; twice, to tell the first mapping of a process (which pays
 * the shim's one-time set-up) from a later one.
 * RESULT: total mmap touch munmap managed, then the same for the second
 * mapping (times in ns). */
static int worker_touch(const char *path, bool random_order)
{
	uint32_t *order = random_order ? fixed_permutation(FILE_PAGES) : NULL;
	/* O_RDWR although it only reads: userfaultfd refuses to register a
	 * shared mapping of a read-only descriptor (no VM_MAYWRITE), so the
	 * shim would pass an O_RDONLY mapping through unmanaged. */
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		die(path);
	double out[10];
	for (int it = 0; it < 2; it++) {
		uint64_t sum = 0;
		double t0 = now_ns();
		const volatile char *p = mmap(NULL, FILE_BYTES, PROT_READ, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED)
			die("mmap");
		double t1 = now_ns();
		if (order) {
			for (size_t i = 0; i < FILE_PAGES; i++)
				sum += (unsigned char)p[(size_t)order[i] * PAGE];
		} else {
			for (size_t i = 0; i < FILE_PAGES; i++)
				sum += (unsigned char)p[i * PAGE];
		}
		double t2 = now_ns();
		int managed = is_managed((void *)p, PAGE);
		double t3 = now_ns();
		if (munmap((void *)p, FILE_BYTES))
			die("munmap");
		double t4 = now_ns();
		sink += sum;
		out[it * 5 + 0] = t2 - t0;
		out[it * 5 + 1] = t1 - t0;
		out[it * 5 + 2] = t2 - t1;
		out[it * 5 + 3] = t4 - t3;
		out[it * 5 + 4] = managed;
	}
	close(fd);
	free(order);
	print_result(out, 10);
	return 0;
}

/* Without the shim: the kernel work the shim's mmap does, step by step.
 * RESULT: mmap mincore populate touch (ns). */
static int worker_populate(const char *path)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	unsigned char *vec = malloc(FILE_PAGES);
	if (fd < 0 || !vec)
		die(path);
	double t0 = now_ns();
	const volatile char *p = mmap(NULL, FILE_BYTES, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		die("mmap");
	double t1 = now_ns();
	if (mincore((void *)p, FILE_BYTES, vec))
		die("mincore");
	double t2 = now_ns();
	if (madvise((void *)p, FILE_BYTES, MADV_POPULATE_READ))
		die("madvise(MADV_POPULATE_READ)");
	double t3 = now_ns();
	uint64_t sum = 0;
	for (size_t i = 0; i < FILE_PAGES; i++)
		sum += (unsigned char)p[i * PAGE];
	double t4 = now_ns();
	sink += sum + vec[0];
	munmap((void *)p, FILE_BYTES);
	close(fd);
	free(vec);
	double out[4] = {t1 - t0, t2 - t1, t3 - t2, t4 - t3};
	print_result(out, 4);
	return 0;
}

/* What CUDA programs do today: malloc a buffer and read() the file into it.
 * RESULT: total (ns). */
static int worker_read_malloc(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die(path);
	double t0 = now_ns();
	char *buf = malloc(FILE_BYTES);
	if (!buf)
		die("malloc");
	size_t done = 0;
	while (done < FILE_BYTES) {
		ssize_t n = read(fd, buf + done, FILE_BYTES - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die("read");
		done += (size_t)n;
	}
	double t1 = now_ns();
	sink += (unsigned char)buf[FILE_BYTES / 2];
	free(buf);
	close(fd);
	double out[1] = {t1 - t0};
	print_result(out, 1);
	return 0;
}

static int (*mversion)(const void *, size_t, uint32_t *);

/* Median time of `reps` CPU releases of the whole mapping, each after a
 * store into every `stride`-th page (none when stride is 0). Also returns
 * the pages the last release reported (their versions moved). */
static double time_releases(int (*release)(void *, size_t, int), char *p, size_t stride,
			    int reps, uint32_t *before, uint32_t *after, size_t *reported)
{
	double *t = malloc((size_t)reps * sizeof(*t));
	if (!t)
		die("malloc");
	for (int r = 0; r < reps; r++) {
		if (stride) {
			for (size_t i = 0; i < BIG_PAGES; i += stride)
				p[i * PAGE] = (char)(r + 1);
		}
		if (r == reps - 1 && mversion(p, BIG_BYTES, before))
			die("gaia_mversion");
		double t0 = now_ns();
		if (release(p, BIG_BYTES, GAIA_CPU))
			die("gaia_mrelease");
		t[r] = now_ns() - t0;
	}
	if (mversion(p, BIG_BYTES, after))
		die("gaia_mversion");
	*reported = 0;
	for (size_t i = 0; i < BIG_PAGES; i++)
		*reported += before[i] != after[i];
	double m = median(t, (size_t)reps);
	free(t);
	return m;
}

/* Under the shim: a 1 GiB managed mapping of a resident file, released
 * with nothing, 1% and 100% of its pages written.
 * RESULT: clean_ns 1pct_ns full_ns clean_reported 1pct_reported
 * full_reported file_pmd_mapped_kb. */
static int worker_release(const char *path)
{
	int (*release)(void *, size_t, int) = find_gaia_call("gaia_mrelease");
	if (!release) {
		fprintf(stderr, "%s: gaia_mrelease not found: the worker is not under the shim\n",
			prog);
		return 1;
	}
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		die(path);
	char *p = mmap(NULL, BIG_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		die("mmap");
	if (!is_managed(p, BIG_BYTES)) {
		fprintf(stderr, "%s: the 1 GiB mapping is not managed by the shim\n", prog);
		return 1;
	}
	void *sym = dlsym(RTLD_DEFAULT, "gaia_mversion");
	memcpy(&mversion, &sym, sizeof(mversion));
	if (!mversion) {
		fprintf(stderr, "%s: gaia_mversion not found in the shim\n", prog);
		return 1;
	}
	uint32_t *before = malloc(BIG_PAGES * sizeof(uint32_t));
	uint32_t *after = malloc(BIG_PAGES * sizeof(uint32_t));
	if (!before || !after)
		die("malloc");
	if (release(p, BIG_BYTES, GAIA_CPU)) /* the first release after mmap */
		die("gaia_mrelease");
	size_t rep_clean, rep_1pct, rep_full;
	double out[7];
	out[6] = file_pmd_mapped_kb(p);
	out[0] = time_releases(release, p, 0, RELEASE_CLEAN_REPS, before, after, &rep_clean);
	out[1] = time_releases(release, p, 100, RELEASE_1PCT_REPS, before, after, &rep_1pct);
	out[2] = time_releases(release, p, 1, RELEASE_FULL_REPS, before, after, &rep_full);
	out[3] = (double)rep_clean;
	out[4] = (double)rep_1pct;
	out[5] = (double)rep_full;
	munmap(p, BIG_BYTES);
	close(fd);
	free(before);
	free(after);
	print_result(out, 7);
	return 0;
}

/* The file mapped MAP_SHARED read-write (managed under the shim), then
 * PWRITE_COUNT pwrites of one page at fixed random page offsets.
 * RESULT: pwrite_total_ns managed. */
static int worker_pwrite(const char *path)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		die(path);
	char *p = mmap(NULL, FILE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		die("mmap");
	int managed = is_managed(p, PAGE);
	off_t *offsets = malloc(PWRITE_COUNT * sizeof(*offsets));
	static char buf[PAGE] __attribute__((aligned(4096)));
	if (!offsets)
		die("malloc");
	rng_state = SEED ^ 0x5157;
	for (size_t i = 0; i < PWRITE_COUNT; i++)
		offsets[i] = (off_t)((rng_next() % FILE_PAGES) * PAGE);
	memset(buf, 0x5a, sizeof(buf));
	double t0 = now_ns();
	for (size_t i = 0; i < PWRITE_COUNT; i++) {
		buf[0] = (char)i;
		if (pwrite(fd, buf, PAGE, offsets[i]) != (ssize_t)PAGE)
			die("pwrite");
	}
	double t1 = now_ns();
	munmap(p, FILE_BYTES);
	close(fd);
	free(offsets);
	double out[2] = {t1 - t0, managed};
	print_result(out, 2);
	return 0;
}

/* A small file of the worker's own (next to path, removed at once),
 * mapped MAP_SHARED read-write and written once: under the shim, a
 * managed mapping. *managed: 1 when it is (or no shim runs). */
#define OWN_BYTES (1u << 20)
static char *map_own_file(const char *path, int *managed)
{
	char own[PATH_MAX];
	snprintf(own, sizeof(own), "%s.own-XXXXXX", path);
	int mfd = mkstemp(own);
	if (mfd < 0 || ftruncate(mfd, OWN_BYTES))
		die(own);
	char *map = mmap(NULL, OWN_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (map == MAP_FAILED)
		die("mmap");
	map[0] = 1;
	*managed = is_managed(map, PAGE);
	close(mfd);
	unlink(own);
	return map;
}

/* --- in-process overhead: the shim's hook against libc's own call --- */

/* libc's pread64 and pwrite64 themselves, behind the preloaded shim: a
 * lookup in libc's handle finds libc's definitions. */
typedef ssize_t (*pread_fn)(int, void *, size_t, off_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
static void *libc_call(const char *name)
{
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	void *fn = libc ? dlsym(libc, name) : NULL;
	if (!fn)
		die(name);
	return fn;
}

/* Alternating blocks of INPROC_BLOCK calls through the program's own
 * symbol (the shim's hook when preloaded) and through libc's, at the same
 * offsets, so that both see the same process, mapping, page cache and
 * moment: what remains between them is the hook's own work. Returns the
 * two totals in ns. */
#define INPROC_BLOCK 1024
static void time_inproc(int fd, const off_t *offsets, size_t count, bool write, char *buf,
			double *hooked_ns, double *libc_ns)
{
	pread_fn real_read = NULL;
	pwrite_fn real_write = NULL;
	void *f = libc_call(write ? "pwrite64" : "pread64");
	if (write)
		memcpy(&real_write, &f, sizeof(f));
	else
		memcpy(&real_read, &f, sizeof(f));
	*hooked_ns = *libc_ns = 0;
	for (size_t b = 0; b < count / INPROC_BLOCK; b++) {
		const off_t *at = offsets + b * INPROC_BLOCK;
		for (int k = 0; k < 2; k++) {
			bool hooked = (k == 0) == (b % 2 == 0);
			double t0 = now_ns();
			for (size_t i = 0; i < INPROC_BLOCK; i++) {
				ssize_t n;
				buf[0] = (char)i;
				if (write)
					n = hooked ? pwrite(fd, buf, PAGE, at[i])
						   : real_write(fd, buf, PAGE, at[i]);
				else
					n = hooked ? pread(fd, buf, PAGE, at[i])
						   : real_read(fd, buf, PAGE, at[i]);
				if (n != (ssize_t)PAGE)
					die(write ? "pwrite" : "pread");
			}
			*(hooked ? hooked_ns : libc_ns) += now_ns() - t0;
		}
	}
}

/* RESULT: hooked_ns libc_ns managed. pwrite: PWRITE_COUNT writes of each
 * kind into the mapped file (managed under the shim). pread: PREAD_COUNT
 * reads of each kind of the unmanaged file, in a process that maps a small
 * file of its own when `mapped`. */
static int worker_inproc(const char *path, bool write, bool mapped)
{
	int fd = open(path, (write ? O_RDWR : O_RDONLY) | O_CLOEXEC);
	if (fd < 0)
		die(path);
	char *map = NULL;
	size_t map_len = 0;
	int managed = 1;
	if (write) {
		map_len = FILE_BYTES;
		map = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (map == MAP_FAILED)
			die("mmap");
		managed = is_managed(map, PAGE);
	} else if (mapped) {
		map_len = OWN_BYTES;
		map = map_own_file(path, &managed);
	}
	size_t count = write ? PWRITE_COUNT : PREAD_COUNT;
	off_t *offsets = malloc(count * sizeof(*offsets));
	static char buf[PAGE] __attribute__((aligned(4096)));
	if (!offsets)
		die("malloc");
	rng_state = SEED ^ (write ? 0x5157 : 0x7265);
	for (size_t i = 0; i < count; i++)
		offsets[i] = (off_t)((rng_next() % FILE_PAGES) * PAGE);
	memset(buf, 0x5a, sizeof(buf));
	double out[3];
	time_inproc(fd, offsets, count, write, buf, &out[0], &out[1]);
	out[2] = managed;
	sink += (unsigned char)buf[1];
	if (map)
		munmap(map, map_len);
	close(fd);
	free(offsets);
	print_result(out, 3);
	return 0;
}

/* The unmanaged path without fio: PREAD_COUNT preads of one page at fixed
 * random offsets of a file that nothing maps. With `mapped`, the process
 * first maps a small file of its own MAP_SHARED read-write (managed under
 * the shim): the preads then take the path of a process that has managed
 * mappings, on a descriptor that is not one of them. RESULT: total_ns,
 * managed (1 when the small mapping is managed, or with no mapping). */
static void *idle_thread(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

static int worker_pread(const char *path, bool mapped, bool thread)
{
	pthread_t idle;
	if (thread && pthread_create(&idle, NULL, idle_thread, NULL))
		die("pthread_create");
	char *map = NULL;
	int managed = 1;
	if (mapped)
		map = map_own_file(path, &managed);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	off_t *offsets = malloc(PREAD_COUNT * sizeof(*offsets));
	static char buf[PAGE] __attribute__((aligned(4096)));
	if (fd < 0 || !offsets)
		die(path);
	rng_state = SEED ^ 0x7265;
	for (size_t i = 0; i < PREAD_COUNT; i++)
		offsets[i] = (off_t)((rng_next() % FILE_PAGES) * PAGE);
	double t0 = now_ns();
	for (size_t i = 0; i < PREAD_COUNT; i++) {
		if (pread(fd, buf, PAGE, offsets[i]) != (ssize_t)PAGE)
			die("pread");
	}
	double t1 = now_ns();
	sink += (unsigned char)buf[0];
	close(fd);
	free(offsets);
	if (map)
		munmap(map, OWN_BYTES);
	double out[2] = {t1 - t0, managed};
	print_result(out, 2);
	return 0;
}

static int run_worker(int argc, char **argv)
{
	alarm(WORKER_ALARM_S);
	if (argc != 2) {
		fprintf(stderr, "%s: --worker MODE FILE\n", prog);
		return 2;
	}
	const char *mode = argv[0], *path = argv[1];
	if (!strcmp(mode, "seq"))
		return worker_touch(path, false);
	if (!strcmp(mode, "rand"))
		return worker_touch(path, true);
	if (!strcmp(mode, "populate"))
		return worker_populate(path);
	if (!strcmp(mode, "readmalloc"))
		return worker_read_malloc(path);
	if (!strcmp(mode, "release"))
		return worker_release(path);
	if (!strcmp(mode, "pwrite"))
		return worker_pwrite(path);
	if (!strcmp(mode, "pread_mapped"))
		return worker_pread(path, true, false);
	if (!strcmp(mode, "pread"))
		return worker_pread(path, false, false);
	if (!strcmp(mode, "pread_thread"))
		return worker_pread(path, false, true);
	if (!strcmp(mode, "pwrite_inproc"))
		return worker_inproc(path, true, false);
	if (!strcmp(mode, "pread_inproc"))
		return worker_inproc(path, false, false);
	if (!strcmp(mode, "pread_mapped_inproc"))
		return worker_inproc(path, false, true);
	fprintf(stderr, "%s: unknown worker mode %s\n", prog, mode);
	return 2;
}

/* --- running children --- */

/* The environment with LD_PRELOAD removed, and set to the library when
 * `shim`. Returns a static array rebuilt on every call. */
static const char *shim_extra_env; /* one more NAME=value for shim runs, or NULL */

static char **child_environment(bool shim)
{
	extern char **environ;
	static char **env;
	static char preload[PATH_MAX + 16];
	size_t n = 0;
	while (environ[n])
		n++;
	free(env);
	env = calloc(n + 3, sizeof(*env));
	if (!env)
		die("calloc");
	size_t k = 0;
	/* The extra setting replaces the inherited one. */
	size_t extra_name = 0;
	if (shim && shim_extra_env)
		extra_name = (size_t)(strchr(shim_extra_env, '=') - shim_extra_env) + 1;
	for (size_t i = 0; i < n; i++) {
		if (strncmp(environ[i], "LD_PRELOAD=", 11) &&
		    (!extra_name || strncmp(environ[i], shim_extra_env, extra_name)))
			env[k++] = environ[i];
	}
	if (shim) {
		snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", lib_path);
		env[k++] = preload;
		if (shim_extra_env)
			env[k++] = (char *)shim_extra_env;
	}
	env[k] = NULL;
	return env;
}

/* Runs argv (argv[0] a path, or a name looked up in PATH) with or without
 * the shim; its stdout is returned (malloc'ed, NUL-terminated), its stderr
 * passes through. NULL when it could not be run or did not exit 0;
 * *not_found is set when the program does not exist. */
static char *run_child(char *const argv[], bool shim, bool *not_found)
{
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC))
		die("pipe");
	char **env = child_environment(shim);
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		dup2(pipefd[1], STDOUT_FILENO);
		execvpe(argv[0], argv, env);
		_exit(errno == ENOENT ? 127 : 126);
	}
	close(pipefd[1]);
	size_t cap = 1 << 16, len = 0;
	char *out = malloc(cap);
	if (!out)
		die("malloc");
	for (;;) {
		if (len + 1 >= cap) {
			char *bigger = realloc(out, cap *= 2);
			if (!bigger)
				die("realloc");
			out = bigger;
		}
		ssize_t n = read(pipefd[0], out + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	out[len] = 0;
	close(pipefd[0]);
	int status;
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			die("waitpid");
	}
	if (not_found)
		*not_found = WIFEXITED(status) && WEXITSTATUS(status) == 127;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if (!not_found || !*not_found) {
			if (WIFSIGNALED(status))
				fprintf(stderr, "%s: %s killed by signal %d\n", prog, argv[0],
					WTERMSIG(status));
			else
				fprintf(stderr, "%s: %s exited with status %d\n", prog, argv[0],
					WEXITSTATUS(status));
		}
		free(out);
		return NULL;
	}
	return out;
}

/* Runs bench_cpu --worker MODE FILE and parses its RESULT line into v
 * (exactly n values). */
static void run_worker_child(const char *mode, const char *path, bool shim, double *v,
			     size_t n)
{
	char *argv[] = {self_exe, "--worker", (char *)mode, (char *)path, NULL};
	char *out = run_child(argv, shim, NULL);
	const char *line = out ? strstr(out, "RESULT") : NULL;
	if (!line) {
		fprintf(stderr, "%s: worker %s (%s the shim) failed\n", prog, mode,
			shim ? "with" : "without");
		exit(1);
	}
	char *s = (char *)line + 6;
	for (size_t i = 0; i < n; i++) {
		char *end;
		v[i] = strtod(s, &end);
		if (end == s) {
			fprintf(stderr, "%s: worker %s printed a short RESULT line: %s\n", prog,
				mode, line);
			exit(1);
		}
		s = end;
	}
	free(out);
}

/* --- the data files --- */

static void remove_files(void)
{
	if (data_path[0])
		unlink(data_path);
	if (big_path[0])
		unlink(big_path);
}

static void on_signal(int sig)
{
	remove_files();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void read_whole(int fd, uint64_t bytes)
{
	static char buf[1 << 20];
	for (uint64_t off = 0; off < bytes;) {
		ssize_t n = pread(fd, buf, sizeof(buf), (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die("read");
		off += (uint64_t)n;
	}
}

/* Fraction of the file's pages in the page cache. */
static double resident_fraction(const char *path, uint64_t bytes)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die(path);
	size_t pages = (size_t)(bytes / PAGE), in = 0;
	unsigned char *vec = malloc(pages);
	void *p = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
	if (!vec || p == MAP_FAILED || mincore(p, bytes, vec))
		die("mincore");
	for (size_t i = 0; i < pages; i++)
		in += vec[i] & 1;
	munmap(p, bytes);
	free(vec);
	close(fd);
	return (double)in / (double)pages;
}

/* The 256 MiB file: written with non-zero bytes, made clean (fsync) and
 * read once, so it is resident and write-back stays quiet. */
static void create_data_file(void)
{
	int fd = open(data_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		die(data_path);
	static char buf[1 << 20];
	rng_state = SEED;
	for (uint64_t off = 0; off < FILE_BYTES; off += sizeof(buf)) {
		for (size_t i = 0; i < sizeof(buf); i += 8) {
			uint64_t r = rng_next();
			memcpy(buf + i, &r, 8);
		}
		if (pwrite(fd, buf, sizeof(buf), (off_t)off) != (ssize_t)sizeof(buf))
			die("write");
	}
	if (fsync(fd))
		die("fsync");
	read_whole(fd, FILE_BYTES);
	close(fd);
}

/* The 1 GiB file: sparse, then read once, so its (zero) pages are in the
 * page cache without any disk I/O. */
static void create_big_file(void)
{
	int fd = open(big_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		die(big_path);
	if (ftruncate(fd, (off_t)BIG_BYTES))
		die("ftruncate");
	read_whole(fd, BIG_BYTES);
	close(fd);
}

/* --- the measurements --- */

struct touch_cell {
	double total[TOUCH_REPS], mmap[TOUCH_REPS], touch[TOUCH_REPS], munmap[TOUCH_REPS];
	double total2[TOUCH_REPS], mmap2[TOUCH_REPS], touch2[TOUCH_REPS];
	int unmanaged;
};

static void touch_sample(struct touch_cell *c, int r, const char *mode, bool shim)
{
	double v[10];
	run_worker_child(mode, data_path, shim, v, 10);
	c->total[r] = v[0];
	c->mmap[r] = v[1];
	c->touch[r] = v[2];
	c->munmap[r] = v[3];
	c->total2[r] = v[5];
	c->mmap2[r] = v[6];
	c->touch2[r] = v[7];
	if (shim && (v[4] < 0.5 || v[9] < 0.5))
		c->unmanaged++;
}

struct touch_medians {
	double total, mmap, touch, munmap, total2, mmap2, touch2;
	int unmanaged;
};

static struct touch_medians touch_medians(struct touch_cell *c)
{
	struct touch_medians m = {
		.total = median(c->total, TOUCH_REPS) / 1e6,
		.mmap = median(c->mmap, TOUCH_REPS) / 1e6,
		.touch = median(c->touch, TOUCH_REPS) / 1e6,
		.munmap = median(c->munmap, TOUCH_REPS) / 1e6,
		.total2 = median(c->total2, TOUCH_REPS) / 1e6,
		.mmap2 = median(c->mmap2, TOUCH_REPS) / 1e6,
		.touch2 = median(c->touch2, TOUCH_REPS) / 1e6,
		.unmanaged = c->unmanaged,
	};
	return m;
}

static void print_touch_rows(const char *what, struct touch_medians k, struct touch_medians s)
{
	printf("  %-44s %10.2f %10.2f %8.2f\n", what, k.total, s.total, k.total / s.total);
	printf("  %-44s %10.2f %10.2f\n", "  of which mmap (ms)", k.mmap, s.mmap);
	printf("  %-44s %10.2f %10.2f\n", "  of which touch (ms)", k.touch, s.touch);
	printf("  %-44s %10.2f %10.2f %8.2f\n", "  2nd mapping in the same process (ms)", k.total2,
	       s.total2, k.total2 / s.total2);
	printf("  %-44s %10.2f %10.2f\n", "    of which mmap (ms)", k.mmap2, s.mmap2);
	printf("  %-44s %10.2f %10.2f\n", "    of which touch (ms)", k.touch2, s.touch2);
	printf("  %-44s %10.2f %10.2f\n", "  munmap (ms; the shim releases there)", k.munmap,
	       s.munmap);
	if (s.unmanaged)
		printf("  WARNING: %d of %d shim runs did not manage the mapping (pass-through)\n",
		       s.unmanaged, TOUCH_REPS);
}

/* fio's read IOPS from its JSON output ("iops" inside the "read" object),
 * or a negative value when it is not there. */
static double fio_read_iops(const char *json)
{
	const char *read_obj = strstr(json, "\"read\"");
	const char *key = read_obj ? strstr(read_obj, "\"iops\"") : NULL;
	const char *colon = key ? strchr(key + 6, ':') : NULL;
	if (!colon)
		return -1.0;
	char *end;
	double iops = strtod(colon + 1, &end);
	return end == colon + 1 ? -1.0 : iops;
}

/* Median read IOPS with and without the shim (alternating runs); false
 * when fio is not installed. */
static bool measure_fio(double *iops_without, double *iops_with)
{
	char fname[PATH_MAX + 16];
	snprintf(fname, sizeof(fname), "--filename=%s", data_path);
	/* --invalidate=0: fio would otherwise drop the file from the page
	 * cache before each run and measure the disk instead. */
	char *argv[] = {"fio", "--name=r", fname, "--rw=randread", "--bs=4k",
			"--ioengine=psync", "--size=256M", "--runtime=3", "--time_based",
			"--invalidate=0", "--output-format=json", NULL};
	double w[FIO_REPS], s[FIO_REPS];
	for (int r = 0; r < FIO_REPS; r++) {
		for (int k = 0; k < 2; k++) {
			bool shim = (k == 0) == (r % 2 == 1);
			bool not_found = false;
			char *out = run_child(argv, shim, &not_found);
			if (!out && not_found)
				return false;
			double iops = out ? fio_read_iops(out) : -1.0;
			free(out);
			if (iops <= 0) {
				fprintf(stderr, "%s: fio (%s the shim) failed or printed no read "
					"iops\n", prog, shim ? "with" : "without");
				failures++;
				*iops_without = *iops_with = -1.0;
				return true;
			}
			(shim ? s : w)[r] = iops;
		}
	}
	*iops_without = median(w, FIO_REPS);
	*iops_with = median(s, FIO_REPS);
	return true;
}

static _Noreturn void usage(int status)
{
	fprintf(status ? stderr : stdout,
		"usage: %s --lib PATH/libgaia.so\n"
		"  Measures the preloaded shim against the kernel alone on a 256 MiB file\n"
		"  in the page cache (created under $TMPDIR or /tmp and removed at the end)\n"
		"  and prints a table and BENCH lines.\n",
		prog);
	exit(status);
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "--worker"))
		return run_worker(argc - 2, argv + 2);
	/* Only explicit releases are measured: the periodic one would release
	 * between a benchmark's stores and its gaia_mrelease. */
	setenv("GAIA_RELEASE_MS", "0", 1);

	static const struct option options[] = {
		{"lib", required_argument, NULL, 'l'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *lib = NULL;
	int opt;
	while ((opt = getopt_long(argc, argv, "l:h", options, NULL)) != -1) {
		if (opt == 'l')
			lib = optarg;
		else
			usage(opt == 'h' ? 0 : 2);
	}
	if (!lib || optind != argc)
		usage(2);
	if (!realpath(lib, lib_path)) {
		fprintf(stderr, "%s: the library %s does not exist (%s); build it first (make)\n",
			prog, lib, strerror(errno));
		return 1;
	}
	ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
	if (n <= 0)
		die("readlink /proc/self/exe");
	self_exe[n] = 0;

	const char *tmp = getenv("TMPDIR");
	if (!tmp || !*tmp)
		tmp = "/tmp";
	snprintf(data_path, sizeof(data_path), "%s/gaia_bench_cpu.%d.256m", tmp, (int)getpid());
	snprintf(big_path, sizeof(big_path), "%s/gaia_bench_cpu.%d.1g", tmp, (int)getpid());
	atexit(remove_files);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);

	double t_start = now_ns();
	create_data_file();
	printf("bench_cpu: library %s\n", lib_path);
	printf("  data: %s, 256 MiB, %.1f%% resident in the page cache\n", data_path,
	       100.0 * resident_fraction(data_path, FILE_BYTES));
	printf("  each cell: the median of %d child processes, with and without the shim "
	       "interleaved\n\n", TOUCH_REPS);

	/* 1. First touch: kernel mapping, shim mapping, malloc+read; plus the
	 *    shim's mmap-time work replayed without it. */
	static struct touch_cell seq_k, seq_s, rnd_k, rnd_s;
	double readmalloc[TOUCH_REPS], pop[4][TOUCH_REPS];
	for (int r = 0; r < TOUCH_REPS; r++) {
		bool shim_first = r % 2;
		touch_sample(shim_first ? &seq_s : &seq_k, r, "seq", shim_first);
		touch_sample(shim_first ? &seq_k : &seq_s, r, "seq", !shim_first);
		run_worker_child("readmalloc", data_path, false, &readmalloc[r], 1);
		touch_sample(shim_first ? &rnd_s : &rnd_k, r, "rand", shim_first);
		touch_sample(shim_first ? &rnd_k : &rnd_s, r, "rand", !shim_first);
		double v[4];
		run_worker_child("populate", data_path, false, v, 4);
		for (int i = 0; i < 4; i++)
			pop[i][r] = v[i];
	}
	struct touch_medians sk = touch_medians(&seq_k), ss = touch_medians(&seq_s);
	struct touch_medians rk = touch_medians(&rnd_k), rs = touch_medians(&rnd_s);
	double rm_ms = median(readmalloc, TOUCH_REPS) / 1e6;
	double pop_ms[4];
	for (int i = 0; i < 4; i++)
		pop_ms[i] = median(pop[i], TOUCH_REPS) / 1e6;

	printf("first touch of 256 MiB (ms)                     without shim  with shim  ratio\n");
	print_touch_rows("mmap + sequential touch (ms)", sk, ss);
	print_touch_rows("mmap + random-order touch (ms)", rk, rs);
	printf("  %-44s %10.2f %10.2f %8.2f\n", "malloc + read() vs shim mmap + seq touch (ms)",
	       rm_ms, ss.total, rm_ms / ss.total);
	printf("  shim's mmap work replayed without the shim (ms): mmap %.2f, mincore %.2f,\n"
	       "    MADV_POPULATE_READ %.2f, then sequential touch %.2f\n\n",
	       pop_ms[0], pop_ms[1], pop_ms[2], pop_ms[3]);

	/* 2. Release of a 1 GiB managed mapping. */
	create_big_file();
	double big_resident = resident_fraction(big_path, BIG_BYTES);
	double rel[7];
	run_worker_child("release", big_path, true, rel, 7);
	unlink(big_path); /* drops its dirty pages without writing them back */
	big_path[0] = 0;
	printf("gaia_mrelease(GAIA_CPU) of a 1 GiB managed MAP_SHARED mapping "
	       "(%.1f%% resident)\n", 100.0 * big_resident);
	printf("  %-24s %10s %10s %10s %9s\n", "pages written", "median us", "written",
	       "reported", "releases");
	printf("  %-24s %10.1f %10d %10.0f %9d\n", "none", rel[0] / 1e3, 0, rel[3],
	       RELEASE_CLEAN_REPS);
	printf("  %-24s %10.1f %10llu %10.0f %9d\n", "1% (every 100th page)", rel[1] / 1e3,
	       (BIG_PAGES + 99) / 100, rel[4], RELEASE_1PCT_REPS);
	printf("  %-24s %10.1f %10llu %10.0f %9d\n", "100%", rel[2] / 1e3, BIG_PAGES, rel[5],
	       RELEASE_FULL_REPS);
	printf("  (the mapping had %.0f MiB mapped with 2 MiB PMDs at the end; a store into a\n"
	       "  PMD-mapped file folio counts the whole 2 MiB as written)\n\n", rel[6] / 1024);

	/* 3. Unmanaged I/O: fio psync random reads. */
	double iops_without = 0, iops_with = 0;
	bool have_fio = measure_fio(&iops_without, &iops_with);
	double fio_pct = (iops_without / iops_with - 1.0) * 100.0;
	if (!have_fio)
		printf("fio 4 KiB psync random reads: skipped (fio not installed; "
		       "apt-get install fio)\n\n");
	else if (iops_with > 0)
		printf("fio 4 KiB psync random reads of an unmanaged 256 MiB file (median of %d, "
		       "alternating)\n  IOPS without shim %.0f, with shim %.0f: overhead %.2f%%\n\n",
		       FIO_REPS, iops_without, iops_with, fio_pct);

	/* The same path without fio's own noise: preads from this program, in
	 * a process with no mapping and in one with a managed mapping of
	 * another file (the in-process overhead). */
	/* The second with the shim's GAIA_RELEASE_MS thread (at its default
	 * period), the third with GAIA_RELEASE_MS=0 as everywhere else here,
	 * so the process keeps its one thread (see the row after). */
	const char *pread_modes[3] = {"pread", "pread_mapped", "pread_mapped"};
	const char *pread_what[3] = {"in a process with no mapping",
				     "in a process with a managed mapping of another file and the "
				     "shim's GAIA_RELEASE_MS thread",
				     "the same, GAIA_RELEASE_MS=0 (no thread of the shim's)"};
	double pr_pct[3] = {0, 0, 0};
	for (int m = 0; m < 3; m++) {
		shim_extra_env = m == 1 ? "GAIA_RELEASE_MS=100" : NULL;
		double pr_k[PWRITE_REPS], pr_s[PWRITE_REPS];
		int pr_unmanaged = 0;
		for (int r = 0; r < PWRITE_REPS; r++) {
			for (int k = 0; k < 2; k++) {
				bool shim = (k == 0) == (r % 2 == 1);
				double v[2];
				run_worker_child(pread_modes[m], data_path, shim, v, 2);
				(shim ? pr_s : pr_k)[r] = v[0];
				if (shim && v[1] < 0.5)
					pr_unmanaged++;
			}
		}
		double prk_ns = median(pr_k, PWRITE_REPS) / PREAD_COUNT;
		double prs_ns = median(pr_s, PWRITE_REPS) / PREAD_COUNT;
		pr_pct[m] = (prs_ns / prk_ns - 1.0) * 100.0;
		printf("%d pread()s of 4 KiB at random offsets of the unmanaged file, %s "
		       "(median of %d)\n  without shim %.0f ns each, with shim %.0f ns each: "
		       "overhead %.2f%%\n",
		       PREAD_COUNT, pread_what[m], PWRITE_REPS, prk_ns, prs_ns, pr_pct[m]);
		if (pr_unmanaged)
			printf("  WARNING: %d of %d shim runs did not manage their own mapping\n",
			       pr_unmanaged, PWRITE_REPS);
	}
	shim_extra_env = NULL;
	/* What a process's second thread costs each pread, without the shim:
	 * the kernel takes a reference on the file per call only in a
	 * process that shares its descriptor table (fdget), and the shim's
	 * GAIA_RELEASE_MS thread makes a process with a managed mapping one. */
	double th_1[PWRITE_REPS], th_2[PWRITE_REPS];
	for (int r = 0; r < PWRITE_REPS; r++) {
		for (int k = 0; k < 2; k++) {
			bool two = (k == 0) == (r % 2 == 1);
			double v[2];
			run_worker_child(two ? "pread_thread" : "pread", data_path, false, v, 2);
			(two ? th_2 : th_1)[r] = v[0];
		}
	}
	double th1_ns = median(th_1, PWRITE_REPS) / PREAD_COUNT;
	double th2_ns = median(th_2, PWRITE_REPS) / PREAD_COUNT;
	double th_pct = (th2_ns / th1_ns - 1.0) * 100.0;
	printf("the same pread()s without the shim, in a process of one thread and in one with a "
	       "second, idle thread (median of %d)\n  one thread %.0f ns each, two %.0f ns each: "
	       "%.2f%% more\n",
	       PWRITE_REPS, th1_ns, th2_ns, th_pct);
	printf("\n");

	/* The shim's own work per call, without the noise between processes:
	 * in one process under the shim, blocks of calls through the hook and
	 * through libc's function alternate (worker_inproc). */
	const char *inproc_modes[3] = {"pread_inproc", "pread_mapped_inproc", "pwrite_inproc"};
	const char *inproc_what[3] = {
		"pread() of the unmanaged file, in a process with no mapping",
		"pread() of the unmanaged file, in a process with a managed mapping of another file",
		"pwrite() into the managed mapped file"};
	double inproc_pct[3];
	printf("in one process under the shim, the hook against libc's own function (blocks of %d "
	       "calls alternated; median of %d processes)\n",
	       INPROC_BLOCK, PWRITE_REPS);
	for (int m = 0; m < 3; m++) {
		double pct[PWRITE_REPS], hooked[PWRITE_REPS], direct[PWRITE_REPS];
		int unmanaged = 0;
		size_t count = m == 2 ? PWRITE_COUNT : PREAD_COUNT;
		for (int r = 0; r < PWRITE_REPS; r++) {
			double v[3];
			run_worker_child(inproc_modes[m], data_path, true, v, 3);
			pct[r] = (v[0] / v[1] - 1.0) * 100.0;
			hooked[r] = v[0] / (double)count;
			direct[r] = v[1] / (double)count;
			if (v[2] < 0.5)
				unmanaged++;
		}
		inproc_pct[m] = median(pct, PWRITE_REPS);
		printf("  %-84s libc %.0f ns, hook %.0f ns: overhead %.2f%%\n", inproc_what[m],
		       median(direct, PWRITE_REPS), median(hooked, PWRITE_REPS), inproc_pct[m]);
		if (unmanaged)
			printf("  WARNING: %d of %d runs did not manage their mapping\n", unmanaged,
			       PWRITE_REPS);
	}
	printf("\n");

	/* 4. pwrite into a managed file. */
	double pw_k[PWRITE_REPS], pw_s[PWRITE_REPS];
	int pw_unmanaged = 0;
	for (int r = 0; r < PWRITE_REPS; r++) {
		for (int k = 0; k < 2; k++) {
			bool shim = (k == 0) == (r % 2 == 1);
			double v[2];
			run_worker_child("pwrite", data_path, shim, v, 2);
			(shim ? pw_s : pw_k)[r] = v[0];
			if (shim && v[1] < 0.5)
				pw_unmanaged++;
		}
	}
	double pwk_ms = median(pw_k, PWRITE_REPS) / 1e6, pws_ms = median(pw_s, PWRITE_REPS) / 1e6;
	double pw_pct = (pws_ms / pwk_ms - 1.0) * 100.0;
	printf("%d pwrite()s of 4 KiB at random offsets into a mapped 256 MiB file "
	       "(median of %d)\n  without shim %.2f ms (%.2f us each), with shim (managed) "
	       "%.2f ms (%.2f us each): overhead %.2f%%\n",
	       PWRITE_COUNT, PWRITE_REPS, pwk_ms, pwk_ms * 1e3 / PWRITE_COUNT, pws_ms,
	       pws_ms * 1e3 / PWRITE_COUNT, pw_pct);
	if (pw_unmanaged)
		printf("  WARNING: %d of %d shim runs did not manage the mapping\n", pw_unmanaged,
		       PWRITE_REPS);
	printf("\ntotal time %.1f s\n\n", (now_ns() - t_start) / 1e9);

	printf("BENCH seq_touch_vs_kernel_mmap %.2f x\n", sk.total / ss.total);
	printf("BENCH rand_touch_vs_kernel_mmap %.2f x\n", rk.total / rs.total);
	printf("BENCH seq_touch_vs_read_malloc %.2f x\n", rm_ms / ss.total);
	printf("BENCH cpu_release_clean_1g_us %.1f us\n", rel[0] / 1e3);
	printf("BENCH cpu_release_1pct_1g_us %.1f us\n", rel[1] / 1e3);
	printf("BENCH cpu_release_full_1g_us %.1f us\n", rel[2] / 1e3);
	if (!have_fio)
		printf("BENCH unmanaged_io_overhead_pct skipped (fio not installed)\n");
	else if (iops_with > 0)
		printf("BENCH unmanaged_io_overhead_pct %.2f %%\n", fio_pct);
	printf("BENCH unmanaged_pread_overhead_pct %.2f %%\n", pr_pct[0]);
	printf("BENCH unmanaged_pread_in_mapping_process_overhead_pct %.2f %%\n", pr_pct[1]);
	printf("BENCH unmanaged_pread_in_mapping_process_no_release_thread_overhead_pct %.2f %%\n",
	       pr_pct[2]);
	printf("BENCH pread_second_thread_pct %.2f %%\n", th_pct);
	printf("BENCH managed_write_overhead_pct %.2f %%\n", pw_pct);
	printf("BENCH unmanaged_pread_inproc_overhead_pct %.2f %%\n", inproc_pct[0]);
	printf("BENCH unmanaged_pread_in_mapping_process_inproc_overhead_pct %.2f %%\n", inproc_pct[1]);
	printf("BENCH managed_pwrite_inproc_overhead_pct %.2f %%\n", inproc_pct[2]);
	return failures ? 1 : 0;
}
