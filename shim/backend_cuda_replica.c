/* Creating and freeing device replicas (DESIGN §3.2): the managed and
 * vmm backings, prefetch, and giving everything back. The rest of the
 * CUDA backend is backend_cuda.c's. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cudaTypedefs.h>

#include "backend_cuda_internal.h"
#include "gpu_mapping.h"
#include "readahead.h"
#include "stats.h"

static int create_managed(struct cuda_replica *r, bool writable)
{
	if (!drv.mem_alloc_managed)
		return -ENOTSUP;
	int rc = CU_CHECK(drv.mem_alloc_managed(&r->dptr, r->len, CU_MEM_ATTACH_GLOBAL),
			  "cuMemAllocManaged (device replica)");
	if (rc)
		return rc;
	rc = cuda_alloc_base(r, writable);
	if (rc) {
		(void)CU_FREE(drv.mem_free(r->dptr), "cuMemFree (freeing device memory)");
		r->dptr = 0;
	}
	return rc;
}

size_t cuda_vmm_granularity(int device)
{
	if (!drv.granularity)
		return 0;
	CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
				    .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device}};
	size_t g = 0;
	if (CU_CHECK(drv.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
		     "cuMemGetAllocationGranularity"))
		return 0;
	return g;
}

/* Device memory at [span_start, span_start + span_len), in a reservation
 * of [span_start, span_start + reserve_len), which the caller has made free
 * in this process (the CPU replica moved aside). */
static int create_vmm(struct cuda_replica *r, uintptr_t span_start, size_t span_len, size_t reserve_len)
{
	if (!drv.address_reserve || !drv.mem_create || !drv.mem_map || !drv.set_access)
		return -ENOTSUP;
	CUdeviceptr got = 0;
	int rc = CU_CHECK(drv.address_reserve(&got, reserve_len, 0, (CUdeviceptr)span_start, 0),
			  "cuMemAddressReserve");
	if (rc)
		return rc;
	if (got != (CUdeviceptr)span_start) {
		/* The address is only a hint: the driver chose another. */
		gaia_log(GAIA_LOG_INFO, "cuMemAddressReserve(%zu bytes at %#lx) gave %#llx instead",
			 reserve_len, (unsigned long)span_start, (unsigned long long)got);
		(void)CU_FREE(drv.address_free(got, reserve_len), "cuMemAddressFree (freeing device memory)");
		return -EADDRINUSE;
	}
	CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
				    .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = r->device}};
	CUmemAccessDesc access = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
	rc = CU_CHECK(drv.mem_create(&r->handle, span_len, &prop, 0), "cuMemCreate");
	if (rc)
		goto free_va;
	rc = CU_CHECK(drv.mem_map((CUdeviceptr)span_start, span_len, 0, r->handle, 0), "cuMemMap");
	if (rc)
		goto release;
	rc = CU_CHECK(drv.set_access((CUdeviceptr)span_start, span_len, &access, 1), "cuMemSetAccess");
	if (rc)
		goto unmap;
	r->span_start = span_start;
	r->span_len = span_len;
	r->reserve_len = reserve_len;
	return 0;
unmap:
	(void)CU_FREE(drv.mem_unmap((CUdeviceptr)span_start, span_len), "cuMemUnmap (freeing device memory)");
release:
	(void)CU_FREE(drv.mem_release(r->handle), "cuMemRelease (freeing device memory)");
free_va:
	(void)CU_FREE(drv.address_free((CUdeviceptr)span_start, reserve_len), "cuMemAddressFree (freeing device memory)");
	return rc;
}

int cuda_replica_create(struct cuda_replica *r, int backing, int device, uintptr_t addr,
			size_t len, bool writable, uintptr_t span_start, size_t span_len, size_t reserve_len)
{
	if (!cuda_backend_ready())
		return -ENODEV;
	memset(r, 0, sizeof(*r));
	r->device = device;
	r->len = len;
	r->paged = backing == GAIA_BACKING_PAGED;
	r->backing = r->paged ? GAIA_BACKING_MANAGED : backing;
	if (CU_CHECK(drv.ctx_get_current(&r->ctx), "cuCtxGetCurrent (a replica's context)"))
		r->ctx = NULL;
	int rc;
	if (backing == GAIA_BACKING_VMM) {
		rc = create_vmm(r, span_start, span_len, reserve_len < span_len ? span_len : reserve_len);
		if (!rc) {
			r->dptr = (CUdeviceptr)addr;
			rc = cuda_alloc_base(r, writable);
			if (rc)
				cuda_replica_destroy(r);
		}
	} else {
		rc = create_managed(r, writable);
	}
	return rc;
}

int cuda_replica_fill(struct cuda_replica *r, uint8_t byte)
{
	r->writes++;
	int rc = CU_CHECK(drv.memset_d8(r->dptr, byte, r->len), "cuMemsetD8 (probe)");
	return rc ? rc : CU_CHECK(drv.stream_synchronize(CU_STREAM_LEGACY), "cuStreamSynchronize (probe)");
}

