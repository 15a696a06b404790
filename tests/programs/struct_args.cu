/* struct_args — kernels whose parameter is a struct passed by value that
 * holds pointers into mmap'ed files: a 16-byte {in, out}, a 32-byte
 * {in, out, n, scale, pad}, a 64-byte one with pointers into two files,
 * and a kernel taking (int n, struct) so the struct is not the first
 * parameter. No mapped pointer is passed as a parameter of its own.
 *
 * Each case uses files of its own (a launch that already gave a file a
 * device copy cannot help the next case), writes the inputs through the
 * mapping, launches twice (new inputs in between) and checks the outputs
 * through the mapping and with pread() after each cudaDeviceSynchronize.
 */
#include "programs.h"

#define N 4096			/* floats per array */
#define ARR (N * sizeof(float)) /* 16 KiB */

struct S16 {
	const float *in;
	float *out;
};
struct S32 {
	const float *in;
	float *out;
	int n;
	float scale;
	long pad;
};
struct S64 {
	const float *a;	 /* file A */
	float *a_out;	 /* file A */
	const float *b;	 /* file B */
	float *b_out;	 /* file B */
	float *sum_out;	 /* file A */
	int n;
	int b_scale;
	long pad0;
	long pad1;
};
static_assert(sizeof(struct S16) == 16, "S16 is 16 bytes");
static_assert(sizeof(struct S32) == 32, "S32 is 32 bytes");
static_assert(sizeof(struct S64) == 64, "S64 is 64 bytes");

__global__ void k16(struct S16 s, int n, float scale)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		s.out[i] = s.in[i] * scale;
}
SIMGPU_KERNEL(k16);

__global__ void k32(struct S32 s)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < s.n)
		s.out[i] = s.in[i] * s.scale;
}
SIMGPU_KERNEL(k32);

__global__ void k64(struct S64 s)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < s.n) {
		s.a_out[i] = s.a[i] + 1.0f;
		s.b_out[i] = s.b[i] * (float)s.b_scale;
		s.sum_out[i] = s.a[i] + s.b[i];
	}
}
SIMGPU_KERNEL(k64);

__global__ void kn(int n, struct S16 s)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		s.out[i] = s.in[i] - 7.0f;
}
SIMGPU_KERNEL(kn);

/* Inputs: small integers and halves, exact in float. */
static float input(int round, int salt, int i)
{
	return (float)((i * 13 + salt * 101 + round * 7) % 1000) * 0.5f;
}

static void write_input(float *in, int round, int salt)
{
	for (int i = 0; i < N; i++)
		in[i] = input(round, salt, i);
}

/* The file's floats at byte offset `off` must be want(i), through the
 * mapping `m` (the file's start) and with pread(). */
static void check_out(const char *what, int fd, const unsigned char *m, size_t off,
		      float (*want)(int round, int salt, int i), int round, int salt)
{
	const float *mf = (const float *)(m + off);
	float *buf = (float *)malloc(ARR);
	pread_all(fd, buf, ARR, (off_t)off);
	for (int i = 0; i < N; i++) {
		float w = want(round, salt, i);
		CHECK(mf[i] == w, "%s round %d: out[%d] through the mapping is %g, want %g", what, round, i,
		      mf[i], w);
		CHECK(buf[i] == w, "%s round %d: out[%d] read with pread() is %g, want %g", what, round, i,
		      buf[i], w);
	}
	free(buf);
}

static float want_x3(int r, int s, int i) { return input(r, s, i) * 3.0f; }
static float want_x5(int r, int s, int i) { return input(r, s, i) * 5.0f; }
static float want_p1(int r, int s, int i) { return input(r, s, i) + 1.0f; }
static float want_b4(int r, int s, int i) { return input(r, s, i) * 4.0f; }
static float want_m7(int r, int s, int i) { return input(r, s, i) - 7.0f; }
static float want_sum(int r, int s, int i) { return input(r, 1, i) + input(r, 2, i); }

