/* Managed file mappings: their engine state (runtime/lrc.h), the CPU's
 * release at msync, munmap, fork and exit, and its acquire of what other
 * processes changed (DESIGN §3.1, §3.3). Which mappings are managed is
 * admission.c's; protection changes are mapping_prot.c's; device replicas
 * gpu_mapping.c's.
 *
 * The CPU replica is the kernel's own mapping of the file: the shim never
 * copies it. It registers the range for write tracking, gives every page a
 * version, and at each release turns the pages the CPU wrote (from the
 * tracker, and from write()/pwrite() on the file) into new versions.
 *
 * Locking: one mutex (`lock`) orders every change to the set of mappings
 * and every engine call; the region table's own read lock serves address
 * lookups that need no engine state.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lrc.h"
#include "mapping_internal.h"
#include "region.h"
#include "sharedtab.h"
#include "shim.h"
#include "stats.h"



pthread_mutex_t mapping_lock = PTHREAD_MUTEX_INITIALIZER;

/* The shim's locks this thread holds, is taking or has just let go of
 * (mapping_lock, the region table's): a signal handler that runs on it
 * then must not wait for mapping_lock, which it could be waiting for
 * itself or for a thread that waits for this one (see
 * mapping_file_resize_begin). Raised before a lock is taken and lowered
 * after it is let go, so that it is never zero while one is this
 * thread's. */
static __thread unsigned locks_mine __attribute__((tls_model("initial-exec")));

static void locks_mine_enter(void)
{
	locks_mine++;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
}

static void locks_mine_leave(void)
{
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	locks_mine--;
}
static struct region_table regions;
static pthread_once_t regions_once = PTHREAD_ONCE_INIT;
struct gaia_mapping *mappings;
static int mapping_count; /* read without the lock: a hint for the hooks */

static void regions_init(void)
{
	if (region_table_init(&regions))
		gaia_error("cannot initialise the region table: out of memory");
}

