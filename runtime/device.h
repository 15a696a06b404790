/* Device replicas: the one ops table a backend implements, and the
 * executor that carries out the engine's plans (lrc.h) with it.
 *
 * A replica is a region's copy on one device plus, for a writable region,
 * its base copy (the bytes as of the device's last acquire or release,
 * DESIGN §3.3). Backends move whole pages between the host and a replica
 * and compare replica with base where the bytes are (on the device); the
 * executor decides nothing: it applies each action's byte rule
 * (lrc_page.h), fetching to the host only what a rule needs there.
 *
 * Pure logic over function pointers: no CUDA, no libc hooks, no threads.
 */
#ifndef GAIA_DEVICE_H
#define GAIA_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lrc.h"
#include "lrc_page.h"

enum device_copy { DEVICE_REPLICA = 1, DEVICE_BASE = 2 };

struct device_ops {
	/* Copies npages pages from host memory src into page `first` of the
	 * replica and/or its base (`to`: DEVICE_REPLICA | DEVICE_BASE; both
	 * costs one transfer, the base filled on the device). 0 or -errno. */
	int (*upload)(void *replica, unsigned to, uint64_t first, uint64_t npages, const void *src);
	/* Copies npages pages of the replica or of its base (`from`: one of
	 * them) to host memory dst. */
	int (*download)(void *replica, unsigned from, uint64_t first, uint64_t npages, void *dst);
	/* base := replica for the pages, on the device. */
	int (*commit)(void *replica, uint64_t first, uint64_t npages);
	/* Calls changed(first, n, arg) for each run of pages in
	 * [first, first+npages) where the replica differs from its base,
	 * compared on the device: only the answer crosses the bus. */
	int (*diff)(void *replica, uint64_t first, uint64_t npages,
		    void (*changed)(uint64_t first, uint64_t n, void *arg), void *arg);
	/* Optional (NULL, or -ENOTSUP at run time: the executor fetches
	 * replica and base instead). Gathers the listed pages of the replica
	 * into dev_out (npages * 4 KiB, in list order) and, per page, a mask
	 * of the bytes that differ from the base (one bit per byte: bit k of
	 * mask byte j is byte 8j+k; 512 bytes a page) into mask_out: one
	 * download of 4.5 KiB per changed page instead of 8. */
	int (*fetch_changes)(void *replica, const uint64_t *pages, uint64_t npages, void *dev_out,
			     uint8_t *mask_out);
	/* Optional (NULL, or -ENOTSUP at run time: the executor fetches
	 * replica and base, applies the rule and puts both back). The rebase
	 * rule without protect records (lrc_page_rebase with prot NULL) on
	 * pages [first, first+npages), where the bytes are: cpu holds the
	 * CPU's bytes of those pages. Only the CPU's bytes cross the bus, and
	 * a kernel still storing into those pages loses no store (each word
	 * is replaced by compare-and-swap), so a launch need not wait for the
	 * kernels before it. */
	int (*rebase)(void *replica, uint64_t first, uint64_t npages, const void *cpu);
	/* Optional (NULL, or -errno at run time: the diff compares when it
	 * runs). Queues the comparison of pages [first, first+npages) and
	 * returns without waiting for it: a host syncing while the program's
	 * kernels fill the device waits for the comparison without its lock.
	 * Only device_exec_run_diffs takes the answer (the pages as they were
	 * when the comparison ran); diff_drop forgets answers not taken. */
	int (*diff_start)(void *replica, uint64_t first, uint64_t npages);
	/* Forgets every answer diff_start queued (waiting for those still
	 * being computed). Required with diff_start. */
	void (*diff_drop)(void *replica);
};

/* A protect record per (device, page), kept sorted by page: records are
 * few (only pages two devices wrote in overlapping epochs). */
struct protect_map {
	struct protect_entry {
		uint64_t page;
		struct lrc_protect *rec;
	} *items;
	size_t count, capacity;
};

