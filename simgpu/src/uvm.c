/*
 * uvm.c — managed memory that behaves like UVM, not like free coherent
 * memory (DESIGN.md §5).
 *
 * The managed area of a device is one range of the memfd, mapped at the
 * same address in the host and the device process.  Each 64 KiB block is
 * resident on exactly one side; the other side keeps it PROT_NONE.  A touch
 * on the wrong side raises SIGSEGV there; the handler asks the other side's
 * *service thread* to give the block up (REVOKE), waits, pays the modelled
 * fault cost (SIMGPU_UVM_FAULT_US), opens its own side and returns, and the
 * access retries.  Service threads, not signal handlers, answer requests, so
 * two sides faulting on the same block ping-pong without deadlock — the
 * behaviour the paper measured (GAIA §3.1).
 *
 * Per block one state byte: owner (HOST/DEVICE) and BUSY.  BUSY is held only
 * by a thread that is making progress (an mprotect), never while it waits
 * for the other process: a REVOKE hands "owner = requester | BUSY" to the
 * requester, which opens its side and clears BUSY.  So a service thread can
 * never take a block away between the requester's acknowledgement and its
 * mprotect, and both sides are never open at once.
 *
 * Read-mostly blocks (cuMemAdvise SET_READ_MOSTLY) are duplicated on a
 * read fault: the owner drops to read-only (DOWNGRADE) and both sides map
 * the block PROT_READ (state SHARED); a write fault on either side then
 * invalidates the other copy (REVOKE) and takes the block exclusively.
 *
 * Everything a fault handler calls is async-signal-safe: atomics, futex,
 * mprotect, clock_gettime, sched_yield.  Not modelled: access counters,
 * migrations larger than a block on dense faults.
 */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "sim.h"

enum { SIDE_HOST = 0, SIDE_DEVICE = 1, SHARED = 2, BUSY = 4 };
enum { REQ_FREE = 0, REQ_CLAIMED, REQ_REQUESTED, REQ_DONE };
enum { KIND_REVOKE = 1, KIND_GRANT, KIND_DOWNGRADE };
#define UVM_SLOTS 64

struct uvm_req {
    uint32_t state;     /* futex word */
    uint32_t kind;
    uint64_t block;
    uint32_t handed;    /* answer: 1 when the block was handed to the requester */
};

struct uvm_queue {      /* requests served by one side's service thread */
    uint32_t seq;       /* futex word: bumped on every new request */
    struct uvm_req req[UVM_SLOTS];
};

/* One device fault, as the fault log keeps it for the profiling interface
 * (cupti/: CUPTI's unified-memory GPU_PAGE_FAULT records).  seq is
 * written last: a reader takes a slot whose seq names it. */
struct fault_rec {
    uint64_t seq;           /* index + 1 once the record is complete */
    uint64_t addr, start_ns, end_ns;
    uint32_t access;        /* 1 read, 2 write (CUPTI's access types) */
    uint32_t pad;
};
#define FAULT_LOG_SLOTS 65536u /* a kernel reading 256 MiB through HMM between syncs: a record a page */

struct sim_uvm {
    uint64_t nblocks;
    uint32_t fault_log_on;          /* host: record device faults in fault_log */
    uint64_t fault_next;            /* records handed out so far */
    struct fault_rec fault_log[FAULT_LOG_SLOTS];
    struct uvm_queue to_side[2];    /* [SIDE_HOST]: served in the host */
    uint64_t device_allocated;      /* host: device memory taken by cuMemAlloc/cuMemCreate */
    uint64_t resident_blocks;       /* device: blocks with a copy on the device */
    uint64_t lru_clock;             /* device: ticks of chunk use */
    uint64_t *chunk_used;           /* per 2 MiB chunk: lru_clock of its last migration here */
    uint16_t *chunk_resident;       /* per chunk: its blocks with a copy on the device */
    uint8_t *on_device;             /* per block: 1 while the device holds a copy */
    uint8_t *advice;                /* per block: SIM_ADVISE_* bits (cuMemAdvise) */
    uint8_t state[];                /* per block: SIDE_HOST, SIDE_DEVICE or SHARED, | BUSY */
};

static long futex(uint32_t *w, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, w, op, val, ts, NULL, 0);
}

static void futex_wake_all(uint32_t *w)
{
    futex(w, FUTEX_WAKE, INT32_MAX, NULL);
}

