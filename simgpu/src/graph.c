/*
 * graph.c — stream capture, graphs, and host functions in streams.
 *
 * Capture: between cuStreamBeginCapture and cuStreamEndCapture the work
 * given to a capturing stream (kernel launches, copies, memsets, host
 * functions) is recorded, not run, as nodes of a graph in issue order (a
 * capture from one stream is a chain).  cuGraphInstantiate copies the
 * chain; cuGraphLaunch issues it on the launch stream, in order, as the
 * calls that were captured.  What CUDA forbids during a capture is refused
 * as CUDA does (cuda.h, cuStreamBeginCapture and
 * cuThreadExchangeStreamCaptureMode):
 *   - a sync or query of the capturing stream: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
 *     and the capture is invalidated (cuStreamEndCapture then answers
 *     CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
 *   - work on the legacy stream while a blocking stream captures (it would
 *     join the capture implicitly): CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
 *     capture invalidated;
 *   - "potentially unsafe" calls (cuCtxSynchronize, cuMemAlloc/Free, the
 *     synchronous copies and memsets) from a thread that a capture
 *     prohibits: under mode GLOBAL any thread whose own mode is not
 *     RELAXED while any GLOBAL capture runs, and the capturing thread
 *     itself unless its capture is RELAXED: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
 *     those captures invalidated.
 * Not modelled: capturing the default streams (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
 * here), events in a capture (cross-stream fork/join: record/wait on a
 * capturing stream is refused the same way), graph editing
 * (cuGraphAdd*Node, cuGraphExecUpdate), cuStreamGetCaptureInfo.
 *
 * Host functions: cuLaunchHostFunc arms a gate in the stream and files the
 * function under it; the device's callback thread (queue.c) runs it when
 * the stream reaches the gate and releases the gate when it returns, so it
 * runs after everything before it in the stream and before everything
 * after it, on a thread of its own, as CUDA's do.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define GRAPH_MAGIC 0x48505247u
#define EXEC_MAGIC 0x43455847u

struct sim_graph {
    uint32_t magic;
    struct sim_gnode *node;
    size_t n, cap;
};

struct sim_capture {
    struct sim_stream *stream;
    struct sim_graph *graph;
    CUstreamCaptureMode mode;
    pthread_t thread;
    bool invalid;
};

static pthread_mutex_t capture_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_capture *captures[SIM_MAX_STREAMS];
static unsigned ncaptures;                   /* read without the lock as a hint */
static __thread CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

static void gnode_free(struct sim_gnode *g)
{
    if (g->kind == SIM_GNODE_KERNEL)
        free(g->args);
}

/* Live graphs and executable graphs: a handle is checked against this set
 * before it is read, so a destroyed or made-up handle is
 * CUDA_ERROR_INVALID_HANDLE, never a read of freed memory. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_graph **live;
static size_t nlive, caplive;

static bool live_add(struct sim_graph *g)
{
    pthread_mutex_lock(&live_lock);
    bool ok = true;
    if (nlive == caplive) {
        size_t cap = caplive ? 2 * caplive : 16;
        struct sim_graph **v = realloc(live, cap * sizeof(*v));
        if (v) {
            live = v;
            caplive = cap;
        } else {
            ok = false;
        }
    }
    if (ok)
        live[nlive++] = g;
    pthread_mutex_unlock(&live_lock);
    return ok;
}

/* Removes g from the set when it is there with that magic; true if so. */
static bool live_take(const void *h, uint32_t magic, bool remove)
{
    bool found = false;
    pthread_mutex_lock(&live_lock);
    for (size_t i = 0; i < nlive && !found; i++) {
        if (live[i] == h && live[i]->magic == magic) {
            found = true;
            if (remove)
                live[i] = live[--nlive];
        }
    }
    pthread_mutex_unlock(&live_lock);
    return found;
}

static void graph_free(struct sim_graph *g)
{
    for (size_t i = 0; i < g->n; i++)
        gnode_free(&g->node[i]);
    free(g->node);
    g->magic = 0;
    free(g);
}

static struct sim_capture *capture_of(const struct sim_stream *s)
{
    for (unsigned i = 0; i < ncaptures; i++)
        if (captures[i]->stream == s)
            return captures[i];
    return NULL;
}

