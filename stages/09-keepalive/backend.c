/* backend.c -- balancing and passive health.
 *
 * Health is learned from real traffic: a backend whose connect fails is
 * marked down and skipped for a while, then tried again by a real client.
 * Nothing is logged per request, only when a backend changes state. */
#include "backend.h"

#include "clock.h"
#include "health.h"
#include "log.h"

#include <netdb.h>
#include <stdlib.h>
#include <string.h>

uint64_t backend_bit(const struct pool *pool, const struct backend *b)
{
    return UINT64_C(1) << (b - pool->backends);
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
        struct backend *b = &pool->backends[index];

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
        if (!pool->backends[i].failing)
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
    health_stop(pool);
    for (size_t i = 0; i < pool->count; i++) {
        free(pool->backends[i].name);
        if (pool->backends[i].addresses != NULL)
            freeaddrinfo(pool->backends[i].addresses);
    }
    free(pool->backends);
    pool->backends = NULL;
    pool->count = 0;
}
