/* transport.h -- what a connection reads and writes through.
 *
 * A connection (connection.h) never touches its socket itself: it asks
 * its transport to read, to write and to end the write side. The plain
 * transport is the socket's own system calls. A transport that encrypts
 * (TLS, chapter 14) keeps state of its own and may, now and then, need the
 * other direction to make progress: a TLS read may have to write (a
 * handshake message), a TLS write may have to read first. It says so in
 * c->transport_wants, and the connection adds those events to what it
 * asks epoll for and hands them on as the events its owner expects
 * (connection_events). So the write queue, the backpressure and the
 * half-close built on top work the same over any transport. */
#ifndef RSP_TRANSPORT_H
#define RSP_TRANSPORT_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct connection;

/* The operations; each is called with the connection's socket open. */
struct transport {
    const char *name;
    /* Reads up to len bytes into buf. Returns the count, 0 at the end of
     * the stream, or -1 with errno: EAGAIN when nothing can be read now,
     * anything else when the connection failed. */
    ssize_t (*read)(struct connection *c, char *buf, size_t len);
    /* Writes from data. Returns how many bytes were taken (0: none now,
     * wait for the socket), or -1 when the connection failed. */
    ssize_t (*write)(struct connection *c, const char *data, size_t len);
    /* Writes the count pieces of iov, in order, in one call. Returns as
     * write does. NULL for a transport that cannot take pieces at once
     * (TLS: each write is a record); then the connection joins them. */
    ssize_t (*writev)(struct connection *c, const struct iovec *iov, int count);
    /* Ends the write side (the peer sees the end of the stream). Returns
     * 0 when done, 1 when it must be called again once the socket is
     * ready, -1 when the connection failed. */
    int (*shutdown)(struct connection *c);
    /* Splicing (splice(2), chapter 16), as HAProxy's rcv_pipe and
     * snd_pipe: bytes moved between the socket and a pipe without
     * entering rsp's memory. splice_in moves up to len bytes from c's
     * socket into the pipe whose write end is pipe_fd: returns the count,
     * 0 at the end of the stream, or -1 with errno (EAGAIN: nothing now;
     * EINVAL or ENOSYS: this socket cannot be spliced; anything else: the
     * connection failed). splice_out moves up to len bytes from the pipe
     * whose read end is pipe_fd to c's socket: returns the count, or -1
     * with errno (EAGAIN: the socket is full; anything else: the
     * connection failed). Both NULL for a transport whose bytes must pass
     * through rsp (TLS encrypts them): its connections never splice. */
    ssize_t (*splice_in)(struct connection *c, int pipe_fd, size_t len);
    ssize_t (*splice_out)(struct connection *c, int pipe_fd, size_t len);
    /* Sends up to len bytes of the file fd from *offset to c's socket
     * (sendfile(2)), advancing *offset: returns the count, 0 at the
     * file's end, or -1 with errno (EAGAIN: the socket is full; EINVAL or
     * ENOSYS: this file cannot be sent so; anything else: the socket or
     * the file failed). NULL for a transport whose bytes pass through rsp
     * (TLS). */
    ssize_t (*sendfile)(struct connection *c, int fd, off_t *offset, size_t len);
    /* Frees what the transport holds for c; the socket is closed after. */
    void (*release)(struct connection *c);
};

/* Bits of c->transport_wants: the transport is waiting for the other
 * direction. */
#define TRANSPORT_READ_NEEDS_OUT 1u  /* a read waits until the socket is writable */
#define TRANSPORT_WRITE_NEEDS_IN 2u  /* a write waits until the socket is readable */

/* The socket itself: read(2), write(2), writev(2), splice(2), sendfile(2),
 * shutdown(2). */
extern const struct transport transport_plain;

#endif
