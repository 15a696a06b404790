/* A fault-injecting libcuda.so.1 in front of the simulated one: its
 * directory goes first on LD_LIBRARY_PATH, so the program, its runtime and
 * the shim all reach the driver through it. Every function the simulated
 * driver exports has a trampoline here (generated: gen_front.cmake) that
 * forwards to the real one, loaded by its path, with registers untouched
 * (front_dispatch.S).
 *
 * CUFAULT=<ABI name>[:<nth>[:<CUresult>[:<times>]]] fails the nth call
 * (default 1) of that function made by the shim (libgaia.so: the caller's
 * return address says), and the times-1 calls after it (default 1; 0:
 * every one from there on): the CUresult (default 999, CUDA_ERROR_UNKNOWN)
 * is returned and nothing is called. One line on stderr says so, once.
 * CUFAULT_TRACE=<file> writes, at exit, "<name> <calls by the shim>" for
 * each function the shim called, which a test uses to arm each in turn.
 * cuGetProcAddress[_v2] answers with this library's trampoline for the
 * function the real one resolved, so calls through the pointers a program
 * (its runtime) and the shim got that way come here too: the program's
 * launches and syncs that the shim's wrappers forward count as the shim's
 * calls and can be failed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CUFAULT_REAL_PATH
#error "CUFAULT_REAL_PATH: the simulated libcuda.so.1 to load"
#endif

#define HIDDEN __attribute__((visibility("hidden")))

extern const char *const front_names[] HIDDEN;
extern const size_t front_count HIDDEN;
extern void *const front_trampolines[] HIDDEN;
HIDDEN int front_error = 999;
HIDDEN void *front_decide(unsigned index, void *caller);

typedef void *(*dlsym_fn)(void *, const char *);
static dlsym_fn real_dlsym;
static void *real_handle;
static void **real_fn;
static unsigned long *shim_calls;
static long armed_index = -1;
static unsigned long armed_nth = 1, armed_times = 1;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static long index_getproc = -1, index_getproc_v2 = -1; /* the resolvers */

static void say(const char *line)
{
	(void)!syscall(SYS_write, 2, line, strlen(line));
}

static void write_trace(void)
{
	const char *path = getenv("CUFAULT_TRACE");
	FILE *f = path && *path ? fopen(path, "w") : NULL;
	for (size_t i = 0; f && i < front_count; i++)
		if (shim_calls[i])
			fprintf(f, "%s %lu\n", front_names[i], shim_calls[i]);
	if (f)
		fclose(f);
}

static void init(void)
{
	/* glibc's own dlsym: the shim's (preloaded) would hand back its
	 * wrappers for names it intercepts. */
	real_dlsym = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
	if (!real_dlsym)
		real_dlsym = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	real_handle = dlopen(CUFAULT_REAL_PATH, RTLD_NOW | RTLD_LOCAL);
	real_fn = calloc(front_count, sizeof(*real_fn));
	shim_calls = calloc(front_count, sizeof(*shim_calls));
	if (!real_dlsym || !real_handle || !real_fn || !shim_calls) {
		say("cufault: cannot load " CUFAULT_REAL_PATH "\n");
		_exit(2);
	}
	for (size_t i = 0; i < front_count; i++) {
		if (!strcmp(front_names[i], "cuGetProcAddress"))
			index_getproc = (long)i;
		if (!strcmp(front_names[i], "cuGetProcAddress_v2"))
			index_getproc_v2 = (long)i;
	}
	const char *spec = getenv("CUFAULT");
	if (spec && *spec) {
		char name[128];
		unsigned long nth = 1, times = 1;
		int err = 999;
		if (sscanf(spec, "%127[^:]:%lu:%d:%lu", name, &nth, &err, &times) < 1) {
			say("cufault: bad CUFAULT\n");
			_exit(2);
		}
		for (size_t i = 0; i < front_count; i++)
			if (!strcmp(front_names[i], name))
				armed_index = (long)i;
		if (armed_index < 0) {
			say("cufault: CUFAULT names no driver function\n");
			_exit(2);
		}
		armed_nth = nth;
		armed_times = times;
		front_error = err;
	}
	if (getenv("CUFAULT_TRACE"))
		atexit(write_trace);
}

static int from_shim(void *caller)
{
	Dl_info info;
	const char *base;
	if (!dladdr(caller, &info) || !info.dli_fname)
		return 0;
	base = strrchr(info.dli_fname, '/');
	return strncmp(base ? base + 1 : info.dli_fname, "libgaia", 7) == 0;
}

static void *real_of(unsigned index)
{
	void *fn = __atomic_load_n(&real_fn[index], __ATOMIC_ACQUIRE);
	if (!fn) {
		fn = real_dlsym(real_handle, front_names[index]);
		__atomic_store_n(&real_fn[index], fn, __ATOMIC_RELEASE);
	}
	return fn;
}

/* The trampoline standing for the real function at `fn`, or fn itself. */
static void *trampoline_for(void *fn)
{
	for (size_t i = 0; fn && i < front_count; i++)
		if (real_of((unsigned)i) == fn)
			return front_trampolines[i];
	return fn;
}

typedef int (*getproc_v2_fn)(const char *, void **, int, unsigned long long, int *);
typedef int (*getproc_fn)(const char *, void **, int, unsigned long long);

static int front_getproc_v2(const char *symbol, void **pfn, int version, unsigned long long flags, int *status)
{
	int rc = ((getproc_v2_fn)real_of((unsigned)index_getproc_v2))(symbol, pfn, version, flags, status);
	if (rc == 0 && pfn)
		*pfn = trampoline_for(*pfn);
	return rc;
}

static int front_getproc(const char *symbol, void **pfn, int version, unsigned long long flags)
{
	int rc = ((getproc_fn)real_of((unsigned)index_getproc))(symbol, pfn, version, flags);
	if (rc == 0 && pfn)
		*pfn = trampoline_for(*pfn);
	return rc;
}

void *front_decide(unsigned index, void *caller)
{
	pthread_once(&once, init);
	if (index >= front_count)
		return NULL;
	if (from_shim(caller)) {
		unsigned long n = __atomic_add_fetch(&shim_calls[index], 1, __ATOMIC_RELAXED);
		if ((long)index == armed_index && n >= armed_nth && (!armed_times || n < armed_nth + armed_times)) {
			if (n == armed_nth) {
				char line[256];
				snprintf(line, sizeof(line), "cufault: %s #%lu (a call of the shim's): injected %d%s\n",
					 front_names[index], n, front_error, armed_times != 1 ? ", and from then on" : "");
				say(line);
			}
			return NULL;
		}
	}
	if ((long)index == index_getproc_v2)
		return (void *)front_getproc_v2;
	if ((long)index == index_getproc)
		return (void *)front_getproc;
	return real_of(index);
}
