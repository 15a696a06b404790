/*
 * alloc.c — first-fit allocator over one area of a device window.
 *
 * The host owns all bookkeeping: the device process never needs to know
 * which bytes are allocated.  Extents are kept sorted by offset, so a gap
 * search is one pass and a lookup is a binary search.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

/* Records the extent [off, off+need) (size bytes asked for) at index at,
 * keeping the table sorted. 0 or -ENOMEM. */
static int insert_extent(struct sim_alloc *a, size_t at, uint64_t off, uint64_t need, uint64_t size)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        struct sim_extent *v = realloc(a->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        a->v = v;
        a->cap = cap;
    }
    memmove(&a->v[at + 1], &a->v[at], (a->n - at) * sizeof(*a->v));
    a->v[at] = (struct sim_extent){ off, need, size };
    a->n++;
    a->used_bytes += need;
    if (a->mirror)
        __atomic_store_n(a->mirror, a->used_bytes, __ATOMIC_RELAXED);
    return 0;
}

int sim_alloc_get(struct sim_alloc *a, uint64_t size, uint64_t *off)
{
    if (size == 0)
        return -EINVAL;
    uint64_t need = align_up(size, a->align);
    if (need < size)
        return -ENOMEM;
    uint64_t cursor = 0;
    size_t at = a->n;
    for (size_t i = 0; i <= a->n; i++) {
        uint64_t end = i < a->n ? a->v[i].off : a->area_bytes;
        if (end >= cursor && end - cursor >= need) {
            at = i;
            break;
        }
        if (i < a->n)
            cursor = align_up(a->v[i].off + a->v[i].size, a->align);
        if (i == a->n)
            return -ENOMEM;
    }
    int rc = insert_extent(a, at, cursor, need, size);
    if (rc)
        return rc;
    *off = cursor;
    return 0;
}

static size_t find_index(const struct sim_alloc *a, uint64_t off);

/* Take exactly [off, off+size) if it is free. */
int sim_alloc_get_at(struct sim_alloc *a, uint64_t off, uint64_t size)
{
    uint64_t need = align_up(size, a->align);
    if (size == 0 || (off & (a->align - 1)) || off > a->area_bytes || need > a->area_bytes - off)
        return -EINVAL;
    size_t at = 0;
    while (at < a->n && a->v[at].off < off)
        at++;
    if (at > 0 && a->v[at - 1].off + a->v[at - 1].size > off)
        return -EEXIST;
    if (at < a->n && a->v[at].off < off + need)
        return -EEXIST;
    return insert_extent(a, at, off, need, size);
}

static size_t find_index(const struct sim_alloc *a, uint64_t off)
{
    /* last extent with v.off <= off, or a->n */
    size_t lo = 0, hi = a->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (a->v[mid].off <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == 0 ? a->n : lo - 1;
}

int sim_alloc_put(struct sim_alloc *a, uint64_t off)
{
    size_t i = find_index(a, off);
    if (i == a->n || a->v[i].off != off)
        return -EINVAL;
    a->used_bytes -= a->v[i].size;
    if (a->mirror)
        __atomic_store_n(a->mirror, a->used_bytes, __ATOMIC_RELAXED);
    memmove(&a->v[i], &a->v[i + 1], (a->n - i - 1) * sizeof(*a->v));
    a->n--;
    return 0;
}

const struct sim_extent *sim_alloc_find(const struct sim_alloc *a, uint64_t off, uint64_t len)
{
    size_t i = find_index(a, off);
    if (i == a->n)
        return NULL;
    const struct sim_extent *e = &a->v[i];
    if (off >= e->off + e->bytes || off + len < off || off + len > e->off + e->bytes)
        return NULL;
    return e;
}

void sim_alloc_destroy(struct sim_alloc *a)
{
    free(a->v);
    memset(a, 0, sizeof(*a));
}
