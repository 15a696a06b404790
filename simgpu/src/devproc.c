/*
 * devproc.c — create the simulated devices: memory, control block, and the
 * device process of each.
 *
 * Order matters (DESIGN.md §5): every shared mapping is made *before* the
 * fork, so the device process has it at the same address.  The fork is a
 * raw clone(2) with no exit signal:
 *   - no pthread_atfork handler of the application (or of a preloaded shim)
 *     runs, in either process;
 *   - the child sends no SIGCHLD, so an application's wait(-1) or SIGCHLD
 *     handler never sees or reaps it (the host reaps it with __WCLONE).
 * Only the cloning thread exists in the child; its worker threads are
 * created there (executor.c).  The child never runs atexit handlers.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim.h"

#define WINDOW_ALIGN (2ul << 20)

/* Map the memfd at a 2 MiB aligned address chosen by the kernel (so it
 * never lands on something the application or a sanitizer owns). */
static void *map_window(int fd, size_t bytes)
{
    size_t span = bytes + WINDOW_ALIGN;
    unsigned char *r = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED)
        return NULL;
    uintptr_t base = ((uintptr_t)r + WINDOW_ALIGN - 1) & ~(uintptr_t)(WINDOW_ALIGN - 1);
    void *w = mmap((void *)base, bytes, PROT_NONE, MAP_SHARED | MAP_FIXED | MAP_NORESERVE, fd, 0);
    if (w == MAP_FAILED) {
        munmap(r, span);
        return NULL;
    }
    if (base > (uintptr_t)r)
        munmap(r, base - (uintptr_t)r);
    uintptr_t end = base + bytes, rend = (uintptr_t)r + span;
    if (rend > end)
        munmap((void *)end, rend - end);
    return w;
}

/* Managed memory is limited by host memory, as with UVM: the managed
 * area is as large as the machine's RAM (at least device memory), in 2 MiB
 * chunks; sparse until touched. */
static uint64_t managed_area_bytes(uint64_t mem_bytes)
{
    long pages = sysconf(_SC_PHYS_PAGES), pg = sysconf(_SC_PAGESIZE);
    uint64_t ram = pages > 0 && pg > 0 ? (uint64_t)pages * (uint64_t)pg : 0;
    uint64_t chunk = SIM_UVM_CHUNK;
    ram &= ~(chunk - 1);
    return ram > mem_bytes ? ram : mem_bytes;
}

static int device_create(struct sim_device *d, int ordinal, uint64_t mem_bytes)
{
    memset(d, 0, sizeof(*d));
    d->ordinal = ordinal;
    d->mem_bytes = mem_bytes;
    d->managed_bytes = managed_area_bytes(mem_bytes);
    d->window_bytes = mem_bytes + d->managed_bytes;
    d->pid = -1;
    d->memfd = memfd_create("simgpu-device-memory", MFD_CLOEXEC);
    if (d->memfd < 0)
        return -errno;
    if (ftruncate(d->memfd, (off_t)d->window_bytes) < 0)
        return -errno;
    d->window = map_window(d->memfd, d->window_bytes);
    if (!d->window)
        return -errno;
    /* every managed block starts resident on the host (uvm.c) */
    if (mprotect(d->window + mem_bytes, d->managed_bytes, PROT_READ | PROT_WRITE) < 0)
        return -errno;
    d->shadow = mmap(NULL, mem_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, d->memfd, 0);
    if (d->shadow == MAP_FAILED)
        return -errno;
    d->sh = mmap(NULL, sizeof(struct sim_shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (d->sh == MAP_FAILED)
        return -errno;
    int rc = sim_shared_init(d->sh);
    if (rc)
        return rc;
    d->sh->next_seq = 1;
    d->sh->streams[SIM_STREAM_LEGACY_SLOT].in_use = 1;
    d->sh->streams[SIM_STREAM_CONTROL_SLOT].in_use = 1;
    d->sh->streams[SIM_STREAM_CONTROL_SLOT].flags = SIM_STREAM_NONBLOCKING;
    pthread_mutex_init(&d->alloc_lock, NULL);
    d->device_mem.area_bytes = mem_bytes;
    d->device_mem.align = SIM_MEM_ALIGN;
    d->managed_mem.area_bytes = d->managed_bytes;
    d->managed_mem.align = SIM_UVM_BLOCK;   /* blocks are never shared by two allocations */
    if ((rc = sim_uvm_create(d)))
        return rc;
    d->device_mem.mirror = sim_uvm_device_allocated(d);   /* bounds managed residency */
    d->ctx = (struct sim_context){ .magic = SIM_CTX_MAGIC, .ordinal = ordinal };
    return 0;
}

static int device_fork_once(struct sim_device *d)
{
    pid_t parent = getpid();
    bool on_main_thread = syscall(SYS_gettid) == parent;
    long pid = syscall(SYS_clone, 0ul, NULL, NULL, NULL, 0ul);
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        /* PR_SET_PDEATHSIG fires when the *thread* that forked exits; only
         * ask for it when that thread is the main thread.  The executor
         * also watches the parent through a pidfd, which is per process. */
        if (on_main_thread)
            prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(0);
        sim_device_main(d);
    }
    d->pid = (pid_t)pid;
    /* The child starts threads, which allocates; a malloc lock held by
     * another host thread at the moment of the clone (a sanitizer's
     * allocator, say) stops it there for ever. Such a start is abandoned. */
    for (int waited_ms = 0; !__atomic_load_n(&d->sh->device_ready, __ATOMIC_ACQUIRE); waited_ms += 2) {
        int st;
        if (waited_ms >= 5000 || waitpid(d->pid, &st, WNOHANG | __WCLONE) == d->pid) {
            kill(d->pid, SIGKILL);
            waitpid(d->pid, &st, __WCLONE);
            return -ECHILD;
        }
        usleep(2000);
    }
    return 0;
}

/* A device process that did not start is cloned again (the lock that
 * stopped it is seldom held twice in a row). */
static int device_fork(struct sim_device *d)
{
    for (int attempt = 1; attempt <= 3; attempt++) {
        __atomic_store_n(&d->sh->device_ready, 0, __ATOMIC_RELEASE);
        int rc = device_fork_once(d);
        if (rc != -ECHILD)
            return rc;
        sim_log("device %d: device process %d did not start (attempt %d of 3)", d->ordinal, (int)d->pid,
                attempt);
    }
    d->dead = true;
    return -ECHILD;
}

int sim_devices_start(void)
{
    sim_env_load(&sim.env);
    uint64_t mem_bytes = (uint64_t)sim.env.mem_mb << 20;
    sim_registry_seal();
    int arc = sim_vmm_arena_init();
    if (arc) {
        sim_log("cannot reserve the VMM address arena (%s)", strerror(-arc));
        return arc;
    }
    int hrc = sim_hostmem_init();
    if (hrc) {
        sim_log("cannot create the host memory window (%s)", strerror(-hrc));
        return hrc;
    }
    for (unsigned i = 0; i < sim.env.devices; i++) {
        struct sim_device *d = &sim.dev[i];
        int rc = device_create(d, (int)i, mem_bytes);
        if (!rc)
            rc = device_fork(d);
        if (rc) {
            sim_log("device %u: cannot start (%s)", i, strerror(-rc));
            return rc;
        }
        sim.ndevices = (int)i + 1;
    }
    int rc = sim_uvm_start_host();
    if (rc) {
        sim_log("cannot start the UVM service (%s)", strerror(-rc));
        return rc;
    }
    sim_hostmem_atfork();
    if (sim.env.stats)
        atexit(sim_stats_atexit);
    return 0;
}
