/* Prefetch ahead of the fault front while kernels run (mode M,
 * research/gpu_ondemand.md §3.4): a region paged on demand brings a page
 * to the device when a kernel first touches it, one fault each. While
 * kernels may run on such regions, a thread reads CUPTI's fault records
 * every FRONT_POLL_US (gpu_faults_peek) and, for each 64 KiB unit a
 * kernel faulted on, prefetches a window of units from there
 * (cuMemPrefetchAsync on a stream of its own, the kernel's pages stay
 * coherent while they move). A GPU's blocks fault at several places at
 * once, so a region follows up to FRONT_STREAMS_PER_REGION fronts, each
 * runtime/readahead.c's policy in units: a fault at the end of a front's
 * last window (exactly: one further may have skipped it) doubles that
 * front's window (up to 64 MiB, and a sixteenth of the device) if the
 * kernel read the window through, and halves it if not: a window of 8
 * units or more leaves FRONT_HOLES units out, spread over it, and a
 * kernel that faulted on fewer than two of them went through it reading
 * some units only (every k-th: a stride a window would hide), one inside a
 * window still in flight changes nothing, and one elsewhere starts a
 * front (in place of the one unused longest) with the region's opening
 * window, which starts at GAIA_GPU_READAHEAD_KB and halves at each new
 * front (down to one unit: faults at random places fetch little beyond
 * themselves; a front that goes on still doubles its own).
 * Units prefetched once are not prefetched again
 * until the epoch ends (a full release: the host compares the replica and
 * its pages may come back), and an epoch prefetches at most a quarter of
 * the device's memory per region (more would push out what kernels use).
 *
 * A region read through HMM (mode H) has a front too, over its file and
 * per device: its pages fault on the device whatever the page cache holds
 * (nothing moves them to the device), so a window is read ahead into the
 * page cache (the kernel's faults then find the pages, not the disk), and
 * every unit a kernel touches faults, the holes too (they are read ahead
 * with the rest). Its budget and largest window are the machine's memory
 * where a replica's are the device's. An H front that saw no fault in an
 * epoch goes at its end (its region's next launch makes it again).
 *
 * Reading ahead (POSIX_FADV_WILLNEED) allocates page cache and may wait
 * for memory and for the disk's queue, so it is never done under a lock:
 * windows (the front's, and the learned ones a launch reads ahead for a
 * region read through HMM) are queued to a reader thread of their own,
 * which asks for them 128 KiB at a time (what the kernel reads of one
 * request) without ahead_lock. Forgetting a key drops its queued windows
 * and waits for the piece being read (the file descriptor stays open
 * until then).
 *
 * A full release on a device (gpu_front_pause) stops the prefetching for
 * that device's regions until their next launch; a thread that finds no
 * new record for 100 ms reads less often, up to every 20 ms.
 *
 * Locks: front_lock is a leaf but for the driver, CUPTI (whose buffer
 * callbacks take only gpu_faults.c's leaf) and ahead_lock (a leaf, taken
 * under it and alone): the thread holds it across
 * its reads of the records and its prefetch calls, so that
 * gpu_front_forget, which takes it, returns only once no prefetch of the
 * replica can still be issued (it then waits for the stream), and a pause
 * only once what the thread read is where the sync's take finds it. A
 * pass lets a waiting thread in between two faults (`waiting`). Callers
 * may hold the mapping lock, which a fork takes before this one
 * (process.c), so nothing here takes the shim's other locks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cudaTypedefs.h>

#include "backend_cuda_internal.h"
#include "gpu.h"
#include "gpu_mapping.h"
#include "readahead.h"
#include "stats.h"

#define FRONT_MAX 64     /* replicas watched at once; more are not prefetched during kernels */
#define FRONT_STREAMS 16 /* contexts */
#define FAULTS_PER_PASS 4096
#define FRONT_STREAMS_PER_REGION 16
#define FRONT_HOLES 3
#define FRONT_POLL_US 500   /* a 64 KiB fault costs tens of microseconds on a GPU */

