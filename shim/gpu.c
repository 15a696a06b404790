/* The protocol at launches and syncs (DESIGN §3.3), as the CUDA hooks
 * report them: which device, which regions a kernel's arguments point
 * into, and the argument copies a managed-backed region needs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cudaTypedefs.h>

#include "backend_cuda.h"
#include "gpu.h"
#include "gpu_kernels.h"
#include "gpu_mapping.h"
#include "stats.h"

__thread int gpu_hook_depth __attribute__((tls_model("initial-exec")));

#define MAX_PARAMS 1024
#define MAX_TRANSLATIONS 32

/* --- kernel parameter layouts, asked once per function --- */

/* A function's parameters never change, so a layout is asked once and kept
 * for the life of the process: an open-addressing table on (func, kind)
 * that grows and never evicts (a framework launches thousands of kernels,
 * over and over). */
struct param_layout {
	const void *func;
	int kind;
	unsigned n;
	bool known;       /* false: the driver could not say */
	uint32_t *offset; /* n entries */
	uint32_t *size;
};

static struct param_layout *layouts;
static size_t layouts_cap, layouts_count;
static pthread_mutex_t layouts_lock = PTHREAD_MUTEX_INITIALIZER;

/* 0 with the layout, -ENOTSUP when the driver cannot say for this kind of
 * function (cached: it will not say later either), or another error when
 * a query failed (not cached: asked again at the next launch). */
static int query_layout(struct param_layout *l)
{
	uint32_t off[MAX_PARAMS], size[MAX_PARAMS];
	unsigned n = 0;
	for (; n < MAX_PARAMS; n++) {
		size_t o, s;
		int rc = cuda_func_param(l->func, (enum gpu_func_kind)l->kind, n, &o, &s);
		if (rc == -ENOTSUP && n == 0)
			return 0; /* unknown: every region is acquired, nothing translated */
		if (rc == -ENOENT)
			break; /* past the last parameter */
		if (rc) {
			static int once;
			gaia_log_once(&once, GAIA_LOG_WARN,
				      "asking the driver for parameter %u of kernel %p failed: %s; "
				      "that launch acquires every region and translates no "
				      "argument, and the next one asks again", n, l->func,
				      strerror(-rc));
			return rc;
		}
		off[n] = (uint32_t)o;
		size[n] = (uint32_t)s;
	}
	l->offset = malloc(n * sizeof(uint32_t) + 1);
	l->size = malloc(n * sizeof(uint32_t) + 1);
	if (!l->offset || !l->size) {
		free(l->offset);
		free(l->size);
		l->offset = l->size = NULL;
		return -ENOMEM;
	}
	memcpy(l->offset, off, n * sizeof(uint32_t));
	memcpy(l->size, size, n * sizeof(uint32_t));
	l->n = n;
	l->known = true;
	return 0;
}

static size_t layout_hash(const void *func, int kind, size_t cap)
{
	uint64_t h = ((uintptr_t)func ^ (uint64_t)kind << 60) * 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 32) & (cap - 1);
}

static struct param_layout *layout_slot(struct param_layout *t, size_t cap, const void *func,
					int kind)
{
	size_t i = layout_hash(func, kind, cap);
	while (t[i].func && (t[i].func != func || t[i].kind != kind))
		i = (i + 1) & (cap - 1);
	return &t[i];
}

/* Keeps the table at most half full. */
static bool layouts_room(void)
{
	if ((layouts_count + 1) * 2 <= layouts_cap)
		return true;
	size_t cap = layouts_cap ? layouts_cap * 2 : 256;
	struct param_layout *t = calloc(cap, sizeof(*t));
	if (!t)
		return false;
	for (size_t i = 0; i < layouts_cap; i++)
		if (layouts[i].func)
			*layout_slot(t, cap, layouts[i].func, layouts[i].kind) = layouts[i];
	free(layouts);
	layouts = t;
	layouts_cap = cap;
	return true;
}

