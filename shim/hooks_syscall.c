/* System calls made without their libc functions, and the other calls
 * that copy to or from the program's memory.
 *
 * A program (or a library in it) that calls syscall(SYS_pwrite64, ...)
 * must meet the shim as pwrite() does: its bytes recorded as a write of a
 * managed file, its buffer kept out of the way of a vmm move (move_gate.c),
 * a munmap of a region seen. So syscall() sends the numbers the shim
 * interposes to the shim's own function of that name, gates the other
 * numbers that take a user buffer (sockets, getrandom, mincore), and makes
 * every other call to the next syscall() (libc's). The shim's own calls
 * go to gaia_syscall_raw (shim.h makes its syscall() that), never to these
 * hooks.
 *
 * send/recv and their to/from/msg/mmsg forms, process_vm_readv/writev
 * and mincore take the gate as read() and write() do (README, "Known
 * limits (GPU side)"). io_uring and code that issues the syscall
 * instruction itself are not seen.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio_ext.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define GAIA_SYSCALL_HOOKS /* this file defines syscall() */
#include "shim.h"

#define GAIA_EXPORT __attribute__((visibility("default")))

#if !defined(__x86_64__)
#error "hooks_syscall.c: the raw system call is written for x86-64"
#endif

static long raw_syscall(long nr, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

/* libc's convention: -1 and errno for a result in [-4095, -1]. */
static long as_libc(long ret)
{
	if (ret < 0 && ret > -4096) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}

/* The next syscall() after the shim's (libc's, or an interposer's loaded
 * after it), resolved on first use; the instruction itself until then and
 * if there is none. */
typedef long (*syscall_fn)(long, ...);
static syscall_fn next_syscall(void)
{
	static syscall_fn next;
	static int resolved;
	if (!__atomic_load_n(&resolved, __ATOMIC_ACQUIRE)) {
		static __thread bool resolving;
		if (resolving)
			return NULL;
		resolving = true;
		syscall_fn f = (syscall_fn)dlsym(RTLD_NEXT, "syscall");
		resolving = false;
		__atomic_store_n(&next, f, __ATOMIC_RELAXED);
		__atomic_store_n(&resolved, 1, __ATOMIC_RELEASE);
	}
	return __atomic_load_n(&next, __ATOMIC_RELAXED);
}

/* Resolved before any lock of the shim's is held or a signal arrives
 * (dlsym is neither async-signal-safe nor lock-free). */
__attribute__((constructor)) static void resolve_next_syscall(void)
{
	(void)next_syscall();
}

static long forward(long nr, const long *a)
{
	syscall_fn f = next_syscall();
	if (f)
		return f(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	return as_libc(raw_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]));
}

static long forward_openat2(const long *a)
{
	return forward(SYS_openat2, a);
}

/* syscall()'s six argument registers, whatever the number takes. */
#define TAKE_ARGS(a, nr)                          \
	long a[6];                                \
	do {                                      \
		va_list ap_;                      \
		va_start(ap_, nr);                \
		for (int i_ = 0; i_ < 6; i_++)    \
			a[i_] = va_arg(ap_, long); \
		va_end(ap_);                      \
	} while (0)

long gaia_syscall_raw(long nr, ...)
{
	TAKE_ARGS(a, nr);
	return forward(nr, a);
}

/* The buffers of a call that lie in managed mappings, as one range (the
 * gate knows one): buffers in no mapping are left out, so a call parked
 * on them (a recvmsg whose control buffer is on the stack) never holds a
 * move up. */
struct mapped_span {
	uintptr_t lo, hi;
};

static void span_add(struct mapped_span *s, const void *p, size_t n)
{
	if (!p || !n || !mapping_overlaps(p, n))
		return;
	uintptr_t a = (uintptr_t)p, b = a + n;
	if (s->hi <= s->lo || a < s->lo)
		s->lo = a;
	if (b > s->hi)
		s->hi = b;
}

static void span_add_iov(struct mapped_span *s, const struct iovec *iov, size_t n)
{
	for (size_t i = 0; iov && i < n; i++)
		span_add(s, iov[i].iov_base, iov[i].iov_len);
}

static void span_add_msg(struct mapped_span *s, const struct msghdr *m)
{
	if (!m)
		return;
	span_add_iov(s, m->msg_iov, m->msg_iovlen);
	span_add(s, m->msg_name, m->msg_namelen);
	span_add(s, m->msg_control, m->msg_controllen);
}

static size_t span_of(const struct mapped_span *s, const void **buf)
{
	*buf = (const void *)s->lo;
	return s->hi > s->lo ? s->hi - s->lo : 0;
}

