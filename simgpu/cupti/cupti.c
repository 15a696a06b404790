/*
 * libcupti.so.13 — the part of CUPTI's activity API a program uses to learn
 * where kernels fault on managed memory: the unified-memory counter
 * GPU_PAGE_FAULT, delivered as CUpti_ActivityUnifiedMemoryCounter3 records
 * through the buffer callbacks.  The records come from the simulated
 * device's fault log (simgpu_fault_log_read); one record per 64 KiB block
 * that a kernel's fault migrated to the device.
 *
 * Other activity kinds and counter kinds are refused with an error (so a
 * program can tell what it did not get); CUPTI's other functions are not
 * here at all.  Records are delivered by a flush only, from the flushing
 * thread.
 *
 * CUPTI's start-up (its first configure, enable, disable or register
 * call) takes device memory of its own: 12 MiB, what an H200 lost when
 * the unified-memory counter was turned on (docs/hardware.md), of the
 * current context's device, else of each device whose primary context
 * another thread made (simgpu_profiler_reserve).  Without room it fails
 * as it did on the H200: that call and every later configure, enable,
 * disable or register call answer CUPTI_ERROR_NOT_INITIALIZED, and a
 * kernel that then faults on managed memory ends in
 * CUDA_ERROR_ILLEGAL_ADDRESS.
 */
#include <cupti.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "simgpu.h"

#define MAX_DEVICES 64
#define CUPTI_EXPORT __attribute__((visibility("default")))

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static CUpti_BuffersCallbackRequestFunc want_buffer;
static CUpti_BuffersCallbackCompleteFunc give_buffer;
static bool faults_configured, um_enabled;
static uint64_t cursor[MAX_DEVICES];
static uint64_t dropped;
static int started;     /* 0: not yet, 1: up, -1: failed for want of device memory */

#define START_BYTES ((size_t)12 << 20)

/* Under the lock, at each activity call: the start-up, once. */
static CUptiResult start_up(void)
{
    if (started == 0)
        started = simgpu_profiler_reserve(START_BYTES) == -ENOMEM ? -1 : 1;
    return started < 0 ? CUPTI_ERROR_NOT_INITIALIZED : CUPTI_SUCCESS;
}

typedef CUpti_ActivityUnifiedMemoryCounter3 um_record;

static int device_count(void)
{
    int n = 0;
    if (cuDeviceGetCount(&n) != CUDA_SUCCESS)
        return 0;
    return n > MAX_DEVICES ? MAX_DEVICES : n;
}

/* Under the lock: start or stop the device's log to match the settings. */
static CUptiResult apply(void)
{
    int rc = simgpu_fault_log_enable(faults_configured && um_enabled);
    if (rc == -ENODEV && !(faults_configured && um_enabled))
        return CUPTI_SUCCESS;
    return rc ? CUPTI_ERROR_NOT_INITIALIZED : CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult CUPTIAPI cuptiActivityConfigureUnifiedMemoryCounter(
    CUpti_ActivityUnifiedMemoryCounterConfig *config, uint32_t count)
{
    if (!config || !count)
        return CUPTI_ERROR_INVALID_PARAMETER;
    for (uint32_t i = 0; i < count; i++)
        if (config[i].kind != CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT && config[i].enable)
            return CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED;
    pthread_mutex_lock(&lock);
    CUptiResult r = start_up();
    if (r != CUPTI_SUCCESS) {
        pthread_mutex_unlock(&lock);
        return r;
    }
    for (uint32_t i = 0; i < count; i++)
        if (config[i].kind == CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT)
            faults_configured = config[i].enable != 0;
    r = apply();
    pthread_mutex_unlock(&lock);
    return r;
}

/* cuptiActivityEnable/Disable: only the unified-memory counters. */
static CUptiResult set_um(CUpti_ActivityKind kind, bool enable)
{
    if (kind != CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER)
        return CUPTI_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&lock);
    CUptiResult r = start_up();
    if (r != CUPTI_SUCCESS) {
        pthread_mutex_unlock(&lock);
        return r;
    }
    um_enabled = enable;
    r = apply();
    if (r != CUPTI_SUCCESS && enable)
        um_enabled = false;
    pthread_mutex_unlock(&lock);
    return r;
}

CUPTI_EXPORT CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind)
{
    return set_um(kind, true);
}

CUPTI_EXPORT CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind)
{
    return set_um(kind, false);
}

