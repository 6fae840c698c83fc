/* connection.c -- buffered, non-blocking writes and epoll bookkeeping. */
#define _GNU_SOURCE
#include "connection.h"

#include "log.h"
#include "stats.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/uio.h>
#include <unistd.h>

static void init(struct connection *c, int fd,
                 void (*handle)(struct epoll_event_handler *, uint32_t), void *closure)
{
    c->handler = (struct epoll_event_handler){ fd, handle, closure };
    c->transport = &transport_plain;
    c->transport_state = NULL;
    c->transport_wants = 0;
    c->queue = (struct buffer)BUFFER_INIT;
    c->pipe = NULL;
    c->piped = 0;
    c->corked = false;
    c->registered = 0;
    c->bytes_read = c->bytes_written = NULL;
    c->connecting = c->paused = c->watch_hangup = c->shutdown_pending = c->shutdown_waiting = c->broken = false;
    c->sole = false;
    c->await_writable = false;
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

/* Lets go of c's pipe: back to the pool if it is empty, else closed (its
 * bytes can go nowhere now). */
static void drop_pipe(struct connection *c)
{
    if (c->pipe == NULL)
        return;
    if (c->piped == 0)
        pipe_pool_put(c->pipe);
    else
        pipe_pool_discard(c->pipe);
    c->pipe = NULL;
    c->piped = 0;
}

/* The peer is gone (EPIPE, ECONNRESET, ...): nothing we hold for it can be
 * delivered any more. */
static void write_failed(struct connection *c)
{
    c->broken = true;
    c->write_done = true;
    c->corked = false;
    c->shutdown_pending = c->shutdown_waiting = false;
    buffer_free(&c->queue);
    drop_pipe(c);
}

void connection_fail(struct connection *c)
{
    c->read_done = true;
    write_failed(c);
}

/* n bytes reached the socket (by write, writev or splice): counts them,
 * if the owner counts, and returns n. */
static ssize_t written_out(struct connection *c, ssize_t n)
{
    if (n > 0 && c->bytes_written != NULL)
        stats_add_own(c->bytes_written, (uint64_t)n);
    return n;
}

/* Writes from data; returns the bytes the transport took (maybe 0), or -1
 * if the connection failed. */
static ssize_t write_some(struct connection *c, const char *data, size_t len)
{
    return written_out(c, c->transport->write(c, data, len));
}

/* Writes the queue and then len bytes of data in one writev. Takes what
 * was written of the queue out of it; returns how much of data was
 * written (0 if not all of the queue was), or -1 if the connection
 * failed. */
static ssize_t write_queue_and(struct connection *c, const char *data, size_t len)
{
    size_t queued = buffer_length(&c->queue);
    struct iovec iov[2] = {
        { .iov_base = c->queue.data + c->queue.start, .iov_len = queued },
        { .iov_base = (void *)data, .iov_len = len },
    };
    ssize_t n = written_out(c, c->transport->writev(c, iov, 2));

    if (n <= 0)
        return n;
    if ((size_t)n < queued) {
        buffer_consume(&c->queue, (size_t)n);
        return 0;
    }
    buffer_consume(&c->queue, queued);
    return n - (ssize_t)queued;
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
    if (c->corked && buffer_length(&c->queue) > 0 && buffer_length(&c->queue) + len > CONNECTION_GATHER &&
        c->transport->writev != NULL) {
        /* Bytes are held and these are not small: they and these leave
         * together, and the hold ends. Smaller ones join the held bytes
         * (below), to leave with them at connection_uncork. */
        c->corked = false;
        n = write_queue_and(c, data, len);
    } else if (!c->corked && connection_queued(c) == 0 && !c->connecting) {
        /* Only write directly when nothing is queued (otherwise these
         * bytes would overtake the queued ones) and the socket is
         * connected. */
        n = write_some(c, data, len);
    }
    if (n == -1) {
        write_failed(c);
        return;
    }
    if ((size_t)n < len && buffer_append(&c->queue, data + n, len - (size_t)n) == -1) {
        log_msg("out of memory queueing %zu bytes; dropping the connection", len - (size_t)n);
        write_failed(c);
    }
}

void connection_cork(struct connection *c)
{
    if (connection_queued(c) == 0 && !c->connecting && !c->write_done)
        c->corked = true;
}

void connection_uncork(struct connection *c)
{
    if (!c->corked)
        return;
    c->corked = false;
    if (connection_queued(c) > 0)
        connection_flush(c);
}

bool connection_drop_held(struct connection *c)
{
    bool held = c->corked && buffer_length(&c->queue) > 0;

    c->corked = false;
    if (held)
        buffer_free(&c->queue); /* it held nothing else: cork needs it empty */
    return held;
}

/* Splices the pipe's bytes to the socket, as many as it takes. Returns
 * true once the pipe is empty (it goes back to the pool), false while
 * bytes remain or if the socket failed. */
static bool flush_pipe(struct connection *c)
{
    while (c->piped > 0) {
        ssize_t n = c->transport->splice_out(c, c->pipe->read_fd, c->piped);
        if (n > 0) {
            c->piped -= (size_t)n;
            written_out(c, n);
            stats_add_own(&stats_row()->bytes_spliced, (uint64_t)n);
        } else if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return false; /* the socket is full: wait for EPOLLOUT */
        } else {
            write_failed(c); /* EPIPE, ECONNRESET, ... */
            return false;
        }
    }
    drop_pipe(c);
    return true;
}

