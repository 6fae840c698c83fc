/* relay.h -- a client connection and a backend connection, joined. */
#ifndef RSP_RELAY_H
#define RSP_RELAY_H

/* Starts relaying between two connected, non-blocking sockets: whatever
 * one sends is delivered to the other, in order and complete, however slow
 * either side reads. When both directions have finished, both sockets are
 * closed and the relay frees itself. On success the relay owns both fds;
 * returns 0, or -1 (the caller still owns them). */
int relay_start(int client_fd, int backend_fd);

#endif
