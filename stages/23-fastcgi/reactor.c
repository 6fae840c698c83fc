/* reactor.c -- the epoll loop behind every callback in rsp.
 *
 * One turn of the loop:
 *
 *   sleep in epoll_wait until a socket is ready or the earliest timer is
 *   due -> read the clock once -> handle up to REACTOR_BATCH events ->
 *   fire the timers that are due -> free what was closed meanwhile
 *
 * Taking a batch of events per wait saves system calls under load, but a
 * batch is a list of pointers the kernel gave us before we started: when
 * handling one event closes a relay, the events after it may point into
 * that relay. Two rules make that safe. reactor_remove voids the events
 * still waiting for a removed handler, so no callback runs for a socket we
 * closed; and a relay's memory is given back only at the end of the turn
 * (reactor_defer), so nothing in the batch can point at freed memory. */
#include "reactor.h"

#include "clock.h"
#include "log.h"
#include "timer.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/epoll.h>
#include <unistd.h>

#define REACTOR_BATCH 64

/* The one epoll instance, created by reactor_init() from main(); whether
 * reactor_run should go on; the batch being handled; the cached clock; and
 * what waits to be freed at the end of the turn. */
static int epoll_fd = -1;
static bool running;
static struct epoll_event batch[REACTOR_BATCH];
static int batch_length, batch_next;
static double now;
static struct reactor_deferred *deferred;

int reactor_init(void)
{
    now = clock_now();
    epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd == -1) {
        log_errno("epoll_create1");
        return -1;
    }
    return 0;
}

double reactor_now(void)
{
    return now;
}

int reactor_add(struct epoll_event_handler *handler, uint32_t events)
{
    struct epoll_event event = { .events = events, .data.ptr = handler };

    return epoll_ctl(epoll_fd, EPOLL_CTL_ADD, handler->fd, &event);
}

int reactor_modify(struct epoll_event_handler *handler, uint32_t events)
{
    struct epoll_event event = { .events = events, .data.ptr = handler };

    return epoll_ctl(epoll_fd, EPOLL_CTL_MOD, handler->fd, &event);
}

void reactor_forget(struct epoll_event_handler *handler)
{
    /* A fd appears at most once in a batch, but the handler may be reused
     * for a new socket within the turn (a failover reconnects the same
     * embedded handler), or closed: an old event must not reach it. */
    for (int i = batch_next; i < batch_length; i++)
        if (batch[i].data.ptr == handler)
            batch[i].data.ptr = NULL;
}

int reactor_remove(struct epoll_event_handler *handler)
{
    reactor_forget(handler);
    return epoll_ctl(epoll_fd, EPOLL_CTL_DEL, handler->fd, NULL);
}

void reactor_defer(struct reactor_deferred *d)
{
    if (!running) {
        d->release(d);
        return;
    }
    d->next = deferred;
    deferred = d;
}

static void release_deferred(void)
{
    while (deferred != NULL) {
        struct reactor_deferred *d = deferred;
        deferred = d->next;
        d->release(d);
    }
}

/* epoll_wait's timeout: until the earliest timer, in whole milliseconds
 * rounded up (rounding down would wake us a little early, to find nothing
 * due, and spin until it is); -1 (no timeout) without timers. */
static int wait_timeout(void)
{
    double next = timers_next(), ms;

    if (next < 0)
        return -1;
    ms = ceil((next - now) * 1000);
    if (ms <= 0)
        return 0;
    return ms > 86400000 ? 86400000 : (int)ms;
}

int reactor_run(void)
{
    running = true;
    while (running) {
        int n = epoll_wait(epoll_fd, batch, REACTOR_BATCH, wait_timeout());

        now = clock_now();
        if (n == -1) {
            if (errno != EINTR) {
                log_errno("epoll_wait");
                running = false;
                release_deferred();
                return -1;
            }
            n = 0;
        }
        batch_length = n;
        for (batch_next = 0; batch_next < batch_length && running;) {
            struct epoll_event *event = &batch[batch_next++];
            struct epoll_event_handler *handler = event->data.ptr;

            if (handler != NULL) /* NULL: removed earlier in this batch */
                handler->handle(handler, event->events);
        }
        batch_length = batch_next = 0;
        if (running)
            timers_run(now);
        release_deferred();
    }
    return 0;
}

int reactor_after_fork(void)
{
    /* Closing our copy of the fd leaves the parent's instance as it was;
     * the parent's sockets and timers are not ours to watch. */
    if (close(epoll_fd) == -1)
        log_errno("close the master's epoll fd");
    timers_forget();
    release_deferred();
    batch_length = batch_next = 0;
    running = false;
    return reactor_init();
}

void reactor_stop(void)
{
    running = false;
}

void reactor_close(void)
{
    release_deferred();
    timers_free();
    if (epoll_fd != -1 && close(epoll_fd) == -1)
        log_errno("close epoll fd");
    epoll_fd = -1;
}
