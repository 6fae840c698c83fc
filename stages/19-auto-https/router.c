/* router.c -- matching the Host header against the configured sites. */
#include "router.h"

#include "stats.h"

#include <stdio.h>
#include <strings.h>
#include <string.h>

struct site *router_find(struct router *router, const char *host, size_t length)
{
    struct site *best = NULL;
    size_t best_length = 0;

    /* A fully qualified name may end in a dot; it names the same host. */
    if (length > 0 && host[length - 1] == '.')
        length--;
    for (size_t i = 0; i < router->count; i++) {
        struct site *site = &router->sites[i];
        size_t n = strlen(site->name);

        if (!site->wildcard) {
            if (n == length && strncasecmp(site->name, host, length) == 0)
                return site;
        } else if (length > n && n > best_length &&
                   strncasecmp(site->name, host + length - n, n) == 0) {
            /* "*.example.com" matches "a.example.com" and "a.b.example.com",
             * but not "example.com" itself. */
            best = site;
            best_length = n;
        }
    }
    return best;
}

struct pool *router_route(struct router *router, const char *host, size_t length)
{
    struct site *site = router_find(router, host, length);

    return site != NULL ? site->pool : router->fallback;
}

void router_count_sites(struct router *router)
{
    char name[STATS_NAME];

    for (size_t i = 0; i < router->count; i++) {
        struct site *site = &router->sites[i];

        /* A wildcard site keeps its name as ".example.com": it counts as "*.example.com". */
        snprintf(name, sizeof name, "%s%s", site->wildcard ? "*" : "", site->name);
        site->stats = stats_site(name);
    }
    router->fallback_stats = stats_site("default");
    router->unknown_stats = stats_site("-");
}

struct stats_site *router_site_stats(struct router *router, const char *host, size_t length)
{
    struct site *site = router_find(router, host, length);

    if (site != NULL)
        return site->stats;
    return router->fallback != NULL ? router->fallback_stats : router->unknown_stats;
}
