/* System calls meet no hole while a region moves (gpu_vmm.c).
 *
 * The vmm backing moves a region's CPU replica aside while the driver
 * reserves and maps device memory at its address, and back again after.
 * A user-mode access meanwhile faults and waits in gpu_vmm.c's SIGSEGV
 * handler; a system call that copies to or from the range cannot be
 * caught that way: the kernel returns EFAULT, or a short count. So the
 * calls the shim interposes that take a range of the program's memory
 * (read, write and their p/v forms; munmap, mremap, mprotect, msync,
 * madvise) pass a gate: each announces its buffer in a slot before the call and clears it
 * after; a move announces its range, waits for the calls whose buffers
 * overlap it, and a call that finds a move over its buffer waits for the
 * move to end before it starts.
 *
 * Announcing and checking follow Dekker's pattern with sequentially
 * consistent accesses on both sides: a call stores its slot then loads
 * the move; a move stores its range then loads the slots, so one of the
 * two always sees the other. Every call announces itself, before the
 * first move too: a call that skipped its slot while no move had happened
 * yet would be invisible to the first one. The one exception is a call
 * whose buffer lies outside every mapping managed so far (a process with
 * none at all included): only managed mappings move, a mapping is managed
 * (and its span covered, io_gate_cover) before mmap returns its address,
 * and a call's buffer exists before the call, so such a call has no
 * buffer in one (unless the program unmaps its own buffer under the
 * call). Moves come
 * one at a time (gpu_vmm.c serializes them).
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "shim.h"

#define GATE_SLOTS 256

/* The address span of every mapping managed so far (widened only, before
 * mmap returns the mapping's address): a call whose buffer lies outside
 * it cannot have one in a region that moves, and passes no gate. Only
 * managed mappings move; a buffer exists before the call is made. */
uintptr_t io_gate_lo = UINTPTR_MAX, io_gate_hi;

struct gate_slot {
	uintptr_t start, end; /* end == 0: free */
};

static struct gate_slot slots[GATE_SLOTS];
static uintptr_t move_start, move_end;     /* move_end == 0: none */
static int move_seq;                       /* futex: bumped when a move ends */
static int leave_seq;                      /* futex: bumped when a call leaves during a move */
static unsigned overflow;                  /* calls that found no free slot */
/* The thread that moves: what the driver does for it meanwhile (mmap,
 * munmap of the span) is not waited for. */
static __thread bool mover __attribute__((tls_model("initial-exec")));

static bool overlaps(uintptr_t a, uintptr_t b, uintptr_t s, uintptr_t e)
{
	return a < e && s < b;
}

