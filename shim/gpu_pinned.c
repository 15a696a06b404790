/* Regions kernels read in place (research/gpu_ondemand.md §4, mode Z):
 * the program's own mapping registered with the driver read-only
 * (cuMemHostRegister with CU_MEMHOSTREGISTER_READ_ONLY | DEVICEMAP |
 * PORTABLE), so that a kernel's loads reach the page cache over the bus,
 * only where it reads. No replica, nothing uploaded at a launch, nothing
 * compared at a sync: the region has one copy, the page cache.
 *
 * Only for regions no kernel can write (MAP_SHARED without PROT_WRITE):
 * the driver refuses a writable long-term pin of a file the kernel tracks
 * dirty pages of (docs/hardware.md, Z1.rw), and a kernel's store to a
 * read-only registration is a fatal fault. A MAP_SHARED mapping only: a
 * private one's pages may become the process's own copies.
 *
 * Mode H is the same without a registration: on a device with HMM
 * (PAGEABLE_MEMORY_ACCESS) kernels reach the program's mapping through the
 * device's own page tables, at its own address, nothing pinned. HMM faults
 * on a range armed with userfaultfd, so the shim's write tracking is taken
 * off such a region first (gpu_mapping.c; it has no PROT_WRITE, nothing
 * goes unseen) and put back before it can be written.
 *
 * Everything runs under mapping_lock. */

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "backend_cuda_internal.h"
#include "gpu_mapping.h"
#include "mapping_internal.h"
#include "stats.h"

/* Per device: 0 not probed, 1 can, else -1 (why_not says why). */
static int probed[TSVT_MAX_DEVICES];
static const char *why_not[TSVT_MAX_DEVICES];
static bool host_pointer[TSVT_MAX_DEVICES]; /* kernels use the host's address */

static int attribute(CUdevice_attribute a, int dev, int *value)
{
	*value = 0;
	return CU_CHECK(drv.device_get_attribute(value, a, (CUdevice)dev), "cuDeviceGetAttribute");
}

const char *gpu_pinned_probe(int dev)
{
	if (dev < 0 || dev >= TSVT_MAX_DEVICES)
		return "no such device";
	if (probed[dev])
		return probed[dev] > 0 ? NULL : why_not[dev];
	int ro = 0, reg = 0, same = 0;
	const char *why = NULL;
	if (!drv.device_get_attribute || !drv.host_register || !drv.host_unregister || !drv.host_device_pointer)
		why = "the driver lacks cuMemHostRegister, cuMemHostUnregister, cuMemHostGetDevicePointer or "
		      "cuDeviceGetAttribute";
	else if (attribute(CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, dev, &reg) || !reg)
		why = "the device cannot map registered host memory (HOST_REGISTER_SUPPORTED is 0)";
	else if (attribute(CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED, dev, &ro) || !ro)
		why = "the device cannot map host memory read-only (READ_ONLY_HOST_REGISTER_SUPPORTED is 0)";
	else
		(void)attribute(CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, dev, &same);
	host_pointer[dev] = same != 0;
	why_not[dev] = why;
	probed[dev] = why ? -1 : 1;
	return why;
}

/* Whether attribute a of dev is nonzero (and `usable`), asked once and
 * kept in cache[dev] (0 not yet, 1 yes, -1 no). */
static bool probed_attribute(int *cache, CUdevice_attribute a, int dev, bool usable)
{
	if (!cache[dev]) {
		int v = 0;
		cache[dev] = usable && drv.device_get_attribute && !attribute(a, dev, &v) && v ? 1 : -1;
	}
	return cache[dev] > 0;
}

const char *gpu_hmm_refused(int dev)
{
	static int hmm_probed[TSVT_MAX_DEVICES];
	if (dev < 0 || dev >= TSVT_MAX_DEVICES)
		return "no such device";
	return probed_attribute(hmm_probed, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, dev, true)
		       ? NULL
		       : "the device cannot reach the process's pageable memory (PAGEABLE_MEMORY_ACCESS is 0: no HMM)";
}

const char *gpu_hmm_refused_somewhere(void)
{
	static char why[256];
	int count = 0;
	if (!drv.device_get_count || CU_CHECK(drv.device_get_count(&count), "cuDeviceGetCount"))
		return "the number of devices is unknown";
	for (int d = 0; d < count && d < TSVT_MAX_DEVICES; d++) {
		const char *no = gpu_hmm_refused(d);
		if (no) {
			snprintf(why, sizeof(why), "device %d: %s", d, no);
			return why;
		}
	}
	return NULL;
}

