/* router.h -- virtual hosts: which pool serves which Host. */
#ifndef RSP_ROUTER_H
#define RSP_ROUTER_H

#include "pool.h"

#include <stddef.h>

struct access_log;
struct stats_site;

struct site {
    char *name;          /* lower case; for "*.example.com", ".example.com" */
    struct stats_site *stats; /* its counters (stats.h) */
    bool wildcard;
    struct pool *pool;   /* &own, or one of the config's named pools */
    struct pool own;     /* the site's own backends, if it lists them */
    char **aliases;      /* its other names, written as name is (a wildcard ".example.org") */
    size_t alias_count;
    char *access_log;    /* its own log's path; NULL: its lines go to the top-level one */
    bool access_log_off; /* access_log = false: its requests are not logged */
    int access_log_format; /* enum access_format of its own log; -1: the top-level one's */
    struct access_log *log; /* access_log, open (process.c's apply_access_log) */
    struct site_output output; /* compress, headers, error_pages: the site's over its pool's
                                  over the top level's (site_output.h) */
    struct access_settings access; /* its own allow, deny, basic_auth, max_body_size */
};

struct router {
    struct site *sites;
    size_t count;
    struct pool *fallback; /* the default site, or NULL if there is none */
    struct stats_site *fallback_stats; /* where the default site counts ("default") */
    struct stats_site *unknown_stats;  /* requests no site took ("-") */
};

/* Finds the site for a host name, as router_route does; NULL if none
 * (then the default site takes it, if there is one). */
struct site *router_find(struct router *router, const char *host, size_t length);

/* Finds the slots of the shared counters (stats.h) the sites count in. */
void router_count_sites(struct router *router);

/* Where a request for a host name counts: its site's slot, the default
 * site's, or "-" if no site takes it. */
struct stats_site *router_site_stats(struct router *router, const char *host, size_t length);

/* Finds the pool for a host name (without port): an exact site name or
 * alias first, then the wildcard name or alias with the longest matching
 * suffix, then the
 * default site. Case does not matter. Returns NULL if nothing matches. */
struct pool *router_route(struct router *router, const char *host, size_t length);

#endif
