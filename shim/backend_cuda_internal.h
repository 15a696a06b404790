/* What the CUDA backend's two files share (backend_cuda.c: errors,
 * contexts, the shim's stream, the diff kernels, the device_ops;
 * backend_cuda_replica.c: creating and freeing replicas). */
#ifndef GAIA_BACKEND_CUDA_INTERNAL_H
#define GAIA_BACKEND_CUDA_INTERNAL_H

#include "backend_cuda.h"

/* The table of what the shim calls (cuda_calls.h), resolved on first use. */
#define drv (*cuda_calls())

#define PG GAIA_PAGE

GAIA_HIDDEN int cuda_errno_of(CUresult rc);

/* Logs a failed driver call once per call site and maps it to -errno. */
/* A call that gives device memory back, tried twice: a failure that
 * passes would otherwise leak the memory for the life of the process.
 * Each failed try is named. */
#define CU_FREE(call, what)                                                  \
	({                                                                   \
		int e1_ = CU_CHECK((call), what);                            \
		e1_ ? CU_CHECK((call), what ", tried again") : 0;            \
	})

#define CU_CHECK(call, what)                                                                     \
	({                                                                                       \
		CUresult rc_ = (call);                                                           \
		if (rc_ != CUDA_SUCCESS) {                                                       \
			static int once_;                                                        \
			gaia_log_once(&once_, GAIA_LOG_WARN, "%s failed: %s (%d)", what,         \
				      cuda_error_name(rc_), (int)rc_);                           \
		}                                                                                \
		cuda_errno_of(rc_);                                                                   \
	})

/* Device work on a replica runs in the context that made it: a thread
 * with no current context (an munmap, a read() in a thread that never
 * used CUDA) or with another one has it current for the call. */
struct ctx_switch {
	bool switched;
	CUcontext prev;
};
GAIA_HIDDEN struct ctx_switch cuda_enter_ctx(const struct cuda_replica *r);
GAIA_HIDDEN void cuda_leave_ctx(struct ctx_switch s);

/* The shim's own stream in the current context (created on first use). */
GAIA_HIDDEN CUstream cuda_shim_stream(void);

/* A writable replica's base copies and the diff's buffers, allocated
 * with it (the diff kernels loaded in its context). 0 or -errno. */
GAIA_HIDDEN int cuda_alloc_base(struct cuda_replica *r, bool writable);

#endif
