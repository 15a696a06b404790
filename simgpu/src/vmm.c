/*
 * vmm.c — the virtual memory management API: reserve a range of device
 * virtual addresses, create physical allocations, map them, set access.
 *
 * Reservations come from an arena of address space reserved PROT_NONE at
 * cuInit, before the device processes were forked, so a range free there
 * is free at the same address in every process (the device processes'
 * thread stacks and malloc arenas land elsewhere).  A fixed-address hint is
 * honoured when the range is free in the host (DESIGN.md §5): inside the
 * arena when it is free there; outside, when both the host and every device
 * process can map it; otherwise the hint is ignored, as the real driver
 * may do.  Physical memory is a piece of the device's memfd (from
 * the same allocator as cuMemAlloc); cuMemMap maps it at the reserved
 * address in the host (PROT_NONE: device memory stays inaccessible to the
 * host) and in the device process (PROT_NONE until cuMemSetAccess).  The
 * device process's side is changed by SIM_OP_VMM ops on a dedicated
 * non-blocking stream, so no other stream's work delays them.
 */
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "sim.h"

#define VMM_GRANULARITY (2ul << 20)
#define VMM_ALLOC_MAGIC 0x434f4c41u

struct vmm_alloc {                  /* behind a CUmemGenericAllocationHandle */
    uint32_t magic;
    int ordinal;
    uint64_t memfd_off, bytes;
    int maps;                       /* live mappings */
    bool released;
};

struct vmm_map {
    uint64_t va, bytes;
    struct vmm_alloc *alloc;
    uint64_t alloc_off;
};

struct vmm_reservation {
    uint64_t va, bytes;
    bool in_arena;
};

#define VMM_ARENA_BYTES (256ull << 30)
#define DEVICE_STACK_BYTES (8ull << 20)
#define DEVICE_STACKS 300                     /* workers, service threads; from 200 the executor's queue nodes */
#define DEVICE_STACK_AREA ((uint64_t)DEVICE_STACKS * DEVICE_STACK_BYTES)
#define FIBER_AREA ((uint64_t)SIM_FIBER_SLOTS * SIM_FIBER_AREA_BYTES)
static uint64_t arena_base;
/* the last DEVICE_STACK_AREA bytes are the device processes' thread stacks,
 * the FIBER_AREA before them their workers' fiber stacks (fibers.c) */
static struct sim_alloc arena = { .area_bytes = VMM_ARENA_BYTES - DEVICE_STACK_AREA - FIBER_AREA,
                                  .align = VMM_GRANULARITY };

static pthread_mutex_t vmm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct vmm_reservation *res;
static size_t nres, capres;
static struct vmm_map *maps;
static size_t nmaps, capmaps;
static struct vmm_alloc **allocs;       /* live handles: a handle is checked here, never dereferenced blind */
static size_t nallocs, capallocs;

static bool grow(void **v, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return true;
    size_t c = *cap ? *cap * 2 : 16;
    void *p = realloc(*v, c * elem);
    if (!p)
        return false;
    *v = p;
    *cap = c;
    return true;
}

/* ---- device process side ---- */

/* The device process is a fork of the host taken at cuInit, so it still
 * has the host's data mappings of that moment; on hardware the device's
 * address space holds none of them.  At its start it closes the host's
 * shared file mappings (sim_vmm_close_host_files: a kernel dereferencing
 * one faults, as on hardware, instead of writing the host's file).  A range the host has freed and now
 * reserves may be replaced here when everything in it is such a leftover:
 * a shared file mapping (not a memfd, not a device node), a private file
 * mapping of a file nothing executable comes from, or an anonymous
 * PROT_NONE reservation.  Anything else (code, heap, stacks, the device's
 * own windows) makes the reservation fail, as before. */
/* Room for /proc/self/maps at the kernel's default vm.max_map_count
 * (65530 lines of about 110 bytes): managed memory migrated page by page
 * leaves a mapping per page here. Untouched pages of it cost nothing. */
static char maps_buf[16 << 20];

static bool file_is_code(const char *text, const char *path, size_t path_len)
{
    for (const char *l = text; *l;) {
        const char *end = strchr(l, '\n');
        size_t len = end ? (size_t)(end - l) : strlen(l);
        const char *perms = memchr(l, ' ', len);
        const char *p = memchr(l, '/', len);
        if (perms && perms[3] == 'x' && p && (size_t)(l + len - p) == path_len &&
            memcmp(p, path, path_len) == 0)
            return true;
        if (!end)
            break;
        l = end + 1;
    }
    return false;
}

