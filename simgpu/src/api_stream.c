/*
 * api_stream.c — streams and events.
 *
 * A stream is a slot in the device's stream table; its ops complete in
 * order, so "stream done up to op n" is one number (completed_seq).  An
 * event is (stream slot, seq of the record op); it has completed when that
 * stream's completed_seq reached it, and the device stamps the time when
 * the record op runs.
 */
#include <errno.h>
#include <stdlib.h>

#include "sim.h"

static CUresult to_cu(struct sim_device *d, int rc)
{
    if (d->sh->sticky_error)
        return (CUresult)d->sh->sticky_error;
    return sim_errno_to_cu(rc);
}

CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    struct sim_device *d;
    CUresult r = sim_current_device(&d);
    if (r != CUDA_SUCCESS)
        return r;
    if (!phStream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_stream *s = calloc(1, sizeof(*s));
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uint32_t slot;
    int rc = sim_slot_alloc_stream(d, flags & CU_STREAM_NON_BLOCKING ? SIM_STREAM_NONBLOCKING : 0, &slot);
    if (rc) {
        free(s);
        return rc == -ENOSPC ? CUDA_ERROR_OUT_OF_MEMORY : to_cu(d, rc);
    }
    *s = (struct sim_stream){ .magic = SIM_STREAM_MAGIC, .ordinal = d->ordinal, .slot = slot,
                              .flags = flags, .priority = priority };
    *phStream = (CUstream)s;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int flags)
{
    return cuStreamCreateWithPriority(phStream, flags, 0);
}

/* Real CUDA returns at once and frees the stream when its work is done;
 * here the call waits for that work, then frees the slot. */
CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream)
{
    struct sim_stream *s = (struct sim_stream *)hStream;
    if (hStream == NULL || hStream == CU_STREAM_LEGACY || hStream == CU_STREAM_PER_THREAD ||
        s->magic != SIM_STREAM_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_device *d = &sim.dev[s->ordinal];
    sim_stream_sync(d, s->slot);
    sim_slot_free_stream(d, s->slot);
    s->magic = 0;
    free(s);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamDestroy(CUstream hStream)
{
    return cuStreamDestroy_v2(hStream);
}

static CUresult stream_sync(CUstream hStream, bool ptds)
{
    struct sim_device *d;
    uint32_t slot;
    CUresult r = sim_stream_resolve(hStream, ptds, &d, &slot);
    if (r != CUDA_SUCCESS)
        return r;
    if ((r = sim_capture_sync(hStream, ptds)) != CUDA_SUCCESS)
        return r;
    return to_cu(d, sim_stream_sync(d, slot));
}

CUresult CUDAAPI cuStreamSynchronize(CUstream hStream) { return stream_sync(hStream, false); }
CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream) { return stream_sync(hStream, true); }

static CUresult stream_query(CUstream hStream, bool ptds)
{
    struct sim_device *d;
    uint32_t slot;
    CUresult r = sim_stream_resolve(hStream, ptds, &d, &slot);
    if (r != CUDA_SUCCESS)
        return r;
    if ((r = sim_capture_sync(hStream, ptds)) != CUDA_SUCCESS)
        return r;
    int rc = sim_lock(d);
    if (rc)
        return to_cu(d, rc);
    struct sim_stream_slot *s = &d->sh->streams[slot];
    bool done = s->completed_seq >= s->submitted_seq;
    sim_unlock(d);
    return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult CUDAAPI cuStreamQuery(CUstream hStream) { return stream_query(hStream, false); }
CUresult CUDAAPI cuStreamQuery_ptsz(CUstream hStream) { return stream_query(hStream, true); }

static CUresult stream_get_flags(CUstream hStream, unsigned int *flags, bool ptds)
{
    struct sim_device *d;
    uint32_t slot;
    CUresult r = sim_stream_resolve(hStream, ptds, &d, &slot);
    if (r != CUDA_SUCCESS)
        return r;
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    *flags = d->sh->streams[slot].flags & SIM_STREAM_NONBLOCKING ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamGetFlags(CUstream hStream, unsigned int *flags) { return stream_get_flags(hStream, flags, false); }
CUresult CUDAAPI cuStreamGetFlags_ptsz(CUstream hStream, unsigned int *flags) { return stream_get_flags(hStream, flags, true); }

/* ---- events ---- */

static struct sim_event *event_of(CUevent e)
{
    struct sim_event *ev = (struct sim_event *)e;
    return ev && ev->magic == SIM_EVENT_MAGIC ? ev : NULL;
}

/* The prologue of the calls that take one event and no stream. */
static CUresult event_begin(CUevent e, struct sim_event **ev)
{
    *ev = event_of(e);
    if (!*ev)
        return CUDA_ERROR_INVALID_HANDLE;
    return sim_check_init();
}

CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    struct sim_device *d;
    CUresult r = sim_current_device(&d);
    if (r != CUDA_SUCCESS)
        return r;
    if (!phEvent || (Flags & ~(unsigned)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)))
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_event *ev = calloc(1, sizeof(*ev));
    if (!ev)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uint32_t slot;
    int rc = sim_slot_alloc_event(d, Flags, &slot);
    if (rc) {
        free(ev);
        return rc == -ENOSPC ? CUDA_ERROR_OUT_OF_MEMORY : to_cu(d, rc);
    }
    *ev = (struct sim_event){ .magic = SIM_EVENT_MAGIC, .ordinal = d->ordinal, .slot = slot, .flags = Flags };
    *phEvent = (CUevent)ev;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventDestroy_v2(CUevent hEvent)
{
    struct sim_event *ev;
    CUresult r = event_begin(hEvent, &ev);
    if (r != CUDA_SUCCESS)
        return r;
    sim_slot_free_event(&sim.dev[ev->ordinal], ev->slot);
    ev->magic = 0;
    free(ev);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventDestroy(CUevent hEvent) { return cuEventDestroy_v2(hEvent); }

static CUresult event_record(CUevent hEvent, CUstream hStream, bool ptds)
{
    struct sim_event *ev = event_of(hEvent);
    if (!ev)
        return CUDA_ERROR_INVALID_HANDLE;
    struct sim_device *d;
    uint32_t slot;
    CUresult r = sim_stream_resolve(hStream, ptds, &d, &slot);
    if (r != CUDA_SUCCESS)
        return r;
    bool captured;      /* events in a capture: not modelled (a refused call invalidates it) */
    if ((r = sim_capture_op(hStream, ptds, false, NULL, &captured)) != CUDA_SUCCESS)
        return r;
    if (d->ordinal != ev->ordinal)
        return CUDA_ERROR_INVALID_HANDLE;
    /* The slot's (stream, seq) must change together with the submission,
     * so a query never sees the new stream with the old seq: take the
     * seq inside the same locked section as sim_submit would. */
    int rc = sim_lock(d);
    if (rc)
        return to_cu(d, rc);
    struct sim_shared *sh = d->sh;
    while (sh->ring_tail - sh->ring_head >= SIM_RING_SLOTS) {
        pthread_cond_broadcast(&sh->dev_cv);
        if ((rc = sim_host_wait(d)))
            return to_cu(d, rc);
    }
    struct sim_op *op = &sh->ring[sh->ring_tail % SIM_RING_SLOTS];
    op->seq = sh->next_seq++;
    op->kind = SIM_OP_EVENT_RECORD;
    op->stream = slot;
    op->u.record.event = ev->slot;
    sh->ring_tail++;
    sh->streams[slot].submitted_seq = op->seq;
    struct sim_event_slot *es = &sh->events[ev->slot];
    es->stream = slot;
    es->seq = op->seq;
    es->time_ns = 0;
    pthread_cond_broadcast(&sh->dev_cv);
    sim_unlock(d);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream) { return event_record(hEvent, hStream, false); }
CUresult CUDAAPI cuEventRecord_ptsz(CUevent hEvent, CUstream hStream) { return event_record(hEvent, hStream, true); }

/* 1: complete (or never recorded), 0: not yet, <0: -errno */
static int event_done(struct sim_event *ev, struct sim_device *d, uint64_t *time_ns, bool *recorded)
{
    int rc = sim_lock(d);
    if (rc)
        return rc;
    struct sim_event_slot *es = &d->sh->events[ev->slot];
    bool done = es->seq == 0 || d->sh->streams[es->stream].completed_seq >= es->seq;
    if (time_ns)
        *time_ns = es->time_ns;
    if (recorded)
        *recorded = es->seq != 0;
    sim_unlock(d);
    return done;
}

CUresult CUDAAPI cuEventQuery(CUevent hEvent)
{
    struct sim_event *ev;
    CUresult r = event_begin(hEvent, &ev);
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_device *d = &sim.dev[ev->ordinal];
    int rc = event_done(ev, d, NULL, NULL);
    if (rc < 0)
        return to_cu(d, rc);
    if (d->sh->sticky_error)
        return (CUresult)d->sh->sticky_error;
    return rc ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult CUDAAPI cuEventSynchronize(CUevent hEvent)
{
    struct sim_event *ev;
    CUresult r = event_begin(hEvent, &ev);
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_device *d = &sim.dev[ev->ordinal];
    int rc = sim_lock(d);
    if (rc)
        return to_cu(d, rc);
    struct sim_event_slot *es = &d->sh->events[ev->slot];
    uint32_t stream = es->stream;
    uint64_t seq = es->seq;
    sim_unlock(d);
    if (seq == 0)
        return CUDA_SUCCESS;
    return to_cu(d, sim_wait_seq(d, stream, seq));
}

CUresult CUDAAPI cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    struct sim_event *a = event_of(hStart), *b = event_of(hEnd);
    if (!a || !b)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!pMilliseconds)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (a->ordinal != b->ordinal || (a->flags | b->flags) & CU_EVENT_DISABLE_TIMING)
        return CUDA_ERROR_INVALID_HANDLE;
    struct sim_device *d = &sim.dev[a->ordinal];
    uint64_t ta, tb;
    bool ra, rb;
    int da = event_done(a, d, &ta, &ra), db = event_done(b, d, &tb, &rb);
    if (da < 0 || db < 0)
        return to_cu(d, da < 0 ? da : db);
    if (!ra || !rb)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!da || !db)
        return CUDA_ERROR_NOT_READY;
    *pMilliseconds = (float)((double)((int64_t)(tb - ta)) / 1e6);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    return cuEventElapsedTime_v2(pMilliseconds, hStart, hEnd);
}

static CUresult stream_wait_event(CUstream hStream, CUevent hEvent, unsigned int Flags, bool ptds)
{
    struct sim_event *ev = event_of(hEvent);
    if (!ev)
        return CUDA_ERROR_INVALID_HANDLE;
    struct sim_device *d;
    uint32_t slot;
    CUresult r = sim_stream_resolve(hStream, ptds, &d, &slot);
    if (r != CUDA_SUCCESS)
        return r;
    bool captured;
    if ((r = sim_capture_op(hStream, ptds, false, NULL, &captured)) != CUDA_SUCCESS)
        return r;
    if (Flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    if (d->ordinal != ev->ordinal)
        return CUDA_ERROR_NOT_SUPPORTED;   /* cross-device waits: not yet */
    int rc = sim_lock(d);
    if (rc)
        return to_cu(d, rc);
    struct sim_event_slot *es = &d->sh->events[ev->slot];
    uint32_t target = es->stream;
    uint64_t seq = es->seq;
    sim_unlock(d);
    if (seq == 0)
        return CUDA_SUCCESS;
    struct sim_op op = { .kind = SIM_OP_WAIT, .stream = slot };
    op.u.wait.stream = target;
    op.u.wait.seq = seq;
    return to_cu(d, sim_submit(d, &op, NULL));
}

CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{ return stream_wait_event(hStream, hEvent, Flags, false); }
CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{ return stream_wait_event(hStream, hEvent, Flags, true); }
