/* fd_reuse — writes into a mapped file through descriptors that reached it
 * in ways a program takes for granted: a descriptor number that stdio
 * closed (fdopen + fclose) and open() handed out again for the mapped file,
 * and a raw write(2) system call. The kernel launched next must see the
 * bytes written, as the CPU does through the mapping.
 *
 * The file is mapped and launched on first, so a device holds a copy of
 * every page; each case then writes a new pattern into one page with
 * write() and checks what a kernel reads there.
 */
#include <sys/syscall.h>

#include "programs.h"

#define PAGES 16
#define BYTES (PAGES * PAGE)

/* sums[0] = sum of the ints of page `page` of the file */
__global__ void page_sum(const int *file, int page, long long *sums)
{
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		long long s = 0;
		for (int i = 0; i < PAGE / 4; i++)
			s += file[page * (PAGE / 4) + i];
		sums[0] = s;
	}
}
SIMGPU_KERNEL(page_sum);

static long long device_sum(const int *map, int page, long long *dsum)
{
	SIMGPU_LAUNCH(page_sum, 1, 1, 0, 0)(map, page, dsum);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	long long s = 0;
	CUDA_OK(cudaMemcpy(&s, dsum, sizeof(s), cudaMemcpyDeviceToHost));
	return s;
}

static void fill_page(int *buf, int value)
{
	for (int i = 0; i < PAGE / 4; i++)
		buf[i] = value;
}

int main(void)
{
	watchdog(60);
	char path[256];
	int fd = make_file_with(BYTES, NULL, path);
	int *map = (int *)map_file(fd, BYTES);
	long long *dsum;
	CUDA_OK(cudaMalloc((void **)&dsum, sizeof(long long)));

	step = "first launch";
	map[3 * PAGE / 4] = 5;
	CHECK(device_sum(map, 3, dsum) == 5, "the kernel did not see the CPU's store");

	static int page[PAGE / 4];

	/* 1. A pipe's write end is written (the shim meets that number), then
	 * closed by stdio; open() gives the number to the mapped file. */
	step = "number reused after fclose";
	int p[2];
	CHECK(pipe(p) == 0, "pipe: %s", strerror(errno));
	CHECK(write(p[1], "x", 1) == 1, "write to the pipe: %s", strerror(errno));
	FILE *f = fdopen(p[1], "w");
	CHECK(f != NULL, "fdopen: %s", strerror(errno));
	CHECK(fclose(f) == 0, "fclose: %s", strerror(errno));
	int again = open(path, O_RDWR);
	CHECK(again >= 0, "open %s: %s", path, strerror(errno));
	if (again != p[1]) {
		fprintf(stderr, "SKIP: open returned %d, not the number fclose freed (%d)\n", again, p[1]);
		return 77;
	}
	fill_page(page, 7);
	CHECK(lseek(again, 3 * PAGE, SEEK_SET) == 3 * PAGE, "lseek: %s", strerror(errno));
	CHECK(write(again, page, PAGE) == PAGE, "write: %s", strerror(errno));
	CHECK(map[3 * PAGE / 4] == 7, "the mapping does not show the write()");
	long long s = device_sum(map, 3, dsum);
	CHECK(s == 7LL * (PAGE / 4), "the kernel saw sum %lld for page 3, not %lld: a write() "
	      "through a reused descriptor number was lost", s, 7LL * (PAGE / 4));

	/* 2. write(2) through syscall(), not the libc function (interposed
	 * too: a raw SYS_pwrite64 is a recorded write). */
	step = "raw write system call";
	fill_page(page, 9);
	CHECK(syscall(SYS_pwrite64, again, page, PAGE, 5 * PAGE) == PAGE, "SYS_pwrite64: %s",
	      strerror(errno));
	s = device_sum(map, 5, dsum);
	CHECK(s == 9LL * (PAGE / 4), "the kernel saw sum %lld for page 5, not %lld: a raw "
	      "pwrite64 system call was lost", s, 9LL * (PAGE / 4));

	/* 3. The same number, closed and reopened through libc this time. */
	step = "number reused after close";
	CHECK(close(again) == 0, "close: %s", strerror(errno));
	again = open(path, O_RDWR);
	CHECK(again >= 0, "open %s: %s", path, strerror(errno));
	fill_page(page, 11);
	CHECK(pwrite(again, page, PAGE, 6 * PAGE) == PAGE, "pwrite: %s", strerror(errno));
	s = device_sum(map, 6, dsum);
	CHECK(s == 11LL * (PAGE / 4), "the kernel saw sum %lld for page 6, not %lld", s,
	      11LL * (PAGE / 4));

	close(again);
	close(p[0]);
	munmap(map, BYTES);
	close(fd);
	unlink(path);
	CUDA_OK(cudaFree(dsum));
	printf("ok fd_reuse\n");
	return 0;
}
