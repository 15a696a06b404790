/* graph_file.c — the structure (.csr) and weight (.wgt) files: headers,
 * writing, reading and checking. Every error names the file and the byte
 * offset at fault, so a bad or truncated file is found, not guessed at. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "graph.h"

_Static_assert(sizeof(struct graph_csr_header) == 72, "structure header layout");
_Static_assert(sizeof(struct graph_wgt_header) == 56, "weight header layout");

static uint64_t round_up_page(uint64_t x)
{
    return (x + GRAPH_HEADER_BYTES - 1) / GRAPH_HEADER_BYTES * GRAPH_HEADER_BYTES;
}

uint64_t graph_structure_id(uint64_t vertices, uint64_t edges, const uint64_t *row_offsets,
                            const uint32_t *col_indices)
{
    XXH3_state_t *st = XXH3_createState();
    if (!st)
        return 0;
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, row_offsets, (vertices + 1) * sizeof(uint64_t));
    XXH3_64bits_update(st, col_indices, edges * sizeof(uint32_t));
    uint64_t id = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return id;
}

void graph_csr_header_for(const struct csr_graph *g, struct graph_csr_header *h)
{
    memset(h, 0, sizeof(*h));
    memcpy(h->magic, GRAPH_CSR_MAGIC, 8);
    h->version = GRAPH_VERSION;
    h->header_bytes = GRAPH_HEADER_BYTES;
    h->vertices = g->vertices;
    h->edges = g->edges;
    h->row_offsets_at = GRAPH_HEADER_BYTES;
    h->col_indices_at = round_up_page(GRAPH_HEADER_BYTES + (g->vertices + 1) * sizeof(uint64_t));
    h->file_bytes = h->col_indices_at + g->edges * sizeof(uint32_t);
    h->structure_id = graph_structure_id(g->vertices, g->edges, g->row_offsets, g->col_indices);
    h->flags = g->symmetric ? GRAPH_FLAG_SYMMETRIC : 0;
}

void graph_wgt_header_for(const struct csr_graph *g, uint64_t structure_id, struct graph_wgt_header *h)
{
    memset(h, 0, sizeof(*h));
    memcpy(h->magic, GRAPH_WGT_MAGIC, 8);
    h->version = GRAPH_VERSION;
    h->header_bytes = GRAPH_HEADER_BYTES;
    h->edges = g->edges;
    h->weights_at = GRAPH_HEADER_BYTES;
    h->file_bytes = GRAPH_HEADER_BYTES + g->edges * sizeof(uint32_t);
    h->structure_id = structure_id;
    h->weight_bits = 32;
    h->max_weight = g->max_weight;
}

void graph_weights_path(const char *csr_path, char *out, size_t outlen)
{
    size_t n = strlen(csr_path);
    if (n >= 4 && strcmp(csr_path + n - 4, ".csr") == 0)
        snprintf(out, outlen, "%.*s.wgt", (int)(n - 4), csr_path);
    else
        snprintf(out, outlen, "%s.wgt", csr_path);
}

static int write_all(int fd, const char *path, const void *buf, size_t len, uint64_t offset, char *err,
                     size_t errlen)
{
    const char *p = buf;
    while (len) {
        ssize_t n = pwrite(fd, p, len, (off_t)offset);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return graph_fail(err, errlen, n < 0 ? -errno : -EIO, "%s: offset %" PRIu64 ": write failed: %s",
                              path, offset, n < 0 ? strerror(errno) : "no progress");
        p += n;
        len -= (size_t)n;
        offset += (uint64_t)n;
    }
    return 0;
}

/* One file: header page, then each (array, offset) pair; written under a
 * temporary name and renamed, so a reader never sees half a file. */
struct piece {
    const void *data;
    uint64_t bytes, at;
};

static int write_file(const char *path, const void *header, size_t header_len, const struct piece *pieces,
                      int npieces, uint64_t file_bytes, char *err, size_t errlen)
{
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0)
        return graph_fail(err, errlen, -errno, "%s: cannot create: %s", tmp, strerror(errno));
    char page[GRAPH_HEADER_BYTES] = {0};
    memcpy(page, header, header_len);
    int rc = write_all(fd, tmp, page, sizeof(page), 0, err, errlen);
    for (int i = 0; !rc && i < npieces; i++)
        rc = write_all(fd, tmp, pieces[i].data, pieces[i].bytes, pieces[i].at, err, errlen);
    if (!rc && ftruncate(fd, (off_t)file_bytes) != 0)
        rc = graph_fail(err, errlen, -errno, "%s: cannot size to %" PRIu64 " bytes: %s", tmp, file_bytes,
                        strerror(errno));
    if (close(fd) != 0 && !rc)
        rc = graph_fail(err, errlen, -errno, "%s: close: %s", tmp, strerror(errno));
    if (!rc && rename(tmp, path) != 0)
        rc = graph_fail(err, errlen, -errno, "%s: cannot rename to %s: %s", tmp, path, strerror(errno));
    if (rc)
        unlink(tmp);
    return rc;
}

