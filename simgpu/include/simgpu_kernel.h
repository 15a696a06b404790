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
 * __threadfence(_block, _system), clock64 (nanoseconds here, not cycles), __nanosleep, and what threads
 * of a block share: __shared__ variables, __syncthreads (and its _count,
 * _and, _or forms), __syncwarp, the __shfl_sync family (idx, up, down, xor,
 * with width), __ballot_sync, __any_sync, __all_sync, __activemask, and the
 * launch's dynamic shared memory.  The threads of a block run as
 * cooperative fibers on one host thread (a worker of the device process),
 * switched at each of those calls; a block runs on one worker from start to
 * end, so a __shared__ variable (a thread_local here) is the block's.
 *
 * Dynamic shared memory: CUDA's `extern __shared__ T s[];` names a symbol
 * g++ cannot define (it fails to link, "undefined reference to `s'");
 * write SIMGPU_DYNAMIC_SHARED(T, s); instead, which is exactly that
 * declaration under nvcc.
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
#define SIMGPU_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
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
/* A block runs on one worker thread from start to end: a thread_local is
 * the block's shared memory (uninitialised in CUDA; zero the first time
 * here, then whatever the worker's previous block left). */
#define __shared__ thread_local
#define SIMGPU_DYNAMIC_SHARED(type, name) type *const name = static_cast<type *>(simgpu_dynamic_shared())

inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;
static constexpr int warpSize = 32;

/* Each call below may switch to another thread of the block: threadIdx is
 * this thread's again when it returns (blockIdx, blockDim and gridDim are
 * the block's and do not change). */
namespace simgpu {
struct keep_thread_idx {
    uint3 saved = threadIdx;
    ~keep_thread_idx() { threadIdx = saved; }
};
template <typename T> inline uint64_t to_bits(T v)
{
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "simgpu: shuffles move up to 8 bytes");
    uint64_t b = 0;
    std::memcpy(&b, &v, sizeof(T));
    return b;
}
template <typename T> inline T from_bits(uint64_t b)
{
    T v;
    std::memcpy(&v, &b, sizeof(T));
    return v;
}
template <typename T> inline T shfl(unsigned mask, T v, int kind, int arg, int width)
{
    keep_thread_idx k;
    return from_bits<T>(simgpu_shfl(mask, to_bits(v), kind, arg, width));
}
} /* namespace simgpu */

inline void __syncthreads(void)
{
    simgpu::keep_thread_idx k;
    simgpu_syncthreads();
}
inline int __syncthreads_count(int pred)
{
    simgpu::keep_thread_idx k;
    int n;
    return simgpu_syncthreads_count(pred, &n);
}
inline int __syncthreads_and(int pred)
{
    simgpu::keep_thread_idx k;
    int n;
    return simgpu_syncthreads_count(pred, &n) == n;
}
inline int __syncthreads_or(int pred)
{
    simgpu::keep_thread_idx k;
    int n;
    return simgpu_syncthreads_count(pred, &n) != 0;
}
inline void __syncwarp(unsigned mask = 0xffffffffu)
{
    simgpu::keep_thread_idx k;
    simgpu_syncwarp(mask);
}
inline unsigned __ballot_sync(unsigned mask, int pred)
{
    simgpu::keep_thread_idx k;
    return simgpu_ballot(mask, pred);
}
inline int __any_sync(unsigned mask, int pred) { return (__ballot_sync(mask, pred) & mask) != 0; }
inline int __all_sync(unsigned mask, int pred)
{
    /* lanes of mask that exited do not vote */
    unsigned live = mask & simgpu_activemask();
    return (__ballot_sync(mask, pred) & live) == live;
}
inline unsigned __activemask(void) { return simgpu_activemask(); }
template <typename T> inline T __shfl_sync(unsigned mask, T v, int src, int width = warpSize)
{
    return simgpu::shfl(mask, v, SIMGPU_SHFL_IDX, src, width);
}
template <typename T> inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = warpSize)
{
    return simgpu::shfl(mask, v, SIMGPU_SHFL_UP, (int)delta, width);
}
template <typename T> inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = warpSize)
{
    return simgpu::shfl(mask, v, SIMGPU_SHFL_DOWN, (int)delta, width);
}
template <typename T> inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = warpSize)
{
    return simgpu::shfl(mask, v, SIMGPU_SHFL_XOR, lane_mask, width);
}

