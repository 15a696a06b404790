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
 */
#include "programs.h"

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
};

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
	SIMGPU_LAUNCH(add_index, 64, 256, 0, 0)(f->m, (unsigned long long)f->size);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
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

int main(void)
{
	watchdog(60);
	CUDA_OK(cudaSetDevice(0));
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
		munmap(files[f].m, files[f].size);
		close(files[f].fd);
		unlink(files[f].path);
	}
	printf("ok odd_sizes\n");
	return 0;
}
