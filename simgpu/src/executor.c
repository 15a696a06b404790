/*
 * executor.c — the device process: worker threads that run commands in
 * stream order.
 *
 * Ordering rules (CUDA programming guide, "Default stream"):
 *   - ops of one stream run one at a time, in submission order;
 *   - an op on the legacy default stream (slot 0) waits for every earlier op
 *     of every blocking stream;
 *   - an op on a blocking stream waits for every earlier legacy-stream op;
 *   - non-blocking streams only follow their own order;
 *   - a WAIT op (cuStreamWaitEvent) waits until its target stream completed
 *     the recorded seq.
 * An op stays at the head of its stream queue until it has completed, so
 * "every earlier op of stream t is complete" is "head(t) is later or t is
 * empty".  All scheduler state is guarded by the shared control lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sim.h"

struct qnode {
    struct qnode *next;
    /* kernels: blocks are handed out in chunks to every idle worker */
    uint64_t blocks_total, next_block, blocks_done, chunk;
    struct sim_op op;
};

struct dstream {
    struct qnode *head, *tail;
    bool running;
};

/* Queue nodes come from slabs of the VMM arena's device-only tail (thread
 * stack slots nobody uses), never from malloc: a device process that
 * allocated after its start would put memory of its own where the host
 * may later register memory for kernels to reach (hostmem.c), or be handed
 * host pages mapped over its heap.  Guarded by SH->lock. */
#define QNODE_SLAB_FIRST 200u           /* stack slots [200, 300) */
#define QNODE_SLABS 100u
static struct qnode *qnode_free_list;
static unsigned char *qnode_slab, *qnode_slab_end;
static unsigned qnode_slabs_used;

static struct qnode *qnode_alloc(void)
{
    struct qnode *n = qnode_free_list;
    if (n) {
        qnode_free_list = n->next;
        return n;
    }
    size_t size = (sizeof(struct qnode) + 63) & ~(size_t)63;
    if (!qnode_slab || qnode_slab + size > qnode_slab_end) {
        size_t bytes;
        if (qnode_slabs_used == QNODE_SLABS)
            return NULL;
        unsigned char *s = sim_vmm_device_stack(QNODE_SLAB_FIRST + qnode_slabs_used, &bytes);
        if (!s)
            return NULL;
        qnode_slabs_used++;
        qnode_slab = s;
        qnode_slab_end = s + bytes;
    }
    n = (struct qnode *)qnode_slab;
    qnode_slab += size;
    return n;
}

static void qnode_put(struct qnode *n)
{
    n->next = qnode_free_list;
    qnode_free_list = n;
}

static struct sim_device *D;
static struct sim_shared *SH;
static struct dstream dq[SIM_MAX_STREAMS];
static uint32_t rr_next;

static __thread sigjmp_buf *fault_jb;

/* A fault in a worker: a managed block resident on the host migrates here
 * (uvm.c) and the access retries; inside a kernel anything else abandons
 * the launch; elsewhere it is fatal (the host then reports the device lost). */
static void fault_handler(int sig, siginfo_t *si, void *uc)
{
    /* si_code > 0: a fault of the hardware's; a raised signal's si_addr
     * holds no address (the HMM atomic check raises one to fail) */
    bool fault = si->si_code > 0;
    if (fault && (sig == SIGSEGV || sig == SIGBUS) && sim_uvm_device_fault(D, (uintptr_t)si->si_addr, uc))
        return;
    if (fault && sig == SIGSEGV && sim_hostmem_device_fault(D, (uintptr_t)si->si_addr, sim_fault_is_write(uc)))
        return;
    if (fault_jb) {
        sim_fiber_escape();     /* the fault may be on a fiber of the block */
        siglongjmp(*fault_jb, sig);
    }
    signal(sig, SIG_DFL);
}

