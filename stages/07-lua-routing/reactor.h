/* reactor.h -- a minimal epoll event loop.
 *
 * Everything rsp does happens because a socket became ready. Each socket
 * we watch has a handler: the fd, the function to call when it is ready,
 * and a closure pointer that function can use for its own state. */
#ifndef RSP_REACTOR_H
#define RSP_REACTOR_H

#include <stdint.h>

struct epoll_event_handler {
    int fd;
    void (*handle)(struct epoll_event_handler *self, uint32_t events);
    void *closure;
};

/* Creates the epoll instance. Returns 0, or -1 after printing why. */
int reactor_init(void);

/* Starts watching handler->fd for events (EPOLLIN, ...). The handler must
 * stay valid until reactor_remove. Returns 0, or -1 with errno set. */
int reactor_add(struct epoll_event_handler *handler, uint32_t events);

/* Changes the events watched for handler->fd. Returns 0, or -1. */
int reactor_modify(struct epoll_event_handler *handler, uint32_t events);

/* Stops watching handler->fd. Call it before closing the fd: a closed fd
 * number is reused at once by the next socket we open. */
int reactor_remove(struct epoll_event_handler *handler);

/* Waits for events and calls their handlers until reactor_stop is called.
 * Returns 0 then, or -1 if epoll_wait fails for a reason other than a
 * signal. */
int reactor_run(void);

/* Makes reactor_run return once the handler now running is done. */
void reactor_stop(void);

/* Closes the epoll instance; call after reactor_run has returned. */
void reactor_close(void);

#endif
