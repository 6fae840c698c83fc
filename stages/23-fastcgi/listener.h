/* listener.h -- accepting clients and pairing each with a backend. */
#ifndef RSP_LISTENER_H
#define RSP_LISTENER_H

#include <stdbool.h>

struct listener;
struct relay_set;

/* Watches the non-blocking listening socket listen_fd. Every client that
 * arrives is handed to a new relay in `relays`, which serves it under the
 * current config generation. `relays` must outlive the listener. With
 * `shared`, other worker processes watch the same socket (EPOLLEXCLUSIVE:
 * one of them is woken per connection). With `tls`, it is the HTTPS
 * port: each client gets the TLS transport, with the certificates of the
 * generation it arrives in. Returns the listener, or NULL after logging
 * why (the caller still owns listen_fd). */
struct listener *listener_start(int listen_fd, struct relay_set *relays, bool shared, bool tls);

/* The listening socket it watches. */
int listener_socket(const struct listener *listener);

/* Stops accepting: closes the listening socket and frees the listener. */
void listener_stop(struct listener *listener);

#endif