int graph_write(const struct csr_graph *g, const char *csr_path, const char *wgt_path, char *err,
                size_t errlen)
{
    struct graph_csr_header ch;
    struct graph_wgt_header wh;
    graph_csr_header_for(g, &ch);
    graph_wgt_header_for(g, ch.structure_id, &wh);
    struct piece cp[2] = {
        {g->row_offsets, (g->vertices + 1) * sizeof(uint64_t), ch.row_offsets_at},
        {g->col_indices, g->edges * sizeof(uint32_t), ch.col_indices_at},
    };
    int rc = write_file(csr_path, &ch, sizeof(ch), cp, 2, ch.file_bytes, err, errlen);
    if (rc)
        return rc;
    struct piece wp[1] = {{g->weights, g->edges * sizeof(uint32_t), wh.weights_at}};
    return write_file(wgt_path, &wh, sizeof(wh), wp, 1, wh.file_bytes, err, errlen);
}

int graph_pread_all(int fd, const char *path, void *buf, size_t len, uint64_t offset, char *err,
                    size_t errlen)
{
    char *p = buf;
    while (len) {
        ssize_t n = pread(fd, p, len, (off_t)offset);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return graph_fail(err, errlen, -errno, "%s: offset %" PRIu64 ": read failed: %s", path, offset,
                              strerror(errno));
        if (n == 0)
            return graph_fail(err, errlen, -EINVAL, "%s: offset %" PRIu64 ": truncated: %zu more bytes expected",
                              path, offset, len);
        p += n;
        len -= (size_t)n;
        offset += (uint64_t)n;
    }
    return 0;
}

static int file_size(int fd, const char *path, uint64_t *size, char *err, size_t errlen)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return graph_fail(err, errlen, -errno, "%s: fstat: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return graph_fail(err, errlen, -EINVAL, "%s: not a regular file", path);
    *size = (uint64_t)st.st_size;
    return 0;
}

/* The checks both headers share: size, magic, version, header size. */
static int check_common(int fd, const char *path, void *h, size_t hlen, const char *magic, const char *what,
                        uint64_t *size, char *err, size_t errlen)
{
    int rc = file_size(fd, path, size, err, errlen);
    if (rc)
        return rc;
    if (*size < hlen)
        return graph_fail(err, errlen, -EINVAL,
                          "%s: offset %" PRIu64 ": truncated: the %s header needs %zu bytes, the file has %" PRIu64,
                          path, *size, what, hlen, *size);
    if ((rc = graph_pread_all(fd, path, h, hlen, 0, err, errlen)))
        return rc;
    const char *m = h;
    if (memcmp(m, magic, 8) != 0) {
        /* A structure file given where weights belong, or the reverse, is
         * the likely mistake: say so. */
        const char *other = strcmp(what, "structure") == 0 ? GRAPH_WGT_MAGIC : GRAPH_CSR_MAGIC;
        return graph_fail(err, errlen, -EINVAL, "%s: offset 0: bad magic: not a %s file (%s)", path, what,
                          memcmp(m, other, 8) == 0 ? "it is the other file of a graph" : "unknown format");
    }
    uint32_t version, header_bytes;
    memcpy(&version, m + 8, 4);
    memcpy(&header_bytes, m + 12, 4);
    if (version != GRAPH_VERSION)
        return graph_fail(err, errlen, -EINVAL, "%s: offset 8: unsupported version %u (this reader knows %u)",
                          path, version, GRAPH_VERSION);
    if (header_bytes != GRAPH_HEADER_BYTES)
        return graph_fail(err, errlen, -EINVAL, "%s: offset 12: header size %u, expected %u", path,
                          header_bytes, GRAPH_HEADER_BYTES);
    return 0;
}

