/* The cross-process version table of one file (DESIGN §1 "Processes", §3.3
 * last paragraph).
 *
 * Processes that map the same file keep their own device replicas; what
 * they share is one table per file, in shared memory keyed by the file's
 * device and inode, that holds a version per page. A writer publishes
 * "page p changed" (sharedtab_publish bumps p's version); a reader learns at
 * its next acquire exactly which pages changed since its last look
 * (sharedtab_changes), in time proportional to what changed plus one pass
 * over the group words of its range, never the whole file.
 *
 * This module is only the layout and the lock-free algorithms over a block
 * of memory the caller provides: the shim creates, sizes and maps the
 * /dev/shm object; tests use plain or MAP_SHARED|MAP_ANONYMOUS memory.
 *
 * Layout (layout version 1; all integers native-endian, the block 8-byte
 * aligned; a table is only ever shared between processes of one machine):
 *
 *   [0, 128)          struct sharedtab_header; the epoch sits alone in the
 *                     second cache line, away from the read-only fields
 *   [128, +8*G)       uint64_t group_stamp[G], G = ceil(capacity / 64):
 *                     the epoch of the newest publish into that group
 *   [.., +4*capacity) uint32_t version[capacity]
 *
 * Versions: 0 means "never published"; publishing counts 1, 2, ...,
 * 0xffffffff, then 1 again (0 is skipped). Readers must therefore compare a
 * version with the one they last knew for *inequality*, never with "<".
 *
 * Concurrency: any number of processes and threads may publish and read at
 * once; every operation is a handful of C11 atomics on the block (no locks,
 * nothing a dead process could leave held). See sharedtab.c for why a
 * reader can never miss a change.
 *
 * Trust: a table is validated (sharedtab_validate) once when a process opens
 * it; the other calls then trust the header's capacity, which nothing but
 * sharedtab_format writes. Only the owner uid can write the object (the shim
 * creates it 0600), and such a process could corrupt this one anyway; the
 * checks are against stale, foreign, truncated or half-written tables.
 */
#ifndef GAIA_SHAREDTAB_H
#define GAIA_SHAREDTAB_H

#include <stddef.h>
#include <stdint.h>

#define SHAREDTAB_MAGIC "GAIAVTAB"   /* 8 bytes, no terminating NUL stored */
#define SHAREDTAB_LAYOUT_VERSION 2u
#define SHAREDTAB_HEADER_BYTES 128u
#define SHAREDTAB_GROUP_PAGES 64u    /* pages per group stamp */
#define SHAREDTAB_MAX_PAGES (1ull << 40) /* 4 PiB of 4 KiB pages */

struct sharedtab_header {
	char magic[8];             /* SHAREDTAB_MAGIC, stored last by format */
	uint32_t layout_version;   /* SHAREDTAB_LAYOUT_VERSION */
	uint32_t header_bytes;     /* SHAREDTAB_HEADER_BYTES */
	uint64_t dev, ino;         /* the file this table describes */
	uint32_t owner_uid;        /* who created it */
	uint32_t group_pages;      /* SHAREDTAB_GROUP_PAGES */
	uint64_t capacity_pages;   /* pages covered: [0, capacity_pages) */
	uint64_t birth;            /* the file's identity beyond (dev, ino): its
	                            * birth time or inode generation (0: none) */
	uint64_t reserved0[1];     /* zero */
	uint64_t epoch;            /* atomic: epoch of the newest completed publish */
	uint64_t reserved1[7];     /* zero */
};

_Static_assert(sizeof(struct sharedtab_header) == SHAREDTAB_HEADER_BYTES,
	       "sharedtab header layout");

/* Bytes a table of capacity_pages pages needs (header, group stamps and
 * versions); 0 when capacity_pages > SHAREDTAB_MAX_PAGES. */
size_t sharedtab_bytes(uint64_t capacity_pages);

/* Formats the size bytes at mem as the table of file (dev, ino, birth: an
 * inode number is reused once its file is gone, so a table of a file since
 * deleted must not serve the next one with the same number) owned by
 * uid, covering pages [0, capacity_pages). The block must be all zero (as a
 * fresh ftruncate'd shm object or anonymous mapping is); format writes only
 * the header, not the arrays, so a large sparse table stays sparse. The
 * magic is stored last with release order, so a process that validates the
 * block concurrently sees either no table (-EBADMSG: retry) or a complete
 * header.
 * 0; -EINVAL (mem NULL or not 8-byte aligned, capacity > SHAREDTAB_MAX_PAGES);
 * -ENOSPC (size < sharedtab_bytes(capacity_pages)); -EEXIST (the block
 * already holds a table: it is left as it is). */
