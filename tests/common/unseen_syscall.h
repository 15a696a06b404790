/* A system call no preloaded library sees: the syscall instruction itself,
 * as made by a writer not under the shim (a process without it, code that
 * issues the instruction) or by glibc's own mmap for malloc arenas and
 * thread stacks. syscall() is interposed by the shim like the functions it
 * stands for. Returns what syscall() would: -1 and errno on failure. For C
 * and C++ (tests/programs compile it with g++ and nvcc). */
#ifndef GAIA_TESTS_UNSEEN_SYSCALL_H
#define GAIA_TESTS_UNSEEN_SYSCALL_H

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

static inline long unseen_syscall(long nr, long a, long b, long c, long d, long e, long f)
{
#if defined(__x86_64__)
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	if (ret < 0 && ret > -4096) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
#else
#error "unseen_syscall: the instruction is written for x86-64"
#endif
}

#endif
