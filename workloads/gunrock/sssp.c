/*
 * sssp — single-source shortest paths on the GPU, recomputed each time a
 * producer changes the edge weights: the consumer of the dynamic-graph
 * experiment (README.md). An ordinary CUDA program.
 *
 *   sssp [--mode=copy|managed|gaia] [--validate] [--source=V]
 *        [--iterations=N] [--sync=PATH] [--weights=FILE] [--verbose] GRAPH.csr
 *
 * Modes differ only in where the kernels find the graph:
 *   copy     the structure is copied to device memory once; every
 *            iteration reads the weight file and copies the whole weight
 *            array (the CUDA baseline);
 *   managed  the graph lives in cudaMallocManaged memory; every iteration
 *            reads the weight file into it (the UVM baseline);
 *   gaia     both files are mmap'ed and the mapped pointers go straight to
 *            the kernels: no copies at all. This needs a system whose GPU
 *            can reach a process's file mappings (HMM, or an OS page cache
 *            that spans CPU and GPU memory loaded in front of the program).
 *
 * With --sync the iterations follow a producer (pairsync.h): after a first,
 * untimed run the program tells the producer it is ready, and recomputes
 * each time the producer signals, until the producer closes. Without it,
 * it recomputes --iterations times on the files as they are.
 *
 * Per iteration it times: bringing in the weights, the SSSP, and copying
 * the distances back. --validate checks every run against a CPU Dijkstra
 * on the weights read from the file. The last line is
 *   RESULT mode=... iterations=N ms_per_iter=X ms_median=M h2d_bytes_per_iter=B validated=0|1 ...
 * (X the mean time per iteration, M the median) where B is host-to-device traffic from the simulated GPU's accounting
 * (copies plus managed-memory migrations), or -1 where there is none.
 * Exit: 0 success, 1 error, 2 a validation failed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "dijkstra.h"
#include "graph.h"
#include "pairsync.h"
#include "simgpu.h"
#include "sssp_gpu.h"

enum mode { MODE_COPY, MODE_MANAGED, MODE_GAIA };
static const char *const mode_names[] = {"copy", "managed", "gaia"};

struct options {
    enum mode mode;
    bool validate, verbose;
    uint32_t source;
    unsigned iterations;
    const char *sync_path;
    const char *csr_path;
    char wgt_path[4096];
};

/* The graph as the kernels see it, and what holds it. */
struct graph_view {
    struct graph_csr_header ch;
    struct graph_wgt_header wh;
    int csr_fd, wgt_fd;
    const uint64_t *row_offsets;   /* device, managed or mapped */
    const uint32_t *col_indices;
    uint32_t *weights;
    uint32_t *host_weights;        /* copy mode: the read buffer */
    void *csr_map, *wgt_map;       /* gaia mode */
    void *bounce;                  /* managed mode: the read buffer */
};

/* Device working set of one SSSP run. */
struct sssp_state {
    uint64_t vertices;
    uint32_t *dist, *visited, *frontier, *next, *candidates, *counters;
    unsigned grid;                 /* blocks of the grid-stride kernels */
};

static char err[GRAPH_ERR_BYTES];

#define BOUNCE_BYTES (1u << 20)

static int cuda_fail(cudaError_t e, const char *what, const struct options *o)
{
    fprintf(stderr, "sssp: %s: %s: %s\n", what, cudaGetErrorName(e), cudaGetErrorString(e));
    if (o->mode == MODE_GAIA && e == cudaErrorIllegalAddress)
        fprintf(stderr, "sssp: --mode=gaia hands the kernels pointers into file mappings; this GPU "
                        "cannot reach them (it needs HMM, or a page cache shared by CPU and GPU)\n");
    return -1;
}
#define CUDA(call, what)                                                                                          \
    do {                                                                                                          \
        cudaError_t e_ = (call);                                                                                  \
        if (e_ != cudaSuccess)                                                                                    \
            return cuda_fail(e_, (what), o);                                                                      \
    } while (0)

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Host-to-device bytes so far: the simulated GPU's accounting, looked up
 * at run time so that the same source builds for a real GPU (no such
 * symbol: -1). Managed-memory migrations are counted in both directions
 * (the simulator does not split them). */
