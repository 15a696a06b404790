/* Where kernels fault on replicas paged on demand (mode M) and on regions
 * read through HMM (mode H), learned through
 * CUPTI's unified-memory counter GPU_PAGE_FAULT (research/gpu_ondemand.md
 * §3.4): one activity record per faulting page, with its address, taken
 * at each full release by a forced flush. The simulated GPU ships a
 * libcupti.so.13 that reports its own faults the same way.
 *
 * CUPTI is loaded and enabled only once a region pages on demand or is
 * read through HMM (enabling
 * unified-memory profiling costs the program's own managed memory too),
 * from outside the shim's locks (the library's start-up may call the
 * driver), and never with GAIA_GPU_FAULTS=off (a profiler such as nsys or
 * ncu owns CUPTI in that process). If it is missing or refuses, the
 * replicas keep paging on faults alone, said once at info level.
 *
 * CUPTI may hand buffers back from its own thread: the completion callback
 * takes only `pending_lock`, a leaf.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "gpu_mapping.h"

/* GAIA_HAVE_CUPTI: the build found CUPTI's headers (CMakeLists.txt). */
#ifndef GAIA_HAVE_CUPTI
#define GAIA_HAVE_CUPTI 0
#endif
#if GAIA_HAVE_CUPTI
#include <cupti_activity.h>
#endif

#if GAIA_HAVE_CUPTI

static struct {
	CUptiResult (*configure)(CUpti_ActivityUnifiedMemoryCounterConfig *, uint32_t);
	CUptiResult (*enable)(CUpti_ActivityKind);
	CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
	CUptiResult (*flush_all)(uint32_t);
	CUptiResult (*next_record)(uint8_t *, size_t, CUpti_Activity **);
} cupti;

static int wanted, tried, on; /* atomics */
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;

/* Fault addresses delivered and not yet taken. */
#define PENDING_MAX (1u << 20)
static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *pending;
static size_t npending, pending_cap;
static uint64_t pending_lost;
/* Records taken by gpu_faults_take so far: pending[i] is record
 * taken_total + i of the process (gpu_faults_peek's cursor). */
static uint64_t taken_total;

#define BUFFER_BYTES (1u << 20)

static void CUPTIAPI buffer_wanted(uint8_t **buf, size_t *size, size_t *max_records)
{
	*buf = aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, BUFFER_BYTES);
	*size = *buf ? BUFFER_BYTES : 0;
	*max_records = 0;
}

static void CUPTIAPI buffer_done(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
	(void)ctx;
	(void)stream;
	(void)size;
	CUpti_Activity *rec = NULL;
	pthread_mutex_lock(&pending_lock);
	while (buf && cupti.next_record(buf, valid, &rec) == CUPTI_SUCCESS) {
		if (rec->kind != CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER)
			continue;
		const CUpti_ActivityUnifiedMemoryCounter3 *u = (const CUpti_ActivityUnifiedMemoryCounter3 *)rec;
		if (u->counterKind != CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT)
			continue;
		if (npending == pending_cap && pending_cap < PENDING_MAX) {
			size_t cap = pending_cap ? pending_cap * 2 : 4096;
			uint64_t *p = realloc(pending, cap * sizeof(*p));
			if (p) {
				pending = p;
				pending_cap = cap;
			}
		}
		/* A page faults in several groups: one address per 64 KiB unit
		 * in a row is enough. */
		if (npending && pending[npending - 1] >> 16 == u->address >> 16)
			continue;
		if (npending < pending_cap)
			pending[npending++] = u->address;
		else
			pending_lost++;
	}
	pthread_mutex_unlock(&pending_lock);
	free(buf);
}

/* CUPTI ships with the toolkit, not the driver: the loader's path first,
 * then where the toolkit installs it. */
static void *open_cupti(void)
{
	static const char *const names[] = {
		"libcupti.so.13",
		"libcupti.so",
		"/usr/local/cuda/lib64/libcupti.so.13",
		"/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		if (h)
			return h;
	}
	return NULL;
}

/* On the simulated GPU only its own libcupti (next to its libcuda.so.1)
 * knows its faults; with a real driver any libcupti will do. */
static bool same_directory_as_driver(void *cupti_handle)
{
	void *sim = cuda_real("simgpu_register_kernel");
	void *fn = cuda_loader_dlsym(cupti_handle, "cuptiActivityEnable");
	Dl_info a, b;
	if (!sim)
		return true;
	if (!fn || !dladdr(sim, &a) || !dladdr(fn, &b) || !a.dli_fname || !b.dli_fname)
		return false;
	const char *sa = strrchr(a.dli_fname, '/'), *sb = strrchr(b.dli_fname, '/');
	size_t la = sa ? (size_t)(sa - a.dli_fname) : 0, lb = sb ? (size_t)(sb - b.dli_fname) : 0;
	return la == lb && !strncmp(a.dli_fname, b.dli_fname, la);
}

