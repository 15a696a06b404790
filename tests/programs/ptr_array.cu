/* ptr_array — a cudaMalloc'ed array of pointers (filled with cudaMemcpy from
 * a host array), each pointing into one of two mmap'ed files; the kernel
 * reads and writes the files through them. No mapped pointer is a kernel
 * argument: the kernel gets only the device array.
 *
 * Between mapping the files and the first launch, the program maps
 * memory of its own with an address hint just past each file (what
 * libcuda does while it initialises, and allocators do): a hint is only a
 * hint, and must not cost the files their device copy at their own
 * address.
 *
 * Two rounds: the CPU writes new values through the mapping, the kernel
 * does x = 2x + k through pointer k, and after cudaDeviceSynchronize the
 * mapping and pread() of both files must show it.
 */
#include "programs.h"

#define NPTR 8
#define N 1000			  /* floats behind each pointer */
#define FILE_BYTES (64 * 1024)

__global__ void twice_plus_k(float *const *ptrs, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	int k = blockIdx.y;
	float *p = ptrs[k];
	if (i < n)
		p[i] = p[i] * 2.0f + (float)k;
}
SIMGPU_KERNEL(twice_plus_k);

/* Pointer k: file k % 2, at float index offset_of(k) (not page aligned). */
static size_t offset_of(int k)
{
	return (size_t)(k / 2) * 3000 + 3 + k;
}

static float value(int round, int k, int i)
{
	return (float)((i * 7 + k * 31 + round * 5) % 500);
}

int main(void)
{
	watchdog(60);
	CUDA_OK(cudaSetDevice(0));
	int fd[2];
	float *m[2];
	for (int f = 0; f < 2; f++) {
		fd[f] = make_file(FILE_BYTES, NULL);
		m[f] = (float *)map_file(fd[f], FILE_BYTES);
	}
	/* Hinted, not fixed: where the kernel puts them is its business. */
	void *hinted[2];
	for (int f = 0; f < 2; f++) {
		char *hint = (char *)m[f] + FILE_BYTES + (1 << 20);
		hinted[f] = mmap(hint, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		CHECK(hinted[f] != MAP_FAILED, "mmap with a hint: %s", strerror(errno));
		memset(hinted[f], 0x5a, 1 << 20);
	}
	float *host_ptrs[NPTR];
	for (int k = 0; k < NPTR; k++)
		host_ptrs[k] = m[k % 2] + offset_of(k);
	CHECK((offset_of(NPTR - 1) + N) * sizeof(float) <= FILE_BYTES, "layout");
	float **d_ptrs;
	CUDA_OK(cudaMalloc((void **)&d_ptrs, sizeof(host_ptrs)));
	CUDA_OK(cudaMemcpy(d_ptrs, host_ptrs, sizeof(host_ptrs), cudaMemcpyHostToDevice));

	float *buf = (float *)malloc(FILE_BYTES);
	for (int round = 0; round < 2; round++) {
		for (int k = 0; k < NPTR; k++)
			for (int i = 0; i < N; i++)
				host_ptrs[k][i] = value(round, k, i);
		step = "kernel through the pointer array, then cudaDeviceSynchronize";
		SIMGPU_LAUNCH(twice_plus_k, dim3((N + 255) / 256, NPTR), 256, 0, 0)(d_ptrs, N);
		CUDA_OK(cudaGetLastError());
		CUDA_OK(cudaDeviceSynchronize());
		for (int f = 0; f < 2; f++) {
			pread_all(fd[f], buf, FILE_BYTES, 0);
			for (int k = f; k < NPTR; k += 2)
				for (int i = 0; i < N; i++) {
					size_t at = offset_of(k) + (size_t)i;
					float want = value(round, k, i) * 2.0f + (float)k;
					CHECK(m[f][at] == want, "round %d, file %d, pointer %d, element %d: mapping has %g, want %g",
					      round, f, k, i, m[f][at], want);
					CHECK(buf[at] == want, "round %d, file %d, pointer %d, element %d: pread() has %g, want %g",
					      round, f, k, i, buf[at], want);
				}
		}
	}
	free(buf);
	for (int f = 0; f < 2; f++) {
		CHECK(((unsigned char *)hinted[f])[12345] == 0x5a, "the hinted mapping lost its bytes");
		munmap(hinted[f], 1 << 20);
	}
	CUDA_OK(cudaFree(d_ptrs));
	printf("ok ptr_array\n");
	return 0;
}
