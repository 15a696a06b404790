/* Device replicas of managed mappings (gpu_mapping.c), as gpu.c uses them. */
#ifndef GAIA_GPU_MAPPING_H
#define GAIA_GPU_MAPPING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shim.h"

/* A region whose replica on the launching device lives elsewhere (managed
 * backing): a kernel argument in [start, end) becomes dptr + (arg - start). */
struct gpu_translation {
	uint64_t start, end, dptr;
};

/* A launch on device dev whose arguments hold these 8-byte values (all:
 * the arguments are unknown, every managed region is acquired): the CPU
 * releases, and dev acquires every region it holds or an argument points
 * into. Fills out[] with the managed-backed ones; returns their number,
 * or -errno when a region could not be uploaded (the launch must not
 * run). */
/* gaia_macquire for device dev: gpu_mappings_launch for the managed
 * mappings overlapping [addr, addr+len) (and those dev holds). */
GAIA_HIDDEN int gpu_mappings_acquire_range(int dev, const void *addr, size_t len);
/* A launch that gpu_mappings_launch planned (*planned) on dev has queued
 * its kernel, or was refused: gpu_mappings_quiesce waits for that before
 * it takes a wait on dev as covering the launch. */
GAIA_HIDDEN void gpu_mappings_launch_queued(int dev);
/* Before a launch takes its window: while an munmap holds launches back
 * (gpu_mappings_quiesce's last round), waits, holding nothing. */
GAIA_HIDDEN void gpu_mappings_drain_wait(void);
GAIA_HIDDEN int gpu_mappings_launch(int dev, const uint64_t *values, size_t nvalues, bool all,
				    struct gpu_translation *out, size_t out_capacity, bool *planned);
/* A host sync on device dev returned: dev releases every region it
 * launched on, the CPU acquires. Either every kernel launched there since
 * its last release has finished (the caller made sure), or, `snapshot`,
 * some may still run: what they wrote so far is released and the epochs
 * stay open. 0, -EAGAIN when a snapshot was refused for some region (the
 * caller waits for the kernels, then releases in full), or -errno when
 * some device changes could not reach the CPU. */
GAIA_HIDDEN int gpu_mappings_sync(int dev, bool snapshot);

/* --- shared by gpu_mapping.c, gpu_vmm.c and gpu_peer.c (mapping_lock held) --- */
struct gaia_mapping;
struct cuda_replica;
GAIA_HIDDEN bool gpu_mapping_any_replica(const struct gaia_mapping *m);
/* Whether every page of m is still mapped (none unmapped in part). */
GAIA_HIDDEN bool gpu_mapping_whole(const struct gaia_mapping *m);
/* Why the vmm backing cannot be used on this device (NULL: it can). */
GAIA_HIDDEN const char *gpu_vmm_probe(int device);
/* A vmm replica of m on dev at m's own address. 0 or -errno. */
GAIA_HIDDEN int gpu_vmm_create(struct gaia_mapping *m, struct cuda_replica *r, int dev);
/* 0, or why gpu_vmm_create would refuse m before asking the driver
 * (another device's vmm replica, a partly unmapped mapping). */
