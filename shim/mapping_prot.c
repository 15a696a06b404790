/* Managed mappings whose protection changes (mprotect, pkey_mprotect):
 * which pages the CPU cannot read or write, and what devices then hold
 * there (DESIGN §3.1). The rest of a mapping's life is mapping.c's. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "lrc.h"
#include "mapping_internal.h"
#include "shim.h"

/* The part of [addr, addr+len) inside m, page-aligned; false if none. */
static bool overlap_of(const struct gaia_mapping *m, const void *addr, size_t len, uintptr_t *lo, uintptr_t *hi)
{
	uintptr_t a = (uintptr_t)addr & ~(uintptr_t)(GAIA_PAGE - 1), b = (uintptr_t)addr + len;
	*lo = a > m->start ? a : m->start;
	*hi = b < m->start + m->len ? b : m->start + m->len;
	return *lo < *hi;
}

static bool overlaps(const struct gaia_mapping *m, const void *addr, size_t len)
{
	uintptr_t lo, hi;
	return overlap_of(m, addr, len, &lo, &hi);
}

/* Sets or clears the bits of [lo, hi) of m (page-aligned, inside it) in
 * *bits, a bitmap of m's pages allocated on first need (every bit set
 * when `all_set`). With `forget`, the devices forget each page whose bit
 * goes: they hold zeros (unreadable) or the writes dropped there
 * (read-only), not the CPU's bytes, and take it again at their next
 * acquire (no CPU write is reported). False when the bitmap cannot be had. */
static bool mark_pages(uint64_t **bits, struct gaia_mapping *m, uintptr_t lo, uintptr_t hi, bool set, bool all_set,
		       bool forget)
{
	uint64_t npages = m->len / GAIA_PAGE;
	if (!*bits) {
		if (!set && !all_set)
			return true;
		if (!(*bits = calloc((npages + 63) / 64, sizeof(uint64_t))))
			return false;
		for (uint64_t p = 0; all_set && p < npages; p++)
			(*bits)[p / 64] |= 1ull << (p % 64);
	}
	uint64_t end = (hi - m->start + GAIA_PAGE - 1) / GAIA_PAGE, run = 0, forgotten = 0;
	end = end < npages ? end : npages;
	for (uint64_t p = (lo - m->start) / GAIA_PAGE; p <= end; p++) {
		bool cleared = false;
		if (p < end && set) {
			(*bits)[p / 64] |= 1ull << (p % 64);
		} else if (p < end && ((*bits)[p / 64] >> (p % 64) & 1)) {
			(*bits)[p / 64] &= ~(1ull << (p % 64));
			cleared = forget;
		}
		if (cleared) {
			run++;
		} else if (run) {
			forgotten += lrc_devices_forget_pages(&m->engine, p - run, run, &m->plan) == 0;
			run = 0;
		}
	}
	if (forgotten)
		mapping_run_plan_locked(m);
	return true;
}

/* m->read_only for [lo, hi), read-only or not; a mapping read-only until
 * now (was_writable false) has every other page read-only. */
static bool mark_read_only_locked(struct gaia_mapping *m, uintptr_t lo, uintptr_t hi, bool read_only,
				  bool was_writable)
{
	if (!mark_pages(&m->read_only, m, lo, hi, read_only, !was_writable, was_writable))
		return false;
	m->exec.no_store = m->read_only;
	m->exec.no_store_pages = m->len / GAIA_PAGE;
	return true;
}

/* Waits for the kernels that may read [addr, addr+len) of mappings read
 * through HMM (without the lock), then has them forgotten: for an mprotect
 * that is about to add PROT_WRITE (the range armed again) or take
 * PROT_READ off (never through HMM again). */
static void leave_hmm(void *addr, size_t len, bool adding_write)
{
	mapping_lock_take();
	bool any = false;
	for (struct gaia_mapping *m = mappings; m; m = m->next) {
		/* Never armed (its file open read-only): the mprotect fails. */
		if (!overlaps(m, addr, len) || (adding_write && !m->tracked && !m->unarmed))
			continue;
		if (adding_write)
			m->becoming_writable++; /* can be written: not unarmed until it returns */
		if (!adding_write && (m->flags & MAP_TYPE) == MAP_SHARED)
			m->no_hmm = true; /* before its first launch too */
		any |= m->pinned_hmm || (adding_write && m->unarmed);
	}
	mapping_lock_give();
	if (!any)
		return;
	unsigned held = gpu_mappings_quiesce ? gpu_mappings_quiesce(addr, len, true) : 0;
	mapping_lock_take();
	for (struct gaia_mapping *m = mappings; m; m = m->next) {
		if (!overlaps(m, addr, len) || (adding_write && !m->tracked && !m->unarmed))
			continue;
		if (m->pinned_hmm && gpu_mapping_forget_locked)
			gpu_mapping_forget_locked(m);
		if (adding_write)
			(void)mapping_rearm_locked(m);
	}
	mapping_lock_give();
	if (held)
		gpu_mappings_quiesce_end(held);
}

/* Before mprotect adds PROT_WRITE: ranges devices read through HMM are
 * left (their kernels waited for) and armed again, so that no write the
 * program makes once the protection changes goes unseen; they are not
 * unarmed again until mapping_writable_end. A mapping that can never be
 * written (its file open read-only: never armed) is left alone, the
 * mprotect fails. */