/* After a fork the child has no device and no CUPTI thread: it learns
 * nothing (its launches fail anyway), and the lock may have been held. */
static void child_after_fork(void)
{
	on = 0;
	pthread_mutex_init(&pending_lock, NULL);
	free(pending);
	pending = NULL;
	npending = pending_cap = 0;
	taken_total = 0;
}

static const char *start(void)
{
	/* CUPTI has one set of activity callbacks per process: a profiler
	 * injected into it, or a program that loaded CUPTI itself, keeps
	 * them (the shim would take its records). One that loads CUPTI later
	 * takes them over: the shim then learns nothing, and loses nothing
	 * of the program's. */
	const char *injected = getenv("CUDA_INJECTION64_PATH");
	if (injected && *injected)
		return "a CUPTI client is injected (CUDA_INJECTION64_PATH)";
	if (dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD) || dlopen("libcupti.so", RTLD_NOW | RTLD_NOLOAD))
		return "the program loaded CUPTI itself";
	void *h = open_cupti();
	if (!h)
		return "libcupti.so.13 not found (it comes with the CUDA toolkit)";
	if (!same_directory_as_driver(h))
		return "the simulated GPU's libcupti.so.13 is not on the loader's path (a toolkit's would not know it)";
	*(void **)&cupti.configure = cuda_loader_dlsym(h, "cuptiActivityConfigureUnifiedMemoryCounter");
	*(void **)&cupti.enable = cuda_loader_dlsym(h, "cuptiActivityEnable");
	*(void **)&cupti.register_callbacks = cuda_loader_dlsym(h, "cuptiActivityRegisterCallbacks");
	*(void **)&cupti.flush_all = cuda_loader_dlsym(h, "cuptiActivityFlushAll");
	*(void **)&cupti.next_record = cuda_loader_dlsym(h, "cuptiActivityGetNextRecord");
	if (!cupti.configure || !cupti.enable || !cupti.register_callbacks || !cupti.flush_all ||
	    !cupti.next_record)
		return "libcupti lacks the activity API";
	CUpti_ActivityUnifiedMemoryCounterConfig cfg = {
		.scope = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_ALL_DEVICES,
		.kind = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT,
		.enable = 1,
	};
	static char why[96];
	CUptiResult rc = cupti.configure(&cfg, 1);
	if (rc == CUPTI_SUCCESS)
		rc = cupti.register_callbacks(buffer_wanted, buffer_done);
	if (rc == CUPTI_SUCCESS)
		rc = cupti.enable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
	if (rc != CUPTI_SUCCESS) {
		snprintf(why, sizeof(why), "CUPTI refused unified-memory fault records (CUptiResult %d)", (int)rc);
		return why;
	}
	(void)pthread_atfork(NULL, NULL, child_after_fork);
	return NULL;
}

void gpu_faults_want(void)
{
	__atomic_store_n(&wanted, 1, __ATOMIC_RELEASE);
}

/* CUPTI's start-up takes device memory of its own: 12 MiB on an H200
 * with the unified-memory counter (free memory 63 -> 51 MiB, 23 -> 11
 * MiB). With 7 MiB free it failed (CUPTI_ERROR_NOT_INITIALIZED) and the
 * context's next kernel ended in CUDA_ERROR_ILLEGAL_ADDRESS
 * (docs/hardware.md). It is started only while the current device has
 * this much free; else it is tried again at a later launch. */
#define CUPTI_START_ROOM ((size_t)32 << 20)

/* Whether some device's primary context is active. */
static bool any_primary_context(void)
{
	const struct cuda_calls *c = cuda_calls();
	int n = 0;
	if (!c->device_get_count || !c->primary_state || c->device_get_count(&n) != CUDA_SUCCESS)
		return false;
	for (int d = 0; d < n; d++) {
		unsigned flags = 0;
		int active = 0;
		if (c->primary_state(d, &flags, &active) == CUDA_SUCCESS && active)
			return true;
	}
	return false;
}

/* Why CUPTI cannot start now (the current device too full, or no way to
 * tell), or NULL; *once: the flag that has it said once. */
static const char *no_room(int **once)
{
	static char why[224];
	static int once_full, once_context;
	size_t free_bytes = 0;
	if (!gpu_device_free_known(&free_bytes)) {
		/* No context on this thread: with none anywhere there is
		 * nothing of the program's to lose; one made on another thread
		 * (a runtime program launching from a worker) cannot be
		 * measured from here, and the launch makes it current. */
		*once = &once_context;
		return any_primary_context() ? "the launching thread has no current context to measure its "
					       "device's free memory by: tried again at a later launch"
					     : NULL;
	}
	if (free_bytes >= CUPTI_START_ROOM)
		return NULL;
	*once = &once_full;
	snprintf(why, sizeof(why),
		 "the device has %zu MiB free, and CUPTI's start-up takes device memory (about 12 MiB; "
		 "without it the context is lost): tried again at a later launch",
		 free_bytes >> 20);
	return why;
}

