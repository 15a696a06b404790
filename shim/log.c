#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim.h"

static struct gaia_env config;
static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static int config_ready;

static void load_config(void)
{
	gaia_env_load(&config, NULL, NULL, 2);
	__atomic_store_n(&config_ready, 1, __ATOMIC_RELEASE);
}

extern char **environ;

/* The configuration, read from the environment once. A hook can run before
 * the C library has set up the environment (a sanitizer's runtime maps
 * memory that early): then the defaults, with nothing managed, are answered
 * without latching them, and the environment is read at a later call. */
const struct gaia_env *gaia_config(void)
{
	static struct gaia_env early;
	if (!__atomic_load_n(&config_ready, __ATOMIC_ACQUIRE) && !environ) {
		gaia_env_defaults(&early);
		early.disable = 1;
		return &early;
	}
	pthread_once(&config_once, load_config);
	return &config;
}

/* Formats on the stack and writes with a raw system call: never allocates
 * (beyond what vsnprintf does for exotic formats, which the shim avoids)
 * and never re-enters the shim's write hook. errno is preserved. */
static void log_v(int level, const char *fmt, va_list ap)
{
	static const char *const names[] = {"error", "warning", "info", "debug"};
	int saved = errno;
	int threshold = __atomic_load_n(&config_ready, __ATOMIC_ACQUIRE) ? config.log : GAIA_LOG_WARN;
	if (level > threshold) {
		errno = saved;
		return;
	}
	char buf[1024];
	int n = snprintf(buf, sizeof(buf), "gaia[%d]: %s: ", (int)getpid(), names[level]);
	if (n < 0)
		n = 0;
	int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	if (m < 0)
		m = 0;
	size_t len = (size_t)n + (size_t)m;
	if (len > sizeof(buf) - 2)
		len = sizeof(buf) - 2;
	buf[len++] = '\n';
	syscall(SYS_write, 2, buf, len);
	errno = saved;
}

void gaia_log(int level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_v(level, fmt, ap);
	va_end(ap);
}

void gaia_log_once(int *once, int level, const char *fmt, ...)
{
	if (__atomic_exchange_n(once, 1, __ATOMIC_RELAXED))
		return;
	va_list ap;
	va_start(ap, fmt);
	log_v(level, fmt, ap);
	va_end(ap);
}
