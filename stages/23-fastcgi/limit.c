/* limit.c -- the shared table of limit.h: mapping it, finding a key's
 * entry under its set's lock, and the token bucket. */
#include "limit.h"

#include "log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <math.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>

static struct limit_table *shared;

int limit_init(void)
{
    void *p = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    uint64_t seed = 0;
    ssize_t n;

    if (p == MAP_FAILED) {
        log_errno("mmap (%zu bytes of limits)", sizeof *shared);
        return -1;
    }
    do
        n = getrandom(&seed, sizeof seed, 0);
    while (n == -1 && errno == EINTR);
    if (n != (ssize_t)sizeof seed) {
        log_errno("getrandom (the limits table's seed)");
        munmap(p, sizeof *shared);
        return -1;
    }
    shared = p; /* zeroed by the kernel: every entry free, every lock clear */
    shared->seed = seed;
    return 0;
}

void limit_log_size(void)
{
    log_msg("limits: a table of %d client addresses, %zu bytes (%zu an address)", LIMIT_SLOTS,
            sizeof *shared, sizeof *shared / LIMIT_SLOTS);
}

void limit_close(void)
{
    if (shared != NULL && munmap(shared, sizeof *shared) == -1)
        log_errno("munmap");
    shared = NULL;
}

struct limit_table *limit_shared(void)
{
    return shared;
}

int limit_key_of(const char *text, uint32_t level, struct limit_key *key)
{
    struct in_addr a4;
    struct in6_addr a6;

    memset(key, 0, sizeof *key);
    key->level = level;
    if (inet_pton(AF_INET, text, &a4) == 1) {
        key->family = AF_INET;
        memcpy(key->address, &a4, 4);
        return 0;
    }
    if (inet_pton(AF_INET6, text, &a6) != 1)
        return -1;
    if (IN6_IS_ADDR_V4MAPPED(&a6)) {
        /* ::ffff:a.b.c.d is an IPv4 client: its /64 would be every one. */
        key->family = AF_INET;
        memcpy(key->address, &a6.s6_addr[12], 4);
        return 0;
    }
    key->family = AF_INET6;
    memcpy(key->address, a6.s6_addr, 8); /* the /64 */
    return 0;
}

uint32_t limit_level(const char *setting)
{
    uint32_t h = 2166136261u; /* FNV-1a: the same in every process and generation */

    for (const char *c = setting; *c != '\0'; c++)
        h = (h ^ (unsigned char)*c) * 16777619u;
    return h == LIMIT_LEVEL_CONN ? 1 : h;
}