/* Move newly submitted ops from the shared ring into per-stream queues. */
static void ingest(void)
{
    bool any = false;
    while (SH->ring_head < SH->ring_tail) {
        const struct sim_op *src = &SH->ring[SH->ring_head % SIM_RING_SLOTS];
        struct qnode *n = qnode_alloc();
        if (!n)
            break;      /* retried on the next pass */
        size_t len = offsetof(struct sim_op, args);
        if (src->kind == SIM_OP_KERNEL)
            len += src->u.kernel.args_bytes;
        else if (src->kind == SIM_OP_HOSTMEM)
            len += src->u.vmm.args_bytes;
        memcpy(&n->op, src, len);
        n->next = NULL;
        struct dstream *q = &dq[n->op.stream];
        if (q->tail)
            q->tail->next = n;
        else
            q->head = n;
        q->tail = n;
        SH->ring_head++;
        any = true;
    }
    if (any)
        pthread_cond_broadcast(&SH->host_cv);  /* ring space */
}

static bool is_blocking(uint32_t s)
{
    return !(SH->streams[s].flags & SIM_STREAM_NONBLOCKING);
}

/* Stream t has an earlier op than seq still running: in its queue, or a
 * copy the host is making without a gate (queue.c, copy_on_idle_stream). */
static bool host_copy_before(uint32_t t, uint64_t seq)
{
    uint64_t h = SH->streams[t].host_copy_seq;
    if (!h || h >= seq)
        return false;
    SH->host_copy_waited = 1;
    return true;
}

static bool earlier_pending(uint32_t t, uint64_t seq)
{
    return (dq[t].head && dq[t].head->op.seq < seq) || host_copy_before(t, seq);
}

static bool deps_met(const struct sim_op *op)
{
    uint32_t s = op->stream;
    if (host_copy_before(s, op->seq))
        return false;
    if (s == SIM_STREAM_LEGACY_SLOT) {
        for (uint32_t t = 1; t < SIM_MAX_STREAMS; t++)
            if (is_blocking(t) && earlier_pending(t, op->seq))
                return false;
    } else if (is_blocking(s)) {
        if (earlier_pending(SIM_STREAM_LEGACY_SLOT, op->seq))
            return false;
    }
    if (op->kind == SIM_OP_WAIT)
        return SH->streams[op->u.wait.stream].completed_seq >= op->u.wait.seq;
    return true;
}

/* Stream s's first op, if it can start now and is for a worker (prefetch
 * false) or for the migration engine (prefetch true); the control
 * stream's ops are the control thread's (control_thread). */
static struct qnode *runnable(uint32_t s, bool prefetch)
{
    struct qnode *h = dq[s].head;
    if (s == SIM_STREAM_CONTROL_SLOT || !h || dq[s].running || (h->op.kind == SIM_OP_PREFETCH) != prefetch ||
        !deps_met(&h->op))
        return NULL;
    return h;
}

/* The next op a worker may run, marked running. */
static struct qnode *pick(void)
{
    for (uint32_t i = 0; i < SIM_MAX_STREAMS; i++) {
        uint32_t s = (rr_next + i) % SIM_MAX_STREAMS;
        struct qnode *h = runnable(s, false);
        if (h) {
            dq[s].running = true;
            rr_next = s + 1;
            return h;
        }
    }
    return NULL;
}

/* Some op a worker could start now (pick would return it). */
static bool any_pickable(void)
{
    for (uint32_t s = 0; s < SIM_MAX_STREAMS; s++)
        if (runnable(s, false))
            return true;
    return false;
}

/* Runs blocks [b0, b1) of a kernel; a fault poisons the device (sticky
 * error) and the rest of the launch is skipped. */
