/* upstream.h -- a connection to a backend.
 *
 * An upstream belongs to its backend, not to the client it serves: it is
 * attached to one exchange at a time, and detached when that exchange is
 * done with it. Until chapter 09 adds the pool, detaching closes it. */
#ifndef RSP_UPSTREAM_H
#define RSP_UPSTREAM_H

#include "connection.h"
#include "reactor.h"

#include <netdb.h>
#include <stdint.h>

struct backend;

struct upstream {
    struct reactor_deferred deferred; /* first: frees it at the end of the batch */
    struct connection conn;
    struct backend *backend;
    /* While attached: whom its events go to. */
    void (*handle)(void *owner, uint32_t events);
    void *owner;
};

/* Starts a non-blocking connect to `address` of backend b, attached to
 * owner: every event on the socket calls handle(owner, events). Counts
 * the connection in b->active. Returns the upstream, or NULL with errno
 * set (the connect failed at once, or out of memory: ENOMEM). */
struct upstream *upstream_connect(struct backend *b, const struct addrinfo *address,
                                  void (*handle)(void *owner, uint32_t events), void *owner);

/* The exchange is done with u: closes it, and frees it once no event of
 * this batch can point at it. */
void upstream_release(struct upstream *u);

#endif
