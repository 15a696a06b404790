/* Device replicas of managed mappings, and the protocol's device half
 * (DESIGN §3.2, §3.3): at a launch the CPU releases and the device
 * acquires; at a sync the device releases (diff on the device, merge into
 * the page cache in place) and the CPU acquires.
 *
 * A region gets a replica on a device at the first launch there whose
 * arguments point into it; from then on every launch on that device
 * acquires it (a kernel may keep pointers it was given before).
 *
 * Everything runs under mapping_lock, with gaia_in_shim raised by the
 * caller so the driver's own mmap calls pass through the hooks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <linux/futex.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "backend_cuda.h"
#include "gpu_mapping.h"
#include "lrc_proto.h"
#include "mapping_internal.h"
#include "stats.h"

#define PG GAIA_PAGE

/* The backing GAIA_BACKING=auto chose (probed once), and per device
 * whether kernels may still run (launched since the last full sync). */
static int chosen_backing = -1;
static struct lrc_devices devices;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* --- choosing a backing --- */

/* The backing of a replica: the knob's, or (auto, and pinned for the
 * regions it does not read in place) the probe's. */
static int backing_for(int device)
{
	int knob = gaia_config()->backing;
	if (knob == GAIA_BACKING_VMM || knob == GAIA_BACKING_MANAGED)
		return knob;
	if (knob == GAIA_BACKING_PAGED)
		return GAIA_BACKING_MANAGED; /* never probes vmm */
	if (chosen_backing < 0) {
		const char *why = gpu_vmm_probe(device);
		chosen_backing = why ? GAIA_BACKING_MANAGED : GAIA_BACKING_VMM;
		if (why)
			gaia_info("device replicas in managed memory: %s", why);
		else
			gaia_info("device replicas at the regions' own addresses (driver virtual "
				  "memory, host side overlaid)");
	}
	return chosen_backing;
}

/* --- making and freeing replicas --- */

static uint64_t file_valid_pages(const struct gaia_mapping *m)
{
	struct stat st;
	uint64_t npages = m->len / PG;
	if (fstat(m->fd, &st) || (uint64_t)st.st_size <= m->offset)
		return fstat(m->fd, &st) ? npages : 0;
	uint64_t valid = ((uint64_t)st.st_size - m->offset + PG - 1) / PG;
	return valid < npages ? valid : npages;
}

/* MAP_SHARED: the shim's own view of the file's pages, for reading what
 * it uploads and storing what devices wrote — the program's mapping keeps
 * its write tracking, and (vmm) its address stays the device's to the
 * driver. MAP_PRIVATE pages exist only in the program's mapping. */
static void open_store_view(struct gaia_mapping *m)
{
	if (m->store_view || (m->flags & MAP_TYPE) == MAP_PRIVATE)
		return;
	int prot = PROT_READ | (m->exec.writable ? PROT_WRITE : 0);
	void *v = REAL(mmap)(NULL, m->len, prot, MAP_SHARED, m->fd, (off_t)m->offset);
	if (v == MAP_FAILED) {
		gaia_warn("cannot map %s a second time for moving pages to and from devices (mmap: %s): "
			  "the program's mapping is used, and the shim's stores count as its writes",
			  m->path, strerror(errno));
		return;
	}
	m->store_view = v;
	m->exec.cpu = v;
	m->exec.cpu_store = v;
}

/* The shim's stores into a page are not another writer's change. In a
 * shared mapping they reach the file: the page's checksum becomes that of
 * the bytes stored (read back through the shim's own view), so another
 * writer's change after them still shows at the next look; and a page
 * that another writer had changed before them (its bytes no longer what
 * the last look saw, and not by this process) keeps its old checksum, so
 * that change shows too (the merge kept those bytes on the CPU side; the
 * devices must learn them). Without a view of its own, or in a private
 * mapping, the pages are marked as this process's changes instead. */
static bool hashes_stores(const struct gaia_mapping *m)
{
	return (m->flags & MAP_TYPE) != MAP_PRIVATE && m->store_view && m->sums;
}

static bool bit_of(const uint64_t *bits, uint64_t p)
{
	return bits && (bits[p / 64] >> (p % 64) & 1);
}

static void note_outside_changes(void *arg, uint64_t first, uint64_t n)
{
	struct gaia_mapping *m = arg;
	if (!hashes_stores(m))
		return;
	for (uint64_t p = first; p < first + n && p < m->len / PG; p++) {
		if (bit_of(m->own_changes, p) || page_sums_same(m->sums, p, m->exec.cpu + p * PG))
			continue;
		if (!m->outside_changes)
			m->outside_changes = calloc((m->len / PG + 63) / 64, sizeof(uint64_t));
		if (!m->outside_changes) {
			/* Unknown: every stored page keeps its old checksum
			 * (the next look takes them as another writer's). */
			m->outside_unknown = true;
			return;
		}
		m->outside_changes[p / 64] |= 1ull << (p % 64);
	}
}

static void forget_own_stores(void *arg, uint64_t first, uint64_t n)
{
	struct gaia_mapping *m = arg;
	if (!hashes_stores(m)) {
		mapping_note_own_change_locked(m, first, n);
	} else if (m->outside_unknown) {
		m->outside_unknown = false;
	} else {
		for (uint64_t p = first; p < first + n && p < m->len / PG; p++) {
			if (bit_of(m->outside_changes, p))
				m->outside_changes[p / 64] &= ~(1ull << (p % 64));
			else
				page_sums_set(m->sums, p, 1, m->exec.cpu + p * PG);
		}
	}
	if (!m->store_view && m->tracked)
		tracker_forget((void *)(m->start + first * PG), n * PG);
}

static const char *vmm_failure_reason(int rc)
{
	switch (rc) {
	case -EADDRINUSE:
		return "the driver would not reserve the region's own address: another device's "
		       "replica, a mapping of the program's in the 32 MiB the reservation needs, or "
		       "a region not on a 32 MiB boundary (placed by the program itself)";
	case -EINVAL:
		return "part of the mapping was unmapped";
	case -ENOTSUP:
		return "the driver has no virtual memory management";
	case -E2BIG:
		return "the kernel keeps the mapping in more pieces (areas) than a move takes (64)";
	default:
		return strerror(-rc);
	}
}

/* --- reading in place --- */

static void forget_in_place(struct gaia_mapping *m);
static bool device_idle_locked(int dev);
/* Bytes registered for reading in place, every region together. */
static uint64_t pinned_bytes;

/* How a region is read in place: not, through a read-only registration
 * (mode Z), or through HMM (mode H). */
enum in_place { NOT_IN_PLACE, IN_PLACE_PINNED, IN_PLACE_HMM };

/* Whether dev's kernels may read m in place (gpu_pinned.c) at all, the
 * way `how` says: NULL, or why not. */
static const char *in_place_refused(const struct gaia_mapping *m, int dev, enum in_place how)
{
	if (m->engine.flags & LRC_WRITABLE)
		return how == IN_PLACE_HMM
			       ? "kernels may write it (the mapping has PROT_WRITE): their stores through HMM "
				 "would reach the page cache at once, outside release consistency"
			       : "kernels may write it (the mapping has PROT_WRITE), and a registration the "
				 "GPU writes must be writable, which the driver refuses for files";
	if ((m->flags & MAP_TYPE) != MAP_SHARED)
		return "a private mapping (its pages may become the process's own copies)";
	if (gpu_mapping_any_replica(m))
		return "a device holds a replica of it already";
	if (!gpu_mapping_whole(m))
		return "part of it was unmapped";
	if (how == IN_PLACE_HMM)
		return gpu_hmm_refused(dev);
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	if (pages > 0 && psize > 0 && pinned_bytes + m->len > (uint64_t)pages * (uint64_t)psize / 2)
		return "with the regions read in place already, it would pin more than half the machine's "
		       "memory (a registration pins every page)";
	return gpu_pinned_probe(dev);
}