static int64_t h2d_bytes(void)
{
    static int (*get)(int, struct simgpu_stats *);
    static bool looked;
    if (!looked) {
        *(void **)&get = dlsym(RTLD_DEFAULT, "simgpu_stats_get");
        looked = true;
    }
    int dev = 0;
    struct simgpu_stats s;
    if (!get || cudaGetDevice(&dev) != cudaSuccess || get(dev, &s) != 0)
        return -1;
    /* copies, migrations, and kernels' loads from host memory (a region
     * the shim lets kernels read in place) */
    return (int64_t)(s.htod_bytes + s.uvm_migrated_bytes + s.bus_bytes[SIMGPU_BUS_HTOD][SIMGPU_BUS_HOST_ACCESS]);
}

/* Reads file bytes into managed memory through a host buffer. read(2)
 * straight into managed memory works with real UVM, whose driver serves
 * the kernel's own faults; going through a buffer keeps every fault in
 * user space, where any UVM implementation takes it. */
static int read_via_bounce(int fd, const char *path, void *dst, uint64_t len, uint64_t offset, void *bounce)
{
    for (uint64_t done = 0; done < len;) {
        size_t n = len - done < BOUNCE_BYTES ? (size_t)(len - done) : BOUNCE_BYTES;
        int rc = graph_pread_all(fd, path, bounce, n, offset + done, err, sizeof(err));
        if (rc)
            return rc;
        memcpy((char *)dst + done, bounce, n);
        done += n;
    }
    return 0;
}

static int open_files(const struct options *o, struct graph_view *g)
{
    g->csr_fd = open(o->csr_path, O_RDONLY | O_CLOEXEC);
    if (g->csr_fd < 0)
        return graph_fail(err, sizeof(err), -errno, "%s: cannot open: %s", o->csr_path, strerror(errno));
    g->wgt_fd = open(o->wgt_path, O_RDONLY | O_CLOEXEC);
    if (g->wgt_fd < 0)
        return graph_fail(err, sizeof(err), -errno, "%s: cannot open: %s", o->wgt_path, strerror(errno));
    int rc = graph_read_csr_header(g->csr_fd, o->csr_path, &g->ch, err, sizeof(err));
    if (!rc)
        rc = graph_read_wgt_header(g->wgt_fd, o->wgt_path, &g->wh, err, sizeof(err));
    if (!rc)
        rc = graph_check_pair(&g->ch, o->csr_path, &g->wh, o->wgt_path, err, sizeof(err));
    if (!rc && o->source >= g->ch.vertices)
        rc = graph_fail(err, sizeof(err), -EINVAL, "%s: source %u is not a vertex (the graph has %" PRIu64 ")",
                        o->csr_path, o->source, g->ch.vertices);
    return rc;
}

static uint64_t nonzero(uint64_t n)
{
    return n ? n : 1;
}