static bool read_maps(void)
{
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    size_t got = 0;
    ssize_t r;
    while (got < sizeof(maps_buf) - 1 && (r = read(fd, maps_buf + got, sizeof(maps_buf) - 1 - got)) > 0)
        got += (size_t)r;
    close(fd);
    if (got >= sizeof(maps_buf) - 1)
        return false;
    maps_buf[got] = 0;
    return true;
}

/* Calls fn(lo, hi, perms, is_leftover, arg) for each mapping in maps_buf;
 * fn returns false to stop.  Returns false when stopped. */
static bool each_mapping(bool (*fn)(unsigned long lo, unsigned long hi, bool shared_file, bool leftover,
                                    void *arg), void *arg)
{
    for (const char *l = maps_buf; *l;) {
        const char *end = strchr(l, '\n');
        size_t len = end ? (size_t)(end - l) : strlen(l);
        unsigned long lo, hi, ino;
        char perms[5];
        if (sscanf(l, "%lx-%lx %4s %*s %*s %lu", &lo, &hi, perms, &ino) == 4) {
            const char *path = memchr(l, '/', len);
            size_t path_len = path ? (size_t)(l + len - path) : 0;
            bool leftover, shared_file = false;
            if (ino == 0)
                leftover = strcmp(perms, "---p") == 0 && !path;
            /* /dev/zero: shared anonymous memory (simgpu's own control
             * blocks); /dev/shm objects are files like any other. */
            else if (!path || (path_len >= 7 && memcmp(path, "/memfd:", 7) == 0) ||
                     (path_len >= 5 && memcmp(path, "/dev/", 5) == 0 &&
                      !(path_len >= 9 && memcmp(path, "/dev/shm/", 9) == 0)) ||
                     perms[2] == 'x')
                leftover = false;
            else {
                shared_file = perms[3] == 's';
                leftover = shared_file || !file_is_code(maps_buf, path, path_len);
            }
            if (!fn(lo, hi, shared_file, leftover, arg))
                return false;
        }
        if (!end)
            break;
        l = end + 1;
    }
    return true;
}

static bool leftover_or_outside(unsigned long lo, unsigned long hi, bool shared_file, bool leftover, void *arg)
{
    (void)shared_file;
    uint64_t *range = arg;
    bool ok = leftover || lo >= range[0] + range[1] || hi <= range[0];
    if (!ok) {
        range[2] = lo;      /* the first mapping in the way */
        range[3] = hi;
    }
    return ok;
}

uint64_t sim_vmm_in_the_way[2];

/* maps_buf is shared by the control thread and the HMM fault path (a
 * signal handler on a worker, which never holds this otherwise). */
static int maps_lock;

bool sim_vmm_only_host_leftovers(uint64_t a, uint64_t n)
{
    uint64_t range[4] = { a, n, 0, 0 };
    while (__atomic_exchange_n(&maps_lock, 1, __ATOMIC_ACQUIRE))
        sched_yield();
    bool ok = read_maps() && each_mapping(leftover_or_outside, range);
    __atomic_store_n(&maps_lock, 0, __ATOMIC_RELEASE);
    if (!ok) {
        sim_vmm_in_the_way[0] = range[2];
        sim_vmm_in_the_way[1] = range[3];
    }
    return ok;
}

