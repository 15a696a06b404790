/* proc_read — what a program expects: reading /proc and /sys files works
 * the same before and after it hands a mapped file to a kernel, and a
 * descriptor shared by two threads hands out each byte of a regular file
 * exactly once.
 *
 * /proc/self/status, /proc/self/maps, /proc/self/stat and
 * /sys/devices/system/cpu/online report st_size 0 but have content. Each
 * is read, after a launch on a mapped file and a cudaDeviceSynchronize,
 *   - with read() in a loop, 7-byte and 64 KiB buffers, to end of file;
 *   - with one pread() at offset 0;
 *   - with fopen() + fgets();
 * and each must give non-empty content with its markers ("Name:", the
 * mapped file's path, "<pid> (", a digit), the same static lines as before
 * the first CUDA call (cpu/online whole, status's Name: line).
 * Then two threads read() one descriptor of an ordinary, unmapped regular
 * file (each 4-byte word holds its index) until end of file: Linux moves
 * the shared offset atomically per read(), so every word must be returned
 * exactly once.
 */
#include <pthread.h>

#include "isolation.h"

#define MAP_BYTES (4u << 20)
#define BIG (1u << 20)

__global__ void bump(unsigned *w, unsigned long long n)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < n; i += (unsigned long long)gridDim.x * blockDim.x)
		w[i] += 1;
}
SIMGPU_KERNEL(bump);

/* Failures after the launch are all reported, then exit 1. */
static int failures;

#define SOFT_CHECK(cond, ...)                                                           \
	do {                                                                            \
		if (!(cond)) {                                                          \
			fprintf(stderr, "FAIL [%s]: ", (const char *)step);             \
			fprintf(stderr, __VA_ARGS__);                                   \
			fprintf(stderr, "\n");                                          \
			failures++;                                                     \
		}                                                                       \
	} while (0)

struct text {
	char *s;
	size_t n;
};

/* read() in a loop with `chunk`-byte reads until end of file. */
static struct text read_loop(const char *path, size_t chunk)
{
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
	struct text t = { (char *)malloc(BIG + 1), 0 };
	char *buf = (char *)malloc(chunk);
	for (;;) {
		ssize_t r = read(fd, buf, chunk);
		CHECK(r >= 0, "read(%s, %zu bytes) after %zu bytes: %s", path, chunk, t.n, strerror(errno));
		if (r == 0)
			break;
		CHECK(t.n + (size_t)r <= BIG, "%s: more than %u bytes", path, BIG);
		memcpy(t.s + t.n, buf, (size_t)r);
		t.n += (size_t)r;
	}
	t.s[t.n] = 0;
	free(buf);
	close(fd);
	return t;
}

/* One pread() of up to 1 MiB at offset 0. */
static struct text pread_once(const char *path)
{
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
	struct text t = { (char *)malloc(BIG + 1), 0 };
	ssize_t r = pread(fd, t.s, BIG, 0);
	CHECK(r >= 0, "pread(%s, %u bytes, 0): %s", path, BIG, strerror(errno));
	t.n = (size_t)r;
	t.s[t.n] = 0;
	close(fd);
	return t;
}

/* fopen + fgets to end of file. */
static struct text fgets_all(const char *path)
{
	FILE *f = fopen(path, "r");
	CHECK(f != NULL, "fopen %s: %s", path, strerror(errno));
	struct text t = { (char *)malloc(BIG + 1), 0 };
	char line[512];
	while (fgets(line, sizeof(line), f)) {
		size_t l = strlen(line);
		CHECK(t.n + l <= BIG, "%s: more than %u bytes", path, BIG);
		memcpy(t.s + t.n, line, l);
		t.n += l;
	}
	CHECK(!ferror(f), "fgets %s: %s", path, strerror(errno));
	t.s[t.n] = 0;
	fclose(f);
	return t;
}

/* The line of `t` that starts with `prefix`, copied into out ("" if none). */
static void line_of(const struct text *t, const char *prefix, char *out, size_t len)
{
	out[0] = 0;
	for (const char *p = t->s; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (strncmp(p, prefix, strlen(prefix)) == 0) {
			size_t l = strcspn(p, "\n");
			if (l >= len)
				l = len - 1;
			memcpy(out, p, l);
			out[l] = 0;
			return;
		}
	}
}