/* Puts the structure where the mode wants it and prepares the weights. */
static int setup_graph(const struct options *o, struct graph_view *g)
{
    const struct graph_csr_header *h = &g->ch;
    uint64_t ro_bytes = (h->vertices + 1) * 8, col_bytes = h->edges * 4, w_bytes = nonzero(h->edges) * 4;
    if (o->mode == MODE_GAIA) {
        g->csr_map = mmap(NULL, h->file_bytes, PROT_READ, MAP_SHARED, g->csr_fd, 0);
        if (g->csr_map == MAP_FAILED)
            return graph_fail(err, sizeof(err), -errno, "%s: mmap: %s", o->csr_path, strerror(errno));
        g->wgt_map = mmap(NULL, g->wh.file_bytes, PROT_READ, MAP_SHARED, g->wgt_fd, 0);
        if (g->wgt_map == MAP_FAILED)
            return graph_fail(err, sizeof(err), -errno, "%s: mmap: %s", o->wgt_path, strerror(errno));
        g->row_offsets = (const uint64_t *)((char *)g->csr_map + h->row_offsets_at);
        g->col_indices = (const uint32_t *)((char *)g->csr_map + h->col_indices_at);
        g->weights = (uint32_t *)((char *)g->wgt_map + g->wh.weights_at);
        return graph_check_structure(h, o->csr_path, g->row_offsets, g->col_indices, err, sizeof(err));
    }
    uint64_t *ro;
    uint32_t *col;
    if (o->mode == MODE_MANAGED) {
        if (cudaMallocManaged((void **)&ro, ro_bytes, cudaMemAttachGlobal) != cudaSuccess ||
            cudaMallocManaged((void **)&col, nonzero(col_bytes), cudaMemAttachGlobal) != cudaSuccess ||
            cudaMallocManaged((void **)&g->weights, w_bytes, cudaMemAttachGlobal) != cudaSuccess)
            return graph_fail(err, sizeof(err), -ENOMEM, "cudaMallocManaged: %s",
                              cudaGetErrorString(cudaGetLastError()));
        if (!(g->bounce = malloc(BOUNCE_BYTES)))
            return -ENOMEM;
        int rc = read_via_bounce(g->csr_fd, o->csr_path, ro, ro_bytes, h->row_offsets_at, g->bounce);
        if (!rc)
            rc = read_via_bounce(g->csr_fd, o->csr_path, col, col_bytes, h->col_indices_at, g->bounce);
        if (!rc)
            rc = graph_check_structure(h, o->csr_path, ro, col, err, sizeof(err));
        g->row_offsets = ro;
        g->col_indices = col;
        return rc;
    }
    /* copy */
    uint64_t *hro = malloc(ro_bytes);
    uint32_t *hcol = malloc(nonzero(col_bytes));
    g->host_weights = malloc(w_bytes);
    int rc = hro && hcol && g->host_weights ? 0 : graph_fail(err, sizeof(err), -ENOMEM, "out of host memory");
    if (!rc)
        rc = graph_pread_all(g->csr_fd, o->csr_path, hro, ro_bytes, h->row_offsets_at, err, sizeof(err));
    if (!rc)
        rc = graph_pread_all(g->csr_fd, o->csr_path, hcol, col_bytes, h->col_indices_at, err, sizeof(err));
    if (!rc)
        rc = graph_check_structure(h, o->csr_path, hro, hcol, err, sizeof(err));
    if (!rc && (cudaMalloc((void **)&ro, ro_bytes) != cudaSuccess ||
                cudaMalloc((void **)&col, nonzero(col_bytes)) != cudaSuccess ||
                cudaMalloc((void **)&g->weights, w_bytes) != cudaSuccess ||
                cudaMemcpy(ro, hro, ro_bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
                cudaMemcpy(col, hcol, col_bytes, cudaMemcpyHostToDevice) != cudaSuccess))
        rc = graph_fail(err, sizeof(err), -EIO, "copying the structure to the device: %s",
                        cudaGetErrorString(cudaGetLastError()));
    g->row_offsets = ro;
    g->col_indices = col;
    free(hro);
    free(hcol);
    return rc;
}

/* Brings the weight file's current contents to where the kernels read them. */
static int refresh_weights(const struct options *o, struct graph_view *g)
{
    uint64_t bytes = g->wh.edges * 4;
    switch (o->mode) {
    case MODE_GAIA:
        return 0;   /* the kernels read the mapping */
    case MODE_MANAGED:
        return read_via_bounce(g->wgt_fd, o->wgt_path, g->weights, bytes, g->wh.weights_at, g->bounce);
    case MODE_COPY:
        break;
    }
    int rc = graph_pread_all(g->wgt_fd, o->wgt_path, g->host_weights, bytes, g->wh.weights_at, err, sizeof(err));
    if (rc)
        return rc;
    cudaError_t e = cudaMemcpy(g->weights, g->host_weights, bytes, cudaMemcpyHostToDevice);
    if (e != cudaSuccess)
        return cuda_fail(e, "cudaMemcpy of the weights", o);
    return 0;
}

static int alloc_state(const struct options *o, uint64_t vertices, uint64_t edges, struct sssp_state *s)
{
    s->vertices = vertices;
    uint64_t vb = nonzero(vertices) * 4;
    CUDA(cudaMalloc((void **)&s->dist, vb), "cudaMalloc");
    CUDA(cudaMalloc((void **)&s->visited, vb), "cudaMalloc");
    CUDA(cudaMalloc((void **)&s->frontier, vb), "cudaMalloc");
    CUDA(cudaMalloc((void **)&s->next, vb), "cudaMalloc");
    /* An advance appends at most one candidate per edge of the frontier,
     * and the frontier holds each vertex at most once. */
    CUDA(cudaMalloc((void **)&s->candidates, nonzero(edges) * 4), "cudaMalloc");
    CUDA(cudaMalloc((void **)&s->counters, 2 * sizeof(uint32_t)), "cudaMalloc");
    int sms = 1;
    int dev = 0;
    if (cudaGetDevice(&dev) == cudaSuccess)
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    s->grid = (unsigned)(sms > 0 ? sms : 1) * 4;
    uint64_t need = (vertices + SSSP_BLOCK - 1) / SSSP_BLOCK;
    if (need < s->grid)
        s->grid = need ? (unsigned)need : 1;
    return 0;
}

/* One SSSP from the source: levels of advance + filter until the frontier
 * is empty; the distances end in host_dist. */
static int run_sssp(const struct options *o, const struct graph_view *g, struct sssp_state *s, uint32_t *host_dist,
                    unsigned *levels)
{
    CUDA(sssp_launch_init(s->grid, 0, s->dist, s->visited, s->vertices, o->source, s->frontier), "launch init");
    uint32_t len = 1;
    unsigned level = 0;
    while (len) {
        level++;
        CUDA(cudaMemsetAsync(s->counters, 0, 2 * sizeof(uint32_t), 0), "cudaMemsetAsync");
        CUDA(sssp_launch_relax(0, g->row_offsets, g->col_indices, g->weights, s->dist, s->frontier, len,
                               s->candidates, s->counters),
             "launch relax");
        CUDA(sssp_launch_filter(s->grid, 0, s->candidates, s->counters, level, s->visited, s->next),
             "launch filter");
        CUDA(cudaMemcpy(&len, s->counters + 1, sizeof(len), cudaMemcpyDeviceToHost), "a level of SSSP");
        uint32_t *t = s->frontier;
        s->frontier = s->next;
        s->next = t;
    }
    CUDA(cudaMemcpy(host_dist, s->dist, nonzero(s->vertices) * 4, cudaMemcpyDeviceToHost), "copying distances back");
    *levels = level;
    return 0;
}

/* The oracle: Dijkstra on the structure and on the weights as the file
 * holds them now. Returns the number of wrong distances, or -1. */
static int64_t validate(const struct options *o, const struct graph_view *g, const uint64_t *ro,
                        const uint32_t *col, uint32_t *wbuf, uint32_t *want, const uint32_t *got, unsigned iteration)
{
    if (graph_pread_all(g->wgt_fd, o->wgt_path, wbuf, g->wh.edges * 4, g->wh.weights_at, err, sizeof(err))) {
        fprintf(stderr, "sssp: %s\n", err);
        return -1;
    }
    if (dijkstra(g->ch.vertices, ro, col, wbuf, o->source, want)) {
        fprintf(stderr, "sssp: out of memory in Dijkstra\n");
        return -1;
    }
    char label[64];
    snprintf(label, sizeof(label), "sssp: iteration %u", iteration);
    return (int64_t)sssp_compare(label, g->ch.vertices, want, got, 5);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: sssp [--mode=copy|managed|gaia] [--validate] [--source=V] [--iterations=N]\n"
               "            [--sync=PATH] [--weights=FILE] [--verbose] GRAPH.csr\n"
               "  --mode=copy     copy the whole weight array to the GPU every iteration (default)\n"
               "  --mode=managed  read the weights into cudaMallocManaged memory every iteration\n"
               "  --mode=gaia     mmap both files and give the kernels the mapped pointers\n"
               "  --validate      check every run against a CPU Dijkstra\n"
               "  --source=V      the source vertex (default 0)\n"
               "  --iterations=N  timed runs without --sync (default 1)\n"
               "  --sync=PATH     follow a producer through PATH.ready / PATH.done\n"
               "  --weights=FILE  the weight file (default GRAPH.wgt)\n");
}

