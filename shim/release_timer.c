/* GAIA_RELEASE_MS: a process that only writes with the CPU never launches a
 * kernel, so without it its writes would reach the shared version table
 * only at msync, munmap or exit. A thread releases every managed mapping
 * at that period; 0 turns it off. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "shim.h"

static pthread_mutex_t timer_lock = PTHREAD_MUTEX_INITIALIZER;
static bool started;
/* Held by the thread through each pass, and by a fork from before it
 * takes the shim's other locks until it returns: a fork never copies the
 * pass half done, with a lock of the allocator's held by it (a child that
 * allocates would wait for it forever: ASan's allocator is not made safe
 * across fork, as glibc's malloc is). */
static pthread_mutex_t pass_lock = PTHREAD_MUTEX_INITIALIZER;

static void *release_loop(void *arg)
{
	long long period_ms = *(const long long *)arg;
	struct timespec period = {(time_t)(period_ms / 1000), (long)(period_ms % 1000) * 1000000L};
	for (;;) {
		nanosleep(&period, NULL);
		gaia_in_shim++;
		pthread_mutex_lock(&pass_lock);
		if (mapping_any())
			mapping_release_all();
		pthread_mutex_unlock(&pass_lock);
		gaia_in_shim--;
	}
	return NULL;
}

static void start(bool in_child)
{
	static long long period_ms;
	pthread_mutex_lock(&timer_lock);
	if (!started && (period_ms = gaia_config()->release_ms) > 0) {
		int rc = in_child ? gaia_thread_start_in_child(release_loop, &period_ms)
				  : gaia_thread_start(release_loop, &period_ms);
		if (rc == EAGAIN && in_child)
			gaia_debug("the GAIA_RELEASE_MS thread of this fork child has not started after 100 ms "
				   "(a lock held at the fork, under a sanitizer?); going on without waiting");
		else if (rc)
			gaia_warn("cannot start the GAIA_RELEASE_MS thread: %s; CPU writes are "
				  "published only at msync, munmap and exit", strerror(rc));
		started = true;
	}
	pthread_mutex_unlock(&timer_lock);
}

void release_timer_start(void)
{
	start(false);
}

void release_timer_before_fork(void)
{
	pthread_mutex_lock(&pass_lock);
}

void release_timer_after_fork_parent(void)
{
	pthread_mutex_unlock(&pass_lock);
}

void release_timer_after_fork(void)
{
	/* Only the forking thread exists in the child. */
	pthread_mutex_init(&pass_lock, NULL);
	pthread_mutex_init(&timer_lock, NULL);
	started = false;
	/* A child that only stores through the mappings publishes through
	 * this thread; one that execs at once must not wait for it. */
	if (mapping_any())
		start(true);
}
