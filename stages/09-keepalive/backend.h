/* backend.h -- the servers we forward to, and choosing one per client. */
#ifndef RSP_BACKEND_H
#define RSP_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A pool holds at most this many backends: each client remembers which it
 * has tried in a 64-bit mask. */
#define POOL_MAX_BACKENDS 64

struct health_check;
struct upstream;

struct backend {
    char *name;                 /* as configured, e.g. "127.0.0.1:8001" */
    struct addrinfo *addresses; /* resolved once, when the config is loaded */
    unsigned active;            /* connections serving a request, for least_conn */
    struct upstream *idle;      /* connections waiting for a request (upstream.c) */
    unsigned idle_count;
    struct upstream *finishing; /* detached connections writing out their queue (upstream.c) */
    bool down;                  /* a connect failed recently (passive health) */
    double retry_at;            /* while down: when to try it again (monotonic s) */
    bool failing;               /* active health checks say it is down */
    struct health_check *check; /* its active check, or NULL (health.c) */
};

/* Active health checks of a pool's backends (health.c). */
struct health_settings {
    bool enabled;
    char path[256];             /* GET this, e.g. "/healthz" */
    double interval;            /* seconds from one check's start to the next */
    double timeout;             /* seconds a check may take */
    unsigned rise;              /* passes in a row that bring a backend back */
    unsigned fall;              /* failures in a row that mark it down */
};

enum balance { BALANCE_ROUND_ROBIN, BALANCE_LEAST_CONN };

struct pool {
    struct backend *backends;
    size_t count;
    enum balance balance;
    double down_time;           /* seconds a failed backend is skipped */
    size_t next;                /* where the next search starts: rotation */
    bool unreachable;           /* we answered 502: nothing could be reached */
    struct health_settings health;
};

/* A pool with a name, from the config's `pools`. */
struct named_pool {
    char *name;
    struct pool pool;
};

/* Chooses a backend not in `tried` (bit i set: backends[i] was tried).
 * Backends that are up come first; only when none of those is left are the
 * ones marked down by passive health tried too, so that one coming back is
 * noticed. A backend that active checks mark down is never chosen. Returns
 * NULL when every backend has been tried or is failing its checks. */
struct backend *backend_pick(struct pool *pool, uint64_t tried);

/* True if active checks mark every backend of the pool down: requests get
 * a 503 at once. */
bool pool_all_failing(const struct pool *pool);

/* The bit of b in a `tried` mask. */
uint64_t backend_bit(const struct pool *pool, const struct backend *b);

/* Records a failed connect: b is skipped for pool->down_time seconds. Logs
 * only when b goes from up to down. */
void backend_failed(struct pool *pool, struct backend *b, int error);

/* Records a successful connect. Logs when b was down. */
void backend_succeeded(struct pool *pool, struct backend *b);

/* Records that no backend could be reached for a client (logged once, until
 * a backend answers again). */
void pool_unreachable(struct pool *pool);

/* Frees the backends and their addresses. */
void pool_free(struct pool *pool);

#endif
