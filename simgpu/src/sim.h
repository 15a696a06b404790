/*
 * sim.h — internal interface of the simulated GPU (libcuda.so.1).
 *
 * Layout of one simulated device (see simgpu/README.md for the picture):
 *   - a memfd holding device memory [0, mem_bytes) and the managed area
 *     [mem_bytes, mem_bytes + managed_bytes) (managed_bytes: host RAM);
 *   - the device window: that memfd mapped MAP_SHARED at one address in the
 *     host *before* the device process is forked, so both processes have it
 *     at the same virtual address.  The host keeps the device part PROT_NONE
 *     (a host dereference of a cuMemAlloc pointer faults, as on hardware);
 *     the device process opens it read-write;
 *   - a host-private "shadow" mapping of the device part at another address,
 *     used only by the simulator's copy code (the DMA engine);
 *   - a shared control block (struct sim_shared): command ring, stream and
 *     event tables, copy gates, counters, one robust process-shared mutex.
 *
 * Internal functions return 0 or -errno; the cu* entry points translate.
 */
#ifndef SIMGPU_SIM_H
#define SIMGPU_SIM_H

#include <cuda.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "simgpu.h"

#define SIM_MAX_DEVICES 8
#define SIM_MAX_STREAMS 256     /* per device, slot 0 is the legacy stream */
#define SIM_MAX_EVENTS 4096     /* per device */
#define SIM_RING_SLOTS 128
#define SIM_MAX_GATES 64
#define SIM_MEM_ALIGN 512       /* cuMemAlloc alignment */

#define SIM_STREAM_LEGACY_SLOT 0u
#define SIM_STREAM_CONTROL_SLOT (SIM_MAX_STREAMS - 1u)  /* non-blocking, for SIM_OP_VMM */
#define SIM_STREAM_NONBLOCKING 0x1u   /* CU_STREAM_NON_BLOCKING */

/* ---- environment knobs (env.c: one table) ---- */
struct sim_env {
    unsigned long mem_mb;   /* SIMGPU_MEM_MB */
    unsigned devices;       /* SIMGPU_DEVICES */
    unsigned workers;       /* SIMGPU_WORKERS: device worker threads per device */
    bool stats;             /* SIMGPU_STATS */
    unsigned long uvm_fault_us; /* SIMGPU_UVM_FAULT_US: modelled cost of one UVM fault */
    bool hmm;                   /* SIMGPU_HMM: pageable memory access (hostmem.c) */
    unsigned long bus_gbps;     /* SIMGPU_BUS_GBPS: link rate per direction, 0 = no bus model */
    unsigned long bus_latency_us; /* SIMGPU_BUS_LATENCY_US: per-transfer cost on the link */
};
void sim_env_load(struct sim_env *env);

/* ---- commands sent to the device process ---- */
enum sim_op_kind {
    SIM_OP_NOP = 0,
    SIM_OP_KERNEL,
    SIM_OP_MEMSET,
    SIM_OP_DTOD,
    SIM_OP_EVENT_RECORD,
    SIM_OP_WAIT,        /* wait until another stream completed a given seq */
    SIM_OP_HOST_GATE,   /* a host-side copy occupies this place in the stream */
    SIM_OP_PREFETCH,    /* migrate managed blocks in bulk (no fault cost) */
    SIM_OP_VMM,         /* change the device process's mappings (vmm.c) */
    SIM_OP_HOSTMEM,     /* host memory kernels may use (hostmem.c); args: a path */
};

