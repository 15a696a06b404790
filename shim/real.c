#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim.h"

struct gaia_real gaia_real;
__thread int gaia_in_shim __attribute__((tls_model("initial-exec")));

static pthread_once_t resolve_once = PTHREAD_ONCE_INIT;

static void resolve(void)
{
#define GAIA_REAL_RESOLVE(name, ret, args)                                                  \
	gaia_real.name = (ret(*) args)dlsym(RTLD_NEXT, #name);                              \
	if (!gaia_real.name) {                                                              \
		static const char msg[] = "gaia: cannot resolve the real " #name ", exiting\n"; \
		syscall(SYS_write, 2, msg, sizeof(msg) - 1);                                \
		_exit(127);                                                                 \
	}
	GAIA_REAL_FUNCS(GAIA_REAL_RESOLVE)
#undef GAIA_REAL_RESOLVE
}

void gaia_real_resolve(void)
{
	pthread_once(&resolve_once, resolve);
}
