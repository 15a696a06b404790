/* kernels.cu — kernels used by the simgpu tests.  Compiled by g++ for the
 * simulator and by nvcc (simgpu/nvcc_kernels) to keep them real CUDA. */
#include "kernels.h"

__global__ void add_one(int *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] += 1;
}
SIMGPU_KERNEL(add_one);

__global__ void vec_add(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}
SIMGPU_KERNEL(vec_add);

/* One thread spins for `ns` nanoseconds of clock64 time, then sets *done. */
__global__ void spin_ns(long long ns, int *done)
{
    if (threadIdx.x != 0 || blockIdx.x != 0)
        return;
    long long t0 = clock64();
    while (clock64() - t0 < ns)
        ;
    atomicExch(done, 1);
}
SIMGPU_KERNEL(spin_ns);

/* Every block's first thread spins ns: a kernel that keeps every worker busy. */
__global__ void spin_every_block(long long ns)
{
    if (threadIdx.x != 0)
        return;
    long long t0 = clock64();
    while (clock64() - t0 < ns)
        ;
}
SIMGPU_KERNEL(spin_every_block);

__global__ void append_tag(unsigned *log, unsigned *count, unsigned tag)
{
    if (threadIdx.x == 0 && blockIdx.x == 0)
        log[atomicAdd(count, 1u)] = tag;
}
SIMGPU_KERNEL(append_tag);

__global__ void atomics(int *i, unsigned *u, unsigned long long *ull, float *f)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(&i[0], 1);
    atomicMin(&i[1], -t);
    atomicMax(&i[2], t);
    atomicCAS(&i[3], 0, t + 1);     /* only the first thread's swap lands */
    atomicExch(&i[4], 7);
    atomicAdd(&u[0], 2u);
    atomicMax(&u[1], (unsigned)t);
    atomicMin(&u[2], (unsigned)t);
    atomicAdd(&ull[0], 1ull << 33);
    atomicCAS(&ull[1], 0ull, 5ull);
    atomicAdd(&f[0], 0.5f);
}
SIMGPU_KERNEL(atomics);

__global__ void mixed_params(char c, double d, int i, short s, void *p, unsigned long long *out)
{
    out[0] = (unsigned long long)c;
    out[1] = (unsigned long long)(d * 4);
    out[2] = (unsigned long long)i;
    out[3] = (unsigned long long)s;
    out[4] = (unsigned long long)p;
}
SIMGPU_KERNEL(mixed_params);

/* out[linear thread id] = linear thread id + 1, for a 3-D grid of 3-D blocks */
__global__ void grid_ids(unsigned *out)
{
    unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned per_block = blockDim.x * blockDim.y * blockDim.z;
    out[block * per_block + thread] = block * per_block + thread + 1;
}
SIMGPU_KERNEL(grid_ids);

__global__ void store_int(int *p, int v)
{
    *p = v;
}
SIMGPU_KERNEL(store_int);

__global__ void no_params(void)
{
}
SIMGPU_KERNEL(no_params);

/* For `ns` nanoseconds, one thread writes the second half of each of
 * `nblocks` 64 KiB blocks (16384 ints each), round after round. */
__global__ void write_second_halves(int *base, unsigned nblocks, long long ns, unsigned *rounds)
{
    long long t0 = clock64();
    unsigned k = 0;
    while (clock64() - t0 < ns) {
        for (unsigned b = 0; b < nblocks; b++)
            base[b * 16384 + 8192 + k % 8192] = (int)k;
        k++;
    }
    *rounds = k;
}
SIMGPU_KERNEL(write_second_halves);

/* Reads x[0..n) and adds it up into *sum (reads only). */
__global__ void sum_ints(const int *x, int n, unsigned long long *sum)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        atomicAdd(sum, (unsigned long long)x[i]);
}
SIMGPU_KERNEL(sum_ints);

/* Waits (at most `ns`) until the host sets *flag, then reports what it saw
 * in *seen: a kernel polling host memory the CPU writes while it runs. */
__global__ void wait_flag(const volatile int *flag, int *seen, long long ns)
{
    if (threadIdx.x != 0 || blockIdx.x != 0)
        return;
    long long t0 = clock64();
    int v = 0;
    while ((v = *flag) == 0 && clock64() - t0 < ns)
        ;
    *seen = v;
}
SIMGPU_KERNEL(wait_flag);
