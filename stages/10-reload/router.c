/* router.c -- matching the Host header against the configured sites. */
#include "router.h"

#include <strings.h>
#include <string.h>

struct pool *router_route(struct router *router, const char *host, size_t length)
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
                return site->pool;
        } else if (length > n && n > best_length &&
                   strncasecmp(site->name, host + length - n, n) == 0) {
            /* "*.example.com" matches "a.example.com" and "a.b.example.com",
             * but not "example.com" itself. */
            best = site;
            best_length = n;
        }
    }
    return best != NULL ? best->pool : router->fallback;
}
