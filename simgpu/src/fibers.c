/*
 * fibers.c — the threads of a block as cooperative fibers (device process).
 *
 * A kernel compiled through simgpu_kernel.h registers a per-thread entry.
 * A worker runs a block on fibers: a fiber runs the block's threads one
 * after the other, in thread order, until one waits — at __syncthreads (the
 * block), or at a warp operation (__syncwarp, shuffles, votes: the lanes of
 * its mask); then that thread keeps the fiber and a new fiber goes on with
 * the next thread.  After a pass, every wait whose threads have all arrived
 * is released and another pass resumes the released threads (a fiber whose
 * thread ends goes on with threads not yet started, if any), until all have
 * ended.  A block whose threads never wait thus costs one fiber switch.  A pass in
 * which nothing can be released while threads still wait is a deadlock: the
 * block is dropped and the launch fails (CUDA_ERROR_LAUNCH_FAILED), where a
 * real GPU would hang.  Threads that have ended do not hold a barrier up.
 *
 * A fiber's stack is taken when the fiber starts and given back when it
 * has no thread left to run, so a block whose threads never wait uses one
 * stack.  Each worker
 * has a slot of the fiber area (vmm.c: carved from the VMM arena, because
 * the device process must add no mapping of its own) holding the block's
 * dynamic shared memory, the warps' exchange slots, this state and up to
 * 1024 stacks (SIM_FIBER_STACK_BYTES each, the lowest page a guard), opened
 * the first time each is used.
 *
 * The switch saves the callee-saved registers (x86-64, below; not the
 * floating-point control words: a kernel cannot change them); elsewhere
 * ucontext.  ASan and TSan are
 * told of every switch, so neither reports the fibers' stacks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "sim.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define FIBER_ASAN 1
#endif
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#define DYN_SMEM_BYTES (256ul << 10)           /* at most 48 KiB are launched today */
#define WARP_SLOTS_OFF DYN_SMEM_BYTES
#define WARPS (SIM_FIBER_MAX / 32)
#define STATE_OFF (WARP_SLOTS_OFF + WARPS * 32 * sizeof(uint64_t))

enum fstate { F_NEW, F_RUNNING, F_READY, F_WAIT_BLOCK, F_WAIT_WARP, F_DONE };


/* A thread of the block: where it is suspended while it waits. */
struct fiber {
#if defined(__x86_64__)
    void *sp;
#else
    ucontext_t uc;
#endif
    int stack;                  /* the stack it runs on */
    unsigned warp_mask;         /* the mask of the warp operation waited at */
#if defined(FIBER_ASAN)
    void *fake_stack;
#endif
};

struct slot {
    unsigned char *area;
    /* the block now running */
    simgpu_thread_fn fn;
    const void *args;
    struct simgpu_thread_ids ids;
    unsigned nthreads, live, cur;
    unsigned next_new;          /* the next thread not yet started ... */
    unsigned next_tid[3];       /* ... and its threadIdx */
    int starting_stack;         /* the stack of the fiber being started */
    unsigned block_waiting;     /* threads at __syncthreads */
    int bar_count, bar_result, bar_participants;
    unsigned warp_arrived[WARPS];
    /* stacks */
    unsigned stacks_open;       /* [0, stacks_open) are usable */
    unsigned nfree;
    int free_stack[SIM_FIBER_MAX];
    /* the worker's own context */
#if defined(__x86_64__)
    void *sched_sp;
#else
    ucontext_t sched_uc;
#endif
#if defined(FIBER_ASAN)
    void *sched_fake_stack;
    const void *sched_bottom;
    size_t sched_size;
#endif
    struct fiber f[SIM_FIBER_MAX];
    uint8_t state[SIM_FIBER_MAX];   /* enum fstate, per thread */
};

_Static_assert(STATE_OFF + sizeof(struct slot) <= SIM_FIBER_HEAD_BYTES, "fiber slot state too large");

static __thread struct slot *me;           /* this worker's slot */
static __thread bool on_fiber;             /* a fiber of `me` is running */
static unsigned next_slot;