struct probe {
	const char *path;
	char marker[300];	/* a string the content must contain */
	char head[300];		/* a string the first pread() (one seq_file page) must contain */
	char before[300];	/* the static part as read before any CUDA call */
	const char *static_prefix; /* the line that must not change; NULL: the whole file */
};

static void static_part(const struct probe *p, const struct text *t, char *out, size_t len)
{
	if (p->static_prefix) {
		line_of(t, p->static_prefix, out, len);
	} else {
		snprintf(out, len, "%s", t->s);
	}
}

static void check_text(const struct probe *p, const char *how, const struct text *t, int compare,
		       const char *marker)
{
	if (t->n == 0) {
		SOFT_CHECK(0, "%s read with %s returned 0 bytes (end of file at once); before the first "
			      "launch it had content", p->path, how);
		return;
	}
	SOFT_CHECK(strstr(t->s, marker) != NULL, "%s read with %s (%zu bytes) lacks \"%s\"; it begins: %.200s",
		   p->path, how, t->n, marker, t->s);
	if (compare) {
		char now[300];
		static_part(p, t, now, sizeof(now));
		SOFT_CHECK(strcmp(now, p->before) == 0, "%s read with %s: \"%s\", before the first CUDA call \"%s\"",
			   p->path, how, now, p->before);
	}
}

/* Every way of reading each file; the static part too where it is known. */
static void read_all_ways(struct probe *probes, int n)
{
	for (int i = 0; i < n; i++) {
		struct probe *p = &probes[i];
		struct text t;
		t = read_loop(p->path, 7);
		check_text(p, "read() of 7 bytes in a loop", &t, p->before[0] != 0, p->marker);
		free(t.s);
		t = read_loop(p->path, 64 << 10);
		check_text(p, "read() of 64 KiB in a loop", &t, p->before[0] != 0, p->marker);
		free(t.s);
		t = pread_once(p->path);
		check_text(p, "one pread() at offset 0", &t, p->before[0] != 0, p->head);
		free(t.s);
		t = fgets_all(p->path);
		check_text(p, "fopen()+fgets()", &t, p->before[0] != 0, p->marker);
		free(t.s);
	}
}

/* ---- two threads, one descriptor */

#define SHARED_WORDS (512u << 10) /* 2 MiB file */

static int shared_fd;
static unsigned char seen[SHARED_WORDS]; /* times each word was returned */
static size_t shared_chunk;

static void *shared_reader(void *arg)
{
	(void)arg;
	unsigned *buf = (unsigned *)malloc(shared_chunk);
	for (;;) {
		ssize_t r = read(shared_fd, buf, shared_chunk);
		CHECK(r >= 0, "read of the shared descriptor: %s", strerror(errno));
		if (r == 0)
			break;
		CHECK(r % 4 == 0, "read of %zu bytes of the shared descriptor returned %zd, not whole words "
				  "(a regular file gives full reads until its end)", shared_chunk, r);
		unsigned first = buf[0];
		for (size_t k = 0; k < (size_t)r / 4; k++) {
			CHECK(buf[k] == first + k, "one read() returned words %u.. then %u at +%zu: not one range of "
						   "the file", first, buf[k], k);
			CHECK(buf[k] < SHARED_WORDS, "word %u is past the file", buf[k]);
			__atomic_add_fetch(&seen[buf[k]], 1, __ATOMIC_RELAXED);
		}
	}
	free(buf);
	return NULL;
}

static unsigned char word_byte(size_t i)
{
	unsigned w = (unsigned)(i / 4);
	return (unsigned char)(w >> (8 * (i % 4)));
}

static void two_threads_one_fd(size_t chunk, int round)
{
	char path[256];
	shared_fd = make_file_with((size_t)SHARED_WORDS * 4, word_byte, path);
	unlink(path);
	CHECK(lseek(shared_fd, 0, SEEK_SET) == 0, "lseek: %s", strerror(errno));
	memset(seen, 0, sizeof(seen));
	shared_chunk = chunk;
	pthread_t a, b;
	CHECK(pthread_create(&a, NULL, shared_reader, NULL) == 0, "pthread_create");
	CHECK(pthread_create(&b, NULL, shared_reader, NULL) == 0, "pthread_create");
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	unsigned wrong = 0, first = 0;
	for (unsigned w = 0; w < SHARED_WORDS; w++)
		if (seen[w] != 1 && wrong++ == 0)
			first = w;
	SOFT_CHECK(wrong == 0, "two threads, one descriptor, round %d, %zu-byte reads: %u of %u words were not "
			       "returned exactly once; the first, bytes %u..%u, %d times", round, chunk, wrong,
		   SHARED_WORDS, first * 4, first * 4 + 3, seen[first]);
	close(shared_fd);
}

