/* Every launch and host sync of a runtime-API program reaches the shim,
 * exactly once (DESIGN §3.5).
 *
 *   cuda_runtime_hooks static   the runtime as nvcc links it (static
 *                               cudart): its cuda* calls are invisible, the
 *                               driver is reached through dlopen + dlsym +
 *                               cuGetProcAddress, which the shim wraps.
 *                               libcudart.so.13 is opened RTLD_LOCAL and
 *                               called through its own handle, so no
 *                               runtime-API hook can see the calls.
 *   cuda_runtime_hooks shared   a program linked with a shared libcudart:
 *                               its cuda* calls bind to the shim's runtime
 *                               hooks first, and the driver wrappers they
 *                               reach inside must not count them again.
 *   cuda_runtime_hooks local    a library linked with libcudart, dlopened
 *                               by the program: its calls bind to the
 *                               shim's hooks, but libcudart sits in a local
 *                               scope that the shim's RTLD_NEXT cannot see.
 *
 * Launches on the legacy default stream, two streams, the per-thread
 * default stream (the _ptsz entry and cudaStreamPerThread), from two
 * threads; syncs of every kind; copies that are syncs and copies that are
 * not (device to device, async to pinned memory, async from pageable
 * memory). The shim's kernel_launches must equal the simulator's
 * kernels_launched, and its host_syncs the syncs the program made. */
#include "itest_cuda.h"

#include <pthread.h>

#include <cuda_runtime_api.h>

#define PROG "cuda_runtime_hooks"
#define ROUNDS 3
#define PER_STREAM 4
#define GRID 2
#define BLOCK 4

typedef cudaError_t (*launch_fn)(const void *, dim3, dim3, void **, size_t, cudaStream_t);
typedef cudaError_t (*stream_fn)(cudaStream_t);

static struct {
	launch_fn launch, launch_ptsz;
	cudaError_t (*device_sync)(void);
	stream_fn stream_sync, stream_sync_ptsz, stream_query, stream_query_ptsz;
	cudaError_t (*event_sync)(cudaEvent_t);
	cudaError_t (*event_query)(cudaEvent_t);
	cudaError_t (*event_create)(cudaEvent_t *);
	cudaError_t (*event_record)(cudaEvent_t, cudaStream_t);
	cudaError_t (*stream_create)(cudaStream_t *);
	cudaError_t (*memcpy)(void *, const void *, size_t, enum cudaMemcpyKind);
	cudaError_t (*memcpy_ptds)(void *, const void *, size_t, enum cudaMemcpyKind);
	cudaError_t (*memcpy_async)(void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t);
	cudaError_t (*malloc)(void **, size_t);
	cudaError_t (*malloc_host)(void **, size_t);
	cudaError_t (*memset)(void *, int, size_t);
	cudaError_t (*set_device)(int);
	cudaError_t (*event_destroy)(cudaEvent_t);
	cudaError_t (*stream_destroy)(cudaStream_t);
	cudaError_t (*free)(void *);
	cudaError_t (*free_host)(void *);
} rt;

static unsigned long launches, syncs;
static int *d_counter;

#define CHECK(call)                                                                                \
	do {                                                                                       \
		cudaError_t e_ = (call);                                                           \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, PROG ": FAIL: %s = %d (line %d)\n", #call, (int)e_, __LINE__); \
			exit(ITEST_FAIL);                                                          \
		}                                                                                  \
	} while (0)

/* One sync the program counts: it succeeded. */
#define SYNC(call)                                                                                 \
	do {                                                                                       \
		CHECK(call);                                                                       \
		__atomic_fetch_add(&syncs, 1, __ATOMIC_RELAXED);                                   \
	} while (0)

/* A query counts as a sync only when it reported completion. */
#define QUERY(call)                                                                                \
	do {                                                                                       \
		cudaError_t e_ = (call);                                                           \
		if (e_ == cudaSuccess)                                                             \
			__atomic_fetch_add(&syncs, 1, __ATOMIC_RELAXED);                           \
		else if (e_ != cudaErrorNotReady) {                                                \
			fprintf(stderr, PROG ": FAIL: %s = %d\n", #call, (int)e_);                 \
			exit(ITEST_FAIL);                                                          \
		}                                                                                  \
	} while (0)

static void launch_on(launch_fn fn, cudaStream_t stream)
{
	int delta = 1;
	void *args[] = {&d_counter, &delta};
	dim3 grid = {GRID, 1, 1}, block = {BLOCK, 1, 1};

	CHECK(fn(ITEST_COUNT_FUNC, grid, block, args, 0, stream));
	__atomic_fetch_add(&launches, 1, __ATOMIC_RELAXED);
}

/* The second thread: its own per-thread default stream. */
static void *second_thread(void *arg)
{
	(void)arg;
	CHECK(rt.set_device(0));
	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < PER_STREAM; i++)
			launch_on(rt.launch_ptsz, 0);
		SYNC(rt.stream_sync_ptsz(0));
	}
	return NULL;
}