static bool close_shared_file(unsigned long lo, unsigned long hi, bool shared_file, bool leftover, void *arg)
{
    (void)leftover, (void)arg;
    if (shared_file)
        mmap((void *)lo, hi - lo, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    return true;
}

void sim_vmm_close_host_files(void)
{
    if (read_maps())
        each_mapping(close_shared_file, NULL);
}

/*
 * Keep the device process's own new mappings away from where the host's
 * next ones will go.  Both processes place mmap(NULL) top-down from the
 * same layout, so the first mapping a sanitizer runtime (or anything else)
 * makes here after the fork lands exactly where the host's next buffer
 * will be, and a kernel meant to reach that buffer would silently read the
 * device's own memory instead.  At its start the device fills every gap
 * between the VMM arena (the lowest of the mappings cuInit made) and the
 * stack with PROT_NONE reservations, and reserves FENCE_BYTES more where
 * the kernel puts the next large mapping (below the arena, where the host
 * grows once the gaps are full): its own later mappings land below that,
 * while to a host range placed there the fence is a leftover (anonymous
 * PROT_NONE) that hostmem.c and VMM reservations may map over.  The gap
 * just below the stack is left for the stack's growth.
 */
#define FENCE_BYTES (64ull << 30)

void sim_vmm_fence_host_area(void)
{
    static uint64_t lo[4096], hi[4096];
    if (!arena_base || !read_maps())
        return;
    size_t n = 0;
    uint64_t stack_lo = 0;
    for (const char *l = maps_buf; *l && n < 4096;) {
        const char *end = strchr(l, '\n');
        unsigned long a, b;
        if (sscanf(l, "%lx-%lx", &a, &b) == 2) {
            lo[n] = a;
            hi[n] = b;
            n++;
            const char *s = strstr(l, "[stack]");
            if (s && (!end || s < end))
                stack_lo = a;
        }
        if (!end)
            break;
        l = end + 1;
    }
    for (size_t i = 1; i < n; i++) {
        uint64_t gap_lo = hi[i - 1], gap_hi = lo[i];
        if (gap_lo < arena_base || gap_hi <= gap_lo || (stack_lo && gap_hi >= stack_lo))
            continue;
        mmap((void *)(uintptr_t)gap_lo, gap_hi - gap_lo, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    }
    mmap(NULL, FENCE_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
}

int sim_vmm_device_op(struct sim_device *d, const struct sim_op *op)
{
    void *a = (void *)(uintptr_t)op->u.vmm.addr;
    size_t n = op->u.vmm.bytes;
    void *r;
    switch (op->u.vmm.action) {
    case VMM_RESERVE:
        r = mmap(a, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
        if (r == MAP_FAILED && errno == EEXIST && sim_vmm_only_host_leftovers(op->u.vmm.addr, n))
            r = mmap(a, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        if (r == MAP_FAILED)
            return -errno;
        if (r != a) {               /* old kernels treat the flag as a hint */
            munmap(r, n);
            return -EEXIST;
        }
        return 0;
    case VMM_MAP:
        r = mmap(a, n, PROT_NONE, MAP_SHARED | MAP_FIXED, d->memfd, (off_t)op->u.vmm.memfd_off);
        return r == MAP_FAILED ? -errno : 0;
    case VMM_PROTECT:
        return mprotect(a, n, op->u.vmm.prot) < 0 ? -errno : 0;
    case VMM_UNMAP:
        r = mmap(a, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        return r == MAP_FAILED ? -errno : 0;
    case VMM_FREE:
        return munmap(a, n) < 0 ? -errno : 0;
    default:
        return -EINVAL;
    }
}

/* ---- host side ---- */

/* Run one action in device process d and return its result. */
static int device_do(struct sim_device *d, uint32_t action, uint64_t addr, uint64_t bytes, uint64_t memfd_off,
                     int prot)
{
    return sim_control_op(d, SIM_OP_VMM, action, addr, bytes, memfd_off, prot, NULL, 0);
}

static struct vmm_reservation *reservation_of(uint64_t p, uint64_t len)
{
    for (size_t i = 0; i < nres; i++)
        if (p >= res[i].va && p - res[i].va < res[i].bytes && len <= res[i].bytes - (p - res[i].va))
            return &res[i];
    return NULL;
}

int sim_vmm_find(uint64_t p, uint64_t len, struct sim_device **d, unsigned char **hostview)
{
    int found = 0;
    pthread_mutex_lock(&vmm_lock);
    if (reservation_of(p, 1)) {
        found = -EINVAL;
        for (size_t i = 0; i < nmaps; i++) {
            struct vmm_map *m = &maps[i];
            if (p >= m->va && p - m->va < m->bytes && len <= m->bytes - (p - m->va)) {
                *d = &sim.dev[m->alloc->ordinal];
                if (hostview)
                    *hostview = (*d)->shadow + m->alloc->memfd_off + m->alloc_off + (p - m->va);
                found = 1;
                break;
            }
        }
    }
    pthread_mutex_unlock(&vmm_lock);
    return found;
}

static bool aligned(uint64_t v) { return (v & (VMM_GRANULARITY - 1)) == 0; }

CUresult CUDAAPI cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                               CUmemAllocationGranularity_flags option)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!granularity || !prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 ||
        prop->location.id >= sim.ndevices)
        return CUDA_ERROR_INVALID_VALUE;
    (void)option;   /* minimum and recommended are the same here */
    *granularity = VMM_GRANULARITY;
    return CUDA_SUCCESS;
}

int sim_vmm_arena_init(void)
{
    uint64_t span = VMM_ARENA_BYTES + VMM_GRANULARITY;
    unsigned char *r = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED)
        return -errno;
    uint64_t base = ((uint64_t)(uintptr_t)r + VMM_GRANULARITY - 1) & ~(uint64_t)(VMM_GRANULARITY - 1);
    if (base > (uint64_t)(uintptr_t)r)
        munmap(r, base - (uint64_t)(uintptr_t)r);
    uint64_t end = (uint64_t)(uintptr_t)r + span;
    if (end > base + VMM_ARENA_BYTES)
        munmap((void *)(uintptr_t)(base + VMM_ARENA_BYTES), end - (base + VMM_ARENA_BYTES));
    arena_base = base;
    return 0;
}

void *sim_vmm_device_stack(unsigned index, size_t *bytes)
{
    if (index >= DEVICE_STACKS)
        return NULL;
    unsigned char *stack =
        (unsigned char *)(uintptr_t)(arena_base + arena.area_bytes + FIBER_AREA) + index * DEVICE_STACK_BYTES;
    /* the lowest page stays PROT_NONE: a guard */
    if (mprotect(stack + 4096, DEVICE_STACK_BYTES - 4096, PROT_READ | PROT_WRITE) < 0)
        return NULL;
    *bytes = DEVICE_STACK_BYTES - 4096;
    return stack + 4096;
}

void *sim_vmm_fiber_area(unsigned slot)
{
    if (slot >= SIM_FIBER_SLOTS || !arena_base)
        return NULL;
    return (unsigned char *)(uintptr_t)(arena_base + arena.area_bytes) + (uint64_t)slot * SIM_FIBER_AREA_BYTES;
}

static bool in_arena(uint64_t va, uint64_t size)
{
    return va >= arena_base && va - arena_base < VMM_ARENA_BYTES && size <= VMM_ARENA_BYTES - (va - arena_base);
}

/* Outside the arena a hint is honoured as the real driver honours it (seen
 * on an H200, driver 580.159, CUDA 13.0): a reservation of 16 MiB or less
 * comes out of the driver's own chunks whatever the hint says; a larger one
 * goes where the hint says if that address is on a 32 MiB boundary and
 * free. */
#define HINT_MIN_SIZE (16ul << 20)
#define HINT_ALIGN (32ul << 20)

static struct init_range {
    uint64_t start, end;
} *init_layout;
static size_t n_init_layout;

void sim_vmm_note_init_layout(void)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return;
    char line[512];
    size_t cap = 0;
    while (fgets(line, sizeof(line), f)) {
        unsigned long long s, e;
        if (sscanf(line, "%llx-%llx", &s, &e) != 2)
            continue;
        if (n_init_layout == cap) {
            size_t ncap = cap ? 2 * cap : 256;
            struct init_range *n = realloc(init_layout, ncap * sizeof(*n));
            if (!n)
                break;
            init_layout = n;
            cap = ncap;
        }
        init_layout[n_init_layout++] = (struct init_range){ s, e };
    }
    fclose(f);
}

static bool mapped_at_init(uint64_t start, uint64_t size)
{
    for (size_t i = 0; i < n_init_layout; i++)
        if (start < init_layout[i].end && start + size > init_layout[i].start)
            return true;
    return false;
}

static bool hint_honoured(uint64_t hint, uint64_t size)
{
    return size > HINT_MIN_SIZE && (hint & (HINT_ALIGN - 1)) == 0 && !mapped_at_init(hint, size);
}

/* A hint outside the arena: map it with MAP_FIXED_NOREPLACE here and in
 * every device process, or give up on it. */
static bool reserve_outside(uint64_t hint, uint64_t size)
{
    void *r = mmap((void *)(uintptr_t)hint, size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (r == MAP_FAILED)
        return false;
    if ((uint64_t)(uintptr_t)r != hint) {
        munmap(r, size);
        return false;
    }
    int done = 0;
    while (done < sim.ndevices && device_do(&sim.dev[done], VMM_RESERVE, hint, size, 0, 0) == 0)
        done++;
    if (done == sim.ndevices)
        return true;
    for (int j = 0; j < done; j++)
        device_do(&sim.dev[j], VMM_FREE, hint, size, 0, 0);
    munmap((void *)(uintptr_t)hint, size);
    return false;
}

CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                     unsigned long long flags)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!ptr || size == 0 || flags != 0 || !aligned(size) || (addr && !aligned(addr)) ||
        (alignment & (alignment - 1)))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&vmm_lock);
    r = CUDA_ERROR_OUT_OF_MEMORY;
    if (!grow((void **)&res, &capres, nres, sizeof(*res)))
        goto out;
    uint64_t va = 0;
    bool arena_range = true;
    if (addr && (!alignment || (addr & (alignment - 1)) == 0)) {
        if (in_arena(addr, size)) {
            if (sim_alloc_get_at(&arena, addr - arena_base, size) == 0)
                va = addr;
        } else if (!in_arena(addr, 1) && hint_honoured(addr, size) && reserve_outside(addr, size)) {
            va = addr;
            arena_range = false;
        }
    }
    if (!va) {
        /* over-allocate for alignments beyond the granule, give back the rest */
        uint64_t extra = alignment > VMM_GRANULARITY ? alignment : 0, off;
        if (sim_alloc_get(&arena, size + extra, &off))
            goto out;
        va = arena_base + off;
        if (extra) {
            uint64_t aligned_va = (va + alignment - 1) & ~(uint64_t)(alignment - 1);
            sim_alloc_put(&arena, off);
            if (sim_alloc_get_at(&arena, aligned_va - arena_base, size))
                goto out;
            va = aligned_va;
        }
    }
    res[nres++] = (struct vmm_reservation){ va, size, arena_range };
    *ptr = va;
    r = CUDA_SUCCESS;
