/* net.h -- the few socket helpers rsp needs: a listening socket and
 * outgoing connections that never block the event loop. */
#ifndef RSP_NET_H
#define RSP_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

struct addrinfo;

/* Parses a TCP port number ("1".."65535"). Returns the port, or -1 if text
 * is not exactly such a number. */
int net_parse_port(const char *text);

/* Creates a non-blocking socket listening on host:port; host NULL means
 * every local address. Returns the fd, or -1 after logging why. */
int net_listen(const char *host, const char *port);

/* The same, with SO_REUSEPORT set when reuseport is true: several sockets
 * may then listen on one address, and the kernel spreads new connections
 * over them (chapter 13's workers, one socket each). */
int net_listen_reuseport(const char *host, const char *port, bool reuseport);

/* Starts a non-blocking connect to one address. Returns the socket, whose
 * connect is either done or in progress: the socket becomes writable when
 * it has finished, and net_connect_result tells how. Returns -1 (errno set)
 * if the connect failed at once (a Unix domain socket's always ends at
 * once: a full backlog is EAGAIN then). */
int net_connect_start(const struct addrinfo *address);

/* The longest path a "unix:" backend may have: sun_path's size less its
 * terminating zero (107 bytes on Linux). */
#define NET_UNIX_PATH_MAX (sizeof ((struct sockaddr_un *)0)->sun_path - 1)

/* Makes the one address of a Unix domain socket (AF_UNIX, SOCK_STREAM) at
 * path, which is absolute and at most NET_UNIX_PATH_MAX bytes: an addrinfo
 * as getaddrinfo would give, to be freed by net_free_addresses. Returns
 * NULL when out of memory. */
struct addrinfo *net_unix_address(const char *path);

/* Frees a list from getaddrinfo or net_unix_address (NULL: nothing). */
void net_free_addresses(struct addrinfo *addresses);

/* Turns off Nagle's algorithm on a TCP socket (TCP_NODELAY): we write
 * each piece as soon as we have it, and must not wait for the peer's
 * acknowledgement of the previous one. Returns 0, or -1 with errno set. */
int net_set_nodelay(int fd);

/* After a connecting socket became writable: 0 if it is connected, or the
 * errno value of why the connect failed. */
int net_connect_result(int fd);

/* Writes address's IP as text into out (size bytes): an IPv4 client on a
 * dual-stack socket shows up as ::ffff:a.b.c.d, which is written a.b.c.d;
 * "unknown" if it is neither IPv4 nor IPv6. */
void net_address_text(const struct sockaddr *address, char *out, size_t size);

#endif