/* Whether m is larger than half the device's free memory (cuMemGetInfo
 * now; unknown: no); if so the reason goes to *why. */
static bool larger_than_half_free(const struct gaia_mapping *m, char *why, size_t n)
{
	size_t free_bytes = gpu_device_free_bytes();
	if (!free_bytes || m->len <= free_bytes / 2)
		return false;
	snprintf(why, n, "%zu MiB, more than half the %zu MiB the device has free", m->len >> 20, free_bytes >> 20);
	return true;
}

/* Whether, and how, dev's kernels read m in place rather than from a
 * replica (GAIA_BACKING: pinned, every region that may, registered; host,
 * every region that may, through HMM; auto, such a region larger than half
 * the device's free memory, or with no room left for a replica: no_room,
 * through HMM where the device has it, else registered); the reason goes
 * to *why, either way. host on a device without HMM is auto there. */
static enum in_place reads_in_place(const struct gaia_mapping *m, int dev, bool no_room, char *why, size_t n)
{
	int knob = gaia_config()->backing;
	*why = 0;
	if (knob == GAIA_BACKING_VMM || knob == GAIA_BACKING_MANAGED || knob == GAIA_BACKING_PAGED)
		return NOT_IN_PLACE;
	enum in_place how = IN_PLACE_PINNED;
	const char *no_hmm = NULL;
	if (knob == GAIA_BACKING_HOST || knob == GAIA_BACKING_AUTO) {
		/* Every device, or a second one could not read it at all. */
		no_hmm = m->no_hmm ? "the program took PROT_READ off part of it, and HMM follows the CPU's "
				     "protection"
				   : gpu_hmm_refused_somewhere();
		how = no_hmm ? IN_PLACE_PINNED : IN_PLACE_HMM;
	}
	const char *refused = in_place_refused(m, dev, how);
	if (refused) {
		snprintf(why, n, "not read in place%s: %s", how == IN_PLACE_HMM ? " through HMM" : "", refused);
		return NOT_IN_PLACE;
	}
	if (knob == GAIA_BACKING_PINNED || (knob == GAIA_BACKING_HOST && how == IN_PLACE_HMM)) {
		snprintf(why, n, "GAIA_BACKING=%s", gaia_env_enum_word(GAIA_KNOB_BACKING, knob));
		return how;
	}
	char size_why[128];
	bool large = !no_room && larger_than_half_free(m, size_why, sizeof(size_why));
	if (no_room || large) {
		snprintf(why, n, "%s%s%s", no_room ? "no device memory left for a replica" : size_why,
			 knob == GAIA_BACKING_HOST ? "; not through HMM: " : "",
			 knob == GAIA_BACKING_HOST ? no_hmm : "");
		return how;
	}
	snprintf(why, n, "%zu MiB of the %zu MiB the device has free: a replica", m->len >> 20,
		 gpu_device_free_bytes() >> 20);
	return NOT_IN_PLACE;
}

/* Whether dev's replica of m pages on demand (mode M: managed memory,
 * base copies on the host; GAIA_BACKING: paged, every replica; auto,
 * pinned and managed, one larger than half the device's free memory); the
 * reason goes to *why. Never where the device cannot have the CPU use
 * managed memory while kernels run (the shim reads and writes the base
 * copies on the host then): managed memory cannot exceed such a device. */
static bool pages_on_demand(const struct gaia_mapping *m, int dev, char *why, size_t n)
{
	int knob = gaia_config()->backing;
	*why = 0;
	if (m->demoted[dev])
		snprintf(why, n, "its replica was given up for the program's own device memory");
	else if (knob == GAIA_BACKING_VMM || (knob != GAIA_BACKING_PAGED && !larger_than_half_free(m, why, n)))
		return false;
	else if (knob == GAIA_BACKING_PAGED)
		snprintf(why, n, "GAIA_BACKING=paged");
	const char *no = gpu_paged_refused(dev);
	if (no) {
		gaia_info("%s: device %d: not paged on demand (%s): %s", m->path, dev, why, no);
		return false;
	}
	return true;
}

/* LRC_IN_PLACE when dev's kernels now read m in place, the way `how`
 * says; else the error. */
static int read_in_place(struct gaia_mapping *m, int dev, enum in_place how, const char *why)
{
	bool first = !m->pinned, hmm = how == IN_PLACE_HMM;
	/* HMM faults on a range armed with userfaultfd. */
	int rc = hmm ? mapping_unarm_locked(m) : 0;
	if (rc) {
		gaia_info("%s: device %d cannot read it through HMM (%s): taking the shim's write tracking off "
			  "it failed: %s", m->path, dev, why, strerror(-rc));
		return rc;
	}
	rc = gpu_pinned_register(m, dev, hmm);
	if (rc) {
		gaia_info("%s: cannot be read in place by device %d (%s): %s", m->path, dev, why, strerror(-rc));
		return rc;
	}
	if (first && !hmm)
		pinned_bytes += m->len;
	if (first && !m->pinned_counted) {
		m->pinned_counted = true;
		stats_add(hmm ? GAIA_STAT_host_regions : GAIA_STAT_pinned_regions, 1);
	}
	if (hmm) {
		gpu_faults_want(); /* where its kernels fault is read ahead */
		gaia_info("%s: device %d reads it in place through HMM, %zu KiB (its own page tables reach the "
			  "page cache; nothing registered, pinned or uploaded): %s",
			  m->path, dev, m->len / 1024, why);
	} else {
		gaia_info("%s: device %d reads it in place from the page cache, %zu KiB (a read-only "
			  "registration; nothing uploaded): %s", m->path, dev, m->len / 1024, why);
	}
	return LRC_IN_PLACE;
}

/* 0 (a replica), LRC_IN_PLACE, or -errno: why dev can have no replica of
 * m (kept: not tried again). */