#if defined(__x86_64__)
/* sim_fiber_switch(&save_sp, to_sp): pushes rbp, rbx, r12-r15, saves rsp,
 * loads to_sp and pops the same.  A new
 * fiber's stack is laid out so that the pops end in sim_fiber_entry with
 * r12 = argument and r13 = function, rsp 16-byte aligned. */
__asm__(".text\n"
        ".p2align 4\n"
        ".globl sim_fiber_switch\n"
        ".hidden sim_fiber_switch\n"
        ".type sim_fiber_switch,@function\n"
        "sim_fiber_switch:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size sim_fiber_switch, .-sim_fiber_switch\n"
        ".p2align 4\n"
        ".globl sim_fiber_entry\n"
        ".hidden sim_fiber_entry\n"
        ".type sim_fiber_entry,@function\n"
        "sim_fiber_entry:\n"
        "    movq %r12, %rdi\n"
        "    callq *%r13\n"
        "    ud2\n"
        ".size sim_fiber_entry, .-sim_fiber_entry\n");
void sim_fiber_switch(void **save_sp, void *to_sp) __attribute__((visibility("hidden")));
extern char sim_fiber_entry[] __attribute__((visibility("hidden")));
#endif

/* A fiber's first frame never returns (it switches away for good), so TSan
 * must not count it: its shadow call stack would grow by a frame per
 * fiber until it overflows.  leave() is kept out for the same reason. */
#define NOT_TRACED __attribute__((no_sanitize_thread))

static void fiber_main(struct slot *s) __attribute__((noreturn)) NOT_TRACED;

static struct slot *slot_get(void)
{
    if (me)
        return me;
    unsigned n = __atomic_fetch_add(&next_slot, 1, __ATOMIC_RELAXED);
    unsigned char *area = sim_vmm_fiber_area(n);
    if (!area)
        return NULL;
    if (mprotect(area, SIM_FIBER_HEAD_BYTES, PROT_READ | PROT_WRITE) < 0) {
        sim_log("fiber area of worker %u: mprotect: %s", n, strerror(errno));
        return NULL;
    }
    struct slot *s = (struct slot *)(void *)(area + STATE_OFF);
    s->area = area;
    me = s;
    return s;
}

/* The lowest usable byte of stack i (above its guard page). */
static unsigned char *stack_lo(const struct slot *s, int i)
{
    return s->area + SIM_FIBER_HEAD_BYTES + (uint64_t)i * SIM_FIBER_STACK_BYTES + 4096;
}

static int stack_take(struct slot *s)
{
    if (s->nfree)
        return s->free_stack[--s->nfree];
    if (s->stacks_open == SIM_FIBER_MAX)
        return -1;  /* cannot happen: one stack per thread at most */
    unsigned i = s->stacks_open;
    if (mprotect(stack_lo(s, (int)i), SIM_FIBER_STACK_BYTES - 4096, PROT_READ | PROT_WRITE) < 0) {
        sim_log("fiber stack %u: mprotect: %s", i, strerror(errno));
        return -1;
    }
    s->stacks_open++;
    return (int)i;
}

/* Worker -> the fiber on `stack`, at `sp`; returns when it switches back. */
static void switch_in(struct slot *s, int stack, void *sp_or_uc)
{
    on_fiber = true;
#if defined(FIBER_ASAN)
    __sanitizer_start_switch_fiber(&s->sched_fake_stack, stack_lo(s, stack), SIM_FIBER_STACK_BYTES - 4096);
#endif
    (void)stack;
#if defined(__x86_64__)
    sim_fiber_switch(&s->sched_sp, sp_or_uc);
#else
    swapcontext(&s->sched_uc, (ucontext_t *)sp_or_uc);
#endif
#if defined(FIBER_ASAN)
    __sanitizer_finish_switch_fiber(s->sched_fake_stack, NULL, NULL);
#endif
    on_fiber = false;
}

/* Resume thread t, which waited. */
static void resume(struct slot *s, unsigned t)
{
    s->cur = t;
    s->state[t] = F_RUNNING;
#if defined(__x86_64__)
    switch_in(s, s->f[t].stack, s->f[t].sp);
#else
    switch_in(s, s->f[t].stack, &s->f[t].uc);
#endif
}

