/* altstack_overflow — what a program expects: a SIGSEGV handler it
 * installed with SA_ONSTACK|SA_SIGINFO and a sigaltstack, before any CUDA
 * call, is the one that runs when its stack overflows after it used CUDA,
 * on its alternate stack, with the signal mask and flags it asked for.
 *
 * Variants (the handler is installed before CUDA init in each):
 *   plain      the handler writes "caught" to stderr and _exit(42);
 *   mask       sa_mask holds SIGUSR1: inside the handler SIGUSR1 (and
 *              SIGSEGV, no SA_NODEFER) must be blocked, then _exit(42);
 *   resethand  SA_RESETHAND: the handler siglongjmps out of the first
 *              overflow; the second overflow must kill the process with
 *              SIGSEGV (the disposition is back to the default).
 * In every variant the handler also checks that it runs on the program's
 * alternate stack and that siginfo describes a fault (si_signo SIGSEGV,
 * si_code SEGV_MAPERR or SEGV_ACCERR); a failed check writes what differed
 * and exits with its own status.
 * The handler also writes a byte to a pipe each time it runs; the parent
 * counts them: exactly one call in every variant.
 * Each variant runs twice: "exec" — this program runs itself again; that
 * process installs the handler, does the CUDA work (gpu_touch.h) and
 * overflows its stack; "fork" — that process installs the handler, does
 * the CUDA work and forks a child (no CUDA) that overflows.
 *
 *   altstack_overflow [--managed]   --managed: cudaMallocManaged memory
 *                                   instead of a mapped file (no shim needed)
 */
#include <pthread.h>
#include <setjmp.h>

#include "gpu_touch.h"

#define EXIT_CAUGHT 42
#define EXIT_NOT_MASKED 43
#define EXIT_TWICE 44
#define EXIT_NOT_ON_ALTSTACK 45
#define EXIT_NOT_A_FAULT 46

static char altstack[256 << 10];
static sigjmp_buf again;
static volatile sig_atomic_t handled;
static const char *variant;
static int report_fd = -1;	/* the handler writes one byte here per call */

static void say(const char *s)
{
	(void)!write(2, s, strlen(s));
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	char here;
	handled++;
	(void)!write(report_fd, "h", 1);
	if (handled > 1) {
		say("FAIL: the SA_RESETHAND handler ran for a second SIGSEGV\n");
		_exit(EXIT_TWICE);
	}
	if (&here < altstack || &here >= altstack + sizeof(altstack)) {
		say("FAIL: the SA_ONSTACK handler does not run on the program's alternate stack\n");
		_exit(EXIT_NOT_ON_ALTSTACK);
	}
	if (sig != SIGSEGV || si->si_signo != SIGSEGV || (si->si_code != SEGV_MAPERR && si->si_code != SEGV_ACCERR)) {
		say("FAIL: the handler's siginfo does not describe a stack overflow fault (si_signo SIGSEGV, "
		    "si_code SEGV_MAPERR or SEGV_ACCERR)\n");
		_exit(EXIT_NOT_A_FAULT);
	}
	if (strcmp(variant, "mask") == 0) {
		sigset_t cur;
		pthread_sigmask(SIG_BLOCK, NULL, &cur);
		if (!sigismember(&cur, SIGUSR1)) {
			say("FAIL: SIGUSR1, in the handler's sa_mask, is not blocked while it runs\n");
			_exit(EXIT_NOT_MASKED);
		}
		if (!sigismember(&cur, SIGSEGV)) {
			say("FAIL: SIGSEGV is not blocked while its handler (no SA_NODEFER) runs\n");
			_exit(EXIT_NOT_MASKED);
		}
	}
	if (strcmp(variant, "resethand") == 0) {
		say("caught (first overflow), jumping out\n");
		siglongjmp(again, 1);
	}
	say("caught\n");
	_exit(EXIT_CAUGHT);
}

static void install_handler(void)
{
	stack_t ss = {};
	ss.ss_sp = altstack;
	ss.ss_size = sizeof(altstack);
	CHECK(sigaltstack(&ss, NULL) == 0, "sigaltstack: %s", strerror(errno));
	struct sigaction sa = {};
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_ONSTACK | SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	if (strcmp(variant, "mask") == 0)
		sigaddset(&sa.sa_mask, SIGUSR1);
	if (strcmp(variant, "resethand") == 0)
		sa.sa_flags |= SA_RESETHAND;
	CHECK(sigaction(SIGSEGV, &sa, NULL) == 0, "sigaction: %s", strerror(errno));
}

