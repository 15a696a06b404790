/* cancel_io — threads cancelled while they wait for input into a mapped
 * file, as a program stops a reader it no longer needs:
 *   1. a thread in fread() from a pipe's stream into the mapping is
 *      cancelled; then the main thread fread()s from the same stream (the
 *      stream must not stay locked);
 *   2. a thread in read() from a pipe into the mapping is cancelled;
 *   3. a stream the program locks itself (FSETLOCKING_BYCALLER): while
 *      another thread holds it with flockfile(), fread() into the mapping
 *      does not wait for that thread (libc does not lock such a stream);
 *   4. then a kernel is launched on the mapping for the first time (it
 *      gets its device copy, which under vmm moves the region: a reader
 *      cancelled inside the shim's gate must not hold that up) and must
 *      see the bytes the main thread read into it.
 */
#include <pthread.h>
#include <stdio_ext.h>

#include "programs.h"

#define NB (1u << 20)
#define CHUNK (64u << 10)

__global__ void sum_bytes(const unsigned char *m, unsigned n, unsigned *out)
{
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		unsigned s = 0;
		for (unsigned i = 0; i < n; i++)
			s += m[i];
		out[0] = s;
	}
}
SIMGPU_KERNEL(sum_bytes);

static unsigned char *m;
static FILE *f;
static int rfd;

static void *fread_reader(void *arg)
{
	(void)arg;
	return (void *)fread(m + CHUNK, 1, CHUNK, f);
}

static void *read_reader(void *arg)
{
	(void)arg;
	return (void *)read(rfd, m + 2 * CHUNK, CHUNK);
}

static void *holder(void *arg)
{
	FILE *held = (FILE *)arg;
	flockfile(held);
	sleep(3);
	funlockfile(held);
	return NULL;
}

static void cancel_reader(void *(*fn)(void *), const char *what)
{
	pthread_t t;
	CHECK(pthread_create(&t, NULL, fn, NULL) == 0, "pthread_create");
	usleep(200 * 1000); /* it waits for input now */
	CHECK(pthread_cancel(t) == 0, "pthread_cancel");
	void *r;
	CHECK(pthread_join(t, &r) == 0, "pthread_join");
	CHECK(r == PTHREAD_CANCELED, "the thread in %s returned %p: it was not cancelled", what, r);
}

int main(void)
{
	watchdog(30);
	int fd = make_file(NB, NULL);
	m = (unsigned char *)map_file(fd, NB);
	m[0] = 1;

	step = "a thread in fread() into the mapping, cancelled";
	int p[2];
	CHECK(pipe(p) == 0, "pipe: %s", strerror(errno));
	f = fdopen(p[0], "r");
	CHECK(f != NULL, "fdopen: %s", strerror(errno));
	cancel_reader(fread_reader, "fread()");
	step = "fread() from the same stream after the cancelled one";
	CHECK(write(p[1], "hello", 5) == 5, "write: %s", strerror(errno));
	close(p[1]);
	size_t got = fread(m + 100, 1, 5, f);
	CHECK(got == 5 && !memcmp(m + 100, "hello", 5), "fread after the cancelled one got %zu bytes", got);
	fclose(f);

	step = "a thread in read() into the mapping, cancelled";
	int q[2];
	CHECK(pipe(q) == 0, "pipe: %s", strerror(errno));
	rfd = q[0];
	cancel_reader(read_reader, "read()");
	close(q[0]);
	close(q[1]);

	step = "fread() of a stream the program locks itself, while another thread holds it";
	int s[2];
	CHECK(pipe(s) == 0, "pipe: %s", strerror(errno));
	CHECK(write(s[1], "world", 5) == 5, "write: %s", strerror(errno));
	close(s[1]);
	FILE *own = fdopen(s[0], "r");
	CHECK(own != NULL, "fdopen: %s", strerror(errno));
	__fsetlocking(own, FSETLOCKING_BYCALLER);
	pthread_t th;
	CHECK(pthread_create(&th, NULL, holder, own) == 0, "pthread_create");
	usleep(200 * 1000);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	got = fread(m + 200, 1, 5, own);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double waited = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	CHECK(got == 5 && !memcmp(m + 200, "world", 5), "fread of the caller-locked stream got %zu bytes", got);
	CHECK(waited < 1.0, "fread of a FSETLOCKING_BYCALLER stream waited %.2f s for another thread's "
			    "flockfile (libc does not lock such a stream)", waited);
	pthread_join(th, NULL);
	fclose(own);

	step = "the first launch on the mapping";
	unsigned *out;
	CUDA_OK(cudaMalloc((void **)&out, sizeof(unsigned)));
	SIMGPU_LAUNCH(sum_bytes, 1, 32, 0, 0)(m, NB, out);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	unsigned sum;
	CUDA_OK(cudaMemcpy(&sum, out, sizeof(sum), cudaMemcpyDeviceToHost));
	unsigned want = 1;
	for (const char *c = "helloworld"; *c; c++)
		want += (unsigned char)*c;
	CHECK(sum == want, "the kernel summed %u, want %u", sum, want);
	munmap(m, NB);
	close(fd);
	printf("ok cancel_io\n");
	return 0;
}