GAIA_HIDDEN int gpu_vmm_refused(const struct gaia_mapping *m);
GAIA_HIDDEN void gpu_vmm_guard_begin(uintptr_t start, size_t len);
GAIA_HIDDEN void gpu_vmm_guard_end(void);
/* A range sealed for a move: its protections, per part, to give back. */
#define GAIA_SEAL_PARTS 64
struct vmm_seal_part {
	size_t off, len;
	int prot;
};
struct vmm_seal {
	uintptr_t start;
	size_t len;
	unsigned n;
	struct vmm_seal_part part[GAIA_SEAL_PARTS];
	void *aside[GAIA_SEAL_PARTS]; /* where each part was moved, or NULL */
};
GAIA_HIDDEN int gpu_vmm_seal(uintptr_t addr, size_t len, struct vmm_seal *s);
GAIA_HIDDEN int gpu_vmm_unseal(const struct vmm_seal *s);
GAIA_HIDDEN int gpu_vmm_move_all_aside(struct vmm_seal *s, uintptr_t avoid, size_t avoid_len, bool *placeheld);
GAIA_HIDDEN int gpu_vmm_move_back(struct gaia_mapping *m, const struct vmm_seal *seal);
GAIA_HIDDEN void gpu_vmm_rearm(struct gaia_mapping *m, const struct vmm_seal *seal);
GAIA_HIDDEN void gpu_vmm_hold_end(struct gaia_mapping *m);
/* After m's vmm replica went (the driver's reservation with it): the
 * room it had after m, up to hi, is held as m's padding again, where
 * still free, so that nothing the program or its libraries map meanwhile
 * lands where the next replica's reservation will be. */
GAIA_HIDDEN void gpu_vmm_keep_room(struct gaia_mapping *m, uintptr_t hi);
/* Regions kernels read in place (gpu_pinned.c). Why dev cannot read a
 * read-only registration of host memory (NULL: it can; probed once). */
GAIA_HIDDEN const char *gpu_pinned_probe(int dev);
/* Why dev's kernels cannot reach the process's pageable memory (HMM;
 * NULL: they can; probed once). */
GAIA_HIDDEN const char *gpu_hmm_refused(int dev);
/* The same for every device the process sees (a region read through HMM
 * has no registration another device could use): NULL, or which cannot
 * and why (under mapping_lock: one buffer). */
GAIA_HIDDEN const char *gpu_hmm_refused_somewhere(void);
/* Registers m read-only with the driver, once for every device (hmm:
 * nothing registered, dev reaches it through HMM), and records the address
 * dev's kernels reach it at (m->pinned_dptr[dev]), in the current
 * context. 0 or -errno. */
GAIA_HIDDEN int gpu_pinned_register(struct gaia_mapping *m, int dev, bool hmm);
/* Undoes the registration (the kernels that may read it have ended). */
GAIA_HIDDEN void gpu_pinned_unregister(struct gaia_mapping *m);
/* In a forked child: the parent's registration is not this process's. */
GAIA_HIDDEN void gpu_pinned_after_fork(struct gaia_mapping *m);
/* Before a launch on m read through HMM: the units its kernels faulted
 * on (as of `round`), when learned since, read ahead into the page cache
 * in windows (gpu_pinned.c). */
GAIA_HIDDEN void gpu_hmm_read_ahead_learned(struct gaia_mapping *m, uint32_t round);
/* The current context's device's free memory in bytes (0: unknown). */
GAIA_HIDDEN size_t gpu_device_free_bytes(void);
/* The same, told apart from an unknown one (no current context, no
 * driver): false then, and nothing said. */
GAIA_HIDDEN bool gpu_device_free_known(size_t *free_bytes);
/* The current device's memory, in bytes; 0 if the driver cannot say. */
GAIA_HIDDEN size_t gpu_device_total_bytes(void);

/* gpu_faults.c: where kernels fault on replicas paged on demand.
 * want: such a replica exists (any thread, any lock); prepare: outside
 * the shim's locks, loads and enables CUPTI the first time it is wanted;
 * take: at a full release, after the kernels ended: the faulting
 * addresses recorded since the last take (malloc'd, *n of them; the
 * caller frees), NULL when none or not learning. */
GAIA_HIDDEN void gpu_faults_want(void);
GAIA_HIDDEN void gpu_faults_prepare(void);
GAIA_HIDDEN uint64_t *gpu_faults_take(size_t *n);
/* Whether CUPTI's fault records are on (from then on, every fault of a
 * kernel in a paged replica is learned). */
GAIA_HIDDEN bool gpu_faults_on(void);
/* While kernels run: the fault addresses recorded since *cursor (a
 * count of the process's records, 0 at first; advanced past what is
 * returned; records a take consumed are skipped), up to max, without
 * taking them from the next take. */
