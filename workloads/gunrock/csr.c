/* csr.c — building a CSR graph from edge triples. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"

int graph_fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

void csr_graph_free(struct csr_graph *g)
{
    free(g->row_offsets);
    free(g->col_indices);
    free(g->weights);
    memset(g, 0, sizeof(*g));
}

/* Counting sort by source: count per vertex, prefix-sum into offsets, then
 * place each triple at its vertex's next slot in input order. */
int csr_from_coo(uint64_t vertices, uint64_t m, const uint32_t *src, const uint32_t *dst,
                 const uint32_t *w, struct csr_graph *g, char *err, size_t errlen)
{
    memset(g, 0, sizeof(*g));
    if (vertices > GRAPH_MAX_VERTICES)
        return graph_fail(err, errlen, -EINVAL, "%llu vertices: at most %llu are supported",
                          (unsigned long long)vertices, GRAPH_MAX_VERTICES);
    g->vertices = vertices;
    g->edges = m;
    g->row_offsets = calloc(vertices + 1, sizeof(uint64_t));
    g->col_indices = malloc((m ? m : 1) * sizeof(uint32_t));
    g->weights = malloc((m ? m : 1) * sizeof(uint32_t));
    uint64_t *next = malloc((vertices ? vertices : 1) * sizeof(uint64_t));
    if (!g->row_offsets || !g->col_indices || !g->weights || !next) {
        free(next);
        csr_graph_free(g);
        return graph_fail(err, errlen, -ENOMEM, "out of memory for a graph of %llu vertices, %llu edges",
                          (unsigned long long)vertices, (unsigned long long)m);
    }
    for (uint64_t i = 0; i < m; i++) {
        if (src[i] >= vertices || dst[i] >= vertices) {
            free(next);
            csr_graph_free(g);
            return graph_fail(err, errlen, -EINVAL, "edge %llu (%u -> %u) names a vertex >= %llu",
                              (unsigned long long)i, src[i], dst[i], (unsigned long long)vertices);
        }
        g->row_offsets[src[i] + 1]++;
    }
    for (uint64_t v = 0; v < vertices; v++) {
        g->row_offsets[v + 1] += g->row_offsets[v];
        next[v] = g->row_offsets[v];
    }
    for (uint64_t i = 0; i < m; i++) {
        uint64_t at = next[src[i]]++;
        g->col_indices[at] = dst[i];
        g->weights[at] = w[i];
        if (w[i] > g->max_weight)
            g->max_weight = w[i];
    }
    free(next);
    return 0;
}
