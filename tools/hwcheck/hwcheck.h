/* hwcheck.h — what the two halves of gaia-hwcheck share.
 *
 * The parent (hwcheck.cc) never calls CUDA: CUDA does not allow a fork
 * after it is initialised, and several checks can kill a context (a GPU
 * touching a file mapping it cannot reach, atomics on a MAP_SHARED file
 * under HMM, a store to a read-only registration). So every check that
 * uses the GPU runs in a child, the same binary started again with
 * --child=GROUP (checks.cu), which reports on its stdout:
 *
 *   ROW <tab> id <tab> observed <tab> verdict
 *
 * What each check does and expects is in one table, hw_checks; a check of
 * the group with no ROW line gets, as its observation, how the child
 * ended.
 */
#ifndef GAIA_HWCHECK_H
#define GAIA_HWCHECK_H

/* Verdicts: the observation matches the first expectation (ok) or not
 * (differs); the simulated GPU answered it (simulated); it can only be
 * answered on a real GPU (needs a GPU); the CUDA binary tools are missing
 * (needs nvcc tools); not run, with the reason (skipped). */
#define V_OK "ok"
#define V_DIFFERS "differs"
#define V_SIMULATED "simulated"
#define V_NEEDS_GPU "needs a GPU"
#define V_NEEDS_TOOLS "needs nvcc tools"
#define V_SKIPPED "skipped"

/* Built by nvcc for a real GPU, or by g++ against the simulated one.
 * Only checks.cu knows (nvcc compiles hwcheck.cc as plain C++): others
 * read hw_simulated. */
#ifdef __CUDACC__
#define HWCHECK_SIMULATED 0
#else
#define HWCHECK_SIMULATED 1
#endif
extern const bool hw_simulated;

/* Every check: its id, the group (child) that runs it (NULL: the parent
 * runs it), what it does and what is expected. NULL-terminated. */
struct hw_check {
	const char *id;
	const char *group;
	const char *what;
	const char *expected;
};
extern const struct hw_check hw_checks[];

/* The GPU check groups, in the order they run: name and the row ids each
 * reports (space-separated), NULL-terminated. */
struct hw_group {
	const char *name;
	const char *ids;
};
extern const struct hw_group hw_groups[];

/* Runs one group in this (child) process; returns its exit status. */
int hw_run_child(const char *group);

/* Where the scratch files go: $TMPDIR, else /tmp. */
const char *hw_tmpdir(void);

/* The file system type of an open file, as a name ("ext4", "tmpfs", ...). */
const char *hw_fs_name(int fd);

#endif