struct sim_op {
    uint64_t seq;           /* global submission order on this device, from 1 */
    uint32_t kind;
    uint32_t stream;        /* stream slot */
    union {
        struct {
            simgpu_trampoline_fn trampoline;   /* whole blocks (C kernels) ... */
            simgpu_thread_fn thread;           /* ... or one thread (fibers.c) */
            const char *name;                  /* for messages (same address in the device) */
            struct simgpu_launch_dims dims;
            uint32_t args_bytes;
        } kernel;
        struct { uint64_t dst; uint32_t value; uint32_t elem_bytes; uint64_t count; } memset;
        struct { uint64_t dst, src, bytes; } copy;
        struct { uint32_t event; } record;
        struct { uint32_t stream; uint64_t seq; } wait;
        struct { uint32_t gate; } gate;
        struct { uint64_t addr, bytes; uint32_t to_device; } prefetch;   /* 0, 1 or SIM_PREFETCH_DISCARD */
        struct { uint32_t action; int32_t prot; uint64_t addr, bytes, memfd_off; uint32_t args_bytes; } vmm;
    } u;
    _Alignas(16) unsigned char args[SIMGPU_MAX_ARGS_BYTES];
};

struct sim_stream_slot {
    uint32_t in_use;
    uint32_t flags;             /* SIM_STREAM_NONBLOCKING */
    uint64_t submitted_seq;     /* host: seq of the last op submitted */
    uint64_t completed_seq;     /* device: seq of the last op completed */
    uint64_t host_copy_seq;     /* host: seq of a copy the host is making without a gate, 0 = none
                                   (queue.c): the stream's later ops, and those that follow
                                   the stream by the default-stream rules, wait for it */
};

struct sim_event_slot {
    uint32_t in_use;
    uint32_t flags;             /* CU_EVENT_* */
    uint32_t stream;            /* slot of the stream of the last record */
    uint64_t seq;               /* seq of the last record, 0 = never recorded */
    uint64_t time_ns;           /* CLOCK_MONOTONIC when that record ran */
};

enum sim_gate_state { GATE_FREE = 0, GATE_ARMED, GATE_REACHED, GATE_RELEASED };

/* Shared between the host process and one device process. */
struct sim_shared {
    pthread_mutex_t lock;       /* robust, process-shared: guards everything below */
    pthread_cond_t dev_cv;      /* device workers wait here */
    pthread_cond_t host_cv;     /* host threads wait here */
    uint64_t next_seq;
    uint64_t ring_head, ring_tail;  /* ring[head % N .. tail % N) not yet taken */
    int32_t sticky_error;       /* CUresult, set by the device on a kernel fault */
    int32_t uvm_lost;           /* a profiler's start failed: managed faults are not served */
    int32_t vmm_result;         /* 0 or -errno of the last SIM_OP_VMM */
    uint64_t in_the_way[2];     /* a refused HOSTMEM_PROBE: the device's mapping there */
    int32_t device_ready;
    uint32_t host_copy_waited;  /* a device op waited for a host_copy_seq: its end wakes dev_cv */
    uint32_t seq_waiters;       /* host threads waiting for a completed_seq (queue.c) */
    uint32_t gates[SIM_MAX_GATES];
    struct sim_stream_slot streams[SIM_MAX_STREAMS];
    struct sim_event_slot events[SIM_MAX_EVENTS];
    struct simgpu_stats stats;  /* updated with __atomic builtins */
    uint64_t bus_free_ns[2];    /* bus.c: CLOCK_MONOTONIC ns when each direction's link is next free */
    struct sim_op ring[SIM_RING_SLOTS];
};

/* ---- host-side allocator over one area (alloc.c) ---- */
struct sim_extent { uint64_t off, size, bytes; };   /* size: aligned; bytes: asked for */
struct sim_alloc {
    uint64_t area_bytes;
    uint64_t align;             /* of every extent */
    uint64_t used_bytes;
    uint64_t *mirror;           /* if set, used_bytes is copied there (atomically) */
    struct sim_extent *v;       /* sorted by off */
    size_t n, cap;
};
int sim_alloc_get(struct sim_alloc *a, uint64_t size, uint64_t *off);
int sim_alloc_get_at(struct sim_alloc *a, uint64_t off, uint64_t size);   /* -EEXIST if taken */
int sim_alloc_put(struct sim_alloc *a, uint64_t off);
/* The extent containing [off, off+len), or NULL. */
const struct sim_extent *sim_alloc_find(const struct sim_alloc *a, uint64_t off, uint64_t len);
void sim_alloc_destroy(struct sim_alloc *a);

