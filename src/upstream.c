/* upstream.c -- backend connections and the idle pools. */
#include "upstream.h"

#include "backend.h"
#include "net.h"
#include "pool.h"
#include "settings.h"
#include "stats.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/resource.h>

/* However busy a backend was, at most this many of its connections wait
 * idle, and at most one per this many descriptors rsp may open: a burst
 * cannot leave rsp without descriptors for its clients. */
#define UPSTREAM_IDLE_MAX 1024
#define UPSTREAM_FDS_PER_IDLE 4

/* rsp is stopping (upstream_stop_pooling): no connection waits idle. */
static bool pooling_stopped;

static void upstream_close(struct upstream *u);
static void finishing_event(struct upstream *u, uint32_t events);

/* An event on an idle connection: the backend closed it (EOF, reset), or
 * sent bytes nobody asked for. Either way it is of no more use. */
static void upstream_handle(struct epoll_event_handler *self, uint32_t events)
{
    struct upstream *u = self->closure;

    events = connection_events(&u->conn, events);
    if (u->owner != NULL)
        u->handle(u->owner, events);
    else if (u->finishing)
        finishing_event(u, events);
    else
        upstream_close(u);
}

static void idle_timer_fired(struct timer *timer)
{
    upstream_close(timer->closure);
}

static void attach(struct upstream *u, void (*handle)(void *owner, uint32_t events), void *owner)
{
    u->handle = handle;
    u->owner = owner;
    backend_count_active(u->backend, 1);
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
    timer_init(&u->idle_timer, idle_timer_fired, u);
    u->backend = b;
    attach(u, handle, owner);
    return u;
}

/* The head of the list a detached u is on: its backend's idle pool, or
 * its finishing connections. */
static struct upstream **list_of(struct upstream *u)
{
    return u->finishing ? &u->backend->finishing : &u->backend->idle;
}

/* One more (1) or one fewer (-1) idle connection of b: for the pool's
 * rules here, and for the status page (every process's together). */
static void count_idle(struct backend *b, int delta)
{
    _Atomic int32_t *mine = &b->stats->idle[stats_row_index()];

    b->idle_count += (unsigned)delta;
    atomic_store_explicit(mine, atomic_load_explicit(mine, memory_order_relaxed) + delta,
                          memory_order_relaxed);
}

/* Puts the detached u first on its list. */
static void link_first(struct upstream *u)
{
    struct upstream **head = list_of(u);

    u->prev = NULL;
    u->next = *head;
    if (*head != NULL)
        (*head)->prev = u;
    *head = u;
    if (!u->finishing)
        count_idle(u->backend, 1);
}

/* Takes u off its backend's idle or finishing list. */
static void unlink_detached(struct upstream *u)
{
    if (u->prev != NULL)
        u->prev->next = u->next;
    else
        *list_of(u) = u->next;
    if (u->next != NULL)
        u->next->prev = u->prev;
    u->prev = u->next = NULL;
    if (!u->finishing)
        count_idle(u->backend, -1);
    timer_disarm(&u->idle_timer);
}

struct upstream *upstream_take_idle(struct backend *b, void (*handle)(void *owner, uint32_t events),
                                    void *owner)
{
    struct upstream *u = b->idle;

    if (u == NULL)
        return NULL;
    unlink_detached(u);
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
        unlink_detached(u);
    connection_close(&u->conn);
    u->deferred.release = upstream_free;
    reactor_defer(&u->deferred);
}

/* The hard cap on a backend's idle connections: from RLIMIT_NOFILE, read
 * once (rsp's limit does not change while it runs). */
static unsigned idle_cap(void)
{
    static unsigned cap;
    struct rlimit rl;

    if (cap != 0)
        return cap;
    cap = UPSTREAM_IDLE_MAX;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur / UPSTREAM_FDS_PER_IDLE < cap)
        cap = rl.rlim_cur / UPSTREAM_FDS_PER_IDLE;
    return cap;
}

