/* connection.c -- buffered, non-blocking writes and epoll bookkeeping. */
#include "connection.h"

#include "log.h"
#include "stats.h"

#include <errno.h>
#include <sys/epoll.h>
#include <unistd.h>

static void init(struct connection *c, int fd,
                 void (*handle)(struct epoll_event_handler *, uint32_t), void *closure)
{
    c->handler = (struct epoll_event_handler){ fd, handle, closure };
    c->transport = &transport_plain;
    c->transport_state = NULL;
    c->transport_wants = 0;
    c->queue = (struct buffer)BUFFER_INIT;
    c->registered = 0;
    c->bytes_read = c->bytes_written = NULL;
    c->connecting = c->paused = c->watch_hangup = c->shutdown_pending = c->shutdown_waiting = c->broken = false;
}

void connection_init(struct connection *c, int fd, bool connecting,
                     void (*handle)(struct epoll_event_handler *, uint32_t), void *closure)
{
    init(c, fd, handle, closure);
    c->connecting = connecting;
    c->read_done = c->write_done = false;
}

void connection_init_none(struct connection *c)
{
    init(c, -1, NULL, NULL);
    c->read_done = c->write_done = true;
}

uint32_t connection_events(const struct connection *c, uint32_t events)
{
    if ((c->transport_wants & TRANSPORT_READ_NEEDS_OUT) && (events & EPOLLOUT))
        events |= EPOLLIN;
    if ((c->transport_wants & TRANSPORT_WRITE_NEEDS_IN) && (events & EPOLLIN))
        events |= EPOLLOUT;
    return events;
}

ssize_t connection_read(struct connection *c, char *buf, size_t len)
{
    ssize_t n = c->transport->read(c, buf, len);

    if (n > 0 && c->bytes_read != NULL)
        stats_add_own(c->bytes_read, (uint64_t)n);
    return n;
}

/* The peer is gone (EPIPE, ECONNRESET, ...): nothing we hold for it can be
 * delivered any more. */
static void write_failed(struct connection *c)
{
    c->broken = true;
    c->write_done = true;
    c->shutdown_pending = c->shutdown_waiting = false;
    buffer_free(&c->queue);
}

void connection_fail(struct connection *c)
{
    c->read_done = true;
    write_failed(c);
}

/* Writes from data; returns the bytes the transport took (maybe 0), or -1
 * if the connection failed. */
static ssize_t write_some(struct connection *c, const char *data, size_t len)
{
    ssize_t n = c->transport->write(c, data, len);

    if (n > 0 && c->bytes_written != NULL)
        stats_add_own(c->bytes_written, (uint64_t)n);
    return n;
}

static void shutdown_now(struct connection *c)
{
    int rc = c->transport->shutdown(c);

    c->shutdown_waiting = rc == 1;
    if (rc == 1)
        return; /* connection_flush calls again when the socket is ready */
    c->shutdown_pending = false;
    c->write_done = true;
    if (rc == -1)
        log_errno("shutdown fd %d", c->handler.fd);
}

void connection_write(struct connection *c, const char *data, size_t len)
{
    ssize_t n = 0;

    if (c->write_done)
        return;
    /* Only write directly when nothing is queued (otherwise these bytes
     * would overtake the queued ones) and the socket is connected. */
    if (connection_queued(c) == 0 && !c->connecting) {
        n = write_some(c, data, len);
        if (n == -1) {
            write_failed(c);
            return;
        }
    }
    if ((size_t)n < len && buffer_append(&c->queue, data + n, len - (size_t)n) == -1) {
        log_msg("out of memory queueing %zu bytes; dropping the connection", len - (size_t)n);
        write_failed(c);
    }
}

void connection_flush(struct connection *c)
{
    while (connection_queued(c) > 0) {
        ssize_t n = write_some(c, c->queue.data + c->queue.start, connection_queued(c));
        if (n == -1) {
            write_failed(c);
            return;
        }
        if (n == 0)
            return; /* the socket is full again; wait for the next EPOLLOUT */
        buffer_consume(&c->queue, (size_t)n);
    }
    if (c->shutdown_pending)
        shutdown_now(c);
}

void connection_shutdown_write(struct connection *c)
{
    if (c->write_done || c->shutdown_pending)
        return;
    c->shutdown_pending = true;
    if (connection_queued(c) == 0)
        shutdown_now(c);
}

int connection_update(struct connection *c)
{
    uint32_t wanted = 0;
    int rc;

    if (c->handler.fd == -1)
        return 0;
    /* A transport waiting for the other direction gets it instead of the
     * one its owner asked for: watching that one would only wake us for
     * something the transport cannot use yet. */
    if (c->connecting)
        wanted = EPOLLOUT; /* writable means the connect has finished */
    else if (!c->read_done && !c->paused)
        wanted |= (c->transport_wants & TRANSPORT_READ_NEEDS_OUT) ? EPOLLOUT : EPOLLIN;
    else if (!c->read_done && c->watch_hangup)
        wanted |= EPOLLRDHUP;
    if (connection_queued(c) > 0 || c->shutdown_waiting)
        wanted |= (c->transport_wants & TRANSPORT_WRITE_NEEDS_IN) ? EPOLLIN : EPOLLOUT;
    if (wanted == c->registered)
        return 0;

    /* epoll always reports EPOLLHUP and EPOLLERR, even for an empty event
     * mask; a socket we want nothing from leaves epoll altogether, or a
     * hung-up peer would wake us again and again. */
    if (wanted == 0)
        rc = reactor_remove(&c->handler);
    else if (c->registered == 0)
        rc = reactor_add(&c->handler, wanted);
    else
        rc = reactor_modify(&c->handler, wanted);
    if (rc == -1) {
        log_errno("epoll_ctl fd %d", c->handler.fd);
        return -1;
    }
    c->registered = wanted;
    return 0;
}

void connection_close(struct connection *c)
{
    if (c->registered != 0 && reactor_remove(&c->handler) == -1)
        log_errno("epoll_ctl(DEL) fd %d", c->handler.fd);
    c->registered = 0;
    if (c->handler.fd != -1) {
        c->transport->release(c);
        if (close(c->handler.fd) == -1)
            log_errno("close fd %d", c->handler.fd);
    }
    c->transport = &transport_plain;
    c->transport_state = NULL;
    c->transport_wants = 0;
    c->handler.fd = -1;
    buffer_free(&c->queue);
}