/* The layout of func (a copy; its arrays live as long as the process). */
static bool layout_of(const void *func, int kind, struct param_layout *out)
{
	pthread_mutex_lock(&layouts_lock);
	struct param_layout *l = layouts_cap ? layout_slot(layouts, layouts_cap, func, kind) : NULL;
	if (l && l->func) {
		*out = *l;
	} else {
		*out = (struct param_layout){.func = func, .kind = kind};
		if (query_layout(out) == 0 && layouts_room()) {
			*layout_slot(layouts, layouts_cap, func, kind) = *out;
			layouts_count++;
		} else if (!out->known) {
			*out = (struct param_layout){.func = func, .kind = kind};
		}
	}
	pthread_mutex_unlock(&layouts_lock);
	return out->known;
}

/* --- the packed `extra` form --- */

struct packed {
	void *buffer;
	size_t *size_slot;
	size_t size;
};

static bool parse_extra(void **extra, struct packed *p)
{
	memset(p, 0, sizeof(*p));
	for (size_t i = 0; extra && extra[i] != CU_LAUNCH_PARAM_END && i < 16; i += 2) {
		if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
			p->buffer = extra[i + 1];
		else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
			p->size_slot = extra[i + 1];
			p->size = p->size_slot ? *p->size_slot : 0;
		}
	}
	return p->buffer && p->size;
}

static uint64_t translate(uint64_t v, const struct gpu_translation *tr, int ntr, bool *changed)
{
	for (int i = 0; i < ntr; i++) {
		if (v >= tr[i].start && v < tr[i].end) {
			*changed = true;
			return tr[i].dptr + (v - tr[i].start);
		}
	}
	return v;
}

/* Every 8-byte-aligned word of a parameter is looked at (DESIGN §3.2: a
 * pointer may sit anywhere in a struct passed by value; the parameter's
 * offset in the argument buffer carries its alignment). A word that
 * falls in a managed-backed region is rewritten. */
static bool translate_words(unsigned char *bytes, size_t param_offset, size_t size,
			    const struct gpu_translation *tr, int ntr)
{
	bool any = false;
	for (size_t k = (8 - param_offset % 8) % 8; k + 8 <= size; k += 8) {
		uint64_t v;
		memcpy(&v, bytes + k, 8);
		bool changed = false;
		v = translate(v, tr, ntr, &changed);
		if (changed) {
			memcpy(bytes + k, &v, 8);
			any = true;
		}
	}
	return any;
}

/* kernelParams: a new array whose translated entries point at copies. */
static void translate_params(struct gpu_launch *L, const struct param_layout *l,
			     const struct gpu_translation *tr, int ntr)
{
	size_t bytes = 0;
	for (unsigned i = 0; i < l->n; i++)
		bytes += ((size_t)l->size[i] + 7) & ~(size_t)7;
	void **params = malloc(l->n * sizeof(void *) + bytes + 1);
	if (!params)
		return;
	unsigned char *copy = (unsigned char *)(params + l->n);
	bool any = false;
	for (unsigned i = 0; i < l->n; i++) {
		params[i] = L->params[i];
		if (!L->params[i])
			continue;
		memcpy(copy, L->params[i], l->size[i]);
		if (translate_words(copy, l->offset[i], l->size[i], tr, ntr)) {
			params[i] = copy;
			any = true;
		}
		copy += ((size_t)l->size[i] + 7) & ~(size_t)7;
	}
	if (!any) {
		free(params);
		return;
	}
	L->scratch = params;
	L->fwd_params = params;
}

/* extra: a copy of the packed buffer with pointers translated. */
static void translate_extra(struct gpu_launch *L, const struct param_layout *l,
			    const struct packed *p, const struct gpu_translation *tr, int ntr)
{
	struct scratch {
		void *extra[5];
		size_t size;
		unsigned char buffer[];
	} *s = malloc(sizeof(*s) + p->size);
	if (!s)
		return;
	memcpy(s->buffer, p->buffer, p->size);
	bool any = false;
	for (unsigned i = 0; i < l->n; i++) {
		if (l->offset[i] >= p->size)
			continue;
		size_t size = l->offset[i] + l->size[i] <= p->size ? l->size[i] : p->size - l->offset[i];
		any |= translate_words(s->buffer + l->offset[i], l->offset[i], size, tr, ntr);
	}
	if (!any) {
		free(s);
		return;
	}
	s->size = p->size;
	s->extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
	s->extra[1] = s->buffer;
	s->extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
	s->extra[3] = &s->size;
	s->extra[4] = CU_LAUNCH_PARAM_END;
	L->scratch = s;
	L->fwd_extra = s->extra;
}