static void futex_wait(int *word, int seen)
{
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

static void futex_wake_all(int *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

void io_gate_cover(uintptr_t start, size_t len)
{
	uintptr_t lo = __atomic_load_n(&io_gate_lo, __ATOMIC_RELAXED);
	while (start < lo && !__atomic_compare_exchange_n(&io_gate_lo, &lo, start, false, __ATOMIC_SEQ_CST,
							  __ATOMIC_RELAXED))
		;
	uintptr_t end = start + len, hi = __atomic_load_n(&io_gate_hi, __ATOMIC_RELAXED);
	while (end > hi && !__atomic_compare_exchange_n(&io_gate_hi, &hi, end, false, __ATOMIC_SEQ_CST,
							__ATOMIC_RELAXED))
		;
}

int io_gate_enter(const void *buf, size_t len)
{
	if (!len || mover || !fd_ident_any_managed())
		return -1;
	uintptr_t s = (uintptr_t)buf, e = s + len < s ? UINTPTR_MAX : s + len;
	if (!overlaps(s, e, __atomic_load_n(&io_gate_lo, __ATOMIC_ACQUIRE),
		      __atomic_load_n(&io_gate_hi, __ATOMIC_ACQUIRE)))
		return -1;
	int slot = -1;
	unsigned h = (unsigned)(((uintptr_t)&slot >> 12) % GATE_SLOTS); /* per thread, roughly */
	for (unsigned i = 0; i < GATE_SLOTS && slot < 0; i++) {
		unsigned k = (h + i) % GATE_SLOTS;
		uintptr_t zero = 0;
		if (__atomic_compare_exchange_n(&slots[k].end, &zero, e, false, __ATOMIC_SEQ_CST,
						__ATOMIC_RELAXED)) {
			__atomic_store_n(&slots[k].start, s, __ATOMIC_SEQ_CST);
			slot = (int)k;
		}
	}
	if (slot < 0) {
		slot = -2;
		__atomic_add_fetch(&overflow, 1, __ATOMIC_SEQ_CST);
	}
	for (;;) {
		int seq = __atomic_load_n(&move_seq, __ATOMIC_SEQ_CST);
		uintptr_t ms = __atomic_load_n(&move_start, __ATOMIC_SEQ_CST);
		uintptr_t me = __atomic_load_n(&move_end, __ATOMIC_SEQ_CST);
		if (!me || !overlaps(s, e, ms, me))
			return slot;
		/* A move over this buffer: step out of its way, wait, retry. */
		io_gate_leave(slot);
		futex_wait(&move_seq, seq);
		if (slot >= 0) {
			uintptr_t zero = 0;
			if (!__atomic_compare_exchange_n(&slots[slot].end, &zero, e, false,
							 __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
				return io_gate_enter(buf, len);
			__atomic_store_n(&slots[slot].start, s, __ATOMIC_SEQ_CST);
		} else {
			__atomic_add_fetch(&overflow, 1, __ATOMIC_SEQ_CST);
		}
	}
}

size_t iov_span(const struct iovec *iov, int iovcnt, const void **start)
{
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	for (int i = 0; iov && i < iovcnt; i++) {
		uintptr_t b = (uintptr_t)iov[i].iov_base;
		if (!iov[i].iov_len)
			continue;
		lo = b < lo ? b : lo;
		hi = b + iov[i].iov_len > hi ? b + iov[i].iov_len : hi;
	}
	*start = (const void *)lo;
	return hi > lo ? hi - lo : 0;
}

void io_gate_leave(int slot)
{
	if (slot >= 0) {
		__atomic_store_n(&slots[slot].start, 0, __ATOMIC_SEQ_CST);
		__atomic_store_n(&slots[slot].end, 0, __ATOMIC_SEQ_CST);
	} else if (slot == -2) {
		__atomic_sub_fetch(&overflow, 1, __ATOMIC_SEQ_CST);
	}
	if (__atomic_load_n(&move_end, __ATOMIC_SEQ_CST)) {
		__atomic_add_fetch(&leave_seq, 1, __ATOMIC_SEQ_CST);
		futex_wake_all(&leave_seq);
	}
}

/* Waits until no call in flight has a buffer over [s, e). A call that
 * found no slot counts as over every range. */
static void wait_for_calls(uintptr_t s, uintptr_t e)
{
	for (;;) {
		int seq = __atomic_load_n(&leave_seq, __ATOMIC_SEQ_CST);
		bool busy = __atomic_load_n(&overflow, __ATOMIC_SEQ_CST) != 0;
		for (unsigned k = 0; k < GATE_SLOTS && !busy; k++) {
			uintptr_t ce = __atomic_load_n(&slots[k].end, __ATOMIC_SEQ_CST);
			uintptr_t cs = __atomic_load_n(&slots[k].start, __ATOMIC_SEQ_CST);
			/* A slot being claimed has its end before its start: its
			 * owner checks the move after, and steps aside. */
			busy = ce && cs && overlaps(cs, ce, s, e);
		}
		if (!busy)
			return;
		futex_wait(&leave_seq, seq);
	}
}

void move_gate_begin(uintptr_t start, size_t len)
{
	mover = true;
	__atomic_store_n(&move_start, start, __ATOMIC_SEQ_CST);
	__atomic_store_n(&move_end, start + len, __ATOMIC_SEQ_CST);
	wait_for_calls(start, start + len);
}

void move_gate_end(void)
{
	mover = false;
	__atomic_store_n(&move_end, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&move_start, 0, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&move_seq, 1, __ATOMIC_SEQ_CST);
	futex_wake_all(&move_seq);
}