static size_t msg_buffers(const struct msghdr *m, const void **buf)
{
	struct mapped_span s = {0, 0};
	span_add_msg(&s, m);
	return span_of(&s, buf);
}

static size_t mmsg_buffers(const struct mmsghdr *v, unsigned n, const void **buf)
{
	struct mapped_span s = {0, 0};
	for (unsigned i = 0; v && i < n; i++)
		span_add_msg(&s, &v[i].msg_hdr);
	return span_of(&s, buf);
}

/* process_vm_*: the local buffers, and the remote ones when the process is
 * this one. */
static size_t vm_buffers(pid_t pid, const struct iovec *local, unsigned long nlocal, const struct iovec *remote,
			 unsigned long nremote, const void **buf)
{
	struct mapped_span s = {0, 0};
	span_add_iov(&s, local, nlocal);
	if (pid == getpid())
		span_add_iov(&s, remote, nremote);
	return span_of(&s, buf);
}

/* The user buffer a call copies to or from (the first, for the socket
 * calls with two), or 0 bytes. */
static size_t user_buffer(long nr, const long *a, const void **buf)
{
	switch (nr) {
	case SYS_sendto:
	case SYS_recvfrom:
	case SYS_getrandom:
		*buf = (const void *)a[nr == SYS_getrandom ? 0 : 1];
		return (size_t)a[nr == SYS_getrandom ? 1 : 2];
	case SYS_sendmsg:
	case SYS_recvmsg:
		return msg_buffers((const struct msghdr *)a[1], buf);
	case SYS_sendmmsg:
	case SYS_recvmmsg:
		return mmsg_buffers((const struct mmsghdr *)a[1], (unsigned)a[2], buf);
	case SYS_process_vm_readv:
	case SYS_process_vm_writev:
		return vm_buffers((pid_t)a[0], (const struct iovec *)a[1], (unsigned long)a[2],
				  (const struct iovec *)a[3], (unsigned long)a[4], buf);
	case SYS_mincore:
		*buf = (const void *)a[0];
		return (size_t)a[1];
	default:
		return 0;
	}
}

static long route(long nr, const long *a);

GAIA_EXPORT long syscall(long nr, ...)
{
	TAKE_ARGS(a, nr);

	/* A hook's real function may itself be built on syscall() (an
	 * interposer loaded after the shim: tcmalloc's mmap is): inside a
	 * routed call, a number goes to the kernel, or the two would call
	 * each other for ever. */
	static __thread int routing __attribute__((tls_model("initial-exec")));
	if (routing)
		return forward(nr, a);
	routing++;
	long r = route(nr, a);
	routing--;
	return r;
}

/* The numbers the shim interposes go to its functions; the others that
 * take a user buffer pass the gate. */
static long route(long nr, const long *a)
{
	/* Offsets are one register on x86-64: preadv's and pwritev's high
	 * halves (a[4]) are not used. */
	switch (nr) {
	case SYS_read:
		return read((int)a[0], (void *)a[1], (size_t)a[2]);
	case SYS_write:
		return write((int)a[0], (const void *)a[1], (size_t)a[2]);
	case SYS_pread64:
		return pread64((int)a[0], (void *)a[1], (size_t)a[2], (off_t)a[3]);
	case SYS_pwrite64:
		return pwrite64((int)a[0], (const void *)a[1], (size_t)a[2], (off_t)a[3]);
	case SYS_readv:
		return readv((int)a[0], (const struct iovec *)a[1], (int)a[2]);
	case SYS_writev:
		return writev((int)a[0], (const struct iovec *)a[1], (int)a[2]);
	case SYS_preadv:
		return preadv((int)a[0], (const struct iovec *)a[1], (int)a[2], (off_t)a[3]);
	case SYS_pwritev:
		return pwritev((int)a[0], (const struct iovec *)a[1], (int)a[2], (off_t)a[3]);
	case SYS_preadv2:
		return preadv2((int)a[0], (const struct iovec *)a[1], (int)a[2], (off_t)a[3], (int)a[5]);
	case SYS_pwritev2:
		return pwritev2((int)a[0], (const struct iovec *)a[1], (int)a[2], (off_t)a[3], (int)a[5]);
	case SYS_ftruncate:
		return ftruncate((int)a[0], (off_t)a[1]);
	case SYS_truncate:
		return truncate((const char *)a[0], (off_t)a[1]);
	case SYS_open:
		return open((const char *)a[0], (int)a[1], (mode_t)a[2]);
	case SYS_openat:
		return openat((int)a[0], (const char *)a[1], (int)a[2], (mode_t)a[3]);
	case SYS_creat:
		return creat((const char *)a[0], (mode_t)a[1]);
	case SYS_openat2:
		return gaia_openat2(a, forward_openat2);
	case SYS_mmap: {
		void *p = mmap((void *)a[0], (size_t)a[1], (int)a[2], (int)a[3], (int)a[4], (off_t)a[5]);
		return p == MAP_FAILED ? -1 : (long)p;
	}
	case SYS_munmap:
		return munmap((void *)a[0], (size_t)a[1]);
	case SYS_mremap: {
		void *p = mremap((void *)a[0], (size_t)a[1], (size_t)a[2], (int)a[3], (void *)a[4]);
		return p == MAP_FAILED ? -1 : (long)p;
	}
	case SYS_mprotect:
		return mprotect((void *)a[0], (size_t)a[1], (int)a[2]);
	case SYS_msync:
		return msync((void *)a[0], (size_t)a[1], (int)a[2]);
	case SYS_madvise:
		return madvise((void *)a[0], (size_t)a[1], (int)a[2]);
	case SYS_close:
		return close((int)a[0]);
	case SYS_close_range:
		return close_range((unsigned)a[0], (unsigned)a[1], (int)a[2]);
	case SYS_dup2:
		return dup2((int)a[0], (int)a[1]);
	case SYS_dup3:
		return dup3((int)a[0], (int)a[1], (int)a[2]);
	case SYS_fcntl:
		return fcntl((int)a[0], (int)a[1], a[2]);
	default:
		break;
	}
	const void *buf = NULL;
	size_t len = user_buffer(nr, a, &buf);
	if (!len || !mapping_overlaps(buf, len))
		return forward(nr, a);
	return IO_GATED(buf, len, forward(nr, a));
}

