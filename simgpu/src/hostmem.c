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

/* Pages of [lo, hi) no range but `except` covers go back to PROT_NONE
 * anonymous memory (what the device process had there). */
static void dev_forget(uint64_t lo, uint64_t hi, const struct dev_range *except)
{
    for (uint64_t a = lo; a < hi; a += pg) {
        bool covered = false;
        for (unsigned i = 0; i < dev_used && !covered; i++) {
            const struct dev_range *r = &dev_ranges[i];
            covered = r != except && r->bytes && a >= r->base && a - r->base < r->bytes;
        }
        if (!covered)
            mmap((void *)(uintptr_t)a, pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    }
}

int sim_hostmem_device_op(struct sim_device *d, const struct sim_op *op)
{
    (void)d;
    void *a = (void *)(uintptr_t)op->u.vmm.addr;
    size_t n = op->u.vmm.bytes;
    switch (op->u.vmm.action) {
    case HOSTMEM_PROBE:         /* may host memory be mapped here? */
        return sim_vmm_only_host_leftovers(op->u.vmm.addr, n) ? 0 : -EEXIST;
    case HOSTMEM_MAP_WINDOW:    /* window pages at another address */
        if (mmap(a, n, PROT_NONE, MAP_SHARED | MAP_FIXED, host_fd, (off_t)op->u.vmm.memfd_off) == MAP_FAILED)
            return -errno;
        return 0;
    case HOSTMEM_MAP_FILE: {
        /* args: st_dev, st_ino (uint64 each), then the path */
        uint64_t want[2];
        memcpy(want, op->args, sizeof(want));
        const char *path = (const char *)op->args + sizeof(want);
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0 && (errno == EACCES || errno == EROFS))
            fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return -errno;
        struct stat st;
        int rc = 0;
        if (fstat(fd, &st) < 0)
            rc = -errno;
        else if ((uint64_t)st.st_dev != want[0] || (uint64_t)st.st_ino != want[1])
            rc = -ESTALE;       /* the path names another file now */
        else if (mmap(a, n, PROT_NONE, MAP_SHARED | MAP_FIXED, fd, (off_t)op->u.vmm.memfd_off) == MAP_FAILED)
            rc = -errno;
        close(fd);
        return rc;
    }
    case HOSTMEM_ADD:
        for (unsigned i = 0; i < DEV_MAX_RANGES; i++) {
            struct dev_range *r = &dev_ranges[i];
            if (!r->bytes) {
                r->base = op->u.vmm.addr;
                r->prot = op->u.vmm.prot;
                r->opened = 0;
                r->hmm = false;
                __atomic_store_n(&r->bytes, (uint64_t)n, __ATOMIC_RELEASE);
                if (i >= dev_used)
                    __atomic_store_n(&dev_used, i + 1, __ATOMIC_RELEASE);
                return 0;
            }
        }
        return -ENOSPC;
    case HOSTMEM_REMOVE:
        /* the host drained the device: no kernel runs */
        for (unsigned i = 0; i < DEV_MAX_RANGES; i++) {
            struct dev_range *r = &dev_ranges[i];
            if (r->bytes && r->base == op->u.vmm.addr) {
                uint64_t lo = r->base, hi = r->base + r->bytes;
                bool in_window = lo >= (uintptr_t)window && hi <= (uintptr_t)window + window_bytes;
                if (in_window)
                    mprotect((void *)(uintptr_t)lo, hi - lo, PROT_NONE);
                else
                    dev_forget(lo, hi, r);
                __atomic_store_n(&r->bytes, 0, __ATOMIC_RELEASE);
                return 0;
            }
        }
        /* a registration that failed before it was added: forget what
         * was mapped for it */
        if (n && !sim_hostmem_in_window(op->u.vmm.addr))
            dev_forget(op->u.vmm.addr, op->u.vmm.addr + n, NULL);
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
static char smaps[1 << 20];

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

static bool read_host_smaps(size_t *len)
{
    char path[64] = "/proc/";
    size_t k = 6 + fmt_ulong(path + 6, (unsigned long)host_pid);
    memcpy(path + k, "/smaps", 7);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    size_t got = 0;
    ssize_t r;
    while (got < sizeof(smaps) - 1 && (r = read(fd, smaps + got, sizeof(smaps) - 1 - got)) > 0)
        got += (size_t)r;
    close(fd);
    if (got >= sizeof(smaps) - 1)
        return false;
    smaps[got] = 0;
    *len = got;
    return true;
}

static bool has_flag(const char *flags, const char *end, const char *f)
{
    for (const char *p = flags; p + 2 <= end; p++)
        if (p[0] == f[0] && p[1] == f[1] && (p == flags || p[-1] == ' ') && (p + 2 == end || p[2] == ' '))
            return true;
    return false;
}

enum { HMM_MAPPED, HMM_NOT_FILE, HMM_UFFD, HMM_FAILED };

/* Map the host mapping holding addr; one of HMM_*. */
static int hmm_discover(uintptr_t addr)
{
    size_t len;
    if (!read_host_smaps(&len))
        return HMM_FAILED;
    char *l = smaps, *end = smaps + len;
    while (l < end) {
        char *nl = memchr(l, '\n', (size_t)(end - l));
        if (!nl)
            nl = end;
        *nl = 0;
        unsigned long lo, hi, off, ino;
        unsigned maj, min;
        char perms[5];
        int path_at = 0;
        if (sscanf(l, "%lx-%lx %4s %lx %x:%x %lu %n", &lo, &hi, perms, &off, &maj, &min, &ino, &path_at) >= 7 &&
            addr >= lo && addr < hi) {
            const char *path = path_at ? l + path_at : "";
            /* this mapping's VmFlags line */
            char *f = nl + 1, *fl = NULL, *fe = NULL;
            while (f < end) {
                char *e = memchr(f, '\n', (size_t)(end - f));
                if (!e)
                    e = end;
                if (!strncmp(f, "VmFlags:", 8)) {
                    fl = f + 8;
                    fe = e;
                    break;
                }
                f = e + 1;
            }
            while (fl && fl < fe && *fl == ' ')
                fl++;
            while (fe && fe > fl && fe[-1] == ' ')
                fe--;
            if (fl && (has_flag(fl, fe, "um") || has_flag(fl, fe, "uw") || has_flag(fl, fe, "ui")))
                return HMM_UFFD;
            bool dev_node = !strncmp(path, "/dev/", 5) && strncmp(path, "/dev/shm/", 9);
            if (perms[3] != 's' || perms[0] != 'r' || ino == 0 || path[0] != '/' || strstr(path, " (deleted)") ||
                !strncmp(path, "/memfd:", 7) || !strncmp(path, "/SYSV", 5) || dev_node)
                return HMM_NOT_FILE;
            if (!sim_vmm_only_host_leftovers(lo, hi - lo))
                return HMM_FAILED;
            int fd = open(path, (perms[1] == 'w' ? O_RDWR : O_RDONLY) | O_CLOEXEC);
            if (fd < 0)
                return HMM_FAILED;
            struct stat st;
            bool same = fstat(fd, &st) == 0 && st.st_dev == makedev(maj, min) && st.st_ino == ino;
            void *m = same ? mmap((void *)lo, hi - lo, PROT_NONE, MAP_SHARED | MAP_FIXED, fd, (off_t)off) : MAP_FAILED;
            close(fd);
            if (m == MAP_FAILED)
                return HMM_FAILED;
            for (unsigned i = 0; i < DEV_MAX_RANGES; i++) {
                struct dev_range *r = &dev_ranges[i];
                if (!r->bytes) {
                    r->base = lo;
                    r->prot = perms[1] == 'w' ? PROT_READ | PROT_WRITE : PROT_READ;
                    r->opened = 0;
                    r->hmm = true;
                    __atomic_store_n(&r->bytes, (uint64_t)(hi - lo), __ATOMIC_RELEASE);
                    if (i >= dev_used)
                        __atomic_store_n(&dev_used, i + 1, __ATOMIC_RELEASE);
                    __atomic_store_n(&simgpu_hmm_active, 1, __ATOMIC_RELEASE);
                    return HMM_MAPPED;
                }
            }
            dev_forget(lo, hi, NULL);
            return HMM_FAILED;
        }
        l = nl + 1;
    }
    return HMM_NOT_FILE;
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
    if (mprotect((void *)page, pg, write ? PROT_READ | PROT_WRITE : PROT_READ) < 0)
        return false;
    __atomic_store_n(&r->opened, 1, __ATOMIC_RELAXED);
    struct sim_bus_slot t = sim_bus_reserve_access(d, write ? SIMGPU_BUS_DTOH : SIMGPU_BUS_HTOD, pg);
    sim_bus_wait_until(t.end_ns);
    return true;
}

/* No kernel runs any more: close what kernels opened. */
void sim_hostmem_device_quiesce(void)
{
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
}

/* ---- host side ---- */

/* Run one hostmem action in every device process. */
static int each_device(uint32_t action, uint64_t addr, uint64_t bytes, uint64_t off, int prot, const void *args,
                       size_t args_bytes)
{
    for (int i = 0; i < sim.ndevices; i++) {
        struct sim_device *d = &sim.dev[i];
        struct sim_op op = { .kind = SIM_OP_HOSTMEM, .stream = SIM_STREAM_CONTROL_SLOT };
        op.u.vmm.action = action;
        op.u.vmm.addr = addr;
        op.u.vmm.bytes = bytes;
        op.u.vmm.memfd_off = off;
        op.u.vmm.prot = prot;
        op.u.vmm.args_bytes = (uint32_t)args_bytes;
        if (args_bytes)
            memcpy(op.args, args, args_bytes);
        int rc = sim_control_op(d, &op);
        if (rc)
            return rc;
    }
    return 0;
}

static void undo_add(uint64_t base, uint64_t bytes)
{
    each_device(HOSTMEM_REMOVE, base, bytes, 0, 0, NULL, 0);
}

int sim_hostmem_alloc(size_t bytes, void **out)
{
    size_t len = (bytes + pg - 1) & ~(pg - 1);
    uint64_t off;
    pthread_mutex_lock(&host_lock);
    int rc = sim_alloc_get(&space, len, &off);
    pthread_mutex_unlock(&host_lock);
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
    pthread_mutex_lock(&host_lock);
    sim_alloc_put(&space, off);
    pthread_mutex_unlock(&host_lock);
    return rc;
}

void sim_hostmem_free(void *p, size_t bytes)
{
    size_t len = (bytes + pg - 1) & ~(pg - 1);
    undo_add((uintptr_t)p, 0);
    uint64_t off = (uint64_t)((unsigned char *)p - window);
    mmap(p, len, PROT_NONE, MAP_SHARED | MAP_FIXED | MAP_NORESERVE, host_fd, (off_t)off);   /* drop the pages */
    fallocate(host_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len);
    pthread_mutex_lock(&host_lock);
    sim_alloc_put(&space, off);
    pthread_mutex_unlock(&host_lock);
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

static bool is_window_vma(const struct vma *m);

/* The mappings meeting [lo, hi) (only the host window's with
 * `window_only`), in order; -ENOMEM past `cap`. */
static int read_vmas_of(uint64_t lo, uint64_t hi, struct vma *v, size_t cap, size_t *n, bool window_only)
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
        if (window_only && !is_window_vma(&m))
            continue;
        if (*n == cap) {
            rc = -ENOMEM;
            break;
        }
        v[(*n)++] = m;
    }
    fclose(f);
    return rc;
}

static int read_vmas(uint64_t lo, uint64_t hi, struct vma *v, size_t cap, size_t *n)
{
    return read_vmas_of(lo, hi, v, cap, n, false);
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

/* Move the private pages [lo, hi) into fresh window pages mapped over
 * them.  Returns 0 or -errno. */
static int move_to_window(uint64_t lo, uint64_t hi, int prot)
{
    size_t len = hi - lo;
    uint64_t off;
    pthread_mutex_lock(&host_lock);
    int rc = sim_alloc_get(&space, len, &off);
    pthread_mutex_unlock(&host_lock);
    if (rc)
        return -ENOMEM;
    unsigned char *w = window + off;
    if (mprotect(w, len, PROT_READ | PROT_WRITE) < 0) {
        rc = -errno;
        goto fail;
    }
    if (!(prot & PROT_READ))
        mprotect((void *)(uintptr_t)lo, len, prot | PROT_READ);
    memcpy(w, (const void *)(uintptr_t)lo, len);
    mprotect(w, len, PROT_NONE);
    if (mmap((void *)(uintptr_t)lo, len, prot, MAP_SHARED | MAP_FIXED, host_fd, (off_t)off) == MAP_FAILED) {
        rc = -errno;
        goto fail;
    }
    for (uint64_t i = 0; i < len / pg; i++)
        refs[off / pg + i] = (uint16_t)(prot << REF_PROT_SHIFT);
    return 0;
fail:
    pthread_mutex_lock(&host_lock);
    sim_alloc_put(&space, off);
    pthread_mutex_unlock(&host_lock);
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
    memcpy(tmp, (const void *)(uintptr_t)lo, len);
    mprotect(tmp, len, prot);
    if (mremap(tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)(uintptr_t)lo) == MAP_FAILED) {
        sim_log("cannot move %#lx-%#lx back to private memory (%s); it stays shared with the device",
                (unsigned long)lo, (unsigned long)hi, strerror(errno));
        munmap(tmp, len);
        return;
    }
    fallocate(host_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len);
    /* the allocation is freed when none of its pages is in use */
    pthread_mutex_lock(&host_lock);
    const struct sim_extent *e = sim_alloc_find(&space, off, len);
    if (e) {
        bool used = false;
        for (uint64_t p = e->off / pg; p < (e->off + e->size) / pg && !used; p++)
            used = (refs[p] & REFS_MASK) != 0;
        if (!used)
            sim_alloc_put(&space, e->off);
    }
    pthread_mutex_unlock(&host_lock);
}

static void log_refusal(const char *what, const void *p, size_t bytes, const struct vma *m)
{
    sim_log("cuMemHostRegister(%p, %zu): %s (mapping %#lx-%#lx %s %s)", p, bytes, what, (unsigned long)m->lo,
            (unsigned long)m->hi, m->perms, m->path[0] ? m->path : "[anonymous]");
}

#define MAX_VMAS 64

/* Make [p, p+bytes) reachable by kernels with `flags`
 * (CU_MEMHOSTREGISTER_*).  Returns a CUresult. */
CUresult sim_hostmem_register(void *p, size_t bytes, unsigned flags, bool *reachable)
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
        if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
            sim_log("cuMemHostRegister(%p, %zu): kernels cannot dereference this range (the device process uses "
                    "the same addresses: heap memory, or memory from before cuInit); copies work.  Memory from "
                    "cuMemHostAlloc, or mapped after cuInit, can be reached by kernels", p, bytes);
        return CUDA_SUCCESS;
    }
    if (probe)
        return probe == -EPIPE ? CUDA_ERROR_LAUNCH_FAILED : CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&host_lock);
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
            pthread_mutex_unlock(&host_lock);
            rc = move_to_window(a, b, prot_of(m->perms));
            pthread_mutex_lock(&host_lock);
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
        if (m->lo < (uintptr_t)window || m->lo >= (uintptr_t)window + window_bytes)
            rc = each_device(HOSTMEM_MAP_WINDOW, a, b - a, off, 0, NULL, 0);
    }
    pthread_mutex_unlock(&host_lock);
    if (!rc)
        rc = each_device(HOSTMEM_ADD, lo, hi - lo, 0, read_only ? PROT_READ : PROT_READ | PROT_WRITE, NULL, 0);
    if (rc) {
        sim_log("cuMemHostRegister(%p, %zu): the device cannot map the range (%s)", p, bytes, strerror(-rc));
        sim_hostmem_unregister(p, bytes);
        return rc == -ENOMEM ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_NOT_SUPPORTED;
    }
    *reachable = true;
    return CUDA_SUCCESS;
}

