/*
 * graph.h — the graph the SSSP workload runs on, in memory and on disk.
 *
 * A graph is two files (README.md, "File formats"):
 *
 *   NAME.csr  the structure: row offsets and column indices (CSR), never
 *             written after it is made;
 *   NAME.wgt  the edge weights, one uint32_t per stored edge in CSR order:
 *             the file the producer updates and the GPU reads.
 *
 * GAIA's Gunrock patch split the weights from the CSR cache the same way
 * (a `<csr>.val` file), so that the file a producer writes holds nothing
 * but what changes. Each file starts with a 4 KiB header page, so every
 * array starts page-aligned and "page p of the weights" is a page of the
 * file. All integers are little-endian.
 *
 * Functions return 0 or -errno and, on failure, write one line into
 * `err` that names the file and the byte offset at fault.
 */
#ifndef GUNROCK_GRAPH_H
#define GUNROCK_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GRAPH_HEADER_BYTES 4096u
#define GRAPH_VERSION 1u
#define GRAPH_CSR_MAGIC "GRCSR\0\0\0"   /* 8 bytes, NUL padded */
#define GRAPH_WGT_MAGIC "GRWGT\0\0\0"
#define GRAPH_MAX_VERTICES 0xfffffffeull /* vertex ids are uint32_t; ~0u is "none" */
#define GRAPH_FLAG_SYMMETRIC 1u         /* every edge is stored in both directions */
#define GRAPH_ERR_BYTES 512

/* NAME.csr: this header, zero-padded to GRAPH_HEADER_BYTES, then
 * uint64_t row_offsets[vertices + 1] at row_offsets_at and uint32_t
 * col_indices[edges] at col_indices_at (both page-aligned). */
struct graph_csr_header {
    char magic[8];            /*  0: GRAPH_CSR_MAGIC */
    uint32_t version;         /*  8: GRAPH_VERSION */
    uint32_t header_bytes;    /* 12: GRAPH_HEADER_BYTES */
    uint64_t vertices;        /* 16 */
    uint64_t edges;           /* 24: stored (directed) edges */
    uint64_t row_offsets_at;  /* 32: GRAPH_HEADER_BYTES */
    uint64_t col_indices_at;  /* 40: after the row offsets, rounded up to 4 KiB */
    uint64_t file_bytes;      /* 48: col_indices_at + 4 * edges */
    uint64_t structure_id;    /* 56: XXH3-64 of row_offsets then col_indices */
    uint32_t flags;           /* 64: GRAPH_FLAG_* */
    uint32_t reserved;        /* 68: 0 */
};

/* NAME.wgt: this header, zero-padded to GRAPH_HEADER_BYTES, then
 * uint32_t weights[edges] at weights_at. */
struct graph_wgt_header {
    char magic[8];            /*  0: GRAPH_WGT_MAGIC */
    uint32_t version;         /*  8: GRAPH_VERSION */
    uint32_t header_bytes;    /* 12: GRAPH_HEADER_BYTES */
    uint64_t edges;           /* 16: equals the structure's */
    uint64_t weights_at;      /* 24: GRAPH_HEADER_BYTES */
    uint64_t file_bytes;      /* 32: weights_at + 4 * edges */
    uint64_t structure_id;    /* 40: the structure file's: which graph these belong to */
    uint32_t weight_bits;     /* 48: 32 (uint32_t weights) */
    uint32_t max_weight;      /* 52: largest weight the generator drew; the producer draws up to it */
};

/* A graph in memory: CSR, edges of vertex v at [row_offsets[v], row_offsets[v+1]). */
struct csr_graph {
    uint64_t vertices, edges;
    uint64_t *row_offsets;    /* vertices + 1 */
    uint32_t *col_indices;    /* edges */
    uint32_t *weights;        /* edges */
    uint32_t max_weight;
    bool symmetric;
};

void csr_graph_free(struct csr_graph *g);

/* Builds g from m (src, dst, weight) triples; a stable counting sort, so
 * the edges of a vertex keep their input order. Takes no ownership. */
int csr_from_coo(uint64_t vertices, uint64_t m, const uint32_t *src, const uint32_t *dst,
                 const uint32_t *w, struct csr_graph *g, char *err, size_t errlen);

/* The header a structure / weight file for g would have. */
void graph_csr_header_for(const struct csr_graph *g, struct graph_csr_header *h);
void graph_wgt_header_for(const struct csr_graph *g, uint64_t structure_id, struct graph_wgt_header *h);
uint64_t graph_structure_id(uint64_t vertices, uint64_t edges, const uint64_t *row_offsets,
                            const uint32_t *col_indices);

/* Writes both files (each to a temporary name, then renamed over). */
int graph_write(const struct csr_graph *g, const char *csr_path, const char *wgt_path, char *err,
                size_t errlen);

/* Reads and checks a header against the file's size. */
int graph_read_csr_header(int fd, const char *path, struct graph_csr_header *h, char *err, size_t errlen);
int graph_read_wgt_header(int fd, const char *path, struct graph_wgt_header *h, char *err, size_t errlen);
/* A weight file belongs to a structure file: same edge count and id. */
int graph_check_pair(const struct graph_csr_header *c, const char *csr_path,
                     const struct graph_wgt_header *w, const char *wgt_path, char *err, size_t errlen);

/* Checks the arrays of a structure file (wherever they are: read, mapped):
 * offsets start at 0, never decrease, end at `edges`; every column is a
 * vertex; the id matches. The offset in a message is the file offset. */
int graph_check_structure(const struct graph_csr_header *h, const char *path, const uint64_t *row_offsets,
                          const uint32_t *col_indices, char *err, size_t errlen);

/* Reads `len` bytes at `offset` of an open file, all of them, or fails
 * naming the file and the offset where the data ended. */
int graph_pread_all(int fd, const char *path, void *buf, size_t len, uint64_t offset, char *err,
                    size_t errlen);

/* Loads both files into g (checked). */
int graph_load(const char *csr_path, const char *wgt_path, struct csr_graph *g, char *err, size_t errlen);

/* NAME.csr -> NAME.wgt (a path without the .csr suffix gets .wgt added). */
void graph_weights_path(const char *csr_path, char *out, size_t outlen);

/* Formats "path: message" into err; returns rc. */
int graph_fail(char *err, size_t errlen, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif /* GUNROCK_GRAPH_H */
