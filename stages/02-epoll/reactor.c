/* reactor.c -- the epoll loop behind every callback in rsp. */
#include "reactor.h"

#include <errno.h>
#include <stdio.h>
#include <sys/epoll.h>

/* The one epoll instance, created by reactor_init() from main(). */
static int epoll_fd = -1;

int reactor_init(void)
{
    epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd == -1) {
        perror("rsp: epoll_create1");
        return -1;
    }
    return 0;
}

int reactor_add(struct epoll_event_handler *handler, uint32_t events)
{
    struct epoll_event event = { .events = events, .data.ptr = handler };

    return epoll_ctl(epoll_fd, EPOLL_CTL_ADD, handler->fd, &event);
}

int reactor_remove(struct epoll_event_handler *handler)
{
    return epoll_ctl(epoll_fd, EPOLL_CTL_DEL, handler->fd, NULL);
}

void reactor_run(void)
{
    for (;;) {
        /* One event per wait. A handler may free itself and its partner
         * while it runs; if we had fetched several events at once, a later
         * one could point at that freed memory. With one at a time, the
         * kernel never hands us an event for a socket we already removed.
         * Chapter 08 fetches batches and defers the frees instead. */
        struct epoll_event event;
        int n = epoll_wait(epoll_fd, &event, 1, -1);

        if (n == -1) {
            if (errno == EINTR)
                continue;
            perror("rsp: epoll_wait");
            return;
        }
        if (n == 1) {
            struct epoll_event_handler *handler = event.data.ptr;
            handler->handle(handler, event.events);
        }
    }
}