/* Fiber -> worker: thread s->cur waits (its context is kept in its
 * struct fiber), or, `ending`, the fiber has nothing left to run. */
NOT_TRACED static void leave(struct slot *s, bool ending)
{
    struct fiber *f = &s->f[s->cur];
#if defined(FIBER_ASAN)
    __sanitizer_start_switch_fiber(ending ? NULL : &f->fake_stack, s->sched_bottom, s->sched_size);
#endif
    if (ending) {
#if defined(__x86_64__)
        void *dead;
        sim_fiber_switch(&dead, s->sched_sp);
#else
        setcontext(&s->sched_uc);
#endif
        __builtin_unreachable();
    }
#if defined(__x86_64__)
    sim_fiber_switch(&f->sp, s->sched_sp);
#else
    swapcontext(&f->uc, &s->sched_uc);
#endif
#if defined(FIBER_ASAN)
    __sanitizer_finish_switch_fiber(f->fake_stack, &s->sched_bottom, &s->sched_size);
#endif
}

#if !defined(__x86_64__)
static void fiber_main_uc(unsigned hi, unsigned lo)
{
    fiber_main((struct slot *)(uintptr_t)(((uint64_t)hi << 32) | lo));
}
#endif

/* Start a fiber on `stack`: it runs threads not yet started. */
static void start_fiber(struct slot *s, int stack)
{
    unsigned char *top = stack_lo(s, stack) + (SIM_FIBER_STACK_BYTES - 4096);
    s->starting_stack = stack;
#if defined(__x86_64__)
    uint64_t *sp = (uint64_t *)(void *)top - 7;
    sp[0] = sp[1] = 0;                          /* r15, r14 */
    sp[2] = (uint64_t)(uintptr_t)fiber_main;    /* r13 */
    sp[3] = (uint64_t)(uintptr_t)s;             /* r12 */
    sp[4] = sp[5] = 0;                          /* rbx, rbp */
    sp[6] = (uint64_t)(uintptr_t)sim_fiber_entry;
    switch_in(s, stack, sp);
#else
    static __thread ucontext_t uc;
    getcontext(&uc);
    uc.uc_stack.ss_sp = stack_lo(s, stack);
    uc.uc_stack.ss_size = SIM_FIBER_STACK_BYTES - 4096;
    uc.uc_link = NULL;
    uint64_t p = (uint64_t)(uintptr_t)s;
    makecontext(&uc, (void (*)(void))fiber_main_uc, 2, (unsigned)(p >> 32), (unsigned)p);
    switch_in(s, stack, &uc);
    (void)top;
#endif
}

NOT_TRACED static void fiber_main(struct slot *s)
{
#if defined(FIBER_ASAN)
    __sanitizer_finish_switch_fiber(NULL, &s->sched_bottom, &s->sched_size);
#endif
    int stack = s->starting_stack;
    struct simgpu_thread_ids ids = s->ids;
    while (s->next_new < s->nthreads) {
        unsigned t = s->next_new++;
        ids.thread[0] = s->next_tid[0];
        ids.thread[1] = s->next_tid[1];
        ids.thread[2] = s->next_tid[2];
        if (++s->next_tid[0] == ids.block_dim[0]) {
            s->next_tid[0] = 0;
            if (++s->next_tid[1] == ids.block_dim[1]) {
                s->next_tid[1] = 0;
                s->next_tid[2]++;
            }
        }
        s->cur = t;
        s->state[t] = F_RUNNING;
        s->f[t].stack = stack;
        s->fn(s->args, &ids);
        /* s->cur is t again: a wait switched back to this thread */
        s->state[t] = F_DONE;
        s->live--;
    }
    s->free_stack[s->nfree++] = stack;
    leave(s, true);
    __builtin_unreachable();
}

static struct slot *in_fiber(const char *what)
{
    if (!on_fiber || !me) {
        fprintf(stderr, "simgpu: %s called outside a kernel thread of a block\n", what);
        abort();
    }
    return me;
}