/* ThreadSanitizer does not model a standalone fence (GCC refuses it under
 * -fsanitize=thread): there, a sequentially consistent read-modify-write
 * of one shared word stands in for it. */
#if defined(__SANITIZE_THREAD__)
inline void simgpu_fence(void)
{
    static int word;
    __atomic_fetch_add(&word, 0, __ATOMIC_SEQ_CST);
}
#else
inline void simgpu_fence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
#endif
inline void __threadfence(void) { simgpu_fence(); }
inline void __threadfence_block(void) { simgpu_fence(); }
inline void __threadfence_system(void) { simgpu_fence(); }
inline long long clock64(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}
/* CUDA's: the thread sleeps about ns (at most 1 ms), leaving its CPU to
 * others here as it leaves its SM's issue slots to other warps there. */
inline void __nanosleep(unsigned ns)
{
    struct timespec ts = { 0, (long)(ns < 1000000u ? ns : 1000000u) };
    nanosleep(&ts, NULL);
}

/* ---- atomics: one template per operation, instantiated for the CUDA types */
namespace simgpu {
template <typename T> using atomic_int_t = std::enable_if_t<
    std::is_same_v<T, int> || std::is_same_v<T, unsigned> || std::is_same_v<T, unsigned long long>, T>;
/* Under SIMGPU_HMM an atomic on a file page is fatal, as on hardware. */
inline void hmm_check(const void *p)
{
    if (__builtin_expect(__atomic_load_n(&simgpu_hmm_active, __ATOMIC_RELAXED), 0))
        simgpu_hmm_atomic_check(p);
}
}

template <typename T> inline simgpu::atomic_int_t<T> atomicAdd(T *p, T v) { simgpu::hmm_check(p); return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
template <typename T> inline simgpu::atomic_int_t<T> atomicSub(T *p, T v) { simgpu::hmm_check(p); return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }
template <typename T> inline simgpu::atomic_int_t<T> atomicAnd(T *p, T v) { simgpu::hmm_check(p); return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); }
template <typename T> inline simgpu::atomic_int_t<T> atomicOr(T *p, T v) { simgpu::hmm_check(p); return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
template <typename T> inline simgpu::atomic_int_t<T> atomicXor(T *p, T v) { simgpu::hmm_check(p); return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST); }
template <typename T> inline simgpu::atomic_int_t<T> atomicExch(T *p, T v) { simgpu::hmm_check(p); return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
template <typename T> inline simgpu::atomic_int_t<T> atomicCAS(T *p, T expected, T desired)
{
    simgpu::hmm_check(p);
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expected;    /* the old value, whether or not it was swapped */
}
template <typename T> inline simgpu::atomic_int_t<T> atomicMin(T *p, T v)
{
    simgpu::hmm_check(p);
    T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (v < old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        ;
    return old;
}
template <typename T> inline simgpu::atomic_int_t<T> atomicMax(T *p, T v)
{
    simgpu::hmm_check(p);
    T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (v > old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        ;
    return old;
}
inline float atomicAdd(float *p, float v)
{
    simgpu::hmm_check(p);
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
    simgpu::hmm_check(p);
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

    /* One thread: the simulator runs a block's threads as fibers. */
    static void thread(const void *args, const simgpu_thread_ids *ids)
    {
        threadIdx.x = ids->thread[0];
        threadIdx.y = ids->thread[1];
        threadIdx.z = ids->thread[2];
        blockIdx.x = ids->block[0];
        blockIdx.y = ids->block[1];
        blockIdx.z = ids->block[2];
        blockDim = dim3(ids->block_dim[0], ids->block_dim[1], ids->block_dim[2]);
        gridDim = dim3(ids->grid_dim[0], ids->grid_dim[1], ids->grid_dim[2]);
        call(static_cast<const unsigned char *>(args), std::index_sequence_for<A...>{});
    }

    static const simgpu_kernel_desc *describe(const char *name)
    {
        static const simgpu_kernel_desc desc = {
            SIMGPU_KERNEL_ABI, name, reinterpret_cast<const void *>(f), nullptr,
            L::n, L::offsets.off, L::size, L::offsets.total, &thread,
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
