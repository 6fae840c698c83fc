/* relay.c -- a client socket and a backend socket, joined.
 *
 * Both sockets of a pair share one struct relay. Each has its own handler,
 * and one function serves both: it reads from the socket that is ready and
 * writes to the other one. */
#include "relay.h"

#include "reactor.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#define RELAY_BUFFER_SIZE 16384

struct relay {
    struct epoll_event_handler client;
    struct epoll_event_handler backend;
};

/* Stops watching both sockets, closes them and frees the pair. After this
 * no handler of the pair may be touched; the reactor's one-event-per-wait
 * rule guarantees no queued event still points at them. */
static void relay_close(struct relay *relay)
{
    if (reactor_remove(&relay->client) == -1)
        perror("rsp: epoll_ctl(DEL) client");
    if (reactor_remove(&relay->backend) == -1)
        perror("rsp: epoll_ctl(DEL) backend");
    close(relay->client.fd);
    close(relay->backend.fd);
    free(relay);
}

static void relay_handle(struct epoll_event_handler *self, uint32_t events)
{
    struct relay *relay = self->closure;
    struct epoll_event_handler *peer = self == &relay->client ? &relay->backend : &relay->client;
    char buffer[RELAY_BUFFER_SIZE];
    ssize_t n;

    (void)events; /* EPOLLIN, EPOLLHUP or EPOLLERR: read() tells us which */
    n = read(self->fd, buffer, sizeof buffer);
    if (n == -1 && (errno == EAGAIN || errno == EINTR))
        return; /* nothing after all; epoll will call again */
    if (n <= 0) {
        /* 0: this side has closed. -1: it broke (ECONNRESET, ...). Either
         * way we give up on the pair. (A side that only finished sending
         * may still want to receive; chapter 04 handles that half-close.) */
        relay_close(relay);
        return;
    }

    /* BUG, kept on purpose until chapter 04: a write to a non-blocking
     * socket may take only part of what we offer, or nothing at all
     * (EAGAIN) when the peer reads slower than we receive. Whatever it
     * does not take is simply lost here. */
    if (write(peer->fd, buffer, (size_t)n) == -1 && errno != EAGAIN && errno != EINTR)
        relay_close(relay); /* EPIPE, ECONNRESET: the peer has gone away */
}

int relay_start(int client_fd, int backend_fd)
{
    struct relay *relay = malloc(sizeof *relay);

    if (relay == NULL) {
        fprintf(stderr, "rsp: out of memory\n");
        return -1;
    }
    relay->client = (struct epoll_event_handler){ client_fd, relay_handle, relay };
    relay->backend = (struct epoll_event_handler){ backend_fd, relay_handle, relay };
    if (reactor_add(&relay->client, EPOLLIN) == -1) {
        perror("rsp: epoll_ctl(ADD) client");
        free(relay);
        return -1;
    }
    if (reactor_add(&relay->backend, EPOLLIN) == -1) {
        perror("rsp: epoll_ctl(ADD) backend");
        if (reactor_remove(&relay->client) == -1)
            perror("rsp: epoll_ctl(DEL) client");
        free(relay);
        return -1;
    }
    return 0;
}