int sharedtab_format(void *mem, size_t size, uint64_t dev, uint64_t ino, uint64_t birth,
		     uint32_t uid, uint64_t capacity_pages);

/* Whether the size bytes at mem are a usable table of file (dev, ino, birth) owned
 * by uid. Reads nothing outside [mem, mem + size), whatever the block holds.
 * 0; -EINVAL (mem NULL or not 8-byte aligned); -EBADMSG (smaller than a
 * header, wrong magic, layout version, header size or group size, nonzero
 * reserved fields, capacity over the maximum or not fitting in size);
 * -ESTALE (a table of another file: dev, ino or birth differ); -EPERM (owner uid
 * differs). Format errors are reported before identity errors. */
int sharedtab_validate(const void *mem, size_t size, uint64_t dev, uint64_t ino, uint64_t birth,
		       uint32_t uid);

/* The file a block made by sharedtab_format names, whatever its layout
 * version (dev and ino have kept their place since the first): 0 with
 * *dev and *ino; -EBADMSG when the block is smaller than a header or has
 * not the magic. For deciding whether an unusable table is a stale one of
 * the same file (to be replaced) or a foreign object (to be left alone). */
int sharedtab_identity(const void *mem, size_t size, uint64_t *dev, uint64_t *ino);

/* The pages a validated table covers. */
uint64_t sharedtab_capacity(const void *mem);

/* The current version of page (0: never published, or page >= capacity). */
uint32_t sharedtab_version(const void *mem, uint64_t page);

/* Publishes "page changed": atomically bumps its version (skipping 0 on
 * wrap) and stamps its group with a new epoch, so that every reader's next
 * sharedtab_changes reports it (see sharedtab_changes for the exact
 * guarantee). Returns the new version, which the publisher records as the
 * version it knows so that it can ignore its own change when it reads.
 * Lock-free: it retries only when another publish completed meanwhile.
 * Returns 0 and does nothing for page >= capacity (the file grew past the
 * table: the caller falls back, e.g. to checksums, or makes a larger table).
 * A process killed inside publish may leave the new version unannounced
 * until the next publish into the same group; nothing stays locked. */
uint32_t sharedtab_publish(void *mem, uint64_t page);


/* A reader's position in one table, for one page range. Zero-initialised
 * means "seen nothing": the first call reports every page ever published in
 * the range. */
struct sharedtab_cursor {
	uint64_t seen; /* the table epoch this reader has seen up to */
};

typedef void (*sharedtab_change_fn)(uint64_t page, uint32_t version, void *arg);

/* Reports the pages of [first_page, first_page + npages) (clipped to the
 * capacity) that may have changed since the cursor: calls fn(page, version,
 * arg) for every page of that range with a nonzero version whose group was
 * stamped since cur->seen, in increasing page order, then advances the
 * cursor. The report is per group: unchanged pages of a changed group, and
 * the caller's own publishes, come too, so the caller compares version with
 * the one it last knew (for inequality) and ignores equal ones.
 *
 * Guarantee (proved in sharedtab.c): every publish that happened before this
 * call began is reported, with its version or a newer one, by this call or
 * by an earlier call on the same cursor; a publish that overlaps this call
 * is reported by this call or the next one. Versions reported for a page
 * never go backwards (modulo wrap) across calls.
 *
 * Cost: one atomic load of the epoch when nothing was published since the
 * cursor (fn is not called); otherwise one load per group word of the range
 * plus one per page of the groups stamped since the cursor.
 *
 * A cursor belongs to one table and one range: calling with another range
 * advances it past changes outside that range, so use one cursor per range.
 * A cursor ahead of the table's epoch (the table was recreated) is reset to
 * "seen nothing". fn may be NULL (only count). Returns the number of fn
 * calls, or -EINVAL for a NULL mem or cursor. */
int64_t sharedtab_changes(const void *mem, struct sharedtab_cursor *cur, uint64_t first_page,
			  uint64_t npages, sharedtab_change_fn fn, void *arg);

#endif
