/* pool.c -- balancing and passive health.
 *
 * Health is learned from real traffic: a backend whose connect fails is
 * marked down and skipped for a while, then tried again by a real client.
 * Nothing is logged per request, only when a backend changes state. */
#include "pool.h"

#include "clock.h"
#include "log.h"
#include "stats.h"

#include <string.h>

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

        if ((tried & backend_bit(pool, b)) || backend_failing(b))
            continue;
        if (!allow_down && backend_down(b) &&
            now < atomic_load_explicit(&b->stats->retry_at, memory_order_relaxed))
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
        if (!backend_failing(pool->backends[i]))
            return false;
    return pool->count > 0;
}

bool backend_down(const struct backend *b)
{
    return atomic_load_explicit(&b->stats->down, memory_order_relaxed);
}

bool backend_failing(const struct backend *b)
{
    return atomic_load_explicit(&b->stats->failing, memory_order_relaxed);
}

bool backend_set_failing(struct backend *b, bool failing)
{
    return atomic_exchange(&b->stats->failing, failing) != failing;
}

void backend_count_active(struct backend *b, int delta)
{
    _Atomic int32_t *mine = &b->stats->active[stats_row_index()];

    b->active += (unsigned)delta;
    atomic_store_explicit(mine, atomic_load_explicit(mine, memory_order_relaxed) + delta,
                          memory_order_relaxed);
}

/* The state is shared by every worker: the one whose exchange turns it
 * from up to down (or back) logs it, the others say nothing. */
void backend_failed(struct pool *pool, struct backend *b, int error)
{
    atomic_store_explicit(&b->stats->retry_at, clock_now() + pool->down_time, memory_order_relaxed);
    stats_add(&b->stats->failures, 1);
    if (!atomic_exchange(&b->stats->down, true))
        log_msg("backend %s is down (%s); skipping it for %g s", b->name, strerror(error),
                pool->down_time);
}

void backend_succeeded(struct pool *pool, struct backend *b)
{
    if (backend_down(b) && atomic_exchange(&b->stats->down, false))
        log_msg("backend %s is up again", b->name);
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
