/* pairsync.c — see pairsync.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph.h"
#include "pairsync.h"

static int make_fifo(const char *path, char *err, size_t errlen)
{
    if (mkfifo(path, 0600) == 0 || errno == EEXIST) {
        struct stat st;
        if (stat(path, &st) == 0 && S_ISFIFO(st.st_mode))
            return 0;
        return graph_fail(err, errlen, -EINVAL, "%s: exists and is not a FIFO", path);
    }
    return graph_fail(err, errlen, -errno, "%s: mkfifo: %s", path, strerror(errno));
}

static int open_pair(const char *path, struct pairsync *s, int ready_flags, int done_flags, char *err,
                     size_t errlen)
{
    char ready[4096], done[4096];
    snprintf(ready, sizeof(ready), "%s.ready", path);
    snprintf(done, sizeof(done), "%s.done", path);
    s->ready_fd = s->done_fd = -1;
    signal(SIGPIPE, SIG_IGN);
    int rc = make_fifo(ready, err, errlen);
    if (!rc)
        rc = make_fifo(done, err, errlen);
    if (rc)
        return rc;
    /* Both sides open .ready first, then .done: each open() of a FIFO waits
     * for the other end, and the common order makes them meet. */
    do
        s->ready_fd = open(ready, ready_flags | O_CLOEXEC);
    while (s->ready_fd < 0 && errno == EINTR);
    if (s->ready_fd < 0)
        return graph_fail(err, errlen, -errno, "%s: open: %s", ready, strerror(errno));
    do
        s->done_fd = open(done, done_flags | O_CLOEXEC);
    while (s->done_fd < 0 && errno == EINTR);
    if (s->done_fd < 0) {
        rc = graph_fail(err, errlen, -errno, "%s: open: %s", done, strerror(errno));
        close(s->ready_fd);
        s->ready_fd = -1;
        return rc;
    }
    return 0;
}

int pairsync_open_consumer(const char *path, struct pairsync *s, char *err, size_t errlen)
{
    return open_pair(path, s, O_RDONLY, O_WRONLY, err, errlen);
}

int pairsync_open_producer(const char *path, struct pairsync *s, char *err, size_t errlen)
{
    return open_pair(path, s, O_WRONLY, O_RDONLY, err, errlen);
}

int pairsync_send(int fd, uint32_t token)
{
    ssize_t n;
    do
        n = write(fd, &token, sizeof(token));
    while (n < 0 && errno == EINTR);
    if (n == (ssize_t)sizeof(token))
        return 0;
    return n < 0 ? -errno : -EIO;   /* 4 bytes to a pipe are written whole or not at all */
}

int pairsync_recv(int fd, uint32_t *token)
{
    size_t got = 0;
    char *p = (char *)token;
    while (got < sizeof(*token)) {
        ssize_t n = read(fd, p + got, sizeof(*token) - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return got ? -EIO : 0;
        got += (size_t)n;
    }
    return 1;
}

void pairsync_close(struct pairsync *s)
{
    if (s->ready_fd >= 0)
        close(s->ready_fd);
    if (s->done_fd >= 0)
        close(s->done_fd);
    s->ready_fd = s->done_fd = -1;
}
