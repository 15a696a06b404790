/* graph_capture — a program that records its GPU work once as a CUDA graph
 * (stream capture) and replays it, the way frameworks do, on pointers from
 * mmap of a file:
 *   1. a kernel launch on a blocking stream is captured together with a
 *      host function; nothing may run (or be refused) during the capture;
 *   2. the graph is launched three times, the CPU writing new inputs
 *      through the mapping before each; after cudaStreamSynchronize the
 *      outputs must be in the mapping and in the file (pread), and the host
 *      function must have run once per launch;
 *   3. the same under cudaStreamCaptureModeRelaxed, with the file's first
 *      launch being the captured kernel of a second file (no device copy
 *      yet when the capture begins).
 */
#include "programs.h"

#define N 8192
#define ARR (N * sizeof(int))

__global__ void affine(const int *in, int *out, int n, int a, int b)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		out[i] = in[i] * a + b;
}
SIMGPU_KERNEL(affine);

static int calls;

static void CUDART_CB count_call(void *arg)
{
	(void)arg;
	__atomic_fetch_add(&calls, 1, __ATOMIC_RELEASE);
}

static void run_case(const char *name, enum cudaStreamCaptureMode mode, bool launch_before)
{
	step = name;
	int fd = make_file(2 * ARR, NULL);
	int *m = (int *)map_file(fd, 2 * ARR);
	int *in = m, *out = m + N;
	for (int i = 0; i < N; i++)
		in[i] = i;
	cudaStream_t s;
	CUDA_OK(cudaStreamCreate(&s));
	if (launch_before) {
		/* the file has a device copy before the capture begins */
		SIMGPU_LAUNCH(affine, (N + 255) / 256, 256, 0, s)(in, out, N, 1, 0);
		CUDA_OK(cudaGetLastError());
		CUDA_OK(cudaStreamSynchronize(s));
		CHECK(out[N - 1] == N - 1, "%s: first launch: out[%d] = %d", name, N - 1, out[N - 1]);
	}
	__atomic_store_n(&calls, 0, __ATOMIC_RELEASE);
	CUDA_OK(cudaStreamBeginCapture(s, mode));
	SIMGPU_LAUNCH(affine, (N + 255) / 256, 256, 0, s)(in, out, N, 3, 1);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaLaunchHostFunc(s, count_call, NULL));
	cudaGraph_t g;
	CUDA_OK(cudaStreamEndCapture(s, &g));
	CHECK(__atomic_load_n(&calls, __ATOMIC_ACQUIRE) == 0, "%s: the host function ran during the capture", name);
	cudaGraphExec_t e;
	CUDA_OK(cudaGraphInstantiate(&e, g, 0));
	int *buf = (int *)malloc(ARR);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < N; i++)
			in[i] = i * (round + 2) - 5;
		CUDA_OK(cudaGraphLaunch(e, s));
		CUDA_OK(cudaStreamSynchronize(s));
		pread_all(fd, buf, ARR, (off_t)ARR);
		for (int i = 0; i < N; i++) {
			int want = (i * (round + 2) - 5) * 3 + 1;
			CHECK(out[i] == want, "%s round %d: out[%d] through the mapping is %d, want %d", name,
			      round, i, out[i], want);
			CHECK(buf[i] == want, "%s round %d: out[%d] read with pread() is %d, want %d", name,
			      round, i, buf[i], want);
		}
		int c = __atomic_load_n(&calls, __ATOMIC_ACQUIRE);
		CHECK(c == round + 1, "%s round %d: the host function ran %d times", name, round, c);
	}
	free(buf);
	CUDA_OK(cudaGraphExecDestroy(e));
	CUDA_OK(cudaGraphDestroy(g));
	CUDA_OK(cudaStreamDestroy(s));
	munmap(m, 2 * ARR);
	close(fd);
}

int main(void)
{
	watchdog(60);
	run_case("global capture, file launched before", cudaStreamCaptureModeGlobal, true);
	run_case("global capture, file first used in the graph", cudaStreamCaptureModeGlobal, false);
	run_case("relaxed capture, file first used in the graph", cudaStreamCaptureModeRelaxed, false);
	run_case("thread-local capture, file launched before", cudaStreamCaptureModeThreadLocal, true);
	printf("graph_capture: ok\n");
	return 0;
}
