/* sigsegv_raise — what a program expects: a SIGSEGV it sends itself with
 * raise(), kill(getpid(), ...) or sigqueue() kills it, as the default
 * disposition says, after it has used CUDA. No program handler is
 * installed; whatever handler CUDA (or a shim) put in place for its own
 * faults must not swallow a signal that is not one of them.
 *
 * For each way of sending: (a) this program runs itself again ("child
 * HOW"): that process does the CUDA work (gpu_touch.h) and then sends
 * itself SIGSEGV — the process that launched is the one signalled;
 * (b) after doing the CUDA work itself, it forks (no CUDA in the child)
 * and the child sends itself SIGSEGV. Each must end killed by SIGSEGV; a
 * child that survives exits 0 saying so.
 *
 *   sigsegv_raise [--managed]   --managed: cudaMallocManaged memory instead
 *                               of a mapped file (runs without a shim)
 */
#include "gpu_touch.h"

static const char *const hows[] = { "raise", "kill", "sigqueue" };

static void send_sigsegv(const char *how)
{
	if (strcmp(how, "raise") == 0) {
		raise(SIGSEGV);
	} else if (strcmp(how, "kill") == 0) {
		kill(getpid(), SIGSEGV);
	} else {
		union sigval v;
		v.sival_int = 7;
		sigqueue(getpid(), SIGSEGV, v);
	}
	/* A process-directed signal may be taken by another thread: give it
	 * time to arrive. */
	usleep(200000);
	fprintf(stderr, "process %d survived SIGSEGV sent by %s()\n", (int)getpid(), how);
	_exit(0);
}

static int expect_sigsegv(pid_t pid, const char *what)
{
	int status = wait_child(pid, 40, what);
	char d[100];
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV) {
		printf("%s: killed by SIGSEGV, as without CUDA\n", what);
		return 0;
	}
	fprintf(stderr, "FAIL: %s: %s, want killed by SIGSEGV (the default disposition)\n", what,
		describe_status(status, d, sizeof(d)));
	return 1;
}

int main(int argc, char **argv)
{
	int managed = argc > 1 && strcmp(argv[argc - 1], "--managed") == 0;
	if (argc > 2 && strcmp(argv[1], "child") == 0) {
		watchdog(30);
		no_core_dumps();
		gpu_touch(managed);
		send_sigsegv(argv[2]);
	}

	watchdog(120);
	int failures = 0;
	char what[200];
	for (const char *how : hows) {
		step = "the process that launched sends itself SIGSEGV";
		const char *args[] = { "child", how, managed ? "--managed" : NULL, NULL };
		snprintf(what, sizeof(what), "process that did the CUDA work, then %s(SIGSEGV)", how);
		failures += expect_sigsegv(run_self(args), what);
	}

	gpu_touch(managed);
	for (const char *how : hows) {
		step = "a forked child sends itself SIGSEGV";
		fflush(NULL);
		pid_t pid = fork();
		CHECK(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0) {
			alarm(30);
			no_core_dumps();
			send_sigsegv(how);
		}
		snprintf(what, sizeof(what), "child forked after the CUDA work, then %s(SIGSEGV)", how);
		failures += expect_sigsegv(pid, what);
	}
	CHECK(failures == 0, "%d of %d processes were not killed by the SIGSEGV they sent themselves", failures,
	      2 * (int)(sizeof(hows) / sizeof(hows[0])));
	printf("ok sigsegv_raise\n");
	return 0;
}
