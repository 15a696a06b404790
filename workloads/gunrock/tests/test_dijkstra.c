/* test_dijkstra.c — the CPU oracle: exact on hand-made graphs, agrees with
 * a plain Bellman-Ford on random ones, and the comparison counts wrong
 * distances (so a wrong GPU answer cannot pass as validated). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dijkstra.h"
#include "graph.h"
#include "rmat.h"
#include "rng.h"

static char err[GRAPH_ERR_BYTES];

static void build(uint64_t vertices, uint64_t m, const uint32_t *src, const uint32_t *dst, const uint32_t *w,
                  struct csr_graph *g)
{
    assert_int_equal(csr_from_coo(vertices, m, src, dst, w, g, err, sizeof(err)), 0);
}

static void test_shorter_path_through_more_edges_wins(void **state)
{
    /* 0->1 (3), 1->2 (4), 0->2 (10), 3->4 (1), 2->2 (7), 2->1 (0); 5..7 isolated */
    uint32_t src[] = {0, 1, 0, 3, 2, 2}, dst[] = {1, 2, 2, 4, 2, 1}, w[] = {3, 4, 10, 1, 7, 0};
    struct csr_graph g;
    build(8, 6, src, dst, w, &g);
    uint32_t dist[8];
    assert_int_equal(dijkstra(8, g.row_offsets, g.col_indices, g.weights, 0, dist), 0);
    uint32_t want[8] = {0, 3, 7, SSSP_INF, SSSP_INF, SSSP_INF, SSSP_INF, SSSP_INF};
    assert_memory_equal(dist, want, sizeof(want));
    /* from 2: the zero-weight edge back to 1 */
    assert_int_equal(dijkstra(8, g.row_offsets, g.col_indices, g.weights, 2, dist), 0);
    assert_int_equal(dist[1], 0);
    assert_int_equal(dist[2], 0);
    assert_int_equal(dist[0], SSSP_INF);
    csr_graph_free(&g);
}

static void test_paths_that_would_reach_infinity_are_not_taken(void **state)
{
    uint32_t src[] = {0, 1}, dst[] = {1, 2}, w[] = {0xfffffff0u, 0x20};
    struct csr_graph g;
    build(3, 2, src, dst, w, &g);
    uint32_t dist[3];
    assert_int_equal(dijkstra(3, g.row_offsets, g.col_indices, g.weights, 0, dist), 0);
    assert_int_equal(dist[1], 0xfffffff0u);
    assert_int_equal(dist[2], SSSP_INF);
    csr_graph_free(&g);
}

/* Reference: Bellman-Ford over all edges until nothing changes. */
static void bellman_ford(const struct csr_graph *g, uint32_t source, uint32_t *dist)
{
    for (uint64_t v = 0; v < g->vertices; v++)
        dist[v] = SSSP_INF;
    dist[source] = 0;
    for (bool changed = true; changed;) {
        changed = false;
        for (uint64_t u = 0; u < g->vertices; u++) {
            if (dist[u] == SSSP_INF)
                continue;
            for (uint64_t e = g->row_offsets[u]; e < g->row_offsets[u + 1]; e++) {
                uint32_t v = g->col_indices[e], w = g->weights[e];
                if (w < SSSP_INF - dist[u] && dist[u] + w < dist[v]) {
                    dist[v] = dist[u] + w;
                    changed = true;
                }
            }
        }
    }
}

static void test_agrees_with_bellman_ford_on_random_graphs(void **state)
{
    uint64_t seed0 = getenv("GUNROCK_TEST_SEED") ? strtoull(getenv("GUNROCK_TEST_SEED"), NULL, 0) : 1;
    printf("seed %llu (GUNROCK_TEST_SEED replays)\n", (unsigned long long)seed0);
    for (uint64_t s = seed0; s < seed0 + 20; s++) {
        struct rmat_params p;
        rmat_defaults(&p);
        p.scale = 7;
        p.edge_factor = 3;
        p.seed = s;
        p.max_weight = s % 2 ? 1000 : 3;
        p.directed = s % 3 == 0;
        struct csr_graph g;
        assert_int_equal(rmat_generate(&p, &g, err, sizeof(err)), 0);
        uint32_t a[128], b[128];
        struct rng r = {s};
        uint32_t source = (uint32_t)rng_below(&r, g.vertices);
        assert_int_equal(dijkstra(g.vertices, g.row_offsets, g.col_indices, g.weights, source, a), 0);
        bellman_ford(&g, source, b);
        if (memcmp(a, b, sizeof(a)) != 0)
            fail_msg("seed %llu: Dijkstra and Bellman-Ford disagree", (unsigned long long)s);
        csr_graph_free(&g);
    }
}

static void test_compare_counts_every_wrong_distance(void **state)
{
    uint32_t want[5] = {0, 1, 2, SSSP_INF, 4}, got[5] = {0, 1, 3, 7, 4};
    assert_int_equal(sssp_compare("test", 5, want, want, 5), 0);
    assert_int_equal(sssp_compare("test", 5, want, got, 1), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shorter_path_through_more_edges_wins),
        cmocka_unit_test(test_paths_that_would_reach_infinity_are_not_taken),
        cmocka_unit_test(test_agrees_with_bellman_ford_on_random_graphs),
        cmocka_unit_test(test_compare_counts_every_wrong_distance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
