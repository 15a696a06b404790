/* pairsync.h — the producer/consumer handshake: two FIFOs, PATH.ready
 * (producer -> consumer: "the file has changed, iteration n") and
 * PATH.done (consumer -> producer: "I have finished with the file").
 * Pipes, not a semaphore, so a process that dies is seen as end-of-file
 * by the other, never as a wait forever. Each side creates the FIFOs it
 * does not find; both open them in the same order, so neither blocks the
 * other in open(). */
#ifndef GUNROCK_PAIRSYNC_H
#define GUNROCK_PAIRSYNC_H

#include <stdint.h>

struct pairsync {
    int ready_fd;   /* consumer reads, producer writes */
    int done_fd;    /* producer reads, consumer writes */
};

/* 0 or -errno (err names the FIFO). Both ignore SIGPIPE, so writing to a
 * vanished peer is -EPIPE. */
int pairsync_open_consumer(const char *path, struct pairsync *s, char *err, size_t errlen);
int pairsync_open_producer(const char *path, struct pairsync *s, char *err, size_t errlen);

/* 0 or -errno. */
int pairsync_send(int fd, uint32_t token);
/* 1 with a token, 0 at end of file (the peer closed or died), -errno. */
int pairsync_recv(int fd, uint32_t *token);

void pairsync_close(struct pairsync *s);

#endif
