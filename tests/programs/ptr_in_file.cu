/* ptr_in_file — a pointer-based structure stored in the mapped file itself:
 * a linked list whose `next` fields are absolute addresses inside the
 * mapping, written by the CPU after mmap. The kernel gets only the head's
 * offset (an integer) and a device-memory slot holding the mapping's base
 * address, walks the list, and writes each node's running sum into it.
 *
 * (A __device__ variable set with cudaMemcpyToSymbol would be the other
 * way to hand over the base; the simulated GPU has no symbols — kernels see
 * globals as of cuInit — so the cudaMalloc'ed slot is the way here.)
 *
 * Two rounds: the second relinks the list in another order with other
 * values; each round is checked through the mapping and with pread().
 */
#include <stdint.h>

#include "programs.h"

#define PAGES 64
#define FILE_BYTES (PAGES * PAGE)
#define NODES 64

struct node {
	struct node *next;
	long long value;
	long long sum;	/* written by the kernel: value + every value before it */
	long long pad;
};

__global__ void walk(const unsigned long long *base_slot, unsigned long long head_off)
{
	if (blockIdx.x != 0 || threadIdx.x != 0)
		return;
	char *base = (char *)(uintptr_t)*base_slot;
	long long sum = 0;
	for (struct node *n = (struct node *)(base + head_off); n; n = n->next) {
		sum += n->value;
		n->sum = sum;
	}
}
SIMGPU_KERNEL(walk);

/* Node i's offset in the file: a page chosen by a permutation, a spot in it. */
static size_t node_off(int round, int i)
{
	int page = (i * (round ? 23 : 37) + round) % PAGES;
	return (size_t)page * PAGE + (size_t)((i * 5 + round * 3) % 120) * sizeof(struct node);
}

static long long node_value(int round, int i)
{
	return (long long)(i + 1) * (round ? 1000003 : 17) + round;
}

int main(void)
{
	watchdog(60);
	CUDA_OK(cudaSetDevice(0));
	int fd = make_file(FILE_BYTES, NULL);
	char *m = (char *)map_file(fd, FILE_BYTES);
	unsigned long long *d_base;
	CUDA_OK(cudaMalloc((void **)&d_base, sizeof(*d_base)));
	unsigned long long base = (unsigned long long)(uintptr_t)m;
	CUDA_OK(cudaMemcpy(d_base, &base, sizeof(base), cudaMemcpyHostToDevice));

	char *buf = (char *)malloc(FILE_BYTES);
	for (int round = 0; round < 2; round++) {
		memset(m, 0, FILE_BYTES);
		for (int i = 0; i < NODES; i++) {
			struct node *n = (struct node *)(m + node_off(round, i));
			n->value = node_value(round, i);
			n->next = i + 1 < NODES ? (struct node *)(m + node_off(round, i + 1)) : NULL;
		}
		step = "kernel walking the list, then cudaDeviceSynchronize";
		SIMGPU_LAUNCH(walk, 1, 1, 0, 0)(d_base, (unsigned long long)node_off(round, 0));
		CUDA_OK(cudaGetLastError());
		CUDA_OK(cudaDeviceSynchronize());
		pread_all(fd, buf, FILE_BYTES, 0);
		long long want = 0;
		for (int i = 0; i < NODES; i++) {
			want += node_value(round, i);
			size_t off = node_off(round, i);
			const struct node *n = (const struct node *)(m + off);
			const struct node *f = (const struct node *)(buf + off);
			CHECK(n->sum == want, "round %d, node %d (file offset %zu): sum in the mapping is %lld, want %lld",
			      round, i, off, n->sum, want);
			CHECK(f->sum == want, "round %d, node %d (file offset %zu): sum read with pread() is %lld, want %lld",
			      round, i, off, f->sum, want);
			CHECK(f->value == node_value(round, i) && f->next == n->next,
			      "round %d, node %d: pread() shows value %lld next %p, the CPU wrote %lld %p", round, i,
			      f->value, (void *)f->next, node_value(round, i), (void *)n->next);
		}
	}
	free(buf);
	CUDA_OK(cudaFree(d_base));
	printf("ok ptr_in_file\n");
	return 0;
}