static int ensure_replica(struct gaia_mapping *m, int dev)
{
	if (m->replicas[dev])
		return 0;
	if (m->pinned && m->pinned_stale) {
		/* The file shrank under the registration: renewed, with the
		 * device idle (host_creating_needs_idle had it waited for). */
		gaia_info("%s: the file shrank while kernels read it in place: registered again", m->path);
		forget_in_place(m);
	}
	if (m->pinned_dptr[dev])
		return LRC_IN_PLACE;
	if (m->replica_failed[dev]) {
		if (m->forked && !m->fork_said) {
			m->fork_said = true;
			gaia_error("%s: a launch in this process (a fork child of the one that used the device with it) "
				   "passes pointers into it: refused, since a CUDA context does not survive fork",
				   m->path);
		}
		return m->replica_failed[dev];
	}
	char why[384];
	if (m->pinned) {
		/* Registered for every device (or read through HMM): a replica
		 * at the same address cannot be had next to it. */
		enum in_place how = m->pinned_hmm ? IN_PLACE_HMM : IN_PLACE_PINNED;
		const char *no = m->pinned_hmm ? gpu_hmm_refused(dev) : gpu_pinned_probe(dev);
		if (no)
			gaia_warn("%s: read in place by another device%s, and device %d cannot (%s): launches "
				  "there that pass pointers into it are refused", m->path,
				  m->pinned_hmm ? " through HMM" : "", dev, no);
		int rc = no ? -ENOTSUP : read_in_place(m, dev, how, "read in place by another device");
		if (rc != LRC_IN_PLACE) {
			m->replica_failed[dev] = rc;
			m->pinned_refused[dev] = true; /* tried again once the registration goes */
		}
		return rc;
	}
	/* Reading in place was decided on (host_creating_needs_idle then
	 * had the launch not wait for the device) but failed: a replica made
	 * now goes to managed memory, which needs no idle device. */
	bool tried = false;
	enum in_place how = reads_in_place(m, dev, false, why, sizeof(why));
	if (how) {
		if (read_in_place(m, dev, how, why) == LRC_IN_PLACE)
			return LRC_IN_PLACE;
		tried = true;
	} else if (*why) {
		gaia_info("%s: device %d: %s", m->path, dev, why);
	}
	/* Read through HMM before (no longer: made unreadable, a failed
	 * attempt, a device that stopped): tracked again before it has a copy. */
	(void)mapping_rearm_locked(m);
	/* Another writer's change after this must reach the copy. */
	mapping_first_look_locked(m);
	struct cuda_replica *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	char paged_why[192];
	int backing = pages_on_demand(m, dev, paged_why, sizeof(paged_why)) ? GAIA_BACKING_PAGED : backing_for(dev);
	int rc = -ENOTSUP;
	if (backing == GAIA_BACKING_VMM && !(tried && !device_idle_locked(dev))) {
		rc = gpu_vmm_create(m, r, dev);
		if (rc)
			gaia_warn("%s: no device memory at its own address on device %d (%s); its "
				  "replica is in managed memory, where pointers to it stored in "
				  "device memory or in the file reach nothing",
				  m->path, dev, vmm_failure_reason(rc));
	}
	if (rc)
		rc = cuda_replica_create(r, backing == GAIA_BACKING_PAGED ? GAIA_BACKING_PAGED : GAIA_BACKING_MANAGED,
					 dev, m->start, m->len, m->exec.writable, 0, 0, 0);
	if (rc == -ENOMEM && (how = reads_in_place(m, dev, true, why, sizeof(why))) != NOT_IN_PLACE &&
	    read_in_place(m, dev, how, why) == LRC_IN_PLACE) {
		free(r);
		return LRC_IN_PLACE;
	}
	if (rc == -ENOMEM && backing != GAIA_BACKING_PAGED && !gpu_paged_refused(dev)) {
		/* Demoted rather than refused: managed memory may exceed the
		 * device. */
		snprintf(paged_why, sizeof(paged_why), "no device memory left for a replica of %zu MiB",
			 m->len >> 20);
		rc = cuda_replica_create(r, GAIA_BACKING_PAGED, dev, m->start, m->len, m->exec.writable, 0, 0, 0);
	}
	if (rc) {
		gaia_warn("%s: no replica on device %d (%s); launches there that pass pointers "
			  "into it are refused", m->path, dev, strerror(-rc));
		m->replica_failed[dev] = rc;
		free(r);
		return rc;
	}
	open_store_view(m);
	stats_add(GAIA_STAT_device_replicas, 1);
	gpu_peer_enable();
	m->replicas[dev] = r;
	m->exec.replica[dev] = r;
	m->exec.ops = &cuda_device_ops;
	m->exec.storing = note_outside_changes;
	m->exec.stored = forget_own_stores;
	if (r->paged) {
		gpu_faults_want();
		r->observed = gpu_faults_on();
		stats_add(GAIA_STAT_paged_replicas, 1);
		gaia_info("%s: replica on device %d in managed memory paged on demand, %zu KiB (base "
			  "copies on the host): %s", m->path, dev, m->len / 1024, paged_why);
	} else {
		gaia_info("%s: replica on device %d, %s, %zu KiB", m->path, dev,
			  r->backing == GAIA_BACKING_VMM ? "at its own address" : "in managed memory",
			  m->len / 1024);
	}
	return 0;
}

static const struct lrc_host host;

bool gpu_mapping_whole(const struct gaia_mapping *m)
{
	const struct range_set *live = &m->engine.live;
	return live->count == 1 && live->items[0].first == 0 && live->items[0].end == m->len / PG;
}

bool gpu_mapping_any_replica(const struct gaia_mapping *m)
{
	for (int d = 0; d < TSVT_MAX_DEVICES; d++)
		if (m->replicas[d])
			return true;
	return false;
}

/* Device waits that may last (watched_wait, below): their kinds. */
enum { WAIT_EARLIER_KERNELS = 1, WAIT_RUNNING_REBASE = 2, WAIT_TEARDOWN = 4, WAIT_SYNC_DIFF = 8 };
static int watched_wait(unsigned kind, int (*wait)(void), const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
#define LAUNCH_WAIT_NOTE_S 5

/* What the calling thread last waited for in gpu_mappings_quiesce: per
 * device, the number of launches planned there (devices.planned, under
 * mapping_lock) whose kernels were all queued before a wait that then
 * ended well, or UINT64_MAX. While the number is still that, every
 * kernel launched there has finished. */
static __thread uint64_t quiesced_at[TSVT_MAX_DEVICES] __attribute__((tls_model("initial-exec")));
static __thread bool quiesced_valid __attribute__((tls_model("initial-exec")));
/* Planned launches whose kernels were queued (or refused), per device. */
static uint64_t launches_queued[TSVT_MAX_DEVICES];

void gpu_mappings_launch_queued(int dev)
{
	__atomic_add_fetch(&launches_queued[dev], 1, __ATOMIC_SEQ_CST);
}

/* Under mapping_lock: no kernel launched on dev may still run. */
static bool device_idle_locked(int dev)
{
	return !devices.busy[dev] || (quiesced_valid && quiesced_at[dev] == devices.planned[dev]);
}

/* Until the launches planned on dev (up to `planned`) queued their
 * kernels: moments, unless a launching thread stopped (10 s: false). */
static bool wait_queued(int dev, uint64_t planned)
{
	for (int i = 0; __atomic_load_n(&launches_queued[dev], __ATOMIC_SEQ_CST) < planned; i++) {
		if (i == 10000)
			return false;
		usleep(i < 100 ? 10 : 1000);
	}
	return true;
}

static bool overlaps(const struct gaia_mapping *m, const void *addr, size_t len)
{
	return (uintptr_t)addr < m->start + m->len && (uintptr_t)addr + len > m->start;
}

/* The first look that finds a replica holds every new launch back
 * (draining, below) until the caller has forgotten the mappings: the wait
 * then covers every kernel, and gpu_mapping_forget_locked finds the
 * devices idle (all of them: a launch elsewhere could give the mapping a
 * replica on another device, and one between this function's return and
 * the caller's lock would make the device busy again). The rounds bound
 * the waits that failed. */
#define QUIESCE_ROUNDS 3

/* The quiesces holding new launches back (changed under mapping_lock,
 * where launches read it); drain_seq, a futex word, moves when one ends.
 * A thread holding some never waits for them itself; while it holds any
 * it cannot be cancelled (cancelled, it would hold them for good). */
static unsigned draining;
static int drain_seq;
static __thread unsigned drains_mine __attribute__((tls_model("initial-exec")));
static __thread int drain_cancel_state __attribute__((tls_model("initial-exec")));

static bool drain_blocks(void)
{
	return __atomic_load_n(&draining, __ATOMIC_ACQUIRE) && !drains_mine;
}

static void drain_sleep(void)
{
	int seq = __atomic_load_n(&drain_seq, __ATOMIC_ACQUIRE);
	if (__atomic_load_n(&draining, __ATOMIC_ACQUIRE))
		syscall(SYS_futex, &drain_seq, FUTEX_WAIT_PRIVATE, seq, NULL, NULL, 0);
}

/* Under mapping_lock, for a launch: until no quiesce holds launches back,
 * the lock is let go and the launch waits. */
static void drain_wait_locked(void)
{
	while (drain_blocks()) {
		mapping_lock_give();
		drain_sleep();
		mapping_lock_take();
	}
}

void gpu_mappings_drain_wait(void)
{
	while (drain_blocks())
		drain_sleep();
}

static void drain_begin_locked(void)
{
	if (!drains_mine++)
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &drain_cancel_state);
	__atomic_add_fetch(&draining, 1, __ATOMIC_RELEASE);
}

