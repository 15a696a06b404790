/* rmat.c — R-MAT edge generation. Each edge picks one quadrant of the
 * adjacency matrix per level, `scale` levels deep, with probabilities
 * a, b, c, d; low vertex ids gather most edges, so vertex 0 (the SSSP
 * source, as in Gunrock) is the best-connected vertex. Vertex labels are
 * not permuted: the weight file then has its hub's edges first, which is
 * where GAIA's producer wrote ("the first k% of pages"). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rmat.h"
#include "rng.h"

void rmat_defaults(struct rmat_params *p)
{
    memset(p, 0, sizeof(*p));
    p->scale = 10;
    p->edge_factor = 16;
    p->seed = 1;
    p->max_weight = 64;
    p->a = 0.57;
    p->b = 0.19;
    p->c = 0.19;
}

int rmat_generate(const struct rmat_params *p, struct csr_graph *g, char *err, size_t errlen)
{
    memset(g, 0, sizeof(*g));
    if (p->scale < 1 || p->scale > 31)
        return graph_fail(err, errlen, -EINVAL, "rmat: scale %u: must be 1..31", p->scale);
    if (p->edge_factor < 1 || p->edge_factor > 1024)
        return graph_fail(err, errlen, -EINVAL, "rmat: edge factor %u: must be 1..1024", p->edge_factor);
    if (p->max_weight < 1)
        return graph_fail(err, errlen, -EINVAL, "rmat: max weight must be at least 1");
    double d = 1.0 - p->a - p->b - p->c;
    if (p->a < 0 || p->b < 0 || p->c < 0 || d < 0)
        return graph_fail(err, errlen, -EINVAL, "rmat: quadrant probabilities %g %g %g leave d = %g < 0", p->a,
                          p->b, p->c, d);
    uint64_t vertices = 1ull << p->scale;
    uint64_t generated = vertices * p->edge_factor;
    uint64_t cap = p->directed ? generated : 2 * generated;
    uint32_t *src = malloc(cap * sizeof(uint32_t));
    uint32_t *dst = malloc(cap * sizeof(uint32_t));
    uint32_t *w = malloc(cap * sizeof(uint32_t));
    if (!src || !dst || !w) {
        free(src);
        free(dst);
        free(w);
        return graph_fail(err, errlen, -ENOMEM, "rmat: out of memory for %llu edges", (unsigned long long)cap);
    }
    struct rng r = {p->seed};
    double ab = p->a + p->b, abc = p->a + p->b + p->c;
    uint64_t m = 0;
    for (uint64_t i = 0; i < generated; i++) {
        uint32_t u = 0, v = 0;
        for (unsigned level = 0; level < p->scale; level++) {
            double x = rng_unit(&r);
            unsigned row = x >= ab, col = (x >= p->a && x < ab) || x >= abc;
            u = (u << 1) | row;
            v = (v << 1) | col;
        }
        uint32_t weight = 1 + (uint32_t)rng_below(&r, p->max_weight);
        src[m] = u;
        dst[m] = v;
        w[m++] = weight;
        if (!p->directed && u != v) {
            src[m] = v;
            dst[m] = u;
            w[m++] = weight;
        }
    }
    int rc = csr_from_coo(vertices, m, src, dst, w, g, err, errlen);
    free(src);
    free(dst);
    free(w);
    if (!rc) {
        g->symmetric = !p->directed;
        g->max_weight = p->max_weight;
    }
    return rc;
}