static int run_thread_blocks(const struct sim_op *op, uint64_t b0, uint64_t b1)
{
    const struct simgpu_launch_dims *d = &op->u.kernel.dims;
    struct simgpu_thread_ids ids;
    memset(&ids, 0, sizeof(ids));
    for (int i = 0; i < 3; i++) {
        ids.block_dim[i] = d->block[i];
        ids.grid_dim[i] = d->grid[i];
    }
    for (uint64_t b = b0; b < b1; b++) {
        ids.block[0] = (unsigned)(b % d->grid[0]);
        ids.block[1] = (unsigned)(b / d->grid[0] % d->grid[1]);
        ids.block[2] = (unsigned)(b / d->grid[0] / d->grid[1]);
        int rc = sim_fiber_run_block(op->u.kernel.thread, op->args, &ids, op->u.kernel.name);
        if (rc)
            return rc;
        if (__atomic_load_n(&SH->sticky_error, __ATOMIC_RELAXED))
            return 0;   /* another worker's block failed: the rest is skipped */
    }
    return 0;
}

static void run_blocks(const struct sim_op *op, uint64_t b0, uint64_t b1)
{
    sigjmp_buf jb;
    int sig = sigsetjmp(jb, 1);
    if (sig == 0) {
        fault_jb = &jb;
        int rc = 0;
        if (op->u.kernel.thread)
            rc = run_thread_blocks(op, b0, b1);
        else
            op->u.kernel.trampoline(op->args, &op->u.kernel.dims, b0, b1);
        fault_jb = NULL;
        if (rc == 0)
            return;
        sig = SIGABRT;  /* a deadlock, or no fiber area: the launch fails */
    }
    fault_jb = NULL;
    CUresult err = (sig == SIGSEGV || sig == SIGBUS) ? CUDA_ERROR_ILLEGAL_ADDRESS : CUDA_ERROR_LAUNCH_FAILED;
    pthread_mutex_lock(&SH->lock);
    if (!SH->sticky_error)
        SH->sticky_error = err;
    pthread_mutex_unlock(&SH->lock);
}

static void run_memset(const struct sim_op *op)
{
    unsigned char *dst = (unsigned char *)(uintptr_t)op->u.memset.dst;
    uint64_t n = op->u.memset.count;
    if (op->u.memset.elem_bytes == 1) {
        memset(dst, (int)(op->u.memset.value & 0xff), n);
    } else if (op->u.memset.elem_bytes == 2) {
        uint16_t v = (uint16_t)op->u.memset.value;
        uint16_t *p = (uint16_t *)dst;
        for (uint64_t i = 0; i < n; i++)
            p[i] = v;
    } else {
        uint32_t v = op->u.memset.value;
        uint32_t *p = (uint32_t *)dst;
        for (uint64_t i = 0; i < n; i++)
            p[i] = v;
    }
    __atomic_fetch_add(&SH->stats.memset_bytes, n * op->u.memset.elem_bytes, __ATOMIC_RELAXED);
    __atomic_fetch_add(&SH->stats.memsets, 1, __ATOMIC_RELAXED);
}

/* Runs with the lock held: the host copies while this worker holds the
 * stream's place, then releases the gate. */
static void run_gate(const struct sim_op *op)
{
    uint32_t g = op->u.gate.gate;
    SH->gates[g] = GATE_REACHED;
    pthread_cond_broadcast(&SH->host_cv);
    while (SH->gates[g] != GATE_RELEASED)
        pthread_cond_wait(&SH->dev_cv, &SH->lock);
    SH->gates[g] = GATE_FREE;
}

/* Memsets, copies and prefetches touch device memory outside kernels; a
 * fault there (an unmapped or inaccessible VMM range) is the same sticky
 * illegal-address error as in a kernel. */
