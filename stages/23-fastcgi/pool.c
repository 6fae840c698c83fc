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

/* FNV-1a's 64-bit offset basis and prime: a fixed seed, so that every
 * worker and every reload hash alike. */
#define FNV_OFFSET UINT64_C(0xcbf29ce484222325)
#define FNV_PRIME UINT64_C(0x100000001b3)

/* splitmix64's finalizer: a bijection whose every output bit depends on
 * every input bit, which FNV-1a alone does not give its high bits. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* FNV-1a of data, going on from hash h. */
static uint64_t fnv1a(uint64_t h, const char *data, size_t length)
{
    for (size_t i = 0; i < length; i++) {
        h ^= (unsigned char)data[i];
        h *= FNV_PRIME;
    }
    return h;
}

uint64_t pool_hash_of(const char *data, size_t length)
{
    return mix64(fnv1a(FNV_OFFSET, data, length));
}

/* The name's bytes are hashed on from the key's hash, so that each key
 * orders the backends its own way. */
uint64_t pool_hash_score(uint64_t key, const char *name)
{
    return mix64(fnv1a(key, name, strlen(name)));
}

const char *pool_balance_name(const struct pool *pool)
{
    return pool->balance == BALANCE_LEAST_CONN ? "least_conn"
           : pool->balance == BALANCE_HASH ? "hash" : "round_robin";
}

/* Scans the candidates starting at pool->next, so that ties rotate. With
 * allow_down false, backends marked down (and not yet due for a retry) are
 * skipped. Round-robin takes the first candidate; least_conn the first with
 * the fewest open connections; hash (key not NULL) the one with the
 * highest score for *key, scanned from the first so that all agree. */
static struct backend *pick(struct pool *pool, uint64_t tried, bool allow_down, double now,
                            const uint64_t *key)
{
    struct backend *best = NULL;
    size_t best_index = 0;
    uint64_t best_score = 0;

    for (size_t i = 0; i < pool->count; i++) {
        size_t index = key != NULL ? i : (pool->next + i) % pool->count;
        struct backend *b = pool->backends[index];

        if ((tried & backend_bit(pool, b)) || backend_failing(b))
            continue;
        if (!allow_down && backend_down(b) &&
            now < atomic_load_explicit(&b->stats->retry_at, memory_order_relaxed))
            continue;
        if (key != NULL) {
            uint64_t score = pool_hash_score(*key, b->name);
            if (best == NULL || score > best_score) {
                best = b;
                best_score = score;
            }
            continue;
        }
        if (best == NULL || b->active < best->active) {
            best = b;
            best_index = index;
            if (pool->balance == BALANCE_ROUND_ROBIN)
                break;
        }
    }
    if (best != NULL && key == NULL)
        pool->next = (best_index + 1) % pool->count;
    return best;
}

struct backend *backend_pick_keyed(struct pool *pool, uint64_t tried, uint64_t key)
{
    const uint64_t *hashing = pool->balance == BALANCE_HASH ? &key : NULL;
    double now = clock_now();
    struct backend *b = pick(pool, tried, false, now, hashing);

    return b != NULL ? b : pick(pool, tried, true, now, hashing);
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
