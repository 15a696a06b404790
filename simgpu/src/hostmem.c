/*
 * hostmem.c — host memory that kernels can use: pinned allocations
 * (cuMemAllocHost, cuMemHostAlloc) and registered ranges
 * (cuMemHostRegister), reached by kernels at their own address (unified
 * addressing), live: a kernel sees the CPU's stores and the CPU sees the
 * kernel's, as over PCIe.
 *
 * The device process is a fork taken at cuInit, so host memory has to be
 * shared memory both processes map at the same address:
 *   - pinned allocations come from the *host window*, a sparse memfd (as
 *     large as the machine's RAM) mapped MAP_SHARED before the device
 *     processes are forked, so they have it at the same address;
 *   - a registered private range (heap, anonymous or MAP_PRIVATE file
 *     memory) is moved into the host window: its whole pages are copied
 *     into window pages that are then mapped over them (MAP_FIXED), in the
 *     host and at the same address in the device processes.  Unregistering
 *     copies them back into private pages.  Pages shared by two
 *     registrations are moved once (a per-page count).  A child forked
 *     from the host gets private copies of them (pthread_atfork), as a
 *     child gets copies of ordinary memory;
 *   - a registered MAP_SHARED file mapping is mapped by the device process
 *     from the same file at the same offset and address: a kernel sees the
 *     page cache.  As with drivers >= 550.67 on kernels >= 6.5, a writable
 *     registration is refused when the file system tracks dirty pages
 *     (anything but tmpfs and hugetlbfs): CUDA_ERROR_INVALID_VALUE, what the
 *     H200 answered on ext4 (docs/hardware.md, Z1.rw);
 *     CU_MEMHOSTREGISTER_READ_ONLY works.  Shared memory that is not a file
 *     (memfd, shared anonymous, System V) cannot be reached:
 *     CUDA_ERROR_NOT_SUPPORTED.
 *
 * Access is charged: in the device process host memory stays PROT_NONE
 * until a kernel touches a page; the fault opens the page (read-only for a
 * load, read-write for a store to a writable range) and books its 4 KiB on
 * the bus (a load host->device, a store device->host), without the
 * per-transfer latency (loads and stores are pipelined, not DMA jobs).
 * When no kernel is left running the pages are closed again, so the next
 * kernel pays again for what it touches.  A store to a read-only range is
 * not opened: the kernel faults, CUDA_ERROR_ILLEGAL_ADDRESS.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include "sim.h"

#define HOSTMEM_NAME "simgpu-host-memory"
#define REFS_MASK 0x0fffu
#define REF_PROT_SHIFT 12       /* the pages' original PROT_READ|WRITE|EXEC above the count */

static int host_fd = -1;
static unsigned char *window;           /* the host window, same address everywhere */
static uint64_t window_bytes;
static size_t pg;
static pthread_mutex_t host_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_alloc space;          /* window offsets in use */
static uint16_t *refs;                  /* per window page: registrations using it | original prot */

/* ---- host window ---- */

