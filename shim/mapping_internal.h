/* The state of managed mappings, shared by mapping.c (the CPU side) and
 * gpu_mapping.c (device replicas). Everything here is under mapping_lock. */
#ifndef GAIA_MAPPING_INTERNAL_H
#define GAIA_MAPPING_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "device.h"
#include "gpu_learned.h"
#include "lrc.h"
#include "sharedtab.h"
#include "shim.h"

struct gaia_mapping {
	struct gaia_mapping *next;
	struct lrc_region engine;
	struct lrc_plan plan;
	uintptr_t start;  /* address of engine page 0 */
	size_t len;
	uint64_t offset;  /* file offset of engine page 0 */
	int fd;           /* the shim's own descriptor of the file */
	dev_t dev;
	ino_t ino;
	int prot, flags;
	bool tracked;               /* registered for write tracking (else never writable) */
	struct shared_file *shared; /* MAP_SHARED: the file's cross-process versions */
	struct page_sums *sums;     /* checksums: changes by writers not under the shim */
	bool sums_wanted;           /* a first look was asked for: every acquire looks (until one succeeds) */
	struct sharedtab_cursor cursor;
	/* Device replicas (gpu_mapping.c): the executor of device actions,
	 * one backend replica per device (NULL: none), devices where making
	 * one failed (not retried), and the shim's own writable view of a
	 * MAP_SHARED file for storing device results into the page cache
	 * without touching the program's write-protected mapping. */
	struct device_exec exec;
	void *replicas[TSVT_MAX_DEVICES];
	int replica_failed[TSVT_MAX_DEVICES]; /* -errno of the failed creation, or 0 */
	uint8_t *store_view;
	/* Read in place (gpu_pinned.c): the program's pages registered
	 * read-only with the driver in context pinned_ctx; device d's kernels
	 * reach them at pinned_dptr[d] (0: d has not used them), and d last
	 * used them in context pinned_dev_ctx[d]. No replica on any device. */
	/* What peer reads fetched ahead from a device (gpu_peer.c), or NULL. */
	struct peer_cache *peer;
	bool pinned;
	/* Read in place through HMM instead (mode H; gpu_pinned.c): nothing
	 * registered, pinned_dptr[d] is the program's address. */
	bool pinned_hmm;
	/* Read through HMM: the units kernels faulted on (learned at syncs),
	 * read ahead into the page cache before launches (gpu_pinned.c). */
	struct learned_set hmm_learned;
	/* The shim's write tracking was taken off the range for HMM (a
	 * device faults on an armed range; the mapping has no PROT_WRITE, so
	 * nothing goes unseen): armed again before it can be written or get a
	 * replica (mapping_rearm_locked). rearm_failed: that failed, every
	 * collect counts the whole mapping written. */
	bool unarmed, rearm_failed;
	/* Never read through HMM again: the program took PROT_READ off some
	 * of it (HMM follows the CPU's protection; a registration or a
	 * replica keeps the bytes). becoming_writable: an mprotect adding
	 * PROT_WRITE is under way (mapping_before_writable until it
	 * returns), so the range is not unarmed meanwhile. */
	bool no_hmm;
	unsigned becoming_writable;
	/* This process is a fork child of the one that had device copies of
	 * the mapping (replica_failed -ENODEV); said once, at a launch. */
	bool forked, fork_said;
	bool pinned_stale; /* the program shrank the file since: pages went */
	bool pinned_counted; /* in GAIA_STATS pinned_regions already */
	bool pinned_refused[TSVT_MAX_DEVICES]; /* replica_failed[d] because d could not read it in place */
	bool demoted[TSVT_MAX_DEVICES]; /* d's replica given up for the program's memory: paged from now */
	void *pinned_ctx;
	uint64_t pinned_dptr[TSVT_MAX_DEVICES];
	void *pinned_dev_ctx[TSVT_MAX_DEVICES];
	/* exec counters as the last launch or release saw them (gpu_mapping.c) */
	uint64_t uploaded_seen, merged_seen, conflicts_seen;
	/* PROT_NONE reservation after the mapping, to GAIA_VMM_SPAN_MIN past
	 * its start or the next 2 MiB boundary, whichever is further
	 * (admission.c's placement): where a vmm replica's reservation will
	 * lie; 0 when none or given up. */
	uintptr_t pad_start;
	size_t pad_len;
	/* Pages this process changed since the last checksum pass (one bit
	 * each): their checksums moving is not another writer's doing. */
	uint64_t *own_changes;
	/* Pages written through the file (write, pwrite, ftruncate) that the
	 * engine has not been told of yet, one bit each (NULL: it is told at
	 * once). A writer only sets a bit, which stays in cache; the next
	 * mapping_lock_take tells the engine, before anything reads it. */
	uint64_t *file_written;
	bool file_written_any;
	/* Pages a merge is storing into whose bytes another writer changed
	 * since the last look (gpu_mapping.c); NULL until needed. */
	uint64_t *outside_changes;
	bool outside_unknown; /* no memory for it: the stored pages keep their checksums */
	/* Pages without PROT_WRITE in a mapping that has it elsewhere (one
	 * bit each; NULL: none): device writes there are dropped
	 * (device_exec.no_store). */
	uint64_t *read_only;
	/* MAP_PRIVATE: pages without PROT_READ (one bit each; NULL: none):
	 * the shim cannot read them, devices get zeros there
	 * (device_exec.no_load). */
	uint64_t *unreadable;
	char path[];
};

