/* backend.c -- the registry of backends, shared by every generation's
 * pools: a backend is made when the first pool names it and torn down
 * (its health check stopped, its idle connections closed) when the last
 * one lets go. */
#include "backend.h"

#include "fastcgi_script.h"
#include "health.h"
#include "net.h"
#include "stats.h"
#include "upstream.h"

#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct backend *registry;

void pool_free(struct pool *pool)
{
    for (size_t i = 0; i < pool->count; i++)
        backend_put(pool->backends[i]);
    free(pool->backends);
    pool->backends = NULL;
    pool->count = 0;
    if (pool->root != NULL && pool->root_fd != -1)
        close(pool->root_fd);
    free(pool->root);
    pool->root = NULL;
    pool->root_fd = -1;
    fastcgi_pool_free(pool->fastcgi);
    pool->fastcgi = NULL;
}

/* True if both lists hold the same addresses in the same order. */
static bool same_addresses(const struct addrinfo *a, const struct addrinfo *b)
{
    for (; a != NULL && b != NULL; a = a->ai_next, b = b->ai_next)
        if (a->ai_family != b->ai_family || a->ai_addrlen != b->ai_addrlen ||
            memcmp(a->ai_addr, b->ai_addr, a->ai_addrlen) != 0)
            return false;
    return a == NULL && b == NULL;
}

/* FNV-1a over the addresses' bytes: which slot of the shared counters is
 * this backend's (the same name resolving elsewhere is another backend). */
static uint64_t addresses_hash(const struct addrinfo *a)
{
    uint64_t h = UINT64_C(14695981039346656037);

    for (; a != NULL; a = a->ai_next) {
        const unsigned char *p = (const unsigned char *)a->ai_addr;

        for (socklen_t i = 0; i < a->ai_addrlen; i++)
            h = (h ^ p[i]) * UINT64_C(1099511628211);
    }
    return h;
}

struct backend *backend_obtain(const char *name, struct addrinfo *addresses)
{
    struct backend *b;

    for (b = registry; b != NULL; b = b->registry_next) {
        if (strcmp(b->name, name) == 0 && same_addresses(b->addresses, addresses)) {
            net_free_addresses(addresses);
            b->refs++;
            return b;
        }
    }
    /* New, or its name resolves differently now: a backend of its own. The
     * old one serves the requests of older generations until they end. */
    b = calloc(1, sizeof *b);
    if (b == NULL || (b->name = strdup(name)) == NULL) {
        free(b);
        net_free_addresses(addresses);
        return NULL;
    }
    b->addresses = addresses;
    b->stats = stats_backend(name, addresses_hash(addresses));
    b->refs = 1;
    b->registry_next = registry;
    registry = b;
    return b;
}

void backend_put(struct backend *b)
{
    struct backend **link;

    if (--b->refs > 0)
        return;
    for (link = &registry; *link != b; link = &(*link)->registry_next)
        ;
    *link = b->registry_next;
    health_check_stop(b);
    upstream_close_idle(b);
    free(b->name);
    net_free_addresses(b->addresses);
    free(b);
}

struct backend *backend_first(void)
{
    return registry;
}