out:
    pthread_mutex_unlock(&vmm_lock);
    return r;
}

CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&vmm_lock);
    struct vmm_reservation *v = reservation_of(ptr, 1);
    bool ok = v && v->va == ptr && v->bytes == size;
    for (size_t i = 0; ok && i < nmaps; i++)
        if (maps[i].va >= ptr && maps[i].va < ptr + size)
            ok = false;                     /* unmap first */
    if (ok) {
        if (v->in_arena) {
            /* unmapping already put PROT_NONE back on both sides */
            sim_alloc_put(&arena, ptr - arena_base);
        } else {
            for (int i = 0; i < sim.ndevices; i++)
                device_do(&sim.dev[i], VMM_FREE, ptr, size, 0, 0);
            munmap((void *)(uintptr_t)ptr, size);
        }
        *v = res[--nres];
    }
    pthread_mutex_unlock(&vmm_lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Called with vmm_lock held. */
static struct vmm_alloc *alloc_of(CUmemGenericAllocationHandle h)
{
    for (size_t i = 0; i < nallocs; i++)
        if ((CUmemGenericAllocationHandle)(uintptr_t)allocs[i] == h)
            return allocs[i];
    return NULL;
}

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                             unsigned long long flags)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!handle || !prop || flags != 0 || size == 0 || !aligned(size) || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (prop->location.id < 0 || prop->location.id >= sim.ndevices)
        return CUDA_ERROR_INVALID_DEVICE;
    struct sim_device *d = &sim.dev[prop->location.id];
    struct vmm_alloc *a = calloc(1, sizeof(*a));
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* The piece is mapped with mmap: its memfd offset must be aligned (to
     * the granule, as on hardware), whatever cuMemAlloc left behind. */
    uint64_t off;
    pthread_mutex_lock(&d->alloc_lock);
    int rc = sim_alloc_get(&d->device_mem, size + VMM_GRANULARITY, &off);
    if (rc == 0) {
        uint64_t aligned_off = (off + VMM_GRANULARITY - 1) & ~(uint64_t)(VMM_GRANULARITY - 1);
        sim_alloc_put(&d->device_mem, off);
        rc = sim_alloc_get_at(&d->device_mem, aligned_off, size);
        off = aligned_off;
    }
    pthread_mutex_unlock(&d->alloc_lock);
    if (rc) {
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *a = (struct vmm_alloc){ .magic = VMM_ALLOC_MAGIC, .ordinal = d->ordinal, .memfd_off = off, .bytes = size };
    pthread_mutex_lock(&vmm_lock);
    bool ok = grow((void **)&allocs, &capallocs, nallocs, sizeof(*allocs));
    if (ok)
        allocs[nallocs++] = a;
    pthread_mutex_unlock(&vmm_lock);
    if (!ok) {
        pthread_mutex_lock(&d->alloc_lock);
        sim_alloc_put(&d->device_mem, off);
        pthread_mutex_unlock(&d->alloc_lock);
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)a;
    return CUDA_SUCCESS;
}