/* --- libc functions with a user buffer the shim does not otherwise see ---
 *
 * These may block for as long as a peer likes (a thread parked in recv),
 * so only a call whose buffer lies in a managed mapping takes the gate: a
 * buffer exists before its call, and a mapping is managed before mmap
 * returns, so a call whose buffer is in none has nothing a move could
 * take away. */
static inline bool buffer_in_mapping(const void *buf, size_t len)
{
	return fd_ident_any_managed() && io_gate_may_cover(buf, len) && mapping_overlaps(buf, len);
}

#define MAPPED_GATED(buf, len, call) (buffer_in_mapping((buf), (len)) ? IO_GATED((buf), (len), (call)) : (call))

GAIA_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	return MAPPED_GATED(buf, len, REAL(send)(fd, buf, len, flags));
}

GAIA_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *to,
			   socklen_t tolen)
{
	return MAPPED_GATED(buf, len, REAL(sendto)(fd, buf, len, flags, to, tolen));
}

GAIA_EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	return MAPPED_GATED(buf, len, REAL(recv)(fd, buf, len, flags));
}

GAIA_EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *from, socklen_t *fromlen)
{
	return MAPPED_GATED(buf, len, REAL(recvfrom)(fd, buf, len, flags, from, fromlen));
}

/* _FORTIFY_SOURCE's checked forms of recv and recvfrom (hooks_read.c says
 * why they are interposed too). */
extern void __chk_fail(void) __attribute__((noreturn));
GAIA_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags);
GAIA_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags, struct sockaddr *from,
				   socklen_t *fromlen);

GAIA_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags)
{
	if (len > buflen)
		__chk_fail();
	return recv(fd, buf, len, flags);
}

GAIA_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags, struct sockaddr *from,
				   socklen_t *fromlen)
{
	if (len > buflen)
		__chk_fail();
	return recvfrom(fd, buf, len, flags, from, fromlen);
}

/* stdio moves a request larger than its stream's buffer straight between
 * the program's buffer and the kernel (libc's own read and write, which no
 * hook sees): fread and fwrite with a buffer in a managed mapping take the
 * gate for the whole call. */
static size_t stdio_bytes(size_t size, size_t n)
{
	return n && size > SIZE_MAX / n ? SIZE_MAX : size * n;
}

/* glibc's <stdio.h> makes these two macros in optimised code. */
#undef fread_unlocked
#undef fwrite_unlocked

/* fread and fwrite take the stream's lock before the gate, as libc would
 * at once (not for a stream the program locks itself, FSETLOCKING_BYCALLER,
 * as libc does not): a thread waiting for a stream another thread holds
 * while it launches (and so moves a region) holds up no move. The lock is
 * let go when the thread is cancelled inside too. */
static void stream_unlock(FILE **locked)
{
	if (*locked)
		funlockfile(*locked);
}

static FILE *stream_lock(FILE *stream)
{
	if (__fsetlocking(stream, FSETLOCKING_QUERY) == FSETLOCKING_BYCALLER)
		return NULL;
	flockfile(stream);
	return stream;
}

