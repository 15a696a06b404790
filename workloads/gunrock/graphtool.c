/*
 * gunrock-graph — makes the two files of a graph (graph.h) and inspects them.
 *
 *   gunrock-graph rmat --scale=S [--edge-factor=F] [--seed=N] [--max-weight=W]
 *                      [--directed] -o NAME
 *   gunrock-graph mtx FILE.mtx -o NAME
 *   gunrock-graph info NAME.csr [NAME.wgt]
 *
 * rmat and mtx write NAME.csr and NAME.wgt; info checks both files (every
 * header field, every offset and column, the structure id) and prints the
 * headers. Errors name the file and the offset.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "mtx.h"
#include "rmat.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: gunrock-graph rmat --scale=S [--edge-factor=F] [--seed=N] [--max-weight=W] [--directed] -o NAME\n"
               "       gunrock-graph mtx FILE.mtx -o NAME\n"
               "       gunrock-graph info NAME.csr [NAME.wgt]\n"
               "rmat: R-MAT (a,b,c,d = 0.57,0.19,0.19,0.05), 2^S vertices, F*2^S edges (default F=16, seed 1,\n"
               "      weights 1..W, default 64), stored both ways unless --directed.\n"
               "mtx:  Matrix Market coordinate (1-based; pattern -> weight 1; symmetric mirrored).\n"
               "Both write NAME.csr (structure) and NAME.wgt (weights).\n");
}

static int write_graph(const struct csr_graph *g, const char *name)
{
    char csr[4096], wgt[4096], err[GRAPH_ERR_BYTES];
    snprintf(csr, sizeof(csr), "%s.csr", name);
    snprintf(wgt, sizeof(wgt), "%s.wgt", name);
    if (graph_write(g, csr, wgt, err, sizeof(err))) {
        fprintf(stderr, "gunrock-graph: %s\n", err);
        return 1;
    }
    printf("%s: %" PRIu64 " vertices, %" PRIu64 " edges%s; %s: weights 1..%u\n", csr, g->vertices, g->edges,
           g->symmetric ? " (symmetric)" : "", wgt, g->max_weight);
    return 0;
}

static bool parse_uint(const char *s, unsigned long long max, unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end || !*s || *s == '-' || v > max)
        return false;
    *out = v;
    return true;
}

static int cmd_rmat(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"scale", required_argument, 0, 's'},      {"edge-factor", required_argument, 0, 'e'},
        {"seed", required_argument, 0, 'r'},       {"max-weight", required_argument, 0, 'w'},
        {"directed", no_argument, 0, 'd'},         {"output", required_argument, 0, 'o'},
        {0, 0, 0, 0},
    };
    struct rmat_params p;
    rmat_defaults(&p);
    const char *out = NULL;
    bool have_scale = false;
    int c;
    while ((c = getopt_long(argc, argv, "o:", longopts, NULL)) != -1) {
        unsigned long long v;
        switch (c) {
        case 's':
        case 'e':
        case 'r':
        case 'w':
            if (!parse_uint(optarg, c == 'r' ? UINT64_MAX : 0xffffffffull, &v)) {
                fprintf(stderr, "gunrock-graph: bad number '%s'\n", optarg);
                return 2;
            }
            if (c == 's') {
                p.scale = (unsigned)v;
                have_scale = true;
            } else if (c == 'e') {
                p.edge_factor = (unsigned)v;
            } else if (c == 'r') {
                p.seed = v;
            } else {
                p.max_weight = (uint32_t)v;
            }
            break;
        case 'd':
            p.directed = true;
            break;
        case 'o':
            out = optarg;
            break;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (!have_scale || !out || optind != argc) {
        usage(stderr);
        return 2;
    }
    struct csr_graph g;
    char err[GRAPH_ERR_BYTES];
    if (rmat_generate(&p, &g, err, sizeof(err))) {
        fprintf(stderr, "gunrock-graph: %s\n", err);
        return 1;
    }
    int rc = write_graph(&g, out);
    csr_graph_free(&g);
    return rc;
}

static int cmd_mtx(int argc, char **argv)
{
    const char *out = NULL;
    int c;
    while ((c = getopt(argc, argv, "o:")) != -1) {
        if (c != 'o') {
            usage(stderr);
            return 2;
        }
        out = optarg;
    }
    if (!out || optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    struct csr_graph g;
    char err[GRAPH_ERR_BYTES];
    if (mtx_read_path(argv[optind], &g, err, sizeof(err))) {
        fprintf(stderr, "gunrock-graph: %s\n", err);
        return 1;
    }
    int rc = write_graph(&g, out);
    csr_graph_free(&g);
    return rc;
}

static int cmd_info(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        usage(stderr);
        return 2;
    }
    char wgt[4096], err[GRAPH_ERR_BYTES];
    if (argc == 3)
        snprintf(wgt, sizeof(wgt), "%s", argv[2]);
    else
        graph_weights_path(argv[1], wgt, sizeof(wgt));
    struct csr_graph g;
    if (graph_load(argv[1], wgt, &g, err, sizeof(err))) {
        fprintf(stderr, "gunrock-graph: %s\n", err);
        return 1;
    }
    struct graph_csr_header ch;
    graph_csr_header_for(&g, &ch);
    uint64_t max_degree = 0, isolated = 0;
    for (uint64_t v = 0; v < g.vertices; v++) {
        uint64_t d = g.row_offsets[v + 1] - g.row_offsets[v];
        max_degree = d > max_degree ? d : max_degree;
        isolated += d == 0;
    }
    printf("%s: version %u, %" PRIu64 " vertices, %" PRIu64 " edges, %s, structure id %016" PRIx64 ", %" PRIu64
           " bytes\n",
           argv[1], ch.version, g.vertices, g.edges, g.symmetric ? "symmetric" : "directed", ch.structure_id,
           ch.file_bytes);
    printf("%s: %" PRIu64 " weights, max weight %u, %" PRIu64 " bytes (%" PRIu64 " pages of 4 KiB)\n", wgt, g.edges,
           g.max_weight, GRAPH_HEADER_BYTES + g.edges * 4, (g.edges * 4 + 4095) / 4096);
    printf("degrees: max %" PRIu64 ", %" PRIu64 " vertices with no out-edges\n", max_degree, isolated);
    csr_graph_free(&g);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "rmat") == 0)
        return cmd_rmat(argc - 1, argv + 1);
    if (strcmp(argv[1], "mtx") == 0)
        return cmd_mtx(argc - 1, argv + 1);
    if (strcmp(argv[1], "info") == 0)
        return cmd_info(argc - 1, argv + 1);
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    usage(stderr);
    return 2;
}
