/* The vmm backing's host side (DESIGN §3.2): device memory at a region's
 * own address, with the CPU replica — the kernel's file mapping — laid
 * back over the host side of the span. The mapping is moved aside while
 * the driver reserves and maps the span, and while it unmaps it; a
 * program thread touching the region meanwhile waits (a SIGSEGV handler
 * chained in front of whatever was there) instead of crashing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <pthread.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend_cuda.h"
#include "gpu_mapping.h"
#include "mapping_internal.h"

#define PG GAIA_PAGE

/* Reserve, map, overlay, write different bytes on each side, read them
 * back: vmm works only if the host side shows the overlay's bytes while
 * the device keeps its own. Returns NULL when it works, else why not. */
const char *gpu_vmm_probe(int device)
{
	size_t g = cuda_vmm_granularity(device);
	if (!g)
		return "the driver has no virtual memory management";
	/* A free span where a region would be placed (GAIA_VMM_SPAN_MIN on a
	 * GAIA_VMM_SPAN_ALIGN boundary): take a larger one, keep nothing. */
	size_t room = GAIA_VMM_SPAN_MIN < g ? g : GAIA_VMM_SPAN_MIN;
	size_t take = room + GAIA_VMM_SPAN_ALIGN;
	void *p = REAL(mmap)(NULL, take, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return "no address space for the probe";
	uintptr_t a = ((uintptr_t)p + GAIA_VMM_SPAN_ALIGN - 1) & ~(GAIA_VMM_SPAN_ALIGN - 1);
	REAL(munmap)(p, take);
	struct cuda_replica r;
	if (cuda_replica_create(&r, GAIA_BACKING_VMM, device, a, g, false, a, g, room))
		return "the driver did not map device memory at the requested address";
	const char *why = NULL;
	void *over = REAL(mmap)((void *)a, PG, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	static uint8_t host_view[GAIA_PAGE];
	if (over == MAP_FAILED) {
		why = "host memory cannot be laid over the device range";
	} else {
		memset(over, 0xaa, PG);
		if (cuda_replica_fill(&r, 0x55) ||
		    cuda_device_ops.download(&r, DEVICE_REPLICA, 0, 1, host_view))
			why = "copies to and from the overlaid range fail";
		else if (((uint8_t *)over)[0] != 0xaa || ((uint8_t *)over)[PG - 1] != 0xaa)
			why = "the device's bytes show through the host overlay";
		else if (host_view[0] != 0x55 || host_view[PG - 1] != 0x55)
			why = "the device copy does not keep its own bytes under the overlay";
	}
	cuda_replica_destroy(&r);
	/* The driver gave the span back; nothing of the probe stays mapped. */
	return why;
}

/* While the CPU replica of a region is moved aside (vmm setup and
 * teardown), a program thread touching it would fault on an empty range.
 * A SIGSEGV handler, installed at the first move and chained to whatever
 * was there before, makes such a thread wait for the move to end and
 * retry; every other fault goes to the previous handler.
 * A thread that faulted during a move may reach the handler only after the
 * move ended (it was preempted in between): a fault in the range of the
 * last move is retried once more, and only when the same thread faults
 * again at the same address with no move ended since is it the program's. */
static uintptr_t moving_start, moving_end; /* atomics: read by the handler */
static volatile int moving; /* futex word: 1 while a move is under way */
static uintptr_t moved_start, moved_end; /* atomics: the last move's range */
static unsigned moves_ended;             /* atomic */
static __thread uintptr_t retried_addr __attribute__((tls_model("initial-exec")));
static __thread unsigned retried_after __attribute__((tls_model("initial-exec")));
static struct sigaction previous_segv;

/* What the kernel would have done with the signal had the shim's handler
 * not been there: the previous handler, run with its own mask (and the
 * signal itself blocked unless it asked SA_NODEFER) and reset first when it
 * asked SA_RESETHAND; or the default action, for a fault (the access
 * repeats with the default in place) as for a signal sent with kill, raise
 * or sigqueue (si_code <= 0: sent again, as nothing repeats it). An ignored
 * SIGSEGV is ignored when sent, and kills when it is a fault, as the
 * kernel does. */
static void chain_segv(int sig, siginfo_t *info, void *ctx)
{
	struct sigaction prev = previous_segv;
	bool sent = info->si_code <= 0;
	if (prev.sa_handler == SIG_IGN && sent)
		return;
	if (prev.sa_handler == SIG_DFL || prev.sa_handler == SIG_IGN) {
		signal(sig, SIG_DFL);
		if (sent) {
			sigset_t only;
			sigemptyset(&only);
			sigaddset(&only, sig);
			pthread_sigmask(SIG_UNBLOCK, &only, NULL);
			raise(sig);
		}
		return;
	}
	if (prev.sa_flags & SA_RESETHAND) {
		previous_segv.sa_handler = SIG_DFL;
		previous_segv.sa_flags = 0;
	}
	sigset_t mask = prev.sa_mask, old;
	if (!(prev.sa_flags & SA_NODEFER))
		sigaddset(&mask, sig);
	pthread_sigmask(SIG_BLOCK, &mask, &old);
	if (prev.sa_flags & SA_SIGINFO)
		prev.sa_sigaction(sig, info, ctx);
	else
		prev.sa_handler(sig);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void on_segv(int sig, siginfo_t *info, void *ctx)
{
	uintptr_t a = (uintptr_t)info->si_addr;
	if (info->si_code <= 0) {
		chain_segv(sig, info, ctx); /* sent, not a fault: never a move's */
		return;
	}
	if (__atomic_load_n(&moving, __ATOMIC_ACQUIRE) && a >= __atomic_load_n(&moving_start, __ATOMIC_RELAXED) &&
	    a < __atomic_load_n(&moving_end, __ATOMIC_RELAXED)) {
		while (__atomic_load_n(&moving, __ATOMIC_ACQUIRE))
			syscall(SYS_futex, &moving, FUTEX_WAIT, 1, NULL, NULL, 0);
		return; /* the access is retried on the range as it is now */
	}
	unsigned ended = __atomic_load_n(&moves_ended, __ATOMIC_ACQUIRE);
	if (ended && a >= __atomic_load_n(&moved_start, __ATOMIC_RELAXED) &&
	    a < __atomic_load_n(&moved_end, __ATOMIC_RELAXED) && !(retried_addr == a && retried_after == ended)) {
		retried_addr = a;
		retried_after = ended;
		return; /* a fault from a move that has ended: retried once */
	}
	chain_segv(sig, info, ctx);
}

/* One move at a time: the handler and the I/O gate know one range. Two
 * threads may move two regions at once (a launch and an munmap). */
static pthread_mutex_t move_lock = PTHREAD_MUTEX_INITIALIZER;

void gpu_vmm_guard_begin(uintptr_t start, size_t len)
{
	pthread_mutex_lock(&move_lock);
	static bool installed;
	if (!installed) {
		struct sigaction sa = {0};
		sa.sa_sigaction = on_segv;
		/* On the alternate stack where the thread has one: a program
		 * that catches its own stack overflow there still does. */
		sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_NODEFER | SA_ONSTACK;
		sigemptyset(&sa.sa_mask);
		installed = sigaction(SIGSEGV, &sa, &previous_segv) == 0;
	}
	__atomic_store_n(&moving_start, start, __ATOMIC_RELAXED);
	__atomic_store_n(&moving_end, start + len, __ATOMIC_RELAXED);
	__atomic_store_n(&moving, 1, __ATOMIC_RELEASE);
	move_gate_begin(start, len);
	gaia_debug("moving %zu bytes at %#lx (thread %ld)", len, (unsigned long)start, (long)syscall(SYS_gettid));
}

void gpu_vmm_guard_end(void)
{
	gaia_debug("move of %#lx ended", (unsigned long)__atomic_load_n(&moving_start, __ATOMIC_RELAXED));
	move_gate_end();
	__atomic_store_n(&moved_start, __atomic_load_n(&moving_start, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
	__atomic_store_n(&moved_end, __atomic_load_n(&moving_end, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
	__atomic_add_fetch(&moves_ended, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&moving, 0, __ATOMIC_RELEASE);
	syscall(SYS_futex, &moving, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
	pthread_mutex_unlock(&move_lock);
}

/* The kernel's mapping areas over [addr, addr+len) and their protections,
 * from /proc/self/maps (the shim's own record is what the program asked at
 * mmap; an mprotect of part of the range since splits it): each area is
 * moved on its own (mremap moves within one area, and areas that differ
 * in more than protection stay apart when sealed). 0, -EFAULT where part of the range is not mapped, -E2BIG
 * past GAIA_SEAL_PARTS parts, or -errno when the file cannot be read. */
/* /proc/self/maps, opened at the first seal and kept (a high descriptor):
 * a teardown in a program that has used every descriptor since still
 * reads it. Reopened in a child (/proc/self named the parent). Seals run
 * one at a time (move_lock). */
static int maps_fd = -1;
static pid_t maps_pid;

static int maps_descriptor(void)
{
	pid_t me = getpid();
	if (maps_fd >= 0 && maps_pid != me) {
		gaia_fd_release(maps_fd);
		maps_fd = -1;
	}
	if (maps_fd < 0) {
		maps_fd = gaia_fd_keep((int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC));
		maps_pid = me;
	}
	return maps_fd;
}

static int read_protections(uintptr_t addr, size_t len, struct vmm_seal *s)
{
	int fd = maps_descriptor();
	if (fd < 0)
		return -errno;
	if (lseek(fd, 0, SEEK_SET) != 0)
		return -errno;
	char buf[4096], line[256];
	size_t used = 0;
	int rc = 0;
	uintptr_t covered = addr, end = addr + len;
	bool skipping = false; /* the rest of a line longer than line[] */
	for (ssize_t n; !rc && covered < end && (n = REAL(read)(fd, buf, sizeof(buf))) > 0;) {
		for (ssize_t i = 0; i < n && !rc && covered < end; i++) {
			if (buf[i] != '\n') {
				if (!skipping && used < sizeof(line) - 1)
					line[used++] = buf[i];
				else
					skipping = true;
				continue;
			}
			line[used] = 0;
			used = 0;
			skipping = false;
			unsigned long lo, hi;
			char perms[5];
			if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) != 3 || hi <= covered || lo >= end)
				continue;
			if (lo > covered) {
				rc = -EFAULT; /* a hole */
				break;
			}
			int prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
				   (perms[2] == 'x' ? PROT_EXEC : 0);
			uintptr_t top = hi < end ? hi : end;
			if (s->n == GAIA_SEAL_PARTS) {
				rc = -E2BIG;
				break;
			} else {
				s->part[s->n].off = covered - addr;
				s->part[s->n].len = top - covered;
				s->part[s->n].prot = prot;
				s->n++;
			}
			covered = top;
		}
	}
	return rc ? rc : covered < end ? -EFAULT : 0;
}

/* Makes [addr, addr+len) of the CPU replica inaccessible before a move
 * (a thread touching it waits in the guard; no store lands between the
 * collection of written pages, which still sees them, and the move), and
 * records its protections in *s for gpu_vmm_unseal and gpu_vmm_move_back.
 * Returns 0 or -errno (the range untouched). */
int gpu_vmm_seal(uintptr_t addr, size_t len, struct vmm_seal *s)
{
	memset(s, 0, sizeof(*s));
	s->start = addr;
	s->len = len;
	int rc = read_protections(addr, len, s);
	if (rc) {
		gaia_debug("cannot move %zu bytes at %#lx aside: %s", len, (unsigned long)addr,
			   rc == -EFAULT ? "part of it is not mapped"
			   : rc == -E2BIG ? "more runs of protections than a move keeps"
					  : strerror(-rc));
		return rc;
	}
	if (REAL(mprotect)((void *)addr, len, PROT_NONE) != 0) {
		rc = -errno;
		gaia_debug("cannot move %zu bytes at %#lx aside: mprotect: %s", len, (unsigned long)addr,
			   strerror(-rc));
		gpu_vmm_unseal(s); /* a part it did change */
		return rc;
	}
	return 0;
}

/* Gives the sealed range its protections back, where it is. */
int gpu_vmm_unseal(const struct vmm_seal *s)
{
	int rc = 0;
	for (unsigned i = 0; i < s->n; i++)
		if (REAL(mprotect)((void *)(s->start + s->part[i].off), s->part[i].len, s->part[i].prot) != 0 && !rc)
			rc = -errno;
	return rc;
}

/* Whether mremap takes MREMAP_DONTUNMAP for a shared file mapping (Linux
 * 5.13 and later), asked once of a one-page mapping of a memfd: a kernel
 * before 5.7 refuses the flag before anything else, one before 5.13 after
 * unmapping the target, so a failed move cannot be retried safely. */
static bool dontunmap_works(void)
{
	static int known; /* 0 not asked, 1 works, -1 does not */
	int k = __atomic_load_n(&known, __ATOMIC_ACQUIRE);
	if (k)
		return k > 0;
	bool works = false;
	int fd = (int)syscall(SYS_memfd_create, "gaia-dontunmap-probe", MFD_CLOEXEC);
	if (fd >= 0 && syscall(SYS_ftruncate, fd, PG) == 0) {
		/* As a move does it: to a spot of the shim's (some kernels
		 * take the flag only with MREMAP_FIXED). */
		void *p = REAL(mmap)(NULL, PG, PROT_NONE, MAP_SHARED, fd, 0);
		void *spot = REAL(mmap)(NULL, PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p != MAP_FAILED && spot != MAP_FAILED) {
			void *q = REAL(mremap)(p, PG, PG, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, spot);
			works = q == spot;
		}
		if (spot != MAP_FAILED)
			REAL(munmap)(spot, PG);
		if (p != MAP_FAILED)
			REAL(munmap)(p, PG);
	}
	if (fd >= 0)
		REAL(close)(fd);
	if (!works)
		gaia_info("mremap refuses MREMAP_DONTUNMAP for file mappings (Linux before 5.13): a region "
			  "moved for the vmm backing leaves its range free for a moment");
	__atomic_store_n(&known, works ? 1 : -1, __ATOMIC_RELEASE);
	return works;
}

/* Moves [addr, addr+len) of the CPU replica, sealed, to a temporary place
 * (the kernel keeps the pages and the file behind them) outside [avoid,
 * avoid+avoid_len), the span the driver is about to reserve: a spot the
 * kernel picks inside it (the padding, a gap below an unaligned region)
 * would make that reservation fail. Returns the new address (PROT_NONE
 * until gpu_vmm_move_back gives its protection back) or NULL (the range
 * left where it was, sealed).
 *
 * The range is never free meanwhile: it is moved with MREMAP_DONTUNMAP
 * (the old range stays mapped, empty) and a PROT_NONE placeholder
 * replaces what is left there. Were it free for a moment, any mapping
 * made then — glibc's, by the system call itself, for a thread stack or
 * a malloc arena, which the shim never sees — could land in it: the
 * driver's reservation would then fail, and moving the replica back over
 * it would destroy that mapping. Where the kernel refuses the flag for
 * file mappings (before 5.13: dontunmap_works) the range is free between
 * the move and the placeholder, and *placeheld says whether the
 * placeholder got it.
 * The caller collected the written pages after sealing: the move drops
 * the userfaultfd registration. */
static void *gpu_vmm_move_aside(uintptr_t addr, size_t len, uintptr_t avoid, size_t avoid_len, bool *placeheld)
{
	*placeheld = false;
	/* Room for the move and twice the span to avoid: wherever the kernel
	 * puts it, one of its two ends lies outside the span by len or more.
	 * The rest is given back once the spot is taken. */
	size_t room = avoid_len ? avoid_len + 2 * len : len;
	void *t = REAL(mmap)(NULL, room, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (t == MAP_FAILED) {
		gaia_debug("no room to move %zu bytes aside: %s", len, strerror(errno));
		return NULL;
	}
	uintptr_t r = (uintptr_t)t, spot = r;
	if (avoid_len) {
		uintptr_t left_end = avoid < r ? r : avoid < r + room ? avoid : r + room;
		uintptr_t right = avoid + avoid_len > r ? avoid + avoid_len : r;
		spot = left_end - r >= len ? r : right;
		if (spot < r || spot + len > r + room) {
			REAL(munmap)(t, room);
			errno = EADDRINUSE;
			return NULL;
		}
		if (spot > r)
			REAL(munmap)(t, spot - r);
		if (spot + len < r + room)
			REAL(munmap)((void *)(spot + len), r + room - (spot + len));
	}
	bool left = dontunmap_works(); /* an empty mapping stays where it was */
	void *moved = REAL(mremap)((void *)addr, len, len,
				   MREMAP_MAYMOVE | MREMAP_FIXED | (left ? MREMAP_DONTUNMAP : 0), (void *)spot);
	if (moved == MAP_FAILED) {
		/* Whether the spot is still the shim's cannot be told (the
		 * call may have unmapped it before failing, and another
		 * thread's mapping may be there now): it is left as it is. */
		int err = errno;
		gaia_debug("cannot move %zu bytes at %#lx aside: %s", len, (unsigned long)addr, strerror(err));
		errno = err;
		return NULL;
	}
	/* Over what the move left; without the flag, into the hole unless
	 * something took it meanwhile. */
	void *ph = REAL(mmap)((void *)addr, len, PROT_NONE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (left ? MAP_FIXED : MAP_FIXED_NOREPLACE),
			      -1, 0);
	if (ph == MAP_FAILED || ph != (void *)addr) {
		gaia_debug("no placeholder where %zu bytes at %#lx were: %s", len, (unsigned long)addr,
			   ph == MAP_FAILED ? strerror(errno) : "placed elsewhere");
		if (ph != MAP_FAILED)
			REAL(munmap)(ph, len);
	} else {
		*placeheld = true;
	}
	return moved;
}

/* Moves every part of a sealed range aside (gpu_vmm_move_aside), outside
 * [avoid, avoid+avoid_len). Returns 0, with *placeheld whether every
 * placeholder got its range, or -errno with nothing moved (the range
 * still sealed where it was). */
int gpu_vmm_move_all_aside(struct vmm_seal *s, uintptr_t avoid, size_t avoid_len, bool *placeheld)
{
	*placeheld = true;
	for (unsigned i = 0; i < s->n; i++) {
		bool held;
		s->aside[i] = gpu_vmm_move_aside(s->start + s->part[i].off, s->part[i].len, avoid, avoid_len, &held);
		*placeheld &= held;
		if (s->aside[i])
			continue;
		int err = errno ? errno : ENOMEM;
		while (i-- > 0) {
			uintptr_t at = s->start + s->part[i].off;
			if (REAL(mremap)(s->aside[i], s->part[i].len, s->part[i].len, MREMAP_MAYMOVE | MREMAP_FIXED,
					 (void *)at) == MAP_FAILED)
				gaia_error("cannot put %zu bytes back at %#lx (they are at %p now): %s", s->part[i].len,
					   (unsigned long)at, s->aside[i], strerror(errno));
			s->aside[i] = NULL;
		}
		return -err;
	}
	return 0;
}

/* Puts every part moved aside back and gives the range its protections
 * and its write tracking again. Returns 0, or -errno when a part could
 * not come back (it stays where it was moved, logged; the others are
 * back). */
int gpu_vmm_move_back(struct gaia_mapping *m, const struct vmm_seal *seal)
{
	int rc = 0;
	for (unsigned i = 0; i < seal->n; i++) {
		uintptr_t at = seal->start + seal->part[i].off;
		if (!seal->aside[i])
			continue;
		if (REAL(mremap)(seal->aside[i], seal->part[i].len, seal->part[i].len, MREMAP_MAYMOVE | MREMAP_FIXED,
				 (void *)at) == MAP_FAILED) {
			rc = -errno;
			gaia_error("cannot put the mapping of %s back at %#lx (it is at %p now): %s", m->path,
				   (unsigned long)at, seal->aside[i], strerror(-rc));
		}
	}
	gpu_vmm_rearm(m, seal);
	return rc;
}

/* The range where it was: its protections and its write tracking back
 * (a move drops the registration). Failures are logged. */
void gpu_vmm_rearm(struct gaia_mapping *m, const struct vmm_seal *seal)
{
	int unsealed = gpu_vmm_unseal(seal);
	if (unsealed)
		gaia_error("cannot give the mapping of %s at %#lx its protection back after moving it: %s",
			   m->path, (unsigned long)seal->start, strerror(-unsealed));
	REAL(madvise)((void *)seal->start, seal->len, MADV_NOHUGEPAGE);
	int tracked = m->tracked ? tracker_register((void *)seal->start, seal->len) : 0;
	if (tracked)
		gaia_error("cannot track writes to %s again after moving it: %s", m->path,
			   strerror(-tracked));
}

/* Maps a PROT_NONE placeholder over [lo, hi) if all of it is free: true
 * (*out the placeholder, NULL for an empty range), or false. */
static bool hold_free(uintptr_t lo, uintptr_t hi, void **out)
{
	*out = NULL;
	if (lo >= hi)
		return true;
	void *p = REAL(mmap)((void *)lo, hi - lo, PROT_NONE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
	if (p == MAP_FAILED)
		return false;
	if (p != (void *)lo) {
		REAL(munmap)(p, hi - lo); /* a kernel that took it as a hint */
		return false;
	}
	*out = p;
	return true;
}

/* Ends mapping_hold_begin's hold of m's range: where the driver unmapped
 * it, placeholders stand in the parts no live piece of m was moved back
 * over (the pieces the program unmapped); they go, as the driver meant. */
void gpu_vmm_hold_end(struct gaia_mapping *m)
{
	uintptr_t lo, hi;
	if (!mapping_hold_end(&lo, &hi))
		return;
	const struct range_set *live = &m->engine.live;
	uintptr_t at = lo;
	for (size_t i = 0; i <= live->count; i++) {
		uintptr_t next = i < live->count ? m->start + live->items[i].first * PG : hi;
		uintptr_t after = i < live->count ? m->start + live->items[i].end * PG : hi;
		if (next > hi)
			next = hi;
		if (next > at)
			REAL(munmap)((void *)at, next - at);
		if (after > at)
			at = after;
	}
}

void gpu_vmm_keep_room(struct gaia_mapping *m, uintptr_t hi)
{
	uintptr_t lo = (m->start + m->len + PG - 1) & ~(uintptr_t)(PG - 1);
	void *held;
	if (m->pad_len || hi <= lo || !hold_free(lo, hi, &held))
		return; /* a padding already, or something there: the next reservation may fail, and says why */
	mapping_padding_kept(m, lo, hi - lo);
}

/* vmm: device memory at the region's own address. The CPU replica is
 * moved aside, the span reserved at that address, and the CPU replica
 * moved back over the host side (DESIGN §3.2). */
int gpu_vmm_refused(const struct gaia_mapping *m)
{
	for (int d = 0; d < TSVT_MAX_DEVICES; d++) {
		const struct cuda_replica *o = m->replicas[d];
		if (o && o->backing == GAIA_BACKING_VMM)
			return -EADDRINUSE; /* one address holds one device's memory */
	}
	if (!gpu_mapping_whole(m))
		return -EINVAL; /* partly unmapped: the holes may hold other mappings */
	return 0;
}

int gpu_vmm_create(struct gaia_mapping *m, struct cuda_replica *r, int dev)
{
	int refused = gpu_vmm_refused(m);
	if (refused)
		return refused;
	size_t g = cuda_vmm_granularity(dev);
	if (!g)
		return -ENOTSUP;
	uintptr_t span_start = m->start & ~(g - 1);
	size_t span_len = ((m->start + m->len + g - 1) & ~(g - 1)) - span_start;
	/* The reservation: the placement's room after the region too, and
	 * never less than the driver places where asked. Past the room (a
	 * region the program placed itself) the addresses may be taken: the
	 * reservation then fails and the replica goes to managed memory. */
	size_t reserve_len = span_len;
	if (m->pad_len && m->pad_start + m->pad_len > span_start + reserve_len)
		reserve_len = ((m->pad_start + m->pad_len + g - 1) & ~(g - 1)) - span_start;
	if (reserve_len < GAIA_VMM_SPAN_MIN)
		reserve_len = (GAIA_VMM_SPAN_MIN + g - 1) & ~(g - 1);
	gpu_vmm_guard_begin(m->start, m->len);
	struct vmm_seal seal;
	int sealed = gpu_vmm_seal(m->start, m->len, &seal);
	if (sealed) {
		gpu_vmm_guard_end();
		return sealed;
	}
	mapping_collect_locked(m);
	bool placeheld;
	int moved = gpu_vmm_move_all_aside(&seal, span_start, reserve_len, &placeheld);
	if (moved) {
		gpu_vmm_rearm(m, &seal);
		gpu_vmm_guard_end();
		return moved;
	}
	/* The span is held until the driver maps its reservation there: the
	 * driver's own mappings made meanwhile (it allocates as it reserves)
	 * would otherwise land in it. The region's place (the placeholder the
	 * move left) and its padding are the shim's already; the rest (below
	 * a region not on a boundary, past the padding) is taken where free,
	 * and anything there makes the reservation fail, as it would. */
	uintptr_t own_end = m->start + m->len, span_end = span_start + reserve_len;
	if (m->pad_len && m->pad_start == own_end)
		own_end += m->pad_len;
	void *below = NULL, *above = NULL;
	bool held = placeheld && hold_free(span_start, m->start, &below) && hold_free(own_end, span_end, &above);
	mapping_steer_begin(span_start, reserve_len);
	mapping_hold_begin(m->start, m->len);
	gaia_tsan_ignore_begin();
	int rc = !held ? -EADDRINUSE
		       : cuda_replica_create(r, GAIA_BACKING_VMM, dev, m->start, m->len, m->exec.writable,
					     span_start, span_len, reserve_len);
	gaia_tsan_ignore_end();
	bool taken = mapping_steer_end();
	if ((taken || !rc) && m->pad_len) {
		mapping_padding_gone(m->pad_start, m->pad_len);
		m->pad_len = 0; /* the driver's reservation is where the padding was */
	}
	if (rc && !taken) {
		/* Still the shim's placeholders: the padding stays one. */
		if (below)
			REAL(munmap)(below, m->start - span_start);
		if (above)
			REAL(munmap)(above, span_end - own_end);
	}
	int back = gpu_vmm_move_back(m, &seal);
	if (back && !rc) {
		/* Part of the mapping is not back: destroying the replica now
		 * would take the parts that are with it. It stays (logged). */
		gaia_error("%s: part of the mapping stays where it was moved; its device copy stays too",
			   m->path);
	}
	gpu_vmm_hold_end(m);
	gpu_vmm_guard_end();
	return rc;
}