static unsigned lane_of(const struct slot *s) { return s->cur % 32; }
static unsigned warp_of(const struct slot *s) { return s->cur / 32; }
static uint64_t *warp_slots(const struct slot *s)
{
    return (uint64_t *)(void *)(s->area + WARP_SLOTS_OFF) + (size_t)warp_of(s) * 32;
}

/* The lanes of warp w that have not ended. */
static unsigned live_lanes(const struct slot *s, unsigned w)
{
    unsigned m = 0;
    for (unsigned l = 0; l < 32; l++) {
        unsigned t = w * 32 + l;
        if (t < s->nthreads && s->state[t] != F_DONE)
            m |= 1u << l;
    }
    return m;
}

/* Release what can be released; false when nothing could. */
static bool release(struct slot *s)
{
    bool any = false;
    if (s->block_waiting && s->block_waiting == s->live) {
        s->bar_result = s->bar_count;
        s->bar_participants = (int)s->block_waiting;
        s->bar_count = 0;
        s->block_waiting = 0;
        for (unsigned t = 0; t < s->nthreads; t++)
            if (s->state[t] == F_WAIT_BLOCK)
                s->state[t] = F_READY;
        any = true;
    }
    for (unsigned w = 0; w * 32 < s->nthreads; w++) {
        unsigned arrived = s->warp_arrived[w];
        if (!arrived)
            continue;
        unsigned need = 0;
        for (unsigned l = 0; l < 32; l++)
            if (arrived & (1u << l))
                need |= s->f[w * 32 + l].warp_mask;
        need &= live_lanes(s, w);
        if ((arrived & need) != need)
            continue;
        for (unsigned l = 0; l < 32; l++)
            if (arrived & (1u << l))
                s->state[w * 32 + l] = F_READY;
        s->warp_arrived[w] = 0;
        any = true;
    }
    return any;
}

/* Drops the block's fibers (after a deadlock or a fault): every stack back. */
static void drop_block(struct slot *s)
{
#if defined(FIBER_ASAN)
    /* the abandoned frames' redzones would poison the next threads */
    for (unsigned i = 0; i < s->stacks_open; i++)
        __asan_unpoison_memory_region(stack_lo(s, (int)i), SIM_FIBER_STACK_BYTES - 4096);
#endif
    s->nfree = 0;
    for (unsigned i = 0; i < s->stacks_open; i++)
        s->free_stack[s->nfree++] = (int)i;
    s->live = 0;
}

int sim_fiber_run_block(simgpu_thread_fn fn, const void *args, const struct simgpu_thread_ids *ids,
                        const char *kernel)
{
    struct slot *s = slot_get();
    if (!s) {
        sim_log("kernel %s: no fiber area for this worker (more than %u workers run kernels)", kernel,
                SIM_FIBER_SLOTS);
        return -ENOSPC;
    }
    s->fn = fn;
    s->args = args;
    s->ids = *ids;
    s->nthreads = ids->block_dim[0] * ids->block_dim[1] * ids->block_dim[2];
    s->live = s->nthreads;
    s->next_new = 0;
    s->next_tid[0] = s->next_tid[1] = s->next_tid[2] = 0;
    s->block_waiting = 0;
    s->bar_count = 0;
    memset(s->warp_arrived, 0, sizeof(s->warp_arrived));
    memset(s->state, F_NEW, s->nthreads);
    for (bool first = true;; first = false) {
        if (!first)
            for (unsigned t = 0; t < s->nthreads; t++)
                if (s->state[t] == F_READY)
                    resume(s, t);
        while (s->next_new < s->nthreads) {
            int k = stack_take(s);
            if (k < 0) {
                drop_block(s);
                return -ENOMEM;
            }
            start_fiber(s, k);
        }
        if (s->live == 0)
            return 0;
        if (!release(s)) {
            unsigned at_block = s->block_waiting, at_warp = 0;
            for (unsigned t = 0; t < s->nthreads; t++)
                at_warp += s->state[t] == F_WAIT_WARP;
            sim_log("kernel %s, block (%u,%u,%u): %u threads wait at __syncthreads and %u at warp operations "
                    "that none of them can pass (a real GPU would hang): the launch fails",
                    kernel, ids->block[0], ids->block[1], ids->block[2], at_block, at_warp);
            drop_block(s);
            return -EDEADLK;
        }
    }
}