/* A launch holds this from its acquire until the real launch has queued
 * the kernel, and a sync's release holds it too. Otherwise, in another
 * thread, between a launch's acquire and its kernel being queued:
 *  - a sync's device-wide wait would not wait for that kernel, and its
 *    release would close the device's epoch: the kernel's writes would
 *    belong to no sync and never reach the CPU;
 *  - another launch's acquire could read device pages (a rebase), then
 *    write them back over what that kernel wrote meanwhile.
 * Acquires take the mapping lock anyway, and queueing a kernel is quick.
 * (A forked child cannot use its parent's CUDA context, so it never meets
 * a window held at the fork.) */
static pthread_mutex_t launch_window = PTHREAD_MUTEX_INITIALIZER;

void gpu_launch_prepare(struct gpu_launch *L)
{
	L->fwd_params = L->params;
	L->fwd_extra = L->extra;
	L->scratch = NULL;
	L->device = -1;
	L->error = CUDA_SUCCESS;
	L->in_window = false;
	L->in_flight = false;
	if (!mapping_any())
		return;
	gpu_mappings_drain_wait();
	gaia_in_shim++;
	cuda_upload_staging_prepare(); /* before any lock of the shim's */
	if (gaia_config()->backing == GAIA_BACKING_PAGED)
		gpu_faults_want(); /* every replica will page on demand */
	gpu_faults_prepare();              /* CUPTI too: its start-up may call the driver */
	pthread_mutex_lock(&launch_window);
	L->in_window = true;
	L->device = cuda_current_device();
	if (L->device < 0 && L->kind == GPU_FUNC_RUNTIME) {
		/* The runtime creates its context lazily, inside this very
		 * launch: have it do so now (cudaFree(NULL) does only that). */
		gaia_rt_free_fn runtime_free = (gaia_rt_free_fn)cuda_runtime_real_for(L->func, "cudaFree");
		if (runtime_free && runtime_free(NULL) == cudaSuccess)
			L->device = cuda_current_device();
	}
	struct param_layout layout = {0};
	struct packed packed;
	bool have_extra = !L->params && parse_extra(L->extra, &packed);
	/* Every 8-byte-aligned word of every argument, when the layout is
	 * known (a kernel with none has a known, empty layout): a launch
	 * whose arguments point into a region that can get no replica is
	 * refused, and (managed backing) those words are translated. */
	bool known = L->kind != GPU_FUNC_NONE && layout_of(L->func, L->kind, &layout);
	size_t cap = 0;
	for (unsigned i = 0; known && i < layout.n; i++)
		cap += layout.size[i] / 8 + 1;
	uint64_t *values = cap ? malloc(cap * sizeof(uint64_t)) : NULL;
	size_t nvalues = 0;
	for (unsigned i = 0; values && i < layout.n; i++) {
		const unsigned char *arg = NULL;
		size_t size = layout.size[i];
		if (L->params)
			arg = L->params[i];
		else if (have_extra && layout.offset[i] < packed.size) {
			arg = (const unsigned char *)packed.buffer + layout.offset[i];
			if (layout.offset[i] + size > packed.size)
				size = packed.size - layout.offset[i];
		}
		for (size_t k = (8 - layout.offset[i] % 8) % 8; arg && k + 8 <= size; k += 8)
			memcpy(&values[nvalues++], arg + k, 8);
	}
	/* The rule (README, "Which regions a kernel reaches"): every managed
	 * region is current on the device at each launch there. A kernel may
	 * reach a region through a pointer stored in device memory, in the
	 * file itself, or kept from an earlier launch, none of which the
	 * arguments show; the cost of a region the CPU did not change since
	 * the device's last acquire is one write-protect scan. */
	bool all = true;
	struct gpu_translation tr[MAX_TRANSLATIONS];
	int ntr = gpu_mappings_launch(L->device, values, nvalues, all, tr, MAX_TRANSLATIONS, &L->in_flight);
	if (ntr < 0) {
		L->error = cuda_result_of(ntr);
		ntr = 0;
	}
	/* The base copies are queued on the shim's own stream: the kernel
	 * must come after them. */
	if (L->device >= 0 && cuda_shim_settle() && L->error == CUDA_SUCCESS)
		L->error = CUDA_ERROR_UNKNOWN;
	gaia_debug("launch on device %d: %zu argument words, %d regions translated", L->device,
		   nvalues, ntr);
	if (ntr > 0 && known) {
		if (L->params)
			translate_params(L, &layout, tr, ntr);
		else if (have_extra)
			translate_extra(L, &layout, &packed, tr, ntr);
	}
	free(values);
	gaia_in_shim--;
}