/* Undo sim_hostmem_register (also of a partly done one).  The caller has
 * drained the devices. */
void sim_hostmem_unregister(void *p, size_t bytes)
{
    uint64_t lo = (uintptr_t)p & ~(uint64_t)(pg - 1), hi = ((uintptr_t)p + bytes + pg - 1) & ~(uint64_t)(pg - 1);
    undo_add(lo, hi - lo);
    struct vma v[MAX_VMAS];
    size_t n;
    if (read_vmas(lo, hi, v, MAX_VMAS, &n))
        return;
    pthread_mutex_lock(&host_lock);
    for (size_t i = 0; i < n; i++) {
        const struct vma *m = &v[i];
        if (!is_window_vma(m) || (m->lo >= (uintptr_t)window && m->lo < (uintptr_t)window + window_bytes))
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
                pthread_mutex_unlock(&host_lock);
                move_back(a + run * pg, a + q * pg, off + run * pg);
                pthread_mutex_lock(&host_lock);
            }
            run = q + 1;
        }
    }
    pthread_mutex_unlock(&host_lock);
}

/* In a child forked from the host: window pages are shared with the
 * parent; give the child private copies, as it has of ordinary memory. */
static void child_after_fork(void)
{
    struct vma v[256];
    size_t n = 0;
    if (host_fd < 0)
        return;
    read_vmas_of(0, UINT64_MAX, v, 256, &n, true);
    for (size_t i = 0; i < n; i++) {
        const struct vma *m = &v[i];
        if (!is_window_vma(m) || m->perms[0] == '-')
            continue;
        size_t len = m->hi - m->lo;
        void *tmp = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (tmp == MAP_FAILED)
            continue;
        memcpy(tmp, (const void *)(uintptr_t)m->lo, len);
        mprotect(tmp, len, prot_of(m->perms));
        if (mremap(tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)(uintptr_t)m->lo) == MAP_FAILED)
            munmap(tmp, len);
    }
}

void sim_hostmem_atfork(void)
{
    pthread_atfork(NULL, NULL, child_after_fork);
}
