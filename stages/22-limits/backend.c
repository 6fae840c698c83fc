/* backend.c -- balancing and passive health.
 *
 * Health is learned from real traffic: a backend whose connect fails is
 * marked down and skipped for a while, then tried again by a real client.
 * Nothing is logged per request, only when a backend changes state. */
#include "backend.h"

#include "clock.h"
#include "health.h"
#include "log.h"
#include "stats.h"
#include "upstream.h"

#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    freeaddrinfo(b->addresses);
    free(b);
}

struct backend *backend_first(void)
{
    return registry;
}
