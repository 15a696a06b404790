/* TSVT: the Time Stamp Version Table of one region (GAIA §4.2; DESIGN §3.3).
 *
 * Replicas and owner ids (DESIGN §1): the CPU is 0, device d is d+1; the
 * file is a replica too, whose version is the one of the cross-process
 * version table (DESIGN §3.3) this region last saw or published.
 *
 * Per 4 KiB page the table keeps the version each replica holds; version 0
 * means "not held". The newest version of a page is the highest version any
 * local replica holds: the replica that released it last keeps it (the CPU,
 * which acquires every release at once — GAIA's eager pairing — always does
 * after a complete operation), so it is derived, not stored.
 *
 * Layout, per page: file, CPU and one device inline (12 bytes); further
 * devices in chunks of TSVT_CHUNK_PAGES pages allocated only where that
 * device holds pages. A replica's dirty bit (and, for devices, a "protect
 * record exists" bit used by lrc.c) live in the top bits of its version
 * word. Dirty and stale pages are indexed by summary bitmaps of one bit per
 * TSVT_GROUP_PAGES pages, so finding them costs the groups that hold them
 * plus one pass over the summary, never a walk of the whole region.
 */
#ifndef GAIA_TSVT_H
#define GAIA_TSVT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pageset.h"

#define TSVT_MAX_DEVICES 8
#define TSVT_CPU 0                /* replica id of the CPU */
#define TSVT_DEV(d) ((d) + 1)     /* replica id (= owner id) of device d */
#define TSVT_GROUP_PAGES 64u      /* pages per summary bit */
#define TSVT_CHUNK_PAGES 512u     /* pages per chunk of an extra device */

#define TSVT_VERSION_MASK 0x1fffffffu
#define TSVT_DIRTY 0x80000000u   /* the replica wrote the page since its last release */
#define TSVT_PROTECT 0x40000000u /* device: a protect record exists (lrc.c) */
#define TSVT_STALE 0x20000000u   /* device: holds an older version than the newest */

struct tsvt_page {
	uint32_t file; /* version of the shared table last seen/published */
	uint32_t cpu;  /* TSVT_DIRTY | version */
	uint32_t dev;  /* the inline device slot: flags | version */
};

struct tsvt_device {
	bool attached;
	int slot;                /* 0 = the inline slot, else 1..7 = chunks[slot-1] */
	uint64_t *dirty_summary; /* one bit per group: may hold dirty pages */
	uint64_t *stale_summary; /* one bit per group: may hold stale pages */
	struct range_set held;   /* pages this device holds */
};

struct tsvt {
	uint64_t npages, ngroups, summary_words;
	struct tsvt_page *pages;
	uint64_t *cpu_dirty_summary;
	struct tsvt_device dev[TSVT_MAX_DEVICES];
	int inline_owner;                            /* device using the inline slot, or -1 */
	uint32_t **chunks[TSVT_MAX_DEVICES - 1];     /* extra slots: chunk tables */
	int extra_slots_used;
	int nattached;
	uint8_t attached[TSVT_MAX_DEVICES]; /* attached device indices, in order of attachment */
};

int tsvt_init(struct tsvt *t, uint64_t npages);
void tsvt_destroy(struct tsvt *t);

/* Makes device d known to the table. 0, -EINVAL, -ENOMEM. */
int tsvt_attach_device(struct tsvt *t, int d);

/* The version replica r (TSVT_CPU or TSVT_DEV(d)) holds of page p (0: not
 * held), and the newest version of p. */
uint32_t tsvt_version(const struct tsvt *t, int r, uint64_t p);
uint32_t tsvt_newest(const struct tsvt *t, uint64_t p);
bool tsvt_is_dirty(const struct tsvt *t, int r, uint64_t p);
bool tsvt_has_protect(const struct tsvt *t, int d, uint64_t p);
bool tsvt_is_stale(const struct tsvt *t, int d, uint64_t p);

/* Sets replica r's version of p, keeping its flag bits. For a device, the
 * page must be in a chunk that exists (it does once the page is held). */
void tsvt_set_version(struct tsvt *t, int r, uint64_t p, uint32_t v);
/* Device d now holds the newest version of p (it was brought up to date). */
void tsvt_set_current(struct tsvt *t, int d, uint64_t p);
void tsvt_set_protect(struct tsvt *t, int d, uint64_t p, bool on);

uint32_t tsvt_file_version(const struct tsvt *t, uint64_t p);
void tsvt_set_file_version(struct tsvt *t, uint64_t p, uint32_t v);

/* Marks pages [first, first+n) written by replica r (a device only where it
 * holds them). */
void tsvt_mark_dirty(struct tsvt *t, int r, uint64_t first, uint64_t n);

/* Gives p a new newest version, held by replica r, and marks every other
 * device that holds p stale on it. Returns the new version. */
uint32_t tsvt_bump(struct tsvt *t, int r, uint64_t p);

/* Appends to out, in page order, the pages replica r marked dirty, and
 * clears their dirty bits. 0 or -ENOMEM. */
int tsvt_take_dirty(struct tsvt *t, int r, struct page_list *out);

/* Takes out of device d's stale set, in page order, the pages in
 * [first, first+n) it holds at a version older than the newest: they are
 * appended to out and marked current (the caller brings their bytes up to
 * date). Summary bits are cleared for groups left with no stale page.
 * 0 or -ENOMEM. */
int tsvt_take_stale(struct tsvt *t, int d, uint64_t first, uint64_t n, struct page_list *out);

/* Held pages of device d. tsvt_hold marks [first, first+n) held at the
 * newest version (allocating chunk storage as needed); tsvt_unhold forgets
 * them (version 0, flags cleared). 0 or -ENOMEM. */
int tsvt_hold(struct tsvt *t, int d, uint64_t first, uint64_t n);
int tsvt_unhold(struct tsvt *t, int d, uint64_t first, uint64_t n);
bool tsvt_holds(const struct tsvt *t, int d, uint64_t p);

/* Bytes of metadata the table uses now (page records, summaries, chunks,
 * held sets): what the "bytes per page" budget is measured on. */
size_t tsvt_metadata_bytes(const struct tsvt *t);

#endif
