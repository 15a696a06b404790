/* A fault-injecting layer over libc, preloaded after libgaia.so
 * (LD_PRELOAD="libgaia.so libfault_libc.so"): the shim's calls to the real
 * functions (dlsym(RTLD_NEXT) from libgaia.so, or plain calls to functions
 * it does not interpose) land here first, and so do the program's.
 *
 * Armed by FAULT_LIBC, a comma-separated list of key=value:
 *   call=NAME    the function to fail: pread64 pwrite64 write msync fsync
 *                mmap madvise ioctl shm_open userfaultfd memfd_create
 *                (userfaultfd is syscall(SYS_userfaultfd) and an open of
 *                /dev/userfaultfd)
 *   errno=E      the error (EIO ENOSPC ENOMEM EACCES EPERM ENOSYS EINVAL
 *                or a number); default EIO
 *   nth=N        the first matching call to fail (1 = the first); default 1
 *   times=N      how many matching calls fail from there (0 = all); default 1
 *   path=S       only calls on a file whose path contains S (fd calls: the
 *                descriptor's /proc/self/fd link; mmap: the mapped file,
 *                "anon" for anonymous mappings; shm_open: its name)
 *   req=R        ioctl only: the request, "uffd_register" or "pagemap_scan"
 *   arg=A        madvise only: the advice number
 *   short=1      pread64/pwrite64 only: transfer half the bytes (all of
 *                a one-byte transfer) instead of failing
 *   delay_ms=N   do not fail: sleep N ms, then make the call (a window in
 *                which a test can kill the process)
 * A program can also arm (or re-arm) it at a chosen moment with
 * fault_libc_arm(spec) (found with dlsym), which takes the same string and
 * restarts the count; fault_libc_arm(NULL) disarms it.
 * Each injected fault writes one line to stderr: "fault_libc: <call> #<n>
 * on <path>: injected <errno name>". Calls made by this library itself go
 * to the next definition. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/userfaultfd.h>

#include "uffd_abi.h"
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct fault_spec {
	char call[32];
	int err;
	unsigned long nth, times;
	char path[256];
	char req[32];
	long arg;
	bool short_io;
	unsigned long delay_ms;
};

static struct fault_spec spec;
static bool armed;
static unsigned long matched;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t parse_once = PTHREAD_ONCE_INIT;

static const struct {
	const char *name;
	int value;
} errnos[] = {{"EIO", EIO},	  {"ENOSPC", ENOSPC}, {"ENOMEM", ENOMEM}, {"EACCES", EACCES},
	      {"EPERM", EPERM},	  {"ENOSYS", ENOSYS}, {"EINVAL", EINVAL}, {"EFAULT", EFAULT},
	      {"EAGAIN", EAGAIN}, {"EBUSY", EBUSY}};

static const char *errno_name(int e)
{
	for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++)
		if (errnos[i].value == e)
			return errnos[i].name;
	return "errno";
}

static void die(const char *what, const char *value)
{
	fprintf(stderr, "fault_libc: FAULT_LIBC: bad %s '%s'\n", what, value);
	_exit(2);
}

static void parse_spec(const char *env)
{
	char buf[512], *save = NULL;

	armed = false;
	memset(&spec, 0, sizeof(spec));
	if (!env || !*env)
		return;
	if (strlen(env) >= sizeof(buf))
		die("value (too long)", env);
	strcpy(buf, env);
	spec.err = EIO;
	spec.nth = 1;
	spec.times = 1;
	spec.arg = -1;
	for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(kv, '=');
		if (!eq)
			die("item", kv);
		*eq = 0;
		const char *k = kv, *v = eq + 1;
		char *end;
		if (!strcmp(k, "call")) {
			snprintf(spec.call, sizeof(spec.call), "%s", v);
		} else if (!strcmp(k, "errno")) {
			spec.err = 0;
			for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++)
				if (!strcmp(errnos[i].name, v))
					spec.err = errnos[i].value;
			if (!spec.err && ((spec.err = (int)strtol(v, &end, 10)) <= 0 || *end))
				die("errno", v);
		} else if (!strcmp(k, "nth") || !strcmp(k, "times")) {
			unsigned long n = strtoul(v, &end, 10);
			if (*end || !*v)
				die(k, v);
			*(!strcmp(k, "nth") ? &spec.nth : &spec.times) = n;
		} else if (!strcmp(k, "path")) {
			snprintf(spec.path, sizeof(spec.path), "%s", v);
		} else if (!strcmp(k, "req")) {
			snprintf(spec.req, sizeof(spec.req), "%s", v);
		} else if (!strcmp(k, "arg")) {
			spec.arg = strtol(v, &end, 10);
			if (*end || !*v)
				die(k, v);
		} else if (!strcmp(k, "delay_ms")) {
			spec.delay_ms = strtoul(v, &end, 10);
			if (*end || !*v)
				die(k, v);
		} else if (!strcmp(k, "short")) {
			spec.short_io = strcmp(v, "0") != 0;
		} else {
			die("key", k);
		}
	}
	if (!spec.call[0])
		die("value (no call=)", env);
	armed = true;
}

static void parse(void)
{
	parse_spec(getenv("FAULT_LIBC"));
}

int fault_libc_arm(const char *text);
int fault_libc_arm(const char *text)
{
	pthread_once(&parse_once, parse);
	pthread_mutex_lock(&lock);
	parse_spec(text);
	matched = 0;
	pthread_mutex_unlock(&lock);
	return 0;
}

static void fd_path(int fd, char *out, size_t size)
{
	char link[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, out, size - 1);
	out[n > 0 ? n : 0] = 0;
}

/* The armed spec for `call`, copied under the lock (a program may re-arm
 * while other threads call in); false when `call` is not armed. */