static volatile int sink;

/* Recurses until the stack runs out (the depth test never ends it). */
__attribute__((noinline)) static int recurse(int depth)
{
	volatile char pad[2048];
	pad[0] = (char)depth;
	pad[sizeof(pad) - 1] = (char)depth;
	if (depth < 0)
		return 0;
	return recurse(depth + 1) + pad[depth % sizeof(pad)];
}

static void overflow(void)
{
	if (strcmp(variant, "resethand") == 0 && sigsetjmp(again, 1) != 0) {
		/* Back from the first overflow: the handler was reset. */
		sink = recurse(0);
		say("FAIL: survived the second stack overflow\n");
		_exit(0);
	}
	sink = recurse(0);
	say("FAIL: survived a stack overflow\n");
	_exit(0);
}

/* "child exec VARIANT FD": install, CUDA work, overflow.
 * "child fork VARIANT FD": install, CUDA work, fork a child that overflows;
 * exit with the child's exit status, or 128 + its signal. */
static int child(const char *flavor, int managed)
{
	install_handler();
	alarm(30);
	no_core_dumps();
	gpu_touch(managed);
	if (strcmp(flavor, "exec") == 0)
		overflow();
	fflush(NULL);
	pid_t pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		alarm(30);
		overflow();
	}
	int status = wait_child(pid, 40, "the forked child");
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

int main(int argc, char **argv)
{
	int managed = argc > 1 && strcmp(argv[argc - 1], "--managed") == 0;
	if (argc > 4 && strcmp(argv[1], "child") == 0) {
		variant = argv[3];
		report_fd = atoi(argv[4]);
		signal(SIGALRM, SIG_DFL);
		return child(argv[2], managed);
	}

	watchdog(170);
	static const char *const variants[] = { "plain", "mask", "resethand" };
	static const char *const flavors[] = { "exec", "fork" };
	int failures = 0, runs = 0;
	for (const char *v : variants) {
		for (const char *f : flavors) {
			step = "a child overflows its stack";
			int report[2];
			CHECK(pipe(report) == 0, "pipe: %s", strerror(errno));
			char fdarg[16];
			snprintf(fdarg, sizeof(fdarg), "%d", report[1]);
			const char *args[] = { "child", f, v, fdarg, managed ? "--managed" : NULL, NULL };
			char what[160], got[160];
			snprintf(what, sizeof(what), "%s handler, %s", v,
				 strcmp(f, "exec") == 0 ? "the process that did the CUDA work overflows"
							: "a child forked after the CUDA work overflows");
			pid_t pid = run_self(args);
			close(report[1]);
			int status = wait_child(pid, 60, what);
			fcntl(report[0], F_SETFL, O_NONBLOCK);
			char calls[16];
			ssize_t ncalls = read(report[0], calls, sizeof(calls));
			if (ncalls < 0)
				ncalls = 0;
			close(report[0]);
			int reset = strcmp(v, "resethand") == 0;
			int ok;
			const char *want;
			if (!reset) {
				ok = WIFEXITED(status) && WEXITSTATUS(status) == EXIT_CAUGHT;
				want = "exit 42 from the program's handler";
			} else if (strcmp(f, "exec") == 0) {
				ok = WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV;
				want = "killed by SIGSEGV at the second overflow";
			} else {
				ok = WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGSEGV;
				want = "the forked child killed by SIGSEGV at the second overflow (exit 139)";
			}
			describe_status(status, got, sizeof(got));
			snprintf(got + strlen(got), sizeof(got) - strlen(got), ", the program's handler ran %d time(s)",
				 (int)ncalls);
			ok = ok && ncalls == 1;
			runs++;
			if (ok) {
				printf("%s: %s\n", what, got);
			} else {
				fprintf(stderr, "FAIL: %s: %s, want %s, the handler run once\n", what, got, want);
				failures++;
			}
			fflush(stdout);
		}
	}
	CHECK(failures == 0, "%d of %d stack overflows did not end as the program's handler says", failures, runs);
	printf("ok altstack_overflow\n");
	return 0;
}
