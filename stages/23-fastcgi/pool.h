/* pool.h -- the servers we forward to, and choosing one per client: a
 * pool's backends, balancing between them and passive health. The
 * registry that owns the backends (obtain, put) is backend.h. */
#ifndef RSP_POOL_H
#define RSP_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "access_rules.h"
#include "site_output.h"

/* A pool holds at most this many backends: each client remembers which it
 * has tried in a 64-bit mask. */
#define POOL_MAX_BACKENDS 64

struct backend_protocol;
struct health_check;
struct fastcgi_pool;
struct stats_backend;
struct upstream;

/* A backend is shared: every pool of every config generation that lists
 * the same "HOST:PORT" resolving to the same addresses holds the same
 * struct backend, so that what rsp learned about it (health, connections
 * in use, the idle pool) survives a reload. The registry (backend.h)
 * owns them; a backend lives while some pool holds it (refs). */
struct backend {
    char *name;                 /* as configured, e.g. "127.0.0.1:8001" */
    struct addrinfo *addresses; /* resolved when a config naming it was loaded */
    unsigned refs;              /* the pools holding it */
    struct backend *registry_next;
    unsigned active;            /* connections serving a request, for least_conn */
    struct upstream *idle;      /* connections waiting for a request (upstream.c) */
    unsigned idle_count;
    /* The most connections in use at once in this window of
     * backend_idle_timeout seconds, and in the one before: how many the
     * load needed lately (upstream.c keeps that many open). */
    unsigned peak, peak_before;
    double window_start;
    struct upstream *finishing; /* detached connections writing out their queue (upstream.c) */
    struct stats_backend *stats; /* its counters and its health, shared by every process
                                    of rsp (stats.h): down, retry_at, failing */
    struct health_check *check; /* its active check, or NULL (health.c) */
    const struct health_settings *check_wanted; /* scratch for generation_install */
    double stderr_logged;       /* a FastCGI script's STDERR was last logged (backend_fastcgi.c) */
};

/* Active health checks of a pool's backends (health.c). */
struct health_settings {
    bool enabled;
    char path[256];             /* GET this, e.g. "/healthz" */
    double interval;            /* seconds from one check's start to the next */
    double timeout;             /* seconds a check may take */
    unsigned rise;              /* passes in a row that bring a backend back */
    unsigned fall;              /* failures in a row that mark it down */
    bool fastcgi;               /* the pool speaks FastCGI: the check asks for path in
                                   records and reads the CGI head's Status (health.c) */
};

enum balance { BALANCE_ROUND_ROBIN, BALANCE_LEAST_CONN, BALANCE_HASH };

/* What balance = "hash" hashes (hash_key): the client's address, the
 * path, a header's value or a cookie's. */
enum hash_key { HASH_KEY_CLIENT, HASH_KEY_PATH, HASH_KEY_HEADER, HASH_KEY_COOKIE };

/* The longest NAME of hash_key = "header:NAME" or "cookie:NAME". */
#define HASH_KEY_NAME_MAX 100

struct pool {
    struct backend **backends;  /* held references */
    size_t count;
    enum balance balance;
    enum hash_key hash_key;     /* with BALANCE_HASH */
    char hash_text[HASH_KEY_NAME_MAX + 8]; /* hash_key as configured, e.g. "header:X-User" */
    char hash_name[HASH_KEY_NAME_MAX + 1]; /* its NAME: a header's in lower case, a cookie's */
    const struct backend_protocol *protocol; /* what its backends speak (backend_protocol.h) */
    double down_time;           /* seconds a failed backend is skipped */
    size_t next;                /* where the next search starts: rotation */
    bool unreachable;           /* we answered 502: nothing could be reached */
    struct health_settings health;
    char *root;                 /* a pool of files (chapter 21): its directory; NULL: of backends */
    int root_fd;                /* root, open (O_PATH); -1: a pool of backends */
    struct site_output output;  /* compress, headers, error_pages: the pool's own over the top level's */
    struct access_settings access; /* allow, deny, basic_auth, max_body_size (stage 22) */
    struct fastcgi_pool *fastcgi; /* a pool of files whose scripts run on FastCGI backends
                                     (fastcgi_script.h, config_fastcgi.c); NULL: none */
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
 * NULL when every backend has been tried or is failing its checks. With
 * BALANCE_HASH it is the backend whose score for `key` (pool_hash_of the
 * request's hash_key) is the highest among those, so that a key keeps its
 * backend while that one is up, and a retry goes to the next highest
 * score; other balances ignore `key`. */
struct backend *backend_pick_keyed(struct pool *pool, uint64_t tried, uint64_t key);

/* The hash of a key's bytes (FNV-1a with a fixed seed, then mixed): the
 * same in every process and every generation. */
uint64_t pool_hash_of(const char *data, size_t length);

/* A backend's score for a key: rendezvous (highest random weight) hashing
 * mixes the key's hash with the backend's name as configured. */
uint64_t pool_hash_score(uint64_t key, const char *name);

/* The text of a balance rule: "round_robin", "least_conn" or "hash". */
const char *pool_balance_name(const struct pool *pool);

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

/* True if passive health has b down (a connect failed recently). */
bool backend_down(const struct backend *b);

/* True if active health checks have b down. */
bool backend_failing(const struct backend *b);

/* Active checks say b is down (true) or up (false). Returns true if that
 * changed b's state. */
bool backend_set_failing(struct backend *b, bool failing);

/* A request of this process goes to b (delta 1), or is over (-1): for
 * least_conn here, and for the status page (every process's together). */
void backend_count_active(struct backend *b, int delta);

/* Records that no backend could be reached for a client (logged once, until
 * a backend answers again). */
void pool_unreachable(struct pool *pool);

#endif
