/* Internal interfaces of the preloaded library. Nothing here is exported:
 * libgaia.map exports exactly the interposed libc names and gaia_*. */
#ifndef GAIA_SHIM_H
#define GAIA_SHIM_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include "gaia_env.h"

/* The shim's own raw system calls (hooks_syscall.c): never through the
 * exported syscall(), which hands some numbers to the shim's hooks. */
__attribute__((visibility("hidden"))) long gaia_syscall_raw(long nr, ...);
#ifndef GAIA_SYSCALL_HOOKS
#define syscall gaia_syscall_raw
#endif

#define GAIA_PAGE 4096ul
/* The driver places a reservation where the shim asks (a vmm replica at
 * its region's own address) only when it is larger than 16 MiB and starts
 * on a 32 MiB boundary; smaller ones come out of its own chunks, whatever
 * the address asked for (seen on an H200, driver 580.159, CUDA 13.0).
 * Managed mappings are placed on such a boundary with at least this much
 * room reserved, and a vmm span is reserved at least this large. */
#define GAIA_VMM_SPAN_ALIGN (32ul << 20)
#define GAIA_VMM_SPAN_MIN (32ul << 20)
#define GAIA_HIDDEN __attribute__((visibility("hidden")))

/* --- the real libc functions (real.c), resolved once with RTLD_NEXT --- */
struct mmsghdr; /* <sys/socket.h> declares it only under _GNU_SOURCE */
#define GAIA_REAL_FUNCS(X)                                                              \
	X(mmap, void *, (void *, size_t, int, int, int, off_t))                         \
	X(munmap, int, (void *, size_t))                                                \
	X(mremap, void *, (void *, size_t, size_t, int, ...))                           \
	X(mprotect, int, (void *, size_t, int))                                         \
	X(msync, int, (void *, size_t, int))                                            \
	X(madvise, int, (void *, size_t, int))                                          \
	X(write, ssize_t, (int, const void *, size_t))                                  \
	X(pwrite64, ssize_t, (int, const void *, size_t, off_t))                        \
	X(writev, ssize_t, (int, const struct iovec *, int))                            \
	X(pwritev, ssize_t, (int, const struct iovec *, int, off_t))                    \
	X(pwritev2, ssize_t, (int, const struct iovec *, int, off_t, int))              \
	X(ftruncate64, int, (int, off_t))                                               \
	X(truncate64, int, (const char *, off_t))                                       \
	X(open64, int, (const char *, int, ...))                                        \
	X(openat64, int, (int, const char *, int, ...))                                 \
	X(__open64_2, int, (const char *, int))                                         \
	X(__openat64_2, int, (int, const char *, int))                                  \
	X(fopen64, FILE *, (const char *, const char *))                                \
	X(freopen64, FILE *, (const char *, const char *, FILE *))                      \
	X(read, ssize_t, (int, void *, size_t))                                         \
	X(pread64, ssize_t, (int, void *, size_t, off_t))                               \
	X(readv, ssize_t, (int, const struct iovec *, int))                             \
	X(preadv, ssize_t, (int, const struct iovec *, int, off_t))                     \
	X(preadv2, ssize_t, (int, const struct iovec *, int, off_t, int))                \
	X(close, int, (int))                                                            \
	X(dup2, int, (int, int))                                                        \
	X(dup3, int, (int, int, int))                                                   \
	X(fcntl, int, (int, int, ...))                                                  \
	X(fcntl64, int, (int, int, ...))                                                \
	X(send, ssize_t, (int, const void *, size_t, int))                              \
	X(sendto, ssize_t, (int, const void *, size_t, int, const struct sockaddr *, socklen_t)) \
	X(recv, ssize_t, (int, void *, size_t, int))                                    \
	X(recvfrom, ssize_t, (int, void *, size_t, int, struct sockaddr *, socklen_t *)) \
	X(sendmsg, ssize_t, (int, const struct msghdr *, int))                          \
	X(recvmsg, ssize_t, (int, struct msghdr *, int))                                \
	X(sendmmsg, int, (int, struct mmsghdr *, unsigned int, int))                     \
	X(recvmmsg, int, (int, struct mmsghdr *, unsigned int, int, struct timespec *))   \
	X(process_vm_readv, ssize_t, (pid_t, const struct iovec *, unsigned long, const struct iovec *, unsigned long, unsigned long)) \
	X(process_vm_writev, ssize_t, (pid_t, const struct iovec *, unsigned long, const struct iovec *, unsigned long, unsigned long)) \
	X(mincore, int, (void *, size_t, unsigned char *))                              \
	X(fread, size_t, (void *, size_t, size_t, FILE *))                              \
	X(fread_unlocked, size_t, (void *, size_t, size_t, FILE *))                     \
	X(fwrite, size_t, (const void *, size_t, size_t, FILE *))                       \
	X(fwrite_unlocked, size_t, (const void *, size_t, size_t, FILE *))