/* How a host copy crosses the bus: at the pinned or the pageable rate, or
 * not at all (managed memory on either side: the migrations its faults
 * cause are what crosses). */
enum sim_copy_charge { SIM_CHARGE_PINNED, SIM_CHARGE_PAGEABLE, SIM_CHARGE_NONE };

/* ---- one simulated device, host side ---- */
struct sim_context {
    uint32_t magic;             /* SIM_CTX_MAGIC */
    int ordinal;
    int refcount;               /* primary context retains */
    unsigned flags;
};
#define SIM_CTX_MAGIC 0x43545853u   /* "SXTC" */

struct sim_device {
    int ordinal;
    uint64_t mem_bytes;         /* device memory */
    uint64_t managed_bytes;     /* the managed area: as large as host memory */
    uint64_t window_bytes;      /* device memory + managed area */
    unsigned char *window;      /* same address in host and device process */
    unsigned char *shadow;      /* host-only RW view of the device part */
    int memfd;
    pid_t pid;
    bool dead;
    struct sim_shared *sh;
    pthread_mutex_t alloc_lock;  /* guards the two allocators */
    struct sim_alloc device_mem, managed_mem;
    struct sim_context ctx;
    struct sim_uvm *uvm;        /* shared UVM state of the managed area */
    /* host copy engine (queue.c): asynchronous copies to/from pinned host
     * memory, one per gate, guarded by sh->lock */
    struct sim_copy_job {
        void *dst;
        const void *src;
        size_t n;
        CUhostFn fn;            /* a host function (cuLaunchHostFunc) instead of a copy */
        void *data;
        enum simgpu_bus_dir dir;    /* of a copy: which engine moves it */
        enum sim_copy_charge charge;
        bool pending;
    } copy_jobs[SIM_MAX_GATES];
    /* queue.c's host threads, [SIMGPU_BUS_HTOD], [SIMGPU_BUS_DTOH] copy
     * engines and [2] the callback thread; guarded by its engine_lock */
    bool engine_started[3];
};

struct sim_global {
    bool initialized;
    int init_result;            /* CUresult of the one cuInit */
    struct sim_env env;
    int ndevices;
    struct sim_device dev[SIM_MAX_DEVICES];
};
extern struct sim_global sim;

/* devproc.c: create devices and their processes (called once by cuInit). */
int sim_devices_start(void);
/* executor.c: body of the device process; never returns. */
void sim_device_main(struct sim_device *d) __attribute__((noreturn));
/* Device process: start a thread on stack `index` of the device stack area. */
int sim_spawn_device_thread(unsigned index, void *(*fn)(void *), void *arg);

/* shared.c: locking and waiting on the control block. */
int sim_lock(struct sim_device *d);             /* 0 or -EPIPE (device died) */
void sim_unlock(struct sim_device *d);
int sim_host_wait(struct sim_device *d);        /* cond wait with liveness check */
int sim_shared_init(struct sim_shared *sh);

/* queue.c: host-side submission. */
struct sim_stream {
    uint32_t magic;             /* SIM_STREAM_MAGIC */
    int ordinal;
    uint32_t slot;
    unsigned flags;
    int priority;
};
#define SIM_STREAM_MAGIC 0x4d525453u
struct sim_event {
    uint32_t magic;             /* SIM_EVENT_MAGIC */
    int ordinal;
    uint32_t slot;
    unsigned flags;
};
#define SIM_EVENT_MAGIC 0x544e5645u

/* Resolve a CUstream (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD or a
 * handle) to (device, slot).  `ptds` says the API variant was _ptsz/_ptds,
 * which makes NULL mean the per-thread stream. */