void mapping_before_writable(void *addr, size_t len)
{
	leave_hmm(addr, len, true);
}

void mapping_writable_end(void *addr, size_t len, bool maybe_applied)
{
	if (maybe_applied)
		mapping_made_writable(addr, len);
	mapping_lock_take();
	for (struct gaia_mapping *m = mappings; m; m = m->next)
		if ((m->tracked || m->unarmed) && m->becoming_writable && overlaps(m, addr, len))
			m->becoming_writable--;
	mapping_lock_give();
}

void mapping_before_unreadable(void *addr, size_t len)
{
	leave_hmm(addr, len, false);
}

void mapping_made_writable(void *addr, size_t len)
{
	/* A read-only mapping made writable loses its device copies: the
	 * kernels that may read them are waited for first, without the lock. */
	unsigned held = gpu_mappings_quiesce ? gpu_mappings_quiesce(addr, len, true) : 0;
	mapping_lock_take();
	for (struct gaia_mapping *m = mappings; m; m = m->next) {
		uintptr_t lo, hi;
		if (!overlap_of(m, addr, len, &lo, &hi))
			continue;
		bool was_writable = (m->engine.flags & LRC_WRITABLE) != 0;
		(void)mark_pages(&m->unreadable, m, lo, hi, false, false, true); /* PROT_WRITE reads too */
		/* Kernels' writes to the rest stay dropped; without the bitmap
		 * the mapping stays read-only to devices (no merge can store
		 * into a page the program can only read). */
		if (!mark_read_only_locked(m, lo, hi, false, was_writable)) {
			gaia_error("cannot track which pages of %s are writable (out of memory): kernels' "
				   "writes to it keep being dropped",
				   m->path);
			continue;
		}
		if (was_writable)
			continue;
		if (gpu_mapping_forget_locked)
			gpu_mapping_forget_locked(m);
		(void)mapping_rearm_locked(m); /* done before the mprotect unless it raced it */
		m->engine.flags |= LRC_WRITABLE;
		m->exec.writable = true;
		m->prot |= PROT_WRITE;
	}
	mapping_lock_give();
	if (held)
		gpu_mappings_quiesce_end(held);
}

struct marks_saved {
	struct gaia_mapping *m;
	uint64_t *read_only, *unreadable; /* copies, NULL where there was none */
	bool had_read_only, had_unreadable;
};

static uint64_t *copy_bits(const uint64_t *bits, const struct gaia_mapping *m, bool *ok)
{
	size_t bytes = (m->len / GAIA_PAGE + 63) / 64 * sizeof(uint64_t);
	uint64_t *c = bits ? malloc(bytes) : NULL;
	if (bits && !c)
		*ok = false;
	else if (c)
		memcpy(c, bits, bytes);
	return c;
}

static void restore_bits(uint64_t *bits, const uint64_t *copy, const struct gaia_mapping *m)
{
	size_t bytes = (m->len / GAIA_PAGE + 63) / 64 * sizeof(uint64_t);
	if (!bits)
		return;
	if (copy)
		memcpy(bits, copy, bytes);
	else
		memset(bits, 0, bytes);
}

int mapping_protect_dropping_write(void *addr, size_t len, int prot)
{
	mapping_lock_take();
	/* Marked before the protection changes: a sync in another thread
	 * must never store into a page the program can no longer write, nor
	 * an upload read one it can no longer read. */
	struct marks_saved saved[64];
	unsigned nsaved = 0;
	bool ok = true;
	for (struct gaia_mapping *m = mappings; m && ok; m = m->next) {
		uintptr_t lo, hi;
		bool writable = (m->engine.flags & LRC_WRITABLE) != 0;
		bool private = (m->flags & MAP_TYPE) == MAP_PRIVATE;
		if ((!writable && !private) || !overlap_of(m, addr, len, &lo, &hi))
			continue;
		if (nsaved == 64) {
			ok = false;
			break;
		}
		struct marks_saved *sv = &saved[nsaved++];
		*sv = (struct marks_saved){m, copy_bits(m->read_only, m, &ok), copy_bits(m->unreadable, m, &ok),
					   m->read_only != NULL, m->unreadable != NULL};
		if (ok && writable)
			ok = mark_read_only_locked(m, lo, hi, true, true);
		if (ok && private) {
			ok = mark_pages(&m->unreadable, m, lo, hi, !(prot & PROT_READ), false, true);
			m->exec.no_load = m->unreadable;
			m->exec.no_load_pages = m->len / GAIA_PAGE;
		}
	}
	int rc;
	if (!ok) {
		rc = -1;
		errno = ENOMEM; /* cannot keep devices off those pages: the protection stays */
	} else {
		rc = IO_GATED(addr, len, REAL(mprotect)(addr, len, prot));
	}
	int saved_errno = errno;
	for (unsigned i = 0; i < nsaved; i++) {
		struct marks_saved *sv = &saved[i];
		if (rc) {
			restore_bits(sv->m->read_only, sv->read_only, sv->m);
			restore_bits(sv->m->unreadable, sv->unreadable, sv->m);
		}
		free(sv->read_only);
		free(sv->unreadable);
	}
	mapping_lock_give();
	errno = saved_errno;
	return rc;
}