struct front {
	const void *key;           /* the replica (M) or the mapping (H) */
	CUdeviceptr dptr;          /* where kernels reach it */
	size_t len, units;
	CUcontext ctx;             /* NULL: read through HMM */
	int fd;                    /* H: the file, and the offset of dptr in it */
	uint64_t file_offset;
	int device;
	/* the memory windows go to (0: unknown), asked once: the device's
	 * (M), the machine's (H: the page cache) */
	size_t device_bytes;
	uint8_t *fetched;          /* per unit: prefetched this epoch */
	uint8_t *ever;             /* per unit: in a window kernels read through, some epoch */
	uint64_t budget_units;     /* what the epoch may still prefetch */
	uint32_t opening_units;    /* a new front's first window */
	uint32_t max_units;        /* a window's largest */
	uint64_t clock;            /* faults seen, for the fronts' last use */
	struct {
		struct readahead ra; /* in units (see start_front) */
		uint64_t used;       /* clock at its last fault; 0: free */
		/* units of its last window left out of the prefetch, to
		 * see whether the kernel reads the window through: a dense
		 * kernel faults on them, one that reads every k-th unit
		 * mostly does not */
		uint64_t holes[FRONT_HOLES];
		unsigned nholes, hole_hits;
	} fronts[FRONT_STREAMS_PER_REGION];
};

static pthread_mutex_t front_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t front_cv = PTHREAD_COND_INITIALIZER;
static struct front fronts[FRONT_MAX];
static unsigned nfronts;
static uint64_t active;  /* bit d: kernels may run on device d's watched replicas */
static bool started;
static int waiting;      /* threads waiting for front_lock (atomic): a pass lets them in */
static struct {
	CUcontext ctx;
	CUstream stream;
} streams[FRONT_STREAMS];
static unsigned nstreams;

/* --- the reader of windows ahead into the page cache --- */

#define AHEAD_QUEUE 1024 /* windows queued at once; more are dropped (hints) */
/* What one WILLNEED reads at most: the device's readahead maximum (128
 * KiB by default), so a window is asked for in pieces of that size. */
#define AHEAD_PIECE (128u << 10)

struct ahead {
	const void *key;
	int fd;
	uint64_t offset, len;
};

static pthread_mutex_t ahead_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ahead_cv = PTHREAD_COND_INITIALIZER;      /* a window queued */
static pthread_cond_t ahead_done_cv = PTHREAD_COND_INITIALIZER; /* a piece read */
static struct ahead ahead_queue[AHEAD_QUEUE];
static unsigned ahead_head, ahead_count;
static const void *ahead_busy;   /* the key of the window being read, or NULL */
static int ahead_cancel;         /* atomic: stop the window being read */
static bool ahead_started;

void gpu_file_willneed(int fd, uint64_t offset, uint64_t len, const int *stop)
{
	for (uint64_t done = 0; done < len && !(stop && __atomic_load_n(stop, __ATOMIC_RELAXED)); done += AHEAD_PIECE)
		(void)posix_fadvise(fd, (off_t)(offset + done), (off_t)(len - done < AHEAD_PIECE ? len - done : AHEAD_PIECE),
				    POSIX_FADV_WILLNEED);
}

static void *ahead_loop(void *arg)
{
	(void)arg;
	gaia_in_shim++; /* for good: this thread is the shim's */
	pthread_mutex_lock(&ahead_lock);
	for (;;) {
		while (!ahead_count)
			pthread_cond_wait(&ahead_cv, &ahead_lock);
		struct ahead a = ahead_queue[ahead_head];
		ahead_head = (ahead_head + 1) % AHEAD_QUEUE;
		ahead_count--;
		ahead_busy = a.key;
		__atomic_store_n(&ahead_cancel, 0, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&ahead_lock);
		gpu_file_willneed(a.fd, a.offset, a.len, &ahead_cancel);
		pthread_mutex_lock(&ahead_lock);
		ahead_busy = NULL;
		pthread_cond_broadcast(&ahead_done_cv);
	}
	return NULL;
}

bool gpu_file_ahead(const void *key, int fd, uint64_t offset, size_t len)
{
	if (fd < 0 || !len)
		return false;
	pthread_mutex_lock(&ahead_lock);
	if (!ahead_started) {
		ahead_started = gaia_thread_start(ahead_loop, NULL) == 0;
		if (!ahead_started) {
			static int once;
			gaia_log_once(&once, GAIA_LOG_INFO, "nothing is read ahead for regions read through HMM: "
				      "the reading thread did not start");
		}
	}
	bool queued = ahead_started && ahead_count < AHEAD_QUEUE;
	if (queued) {
		ahead_queue[(ahead_head + ahead_count) % AHEAD_QUEUE] = (struct ahead){key, fd, offset, len};
		ahead_count++;
		pthread_cond_signal(&ahead_cv);
	}
	pthread_mutex_unlock(&ahead_lock);
	return queued;
}