CUresult sim_stream_resolve(CUstream s, bool ptds, struct sim_device **d, uint32_t *slot);
/* Append op (kind, stream, u, args filled by the caller) and stamp its seq. */
int sim_submit(struct sim_device *d, struct sim_op *op, uint64_t *seq_out);
int sim_wait_seq(struct sim_device *d, uint32_t slot, uint64_t seq);
int sim_stream_sync(struct sim_device *d, uint32_t slot);
int sim_device_sync(struct sim_device *d);
int sim_slot_alloc_stream(struct sim_device *d, unsigned flags, uint32_t *slot);
void sim_slot_free_stream(struct sim_device *d, uint32_t slot);
int sim_slot_alloc_event(struct sim_device *d, unsigned flags, uint32_t *slot);
void sim_slot_free_event(struct sim_device *d, uint32_t slot);
/* A change of the device process's mappings (kind SIM_OP_VMM or
 * SIM_OP_HOSTMEM, with the fields of op.u.vmm and `args` copied into
 * op.args), run and waited for; returns 0 or -errno (the device's answer,
 * or the channel's error). */
int sim_control_op(struct sim_device *d, uint32_t kind, uint32_t action, uint64_t addr, uint64_t bytes,
                   uint64_t memfd_off, int prot, const void *args, size_t args_bytes);
/* Host copy in stream order: gate the stream, copy, release; charged on
 * the link of `dir` as `charge` says. */
int sim_gated_host_copy(struct sim_device *d, uint32_t slot, void *dst, const void *src, size_t n,
                        enum simgpu_bus_dir dir, enum sim_copy_charge charge);
/* The same for pinned memory, but returns once the copy is queued: the
 * device's host copy engine of that direction copies when the stream
 * reaches the gate. */
int sim_async_host_copy(struct sim_device *d, uint32_t slot, void *dst, const void *src, size_t n,
                        enum simgpu_bus_dir dir, enum sim_copy_charge charge);

/* pinned.c: page-locked host memory (cuMemAllocHost/HostAlloc/HostRegister). */
struct sim_pinned {
    uint64_t base, bytes;
    unsigned flags;             /* CU_MEMHOSTALLOC_* or CU_MEMHOSTREGISTER_* */
    bool allocated;             /* by cuMemAllocHost/cuMemHostAlloc, not registered */
    bool reachable;             /* registered: kernels can dereference it (hostmem.c) */
};
/* True if [p, p+len) lies inside one pinned range (then *out, if given, is it). */
bool sim_pinned_find(uint64_t p, uint64_t len, struct sim_pinned *out);

/* memory.c: pointers. */
enum sim_ptr_kind { SIM_PTR_HOST = 0, SIM_PTR_DEVICE, SIM_PTR_MANAGED };
/* Classify [p, p+len).  For device or managed memory, *d is the device and
 * *hostview the address the host's copy code may use.  Returns the kind,
 * or -EINVAL when p is inside a window but the range is not allocated. */
int sim_ptr_classify(uint64_t p, uint64_t len, struct sim_device **d, unsigned char **hostview);

/* A CUDA array's elements in device memory (array.c): where they start,
 * bytes a row (rounded up), rows a plane, planes, and the bytes of a
 * row's elements.  CUDA_ERROR_INVALID_HANDLE for no live array. */
struct sim_array_layout {
    CUdeviceptr base;
    size_t pitch, rows, planes, row_bytes;
};
CUresult sim_array_side(CUarray h, struct sim_array_layout *out);

/* api_context.c */
CUresult sim_check_init(void);
/* sim_check_init, then CUDA_ERROR_INVALID_DEVICE for an ordinal no device has. */
CUresult sim_check_device(CUdevice dev);
/* Device of the calling thread's current context (errors: not initialized,
 * invalid context, sticky device error). */
