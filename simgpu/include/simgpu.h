/*
 * simgpu.h — the simulator's own small interface (not part of CUDA).
 *
 * Exported from libcuda.so.1: accounting queries and the kernel registry
 * that simgpu_kernel.h's SIMGPU_KERNEL() registrations feed.  Everything
 * else the simulator offers is reached through the real CUDA headers.
 */
#ifndef SIMGPU_H
#define SIMGPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Per-device accounting.  Counters only grow; they cover the whole life of
 * the process.  "transfers" count API-level copies, not bytes.  The last
 * two are gauges: what is allocated now (cuMemAlloc and cuMemCreate, and
 * cuMemAllocManaged), for leak checks. */
struct simgpu_stats {
    uint64_t htod_bytes, htod_transfers;   /* host -> device copies */
    uint64_t dtoh_bytes, dtoh_transfers;   /* device -> host copies */
    uint64_t dtod_bytes, dtod_transfers;   /* device -> device copies */
    uint64_t memset_bytes, memsets;        /* device memsets */
    uint64_t kernels_launched;             /* accepted by cuLaunchKernel* */
    uint64_t kernels_completed;            /* finished in the device process */
    uint64_t uvm_faults;                   /* managed-memory faults (UVM model: not yet) */
    uint64_t uvm_migrated_bytes;           /* bytes migrated by faults or prefetch */
    uint64_t device_bytes_in_use;          /* gauge: device memory allocated now */
    uint64_t managed_bytes_in_use;         /* gauge: managed memory allocated now */
    /* The modelled host<->device link (SIMGPU_BUS_GBPS, _LATENCY_US), by
     * direction (enum simgpu_bus_dir) and kind (enum simgpu_bus_kind):
     * bytes moved, transfers, and the link time charged for them (latency
     * + bytes / rate, summed; 0 with the bus off).  bus_wait_ns: time
     * transfers waited for the link while others held it. */
    uint64_t bus_bytes[2][4];
    uint64_t bus_transfers[2][4];
    uint64_t bus_ns[2][4];
    uint64_t bus_wait_ns[2];
    uint64_t uvm_fault_batches;            /* device fault batches serviced (up to 256 faults each) */
    uint64_t uvm_evictions;                /* 2 MiB chunks evicted from the device to make room */
    uint64_t uvm_evicted_bytes;            /* bytes those evictions moved back to the host */
    uint64_t uvm_device_resident_bytes;    /* gauge: managed bytes resident on the device now */
    uint64_t uvm_remote_bytes;             /* managed bytes kernels reached on the host without migrating (advice) */
    uint64_t uvm_device_faults;            /* of uvm_faults, those of kernels (what CUPTI reports as GPU page faults) */
    /* Copies the host makes itself (pageable memory, synchronous): at a
     * gate in stream order, or at once on a stream with nothing pending. */
    uint64_t host_copies_gated;
    uint64_t host_copies_at_once;
};

enum simgpu_bus_dir { SIMGPU_BUS_HTOD = 0, SIMGPU_BUS_DTOH = 1 };
enum simgpu_bus_kind {
    SIMGPU_BUS_COPY = 0,        /* cuMemcpy* between host and device memory */
    SIMGPU_BUS_MIGRATION = 1,   /* managed memory moved by a fault or a prefetch */
    SIMGPU_BUS_EVICTION = 2,    /* managed memory pushed back to the host when the device is full */
    SIMGPU_BUS_HOST_ACCESS = 3, /* kernels reading or writing host memory */
};

/* Copy device `device`'s counters into *out.  Returns 0, -EINVAL for a bad
 * device or NULL out, -ENODEV before cuInit has started the devices. */
int simgpu_stats_get(int device, struct simgpu_stats *out);

/* The device's managed-memory faults, one record per faulting 64 KiB block
 * that migrated to the device: what CUPTI's unified-memory GPU_PAGE_FAULT
 * counter reports on a real GPU (the simulator's libcupti.so reads them
 * here).  Recorded only while enabled, in a ring of 65536 per device. */
struct simgpu_fault {
    uint64_t address;           /* first byte of the faulting block */
    uint64_t start_ns, end_ns;  /* CLOCK_MONOTONIC: the fault was serviced in between */
    uint32_t access;            /* 1 read, 2 write */
    uint32_t device;
};
/* Start (on != 0) or stop recording on every device. -ENODEV before cuInit. */
int simgpu_fault_log_enable(int on);
/* A profiler's own device memory (libcupti's start-up): `bytes` of the
 * current context's device (without one, of each device whose primary
 * context is active), kept for the process. Without room it fails
 * as CUPTI's did on an H200: -ENOMEM, and from then on a kernel's fault on
 * managed memory is not served (the kernel ends in
 * CUDA_ERROR_ILLEGAL_ADDRESS, the context's sticky error), while kernels
 * reading device or registered host memory run. -ENODEV without any
 * context. */