void gpu_mappings_quiesce_end(unsigned held)
{
	if (!held || !drains_mine)
		return;
	__atomic_sub_fetch(&draining, 1, __ATOMIC_RELEASE);
	if (!--drains_mine)
		pthread_setcancelstate(drain_cancel_state, NULL);
	__atomic_add_fetch(&drain_seq, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &drain_seq, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

/* The context wait_ctx waits for (watched_wait takes a function of none). */
static __thread CUcontext waiting_ctx __attribute__((tls_model("initial-exec")));

static int wait_ctx(void)
{
	return cuda_ctx_synchronize(waiting_ctx);
}

unsigned gpu_mappings_quiesce(const void *addr, size_t len, bool read_only_only)
{
	unsigned held = 0;
	for (int round = 0; round < QUIESCE_ROUNDS; round++) {
		CUcontext ctx[TSVT_MAX_DEVICES];
		bool wait[TSVT_MAX_DEVICES] = {false};
		uint64_t seq[TSVT_MAX_DEVICES];
		char path[TSVT_MAX_DEVICES][256];
		bool any = false;
		mapping_lock_take();
		for (const struct gaia_mapping *m = mappings; m; m = m->next) {
			if (!overlaps(m, addr, len) || (read_only_only && (m->engine.flags & LRC_WRITABLE)))
				continue;
			if (!held && (gpu_mapping_any_replica(m) || m->pinned)) {
				/* From now on new launches wait for the
				 * caller to be done. */
				drain_begin_locked();
				held = 1;
			}
			for (int d = 0; d < TSVT_MAX_DEVICES; d++) {
				if ((!m->replicas[d] && !m->pinned_dptr[d]) || wait[d] || device_idle_locked(d))
					continue;
				wait[d] = any = true;
				ctx[d] = m->replicas[d] ? ((const struct cuda_replica *)m->replicas[d])->ctx
							: m->pinned_dev_ctx[d];
				snprintf(path[d], sizeof(path[d]), "%s", m->path);
			}
		}
		for (int d = 0; d < TSVT_MAX_DEVICES; d++)
			seq[d] = devices.planned[d];
		mapping_lock_give();
		if (!any)
			return held;
		for (int d = 0; d < TSVT_MAX_DEVICES; d++) {
			if (!wait[d])
				continue;
			/* The launches planned so far queue their kernels first:
			 * the wait then covers them. */
			if (!wait_queued(d, seq[d]))
				seq[d] = UINT64_MAX;
			waiting_ctx = ctx[d];
			int rc = watched_wait(WAIT_TEARDOWN, wait_ctx,
					      "unmapping %s (or making it writable) has waited %d s for the "
					      "kernels running on device %d: every managed mapping is current "
					      "on a device at each launch there, so they may use it. If one of "
					      "them waits for the host to act after this call, it never ends",
					      path[d], LAUNCH_WAIT_NOTE_S, d);
			stats_add(GAIA_STAT_teardown_waits, 1);
			/* Failed (an error of the program's own, a graph being
			 * captured): nothing is known; the wait under the lock
			 * stays, and the error is the program's to see. */
			if (rc)
				seq[d] = UINT64_MAX;
		}
		/* Only the devices waited for are known idle at seq. */
		for (int d = 0; d < TSVT_MAX_DEVICES; d++)
			quiesced_at[d] = wait[d] ? seq[d] : (quiesced_valid ? quiesced_at[d] : UINT64_MAX);
		quiesced_valid = true;
	}
	return held;
}

/* A region read in place: its registration goes once the kernels that
 * may read it have ended (gpu_mappings_quiesce waited for them without the
 * lock, unless the device got a launch since). */
static void forget_in_place(struct gaia_mapping *m)
{
	for (int d = 0; d < TSVT_MAX_DEVICES; d++)
		if (m->pinned_dptr[d] && !device_idle_locked(d))
			(void)cuda_ctx_synchronize(m->pinned_dev_ctx[d]);
	bool hmm = m->pinned_hmm;
	gpu_pinned_unregister(m);
	if (!hmm)
		pinned_bytes -= pinned_bytes < m->len ? pinned_bytes : m->len;
	/* Devices that could not read it in place may have a replica now. */
	for (int d = 0; d < TSVT_MAX_DEVICES; d++) {
		if (m->pinned_refused[d])
			m->replica_failed[d] = 0;
		m->pinned_refused[d] = false;
	}
}

void gpu_mapping_forget_locked(struct gaia_mapping *m)
{
	gpu_peer_forget(m);
	if (m->pinned)
		forget_in_place(m);
	if (!gpu_mapping_any_replica(m))
		return;
	/* What kernels wrote and no sync released yet reaches the file now:
	 * once they finished (gpu_mappings_quiesce waited for them without
	 * the lock, unless the device got a launch since). */
	for (int d = 0; d < TSVT_MAX_DEVICES; d++) {
		if (m->replicas[d] && m->engine.epoch_open[d]) {
			if (!device_idle_locked(d))
				cuda_replica_synchronize(m->replicas[d]);
			(void)lrc_proto_release(&host, m, d, false);
		}
	}
	/* The driver replaces the host side of a vmm span when it unmaps it:
	 * the live pieces of the CPU replica step aside meanwhile. */
	bool vmm = false;
	uintptr_t room_end = 0; /* where the vmm reservation ended */
	for (int d = 0; d < TSVT_MAX_DEVICES; d++) {
		const struct cuda_replica *r = m->replicas[d];
		if (!r || r->backing != GAIA_BACKING_VMM)
			continue;
		vmm = true;
		if (r->span_len)
			room_end = r->span_start + r->reserve_len;
	}
	const struct range_set *live = &m->engine.live;
	struct vmm_seal *seal = vmm ? calloc(live->count ? live->count : 1, sizeof(*seal)) : NULL;
	bool *moved = vmm ? calloc(live->count ? live->count : 1, sizeof(*moved)) : NULL;
	if (vmm) {
		/* Sealed first, collected then: no store slips in between. */
		gpu_vmm_guard_begin(m->start, m->len);
		mapping_hold_begin(m->start, m->len);
		for (size_t i = 0; moved && seal && i < live->count; i++)
			moved[i] = !gpu_vmm_seal(m->start + live->items[i].first * PG,
						 (live->items[i].end - live->items[i].first) * PG, &seal[i]);
		mapping_collect_locked(m);
		for (size_t i = 0; moved && seal && i < live->count; i++) {
			bool placeheld;
			if (moved[i] && gpu_vmm_move_all_aside(&seal[i], 0, 0, &placeheld)) {
				gpu_vmm_rearm(m, &seal[i]);
				moved[i] = false;
			}
			if (!moved[i])
				gaia_error("%s: %zu bytes at %#lx cannot be moved aside while its device copy "
					   "goes; the driver takes them with it", m->path,
					   (size_t)(live->items[i].end - live->items[i].first) * PG,
					   (unsigned long)(m->start + live->items[i].first * PG));
		}
		if (!moved || !seal)
			gaia_error("%s: no memory to move the mapping aside while its device copy goes; the "
				   "driver takes it with it", m->path);
	}
	for (int d = 0; d < TSVT_MAX_DEVICES; d++) {
		if (!m->replicas[d])
			continue;
		if (vmm)
			gaia_tsan_ignore_begin();
		cuda_replica_destroy(m->replicas[d]);
		if (vmm)
			gaia_tsan_ignore_end();
		free(m->replicas[d]);
		m->replicas[d] = NULL;
		m->exec.replica[d] = NULL;
		device_exec_forget(&m->exec, d);
		lrc_proto_forget(&host, m, d);
	}
	if (vmm) {
		for (size_t i = 0; moved && seal && i < live->count; i++)
			if (moved[i])
				gpu_vmm_move_back(m, &seal[i]);
		gpu_vmm_hold_end(m);
		gpu_vmm_guard_end();
		free(seal);
		free(moved);
		gpu_vmm_keep_room(m, room_end);
	}
	if (m->store_view) {
		REAL(munmap)(m->store_view, m->len);
		m->store_view = NULL;
		m->exec.cpu = (const uint8_t *)m->start;
		m->exec.cpu_store = (uint8_t *)m->start;
	}
}

size_t gpu_mappings_make_room(int dev, size_t want)
{
	if (dev < 0 || dev >= TSVT_MAX_DEVICES)
		return 0;
	/* Every mapping may have a replica there: the kernels that may use
	 * them are waited for first, without the lock. */
	unsigned held = gpu_mappings_quiesce(NULL, UINTPTR_MAX, false);
	mapping_lock_take();
	size_t freed = 0;
	while (freed < want) {
		struct gaia_mapping *victim = NULL;
		for (struct gaia_mapping *m = mappings; m; m = m->next)
			if (m->replicas[dev] && !((struct cuda_replica *)m->replicas[dev])->paged &&
			    (!victim || m->len > victim->len))
				victim = m;
		if (!victim)
			break;
		size_t bytes = victim->len * (victim->exec.writable ? 2 : 1); /* replica, base copies */
		gaia_info("%s: replica on device %d (%zu KiB) given up for a program allocation of %zu KiB that "
			  "found no room; the region pages on demand from its next launch",
			  victim->path, dev, bytes / 1024, want / 1024);
		victim->demoted[dev] = true;
		gpu_faults_want(); /* learning starts at its first launch paged */
		gpu_mapping_forget_locked(victim);
		stats_add(GAIA_STAT_demoted_replicas, 1);
		freed += bytes;
	}
	mapping_lock_give();
	if (held)
		gpu_mappings_quiesce_end(held);
	return freed;
}

/* Full releases at which kernels had faulted (under mapping_lock). */
static uint32_t learn_round;

/* Whether m's replica on dev pages on demand where a whole one would
 * fit: not GAIA_BACKING=paged, and m no larger than half of free_bytes. */
static bool fits_whole(const struct gaia_mapping *m, int dev, size_t free_bytes)
{
	const struct cuda_replica *r = m->replicas[dev];
	return r && r->paged && gaia_config()->backing != GAIA_BACKING_PAGED && m->len <= free_bytes / 2;
}

/* A replica's 64 KiB units. */
static size_t units_of(const struct gaia_mapping *m)
{
	return (m->len + CUDA_FAULT_UNIT - 1) / CUDA_FAULT_UNIT;
}

/* Whether kernels touched less than half of m's paged replica r since it
 * was made, m being a region no kernel writes (no base copies): what they
 * touched stays on the device once there, and a whole replica would move
 * the rest too. A writable region's paged replica is compared on the host
 * at every sync (what kernels touched comes back), and one made before
 * fault records were on (GAIA_GPU_FAULTS=off, no CUPTI, or the launch
 * that turned them on) is judged by size. */
static bool read_sparsely(const struct gaia_mapping *m, const struct cuda_replica *r)
{
	return !m->exec.writable && r->observed && cuda_replica_touched_units(r) * 2 < units_of(m);
}

/* Whether m's replica on dev goes, for a whole one at the next launch. */
static bool promotable(const struct gaia_mapping *m, int dev, size_t free_bytes)
{
	return fits_whole(m, dev, free_bytes) && !read_sparsely(m, m->replicas[dev]);
}

static int by_address(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

void gpu_mappings_learn(void)
{
	size_t n = 0;
	uint64_t *addrs = gpu_faults_take(&n);
	if (!addrs)
		return;
	qsort(addrs, n, sizeof(*addrs), by_address);
	size_t fresh = 0;
	mapping_lock_take();
	learn_round++;
	for (struct gaia_mapping *m = mappings; m; m = m->next) {
		for (int dev = 0; dev < TSVT_MAX_DEVICES; dev++)
			if (m->replicas[dev])
				fresh += cuda_replica_learn(m->replicas[dev], addrs, n, learn_round);
		if (m->pinned_hmm)
			fresh += learned_set_learn(&m->hmm_learned, m->start, m->len, addrs, n, learn_round);
	}
	mapping_lock_give();
	free(addrs);
	stats_add(GAIA_STAT_fault_units, fresh);
}

unsigned gpu_mappings_promote(int dev)
{
	if (dev < 0 || dev >= TSVT_MAX_DEVICES)
		return 0;
	mapping_lock_take();
	bool any = false;
	for (struct gaia_mapping *m = mappings; m && !any; m = m->next)
		any = m->replicas[dev] && ((struct cuda_replica *)m->replicas[dev])->paged;
	mapping_lock_give();
	size_t free_bytes = any ? gpu_device_free_bytes() : 0;
	if (!free_bytes)
		return 0;
	bool some = false;
	mapping_lock_take();
	for (struct gaia_mapping *m = mappings; m; m = m->next) {
		struct cuda_replica *r = m->replicas[dev];
		if (promotable(m, dev, free_bytes)) {
			some = true;
		} else if (fits_whole(m, dev, free_bytes) && !r->stays_said) {
			r->stays_said = true;
			gaia_info("%s: device %d has room for a whole replica (%zu MiB free), but kernels touched "
				  "%zu of its %zu 64 KiB units since it pages on demand: it stays paged (its "
				  "kernels cannot write it; a whole replica would move the rest too)",
				  m->path, dev, free_bytes >> 20, cuda_replica_touched_units(r), units_of(m));
		}
	}
	mapping_lock_give();
	if (!some)
		return 0;
	/* The kernels that may use them are waited for first, without the
	 * lock, as for a demotion. */
	unsigned held = gpu_mappings_quiesce(NULL, UINTPTR_MAX, false);
	mapping_lock_take();
	unsigned promoted = 0;
	for (struct gaia_mapping *m = mappings; m; m = m->next) {
		if (!promotable(m, dev, free_bytes))
			continue;
		size_t bytes = m->len * (m->exec.writable ? 2 : 1); /* replica, base copies */
		gaia_info("%s: device %d has room for a whole replica again (%zu MiB free): the one paged on "
			  "demand is given up, and the next launch makes a whole one",
			  m->path, dev, free_bytes >> 20);
		m->demoted[dev] = false;
		gpu_mapping_forget_locked(m);
		stats_add(GAIA_STAT_promoted_replicas, 1);
		free_bytes -= bytes < free_bytes ? bytes : free_bytes;
		promoted++;
	}
	mapping_lock_give();
	if (held)
		gpu_mappings_quiesce_end(held);
	return promoted;
}

void gpu_mapping_after_fork_locked(struct gaia_mapping *m)
{
	/* The child has no device context: the parent's replicas are not its
	 * own (their host memory is, and is freed), and the engine forgets
	 * every device (the FREE actions that emits are the parent's to do).
	 * A registration for reading in place is the parent's too. */
	gpu_pinned_after_fork(m);
	pinned_bytes = 0;
	gpu_peer_forget(m);
	for (int d = 0; d < TSVT_MAX_DEVICES; d++) {
		if (m->replicas[d] && lrc_device_forget(&m->engine, d, &m->plan))
			gaia_error("after fork: %s: cannot forget device %d's copy", m->path, d);
		lrc_plan_reset(&m->plan);
		free(m->replicas[d]);
		m->replicas[d] = NULL;
		m->exec.replica[d] = NULL;
		m->replica_failed[d] = -ENODEV; /* the parent's device, not this process's */
		m->forked = true;
		device_exec_forget(&m->exec, d);
	}
}

/* --- launch --- */

/* Whether v is an address of m's still mapped pages (a part the program
 * unmapped may hold other memory now). */
static bool live_at(const struct gaia_mapping *m, uint64_t v)
{
	if (v < m->start || v >= m->start + m->len)
		return false;
	uint64_t page = (v - m->start) / PG;
	const struct range_set *live = &m->engine.live;
	for (size_t i = 0; i < live->count; i++)
		if (page >= live->items[i].first && page < live->items[i].end)
			return true;
	return false;
}

static bool points_into(const struct gaia_mapping *m, const uint64_t *values, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (live_at(m, values[i]))
			return true;
	return false;
}

/* Pages about to be uploaded are read in one call per range rather than
 * one fault each (the shim's view of the file is a mapping of its own). */
static void populate_uploads(struct gaia_mapping *m)
{
	for (size_t i = 0; i < m->plan.count; i++) {
		const struct lrc_action *a = &m->plan.items[i];
		if (a->kind != LRC_UPLOAD || a->first >= m->exec.valid_pages)
			continue;
		uint64_t n = a->first + a->npages <= m->exec.valid_pages ? a->npages
									 : m->exec.valid_pages - a->first;
		REAL(madvise)((void *)(m->exec.cpu + a->first * PG), n * PG, MADV_POPULATE_READ);
	}
}

/* Whether actions of these kinds (LRC_MOVES_*), rebasing rebase_pages
 * pages, on m's replica on dev must wait for the kernels launched earlier
 * there. GAIA_RUNNING_KERNELS=isolated: any (they must see the bytes as at
 * their own launch, DESIGN promise 4). shared: those that would replace
 * bytes they may be writing: an upload into a writable region, a rebase
 * with protect records; and a rebase the device cannot do at once
 * (cuda_replica_rebases_in_place; pages the shim cannot read split it). A rebase on the device keeps their
 * stores (device_ops.rebase); an upload into a read-only region replaces
 * bytes they can only read, as a CPU store into host memory would. */
static bool moves_need_idle_device(struct gaia_mapping *m, int dev, unsigned kinds, uint64_t rebase_pages)
{
	if (kinds && gaia_config()->running_kernels == GAIA_RUNNING_KERNELS_ISOLATED)
		return true;
	if ((kinds & LRC_MOVES_UPLOAD) && m->exec.writable)
		return true;
	return (kinds & LRC_MOVES_REBASE) &&
	       (m->exec.prot[dev].count || m->exec.no_load ||
		!cuda_replica_rebases_in_place(m->replicas[dev], rebase_pages));
}

/* A launch that waits for the kernels launched earlier on its device never
 * goes on if one of them waits for the host to act after this launch: once
 * a wait has lasted LAUNCH_WAIT_NOTE_S, the shim says (once) what it waits
 * for and how to let such a launch go on. A thread of the shim's, started
 * at the first such wait, watches the clock (it takes no signals). */
/* One slot per kind of wait: waits of different kinds (a launch's, a
 * munmap's in another thread) run at once, each with its own deadline and
 * note. A second wait of a kind already watched goes unwatched. */
#define WAIT_KINDS 4
struct wait_slot {
	bool waiting;
	struct timespec deadline;
	char note[1400];
};
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* CLOCK_MONOTONIC */
	pid_t watcher;       /* the process whose watcher runs; 0: none */
	unsigned noted;      /* the kinds noted (bits) */
	struct wait_slot slot[WAIT_KINDS];
} wait_note = {.lock = PTHREAD_MUTEX_INITIALIZER};

static bool reached(const struct timespec *now, const struct timespec *deadline)
{
	return now->tv_sec > deadline->tv_sec ||
	       (now->tv_sec == deadline->tv_sec && now->tv_nsec >= deadline->tv_nsec);
}

static void *watch_launch_waits(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&wait_note.lock);
	for (;;) {
		const struct timespec *first = NULL;
		for (int k = 0; k < WAIT_KINDS; k++) {
			const struct wait_slot *w = &wait_note.slot[k];
			if (w->waiting && (!first || reached(first, &w->deadline)))
				first = &w->deadline;
		}
		if (!first) {
			pthread_cond_wait(&wait_note.cond, &wait_note.lock);
			continue;
		}
		struct timespec deadline = *first, now;
		pthread_cond_timedwait(&wait_note.cond, &wait_note.lock, &deadline);
		clock_gettime(CLOCK_MONOTONIC, &now);
		for (int k = 0; k < WAIT_KINDS; k++) {
			struct wait_slot *w = &wait_note.slot[k];
			if (w->waiting && reached(&now, &w->deadline)) {
				wait_note.noted |= 1u << k;
				w->waiting = false;
				gaia_warn("%s", w->note);
			}
		}
	}
	return NULL;
}

/* Under wait_note.lock. */
static bool start_watcher_locked(void)
{
	if (wait_note.watcher == getpid())
		return true;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&wait_note.cond, &ca);
	pthread_condattr_destroy(&ca);
	bool ok = gaia_thread_start(watch_launch_waits, NULL) == 0;
	if (ok)
		wait_note.watcher = getpid();
	return ok;
}

