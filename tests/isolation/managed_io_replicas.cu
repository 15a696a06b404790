/* managed_io_replicas — what a program expects: a thread writing with
 * pwrite() into a mapped file is not held up for as long as a kernel runs
 * while another thread tears down a mapping that kernel may still use, or
 * maps a new file and launches a kernel on it.
 *
 * Every managed mapping is current on the device at each launch there, so
 * a kernel may write any of them: munmap() of one while a kernel runs must
 * wait for that kernel (its writes reach the file first), and so must
 * mprotect() giving write access to a read-only one (its device copy goes).
 * The thread that makes those calls waits; a thread that pwrite()s 4 KiB
 * pages into another mapped file B (mapped read-only) meanwhile must not. Its worst single
 * pwrite() (preempted ones apart, as in write_latency) must stay under
 * 100 ms (ISOLATION_MAX_WRITE_MS overrides), against the 2 s kernels.
 *
 *   1. A kernel of about 2 s writes C (1 MiB, read-write) at its end; the
 *      main thread munmap()s C meanwhile. munmap returns after the kernel,
 *      and C's file holds the kernel's write.
 *   2. A kernel of about 2 s reads E (mapped read-only); the main thread
 *      mprotect()s E read-write meanwhile, then stores into it: the next
 *      kernel sees the store.
 *   3. A kernel of about 2 s runs on one stream; the main thread maps a new
 *      file D, stores into it and launches a short kernel on D on another
 *      stream (D gets its device copy then): that kernel sees the stores.
 */
#include <pthread.h>
#include <sys/mman.h>

#include "isolation.h"

#define A_BYTES (1u << 20)
#define B_BYTES (1u << 20)
#define C_BYTES (1u << 20)
#define E_BYTES (1u << 20)
#define D_BYTES (1u << 20)
#define KERNEL_NS 2000000000ll /* clock64() counts nanoseconds on the simulator */
#define MARK 0xC0FFEEu

/* Block 0, thread 0 spins for `ns`; then out[0] = in[0] + in[1], and, when
 * c is not NULL, c[5] = MARK. */
__global__ void slow_sum_mark(const unsigned *in, unsigned *out, unsigned *c, long long ns)
{
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		long long t0 = clock64();
		while (clock64() - t0 < ns)
			;
		out[0] = in[0] + in[1];
		if (c)
			c[5] = MARK;
	}
}
SIMGPU_KERNEL(slow_sum_mark);

static struct page_writer writer;

