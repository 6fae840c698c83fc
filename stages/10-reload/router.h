/* router.h -- virtual hosts: which pool serves which Host. */
#ifndef RSP_ROUTER_H
#define RSP_ROUTER_H

#include "backend.h"

#include <stddef.h>

struct site {
    char *name;          /* lower case; for "*.example.com", ".example.com" */
    bool wildcard;
    struct pool *pool;   /* &own, or one of the config's named pools */
    struct pool own;     /* the site's own backends, if it lists them */
};

struct router {
    struct site *sites;
    size_t count;
    struct pool *fallback; /* the default site, or NULL if there is none */
};

/* Finds the pool for a host name (without port): an exact site name first,
 * then the wildcard site with the longest matching suffix, then the
 * default site. Case does not matter. Returns NULL if nothing matches. */
struct pool *router_route(struct router *router, const char *host, size_t length);

#endif