/* --- which streams may still run kernels that wrote regions --- */

/* Per device, the streams that got a launch since its last release (under
 * launch_window). A per-thread default stream is the launching thread's:
 * another thread cannot ask about it. `unknown`: a stream the shim can no
 * longer name (destroyed, per-thread of another thread, too many): the
 * next release waits for the whole device, as a context sync does. */
#define LAUNCH_STREAMS 32
struct launched_stream {
	CUstream stream;
	pid_t tid; /* for CU_STREAM_PER_THREAD */
};
static struct {
	struct launched_stream s[LAUNCH_STREAMS];
	unsigned n;
	bool unknown;
} launched[TSVT_MAX_DEVICES];

static void note_launched(int dev, CUstream s)
{
	if (dev < 0 || dev >= TSVT_MAX_DEVICES)
		return;
	pid_t tid = s == CU_STREAM_PER_THREAD ? gettid() : 0;
	for (unsigned i = 0; i < launched[dev].n; i++)
		if (launched[dev].s[i].stream == s && launched[dev].s[i].tid == tid)
			return;
	if (launched[dev].n == LAUNCH_STREAMS)
		launched[dev].unknown = true;
	else
		launched[dev].s[launched[dev].n++] = (struct launched_stream){s, tid};
}

void gpu_stream_destroyed(CUstream s)
{
	pthread_mutex_lock(&launch_window);
	for (int d = 0; d < TSVT_MAX_DEVICES; d++) {
		for (unsigned i = 0; i < launched[d].n; i++) {
			if (launched[d].s[i].stream != s)
				continue;
			/* Its kernels may still run, and can no longer be asked
			 * about: the next release waits for the device. */
			launched[d].s[i] = launched[d].s[--launched[d].n];
			launched[d].unknown = true;
			break;
		}
	}
	pthread_mutex_unlock(&launch_window);
}

/* Before a full release on dev: waits until every kernel launched there
 * since the last release has finished, and for nothing else: the streams
 * that launched them, each synchronized. A stream the shim cannot ask
 * about waits for the whole device. */
static void wait_launched_work(int dev)
{
	if (launched[dev].unknown) {
		cuda_synchronize();
		return;
	}
	PFN_cuStreamSynchronize_v2000 sync = cuda_calls()->stream_synchronize;
	pid_t self = gettid();
	for (unsigned i = 0; i < launched[dev].n; i++) {
		const struct launched_stream *l = &launched[dev].s[i];
		if (!sync || (l->stream == CU_STREAM_PER_THREAD && l->tid != self)) {
			cuda_synchronize();
			return;
		}
		/* An error is the program's to see at its own sync. */
		(void)sync(l->stream);
	}
}

/* After the program's sync returned: forgets the launched streams that
 * have finished their work (asked, not waited for) and tells whether any
 * may still run a kernel. One the shim cannot ask about (destroyed, too
 * many, another thread's per-thread stream) is waited for instead, with
 * the whole device, as before a full release. */
static bool kernels_still_running(int dev)
{
	PFN_cuStreamQuery_v2000 query = cuda_calls()->stream_query;
	pid_t self = gettid();
	bool ask = query && !launched[dev].unknown;
	for (unsigned i = 0; ask && i < launched[dev].n; i++)
		ask = launched[dev].s[i].stream != CU_STREAM_PER_THREAD || launched[dev].s[i].tid == self;
	if (!ask) {
		cuda_synchronize();
		launched[dev].n = 0;
		launched[dev].unknown = false;
		return false;
	}
	for (unsigned i = 0; i < launched[dev].n;) {
		CUresult q = query(launched[dev].s[i].stream);
		if (q == CUDA_SUCCESS) {
			launched[dev].s[i] = launched[dev].s[--launched[dev].n];
		} else if (q == CUDA_ERROR_NOT_READY) {
			i++;
		} else {
			/* No answer: wait for them all, as before a full release
			 * (an error of the program's own work is its to see at
			 * its own sync). */
			static int once;
			gaia_log_once(&once, GAIA_LOG_WARN,
				      "cuStreamQuery failed: %s (%d); a sync waits for every stream "
				      "that launched since the last one",
				      cuda_error_name(q), (int)q);
			return false;
		}
	}
	return launched[dev].n != 0;
}