int main(void)
{
	watchdog(90);
	double max_ms = max_write_ms(100);

	int a_fd = make_file(A_BYTES, NULL);
	unsigned *a = (unsigned *)map_file(a_fd, A_BYTES);
	int b_fd = make_file(B_BYTES, NULL);
	/* Read-only: under GAIA_RUNNING_KERNELS=shared the writer's changes
	 * then reach the device without waiting for its kernels, and step 3
	 * has nothing but D's first copy to wait for. */
	unsigned char *b_map = (unsigned char *)mmap(NULL, B_BYTES, PROT_READ, MAP_SHARED, b_fd, 0);
	CHECK(b_map != MAP_FAILED, "mmap of B read-only: %s", strerror(errno));
	int c_fd = make_file(C_BYTES, NULL);
	unsigned *c = (unsigned *)map_file(c_fd, C_BYTES);
	c[0] = 1;
	int e_fd = make_file(E_BYTES, NULL);
	unsigned *e = (unsigned *)mmap(NULL, E_BYTES, PROT_READ, MAP_SHARED, e_fd, 0);
	CHECK(e != MAP_FAILED, "mmap of E read-only: %s", strerror(errno));
	CUDA_OK(cudaSetDevice(0));
	unsigned *out;
	CUDA_OK(cudaMalloc((void **)&out, 6 * sizeof(unsigned)));
	a[0] = 3;
	a[1] = 4;
	/* Every mapping gets its device copy at a first, short launch. */
	SIMGPU_LAUNCH(slow_sum_mark, 1, 32, 0, 0)(a, out, (unsigned *)NULL, 0);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());

	pthread_t t;
	writer.fd = b_fd;
	writer.map = b_map;
	writer.bytes = B_BYTES;
	CHECK(pthread_create(&t, NULL, page_writer_run, &writer) == 0, "pthread_create");
	usleep(100000);

	step = "munmap of C while a kernel that writes it runs";
	double t0 = now_s();
	SIMGPU_LAUNCH(slow_sum_mark, 1, 32, 0, 0)(a, out + 1, c, KERNEL_NS);
	CUDA_OK(cudaGetLastError());
	CHECK(munmap(c, C_BYTES) == 0, "munmap of C: %s", strerror(errno));
	double munmap_s = now_s() - t0;
	unsigned mark = 0;
	pread_all(c_fd, &mark, sizeof(mark), 5 * sizeof(unsigned));
	CUDA_OK(cudaDeviceSynchronize());

	step = "mprotect of E to read-write while a kernel that reads it runs";
	double t1 = now_s();
	SIMGPU_LAUNCH(slow_sum_mark, 1, 32, 0, 0)(e, out + 2, (unsigned *)NULL, KERNEL_NS);
	CUDA_OK(cudaGetLastError());
	CHECK(mprotect(e, E_BYTES, PROT_READ | PROT_WRITE) == 0, "mprotect of E: %s", strerror(errno));
	double mprotect_s = now_s() - t1;
	e[0] = 20;
	e[1] = 22;
	SIMGPU_LAUNCH(slow_sum_mark, 1, 32, 0, 0)(e, out + 3, (unsigned *)NULL, 0);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());

	step = "a new mapping D and a launch on it while a kernel runs on another stream";
	cudaStream_t s1, s2;
	CUDA_OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
	CUDA_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	SIMGPU_LAUNCH(slow_sum_mark, 1, 32, 0, s1)(a, out + 5, (unsigned *)NULL, KERNEL_NS);
	CUDA_OK(cudaGetLastError());
	int d_fd = make_file(D_BYTES, NULL);
	unsigned *dm = (unsigned *)map_file(d_fd, D_BYTES);
	dm[0] = 5;
	dm[1] = 6;
	SIMGPU_LAUNCH(slow_sum_mark, 1, 32, 0, s2)(dm, out + 4, (unsigned *)NULL, 0);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	CUDA_OK(cudaStreamDestroy(s1));
	CUDA_OK(cudaStreamDestroy(s2));
	double kernels_s = now_s() - t0;
	unsigned got[6];
	CUDA_OK(cudaMemcpy(got, out, sizeof(got), cudaMemcpyDeviceToHost));
	usleep(100000);
	__atomic_store_n(&writer.stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);

	step = "results";
	unsigned long writes = writer.lat.calls, preempted = writer.lat.preempted;
	double worst_s = writer.lat.worst_s, worst_preempted_s = writer.lat.worst_preempted_s;
	printf("munmap took %.2f s, mprotect %.2f s, all %.2f s; %lu pwrite()s into mapped file B, "
	       "worst %.3f ms at %.2f s; %lu preempted, worst of those %.3f ms; bound %.1f ms\n",
	       munmap_s, mprotect_s, kernels_s, writes, worst_s * 1e3,
	       worst_s > 0 ? writer.lat.worst_at_s - t0 : 0.0, preempted, worst_preempted_s * 1e3, max_ms);
	fflush(stdout);
	CHECK(got[1] == 7, "the kernel running during munmap saw %u, not 3 + 4", got[1]);
	CHECK(mark == MARK, "C's file holds %#x after munmap, not the running kernel's write %#x", mark, MARK);
	CHECK(munmap_s >= 1.5, "munmap of C returned after %.2f s, before the kernel that writes it ended",
	      munmap_s);
	CHECK(got[2] == 0, "the kernel reading E saw %u, not 0 + 0", got[2]);
	CHECK(got[3] == 42, "the kernel after mprotect saw %u, not 20 + 22 (the CPU's stores)", got[3]);
	CHECK(got[4] == 11, "the kernel on the new mapping D saw %u, not 5 + 6 (the CPU's stores)", got[4]);
	CHECK(got[5] == 7, "the kernel running while D was made saw %u, not 3 + 4", got[5]);
	CHECK(kernels_s >= 5.5, "the kernels took %.2f s, shorter than three spins", kernels_s);
	CHECK(writes > 1000, "only %lu pwrites in %.1f s", writes, kernels_s);
	CHECK(worst_s * 1e3 <= max_ms, "a pwrite() of 4 KiB into a mapped file took %.3f ms while another "
				       "thread tore down a mapping a kernel may use or made a new one (bound %.1f ms)",
	      worst_s * 1e3, max_ms);
	munmap(a, A_BYTES);
	munmap(b_map, B_BYTES);
	munmap(e, E_BYTES);
	munmap(dm, D_BYTES);
	close(a_fd);
	close(d_fd);
	close(b_fd);
	close(c_fd);
	close(e_fd);
	printf("ok managed_io_replicas\n");
	return 0;
}
