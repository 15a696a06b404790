/* diff_io: the shim must not change what a program reads (DESIGN §1.5, §1.6).
 *
 * A seeded random program of file-mapping and file I/O calls -- mmap
 * (MAP_SHARED and MAP_PRIVATE), stores and loads through the mappings,
 * munmap (whole, head, tail, middle), msync, mremap (grow, shrink, move),
 * read, write, pread, pwrite, lseek, ftruncate, fstat, and the shim's own
 * gaia_mrelease/gaia_macquire where present -- over 3 files and up to 8
 * live mappings, 2-64 KiB per operation. Every byte it reads (loads,
 * read/pread results, and at the end each file's contents, before and
 * after its mappings go away) goes into a running XXH3 hash, printed as
 *     diff_io seed=S ops=N hash=H
 * The kernel defines every one of these results, so a run under
 * LD_PRELOAD=libgaia.so must print the same line as a run without it.
 *
 * The program never makes a call whose result depends on timing or
 * placement: it touches only bytes below EOF (no SIGBUS, no post-EOF tail
 * bytes, whose zeroing depends on write-back), never shrinks a file below
 * the end of a live mapping of it, never hashes an address, and every
 * thread owns its files, descriptors and mappings (the shared file of the
 * threaded variant is written in disjoint per-thread regions).
 *
 * Modes:
 *   diff_io [--threads T] [--trace] SEED OPS
 *       run once, print the line (and with --trace one line per op)
 *   diff_io --compare LIBGAIA [--threads T] SEED OPS
 *       run itself once without LD_PRELOAD and once with
 *       LD_PRELOAD=LIBGAIA, both traced; exit 0 when the lines agree, 1
 *       when they differ (naming the first op, file and offset where the
 *       hashes part) or either run crashes or fails.
 * DIFF_IO_SEED=S replaces SEED in both modes (replay).
 * Exit: 0 pass, 1 fail.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <gaia.h>

#define PAGE 4096ul
#define NFILES 3
#define NMAPS 8
#define MAX_FILE (1ul << 20)        /* no file grows past 1 MiB */
#define INITIAL_MAX (256ul << 10)   /* initial sizes: 0..256 KiB */
#define IO_MIN 2048ul               /* bytes per operation: 2..64 KiB */
#define IO_MAX 65536ul
#define MAP_MAX (256ul << 10)       /* mremap grows a mapping up to this */
#define POOL_SIZE (512ul << 10)     /* random bytes that stores/writes copy */
#define SHARED_REGION (64ul << 10)  /* per-thread region of the shared file */
#define MAX_THREADS 8

struct dfile {
	int fd;
	off_t size; /* what the program did to it; fstat must agree */
	char path[PATH_MAX];
};

struct dmap {
	bool live, shared;
	int file;
	unsigned char *addr;
	size_t len; /* page multiple */
	off_t off;  /* file offset of addr */
};

/* One op stream: a thread's private state. */
struct stream {
	int tid;
	unsigned long op, nops;
	unsigned short rng[3];
	XXH3_state_t *hash;
	struct dfile files[NFILES];
	struct dmap maps[NMAPS];
	unsigned char *buf;
	/* threaded variant: this thread's region of the shared file */
	int shared_fd;
	off_t shared_base;
	unsigned char *shared_map;
};

static uint64_t g_seed;
static const char *g_dir;
static bool g_trace;
static const unsigned char *g_pool;
static int (*g_mrelease)(void *, size_t, int);
static int (*g_macquire)(void *, size_t, int);

