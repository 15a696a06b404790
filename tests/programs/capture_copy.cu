/* capture_copy — cudaMemcpyAsync between device memory and a mapped file
 * on a stream that is capturing a graph. The shim makes copies with a
 * mapped side itself, when called, so a graph cannot hold one: the copy
 * must be refused (cudaErrorStreamCaptureUnsupported, with a warning) and
 * the capture invalidated — never a graph that silently lacks the copy,
 * nor a copy made at capture time. A kernel that reads the mapping can be
 * captured (graph_capture); so can a copy between device buffers.
 */
#include "programs.h"

#define N 4096
#define ARR (N * sizeof(int))

/* cudaMemcpyAsync(dst, src) on the capturing stream s is refused and the
 * capture comes back invalidated. */
static void refused_in_capture(cudaStream_t s, void *dst, const void *src, cudaMemcpyKind kind, const char *what)
{
	cudaGraph_t g;
	CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	cudaError_t e = cudaMemcpyAsync(dst, src, ARR, kind, s);
	CHECK(e == cudaErrorStreamCaptureUnsupported, "cudaMemcpyAsync(%s) during a capture returned %s", what,
	      cudaGetErrorName(e));
	(void)cudaGetLastError();
	e = cudaStreamEndCapture(s, &g);
	CHECK(e == cudaErrorStreamCaptureInvalidated, "cudaStreamEndCapture returned %s, want invalidated",
	      cudaGetErrorName(e));
	(void)cudaGetLastError();
}

int main(void)
{
	watchdog(60);
	step = "setup";
	int fd = make_file(ARR, NULL);
	int *m = (int *)map_file(fd, ARR);
	for (int i = 0; i < N; i++)
		m[i] = i + 1;
	int *dev, *dev2;
	CUDA_OK(cudaMalloc((void **)&dev, ARR));
	CUDA_OK(cudaMalloc((void **)&dev2, ARR));
	CUDA_OK(cudaMemset(dev, 0, ARR));
	cudaStream_t s;
	CUDA_OK(cudaStreamCreate(&s));
	cudaGraph_t g;

	step = "capture a copy from the mapping";
	refused_in_capture(s, dev, m, cudaMemcpyHostToDevice, "dev, mapped");
	int first = -1;
	CUDA_OK(cudaMemcpy(&first, dev, sizeof(int), cudaMemcpyDeviceToHost));
	CHECK(first == 0, "the refused copy was made anyway: dev[0] = %d", first);

	step = "capture a copy into the mapping";
	refused_in_capture(s, m, dev, cudaMemcpyDefault, "mapped, dev");
	CHECK(m[0] == 1, "the refused copy was made anyway: mapped[0] = %d", m[0]);

	step = "device-to-device copies are captured as usual";
	CUDA_OK(cudaMemcpy(dev, m, ARR, cudaMemcpyHostToDevice));
	CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	CUDA_OK(cudaMemcpyAsync(dev2, dev, ARR, cudaMemcpyDeviceToDevice, s));
	CUDA_OK(cudaStreamEndCapture(s, &g));
	cudaGraphExec_t x;
	CUDA_OK(cudaGraphInstantiate(&x, g, 0));
	CUDA_OK(cudaGraphLaunch(x, s));
	CUDA_OK(cudaStreamSynchronize(s));
	int *back = (int *)malloc(ARR);
	CUDA_OK(cudaMemcpy(back, dev2, ARR, cudaMemcpyDeviceToHost));
	for (int i = 0; i < N; i++)
		CHECK(back[i] == i + 1, "dev2[%d] = %d after the graph", i, back[i]);
	free(back);
	CUDA_OK(cudaGraphExecDestroy(x));
	CUDA_OK(cudaGraphDestroy(g));
	CUDA_OK(cudaStreamDestroy(s));
	printf("capture_copy: ok\n");
	return 0;
}
