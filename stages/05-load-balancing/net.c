/* net.c -- listening and connecting sockets. */
#include "net.h"

#include "log.h"

#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

int net_parse_port(const char *text)
{
    char *end;
    long port;

    if (text[0] < '0' || text[0] > '9')
        return -1;
    errno = 0;
    port = strtol(text, &end, 10);
    if (errno != 0 || *end != '\0' || port < 1 || port > 65535)
        return -1;
    return (int)port;
}

int net_listen(const char *host, const char *port)
{
    struct addrinfo hints, *addrs, *ai;
    int fd = -1, rc, one = 1, saved_errno = 0;

    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;     /* IPv4 or IPv6, whichever binds */
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;     /* NULL host: every local address */

    rc = getaddrinfo(host, port, &hints, &addrs);
    if (rc != 0) {
        log_msg("cannot resolve listening address %s: %s", host ? host : "*", gai_strerror(rc));
        return -1;
    }
    for (ai = addrs; ai != NULL; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    ai->ai_protocol);
        if (fd == -1) {
            saved_errno = errno;
            continue;
        }
        /* Let a restarted rsp bind at once, even while old connections to
         * the port sit in TIME_WAIT. */
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
            bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
            listen(fd, SOMAXCONN) == 0)
            break;
        saved_errno = errno;
        close(fd);
        fd = -1;
    }
    if (fd == -1) {
        errno = saved_errno;
        log_errno("cannot listen on %s port %s", host ? host : "every address,", port);
    }
    freeaddrinfo(addrs);
    return fd;
}

int net_connect_start(const struct addrinfo *address)
{
    int fd = socket(address->ai_family, address->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    address->ai_protocol);

    if (fd == -1)
        return -1;
    /* On a non-blocking socket, EINPROGRESS means "started": the outcome
     * arrives later as writability. Even an immediate success takes that
     * same path, so there is only one way a connect completes. An EINTR
     * also leaves the connect going on in the background. */
    if (connect(fd, address->ai_addr, address->ai_addrlen) == 0 || errno == EINPROGRESS ||
        errno == EINTR)
        return fd;
    int saved_errno = errno;
    close(fd);
    errno = saved_errno;
    return -1;
}

int net_connect_result(int fd)
{
    int error = 0;
    socklen_t len = sizeof error;

    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == -1)
        return errno;
    return error;
}
