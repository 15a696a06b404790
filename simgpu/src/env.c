/* env.c — every SIMGPU_* knob, read from one table. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim.h"

enum knob_kind { KNOB_ULONG, KNOB_BOOL };

struct knob {
    const char *name;
    enum knob_kind kind;
    unsigned long def, min, max;
    size_t offset;              /* in struct sim_env */
    size_t width;               /* sizeof the field */
    const char *help;
};

#define KNOB(n, k, d, lo, hi, field, h) \
    { n, k, d, lo, hi, offsetof(struct sim_env, field), sizeof(((struct sim_env *)0)->field), h }

static const struct knob knobs[] = {
    KNOB("SIMGPU_MEM_MB", KNOB_ULONG, 1024, 16, 1ul << 20, mem_mb, "device memory per device, MiB"),
    KNOB("SIMGPU_DEVICES", KNOB_ULONG, 1, 1, SIM_MAX_DEVICES, devices, "number of simulated devices"),
    KNOB("SIMGPU_WORKERS", KNOB_ULONG, 0, 0, SIM_FIBER_SLOTS, workers, "worker threads per device (0: min(ncpu, 8))"),
    KNOB("SIMGPU_STATS", KNOB_BOOL, 0, 0, 1, stats, "print per-device accounting at exit"),
    KNOB("SIMGPU_UVM_FAULT_US", KNOB_ULONG, 20, 0, 1000000, uvm_fault_us, "modelled cost of one UVM fault, us"),
    KNOB("SIMGPU_HMM", KNOB_BOOL, 0, 0, 1, hmm,
         "1: kernels reach the host's shared file mappings without registration (HMM)"),
    KNOB("SIMGPU_BUS_GBPS", KNOB_ULONG, 25, 0, 100000, bus_gbps,
         "host<->device link rate per direction, GB/s (0: no bus model)"),
    KNOB("SIMGPU_BUS_LATENCY_US", KNOB_ULONG, 10, 0, 1000000, bus_latency_us,
         "cost of one transfer on the link, us"),
};

static void store(struct sim_env *env, const struct knob *k, unsigned long v)
{
    char *p = (char *)env + k->offset;
    if (k->kind == KNOB_BOOL)
        *(bool *)p = v != 0;
    else if (k->width == sizeof(unsigned))
        *(unsigned *)p = (unsigned)v;
    else
        *(unsigned long *)p = v;
}

/* Out-of-range or malformed values fall back to the default, with one line. */
void sim_env_load(struct sim_env *env)
{
    memset(env, 0, sizeof(*env));
    for (size_t i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++) {
        const struct knob *k = &knobs[i];
        unsigned long v = k->def;
        const char *s = getenv(k->name);
        if (s && *s) {
            char *end;
            unsigned long parsed = strtoul(s, &end, 10);
            if (*end || parsed < k->min || parsed > k->max)
                sim_log("%s=%s is not in [%lu, %lu]; using %lu", k->name, s, k->min, k->max, k->def);
            else
                v = parsed;
        }
        store(env, k, v);
    }
    if (env->workers == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        env->workers = n < 2 ? 2 : n > 8 ? 8 : (unsigned)n;
    }
}
