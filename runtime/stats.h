/* Counters printed by GAIA_STATS (DESIGN §6). One table: the X-macro below
 * names every counter, its unit and one line of meaning. Counters are
 * relaxed atomics: cheap enough for the fault path. */
#ifndef GAIA_STATS_H
#define GAIA_STATS_H

#include <stdint.h>

#define GAIA_STATS_TABLE(X)                                                          \
	X(managed_mappings, "mappings", "file mappings the shim managed")            \
	X(kernel_launches, "launches", "kernel launches intercepted")                \
	X(host_syncs, "syncs", "host synchronizations intercepted")                 \
	X(snapshot_releases, "syncs", "syncs released while kernels still ran on other streams") \
	X(launch_waits, "waits", "waits of launches for kernels launched earlier, to change device bytes they may read or to make a replica (vmm)") \
	X(teardown_waits, "waits", "waits (without the shim's locks) for kernels that may use a mapping being unmapped or made writable") \
	X(running_rebases, "launches", "launches that rebased regions on the device while kernels launched earlier ran (GAIA_RUNNING_KERNELS=shared)") \
	X(device_replicas, "replicas", "device replicas of regions created")         \
	X(pinned_regions, "regions", "regions kernels read in place from the page cache (read-only registrations: no replica, nothing uploaded)") \
	X(host_regions, "regions", "regions kernels read in place through HMM (the program's own mapping through the device's page tables: nothing registered, pinned or uploaded)") \
	X(demoted_replicas, "replicas", "device replicas given up for a program allocation that found no device memory (the region pages on demand from its next launch)") \
	X(promoted_replicas, "replicas", "replicas paged on demand given up at a sync because a whole one fits again (the next launch makes it)") \
	X(paged_replicas, "replicas", "device replicas in managed memory paged on demand (mode M: may exceed device memory; base copies on the host)") \
	X(readahead_pages, "pages", "pages populated ahead of a CPU access, or fetched from a device ahead of a CPU read (GAIA_READAHEAD_KB), or prefetched to a device ahead of a launch (regions paged on demand, GAIA_GPU_READAHEAD_KB), or asked to be read into the page cache ahead of a launch or of the fault front (regions read through HMM, GAIA_GPU_READAHEAD_KB; pages already there count too), or populated before a registration (regions read in place)") \
	X(fault_units, "units", "64 KiB units of regions paged on demand or read through HMM where kernels faulted, learned at syncs (GAIA_GPU_FAULTS)") \
	X(prefetch_windows, "windows", "windows of what kernels faulted on brought before a launch: prefetched to the device (regions paged on demand) or read into the page cache (regions read through HMM)") \
	X(front_windows, "windows", "windows ahead of where kernels fault, brought while they run: prefetched to the device (regions paged on demand) or read into the page cache (regions read through HMM); GAIA_GPU_FAULTS=cupti") \
	X(populate_chunks, "chunks", "chunks of a region read in place populated from the file before its registration (GAIA_GPU_READAHEAD_KB each, the next one read ahead meanwhile)") \
	X(readahead_hits, "pages", "pages of CPU reads served from what a read fetched ahead from a device") \
	X(cpu_dirty_pages, "pages", "pages the CPU wrote, collected at releases")   \
	X(device_dirty_pages, "pages", "pages a device wrote, found by diffing")     \
	X(h2d_bytes, "bytes", "bytes copied to devices")                            \
	X(h2d_transfers, "transfers", "copies to devices")                          \
	X(d2h_bytes, "bytes", "bytes copied from devices")                          \
	X(d2h_transfers, "transfers", "copies from devices")                        \
	X(paged_fill_bytes, "bytes", "bytes the CPU wrote into replicas paged on demand (mode M: not copies, so not in h2d_bytes; they reach the device at its faults and the shim's prefetches; a launch's rebase on the device is counted in h2d_bytes)") \
	X(merged_pages, "pages", "pages merged (3-way) into another replica")       \
	X(peer_read_bytes, "bytes", "bytes of CPU reads served from a device")      \
	X(conflict_bytes, "bytes", "bytes a device wrote that a higher device wrote otherwise since both acquired, found when the lower one syncs second (its write loses)") \
	X(writeback_pages, "pages", "pages of shared mappings a device's merge stored into (page cache pages the kernel writes back to the file)") \
	X(published_pages, "pages", "page versions published to the shared table")  \
	X(learned_pages, "pages", "pages other processes changed, learned at acquires") \
	X(checksummed_pages, "pages", "pages of mapped files read back to checksum them, for changes by writers not under the shim (a mapping's first look, when a device first holds a copy of it or at a gaia_macquire, then again where the file's times moved)") \
	X(acquires, "calls", "acquires of a mapping (at launches, gaia_macquire)")  \
	X(releases, "calls", "releases of a mapping by the CPU or a device")       \
	X(acquire_ns, "ns", "time spent in acquires (a launch's counted once)")    \
	X(release_ns, "ns", "time spent in releases")

enum gaia_stat {
#define GAIA_STAT_ENUM(name, unit, doc) GAIA_STAT_##name,
	GAIA_STATS_TABLE(GAIA_STAT_ENUM)
#undef GAIA_STAT_ENUM
	GAIA_STAT_COUNT
};

/* Adds n to a counter: one relaxed atomic add, safe from any thread and
 * from the fault path. Out-of-range s is ignored (stats_get returns 0). */
void stats_add(enum gaia_stat s, uint64_t n);
uint64_t stats_get(enum gaia_stat s);
/* The counter's name and unit from the table; NULL for a value outside
 * the enum. */
const char *stats_name(enum gaia_stat s);
const char *stats_unit(enum gaia_stat s);
/* Zeroes every counter (each store is atomic; the set as a whole is not a
 * snapshot against concurrent adds). */
void stats_reset(void);
/* Writes one line per counter ("gaia: <name> <value> <unit>") to fd with
 * write(2), formatting on the stack: safe in a preloaded library at exit.
 * Returns 0 or -errno. */
int stats_print(int fd);

#endif
