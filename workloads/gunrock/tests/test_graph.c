/* test_graph.c — the graph files and readers: R-MAT is deterministic,
 * files round-trip, Matrix Market is read as Gunrock reads it, and every
 * bad or truncated input is refused with the file and the offset named. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "graph.h"
#include "mtx.h"
#include "rmat.h"

static char dir[256];
static char err[GRAPH_ERR_BYTES];

static int make_dir(void **state)
{
    snprintf(dir, sizeof(dir), "%s/gunrock-test.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    return mkdtemp(dir) ? 0 : -1;
}

static int remove_dir(void **state)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd);
}

static void path_in_dir(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", dir, name);
}

static void small_rmat(struct csr_graph *g, uint64_t seed)
{
    struct rmat_params p;
    rmat_defaults(&p);
    p.scale = 8;
    p.edge_factor = 8;
    p.seed = seed;
    assert_int_equal(rmat_generate(&p, g, err, sizeof(err)), 0);
}

static bool graphs_equal(const struct csr_graph *a, const struct csr_graph *b)
{
    return a->vertices == b->vertices && a->edges == b->edges && a->symmetric == b->symmetric &&
           memcmp(a->row_offsets, b->row_offsets, (a->vertices + 1) * 8) == 0 &&
           memcmp(a->col_indices, b->col_indices, a->edges * 4) == 0 &&
           memcmp(a->weights, b->weights, a->edges * 4) == 0;
}

static void test_rmat_same_seed_same_graph(void **state)
{
    struct csr_graph a, b, c;
    small_rmat(&a, 7);
    small_rmat(&b, 7);
    small_rmat(&c, 8);
    assert_int_equal(a.vertices, 256);
    assert_true(graphs_equal(&a, &b));
    assert_false(graphs_equal(&a, &c));
    csr_graph_free(&a);
    csr_graph_free(&b);
    csr_graph_free(&c);
}

static int cmp_triple(const void *x, const void *y)
{
    const uint32_t *a = x, *b = y;
    for (int i = 0; i < 3; i++)
        if (a[i] != b[i])
            return a[i] < b[i] ? -1 : 1;
    return 0;
}

/* Undirected R-MAT: the multiset of (u, v, w) equals that of (v, u, w). */
static void test_rmat_undirected_stores_every_edge_both_ways(void **state)
{
    struct csr_graph g;
    small_rmat(&g, 3);
    assert_true(g.symmetric);
    uint32_t *fwd = malloc(g.edges * 12), *rev = malloc(g.edges * 12);
    for (uint64_t u = 0, i = 0; u < g.vertices; u++)
        for (uint64_t e = g.row_offsets[u]; e < g.row_offsets[u + 1]; e++, i++) {
            fwd[3 * i] = (uint32_t)u, fwd[3 * i + 1] = g.col_indices[e], fwd[3 * i + 2] = g.weights[e];
            rev[3 * i] = g.col_indices[e], rev[3 * i + 1] = (uint32_t)u, rev[3 * i + 2] = g.weights[e];
        }
    qsort(fwd, g.edges, 12, cmp_triple);
    qsort(rev, g.edges, 12, cmp_triple);
    assert_memory_equal(fwd, rev, g.edges * 12);
    for (uint64_t e = 0; e < g.edges; e++)
        assert_true(g.weights[e] >= 1 && g.weights[e] <= 64);
    /* R-MAT's skew: vertex 0 has the most edges */
    uint64_t d0 = g.row_offsets[1];
    for (uint64_t v = 1; v < g.vertices; v++)
        assert_true(g.row_offsets[v + 1] - g.row_offsets[v] <= d0);
    free(fwd);
    free(rev);
    csr_graph_free(&g);
}

static void write_pair(const struct csr_graph *g, const char *name, char *csr, char *wgt)
{
    char base[300];
    path_in_dir(base, sizeof(base), name);
    snprintf(csr, 320, "%s.csr", base);
    snprintf(wgt, 320, "%s.wgt", base);
    assert_int_equal(graph_write(g, csr, wgt, err, sizeof(err)), 0);
}

static void test_files_round_trip(void **state)
{
    struct csr_graph g, back;
    char csr[320], wgt[320];
    small_rmat(&g, 11);
    write_pair(&g, "rt", csr, wgt);
    assert_int_equal(graph_load(csr, wgt, &back, err, sizeof(err)), 0);
    assert_true(graphs_equal(&g, &back));
    assert_int_equal(back.max_weight, 64);
    /* the documented layout: page-aligned arrays at the header's offsets */
    struct stat st;
    assert_int_equal(stat(csr, &st), 0);
    uint64_t col_at = (4096 + (g.vertices + 1) * 8 + 4095) / 4096 * 4096;
    assert_int_equal((uint64_t)st.st_size, col_at + g.edges * 4);
    assert_int_equal(stat(wgt, &st), 0);
    assert_int_equal((uint64_t)st.st_size, 4096 + g.edges * 4);
    char name[320];
    graph_weights_path(csr, name, sizeof(name));
    assert_string_equal(name, wgt);
    csr_graph_free(&g);
    csr_graph_free(&back);
}

