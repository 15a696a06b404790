/* Helpers shared by the CUDA integration tests (cuda_*.c), which run on
 * the simulated GPU (simgpu's libcuda.so.1 / libcudart.so.13 on
 * LD_LIBRARY_PATH) under LD_PRELOAD=libgaia.so.
 *
 * A counting test runs itself twice: the parent re-executes the program
 * with GAIA_STATS=<file> and a report file, the child does the CUDA work
 * and writes what it did (launches, syncs) and what the simulator saw
 * (kernels_launched); after the child exited (the shim writes its counters
 * at exit) the parent holds the shim's counters to both. */
#ifndef GAIA_ITEST_CUDA_H
#define GAIA_ITEST_CUDA_H

#include "itest.h"

#include <sys/wait.h>

#include <simgpu.h>

/* --- one kernel, registered with the simulator from C --------------- */

/* count(int *counter, int delta): every thread adds delta to *counter. */
struct itest_count_args {
	int *counter;
	int delta;
};

/* The kernel's host address is its CUfunction (simgpu_kernel.h); the
 * function itself never runs, the trampoline does, in the device process. */
static void itest_count_kernel(int *counter, int delta)
{
	(void)counter, (void)delta;
}

static void itest_count_trampoline(const void *args, const struct simgpu_launch_dims *d, uint64_t b0, uint64_t b1)
{
	const struct itest_count_args *a = args;
	uint64_t threads = (uint64_t)d->block[0] * d->block[1] * d->block[2];

	for (uint64_t b = b0; b < b1; b++)
		for (uint64_t t = 0; t < threads; t++)
			__atomic_fetch_add(a->counter, a->delta, __ATOMIC_RELAXED);
}

static const unsigned itest_count_offsets[] = {offsetof(struct itest_count_args, counter),
					       offsetof(struct itest_count_args, delta)};
static const unsigned itest_count_sizes[] = {sizeof(int *), sizeof(int)};
static const struct simgpu_kernel_desc itest_count_desc = {
	.abi = SIMGPU_KERNEL_ABI,
	.name = "itest_count",
	.func = (const void *)itest_count_kernel,
	.trampoline = itest_count_trampoline,
	.nparams = 2,
	.param_offset = itest_count_offsets,
	.param_size = itest_count_sizes,
	.args_bytes = sizeof(struct itest_count_args),
};

#define ITEST_COUNT_FUNC ((const void *)itest_count_kernel)

/* --- the parent/child protocol ------------------------------------ */

#define ITEST_CUDA_REPORT_ENV "GAIA_ITEST_CUDA_REPORT"

struct itest_cuda_report {
	unsigned long launches; /* launch calls the child made (all accepted) */
	unsigned long syncs;    /* host syncs the child made that succeeded */
	unsigned long simgpu_launched;
};

/* Reads "gaia: <name> <value> ..." from the shim's counters file. */
static inline int itest_stat(const char *path, const char *name, unsigned long *out)
{
	char line[256], want[128];
	FILE *f = fopen(path, "r");
	int found = -1;

	if (!f)
		return -1;
	snprintf(want, sizeof(want), "gaia: %s ", name);
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, want, strlen(want)) == 0) {
			*out = strtoul(line + strlen(want), NULL, 10);
			found = 0;
		}
	fclose(f);
	return found;
}

/* In the child, the report path; NULL in the parent. */
static inline const char *itest_cuda_child_report(void)
{
	return getenv(ITEST_CUDA_REPORT_ENV);
}

static inline int itest_cuda_write_report(const char *path, const struct itest_cuda_report *r)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	fprintf(f, "%lu %lu %lu\n", r->launches, r->syncs, r->simgpu_launched);
	return fclose(f);
}

/* The parent: runs argv again as the child and compares. Returns the
 * test's exit status. */
static inline int itest_cuda_supervise(const char *prog, char **argv)
{
	char dir[PATH_MAX], stats[PATH_MAX + 16], report[PATH_MAX + 16];
	struct itest_cuda_report r = {0};
	unsigned long shim_launches = 0, shim_syncs = 0;
	int status, rc = ITEST_FAIL;
	pid_t pid;
	FILE *f;

	if (!dlsym(RTLD_DEFAULT, "gaia_mrelease")) {
		printf("%s: SKIP: not running under libgaia.so\n", prog);
		return ITEST_SKIP;
	}
	if (itest_tempdir(dir, prog)) {
		perror("mkdtemp");
		return ITEST_FAIL;
	}
	snprintf(stats, sizeof(stats), "%s/stats", dir);
	snprintf(report, sizeof(report), "%s/report", dir);
	pid = fork();
	if (pid == 0) {
		setenv("GAIA_STATS", stats, 1);
		setenv(ITEST_CUDA_REPORT_ENV, report, 1);
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid) {
		perror("fork/waitpid");
		goto out;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		rc = WIFEXITED(status) && WEXITSTATUS(status) == ITEST_SKIP ? ITEST_SKIP : ITEST_FAIL;
		fprintf(stderr, "%s: the child %s %d\n", prog, WIFEXITED(status) ? "exited" : "died of signal",
			WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		goto out;
	}
	f = fopen(report, "r");
	if (!f || fscanf(f, "%lu %lu %lu", &r.launches, &r.syncs, &r.simgpu_launched) != 3) {
		fprintf(stderr, "%s: FAIL: no report from the child\n", prog);
		if (f)
			fclose(f);
		goto out;
	}
	fclose(f);
	if (itest_stat(stats, "kernel_launches", &shim_launches) || itest_stat(stats, "host_syncs", &shim_syncs)) {
		fprintf(stderr, "%s: FAIL: no shim counters in %s\n", prog, stats);
		goto out;
	}
	printf("%s: program: %lu launches, %lu syncs; simulator: %lu launched; shim: %lu launches, %lu syncs\n",
	       prog, r.launches, r.syncs, r.simgpu_launched, shim_launches, shim_syncs);
	if (shim_launches != r.simgpu_launched || r.simgpu_launched != r.launches)
		fprintf(stderr, "%s: FAIL: launches: shim %lu, simulator %lu, program %lu\n", prog, shim_launches,
			r.simgpu_launched, r.launches);
	else if (shim_syncs != r.syncs)
		fprintf(stderr, "%s: FAIL: syncs: shim %lu, program %lu\n", prog, shim_syncs, r.syncs);
	else
		rc = ITEST_PASS;
out:
	itest_remove_tree(dir);
	return rc;
}

#endif
