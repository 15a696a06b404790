/* munmap_while_launching — what a program expects: unmapping a file that
 * kernels used holds up the unmapping thread for as long as those kernels
 * run, and no other thread's unrelated work.
 *
 * Files A0..A3 are mapped and a kernel adds 1 to each word of each
 * (they get device copies). A launcher thread then keeps the device busy
 * with kernels of about 1 s on file C's mapping, on two streams in turn:
 * it launches one while the one before still runs, then waits for that
 * one with cudaStreamSynchronize. The main thread unmaps A0..A3 in turn,
 * each of which must wait for the kernels (any of them may use it).
 * Meanwhile a third thread maps and unmaps file D, which no kernel uses,
 * again and again, keeping the worst single mmap() (preempted ones apart,
 * as in write_latency): it must stay under 100 ms (ISOLATION_MAX_WRITE_MS
 * overrides), against the 1 s kernels (an mmap of a managed file takes the
 * shim's mapping lock, which the shim's own transfers hold for a few
 * milliseconds here; no wait for a device may hold it). A call during
 * which the thread was also preempted is held to ISOLATION_MAX_PREEMPTED_MS
 * when that is set (500 ms outside sanitizer builds): a call that waited
 * for the lock is often preempted once it has it. The launcher's
 * kernels must see C, and the A files must hold the kernel's words after
 * the munmaps.
 */
#include <pthread.h>

#include "isolation.h"
#include "slow_sum.h"

#define NA 4 /* the A files */
#define A_BYTES (1u << 20)
#define C_BYTES (1u << 20)
#define D_BYTES (16u << 10)
#define KERNEL_NS 1000000000ll /* clock64() counts nanoseconds on the simulator */


/* a[i] += 1 for each of n words. */
__global__ void add_one(unsigned *a, unsigned n)
{
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		a[i] += 1;
}
SIMGPU_KERNEL(add_one);

static unsigned *c_map, *out;
static int stop;                        /* atomic: the launcher and the mapper end */
static unsigned long launched, wrong;   /* the launcher's kernels, and those that saw wrong sums */

/* Two streams in turn: each kernel is launched while the one before it
 * still runs, and then that one is waited for. */
static void *launcher(void *arg)
{
	(void)arg;
	cudaStream_t s[2];
	for (int i = 0; i < 2; i++)
		CUDA_OK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
	unsigned got[2];
	for (unsigned long n = 0;; n++) {
		bool last = __atomic_load_n(&stop, __ATOMIC_ACQUIRE);
		if (!last) {
			SIMGPU_LAUNCH(slow_sum, 1, 32, 0, s[n % 2])(c_map, out + n % 2, KERNEL_NS);
			CUDA_OK(cudaGetLastError());
		}
		if (n > 0) {
			CUDA_OK(cudaStreamSynchronize(s[(n - 1) % 2]));
			CUDA_OK(cudaMemcpy(&got[(n - 1) % 2], out + (n - 1) % 2, sizeof(unsigned),
					   cudaMemcpyDeviceToHost));
			if (got[(n - 1) % 2] != 5 + 6)
				wrong++;
			__atomic_add_fetch(&launched, 1, __ATOMIC_RELEASE);
		}
		if (last)
			break;
	}
	for (int i = 0; i < 2; i++)
		CUDA_OK(cudaStreamDestroy(s[i]));
	return NULL;
}

static int d_fd;
static struct latency map_lat;

static void *mapper(void *arg)
{
	(void)arg;
	for (unsigned long n = 0; !__atomic_load_n(&stop, __ATOMIC_ACQUIRE); n++) {
		latency_begin(&map_lat);
		unsigned char *d = (unsigned char *)mmap(NULL, D_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, d_fd, 0);
		latency_end(&map_lat);
		CHECK(d != MAP_FAILED, "mmap of file D: %s", strerror(errno));
		d[n % D_BYTES] = (unsigned char)n;
		CHECK(munmap(d, D_BYTES) == 0, "munmap of file D: %s", strerror(errno));
		usleep(200);
	}
	return NULL;
}

int main(void)
{
	watchdog(120);
	double max_ms = max_write_ms(100);
	CUDA_OK(cudaSetDevice(0));

	int a_fd[NA];
	unsigned *a[NA];
	for (int i = 0; i < NA; i++) {
		a_fd[i] = make_file(A_BYTES, NULL);
		a[i] = (unsigned *)map_file(a_fd[i], A_BYTES);
	}
	int c_fd = make_file(C_BYTES, NULL);
	c_map = (unsigned *)map_file(c_fd, C_BYTES);
	c_map[0] = 5;
	c_map[1] = 6;
	d_fd = make_file(D_BYTES, NULL);
	CUDA_OK(cudaMalloc((void **)&out, 2 * sizeof(unsigned)));

	step = "a kernel on each A file (their device copies)";
	for (int i = 0; i < NA; i++)
		SIMGPU_LAUNCH(add_one, 4, 128, 0, 0)(a[i], A_BYTES / 4);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());

	step = "the launcher and the mapper";
	pthread_t tl, tm;
	CHECK(pthread_create(&tl, NULL, launcher, NULL) == 0, "pthread_create");
	CHECK(pthread_create(&tm, NULL, mapper, NULL) == 0, "pthread_create");
	usleep(300 * 1000);

	step = "munmap of the A files while the launcher keeps the device busy";
	double t0 = now_s();
	for (int i = 0; i < NA; i++)
		CHECK(munmap(a[i], A_BYTES) == 0, "munmap of A%d: %s", i, strerror(errno));
	double unmap_s = now_s() - t0;
	usleep(300 * 1000);
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	pthread_join(tl, NULL);
	pthread_join(tm, NULL);

	step = "results";
	for (int f = 0; f < NA; f++)
		for (size_t i = 0; i < A_BYTES / 4; i += 4093) {
			unsigned v;
			pread_all(a_fd[f], &v, sizeof(v), (off_t)(i * 4));
			CHECK(v == 1, "word %zu of A%d's file is %u after the kernel and the munmap, not 1", i, f, v);
		}
	printf("%d munmaps took %.2f s while %lu kernels of %.1f s ran; %lu mmap()s of D, worst %.3f ms; "
	       "%lu preempted, worst of those %.3f ms; bound %.1f ms\n",
	       NA, unmap_s, launched, KERNEL_NS / 1e9, map_lat.calls, map_lat.worst_s * 1e3, map_lat.preempted,
	       map_lat.worst_preempted_s * 1e3, max_ms);
	fflush(stdout);
	CHECK(wrong == 0, "%lu of the launcher's kernels did not see C's 5 + 6", wrong);
	CHECK(launched >= 2, "only %lu kernels ran", launched);
	CHECK(map_lat.calls > 100, "only %lu mmap()s of D", map_lat.calls);
	const char *pe = getenv("ISOLATION_MAX_PREEMPTED_MS");
	CHECK(!pe || !*pe || map_lat.worst_preempted_s * 1e3 <= atof(pe),
	      "an mmap() of a file no kernel uses took %.3f ms (preempted meanwhile) while another thread "
	      "unmapped files kernels used (bound %s ms)", map_lat.worst_preempted_s * 1e3, pe);
	CHECK(map_lat.worst_s * 1e3 <= max_ms,
	      "an mmap() of a file no kernel uses took %.3f ms while another thread unmapped files kernels "
	      "used (bound %.1f ms)", map_lat.worst_s * 1e3, max_ms);
	munmap(c_map, C_BYTES);
	for (int i = 0; i < NA; i++)
		close(a_fd[i]);
	close(c_fd);
	close(d_fd);
	printf("ok munmap_while_launching\n");
	return 0;
}