static int check_size(const char *path, uint64_t want, uint64_t have, char *err, size_t errlen)
{
    if (have < want)
        return graph_fail(err, errlen, -EINVAL,
                          "%s: offset %" PRIu64 ": truncated: the header says %" PRIu64 " bytes, the file has %" PRIu64,
                          path, have, want, have);
    if (have > want)
        return graph_fail(err, errlen, -EINVAL,
                          "%s: offset %" PRIu64 ": %" PRIu64 " bytes past the end the header gives", path, want,
                          have - want);
    return 0;
}

int graph_read_csr_header(int fd, const char *path, struct graph_csr_header *h, char *err, size_t errlen)
{
    uint64_t size;
    int rc = check_common(fd, path, h, sizeof(*h), GRAPH_CSR_MAGIC, "structure", &size, err, errlen);
    if (rc)
        return rc;
    if (h->vertices > GRAPH_MAX_VERTICES)
        return graph_fail(err, errlen, -EINVAL, "%s: offset 16: %" PRIu64 " vertices, at most %llu supported",
                          path, h->vertices, GRAPH_MAX_VERTICES);
    if (h->edges > (UINT64_MAX - GRAPH_HEADER_BYTES) / 16)
        return graph_fail(err, errlen, -EINVAL, "%s: offset 24: implausible edge count %" PRIu64, path, h->edges);
    if (h->row_offsets_at != GRAPH_HEADER_BYTES)
        return graph_fail(err, errlen, -EINVAL, "%s: offset 32: row offsets at %" PRIu64 ", expected %u", path,
                          h->row_offsets_at, GRAPH_HEADER_BYTES);
    uint64_t col_at = round_up_page(GRAPH_HEADER_BYTES + (h->vertices + 1) * sizeof(uint64_t));
    if (h->col_indices_at != col_at)
        return graph_fail(err, errlen, -EINVAL, "%s: offset 40: column indices at %" PRIu64 ", expected %" PRIu64,
                          path, h->col_indices_at, col_at);
    uint64_t want = col_at + h->edges * sizeof(uint32_t);
    if (h->file_bytes != want)
        return graph_fail(err, errlen, -EINVAL, "%s: offset 48: file size %" PRIu64 " disagrees with the counts (%" PRIu64 ")",
                          path, h->file_bytes, want);
    if (h->flags & ~GRAPH_FLAG_SYMMETRIC)
        return graph_fail(err, errlen, -EINVAL, "%s: offset 64: unknown flags 0x%x", path, h->flags);
    return check_size(path, want, size, err, errlen);
}

int graph_read_wgt_header(int fd, const char *path, struct graph_wgt_header *h, char *err, size_t errlen)
{
    uint64_t size;
    int rc = check_common(fd, path, h, sizeof(*h), GRAPH_WGT_MAGIC, "weight", &size, err, errlen);
    if (rc)
        return rc;
    if (h->edges > (UINT64_MAX - GRAPH_HEADER_BYTES) / 16)
        return graph_fail(err, errlen, -EINVAL, "%s: offset 16: implausible edge count %" PRIu64, path, h->edges);
    if (h->weights_at != GRAPH_HEADER_BYTES)
        return graph_fail(err, errlen, -EINVAL, "%s: offset 24: weights at %" PRIu64 ", expected %u", path,
                          h->weights_at, GRAPH_HEADER_BYTES);
    uint64_t want = GRAPH_HEADER_BYTES + h->edges * sizeof(uint32_t);
    if (h->file_bytes != want)
        return graph_fail(err, errlen, -EINVAL, "%s: offset 32: file size %" PRIu64 " disagrees with the count (%" PRIu64 ")",
                          path, h->file_bytes, want);
    if (h->weight_bits != 32)
        return graph_fail(err, errlen, -EINVAL, "%s: offset 48: %u-bit weights; this reader knows 32", path,
                          h->weight_bits);
    return check_size(path, want, size, err, errlen);
}

int graph_check_pair(const struct graph_csr_header *c, const char *csr_path, const struct graph_wgt_header *w,
                     const char *wgt_path, char *err, size_t errlen)
{
    if (w->edges != c->edges)
        return graph_fail(err, errlen, -EINVAL, "%s: offset 16: %" PRIu64 " weights, but %s has %" PRIu64 " edges",
                          wgt_path, w->edges, csr_path, c->edges);
    if (w->structure_id != c->structure_id)
        return graph_fail(err, errlen, -EINVAL,
                          "%s: offset 40: structure id %016" PRIx64 " is not %s's (%016" PRIx64 "): weights of another graph",
                          wgt_path, w->structure_id, csr_path, c->structure_id);
    return 0;
}

