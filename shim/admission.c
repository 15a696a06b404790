/* Which file mappings the shim takes on, and how a new one starts: the
 * filters of GAIA_DISABLE, GAIA_MIN_MAP_KB and GAIA_PATHS, the kinds of
 * file never managed, the populate-ahead of what the page cache holds, and
 * the call site named in the log. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mapping_internal.h"
#include "shim.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

/* GAIA_PATHS: ':'-separated globs, a leading '!' excludes; the first glob
 * matching the path decides; a path no glob matches is managed only when
 * every glob excludes (so "!*.so" alone means "everything but .so"). */
static bool path_selected(const char *path)
{
	const char *globs = gaia_config()->paths;
	if (!globs || !*globs)
		return true;
	bool only_excludes = true;
	char glob[PATH_MAX];
	for (const char *p = globs; *p;) {
		const char *colon = strchr(p, ':');
		size_t n = colon ? (size_t)(colon - p) : strlen(p);
		bool exclude = n && p[0] == '!';
		size_t skip = exclude ? 1 : 0;
		if (n - skip < sizeof(glob)) {
			memcpy(glob, p + skip, n - skip);
			glob[n - skip] = 0;
			if (fnmatch(glob, path, 0) == 0)
				return !exclude;
		}
		only_excludes = only_excludes && exclude;
		p += n + (colon ? 1 : 0);
	}
	return only_excludes;
}

/* Mappings the CUDA libraries make for themselves are theirs. */
static bool called_from_cuda(void *caller)
{
	Dl_info info;
	if (!caller || !dladdr(caller, &info) || !info.dli_fname)
		return false;
	const char *base = strrchr(info.dli_fname, '/');
	base = base ? base + 1 : info.dli_fname;
	return strncmp(base, "libcuda", 7) == 0 || strncmp(base, "libnv", 5) == 0 ||
	       strncmp(base, "libcudart", 9) == 0;
}

/* An executable or shared object mapped read-only and private is code
 * being read (a symbolizer, a debugger, a linker), not data for kernels.
 * The sanitizers' symbolizers map the program's objects while holding
 * their own locks, in the middle of a report: taking that mapping on
 * (threads, locks) there would deadlock the report. */
static bool is_elf(int fd)
{
	unsigned char magic[4];
	return syscall(SYS_pread64, fd, magic, sizeof(magic), 0) == (long)sizeof(magic) &&
	       memcmp(magic, "\x7f" "ELF", 4) == 0;
}

bool mapping_wanted(void *caller, size_t len, int prot, int flags, int fd, char *path,
		    size_t path_size)
{
	if (!gaia_process_is_ours())
		return false;
	const struct gaia_env *cfg = gaia_config();
	if (cfg->disable || fd < 0 || (flags & MAP_ANONYMOUS) || (prot & PROT_EXEC) || !len)
		return false;
	int type = flags & MAP_TYPE;
	if (type != MAP_SHARED && type != MAP_PRIVATE && type != MAP_SHARED_VALIDATE)
		return false;
	if ((unsigned long long)len < (unsigned long long)cfg->min_map_kb * 1024ull)
		return false;
	struct stat st;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode))
		return false;
	char link[64];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, path, path_size - 1);
	if (n <= 0)
		return false;
	path[n] = 0;
	/* memfd and POSIX shared-memory objects are memory, not files. */
	if (strncmp(path, "/memfd:", 7) == 0 || strncmp(path, "/dev/shm/", 9) == 0)
		return false;
	if (!path_selected(path))
		return false;
	if (type == MAP_PRIVATE && !(prot & PROT_WRITE) && is_elf(fd))
		return false;
	return !called_from_cuda(caller);
}

#ifndef SYS_cachestat
#define SYS_cachestat 451
#endif