struct gaia_real {
#define GAIA_REAL_FIELD(name, ret, args) ret(*name) args;
	GAIA_REAL_FUNCS(GAIA_REAL_FIELD)
#undef GAIA_REAL_FIELD
};
GAIA_HIDDEN extern struct gaia_real gaia_real;
/* Resolves every real function (once; safe to call from any hook). */
GAIA_HIDDEN void gaia_real_resolve(void);
#define REAL(name) (gaia_real.name ? gaia_real.name : (gaia_real_resolve(), gaia_real.name))

/* --- ThreadSanitizer --- */
/* The driver maps device memory over ranges the program's threads use
 * (vmm: cuMemAddressReserve, cuMemMap at the mapping's own address, and
 * their undoing), which TSan takes for a write by the mapping thread,
 * racing with every later access of theirs. The bytes the program sees do
 * not change there, so around those calls this thread's accesses are
 * ignored, and a mapping made then resets the range's history instead. */
#if defined(__SANITIZE_THREAD__)
#define GAIA_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GAIA_TSAN 1
#endif
#endif
#ifdef GAIA_TSAN
void __tsan_ignore_thread_begin(void);
void __tsan_ignore_thread_end(void);
#define gaia_tsan_ignore_begin() __tsan_ignore_thread_begin()
#define gaia_tsan_ignore_end() __tsan_ignore_thread_end()
#else
#define gaia_tsan_ignore_begin() ((void)0)
#define gaia_tsan_ignore_end() ((void)0)
#endif

/* --- the shim's own descriptors (fdguard.c) --- */
/* Keeps fd from the program's close/close_range/closefrom, moving it above
 * stderr first; returns the (possibly new) descriptor, or -1. */
/* syscall(SYS_openat2) (hooks_io.c): a[0..3] are its arguments, call(a)
 * makes it; -1 with errno, or the descriptor. */
GAIA_HIDDEN long gaia_openat2(const long *a, long (*call)(const long *a));
GAIA_HIDDEN int gaia_fd_keep(int fd);
/* Stops keeping fd and closes it. */
GAIA_HIDDEN void gaia_fd_release(int fd);

/* --- which descriptors name a managed file (fdident.c) --- */
/* A mapping of (dev, ino) became managed / stopped being managed. */
GAIA_HIDDEN void fd_ident_file_managed(dev_t dev, ino_t ino);
GAIA_HIDDEN void fd_ident_file_unmanaged(dev_t dev, ino_t ino);
/* Some mapping in this process is managed: one load. */
GAIA_HIDDEN extern uint32_t fd_ident_files_managed;
static inline bool fd_ident_any_managed(void)
{
	return __atomic_load_n(&fd_ident_files_managed, __ATOMIC_ACQUIRE) != 0;
}
/* fd may name a managed file: true with its identity (compare it exactly
 * under the mapping lock; a bucket may be shared) and whether it is open
 * O_APPEND. False: no managed
 * mapping of what fd names (or fd is not open). No system call once fd's
 * number is known, and none at all while nothing is managed. */