#define BLOCKS_PER_CHUNK (SIM_UVM_CHUNK / SIM_UVM_BLOCK)

int sim_uvm_create(struct sim_device *d)
{
    uint64_t nblocks = d->managed_bytes / SIM_UVM_BLOCK;
    uint64_t nchunks = (d->managed_bytes + SIM_UVM_CHUNK - 1) / SIM_UVM_CHUNK;
    size_t head = (sizeof(struct sim_uvm) + 3 * nblocks + 7) & ~(size_t)7;
    size_t bytes = head + nchunks * (sizeof(uint64_t) + sizeof(uint16_t));
    struct sim_uvm *u = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (u == MAP_FAILED)
        return -errno;
    u->nblocks = nblocks;           /* state[] is zero: every block on the host */
    u->advice = u->state + nblocks;
    u->on_device = u->state + 2 * nblocks;
    u->chunk_used = (uint64_t *)((char *)u + head);
    u->chunk_resident = (uint16_t *)(u->chunk_used + nchunks);
    d->uvm = u;
    return 0;
}

uint64_t *sim_uvm_device_allocated(struct sim_device *d)
{
    return &d->uvm->device_allocated;
}

uint64_t sim_uvm_device_resident(const struct sim_device *d)
{
    return d->uvm ? __atomic_load_n(&d->uvm->resident_blocks, __ATOMIC_RELAXED) * SIM_UVM_BLOCK : 0;
}

/* Which side of the process running this code. */
static int my_side;
static size_t page_size = 4096;   /* the device's, set at its start */

static unsigned char *block_addr(struct sim_device *d, uint64_t b)
{
    return d->window + d->mem_bytes + b * SIM_UVM_BLOCK;
}

static void protect(struct sim_device *d, uint64_t b, int prot)
{
    mprotect(block_addr(d, b), SIM_UVM_BLOCK, prot);
}

static bool other_side_alive(struct sim_device *d)
{
    if (my_side == SIDE_DEVICE)
        return getppid() > 1;
    int st;
    pid_t r = waitpid(d->pid, &st, WNOHANG | __WCLONE);
    return r == 0;
}

/* Post a request to the other side's service thread and wait for it.
 * Returns 1 when the block was handed to this side (its state is then
 * this side's or SHARED, with BUSY set), 0 when the other side had nothing
 * to give (re-read the state), -1 when the other process is gone. The
 * answer travels in the request: the state alone cannot tell, since
 * another thread of this side may set the same BUSY value meanwhile. */
static int request(struct sim_device *d, uint32_t kind, uint64_t b)
{
    struct uvm_queue *q = &d->uvm->to_side[!my_side];
    struct uvm_req *r = NULL;
    while (!r) {
        for (unsigned i = 0; i < UVM_SLOTS && !r; i++) {
            uint32_t expect = REQ_FREE;
            if (__atomic_compare_exchange_n(&q->req[i].state, &expect, REQ_CLAIMED, false, __ATOMIC_ACQUIRE,
                                            __ATOMIC_RELAXED))
                r = &q->req[i];
        }
        if (!r)
            sched_yield();
    }
    r->kind = kind;
    r->block = b;
    r->handed = 0;
    __atomic_store_n(&r->state, REQ_REQUESTED, __ATOMIC_RELEASE);
    __atomic_fetch_add(&q->seq, 1, __ATOMIC_RELEASE);
    futex_wake_all(&q->seq);
    struct timespec ts = { 0, 100 * 1000 * 1000 };
    uint32_t s;
    while ((s = __atomic_load_n(&r->state, __ATOMIC_ACQUIRE)) != REQ_DONE) {
        futex(&r->state, FUTEX_WAIT, s, &ts);
        if (__atomic_load_n(&r->state, __ATOMIC_ACQUIRE) != REQ_DONE && !other_side_alive(d))
            return -1;
    }
    int handed = (int)__atomic_load_n(&r->handed, __ATOMIC_ACQUIRE);
    __atomic_store_n(&r->state, REQ_FREE, __ATOMIC_RELEASE);
    return handed;
}

static uint64_t clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A fault's service time.  On the device, faults are serviced in batches
 * (the driver fetches up to 256 from the fault buffer at a time): a fault
 * arriving while a batch is being serviced joins it and is done when it
 * is; otherwise it opens a batch of SIMGPU_UVM_FAULT_US.  A CPU fault is
 * serviced alone. */
