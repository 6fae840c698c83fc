/* transport_plain.c -- the transport that is the socket itself. */
#define _GNU_SOURCE /* splice */
#include "transport.h"

#include "connection.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

static ssize_t plain_read(struct connection *c, char *buf, size_t len)
{
    ssize_t n;

    do {
        n = read(c->handler.fd, buf, len);
    } while (n == -1 && errno == EINTR);
    return n;
}

/* What a write(2) or writev(2) returned, as struct transport's write
 * promises it: the bytes taken, 0 when the socket is full, -1 when the
 * connection failed (EPIPE, as SIGPIPE is ignored; ECONNRESET, ...). */
static ssize_t written(ssize_t n)
{
    if (n >= 0)
        return n;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        return 0;
    return -1;
}

static ssize_t plain_write(struct connection *c, const char *data, size_t len)
{
    ssize_t n;

    do {
        n = write(c->handler.fd, data, len);
    } while (n == -1 && errno == EINTR);
    return written(n);
}

static ssize_t plain_writev(struct connection *c, const struct iovec *iov, int count)
{
    ssize_t n;

    do {
        n = writev(c->handler.fd, iov, count);
    } while (n == -1 && errno == EINTR);
    return written(n);
}

static ssize_t plain_splice_in(struct connection *c, int pipe_fd, size_t len)
{
    ssize_t n;

    do {
        n = splice(c->handler.fd, NULL, pipe_fd, NULL, len, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    } while (n == -1 && errno == EINTR);
    return n;
}

static ssize_t plain_splice_out(struct connection *c, int pipe_fd, size_t len)
{
    ssize_t n;

    do {
        n = splice(pipe_fd, NULL, c->handler.fd, NULL, len, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    } while (n == -1 && errno == EINTR);
    return n;
}

static ssize_t plain_sendfile(struct connection *c, int fd, off_t *offset, size_t len)
{
    ssize_t n;

    do {
        n = sendfile(c->handler.fd, fd, offset, len);
    } while (n == -1 && errno == EINTR);
    return n;
}

static int plain_shutdown(struct connection *c)
{
    /* ENOTCONN: the peer has already gone entirely; nothing to tell it. */
    if (shutdown(c->handler.fd, SHUT_WR) == -1 && errno != ENOTCONN)
        return -1;
    return 0;
}

static void plain_release(struct connection *c)
{
    (void)c; /* nothing of its own */
}

const struct transport transport_plain = {
    .name = "plain",
    .read = plain_read,
    .write = plain_write,
    .writev = plain_writev,
    .splice_in = plain_splice_in,
    .splice_out = plain_splice_out,
    .sendfile = plain_sendfile,
    .shutdown = plain_shutdown,
    .release = plain_release,
};
