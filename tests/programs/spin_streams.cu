/* spin_streams — a kernel that waits for the host on one stream while
 * another stream's kernel writes an mmap'ed file and the host waits for
 * only that second stream:
 *   stream a: `spin` loops until a managed-memory flag is set, then writes
 *             a marker into the mapped file;
 *   stream b: `work` writes other bytes of the same file;
 *   the host waits for b alone (cudaStreamSynchronize, cudaEventRecord +
 *   cudaEventSynchronize, or polling cudaStreamQuery): that must return
 *   while `spin` still runs, and the CPU must then see work's bytes
 *   (mapping and pread()); then the host sets the flag (spin acknowledges
 *   it in the flag), synchronizes a, and must see the marker too.
 * Stream a is created with cudaStreamNonBlocking, then with
 * cudaStreamCreate (b always with cudaStreamCreate). Each variant uses a
 * fresh file, and the CPU does not write the mapping between the launches.
 */
#include "programs.h"

#define NB (8 * PAGE)
#define MARK_BYTES 64
#define WORK_FROM MARK_BYTES	/* work writes [WORK_FROM, WORK_TO): same first page */
#define WORK_TO (4 * PAGE)

__global__ void spin(volatile int *flag, unsigned char *mark, long long give_up_ns)
{
	if (blockIdx.x != 0 || threadIdx.x != 0)
		return;
	long long t0 = clock64();
	while (*flag == 0)
		if (clock64() - t0 > give_up_ns)
			return;		/* no marker: the host sees it missing */
	for (int i = 0; i < MARK_BYTES; i++)
		mark[i] = (unsigned char)(0xa0 + i);
	*flag = 2;	/* seen, marker written */
}
SIMGPU_KERNEL(spin);

__global__ void work(unsigned char *m, unsigned long long from, unsigned long long to)
{
	unsigned long long i = from + (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < to; i += (unsigned long long)gridDim.x * blockDim.x)
		m[i] = (unsigned char)(i * 7 + 3);
}
SIMGPU_KERNEL(work);

static unsigned char initial(size_t i)
{
	return (unsigned char)(i % 251);
}

enum wait_kind { WAIT_STREAM, WAIT_EVENT, WAIT_QUERY };
static const char *const wait_name[] = { "cudaStreamSynchronize(b)", "cudaEventSynchronize(event on b)",
					 "cudaStreamQuery(b) polling" };

/* The file must show work's bytes, and the marker iff `marked`. */
static void check_file(const char *when, int fd, const unsigned char *m, int marked)
{
	unsigned char *buf = (unsigned char *)malloc(NB);
	pread_all(fd, buf, NB, 0);
	for (size_t i = 0; i < NB; i++) {
		unsigned char want = initial(i);
		if (i < MARK_BYTES && marked)
			want = (unsigned char)(0xa0 + i);
		else if (i >= WORK_FROM && i < WORK_TO)
			want = (unsigned char)(i * 7 + 3);
		CHECK(m[i] == want, "%s: byte %zu through the mapping is %#x, want %#x%s", when, i, m[i], want,
		      i < MARK_BYTES ? " (marker)" : i < WORK_TO ? " (work's bytes)" : " (untouched)");
		CHECK(buf[i] == want, "%s: byte %zu read with pread() is %#x, want %#x%s", when, i, buf[i], want,
		      i < MARK_BYTES ? " (marker)" : i < WORK_TO ? " (work's bytes)" : " (untouched)");
	}
	free(buf);
}

static void variant(volatile int *flag, int a_nonblocking, enum wait_kind how)
{
	static char where[400];
	char when[200];
	snprintf(when, sizeof(when), "stream a %s, %s", a_nonblocking ? "cudaStreamNonBlocking" : "cudaStreamCreate",
		 wait_name[how]);
	watchdog(20);	/* per variant; spin itself gives up later than this */
	int fd = make_file(NB, initial);
	unsigned char *m = (unsigned char *)map_file(fd, NB);
	cudaStream_t a, b;
	if (a_nonblocking)
		CUDA_OK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
	else
		CUDA_OK(cudaStreamCreate(&a));
	CUDA_OK(cudaStreamCreate(&b));

	snprintf(where, sizeof(where), "%s: launching spin on a and work on b", when);
	step = where;
	SIMGPU_LAUNCH(spin, 1, 1, 0, a)(flag, m, 50ll * 1000 * 1000 * 1000);
	CUDA_OK(cudaGetLastError());
	SIMGPU_LAUNCH(work, 8, 128, 0, b)(m, (unsigned long long)WORK_FROM, (unsigned long long)WORK_TO);
	CUDA_OK(cudaGetLastError());

	snprintf(where, sizeof(where), "%s: waiting for b while spin runs on a", when);
	if (how == WAIT_STREAM) {
		CUDA_OK(cudaStreamSynchronize(b));
	} else if (how == WAIT_EVENT) {
		cudaEvent_t ev;
		CUDA_OK(cudaEventCreate(&ev));
		CUDA_OK(cudaEventRecord(ev, b));
		CUDA_OK(cudaEventSynchronize(ev));
		CUDA_OK(cudaEventDestroy(ev));
	} else {
		cudaError_t e;
		while ((e = cudaStreamQuery(b)) == cudaErrorNotReady)
			usleep(1000);
		CHECK(e == cudaSuccess, "%s: cudaStreamQuery(b) returned %s", when, cudaGetErrorName(e));
	}
	char msg[400];
	snprintf(msg, sizeof(msg), "%s, spin still waiting", when);
	check_file(msg, fd, m, 0);

	snprintf(where, sizeof(where), "%s: cudaStreamSynchronize(a) after setting the flag", when);
	*flag = 1;
	CUDA_OK(cudaStreamSynchronize(a));
	CHECK(*flag == 2, "%s: spin never saw the flag (gave up after 50 s)", when);
	snprintf(msg, sizeof(msg), "%s, then flag set and cudaStreamSynchronize(a)", when);
	check_file(msg, fd, m, 1);
	*flag = 0;

	CUDA_OK(cudaStreamDestroy(a));
	CUDA_OK(cudaStreamDestroy(b));
	munmap(m, NB);
	close(fd);
}

int main(void)
{
	CUDA_OK(cudaSetDevice(0));
	int *flag;
	CUDA_OK(cudaMallocManaged((void **)&flag, sizeof(int), cudaMemAttachGlobal));
	/* Both kernels loaded before either waits on the other: under CUDA's
	 * lazy loading (the default since CUDA 12.2) a kernel first launched
	 * while another one runs waits for the device, so without this the
	 * program hangs on a real GPU with or without the shim. */
	unsigned char *scratch;
	CUDA_OK(cudaMalloc((void **)&scratch, MARK_BYTES));
	*flag = 1;
	SIMGPU_LAUNCH(spin, 1, 1, 0, 0)(flag, scratch, 0ll);
	SIMGPU_LAUNCH(work, 1, 1, 0, 0)(scratch, 0ull, 0ull);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	CUDA_OK(cudaFree(scratch));
	*flag = 0;
	for (int nb = 1; nb >= 0; nb--)
		for (int how = WAIT_STREAM; how <= WAIT_QUERY; how++)
			variant(flag, nb, (enum wait_kind)how);
	CUDA_OK(cudaFree(flag));
	printf("ok spin_streams\n");
	return 0;
}