/* In a fork child: only the forking thread exists there, so the lock may
 * be held by a thread that is gone (the watcher, while it prints), and
 * the watcher is the parent's; the next wait starts the child's own. */
void gpu_wait_note_after_fork_child(void)
{
	pthread_mutex_init(&wait_note.lock, NULL);
	wait_note.watcher = 0;
	for (int k = 0; k < WAIT_KINDS; k++)
		wait_note.slot[k].waiting = false;
	/* Launches in flight in other threads at the fork are not the
	 * child's. */
	for (int d = 0; d < TSVT_MAX_DEVICES; d++)
		launches_queued[d] = devices.planned[d];
	/* Only what this thread holds (a fork from a signal handler that
	 * interrupted a quiesce) is the child's: it ends it. */
	draining = drains_mine;
}

/* Runs wait() (a wait on the device); if it lasts LAUNCH_WAIT_NOTE_S, the
 * watcher prints the note `fmt` makes (once per process and kind, a bit). */
static int watched_wait(unsigned kind, int (*wait)(void), const char *fmt, ...)
{
	int k = __builtin_ctz(kind);
	struct wait_slot *w = &wait_note.slot[k];
	bool mine = false;
	pthread_mutex_lock(&wait_note.lock);
	if (!(wait_note.noted & kind) && !w->waiting && start_watcher_locked()) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(w->note, sizeof(w->note), fmt, ap);
		va_end(ap);
		clock_gettime(CLOCK_MONOTONIC, &w->deadline);
		w->deadline.tv_sec += LAUNCH_WAIT_NOTE_S;
		w->waiting = mine = true;
		pthread_cond_signal(&wait_note.cond);
	}
	pthread_mutex_unlock(&wait_note.lock);
	int rc = wait();
	if (mine) {
		pthread_mutex_lock(&wait_note.lock);
		if (w->waiting) {
			w->waiting = false;
			pthread_cond_signal(&wait_note.cond);
		}
		pthread_mutex_unlock(&wait_note.lock);
	}
	return rc;
}