/* Called with vmm_lock held: the memory goes back once released and unmapped. */
static void alloc_maybe_free(struct vmm_alloc *a)
{
    if (!a->released || a->maps)
        return;
    struct sim_device *d = &sim.dev[a->ordinal];
    pthread_mutex_lock(&d->alloc_lock);
    sim_alloc_put(&d->device_mem, a->memfd_off);
    pthread_mutex_unlock(&d->alloc_lock);
    for (size_t i = 0; i < nallocs; i++)
        if (allocs[i] == a)
            allocs[i] = allocs[--nallocs];
    a->magic = 0;
    free(a);
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&vmm_lock);
    struct vmm_alloc *a = alloc_of(handle);
    if (a && !a->released) {
        a->released = true;
        alloc_maybe_free(a);
        r = CUDA_SUCCESS;
    } else {
        r = CUDA_ERROR_INVALID_HANDLE;
    }
    pthread_mutex_unlock(&vmm_lock);
    return r;
}

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                          unsigned long long flags)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (flags != 0 || size == 0 || !aligned(ptr) || !aligned(size) || !aligned(offset))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&vmm_lock);
    struct vmm_alloc *a = alloc_of(handle);
    r = CUDA_ERROR_INVALID_VALUE;
    if (!a || a->released) {
        r = CUDA_ERROR_INVALID_HANDLE;
        goto out;
    }
    if (!reservation_of(ptr, size) || offset > a->bytes || size > a->bytes - offset)
        goto out;
    for (size_t i = 0; i < nmaps; i++)
        if (maps[i].va < ptr + size && ptr < maps[i].va + maps[i].bytes)
            goto out;                       /* already mapped */
    if (!grow((void **)&maps, &capmaps, nmaps, sizeof(*maps))) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    struct sim_device *d = &sim.dev[a->ordinal];
    /* the host maps it too, PROT_NONE: same VA, never accessible here */
    if (mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, d->memfd,
             (off_t)(a->memfd_off + offset)) == MAP_FAILED) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    int rc = device_do(d, VMM_MAP, ptr, size, a->memfd_off + offset, 0);
    if (rc) {
        mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        r = sim_errno_to_cu(rc);
        goto out;
    }
    maps[nmaps++] = (struct vmm_map){ ptr, size, a, offset };
    a->maps++;
    r = CUDA_SUCCESS;
