/* stats.c -- the shared counters: mapping them, and finding a slot. */
#include "stats.h"

#include "log.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

const double stats_bucket_bounds[STATS_BUCKETS - 1] = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
};

const char *const stats_refused_names[REFUSED_REASONS] = {
    "limit_req", "limit_conn", "deny", "auth", "body_size", "proxy_protocol",
};

static struct stats *shared;
static int row;

/* Where names count once the tables are full: private, never shown. */
static struct stats_site overflow_site;
static struct stats_backend overflow_backend;

int stats_init(void)
{
    void *p = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    if (p == MAP_FAILED) {
        log_errno("mmap (%zu bytes of shared counters)", sizeof *shared);
        return -1;
    }
    shared = p; /* the kernel hands out zeroed pages */
    row = 0;
    return 0;
}

void stats_close(void)
{
    if (shared != NULL && munmap(shared, sizeof *shared) == -1)
        log_errno("munmap");
    shared = NULL;
}

struct stats *stats_shared(void)
{
    return shared;
}

struct stats_row *stats_row(void)
{
    return &shared->rows[row];
}

int stats_row_index(void)
{
    return row;
}

void stats_use_row(int index)
{
    row = index;
}

/* Claims the slot at *state if it is free: 0 -> 1 (ours: fill it in) ->
 * 2. Two processes may claim two slots for one name at the same moment;
 * both then count, and stats_site finds the first. Rare, and harmless. */
static bool claim(_Atomic int *state)
{
    int expected = 0;

    return atomic_compare_exchange_strong(state, &expected, 1);
}

static bool in_use(_Atomic int *state)
{
    return atomic_load_explicit(state, memory_order_acquire) == 2;
}

static void publish(_Atomic int *state)
{
    atomic_store_explicit(state, 2, memory_order_release);
}

struct stats_site *stats_site(const char *name)
{
    static bool full_logged;

    if (shared == NULL && stats_init() == -1)
        return &overflow_site;
    for (size_t i = 0; i < STATS_SITES; i++) {
        struct stats_site *s = &shared->sites[i];

        if (in_use(&s->state) && strcmp(s->name, name) == 0)
            return s;
    }
    for (size_t i = 0; i < STATS_SITES; i++) {
        struct stats_site *s = &shared->sites[i];

        if (claim(&s->state)) {
            snprintf(s->name, sizeof s->name, "%s", name);
            publish(&s->state);
            return s;
        }
    }
    if (!full_logged) {
        log_msg("more than %d site names since start: site %s and later ones are not counted",
                STATS_SITES, name);
        full_logged = true;
    }
    return &overflow_site;
}

struct stats_backend *stats_backend(const char *name, uint64_t addresses)
{
    static bool full_logged;

    if (shared == NULL && stats_init() == -1)
        return &overflow_backend;
    for (size_t i = 0; i < STATS_BACKENDS; i++) {
        struct stats_backend *b = &shared->backends[i];

        if (in_use(&b->state) && b->addresses == addresses && strcmp(b->name, name) == 0)
            return b;
    }
    for (size_t i = 0; i < STATS_BACKENDS; i++) {
        struct stats_backend *b = &shared->backends[i];

        if (claim(&b->state)) {
            snprintf(b->name, sizeof b->name, "%s", name);
            b->addresses = addresses;
            publish(&b->state);
            return b;
        }
    }
    if (!full_logged) {
        log_msg("more than %d backends since start: backend %s and later ones are not counted",
                STATS_BACKENDS, name);
        full_logged = true;
    }
    return &overflow_backend;
}

void stats_count_request(struct stats_site *site, int status)
{
    if (status < STATS_FIRST_CODE || status >= STATS_FIRST_CODE + STATS_CODES)
        return; /* not a status we could have sent */
    stats_add(&site->codes[status - STATS_FIRST_CODE], 1);
}

void stats_count_protocol(bool http2)
{
    struct stats_row *r = stats_row();

    stats_add_own(http2 ? &r->requests_http2 : &r->requests_http1, 1);
}

void stats_observe(struct stats_histogram *h, double seconds)
{
    size_t i = 0;

    while (i < STATS_BUCKETS - 1 && seconds > stats_bucket_bounds[i])
        i++;
    /* Two adds: a process killed between them leaves one duration out
     * of the sum, never a count twice. */
    stats_add(&h->buckets[i], 1);
    stats_add(&h->sum_us, (uint64_t)(seconds * 1e6 + 0.5));
}

void stats_count_timeout(enum stats_timeout kind)
{
    stats_add(&shared->timeouts[kind], 1);
}

void stats_count_refused(struct stats_site *site, enum stats_refused reason)
{
    stats_add(&shared->refused[reason], 1);
    if (site != NULL)
        stats_add(&site->refused[reason], 1);
}

int64_t stats_backend_in_flight(const struct stats_backend *b)
{
    int64_t sum = 0;

    for (size_t i = 0; i < STATS_ROWS; i++)
        sum += atomic_load_explicit(&b->active[i], memory_order_relaxed);
    return sum;
}

int64_t stats_backend_idle(const struct stats_backend *b)
{
    int64_t sum = 0;

    for (size_t i = 0; i < STATS_ROWS; i++)
        sum += atomic_load_explicit(&b->idle[i], memory_order_relaxed);
    return sum;
}

void stats_clear_row(int index)
{
    struct stats_row *r = &shared->rows[index];

    atomic_store(&r->connections, 0);
    atomic_store(&r->in_flight, 0);
    atomic_store(&r->pipes, 0); /* a dead worker's pipes died with it */
    atomic_store(&r->temp_files, 0); /* and its temporary files */
    atomic_store(&r->h2_connections, 0); /* and its clients' connections, streams and all */
    atomic_store(&r->h2_streams, 0);
    atomic_store(&r->encoders, 0); /* and its encoders */
    atomic_store(&r->encoder_memory, 0);
    for (size_t i = 0; i < STATS_BACKENDS; i++)
        if (in_use(&shared->backends[i].state))
        {
            atomic_store(&shared->backends[i].active[index], 0);
            atomic_store(&shared->backends[i].idle[index], 0);
        }
}
