/* connection.h -- a non-blocking socket with a write queue.
 *
 * Both sides of a proxied pair are connections. A connection reads and
 * writes through its transport (transport.h): the socket itself, unless
 * the owner puts another one in place. Writing never loses data:
 * what the kernel does not take at once is queued and written when the
 * socket becomes writable again. The connection keeps its epoll
 * registration in step with what it needs: EPOLLIN while reading is wanted,
 * EPOLLOUT only while bytes are queued, and no registration at all when it
 * needs neither (so a hung-up socket cannot wake us in a loop). */
#ifndef RSP_CONNECTION_H
#define RSP_CONNECTION_H

#include "buffer.h"
#include "reactor.h"
#include "transport.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct connection {
    struct epoll_event_handler handler;
    const struct transport *transport; /* how bytes reach the socket */
    void *transport_state;   /* the transport's own, if it has any */
    unsigned transport_wants; /* TRANSPORT_* bits: it waits for the other direction */
    struct buffer queue;     /* bytes accepted by connection_write, not yet sent */
    uint32_t registered;     /* events epoll watches for us now; 0: not in epoll */
    bool connecting;         /* a non-blocking connect has not finished yet */
    bool paused;             /* reading stopped by backpressure */
    bool watch_hangup;       /* while paused, still report the peer's FIN or reset */
    bool read_done;          /* no more reading: EOF, error, or nowhere to send it */
    bool shutdown_pending;   /* shut the write side once the queue is empty */
    bool shutdown_waiting;   /* the transport began shutting it and must be called again */
    bool write_done;         /* write side shut down, or writing failed */
    bool broken;             /* the socket failed (EPIPE, ECONNRESET, ...) */
    _Atomic uint64_t *bytes_read;    /* if set, counts what is read (stats.h) */
    _Atomic uint64_t *bytes_written; /* and what is written */
};

/* Sets up c for the non-blocking socket fd; events on it will call
 * handle(&c->handler, events) with c->handler.closure == closure. With
 * connecting true, the socket's connect is still under way: we wait for
 * writability alone until the owner clears c->connecting. Otherwise reading
 * starts enabled. The transport is the plain one: the owner may set another
 * before the first read or write. Nothing is registered with epoll until
 * connection_update. */
void connection_init(struct connection *c, int fd, bool connecting,
                     void (*handle)(struct epoll_event_handler *, uint32_t), void *closure);

/* Sets up c as "no socket": nothing to read, nothing can be written. */
void connection_init_none(struct connection *c);

/* What an event on c's socket means to its owner: the events as epoll
 * reported them, plus EPOLLIN when the transport's read was waiting for
 * EPOLLOUT, and EPOLLOUT when its write was waiting for EPOLLIN. Owners
 * call it first thing in their handlers. */
uint32_t connection_events(const struct connection *c, uint32_t events);

/* Reads into buf. Returns the byte count, 0 at end of file, or -1: errno
 * EAGAIN when nothing is ready, anything else when the socket failed. */
ssize_t connection_read(struct connection *c, char *buf, size_t len);

/* Sends len bytes, queueing whatever the kernel does not take now. Once
 * writing has failed (the peer went away) the bytes are dropped: there is
 * nobody to deliver them to. */
void connection_write(struct connection *c, const char *data, size_t len);

/* Writes as much of the queue as the socket takes (call on EPOLLOUT). When
 * the queue empties and a shutdown is pending, shuts the write side. */
void connection_flush(struct connection *c);

/* The socket is broken (a read failed with ECONNRESET, ...): stops reading
 * and writing and drops whatever was queued. */
void connection_fail(struct connection *c);

/* Shuts the write side (a FIN to the peer) as soon as everything queued
 * has been written: a half-close, reading goes on. */
void connection_shutdown_write(struct connection *c);

/* Bytes queued and not yet written. */
static inline size_t connection_queued(const struct connection *c)
{
    return buffer_length(&c->queue);
}

/* Brings the epoll registration in line with the flags and the queue.
 * Call after changing them. Returns 0, or -1 if epoll failed. */
int connection_update(struct connection *c);

/* Removes the socket from epoll, releases the transport, closes the
 * socket and frees the queue. Does
 * nothing more for a connection without a socket. */
void connection_close(struct connection *c);

#endif
