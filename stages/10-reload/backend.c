/* backend.c -- balancing and passive health.
 *
 * Health is learned from real traffic: a backend whose connect fails is
 * marked down and skipped for a while, then tried again by a real client.
 * Nothing is logged per request, only when a backend changes state. */
#include "backend.h"

#include "clock.h"
#include "health.h"
#include "log.h"
#include "upstream.h"

#include <netdb.h>
#include <stdlib.h>
#include <string.h>

static struct backend *registry;

uint64_t backend_bit(const struct pool *pool, const struct backend *b)
{
    for (size_t i = 0; i < pool->count; i++)
        if (pool->backends[i] == b)
            return UINT64_C(1) << i;
    return 0;
}

/* Scans the candidates starting at pool->next, so that ties rotate. With
 * allow_down false, backends marked down (and not yet due for a retry) are
 * skipped. Round-robin takes the first candidate; least_conn the first with
 * the fewest open connections. */
static struct backend *pick(struct pool *pool, uint64_t tried, bool allow_down, double now)
{
    struct backend *best = NULL;
    size_t best_index = 0;

    for (size_t i = 0; i < pool->count; i++) {
        size_t index = (pool->next + i) % pool->count;
        struct backend *b = pool->backends[index];

        if ((tried & backend_bit(pool, b)) || b->failing)
            continue;
        if (!allow_down && b->down && now < b->retry_at)
            continue;
        if (best == NULL || b->active < best->active) {
            best = b;
            best_index = index;
            if (pool->balance == BALANCE_ROUND_ROBIN)
                break;
        }
    }
    if (best != NULL)
        pool->next = (best_index + 1) % pool->count;
    return best;
}

struct backend *backend_pick(struct pool *pool, uint64_t tried)
{
    double now = clock_now();
    struct backend *b = pick(pool, tried, false, now);

    return b != NULL ? b : pick(pool, tried, true, now);
}

bool pool_all_failing(const struct pool *pool)
{
    for (size_t i = 0; i < pool->count; i++)
        if (!pool->backends[i]->failing)
            return false;
    return pool->count > 0;
}

void backend_failed(struct pool *pool, struct backend *b, int error)
{
    b->retry_at = clock_now() + pool->down_time;
    if (!b->down) {
        b->down = true;
        log_msg("backend %s is down (%s); skipping it for %g s", b->name, strerror(error),
                pool->down_time);
    }
}

void backend_succeeded(struct pool *pool, struct backend *b)
{
    if (b->down) {
        b->down = false;
        log_msg("backend %s is up again", b->name);
    }
    if (pool->unreachable) {
        pool->unreachable = false;
        log_msg("a backend answered again; serving clients");
    }
}

void pool_unreachable(struct pool *pool)
{
    if (!pool->unreachable) {
        pool->unreachable = true;
        log_msg("no backend can be reached; answering 502 until one can");
    }
}

void pool_free(struct pool *pool)
{
    for (size_t i = 0; i < pool->count; i++)
        backend_put(pool->backends[i]);
    free(pool->backends);
    pool->backends = NULL;
    pool->count = 0;
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

struct backend *backend_obtain(const char *name, struct addrinfo *addresses)
{
    struct backend *b;

    for (b = registry; b != NULL; b = b->registry_next) {
        if (strcmp(b->name, name) == 0 && same_addresses(b->addresses, addresses)) {
            freeaddrinfo(addresses);
            b->refs++;
            return b;
        }
    }
    /* New, or its name resolves differently now: a backend of its own. The
     * old one serves the requests of older generations until they end. */
    b = calloc(1, sizeof *b);
    if (b == NULL || (b->name = strdup(name)) == NULL) {
        free(b);
        freeaddrinfo(addresses);
        return NULL;
    }
    b->addresses = addresses;
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
    freeaddrinfo(b->addresses);
    free(b);
}

struct backend *backend_first(void)
{
    return registry;
}
