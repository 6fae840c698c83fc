/* net.c -- listening and connecting sockets. */
#include "net.h"

#include "log.h"

#include <errno.h>
#include <stdbool.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
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

/* Tries each address getaddrinfo gives for host:port in `family` until one
 * binds. Returns the listening fd, or -1 with errno set. */
static int listen_on(const char *host, const char *port, int family, bool reuseport)
{
    struct addrinfo hints, *addrs, *ai;
    int fd = -1, rc, one = 1, zero = 0, saved_errno = EADDRNOTAVAIL;

    memset(&hints, 0, sizeof hints);
    hints.ai_family = family;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;     /* NULL host: the wildcard address */

    rc = getaddrinfo(host, port, &hints, &addrs);
    if (rc != 0) {
        log_msg("cannot resolve listening address %s: %s", host ? host : "*", gai_strerror(rc));
        errno = EADDRNOTAVAIL;
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
         * the port sit in TIME_WAIT. On the IPv6 wildcard, accept IPv4
         * clients too, whatever the system default says. */
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
            (!reuseport || setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) == 0) &&
            (ai->ai_family != AF_INET6 || host != NULL ||
             setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero) == 0) &&
            bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
            listen(fd, SOMAXCONN) == 0)
            break;
        saved_errno = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(addrs);
    errno = saved_errno;
    return fd;
}

int net_listen(const char *host, const char *port)
{
    return net_listen_reuseport(host, port, false);
}

int net_listen_reuseport(const char *host, const char *port, bool reuseport)
{
    int fd = -1;

    /* Every address: one IPv6 socket that takes IPv4 clients as well, or,
     * on a machine without IPv6, an IPv4 one. */
    if (host == NULL)
        fd = listen_on(NULL, port, AF_INET6, reuseport);
    if (fd == -1 && (host != NULL || errno == EAFNOSUPPORT || errno == EADDRNOTAVAIL))
        fd = listen_on(host, port, AF_UNSPEC, reuseport);
    if (fd == -1)
        log_errno("cannot listen on %s port %s", host ? host : "every address,", port);
    return fd;
}

int net_connect_start(const struct addrinfo *address)
{
    int fd = socket(address->ai_family, address->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    address->ai_protocol);

    if (fd == -1)
        return -1;
    /* A Unix domain socket has no Nagle's algorithm to turn off. */
    if (address->ai_family != AF_UNIX && net_set_nodelay(fd) == -1)
        log_errno("setsockopt(TCP_NODELAY)"); /* slower, but it works */
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

struct addrinfo *net_unix_address(const char *path)
{
    /* One block, as glibc's getaddrinfo makes them: the sockaddr_un right
     * after the addrinfo that points to it. */
    struct unix_address {
        struct addrinfo info;
        struct sockaddr_un address;
    } *u = calloc(1, sizeof *u);

    if (u == NULL)
        return NULL;
    u->address.sun_family = AF_UNIX;
    memcpy(u->address.sun_path, path, strlen(path) + 1);
    u->info.ai_family = AF_UNIX;
    u->info.ai_socktype = SOCK_STREAM;
    u->info.ai_addr = (struct sockaddr *)&u->address;
    /* The path's length with its zero: two of them compare equal (the
     * registry's same_addresses) exactly when their paths do. */
    u->info.ai_addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path) + 1);
    return &u->info;
}

void net_free_addresses(struct addrinfo *addresses)
{
    if (addresses == NULL)
        return;
    /* Ours is one block with the addrinfo first; glibc's list is its own. */
    if (addresses->ai_family == AF_UNIX)
        free(addresses);
    else
        freeaddrinfo(addresses);
}

int net_connect_result(int fd)
{
    int error = 0;
    socklen_t len = sizeof error;

    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == -1)
        return errno;
    return error;
}

int net_set_nodelay(int fd)
{
    int one = 1;

    return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void net_address_text(const struct sockaddr *address, char *out, size_t size)
{
    const void *raw = NULL;
    int family = address->sa_family;

    if (family == AF_INET) {
        raw = &((const struct sockaddr_in *)address)->sin_addr;
    } else if (family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)address)->sin6_addr;
        raw = a6;
        if (IN6_IS_ADDR_V4MAPPED(a6)) {
            family = AF_INET;
            raw = &a6->s6_addr[12];
        }
    }
    if (raw == NULL || inet_ntop(family, raw, out, (socklen_t)size) == NULL)
        snprintf(out, size, "unknown");
}