static int parse(int argc, char **argv, struct options *o)
{
    static const struct option longopts[] = {
        {"mode", required_argument, 0, 'm'},    {"validate", no_argument, 0, 'V'},
        {"source", required_argument, 0, 's'},  {"iterations", required_argument, 0, 'n'},
        {"sync", required_argument, 0, 'S'},    {"weights", required_argument, 0, 'w'},
        {"verbose", no_argument, 0, 'v'},       {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    memset(o, 0, sizeof(*o));
    o->iterations = 1;
    const char *weights = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'm':
            if (strcmp(optarg, "copy") == 0)
                o->mode = MODE_COPY;
            else if (strcmp(optarg, "managed") == 0)
                o->mode = MODE_MANAGED;
            else if (strcmp(optarg, "gaia") == 0)
                o->mode = MODE_GAIA;
            else {
                fprintf(stderr, "sssp: --mode=%s: expected copy, managed or gaia\n", optarg);
                return -1;
            }
            break;
        case 'V':
            o->validate = true;
            break;
        case 's':
        case 'n': {
            errno = 0;
            unsigned long v = strtoul(optarg, &end, 10);
            if (errno || *end || !*optarg || v > 0xfffffffful) {
                fprintf(stderr, "sssp: --%s=%s: expected a number\n", c == 's' ? "source" : "iterations", optarg);
                return -1;
            }
            if (c == 's')
                o->source = (uint32_t)v;
            else
                o->iterations = (unsigned)v;
            break;
        }
        case 'S':
            o->sync_path = optarg;
            break;
        case 'w':
            weights = optarg;
            break;
        case 'v':
            o->verbose = true;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return -1;
        }
    }
    if (optind != argc - 1) {
        usage(stderr);
        return -1;
    }
    o->csr_path = argv[optind];
    if (weights)
        snprintf(o->wgt_path, sizeof(o->wgt_path), "%s", weights);
    else
        graph_weights_path(o->csr_path, o->wgt_path, sizeof(o->wgt_path));
    return 0;
}

