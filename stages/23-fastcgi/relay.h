/* relay.h -- one client connection: its request, its backend, its answer. */
#ifndef RSP_RELAY_H
#define RSP_RELAY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

struct config;
struct relay;

/* Every relay alive, so that they can all be closed when rsp stops; how
 * many, and the most there were since memory was last handed back. */
struct relay_set {
    struct relay *first;
    size_t count, peak;
    bool draining;              /* rsp is stopping: no new requests; stop when empty */
};

/* Takes charge of a newly accepted, non-blocking client socket whose peer
 * address is address/length and which connected to port server_port (as
 * text, for X-Forwarded-Port): reads the request head, routes it by Host to
 * a pool of config (or asks the config's route function), connects to a backend of that pool without blocking
 * (trying the next one if a connect fails), forwards the request with its
 * body exactly as framed, and delivers the response however slowly the
 * client reads. Requests rsp cannot or will not forward are answered by rsp
 * itself (400, 414, 421, 431, 500, 502, 505), or by route. When everything is done the relay
 * closes both sockets and frees itself. The relay belongs to `set` while it
 * lives. With `tls` the client came to the HTTPS port: it speaks TLS,
 * with config's certificates (tls.h). Returns 0 (the relay owns
 * client_fd), or -1 if out of memory (the caller still owns it). */
int relay_start(int client_fd, const struct sockaddr *address, socklen_t length,
                const char *server_port, struct config *config, struct relay_set *set, bool tls);

/* The config was reloaded: HTTP/2 connections send GOAWAY and end once
 * their streams in flight have (HTTP/1 ones take the new config at their
 * next request). */
void relay_reloaded(struct relay_set *set);

/* Closes every relay of set at once, whatever it was doing. */
void relay_close_all(struct relay_set *set);

/* rsp is stopping gracefully: relays waiting for a request close now, the
 * others after the response they are serving (which says Connection:
 * close). When the last one is gone, the reactor stops. */
void relay_drain_all(struct relay_set *set);

#endif
