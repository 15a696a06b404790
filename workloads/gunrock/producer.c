/*
 * producer — the writer of the dynamic-graph experiment: each iteration
 * changes edge weights in a graph's weight file with plain pwrite(2), then
 * tells the consumer (sssp --sync) to recompute.
 *
 *   producer [--percent=K] [--pattern=contiguous|random|uniform] [--per-page=N]
 *            [--page-size=BYTES] [--iterations=N] [--seed=S] [--max-weight=W]
 *            [--sync=PATH] GRAPH.wgt
 *
 * Patterns (K may be fractional):
 *   contiguous  the first K% of the file's weight pages, a few weights
 *               (--per-page, default 4) in each: GAIA's experiment wrote one
 *               weight into each of the first K% of 64 KiB pages;
 *   random      K% of the weight pages chosen at random each iteration;
 *   uniform     K% of all weights chosen at random: the worst case, where
 *               from about 1/(weights per page) on nearly every page changes.
 * Every changed weight gets a new value in [1, max weight] different from
 * its old one. The writes of one page are one pwrite of the span from its
 * first to its last changed weight.
 *
 * The producer reads the current weights through a shared mapping of the
 * file and calls msync on it before it signals, as GAIA's producer did
 * (it also stored through the mapping). With --sync the iterations are in
 * lockstep with the consumer (pairsync.h): wait until it is ready, write,
 * signal, repeat; then close, which ends the consumer. It prints
 *   PRODUCER iterations=N pages_per_iter=P weights_per_iter=W
 * Exit 0, or 1 on an error (including a consumer that went away).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "graph.h"
#include "pairsync.h"
#include "rng.h"

enum pattern { PATTERN_CONTIGUOUS, PATTERN_RANDOM, PATTERN_UNIFORM };

struct options {
    double percent;
    enum pattern pattern;
    unsigned per_page;
    uint64_t page_size;
    unsigned iterations;
    uint64_t seed;
    uint32_t max_weight;      /* 0: the file's */
    const char *sync_path;
    const char *path;
};

struct weight_file {
    const char *path;
    int fd;
    struct graph_wgt_header h;
    const uint32_t *weights;  /* through the mapping */
    void *map;
    uint32_t max_weight;
    uint64_t first_page, pages;  /* file pages (of page_size) holding weights */
};

struct counts {
    uint64_t pages, weights;
};

static char err[GRAPH_ERR_BYTES];

/* Weight index range [lo, hi) of file page p. */
static void page_range(const struct weight_file *f, uint64_t page_size, uint64_t p, uint64_t *lo, uint64_t *hi)
{
    uint64_t start = p * page_size, end = start + page_size;
    if (start < f->h.weights_at)
        start = f->h.weights_at;
    if (end > f->h.file_bytes)
        end = f->h.file_bytes;
    *lo = (start - f->h.weights_at) / 4;
    *hi = (end - f->h.weights_at) / 4;
}

/* Selection sampling (Knuth, TAOCP vol. 2, 3.4.2, Algorithm S): n of
 * [0, total), each subset equally likely, in increasing order. */
static uint64_t select_sorted(struct rng *r, uint64_t total, uint64_t n, uint64_t *out)
{
    uint64_t chosen = 0;
    for (uint64_t i = 0; i < total && chosen < n; i++)
        if (rng_below(r, total - i) < n - chosen)
            out[chosen++] = i;
    return chosen;
}

static uint32_t new_weight(struct rng *r, uint32_t old, uint32_t max_weight)
{
    uint32_t w = 1 + (uint32_t)rng_below(r, max_weight);
    return w != old ? w : old % max_weight + 1;
}

/* Changes the weights at the sorted indices idx[0..n) that all lie in one
 * page: one pwrite of the span they cover. */
static int write_span(struct weight_file *f, struct rng *r, const uint64_t *idx, uint64_t n, uint32_t *buf)
{
    uint64_t first = idx[0], len = idx[n - 1] - first + 1;
    memcpy(buf, f->weights + first, len * 4);
    for (uint64_t i = 0; i < n; i++)
        buf[idx[i] - first] = new_weight(r, buf[idx[i] - first], f->max_weight);
    uint64_t offset = f->h.weights_at + first * 4;
    ssize_t w = pwrite(f->fd, buf, len * 4, (off_t)offset);
    if (w != (ssize_t)(len * 4))
        return graph_fail(err, sizeof(err), w < 0 ? -errno : -EIO, "%s: offset %" PRIu64 ": pwrite: %s", f->path,
                          offset, w < 0 ? strerror(errno) : "short write");
    return 0;
}

