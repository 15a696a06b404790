/*
 * simgpu_kernel.h — compile a CUDA kernel source for the simulated GPU with
 * g++ (C++17), and keep it compiling with nvcc.
 *
 *   #include <simgpu_kernel.h>
 *   __global__ void scale(float *x, float a, int n) {
 *       int i = blockIdx.x * blockDim.x + threadIdx.x;
 *       if (i < n) x[i] *= a;
 *   }
 *   SIMGPU_KERNEL(scale);                 // nothing under nvcc
 *
 *   // launch: cudaLaunchKernel((const void *)scale, grid, block, args, 0, s),
 *   // cuLaunchKernel((CUfunction)scale, ...), or the <<<>>> stand-in
 *   SIMGPU_LAUNCH(scale, grid, block, 0, stream)(d_x, 2.0f, n);
 *
 * What the simulator gives a kernel: threadIdx, blockIdx, blockDim,
 * gridDim, warpSize, atomics (atomicAdd/Sub/Min/Max/CAS/Exch/And/Or/Xor on
 * int, unsigned, unsigned long long; atomicAdd and atomicExch on float),
 * __threadfence, clock64 (nanoseconds here, not cycles).  The threads of a
 * block run one after the other on one host thread, so __syncthreads and
 * __shared__ are rejected at compile time with a clear error (a kernel
 * that needs them cannot be run correctly this way).
 *
 * Kernels run in the device process, a fork of the program taken at cuInit:
 * they see global variables as they were at that moment, never later host
 * writes.  Pass data through arguments and device memory.
 */
#ifndef SIMGPU_KERNEL_H
#define SIMGPU_KERNEL_H

#if defined(__CUDACC__)

#define SIMGPU_KERNEL(fn)
#define SIMGPU_KERNEL_NAMED(fn, tag)
#define SIMGPU_LAUNCH(fn, grid, block, smem, stream) fn<<<(grid), (block), (smem), (stream)>>>

#else /* g++ for the simulated GPU */

#ifndef __cplusplus
#error "simgpu_kernel.h needs C++17 (compile kernels with g++)"
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <tuple>
#include <type_traits>
#include <utility>

#include <cuda_runtime_api.h>   /* dim3, uint3 (CUDA's own types), cudaLaunchKernel */

#include "simgpu.h"

/* host_defines.h (through the CUDA headers) defines these as attributes
 * g++ does not know; a kernel compiled for the host is plain code. */
#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __forceinline__
#undef __noinline__
#undef __constant__
#undef __managed__
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__ static_assert(false, "simgpu: __managed__ variables are not supported");
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __shared__ _Pragma("GCC error \"simgpu: __shared__ is not supported (threads of a block run sequentially)\"")

inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;
static constexpr int warpSize = 32;

void __syncthreads(void) __attribute__((error(
    "simgpu: __syncthreads is not supported (threads of a block run sequentially)")));

