/* outside_writer — a file a GPU works on is also written by someone the
 * shim does not see. A program expects the next kernel to read the file
 * as it is then.
 *
 * The file (4 pages) is mapped MAP_SHARED; a kernel writes every word of
 * it, cudaDeviceSynchronize brings the results to the mapping. Then, for
 * each round, the outside writer replaces page 0 (and, every other round,
 * page 2) with new bytes, and a kernel copies the file's first word of
 * each page out: it must see the outside writer's bytes. Last, the
 * outside writer replaces page 1 while a kernel that stores into another
 * word of page 1 runs: after the sync the mapping holds both, and the
 * next kernel reads the writer's bytes. The writer:
 *   exec  another program (this one, run without LD_PRELOAD) pwrite()s;
 *   asm   a pwrite64 system call made with the syscall instruction
 *         (x86-64; as Go programs and io_uring users write), right before
 *         the launch: within the kernel's file-time granularity of the
 *         previous launch's look at the file.
 */
#include <sys/syscall.h>
#include <sys/wait.h>

#include "programs.h"

#define PAGES 4u
#define WORDS (PAGES * 1024u)
#define ROUNDS 12

__global__ void fill(unsigned *w, unsigned n, unsigned v)
{
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		w[i] = v + i;
}
SIMGPU_KERNEL(fill);

/* out[p] = w[p * 1024] for each page p. */
__global__ void firsts(const unsigned *w, unsigned *out, unsigned pages)
{
	for (unsigned p = blockIdx.x * blockDim.x + threadIdx.x; p < pages; p += gridDim.x * blockDim.x)
		out[p] = w[p * 1024u];
}
SIMGPU_KERNEL(firsts);

/* Spins for ns, then w[i] = v. */
__global__ void late_store(unsigned *w, unsigned i, unsigned v, long long ns)
{
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		long long t0 = clock64();
		while (clock64() - t0 < ns)
			;
		w[i] = v;
	}
}
SIMGPU_KERNEL(late_store);

static char path[256];

/* The outside writer: page p of the file becomes page[]. */
static void outside_write(const char *how, unsigned p, const unsigned *page)
{
	if (strcmp(how, "exec") == 0) {
		char exe[4096], arg_p[32], arg_v[32];
		ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		CHECK(len > 0, "readlink /proc/self/exe: %s", strerror(errno));
		exe[len] = 0;
		snprintf(arg_p, sizeof(arg_p), "%u", p);
		snprintf(arg_v, sizeof(arg_v), "%u", page[0]);
		fflush(NULL);
		pid_t pid = fork();
		CHECK(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0) {
			unsetenv("LD_PRELOAD");
			execl(exe, exe, "--write", path, arg_p, arg_v, (char *)NULL);
			_exit(127);
		}
		int status;
		CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "the outside writer (this program without the shim) failed");
		return;
	}
#if defined(__x86_64__)
	long ret;
	long fd_arg = open(path, O_RDWR);
	CHECK(fd_arg >= 0, "open %s: %s", path, strerror(errno));
	register long r10 __asm__("r10") = (long)(p * PAGE);
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"((long)SYS_pwrite64), "D"(fd_arg), "S"(page), "d"((long)PAGE), "r"(r10)
			 : "rcx", "r11", "memory");
	close((int)fd_arg);
	CHECK(ret == (long)PAGE, "pwrite64 by the syscall instruction returned %ld", ret);
#else
	(void)p;
	(void)page;
	printf("skip: the asm writer is x86-64 only\n");
	exit(77);
#endif
}

