/* relay.c -- a blocking, two-way copy between two sockets.
 *
 * We watch both sockets with poll(2), because we cannot know in advance
 * whether the client's request fits in one read, or whether the backend
 * starts answering before the client has finished sending (a large upload
 * that the backend rejects early, for example). */
#include "relay.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define RELAY_BUFFER_SIZE 16384

/* Writes all len bytes, retrying short writes. Returns 0, or -1 on error
 * (errno set; EPIPE and ECONNRESET mean the peer has gone away). */
static int write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n == -1) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Moves one buffer from `from` to `to`. Returns the number of bytes moved,
 * 0 at end of file, or -1 on an error on either side. */
static ssize_t copy_once(int from, int to)
{
    char buffer[RELAY_BUFFER_SIZE];
    ssize_t n;

    do {
        n = read(from, buffer, sizeof buffer);
    } while (n == -1 && errno == EINTR);
    if (n <= 0)
        return n;
    if (write_all(to, buffer, (size_t)n) == -1)
        return -1;
    return n;
}

void relay(int client_fd, int backend_fd)
{
    struct pollfd fds[2];
    int client_open = 1;

    fds[0].fd = client_fd;
    fds[1].fd = backend_fd;
    fds[0].events = fds[1].events = POLLIN;

    for (;;) {
        /* Once the client has finished sending, a negative fd makes poll
         * skip it: only the backend's answer is left to carry. */
        fds[0].fd = client_open ? client_fd : -1;
        fds[0].revents = fds[1].revents = 0;
        if (poll(fds, 2, -1) == -1) {
            if (errno == EINTR)
                continue;
            perror("rsp: poll");
            return;
        }

        if (fds[0].revents != 0) {
            ssize_t n = copy_once(client_fd, backend_fd);
            if (n == -1)
                return;
            if (n == 0) {
                /* The client finished its request (a half-close). Tell
                 * the backend, which may be waiting for exactly that, and
                 * keep relaying its answer. */
                client_open = 0;
                if (shutdown(backend_fd, SHUT_WR) == -1 && errno != ENOTCONN)
                    return;
            }
        }
        if (fds[1].revents != 0) {
            ssize_t n = copy_once(backend_fd, client_fd);
            if (n <= 0)
                return; /* backend done (0) or broken (-1) */
        }
    }
}