static bool is_user_stream(CUstream s)
{
    return s && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD &&
           ((const struct sim_stream *)s)->magic == SIM_STREAM_MAGIC;
}

static bool is_legacy(CUstream s, bool ptds)
{
    return s == CU_STREAM_LEGACY || (s == NULL && !ptds);
}

/* Whether a blocking stream captures (work on the legacy stream would join
 * it); with `invalidate`, those captures are invalidated.  Lock held. */
static bool blocking_capture_locked(bool invalidate)
{
    bool any = false;
    for (unsigned i = 0; i < ncaptures; i++) {
        if (!(captures[i]->stream->flags & CU_STREAM_NON_BLOCKING)) {
            any = true;
            if (invalidate)
                captures[i]->invalid = true;
        }
    }
    return any;
}

/* Whether capture c prohibits this thread's unsafe calls. */
static bool prohibits(const struct sim_capture *c)
{
    if (thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED)
        return false;
    if (pthread_equal(c->thread, pthread_self()))
        return c->mode != CU_STREAM_CAPTURE_MODE_RELAXED;
    return c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL && thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
}

bool sim_capture_active(void)
{
    return __atomic_load_n(&ncaptures, __ATOMIC_ACQUIRE) != 0;
}

CUresult sim_capture_unsafe_call(void)
{
    if (!__atomic_load_n(&ncaptures, __ATOMIC_ACQUIRE))
        return CUDA_SUCCESS;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&capture_lock);
    for (unsigned i = 0; i < ncaptures; i++) {
        if (prohibits(captures[i])) {
            captures[i]->invalid = true;
            r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    }
    pthread_mutex_unlock(&capture_lock);
    return r;
}

CUresult sim_capture_op(CUstream s, bool ptds, bool sync_form, struct sim_gnode *node, bool *captured)
{
    *captured = false;
    if (!__atomic_load_n(&ncaptures, __ATOMIC_ACQUIRE))
        return CUDA_SUCCESS;
    if (sync_form) {
        CUresult r = sim_capture_unsafe_call();
        if (r != CUDA_SUCCESS)
            return r;
    }
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&capture_lock);
    if (is_user_stream(s)) {
        struct sim_capture *c = capture_of((const struct sim_stream *)s);
        if (c) {
            if (sync_form || !node) {
                c->invalid = true;
                r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
            } else if (c->invalid) {
                r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
            } else {
                struct sim_graph *g = c->graph;
                if (g->n == g->cap) {
                    size_t cap = g->cap ? 2 * g->cap : 16;
                    struct sim_gnode *n = realloc(g->node, cap * sizeof(*n));
                    if (!n) {
                        r = CUDA_ERROR_OUT_OF_MEMORY;
                        goto out;
                    }
                    g->node = n;
                    g->cap = cap;
                }
                g->node[g->n++] = *node;
                node->args = NULL;     /* the graph owns it now */
                *captured = true;
            }
        }
    } else if (is_legacy(s, ptds) && blocking_capture_locked(true)) {
        r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;     /* it would join their captures */
    }
out:
    pthread_mutex_unlock(&capture_lock);
    return r;
}

CUresult sim_capture_sync(CUstream s, bool ptds)
{
    if (!__atomic_load_n(&ncaptures, __ATOMIC_ACQUIRE))
        return CUDA_SUCCESS;
    if (is_user_stream(s)) {
        bool captured;
        return sim_capture_op(s, ptds, false, NULL, &captured);
    }
    return is_legacy(s, ptds) ? sim_capture_unsafe_call() : CUDA_SUCCESS;
}

static CUresult begin_capture(CUstream hStream, CUstreamCaptureMode mode)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    if (!is_user_stream(hStream)) {
        if (hStream && hStream != CU_STREAM_LEGACY && hStream != CU_STREAM_PER_THREAD)
            return CUDA_ERROR_INVALID_HANDLE;
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;   /* default streams: not modelled */
    }
    struct sim_stream *st = (struct sim_stream *)hStream;
    struct sim_capture *c = calloc(1, sizeof(*c));
    struct sim_graph *g = calloc(1, sizeof(*g));
    if (!c || !g) {
        free(c);
        free(g);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    g->magic = GRAPH_MAGIC;
    *c = (struct sim_capture){ .stream = st, .graph = g, .mode = mode, .thread = pthread_self() };
    pthread_mutex_lock(&capture_lock);
    if (capture_of(st)) {
        r = CUDA_ERROR_ILLEGAL_STATE;
    } else {
        captures[ncaptures] = c;
        __atomic_store_n(&ncaptures, ncaptures + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&capture_lock);
    if (r != CUDA_SUCCESS) {
        free(c);
        graph_free(g);
    }
    return r;
}

CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    return begin_capture(hStream, mode);
}

CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode);
CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    return begin_capture(hStream, mode);
}

CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream)
{
    return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream hStream)
{
    return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

static CUresult end_capture(CUstream hStream, CUgraph *phGraph)
{
    if (!phGraph)
        return CUDA_ERROR_INVALID_VALUE;
    if (!is_user_stream(hStream))
        return hStream && hStream != CU_STREAM_LEGACY && hStream != CU_STREAM_PER_THREAD
                   ? CUDA_ERROR_INVALID_HANDLE
                   : CUDA_ERROR_ILLEGAL_STATE;
    pthread_mutex_lock(&capture_lock);
    struct sim_capture *c = NULL;
    unsigned at = 0;
    for (; at < ncaptures; at++)
        if (captures[at]->stream == (struct sim_stream *)hStream) {
            c = captures[at];
            break;
        }
    CUresult r = CUDA_SUCCESS;
    if (!c) {
        r = CUDA_ERROR_ILLEGAL_STATE;
    } else if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(c->thread, pthread_self())) {
        c->invalid = true;
        r = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    }
    if (c && r != CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD) {
        captures[at] = captures[ncaptures - 1];
        __atomic_store_n(&ncaptures, ncaptures - 1, __ATOMIC_RELEASE);
    } else {
        c = NULL;
    }
    pthread_mutex_unlock(&capture_lock);
    if (!c)
        return r;
    *phGraph = NULL;
    if (c->invalid) {
        graph_free(c->graph);
        r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (!live_add(c->graph)) {
        graph_free(c->graph);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        *phGraph = (CUgraph)c->graph;
    }
    free(c);
    return r;
}

CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    return end_capture(hStream, phGraph);
}

CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph);
CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    return end_capture(hStream, phGraph);
}

static CUresult is_capturing(CUstream hStream, CUstreamCaptureStatus *status)
{
    if (!status)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (!is_user_stream(hStream)) {
        if (hStream && hStream != CU_STREAM_LEGACY && hStream != CU_STREAM_PER_THREAD)
            return CUDA_ERROR_INVALID_HANDLE;
        /* the legacy stream while a blocking stream captures: CUDA says so */
        if (hStream != CU_STREAM_PER_THREAD && __atomic_load_n(&ncaptures, __ATOMIC_ACQUIRE)) {
            pthread_mutex_lock(&capture_lock);
            if (blocking_capture_locked(false))
                r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
            pthread_mutex_unlock(&capture_lock);
        }
        return r;
    }
    pthread_mutex_lock(&capture_lock);
    struct sim_capture *c = capture_of((const struct sim_stream *)hStream);
    if (c)
        *status = c->invalid ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    pthread_mutex_unlock(&capture_lock);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return is_capturing(hStream, captureStatus);
}

CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus);
CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return is_capturing(hStream, captureStatus);
}

CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    if (!mode || (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL && *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
                  *mode != CU_STREAM_CAPTURE_MODE_RELAXED))
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode old = thread_mode;
    thread_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

/* ---- graphs ---------------------------------------------------------- */