void gpu_launch_done(struct gpu_launch *L, CUresult rc)
{
	if (L->in_window && rc == CUDA_SUCCESS)
		note_launched(L->device, L->stream);
	if (L->in_flight)
		gpu_mappings_launch_queued(L->device);
	L->in_flight = false;
	if (L->in_window)
		pthread_mutex_unlock(&launch_window);
	L->in_window = false;
	if (rc == CUDA_SUCCESS)
		stats_add(GAIA_STAT_kernel_launches, 1);
	free(L->scratch);
	L->scratch = NULL;
}

CUresult gpu_after_sync(enum gpu_sync_kind kind, CUresult rc)
{
	(void)kind; /* whatever was synced, the launched streams are asked */
	if (rc != CUDA_SUCCESS)
		return CUDA_SUCCESS;
	stats_add(GAIA_STAT_host_syncs, 1);
	if (!mapping_any())
		return CUDA_SUCCESS;
	gaia_in_shim++;
	/* The release waits for nothing the program's sync did not (README,
	 * "What a sync shows"): when kernels launched since the last release
	 * still run on other streams, it is a snapshot release, which leaves
	 * the epochs open for what they write next; when none does, a full
	 * one, which closes them. */
	pthread_mutex_lock(&launch_window);
	int dev = cuda_current_device();
	int failed = 0;
	bool full = false;
	if (dev >= 0 && dev < TSVT_MAX_DEVICES) {
		bool running = kernels_still_running(dev);
		failed = running ? gpu_mappings_sync(dev, true) : -EAGAIN;
		if (running && failed != -EAGAIN)
			stats_add(GAIA_STAT_snapshot_releases, 1);
		if (failed == -EAGAIN) {
			/* No snapshot (none needed, or a region cannot have one
			 * while another device has an open epoch on it). */
			wait_launched_work(dev);
			failed = gpu_mappings_sync(dev, false);
			launched[dev].n = 0;
			launched[dev].unknown = false;
			full = true;
		}
	}
	pthread_mutex_unlock(&launch_window);
	/* The device idle: nothing more to prefetch ahead of its kernels,
	 * what they faulted on is learned, and replicas paged on demand that
	 * fit whole again go. */
	if (full)
		gpu_front_pause(dev);
	if (full && !failed) {
		gpu_mappings_learn();
		(void)gpu_mappings_promote(dev);
	}
	gaia_in_shim--;
	return cuda_result_of(failed);
}

int gpu_device_acquire(int dev, const void *addr, size_t len)
{
	if (dev < 0 || dev >= TSVT_MAX_DEVICES || cuda_current_device() != dev)
		return -ENODEV;
	gaia_in_shim++;
	gpu_mappings_drain_wait();
	cuda_upload_staging_prepare();
	pthread_mutex_lock(&launch_window);
	int rc = gpu_mappings_acquire_range(dev, addr, len);
	pthread_mutex_unlock(&launch_window);
	gaia_in_shim--;
	return rc < 0 ? rc : 0;
}

int gpu_device_release(int dev)
{
	if (dev < 0 || dev >= TSVT_MAX_DEVICES || cuda_current_device() != dev)
		return -ENODEV;
	gaia_in_shim++;
	pthread_mutex_lock(&launch_window);
	wait_launched_work(dev);
	int rc = gpu_mappings_sync(dev, false);
	launched[dev].n = 0;
	launched[dev].unknown = false;
	pthread_mutex_unlock(&launch_window);
	gaia_in_shim--;
	return rc;
}

void gpu_before_driver_init(void)
{
	gpu_kernels_register();
}
