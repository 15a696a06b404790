/* dijkstra.h — the CPU oracle for the GPU's shortest paths. */
#ifndef GUNROCK_DIJKSTRA_H
#define GUNROCK_DIJKSTRA_H

#include <stddef.h>
#include <stdint.h>

#define SSSP_INF 0xffffffffu   /* distance of a vertex the source does not reach */

/* Shortest distances from `source` over the CSR arrays, with the GPU's
 * arithmetic: a path whose length would reach SSSP_INF is not taken.
 * Returns 0 or -ENOMEM. */
int dijkstra(uint64_t vertices, const uint64_t *row_offsets, const uint32_t *col_indices,
             const uint32_t *weights, uint32_t source, uint32_t *dist);

/* Compares `got` with `want`; prints up to `report` differences (with the
 * label) to stderr and returns how many vertices differ. */
uint64_t sssp_compare(const char *label, uint64_t vertices, const uint32_t *want, const uint32_t *got,
                      unsigned report);

#endif