/* Called without the mapping lock; `path` is copied first. */
static void wait_for_earlier_kernels(int dev, const char *path, bool isolated)
{
	watched_wait(WAIT_EARLIER_KERNELS, cuda_synchronize,
		     "a kernel launch on device %d has waited %d s for the kernels launched earlier there: "
		     "the CPU changed %s, %s. If one of those kernels waits for the host to act after "
		     "this launch, it never ends%s",
		     dev, LAUNCH_WAIT_NOTE_S, path,
		     isolated ? "which they may still read (GAIA_RUNNING_KERNELS=isolated: they see the "
				"bytes as at their own launch)"
			      : "and its new bytes can only be brought to the device with it idle (README, "
				"\"A launch while earlier kernels run\")",
		     isolated ? "; GAIA_RUNNING_KERNELS=shared lets it go on (the running kernels may then "
				"see the CPU's later bytes, as in host memory)"
			      : "");
	stats_add(GAIA_STAT_launch_waits, 1);
}

/* Called without the mapping lock; `path` is copied first. */
static void wait_to_create_replica(int dev, const char *path)
{
	watched_wait(WAIT_EARLIER_KERNELS, cuda_synchronize,
		     "a kernel launch on device %d has waited %d s for the kernels launched earlier there: "
		     "%s gets its first device copy, and under GAIA_BACKING=vmm making one waits for the "
		     "device (cuMemSetAccess synchronizes). If one of those kernels waits for the host to "
		     "act after this launch, it never ends; GAIA_BACKING=managed makes the copy without "
		     "waiting",
		     dev, LAUNCH_WAIT_NOTE_S, path);
	stats_add(GAIA_STAT_launch_waits, 1);
}

