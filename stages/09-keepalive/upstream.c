/* upstream.c -- backend connections and the idle pools. */
#include "upstream.h"

#include "backend.h"
#include "config.h"
#include "net.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

static void upstream_close(struct upstream *u);

/* An event on an idle connection: the backend closed it (EOF, reset), or
 * sent bytes nobody asked for. Either way it is of no more use. */
static void upstream_handle(struct epoll_event_handler *self, uint32_t events)
{
    struct upstream *u = self->closure;

    if (u->owner != NULL)
        u->handle(u->owner, events);
    else
        upstream_close(u);
}

static void idle_timer_fired(struct timer *timer)
{
    upstream_close((struct upstream *)((char *)timer - offsetof(struct upstream, idle_timer)));
}

static void attach(struct upstream *u, void (*handle)(void *owner, uint32_t events), void *owner)
{
    u->handle = handle;
    u->owner = owner;
    u->backend->active++;
}

struct upstream *upstream_connect(struct backend *b, const struct addrinfo *address,
                                  void (*handle)(void *owner, uint32_t events), void *owner)
{
    struct upstream *u = calloc(1, sizeof *u);
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
    timer_init(&u->idle_timer, idle_timer_fired);
    u->backend = b;
    attach(u, handle, owner);
    return u;
}

/* Takes u out of its backend's idle list. */
static void unlink_idle(struct upstream *u)
{
    struct backend *b = u->backend;

    if (u->prev != NULL)
        u->prev->next = u->next;
    else
        b->idle = u->next;
    if (u->next != NULL)
        u->next->prev = u->prev;
    u->prev = u->next = NULL;
    b->idle_count--;
    timer_disarm(&u->idle_timer);
}

struct upstream *upstream_take_idle(struct backend *b, void (*handle)(void *owner, uint32_t events),
                                    void *owner)
{
    struct upstream *u = b->idle;

    if (u == NULL)
        return NULL;
    unlink_idle(u);
    u->requests++;
    attach(u, handle, owner);
    return u;
}

static void upstream_free(struct reactor_deferred *deferred)
{
    free((struct upstream *)deferred); /* its first member */
}

static void upstream_close(struct upstream *u)
{
    if (u->owner == NULL)
        unlink_idle(u);
    connection_close(&u->conn);
    u->deferred.release = upstream_free;
    reactor_defer(&u->deferred);
}

void upstream_release(struct upstream *u, bool reusable, const struct keepalive *k)
{
    struct backend *b = u->backend;
    struct connection *c = &u->conn;

    b->active--;
    if (!reusable || b->idle_count >= k->backend_idle || c->broken || c->read_done ||
        c->write_done || connection_queued(c) > 0 ||
        timer_arm(&u->idle_timer, reactor_now() + k->backend_idle_timeout) == -1) {
        upstream_close(u);
        return;
    }
    /* Most recently used first: the connections at the back of the list
     * idle longest and reach their timeout, so the pool shrinks to what
     * the load needs. */
    c->paused = false;
    c->watch_hangup = false;
    u->owner = NULL;
    u->prev = NULL;
    u->next = b->idle;
    if (b->idle != NULL)
        b->idle->prev = u;
    b->idle = u;
    b->idle_count++;
    if (connection_update(c) == -1)
        upstream_close(u);
}

void upstream_close_idle(struct backend *b)
{
    while (b->idle != NULL)
        upstream_close(b->idle);
}