GAIA_HIDDEN size_t gpu_faults_peek(uint64_t *out, size_t max, uint64_t *cursor);
/* The records are on and GAIA_GPU_FAULTS=cupti: read while kernels run
 * too, to prefetch ahead of the fault front (gpu_front.c). */
GAIA_HIDDEN bool gpu_faults_front(void);
/* gpu_front.c: prefetch ahead of the fault front while kernels run.
 * watch: at a launch, replica r (paged on demand) is one kernels may
 * fault on until the next full release (any thread; the mapping lock
 * may be held). pause: a full release on dev: stop until the next
 * launch, and the next epoch starts with nothing prefetched. forget: r
 * is about to be freed: no prefetch of it is queued or made after this
 * returns. */
struct cuda_replica;
GAIA_HIDDEN void gpu_front_watch(struct cuda_replica *r);
/* watch_hmm: the same for a region read through HMM on dev (key: its
 * mapping), at [start, start + len), offset bytes into the file fd: a
 * window is read ahead into the page cache. forget takes either key. */
GAIA_HIDDEN void gpu_front_watch_hmm(const void *key, uintptr_t start, size_t len, int fd, uint64_t offset, int dev);
GAIA_HIDDEN void gpu_front_pause(int dev);
GAIA_HIDDEN void gpu_front_forget(const void *key);
/* Queues [offset, offset + n) of fd, for key, to be read ahead into the
 * page cache by the shim's reader thread (POSIX_FADV_WILLNEED, outside
 * every lock; not waited for); false when it cannot be (the queue is
 * full, no thread). fd stays open until gpu_front_forget(key) returns. */
GAIA_HIDDEN bool gpu_file_ahead(const void *key, int fd, uint64_t offset, size_t n);
/* The same, asked now by the calling thread (POSIX_FADV_WILLNEED in pieces
 * the kernel reads whole), until *stop (when given) is set. */
GAIA_HIDDEN void gpu_file_willneed(int fd, uint64_t offset, uint64_t len, const int *stop);
/* Units of r kernels faulted on (learned, one of `units` per unit, or
 * NULL) or that lie in a window prefetched ahead of the fault front that
 * a kernel read through (it faulted on the window's holes): a unit the
 * front brought does not fault. */
GAIA_HIDDEN size_t gpu_front_touched_units(const struct cuda_replica *r, const uint32_t *learned, size_t units);
/* After a full release on dev: what the kernels faulted on becomes the
 * learned set of each replica paged on demand (prefetched before the next
 * launch). Outside the shim's locks. */
GAIA_HIDDEN void gpu_mappings_learn(void);
/* A program's allocation of `want` bytes on dev found no room: replicas
 * there (not paged ones) are given up, the largest first, until about
 * that much is free; their regions page on demand from their next launch.
 * What kernels wrote to them is released first (after waiting for the
 * kernels that may use them, without the lock). The bytes given up. */
GAIA_HIDDEN size_t gpu_mappings_make_room(int dev, size_t want);
/* After a sync that left dev idle: replicas there paged on demand (given
 * up for the program's memory, or made when the region was larger than
 * half the free memory) that would now fit whole (no larger than half the
 * free memory) are given up, their writes merged, so that the next launch
 * makes whole ones. Returns how many. */
GAIA_HIDDEN unsigned gpu_mappings_promote(int dev);
/* Whether dev may have replicas paged on demand (mode M: the CPU reads
 * and writes their base copies while kernels run): NULL, or why not. */
GAIA_HIDDEN const char *gpu_paged_refused(int dev);
/* A device replica exists in this process: reads may be served by one. */
GAIA_HIDDEN void gpu_peer_enable(void);
/* Frees what peer reads of m fetched ahead (its replicas go). */
GAIA_HIDDEN void gpu_peer_forget(struct gaia_mapping *m);

#endif
