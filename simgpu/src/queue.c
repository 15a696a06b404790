/*
 * queue.c — host side of the command channel: submitting ops, waiting for
 * their completion, stream and event slots, and gated host copies.
 *
 * Every op gets a device-wide sequence number under the control lock and
 * lands in the ring in that order, so the device ingests in seq order and
 * a dependency always names an op it has already seen.
 */
#include <errno.h>
#include <string.h>

#include "sim.h"

static __thread uint32_t per_thread_slot[SIM_MAX_DEVICES];  /* 0: none yet */

int sim_submit(struct sim_device *d, struct sim_op *op, uint64_t *seq_out)
{
    int rc = sim_lock(d);
    if (rc)
        return rc;
    struct sim_shared *sh = d->sh;
    while (sh->ring_tail - sh->ring_head >= SIM_RING_SLOTS) {
        pthread_cond_broadcast(&sh->dev_cv);
        if ((rc = sim_host_wait(d)))
            return rc;
    }
    op->seq = sh->next_seq++;
    size_t len = offsetof(struct sim_op, args);
    if (op->kind == SIM_OP_KERNEL)
        len += op->u.kernel.args_bytes;
    else if (op->kind == SIM_OP_HOSTMEM)
        len += op->u.vmm.args_bytes;
    memcpy(&sh->ring[sh->ring_tail % SIM_RING_SLOTS], op, len);
    sh->ring_tail++;
    sh->streams[op->stream].submitted_seq = op->seq;
    if (seq_out)
        *seq_out = op->seq;
    pthread_cond_broadcast(&sh->dev_cv);
    sim_unlock(d);
    return 0;
}

int sim_wait_seq(struct sim_device *d, uint32_t slot, uint64_t seq)
{
    int rc = sim_lock(d);
    if (rc)
        return rc;
    d->sh->seq_waiters++;
    while (d->sh->streams[slot].completed_seq < seq)
        if ((rc = sim_host_wait(d)))
            return rc; /* the device is gone: the count no longer matters */
    d->sh->seq_waiters--;
    sim_unlock(d);
    return 0;
}

int sim_stream_sync(struct sim_device *d, uint32_t slot)
{
    int rc = sim_lock(d);
    if (rc)
        return rc;
    uint64_t seq = d->sh->streams[slot].submitted_seq;
    sim_unlock(d);
    return sim_wait_seq(d, slot, seq);
}

/* Waits for what was submitted before the call, on every stream. */
int sim_device_sync(struct sim_device *d)
{
    uint64_t target[SIM_MAX_STREAMS];
    int rc = sim_lock(d);
    if (rc)
        return rc;
    for (uint32_t s = 0; s < SIM_MAX_STREAMS; s++)
        target[s] = d->sh->streams[s].submitted_seq;
    d->sh->seq_waiters++;
    for (uint32_t s = 0; s < SIM_MAX_STREAMS; s++)
        while (d->sh->streams[s].completed_seq < target[s])
            if ((rc = sim_host_wait(d)))
                return rc; /* the device is gone: the count no longer matters */
    d->sh->seq_waiters--;
    sim_unlock(d);
    return 0;
}

int sim_slot_alloc_stream(struct sim_device *d, unsigned flags, uint32_t *slot)
{
    int rc = sim_lock(d);
    if (rc)
        return rc;
    for (uint32_t s = 1; s < SIM_MAX_STREAMS; s++) {
        struct sim_stream_slot *st = &d->sh->streams[s];
        if (!st->in_use) {
            /* submitted/completed seqs are kept: they are global and
             * monotonic, and events may still name this slot */
            st->in_use = 1;
            st->flags = flags;
            *slot = s;
            sim_unlock(d);
            return 0;
        }
    }
    sim_unlock(d);
    return -ENOSPC;
}

void sim_slot_free_stream(struct sim_device *d, uint32_t slot)
{
    if (sim_lock(d))
        return;
    d->sh->streams[slot].in_use = 0;
    sim_unlock(d);
}

int sim_slot_alloc_event(struct sim_device *d, unsigned flags, uint32_t *slot)
{
    int rc = sim_lock(d);
    if (rc)
        return rc;
    for (uint32_t s = 0; s < SIM_MAX_EVENTS; s++) {
        struct sim_event_slot *e = &d->sh->events[s];
        if (!e->in_use) {
            *e = (struct sim_event_slot){ .in_use = 1, .flags = flags };
            *slot = s;
            sim_unlock(d);
            return 0;
        }
    }
    sim_unlock(d);
    return -ENOSPC;
}

void sim_slot_free_event(struct sim_device *d, uint32_t slot)
{
    if (sim_lock(d))
        return;
    d->sh->events[slot].in_use = 0;
    sim_unlock(d);
}

