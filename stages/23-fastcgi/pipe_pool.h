/* pipe_pool.h -- pipes for splice(2), kept for reuse and bounded.
 *
 * A spliced body goes from the backend's socket into a pipe and from the
 * pipe to the client's socket, without passing through rsp's memory
 * (chapter 16). A pipe costs two file descriptors and a system call to
 * make, so an empty one is kept for the next body; but descriptors are
 * what every client needs too, so the pool is bounded: at most one pipe
 * for every eight descriptors rsp may open, and when there is none to be
 * had the caller copies as before. A pipe that still holds bytes is never
 * reused: they belong to a client that is gone. */
#ifndef RSP_PIPE_POOL_H
#define RSP_PIPE_POOL_H

#include <stddef.h>

struct pipe_pair {
    int read_fd, write_fd;
    size_t capacity;            /* bytes it holds when full (F_GETPIPE_SZ) */
    struct pipe_pair *next;     /* in the idle list */
};

/* An empty pipe: an idle one, or a new one while the bound allows.
 * NULL when none can be had (the bound, EMFILE, ENFILE, memory). */
struct pipe_pair *pipe_pool_get(void);

/* Takes back an empty pipe for the next body. */
void pipe_pool_put(struct pipe_pair *p);

/* Closes a pipe that may still hold bytes. */
void pipe_pool_discard(struct pipe_pair *p);

/* Closes every idle pipe: when no client is left, descriptors held for
 * nobody would only look like a leak. */
void pipe_pool_trim(void);

#endif
