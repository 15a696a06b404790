/* run_self.h — run this test program again as a child, for cases that need
 * their own process (knobs read once at cuInit, a context a case poisons). */
#ifndef SIMGPU_TEST_RUN_SELF_H
#define SIMGPU_TEST_RUN_SELF_H

#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Runs /proc/self/exe with `arg1 arg2`, the environment with the variables
 * of `set` ("NAME=value" entries, NULL-terminated) replaced or added.  Up
 * to out_size - 1 bytes of its stdout go to `out` (NUL-terminated) when out
 * is given.  Returns the exit status, 128 + the signal when it was killed,
 * or -1 when it could not run. */
static inline int sim_run_self(const char *arg1, const char *arg2, const char *const *set, char *out,
                               size_t out_size)
{
    size_t n = 0, extra = 0;
    while (environ[n])
        n++;
    while (set && set[extra])
        extra++;
    char **env = (char **)calloc(n + extra + 1, sizeof(char *));
    if (!env)
        return -1;
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        bool replaced = false;
        for (size_t k = 0; k < extra && !replaced; k++) {
            size_t name = (size_t)(strchr(set[k], '=') - set[k]) + 1;
            replaced = strncmp(environ[i], set[k], name) == 0;
        }
        if (!replaced)
            env[j++] = environ[i];
    }
    for (size_t k = 0; k < extra; k++)
        env[j++] = (char *)set[k];
    int fds[2] = { -1, -1 };
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (out && pipe(fds) == 0) {
        posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
        posix_spawn_file_actions_addclose(&fa, fds[0]);
    }
    char *argv[] = { (char *)"/proc/self/exe", (char *)arg1, (char *)arg2, NULL };
    pid_t pid;
    int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    if (fds[1] >= 0)
        close(fds[1]);
    if (rc != 0) {
        if (fds[0] >= 0)
            close(fds[0]);
        return -1;
    }
    if (out) {
        size_t got = 0;
        ssize_t r;
        while (fds[0] >= 0 && got + 1 < out_size && (r = read(fds[0], out + got, out_size - 1 - got)) > 0)
            got += (size_t)r;
        out[got] = 0;
        if (fds[0] >= 0)
            close(fds[0]);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

#endif
