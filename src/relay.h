/* relay.h -- a client connection and a backend connection, joined. */
#ifndef RSP_RELAY_H
#define RSP_RELAY_H

struct pool;

/* Takes charge of a newly accepted, non-blocking client socket: picks a
 * backend from pool, connects to it without blocking (trying the next
 * backend if a connect fails), then delivers whatever either side sends to
 * the other, in order and complete, however slow either side reads. If no
 * backend can be reached the client gets a 502 answer. When everything is
 * done the relay closes both sockets and frees itself. Returns 0 (the relay
 * owns client_fd), or -1 if out of memory (the caller still owns it). */
int relay_start(int client_fd, struct pool *pool);

#endif
