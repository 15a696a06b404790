/* Driver faults (hardening: "the shim degrades the affected region to
 * CPU-only or returns the CUDA error to the application — never corrupts
 * data, never hangs"). Run through the fault-injecting libcuda.so.1
 * (front.c), one failed call per run:
 *
 *   drv_faults --each    lists the driver calls the shim makes in an
 *                        unarmed run (CUFAULT_TRACE), then runs the scenario
 *                        once per call with its first call failed, for
 *                        calls made more than once again with the last one
 *                        failed, and once with every call of it failing
 *                        (a driver that stays broken); prints a table; exit
 *                        0 when every run ended well
 *   drv_faults           the scenario: an mmap'ed file, kernels writing it
 *                        while the CPU writes other bytes of the same pages,
 *                        pwrite, a kernel reading what the CPU wrote, munmap
 *                        and a new mapping. Exit 0: everything as expected;
 *                        10: a CUDA call of the program failed (it says
 *                        which) and the file is consistent; 1: otherwise
 *
 * The file is consistent when every byte holds what the steps completed
 * before the failed one left there, or what the failed step would have
 * written; bytes the CPU stored or wrote are never lost. When the scenario
 * ends (every mapping gone), the simulated device has as much memory
 * allocated as before it began: nothing leaked, unless the call that gives
 * memory back fails for good.
 * A run ends well when it exits 0 or 10 within its time limit, and, when
 * the failed call was the shim's and the program saw no error, the shim
 * said which call failed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "simgpu.h"
#include "simgpu_kernel.h"

#define PAGE 4096
#define PAGES 64
#define BYTES ((size_t)PAGES * PAGE)
#define RUN_LIMIT_S 30

__global__ void write_bytes(unsigned char *dst, unsigned long long from, unsigned long long to, unsigned stride,
			    unsigned phase, unsigned char value)
{
	unsigned long long i = from + (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < to; i += (unsigned long long)gridDim.x * blockDim.x)
		if (i % stride == phase)
			dst[i] = value;
}
SIMGPU_KERNEL(write_bytes);

__global__ void copy_bytes(const unsigned char *src, unsigned char *dst, unsigned long long n)
{
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i < n; i += (unsigned long long)gridDim.x * blockDim.x)
		dst[i] = src[i];
}
SIMGPU_KERNEL(copy_bytes);

/* --- the scenario --- */

static unsigned char expect[BYTES], next_value[BYTES];
static bool may_change[BYTES];
static int step;

/* A kernel write of step `step` to come: bytes [from, to) with i % stride
 * == phase become value, unless the step fails. */
static void plan_kernel_write(size_t from, size_t to, unsigned stride, unsigned phase, unsigned char value)
{
	for (size_t i = from; i < to; i++)
		if (i % stride == phase) {
			may_change[i] = true;
			next_value[i] = value;
		}
}

static void step_done(void)
{
	for (size_t i = 0; i < BYTES; i++)
		if (may_change[i])
			expect[i] = next_value[i];
	memset(may_change, 0, sizeof(may_change));
	step++;
}

/* The file against what is expected; on a failed step, its planned
 * writes may or may not be there. */
static bool file_consistent(int fd)
{
	static unsigned char got[BYTES];
	if (pread(fd, got, BYTES, 0) != (ssize_t)BYTES) {
		printf("drv_faults: pread: %s\n", strerror(errno));
		return false;
	}
	for (size_t i = 0; i < BYTES; i++)
		if (got[i] != expect[i] && !(may_change[i] && got[i] == next_value[i])) {
			printf("drv_faults: CORRUPT: byte %zu (page %zu) is %#x, expected %#x%s (step %d)\n", i,
			       i / PAGE, got[i], expect[i], may_change[i] ? " or the failed step's value" : "", step);
			return false;
		}
	return true;
}

static int fd;

#define CUDA_TRY(call)                                                                                 \
	do {                                                                                           \
		cudaError_t e_ = (call);                                                               \
		if (e_ != cudaSuccess) {                                                               \
			printf("drv_faults: the program's %s failed at step %d: %s\n", #call, step,    \
			       cudaGetErrorName(e_));                                                  \
			return file_consistent(fd) ? 10 : 1;                                           \
		}                                                                                      \
	} while (0)

/* Whether this run fails, for good, a call that gives device memory
 * back (CUFAULT=name:nth:code:0, front.c). */
