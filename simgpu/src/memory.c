/*
 * memory.c — what a pointer is (UVA classification) and where the host's
 * copy code may touch it.  Device memory is reached only through the shadow
 * mapping; the application's addresses of it stay PROT_NONE in the host.
 */
#include <errno.h>

#include "sim.h"

int sim_ptr_classify(uint64_t p, uint64_t len, struct sim_device **dp, unsigned char **hostview)
{
    for (int i = 0; i < sim.ndevices; i++) {
        struct sim_device *d = &sim.dev[i];
        uint64_t base = (uint64_t)(uintptr_t)d->window;
        if (p < base || p >= base + d->window_bytes)
            continue;
        uint64_t off = p - base;
        bool managed = off >= d->mem_bytes;
        struct sim_alloc *a = managed ? &d->managed_mem : &d->device_mem;
        uint64_t aoff = managed ? off - d->mem_bytes : off;
        pthread_mutex_lock(&d->alloc_lock);
        const struct sim_extent *e = sim_alloc_find(a, aoff, len);
        pthread_mutex_unlock(&d->alloc_lock);
        if (!e)
            return -EINVAL;
        *dp = d;
        if (hostview)
            *hostview = managed ? d->window + off : d->shadow + off;
        return managed ? SIM_PTR_MANAGED : SIM_PTR_DEVICE;
    }
    int v = sim_vmm_find(p, len, dp, hostview);
    if (v)
        return v < 0 ? v : SIM_PTR_DEVICE;
    return SIM_PTR_HOST;
}