static void execute(struct qnode *n)
{
    const struct sim_op *op = &n->op;
    if (__atomic_load_n(&SH->sticky_error, __ATOMIC_RELAXED) != 0)
        return;
    sigjmp_buf jb;
    int sig = sigsetjmp(jb, 1);
    if (sig != 0) {
        fault_jb = NULL;
        pthread_mutex_lock(&SH->lock);
        if (!SH->sticky_error)
            SH->sticky_error = CUDA_ERROR_ILLEGAL_ADDRESS;
        pthread_mutex_unlock(&SH->lock);
        return;
    }
    fault_jb = &jb;
    switch (op->kind) {
    case SIM_OP_MEMSET:
        run_memset(op);
        break;
    case SIM_OP_PREFETCH:
        sim_uvm_prefetch(D, op->u.prefetch.addr, op->u.prefetch.bytes, op->u.prefetch.to_device);
        break;
    case SIM_OP_DTOD:
        memmove((void *)(uintptr_t)op->u.copy.dst, (const void *)(uintptr_t)op->u.copy.src, op->u.copy.bytes);
        __atomic_fetch_add(&SH->stats.dtod_bytes, op->u.copy.bytes, __ATOMIC_RELAXED);
        __atomic_fetch_add(&SH->stats.dtod_transfers, 1, __ATOMIC_RELAXED);
        break;
    default:
        break;
    }
    fault_jb = NULL;
}

/* Called with the lock held when op n has finished. */
static void complete(struct qnode *n)
{
    struct dstream *q = &dq[n->op.stream];
    q->head = n->next;
    if (!q->head)
        q->tail = NULL;
    q->running = false;
    SH->streams[n->op.stream].completed_seq = n->op.seq;
    qnode_put(n);
    pthread_cond_broadcast(&SH->host_cv);
    pthread_cond_broadcast(&SH->dev_cv);
}

/* A running kernel with blocks still to hand out, or NULL. */
static struct qnode *joinable_kernel(void)
{
    for (uint32_t s = 0; s < SIM_MAX_STREAMS; s++) {
        struct qnode *h = dq[s].head;
        if (h && dq[s].running && h->op.kind == SIM_OP_KERNEL && h->next_block < h->blocks_total)
            return h;
    }
    return NULL;
}

/* Some kernel has started and not completed (called with the lock held). */
static bool kernel_running(void)
{
    for (uint32_t s = 0; s < SIM_MAX_STREAMS; s++) {
        const struct qnode *h = dq[s].head;
        if (h && dq[s].running && h->op.kind == SIM_OP_KERNEL)
            return true;
    }
    return false;
}

/* Take chunks of blocks until none are left, or until an op of another
 * stream can run: a GPU runs a memset, a copy or a prefetch of another
 * stream beside a kernel that fills it, so the op goes first and the
 * worker comes back to the kernel (worker: pick, then joinable_kernel).
 * Called and returns with the lock held.  Whoever finishes the last chunk
 * completes the op. */
static void work_on_kernel(struct qnode *n)
{
    for (bool first = true; n->next_block < n->blocks_total; first = false) {
        if (!first) {
            ingest();
            if (any_pickable())
                return;
        }
        uint64_t b0 = n->next_block;
        uint64_t b1 = b0 + n->chunk < n->blocks_total ? b0 + n->chunk : n->blocks_total;
        n->next_block = b1;
        if (n->next_block < n->blocks_total)
            pthread_cond_broadcast(&SH->dev_cv);    /* more for idle workers */
        bool poisoned = SH->sticky_error != 0;
        pthread_mutex_unlock(&SH->lock);
        if (!poisoned)
            run_blocks(&n->op, b0, b1);
        pthread_mutex_lock(&SH->lock);
        n->blocks_done += b1 - b0;
        if (n->blocks_done == n->blocks_total) {
            if (!SH->sticky_error)
                __atomic_fetch_add(&SH->stats.kernels_completed, 1, __ATOMIC_RELAXED);
            complete(n);
            if (!kernel_running()) {
                /* the next kernel pays for host pages again */
                sim_hostmem_device_quiesce();
                sim_uvm_device_quiesce(D);
            }
            return;
        }
    }
}

/* Changes to the device process's mappings (SIM_OP_VMM, SIM_OP_HOSTMEM on
 * the control stream) run on their own thread: they must not wait for a
 * free worker (a kernel may keep every worker busy until the host, which is
 * waiting for such a change, sets a flag). */