int simgpu_profiler_reserve(size_t bytes);
/* Copies up to max records of `device` from *cursor (0 at first; advanced
 * past what was returned) into out; *dropped grows by the records the ring
 * overwrote before they were read.  Returns the count or -errno. */
int simgpu_fault_log_read(int device, uint64_t *cursor, struct simgpu_fault *out, unsigned max,
                          uint64_t *dropped);

/* ---- kernel registry (filled by SIMGPU_KERNEL, see simgpu_kernel.h) ---- */

#define SIMGPU_KERNEL_ABI 2
#define SIMGPU_MAX_KERNEL_PARAMS 64
#define SIMGPU_MAX_ARGS_BYTES 4096

/* Grid and block of one launch, as the trampoline needs them. */
struct simgpu_launch_dims {
    unsigned grid[3];
    unsigned block[3];
};

/* Runs blocks [block_begin, block_end) (linear block index, x fastest) of
 * one launch, every thread of each block, with the packed argument buffer
 * `args` laid out as the descriptor says. */
typedef void (*simgpu_trampoline_fn)(const void *args, const struct simgpu_launch_dims *dims,
                                     uint64_t block_begin, uint64_t block_end);

/* The ids of one thread of a launch, as the per-thread entry needs them. */
struct simgpu_thread_ids {
    unsigned thread[3], block[3];
    unsigned block_dim[3], grid_dim[3];
};

/* Runs one thread of a launch.  Kernels compiled through simgpu_kernel.h
 * register this form: the simulator runs the threads of a block as
 * cooperative fibers on one worker, so __syncthreads, warp shuffles and
 * votes, and __shared__ memory (per worker, so per block) work. */
typedef void (*simgpu_thread_fn)(const void *args, const struct simgpu_thread_ids *ids);

/* Exactly one of `trampoline` (a C kernel that runs whole blocks itself and
 * never waits at a barrier) and `thread` is set. */
struct simgpu_kernel_desc {
    unsigned abi;                 /* SIMGPU_KERNEL_ABI */
    const char *name;             /* source name, for cuFuncGetName */
    const void *func;             /* host address of the kernel: the CUfunction */
    simgpu_trampoline_fn trampoline;
    unsigned nparams;
    const unsigned *param_offset; /* nparams entries */
    const unsigned *param_size;   /* nparams entries */
    unsigned args_bytes;          /* size of the packed argument buffer */
    simgpu_thread_fn thread;
};

/* Register a kernel.  Called from static constructors, so it must work
 * before cuInit.  Kernels registered after cuInit started the device
 * processes live in code those processes may not have: launching them
 * fails with CUDA_ERROR_INVALID_HANDLE.  Returns 0 or -errno. */
int simgpu_register_kernel(const struct simgpu_kernel_desc *desc);
/* The CUkernel handle of a registered kernel's host stub (what the
 * simulator's runtime launches with, like cudart 13), or NULL. */
void *simgpu_kernel_handle(const void *stub);

/* ---- what a thread of a `thread` kernel calls (simgpu_kernel.h wraps them
 * as CUDA's intrinsics).  Each suspends the calling fiber until the threads
 * it waits for arrive; a wait no thread can end fails the launch
 * (CUDA_ERROR_LAUNCH_FAILED) instead of hanging.  Called outside a `thread`
 * kernel they abort with a message. */
void simgpu_syncthreads(void);
/* __syncthreads_count: the number of the block's threads (still running)
 * whose `pred` is non-zero; *participants gets how many met there. */
int simgpu_syncthreads_count(int pred, int *participants);
/* __syncwarp(mask): waits for the lanes of `mask` (of the caller's warp)
 * that have not exited. */
void simgpu_syncwarp(unsigned mask);
enum simgpu_shfl_kind { SIMGPU_SHFL_IDX, SIMGPU_SHFL_UP, SIMGPU_SHFL_DOWN, SIMGPU_SHFL_XOR };
/* The __shfl_*_sync family on a value of up to 8 bytes. */
uint64_t simgpu_shfl(unsigned mask, uint64_t value, int kind, int arg, int width);
/* __ballot_sync: bit l set when lane l of `mask` passed a non-zero pred. */
unsigned simgpu_ballot(unsigned mask, int pred);
/* __activemask: the lanes of the caller's warp that have not exited. */
unsigned simgpu_activemask(void);
/* The launch's dynamic shared memory (sharedMemBytes), per block. */
void *simgpu_dynamic_shared(void);

/* The HMM profile (SIMGPU_HMM=1): non-zero once a kernel reached a host
 * file mapping without registration; kernels' atomics then call
 * simgpu_hmm_atomic_check, which fails the launch (illegal address) for an
 * atomic on such a file page, as on hardware. */
extern int simgpu_hmm_active;
void simgpu_hmm_atomic_check(const void *p);

#ifdef __cplusplus
}
#endif

#endif /* SIMGPU_H */
