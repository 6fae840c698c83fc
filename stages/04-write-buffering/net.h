/* net.h -- the few socket helpers rsp needs: a listening socket and an
 * outgoing connection, both found through getaddrinfo(3) so that IPv4 and
 * IPv6 work alike. */
#ifndef RSP_NET_H
#define RSP_NET_H

/* Parses a TCP port number ("1".."65535"). Returns the port, or -1 if text
 * is not exactly such a number. */
int net_parse_port(const char *text);

/* Creates a non-blocking socket listening on every local address at the
 * given port. Returns the fd, or -1 after printing why to stderr. */
int net_listen(const char *port);

/* Connects to host:port, trying each address getaddrinfo returns in turn,
 * and makes the connected socket non-blocking. The connect itself blocks
 * (chapter 05 makes it asynchronous). Returns the fd, or -1 after printing
 * why. */
int net_connect(const char *host, const char *port);

/* Sets O_NONBLOCK on fd. Returns 0, or -1 with errno set. */
int net_set_nonblocking(int fd);

#endif