static char mapped_file[256];
static void remove_mapped_file(void)
{
	unlink(mapped_file);
}

int main(void)
{
	watchdog(60);
	char mapped_path[256];
	step = "reads before any CUDA call";
	int fd = make_file_with(MAP_BYTES, NULL, mapped_path);
	snprintf(mapped_file, sizeof(mapped_file), "%s", mapped_path);
	atexit(remove_mapped_file);

	struct probe probes[4] = {};
	probes[0].path = "/proc/self/status";
	snprintf(probes[0].marker, sizeof(probes[0].marker), "Name:");
	probes[0].static_prefix = "Name:";
	probes[1].path = "/proc/self/maps";
	snprintf(probes[1].marker, sizeof(probes[1].marker), "[stack]");
	probes[1].static_prefix = NULL;
	/* One read of a seq_file gives about a page: its first line is the
	 * lowest mapping (the program itself, or a sanitizer's shadow memory),
	 * whose start address a first pread() must show. */
	{
		int mfd = open("/proc/self/maps", O_RDONLY);
		CHECK(mfd >= 0, "open /proc/self/maps: %s", strerror(errno));
		char first[64] = {0};
		CHECK(read(mfd, first, sizeof(first) - 1) > 0, "read /proc/self/maps: %s", strerror(errno));
		close(mfd);
		char *dash = strchr(first, '-');
		CHECK(dash != NULL, "/proc/self/maps begins: %s", first);
		dash[1] = 0;
		snprintf(probes[1].head, sizeof(probes[1].head), "%s", first);
	}
	probes[2].path = "/proc/self/stat";
	snprintf(probes[2].marker, sizeof(probes[2].marker), "%d (", (int)getpid());
	probes[2].static_prefix = NULL;
	probes[3].path = "/sys/devices/system/cpu/online";
	snprintf(probes[3].marker, sizeof(probes[3].marker), "0");
	probes[3].static_prefix = NULL;

	/* The static parts, as Linux gives them before any CUDA call. */
	for (int i = 0; i < 4; i++)
		if (i != 1)
			memcpy(probes[i].head, probes[i].marker, sizeof(probes[i].head));
	read_all_ways(probes, 4);
	CHECK(failures == 0, "%d reads failed before any CUDA call", failures);
	struct text t = read_loop(probes[0].path, 64 << 10);
	static_part(&probes[0], &t, probes[0].before, sizeof(probes[0].before));
	free(t.s);
	t = read_loop(probes[3].path, 64 << 10);
	static_part(&probes[3], &t, probes[3].before, sizeof(probes[3].before));
	free(t.s);
	CHECK(strpbrk(probes[3].before, "0123456789") != NULL, "cpu/online has no digit: %s", probes[3].before);
	/* maps and stat change between reads: their marker is what must stay. */

	step = "launch on the mapped file";
	unsigned *m = (unsigned *)map_file(fd, MAP_BYTES);
	for (size_t i = 0; i < MAP_BYTES / 4; i++)
		m[i] = (unsigned)i;
	CUDA_OK(cudaSetDevice(0));
	SIMGPU_LAUNCH(bump, 64, 128, 0, 0)(m, (unsigned long long)(MAP_BYTES / 4));
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	CHECK(m[12345] == 12346, "the kernel's result: word 12345 is %u, want 12346", m[12345]);

	step = "reads after the launch";
	snprintf(probes[1].marker, sizeof(probes[1].marker), "%s", mapped_path);
	read_all_ways(probes, 4);

	step = "two threads reading one descriptor";
	for (int round = 0; round < 10; round++) {
		two_threads_one_fd(4096, round);
		two_threads_one_fd(1000, round);
	}
	step = "end";
	CHECK(failures == 0, "%d of the reads above differ from what Linux gives", failures);

	munmap(m, MAP_BYTES);
	close(fd);
	printf("ok proc_read\n");
	return 0;
}