/* Drops key's queued windows and waits for the piece of one being read. */
static void ahead_forget(const void *key)
{
	pthread_mutex_lock(&ahead_lock);
	unsigned kept = 0;
	for (unsigned i = 0; i < ahead_count; i++) {
		struct ahead a = ahead_queue[(ahead_head + i) % AHEAD_QUEUE];
		if (a.key != key)
			ahead_queue[(ahead_head + kept++) % AHEAD_QUEUE] = a;
	}
	ahead_count = kept;
	if (ahead_busy == key)
		__atomic_store_n(&ahead_cancel, 1, __ATOMIC_RELAXED);
	while (ahead_busy == key)
		pthread_cond_wait(&ahead_done_cv, &ahead_lock);
	pthread_mutex_unlock(&ahead_lock);
}

static uint64_t bit_of(int device)
{
	return device >= 0 && device < 64 ? 1ull << device : 0;
}

/* The lock for a thread other than the front's: the front's pass lets it
 * in between two faults. */
static void lock_from_outside(void)
{
	__atomic_add_fetch(&waiting, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&front_lock);
	__atomic_sub_fetch(&waiting, 1, __ATOMIC_RELAXED);
}

static bool held_for_fork; /* by the forking thread, from gpu_front_before_fork */

void gpu_front_before_fork(void)
{
	lock_from_outside();
	pthread_mutex_lock(&ahead_lock);
	held_for_fork = true;
}

void gpu_front_after_fork(bool child)
{
	bool held = held_for_fork;
	held_for_fork = false;
	if (!child) {
		if (held)
			pthread_mutex_unlock(&ahead_lock);
		pthread_mutex_unlock(&front_lock);
		return;
	}
	/* No reader thread in the child, nothing queued: the parent's
	 * windows are the parent's to read. The lock is this thread's as
	 * front_lock is (the reader never holds it across a fork). */
	if (held)
		pthread_mutex_unlock(&ahead_lock);
	else
		pthread_mutex_init(&ahead_lock, NULL);
	pthread_cond_init(&ahead_cv, NULL);
	pthread_cond_init(&ahead_done_cv, NULL);
	ahead_head = ahead_count = 0;
	ahead_busy = NULL;
	ahead_started = false;
	/* Only the forking thread exists in the child: no front thread, and
	 * the parent's streams are not the child's. The lock is this
	 * thread's, or (a fork the shim made itself) may be the gone
	 * thread's. */
	if (held)
		pthread_mutex_unlock(&front_lock);
	else
		pthread_mutex_init(&front_lock, NULL);
	pthread_cond_init(&front_cv, NULL);
	for (unsigned i = 0; i < nfronts; i++) {
		free(fronts[i].fetched);
		free(fronts[i].ever);
	}
	nfronts = nstreams = 0;
	active = 0;
	started = false;
	waiting = 0;
}

/* A new epoch: nothing prefetched, no fronts. What runs past where a
 * kernel stops is fetched for nothing and pushes out what it uses: a
 * window is at most 64 MiB and a sixteenth of the device, an epoch
 * fetches at most a quarter of it per region. The opening window carries
 * over (a region read at random places stays so). */
static void reset(struct front *f)
{
	const size_t device_bytes = f->device_bytes;
	memset(f->fetched, 0, f->units);
	memset(f->fronts, 0, sizeof(f->fronts));
	f->clock = 0;
	f->budget_units = device_bytes ? device_bytes / 4 / CUDA_FAULT_UNIT : f->units;
	uint64_t max = (64u << 20) / CUDA_FAULT_UNIT;
	if (device_bytes && device_bytes / 16 / CUDA_FAULT_UNIT < max)
		max = device_bytes / 16 / CUDA_FAULT_UNIT;
	f->max_units = max < 1 ? 1 : (uint32_t)max;
	if (!f->opening_units) {
		uint64_t units = (uint64_t)gaia_config()->gpu_readahead_kb * 1024 / CUDA_FAULT_UNIT;
		f->opening_units = units < 1 ? 1 : (uint32_t)units;
	}
	if (f->opening_units > f->max_units)
		f->opening_units = f->max_units;
}