/* The context first, as CUDA programs usually do; the files are mapped
 * after it exists. */
static int init_cuda(const struct options *o)
{
    CUDA(cudaSetDevice(0), "cudaSetDevice");
    CUDA(cudaFree(0), "initialising CUDA");
    return 0;
}

/* Host buffers, freed on every way out (so leak checkers see none). */
struct host_buffers {
    uint32_t *dist, *want, *oracle_col, *oracle_w;
    uint64_t *oracle_ro;
    double *times_ms;       /* per timed iteration */
    size_t times_cap;
};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of n times (sorts them); 0 for none. */
static double median_ms(double *t, unsigned n)
{
    if (!n)
        return 0;
    qsort(t, n, sizeof(*t), cmp_double);
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

static void release(struct graph_view *g, struct pairsync *ps, struct host_buffers *hb)
{
    free(hb->dist);
    free(hb->want);
    free(hb->oracle_ro);
    free(hb->oracle_col);
    free(hb->oracle_w);
    free(hb->times_ms);
    free(g->host_weights);
    free(g->bounce);
    if (g->csr_map && g->csr_map != MAP_FAILED)
        munmap(g->csr_map, g->ch.file_bytes);
    if (g->wgt_map && g->wgt_map != MAP_FAILED)
        munmap(g->wgt_map, g->wh.file_bytes);
    if (g->csr_fd >= 0)
        close(g->csr_fd);
    if (g->wgt_fd >= 0)
        close(g->wgt_fd);
    pairsync_close(ps);
}

/* Everything after the options; returns the exit status. */
static int consume(const struct options *o, struct graph_view *g, struct pairsync *ps, struct host_buffers *hb)
{
    if (init_cuda(o))
        return 1;
    if (o->sync_path && pairsync_open_consumer(o->sync_path, ps, err, sizeof(err))) {
        fprintf(stderr, "sssp: %s\n", err);
        return 1;
    }
    struct sssp_state st;
    if (open_files(o, g) || setup_graph(o, g)) {
        fprintf(stderr, "sssp: %s\n", err);
        return 1;
    }
    if (alloc_state(o, g->ch.vertices, g->ch.edges, &st))
        return 1;
    uint64_t nv = nonzero(g->ch.vertices);
    if (!(hb->dist = malloc(nv * 4)))
        return 1;
    if (o->validate) {
        /* The oracle reads the files itself, apart from every mode's buffers. */
        hb->oracle_ro = malloc((g->ch.vertices + 1) * 8);
        hb->oracle_col = malloc(nonzero(g->ch.edges) * 4);
        hb->oracle_w = malloc(nonzero(g->ch.edges) * 4);
        hb->want = malloc(nv * 4);
        err[0] = 0;
        if (!hb->oracle_ro || !hb->oracle_col || !hb->oracle_w || !hb->want ||
            graph_pread_all(g->csr_fd, o->csr_path, hb->oracle_ro, (g->ch.vertices + 1) * 8, g->ch.row_offsets_at,
                            err, sizeof(err)) ||
            graph_pread_all(g->csr_fd, o->csr_path, hb->oracle_col, g->ch.edges * 4, g->ch.col_indices_at, err,
                            sizeof(err))) {
            fprintf(stderr, "sssp: %s\n", err[0] ? err : "out of memory");
            return 1;
        }
    }

    /* Iteration 0: untimed (first uploads, first faults), validated. */
    unsigned levels = 0, iterations = 0, failed_iterations = 0;
    if (refresh_weights(o, g)) {
        fprintf(stderr, "sssp: %s\n", err);
        return 1;
    }
    if (run_sssp(o, g, &st, hb->dist, &levels))
        return 1;
    if (o->validate) {
        int64_t bad = validate(o, g, hb->oracle_ro, hb->oracle_col, hb->oracle_w, hb->want, hb->dist, 0);
        if (bad < 0)
            return 1;
        failed_iterations += bad > 0;
    }
    if (o->sync_path && pairsync_send(ps->done_fd, 0)) {
        fprintf(stderr, "sssp: %s.done: the producer is gone\n", o->sync_path);
        return 1;
    }

    double total_ms = 0;
    int64_t bytes0 = h2d_bytes(), total_bytes = 0;
    for (;;) {
        uint32_t token = iterations + 1;
        if (o->sync_path) {
            int r = pairsync_recv(ps->ready_fd, &token);
            if (r < 0) {
                fprintf(stderr, "sssp: %s.ready: %s\n", o->sync_path, strerror(-r));
                return 1;
            }
            if (r == 0)
                break;  /* the producer has finished */
        } else if (iterations == o->iterations) {
            break;
        }
        int64_t b0 = h2d_bytes();
        double t0 = now_ms();
        if (refresh_weights(o, g)) {
            fprintf(stderr, "sssp: %s\n", err);
            return 1;
        }
        if (run_sssp(o, g, &st, hb->dist, &levels))
            return 1;
        double ms = now_ms() - t0;
        int64_t b1 = h2d_bytes();
        total_ms += ms;
        if (b0 >= 0 && b1 >= 0)
            total_bytes += b1 - b0;
        if (iterations == hb->times_cap) {
            size_t cap = hb->times_cap ? 2 * hb->times_cap : 128;
            double *t = realloc(hb->times_ms, cap * sizeof(*t));
            if (!t)
                return 1;
            hb->times_ms = t;
            hb->times_cap = cap;
        }
        hb->times_ms[iterations++] = ms;
        int64_t bad = 0;
        if (o->validate) {
            bad = validate(o, g, hb->oracle_ro, hb->oracle_col, hb->oracle_w, hb->want, hb->dist, token);
            if (bad < 0)
                return 1;
            failed_iterations += bad > 0;
        }
        if (o->verbose)
            fprintf(stderr, "sssp: iteration %u: %.3f ms, %u levels, %" PRId64 " bytes to the device%s\n", token, ms,
                    levels, b0 >= 0 ? b1 - b0 : (int64_t)-1,
                    o->validate ? (bad ? ", WRONG" : ", validated") : "");
        if (o->sync_path && pairsync_send(ps->done_fd, token)) {
            fprintf(stderr, "sssp: %s.done: the producer is gone\n", o->sync_path);
            return 1;
        }
    }
    uint64_t reached = 0;
    for (uint64_t v = 0; v < g->ch.vertices; v++)
        reached += hb->dist[v] != SSSP_INF;
    bool have_bytes = bytes0 >= 0;
    printf("RESULT mode=%s iterations=%u ms_per_iter=%.3f ms_median=%.3f h2d_bytes_per_iter=%.0f validated=%d "
           "levels=%u reached=%" PRIu64 " vertices=%" PRIu64 " edges=%" PRIu64 "\n",
           mode_names[o->mode], iterations, iterations ? total_ms / iterations : 0.0,
           median_ms(hb->times_ms, iterations),
           have_bytes ? (iterations ? (double)total_bytes / iterations : 0.0) : -1.0,
           o->validate ? failed_iterations == 0 : 0, levels, reached, g->ch.vertices, g->ch.edges);
    fflush(stdout);
    if (o->validate && failed_iterations) {
        fprintf(stderr, "sssp: %u of %u runs gave wrong distances\n", failed_iterations, iterations + 1);
        return 2;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct options o;
    if (parse(argc, argv, &o))
        return 1;
    struct graph_view g = {.csr_fd = -1, .wgt_fd = -1};
    struct pairsync ps = {-1, -1};
    struct host_buffers hb = {0};
    int status = consume(&o, &g, &ps, &hb);
    release(&g, &ps, &hb);
    return status;
}
