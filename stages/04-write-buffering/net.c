/* net.c -- listening and connecting sockets, resolved with getaddrinfo. */
#include "net.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
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

int net_listen(const char *port)
{
    struct addrinfo hints, *addrs, *ai;
    int fd = -1, rc, one = 1;

    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;     /* IPv4 or IPv6, whichever binds */
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;     /* NULL host: every local address */

    rc = getaddrinfo(NULL, port, &hints, &addrs);
    if (rc != 0) {
        fprintf(stderr, "rsp: cannot resolve listening port %s: %s\n", port, gai_strerror(rc));
        return -1;
    }
    for (ai = addrs; ai != NULL; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    ai->ai_protocol);
        if (fd == -1)
            continue;
        /* Let a restarted rsp bind at once, even while old connections to
         * the port sit in TIME_WAIT. */
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
            bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
            listen(fd, SOMAXCONN) == 0)
            break;
        close(fd);
        fd = -1;
    }
    if (fd == -1)
        fprintf(stderr, "rsp: cannot listen on port %s: %s\n", port, strerror(errno));
    freeaddrinfo(addrs);
    return fd;
}

int net_connect(const char *host, const char *port)
{
    struct addrinfo hints, *addrs, *ai;
    int fd = -1, rc, saved_errno = 0;

    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;

    rc = getaddrinfo(host, port, &hints, &addrs);
    if (rc != 0) {
        fprintf(stderr, "rsp: cannot resolve backend %s: %s\n", host, gai_strerror(rc));
        return -1;
    }
    for (ai = addrs; ai != NULL; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd == -1) {
            saved_errno = errno;
            continue;
        }
        /* A signal can interrupt a blocking connect; we ignore the only
         * one we expect (SIGPIPE), so EINTR is not retried here. */
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 && net_set_nonblocking(fd) == 0)
            break;
        saved_errno = errno;
        close(fd);
        fd = -1;
    }
    if (fd == -1)
        fprintf(stderr, "rsp: cannot connect to backend %s:%s: %s\n", host, port, strerror(saved_errno));
    freeaddrinfo(addrs);
    return fd;
}

int net_set_nonblocking(int fd)
{
    int flags = fcntl(fd, F_GETFL);

    if (flags == -1)
        return -1;
    return fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}