void gpu_faults_prepare(void)
{
	if (!__atomic_load_n(&wanted, __ATOMIC_ACQUIRE) || __atomic_load_n(&tried, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&start_lock);
	int *once = NULL;
	const char *full = tried || gaia_config()->gpu_faults == GAIA_GPU_FAULTS_OFF ? NULL : no_room(&once);
	if (full) {
		gaia_log_once(once, GAIA_LOG_INFO, "regions paged on demand or read through HMM page on faults alone for now: %s", full);
	} else if (!tried) {
		const char *why = gaia_config()->gpu_faults == GAIA_GPU_FAULTS_OFF ? "GAIA_GPU_FAULTS=off" : NULL;
		if (!why) {
			gaia_in_shim++;
			why = start();
			gaia_in_shim--;
		}
		if (why)
			gaia_info("regions paged on demand or read through HMM page on faults alone, nothing is "
				  "brought ahead for them: %s", why);
		else
			gaia_info("learning where kernels fault on regions paged on demand or read through HMM (CUPTI "
				  "unified-memory GPU_PAGE_FAULT records)");
		__atomic_store_n(&on, why ? 0 : 1, __ATOMIC_RELEASE);
		__atomic_store_n(&tried, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&start_lock);
}

bool gpu_faults_on(void)
{
	return __atomic_load_n(&on, __ATOMIC_ACQUIRE) != 0;
}

uint64_t *gpu_faults_take(size_t *n)
{
	*n = 0;
	if (!__atomic_load_n(&on, __ATOMIC_ACQUIRE))
		return NULL;
	gaia_in_shim++;
	/* Completed buffers only: a forced flush would hand back records
	 * still being written (and a profiler's buffers early). The kernels
	 * ended before this release, so their fault records are complete. */
	CUptiResult rc = cupti.flush_all(0);
	gaia_in_shim--;
	if (rc != CUPTI_SUCCESS) {
		static int once;
		gaia_log_once(&once, GAIA_LOG_WARN, "cuptiActivityFlushAll failed (CUptiResult %d): where kernels "
			      "fault is not learned until it works again", (int)rc);
	}
	pthread_mutex_lock(&pending_lock);
	uint64_t *out = pending;
	*n = npending;
	taken_total += npending;
	pending = NULL;
	npending = pending_cap = 0;
	uint64_t lost = pending_lost;
	pending_lost = 0;
	pthread_mutex_unlock(&pending_lock);
	if (lost)
		gaia_debug("%llu fault records did not fit the shim's buffer", (unsigned long long)lost);
	return out;
}

size_t gpu_faults_peek(uint64_t *out, size_t max, uint64_t *cursor)
{
	if (!__atomic_load_n(&on, __ATOMIC_ACQUIRE))
		return 0;
	/* Completed buffers only, as at a take: on the simulated GPU what
	 * its fault log holds; on a GPU what CUPTI has completed. */
	CUptiResult rc = cupti.flush_all(0);
	if (rc != CUPTI_SUCCESS)
		return 0;
	pthread_mutex_lock(&pending_lock);
	if (*cursor < taken_total)
		*cursor = taken_total; /* a sync took those: they are learned */
	size_t from = (size_t)(*cursor - taken_total), n = 0;
	for (; from + n < npending && n < max; n++)
		out[n] = pending[from + n];
	*cursor += n;
	pthread_mutex_unlock(&pending_lock);
	return n;
}

bool gpu_faults_front(void)
{
	return gpu_faults_on() && gaia_config()->gpu_faults == GAIA_GPU_FAULTS_CUPTI;
}

#else /* no CUPTI headers at build time */

static int wanted;

void gpu_faults_want(void)
{
	__atomic_store_n(&wanted, 1, __ATOMIC_RELEASE);
}

void gpu_faults_prepare(void)
{
	static int once;
	if (__atomic_load_n(&wanted, __ATOMIC_ACQUIRE) && gaia_config()->gpu_faults != GAIA_GPU_FAULTS_OFF)
		gaia_log_once(&once, GAIA_LOG_INFO, "regions paged on demand or read through HMM page on faults alone: the shim "
			      "was built without CUPTI's headers");
}

bool gpu_faults_on(void)
{
	return false;
}

uint64_t *gpu_faults_take(size_t *n)
{
	*n = 0;
	return NULL;
}

size_t gpu_faults_peek(uint64_t *out, size_t max, uint64_t *cursor)
{
	(void)out;
	(void)max;
	(void)cursor;
	return 0;
}

bool gpu_faults_front(void)
{
	return false;
}

#endif
