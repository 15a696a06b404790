/*
 * shared.c — the control block shared with a device process: its robust
 * process-shared mutex and the host's waits.
 *
 * The mutex is robust so that a device process dying inside the lock (a
 * kernel that crashed in a way the fault guard could not catch) turns into
 * an error the host reports, not a hang.  Host waits are timed so that a
 * device process that died outside the lock is noticed too.
 */
#include <errno.h>
#include <sys/wait.h>
#include <time.h>

#include "sim.h"

int sim_shared_init(struct sim_shared *sh)
{
    pthread_mutexattr_t ma;
    pthread_condattr_t ca;
    int rc = pthread_mutexattr_init(&ma);
    if (rc)
        return -rc;
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    rc = pthread_mutex_init(&sh->lock, &ma);
    pthread_mutexattr_destroy(&ma);
    if (rc)
        return -rc;
    pthread_condattr_init(&ca);
    pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    rc = pthread_cond_init(&sh->dev_cv, &ca);
    if (!rc)
        rc = pthread_cond_init(&sh->host_cv, &ca);
    pthread_condattr_destroy(&ca);
    return -rc;
}

/* The device process is a clone child with no exit signal, so only
 * __WCLONE waits see it and an application's wait(-1) never reaps it. */
static bool device_alive(struct sim_device *d)
{
    if (d->dead)
        return false;
    int st;
    pid_t r = waitpid(d->pid, &st, WNOHANG | __WCLONE);
    if (r == d->pid || (r < 0 && errno == ECHILD)) {
        if (r == d->pid && WIFSIGNALED(st))
            sim_log("device %d: device process %d died with signal %d", d->ordinal, (int)d->pid,
                    WTERMSIG(st));
        else
            sim_log("device %d: device process %d exited", d->ordinal, (int)d->pid);
        d->dead = true;
        return false;
    }
    return true;
}

int sim_lock(struct sim_device *d)
{
    if (d->dead)
        return -EPIPE;
    int rc = pthread_mutex_lock(&d->sh->lock);
    if (rc == EOWNERDEAD) {
        pthread_mutex_consistent(&d->sh->lock);
        d->dead = true;
        if (!d->sh->sticky_error)
            d->sh->sticky_error = CUDA_ERROR_LAUNCH_FAILED;
        pthread_mutex_unlock(&d->sh->lock);
        sim_log("device %d: device process died holding the control lock", d->ordinal);
        return -EPIPE;
    }
    return rc ? -rc : 0;
}

void sim_unlock(struct sim_device *d)
{
    pthread_mutex_unlock(&d->sh->lock);
}

/* Called with the lock held; returns with it held (0) or released (-EPIPE). */
int sim_host_wait(struct sim_device *d)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += 50 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    int rc = pthread_cond_timedwait(&d->sh->host_cv, &d->sh->lock, &ts);
    if (rc == EOWNERDEAD) {
        pthread_mutex_consistent(&d->sh->lock);
        d->dead = true;
        if (!d->sh->sticky_error)
            d->sh->sticky_error = CUDA_ERROR_LAUNCH_FAILED;
        pthread_mutex_unlock(&d->sh->lock);
        return -EPIPE;
    }
    if (rc == ETIMEDOUT && !device_alive(d)) {
        if (!d->sh->sticky_error)
            d->sh->sticky_error = CUDA_ERROR_LAUNCH_FAILED;
        pthread_mutex_unlock(&d->sh->lock);
        return -EPIPE;
    }
    return 0;
}