static int read_mtx_text(const char *text, struct csr_graph *g)
{
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    assert_non_null(f);
    int rc = mtx_read(f, "x.mtx", g, err, sizeof(err));
    fclose(f);
    return rc;
}

static void data_path(char *out, size_t n, const char *name)
{
    const char *src = getenv("GUNROCK_TEST_DATA");
    snprintf(out, n, "%s/%s", src ? src : "workloads/gunrock/tests/data", name);
}

static void test_mtx_pattern_symmetric_triangle(void **state)
{
    char path[512];
    struct csr_graph g;
    data_path(path, sizeof(path), "triangle.mtx");
    assert_int_equal(mtx_read_path(path, &g, err, sizeof(err)), 0);
    assert_int_equal(g.vertices, 3);
    assert_int_equal(g.edges, 6);   /* 3 entries, mirrored */
    assert_true(g.symmetric);
    for (uint64_t v = 0; v < 3; v++)
        assert_int_equal(g.row_offsets[v + 1] - g.row_offsets[v], 2);
    for (uint64_t e = 0; e < 6; e++)
        assert_int_equal(g.weights[e], 1);  /* pattern: weight 1 */
    csr_graph_free(&g);
}

static void test_mtx_symmetric_mirrors_all_but_the_diagonal(void **state)
{
    char path[512];
    struct csr_graph g;
    data_path(path, sizeof(path), "weighted.mtx");
    assert_int_equal(mtx_read_path(path, &g, err, sizeof(err)), 0);
    assert_int_equal(g.vertices, 6);
    assert_int_equal(g.edges, 17);  /* 8 off-diagonal entries twice, 1 diagonal once */
    /* vertex 0 (1-based 1): edges to 1 (7), 2 (9), 5 (14.4 -> 14), in input order */
    assert_int_equal(g.row_offsets[1], 3);
    uint32_t want_col[] = {1, 2, 5}, want_w[] = {7, 9, 14};
    assert_memory_equal(g.col_indices, want_col, sizeof(want_col));
    assert_memory_equal(g.weights, want_w, sizeof(want_w));
    csr_graph_free(&g);
}

static void test_mtx_general_is_not_mirrored(void **state)
{
    struct csr_graph g;
    assert_int_equal(read_mtx_text("%%MatrixMarket matrix coordinate integer general\n"
                                   "% comment\n\n4 4 2\n1 2 5\n4 3 0\n",
                                   &g),
                     0);
    assert_int_equal(g.vertices, 4);
    assert_int_equal(g.edges, 2);
    assert_false(g.symmetric);
    assert_int_equal(g.col_indices[0], 1);
    assert_int_equal(g.weights[0], 5);
    assert_int_equal(g.row_offsets[3], 1);
    assert_int_equal(g.col_indices[1], 2);
    assert_int_equal(g.weights[1], 0);
    csr_graph_free(&g);
}

/* Each bad input: refused, and the message names x.mtx and where. */
static void expect_mtx_error(const char *text, const char *where)
{
    struct csr_graph g;
    err[0] = 0;
    assert_int_not_equal(read_mtx_text(text, &g), 0);
    if (!strstr(err, where) || strncmp(err, "x.mtx: ", 7) != 0)
        fail_msg("error \"%s\" does not name \"%s\"", err, where);
}

static void test_mtx_bad_input_names_file_and_offset(void **state)
{
    const char *banner = "%%MatrixMarket matrix coordinate real general\n";   /* 46 bytes */
    char text[512];
    expect_mtx_error("", "offset 0: empty file");
    expect_mtx_error("hello\n", "line 1 (offset 0): not a Matrix Market banner");
    expect_mtx_error("%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n", "line 1 (offset 0): 'array'");
    expect_mtx_error("%%MatrixMarket matrix coordinate complex general\n", "field 'complex'");
    expect_mtx_error("%%MatrixMarket matrix coordinate real skew-symmetric\n", "symmetry 'skew-symmetric'");
    snprintf(text, sizeof(text), "%s", banner);
    expect_mtx_error(text, "offset 46: truncated: no size line");
    snprintf(text, sizeof(text), "%s3 4 1\n", banner);
    expect_mtx_error(text, "line 2 (offset 46): 3 x 4 is not square");
    snprintf(text, sizeof(text), "%s3 3 2\n1 2 1.5\n", banner);
    expect_mtx_error(text, "offset 60: truncated: 1 of the 2 declared entries");
    snprintf(text, sizeof(text), "%s3 3 2\n1 2 1.5\n4 1 2\n", banner);
    expect_mtx_error(text, "line 4 (offset 60): entry 2: (4, 1) is outside 1..3");
    snprintf(text, sizeof(text), "%s3 3 1\n0 1 2\n", banner);
    expect_mtx_error(text, "line 3 (offset 52): entry 1: (0, 1) is outside");
    snprintf(text, sizeof(text), "%s3 3 1\n1 2 -4\n", banner);
    expect_mtx_error(text, "line 3 (offset 52): entry 1: negative weight");
    snprintf(text, sizeof(text), "%s3 3 1\n1 2\n", banner);
    expect_mtx_error(text, "line 3 (offset 52): entry 1: expected a value");
    snprintf(text, sizeof(text), "%s3 3 1\n1 2 3 junk\n", banner);
    expect_mtx_error(text, "line 3 (offset 52): entry 1: unexpected text after the entry");
    snprintf(text, sizeof(text), "%s3 3 1\n1 2 3\n2 3 1\n", banner);
    expect_mtx_error(text, "line 4 (offset 58): more entries than the 1");
    snprintf(text, sizeof(text), "%s3 x 1\n", banner);
    expect_mtx_error(text, "line 2 (offset 46): expected the size line");
}

