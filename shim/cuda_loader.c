/* The one loader of the CUDA entry points the shim reaches (cuda_calls.h):
 * the real dlsym behind the shim's own, the real driver's functions by ABI
 * name (cached), the real runtime's wherever the program loaded it, and
 * the table of what the shim calls on its own account.
 *
 * Nothing here loads a library: the driver and the runtime are the ones
 * the program loaded, found by soname or by walking the loaded objects. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "cuda_calls.h"

/* Code reachable from dlsym, which a sanitizer runtime preloaded ahead of
 * the shim calls before it has initialised itself. */
#define GAIA_NO_SANITIZE __attribute__((no_sanitize("address", "thread", "undefined")))

/* ------------------------------------------------------------------ */
/* The real dlsym                                                     */

/* Shared with dlsym_entry.S: the real dlsym once known (read on every
 * pseudo-handle lookup), its resolver, and the real-handle path. */
GAIA_HIDDEN extern void *gaia_dlsym_real;
GAIA_HIDDEN void *gaia_dlsym_resolve(void);

void *gaia_dlsym_real;

typedef void *(*dlsym_fn)(void *, const char *);

/* The dlsym that follows the shim (libc's, or the next interposer's).
 * Called from here with a real handle or from dlsym_entry.S on first use;
 * racing first calls compute and publish the same address. */
GAIA_HIDDEN GAIA_NO_SANITIZE void *gaia_dlsym_resolve(void)
{
	void *p = __atomic_load_n(&gaia_dlsym_real, __ATOMIC_ACQUIRE);

	if (p)
		return p;
	p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
	if (!p)
		p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	if (p)
		__atomic_store_n(&gaia_dlsym_real, p, __ATOMIC_RELEASE);
	return p;
}

GAIA_NO_SANITIZE void *cuda_loader_dlsym(void *handle, const char *name)
{
	dlsym_fn fn = (dlsym_fn)gaia_dlsym_resolve();

	return fn ? fn(handle, name) : NULL;
}

/* ------------------------------------------------------------------ */
/* Real entry points by name                                          */

static void *libcuda_handle;

/* The real libcuda.so.1 if the process has loaded it (by soname, whatever
 * path it came from); never loads it. */
static void *libcuda(void)
{
	void *h = __atomic_load_n(&libcuda_handle, __ATOMIC_ACQUIRE);

	if (h)
		return h;
	h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (h)
		__atomic_store_n(&libcuda_handle, h, __ATOMIC_RELEASE);
	return h;
}

/* cuda_real's cache: open addressing on the name, filled under a lock,
 * read without one (an entry's name is written before its pointer is
 * published). A name that does not fit, or a full table, is looked up
 * every time; NULL is never cached (the driver may be loaded later). */