void cuda_replica_prefetch(struct cuda_replica *r)
{
	/* A paged replica may be larger than the device: its pages come
	 * when kernels touch them. */
	if (r->backing != GAIA_BACKING_MANAGED || r->paged || !r->dirty_since_prefetch || !drv.prefetch)
		return;
	/* Uploads through the host window left blocks on the host; move them
	 * in bulk instead of one fault each in the kernel. */
	CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = r->device};
	/* Only a hint: without it the pages move on demand. */
	struct ctx_switch c = cuda_enter_ctx(r);
	CUstream s = cuda_shim_stream();
	if (!CU_CHECK(drv.prefetch(r->dptr, r->len, loc, 0, s), "cuMemPrefetchAsync (a hint)"))
		(void)CU_CHECK(drv.stream_synchronize(s), "cuStreamSynchronize (after a prefetch)");
	cuda_leave_ctx(c);
	r->dirty_since_prefetch = false;
}

size_t cuda_replica_learn(struct cuda_replica *r, const uint64_t *addrs, size_t n, uint32_t round)
{
	return r->paged ? learned_set_learn(&r->learned, r->dptr, r->len, addrs, n, round) : 0;
}

size_t cuda_replica_touched_units(const struct cuda_replica *r)
{
	return gpu_front_touched_units(r, r->learned.round_of, (r->len + CUDA_FAULT_UNIT - 1) / CUDA_FAULT_UNIT);
}

struct learned_prefetch {
	struct cuda_replica *r;
	CUstream stream;
};

static int prefetch_window(void *arg, uint64_t first, uint64_t npages)
{
	struct learned_prefetch *p = arg;
	CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = p->r->device};
	/* Only a hint: a page it misses comes at its fault. */
	return CU_CHECK(drv.prefetch(p->r->dptr + first * PG, npages * PG, loc, 0, p->stream),
			"cuMemPrefetchAsync (learned)");
}

void cuda_replica_prefetch_learned(struct cuda_replica *r, size_t budget, uint32_t round)
{
	if (!r->paged || !r->learned.round_of || !drv.prefetch || !(r->learned.due || r->dirty_since_prefetch))
		return;
	struct ctx_switch c = cuda_enter_ctx(r);
	struct learned_prefetch p = {r, cuda_shim_stream()};
	uint64_t pages = 0, windows = 0;
	int rc = learned_set_windows(&r->learned, r->len / PG, budget / PG, round, cuda_upload_chunk_bytes(),
				     prefetch_window, &p, &pages, &windows);
	if (windows && !rc)
		(void)CU_CHECK(drv.stream_synchronize(p.stream), "cuStreamSynchronize (after a prefetch)");
	cuda_leave_ctx(c);
	gaia_debug("device %d: %llu learned pages prefetched in %llu windows (the next starts at %u pages)",
		   r->device, (unsigned long long)pages, (unsigned long long)windows, r->learned.window_pages);
	stats_add(GAIA_STAT_readahead_pages, pages);
	stats_add(GAIA_STAT_prefetch_windows, windows);
	r->dirty_since_prefetch = false;
}

void cuda_replica_destroy(struct cuda_replica *r)
{
	if (!cuda_backend_ready())
		return;
	struct ctx_switch c = cuda_enter_ctx(r);
	/* Its commits may still be queued on the shim's stream, and a
	 * comparison on the diff stream. */
	(void)cuda_shim_settle();
	cuda_replica_settle_diffs(r);
	gpu_front_forget(r); /* and its prefetches ahead of the fault front */
	free(r->started);
	learned_set_free(&r->learned);
	if (r->changed)
		(void)CU_FREE(drv.mem_free(r->changed), "cuMemFree (freeing device memory)");
	if (r->gather_buf)
		(void)CU_FREE(drv.mem_free(r->gather_buf), "cuMemFree (freeing device memory)");
	if (r->rebase_cpu)
		(void)CU_FREE(drv.mem_free(r->rebase_cpu), "cuMemFree (freeing device memory)");
	if (r->base)
		(void)CU_FREE(drv.mem_free(r->base), "cuMemFree (freeing device memory)");
	if (r->backing == GAIA_BACKING_MANAGED && r->dptr)
		(void)CU_FREE(drv.mem_free(r->dptr), "cuMemFree (freeing device memory)");
	if (r->backing == GAIA_BACKING_VMM && r->span_len) {
		(void)CU_FREE(drv.mem_unmap((CUdeviceptr)r->span_start, r->span_len), "cuMemUnmap (freeing device memory)");
		(void)CU_FREE(drv.mem_release(r->handle), "cuMemRelease (freeing device memory)");
		(void)CU_FREE(drv.address_free((CUdeviceptr)r->span_start, r->reserve_len), "cuMemAddressFree (freeing device memory)");
	}
	cuda_leave_ctx(c);
	memset(r, 0, sizeof(*r));
}