static struct sim_graph *graph_of(CUgraph h, uint32_t magic)
{
    return live_take(h, magic, false) ? (struct sim_graph *)h : NULL;
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
    struct sim_graph *g = graph_of(hGraph, GRAPH_MAGIC);
    if (!phGraphExec || !g || flags & ~(unsigned long long)CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)
        return !g ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
    struct sim_graph *e = calloc(1, sizeof(*e));
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->magic = EXEC_MAGIC;
    e->node = calloc(g->n ? g->n : 1, sizeof(*e->node));
    if (!e->node) {
        free(e);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i < g->n; i++) {
        e->node[i] = g->node[i];
        if (g->node[i].kind == SIM_GNODE_KERNEL) {
            e->node[i].args = malloc(g->node[i].args_bytes ? g->node[i].args_bytes : 1);
            if (!e->node[i].args) {
                e->n = i;
                graph_free(e);
                return CUDA_ERROR_OUT_OF_MEMORY;
            }
            memcpy(e->node[i].args, g->node[i].args, g->node[i].args_bytes);
        }
        e->n = i + 1;
    }
    if (!live_add(e)) {
        graph_free(e);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *phGraphExec = (CUgraphExec)e;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                       char *logBuffer, size_t bufferSize)
{
    (void)logBuffer, (void)bufferSize;
    if (phErrorNode)
        *phErrorNode = NULL;
    return cuGraphInstantiateWithFlags(phGraphExec, hGraph, 0);
}

static CUresult graph_launch(CUgraphExec hGraphExec, CUstream s, bool ptds)
{
    struct sim_graph *e = graph_of((CUgraph)hGraphExec, EXEC_MAGIC);
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    struct sim_device *d;
    uint32_t slot;
    CUresult r = sim_stream_resolve(s, ptds, &d, &slot);
    if (r != CUDA_SUCCESS)
        return r;
    for (size_t i = 0; i < e->n && r == CUDA_SUCCESS; i++) {
        const struct sim_gnode *n = &e->node[i];
        switch (n->kind) {
        case SIM_GNODE_KERNEL: {
            size_t bytes = n->args_bytes;
            void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, n->args, CU_LAUNCH_PARAM_BUFFER_SIZE, &bytes,
                              CU_LAUNCH_PARAM_END };
            r = (ptds ? cuLaunchKernel_ptsz : cuLaunchKernel)(
                n->func, n->dims.grid[0], n->dims.grid[1], n->dims.grid[2], n->dims.block[0], n->dims.block[1],
                n->dims.block[2], n->smem, s, NULL, extra);
            break;
        }
        case SIM_GNODE_COPY:
            r = (ptds ? cuMemcpyAsync_ptsz : cuMemcpyAsync)(n->dst, n->src, n->bytes, s);
            break;
        case SIM_GNODE_MEMSET:
            r = n->elem == 4 ? (ptds ? cuMemsetD32Async_ptsz : cuMemsetD32Async)(n->dst, n->value, n->count, s)
                             : (ptds ? cuMemsetD8Async_ptsz : cuMemsetD8Async)(n->dst, (unsigned char)n->value,
                                                                                n->count, s);
            break;
        case SIM_GNODE_HOST:
            r = (ptds ? cuLaunchHostFunc_ptsz : cuLaunchHostFunc)(s, n->fn, n->data);
            break;
        }
    }
    return r;
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_launch(hGraphExec, hStream, false);
}

CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream);
CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_launch(hGraphExec, hStream, true);
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    if (!live_take(hGraphExec, EXEC_MAGIC, true))
        return CUDA_ERROR_INVALID_HANDLE;
    graph_free((struct sim_graph *)hGraphExec);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph)
{
    if (!live_take(hGraph, GRAPH_MAGIC, true))
        return CUDA_ERROR_INVALID_HANDLE;
    graph_free((struct sim_graph *)hGraph);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    struct sim_graph *g = graph_of(hGraph, GRAPH_MAGIC);
    if (!g)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!numNodes)
        return CUDA_ERROR_INVALID_VALUE;
    if (nodes)
        for (size_t i = 0; i < g->n && i < *numNodes; i++)
            nodes[i] = (CUgraphNode)&g->node[i];
    else
        *numNodes = g->n;
    return CUDA_SUCCESS;
}

/* ---- host functions -------------------------------------------------- */

static CUresult host_func(CUstream s, bool ptds, CUhostFn fn, void *data)
{
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_device *d;
    uint32_t slot;
    CUresult r = sim_stream_resolve(s, ptds, &d, &slot);
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_gnode node = { .kind = SIM_GNODE_HOST, .fn = fn, .data = data };
    bool captured;
    if ((r = sim_capture_op(s, ptds, false, &node, &captured)) != CUDA_SUCCESS || captured)
        return r;
    int rc = sim_host_func(d, slot, fn, data);
    if (d->sh->sticky_error)
        return (CUresult)d->sh->sticky_error;
    return sim_errno_to_cu(rc);
}

CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    return host_func(hStream, false, fn, userData);
}

CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData);
CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
    return host_func(hStream, true, fn, userData);
}