ssize_t connection_splice_from(struct connection *c, struct connection *from, size_t len)
{
    ssize_t n;

    /* Into an empty pipe only: then EAGAIN can only mean that `from` has
     * nothing, never that the pipe is full. */
    if (c->write_done || c->corked || connection_queued(c) > 0 || c->connecting ||
        c->transport->splice_out == NULL || from->transport->splice_in == NULL) {
        errno = ENOBUFS;
        return -1;
    }
    if (c->pipe == NULL && (c->pipe = pipe_pool_get()) == NULL) {
        errno = ENOBUFS;
        return -1;
    }
    if (len > c->pipe->capacity)
        len = c->pipe->capacity;
    n = from->transport->splice_in(from, c->pipe->write_fd, len);
    if (n <= 0) {
        int error = errno;
        drop_pipe(c); /* empty: back to the pool */
        if (n == -1 && (error == EINVAL || error == ENOSYS))
            error = ENOBUFS; /* a socket splice cannot read: copy */
        errno = error;
        return n;
    }
    c->piped = (size_t)n;
    if (from->bytes_read != NULL)
        stats_add_own(from->bytes_read, (uint64_t)n);
    flush_pipe(c);
    return n;
}

ssize_t connection_sendfile(struct connection *c, int fd, off_t *offset, size_t len)
{
    ssize_t n;

    if (c->write_done || c->corked || connection_queued(c) > 0 || c->connecting ||
        c->transport->sendfile == NULL) {
        errno = ENOBUFS;
        return -1;
    }
    n = c->transport->sendfile(c, fd, offset, len);
    if (n >= 0)
        return written_out(c, n);
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        return -1;
    if (errno == EINVAL || errno == ENOSYS) {
        errno = ENOBUFS; /* a file sendfile cannot read: copy */
        return -1;
    }
    int error = errno;
    write_failed(c);
    errno = error;
    return -1;
}

void connection_flush(struct connection *c)
{
    if (c->piped > 0 && !flush_pipe(c))
        return;
    while (buffer_length(&c->queue) > 0) {
        ssize_t n = write_some(c, c->queue.data + c->queue.start, buffer_length(&c->queue));
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
        /* Not read now, but a hang-up must be heard of. EPOLLIN reports
         * one as well as EPOLLRDHUP does, so a registration that has it
         * keeps it: for a keep-alive client whose request is at the
         * backend that saves two epoll_ctl calls per request (chapter
         * 13). The owner reads what arrives meanwhile, up to its limit. */
        wanted |= (c->registered & EPOLLIN) ? EPOLLIN : EPOLLRDHUP;
    if (connection_queued(c) > 0 || c->shutdown_waiting || (c->await_writable && !c->write_done))
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
    /* epoll forgets a socket when the last descriptor of it is closed: for
     * one of ours alone, the close does it and EPOLL_CTL_DEL would be a
     * system call for nothing (chapter 16). Events of this batch that
     * still name it are voided all the same. */
    if (c->registered != 0 && c->sole)
        reactor_forget(&c->handler);
    else if (c->registered != 0 && reactor_remove(&c->handler) == -1)
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
    drop_pipe(c);
    c->corked = false;
}