static int update_pages(const struct options *o, struct weight_file *f, struct rng *r, uint64_t *scratch,
                        uint32_t *buf, struct counts *c)
{
    uint64_t n = (uint64_t)ceil((double)f->pages * o->percent / 100.0 - 1e-9);
    if (n > f->pages)
        n = f->pages;
    if (o->pattern == PATTERN_CONTIGUOUS)
        for (uint64_t i = 0; i < n; i++)
            scratch[i] = i;
    else
        n = select_sorted(r, f->pages, n, scratch);
    uint64_t slots[64];
    for (uint64_t i = 0; i < n; i++) {
        uint64_t lo, hi;
        page_range(f, o->page_size, f->first_page + scratch[i], &lo, &hi);
        uint64_t k = o->per_page < hi - lo ? o->per_page : hi - lo;
        k = select_sorted(r, hi - lo, k, slots);
        for (uint64_t j = 0; j < k; j++)
            slots[j] += lo;
        int rc = write_span(f, r, slots, k, buf);
        if (rc)
            return rc;
        c->pages++;
        c->weights += k;
    }
    return 0;
}

static int update_uniform(const struct options *o, struct weight_file *f, struct rng *r, uint64_t *scratch,
                          uint32_t *buf, struct counts *c)
{
    uint64_t edges = f->h.edges;
    uint64_t n = (uint64_t)llround((double)edges * o->percent / 100.0);
    n = select_sorted(r, edges, n > edges ? edges : n, scratch);
    for (uint64_t i = 0; i < n;) {
        /* the run of chosen weights in the file page of scratch[i] */
        uint64_t page = (f->h.weights_at + scratch[i] * 4) / o->page_size, j = i + 1;
        while (j < n && (f->h.weights_at + scratch[j] * 4) / o->page_size == page)
            j++;
        int rc = write_span(f, r, scratch + i, j - i, buf);
        if (rc)
            return rc;
        c->pages++;
        c->weights += j - i;
        i = j;
    }
    return 0;
}

static int open_weights(const struct options *o, struct weight_file *f)
{
    f->path = o->path;
    f->fd = open(o->path, O_RDWR | O_CLOEXEC);
    if (f->fd < 0)
        return graph_fail(err, sizeof(err), -errno, "%s: cannot open for writing: %s", o->path, strerror(errno));
    int rc = graph_read_wgt_header(f->fd, o->path, &f->h, err, sizeof(err));
    if (rc)
        return rc;
    f->map = mmap(NULL, f->h.file_bytes, PROT_READ, MAP_SHARED, f->fd, 0);
    if (f->map == MAP_FAILED)
        return graph_fail(err, sizeof(err), -errno, "%s: mmap: %s", o->path, strerror(errno));
    f->weights = (const uint32_t *)((const char *)f->map + f->h.weights_at);
    f->max_weight = o->max_weight ? o->max_weight : f->h.max_weight;
    if (f->max_weight < 2)
        f->max_weight = 2;  /* a weight must be able to change */
    if (f->h.edges) {
        f->first_page = f->h.weights_at / o->page_size;
        f->pages = (f->h.file_bytes - 1) / o->page_size - f->first_page + 1;
    }
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: producer [--percent=K] [--pattern=contiguous|random|uniform] [--per-page=N]\n"
               "                [--page-size=BYTES] [--iterations=N] [--seed=S] [--max-weight=W]\n"
               "                [--sync=PATH] GRAPH.wgt\n"
               "  --percent=K        share of weight pages (or of weights, uniform) changed per iteration (default 1)\n"
               "  --pattern=P        contiguous (the first pages), random (pages), uniform (weights); default contiguous\n"
               "  --per-page=N       weights changed in each chosen page (default 4, at most 64)\n"
               "  --page-size=BYTES  the page the percentage counts, a multiple of 4096 (default 4096)\n"
               "  --iterations=N     default 100\n"
               "  --seed=S           default 1\n"
               "  --max-weight=W     new weights in [1, W] (default: the file's maximum)\n"
               "  --sync=PATH        lockstep with a consumer through PATH.ready / PATH.done\n");
}

static bool parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end || !*s || *s == '-')
        return false;
    *out = v;
    return true;
}

