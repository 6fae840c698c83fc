/* listener.h -- accepting clients and pairing each with a backend. */
#ifndef RSP_LISTENER_H
#define RSP_LISTENER_H

struct config;

/* Watches the non-blocking listening socket listen_fd. Every client that
 * arrives is handed to a relay, which serves its request as config says.
 * The config must outlive the listener. Returns 0, or -1 after logging
 * why. */
int listener_start(int listen_fd, struct config *config);

#endif
