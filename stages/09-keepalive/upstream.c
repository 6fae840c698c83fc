/* upstream.c -- backend connections. */
#include "upstream.h"

#include "backend.h"
#include "net.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

static void upstream_handle(struct epoll_event_handler *self, uint32_t events)
{
    struct upstream *u = self->closure;

    u->handle(u->owner, events);
}

struct upstream *upstream_connect(struct backend *b, const struct addrinfo *address,
                                  void (*handle)(void *owner, uint32_t events), void *owner)
{
    struct upstream *u = malloc(sizeof *u);
    int fd;

    if (u == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    fd = net_connect_start(address);
    if (fd == -1) {
        int error = errno;
        free(u);
        errno = error;
        return NULL;
    }
    connection_init(&u->conn, fd, true, upstream_handle, u);
    u->backend = b;
    u->handle = handle;
    u->owner = owner;
    b->active++;
    return u;
}

static void upstream_free(struct reactor_deferred *deferred)
{
    free((struct upstream *)deferred); /* its first member */
}

void upstream_release(struct upstream *u)
{
    connection_close(&u->conn);
    u->backend->active--;
    u->deferred.release = upstream_free;
    reactor_defer(&u->deferred);
}