CUPTI_EXPORT CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc requested,
                                                                 CUpti_BuffersCallbackCompleteFunc completed)
{
    if (!requested || !completed)
        return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&lock);
    CUptiResult r = start_up();
    if (r == CUPTI_SUCCESS) {
        want_buffer = requested;
        give_buffer = completed;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* Fills one buffer from the devices' logs; false when they had nothing. */
static bool fill_one(CUpti_BuffersCallbackRequestFunc req, CUpti_BuffersCallbackCompleteFunc done, int ndev)
{
    uint8_t *buf = NULL;
    size_t size = 0, max_records = 0;
    struct simgpu_fault f[64];
    pthread_mutex_lock(&lock);
    bool any = false;
    for (int d = 0; d < ndev && !any; d++) {
        uint64_t probe = cursor[d], lost = 0;
        any = simgpu_fault_log_read(d, &probe, f, 1, &lost) > 0 || lost;
    }
    pthread_mutex_unlock(&lock);
    if (!any)
        return false;
    req(&buf, &size, &max_records);
    if (!buf || size < sizeof(um_record)) {
        if (buf)
            done(NULL, 0, buf, size, 0);    /* the client's buffer goes back empty */
        return false;   /* no room: the records stay in the log */
    }
    size_t cap = size / sizeof(um_record), n = 0;
    if (max_records && max_records < cap)
        cap = max_records;
    pthread_mutex_lock(&lock);
    for (int d = 0; d < ndev && n < cap; d++) {
        for (;;) {
            unsigned want = cap - n < 64 ? (unsigned)(cap - n) : 64;
            int got = want ? simgpu_fault_log_read(d, &cursor[d], f, want, &dropped) : 0;
            if (got <= 0)
                break;
            for (int i = 0; i < got; i++) {
                um_record *r = (um_record *)(void *)(buf + n++ * sizeof(um_record));
                memset(r, 0, sizeof(*r));
                r->kind = CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER;
                r->counterKind = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT;
                r->value = 1;
                r->start = f[i].start_ns;
                r->end = f[i].end_ns;
                r->address = f[i].address;
                r->srcId = r->dstId = f[i].device;
                r->processId = (uint32_t)getpid();
                r->flags = f[i].access == 2 ? CUPTI_ACTIVITY_UNIFIED_MEMORY_ACCESS_TYPE_WRITE
                                            : CUPTI_ACTIVITY_UNIFIED_MEMORY_ACCESS_TYPE_READ;
            }
        }
    }
    pthread_mutex_unlock(&lock);
    done(NULL, 0, buf, size, n * sizeof(um_record));
    return n > 0;
}

CUPTI_EXPORT CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag)
{
    (void)flag;
    pthread_mutex_lock(&lock);
    CUpti_BuffersCallbackRequestFunc req = want_buffer;
    CUpti_BuffersCallbackCompleteFunc done = give_buffer;
    pthread_mutex_unlock(&lock);
    if (!req || !done)
        return CUPTI_ERROR_INVALID_OPERATION;
    int ndev = device_count();
    /* What the logs hold now, not what kernels still running add: at most
     * one ring's worth per device. */
    for (int i = 0; i < 8192 * (ndev ? ndev : 1) && fill_one(req, done, ndev); i++) {
    }
    return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult CUPTIAPI cuptiActivityFlush(CUcontext context, uint32_t streamId, uint32_t flag)
{
    (void)context;
    (void)streamId;
    return cuptiActivityFlushAll(flag);
}

CUPTI_EXPORT CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **record)
{
    if (!buffer || !record)
        return CUPTI_ERROR_INVALID_PARAMETER;
    uint8_t *next = *record ? (uint8_t *)*record + sizeof(um_record) : buffer;
    if (next < buffer || (size_t)(next - buffer) + sizeof(um_record) > valid) {
        *record = NULL;
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    }
    *record = (CUpti_Activity *)(void *)next;
    return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t streamId,
                                                                    size_t *out)
{
    (void)context;
    (void)streamId;
    if (!out)
        return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&lock);
    *out = (size_t)dropped;
    dropped = 0;
    pthread_mutex_unlock(&lock);
    return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult CUPTIAPI cuptiGetVersion(uint32_t *version)
{
    if (!version)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *version = CUPTI_API_VERSION;
    return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char **str)
{
    if (!str)
        return CUPTI_ERROR_INVALID_PARAMETER;
    switch (result) {
    case CUPTI_SUCCESS: *str = "CUPTI_SUCCESS"; break;
    case CUPTI_ERROR_INVALID_PARAMETER: *str = "CUPTI_ERROR_INVALID_PARAMETER"; break;
    case CUPTI_ERROR_NOT_INITIALIZED: *str = "CUPTI_ERROR_NOT_INITIALIZED"; break;
    case CUPTI_ERROR_INVALID_OPERATION: *str = "CUPTI_ERROR_INVALID_OPERATION"; break;
    case CUPTI_ERROR_MAX_LIMIT_REACHED: *str = "CUPTI_ERROR_MAX_LIMIT_REACHED"; break;
    case CUPTI_ERROR_NOT_SUPPORTED: *str = "CUPTI_ERROR_NOT_SUPPORTED"; break;
    case CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED: *str = "CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED"; break;
    default: *str = "CUPTI_ERROR_UNKNOWN"; return CUPTI_ERROR_INVALID_PARAMETER;
    }
    return CUPTI_SUCCESS;
}
