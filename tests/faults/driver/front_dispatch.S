/* The common path of every trampoline of the fault-injecting libcuda.so.1
 * (x86-64 System V). %r11 holds the function's index. front_decide (C)
 * gets the index and the caller's return address and answers the real
 * function to jump to, or NULL to fail the call: then front_error (the
 * CUresult to return) is returned without calling anything. Argument
 * registers (integer and vector) are kept across the decision. */
	.text
	.globl	front_dispatch
	.hidden	front_dispatch
	.type	front_dispatch, @function
front_dispatch:
	.cfi_startproc
	pushq	%rbp
	.cfi_adjust_cfa_offset 8
	movq	%rsp, %rbp
	subq	$192, %rsp
	movq	%rdi, 0(%rsp)
	movq	%rsi, 8(%rsp)
	movq	%rdx, 16(%rsp)
	movq	%rcx, 24(%rsp)
	movq	%r8, 32(%rsp)
	movq	%r9, 40(%rsp)
	movq	%rax, 48(%rsp)
	movdqu	%xmm0, 64(%rsp)
	movdqu	%xmm1, 80(%rsp)
	movdqu	%xmm2, 96(%rsp)
	movdqu	%xmm3, 112(%rsp)
	movdqu	%xmm4, 128(%rsp)
	movdqu	%xmm5, 144(%rsp)
	movdqu	%xmm6, 160(%rsp)
	movdqu	%xmm7, 176(%rsp)
	movl	%r11d, %edi
	movq	8(%rbp), %rsi			/* the caller's return address */
	call	front_decide
	movq	%rax, %r11
	movq	0(%rsp), %rdi
	movq	8(%rsp), %rsi
	movq	16(%rsp), %rdx
	movq	24(%rsp), %rcx
	movq	32(%rsp), %r8
	movq	40(%rsp), %r9
	movq	48(%rsp), %rax
	movdqu	64(%rsp), %xmm0
	movdqu	80(%rsp), %xmm1
	movdqu	96(%rsp), %xmm2
	movdqu	112(%rsp), %xmm3
	movdqu	128(%rsp), %xmm4
	movdqu	144(%rsp), %xmm5
	movdqu	160(%rsp), %xmm6
	movdqu	176(%rsp), %xmm7
	movq	%rbp, %rsp
	popq	%rbp
	.cfi_adjust_cfa_offset -8
	testq	%r11, %r11
	jz	1f
	jmp	*%r11
1:
	movl	front_error(%rip), %eax
	ret
	.cfi_endproc
	.size	front_dispatch, .-front_dispatch
	.section .note.GNU-stack,"",@progbits
