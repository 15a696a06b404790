/* odd_sizes — files whose sizes are not multiples of 2 MiB (and one that
 * is), each mmap'ed and handed to a kernel for the first time: 4 KiB,
 * 1 MiB + 4 KiB, 3 MiB + 12 KiB, 5 MiB - 4 KiB, 2 MiB. Two passes: the
 * first maps each file and launches on it at once (earlier files stay
 * mapped), the second maps all five and then launches on each. The kernel
 * adds the byte's index to every byte; after cudaDeviceSynchronize the
 * mapping and pread() must show it.
 *
 * Prints "file PATH SIZE" for each file; odd_sizes_repeat.sh runs it many
 * times and checks in the shim's log (GAIA_LOG=info) which backing each
 * file got.
 *
 * With argument "churn", another thread maps and unmaps anonymous memory
 * in a loop all along (until the files are unmapped), through the system
 * call itself as glibc does for large blocks, stacks and malloc arenas
 * (calls no preloaded library sees): 64 KiB to 128 MiB, where the kernel
 * likes, or with the address of the file being launched on, or just past
 * its end, as a hint (the kernel takes a hint when the range is free). The
 * address space changes under the shim while it places device copies and
 * takes them down: each file must still get its own address, and the
 * thread's mappings must keep their bytes.
 */
#include <stdint.h>
#include <pthread.h>
#include <sys/syscall.h>

#include "programs.h"
#include "../common/unseen_syscall.h"

#define NFILES 5
static const size_t sizes[NFILES] = {
	4 << 10, (1 << 20) + (4 << 10), (3 << 20) + (12 << 10), (5 << 20) - (4 << 10), 2 << 20,
};

__global__ void add_index(unsigned char *m, unsigned long long n)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < n; i += (unsigned long long)gridDim.x * blockDim.x)
		m[i] = (unsigned char)(m[i] + (unsigned char)(i % 253));
}
SIMGPU_KERNEL(add_index);

static unsigned char initial(size_t i)
{
	return (unsigned char)(i * 31 + (i >> 12));
}

struct file {
	char path[256];
	int fd;
	size_t size;
	unsigned char *m;
	int unmapping; /* atomic: set before munmap */
};

static struct file *launching; /* atomic: the file being launched on or unmapped */

static void open_one(struct file *f, size_t size)
{
	f->size = size;
	f->fd = make_file_with(size, initial, f->path);
	f->m = (unsigned char *)map_file(f->fd, size);
	printf("file %s %zu\n", f->path, size);
	fflush(stdout);
}

static void launch_one(struct file *f)
{
	/* A CPU store through the mapping before the first launch. */
	f->m[f->size - 1] = 0x77;
	step = f->path;
	__atomic_store_n(&launching, f, __ATOMIC_RELEASE);
	SIMGPU_LAUNCH(add_index, 64, 256, 0, 0)(f->m, (unsigned long long)f->size);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	__atomic_store_n(&launching, (struct file *)NULL, __ATOMIC_RELAXED);
}

static void check_one(struct file *f)
{
	unsigned char *buf = (unsigned char *)malloc(f->size);
	pread_all(f->fd, buf, f->size, 0);
	for (size_t i = 0; i < f->size; i++) {
		unsigned char was = i == f->size - 1 ? 0x77 : initial(i);
		unsigned char want = (unsigned char)(was + (unsigned char)(i % 253));
		CHECK(f->m[i] == want, "file of %zu bytes: byte %zu through the mapping is %#x, want %#x", f->size,
		      i, f->m[i], want);
		CHECK(buf[i] == want, "file of %zu bytes: byte %zu read with pread() is %#x, want %#x", f->size, i,
		      buf[i], want);
	}
	free(buf);
}

static int stop_churn; /* atomic */
static unsigned long churned;

/* ThreadSanitizer never sees the system call map or unmap this memory:
 * to it, the thread's stores would race with whatever is mapped there
 * later. The thread's accesses are left out of its view. */
#if defined(__SANITIZE_THREAD__)
#define NOT_SEEN_BY_TSAN __attribute__((no_sanitize("thread")))
#else
#define NOT_SEEN_BY_TSAN
#endif

NOT_SEEN_BY_TSAN static void *churn(void *arg)
{
	(void)arg;
	for (unsigned long k = 0; !__atomic_load_n(&stop_churn, __ATOMIC_RELAXED); k++) {
		static const size_t lens[] = {64ul << 10, 2ul << 20, 128ul << 20};
		size_t len = lens[k % 3];
		struct file *f = __atomic_load_n(&launching, __ATOMIC_ACQUIRE);
		uintptr_t hint = 0;
		if (f && k % 4 == 1)
			hint = (uintptr_t)f->m;
		else if (f && k % 4 == 2)
			hint = ((uintptr_t)f->m + f->size + 4095) & ~(uintptr_t)4095;
		long p = unseen_syscall(SYS_mmap, (long)hint, (long)len, PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		CHECK(p != -1, "mmap of %zu bytes: %s", len, strerror(errno));
		CHECK(!f || k % 4 != 1 || (uintptr_t)p != hint || __atomic_load_n(&f->unmapping, __ATOMIC_ACQUIRE),
		      "a mapping of %zu bytes asked for %s's address (%#lx) got it while the file was mapped there: "
		      "its range was free for a moment", len, f->path, (unsigned long)hint);
		volatile unsigned char *b = (volatile unsigned char *)p;
		b[0] = 1;
		b[len - 1] = 2;
		sched_yield();
		CHECK(b[0] == 1 && b[len - 1] == 2, "the churn thread's mapping of %zu bytes lost its bytes", len);
		CHECK(unseen_syscall(SYS_munmap, p, (long)len, 0, 0, 0, 0) == 0, "munmap: %s", strerror(errno));
		churned++;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	watchdog(60);
	CUDA_OK(cudaSetDevice(0));
	pthread_t churner;
	bool churning = argc > 1 && strcmp(argv[1], "churn") == 0;
	if (churning)
		CHECK(pthread_create(&churner, NULL, churn, NULL) == 0, "pthread_create");
	static struct file files[2 * NFILES];
	for (int f = 0; f < NFILES; f++) {	/* map, launch; map, launch; ... */
		open_one(&files[f], sizes[f]);
		launch_one(&files[f]);
	}
	for (int f = 0; f < NFILES; f++)	/* map all, then launch on each */
		open_one(&files[NFILES + f], sizes[f]);
	for (int f = 0; f < NFILES; f++)
		launch_one(&files[NFILES + f]);
	for (int f = 0; f < 2 * NFILES; f++)
		check_one(&files[f]);
	for (int f = 0; f < 2 * NFILES; f++) {
		__atomic_store_n(&launching, &files[f], __ATOMIC_RELEASE);
		__atomic_store_n(&files[f].unmapping, 1, __ATOMIC_RELEASE);
		munmap(files[f].m, files[f].size);
		__atomic_store_n(&launching, (struct file *)NULL, __ATOMIC_RELAXED);
		close(files[f].fd);
		unlink(files[f].path);
	}
	if (churning) {
		__atomic_store_n(&stop_churn, 1, __ATOMIC_RELAXED);
		pthread_join(churner, NULL);
		printf("churn: %lu mappings made and unmapped meanwhile\n", churned);
	}
	printf("ok odd_sizes\n");
	return 0;
}
