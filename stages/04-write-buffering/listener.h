/* listener.h -- accepting clients and pairing each with a backend. */
#ifndef RSP_LISTENER_H
#define RSP_LISTENER_H

/* Watches the non-blocking listening socket listen_fd. For every client
 * that arrives, connects to backend_host:backend_port and starts relaying
 * between the two. The strings must outlive the listener. Returns 0, or -1
 * after printing why. */
int listener_start(int listen_fd, const char *backend_host, const char *backend_port);

#endif