out:
    pthread_mutex_unlock(&vmm_lock);
    return r;
}

/* Unmapping may synchronize (cuda.h \\note_sync): the owning device drains. */
CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&vmm_lock);
    r = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < nmaps; i++) {
        struct vmm_map *m = &maps[i];
        if (m->va != ptr || m->bytes != size)
            continue;
        struct sim_device *d = &sim.dev[m->alloc->ordinal];
        sim_device_sync(d);
        device_do(d, VMM_UNMAP, ptr, size, 0, 0);
        mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        struct vmm_alloc *a = m->alloc;
        *m = maps[--nmaps];
        a->maps--;
        alloc_maybe_free(a);
        r = CUDA_SUCCESS;
        break;
    }
    pthread_mutex_unlock(&vmm_lock);
    return r;
}

/* Access is granted to device processes only; the host's view of device
 * memory stays PROT_NONE whatever the descriptors say. */
CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!desc || count == 0 || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&vmm_lock);
    /* the whole range must be mapped */
    uint64_t covered = 0;
    for (size_t i = 0; i < nmaps; i++) {
        uint64_t lo = maps[i].va > ptr ? maps[i].va : ptr;
        uint64_t hi = maps[i].va + maps[i].bytes < ptr + size ? maps[i].va + maps[i].bytes : ptr + size;
        if (hi > lo)
            covered += hi - lo;
    }
    r = covered == size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    for (size_t k = 0; r == CUDA_SUCCESS && k < count; k++) {
        if (desc[k].location.type != CU_MEM_LOCATION_TYPE_DEVICE || desc[k].location.id < 0 ||
            desc[k].location.id >= sim.ndevices) {
            r = CUDA_ERROR_INVALID_DEVICE;
            break;
        }
        int prot = desc[k].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? PROT_READ | PROT_WRITE
                 : desc[k].flags == CU_MEM_ACCESS_FLAGS_PROT_READ      ? PROT_READ
                                                                        : PROT_NONE;
        struct sim_device *d = &sim.dev[desc[k].location.id];
        sim_device_sync(d);
        r = sim_errno_to_cu(device_do(d, VMM_PROTECT, ptr, size, 0, prot));
    }
    pthread_mutex_unlock(&vmm_lock);
    return r;
}
