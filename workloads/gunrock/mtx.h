/* mtx.h — Matrix Market coordinate files as graphs, read as Gunrock reads
 * them: 1-based indices, `pattern` entries get weight 1, `symmetric` files
 * have their off-diagonal entries mirrored; `array` (dense) files and
 * complex, skew-symmetric or Hermitian matrices are refused. */
#ifndef GUNROCK_MTX_H
#define GUNROCK_MTX_H

#include <stdio.h>

#include "graph.h"

/* Weights are unsigned integers: an `integer` or `real` value is rounded
 * to the nearest integer; a negative value, or one above 2^31, is an
 * error (shortest paths need non-negative weights). Errors name the path,
 * the line and the byte offset. */
int mtx_read(FILE *f, const char *path, struct csr_graph *g, char *err, size_t errlen);
int mtx_read_path(const char *path, struct csr_graph *g, char *err, size_t errlen);

#endif