/* The most connections of b in use at once lately: in this window of
 * `window` seconds or the one before, so that a peak is forgotten one or
 * two windows after it. Called before each release (b->active still
 * counts the connection released), which is where every peak ends. */
static unsigned recent_peak(struct backend *b, double window)
{
    double now = reactor_now();

    if (now >= b->window_start + window) {
        b->peak_before = now < b->window_start + 2 * window ? b->peak : 0;
        b->peak = 0;
        b->window_start = now;
    }
    if (b->active > b->peak)
        b->peak = b->active;
    return b->peak > b->peak_before ? b->peak : b->peak_before;
}

/* Room in b's pool for the connection being released: backend_keepalive
 * idle ones always (0: no pool at all), and beyond that as long as idle
 * and in use together stay within the recent peak, so that the load of a
 * moment ago finds its connections open when it comes back; never more
 * than idle_cap(). */
static bool pool_has_room(struct backend *b, const struct keepalive *k)
{
    unsigned peak = recent_peak(b, k->backend_idle_timeout);

    if (k->backend_idle == 0 || b->idle_count >= idle_cap())
        return false;
    return b->idle_count < k->backend_idle || b->idle_count + b->active <= peak;
}

void upstream_release(struct upstream *u, bool reusable, const struct keepalive *k)
{
    struct backend *b = u->backend;
    struct connection *c = &u->conn;
    bool room = pool_has_room(b, k);

    backend_count_active(b, -1);
    if (!reusable || !room || pooling_stopped || c->broken || c->read_done ||
        c->write_done || connection_queued(c) > 0 ||
        timer_arm(&u->idle_timer, reactor_now() + k->backend_idle_timeout) == -1) {
        upstream_close(u);
        return;
    }
    /* Most recently used first: the connections at the back of the list
     * idle longest and reach their timeout, so the pool shrinks to what
     * the load needs, one connection at a time, never all at once. */
    c->paused = false;
    c->watch_hangup = false;
    u->owner = NULL;
    link_first(u);
    if (connection_update(c) == -1)
        upstream_close(u);
}

/* A finishing connection: writable (write more), or failed or hung up
 * (EPOLLERR and EPOLLHUP come unasked). Closed once nothing is left. */
static void finishing_event(struct upstream *u, uint32_t events)
{
    struct connection *c = &u->conn;
    size_t before = connection_queued(c);

    if (events & (EPOLLERR | EPOLLHUP)) {
        upstream_close(u);
        return;
    }
    connection_flush(c);
    if (c->broken || connection_queued(c) == 0 || connection_update(c) == -1) {
        upstream_close(u);
        return;
    }
    if (connection_queued(c) < before &&
        timer_arm(&u->idle_timer, reactor_now() + u->finish_timeout) == -1)
        upstream_close(u);
}

void upstream_finish(struct upstream *u, double timeout)
{
    struct connection *c = &u->conn;

    backend_count_active(u->backend, -1);
    if (c->broken || c->write_done || connection_queued(c) == 0 ||
        timer_arm(&u->idle_timer, reactor_now() + timeout) == -1) {
        upstream_close(u);
        return;
    }
    /* Nothing more is read: its answer is complete, and a reset from it
     * now changes nothing for anyone. */
    c->read_done = true;
    u->owner = NULL;
    u->finishing = true;
    u->finish_timeout = timeout;
    link_first(u);
    if (connection_update(c) == -1)
        upstream_close(u);
}

/* Closes b's idle connections (not those still finishing a request). */
static void close_pooled(struct backend *b)
{
    while (b->idle != NULL)
        upstream_close(b->idle);
}

void upstream_close_idle(struct backend *b)
{
    close_pooled(b);
    while (b->finishing != NULL)
        upstream_close(b->finishing);
}

void upstream_stop_pooling(void)
{
    pooling_stopped = true;
    for (struct backend *b = backend_first(); b != NULL; b = b->registry_next)
        close_pooled(b);
}
