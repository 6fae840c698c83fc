/* listener.h -- accepting clients and pairing each with a backend. */
#ifndef RSP_LISTENER_H
#define RSP_LISTENER_H

struct listener;
struct relay_set;

/* Watches the non-blocking listening socket listen_fd. Every client that
 * arrives is handed to a new relay in `relays`, which serves it under the
 * current config generation. `relays` must outlive the listener. Returns the listener,
 * or NULL after logging why (the caller still owns listen_fd). */
struct listener *listener_start(int listen_fd, struct relay_set *relays);

/* Stops accepting: closes the listening socket and frees the listener. */
void listener_stop(struct listener *listener);

#endif