const char *gpu_paged_refused(int dev)
{
	static int paged_probed[TSVT_MAX_DEVICES];
	if (dev < 0 || dev >= TSVT_MAX_DEVICES)
		return "no such device";
	return probed_attribute(paged_probed, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, dev,
				drv.mem_alloc_managed != NULL)
		       ? NULL
		       : "the device cannot have the CPU use managed memory while kernels run "
			 "(CONCURRENT_MANAGED_ACCESS is 0), nor managed memory exceed it";
}

size_t gpu_device_free_bytes(void)
{
	size_t free_bytes = 0, total = 0;
	if (!drv.mem_get_info || CU_CHECK(drv.mem_get_info(&free_bytes, &total), "cuMemGetInfo"))
		return 0;
	return free_bytes;
}

bool gpu_device_free_known(size_t *free_bytes)
{
	size_t total = 0;
	return drv.mem_get_info && drv.mem_get_info(free_bytes, &total) == CUDA_SUCCESS;
}

size_t gpu_device_total_bytes(void)
{
	size_t free_bytes = 0, total = 0;
	if (!drv.mem_get_info || CU_CHECK(drv.mem_get_info(&free_bytes, &total), "cuMemGetInfo"))
		return 0;
	return total;
}

/* Before the registration pins m (research/gpu_ondemand.md §4.3, Z):
 * the page cache is filled in chunks of the GPU window, each read ahead
 * while the one before it is populated, where the driver's pin would fault
 * the pages in one read-around at a time. The registration still pins every
 * page; a chunk that cannot be populated (a kernel before
 * MADV_POPULATE_READ, an I/O error, the file shorter than the mapping)
 * ends this, and the registration meets what remains. */
static void read_ahead(const struct gaia_mapping *m, size_t at, size_t n)
{
	gpu_file_willneed(m->fd, (uint64_t)m->offset + at, n, NULL);
}

static void populate_in_chunks(const struct gaia_mapping *m)
{
	const size_t chunk = cuda_upload_chunk_bytes();
	size_t len = (m->len + PG - 1) & ~(size_t)(PG - 1), done = 0;
	uint64_t chunks = 0;
	if (!chunk || m->fd < 0)
		return;
	read_ahead(m, 0, chunk < len ? chunk : len);
	while (done < len) {
		size_t n = len - done < chunk ? len - done : chunk;
		if (done + n < len)
			read_ahead(m, done + n, len - done - n < chunk ? len - done - n : chunk);
		if (REAL(madvise)((void *)(m->start + done), n, MADV_POPULATE_READ)) {
			gaia_debug("%s: populating %zu KiB at offset %llu before its registration: %s (the "
				   "registration reads the rest)", m->path, n / 1024,
				   (unsigned long long)(m->offset + done), strerror(errno));
			break;
		}
		done += n;
		chunks++;
	}
	stats_add(GAIA_STAT_populate_chunks, chunks);
	stats_add(GAIA_STAT_readahead_pages, done / PG);
}

/* A region read through HMM (mode H): where kernels faulted on it comes
 * into the page cache before the next launch, so that their faults there
 * find the pages (research/gpu_ondemand.md §4.3: page-cache misses leave
 * the GPU's fault path). In windows of GAIA_GPU_READAHEAD_KB that grow
 * where the set runs on and shrink where it is sparse
 * (learned_set_windows), at most a quarter of the machine's memory at a
 * launch, queued to the reader thread (gpu_file_ahead: the launch does
 * not wait for the disk, nor does anything under the mapping lock). */
static int read_ahead_window(void *arg, uint64_t first, uint64_t npages)
{
	const struct gaia_mapping *m = arg;
	size_t at = first * PG, n = npages * PG;
	if (at < m->len && !gpu_file_ahead(m, m->fd, (uint64_t)m->offset + at, n < m->len - at ? n : m->len - at))
		return -EAGAIN; /* the queue is full: the rest waits for the next launch */
	return 0;
}