bool mapping_any(void)
{
	return __atomic_load_n(&mapping_count, __ATOMIC_RELAXED) > 0 && gaia_process_is_ours();
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* --- creating and forgetting mappings --- */

static uint64_t file_page_of(const struct gaia_mapping *m, uint64_t page)
{
	return m->offset / GAIA_PAGE + page;
}

static void publish_pages(void *arg, uint64_t first, uint64_t n);

static void ignore_change(uint64_t page, uint32_t version, void *arg)
{
	(void)page, (void)version, (void)arg;
}

/* Joins the file's cross-process version table: from now on this mapping
 * learns what others publish. The cursor is moved to "now" before the
 * versions are read, so a publish in between is seen again, not lost. */
static void attach_shared_table_locked(struct gaia_mapping *m, uint64_t file_size)
{
	uint64_t file_pages = (file_size + GAIA_PAGE - 1) / GAIA_PAGE;
	uint64_t end_page = (m->offset + m->len) / GAIA_PAGE;
	m->shared = shared_file_get(m->fd, m->dev, m->ino, file_pages > end_page ? file_pages : end_page);
	if (!m->shared)
		return;
	uint64_t npages = m->len / GAIA_PAGE;
	shared_file_changes(m->shared, &m->cursor, file_page_of(m, 0), npages, ignore_change, NULL);
	for (uint64_t p = 0; p < npages; p++)
		tsvt_set_file_version(&m->engine.tsvt, p, shared_file_version(m->shared, file_page_of(m, p)));
}

void mapping_adopt(void *addr, size_t len, int prot, int flags, int fd, off_t offset,
		   const char *path, void *caller)
{
	static int tracker_failed_once, register_failed_once, no_fd_once;
	pthread_once(&regions_once, regions_init);
	if (tracker_init()) {
		gaia_log_once(&tracker_failed_once, GAIA_LOG_INFO,
			      "no CPU write tracking: %s passes through unmanaged", path);
		return;
	}
	len = (len + GAIA_PAGE - 1) & ~(GAIA_PAGE - 1);
	struct stat st;
	if (fstat(fd, &st))
		return;
	/* Write tracking is per page table entry: a file folio mapped by a
	 * 2 MiB entry would report all its 512 pages when one is written. */
	REAL(madvise)(addr, len, MADV_NOHUGEPAGE);
	size_t populated = mapping_populate_resident(addr, len, fd, (uint64_t)offset);
	bool tracked = !mapping_never_writable(flags, fd);
	int rc = tracked ? tracker_register(addr, len) : 0;
	if (rc) {
		gaia_log_once(&register_failed_once, GAIA_LOG_WARN,
			      "cannot track writes to the mapping of %s (%zu bytes): %s failed: %s; "
			      "it and mappings like it pass through unmanaged", path, len,
			      tracker_mode() == TRACKER_UFFD_WP ? "userfaultfd ioctl UFFDIO_REGISTER"
								: "write tracking",
			      strerror(-rc));
		return;
	}
	size_t path_len = strlen(path);
	struct gaia_mapping *m = calloc(1, sizeof(*m) + path_len + 1);
	if (!m)
		return;
	memcpy(m->path, path, path_len + 1);
	m->start = (uintptr_t)addr;
	m->len = len;
	m->offset = (uint64_t)offset;
	m->dev = st.st_dev;
	m->ino = st.st_ino;
	m->prot = prot;
	m->flags = flags;
	m->tracked = tracked;
	m->fd = gaia_fd_keep(fcntl(fd, F_DUPFD_CLOEXEC, 3));
	int fd_errno = m->fd < 0 ? errno : 0;
	m->exec.cpu = (const uint8_t *)addr;
	m->exec.cpu_store = (uint8_t *)addr;
	m->exec.writable = (prot & PROT_WRITE) != 0;
	m->exec.publish = publish_pages;
	m->exec.arg = m;
	unsigned engine_flags = ((prot & PROT_WRITE) ? LRC_WRITABLE : 0) |
				((flags & MAP_TYPE) == MAP_PRIVATE ? 0 : LRC_SHARED);
	struct region r = {.start = m->start, .end = m->start + len, .file_offset = m->offset,
			   .st_dev = st.st_dev, .st_ino = st.st_ino, .prot = prot, .flags = flags,
			   .owner = m, .owner_page = 0};
	mapping_lock_take();
	if (m->fd < 0 || lrc_region_init(&m->engine, len / GAIA_PAGE, engine_flags) ||
	    region_insert(&regions, &r)) {
		mapping_lock_give();
		/* Out of descriptors is the program's limit, met again at every
		 * mapping after this one: said once, with its cause. */
		if (m->fd < 0)
			gaia_log_once(&no_fd_once, GAIA_LOG_WARN,
				      "cannot keep a descriptor of %s (the shim holds one per managed "
				      "mapping): %s; it and later mappings that meet the same limit "
				      "pass through unmanaged", path, strerror(fd_errno));
		else
			gaia_warn("cannot manage the mapping of %s at %p: out of memory or "
				  "overlap; it passes through unmanaged", path, addr);
		gaia_fd_release(m->fd);
		lrc_region_destroy(&m->engine);
		free(m);
		return;
	}
	if ((flags & MAP_TYPE) != MAP_PRIVATE)
		attach_shared_table_locked(m, (uint64_t)st.st_size);
	/* Checksums are first taken when a change would matter: at a
	 * device's first copy, or gaia_macquire (look_at_file_locked). */
	m->sums = page_sums_new(len / GAIA_PAGE);
	m->own_changes = calloc((len / GAIA_PAGE + 63) / 64, sizeof(uint64_t));
	m->file_written = calloc((len / GAIA_PAGE + 63) / 64, sizeof(uint64_t));
	io_gate_cover(m->start, m->len);
	m->next = mappings;
	mappings = m;
	__atomic_add_fetch(&mapping_count, 1, __ATOMIC_RELAXED);
	fd_ident_file_managed(m->dev, m->ino);
	mapping_lock_give();
	release_timer_start();
	stats_add(GAIA_STAT_managed_mappings, 1);
	stats_add(GAIA_STAT_readahead_pages, populated);
	if (gaia_config()->log >= GAIA_LOG_INFO) {
		char where[256];
		mapping_describe_caller(caller, where, sizeof(where));
		gaia_info("managing %s: %zu KiB at %p, file offset %lld, %s, %s, mapped by %s; "
			  "%zu resident pages populated", path, len / 1024, addr, (long long)offset,
			  (flags & MAP_TYPE) == MAP_PRIVATE ? "MAP_PRIVATE" : "MAP_SHARED",
			  (prot & PROT_WRITE) ? "read-write" : "read-only", where, populated);
	}
}

static void destroy_mapping_locked(struct gaia_mapping *m)
{
	for (struct gaia_mapping **pp = &mappings; *pp; pp = &(*pp)->next) {
		if (*pp == m) {
			*pp = m->next;
			break;
		}
	}
	__atomic_sub_fetch(&mapping_count, 1, __ATOMIC_RELAXED);
	fd_ident_file_unmanaged(m->dev, m->ino);
	if (gpu_mapping_forget_locked)
		gpu_mapping_forget_locked(m);
	device_exec_destroy(&m->exec);
	free(m->own_changes);
	free(m->file_written);
	free(m->outside_changes);
	free(m->read_only);
	free(m->unreadable);
	if (m->pad_len) {
		REAL(munmap)((void *)m->pad_start, m->pad_len);
		mapping_padding_gone(m->pad_start, m->pad_len);
	}
	shared_file_put(m->shared);
	page_sums_free(m->sums);
	gaia_fd_release(m->fd);
	lrc_plan_free(&m->plan);
	lrc_region_destroy(&m->engine);
	free(m);
}

/* --- the CPU's release --- */

void mapping_note_own_change_locked(struct gaia_mapping *m, uint64_t first, uint64_t n)
{
	for (uint64_t p = first; m->own_changes && p < first + n && p < m->len / GAIA_PAGE; p++)
		m->own_changes[p / 64] |= 1ull << (p % 64);
}

/* The CPU wrote pages [first, first+n) of m: the engine's dirty pages,
 * and this process's own changes. */
static void cpu_wrote_locked(struct gaia_mapping *m, uint64_t first, uint64_t n)
{
	lrc_cpu_wrote(&m->engine, first, n);
	mapping_note_own_change_locked(m, first, n);
}

static void mark_cpu_written(uintptr_t start, uintptr_t end, void *arg)
{
	struct gaia_mapping *m = arg;
	cpu_wrote_locked(m, (start - m->start) / GAIA_PAGE, (end - start) / GAIA_PAGE);
}

/* Asks the tracker for m's written pages (every live piece). */
static void collect_one_locked(struct gaia_mapping *m)
{
	/* A mapping that never had PROT_WRITE (mprotect adding it sets it
	 * in m->prot) was not written through. */
	if (!m->tracked || !(m->prot & PROT_WRITE))
		return;
	const struct range_set *live = &m->engine.live;
	if (m->rearm_failed) {
		for (size_t i = 0; i < live->count; i++)
			lrc_cpu_wrote(&m->engine, live->items[i].first, live->items[i].end - live->items[i].first);
		return;
	}
	for (size_t i = 0; i < live->count; i++) {
		uintptr_t a = m->start + live->items[i].first * GAIA_PAGE;
		size_t n = (live->items[i].end - live->items[i].first) * GAIA_PAGE;
		int rc = tracker_collect((void *)a, n, mark_cpu_written, m);
		if (rc) {
			static int once;
			gaia_log_once(&once, GAIA_LOG_ERROR,
				      "collecting written pages of %s failed: %s: %s; treating the "
				      "whole mapping as written", m->path,
				      tracker_mode() == TRACKER_UFFD_WP ? "ioctl PAGEMAP_SCAN"
									: "read of /proc/self/pagemap",
				      strerror(-rc));
			lrc_cpu_wrote(&m->engine, live->items[i].first,
				      live->items[i].end - live->items[i].first);
		}
	}
}

int mapping_unarm_locked(struct gaia_mapping *m)
{
	if (m->unarmed || !m->tracked || tracker_mode() != TRACKER_UFFD_WP)
		return 0;
	if ((m->prot & PROT_WRITE) || (m->engine.flags & LRC_WRITABLE) || m->becoming_writable)
		return -EBUSY; /* its writes would go unseen */
	const struct range_set *live = &m->engine.live;
	for (size_t i = 0; i < live->count; i++) {
		int rc = tracker_unregister((void *)(m->start + live->items[i].first * GAIA_PAGE),
					    (live->items[i].end - live->items[i].first) * GAIA_PAGE);
		if (rc) {
			/* Pieces already off are armed again: all or nothing. */
			m->unarmed = true;
			m->tracked = false;
			(void)mapping_rearm_locked(m);
			return rc;
		}
	}
	m->tracked = false;
	m->unarmed = true;
	return 0;
}

int mapping_rearm_locked(struct gaia_mapping *m)
{
	if (!m->unarmed)
		return 0;
	const struct range_set *live = &m->engine.live;
	int rc = 0;
	for (size_t i = 0; i < live->count && !rc; i++)
		rc = tracker_register((void *)(m->start + live->items[i].first * GAIA_PAGE),
				      (live->items[i].end - live->items[i].first) * GAIA_PAGE);
	m->unarmed = false;
	m->tracked = true;
	m->rearm_failed = rc != 0;
	if (rc) {
		gaia_error("%s: cannot track writes to it again after devices read it through HMM: userfaultfd "
			   "ioctl UFFDIO_REGISTER failed: %s; every page counts as written at each release",
			   m->path, strerror(-rc));
	}
	return rc;
}

/* Soft-dirty bits are per process: collect every mapping, then rearm. */
void mapping_collect_locked(struct gaia_mapping *m)
{
	if (tracker_mode() != TRACKER_SOFT_DIRTY) {
		collect_one_locked(m);
		return;
	}
	for (struct gaia_mapping *it = mappings; it; it = it->next)
		collect_one_locked(it);
	tracker_rearm();
}

/* Publishing gives each page the table's next version; the mapping
 * remembers it, so its own publishes never come back as others' changes. */
static void mapping_publish_locked(struct gaia_mapping *m, uint64_t first, uint64_t n)
{
	stats_add(GAIA_STAT_published_pages, n);
	for (uint64_t p = first; m->shared && p < first + n; p++) {
		uint32_t v = shared_file_publish(m->shared, file_page_of(m, p));
		if (v)
			tsvt_set_file_version(&m->engine.tsvt, p, v);
	}
}

static void publish_pages(void *arg, uint64_t first, uint64_t n)
{
	mapping_publish_locked(arg, first, n);
}

/* Device actions appear only once a device holds pages of m. */
static int plan_ran(struct gaia_mapping *m, int rc)
{
	if (rc) {
		static int once;
		gaia_log_once(&once, GAIA_LOG_ERROR, "moving pages of %s between replicas failed: %s",
			      m->path, strerror(-rc));
	}
	return rc;
}

int mapping_run_plan_locked(struct gaia_mapping *m)
{
	return plan_ran(m, device_exec_run(&m->exec, &m->engine, &m->plan));
}

int mapping_run_diffs_locked(struct gaia_mapping *m, int dev)
{
	return plan_ran(m, device_exec_run_diffs(&m->exec, dev, &m->engine, &m->plan));
}

void mapping_release_locked(struct gaia_mapping *m)
{
	uint64_t t0 = now_ns();
	mapping_collect_locked(m);
	int rc = lrc_cpu_release(&m->engine, &m->plan);
	uint64_t published = 0;
	for (size_t i = 0; i < m->plan.count; i++)
		if (m->plan.items[i].kind == LRC_PUBLISH)
			published += m->plan.items[i].npages;
	mapping_run_plan_locked(m);
	if (rc)
		gaia_error("release of %s failed: %s", m->path, strerror(-rc));
	stats_add(GAIA_STAT_cpu_dirty_pages, published);
	stats_add(GAIA_STAT_releases, 1);
	stats_add(GAIA_STAT_release_ns, now_ns() - t0);
}

/* The distinct mappings with a piece overlapping a range. */
struct overlap_walk {
	struct gaia_mapping **seen;
	size_t nseen, capacity;
	bool out_of_memory;
};

static int visit_overlap(const struct region *r, void *arg)
{
	struct overlap_walk *w = arg;
	struct gaia_mapping *m = r->owner;
	for (size_t i = 0; i < w->nseen; i++)
		if (w->seen[i] == m)
			return 0;
	if (w->nseen == w->capacity) {
		size_t cap = w->capacity ? w->capacity * 2 : 8;
		struct gaia_mapping **seen = realloc(w->seen, cap * sizeof(*seen));
		if (!seen) {
			w->out_of_memory = true;
			return 1;
		}
		w->seen = seen;
		w->capacity = cap;
	}
	w->seen[w->nseen++] = m;
	return 0;
}

static int for_each_overlapping_locked(const void *addr, size_t len,
				       void (*fn)(struct gaia_mapping *m))
{
	struct overlap_walk w = {0};
	pthread_once(&regions_once, regions_init);
	region_for_each(&regions, (uintptr_t)addr, len, visit_overlap, &w);
	if (w.out_of_memory)
		gaia_error("out of memory walking the mappings at %p: some were not released", addr);
	for (size_t i = 0; i < w.nseen; i++)
		fn(w.seen[i]);
	free(w.seen);
	return (int)w.nseen;
}

bool mapping_overlaps(const void *addr, size_t len)
{
	if (!mapping_any())
		return false;
	struct overlap_walk w = {0};
	pthread_once(&regions_once, regions_init);
	locks_mine_enter(); /* the region table's read lock */
	region_for_each(&regions, (uintptr_t)addr, len, visit_overlap, &w);
	locks_mine_leave();
	free(w.seen);
	return w.nseen > 0;
}

/* Whether [addr, addr+len) lies inside one piece of one managed mapping
 * (and, with need_write, one mapped with PROT_WRITE). */
struct within_walk {
	uintptr_t start, end;
	unsigned pieces;
	bool inside, writable;
};

static int visit_within(const struct region *r, void *arg)
{
	struct within_walk *w = arg;
	w->pieces++;
	w->inside = r->start <= w->start && w->end <= r->end;
	w->writable = (r->prot & PROT_WRITE) != 0;
	return 0;
}

bool mapping_within_one(const void *addr, size_t len, bool need_write)
{
	uintptr_t a = (uintptr_t)addr;
	if (!mapping_any() || !len || a + len < a)
		return false;
	struct within_walk w = {.start = a, .end = a + len};
	pthread_once(&regions_once, regions_init);
	locks_mine_enter(); /* the region table's read lock */
	region_for_each(&regions, a, len, visit_within, &w);
	locks_mine_leave();
	return w.pieces == 1 && w.inside && (!need_write || w.writable);
}

int mapping_release_range(const void *addr, size_t len)
{
	if (!mapping_any())
		return -ENOENT;
	mapping_lock_take();
	int found = for_each_overlapping_locked(addr, len, mapping_release_locked);
	mapping_lock_give();
	return found ? 0 : -ENOENT;
}

struct learn {
	struct gaia_mapping *m;
	uint64_t learned;
};

static void learn_change(uint64_t file_page, uint32_t version, void *arg)
{
	struct learn *l = arg;
	struct gaia_mapping *m = l->m;
	uint64_t p = file_page - file_page_of(m, 0);
	if (p >= m->len / GAIA_PAGE || !range_set_contains(&m->engine.live, p) ||
	    version == tsvt_file_version(&m->engine.tsvt, p))
		return;
	tsvt_set_file_version(&m->engine.tsvt, p, version);
	lrc_file_changed(&m->engine, p, 1, &m->plan);
	l->learned++;
}

static bool page_live(uint64_t page, void *arg)
{
	return range_set_contains(&((struct learn *)arg)->m->engine.live, page);
}

/* A page whose checksum moved because this process changed it (a store,
 * a write(), a device's merged result) is no news: its version moved
 * already, and with it whatever another writer put there meanwhile. */
static void learn_checksum_change(uint64_t page, void *arg)
{
	struct learn *l = arg;
	if (l->m->own_changes && (l->m->own_changes[page / 64] >> (page % 64) & 1))
		return;
	lrc_file_changed(&l->m->engine, page, 1, &l->m->plan);
	l->learned++;
}

/* Writers that publish nothing: the file's times, then checksums.
 * Once a first look was taken every acquire looks; the first one is taken
 * only where a change would matter (first_look): by a device's first copy
 * of the mapping (mapping_first_look_locked) and by gaia_macquire. A
 * launch that reads a region in place (its kernels read the page cache
 * itself) or does not use it takes none: reading a file whole to learn
 * nothing would defeat reading it on demand. */
static void look_at_file_locked(struct gaia_mapping *m, struct learn *l, bool first_look)
{
	if (!m->sums || (!first_look && !m->sums_wanted && !page_sums_ready(m->sums)))
		return;
	/* A first look that fails is taken again at every acquire. */
	m->sums_wanted = true;
	uint64_t read0 = page_sums_pages_read(m->sums);
	int rc = page_sums_refresh(m->sums, m->fd, m->offset, page_live, learn_checksum_change, l);
	stats_add(GAIA_STAT_checksummed_pages, page_sums_pages_read(m->sums) - read0);
	if (rc >= 0 && m->own_changes)
		memset(m->own_changes, 0, (m->len / GAIA_PAGE + 63) / 64 * sizeof(uint64_t));
	if (rc < 0) {
		/* Whatever another writer did is unknown: every page may
		 * have changed. */
		static int once;
		gaia_log_once(&once, GAIA_LOG_WARN,
			      "checksumming %s failed: pread: %s; every page is counted as "
			      "changed by another writer", m->path, strerror(-rc));
		for (uint64_t p = 0; p < m->len / GAIA_PAGE; p++)
			if (page_live(p, l))
				learn_checksum_change(p, l);
	}
}

void mapping_first_look_locked(struct gaia_mapping *m)
{
	if (!m->sums || page_sums_ready(m->sums))
		return;
	struct learn l = {.m = m};
	look_at_file_locked(m, &l, true);
	mapping_run_plan_locked(m);
	stats_add(GAIA_STAT_learned_pages, l.learned);
}

static void acquire_locked(struct gaia_mapping *m, bool first_look)
{
	struct learn l = {.m = m};
	if (m->shared)
		shared_file_changes(m->shared, &m->cursor, file_page_of(m, 0), m->len / GAIA_PAGE,
				    learn_change, &l);
	look_at_file_locked(m, &l, first_look);
	mapping_run_plan_locked(m);
	stats_add(GAIA_STAT_learned_pages, l.learned);
	stats_add(GAIA_STAT_acquires, 1);
	if (l.learned)
		gaia_debug("%s: %llu pages changed by other processes", m->path,
			   (unsigned long long)l.learned);
}

void mapping_acquire_locked(struct gaia_mapping *m)
{
	acquire_locked(m, false);
}

static void program_acquire_locked(struct gaia_mapping *m)
{
	acquire_locked(m, true);
}

int mapping_acquire_range(const void *addr, size_t len)
{
	if (!mapping_any())
		return -ENOENT;
	uint64_t t0 = now_ns();
	mapping_lock_take();
	int found = for_each_overlapping_locked(addr, len, program_acquire_locked);
	mapping_lock_give();
	stats_add(GAIA_STAT_acquire_ns, now_ns() - t0);
	return found ? 0 : -ENOENT;
}

void mapping_release_all(void)
{
	mapping_lock_take();
	for (struct gaia_mapping *m = mappings; m; m = m->next)
		mapping_release_locked(m);
	mapping_lock_give();
}

void mapping_at_exit(void)
{
	mapping_lock_take();
	for (struct gaia_mapping *m = mappings; m; m = m->next) {
		mapping_release_locked(m);
		/* Threads still running publish nothing more (m->shared is NULL). */
		shared_file_put(m->shared);
		m->shared = NULL;
	}
	mapping_lock_give();
}

/* --- pieces going away --- */

struct removed_piece {
	struct gaia_mapping *m;
	uint64_t first, n;
};

/* Filled under the region table's write lock (no allocation may call back
 * into the table; realloc does not). */
struct removed_list {
	struct removed_piece *items;
	size_t count, capacity;
	bool out_of_memory;
};

static void note_removed(const struct region *piece, void *arg)
{
	struct removed_list *l = arg;
	if (l->count == l->capacity) {
		size_t cap = l->capacity ? l->capacity * 2 : 8;
		struct removed_piece *items = realloc(l->items, cap * sizeof(*items));
		if (!items) {
			l->out_of_memory = true;
			return;
		}
		l->items = items;
		l->capacity = cap;
	}
	l->items[l->count++] = (struct removed_piece){
		piece->owner, piece->owner_page, (piece->end - piece->start) / GAIA_PAGE};
}

/* Devices release first (what their kernels wrote reaches the file), and
 * their replicas go: a replica never outlives part of its region. */
static void release_with_devices_locked(struct gaia_mapping *m)
{
	if (gpu_mapping_forget_locked)
		gpu_mapping_forget_locked(m);
	mapping_release_locked(m);
}

void mapping_forget_range(void *addr, size_t len)
{
	if (!mapping_any())
		return;
	uintptr_t start = (uintptr_t)addr & ~(GAIA_PAGE - 1);
	size_t span = (((uintptr_t)addr + len + GAIA_PAGE - 1) & ~(GAIA_PAGE - 1)) - start;
	/* Kernels that may use those mappings are waited for first, without
	 * the lock: a thread writing another managed file does not wait too. */
	unsigned held = gpu_mappings_quiesce ? gpu_mappings_quiesce((void *)start, span, false) : 0;
	mapping_lock_take();
	/* munmap is a release point: what the CPU wrote there is published
	 * before the pages go (the kernel keeps the bytes themselves). */
	for_each_overlapping_locked((void *)start, span, release_with_devices_locked);
	struct removed_list removed = {0};
	region_remove_range(&regions, start, span, note_removed, &removed);
	if (removed.out_of_memory)
		gaia_error("out of memory forgetting the mappings at %p: engine state leaks", addr);
	for (size_t i = 0; i < removed.count; i++) {
		struct gaia_mapping *m = removed.items[i].m;
		lrc_drop(&m->engine, removed.items[i].first, removed.items[i].n, &m->plan);
		mapping_run_plan_locked(m);
		if (m->engine.live.count == 0)
			destroy_mapping_locked(m);
	}
	free(removed.items);
	mapping_lock_give();
	if (held)
		gpu_mappings_quiesce_end(held);
}

/* --- writes through the file --- */

static void apply_file_write_locked(dev_t dev, ino_t ino, uint64_t offset, uint64_t len)
{
	for (struct gaia_mapping *m = mappings; m; m = m->next) {
		if (m->dev != dev || m->ino != ino)
			continue;
		uint64_t a = offset > m->offset ? offset : m->offset;
		uint64_t b = offset + len < m->offset + m->len ? offset + len : m->offset + m->len;
		if (a >= b)
			continue;
		uint64_t first = (a - m->offset) / GAIA_PAGE;
		uint64_t last = (b - m->offset + GAIA_PAGE - 1) / GAIA_PAGE;
		if (!m->file_written) {
			cpu_wrote_locked(m, first, last - first);
			continue;
		}
		for (uint64_t p = first; p < last; p++)
			m->file_written[p / 64] |= 1ull << (p % 64);
		m->file_written_any = true;
	}
}

/* Tells the engine of every page written through the file since the last
 * take (m->file_written), in page order. */
static void fold_file_writes_locked(void)
{
	for (struct gaia_mapping *m = mappings; m; m = m->next) {
		if (!m->file_written_any)
			continue;
		m->file_written_any = false;
		uint64_t npages = m->len / GAIA_PAGE, run = 0;
		for (uint64_t p = 0; p <= npages; p++) {
			if (p % 64 == 0 && p + 64 <= npages && !run && !m->file_written[p / 64]) {
				p += 63; /* a word with nothing written */
				continue;
			}
			if (p < npages && (m->file_written[p / 64] >> (p % 64) & 1)) {
				run++;
				continue;
			}
			if (run)
				cpu_wrote_locked(m, p - run, run);
			run = 0;
		}
		memset(m->file_written, 0, (npages + 63) / 64 * sizeof(uint64_t));
	}
}

/* A write into a managed file does not wait for the mapping lock while
 * another thread holds it (uploading a region, releasing): its record goes
 * to this queue, and the next thread to take the lock (mapping_lock_take)
 * applies it before anything reads what the CPU wrote. Every record
 * claimed before a take began is applied by it, or by its writer under
 * the lock: a write that returned before a launch is in that launch. A
 * bounded queue of cells with sequence numbers (many writers, one reader:
 * the lock's holder); full, the record is dropped and write_overflow set.
 * A cell's number is kept less its index, so that zeroed memory is the
 * empty queue.
 *
 * A writer stopped between claiming a cell and filling it (a signal
 * handler that does not return, a slow thread) must not hold up every
 * later take: after a while the taker abandons the cell (a flag in its
 * number); the writer, if it comes back, finds it abandoned, applies its
 * record itself under the lock and frees the cell. Until then the cell is
 * full to other writers, who take the lock. */
#define WRITE_QUEUE 1024
#define CELL_ABANDONED (1ull << 63)
struct write_cell {
	uint64_t seq; /* less the cell's index; CELL_ABANDONED: given up */
	dev_t dev;
	ino_t ino;
	uint64_t offset, len;
};
static struct write_cell write_queue[WRITE_QUEUE];
static uint64_t write_head; /* the next position to claim */
static uint64_t write_tail; /* the next position to apply (lock held) */
/* Set when a record found the queue full and was dropped: the next take
 * has every mapping's checksums look at the whole file again, which finds
 * the pages such writes changed (as another writer's). */
static int write_overflow;

/* Lock held: applies every record claimed so far, waiting a while for a
 * writer between its claim and its record (a few stores). */
#define DRAIN_PATIENCE 10000 /* yields */
static void drain_file_writes_locked(void)
{
	if (__atomic_load_n(&write_overflow, __ATOMIC_RELAXED) &&
	    __atomic_exchange_n(&write_overflow, 0, __ATOMIC_SEQ_CST)) {
		for (struct gaia_mapping *m = mappings; m; m = m->next)
			page_sums_untrust(m->sums);
	}
	uint64_t end = __atomic_load_n(&write_head, __ATOMIC_SEQ_CST);
	for (uint64_t pos = write_tail; pos != end; pos++) {
		struct write_cell *c = &write_queue[pos % WRITE_QUEUE];
		uint64_t idx = pos % WRITE_QUEUE;
		uint64_t filled = pos + 1 - idx, claimed = pos - idx;
		for (unsigned i = 0; __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE) != filled; i++) {
			if (i < DRAIN_PATIENCE) {
				sched_yield();
				continue;
			}
			uint64_t expect = claimed;
			if (__atomic_compare_exchange_n(&c->seq, &expect, claimed | CELL_ABANDONED, false,
							__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
				break; /* its writer applies it */
		}
		write_tail = pos + 1;
		if (__atomic_load_n(&c->seq, __ATOMIC_ACQUIRE) != filled)
			continue;
		dev_t dev = c->dev;
		ino_t ino = c->ino;
		uint64_t offset = c->offset, len = c->len;
		__atomic_store_n(&c->seq, pos + WRITE_QUEUE - idx, __ATOMIC_RELEASE);
		apply_file_write_locked(dev, ino, offset, len);
	}
}

void mapping_lock_take(void)
{
	locks_mine_enter();
	pthread_mutex_lock(&mapping_lock);
	drain_file_writes_locked();
	fold_file_writes_locked();
}

void mapping_lock_give(void)
{
	pthread_mutex_unlock(&mapping_lock);
	locks_mine_leave();
}

static bool queue_file_write(dev_t dev, ino_t ino, uint64_t offset, uint64_t len)
{
	uint64_t pos = __atomic_load_n(&write_head, __ATOMIC_RELAXED);
	for (;;) {
		struct write_cell *c = &write_queue[pos % WRITE_QUEUE];
		uint64_t idx = pos % WRITE_QUEUE;
		uint64_t stored = __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE);
		if (stored & CELL_ABANDONED)
			return false; /* full until its writer comes back */
		int64_t dif = (int64_t)(stored + idx - pos);
		if (dif < 0)
			return false; /* full */
		if (dif > 0) {
			pos = __atomic_load_n(&write_head, __ATOMIC_RELAXED);
			continue;
		}
		if (!__atomic_compare_exchange_n(&write_head, &pos, pos + 1, true, __ATOMIC_SEQ_CST,
						 __ATOMIC_RELAXED))
			continue;
		c->dev = dev;
		c->ino = ino;
		c->offset = offset;
		c->len = len;
		uint64_t expect = pos - idx;
		if (__atomic_compare_exchange_n(&c->seq, &expect, pos + 1 - idx, false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			return true;
		/* Abandoned by a take that waited too long for it. */
		if (locks_mine) {
			/* A signal handler's write on a thread that holds a lock of
			 * the shim's: the record is dropped (see write_overflow). */
			__atomic_store_n(&c->seq, pos + WRITE_QUEUE - idx, __ATOMIC_RELEASE);
			return false;
		}
		mapping_lock_take();
		apply_file_write_locked(dev, ino, offset, len);
		__atomic_store_n(&c->seq, pos + WRITE_QUEUE - idx, __ATOMIC_RELEASE);
		mapping_lock_give();
		return true;
	}
}

static void file_pages_written(dev_t dev, ino_t ino, uint64_t offset, uint64_t len)
{
	bool busy = locks_mine != 0;
	locks_mine_enter();
	if (busy || pthread_mutex_trylock(&mapping_lock) != 0) {
		locks_mine_leave();
		if (!queue_file_write(dev, ino, offset, len))
			__atomic_store_n(&write_overflow, 1, __ATOMIC_SEQ_CST);
		return;
	}
	drain_file_writes_locked();
	apply_file_write_locked(dev, ino, offset, len);
	mapping_lock_give();
}

void mapping_file_written(dev_t dev, ino_t ino, off_t offset, size_t len)
{
	if (len && offset >= 0)
		file_pages_written(dev, ino, (uint64_t)offset, len);
}

bool mapping_file_resize_begin(void)
{
	if (locks_mine)
		return false;
	mapping_lock_take();
	return true;
}

void mapping_file_resize_end(bool locked, dev_t dev, ino_t ino, off_t old_size, off_t new_size)
{
	if (old_size != new_size) {
		off_t lo = old_size < new_size ? old_size : new_size;
		off_t hi = old_size < new_size ? new_size : old_size;
		lo &= ~(off_t)(GAIA_PAGE - 1);
		/* Pages a device reads in place that left the page cache: the
		 * registration holds the old ones (gpu_mapping.c renews it). */
		for (struct gaia_mapping *m = locked && new_size < old_size ? mappings : NULL; m; m = m->next)
			if (m->pinned && !m->pinned_hmm && m->dev == dev && m->ino == ino && (uint64_t)new_size < m->offset + m->len)
				m->pinned_stale = true;
		if (locked)
			apply_file_write_locked(dev, ino, (uint64_t)lo, (uint64_t)(hi - lo));
		else
			file_pages_written(dev, ino, (uint64_t)lo, (uint64_t)(hi - lo));
	}
	if (locked)
		mapping_lock_give();
}

/* --- discards (madvise) --- */

static void collect_only_locked(struct gaia_mapping *m)
{
	mapping_collect_locked(m);
}

void mapping_before_discard(void *addr, size_t len)
{
	mapping_lock_take();
	for_each_overlapping_locked(addr, len, collect_only_locked);
	/* The shim's own view of the file must not keep pages the program
	 * lets go (a page mapped twice is never paged out). */
	uintptr_t a = (uintptr_t)addr, b = a + len;
	for (struct gaia_mapping *m = mappings; m; m = m->next) {
		uintptr_t lo = a > m->start ? a : m->start;
		uintptr_t hi = b < m->start + m->len ? b : m->start + m->len;
		if (m->store_view && lo < hi)
			REAL(madvise)(m->store_view + (lo - m->start), hi - lo, MADV_DONTNEED);
	}
	mapping_lock_give();
}

void mapping_after_discard(void *addr, size_t len)
{
	/* The discard itself wrote nothing: protect the range again. */
	tracker_forget(addr, len);
}

/* --- fork --- */

void mapping_before_fork(void)
{
	mapping_lock_take();
	/* The child starts with everything released: its own tracking begins
	 * afresh at its first store. */
	for (struct gaia_mapping *m = mappings; m; m = m->next)
		mapping_release_locked(m);
}

void mapping_after_fork(bool child)
{
	if (!child) {
		mapping_lock_give();
		return;
	}
	/* Only this thread exists in the child: locks held by others at the
	 * fork would never be released. */
	pthread_mutex_init(&mapping_lock, NULL);
	locks_mine = 0;
	/* A record another thread claimed at the fork is never completed
	 * here; the parent's were applied before it (mapping_before_fork). */
	memset(write_queue, 0, sizeof(write_queue));
	write_head = write_tail = 0;
	if (write_overflow)
		for (struct gaia_mapping *m = mappings; m; m = m->next)
			page_sums_untrust(m->sums);
	write_overflow = 0;
	if (region_table_after_fork(&regions))
		gaia_error("after fork: cannot initialise the region table's lock");
	shared_file_after_fork();
	mapping_lock_take();
	for (struct gaia_mapping *m = mappings; gpu_mapping_after_fork_locked && m; m = m->next)
		gpu_mapping_after_fork_locked(m);
	if (mappings && tracker_reinit_after_fork()) {
		/* Nothing can be tracked: forget every mapping (they stay mapped). */
		while (mappings)
			destroy_mapping_locked(mappings);
		region_remove_range(&regions, 0, UINTPTR_MAX & ~(GAIA_PAGE - 1), NULL, NULL);
	}
	for (struct gaia_mapping *m = mappings; m; m = m->next) {
		const struct range_set *live = &m->engine.live;
		for (size_t i = 0; m->tracked && i < live->count; i++) {
			int rc = tracker_register((void *)(m->start + live->items[i].first * GAIA_PAGE),
						  (live->items[i].end - live->items[i].first) * GAIA_PAGE);
			if (rc)
				gaia_error("after fork: cannot track writes to %s again: %s; its "
					   "writes in this process may be missed", m->path, strerror(-rc));
		}
	}
	mapping_lock_give();
	release_timer_after_fork();
}

/* --- remapping --- */

bool mapping_origin_at(const void *addr, struct mapping_origin *out)
{
	struct region r;
	pthread_once(&regions_once, regions_init);
	mapping_lock_take();
	bool found = region_find(&regions, (uintptr_t)addr, &r) == 0;
	if (found) {
		struct gaia_mapping *m = r.owner;
		out->fd = fcntl(m->fd, F_DUPFD_CLOEXEC, 3);
		out->prot = m->prot;
		out->flags = m->flags;
		out->marked = false;
		for (size_t w = 0; w < (m->len / GAIA_PAGE + 63) / 64; w++)
			out->marked |= (m->read_only && m->read_only[w]) || (m->unreadable && m->unreadable[w]);
		out->offset = (off_t)(m->offset + ((uintptr_t)addr - m->start));
		snprintf(out->path, sizeof(out->path), "%s", m->path);
		found = out->fd >= 0;
	}
	mapping_lock_give();
	return found;
}

void mapping_origin_free(struct mapping_origin *origin)
{
	if (origin->fd >= 0)
		close(origin->fd);
	origin->fd = -1;
}

/* --- introspection --- */

int mapping_versions(const void *addr, size_t len, uint32_t *out)
{
	if (((uintptr_t)addr & (GAIA_PAGE - 1)) || !len)
		return -EINVAL;
	size_t npages = (len + GAIA_PAGE - 1) / GAIA_PAGE;
	bool any = false;
	pthread_once(&regions_once, regions_init);
	mapping_lock_take();
	for (size_t i = 0; i < npages; i++) {
		struct region r;
		uintptr_t a = (uintptr_t)addr + i * GAIA_PAGE;
		out[i] = 0;
		if (region_find(&regions, a, &r) == 0) {
			struct gaia_mapping *m = r.owner;
			out[i] = tsvt_version(&m->engine.tsvt, TSVT_CPU, (a - m->start) / GAIA_PAGE);
			any = true;
		}
	}
	mapping_lock_give();
	return any ? 0 : -ENOENT;
}