/* Run without the shim: page p of the file becomes the words v, v + 1, ... */
static int write_page(char **argv)
{
	unsigned p = (unsigned)strtoul(argv[3], NULL, 10), v = (unsigned)strtoul(argv[4], NULL, 10);
	static unsigned page[1024];
	for (unsigned i = 0; i < 1024; i++)
		page[i] = v + i;
	int fd = open(argv[2], O_RDWR);
	if (fd < 0 || pwrite(fd, page, sizeof(page), (off_t)(p * PAGE)) != (ssize_t)sizeof(page))
		return 1;
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "--write") == 0)
		return write_page(argv);
	const char *how = argc > 1 ? argv[1] : "exec";
	CHECK(strcmp(how, "exec") == 0 || strcmp(how, "asm") == 0, "unknown writer %s (exec, asm)", how);
	watchdog(60);
	int fd = make_file_with(PAGES * PAGE, NULL, path);
	unsigned *w = (unsigned *)map_file(fd, PAGES * PAGE);
	unsigned *out;
	CUDA_OK(cudaMalloc((void **)&out, PAGES * sizeof(unsigned)));
	step = "a kernel writes the file";
	SIMGPU_LAUNCH(fill, 4, 128, 0, 0)(w, WORDS, 1000u);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	CHECK(w[5] == 1005, "the mapping holds %u after the kernel, not 1005", w[5]);
	unsigned want[PAGES];
	for (unsigned p = 0; p < PAGES; p++)
		want[p] = 1000u + p * 1024u;
	static unsigned page[1024];
	for (unsigned r = 0; r < ROUNDS; r++) {
		step = "the outside writer, then a kernel reads";
		for (unsigned p = 0; p < PAGES; p += (r % 2) ? 2 : 4) {
			for (unsigned i = 0; i < 1024; i++)
				page[i] = 0xabc00000u + r * 16 + p + i;
			outside_write(how, p, page);
			want[p] = page[0];
		}
		SIMGPU_LAUNCH(firsts, 1, 32, 0, 0)(w, out, PAGES);
		CUDA_OK(cudaGetLastError());
		CUDA_OK(cudaDeviceSynchronize());
		unsigned got[PAGES];
		CUDA_OK(cudaMemcpy(got, out, sizeof(got), cudaMemcpyDeviceToHost));
		for (unsigned p = 0; p < PAGES; p++)
			CHECK(got[p] == want[p], "round %u: a kernel read %#x as page %u's first word; the file "
						 "holds %#x (written outside the shim before the launch)",
			      r, got[p], p, want[p]);
	}
	/* The outside writer while a kernel writes another word of the same
	 * page: the sync merges the kernel's word into the page the writer
	 * left, and the next kernel reads the writer's bytes. */
	step = "the outside writer while a kernel writes the same page";
	SIMGPU_LAUNCH(late_store, 1, 32, 0, 0)(w, 1024u + 1u, 0x12345678u, 300000000ll);
	CUDA_OK(cudaGetLastError());
	usleep(50000);
	for (unsigned i = 0; i < 1024; i++)
		page[i] = 0xdef00000u + i;
	outside_write(how, 1, page);
	CUDA_OK(cudaDeviceSynchronize());
	CHECK(w[1024] == 0xdef00000u && w[1026] == 0xdef00002u,
	      "after the sync the mapping holds %#x, %#x in page 1, not the outside writer's %#x, %#x", w[1024],
	      w[1026], 0xdef00000u, 0xdef00002u);
	CHECK(w[1025] == 0x12345678u, "after the sync page 1's word 1 is %#x, not the kernel's 0x12345678", w[1025]);
	SIMGPU_LAUNCH(firsts, 1, 32, 0, 0)(w, out, PAGES);
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaDeviceSynchronize());
	unsigned got[PAGES];
	CUDA_OK(cudaMemcpy(got, out, sizeof(got), cudaMemcpyDeviceToHost));
	CHECK(got[1] == 0xdef00000u, "a kernel after that sync read %#x as page 1's first word; the file "
				     "holds %#x (the outside writer's, written while the kernel before ran)",
	      got[1], 0xdef00000u);
	munmap(w, PAGES * PAGE);
	close(fd);
	unlink(path);
	printf("ok outside_writer %s\n", how);
	return 0;
}
