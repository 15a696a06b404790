/* dijkstra.c — Dijkstra with a binary heap and lazy deletion: a vertex may
 * sit in the heap several times, and entries older than its distance are
 * skipped when popped. O((V + E) log E). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "dijkstra.h"

struct entry {
    uint32_t dist, vertex;
};

struct heap {
    struct entry *a;
    uint64_t n, cap;
};

static int heap_push(struct heap *h, struct entry e)
{
    if (h->n == h->cap) {
        uint64_t cap = h->cap ? 2 * h->cap : 1024;
        struct entry *a = realloc(h->a, cap * sizeof(*a));
        if (!a)
            return -ENOMEM;
        h->a = a;
        h->cap = cap;
    }
    uint64_t i = h->n++;
    while (i > 0) {
        uint64_t parent = (i - 1) / 2;
        if (h->a[parent].dist <= e.dist)
            break;
        h->a[i] = h->a[parent];
        i = parent;
    }
    h->a[i] = e;
    return 0;
}

static struct entry heap_pop(struct heap *h)
{
    struct entry top = h->a[0], last = h->a[--h->n];
    uint64_t i = 0;
    for (;;) {
        uint64_t child = 2 * i + 1;
        if (child >= h->n)
            break;
        if (child + 1 < h->n && h->a[child + 1].dist < h->a[child].dist)
            child++;
        if (last.dist <= h->a[child].dist)
            break;
        h->a[i] = h->a[child];
        i = child;
    }
    if (h->n)
        h->a[i] = last;
    return top;
}

int dijkstra(uint64_t vertices, const uint64_t *row_offsets, const uint32_t *col_indices,
             const uint32_t *weights, uint32_t source, uint32_t *dist)
{
    for (uint64_t v = 0; v < vertices; v++)
        dist[v] = SSSP_INF;
    if (source >= vertices)
        return 0;
    struct heap h = {0};
    dist[source] = 0;
    int rc = heap_push(&h, (struct entry){0, source});
    while (!rc && h.n) {
        struct entry e = heap_pop(&h);
        if (e.dist != dist[e.vertex])
            continue;   /* a stale entry: the vertex was settled shorter */
        for (uint64_t i = row_offsets[e.vertex]; i < row_offsets[e.vertex + 1] && !rc; i++) {
            uint32_t w = weights[i], v = col_indices[i];
            if (w >= SSSP_INF - e.dist)
                continue;
            uint32_t nd = e.dist + w;
            if (nd < dist[v]) {
                dist[v] = nd;
                rc = heap_push(&h, (struct entry){nd, v});
            }
        }
    }
    free(h.a);
    return rc;
}

uint64_t sssp_compare(const char *label, uint64_t vertices, const uint32_t *want, const uint32_t *got,
                      unsigned report)
{
    uint64_t bad = 0;
    for (uint64_t v = 0; v < vertices; v++) {
        if (want[v] == got[v])
            continue;
        if (bad++ < report)
            fprintf(stderr, "%s: vertex %" PRIu64 ": distance %u, expected %u\n", label, v, got[v], want[v]);
    }
    if (bad > report)
        fprintf(stderr, "%s: ... %" PRIu64 " vertices differ in all\n", label, bad);
    return bad;
}
