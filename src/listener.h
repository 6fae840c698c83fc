/* listener.h -- accepting clients and pairing each with a backend. */
#ifndef RSP_LISTENER_H
#define RSP_LISTENER_H

struct pool;

/* Watches the non-blocking listening socket listen_fd. Every client that
 * arrives is handed to the relay, which finds it a backend in pool. The
 * pool must outlive the listener. Returns 0, or -1 after logging why. */
int listener_start(int listen_fd, struct pool *pool);

#endif
