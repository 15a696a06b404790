/* syscall_interposer — a program run with an interposer built on syscall()
 * loaded after libgaia.so (syscall_interposer_lib.c): it maps a file (a
 * managed mapping), stores into it, pwrites to it, reads it back through
 * the mapping and through syscall(SYS_pread64), and unmaps it. Exit 0 when
 * every byte is what was written; a loop between the shim's hooks and the
 * interposer ends in a stack overflow instead. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BYTES (64 << 10)

static int fail(const char *what)
{
	fprintf(stderr, "FAIL syscall_interposer: %s: %s\n", what, strerror(errno));
	return 1;
}

int main(void)
{
	char path[] = "/tmp/gaia-syscall-interposer-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		return fail("mkstemp");
	unlink(path);
	if (ftruncate(fd, BYTES))
		return fail("ftruncate");
	unsigned char *m = mmap(NULL, BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return fail("mmap");
	memset(m, 0x11, BYTES / 2);
	unsigned char page[4096];
	memset(page, 0x22, sizeof(page));
	if (pwrite(fd, page, sizeof(page), BYTES / 2) != (ssize_t)sizeof(page))
		return fail("pwrite");
	unsigned char back[4096];
	if (syscall(SYS_pread64, fd, back, sizeof(back), 0) != (long)sizeof(back))
		return fail("syscall(SYS_pread64)");
	for (size_t i = 0; i < BYTES / 2 + sizeof(page); i++) {
		unsigned char want = i < BYTES / 2 ? 0x11 : 0x22;
		if (m[i] != want || (i < sizeof(back) && back[i] != want)) {
			fprintf(stderr, "FAIL syscall_interposer: byte %zu is %#x, want %#x\n", i, m[i], want);
			return 1;
		}
	}
	if (munmap(m, BYTES))
		return fail("munmap");
	close(fd);
	printf("ok syscall_interposer\n");
	return 0;
}