/* GAIA_RUNNING_KERNELS=shared, after rebases queued while kernels run: the
 * launch goes on once the rebase kernel ran, which needs room on the
 * device next to them. */
static int wait_for_running_rebases(int dev, const char *path)
{
	return watched_wait(WAIT_RUNNING_REBASE, cuda_shim_settle,
		     "a kernel launch on device %d has waited %d s for the shim's rebase of %s "
		     "(GAIA_RUNNING_KERNELS=shared): the kernels running there leave no room for it on "
		     "the device. If one of them waits for the host to act after this launch, it never "
		     "ends",
		     dev, LAUNCH_WAIT_NOTE_S, path);
}

/* --- the protocol's host (runtime/lrc_proto.h): the mappings, under
 * mapping_lock --- */

/* What one launch or sync passes to the callbacks. */
struct host_call {
	const uint64_t *values;
	size_t nvalues;
	bool all;
	struct gpu_translation *out;
	size_t nout, out_capacity;
	bool out_full; /* a translation had no room: the launch is refused */
	bool isolated;
	uint64_t rebased_pages; /* rebased while kernels ran (GAIA_RUNNING_KERNELS=shared) */
	int launch_dev;         /* a launch's device (it waits while a quiesce drains it), or -1 */
};

static void host_lock(void *ctx)
{
	const struct host_call *c = ctx;
	mapping_lock_take();
	if (c && c->launch_dev >= 0)
		drain_wait_locked();
}

static void host_unlock(void *ctx)
{
	(void)ctx;
	mapping_lock_give();
}

static void *host_next(void *ctx, void *prev)
{
	(void)ctx;
	return prev ? ((struct gaia_mapping *)prev)->next : mappings;
}

static struct lrc_region *host_engine(void *region)
{
	return &((struct gaia_mapping *)region)->engine;
}

static struct lrc_plan *host_plan(void *region)
{
	return &((struct gaia_mapping *)region)->plan;
}

static const char *host_name(void *region)
{
	return ((struct gaia_mapping *)region)->path;
}

static bool host_holds(void *region, int dev)
{
	return ((struct gaia_mapping *)region)->replicas[dev] != NULL;
}

static enum lrc_want host_wants(void *ctx, void *region)
{
	const struct host_call *c = ctx;
	if (points_into(region, c->values, c->nvalues))
		return LRC_WANT_NEEDED;
	if (((const struct gaia_mapping *)region)->pinned)
		return LRC_WANT_ACQUIRE; /* kernels may keep pointers into it: looked at every launch */
	return c->all ? LRC_WANT_ACQUIRE : LRC_WANT_NOT;
}

/* The CPU's release first (its writes become versions), and what other
 * processes published: the device must see both. */
static void host_learn(void *region)
{
	mapping_collect_locked(region);
	mapping_acquire_locked(region);
}

static int host_ensure_replica(void *region, int dev)
{
	return ensure_replica(region, dev);
}

static bool host_needs_idle(void *region, int dev, unsigned kinds, uint64_t rebase_pages)
{
	return moves_need_idle_device(region, dev, kinds, rebase_pages);
}

/* Under vmm, the driver's cuMemSetAccess synchronizes the device (cuda.h
 * marks it \note_sync). */
static bool host_creating_needs_idle(void *region, int dev)
{
	const struct gaia_mapping *m = region;
	char why[384];
	if (m->pinned)
		return m->pinned_stale; /* renewing the registration waits for the kernels reading it */
	return !m->replicas[dev] && !m->replica_failed[dev] && !m->pinned && backing_for(dev) == GAIA_BACKING_VMM &&
	       !gpu_vmm_refused(m) && reads_in_place(m, dev, false, why, sizeof(why)) == NOT_IN_PLACE &&
	       !pages_on_demand(m, dev, why, sizeof(why));
}

static int host_run_plan(void *region, int dev, enum lrc_run why)
{
	struct gaia_mapping *m = region;
	uint64_t count[LRC_FREE + 1] = {0};
	if (why == LRC_RUN_DIFF_START) {
		device_exec_start_diffs(&m->exec, dev, &m->plan);
		return 0;
	}
	for (size_t i = 0; i < m->plan.count; i++)
		count[m->plan.items[i].kind] += m->plan.items[i].npages;
	/* Every run: a size change of the file waits for the mapping lock
	 * (mapping_file_resize_begin), so this holds for the whole run. */
	m->exec.valid_pages = file_valid_pages(m);
	if (why == LRC_RUN_LAUNCH) {
		populate_uploads(m);
		stats_add(GAIA_STAT_cpu_dirty_pages, count[LRC_PUBLISH]);
	}
	if (why == LRC_RUN_RELEASE)
		stats_add(GAIA_STAT_device_dirty_pages, count[LRC_MERGE_TO_CPU]);
	return why == LRC_RUN_DIFF_STARTED ? mapping_run_diffs_locked(m, dev) : mapping_run_plan_locked(m);
}

static void host_wait_device(void *ctx, int dev, const char *region_name, enum lrc_wait why)
{
	const struct host_call *c = ctx;
	if (why == LRC_WAIT_CREATE)
		wait_to_create_replica(dev, region_name);
	else
		wait_for_earlier_kernels(dev, region_name, c->isolated);
}

/* The translations found before the start over may name regions gone
 * since (unmapped during the wait): found again from scratch. */
static void host_restart(void *ctx)
{
	((struct host_call *)ctx)->nout = 0;
}

/* Pointers into m's still mapped pages become dptr's (m's first byte
 * there): one translation per piece, none for a part the program
 * unmapped, where other memory may be now. */
static void translate_live(struct host_call *c, const struct gaia_mapping *m, uint64_t dptr)
{
	const struct range_set *live = &m->engine.live;
	if (!c->out)
		return; /* an acquire without a launch: nothing to translate */
	for (size_t i = 0; i < live->count; i++) {
		if (c->nout == c->out_capacity) {
			c->out_full = true;
			return;
		}
		uint64_t from = live->items[i].first * PG, to = live->items[i].end * PG;
		c->out[c->nout++] = (struct gpu_translation){m->start + from, m->start + to, dptr + from};
	}
}