CUresult sim_current_device(struct sim_device **d);
CUresult sim_errno_to_cu(int err);

/* uvm.c: managed memory as UVM — each 64 KiB block resident on one side. */
#define SIM_UVM_BLOCK (64u << 10)
#define SIM_UVM_CHUNK (2u << 20)    /* eviction unit: 32 blocks */
#define SIM_PREFETCH_DISCARD 2u     /* freed blocks go home without a transfer */
/* Where the host publishes device memory in use by explicit allocations
 * (bounds how much managed memory may be resident on the device). */
uint64_t *sim_uvm_device_allocated(struct sim_device *d);
/* The managed bytes resident on the device now (a gauge). */
uint64_t sim_uvm_device_resident(const struct sim_device *d);
struct sim_uvm;
int sim_uvm_create(struct sim_device *d);          /* before the fork */
int sim_uvm_start_host(void);                      /* host service threads + SIGSEGV handler */
void sim_uvm_start_device(struct sim_device *d);   /* in the device process */
/* Device process: a fault at addr; true if it was a managed block (now
 * migrated to the device, the access may retry). */
bool sim_uvm_device_fault(struct sim_device *d, uintptr_t addr, void *ucontext);
/* The device fault log read by the profiling interface (simgpu_fault_log_*). */
void sim_uvm_fault_log_enable(struct sim_device *d, bool on);
/* Device process: a kernel's fault on a page of host memory it reaches
 * through HMM (hostmem.c), logged as a managed block's fault is (the
 * GPU's fault path serves both through the same blocks); start_ns from
 * sim_uvm_clock_ns.  Async-signal-safe. */
void sim_uvm_log_host_fault(struct sim_device *d, uintptr_t page, bool write, uint64_t start_ns);
uint64_t sim_uvm_clock_ns(void);
unsigned sim_uvm_fault_log_read(struct sim_device *d, uint64_t *cursor, struct simgpu_fault *out,
                                unsigned max, uint64_t *dropped);
/* Host: cuMemAdvise SET/UNSET_READ_MOSTLY. */
enum { SIM_ADVISE_READ_MOSTLY = 1, SIM_ADVISE_PREFER_HOST = 2, SIM_ADVISE_PREFER_DEVICE = 4,
       SIM_ADVISE_ACCESSED_BY = 8 };
void sim_uvm_set_advice(struct sim_device *d, uint64_t addr, uint64_t bytes, unsigned bit, bool on);
/* Device process: no kernel runs; close the remote mappings kernels opened. */
void sim_uvm_device_quiesce(struct sim_device *d);
/* Device process: migrate the blocks of [addr, addr+bytes) without fault cost. */
void sim_uvm_prefetch(struct sim_device *d, uint64_t addr, uint64_t bytes, unsigned how);

/* vmm.c: cuMemAddressReserve/Create/Map/SetAccess/Unmap/Release/AddressFree. */
enum sim_vmm_action { VMM_RESERVE = 1, VMM_MAP, VMM_PROTECT, VMM_UNMAP, VMM_FREE };
/* Before the fork: the VA arena reservations are carved from, PROT_NONE in
 * the host and so, inherited, in every device process. */
int sim_vmm_arena_init(void);
/* Device process: a thread stack carved from the arena's tail, so the
 * device process's own threads never sit where the host may later be asked
 * to honour an address hint.  Returns NULL past the last one. */
void *sim_vmm_device_stack(unsigned index, size_t *bytes);
/* Worker `slot`'s fiber area in the device process (PROT_NONE until its
 * pieces are opened), SIM_FIBER_AREA_BYTES long, or NULL past the last. */
