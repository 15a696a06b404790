/* kernels.h — the test kernels (kernels.cu), for g++ and nvcc alike. */
#ifndef SIMGPU_TEST_KERNELS_H
#define SIMGPU_TEST_KERNELS_H

#include "simgpu_kernel.h"

__global__ void add_one(int *x, int n);
__global__ void vec_add(const float *a, const float *b, float *c, int n);
__global__ void spin_ns(long long ns, int *done);
__global__ void spin_every_block(long long ns);
__global__ void append_tag(unsigned *log, unsigned *count, unsigned tag);
__global__ void atomics(int *i, unsigned *u, unsigned long long *ull, float *f);
__global__ void mixed_params(char c, double d, int i, short s, void *p, unsigned long long *out);
__global__ void grid_ids(unsigned *out);
__global__ void store_int(int *p, int v);
__global__ void no_params(void);
__global__ void write_second_halves(int *base, unsigned nblocks, long long ns, unsigned *rounds);

__global__ void sum_ints(const int *x, int n, unsigned long long *sum);
__global__ void wait_flag(const volatile int *flag, int *seen, long long ns);

#endif
