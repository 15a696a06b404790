/*
 * bus.c — the host<->device link of one device, as a DMA engine sees it.
 *
 * Each direction is one link shared by everything that moves bytes across
 * it: synchronous and asynchronous copies of any host thread, the host copy
 * engine, UVM migrations in either process.  A transfer holds its link for
 * `latency + bytes / rate` (twice the byte time for pageable memory, which
 * CUDA stages through a pinned bounce buffer) and starts when the link is
 * free: transfers queue behind each other as they do on a copy engine.  The
 * booking is one compare-and-swap on a timestamp in the shared control
 * block, so host and device process book the same link.
 *
 * The caller moves its bytes at `start` and lets the transfer complete
 * (releases a gate, returns from the call, lets the faulting access retry)
 * at `end`.  The modelled time is a floor: when the CPU's memcpy is slower
 * than the link, the copy takes the memcpy's time.
 *
 * Waits under ~200 us spin on the clock (a sleep would add the timer slack,
 * 50 us by default, to a 10 us latency); longer ones sleep first.  Every
 * function here is async-signal-safe: UVM faults are paid in a SIGSEGV
 * handler.
 */
#include <errno.h>
#include <time.h>

#include "sim.h"

#define SPIN_NS 200000ull

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void sim_bus_wait_until(uint64_t ns)
{
    if (!ns)
        return;
    int saved = errno;
    uint64_t now = now_ns();
    if (ns > now + SPIN_NS) {
        uint64_t wake = ns - SPIN_NS / 2;
        struct timespec ts = { (time_t)(wake / 1000000000ull), (long)(wake % 1000000000ull) };
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
    }
    while (now_ns() < ns) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    errno = saved;
}

static struct sim_bus_slot book(struct sim_device *d, enum simgpu_bus_dir dir, enum simgpu_bus_kind kind,
                                uint64_t bytes, bool pageable, bool latency)
{
    struct simgpu_stats *st = &d->sh->stats;
    __atomic_fetch_add(&st->bus_bytes[dir][kind], bytes, __ATOMIC_RELAXED);
    __atomic_fetch_add(&st->bus_transfers[dir][kind], 1, __ATOMIC_RELAXED);
    unsigned long gbps = sim.env.bus_gbps;
    if (!gbps)
        return (struct sim_bus_slot){ 0, 0 };
    /* 1 GB/s is one byte a nanosecond */
    uint64_t dur = (latency ? (uint64_t)sim.env.bus_latency_us * 1000ull : 0) +
                   (bytes * (pageable ? 2u : 1u) + gbps - 1) / gbps;
    uint64_t now = now_ns();
    uint64_t *link = &d->sh->bus_free_ns[dir];
    uint64_t free_at = __atomic_load_n(link, __ATOMIC_RELAXED), start;
    do
        start = free_at > now ? free_at : now;
    while (!__atomic_compare_exchange_n(link, &free_at, start + dur, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    __atomic_fetch_add(&st->bus_ns[dir][kind], dur, __ATOMIC_RELAXED);
    __atomic_fetch_add(&st->bus_wait_ns[dir], start - now, __ATOMIC_RELAXED);
    return (struct sim_bus_slot){ start, start + dur };
}

struct sim_bus_slot sim_bus_reserve(struct sim_device *d, enum simgpu_bus_dir dir, enum simgpu_bus_kind kind,
                                    uint64_t bytes, bool pageable)
{
    return book(d, dir, kind, bytes, pageable, true);
}

struct sim_bus_slot sim_bus_reserve_access(struct sim_device *d, enum simgpu_bus_dir dir, uint64_t bytes)
{
    return book(d, dir, SIMGPU_BUS_HOST_ACCESS, bytes, false, false);
}

void sim_bus_transfer(struct sim_device *d, enum simgpu_bus_dir dir, enum simgpu_bus_kind kind, uint64_t bytes)
{
    sim_bus_wait_until(sim_bus_reserve(d, dir, kind, bytes, false).end_ns);
}
