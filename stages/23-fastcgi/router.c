/* router.c -- matching the Host header against the configured sites. */
#include "router.h"

#include "stats.h"

#include <stdint.h>
#include <stdio.h>
#include <strings.h>
#include <string.h>

/* How well name (a wildcard as ".example.com") matches host: SIZE_MAX if
 * it is the host's exact name, the suffix's length if it is a wildcard
 * the host falls under, 0 if it does not match. */
static size_t match(const char *name, bool wildcard, const char *host, size_t length)
{
    size_t n = strlen(name);

    if (!wildcard)
        return n == length && strncasecmp(name, host, length) == 0 ? SIZE_MAX : 0;
    /* "*.example.com" matches "a.example.com" and "a.b.example.com",
     * but not "example.com" itself. */
    return length > n && strncasecmp(name, host + length - n, n) == 0 ? n : 0;
}

struct site *router_find(struct router *router, const char *host, size_t length)
{
    struct site *best = NULL;
    size_t best_length = 0;

    /* A fully qualified name may end in a dot; it names the same host. */
    if (length > 0 && host[length - 1] == '.')
        length--;
    for (size_t i = 0; i < router->count; i++) {
        struct site *site = &router->sites[i];
        size_t m = match(site->name, site->wildcard, host, length);

        /* An alias is one more name of the site; only a wildcard starts with '.'. */
        for (size_t j = 0; j < site->alias_count && m != SIZE_MAX; j++) {
            size_t a = match(site->aliases[j], site->aliases[j][0] == '.', host, length);
            if (a > m)
                m = a;
        }
        if (m == SIZE_MAX)
            return site;
        if (m > best_length) {
            best = site;
            best_length = m;
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