void *sim_vmm_fiber_area(unsigned slot);
#define SIM_FIBER_SLOTS 64u                     /* workers that run kernels, at most */
#define SIM_FIBER_MAX 1024u                     /* threads per block */
#define SIM_FIBER_STACK_BYTES (256ul << 10)     /* per thread, a guard page included */
#define SIM_FIBER_HEAD_BYTES (2ul << 20)        /* dynamic shared memory, warp slots, state */
#define SIM_FIBER_AREA_BYTES (SIM_FIBER_HEAD_BYTES + (uint64_t)SIM_FIBER_MAX * SIM_FIBER_STACK_BYTES)

/* graph.c: a captured call, replayed by cuGraphLaunch */
enum sim_gnode_kind { SIM_GNODE_KERNEL, SIM_GNODE_COPY, SIM_GNODE_MEMSET, SIM_GNODE_HOST };
struct sim_gnode {
    int kind;
    CUfunction func;                    /* kernel: function, dims, packed arguments */
    struct simgpu_launch_dims dims;
    unsigned smem;
    unsigned char *args;                /* malloc'd; owned by the graph */
    uint32_t args_bytes;
    CUdeviceptr dst, src;               /* copy (unified addresses) and memset */
    size_t bytes;
    uint32_t value, elem;
    size_t count;
    CUhostFn fn;                        /* host function */
    void *data;
};
/* Called by each stream op before it is issued on `s`: records it when `s`
 * captures (*captured; `node` is then the graph's, its args taken), or
 * refuses it as CUDA does during a capture (graph.c's comment).
 * `sync_form`: a synchronous API form (potentially unsafe during capture). */
CUresult sim_capture_op(CUstream s, bool ptds, bool sync_form, struct sim_gnode *node, bool *captured);
/* Whether any capture runs (a hint, read without a lock). */
bool sim_capture_active(void);
/* A sync or query of `s` (NULL/legacy: of the device). */
CUresult sim_capture_sync(CUstream s, bool ptds);
/* cuCtxSynchronize, cuMemAlloc/Free and the like. */
CUresult sim_capture_unsafe_call(void);
/* queue.c: run fn(data) on the device's callback thread when `slot` reaches it. */
int sim_host_func(struct sim_device *d, uint32_t slot, CUhostFn fn, void *data);

/* fibers.c (device process): runs one block of a `thread` kernel, its
 * threads as cooperative fibers.  0, or -EDEADLK when threads wait at
 * barriers none can pass (a message is logged), -ENOSPC past the fiber
 * slots.  A fault inside leaves through sim_fiber_escape(). */
int sim_fiber_run_block(simgpu_thread_fn fn, const void *args, const struct simgpu_thread_ids *ids,
                        const char *kernel);
/* Called by the fault handler before it leaves a kernel by siglongjmp: if
 * the fault was on a fiber, the sanitizers are told the worker's stack is
 * current again and the block's fibers are dropped. */
void sim_fiber_escape(void);
/* Device process: carry out one SIM_OP_VMM; returns 0 or -errno. */
/* In the device process, at its start: the host's shared file mappings
 * it inherited become inaccessible (vmm.c). */
void sim_vmm_close_host_files(void);
/* Device process: [a, a+n) holds nothing of its own, only what it
 * inherited from the host and does not use (or nothing at all). */
bool sim_vmm_only_host_leftovers(uint64_t a, uint64_t n);
/* Device process, at its start: fill the host's mmap area with PROT_NONE
 * leftovers, so its own later mappings do not take the host's next
 * addresses. */
void sim_vmm_fence_host_area(void);
/* The device's own mapping found in the way by the last refusal. */
extern uint64_t sim_vmm_in_the_way[2];
/* At cuInit: the host address ranges mapped then. The real driver does not
 * place a reservation over any of them, even once they are unmapped (seen
 * on an H200, driver 580: a file mapped before cuInit never got a
 * reservation at its address; one mapped after did). */
void sim_vmm_note_init_layout(void);
int sim_vmm_device_op(struct sim_device *d, const struct sim_op *op);
/* Host: 1 and the device and host view of the mapping holding [p, p+len);
 * 0 if p is in no reservation; -EINVAL if it is, but not all mapped. */
