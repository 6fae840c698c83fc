/* backend.h -- the registry of backends: every pool of every config
 * generation gets its backends here (backend_obtain) and gives them back
 * (backend_put); the last reference stops a backend's health check and
 * closes its idle connections. The pools themselves, and choosing a
 * backend in one, are pool.h. */
#ifndef RSP_BACKEND_H
#define RSP_BACKEND_H

#include "pool.h"

/* Releases the pool's backends, or closes its root. */
void pool_free(struct pool *pool);

/* The registered backend called `name` whose addresses are the same as
 * `addresses`, with one more reference; or a new one if there is none
 * (it takes `addresses` over; otherwise they are freed). NULL if out of
 * memory (`addresses` freed). */
struct backend *backend_obtain(const char *name, struct addrinfo *addresses);

/* Drops a reference. The last one stops its health check, closes its idle
 * connections and frees it. */
void backend_put(struct backend *b);

/* The registered backends, for b = backend_first(); b; b = b->registry_next. */
struct backend *backend_first(void);

#endif