struct device_exec {
	const struct device_ops *ops;
	void *replica[TSVT_MAX_DEVICES]; /* NULL: the region has no copy there */
	const uint8_t *cpu;  /* the CPU replica's engine page 0, for reading */
	uint8_t *cpu_store;  /* the same bytes, where the shim stores into them */
	bool writable;       /* devices keep base copies (LRC_WRITABLE) */
	/* Pages [valid_pages, end) lie past the end of the file: never read or
	 * stored on the CPU side (a device gets zeros; its writes there are
	 * dropped, as a CPU store there would fault). */
	uint64_t valid_pages;
	/* Pages the shim must not store into either: bit p % 64 of
	 * no_store[p / 64], for p < no_store_pages (NULL: none). The program's
	 * mapping has no PROT_WRITE there; a device's writes to them are
	 * dropped, as a CPU store there would fault. */
	const uint64_t *no_store;
	uint64_t no_store_pages;
	/* Pages the shim must not read on the CPU side either (same layout,
	 * no_load_pages; NULL: none): the program's mapping has no PROT_READ
	 * there and is the only view of them (MAP_PRIVATE). A device gets
	 * zeros there, as past the end of the file. */
	const uint64_t *no_load;
	uint64_t no_load_pages;
	/* Called for LRC_PUBLISH; before the shim stores into CPU pages (a
	 * merge; storing may be NULL), and after (stored may be NULL). */
	void (*publish)(void *arg, uint64_t first, uint64_t npages);
	void (*storing)(void *arg, uint64_t first, uint64_t npages);
	void (*stored)(void *arg, uint64_t first, uint64_t npages);
	void *arg;
	struct protect_map prot[TSVT_MAX_DEVICES];
	uint8_t *staging; /* 2 * DEVICE_STAGING_PAGES pages, allocated on first use */
	uint8_t *masks;   /* DEVICE_STAGING_PAGES masks of fetch_changes */
	uint64_t *page_list;
	/* what moved, for the caller's accounting */
	uint64_t uploaded_pages, upload_transfers, downloaded_pages, merged_pages, merged_bytes;
	uint64_t conflict_bytes; /* lrc_page_conflicts over every merge */
	bool take_started;       /* in device_exec_run_diffs */
};

#define DEVICE_STAGING_PAGES 1024u

/* Carries out every action of the plan in order, then resets the plan.
 * Actions for devices without a replica are an error (-ENODEV): the
 * caller must only involve devices that have one. A failed action is
 * tried once more; a diff that fails twice counts its whole range as
 * changed; a merge into the CPU that fails twice holds back the commits
 * of its pages (the next sync's diff finds those changes again). 0 or
 * -errno (the first failure that remained; later actions are still
 * attempted so no device is left with half an epoch). */
int device_exec_run(struct device_exec *x, struct lrc_region *engine, struct lrc_plan *plan);

/* Queues the comparisons of the plan's LRC_DIFF actions on device d
 * (ops->diff_start, where there is one) and resets the plan: the host then
 * waits for them without its lock, and device_exec_run_diffs of the same
 * actions takes their answers. Answers queued for d before are dropped
 * first. */
void device_exec_start_diffs(struct device_exec *x, int d, struct lrc_plan *plan);

/* device_exec_run, where each LRC_DIFF takes the answer device_exec_start_diffs
 * queued for exactly its pages (else compares then); the answers for d not
 * taken are dropped after. device_exec_run drops every queued answer before
 * its first diff of a device: an answer never reaches another release than
 * its own. */
int device_exec_run_diffs(struct device_exec *x, int d, struct lrc_region *engine, struct lrc_plan *plan);

/* Forgets every protect record of device d (its replica went away). */
void device_exec_forget(struct device_exec *x, int d);
/* Frees everything the executor allocated. */
void device_exec_destroy(struct device_exec *x);

#endif