void sim_fiber_escape(void)
{
    struct slot *s = me;
    if (!s || !on_fiber)
        return;
    on_fiber = false;
#if defined(FIBER_ASAN)
    __sanitizer_start_switch_fiber(NULL, s->sched_bottom, s->sched_size);
#endif
    drop_block(s);
}

/* ---- what a kernel thread calls ---------------------------------------- */

__attribute__((visibility("default")))
void simgpu_syncthreads(void)
{
    int n;
    (void)simgpu_syncthreads_count(0, &n);
}

__attribute__((visibility("default")))
int simgpu_syncthreads_count(int pred, int *participants)
{
    struct slot *s = in_fiber("__syncthreads");
    s->bar_count += pred != 0;
    s->block_waiting++;
    s->state[s->cur] = F_WAIT_BLOCK;
    leave(s, false);
    /* released: nothing else was released since (that takes a whole pass) */
    if (participants)
        *participants = s->bar_participants;
    return s->bar_result;
}

static void warp_wait(struct slot *s, unsigned mask)
{
    struct fiber *f = &s->f[s->cur];
    f->warp_mask = mask | (1u << lane_of(s));
    s->state[s->cur] = F_WAIT_WARP;
    s->warp_arrived[warp_of(s)] |= 1u << lane_of(s);
    leave(s, false);
}

__attribute__((visibility("default")))
void simgpu_syncwarp(unsigned mask)
{
    warp_wait(in_fiber("__syncwarp"), mask);
}

__attribute__((visibility("default")))
uint64_t simgpu_shfl(unsigned mask, uint64_t value, int kind, int arg, int width)
{
    struct slot *s = in_fiber("__shfl_sync");
    uint64_t *slots = warp_slots(s);
    unsigned lane = lane_of(s);
    if (width < 1 || width > 32 || (width & (width - 1)))
        width = 32;     /* undefined in CUDA */
    unsigned w = (unsigned)width, base = lane & ~(w - 1), src = lane;
    switch (kind) {
    case SIMGPU_SHFL_IDX:
        src = base + ((unsigned)arg & (w - 1));
        break;
    case SIMGPU_SHFL_UP:
        if ((lane & (w - 1)) >= (unsigned)arg)
            src = lane - (unsigned)arg;
        break;
    case SIMGPU_SHFL_DOWN:
        if ((lane & (w - 1)) + (unsigned)arg < w)
            src = lane + (unsigned)arg;
        break;
    case SIMGPU_SHFL_XOR:
        src = lane ^ ((unsigned)arg & 31);
        if ((src & ~(w - 1)) > base)
            src = lane;     /* a later group: its own value */
        break;
    }
    slots[lane] = value;
    warp_wait(s, mask);
    s = me;
    uint64_t r = warp_of(s) * 32 + src < s->nthreads ? warp_slots(s)[src] : value;
    warp_wait(s, mask);     /* nobody overwrites a slot before all have read */
    return r;
}

__attribute__((visibility("default")))
unsigned simgpu_ballot(unsigned mask, int pred)
{
    struct slot *s = in_fiber("__ballot_sync");
    unsigned lane = lane_of(s);
    warp_slots(s)[lane] = pred != 0;
    warp_wait(s, mask);
    uint64_t *slots = warp_slots(s);
    unsigned b = 0, live = live_lanes(s, warp_of(s));
    for (unsigned l = 0; l < 32; l++)
        if ((mask & live & (1u << l)) && slots[l])
            b |= 1u << l;
    warp_wait(s, mask);
    return b;
}

__attribute__((visibility("default")))
unsigned simgpu_activemask(void)
{
    struct slot *s = in_fiber("__activemask");
    return live_lanes(s, warp_of(s));
}

__attribute__((visibility("default")))
void *simgpu_dynamic_shared(void)
{
    return in_fiber("dynamic shared memory")->area;
}
