/* Device replicas over the CUDA driver API (backend_cuda.c). */
#ifndef GAIA_BACKEND_CUDA_H
#define GAIA_BACKEND_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <driver_types.h>

#include "device.h"
#include "gpu.h"
#include "gpu_learned.h"

struct cuda_replica {
	int device;
	int backing; /* GAIA_BACKING_VMM or GAIA_BACKING_MANAGED */
	/* managed, paged on demand (mode M): never prefetched whole, base
	 * copies in managed memory kept on the host, compared on the host */
	bool paged;
	CUdeviceptr dptr;          /* the replica's engine page 0 */
	CUdeviceptr base;          /* base copies (writable regions), else 0 */
	size_t len;
	/* vmm: the mapped span around the region, and the reservation that
	 * holds it (from span_start, span_len or more) */
	uintptr_t span_start;
	size_t span_len, reserve_len;
	CUmemGenericAllocationHandle handle;
	/* the diff's per-page answer on the device, a byte a page (page p's
	 * at changed + p) */
	CUdeviceptr changed;
	size_t changed_pages;
	/* comparisons queued ahead of a sync (device_ops.diff_start), on
	 * the diff stream of the replica's context: their pages, and `writes`
	 * when queued (an answer is taken only if the shim has written
	 * neither replica nor base since) */
	struct cuda_started_diff {
		uint64_t first, npages, writes;
	} *started;
	unsigned nstarted, started_capacity;
	/* a comparison was queued and no wait has covered it since: its
	 * answer may still land in `changed` */
	bool diff_in_flight;
	/* the shim's writes into replica or base (uploads, commits, rebases,
	 * fills), counted */
	uint64_t writes;
	/* a sync's changed pages, their masks and their list, gathered */
	CUdeviceptr gather_buf;
	uint64_t gather_capacity;
	/* the CPU's bytes of a launch's rebase, rebase_pages pages */
	CUdeviceptr rebase_cpu;
	uint64_t rebase_pages;
	bool dirty_since_prefetch;
	/* paged: what kernels faulted on (GAIA_GPU_FAULTS); due also when
	 * some of it may have left the device since its last prefetch (the
	 * host wrote it, a sync compared it on the host) */
	struct learned_set learned;
	/* paged, and made while fault records were on: the units it faulted
	 * on since are what kernels touched of it (a unit stops faulting once
	 * on the device, so the learned set's last rounds would not say) */
	bool observed;
	/* it was said at info level that the replica stays paged although a
	 * whole one would fit (kernels touched little of it) */
	bool stays_said;
	CUcontext ctx; /* the context that made it: its device work runs there */
};

GAIA_HIDDEN extern const struct device_ops cuda_device_ops;

/* A paged replica learns the faults among addrs[0..n) (ascending) that
 * fall in it, in `round`; returns how many of its units are new to it.
 * Any fault in it makes its next prefetch due. */
GAIA_HIDDEN size_t cuda_replica_learn(struct cuda_replica *r, const uint64_t *addrs, size_t n, uint32_t round);
/* Before a launch: a paged replica's set (as of `round`), when its
 * prefetch is due, is prefetched to its device in windows
 * (readahead_adapt), the latest round's units first, at most budget bytes
 * (0: none); waited for. */
GAIA_HIDDEN void cuda_replica_prefetch_learned(struct cuda_replica *r, size_t budget, uint32_t round);
/* How many of a paged replica's units kernels faulted on since it was
 * made, or read through in a window the fault front's prefetch brought
 * (gpu_front.c); 0 when none. */
GAIA_HIDDEN size_t cuda_replica_touched_units(const struct cuda_replica *r);

/* The size of an upload's chunks (GAIA_GPU_READAHEAD_KB), in bytes. */
GAIA_HIDDEN size_t cuda_upload_chunk_bytes(void);
/* Makes the current context's pinned staging for uploads, once; called
 * before the shim takes its locks (uploads made before go unstaged). */
GAIA_HIDDEN void cuda_upload_staging_prepare(void);