static bool armed_for(const char *call, struct fault_spec *out)
{
	bool yes;

	pthread_once(&parse_once, parse);
	pthread_mutex_lock(&lock);
	yes = armed && strcmp(call, spec.call) == 0;
	if (yes)
		*out = spec;
	pthread_mutex_unlock(&lock);
	return yes;
}

/* Decides whether this call, armed as `s`, fails; logs the injection.
 * `path` may be NULL when the call has none. */
static bool should_fail_as(const struct fault_spec *s, const char *call, const char *path)
{
	bool fail;
	unsigned long n;

	if (s->path[0] && (!path || !strstr(path, s->path)))
		return false;
	pthread_mutex_lock(&lock);
	n = ++matched;
	fail = n >= s->nth && (s->times == 0 || n < s->nth + s->times);
	pthread_mutex_unlock(&lock);
	if (fail) {
		char line[512];
		int len = s->delay_ms ? snprintf(line, sizeof(line), "fault_libc: %s #%lu on %s: delayed %lu ms\n", call,
						 n, path ? path : "-", s->delay_ms)
				      : snprintf(line, sizeof(line), "fault_libc: %s #%lu on %s: injected %s%s\n", call,
						 n, path ? path : "-", s->short_io ? "short transfer, " : "",
						 errno_name(s->err));
		if (len > 0)
			(void)!syscall(SYS_write, 2, line, (size_t)len < sizeof(line) ? (size_t)len : sizeof(line) - 1);
		if (s->delay_ms) {
			struct timespec ts = {(time_t)(s->delay_ms / 1000), (long)(s->delay_ms % 1000) * 1000000};
			nanosleep(&ts, NULL);
			return false;
		}
		errno = s->err;
	}
	return fail;
}

static bool should_fail(const char *call, const char *path, struct fault_spec *s)
{
	return armed_for(call, s) && should_fail_as(s, call, path);
}

static bool fd_should_fail(const char *call, int fd, struct fault_spec *s)
{
	char path[4096];

	if (!armed_for(call, s))
		return false;
	fd_path(fd, path, sizeof(path));
	return should_fail_as(s, call, path);
}

#define NEXT(name) ((__typeof__(&name))next_fn(#name))
static void *next_fn(const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);
	if (!p) {
		fprintf(stderr, "fault_libc: no next %s\n", name);
		_exit(2);
	}
	return p;
}

/* The exported names share one body each, called directly: a call from
 * one exported name to another would bind to libgaia.so's hook first. */
static ssize_t fault_pread(int fd, void *buf, size_t count, off_t offset)
{
	struct fault_spec s;

	if (fd_should_fail("pread64", fd, &s))
		return s.short_io ? NEXT(pread64)(fd, buf, count > 1 ? count / 2 : count, offset) : -1;
	return NEXT(pread64)(fd, buf, count, offset);
}