static int parse(int argc, char **argv, struct options *o)
{
    static const struct option longopts[] = {
        {"percent", required_argument, 0, 'k'},  {"pattern", required_argument, 0, 'p'},
        {"per-page", required_argument, 0, 'w'}, {"page-size", required_argument, 0, 'P'},
        {"iterations", required_argument, 0, 'n'}, {"seed", required_argument, 0, 's'},
        {"max-weight", required_argument, 0, 'M'}, {"sync", required_argument, 0, 'S'},
        {"help", no_argument, 0, 'h'},           {0, 0, 0, 0},
    };
    *o = (struct options){.percent = 1, .per_page = 4, .page_size = 4096, .iterations = 100, .seed = 1};
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        uint64_t v = 0;
        char *end;
        switch (c) {
        case 'k':
            errno = 0;
            o->percent = strtod(optarg, &end);
            if (errno || *end || !*optarg || !(o->percent >= 0 && o->percent <= 100)) {
                fprintf(stderr, "producer: --percent=%s: expected 0..100\n", optarg);
                return -1;
            }
            break;
        case 'p':
            if (strcmp(optarg, "contiguous") == 0)
                o->pattern = PATTERN_CONTIGUOUS;
            else if (strcmp(optarg, "random") == 0)
                o->pattern = PATTERN_RANDOM;
            else if (strcmp(optarg, "uniform") == 0)
                o->pattern = PATTERN_UNIFORM;
            else {
                fprintf(stderr, "producer: --pattern=%s: expected contiguous, random or uniform\n", optarg);
                return -1;
            }
            break;
        case 'w':
            if (!parse_u64(optarg, &v) || v < 1 || v > 64) {
                fprintf(stderr, "producer: --per-page=%s: expected 1..64\n", optarg);
                return -1;
            }
            o->per_page = (unsigned)v;
            break;
        case 'P':
            if (!parse_u64(optarg, &v) || v < 4096 || v % 4096 || v > (1ull << 30)) {
                fprintf(stderr, "producer: --page-size=%s: expected a multiple of 4096\n", optarg);
                return -1;
            }
            o->page_size = v;
            break;
        case 'n':
        case 's':
        case 'M':
            if (!parse_u64(optarg, &v) || (c != 's' && v > 0xffffffffull)) {
                fprintf(stderr, "producer: bad number '%s'\n", optarg);
                return -1;
            }
            if (c == 'n')
                o->iterations = (unsigned)v;
            else if (c == 's')
                o->seed = v;
            else
                o->max_weight = (uint32_t)v;
            break;
        case 'S':
            o->sync_path = optarg;
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
    o->path = argv[optind];
    return 0;
}

int main(int argc, char **argv)
{
    struct options o;
    if (parse(argc, argv, &o))
        return 1;
    struct weight_file f = {.fd = -1};
    if (open_weights(&o, &f)) {
        fprintf(stderr, "producer: %s\n", err);
        return 1;
    }
    struct pairsync ps = {-1, -1};
    if (o.sync_path && pairsync_open_producer(o.sync_path, &ps, err, sizeof(err))) {
        fprintf(stderr, "producer: %s\n", err);
        return 1;
    }
    uint64_t scratch_n = o.pattern == PATTERN_UNIFORM ? f.h.edges : f.pages;
    uint64_t *scratch = malloc((scratch_n ? scratch_n : 1) * sizeof(uint64_t));
    uint32_t *buf = malloc(o.page_size);
    if (!scratch || !buf) {
        fprintf(stderr, "producer: out of memory\n");
        return 1;
    }
    struct rng r = {o.seed};
    struct counts total = {0, 0};
    uint32_t token;
    if (o.sync_path && pairsync_recv(ps.done_fd, &token) != 1) {
        fprintf(stderr, "producer: %s.done: the consumer went away before it was ready\n", o.sync_path);
        return 1;
    }
    for (unsigned i = 1; i <= o.iterations; i++) {
        int rc = o.pattern == PATTERN_UNIFORM ? update_uniform(&o, &f, &r, scratch, buf, &total)
                                              : update_pages(&o, &f, &r, scratch, buf, &total);
        if (rc) {
            fprintf(stderr, "producer: %s\n", err);
            return 1;
        }
        if (msync(f.map, f.h.file_bytes, MS_ASYNC) != 0) {
            fprintf(stderr, "producer: %s: msync: %s\n", o.path, strerror(errno));
            return 1;
        }
        if (!o.sync_path)
            continue;
        if (pairsync_send(ps.ready_fd, i) != 0) {
            fprintf(stderr, "producer: %s.ready: the consumer went away (iteration %u)\n", o.sync_path, i);
            return 1;
        }
        if (pairsync_recv(ps.done_fd, &token) != 1) {
            fprintf(stderr, "producer: %s.done: the consumer went away during iteration %u\n", o.sync_path, i);
            return 1;
        }
        if (token != i) {
            fprintf(stderr, "producer: %s.done: the consumer finished iteration %u, expected %u\n", o.sync_path,
                    token, i);
            return 1;
        }
    }
    pairsync_close(&ps);
    printf("PRODUCER iterations=%u pages_per_iter=%.1f weights_per_iter=%.1f\n", o.iterations,
           o.iterations ? (double)total.pages / o.iterations : 0.0,
           o.iterations ? (double)total.weights / o.iterations : 0.0);
    munmap(f.map, f.h.file_bytes);
    close(f.fd);
    free(scratch);
    free(buf);
    return 0;
}