#define REAL_CACHE_SLOTS 256
#define REAL_CACHE_NAME 64
static struct {
	char name[REAL_CACHE_NAME];
	void *fn;
} real_cache[REAL_CACHE_SLOTS];
static pthread_mutex_t real_cache_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned name_hash(const char *s)
{
	unsigned h = 2166136261u; /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

void *cuda_real(const char *abi_name)
{
	size_t len = strlen(abi_name);
	unsigned slot = name_hash(abi_name) % REAL_CACHE_SLOTS;
	void *h, *fn;

	if (len >= REAL_CACHE_NAME)
		return (h = libcuda()) ? cuda_loader_dlsym(h, abi_name) : NULL;
	for (unsigned n = 0; n < REAL_CACHE_SLOTS; n++, slot = (slot + 1) % REAL_CACHE_SLOTS) {
		fn = __atomic_load_n(&real_cache[slot].fn, __ATOMIC_ACQUIRE);
		if (!fn)
			break;
		if (strcmp(real_cache[slot].name, abi_name) == 0)
			return fn;
	}
	h = libcuda();
	fn = h ? cuda_loader_dlsym(h, abi_name) : NULL;
	if (!fn)
		return NULL;
	pthread_mutex_lock(&real_cache_lock);
	slot = name_hash(abi_name) % REAL_CACHE_SLOTS;
	for (unsigned n = 0; n < REAL_CACHE_SLOTS; n++, slot = (slot + 1) % REAL_CACHE_SLOTS) {
		if (!real_cache[slot].fn) {
			memcpy(real_cache[slot].name, abi_name, len + 1);
			__atomic_store_n(&real_cache[slot].fn, fn, __ATOMIC_RELEASE);
			break;
		}
		if (strcmp(real_cache[slot].name, abi_name) == 0)
			break; /* another thread got here first */
	}
	pthread_mutex_unlock(&real_cache_lock);
	return fn;
}

/* The runtime-API function after the shim: RTLD_NEXT when libcudart is in
 * the global scope (linked by the program); else a libcudart.so* loaded
 * into a local scope (a dlopened library's dependency), found by name.
 * The path is copied out and opened after dl_iterate_phdr returns: it
 * holds a loader lock that dlopen would take in the other order. */
struct cudart_path {
	char path[4096];
	bool found;
};

static int find_libcudart(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct cudart_path *out = arg;
	const char *base = strrchr(info->dlpi_name, '/');
	size_t len = strlen(info->dlpi_name);

	(void)size;
	base = base ? base + 1 : info->dlpi_name;
	if (strncmp(base, "libcudart.so", 12) != 0 || len >= sizeof(out->path))
		return 0;
	memcpy(out->path, info->dlpi_name, len + 1);
	out->found = true;
	return 1;
}

/* The local libcudart's handle, or NULL. */
static void *local_libcudart(void)
{
	struct cudart_path cudart = {.found = false};

	dl_iterate_phdr(find_libcudart, &cudart);
	return cudart.found ? dlopen(cudart.path, RTLD_NOW | RTLD_NOLOAD) : NULL;
}

void *cuda_runtime_real(const char *abi_name)
{
	void *fn = dlsym(RTLD_NEXT, abi_name), *h;

	if (fn)
		return fn;
	h = local_libcudart();
	return h ? cuda_loader_dlsym(h, abi_name) : NULL;
}

/* ------------------------------------------------------------------ */
/* The table of what the shim calls                                   */

static struct cuda_calls calls;
static bool driver_looked, core_present;
static pthread_mutex_t calls_lock = PTHREAD_MUTEX_INITIALIZER;

const struct cuda_calls *cuda_calls(void)
{
	if (__atomic_load_n(&driver_looked, __ATOMIC_ACQUIRE))
		return &calls;
	pthread_mutex_lock(&calls_lock);
	if (!driver_looked && libcuda()) {
		bool core = true;
#define CUDA_CALL_ROLE_CORE 1
#define CUDA_CALL_ROLE_VMM 0
#define CUDA_CALL_ROLE_OPT 0
#define LOOK(field, name, type, role)                                                    \
	__atomic_store_n(&calls.field, (type)cuda_real(name), __ATOMIC_RELEASE);         \
	if (!calls.field) {                                                              \
		gaia_debug("the driver lacks %s%s", name,                                \
			   CUDA_CALL_ROLE_##role ? ": no device replicas" : "");         \
		core &= !CUDA_CALL_ROLE_##role;                                          \
	}
		CUDA_DRIVER_CALLS(LOOK)
#undef LOOK
		core_present = core;
		__atomic_store_n(&driver_looked, true, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&calls_lock);
	return &calls;
}

bool cuda_calls_core(void)
{
	cuda_calls();
	return __atomic_load_n(&driver_looked, __ATOMIC_ACQUIRE) && core_present;
}

/* ------------------------------------------------------------------ */
/* The runtime, per calling object                                    */

#define RT_CACHE 64
static struct {
	const void *base; /* the calling object's load address */
	const char *name; /* a string literal of the caller's */
	void *fn;
} rt_cache[RT_CACHE];
static unsigned rt_cached;
static pthread_mutex_t rt_cache_lock = PTHREAD_MUTEX_INITIALIZER;

static bool in_shim(const void *fn)
{
	Dl_info self, it;
	return dladdr((const void *)cuda_runtime_real_for, &self) && dladdr(fn, &it) &&
	       self.dli_fbase == it.dli_fbase;
}

/* `name` in the scope of the object loaded at `fname` (itself and its
 * dependencies; the main program's is the global one), not the shim's. */
static void *in_scope_of(const char *fname, const char *name)
{
	void *h = dlopen(fname && *fname ? fname : NULL, RTLD_NOW | RTLD_NOLOAD);
	void *fn = h ? cuda_loader_dlsym(h, name) : NULL;
	if (h)
		dlclose(h);
	return fn && !in_shim(fn) ? fn : NULL;
}

/* The object that contains addr: its load address and file name (""
 * for the main program). _dl_find_object needs no symbol search, unlike
 * dladdr. */
static bool object_of(const void *addr, const void **base, const char **fname)
{
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 35)
	struct dl_find_object o;
	if (_dl_find_object((void *)addr, &o) == 0 && o.dlfo_link_map) {
		*base = o.dlfo_map_start;
		*fname = o.dlfo_link_map->l_name;
		return true;
	}
	return false;
#else
	Dl_info info;
	if (!dladdr(addr, &info) || !info.dli_fbase)
		return false;
	*base = info.dli_fbase;
	*fname = info.dli_fname;
	return true;
#endif
}

void *cuda_runtime_real_for(const void *addr, const char *name)
{
	const void *base = NULL;
	const char *fname = NULL;
	bool known = addr && object_of(addr, &base, &fname);
	void *fn = NULL;

	pthread_mutex_lock(&rt_cache_lock);
	for (unsigned i = 0; known && i < rt_cached; i++) {
		if (rt_cache[i].base == base && strcmp(rt_cache[i].name, name) == 0) {
			fn = rt_cache[i].fn;
			break;
		}
	}
	pthread_mutex_unlock(&rt_cache_lock);
	if (fn)
		return fn;
	fn = dlsym(RTLD_NEXT, name);
	if (!fn && known)
		fn = in_scope_of(fname, name);
	if (!fn)
		fn = cuda_runtime_real(name);
	if (!fn || !known)
		return fn;
	pthread_mutex_lock(&rt_cache_lock);
	if (rt_cached < RT_CACHE)
		rt_cache[rt_cached++] = (__typeof__(rt_cache[0])){base, name, fn};
	pthread_mutex_unlock(&rt_cache_lock);
	return fn;
}
