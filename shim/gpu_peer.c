/* Peer caching (DESIGN §3.4): a CPU read of a managed file's pages that
 * the page cache no longer holds is served from a device whose copy of
 * them is current, instead of from storage.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend_cuda.h"
#include "gpu_mapping.h"
#include "mapping_internal.h"
#include "readahead.h"
#include "stats.h"

#define PG GAIA_PAGE

/* What a read took from a device beyond what it asked for (GAIA_READAHEAD_KB
 * the first window, doubled by sequential reads up to 16 times that,
 * halved by random ones): the next reads are served from it while its
 * pages stay current there, out of the page cache, and at the version
 * they had when fetched. One per mapping, under mapping_lock. */
struct peer_cache {
	struct readahead ra;
	uint8_t *buf;
	uint32_t *ver;
	uint64_t capacity, first, npages;
	int dev;
};

#define PEER_MAX_WINDOW_FACTOR 16

void gpu_peer_enable(void)
{
	__atomic_store_n(&gaia_peer_reads, true, __ATOMIC_RELAXED);
}

/* Device d holds the current bytes of page p: its version is the newest
 * and no kernel of an open epoch may have changed them since. */
static int current_holder(const struct gaia_mapping *m, uint64_t p)
{
	uint32_t newest = tsvt_newest(&m->engine.tsvt, p);
	for (int d = 0; d < TSVT_MAX_DEVICES; d++) {
		if (m->replicas[d] && !m->engine.epoch_open[d] &&
		    tsvt_version(&m->engine.tsvt, TSVT_DEV(d), p) == newest &&
		    !tsvt_is_stale(&m->engine.tsvt, d, p))
			return d;
	}
	return -1;
}

/* Page p (resident: mincore's bit for it) may come from device d: out of
 * the page cache, still mapped, and current there. */
static bool serves(const struct gaia_mapping *m, unsigned char resident, uint64_t p, int d)
{
	return !(resident & 1) && range_set_contains(&m->engine.live, p) && current_holder(m, p) == d;
}

/* Pages of m from p on (at most n) that a read should take from device d:
 * not in the page cache (mincore on the program's mapping: nothing is read
 * to find out) and current on d. Returns how many such pages start at p
 * (all on one device, *dev), or 0 and in *kernel_pages how many pages from
 * p the kernel should read instead. */
static uint64_t peer_run(const struct gaia_mapping *m, uint64_t p, uint64_t n, int *dev,
			 uint64_t *kernel_pages)
{
	unsigned char vec[256];
	uint64_t n0 = n < sizeof(vec) ? n : sizeof(vec);
	*kernel_pages = n0;
	if (REAL(mincore)((void *)(m->start + p * PG), n0 * PG, vec))
		return 0;
	uint64_t i = 0;
	for (; i < n0; i++) {
		if (!(vec[i] & 1) && range_set_contains(&m->engine.live, p + i) &&
		    (*dev = current_holder(m, p + i)) >= 0)
			break;
	}
	if (i > 0) {
		*kernel_pages = i;
		return 0;
	}
	/* The run the device serves, looked at 256 pages at a time: no more
	 * is asked of mincore than what may come from the device. */
	uint64_t run = 0;
	for (uint64_t at = 0; at < n;) {
		uint64_t k = n - at < sizeof(vec) ? n - at : sizeof(vec);
		if (at && REAL(mincore)((void *)(m->start + (p + at) * PG), k * PG, vec))
			break;
		uint64_t j = 0;
		while (j < k && serves(m, vec[j], p + at + j, *dev))
			j++;
		run += j;
		if (j < k)
			break;
		at += k;
	}
	return run;
}

/* Pages from p on (at most n) the cache may serve: fetched, still out of
 * the page cache, still current on the device it came from, at the
 * version it had then. */
static uint64_t cached_run(const struct gaia_mapping *m, const struct peer_cache *c, uint64_t p, uint64_t n)
{
	if (!c || !c->npages || p < c->first || p >= c->first + c->npages)
		return 0;
	if (n > c->first + c->npages - p)
		n = c->first + c->npages - p;
	unsigned char vec[256];
	if (n > sizeof(vec))
		n = sizeof(vec);
	if (REAL(mincore)((void *)(m->start + p * PG), n * PG, vec))
		return 0;
	uint64_t run = 0;
	while (run < n && serves(m, vec[run], p + run, c->dev) &&
	       tsvt_newest(&m->engine.tsvt, p + run) == c->ver[p + run - c->first])
		run++;
	return run;
}