static bool freeing_fails_for_good(void)
{
	static const char *const freeing[] = {"cuMemFree", "cuMemRelease", "cuMemUnmap", "cuMemAddressFree"};
	const char *f = getenv("CUFAULT");
	const char *times = f ? strrchr(f, ':') : NULL;
	if (!f || !times || strcmp(times, ":0") != 0)
		return false;
	for (size_t i = 0; i < sizeof(freeing) / sizeof(freeing[0]); i++)
		if (strncmp(f, freeing[i], strlen(freeing[i])) == 0)
			return true;
	return false;
}

static int scenario(void)
{
	char path[] = "/tmp/drv_faults.XXXXXX";
	fd = mkstemp(path);
	if (fd < 0)
		return 1;
	unlink(path);
	memset(expect, 0x11, BYTES);
	if (pwrite(fd, expect, BYTES, 0) != (ssize_t)BYTES)
		return 1;
	unsigned char *m = (unsigned char *)mmap(NULL, BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return 1;
	CUDA_TRY(cudaSetDevice(0));
	CUDA_TRY(cudaFree(0)); /* the devices start: their accounting exists */
	struct simgpu_stats at_start, at_end;
	if (simgpu_stats_get(0, &at_start))
		return 1;

	/* 1: the CPU writes the odd bytes of pages 0-31, a kernel the even
	 * bytes of every page; sync. */
	for (size_t i = 1; i < 32 * PAGE; i += 2)
		m[i] = expect[i] = 0x33;
	plan_kernel_write(0, BYTES, 2, 0, 0x22);
	SIMGPU_LAUNCH(write_bytes, 16, 128, 0, 0)(m, 0ull, (unsigned long long)BYTES, 2u, 0u, (unsigned char)0x22);
	CUDA_TRY(cudaGetLastError());
	CUDA_TRY(cudaDeviceSynchronize());
	step_done();

	/* 2: pwrite pages 40-47. */
	static unsigned char buf[BYTES];
	memset(buf, 0x44, 8 * PAGE);
	if (pwrite(fd, buf, 8 * PAGE, 40 * PAGE) != 8 * PAGE)
		return 1;
	memset(expect + 40 * PAGE, 0x44, 8 * PAGE);
	step_done();

	/* 3: a kernel copies the region to device memory (it must see the
	 * CPU's writes) and writes bytes 2 mod 4 of pages 32-63. */
	unsigned char *d;
	CUDA_TRY(cudaMalloc((void **)&d, BYTES));
	plan_kernel_write(32 * PAGE, BYTES, 4, 2, 0x55);
	SIMGPU_LAUNCH(copy_bytes, 16, 128, 0, 0)(m, d, (unsigned long long)BYTES);
	SIMGPU_LAUNCH(write_bytes, 16, 128, 0, 0)(m, 32ull * PAGE, (unsigned long long)BYTES, 4u, 2u,
						  (unsigned char)0x55);
	CUDA_TRY(cudaGetLastError());
	CUDA_TRY(cudaDeviceSynchronize());
	CUDA_TRY(cudaMemcpy(buf, d, BYTES, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < BYTES; i++)
		if (buf[i] != expect[i]) {
			printf("drv_faults: CORRUPT: the kernel saw %#x at byte %zu, the CPU had %#x\n", buf[i], i,
			       expect[i]);
			return 1;
		}
	CUDA_TRY(cudaFree(d));
	step_done();

	/* 4: a new mapping of the file; a kernel writes bytes 3 mod 4 of
	 * pages 0-15 through it; sync; unmap. */
	if (munmap(m, BYTES))
		return 1;
	m = (unsigned char *)mmap(NULL, BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return 1;
	plan_kernel_write(0, 16 * PAGE, 4, 3, 0x66);
	SIMGPU_LAUNCH(write_bytes, 16, 128, 0, 0)(m, 0ull, 16ull * PAGE, 4u, 3u, (unsigned char)0x66);
	CUDA_TRY(cudaGetLastError());
	CUDA_TRY(cudaDeviceSynchronize());
	for (size_t i = 0; i < BYTES; i++)
		if (m[i] != (may_change[i] ? next_value[i] : expect[i])) {
			printf("drv_faults: CORRUPT: after the sync byte %zu reads %#x\n", i, m[i]);
			return 1;
		}
	step_done();
	if (munmap(m, BYTES))
		return 1;
	/* Every mapping is gone, and the program's own allocation: so is
	 * every byte of device memory the shim took for them, whatever
	 * failed on the way; unless the call that gives memory back is the
	 * one that keeps failing. */
	if (simgpu_stats_get(0, &at_end))
		return 1;
	if (at_end.device_bytes_in_use != at_start.device_bytes_in_use ||
	    at_end.managed_bytes_in_use != at_start.managed_bytes_in_use) {
		if (freeing_fails_for_good()) {
			printf("drv_faults: %llu B of device memory (%llu B managed) stay allocated: the driver "
			       "never gives them back\n",
			       (unsigned long long)(at_end.device_bytes_in_use - at_start.device_bytes_in_use),
			       (unsigned long long)(at_end.managed_bytes_in_use - at_start.managed_bytes_in_use));
			return file_consistent(fd) ? 0 : 1;
		}
		printf("drv_faults: LEAK: device memory in use %llu B (managed %llu B) after every mapping "
		       "went, %llu B (%llu B) before the first\n",
		       (unsigned long long)at_end.device_bytes_in_use, (unsigned long long)at_end.managed_bytes_in_use,
		       (unsigned long long)at_start.device_bytes_in_use,
		       (unsigned long long)at_start.managed_bytes_in_use);
		return 1;
	}
	return file_consistent(fd) ? 0 : 1;
}

/* --- the runner --- */

struct outcome {
	int status; /* waitpid's, or -1 on timeout */
	char text[65536];
};

/* Every thread's stack of process pid, by gdb, into fd. */
static void dump_stacks(pid_t pid, int out_fd)
{
	char pid_arg[32];
	snprintf(pid_arg, sizeof(pid_arg), "%d", (int)pid);
	dprintf(out_fd, "---- stacks of process %d\n", (int)pid);
	pid_t g = access("/usr/bin/gdb", X_OK) == 0 ? fork() : -1;
	if (g == 0) {
		unsetenv("LD_PRELOAD");
		dup2(out_fd, 1);
		dup2(out_fd, 2);
		execl("/usr/bin/gdb", "gdb", "-batch", "-nx", "-p", pid_arg, "-ex", "thread apply all bt 25",
		      (char *)NULL);
		_exit(127);
	}
	if (g > 0)
		waitpid(g, NULL, 0);
}

static int run(const char *self, const char *fault, const char *trace, struct outcome *o)
{
	char log[] = "/tmp/drv_faults_log.XXXXXX";
	int lfd = mkstemp(log);
	if (lfd < 0)
		return -1;
	unlink(log);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(lfd, 1);
		dup2(lfd, 2);
		if (fault)
			setenv("CUFAULT", fault, 1);
		if (trace)
			setenv("CUFAULT_TRACE", trace, 1);
		execl(self, self, (char *)NULL);
		_exit(127);
	}
	o->status = -1;
	prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
	for (int waited_ms = 0; waited_ms < RUN_LIMIT_S * 1000; waited_ms += 20) {
		if (waitpid(pid, &o->status, WNOHANG) == pid)
			break;
		struct timespec ts = {0, 20 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	if (o->status == -1) {
		/* A hang: every thread's stack into the log (the program's and
		 * its children's: the simulated device's), then kill it. */
		dump_stacks(pid, lfd);
		DIR *proc = opendir("/proc");
		for (struct dirent *e; proc && (e = readdir(proc));) {
			char stat_path[64], line[512];
			snprintf(stat_path, sizeof(stat_path), "/proc/%.20s/stat", e->d_name);
			FILE *f = atoi(e->d_name) > 0 ? fopen(stat_path, "r") : NULL;
			int ppid = 0;
			if (f && fgets(line, sizeof(line), f) && strrchr(line, ')'))
				sscanf(strrchr(line, ')') + 2, "%*c %d", &ppid);
			if (f)
				fclose(f);
			if (ppid == pid)
				dump_stacks((pid_t)atoi(e->d_name), lfd);
		}
		if (proc)
			closedir(proc);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	ssize_t n = pread(lfd, o->text, sizeof(o->text) - 1, 0);
	o->text[n > 0 ? n : 0] = 0;
	close(lfd);
	return 0;
}

/* "cuMemAlloc_v2" -> "cuMemAlloc": the name the shim's messages use. */
static void base_name(const char *abi, char *out, size_t size)
{
	size_t len = strnlen(abi, size - 1);
	memcpy(out, abi, len);
	out[len] = 0;
	for (const char *suffix : {"_ptsz", "_ptds", "_v2", "_v3"}) {
		size_t n = strlen(out), k = strlen(suffix);
		if (n > k && !strcmp(out + n - k, suffix))
			out[n - k] = 0;
	}
}

/* Some line of the shim's (gaia[pid]: ...) in text mentions name. */
static bool shim_named(const char *text, const char *name)
{
	for (const char *line = text; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		const char *g = (const char *)memmem(line, len, "gaia[", 5);
		if (g && memmem(line, len, name, strlen(name)))
			return true;
		line = end ? end + 1 : NULL;
	}
	return false;
}

static int each(const char *self)
{
	char trace[] = "/tmp/drv_faults_trace.XXXXXX";
	int tfd = mkstemp(trace);
	if (tfd < 0)
		return 1;
	close(tfd);
	static struct outcome o;
	run(self, NULL, trace, &o);
	if (o.status == -1 || !WIFEXITED(o.status) || WEXITSTATUS(o.status) != 0) {
		printf("drv_faults: FAIL: the unarmed run failed:\n%s\n", o.text);
		return 1;
	}
	FILE *f = fopen(trace, "r");
	char name[128];
	unsigned long calls;
	struct {
		char name[128];
		unsigned long nth;
		bool always;
	} faults[384];
	int nfaults = 0;
	while (f && nfaults < 381 && fscanf(f, "%127s %lu", name, &calls) == 2) {
		for (int k = 0; k < 3; k++) {
			if (k == 1 && calls < 2)
				continue;
			snprintf(faults[nfaults].name, sizeof(faults[nfaults].name), "%.120s", name);
			faults[nfaults].nth = k == 1 ? calls : 1;
			faults[nfaults++].always = k == 2;
		}
	}
	if (f)
		fclose(f);
	unlink(trace);
	if (nfaults < 10) {
		printf("drv_faults: FAIL: the shim made only %d driver calls\n", nfaults);
		return 1;
	}
	int bad = 0, absorbed = 0, returned = 0, unreached = 0;
	printf("%-34s %6s  %s\n", "failed call (the shim's)", "nth", "outcome");
	for (int i = 0; i < nfaults; i++) {
		char spec[160], base[128];
		snprintf(spec, sizeof(spec), "%.120s:%lu:999:%d", faults[i].name, faults[i].nth,
			 faults[i].always ? 0 : 1);
		base_name(faults[i].name, base, sizeof(base));
		run(self, spec, NULL, &o);
		bool fired = strstr(o.text, "cufault: ") != NULL;
		bool named = shim_named(o.text, base);
		const char *verdict;
		bool ok;
		if (o.status == -1) {
			verdict = "HANG (killed after the time limit)", ok = false;
		} else if (WIFSIGNALED(o.status)) {
			verdict = "CRASH", ok = false;
		} else if (WEXITSTATUS(o.status) == 10) {
			verdict = "error returned to the program; file consistent", ok = true, returned++;
		} else if (WEXITSTATUS(o.status) != 0) {
			verdict = "WRONG DATA or failure", ok = false;
		} else if (!fired) {
			verdict = "not reached in this run", ok = true, unreached++;
		} else if (!strncmp(faults[i].name, "cuGetProcAddress", 16)) {
			/* The shim forwards the runtime's lookups: the error went
			 * back to the runtime, which asked again or did without. */
			verdict = "returned to its caller (the runtime's lookup); data exact", ok = true,
			returned++;
		} else if (!named) {
			verdict = "absorbed, but the shim did not name the call", ok = false;
		} else {
			verdict = "absorbed (the shim named it); data exact", ok = true, absorbed++;
		}
		char nth[16];
		snprintf(nth, sizeof(nth), faults[i].always ? "all" : "%lu", faults[i].nth);
		printf("%-34s %6s  %s\n", faults[i].name, nth, verdict);
		if (!ok) {
			bad++;
			printf("---- output:\n%s----\n", o.text);
		}
	}
	printf("drv_faults: %d faults injected: %d absorbed by the shim, %d returned to the program, %d not reached, "
	       "%d bad\n", nfaults, absorbed, returned, unreached, bad);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "--each"))
		return each(argv[0]);
	return scenario();
}