static void *control_thread(void *arg)
{
    (void)arg;
    struct dstream *q = &dq[SIM_STREAM_CONTROL_SLOT];
    pthread_mutex_lock(&SH->lock);
    for (;;) {
        ingest();
        struct qnode *n = q->head;
        if (!n || q->running) {
            pthread_cond_wait(&SH->dev_cv, &SH->lock);
            continue;
        }
        q->running = true;
        pthread_mutex_unlock(&SH->lock);
        int rc = n->op.kind == SIM_OP_VMM ? sim_vmm_device_op(D, &n->op)
               : n->op.kind == SIM_OP_HOSTMEM ? sim_hostmem_device_op(D, &n->op)
                                              : -EINVAL;
        pthread_mutex_lock(&SH->lock);
        SH->vmm_result = rc;
        complete(n);
    }
    return NULL;
}

/* Prefetches run on a thread of their own, as a GPU's driver migrates
 * with copy engines beside the kernels: one waits for no worker to finish
 * a kernel's blocks, and takes none from it. */
static int engine_running;

static void *migration_engine(void *arg)
{
    (void)arg;
    __atomic_store_n(&engine_running, 1, __ATOMIC_RELEASE);
    pthread_mutex_lock(&SH->lock);
    for (;;) {
        ingest();
        struct qnode *n = NULL;
        for (uint32_t s = 0; s < SIM_MAX_STREAMS && !n; s++)
            n = runnable(s, true);
        if (!n) {
            pthread_cond_wait(&SH->dev_cv, &SH->lock);
            continue;
        }
        dq[n->op.stream].running = true;
        pthread_mutex_unlock(&SH->lock);
        execute(n);
        pthread_mutex_lock(&SH->lock);
        complete(n);
    }
    return NULL;
}

/* Workers that have started running (sim_device_main waits for all). */
static unsigned workers_running;

static void *worker(void *arg)
{
    (void)arg;
    __atomic_add_fetch(&workers_running, 1, __ATOMIC_RELEASE);
    pthread_mutex_lock(&SH->lock);
    for (;;) {
        ingest();
        struct qnode *n = pick();
        if (!n) {
            struct qnode *k = joinable_kernel();
            if (k)
                work_on_kernel(k);
            else
                pthread_cond_wait(&SH->dev_cv, &SH->lock);
            continue;
        }
        if (n->op.kind == SIM_OP_KERNEL) {
            const struct simgpu_launch_dims *dm = &n->op.u.kernel.dims;
            n->blocks_total = (uint64_t)dm->grid[0] * dm->grid[1] * dm->grid[2];
            n->next_block = n->blocks_done = 0;
            n->chunk = n->blocks_total / (4ull * sim.env.workers);
            if (n->chunk == 0)
                n->chunk = 1;
            work_on_kernel(n);
            continue;
        }
        if (n->op.kind == SIM_OP_HOST_GATE) {
            run_gate(&n->op);
        } else if (n->op.kind == SIM_OP_EVENT_RECORD) {
            struct sim_event_slot *e = &SH->events[n->op.u.record.event];
            if (e->seq == n->op.seq)
                e->time_ns = sim_now_ns();
        } else if (n->op.kind != SIM_OP_NOP && n->op.kind != SIM_OP_WAIT) {
            pthread_mutex_unlock(&SH->lock);
            execute(n);
            pthread_mutex_lock(&SH->lock);
        }
        complete(n);
    }
    return NULL;
}

/* Close every descriptor the device process inherited from the
 * application but the devices' memory (and stdio, for messages): a GPU
 * holds none of the program's files, and a descriptor kept here would keep
 * its file open, and its locks held, after the program closed it or
 * exited. Read with getdents64 into the stack: nothing allocates before
 * the workers start. */
static void close_inherited_files(void)
{
    int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return;
    char buf[4096];
    for (;;) {
        long n = syscall(SYS_getdents64, dir, buf, sizeof(buf));
        if (n <= 0)
            break;
        for (long off = 0; off < n;) {
            struct { uint64_t ino; int64_t off; unsigned short reclen; unsigned char type; char name[]; } *e =
                (void *)(buf + off);
            off += e->reclen;
            int fd = atoi(e->name);
            bool keep = fd <= 2 || fd == dir || e->name[0] == '.';
            for (unsigned i = 0; i < sim.env.devices && i < SIM_MAX_DEVICES && !keep; i++)
                keep = fd == sim.dev[i].memfd;
            keep = keep || fd == sim_hostmem_fd();
            if (!keep)
                close(fd);
        }
    }
    close(dir);
}