static struct peer_cache *cache_of(struct gaia_mapping *m)
{
	if (!m->peer) {
		struct peer_cache *c = calloc(1, sizeof(*c));
		if (!c)
			return NULL;
		uint32_t kb = (uint32_t)gaia_config()->readahead_kb;
		uint64_t max = (uint64_t)kb * PEER_MAX_WINDOW_FACTOR;
		readahead_init(&c->ra, kb, max > 1048576 ? 1048576 : (uint32_t)max);
		m->peer = c;
	}
	return m->peer;
}

/* Room for n pages in the cache (its bytes are forgotten). */
static bool cache_room(struct peer_cache *c, uint64_t n)
{
	c->npages = 0;
	if (n <= c->capacity)
		return true;
	uint8_t *b = malloc(n * PG);
	uint32_t *v = malloc(n * sizeof(*v));
	if (!b || !v) {
		free(b);
		free(v);
		return false;
	}
	free(c->buf);
	free(c->ver);
	c->buf = b;
	c->ver = v;
	c->capacity = n;
	return true;
}

void gpu_peer_forget(struct gaia_mapping *m)
{
	struct peer_cache *c = m->peer;
	if (!c)
		return;
	free(c->buf);
	free(c->ver);
	free(c);
	m->peer = NULL;
}

size_t gpu_peer_read(const struct stat *st, void *buf, size_t len, off_t offset, size_t *kernel_bytes)
{
	dev_t dev = st->st_dev;
	ino_t ino = st->st_ino;
	size_t served = 0;
	*kernel_bytes = len;
	mapping_lock_take();
	for (struct gaia_mapping *m = mappings; m; m = m->next) {
		if (m->dev != dev || m->ino != ino || (uint64_t)offset < m->offset ||
		    (uint64_t)offset >= m->offset + m->len || !gpu_mapping_any_replica(m) || !m->sums)
			continue;
		/* A writer not under the shim may have changed the file since the
		 * devices' copies were checked: only an unchanged file is served. */
		if (!page_sums_current_stat(m->sums, st))
			break;
		uint64_t rel = (uint64_t)offset - m->offset, p = rel / PG;
		uint64_t want_end = (rel + len + PG - 1) / PG;
		if (want_end > m->len / PG)
			want_end = m->len / PG;
		size_t skip = rel - p * PG;
		struct peer_cache *c = cache_of(m);
		uint64_t hit = cached_run(m, c, p, want_end - p);
		if (hit) {
			served = hit * PG - skip < len ? hit * PG - skip : len;
			memcpy(buf, c->buf + (p - c->first) * PG + skip, served);
			stats_add(GAIA_STAT_readahead_hits, (skip + served + PG - 1) / PG);
			break;
		}
		/* A miss: the window (from p) decides how much comes along. A
		 * read larger than the largest window takes it in parts (the
		 * caller asks again for the rest). */
		uint64_t total = m->len / PG, first = p, want = want_end - p, window = want;
		uint64_t most = c ? c->ra.max_pages : 256;
		if (want > most)
			want = most;
		if (c)
			window = readahead_on_access(&c->ra, p, total, &first);
		if (window < want)
			window = want;
		int d = -1;
		uint64_t kernel_pages = 0;
		uint64_t npages = peer_run(m, p, window, &d, &kernel_pages);
		if (!npages) {
			size_t k = kernel_pages * PG - skip;
			*kernel_bytes = k < len ? k : len;
			break;
		}
		if (!c || !cache_room(c, npages))
			c = NULL, npages = npages < want ? npages : want;
		uint8_t *stage = c ? c->buf : malloc(npages * PG);
		if (!stage)
			break;
		if (cuda_device_ops.download(m->replicas[d], DEVICE_REPLICA, p, npages, stage) == 0) {
			uint64_t asked = npages < want ? npages : want;
			served = asked * PG - skip < len ? asked * PG - skip : len;
			memcpy(buf, stage + skip, served);
			if (c) {
				for (uint64_t i = 0; i < npages; i++)
					c->ver[i] = tsvt_newest(&m->engine.tsvt, p + i);
				c->first = p;
				c->npages = npages;
				c->dev = d;
				/* What came is the window: a read at its end is
				 * the next sequential one, whatever the policy
				 * handed out. */
				c->ra.window_first = p;
				c->ra.next_page = p + npages;
				stats_add(GAIA_STAT_readahead_pages, npages - asked);
			}
		}
		if (!c)
			free(stage);
		break;
	}
	mapping_lock_give();
	return served;
}