int64_t limit_now(void)
{
    struct timespec t;

    if (clock_gettime(CLOCK_MONOTONIC, &t) == -1)
        return 0; /* cannot happen with this clock id */
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* The set key belongs in: a keyed mix of its 16 bytes. */
static struct limit_set *set_of(const struct limit_key *key)
{
    uint64_t a, b;

    memcpy(&a, key, 8);
    memcpy(&b, (const char *)key + 8, 8);
    uint64_t h = (a ^ shared->seed) * 0x9e3779b97f4a7c15u;
    h = (h ^ (h >> 29) ^ b) * 0xbf58476d1ce4e5b9u;
    h ^= h >> 32;
    return &shared->sets[h & (LIMIT_SETS - 1)];
}

/* Takes s's lock for this process. */
static void lock(struct limit_set *s)
{
    int holder = stats_row_index() + 1;

    for (unsigned spins = 1;; spins++) {
        int free = 0;

        if (atomic_load_explicit(&s->lock, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_weak_explicit(&s->lock, &free, holder, memory_order_acquire,
                                                  memory_order_relaxed))
            return;
        /* The holder is a few instructions from done, unless the kernel
         * took its core away: then let it run. */
        if (spins % 128 == 0)
            sched_yield();
#if defined(__x86_64__) || defined(__i386__)
        else
            __builtin_ia32_pause();
#endif
    }
}

static void unlock(struct limit_set *s)
{
    atomic_store_explicit(&s->lock, 0, memory_order_release);
}

/* key's entry in s (locked), or NULL. */
static struct limit_entry *find(struct limit_set *s, const struct limit_key *key)
{
    for (int i = 0; i < LIMIT_WAYS; i++)
        if (memcmp(&s->keys[i], key, sizeof *key) == 0)
            return &s->entries[i];
    return NULL;
}

/* key's entry in s (locked), made if it has none: a free entry, else the
 * least recently seen one without open connections, else the least
 * recently seen. A new entry's bucket is full. */
static struct limit_entry *find_or_make(struct limit_set *s, const struct limit_key *key, double burst,
                                        int64_t now)
{
    struct limit_entry *e = find(s, key), *victim = NULL;
    int v = 0;

    if (e != NULL)
        return e;
    for (int i = 0; i < LIMIT_WAYS; i++) {
        struct limit_entry *c = &s->entries[i];

        if (s->keys[i].family == 0) {
            victim = c;
            v = i;
            break;
        }
        if (victim == NULL || (victim->open > 0 && c->open == 0) ||
            ((victim->open > 0) == (c->open > 0) && c->seen < victim->seen)) {
            victim = c;
            v = i;
        }
    }
    if (s->keys[v].family != 0)
        atomic_fetch_add_explicit(&shared->evictions, 1, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&shared->addresses, 1, memory_order_relaxed);
    memset(victim, 0, sizeof *victim);
    s->keys[v] = *key;
    victim->tokens = burst;
    victim->refilled = now;
    return victim;
}

struct limit_verdict limit_take(const struct limit_key *key, double rate, unsigned burst, int64_t now)
{
    struct limit_set *s = set_of(key);
    struct limit_verdict v = { true, 0, false, 0 };

    lock(s);
    struct limit_entry *e = find_or_make(s, key, burst, now);
    /* Another worker's clock reading may be a little ahead of ours. */
    if (now > e->refilled) {
        e->tokens += rate * (double)(now - e->refilled) / 1e9;
        e->refilled = now;
    }
    if (e->tokens > burst)
        e->tokens = burst;
    e->seen = now;
    if (e->tokens >= 1) {
        e->tokens -= 1;
    } else {
        v.allowed = false;
        e->refused++;
        if (e->logged == 0 || now - e->logged >= 1000000000) {
            v.log = true;
            v.refused = e->refused;
            e->refused = 0;
            e->logged = now;
        }
        double wait = ceil((1 - e->tokens) / rate);
        v.retry_after = wait < 1 ? 1 : wait > 1e9 ? 1000000000u : (unsigned)wait;
    }
    unlock(s);
    return v;
}

unsigned limit_conn_open(const struct limit_key *key, int64_t now)
{
    struct limit_set *s = set_of(key);
    int column = stats_row_index();
    unsigned open;

    lock(s);
    struct limit_entry *e = find_or_make(s, key, 0, now);
    e->seen = now;
    if (e->connections[column] < UINT16_MAX) {
        e->connections[column]++;
        e->open++;
    }
    open = e->open;
    unlock(s);
    return open;
}

void limit_conn_close(const struct limit_key *key)
{
    struct limit_set *s = set_of(key);
    int column = stats_row_index();

    lock(s);
    struct limit_entry *e = find(s, key);
    /* Evicted while open (its whole set held open connections): the
     * count went with it. */
    if (e != NULL && e->connections[column] > 0) {
        e->connections[column]--;
        e->open--;
    }
    unlock(s);
}

void limit_clear_column(int row)
{
    if (shared == NULL)
        return;
    for (size_t i = 0; i < LIMIT_SETS; i++) {
        struct limit_set *s = &shared->sets[i];
        int dead = row + 1;

        /* Its half-done update stays: a few tokens more or less. */
        atomic_compare_exchange_strong(&s->lock, &dead, 0);
        lock(s);
        for (int j = 0; j < LIMIT_WAYS; j++) {
            struct limit_entry *e = &s->entries[j];

            e->open -= e->connections[row];
            e->connections[row] = 0;
        }
        unlock(s);
    }
}