static void overwrite(const char *path, off_t at, const void *bytes, size_t n)
{
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, bytes, n, at), (ssize_t)n);
    close(fd);
}

static void expect_load_error(const char *csr, const char *wgt, const char *file, const char *where)
{
    struct csr_graph g;
    err[0] = 0;
    assert_int_not_equal(graph_load(csr, wgt, &g, err, sizeof(err)), 0);
    if (strncmp(err, file, strlen(file)) != 0 || !strstr(err, where))
        fail_msg("error \"%s\" does not name %s and \"%s\"", err, file, where);
}

static void test_bad_binary_files_name_file_and_offset(void **state)
{
    struct csr_graph g, other;
    char csr[320], wgt[320], ocsr[320], owgt[320], msg[128];
    small_rmat(&g, 5);
    small_rmat(&other, 6);
    write_pair(&other, "other", ocsr, owgt);

    write_pair(&g, "magic", csr, wgt);
    overwrite(csr, 0, "XXXX", 4);
    expect_load_error(csr, wgt, csr, "offset 0: bad magic: not a structure file (unknown format)");
    expect_load_error(wgt, wgt, wgt, "offset 0: bad magic: not a structure file (it is the other file");

    write_pair(&g, "version", csr, wgt);
    uint32_t v = 9;
    overwrite(csr, 8, &v, 4);
    expect_load_error(csr, wgt, csr, "offset 8: unsupported version 9");

    write_pair(&g, "short", csr, wgt);
    struct stat st;
    assert_int_equal(stat(csr, &st), 0);
    assert_int_equal(truncate(csr, st.st_size - 10), 0);
    snprintf(msg, sizeof(msg), "offset %lld: truncated", (long long)st.st_size - 10);
    expect_load_error(csr, wgt, csr, msg);
    assert_int_equal(truncate(csr, 20), 0);
    expect_load_error(csr, wgt, csr, "offset 20: truncated: the structure header needs 72 bytes");

    write_pair(&g, "wshort", csr, wgt);
    assert_int_equal(stat(wgt, &st), 0);
    assert_int_equal(truncate(wgt, st.st_size - 4), 0);
    snprintf(msg, sizeof(msg), "offset %lld: truncated", (long long)st.st_size - 4);
    expect_load_error(csr, wgt, wgt, msg);

    write_pair(&g, "pair", csr, wgt);
    if (g.edges == other.edges)
        expect_load_error(csr, owgt, owgt, "offset 40: structure id");
    else
        expect_load_error(csr, owgt, owgt, "offset 16:");

    /* a column that is not a vertex, at its own offset */
    write_pair(&g, "col", csr, wgt);
    uint64_t col_at = (4096 + (g.vertices + 1) * 8 + 4095) / 4096 * 4096;
    uint32_t bad = 1000;
    overwrite(csr, (off_t)(col_at + 3 * 4), &bad, 4);
    snprintf(msg, sizeof(msg), "offset %llu: col_indices[3] = 1000 is not a vertex", (unsigned long long)(col_at + 12));
    expect_load_error(csr, wgt, csr, msg);

    /* a row offset that goes backwards */
    write_pair(&g, "row", csr, wgt);
    uint64_t back = 0;
    overwrite(csr, 4096 + 2 * 8, &back, 8);
    if (g.row_offsets[2] != 0)
        expect_load_error(csr, wgt, csr, "offset 4112: row_offsets[2] = 0 after");

    /* a weight change keeps the structure: weights never enter the id */
    write_pair(&g, "weights", csr, wgt);
    uint32_t w = 12345;
    overwrite(wgt, 4096, &w, 4);
    struct csr_graph back_g;
    assert_int_equal(graph_load(csr, wgt, &back_g, err, sizeof(err)), 0);
    assert_int_equal(back_g.weights[0], 12345);
    csr_graph_free(&back_g);
    csr_graph_free(&g);
    csr_graph_free(&other);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rmat_same_seed_same_graph),
        cmocka_unit_test(test_rmat_undirected_stores_every_edge_both_ways),
        cmocka_unit_test(test_files_round_trip),
        cmocka_unit_test(test_mtx_pattern_symmetric_triangle),
        cmocka_unit_test(test_mtx_symmetric_mirrors_all_but_the_diagonal),
        cmocka_unit_test(test_mtx_general_is_not_mirrored),
        cmocka_unit_test(test_mtx_bad_input_names_file_and_offset),
        cmocka_unit_test(test_bad_binary_files_name_file_and_offset),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