inline void __threadfence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline long long clock64(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* ---- atomics: one template per operation, instantiated for the CUDA types */
namespace simgpu {
template <typename T> using atomic_int_t = std::enable_if_t<
    std::is_same_v<T, int> || std::is_same_v<T, unsigned> || std::is_same_v<T, unsigned long long>, T>;
}

template <typename T> inline simgpu::atomic_int_t<T> atomicAdd(T *p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
template <typename T> inline simgpu::atomic_int_t<T> atomicSub(T *p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }
template <typename T> inline simgpu::atomic_int_t<T> atomicAnd(T *p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); }
template <typename T> inline simgpu::atomic_int_t<T> atomicOr(T *p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
template <typename T> inline simgpu::atomic_int_t<T> atomicXor(T *p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST); }
template <typename T> inline simgpu::atomic_int_t<T> atomicExch(T *p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
template <typename T> inline simgpu::atomic_int_t<T> atomicCAS(T *p, T expected, T desired)
{
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expected;    /* the old value, whether or not it was swapped */
}
template <typename T> inline simgpu::atomic_int_t<T> atomicMin(T *p, T v)
{
    T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (v < old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        ;
    return old;
}
template <typename T> inline simgpu::atomic_int_t<T> atomicMax(T *p, T v)
{
    T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (v > old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        ;
    return old;
}
inline float atomicAdd(float *p, float v)
{
    uint32_t *w = reinterpret_cast<uint32_t *>(p);
    uint32_t old = __atomic_load_n(w, __ATOMIC_SEQ_CST), upd;
    do {
        float f;
        std::memcpy(&f, &old, sizeof(f));
        f += v;
        std::memcpy(&upd, &f, sizeof(f));
    } while (!__atomic_compare_exchange_n(w, &old, upd, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
    float r;
    std::memcpy(&r, &old, sizeof(r));
    return r;
}
inline float atomicExch(float *p, float v)
{
    uint32_t nv, old;
    std::memcpy(&nv, &v, sizeof(nv));
    old = __atomic_exchange_n(reinterpret_cast<uint32_t *>(p), nv, __ATOMIC_SEQ_CST);
    float r;
    std::memcpy(&r, &old, sizeof(r));
    return r;
}

/* ---- registration: parameter layout and the trampoline the device runs */
namespace simgpu {

template <typename... A> struct layout {
    static constexpr unsigned n = sizeof...(A);
    static constexpr unsigned size[n ? n : 1] = { static_cast<unsigned>(sizeof(std::decay_t<A>))... };
    static constexpr unsigned align[n ? n : 1] = { static_cast<unsigned>(alignof(std::decay_t<A>))... };
    struct offsets_t { unsigned off[n ? n : 1]; unsigned total; };
    /* C struct layout: each parameter at the next multiple of its alignment
     * (the CUDA ABI for kernel parameters). */
    static constexpr offsets_t compute()
    {
        offsets_t o{};
        unsigned at = 0;
        for (unsigned i = 0; i < n; i++) {
            at = (at + align[i] - 1) / align[i] * align[i];
            o.off[i] = at;
            at += size[i];
        }
        o.total = at;
        return o;
    }
    static constexpr offsets_t offsets = compute();
};

template <typename F, F f> struct kernel;

template <typename... A, void (*f)(A...)> struct kernel<void (*)(A...), f> {
    using L = layout<A...>;
    static_assert(L::offsets.total <= SIMGPU_MAX_ARGS_BYTES, "simgpu: kernel parameters exceed 4 KiB");

    template <std::size_t... I>
    static void call([[maybe_unused]] const unsigned char *args, std::index_sequence<I...>)
    {
        f(*reinterpret_cast<const std::decay_t<A> *>(args + L::offsets.off[I])...);
    }

    static void trampoline(const void *args, const simgpu_launch_dims *d, uint64_t b0, uint64_t b1)
    {
        gridDim = dim3(d->grid[0], d->grid[1], d->grid[2]);
        blockDim = dim3(d->block[0], d->block[1], d->block[2]);
        const unsigned char *a = static_cast<const unsigned char *>(args);
        for (uint64_t b = b0; b < b1; b++) {
            blockIdx.x = (unsigned)(b % d->grid[0]);
            blockIdx.y = (unsigned)(b / d->grid[0] % d->grid[1]);
            blockIdx.z = (unsigned)(b / d->grid[0] / d->grid[1]);
            for (unsigned z = 0; z < d->block[2]; z++)
                for (unsigned y = 0; y < d->block[1]; y++)
                    for (unsigned x = 0; x < d->block[0]; x++) {
                        threadIdx.x = x;
                        threadIdx.y = y;
                        threadIdx.z = z;
                        call(a, std::index_sequence_for<A...>{});
                    }
        }
    }

    static const simgpu_kernel_desc *describe(const char *name)
    {
        static const simgpu_kernel_desc desc = {
            SIMGPU_KERNEL_ABI, name, reinterpret_cast<const void *>(f), &trampoline,
            L::n, L::offsets.off, L::size, L::offsets.total,
        };
        return &desc;
    }
};

struct registrar {
    explicit registrar(const simgpu_kernel_desc *d) { simgpu_register_kernel(d); }
};

/* <<<>>> stand-in: SIMGPU_LAUNCH(k, grid, block, smem, stream)(args...) */
template <typename... A> struct launcher {
    void (*fn)(A...);
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
    template <typename... P> cudaError_t operator()(P &&...p) const
    {
        std::tuple<std::decay_t<A>...> vals(std::forward<P>(p)...);
        return std::apply(
            [this](auto &...v) {
                void *argv[sizeof...(A) ? sizeof...(A) : 1] = { static_cast<void *>(&v)... };
                return cudaLaunchKernel(reinterpret_cast<const void *>(fn), grid, block, argv, smem, stream);
            },
            vals);
    }
};
template <typename... A>
launcher<A...> make_launcher(void (*fn)(A...), dim3 g, dim3 b, size_t smem, cudaStream_t s)
{
    return launcher<A...>{ fn, g, b, smem, s };
}

} /* namespace simgpu */

#define SIMGPU_KERNEL_NAMED(fn, tag)                                                                     \
    static const ::simgpu::registrar simgpu_registrar_##tag(                                             \
        ::simgpu::kernel<decltype(&fn), &fn>::describe(#fn))
#define SIMGPU_KERNEL(fn) SIMGPU_KERNEL_NAMED(fn, fn)
#define SIMGPU_LAUNCH(fn, grid, block, smem, stream) ::simgpu::make_launcher(fn, (grid), (block), (smem), (stream))

#endif /* __CUDACC__ */
#endif /* SIMGPU_KERNEL_H */