static void die(const struct stream *s, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die(const struct stream *s, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fflush(stdout);
	if (s)
		fprintf(stderr, "diff_io: FAIL seed=%" PRIu64 " thread=%d op=%lu: %s\n", g_seed, s->tid,
			s->op, msg);
	else
		fprintf(stderr, "diff_io: FAIL seed=%" PRIu64 ": %s\n", g_seed, msg);
	exit(1);
}

static uint32_t rnd(struct stream *s, uint32_t n)
{
	return n ? (uint32_t)jrand48(s->rng) % n : 0;
}

static size_t io_len(struct stream *s)
{
	return IO_MIN + rnd(s, (uint32_t)(IO_MAX - IO_MIN + 1));
}

static const unsigned char *pool_bytes(struct stream *s)
{
	return g_pool + rnd(s, (uint32_t)(POOL_SIZE - IO_MAX));
}

static void hash_bytes(struct stream *s, const void *p, size_t n)
{
	XXH3_64bits_update(s->hash, p, n);
}

static void hash_u64(struct stream *s, uint64_t v)
{
	XXH3_64bits_update(s->hash, &v, sizeof(v));
}

static void trace(struct stream *s, const char *what, int file, long long off, long long len)
{
	if (g_trace)
		printf("t%d op=%lu %s file=%d off=%lld len=%lld hash=%016llx\n", s->tid, s->op, what, file,
		       off, len, (unsigned long long)XXH3_64bits_digest(s->hash));
}

static int live_count(const struct stream *s)
{
	int n = 0;

	for (int i = 0; i < NMAPS; i++)
		n += s->maps[i].live;
	return n;
}

static int free_slot(const struct stream *s)
{
	for (int i = 0; i < NMAPS; i++)
		if (!s->maps[i].live)
			return i;
	return -1;
}

/* A live mapping chosen at random, or NULL when there is none. */
static struct dmap *pick_map(struct stream *s)
{
	int n = live_count(s);
	int k;

	if (n == 0)
		return NULL;
	k = (int)rnd(s, (uint32_t)n);
	for (int i = 0; i < NMAPS; i++)
		if (s->maps[i].live && k-- == 0)
			return &s->maps[i];
	return NULL;
}

/* Bytes of m that lie below EOF: [0, result) from m->addr. Only these are
 * touched: a page past EOF raises SIGBUS, and the bytes after EOF in the
 * last page are zeroed by the kernel at times that depend on write-back. */
static size_t accessible(const struct stream *s, const struct dmap *m)
{
	off_t size = s->files[m->file].size;

	if (size <= m->off)
		return 0;
	return (size_t)(size - m->off) < m->len ? (size_t)(size - m->off) : m->len;
}

/* A random byte range [*delta, *delta + *n) of m's accessible bytes. */
static bool pick_range(struct stream *s, const struct dmap *m, size_t *delta, size_t *n)
{
	size_t avail = accessible(s, m);
	size_t want = io_len(s);

	*delta = rnd(s, (uint32_t)(avail ? avail : 1));
	if (avail == 0)
		return false;
	*n = want < avail - *delta ? want : avail - *delta;
	return true;
}

/* The lowest size file f may be truncated to: the end of its live mappings. */
static off_t mapped_end(const struct stream *s, int f)
{
	off_t end = 0;

	for (int i = 0; i < NMAPS; i++)
		if (s->maps[i].live && s->maps[i].file == f && s->maps[i].off + (off_t)s->maps[i].len > end)
			end = s->maps[i].off + (off_t)s->maps[i].len;
	return end;
}

static void grew(struct stream *s, int f, off_t end)
{
	if (end > s->files[f].size)
		s->files[f].size = end;
}

/* --- the operations ------------------------------------------------------- */

static void op_munmap(struct stream *s);

static void op_mmap(struct stream *s)
{
	int slot = free_slot(s);
	int f = (int)rnd(s, NFILES);
	bool shared = rnd(s, 5) < 3;
	off_t off = (off_t)rnd(s, (uint32_t)(MAX_FILE / PAGE)) * (off_t)PAGE;
	size_t len = io_len(s); /* not always a page multiple: the kernel rounds */
	void *p;

	if (slot < 0) {
		op_munmap(s);
		return;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, shared ? MAP_SHARED : MAP_PRIVATE, s->files[f].fd, off);
	if (p == MAP_FAILED)
		die(s, "mmap(file %d, off %lld, len %zu, %s): %s", f, (long long)off, len,
		    shared ? "MAP_SHARED" : "MAP_PRIVATE", strerror(errno));
	s->maps[slot] = (struct dmap){ .live = true, .shared = shared, .file = f, .addr = p,
				       .len = (len + PAGE - 1) & ~(PAGE - 1), .off = off };
	trace(s, shared ? "mmap_shared" : "mmap_private", f, off, (long long)len);
}

static void op_munmap(struct stream *s)
{
	struct dmap *m = pick_map(s);
	uint32_t mode = rnd(s, 4);
	size_t pages, a, b;
	int slot;

	if (!m) {
		trace(s, "munmap_none", -1, 0, 0);
		return;
	}
	pages = m->len / PAGE;
	a = 1 + rnd(s, (uint32_t)(pages > 1 ? pages - 1 : 1));
	b = a + 1 + rnd(s, (uint32_t)(pages > a + 1 ? pages - a - 1 : 1));
	slot = free_slot(s);
	if (pages < 2)
		mode = 0;
	if (mode == 3 && (pages < 3 || b >= pages || slot < 0))
		mode = 0;
	switch (mode) {
	case 0: /* whole */
		trace(s, "munmap_whole", m->file, m->off, (long long)m->len);
		if (munmap(m->addr, m->len))
			die(s, "munmap whole: %s", strerror(errno));
		m->live = false;
		break;
	case 1: /* head: pages [0, a) */
		trace(s, "munmap_head", m->file, m->off, (long long)(a * PAGE));
		if (munmap(m->addr, a * PAGE))
			die(s, "munmap head: %s", strerror(errno));
		m->addr += a * PAGE;
		m->off += (off_t)(a * PAGE);
		m->len -= a * PAGE;
		break;
	case 2: /* tail: pages [a, pages) */
		trace(s, "munmap_tail", m->file, m->off + (off_t)(a * PAGE), (long long)(m->len - a * PAGE));
		if (munmap(m->addr + a * PAGE, m->len - a * PAGE))
			die(s, "munmap tail: %s", strerror(errno));
		m->len = a * PAGE;
		break;
	default: /* middle: pages [a, b), leaving [0, a) and [b, pages) */
		trace(s, "munmap_middle", m->file, m->off + (off_t)(a * PAGE), (long long)((b - a) * PAGE));
		if (munmap(m->addr + a * PAGE, (b - a) * PAGE))
			die(s, "munmap middle: %s", strerror(errno));
		s->maps[slot] = *m;
		s->maps[slot].addr = m->addr + b * PAGE;
		s->maps[slot].off = m->off + (off_t)(b * PAGE);
		s->maps[slot].len = m->len - b * PAGE;
		m->len = a * PAGE;
		break;
	}
}

static void op_store(struct stream *s)
{
	struct dmap *m = pick_map(s);
	uint32_t mode = rnd(s, 4);
	const unsigned char *src = pool_bytes(s);
	unsigned char value = (unsigned char)rnd(s, 256);
	size_t delta, n;

	if (!m || !pick_range(s, m, &delta, &n)) {
		trace(s, "store_none", -1, 0, 0);
		return;
	}
	switch (mode) {
	case 0:
		memcpy(m->addr + delta, src, n);
		break;
	case 1:
		memset(m->addr + delta, value, n);
		break;
	case 2: /* scattered single bytes */
		for (size_t k = 0, count = 1 + rnd(s, 64); k < count; k++)
			m->addr[delta + rnd(s, (uint32_t)n)] = (unsigned char)rnd(s, 256);
		break;
	default: { /* the same values again: still stores */
		volatile unsigned char *v = m->addr + delta;
		for (size_t k = 0; k < n; k += 64)
			v[k] = v[k];
		break;
	}
	}
	trace(s, m->shared ? "store_shared" : "store_private", m->file, m->off + (off_t)delta, (long long)n);
}

static void op_load(struct stream *s)
{
	struct dmap *m = pick_map(s);
	size_t delta, n;

	if (!m || !pick_range(s, m, &delta, &n)) {
		trace(s, "load_none", -1, 0, 0);
		return;
	}
#ifdef TEST_SELF_CHECK
	/* Proves the comparison can fail: under LD_PRELOAD, once, halfway,
	 * corrupt the first byte this load is about to read. */
	{
		static bool flipped;
		if (!flipped && s->op >= s->nops / 2 && getenv("LD_PRELOAD")) {
			m->addr[delta] ^= 0x01;
			flipped = true;
		}
	}
#endif
	hash_bytes(s, m->addr + delta, n);
	trace(s, m->shared ? "load_shared" : "load_private", m->file, m->off + (off_t)delta, (long long)n);
}

static void op_msync(struct stream *s)
{
	struct dmap *m = pick_map(s);
	size_t pages, a, b;
	int flags = rnd(s, 2) ? MS_SYNC : MS_ASYNC;

	if (!m) {
		trace(s, "msync_none", -1, 0, 0);
		return;
	}
	pages = m->len / PAGE;
	a = rnd(s, (uint32_t)pages);
	b = a + 1 + rnd(s, (uint32_t)(pages - a));
	trace(s, flags == MS_SYNC ? "msync_sync" : "msync_async", m->file, m->off + (off_t)(a * PAGE),
	      (long long)((b - a) * PAGE));
	if (msync(m->addr + a * PAGE, (b - a) * PAGE, flags))
		die(s, "msync(file %d, off %lld): %s", m->file, (long long)(m->off + (off_t)(a * PAGE)),
		    strerror(errno));
}

static void op_mremap(struct stream *s)
{
	struct dmap *m = pick_map(s);
	uint32_t mode = rnd(s, 3);
	size_t grow = PAGE * (1 + rnd(s, 16));
	size_t shrink_pages = 1 + rnd(s, 16);
	size_t move_extra = PAGE * rnd(s, 4);
	size_t newlen;
	void *p, *target;

	if (!m) {
		trace(s, "mremap_none", -1, 0, 0);
		return;
	}
	if (mode == 0 && m->len + grow > MAP_MAX)
		mode = 1;
	if (mode == 1 && m->len / PAGE < 2)
		mode = 2;
	switch (mode) {
	case 0:
		newlen = m->len + grow;
		trace(s, "mremap_grow", m->file, m->off, (long long)newlen);
		p = mremap(m->addr, m->len, newlen, MREMAP_MAYMOVE);
		if (p == MAP_FAILED)
			die(s, "mremap grow (file %d, off %lld, %zu -> %zu): %s", m->file, (long long)m->off,
			    m->len, newlen, strerror(errno));
		break;
	case 1:
		if (shrink_pages >= m->len / PAGE)
			shrink_pages = m->len / PAGE - 1;
		newlen = m->len - shrink_pages * PAGE;
		trace(s, "mremap_shrink", m->file, m->off, (long long)newlen);
		p = mremap(m->addr, m->len, newlen, 0);
		if (p != m->addr)
			die(s, "mremap shrink (file %d, off %lld, %zu -> %zu): %s", m->file, (long long)m->off,
			    m->len, newlen, p == MAP_FAILED ? strerror(errno) : "moved");
		break;
	default:
		newlen = m->len + move_extra;
		if (newlen > MAP_MAX)
			newlen = m->len;
		trace(s, "mremap_move", m->file, m->off, (long long)newlen);
		target = mmap(NULL, newlen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (target == MAP_FAILED)
			die(s, "mmap reservation: %s", strerror(errno));
		p = mremap(m->addr, m->len, newlen, MREMAP_MAYMOVE | MREMAP_FIXED, target);
		if (p != target)
			die(s, "mremap move (file %d, off %lld, %zu -> %zu): %s", m->file, (long long)m->off,
			    m->len, newlen, p == MAP_FAILED ? strerror(errno) : "wrong address");
		break;
	}
	m->addr = p;
	m->len = newlen;
}

static void op_read(struct stream *s)
{
	int f = (int)rnd(s, NFILES);
	bool seek = rnd(s, 3) != 0;
	off_t pos = (off_t)rnd(s, (uint32_t)(s->files[f].size + (off_t)IO_MAX));
	size_t n = io_len(s);
	ssize_t r;

	if (seek && lseek(s->files[f].fd, pos, SEEK_SET) != pos)
		die(s, "lseek(file %d, %lld): %s", f, (long long)pos, strerror(errno));
	pos = lseek(s->files[f].fd, 0, SEEK_CUR);
	r = read(s->files[f].fd, s->buf, n);
	if (r < 0)
		die(s, "read(file %d, pos %lld, %zu): %s", f, (long long)pos, n, strerror(errno));
	hash_u64(s, (uint64_t)r);
	hash_bytes(s, s->buf, (size_t)r);
	trace(s, "read", f, pos, r);
}

static void op_pread(struct stream *s)
{
	int f = (int)rnd(s, NFILES);
	off_t pos = (off_t)rnd(s, (uint32_t)(s->files[f].size + (off_t)IO_MAX));
	size_t n = io_len(s);
	ssize_t r = pread(s->files[f].fd, s->buf, n, pos);

	if (r < 0)
		die(s, "pread(file %d, off %lld, %zu): %s", f, (long long)pos, n, strerror(errno));
	hash_u64(s, (uint64_t)r);
	hash_bytes(s, s->buf, (size_t)r);
	trace(s, "pread", f, pos, r);
}

static void op_write(struct stream *s)
{
	int f = (int)rnd(s, NFILES);
	bool seek = rnd(s, 3) != 0;
	off_t pos = (off_t)rnd(s, (uint32_t)(s->files[f].size + (off_t)PAGE));
	size_t n = io_len(s);
	const unsigned char *src = pool_bytes(s);
	off_t cur = lseek(s->files[f].fd, 0, SEEK_CUR);
	ssize_t r;

	if (seek || cur + (off_t)n > (off_t)MAX_FILE) {
		if (pos + (off_t)n > (off_t)MAX_FILE)
			pos = (off_t)(MAX_FILE - n);
		if (lseek(s->files[f].fd, pos, SEEK_SET) != pos)
			die(s, "lseek(file %d, %lld): %s", f, (long long)pos, strerror(errno));
		cur = pos;
	}
	r = write(s->files[f].fd, src, n);
	if (r != (ssize_t)n)
		die(s, "write(file %d, pos %lld, %zu) = %zd: %s", f, (long long)cur, n, r, strerror(errno));
	grew(s, f, cur + (off_t)n);
	trace(s, "write", f, cur, (long long)n);
}

static void op_pwrite(struct stream *s)
{
	int f = (int)rnd(s, NFILES);
	off_t pos = (off_t)rnd(s, (uint32_t)(s->files[f].size + (off_t)PAGE));
	size_t n = io_len(s);
	const unsigned char *src = pool_bytes(s);
	ssize_t r;

	if (pos + (off_t)n > (off_t)MAX_FILE)
		pos = (off_t)(MAX_FILE - n);
	r = pwrite(s->files[f].fd, src, n, pos);
	if (r != (ssize_t)n)
		die(s, "pwrite(file %d, off %lld, %zu) = %zd: %s", f, (long long)pos, n, r, strerror(errno));
	grew(s, f, pos + (off_t)n);
	trace(s, "pwrite", f, pos, (long long)n);
}

static void op_lseek(struct stream *s)
{
	int f = (int)rnd(s, NFILES);
	uint32_t whence = rnd(s, 3);
	uint32_t ahead = rnd(s, 8192);
	uint32_t back = rnd(s, 8192);
	off_t cur = lseek(s->files[f].fd, 0, SEEK_CUR);
	off_t r;

	if (whence == 0)
		r = lseek(s->files[f].fd, (off_t)rnd(s, (uint32_t)(s->files[f].size + 8192)), SEEK_SET);
	else if (whence == 1)
		r = lseek(s->files[f].fd, (off_t)ahead - (back < cur ? (off_t)back : cur), SEEK_CUR);
	else
		r = lseek(s->files[f].fd, (off_t)ahead - (back < s->files[f].size ? (off_t)back : s->files[f].size),
			  SEEK_END);
	if (r < 0)
		die(s, "lseek(file %d, whence %u): %s", f, whence, strerror(errno));
	hash_u64(s, (uint64_t)r);
	trace(s, "lseek", f, r, 0);
}

/* Grows the file, or shrinks it, never below the end of a live mapping of
 * it (a mapped page past EOF would raise SIGBUS). */
static void op_ftruncate(struct stream *s)
{
	int f = (int)rnd(s, NFILES);
	bool shrink = rnd(s, 3) == 0;
	uint32_t r = (uint32_t)jrand48(s->rng);
	off_t size = s->files[f].size;
	off_t low = mapped_end(s, f);

	if (shrink && low < size)
		size = low + (off_t)(r % (uint32_t)(size - low + 1));
	else if (size < (off_t)MAX_FILE)
		size += (off_t)(r % (uint32_t)((off_t)MAX_FILE - size + 1));
	trace(s, shrink ? "ftruncate_shrink" : "ftruncate_grow", f, size, 0);
	if (ftruncate(s->files[f].fd, size))
		die(s, "ftruncate(file %d, %lld): %s", f, (long long)size, strerror(errno));
	s->files[f].size = size;
}

static void op_fstat(struct stream *s)
{
	int f = (int)rnd(s, NFILES);
	struct stat st;

	if (fstat(s->files[f].fd, &st))
		die(s, "fstat(file %d): %s", f, strerror(errno));
	if (st.st_size != s->files[f].size)
		die(s, "file %d: fstat says %lld bytes, the program made it %lld", f, (long long)st.st_size,
		    (long long)s->files[f].size);
	hash_u64(s, (uint64_t)st.st_size);
	trace(s, "fstat", f, st.st_size, 0);
}

/* The shim's explicit calls, where present: they must not change any data. */
static void op_gaia(struct stream *s)
{
	struct dmap *m = pick_map(s);
	bool release = rnd(s, 2);

	if (!m) {
		trace(s, "gaia_none", -1, 0, 0);
		return;
	}
	if (release && g_mrelease)
		(void)g_mrelease(m->addr, m->len, GAIA_CPU);
	else if (!release && g_macquire)
		(void)g_macquire(m->addr, m->len, GAIA_CPU);
	trace(s, release ? "gaia_mrelease" : "gaia_macquire", m->file, m->off, (long long)m->len);
}

/* Threaded variant: this thread's own region of the one shared file. */
static void op_shared(struct stream *s)
{
	uint32_t mode = rnd(s, 4);
	size_t delta = rnd(s, (uint32_t)SHARED_REGION);
	size_t n = io_len(s);
	const unsigned char *src = pool_bytes(s);
	off_t pos;
	ssize_t r;

	if (s->shared_fd < 0) {
		trace(s, "shared_none", -1, 0, 0);
		return;
	}
	if (n > SHARED_REGION - delta)
		n = SHARED_REGION - delta;
	pos = s->shared_base + (off_t)delta;
	switch (mode) {
	case 0:
		r = pwrite(s->shared_fd, src, n, pos);
		if (r != (ssize_t)n)
			die(s, "pwrite(shared file, off %lld, %zu) = %zd: %s", (long long)pos, n, r, strerror(errno));
		trace(s, "shared_pwrite", NFILES, pos, (long long)n);
		break;
	case 1:
		r = pread(s->shared_fd, s->buf, n, pos);
		if (r != (ssize_t)n)
			die(s, "pread(shared file, off %lld, %zu) = %zd: %s", (long long)pos, n, r, strerror(errno));
		hash_bytes(s, s->buf, n);
		trace(s, "shared_pread", NFILES, pos, (long long)n);
		break;
	case 2:
		memcpy(s->shared_map + delta, src, n);
		trace(s, "shared_store", NFILES, pos, (long long)n);
		break;
	default:
		hash_bytes(s, s->shared_map + delta, n);
		trace(s, "shared_load", NFILES, pos, (long long)n);
		break;
	}
}

struct op_kind {
	unsigned weight;
	void (*run)(struct stream *);
};

static const struct op_kind op_kinds[] = {
	{ 8, op_mmap },	 { 4, op_munmap },  { 16, op_store },   { 14, op_load },   { 4, op_msync },
	{ 6, op_mremap }, { 8, op_read },    { 8, op_pread },	 { 8, op_write },   { 8, op_pwrite },
	{ 3, op_lseek },  { 4, op_ftruncate }, { 2, op_fstat }, { 3, op_gaia },    { 8, op_shared },
};

/* --- one stream: setup, the ops, the final contents ------------------------ */

static void hash_file(struct stream *s, int f)
{
	off_t size = s->files[f].size;
	unsigned char *all = malloc((size_t)size + 1);
	ssize_t r;

	if (!all)
		die(s, "out of memory");
	r = pread(s->files[f].fd, all, (size_t)size, 0);
	if (r != size)
		die(s, "final pread(file %d, %lld bytes) = %zd: %s", f, (long long)size, r, strerror(errno));
	hash_u64(s, (uint64_t)size);
	hash_bytes(s, all, (size_t)size);
	free(all);
	trace(s, "final_contents", f, 0, size);
}

static void stream_setup(struct stream *s)
{
	s->hash = XXH3_createState();
	s->buf = malloc(IO_MAX);
	if (!s->hash || !s->buf)
		die(s, "out of memory");
	XXH3_64bits_reset(s->hash);
	for (int f = 0; f < NFILES; f++) {
		struct dfile *d = &s->files[f];
		size_t size = rnd(s, (uint32_t)INITIAL_MAX);

		snprintf(d->path, sizeof(d->path), "%s/t%d_file%d", g_dir, s->tid, f);
		d->fd = open(d->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (d->fd < 0)
			die(s, "open %s: %s", d->path, strerror(errno));
		for (size_t done = 0; done < size;) {
			size_t n = size - done < IO_MAX ? size - done : IO_MAX;
			if (pwrite(d->fd, pool_bytes(s), n, (off_t)done) != (ssize_t)n)
				die(s, "initial pwrite %s: %s", d->path, strerror(errno));
			done += n;
		}
		d->size = (off_t)size;
	}
	if (s->shared_fd >= 0) {
		s->shared_map = mmap(NULL, SHARED_REGION, PROT_READ | PROT_WRITE, MAP_SHARED, s->shared_fd,
				     s->shared_base);
		if (s->shared_map == MAP_FAILED)
			die(s, "mmap shared file region: %s", strerror(errno));
	}
}

static void stream_finish(struct stream *s)
{
	s->op = s->nops;
	for (int f = 0; f < NFILES; f++)
		hash_file(s, f);
	for (int i = 0; i < NMAPS; i++) {
		if (s->maps[i].live && munmap(s->maps[i].addr, s->maps[i].len))
			die(s, "final munmap: %s", strerror(errno));
		s->maps[i].live = false;
	}
	if (s->shared_fd >= 0) {
		hash_bytes(s, s->shared_map, SHARED_REGION);
		if (munmap(s->shared_map, SHARED_REGION))
			die(s, "final munmap of the shared region: %s", strerror(errno));
	}
	/* Again with no mapping left: unmapping must not change the files. */
	for (int f = 0; f < NFILES; f++) {
		hash_file(s, f);
		close(s->files[f].fd);
		unlink(s->files[f].path);
	}
	if (s->shared_fd >= 0) {
		if (pread(s->shared_fd, s->buf, SHARED_REGION, s->shared_base) != (ssize_t)SHARED_REGION)
			die(s, "final pread of the shared region: %s", strerror(errno));
		hash_bytes(s, s->buf, SHARED_REGION);
		trace(s, "final_shared", NFILES, s->shared_base, (long long)SHARED_REGION);
	}
}

static void *stream_run(void *arg)
{
	struct stream *s = arg;
	unsigned total = 0;

	for (size_t k = 0; k < sizeof(op_kinds) / sizeof(op_kinds[0]); k++)
		total += op_kinds[k].weight;
	stream_setup(s);
	for (s->op = 0; s->op < s->nops; s->op++) {
		uint32_t pick = rnd(s, total);
		size_t k = 0;

		while (pick >= op_kinds[k].weight)
			pick -= op_kinds[k++].weight;
		op_kinds[k].run(s);
	}
	stream_finish(s);
	return NULL;
}

static void seed_rng(unsigned short rng[3], uint64_t seed, int tid)
{
	uint64_t x = XXH3_64bits_withSeed(&tid, sizeof(tid), seed);

	rng[0] = (unsigned short)x;
	rng[1] = (unsigned short)(x >> 16);
	rng[2] = (unsigned short)(x >> 32);
}

/* Runs `threads` streams of `nops` ops each (threads == 0: one stream, no
 * shared file) and prints the result line. */
static int run_program(unsigned long nops, int threads)
{
	char tmpl[PATH_MAX];
	const char *tmp = getenv("TMPDIR");
	int nstreams = threads ? threads : 1;
	struct stream *streams = calloc((size_t)nstreams, sizeof(*streams));
	pthread_t tids[MAX_THREADS];
	unsigned char *pool = malloc(POOL_SIZE);
	unsigned short rng[3];
	char shared_path[PATH_MAX + 16];
	int shared_fd = -1;

	if (!streams || !pool)
		die(NULL, "out of memory");
	snprintf(tmpl, sizeof(tmpl), "%s/diff_io.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(tmpl))
		die(NULL, "mkdtemp %s: %s", tmpl, strerror(errno));
	g_dir = tmpl;
	g_mrelease = (int (*)(void *, size_t, int))dlsym(RTLD_DEFAULT, "gaia_mrelease");
	g_macquire = (int (*)(void *, size_t, int))dlsym(RTLD_DEFAULT, "gaia_macquire");
	if (g_trace) {
		setvbuf(stdout, NULL, _IOLBF, 0); /* a crash keeps its last op */
		printf("# gaia=%d\n", g_mrelease != NULL);
	}

	seed_rng(rng, g_seed, -1);
	for (size_t i = 0; i < POOL_SIZE; i += 4) {
		uint32_t v = (uint32_t)jrand48(rng);
		memcpy(pool + i, &v, 4);
	}
	g_pool = pool;

	if (threads) {
		snprintf(shared_path, sizeof(shared_path), "%s/shared", g_dir);
		shared_fd = open(shared_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (shared_fd < 0)
			die(NULL, "open %s: %s", shared_path, strerror(errno));
		for (int t = 0; t < threads; t++)
			if (pwrite(shared_fd, pool + (size_t)t * 4096, SHARED_REGION, (off_t)t * (off_t)SHARED_REGION) !=
			    (ssize_t)SHARED_REGION)
				die(NULL, "pwrite %s: %s", shared_path, strerror(errno));
	}
	for (int t = 0; t < nstreams; t++) {
		struct stream *s = &streams[t];

		s->tid = t;
		s->nops = nops;
		s->shared_fd = shared_fd;
		s->shared_base = (off_t)t * (off_t)SHARED_REGION;
		seed_rng(s->rng, g_seed, t);
	}
	if (threads) {
		for (int t = 0; t < threads; t++)
			if ((errno = pthread_create(&tids[t], NULL, stream_run, &streams[t])))
				die(NULL, "pthread_create: %s", strerror(errno));
		for (int t = 0; t < threads; t++)
			pthread_join(tids[t], NULL);
		close(shared_fd);
		unlink(shared_path);
	} else {
		stream_run(&streams[0]);
	}
	if (rmdir(g_dir))
		die(NULL, "rmdir %s: %s", g_dir, strerror(errno));

	printf("diff_io seed=%" PRIu64 " ops=%lu", g_seed, nops);
	if (threads)
		printf(" threads=%d", threads);
	printf(" hash=");
	for (int t = 0; t < nstreams; t++)
		printf("%s%016llx", t ? "," : "", (unsigned long long)XXH3_64bits_digest(streams[t].hash));
	printf("\n");
	fflush(stdout);
	for (int t = 0; t < nstreams; t++) {
		XXH3_freeState(streams[t].hash);
		free(streams[t].buf);
	}
	free(streams);
	free(pool);
	return 0;
}

/* --- --compare: the program with and without the shim ---------------------- */

struct run_result {
	const char *name;
	char *out; /* everything the run printed on stdout */
	size_t len;
	int status;
};

static void run_child(const char *self, char **argv, const char *preload, const char *tmpdir,
		      struct run_result *res)
{
	int pipefd[2];
	pid_t pid;
	size_t cap = 1 << 20;

	res->out = malloc(cap);
	res->len = 0;
	if (!res->out || pipe2(pipefd, O_CLOEXEC))
		die(NULL, "pipe: %s", strerror(errno));
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		die(NULL, "fork: %s", strerror(errno));
	if (pid == 0) {
		dup2(pipefd[1], STDOUT_FILENO);
		setenv("TMPDIR", tmpdir, 1);
		if (preload)
			setenv("LD_PRELOAD", preload, 1);
		else
			unsetenv("LD_PRELOAD");
		execv(self, argv);
		fprintf(stderr, "diff_io: exec %s: %s\n", self, strerror(errno));
		_exit(127);
	}
	close(pipefd[1]);
	for (;;) {
		ssize_t r;

		if (res->len == cap) {
			cap *= 2;
			res->out = realloc(res->out, cap);
			if (!res->out)
				die(NULL, "out of memory");
		}
		r = read(pipefd[0], res->out + res->len, cap - res->len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		res->len += (size_t)r;
	}
	close(pipefd[0]);
	res->out = realloc(res->out, res->len + 1);
	res->out[res->len] = '\0';
	while (waitpid(pid, &res->status, 0) < 0)
		if (errno != EINTR)
			die(NULL, "waitpid: %s", strerror(errno));
}

/* The next line of `text` at or after *pos that starts with `prefix`;
 * copies it (without the newline) into line. */
static bool next_line(const struct run_result *r, size_t *pos, const char *prefix, char *line, size_t size)
{
	size_t plen = strlen(prefix);

	while (*pos < r->len) {
		const char *start = r->out + *pos;
		const char *nl = strchr(start, '\n');
		size_t n = nl ? (size_t)(nl - start) : strlen(start);

		*pos += n + (nl ? 1 : 0);
		if (n >= plen && !memcmp(start, prefix, plen)) {
			snprintf(line, size, "%.*s", (int)n, start);
			return true;
		}
	}
	return false;
}

static void last_line(const struct run_result *r, const char *prefix, char *line, size_t size)
{
	size_t pos = 0;
	char tmp[512];

	snprintf(line, size, "(none)");
	while (next_line(r, &pos, prefix, tmp, sizeof(tmp)))
		snprintf(line, size, "%s", tmp);
}

static bool run_ok(const struct run_result *r)
{
	char last[512];

	if (WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0)
		return true;
	last_line(r, "t", last, sizeof(last));
	if (WIFSIGNALED(r->status))
		fprintf(stderr, "diff_io: FAIL seed=%" PRIu64 ": the run %s was killed by signal %d (%s); last op traced: %s\n",
			g_seed, r->name, WTERMSIG(r->status), strsignal(WTERMSIG(r->status)), last);
	else
		fprintf(stderr, "diff_io: FAIL seed=%" PRIu64 ": the run %s exited with status %d; last op traced: %s\n",
			g_seed, r->name, WEXITSTATUS(r->status), last);
	return false;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	return remove(path);
}

static int compare(const char *self, const char *libgaia, unsigned long nops, int threads)
{
	char seed_arg[32], ops_arg[32], threads_arg[16];
	char *argv[8];
	int argc = 0;
	struct run_result plain = { .name = "without the shim" }, shim = { .name = "with the shim" };
	char line_plain[512], line_shim[512];
	char tmpdir[PATH_MAX];
	const char *tmp = getenv("TMPDIR");
	size_t pos;
	bool ok;

	/* LIBGAIA is an LD_PRELOAD list: a sanitizer's runtime may come first. */
	for (const char *p = libgaia; *p;) {
		char one[PATH_MAX];
		size_t n = strcspn(p, ":");
		snprintf(one, sizeof(one), "%.*s", (int)n, p);
		if (access(one, R_OK)) {
			fprintf(stderr, "diff_io: FAIL: %s: %s\n", one, strerror(errno));
			return 1;
		}
		p += n + (p[n] == ':');
	}
	if (!getenv("GAIA_MIN_MAP_KB")) /* the mappings are 2..64 KiB: manage them all */
		setenv("GAIA_MIN_MAP_KB", "4", 1);
	snprintf(seed_arg, sizeof(seed_arg), "%" PRIu64, g_seed);
	snprintf(ops_arg, sizeof(ops_arg), "%lu", nops);
	snprintf(threads_arg, sizeof(threads_arg), "%d", threads);
	argv[argc++] = (char *)self;
	argv[argc++] = "--trace";
	if (threads) {
		argv[argc++] = "--threads";
		argv[argc++] = threads_arg;
	}
	argv[argc++] = seed_arg;
	argv[argc++] = ops_arg;
	argv[argc] = NULL;

	/* The runs make their directories in ours, so that what a crashed run
	 * leaves behind is removed too. */
	snprintf(tmpdir, sizeof(tmpdir), "%s/diff_io_compare.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(tmpdir))
		die(NULL, "mkdtemp %s: %s", tmpdir, strerror(errno));
	run_child(self, argv, NULL, tmpdir, &plain);
	run_child(self, argv, libgaia, tmpdir, &shim);
	if (nftw(tmpdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS))
		fprintf(stderr, "diff_io: removing %s: %s\n", tmpdir, strerror(errno));
	ok = run_ok(&plain);
	ok = run_ok(&shim) && ok;
	if (!ok)
		goto out;

	pos = 0;
	if (!next_line(&shim, &pos, "# gaia=", line_shim, sizeof(line_shim)) || strcmp(line_shim, "# gaia=1")) {
		fprintf(stderr, "diff_io: FAIL: under LD_PRELOAD=%s the program found no gaia_mrelease: not the shim?\n",
			libgaia);
		ok = false;
		goto out;
	}
	last_line(&plain, "diff_io ", line_plain, sizeof(line_plain));
	last_line(&shim, "diff_io ", line_shim, sizeof(line_shim));
	if (!strcmp(line_plain, line_shim) && strcmp(line_plain, "(none)")) {
		printf("diff_io: PASS, the same with and without %s: %s\n", libgaia, line_plain);
		goto out;
	}
	ok = false;
	fprintf(stderr, "diff_io: FAIL seed=%" PRIu64 ": the runs differ\n  without the shim: %s\n  with the shim:    %s\n",
		g_seed, line_plain, line_shim);
	/* Name the first op after which the running hashes part, per thread. */
	for (int t = 0; t < (threads ? threads : 1); t++) {
		char prefix[16];
		size_t pp = 0, ps = 0;
		bool more_p, more_s;

		snprintf(prefix, sizeof(prefix), "t%d ", t);
		for (;;) {
			more_p = next_line(&plain, &pp, prefix, line_plain, sizeof(line_plain));
			more_s = next_line(&shim, &ps, prefix, line_shim, sizeof(line_shim));
			if (!more_p && !more_s)
				break;
			if (more_p != more_s || strcmp(line_plain, line_shim)) {
				fprintf(stderr,
					"  thread %d first differs at (op, file, offset, length; hash after the op):\n"
					"    without the shim: %s\n    with the shim:    %s\n",
					t, more_p ? line_plain : "(end)", more_s ? line_shim : "(end)");
				break;
			}
		}
	}
	fprintf(stderr, "  replay: DIFF_IO_SEED=%" PRIu64 " %s --compare %s%s%s %" PRIu64 " %lu\n", g_seed, self,
		libgaia, threads ? " --threads " : "", threads ? threads_arg : "", g_seed, nops);
out:
	free(plain.out);
	free(shim.out);
	return ok ? 0 : 1;
}

static void usage(void)
{
	fprintf(stderr, "usage: diff_io [--threads T] [--trace] SEED OPS\n"
			"       diff_io --compare LIBGAIA [--threads T] SEED OPS\n"
			"DIFF_IO_SEED=S replaces SEED.\n");
	exit(1);
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "compare", required_argument, NULL, 'c' },
		{ "threads", required_argument, NULL, 't' },
		{ "trace", no_argument, NULL, 'v' },
		{ NULL, 0, NULL, 0 },
	};
	const char *libgaia = NULL, *env_seed = getenv("DIFF_IO_SEED");
	unsigned long nops;
	int threads = 0, c;
	char self[PATH_MAX];
	ssize_t n;

	while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (c) {
		case 'c':
			libgaia = optarg;
			break;
		case 't':
			threads = atoi(optarg);
			if (threads < 1 || threads > MAX_THREADS)
				usage();
			break;
		case 'v':
			g_trace = true;
			break;
		default:
			usage();
		}
	}
	if (argc - optind != 2)
		usage();
	g_seed = strtoull(env_seed && *env_seed ? env_seed : argv[optind], NULL, 0);
	nops = strtoul(argv[optind + 1], NULL, 0);
	if (!libgaia)
		return run_program(nops, threads);

	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0)
		die(NULL, "readlink /proc/self/exe: %s", strerror(errno));
	self[n] = '\0';
	return compare(self, libgaia, nops, threads);
}
