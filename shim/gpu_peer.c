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

#define PG GAIA_PAGE

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

/* Pages of m from p on (at most n) that a read should take from device d:
 * not in the page cache (mincore on the program's mapping: nothing is read
 * to find out) and current on d. Returns how many such pages start at p
 * (all on one device, *dev), or 0 and in *kernel_pages how many pages from
 * p the kernel should read instead. */
static uint64_t peer_run(const struct gaia_mapping *m, uint64_t p, uint64_t n, int *dev,
			 uint64_t *kernel_pages)
{
	unsigned char vec[256];
	if (n > sizeof(vec))
		n = sizeof(vec);
	*kernel_pages = n;
	if (REAL(mincore)((void *)(m->start + p * PG), n * PG, vec))
		return 0;
	uint64_t i = 0;
	for (; i < n; i++) {
		if (!(vec[i] & 1) && range_set_contains(&m->engine.live, p + i) &&
		    (*dev = current_holder(m, p + i)) >= 0)
			break;
	}
	if (i > 0) {
		*kernel_pages = i;
		return 0;
	}
	uint64_t run = 1;
	while (run < n && !(vec[run] & 1) && range_set_contains(&m->engine.live, p + run) &&
	       current_holder(m, p + run) == *dev)
		run++;
	return run;
}

size_t gpu_peer_read(dev_t dev, ino_t ino, int fd, void *buf, size_t len, off_t offset,
		     size_t *kernel_bytes)
{
	size_t served = 0;
	*kernel_bytes = len;
	mapping_lock_take();
	for (struct gaia_mapping *m = mappings; m; m = m->next) {
		if (m->dev != dev || m->ino != ino || (uint64_t)offset < m->offset ||
		    (uint64_t)offset >= m->offset + m->len || !gpu_mapping_any_replica(m) || !m->sums)
			continue;
		/* A writer not under the shim may have changed the file since the
		 * devices' copies were checked: only an unchanged file is served. */
		if (!page_sums_current(m->sums, fd))
			break;
		uint64_t rel = (uint64_t)offset - m->offset, p = rel / PG;
		uint64_t want_end = (rel + len + PG - 1) / PG;
		if (want_end > m->len / PG)
			want_end = m->len / PG;
		int d = -1;
		uint64_t kernel_pages = 0;
		uint64_t npages = peer_run(m, p, want_end - p, &d, &kernel_pages);
		size_t skip = rel - p * PG;
		if (!npages) {
			size_t k = kernel_pages * PG - skip;
			*kernel_bytes = k < len ? k : len;
			break;
		}
		uint8_t *stage = malloc(npages * PG);
		if (!stage)
			break;
		if (cuda_device_ops.download(m->replicas[d], DEVICE_REPLICA, p, npages, stage) == 0) {
			served = npages * PG - skip < len ? npages * PG - skip : len;
			memcpy(buf, stage + skip, served);
		}
		free(stage);
		break;
	}
	mapping_lock_give();
	return served;
}