void gpu_hmm_read_ahead_learned(struct gaia_mapping *m, uint32_t round)
{
	if (!m->pinned_hmm || !m->hmm_learned.round_of || !m->hmm_learned.due || m->fd < 0)
		return;
	long phys = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	uint64_t budget = phys > 0 && psize > 0 ? (uint64_t)phys * (uint64_t)psize / 4 / PG : LEARNED_NO_CAP;
	uint64_t pages = 0, windows = 0;
	(void)learned_set_windows(&m->hmm_learned, (m->len + PG - 1) / PG, budget, round, cuda_upload_chunk_bytes(),
				  read_ahead_window, m, &pages, &windows);
	gaia_debug("%s: %llu pages kernels faulted on through HMM asked ahead in %llu windows (the next starts at "
		   "%u pages)", m->path, (unsigned long long)pages, (unsigned long long)windows,
		   m->hmm_learned.window_pages);
	stats_add(GAIA_STAT_readahead_pages, pages);
	stats_add(GAIA_STAT_prefetch_windows, windows);
}

int gpu_pinned_register(struct gaia_mapping *m, int dev, bool hmm)
{
	if (hmm && (!m->pinned || m->pinned_hmm)) {
		/* Nothing to register: the device's own page tables reach the
		 * mapping, at the program's address (armed ranges excepted:
		 * the caller took the shim's tracking off it). */
		m->pinned = true;
		m->pinned_hmm = true;
		CUcontext ctx = NULL;
		(void)drv.ctx_get_current(&ctx);
		m->pinned_dptr[dev] = (uint64_t)m->start;
		m->pinned_dev_ctx[dev] = ctx;
		return 0;
	}
	if (m->pinned_hmm)
		return -EBUSY; /* read through HMM by another device */
	if (!m->pinned) {
		if (!gpu_mapping_whole(m))
			return -EINVAL; /* partly unmapped: the driver pins whole ranges */
		CUcontext ctx = NULL;
		if (CU_CHECK(drv.ctx_get_current(&ctx), "cuCtxGetCurrent (registering a region)") || !ctx)
			return -ENODEV;
		populate_in_chunks(m);
		unsigned flags = CU_MEMHOSTREGISTER_READ_ONLY | CU_MEMHOSTREGISTER_DEVICEMAP |
				 CU_MEMHOSTREGISTER_PORTABLE;
		CUresult rc = drv.host_register((void *)m->start, m->len, flags);
		if (rc != CUDA_SUCCESS) {
			gaia_info("%s: cuMemHostRegister(READ_ONLY | DEVICEMAP | PORTABLE, %zu KiB) failed: %s",
				  m->path, m->len / 1024, cuda_error_name(rc));
			return cuda_errno_of(rc) ? cuda_errno_of(rc) : -EIO;
		}
		m->pinned = true;
		m->pinned_ctx = ctx;
	}
	if (m->pinned_dptr[dev])
		return 0;
	CUdeviceptr p = (CUdeviceptr)m->start;
	if (!host_pointer[dev] &&
	    CU_CHECK(drv.host_device_pointer(&p, (void *)m->start, 0), "cuMemHostGetDevicePointer (a region read in place)"))
		return -EIO;
	CUcontext ctx = NULL;
	(void)drv.ctx_get_current(&ctx);
	m->pinned_dptr[dev] = (uint64_t)p;
	m->pinned_dev_ctx[dev] = ctx;
	return 0;
}

void gpu_pinned_unregister(struct gaia_mapping *m)
{
	if (!m->pinned)
		return;
	if (m->pinned_hmm)
		gpu_front_forget(m); /* nothing more is read ahead for it */
	if (!m->pinned_hmm) {
		struct cuda_replica as = {.ctx = m->pinned_ctx};
		struct ctx_switch c = cuda_enter_ctx(&as);
		(void)CU_FREE(drv.host_unregister((void *)m->start), "cuMemHostUnregister (a region read in place)");
		cuda_leave_ctx(c);
	}
	m->pinned = false;
	m->pinned_hmm = false;
	m->pinned_stale = false;
	m->pinned_ctx = NULL;
	memset(m->pinned_dptr, 0, sizeof(m->pinned_dptr));
	memset(m->pinned_dev_ctx, 0, sizeof(m->pinned_dev_ctx));
	learned_set_free(&m->hmm_learned);
}

void gpu_pinned_after_fork(struct gaia_mapping *m)
{
	/* The parent's registration: the child has no context to undo it in. */
	m->pinned = false;
	m->pinned_hmm = false;
	m->pinned_stale = false;
	m->pinned_ctx = NULL;
	memset(m->pinned_dptr, 0, sizeof(m->pinned_dptr));
	memset(m->pinned_dev_ctx, 0, sizeof(m->pinned_dev_ctx));
	learned_set_free(&m->hmm_learned);
}
