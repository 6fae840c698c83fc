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

#include "pipe_pool.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* While corked, writes that keep the held bytes within this many are
 * copied to join them: a copy this small costs less than a system call. */
#define CONNECTION_GATHER 4096

struct connection {
    struct epoll_event_handler handler;
    const struct transport *transport; /* how bytes reach the socket */
    void *transport_state;   /* the transport's own, if it has any */
    unsigned transport_wants; /* TRANSPORT_* bits: it waits for the other direction */
    struct buffer queue;     /* bytes accepted by connection_write, not yet sent */
    struct pipe_pair *pipe;  /* spliced bytes on their way to the socket, or NULL */
    size_t piped;            /* how many; they go out before the queue's */
    uint32_t registered;     /* events epoll watches for us now; 0: not in epoll */
    bool connecting;         /* a non-blocking connect has not finished yet */
    bool paused;             /* reading stopped by backpressure */
    bool corked;             /* writes are held, to leave together (connection_cork) */
    bool watch_hangup;       /* while paused, still report the peer's FIN or reset */
    bool read_done;          /* no more reading: EOF, error, or nowhere to send it */
    bool shutdown_pending;   /* shut the write side once the queue is empty */
    bool shutdown_waiting;   /* the transport began shutting it and must be called again */
    bool write_done;         /* write side shut down, or writing failed */
    bool broken;             /* the socket failed (EPIPE, ECONNRESET, ...) */
    bool await_writable;     /* the owner writes by itself (sendfile) and waits
                                for the socket to take more: EPOLLOUT */
    bool sole;               /* no other descriptor, here or in another process,
                                refers to this socket: closing it takes it out of
                                epoll by itself (connection_close) */
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

/* Holds back what is written to c from now on, so that it leaves with
 * the next write in one system call: a response head and the first body
 * bytes read with it go out as one writev, one packet instead of two
 * (chapter 16). Writes that keep what is held within CONNECTION_GATHER
 * bytes join it (a small response's head, body and last chunk leave as
 * one write); the first larger one sends what is held and itself in one
 * writev and ends the hold; connection_uncork sends whatever is held.
 * Does nothing if bytes are queued already (they wait for the socket
 * anyway). Over a transport without writev every piece is joined in the
 * queue and sent as one. */
void connection_cork(struct connection *c);

/* Ends the hold of connection_cork, writing what it held. */
void connection_uncork(struct connection *c);

/* Drops what connection_cork holds, unsent, and ends the hold. Returns
 * true if bytes were held: then nothing written since the cork has left,
 * and the peer has had none of it. */
bool connection_drop_held(struct connection *c);

/* True if c's transport splices (transport.h): bytes can reach or leave
 * its socket without passing through rsp. */
static inline bool connection_can_splice(const struct connection *c)
{
    return c->transport->splice_in != NULL && c->transport->splice_out != NULL;
}

/* Moves up to len bytes from the socket of `from` to c's socket through a
 * pipe (splice(2)): they never enter rsp's memory. What c's socket does
 * not take at once waits in the pipe, counted in connection_queued, and
 * goes out with connection_flush. Only when c has nothing queued, c's
 * transport splices out and that of `from` splices in (transport.h).
 * Returns the bytes taken from `from`, 0 at its end of file, or -1 with
 * errno: EAGAIN when it has nothing now,
 * ENOBUFS when no pipe can be had (read and copy instead), anything else
 * when `from` failed. A failure of c's socket shows as c->broken. */
ssize_t connection_splice_from(struct connection *c, struct connection *from, size_t len);

/* Sends up to len bytes of the file fd from *offset to c's socket with
 * sendfile(2): they go from the page cache to the socket without entering
 * rsp's memory; *offset moves past them. Only when c has nothing queued
 * and its transport sends files (transport.h). Returns the bytes sent, 0
 * when the file has no byte at *offset (it ended), or -1 with errno:
 * EAGAIN when the socket is full (set c->await_writable to hear when it
 * takes more), ENOBUFS when this cannot be done now or for this file
 * (read and copy instead), anything else when the socket or the file
 * failed: then c is broken (EPIPE, ECONNRESET: the peer is gone). */
ssize_t connection_sendfile(struct connection *c, int fd, off_t *offset, size_t len);

/* Writes as much of what is queued as the socket takes (call on EPOLLOUT):
 * the pipe's bytes first, then the queue's. When both are empty and a
 * shutdown is pending, shuts the write side. */
void connection_flush(struct connection *c);

/* The socket is broken (a read failed with ECONNRESET, ...): stops reading
 * and writing and drops whatever was queued. */
void connection_fail(struct connection *c);

/* Shuts the write side (a FIN to the peer) as soon as everything queued
 * has been written: a half-close, reading goes on. */
void connection_shutdown_write(struct connection *c);

/* Bytes accepted for writing and not yet written: in the queue, or in
 * the pipe. */
static inline size_t connection_queued(const struct connection *c)
{
    return buffer_length(&c->queue) + c->piped;
}

/* Brings the epoll registration in line with the flags and the queue.
 * Call after changing them. Returns 0, or -1 if epoll failed. */
int connection_update(struct connection *c);

/* Removes the socket from epoll, releases the transport, closes the
 * socket and frees the queue and the pipe. Does
 * nothing more for a connection without a socket. */
void connection_close(struct connection *c);

#endif
