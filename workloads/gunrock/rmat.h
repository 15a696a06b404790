/* rmat.h — R-MAT / Kronecker graphs (Chakrabarti, Zhan, Faloutsos, SDM'04). */
#ifndef GUNROCK_RMAT_H
#define GUNROCK_RMAT_H

#include <stdbool.h>
#include <stdint.h>

#include "graph.h"

struct rmat_params {
    unsigned scale;           /* 2^scale vertices */
    unsigned edge_factor;     /* edge_factor * 2^scale generated edges */
    uint64_t seed;
    uint32_t max_weight;      /* weights uniform in [1, max_weight] */
    bool directed;            /* false: every edge stored both ways (Graph500's undirected graph) */
    double a, b, c;           /* quadrant probabilities; d = 1 - a - b - c */
};

/* Graph500's parameters (a, b, c, d) = (0.57, 0.19, 0.19, 0.05). */
void rmat_defaults(struct rmat_params *p);

/* Deterministic: the same parameters give the same graph, byte for byte. */
int rmat_generate(const struct rmat_params *p, struct csr_graph *g, char *err, size_t errlen);

#endif