#define FAULT_BATCH 256
static int batch_lock;
static uint64_t batch_end_ns;
static unsigned batch_faults;

static void pay_fault_cost(struct sim_device *d)
{
    uint64_t cost = (uint64_t)sim.env.uvm_fault_us * 1000;
    if (!cost)
        return;
    if (my_side != SIDE_DEVICE) {
        sim_bus_wait_until(clock_ns() + cost);
        return;
    }
    while (__atomic_exchange_n(&batch_lock, 1, __ATOMIC_ACQUIRE))
        sched_yield();
    uint64_t now = clock_ns(), end;
    bool opened = false;
    if (now < batch_end_ns && batch_faults < FAULT_BATCH) {
        batch_faults++;
        end = batch_end_ns;
    } else {
        end = batch_end_ns = now + cost;
        batch_faults = 1;
        opened = true;
    }
    __atomic_store_n(&batch_lock, 0, __ATOMIC_RELEASE);
    if (opened)
        __atomic_fetch_add(&d->sh->stats.uvm_fault_batches, 1, __ATOMIC_RELAXED);
    sim_bus_wait_until(end);
}

/* ---- device residency: bounded by device memory less explicit
 * allocations; the least recently migrated 2 MiB chunk goes home when
 * full.  Kept by the device process only. ---- */