int graph_check_structure(const struct graph_csr_header *h, const char *path, const uint64_t *row_offsets,
                          const uint32_t *col_indices, char *err, size_t errlen)
{
    if (row_offsets[0] != 0)
        return graph_fail(err, errlen, -EINVAL, "%s: offset %" PRIu64 ": row_offsets[0] is %" PRIu64 ", not 0", path,
                          h->row_offsets_at, row_offsets[0]);
    for (uint64_t v = 0; v < h->vertices; v++)
        if (row_offsets[v + 1] < row_offsets[v] || row_offsets[v + 1] > h->edges)
            return graph_fail(err, errlen, -EINVAL,
                              "%s: offset %" PRIu64 ": row_offsets[%" PRIu64 "] = %" PRIu64 " after %" PRIu64
                              " (offsets must not decrease or pass %" PRIu64 ")",
                              path, h->row_offsets_at + (v + 1) * 8, v + 1, row_offsets[v + 1], row_offsets[v],
                              h->edges);
    if (row_offsets[h->vertices] != h->edges)
        return graph_fail(err, errlen, -EINVAL, "%s: offset %" PRIu64 ": the last row offset is %" PRIu64 ", not %" PRIu64,
                          path, h->row_offsets_at + h->vertices * 8, row_offsets[h->vertices], h->edges);
    for (uint64_t e = 0; e < h->edges; e++)
        if (col_indices[e] >= h->vertices)
            return graph_fail(err, errlen, -EINVAL,
                              "%s: offset %" PRIu64 ": col_indices[%" PRIu64 "] = %u is not a vertex (< %" PRIu64 ")",
                              path, h->col_indices_at + e * 4, e, col_indices[e], h->vertices);
    uint64_t id = graph_structure_id(h->vertices, h->edges, row_offsets, col_indices);
    if (id != h->structure_id)
        return graph_fail(err, errlen, -EINVAL,
                          "%s: offset 56: structure id %016" PRIx64 " does not match the arrays (%016" PRIx64 ")", path,
                          h->structure_id, id);
    return 0;
}

int graph_load(const char *csr_path, const char *wgt_path, struct csr_graph *g, char *err, size_t errlen)
{
    memset(g, 0, sizeof(*g));
    struct graph_csr_header ch;
    struct graph_wgt_header wh;
    int cfd = open(csr_path, O_RDONLY | O_CLOEXEC);
    if (cfd < 0)
        return graph_fail(err, errlen, -errno, "%s: cannot open: %s", csr_path, strerror(errno));
    int wfd = open(wgt_path, O_RDONLY | O_CLOEXEC);
    if (wfd < 0) {
        int rc = graph_fail(err, errlen, -errno, "%s: cannot open: %s", wgt_path, strerror(errno));
        close(cfd);
        return rc;
    }
    int rc = graph_read_csr_header(cfd, csr_path, &ch, err, errlen);
    if (!rc)
        rc = graph_read_wgt_header(wfd, wgt_path, &wh, err, errlen);
    if (!rc)
        rc = graph_check_pair(&ch, csr_path, &wh, wgt_path, err, errlen);
    if (!rc) {
        g->vertices = ch.vertices;
        g->edges = ch.edges;
        g->symmetric = ch.flags & GRAPH_FLAG_SYMMETRIC;
        g->max_weight = wh.max_weight;
        g->row_offsets = malloc((ch.vertices + 1) * sizeof(uint64_t));
        g->col_indices = malloc((ch.edges ? ch.edges : 1) * sizeof(uint32_t));
        g->weights = malloc((ch.edges ? ch.edges : 1) * sizeof(uint32_t));
        if (!g->row_offsets || !g->col_indices || !g->weights)
            rc = graph_fail(err, errlen, -ENOMEM, "%s: out of memory", csr_path);
    }
    if (!rc)
        rc = graph_pread_all(cfd, csr_path, g->row_offsets, (ch.vertices + 1) * 8, ch.row_offsets_at, err, errlen);
    if (!rc)
        rc = graph_pread_all(cfd, csr_path, g->col_indices, ch.edges * 4, ch.col_indices_at, err, errlen);
    if (!rc)
        rc = graph_pread_all(wfd, wgt_path, g->weights, ch.edges * 4, wh.weights_at, err, errlen);
    if (!rc)
        rc = graph_check_structure(&ch, csr_path, g->row_offsets, g->col_indices, err, errlen);
    close(cfd);
    close(wfd);
    if (rc)
        csr_graph_free(g);
    return rc;
}