/* Reset what the device process inherited from the application: its
 * signal handlers (they belong to the host's program) and its mask. */
static void setup_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP)
            sigaction(s, &sa, NULL);
    sa.sa_sigaction = fault_handler;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    sigaction(SIGFPE, &sa, NULL);
    sigaction(SIGILL, &sa, NULL);
    sigset_t all;
    sigfillset(&all);
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGBUS);
    sigdelset(&all, SIGFPE);
    sigdelset(&all, SIGILL);
    pthread_sigmask(SIG_SETMASK, &all, NULL);
}

int sim_spawn_device_thread(unsigned index, void *(*fn)(void *), void *arg)
{
    pthread_attr_t a;
    pthread_attr_init(&a);
    size_t bytes;
    void *stack = sim_vmm_device_stack(index, &bytes);
    if (stack)
        pthread_attr_setstack(&a, stack, bytes);
    pthread_t t;
    int rc = pthread_create(&t, &a, fn, arg);
    pthread_attr_destroy(&a);
    return rc;
}

void sim_device_main(struct sim_device *d)
{
    pid_t parent = getppid();
    sim_hostmem_device_start(parent);
    D = d;
    SH = d->sh;
    setup_signals();
    /* A start that never completes (a lock another host thread held at
     * the clone) is abandoned by the host after 5 s; should the host die
     * first (killed, or exiting from another thread), nobody would: the
     * process ends itself after 10 s unless ready by then. */
    sigset_t alrm;
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);
    alarm(10);
    close_inherited_files();
    sim_vmm_close_host_files();
    sim_vmm_fence_host_area();
    if (mprotect(d->window, d->window_bytes, PROT_READ | PROT_WRITE) < 0)
        _exit(3);
    sim_uvm_start_device(d);    /* the managed area: closed until blocks migrate here */
    /* One malloc arena (the inherited heap) and thread stacks from the VMM
     * arena's tail: the device process adds no mappings of its own where the
     * host might later honour an address hint (vmm.c). */
    mallopt(M_ARENA_MAX, 1);
    for (unsigned i = 0; i < sim.env.workers; i++) {
        if (sim_spawn_device_thread(i, worker, NULL) != 0)
            _exit(4);
    }
    /* stack index workers is the UVM service thread's (uvm.c) */
    if (sim_spawn_device_thread(sim.env.workers + 1, control_thread, NULL) != 0 ||
        sim_spawn_device_thread(sim.env.workers + 2, migration_engine, NULL) != 0)
        _exit(4);
    /* Ready once every worker and the migration thread run: starting a
     * thread allocates, and an allocator lock that another host thread
     * held at the clone is held here for ever. The host then kills this
     * process and clones again. */
    while (__atomic_load_n(&workers_running, __ATOMIC_ACQUIRE) < sim.env.workers ||
           !__atomic_load_n(&engine_running, __ATOMIC_ACQUIRE))
        usleep(1000);
    alarm(0);
    __atomic_store_n(&d->sh->device_ready, 1, __ATOMIC_RELEASE);
    /* Die with the host process.  A pidfd becomes readable when the whole
     * process exits (PR_SET_PDEATHSIG only tracks the forking thread). */
    int pidfd = (int)syscall(SYS_pidfd_open, parent, 0);
    for (;;) {
        if (pidfd >= 0) {
            struct pollfd p = { .fd = pidfd, .events = POLLIN };
            if (poll(&p, 1, 1000) > 0)
                _exit(0);
        } else {
            sleep(1);
        }
        if (getppid() != parent)
            _exit(0);
    }
}
