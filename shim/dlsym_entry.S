/* The shim's dlsym (x86-64 System V).
 *
 * glibc resolves dlsym(RTLD_NEXT, name) and dlsym(RTLD_DEFAULT, name)
 * relative to the object that called it, which it finds from dlsym's
 * return address. A wrapper written in C would make every such lookup look
 * like the shim's own: RTLD_NEXT from the sanitizer runtime, from another
 * interposer or from the shim itself would skip or land on the wrong
 * objects. So the pseudo-handles are not touched here: this entry jumps to
 * the real dlsym with the caller's registers and return address as they
 * came. Only lookups in a real handle (where the caller does not matter)
 * go to gaia_dlsym_handle (cuda_hooks.c), which may put a wrapper in front
 * of a driver entry point.
 *
 * The real dlsym is resolved on first use (gaia_dlsym_resolve: the address
 * is published once, every racer computes the same one), so this works
 * before any constructor of the shim has run, as it must when a sanitizer
 * runtime preloaded ahead of the shim resolves its interceptors.
 */
	.text
	.globl	dlsym
	.type	dlsym, @function
	.hidden	gaia_dlsym_real
	.hidden	gaia_dlsym_resolve
	.hidden	gaia_dlsym_handle
dlsym:
	.cfi_startproc
	cmpq	$-1, %rdi			/* RTLD_NEXT */
	je	1f
	testq	%rdi, %rdi			/* RTLD_DEFAULT */
	je	1f
	jmp	gaia_dlsym_handle		/* a real handle: a tail call */
1:
	movq	gaia_dlsym_real(%rip), %rax
	testq	%rax, %rax
	jz	2f
	jmp	*%rax				/* the caller's own return address */
2:
	/* First use: keep the arguments, keep the stack 16-byte aligned for
	 * the call (8 on entry + 16 pushed + 8), then jump as above. */
	pushq	%rdi
	.cfi_adjust_cfa_offset 8
	pushq	%rsi
	.cfi_adjust_cfa_offset 8
	subq	$8, %rsp
	.cfi_adjust_cfa_offset 8
	call	gaia_dlsym_resolve
	addq	$8, %rsp
	.cfi_adjust_cfa_offset -8
	popq	%rsi
	.cfi_adjust_cfa_offset -8
	popq	%rdi
	.cfi_adjust_cfa_offset -8
	testq	%rax, %rax
	jz	3f
	jmp	*%rax
3:
	ret					/* no dlsym in the process: NULL */
	.cfi_endproc
	.size	dlsym, .-dlsym

	.section .note.GNU-stack, "", @progbits
