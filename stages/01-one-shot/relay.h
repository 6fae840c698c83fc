/* relay.h -- copying bytes between a client and its backend. */
#ifndef RSP_RELAY_H
#define RSP_RELAY_H

/* Copies whatever the client sends to the backend and whatever the backend
 * sends to the client, in both directions at once, until the backend has
 * closed its side and everything it sent has been delivered, or either peer
 * fails. Blocks for the whole exchange. Closes neither fd. */
void relay(int client_fd, int backend_fd);

#endif