struct cachestat_range_abi {
	uint64_t off, len;
};
struct cachestat_abi {
	uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

/* True when every page of the file range is in the page cache: one
 * cachestat(2) (Linux 6.5+) instead of a mincore walk of the mapping. */
static bool file_range_resident(int fd, uint64_t offset, size_t len)
{
	struct cachestat_range_abi range = {offset, len};
	struct cachestat_abi cs;
	if (syscall(SYS_cachestat, fd, &range, &cs, 0))
		return false;
	return cs.nr_cache >= len / GAIA_PAGE;
}

/* Populates the pages already in the page cache before registering: with
 * write tracking on, the kernel maps nothing around a fault, so each first
 * touch would cost a fault of its own (research: pagecache_wp.md). */
size_t mapping_populate_resident(void *addr, size_t len, int fd, uint64_t offset)
{
	size_t npages = len / GAIA_PAGE;
	if (file_range_resident(fd, offset, len))
		return REAL(madvise)(addr, len, MADV_POPULATE_READ) == 0 ? npages : 0;
	size_t populated = 0;
	unsigned char *vec = malloc(npages ? npages : 1);
	if (!vec || REAL(mincore)(addr, len, vec)) {
		free(vec);
		return 0;
	}
	for (size_t p = 0; p < npages;) {
		if (!(vec[p] & 1)) {
			p++;
			continue;
		}
		size_t q = p;
		while (q < npages && (vec[q] & 1))
			q++;
		if (REAL(madvise)((char *)addr + p * GAIA_PAGE, (q - p) * GAIA_PAGE,
				  MADV_POPULATE_READ) == 0)
			populated += q - p;
		p = q;
	}
	free(vec);
	return populated;
}

/* A MAP_SHARED mapping of a descriptor not open for writing can never be
 * written through (mprotect to PROT_WRITE fails with EACCES), and
 * userfaultfd refuses to register it: it is managed without tracking. */
bool mapping_never_writable(int flags, int fd)
{
	int mode = fcntl(fd, F_GETFL);
	return (flags & MAP_TYPE) != MAP_PRIVATE && mode >= 0 && (mode & O_ACCMODE) == O_RDONLY;
}

/* "binary+0xoffset (symbol)" for a code address, for the log. */
void mapping_describe_caller(void *caller, char *buf, size_t size)
{
	Dl_info info;
	if (!caller || !dladdr(caller, &info) || !info.dli_fname) {
		snprintf(buf, size, "%p", caller);
		return;
	}
	const char *base = strrchr(info.dli_fname, '/');
	base = base ? base + 1 : info.dli_fname;
	if (info.dli_sname)
		snprintf(buf, size, "%s+%#lx (%s+%#lx)", base,
			 (unsigned long)((char *)caller - (char *)info.dli_fbase), info.dli_sname,
			 (unsigned long)((char *)caller - (char *)info.dli_saddr));
	else
		snprintf(buf, size, "%s+%#lx", base,
			 (unsigned long)((char *)caller - (char *)info.dli_fbase));
}

/* A GAIA_VMM_SPAN_ALIGN boundary, and room after the mapping kept
 * reserved up to GAIA_VMM_SPAN_MIN from its start (or the next 2 MiB
 * boundary past its end, if further): the device replica of a region can
 * then be mapped at the region's own address, in a reservation the driver
 * places where it is asked to (DESIGN §3.2), and that room is most likely
 * still free when it happens. The room costs address space, no memory. */
#define PLACEMENT_ALIGN GAIA_VMM_SPAN_ALIGN
#define PLACEMENT_GRANULE (2ul << 20)

void mapping_place(size_t len, struct placement *place)
{
	memset(place, 0, sizeof(*place));
	/* Under an address-space limit (RLIMIT_AS, ulimit -v) the span
	 * reserved here and the room kept after the mapping (up to 32 MiB
	 * per mapping) count against the program's own limit: a program
	 * mapping many small files would get ENOMEM from mmap (or malloc)
	 * where it does not without the shim. There the mapping goes where
	 * the kernel puts it. */
	struct rlimit as;
	if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
		return;
	size_t rounded = (len + GAIA_PAGE - 1) & ~(GAIA_PAGE - 1);
	if (!rounded || rounded > SIZE_MAX - 2 * PLACEMENT_ALIGN)
		return;
	size_t aligned = (rounded + PLACEMENT_GRANULE - 1) & ~(PLACEMENT_GRANULE - 1);
	if (aligned < GAIA_VMM_SPAN_MIN)
		aligned = GAIA_VMM_SPAN_MIN;
	size_t span = aligned + PLACEMENT_ALIGN;
	void *r = REAL(mmap)(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED)
		return;
	uintptr_t a = ((uintptr_t)r + PLACEMENT_ALIGN - 1) & ~(PLACEMENT_ALIGN - 1);
	place->addr = (void *)a;
	place->reserved = r;
	place->reserved_len = span;
	place->len = rounded;
	place->aligned_len = aligned;
}

void mapping_place_done(struct placement *place, void *mapped)
{
	uintptr_t r = (uintptr_t)place->reserved, end = r + place->reserved_len;
	if (mapped == MAP_FAILED) {
		REAL(munmap)(place->reserved, place->reserved_len);
		return;
	}
	uintptr_t a = (uintptr_t)place->addr;
	if (a > r)
		REAL(munmap)((void *)r, a - r);
	if (a + place->aligned_len < end)
		REAL(munmap)((void *)(a + place->aligned_len), end - (a + place->aligned_len));
	/* The room after the mapping stays reserved (PROT_NONE): the
	 * padding, given to the mapping so nothing else lands where its
	 * device replica's reservation will be. */
	place->pad_start = a + place->len;
	place->pad_len = place->aligned_len - place->len;
}

/* --- padding after placed mappings --- */

/* The paddings, for the mmap hook to look at without the mapping lock: a
 * driver's fixed mappings in its own reservations (the simulator's, while
 * it holds a lock of its own that the shim's calls into it wait for
 * under the mapping lock) never land on one, and must not wait for the
 * mapping lock. Written under the mapping lock; more paddings than slots
 * make every fixed mapping look (take the lock). */
#define PAD_SLOTS 128
static uintptr_t pad_slot_start[PAD_SLOTS], pad_slot_end[PAD_SLOTS];
static unsigned pads_unslotted;

static void pad_noted(uintptr_t start, size_t len)
{
	for (int i = 0; i < PAD_SLOTS; i++) {
		if (!__atomic_load_n(&pad_slot_end[i], __ATOMIC_RELAXED)) {
			__atomic_store_n(&pad_slot_start[i], start, __ATOMIC_RELAXED);
			__atomic_store_n(&pad_slot_end[i], start + len, __ATOMIC_RELEASE);
			return;
		}
	}
	__atomic_add_fetch(&pads_unslotted, 1, __ATOMIC_RELEASE);
}

void mapping_padding_gone(uintptr_t start, size_t len)
{
	for (int i = 0; i < PAD_SLOTS; i++) {
		if (__atomic_load_n(&pad_slot_end[i], __ATOMIC_RELAXED) == start + len &&
		    __atomic_load_n(&pad_slot_start[i], __ATOMIC_RELAXED) == start) {
			__atomic_store_n(&pad_slot_end[i], 0, __ATOMIC_RELEASE);
			return;
		}
	}
	__atomic_sub_fetch(&pads_unslotted, 1, __ATOMIC_RELEASE);
}

bool mapping_padding_near(const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr, b = a + len;
	if (__atomic_load_n(&pads_unslotted, __ATOMIC_ACQUIRE))
		return true;
	for (int i = 0; i < PAD_SLOTS; i++) {
		uintptr_t end = __atomic_load_n(&pad_slot_end[i], __ATOMIC_ACQUIRE);
		uintptr_t start = __atomic_load_n(&pad_slot_start[i], __ATOMIC_RELAXED);
		/* A slot changing meanwhile counts as near: the lock decides. */
		if (end && (end != __atomic_load_n(&pad_slot_end[i], __ATOMIC_ACQUIRE) || (a < end && b > start)))
			return true;
	}
	return false;
}

void mapping_take_padding(void *addr, uintptr_t pad_start, size_t pad_len)
{
	mapping_lock_take();
	for (struct gaia_mapping *m = mappings; m; m = m->next) {
		if (m->start == (uintptr_t)addr) {
			m->pad_start = pad_start;
			m->pad_len = pad_len;
			pad_noted(pad_start, pad_len);
			pad_len = 0;
			break;
		}
	}
	mapping_lock_give();
	if (pad_len)
		REAL(munmap)((void *)pad_start, pad_len);
}

void mapping_padding_kept(struct gaia_mapping *m, uintptr_t start, size_t len)
{
	m->pad_start = start;
	m->pad_len = len;
	pad_noted(start, len);
}

void mapping_release_padding(const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr, b = a + len;
	if (!mapping_padding_near(addr, len))
		return; /* no lock: a driver may call this holding its own */
	mapping_lock_take();
	for (struct gaia_mapping *m = mappings; m; m = m->next) {
		if (m->pad_len && a < m->pad_start + m->pad_len && b > m->pad_start) {
			REAL(munmap)((void *)m->pad_start, m->pad_len);
			mapping_padding_gone(m->pad_start, m->pad_len);
			m->pad_len = 0;
		}
	}
	mapping_lock_give();
}