ssize_t pread64(int fd, void *buf, size_t count, off_t offset)
{
	return fault_pread(fd, buf, count, offset);
}

ssize_t pread(int fd, void *buf, size_t count, off_t offset)
{
	return fault_pread(fd, buf, count, offset);
}

static ssize_t fault_pwrite(int fd, const void *buf, size_t count, off_t offset)
{
	struct fault_spec s;

	if (fd_should_fail("pwrite64", fd, &s))
		return s.short_io ? NEXT(pwrite64)(fd, buf, count > 1 ? count / 2 : count, offset) : -1;
	return NEXT(pwrite64)(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset)
{
	return fault_pwrite(fd, buf, count, offset);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset)
{
	return fault_pwrite(fd, buf, count, offset);
}

ssize_t write(int fd, const void *buf, size_t count)
{
	struct fault_spec s;

	if (fd > 2 && fd_should_fail("write", fd, &s))
		return -1;
	return NEXT(write)(fd, buf, count);
}

int fsync(int fd)
{
	struct fault_spec s;

	if (fd_should_fail("fsync", fd, &s))
		return -1;
	return NEXT(fsync)(fd);
}

int msync(void *addr, size_t len, int flags)
{
	struct fault_spec s;

	if (should_fail("msync", NULL, &s))
		return -1;
	return NEXT(msync)(addr, len, flags);
}

static void *fault_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t offset)
{
	struct fault_spec s;

	if (armed_for("mmap", &s)) {
		char path[4096] = "anon";
		if (!(flags & MAP_ANONYMOUS))
			fd_path(fd, path, sizeof(path));
		if (should_fail_as(&s, "mmap", path))
			return MAP_FAILED;
	}
	return NEXT(mmap64)(addr, len, prot, flags, fd, offset);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t offset)
{
	return fault_mmap(addr, len, prot, flags, fd, offset);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t offset)
{
	return fault_mmap(addr, len, prot, flags, fd, offset);
}

int madvise(void *addr, size_t len, int advice)
{
	struct fault_spec s;

	if (armed_for("madvise", &s) && (s.arg < 0 || s.arg == advice) && should_fail_as(&s, "madvise", NULL))
		return -1;
	return NEXT(madvise)(addr, len, advice);
}

int ioctl(int fd, unsigned long request, ...)
{
	struct fault_spec s;
	va_list ap;
	void *argp;

	va_start(ap, request);
	argp = va_arg(ap, void *);
	va_end(ap);
	if (armed_for("ioctl", &s)) {
		bool match = !s.req[0] || (!strcmp(s.req, "uffd_register") && request == UFFDIO_REGISTER) ||
			     (!strcmp(s.req, "pagemap_scan") && request == PAGEMAP_SCAN);
		if (match && fd_should_fail("ioctl", fd, &s))
			return -1;
	}
	return NEXT(ioctl)(fd, request, argp);
}

int shm_open(const char *name, int oflag, mode_t mode)
{
	struct fault_spec s;

	if (should_fail("shm_open", name, &s))
		return -1;
	return NEXT(shm_open)(name, oflag, mode);
}

int memfd_create(const char *name, unsigned int flags)
{
	struct fault_spec s;

	if (should_fail("memfd_create", name, &s))
		return -1;
	return NEXT(memfd_create)(name, flags);
}

long syscall(long number, ...)
{
	struct fault_spec s;
	va_list ap;
	long a[6];

	va_start(ap, number);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (number == SYS_userfaultfd && should_fail("userfaultfd", NULL, &s))
		return -1;
	return NEXT(syscall)(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}

int open(const char *path, int flags, ...)
{
	struct fault_spec s;
	mode_t mode = 0;

	if (flags & (O_CREAT | O_TMPFILE)) {
		va_list ap;
		va_start(ap, flags);
		mode = (mode_t)va_arg(ap, int);
		va_end(ap);
	}
	if (!strcmp(path, "/dev/userfaultfd") && should_fail("userfaultfd", path, &s))
		return -1;
	return NEXT(open)(path, flags, mode);
}