/* A file of two arrays: in at 0, out at ARR (plus a page of slack). */
static unsigned char *two_arrays(int *fd)
{
	*fd = make_file(2 * ARR + PAGE, NULL);
	return (unsigned char *)map_file(*fd, 2 * ARR + PAGE);
}

static void case_16(void)
{
	int fd;
	unsigned char *m = two_arrays(&fd);
	struct S16 s = { (const float *)m, (float *)(m + ARR) };
	for (int round = 0; round < 2; round++) {
		step = "16-byte struct";
		write_input((float *)m, round, 0);
		SIMGPU_LAUNCH(k16, N / 256, 256, 0, 0)(s, N, 3.0f);
		CUDA_OK(cudaGetLastError());
		CUDA_OK(cudaDeviceSynchronize());
		check_out("k16(struct{in,out}, n, 3)", fd, m, ARR, want_x3, round, 0);
	}
	munmap(m, 2 * ARR + PAGE);
	close(fd);
}

static void case_32(void)
{
	int fd;
	unsigned char *m = two_arrays(&fd);
	struct S32 s = { (const float *)m, (float *)(m + ARR), N, 5.0f, 0 };
	for (int round = 0; round < 2; round++) {
		step = "32-byte struct";
		write_input((float *)m, round, 0);
		SIMGPU_LAUNCH(k32, N / 256, 256, 0, 0)(s);
		CUDA_OK(cudaGetLastError());
		CUDA_OK(cudaDeviceSynchronize());
		check_out("k32(struct{in,out,n,5,pad})", fd, m, ARR, want_x5, round, 0);
	}
	munmap(m, 2 * ARR + PAGE);
	close(fd);
}

static void case_64(void)
{
	/* A: a at 0, a_out at ARR, sum_out at 2*ARR; B: b at 0, b_out at ARR. */
	int fa = make_file(3 * ARR, NULL);
	int fb = make_file(2 * ARR, NULL);
	unsigned char *a = (unsigned char *)map_file(fa, 3 * ARR);
	unsigned char *b = (unsigned char *)map_file(fb, 2 * ARR);
	struct S64 s = { (const float *)a, (float *)(a + ARR), (const float *)b, (float *)(b + ARR),
			 (float *)(a + 2 * ARR), N, 4, 0, 0 };
	for (int round = 0; round < 2; round++) {
		step = "64-byte struct";
		write_input((float *)a, round, 1);
		write_input((float *)b, round, 2);
		SIMGPU_LAUNCH(k64, N / 256, 256, 0, 0)(s);
		CUDA_OK(cudaGetLastError());
		CUDA_OK(cudaDeviceSynchronize());
		check_out("k64: a_out = a + 1 (file A)", fa, a, ARR, want_p1, round, 1);
		check_out("k64: b_out = b * 4 (file B)", fb, b, ARR, want_b4, round, 2);
		check_out("k64: sum_out = a + b (file A)", fa, a, 2 * ARR, want_sum, round, 0);
	}
	munmap(a, 3 * ARR);
	munmap(b, 2 * ARR);
	close(fa);
	close(fb);
}

static void case_n_first(void)
{
	int fd;
	unsigned char *m = two_arrays(&fd);
	struct S16 s = { (const float *)m, (float *)(m + ARR) };
	for (int round = 0; round < 2; round++) {
		step = "(int n, struct) kernel";
		write_input((float *)m, round, 3);
		SIMGPU_LAUNCH(kn, N / 256, 256, 0, 0)(N, s);
		CUDA_OK(cudaGetLastError());
		CUDA_OK(cudaDeviceSynchronize());
		check_out("kn(n, struct{in,out})", fd, m, ARR, want_m7, round, 3);
	}
	munmap(m, 2 * ARR + PAGE);
	close(fd);
}

int main(void)
{
	watchdog(60);
	CUDA_OK(cudaSetDevice(0));
	case_16();
	case_32();
	case_64();
	case_n_first();
	printf("ok struct_args\n");
	return 0;
}
