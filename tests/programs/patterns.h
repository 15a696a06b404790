/* patterns.h — byte patterns, the kernels that write and copy them, and
 * the byte-by-byte check, for the programs that compare a mapped file with
 * a model after each step (memcpy_kinds, mem_ops, host_register). Include once per
 * program, after programs.h. */
#ifndef GAIA_TEST_PATTERNS_H
#define GAIA_TEST_PATTERNS_H

#include "programs.h"

/* Pattern k: byte i. Two patterns differ at every byte. */
static unsigned char pat(int k, size_t i)
{
	return (unsigned char)(i * 131 + (size_t)k * 29 + (i >> 9) * 7);
}

__global__ void copy_bytes(const unsigned char *src, unsigned char *dst, unsigned long long n)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < n; i += (unsigned long long)gridDim.x * blockDim.x)
		dst[i] = src[i];
}
SIMGPU_KERNEL(copy_bytes);

/* dst[i] = pattern k, byte i, for i in [from, to). */
__global__ void fill_pat(unsigned char *dst, unsigned long long from, unsigned long long to, int k)
{
	unsigned long long i = from + (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < to; i += (unsigned long long)gridDim.x * blockDim.x)
		dst[i] = (unsigned char)(i * 131 + (unsigned long long)k * 29 + (i >> 9) * 7);
}
SIMGPU_KERNEL(fill_pat);

/* buf[i] = pattern k, byte i, for i in [from, to). */
static void fill(unsigned char *buf, size_t from, size_t to, int k)
{
	for (size_t i = from; i < to; i++)
		buf[i] = pat(k, i);
}

/* got[0, n) must equal want[0, n). */
static void same(const char *what, const unsigned char *got, const unsigned char *want, size_t n)
{
	for (size_t i = 0; i < n; i++)
		CHECK(got[i] == want[i], "%s: byte %zu is %#x, want %#x", what, i, got[i], want[i]);
}

#endif
