/* upstream.h -- connections to backends, and each backend's pool of idle
 * ones.
 *
 * An upstream belongs to its backend, not to the client it serves: it is
 * attached to one exchange at a time, and detached when that exchange is
 * done with it. A detached upstream that can carry another request waits
 * in its backend's idle pool, for at most backend_idle_timeout: the pool
 * keeps backend_keepalive of them whatever the load, and beyond that as
 * many as were in use at once lately (upstream_release), up to a hard
 * cap. It stays in epoll meanwhile, so that a backend closing it is
 * noticed at once, and it is closed then. */
#ifndef RSP_UPSTREAM_H
#define RSP_UPSTREAM_H

#include "connection.h"
#include "reactor.h"
#include "timer.h"

#include <netdb.h>
#include <stdbool.h>
#include <stdint.h>

struct backend;
struct keepalive;

struct upstream {
    struct reactor_deferred deferred; /* first: frees it at the end of the batch */
    struct connection conn;
    struct backend *backend;
    unsigned requests;               /* requests sent over it before the current one */
    /* While attached: whom its events go to. NULL exactly while it waits
     * in its backend's pool or finishes (a connection released to be
     * closed keeps its owner until it is freed: it gets no more events). */
    void (*handle)(void *owner, uint32_t events);
    void *owner;
    bool finishing;                  /* detached, writing out its queue before it closes */
    double finish_timeout;           /* while finishing: seconds allowed without progress */
    /* While idle or finishing: its place in the backend's list of them,
     * and its deadline. */
    struct upstream *prev, *next;
    struct timer idle_timer;
};

/* Starts a non-blocking connect to `address` of backend b, attached to
 * owner: every event on the socket calls handle(owner, events). Counts
 * the connection in b->active. Returns the upstream, or NULL with errno
 * set (the connect failed at once, or out of memory: ENOMEM). */
struct upstream *upstream_connect(struct backend *b, const struct addrinfo *address,
                                  void (*handle)(void *owner, uint32_t events), void *owner);

/* Takes the most recently used idle connection of backend b out of its
 * pool and attaches it to owner as upstream_connect does; NULL if the pool
 * is empty. */
struct upstream *upstream_take_idle(struct backend *b, void (*handle)(void *owner, uint32_t events),
                                    void *owner);

/* The exchange is done with u. If `reusable` (its last response ended
 * where its framing said, and nobody asked to close) and the backend's
 * pool has room under k (backend_keepalive idle connections, or as many
 * as were in use at once lately), u waits there for the next request; otherwise
 * it is closed, and freed once no event of this batch can point at it. */
void upstream_release(struct upstream *u, bool reusable, const struct keepalive *k);

/* The exchange is done with u, which will carry no other request, but
 * the bytes queued for it still go out: a backend that answered before
 * the end of the request body gets the rest of it, as a polite client
 * would send it. u is closed once its queue is written, when it fails, or
 * when `timeout` seconds pass without progress. */
void upstream_finish(struct upstream *u, double timeout);

/* Closes every idle or finishing connection of backend b (when rsp stops). */
void upstream_close_idle(struct backend *b);

/* rsp is stopping: closes every backend's idle connections now, and each
 * one released from here on instead of pooling it (finishing ones go on
 * writing out their queue). A stopping process serves no next request,
 * and a connection kept open goes on holding whatever the backend gave
 * it: a php-fpm child serves one connection at a time and stays with a
 * kept one, so a request in flight queued at php-fpm would wait for it
 * until shutdown_timeout. */
void upstream_stop_pooling(void);

#endif