CUresult sim_stream_resolve(CUstream s, bool ptds, struct sim_device **d, uint32_t *slot)
{
    if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) {
        CUresult r = sim_current_device(d);
        if (r != CUDA_SUCCESS)
            return r;
        bool per_thread = s == CU_STREAM_PER_THREAD || (s == NULL && ptds);
        if (!per_thread) {
            *slot = SIM_STREAM_LEGACY_SLOT;
            return CUDA_SUCCESS;
        }
        uint32_t *pt = &per_thread_slot[(*d)->ordinal];
        if (*pt == 0) {
            /* the per-thread default stream is a blocking stream: it
             * synchronizes with the legacy stream */
            if (sim_slot_alloc_stream(*d, 0, pt) < 0)
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        *slot = *pt;
        return CUDA_SUCCESS;
    }
    const struct sim_stream *st = (const struct sim_stream *)s;
    if (st->magic != SIM_STREAM_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    *d = &sim.dev[st->ordinal];
    *slot = st->slot;
    if ((*d)->sh->sticky_error)
        return (CUresult)(*d)->sh->sticky_error;
    return CUDA_SUCCESS;
}

/* One change of the device process's mappings (SIM_OP_VMM or
 * SIM_OP_HOSTMEM): run on the control stream, waited for, its result read
 * from the one result slot — so one at a time, from any host thread. */
static pthread_mutex_t control_lock = PTHREAD_MUTEX_INITIALIZER;

int sim_control_op(struct sim_device *d, uint32_t kind, uint32_t action, uint64_t addr, uint64_t bytes,
                   uint64_t memfd_off, int prot, const void *args, size_t args_bytes)
{
    if (args_bytes > SIMGPU_MAX_ARGS_BYTES)
        return -E2BIG;
    struct sim_op op = { .kind = kind, .stream = SIM_STREAM_CONTROL_SLOT };
    op.u.vmm.action = action;
    op.u.vmm.addr = addr;
    op.u.vmm.bytes = bytes;
    op.u.vmm.memfd_off = memfd_off;
    op.u.vmm.prot = prot;
    op.u.vmm.args_bytes = (uint32_t)args_bytes;
    if (args_bytes)
        memcpy(op.args, args, args_bytes);
    pthread_mutex_lock(&control_lock);
    uint64_t seq;
    int rc = sim_submit(d, &op, &seq);
    if (!rc)
        rc = sim_wait_seq(d, SIM_STREAM_CONTROL_SLOT, seq);
    if (!rc)
        rc = d->sh->vmm_result;
    pthread_mutex_unlock(&control_lock);
    return rc;
}

static int gate_acquire(struct sim_device *d, uint32_t *gate)
{
    int rc = sim_lock(d);
    if (rc)
        return rc;
    for (;;) {
        for (uint32_t g = 0; g < SIM_MAX_GATES; g++) {
            if (d->sh->gates[g] == GATE_FREE) {
                d->sh->gates[g] = GATE_ARMED;
                *gate = g;
                sim_unlock(d);
                return 0;
            }
        }
        if ((rc = sim_host_wait(d)))
            return rc;
    }
}

/* The bytes move when the transfer's turn on the link starts; the copy is
 * done when it ends. */
static void bus_copy(struct sim_device *d, void *dst, const void *src, size_t n, enum simgpu_bus_dir dir,
                     enum sim_copy_charge charge)
{
    struct sim_bus_slot t = { 0, 0 };
    if (charge != SIM_CHARGE_NONE)
        t = sim_bus_reserve(d, dir, SIMGPU_BUS_COPY, n, charge == SIM_CHARGE_PAGEABLE);
    sim_bus_wait_until(t.start_ns);
    memcpy(dst, src, n);
    sim_bus_wait_until(t.end_ns);
}

/*
 * A copy between host memory and device memory is done by the host through
 * its private view (the shadow mapping), in stream order: a HOST_GATE op
 * takes the copy's place in the stream; when the device reaches it, every
 * earlier op the stream depends on has completed and later ones wait until
 * the host releases the gate.  The copy books the direction's link
 * (bus.c), moves the bytes when its turn starts and releases the gate when
 * the modelled transfer ends.  This is the "pageable memory" behaviour of
 * real CUDA: the call returns once the copy is done.
 */
static bool stream_done_locked(const struct sim_shared *sh, uint32_t s)
{
    return sh->streams[s].completed_seq >= sh->streams[s].submitted_seq && !sh->streams[s].host_copy_seq;
}

/* Nothing a new op of stream `slot` would wait for is left: the stream has
 * completed everything submitted to it, and so has what the default-stream
 * rules order it after (executor.c: every blocking stream for the legacy
 * stream, the legacy stream for a blocking one). */
static bool nothing_before_locked(const struct sim_shared *sh, uint32_t slot)
{
    if (!stream_done_locked(sh, slot))
        return false;
    if (slot == SIM_STREAM_LEGACY_SLOT) {
        for (uint32_t t = 1; t < SIM_MAX_STREAMS; t++)
            if (!(sh->streams[t].flags & SIM_STREAM_NONBLOCKING) && !stream_done_locked(sh, t))
                return false;
    } else if (!(sh->streams[slot].flags & SIM_STREAM_NONBLOCKING) &&
               !stream_done_locked(sh, SIM_STREAM_LEGACY_SLOT)) {
        return false;
    }
    return true;
}

/* The copy of a stream with nothing before it to wait for starts at once,
 * as a driver starts a copy engine on an idle stream: the host takes a seq
 * for it without a ring entry and marks it in the stream (host_copy_seq),
 * so ops submitted meanwhile wait for it as they would for a gate
 * (executor.c's deps_met), and syncs, queries and events see the stream
 * busy until it ends. Saves the round trip to the device process a gate
 * costs, which a GPU does not have. Returns 1 if the copy was made, 0 if
 * the stream has earlier work (the caller gates), or -errno. */
static int copy_on_idle_stream(struct sim_device *d, uint32_t slot, void *dst, const void *src, size_t n,
                               enum simgpu_bus_dir dir, enum sim_copy_charge charge)
{
    int rc = sim_lock(d);
    if (rc)
        return rc;
    struct sim_shared *sh = d->sh;
    if (!nothing_before_locked(sh, slot)) {
        sim_unlock(d);
        return 0;
    }
    uint64_t seq = sh->next_seq++;
    sh->streams[slot].submitted_seq = seq;
    sh->streams[slot].host_copy_seq = seq;
    sim_unlock(d);
    int poisoned = sh->sticky_error;
    if (!poisoned)
        bus_copy(d, dst, src, n, dir, charge);
    sim_stats_add(d, &sh->stats.host_copies_at_once, 1);
    if ((rc = sim_lock(d)))
        return rc;
    sh->streams[slot].host_copy_seq = 0;
    sh->streams[slot].completed_seq = seq;  /* later ops of the stream waited for it */
    if (sh->host_copy_waited) {
        /* only then: waking idle workers for nothing costs a GPU-less
         * machine more than the copy */
        sh->host_copy_waited = 0;
        pthread_cond_broadcast(&sh->dev_cv);
    }
    if (sh->seq_waiters) /* the copy engines wait on host_cv too: not for this */
        pthread_cond_broadcast(&sh->host_cv);
    sim_unlock(d);
    return poisoned ? -EIO : 1;
}

int sim_gated_host_copy(struct sim_device *d, uint32_t slot, void *dst, const void *src, size_t n,
                        enum simgpu_bus_dir dir, enum sim_copy_charge charge)
{
    int done = copy_on_idle_stream(d, slot, dst, src, n, dir, charge);
    if (done)
        return done < 0 ? done : 0;
    uint32_t gate;
    int rc = gate_acquire(d, &gate);
    if (rc)
        return rc;
    struct sim_op op = { .kind = SIM_OP_HOST_GATE, .stream = slot };
    op.u.gate.gate = gate;
    if ((rc = sim_submit(d, &op, NULL))) {
        if (!sim_lock(d)) {
            d->sh->gates[gate] = GATE_FREE;
            sim_unlock(d);
        }
        return rc;
    }
    if ((rc = sim_lock(d)))
        return rc;
    while (d->sh->gates[gate] != GATE_REACHED)
        if ((rc = sim_host_wait(d)))
            return rc;
    sim_unlock(d);
    int poisoned = d->sh->sticky_error;
    if (!poisoned)
        bus_copy(d, dst, src, n, dir, charge);
    sim_stats_add(d, &d->sh->stats.host_copies_gated, 1);
    if ((rc = sim_lock(d)))
        return rc;
    d->sh->gates[gate] = GATE_RELEASED;
    pthread_cond_broadcast(&d->sh->dev_cv);
    sim_unlock(d);
    return poisoned ? -EIO : 0;
}

/*
 * The host copy engines of one device: host threads that play the DMA
 * engines for copies to and from pinned host memory, one per direction (a
 * GPU has a copy engine each way, so an upload and a download overlap).
 * sim_async_host_copy files a job under the gate it armed and returns; when
 * the device reaches that gate (everything the stream depends on is done),
 * the engine of the job's direction books the link, copies through the
 * shadow when its turn starts and releases the gate when the transfer ends,
 * so later ops of the stream run after the bytes moved.  Jobs are guarded
 * by the control lock; the device broadcasts host_cv when it reaches a gate.
 * A dead device ends the thread (every waiter then reports the device lost).
 */
static pthread_mutex_t engine_lock = PTHREAD_MUTEX_INITIALIZER;

enum { ENGINE_CALLBACKS = 2 };  /* after the two copy directions */

struct engine {
    struct sim_device *d;
    int kind;           /* SIMGPU_BUS_HTOD, SIMGPU_BUS_DTOH or ENGINE_CALLBACKS */
};
static struct engine engines[SIM_MAX_DEVICES][3];

static int job_engine(const struct sim_copy_job *job)
{
    return job->fn ? ENGINE_CALLBACKS : (int)job->dir;
}

/* The copy engines and the callback thread share this loop: each takes the
 * jobs of its kind whose gate has been reached. */
static void *copy_engine(void *arg)
{
    const struct engine *e = arg;
    struct sim_device *d = e->d;
    if (sim_lock(d))
        return NULL;
    for (;;) {
        uint32_t g = SIM_MAX_GATES;
        for (uint32_t i = 0; i < SIM_MAX_GATES; i++) {
            if (d->copy_jobs[i].pending && job_engine(&d->copy_jobs[i]) == e->kind &&
                d->sh->gates[i] == GATE_REACHED) {
                g = i;
                break;
            }
        }
        if (g == SIM_MAX_GATES) {
            if (sim_host_wait(d))
                return NULL;
            continue;
        }
        struct sim_copy_job job = d->copy_jobs[g];
        d->copy_jobs[g].pending = false;
        bool poisoned = d->sh->sticky_error != 0;
        sim_unlock(d);
        if (job.fn && !poisoned) {
            job.fn(job.data);
        } else if (!poisoned) {
            bus_copy(d, job.dst, job.src, job.n, job.dir, job.charge);
        }
        if (sim_lock(d))
            return NULL;
        d->sh->gates[g] = GATE_RELEASED;
        pthread_cond_broadcast(&d->sh->dev_cv);
    }
}

static int copy_engine_start(struct sim_device *d, int kind)
{
    static const char *const what[] = { "upload copy engine", "download copy engine", "callback" };
    int rc = 0;
    pthread_mutex_lock(&engine_lock);
    if (!d->engine_started[kind]) {
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        pthread_t t;
        struct engine *e = &engines[d->ordinal][kind];
        *e = (struct engine){ d, kind };
        rc = -pthread_create(&t, &a, copy_engine, e);
        pthread_attr_destroy(&a);
        if (rc)
            sim_log("device %d: cannot start the host %s thread (%d)", d->ordinal, what[kind], -rc);
        else
            d->engine_started[kind] = true;
    }
    pthread_mutex_unlock(&engine_lock);
    return rc;
}

/* A job filed under a gate it arms; the call returns once the gate op is
 * queued. */
static int gated_job(struct sim_device *d, uint32_t slot, struct sim_copy_job job)
{
    int rc = copy_engine_start(d, job_engine(&job));
    if (rc)
        return rc;
    uint32_t gate;
    if ((rc = gate_acquire(d, &gate)))
        return rc;
    if ((rc = sim_lock(d)))
        return rc;
    job.pending = true;
    d->copy_jobs[gate] = job;
    sim_unlock(d);
    struct sim_op op = { .kind = SIM_OP_HOST_GATE, .stream = slot };
    op.u.gate.gate = gate;
    if ((rc = sim_submit(d, &op, NULL))) {
        if (!sim_lock(d)) {
            d->copy_jobs[gate].pending = false;
            d->sh->gates[gate] = GATE_FREE;
            sim_unlock(d);
        }
    }
    return rc;
}

/* Asynchronous host copy (pinned memory).  The caller must keep both
 * buffers alive and unchanged until the stream passes the copy, as with
 * real CUDA. */
int sim_async_host_copy(struct sim_device *d, uint32_t slot, void *dst, const void *src, size_t n,
                        enum simgpu_bus_dir dir, enum sim_copy_charge charge)
{
    return gated_job(d, slot, (struct sim_copy_job){ .dst = dst, .src = src, .n = n, .dir = dir, .charge = charge });
}

/* A host function: run by the device's callback thread (not the copy
 * engine: a host function may wait, copies must not wait for it) when the
 * stream reaches its gate; the stream goes on when it returns. */
int sim_host_func(struct sim_device *d, uint32_t slot, CUhostFn fn, void *data)
{
    return gated_job(d, slot, (struct sim_copy_job){ .fn = fn, .data = data });
}