GAIA_HIDDEN bool fd_ident_managed(int fd, dev_t *dev, ino_t *ino, bool *append);
/* The file (dev, ino) may have a managed mapping (false: it has none). */
GAIA_HIDDEN bool fd_ident_file_listed(dev_t dev, ino_t ino);
/* The number was closed or replaced. Async-signal-safe. */
GAIA_HIDDEN void fd_ident_forget(int fd);
GAIA_HIDDEN void fd_ident_forget_range(unsigned first, unsigned last);

/* --- the process (process.c) --- */
/* False in a process cloned from ours without fork() (a simulated
 * device's process): there every hook passes straight through. */
GAIA_HIDDEN bool gaia_process_is_ours(void);
/* Whether the shim's state in this memory is this process's to change:
 * gaia_process_is_ours, or a vfork() child sharing it (its writes to a
 * managed file are the file's changes the parent must learn). One load,
 * no system call, where the kernel offers MADV_WIPEONFORK. */
GAIA_HIDDEN bool gaia_state_is_ours(void);

/* --- configuration and logging (log.c) --- */
GAIA_HIDDEN const struct gaia_env *gaia_config(void);
GAIA_HIDDEN void gaia_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Logs only the first time `once` is seen set to 0 (then sets it). */
GAIA_HIDDEN void gaia_log_once(int *once, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
#define gaia_error(...) gaia_log(GAIA_LOG_ERROR, __VA_ARGS__)
#define gaia_warn(...) gaia_log(GAIA_LOG_WARN, __VA_ARGS__)
#define gaia_info(...) gaia_log(GAIA_LOG_INFO, __VA_ARGS__)
#define gaia_debug(...) gaia_log(GAIA_LOG_DEBUG, __VA_ARGS__)

/* True while this thread runs shim code that may call hooked functions. */
GAIA_HIDDEN extern __thread int gaia_in_shim __attribute__((tls_model("initial-exec")));

/* --- CPU write tracking (tracker.c) --- */
enum tracker_mode { TRACKER_NONE, TRACKER_UFFD_WP, TRACKER_SOFT_DIRTY };
GAIA_HIDDEN enum tracker_mode tracker_mode(void);
GAIA_HIDDEN const char *tracker_mode_name(enum tracker_mode mode);
/* Chooses the mechanism (GAIA_DIRTY_TRACKING) on first use. */
GAIA_HIDDEN int tracker_init(void);
/* Starts tracking [addr, addr+len): from now on, only pages written after
 * this call are reported. 0 or -errno. */
GAIA_HIDDEN int tracker_register(void *addr, size_t len);
/* Reports each run of pages of [addr, addr+len) written since the last
 * collect (or the register), as fn(first byte, end byte, arg), and starts
 * tracking afresh. In soft-dirty mode the bits are per process: callers
 * collect every registered range before tracker_rearm(). */
GAIA_HIDDEN int tracker_collect(void *addr, size_t len,
				void (*fn)(uintptr_t start, uintptr_t end, void *arg), void *arg);
/* After collecting every registered range: starts tracking afresh where
 * the mechanism needs a separate step (soft-dirty: clear_refs). */
GAIA_HIDDEN int tracker_rearm(void);
/* Forgets what was written in [addr, addr+len) (e.g. after the shim's own
 * stores, or an madvise that drops pages). */
GAIA_HIDDEN int tracker_forget(void *addr, size_t len);
/* Stops tracking [addr, addr+len): the range is no longer armed (a
 * device reaching it through HMM faults on an armed range). Nothing is
 * collected; tracker_register starts again. 0 or -errno. */
GAIA_HIDDEN int tracker_unregister(void *addr, size_t len);
/* In a forked child: the registration did not follow the fork. */
GAIA_HIDDEN int tracker_reinit_after_fork(void);

/* --- the cross-process version table of a file (sharedfile.c) --- */
struct shared_file;
struct sharedtab_cursor;
/* NULL when no table can be used (the reason is logged once). */
GAIA_HIDDEN struct shared_file *shared_file_get(int fd, dev_t dev, ino_t ino, uint64_t file_pages);
GAIA_HIDDEN void shared_file_put(struct shared_file *f);
GAIA_HIDDEN uint32_t shared_file_publish(struct shared_file *f, uint64_t file_page);
GAIA_HIDDEN uint32_t shared_file_version(struct shared_file *f, uint64_t file_page);
GAIA_HIDDEN int shared_file_changes(struct shared_file *f, struct sharedtab_cursor *cursor,
				    uint64_t first, uint64_t n,
				    void (*fn)(uint64_t page, uint32_t version, void *arg), void *arg);
GAIA_HIDDEN void shared_file_after_fork(void);


/* --- pages changed by writers not under the shim (checksum.c) --- */
struct page_sums;
GAIA_HIDDEN struct page_sums *page_sums_new(uint64_t npages);
GAIA_HIDDEN void page_sums_free(struct page_sums *s);
/* The shim stored into pages [first, first + n) (their bytes at `bytes`,
 * as in the file): their checksums become those of these bytes. */
GAIA_HIDDEN void page_sums_set(struct page_sums *s, uint64_t first, uint64_t n, const unsigned char *bytes);
/* The next look reads every page again, whatever the times say. */
GAIA_HIDDEN void page_sums_untrust(struct page_sums *s);
/* Whether page's bytes (at `bytes`) are what the last look saw (true
 * before the first). */
GAIA_HIDDEN bool page_sums_same(const struct page_sums *s, uint64_t page, const unsigned char *bytes);
/* Whether a first look was taken (page_sums_refresh succeeded once). */
GAIA_HIDDEN bool page_sums_ready(const struct page_sums *s);
/* Pages the looks so far read back from the file. */
GAIA_HIDDEN uint64_t page_sums_pages_read(const struct page_sums *s);
/* Whether the file behind fd is unchanged (times) since the last pass. */
GAIA_HIDDEN bool page_sums_current(struct page_sums *s, int fd);
/* The same for a file whose fstat gave st. */
GAIA_HIDDEN bool page_sums_current_stat(const struct page_sums *s, const struct stat *st);
/* When the file behind fd changed (mtime/ctime) since the last call:
 * re-reads the pages of [file_offset, +npages pages) for which wanted()
 * (may be NULL) says yes and calls changed() for each whose checksum
 * moved. The first call only records. Returns the pages reported, or
 * -errno (and the next call reads everything again). */
GAIA_HIDDEN int page_sums_refresh(struct page_sums *s, int fd, uint64_t file_offset,
				  bool (*wanted)(uint64_t page, void *arg),
				  void (*changed)(uint64_t page, void *arg), void *arg);

/* --- periodic release of a CPU-only process's writes (release_timer.c) --- */
GAIA_HIDDEN void release_timer_start(void);
GAIA_HIDDEN void release_timer_after_fork(void);
/* fork: the release thread's pass is not under way from before the fork
 * takes the shim's locks until the parent's or child's handler. */
GAIA_HIDDEN void release_timer_before_fork(void);
GAIA_HIDDEN void release_timer_after_fork_parent(void);

/* --- which mappings are managed, and how they start (admission.c) --- */
/* Whether an mmap with these arguments is to be managed; fills path. */
GAIA_HIDDEN bool mapping_wanted(void *caller, size_t len, int prot, int flags, int fd,
				char *path, size_t path_size);
/* Populates the pages of [addr, addr+len) that the page cache holds;
 * returns how many. */
GAIA_HIDDEN size_t mapping_populate_resident(void *addr, size_t len, int fd, uint64_t offset);
GAIA_HIDDEN bool mapping_never_writable(int flags, int fd);
/* Where a managed mapping goes when the program lets the kernel choose:
 * place.addr (NULL: let the kernel choose after all), inside a temporary
 * reservation that mapping_place_done trims once the mapping is made (or
 * frees when it failed). */
struct placement {
	void *addr;
	void *reserved;
	size_t reserved_len, len, aligned_len;
	uintptr_t pad_start; /* after mapping_place_done: reserved padding */
	size_t pad_len;
};
GAIA_HIDDEN void mapping_place(size_t len, struct placement *place);
/* While the shim asks the driver to reserve [start, start+len) (vmm), the
 * span holds a PROT_NONE placeholder of the shim's, so that no other
 * mapping lands there meanwhile; the driver's own mmap of exactly that span
 * at that address (a hint, or MAP_FIXED_NOREPLACE) is made MAP_FIXED over
 * the placeholder. _end says whether the driver's mmap came. One span at a
 * time (the caller holds the vmm move lock). */
GAIA_HIDDEN void mapping_steer_begin(uintptr_t start, size_t len);
GAIA_HIDDEN bool mapping_steer_end(void);
/* While a device replica is made or taken down, the calling thread's
 * munmap of (part of) [start, start+len) — the driver freeing its
 * reservation there — leaves a PROT_NONE placeholder in that part instead
 * of a hole another thread's mapping could take before the CPU replica is
 * moved back. mapping_hold_end: whether any munmap was turned so, and the
 * extent of the parts it covered. */
GAIA_HIDDEN void mapping_hold_begin(uintptr_t start, size_t len);
GAIA_HIDDEN bool mapping_hold_end(uintptr_t *lo, uintptr_t *hi);
GAIA_HIDDEN void mapping_place_done(struct placement *place, void *mapped);
/* Gives the padding after a placed mapping to the managed mapping at addr
 * (freed with it); unmaps it when addr is not managed. */
GAIA_HIDDEN void mapping_take_padding(void *addr, uintptr_t pad_start, size_t pad_len);
/* The program is about to map, unmap or move [addr, addr+len): padding
 * of the shim's there is given up first. */
GAIA_HIDDEN void mapping_release_padding(const void *addr, size_t len);
/* Whether [addr, addr+len) may overlap a padding (no lock taken; true
 * when unsure), and, under the mapping lock, that a padding went. */
GAIA_HIDDEN bool mapping_padding_near(const void *addr, size_t len);
GAIA_HIDDEN void mapping_padding_gone(uintptr_t start, size_t len);
GAIA_HIDDEN void mapping_describe_caller(void *caller, char *buf, size_t size);

/* --- managed mappings (mapping.c) --- */
/* Takes on a mapping the kernel just made; `caller` (may be NULL) is the
 * code address that called mmap, for the log. */
GAIA_HIDDEN void mapping_adopt(void *addr, size_t len, int prot, int flags, int fd, off_t offset,
			       const char *path, void *caller);
/* Before [addr, addr+len) goes away or changes (munmap, MAP_FIXED over it,
 * mremap): releases the CPU's writes there and forgets the range. */
GAIA_HIDDEN void mapping_forget_range(void *addr, size_t len);
GAIA_HIDDEN bool mapping_overlaps(const void *addr, size_t len);
/* [addr, addr+len) lies inside one piece of one managed mapping, mapped
 * with PROT_WRITE when need_write. */
GAIA_HIDDEN bool mapping_within_one(const void *addr, size_t len, bool need_write);
GAIA_HIDDEN int mapping_release_range(const void *addr, size_t len);
/* The CPU's acquire: learns which pages other processes published since
 * the last acquire (their versions move). -ENOENT when nothing overlaps. */
GAIA_HIDDEN int mapping_acquire_range(const void *addr, size_t len);
GAIA_HIDDEN void mapping_release_all(void);
/* At exit: the last release, then this process stops using the version
 * tables (the last user of a table removes it). */
GAIA_HIDDEN void mapping_at_exit(void);
/* Bytes [offset, offset+len) of file (dev, ino) were written with
 * write()/pwrite(): CPU writes of those pages of every mapping of it. */
GAIA_HIDDEN void mapping_file_written(dev_t dev, ino_t ino, off_t offset, size_t len);
/* Around a size change of a managed file (ftruncate, truncate): the
 * mapping lock is held, so no copy of the shim's reads or stores pages of
 * it that go (they would fault); then the pages between the old and the
 * new size count as written and the lock is let go. begin returns false,
 * taking nothing, on a thread that holds the lock or is taking it (a
 * signal handler interrupted the shim there): the change is then
 * recorded as a write is. */
GAIA_HIDDEN bool mapping_file_resize_begin(void);
GAIA_HIDDEN void mapping_file_resize_end(bool locked, dev_t dev, ino_t ino, off_t old_size, off_t new_size);
GAIA_HIDDEN bool mapping_any(void);
/* move_gate.c: the I/O hooks' calls and the vmm backing's moves keep out
 * of each other's way. io_gate_enter announces a call's user buffer (and
 * waits while a move covers it); its answer goes to io_gate_leave after
 * the call. move_gate_begin waits for the calls over the range. */
GAIA_HIDDEN int io_gate_enter(const void *buf, size_t len);
GAIA_HIDDEN void io_gate_leave(int slot);
/* The span an iovec array's buffers cover (for the gate): its length,
 * and its start in *start. */
GAIA_HIDDEN size_t iov_span(const struct iovec *iov, int iovcnt, const void **start);
GAIA_HIDDEN void move_gate_begin(uintptr_t start, size_t len);
/* A managed mapping spans [start, start + len): calls with buffers there
 * pass the gate (before mmap returns its address). */
GAIA_HIDDEN void io_gate_cover(uintptr_t start, size_t len);
GAIA_HIDDEN void move_gate_end(void);
/* The address span of every mapping managed so far (move_gate.c): a
 * buffer outside it passes no gate. */
GAIA_HIDDEN extern uintptr_t io_gate_lo, io_gate_hi;
static inline bool io_gate_may_cover(const void *buf, size_t len)
{
	uintptr_t s = (uintptr_t)buf, e = s + len < s ? UINTPTR_MAX : s + len;
	return len && s < __atomic_load_n(&io_gate_hi, __ATOMIC_ACQUIRE) &&
	       __atomic_load_n(&io_gate_lo, __ATOMIC_ACQUIRE) < e;
}
/* The gate is left when the call returns, and when the thread is
 * cancelled inside it (the shim is built with -fexceptions, so a
 * cancellation's unwinding runs the cleanup): a slot left behind would
 * hold every later move over that buffer forever. */
static inline void io_gate_cleanup(int *slot)
{
	int e = errno;
	io_gate_leave(*slot);
	errno = e;
}
#define IO_GATED(buf, len, call)                                                     \
	(!fd_ident_any_managed() || !io_gate_may_cover((buf), (len)) ? (call) : ({     \
		__attribute__((cleanup(io_gate_cleanup))) int gate_ = io_gate_enter((buf), (len)); \
		(call);                                                              \
	}))
/* What a managed mapping at addr was made from, to take over a remapped
 * range: a descriptor of its own (closed by mapping_origin_free). */
struct mapping_origin {
	int fd, prot, flags;
	/* Pages of it the program made read-only or inaccessible: which ones
	 * a remap keeps is not known, so the remapped range passes through. */
	bool marked;
	off_t offset; /* file offset of addr */
	char path[4096];
};
GAIA_HIDDEN bool mapping_origin_at(const void *addr, struct mapping_origin *out);
GAIA_HIDDEN void mapping_origin_free(struct mapping_origin *origin);
GAIA_HIDDEN int mapping_versions(const void *addr, size_t len, uint32_t *out);
GAIA_HIDDEN void mapping_before_fork(void);
GAIA_HIDDEN void mapping_after_fork(bool child);
/* The launch-wait watcher's state, reset in a fork child (gpu_mapping.c;
 * absent from builds without CUDA). */
GAIA_HIDDEN void gpu_wait_note_after_fork_child(void) __attribute__((weak));
/* gpu_front.c (weak: absent without the GPU side): the fault front's
 * thread at a fork. before: takes its lock, after the mapping lock (the
 * thread never takes that one), so that no pass of it, which allocates
 * (CUPTI's buffers), is copied half done; after: gives the lock back, or,
 * in the child, where the thread is not, starts over with nothing. */
GAIA_HIDDEN void gpu_front_before_fork(void) __attribute__((weak));
GAIA_HIDDEN void gpu_front_after_fork(bool child) __attribute__((weak));
GAIA_HIDDEN void mapping_before_discard(void *addr, size_t len);
/* Starts a detached thread of the shim's that takes no signals and returns
 * once it runs fn: 0 or pthread_create's error (process.c). */
GAIA_HIDDEN int gaia_thread_start(void *(*fn)(void *), void *arg);
/* The same in a fork child's handler (the only thread there), without
 * waiting for ever: under a sanitizer the new thread can stop in the
 * sanitizer's allocator, on a lock another thread of the parent held at
 * the fork, and the child must still go on (to its exec). Waits 100 ms at
 * most, then returns EAGAIN (the thread may start later, or never). */
GAIA_HIDDEN int gaia_thread_start_in_child(void *(*fn)(void *), void *arg);
/* mprotect is about to give [addr, addr+len) PROT_WRITE: what devices read
 * through HMM there is armed for write tracking again. mprotect returned:
 * mapping_writable_end (maybe_applied: it succeeded, or failed with ENOMEM
 * part way, and the range is taken as writable). */
GAIA_HIDDEN void mapping_before_writable(void *addr, size_t len);
GAIA_HIDDEN void mapping_writable_end(void *addr, size_t len, bool maybe_applied);
/* mprotect is about to take PROT_READ off [addr, addr+len): what devices
 * read through HMM there is left (HMM follows the CPU's protection). */
GAIA_HIDDEN void mapping_before_unreadable(void *addr, size_t len);
/* mprotect gave [addr, addr+len) PROT_WRITE. */
GAIA_HIDDEN void mapping_made_writable(void *addr, size_t len);
/* mprotect(addr, len, prot) without PROT_WRITE over managed mappings: the
 * pages are first marked so that no sync stores a device's writes there
 * (they are dropped), and unmarked if mprotect fails. mprotect's result;
 * -1 with ENOMEM when the marks cannot be had (the protection stays). */
GAIA_HIDDEN int mapping_protect_dropping_write(void *addr, size_t len, int prot);
/* Peer caching. Whether any device ever held a replica in this process
 * (hooks_read.c; a hint, read without a lock, set by gpu_peer_enable), and
 * (gpu_mapping.c; weak: absent without CUDA): serves the start of [offset, offset+len) of the file (dev, ino)
 * into buf from a device holding the current bytes of pages the page
 * cache does not hold. Returns the bytes served; when 0, *kernel_bytes
 * says how many bytes from offset the kernel should read instead. */
GAIA_HIDDEN extern bool gaia_peer_reads;
/* Before the shim places the first managed mapping of a program that uses
 * CUDA (cuda_hooks.c; weak: absent without CUDA): the driver initialised,
 * so that it can later reserve that mapping's address (it never places a
 * reservation over what was mapped when it initialised). */
GAIA_HIDDEN void gpu_before_placing(void) __attribute__((weak));
GAIA_HIDDEN size_t gpu_peer_read(const struct stat *st, void *buf, size_t len, off_t offset,
				 size_t *kernel_bytes) __attribute__((weak));
GAIA_HIDDEN void mapping_after_discard(void *addr, size_t len);
/* gaia_macquire/gaia_mrelease for a device (gpu.c; weak: absent without
 * CUDA): dev must be the calling thread's current device (-ENODEV). The
 * acquire makes dev's replicas of the managed mappings overlapping
 * [addr, addr+len) current, creating them as a launch would; the release
 * waits for the kernels launched on dev and releases every mapping dev
 * holds (its writes are found only by a diff). 0 or -errno. */
GAIA_HIDDEN int gpu_device_acquire(int dev, const void *addr, size_t len) __attribute__((weak));
GAIA_HIDDEN int gpu_device_release(int dev) __attribute__((weak));

#endif