static void host_launched(void *ctx, void *region, int dev, int moved)
{
	struct host_call *c = ctx;
	struct gaia_mapping *m = region;
	struct cuda_replica *r = m->replicas[dev];
	if (!r) {
		/* Through HMM: what kernels faulted on comes into the page
		 * cache first. */
		if (m->pinned_hmm) {
			gpu_hmm_read_ahead_learned(m, learn_round);
			/* and while it runs, what it faults on next */
			gpu_front_watch_hmm(m, m->start, m->len, m->fd, (uint64_t)m->offset, dev);
		}
		/* Read in place: at the address the driver gave it there. */
		if (m->pinned_dptr[dev] && m->pinned_dptr[dev] != m->start)
			translate_live(c, m, m->pinned_dptr[dev]);
		return;
	}
	if (moved)
		gaia_error("bringing %s to device %d failed: %s; the launch is refused", m->path, dev,
			   strerror(-moved));
	if (m->exec.uploaded_pages != m->uploaded_seen) {
		m->uploaded_seen = m->exec.uploaded_pages;
		cuda_replica_prefetch(r);
	}
	/* What kernels faulted on before comes ahead of this one, within half
	 * the device's free memory (the rest would push it out again): the
	 * program's own allocations and CUPTI's are not the replica's to
	 * use. On a GPU the free memory also leaves out managed pages already
	 * there, this replica's among them, so the bound errs on the small
	 * side, down to nothing once a region larger than the device has
	 * filled it (not measured on a GPU). Without an answer: half the
	 * device. */
	if (r->paged && r->learned.round_of && (r->learned.due || r->dirty_since_prefetch)) {
		size_t room = 0;
		if (!gpu_device_free_known(&room))
			room = gpu_device_total_bytes();
		cuda_replica_prefetch_learned(r, room / 2, learn_round);
	}
	/* and while it runs, what it faults on next */
	if (r->paged)
		gpu_front_watch(r);
	if (r->backing != GAIA_BACKING_MANAGED)
		return;
	translate_live(c, m, r->dptr);
}

static void host_released(void *ctx, void *region, int dev, int rc, int moved)
{
	struct gaia_mapping *m = region;
	(void)ctx;
	if (rc && rc != -EAGAIN)
		gaia_error("release of %s by device %d failed: %s", m->path, dev, strerror(-rc));
	else if (moved)
		gaia_error("a sync could not bring the changes of device %d to %s: %s; the sync "
			   "reports an error, and the next sync tries again",
			   dev, m->path, strerror(-moved));
	if (rc == -EAGAIN)
		return;
	stats_add(GAIA_STAT_merged_pages, m->exec.merged_pages - m->merged_seen);
	stats_add(GAIA_STAT_conflict_bytes, m->exec.conflict_bytes - m->conflicts_seen);
	if ((m->flags & MAP_TYPE) != MAP_PRIVATE)
		stats_add(GAIA_STAT_writeback_pages, m->exec.merged_pages - m->merged_seen);
	m->merged_seen = m->exec.merged_pages;
	m->conflicts_seen = m->exec.conflict_bytes;
	stats_add(GAIA_STAT_releases, 1);
}

static int host_settle(void *ctx, int dev, const char *rebased_name)
{
	(void)ctx;
	if (!rebased_name)
		return cuda_shim_settle();
	stats_add(GAIA_STAT_running_rebases, 1);
	return wait_for_running_rebases(dev, rebased_name);
}

/* A sync's comparisons, queued ahead: they run once the program's kernels
 * leave room for them on the device. */
static void host_await_diffs(void *ctx, int dev)
{
	(void)ctx;
	(void)watched_wait(WAIT_SYNC_DIFF, cuda_diffs_wait,
			   "a sync on device %d has waited %d s for the shim's comparison of the device's "
			   "pages with their bases: the kernels running there leave no room for it on the "
			   "device, and the sync returns once they end. Other threads' mmap, read, and "
			   "munmap of files without a copy on that device do not wait for it",
			   dev, LAUNCH_WAIT_NOTE_S);
}

static const struct lrc_host host = {
	.lock = host_lock,
	.unlock = host_unlock,
	.next = host_next,
	.engine = host_engine,
	.plan = host_plan,
	.name = host_name,
	.holds = host_holds,
	.wants = host_wants,
	.learn = host_learn,
	.ensure_replica = host_ensure_replica,
	.needs_idle = host_needs_idle,
	.creating_needs_idle = host_creating_needs_idle,
	.run_plan = host_run_plan,
	.wait_device = host_wait_device,
	.restart = host_restart,
	.launched = host_launched,
	.released = host_released,
	.settle = host_settle,
	.await_diffs = host_await_diffs,
};

/* The host with this call's context. */
static struct lrc_host host_for(struct host_call *c)
{
	struct lrc_host h = host;
	h.ctx = c;
	return h;
}

int gpu_mappings_launch(int dev, const uint64_t *values, size_t nvalues, bool all,
			struct gpu_translation *out, size_t out_capacity, bool *planned)
{
	*planned = false;
	if (dev < 0 || dev >= TSVT_MAX_DEVICES || !cuda_backend_ready())
		return 0;
	*planned = true; /* lrc_proto_launch counts it in devices.planned */
	uint64_t t0 = now_ns();
	struct host_call c = {
		.values = values,
		.nvalues = nvalues,
		.all = all,
		.out = out,
		.out_capacity = out_capacity,
		.isolated = gaia_config()->running_kernels == GAIA_RUNNING_KERNELS_ISOLATED,
		.launch_dev = dev,
	};
	struct lrc_host h = host_for(&c);
	int failed = lrc_proto_launch(&h, &devices, dev);
	stats_add(GAIA_STAT_acquire_ns, now_ns() - t0);
	if (!failed && c.out_full) {
		/* Untranslated pointers would reach the host's pages, not the
		 * replicas: refused rather than run on the wrong bytes. */
		gaia_error("a launch on device %d reaches more pieces of regions in managed memory than one launch "
			   "translates (%zu); it is refused", dev, out_capacity);
		failed = -E2BIG;
	}
	return failed ? failed : (int)c.nout;
}

int gpu_mappings_acquire_range(int dev, const void *addr, size_t len)
{
	size_t n = 0, cap = 16;
	uint64_t *values = malloc(cap * sizeof(*values));
	if (!values)
		return -ENOMEM;
	uintptr_t lo = (uintptr_t)addr, hi = lo + len;
	mapping_lock_take();
	for (struct gaia_mapping *m = mappings; m; m = m->next) {
		if (m->start >= hi || m->start + m->len <= lo)
			continue;
		if (n == cap) {
			uint64_t *more = realloc(values, 2 * cap * sizeof(*values));
			if (!more)
				break;
			values = more;
			cap *= 2;
		}
		values[n++] = m->start > lo ? m->start : lo; /* a point inside m */
	}
	mapping_lock_give();
	bool planned = false;
	int rc = n ? gpu_mappings_launch(dev, values, n, false, NULL, 0, &planned) : -ENOENT;
	if (planned)
		gpu_mappings_launch_queued(dev); /* no kernel follows */
	free(values);
	return rc;
}

/* --- sync --- */

int gpu_mappings_sync(int dev, bool snapshot)
{
	if (dev < 0 || dev >= TSVT_MAX_DEVICES || !mapping_any())
		return 0;
	uint64_t t0 = now_ns();
	struct host_call c = {.all = false, .launch_dev = -1};
	struct lrc_host h = host_for(&c);
	/* The caller (gpu.c) made sure every kernel launched on dev since its
	 * last release has finished, or asks for a snapshot release: the
	 * diff may meet kernels still writing, and the epochs stay open. */
	int rc = lrc_proto_sync(&h, &devices, dev, snapshot);
	stats_add(GAIA_STAT_release_ns, now_ns() - t0);
	return rc;
}