int sim_vmm_find(uint64_t p, uint64_t len, struct sim_device **d, unsigned char **hostview);

/* registry.c */
const struct simgpu_kernel_desc *sim_kernel_find(const void *func);
/* The kernel a CUkernel handle names (the handle is its descriptor's
 * address, never its host stub's), or NULL. */
const struct simgpu_kernel_desc *sim_kernel_of_handle(const void *handle);
/* The kernel registered under `name` (its source name, or an Itanium
 * mangled name _Z<len><name>... of a free function), most recent first;
 * NULL if none. */
const struct simgpu_kernel_desc *sim_kernel_find_by_name(const char *name);
void sim_registry_seal(void);   /* called at fork: later registrations are not launchable */

/* bus.c: the host<->device link of one device.  sim_bus_reserve books a
 * transfer on the direction's link (after whatever holds it), counts it,
 * and returns when it starts and ends (CLOCK_MONOTONIC ns; both 0 with the
 * bus off).  `pageable`: staged through a bounce buffer, at half the rate.
 * sim_bus_wait_until returns at that time.  Both are async-signal-safe. */
struct sim_bus_slot { uint64_t start_ns, end_ns; };
struct sim_bus_slot sim_bus_reserve(struct sim_device *d, enum simgpu_bus_dir dir, enum simgpu_bus_kind kind,
                                    uint64_t bytes, bool pageable);
void sim_bus_wait_until(uint64_t ns);
/* A kernel's load or store of host memory: `bytes` at the link rate,
 * pipelined (no per-transfer latency), counted as host access. */
struct sim_bus_slot sim_bus_reserve_access(struct sim_device *d, enum simgpu_bus_dir dir, uint64_t bytes);
/* Reserve and wait until the transfer ends (for callers that move no bytes
 * themselves: UVM migrations flip protections on shared memory). */
void sim_bus_transfer(struct sim_device *d, enum simgpu_bus_dir dir, enum simgpu_bus_kind kind, uint64_t bytes);

/* hostmem.c: host memory kernels can use (pinned and registered). */
enum sim_hostmem_action { HOSTMEM_PROBE = 1, HOSTMEM_MAP_WINDOW, HOSTMEM_MAP_FILE, HOSTMEM_ADD, HOSTMEM_REMOVE };
int sim_hostmem_init(void);                     /* before the device processes are forked */
int sim_hostmem_fd(void);                       /* the host window's memfd (the device keeps it) */
void sim_hostmem_atfork(void);
bool sim_hostmem_in_window(uint64_t p);
int sim_hostmem_alloc(size_t bytes, void **out);    /* pinned allocation; 0 or -errno */
void sim_hostmem_free(void *p, size_t bytes);       /* the caller drained the devices */
/* *reachable: kernels can dereference the range (see hostmem.c). */
CUresult sim_hostmem_register(void *p, size_t bytes, unsigned flags, bool *reachable);
void sim_hostmem_unregister(void *p, size_t bytes); /* the caller drained the devices */
/* Device process. */
int sim_hostmem_device_op(struct sim_device *d, const struct sim_op *op);
bool sim_hostmem_device_fault(struct sim_device *d, uintptr_t addr, bool write);
void sim_hostmem_device_quiesce(void);
void sim_hostmem_device_start(pid_t host);      /* the host's pid, for the HMM profile */
/* x86-64: the page-fault error code says whether a fault was a write
 * (elsewhere every fault counts as one). */
bool sim_fault_is_write(void *uc);

/* stats.c */
void sim_stats_add(struct sim_device *d, uint64_t *counter, uint64_t v);
void sim_stats_atexit(void);

/* time */
uint64_t sim_now_ns(void);

/* log.c: one line to stderr, formatted on the stack */
void sim_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* SIMGPU_SIM_H */