int sim_hostmem_init(void)
{
    pg = (size_t)sysconf(_SC_PAGESIZE);
    long pages = sysconf(_SC_PHYS_PAGES);
    uint64_t bytes = pages > 0 ? (uint64_t)pages * pg : 1ull << 34;
    bytes = (bytes + (2u << 20) - 1) & ~(uint64_t)((2u << 20) - 1);
    host_fd = memfd_create(HOSTMEM_NAME, MFD_CLOEXEC);
    if (host_fd < 0)
        return -errno;
    if (ftruncate(host_fd, (off_t)bytes) < 0)
        return -errno;
    void *w = mmap(NULL, bytes, PROT_NONE, MAP_SHARED | MAP_NORESERVE, host_fd, 0);
    if (w == MAP_FAILED)
        return -errno;
    void *r = mmap(NULL, bytes / pg * sizeof(*refs), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (r == MAP_FAILED) {
        munmap(w, bytes);
        return -errno;
    }
    window = w;
    window_bytes = bytes;
    refs = r;
    space = (struct sim_alloc){ .area_bytes = bytes, .align = pg };
    return 0;
}

int sim_hostmem_fd(void)
{
    return host_fd;
}

/* ---- device side: the ranges kernels may touch, and their faults ---- */

#define DEV_MAX_RANGES 4096
struct dev_range {
    uint64_t base, bytes;       /* whole pages; bytes == 0: free slot */
    int prot;                   /* PROT_READ, or PROT_READ | PROT_WRITE */
    uint32_t opened;            /* a page was opened since the last close */
    bool hmm;                   /* found by a kernel's touch (SIMGPU_HMM), not registered */
};
static struct dev_range dev_ranges[DEV_MAX_RANGES];
static unsigned dev_used;       /* slots [0, dev_used) have been used */
/* Taken to claim or free a slot: by the control thread, by quiesce, and by
 * the HMM fault path (a signal handler, on a worker that never holds it
 * otherwise).  Lookups are lock-free: a slot's bytes is published last. */
static int dev_lock;

static void dev_lock_take(void)
{
    while (__atomic_exchange_n(&dev_lock, 1, __ATOMIC_ACQUIRE))
        sched_yield();
}

static void dev_lock_drop(void)
{
    __atomic_store_n(&dev_lock, 0, __ATOMIC_RELEASE);
}

/* A free slot filled with [base, base+bytes) (dev_lock held), or NULL. */
static struct dev_range *dev_claim(uint64_t base, uint64_t bytes, int prot, bool hmm)
{
    for (unsigned i = 0; i < DEV_MAX_RANGES; i++) {
        struct dev_range *r = &dev_ranges[i];
        if (r->bytes)
            continue;
        r->base = base;
        r->prot = prot;
        r->opened = 0;
        r->hmm = hmm;
        if (i >= dev_used)
            __atomic_store_n(&dev_used, i + 1, __ATOMIC_RELEASE);
        __atomic_store_n(&r->bytes, bytes, __ATOMIC_RELEASE);
        return r;
    }
    return NULL;
}

static struct dev_range *dev_range_of(uint64_t a)
{
    unsigned used = __atomic_load_n(&dev_used, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < used; i++) {
        struct dev_range *r = &dev_ranges[i];
        uint64_t n = __atomic_load_n(&r->bytes, __ATOMIC_ACQUIRE);
        if (n && a >= r->base && a - r->base < n)
            return r;
    }
    return NULL;
}

static bool dev_covered(uint64_t a, const struct dev_range *except)
{
    for (unsigned i = 0; i < dev_used; i++) {
        const struct dev_range *r = &dev_ranges[i];
        if (r != except && r->bytes && a >= r->base && a - r->base < r->bytes)
            return true;
    }
    return false;
}

static void forget_run(uint64_t lo, uint64_t hi)
{
    if (lo < hi)
        mmap((void *)(uintptr_t)lo, hi - lo, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
}

/* Pages of [lo, hi) no range but `except` covers go back to PROT_NONE
 * anonymous memory (what the device process had there), one call per
 * uncovered run.  dev_lock held (its static scratch is this function's). */
static void dev_forget(uint64_t lo, uint64_t hi, const struct dev_range *except)
{
    static uint64_t cut[DEV_MAX_RANGES][2];
    unsigned n = 0;
    for (unsigned i = 0; i < dev_used; i++) {
        const struct dev_range *r = &dev_ranges[i];
        if (r == except || !r->bytes || r->base >= hi || r->base + r->bytes <= lo)
            continue;
        /* insertion by start */
        unsigned k = n++;
        while (k > 0 && cut[k - 1][0] > r->base) {
            cut[k][0] = cut[k - 1][0];
            cut[k][1] = cut[k - 1][1];
            k--;
        }
        cut[k][0] = r->base;
        cut[k][1] = r->base + r->bytes;
    }
    uint64_t at = lo;
    for (unsigned k = 0; k < n && at < hi; k++) {
        if (cut[k][0] > at)
            forget_run(at, cut[k][0] < hi ? cut[k][0] : hi);
        if (cut[k][1] > at)
            at = cut[k][1];
    }
    if (at < hi)
        forget_run(at, hi);
}

/* May host pages be mapped at [a, a+n) in this process?  Pages another
 * registration already maps are; the rest must hold nothing of ours. */
static bool dev_may_map(uint64_t a, uint64_t n)
{
    uint64_t run = a;
    for (uint64_t p = a; p <= a + n; p += pg) {
        bool end = p == a + n;
        if (!end && !dev_covered(p, NULL))
            continue;
        if (p > run && !sim_vmm_only_host_leftovers(run, p - run))
            return false;
        run = p + pg;
    }
    return true;
}

static bool own_map_identity(uint64_t a, uint64_t *dev, uint64_t *ino, char *chunk, size_t chunk_size, char *line,
                             size_t line_size);
static char control_chunk[16 << 10], control_line[4096];   /* the control thread's */

int sim_hostmem_device_op(struct sim_device *d, const struct sim_op *op)
{
    void *a = (void *)(uintptr_t)op->u.vmm.addr;
    size_t n = op->u.vmm.bytes;
    switch (op->u.vmm.action) {
    case HOSTMEM_PROBE:         /* may host memory be mapped here? */
        if (dev_may_map(op->u.vmm.addr, n))
            return 0;
        d->sh->in_the_way[0] = sim_vmm_in_the_way[0];
        d->sh->in_the_way[1] = sim_vmm_in_the_way[1];
        return -EEXIST;
    case HOSTMEM_MAP_WINDOW:    /* window pages at another address */
        if (mmap(a, n, PROT_NONE, MAP_SHARED | MAP_FIXED, host_fd, (off_t)op->u.vmm.memfd_off) == MAP_FAILED)
            return -errno;
        return 0;
    case HOSTMEM_MAP_FILE: {
        /* args: device and inode as the host's maps shows them (uint64
         * each), then the path.  The identity is checked on this process's
         * own maps line once mapped: stat's st_dev differs from it on
         * overlay file systems. */
        uint64_t want[2], dev, ino;
        memcpy(want, op->args, sizeof(want));
        const char *path = (const char *)op->args + sizeof(want);
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0 && (errno == EACCES || errno == EROFS))
            fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return -errno;
        int rc = 0;
        if (mmap(a, n, PROT_NONE, MAP_SHARED | MAP_FIXED, fd, (off_t)op->u.vmm.memfd_off) == MAP_FAILED)
            rc = -errno;
        else if (!own_map_identity(op->u.vmm.addr, &dev, &ino, control_chunk, sizeof(control_chunk), control_line,
                                   sizeof(control_line)) ||
                 dev != want[0] || ino != want[1])
            rc = -ESTALE;       /* the path names another file now */
        close(fd);
        if (rc == -ESTALE)
            mmap(a, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        return rc;
    }
    case HOSTMEM_ADD: {
        dev_lock_take();
        struct dev_range *r = dev_claim(op->u.vmm.addr, n, op->u.vmm.prot, false);
        dev_lock_drop();
        return r ? 0 : -ENOSPC;
    }
    case HOSTMEM_REMOVE:
        /* the host drained the device: no kernel runs */
        dev_lock_take();
        for (unsigned i = 0; i < dev_used; i++) {
            struct dev_range *r = &dev_ranges[i];
            if (r->bytes && !r->hmm && r->base == op->u.vmm.addr) {
                uint64_t lo = r->base, hi = r->base + r->bytes;
                if (sim_hostmem_in_window(lo))   /* a pinned allocation: the window's own view */
                    mprotect((void *)(uintptr_t)lo, hi - lo, PROT_NONE);
                else
                    dev_forget(lo, hi, r);
                __atomic_store_n(&r->bytes, 0, __ATOMIC_RELEASE);
                dev_lock_drop();
                return 0;
            }
        }
        /* a registration that failed before it was added: forget what
         * was mapped for it */
        if (n && !sim_hostmem_in_window(op->u.vmm.addr))
            dev_forget(op->u.vmm.addr, op->u.vmm.addr + n, NULL);
        dev_lock_drop();
        return 0;
    default:
        return -EINVAL;
    }
}

/* ---- the HMM profile (SIMGPU_HMM=1): a kernel touching a host shared
 * file mapping it was never given gets it, as HMM mirrors the process's
 * page tables.  The device process reads the host's /proc/PID/smaps for
 * the mapping, opens the same file and maps it at the same address.  A
 * range registered with userfaultfd (VmFlags um/uw/ui) is refused, as HMM
 * refuses such ranges; so is anything but a shared mapping of a file.
 * Everything here runs in a fault handler: plain system calls into static
 * buffers, under a spin lock (two workers may fault at once). ---- */

__attribute__((visibility("default"))) int simgpu_hmm_active;   /* read by kernels' atomics */
static pid_t host_pid;
static int hmm_lock;
static char hmm_chunk[64 << 10];     /* hmm_lock */
static char hmm_line[4096];

void sim_hostmem_device_start(pid_t host)
{
    host_pid = host;
}

static size_t fmt_ulong(char *p, unsigned long v)
{
    char t[24];
    size_t n = 0;
    do
        t[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    for (size_t i = 0; i < n; i++)
        p[i] = t[n - 1 - i];
    return n;
}

static bool has_flag(const char *flags, const char *end, const char *f)
{
    for (const char *p = flags; p + 2 <= end; p++)
        if (p[0] == f[0] && p[1] == f[1] && (p == flags || p[-1] == ' ') && (p + 2 == end || p[2] == ' '))
            return true;
    return false;
}

enum { HMM_MAPPED, HMM_NOT_FILE, HMM_UFFD, HMM_FAILED };

/* The host mapping holding addr, read from /proc/PID/smaps as a stream
 * (it may be large): its maps line and whether userfaultfd watches it. */
struct host_vma {
    unsigned long lo, hi, off, ino;
    unsigned maj, min;
    char perms[5];
    char path[1024];
    bool uffd;
    bool rand_read, seq_read;   /* madvise MADV_RANDOM / MADV_SEQUENTIAL (VmFlags rr / sr) */
};

/* The mapping holding addr in `file` (a maps or smaps file), read as a
 * stream into the caller's buffers; with `flags`, also whether userfaultfd
 * watches it and its access hints (smaps' VmFlags). */
static bool vma_of(const char *file, uintptr_t addr, bool flags, struct host_vma *v, char *chunk, size_t chunk_size,
                   char *line, size_t line_size)
{
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool found = false, done = false;
    size_t ll = 0;
    ssize_t r;
    while (!done && (r = read(fd, chunk, chunk_size)) > 0) {
        for (ssize_t i = 0; i < r && !done; i++) {
            if (chunk[i] != '\n') {
                if (ll < line_size - 1)
                    line[ll++] = chunk[i];
                continue;
            }
            line[ll] = 0;
            ll = 0;
            if (found) {
                if (!strncmp(line, "VmFlags:", 8)) {
                    char *fl = line + 8, *fe = fl + strlen(fl);
                    while (fl < fe && *fl == ' ')
                        fl++;
                    while (fe > fl && fe[-1] == ' ')
                        fe--;
                    v->uffd = has_flag(fl, fe, "um") || has_flag(fl, fe, "uw") || has_flag(fl, fe, "ui");
                    v->rand_read = has_flag(fl, fe, "rr");
                    v->seq_read = has_flag(fl, fe, "sr");
                    done = true;
                }
                continue;
            }
            int path_at = 0;
            if (sscanf(line, "%lx-%lx %4s %lx %x:%x %lu %n", &v->lo, &v->hi, v->perms, &v->off, &v->maj, &v->min,
                       &v->ino, &path_at) >= 7 && addr >= v->lo && addr < v->hi) {
                found = true;
                done = !flags;
                v->uffd = v->rand_read = v->seq_read = false;
                snprintf(v->path, sizeof(v->path), "%s", path_at ? line + path_at : "");
            }
        }
    }
    close(fd);
    return found;
}

static bool host_vma_of(uintptr_t addr, struct host_vma *v)
{
    char path[64] = "/proc/";
    size_t k = 6 + fmt_ulong(path + 6, (unsigned long)host_pid);
    memcpy(path + k, "/smaps", 7);
    return vma_of(path, addr, true, v, hmm_chunk, sizeof(hmm_chunk), hmm_line, sizeof(hmm_line));
}

/* The device and inode this process's maps gives for the mapping at a
 * (the representation the host's maps line uses too). */
static bool own_map_identity(uint64_t a, uint64_t *dev, uint64_t *ino, char *chunk, size_t chunk_size, char *line,
                             size_t line_size)
{
    struct host_vma v;
    if (!vma_of("/proc/self/maps", a, false, &v, chunk, chunk_size, line, line_size))
        return false;
    *dev = makedev(v.maj, v.min);
    *ino = v.ino;
    return true;
}

/* Map the host mapping holding addr; one of HMM_*. */
static int hmm_discover(uintptr_t addr)
{
    static struct host_vma v;     /* hmm_lock */
    if (!host_vma_of(addr, &v))
        return HMM_NOT_FILE;
    if (v.uffd)
        return HMM_UFFD;
    const char *path = v.path;
    bool dev_node = !strncmp(path, "/dev/", 5) && strncmp(path, "/dev/shm/", 9);
    if (v.perms[3] != 's' || v.perms[0] != 'r' || v.ino == 0 || path[0] != '/' || strstr(path, " (deleted)") ||
        !strncmp(path, "/memfd:", 7) || !strncmp(path, "/SYSV", 5) || dev_node)
        return HMM_NOT_FILE;
    if (!sim_vmm_only_host_leftovers(v.lo, v.hi - v.lo))
        return HMM_FAILED;
    int fd = open(path, (v.perms[1] == 'w' ? O_RDWR : O_RDONLY) | O_CLOEXEC);
    if (fd < 0)
        return HMM_FAILED;
    void *m = mmap((void *)v.lo, v.hi - v.lo, PROT_NONE, MAP_SHARED | MAP_FIXED, fd, (off_t)v.off);
    close(fd);
    if (m == MAP_FAILED)
        return HMM_FAILED;
    /* A GPU's faults through HMM go through the program's own mapping,
     * and the page cache reads around them (or not) as its hints say. */
    if (v.rand_read || v.seq_read)
        (void)madvise(m, v.hi - v.lo, v.rand_read ? MADV_RANDOM : MADV_SEQUENTIAL);
    uint64_t dev, ino;
    bool same = own_map_identity(v.lo, &dev, &ino, hmm_chunk, sizeof(hmm_chunk), hmm_line, sizeof(hmm_line)) &&
                dev == makedev(v.maj, v.min) && ino == v.ino;
    dev_lock_take();
    struct dev_range *r =
        same ? dev_claim(v.lo, v.hi - v.lo, v.perms[1] == 'w' ? PROT_READ | PROT_WRITE : PROT_READ, true) : NULL;
    if (!r)
        dev_forget(v.lo, v.hi, NULL);
    dev_lock_drop();
    if (!r)
        return HMM_FAILED;
    __atomic_store_n(&simgpu_hmm_active, 1, __ATOMIC_RELEASE);
    return HMM_MAPPED;
}

static void say_once(int *said, const char *what, uintptr_t addr)
{
    if (!__atomic_exchange_n(said, 1, __ATOMIC_RELAXED))
        sim_log("a kernel touched host address %#lx: %s", (unsigned long)addr, what);
}

/* A fault on an address no range covers: under SIMGPU_HMM, look for a
 * host shared file mapping there. */
static struct dev_range *hmm_fault(uintptr_t addr)
{
    static int said_uffd, said_failed;
    while (__atomic_exchange_n(&hmm_lock, 1, __ATOMIC_ACQUIRE))
        sched_yield();
    struct dev_range *r = dev_range_of(addr);     /* another worker may have mapped it */
    int how = r ? HMM_MAPPED : hmm_discover(addr);
    __atomic_store_n(&hmm_lock, 0, __ATOMIC_RELEASE);
    if (how == HMM_UFFD)
        say_once(&said_uffd, "it is registered with userfaultfd, which HMM refuses (illegal address)", addr);
    else if (how == HMM_FAILED)
        say_once(&said_failed, "the device cannot map that file mapping (illegal address)", addr);
    return how == HMM_MAPPED ? dev_range_of(addr) : NULL;
}

/* Kernels' atomics on memory reached through HMM (simgpu_kernel.h): on a
 * file page they are fatal, as on hardware (the memo: atomics on
 * MAP_SHARED file pages never in H). */
__attribute__((visibility("default"))) void simgpu_hmm_atomic_check(const void *p)
{
    struct dev_range *r = dev_range_of((uintptr_t)p);
    if (r && r->hmm) {
        static int said;
        say_once(&said, "an atomic operation on a file page reached through HMM (illegal address)", (uintptr_t)p);
        raise(SIGSEGV);
    }
}

bool sim_hostmem_device_fault(struct sim_device *d, uintptr_t addr, bool write)
{
    struct dev_range *r = dev_range_of(addr);
    if (!r && sim.env.hmm)
        r = hmm_fault(addr);
    if (!r || (write && !(r->prot & PROT_WRITE)))
        return false;
    uintptr_t page = addr & ~(uintptr_t)(pg - 1);
    uint64_t start_ns = r->hmm ? sim_uvm_clock_ns() : 0;
    if (mprotect((void *)page, pg, write ? PROT_READ | PROT_WRITE : PROT_READ) < 0)
        return false;
    __atomic_store_n(&r->opened, 1, __ATOMIC_RELAXED);
    struct sim_bus_slot t = sim_bus_reserve_access(d, write ? SIMGPU_BUS_DTOH : SIMGPU_BUS_HTOD, pg);
    sim_bus_wait_until(t.end_ns);
    /* A page reached through HMM faults on a GPU too (a registration's
     * pages are mapped for the device and never do): the profiling
     * interface reports it. */
    if (r->hmm)
        sim_uvm_log_host_fault(d, page, write, start_ns);
    return true;
}

/* No kernel runs any more: close what kernels opened. */
void sim_hostmem_device_quiesce(void)
{
    dev_lock_take();
    for (unsigned i = 0; i < dev_used; i++) {
        struct dev_range *r = &dev_ranges[i];
        if (r->bytes && r->hmm) {
            /* found again by the next kernel that touches it: the host's
             * mappings may change between kernels */
            uint64_t lo = r->base, hi = r->base + r->bytes;
            __atomic_store_n(&r->bytes, 0, __ATOMIC_RELEASE);
            dev_forget(lo, hi, NULL);
        } else if (r->bytes && __atomic_exchange_n(&r->opened, 0, __ATOMIC_RELAXED)) {
            mprotect((void *)(uintptr_t)r->base, r->bytes, PROT_NONE);
        }
    }
    dev_lock_drop();
}

/* ---- host side ---- */

/* Run one hostmem action in every device process. */
static int each_device(uint32_t action, uint64_t addr, uint64_t bytes, uint64_t off, int prot, const void *args,
                       size_t args_bytes)
{
    for (int i = 0; i < sim.ndevices; i++) {
        int rc = sim_control_op(&sim.dev[i], SIM_OP_HOSTMEM, action, addr, bytes, off, prot, args, args_bytes);
        if (rc)
            return rc;
    }
    return 0;
}

static void undo_add(uint64_t base, uint64_t bytes)
{
    each_device(HOSTMEM_REMOVE, base, bytes, 0, 0, NULL, 0);
}

static int alloc_locked(size_t bytes, void **out)
{
    size_t len = (bytes + pg - 1) & ~(pg - 1);
    uint64_t off;
    int rc = sim_alloc_get(&space, len, &off);
    if (rc)
        return -ENOMEM;
    unsigned char *p = window + off;
    if (mprotect(p, len, PROT_READ | PROT_WRITE) < 0) {
        rc = -errno;
        goto fail;
    }
    if ((rc = each_device(HOSTMEM_ADD, (uintptr_t)p, len, 0, PROT_READ | PROT_WRITE, NULL, 0))) {
        undo_add((uintptr_t)p, 0);
        mprotect(p, len, PROT_NONE);
        goto fail;
    }
    *out = p;
    return 0;
fail:
    sim_alloc_put(&space, off);
    return rc;
}

static void free_locked(void *p, size_t bytes)
{
    size_t len = (bytes + pg - 1) & ~(pg - 1);
    undo_add((uintptr_t)p, 0);
    uint64_t off = (uint64_t)((unsigned char *)p - window);
    mmap(p, len, PROT_NONE, MAP_SHARED | MAP_FIXED | MAP_NORESERVE, host_fd, (off_t)off);   /* drop the pages */
    fallocate(host_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len);
    sim_alloc_put(&space, off);
}

bool sim_hostmem_in_window(uint64_t p)
{
    return p >= (uintptr_t)window && p - (uintptr_t)window < window_bytes;
}

/* One mapping of /proc/self/maps. */
struct vma {
    uint64_t lo, hi, off, ino;
    unsigned dev_major, dev_minor;
    char perms[5];
    char path[512];
};

/* The mappings meeting [lo, hi), in order; -ENOMEM past `cap`. */
static int read_vmas(uint64_t lo, uint64_t hi, struct vma *v, size_t cap, size_t *n)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return -errno;
    char line[1024];
    *n = 0;
    int rc = 0;
    while (fgets(line, sizeof(line), f)) {
        struct vma m = { 0 };
        int path_at = 0;
        if (sscanf(line, "%lx-%lx %4s %lx %x:%x %lu %n", &m.lo, &m.hi, m.perms, &m.off, &m.dev_major, &m.dev_minor,
                   &m.ino, &path_at) < 7)
            continue;
        if (m.hi <= lo || m.lo >= hi)
            continue;
        if (path_at > 0) {
            snprintf(m.path, sizeof(m.path), "%s", line + path_at);
            m.path[strcspn(m.path, "\n")] = 0;
        }
        if (*n == cap) {
            rc = -ENOMEM;
            break;
        }
        v[(*n)++] = m;
    }
    fclose(f);
    return rc;
}

static int prot_of(const char *perms)
{
    return (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
           (perms[2] == 'x' ? PROT_EXEC : 0);
}

static bool is_window_vma(const struct vma *m)
{
    return strncmp(m->path, "/memfd:" HOSTMEM_NAME, strlen("/memfd:" HOSTMEM_NAME)) == 0;
}

/* Kernels >= 6.5 refuse long-term writable pins of file pages whose file
 * system tracks dirty pages (mm/gup.c, writable_file_mapping_allowed). */
static bool needs_dirty_tracking(const char *path)
{
    struct statfs fs;
    if (statfs(path, &fs) < 0)
        return true;
    if (fs.f_type == TMPFS_MAGIC || fs.f_type == HUGETLBFS_MAGIC)
        return false;
    struct utsname u;
    unsigned major = 0, minor = 0;
    if (uname(&u) == 0 && sscanf(u.release, "%u.%u", &major, &minor) == 2 && (major < 6 || (major == 6 && minor < 5)))
        return false;
    return true;
}

/* Copy [src, src+len) of this process's memory to dst through
 * /proc/self/mem: whole pages of the program's memory, read as the kernel
 * sees them — also pages a sanitizer keeps as redzones, or PROT_NONE ones.
 * Opened per call (a child after fork must read its own memory). */
static void copy_raw(void *dst, uintptr_t src, size_t len)
{
    int fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
    size_t done = 0;
    while (fd >= 0 && done < len) {
        ssize_t r = pread(fd, (char *)dst + done, len - done, (off_t)(src + done));
        if (r <= 0)
            break;
        done += (size_t)r;
    }
    if (fd >= 0)
        close(fd);
    if (done < len)
        memcpy((char *)dst + done, (const void *)(src + done), len - done);
}

/* Move the private pages [lo, hi) into fresh window pages mapped over
 * them.  Returns 0 or -errno. */
static int move_to_window(uint64_t lo, uint64_t hi, int prot)
{
    size_t len = hi - lo;
    uint64_t off;
    int rc = sim_alloc_get(&space, len, &off);
    if (rc)
        return -ENOMEM;
    unsigned char *w = window + off;
    if (mprotect(w, len, PROT_READ | PROT_WRITE) < 0) {
        rc = -errno;
        goto fail;
    }
    copy_raw(w, lo, len);
    mprotect(w, len, PROT_NONE);
    if (mmap((void *)(uintptr_t)lo, len, prot, MAP_SHARED | MAP_FIXED, host_fd, (off_t)off) == MAP_FAILED) {
        rc = -errno;
        goto fail;
    }
    for (uint64_t i = 0; i < len / pg; i++)
        refs[off / pg + i] = (uint16_t)(prot << REF_PROT_SHIFT);
    return 0;
fail:
    sim_alloc_put(&space, off);
    return rc;
}

/* Back to private memory: the window pages [lo, hi) at window offset off
 * (no registration uses them any more). */
static void move_back(uint64_t lo, uint64_t hi, uint64_t off)
{
    size_t len = hi - lo;
    int prot = refs[off / pg] >> REF_PROT_SHIFT;
    void *tmp = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (tmp == MAP_FAILED) {
        sim_log("cannot move %#lx-%#lx back to private memory (%s); it stays shared with the device",
                (unsigned long)lo, (unsigned long)hi, strerror(errno));
        return;
    }
    copy_raw(tmp, lo, len);
    mprotect(tmp, len, prot);
    if (mremap(tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)(uintptr_t)lo) == MAP_FAILED) {
        sim_log("cannot move %#lx-%#lx back to private memory (%s); it stays shared with the device",
                (unsigned long)lo, (unsigned long)hi, strerror(errno));
        munmap(tmp, len);
        return;
    }
    fallocate(host_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len);
    /* an allocation is freed when none of its pages is in use (the run
     * may span several: the kernel merges adjacent window mappings) */
    for (uint64_t o = off; o < off + len;) {
        const struct sim_extent *e = sim_alloc_find(&space, o, 1);
        if (!e) {
            o += pg;
            continue;
        }
        uint64_t e_off = e->off, e_end = e->off + e->size;
        bool used = false;
        for (uint64_t q = e_off / pg; q < e_end / pg && !used; q++)
            used = (refs[q] & REFS_MASK) != 0;
        if (!used)
            sim_alloc_put(&space, e_off);
        o = e_end;
    }
}

static void log_refusal(const char *what, const void *p, size_t bytes, const struct vma *m)
{
    sim_log("cuMemHostRegister(%p, %zu): %s (mapping %#lx-%#lx %s %s)", p, bytes, what, (unsigned long)m->lo,
            (unsigned long)m->hi, m->perms, m->path[0] ? m->path : "[anonymous]");
}

#define MAX_VMAS 64

static void unregister_locked(void *p, size_t bytes);

/* Make [p, p+bytes) reachable by kernels with `flags`
 * (CU_MEMHOSTREGISTER_*).  Returns a CUresult. */
static CUresult register_locked(void *p, size_t bytes, unsigned flags, bool *reachable)
{
    *reachable = false;
    uint64_t lo = (uintptr_t)p & ~(uint64_t)(pg - 1), hi = ((uintptr_t)p + bytes + pg - 1) & ~(uint64_t)(pg - 1);
    bool read_only = flags & CU_MEMHOSTREGISTER_READ_ONLY;
    struct vma v[MAX_VMAS];
    size_t n;
    if (read_vmas(lo, hi, v, MAX_VMAS, &n))
        return CUDA_ERROR_NOT_SUPPORTED;
    /* first every check, then every change */
    uint64_t at = lo;
    for (size_t i = 0; i < n; i++) {
        const struct vma *m = &v[i];
        if (m->lo > at)
            break;
        at = m->hi;
        bool shared = m->perms[3] == 's';
        if (!shared || is_window_vma(m))
            continue;
        if (m->ino == 0 || m->path[0] != '/' || strstr(m->path, " (deleted)") ||
            !strncmp(m->path, "/memfd:", 7) || !strncmp(m->path, "/SYSV", 5)) {
            log_refusal("shared memory that is not a file the device can open", p, bytes, m);
            return CUDA_ERROR_NOT_SUPPORTED;
        }
        if (!read_only && needs_dirty_tracking(m->path)) {
            log_refusal("a writable registration of a shared file mapping whose file system tracks dirty pages "
                        "(drivers >= 550.67 pin file pages long-term; use CU_MEMHOSTREGISTER_READ_ONLY)",
                        p, bytes, m);
            return CUDA_ERROR_INVALID_VALUE;     /* the H200's answer (docs/hardware.md, Z1.rw) */
        }
    }
    if (at < hi)
        return CUDA_ERROR_INVALID_VALUE;    /* not all mapped */
    int probe = each_device(HOSTMEM_PROBE, lo, hi - lo, 0, 0, NULL, 0);
    if (probe == -EEXIST) {
        /* The device process has memory of its own there (its copy of the
         * heap, or of memory from before cuInit): host pages mapped over it
         * would break it.  Copies work; kernels cannot reach the range. */
        static bool said;
        const uint64_t *in_the_way = sim.dev[0].sh->in_the_way;
        for (int i = 0; i < sim.ndevices; i++)
            if (sim.dev[i].sh->in_the_way[1])
                in_the_way = sim.dev[i].sh->in_the_way;
        if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
            sim_log("cuMemHostRegister(%p, %zu): kernels cannot dereference this range (the device process has "
                    "memory of its own at %#lx-%#lx: its heap, memory from before cuInit, or a sanitizer's); "
                    "copies work.  Memory from cuMemHostAlloc, or mapped after cuInit, can be reached by kernels",
                    p, bytes, (unsigned long)in_the_way[0], (unsigned long)in_the_way[1]);
        return CUDA_SUCCESS;
    }
    if (probe)
        return probe == -EPIPE ? CUDA_ERROR_LAUNCH_FAILED : CUDA_ERROR_NOT_SUPPORTED;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        struct vma *m = &v[i];
        uint64_t a = m->lo > lo ? m->lo : lo, b = m->hi < hi ? m->hi : hi;
        if (m->perms[3] == 's' && !is_window_vma(m)) {
            uint64_t ids[2] = { makedev(m->dev_major, m->dev_minor), m->ino };
            unsigned char args[sizeof(ids) + sizeof(m->path)];
            memcpy(args, ids, sizeof(ids));
            size_t plen = strlen(m->path) + 1;
            memcpy(args + sizeof(ids), m->path, plen);
            rc = each_device(HOSTMEM_MAP_FILE, a, b - a, m->off + (a - m->lo), 0, args, sizeof(ids) + plen);
            continue;
        }
        if (!is_window_vma(m)) {
            rc = move_to_window(a, b, prot_of(m->perms));
            if (rc)
                break;
            /* where it went: read the mapping again */
            struct vma w;
            size_t k;
            if (read_vmas(a, a + 1, &w, 1, &k) || k != 1 || !is_window_vma(&w)) {
                rc = -EIO;
                break;
            }
            *m = w;
            m->hi = b;
        }
        uint64_t off = m->off + (a - m->lo);
        for (uint64_t q = 0; q < (b - a) / pg; q++)
            refs[off / pg + q]++;
        if (!sim_hostmem_in_window(m->lo))
            rc = each_device(HOSTMEM_MAP_WINDOW, a, b - a, off, 0, NULL, 0);
    }
    if (!rc)
        rc = each_device(HOSTMEM_ADD, lo, hi - lo, 0, read_only ? PROT_READ : PROT_READ | PROT_WRITE, NULL, 0);
    if (rc) {
        sim_log("cuMemHostRegister(%p, %zu): the device cannot map the range (%s)", p, bytes, strerror(-rc));
        unregister_locked(p, bytes);
        return rc == -ENOMEM ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_NOT_SUPPORTED;
    }
    *reachable = true;
    return CUDA_SUCCESS;
}

/* Undo sim_hostmem_register (also of a partly done one).  The caller has
 * drained the devices. */
static void unregister_locked(void *p, size_t bytes)
{
    uint64_t lo = (uintptr_t)p & ~(uint64_t)(pg - 1), hi = ((uintptr_t)p + bytes + pg - 1) & ~(uint64_t)(pg - 1);
    undo_add(lo, hi - lo);
    struct vma v[MAX_VMAS];
    size_t n;
    if (read_vmas(lo, hi, v, MAX_VMAS, &n))
        return;
    for (size_t i = 0; i < n; i++) {
        const struct vma *m = &v[i];
        if (!is_window_vma(m) || sim_hostmem_in_window(m->lo))
            continue;
        uint64_t a = m->lo > lo ? m->lo : lo, b = m->hi < hi ? m->hi : hi;
        uint64_t off = m->off + (a - m->lo);
        /* release this registration's pages; runs no one uses go home */
        uint64_t run = 0;
        for (uint64_t q = 0; q <= (b - a) / pg; q++) {
            bool end = q == (b - a) / pg;
            if (!end && (refs[off / pg + q] & REFS_MASK))
                refs[off / pg + q]--;
            bool free_page = !end && !(refs[off / pg + q] & REFS_MASK);
            if (free_page)
                continue;
            if (q > run) {
                move_back(a + run * pg, a + q * pg, off + run * pg);
            }
            run = q + 1;
        }
    }
}

/* The host side's public calls run one at a time (host_lock): a
 * registration reads the process's mappings, moves pages and tells the
 * devices, and another registration of a neighbouring range must see the
 * result.  The devices' part runs on their control threads, never behind a
 * kernel, so holding the lock across it cannot wait for the program. */
int sim_hostmem_alloc(size_t bytes, void **out)
{
    pthread_mutex_lock(&host_lock);
    int rc = alloc_locked(bytes, out);
    pthread_mutex_unlock(&host_lock);
    return rc;
}

void sim_hostmem_free(void *p, size_t bytes)
{
    pthread_mutex_lock(&host_lock);
    free_locked(p, bytes);
    pthread_mutex_unlock(&host_lock);
}

CUresult sim_hostmem_register(void *p, size_t bytes, unsigned flags, bool *reachable)
{
    pthread_mutex_lock(&host_lock);
    CUresult r = register_locked(p, bytes, flags, reachable);
    pthread_mutex_unlock(&host_lock);
    return r;
}

void sim_hostmem_unregister(void *p, size_t bytes)
{
    pthread_mutex_lock(&host_lock);
    unregister_locked(p, bytes);
    pthread_mutex_unlock(&host_lock);
}

/* In a child forked from the host: window pages are shared with the
 * parent; give the child private copies, as it has of ordinary memory
 * (copied now, not on write: fork pays for the pinned and registered memory
 * it finds).  The child has one thread: static buffers, the maps read as a
 * stream while the mappings change behind the read position. */
static void child_after_fork(void)
{
    static char chunk[16 << 10], line[1024];
    if (host_fd < 0)
        return;
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    size_t ll = 0;
    ssize_t r;
    while ((r = read(fd, chunk, sizeof(chunk))) > 0) {
        for (ssize_t i = 0; i < r; i++) {
            if (chunk[i] != '\n') {
                if (ll < sizeof(line) - 1)
                    line[ll++] = chunk[i];
                continue;
            }
            line[ll] = 0;
            ll = 0;
            struct vma m = { 0 };
            int path_at = 0;
            if (sscanf(line, "%lx-%lx %4s %lx %x:%x %lu %n", &m.lo, &m.hi, m.perms, &m.off, &m.dev_major,
                       &m.dev_minor, &m.ino, &path_at) < 7 || !path_at)
                continue;
            snprintf(m.path, sizeof(m.path), "%s", line + path_at);
            if (!is_window_vma(&m) || m.perms[0] == '-')
                continue;       /* the window's unused part holds nothing */
            size_t len = m.hi - m.lo;
            void *tmp = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (tmp == MAP_FAILED)
                continue;
            copy_raw(tmp, m.lo, len);
            mprotect(tmp, len, prot_of(m.perms));
            if (mremap(tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)(uintptr_t)m.lo) == MAP_FAILED)
                munmap(tmp, len);
        }
    }
    close(fd);
}

void sim_hostmem_atfork(void)
{
    pthread_atfork(NULL, NULL, child_after_fork);
}