static void set_on_device(struct sim_device *d, uint64_t b, bool on)
{
    struct sim_uvm *u = d->uvm;
    if (my_side != SIDE_DEVICE || __atomic_exchange_n(&u->on_device[b], (uint8_t)on, __ATOMIC_ACQ_REL) == (uint8_t)on)
        return;
    uint64_t c = b / BLOCKS_PER_CHUNK;
    if (on) {
        __atomic_fetch_add(&u->resident_blocks, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&u->chunk_resident[c], 1, __ATOMIC_RELAXED);
        __atomic_store_n(&u->chunk_used[c], __atomic_add_fetch(&u->lru_clock, 1, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
    } else {
        __atomic_fetch_sub(&u->resident_blocks, 1, __ATOMIC_RELAXED);
        __atomic_fetch_sub(&u->chunk_resident[c], 1, __ATOMIC_RELAXED);
    }
}

static int request(struct sim_device *d, uint32_t kind, uint64_t b);

/* Device side: close block b here and hand it to the host.  Returns true
 * when its bytes had to move (the device held the only copy). */
static bool give_to_host(struct sim_device *d, uint64_t b)
{
    uint8_t *st = &d->uvm->state[b];
    for (;;) {
        uint8_t s = __atomic_load_n(st, __ATOMIC_ACQUIRE);
        if (s == SIDE_HOST)
            return false;
        if (s & BUSY) {
            sched_yield();
            continue;
        }
        /* DEVICE or SHARED: close this side, grant the block to the host */
        if (!__atomic_compare_exchange_n(st, &s, (uint8_t)(s | BUSY), false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            continue;
        protect(d, b, PROT_NONE);
        set_on_device(d, b, false);
        __atomic_store_n(st, (uint8_t)(SIDE_HOST | BUSY), __ATOMIC_RELEASE);
        request(d, KIND_GRANT, b);
        return s == SIDE_DEVICE;
    }
}

static int evict_lock;

static bool chunk_prefers_device(const struct sim_uvm *u, uint64_t c)
{
    for (uint64_t k = c * BLOCKS_PER_CHUNK; k < (c + 1) * BLOCKS_PER_CHUNK && k < u->nblocks; k++)
        if (__atomic_load_n(&u->advice[k], __ATOMIC_RELAXED) & SIM_ADVISE_PREFER_DEVICE)
            return true;
    return false;
}

/* Before block b comes to the device: evict least recently used chunks
 * (not b's) until there is room for it. */
static void make_room(struct sim_device *d, uint64_t b)
{
    struct sim_uvm *u = d->uvm;
    uint64_t taken = __atomic_load_n(&u->device_allocated, __ATOMIC_RELAXED);
    uint64_t cap = d->mem_bytes > taken ? (d->mem_bytes - taken) / SIM_UVM_BLOCK : 0;
    uint64_t resident = __atomic_load_n(&u->resident_blocks, __ATOMIC_RELAXED);
    /* room, or nothing but b's own chunk to give back: no scan (this runs
     * in every device fault) */
    if (resident < cap || resident == __atomic_load_n(&u->chunk_resident[b / BLOCKS_PER_CHUNK], __ATOMIC_RELAXED))
        return;
    while (__atomic_exchange_n(&evict_lock, 1, __ATOMIC_ACQUIRE))
        sched_yield();
    uint64_t nchunks = (u->nblocks + BLOCKS_PER_CHUNK - 1) / BLOCKS_PER_CHUNK, keep = b / BLOCKS_PER_CHUNK;
    uint64_t evicted_end = 0;
    for (uint64_t tries = 0; tries < nchunks && __atomic_load_n(&u->resident_blocks, __ATOMIC_RELAXED) >= cap; tries++) {
        /* the least recently used chunk, one preferred on the device only
         * when there is nothing else */
        uint64_t victim = UINT64_MAX, oldest = UINT64_MAX;
        for (int pass = 0; pass < 2 && victim == UINT64_MAX; pass++) {
            for (uint64_t c = 0; c < nchunks; c++) {
                uint64_t used = __atomic_load_n(&u->chunk_used[c], __ATOMIC_RELAXED);
                if (c == keep || !__atomic_load_n(&u->chunk_resident[c], __ATOMIC_RELAXED) || used >= oldest)
                    continue;
                if (pass == 0 && chunk_prefers_device(u, c))
                    continue;
                oldest = used;
                victim = c;
            }
        }
        if (victim == UINT64_MAX)
            break;      /* only b's own chunk is here: let the device run over */
        uint64_t moved = 0;
        for (uint64_t k = victim * BLOCKS_PER_CHUNK; k < (victim + 1) * BLOCKS_PER_CHUNK && k < u->nblocks; k++)
            if (__atomic_load_n(&u->on_device[k], __ATOMIC_RELAXED) && give_to_host(d, k))
                moved += SIM_UVM_BLOCK;
        __atomic_fetch_add(&d->sh->stats.uvm_evictions, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&d->sh->stats.uvm_evicted_bytes, moved, __ATOMIC_RELAXED);
        if (moved)
            evicted_end = sim_bus_reserve(d, SIMGPU_BUS_DTOH, SIMGPU_BUS_EVICTION, moved, false).end_ns;
    }
    __atomic_store_n(&evict_lock, 0, __ATOMIC_RELEASE);
    sim_bus_wait_until(evicted_end);    /* the room exists once the bytes left */
}

/* The direction of a migration to this side. */
static enum simgpu_bus_dir inbound(void)
{
    return my_side == SIDE_DEVICE ? SIMGPU_BUS_HTOD : SIMGPU_BUS_DTOH;
}

/* Device: a fault at addr, for the profiling interface.  Async-signal-safe
 * (atomics and clock_gettime). */
static void log_fault_at(struct sim_device *d, uint64_t addr, bool write, uint64_t start_ns)
{
    struct sim_uvm *u = d->uvm;
    if (!u || !__atomic_load_n(&u->fault_log_on, __ATOMIC_RELAXED))
        return;
    uint64_t i = __atomic_fetch_add(&u->fault_next, 1, __ATOMIC_RELAXED);
    struct fault_rec *r = &u->fault_log[i % FAULT_LOG_SLOTS];
    /* each field a release store: none is seen before seq's 0 */
    __atomic_store_n(&r->seq, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&r->addr, addr, __ATOMIC_RELEASE);
    __atomic_store_n(&r->start_ns, start_ns, __ATOMIC_RELEASE);
    __atomic_store_n(&r->end_ns, clock_ns(), __ATOMIC_RELEASE);
    __atomic_store_n(&r->access, write ? 2u : 1u, __ATOMIC_RELEASE);
    __atomic_store_n(&r->seq, i + 1, __ATOMIC_RELEASE);
}

/* A fault that migrated block b. */
static void log_fault(struct sim_device *d, uint64_t b, bool write, uint64_t start_ns)
{
    log_fault_at(d, (uint64_t)(uintptr_t)block_addr(d, b), write, start_ns);
}

uint64_t sim_uvm_clock_ns(void)
{
    return clock_ns();
}

void sim_uvm_log_host_fault(struct sim_device *d, uintptr_t page, bool write, uint64_t start_ns)
{
    log_fault_at(d, (uint64_t)page, write, start_ns);
}

/* Make block b resident on this side: exclusively for a write, as a
 * read-only duplicate for a read of a read-mostly block.  The block's bytes
 * cross the link: a fault waits for its own transfer; a bulk migration adds
 * them to *moved and books one transfer for the whole range.  Returns false
 * if the other process is gone. */
static bool acquire(struct sim_device *d, uint64_t b, bool fault, bool write, uint64_t *moved)
{
    uint8_t *st = &d->uvm->state[b];
    int saved_errno = errno;
    bool ok = true;
    for (;;) {
        uint8_t s = __atomic_load_n(st, __ATOMIC_ACQUIRE);
        if (s & BUSY) {
            sched_yield();
            continue;
        }
        if (s == my_side || (s == SHARED && !write)) {
            /* already here (another thread of this side brought it):
             * make sure our side is open */
            if (!__atomic_compare_exchange_n(st, &s, (uint8_t)(s | BUSY), false, __ATOMIC_ACQ_REL,
                                             __ATOMIC_RELAXED))
                continue;
            protect(d, b, s == SHARED ? PROT_READ : PROT_READ | PROT_WRITE);
            __atomic_store_n(st, s, __ATOMIC_RELEASE);
            break;
        }
        bool duplicate = !write && s != SHARED &&
                         (__atomic_load_n(&d->uvm->advice[b], __ATOMIC_RELAXED) & SIM_ADVISE_READ_MOSTLY);
        bool copy = s != SHARED;    /* a write to a shared block already has the bytes */
        if (my_side == SIDE_DEVICE && copy)
            make_room(d, b);
        int got = request(d, duplicate ? KIND_DOWNGRADE : KIND_REVOKE, b);
        if (got < 0) {
            ok = false;
            break;
        }
        if (!got)
            continue;   /* the other side had already let go: retry */
        uint8_t handed = duplicate ? SHARED | BUSY : my_side | BUSY;
        uint64_t fault_start = fault ? clock_ns() : 0;
        if (fault)
            pay_fault_cost(d);
        set_on_device(d, b, true);
        if (copy && moved)
            *moved += SIM_UVM_BLOCK;
        else if (copy)
            sim_bus_transfer(d, inbound(), SIMGPU_BUS_MIGRATION, SIM_UVM_BLOCK);
        protect(d, b, duplicate ? PROT_READ : PROT_READ | PROT_WRITE);
        __atomic_store_n(st, (uint8_t)(handed & ~BUSY), __ATOMIC_RELEASE);
        if (fault)
            __atomic_fetch_add(&d->sh->stats.uvm_faults, 1, __ATOMIC_RELAXED);
        if (fault && my_side == SIDE_DEVICE) {
            __atomic_fetch_add(&d->sh->stats.uvm_device_faults, 1, __ATOMIC_RELAXED);
            log_fault(d, b, write, fault_start);
        }
        if (copy)
            __atomic_fetch_add(&d->sh->stats.uvm_migrated_bytes, SIM_UVM_BLOCK, __ATOMIC_RELAXED);
        break;
    }
    errno = saved_errno;
    return ok;
}

void sim_uvm_fault_log_enable(struct sim_device *d, bool on)
{
    if (d->uvm)
        __atomic_store_n(&d->uvm->fault_log_on, on ? 1u : 0u, __ATOMIC_RELEASE);
}

unsigned sim_uvm_fault_log_read(struct sim_device *d, uint64_t *cursor, struct simgpu_fault *out,
                                unsigned max, uint64_t *dropped)
{
    struct sim_uvm *u = d->uvm;
    unsigned n = 0;
    if (!u)
        return 0;
    uint64_t end = __atomic_load_n(&u->fault_next, __ATOMIC_ACQUIRE);
    if (end - *cursor > FAULT_LOG_SLOTS) {
        /* overwritten before anyone read them */
        *dropped += end - FAULT_LOG_SLOTS - *cursor;
        *cursor = end - FAULT_LOG_SLOTS;
    }
    while (n < max && *cursor < end) {
        struct fault_rec *r = &u->fault_log[*cursor % FAULT_LOG_SLOTS];
        uint64_t seq = __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE);
        if (seq != *cursor + 1) {
            if (seq > *cursor + 1) {        /* lapped while we read */
                (*dropped)++;
                (*cursor)++;
                continue;
            }
            break;                          /* still being written */
        }
        /* acquire loads: a field of a newer record makes the check
         * below see that record's seq (0 or another index) */
        struct simgpu_fault f = {
            .address = __atomic_load_n(&r->addr, __ATOMIC_ACQUIRE),
            .start_ns = __atomic_load_n(&r->start_ns, __ATOMIC_ACQUIRE),
            .end_ns = __atomic_load_n(&r->end_ns, __ATOMIC_ACQUIRE),
            .access = __atomic_load_n(&r->access, __ATOMIC_ACQUIRE),
            .device = (uint32_t)d->ordinal,
        };
        if (__atomic_load_n(&r->seq, __ATOMIC_RELAXED) != seq)
            continue;                       /* rewritten under us: read it again */
        out[n++] = f;
        (*cursor)++;
    }
    return n;
}

/* Serve one request on this side; false if it must wait (block BUSY). */
static bool serve(struct sim_device *d, struct uvm_req *r)
{
    uint8_t *st = &d->uvm->state[r->block];
    uint8_t s = __atomic_load_n(st, __ATOMIC_ACQUIRE);
    uint8_t requester = (uint8_t)!my_side;
    if (r->kind == KIND_GRANT) {        /* the state is "my_side | BUSY", handed to us */
        protect(d, r->block, PROT_READ | PROT_WRITE);
        __atomic_store_n(st, (uint8_t)my_side, __ATOMIC_RELEASE);
    } else if (s & BUSY) {
        return false;
    } else if (s == my_side || (s == SHARED && r->kind == KIND_REVOKE)) {
        /* REVOKE: close our side, the requester takes it exclusively;
         * DOWNGRADE: keep a read-only copy, both sides share it */
        if (!__atomic_compare_exchange_n(st, &s, (uint8_t)(s | BUSY), false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            return false;
        bool down = r->kind == KIND_DOWNGRADE;
        protect(d, r->block, down ? PROT_READ : PROT_NONE);
        if (!down)
            set_on_device(d, r->block, false);
        __atomic_store_n(st, (uint8_t)((down ? SHARED : requester) | BUSY), __ATOMIC_RELEASE);    /* handed over */
        __atomic_store_n(&r->handed, 1, __ATOMIC_RELEASE);
    }
    /* otherwise there is nothing of ours to give: the requester re-reads */
    __atomic_store_n(&r->state, REQ_DONE, __ATOMIC_RELEASE);
    futex_wake_all(&r->state);
    return true;
}

static void *service_thread(void *arg)
{
    struct sim_device *d = arg;
    struct uvm_queue *q = &d->uvm->to_side[my_side];
    for (;;) {
        uint32_t seq = __atomic_load_n(&q->seq, __ATOMIC_ACQUIRE);
        bool deferred = false;
        for (unsigned i = 0; i < UVM_SLOTS; i++)
            if (__atomic_load_n(&q->req[i].state, __ATOMIC_ACQUIRE) == REQ_REQUESTED && !serve(d, &q->req[i]))
                deferred = true;
        if (deferred) {
            sched_yield();
            continue;
        }
        struct timespec ts = { 0, 100 * 1000 * 1000 };
        futex(&q->seq, FUTEX_WAIT, seq, &ts);
    }
    return NULL;
}

static struct sim_device *managed_device(uintptr_t addr, uint64_t *block)
{
    for (int i = 0; i < sim.ndevices; i++) {
        struct sim_device *d = &sim.dev[i];
        uintptr_t base = (uintptr_t)d->window + d->mem_bytes;
        if (d->uvm && addr >= base && addr < base + d->managed_bytes) {
            *block = (addr - base) / SIM_UVM_BLOCK;
            return d;
        }
    }
    return NULL;
}

/* ---- host side ---- */

static struct sigaction previous_segv;

/* x86-64 page-fault error code: bit 1 set for a write.  Elsewhere every
 * fault counts as a write (no read duplication). */
bool sim_fault_is_write(void *uc)
{
#if defined(__x86_64__)
    return (((ucontext_t *)uc)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
    (void)uc;
    return true;
#endif
}

/* Not a fault on managed memory: what the kernel would have done without
 * this handler.  The previous handler runs with its own mask (the signal
 * blocked unless it asked SA_NODEFER), reset first if it asked
 * SA_RESETHAND; with none, the default action: a fault repeats once the
 * default is in place, a signal sent with kill/raise/sigqueue (si_code <=
 * 0) is sent again.  An ignored SIGSEGV stays ignored when sent and kills
 * when it is a fault. */
static void host_segv_chain(int sig, siginfo_t *si, void *uc)
{
    struct sigaction prev = previous_segv;
    bool sent = si->si_code <= 0;
    if (prev.sa_handler == SIG_IGN && sent)
        return;
    if (prev.sa_handler == SIG_DFL || prev.sa_handler == SIG_IGN) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof(dfl));
        dfl.sa_handler = SIG_DFL;
        sigaction(sig, &dfl, NULL);
        if (sent) {
            sigset_t only;
            sigemptyset(&only);
            sigaddset(&only, sig);
            pthread_sigmask(SIG_UNBLOCK, &only, NULL);
            raise(sig);
        }
        return;
    }
    if (prev.sa_flags & SA_RESETHAND) {
        previous_segv.sa_handler = SIG_DFL;
        previous_segv.sa_flags = 0;
    }
    sigset_t mask = prev.sa_mask, old;
    if (!(prev.sa_flags & SA_NODEFER))
        sigaddset(&mask, sig);
    pthread_sigmask(SIG_BLOCK, &mask, &old);
    if (prev.sa_flags & SA_SIGINFO)
        prev.sa_sigaction(sig, si, uc);
    else
        prev.sa_handler(sig);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void host_segv(int sig, siginfo_t *si, void *uc)
{
    uint64_t b;
    struct sim_device *d = si->si_code > 0 ? managed_device((uintptr_t)si->si_addr, &b) : NULL;
    if (d && acquire(d, b, true, sim_fault_is_write(uc), NULL))
        return;     /* the access retries */
    host_segv_chain(sig, si, uc);
}

int sim_uvm_start_host(void)
{
    my_side = SIDE_HOST;
    for (int i = 0; i < sim.ndevices; i++) {
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        /* the service thread must not take the application's signals */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int rc = pthread_create(&t, &a, service_thread, &sim.dev[i]);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&a);
        if (rc)
            return -rc;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = host_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &previous_segv) < 0)
        return -errno;
    return 0;
}

/* ---- device side ---- */

void sim_uvm_start_device(struct sim_device *d)
{
    my_side = SIDE_DEVICE;
    page_size = (size_t)sysconf(_SC_PAGESIZE);
    mprotect(d->window + d->mem_bytes, d->managed_bytes, PROT_NONE);
    if (sim_spawn_device_thread(sim.env.workers, service_thread, d) != 0)
        _exit(5);
}

/* Remote mappings: a block resident on the host whose advice is
 * ACCESSED_BY this device or PREFERRED_LOCATION host is not migrated when
 * a kernel touches it; the device maps the touched 4 KiB page of the host's
 * copy (the same shared memory) and pays for it on the bus like any host
 * access.  Pages so opened are closed when no kernel is left running. */
#define REMOTE_MAX 65536
static int remote_lock;
static uintptr_t remote_pages[REMOTE_MAX];
static unsigned nremote;

static bool remote_access(struct sim_device *d, uint64_t b, uintptr_t addr, bool write)
{
    if (__atomic_load_n(&d->uvm->state[b], __ATOMIC_ACQUIRE) != SIDE_HOST)
        return false;
    uintptr_t pg = page_size, page = addr & ~(pg - 1);
    while (__atomic_exchange_n(&remote_lock, 1, __ATOMIC_ACQUIRE))
        sched_yield();
    bool ok = nremote < REMOTE_MAX && mprotect((void *)page, pg, write ? PROT_READ | PROT_WRITE : PROT_READ) == 0;
    if (ok)
        remote_pages[nremote++] = page;
    __atomic_store_n(&remote_lock, 0, __ATOMIC_RELEASE);
    if (!ok)
        return false;   /* too many open: migrate instead */
    sim_bus_wait_until(sim_bus_reserve_access(d, write ? SIMGPU_BUS_DTOH : SIMGPU_BUS_HTOD, pg).end_ns);
    __atomic_fetch_add(&d->sh->stats.uvm_remote_bytes, pg, __ATOMIC_RELAXED);
    return true;
}

void sim_uvm_device_quiesce(struct sim_device *d)
{
    uintptr_t base = (uintptr_t)d->window + d->mem_bytes;
    while (__atomic_exchange_n(&remote_lock, 1, __ATOMIC_ACQUIRE))
        sched_yield();
    for (unsigned i = 0; i < nremote; i++) {
        uint64_t b = (remote_pages[i] - base) / SIM_UVM_BLOCK;
        if (__atomic_load_n(&d->uvm->state[b], __ATOMIC_ACQUIRE) == SIDE_HOST)
            mprotect((void *)remote_pages[i], page_size, PROT_NONE);
    }
    nremote = 0;
    __atomic_store_n(&remote_lock, 0, __ATOMIC_RELEASE);
}

bool sim_uvm_device_fault(struct sim_device *d, uintptr_t addr, void *uc)
{
    uintptr_t base = (uintptr_t)d->window + d->mem_bytes;
    if (addr < base || addr >= base + d->managed_bytes)
        return false;
    if (__atomic_load_n(&d->sh->uvm_lost, __ATOMIC_ACQUIRE))
        return false;   /* the kernel's fault is fatal (simgpu_profiler_reserve) */
    uint64_t b = (addr - base) / SIM_UVM_BLOCK;
    bool write = sim_fault_is_write(uc);
    uint8_t adv = __atomic_load_n(&d->uvm->advice[b], __ATOMIC_RELAXED);
    if ((adv & (SIM_ADVISE_ACCESSED_BY | SIM_ADVISE_PREFER_HOST)) && remote_access(d, b, addr, write))
        return true;
    return acquire(d, b, true, write, NULL);
}

/* Host: cuMemAdvise sets or clears `bit` (SIM_ADVISE_*) on [addr, addr+bytes). */
void sim_uvm_set_advice(struct sim_device *d, uint64_t addr, uint64_t bytes, unsigned bit, bool on)
{
    uintptr_t base = (uintptr_t)d->window + d->mem_bytes;
    if (bytes == 0 || addr < base || addr - base >= d->managed_bytes)
        return;
    uint64_t first = (addr - base) / SIM_UVM_BLOCK, last = (addr - base + bytes - 1) / SIM_UVM_BLOCK;
    for (uint64_t b = first; b <= last && b < d->uvm->nblocks; b++) {
        if (on)
            __atomic_fetch_or(&d->uvm->advice[b], (uint8_t)bit, __ATOMIC_RELAXED);
        else
            __atomic_fetch_and(&d->uvm->advice[b], (uint8_t)~bit, __ATOMIC_RELAXED);
    }
}

/* Bulk migration: to the device by revoking from the host; to the host by
 * closing this side and granting the block to the host.  `how`: 1 to the
 * device, 0 to the host, SIM_PREFETCH_DISCARD home without moving bytes
 * (the blocks were freed). */
void sim_uvm_prefetch(struct sim_device *d, uint64_t addr, uint64_t bytes, unsigned how)
{
    bool to_device = how == 1, discard = how == SIM_PREFETCH_DISCARD;
    uintptr_t base = (uintptr_t)d->window + d->mem_bytes;
    if (bytes == 0 || addr < base || addr - base >= d->managed_bytes)
        return;
    uint64_t first = (addr - base) / SIM_UVM_BLOCK;
    uint64_t last = (addr - base + bytes - 1) / SIM_UVM_BLOCK;
    if (last >= d->uvm->nblocks)
        last = d->uvm->nblocks - 1;
    uint64_t moved = 0;
    for (uint64_t b = first; b <= last; b++) {
        if (to_device) {
            acquire(d, b, false, true, &moved);
            continue;
        }
        if (discard)
            __atomic_store_n(&d->uvm->advice[b], 0, __ATOMIC_RELAXED);  /* freed: no advice */
        if (give_to_host(d, b) && !discard) {
            __atomic_fetch_add(&d->sh->stats.uvm_migrated_bytes, SIM_UVM_BLOCK, __ATOMIC_RELAXED);
            moved += SIM_UVM_BLOCK;
        }
    }
    /* one bulk transfer, in stream order (the prefetch op holds its
     * stream until it ends) */
    if (moved)
        sim_bus_transfer(d, to_device ? SIMGPU_BUS_HTOD : SIMGPU_BUS_DTOH, SIMGPU_BUS_MIGRATION, moved);
}