GAIA_HIDDEN extern pthread_mutex_t mapping_lock;
/* Takes mapping_lock, and applies the writes into managed files recorded
 * while another thread held it: the way to take it (mapping_lock_give
 * releases it). */
GAIA_HIDDEN void mapping_lock_take(void);
GAIA_HIDDEN void mapping_lock_give(void);
GAIA_HIDDEN extern struct gaia_mapping *mappings;

/* The CPU's side of the protocol for one mapping (mapping.c). */
GAIA_HIDDEN void mapping_collect_locked(struct gaia_mapping *m);
/* Takes the shim's write tracking off m (for HMM; only a mapping without
 * PROT_WRITE: -EBUSY otherwise), or arms it again. 0 or -errno. */
GAIA_HIDDEN int mapping_unarm_locked(struct gaia_mapping *m);
GAIA_HIDDEN int mapping_rearm_locked(struct gaia_mapping *m);
GAIA_HIDDEN void mapping_release_locked(struct gaia_mapping *m);
GAIA_HIDDEN void mapping_acquire_locked(struct gaia_mapping *m);
/* The first look at the file for writers not under the shim (checksums
 * of every page), if none was taken: before a device first holds a copy
 * of m, since what it holds must be compared from then on. */
GAIA_HIDDEN void mapping_first_look_locked(struct gaia_mapping *m);
/* Carries out m->plan (device actions through m->exec). */
GAIA_HIDDEN int mapping_run_plan_locked(struct gaia_mapping *m);
/* The same for a sync's diff plan, taking the answers of the comparisons
 * queued before its wait (device_exec_run_diffs). */
GAIA_HIDDEN int mapping_run_diffs_locked(struct gaia_mapping *m, int dev);
GAIA_HIDDEN void mapping_note_own_change_locked(struct gaia_mapping *m, uint64_t first, uint64_t n);

/* Device replicas (gpu_mapping.c; weak: absent in a build without CUDA). */
/* Before pages of m go away (munmap, remap, exit): devices release what
 * they wrote, then every replica of m is freed. */
GAIA_HIDDEN void gpu_mapping_forget_locked(struct gaia_mapping *m) __attribute__((weak));
/* Without mapping_lock, before forgetting the mappings overlapping
 * [addr, addr + len) (only the read-only ones: read_only_only): waits for
 * the kernels that may still run on the devices holding them, so that
 * gpu_mapping_forget_locked (and freeing the replicas) need not wait with
 * the lock held. Where other threads' launches keep those devices busy,
 * new launches wait until the caller is done: it passes the answer
 * (nonzero when launches are held back) to gpu_mappings_quiesce_end once
 * it has let the lock go. */
GAIA_HIDDEN unsigned gpu_mappings_quiesce(const void *addr, size_t len, bool read_only_only)
	__attribute__((weak));
GAIA_HIDDEN void gpu_mappings_quiesce_end(unsigned held) __attribute__((weak));
/* In a forked child: the parent's device replicas are not this process's. */
GAIA_HIDDEN void gpu_mapping_after_fork_locked(struct gaia_mapping *m) __attribute__((weak));

/* Under the mapping lock: a PROT_NONE placeholder of the shim's at
 * [start, start+len), right after the managed mapping m, becomes its
 * padding (freed with it, given up to the program's fixed mappings). */
GAIA_HIDDEN void mapping_padding_kept(struct gaia_mapping *m, uintptr_t start, size_t len);

#endif
