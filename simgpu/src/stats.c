/* stats.c — per-device accounting: query and the SIMGPU_STATS=1 report. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "sim.h"

void sim_stats_add(struct sim_device *d, uint64_t *counter, uint64_t v)
{
    (void)d;
    __atomic_fetch_add(counter, v, __ATOMIC_RELAXED);
}

__attribute__((visibility("default")))
int simgpu_stats_get(int device, struct simgpu_stats *out)
{
    if (!out || device < 0)
        return -EINVAL;
    if (!__atomic_load_n(&sim.initialized, __ATOMIC_ACQUIRE))
        return -ENODEV;
    if (device >= sim.ndevices)
        return -EINVAL;
    const uint64_t *src = (const uint64_t *)&sim.dev[device].sh->stats;
    uint64_t *dst = (uint64_t *)out;
    for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
        dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
    struct sim_device *d = &sim.dev[device];
    pthread_mutex_lock(&d->alloc_lock);
    out->device_bytes_in_use = d->device_mem.used_bytes;
    out->managed_bytes_in_use = d->managed_mem.used_bytes;
    pthread_mutex_unlock(&d->alloc_lock);
    out->uvm_device_resident_bytes = sim_uvm_device_resident(d);
    return 0;
}

__attribute__((visibility("default")))
int simgpu_fault_log_enable(int on)
{
    if (!__atomic_load_n(&sim.initialized, __ATOMIC_ACQUIRE))
        return -ENODEV;
    for (int i = 0; i < sim.ndevices; i++)
        sim_uvm_fault_log_enable(&sim.dev[i], on != 0);
    return 0;
}

__attribute__((visibility("default")))
int simgpu_fault_log_read(int device, uint64_t *cursor, struct simgpu_fault *out, unsigned max,
                          uint64_t *dropped)
{
    if (!cursor || !out || !dropped || device < 0)
        return -EINVAL;
    if (!__atomic_load_n(&sim.initialized, __ATOMIC_ACQUIRE))
        return -ENODEV;
    if (device >= sim.ndevices)
        return -EINVAL;
    return (int)sim_uvm_fault_log_read(&sim.dev[device], cursor, out, max, dropped);
}

void sim_stats_atexit(void)
{
    for (int i = 0; i < sim.ndevices; i++) {
        struct simgpu_stats s;
        if (simgpu_stats_get(i, &s))
            continue;
        sim_log("device %d: HtoD %" PRIu64 " B in %" PRIu64 ", DtoH %" PRIu64 " B in %" PRIu64
                ", DtoD %" PRIu64 " B in %" PRIu64 ", memset %" PRIu64 " B in %" PRIu64
                ", kernels %" PRIu64 " launched %" PRIu64 " completed, UVM faults %" PRIu64 " in %" PRIu64
                " batches, migrated %" PRIu64 " B, evicted %" PRIu64 " chunks (%" PRIu64
                " B); in use at exit: %" PRIu64 " B device, %" PRIu64 " B managed (%" PRIu64 " B on the device)",
                i, s.htod_bytes, s.htod_transfers, s.dtoh_bytes, s.dtoh_transfers, s.dtod_bytes,
                s.dtod_transfers, s.memset_bytes, s.memsets, s.kernels_launched, s.kernels_completed,
                s.uvm_faults, s.uvm_fault_batches, s.uvm_migrated_bytes, s.uvm_evictions, s.uvm_evicted_bytes,
                s.device_bytes_in_use, s.managed_bytes_in_use, s.uvm_device_resident_bytes);
        static const char *const kind[] = { "copy", "migration", "eviction", "host access" };
        for (int dir = 0; dir < 2; dir++) {
            char line[512];
            int len = snprintf(line, sizeof(line), "device %d: bus %s", i, dir == SIMGPU_BUS_HTOD ? "HtoD" : "DtoH");
            for (int k = 0; k < 4 && len > 0 && (size_t)len < sizeof(line); k++)
                len += snprintf(line + len, sizeof(line) - (size_t)len,
                                "%s %s %" PRIu64 " B in %" PRIu64 " (%.3f ms)", k ? "," : "", kind[k],
                                s.bus_bytes[dir][k], s.bus_transfers[dir][k], (double)s.bus_ns[dir][k] / 1e6);
            if (len > 0 && (size_t)len < sizeof(line))
                snprintf(line + len, sizeof(line) - (size_t)len, "; waited for the link %.3f ms",
                         (double)s.bus_wait_ns[dir] / 1e6);
            sim_log("%s", line);
        }
    }
}