static bool in_libcudart(void *fn)
{
	Dl_info info;

	return dladdr(fn, &info) && info.dli_fname && strstr(info.dli_fname, "libcudart.so");
}

/* static: libcudart's own functions; shared: whatever the global scope
 * binds first; local: the same, else libcudart's own. */
enum mode { MODE_STATIC, MODE_SHARED, MODE_LOCAL };

static void *lookup(enum mode mode, void *libcudart, const char *name)
{
	void *p = mode == MODE_STATIC ? NULL : dlsym(RTLD_DEFAULT, name);

	return p || mode == MODE_SHARED ? p : dlsym(libcudart, name);
}

#define RESOLVE(field, name)                                                                       \
	do {                                                                                       \
		*(void **)&rt.field = lookup(mode, libcudart, name);                               \
		if (!rt.field) {                                                                   \
			fprintf(stderr, PROG ": FAIL: no %s in libcudart.so.13\n", name);          \
			return ITEST_FAIL;                                                         \
		}                                                                                  \
	} while (0)

static int child(enum mode mode, const char *report)
{
	int (*register_kernel)(const struct simgpu_kernel_desc *);
	int (*stats_get)(int, struct simgpu_stats *);
	struct simgpu_stats st;
	cudaStream_t s1, s2;
	cudaEvent_t ev;
	void *libcuda, *libcudart;
	int *d_scratch, *d_scratch2, host[64], *pinned, total = 0;
	pthread_t thread;

	/* The kernel is registered before the runtime starts the device (a
	 * static constructor does it in a g++-built program); libcuda stays in
	 * a local scope, as static cudart leaves it. */
	libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!libcuda) {
		printf(PROG ": SKIP: no simulated driver (%s)\n", dlerror());
		return ITEST_SKIP;
	}
	*(void **)&register_kernel = dlsym(libcuda, "simgpu_register_kernel");
	*(void **)&stats_get = dlsym(libcuda, "simgpu_stats_get");
	if (!register_kernel || !stats_get || register_kernel(&itest_count_desc)) {
		printf(PROG ": SKIP: libcuda.so.1 is not the simulated GPU\n");
		return ITEST_SKIP;
	}
	libcudart = dlopen("libcudart.so.13", RTLD_NOW | (mode == MODE_SHARED ? RTLD_GLOBAL : RTLD_LOCAL));
	if (!libcudart) {
		printf(PROG ": SKIP: no libcudart.so.13 (%s)\n", dlerror());
		return ITEST_SKIP;
	}
	RESOLVE(launch, "cudaLaunchKernel");
	RESOLVE(launch_ptsz, "cudaLaunchKernel_ptsz");
	RESOLVE(device_sync, "cudaDeviceSynchronize");
	RESOLVE(stream_sync, "cudaStreamSynchronize");
	RESOLVE(stream_sync_ptsz, "cudaStreamSynchronize_ptsz");
	RESOLVE(stream_query, "cudaStreamQuery");
	RESOLVE(stream_query_ptsz, "cudaStreamQuery_ptsz");
	RESOLVE(event_sync, "cudaEventSynchronize");
	RESOLVE(event_query, "cudaEventQuery");
	RESOLVE(event_create, "cudaEventCreate");
	RESOLVE(event_record, "cudaEventRecord");
	RESOLVE(stream_create, "cudaStreamCreate");
	RESOLVE(memcpy, "cudaMemcpy");
	RESOLVE(memcpy_ptds, "cudaMemcpy_ptds");
	RESOLVE(memcpy_async, "cudaMemcpyAsync");
	RESOLVE(malloc, "cudaMalloc");
	RESOLVE(malloc_host, "cudaMallocHost");
	RESOLVE(memset, "cudaMemset");
	RESOLVE(set_device, "cudaSetDevice");
	RESOLVE(event_destroy, "cudaEventDestroy");
	RESOLVE(stream_destroy, "cudaStreamDestroy");
	RESOLVE(free, "cudaFree");
	RESOLVE(free_host, "cudaFreeHost");
	/* The point of the two modes: who answers the program's calls. */
	if (in_libcudart((void *)rt.launch) != (mode == MODE_STATIC)) {
		fprintf(stderr, PROG ": FAIL: cudaLaunchKernel should be %s\n",
			mode == MODE_STATIC ? "libcudart's own" : "the shim's hook");
		return ITEST_FAIL;
	}

	CHECK(rt.set_device(0));
	CHECK(rt.malloc((void **)&d_counter, sizeof(int)));
	CHECK(rt.malloc((void **)&d_scratch, sizeof(host)));
	CHECK(rt.malloc((void **)&d_scratch2, sizeof(host)));
	CHECK(rt.memset(d_counter, 0, sizeof(int)));
	SYNC(rt.device_sync()); /* the memset is done before any stream starts */
	CHECK(rt.malloc_host((void **)&pinned, sizeof(host)));
	CHECK(rt.stream_create(&s1));
	CHECK(rt.stream_create(&s2));
	CHECK(rt.event_create(&ev));
	memset(host, 0, sizeof(host));
	if (pthread_create(&thread, NULL, second_thread, NULL)) {
		perror("pthread_create");
		return ITEST_FAIL;
	}
	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < PER_STREAM; i++) {
			launch_on(rt.launch, 0);
			launch_on(rt.launch, s1);
			launch_on(rt.launch, s2);
			launch_on(rt.launch_ptsz, 0);
			launch_on(rt.launch, cudaStreamPerThread);
		}
		SYNC(rt.stream_sync(s1));
		SYNC(rt.stream_sync_ptsz(0));
		CHECK(rt.event_record(ev, s2));
		SYNC(rt.event_sync(ev));
		QUERY(rt.stream_query(s2));
		QUERY(rt.stream_query_ptsz(0));
		QUERY(rt.event_query(ev));
		SYNC(rt.device_sync());
		/* copies: synchronous ones are syncs, except device to device */
		SYNC(rt.memcpy(&total, d_counter, sizeof(int), cudaMemcpyDeviceToHost));
		SYNC(rt.memcpy_ptds(d_scratch, host, sizeof(host), cudaMemcpyHostToDevice));
		SYNC(rt.memcpy(host, d_scratch, sizeof(host), cudaMemcpyDefault));
		CHECK(rt.memcpy(d_scratch2, d_scratch, sizeof(host), cudaMemcpyDeviceToDevice));
		CHECK(rt.memcpy(d_scratch2, d_scratch, sizeof(host), cudaMemcpyDefault));
		/* async: only device to pageable host memory waits */
		SYNC(rt.memcpy_async(host, d_scratch, sizeof(host), cudaMemcpyDeviceToHost, s1));
		CHECK(rt.memcpy_async(pinned, d_scratch, sizeof(host), cudaMemcpyDeviceToHost, s1));
		CHECK(rt.memcpy_async(d_scratch2, host, sizeof(host), cudaMemcpyHostToDevice, s1));
		SYNC(rt.stream_sync(s1));
	}
	pthread_join(thread, NULL);
	SYNC(rt.device_sync());
	SYNC(rt.memcpy(&total, d_counter, sizeof(int), cudaMemcpyDeviceToHost));
	if ((unsigned long)total != launches * GRID * BLOCK) {
		fprintf(stderr, PROG ": FAIL: the kernels counted %d, expected %lu\n", total, launches * GRID * BLOCK);
		return ITEST_FAIL;
	}
	CHECK(rt.event_destroy(ev));
	CHECK(rt.stream_destroy(s1));
	CHECK(rt.stream_destroy(s2));
	CHECK(rt.free_host(pinned));
	CHECK(rt.free(d_counter));
	CHECK(rt.free(d_scratch));
	CHECK(rt.free(d_scratch2));
	if (stats_get(0, &st)) {
		fprintf(stderr, PROG ": FAIL: simgpu_stats_get\n");
		return ITEST_FAIL;
	}
	struct itest_cuda_report rep = {.launches = launches, .syncs = syncs, .simgpu_launched = st.kernels_launched};
	if (itest_cuda_write_report(report, &rep)) {
		perror(report);
		return ITEST_FAIL;
	}
	return ITEST_PASS;
}

int main(int argc, char **argv)
{
	static const char *const modes[] = {[MODE_STATIC] = "static", [MODE_SHARED] = "shared", [MODE_LOCAL] = "local"};
	const char *report = itest_cuda_child_report();

	for (int m = 0; argc == 2 && m < 3; m++)
		if (strcmp(argv[1], modes[m]) == 0)
			return report ? child((enum mode)m, report) : itest_cuda_supervise(PROG, argv);
	fprintf(stderr, "usage: %s static|shared|local\n", argv[0]);
	return ITEST_FAIL;
}