GAIA_EXPORT size_t fread(void *buf, size_t size, size_t n, FILE *stream)
{
	size_t len = stdio_bytes(size, n);
	if (!buffer_in_mapping(buf, len))
		return REAL(fread)(buf, size, n, stream);
	__attribute__((cleanup(stream_unlock))) FILE *locked = stream_lock(stream);
	return IO_GATED(buf, len, REAL(fread_unlocked)(buf, size, n, stream));
}

GAIA_EXPORT size_t fread_unlocked(void *buf, size_t size, size_t n, FILE *stream)
{
	return MAPPED_GATED(buf, stdio_bytes(size, n), REAL(fread_unlocked)(buf, size, n, stream));
}

GAIA_EXPORT size_t fwrite(const void *buf, size_t size, size_t n, FILE *stream)
{
	size_t len = stdio_bytes(size, n);
	if (!buffer_in_mapping(buf, len))
		return REAL(fwrite)(buf, size, n, stream);
	__attribute__((cleanup(stream_unlock))) FILE *locked = stream_lock(stream);
	return IO_GATED(buf, len, REAL(fwrite_unlocked)(buf, size, n, stream));
}

GAIA_EXPORT size_t fwrite_unlocked(const void *buf, size_t size, size_t n, FILE *stream)
{
	return MAPPED_GATED(buf, stdio_bytes(size, n), REAL(fwrite_unlocked)(buf, size, n, stream));
}

/* The checked forms (hooks_read.c): libc's checks, then the hooks above. */
GAIA_EXPORT size_t __fread_chk(void *buf, size_t buflen, size_t size, size_t n, FILE *stream);
GAIA_EXPORT size_t __fread_unlocked_chk(void *buf, size_t buflen, size_t size, size_t n, FILE *stream);

static void fread_check(size_t buflen, size_t size, size_t n)
{
	if ((n && size > SIZE_MAX / n) || size * n > buflen)
		__chk_fail();
}

GAIA_EXPORT size_t __fread_chk(void *buf, size_t buflen, size_t size, size_t n, FILE *stream)
{
	fread_check(buflen, size, n);
	return fread(buf, size, n, stream);
}

GAIA_EXPORT size_t __fread_unlocked_chk(void *buf, size_t buflen, size_t size, size_t n, FILE *stream)
{
	fread_check(buflen, size, n);
	return fread_unlocked(buf, size, n, stream);
}

/* The buffers in mappings only (msg_buffers): gated when there are any. */
#define BUFFERS_GATED(buf, len, call) ((len) ? IO_GATED((buf), (len), (call)) : (call))

GAIA_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	const void *s = NULL;
	size_t len = msg_buffers(msg, &s);
	return BUFFERS_GATED(s, len, REAL(sendmsg)(fd, msg, flags));
}

GAIA_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	const void *s = NULL;
	size_t len = msg_buffers(msg, &s);
	return BUFFERS_GATED(s, len, REAL(recvmsg)(fd, msg, flags));
}

GAIA_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags)
{
	const void *s = NULL;
	size_t len = mmsg_buffers(vec, vlen, &s);
	return BUFFERS_GATED(s, len, REAL(sendmmsg)(fd, vec, vlen, flags));
}

GAIA_EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags, struct timespec *timeout)
{
	const void *s = NULL;
	size_t len = mmsg_buffers(vec, vlen, &s);
	return BUFFERS_GATED(s, len, REAL(recvmmsg)(fd, vec, vlen, flags, timeout));
}

GAIA_EXPORT ssize_t process_vm_readv(pid_t pid, const struct iovec *local, unsigned long nlocal,
				     const struct iovec *remote, unsigned long nremote, unsigned long flags)
{
	const void *s = NULL;
	size_t len = vm_buffers(pid, local, nlocal, remote, nremote, &s);
	return BUFFERS_GATED(s, len, REAL(process_vm_readv)(pid, local, nlocal, remote, nremote, flags));
}

GAIA_EXPORT ssize_t process_vm_writev(pid_t pid, const struct iovec *local, unsigned long nlocal,
				      const struct iovec *remote, unsigned long nremote, unsigned long flags)
{
	const void *s = NULL;
	size_t len = vm_buffers(pid, local, nlocal, remote, nremote, &s);
	return BUFFERS_GATED(s, len, REAL(process_vm_writev)(pid, local, nlocal, remote, nremote, flags));
}

GAIA_EXPORT int mincore(void *addr, size_t len, unsigned char *vec)
{
	return IO_GATED(addr, len, REAL(mincore)(addr, len, vec));
}