/* runtime/readahead.c takes KiB and counts 4 KiB pages: 4 "KiB" there are
 * one unit here. */
static void start_front(const struct front *f, struct readahead *ra)
{
	readahead_init(ra, f->opening_units * 4, f->max_units * 4);
}

static CUstream stream_of(CUcontext ctx)
{
	for (unsigned i = 0; i < nstreams; i++)
		if (streams[i].ctx == ctx)
			return streams[i].stream;
	if (nstreams == FRONT_STREAMS)
		return NULL;
	CUstream s = NULL;
	if (CU_CHECK(drv.stream_create(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate (the fault front's stream)"))
		return NULL;
	streams[nstreams].ctx = ctx;
	streams[nstreams++].stream = s;
	return s;
}

/* The front a fault at unit u continues (exactly at its last window's
 * end: the kernel went through the window and on; one past the end may
 * have skipped it), or a new one in place of the one unused longest; NULL
 * when u is inside a front's last window (a prefetch in flight, or a
 * record from before it was made). */
static unsigned front_for(struct front *f, uint64_t u, bool may_start, bool *go_on)
{
	unsigned oldest = 0;
	f->clock++;
	*go_on = false;
	for (unsigned i = 0; i < FRONT_STREAMS_PER_REGION; i++) {
		struct readahead *ra = &f->fronts[i].ra;
		if (f->fronts[i].used && u >= ra->window_first && u <= ra->next_page) {
			f->fronts[i].used = f->clock;
			for (unsigned h = 0; h < f->fronts[i].nholes; h++)
				if (f->fronts[i].holes[h] == u) {
					f->fronts[i].holes[h] = UINT64_MAX; /* counted once */
					/* read through: what kernels touched (gpu_front_touched_units) */
					if (++f->fronts[i].hole_hits * 3 >= f->fronts[i].nholes * 2)
						memset(f->ever + ra->window_first, 1, ra->next_page - ra->window_first);
				}
			*go_on = u == ra->next_page;
			return i;
		}
		if (f->fronts[i].used < f->fronts[oldest].used)
			oldest = i;
	}
	if (!may_start)
		return 0; /* *go_on false */
	start_front(f, &f->fronts[oldest].ra);
	f->fronts[oldest].used = f->clock;
	f->fronts[oldest].nholes = f->fronts[oldest].hole_hits = 0;
	if (f->opening_units > 1)
		f->opening_units /= 2;
	*go_on = true;
	return oldest;
}

static bool is_hole(const uint64_t *holes, unsigned n, uint64_t u)
{
	for (unsigned h = 0; h < n; h++)
		if (holes[h] == u)
			return true;
	return false;
}

/* A fault at unit u of f: the window from there, without the units
 * already fetched this epoch, as runs. Returns the pages asked for. */
static uint64_t advance(struct front *f, uint64_t u, uint64_t *windows)
{
	uint64_t first = 0;
	/* A replica's unit fetched faults only with a record from before its
	 * window came, or one the prefetch was too late for; under HMM every
	 * touched unit does (its holes' faults count). Neither starts a
	 * front. */
	if (f->fetched[u] && f->ctx)
		return 0;
	bool go_on;
	unsigned slot = front_for(f, u, !f->fetched[u], &go_on);
	if (!go_on)
		return 0; /* inside a window in flight */
	struct readahead *ra = &f->fronts[slot].ra;
	uint64_t *holes = f->fronts[slot].holes;
	if (f->fronts[slot].nholes && f->fronts[slot].hole_hits * 3 < f->fronts[slot].nholes * 2) {
		/* The kernel went past the window without reading most of its
		 * holes: it reads some units of each run, not all. Readahead
		 * doubles a front that goes on: a quarter of it then is half. */
		ra->window_pages = ra->window_pages / 4 > 1 ? ra->window_pages / 4 : 1;
	}
	uint32_t n = readahead_on_access(ra, u, f->units, &first);
	if (!n)
		return 0; /* beyond the region */
	if (n > f->budget_units) {
		n = (uint32_t)f->budget_units;
		ra->next_page = first + n; /* the front ends where its fetch does */
	}
	f->fronts[slot].nholes = f->fronts[slot].hole_hits = 0;
	if (n >= 8)
		for (unsigned h = 1; h <= FRONT_HOLES; h++)
			holes[f->fronts[slot].nholes++] = first + (uint64_t)n * h / (FRONT_HOLES + 1) + 1;
	CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = f->device};
	CUstream s = f->ctx ? stream_of(f->ctx) : NULL;
	uint64_t pages = 0;
	/* H reads the holes ahead too: they fault anyway. */
	const unsigned nholes = f->ctx ? f->fronts[slot].nholes : 0;
	for (uint64_t a = first; (s || !f->ctx) && a < first + n;) {
		if (f->fetched[a] || is_hole(holes, nholes, a)) {
			a++;
			continue;
		}
		uint64_t b = a;
		while (b < first + n && !f->fetched[b] && !is_hole(holes, nholes, b))
			b++;
		uint64_t off = a * CUDA_FAULT_UNIT, bytes = (b - a) * CUDA_FAULT_UNIT;
		if (off + bytes > f->len)
			bytes = f->len - off;
		/* Only a hint: a page it misses comes at its fault. */
		if (!f->ctx)
			(void)gpu_file_ahead(f->key, f->fd, f->file_offset + off, bytes);
		else if (CU_CHECK(drv.prefetch(f->dptr + off, bytes, loc, 0, s), "cuMemPrefetchAsync (the fault front)"))
			break;
		memset(f->fetched + a, 1, b - a);
		f->budget_units -= b - a;
		pages += (bytes + PG - 1) / PG;
		(*windows)++;
		a = b;
	}
	return pages;
}

static void pass(const uint64_t *addrs, size_t n)
{
	uint64_t pages = 0, windows = 0;
	CUcontext cur = NULL;
	for (size_t i = 0; i < n; i++) {
		if (__atomic_load_n(&waiting, __ATOMIC_RELAXED)) {
			/* a launch, a pause or a free waits: no prefetch is half
			 * made here, and the fronts are looked up again */
			pthread_mutex_unlock(&front_lock);
			sched_yield();
			pthread_mutex_lock(&front_lock);
		}
		for (unsigned k = 0; k < nfronts; k++) {
			struct front *f = &fronts[k];
			if (addrs[i] < f->dptr || addrs[i] >= f->dptr + f->len || !f->budget_units ||
			    !(active & bit_of(f->device)))
				continue;
			if (f->ctx && f->ctx != cur) {
				if (CU_CHECK(drv.ctx_set_current(f->ctx), "cuCtxSetCurrent (the fault front)"))
					break;
				cur = f->ctx;
			}
			pages += advance(f, (addrs[i] - f->dptr) / CUDA_FAULT_UNIT, &windows);
			break;
		}
	}
	stats_add(GAIA_STAT_readahead_pages, pages);
	stats_add(GAIA_STAT_front_windows, windows);
}

static void *front_loop(void *arg)
{
	(void)arg;
	static uint64_t addrs[FAULTS_PER_PASS];
	uint64_t cursor = 0;
	long long idle_us = FRONT_POLL_US, empty = 0;
	gaia_in_shim++; /* for good: this thread is the shim's */
	pthread_mutex_lock(&front_lock);
	for (;;) {
		while (!active || !nfronts) {
			idle_us = FRONT_POLL_US;
			empty = 0;
			pthread_cond_wait(&front_cv, &front_lock);
		}
		/* Under the lock: a pause returns only once the records this
		 * read took from CUPTI are in the shim's list, so the take that
		 * follows it learns them in this round. */
		size_t n = gpu_faults_peek(addrs, FAULTS_PER_PASS, &cursor);
		if (n)
			pass(addrs, n);
		if (n == FAULTS_PER_PASS)
			continue; /* more are waiting */
		/* Nothing faulted for 100 ms (the kernels ended and no full
		 * sync came, or they run on resident pages): read less often,
		 * up to every 20 ms; a record or a launch brings it back to
		 * FRONT_POLL_US. A front that is ahead sees no faults for a
		 * while too: it must not be the one to slow down. */
		empty = n ? 0 : empty + 1;
		idle_us = empty < 100000 / FRONT_POLL_US ? FRONT_POLL_US
			  : idle_us * 2 > 20000	  ? 20000
						  : idle_us * 2;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		long long ns = ts.tv_nsec + idle_us * 1000;
		ts.tv_sec += (time_t)(ns / 1000000000);
		ts.tv_nsec = (long)(ns % 1000000000);
		if (pthread_cond_timedwait(&front_cv, &front_lock, &ts) == 0)
			idle_us = FRONT_POLL_US, empty = 0;
	}
	return NULL;
}

/* Watches key's front (made on its first watch, from `proto`) on its
 * device from this launch on. */
static void watch(const struct front *proto)
{
	lock_from_outside();
	struct front *f = NULL;
	for (unsigned k = 0; k < nfronts && !f; k++)
		if (fronts[k].key == proto->key && fronts[k].device == proto->device)
			f = &fronts[k];
	if (!f && nfronts < FRONT_MAX) {
		uint8_t *fetched = calloc(proto->units, 1), *ever = calloc(proto->units, 1);
		if (fetched && ever) {
			f = &fronts[nfronts++];
			*f = *proto;
			f->fetched = fetched;
			f->ever = ever;
			reset(f);
		} else {
			free(fetched);
			free(ever);
		}
	}
	bool start = f && !started;
	if (start)
		started = gaia_thread_start(front_loop, NULL) == 0;
	if (f && started) {
		active |= bit_of(f->device);
		pthread_cond_broadcast(&front_cv);
	}
	pthread_mutex_unlock(&front_lock);
	if (start && !started)
		gaia_info("no prefetch ahead of the fault front: its thread did not start");
}

void gpu_front_watch(struct cuda_replica *r)
{
	if (!r->paged || !r->ctx || !drv.prefetch || !drv.stream_create || !drv.ctx_set_current ||
	    !gpu_faults_front())
		return;
	/* the launching thread's device is r's */
	struct front proto = {.key = r, .dptr = r->dptr, .len = r->len,
			      .units = (r->len + CUDA_FAULT_UNIT - 1) / CUDA_FAULT_UNIT, .ctx = r->ctx, .fd = -1,
			      .device = r->device, .device_bytes = gpu_device_total_bytes()};
	watch(&proto);
}

void gpu_front_watch_hmm(const void *key, uintptr_t start, size_t len, int fd, uint64_t offset, int dev)
{
	if (fd < 0 || !gpu_faults_front())
		return;
	long phys = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	struct front proto = {.key = key, .dptr = start, .len = len,
			      .units = (len + CUDA_FAULT_UNIT - 1) / CUDA_FAULT_UNIT, .fd = fd, .file_offset = offset,
			      .device = dev, .device_bytes = phys > 0 && psize > 0 ? (size_t)phys * (size_t)psize : 0};
	watch(&proto);
}

static void remove_front(unsigned k)
{
	free(fronts[k].fetched);
	free(fronts[k].ever);
	fronts[k] = fronts[--nfronts];
}

/* Waits for what was queued on the front's streams; front_lock held. */
static void drain_locked(void)
{
	for (unsigned i = 0; i < nstreams; i++)
		(void)CU_CHECK(drv.stream_synchronize(streams[i].stream), "cuStreamSynchronize (the fault front)");
}

void gpu_front_pause(int dev)
{
	lock_from_outside();
	if (nfronts) {
		active &= ~bit_of(dev);
		for (unsigned k = 0; k < nfronts;) {
			struct front *f = &fronts[k];
			if (f->device != dev) {
				k++;
			} else if (!f->ctx && !f->clock) {
				remove_front(k); /* read through HMM, no fault this epoch */
			} else {
				reset(f);
				k++;
			}
		}
		drain_locked();
	}
	pthread_mutex_unlock(&front_lock);
}

void gpu_front_forget(const void *key)
{
	lock_from_outside();
	bool any = false;
	for (unsigned k = 0; k < nfronts;) {
		if (fronts[k].key == key) {
			any = any || fronts[k].ctx;
			remove_front(k);
		} else {
			k++;
		}
	}
	if (any)
		drain_locked();
	pthread_mutex_unlock(&front_lock);
	ahead_forget(key); /* after: the front thread queues none of key's now */
}

size_t gpu_front_touched_units(const struct cuda_replica *r, const uint32_t *learned, size_t units)
{
	lock_from_outside();
	const uint8_t *ever = NULL;
	for (unsigned k = 0; k < nfronts && !ever; k++)
		if (fronts[k].key == r && fronts[k].units == units)
			ever = fronts[k].ever;
	size_t n = 0;
	for (size_t u = 0; u < units; u++)
		n += (learned && learned[u]) || (ever && ever[u]);
	pthread_mutex_unlock(&front_lock);
	return n;
}