/* Whether a driver with the core entry points is loaded. */
GAIA_HIDDEN bool cuda_backend_ready(void);
GAIA_HIDDEN const char *cuda_error_name(CUresult rc);
/* The current context's device ordinal, or -1. */
GAIA_HIDDEN int cuda_current_device(void);
/* Waits for everything the current context's device runs. 0 or -errno. */
GAIA_HIDDEN int cuda_synchronize(void);
/* The same in the context of a replica, from any thread. */
struct cuda_replica;
GAIA_HIDDEN int cuda_replica_synchronize(const struct cuda_replica *r);
/* Waits until every kernel in ctx (NULL: the current context) finished. */
GAIA_HIDDEN int cuda_ctx_synchronize(CUcontext ctx);
/* Waits for the device work the shim queued on its own stream (base
 * copies, commits) and no other wait has covered; before a launch of the
 * program on any stream (the shim's is ordered after no other). Another
 * thread's wait counts once it has returned. 0 or -errno. */
GAIA_HIDDEN int cuda_shim_settle(void);
/* Waits for the comparisons queued ahead of a sync (device_ops.diff_start)
 * in every context: called without the mapping lock, as they may wait for
 * room on a device the program's kernels fill. 0 or -errno. */
GAIA_HIDDEN int cuda_diffs_wait(void);
/* Waits for a replica's queued comparisons, whose answers land in its
 * memory, and forgets them: before that memory is freed or written from
 * another stream. */
GAIA_HIDDEN void cuda_replica_settle_diffs(struct cuda_replica *r);
/* The VMM allocation granularity of a device (0: no VMM). */
GAIA_HIDDEN size_t cuda_vmm_granularity(int device);

/* The driver result for a -errno of the shim (0: CUDA_SUCCESS), from the
 * same table that maps driver results to errnos. */
GAIA_HIDDEN CUresult cuda_result_of(int rc);
/* The runtime's error for a driver result the shim returns, same table. */
GAIA_HIDDEN cudaError_t cuda_runtime_error_of(CUresult rc);

/* A replica of [addr, addr+len) on `device` in the current context. For
 * vmm, [span_start, span_start+reserve_len) must be free in this process:
 * it is reserved at that very address or the call fails with -EADDRINUSE
 * (the driver honours the address only for reservations of
 * GAIA_VMM_SPAN_MIN on a GAIA_VMM_SPAN_ALIGN boundary), and device memory
 * is mapped over [span_start, span_start+span_len) (granularity-aligned,
 * covering the region). GAIA_BACKING_PAGED: managed memory paged on
 * demand (struct cuda_replica.paged). 0 or -errno. */
GAIA_HIDDEN int cuda_replica_create(struct cuda_replica *r, int backing, int device,
				    uintptr_t addr, size_t len, bool writable, uintptr_t span_start,
				    size_t span_len, size_t reserve_len);
/* Frees the device memory; a vmm span is unmapped and unreserved (the
 * driver replaces the host side of the span: the caller moves the CPU
 * replica aside first). */
GAIA_HIDDEN void cuda_replica_destroy(struct cuda_replica *r);
/* Sets every byte of the replica (on the device). */
GAIA_HIDDEN int cuda_replica_fill(struct cuda_replica *r, uint8_t byte);
/* Whether a rebase of npages pages of the replica runs on the device
 * (device_ops.rebase) without the host waiting for the program's kernels:
 * the rebase kernel loaded up front, and the CPU's bytes fitting the
 * replica's staging buffer at once (a second batch's upload would wait
 * for the first batch's kernel, which waits for room on the device). */
GAIA_HIDDEN bool cuda_replica_rebases_in_place(const struct cuda_replica *r, uint64_t npages);
/* Managed backing: after uploads, moves the replica to the device in bulk. */
GAIA_HIDDEN void cuda_replica_prefetch(struct cuda_replica *r);

/* Parameter i of a kernel: 0, -ENOENT past the last one, -ENOTSUP when
 * the layout cannot be had. */
GAIA_HIDDEN int cuda_func_param(const void *func, enum gpu_func_kind kind, size_t index,
				size_t *offset, size_t *size);

#endif
