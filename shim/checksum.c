/* Pages changed by writers that do not run under the shim (DESIGN §1
 * "Processes"): they publish nothing, so a mapping learns of them from the
 * file's change time and per-page checksums. XXH3 (64-bit) of every page of
 * the mapping is kept; when the file's mtime or ctime moved since the last
 * look, the pages are read again (pread through the shim's own descriptor,
 * so the application's page tables are untouched) and those whose checksum
 * differs are reported. The first look only records: replicas date from
 * an acquire, so only changes after one matter. The file's clock ticks
 * coarsely (a few ms, whole seconds on some file systems): times recorded
 * before the clock passed the file's change time are not trusted
 * (times_settled), and the shim's own stores into a page set that page's
 * checksum from the bytes stored (page_sums_set), so another writer's
 * change after them is still news.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "shim.h"

#define CHUNK_PAGES 64

struct page_sums {
	uint64_t *sums;
	uint64_t npages;
	struct timespec mtime, ctime;
	uint64_t pages_read; /* by every look so far */
	bool ready;
};

struct page_sums *page_sums_new(uint64_t npages)
{
	struct page_sums *s = calloc(1, sizeof(*s));
	if (s && !(s->sums = calloc(npages ? npages : 1, sizeof(uint64_t)))) {
		free(s);
		return NULL;
	}
	if (s)
		s->npages = npages;
	return s;
}

void page_sums_free(struct page_sums *s)
{
	if (s)
		free(s->sums);
	free(s);
}

static bool same_time(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

static bool after(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec > b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec > b->tv_nsec);
}

/* Whether the times a look recorded can be trusted: a write in the same
 * tick of the file clock as the file's change time would leave the times
 * as they are. Every write sets the change time to the clock (no call can
 * set it otherwise); once the clock, read before the look began, is past
 * it, any later write moves it. A file system keeping whole seconds (no
 * nanoseconds in either time) ticks by up to 2 s. A change time far ahead
 * of the clock (a server's clock) is trusted: otherwise every look would
 * read the file whole. */
static bool times_settled(const struct timespec *start, const struct timespec *ctime)
{
	struct timespec limit = *ctime;
	if (ctime->tv_nsec == 0)
		limit.tv_sec += 2;
	if (ctime->tv_sec > start->tv_sec + 2)
		return true;
	return after(start, &limit);
}

int page_sums_refresh(struct page_sums *s, int fd, uint64_t file_offset,
		      bool (*wanted)(uint64_t page, void *arg),
		      void (*changed)(uint64_t page, void *arg), void *arg)
{
	struct stat st;
	struct timespec start;
	bool clock_ok = clock_gettime(CLOCK_REALTIME_COARSE, &start) == 0;
	if (fstat(fd, &st))
		return -errno;
	if (s->ready && same_time(&st.st_mtim, &s->mtime) && same_time(&st.st_ctim, &s->ctime))
		return 0;
	/* Times first: a write racing this pass moves them again, and the
	 * next look reads its pages once more. */
	s->mtime = st.st_mtim;
	s->ctime = st.st_ctim;
	unsigned char *buf = malloc(CHUNK_PAGES * GAIA_PAGE);
	if (!buf)
		return -ENOMEM;
	int reported = 0;
	for (uint64_t first = 0; first < s->npages; first += CHUNK_PAGES) {
		uint64_t n = s->npages - first < CHUNK_PAGES ? s->npages - first : CHUNK_PAGES;
		size_t want = n * GAIA_PAGE, got = 0;
		/* A short read is not the end of the file: only 0 is. */
		while (got < want) {
			ssize_t r = pread(fd, buf + got, want - got,
					  (off_t)(file_offset + first * GAIA_PAGE + got));
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				int err = errno;
				/* Not current: the next call reads everything again. */
				s->mtime.tv_nsec = -1;
				free(buf);
				return -err;
			}
			if (r == 0)
				break;
			got += (size_t)r;
		}
		if (got < want) /* past the end of the file: zeros */
			memset(buf + got, 0, want - got);
		s->pages_read += n;
		for (uint64_t i = 0; i < n; i++) {
			uint64_t p = first + i;
			if (wanted && !wanted(p, arg))
				continue;
			uint64_t sum = XXH3_64bits(buf + i * GAIA_PAGE, GAIA_PAGE);
			if (s->ready && changed && sum != s->sums[p]) {
				changed(p, arg);
				reported++;
			}
			s->sums[p] = sum;
		}
	}
	free(buf);
	s->ready = true;
	if (!clock_ok || !times_settled(&start, &st.st_ctim))
		s->mtime.tv_nsec = -1; /* the next look reads the pages again */
	return reported;
}

void page_sums_set(struct page_sums *s, uint64_t first, uint64_t n, const unsigned char *bytes)
{
	if (!s || !s->ready)
		return; /* the first pass records everything */
	for (uint64_t i = 0; i < n && first + i < s->npages; i++)
		s->sums[first + i] = XXH3_64bits(bytes + i * GAIA_PAGE, GAIA_PAGE);
}

bool page_sums_same(const struct page_sums *s, uint64_t page, const unsigned char *bytes)
{
	return !s || !s->ready || page >= s->npages || s->sums[page] == XXH3_64bits(bytes, GAIA_PAGE);
}

bool page_sums_ready(const struct page_sums *s)
{
	return s && s->ready;
}

uint64_t page_sums_pages_read(const struct page_sums *s)
{
	return s ? s->pages_read : 0;
}

void page_sums_untrust(struct page_sums *s)
{
	if (s)
		s->mtime.tv_nsec = -1;
}

bool page_sums_current_stat(const struct page_sums *s, const struct stat *st)
{
	return s->ready && same_time(&st->st_mtim, &s->mtime) && same_time(&st->st_ctim, &s->ctime);
}

bool page_sums_current(struct page_sums *s, int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 && page_sums_current_stat(s, &st);
}
