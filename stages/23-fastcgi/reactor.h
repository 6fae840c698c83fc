/* reactor.h -- the epoll event loop, with time.
 *
 * Everything rsp does happens because a socket became ready or a deadline
 * passed. Each socket we watch has a handler: the fd, the function to call
 * when it is ready, and a closure pointer that function can use for its
 * own state. Deadlines are timers (timer.h); the loop sleeps in epoll_wait
 * until the next one. */
#ifndef RSP_REACTOR_H
#define RSP_REACTOR_H

#include <stdint.h>

struct epoll_event_handler {
    int fd;
    void (*handle)(struct epoll_event_handler *self, uint32_t events);
    void *closure;
};

/* Something to free once the batch of events being handled is over. A
 * handler may close and free a relay while events for it are still
 * waiting further down the same batch; the owner embeds one of these and
 * hands it to reactor_defer instead of freeing at once. */
struct reactor_deferred {
    struct reactor_deferred *next;
    void (*release)(struct reactor_deferred *self);
};

/* Creates the epoll instance and reads the clock. Returns 0, or -1 after
 * printing why. */
int reactor_init(void);

/* Starts watching handler->fd for events (EPOLLIN, ...). The handler must
 * stay valid until reactor_remove. Returns 0, or -1 with errno set. */
int reactor_add(struct epoll_event_handler *handler, uint32_t events);

/* Changes the events watched for handler->fd. Returns 0, or -1. */
int reactor_modify(struct epoll_event_handler *handler, uint32_t events);

/* Stops watching handler->fd, and voids any event for it still waiting in
 * the batch being handled: its callback will not run again. Call it before
 * closing the fd: a closed fd number is reused at once by the next socket
 * we open. Returns 0, or -1 with errno set. */
int reactor_remove(struct epoll_event_handler *handler);

/* Voids any event for handler still waiting in the batch being handled,
 * without telling epoll: for a fd about to be closed that no other
 * descriptor shares, whose close takes it out of epoll by itself. */
void reactor_forget(struct epoll_event_handler *handler);

/* Calls d->release(d) at the end of the batch being handled (at once if
 * no batch is being handled, as when rsp stops). */
void reactor_defer(struct reactor_deferred *d);

/* The time, in seconds on the monotonic clock, read once per turn of the
 * loop: every event and timer of one turn sees the same "now". */
double reactor_now(void);

/* Waits for events and deadlines and calls their handlers and timers until
 * reactor_stop is called. Returns 0 then, or -1 if epoll_wait fails for a
 * reason other than a signal. */
int reactor_run(void);

/* In a child process just forked from inside the loop: forgets the
 * parent's epoll instance, timers and deferred frees, and starts afresh
 * (reactor_run may then be called again). Returns 0, or -1 after logging. */
int reactor_after_fork(void);

/* Makes reactor_run return once the handler now running is done. */
void reactor_stop(void);

/* Releases what is deferred, frees the timer heap and closes the epoll
 * instance; call after reactor_run has returned. */
void reactor_close(void);

#endif
