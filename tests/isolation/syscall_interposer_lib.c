/* An interposer built on syscall(), as tcmalloc's mmap hooks and tracing
 * libraries are: mmap, munmap and pwrite defined as the raw system call,
 * loaded after libgaia.so. The shim's syscall() must not hand these
 * numbers back to its own hooks when one of them is the call in progress
 * (they would call each other until the stack ran out). */
#define _GNU_SOURCE
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

int munmap(void *addr, size_t len)
{
	return (int)syscall(SYS_munmap, addr, len);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	return syscall(SYS_pwrite64, fd, buf, n, off);
}
